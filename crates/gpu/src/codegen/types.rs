//! `DevType`: how an Arrow type is laid out in device memory and spelt in C.

use arrow::datatypes::DataType;

use super::Unsupported;

/// Device representation of a column or expression value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DevType {
    /// Arrow Boolean: bit-packed in columns, `bool` in registers.
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    /// Decimal128 with precision <= 18, staged as a scaled `int64_t`.
    Dec64 {
        precision: u8,
        scale: i8,
    },
    /// Date32: days since the epoch as `int32_t`.
    Date32,
    /// Dictionary keys of a string dictionary column (the codes).
    DictCode {
        key: DictKey,
    },
}

/// Key width of a dictionary column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DictKey {
    I8,
    I16,
    I32,
    U8,
    U16,
    U32,
}

impl DevType {
    /// The device type of an Arrow type, or why there is none.
    pub fn of(dt: &DataType) -> Result<DevType, Unsupported> {
        Ok(match dt {
            DataType::Boolean => DevType::Bool,
            DataType::Int8 => DevType::I8,
            DataType::Int16 => DevType::I16,
            DataType::Int32 => DevType::I32,
            DataType::Int64 => DevType::I64,
            DataType::UInt8 => DevType::U8,
            DataType::UInt16 => DevType::U16,
            DataType::UInt32 => DevType::U32,
            DataType::UInt64 => DevType::U64,
            DataType::Float32 => DevType::F32,
            DataType::Float64 => DevType::F64,
            DataType::Decimal128(p, s) if *p <= 18 => DevType::Dec64 {
                precision: *p,
                scale: *s,
            },
            DataType::Decimal128(p, _) => {
                return Err(Unsupported::ty(format!(
                    "Decimal128 with precision {p} > 18 does not fit int64"
                )))
            }
            DataType::Date32 => DevType::Date32,
            DataType::Dictionary(k, v)
                if matches!(
                    v.as_ref(),
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                ) =>
            {
                let key = match k.as_ref() {
                    DataType::Int8 => DictKey::I8,
                    DataType::Int16 => DictKey::I16,
                    DataType::Int32 => DictKey::I32,
                    DataType::UInt8 => DictKey::U8,
                    DataType::UInt16 => DictKey::U16,
                    DataType::UInt32 => DictKey::U32,
                    other => return Err(Unsupported::ty(format!("dictionary key type {other}"))),
                };
                DevType::DictCode { key }
            }
            other => return Err(Unsupported::ty(format!("type {other}"))),
        })
    }

    /// The C type of a value in registers and in (non-Boolean) columns.
    pub fn c_type(self) -> &'static str {
        match self {
            DevType::Bool => "bool",
            DevType::I8 => "int8_t",
            DevType::I16 => "int16_t",
            DevType::I32 | DevType::Date32 => "int32_t",
            DevType::I64 | DevType::Dec64 { .. } => "int64_t",
            DevType::U8 => "uint8_t",
            DevType::U16 => "uint16_t",
            DevType::U32 => "uint32_t",
            DevType::U64 => "uint64_t",
            DevType::F32 => "float",
            DevType::F64 => "double",
            DevType::DictCode { key } => match key {
                DictKey::I8 => "int8_t",
                DictKey::I16 => "int16_t",
                DictKey::I32 => "int32_t",
                DictKey::U8 => "uint8_t",
                DictKey::U16 => "uint16_t",
                DictKey::U32 => "uint32_t",
            },
        }
    }

    /// Bytes per value in a device column (Boolean columns are bit-packed).
    pub fn width(self) -> usize {
        match self {
            DevType::Bool => 0,
            DevType::I8 | DevType::U8 => 1,
            DevType::I16 | DevType::U16 => 2,
            DevType::I32 | DevType::U32 | DevType::F32 | DevType::Date32 => 4,
            DevType::I64 | DevType::U64 | DevType::F64 | DevType::Dec64 { .. } => 8,
            DevType::DictCode { key } => match key {
                DictKey::I8 | DictKey::U8 => 1,
                DictKey::I16 | DictKey::U16 => 2,
                DictKey::I32 | DictKey::U32 => 4,
            },
        }
    }

    /// Integer types (including dates, decimals and codes) as opposed to floats.
    pub fn is_integer(self) -> bool {
        !matches!(self, DevType::F32 | DevType::F64 | DevType::Bool)
    }

    /// Signed or unsigned machine integers, not decimals, dates or codes.
    pub fn is_plain_int(self) -> bool {
        matches!(
            self,
            DevType::I8
                | DevType::I16
                | DevType::I32
                | DevType::I64
                | DevType::U8
                | DevType::U16
                | DevType::U32
                | DevType::U64
        )
    }

    /// Floats.
    pub fn is_float(self) -> bool {
        matches!(self, DevType::F32 | DevType::F64)
    }

    /// Unsigned machine integers.
    pub fn is_unsigned(self) -> bool {
        matches!(
            self,
            DevType::U8 | DevType::U16 | DevType::U32 | DevType::U64
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_supported_types() {
        assert_eq!(DevType::of(&DataType::Int32), Ok(DevType::I32));
        assert_eq!(
            DevType::of(&DataType::Decimal128(15, 2)),
            Ok(DevType::Dec64 {
                precision: 15,
                scale: 2
            })
        );
        assert!(DevType::of(&DataType::Decimal128(38, 2)).is_err());
        assert!(DevType::of(&DataType::Utf8).is_err());
        let d = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        assert_eq!(DevType::of(&d).map(|t| t.c_type()), Ok("int32_t"));
    }
}
