//! Aggregates that differ only by a cast of their argument, `SELECT
//! sum(x), sum(x::real)`: DataFusion names an expression without its casts
//! (`sum(t.x)` both), and its aggregate and window nodes refuse two
//! outputs of one name ("Schema contains duplicate unqualified field
//! name"), while PostgreSQL computes both.
//!
//! How: within one SELECT (its select list, HAVING, QUALIFY and the
//! query's ORDER BY), function calls are grouped by their text with every
//! cast removed; where a group holds more than one distinct call, each
//! call after the first has its arguments wrapped in [`SAME`]`(arg, n)`,
//! an identity function whose name makes the call's name unique. Every
//! occurrence of one call text gets the same wrapping, so HAVING and ORDER
//! BY still find the aggregate of the select list.
//!
//! Invariant: the wrapper never changes a value; the planner's simplifier
//! removes it ([`Same::simplify`]) after the names are fixed, so the plan
//! that runs is the one without it.

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::{
    visit_expressions, visit_expressions_mut, Expr, FunctionArg, FunctionArgExpr,
    FunctionArguments, OrderByKind, Query, SetExpr, Value as SqlValue, VisitMut, VisitorMut,
};

use crate::call_rewrites::call;

/// `eddy_same(x, n)`: `x`.
pub const SAME: &str = "eddy_same";

/// Applies the renaming of the module doc to every query of `stmt`.
pub fn separate_cast_names<S: VisitMut>(stmt: &mut S) {
    let _ = stmt.visit(&mut Separate);
}

struct Separate;

impl VisitorMut for Separate {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        // (planning runs this for every statement: without a cast in the
        // query there is nothing to separate, and nothing is printed)
        let has_cast = visit_expressions(&*query, |e| {
            if matches!(e, Expr::Cast { .. }) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .is_break();
        if !has_cast {
            return ControlFlow::Continue(());
        }
        let SetExpr::Select(select) = query.body.as_mut() else {
            return ControlFlow::Continue(());
        };
        // the distinct call texts of each cast-free key, in order
        let mut groups: HashMap<String, Vec<String>> = HashMap::new();
        let mut note = |e: &Expr| {
            let _ = visit_expressions(e, |inner| {
                if let Expr::Function(_) = inner {
                    let texts = groups.entry(without_casts(inner).to_string()).or_default();
                    let text = inner.to_string();
                    if !texts.contains(&text) {
                        texts.push(text);
                    }
                }
                ControlFlow::<()>::Continue(())
            });
        };
        for item in &select.projection {
            note_item(item, &mut note);
        }
        if let Some(h) = &select.having {
            note(h);
        }
        if let Some(q) = &select.qualify {
            note(q);
        }
        if let Some(o) = &query.order_by {
            if let OrderByKind::Expressions(items) = &o.kind {
                for item in items {
                    note(&item.expr);
                }
            }
        }
        // call text -> its number among the calls of its key
        let renamed: HashMap<String, usize> = groups
            .into_values()
            .filter(|texts| texts.len() > 1)
            .flat_map(|texts| texts.into_iter().enumerate().skip(1))
            .map(|(n, text)| (text, n))
            .collect();
        if renamed.is_empty() {
            return ControlFlow::Continue(());
        }
        let rename = |e: &mut Expr| {
            let _ = visit_expressions_mut(e, |inner| {
                if let Expr::Function(f) = inner {
                    // (the text before this call's arguments change)
                    if let Some(&n) = renamed.get(&Expr::Function(f.clone()).to_string()) {
                        wrap_arguments(&mut f.args, n);
                    }
                }
                ControlFlow::<()>::Continue(())
            });
        };
        let SetExpr::Select(select) = query.body.as_mut() else {
            return ControlFlow::Continue(());
        };
        for item in select.projection.iter_mut() {
            match item {
                datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(e)
                | datafusion::sql::sqlparser::ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                    rename(e)
                }
                _ => {}
            }
        }
        if let Some(h) = select.having.as_mut() {
            rename(h);
        }
        if let Some(q) = select.qualify.as_mut() {
            rename(q);
        }
        if let Some(o) = query.order_by.as_mut() {
            if let OrderByKind::Expressions(items) = &mut o.kind {
                for item in items.iter_mut() {
                    rename(&mut item.expr);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

fn note_item(item: &datafusion::sql::sqlparser::ast::SelectItem, note: &mut impl FnMut(&Expr)) {
    match item {
        datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(e)
        | datafusion::sql::sqlparser::ast::SelectItem::ExprWithAlias { expr: e, .. } => note(e),
        _ => {}
    }
}

/// `e` with every cast replaced by its operand (what DataFusion's names
/// show of it).
fn without_casts(e: &Expr) -> Expr {
    let mut e = e.clone();
    let _ = visit_expressions_mut(&mut e, |inner| {
        if let Expr::Cast { expr, .. } = inner {
            let operand = std::mem::replace(expr.as_mut(), Expr::Value(SqlValue::Null.into()));
            *inner = operand;
        }
        ControlFlow::<()>::Continue(())
    });
    e
}

/// Wraps each argument of a call in `eddy_same(arg, n)`.
fn wrap_arguments(args: &mut FunctionArguments, n: usize) {
    let FunctionArguments::List(list) = args else {
        return;
    };
    for arg in list.args.iter_mut() {
        let (FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
        | FunctionArg::Named {
            arg: FunctionArgExpr::Expr(e),
            ..
        }) = arg
        else {
            continue;
        };
        let inner = std::mem::replace(e, Expr::Value(SqlValue::Null.into()));
        *e = call(
            SAME,
            vec![inner, Expr::value(SqlValue::Number(n.to_string(), false))],
        );
    }
}

/// The function [`SAME`] names.
pub fn same_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(Same {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Same {
    signature: Signature,
}

impl ScalarUDFImpl for Same {
    fn name(&self) -> &str {
        SAME
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        args.first()
            .cloned()
            .ok_or_else(|| DataFusionError::Plan(format!("{SAME} takes two arguments")))
    }
    fn simplify(
        &self,
        mut args: Vec<datafusion::logical_expr::Expr>,
        _info: &SimplifyContext,
    ) -> DfResult<ExprSimplifyResult> {
        if args.is_empty() {
            return Ok(ExprSimplifyResult::Original(args));
        }
        Ok(ExprSimplifyResult::Simplified(args.swap_remove(0)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        args.args
            .into_iter()
            .next()
            .ok_or_else(|| DataFusionError::Plan(format!("{SAME} takes two arguments")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn separated(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses");
        separate_cast_names(&mut stmts);
        stmts
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    }

    #[test]
    fn calls_differing_by_a_cast_get_distinct_names_everywhere() {
        let sql = separated(
            "SELECT sum(x), sum(x::real), sum(CAST(x AS DOUBLE PRECISION)) FROM t HAVING sum(x::real) > 1 ORDER BY sum(x::real)",
        );
        assert_eq!(
            sql,
            "SELECT sum(x), sum(eddy_same(x::REAL, 1)), sum(eddy_same(CAST(x AS DOUBLE PRECISION), 2)) FROM t HAVING sum(eddy_same(x::REAL, 1)) > 1 ORDER BY sum(eddy_same(x::REAL, 1))"
        );
    }

    #[test]
    fn other_queries_are_left_alone() {
        for sql in [
            "SELECT sum(x), sum(y::real) FROM t",
            "SELECT sum(x::real), sum(x::real) FROM t",
            "SELECT count(*), count(*) FROM t",
        ] {
            let unchanged = Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses");
            assert_eq!(separated(sql), unchanged[0].to_string());
        }
    }
}
