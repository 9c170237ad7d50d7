//! Column defaults in INSERT and UPDATE, on the statement's AST.
//!
//! A column the INSERT does not name gets its DEFAULT expression (NULL
//! when it has none); `DEFAULT` in a VALUES row or in `UPDATE ... SET c =
//! DEFAULT` is replaced by it; `INSERT ... DEFAULT VALUES` becomes a VALUES
//! row of defaults. The expressions then run through DataFusion with the
//! rest of the source, so `nextval` is evaluated once per row and `now()`
//! once per statement, as in PostgreSQL.
//!
//! `GENERATED ALWAYS AS IDENTITY` columns refuse an explicit value (428C9);
//! `OVERRIDING SYSTEM VALUE` is not parsed, so it cannot be asked for.

use datafusion::sql::sqlparser::ast::{Expr, Query, SetExpr, Value as SqlValue};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_common::{ColumnDef, Identity, TableDef};

use super::Session;
use crate::error::{Result, SqlError};
use crate::overriding::Overriding;

/// Parses a stored default expression.
pub(super) fn parse_default(text: &str) -> Result<Expr> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(text)?
        .parse_expr()
        .map_err(SqlError::from)
}

/// `DEFAULT` where a value may stand (an unquoted keyword).
pub(super) fn is_default_keyword(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(id) if id.quote_style.is_none() && id.value.eq_ignore_ascii_case("default"))
}

fn null() -> Expr {
    Expr::Value(SqlValue::Null.into())
}

/// The expression a column takes by default.
pub(super) fn default_of(col: &ColumnDef) -> Result<Expr> {
    match &col.default {
        Some(d) => parse_default(d),
        None => Ok(null()),
    }
}

/// PostgreSQL's DETAIL of a refused value for a GENERATED ALWAYS column.
fn identity_always_detail(col: &ColumnDef) -> String {
    format!(
        "Column \"{}\" is an identity column defined as GENERATED ALWAYS.",
        col.name
    )
}

fn identity_always_error(col: &ColumnDef) -> SqlError {
    SqlError::GeneratedAlways(format!(
        "cannot insert a non-DEFAULT value into column \"{}\"",
        col.name
    ))
    .with_detail(identity_always_detail(col))
}

/// `UPDATE ... SET c = v` where `c` is GENERATED ALWAYS: only DEFAULT.
pub(super) fn check_update_target(col: &ColumnDef, value: &Expr) -> Result<()> {
    if col.identity == Some(Identity::Always) && !is_default_keyword(value) {
        return Err(SqlError::GeneratedAlways(format!(
            "column \"{}\" can only be updated to DEFAULT",
            col.name
        ))
        .with_detail(identity_always_detail(col)));
    }
    Ok(())
}

/// A query from a template, its parts then replaced on the AST.
fn template(sql: &str) -> Result<Query> {
    let mut p = Parser::new(&PostgreSqlDialect {}).try_with_sql(sql)?;
    Ok(*p.parse_query()?)
}

/// How many columns an INSERT's source gives, where the AST says it
/// without planning: a VALUES list whose rows agree in length, or a
/// select list without `*` (of the first arm of a set operation). `None`
/// otherwise.
pub(super) fn source_width(source: &Query) -> Option<usize> {
    fn width(body: &SetExpr) -> Option<usize> {
        match body {
            SetExpr::Values(v) => {
                let first = v.rows.first()?.len();
                v.rows.iter().all(|r| r.len() == first).then_some(first)
            }
            SetExpr::Select(sel) => sel
                .projection
                .iter()
                .all(|item| {
                    matches!(
                        item,
                        datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(_)
                            | datafusion::sql::sqlparser::ast::SelectItem::ExprWithAlias { .. }
                    )
                })
                .then_some(sel.projection.len()),
            SetExpr::SetOperation { left, .. } => width(left),
            SetExpr::Query(q) => width(&q.body),
            _ => None,
        }
    }
    width(&source.body)
}

/// Rewrites an INSERT's targets and source so that every column gets a
/// value: the given ones, `DEFAULT` replaced, and the default of each
/// column the statement leaves out that has one. `targets` are column
/// indices of `def`, in the order of the source's columns.
///
/// `overriding` is the INSERT's OVERRIDING clause (`crate::overriding`):
/// SYSTEM VALUE lets a GENERATED ALWAYS identity column take the value
/// given; USER VALUE gives every identity column its next value whatever
/// was given (for a VALUES source; with a query source: 0A000).
pub(super) fn apply_defaults(
    def: &TableDef,
    targets: &mut Vec<usize>,
    source: Option<Box<Query>>,
    overriding: Option<Overriding>,
) -> Result<Box<Query>> {
    let always_refused = |col: &ColumnDef| {
        col.identity == Some(Identity::Always) && overriding != Some(Overriding::SystemValue)
    };
    let missing: Vec<usize> = (0..def.columns.len())
        .filter(|i| !targets.contains(i))
        .filter(|i| def.columns.get(*i).is_some_and(|c| c.default.is_some()))
        .collect();
    let column = |i: usize| {
        def.columns
            .get(i)
            .ok_or_else(|| SqlError::Internal(format!("no column {i}")))
    };
    let Some(mut source) = source else {
        // DEFAULT VALUES: one row of every column's default
        let mut q = template("VALUES (NULL)")?;
        let row = def
            .columns
            .iter()
            .map(default_of)
            .collect::<Result<Vec<_>>>()?;
        if let SetExpr::Values(v) = q.body.as_mut() {
            v.rows = vec![datafusion::sql::sqlparser::ast::Parens::with_empty_span(
                row,
            )];
        }
        *targets = (0..def.columns.len()).collect();
        return Ok(Box::new(q));
    };
    let plain_values = source.with.is_none()
        && source.order_by.is_none()
        && source.limit_clause.is_none()
        && source.fetch.is_none();
    if let (true, SetExpr::Values(values)) = (plain_values, source.body.as_mut()) {
        let defaults: Vec<Expr> = missing
            .iter()
            .map(|i| column(*i).and_then(default_of))
            .collect::<Result<_>>()?;
        for row in values.rows.iter_mut() {
            if row.len() > targets.len() {
                return Err(SqlError::Syntax(
                    "INSERT has more expressions than target columns".into(),
                ));
            }
            if row.len() < targets.len() {
                return Err(SqlError::Syntax(
                    "INSERT has more target columns than expressions".into(),
                ));
            }
            for (e, t) in row.iter_mut().zip(targets.iter()) {
                let col = column(*t)?;
                if is_default_keyword(e)
                    || (col.identity.is_some() && overriding == Some(Overriding::UserValue))
                {
                    *e = default_of(col)?;
                } else if always_refused(col) {
                    return Err(identity_always_error(col));
                }
            }
            row.extend(defaults.iter().cloned());
        }
        targets.extend(missing);
        return Ok(source);
    }
    for t in targets.iter() {
        let col = column(*t)?;
        if col.identity.is_some() && overriding == Some(Overriding::UserValue) {
            return Err(SqlError::FeatureNotSupported(format!(
                "OVERRIDING USER VALUE with a query giving identity column \"{}\" is not \
                 supported; leave the column out of the INSERT's column list",
                col.name
            )));
        }
        if always_refused(col) {
            return Err(identity_always_error(col));
        }
    }
    if missing.is_empty() {
        return Ok(source);
    }
    // INSERT ... SELECT: SELECT src.*, <defaults> FROM (<source>) AS src
    let mut q = template("SELECT __eddy_src.*, NULL FROM (SELECT 1) AS __eddy_src")?;
    if let SetExpr::Select(sel) = q.body.as_mut() {
        sel.projection.truncate(1);
        for i in &missing {
            // named apart from the source's columns (`SELECT 'x'` is `?column?` too)
            sel.projection
                .push(datafusion::sql::sqlparser::ast::SelectItem::ExprWithAlias {
                    expr: default_of(column(*i)?)?,
                    alias: datafusion::sql::sqlparser::ast::Ident::new(format!(
                        "__eddy_default_{i}"
                    )),
                });
        }
        if let Some(datafusion::sql::sqlparser::ast::TableFactor::Derived { subquery, .. }) =
            sel.from.first_mut().map(|f| &mut f.relation)
        {
            *subquery = source;
        }
    }
    targets.extend(missing);
    Ok(Box::new(q))
}

impl Session {
    /// Checks a column's DEFAULT at CREATE TABLE: it must plan on its own
    /// (no column references) and its type must cast to the column's.
    pub(super) async fn check_default(&self, col: &ColumnDef, text: &str) -> Result<()> {
        let expr = parse_default(text)?;
        let refused = datafusion::sql::sqlparser::ast::visit_expressions(&expr, |e| match e {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                std::ops::ControlFlow::Break("column reference")
            }
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
                std::ops::ControlFlow::Break("subquery")
            }
            _ => std::ops::ControlFlow::Continue(()),
        });
        if let std::ops::ControlFlow::Break(what) = refused {
            return Err(SqlError::FeatureNotSupported(format!(
                "cannot use {what} in DEFAULT expression"
            )));
        }
        let mut q = template("SELECT NULL")?;
        if let SetExpr::Select(sel) = q.body.as_mut() {
            sel.projection = vec![datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(
                expr,
            )];
        }
        let mut stmt = datafusion::sql::sqlparser::ast::Statement::Query(Box::new(q));
        self.compat(&mut stmt)?;
        let plan = self
            .ctx
            .state()
            .statement_to_plan(datafusion::sql::parser::Statement::Statement(Box::new(
                stmt,
            )))
            .await?;
        let Some(field) = plan.schema().fields().first() else {
            return Ok(());
        };
        let want = col.ty.to_arrow();
        if !datafusion::arrow::compute::can_cast_types(field.data_type(), &want) {
            return Err(SqlError::DatatypeMismatch(format!(
                "column \"{}\" is of type {} but default expression is of type {}",
                col.name,
                col.ty,
                field.data_type()
            )));
        }
        Ok(())
    }
}

/// Whether an INSERT of these target columns needs [`apply_defaults`]
/// (the fixed-plan path declines such statements).
pub fn insert_needs_defaults(def: &TableDef, targets: &[usize]) -> bool {
    def.columns.iter().enumerate().any(|(i, c)| {
        (c.default.is_some() && !targets.contains(&i))
            || (c.identity == Some(Identity::Always) && targets.contains(&i))
    })
}
