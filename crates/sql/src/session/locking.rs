//! `SELECT ... FOR UPDATE | FOR SHARE [OF t] [NOWAIT | SKIP LOCKED]` on one
//! table, with PostgreSQL's semantics:
//!
//! * the query runs on the statement's snapshot with each row's storage key
//!   alongside (the table is read through the key-carrying provider, as
//!   UPDATE does), LIMIT and OFFSET set aside;
//! * rows are locked in the query's order (FOR UPDATE exclusive, FOR SHARE
//!   shared), waiting for holders (bounded by `lock_timeout`), failing at
//!   once with 55P03 (NOWAIT) or passing over locked rows (SKIP LOCKED);
//! * a row whose latest committed version is newer than the snapshot is
//!   re-evaluated on that version once its lock is held (READ COMMITTED:
//!   returned with its new values if it still qualifies, dropped if not;
//!   REPEATABLE READ: 40001);
//! * LIMIT and OFFSET count only the rows that were locked and qualified.
//!
//! The locks last until the transaction ends (the statement's own implicit
//! transaction in autocommit). FOR NO KEY UPDATE and FOR KEY SHARE do not
//! parse (42601); joins, aggregates, DISTINCT, set operations and CTEs with
//! a locking clause are refused with 0A000, as PostgreSQL refuses several of
//! them.

use std::sync::Arc;

use datafusion::arrow::array::{Array, BinaryArray, RecordBatch};
use datafusion::arrow::compute::interleave_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::SchemaProvider;
use datafusion::sql::sqlparser::ast::{
    ExcludeSelectItem, Expr, GroupByExpr, Ident, LimitClause, LockClause, LockType, NonBlock,
    ObjectName, ObjectNamePart, Query, SelectItem, SetExpr, Statement, TableAlias, TableFactor,
};
use eddy_common::Value;
use eddy_storage::{LockMode, LockWait, StorageError, Table};

use super::{relation_of, run_blocking, Output, Session};
use crate::error::{Result, SqlError};
use crate::fastpath::literal_value;
use crate::provider::{EddyTable, KEY_COLUMN};
use crate::rewrite::table_name;
use crate::txn::Isolation;

/// The name the locked table is registered under for the statement.
const TARGET: &str = "__locking_target";

fn refuse(what: &str) -> SqlError {
    SqlError::FeatureNotSupported(format!("{what} is not supported with FOR UPDATE/FOR SHARE"))
}

/// A LIMIT or OFFSET value: a non-negative integer literal (parameters are
/// already substituted), or none.
fn count_of(e: Option<&Expr>, what: &str) -> Result<Option<usize>> {
    let Some(e) = e else { return Ok(None) };
    match literal_value(e) {
        Some(Value::BigInt(n)) => usize::try_from(n)
            .map(Some)
            .map_err(|_| SqlError::InvalidParameter(format!("{what} must not be negative"))),
        Some(Value::Null) => Ok(None),
        _ => Err(refuse(&format!("a {what} that is not an integer constant"))),
    }
}

/// What the locking clause asks for.
struct Locking {
    mode: LockMode,
    wait: LockWait,
}

fn locking_of(
    locks: &[LockClause],
    alias: &str,
    lock_timeout: Option<std::time::Duration>,
) -> Result<Locking> {
    let [clause] = locks else {
        return Err(refuse("more than one locking clause"));
    };
    if let Some(of) = &clause.of {
        let named = table_name(of)?;
        if named != alias {
            return Err(SqlError::UndefinedTable(format!(
                "relation \"{named}\" in FOR UPDATE clause not found in FROM clause"
            )));
        }
    }
    Ok(Locking {
        mode: match clause.lock_type {
            LockType::Update => LockMode::Exclusive,
            LockType::Share => LockMode::Shared,
        },
        wait: match clause.nonblock {
            None => LockWait::Block(lock_timeout),
            Some(NonBlock::Nowait) => LockWait::NoWait,
            Some(NonBlock::SkipLocked) => LockWait::Skip,
        },
    })
}

impl Session {
    /// Runs a SELECT with a locking clause (see the module doc).
    pub(super) async fn select_locking(&mut self, query: Query) -> Result<Output> {
        let mut q = query;
        if q.with.is_some() || q.fetch.is_some() {
            return Err(refuse("WITH or FETCH"));
        }
        let SetExpr::Select(select) = q.body.as_mut() else {
            return Err(refuse("a set operation or VALUES"));
        };
        let no_grouping = matches!(&select.group_by, GroupByExpr::Expressions(v, m) if v.is_empty() && m.is_empty());
        if select.from.len() != 1
            || !select.from[0].joins.is_empty()
            || select.distinct.is_some()
            || select.having.is_some()
            || !no_grouping
        {
            return Err(refuse("a join, DISTINCT, GROUP BY or HAVING"));
        }
        if self.calls_aggregate(&select.projection) {
            // PostgreSQL's words and SQLSTATE
            return Err(SqlError::FeatureNotSupported(
                "FOR UPDATE is not allowed with aggregate functions".into(),
            ));
        }
        let (tname, alias) = relation_of(&select.from[0].relation)?;
        if !matches!(
            &select.from[0].relation,
            TableFactor::Table { args: None, .. }
        ) {
            return Err(refuse("a table function"));
        }
        let table = self.table(&tname)?;
        if let Some(t) = &self.txn {
            if t.read_only {
                return Err(SqlError::ReadOnlyTransaction(
                    "SELECT FOR UPDATE/FOR SHARE".into(),
                ));
            }
        }
        let locking = locking_of(&q.locks, &alias, self.lock_timeout()?)?;
        let (limit, offset) = match q.limit_clause.take() {
            None => (None, None),
            Some(LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) => {
                if !limit_by.is_empty() {
                    return Err(refuse("LIMIT BY"));
                }
                (
                    count_of(limit.as_ref(), "LIMIT")?,
                    count_of(offset.as_ref().map(|o| &o.value), "OFFSET")?,
                )
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => (
                count_of(Some(&limit), "LIMIT")?,
                count_of(Some(&offset), "OFFSET")?,
            ),
        };
        q.locks.clear();
        // Read the table through the key-carrying provider, under the
        // original alias; carry the key as the last output column.
        let SetExpr::Select(select) = q.body.as_mut() else {
            return Err(SqlError::Internal("locking query lost its SELECT".into()));
        };
        if let TableFactor::Table { name, alias: a, .. } = &mut select.from[0].relation {
            *name = ObjectName(vec![
                ObjectNamePart::Identifier(Ident::new("eddy_dml")),
                ObjectNamePart::Identifier(Ident::new(TARGET)),
            ]);
            *a = Some(TableAlias {
                explicit: true,
                name: Ident::with_quote('"', alias.clone()),
                columns: vec![],
                at: None,
            });
        }
        let exclude = || {
            Some(ExcludeSelectItem::Single(ObjectName(vec![
                ObjectNamePart::Identifier(Ident::with_quote('"', KEY_COLUMN)),
            ])))
        };
        for item in &mut select.projection {
            match item {
                SelectItem::Wildcard(opts) | SelectItem::QualifiedWildcard(_, opts) => {
                    if opts.opt_exclude.is_some() {
                        return Err(refuse("SELECT * EXCLUDE"));
                    }
                    opts.opt_exclude = exclude();
                }
                _ => {}
            }
        }
        select
            .projection
            .push(SelectItem::UnnamedExpr(Expr::CompoundIdentifier(vec![
                Ident::with_quote('"', alias.clone()),
                Ident::with_quote('"', KEY_COLUMN),
            ])));
        let stmt = Statement::Query(Box::new(q));

        let id = table.def().id;
        let snaps = self.install_tables(std::slice::from_ref(&table))?;
        let snap = snaps
            .get(&id)
            .cloned()
            .ok_or_else(|| SqlError::Internal("no snapshot for the locked table".into()))?;
        let lsns = snap.lsns();
        let (schema, batches) = self.locking_scan(&table, stmt.clone()).await?;

        // Lock in order; re-evaluate rows changed after the snapshot.
        let wanted = limit.map(|l| l.saturating_add(offset.unwrap_or(0)));
        let mut picked: Vec<(usize, usize)> = Vec::new();
        let mut extra: Vec<RecordBatch> = Vec::new();
        'rows: for (bi, b) in batches.iter().enumerate() {
            let keys = key_column(b)?;
            for r in 0..b.num_rows() {
                if wanted.is_some_and(|w| picked.len() >= w) {
                    break 'rows;
                }
                let key = keys.value(r);
                let txn = self
                    .txn
                    .as_mut()
                    .ok_or_else(|| SqlError::Internal("locking outside a transaction".into()))?;
                let got = run_blocking(|| txn.lock_row(&table, key, locking.mode, locking.wait))?;
                if !got {
                    continue; // SKIP LOCKED
                }
                if !txn.changed_after(&table, &lsns, [key])? {
                    picked.push((bi, r));
                    continue;
                }
                if txn.isolation == Isolation::RepeatableRead {
                    return Err(StorageError::SerializationFailure.into());
                }
                // READ COMMITTED: the newest version, if it still qualifies.
                let fresh = self.install_tables(std::slice::from_ref(&table))?;
                let base = fresh
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| SqlError::Internal("no snapshot for the locked table".into()))?;
                let only: std::collections::HashSet<Vec<u8>> =
                    std::iter::once(key.to_vec()).collect();
                let mut view = fresh;
                view.insert(id, Arc::new(base.restricted_to(Arc::new(only))));
                self.view.set(view);
                let (_, again) = self.locking_scan(&table, stmt.clone()).await?;
                if let Some(a) = again.into_iter().find(|a| a.num_rows() > 0) {
                    extra.push(a.slice(0, 1));
                    picked.push((batches.len() + extra.len() - 1, 0));
                }
            }
        }
        let skip = offset.unwrap_or(0).min(picked.len());
        let rows = &picked[skip..];
        let all: Vec<&RecordBatch> = batches.iter().chain(extra.iter()).collect();
        let out_schema: SchemaRef = Arc::new(datafusion::arrow::datatypes::Schema::new(
            schema.fields()[..schema.fields().len().saturating_sub(1)].to_vec(),
        ));
        let mut out = Vec::new();
        if !rows.is_empty() {
            let joined = interleave_record_batch(&all, rows)?;
            let cols: Vec<usize> = (0..out_schema.fields().len()).collect();
            let projected = joined.project(&cols)?;
            out.push(RecordBatch::try_new(
                Arc::clone(&out_schema),
                projected.columns().to_vec(),
            )?);
        }
        Ok(super::batches_output(out_schema, out))
    }

    /// Whether a select list calls an aggregate or window function.
    fn calls_aggregate(&self, projection: &Vec<SelectItem>) -> bool {
        let state = self.planning_state();
        let aggregates = state.aggregate_functions();
        let windows = state.window_functions();
        let found = datafusion::sql::sqlparser::ast::visit_expressions(projection, |e| match e {
            Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_lowercase();
                if f.over.is_some() || aggregates.contains_key(&name) || windows.contains_key(&name)
                {
                    std::ops::ControlFlow::Break(())
                } else {
                    std::ops::ControlFlow::Continue(())
                }
            }
            _ => std::ops::ControlFlow::Continue(()),
        });
        found.is_break()
    }

    /// Runs the rewritten locking query over the statement's view of
    /// `table`; returns its schema (key column last) and batches.
    async fn locking_scan(
        &mut self,
        table: &Arc<Table>,
        mut stmt: Statement,
    ) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let provider =
            Arc::new(EddyTable::new(Arc::clone(table), true).with_view(Arc::clone(&self.view)));
        self.dml_schema
            .register_table(TARGET.to_string(), provider)?;
        self.compat(&mut stmt);
        let result = self.collect_query(stmt).await;
        let _ = self.dml_schema.deregister_table(TARGET);
        result
    }

    async fn collect_query(&self, stmt: Statement) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let state = self.planning_state();
        let plan = state
            .statement_to_plan(datafusion::sql::parser::Statement::Statement(Box::new(
                stmt,
            )))
            .await?;
        if plan_has_aggregate(&plan) {
            return Err(SqlError::FeatureNotSupported(
                "FOR UPDATE is not allowed with aggregate functions".into(),
            ));
        }
        super::collect_rows(self.run_plan(plan).await?).await
    }
}

fn key_column(b: &RecordBatch) -> Result<&BinaryArray> {
    b.columns()
        .last()
        .and_then(|c| c.as_any().downcast_ref::<BinaryArray>())
        .filter(|k| k.null_count() == 0)
        .ok_or_else(|| SqlError::Internal("locking query lost its key column".into()))
}

fn plan_has_aggregate(plan: &datafusion::logical_expr::LogicalPlan) -> bool {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::LogicalPlan;
    let mut found = false;
    let _ = plan.apply(|p| {
        if matches!(
            p,
            LogicalPlan::Aggregate(_) | LogicalPlan::Window(_) | LogicalPlan::Distinct(_)
        ) {
            found = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}
