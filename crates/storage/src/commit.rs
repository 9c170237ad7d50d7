//! Committing a transaction: every write of it, over any number of tables
//! and shards, durable and visible at once; and snapshots that see such a
//! commit whole or not at all.
//!
//! * One shard: the writes are one WAL record through the shard's group
//!   commit (one fsync shared with concurrent writers).
//! * Several shards: two-phase commit. Commit locks are taken in
//!   (table group, shard) order, so two commits never wait for each other
//!   in a cycle; each shard logs a prepare record tagged with the
//!   transaction id; a commit record goes to the commit log, and every
//!   record is synced in one round (or, with catalog changes, prepares
//!   first and the commit record second: see [`CommitRecord`]); the writes
//!   are applied to the memtables (still invisible: above the visible
//!   LSN), and then all visible LSNs move forward together under the
//!   publish gate.
//! * Bulk files with row writes (an append-only materialized view's rows
//!   and its checkpoint row): one two-round transaction whose participants
//!   are the loaded table's shards, each logging a bulk record naming its
//!   files (already durable), and the other tables' shards, each logging a
//!   prepare record; the commit-log record of its id decides all of them
//!   ([`crate::BulkLoader::commit_with`]).
//! * A snapshot over several shards reads their visible LSNs under the
//!   shared side of the publish gate ([`Engine::snapshot_tables`]).
//!
//! See `docs/design/transactions.md`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use eddy_common::{Lsn, Row, ShardId, TableGroupId, TxnId};

use crate::codec::{self, Key, Reader};
use crate::engine::{Engine, EngineInner, Table, WriteOp};
use crate::error::{Result, StorageError};
use crate::locks::LockManager;
use crate::shard::{
    BulkFiles, CommitState, Prepared, Shard, ShardOp, UnreplayedShard, WriteSummary,
};
use crate::snapshot::TableSnapshot;
use crate::wal::{SyncHandle, WalEntry};
use parking_lot::MutexGuard;

/// Where a participant of a one-round commit logged its prepare record.
pub(crate) type Participant = (TableGroupId, ShardId, Lsn);

/// A record of the commit log (`txnlog/`).
///
/// * **Two-round** (8 bytes: the transaction id): written after every
///   prepare record was durable; the record alone is the commit point.
/// * **One-round** (`'C'`, id, count, then group, shard and LSN of each
///   prepare record): written after the prepare records were *written*,
///   then the shards' WALs and the commit log are synced together, one
///   fdatasync round instead of two. The transaction committed iff the
///   record is durable *and* every prepare record it names is
///   ([`committed_at_open`]); the client hears COMMIT only after all of
///   them are, so an acknowledged commit always qualifies, and a crash in
///   between leaves the transaction out on every shard, never on some.
///   Catalog changes never ride on a one-round record (they are decided
///   before any shard is read).
/// * Records of very old logs carried nothing: the id was the record's LSN.
pub(crate) enum CommitRecord {
    TwoRound(TxnId),
    OneRound {
        txn: TxnId,
        participants: Vec<Participant>,
    },
}

const ONE_ROUND_TAG: u8 = b'C';
/// Tag, id and count.
const ONE_ROUND_HEAD: usize = 1 + 8 + 4;
/// Group, shard and LSN.
const PARTICIPANT_BYTES: usize = 4 + 4 + 8;

impl CommitRecord {
    pub(crate) fn txn(&self) -> TxnId {
        match self {
            CommitRecord::TwoRound(t) | CommitRecord::OneRound { txn: t, .. } => *t,
        }
    }

    pub(crate) fn encode_one_round(txn: TxnId, participants: &[Participant]) -> Vec<u8> {
        let mut out = Vec::with_capacity(ONE_ROUND_HEAD + participants.len() * PARTICIPANT_BYTES);
        out.push(ONE_ROUND_TAG);
        out.extend_from_slice(&txn.0.to_le_bytes());
        // a commit spans at most every shard of the database
        out.extend_from_slice(
            &u32::try_from(participants.len())
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        for (g, s, lsn) in participants {
            out.extend_from_slice(&g.0.to_le_bytes());
            out.extend_from_slice(&s.0.to_le_bytes());
            out.extend_from_slice(&lsn.0.to_le_bytes());
        }
        out
    }

    /// Decodes a record read from the log at `path` (checksummed by the
    /// WAL; a length that does not add up is damage all the same).
    pub(crate) fn decode(e: &WalEntry, path: &std::path::Path) -> Result<CommitRecord> {
        let p = e.payload.as_slice();
        if let Ok(b) = <[u8; 8]>::try_from(p) {
            return Ok(CommitRecord::TwoRound(TxnId(u64::from_le_bytes(b))));
        }
        if p.is_empty() {
            return Ok(CommitRecord::TwoRound(TxnId(e.lsn.0)));
        }
        let bad = || {
            StorageError::corrupt(
                path,
                format!("commit-log record at LSN {} does not decode", e.lsn),
            )
        };
        let mut r = Reader::new(p);
        if r.u8().map_err(|_| bad())? != ONE_ROUND_TAG {
            return Err(bad());
        }
        let txn = TxnId(r.u64().map_err(|_| bad())?);
        let n = usize::try_from(r.u32().map_err(|_| bad())?).map_err(|_| bad())?;
        let expected = n
            .checked_mul(PARTICIPANT_BYTES)
            .and_then(|b| b.checked_add(ONE_ROUND_HEAD));
        if expected != Some(p.len()) {
            return Err(bad());
        }
        let mut participants = Vec::with_capacity(n);
        for _ in 0..n {
            let g = TableGroupId(r.u32().map_err(|_| bad())?);
            let s = ShardId(r.u32().map_err(|_| bad())?);
            let lsn = Lsn(r.u64().map_err(|_| bad())?);
            participants.push((g, s, lsn));
        }
        Ok(CommitRecord::OneRound { txn, participants })
    }
}

/// The transactions that committed, from the commit log's records and the
/// shards' WALs as found at open (see [`CommitRecord`]). A participant
/// whose shard no longer exists (its table group was dropped) does not
/// hold a transaction back.
pub(crate) fn committed_at_open(
    records: &[CommitRecord],
    shards: &[((TableGroupId, ShardId), UnreplayedShard)],
) -> HashSet<TxnId> {
    let by_id: HashMap<(TableGroupId, ShardId), &UnreplayedShard> =
        shards.iter().map(|(k, s)| (*k, s)).collect();
    records
        .iter()
        .filter(|r| match r {
            CommitRecord::TwoRound(_) => true,
            CommitRecord::OneRound { txn, participants } => {
                let whole = participants.iter().all(|(g, s, lsn)| {
                    by_id
                        .get(&(*g, *s))
                        .is_none_or(|u| u.holds_prepare(*txn, *lsn))
                });
                if !whole {
                    tracing::info!(
                        txn = txn.0,
                        "a commit record whose prepare records did not all reach disk: not committed"
                    );
                }
                whole
            }
        })
        .map(CommitRecord::txn)
        .collect()
}

/// Writes routed to shards, in commit-lock order.
pub(crate) type Routed = BTreeMap<(TableGroupId, u32), (Arc<Shard>, Vec<ShardOp>)>;

impl EngineInner {
    /// Commits writes already split by shard: see the module doc.
    pub(crate) fn commit_routed(&self, routed: Routed) -> Result<WriteSummary> {
        self.commit_routed_as(routed, None, &mut false)
    }

    /// [`EngineInner::commit_routed`]; with `owner`, the commit always goes
    /// through the commit log under that id, even for one shard or none (a
    /// transaction with catalog changes in flight: the record decides them
    /// too, see [`crate::ddl`]). `committed` is set once the commit point
    /// is passed (an error after it leaves the transaction committed).
    fn commit_routed_as(
        &self,
        routed: Routed,
        owner: Option<TxnId>,
        committed: &mut bool,
    ) -> Result<WriteSummary> {
        // takes shards' commit locks and waits for fsyncs: another
        // execution context gets the CPU slot meanwhile
        eddy_sched::block_in_place(|| self.commit_routed_blocking(routed, owner, committed))
    }

    fn commit_routed_blocking(
        &self,
        mut routed: Routed,
        owner: Option<TxnId>,
        committed: &mut bool,
    ) -> Result<WriteSummary> {
        // Tables with a UNIQUE index across shards: their writers one at a
        // time, checked against every shard (`crate::global_unique`).
        let unique_locks = self.unique_locks.for_write(self, &routed);
        let _unique_guards: Vec<_> = unique_locks.iter().map(|l| l.lock()).collect();
        if !unique_locks.is_empty() {
            self.check_global_unique(&routed)?;
        }
        if owner.is_none() && routed.len() <= 1 {
            return match routed.pop_first() {
                Some((_, (shard, ops))) => shard.write(ops),
                None => Ok(WriteSummary::default()),
            };
        }
        let txn = owner.unwrap_or_else(|| self.next_txn());
        let mut prepared = Vec::with_capacity(routed.len());
        let mut syncs = Vec::with_capacity(routed.len());
        for (shard, ops) in routed.values() {
            // On error the guards of earlier shards drop here: their
            // prepare records are never committed.
            let (guard, p, lsn, sync) = shard.prepare(ops, txn)?;
            if let Some(h) = sync {
                syncs.push((shard, h));
            }
            prepared.push((shard, guard, p, lsn));
        }
        if owner.is_none() {
            // One round: the commit record names every prepare record, and
            // all of them are synced at once (see `CommitRecord`).
            let participants: Vec<Participant> = prepared
                .iter()
                .map(|(shard, _, _, lsn)| (shard.group, shard.id, *lsn))
                .collect();
            let payload = CommitRecord::encode_one_round(txn, &participants);
            let synced = self.append_commit_record(txn, &payload).and_then(|seq| {
                std::thread::scope(|scope| {
                    let shards = scope.spawn(|| sync_all(&syncs));
                    let log = self.sync_commit_log(seq);
                    let shards = shards.join().unwrap_or_else(|_| {
                        Err(StorageError::Poisoned("a WAL sync thread panicked".into()))
                    });
                    log.and(shards)
                })
            });
            if let Err(e) = synced {
                // The commit record may be durable while this process
                // cannot know that every prepare record is: recovery
                // decides. Until then no participant may publish or
                // flush past its prepare record.
                for (shard, _, _, _) in &prepared {
                    shard.poison(&e);
                }
                return Err(e);
            }
        } else {
            // Two rounds (catalog changes ride on the record, decided at
            // open before any shard is read): every prepare record durable
            // before the commit record; the shards' fdatasyncs run at once.
            sync_all(&syncs)?;
            self.log_commit(txn)?;
        }
        *committed = true;
        let mut parts = Vec::with_capacity(prepared.len());
        let mut first_error = None;
        // The commit-lock guards stay held (in `applied`) until published.
        let mut applied = Vec::with_capacity(prepared.len());
        for (shard, guard, p, lsn) in prepared {
            match shard.apply_prepared(p, lsn) {
                Ok(s) => parts.push(s),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
            applied.push((shard, guard, lsn));
        }
        self.publish_applied(applied, &parts, first_error)
    }

    /// The last step of a cross-shard commit: every participant's LSN made
    /// visible at once under the publish gate, then the commit locks
    /// (`applied` holds their guards) released.
    fn publish_applied(
        &self,
        applied: Vec<(&Arc<Shard>, MutexGuard<'_, CommitState>, Lsn)>,
        parts: &[WriteSummary],
        first_error: Option<StorageError>,
    ) -> Result<WriteSummary> {
        {
            let _gate = self.publish_gate.write();
            for (shard, _, lsn) in &applied {
                shard.publish(*lsn);
            }
        }
        drop(applied);
        match first_error {
            // Committed and durable, but a shard could not apply it in
            // memory: that shard is poisoned and recovery replays it.
            Some(e) => Err(e),
            None => Ok(WriteSummary::merge(parts)),
        }
    }
}

/// One participant of [`EngineInner::commit_bulk_with`], in commit-lock
/// order: a shard with row writes, files of the load, or both (tables of
/// one table group share shards).
struct BulkPart<'a> {
    shard: Arc<Shard>,
    ops: Vec<ShardOp>,
    files: Option<&'a BulkFiles>,
}

/// A participant holding its commit lock, its records logged.
struct BulkPrepared<'a> {
    shard: &'a Arc<Shard>,
    guard: MutexGuard<'a, CommitState>,
    rows: Option<(Prepared, Lsn)>,
    files: Option<(&'a BulkFiles, Lsn)>,
}

impl EngineInner {
    /// Bulk files with row writes: the files of a bulk load of `table`
    /// (per shard index) and `writes` into tables of other groups, as one
    /// two-round transaction. Each participant logs a record tagged with a
    /// new transaction id (a bulk record naming its files, or a prepare
    /// record of its rows), all of them are synced, and the id's record in
    /// the commit log is the one commit point; recovery replays every
    /// participant's record or none (`shard::recovery`). `committed` is set
    /// once that point is passed.
    pub(crate) fn commit_bulk_with(
        &self,
        table: &Table,
        files: &[(usize, &BulkFiles)],
        writes: Vec<(Arc<Table>, Vec<WriteOp>)>,
        committed: &mut bool,
    ) -> Result<WriteSummary> {
        // takes shards' commit locks and waits for fsyncs
        eddy_sched::block_in_place(|| {
            self.commit_bulk_with_blocking(table, files, writes, committed)
        })
    }

    fn commit_bulk_with_blocking(
        &self,
        table: &Table,
        files: &[(usize, &BulkFiles)],
        writes: Vec<(Arc<Table>, Vec<WriteOp>)>,
        committed: &mut bool,
    ) -> Result<WriteSummary> {
        let routed = route_writes(writes)?;
        let group = table.group_id();
        if !self.unique_locks.for_write(self, &routed).is_empty() {
            return Err(StorageError::Unsupported(
                "a bulk load committed with row writes into a table with a UNIQUE index".into(),
            ));
        }
        let bulk_shards = table.shards();
        let mut parts: BTreeMap<(TableGroupId, u32), BulkPart<'_>> = routed
            .into_iter()
            .map(|(k, (shard, ops))| {
                let part = BulkPart {
                    shard,
                    ops,
                    files: None,
                };
                (k, part)
            })
            .collect();
        for &(s, f) in files {
            let id = u32::try_from(s).map_err(|_| {
                StorageError::InvalidDefinition(format!("shard index {s} out of range"))
            })?;
            let shard = bulk_shards.get(s).ok_or_else(|| {
                StorageError::InvalidDefinition(format!("shard index {s} out of range"))
            })?;
            parts
                .entry((group, id))
                .or_insert_with(|| BulkPart {
                    shard: Arc::clone(shard),
                    ops: Vec::new(),
                    files: None,
                })
                .files = Some(f);
        }
        let txn = self.next_txn();
        let mut prepared = Vec::with_capacity(parts.len());
        let mut syncs = Vec::new();
        for part in parts.values() {
            // On error the locks taken so far drop here: the records
            // logged under `txn` are never committed.
            let shard = &part.shard;
            let (mut guard, rows) = if part.ops.is_empty() {
                (shard.lock_commit()?, None)
            } else {
                let (guard, p, lsn, sync) = shard.prepare(&part.ops, txn)?;
                if let Some(h) = sync {
                    syncs.push((shard, h));
                }
                (guard, Some((p, lsn)))
            };
            let files = match part.files {
                // synced by the shard before it returns
                Some(f) => Some((f, shard.bulk_log(&mut guard, f, txn)?)),
                None => None,
            };
            prepared.push(BulkPrepared {
                shard,
                guard,
                rows,
                files,
            });
        }
        sync_all(&syncs)?;
        self.log_commit(txn)?;
        *committed = true;
        let mut parts_done = Vec::with_capacity(prepared.len());
        let mut first_error = None;
        let mut publish = Vec::with_capacity(prepared.len());
        for mut p in prepared {
            let mut last = Lsn::ZERO;
            if let Some((rows, lsn)) = p.rows {
                match p.shard.apply_prepared(rows, lsn) {
                    Ok(s) => parts_done.push(s),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
                last = last.max(lsn);
            }
            if let Some((f, lsn)) = p.files {
                if let Err(e) = p.shard.bulk_finish(&mut p.guard, f, lsn, false) {
                    first_error.get_or_insert(e);
                }
                last = last.max(lsn);
            }
            publish.push((p.shard, p.guard, last));
        }
        self.publish_applied(publish, &parts_done, first_error)
    }
}

/// Syncs every handle, in parallel; a shard whose sync failed is poisoned
/// (after a failed fdatasync the kernel may have dropped the pages: the
/// shard must not acknowledge anything more until it is recovered).
fn sync_all(syncs: &[(&Arc<Shard>, SyncHandle)]) -> Result<()> {
    let results: Vec<Result<()>> = match syncs {
        [] => return Ok(()),
        [(_, h)] => vec![h.sync()],
        [(_, first), rest @ ..] => std::thread::scope(|scope| {
            let others: Vec<_> = rest.iter().map(|(_, h)| scope.spawn(|| h.sync())).collect();
            let mut out = vec![first.sync()];
            for t in others {
                out.push(t.join().unwrap_or_else(|_| {
                    Err(StorageError::Poisoned("a WAL sync thread panicked".into()))
                }));
            }
            out
        }),
    };
    let mut first_error = None;
    for ((shard, _), r) in syncs.iter().zip(results) {
        if let Err(e) = r {
            shard.poison(&e);
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

impl Engine {
    /// A new transaction id (row-lock owner). Never repeats.
    pub fn begin_txn(&self) -> TxnId {
        self.inner().next_txn()
    }

    /// The engine's row locks.
    pub fn locks(&self) -> &LockManager {
        self.inner().locks()
    }

    /// Commits the writes of one transaction over any tables: all of them
    /// or none, durable on return, visible to every later snapshot at once.
    pub fn commit(&self, writes: Vec<(Arc<Table>, Vec<WriteOp>)>) -> Result<WriteSummary> {
        let routed = self.route_writes(writes)?;
        self.inner().commit_routed(routed)
    }

    /// Commits the writes of transaction `txn` ([`Engine::commit`]) together
    /// with its catalog changes, if it made any (`Engine::ddl(Some(txn))`):
    /// then `txn`'s record in the commit log is the one commit point of
    /// both (see [`crate::ddl`]).
    pub fn commit_txn(
        &self,
        txn: TxnId,
        writes: Vec<(Arc<Table>, Vec<WriteOp>)>,
    ) -> Result<WriteSummary> {
        if !self.has_ddl(txn) {
            return self.commit(writes);
        }
        let mut committed = false;
        let result = self.route_writes(writes).and_then(|routed| {
            self.inner()
                .commit_routed_as(routed, Some(txn), &mut committed)
        });
        if committed {
            self.finish_ddl(txn);
        } else if let Err(e) = self.rollback_ddl(txn, 0) {
            tracing::error!(txn = txn.0, error = %e, "could not undo the catalog changes of a failed commit; recovery will");
        }
        result
    }

    fn route_writes(&self, writes: Vec<(Arc<Table>, Vec<WriteOp>)>) -> Result<Routed> {
        route_writes(writes)
    }

    /// Snapshots of several tables taken at one instant: a multi-shard
    /// commit is in all of them or in none.
    pub fn snapshot_tables(&self, tables: &[Arc<Table>]) -> Vec<TableSnapshot> {
        let _gate = self.inner().publish_gate.read();
        tables.iter().map(|t| TableSnapshot::take(t)).collect()
    }
}

/// Splits writes over any tables by shard, in commit-lock order.
fn route_writes(writes: Vec<(Arc<Table>, Vec<WriteOp>)>) -> Result<Routed> {
    let mut routed: Routed = BTreeMap::new();
    for (table, ops) in writes {
        let engine = table.engine()?;
        for (s, ops) in table.route(&engine, ops)? {
            let shard = Arc::clone(&table.shards()[s as usize]);
            routed
                .entry((table.group_id(), s))
                .or_insert_with(|| (shard, Vec::new()))
                .1
                .extend(ops);
        }
    }
    Ok(routed)
}

impl Table {
    /// [`Engine::set_background_hook`] for the shards of this table's group
    /// only.
    #[doc(hidden)]
    pub fn set_background_hook(&self, hook: Option<crate::BackgroundHook>) {
        for s in self.shards() {
            s.set_background_hook(hook.clone());
        }
    }

    /// Index of the shard holding `key`.
    pub fn shard_of_key(&self, key: &Key) -> Result<usize> {
        crate::engine::shard_for_key(self.def(), key, self.shard_count()).map(|s| s as usize)
    }

    /// An LSN at or above that of the latest committed write of `key`; a
    /// row whose answer is above a snapshot's LSN for its shard changed
    /// after that snapshot.
    pub fn last_write(&self, key: &Key) -> Result<Lsn> {
        let s = self.shard_of_key(key)?;
        Ok(self.shards()[s].last_write(self.def().id, key.as_bytes()))
    }

    /// The row under `key` as of the cut `lsns` (one read LSN per shard,
    /// from [`Table::visible_lsns`] or a snapshot): `Some(row)`, or `None`
    /// when that version cannot be read by key (a column-only table whose
    /// key was written after the cut: the caller reads a newer cut or
    /// scans).
    pub fn get_at(&self, key: &Key, lsns: &[Lsn]) -> Result<Option<Option<Row>>> {
        let s = self.shard_of_key(key)?;
        let at = *lsns.get(s).ok_or_else(|| {
            StorageError::InvalidDefinition(format!(
                "a read cut of {} shards for table \"{}\"",
                lsns.len(),
                self.def().name
            ))
        })?;
        let shard = &self.shards()[s];
        let Some(t) = shard.tablets(self.def().id) else {
            return Err(StorageError::TableNotFound(self.def().name.clone()));
        };
        let width = self.def().columns.len();
        if let Some(rl) = &t.row {
            let v = rl.read().clone();
            return match v.get(key.as_bytes(), at)? {
                Some(b) => codec::decode_row_bytes(&b, width, "row tablet").map(|r| Some(Some(r))),
                None => Ok(Some(None)),
            };
        }
        let Some(cl) = &t.col else {
            return Ok(Some(None));
        };
        // A column tablet keeps only the newest version of a key; it is the
        // one at the cut if the key's latest write is not after the cut
        // (writes are recorded there before they are applied).
        let v = cl.read().clone();
        let row = v.get(key.as_bytes())?;
        if shard.last_write(self.def().id, key.as_bytes()) > at {
            return Ok(None);
        }
        Ok(Some(row.map(|mut r| {
            r.resize(width, eddy_common::Value::Null);
            r
        })))
    }

    /// Rows of several keys at one consistent cut, taken now: a multi-shard
    /// commit is in all of them or in none. A key of a column-only table
    /// written while this runs makes it take a newer cut (bounded; then
    /// 40001, as a reader that cannot get a consistent answer).
    pub fn get_consistent(&self, keys: &[Key]) -> Result<Vec<Option<Row>>> {
        const ATTEMPTS: usize = 10_000;
        'cut: for attempt in 0..ATTEMPTS {
            let lsns = self.visible_lsns();
            let mut out = Vec::with_capacity(keys.len());
            for k in keys {
                match self.get_at(k, &lsns)? {
                    Some(r) => out.push(r),
                    None => {
                        if attempt > 16 {
                            std::thread::sleep(std::time::Duration::from_micros(50));
                        } else {
                            std::thread::yield_now();
                        }
                        continue 'cut;
                    }
                }
            }
            return Ok(out);
        }
        Err(StorageError::SerializationFailure)
    }

    /// The latest committed row stored under `key`.
    pub fn get_by_key(&self, key: &Key) -> Result<Option<Row>> {
        let shard = &self.shards()[self.shard_of_key(key)?];
        let Some(t) = shard.tablets(self.def().id) else {
            return Err(StorageError::TableNotFound(self.def().name.clone()));
        };
        let width = self.def().columns.len();
        if let Some(rl) = &t.row {
            let v = rl.read().clone();
            return match v.get(key.as_bytes(), shard.visible_lsn())? {
                Some(b) => codec::decode_row_bytes(&b, width, "row tablet").map(Some),
                None => Ok(None),
            };
        }
        match &t.col {
            Some(cl) => {
                let v = cl.read().clone();
                Ok(v.get(key.as_bytes())?.map(|mut r| {
                    r.resize(width, eddy_common::Value::Null);
                    r
                }))
            }
            None => Ok(None),
        }
    }
}
