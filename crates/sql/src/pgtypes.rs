//! PostgreSQL type emulation: Arrow type <-> PostgreSQL type OID, and the
//! text and binary wire encodings of values.
//!
//! Invariant: every Arrow type maps to exactly one OID, and the bytes
//! [`encode_cell`] writes are valid for that OID in the requested format.
//! Types with no binary encoder here (intervals, lists, ...) are announced
//! as `text`, whose binary form is its text form, so a client can never be
//! handed bytes it cannot decode.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::IntervalMonthDayNanoBuilder;
use datafusion::arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, BinaryBuilder, BooleanBuilder, Date32Builder,
    Decimal128Builder, FixedSizeBinaryBuilder, Float32Builder, Float64Builder, Int16Builder,
    Int32Builder, Int64Builder, RecordBatch, StringArray, StringBuilder,
    TimestampMicrosecondBuilder,
};
use datafusion::arrow::datatypes::IntervalMonthDayNano;
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, SchemaRef, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::ScalarValue;
use eddy_common::{
    format_interval, format_uuid, parse_interval, parse_uuid, ColumnType, Interval, IntervalError,
    Row, Value, UUID_LEN,
};

/// `UUID_LEN` as Arrow's `FixedSizeBinary` width.
const UUID_LEN_I32: i32 = 16;

use crate::error::{Result, SqlError};

/// PostgreSQL type OIDs Eddy uses.
pub mod oid {
    pub const BOOL: u32 = 16;
    pub const BYTEA: u32 = 17;
    pub const CHAR: u32 = 18;
    pub const NAME: u32 = 19;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const OID: u32 = 26;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const UNKNOWN: u32 = 705;
    pub const VARCHAR: u32 = 1043;
    pub const BPCHAR: u32 = 1042;
    pub const DATE: u32 = 1082;
    pub const TIME: u32 = 1083;
    pub const TIMESTAMP: u32 = 1114;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const INTERVAL: u32 = 1186;
    pub const NUMERIC: u32 = 1700;
    pub const UUID: u32 = 2950;
    pub const JSON: u32 = 114;
    pub const JSONB: u32 = 3802;
    pub const INT2_ARRAY: u32 = 1005;
    pub const INT4_ARRAY: u32 = 1007;
    pub const TEXT_ARRAY: u32 = 1009;
    pub const INT8_ARRAY: u32 = 1016;
    pub const UUID_ARRAY: u32 = 2951;
    pub const BOOL_ARRAY: u32 = 1000;
    pub const BYTEA_ARRAY: u32 = 1001;
    pub const BPCHAR_ARRAY: u32 = 1014;
    pub const VARCHAR_ARRAY: u32 = 1015;
    pub const FLOAT4_ARRAY: u32 = 1021;
    pub const FLOAT8_ARRAY: u32 = 1022;
    pub const TIMESTAMP_ARRAY: u32 = 1115;
    pub const DATE_ARRAY: u32 = 1182;
    pub const TIME_ARRAY: u32 = 1183;
    pub const TIMESTAMPTZ_ARRAY: u32 = 1185;
    pub const INTERVAL_ARRAY: u32 = 1187;
    pub const NUMERIC_ARRAY: u32 = 1231;
    pub const JSON_ARRAY: u32 = 199;
    pub const JSONB_ARRAY: u32 = 3807;
}

/// Wire format of one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Binary,
}

/// Days between 1970-01-01 and 2000-01-01 (PostgreSQL's epoch).
const PG_EPOCH_DAYS: i32 = 10_957;
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
const MICROS_PER_DAY: i64 = 86_400_000_000;

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
fn list_element(dt: &DataType) -> Option<&DataType> {
    match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            Some(f.data_type())
        }
        _ => None,
    }
}

/// The PostgreSQL type OID announced for an Arrow column.
pub fn pg_oid(dt: &DataType) -> u32 {
    if let Some(e) = list_element(dt) {
        // a list of a type with no array type (a list of lists): text
        return array_oid_of(pg_oid(e)).unwrap_or(oid::TEXT);
    }
    match dt {
        DataType::Boolean => oid::BOOL,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => oid::INT2,
        DataType::Int32 | DataType::UInt16 => oid::INT4,
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => oid::INT8,
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

/// The PostgreSQL type OID announced for a result field: `bpchar` and
/// `varchar` for columns declared so, else by its Arrow type.
pub fn field_oid(field: &datafusion::arrow::datatypes::Field) -> u32 {
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
        oid::INT4 | oid::OID => ColumnType::Int,
        oid::INT8 => ColumnType::BigInt,
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
            ExactNumberInfo::None => ColumnType::Decimal(38, 10),
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
    eddy_common::ArrayElem::of(elem)
        .map(ColumnType::Array)
        .ok_or_else(|| {
            SqlError::FeatureNotSupported(format!("arrays of type {elem} are not supported"))
        })
}

/// PostgreSQL's `MaxAttrSize` in characters: the longest `varchar(n)`.
const MAX_CHAR_LENGTH: u64 = 10_485_760;

/// The n of `varchar(n)` / `char(n)`: 1 to 10485760, as in PostgreSQL.
fn char_length(len: &datafusion::sql::sqlparser::ast::CharacterLength, name: &str) -> Result<u32> {
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

fn clamp_precision(p: u64) -> Result<u8> {
    if (1..=38).contains(&p) {
        Ok(p as u8)
    } else {
        Err(SqlError::InvalidDefinition(format!(
            "NUMERIC precision {p} must be between 1 and 38"
        )))
    }
}

// ---------------------------------------------------------------------------
// dates and times

/// (year, month, day) of a day count since 1970-01-01 (proleptic Gregorian).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Days since 1970-01-01 of a civil date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn write_date(days: i64, out: &mut String) {
    use std::fmt::Write;
    let (y, m, d) = civil_from_days(days);
    if y <= 0 {
        let _ = write!(out, "{:04}-{:02}-{:02} BC", 1 - y, m, d);
    } else {
        let _ = write!(out, "{y:04}-{m:02}-{d:02}");
    }
}

fn write_timestamp(micros: i64, out: &mut String) {
    use std::fmt::Write;
    let days = micros.div_euclid(MICROS_PER_DAY);
    let tod = micros.rem_euclid(MICROS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    let _ = write!(out, "{y:04}-{m:02}-{d:02} ");
    write_time(tod, out);
}

/// Why date/time text was refused: the SQLSTATE differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DtError {
    /// Not a date/time at all (22007).
    Syntax,
    /// A field or the whole value out of range (22008).
    Range,
    /// `infinity` / `-infinity`, which Eddy cannot store (22008).
    Infinite,
}

impl DtError {
    fn to_sql(self, type_name: &str, input: &str) -> SqlError {
        match self {
            DtError::Syntax => SqlError::InvalidDatetime(format!(
                "invalid input syntax for type {type_name}: \"{input}\""
            )),
            DtError::Range => SqlError::DatetimeOverflow(format!(
                "date/time field value out of range: \"{input}\""
            )),
            DtError::Infinite => infinite_datetime(type_name),
        }
    }
}

fn infinite_datetime(type_name: &str) -> SqlError {
    SqlError::DatetimeOverflow(format!(
        "{type_name} out of range: Eddy cannot store an infinite {type_name}"
    ))
}

/// The last year PostgreSQL's `date` accepts.
const MAX_YEAR: i64 = 5_874_897;

/// A non-empty run of ASCII digits as a number; `Syntax` for anything else,
/// `Range` for more digits than a `u32` holds.
fn digits_u32(s: &str) -> std::result::Result<u32, DtError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DtError::Syntax);
    }
    s.parse().map_err(|_| DtError::Range)
}

fn is_infinity(s: &str) -> bool {
    ["infinity", "+infinity", "-infinity"]
        .iter()
        .any(|w| s.eq_ignore_ascii_case(w))
}

/// `YYYY-MM-DD` -> days since the Unix epoch.
fn date_from_text(s: &str) -> std::result::Result<i32, DtError> {
    let s = s.trim();
    if is_infinity(s) {
        return Err(DtError::Infinite);
    }
    let mut it = s.splitn(3, '-');
    let mut field = || it.next().map(str::trim).ok_or(DtError::Syntax);
    let (y, m, d) = (field()?, field()?, field()?);
    let y = i64::from(digits_u32(y)?);
    let (m, d) = (digits_u32(m)?, digits_u32(d)?);
    if y > MAX_YEAR || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(DtError::Range);
    }
    let days = days_from_civil(y, m, d);
    // reject 2023-02-30 and friends
    if civil_from_days(days) != (y, m, d) {
        return Err(DtError::Range);
    }
    i32::try_from(days).map_err(|_| DtError::Range)
}

/// Split a zone suffix (`Z`, `+HH`, `-HH:MM`, `+HHMM`) off a time of day:
/// (time, offset in seconds east of UTC).
fn split_zone(rest: &str) -> std::result::Result<(&str, i64), DtError> {
    let Some(i) = rest.rfind(['+', '-', 'Z']).filter(|i| *i >= 5) else {
        return Ok((rest, 0));
    };
    // `i` is the byte offset of an ASCII character, so both halves are
    // char-boundary safe; `get` keeps it so even if that changes.
    let (time, zone) = (
        rest.get(..i).ok_or(DtError::Syntax)?,
        rest.get(i..).ok_or(DtError::Syntax)?,
    );
    if zone == "Z" {
        return Ok((time.trim(), 0));
    }
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let z = zone.get(1..).ok_or(DtError::Syntax)?;
    let (h, m) = match z.split_once(':') {
        Some((h, m)) => (digits_u32(h)?, digits_u32(m)?),
        // all-ASCII-digit text, so slicing at 2 is on a char boundary
        None if z.len() == 4 && z.bytes().all(|b| b.is_ascii_digit()) => (
            digits_u32(z.get(..2).ok_or(DtError::Syntax)?)?,
            digits_u32(z.get(2..).ok_or(DtError::Syntax)?)?,
        ),
        None => (digits_u32(z)?, 0),
    };
    // PostgreSQL's limit on a numeric zone displacement
    if h > 15 || m > 59 {
        return Err(DtError::Range);
    }
    Ok((
        time.trim(),
        sign * (i64::from(h) * 3600 + i64::from(m) * 60),
    ))
}

/// `YYYY-MM-DD[ T]HH:MM[:SS[.ffffff]][Z|+HH[:MM]]` -> microseconds since the
/// Unix epoch, with every step checked; a zone suffix converts to UTC.
fn timestamp_from_text(s: &str) -> std::result::Result<i64, DtError> {
    timestamp_from_text_zone(s, true)
}

/// [`timestamp_from_text`]; with `apply_zone` false a zone suffix is read
/// and ignored, as PostgreSQL's `timestamp` (without time zone) input does.
fn timestamp_from_text_zone(s: &str, apply_zone: bool) -> std::result::Result<i64, DtError> {
    let s = s.trim();
    if is_infinity(s) {
        return Err(DtError::Infinite);
    }
    let (date, rest) = match s.find([' ', 'T']) {
        Some(i) => (
            s.get(..i).ok_or(DtError::Syntax)?,
            s.get(i + 1..).ok_or(DtError::Syntax)?.trim(),
        ),
        None => (s, ""),
    };
    let day_start = i64::from(date_from_text(date)?)
        .checked_mul(MICROS_PER_DAY)
        .ok_or(DtError::Range)?;
    if rest.is_empty() {
        return Ok(day_start);
    }
    let (time, offset_secs) = split_zone(rest)?;
    let mut parts = time.splitn(3, ':');
    let h = digits_u32(parts.next().ok_or(DtError::Syntax)?)?;
    let mi = digits_u32(parts.next().ok_or(DtError::Syntax)?)?;
    let (sec, micros) = match parts.next() {
        None => (0, 0),
        Some(sec) => match sec.split_once('.') {
            Some((s, f)) => {
                if f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(DtError::Syntax);
                }
                // ASCII digits only, so byte slicing is char-boundary safe
                let digits = f.get(..f.len().min(6)).ok_or(DtError::Syntax)?;
                let scale = 10i64.pow(6 - digits.len() as u32);
                (digits_u32(s)?, i64::from(digits_u32(digits)?) * scale)
            }
            None => (digits_u32(sec)?, 0),
        },
    };
    if h > 23 || mi > 59 || sec > 60 {
        return Err(DtError::Range);
    }
    let offset_secs = if apply_zone { offset_secs } else { 0 };
    let secs = i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(sec) - offset_secs;
    secs.checked_mul(1_000_000)
        .and_then(|t| t.checked_add(micros))
        .and_then(|t| t.checked_add(day_start))
        .ok_or(DtError::Range)
}

/// Parse `YYYY-MM-DD` into days since the Unix epoch.
pub fn parse_date(s: &str) -> Option<i32> {
    date_from_text(s).ok()
}

/// Parse `YYYY-MM-DD[ T]HH:MM[:SS[.ffffff]][Z|+HH[:MM]]` into microseconds
/// since the Unix epoch. A zone suffix is converted to UTC.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    timestamp_from_text(s).ok()
}

/// `timestamp` text as PostgreSQL reads it: a zone suffix is ignored
/// (`'2024-01-01 12:30+02'::timestamp` is 12:30).
pub fn timestamp_wall_clock(s: &str) -> Result<i64> {
    timestamp_from_text_zone(s.trim(), false).map_err(|e| e.to_sql("timestamp", s))
}

/// `timestamptz` text as an instant: a zone suffix converts to UTC, no
/// suffix means UTC (the session time zone).
pub fn timestamp_instant(s: &str) -> Result<i64> {
    timestamp_from_text(s.trim()).map_err(|e| e.to_sql("timestamp with time zone", s))
}

/// PostgreSQL's valid `date` range in days since 2000-01-01 (`IS_VALID_DATE`).
const PG_DATE_RANGE: std::ops::Range<i32> = -2_451_545..2_145_031_949;
/// PostgreSQL's valid `timestamp` range in microseconds since 2000-01-01
/// (`IS_VALID_TIMESTAMP`).
const PG_TIMESTAMP_RANGE: std::ops::Range<i64> =
    -211_813_488_000_000_000..9_223_371_331_200_000_000;

/// A binary `date` (days since 2000-01-01) as days since 1970-01-01.
fn date_from_binary(raw: i32) -> Result<i32> {
    if raw == i32::MAX || raw == i32::MIN {
        return Err(infinite_datetime("date"));
    }
    let range = || SqlError::DatetimeOverflow("date out of range".into());
    if !PG_DATE_RANGE.contains(&raw) {
        return Err(range());
    }
    raw.checked_add(PG_EPOCH_DAYS).ok_or_else(range)
}

/// A binary `timestamp` (microseconds since 2000-01-01) as microseconds
/// since 1970-01-01.
fn timestamp_from_binary(raw: i64) -> Result<i64> {
    if raw == i64::MAX || raw == i64::MIN {
        return Err(infinite_datetime("timestamp"));
    }
    let range = || SqlError::DatetimeOverflow("timestamp out of range".into());
    if !PG_TIMESTAMP_RANGE.contains(&raw) {
        return Err(range());
    }
    raw.checked_add(PG_EPOCH_MICROS).ok_or_else(range)
}

// ---------------------------------------------------------------------------
// decimals

/// Format a scaled integer with `scale` digits after the point.
pub fn format_decimal(v: i128, scale: i8) -> String {
    if scale <= 0 {
        let mut s = v.to_string();
        if v != 0 {
            s.extend(std::iter::repeat_n('0', usize::from(scale.unsigned_abs())));
        }
        return s;
    }
    let neg = v < 0;
    let digits = v.unsigned_abs().to_string();
    let scale = usize::from(scale.unsigned_abs());
    let (int, frac) = if digits.len() > scale {
        let (a, b) = digits.split_at(digits.len() - scale);
        (a.to_string(), b.to_string())
    } else {
        ("0".to_string(), format!("{digits:0>scale$}"))
    };
    format!("{}{int}.{frac}", if neg { "-" } else { "" })
}

/// Parse a decimal literal into a scaled integer, rounding half away from
/// zero. `None` for malformed text and for values that need more than
/// `precision` digits. Work is bounded by `precision`, not by the exponent
/// or the number of digits written.
pub fn parse_decimal(s: &str, precision: u8, scale: i8) -> Option<i128> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        // `i` is an ASCII letter: both slices are on char boundaries
        Some(i) => (body.get(..i)?, body.get(i + 1..)?.parse::<i32>().ok()?),
        None => (body, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let limit = 10i128.checked_pow(u32::from(precision))?;
    // significant digits, leading zeros dropped
    let lead = int
        .bytes()
        .chain(frac.bytes())
        .take_while(|b| *b == b'0')
        .count();
    let digits: Vec<u8> = int
        .bytes()
        .chain(frac.bytes())
        .skip(lead)
        .map(|b| b - b'0')
        .collect();
    if digits.is_empty() {
        return Some(0);
    }
    // how many digits the scaled integer has (digits[0] is not zero)
    let point = i64::try_from(int.len()).ok()? - i64::try_from(lead).ok()? + i64::from(exp);
    let want = point + i64::from(scale);
    if want > i64::from(precision) {
        return None; // at least 10^precision
    }
    if want < 0 {
        return Some(0); // below half a unit of the last place
    }
    let want = usize::try_from(want).ok()?;
    let mut value: i128 = 0;
    for i in 0..want {
        let d = digits.get(i).copied().unwrap_or(0);
        value = value.checked_mul(10)?.checked_add(i128::from(d))?;
    }
    if digits.get(want).is_some_and(|d| *d >= 5) {
        value = value.checked_add(1)?;
    }
    if value >= limit {
        return None;
    }
    Some(if neg { -value } else { value })
}

/// A `numeric` value as PostgreSQL reads it, before it meets a column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NumericText {
    /// `numeric_out`'s text: `-12.340`, no exponent, no leading zeros,
    /// exactly the value's display scale of fraction digits.
    Finite(String),
    NaN,
    Infinity,
    NegInfinity,
}

impl NumericText {
    /// The text PostgreSQL prints for the value.
    pub fn into_text(self) -> String {
        match self {
            NumericText::Finite(t) => t,
            NumericText::NaN => "NaN".into(),
            NumericText::Infinity => "Infinity".into(),
            NumericText::NegInfinity => "-Infinity".into(),
        }
    }
}

/// `NUMERIC_WEIGHT_MAX` in decimal digits: the most integer digits a
/// `numeric` holds.
const NUMERIC_MAX_INT_DIGITS: i64 = 131_072;
/// `NUMERIC_DSCALE_MAX`: the most fraction digits a `numeric` holds.
const NUMERIC_MAX_SCALE: i64 = 16_383;

/// Read numeric text as PostgreSQL's `numeric_in` does and give it back as
/// `numeric_out` prints it, scale included: `1.50` stays `1.50`, `1.50e1` is
/// `15.0` (display scale `max(0, fraction digits - exponent)`), `-0.0` is
/// `0.0`. 22P02 for text that is not a number, 22003 ("value overflows
/// numeric format") past PostgreSQL's 131072 integer or 16383 fraction
/// digits; the work and the text are bounded by those limits.
pub fn numeric_from_text(s: &str) -> Result<NumericText> {
    let bad = || SqlError::InvalidText(format!("invalid input syntax for type numeric: \"{s}\""));
    let overflow = || SqlError::NumericOutOfRange("value overflows numeric format".into());
    let t = s.trim();
    let specials = [
        ("nan", NumericText::NaN),
        ("infinity", NumericText::Infinity),
        ("+infinity", NumericText::Infinity),
        ("inf", NumericText::Infinity),
        ("+inf", NumericText::Infinity),
        ("-infinity", NumericText::NegInfinity),
        ("-inf", NumericText::NegInfinity),
    ];
    if let Some((_, v)) = specials.iter().find(|(w, _)| t.eq_ignore_ascii_case(w)) {
        return Ok(v.clone());
    }
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        // `i` is an ASCII letter: both slices are on char boundaries
        Some(i) => (
            body.get(..i).ok_or_else(bad)?,
            Some(body.get(i + 1..).ok_or_else(bad)?),
        ),
        None => (body, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    let exp: i64 = match exp {
        None => 0,
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            // numeric_in refuses exponents from INT_MAX / 2 on
            let magnitude = digits.trim_start_matches('0');
            let value = match magnitude.parse::<i64>() {
                Ok(v) if magnitude.len() <= 10 && v < i64::from(i32::MAX / 2) => v,
                _ if magnitude.is_empty() => 0,
                _ => return Err(overflow()),
            };
            if e.starts_with('-') {
                -value
            } else {
                value
            }
        }
    };
    let digits = int.as_bytes().iter().chain(frac.as_bytes());
    let scale = (frac.len() as i64 - exp).max(0);
    if scale > NUMERIC_MAX_SCALE {
        return Err(overflow());
    }
    let scale = scale as usize;
    // where the point goes in the digits once the exponent is applied
    let point = int.len() as i64 + exp;
    let Some(lead) = digits.clone().position(|d| *d != b'0') else {
        // zero, whatever its exponent
        let mut out = String::from("0");
        if scale > 0 {
            out.push('.');
            out.extend(std::iter::repeat_n('0', scale));
        }
        return Ok(NumericText::Finite(out));
    };
    if point - lead as i64 > NUMERIC_MAX_INT_DIGITS {
        return Err(overflow());
    }
    let digits: Vec<u8> = digits.copied().collect();
    let mut out = String::with_capacity(scale + point.max(1) as usize + 2);
    if neg {
        out.push('-');
    }
    // integer part from the first significant digit, then exactly `scale`
    // fraction digits; positions outside the digits written are zeros
    let digit = |i: i64| {
        usize::try_from(i)
            .ok()
            .and_then(|i| digits.get(i))
            .map_or('0', |d| *d as char)
    };
    if point <= lead as i64 {
        out.push('0');
    } else {
        out.extend((lead as i64..point).map(digit));
    }
    if scale > 0 {
        out.push('.');
        out.extend((point..point + scale as i64).map(digit));
    }
    Ok(NumericText::Finite(out))
}

/// Decode one bound parameter of PostgreSQL type `oid` sent in text or
/// binary format. NUMERIC parameters become their exact text (a
/// [`Value::Decimal`] has no scale of its own): converted to the column
/// they meet, they round once, to that column's scale; other types decode
/// to the [`Value`] of their column type; unknown types stay text
/// (binary arrays as their `{...}` literal).
pub fn parse_param(raw: &[u8], oid: u32, binary: bool) -> Result<Value> {
    if oid == oid::NUMERIC {
        let n = if binary {
            match parse_numeric_binary(raw)? {
                WireNumeric::Finite(text) => numeric_from_text(&text)?,
                WireNumeric::NaN => NumericText::NaN,
                WireNumeric::Infinity => NumericText::Infinity,
                WireNumeric::NegInfinity => NumericText::NegInfinity,
            }
        } else {
            numeric_from_text(utf8_param(raw)?)?
        };
        return Ok(Value::Text(n.into_text()));
    }
    match (column_type_for_oid(oid), binary) {
        (Some(ty), false) => parse_text(utf8_param(raw)?, ty),
        (Some(ty), true) => parse_binary(raw, oid, ty),
        (None, false) => Ok(Value::Text(utf8_param(raw)?.to_string())),
        (None, true) => Ok(Value::Text(binary_array_to_text(raw)?)),
    }
}

fn utf8_param(raw: &[u8]) -> Result<&str> {
    std::str::from_utf8(raw).map_err(|_| SqlError::InvalidEncoding(" in a parameter".into()))
}

/// `NUMERIC_MAX_PRECISION + NUMERIC_MAX_RESULT_SCALE`: the most base-10000
/// digits PostgreSQL accepts in a binary numeric.
const NUMERIC_MAX_NDIGITS: i16 = 3000;
/// `NUMERIC_MAX_DISPLAY_SCALE`.
const NUMERIC_MAX_DSCALE: i16 = 1000;
const NUMERIC_POS: u16 = 0x0000;
const NUMERIC_NEG: u16 = 0x4000;
const NUMERIC_NAN: u16 = 0xC000;
const NUMERIC_PINF: u16 = 0xD000;
const NUMERIC_NINF: u16 = 0xF000;

fn numeric_binary(v: i128, scale: i8, out: &mut BytesMut) {
    // PostgreSQL numeric: ndigits, weight, sign, dscale, then base-10000
    // digits. Built from the decimal digits, so no step can overflow.
    let dscale = usize::from(scale.max(0).unsigned_abs());
    let mut digits = v.unsigned_abs().to_string().into_bytes();
    if v == 0 {
        digits.clear();
    } else if scale < 0 {
        digits.extend(std::iter::repeat_n(b'0', usize::from(scale.unsigned_abs())));
    }
    // integer digits padded on the left and fraction digits padded on the
    // right to whole groups of four
    let (int, frac) = if digits.len() > dscale {
        let (a, b) = digits.split_at(digits.len() - dscale);
        (a.to_vec(), b.to_vec())
    } else {
        let mut f = vec![b'0'; dscale - digits.len()];
        f.extend_from_slice(&digits);
        (Vec::new(), f)
    };
    let mut padded = vec![b'0'; (4 - int.len() % 4) % 4];
    padded.extend_from_slice(&int);
    let int_groups = padded.len() / 4;
    padded.extend_from_slice(&frac);
    padded.resize(padded.len().div_ceil(4) * 4, b'0');
    let mut groups: Vec<i16> = padded
        .chunks(4)
        .map(|c| c.iter().fold(0i16, |acc, d| acc * 10 + i16::from(d - b'0')))
        .collect();
    let mut weight = int_groups as i32 - 1;
    // strip leading and trailing zero groups
    let lead = groups.iter().take_while(|g| **g == 0).count();
    groups.drain(..lead);
    weight -= lead as i32;
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    out.put_i16(groups.len() as i16);
    out.put_i16(weight as i16);
    out.put_u16(if v < 0 { NUMERIC_NEG } else { NUMERIC_POS });
    out.put_i16(dscale as i16);
    for g in groups {
        out.put_i16(g);
    }
}

/// A binary numeric, decoded but not yet converted to a column type.
#[derive(Debug, PartialEq)]
enum WireNumeric {
    /// The value's text, `-12.340` style, with `dscale` fraction digits.
    Finite(String),
    NaN,
    Infinity,
    NegInfinity,
}

/// Decode a binary numeric, validating its header as PostgreSQL's
/// `numeric_recv` does before allocating anything sized by it. The text
/// built is bounded: at most 32768 integer groups and 250 fraction groups.
fn parse_numeric_binary(b: &[u8]) -> Result<WireNumeric> {
    let bad = |what: &str| SqlError::InvalidBinary(format!("{what} in external \"numeric\" value"));
    let i16_at = |at: usize| {
        b.get(at..at + 2)
            .map(|s| i16::from_be_bytes([s[0], s[1]]))
            .ok_or_else(|| SqlError::InvalidBinary("insufficient data left in message".into()))
    };
    let nd = i16_at(0)?;
    let weight = i32::from(i16_at(2)?);
    let sign = i16_at(4)? as u16;
    let dscale = i16_at(6)?;
    if !(0..=NUMERIC_MAX_NDIGITS).contains(&nd) {
        return Err(bad("invalid length"));
    }
    let nd = usize::from(nd.unsigned_abs());
    if b.len() != 8 + 2 * nd {
        return Err(SqlError::InvalidBinary(
            "incorrect binary data format in numeric value".into(),
        ));
    }
    if !matches!(
        sign,
        NUMERIC_POS | NUMERIC_NEG | NUMERIC_NAN | NUMERIC_PINF | NUMERIC_NINF
    ) {
        return Err(bad("invalid sign"));
    }
    if !(0..=NUMERIC_MAX_DSCALE).contains(&dscale) {
        return Err(bad("invalid scale"));
    }
    let dscale = usize::from(dscale.unsigned_abs());
    let mut digits = Vec::with_capacity(nd);
    for i in 0..nd {
        let d = i16_at(8 + 2 * i)?;
        if !(0..10_000).contains(&d) {
            return Err(bad("invalid digit"));
        }
        digits.push(d);
    }
    match sign {
        NUMERIC_NAN => return Ok(WireNumeric::NaN),
        NUMERIC_PINF => return Ok(WireNumeric::Infinity),
        NUMERIC_NINF => return Ok(WireNumeric::NegInfinity),
        _ => {}
    }
    // digit `i` has weight `weight - i`: group k (k >= 0 integer, k < 0
    // fraction) is digits[weight - k]
    let group = |k: i32| -> i16 {
        usize::try_from(weight - k)
            .ok()
            .and_then(|i| digits.get(i).copied())
            .unwrap_or(0)
    };
    let mut text = String::new();
    if sign == NUMERIC_NEG {
        text.push('-');
    }
    if weight < 0 {
        text.push('0');
    } else {
        text.push_str(&group(weight).to_string());
        for k in (0..weight).rev() {
            text.push_str(&format!("{:04}", group(k)));
        }
    }
    if dscale > 0 {
        text.push('.');
        let mut frac = String::with_capacity(dscale + 4);
        let mut k = -1;
        while frac.len() < dscale {
            frac.push_str(&format!("{:04}", group(k)));
            k -= 1;
        }
        frac.truncate(dscale);
        text.push_str(&frac);
    }
    Ok(WireNumeric::Finite(text))
}

// ---------------------------------------------------------------------------
// encoding Arrow cells

/// Float text as PostgreSQL 15 prints it (`extra_float_digits` 1): the
/// shortest text that reads back as the same value, in fixed notation when
/// the decimal exponent is at least -4 and below `fixed_below` (15 for
/// `float8`, 6 for `float4`), else `1.5e+20` style with a two-digit
/// exponent at least; `NaN`, `Infinity`, `-Infinity`.
fn pg_float_text<F>(v: F, nan: bool, inf: Option<bool>, fixed_below: i32, out: &mut String)
where
    F: std::fmt::Display + std::fmt::LowerExp,
{
    use std::fmt::Write;
    if nan {
        out.push_str("NaN");
        return;
    }
    if let Some(positive) = inf {
        out.push_str(if positive { "Infinity" } else { "-Infinity" });
        return;
    }
    // `{:e}` is the shortest round-trip digits: "1.2345e17", "-5e-7"
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..fixed_below).contains(&exp) {
        let _ = write!(out, "{v}");
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "{mantissa}e{sign}{:02}", exp.unsigned_abs());
    }
}

fn float_text(v: f64, out: &mut String) {
    let inf = v.is_infinite().then_some(v > 0.0);
    pg_float_text(v, v.is_nan(), inf, 15, out);
}

fn float32_text(v: f32, out: &mut String) {
    let inf = v.is_infinite().then_some(v > 0.0);
    pg_float_text(v, v.is_nan(), inf, 6, out);
}

fn hex_bytea(b: &[u8], out: &mut String) {
    use std::fmt::Write;
    out.push_str("\\x");
    for byte in b {
        let _ = write!(out, "{byte:02x}");
    }
}

fn timestamp_micros(array: &dyn Array, unit: &TimeUnit, row: usize) -> Result<i64> {
    let micros = match unit {
        TimeUnit::Second => array
            .as_primitive::<TimestampSecondType>()
            .value(row)
            .checked_mul(1_000_000),
        TimeUnit::Millisecond => array
            .as_primitive::<TimestampMillisecondType>()
            .value(row)
            .checked_mul(1000),
        TimeUnit::Microsecond => Some(array.as_primitive::<TimestampMicrosecondType>().value(row)),
        TimeUnit::Nanosecond => {
            Some(array.as_primitive::<TimestampNanosecondType>().value(row) / 1000)
        }
    };
    micros.ok_or_else(|| SqlError::DatetimeOverflow("timestamp out of range".into()))
}

/// Text form of one non-null cell. `fallback` formats types Eddy has no
/// PostgreSQL spelling for (intervals, lists, ...).
pub fn cell_text(array: &dyn Array, row: usize, out: &mut String) -> Result<()> {
    use std::fmt::Write;
    match array.data_type() {
        DataType::Boolean => out.push(if array.as_boolean().value(row) {
            't'
        } else {
            'f'
        }),
        DataType::Int8 => {
            let _ = write!(out, "{}", array.as_primitive::<Int8Type>().value(row));
        }
        DataType::Int16 => {
            let _ = write!(out, "{}", array.as_primitive::<Int16Type>().value(row));
        }
        DataType::Int32 => {
            let _ = write!(out, "{}", array.as_primitive::<Int32Type>().value(row));
        }
        DataType::Int64 => {
            let _ = write!(out, "{}", array.as_primitive::<Int64Type>().value(row));
        }
        DataType::UInt8 => {
            let _ = write!(out, "{}", array.as_primitive::<UInt8Type>().value(row));
        }
        DataType::UInt16 => {
            let _ = write!(out, "{}", array.as_primitive::<UInt16Type>().value(row));
        }
        DataType::UInt32 => {
            let _ = write!(out, "{}", array.as_primitive::<UInt32Type>().value(row));
        }
        DataType::UInt64 => {
            let _ = write!(out, "{}", array.as_primitive::<UInt64Type>().value(row));
        }
        DataType::Float32 => float32_text(array.as_primitive::<Float32Type>().value(row), out),
        DataType::Float64 => float_text(array.as_primitive::<Float64Type>().value(row), out),
        DataType::Decimal128(_, s) => out.push_str(&format_decimal(
            array.as_primitive::<Decimal128Type>().value(row),
            *s,
        )),
        DataType::Utf8 => out.push_str(array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => out.push_str(array.as_string::<i64>().value(row)),
        DataType::Utf8View => out.push_str(array.as_string_view().value(row)),
        DataType::Binary => hex_bytea(array.as_binary::<i32>().value(row), out),
        DataType::LargeBinary => hex_bytea(array.as_binary::<i64>().value(row), out),
        DataType::BinaryView => hex_bytea(array.as_binary_view().value(row), out),
        DataType::Date32 => write_date(array.as_primitive::<Date32Type>().value(row) as i64, out),
        DataType::Timestamp(unit, tz) => {
            write_timestamp(timestamp_micros(array, unit, row)?, out);
            if tz.is_some() {
                out.push_str("+00");
            }
        }
        DataType::FixedSizeBinary(16) => out.push_str(&format_uuid(&uuid_cell(array, row)?)),
        DataType::Interval(_) => out.push_str(&format_interval(interval_cell(array, row)?)),
        DataType::Time64(_) | DataType::Time32(_) => write_time(time_cell(array, row)?, out),
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => {
            let items = crate::array_type::list_items(array, row)
                .ok_or_else(|| SqlError::Internal("list cell out of range".into()))?;
            crate::array_type::write_array_text(items.as_ref(), out)?;
        }
        _ => {
            let opts = FormatOptions::default();
            let f = ArrayFormatter::try_new(array, &opts)?;
            let _ = write!(out, "{}", f.value(row));
        }
    }
    Ok(())
}

/// Append one cell as a length-prefixed wire value (-1 for NULL): the
/// layout of a DataRow field and of a binary COPY field.
pub fn encode_cell(
    array: &dyn Array,
    row: usize,
    format: Format,
    out: &mut BytesMut,
) -> Result<()> {
    if array.is_null(row) {
        out.put_i32(-1);
        return Ok(());
    }
    let len_at = out.len();
    out.put_i32(0);
    match format {
        Format::Text => {
            let mut s = String::new();
            cell_text(array, row, &mut s)?;
            out.put_slice(s.as_bytes());
        }
        Format::Binary => encode_binary(array, row, out)?,
    }
    let len = (out.len() - len_at - 4) as i32;
    out[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// The 16 bytes of a non-null cell of a `FixedSizeBinary(16)` (uuid) array.
fn uuid_cell(array: &dyn Array, row: usize) -> Result<[u8; UUID_LEN]> {
    let a = array
        .as_fixed_size_binary_opt()
        .ok_or_else(|| SqlError::Internal(format!("uuid column holds {}", array.data_type())))?;
    if row >= a.len() {
        return Err(SqlError::Internal("uuid cell out of range".into()));
    }
    <[u8; UUID_LEN]>::try_from(a.value(row))
        .map_err(|_| SqlError::Internal("uuid cell is not 16 bytes".into()))
}

/// The microseconds since midnight in a non-null cell of a time array.
fn time_cell(array: &dyn Array, row: usize) -> Result<i64> {
    use datafusion::arrow::datatypes::{
        Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType,
    };
    if row >= array.len() {
        return Err(SqlError::Internal("time cell out of range".into()));
    }
    Ok(match array.data_type() {
        DataType::Time64(TimeUnit::Microsecond) => {
            array.as_primitive::<Time64MicrosecondType>().value(row)
        }
        DataType::Time64(_) => array.as_primitive::<Time64NanosecondType>().value(row) / 1000,
        DataType::Time32(TimeUnit::Second) => {
            i64::from(array.as_primitive::<Time32SecondType>().value(row)) * 1_000_000
        }
        DataType::Time32(_) => {
            i64::from(array.as_primitive::<Time32MillisecondType>().value(row)) * 1000
        }
        other => return Err(SqlError::Internal(format!("time column holds {other}"))),
    })
}

/// `HH:MM:SS[.ffffff]`, as PostgreSQL prints a time.
fn write_time(micros: i64, out: &mut String) {
    use std::fmt::Write;
    let secs = micros / 1_000_000;
    let frac = micros % 1_000_000;
    let _ = write!(
        out,
        "{:02}:{:02}:{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    );
    if frac != 0 {
        let s = format!("{frac:06}");
        out.push('.');
        out.push_str(s.trim_end_matches('0'));
    }
}

/// The most microseconds a time holds: `24:00:00`.
const MAX_TIME_MICROS: i64 = MICROS_PER_DAY;

/// Parses a time (PostgreSQL's `time_in` for `HH:MM[:SS[.frac]]`): 22007
/// if it is not one, 22008 for a field out of range.
pub fn time_from_text(s: &str) -> Result<i64> {
    let bad = || SqlError::InvalidDatetime(format!("invalid input syntax for type time: \"{s}\""));
    let range =
        || SqlError::DatetimeOverflow(format!("date/time field value out of range: \"{s}\""));
    let t = s.trim();
    let mut parts = t.split(':');
    let field = |x: Option<&str>| -> Result<i64> {
        let x = x.ok_or_else(bad)?;
        if x.is_empty() || x.len() > 2 || !x.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        x.parse::<i64>().map_err(|_| bad())
    };
    let h = field(parts.next())?;
    let m = field(parts.next())?;
    let (sec, frac) = match parts.next() {
        None => (0, 0),
        Some(x) => {
            let (whole, frac) = x.split_once('.').unwrap_or((x, ""));
            let sec = field(Some(whole))?;
            if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            // round to microseconds
            let padded = format!("{frac:0<9}");
            let nanos: i64 = padded.parse().map_err(|_| bad())?;
            (sec, (nanos + 500) / 1000)
        }
    };
    if parts.next().is_some() {
        return Err(bad());
    }
    if h > 24 || m > 59 || sec > 60 {
        return Err(range());
    }
    let micros = ((h * 60 + m) * 60 + sec) * 1_000_000 + frac;
    if micros > MAX_TIME_MICROS {
        return Err(range());
    }
    Ok(micros)
}

/// The interval in a non-null cell of any Arrow interval array.
fn interval_cell(array: &dyn Array, row: usize) -> Result<Interval> {
    use datafusion::arrow::datatypes::{
        IntervalDayTimeType, IntervalMonthDayNanoType, IntervalUnit, IntervalYearMonthType,
    };
    if row >= array.len() {
        return Err(SqlError::Internal("interval cell out of range".into()));
    }
    Ok(match array.data_type() {
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let v = array.as_primitive::<IntervalMonthDayNanoType>().value(row);
            Interval {
                months: v.months,
                days: v.days,
                micros: v.nanoseconds / 1000,
            }
        }
        DataType::Interval(IntervalUnit::DayTime) => {
            let v = array.as_primitive::<IntervalDayTimeType>().value(row);
            Interval {
                months: 0,
                days: v.days,
                micros: i64::from(v.milliseconds) * 1000,
            }
        }
        DataType::Interval(IntervalUnit::YearMonth) => Interval {
            months: array.as_primitive::<IntervalYearMonthType>().value(row),
            days: 0,
            micros: 0,
        },
        other => return Err(SqlError::Internal(format!("interval column holds {other}"))),
    })
}

/// Parses interval text (PostgreSQL's `interval_in`): 22007 if it is not
/// one, 22008 out of range.
pub fn interval_from_text(s: &str) -> Result<Interval> {
    parse_interval(s).map_err(|e| match e {
        IntervalError::Syntax => {
            SqlError::InvalidDatetime(format!("invalid input syntax for type interval: \"{s}\""))
        }
        IntervalError::OutOfRange => {
            SqlError::DatetimeOverflow(format!("interval out of range: \"{s}\""))
        }
    })
}

/// Parses a uuid's text form (PostgreSQL's `uuid_in`): 22P02 if it is not one.
pub fn uuid_from_text(s: &str) -> Result<[u8; UUID_LEN]> {
    parse_uuid(s).ok_or_else(|| {
        SqlError::InvalidText(format!("invalid input syntax for type uuid: \"{s}\""))
    })
}

/// [`encode_cell`] for a cell of a result or COPY column `field`: a
/// column declared `jsonb` gets jsonb's binary form (version byte 1, then
/// the text).
pub fn encode_field_cell(
    field: &datafusion::arrow::datatypes::Field,
    array: &dyn Array,
    row: usize,
    format: Format,
    out: &mut BytesMut,
) -> Result<()> {
    if format == Format::Binary
        && !array.is_null(row)
        && declared_type(field) == Some(ColumnType::Jsonb)
    {
        let mut s = String::new();
        cell_text(array, row, &mut s)?;
        let len = s
            .len()
            .checked_add(1)
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| SqlError::ProgramLimitExceeded("jsonb value too long".into()))?;
        out.put_i32(len);
        out.put_u8(1);
        out.put_slice(s.as_bytes());
        return Ok(());
    }
    encode_cell(array, row, format, out)
}

fn encode_binary(array: &dyn Array, row: usize, out: &mut BytesMut) -> Result<()> {
    match array.data_type() {
        DataType::Boolean => out.put_u8(array.as_boolean().value(row) as u8),
        DataType::Int8 => out.put_i16(array.as_primitive::<Int8Type>().value(row) as i16),
        DataType::Int16 => out.put_i16(array.as_primitive::<Int16Type>().value(row)),
        DataType::UInt8 => out.put_i16(array.as_primitive::<UInt8Type>().value(row) as i16),
        DataType::Int32 => out.put_i32(array.as_primitive::<Int32Type>().value(row)),
        DataType::UInt16 => out.put_i32(array.as_primitive::<UInt16Type>().value(row) as i32),
        DataType::Int64 => out.put_i64(array.as_primitive::<Int64Type>().value(row)),
        DataType::UInt32 => out.put_i64(array.as_primitive::<UInt32Type>().value(row) as i64),
        DataType::UInt64 => out.put_i64(array.as_primitive::<UInt64Type>().value(row) as i64),
        DataType::Float32 => out.put_f32(array.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => out.put_f64(array.as_primitive::<Float64Type>().value(row)),
        DataType::Decimal128(_, s) => {
            numeric_binary(array.as_primitive::<Decimal128Type>().value(row), *s, out)
        }
        DataType::Binary => out.put_slice(array.as_binary::<i32>().value(row)),
        DataType::LargeBinary => out.put_slice(array.as_binary::<i64>().value(row)),
        DataType::BinaryView => out.put_slice(array.as_binary_view().value(row)),
        DataType::FixedSizeBinary(16) => out.put_slice(&uuid_cell(array, row)?),
        DataType::Time64(_) | DataType::Time32(_) => out.put_i64(time_cell(array, row)?),
        dt @ (DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..))
            if pg_oid(dt) != oid::TEXT =>
        {
            let items = crate::array_type::list_items(array, row)
                .ok_or_else(|| SqlError::Internal("list cell out of range".into()))?;
            let elem_oid = pg_oid(items.data_type());
            crate::array_type::write_array_binary(items.as_ref(), elem_oid, out)?;
        }
        // interval: microseconds, days, months
        DataType::Interval(_) => {
            let iv = interval_cell(array, row)?;
            out.put_i64(iv.micros);
            out.put_i32(iv.days);
            out.put_i32(iv.months);
        }
        DataType::Date32 => out.put_i32(
            array
                .as_primitive::<Date32Type>()
                .value(row)
                .checked_sub(PG_EPOCH_DAYS)
                .ok_or_else(|| SqlError::DatetimeOverflow("date out of range".into()))?,
        ),
        DataType::Timestamp(unit, _) => out.put_i64(
            timestamp_micros(array, unit, row)?
                .checked_sub(PG_EPOCH_MICROS)
                .ok_or_else(|| SqlError::DatetimeOverflow("timestamp out of range".into()))?,
        ),
        // everything else is announced as text: its binary form is its text
        _ => {
            let mut s = String::new();
            cell_text(array, row, &mut s)?;
            out.put_slice(s.as_bytes());
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// decoding values (parameters, COPY input)

/// Parse the text form of a value into a column of type `ty`.
pub fn parse_text(s: &str, ty: ColumnType) -> Result<Value> {
    let bad = || {
        SqlError::InvalidText(format!(
            "invalid input syntax for type {}: \"{s}\"",
            ty.pg_name()
        ))
    };
    let out_of_range = || {
        SqlError::NumericOutOfRange(format!(
            "value \"{s}\" is out of range for type {}",
            ty.pg_name()
        ))
    };
    let t = s.trim();
    Ok(match ty {
        ColumnType::Boolean => match t.to_ascii_lowercase().as_str() {
            "t" | "true" | "yes" | "on" | "1" | "y" => Value::Boolean(true),
            "f" | "false" | "no" | "off" | "0" | "n" => Value::Boolean(false),
            _ => return Err(bad()),
        },
        ColumnType::SmallInt => {
            Value::SmallInt(
                parse_int::<i16>(t).map_err(|e| if e { out_of_range() } else { bad() })?,
            )
        }
        ColumnType::Int => {
            Value::Int(parse_int::<i32>(t).map_err(|e| if e { out_of_range() } else { bad() })?)
        }
        ColumnType::BigInt => {
            Value::BigInt(parse_int::<i64>(t).map_err(|e| if e { out_of_range() } else { bad() })?)
        }
        ColumnType::Real => {
            Value::Real(parse_float(t).map_err(|e| if e { out_of_range() } else { bad() })?)
        }
        ColumnType::Double => {
            Value::Double(parse_float(t).map_err(|e| if e { out_of_range() } else { bad() })?)
        }
        ColumnType::Decimal(..) if is_special_numeric(t) => {
            return Err(unstorable_numeric(t, ty));
        }
        ColumnType::Decimal(p, sc) => Value::Decimal(parse_decimal(t, p, sc).ok_or_else(|| {
            if t.chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
            {
                out_of_range()
            } else {
                bad()
            }
        })?),
        ColumnType::Text => Value::Text(s.to_string()),
        ColumnType::Varchar(_) | ColumnType::Char(_) => Value::Text(fit_length(s, ty)?),
        ColumnType::Date => Value::Date(date_from_text(t).map_err(|e| e.to_sql("date", s))?),
        ColumnType::Timestamp => Value::Timestamp(timestamp_wall_clock(t)?),
        ColumnType::TimestampTz => Value::Timestamp(timestamp_instant(t)?),
        ColumnType::Bytea => Value::Bytea(bytea_from_text(s)?),
        ColumnType::Uuid => Value::Uuid(uuid_from_text(s)?),
        ColumnType::Json => {
            crate::json::check_json(s)?;
            Value::Text(s.to_string())
        }
        ColumnType::Jsonb => Value::Text(crate::json::normalize_jsonb(s)?),
        ColumnType::Interval => Value::Interval(interval_from_text(s)?),
        ColumnType::Time => Value::Time(time_from_text(s)?),
        ColumnType::Array(e) => {
            Value::Array(crate::array_type::parse_array_text(s, e.column_type())?)
        }
    })
}

/// Text stored into `varchar(n)` or `char(n)`, as PostgreSQL's
/// `varchar_input` / `bpchar_input` check it on assignment: longer than n
/// characters is 22001 unless everything past n is spaces (then cut);
/// `char(n)` values are stored without trailing spaces (see
/// `ColumnType::Char`), which is how PostgreSQL compares them.
pub fn fit_length(s: &str, ty: ColumnType) -> Result<String> {
    let (limit, is_char) = match ty {
        ColumnType::Varchar(n) => (n, false),
        ColumnType::Char(n) => (n, true),
        _ => return Ok(s.to_string()),
    };
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let kept = match s.char_indices().nth(limit) {
        None => s,
        Some((cut, _)) => {
            let (head, tail) = s.split_at(cut);
            if tail.chars().any(|c| c != ' ') {
                return Err(SqlError::StringTooLong(ty.pg_name()));
            }
            head
        }
    };
    Ok(if is_char {
        kept.trim_end_matches(' ').to_string()
    } else {
        kept.to_string()
    })
}

/// `char(n)` as PostgreSQL prints it: padded with spaces to n characters.
pub fn pad_char(s: &str, n: u32, out: &mut String) {
    out.push_str(s);
    let len = s.chars().count();
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    out.extend(std::iter::repeat_n(' ', n.saturating_sub(len)));
}

/// `Err(true)` = out of range, `Err(false)` = not a number.
fn parse_int<T: std::str::FromStr + TryFrom<i128>>(t: &str) -> std::result::Result<T, bool> {
    match t.parse::<i128>() {
        Ok(v) => T::try_from(v).map_err(|_| true),
        Err(_) => {
            // PostgreSQL accepts "1.0"? No: int input rejects fractions. Keep strict.
            if !t.is_empty()
                && t.trim_start_matches(['-', '+'])
                    .chars()
                    .all(|c| c.is_ascii_digit())
            {
                Err(true)
            } else {
                Err(false)
            }
        }
    }
}

/// Float text as PostgreSQL's `float8in` / `float4in` read it: surrounding
/// whitespace, `NaN`, `Infinity`, `inf` with either sign in any case, and
/// decimal numbers. `Err(true)` for a number whose magnitude the type
/// cannot hold (overflow, or underflow to zero: 22003), `Err(false)` for
/// text that is not a number (22P02).
fn parse_float<F>(t: &str) -> std::result::Result<F, bool>
where
    F: std::str::FromStr + Copy + PartialEq + Into<f64>,
{
    let t = t.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    let special = matches!(body, "nan" | "inf" | "infinity");
    if special && lower.len() - body.len() > 1 {
        return Err(false);
    }
    // Rust also reads "nan", "inf" and "infinity" in any case, with a sign
    let v: F = lower.parse().map_err(|_| false)?;
    let f: f64 = v.into();
    if !special && f.is_infinite() {
        return Err(true);
    }
    if f == 0.0
        && body
            .split(['e'])
            .next()
            .is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)))
    {
        return Err(true);
    }
    Ok(v)
}

/// Text as `bytea` input, PostgreSQL's `byteain`: `\x` and hex digit pairs
/// (whitespace allowed between pairs), or the escape format where `\\` is
/// a backslash and `\ooo` (three octal digits, the first 0-3) a byte.
/// `None` for anything else; [`bytea_from_text`] says why.
pub fn parse_bytea_text(s: &str) -> Option<Vec<u8>> {
    bytea_from_text(s).ok()
}

/// [`parse_bytea_text`] with PostgreSQL's errors: 22023 for bad hex, 22P02
/// for a bad escape.
pub fn bytea_from_text(s: &str) -> Result<Vec<u8>> {
    let b = s.as_bytes();
    if let Some(hex) = b.strip_prefix(b"\\x") {
        let mut out = Vec::with_capacity(hex.len() / 2);
        let mut i = 0;
        while i < hex.len() {
            let c = hex[i];
            if matches!(c, b' ' | b'\n' | b'\t' | b'\r') {
                i += 1;
                continue;
            }
            let digit = |c: u8| {
                (c as char).to_digit(16).ok_or_else(|| {
                    SqlError::InvalidParameter(format!(
                        "invalid hexadecimal digit: \"{}\"",
                        String::from_utf8_lossy(&[c])
                    ))
                })
            };
            let hi = digit(c)?;
            let lo = match hex.get(i + 1) {
                Some(&c) => digit(c)?,
                None => {
                    return Err(SqlError::InvalidParameter(
                        "invalid hexadecimal data: odd number of digits".into(),
                    ))
                }
            };
            out.push((hi * 16 + lo) as u8);
            i += 2;
        }
        return Ok(out);
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        match (b.get(i + 1), b.get(i + 2), b.get(i + 3)) {
            (Some(&d1 @ b'0'..=b'3'), Some(&d2 @ b'0'..=b'7'), Some(&d3 @ b'0'..=b'7')) => {
                out.push(((d1 - b'0') << 6) | ((d2 - b'0') << 3) | (d3 - b'0'));
                i += 4;
            }
            (Some(b'\\'), _, _) => {
                out.push(b'\\');
                i += 2;
            }
            _ => {
                return Err(SqlError::InvalidText(
                    "invalid input syntax for type bytea".into(),
                ))
            }
        }
    }
    Ok(out)
}

/// `NaN`, `Infinity` and `-Infinity`, the numeric values Eddy's decimals
/// cannot hold.
fn is_special_numeric(t: &str) -> bool {
    [
        "nan",
        "infinity",
        "+infinity",
        "-infinity",
        "inf",
        "+inf",
        "-inf",
    ]
    .iter()
    .any(|w| t.eq_ignore_ascii_case(w))
}

fn unstorable_numeric(t: &str, ty: ColumnType) -> SqlError {
    SqlError::FeatureNotSupported(format!(
        "cannot convert {t} to type {}: Eddy has no NaN or infinite numeric",
        ty.pg_name()
    ))
}

/// Decode a binary-format value sent as PostgreSQL type `wire_oid`, then
/// convert it to the column type `ty`. Every length, header field and
/// range is checked before use: any byte string gives a value or an error.
pub fn parse_binary(b: &[u8], wire_oid: u32, ty: ColumnType) -> Result<Value> {
    let bad = || {
        SqlError::InvalidBinary(format!(
            "incorrect binary data format for a value of type oid {wire_oid}"
        ))
    };
    fn fixed<const N: usize>(b: &[u8], bad: impl Fn() -> SqlError) -> Result<[u8; N]> {
        b.try_into().map_err(|_| bad())
    }
    // an array (binary COPY into an array column): array_recv's layout,
    // checked by `binary_array_to_text`, then read by the element rules
    if let ColumnType::Array(_) = ty {
        return parse_text(&binary_array_to_text(b)?, ty);
    }
    let v = match wire_oid {
        oid::BOOL => Value::Boolean(fixed::<1>(b, bad)?[0] != 0),
        oid::INT2 => Value::SmallInt(i16::from_be_bytes(fixed(b, bad)?)),
        oid::INT4 | oid::OID => Value::Int(i32::from_be_bytes(fixed(b, bad)?)),
        oid::INT8 => Value::BigInt(i64::from_be_bytes(fixed(b, bad)?)),
        oid::FLOAT4 => Value::Real(f32::from_be_bytes(fixed(b, bad)?)),
        oid::FLOAT8 => Value::Double(f64::from_be_bytes(fixed(b, bad)?)),
        oid::DATE => Value::Date(date_from_binary(i32::from_be_bytes(fixed(b, bad)?))?),
        // timestamptz and timestamp convert through the session time
        // zone, which is UTC: the same microseconds
        oid::TIMESTAMP | oid::TIMESTAMPTZ => {
            Value::Timestamp(timestamp_from_binary(i64::from_be_bytes(fixed(b, bad)?))?)
        }
        oid::BYTEA => Value::Bytea(b.to_vec()),
        oid::UUID => Value::Uuid(fixed(b, bad)?),
        oid::TIME => {
            let t = i64::from_be_bytes(fixed(b, bad)?);
            if !(0..=MAX_TIME_MICROS).contains(&t) {
                return Err(SqlError::DatetimeOverflow("time out of range".into()));
            }
            Value::Time(t)
        }
        oid::INTERVAL => {
            let raw: [u8; 16] = fixed(b, bad)?;
            let (m, rest) = raw.split_at(8);
            let (d, mo) = rest.split_at(4);
            let micros = i64::from_be_bytes(m.try_into().map_err(|_| bad())?);
            if micros.unsigned_abs() > eddy_common::interval::MAX_INTERVAL_MICROS.unsigned_abs() {
                return Err(SqlError::DatetimeOverflow("interval out of range".into()));
            }
            Value::Interval(Interval {
                micros,
                days: i32::from_be_bytes(d.try_into().map_err(|_| bad())?),
                months: i32::from_be_bytes(mo.try_into().map_err(|_| bad())?),
            })
        }
        // jsonb's binary form: version 1, then the text
        oid::JSONB => {
            let text = match b.split_first() {
                Some((1, text)) => text,
                Some((v, _)) => {
                    return Err(SqlError::InvalidBinary(format!(
                        "unsupported jsonb version number {v}"
                    )))
                }
                None => return Err(bad()),
            };
            let s = std::str::from_utf8(text)
                .map_err(|_| SqlError::InvalidEncoding(" in a parameter".into()))?;
            return parse_text(s, ty);
        }
        oid::NUMERIC => {
            let special = match parse_numeric_binary(b)? {
                WireNumeric::Finite(text) => return parse_text(&text, ty),
                WireNumeric::NaN => "NaN",
                WireNumeric::Infinity => "Infinity",
                WireNumeric::NegInfinity => "-Infinity",
            };
            // floats and text hold these; decimals and integers cannot
            return match ty {
                ColumnType::Real | ColumnType::Double | ColumnType::Text => parse_text(special, ty),
                _ => Err(unstorable_numeric(special, ty)),
            };
        }
        // text-like and unknown types: the bytes are the text form
        _ => {
            let s = std::str::from_utf8(b)
                .map_err(|_| SqlError::InvalidEncoding(" in a parameter".into()))?;
            return parse_text(s, ty);
        }
    };
    coerce_value(v, ty)
}

/// PostgreSQL's `MAXDIM`.
const MAX_ARRAY_DIMS: i32 = 6;

/// Reads big-endian fields off client bytes; running short is an error.
struct WireReader<'a> {
    b: &'a [u8],
}

impl<'a> WireReader<'a> {
    fn short() -> SqlError {
        SqlError::InvalidBinary("insufficient data left in message".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.b.len() {
            return Err(Self::short());
        }
        let (head, tail) = self.b.split_at(n);
        self.b = tail;
        Ok(head)
    }

    fn i32(&mut self) -> Result<i32> {
        let s = self.take(4)?;
        Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn remaining(&self) -> usize {
        self.b.len()
    }
}

/// A binary-format one-dimensional array parameter as its text literal
/// `{"a","b",NULL}`. The header (dimensions, flags, element count) is
/// checked against the bytes actually present before anything is
/// allocated, and the elements must use up the value exactly.
pub fn binary_array_to_text(b: &[u8]) -> Result<String> {
    let mut r = WireReader { b };
    let ndim = r.i32()?;
    let flags = r.i32()?;
    let elem_oid = u32::from_be_bytes(r.i32()?.to_be_bytes());
    if !(0..=MAX_ARRAY_DIMS).contains(&ndim) {
        return Err(SqlError::InvalidBinary(format!(
            "invalid number of dimensions: {ndim}"
        )));
    }
    if flags != 0 && flags != 1 {
        return Err(SqlError::InvalidBinary("invalid array flags".into()));
    }
    let mut count: usize = 1;
    for _ in 0..ndim {
        let len = r.i32()?;
        let lower = r.i32()?;
        let len = usize::try_from(len)
            .map_err(|_| SqlError::InvalidBinary(format!("invalid array dimension {len}")))?;
        if lower
            .checked_add(i32::try_from(len).unwrap_or(i32::MAX))
            .is_none()
        {
            return Err(SqlError::InvalidBinary(
                "array lower bound is too large".into(),
            ));
        }
        if lower != 1 && len > 0 {
            return Err(SqlError::FeatureNotSupported(format!(
                "arrays with a lower bound other than 1 are not supported (lower bound {lower})"
            )));
        }
        count = count.saturating_mul(len);
    }
    if ndim == 0 {
        count = 0;
    }
    // every element takes at least its 4-byte length: a count the bytes
    // cannot back is refused before it sizes anything
    if count > r.remaining() / 4 {
        return Err(WireReader::short());
    }
    if ndim > 1 {
        return Err(SqlError::FeatureNotSupported(
            "only one-dimensional array parameters are supported".into(),
        ));
    }
    let ty = column_type_for_oid(elem_oid).unwrap_or(ColumnType::Text);
    let mut out = String::from("{");
    for i in 0..count {
        if i > 0 {
            out.push(',');
        }
        let len = r.i32()?;
        if len == -1 {
            out.push_str("NULL");
            continue;
        }
        let len = usize::try_from(len).map_err(|_| WireReader::short())?;
        let raw = r.take(len)?;
        // numeric elements keep their own scale
        let v = if elem_oid == oid::NUMERIC {
            parse_param(raw, elem_oid, true)?
        } else {
            parse_binary(raw, elem_oid, ty)?
        };
        let t = value_text(&v, None);
        out.push('"');
        for c in t.chars() {
            if c == '\\' || c == '"' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    }
    if r.remaining() != 0 {
        return Err(SqlError::InvalidBinary(
            "incorrect binary data format in array value".into(),
        ));
    }
    out.push('}');
    Ok(out)
}

/// Convert a value to column type `ty` (integer widening/narrowing with a
/// range check, numbers to floats and decimals, anything to text).
pub fn coerce_value(v: Value, ty: ColumnType) -> Result<Value> {
    if let (Value::Text(s), ColumnType::Varchar(_) | ColumnType::Char(_)) = (&v, ty) {
        return Ok(Value::Text(fit_length(s, ty)?));
    }
    // text into json / jsonb is checked (and jsonb normalized)
    if let (Value::Text(s), ColumnType::Json | ColumnType::Jsonb) = (&v, ty) {
        return parse_text(s, ty);
    }
    // each element by its type's rules (varchar(n) length, numeric range)
    if let (Value::Array(items), ColumnType::Array(e)) = (&v, ty) {
        let et = e.column_type();
        return Ok(Value::Array(
            items
                .iter()
                .map(|x| match x {
                    Value::Null => Ok(Value::Null),
                    Value::Array(_) => Err(SqlError::FeatureNotSupported(
                        "multidimensional arrays are not supported".into(),
                    )),
                    x => coerce_value(x.clone(), et),
                })
                .collect::<Result<_>>()?,
        ));
    }
    if v.fits(ty) {
        return Ok(v);
    }
    let as_i128 = match &v {
        Value::SmallInt(x) => Some(*x as i128),
        Value::Int(x) => Some(*x as i128),
        Value::BigInt(x) => Some(*x as i128),
        _ => None,
    };
    let range =
        || SqlError::NumericOutOfRange(format!("value out of range for type {}", ty.pg_name()));
    Ok(match (ty, as_i128) {
        (ColumnType::SmallInt, Some(x)) => Value::SmallInt(i16::try_from(x).map_err(|_| range())?),
        (ColumnType::Int, Some(x)) => Value::Int(i32::try_from(x).map_err(|_| range())?),
        (ColumnType::BigInt, Some(x)) => Value::BigInt(i64::try_from(x).map_err(|_| range())?),
        (ColumnType::Real, Some(x)) => Value::Real(x as f32),
        (ColumnType::Double, Some(x)) => Value::Double(x as f64),
        (ColumnType::Decimal(p, s), Some(x)) => {
            Value::Decimal(parse_decimal(&x.to_string(), p, s).ok_or_else(range)?)
        }
        _ => match (ty, &v) {
            (ColumnType::Double, Value::Real(f)) => Value::Double(*f as f64),
            (ColumnType::Real, Value::Double(f)) => Value::Real(*f as f32),
            (ColumnType::Timestamp | ColumnType::TimestampTz, Value::Date(d)) => Value::Timestamp(
                i64::from(*d)
                    .checked_mul(MICROS_PER_DAY)
                    .ok_or_else(|| SqlError::DatetimeOverflow("timestamp out of range".into()))?,
            ),
            (_, Value::Text(s)) => parse_text(s, ty)?,
            _ => {
                let text = value_text(&v, None);
                parse_text(&text, ty).map_err(|_| {
                    SqlError::DatatypeMismatch(format!(
                        "value {text} cannot be used as type {}",
                        ty.pg_name()
                    ))
                })?
            }
        },
    })
}

/// The text form of a stored value (`scale` for decimals).
pub fn value_text(v: &Value, scale: Option<i8>) -> String {
    let mut out = String::new();
    match v {
        Value::Null => return "NULL".into(),
        Value::Boolean(b) => out.push(if *b { 't' } else { 'f' }),
        Value::SmallInt(x) => out = x.to_string(),
        Value::Int(x) => out = x.to_string(),
        Value::BigInt(x) => out = x.to_string(),
        Value::Real(x) => float32_text(*x, &mut out),
        Value::Double(x) => float_text(*x, &mut out),
        Value::Decimal(x) => out = format_decimal(*x, scale.unwrap_or(0)),
        Value::Text(s) => out = s.clone(),
        Value::Date(d) => write_date(*d as i64, &mut out),
        Value::Timestamp(t) => write_timestamp(*t, &mut out),
        Value::Bytea(b) => hex_bytea(b, &mut out),
        Value::Uuid(u) => out = format_uuid(u),
        Value::Interval(iv) => out = format_interval(*iv),
        Value::Time(t) => write_time(*t, &mut out),
        Value::Array(items) => out = crate::array_type::array_value_text(items, scale),
    }
    out
}

// ---------------------------------------------------------------------------
// Values <-> Arrow

/// The value of one cell of a column of type `ty`.
pub fn cell_value(array: &dyn Array, row: usize, ty: ColumnType) -> Result<Value> {
    if array.is_null(row) {
        return Ok(Value::Null);
    }
    let mismatch = || {
        SqlError::Internal(format!(
            "column of type {} holds Arrow {}",
            ty.pg_name(),
            array.data_type()
        ))
    };
    Ok(match (ty.storage(), array.data_type()) {
        (ColumnType::Boolean, DataType::Boolean) => Value::Boolean(array.as_boolean().value(row)),
        (ColumnType::SmallInt, DataType::Int16) => {
            Value::SmallInt(array.as_primitive::<Int16Type>().value(row))
        }
        (ColumnType::Int, DataType::Int32) => {
            Value::Int(array.as_primitive::<Int32Type>().value(row))
        }
        (ColumnType::BigInt, DataType::Int64) => {
            Value::BigInt(array.as_primitive::<Int64Type>().value(row))
        }
        (ColumnType::Real, DataType::Float32) => {
            Value::Real(array.as_primitive::<Float32Type>().value(row))
        }
        (ColumnType::Double, DataType::Float64) => {
            Value::Double(array.as_primitive::<Float64Type>().value(row))
        }
        (ColumnType::Decimal(..), DataType::Decimal128(..)) => {
            Value::Decimal(array.as_primitive::<Decimal128Type>().value(row))
        }
        (ColumnType::Text, DataType::Utf8) => {
            Value::Text(array.as_string::<i32>().value(row).to_string())
        }
        (ColumnType::Text, DataType::Utf8View) => {
            Value::Text(array.as_string_view().value(row).to_string())
        }
        (ColumnType::Date, DataType::Date32) => {
            Value::Date(array.as_primitive::<Date32Type>().value(row))
        }
        (ColumnType::Timestamp, DataType::Timestamp(unit, _)) => {
            Value::Timestamp(timestamp_micros(array, unit, row)?)
        }
        (ColumnType::Bytea, DataType::Binary) => {
            Value::Bytea(array.as_binary::<i32>().value(row).to_vec())
        }
        (ColumnType::Bytea, DataType::BinaryView) => {
            Value::Bytea(array.as_binary_view().value(row).to_vec())
        }
        (ColumnType::Uuid, DataType::FixedSizeBinary(16)) => Value::Uuid(uuid_cell(array, row)?),
        (ColumnType::Time, DataType::Time64(_) | DataType::Time32(_)) => {
            Value::Time(time_cell(array, row)?)
        }
        (ColumnType::Interval, DataType::Interval(_)) => {
            Value::Interval(interval_cell(array, row)?)
        }
        (ColumnType::Array(e), DataType::List(_) | DataType::LargeList(_)) => {
            let items = crate::array_type::list_items(array, row).ok_or_else(mismatch)?;
            let et = e.column_type();
            Value::Array(
                (0..items.len())
                    .map(|i| cell_value(items.as_ref(), i, et))
                    .collect::<Result<_>>()?,
            )
        }
        _ => return Err(mismatch()),
    })
}

/// A builder for one column of type `ty`.
pub fn builder_for(ty: ColumnType, capacity: usize) -> Box<dyn ArrayBuilder> {
    match ty {
        ColumnType::Boolean => Box::new(BooleanBuilder::with_capacity(capacity)),
        ColumnType::SmallInt => Box::new(Int16Builder::with_capacity(capacity)),
        ColumnType::Int => Box::new(Int32Builder::with_capacity(capacity)),
        ColumnType::BigInt => Box::new(Int64Builder::with_capacity(capacity)),
        ColumnType::Real => Box::new(Float32Builder::with_capacity(capacity)),
        ColumnType::Double => Box::new(Float64Builder::with_capacity(capacity)),
        ColumnType::Decimal(p, s) => Box::new(
            Decimal128Builder::with_capacity(capacity)
                .with_precision_and_scale(p, s)
                .unwrap_or_else(|_| Decimal128Builder::with_capacity(capacity)),
        ),
        ColumnType::Text
        | ColumnType::Varchar(_)
        | ColumnType::Char(_)
        | ColumnType::Json
        | ColumnType::Jsonb => Box::new(StringBuilder::with_capacity(capacity, capacity * 16)),
        ColumnType::Date => Box::new(Date32Builder::with_capacity(capacity)),
        ColumnType::Timestamp | ColumnType::TimestampTz => Box::new(
            TimestampMicrosecondBuilder::with_capacity(capacity).with_data_type(ty.to_arrow()),
        ),
        ColumnType::Bytea => Box::new(BinaryBuilder::with_capacity(capacity, capacity * 16)),
        ColumnType::Uuid => Box::new(FixedSizeBinaryBuilder::with_capacity(
            capacity,
            UUID_LEN_I32,
        )),
        ColumnType::Interval => Box::new(IntervalMonthDayNanoBuilder::with_capacity(capacity)),
        ColumnType::Time => {
            Box::new(datafusion::arrow::array::Time64MicrosecondBuilder::with_capacity(capacity))
        }
        ColumnType::Array(e) => {
            let et = e.column_type();
            Box::new(
                ListOfAny::with_capacity(builder_for(et, capacity), capacity).with_field(Arc::new(
                    datafusion::arrow::datatypes::Field::new_list_field(et.to_arrow(), true),
                )),
            )
        }
    }
}

/// The builder [`builder_for`] makes for an array column.
type ListOfAny = datafusion::arrow::array::ListBuilder<Box<dyn ArrayBuilder>>;

/// Append a value (already of type `ty`, or NULL) to a builder from [`builder_for`].
pub fn append_value(b: &mut dyn ArrayBuilder, ty: ColumnType, v: &Value) -> Result<()> {
    macro_rules! push {
        ($builder:ty, $val:expr) => {{
            let bb = b
                .as_any_mut()
                .downcast_mut::<$builder>()
                .ok_or_else(|| SqlError::Internal("builder type mismatch".into()))?;
            match $val {
                Some(x) => bb.append_value(x),
                None => bb.append_null(),
            }
        }};
    }
    let wrong = || {
        SqlError::DatatypeMismatch(format!(
            "value {} does not fit type {}",
            value_text(v, None),
            ty.pg_name()
        ))
    };
    match ty {
        ColumnType::Boolean => push!(
            BooleanBuilder,
            match v {
                Value::Boolean(x) => Some(*x),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::SmallInt => push!(
            Int16Builder,
            match v {
                Value::SmallInt(x) => Some(*x),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::Int => push!(
            Int32Builder,
            match v {
                Value::Int(x) => Some(*x),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::BigInt => push!(
            Int64Builder,
            match v {
                Value::BigInt(x) => Some(*x),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::Real => push!(
            Float32Builder,
            match v {
                Value::Real(x) => Some(*x),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::Double => push!(
            Float64Builder,
            match v {
                Value::Double(x) => Some(*x),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::Decimal(..) => push!(
            Decimal128Builder,
            match v {
                Value::Decimal(x) => Some(*x),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::Text
        | ColumnType::Varchar(_)
        | ColumnType::Char(_)
        | ColumnType::Json
        | ColumnType::Jsonb => push!(
            StringBuilder,
            match v {
                Value::Text(x) => Some(x.as_str()),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::Date => push!(
            Date32Builder,
            match v {
                Value::Date(x) => Some(*x),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::Timestamp | ColumnType::TimestampTz => push!(
            TimestampMicrosecondBuilder,
            match v {
                Value::Timestamp(x) => Some(*x),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::Bytea => push!(
            BinaryBuilder,
            match v {
                Value::Bytea(x) => Some(x.as_slice()),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::Uuid => {
            let bb = b
                .as_any_mut()
                .downcast_mut::<FixedSizeBinaryBuilder>()
                .ok_or_else(|| SqlError::Internal("builder type mismatch".into()))?;
            match v {
                Value::Uuid(x) => bb.append_value(x)?,
                Value::Null => bb.append_null(),
                _ => return Err(wrong()),
            }
        }
        ColumnType::Time => push!(
            datafusion::arrow::array::Time64MicrosecondBuilder,
            match v {
                Value::Time(x) => Some(*x),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::Interval => push!(
            IntervalMonthDayNanoBuilder,
            match v {
                Value::Interval(x) => Some(interval_arrow(*x)?),
                Value::Null => None,
                _ => return Err(wrong()),
            }
        ),
        ColumnType::Array(e) => {
            let bb = b
                .as_any_mut()
                .downcast_mut::<ListOfAny>()
                .ok_or_else(|| SqlError::Internal("builder type mismatch".into()))?;
            match v {
                Value::Array(items) => {
                    for item in items {
                        if matches!(item, Value::Array(_)) {
                            return Err(wrong());
                        }
                        append_value(bb.values().as_mut(), e.column_type(), item)?;
                    }
                    bb.append(true);
                }
                Value::Null => bb.append_null(),
                _ => return Err(wrong()),
            }
        }
    }
    Ok(())
}

/// An interval as Arrow's month-day-nanosecond value; 22008 past its range.
pub fn interval_arrow(iv: Interval) -> Result<IntervalMonthDayNano> {
    let nanos = iv
        .nanos()
        .ok_or_else(|| SqlError::DatetimeOverflow("interval out of range".into()))?;
    Ok(IntervalMonthDayNano::new(iv.months, iv.days, nanos))
}

/// An interval as text Arrow's interval cast reads exactly (its own
/// parser does not know PostgreSQL's `04:05:06` or ISO 8601 forms).
pub fn interval_arrow_text(iv: Interval) -> String {
    format!(
        "{} mons {} days {} microseconds",
        iv.months, iv.days, iv.micros
    )
}

/// Build a batch of `schema` (whose fields are Eddy column types) from rows.
pub fn rows_to_batch(
    schema: &SchemaRef,
    types: &[ColumnType],
    rows: &[Row],
) -> Result<RecordBatch> {
    let mut builders: Vec<Box<dyn ArrayBuilder>> =
        types.iter().map(|t| builder_for(*t, rows.len())).collect();
    for row in rows {
        for (i, b) in builders.iter_mut().enumerate() {
            let v = row.get(i).unwrap_or(&Value::Null);
            append_value(b.as_mut(), types[i], v)?;
        }
    }
    let arrays: Vec<ArrayRef> = builders.iter_mut().map(|b| b.finish()).collect();
    Ok(RecordBatch::try_new(Arc::clone(schema), arrays)?)
}

/// The rows of a batch whose first `types.len()` columns have Eddy types.
pub fn batch_to_rows(batch: &RecordBatch, types: &[ColumnType]) -> Result<Vec<Row>> {
    let mut rows = Vec::with_capacity(batch.num_rows());
    for r in 0..batch.num_rows() {
        let mut row = Vec::with_capacity(types.len());
        for (i, ty) in types.iter().enumerate() {
            row.push(cell_value(batch.column(i).as_ref(), r, *ty)?);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// A DataFusion literal for a stored value.
pub fn value_to_scalar(v: &Value, ty: ColumnType) -> ScalarValue {
    match (v, ty) {
        (Value::Null, t) => ScalarValue::try_from(&t.to_arrow()).unwrap_or(ScalarValue::Null),
        (Value::Boolean(b), _) => ScalarValue::Boolean(Some(*b)),
        (Value::SmallInt(x), _) => ScalarValue::Int16(Some(*x)),
        (Value::Int(x), _) => ScalarValue::Int32(Some(*x)),
        (Value::BigInt(x), _) => ScalarValue::Int64(Some(*x)),
        (Value::Real(x), _) => ScalarValue::Float32(Some(*x)),
        (Value::Double(x), _) => ScalarValue::Float64(Some(*x)),
        (Value::Decimal(x), ColumnType::Decimal(p, s)) => ScalarValue::Decimal128(Some(*x), p, s),
        (Value::Decimal(x), _) => ScalarValue::Decimal128(Some(*x), 38, 0),
        (Value::Text(s), _) => ScalarValue::Utf8(Some(s.clone())),
        (Value::Date(d), _) => ScalarValue::Date32(Some(*d)),
        (Value::Timestamp(t), ColumnType::TimestampTz) => {
            ScalarValue::TimestampMicrosecond(Some(*t), Some(eddy_common::UTC_OFFSET.into()))
        }
        (Value::Timestamp(t), _) => ScalarValue::TimestampMicrosecond(Some(*t), None),
        (Value::Bytea(b), _) => ScalarValue::Binary(Some(b.clone())),
        (Value::Uuid(u), _) => ScalarValue::FixedSizeBinary(UUID_LEN_I32, Some(u.to_vec())),
        (Value::Interval(iv), _) => ScalarValue::IntervalMonthDayNano(interval_arrow(*iv).ok()),
        (Value::Time(t), _) => ScalarValue::Time64Microsecond(Some(*t)),
        (Value::Array(items), ColumnType::Array(e)) => {
            let et = e.column_type();
            let scalars: Vec<ScalarValue> = items.iter().map(|x| value_to_scalar(x, et)).collect();
            ScalarValue::List(ScalarValue::new_list_nullable(&scalars, &et.to_arrow()))
        }
        (Value::Array(items), _) => {
            ScalarValue::Utf8(Some(crate::array_type::array_value_text(items, None)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Decimal128Array, Int32Array};

    #[test]
    fn uuids_parse_and_print_as_postgresql() {
        let u = [
            0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38,
            0x0a, 0x11,
        ];
        let text = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
        assert_eq!(
            parse_text("{A0EEBC99-9C0B4EF8-BB6D6BB9-BD380A11}", ColumnType::Uuid).unwrap(),
            Value::Uuid(u)
        );
        assert_eq!(value_text(&Value::Uuid(u), None), text);
        assert_eq!(
            parse_param(text.as_bytes(), oid::UUID, false).unwrap(),
            Value::Uuid(u)
        );
        assert_eq!(parse_param(&u, oid::UUID, true).unwrap(), Value::Uuid(u));
        // binary: exactly 16 bytes
        for bad in [&u[..15], &[0u8; 17][..], &[][..]] {
            let e = parse_param(bad, oid::UUID, true).unwrap_err();
            assert_eq!(e.sqlstate(), "22P03");
        }
        for bad in ["", "a0eebc99", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11x", "é"] {
            let e = parse_text(bad, ColumnType::Uuid).unwrap_err();
            assert_eq!(e.sqlstate(), "22P02", "{bad}");
        }
        // through Arrow and back, text and binary
        let schema = Arc::new(datafusion::arrow::datatypes::Schema::new(vec![
            datafusion::arrow::datatypes::Field::new("u", ColumnType::Uuid.to_arrow(), true),
        ]));
        let batch = rows_to_batch(
            &schema,
            &[ColumnType::Uuid],
            &[vec![Value::Uuid(u)], vec![Value::Null]],
        )
        .unwrap();
        assert_eq!(pg_oid(batch.schema().field(0).data_type()), oid::UUID);
        let mut out = BytesMut::new();
        encode_cell(batch.column(0).as_ref(), 0, Format::Binary, &mut out).unwrap();
        assert_eq!(&out[4..], &u[..]);
        let mut s = String::new();
        cell_text(batch.column(0).as_ref(), 0, &mut s).unwrap();
        assert_eq!(s, text);
        assert_eq!(
            batch_to_rows(&batch, &[ColumnType::Uuid]).unwrap(),
            vec![vec![Value::Uuid(u)], vec![Value::Null]]
        );
        // a uuid array parameter's elements
        let mut arr = BytesMut::new();
        arr.put_i32(1);
        arr.put_i32(1);
        arr.put_u32(oid::UUID);
        arr.put_i32(2);
        arr.put_i32(1);
        arr.put_i32(16);
        arr.put_slice(&u);
        arr.put_i32(-1);
        assert_eq!(
            binary_array_to_text(&arr).unwrap(),
            format!("{{\"{text}\",NULL}}")
        );
    }

    #[test]
    fn intervals_and_json_decode_with_checked_lengths() {
        let iv = Interval {
            months: 14,
            days: 3,
            micros: 14_706_000_000,
        };
        let mut b = BytesMut::new();
        b.put_i64(iv.micros);
        b.put_i32(iv.days);
        b.put_i32(iv.months);
        assert_eq!(
            parse_param(&b, oid::INTERVAL, true).unwrap(),
            Value::Interval(iv)
        );
        assert_eq!(
            value_text(&Value::Interval(iv), None),
            "1 year 2 mons 3 days 04:05:06"
        );
        for bad in [&b[..15], &[0u8; 17][..], &[][..]] {
            assert_eq!(
                parse_param(bad, oid::INTERVAL, true)
                    .unwrap_err()
                    .sqlstate(),
                "22P03"
            );
        }
        let mut huge = BytesMut::new();
        huge.put_i64(i64::MAX);
        huge.put_i64(0);
        assert_eq!(
            parse_param(&huge, oid::INTERVAL, true)
                .unwrap_err()
                .sqlstate(),
            "22008"
        );
        assert_eq!(
            parse_text("1 fortnight", ColumnType::Interval)
                .unwrap_err()
                .sqlstate(),
            "22007"
        );
        // jsonb binary: version 1 then text; anything else refused
        assert_eq!(
            parse_param(b"\x01{\"b\":1,\"a\":2}", oid::JSONB, true).unwrap(),
            Value::Text(r#"{"a": 2, "b": 1}"#.into())
        );
        assert_eq!(
            parse_param(b"\x02{}", oid::JSONB, true)
                .unwrap_err()
                .sqlstate(),
            "22P03"
        );
        assert_eq!(
            parse_param(b"", oid::JSONB, true).unwrap_err().sqlstate(),
            "22P03"
        );
        assert_eq!(
            parse_param(b"{", oid::JSON, false).unwrap_err().sqlstate(),
            "22P02"
        );
        assert_eq!(
            coerce_value(Value::Text("[1,2]".into()), ColumnType::Jsonb).unwrap(),
            Value::Text("[1, 2]".into())
        );
    }

    #[test]
    fn dates_round_trip() {
        for d in [-800_000i64, -1, 0, 1, 10_957, 19_000, 2_932_896] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
        assert_eq!(parse_date("2024-02-29"), Some(19_782));
        assert_eq!(parse_date("2023-02-29"), None);
        let mut s = String::new();
        write_timestamp(parse_timestamp("2024-01-02 03:04:05.25").unwrap(), &mut s);
        assert_eq!(s, "2024-01-02 03:04:05.25");
    }

    #[test]
    fn decimals_parse_and_format() {
        assert_eq!(parse_decimal("12.345", 10, 2), Some(1235));
        assert_eq!(parse_decimal("-0.5", 10, 0), Some(-1));
        assert_eq!(parse_decimal("1e3", 10, 1), Some(10_000));
        assert_eq!(parse_decimal("abc", 10, 2), None);
        assert_eq!(parse_decimal("1000", 3, 0), None);
        assert_eq!(format_decimal(-5, 2), "-0.05");
        assert_eq!(format_decimal(12345, 2), "123.45");
    }

    #[test]
    fn numeric_binary_round_trips() {
        for (v, s) in [(12345i128, 2i8), (-1, 3), (0, 0), (100_000_000, 0), (5, 6)] {
            let mut out = BytesMut::new();
            numeric_binary(v, s, &mut out);
            let text = parse_numeric_binary(&out).unwrap();
            assert_eq!(text, WireNumeric::Finite(format_decimal(v, s)), "{v} {s}");
        }
    }

    #[test]
    fn bytea_text_is_read_as_byteain_does() {
        // answers from PostgreSQL 15
        assert_eq!(bytea_from_text("\\x68656c6c6f").unwrap(), b"hello");
        assert_eq!(bytea_from_text("\\x68 65\n6C").unwrap(), b"hel");
        assert_eq!(bytea_from_text("\\x").unwrap(), b"");
        assert_eq!(bytea_from_text("\\000ab\\\\c").unwrap(), b"\0ab\\c");
        assert_eq!(bytea_from_text("a\\101\\377").unwrap(), b"aA\xff");
        assert_eq!(bytea_from_text("plain é").unwrap(), "plain é".as_bytes());
        for (bad, state) in [
            ("\\x6", "22023"),
            ("\\x6g", "22023"),
            ("\\x6 8", "22023"),
            ("\\9", "22P02"),
            ("\\400", "22P02"),
            ("\\00", "22P02"),
            ("ab\\", "22P02"),
            ("\\X41", "22P02"),
        ] {
            assert_eq!(bytea_from_text(bad).unwrap_err().sqlstate(), state, "{bad}");
        }
        assert_eq!(
            parse_text("\\001", ColumnType::Bytea).unwrap(),
            Value::Bytea(vec![1])
        );
    }

    #[test]
    fn floats_read_and_print_as_postgresql_does() {
        // answers from PostgreSQL 15 (float8in / float8out, float4out)
        let f = |s: &str| match parse_text(s, ColumnType::Double) {
            Ok(Value::Double(v)) => value_text(&Value::Double(v), None),
            Ok(other) => panic!("{other:?}"),
            Err(e) => e.sqlstate().to_string(),
        };
        for (input, want) in [
            ("NaN", "NaN"),
            ("nan", "NaN"),
            ("Infinity", "Infinity"),
            (" -INFINITY ", "-Infinity"),
            ("inf", "Infinity"),
            ("+inf", "Infinity"),
            ("-Inf", "-Infinity"),
            ("1e15", "1e+15"),
            ("1e14", "100000000000000"),
            ("123456789012345678", "1.2345678901234568e+17"),
            ("0.0001", "0.0001"),
            ("0.00001", "1e-05"),
            ("-1.5e-7", "-1.5e-07"),
            ("1.5e300", "1.5e+300"),
            ("0.1", "0.1"),
            ("-0", "-0"),
            ("1e400", "22003"),
            ("1e-400", "22003"),
            ("--1", "22P02"),
            ("+-inf", "22P02"),
            ("1.5x", "22P02"),
            ("", "22P02"),
        ] {
            assert_eq!(f(input), want, "{input}");
        }
        let r = |s: &str| match parse_text(s, ColumnType::Real) {
            Ok(Value::Real(v)) => value_text(&Value::Real(v), None),
            Ok(other) => panic!("{other:?}"),
            Err(e) => e.sqlstate().to_string(),
        };
        for (input, want) in [
            ("1234567", "1.234567e+06"),
            ("123456", "123456"),
            ("0.1", "0.1"),
            ("-inf", "-Infinity"),
            ("NAN", "NaN"),
            ("3.4e39", "22003"),
            ("1e-50", "22003"),
        ] {
            assert_eq!(r(input), want, "{input}");
        }
    }

    #[test]
    fn numeric_text_keeps_its_scale() {
        // answers from PostgreSQL 15: SELECT '<input>'::numeric
        let n = |s: &str| match numeric_from_text(s) {
            Ok(v) => v.into_text(),
            Err(e) => e.sqlstate().to_string(),
        };
        for (input, want) in [
            ("12345.6789", "12345.6789"),
            ("1.50", "1.50"),
            (" -001.50 ", "-1.50"),
            ("+.5", "0.5"),
            ("5.", "5"),
            ("1e3", "1000"),
            ("1.50e1", "15.0"),
            ("1.5E+1", "15"),
            ("5e-3", "0.005"),
            ("-0.00", "0.00"),
            ("0", "0"),
            ("NaN", "NaN"),
            ("-inf", "-Infinity"),
            ("Infinity", "Infinity"),
            ("0e5000000", "0"),
            ("1e131072", "22003"),
            ("1e-16384", "22003"),
            ("1e2147483648", "22003"),
            ("1e99999999999", "22003"),
            ("1e", "22P02"),
            ("1.2.3", "22P02"),
            (".", "22P02"),
            ("1_000", "22P02"),
            ("--1", "22P02"),
            ("", "22P02"),
        ] {
            assert_eq!(n(input), want, "{input}");
        }
        assert_eq!(n("1e1000").len(), 1001);
        assert_eq!(n("1e-1001").len(), 1003);
        assert_eq!(n("1e131071").len(), 131_072);
        assert_eq!(n("1e-16383").len(), 16_385);
    }

    #[test]
    fn numeric_parameters_keep_their_scale_until_they_meet_a_column() {
        // Before: parsed at scale 10, so 12345.6789 went into a
        // NUMERIC(18,4) column as 12345678900.0000.
        let text = parse_param(b"12345.6789", oid::NUMERIC, false).unwrap();
        assert_eq!(text, Value::Text("12345.6789".into()));
        let mut bin = BytesMut::new();
        numeric_binary(150, 2, &mut bin);
        let v = parse_param(&bin, oid::NUMERIC, true).unwrap();
        assert_eq!(v, Value::Text("1.50".into()));
        assert_eq!(
            coerce_value(text, ColumnType::Decimal(18, 4)).unwrap(),
            Value::Decimal(123_456_789)
        );
        assert_eq!(
            coerce_value(v, ColumnType::Decimal(10, 2)).unwrap(),
            Value::Decimal(150)
        );
        // rounding half away from zero, then 22003 past the precision
        let dec = |s: &str| {
            coerce_value(
                parse_param(s.as_bytes(), oid::NUMERIC, false).unwrap(),
                ColumnType::Decimal(10, 2),
            )
        };
        assert_eq!(dec("1.005").unwrap(), Value::Decimal(101));
        assert_eq!(dec("-1.005").unwrap(), Value::Decimal(-101));
        assert_eq!(dec("1.004").unwrap(), Value::Decimal(100));
        assert_eq!(dec("123456789.12").unwrap_err().sqlstate(), "22003");
        assert_eq!(dec("99999999.995").unwrap_err().sqlstate(), "22003");
        assert_eq!(dec("NaN").unwrap_err().sqlstate(), "0A000");
        // a negative zero from the wire prints as PostgreSQL's zero
        let neg_zero = numeric(1, 0, 0x4000, 2, &[0]);
        assert_eq!(
            parse_param(&neg_zero, oid::NUMERIC, true).unwrap(),
            Value::Text("0.00".into())
        );
        assert_eq!(state(parse_param(b"abc", oid::NUMERIC, false)), "22P02");
        assert_eq!(parse_param(b"7", oid::INT4, false).unwrap(), Value::Int(7));
        assert_eq!(
            parse_param(b"x", 0, false).unwrap(),
            Value::Text("x".into())
        );
    }

    #[test]
    fn timestamps_with_zones() {
        // PostgreSQL 15, TimeZone UTC: timestamptz converts, timestamp ignores
        let utc = timestamp_instant("2024-01-01 12:30+02").unwrap();
        assert_eq!(
            value_text(&Value::Timestamp(utc), None),
            "2024-01-01 10:30:00"
        );
        let wall = timestamp_wall_clock("2024-01-01 12:30+02").unwrap();
        assert_eq!(
            value_text(&Value::Timestamp(wall), None),
            "2024-01-01 12:30:00"
        );
        assert_eq!(timestamp_instant("nope").unwrap_err().sqlstate(), "22007");
    }

    #[test]
    fn cells_encode_in_both_formats() {
        let a = Int32Array::from(vec![Some(7), None]);
        let mut out = BytesMut::new();
        encode_cell(&a, 0, Format::Text, &mut out).unwrap();
        encode_cell(&a, 1, Format::Binary, &mut out).unwrap();
        assert_eq!(&out[..], &[0, 0, 0, 1, b'7', 255, 255, 255, 255]);
        let d = Decimal128Array::from(vec![1234])
            .with_precision_and_scale(10, 2)
            .unwrap();
        let mut s = String::new();
        cell_text(&d, 0, &mut s).unwrap();
        assert_eq!(s, "12.34");
    }

    #[test]
    fn bad_text_is_an_error_not_a_panic() {
        assert_eq!(
            parse_text("x", ColumnType::Int).unwrap_err().sqlstate(),
            "22P02"
        );
        assert_eq!(
            parse_text("99999999999", ColumnType::Int)
                .unwrap_err()
                .sqlstate(),
            "22003"
        );
        assert!(parse_binary(&[1, 2], oid::INT4, ColumnType::Int).is_err());
    }

    /// A binary numeric from its header fields and base-10000 digits.
    fn numeric(nd: i16, weight: i16, sign: u16, dscale: i16, digits: &[i16]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&nd.to_be_bytes());
        b.extend_from_slice(&weight.to_be_bytes());
        b.extend_from_slice(&sign.to_be_bytes());
        b.extend_from_slice(&dscale.to_be_bytes());
        for d in digits {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b
    }

    fn state(r: Result<Value>) -> &'static str {
        r.unwrap_err().sqlstate()
    }

    const DEC: ColumnType = ColumnType::Decimal(38, 10);

    #[test]
    fn binary_numeric_header_is_validated() {
        // Before: a negative dscale became a huge usize and the fraction
        // loop pushed '0' until the process ran out of memory.
        let neg_scale = numeric(1, 0, 0, -1, &[1]);
        assert_eq!(state(parse_binary(&neg_scale, oid::NUMERIC, DEC)), "22P03");
        let huge_scale = numeric(1, 0, 0, 1001, &[1]);
        assert_eq!(state(parse_binary(&huge_scale, oid::NUMERIC, DEC)), "22P03");
        // negative / absurd digit counts: 8 + 2 * (-1 as usize) overflowed
        for nd in [-1i16, i16::MIN, 3001, i16::MAX] {
            let b = numeric(nd, 0, 0, 0, &[1]);
            assert_eq!(state(parse_binary(&b, oid::NUMERIC, DEC)), "22P03", "{nd}");
        }
        // length must be exactly 8 + 2 * ndigits
        assert_eq!(
            state(parse_binary(&numeric(2, 0, 0, 0, &[1]), oid::NUMERIC, DEC)),
            "22P03"
        );
        assert_eq!(
            state(parse_binary(
                &numeric(1, 0, 0, 0, &[1, 2]),
                oid::NUMERIC,
                DEC
            )),
            "22P03"
        );
        assert_eq!(state(parse_binary(&[0, 0, 0], oid::NUMERIC, DEC)), "22P03");
        // sign and digits
        assert_eq!(
            state(parse_binary(
                &numeric(1, 0, 0x1234, 0, &[1]),
                oid::NUMERIC,
                DEC
            )),
            "22P03"
        );
        for d in [-1i16, 10_000, i16::MAX] {
            let b = numeric(1, 0, 0, 0, &[d]);
            assert_eq!(state(parse_binary(&b, oid::NUMERIC, DEC)), "22P03");
        }
        // extreme weights are bounded work and a clean error or value
        let far = numeric(1, i16::MAX, 0, 1000, &[9999]);
        assert_eq!(state(parse_binary(&far, oid::NUMERIC, DEC)), "22003");
        let tiny = numeric(1, i16::MIN, 0x4000, 1000, &[9999]);
        assert_eq!(
            parse_binary(&tiny, oid::NUMERIC, DEC).unwrap(),
            Value::Decimal(0)
        );
        assert!(matches!(
            parse_binary(&far, oid::NUMERIC, ColumnType::Text).unwrap(),
            Value::Text(t) if t.len() == 4 * 32_768 + 1001
        ));
        // a valid value still decodes: -12.5 = -(12, 5000 x 10^-4), dscale 1
        let v = numeric(2, 0, 0x4000, 1, &[12, 5000]);
        assert_eq!(
            parse_binary(&v, oid::NUMERIC, ColumnType::Decimal(10, 2)).unwrap(),
            Value::Decimal(-1250)
        );
    }

    #[test]
    fn numeric_nan_and_infinity_are_clear_errors_or_floats() {
        for sign in [0xC000u16, 0xD000, 0xF000] {
            let b = numeric(0, 0, sign, 0, &[]);
            assert_eq!(state(parse_binary(&b, oid::NUMERIC, DEC)), "0A000");
            assert_eq!(
                state(parse_binary(&b, oid::NUMERIC, ColumnType::Int)),
                "0A000"
            );
            let Value::Double(f) = parse_binary(&b, oid::NUMERIC, ColumnType::Double).unwrap()
            else {
                panic!("not a double")
            };
            assert!(f.is_nan() || f.is_infinite());
        }
        assert_eq!(state(parse_text("NaN", DEC)), "0A000");
        assert_eq!(state(parse_text("-Infinity", DEC)), "0A000");
    }

    #[test]
    fn numeric_encoding_does_not_overflow() {
        // Before: the fraction padding multiplied a 38-digit value by 1000
        // in u128 and overflowed.
        let max = 10i128.pow(38) - 1;
        for (v, s) in [
            (max, 1i8),
            (-max, 1),
            (max, 37),
            (max, 0),
            (5, -2),
            (-123, -5),
            (1, 38),
            (12_345_678, 4),
        ] {
            let mut out = BytesMut::new();
            numeric_binary(v, s, &mut out);
            let WireNumeric::Finite(text) = parse_numeric_binary(&out).unwrap() else {
                panic!("not finite")
            };
            assert_eq!(text, format_decimal(v, s), "{v} {s}");
        }
        assert_eq!(format_decimal(5, -2), "500");
        // no overflow negating i8::MIN
        assert!(format_decimal(1, i8::MIN).ends_with('0'));
    }

    #[test]
    fn decimal_text_work_is_bounded_by_precision() {
        let start = std::time::Instant::now();
        // Before: "0e999999999" looped a billion times; "1e2147483647"
        // overflowed i32 computing the point.
        assert_eq!(parse_decimal("0e999999999", 38, 10), Some(0));
        assert_eq!(parse_decimal("1e2147483647", 38, 10), None);
        assert_eq!(parse_decimal("1e-2147483648", 38, 10), Some(0));
        assert_eq!(parse_decimal("0.00000000005", 38, 10), Some(1));
        assert_eq!(parse_decimal("0.00000000004", 38, 10), Some(0));
        assert_eq!(parse_decimal("99.995", 4, 2), None);
        assert_eq!(parse_decimal("99.994", 4, 2), Some(9999));
        assert_eq!(parse_decimal("-1.5", 38, 0), Some(-2));
        assert_eq!(parse_decimal("1é", 38, 0), None);
        assert_eq!(parse_decimal("1e5é", 38, 0), None);
        let long = format!("0.{}1", "0".repeat(100_000));
        assert_eq!(parse_decimal(&long, 38, 10), Some(0));
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn binary_array_header_is_validated() {
        fn array(ndim: i32, flags: i32, elem: u32, dims: &[(i32, i32)], rest: &[u8]) -> Vec<u8> {
            let mut b = Vec::new();
            b.extend_from_slice(&ndim.to_be_bytes());
            b.extend_from_slice(&flags.to_be_bytes());
            b.extend_from_slice(&elem.to_be_bytes());
            for (len, lower) in dims {
                b.extend_from_slice(&len.to_be_bytes());
                b.extend_from_slice(&lower.to_be_bytes());
            }
            b.extend_from_slice(rest);
            b
        }
        let st = |b: &[u8]| binary_array_to_text(b).unwrap_err().sqlstate();
        // Before: Vec::with_capacity(2^31 - 1) of Strings aborted the process.
        let huge = array(1, 0, oid::INT4, &[(i32::MAX, 1)], &[0, 0, 0, 4, 0, 0, 0, 1]);
        assert_eq!(st(&huge), "22P03");
        assert_eq!(st(&array(1, 0, oid::INT4, &[(-1, 1)], &[])), "22P03");
        assert_eq!(st(&array(-1, 0, oid::INT4, &[], &[])), "22P03");
        assert_eq!(st(&array(7, 0, oid::INT4, &[], &[])), "22P03");
        assert_eq!(st(&array(0, 2, oid::INT4, &[], &[])), "22P03");
        assert_eq!(
            st(&array(1, 0, oid::INT4, &[(1, i32::MAX)], &[0; 8])),
            "22P03"
        );
        // element lengths below -1, or past the end
        let minus2 = array(1, 0, oid::INT4, &[(1, 1)], &(-2i32).to_be_bytes());
        assert_eq!(st(&minus2), "22P03");
        let past = array(1, 0, oid::INT4, &[(1, 1)], &[0x7f, 0xff, 0xff, 0xff, 1]);
        assert_eq!(st(&past), "22P03");
        // every truncation of a valid value is an error, never a panic
        let full = array(
            1,
            1,
            oid::TEXT,
            &[(2, 1)],
            &[0, 0, 0, 2, b'h', b'i', 0xff, 0xff, 0xff, 0xff],
        );
        assert!(binary_array_to_text(&full).is_ok());
        for cut in 0..full.len() {
            assert!(binary_array_to_text(&full[..cut]).is_err(), "{cut}");
        }
        // a lower bound other than 1 is refused, not shifted to 1
        let one = [0, 0, 0, 4, 0, 0, 0, 7];
        assert_eq!(st(&array(1, 0, oid::INT4, &[(1, 0)], &one)), "0A000");
        assert_eq!(st(&array(1, 0, oid::INT4, &[(1, -5)], &one)), "0A000");
        assert_eq!(
            binary_array_to_text(&array(1, 0, oid::INT4, &[(1, 1)], &one)).unwrap(),
            r#"{"7"}"#
        );
        // trailing bytes
        assert_eq!(st(&array(0, 0, oid::INT4, &[], &[0])), "22P03");
        // truncated header
        assert_eq!(st(&[0, 0, 0, 1, 0, 0]), "22P03");
        // valid multi-dimensional arrays are a clean "not supported"
        let two = array(
            2,
            0,
            oid::INT4,
            &[(1, 1), (1, 1)],
            &[0, 0, 0, 4, 0, 0, 0, 7],
        );
        assert_eq!(st(&two), "0A000");
        // and well-formed arrays still decode
        let mut elems = Vec::new();
        for e in [Some(1i32), None, Some(-3)] {
            match e {
                Some(v) => {
                    elems.extend_from_slice(&4i32.to_be_bytes());
                    elems.extend_from_slice(&v.to_be_bytes());
                }
                None => elems.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        let ok = array(1, 1, oid::INT4, &[(3, 1)], &elems);
        assert_eq!(binary_array_to_text(&ok).unwrap(), r#"{"1",NULL,"-3"}"#);
        assert_eq!(
            binary_array_to_text(&array(0, 0, oid::INT4, &[], &[])).unwrap(),
            "{}"
        );
        let text = array(1, 0, oid::TEXT, &[(1, 1)], &[0, 0, 0, 3, b'a', b'"', b'\\']);
        assert_eq!(binary_array_to_text(&text).unwrap(), r#"{"a\"\\"}"#);
        // numeric elements print with their scale, not as scaled integers
        let n = numeric(1, 0, 0, 1, &[7]);
        let mut el = (n.len() as i32).to_be_bytes().to_vec();
        el.extend_from_slice(&n);
        let arr = array(1, 0, oid::NUMERIC, &[(1, 1)], &el);
        assert_eq!(binary_array_to_text(&arr).unwrap(), r#"{"7.0"}"#);
    }

    #[test]
    fn multibyte_time_zone_suffixes_are_errors_not_panics() {
        // Before: `z[..2]` on "1é1" sliced inside 'é' and panicked.
        for s in [
            "2024-01-01 10:00:00+1é1",
            "2024-01-01 10:00:00-é1",
            "2024-01-01 10:00:00+日本",
            "2024-01-01T10:00:00Zé",
            "2024-01-01 10:00:00.1é",
            "2024-01-01 1é:00",
            "2024-01-01 10:00:00+",
        ] {
            let e = parse_text(s, ColumnType::Timestamp).unwrap_err();
            assert_eq!(e.sqlstate(), "22007", "{s}: {e}");
        }
        // absurd offsets overflowed `h * 3600`
        for s in [
            "2024-01-01 10:00:00+99999999999999999999",
            "2024-01-01 10:00:00+16",
            "2024-01-01 10:00:00-05:60",
            "2024-01-01 25:00:00",
        ] {
            let e = parse_text(s, ColumnType::Timestamp).unwrap_err();
            assert!(matches!(e.sqlstate(), "22007" | "22008"), "{s}: {e}");
        }
        assert_eq!(
            parse_timestamp("2024-01-01 10:00:00+0530"),
            parse_timestamp("2024-01-01 04:30:00")
        );
        assert_eq!(
            parse_timestamp("2024-01-01 10:00:00-05"),
            parse_timestamp("2024-01-01T15:00:00Z")
        );
        assert_eq!(state(parse_text("2024-13-01", ColumnType::Date)), "22008");
        assert_eq!(state(parse_text("20x4-01-01", ColumnType::Date)), "22007");
    }

    #[test]
    fn infinite_and_extreme_datetimes_are_22008() {
        // Before: i32::MAX + PG_EPOCH_DAYS and i64::MAX + PG_EPOCH_MICROS
        // overflowed (a panic in debug builds, garbage in release).
        for raw in [i32::MAX, i32::MIN, 2_145_031_949, -2_451_546] {
            let e = parse_binary(&raw.to_be_bytes(), oid::DATE, ColumnType::Date).unwrap_err();
            assert_eq!(e.sqlstate(), "22008", "{raw}");
        }
        for raw in [i64::MAX, i64::MIN, i64::MAX - 1, -211_813_488_000_000_001] {
            for o in [oid::TIMESTAMP, oid::TIMESTAMPTZ] {
                let e = parse_binary(&raw.to_be_bytes(), o, ColumnType::Timestamp).unwrap_err();
                assert_eq!(e.sqlstate(), "22008", "{raw}");
            }
        }
        assert_eq!(
            parse_binary(&0i32.to_be_bytes(), oid::DATE, ColumnType::Date).unwrap(),
            Value::Date(PG_EPOCH_DAYS)
        );
        // a date far in the future fits `date` but not a timestamp
        let far = parse_binary(
            &2_145_031_948i32.to_be_bytes(),
            oid::DATE,
            ColumnType::Timestamp,
        );
        assert_eq!(state(far), "22008");
        for s in ["infinity", "-infinity", "+Infinity"] {
            assert_eq!(state(parse_text(s, ColumnType::Date)), "22008");
            assert_eq!(state(parse_text(s, ColumnType::Timestamp)), "22008");
        }
        // years whose day count overflowed days_from_civil
        assert_eq!(
            state(parse_text("99999999999999999-01-01", ColumnType::Date)),
            "22008"
        );
        assert_eq!(
            state(parse_text("5874897-12-31 10:00", ColumnType::Timestamp)),
            "22008"
        );
        assert!(parse_text("5874897-12-31", ColumnType::Date).is_ok());
        // timestamps in seconds that do not fit in microseconds
        let a = datafusion::arrow::array::TimestampSecondArray::from(vec![i64::MAX]);
        let mut out = BytesMut::new();
        let e = encode_cell(&a, 0, Format::Binary, &mut out).unwrap_err();
        assert_eq!(e.sqlstate(), "22008");
        let d = datafusion::arrow::array::Date32Array::from(vec![i32::MIN]);
        let e = encode_cell(&d, 0, Format::Binary, &mut out).unwrap_err();
        assert_eq!(e.sqlstate(), "22008");
    }
}

/// Random client bytes and text into every decoder: any result is fine, a
/// panic is not.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    const OIDS: &[u32] = &[
        oid::BOOL,
        oid::BYTEA,
        oid::CHAR,
        oid::NAME,
        oid::INT8,
        oid::INT2,
        oid::INT4,
        oid::TEXT,
        oid::OID,
        oid::FLOAT4,
        oid::FLOAT8,
        oid::UNKNOWN,
        oid::VARCHAR,
        oid::BPCHAR,
        oid::DATE,
        oid::TIME,
        oid::TIMESTAMP,
        oid::TIMESTAMPTZ,
        oid::INTERVAL,
        oid::NUMERIC,
        oid::INT2_ARRAY,
        oid::INT4_ARRAY,
        oid::TEXT_ARRAY,
        oid::UUID,
        oid::UUID_ARRAY,
        oid::JSON,
        oid::JSONB,
        0,
        u32::MAX,
    ];

    const TYPES: &[ColumnType] = &[
        ColumnType::Boolean,
        ColumnType::SmallInt,
        ColumnType::Int,
        ColumnType::BigInt,
        ColumnType::Real,
        ColumnType::Double,
        ColumnType::Decimal(38, 10),
        ColumnType::Decimal(5, 2),
        ColumnType::Decimal(38, 0),
        ColumnType::Decimal(1, 1),
        ColumnType::Text,
        ColumnType::Date,
        ColumnType::Timestamp,
        ColumnType::Bytea,
        ColumnType::Uuid,
        ColumnType::Time,
        ColumnType::Json,
        ColumnType::Jsonb,
        ColumnType::Interval,
    ];

    fn any_type() -> impl Strategy<Value = ColumnType> {
        proptest::sample::select(TYPES)
    }

    fn any_oid() -> impl Strategy<Value = u32> {
        proptest::sample::select(OIDS)
    }

    /// Text that looks enough like numbers, dates and zones to get deep
    /// into the parsers, multi-byte characters included.
    fn datish() -> impl Strategy<Value = String> {
        "[0-9 :+\\-.TZzeE,é日\\\\xNaInfity]{0,40}"
    }

    fn be16(v: i16) -> [u8; 2] {
        v.to_be_bytes()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn parse_binary_never_panics(bytes in vec(any::<u8>(), 0..48), o in any_oid(), ty in any_type()) {
            let _ = parse_binary(&bytes, o, ty);
            let _ = binary_array_to_text(&bytes);
        }

        #[test]
        fn numeric_headers_never_panic(
            nd in prop_oneof![0i16..6, any::<i16>()],
            weight in any::<i16>(),
            sign in prop_oneof![
                Just(0u16), Just(0x4000u16), Just(0xC000u16), Just(0xD000u16), Just(0xF000u16),
                any::<u16>(),
            ],
            dscale in prop_oneof![0i16..40, any::<i16>()],
            digits in vec(prop_oneof![0i16..10_000, any::<i16>()], 0..6),
            ty in any_type(),
        ) {
            let mut b = Vec::new();
            b.extend_from_slice(&be16(nd));
            b.extend_from_slice(&be16(weight));
            b.extend_from_slice(&sign.to_be_bytes());
            b.extend_from_slice(&be16(dscale));
            for d in &digits {
                b.extend_from_slice(&be16(*d));
            }
            let _ = parse_binary(&b, oid::NUMERIC, ty);
        }

        #[test]
        fn array_headers_never_panic(
            ndim in -1i32..8,
            flags in -1i32..3,
            elem in any_oid(),
            dims in vec((prop_oneof![-2i32..4, any::<i32>()], any::<i32>()), 0..3),
            elems in vec((prop_oneof![-3i32..10, any::<i32>()], vec(any::<u8>(), 0..10)), 0..5),
        ) {
            let mut b = Vec::new();
            b.extend_from_slice(&ndim.to_be_bytes());
            b.extend_from_slice(&flags.to_be_bytes());
            b.extend_from_slice(&elem.to_be_bytes());
            for (len, lower) in &dims {
                b.extend_from_slice(&len.to_be_bytes());
                b.extend_from_slice(&lower.to_be_bytes());
            }
            for (len, data) in &elems {
                b.extend_from_slice(&len.to_be_bytes());
                b.extend_from_slice(data);
            }
            let _ = binary_array_to_text(&b);
        }

        #[test]
        fn parse_text_never_panics(s in prop_oneof![any::<String>(), datish()], ty in any_type()) {
            let _ = parse_text(&s, ty);
            let _ = parse_decimal(&s, 38, 10);
            let _ = parse_bytea_text(&s);
            let _ = numeric_from_text(&s);
            let _ = parse_param(s.as_bytes(), oid::NUMERIC, false);
            let _ = timestamp_wall_clock(&s);
        }
    }
}
