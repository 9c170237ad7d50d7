//! PostgreSQL's `information_schema._pg_expandarray(anyarray)`: a
//! set-returning function of records `(x, n)`, each element of the array
//! and its subscript (from 1). pgjdbc's `getPrimaryKeys` and
//! `getIndexInfo` call it on `pg_constraint.conkey` and `pg_index.indkey`,
//! twice in one select list (`(f(a)).n` beside `f(a) AS keys`), which
//! PostgreSQL runs in lockstep.
//!
//! The AST rewrite (`rewrite.rs`) turns a call into
//! `unnest(eddy_pg_expandarray(a))`: this scalar function makes the list of
//! `(x, n)` structs, and DataFusion's `unnest` makes the rows (zipping
//! several unnests of one select list, as PostgreSQL does for set-returning
//! functions of equal length). A NULL or empty array gives no row, as in
//! PostgreSQL.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Array, ListArray, StructArray};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::SqlError;

/// The scalar half of `_pg_expandarray` (see the module's comment).
pub const EXPAND_ARRAY: &str = "eddy_pg_expandarray";

/// PostgreSQL's name for the function, in `information_schema`.
pub const PG_NAME: &str = "_pg_expandarray";

/// A type as PostgreSQL names it in "function ... does not exist".
fn type_name(t: &DataType) -> String {
    let oid = crate::pgtypes::pg_oid(t);
    crate::catalog::format_type(i64::from(oid), -1).unwrap_or_else(|| t.to_string())
}

/// The record type `(x anyelement, n int4)` of an array of `elem`.
fn record_fields(elem: &DataType) -> Fields {
    Fields::from(vec![
        Field::new("x", elem.clone(), true),
        Field::new("n", DataType::Int32, false),
    ])
}

fn record_list(elem: &DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(
        DataType::Struct(record_fields(elem)),
        true,
    )))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ExpandArray {
    signature: Signature,
}

impl ScalarUDFImpl for ExpandArray {
    fn name(&self) -> &str {
        EXPAND_ARRAY
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args.first() {
            Some(DataType::List(f)) => Ok(record_list(f.data_type())),
            // NULL: no rows, of an int4 element
            Some(DataType::Null) => Ok(record_list(&DataType::Int32)),
            Some(other) => Err(DataFusionError::from(SqlError::UndefinedOperator(format!(
                "function information_schema.{PG_NAME}({}) does not exist",
                type_name(other)
            )))),
            None => Err(DataFusionError::from(SqlError::UndefinedOperator(format!(
                "function information_schema.{PG_NAME}() does not exist"
            )))),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        let Some(arg) = args.args.first() else {
            return Err(DataFusionError::from(SqlError::UndefinedOperator(format!(
                "function information_schema.{PG_NAME}() does not exist"
            ))));
        };
        let array = arg.to_array(n)?;
        let out = expand(&array)?;
        if all_scalar {
            Ok(ColumnarValue::Scalar(
                datafusion::common::ScalarValue::try_from_array(&out, 0)?,
            ))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }
}

/// Each list of `array` as the list of its `(element, subscript)` records.
fn expand(array: &ArrayRef) -> DfResult<ArrayRef> {
    let list: ListArray = match array.data_type() {
        DataType::List(_) => array.as_list::<i32>().clone(),
        DataType::Null => {
            // every row NULL: an empty list type with all rows null
            let elem = DataType::Int32;
            let values =
                datafusion::arrow::array::new_empty_array(&DataType::Struct(record_fields(&elem)));
            let offsets = datafusion::arrow::buffer::OffsetBuffer::new_zeroed(array.len());
            return Ok(Arc::new(ListArray::try_new(
                Arc::new(Field::new_list_field(
                    DataType::Struct(record_fields(&elem)),
                    true,
                )),
                offsets,
                values,
                Some(datafusion::arrow::buffer::NullBuffer::new_null(array.len())),
            )?));
        }
        other => {
            return Err(DataFusionError::from(SqlError::UndefinedOperator(format!(
                "function information_schema.{PG_NAME}({}) does not exist",
                type_name(other)
            ))))
        }
    };
    let values = list.values();
    // the subscript of every value: its place in its row's list, from 1
    // (values outside every row's range, which no row reads, get 0)
    let mut subscripts = vec![0_i32; values.len()];
    for w in list.value_offsets().windows(2) {
        let (Some(&start), Some(&end)) = (w.first(), w.get(1)) else {
            continue;
        };
        let (Ok(start), Ok(end)) = (usize::try_from(start), usize::try_from(end)) else {
            continue;
        };
        for (slot, n) in subscripts.iter_mut().take(end).skip(start).zip(1_i32..) {
            *slot = n;
        }
    }
    let elem = values.data_type().clone();
    let records = StructArray::try_new(
        record_fields(&elem),
        vec![
            Arc::clone(values),
            Arc::new(Int32Array::from(subscripts)) as ArrayRef,
        ],
        None,
    )?;
    Ok(Arc::new(ListArray::try_new(
        Arc::new(Field::new_list_field(
            DataType::Struct(record_fields(&elem)),
            true,
        )),
        list.offsets().clone(),
        Arc::new(records),
        list.nulls().cloned(),
    )?))
}

/// `FROM information_schema._pg_expandarray(a)`: the rows `(x, n)` of a
/// constant array (the AST rewrite names the call `eddy_pg_expandarray`).
/// An argument that reads another FROM item (a lateral call) is refused
/// (0A000) rather than answered wrongly.
#[derive(Debug)]
pub struct ExpandArrayRows;

impl TableFunctionImpl for ExpandArrayRows {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let [Expr::Literal(value, _)] = args.exprs() else {
            return Err(DataFusionError::from(SqlError::FeatureNotSupported(
                format!(
                    "information_schema.{PG_NAME} in FROM takes one constant array \
                 (use it in the select list to expand a column)"
                ),
            )));
        };
        let records = expand(&value.to_array()?)?;
        let list = records.as_list::<i32>();
        let DataType::List(item) = list.data_type() else {
            return Err(DataFusionError::Internal(format!("{EXPAND_ARRAY} rows")));
        };
        let DataType::Struct(fields) = item.data_type() else {
            return Err(DataFusionError::Internal(format!("{EXPAND_ARRAY} rows")));
        };
        let schema = Arc::new(Schema::new(fields.clone()));
        let columns: Vec<ArrayRef> = if list.is_empty() || list.is_null(0) {
            fields
                .iter()
                .map(|f| datafusion::arrow::array::new_empty_array(f.data_type()))
                .collect()
        } else {
            list.value(0).as_struct().columns().to_vec()
        };
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
        Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
    }
}

/// `eddy_pg_expandarray`.
pub fn expand_array_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(ExpandArray {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int16Array;
    use datafusion::arrow::buffer::OffsetBuffer;

    #[test]
    fn subscripts_count_from_one_in_each_row() {
        // rows {3,1}, NULL, {}, {2}
        let values = Arc::new(Int16Array::from(vec![3, 1, 2])) as ArrayRef;
        let list = ListArray::try_new(
            Arc::new(Field::new_list_field(DataType::Int16, true)),
            OffsetBuffer::new(vec![0, 2, 2, 2, 3].into()),
            values,
            Some(vec![true, false, true, true].into()),
        )
        .unwrap();
        let out = expand(&(Arc::new(list) as ArrayRef)).unwrap();
        let out = out.as_list::<i32>();
        assert!(out.is_null(1));
        assert_eq!(out.value_length(0), 2);
        assert_eq!(out.value_length(2), 0);
        let first = out.value(0);
        let first = first.as_struct();
        let n = first
            .column(1)
            .as_primitive::<datafusion::arrow::datatypes::Int32Type>();
        assert_eq!(n.values().to_vec(), vec![1, 2]);
        let last = out.value(3);
        let last = last.as_struct();
        let x = last
            .column(0)
            .as_primitive::<datafusion::arrow::datatypes::Int16Type>();
        let n = last
            .column(1)
            .as_primitive::<datafusion::arrow::datatypes::Int32Type>();
        assert_eq!((x.value(0), n.value(0)), (2, 1));
    }
}
