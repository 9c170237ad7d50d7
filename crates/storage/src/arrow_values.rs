//! The one conversion between Eddy [`Value`]s and Arrow arrays, for every
//! [`ColumnType`]: building a column from values ([`ColumnBuilder`]) and
//! reading a value back out of an array ([`value_at`], [`row_at`]). Storage
//! (memtables, snapshots, bulk loads, indexes), the SQL layer (`pgtypes`,
//! COPY, DML) and stream views all use this module; nothing else matches
//! `Value` against Arrow builders or arrays.
//!
//! Invariant: a value that does not match its column's type is an error
//! ([`ConversionError`]); nothing converts silently, and nothing becomes
//! NULL that was not NULL. There are no implicit widenings here (an `Int`
//! value into a `BigInt` column is refused): coercion between types is the
//! SQL layer's job (`pgtypes::coerce_value`), done before values get here.
//!
//! Before touching:
//! * The Arrow type a builder produces is exactly `ColumnType::to_arrow`;
//!   batches built here are checked against schemas made from that.
//! * Reading accepts every Arrow encoding of the column's *logical* type
//!   (`Utf8View` for text, seconds or nanoseconds for timestamps, the three
//!   interval units, large and fixed-size lists), because query results
//!   come from DataFusion, which picks its own encodings. An array of any
//!   other type is an error, never a `Null` or a reinterpreted value; a
//!   decimal array must have the column's scale.
//! * This file is reached with values and arrays a client shaped, so it
//!   denies clippy's narrowing-cast, sign-loss, indexing and unchecked
//!   arithmetic lints, as `eddy_sql::pgtypes` does.

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::*;
use arrow::error::ArrowError;
use eddy_common::{ColumnType, Interval, Row, Value, UUID_LEN};

/// Arrow's `FixedSizeBinary` width of a uuid (`UUID_LEN`).
const UUID_WIDTH: i32 = 16;

/// Why a value could not be put into, or read out of, an Arrow array.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// A value of another type than the column's (a bug upstream, or a
    /// value the caller did not coerce).
    #[error("a {value} value does not fit a column of type {}", .column.pg_name())]
    ValueMismatch {
        column: ColumnType,
        value: &'static str,
    },
    /// An array whose Arrow type is not an encoding of the column's type.
    #[error("a column of type {} cannot be read from an Arrow {arrow} array", .column.pg_name())]
    ArrayMismatch { column: ColumnType, arrow: DataType },
    /// A builder that is not the one [`new_builder`] makes for the type.
    #[error("the Arrow builder does not build a column of type {}", .column.pg_name())]
    BuilderMismatch { column: ColumnType },
    /// An interval whose time part does not fit Arrow's nanoseconds.
    #[error("interval out of range")]
    IntervalOutOfRange,
    /// A timestamp whose unit conversion to microseconds overflows.
    #[error("timestamp out of range")]
    TimestampOutOfRange,
    /// A row past the end of the array.
    #[error("row {row} is past the end of an array of {len} rows")]
    RowOutOfBounds { row: usize, len: usize },
    #[error("arrow error: {0}")]
    Arrow(#[from] ArrowError),
}

impl ConversionError {
    /// The PostgreSQL SQLSTATE for this error where it reaches a client
    /// directly (storage wraps it as an internal error, XX000: storage
    /// checks rows before it builds arrays).
    pub fn sqlstate(&self) -> &'static str {
        match self {
            ConversionError::ValueMismatch { .. } => "42804",
            ConversionError::IntervalOutOfRange | ConversionError::TimestampOutOfRange => "22008",
            ConversionError::ArrayMismatch { .. }
            | ConversionError::BuilderMismatch { .. }
            | ConversionError::RowOutOfBounds { .. }
            | ConversionError::Arrow(_) => "XX000",
        }
    }
}

/// The name of a value's kind, for [`ConversionError::ValueMismatch`].
pub fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Boolean(_) => "boolean",
        Value::SmallInt(_) => "smallint",
        Value::Int(_) => "integer",
        Value::BigInt(_) => "bigint",
        Value::Real(_) => "real",
        Value::Double(_) => "double precision",
        Value::Decimal(_) => "numeric",
        Value::Text(_) => "text",
        Value::Date(_) => "date",
        Value::Timestamp(_) => "timestamp",
        Value::Bytea(_) => "bytea",
        Value::Uuid(_) => "uuid",
        Value::Interval(_) => "interval",
        Value::Time(_) => "time",
        Value::Array(_) => "array",
    }
}

/// An interval as Arrow's month-day-nanosecond value.
pub fn interval_to_arrow(iv: Interval) -> Result<IntervalMonthDayNano, ConversionError> {
    let nanos = iv.nanos().ok_or(ConversionError::IntervalOutOfRange)?;
    Ok(IntervalMonthDayNano::new(iv.months, iv.days, nanos))
}

/// Whether [`ColumnBuilder::append`] accepts `v` for a column of type
/// `ty`: exactly when `v.fits(ty)` and an interval's time part fits
/// Arrow's nanoseconds. Storage checks rows with this before they are
/// committed, so building arrays from committed rows cannot fail.
pub fn check_value(v: &Value, ty: ColumnType) -> Result<(), ConversionError> {
    if !v.fits(ty) {
        return Err(ConversionError::ValueMismatch {
            column: ty,
            value: value_kind(v),
        });
    }
    if let Value::Interval(iv) = v {
        interval_to_arrow(*iv)?;
    }
    Ok(())
}

/// Appends values of one column type to an Arrow array of
/// `ColumnType::to_arrow`.
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

    /// Appends `v`, which must be NULL or a value of the column's type
    /// (`Value::fits`); anything else is refused and nothing is appended.
    pub fn append(&mut self, v: &Value) -> Result<(), ConversionError> {
        append_to(self.inner.as_mut(), self.ty, v)
    }

    /// The column built so far (the builder starts again, empty).
    pub fn finish(&mut self) -> ArrayRef {
        self.inner.finish()
    }

    pub fn len(&self) -> usize {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    pub fn column_type(&self) -> ColumnType {
        self.ty
    }
}

/// The builder type [`append_to`] expects for an array column.
type ListOfAny = ListBuilder<Box<dyn ArrayBuilder>>;

fn new_builder(ty: ColumnType, capacity: usize) -> Box<dyn ArrayBuilder> {
    // byte capacities are only hints
    let bytes = capacity.saturating_mul(16);
    match ty {
        ColumnType::Boolean => Box::new(BooleanBuilder::with_capacity(capacity)),
        ColumnType::SmallInt => Box::new(Int16Builder::with_capacity(capacity)),
        ColumnType::Int => Box::new(Int32Builder::with_capacity(capacity)),
        ColumnType::BigInt => Box::new(Int64Builder::with_capacity(capacity)),
        ColumnType::Real => Box::new(Float32Builder::with_capacity(capacity)),
        ColumnType::Double => Box::new(Float64Builder::with_capacity(capacity)),
        ColumnType::Decimal(..) | ColumnType::Numeric => {
            Box::new(Decimal128Builder::with_capacity(capacity).with_data_type(ty.to_arrow()))
        }
        ColumnType::Text
        | ColumnType::Varchar(_)
        | ColumnType::Char(_)
        | ColumnType::Json
        | ColumnType::Jsonb => Box::new(StringBuilder::with_capacity(capacity, bytes)),
        ColumnType::Date => Box::new(Date32Builder::with_capacity(capacity)),
        ColumnType::Timestamp | ColumnType::TimestampTz => Box::new(
            TimestampMicrosecondBuilder::with_capacity(capacity).with_data_type(ty.to_arrow()),
        ),
        ColumnType::Bytea => Box::new(BinaryBuilder::with_capacity(capacity, bytes)),
        ColumnType::Interval => Box::new(IntervalMonthDayNanoBuilder::with_capacity(capacity)),
        ColumnType::Time => Box::new(Time64MicrosecondBuilder::with_capacity(capacity)),
        ColumnType::Uuid => Box::new(FixedSizeBinaryBuilder::with_capacity(capacity, UUID_WIDTH)),
        ColumnType::Array(e) => {
            let et = e.column_type();
            Box::new(
                ListOfAny::with_capacity(new_builder(et, capacity), capacity)
                    .with_field(Arc::new(Field::new_list_field(et.to_arrow(), true))),
            )
        }
    }
}

/// Appends `v` to a builder from [`new_builder`] for `ty`.
fn append_to(
    inner: &mut dyn ArrayBuilder,
    ty: ColumnType,
    v: &Value,
) -> Result<(), ConversionError> {
    let wrong = || ConversionError::ValueMismatch {
        column: ty,
        value: value_kind(v),
    };
    macro_rules! builder {
        ($b:ty) => {
            inner
                .as_any_mut()
                .downcast_mut::<$b>()
                .ok_or(ConversionError::BuilderMismatch { column: ty })?
        };
    }
    macro_rules! put {
        ($b:ty, $variant:ident, $x:ident => $val:expr) => {{
            let b = builder!($b);
            match v {
                Value::Null => b.append_null(),
                Value::$variant($x) => b.append_value($val),
                _ => return Err(wrong()),
            }
        }};
    }
    match ty.storage() {
        ColumnType::Boolean => put!(BooleanBuilder, Boolean, x => *x),
        ColumnType::SmallInt => put!(Int16Builder, SmallInt, x => *x),
        ColumnType::Int => put!(Int32Builder, Int, x => *x),
        ColumnType::BigInt => put!(Int64Builder, BigInt, x => *x),
        ColumnType::Real => put!(Float32Builder, Real, x => *x),
        ColumnType::Double => put!(Float64Builder, Double, x => *x),
        ColumnType::Decimal(..) | ColumnType::Numeric => put!(Decimal128Builder, Decimal, x => *x),
        ColumnType::Text => put!(StringBuilder, Text, x => x.as_str()),
        ColumnType::Date => put!(Date32Builder, Date, x => *x),
        ColumnType::Timestamp => put!(TimestampMicrosecondBuilder, Timestamp, x => *x),
        ColumnType::Bytea => put!(BinaryBuilder, Bytea, x => x.as_slice()),
        ColumnType::Time => put!(Time64MicrosecondBuilder, Time, x => *x),
        ColumnType::Interval => {
            let b = builder!(IntervalMonthDayNanoBuilder);
            match v {
                Value::Null => b.append_null(),
                Value::Interval(x) => b.append_value(interval_to_arrow(*x)?),
                _ => return Err(wrong()),
            }
        }
        ColumnType::Uuid => {
            let b = builder!(FixedSizeBinaryBuilder);
            match v {
                Value::Null => b.append_null(),
                Value::Uuid(x) => b.append_value(x)?,
                _ => return Err(wrong()),
            }
        }
        ColumnType::Array(e) => {
            let b = builder!(ListOfAny);
            match v {
                Value::Null => b.append_null(),
                Value::Array(items) => {
                    // check every element first, so that a refused value
                    // leaves nothing behind in the element builder
                    let et = e.column_type();
                    if let Some(bad) = items
                        .iter()
                        .find(|x| matches!(x, Value::Array(_)) || !x.fits(et))
                    {
                        return Err(ConversionError::ValueMismatch {
                            column: ty,
                            value: value_kind(bad),
                        });
                    }
                    for item in items {
                        append_to(b.values().as_mut(), et, item)?;
                    }
                    b.append(true);
                }
                _ => return Err(wrong()),
            }
        }
        // `storage()` never returns these
        ColumnType::Varchar(_)
        | ColumnType::Char(_)
        | ColumnType::Json
        | ColumnType::Jsonb
        | ColumnType::TimestampTz => return Err(ConversionError::BuilderMismatch { column: ty }),
    }
    Ok(())
}

/// The value at `row` of an array holding column type `ty`: NULL where the
/// array is null, else the value in any Arrow encoding of the type (see
/// the module doc); an array of another type is an error.
pub fn value_at(array: &dyn Array, ty: ColumnType, row: usize) -> Result<Value, ConversionError> {
    if row >= array.len() {
        return Err(ConversionError::RowOutOfBounds {
            row,
            len: array.len(),
        });
    }
    if array.is_null(row) {
        return Ok(Value::Null);
    }
    let mismatch = || ConversionError::ArrayMismatch {
        column: ty,
        arrow: array.data_type().clone(),
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
        // a scaled integer means nothing at another scale
        (ColumnType::Decimal(_, s), DataType::Decimal128(_, as_)) if s == *as_ => {
            Value::Decimal(array.as_primitive::<Decimal128Type>().value(row))
        }
        (ColumnType::Text, DataType::Utf8) => {
            Value::Text(array.as_string::<i32>().value(row).to_string())
        }
        (ColumnType::Text, DataType::LargeUtf8) => {
            Value::Text(array.as_string::<i64>().value(row).to_string())
        }
        (ColumnType::Text, DataType::Utf8View) => {
            Value::Text(array.as_string_view().value(row).to_string())
        }
        (ColumnType::Date, DataType::Date32) => {
            Value::Date(array.as_primitive::<Date32Type>().value(row))
        }
        (ColumnType::Timestamp, DataType::Timestamp(unit, _)) => {
            Value::Timestamp(timestamp_micros(array, *unit, row)?)
        }
        (ColumnType::Bytea, DataType::Binary) => {
            Value::Bytea(array.as_binary::<i32>().value(row).to_vec())
        }
        (ColumnType::Bytea, DataType::LargeBinary) => {
            Value::Bytea(array.as_binary::<i64>().value(row).to_vec())
        }
        (ColumnType::Bytea, DataType::BinaryView) => {
            Value::Bytea(array.as_binary_view().value(row).to_vec())
        }
        (ColumnType::Uuid, DataType::FixedSizeBinary(UUID_WIDTH)) => {
            let bytes = array.as_fixed_size_binary().value(row);
            Value::Uuid(<[u8; UUID_LEN]>::try_from(bytes).map_err(|_| mismatch())?)
        }
        (ColumnType::Time, DataType::Time64(_) | DataType::Time32(_)) => {
            Value::Time(time_micros(array, row).ok_or_else(mismatch)?)
        }
        (ColumnType::Interval, DataType::Interval(unit)) => {
            Value::Interval(interval_at(array, *unit, row))
        }
        (
            ColumnType::Array(e),
            DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..),
        ) => {
            let items = match array.data_type() {
                DataType::List(_) => array.as_list::<i32>().value(row),
                DataType::LargeList(_) => array.as_list::<i64>().value(row),
                _ => array.as_fixed_size_list().value(row),
            };
            let et = e.column_type();
            Value::Array(
                (0..items.len())
                    .map(|i| value_at(items.as_ref(), et, i))
                    .collect::<Result<_, _>>()?,
            )
        }
        _ => return Err(mismatch()),
    })
}

/// The microseconds since the epoch in a non-null cell of a timestamp
/// array of any unit (nanoseconds truncate toward zero, as Arrow's cast).
pub fn timestamp_micros(
    array: &dyn Array,
    unit: TimeUnit,
    row: usize,
) -> Result<i64, ConversionError> {
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
        TimeUnit::Nanosecond => array
            .as_primitive::<TimestampNanosecondType>()
            .value(row)
            .checked_div(1000),
    };
    micros.ok_or(ConversionError::TimestampOutOfRange)
}

/// The microseconds since midnight in a non-null cell of a time array
/// (`None` for a unit Arrow does not pair with it).
fn time_micros(array: &dyn Array, row: usize) -> Option<i64> {
    match array.data_type() {
        DataType::Time64(TimeUnit::Microsecond) => {
            Some(array.as_primitive::<Time64MicrosecondType>().value(row))
        }
        DataType::Time64(TimeUnit::Nanosecond) => array
            .as_primitive::<Time64NanosecondType>()
            .value(row)
            .checked_div(1000),
        DataType::Time32(TimeUnit::Second) => {
            i64::from(array.as_primitive::<Time32SecondType>().value(row)).checked_mul(1_000_000)
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            i64::from(array.as_primitive::<Time32MillisecondType>().value(row)).checked_mul(1000)
        }
        _ => None,
    }
}

/// The interval in a non-null cell of an interval array of any unit
/// (nanoseconds truncate toward zero to microseconds).
fn interval_at(array: &dyn Array, unit: IntervalUnit, row: usize) -> Interval {
    match unit {
        IntervalUnit::MonthDayNano => {
            let v = array.as_primitive::<IntervalMonthDayNanoType>().value(row);
            Interval {
                months: v.months,
                days: v.days,
                micros: v.nanoseconds.checked_div(1000).unwrap_or(0),
            }
        }
        IntervalUnit::DayTime => {
            let v = array.as_primitive::<IntervalDayTimeType>().value(row);
            Interval {
                months: 0,
                days: v.days,
                // an i32 of milliseconds times 1000 is below 2^41
                micros: i64::from(v.milliseconds).saturating_mul(1000),
            }
        }
        IntervalUnit::YearMonth => Interval {
            months: array.as_primitive::<IntervalYearMonthType>().value(row),
            days: 0,
            micros: 0,
        },
    }
}

/// Reads row `row` of `batch` as the first `types.len()` columns; columns the
/// batch lacks (added later by ALTER TABLE) are NULL. The hidden
/// `_eddy_lsn` / `_eddy_key` columns of a stored batch are not table
/// columns: a file written before ADD COLUMN has them where the new
/// column would be, and they read as that column's NULL, never as its
/// value.
pub fn row_at(
    batch: &RecordBatch,
    types: &[ColumnType],
    row: usize,
) -> Result<Row, ConversionError> {
    let schema = batch.schema();
    types
        .iter()
        .enumerate()
        .map(|(i, &ty)| {
            let hidden = schema.fields().get(i).is_some_and(|f| {
                f.name() == crate::arrow_conv::LSN_COLUMN
                    || f.name() == crate::arrow_conv::KEY_COLUMN
            });
            match batch.columns().get(i) {
                Some(a) if !hidden => value_at(a.as_ref(), ty, row),
                _ => Ok(Value::Null),
            }
        })
        .collect()
}

/// Every row of `batch` as its first `types.len()` columns (see [`row_at`]).
pub fn batch_rows(batch: &RecordBatch, types: &[ColumnType]) -> Result<Vec<Row>, ConversionError> {
    (0..batch.num_rows())
        .map(|r| row_at(batch, types, r))
        .collect()
}

/// One array per type, built from `rows` (a row shorter than `types` is
/// NULL-padded). The arrays have exactly `ColumnType::to_arrow` types.
pub fn rows_to_arrays(
    types: &[ColumnType],
    rows: &[Row],
) -> Result<Vec<ArrayRef>, ConversionError> {
    let mut builders: Vec<ColumnBuilder> = types
        .iter()
        .map(|&t| ColumnBuilder::new(t, rows.len()))
        .collect();
    for row in rows {
        for (i, b) in builders.iter_mut().enumerate() {
            b.append(row.get(i).unwrap_or(&Value::Null))?;
        }
    }
    Ok(builders.iter_mut().map(ColumnBuilder::finish).collect())
}

/// A batch of `schema` (whose fields have the Arrow types of `types`)
/// built from `rows`, as [`rows_to_arrays`].
pub fn batch_from_rows(
    schema: &SchemaRef,
    types: &[ColumnType],
    rows: &[Row],
) -> Result<RecordBatch, ConversionError> {
    let arrays = rows_to_arrays(types, rows)?;
    Ok(RecordBatch::try_new(Arc::clone(schema), arrays)?)
}

#[cfg(test)]
#[path = "arrow_values_tests.rs"]
mod tests;
