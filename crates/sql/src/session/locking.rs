//! `SELECT ... FOR UPDATE | FOR SHARE [OF t] [NOWAIT | SKIP LOCKED]` (one
//! clause or several) over one table or a join, with PostgreSQL's
//! semantics:
//!
//! * each clause locks the tables it names with OF, or every table of the
//!   FROM clause; a table named by several takes the strongest lock, NOWAIT
//!   if any says so, else SKIP LOCKED if any does; a locked table on the
//!   nullable side of an outer join is 0A000, as in PostgreSQL;
//! * the query runs on the statement's snapshot (one cut of every table it
//!   names) with each locked table's storage key alongside its rows (those
//!   tables are read through the key-carrying provider, as UPDATE does),
//!   LIMIT and OFFSET set aside;
//! * the locked rows of each result row are locked in the query's order
//!   (FOR UPDATE exclusive, FOR SHARE shared; a row met again is not
//!   locked twice), waiting for holders (bounded by `lock_timeout`),
//!   failing at once with 55P03 (NOWAIT) or passing over a result row any
//!   of whose rows is locked (SKIP LOCKED);
//! * a result row one of whose locked rows has a committed version newer
//!   than the snapshot is re-evaluated once its locks are held (READ
//!   COMMITTED: the query runs again over a fresh snapshot with each locked
//!   table restricted to that row's key, so it comes back with the new
//!   values if it still qualifies and not at all if not; REPEATABLE READ:
//!   40001). PostgreSQL re-checks with the other tables' rows of the first
//!   read; here the tables that are not locked are read afresh too, which
//!   differs only when they changed as well;
//! * LIMIT and OFFSET count only the rows that were locked and qualified.
//!
//! The locks last until the transaction ends (the statement's own implicit
//! transaction in autocommit). FOR NO KEY UPDATE and FOR KEY SHARE arrive
//! here as FOR UPDATE and FOR SHARE (`crate::lock_strengths`); aggregates, DISTINCT, GROUP BY, set operations, CTEs and
//! subqueries or table functions in FROM with a locking clause are refused
//! with 0A000, as PostgreSQL refuses several of them. A locking query of a
//! WITH arrives here as a statement of its own
//! (`session/data_modifying.rs`); a locking clause anywhere else below a
//! statement's top is refused before (`crate::dml_with::refuse_nested`).

use std::sync::Arc;

use datafusion::arrow::array::{Array, BinaryArray, RecordBatch};
use datafusion::arrow::compute::interleave_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::SchemaProvider;
use datafusion::sql::sqlparser::ast::{
    DataType, ExcludeSelectItem, Expr, GroupByExpr, Ident, JoinOperator, LimitClause, LockClause,
    LockType, NonBlock, ObjectName, ObjectNamePart, Query, SelectItem, SetExpr, Statement,
    TableAlias, TableFactor, TableWithJoins,
};
use eddy_common::Value;
use eddy_storage::{LockMode, LockWait, StorageError, Table};

use super::{relation_of, run_blocking, Output, Session};
use crate::error::{Result, SqlError};
use crate::fastpath::literal_value;
use crate::provider::{EddyTable, KEY_COLUMN};
use crate::rewrite::table_name;
use crate::txn::Isolation;

/// The prefix of the names the locked tables are registered under for the
/// statement (`__locking_target_0`, ...).
const TARGET: &str = "__locking_target";

fn refuse(what: &str) -> SqlError {
    SqlError::FeatureNotSupported(format!("{what} is not supported with FOR UPDATE/FOR SHARE"))
}

/// A LIMIT or OFFSET value: a non-negative integer literal (parameters are
/// already substituted), or none.
fn count_of(e: Option<&Expr>, what: &str) -> Result<Option<usize>> {
    let Some(e) = e else { return Ok(None) };
    // a bound parameter arrives as its value cast to the parameter's type
    let e = match e {
        Expr::Cast {
            expr,
            data_type:
                DataType::BigInt(_)
                | DataType::Int(_)
                | DataType::Integer(_)
                | DataType::SmallInt(_)
                | DataType::Int8(_)
                | DataType::Int4(_)
                | DataType::Int2(_),
            ..
        } => expr.as_ref(),
        e => e,
    };
    match literal_value(e) {
        Some(Value::BigInt(n)) => usize::try_from(n)
            .map(Some)
            .map_err(|_| SqlError::InvalidParameter(format!("{what} must not be negative"))),
        Some(Value::Null) => Ok(None),
        _ => Err(refuse(&format!("a {what} that is not an integer constant"))),
    }
}

/// What the locking clauses ask for one table.
#[derive(Clone, Copy)]
struct Locking {
    mode: LockMode,
    wait: LockWait,
}

impl Locking {
    fn of(clause: &LockClause, lock_timeout: Option<std::time::Duration>) -> Locking {
        Locking {
            mode: match clause.lock_type {
                LockType::Update => LockMode::Exclusive,
                LockType::Share => LockMode::Shared,
            },
            wait: match clause.nonblock {
                None => LockWait::Block(lock_timeout),
                Some(NonBlock::Nowait) => LockWait::NoWait,
                Some(NonBlock::SkipLocked) => LockWait::Skip,
            },
        }
    }

    /// A table named by several clauses: PostgreSQL's rule, the strongest
    /// lock, NOWAIT if any clause says so, else SKIP LOCKED if any does.
    fn merge(self, other: Locking) -> Locking {
        let mode = if self.mode == LockMode::Exclusive || other.mode == LockMode::Exclusive {
            LockMode::Exclusive
        } else {
            LockMode::Shared
        };
        let rank = |w: &LockWait| match w {
            LockWait::NoWait => 2,
            LockWait::Skip => 1,
            LockWait::Block(_) => 0,
        };
        let wait = if rank(&other.wait) > rank(&self.wait) {
            other.wait
        } else {
            self.wait
        };
        Locking { mode, wait }
    }

    fn clause_name(&self) -> &'static str {
        match self.mode {
            LockMode::Exclusive => "FOR UPDATE",
            LockMode::Shared => "FOR SHARE",
        }
    }
}

/// A table of the FROM clause: its name, the name the query calls it by,
/// and whether an outer join may pad it with NULLs.
struct FromTable {
    table: String,
    alias: String,
    nullable: bool,
}

/// The tables of a FROM clause, in order. Only plain tables and the joins
/// PostgreSQL can lock through (inner, cross, left, right, full) are
/// taken; a subquery, a table function or a nested join is refused.
fn from_tables(from: &[TableWithJoins]) -> Result<Vec<FromTable>> {
    let mut out = Vec::new();
    for twj in from {
        let first = out.len();
        let mut factors = vec![&twj.relation];
        factors.extend(twj.joins.iter().map(|j| &j.relation));
        for f in &factors {
            if !matches!(f, TableFactor::Table { args: None, .. }) {
                return Err(refuse("a subquery, table function or nested join in FROM"));
            }
            let (table, alias) = relation_of(f)?;
            out.push(FromTable {
                table,
                alias,
                nullable: false,
            });
        }
        for (i, j) in twj.joins.iter().enumerate() {
            // factor i + 1 joins everything before it
            let joined = first + i + 1;
            match &j.join_operator {
                JoinOperator::Join(_)
                | JoinOperator::Inner(_)
                | JoinOperator::CrossJoin(_)
                | JoinOperator::StraightJoin(_) => {}
                JoinOperator::Left(_) | JoinOperator::LeftOuter(_) => {
                    out[joined].nullable = true;
                }
                JoinOperator::Right(_) | JoinOperator::RightOuter(_) => {
                    for t in &mut out[first..joined] {
                        t.nullable = true;
                    }
                }
                JoinOperator::FullOuter(_) => {
                    for t in &mut out[first..=joined] {
                        t.nullable = true;
                    }
                }
                other => return Err(refuse(&format!("{other:?} join"))),
            }
        }
    }
    Ok(out)
}

/// A table the statement locks: what it is, what it is called, how it is
/// locked, and the name its key-carrying provider is registered under.
struct Locked {
    table: Arc<Table>,
    alias: String,
    locking: Locking,
    target: String,
}

impl Session {
    /// Runs a SELECT with locking clauses (see the module doc).
    pub(super) async fn select_locking(&mut self, query: Query) -> Result<Output> {
        let mut q = query;
        if q.with.is_some() || q.fetch.is_some() {
            return Err(refuse("WITH or FETCH"));
        }
        let SetExpr::Select(select) = q.body.as_mut() else {
            return Err(refuse("a set operation or VALUES"));
        };
        let no_grouping = matches!(&select.group_by, GroupByExpr::Expressions(v, m) if v.is_empty() && m.is_empty());
        if select.from.is_empty()
            && select.distinct.is_none()
            && select.having.is_none()
            && no_grouping
            && !self.calls_aggregate(&select.projection)
        {
            // no table to lock: PostgreSQL runs the query and locks
            // nothing (a read-only transaction included); a table named
            // by OF is not in FROM (42P01)
            if let Some(clause) = q.locks.iter().find(|c| c.of.is_some()) {
                let named = clause.of.as_ref().map(table_name).transpose()?;
                return Err(SqlError::UndefinedRelation(format!(
                    "relation \"{}\" in {} clause not found in FROM clause",
                    named.unwrap_or_default(),
                    Locking::of(clause, None).clause_name()
                )));
            }
            q.locks.clear();
            let mut stmt = Statement::Query(Box::new(q));
            self.install_view(&stmt)?;
            self.compat(&mut stmt)?;
            return self.run_query(stmt).await;
        }
        if select.from.is_empty()
            || select.distinct.is_some()
            || select.having.is_some()
            || !no_grouping
        {
            return Err(refuse(
                "a SELECT without FROM, DISTINCT, GROUP BY or HAVING",
            ));
        }
        if self.calls_aggregate(&select.projection) {
            // PostgreSQL's words and SQLSTATE
            return Err(SqlError::FeatureNotSupported(
                "FOR UPDATE is not allowed with aggregate functions".into(),
            ));
        }
        let from = from_tables(&select.from)?;
        if let Some(t) = &self.txn {
            if t.read_only {
                return Err(SqlError::ReadOnlyTransaction(
                    "SELECT FOR UPDATE/FOR SHARE".into(),
                ));
            }
        }
        // Which tables each clause locks, merged per table.
        let lock_timeout = self.lock_timeout()?;
        let mut wanted_locks: Vec<Option<Locking>> = vec![None; from.len()];
        for clause in &q.locks {
            let l = Locking::of(clause, lock_timeout);
            let hit: Vec<usize> = match &clause.of {
                None => (0..from.len()).collect(),
                Some(of) => {
                    let named = table_name(of)?;
                    let hit: Vec<usize> = (0..from.len())
                        .filter(|i| from[*i].alias == named)
                        .collect();
                    if hit.is_empty() {
                        return Err(SqlError::UndefinedRelation(format!(
                            "relation \"{named}\" in {} clause not found in FROM clause",
                            l.clause_name()
                        )));
                    }
                    hit
                }
            };
            for i in hit {
                wanted_locks[i] = Some(match wanted_locks[i] {
                    Some(prev) => prev.merge(l),
                    None => l,
                });
            }
        }
        let mut locked: Vec<Locked> = Vec::new();
        for (f, l) in from.iter().zip(&wanted_locks) {
            let Some(l) = l else { continue };
            if f.nullable {
                // PostgreSQL's words and SQLSTATE
                return Err(SqlError::FeatureNotSupported(format!(
                    "{} cannot be applied to the nullable side of an outer join",
                    l.clause_name()
                )));
            }
            locked.push(Locked {
                table: self.table(&f.table)?,
                alias: f.alias.clone(),
                locking: *l,
                target: format!("{TARGET}_{}", locked.len()),
            });
        }
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
        // Every table the statement names, read at one cut (snapshots
        // before the rewrite, which renames the locked ones).
        let named = Statement::Query(Box::new(q.clone()));
        let mut all_tables: Vec<Arc<Table>> = Vec::new();
        let _ = datafusion::sql::sqlparser::ast::visit_relations(&named, |name| {
            if let Some(t) = table_name(name).ok().and_then(|n| self.db.engine.table(&n)) {
                if !all_tables.iter().any(|x| x.def().id == t.def().id) {
                    all_tables.push(t);
                }
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        // Read each locked table through the key-carrying provider, under
        // its original alias; carry its key as a trailing output column.
        let SetExpr::Select(select) = q.body.as_mut() else {
            return Err(SqlError::Internal("locking query lost its SELECT".into()));
        };
        for twj in &mut select.from {
            let factors = std::iter::once(&mut twj.relation)
                .chain(twj.joins.iter_mut().map(|j| &mut j.relation));
            for f in factors {
                let Ok((_, alias)) = relation_of(f) else {
                    continue;
                };
                let Some(l) = locked.iter().find(|l| l.alias == alias) else {
                    continue;
                };
                if let TableFactor::Table { name, alias: a, .. } = f {
                    *name = ObjectName(vec![
                        ObjectNamePart::Identifier(Ident::new("eddy_dml")),
                        ObjectNamePart::Identifier(Ident::new(l.target.clone())),
                    ]);
                    *a = Some(TableAlias {
                        explicit: true,
                        name: Ident::with_quote('"', alias.clone()),
                        columns: vec![],
                        at: None,
                    });
                }
            }
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
        for l in &locked {
            select
                .projection
                .push(SelectItem::UnnamedExpr(Expr::CompoundIdentifier(vec![
                    Ident::with_quote('"', l.alias.clone()),
                    Ident::with_quote('"', KEY_COLUMN),
                ])));
        }
        let stmt = Statement::Query(Box::new(q));

        let snaps = self.install_tables(&all_tables)?;
        let lsns: Vec<Vec<eddy_common::Lsn>> = locked
            .iter()
            .map(|l| {
                snaps
                    .get(&l.table.def().id)
                    .map(|s| s.lsns())
                    .ok_or_else(|| SqlError::Internal("no snapshot for a locked table".into()))
            })
            .collect::<Result<_>>()?;
        let (schema, batches) = self.locking_scan(&locked, stmt.clone()).await?;
        let k = locked.len();

        // Lock in order; re-evaluate rows changed after the snapshot.
        let wanted = limit.map(|l| l.saturating_add(offset.unwrap_or(0)));
        let mut picked: Vec<(usize, usize)> = Vec::new();
        let mut extra: Vec<RecordBatch> = Vec::new();
        // (locked table, key) -> whether its lock is held (false: skipped)
        let mut held: std::collections::HashMap<(usize, Vec<u8>), bool> =
            std::collections::HashMap::new();
        'rows: for (bi, b) in batches.iter().enumerate() {
            let keys = key_columns(b, k)?;
            for r in 0..b.num_rows() {
                if wanted.is_some_and(|w| picked.len() >= w) {
                    break 'rows;
                }
                let txn = self
                    .txn
                    .as_mut()
                    .ok_or_else(|| SqlError::Internal("locking outside a transaction".into()))?;
                let mut all_held = true;
                let mut changed = false;
                for (j, l) in locked.iter().enumerate() {
                    let key = keys[j].value(r);
                    let got = match held.get(&(j, key.to_vec())) {
                        Some(g) => *g,
                        None => {
                            let g = run_blocking(|| {
                                txn.lock_row(&l.table, key, l.locking.mode, l.locking.wait)
                            })?;
                            held.insert((j, key.to_vec()), g);
                            g
                        }
                    };
                    if !got {
                        all_held = false; // SKIP LOCKED
                        break;
                    }
                    changed |= txn.changed_after(&l.table, &lsns[j], [key])?;
                }
                if !all_held {
                    continue;
                }
                if !changed {
                    picked.push((bi, r));
                    continue;
                }
                if txn.isolation == Isolation::RepeatableRead {
                    return Err(StorageError::SerializationFailure.into());
                }
                // READ COMMITTED: the newest versions of this row's locked
                // rows, if they still qualify.
                let fresh = self.install_tables(&all_tables)?;
                let mut view = fresh.clone();
                for (j, l) in locked.iter().enumerate() {
                    let id = l.table.def().id;
                    let base = fresh.get(&id).cloned().ok_or_else(|| {
                        SqlError::Internal("no snapshot for a locked table".into())
                    })?;
                    let only: std::collections::HashSet<Vec<u8>> =
                        std::iter::once(keys[j].value(r).to_vec()).collect();
                    view.insert(id, Arc::new(base.restricted_to(Arc::new(only))));
                }
                self.view.set(view);
                let (_, again) = self.locking_scan(&locked, stmt.clone()).await?;
                for a in again {
                    for ar in 0..a.num_rows() {
                        extra.push(a.slice(ar, 1));
                        picked.push((batches.len() + extra.len() - 1, 0));
                    }
                }
            }
        }
        let skip = offset.unwrap_or(0).min(picked.len());
        let end = wanted.map_or(picked.len(), |w| w.min(picked.len()));
        let rows = &picked[skip..end.max(skip)];
        let all: Vec<&RecordBatch> = batches.iter().chain(extra.iter()).collect();
        let out_schema: SchemaRef = Arc::new(datafusion::arrow::datatypes::Schema::new(
            schema.fields()[..schema.fields().len().saturating_sub(k)].to_vec(),
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

    /// Runs the rewritten locking query over the statement's view, each
    /// locked table through its key-carrying provider; returns its schema
    /// (the locked tables' keys last, in order) and batches.
    async fn locking_scan(
        &mut self,
        locked: &[Locked],
        mut stmt: Statement,
    ) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        for l in locked {
            let provider = Arc::new(
                EddyTable::new(Arc::clone(&l.table), true).with_view(Arc::clone(&self.view)),
            );
            self.dml_schema.register_table(l.target.clone(), provider)?;
        }
        self.compat(&mut stmt)?;
        let result = self.collect_query(stmt).await;
        for l in locked {
            let _ = self.dml_schema.deregister_table(&l.target);
        }
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

/// The last `k` columns of `b`: the locked tables' keys.
fn key_columns(b: &RecordBatch, k: usize) -> Result<Vec<&BinaryArray>> {
    let cols = b.columns();
    let first = cols
        .len()
        .checked_sub(k)
        .ok_or_else(|| SqlError::Internal("locking query lost its key columns".into()))?;
    cols[first..]
        .iter()
        .map(|c| {
            c.as_any()
                .downcast_ref::<BinaryArray>()
                .filter(|k| k.null_count() == 0)
                .ok_or_else(|| SqlError::Internal("locking query lost its key column".into()))
        })
        .collect()
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
