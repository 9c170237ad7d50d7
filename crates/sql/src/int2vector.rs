//! `int2vector` columns of the catalog, marked with the declared type
//! `int2vector` in their field's metadata. `pg_index.indoption` is text
//! such as `0 3`, which is what PostgreSQL prints and what clients read
//! (SQLAlchemy splits it at spaces); `pg_index.indkey` is a list of
//! smallints, which `unnest` and `= ANY` take as clients use them, and
//! which is printed as PostgreSQL prints an int2vector, `1 3`
//! (`pgtypes::is_int2vector_list`; pg_dump parses it). PostgreSQL
//! subscripts an int2vector from 0 (pgjdbc's getIndexInfo reads
//! `i.indoption[ordinal - 1] & 1`): [`Int2VectorPlanner`] plans `v[k]` on
//! such a column as `eddy_int2vector_element(v, k)`, the k-th number (from
//! 0), NULL outside the vector as for any array.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Int16Builder};
use datafusion::arrow::compute::{cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::DFSchema;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawFieldAccessExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, GetFieldAccess, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};

use crate::error::SqlError;

/// The declared type (field metadata `pgtypes::DECLARED_TYPE_KEY`) of an
/// int2vector column.
pub const INT2VECTOR: &str = "int2vector";

const ELEMENT: &str = "eddy_int2vector_element";

/// Plans a subscript of an int2vector column (see the module's comment);
/// everything else is left to DataFusion.
#[derive(Debug, Default)]
pub struct Int2VectorPlanner;

impl ExprPlanner for Int2VectorPlanner {
    fn plan_field_access(
        &self,
        expr: RawFieldAccessExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawFieldAccessExpr>> {
        let GetFieldAccess::ListIndex { .. } = &expr.field_access else {
            return Ok(PlannerResult::Original(expr));
        };
        let is_vector = expr.expr.to_field(schema).is_ok_and(|(_, f)| {
            f.metadata()
                .get(crate::pgtypes::DECLARED_TYPE_KEY)
                .is_some_and(|t| t == INT2VECTOR)
        });
        if !is_vector {
            return Ok(PlannerResult::Original(expr));
        }
        let RawFieldAccessExpr {
            expr: vector,
            field_access: GetFieldAccess::ListIndex { key },
        } = expr
        else {
            return Err(DataFusionError::Internal("int2vector subscript".into()));
        };
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(Arc::new(element_udf()), vec![vector, *key]),
        )))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Element {
    signature: Signature,
}

/// The `k`-th number (from 0) of an int2vector's text.
fn element(text: &str, k: i64) -> Result<Option<i16>, SqlError> {
    let Ok(k) = usize::try_from(k) else {
        return Ok(None);
    };
    match text.split_ascii_whitespace().nth(k) {
        None => Ok(None),
        Some(n) => n.parse::<i16>().map(Some).map_err(|_| {
            SqlError::InvalidText(format!("invalid input syntax for type smallint: \"{n}\""))
        }),
    }
}

impl ScalarUDFImpl for Element {
    fn name(&self) -> &str {
        ELEMENT
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int16)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let n = args.number_rows;
        let arrays = args
            .args
            .iter()
            .map(|a| a.to_array(n))
            .collect::<DfResult<Vec<_>>>()?;
        let (Some(vectors), Some(keys)) = (arrays.first(), arrays.get(1)) else {
            return Err(DataFusionError::Internal(format!(
                "{ELEMENT} takes 2 arguments"
            )));
        };
        let keys =
            cast_with_options(keys, &DataType::Int64, &CastOptions::default()).map_err(|_| {
                DataFusionError::from(SqlError::DatatypeMismatch(
                    "array subscript must have type integer".into(),
                ))
            })?;
        let keys = keys.as_primitive::<Int64Type>();
        let mut out = Int16Builder::with_capacity(n);
        if let DataType::List(_) = vectors.data_type() {
            // a list (`indkey`): its k-th item, from 0
            let lists = vectors.as_list::<i32>();
            for row in 0..lists.len() {
                if lists.is_null(row) || keys.is_null(row) {
                    out.append_null();
                    continue;
                }
                let items = cast_with_options(
                    &lists.value(row),
                    &DataType::Int16,
                    &CastOptions::default(),
                )?;
                let items = items.as_primitive::<datafusion::arrow::datatypes::Int16Type>();
                let item = usize::try_from(keys.value(row))
                    .ok()
                    .filter(|k| *k < items.len() && items.is_valid(*k))
                    .map(|k| items.value(k));
                out.append_option(item);
            }
            return Ok(ColumnarValue::Array(Arc::new(out.finish())));
        }
        let vectors = cast_with_options(vectors, &DataType::Utf8, &CastOptions::default())?;
        let vectors = vectors.as_string::<i32>();
        for row in 0..vectors.len() {
            if vectors.is_null(row) || keys.is_null(row) {
                out.append_null();
                continue;
            }
            out.append_option(
                element(vectors.value(row), keys.value(row)).map_err(DataFusionError::from)?,
            );
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

fn element_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(Element {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn subscripts_count_from_zero() {
        assert_eq!(element("0 3", 0).unwrap(), Some(0));
        assert_eq!(element("0 3", 1).unwrap(), Some(3));
        assert_eq!(element("0 3", 2).unwrap(), None);
        assert_eq!(element("0 3", -1).unwrap(), None);
        assert_eq!(element("", 0).unwrap(), None);
    }
}
