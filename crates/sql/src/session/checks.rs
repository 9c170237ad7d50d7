//! CHECK constraints: defined by CREATE TABLE, enforced on every row an
//! INSERT (ON CONFLICT DO UPDATE included) or UPDATE writes, before
//! anything of the statement can commit. A row passes unless an expression
//! is false (NULL passes), as in PostgreSQL; a failure is 23514 naming the
//! constraint.
//!
//! The fixed-plan path cannot evaluate expressions and falls back to this
//! one for such tables. The expressions run through DataFusion over the
//! written rows as an in-memory table named like the target, so they mean
//! what they mean in a query. COPY FROM, which parses batches outside any
//! query, evaluates them as compiled physical expressions
//! ([`CompiledChecks`]) over each batch before it is loaded.

use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array};
use datafusion::datasource::MemTable;
use datafusion::sql::sqlparser::ast::{
    visit_expressions, Expr, Ident, SelectItem, SetExpr, Statement, TableFactor,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_common::{CheckConstraint, ColumnDef, Row, TableDef};

use datafusion::arrow::array::{BooleanArray, RecordBatch};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_expr::PhysicalExpr;

use super::{collect_rows, Session};
use crate::error::{Result, SqlError};
use crate::pgtypes;

const CHECK_TABLE: &str = "__check";

/// A CHECK as CREATE TABLE wrote it, before it has a name.
pub(super) struct PendingCheck {
    pub name: Option<String>,
    /// The column it was written on (column constraints), for its name.
    pub column: Option<String>,
    pub expr: Expr,
}

/// PostgreSQL's names: `<table>_<column>_check` for a column constraint,
/// `<table>_check` for a table one, a number appended while taken;
/// a repeated explicit name is 42710.
pub(super) fn name_checks(table: &str, pending: Vec<PendingCheck>) -> Result<Vec<CheckConstraint>> {
    let mut out: Vec<CheckConstraint> = Vec::new();
    for p in pending.iter().filter(|p| p.name.is_some()) {
        let name = p.name.clone().unwrap_or_default();
        if out.iter().any(|c| c.name == name) {
            return Err(SqlError::DuplicateObject(format!(
                "constraint \"{name}\" for relation \"{table}\" already exists"
            )));
        }
        out.push(CheckConstraint {
            name,
            expr: p.expr.to_string(),
        });
    }
    for p in pending.into_iter().filter(|p| p.name.is_none()) {
        // PostgreSQL names a CHECK after its column when it refers to
        // exactly one, whether written on the column or on the table
        let column = p.column.clone().or_else(|| only_column(&p.expr));
        let base = match &column {
            Some(c) => format!("{table}_{c}_check"),
            None => format!("{table}_check"),
        };
        let mut name = base.clone();
        let mut k = 0u32;
        while out.iter().any(|c| c.name == name) {
            k += 1;
            name = format!("{base}{k}");
        }
        out.push(CheckConstraint {
            name,
            expr: p.expr.to_string(),
        });
    }
    Ok(out)
}

/// The one column name `expr` refers to, if it refers to exactly one.
fn only_column(expr: &Expr) -> Option<String> {
    let mut names: Vec<String> = Vec::new();
    let _ = visit_expressions(expr, |e| {
        let name = match e {
            Expr::Identifier(id) => Some(crate::rewrite::ident_name(id)),
            Expr::CompoundIdentifier(parts) => parts.last().map(crate::rewrite::ident_name),
            _ => None,
        };
        if let Some(n) = name.filter(|n| !names.contains(n)) {
            names.push(n);
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    match names.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

pub(super) fn parse_check(text: &str) -> Result<Expr> {
    Ok(Parser::new(&PostgreSqlDialect {})
        .try_with_sql(text)?
        .parse_expr()?)
}

/// `SELECT count(*) FROM eddy_dml.__check AS "<alias>" WHERE NOT (<expr>)`,
/// or with `select` as the projection instead of the count and filter.
fn check_query(alias: &str, expr: Expr, count_failures: bool) -> Result<Statement> {
    let mut q = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&format!(
            "SELECT count(*) FROM eddy_dml.{CHECK_TABLE} AS x WHERE NOT (TRUE)"
        ))?
        .parse_query()?;
    let SetExpr::Select(sel) = q.body.as_mut() else {
        return Err(SqlError::Internal("CHECK template is not a SELECT".into()));
    };
    if let Some(TableFactor::Table { alias: Some(a), .. }) =
        sel.from.first_mut().map(|f| &mut f.relation)
    {
        a.name = Ident::with_quote('"', alias);
    }
    if count_failures {
        if let Some(Expr::UnaryOp { expr: inner, .. }) = sel.selection.as_mut() {
            **inner = Expr::Nested(Box::new(expr));
        }
    } else {
        sel.projection = vec![SelectItem::UnnamedExpr(expr)];
        sel.selection = None;
    }
    Ok(Statement::Query(q))
}

/// The columns as a scan presents them, for an in-memory copy of rows.
fn schema_of(columns: &[ColumnDef]) -> datafusion::arrow::datatypes::SchemaRef {
    let fields: Vec<datafusion::arrow::datatypes::Field> = columns
        .iter()
        .map(|c| {
            datafusion::arrow::datatypes::Field::new(&c.name, c.ty.to_arrow(), true)
                .with_metadata(pgtypes::declared_type_metadata(c.ty))
        })
        .collect();
    Arc::new(datafusion::arrow::datatypes::Schema::new(fields))
}

/// Which names of `columns` an expression refers to.
pub(super) fn refers_to(expr_text: &str, column: &str) -> bool {
    let Ok(expr) = parse_check(expr_text) else {
        return true;
    };
    visit_expressions(&expr, |e| {
        let hit = match e {
            Expr::Identifier(id) => crate::rewrite::ident_name(id) == column,
            Expr::CompoundIdentifier(parts) => parts
                .last()
                .is_some_and(|id| crate::rewrite::ident_name(id) == column),
            _ => false,
        };
        if hit {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// A table's CHECK constraints compiled for batches laid out as the
/// table's columns (COPY FROM's), planned once per statement.
pub(crate) struct CompiledChecks {
    table: String,
    checks: Vec<(String, Arc<dyn PhysicalExpr>)>,
}

impl CompiledChecks {
    /// Fails with 23514 naming the first constraint a row of `batch`
    /// breaks (false; NULL passes), with PostgreSQL's DETAIL (`Failing
    /// row contains (...)`).
    pub(crate) fn enforce(&self, batch: &RecordBatch) -> Result<()> {
        for (name, expr) in &self.checks {
            let values = expr.evaluate(batch)?.into_array(batch.num_rows())?;
            let Some(values) = values.as_any().downcast_ref::<BooleanArray>() else {
                return Err(SqlError::Internal(format!(
                    "check constraint \"{name}\" evaluated to {}",
                    values.data_type()
                )));
            };
            let failing = (0..values.len()).find(|&i| values.is_valid(i) && !values.value(i));
            if let Some(row) = failing {
                let error = SqlError::CheckViolation(format!(
                    "new row for relation \"{}\" violates check constraint \"{name}\"",
                    crate::temp_tables::shown_name(&self.table)
                ));
                let error = match failing_row(batch, row) {
                    Some(detail) => error.with_detail(detail),
                    None => error,
                };
                return Err(
                    error.about(crate::error::ErrorObject::constraint_of(&self.table, name))
                );
            }
        }
        Ok(())
    }
}

/// `Failing row contains (1, null, abc).`: the row as PostgreSQL prints it
/// in a constraint violation's DETAIL (`None` where a value cannot be
/// written).
fn failing_row(batch: &RecordBatch, row: usize) -> Option<String> {
    let mut out = String::from("Failing row contains (");
    for (i, column) in batch.columns().iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if column.is_null(row) {
            out.push_str("null");
        } else {
            pgtypes::cell_text(column.as_ref(), row, &mut out).ok()?;
        }
    }
    out.push_str(").");
    Some(out)
}

impl Session {
    /// `def`'s CHECK constraints as physical expressions over its columns.
    pub(crate) async fn compile_checks(&self, def: &TableDef) -> Result<CompiledChecks> {
        let schema = schema_of(&def.columns);
        let mut checks = Vec::with_capacity(def.checks.len());
        for check in &def.checks {
            let mem = MemTable::try_new(Arc::clone(&schema), vec![vec![]])?;
            let stmt = check_query(&def.name, parse_check(&check.expr)?, false)?;
            let plan = self
                .plan_with_table(CHECK_TABLE, Arc::new(mem), stmt)
                .await?;
            let LogicalPlan::Projection(projection) = plan else {
                return Err(SqlError::Internal(format!(
                    "check constraint \"{}\" did not plan as a projection",
                    check.name
                )));
            };
            let Some(expr) = projection.expr.first() else {
                return Err(SqlError::Internal("empty CHECK projection".into()));
            };
            // the input's columns are the table's, in its order
            let compiled = self
                .planning_state()
                .create_physical_expr(expr.clone(), projection.input.schema())?;
            checks.push((check.name.clone(), compiled));
        }
        Ok(CompiledChecks {
            table: def.name.clone(),
            checks,
        })
    }

    /// CREATE TABLE: a CHECK must be a boolean expression over the table's
    /// own columns, without subqueries.
    pub(super) async fn validate_check(
        &self,
        table: &str,
        columns: &[ColumnDef],
        check: &CheckConstraint,
    ) -> Result<()> {
        let expr = parse_check(&check.expr)?;
        let subquery = visit_expressions(&expr, |e| {
            if matches!(
                e,
                Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
            ) {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        });
        if subquery.is_break() {
            return Err(SqlError::FeatureNotSupported(
                "cannot use subquery in check constraint".into(),
            ));
        }
        let schema = schema_of(columns);
        let mem = MemTable::try_new(Arc::clone(&schema), vec![vec![]])?;
        let stmt = check_query(table, expr, false)?;
        let plan = self
            .plan_with_table(CHECK_TABLE, Arc::new(mem), stmt)
            .await?;
        let ty = plan
            .schema()
            .fields()
            .first()
            .map(|f| f.data_type().clone())
            .unwrap_or(datafusion::arrow::datatypes::DataType::Null);
        if !matches!(
            ty,
            datafusion::arrow::datatypes::DataType::Boolean
                | datafusion::arrow::datatypes::DataType::Null
        ) {
            return Err(SqlError::DatatypeMismatch(format!(
                "argument of CHECK must be type boolean, not type {ty}"
            )));
        }
        Ok(())
    }

    /// How many rows `table` (the provider, read under the name `alias`)
    /// has that break `check`.
    pub(super) async fn check_failures(
        &self,
        alias: &str,
        check: &CheckConstraint,
        table: Arc<dyn datafusion::catalog::TableProvider>,
    ) -> Result<i64> {
        let stmt = check_query(alias, parse_check(&check.expr)?, true)?;
        let out = self.run_with_table(CHECK_TABLE, table, stmt).await?;
        let (_, batches) = collect_rows(out).await?;
        Ok(batches
            .iter()
            .filter_map(|b| b.column(0).as_any().downcast_ref::<Int64Array>())
            .map(|a| if a.is_empty() { 0 } else { a.value(0) })
            .sum())
    }

    /// Fails with 23514 when one of `rows` (laid out as `def`) breaks one
    /// of its CHECK constraints.
    pub(super) async fn enforce_checks(&mut self, def: &TableDef, rows: &[Row]) -> Result<()> {
        if def.checks.is_empty() || rows.is_empty() {
            return Ok(());
        }
        let schema = schema_of(&def.columns);
        let types: Vec<_> = def.columns.iter().map(|c| c.ty).collect();
        let batch = eddy_storage::arrow_values::batch_from_rows(&schema, &types, rows)?;
        self.compile_checks(def).await?.enforce(&batch)
    }
}
