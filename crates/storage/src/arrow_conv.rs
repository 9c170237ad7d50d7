//! Conversions between Eddy [`Value`]s and Arrow arrays: building batches
//! from rows, reading a row back out of a batch, and per-column statistics.

use std::sync::Arc;

use arrow::array::*;
use arrow::compute;
use arrow::datatypes::*;
use eddy_common::{ColumnType, Row, Value};
use serde::{Deserialize, Serialize};

/// Min/max/null count of one column of one row group. A `Null` min or max
/// means "unknown" (an all-NULL column, or a type without ordering).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColumnStats {
    pub min: Value,
    pub max: Value,
    pub null_count: u64,
}

/// Statistics of one row group, indexed like the table's columns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowGroupStats {
    pub rows: u64,
    pub columns: Vec<ColumnStats>,
}

/// Appends values of one column type to an Arrow builder.
pub struct ColumnBuilder {
    ty: ColumnType,
    inner: Box<dyn ArrayBuilder>,
}

impl ColumnBuilder {
    pub fn new(ty: ColumnType, capacity: usize) -> ColumnBuilder {
        ColumnBuilder {
            ty,
            inner: new_builder(ty, capacity),
        }
    }

    /// Appends `v`; a value of the wrong type is appended as NULL (callers
    /// validate rows with `codec::check_row` first).
    pub fn append(&mut self, v: &Value) {
        append_to(self.inner.as_mut(), self.ty, v)
    }

    pub fn finish(&mut self) -> ArrayRef {
        self.inner.finish()
    }

    pub fn len(&self) -> usize {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

/// The builder type [`append_to`] expects for an array column.
type ListOfAny = ListBuilder<Box<dyn ArrayBuilder>>;

fn new_builder(ty: ColumnType, capacity: usize) -> Box<dyn ArrayBuilder> {
    {
        let inner: Box<dyn ArrayBuilder> = match ty {
            ColumnType::Boolean => Box::new(BooleanBuilder::with_capacity(capacity)),
            ColumnType::SmallInt => Box::new(Int16Builder::with_capacity(capacity)),
            ColumnType::Int => Box::new(Int32Builder::with_capacity(capacity)),
            ColumnType::BigInt => Box::new(Int64Builder::with_capacity(capacity)),
            ColumnType::Real => Box::new(Float32Builder::with_capacity(capacity)),
            ColumnType::Double => Box::new(Float64Builder::with_capacity(capacity)),
            ColumnType::Decimal(p, s) => Box::new(
                Decimal128Builder::with_capacity(capacity)
                    .with_data_type(DataType::Decimal128(p, s)),
            ),
            ColumnType::Text
            | ColumnType::Varchar(_)
            | ColumnType::Char(_)
            | ColumnType::Json
            | ColumnType::Jsonb => Box::new(StringBuilder::with_capacity(capacity, capacity * 8)),
            ColumnType::Date => Box::new(Date32Builder::with_capacity(capacity)),
            ColumnType::Timestamp | ColumnType::TimestampTz => Box::new(
                TimestampMicrosecondBuilder::with_capacity(capacity).with_data_type(ty.to_arrow()),
            ),
            ColumnType::Bytea => Box::new(BinaryBuilder::with_capacity(capacity, capacity * 8)),
            ColumnType::Interval => Box::new(IntervalMonthDayNanoBuilder::with_capacity(capacity)),
            ColumnType::Time => Box::new(Time64MicrosecondBuilder::with_capacity(capacity)),
            ColumnType::Uuid => Box::new(FixedSizeBinaryBuilder::with_capacity(
                capacity,
                eddy_common::UUID_LEN as i32,
            )),
            ColumnType::Array(e) => {
                let et = e.column_type();
                Box::new(
                    ListOfAny::with_capacity(new_builder(et, capacity), capacity)
                        .with_field(Arc::new(Field::new_list_field(et.to_arrow(), true))),
                )
            }
        };
        inner
    }
}

/// Appends `v` to a builder from [`new_builder`] for `ty`; a value of the
/// wrong type is appended as NULL.
fn append_to(inner: &mut dyn ArrayBuilder, ty: ColumnType, v: &Value) {
    {
        macro_rules! put {
            ($b:ty, $val:expr) => {{
                if let Some(b) = inner.as_any_mut().downcast_mut::<$b>() {
                    b.append_option($val);
                }
            }};
        }
        match ty {
            ColumnType::Boolean => put!(
                BooleanBuilder,
                match v {
                    Value::Boolean(x) => Some(*x),
                    _ => None,
                }
            ),
            ColumnType::SmallInt => put!(
                Int16Builder,
                match v {
                    Value::SmallInt(x) => Some(*x),
                    _ => None,
                }
            ),
            ColumnType::Int => put!(
                Int32Builder,
                match v {
                    Value::Int(x) => Some(*x),
                    _ => None,
                }
            ),
            ColumnType::BigInt => put!(
                Int64Builder,
                match v {
                    Value::BigInt(x) => Some(*x),
                    _ => None,
                }
            ),
            ColumnType::Real => put!(
                Float32Builder,
                match v {
                    Value::Real(x) => Some(*x),
                    _ => None,
                }
            ),
            ColumnType::Double => put!(
                Float64Builder,
                match v {
                    Value::Double(x) => Some(*x),
                    _ => None,
                }
            ),
            ColumnType::Decimal(..) => put!(
                Decimal128Builder,
                match v {
                    Value::Decimal(x) => Some(*x),
                    _ => None,
                }
            ),
            ColumnType::Text
            | ColumnType::Varchar(_)
            | ColumnType::Char(_)
            | ColumnType::Json
            | ColumnType::Jsonb => put!(
                StringBuilder,
                match v {
                    Value::Text(x) => Some(x.as_str()),
                    _ => None,
                }
            ),
            ColumnType::Date => put!(
                Date32Builder,
                match v {
                    Value::Date(x) => Some(*x),
                    _ => None,
                }
            ),
            ColumnType::Timestamp | ColumnType::TimestampTz => put!(
                TimestampMicrosecondBuilder,
                match v {
                    Value::Timestamp(x) => Some(*x),
                    _ => None,
                }
            ),
            ColumnType::Bytea => put!(
                BinaryBuilder,
                match v {
                    Value::Bytea(x) => Some(x.as_slice()),
                    _ => None,
                }
            ),
            ColumnType::Time => put!(
                Time64MicrosecondBuilder,
                match v {
                    Value::Time(x) => Some(*x),
                    _ => None,
                }
            ),
            ColumnType::Interval => put!(
                IntervalMonthDayNanoBuilder,
                match v {
                    // the time part is bounded (MAX_INTERVAL_MICROS) where
                    // values are made, so the nanoseconds fit
                    Value::Interval(x) => x
                        .nanos()
                        .map(|n| IntervalMonthDayNano::new(x.months, x.days, n)),
                    _ => None,
                }
            ),
            ColumnType::Uuid => {
                if let Some(b) = inner.as_any_mut().downcast_mut::<FixedSizeBinaryBuilder>() {
                    match v {
                        // 16 bytes into a builder of width 16: cannot fail
                        Value::Uuid(x) => {
                            if b.append_value(x).is_err() {
                                b.append_null();
                            }
                        }
                        _ => b.append_null(),
                    }
                }
            }
            ColumnType::Array(e) => {
                if let Some(b) = inner.as_any_mut().downcast_mut::<ListOfAny>() {
                    match v {
                        Value::Array(items) => {
                            for item in items {
                                append_to(b.values().as_mut(), e.column_type(), item);
                            }
                            b.append(true);
                        }
                        _ => b.append_null(),
                    }
                }
            }
        }
    }
}

/// The value at `row` of an array holding column type `ty`.
pub fn value_at(array: &dyn Array, ty: ColumnType, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    macro_rules! get {
        ($a:ty, $ctor:expr) => {
            match array.as_any().downcast_ref::<$a>() {
                Some(a) => $ctor(a.value(row)),
                None => Value::Null,
            }
        };
    }
    match ty {
        ColumnType::Boolean => get!(BooleanArray, Value::Boolean),
        ColumnType::SmallInt => get!(Int16Array, Value::SmallInt),
        ColumnType::Int => get!(Int32Array, Value::Int),
        ColumnType::BigInt => get!(Int64Array, Value::BigInt),
        ColumnType::Real => get!(Float32Array, Value::Real),
        ColumnType::Double => get!(Float64Array, Value::Double),
        ColumnType::Decimal(..) => get!(Decimal128Array, Value::Decimal),
        ColumnType::Text
        | ColumnType::Varchar(_)
        | ColumnType::Char(_)
        | ColumnType::Json
        | ColumnType::Jsonb => {
            get!(StringArray, |s: &str| Value::Text(s.to_string()))
        }
        ColumnType::Date => get!(Date32Array, Value::Date),
        ColumnType::Timestamp | ColumnType::TimestampTz => {
            get!(TimestampMicrosecondArray, Value::Timestamp)
        }
        ColumnType::Bytea => get!(BinaryArray, |b: &[u8]| Value::Bytea(b.to_vec())),
        ColumnType::Time => get!(Time64MicrosecondArray, Value::Time),
        ColumnType::Interval => get!(IntervalMonthDayNanoArray, |x: IntervalMonthDayNano| {
            Value::Interval(eddy_common::Interval {
                months: x.months,
                days: x.days,
                micros: x.nanoseconds / 1000,
            })
        }),
        ColumnType::Uuid => match array.as_any().downcast_ref::<FixedSizeBinaryArray>() {
            Some(a) => match <[u8; eddy_common::UUID_LEN]>::try_from(a.value(row)) {
                Ok(u) => Value::Uuid(u),
                Err(_) => Value::Null,
            },
            None => Value::Null,
        },
        ColumnType::Array(e) => match array.as_any().downcast_ref::<ListArray>() {
            Some(a) => {
                let items = a.value(row);
                let et = e.column_type();
                Value::Array(
                    (0..items.len())
                        .map(|i| value_at(items.as_ref(), et, i))
                        .collect(),
                )
            }
            None => Value::Null,
        },
    }
}

/// Reads row `row` of `batch` as the first `types.len()` columns; columns the
/// batch lacks (added later by ALTER TABLE) are NULL.
pub fn row_at(batch: &RecordBatch, types: &[ColumnType], row: usize) -> Row {
    types
        .iter()
        .enumerate()
        .map(|(i, &ty)| match batch.columns().get(i) {
            Some(a) => value_at(a.as_ref(), ty, row),
            None => Value::Null,
        })
        .collect()
}

/// Min, max and null count of one array.
pub fn column_stats(array: &dyn Array, ty: ColumnType) -> ColumnStats {
    let null_count = array.null_count() as u64;
    macro_rules! prim {
        ($a:ty, $ctor:expr) => {
            match array.as_any().downcast_ref::<$a>() {
                Some(a) => (
                    compute::min(a).map($ctor).unwrap_or(Value::Null),
                    compute::max(a).map($ctor).unwrap_or(Value::Null),
                ),
                None => (Value::Null, Value::Null),
            }
        };
    }
    let (min, max) = match ty {
        ColumnType::Boolean => match array.as_any().downcast_ref::<BooleanArray>() {
            Some(a) => (
                compute::min_boolean(a)
                    .map(Value::Boolean)
                    .unwrap_or(Value::Null),
                compute::max_boolean(a)
                    .map(Value::Boolean)
                    .unwrap_or(Value::Null),
            ),
            None => (Value::Null, Value::Null),
        },
        ColumnType::SmallInt => prim!(Int16Array, Value::SmallInt),
        ColumnType::Int => prim!(Int32Array, Value::Int),
        ColumnType::BigInt => prim!(Int64Array, Value::BigInt),
        // NaN makes float min/max meaningless for pruning: leave unknown.
        ColumnType::Real | ColumnType::Double => (Value::Null, Value::Null),
        ColumnType::Decimal(..) => prim!(Decimal128Array, Value::Decimal),
        ColumnType::Text | ColumnType::Varchar(_) | ColumnType::Char(_) => {
            match array.as_any().downcast_ref::<StringArray>() {
                Some(a) => (
                    compute::min_string(a)
                        .map(|s| Value::Text(s.to_string()))
                        .unwrap_or(Value::Null),
                    compute::max_string(a)
                        .map(|s| Value::Text(s.to_string()))
                        .unwrap_or(Value::Null),
                ),
                None => (Value::Null, Value::Null),
            }
        }
        ColumnType::Date => prim!(Date32Array, Value::Date),
        ColumnType::Time => prim!(Time64MicrosecondArray, Value::Time),
        ColumnType::Timestamp | ColumnType::TimestampTz => {
            prim!(TimestampMicrosecondArray, Value::Timestamp)
        }
        // bytea and uuid have no range statistics; jsonb does not order
        // as its text does
        ColumnType::Bytea
        | ColumnType::Uuid
        | ColumnType::Json
        | ColumnType::Jsonb
        | ColumnType::Interval
        | ColumnType::Array(_) => (Value::Null, Value::Null),
    };
    ColumnStats {
        min,
        max,
        null_count,
    }
}

/// A NULL column of `len` rows, for files written before a column existed.
pub fn null_column(ty: ColumnType, len: usize) -> ArrayRef {
    new_null_array(&ty.to_arrow(), len)
}

/// The Arrow schema of a column-tablet batch: the table's columns, then the
/// hidden `_eddy_lsn` (UInt64) and `_eddy_key` (Binary).
pub fn stored_schema(types: &[(String, ColumnType)]) -> SchemaRef {
    let mut fields: Vec<Field> = types
        .iter()
        .map(|(n, t)| Field::new(n, t.to_arrow(), true))
        .collect();
    fields.push(Field::new(LSN_COLUMN, DataType::UInt64, false));
    fields.push(Field::new(KEY_COLUMN, DataType::Binary, false));
    Arc::new(Schema::new(fields))
}

pub const LSN_COLUMN: &str = "_eddy_lsn";
pub const KEY_COLUMN: &str = "_eddy_key";

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::ArrayElem;

    #[test]
    fn array_columns_round_trip_through_arrow() {
        for (elem, items) in [
            (
                ArrayElem::Int,
                vec![Value::Int(1), Value::Null, Value::Int(i32::MIN)],
            ),
            (
                ArrayElem::Varchar(3),
                vec![Value::Text("é".into()), Value::Null],
            ),
            (ArrayElem::TimestampTz, vec![Value::Timestamp(-1)]),
            (ArrayElem::Decimal(5, 2), vec![Value::Decimal(12345)]),
            (ArrayElem::Uuid, vec![Value::Uuid([7; 16])]),
        ] {
            let ty = ColumnType::Array(elem);
            let mut b = ColumnBuilder::new(ty, 4);
            let vals = [Value::Array(items), Value::Null, Value::Array(vec![])];
            for v in &vals {
                b.append(v);
            }
            let a = b.finish();
            assert_eq!(a.data_type(), &ty.to_arrow());
            assert!(matches!(
                ColumnType::from_arrow(a.data_type()),
                Some(ColumnType::Array(_))
            ));
            for (i, v) in vals.iter().enumerate() {
                assert_eq!(&value_at(a.as_ref(), ty, i), v);
            }
        }
    }
}
