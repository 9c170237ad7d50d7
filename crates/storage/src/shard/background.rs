//! Flush and compaction, off the commit lock.
//!
//! Read `docs/design/storage.md`, "Flush and compaction off the commit
//! lock", before touching this file. In short:
//!
//! * **Flush** ([`Shard::flush`]): under the commit lock, *freeze* every
//!   non-empty memtable (it moves to the tablet version's `frozen` list,
//!   which readers and the commit leader still see, between the memtable
//!   and the files), install an empty memtable, note the visible LSN `F`
//!   (everything at or below it is in the frozen memtables or in files).
//!   Unlocked: write a file per frozen memtable. Locked again: replace
//!   each frozen memtable by its file, write the manifest with
//!   `flushed_lsn = F`, truncate the WAL through `F`. A column file is
//!   opened with its memtable's own delete map (the same `Arc`), so deletes
//!   of frozen rows made while the file was written are the file's deletes.
//! * **Compaction** ([`Shard::compact`]): inputs are read from the
//!   published versions (only compaction removes files, and one runs at a
//!   time per shard); for column files each input's delete map is marked
//!   (bitmap + entry count). Unlocked: merge and write. Locked: deletes
//!   recorded in an input after its mark are carried to the output row
//!   (its position is the input row minus the rows dropped before it), the
//!   inputs are replaced by the outputs, the manifest is written, the
//!   inputs deleted.
//! * A file is referenced only once the manifest naming it is durable;
//!   files nobody references are deleted at install or at recovery.
//! * A flush under the commit lock ([`Shard::flush_locked`], for bulk
//!   loads and ADD COLUMN) flushes the frozen memtables of a background
//!   flush in flight as well; that flush then finds its memtables gone at
//!   install and deletes its files unused.
//!
//! Lock order: `flush_lock` or `compact_lock`, then the commit lock, then
//! a tablet's version lock, then a delete map's mutex.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use eddy_common::{ColumnType, FileId, Lsn};
use roaring::RoaringBitmap;

use super::{CommitState, Shard, Tablets};
use crate::column_tablet::{column_file_name, ColMemtable, ColumnFile, ColumnFileWriter};
use crate::error::{Result, StorageError};
use crate::manifest::{self, TabletFiles};
use crate::row_tablet::{row_file_name, Entry, MergeIter, RowFile, RowFileBuilder, RowMemtable};

/// Output files of a compaction are cut at about this size, so that one
/// compaction's output (and the memory a file costs to write) is bounded.
pub const COMPACTION_FILE_BYTES: usize = 64 << 20;
/// A non-full column compaction reads at most about this many bytes of
/// input files (it always takes at least the first file it picks).
pub const COMPACTION_INPUT_BYTES: u64 = 256 << 20;
/// A column tablet with this many files merges its smallest ones.
pub const COLUMN_FILES_TRIGGER: usize = 16;
/// How many of the smallest column files one compaction merges at most.
const COLUMN_MERGE_WIDTH: usize = 8;
/// A row tablet with this many L0 files compacts them into L1.
pub const L0_TRIGGER: usize = 4;

/// Points in a flush or compaction where a test hook runs (see
/// [`Shard::set_background_hook`]). A hook that returns an error stops the
/// work there, as a crash would, leaving whatever was written on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackgroundStage {
    /// Memtables frozen, the commit lock released, no file written yet.
    FlushFrozen,
    /// Flush files written and fsync'd, not yet installed.
    FlushWritten,
    /// Compaction inputs chosen (delete maps marked), nothing written.
    CompactionPicked,
    /// Compaction outputs written, not yet installed.
    CompactionWritten,
}

/// A callback run at each [`BackgroundStage`] (tests only).
pub type BackgroundHook = Arc<dyn Fn(BackgroundStage) -> Result<()> + Send + Sync>;

/// A frozen memtable to write, with the file id reserved for it.
enum FlushJob {
    Row(Arc<Tablets>, Arc<RowMemtable>, FileId),
    Col(Arc<Tablets>, Arc<ColMemtable>, FileId),
}

/// A frozen memtable and the file written from it.
enum Flushed {
    Row(Arc<Tablets>, Arc<RowMemtable>, Arc<RowFile>),
    Col(Arc<Tablets>, Arc<ColMemtable>, Arc<ColumnFile>),
}

/// A column input file as a compaction found it.
struct ColInput {
    file: Arc<ColumnFile>,
    /// Its deleted rows at the mark (dropped from the output).
    dropped: RoaringBitmap,
    /// Its delete map's entry count at the mark.
    mark: usize,
}

impl Shard {
    /// Installs (or removes) the test hook run at each [`BackgroundStage`].
    pub fn set_background_hook(&self, hook: Option<BackgroundHook>) {
        *self.hook.lock() = hook;
    }

    fn run_hook(&self, stage: BackgroundStage) -> Result<()> {
        let hook = self.hook.lock().clone();
        match hook {
            Some(h) => h(stage),
            None => Ok(()),
        }
    }

    /// Bytes in the active memtables (frozen ones are already being
    /// flushed: counting them would only start another flush).
    pub fn memtable_bytes(&self) -> usize {
        self.tablets
            .read()
            .values()
            .map(|t| {
                t.row_version().map_or(0, |r| r.memtable.approx_bytes())
                    + t.col_version().map_or(0, |c| c.memtable.approx_bytes())
            })
            .sum()
    }

    fn next_file_id(st: &mut CommitState) -> FileId {
        let id = FileId(st.next_file_id);
        st.next_file_id += 1;
        id
    }

    /// Flushes every memtable to files and truncates the WAL, holding the
    /// commit lock only to freeze and to install (writes go on meanwhile).
    pub fn flush(&self) -> Result<()> {
        let _one = self.flush_lock.lock();
        let (jobs, flushed) = {
            let mut st = self.commit.lock();
            self.freeze(&mut st)
        };
        self.run_hook(BackgroundStage::FlushFrozen)?;
        let built = self.write_flush_files(&jobs)?;
        self.run_hook(BackgroundStage::FlushWritten)?;
        let mut st = self.commit.lock();
        self.install_flush(&mut st, built, flushed)
    }

    /// The whole flush under the commit lock (how flushes worked before;
    /// see [`crate::Engine::flush_holding_commit_locks`]).
    pub fn flush_holding_commit_lock(&self) -> Result<()> {
        let _one = self.flush_lock.lock();
        let mut st = self.commit.lock();
        self.flush_locked(&mut st)
    }

    /// Flushes everything (including memtables a background flush froze)
    /// without releasing the commit lock: for callers that already hold it
    /// and need every memtable empty (bulk install, ADD COLUMN).
    pub(crate) fn flush_locked(&self, st: &mut CommitState) -> Result<()> {
        let (jobs, flushed) = self.freeze(st);
        let built = self.write_flush_files(&jobs)?;
        self.install_flush(st, built, flushed)
    }

    /// Moves every non-empty memtable to its tablet's frozen list and
    /// returns a job for every frozen memtable (earlier failed flushes'
    /// included), oldest first, with the LSN they cover (commit lock held).
    fn freeze(&self, st: &mut CommitState) -> (Vec<FlushJob>, Lsn) {
        // Under the commit lock everything applied is published (the
        // leader applies and publishes before it lets go), so the frozen
        // memtables plus the files hold every write up to here.
        let flushed = self.visible_lsn();
        let tablets: Vec<Arc<Tablets>> = self.tablets.read().values().cloned().collect();
        let mut jobs = Vec::new();
        for t in &tablets {
            if let Some(rl) = &t.row {
                let mut nv = (**rl.read()).clone();
                if !nv.memtable.is_empty() {
                    let m = std::mem::take(&mut nv.memtable);
                    nv.frozen.insert(0, m);
                    *rl.write() = Arc::new(nv.clone());
                }
                // `frozen` is newest first; files are made oldest first
                for m in nv.frozen.iter().rev() {
                    jobs.push(FlushJob::Row(t.clone(), m.clone(), Self::next_file_id(st)));
                }
            }
            if let Some(cl) = &t.col {
                let mut nv = (**cl.read()).clone();
                if !nv.memtable.is_empty() {
                    let fresh = Arc::new(ColMemtable::new(nv.memtable.columns.clone()));
                    let m = std::mem::replace(&mut nv.memtable, fresh);
                    nv.frozen.push(m);
                    *cl.write() = Arc::new(nv.clone());
                }
                for m in &nv.frozen {
                    jobs.push(FlushJob::Col(t.clone(), m.clone(), Self::next_file_id(st)));
                }
            }
        }
        (jobs, flushed)
    }

    /// Writes (and fsyncs) a file per job; no lock held. On error the files
    /// written so far are deleted (nothing references them) and the frozen
    /// memtables stay, for the next flush.
    fn write_flush_files(&self, jobs: &[FlushJob]) -> Result<Vec<Flushed>> {
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            match self.write_flush_file(job) {
                Ok(f) => out.push(f),
                Err(e) => {
                    for f in &out {
                        let _ = self.store.delete(&self.flushed_name(f));
                    }
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    fn flushed_name(&self, f: &Flushed) -> String {
        let name = match f {
            Flushed::Row(_, _, file) => row_file_name(file.meta.id),
            Flushed::Col(_, _, file) => column_file_name(file.meta.id),
        };
        format!("{}/{name}", self.rel_dir)
    }

    fn write_flush_file(&self, job: &FlushJob) -> Result<Flushed> {
        match job {
            FlushJob::Row(t, mem, id) => {
                let mut b = RowFileBuilder::default();
                let mut last: Option<Vec<u8>> = None;
                for e in mem.iter() {
                    // keep only the newest version of each key
                    if last.as_deref() == Some(e.key.as_slice()) {
                        continue;
                    }
                    last = Some(e.key.clone());
                    b.add(&e);
                }
                let (bytes, meta) = b.finish(*id, 0);
                self.store
                    .put(&format!("{}/{}", self.rel_dir, row_file_name(*id)), bytes)?;
                let f = RowFile::open(&self.store, &self.rel_dir, meta)?;
                Ok(Flushed::Row(t.clone(), mem.clone(), Arc::new(f)))
            }
            FlushJob::Col(t, mem, id) => {
                let mut w = ColumnFileWriter::new(mem.columns.clone())?;
                for b in mem.batches() {
                    w.push(b)?;
                }
                let (bytes, meta) = w.finish(*id, None)?;
                self.store.put(
                    &format!("{}/{}", self.rel_dir, column_file_name(*id)),
                    bytes,
                )?;
                // The memtable's own delete map: deletes of its rows made
                // from the freeze on are the file's deletes (same rows,
                // same order).
                let f = ColumnFile::open(&self.store, &self.rel_dir, meta, mem.deletes.clone())?;
                Ok(Flushed::Col(t.clone(), mem.clone(), Arc::new(f)))
            }
        }
    }

    /// Replaces frozen memtables by their files, writes the manifest and
    /// truncates the WAL (commit lock held). A memtable no longer frozen
    /// (a locked flush took it, or its table is gone) leaves its file
    /// unused: deleted here.
    fn install_flush(&self, st: &mut CommitState, built: Vec<Flushed>, flushed: Lsn) -> Result<()> {
        let old_names: HashSet<String> = st.manifest.all_file_names().into_iter().collect();
        let mut unused = Vec::new();
        for f in built {
            let installed = match &f {
                Flushed::Row(t, mem, file) => {
                    self.is_live(t)
                        && t.row.as_ref().is_some_and(|rl| {
                            let mut nv = (**rl.read()).clone();
                            let Some(pos) = nv.frozen.iter().position(|m| Arc::ptr_eq(m, mem))
                            else {
                                return false;
                            };
                            // Files come oldest first: each goes in front of
                            // the older ones (no newer file can be in L0 while
                            // this memtable is frozen: bulk installs flush first).
                            nv.frozen.remove(pos);
                            nv.l0.insert(0, file.clone());
                            *rl.write() = Arc::new(nv);
                            true
                        })
                }
                Flushed::Col(t, mem, file) => {
                    self.is_live(t)
                        && t.col.as_ref().is_some_and(|cl| {
                            let mut nv = (**cl.read()).clone();
                            let Some(pos) = nv.frozen.iter().position(|m| Arc::ptr_eq(m, mem))
                            else {
                                return false;
                            };
                            nv.frozen.remove(pos);
                            nv.files.push(file.clone());
                            *cl.write() = Arc::new(nv);
                            true
                        })
                }
            };
            if !installed {
                unused.push(self.flushed_name(&f));
            }
        }
        st.manifest.flushed_lsn = st.manifest.flushed_lsn.max(flushed);
        self.write_manifest(st)?;
        st.wal.truncate_through(st.manifest.flushed_lsn)?;
        self.delete_unlisted(st, old_names)?;
        for name in unused {
            self.store.delete(&name)?;
        }
        Ok(())
    }

    /// Whether `t` is still this shard's tablet group of its table (not
    /// dropped or truncated meanwhile).
    fn is_live(&self, t: &Arc<Tablets>) -> bool {
        let id = t.def.read().id;
        self.tablets
            .read()
            .get(&id)
            .is_some_and(|cur| Arc::ptr_eq(cur, t))
    }

    /// Rebuilds the manifest from the published tablet versions and writes
    /// it (commit lock held). Frozen memtables are not in it: their rows
    /// are above `flushed_lsn`, in the WAL.
    ///
    /// A bulk-loaded file whose commit LSN is above `flushed_lsn` is left
    /// out too: its WAL record is replayed at recovery and installs it
    /// then, superseding the rows replayed before it, as it did at run time.
    /// (Listed, it would be installed twice, and rows of memtables replayed
    /// before it would win over it.) Flushed and compacted files are never
    /// above `flushed_lsn`.
    pub(crate) fn write_manifest(&self, st: &mut CommitState) -> Result<()> {
        let flushed = st.manifest.flushed_lsn;
        let mut tables = std::collections::BTreeMap::new();
        for (id, t) in self.tablets.read().iter() {
            let mut tf = TabletFiles::default();
            if let Some(rv) = t.row_version() {
                let covered = |f: &&Arc<RowFile>| f.meta.max_lsn <= flushed;
                tf.row_l0 = rv
                    .l0
                    .iter()
                    .filter(covered)
                    .map(|f| f.meta.clone())
                    .collect();
                tf.row_l1 = rv
                    .l1
                    .iter()
                    .filter(covered)
                    .map(|f| f.meta.clone())
                    .collect();
            }
            if let Some(cv) = t.col_version() {
                for f in cv.files.iter().filter(|f| f.meta.max_lsn <= flushed) {
                    tf.col.push(f.meta.clone());
                    let d = f.deletes.lock();
                    if !d.is_empty() {
                        tf.col_deletes
                            .insert(f.meta.id.0, manifest::bitmap_to_bytes(d.bitmap()));
                    }
                }
            }
            tables.insert(id.0, tf);
        }
        st.manifest.tables = tables;
        manifest::write_atomic(&self.abs_dir.join("MANIFEST"), &st.manifest)
    }

    pub(crate) fn delete_unlisted(&self, st: &CommitState, before: HashSet<String>) -> Result<()> {
        let now: HashSet<String> = st.manifest.all_file_names().into_iter().collect();
        for name in before.difference(&now) {
            self.store.delete(&format!("{}/{name}", self.rel_dir))?;
        }
        Ok(())
    }

    // ------------------------------------------------------- compaction

    /// Whether background compaction has work here.
    pub fn needs_compaction(&self) -> bool {
        self.tablets.read().values().any(|t| {
            t.row_version().is_some_and(|r| r.l0.len() >= L0_TRIGGER)
                || t.col_version().is_some_and(|c| {
                    c.files.len() >= COLUMN_FILES_TRIGGER || c.files.iter().any(|f| is_dirty(f))
                })
        })
    }

    /// Whether a file installed by a bulk load is above the flushed LSN
    /// (listed in the WAL only, out of compaction's reach).
    fn holds_unflushed_files(&self) -> bool {
        let flushed = self.commit.lock().manifest.flushed_lsn;
        self.tablets.read().values().any(|t| {
            t.row_version()
                .is_some_and(|r| r.l0.iter().any(|f| f.meta.max_lsn > flushed))
                || t.col_version()
                    .is_some_and(|c| c.files.iter().any(|f| f.meta.max_lsn > flushed))
        })
    }

    /// Compacts row tablets (L0 and the L1 files it overlaps into new L1
    /// files) and column tablets (merging the smallest files, rewriting
    /// files with many deleted rows). `full` (VACUUM) compacts everything
    /// that has more than one file or any deleted row. The commit lock is
    /// held only to allocate file ids and to install the result.
    pub fn compact(&self, full: bool) -> Result<()> {
        let _one = self.compact_lock.lock();
        // Bulk files above the flushed LSN are installed by WAL replay at
        // recovery (see `write_manifest`): they must stay as they are
        // until a flush covers them. A table written only by bulk loads
        // (an append-only view: one load per checkpoint) never fills a
        // memtable, so nothing else would flush: a flush of empty
        // memtables only moves the flushed LSN and writes the manifest.
        if self.holds_unflushed_files() {
            self.flush()?;
        }
        let flushed = self.commit.lock().manifest.flushed_lsn;
        let tablets: Vec<Arc<Tablets>> = self.tablets.read().values().cloned().collect();
        for t in &tablets {
            self.compact_rows(t, full, flushed)?;
            self.compact_columns(t, full, flushed)?;
        }
        Ok(())
    }

    fn compact_rows(&self, t: &Arc<Tablets>, full: bool, flushed: Lsn) -> Result<()> {
        let Some(rl) = &t.row else { return Ok(()) };
        // Only compaction changes L1 or removes from L0, and it runs one at
        // a time: the inputs stay in the version until we install.
        let v = rl.read().clone();
        // L0 is newest first and files above `flushed` are bulk files in
        // front: the inputs are the oldest files, a suffix of L0, so the
        // files left in L0 stay newer than everything merged into L1.
        let newer =
            v.l0.iter()
                .rposition(|f| f.meta.max_lsn > flushed)
                .map_or(0, |i| i + 1);
        let l0 = &v.l0[newer..];
        let go = (full && l0.len() + v.l1.len() > 1)
            || l0.len() >= L0_TRIGGER
            || (full && !l0.is_empty());
        if !go {
            return Ok(());
        }
        let mut inputs: Vec<Arc<RowFile>> = l0.to_vec();
        // (first key, file): the L1 files this merge leaves alone
        let mut kept_l1: Vec<(Vec<u8>, Arc<RowFile>)> = Vec::new();
        if full {
            inputs.extend(v.l1.iter().cloned());
        } else {
            // Levelled: only the L1 files whose key range meets L0's. The
            // others hold no version of a key in the merged range, so
            // delete markers may still be dropped.
            let mut lo: Option<Vec<u8>> = None;
            let mut hi: Option<Vec<u8>> = None;
            for f in l0 {
                if let Some((a, b)) = f.key_range()? {
                    if lo.as_ref().is_none_or(|l| a < *l) {
                        lo = Some(a);
                    }
                    if hi.as_ref().is_none_or(|h| b > *h) {
                        hi = Some(b);
                    }
                }
            }
            for f in &v.l1 {
                match (f.key_range()?, &lo, &hi) {
                    (Some((a, b)), Some(lo), Some(hi)) if !(a <= *hi && *lo <= b) => {
                        kept_l1.push((a, f.clone()));
                    }
                    (Some((a, _)), None, _) | (Some((a, _)), _, None) => {
                        kept_l1.push((a, f.clone()));
                    }
                    // overlapping, or an empty file: merged (away)
                    _ => inputs.push(f.clone()),
                }
            }
        }
        self.run_hook(BackgroundStage::CompactionPicked)?;
        // (key asc, LSN desc) over every input; `None, true`: the newest
        // version of each key, delete markers dropped (the same as before
        // compaction moved off the lock; snapshots keep their own Arcs).
        let sources: Vec<Box<dyn Iterator<Item = Result<Entry>> + Send>> = inputs
            .iter()
            .map(|f| Box::new(f.iter()) as Box<dyn Iterator<Item = Result<Entry>> + Send>)
            .collect();
        let mut out: Vec<(Vec<u8>, Arc<RowFile>)> = Vec::new();
        let written = (|| -> Result<()> {
            let mut b = RowFileBuilder::default();
            let mut first: Option<Vec<u8>> = None;
            for e in MergeIter::new(sources, None, true) {
                let e = e?;
                if first.is_none() {
                    first = Some(e.key.clone());
                }
                b.add(&e);
                if b.approx_bytes() >= COMPACTION_FILE_BYTES {
                    let f = self.finish_row_file(std::mem::take(&mut b))?;
                    out.push((first.take().unwrap_or_default(), f));
                }
            }
            if b.entries() > 0 {
                let f = self.finish_row_file(b)?;
                out.push((first.take().unwrap_or_default(), f));
            }
            self.run_hook(BackgroundStage::CompactionWritten)
        })();
        if let Err(e) = written {
            self.delete_files(out.iter().map(|(_, f)| row_file_name(f.meta.id)));
            return Err(e);
        }
        let mut st = self.commit.lock();
        let cur = rl.read().clone();
        let all_there = inputs
            .iter()
            .all(|f| cur.l0.iter().chain(&cur.l1).any(|g| Arc::ptr_eq(f, g)));
        if !self.is_live(t) || !all_there {
            drop(st);
            self.delete_files(out.iter().map(|(_, f)| row_file_name(f.meta.id)));
            return Ok(());
        }
        let old_names: HashSet<String> = st.manifest.all_file_names().into_iter().collect();
        let mut nv = (*cur).clone();
        nv.l0.retain(|f| !inputs.iter().any(|i| Arc::ptr_eq(i, f)));
        // L1 stays sorted by key: kept files and outputs do not overlap.
        let mut l1 = kept_l1;
        l1.extend(out);
        l1.sort_by(|a, b| a.0.cmp(&b.0));
        nv.l1 = l1.into_iter().map(|(_, f)| f).collect();
        *rl.write() = Arc::new(nv);
        self.write_manifest(&mut st)?;
        self.delete_unlisted(&st, old_names)
    }

    fn finish_row_file(&self, b: RowFileBuilder) -> Result<Arc<RowFile>> {
        let id = self.alloc_file_id();
        let (bytes, meta) = b.finish(id, 1);
        self.store
            .put(&format!("{}/{}", self.rel_dir, row_file_name(id)), bytes)?;
        Ok(Arc::new(RowFile::open(&self.store, &self.rel_dir, meta)?))
    }

    /// Best effort: the files are referenced by nothing (recovery deletes
    /// what this misses).
    fn delete_files(&self, names: impl Iterator<Item = String>) {
        for n in names {
            if let Err(e) = self.store.delete(&format!("{}/{n}", self.rel_dir)) {
                tracing::warn!(shard = %self.rel_dir, file = %n, error = %e, "cannot delete an unused file");
            }
        }
    }

    /// The column files one compaction of this version merges.
    fn pick_column_inputs(files: &[Arc<ColumnFile>], full: bool) -> Vec<Arc<ColumnFile>> {
        if full {
            let any_deletes = files.iter().any(|f| !f.deletes.lock().is_empty());
            return if files.len() > 1 || any_deletes {
                files.to_vec()
            } else {
                Vec::new()
            };
        }
        let mut picked: Vec<Arc<ColumnFile>> = Vec::new();
        let mut bytes = 0u64;
        let mut take = |f: &Arc<ColumnFile>, picked: &mut Vec<Arc<ColumnFile>>| {
            if picked.iter().any(|p| Arc::ptr_eq(p, f)) {
                return true;
            }
            if !picked.is_empty() && bytes + f.meta.bytes > COMPACTION_INPUT_BYTES {
                return false;
            }
            bytes += f.meta.bytes;
            picked.push(f.clone());
            true
        };
        for f in files.iter().filter(|f| is_dirty(f)) {
            if !take(f, &mut picked) {
                break;
            }
        }
        if files.len() >= COLUMN_FILES_TRIGGER {
            let mut by_size: Vec<&Arc<ColumnFile>> = files.iter().collect();
            by_size.sort_by_key(|f| f.meta.bytes);
            for f in by_size.into_iter().take(COLUMN_MERGE_WIDTH) {
                if !take(f, &mut picked) {
                    break;
                }
            }
        }
        picked
    }

    fn compact_columns(&self, t: &Arc<Tablets>, full: bool, flushed: Lsn) -> Result<()> {
        let Some(cl) = &t.col else { return Ok(()) };
        let v = cl.read().clone();
        let eligible: Vec<Arc<ColumnFile>> = v
            .files
            .iter()
            .filter(|f| f.meta.max_lsn <= flushed)
            .cloned()
            .collect();
        let picked = Self::pick_column_inputs(&eligible, full);
        if picked.is_empty() {
            return Ok(());
        }
        // The mark: bitmap and entry count under one lock of the map, so
        // every later delete is exactly `entries_from(mark)`.
        let inputs: Vec<ColInput> = picked
            .into_iter()
            .map(|file| {
                let (dropped, mark) = {
                    let d = file.deletes.lock();
                    (d.bitmap().clone(), d.entry_count())
                };
                ColInput {
                    file,
                    dropped,
                    mark,
                }
            })
            .collect();
        self.run_hook(BackgroundStage::CompactionPicked)?;
        let columns = v.memtable.columns.clone();
        let outputs = self.merge_columns(&columns, &inputs)?;
        if let Err(e) = self.run_hook(BackgroundStage::CompactionWritten) {
            self.delete_files(outputs.iter().map(|f| column_file_name(f.meta.id)));
            return Err(e);
        }
        let mut st = self.commit.lock();
        let cur = cl.read().clone();
        let first_pos = cur
            .files
            .iter()
            .position(|f| inputs.iter().any(|i| Arc::ptr_eq(&i.file, f)));
        let all_there = inputs
            .iter()
            .all(|i| cur.files.iter().any(|f| Arc::ptr_eq(&i.file, f)));
        let (Some(first_pos), true, true) = (first_pos, all_there, self.is_live(t)) else {
            drop(st);
            self.delete_files(outputs.iter().map(|f| column_file_name(f.meta.id)));
            return Ok(());
        };
        carry_deletes(&inputs, &outputs);
        let old_names: HashSet<String> = st.manifest.all_file_names().into_iter().collect();
        let mut nv = (*cur).clone();
        nv.files
            .retain(|f| !inputs.iter().any(|i| Arc::ptr_eq(&i.file, f)));
        let at = first_pos.min(nv.files.len());
        nv.files.splice(at..at, outputs);
        *cl.write() = Arc::new(nv);
        self.write_manifest(&mut st)?;
        self.delete_unlisted(&st, old_names)
    }

    /// Writes the live rows (at the mark) of `inputs`, in input order, into
    /// files of about [`COMPACTION_FILE_BYTES`]; no lock held. On error the
    /// files written so far are deleted.
    fn merge_columns(
        &self,
        columns: &crate::column_tablet::Columns,
        inputs: &[ColInput],
    ) -> Result<Vec<Arc<ColumnFile>>> {
        let mut outputs: Vec<Arc<ColumnFile>> = Vec::new();
        let r = (|| -> Result<()> {
            let types: Vec<ColumnType> = columns.iter().map(|c| c.1).collect();
            let mut w = ColumnFileWriter::new(columns.clone())?;
            let schema = w.schema().clone();
            for input in inputs {
                let f = &input.file;
                for g in 0..f.row_group_count() {
                    let b = f.read_row_group(g, None)?;
                    let start = f.row_group_start(g) as u32;
                    let keep: BooleanArray = (0..b.num_rows() as u32)
                        .map(|r| Some(!input.dropped.contains(start + r)))
                        .collect();
                    let b = arrow::compute::filter_record_batch(&b, &keep)
                        .map_err(|e| StorageError::arrow("compaction filter", e))?;
                    if b.num_rows() == 0 {
                        continue;
                    }
                    let n = b.num_rows();
                    let fncols = f.ncols();
                    let mut cols = Vec::with_capacity(types.len() + 2);
                    for (i, ty) in types.iter().enumerate() {
                        cols.push(if i < fncols {
                            b.column(i).clone()
                        } else {
                            crate::arrow_conv::null_column(*ty, n)
                        });
                    }
                    // a bulk file's LSN is its commit LSN (the column is 0)
                    let lsn_col = if f.meta.min_lsn == f.meta.max_lsn {
                        Arc::new(UInt64Array::from(vec![f.meta.max_lsn.0; n])) as ArrayRef
                    } else {
                        b.column(fncols).clone()
                    };
                    cols.push(lsn_col);
                    cols.push(b.column(fncols + 1).clone());
                    let out = arrow::record_batch::RecordBatch::try_new(schema.clone(), cols)
                        .map_err(|e| StorageError::arrow("compaction batch", e))?;
                    w.push(out)?;
                    if w.approx_bytes() >= COMPACTION_FILE_BYTES {
                        let full =
                            std::mem::replace(&mut w, ColumnFileWriter::new(columns.clone())?);
                        outputs.push(self.finish_column_file(full)?);
                    }
                }
            }
            if w.rows() > 0 {
                outputs.push(self.finish_column_file(w)?);
            }
            Ok(())
        })();
        match r {
            Ok(()) => Ok(outputs),
            Err(e) => {
                self.delete_files(outputs.iter().map(|f| column_file_name(f.meta.id)));
                Err(e)
            }
        }
    }

    fn finish_column_file(&self, w: ColumnFileWriter) -> Result<Arc<ColumnFile>> {
        let id = self.alloc_file_id();
        let (bytes, meta) = w.finish(id, None)?;
        self.store
            .put(&format!("{}/{}", self.rel_dir, column_file_name(id)), bytes)?;
        Ok(Arc::new(ColumnFile::open(
            &self.store,
            &self.rel_dir,
            meta,
            Default::default(),
        )?))
    }
}

/// A column file with more than a fifth of its rows deleted.
fn is_dirty(f: &ColumnFile) -> bool {
    let d = f.deletes.lock().len();
    f.meta.rows > 0 && d * 5 > f.meta.rows
}

/// Applies to the outputs the deletes recorded in the inputs after their
/// marks (commit lock held, so no delete is in flight). An input row `r`
/// that was live at the mark is output row `base + r - dropped_before(r)`
/// of the concatenated outputs.
fn carry_deletes(inputs: &[ColInput], outputs: &[Arc<ColumnFile>]) {
    let mut starts = Vec::with_capacity(outputs.len());
    let mut acc = 0u64;
    for f in outputs {
        starts.push(acc);
        acc += f.meta.rows;
    }
    let mut late: Vec<(Lsn, u64)> = Vec::new();
    let mut base = 0u64;
    for i in inputs {
        let d = i.file.deletes.lock();
        for &(lsn, row) in d.entries_from(i.mark) {
            // `row` was live at the mark (a row is deleted once), so the
            // rank counts exactly the dropped rows before it.
            let kept_before = u64::from(row) - i.dropped.rank(row);
            late.push((lsn, base + kept_before));
        }
        base += i.file.meta.rows - i.dropped.len();
    }
    // a delete map takes its entries in LSN order
    late.sort_by_key(|&(lsn, _)| lsn);
    for (lsn, pos) in late {
        let o = starts.partition_point(|&s| s <= pos).saturating_sub(1);
        if let (Some(f), Some(&s)) = (outputs.get(o), starts.get(o)) {
            f.deletes.lock().delete(lsn, (pos - s) as u32);
        }
    }
}
