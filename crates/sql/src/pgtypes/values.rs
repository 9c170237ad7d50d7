//! `Value`s and Arrow: reading a cell as a `Value`, building arrays
//! from rows, coercing a value to a column type, and a value's text form.
//!
//! Before touching: the Arrow type of each [`ColumnType`] is fixed by
//! `ColumnType::to_arrow`; builders here must produce exactly that type.

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use super::*;
use std::sync::Arc;

use datafusion::arrow::array::IntervalMonthDayNanoBuilder;
use datafusion::arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, BinaryBuilder, BooleanBuilder, Date32Builder,
    Decimal128Builder, FixedSizeBinaryBuilder, Float32Builder, Float64Builder, Int16Builder,
    Int32Builder, Int64Builder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use datafusion::arrow::datatypes::IntervalMonthDayNano;
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, SchemaRef,
};
use datafusion::common::ScalarValue;
use eddy_common::{format_interval, format_uuid, ColumnType, Interval, Row, Value};

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
            (ColumnType::Double, Value::Real(f)) => Value::Double(*f as f64),
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
        | ColumnType::Jsonb => {
            // the byte capacity is only a hint
            Box::new(StringBuilder::with_capacity(
                capacity,
                capacity.saturating_mul(16),
            ))
        }
        ColumnType::Date => Box::new(Date32Builder::with_capacity(capacity)),
        ColumnType::Timestamp | ColumnType::TimestampTz => Box::new(
            TimestampMicrosecondBuilder::with_capacity(capacity).with_data_type(ty.to_arrow()),
        ),
        ColumnType::Bytea => Box::new(BinaryBuilder::with_capacity(
            capacity,
            capacity.saturating_mul(16),
        )),
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
pub(super) type ListOfAny = datafusion::arrow::array::ListBuilder<Box<dyn ArrayBuilder>>;

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
        for (i, (b, ty)) in builders.iter_mut().zip(types).enumerate() {
            let v = row.get(i).unwrap_or(&Value::Null);
            append_value(b.as_mut(), *ty, v)?;
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
}
