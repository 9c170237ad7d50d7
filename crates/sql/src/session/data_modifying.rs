//! Running and describing a data-modifying WITH (`WITH d AS (DELETE ...
//! RETURNING *) INSERT INTO archive SELECT * FROM d`).
//!
//! `crate::dml_with::split` gives the statements in the order they run;
//! here they run in one transaction (the open block, or an implicit one
//! that commits when the last succeeds), each through every check an
//! ordinary statement gets (privileges, read-only, waits for DDL). The
//! RETURNING rows of a data-modifying CTE are kept in memory and
//! registered in the `eddy_dml` schema for the statements after it, until
//! the primary statement has been planned.
//!
//! PostgreSQL runs all the statements on the snapshot taken at the start;
//! here each runs after the ones before it, in the same transaction, so it
//! would see their writes. Before anything runs, a statement that reads or
//! writes a table an earlier one writes is refused (0A000), so every
//! answer given is PostgreSQL's.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::SchemaProvider;
use datafusion::datasource::MemTable;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::Statement;

use super::{collect_rows, Output, ResultColumn, Session};
use crate::dml_with::{self, Part};
use crate::error::{Result, SqlError};
use crate::fastpath;

impl Session {
    /// Runs a data-modifying WITH.
    pub(super) async fn run_data_modifying_with(&mut self, stmt: Statement) -> Result<Output> {
        let in_block = self.txn.is_some();
        let r = self.run_parts_in_transaction(stmt).await;
        if r.is_err() && in_block {
            self.note_error();
        }
        r
    }

    async fn run_parts_in_transaction(&mut self, stmt: Statement) -> Result<Output> {
        let parts = dml_with::split(stmt)?;
        self.refuse_reading_earlier_writes(&parts)?;
        if self.txn.is_some() {
            return self.run_parts(parts).await;
        }
        let (isolation, read_only) = self.default_modes()?;
        self.open_implicit(isolation, read_only)?;
        let r = match self.run_parts(parts).await {
            Ok(out) => self.run_deferred_checks(None).map(|()| out),
            Err(e) => Err(e),
        };
        self.close_implicit(r)
    }

    /// Runs the parts in order (the transaction is open); the primary
    /// statement's output.
    async fn run_parts(&mut self, parts: Vec<Part>) -> Result<Output> {
        let mut registered: Vec<String> = Vec::new();
        let r = self.run_parts_registering(parts, &mut registered).await;
        for name in registered {
            let _ = self.dml_schema.deregister_table(&name);
        }
        r
    }

    async fn run_parts_registering(
        &mut self,
        parts: Vec<Part>,
        registered: &mut Vec<String>,
    ) -> Result<Output> {
        let mut out = Output::Empty;
        for part in parts {
            // each part as a statement of its own in the open transaction
            out = Box::pin(self.execute_statement_in_group(part.stmt, None, None)).await?;
            if let Some(name) = part.rows_as {
                let (schema, batches) = collect_rows(out).await?;
                let rows = MemTable::try_new(schema, vec![batches])?;
                self.dml_schema
                    .register_table(name.clone(), Arc::new(rows))?;
                registered.push(name);
                out = Output::Empty;
            }
        }
        Ok(out)
    }

    /// PostgreSQL's parts all read the statement's starting snapshot; run
    /// in order, a part would see what an earlier one wrote. Refuses a
    /// statement where that could change an answer.
    fn refuse_reading_earlier_writes(&self, parts: &[Part]) -> Result<()> {
        let mut written: Vec<(eddy_common::TableId, String)> = Vec::new();
        for part in parts {
            let mut probe = part.stmt.clone();
            self.expand_views(&mut probe)?;
            for (t, _) in self.named_tables(&probe) {
                if let Some((_, name)) = written.iter().find(|(id, _)| *id == t.def().id) {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "a data-modifying WITH query writes \"{name}\", which a later part of \
                         the statement reads or writes: PostgreSQL's parts all see the \
                         statement's starting snapshot, which Eddy does not keep; split the \
                         statement"
                    )));
                }
            }
            if let Some(t) = dml_with::target(&part.stmt)
                .and_then(|n| crate::rewrite::table_name(n).ok())
                .and_then(|n| self.db.engine.table(&n))
            {
                written.push((t.def().id, t.def().name.clone()));
            }
        }
        Ok(())
    }

    /// The result columns of a data-modifying WITH, and its parameters'
    /// types where the statements show them (`param_types`).
    pub(super) async fn describe_data_modifying_with(
        &mut self,
        stmt: &Statement,
        param_types: &mut [u32],
    ) -> Result<Vec<ResultColumn>> {
        let parts = dml_with::split(stmt.clone())?;
        for part in &parts {
            fastpath::infer_param_types(&part.stmt, &self.db.engine, param_types);
        }
        let mut registered: Vec<String> = Vec::new();
        let r = self
            .describe_parts(parts, param_types, &mut registered)
            .await;
        for name in registered {
            let _ = self.dml_schema.deregister_table(&name);
        }
        r
    }

    /// The schema of the rows query `stmt` gives.
    async fn query_schema(&self, stmt: &Statement) -> Result<SchemaRef> {
        let mut s = stmt.clone();
        self.compat(&mut s)?;
        let plan = self
            .planning_state()
            .statement_to_plan(DFStatement::Statement(Box::new(s.clone())))
            .await
            .map_err(|e| self.planning_error(&s, e))?;
        Ok(Arc::new(plan.schema().as_arrow().clone()))
    }

    async fn describe_parts(
        &mut self,
        parts: Vec<Part>,
        param_types: &mut [u32],
        registered: &mut Vec<String>,
    ) -> Result<Vec<ResultColumn>> {
        let mut columns = Vec::new();
        for part in parts {
            let returning = self.returning_of(&part.stmt);
            let schema = match (&part.stmt, returning) {
                (Statement::Query(_), _) => {
                    columns = self.describe_query(&part.stmt, param_types).await?.columns;
                    if part.rows_as.is_none() {
                        continue;
                    }
                    // a locking query's rows, read by the parts after it
                    self.query_schema(&part.stmt).await?
                }
                (_, Some((def, alias, items))) => {
                    self.returning_schema(&def, &alias, items).await?
                }
                (_, None) => {
                    columns = Vec::new();
                    continue;
                }
            };
            columns = ResultColumn::of_schema(&schema);
            if let Some(name) = part.rows_as {
                let rows = MemTable::try_new(schema, vec![vec![]])?;
                self.dml_schema
                    .register_table(name.clone(), Arc::new(rows))?;
                registered.push(name);
            }
        }
        Ok(columns)
    }
}
