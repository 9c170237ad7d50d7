//! Turning subquery expressions into [`ApplyNode`] columns: every one left
//! after DataFusion's optimizer ([`apply_remaining`]), and, before it, the
//! subqueries DataFusion's joins would answer wrongly or not at all
//! ([`ProtectSubqueries`]).
//!
//! A node `N(exprs)` over `input` becomes `N(exprs')` over
//! `Apply(input)`, each taken subquery replaced by a column reference;
//! names are kept (aliases), and a Filter or Sort gets a Projection on top
//! that drops the Apply's columns, so the plan's schemas above are
//! unchanged.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, Result as DfResult};
use datafusion::logical_expr::expr::{Exists, InSubquery};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    Aggregate, BinaryExpr, Expr, Extension, Filter, LogicalPlan, LogicalPlanBuilder, Operator,
    Projection, Sort,
};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

use super::{Applied, ApplyKind, ApplyNode};

/// Column names for Apply outputs, unique within a process (so nested and
/// repeated rewrites never collide).
fn fresh_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("__eddy_subquery_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Takes `e` (a subquery expression) into `applied`, returning the column
/// that replaces it; `None` for any other expression.
fn take(e: &Expr, applied: &mut Vec<Applied>) -> Option<Expr> {
    let (kind, plan) = match e {
        Expr::ScalarSubquery(sq) => (ApplyKind::Scalar, &sq.subquery),
        Expr::Exists(Exists { subquery, negated }) => {
            (ApplyKind::Exists { negated: *negated }, &subquery.subquery)
        }
        Expr::InSubquery(InSubquery {
            expr,
            subquery,
            negated,
        }) => (
            ApplyKind::In {
                probe: expr.clone(),
                negated: *negated,
            },
            &subquery.subquery,
        ),
        _ => return None,
    };
    let name = fresh_name();
    applied.push(Applied {
        kind,
        plan: Arc::clone(plan),
        name: name.clone(),
    });
    Some(Expr::Column(Column::from_name(name)))
}

/// Every subquery expression of the plan's Projections, Filters,
/// Aggregates and Sorts as Apply columns. Subquery plans are left as they
/// are: they are planned again (this way) each time they run.
pub fn apply_remaining(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up(|node| {
        if let LogicalPlan::Extension(ext) = &node {
            if let Some(apply) = ext.node.as_any().downcast_ref::<ApplyNode>() {
                if apply.carry {
                    // the physical planner must not see the carried plans
                    let plain = ApplyNode::try_new(apply.input.clone(), apply.subqueries.clone())?;
                    return Ok(Transformed::yes(LogicalPlan::Extension(Extension {
                        node: Arc::new(plain),
                    })));
                }
            }
        }
        if !has_subquery(&node) {
            return Ok(Transformed::no(node));
        }
        rewrite_node(node, false, &mut |e, applied| {
            e.transform_down(|e| {
                Ok(match take(&e, applied) {
                    Some(c) => Transformed::new(c, true, TreeNodeRecursion::Jump),
                    None => Transformed::no(e),
                })
            })
        })
    })
    .map(|t| t.data)
}

fn has_subquery(node: &LogicalPlan) -> bool {
    node.expressions().iter().any(|e| {
        e.exists(|e| {
            Ok(matches!(
                e,
                Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_)
            ))
        })
        .unwrap_or(false)
    })
}

type Taker<'a> = dyn FnMut(Expr, &mut Vec<Applied>) -> DfResult<Transformed<Expr>> + 'a;

/// `node` with its expressions rewritten by `rewrite_expr` (which moves
/// the subqueries it takes into the Apply), over `Apply(input)`.
fn rewrite_node(
    node: LogicalPlan,
    carry: bool,
    rewrite_expr: &mut Taker,
) -> DfResult<Transformed<LogicalPlan>> {
    let preserver = NamePreserver::new(&node);
    let mut applied = Vec::new();
    let mut map = |e: Expr, applied: &mut Vec<Applied>| -> DfResult<Expr> {
        let saved = preserver.save(&e);
        let t = rewrite_expr(e, applied)?;
        Ok(if t.transformed {
            saved.restore(t.data)
        } else {
            t.data
        })
    };
    let apply = |input: &Arc<LogicalPlan>, applied: Vec<Applied>| -> DfResult<LogicalPlan> {
        Ok(LogicalPlan::Extension(Extension {
            node: Arc::new(ApplyNode::try_new_carrying(
                input.as_ref().clone(),
                applied,
                carry,
            )?),
        }))
    };
    let out = match node {
        LogicalPlan::Projection(p) => {
            let exprs = p
                .expr
                .iter()
                .map(|e| map(e.clone(), &mut applied))
                .collect::<DfResult<Vec<_>>>()?;
            if applied.is_empty() {
                return Ok(Transformed::no(LogicalPlan::Projection(p)));
            }
            LogicalPlan::Projection(Projection::try_new(
                exprs,
                Arc::new(apply(&p.input, applied)?),
            )?)
        }
        LogicalPlan::Filter(f) => {
            let predicate = map(f.predicate.clone(), &mut applied)?;
            if applied.is_empty() {
                return Ok(Transformed::no(LogicalPlan::Filter(f)));
            }
            let filtered = LogicalPlan::Filter(Filter::try_new(
                predicate,
                Arc::new(apply(&f.input, applied)?),
            )?);
            keep_columns(filtered, &f.input)?
        }
        LogicalPlan::Sort(s) => {
            let mut exprs = Vec::with_capacity(s.expr.len());
            for se in &s.expr {
                exprs.push(se.with_expr(map(se.expr.clone(), &mut applied)?));
            }
            if applied.is_empty() {
                return Ok(Transformed::no(LogicalPlan::Sort(s)));
            }
            let sorted = LogicalPlan::Sort(Sort {
                expr: exprs,
                input: Arc::new(apply(&s.input, applied)?),
                fetch: s.fetch,
            });
            keep_columns(sorted, &s.input)?
        }
        LogicalPlan::Aggregate(a) => {
            let group = a
                .group_expr
                .iter()
                .map(|e| map(e.clone(), &mut applied))
                .collect::<DfResult<Vec<_>>>()?;
            let aggr = a
                .aggr_expr
                .iter()
                .map(|e| map(e.clone(), &mut applied))
                .collect::<DfResult<Vec<_>>>()?;
            if applied.is_empty() {
                return Ok(Transformed::no(LogicalPlan::Aggregate(a)));
            }
            let new = LogicalPlan::Aggregate(Aggregate::try_new(
                Arc::new(apply(&a.input, applied)?),
                group,
                aggr,
            )?);
            // same names as before, in case the aggregate's own changed
            let old_schema = Arc::clone(&a.schema);
            restore_names(new, &old_schema)?
        }
        other => return Ok(Transformed::no(other)),
    };
    Ok(Transformed::yes(out))
}

/// `plan` projected to the columns of `like` (dropping the Apply's).
fn keep_columns(plan: LogicalPlan, like: &LogicalPlan) -> DfResult<LogicalPlan> {
    let cols: Vec<Expr> = like
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    LogicalPlanBuilder::from(plan).project(cols)?.build()
}

/// `plan` (same arity as `schema`) with `schema`'s qualified names.
fn restore_names(
    plan: LogicalPlan,
    schema: &datafusion::common::DFSchema,
) -> DfResult<LogicalPlan> {
    if plan.schema().columns() == schema.columns() {
        return Ok(plan);
    }
    let exprs: Vec<Expr> = plan
        .schema()
        .columns()
        .into_iter()
        .zip(schema.iter())
        .map(|(c, (q, f))| Expr::Column(c).alias_qualified(q.cloned(), f.name()))
        .collect();
    LogicalPlanBuilder::from(plan).project(exprs)?.build()
}

/// Takes, before DataFusion's decorrelation, the subqueries its joins
/// would answer wrongly or not at all:
/// * the `IN` subqueries of a Filter whose NULL matters: a join knows only
///   matched or not, but `x IN (...)` is NULL when `x` is NULL or no row
///   matches and one is NULL, and under NOT, IS [NOT] NULL, CASE or a
///   comparison that NULL is not false. Kept for DataFusion: IN reached
///   from the predicate's root only through AND/OR (there NULL filters a
///   row out as false does), and an uncorrelated NOT IN that is a
///   top-level conjunct (its null-aware anti join is right);
/// * in a Filter or Projection, any subquery with a nested subquery that
///   reads this level's columns (two-level correlation): once bound, the
///   nested one is an ordinary one-level correlation.
#[derive(Debug, Default)]
pub struct ProtectSubqueries;

impl OptimizerRule for ProtectSubqueries {
    fn name(&self) -> &str {
        "eddy_protect_subqueries"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let start = match &plan {
            LogicalPlan::Filter(_) => Position::TopConjunct,
            LogicalPlan::Projection(_) => Position::Other,
            _ => return Ok(Transformed::no(plan)),
        };
        if !has_subquery(&plan) {
            return Ok(Transformed::no(plan));
        }
        let own: Vec<Column> = plan
            .inputs()
            .iter()
            .flat_map(|i| i.schema().columns())
            .collect();
        let in_filter = matches!(plan, LogicalPlan::Filter(_));
        rewrite_node(plan, false, &mut |e, applied| {
            protect(e, start, in_filter, &own, applied)
        })
    }
}

/// Takes every correlated subquery still in a Filter once DataFusion's
/// decorrelation rules have run, just before `push_down_filter`: that rule
/// moves a predicate below a SubqueryAlias, a Projection or to one side of
/// a join by the columns it names outside its subqueries, renaming those
/// but not the outer references inside them, which then name columns the
/// new place lacks (`FROM t1 AS o WHERE a > (SELECT ... o.c)`). Under the
/// Apply the predicate names the Apply's column, which stays put.
#[derive(Debug, Default)]
pub struct ApplyCorrelatedFilters;

impl OptimizerRule for ApplyCorrelatedFilters {
    fn name(&self) -> &str {
        "eddy_apply_correlated_filters"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        if !matches!(plan, LogicalPlan::Filter(_)) || !has_subquery(&plan) {
            return Ok(Transformed::no(plan));
        }
        let own: Vec<Column> = plan
            .inputs()
            .iter()
            .flat_map(|i| i.schema().columns())
            .collect();
        rewrite_node(plan, false, &mut |e, applied| {
            e.transform_down(|e| {
                let correlated = match &e {
                    Expr::ScalarSubquery(sq) => plan_reads(&sq.subquery, &own),
                    Expr::Exists(Exists { subquery, .. })
                    | Expr::InSubquery(InSubquery { subquery, .. }) => {
                        plan_reads(&subquery.subquery, &own)
                    }
                    _ => false,
                };
                if !correlated {
                    return Ok(Transformed::no(e));
                }
                Ok(match take(&e, applied) {
                    Some(c) => Transformed::new(c, true, TreeNodeRecursion::Jump),
                    None => Transformed::no(e),
                })
            })
        })
    }
}

/// DataFusion's optimizer rules with Eddy's subquery rules in their
/// places: [`ProtectSubqueries`] first, [`ApplyCorrelatedFilters`] just
/// before `push_down_filter`.
pub fn optimizer_rules() -> Vec<Arc<dyn OptimizerRule + Send + Sync>> {
    let mut rules: Vec<Arc<dyn OptimizerRule + Send + Sync>> = vec![Arc::new(ProtectSubqueries)];
    let mut placed = false;
    for rule in datafusion::optimizer::Optimizer::new().rules {
        if rule.name() == "push_down_filter" && !placed {
            rules.push(Arc::new(ApplyCorrelatedFilters));
            placed = true;
        }
        rules.push(rule);
    }
    if !placed {
        rules.push(Arc::new(ApplyCorrelatedFilters));
    }
    rules
}

/// Where an expression sits in a filter predicate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Position {
    /// reached from the root through AND only
    TopConjunct,
    /// reached through AND/OR (NULL and false filter alike)
    Monotone,
    /// anywhere else
    Other,
}

fn protect(
    e: Expr,
    pos: Position,
    in_filter: bool,
    own: &[Column],
    applied: &mut Vec<Applied>,
) -> DfResult<Transformed<Expr>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::And | Operator::Or) =>
        {
            let inner = match (op, pos) {
                (Operator::And, Position::TopConjunct) => Position::TopConjunct,
                (_, Position::Other) => Position::Other,
                _ => Position::Monotone,
            };
            let l = protect(*left, inner, in_filter, own, applied)?;
            let r = protect(*right, inner, in_filter, own, applied)?;
            let transformed = l.transformed || r.transformed;
            Ok(Transformed::new_transformed(
                Expr::BinaryExpr(BinaryExpr {
                    left: Box::new(l.data),
                    op,
                    right: Box::new(r.data),
                }),
                transformed,
            ))
        }
        Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) => {
            let keep = match &e {
                _ if reads_level_from_nested(&e, own) => false,
                Expr::InSubquery(i) if in_filter => {
                    let correlated = !i.subquery.outer_ref_columns.is_empty()
                        || i.subquery.subquery.contains_outer_reference();
                    match (i.negated, pos) {
                        (false, Position::TopConjunct | Position::Monotone) => true,
                        (true, Position::TopConjunct) => !correlated,
                        _ => false,
                    }
                }
                _ => true,
            };
            if keep {
                return Ok(Transformed::no(e));
            }
            match take(&e, applied) {
                Some(c) => Ok(Transformed::yes(c)),
                None => Ok(Transformed::no(e)),
            }
        }
        other => other.map_children(|c| protect(c, Position::Other, in_filter, own, applied)),
    }
}

/// Whether a subquery nested in subquery expression `e` reads a column of
/// `own` (the level `e` sits in) as an outer reference.
fn reads_level_from_nested(e: &Expr, own: &[Column]) -> bool {
    let plan = match e {
        Expr::ScalarSubquery(sq) => &sq.subquery,
        Expr::Exists(Exists { subquery, .. }) | Expr::InSubquery(InSubquery { subquery, .. }) => {
            &subquery.subquery
        }
        _ => return false,
    };
    let mut found = false;
    let _ = plan.apply(|node| {
        found |= nested_plans(node).iter().any(|p| plan_reads(p, own));
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

/// Whether `plan`, at any depth, reads a column of `own` as an outer
/// reference.
fn plan_reads(plan: &LogicalPlan, own: &[Column]) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|n| {
        found |= reads_any(n, own) || hidden_plans(n).iter().any(|h| plan_reads(h, own));
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

/// The subquery plans in `node`'s expressions and Apply nodes.
fn nested_plans(node: &LogicalPlan) -> Vec<Arc<LogicalPlan>> {
    let mut out = hidden_plans(node);
    for e in node.expressions() {
        let _ = e.apply(|x| {
            match x {
                Expr::ScalarSubquery(sq) => out.push(Arc::clone(&sq.subquery)),
                Expr::Exists(Exists { subquery, .. })
                | Expr::InSubquery(InSubquery { subquery, .. }) => {
                    out.push(Arc::clone(&subquery.subquery))
                }
                _ => {}
            }
            Ok(TreeNodeRecursion::Continue)
        });
    }
    out
}

/// The subquery plans an Apply keeps out of DataFusion's sight.
fn hidden_plans(node: &LogicalPlan) -> Vec<Arc<LogicalPlan>> {
    match node {
        LogicalPlan::Extension(ext) => match ext.node.as_any().downcast_ref::<ApplyNode>() {
            Some(a) => a.subqueries.iter().map(|s| Arc::clone(&s.plan)).collect(),
            None => vec![],
        },
        _ => vec![],
    }
}

/// Whether `node`'s own expressions read a column of `own` as an outer
/// reference.
fn reads_any(node: &LogicalPlan, own: &[Column]) -> bool {
    node.expressions().iter().any(|e| {
        e.exists(|x| Ok(matches!(x, Expr::OuterReferenceColumn(_, c) if own.contains(c))))
            .unwrap_or(false)
    })
}

/// Takes, at the end of the analyzer, the scalar subqueries DataFusion's
/// invariant check refuses (`check_subquery_expr`): correlated but not
/// aggregated (`(SELECT b FROM t2 WHERE t2.id = t1.id)`, which PostgreSQL
/// runs and refuses only when a row finds two), or in a node other than
/// Projection, Filter and Aggregate (ORDER BY). Their Apply carries the
/// plans (`ApplyNode::carry`), so parameters bound later reach them.
#[derive(Debug, Default)]
pub struct ApplyUncheckedSubqueries;

impl datafusion::optimizer::AnalyzerRule for ApplyUncheckedSubqueries {
    fn name(&self) -> &str {
        "eddy_apply_unchecked_subqueries"
    }

    fn analyze(
        &self,
        plan: LogicalPlan,
        _config: &datafusion::common::config::ConfigOptions,
    ) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            // only what Apply can answer: a one-column correlated scalar
            // subquery (two columns stay refused, as in PostgreSQL)
            let refused = |e: &Expr| {
                matches!(e, Expr::ScalarSubquery(sq)
                    if !sq.outer_ref_columns.is_empty()
                        && sq.subquery.schema().fields().len() == 1
                        && datafusion::logical_expr::logical_plan::check_subquery_expr(
                            &node, &sq.subquery, e,
                        )
                        .is_err())
            };
            let any = node
                .expressions()
                .iter()
                .any(|e| e.exists(|x| Ok(refused(x))).unwrap_or(false));
            if !any {
                return Ok(Transformed::no(node));
            }
            let take_refused: Vec<Expr> = {
                let mut v = Vec::new();
                for e in node.expressions() {
                    let _ = e.apply(|x| {
                        if refused(x) {
                            v.push(x.clone());
                        }
                        Ok(TreeNodeRecursion::Continue)
                    });
                }
                v
            };
            rewrite_node(node, true, &mut |e, applied| {
                e.transform_down(|e| {
                    if !take_refused.contains(&e) {
                        return Ok(Transformed::no(e));
                    }
                    Ok(match take(&e, applied) {
                        Some(c) => Transformed::new(c, true, TreeNodeRecursion::Jump),
                        None => Transformed::no(e),
                    })
                })
            })
        })
        .map(|t| t.data)
    }
}
