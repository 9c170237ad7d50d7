//! Encoding result cells: the text form ([`cell_text`]) and binary form
//! ([`encode_cell`]) of one Arrow cell, as PostgreSQL prints it.
//!
//! Before touching: the bytes written must be valid for the OID that
//! `oids.rs` announces for the column; a value that has no PostgreSQL
//! representation (a date beyond PostgreSQL's range) is an error (22008),
//! not wrapped bytes.

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use super::*;

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use eddy_common::{format_interval, format_uuid, ColumnType, Interval, UUID_LEN};

use eddy_storage::arrow_values::timestamp_micros;

use crate::error::{Result, SqlError};

/// Float text as PostgreSQL 15 prints it (`extra_float_digits` 1): the
/// shortest text that reads back as the same value, in fixed notation when
/// the decimal exponent is at least -4 and below `fixed_below` (15 for
/// `float8`, 6 for `float4`), else `1.5e+20` style with a two-digit
/// exponent at least; `NaN`, `Infinity`, `-Infinity`.
pub(super) fn pg_float_text<F>(
    v: F,
    nan: bool,
    inf: Option<bool>,
    fixed_below: i32,
    out: &mut String,
) where
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

pub(super) fn float_text(v: f64, out: &mut String) {
    let inf = v.is_infinite().then_some(v > 0.0);
    pg_float_text(v, v.is_nan(), inf, 15, out);
}

pub(super) fn float32_text(v: f32, out: &mut String) {
    let inf = v.is_infinite().then_some(v > 0.0);
    pg_float_text(v, v.is_nan(), inf, 6, out);
}

pub(super) fn hex_bytea(b: &[u8], out: &mut String) {
    use std::fmt::Write;
    out.push_str("\\x");
    for byte in b {
        let _ = write!(out, "{byte:02x}");
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
            let micros = timestamp_micros(array, *unit, row)?;
            let bc = match tz.as_deref() {
                None => write_timestamp(micros, out),
                Some(label) => write_instant(micros, label, out)?,
            };
            if bc {
                out.push_str(" BC");
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
        // a record (`information_schema._pg_expandarray`'s `(x, n)`), as
        // PostgreSQL's record_out prints it: `(1,2)`, NULL fields empty,
        // fields with special characters double-quoted
        DataType::Struct(_) => {
            let record = array.as_struct();
            out.push('(');
            for (k, column) in record.columns().iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                if column.is_null(row) || column.data_type() == &DataType::Null {
                    continue;
                }
                let mut field = String::new();
                cell_text(column.as_ref(), row, &mut field)?;
                let quote = field.is_empty()
                    || field
                        .chars()
                        .any(|c| matches!(c, '"' | '\\' | '(' | ')' | ',') || c.is_whitespace());
                if quote {
                    out.push('"');
                    for c in field.chars() {
                        if c == '"' || c == '\\' {
                            out.push(c);
                        }
                        out.push(c);
                    }
                    out.push('"');
                } else {
                    out.push_str(&field);
                }
            }
            out.push(')');
        }
        _ => {
            let opts = FormatOptions::default();
            let f = ArrayFormatter::try_new(array, &opts)?;
            let _ = write!(out, "{}", f.value(row));
        }
    }
    Ok(())
}

/// A `timestamptz` cell: the wall-clock time in the zone its Arrow type is
/// labelled with (the session's, `crate::session_zone`), then the zone's
/// offset at that instant (`+02`, `-03:30`); whether the year is BC.
fn write_instant(micros: i64, label: &str, out: &mut String) -> Result<bool> {
    if matches!(label, "+00:00" | "UTC" | "+00" | "Z") {
        let bc = write_timestamp(micros, out);
        out.push_str("+00");
        return Ok(bc);
    }
    let zone = crate::session_zone::zone_of_label(label)
        .ok_or_else(|| SqlError::Internal(format!("timestamp labelled with zone {label}")))?;
    let offset = crate::session_zone::offset_at(zone, micros)
        .ok_or_else(|| SqlError::DatetimeOverflow("timestamp out of range".into()))?;
    let wall = i64::from(offset)
        .checked_mul(1_000_000)
        .and_then(|o| micros.checked_add(o))
        .ok_or_else(|| SqlError::DatetimeOverflow("timestamp out of range".into()))?;
    let bc = write_timestamp(wall, out);
    crate::session_zone::push_offset(offset, out);
    Ok(bc)
}

/// Append one cell as a length-prefixed wire value (-1 for NULL): the
/// layout of a DataRow field and of a binary COPY field.
pub fn encode_cell(
    array: &dyn Array,
    row: usize,
    format: Format,
    out: &mut BytesMut,
) -> Result<()> {
    // a NullArray (`SELECT NULL AS x`) has no validity buffer: its
    // `is_null` says false, its logical nulls say NULL
    if array.is_null(row) || array.data_type() == &DataType::Null {
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
    // the length word is the bytes written after it; a cell past i32::MAX
    // bytes cannot be sent
    let len = out
        .len()
        .checked_sub(len_at)
        .and_then(|n| n.checked_sub(4))
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| SqlError::ProgramLimitExceeded("result cell is too large".into()))?;
    let at = len_at
        .checked_add(4)
        .and_then(|end| out.get_mut(len_at..end))
        .ok_or_else(|| SqlError::Internal("cell length word is missing".into()))?;
    at.copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// The 16 bytes of a non-null cell of a `FixedSizeBinary(16)` (uuid) array.
pub(super) fn uuid_cell(array: &dyn Array, row: usize) -> Result<[u8; UUID_LEN]> {
    let a = array
        .as_fixed_size_binary_opt()
        .ok_or_else(|| SqlError::Internal(format!("uuid column holds {}", array.data_type())))?;
    if row >= a.len() {
        return Err(SqlError::Internal("uuid cell out of range".into()));
    }
    <[u8; UUID_LEN]>::try_from(a.value(row))
        .map_err(|_| SqlError::Internal("uuid cell is not 16 bytes".into()))
}

/// The interval in a non-null cell of any Arrow interval array.
pub(super) fn interval_cell(array: &dyn Array, row: usize) -> Result<Interval> {
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
            // an i32 of milliseconds times 1000 is below 2^41: no overflow
            #[allow(clippy::arithmetic_side_effects)]
            let micros = i64::from(v.milliseconds) * 1000;
            Interval {
                months: 0,
                days: v.days,
                micros,
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
    if format == Format::Text && !array.is_null(row) && super::is_int2vector_list(field) {
        // int2vector's text: `1 3`, not the array's `{1,3}`
        if let Some(list) = array.as_list_opt::<i32>() {
            let mut s = String::new();
            let items = list.value(row);
            for i in 0..items.len() {
                if i > 0 {
                    s.push(' ');
                }
                cell_text(items.as_ref(), i, &mut s)?;
            }
            let len = i32::try_from(s.len())
                .map_err(|_| SqlError::ProgramLimitExceeded("int2vector value too long".into()))?;
            out.put_i32(len);
            out.put_slice(s.as_bytes());
            return Ok(());
        }
    }
    encode_cell(array, row, format, out)
}

pub(super) fn encode_binary(array: &dyn Array, row: usize, out: &mut BytesMut) -> Result<()> {
    match array.data_type() {
        DataType::Boolean => out.put_u8(array.as_boolean().value(row) as u8),
        DataType::Int8 => out.put_i16(array.as_primitive::<Int8Type>().value(row) as i16),
        DataType::Int16 => out.put_i16(array.as_primitive::<Int16Type>().value(row)),
        DataType::UInt8 => out.put_i16(array.as_primitive::<UInt8Type>().value(row) as i16),
        DataType::Int32 => out.put_i32(array.as_primitive::<Int32Type>().value(row)),
        DataType::UInt16 => out.put_i32(array.as_primitive::<UInt16Type>().value(row) as i32),
        DataType::Int64 => out.put_i64(array.as_primitive::<Int64Type>().value(row)),
        // announced as `oid`: four bytes, unsigned
        DataType::UInt32 => out.put_u32(array.as_primitive::<UInt32Type>().value(row)),
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
            timestamp_micros(array, *unit, row)?
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

#[cfg(test)]
// Tests index and do arithmetic on fixed fixtures; a panic there is a
// failing test, which is what it should be.
#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use datafusion::arrow::array::{Decimal128Array, Int32Array};
    use eddy_common::{ColumnType, Value};

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
}
