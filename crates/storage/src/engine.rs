//! The engine: catalog, table groups and their shards, tables, cross-shard
//! commit, background flush and compaction.
//!
//! # Catalog
//! `catalog.json` (written with [`manifest::write_atomic`]) holds table
//! groups, table definitions and id counters. DDL writes the catalog first,
//! then changes shards: a crash in between leaves files of an unknown
//! table id, which recovery deletes.
//!
//! # Cross-shard writes (two-phase commit)
//! A write that touches several shards locks their commit locks in shard
//! order (no deadlock), logs a *prepare* record tagged with a transaction id
//! in every shard's WAL, and a commit record in the commit log (`txnlog/`);
//! see `crate::commit` for when each becomes durable and what makes the
//! transaction committed at open. Recovery applies tagged records only for
//! ids found committed. After recovery every shard is flushed and the
//! commit log emptied.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtOrd};
use std::sync::{Arc, Weak};
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use eddy_common::{
    ColumnDef, ColumnType, Lsn, Orientation, Row, ShardId, TableDef, TableGroupId, TableId, TxnId,
    Value,
};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::bulk::BulkLoader;
use crate::codec::{self, encode_key_value, stable_hash, Key};
use crate::commit::CommitRecord;
use crate::ddl::InFlightDdl;
use crate::error::{Result, StorageError};
use crate::filestore::FileStore;
use crate::locks::LockManager;
use crate::manifest;
use crate::shard::{OnConflict, Shard, ShardOp, ShardOpKind, WriteSummary};
use crate::snapshot::TableSnapshot;
use crate::wal::Wal;

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub data_dir: PathBuf,
    /// A shard flushes once its memtables hold this many bytes.
    pub memtable_bytes: usize,
    /// Shards of the `default` table group created with a new database.
    pub default_shard_count: u32,
    /// fsync the WAL before acknowledging (turn off only for tests/benches).
    pub sync: bool,
    /// Run flush and compaction in a background thread.
    pub background_compaction: bool,
}

impl EngineConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> EngineConfig {
        EngineConfig {
            data_dir: data_dir.into(),
            memtable_bytes: 64 << 20,
            default_shard_count: 2,
            sync: true,
            background_compaction: true,
        }
    }
}

/// A table group as the catalog records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableGroupInfo {
    pub id: TableGroupId,
    pub name: String,
    pub shard_count: u32,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct CatalogData {
    pub(crate) next_table_id: u32,
    pub(crate) next_group_id: u32,
    pub(crate) groups: Vec<TableGroupInfo>,
    pub(crate) tables: Vec<TableDef>,
    /// Row ids below this may have been handed out.
    pub(crate) rowid_limit: u64,
    /// Catalog changes of transactions not yet known to have committed,
    /// with what undoes them (see [`crate::ddl`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) in_flight: Vec<InFlightDdl>,
    /// The committed views (see [`crate::views`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) views: Vec<eddy_common::ViewDef>,
    /// The committed schemas other than `public` (see [`crate::schemas`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) schemas: Vec<eddy_common::SchemaDef>,
}

/// What CREATE TABLE asks for.
#[derive(Clone, Debug)]
pub struct CreateTable {
    pub name: String,
    pub columns: Vec<ColumnDef>,
    pub primary_key: Vec<usize>,
    pub distribution_key: Vec<usize>,
    pub orientation: Orientation,
    pub table_group: Option<String>,
    pub shard_count: Option<u32>,
    pub checks: Vec<eddy_common::CheckConstraint>,
}

pub struct TableGroup {
    pub info: TableGroupInfo,
    pub shards: Vec<Arc<Shard>>,
}

pub(crate) struct EngineInner {
    pub(crate) cfg: EngineConfig,
    store: Arc<FileStore>,
    pub(crate) catalog: Mutex<CatalogData>,
    pub(crate) groups: RwLock<HashMap<TableGroupId, Arc<TableGroup>>>,
    pub(crate) tables: RwLock<BTreeMap<String, Arc<Table>>>,
    txnlog: Mutex<Wal>,
    /// The transaction ids the commit log named when the engine opened
    /// (the log is emptied at open): for a transaction with catalog
    /// changes, its commit record ([`Engine::committed_before_open`]).
    named_at_open: HashSet<TxnId>,
    /// The highest commit-log record known durable; its lock is held by
    /// the one committer syncing the log (see `log_commit`).
    txnlog_synced: Mutex<Lsn>,
    next_txn: AtomicU64,
    /// Held shared while a snapshot reads the visible LSNs of several
    /// shards, exclusively while a multi-shard commit publishes them: a
    /// snapshot sees such a commit on all its shards or on none. Only
    /// atomic stores run under the exclusive side.
    pub(crate) publish_gate: RwLock<()>,
    locks: LockManager,
    /// Serialises the writers of tables with a cross-shard UNIQUE index.
    pub(crate) unique_locks: crate::global_unique::UniqueLocks,
    rowids: Mutex<(u64, u64)>,
    /// How many committed views there are: statements skip looking for
    /// view names when there are none, without taking the catalog lock.
    pub(crate) view_count: std::sync::atomic::AtomicUsize,
    /// The committed schemas, shared: statements read them (to resolve
    /// names) without taking the catalog lock or copying them.
    pub(crate) committed_schemas: RwLock<Arc<Vec<eddy_common::SchemaDef>>>,
    closed: AtomicBool,
    _lock: std::fs::File,
}

/// The storage engine of one database directory.
pub struct Engine {
    inner: Arc<EngineInner>,
    background: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// A table handle. A schema change replaces the handle in the engine;
/// old handles keep working with the old definition.
pub struct Table {
    pub(crate) def: Arc<TableDef>,
    schema: SchemaRef,
    pub(crate) group: Arc<TableGroup>,
    engine: Weak<EngineInner>,
}

/// One operation of a write.
#[derive(Clone, Debug)]
pub enum WriteOp {
    Insert {
        row: Row,
        on_conflict: OnConflict,
    },
    Delete {
        key: Key,
    },
    /// Inserts `row`, replacing any row stored under the same id, into a
    /// table **without a primary key** under the caller's row id `rowid`
    /// instead of a freshly allocated one. Writing the same `(rowid, row)`
    /// twice leaves one row: an append-only materialized view keys each
    /// source row by its position in the source stream this way, so a
    /// replay rewrites the same rows (`docs/design/streams-into-tables.md`,
    /// "Append-only materialized views"). The caller owns the id space of
    /// the table: it must not also take ids from plain `Insert`s.
    Put {
        row: Row,
        rowid: u64,
    },
}

impl Engine {
    /// Opens the database in `cfg.data_dir`, creating it or recovering it.
    pub fn open(cfg: EngineConfig) -> Result<Arc<Engine>> {
        let dir = cfg.data_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::io(&dir, e))?;
        let lock_path = dir.join("LOCK");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| StorageError::io(&lock_path, e))?;
        lock.try_lock().map_err(|_| {
            StorageError::io(
                &lock_path,
                std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    "the data directory is in use by another process",
                ),
            )
        })?;
        let store = Arc::new(FileStore::local(&dir)?);
        let cat_path = dir.join("catalog.json");
        let mut catalog: CatalogData = match manifest::read_checked(&cat_path)? {
            Some(c) => c,
            None => {
                let c = CatalogData {
                    next_table_id: 1,
                    next_group_id: 2,
                    groups: vec![TableGroupInfo {
                        id: TableGroupId(1),
                        name: "default".into(),
                        shard_count: cfg.default_shard_count.max(1),
                    }],
                    tables: Vec::new(),
                    rowid_limit: 0,
                    in_flight: Vec::new(),
                    views: Vec::new(),
                    schemas: Vec::new(),
                };
                manifest::write_atomic(&cat_path, &c)?;
                c
            }
        };
        // Reserve a fresh range of row ids, so ids handed out before a crash
        // are never reused.
        let rowid_start = catalog.rowid_limit;
        catalog.rowid_limit = rowid_start + (1 << 24);
        manifest::write_atomic(&cat_path, &catalog)?;

        let (txnlog, entries) = Wal::open(&dir.join("txnlog"), Lsn::ZERO, cfg.sync, 64 << 20)?;
        let records = entries
            .iter()
            .map(|e| CommitRecord::decode(e, &dir.join("txnlog")))
            .collect::<Result<Vec<_>>>()?;
        // Every id the log names, committed or not: ids never repeat, and
        // the catalog changes of an id outside this set are undone.
        let named: HashSet<TxnId> = records.iter().map(CommitRecord::txn).collect();
        let max_named = named.iter().map(|t| t.0).max().unwrap_or(0);
        // Transaction ids must never repeat, even after the commit log was
        // emptied: an aborted prepare record could otherwise look committed.
        let now_micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        let next_txn = txnlog.lsn_floor().0.max(now_micros).max(max_named) + 1;
        // Catalog changes of transactions that did not commit are undone
        // before any shard opens with their definitions. (Only two-round
        // commits carry catalog changes, and their record alone decides.)
        if crate::ddl::resolve_at_open(&mut catalog, &named) {
            manifest::write_atomic(&cat_path, &catalog)?;
        }

        let mut opened = Vec::new();
        for g in &catalog.groups {
            let defs: Vec<Arc<TableDef>> = catalog
                .tables
                .iter()
                .filter(|t| t.table_group == g.id)
                .map(|t| Arc::new(t.clone()))
                .collect();
            for s in 0..g.shard_count {
                let shard =
                    Shard::open_unreplayed(&dir, store.clone(), g.id, ShardId(s), &defs, cfg.sync)?;
                opened.push(((g.id, ShardId(s)), shard));
            }
        }
        let committed = crate::commit::committed_at_open(&records, &opened);
        let mut groups: HashMap<TableGroupId, Arc<TableGroup>> = HashMap::new();
        let mut shards_of: HashMap<TableGroupId, Vec<Arc<Shard>>> = HashMap::new();
        for ((g, _), shard) in opened {
            shards_of
                .entry(g)
                .or_default()
                .push(Arc::new(shard.replay_wal(&committed)?));
        }
        for g in &catalog.groups {
            groups.insert(
                g.id,
                Arc::new(TableGroup {
                    info: g.clone(),
                    shards: shards_of.remove(&g.id).unwrap_or_default(),
                }),
            );
        }
        let view_count = catalog.views.len();
        let committed_schemas = Arc::new(catalog.schemas.clone());
        let inner = Arc::new(EngineInner {
            store,
            catalog: Mutex::new(catalog),
            groups: RwLock::new(groups),
            tables: RwLock::new(BTreeMap::new()),
            txnlog: Mutex::new(txnlog),
            named_at_open: named,
            txnlog_synced: Mutex::new(Lsn::ZERO),
            next_txn: AtomicU64::new(next_txn),
            publish_gate: RwLock::new(()),
            locks: LockManager::default(),
            unique_locks: Default::default(),
            rowids: Mutex::new((rowid_start, rowid_start + (1 << 24))),
            view_count: std::sync::atomic::AtomicUsize::new(view_count),
            committed_schemas: RwLock::new(committed_schemas),
            closed: AtomicBool::new(false),
            _lock: lock,
            cfg,
        });
        {
            let cat = inner.catalog.lock();
            let mut tables = inner.tables.write();
            for def in &cat.tables {
                let t = inner.make_table(Arc::new(def.clone()))?;
                tables.insert(def.name.clone(), t);
            }
        }
        if !records.is_empty() {
            // Every prepare record is now applied or discarded for good;
            // flush so the WALs no longer need the commit log. (Emptying
            // the log also keeps a one-round record of a transaction found
            // not committed from meeting a later record at the same LSN.)
            inner.flush_all()?;
            let mut log = inner.txnlog.lock();
            let last = log.lsn_floor();
            log.truncate_through(last)?;
            drop(log);
            inner.next_txn.store(next_txn + 1, AtOrd::SeqCst);
        }
        let engine = Arc::new(Engine {
            inner,
            background: Mutex::new(None),
        });
        if engine.inner.cfg.background_compaction {
            let weak = Arc::downgrade(&engine.inner);
            let h = std::thread::Builder::new()
                .name("eddy-maintenance".into())
                .spawn(move || maintenance_loop(weak))
                .map_err(|e| StorageError::io("maintenance thread", e))?;
            *engine.background.lock() = Some(h);
        }
        tracing::info!(data_dir = %engine.inner.cfg.data_dir.display(), tables = engine.inner.tables.read().len(), "storage engine open");
        Ok(engine)
    }

    pub(crate) fn inner(&self) -> &Arc<EngineInner> {
        &self.inner
    }

    /// Whether the commit log named `txn` when the engine opened: for a
    /// transaction with catalog changes (whose commit goes through the
    /// log), whether it committed before the last shutdown or crash. Lets
    /// state kept outside the catalog (the SQL layer's sequences) settle
    /// with such a transaction.
    pub fn committed_before_open(&self, txn: TxnId) -> bool {
        self.inner.named_at_open.contains(&txn)
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.cfg
    }

    pub fn create_table_group(&self, name: &str, shard_count: u32) -> Result<TableGroupId> {
        self.inner.create_table_group(name, shard_count)
    }

    pub fn table_groups(&self) -> Vec<TableGroupInfo> {
        self.inner.catalog.lock().groups.clone()
    }

    pub fn create_table(&self, spec: CreateTable) -> Result<Arc<Table>> {
        self.ddl(None).create_table(spec)
    }
    pub fn drop_table(&self, name: &str) -> Result<()> {
        self.inner.check_open()?;
        let mut cat = self.inner.catalog.lock();
        let t = self
            .table(name)
            .ok_or_else(|| StorageError::TableNotFound(name.to_string()))?;
        let mut next = cat.clone();
        next.tables.retain(|d| d.name != name);
        manifest::write_atomic(&self.inner.cfg.data_dir.join("catalog.json"), &next)?;
        *cat = next;
        self.inner.tables.write().remove(name);
        for s in &t.group.shards {
            s.remove_table(t.def.id)?;
        }
        Ok(())
    }

    /// Empties a table: it gets a new id (like a new relfilenode), and the
    /// old id's data is removed.
    pub fn truncate_table(&self, name: &str) -> Result<()> {
        self.inner.check_open()?;
        let mut cat = self.inner.catalog.lock();
        let t = self
            .table(name)
            .ok_or_else(|| StorageError::TableNotFound(name.to_string()))?;
        let mut next = cat.clone();
        let new_id = TableId(next.next_table_id);
        next.next_table_id += 1;
        let mut def = (*t.def).clone();
        def.id = new_id;
        for d in next.tables.iter_mut() {
            if d.name == name {
                *d = def.clone();
            }
        }
        manifest::write_atomic(&self.inner.cfg.data_dir.join("catalog.json"), &next)?;
        *cat = next;
        let def = Arc::new(def);
        for s in &t.group.shards {
            s.add_table(def.clone());
            s.remove_table(t.def.id)?;
        }
        let nt = self.inner.make_table(def)?;
        self.inner.tables.write().insert(name.to_string(), nt);
        Ok(())
    }

    /// Renames a table (used to swap in a rewritten table).
    pub fn rename_table(&self, from: &str, to: &str) -> Result<Arc<Table>> {
        self.ddl(None).rename_table(from, to)
    }

    /// Adds a nullable column; existing rows read it as NULL.
    pub fn add_column(&self, table: &str, column: ColumnDef) -> Result<Arc<Table>> {
        self.ddl(None).add_column(table, column)
    }

    /// Changes what the catalog says of a table's existing columns without
    /// touching its data (see [`Ddl::alter_columns`]).
    pub fn alter_columns(
        &self,
        table: &str,
        change: impl FnOnce(&mut Vec<ColumnDef>) -> Result<()>,
    ) -> Result<Arc<Table>> {
        self.ddl(None).alter_columns(table, change)
    }

    /// Sets or clears the table's comment (`COMMENT ON TABLE`).
    pub fn set_table_comment(&self, table: &str, comment: Option<String>) -> Result<Arc<Table>> {
        self.ddl(None).set_table_comment(table, comment)
    }

    pub fn table(&self, name: &str) -> Option<Arc<Table>> {
        self.inner.tables.read().get(name).cloned()
    }

    pub fn tables(&self) -> Vec<Arc<Table>> {
        self.inner.tables.read().values().cloned().collect()
    }

    /// Flushes every memtable to files and truncates the WALs.
    pub fn flush(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.flush_all()
    }

    /// Full compaction of one table's group (or of everything): merges
    /// files and drops deleted rows and old versions.
    pub fn compact(&self, table: Option<&str>) -> Result<()> {
        self.inner.check_open()?;
        let groups: Vec<Arc<TableGroup>> = match table {
            Some(n) => vec![self
                .table(n)
                .ok_or_else(|| StorageError::TableNotFound(n.to_string()))?
                .group
                .clone()],
            None => self.inner.groups.read().values().cloned().collect(),
        };
        for g in groups {
            for s in &g.shards {
                s.flush()?;
                s.compact(true)?;
            }
        }
        Ok(())
    }

    /// What the background thread does for compaction, once, now: every
    /// shard that needs it runs a (bounded, not full) compaction.
    #[doc(hidden)]
    pub fn compact_if_needed(&self) -> Result<()> {
        self.inner.check_open()?;
        let groups: Vec<Arc<TableGroup>> = self.inner.groups.read().values().cloned().collect();
        for g in groups {
            for s in &g.shards {
                if s.needs_compaction() {
                    s.compact(false)?;
                }
            }
        }
        Ok(())
    }

    /// Flushes every shard the way flushes worked before they moved off the
    /// commit lock: the whole flush (files, manifest, WAL) under it, so
    /// that the shard's writers wait. For the background benchmark's
    /// comparison only.
    #[doc(hidden)]
    pub fn flush_holding_commit_locks(&self) -> Result<()> {
        self.inner.check_open()?;
        let groups: Vec<Arc<TableGroup>> = self.inner.groups.read().values().cloned().collect();
        for g in groups {
            for s in &g.shards {
                s.flush_holding_commit_lock()?;
            }
        }
        Ok(())
    }

    /// Installs (or removes, with `None`) a hook run by every shard's flush
    /// and compaction at each [`crate::BackgroundStage`]: tests use it to
    /// write while a flush or compaction is half done, or to stop one there
    /// as a crash would. Shards opened later do not get it.
    #[doc(hidden)]
    pub fn set_background_hook(&self, hook: Option<crate::BackgroundHook>) {
        for g in self.inner.groups.read().values() {
            for s in &g.shards {
                s.set_background_hook(hook.clone());
            }
        }
    }

    /// Flushes and stops background work. Further calls fail with `Closed`.
    pub fn close(&self) -> Result<()> {
        if self.inner.closed.swap(true, AtOrd::SeqCst) {
            return Ok(());
        }
        if let Some(h) = self.background.lock().take() {
            let _ = h.join();
        }
        self.inner.flush_all()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.inner.closed.store(true, AtOrd::SeqCst);
        if let Some(h) = self.background.lock().take() {
            let _ = h.join();
        }
    }
}

fn maintenance_loop(weak: Weak<EngineInner>) {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let Some(inner) = weak.upgrade() else { return };
        if inner.closed.load(AtOrd::SeqCst) {
            return;
        }
        let groups: Vec<Arc<TableGroup>> = inner.groups.read().values().cloned().collect();
        for g in groups {
            for s in &g.shards {
                if inner.closed.load(AtOrd::SeqCst) {
                    return;
                }
                if s.memtable_bytes() >= inner.cfg.memtable_bytes {
                    if let Err(e) = s.flush() {
                        tracing::error!(shard = %s.rel_dir, error = %e, "background flush failed");
                    }
                }
                if s.needs_compaction() {
                    if let Err(e) = s.compact(false) {
                        tracing::error!(shard = %s.rel_dir, error = %e, "background compaction failed");
                    }
                }
            }
        }
    }
}

pub(crate) fn validate_spec(spec: &CreateTable) -> Result<()> {
    let bad = |m: String| Err(StorageError::InvalidDefinition(m));
    if spec.name.is_empty() {
        return bad("empty table name".into());
    }
    if spec.columns.is_empty() {
        return bad("a table needs at least one column".into());
    }
    let mut seen = HashSet::new();
    for c in &spec.columns {
        if !seen.insert(c.name.as_str()) {
            return bad(format!("column \"{}\" specified more than once", c.name));
        }
    }
    let n = spec.columns.len();
    if spec
        .primary_key
        .iter()
        .chain(&spec.distribution_key)
        .any(|&i| i >= n)
    {
        return bad("key column index out of range".into());
    }
    for &i in &spec.primary_key {
        if spec.columns[i].nullable {
            return bad(format!(
                "primary key column \"{}\" must be NOT NULL",
                spec.columns[i].name
            ));
        }
        if !codec::key_type_allowed(spec.columns[i].ty) {
            return bad(format!(
                "column \"{}\" of type {} cannot be part of a primary key",
                spec.columns[i].name, spec.columns[i].ty
            ));
        }
    }
    if !spec.primary_key.is_empty()
        && !spec
            .distribution_key
            .iter()
            .all(|i| spec.primary_key.contains(i))
    {
        return bad("the distribution key must be a subset of the primary key".into());
    }
    if spec.shard_count == Some(0) || spec.shard_count.is_some_and(|n| n > 1024) {
        return bad("shard_count must be between 1 and 1024".into());
    }
    Ok(())
}

impl EngineInner {
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(AtOrd::SeqCst) {
            Err(StorageError::Closed)
        } else {
            Ok(())
        }
    }

    pub(crate) fn make_table(self: &Arc<Self>, def: Arc<TableDef>) -> Result<Arc<Table>> {
        let group = self
            .groups
            .read()
            .get(&def.table_group)
            .cloned()
            .ok_or_else(|| StorageError::TableGroupNotFound(def.table_group.to_string()))?;
        Ok(Arc::new(Table {
            schema: Arc::new(def.arrow_schema()),
            def,
            group,
            engine: Arc::downgrade(self),
        }))
    }

    pub(crate) fn create_table_group(&self, name: &str, shard_count: u32) -> Result<TableGroupId> {
        self.check_open()?;
        if shard_count == 0 || shard_count > 1024 {
            return Err(StorageError::InvalidDefinition(
                "shard_count must be between 1 and 1024".into(),
            ));
        }
        let mut cat = self.catalog.lock();
        if cat.groups.iter().any(|g| g.name == name) {
            return Err(StorageError::TableGroupExists(name.to_string()));
        }
        let info = TableGroupInfo {
            id: TableGroupId(cat.next_group_id),
            name: name.to_string(),
            shard_count,
        };
        let mut next = cat.clone();
        next.next_group_id += 1;
        next.groups.push(info.clone());
        manifest::write_atomic(&self.cfg.data_dir.join("catalog.json"), &next)?;
        *cat = next;
        let mut shards = Vec::new();
        for s in 0..shard_count {
            shards.push(Arc::new(Shard::open(
                &self.cfg.data_dir,
                self.store.clone(),
                info.id,
                ShardId(s),
                &[],
                &HashSet::new(),
                self.cfg.sync,
            )?));
        }
        let id = info.id;
        self.groups
            .write()
            .insert(id, Arc::new(TableGroup { info, shards }));
        Ok(id)
    }

    fn flush_all(&self) -> Result<()> {
        let groups: Vec<Arc<TableGroup>> = self.groups.read().values().cloned().collect();
        for g in groups {
            for s in &g.shards {
                s.flush()?;
            }
        }
        Ok(())
    }

    pub(crate) fn alloc_rowids(&self, n: u64) -> Result<u64> {
        let mut r = self.rowids.lock();
        if r.0 + n > r.1 {
            let mut cat = self.catalog.lock();
            let mut next = cat.clone();
            next.rowid_limit = r.0 + n + (1 << 24);
            manifest::write_atomic(&self.cfg.data_dir.join("catalog.json"), &next)?;
            *cat = next;
            r.1 = r.0 + n + (1 << 24);
        }
        let start = r.0;
        r.0 += n;
        Ok(start)
    }

    pub(crate) fn next_txn(&self) -> TxnId {
        TxnId(self.next_txn.fetch_add(1, AtOrd::SeqCst))
    }

    /// The commit point of a cross-shard transaction. Transaction ids are
    /// handed out before the prepare phase, so concurrent transactions reach
    /// this point in any order: the record gets the log's next sequence
    /// number (never below the id, so the log's floor stays above every id
    /// it holds) and carries the id as its payload.
    /// Appends `txn` to the commit log, durable on return. Concurrent
    /// committers share fdatasyncs (group commit): each writes its record
    /// under the log's lock, then one syncer at a time syncs everything
    /// written so far, and a committer whose record an earlier sync covered
    /// returns without syncing.
    pub(crate) fn log_commit(&self, txn: TxnId) -> Result<()> {
        let seq = self.append_commit_record(txn, &txn.0.to_le_bytes())?;
        self.sync_commit_log(seq)
    }

    /// Writes a commit-log record for `txn` (not yet durable) and returns
    /// its sequence number, for [`EngineInner::sync_commit_log`].
    pub(crate) fn append_commit_record(&self, txn: TxnId, payload: &[u8]) -> Result<Lsn> {
        let mut log = self.txnlog.lock();
        let seq = Lsn((log.lsn_floor().0 + 1).max(txn.0));
        log.write(&[(seq, payload)])?;
        Ok(seq)
    }

    /// Makes the commit log durable through `seq`; see
    /// [`EngineInner::log_commit`] for the sharing of fdatasyncs.
    pub(crate) fn sync_commit_log(&self, seq: Lsn) -> Result<()> {
        let mut synced = self.txnlog_synced.lock();
        if *synced >= seq {
            return Ok(());
        }
        let (upto, handle) = {
            let log = self.txnlog.lock();
            (log.last_lsn(), log.sync_handle()?)
        };
        if let Some(h) = handle {
            h.sync()?;
        }
        *synced = upto;
        Ok(())
    }

    pub(crate) fn locks(&self) -> &LockManager {
        &self.locks
    }
}

// ---------------------------------------------------------------- routing

/// Memcomparable key of a row. `rowid` is used (with `shard`) only for
/// tables without a primary key.
pub fn key_for_row(def: &TableDef, row: &[Value], rowid: u64) -> Key {
    key_for_row_in_shard(def, row, rowid, 0)
}

pub(crate) fn key_for_row_in_shard(def: &TableDef, row: &[Value], rowid: u64, shard: u32) -> Key {
    if def.primary_key.is_empty() {
        let mut k = Vec::with_capacity(13);
        k.push(0x02);
        k.extend_from_slice(&shard.to_be_bytes());
        k.extend_from_slice(&rowid.to_be_bytes());
        return Key(k);
    }
    let vals: Vec<&Value> = def.primary_key.iter().map(|&i| &row[i]).collect();
    codec::encode_key(&vals)
}

/// The shard a row lives in.
pub(crate) fn shard_for_row(def: &TableDef, row: &[Value], rowid: u64, n: u32) -> u32 {
    let cols = if def.distribution_key.is_empty() {
        &def.primary_key
    } else {
        &def.distribution_key
    };
    if cols.is_empty() {
        return (stable_hash(&rowid.to_le_bytes()) % n as u64) as u32;
    }
    let mut buf = Vec::with_capacity(16);
    for &i in cols {
        encode_key_value(&row[i], &mut buf);
    }
    (stable_hash(&buf) % n as u64) as u32
}

/// The shard of an encoded key (for deletes by key).
pub(crate) fn shard_for_key(def: &TableDef, key: &Key, n: u32) -> Result<u32> {
    let k = key.as_bytes();
    if def.primary_key.is_empty() {
        if k.len() != 13 || k[0] != 0x02 {
            return Err(StorageError::InvalidDefinition(
                "malformed row id key".into(),
            ));
        }
        let s = u32::from_be_bytes([k[1], k[2], k[3], k[4]]);
        return Ok(s % n);
    }
    if def.distribution_key.is_empty() || def.distribution_key == def.primary_key {
        return Ok((stable_hash(k) % n as u64) as u32);
    }
    let types: Vec<ColumnType> = def.primary_key.iter().map(|&i| def.columns[i].ty).collect();
    let parts = split_key(k, &types)
        .ok_or_else(|| StorageError::InvalidDefinition("malformed key".into()))?;
    let mut buf = Vec::new();
    for &d in &def.distribution_key {
        if let Some(pos) = def.primary_key.iter().position(|&p| p == d) {
            buf.extend_from_slice(parts[pos]);
        }
    }
    Ok((stable_hash(&buf) % n as u64) as u32)
}

/// Splits an encoded key into the byte ranges of its columns.
fn split_key<'a>(k: &'a [u8], types: &[ColumnType]) -> Option<Vec<&'a [u8]>> {
    let mut out = Vec::with_capacity(types.len());
    let mut pos = 0;
    for ty in types {
        let start = pos;
        match *k.get(pos)? {
            0x00 => pos += 1,
            0x01 => {
                pos += 1;
                let width = match ty {
                    ColumnType::Boolean => Some(1),
                    ColumnType::SmallInt => Some(2),
                    ColumnType::Int | ColumnType::Date | ColumnType::Real => Some(4),
                    ColumnType::BigInt
                    | ColumnType::Timestamp
                    | ColumnType::TimestampTz
                    | ColumnType::Time
                    | ColumnType::Double => Some(8),
                    ColumnType::Decimal(..)
                    | ColumnType::Numeric
                    | ColumnType::Uuid
                    | ColumnType::Interval => Some(16),
                    ColumnType::Text
                    | ColumnType::Bytea
                    | ColumnType::Varchar(_)
                    | ColumnType::Char(_)
                    | ColumnType::Json
                    | ColumnType::Jsonb
                    | ColumnType::Array(_) => None,
                };
                match width {
                    Some(w) => pos += w,
                    None => loop {
                        let c = *k.get(pos)?;
                        let d = *k.get(pos + 1)?;
                        if c == 0 && d == 0x01 {
                            pos += 2;
                            break;
                        }
                        pos += if c == 0 { 2 } else { 1 };
                    },
                }
            }
            _ => return None,
        }
        out.push(k.get(start..pos)?);
    }
    Some(out)
}

impl Table {
    pub fn def(&self) -> &Arc<TableDef> {
        &self.def
    }

    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    pub fn shard_count(&self) -> u32 {
        self.group.shards.len() as u32
    }

    pub(crate) fn engine(&self) -> Result<Arc<EngineInner>> {
        let e = self.engine.upgrade().ok_or(StorageError::Closed)?;
        e.check_open()?;
        Ok(e)
    }

    pub(crate) fn shards(&self) -> &[Arc<Shard>] {
        &self.group.shards
    }

    /// Encodes a primary key given as values in primary-key order.
    pub fn key_of(&self, pk: &[Value]) -> Result<Key> {
        if pk.len() != self.def.primary_key.len() || pk.is_empty() {
            return Err(StorageError::InvalidDefinition(format!(
                "table \"{}\" has a primary key of {} columns, got {} values",
                self.def.name,
                self.def.primary_key.len(),
                pk.len()
            )));
        }
        Ok(codec::encode_key(&pk.iter().collect::<Vec<_>>()))
    }

    pub(crate) fn shard_of_pk(&self, pk: &[Value]) -> u32 {
        let n = self.shard_count();
        let mut row = vec![Value::Null; self.def.columns.len()];
        for (v, &i) in pk.iter().zip(&self.def.primary_key) {
            row[i] = v.clone();
        }
        shard_for_row(&self.def, &row, 0, n)
    }

    /// Writes atomically: every operation or none; durable on return.
    pub fn write(&self, ops: Vec<WriteOp>) -> Result<WriteSummary> {
        let engine = self.engine()?;
        let routed = self
            .route(&engine, ops)?
            .into_iter()
            .map(|(s, ops)| {
                let shard = Arc::clone(&self.group.shards[s as usize]);
                ((self.group.info.id, s), (shard, ops))
            })
            .collect();
        engine.commit_routed(routed)
    }

    pub(crate) fn group_id(&self) -> TableGroupId {
        self.group.info.id
    }

    /// Splits `ops` by the shard they belong to, checking each row.
    pub(crate) fn route(
        &self,
        engine: &EngineInner,
        ops: Vec<WriteOp>,
    ) -> Result<BTreeMap<u32, Vec<ShardOp>>> {
        let n = self.shard_count();
        let no_pk = self.def.primary_key.is_empty();
        let inserts = ops
            .iter()
            .filter(|o| matches!(o, WriteOp::Insert { .. }))
            .count() as u64;
        let mut rowid = if no_pk && inserts > 0 {
            engine.alloc_rowids(inserts)?
        } else {
            0
        };
        let mut per_shard: BTreeMap<u32, Vec<ShardOp>> = BTreeMap::new();
        for op in ops {
            match op {
                WriteOp::Insert { row, on_conflict } => {
                    codec::check_row(&self.def, &row)?;
                    let s = shard_for_row(&self.def, &row, rowid, n);
                    let key = key_for_row_in_shard(&self.def, &row, rowid, s);
                    rowid += 1;
                    per_shard.entry(s).or_default().push(ShardOp {
                        table: self.def.clone(),
                        key,
                        kind: ShardOpKind::Insert { row, on_conflict },
                    });
                }
                WriteOp::Put { row, rowid } => {
                    if !no_pk {
                        return Err(StorageError::Unsupported(format!(
                            "a write by row id into table \"{}\", which has a primary key",
                            self.def.name
                        )));
                    }
                    codec::check_row(&self.def, &row)?;
                    let s = shard_for_row(&self.def, &row, rowid, n);
                    let key = key_for_row_in_shard(&self.def, &row, rowid, s);
                    per_shard.entry(s).or_default().push(ShardOp {
                        table: self.def.clone(),
                        key,
                        kind: ShardOpKind::Insert {
                            row,
                            on_conflict: OnConflict::Replace,
                        },
                    });
                }
                WriteOp::Delete { key } => {
                    let s = shard_for_key(&self.def, &key, n)?;
                    per_shard.entry(s).or_default().push(ShardOp {
                        table: self.def.clone(),
                        key,
                        kind: ShardOpKind::Delete,
                    });
                }
            }
        }
        Ok(per_shard)
    }

    /// The latest committed row with this primary key.
    pub fn get(&self, pk: &[Value]) -> Result<Option<Row>> {
        let key = self.key_of(pk)?;
        let shard = &self.group.shards[self.shard_of_pk(pk) as usize];
        let Some(t) = shard.tablets(self.def.id) else {
            return Err(StorageError::TableNotFound(self.def.name.clone()));
        };
        let at = shard.visible_lsn();
        let width = self.def.columns.len();
        if let Some(rl) = &t.row {
            let v = rl.read().clone();
            return match v.get(&key.0, at)? {
                Some(b) => codec::decode_row_bytes(&b, width, "row tablet").map(Some),
                None => Ok(None),
            };
        }
        // A column tablet holds only the newest version, which may not be
        // published yet: read it at a cut.
        Ok(self.get_consistent(&[key])?.pop().flatten())
    }

    /// Rows of several primary keys, read at one consistent cut.
    pub fn multi_get(&self, pks: &[Vec<Value>]) -> Result<Vec<Option<Row>>> {
        if pks.len() == 1 {
            return pks.iter().map(|pk| self.get(pk)).collect();
        }
        let keys: Vec<Key> = pks
            .iter()
            .map(|pk| self.key_of(pk))
            .collect::<Result<_>>()?;
        self.get_consistent(&keys)
    }

    /// A consistent snapshot: one LSN per shard, taken now under the
    /// publish gate, so a multi-shard commit is in it on all shards or none.
    pub fn snapshot(&self) -> TableSnapshot {
        match self.engine.upgrade() {
            Some(e) => {
                let _gate = e.publish_gate.read();
                TableSnapshot::take(self)
            }
            None => TableSnapshot::take(self),
        }
    }

    /// The visible LSN of every shard, read at one instant (under the
    /// publish gate): a consistent cut, as a snapshot's, without the
    /// snapshot's file lists.
    pub fn visible_lsns(&self) -> Vec<Lsn> {
        let read = || self.group.shards.iter().map(|s| s.visible_lsn()).collect();
        match self.engine.upgrade() {
            Some(e) => {
                let _gate = e.publish_gate.read();
                read()
            }
            None => read(),
        }
    }

    /// Starts a bulk load (COPY, INSERT ... SELECT).
    pub fn bulk_loader(self: &Arc<Self>) -> BulkLoader {
        BulkLoader::new(self.clone())
    }

    pub fn approx_row_count(&self) -> u64 {
        self.group
            .shards
            .iter()
            .filter_map(|s| s.tablets(self.def.id))
            .map(|t| {
                if let Some(cl) = &t.col {
                    let v = cl.read().clone();
                    v.memtable_rows()
                        + v.files
                            .iter()
                            .map(|f| f.meta.rows - f.deletes.lock().len())
                            .sum::<u64>()
                } else if let Some(rl) = &t.row {
                    rl.read().approx_entries()
                } else {
                    0
                }
            })
            .sum()
    }

    /// The visible LSN of every shard now.
    pub fn lsns(&self) -> Vec<Lsn> {
        self.group.shards.iter().map(|s| s.visible_lsn()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_key_finds_column_boundaries() {
        let k = codec::encode_key(&[
            &Value::Text("a\0b".into()),
            &Value::BigInt(7),
            &Value::Null,
            &Value::Int(-1),
        ]);
        let parts = split_key(
            &k.0,
            &[
                ColumnType::Text,
                ColumnType::BigInt,
                ColumnType::Int,
                ColumnType::Int,
            ],
        )
        .unwrap();
        assert_eq!(parts.len(), 4);
        let mut again = Vec::new();
        encode_key_value(&Value::BigInt(7), &mut again);
        assert_eq!(parts[1], again.as_slice());
        assert_eq!(parts[2], &[0u8][..]);
    }
}
