//! INSERT, UPDATE, DELETE, TRUNCATE and COPY into a transaction.
//!
//! Every statement here locks the rows it writes before it decides what to
//! write (see [`crate::txn`]): UPDATE and DELETE find their rows on a
//! snapshot, lock them, and rows that changed after that snapshot are
//! re-checked on their newest version (READ COMMITTED) or fail the
//! statement with 40001 (REPEATABLE READ); so a concurrent `SET n = n + 1`
//! is never lost and a concurrently deleted row never comes back. The
//! writes go to the transaction, which commits them all at once.

use std::sync::Arc;

use datafusion::arrow::array::{Array, BinaryArray, RecordBatch};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, Delete, Expr, FromTable, Ident, Insert, ObjectNamePart, OnConflictAction,
    OnInsert, SelectItem, Statement, TableObject, Update, UpdateTableFromKind,
};
use eddy_common::{ColumnType, Row, TableDef, Value};
use eddy_storage::engine::key_for_row;
use eddy_storage::{LockMode, OnConflict, StorageError, Table, TableSnapshot, WriteOp};
use futures::StreamExt;

use super::dml_scan::ScanShape;
use super::insert_rows::{insert_rows, Conflicts, UniqueUpdate};
use super::{cast_column, defaults, relation_of, run_blocking, Output, Session};
use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, table_name};
use crate::txn::{Isolation, Transaction};

/// READ COMMITTED re-runs of one UPDATE/DELETE before it gives up (40001).
const MAX_RERUNS: usize = 1000;

fn column_name(n: &datafusion::sql::sqlparser::ast::ObjectName) -> String {
    n.0.last()
        .map(|p| match p {
            ObjectNamePart::Identifier(id) => ident_name(id),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

/// Rows of `batches` (columns laid out as `def`) with their keys (last column).
pub(super) fn rows_with_keys(
    def: &TableDef,
    batches: &[RecordBatch],
    zone: &crate::session_zone::SessionZone,
) -> Result<Vec<(Vec<u8>, Row)>> {
    let ncols = def.columns.len();
    let mut out = Vec::new();
    for b in batches {
        let mut arrays = Vec::with_capacity(ncols);
        for (i, c) in def.columns.iter().enumerate() {
            arrays.push(cast_column(b.column(i), c.ty, &c.name, zone)?);
        }
        let keys = b
            .column(ncols)
            .as_any()
            .downcast_ref::<BinaryArray>()
            .ok_or_else(|| SqlError::Internal("key column is not binary".into()))?;
        for r in 0..b.num_rows() {
            let row: Row = (0..ncols)
                .map(|i| {
                    eddy_storage::arrow_values::value_at(arrays[i].as_ref(), def.columns[i].ty, r)
                })
                .collect::<std::result::Result<_, _>>()?;
            out.push((keys.value(r).to_vec(), row));
        }
    }
    Ok(out)
}

fn keys_of(batches: &[RecordBatch]) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for b in batches {
        let keys = b
            .column(0)
            .as_any()
            .downcast_ref::<BinaryArray>()
            .ok_or_else(|| SqlError::Internal("key column is not binary".into()))?;
        for r in 0..keys.len() {
            out.push(keys.value(r).to_vec());
        }
    }
    Ok(out)
}

impl Session {
    pub(super) fn txn_mut(&mut self) -> Result<&mut Transaction> {
        self.txn
            .as_mut()
            .ok_or_else(|| SqlError::Internal("statement outside a transaction".into()))
    }

    /// Installs, for the next statement, a snapshot of every table it names
    /// (one consistent cut), overlaid with the transaction's writes.
    pub(super) fn install_view(&mut self, stmt: &Statement) -> Result<()> {
        let tables: Vec<Arc<Table>> = self
            .named_tables(stmt)
            .into_iter()
            .map(|(t, _)| t)
            .collect();
        self.install_tables(&tables)?;
        Ok(())
    }

    /// The tables `node` names, each once, with how many times it is named.
    pub(super) fn named_tables<V: datafusion::sql::sqlparser::ast::Visit>(
        &self,
        node: &V,
    ) -> Vec<(Arc<Table>, usize)> {
        let mut tables: Vec<(Arc<Table>, usize)> = Vec::new();
        let _ = datafusion::sql::sqlparser::ast::visit_relations(node, |name| {
            if let Some(t) = table_name(name).ok().and_then(|n| self.db.engine.table(&n)) {
                match tables.iter_mut().find(|(x, _)| x.def().id == t.def().id) {
                    Some((_, mentions)) => *mentions += 1,
                    None => tables.push((t, 1)),
                }
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        tables
    }

    /// Snapshots of `tables` for the next statement; returns them.
    pub(super) fn install_tables(
        &mut self,
        tables: &[Arc<Table>],
    ) -> Result<std::collections::HashMap<eddy_common::TableId, Arc<TableSnapshot>>> {
        let snaps = match self.txn.as_mut() {
            Some(t) => t.snapshots(tables),
            None => tables
                .iter()
                .zip(self.db.engine.snapshot_tables(tables))
                .map(|(t, s)| (t.def().id, Arc::new(s)))
                .collect(),
        };
        self.view.set(snaps.clone());
        Ok(snaps)
    }

    /// Finds the rows an UPDATE or DELETE writes, PostgreSQL's way: `run`
    /// scans the statement's snapshot and returns (key, new row or `None`
    /// for a delete) per matching row; the rows are locked; rows that
    /// changed after the snapshot are then re-checked on their newest
    /// version only (READ COMMITTED: `run` again over a fresh snapshot
    /// restricted to those keys: a row that no longer matches is left
    /// alone, one that still does gets its new values from the newest
    /// version; rows that only now match are not added) or fail the
    /// statement with 40001 (REPEATABLE READ).
    ///
    /// `reads` are the other tables the statement reads, snapshotted with
    /// the target on one cut; `reads_target_again` says the statement reads
    /// the target elsewhere too (a self-join, a subquery over it), where a
    /// re-check cannot restrict the target's snapshot and scans it whole.
    async fn locked_scan(
        &mut self,
        table: &Arc<Table>,
        reads: &[Arc<Table>],
        reads_target_again: bool,
        run: impl for<'a> Fn(
            &'a mut Session,
        )
            -> futures::future::BoxFuture<'a, Result<Vec<(Vec<u8>, Option<Row>)>>>,
    ) -> Result<Vec<(Vec<u8>, Option<Row>)>> {
        let tables: Vec<Arc<Table>> = std::iter::once(Arc::clone(table))
            .chain(reads.iter().cloned())
            .collect();
        let snaps = self.install_tables(&tables)?;
        self.locked_scan_on(table, reads, reads_target_again, snaps, run)
            .await
    }

    /// [`Self::locked_scan`] starting from snapshots taken already
    /// (`snaps`, of the target and `reads`), which another scan of the
    /// same statement read too.
    pub(super) async fn locked_scan_on(
        &mut self,
        table: &Arc<Table>,
        reads: &[Arc<Table>],
        reads_target_again: bool,
        snaps: std::collections::HashMap<eddy_common::TableId, Arc<TableSnapshot>>,
        run: impl for<'a> Fn(
            &'a mut Session,
        )
            -> futures::future::BoxFuture<'a, Result<Vec<(Vec<u8>, Option<Row>)>>>,
    ) -> Result<Vec<(Vec<u8>, Option<Row>)>> {
        let id = table.def().id;
        let tables: Vec<Arc<Table>> = std::iter::once(Arc::clone(table))
            .chain(reads.iter().cloned())
            .collect();
        self.view.set(snaps.clone());
        let mut snap = snaps
            .get(&id)
            .cloned()
            .ok_or_else(|| SqlError::Internal("no snapshot for the target".into()))?;
        let mut found: std::collections::BTreeMap<Vec<u8>, Option<Row>> =
            run(self).await?.into_iter().collect();
        let mut check: Vec<Vec<u8>> = found.keys().cloned().collect();
        for _ in 0..MAX_RERUNS {
            let txn = self.txn_mut()?;
            let changed: Vec<Vec<u8>> = run_blocking(|| -> Result<Vec<Vec<u8>>> {
                txn.lock_rows(
                    table,
                    check.iter().map(|k| k.as_slice()),
                    LockMode::Exclusive,
                )?;
                let mut changed = Vec::new();
                for k in &check {
                    if txn.changed_since(table, &snap, [k.as_slice()])? {
                        changed.push(k.clone());
                    }
                }
                Ok(changed)
            })?;
            if changed.is_empty() {
                return Ok(found.into_iter().collect());
            }
            if txn.isolation == Isolation::RepeatableRead {
                return Err(StorageError::SerializationFailure.into());
            }
            tracing::debug!(table = %table.def().name, rows = changed.len(), "rows changed under the statement; re-checking their newest versions");
            // The locks are held: the newest versions cannot change again.
            let fresh = self.install_tables(&tables)?;
            let base = fresh
                .get(&id)
                .cloned()
                .ok_or_else(|| SqlError::Internal("no snapshot for the target".into()))?;
            let keys: Arc<std::collections::HashSet<Vec<u8>>> =
                Arc::new(changed.iter().cloned().collect());
            if !reads_target_again {
                let restricted = Arc::new(base.restricted_to(Arc::clone(&keys)));
                let mut view = fresh;
                view.insert(id, restricted);
                self.view.set(view);
            }
            for k in &changed {
                found.remove(k);
            }
            let again: Vec<(Vec<u8>, Option<Row>)> = run(self)
                .await?
                .into_iter()
                .filter(|(k, _)| keys.contains(k))
                .collect();
            check = again.iter().map(|(k, _)| k.clone()).collect();
            found.extend(again);
            snap = base;
        }
        Err(StorageError::SerializationFailure.into())
    }

    pub(super) async fn insert(&mut self, mut ins: Insert) -> Result<Output> {
        let tname = match &ins.table {
            TableObject::TableName(n) => table_name(n)?,
            _ => {
                return Err(SqlError::FeatureNotSupported(
                    "INSERT INTO must name a table".into(),
                ))
            }
        };
        let returning = ins.returning.take();
        let alias = ins
            .table_alias
            .as_ref()
            .map(|a| ident_name(&a.alias))
            .unwrap_or_else(|| tname.clone());
        let table = self.table(&tname)?;
        let def = table.def().clone();
        let mut targets: Vec<usize> = if ins.columns.is_empty() {
            // PostgreSQL's implicit target list: the first columns, as many
            // as the source gives (the rest get their defaults)
            let given = ins
                .source
                .as_deref()
                .and_then(defaults::source_width)
                .unwrap_or(def.columns.len());
            (0..def.columns.len().min(given)).collect()
        } else {
            ins.columns
                .iter()
                .map(|c| {
                    let n = column_name(c);
                    def.column_index(&n).ok_or_else(|| {
                        SqlError::UndefinedColumn(format!("{n}\" of relation \"{tname}"))
                    })
                })
                .collect::<Result<_>>()?
        };
        let overriding = crate::overriding::of_token(&ins.insert_token.0);
        let source = defaults::apply_defaults(&def, &mut targets, ins.source, overriding)?;
        // Evaluate the source rows through DataFusion.
        let mut stmt = Statement::Query(source);
        self.install_view(&stmt)?;
        self.compat(&mut stmt)?;
        let target_types: Vec<ColumnType> = targets
            .iter()
            .filter_map(|t| def.columns.get(*t).map(|c| c.ty))
            .collect();
        let plan = match self
            .planning_state()
            .statement_to_plan(DFStatement::Statement(Box::new(stmt.clone())))
            .await
        {
            Ok(plan) => crate::insert_values::exact_numeric_columns(plan, &target_types)?,
            Err(e) => return Err(self.planning_error(&stmt, e)),
        };
        let batches = match self.run_plan(plan).await? {
            Output::Rows { mut stream, .. } => {
                let mut v = Vec::new();
                while let Some(b) = stream.next().await {
                    v.push(b?);
                }
                v
            }
            _ => vec![],
        };
        let mut rows: Vec<Row> = Vec::new();
        let zone = self.time_zone();
        for b in &batches {
            if b.num_columns() != targets.len() {
                return Err(SqlError::Syntax(if b.num_columns() > targets.len() {
                    "INSERT has more expressions than target columns".into()
                } else {
                    "INSERT has more target columns than expressions".into()
                }));
            }
            let mut arrays = Vec::with_capacity(targets.len());
            for (i, &t) in targets.iter().enumerate() {
                arrays.push(cast_column(
                    b.column(i),
                    def.columns[t].ty,
                    &def.columns[t].name,
                    &zone,
                )?);
            }
            for r in 0..b.num_rows() {
                let mut row = vec![Value::Null; def.columns.len()];
                for (i, &t) in targets.iter().enumerate() {
                    row[t] = eddy_storage::arrow_values::value_at(
                        arrays[i].as_ref(),
                        def.columns[t].ty,
                        r,
                    )?;
                }
                rows.push(row);
            }
        }
        // what ON CONFLICT resolves (the UNIQUE indexes DO NOTHING skips on)
        let arbiters = match &ins.on {
            Some(OnInsert::OnConflict(oc)) => crate::arbiter::arbiters(&def, oc)?,
            _ => crate::arbiter::Arbiters::default(),
        };
        let on_conflict = match ins.on {
            None => OnConflict::Error,
            Some(OnInsert::OnConflict(oc)) => match oc.action {
                OnConflictAction::DoNothing => OnConflict::DoNothing,
                OnConflictAction::DoUpdate(du) => {
                    if arbiters.primary_key && !def.has_primary_key() {
                        return Err(SqlError::InvalidColumnReference(
                            "there is no unique or exclusion constraint matching the ON CONFLICT specification".into(),
                        ));
                    }
                    OnConflict::Update(super::conflict_update::conflict_updater(
                        &self.ctx.state(),
                        &def,
                        &alias,
                        &du.assignments,
                        du.selection.as_ref(),
                        self.time_zone(),
                    )?)
                }
            },
            Some(OnInsert::DuplicateKeyUpdate(_)) => {
                return Err(SqlError::FeatureNotSupported(
                    "ON DUPLICATE KEY UPDATE is not supported".into(),
                ))
            }
            Some(_) => {
                return Err(SqlError::FeatureNotSupported(
                    "unsupported ON clause".into(),
                ))
            }
        };
        let mut written =
            (returning.is_some() || !def.checks.is_empty() || !def.foreign_keys.is_empty())
                .then(Vec::new);
        if rows.is_empty() {
            return match returning {
                Some(items) => {
                    self.returning_output(&def, &alias, items, vec![], "INSERT 0")
                        .await
                }
                None => Ok(Output::Command("INSERT 0 0".into())),
            };
        }
        let txn = self.txn_mut()?;
        // A plain autocommit INSERT is one atomic write: storage checks
        // duplicates under its commit lock, so it needs no row locks.
        // (Foreign keys need the referenced rows' locks: not direct.)
        // (UNIQUE values need their locks: not direct either.)
        let direct = !txn.explicit
            && !txn.has_writes()
            && matches!(on_conflict, OnConflict::Error)
            && def.foreign_keys.is_empty()
            && !def.indexes.iter().any(|i| i.unique);
        if direct {
            // written at once below: checked first
            self.enforce_checks(&def, &rows).await?;
        }
        let txn = self.txn_mut()?;
        let n = if direct {
            if let Some(w) = written.as_mut() {
                w.extend(rows.iter().cloned());
            }
            let ops: Vec<WriteOp> = rows
                .into_iter()
                .map(|row| WriteOp::Insert {
                    row,
                    on_conflict: OnConflict::Error,
                })
                .collect();
            run_blocking(|| table.write(ops))?.inserted
        } else {
            // Only the cut's LSNs are needed (not a snapshot of the target's
            // files and memtables, which costs as much as the table is large).
            let lsns = txn.statement_lsns(&table);
            let n = run_blocking(|| {
                let update_unique = match &on_conflict {
                    OnConflict::Update(update) if !arbiters.primary_key => Some(UniqueUpdate {
                        indexes: &arbiters.unique,
                        update,
                    }),
                    _ => None,
                };
                let conflicts = Conflicts {
                    // a key that does not arbitrate conflicts as an error
                    on_conflict: if arbiters.primary_key {
                        &on_conflict
                    } else {
                        &OnConflict::Error
                    },
                    skip_unique: if update_unique.is_some() {
                        &[]
                    } else {
                        &arbiters.unique
                    },
                    update_unique,
                };
                insert_rows(txn, &table, &lsns, rows, conflicts, written.as_mut())
            })?;
            // the final rows (ON CONFLICT DO UPDATE's included), before commit
            if let Some(w) = &written {
                self.enforce_checks(&def, w).await?;
                self.check_parents(&def, w)?;
            }
            n
        };
        match (returning, written) {
            (Some(items), Some(rows)) => {
                self.returning_output(&def, &alias, items, rows, "INSERT 0")
                    .await
            }
            _ => Ok(Output::Command(format!("INSERT 0 {n}"))),
        }
    }

    pub(super) async fn update(&mut self, mut upd: Update) -> Result<Output> {
        if !upd.table.joins.is_empty() || !upd.order_by.is_empty() || upd.limit.is_some() {
            return Err(SqlError::Syntax(
                "UPDATE takes one target table, without JOIN, ORDER BY or LIMIT".into(),
            ));
        }
        let (tname, alias) = relation_of(&upd.table.relation)?;
        let ret_alias = alias.clone();
        let table = self.table(&tname)?;
        let def = table.def().clone();
        let (reads, reads_target_again) = self.statement_tables(&upd, &table);
        let joined = match upd.from.take() {
            None => Vec::new(),
            Some(UpdateTableFromKind::AfterSet(from)) => from,
            Some(UpdateTableFromKind::BeforeSet(_)) => {
                return Err(SqlError::Syntax(
                    "syntax error at or near \"FROM\": FROM follows SET".into(),
                ))
            }
        };
        let returning = upd.returning.take();
        upd.assignments = single_column_assignments(std::mem::take(&mut upd.assignments))?;
        let shape = Arc::new(ScanShape {
            alias,
            joined,
            selection: upd.selection.take(),
        });
        shape.check_names()?;
        if let Some(items) = &returning {
            shape.check_returning(items)?;
        }
        let exprs = assigned_values(&def, &tname, &upd.assignments, false)?;
        let items: Vec<SelectItem> = def
            .columns
            .iter()
            .zip(exprs.iter().cloned())
            .map(|(c, e)| match e {
                Some(e) => SelectItem::ExprWithAlias {
                    expr: Expr::Nested(Box::new(e)),
                    alias: Ident::with_quote('"', c.name.as_str()),
                },
                None => SelectItem::UnnamedExpr(shape.column(&c.name)),
            })
            .chain(std::iter::once(shape.key_item()))
            .collect();
        let scan_def = def.clone();
        let target = Arc::clone(&table);
        let rows: Vec<(Vec<u8>, Row)> = self
            .locked_scan(&table, &reads, reads_target_again, move |s| {
                let items = items.clone();
                let def = scan_def.clone();
                let target = Arc::clone(&target);
                let shape = Arc::clone(&shape);
                Box::pin(async move {
                    let batches = s.dml_scan(&target, &shape, items).await?;
                    Ok(rows_with_keys(&def, &batches, &s.time_zone())?
                        .into_iter()
                        .map(|(k, r)| (k, Some(r)))
                        .collect())
                })
            })
            .await?
            .into_iter()
            .filter_map(|(k, r)| r.map(|r| (k, r)))
            .collect();
        let n = rows.len();
        let returned: Option<Vec<Row>> = returning
            .as_ref()
            .map(|_| rows.iter().map(|(_, r)| r.clone()).collect());
        let assigned: Vec<bool> = exprs.iter().map(Option::is_some).collect();
        self.write_updated_rows(&table, rows, &assigned).await?;
        match (returning, returned) {
            (Some(items), Some(rows)) => {
                self.returning_output(&def, &ret_alias, items, rows, "UPDATE")
                    .await
            }
            _ => Ok(Output::Command(format!("UPDATE {n}"))),
        }
    }

    /// Writes the new versions `rows` (key, row) of an UPDATE of `table`
    /// whose assignments set the columns marked in `assigned`: CHECK
    /// constraints, rows whose primary key moves (every old version
    /// deleted first, so keys moving between rows do not collide), the
    /// foreign keys they reference and the rows that reference their old
    /// keys.
    pub(super) async fn write_updated_rows(
        &mut self,
        table: &Arc<Table>,
        rows: Vec<(Vec<u8>, Row)>,
        assigned: &[bool],
    ) -> Result<()> {
        let def = table.def().clone();
        let set = |i: &usize| assigned.get(*i).copied().unwrap_or(false);
        let pk_changed = def.primary_key.iter().any(set);
        let fk_changed = def.foreign_keys.iter().any(|fk| fk.columns.iter().any(set));
        // rows moved off their keys: their referencing rows are looked at
        let moved: Vec<Vec<u8>> = if pk_changed && def.has_primary_key() {
            rows.iter()
                .filter(|(k, r)| key_for_row(&def, r, 0).0 != *k)
                .map(|(k, _)| k.clone())
                .collect()
        } else {
            Vec::new()
        };
        let rows_for_fk: Vec<Row> = if fk_changed {
            rows.iter().map(|(_, r)| r.clone()).collect()
        } else {
            Vec::new()
        };
        if !def.checks.is_empty() {
            let new_rows: Vec<Row> = rows.iter().map(|(_, r)| r.clone()).collect();
            self.enforce_checks(&def, &new_rows).await?;
        }
        let txn = self.txn_mut()?;
        run_blocking(|| -> Result<()> {
            if !pk_changed || !def.has_primary_key() {
                for (key, row) in rows {
                    eddy_storage::codec::check_row(&def, &row)?;
                    txn.put(table, key, Some(row))?;
                }
                return Ok(());
            }
            for (key, _) in &rows {
                txn.put(table, key.clone(), None)?;
            }
            let lsns = txn.statement_lsns(table);
            let new_rows = rows.into_iter().map(|(_, r)| r).collect();
            insert_rows(txn, table, &lsns, new_rows, Conflicts::error(), None)?;
            Ok(())
        })?;
        if fk_changed {
            self.check_parents(&def, &rows_for_fk)?;
        }
        self.parent_keys_removed(table, moved, true).await
    }

    pub(super) async fn delete(&mut self, mut del: Delete) -> Result<Output> {
        let from = match &del.from {
            FromTable::WithFromKeyword(v) | FromTable::WithoutKeyword(v) => v,
        };
        let rel = match from.as_slice() {
            [one] if one.joins.is_empty() => one,
            [] => return Err(SqlError::Syntax("DELETE needs a table".into())),
            _ => {
                return Err(SqlError::Syntax(
                    "DELETE FROM takes one table; name the others in USING".into(),
                ))
            }
        };
        if !del.tables.is_empty() || !del.order_by.is_empty() || del.limit.is_some() {
            return Err(SqlError::Syntax(
                "DELETE takes one target table, without ORDER BY or LIMIT".into(),
            ));
        }
        let returning = del.returning.take();
        let (tname, alias) = relation_of(&rel.relation)?;
        let ret_alias = alias.clone();
        let table = self.table(&tname)?;
        let def = table.def().clone();
        let (reads, reads_target_again) = self.statement_tables(&del, &table);
        let shape = Arc::new(ScanShape {
            alias,
            joined: del.using.take().unwrap_or_default(),
            selection: del.selection.take(),
        });
        shape.check_names()?;
        if let Some(items) = &returning {
            shape.check_returning(items)?;
        }
        let target = Arc::clone(&table);
        let with_rows = returning.is_some();
        let scan_def = def.clone();
        // (key, the deleted row where RETURNING needs it)
        let found: Vec<(Vec<u8>, Option<Row>)> = self
            .locked_scan(&table, &reads, reads_target_again, move |s| {
                let target = Arc::clone(&target);
                let shape = Arc::clone(&shape);
                let def = scan_def.clone();
                Box::pin(async move {
                    if !with_rows {
                        let batches = s.dml_scan(&target, &shape, vec![shape.key_item()]).await?;
                        return Ok(keys_of(&batches)?.into_iter().map(|k| (k, None)).collect());
                    }
                    let items: Vec<SelectItem> = def
                        .columns
                        .iter()
                        .map(|c| SelectItem::UnnamedExpr(shape.column(&c.name)))
                        .chain(std::iter::once(shape.key_item()))
                        .collect();
                    let batches = s.dml_scan(&target, &shape, items).await?;
                    Ok(rows_with_keys(&def, &batches, &s.time_zone())?
                        .into_iter()
                        .map(|(k, r)| (k, Some(r)))
                        .collect())
                })
            })
            .await?;
        let n = found.len();
        let mut deleted = Vec::new();
        let mut keys = Vec::with_capacity(n);
        let txn = self.txn_mut()?;
        for (k, row) in found {
            txn.put(&table, k.clone(), None)?;
            keys.push(k);
            deleted.extend(row);
        }
        self.parent_keys_removed(&table, keys, false).await?;
        match returning {
            Some(items) => {
                self.returning_output(&def, &ret_alias, items, deleted, "DELETE")
                    .await
            }
            None => Ok(Output::Command(format!("DELETE {n}"))),
        }
    }

    /// TRUNCATE: at once outside a block; inside one, the tables read as
    /// empty to the transaction and are emptied when it commits.
    pub(super) fn truncate(&mut self, tables: Vec<Arc<Table>>) -> Result<Output> {
        // TRUNCATE gives the table a new id at commit, which the undo
        // records of a catalog change in the same transaction could not
        // follow
        if self.txn.as_ref().is_some_and(|t| t.has_ddl()) {
            return Err(SqlError::FeatureNotSupported(
                "TRUNCATE in a transaction that changed a table definition is not supported yet"
                    .into(),
            ));
        }
        // PostgreSQL's ACCESS EXCLUSIVE: waits for everyone using the tables
        let mut locked = Vec::with_capacity(tables.len());
        for t in &tables {
            locked.push(self.lock_table_exclusive(t)?);
        }
        let tables = locked;
        self.refuse_truncate_referenced(&tables)?;
        let txn = self.txn_mut()?;
        if txn.explicit {
            for t in &tables {
                txn.truncate(t)?;
            }
        } else {
            let engine = Arc::clone(&self.db.engine);
            for t in &tables {
                run_blocking(|| engine.truncate_table(&t.def().name))?;
            }
        }
        Ok(Output::Command("TRUNCATE TABLE".into()))
    }

    /// Rows of a COPY FROM inside a transaction block: inserted into the
    /// transaction like an INSERT (a duplicate key fails with 23505).
    pub fn copy_into_transaction(
        &mut self,
        table: &Arc<Table>,
        batches: Vec<RecordBatch>,
    ) -> Result<u64> {
        if self.txn.is_none() {
            // an autocommit COPY into a table with foreign keys
            // (`crate::copy`): a transaction of its own, committed when
            // the rows and their deferred checks pass
            let (isolation, read_only) = self.default_modes()?;
            self.open_implicit(isolation, read_only)?;
            let r = self
                .copy_rows_into_transaction(table, batches)
                .and_then(|n| self.run_deferred_checks(None).map(|()| n));
            let (r, n) = match r {
                Ok(n) => (Ok(super::Output::Command(String::new())), n),
                Err(e) => (Err(e), 0),
            };
            return self.close_implicit(r).map(|_| n);
        }
        self.copy_rows_into_transaction(table, batches)
    }

    /// The rows of a COPY FROM, written in the session's transaction after
    /// their foreign keys' referenced rows are checked (and locked).
    fn copy_rows_into_transaction(
        &mut self,
        table: &Arc<Table>,
        batches: Vec<RecordBatch>,
    ) -> Result<u64> {
        if self.txn.as_ref().is_some_and(|t| t.aborted) {
            return Err(SqlError::InFailedTransaction);
        }
        let def = table.def().clone();
        let mut rows = Vec::new();
        for b in &batches {
            for r in 0..b.num_rows() {
                let row: Row = def
                    .columns
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        eddy_storage::arrow_values::value_at(b.column(i).as_ref(), c.ty, r)
                    })
                    .collect::<std::result::Result<_, _>>()?;
                rows.push(row);
            }
        }
        if let Err(e) = self.check_parents(&def, &rows) {
            self.note_error();
            return Err(e);
        }
        let txn = self.txn_mut()?;
        let lsns = txn.statement_lsns(table);
        let r = run_blocking(|| insert_rows(txn, table, &lsns, rows, Conflicts::error(), None));
        if r.is_err() {
            self.note_error();
        }
        r
    }
}

/// `SET (a, b) = (x, y)` as `SET a = x, b = y` (PostgreSQL's multiple-column
/// assignment from a row constructor); a list of another length is
/// PostgreSQL's 42601, one from a subquery is refused (0A000).
/// The value each column of `def` is assigned by `assignments` (one
/// column each), `None` where it keeps its value: DEFAULT replaced by the
/// column's default, a GENERATED ALWAYS column refused anything else, a
/// column assigned twice refused (42601). `bare_only`: a qualified
/// column name is a syntax error (MERGE's rule).
pub(super) fn assigned_values(
    def: &TableDef,
    tname: &str,
    assignments: &[datafusion::sql::sqlparser::ast::Assignment],
    bare_only: bool,
) -> Result<Vec<Option<Expr>>> {
    let mut exprs: Vec<Option<Expr>> = vec![None; def.columns.len()];
    for a in assignments {
        let n = match &a.target {
            AssignmentTarget::ColumnName(n) => n,
            other => return Err(SqlError::FeatureNotSupported(format!("UPDATE SET {other}"))),
        };
        if bare_only && n.0.len() > 1 {
            return Err(SqlError::SyntaxMessage(format!(
                "syntax error at or near \"{n}\""
            )));
        }
        let cname = column_name(n);
        let idx = def
            .column_index(&cname)
            .ok_or_else(|| SqlError::UndefinedColumn(format!("{cname}\" of relation \"{tname}")))?;
        let col = def
            .columns
            .get(idx)
            .ok_or_else(|| SqlError::Internal(format!("no column {idx}")))?;
        defaults::check_update_target(col, &a.value)?;
        let slot = exprs
            .get_mut(idx)
            .ok_or_else(|| SqlError::Internal(format!("no column {idx}")))?;
        if slot.is_some() {
            return Err(SqlError::SyntaxMessage(format!(
                "multiple assignments to same column \"{cname}\""
            )));
        }
        *slot = Some(if defaults::is_default_keyword(&a.value) {
            defaults::default_of(col)?
        } else {
            a.value.clone()
        });
    }
    Ok(exprs)
}

pub(super) fn single_column_assignments(
    assignments: Vec<datafusion::sql::sqlparser::ast::Assignment>,
) -> Result<Vec<datafusion::sql::sqlparser::ast::Assignment>> {
    use datafusion::sql::sqlparser::ast::Assignment;
    let mut out = Vec::with_capacity(assignments.len());
    for a in assignments {
        let AssignmentTarget::Tuple(columns) = a.target else {
            out.push(a);
            continue;
        };
        let values = match a.value {
            Expr::Tuple(values) => values,
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "UPDATE SET ({}) = {other} is not supported; assign a list of values",
                    columns
                        .iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        };
        if values.len() != columns.len() {
            return Err(SqlError::Syntax(
                "number of columns does not match number of values".into(),
            ));
        }
        for (column, value) in columns.into_iter().zip(values) {
            out.push(Assignment {
                target: AssignmentTarget::ColumnName(column),
                value,
            });
        }
    }
    Ok(out)
}
