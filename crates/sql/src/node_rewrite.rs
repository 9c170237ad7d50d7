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
