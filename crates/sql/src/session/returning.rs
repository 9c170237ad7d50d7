//! `INSERT/UPDATE/DELETE ... RETURNING`.
//!
//! The statement collects the rows it wrote (the new versions for INSERT,
//! including rows ON CONFLICT DO UPDATE changed, and UPDATE; the old ones
//! for DELETE); the RETURNING list is then evaluated over them by
//! DataFusion as a query over an in-memory table that carries the target's
//! name (or alias), so `*`, `t.col` and any expression work as in a select
//! list. The command tag stays the DML's ("INSERT 0 2").

use std::sync::Arc;

use datafusion::datasource::MemTable;
use datafusion::sql::sqlparser::ast::{Ident, SelectItem, SetExpr, Statement, TableFactor};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_common::{Row, TableDef};

use super::{relation_of, Output, Session};
use crate::error::{Result, SqlError};
use crate::pgtypes;
use crate::rewrite::{ident_name, table_name};

/// The name the rows are registered under in the `eddy_dml` schema.
const RETURNING_TABLE: &str = "__returning";

/// `SELECT <items> FROM eddy_dml.__returning AS "<alias>"` on the AST.
fn returning_query(items: Vec<SelectItem>, alias: &str) -> Result<Statement> {
    let mut q = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&format!("SELECT 1 FROM eddy_dml.{RETURNING_TABLE} AS x"))?
        .parse_query()?;
    let SetExpr::Select(sel) = q.body.as_mut() else {
        return Err(SqlError::Internal(
            "RETURNING template is not a SELECT".into(),
        ));
    };
    sel.projection = items;
    if let Some(TableFactor::Table { alias: Some(a), .. }) =
        sel.from.first_mut().map(|f| &mut f.relation)
    {
        a.name = Ident::with_quote('"', alias);
    }
    Ok(Statement::Query(q))
}

/// The target's columns with their declared types in the field metadata
/// (varchar(n), char(n)), as a scan of the table presents them.
fn declared_schema(def: &TableDef) -> datafusion::arrow::datatypes::SchemaRef {
    let base = def.arrow_schema();
    let fields: Vec<datafusion::arrow::datatypes::Field> = base
        .fields()
        .iter()
        .zip(&def.columns)
        .map(|(f, c)| {
            f.as_ref()
                .clone()
                .with_metadata(pgtypes::declared_type_metadata(c.ty))
        })
        .collect();
    Arc::new(datafusion::arrow::datatypes::Schema::new(fields))
}

impl Session {
    /// The result of a DML statement with RETURNING: `items` evaluated
    /// over `rows` (laid out as `def`), tagged `command` and a row count.
    pub(super) async fn returning_output(
        &mut self,
        def: &TableDef,
        alias: &str,
        items: Vec<SelectItem>,
        rows: Vec<Row>,
        command: &'static str,
    ) -> Result<Output> {
        let schema = declared_schema(def);
        let types: Vec<_> = def.columns.iter().map(|c| c.ty).collect();
        let batch = eddy_storage::arrow_values::batch_from_rows(&schema, &types, &rows)?;
        let table = MemTable::try_new(Arc::clone(&schema), vec![vec![batch]])?;
        let stmt = returning_query(items, alias)?;
        match self
            .run_with_table(RETURNING_TABLE, Arc::new(table), stmt)
            .await?
        {
            Output::Rows { schema, stream, .. } => Ok(Output::Rows {
                schema,
                stream,
                command,
            }),
            _ => Err(SqlError::Internal("RETURNING produced no rows".into())),
        }
    }

    /// The target's definition, alias and RETURNING list of a DML
    /// statement that has one.
    pub(super) fn returning_of(
        &self,
        stmt: &Statement,
    ) -> Option<(TableDef, String, Vec<SelectItem>)> {
        let (tname, alias, items) = match stmt {
            Statement::Insert(ins) => {
                let datafusion::sql::sqlparser::ast::TableObject::TableName(n) = &ins.table else {
                    return None;
                };
                let tname = table_name(n).ok()?;
                let alias = ins
                    .table_alias
                    .as_ref()
                    .map(|a| ident_name(&a.alias))
                    .unwrap_or_else(|| tname.clone());
                (tname, alias, ins.returning.clone()?)
            }
            Statement::Update(upd) => {
                let (t, a) = relation_of(&upd.table.relation).ok()?;
                (t, a, upd.returning.clone()?)
            }
            Statement::Delete(del) => {
                let from = match &del.from {
                    datafusion::sql::sqlparser::ast::FromTable::WithFromKeyword(v)
                    | datafusion::sql::sqlparser::ast::FromTable::WithoutKeyword(v) => v,
                };
                let (t, a) = relation_of(&from.first()?.relation).ok()?;
                (t, a, del.returning.clone()?)
            }
            _ => return None,
        };
        let def = self.db.engine.table(&tname)?.def().clone();
        Some((def.as_ref().clone(), alias, items))
    }

    /// The columns a DML statement with RETURNING will send, for Describe.
    pub(super) async fn describe_returning(
        &self,
        def: &TableDef,
        alias: &str,
        items: Vec<SelectItem>,
    ) -> Result<Vec<crate::ResultColumn>> {
        let schema = self.returning_schema(def, alias, items).await?;
        Ok(crate::ResultColumn::of_schema(&schema))
    }

    /// The schema of the rows a DML statement with RETURNING gives.
    pub(super) async fn returning_schema(
        &self,
        def: &TableDef,
        alias: &str,
        items: Vec<SelectItem>,
    ) -> Result<datafusion::arrow::datatypes::SchemaRef> {
        let schema = declared_schema(def);
        let table = MemTable::try_new(Arc::clone(&schema), vec![vec![]])?;
        let stmt = returning_query(items, alias)?;
        let plan = self
            .plan_with_table(RETURNING_TABLE, Arc::new(table), stmt)
            .await?;
        // the types the rows will have: those after the analyzer's rules
        // (as `describe_query` reads them), not the planner's first guess
        // (`qty * 2` on an int column is int4, not int8)
        let state = self.planning_state();
        let schema = match state.analyzer().execute_and_check(
            plan.clone(),
            state.config_options(),
            |_, _| {},
        ) {
            Ok(analysed) => Arc::clone(analysed.schema().inner()),
            // Execute plans it again and reports the error
            Err(_) => Arc::clone(plan.schema().inner()),
        };
        Ok(schema)
    }
}
