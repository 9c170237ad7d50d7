//! One shard of a table group: its WAL, the tablets of every table in the
//! group, group commit, flush, compaction and recovery.
//!
//! # Write path and its fsync order
//! 1. A writer queues its operations and takes the commit lock; whoever
//!    holds the lock is the *leader* and drains the whole queue (group
//!    commit).
//! 2. The leader resolves each write against the latest state (conflict
//!    checks, ON CONFLICT actions) into logged operations; a write that
//!    fails is answered with its error and logs nothing.
//! 3. It assigns consecutive LSNs and appends all records with one write
//!    and one `fdatasync` ([`Wal::append`]).
//! 4. It applies the records to the memtables of every tablet, in LSN order,
//!    then publishes the visible LSN and answers the writers.
//!
//! So a write is acknowledged only after its record is durable (never
//! lost), and a record is either replayed whole or cut off whole as a torn
//! tail (never partly visible).
//!
//! # Flush and compaction
//! Both hold the commit lock only for a swap (`shard/background.rs`): a flush
//! freezes the memtables under it, writes their files without it, and
//! takes it again to install the files, replace the manifest atomically
//! (tmp + fsync + rename + dir fsync), delete WAL segments at or below the
//! flushed LSN, then superseded files. Compaction merges without it and
//! installs under it.
//!
//! # Recovery (`shard/recovery.rs`)
//! Load the manifest, open its files and delete maps, replay WAL records
//! above `flushed_lsn` (records of a cross-shard transaction only if the
//! commit log says it committed), delete files nothing references.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering as AtOrd};
use std::sync::Arc;

use eddy_common::{FileId, Lsn, Row, ShardId, TableDef, TableGroupId, TableId, TxnId};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::codec::{decode_row_bytes, encode_row, put_varint, Key, Reader};
use crate::column_tablet::{column_file_name, ColumnFile, ColumnFileMeta, ColumnVersion, Columns};
use crate::delete_map::DeleteMap;
use crate::error::{Result, StorageError};
use crate::filestore::FileStore;
use crate::index::{has_null, index_key, ShardIndex};
use crate::index_write::{check_unique_probes, GroupOverlay, UniqueProbe};
use crate::manifest::{self, Manifest, TabletFiles};
use crate::recent_writes::RecentWrites;
use crate::row_tablet::{row_file_name, RowFile, RowFileMeta, RowVersion};
use crate::wal::{SyncHandle, Wal};

mod background;
mod recovery;
pub use background::{BackgroundHook, BackgroundStage};
pub(crate) use recovery::UnreplayedShard;

/// What happens when an inserted key already exists.
#[derive(Clone)]
pub enum OnConflict {
    /// Fail the whole write with SQLSTATE 23505.
    Error,
    /// Keep the existing row; the insert counts as ignored.
    DoNothing,
    /// Replace the existing row (upsert).
    Replace,
    /// Compute the new row from (existing, proposed); `None` keeps the old row.
    Update(ConflictUpdateFn),
}

pub type ConflictUpdateFn =
    Arc<dyn Fn(&Row, &Row) -> std::result::Result<Option<Row>, ConflictUpdateError> + Send + Sync>;

/// Why a conflict-update callback refused a row: the SQLSTATE of the
/// caller's error (storage does not interpret expressions, so it cannot
/// name one itself) and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictUpdateError {
    pub sqlstate: &'static str,
    pub message: String,
}

impl std::fmt::Debug for OnConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OnConflict::Error => "Error",
            OnConflict::DoNothing => "DoNothing",
            OnConflict::Replace => "Replace",
            OnConflict::Update(_) => "Update",
        })
    }
}

/// Counts of what a write did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteSummary {
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
    pub ignored: u64,
}

impl WriteSummary {
    fn add(&mut self, o: &WriteSummary) {
        self.inserted += o.inserted;
        self.updated += o.updated;
        self.deleted += o.deleted;
        self.ignored += o.ignored;
    }
}

/// An operation routed to this shard, before conflict resolution.
pub struct ShardOp {
    pub table: Arc<TableDef>,
    pub key: Key,
    pub kind: ShardOpKind,
}

pub enum ShardOpKind {
    Insert { row: Row, on_conflict: OnConflict },
    Delete,
}

/// An operation as logged: a full new row or a delete.
#[derive(Clone)]
struct LoggedOp {
    table: TableId,
    key: Vec<u8>,
    row: Option<(Row, Arc<[u8]>)>,
}

/// Files a bulk load adds to one tablet.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BulkFiles {
    pub table: TableId,
    pub row: Vec<RowFileMeta>,
    pub col: Vec<ColumnFileMeta>,
}

const REC_WRITE: u8 = 1;
const REC_BULK: u8 = 2;

/// Tablets of one table in this shard: its row and/or column tablet and
/// its secondary indexes (a tablet group: one WAL record updates all).
pub struct Tablets {
    pub def: RwLock<Arc<TableDef>>,
    pub row: Option<RwLock<Arc<RowVersion>>>,
    pub col: Option<RwLock<Arc<ColumnVersion>>>,
    /// One per `def.indexes`, in that order.
    pub indexes: RwLock<Arc<Vec<Arc<ShardIndex>>>>,
}

impl Tablets {
    fn new(def: Arc<TableDef>) -> Tablets {
        Tablets {
            row: def
                .orientation
                .has_row()
                .then(|| RwLock::new(Arc::new(RowVersion::default()))),
            col: def
                .orientation
                .has_column()
                .then(|| RwLock::new(Arc::new(ColumnVersion::new(columns_of(&def))))),
            indexes: RwLock::new(Arc::new(
                def.indexes
                    .iter()
                    .map(|d| Arc::new(ShardIndex::new(d.clone())))
                    .collect(),
            )),
            def: RwLock::new(def),
        }
    }

    fn row_version(&self) -> Option<Arc<RowVersion>> {
        self.row.as_ref().map(|r| r.read().clone())
    }

    fn col_version(&self) -> Option<Arc<ColumnVersion>> {
        self.col.as_ref().map(|c| c.read().clone())
    }

    /// The latest row of `key` (leader only: sees everything applied).
    pub(crate) fn current(&self, key: &[u8]) -> Result<Option<Row>> {
        let width = self.def.read().columns.len();
        if let Some(rv) = self.row_version() {
            return match rv.get(key, Lsn::MAX)? {
                Some(bytes) => decode_row_bytes(&bytes, width, "row tablet").map(Some),
                None => Ok(None),
            };
        }
        match self.col_version() {
            Some(cv) => cv.get(key),
            None => Ok(None),
        }
    }
}

pub fn columns_of(def: &TableDef) -> Columns {
    def.columns.iter().map(|c| (c.name.clone(), c.ty)).collect()
}

struct Pending {
    ops: Vec<ShardOp>,
    reply: std::sync::mpsc::SyncSender<Result<WriteSummary>>,
}

/// State only the commit leader touches.
pub struct CommitState {
    wal: Wal,
    next_lsn: u64,
    manifest: Manifest,
    next_file_id: u64,
}

pub struct Shard {
    pub group: TableGroupId,
    pub id: ShardId,
    /// Directory relative to the file store root, e.g. `tg1/s0`.
    pub rel_dir: String,
    abs_dir: PathBuf,
    store: Arc<FileStore>,
    visible: AtomicU64,
    tablets: RwLock<HashMap<TableId, Arc<Tablets>>>,
    commit: Mutex<CommitState>,
    queue: Mutex<Vec<Pending>>,
    /// One flush at a time (taken before the commit lock, never under it).
    flush_lock: Mutex<()>,
    /// One compaction at a time (idem).
    compact_lock: Mutex<()>,
    /// Test hook run at points of a flush or compaction.
    hook: Mutex<Option<BackgroundHook>>,
    poisoned: Mutex<Option<String>>,
    /// Latest committed write per recently written key (conflict checks).
    recent: Mutex<RecentWrites>,
}

/// The answer of a cross-shard prepare: what to apply once committed.
pub struct Prepared {
    logged: Vec<LoggedOp>,
    summary: WriteSummary,
}

impl Shard {
    pub fn visible_lsn(&self) -> Lsn {
        Lsn(self.visible.load(AtOrd::Acquire))
    }

    /// An LSN at or above that of the latest committed write of `key`
    /// (see [`RecentWrites`]).
    pub fn last_write(&self, table: TableId, key: &[u8]) -> Lsn {
        self.recent.lock().last_write(table, key)
    }

    pub fn tablets(&self, table: TableId) -> Option<Arc<Tablets>> {
        self.tablets.read().get(&table).cloned()
    }

    fn check_poisoned(&self) -> Result<()> {
        match &*self.poisoned.lock() {
            Some(why) => Err(StorageError::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn poison(&self, e: &StorageError) {
        tracing::error!(shard = %self.rel_dir, error = %e, "shard failed; refusing writes until restart");
        *self.poisoned.lock() = Some(e.to_string());
    }

    // ------------------------------------------------------------ writes

    /// Writes `ops` atomically and durably (group commit).
    pub fn write(&self, ops: Vec<ShardOp>) -> Result<WriteSummary> {
        self.check_poisoned()?;
        // waits for the commit lock and the log's fsync: another execution
        // context gets the CPU meanwhile
        eddy_sched::block_in_place(|| self.write_blocking(ops))
    }

    fn write_blocking(&self, ops: Vec<ShardOp>) -> Result<WriteSummary> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.queue.lock().push(Pending { ops, reply: tx });
        {
            let mut st = self.commit.lock();
            // An earlier leader may have committed this write while we
            // waited: then leave the queue to a writer still waiting, so
            // that groups stay large.
            if let Ok(r) = rx.try_recv() {
                return r;
            }
            let batch = std::mem::take(&mut *self.queue.lock());
            if !batch.is_empty() {
                self.commit_group(&mut st, batch);
            }
        }
        rx.recv().unwrap_or(Err(StorageError::Closed))
    }

    fn commit_group(&self, st: &mut CommitState, batch: Vec<Pending>) {
        let mut overlay = GroupOverlay::default();
        let mut accepted: Vec<(Pending, Vec<LoggedOp>, WriteSummary, Lsn)> = Vec::new();
        let mut records: Vec<(Lsn, Vec<u8>)> = Vec::new();
        for p in batch {
            if let Err(e) = self.check_poisoned() {
                let _ = p.reply.send(Err(e));
                continue;
            }
            let mut local = overlay.clone();
            match self.resolve(&p.ops, &mut local) {
                Ok((logged, summary)) => {
                    overlay = local;
                    if logged.is_empty() {
                        let _ = p.reply.send(Ok(summary));
                        continue;
                    }
                    let lsn = Lsn(st.next_lsn);
                    st.next_lsn += 1;
                    records.push((lsn, encode_write(0, &logged)));
                    accepted.push((p, logged, summary, lsn));
                }
                Err(e) => {
                    let _ = p.reply.send(Err(e));
                }
            }
        }
        if records.is_empty() {
            return;
        }
        let refs: Vec<(Lsn, &[u8])> = records.iter().map(|(l, b)| (*l, b.as_slice())).collect();
        if let Err(e) = st.wal.append(&refs) {
            self.poison(&e);
            for (p, ..) in accepted {
                let _ = p.reply.send(Err(StorageError::Poisoned(e.to_string())));
            }
            return;
        }
        for (p, logged, summary, lsn) in accepted {
            let r = self.apply(&logged, lsn).map(|_| summary);
            if let Err(e) = &r {
                self.poison(e);
            }
            self.visible.store(lsn.0, AtOrd::Release);
            let _ = p.reply.send(r);
        }
    }

    /// Turns requested operations into logged ones against the latest state
    /// plus `overlay` (effects of earlier writes of the same group).
    ///
    /// UNIQUE indexes are checked once every operation of the write is
    /// resolved (a write that swaps two rows' unique values is fine), against
    /// the latest state and the earlier writes of the group.
    fn resolve(
        &self,
        ops: &[ShardOp],
        overlay: &mut GroupOverlay,
    ) -> Result<(Vec<LoggedOp>, WriteSummary)> {
        let mut out = Vec::with_capacity(ops.len());
        let mut sum = WriteSummary::default();
        // (table, index, index key, a row that holds it) to check at the end
        let mut touched: Vec<UniqueProbe> = Vec::new();
        for op in ops {
            let tid = op.table.id;
            let tablets = self
                .tablets(tid)
                .ok_or_else(|| StorageError::TableNotFound(op.table.name.clone()))?;
            let indexes = tablets.index_list();
            let ok = (tid, op.key.0.clone());
            let existing = match overlay.rows.get(&ok) {
                Some(v) => v.clone(),
                None => tablets.current(&op.key.0)?,
            };
            match &op.kind {
                ShardOpKind::Delete => {
                    if existing.is_some() {
                        sum.deleted += 1;
                        overlay.set(tid, op.key.0.clone(), &indexes, existing.as_ref(), None);
                        out.push(LoggedOp {
                            table: tid,
                            key: op.key.0.clone(),
                            row: None,
                        });
                    }
                }
                ShardOpKind::Insert { row, on_conflict } => {
                    let new_row = match (&existing, on_conflict) {
                        (None, _) => {
                            sum.inserted += 1;
                            Some(row.clone())
                        }
                        (Some(_), OnConflict::Error) => {
                            return Err(StorageError::DuplicateKey {
                                table: op.table.name.clone(),
                                key: crate::codec::describe_values(&op.table, row),
                            })
                        }
                        (Some(_), OnConflict::DoNothing) => {
                            sum.ignored += 1;
                            None
                        }
                        (Some(_), OnConflict::Replace) => {
                            sum.updated += 1;
                            Some(row.clone())
                        }
                        (Some(old), OnConflict::Update(f)) => {
                            match f(old, row).map_err(StorageError::ConflictUpdate)? {
                                Some(new) => {
                                    crate::codec::check_row(&op.table, &new)?;
                                    let new_key = crate::engine::key_for_row(&op.table, &new, 0);
                                    if new_key.0 != op.key.0 {
                                        return Err(StorageError::ConflictUpdate(
                                            ConflictUpdateError {
                                                sqlstate: "0A000",
                                                message: "ON CONFLICT DO UPDATE cannot change \
                                                          the primary key"
                                                    .into(),
                                            },
                                        ));
                                    }
                                    sum.updated += 1;
                                    Some(new)
                                }
                                None => {
                                    sum.ignored += 1;
                                    None
                                }
                            }
                        }
                    };
                    if let Some(r) = new_row {
                        let mut bytes = Vec::with_capacity(64);
                        encode_row(&r, &mut bytes);
                        for ix in indexes.iter().filter(|ix| ix.def.unique) {
                            let cols = &ix.def.columns;
                            if has_null(cols, &r) {
                                continue;
                            }
                            if let Some(k) = index_key(cols, &r) {
                                touched.push((op.table.clone(), Arc::clone(ix), k, r.clone()));
                            }
                        }
                        overlay.set(
                            tid,
                            op.key.0.clone(),
                            &indexes,
                            existing.as_ref(),
                            Some(r.clone()),
                        );
                        out.push(LoggedOp {
                            table: tid,
                            key: op.key.0.clone(),
                            row: Some((r, Arc::from(bytes))),
                        });
                    }
                }
            }
        }
        check_unique_probes(overlay, touched)?;
        Ok((out, sum))
    }

    /// Applies logged operations to every tablet (leader or recovery only).
    fn apply(&self, ops: &[LoggedOp], lsn: Lsn) -> Result<()> {
        {
            let mut recent = self.recent.lock();
            for op in ops {
                recent.record(op.table, &op.key, lsn);
            }
        }
        let tablets = self.tablets.read();
        for op in ops {
            let Some(t) = tablets.get(&op.table) else {
                continue;
            };
            let indexes = t.index_list();
            if !indexes.is_empty() {
                // before the tablets change: the old version's keys go
                let old = t.current(&op.key)?;
                let new = op.row.as_ref().map(|r| r.0.as_slice());
                for ix in indexes.iter() {
                    ix.apply_change(&op.key, old.as_deref(), new, lsn);
                }
            }
            if let Some(rv) = t.row_version() {
                rv.memtable
                    .insert(op.key.clone(), lsn, op.row.as_ref().map(|r| r.1.clone()));
            }
            if let Some(cv) = t.col_version() {
                match &op.row {
                    Some((row, _)) => cv.put(op.key.clone(), row.clone(), lsn)?,
                    None => cv.delete(&op.key, lsn)?,
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------ cross-shard (2PC)

    /// Phase one of a cross-shard write: holds the commit lock, resolves and
    /// writes a prepare record. The record is durable only once the
    /// returned handle is synced (`None`: the log does not sync), which the
    /// caller does (for several shards at once) before it logs the commit;
    /// then it calls [`Shard::finish`] (or applies and publishes) with the
    /// guard.
    #[allow(clippy::type_complexity)]
    pub fn prepare(
        &self,
        ops: &[ShardOp],
        txn: TxnId,
    ) -> Result<(
        parking_lot::MutexGuard<'_, CommitState>,
        Prepared,
        Lsn,
        Option<SyncHandle>,
    )> {
        self.check_poisoned()?;
        let mut st = self.commit.lock();
        // Drain queued single-shard writers first so they are not starved.
        let batch = std::mem::take(&mut *self.queue.lock());
        if !batch.is_empty() {
            self.commit_group(&mut st, batch);
        }
        let (logged, summary) = self.resolve(ops, &mut GroupOverlay::default())?;
        let lsn = Lsn(st.next_lsn);
        st.next_lsn += 1;
        let rec = encode_write(txn.0, &logged);
        let handle = st
            .wal
            .write(&[(lsn, &rec)])
            .and_then(|()| st.wal.sync_handle());
        match handle {
            Ok(h) => Ok((st, Prepared { logged, summary }, lsn, h)),
            Err(e) => {
                self.poison(&e);
                Err(e)
            }
        }
    }

    /// Phase two, first half: applies a committed prepared write to the
    /// memtables. Nothing is visible until [`Shard::publish`]; the caller
    /// still holds the commit lock.
    pub(crate) fn apply_prepared(&self, prepared: Prepared, lsn: Lsn) -> Result<WriteSummary> {
        let r = self.apply(&prepared.logged, lsn);
        if let Err(e) = &r {
            self.poison(e);
        }
        r.map(|_| prepared.summary)
    }

    /// Phase two, second half: makes everything up to `lsn` visible.
    pub(crate) fn publish(&self, lsn: Lsn) {
        self.visible.store(lsn.0, AtOrd::Release);
    }

    /// Phase two: applies a prepared write once the transaction committed.
    pub fn finish(
        &self,
        _guard: parking_lot::MutexGuard<'_, CommitState>,
        prepared: Prepared,
        lsn: Lsn,
        committed: bool,
    ) -> Result<WriteSummary> {
        if !committed {
            // The prepare record stays in the WAL but is skipped at replay:
            // its transaction id never reaches the commit log.
            return Ok(WriteSummary::default());
        }
        let r = self.apply(&prepared.logged, lsn);
        if let Err(e) = &r {
            self.poison(e);
        }
        self.visible.store(lsn.0, AtOrd::Release);
        r.map(|_| prepared.summary)
    }

    // ------------------------------------------------------- bulk load

    pub fn alloc_file_id(&self) -> FileId {
        let mut st = self.commit.lock();
        let id = st.next_file_id;
        st.next_file_id += 1;
        FileId(id)
    }

    pub fn store(&self) -> &Arc<FileStore> {
        &self.store
    }

    /// Commits a bulk load into this shard: one WAL record naming the files
    /// (already durable), then the files become visible at its LSN.
    /// With `txn`, returns holding the lock for the cross-shard protocol.
    pub fn bulk_prepare(
        &self,
        files: &BulkFiles,
        txn: TxnId,
    ) -> Result<(parking_lot::MutexGuard<'_, CommitState>, Lsn)> {
        self.check_poisoned()?;
        let mut st = self.commit.lock();
        let lsn = self.bulk_log(&mut st, files, txn)?;
        Ok((st, lsn))
    }

    /// The commit lock, for a participant that logs only bulk records.
    pub(crate) fn lock_commit(&self) -> Result<parking_lot::MutexGuard<'_, CommitState>> {
        self.check_poisoned()?;
        Ok(self.commit.lock())
    }

    /// Logs (durably) the record naming a bulk load's files, tagged with
    /// `txn`, under the commit lock the caller holds.
    pub(crate) fn bulk_log(
        &self,
        st: &mut CommitState,
        files: &BulkFiles,
        txn: TxnId,
    ) -> Result<Lsn> {
        let lsn = Lsn(st.next_lsn);
        st.next_lsn += 1;
        let json = serde_json::to_vec(files)
            .map_err(|e| StorageError::InvalidDefinition(format!("bulk files: {e}")))?;
        let mut rec = vec![REC_BULK];
        rec.extend_from_slice(&txn.0.to_le_bytes());
        put_varint(&mut rec, json.len() as u64);
        rec.extend_from_slice(&json);
        if let Err(e) = st.wal.append(&[(lsn, &rec)]) {
            self.poison(&e);
            return Err(e);
        }
        Ok(lsn)
    }

    /// Installs committed bulk files. With `publish` false the caller makes
    /// them visible later with [`Shard::publish`] (multi-shard commits),
    /// still holding `guard` until then.
    pub fn bulk_finish(
        &self,
        guard: &mut parking_lot::MutexGuard<'_, CommitState>,
        files: &BulkFiles,
        lsn: Lsn,
        publish: bool,
    ) -> Result<()> {
        // A row tablet's memtable holds versions older than the bulk files;
        // flush it first so "newest file wins" stays true.
        if let Some(t) = self.tablets(files.table) {
            if let Some(rv) = t.row_version() {
                // (frozen memtables too: a background flush in flight)
                if !rv.memtable.is_empty() || !rv.frozen.is_empty() {
                    self.flush_locked(guard)?;
                }
            }
        }
        let r = self.install_bulk(files, lsn);
        if let Err(e) = &r {
            self.poison(e);
        }
        if publish {
            self.visible.store(lsn.0, AtOrd::Release);
        }
        r
    }

    fn install_bulk(&self, files: &BulkFiles, lsn: Lsn) -> Result<()> {
        self.recent.lock().record_all(lsn);
        let Some(t) = self.tablets(files.table) else {
            return Ok(());
        };
        if let Some(rl) = &t.row {
            let mut v = (**rl.read()).clone();
            for m in &files.row {
                let mut m = m.clone();
                m.min_lsn = lsn;
                m.max_lsn = lsn;
                m.bulk = true;
                v.l0.insert(0, Arc::new(RowFile::open(&self.store, &self.rel_dir, m)?));
            }
            *rl.write() = Arc::new(v);
        }
        if let Some(cl) = &t.col {
            let mut v = (**cl.read()).clone();
            for m in &files.col {
                let mut m = m.clone();
                m.min_lsn = lsn;
                m.max_lsn = lsn;
                let f = ColumnFile::open(&self.store, &self.rel_dir, m, Default::default())?;
                v.supersede_keys_of(&f, lsn)?;
                v.files.push(Arc::new(f));
            }
            *cl.write() = Arc::new(v);
        }
        // Bulk files name no old versions: rebuild (older snapshots scan).
        if !t.index_list().is_empty() {
            t.rebuild_indexes(lsn)?;
        }
        Ok(())
    }

    // ------------------------------------------------------- DDL

    pub fn add_table(&self, def: Arc<TableDef>) {
        let _st = self.commit.lock();
        self.tablets
            .write()
            .insert(def.id, Arc::new(Tablets::new(def)));
    }

    /// Removes a table's tablets and files (drop or truncate).
    pub fn remove_table(&self, id: TableId) -> Result<()> {
        let mut st = self.commit.lock();
        self.tablets.write().remove(&id);
        let old = st.manifest.tables.remove(&id.0);
        if let Some(files) = old {
            self.write_manifest(&mut st)?;
            for f in files.row_l0.iter().chain(&files.row_l1) {
                self.store
                    .delete(&format!("{}/{}", self.rel_dir, row_file_name(f.id)))?;
            }
            for f in &files.col {
                self.store
                    .delete(&format!("{}/{}", self.rel_dir, column_file_name(f.id)))?;
            }
        }
        Ok(())
    }

    /// Installs a new definition (ADD COLUMN): the column memtable is
    /// flushed first so that every batch in it has one schema.
    pub fn alter_table(&self, def: Arc<TableDef>) -> Result<()> {
        let mut st = self.commit.lock();
        self.flush_locked(&mut st)?;
        if let Some(t) = self.tablets(def.id) {
            if let Some(cl) = &t.col {
                let old = cl.read().clone();
                *cl.write() = Arc::new(ColumnVersion {
                    memtable: Arc::new(crate::column_tablet::ColMemtable::new(columns_of(&def))),
                    frozen: old.frozen.clone(),
                    files: old.files.clone(),
                });
            }
            let old = t.index_list();
            let mut next = Vec::with_capacity(def.indexes.len());
            let mut fresh = Vec::new();
            for d in &def.indexes {
                match old.iter().find(|ix| ix.def == *d) {
                    Some(ix) => next.push(Arc::clone(ix)),
                    None => {
                        let ix = Arc::new(ShardIndex::new(d.clone()));
                        fresh.push(Arc::clone(&ix));
                        next.push(ix);
                    }
                }
            }
            *t.def.write() = def;
            // Built under the commit lock: no write of this shard is
            // applied meanwhile, so the index starts exactly at the state.
            // Snapshots older than the build may need versions the build
            // never saw: they scan instead.
            for ix in &fresh {
                ix.clear(self.visible_lsn());
            }
            t.build_indexes(&fresh, Lsn::MAX)?;
            *t.indexes.write() = Arc::new(next);
        }
        Ok(())
    }
}

fn encode_write(txn: u64, ops: &[LoggedOp]) -> Vec<u8> {
    let mut rec = Vec::with_capacity(32 + ops.len() * 64);
    rec.push(REC_WRITE);
    rec.extend_from_slice(&txn.to_le_bytes());
    put_varint(&mut rec, ops.len() as u64);
    for op in ops {
        rec.extend_from_slice(&op.table.0.to_le_bytes());
        rec.push(op.row.is_some() as u8);
        put_varint(&mut rec, op.key.len() as u64);
        rec.extend_from_slice(&op.key);
        if let Some((_, bytes)) = &op.row {
            put_varint(&mut rec, bytes.len() as u64);
            rec.extend_from_slice(bytes);
        }
    }
    rec
}

impl WriteSummary {
    pub fn merge(parts: &[WriteSummary]) -> WriteSummary {
        let mut s = WriteSummary::default();
        for p in parts {
            s.add(p);
        }
        s
    }
}
