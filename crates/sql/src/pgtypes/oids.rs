//! Type identity: PostgreSQL type OIDs, `typlen`, the OID an Arrow type or
//! a declared column is announced as, and SQL type names -> [`ColumnType`].
//!
//! Before touching: every Arrow type must map to exactly one OID, and a
//! declared type (field metadata [`DECLARED_TYPE_KEY`]) wins over the Arrow
//! type; an OID announced here must have an encoder in `encode.rs` for
//! both formats, or be announced as `text`.

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use super::*;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, StringArray, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use eddy_common::ColumnType;

use crate::error::{Result, SqlError};

/// The OID of the array type whose elements have type `elem`.
pub fn array_oid_of(elem: u32) -> Option<u32> {
    Some(match elem {
        oid::BOOL => oid::BOOL_ARRAY,
        oid::BYTEA => oid::BYTEA_ARRAY,
        oid::INT2 => oid::INT2_ARRAY,
        oid::INT4 => oid::INT4_ARRAY,
        oid::INT8 => oid::INT8_ARRAY,
        oid::TEXT => oid::TEXT_ARRAY,
        oid::BPCHAR => oid::BPCHAR_ARRAY,
        oid::VARCHAR => oid::VARCHAR_ARRAY,
        oid::FLOAT4 => oid::FLOAT4_ARRAY,
        oid::FLOAT8 => oid::FLOAT8_ARRAY,
        oid::NUMERIC => oid::NUMERIC_ARRAY,
        oid::DATE => oid::DATE_ARRAY,
        oid::TIME => oid::TIME_ARRAY,
        oid::TIMESTAMP => oid::TIMESTAMP_ARRAY,
        oid::TIMESTAMPTZ => oid::TIMESTAMPTZ_ARRAY,
        oid::INTERVAL => oid::INTERVAL_ARRAY,
        oid::UUID => oid::UUID_ARRAY,
        oid::JSON => oid::JSON_ARRAY,
        oid::JSONB => oid::JSONB_ARRAY,
        _ => return None,
    })
}

/// The element type of a list Arrow type.
pub(super) fn list_element(dt: &DataType) -> Option<&DataType> {
    match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            Some(f.data_type())
        }
        _ => None,
    }
}

/// The PostgreSQL type OID announced for an Arrow column.
pub fn pg_oid(dt: &DataType) -> u32 {
    if list_element(dt).is_some() {
        // a list of lists is one multi-dimensional array of its innermost
        // type (`crate::array_dimensions`); a type with no array type: text
        let leaf = crate::array_dimensions::leaf_type(dt);
        return array_oid_of(pg_oid(leaf)).unwrap_or(oid::TEXT);
    }
    match dt {
        DataType::Boolean => oid::BOOL,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => oid::INT2,
        DataType::Int32 | DataType::UInt16 => oid::INT4,
        // Eddy's oid type (the catalogs' oid columns, `x::oid`)
        DataType::UInt32 => oid::OID,
        DataType::Int64 | DataType::UInt64 => oid::INT8,
        DataType::Float16 | DataType::Float32 => oid::FLOAT4,
        DataType::Float64 => oid::FLOAT8,
        DataType::Decimal128(..) => oid::NUMERIC,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => oid::TEXT,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => oid::BYTEA,
        DataType::Date32 => oid::DATE,
        DataType::Timestamp(_, None) => oid::TIMESTAMP,
        DataType::Timestamp(_, Some(_)) => oid::TIMESTAMPTZ,
        DataType::FixedSizeBinary(16) => oid::UUID,
        DataType::Interval(_) => oid::INTERVAL,
        DataType::Time64(_) | DataType::Time32(_) => oid::TIME,
        DataType::Null => oid::TEXT,
        _ => oid::TEXT,
    }
}

/// Field metadata key that marks a result column holding a `char(n)` or
/// `varchar(n)` table column: its value is `char(n)` or `varchar(n)`.
pub const DECLARED_TYPE_KEY: &str = "eddy.declared_type";

/// The metadata that [`EddyTable`](crate::provider::EddyTable) puts on the
/// field of a column of type `ty` (empty for types Arrow already says).
pub fn declared_type_metadata(ty: ColumnType) -> std::collections::HashMap<String, String> {
    let mut m = std::collections::HashMap::new();
    match ty {
        ColumnType::Char(n) => {
            m.insert(DECLARED_TYPE_KEY.to_string(), format!("char({n})"));
        }
        ColumnType::Varchar(n) => {
            m.insert(DECLARED_TYPE_KEY.to_string(), format!("varchar({n})"));
        }
        ColumnType::Json | ColumnType::Jsonb => {
            m.insert(DECLARED_TYPE_KEY.to_string(), ty.pg_name());
        }
        ColumnType::Array(eddy_common::ArrayElem::Varchar(n)) => {
            m.insert(DECLARED_TYPE_KEY.to_string(), format!("varchar({n})[]"));
        }
        _ => {}
    }
    m
}

/// The `char(n)` / `varchar(n)` a result field carries, if any.
pub fn declared_type(field: &datafusion::arrow::datatypes::Field) -> Option<ColumnType> {
    let d = field.metadata().get(DECLARED_TYPE_KEY)?;
    if let Some(inner) = d.strip_suffix("[]") {
        let (name, rest) = inner.split_once('(')?;
        let n: u32 = rest.strip_suffix(')')?.parse().ok()?;
        return (name == "varchar")
            .then_some(ColumnType::Array(eddy_common::ArrayElem::Varchar(n)));
    }
    match d.as_str() {
        "json" => return Some(ColumnType::Json),
        "jsonb" => return Some(ColumnType::Jsonb),
        _ => {}
    }
    let (name, rest) = d.split_once('(')?;
    let n: u32 = rest.strip_suffix(')')?.parse().ok()?;
    match name {
        "char" => Some(ColumnType::Char(n)),
        "varchar" => Some(ColumnType::Varchar(n)),
        _ => None,
    }
}

/// Whether `field` is a list of smallints declared `int2vector`
/// (`pg_index.indkey`): announced as int2vector, whose binary form is the
/// list's own (a one-dimensional int2 array) and whose text is its numbers
/// separated by spaces (`crate::int2vector`).
pub fn is_int2vector_list(field: &datafusion::arrow::datatypes::Field) -> bool {
    matches!(
        field.data_type(),
        datafusion::arrow::datatypes::DataType::List(_)
    ) && field
        .metadata()
        .get(DECLARED_TYPE_KEY)
        .is_some_and(|t| t == crate::int2vector::INT2VECTOR)
}

/// The PostgreSQL type OID announced for a result field: `bpchar` and
/// `varchar` for columns declared so, else by its Arrow type.
pub fn field_oid(field: &datafusion::arrow::datatypes::Field) -> u32 {
    if is_int2vector_list(field) {
        return oid::INT2VECTOR;
    }
    match declared_type(field) {
        Some(ColumnType::Char(_)) => oid::BPCHAR,
        Some(ColumnType::Varchar(_)) => oid::VARCHAR,
        Some(ColumnType::Json) => oid::JSON,
        Some(ColumnType::Jsonb) => oid::JSONB,
        Some(ColumnType::Array(_)) => oid::VARCHAR_ARRAY,
        _ => pg_oid(field.data_type()),
    }
}

/// A result column as PostgreSQL presents it: `char(n)` values padded
/// with spaces to n characters (they are stored without them); every other
/// column unchanged.
pub fn present_column(
    field: &datafusion::arrow::datatypes::Field,
    array: &ArrayRef,
) -> Result<ArrayRef> {
    let Some(ColumnType::Char(n)) = declared_type(field) else {
        return Ok(Arc::clone(array));
    };
    let Some(strings) = array.as_any().downcast_ref::<StringArray>() else {
        return Ok(Arc::clone(array));
    };
    let mut out = StringBuilder::with_capacity(strings.len(), strings.value_data().len());
    let mut buf = String::new();
    for v in strings.iter() {
        match v {
            Some(v) => {
                buf.clear();
                pad_char(v, n, &mut buf);
                out.append_value(&buf);
            }
            None => out.append_null(),
        }
    }
    Ok(Arc::new(out.finish()))
}

/// [`present_column`] over every column of a batch.
pub fn present_batch(batch: &RecordBatch) -> Result<RecordBatch> {
    let schema = batch.schema();
    if !schema.fields().iter().any(|f| declared_type(f).is_some()) {
        return Ok(batch.clone());
    }
    let columns = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| present_column(f, c))
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// Size in bytes PostgreSQL reports for a type (`typlen`), -1 for varlena.
pub fn pg_typlen(oid: u32) -> i16 {
    match oid {
        oid::BOOL | oid::CHAR => 1,
        oid::INT2 => 2,
        oid::INT4 | oid::OID | oid::FLOAT4 | oid::DATE => 4,
        oid::INT8 | oid::FLOAT8 | oid::TIMESTAMP | oid::TIMESTAMPTZ | oid::TIME => 8,
        oid::NAME => 64,
        oid::UUID | oid::INTERVAL => 16,
        _ => -1,
    }
}

/// The column type used for a parameter or value of PostgreSQL type `oid`.
pub fn column_type_for_oid(o: u32) -> Option<ColumnType> {
    Some(match o {
        oid::BOOL => ColumnType::Boolean,
        oid::INT2 => ColumnType::SmallInt,
        oid::INT4 => ColumnType::Int,
        // an oid's range is u32's: read as a bigint, cast where it is used
        oid::INT8 | oid::OID => ColumnType::BigInt,
        oid::FLOAT4 => ColumnType::Real,
        oid::FLOAT8 => ColumnType::Double,
        oid::NUMERIC => ColumnType::Decimal(38, 10),
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME | oid::CHAR => ColumnType::Text,
        oid::DATE => ColumnType::Date,
        oid::TIMESTAMP => ColumnType::Timestamp,
        oid::TIMESTAMPTZ => ColumnType::TimestampTz,
        oid::BYTEA => ColumnType::Bytea,
        oid::UUID => ColumnType::Uuid,
        oid::JSON => ColumnType::Json,
        oid::JSONB => ColumnType::Jsonb,
        oid::INTERVAL => ColumnType::Interval,
        oid::TIME => ColumnType::Time,
        _ => return None,
    })
}

/// The OID for a stored column type.
pub fn oid_for_column_type(t: ColumnType) -> u32 {
    match t {
        ColumnType::Char(_) => oid::BPCHAR,
        ColumnType::Varchar(_) => oid::VARCHAR,
        ColumnType::Json => oid::JSON,
        ColumnType::Jsonb => oid::JSONB,
        ColumnType::Array(eddy_common::ArrayElem::Varchar(_)) => oid::VARCHAR_ARRAY,
        other => pg_oid(&other.to_arrow()),
    }
}

/// Parse a SQL type name (as written in CREATE TABLE or a cast) into a column type.
pub fn column_type_from_sql(dt: &datafusion::sql::sqlparser::ast::DataType) -> Result<ColumnType> {
    use datafusion::sql::sqlparser::ast::{
        ArrayElemTypeDef, DataType as D, ExactNumberInfo, TimezoneInfo,
    };
    Ok(match dt {
        D::Array(def) => {
            let inner = match def {
                ArrayElemTypeDef::SquareBracket(inner, _)
                | ArrayElemTypeDef::AngleBracket(inner)
                | ArrayElemTypeDef::Parenthesis(inner) => inner,
                ArrayElemTypeDef::None => {
                    return Err(SqlError::FeatureNotSupported(
                        "an array type needs its element type".into(),
                    ))
                }
            };
            // `int[][]` is PostgreSQL's int[] too (it does not enforce
            // dimensions); values of more than one dimension are refused
            let mut inner = inner.as_ref();
            while let D::Array(
                ArrayElemTypeDef::SquareBracket(i, _)
                | ArrayElemTypeDef::AngleBracket(i)
                | ArrayElemTypeDef::Parenthesis(i),
            ) = inner
            {
                inner = i.as_ref();
            }
            array_of(column_type_from_sql(inner)?)?
        }
        D::Boolean | D::Bool => ColumnType::Boolean,
        D::SmallInt(_) | D::Int2(_) | D::TinyInt(_) => ColumnType::SmallInt,
        D::Int(_) | D::Integer(_) | D::Int4(_) | D::MediumInt(_) => ColumnType::Int,
        D::BigInt(_) | D::Int8(_) | D::Int64 => ColumnType::BigInt,
        D::Real | D::Float4 | D::Float32 => ColumnType::Real,
        D::Double(_) | D::DoublePrecision | D::Float8 | D::Float64 => ColumnType::Double,
        D::Float(info) => match info {
            ExactNumberInfo::Precision(p) | ExactNumberInfo::PrecisionAndScale(p, _)
                if *p <= 24 =>
            {
                ColumnType::Real
            }
            _ => ColumnType::Double,
        },
        D::Numeric(info) | D::Decimal(info) | D::Dec(info) => match info {
            // kept exactly or refused (docs/decisions/0003)
            ExactNumberInfo::None => ColumnType::Numeric,
            ExactNumberInfo::Precision(p) => ColumnType::Decimal(clamp_precision(*p)?, 0),
            ExactNumberInfo::PrecisionAndScale(p, s) => {
                let p = clamp_precision(*p)?;
                let s = i8::try_from(*s)
                    .ok()
                    .filter(|s| (*s as i64) <= p as i64)
                    .ok_or_else(|| {
                        SqlError::InvalidDefinition(format!(
                            "NUMERIC scale {s} must be between 0 and precision {p}"
                        ))
                    })?;
                ColumnType::Decimal(p, s)
            }
        },
        D::Text | D::String(_) => ColumnType::Text,
        D::Varchar(len) | D::CharVarying(len) | D::CharacterVarying(len) | D::Nvarchar(len) => {
            match len {
                None => ColumnType::Text,
                Some(l) => ColumnType::Varchar(char_length(l, "varchar")?),
            }
        }
        D::Char(len) | D::Character(len) => match len {
            None => ColumnType::Char(1),
            Some(l) => ColumnType::Char(char_length(l, "char")?),
        },
        D::Date => ColumnType::Date,
        D::Timestamp(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => ColumnType::TimestampTz,
        D::Timestamp(..) | D::Datetime(_) | D::TimestampNtz(_) => ColumnType::Timestamp,
        D::Bytea | D::Blob(_) | D::Varbinary(_) | D::Binary(_) => ColumnType::Bytea,
        D::Uuid => ColumnType::Uuid,
        D::JSON => ColumnType::Json,
        D::JSONB => ColumnType::Jsonb,
        D::Interval { fields: None, .. } => ColumnType::Interval,
        D::Time(_, TimezoneInfo::None | TimezoneInfo::WithoutTimeZone) => ColumnType::Time,
        D::Time(..) => {
            return Err(SqlError::FeatureNotSupported(
                "type time with time zone is not supported".into(),
            ))
        }
        D::Interval { .. } => {
            return Err(SqlError::FeatureNotSupported(
                "interval with a field restriction is not supported".into(),
            ))
        }
        D::Custom(name, _) => {
            let n = name.to_string().to_ascii_lowercase();
            match n.trim_matches('"') {
                "serial" | "int4" => ColumnType::Int,
                "bigserial" | "serial8" => ColumnType::BigInt,
                "smallserial" => ColumnType::SmallInt,
                "timestamptz" => ColumnType::TimestampTz,
                "uuid" => ColumnType::Uuid,
                "json" => ColumnType::Json,
                "jsonb" => ColumnType::Jsonb,
                "interval" => ColumnType::Interval,
                "name" | "citext" | "bpchar" => ColumnType::Text,
                "_int2" => array_of(ColumnType::SmallInt)?,
                "_int4" => array_of(ColumnType::Int)?,
                "_int8" => array_of(ColumnType::BigInt)?,
                "_float4" => array_of(ColumnType::Real)?,
                "_float8" => array_of(ColumnType::Double)?,
                "_numeric" => array_of(ColumnType::Decimal(38, 10))?,
                "_text" => array_of(ColumnType::Text)?,
                "_varchar" => array_of(ColumnType::Text)?,
                "_bool" => array_of(ColumnType::Boolean)?,
                "_date" => array_of(ColumnType::Date)?,
                "_timestamp" => array_of(ColumnType::Timestamp)?,
                "_timestamptz" => array_of(ColumnType::TimestampTz)?,
                "_uuid" => array_of(ColumnType::Uuid)?,
                other => {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "type \"{other}\" is not supported"
                    )))
                }
            }
        }
        other => {
            return Err(SqlError::FeatureNotSupported(format!(
                "type {other} is not supported"
            )))
        }
    })
}

/// The array type of element type `elem`; 0A000 for element types Eddy
/// has no arrays of.
pub fn array_of(elem: ColumnType) -> Result<ColumnType> {
    // `numeric[]`: elements of numeric(38,10), rounded as before (an
    // element has no exactness check yet: docs/decisions/0003)
    let elem = match elem {
        ColumnType::Numeric => elem.storage(),
        other => other,
    };
    eddy_common::ArrayElem::of(elem)
        .map(ColumnType::Array)
        .ok_or_else(|| {
            SqlError::FeatureNotSupported(format!("arrays of type {elem} are not supported"))
        })
}

/// PostgreSQL's `MaxAttrSize` in characters: the longest `varchar(n)`.
pub(super) const MAX_CHAR_LENGTH: u64 = 10_485_760;

/// The n of `varchar(n)` / `char(n)`: 1 to 10485760, as in PostgreSQL.
pub(super) fn char_length(
    len: &datafusion::sql::sqlparser::ast::CharacterLength,
    name: &str,
) -> Result<u32> {
    use datafusion::sql::sqlparser::ast::CharacterLength;
    let n = match len {
        CharacterLength::IntegerLength { length, .. } => *length,
        CharacterLength::Max => {
            return Err(SqlError::FeatureNotSupported(format!(
                "{name}(max) is not supported; use text"
            )))
        }
    };
    if n == 0 {
        return Err(SqlError::InvalidParameter(format!(
            "length for type {name} must be at least 1"
        )));
    }
    if n > MAX_CHAR_LENGTH {
        return Err(SqlError::InvalidParameter(format!(
            "length for type {name} cannot exceed {MAX_CHAR_LENGTH}"
        )));
    }
    u32::try_from(n).map_err(|_| {
        SqlError::InvalidParameter(format!(
            "length for type {name} cannot exceed {MAX_CHAR_LENGTH}"
        ))
    })
}

pub(super) fn clamp_precision(p: u64) -> Result<u8> {
    match u8::try_from(p) {
        Ok(p @ 1..=38) => Ok(p),
        _ => Err(SqlError::InvalidDefinition(format!(
            "NUMERIC precision {p} must be between 1 and 38"
        ))),
    }
}
