//! A lateral `unnest` in FROM (`FROM t, jsonb_array_elements(t.j) AS e`,
//! which `crate::srf_rewrite` makes a lateral derived table of
//! `unnest(...)` calls) planned as an unnest over the left side.
//!
//! DataFusion plans such a join as `Join(left, Subquery(...))` whose
//! subquery reads the left row through outer references; its decorrelation
//! handles correlated filters only, and the physical planner refuses an
//! outer reference. This analyzer rule rebuilds the subquery on top of the
//! left input instead: the subquery's one-row `EmptyRelation` becomes the
//! left plan, each projection also passes the left columns through, each
//! `Unnest` repeats them per element (DataFusion's unnest keeps the other
//! columns of a row), outer references become plain columns, and a last
//! projection gives the join's schema (left columns, then the subquery's
//! under its alias). An inner join's ON condition becomes a filter above.
//!
//! Invariants: only a subquery made of projections, unnests and aliases
//! over a one-row `EmptyRelation` is rebuilt, under an inner (or cross)
//! join; anything else is left as DataFusion planned it. The subquery's own
//! columns get names of their own (`__eddy_lateral_N`) in the rebuilt
//! plan, so that none clashes with a left column of the same name.

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Column, RecursionUnnestOption};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{Expr, JoinType, LogicalPlan, LogicalPlanBuilder, Subquery};
use datafusion::optimizer::AnalyzerRule;

use crate::error::SqlError;

/// The analyzer rule of the module doc.
#[derive(Debug, Default)]
pub struct LateralUnnest;

impl AnalyzerRule for LateralUnnest {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(rewrite_join).data()
    }

    fn name(&self) -> &str {
        "eddy_lateral_unnest"
    }
}

fn rewrite_join(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Join(join) = &plan else {
        return Ok(Transformed::no(plan));
    };
    let Some(sub) = lateral_subquery(&join.right) else {
        return Ok(Transformed::no(plan));
    };
    if join.join_type != JoinType::Inner || !join.on.is_empty() {
        // the left rows without elements would need NULL-extending
        if sub
            .subquery
            .exists(|p| Ok(matches!(p, LogicalPlan::Unnest(_))))?
        {
            return Err(DataFusionError::External(Box::new(
                SqlError::FeatureNotSupported(format!(
                    "{} JOIN LATERAL of a set-returning function is not supported \
                     (a comma, CROSS JOIN LATERAL or JOIN LATERAL ... ON are)",
                    join.join_type
                )),
            )));
        }
        return Ok(Transformed::no(plan));
    }
    let mut names = 0usize;
    let Some((built, cols)) = rebuild(&sub.subquery, &join.left, &mut names)? else {
        return Ok(Transformed::no(plan));
    };
    let right = join.right.schema();
    if cols.len() != right.fields().len() {
        return Ok(Transformed::no(plan));
    }
    let mut exprs = passed_through(&join.left);
    for ((qualifier, field), c) in right.iter().zip(cols) {
        exprs.push(Expr::Column(c).alias_qualified(qualifier.cloned(), field.name()));
    }
    let mut b = LogicalPlanBuilder::from(built).project(exprs)?;
    if let Some(filter) = &join.filter {
        b = b.filter(filter.clone())?;
    }
    Ok(Transformed::yes(b.build()?))
}

fn lateral_subquery(right: &LogicalPlan) -> Option<&Subquery> {
    match right {
        LogicalPlan::SubqueryAlias(a) => match a.input.as_ref() {
            LogicalPlan::Subquery(s) => Some(s),
            _ => None,
        },
        LogicalPlan::Subquery(s) => Some(s),
        _ => None,
    }
}

fn passed_through(left: &LogicalPlan) -> Vec<Expr> {
    left.schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect()
}

/// `plan` (a lateral subquery) rebuilt over `left`, with the columns of the
/// rebuilt plan that stand for `plan`'s output columns, in order; `None`
/// when `plan` is not of the shape of the module doc.
fn rebuild(
    plan: &LogicalPlan,
    left: &LogicalPlan,
    names: &mut usize,
) -> DfResult<Option<(LogicalPlan, Vec<Column>)>> {
    match plan {
        LogicalPlan::EmptyRelation(e) if e.produce_one_row => Ok(Some((left.clone(), vec![]))),
        LogicalPlan::SubqueryAlias(a) => rebuild(&a.input, left, names),
        LogicalPlan::Projection(p) => {
            let Some((input, cols)) = rebuild(&p.input, left, names)? else {
                return Ok(None);
            };
            let in_schema = p.input.schema();
            let mut exprs = passed_through(left);
            let mut out = Vec::with_capacity(p.expr.len());
            for e in &p.expr {
                let e = e
                    .clone()
                    .unalias()
                    .transform_up(|x| match x {
                        Expr::OuterReferenceColumn(_, c) => Ok(Transformed::yes(Expr::Column(c))),
                        Expr::Column(c) => {
                            let i = in_schema.index_of_column(&c)?;
                            match cols.get(i) {
                                Some(n) => Ok(Transformed::yes(Expr::Column(n.clone()))),
                                None => Ok(Transformed::no(Expr::Column(c))),
                            }
                        }
                        other => Ok(Transformed::no(other)),
                    })?
                    .data;
                let name = format!("__eddy_lateral_{names}");
                *names += 1;
                exprs.push(e.alias(&name));
                out.push(Column::from_name(name));
            }
            let built = LogicalPlanBuilder::from(input).project(exprs)?.build()?;
            Ok(Some((built, out)))
        }
        LogicalPlan::Unnest(u) => {
            let Some((input, cols)) = rebuild(&u.input, left, names)? else {
                return Ok(None);
            };
            let in_schema = u.input.schema();
            let map = |c: &Column| -> DfResult<Option<Column>> {
                Ok(cols.get(in_schema.index_of_column(c)?).cloned())
            };
            let mut exec = Vec::with_capacity(u.exec_columns.len());
            for c in &u.exec_columns {
                let Some(n) = map(c)? else { return Ok(None) };
                exec.push(n);
            }
            let mut options = u.options.clone();
            let mut recursions = Vec::with_capacity(options.recursions.len());
            for r in &options.recursions {
                let Some(n) = map(&r.input_column)? else {
                    return Ok(None);
                };
                recursions.push(RecursionUnnestOption {
                    input_column: n,
                    output_column: r.output_column.clone(),
                    depth: r.depth,
                });
            }
            options.recursions = recursions;
            let left_len = left.schema().fields().len();
            let built = LogicalPlanBuilder::from(input)
                .unnest_columns_with_options(exec, options)?
                .build()?;
            let out: Vec<Column> = built
                .schema()
                .columns()
                .into_iter()
                .skip(left_len)
                .collect();
            if out.len() != u.schema.fields().len() {
                return Ok(None);
            }
            Ok(Some((built, out)))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::util::pretty::pretty_format_batches;

    /// `sql`'s answer as a table, planned with Eddy's analyzer rules.
    async fn answer(sql: &str) -> String {
        let batches = crate::result_types::answer_with_eddy_rules(sql).await;
        pretty_format_batches(&batches).expect("prints").to_string()
    }

    #[tokio::test]
    async fn lateral_unnest_repeats_the_left_row_per_element() {
        // a left column named as the subquery's own column: no clash
        let got = answer(
            "SELECT t.id, t.x, e.x FROM (VALUES (1, [10, 20]), (2, [30])) AS t(id, x), \
             LATERAL (SELECT unnest(t.x) AS x) AS e ORDER BY e.x",
        )
        .await;
        let want = "+----+----------+----+\n\
                    | id | x        | x  |\n\
                    +----+----------+----+\n\
                    | 1  | [10, 20] | 10 |\n\
                    | 1  | [10, 20] | 20 |\n\
                    | 2  | [30]     | 30 |\n\
                    +----+----------+----+";
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn a_join_condition_filters_the_rows() {
        let got = answer(
            "SELECT t.id, e.v FROM (VALUES (1, [1, 2, 3])) AS t(id, a) \
             JOIN LATERAL (SELECT unnest(t.a) AS v) AS e ON e.v > t.id ORDER BY e.v",
        )
        .await;
        let want = "+----+---+\n\
                    | id | v |\n\
                    +----+---+\n\
                    | 1  | 2 |\n\
                    | 1  | 3 |\n\
                    +----+---+";
        assert_eq!(got, want);
    }
}
