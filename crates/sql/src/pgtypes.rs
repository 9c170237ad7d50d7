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
use datafusion::arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, BinaryBuilder, BooleanBuilder, Date32Builder,
    Decimal128Builder, Float32Builder, Float64Builder, Int16Builder, Int32Builder, Int64Builder,
    RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, SchemaRef, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::ScalarValue;
use eddy_common::{ColumnType, Row, Value};

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
    pub const INT2_ARRAY: u32 = 1005;
    pub const INT4_ARRAY: u32 = 1007;
    pub const TEXT_ARRAY: u32 = 1009;
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

/// The PostgreSQL type OID announced for an Arrow column.
pub fn pg_oid(dt: &DataType) -> u32 {
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
        DataType::Null => oid::TEXT,
        _ => oid::TEXT,
    }
}

/// Size in bytes PostgreSQL reports for a type (`typlen`), -1 for varlena.
pub fn pg_typlen(oid: u32) -> i16 {
    match oid {
        oid::BOOL | oid::CHAR => 1,
        oid::INT2 => 2,
        oid::INT4 | oid::OID | oid::FLOAT4 | oid::DATE => 4,
        oid::INT8 | oid::FLOAT8 | oid::TIMESTAMP | oid::TIMESTAMPTZ | oid::TIME => 8,
        oid::NAME => 64,
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
        oid::TIMESTAMP | oid::TIMESTAMPTZ => ColumnType::Timestamp,
        oid::BYTEA => ColumnType::Bytea,
        _ => return None,
    })
}

/// The OID for a stored column type.
pub fn oid_for_column_type(t: ColumnType) -> u32 {
    pg_oid(&t.to_arrow())
}

/// Parse a SQL type name (as written in CREATE TABLE or a cast) into a column type.
pub fn column_type_from_sql(dt: &datafusion::sql::sqlparser::ast::DataType) -> Result<ColumnType> {
    use datafusion::sql::sqlparser::ast::{DataType as D, ExactNumberInfo};
    Ok(match dt {
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
        D::Text
        | D::String(_)
        | D::Varchar(_)
        | D::CharVarying(_)
        | D::CharacterVarying(_)
        | D::Char(_)
        | D::Character(_)
        | D::Nvarchar(_) => ColumnType::Text,
        D::Date => ColumnType::Date,
        D::Timestamp(..) | D::Datetime(_) | D::TimestampNtz(_) => ColumnType::Timestamp,
        D::Bytea | D::Blob(_) | D::Varbinary(_) | D::Binary(_) => ColumnType::Bytea,
        D::Custom(name, _) => {
            let n = name.to_string().to_ascii_lowercase();
            match n.trim_matches('"') {
                "serial" | "int4" => ColumnType::Int,
                "bigserial" | "serial8" => ColumnType::BigInt,
                "smallserial" => ColumnType::SmallInt,
                "timestamptz" => ColumnType::Timestamp,
                "name" | "citext" => ColumnType::Text,
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
    let secs = tod / 1_000_000;
    let frac = tod % 1_000_000;
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
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

/// Parse `YYYY-MM-DD` into days since the Unix epoch.
pub fn parse_date(s: &str) -> Option<i32> {
    let s = s.trim();
    let mut it = s.splitn(3, '-');
    let y: i64 = it.next()?.trim().parse().ok()?;
    let m: u32 = it.next()?.trim().parse().ok()?;
    let d: u32 = it.next()?.trim().parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let days = days_from_civil(y, m, d);
    // reject 2023-02-30 and friends
    if civil_from_days(days) != (y, m, d) {
        return None;
    }
    i32::try_from(days).ok()
}

/// Parse `YYYY-MM-DD[ T]HH:MM[:SS[.ffffff]][Z|+HH[:MM]]` into microseconds
/// since the Unix epoch. A zone suffix is converted to UTC.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, rest) = match s.find([' ', 'T']) {
        Some(i) => (&s[..i], s[i + 1..].trim()),
        None => (s, ""),
    };
    let days = parse_date(date)? as i64;
    if rest.is_empty() {
        return Some(days * MICROS_PER_DAY);
    }
    // split a zone suffix
    let (time, offset_secs) = match rest.rfind(['+', '-', 'Z']) {
        Some(i) if i >= 5 => {
            let zone = &rest[i..];
            let off = if zone == "Z" {
                0
            } else {
                let sign = if zone.starts_with('-') { -1 } else { 1 };
                let z = &zone[1..];
                let (h, m) = match z.split_once(':') {
                    Some((h, m)) => (h.parse::<i64>().ok()?, m.parse::<i64>().ok()?),
                    None if z.len() == 4 => (z[..2].parse().ok()?, z[2..].parse().ok()?),
                    None => (z.parse::<i64>().ok()?, 0),
                };
                sign * (h * 3600 + m * 60)
            };
            (rest[..i].trim(), off)
        }
        _ => (rest, 0),
    };
    let mut parts = time.splitn(3, ':');
    let h: i64 = parts.next()?.parse().ok()?;
    let mi: i64 = parts.next()?.parse().ok()?;
    let (sec, micros) = match parts.next() {
        None => (0, 0),
        Some(sec) => match sec.split_once('.') {
            Some((s, f)) => {
                let digits: String = f.chars().take(6).collect();
                if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                    return None;
                }
                let scale = 10i64.pow(6 - digits.len() as u32);
                (s.parse::<i64>().ok()?, digits.parse::<i64>().ok()? * scale)
            }
            None => (sec.parse::<i64>().ok()?, 0),
        },
    };
    if !(0..24).contains(&h) || !(0..60).contains(&mi) || !(0..61).contains(&sec) {
        return None;
    }
    Some(days * MICROS_PER_DAY + (h * 3600 + mi * 60 + sec - offset_secs) * 1_000_000 + micros)
}

// ---------------------------------------------------------------------------
// decimals

/// Format a scaled integer with `scale` digits after the point.
pub fn format_decimal(v: i128, scale: i8) -> String {
    if scale <= 0 {
        let mut s = v.to_string();
        for _ in 0..(-scale as i32) {
            s.push('0');
        }
        return s;
    }
    let neg = v < 0;
    let digits = v.unsigned_abs().to_string();
    let scale = scale as usize;
    let (int, frac) = if digits.len() > scale {
        let (a, b) = digits.split_at(digits.len() - scale);
        (a.to_string(), b.to_string())
    } else {
        ("0".to_string(), format!("{digits:0>scale$}"))
    };
    format!("{}{int}.{frac}", if neg { "-" } else { "" })
}

/// Parse a decimal literal into a scaled integer, rounding half away from zero.
pub fn parse_decimal(s: &str, precision: u8, scale: i8) -> Option<i128> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], body[i + 1..].parse::<i32>().ok()?),
        None => (body, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut digits: String = format!("{int}{frac}");
    let mut point = int.len() as i32 + exp; // digits before the point
    if digits.is_empty() {
        digits.push('0');
        point = 1;
    }
    let want = point + scale as i32; // digits to keep
    let mut value: i128 = 0;
    let bytes = digits.as_bytes();
    for i in 0..want.max(0) {
        let d = bytes
            .get(i as usize)
            .map(|b| (b - b'0') as i128)
            .unwrap_or(0);
        value = value.checked_mul(10)?.checked_add(d)?;
    }
    if want >= 0 {
        if let Some(b) = bytes.get(want as usize) {
            if *b >= b'5' {
                value = value.checked_add(1)?;
            }
        }
    }
    if value >= 10i128.checked_pow(precision as u32)? {
        return None;
    }
    Some(if neg { -value } else { value })
}

fn numeric_binary(v: i128, scale: i8, out: &mut BytesMut) {
    // PostgreSQL numeric: ndigits, weight, sign, dscale, then base-10000 digits.
    let dscale = scale.max(0) as i32;
    let neg = v < 0;
    let mut abs = v.unsigned_abs();
    // shift so the fractional part is a multiple of 4 digits
    let pad = (4 - dscale % 4) % 4;
    for _ in 0..pad {
        abs *= 10;
    }
    let frac_groups = (dscale + pad) / 4;
    let mut groups: Vec<i16> = Vec::new();
    while abs > 0 {
        groups.push((abs % 10_000) as i16);
        abs /= 10_000;
    }
    groups.reverse();
    let weight = groups.len() as i32 - frac_groups - 1;
    // strip trailing zero groups
    while groups.last() == Some(&0) {
        groups.pop();
    }
    let weight = if groups.is_empty() { 0 } else { weight };
    out.put_i16(groups.len() as i16);
    out.put_i16(weight as i16);
    out.put_u16(if neg { 0x4000 } else { 0 });
    out.put_i16(dscale as i16);
    for g in groups {
        out.put_i16(g);
    }
}

fn parse_numeric_binary(b: &[u8]) -> Option<String> {
    if b.len() < 8 {
        return None;
    }
    let nd = i16::from_be_bytes([b[0], b[1]]) as usize;
    let weight = i16::from_be_bytes([b[2], b[3]]) as i32;
    let sign = u16::from_be_bytes([b[4], b[5]]);
    let dscale = i16::from_be_bytes([b[6], b[7]]) as usize;
    if sign == 0xC000 {
        return Some("NaN".into());
    }
    if b.len() < 8 + nd * 2 {
        return None;
    }
    let digits: Vec<i16> = (0..nd)
        .map(|i| i16::from_be_bytes([b[8 + 2 * i], b[9 + 2 * i]]))
        .collect();
    let mut int = String::new();
    let mut frac = String::new();
    for (i, d) in digits.iter().enumerate() {
        let pos = weight - i as i32;
        if pos >= 0 {
            if int.is_empty() {
                int.push_str(&d.to_string());
            } else {
                int.push_str(&format!("{d:04}"));
            }
        } else {
            frac.push_str(&format!("{d:04}"));
        }
    }
    // groups implied by weight beyond the stored digits
    let stored_int = digits.len() as i32;
    for _ in stored_int..=if digits.is_empty() { -1 } else { weight } {
        int.push_str("0000");
    }
    if weight < -1 {
        frac = format!("{}{}", "0000".repeat((-weight - 1) as usize), frac);
    }
    if int.is_empty() {
        int.push('0');
    }
    while frac.len() < dscale {
        frac.push('0');
    }
    frac.truncate(dscale);
    let sign = if sign == 0x4000 { "-" } else { "" };
    Some(if frac.is_empty() {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    })
}

// ---------------------------------------------------------------------------
// encoding Arrow cells

/// Float text as PostgreSQL prints it (shortest round-trip, `Infinity`, `NaN`).
fn float_text(v: f64, out: &mut String) {
    use std::fmt::Write;
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        let _ = write!(out, "{v}");
    }
}

fn float32_text(v: f32, out: &mut String) {
    use std::fmt::Write;
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        let _ = write!(out, "{v}");
    }
}

fn hex_bytea(b: &[u8], out: &mut String) {
    use std::fmt::Write;
    out.push_str("\\x");
    for byte in b {
        let _ = write!(out, "{byte:02x}");
    }
}

fn timestamp_micros(array: &dyn Array, unit: &TimeUnit, row: usize) -> i64 {
    match unit {
        TimeUnit::Second => array.as_primitive::<TimestampSecondType>().value(row) * 1_000_000,
        TimeUnit::Millisecond => array.as_primitive::<TimestampMillisecondType>().value(row) * 1000,
        TimeUnit::Microsecond => array.as_primitive::<TimestampMicrosecondType>().value(row),
        TimeUnit::Nanosecond => array.as_primitive::<TimestampNanosecondType>().value(row) / 1000,
    }
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
            write_timestamp(timestamp_micros(array, unit, row), out);
            if tz.is_some() {
                out.push_str("+00");
            }
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
        DataType::Date32 => {
            out.put_i32(array.as_primitive::<Date32Type>().value(row) - PG_EPOCH_DAYS)
        }
        DataType::Timestamp(unit, _) => {
            out.put_i64(timestamp_micros(array, unit, row) - PG_EPOCH_MICROS)
        }
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
        ColumnType::Real => Value::Real(parse_float(t).ok_or_else(bad)? as f32),
        ColumnType::Double => Value::Double(parse_float(t).ok_or_else(bad)?),
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
        ColumnType::Date => Value::Date(parse_date(t).ok_or_else(bad)?),
        ColumnType::Timestamp => Value::Timestamp(parse_timestamp(t).ok_or_else(bad)?),
        ColumnType::Bytea => Value::Bytea(parse_bytea_text(s).ok_or_else(bad)?),
    })
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

fn parse_float(t: &str) -> Option<f64> {
    match t.to_ascii_lowercase().as_str() {
        "infinity" | "inf" | "+infinity" => Some(f64::INFINITY),
        "-infinity" | "-inf" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => t.parse().ok(),
    }
}

pub fn parse_bytea_text(s: &str) -> Option<Vec<u8>> {
    if let Some(hex) = s.strip_prefix("\\x") {
        let hex = hex.as_bytes();
        if hex.len() % 2 != 0 {
            return None;
        }
        hex.chunks(2)
            .map(|c| {
                let h = (c[0] as char).to_digit(16)?;
                let l = (c[1] as char).to_digit(16)?;
                Some((h * 16 + l) as u8)
            })
            .collect()
    } else {
        Some(s.as_bytes().to_vec())
    }
}

/// Decode a binary-format value sent as PostgreSQL type `wire_oid`, then
/// convert it to the column type `ty`.
pub fn parse_binary(b: &[u8], wire_oid: u32, ty: ColumnType) -> Result<Value> {
    let bad = || {
        SqlError::InvalidParameter(format!(
            "incorrect binary data format for a value of type oid {wire_oid}"
        ))
    };
    let fixed = |n: usize| -> Result<&[u8]> {
        if b.len() == n {
            Ok(b)
        } else {
            Err(bad())
        }
    };
    let v = match wire_oid {
        oid::BOOL => Value::Boolean(fixed(1)?[0] != 0),
        oid::INT2 => Value::SmallInt(i16::from_be_bytes(fixed(2)?.try_into().map_err(|_| bad())?)),
        oid::INT4 | oid::OID => {
            Value::Int(i32::from_be_bytes(fixed(4)?.try_into().map_err(|_| bad())?))
        }
        oid::INT8 => Value::BigInt(i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad())?)),
        oid::FLOAT4 => Value::Real(f32::from_be_bytes(fixed(4)?.try_into().map_err(|_| bad())?)),
        oid::FLOAT8 => Value::Double(f64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad())?)),
        oid::DATE => Value::Date(
            i32::from_be_bytes(fixed(4)?.try_into().map_err(|_| bad())?) + PG_EPOCH_DAYS,
        ),
        oid::TIMESTAMP | oid::TIMESTAMPTZ => Value::Timestamp(
            i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad())?) + PG_EPOCH_MICROS,
        ),
        oid::BYTEA => Value::Bytea(b.to_vec()),
        oid::NUMERIC => return parse_text(&parse_numeric_binary(b).ok_or_else(bad)?, ty),
        // text-like and unknown types: the bytes are the text form
        _ => {
            let s = std::str::from_utf8(b)
                .map_err(|_| SqlError::InvalidText("invalid UTF-8 in parameter".into()))?;
            return parse_text(s, ty);
        }
    };
    coerce_value(v, ty)
}

/// Convert a value to column type `ty` (integer widening/narrowing with a
/// range check, numbers to floats and decimals, anything to text).
pub fn coerce_value(v: Value, ty: ColumnType) -> Result<Value> {
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
            (ColumnType::Timestamp, Value::Date(d)) => Value::Timestamp(*d as i64 * MICROS_PER_DAY),
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
    Ok(match (ty, array.data_type()) {
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
            Value::Timestamp(timestamp_micros(array, unit, row))
        }
        (ColumnType::Bytea, DataType::Binary) => {
            Value::Bytea(array.as_binary::<i32>().value(row).to_vec())
        }
        (ColumnType::Bytea, DataType::BinaryView) => {
            Value::Bytea(array.as_binary_view().value(row).to_vec())
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
        ColumnType::Text => Box::new(StringBuilder::with_capacity(capacity, capacity * 16)),
        ColumnType::Date => Box::new(Date32Builder::with_capacity(capacity)),
        ColumnType::Timestamp => Box::new(TimestampMicrosecondBuilder::with_capacity(capacity)),
        ColumnType::Bytea => Box::new(BinaryBuilder::with_capacity(capacity, capacity * 16)),
    }
}

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
        ColumnType::Text => push!(
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
        ColumnType::Timestamp => push!(
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
    }
    Ok(())
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
        (Value::Timestamp(t), _) => ScalarValue::TimestampMicrosecond(Some(*t), None),
        (Value::Bytea(b), _) => ScalarValue::Binary(Some(b.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Decimal128Array, Int32Array};

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
            assert_eq!(text, format_decimal(v, s), "{v} {s}");
        }
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
}
