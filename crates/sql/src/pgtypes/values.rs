//! `Value`s in SQL terms: coercing a value to a column type (with
//! PostgreSQL's range and length checks), a value's text form, and a value
//! as a DataFusion literal.
//!
//! Before touching: building Arrow arrays from `Value`s and reading them
//! back is `eddy_storage::arrow_values`' job alone (`ColumnBuilder`,
//! `value_at`, `batch_from_rows`, `batch_rows`); it refuses a value that
//! does not match its column's type (`SqlError::Conversion`) and never
//! converts silently. Coerce with [`coerce_value`] first.

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use super::*;
use datafusion::arrow::datatypes::IntervalMonthDayNano;
use datafusion::common::ScalarValue;
use eddy_common::{format_interval, format_uuid, ColumnType, Interval, Value};

/// `UUID_LEN` as Arrow's `FixedSizeBinary` width.
const UUID_LEN_I32: i32 = 16;

use crate::error::{Result, SqlError};

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
            (ColumnType::SmallInt | ColumnType::Int | ColumnType::BigInt, Value::Double(f)) => {
                float_to_integer(*f, ty)?
            }
            (ColumnType::SmallInt | ColumnType::Int | ColumnType::BigInt, Value::Real(f)) => {
                float_to_integer(f64::from(*f), ty)?
            }
            (ColumnType::Double, Value::Real(f)) => Value::Double(*f as f64),
            (ColumnType::Numeric, Value::Double(f)) => {
                Value::Decimal(crate::unconstrained_numeric::from_float(*f, 15)?)
            }
            (ColumnType::Numeric, Value::Real(f)) => {
                Value::Decimal(crate::unconstrained_numeric::from_float(f64::from(*f), 6)?)
            }
            (ColumnType::Real, Value::Double(f)) => Value::Real(float4_from_float8(*f)?),
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

/// A float rounded to a bigint as PostgreSQL's float-to-integer casts
/// round (`rint`: ties to even); `None` for NaN, infinities and values
/// beyond bigint (the caller narrows further and names its type's range).
pub fn float_to_bigint(x: f64) -> Option<i64> {
    let r = x.round_ties_even();
    // 2^63 is exact in a double; -2^63 fits in bigint, 2^63 does not
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !(-LIMIT..LIMIT).contains(&r) {
        return None;
    }
    // integral and within bigint: exact
    #[allow(clippy::cast_possible_truncation)]
    Some(r as i64)
}

/// PostgreSQL's 22003 for a value beyond integer type `ty`.
pub fn integer_out_of_range(ty: ColumnType) -> SqlError {
    SqlError::NumericOutOfRange(
        match ty {
            ColumnType::SmallInt => "smallint out of range",
            ColumnType::Int => "integer out of range",
            _ => "bigint out of range",
        }
        .into(),
    )
}

/// A float as an integer column's value, as PostgreSQL's assignment cast
/// computes it (`dtoi4`): rounded to the nearest integer, ties to even;
/// NaN, infinities and values beyond the type are 22003.
fn float_to_integer(x: f64, ty: ColumnType) -> Result<Value> {
    let range = || integer_out_of_range(ty);
    let wide = float_to_bigint(x).ok_or_else(range)?;
    Ok(match ty {
        ColumnType::SmallInt => Value::SmallInt(i16::try_from(wide).map_err(|_| range())?),
        ColumnType::Int => Value::Int(i32::try_from(wide).map_err(|_| range())?),
        _ => Value::BigInt(wide),
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
        Value::Timestamp(t) => {
            if write_timestamp(*t, &mut out) {
                out.push_str(" BC");
            }
        }
        Value::Bytea(b) => hex_bytea(b, &mut out),
        Value::Uuid(u) => out = format_uuid(u),
        Value::Interval(iv) => out = format_interval(*iv),
        Value::Time(t) => write_time(*t, &mut out),
        Value::Array(items) => out = crate::array_type::array_value_text(items, scale),
    }
    out
}

/// An interval as Arrow's month-day-nanosecond value; 22008 past its range.
pub fn interval_arrow(iv: Interval) -> Result<IntervalMonthDayNano> {
    Ok(eddy_storage::arrow_values::interval_to_arrow(iv)?)
}

/// An interval as text Arrow's interval cast reads exactly (its own
/// parser does not know PostgreSQL's `04:05:06` or ISO 8601 forms).
pub fn interval_arrow_text(iv: Interval) -> String {
    format!(
        "{} mons {} days {} microseconds",
        iv.months, iv.days, iv.micros
    )
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
        (Value::Decimal(x), t) => match t.storage() {
            ColumnType::Decimal(p, s) => ScalarValue::Decimal128(Some(*x), p, s),
            _ => ScalarValue::Decimal128(Some(*x), 38, 0),
        },
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

/// float8 -> float4 as PostgreSQL converts it: rounded to the nearest
/// float4, and 22003 when a finite value overflows to infinity or a
/// non-zero value underflows to zero (`float8 '1e300'::real`).
pub fn float4_from_float8(f: f64) -> Result<f32> {
    // the rounding is the conversion; the range is checked just below
    #[allow(clippy::cast_possible_truncation)]
    let r = f as f32;
    if r.is_infinite() && f.is_finite() {
        return Err(SqlError::NumericOutOfRange(
            "value out of range: overflow".into(),
        ));
    }
    if r == 0.0 && f != 0.0 {
        return Err(SqlError::NumericOutOfRange(
            "value out of range: underflow".into(),
        ));
    }
    Ok(r)
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
    #[test]
    fn float8_to_float4_refuses_what_does_not_fit() {
        assert_eq!(float4_from_float8(1.5).unwrap(), 1.5);
        assert_eq!(float4_from_float8(0.0).unwrap(), 0.0);
        assert!(float4_from_float8(f64::INFINITY).unwrap().is_infinite());
        assert!(float4_from_float8(f64::NAN).unwrap().is_nan());
        for bad in [1e300, -1e300, 1e-300] {
            assert_eq!(float4_from_float8(bad).unwrap_err().sqlstate(), "22003");
        }
        let v = coerce_value(Value::Double(1e300), ColumnType::Real).unwrap_err();
        assert_eq!(v.sqlstate(), "22003");
    }

    #[test]
    fn floats_into_integer_columns_round_as_postgresql() {
        for (x, ty, want) in [
            (2.5, ColumnType::Int, Value::Int(2)),
            (3.5, ColumnType::Int, Value::Int(4)),
            (-2.7, ColumnType::SmallInt, Value::SmallInt(-3)),
            (1e10, ColumnType::BigInt, Value::BigInt(10_000_000_000)),
        ] {
            assert_eq!(coerce_value(Value::Double(x), ty).unwrap(), want, "{x}");
        }
        for (x, ty) in [
            (1e10, ColumnType::Int),
            (32767.5, ColumnType::SmallInt),
            (f64::NAN, ColumnType::BigInt),
            (9.3e18, ColumnType::BigInt),
        ] {
            let e = coerce_value(Value::Double(x), ty).unwrap_err();
            assert_eq!(e.sqlstate(), "22003", "{x}");
        }
        assert_eq!(
            float_to_bigint(-9_223_372_036_854_775_808.0),
            Some(i64::MIN)
        );
    }

    use super::*;
    use bytes::{BufMut, BytesMut};
    use eddy_common::{ColumnType, Value};

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
        let schema = std::sync::Arc::new(datafusion::arrow::datatypes::Schema::new(vec![
            datafusion::arrow::datatypes::Field::new("u", ColumnType::Uuid.to_arrow(), true),
        ]));
        let batch = eddy_storage::arrow_values::batch_from_rows(
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
            eddy_storage::arrow_values::batch_rows(&batch, &[ColumnType::Uuid]).unwrap(),
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
}
