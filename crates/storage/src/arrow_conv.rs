//! Column-file helpers around Arrow: per-column statistics, the stored
//! schema (table columns plus the hidden LSN and key columns) and NULL
//! columns for files written before a column existed.
//!
//! Values go into and come out of arrays only through
//! [`crate::arrow_values`], which refuses a value of the wrong type.

use std::sync::Arc;

use arrow::array::*;
use arrow::compute;
use arrow::datatypes::*;
use eddy_common::{ColumnType, Value};
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
        ColumnType::Decimal(..) | ColumnType::Numeric => prim!(Decimal128Array, Value::Decimal),
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
