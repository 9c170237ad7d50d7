//! Set-returning functions where PostgreSQL and DataFusion differ.
//!
//! * **Column names in FROM.** A scalar-valued set-returning function's one
//!   column is named by a table alias without column names (`FROM
//!   generate_series(1, 3) AS g`, `FROM unnest(a) AS x` read `g` and `x`),
//!   else by the function's name (`generate_series`, `unnest`). DataFusion
//!   names them `value` and `UNNEST(...)`.
//! * **`generate_series` in a select list** returns rows in PostgreSQL (one
//!   output row per value) but one list in DataFusion, whose scalar
//!   `generate_series` builds an array: `SELECT generate_series(1, 3)` would
//!   answer `{1,2,3}` in one row. A select item that is the call (or a cast
//!   of it) becomes `unnest(generate_series(...))` named `generate_series`,
//!   which gives PostgreSQL's rows. Not done: a call inside another
//!   expression (`generate_series(1, 3) * 2`, PostgreSQL's rows times two)
//!   reaches DataFusion as a list and fails to plan (no list arithmetic);
//!   write `unnest(generate_series(1, 3)) * 2`.
//!
//! Runs first in `rewrite::pg_compat`: Eddy's own catalog rewrites there
//! use the list form on purpose.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments, Ident,
    ObjectName, ObjectNamePart, Query, SelectItem, SetExpr, TableAlias, TableAliasColumnDef,
    TableFactor, Value as SqlValue, VisitMut, VisitorMut,
};

use crate::rewrite::ident_name;

const SERIES: &str = "generate_series";

/// Applies both rewrites of the module doc to `stmt`.
pub fn rewrite<S: VisitMut>(stmt: &mut S) {
    let _ = stmt.visit(&mut SetReturning);
}

struct SetReturning;

impl VisitorMut for SetReturning {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        match factor {
            TableFactor::Table {
                name,
                args: Some(_),
                alias,
                ..
            } if is_named(name, SERIES) => name_column(alias, SERIES),
            TableFactor::UNNEST {
                alias,
                array_exprs,
                with_offset: false,
                with_ordinality: false,
                ..
            } if array_exprs.len() == 1 => name_column(alias, "unnest"),
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        expand_series_items(&mut query.body);
        ControlFlow::Continue(())
    }
}

/// Whether `name` is the bare (or `pg_catalog.`) function `function`.
fn is_named(name: &ObjectName, function: &str) -> bool {
    match name.0.as_slice() {
        [ObjectNamePart::Identifier(f)] => ident_name(f) == function,
        [ObjectNamePart::Identifier(s), ObjectNamePart::Identifier(f)] => {
            ident_name(s) == "pg_catalog" && ident_name(f) == function
        }
        _ => false,
    }
}

fn name_column(alias: &mut Option<TableAlias>, function: &str) {
    match alias {
        Some(a) if a.columns.is_empty() => a.columns.push(TableAliasColumnDef {
            name: a.name.clone(),
            data_type: None,
        }),
        Some(_) => {}
        None => {
            *alias = Some(TableAlias {
                explicit: true,
                name: Ident::new(function),
                columns: vec![TableAliasColumnDef::from_name(function)],
                at: None,
            })
        }
    }
}

fn is_series_call(e: &Expr) -> bool {
    matches!(e, Expr::Function(f) if is_named(&f.name, SERIES) && f.over.is_none())
}

/// `generate_series(...)` or a cast of it: the call, to be wrapped.
fn series_call_mut(e: &mut Expr) -> Option<&mut Expr> {
    if is_series_call(e) {
        return Some(e);
    }
    match e {
        Expr::Cast { expr, .. } if is_series_call(expr) => Some(expr.as_mut()),
        _ => None,
    }
}

fn expand_series_items(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            for item in &mut select.projection {
                let (expr, named) = match item {
                    SelectItem::UnnamedExpr(e) => (e, false),
                    SelectItem::ExprWithAlias { expr, .. } => (expr, true),
                    _ => continue,
                };
                let Some(call) = series_call_mut(expr) else {
                    continue;
                };
                let inner = std::mem::replace(call, Expr::value(SqlValue::Null));
                *call = unnest(inner);
                if !named {
                    let e = std::mem::replace(expr, Expr::value(SqlValue::Null));
                    *item = SelectItem::ExprWithAlias {
                        expr: e,
                        alias: Ident::new(SERIES),
                    };
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            expand_series_items(left);
            expand_series_items(right);
        }
        // a nested query is visited as a Query of its own
        _ => {}
    }
}

fn unnest(arg: Expr) -> Expr {
    Expr::Function(Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new("unnest"))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))],
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}
