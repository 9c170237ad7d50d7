//! The walk Eddy's analyzer rules share: rewrite the expressions of one
//! logical plan node, keeping its output names, then recompute its schema.
//!
//! Used by `result_types`, `uuid_type` and `numeric_division`, each with a
//! rule run under `transform_up_with_subqueries`.

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::DFSchema;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::logical_expr::{ExprSchemable, LogicalPlanBuilder, Values};

/// Rewrites every expression of `plan` (not of its inputs) bottom-up with
/// `rewrite`, which is given the merged schema of the node's inputs. Output
/// names are preserved, so nodes above that refer to a column by name
/// still find it. The node's schema is recomputed even where its own
/// expressions did not change: an input's types may have (a rewritten
/// projection below this one).
pub(crate) fn rewrite_node_expressions(
    plan: LogicalPlan,
    mut rewrite: impl FnMut(Expr, &DFSchema) -> DfResult<Transformed<Expr>>,
) -> DfResult<Transformed<LogicalPlan>> {
    let names = NamePreserver::new(&plan);
    let input = merge_schema(&plan.inputs());
    let plan = plan
        .map_expressions(|expr| {
            let saved = names.save(&expr);
            expr.transform_up(|e| rewrite(e, &input))
                .map(|t| t.update_data(|e| saved.restore(e)))
        })?
        .data;
    plan.recompute_schema().map(Transformed::yes)
}

/// A `VALUES` list whose cells a rule rewrote: its schema kept where every
/// cell still has its column's type, else its column types inferred again
/// from the cells under the list's own names (a `VALUES` node does not
/// recompute its schema, and a cell of another type than its column's
/// fails when the batch is built).
pub(crate) fn retype_values(values: Values) -> DfResult<Transformed<LogicalPlan>> {
    let cells_schema = DFSchema::empty();
    let mut keeps_types = true;
    'rows: for row in &values.values {
        for (cell, field) in row.iter().zip(values.schema.fields()) {
            let t = cell.get_type(&cells_schema)?;
            if t != *field.data_type() && t != datafusion::arrow::datatypes::DataType::Null {
                keeps_types = false;
                break 'rows;
            }
        }
    }
    if keeps_types {
        return Ok(Transformed::no(LogicalPlan::Values(values)));
    }
    let Values { schema, values } = values;
    let LogicalPlan::Values(inferred) = LogicalPlanBuilder::values(values)?.build()? else {
        return Err(datafusion::error::DataFusionError::Internal(
            "a VALUES list built as another plan".into(),
        ));
    };
    // the inferred types under the list's own names (and qualifiers)
    let fields = schema
        .iter()
        .zip(inferred.schema.fields())
        .map(|((qualifier, old), new)| {
            let field = old
                .as_ref()
                .clone()
                .with_data_type(new.data_type().clone())
                .with_nullable(new.is_nullable());
            (qualifier.cloned(), std::sync::Arc::new(field))
        })
        .collect();
    let schema = DFSchema::new_with_metadata(fields, schema.metadata().clone())?;
    Ok(Transformed::yes(LogicalPlan::Values(Values {
        schema: std::sync::Arc::new(schema),
        values: inferred.values,
    })))
}
