//! Catalog changes (DDL), on their own or inside a transaction.
//!
//! A change made by [`Engine::ddl`] with an owner transaction is
//! *in flight* until that transaction ends. Invariants:
//!
//! * **Undo is written with the change.** The catalog write that makes a
//!   change also records, under the owner's id, what undoes it (the table's
//!   previous definition, or "did not exist" for a created table). One
//!   `catalog.json` write (fsync + rename) carries both, so no crash can
//!   leave a change without its undo.
//! * **The commit log decides.** The owner commits with
//!   [`Engine::commit_txn`], which always writes the owner's id to the
//!   commit log (its data, if any, as prepare records tagged with that id).
//!   On open, an in-flight change whose owner is in the commit log is kept,
//!   any other is undone, before a shard opens with the definitions. So the
//!   change and the transaction's rows are visible together or not at all.
//! * **Others wait.** The owner holds an exclusive lock on the table
//!   ([`crate::locks::TABLE_LOCK_KEY`]) until it ends: it is taken before a
//!   change to an existing table, and on a created table before anyone can
//!   look the table up. Statements of other transactions take the shared
//!   side while any such lock is held (the SQL layer does), so nobody writes
//!   a table under a definition that may still be undone: PostgreSQL's
//!   ACCESS EXCLUSIVE lock.
//! * **Undo needs no data rewrite.** Only changes that leave stored rows
//!   readable under both definitions may be in flight: create, rename,
//!   column renames, defaults, nullability (dropped, or set once the rows
//!   were checked: undoing it allows what they hold), comments and added
//!   (nullable) columns. Changes that do touch stored values (DROP COLUMN,
//!   a type change, a new primary key) are built from these by the SQL
//!   layer: a new table created, loaded and renamed into place in flight,
//!   the old one dropped at commit (`docs/design/schema-changes.md`). A file written while a column was added has that
//!   column, all NULL (the owner's rows are private until commit and others
//!   wait), and readers address columns by position, so the undone
//!   definition reads it unchanged.
//! * **Versions only grow.** An undone definition gets a schema version
//!   above every version the table had, so a plan made under the undone
//!   definition is recognised as stale.

use std::collections::HashSet;
use std::sync::Arc;

use eddy_common::{ColumnDef, ColumnType, IndexDef, TableDef, TableId, TxnId};
use serde::{Deserialize, Serialize};

use crate::engine::{validate_spec, CatalogData, CreateTable, Engine, Table};
use crate::error::{Result, StorageError};
use crate::locks::{LockMode, LockWait, TABLE_LOCK_KEY};
use crate::manifest;

/// The catalog changes of one transaction in progress.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct InFlightDdl {
    pub(crate) txn: TxnId,
    /// In the order the changes were made; undone in reverse.
    pub(crate) undo: Vec<DefUndo>,
    /// Tables the transaction drops: they go when it commits (recorded
    /// just before its commit point, so its commit-log record decides the
    /// drops with everything else).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) drops: Vec<TableId>,
    /// The owner's changes to views, applied when it commits (recorded
    /// just before its commit point, as `drops`: see [`crate::views`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) views: Vec<crate::views::ViewChange>,
    /// The owner's changes to schemas, applied when it commits (recorded
    /// as `views` are: see [`crate::schemas`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) schemas: Vec<crate::schemas::SchemaChange>,
}

/// What undoes one change: `prior` is the table's definition before it,
/// `None` for a table the change created.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct DefUndo {
    pub(crate) table: TableId,
    pub(crate) prior: Option<TableDef>,
}

impl CatalogData {
    fn record_undo(&mut self, owner: TxnId, table: TableId, prior: Option<TableDef>) {
        let undo = DefUndo { table, prior };
        self.entry(owner).undo.push(undo);
    }

    pub(crate) fn entry(&mut self, owner: TxnId) -> &mut InFlightDdl {
        let pos = match self.in_flight.iter().position(|d| d.txn == owner) {
            Some(p) => p,
            None => {
                self.in_flight.push(InFlightDdl {
                    txn: owner,
                    undo: Vec::new(),
                    drops: Vec::new(),
                    views: Vec::new(),
                    schemas: Vec::new(),
                });
                self.in_flight.len() - 1
            }
        };
        &mut self.in_flight[pos]
    }

    /// Forgets a committed owner's records and carries out its drops;
    /// returns the dropped definitions.
    fn settle_committed(&mut self, owner: TxnId) -> Vec<TableDef> {
        let Some(pos) = self.in_flight.iter().position(|d| d.txn == owner) else {
            return Vec::new();
        };
        let entry = self.in_flight.remove(pos);
        crate::views::apply(&mut self.views, &entry.views);
        crate::schemas::apply(&mut self.schemas, &entry.schemas);
        let (dropped, kept): (Vec<TableDef>, Vec<TableDef>) = std::mem::take(&mut self.tables)
            .into_iter()
            .partition(|t| entry.drops.contains(&t.id));
        self.tables = kept;
        dropped
    }

    fn undo_len(&self, owner: TxnId) -> usize {
        self.in_flight
            .iter()
            .find(|d| d.txn == owner)
            .map_or(0, |d| d.undo.len())
    }

    /// Undoes `owner`'s changes after the first `keep` (all of them when
    /// `keep` is 0, which also forgets the owner). Returns what changed:
    /// per table, its definition before (`None`: it did not exist) and
    /// after the undo (`None`: it no longer exists).
    fn undo_after(
        &mut self,
        owner: TxnId,
        keep: usize,
    ) -> Vec<(Option<TableDef>, Option<TableDef>)> {
        let Some(pos) = self.in_flight.iter().position(|d| d.txn == owner) else {
            return Vec::new();
        };
        let undone: Vec<DefUndo> = match self.in_flight.get_mut(pos) {
            Some(d) if keep < d.undo.len() => d.undo.split_off(keep),
            _ => Vec::new(),
        };
        if keep == 0 {
            self.in_flight.remove(pos);
        }
        let top_version = |cat: &CatalogData, id: TableId| {
            cat.tables
                .iter()
                .find(|t| t.id == id)
                .map_or(0, |t| t.schema_version)
        };
        let mut changed = Vec::new();
        for u in undone.into_iter().rev() {
            let current = self.tables.iter().position(|t| t.id == u.table);
            let before = current.and_then(|i| self.tables.get(i).cloned());
            match (u.prior, current) {
                (None, Some(i)) => {
                    self.tables.remove(i);
                    changed.push((before, None));
                }
                (Some(mut prior), Some(i)) => {
                    prior.schema_version = top_version(self, u.table).max(prior.schema_version) + 1;
                    if let Some(slot) = self.tables.get_mut(i) {
                        *slot = prior.clone();
                    }
                    changed.push((before, Some(prior)));
                }
                // dropped meanwhile (only by its owner, which holds its
                // lock): nothing to bring back
                (Some(_), None) | (None, None) => {}
            }
        }
        changed
    }
}

/// Settles every in-flight change at open: kept if its owner is in the
/// commit log, undone otherwise. Returns whether the catalog changed.
pub(crate) fn resolve_at_open(cat: &mut CatalogData, committed: &HashSet<TxnId>) -> bool {
    if cat.in_flight.is_empty() {
        return false;
    }
    let owners: Vec<TxnId> = cat.in_flight.iter().map(|d| d.txn).collect();
    for owner in owners {
        if committed.contains(&owner) {
            // the shards then find the dropped tables' files unknown and
            // delete them
            cat.settle_committed(owner);
        } else {
            let undone = cat.undo_after(owner, 0);
            tracing::info!(
                txn = owner.0,
                changes = undone.len(),
                "undid the catalog changes of a transaction that did not commit"
            );
        }
    }
    true
}

/// Catalog changes made on behalf of `owner` (or on their own, when it is
/// `None`): see the module doc.
pub struct Ddl<'a> {
    engine: &'a Engine,
    owner: Option<TxnId>,
}

impl Engine {
    /// DDL on behalf of a transaction (`Some`: undone unless it commits
    /// through [`Engine::commit_txn`]) or on its own (`None`: durable on
    /// return).
    pub fn ddl(&self, owner: Option<TxnId>) -> Ddl<'_> {
        Ddl {
            engine: self,
            owner,
        }
    }

    /// Whether `txn` has catalog changes in flight.
    pub fn has_ddl(&self, txn: TxnId) -> bool {
        self.inner()
            .catalog
            .lock()
            .in_flight
            .iter()
            .any(|d| d.txn == txn)
    }

    /// How many catalog changes `txn` has made (a savepoint's mark).
    pub fn ddl_mark(&self, txn: TxnId) -> usize {
        self.inner().catalog.lock().undo_len(txn)
    }

    /// Undoes `txn`'s catalog changes after the first `keep` (ROLLBACK TO
    /// SAVEPOINT); `keep == 0` undoes all and forgets `txn` (ROLLBACK).
    /// The caller still holds `txn`'s table locks and releases them after.
    pub fn rollback_ddl(&self, txn: TxnId, keep: usize) -> Result<()> {
        let inner = self.inner();
        let mut cat = inner.catalog.lock();
        if !cat.in_flight.iter().any(|d| d.txn == txn) {
            return Ok(());
        }
        let mut next = cat.clone();
        let changed = next.undo_after(txn, keep);
        manifest::write_atomic(&inner.cfg.data_dir.join("catalog.json"), &next)?;
        *cat = next;
        for (before, after) in changed {
            let id = before
                .as_ref()
                .or(after.as_ref())
                .map(|d| d.id)
                .ok_or_else(|| StorageError::InvalidDefinition("an empty undo".into()))?;
            let group = before
                .as_ref()
                .or(after.as_ref())
                .map(|d| d.table_group)
                .and_then(|g| inner.groups.read().get(&g).cloned());
            if let Some(b) = &before {
                inner.tables.write().remove(&b.name);
            }
            match after {
                None => {
                    if let Some(g) = group {
                        for s in &g.shards {
                            s.remove_table(id)?;
                        }
                    }
                }
                Some(def) => {
                    let def = Arc::new(def);
                    if let Some(g) = group {
                        for s in &g.shards {
                            s.alter_table(Arc::clone(&def))?;
                        }
                    }
                    let t = inner.make_table(Arc::clone(&def))?;
                    inner.tables.write().insert(def.name.clone(), t);
                }
            }
        }
        Ok(())
    }

    /// Forgets `txn`'s undo records once it has committed and drops the
    /// tables it dropped. A failure here is harmless: recovery finds `txn`
    /// in the commit log, keeps the changes and carries out the drops.
    pub(crate) fn finish_ddl(&self, txn: TxnId) {
        let inner = self.inner();
        let mut cat = inner.catalog.lock();
        let mut next = cat.clone();
        let (view_changes, schema_changes) = cat
            .in_flight
            .iter()
            .find(|d| d.txn == txn)
            .map(|d| (d.views.clone(), d.schemas.clone()))
            .unwrap_or_default();
        let dropped = next.settle_committed(txn);
        if let Err(e) = manifest::write_atomic(&inner.cfg.data_dir.join("catalog.json"), &next) {
            tracing::warn!(txn = txn.0, error = %e, "could not settle the catalog changes of a committed transaction; recovery will");
            // the views it changed are applied in memory all the same (a
            // committed change must show; applying again is harmless);
            // recovery writes them
            crate::views::apply(&mut cat.views, &view_changes);
            crate::schemas::apply(&mut cat.schemas, &schema_changes);
            self.count_views(&cat);
            self.publish_schemas(&cat);
            return;
        }
        *cat = next;
        self.count_views(&cat);
        self.publish_schemas(&cat);
        for def in dropped {
            let Some(t) = inner.tables.write().remove(&def.name) else {
                continue;
            };
            for s in &t.group.shards {
                if let Err(e) = s.remove_table(def.id) {
                    tracing::warn!(table = %def.name, error = %e, "could not remove the files of a dropped table; recovery will");
                }
            }
        }
    }
}

impl<'a> Ddl<'a> {
    /// Records changes of the owner (`what`: "a view change", ...) just
    /// before its commit point, in one `catalog.json` write with their
    /// check: `check` sees the catalog as committed and recorded (and the
    /// owner's id) and refuses a conflict, and then nothing is recorded;
    /// `record` puts the changes into the owner's entry. Views and schemas
    /// commit so (`crate::views`, `crate::schemas`).
    pub(crate) fn record_at_commit(
        &self,
        what: &str,
        check: impl FnOnce(&CatalogData, TxnId) -> Result<()>,
        record: impl FnOnce(&mut InFlightDdl),
    ) -> Result<()> {
        let Some(owner) = self.owner else {
            return Err(StorageError::InvalidDefinition(format!(
                "{what} needs a transaction"
            )));
        };
        let inner = self.engine.inner();
        inner.check_open()?;
        let mut cat = inner.catalog.lock();
        check(&cat, owner)?;
        let mut next = cat.clone();
        record(next.entry(owner));
        manifest::write_atomic(&self.catalog_path(), &next)?;
        *cat = next;
        Ok(())
    }

    pub(crate) fn engine(&self) -> &'a Engine {
        self.engine
    }

    fn catalog_path(&self) -> std::path::PathBuf {
        self.engine.inner().cfg.data_dir.join("catalog.json")
    }

    /// Records that the owner drops `tables` when it commits (called just
    /// before its commit: see [`InFlightDdl::drops`]). The caller holds
    /// their table locks.
    pub fn drop_at_commit(&self, tables: &[Arc<Table>]) -> Result<()> {
        let Some(owner) = self.owner else {
            return Err(StorageError::InvalidDefinition(
                "a drop at commit needs a transaction".into(),
            ));
        };
        let inner = self.engine.inner();
        inner.check_open()?;
        let mut cat = inner.catalog.lock();
        let mut next = cat.clone();
        let entry = next.entry(owner);
        for t in tables {
            if !entry.drops.contains(&t.def.id) {
                entry.drops.push(t.def.id);
            }
        }
        manifest::write_atomic(&self.catalog_path(), &next)?;
        *cat = next;
        Ok(())
    }

    pub fn create_table(&self, spec: CreateTable) -> Result<Arc<Table>> {
        self.create_table_owned(spec, None)
    }

    /// Creates a table owned by the role `owner` (`None`: the bootstrap
    /// superuser).
    pub fn create_table_owned(
        &self,
        spec: CreateTable,
        owner: Option<String>,
    ) -> Result<Arc<Table>> {
        let inner = self.engine.inner();
        inner.check_open()?;
        validate_spec(&spec)?;
        let mut cat = inner.catalog.lock();
        if inner.tables.read().contains_key(&spec.name)
            || cat.views.iter().any(|v| v.name == spec.name)
        {
            return Err(StorageError::TableExists(spec.name));
        }
        let group_name = match (&spec.table_group, spec.shard_count) {
            (Some(g), _) => g.clone(),
            (None, None) => "default".to_string(),
            (None, Some(_)) => format!("{}_tg", spec.name),
        };
        let group = match cat.groups.iter().find(|g| g.name == group_name) {
            Some(g) => {
                if let Some(n) = spec.shard_count {
                    if n != g.shard_count {
                        return Err(StorageError::InvalidDefinition(format!(
                            "table group \"{}\" has {} shards, not {n}",
                            g.name, g.shard_count
                        )));
                    }
                }
                g.id
            }
            None if spec.table_group.is_some() => {
                return Err(StorageError::TableGroupNotFound(group_name))
            }
            None => {
                drop(cat);
                inner.create_table_group(&group_name, spec.shard_count.unwrap_or(1))?;
                cat = inner.catalog.lock();
                cat.groups
                    .iter()
                    .find(|g| g.name == group_name)
                    .map(|g| g.id)
                    .ok_or_else(|| StorageError::TableGroupNotFound(group_name.clone()))?
            }
        };
        let id = TableId(cat.next_table_id);
        let def = TableDef {
            id,
            name: spec.name.clone(),
            columns: spec.columns,
            primary_key: spec.primary_key,
            distribution_key: spec.distribution_key,
            orientation: spec.orientation,
            table_group: group,
            schema_version: 1,
            checks: spec.checks,
            comment: None,
            owner,
            acl: Vec::new(),
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
        };
        let mut next = cat.clone();
        next.next_table_id += 1;
        next.tables.push(def.clone());
        if let Some(owner) = self.owner {
            next.record_undo(owner, id, None);
        }
        manifest::write_atomic(&self.catalog_path(), &next)?;
        *cat = next;
        let def = Arc::new(def);
        if let Some(g) = inner.groups.read().get(&group) {
            for s in &g.shards {
                s.add_table(def.clone());
            }
        }
        let t = inner.make_table(def)?;
        if let Some(owner) = self.owner {
            // before anyone can find the table: others wait for the owner
            self.engine.locks().lock(
                owner,
                id,
                TABLE_LOCK_KEY,
                LockMode::Exclusive,
                LockWait::NoWait,
                &spec.name,
            )?;
        }
        inner.tables.write().insert(spec.name, t.clone());
        Ok(t)
    }

    /// Renames a table.
    pub fn rename_table(&self, from: &str, to: &str) -> Result<Arc<Table>> {
        // (a view's name is checked apart: `change_def` holds the catalog)
        if self.engine.inner().catalog.lock().names_view(to) {
            return Err(StorageError::TableExists(to.to_string()));
        }
        self.change_def(from, |def| {
            if self.engine.inner().tables.read().contains_key(to) {
                return Err(StorageError::TableExists(to.to_string()));
            }
            def.name = to.to_string();
            Ok(())
        })
    }

    /// Adds a nullable column; existing rows read it as NULL.
    pub fn add_column(&self, table: &str, column: ColumnDef) -> Result<Arc<Table>> {
        self.change_def(table, |def| {
            if def.column_index(&column.name).is_some() {
                return Err(StorageError::ColumnExists {
                    table: table.to_string(),
                    column: column.name,
                });
            }
            if !column.nullable {
                return Err(StorageError::InvalidDefinition(format!(
                    "column \"{}\" must be nullable: existing rows have no value for it",
                    column.name
                )));
            }
            def.columns.push(column);
            Ok(())
        })
    }

    /// Changes what the catalog says of a table's existing columns without
    /// touching its data: names, defaults, identity, nullability (the
    /// caller has checked that no stored row breaks a new NOT NULL).
    /// Stored files address columns by position, so none is rewritten.
    /// `change` may refuse with an error; nothing is changed then.
    pub fn alter_columns(
        &self,
        table: &str,
        change: impl FnOnce(&mut Vec<ColumnDef>) -> Result<()>,
    ) -> Result<Arc<Table>> {
        self.change_def(table, |def| {
            let shape = |cols: &[ColumnDef]| -> Vec<(ColumnType, usize)> {
                cols.iter().enumerate().map(|(i, c)| (c.ty, i)).collect()
            };
            let before = shape(&def.columns);
            change(&mut def.columns)?;
            if before != shape(&def.columns) {
                return Err(StorageError::InvalidDefinition(
                    "alter_columns may not add, remove, reorder or retype columns".into(),
                ));
            }
            if def
                .primary_key
                .iter()
                .any(|k| def.columns.get(*k).is_some_and(|c| c.nullable))
            {
                return Err(StorageError::InvalidDefinition(
                    "a primary key column cannot be nullable".into(),
                ));
            }
            Ok(())
        })
    }

    /// Adds a secondary index to table `table` and builds it in every
    /// shard (under each shard's commit lock). For a UNIQUE index the caller
    /// has checked that the stored rows have no duplicates
    /// ([`Ddl::check_no_duplicates`]); one without the distribution key is
    /// enforced across shards (`crate::global_unique`).
    pub fn create_index(&self, table: &str, index: IndexDef) -> Result<Arc<Table>> {
        self.change_def(table, |def| {
            if def.indexes.iter().any(|i| i.name == index.name) {
                return Err(StorageError::TableExists(index.name.clone()));
            }
            if index.columns.is_empty() || index.columns.iter().any(|&c| c >= def.columns.len()) {
                return Err(StorageError::InvalidDefinition(format!(
                    "index \"{}\" names no valid column",
                    index.name
                )));
            }
            def.indexes.push(index);
            Ok(())
        })
    }

    /// CREATE UNIQUE INDEX's check: a committed row whose non-NULL key
    /// under `cols` repeats another's (`DuplicatedKey` naming `index`).
    pub fn check_no_duplicates(&self, table: &Table, index: &str, cols: &[usize]) -> Result<()> {
        let def = table.def().clone();
        let types: Vec<ColumnType> = def.columns.iter().map(|c| c.ty).collect();
        let mut seen = HashSet::new();
        for part in table.snapshot().partitions() {
            for batch in part.scan(None, false, &|_| true)? {
                let batch = batch?;
                for r in 0..batch.num_rows() {
                    let row = crate::arrow_values::row_at(&batch, &types, r)
                        .map_err(|e| StorageError::conversion("checking a unique index", e))?;
                    if crate::index::has_null(cols, &row) {
                        continue;
                    }
                    let Some(k) = crate::index::index_key(cols, &row) else {
                        continue;
                    };
                    if !seen.insert(k) {
                        return Err(StorageError::DuplicatedKey {
                            index: index.to_string(),
                            key: crate::codec::describe_columns(&def, cols, &row),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Removes index `index` of table `table`.
    pub fn drop_index(&self, table: &str, index: &str) -> Result<Arc<Table>> {
        self.change_def(table, |def| {
            let before = def.indexes.len();
            def.indexes.retain(|i| i.name != index);
            if def.indexes.len() == before {
                return Err(StorageError::InvalidDefinition(format!(
                    "index \"{index}\" does not exist"
                )));
            }
            Ok(())
        })
    }

    /// Replaces the table's CHECK constraints (the caller has checked the
    /// stored rows against any it adds).
    pub fn set_checks(
        &self,
        table: &str,
        checks: Vec<eddy_common::CheckConstraint>,
    ) -> Result<Arc<Table>> {
        self.change_def(table, |def| {
            def.checks = checks;
            Ok(())
        })
    }

    /// Replaces the table's FOREIGN KEY constraints (the caller has
    /// validated them).
    pub fn set_foreign_keys(
        &self,
        table: &str,
        foreign_keys: Vec<eddy_common::ForeignKeyDef>,
    ) -> Result<Arc<Table>> {
        self.change_def(table, |def| {
            def.foreign_keys = foreign_keys;
            Ok(())
        })
    }

    /// Sets or clears the table's comment (`COMMENT ON TABLE`).
    pub fn set_table_comment(&self, table: &str, comment: Option<String>) -> Result<Arc<Table>> {
        self.change_def(table, |def| {
            def.comment = comment;
            Ok(())
        })
    }

    /// Sets who owns table `name` and what others were granted (GRANT,
    /// REVOKE, ALTER TABLE OWNER TO): a catalog change like any other, so
    /// inside a transaction it commits or rolls back with it.
    pub fn set_access(
        &self,
        table: &str,
        owner: Option<String>,
        acl: Vec<eddy_common::AclItem>,
    ) -> Result<Arc<Table>> {
        self.change_def(table, |def| {
            def.owner = owner;
            def.acl = acl;
            Ok(())
        })
    }

    /// A new definition of table `name`: `change` edits a copy of the
    /// current one (and may refuse; nothing changes then), which is then
    /// written as [`Ddl::replace_def`] says.
    fn change_def(
        &self,
        name: &str,
        change: impl FnOnce(&mut TableDef) -> Result<()>,
    ) -> Result<Arc<Table>> {
        let inner = self.engine.inner();
        inner.check_open()?;
        let mut cat = inner.catalog.lock();
        let t = self
            .engine
            .table(name)
            .ok_or_else(|| StorageError::TableNotFound(name.to_string()))?;
        let mut def = (*t.def).clone();
        change(&mut def)?;
        self.replace_def(&mut cat, &t, def)
    }

    /// Writes `def` (a new version of `t`'s, found by id; its name may
    /// differ) to the catalog, with its undo when owned, then to the shards
    /// and the engine's table map.
    fn replace_def(
        &self,
        cat: &mut parking_lot::MutexGuard<'_, CatalogData>,
        t: &Arc<Table>,
        mut def: TableDef,
    ) -> Result<Arc<Table>> {
        let inner = self.engine.inner();
        def.schema_version += 1;
        let mut next = (**cat).clone();
        for d in next.tables.iter_mut() {
            if d.id == def.id {
                *d = def.clone();
            }
        }
        if let Some(owner) = self.owner {
            next.record_undo(owner, def.id, Some((*t.def).clone()));
        }
        manifest::write_atomic(&self.catalog_path(), &next)?;
        **cat = next;
        let def = Arc::new(def);
        for s in &t.group.shards {
            s.alter_table(def.clone())?;
        }
        let nt = inner.make_table(Arc::clone(&def))?;
        let mut tables = inner.tables.write();
        tables.remove(&t.def.name);
        tables.insert(def.name.clone(), nt.clone());
        Ok(nt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::{Orientation, TableGroupId};

    fn def(id: u32, name: &str, ncols: usize) -> TableDef {
        TableDef {
            id: TableId(id),
            name: name.into(),
            columns: (0..ncols)
                .map(|i| ColumnDef::new(format!("c{i}"), ColumnType::BigInt, true))
                .collect(),
            primary_key: vec![],
            distribution_key: vec![],
            orientation: Orientation::Column,
            table_group: TableGroupId(1),
            schema_version: 1,
            checks: Vec::new(),
            comment: None,
            owner: None,
            acl: Vec::new(),
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
        }
    }

    /// A crash after the commit record but before the undo records were
    /// cleared keeps the changes; an owner not in the log loses them.
    #[test]
    fn open_keeps_committed_owners_and_undoes_the_rest() {
        let mut cat = CatalogData {
            tables: vec![
                def(1, "made_by_done", 1),
                def(2, "t2_renamed", 3),
                def(3, "made_by_open", 1),
            ],
            ..Default::default()
        };
        let (done, open_txn) = (TxnId(7), TxnId(9));
        cat.record_undo(done, TableId(1), None);
        cat.record_undo(open_txn, TableId(2), Some(def(2, "t2", 2)));
        cat.record_undo(open_txn, TableId(3), None);
        let committed: HashSet<TxnId> = [done].into_iter().collect();
        assert!(resolve_at_open(&mut cat, &committed));
        assert!(cat.in_flight.is_empty());
        let names: Vec<&str> = cat.tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["made_by_done", "t2"]);
        let t2 = cat
            .tables
            .iter()
            .find(|t| t.id == TableId(2))
            .map(|t| (t.columns.len(), t.schema_version));
        assert_eq!(t2, Some((2, 2)));
        assert!(
            !resolve_at_open(&mut cat, &committed),
            "nothing left to settle"
        );
    }

    /// The drops of a committed owner are carried out at open.
    #[test]
    fn open_carries_out_committed_drops() {
        let mut cat = CatalogData {
            tables: vec![def(1, "a", 1), def(2, "b", 1)],
            ..Default::default()
        };
        cat.entry(TxnId(5)).drops.push(TableId(1));
        cat.entry(TxnId(6)).drops.push(TableId(2));
        let committed: HashSet<TxnId> = [TxnId(5)].into_iter().collect();
        resolve_at_open(&mut cat, &committed);
        let names: Vec<&str> = cat.tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["b"]);
        assert!(cat.in_flight.is_empty());
    }

    /// Two changes of one table in one transaction undo to the first prior.
    #[test]
    fn undo_runs_in_reverse() {
        let mut cat = CatalogData {
            tables: vec![def(1, "c", 3)],
            ..Default::default()
        };
        let txn = TxnId(3);
        cat.record_undo(txn, TableId(1), Some(def(1, "a", 1)));
        cat.record_undo(txn, TableId(1), Some(def(1, "b", 2)));
        let changed = cat.undo_after(txn, 1);
        assert_eq!(changed.len(), 1);
        assert_eq!(cat.tables[0].name, "b");
        assert_eq!(cat.undo_len(txn), 1);
        cat.undo_after(txn, 0);
        assert_eq!(cat.tables[0].name, "a");
        assert!(cat.in_flight.is_empty());
    }
}
