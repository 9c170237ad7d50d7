//! Sinks: the two-phase collect sink (in memory), the exactly-once file
//! sink, stdout and `for_each`.
//!
//! Two-phase protocol (both transactional sinks):
//! * records since the last barrier are *current*;
//! * at `snapshot(n)` current becomes *pending(n)* (file sink: the
//!   in-progress file is closed and renamed `.pending-<s>-<n>`); the list of
//!   pending entries is the sink's snapshot;
//! * at `checkpoint_complete(n)` every pending entry `<= n` is committed
//!   (file sink: renamed to `part-<s>-<n>`); the final checkpoint commits all;
//! * at `restore` every pending entry of the snapshot is committed (the
//!   checkpoint restored from is complete), then every other pending or
//!   in-progress file of the subtask is deleted: its records will be replayed.
//!
//! Commit is idempotent (an entry already committed is skipped), so a commit
//! repeated after a failure never duplicates output.

use std::collections::HashSet;
use std::fs;
use std::io::{BufWriter, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StreamError};
use crate::operator::{Emitter, Operator};
use crate::types::{downcast, AnyBatch, CheckpointId, Data};

/// Tag of the final snapshot taken when the input ends.
pub const FINAL_TAG: u64 = u64::MAX;

struct CollectShared<T> {
    rows: Vec<T>,
    committed: HashSet<(usize, u64)>,
}

/// Handle to the output of a `collect()` sink: holds only committed records.
pub struct CollectHandle<T> {
    shared: Arc<Mutex<CollectShared<T>>>,
}

impl<T> Clone for CollectHandle<T> {
    fn clone(&self) -> Self {
        CollectHandle {
            shared: self.shared.clone(),
        }
    }
}

impl<T: Data> Default for CollectHandle<T> {
    fn default() -> Self {
        CollectHandle {
            shared: Arc::new(Mutex::new(CollectShared {
                rows: Vec::new(),
                committed: HashSet::new(),
            })),
        }
    }
}

impl<T: Data> CollectHandle<T> {
    /// A copy of the committed records.
    pub fn get(&self) -> Vec<T> {
        self.shared.lock().rows.clone()
    }
    /// Takes the committed records out.
    pub fn take(&self) -> Vec<T> {
        std::mem::take(&mut self.shared.lock().rows)
    }
    /// Number of committed records.
    pub fn len(&self) -> usize {
        self.shared.lock().rows.len()
    }
    /// Whether nothing was committed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn commit(&self, subtask: usize, tag: u64, rows: Vec<T>) {
        let mut s = self.shared.lock();
        if s.committed.insert((subtask, tag)) {
            s.rows.extend(rows);
        }
    }
}

/// In-memory two-phase sink behind `DataStream::collect`.
pub struct CollectSinkOp<T> {
    handle: CollectHandle<T>,
    subtask: usize,
    current: Vec<T>,
    pending: Vec<(u64, Vec<T>)>,
}

impl<T: Data> CollectSinkOp<T> {
    /// A sink for subtask `subtask` committing into `handle`.
    pub fn new(handle: CollectHandle<T>, subtask: usize) -> Self {
        CollectSinkOp {
            handle,
            subtask,
            current: Vec::new(),
            pending: Vec::new(),
        }
    }
}

impl<T: Data> Operator for CollectSinkOp<T> {
    fn process(&mut self, _input: usize, batch: AnyBatch, _out: &mut dyn Emitter) -> Result<()> {
        let mut v = downcast::<T>(batch)?;
        self.current.append(&mut v);
        Ok(())
    }
    fn watermark(&mut self, _wm: i64, _out: &mut dyn Emitter) -> Result<()> {
        Ok(())
    }
    fn snapshot(&mut self, id: CheckpointId) -> Result<Option<Vec<u8>>> {
        let cur = std::mem::take(&mut self.current);
        if !cur.is_empty() {
            self.pending.push((id.0, cur));
        }
        Ok(Some(serde_json::to_vec(&self.pending)?))
    }
    fn restore(&mut self, state: &[u8]) -> Result<()> {
        let pending: Vec<(u64, Vec<T>)> = serde_json::from_slice(state)?;
        for (tag, rows) in pending {
            self.handle.commit(self.subtask, tag, rows);
        }
        self.pending.clear();
        self.current.clear();
        Ok(())
    }
    fn checkpoint_complete(&mut self, id: CheckpointId, is_final: bool) -> Result<()> {
        let mut keep = Vec::new();
        for (tag, rows) in self.pending.drain(..) {
            if is_final || tag <= id.0 {
                self.handle.commit(self.subtask, tag, rows);
            } else {
                keep.push((tag, rows));
            }
        }
        self.pending = keep;
        Ok(())
    }
    fn is_committing_sink(&self) -> bool {
        true
    }
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct PendingFile {
    tag: u64,
}

/// Exactly-once file sink: one text line per record, two-phase commit by rename.
pub struct FileSinkOp<T, F> {
    dir: PathBuf,
    subtask: usize,
    attempt: u32,
    format: F,
    writer: Option<BufWriter<fs::File>>,
    seq: u64,
    line: String,
    pending: Vec<PendingFile>,
    initialized: bool,
    _t: PhantomData<fn(T)>,
}

fn tag_name(tag: u64) -> String {
    if tag == FINAL_TAG {
        "final".to_string()
    } else {
        format!("{tag:012}")
    }
}

impl<T: Data, F: FnMut(&T, &mut String) + Send> FileSinkOp<T, F> {
    /// A sink writing into directory `dir` (created if missing).
    pub fn new(dir: &Path, subtask: usize, attempt: u32, format: F) -> Result<Self> {
        fs::create_dir_all(dir).map_err(|e| StreamError::io(dir.display().to_string(), e))?;
        Ok(FileSinkOp {
            dir: dir.to_path_buf(),
            subtask,
            attempt,
            format,
            writer: None,
            seq: 0,
            line: String::new(),
            pending: Vec::new(),
            initialized: false,
            _t: PhantomData,
        })
    }

    fn inprogress_path(&self) -> PathBuf {
        self.dir.join(format!(
            ".inprogress-{}-{}-{}",
            self.subtask, self.attempt, self.seq
        ))
    }
    fn pending_path(&self, tag: u64) -> PathBuf {
        self.dir
            .join(format!(".pending-{}-{}", self.subtask, tag_name(tag)))
    }
    fn part_path(&self, tag: u64) -> PathBuf {
        self.dir
            .join(format!("part-{}-{}", self.subtask, tag_name(tag)))
    }

    /// Deletes pending and in-progress files of this subtask that are not in `self.pending`.
    fn cleanup(&mut self) -> Result<()> {
        self.initialized = true;
        let keep: HashSet<PathBuf> = self
            .pending
            .iter()
            .map(|p| self.pending_path(p.tag))
            .collect();
        let prefixes = [
            format!(".pending-{}-", self.subtask),
            format!(".inprogress-{}-", self.subtask),
        ];
        let rd = fs::read_dir(&self.dir)
            .map_err(|e| StreamError::io(self.dir.display().to_string(), e))?;
        for entry in rd {
            let entry = entry.map_err(|e| StreamError::io(self.dir.display().to_string(), e))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if prefixes.iter().any(|p| name.starts_with(p.as_str()))
                && !keep.contains(&entry.path())
            {
                fs::remove_file(entry.path()).map_err(|e| StreamError::io(name.clone(), e))?;
            }
        }
        Ok(())
    }

    fn commit(&self, tag: u64) -> Result<()> {
        let from = self.pending_path(tag);
        let to = self.part_path(tag);
        if from.exists() {
            fs::rename(&from, &to).map_err(|e| StreamError::io(from.display().to_string(), e))?;
        } else if !to.exists() {
            return Err(StreamError::Checkpoint(format!(
                "pending file {} vanished before commit",
                from.display()
            )));
        }
        Ok(())
    }

    fn precommit(&mut self, tag: u64) -> Result<()> {
        if let Some(mut w) = self.writer.take() {
            w.flush()
                .map_err(|e| StreamError::io(self.dir.display().to_string(), e))?;
            let f = w
                .into_inner()
                .map_err(|e| StreamError::io(self.dir.display().to_string(), e.into_error()))?;
            f.sync_all()
                .map_err(|e| StreamError::io(self.dir.display().to_string(), e))?;
            let from = self.inprogress_path();
            let to = self.pending_path(tag);
            fs::rename(&from, &to).map_err(|e| StreamError::io(from.display().to_string(), e))?;
            self.pending.push(PendingFile { tag });
            self.seq += 1;
        }
        Ok(())
    }
}

impl<T: Data, F: FnMut(&T, &mut String) + Send> Operator for FileSinkOp<T, F> {
    fn process(&mut self, _input: usize, batch: AnyBatch, _out: &mut dyn Emitter) -> Result<()> {
        if !self.initialized {
            self.cleanup()?;
        }
        let v = downcast::<T>(batch)?;
        if self.writer.is_none() {
            let p = self.inprogress_path();
            let f =
                fs::File::create(&p).map_err(|e| StreamError::io(p.display().to_string(), e))?;
            self.writer = Some(BufWriter::with_capacity(1 << 16, f));
        }
        let Some(w) = self.writer.as_mut() else {
            return Err(StreamError::Internal("file sink writer missing".into()));
        };
        for r in &v {
            self.line.clear();
            (self.format)(r, &mut self.line);
            self.line.push('\n');
            w.write_all(self.line.as_bytes())
                .map_err(|e| StreamError::io(self.dir.display().to_string(), e))?;
        }
        Ok(())
    }
    fn watermark(&mut self, _wm: i64, _out: &mut dyn Emitter) -> Result<()> {
        Ok(())
    }
    fn snapshot(&mut self, id: CheckpointId) -> Result<Option<Vec<u8>>> {
        if !self.initialized {
            self.cleanup()?;
        }
        self.precommit(id.0)?;
        Ok(Some(serde_json::to_vec(&self.pending)?))
    }
    fn restore(&mut self, state: &[u8]) -> Result<()> {
        let pending: Vec<PendingFile> = serde_json::from_slice(state)?;
        for p in &pending {
            self.commit(p.tag)?;
        }
        self.pending.clear();
        self.cleanup()
    }
    fn checkpoint_complete(&mut self, id: CheckpointId, is_final: bool) -> Result<()> {
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.pending) {
            if is_final || p.tag <= id.0 {
                self.commit(p.tag)?;
            } else {
                keep.push(p);
            }
        }
        self.pending = keep;
        Ok(())
    }
    fn is_committing_sink(&self) -> bool {
        true
    }
}

/// Reads every committed line of a file sink's directory (`part-*` files).
pub fn read_committed_lines(dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let rd = fs::read_dir(dir).map_err(|e| StreamError::io(dir.display().to_string(), e))?;
    let mut names: Vec<PathBuf> = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| StreamError::io(dir.display().to_string(), e))?;
        if entry.file_name().to_string_lossy().starts_with("part-") {
            names.push(entry.path());
        }
    }
    names.sort();
    for p in names {
        let s = fs::read_to_string(&p).map_err(|e| StreamError::io(p.display().to_string(), e))?;
        out.extend(s.lines().map(|l| l.to_string()));
    }
    Ok(out)
}

/// Calls a function for every record (side effects; at-least-once on restart).
pub struct ForEachSinkOp<T, F> {
    f: F,
    _t: PhantomData<fn(T)>,
}

impl<T, F> ForEachSinkOp<T, F> {
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        ForEachSinkOp { f, _t: PhantomData }
    }
}

impl<T: Data, F: FnMut(T) + Send> Operator for ForEachSinkOp<T, F> {
    fn process(&mut self, _input: usize, batch: AnyBatch, _out: &mut dyn Emitter) -> Result<()> {
        for r in downcast::<T>(batch)? {
            (self.f)(r);
        }
        Ok(())
    }
    fn watermark(&mut self, _wm: i64, _out: &mut dyn Emitter) -> Result<()> {
        Ok(())
    }
}

/// Prints records to stdout with `Debug`-free formatting by a user function.
pub struct PrintSinkOp<T, F> {
    format: F,
    line: String,
    _t: PhantomData<fn(T)>,
}

impl<T, F> PrintSinkOp<T, F> {
    /// Wraps the formatter.
    pub fn new(format: F) -> Self {
        PrintSinkOp {
            format,
            line: String::new(),
            _t: PhantomData,
        }
    }
}

impl<T: Data, F: FnMut(&T, &mut String) + Send> Operator for PrintSinkOp<T, F> {
    fn process(&mut self, _input: usize, batch: AnyBatch, _out: &mut dyn Emitter) -> Result<()> {
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        for r in downcast::<T>(batch)? {
            self.line.clear();
            (self.format)(&r, &mut self.line);
            self.line.push('\n');
            lock.write_all(self.line.as_bytes())
                .map_err(|e| StreamError::io("stdout", e))?;
        }
        Ok(())
    }
    fn watermark(&mut self, _wm: i64, _out: &mut dyn Emitter) -> Result<()> {
        Ok(())
    }
}
