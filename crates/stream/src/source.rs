//! Sources: files (text lines, CSV, JSON lines) replayable by byte offset, a
//! TCP socket, a rate-controlled generator and Nexmark.
//!
//! Invariant: a source's snapshot is the position *after* the last record it
//! emitted; `restore` seeks there, so records before a barrier are never
//! re-emitted and records after it are always re-emitted (the socket source
//! cannot rewind and is at-most-once).

use std::fs;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::marker::PhantomData;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StreamError};
use crate::operator::SubtaskInfo;
use crate::types::{AnyBatch, Data};

/// What a poll produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourcePoll {
    /// Records were (or may be) emitted; poll again.
    Ready,
    /// Nothing to emit now; poll again after at most this long.
    Idle(Duration),
    /// The source is exhausted (bounded).
    Finished,
}

/// A typed source instance (one per subtask).
pub trait SourceReader<T>: Send {
    /// Appends up to `max` records to `out`.
    fn poll(&mut self, out: &mut Vec<T>, max: usize) -> Result<SourcePoll>;
    /// The current position.
    fn snapshot(&self) -> Result<Vec<u8>>;
    /// Seeks to a position taken by `snapshot`.
    fn restore(&mut self, state: &[u8]) -> Result<()>;
}

/// Type-erased source used by the task loop.
pub trait ErasedSource: Send {
    /// Polls up to `max` records.
    fn poll(&mut self, max: usize) -> Result<(Option<AnyBatch>, usize, SourcePoll)>;
    /// The current position.
    fn snapshot(&self) -> Result<Vec<u8>>;
    /// Seeks to a snapshot.
    fn restore(&mut self, state: &[u8]) -> Result<()>;
}

/// Adapter from `SourceReader<T>` to `ErasedSource`.
pub struct SourceAdapter<T, R> {
    reader: R,
    _t: PhantomData<fn() -> T>,
}

impl<T, R> SourceAdapter<T, R> {
    /// Wraps a reader.
    pub fn new(reader: R) -> Self {
        SourceAdapter {
            reader,
            _t: PhantomData,
        }
    }
}

impl<T: Data, R: SourceReader<T>> ErasedSource for SourceAdapter<T, R> {
    fn poll(&mut self, max: usize) -> Result<(Option<AnyBatch>, usize, SourcePoll)> {
        let mut out = Vec::with_capacity(max.min(4096));
        let st = self.reader.poll(&mut out, max)?;
        let n = out.len();
        let b = if out.is_empty() {
            None
        } else {
            Some(Box::new(out) as AnyBatch)
        };
        Ok((b, n, st))
    }
    fn snapshot(&self) -> Result<Vec<u8>> {
        self.reader.snapshot()
    }
    fn restore(&mut self, state: &[u8]) -> Result<()> {
        self.reader.restore(state)
    }
}

/// A byte range of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSplit {
    /// The file.
    pub path: PathBuf,
    /// First byte (a line starting at or after it belongs to this split).
    pub start: u64,
    /// End (a line starting at or after it belongs to the next split).
    pub end: u64,
}

/// Lists the input files of `path`: the file itself, or every file of a
/// directory whose name does not start with `_` or `.`, sorted by name.
pub fn list_input_files(path: &Path) -> Result<Vec<(PathBuf, u64)>> {
    let meta = fs::metadata(path).map_err(|e| StreamError::io(path.display().to_string(), e))?;
    if meta.is_file() {
        return Ok(vec![(path.to_path_buf(), meta.len())]);
    }
    let mut files = Vec::new();
    let rd = fs::read_dir(path).map_err(|e| StreamError::io(path.display().to_string(), e))?;
    for entry in rd {
        let entry = entry.map_err(|e| StreamError::io(path.display().to_string(), e))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('_') || name.starts_with('.') {
            continue;
        }
        let m = entry
            .metadata()
            .map_err(|e| StreamError::io(name.clone(), e))?;
        if m.is_file() {
            files.push((entry.path(), m.len()));
        }
    }
    files.sort();
    Ok(files)
}

/// Splits the input into ranges and gives subtask `index` of `parallelism`
/// every `parallelism`-th one. Deterministic: every attempt and process
/// computes the same plan.
pub fn plan_splits(path: &Path, index: usize, parallelism: usize) -> Result<Vec<FileSplit>> {
    let files = list_input_files(path)?;
    let total: u64 = files.iter().map(|f| f.1).sum();
    let target = (total / parallelism.max(1) as u64).clamp(1 << 20, 64 << 20);
    let mut all = Vec::new();
    for (p, len) in files {
        let mut start = 0;
        while start < len {
            let end = (start + target).min(len);
            all.push(FileSplit {
                path: p.clone(),
                start,
                end,
            });
            start = end;
        }
    }
    Ok(all
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % parallelism.max(1) == index)
        .map(|(_, s)| s)
        .collect())
}

/// Parses one line (without its newline) into a record.
pub type LineParser<T> = fn(&[u8], &Path, u64) -> Result<T>;

/// Text line parser.
pub fn parse_text(line: &[u8], path: &Path, pos: u64) -> Result<String> {
    match std::str::from_utf8(line) {
        Ok(s) => Ok(s.to_owned()),
        Err(e) => Err(StreamError::Parse {
            what: format!("{}@{}", path.display(), pos),
            detail: e.to_string(),
        }),
    }
}

/// CSV line parser (comma-separated, `"` quoting with `""` escapes).
pub fn parse_csv(line: &[u8], path: &Path, pos: u64) -> Result<Vec<String>> {
    let s = parse_text(line, path, pos)?;
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return Err(StreamError::Parse {
            what: format!("{}@{}", path.display(), pos),
            detail: "unterminated quote".into(),
        });
    }
    fields.push(cur);
    Ok(fields)
}

/// JSON-lines parser.
pub fn parse_json<T: DeserializeOwned>(line: &[u8], path: &Path, pos: u64) -> Result<T> {
    serde_json::from_slice(line).map_err(|e| StreamError::Parse {
        what: format!("{}@{}", path.display(), pos),
        detail: e.to_string(),
    })
}

#[derive(Serialize, Deserialize)]
struct FileOffset {
    split: usize,
    pos: u64,
}

/// Line-oriented file source over this subtask's splits.
pub struct FileSource<T> {
    splits: Vec<FileSplit>,
    split: usize,
    pos: u64,
    reader: Option<BufReader<fs::File>>,
    parse: LineParser<T>,
    buf: Vec<u8>,
    skip_blank: bool,
}

impl<T: Data> FileSource<T> {
    /// A source over `path` for one subtask.
    pub fn new(
        path: &Path,
        info: &SubtaskInfo,
        parse: LineParser<T>,
        skip_blank: bool,
    ) -> Result<Self> {
        let splits = plan_splits(path, info.index, info.parallelism)?;
        let pos = splits.first().map_or(0, |s| s.start);
        Ok(FileSource {
            splits,
            split: 0,
            pos,
            reader: None,
            parse,
            buf: Vec::with_capacity(256),
            skip_blank,
        })
    }

    /// Opens the current split at `self.pos`; if `self.pos` is the split's
    /// start and not 0, skips the partial line that belongs to the previous split.
    fn open(&mut self) -> Result<()> {
        let s = &self.splits[self.split];
        let f = fs::File::open(&s.path)
            .map_err(|e| StreamError::io(s.path.display().to_string(), e))?;
        let mut r = BufReader::with_capacity(1 << 20, f);
        if self.pos == s.start && s.start > 0 {
            r.seek(SeekFrom::Start(s.start - 1))
                .map_err(|e| StreamError::io(s.path.display().to_string(), e))?;
            self.buf.clear();
            let n = r
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| StreamError::io(s.path.display().to_string(), e))?;
            self.pos = s.start - 1 + n as u64;
        } else {
            r.seek(SeekFrom::Start(self.pos))
                .map_err(|e| StreamError::io(s.path.display().to_string(), e))?;
        }
        self.reader = Some(r);
        Ok(())
    }
}

impl<T: Data> SourceReader<T> for FileSource<T> {
    fn poll(&mut self, out: &mut Vec<T>, max: usize) -> Result<SourcePoll> {
        let limit = out.len().saturating_add(max);
        while out.len() < limit {
            if self.split >= self.splits.len() {
                return Ok(SourcePoll::Finished);
            }
            if self.reader.is_none() {
                self.open()?;
            }
            let end = self.splits[self.split].end;
            if self.pos >= end {
                self.next_split();
                continue;
            }
            let Some(r) = self.reader.as_mut() else {
                return Err(StreamError::Internal("file source reader missing".into()));
            };
            self.buf.clear();
            let n = r.read_until(b'\n', &mut self.buf).map_err(|e| {
                StreamError::io(self.splits[self.split].path.display().to_string(), e)
            })?;
            if n == 0 {
                self.next_split();
                continue;
            }
            let line_pos = self.pos;
            self.pos += n as u64;
            let mut line = &self.buf[..];
            if line.last() == Some(&b'\n') {
                line = &line[..line.len() - 1];
            }
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            if self.skip_blank && line.is_empty() {
                continue;
            }
            out.push((self.parse)(line, &self.splits[self.split].path, line_pos)?);
        }
        Ok(SourcePoll::Ready)
    }
    fn snapshot(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(&FileOffset {
            split: self.split,
            pos: self.pos,
        })?)
    }
    fn restore(&mut self, state: &[u8]) -> Result<()> {
        let o: FileOffset = serde_json::from_slice(state)?;
        if o.split > self.splits.len() {
            return Err(StreamError::Checkpoint(format!(
                "file source offset names split {} of {}",
                o.split,
                self.splits.len()
            )));
        }
        self.split = o.split;
        self.pos = o.pos;
        self.reader = None;
        Ok(())
    }
}

impl<T> FileSource<T> {
    fn next_split(&mut self) {
        self.split += 1;
        self.reader = None;
        if let Some(s) = self.splits.get(self.split) {
            self.pos = s.start;
        }
    }
}

/// Reads a whole text file into lines (helper for tests and baselines).
pub fn read_all(path: &Path) -> Result<Vec<u8>> {
    let mut f = fs::File::open(path).map_err(|e| StreamError::io(path.display().to_string(), e))?;
    let mut v = Vec::new();
    f.read_to_end(&mut v)
        .map_err(|e| StreamError::io(path.display().to_string(), e))?;
    Ok(v)
}

/// In-process generator: subtask `i` of `p` produces `f(i), f(i+p), ...`
/// (sequence numbers below `count`, if bounded), at `rate` records/s in
/// total if set. Replayable by sequence number.
pub struct GeneratorSource<T, F> {
    f: F,
    next: u64,
    step: u64,
    count: Option<u64>,
    rate_per_subtask: Option<f64>,
    started: Option<(Instant, u64)>,
    _t: PhantomData<fn() -> T>,
}

impl<T, F> GeneratorSource<T, F> {
    /// A generator for one subtask.
    pub fn new(f: F, info: &SubtaskInfo, count: Option<u64>, rate: Option<f64>) -> Self {
        GeneratorSource {
            f,
            next: info.index as u64,
            step: info.parallelism.max(1) as u64,
            count,
            rate_per_subtask: rate.map(|r| r / info.parallelism.max(1) as f64),
            started: None,
            _t: PhantomData,
        }
    }
}

impl<T: Data, F: FnMut(u64) -> T + Send> SourceReader<T> for GeneratorSource<T, F> {
    fn poll(&mut self, out: &mut Vec<T>, max: usize) -> Result<SourcePoll> {
        let mut budget = max as u64;
        if let Some(rate) = self.rate_per_subtask {
            let (t0, n0) = *self.started.get_or_insert((Instant::now(), self.next));
            let done = (self.next - n0) / self.step;
            let due = (t0.elapsed().as_secs_f64() * rate) as u64 + 1;
            if due <= done {
                let next_at = (done + 1) as f64 / rate;
                let wait = next_at - t0.elapsed().as_secs_f64();
                return Ok(SourcePoll::Idle(Duration::from_secs_f64(
                    wait.clamp(0.0, 0.1),
                )));
            }
            budget = budget.min(due - done);
        }
        for _ in 0..budget {
            if let Some(c) = self.count {
                if self.next >= c {
                    return Ok(SourcePoll::Finished);
                }
            }
            out.push((self.f)(self.next));
            self.next += self.step;
        }
        if let Some(c) = self.count {
            if self.next >= c {
                return Ok(SourcePoll::Finished);
            }
        }
        Ok(SourcePoll::Ready)
    }
    fn snapshot(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(&self.next)?)
    }
    fn restore(&mut self, state: &[u8]) -> Result<()> {
        self.next = serde_json::from_slice(state)?;
        self.started = None;
        Ok(())
    }
}

/// Text lines from a TCP socket (not replayable: at-most-once across restarts).
pub struct SocketSource {
    addr: String,
    reader: Option<BufReader<TcpStream>>,
    buf: Vec<u8>,
    bytes: u64,
}

impl SocketSource {
    /// Connects lazily to `addr`.
    pub fn new(addr: &str) -> Self {
        SocketSource {
            addr: addr.to_string(),
            reader: None,
            buf: Vec::new(),
            bytes: 0,
        }
    }
}

impl SourceReader<String> for SocketSource {
    fn poll(&mut self, out: &mut Vec<String>, max: usize) -> Result<SourcePoll> {
        if self.reader.is_none() {
            let s = TcpStream::connect(&self.addr)
                .map_err(|e| StreamError::io(self.addr.clone(), e))?;
            s.set_read_timeout(Some(Duration::from_millis(5)))
                .map_err(|e| StreamError::io(self.addr.clone(), e))?;
            self.reader = Some(BufReader::new(s));
        }
        let Some(r) = self.reader.as_mut() else {
            return Err(StreamError::Internal("socket reader missing".into()));
        };
        let limit = out.len().saturating_add(max);
        while out.len() < limit {
            match r.read_until(b'\n', &mut self.buf) {
                Ok(0) => return Ok(SourcePoll::Finished),
                Ok(n) => {
                    if self.buf.last() != Some(&b'\n') {
                        continue; // partial line at a timeout boundary; keep reading
                    }
                    self.bytes += n as u64;
                    let line = &self.buf[..self.buf.len() - 1];
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    out.push(parse_text(line, Path::new(&self.addr), self.bytes)?);
                    self.buf.clear();
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(if out.is_empty() {
                        SourcePoll::Idle(Duration::from_millis(1))
                    } else {
                        SourcePoll::Ready
                    });
                }
                Err(e) => return Err(StreamError::io(self.addr.clone(), e)),
            }
        }
        Ok(SourcePoll::Ready)
    }
    fn snapshot(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(&self.bytes)?)
    }
    fn restore(&mut self, state: &[u8]) -> Result<()> {
        self.bytes = serde_json::from_slice(state)?;
        Ok(())
    }
}

/// Nexmark events from the `nexmark` crate; subtask `i` of `p` generates
/// event numbers `i, i+p, ...` below `events`. Replayable by event number.
pub struct NexmarkSource {
    cfg: nexmark::config::NexmarkConfig,
    gen: nexmark::EventGenerator,
    emitted: u64,
    index: u64,
    step: u64,
    events: u64,
}

impl NexmarkSource {
    /// A Nexmark source for one subtask.
    pub fn new(cfg: nexmark::config::NexmarkConfig, events: u64, info: &SubtaskInfo) -> Self {
        let index = info.index as u64;
        let step = info.parallelism.max(1) as u64;
        let gen = nexmark::EventGenerator::new(cfg.clone())
            .with_offset(index)
            .with_step(step);
        NexmarkSource {
            cfg,
            gen,
            emitted: 0,
            index,
            step,
            events,
        }
    }
}

impl SourceReader<nexmark::event::Event> for NexmarkSource {
    fn poll(&mut self, out: &mut Vec<nexmark::event::Event>, max: usize) -> Result<SourcePoll> {
        for _ in 0..max {
            if self.index + self.emitted * self.step >= self.events {
                return Ok(SourcePoll::Finished);
            }
            match self.gen.next() {
                Some(e) => out.push(e),
                None => return Ok(SourcePoll::Finished),
            }
            self.emitted += 1;
        }
        Ok(SourcePoll::Ready)
    }
    fn snapshot(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(&self.emitted)?)
    }
    fn restore(&mut self, state: &[u8]) -> Result<()> {
        self.emitted = serde_json::from_slice(state)?;
        self.gen = nexmark::EventGenerator::new(self.cfg.clone())
            .with_offset(self.index + self.emitted * self.step)
            .with_step(self.step);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn info(index: usize, parallelism: usize) -> SubtaskInfo {
        SubtaskInfo {
            index,
            parallelism,
            attempt: 0,
            name: "t".into(),
        }
    }

    #[test]
    fn splits_cover_every_line_once_and_replay_from_offset() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| StreamError::io("tmp", e))?;
        let p = dir.path().join("in.txt");
        let mut f = fs::File::create(&p).map_err(|e| StreamError::io("f", e))?;
        let mut expect = Vec::new();
        for i in 0..200_000 {
            let l = format!("line {i} {}", "x".repeat(i % 13));
            writeln!(f, "{l}").map_err(|e| StreamError::io("f", e))?;
            expect.push(l);
        }
        drop(f);
        let mut got = Vec::new();
        for idx in 0..3 {
            let mut s = FileSource::new(&p, &info(idx, 3), parse_text, false)?;
            let mut out = Vec::new();
            // read some, snapshot, read into a throwaway, restore and continue
            s.poll(&mut out, 1000)?;
            let snap = s.snapshot()?;
            let mut tmp = Vec::new();
            s.poll(&mut tmp, 5000)?;
            s.restore(&snap)?;
            while s.poll(&mut out, 4096)? != SourcePoll::Finished {}
            got.extend(out);
        }
        got.sort();
        expect.sort();
        assert_eq!(got.len(), expect.len());
        assert_eq!(got, expect);
        Ok(())
    }

    #[test]
    fn csv_quotes() -> Result<()> {
        let v = parse_csv(br#"a,"b,c","d""e""#, Path::new("x"), 0)?;
        assert_eq!(v, vec!["a", "b,c", "d\"e"]);
        assert!(parse_csv(br#"a,"b"#, Path::new("x"), 0).is_err());
        Ok(())
    }

    #[test]
    fn invalid_utf8_is_an_error_not_a_panic() {
        assert!(parse_text(&[0xff, 0xfe], Path::new("x"), 0).is_err());
    }
}
