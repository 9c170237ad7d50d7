//! Row tablet: an LSM tree of multi-version records `key -> (row | delete, LSN)`
//! serving point lookups.
//!
//! * The memtable is a `crossbeam_skiplist::SkipMap` ordered by (key, LSN
//!   descending). Exactly one thread inserts (the shard's commit leader);
//!   any number read concurrently without locks.
//! * Shard files ("row files") are immutable sorted runs: data blocks of
//!   entries, each block with a CRC32C; a block index; a bloom filter over
//!   keys; a footer with the LSN range, entry count and its own CRC. Every
//!   block is checked against its CRC when read, so a flipped byte is an
//!   error naming the file, never wrong data.
//! * Levels: L0 holds flushed files (key ranges overlap, newest first); L1
//!   holds one sorted run of non-overlapping files. Compaction merges all of
//!   L0 with the L1 files whose key ranges overlap L0's into new L1 files,
//!   keeping only the newest version of each key and dropping delete
//!   markers (L1 is the bottom level, and every older version of a key in
//!   the merged range is in the merge). See `shard::background`.
//!
//! Invariant the readers rely on: a [`RowVersion`] (memtable + file lists)
//! is immutable once published; writers publish a new `Arc` instead.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering as AtOrd};
use std::sync::Arc;

use crossbeam_skiplist::SkipMap;
use eddy_common::{FileId, Lsn};
use serde::{Deserialize, Serialize};

use crate::codec::{put_varint, stable_hash, Reader};
use crate::error::{Result, StorageError};
use crate::filestore::{FileBytes, FileStore};

/// Memtable key: user key ascending, then LSN descending.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MemKey {
    pub key: Vec<u8>,
    pub rev_lsn: u64,
}

impl MemKey {
    fn new(key: Vec<u8>, lsn: Lsn) -> MemKey {
        MemKey {
            key,
            rev_lsn: u64::MAX - lsn.0,
        }
    }
    pub fn lsn(&self) -> Lsn {
        Lsn(u64::MAX - self.rev_lsn)
    }
}

/// One version of a key: `None` is a delete marker.
pub type VersionValue = Option<Arc<[u8]>>;

#[derive(Default)]
pub struct RowMemtable {
    map: SkipMap<MemKey, VersionValue>,
    bytes: AtomicUsize,
}

impl RowMemtable {
    /// Single writer only (the shard commit leader).
    pub fn insert(&self, key: Vec<u8>, lsn: Lsn, value: VersionValue) {
        let n = key.len() + value.as_ref().map_or(0, |v| v.len()) + 64;
        self.map.insert(MemKey::new(key, lsn), value);
        self.bytes.fetch_add(n, AtOrd::Relaxed);
    }

    /// The newest version of `key` with LSN `<= at`.
    pub fn get(&self, key: &[u8], at: Lsn) -> Option<(Lsn, VersionValue)> {
        let probe = MemKey {
            key: key.to_vec(),
            rev_lsn: u64::MAX - at.0,
        };
        let e = self.map.lower_bound(Bound::Included(&probe))?;
        if e.key().key.as_slice() != key {
            return None;
        }
        Some((e.key().lsn(), e.value().clone()))
    }

    pub fn approx_bytes(&self) -> usize {
        self.bytes.load(AtOrd::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// All entries in (key, LSN desc) order.
    pub fn iter(&self) -> impl Iterator<Item = Entry> + '_ {
        self.map.iter().map(|e| Entry {
            key: e.key().key.clone(),
            lsn: e.key().lsn(),
            value: e.value().clone(),
        })
    }
}

/// One version, as iterated from memtables and files.
#[derive(Clone, Debug)]
pub struct Entry {
    pub key: Vec<u8>,
    pub lsn: Lsn,
    pub value: VersionValue,
}

// ---- row files ----

const ROW_MAGIC: u64 = 0x4544_4459_524f_5731; // "EDDYROW1"
const FOOTER_LEN: usize = 8 * 8 + 4;
const BLOCK_TARGET: usize = 16 * 1024;
const BLOOM_BITS_PER_KEY: usize = 10;
const BLOOM_PROBES: u32 = 7;

/// What the manifest records about a row file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RowFileMeta {
    pub id: FileId,
    pub level: u32,
    pub entries: u64,
    pub min_lsn: Lsn,
    pub max_lsn: Lsn,
    pub bytes: u64,
    /// A bulk-loaded file: every entry's LSN is `max_lsn` (the commit LSN,
    /// unknown when the file was written), whatever the entry says.
    #[serde(default)]
    pub bulk: bool,
}

struct BlockHandle {
    last_key: Vec<u8>,
    offset: usize,
    len: usize,
}

pub struct RowFile {
    pub meta: RowFileMeta,
    path: std::path::PathBuf,
    bytes: FileBytes,
    index: Vec<BlockHandle>,
    bloom: (usize, usize), // offset, len in bytes
}

/// Serialises sorted entries into a row file.
pub struct RowFileBuilder {
    buf: Vec<u8>,
    block: Vec<u8>,
    block_last_key: Vec<u8>,
    index: Vec<BlockHandle>,
    key_hashes: Vec<u64>,
    last_key: Option<Vec<u8>>,
    entries: u64,
    min_lsn: Lsn,
    max_lsn: Lsn,
}

impl Default for RowFileBuilder {
    fn default() -> Self {
        RowFileBuilder {
            buf: Vec::new(),
            block: Vec::new(),
            block_last_key: Vec::new(),
            index: Vec::new(),
            key_hashes: Vec::new(),
            last_key: None,
            entries: 0,
            min_lsn: Lsn::MAX,
            max_lsn: Lsn::ZERO,
        }
    }
}

impl RowFileBuilder {
    /// Entries must arrive in (key asc, LSN desc) order.
    pub fn add(&mut self, e: &Entry) {
        if self.last_key.as_deref() != Some(e.key.as_slice()) {
            self.key_hashes.push(stable_hash(&e.key));
            self.last_key = Some(e.key.clone());
        }
        put_varint(&mut self.block, e.key.len() as u64);
        self.block.extend_from_slice(&e.key);
        self.block.extend_from_slice(&e.lsn.0.to_le_bytes());
        match &e.value {
            None => self.block.push(0),
            Some(v) => {
                self.block.push(1);
                put_varint(&mut self.block, v.len() as u64);
                self.block.extend_from_slice(v);
            }
        }
        self.block_last_key.clear();
        self.block_last_key.extend_from_slice(&e.key);
        self.entries += 1;
        self.min_lsn = self.min_lsn.min(e.lsn);
        self.max_lsn = self.max_lsn.max(e.lsn);
        if self.block.len() >= BLOCK_TARGET {
            self.finish_block();
        }
    }

    fn finish_block(&mut self) {
        if self.block.is_empty() {
            return;
        }
        let crc = crc32c::crc32c(&self.block);
        let offset = self.buf.len();
        self.buf.extend_from_slice(&self.block);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.index.push(BlockHandle {
            last_key: std::mem::take(&mut self.block_last_key),
            offset,
            len: self.block.len(),
        });
        self.block.clear();
    }

    pub fn entries(&self) -> u64 {
        self.entries
    }

    pub fn approx_bytes(&self) -> usize {
        self.buf.len() + self.block.len()
    }

    /// Finishes the file: `(bytes, meta)` with the given id and level.
    pub fn finish(mut self, id: FileId, level: u32) -> (Vec<u8>, RowFileMeta) {
        self.finish_block();
        let mut idx = Vec::new();
        put_varint(&mut idx, self.index.len() as u64);
        for b in &self.index {
            put_varint(&mut idx, b.last_key.len() as u64);
            idx.extend_from_slice(&b.last_key);
            put_varint(&mut idx, b.offset as u64);
            put_varint(&mut idx, b.len as u64);
        }
        let idx_off = self.buf.len();
        let idx_crc = crc32c::crc32c(&idx);
        self.buf.extend_from_slice(&idx);
        self.buf.extend_from_slice(&idx_crc.to_le_bytes());

        let nbits = (self.key_hashes.len() * BLOOM_BITS_PER_KEY).max(64);
        let mut bloom = vec![0u8; nbits.div_ceil(8)];
        for &h in &self.key_hashes {
            for bit in bloom_bits(h, bloom.len() * 8) {
                bloom[bit / 8] |= 1 << (bit % 8);
            }
        }
        let bloom_off = self.buf.len();
        let bloom_crc = crc32c::crc32c(&bloom);
        self.buf.extend_from_slice(&bloom);
        self.buf.extend_from_slice(&bloom_crc.to_le_bytes());

        let mut footer = Vec::with_capacity(FOOTER_LEN);
        for v in [
            idx_off as u64,
            idx.len() as u64,
            bloom_off as u64,
            bloom.len() as u64,
            self.entries,
            self.min_lsn.0,
            self.max_lsn.0,
            ROW_MAGIC,
        ] {
            footer.extend_from_slice(&v.to_le_bytes());
        }
        let fcrc = crc32c::crc32c(&footer);
        footer.extend_from_slice(&fcrc.to_le_bytes());
        self.buf.extend_from_slice(&footer);
        let meta = RowFileMeta {
            id,
            level,
            entries: self.entries,
            min_lsn: if self.entries == 0 {
                Lsn::ZERO
            } else {
                self.min_lsn
            },
            max_lsn: self.max_lsn,
            bytes: self.buf.len() as u64,
            bulk: false,
        };
        (self.buf, meta)
    }
}

fn bloom_bits(h: u64, nbits: usize) -> impl Iterator<Item = usize> {
    let h1 = h as u32 as u64;
    let h2 = (h >> 32) | 1;
    (0..BLOOM_PROBES as u64)
        .map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % nbits as u64) as usize)
}

pub fn row_file_name(id: FileId) -> String {
    format!("{:016}.row", id.0)
}

impl RowFile {
    pub fn open(store: &FileStore, dir: &str, meta: RowFileMeta) -> Result<RowFile> {
        let rel = format!("{dir}/{}", row_file_name(meta.id));
        let path = store.display_path(&rel);
        let bytes = store.get(&rel)?;
        let corrupt = |d: &str| StorageError::corrupt(&path, d.to_string());
        let b = bytes.as_slice();
        if b.len() < FOOTER_LEN {
            return Err(corrupt("file shorter than its footer"));
        }
        let footer = &b[b.len() - FOOTER_LEN..];
        let fcrc = u32::from_le_bytes([
            footer[FOOTER_LEN - 4],
            footer[FOOTER_LEN - 3],
            footer[FOOTER_LEN - 2],
            footer[FOOTER_LEN - 1],
        ]);
        if crc32c::crc32c(&footer[..FOOTER_LEN - 4]) != fcrc {
            return Err(corrupt("footer checksum mismatch"));
        }
        let mut r = Reader::new(footer);
        let mut f = [0u64; 8];
        for v in f.iter_mut() {
            *v = r.u64().map_err(|_| corrupt("short footer"))?;
        }
        let [idx_off, idx_len, bloom_off, bloom_len, _entries, _, _, magic] = f;
        if magic != ROW_MAGIC {
            return Err(corrupt("bad magic"));
        }
        let (idx_off, idx_len) = (idx_off as usize, idx_len as usize);
        let idx = checked_region(b, idx_off, idx_len)
            .ok_or_else(|| corrupt("index checksum mismatch"))?;
        let (bloom_off, bloom_len) = (bloom_off as usize, bloom_len as usize);
        checked_region(b, bloom_off, bloom_len)
            .ok_or_else(|| corrupt("bloom filter checksum mismatch"))?;
        let mut r = Reader::new(idx);
        let parse =
            |r: &mut Reader| -> std::result::Result<Vec<BlockHandle>, crate::codec::Truncated> {
                let n = r.varint()? as usize;
                let mut v = Vec::with_capacity(n.min(1 << 20));
                for _ in 0..n {
                    let last_key = r.len_prefixed()?.to_vec();
                    let offset = r.varint()? as usize;
                    let len = r.varint()? as usize;
                    v.push(BlockHandle {
                        last_key,
                        offset,
                        len,
                    });
                }
                Ok(v)
            };
        let index = parse(&mut r).map_err(|_| corrupt("undecodable block index"))?;
        for h in &index {
            if h.offset + h.len + 4 > idx_off {
                return Err(corrupt("block index points outside the data"));
            }
        }
        Ok(RowFile {
            meta,
            path,
            bytes,
            index,
            bloom: (bloom_off, bloom_len),
        })
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The smallest and largest key of the file (`None` when empty). Reads
    /// the first block: compaction asks, once per file, to find the L1
    /// files an L0 merge overlaps.
    pub fn key_range(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(last) = self.index.last() else {
            return Ok(None);
        };
        let mut first = Vec::new();
        self.decode_block(0, &mut first)?;
        Ok(first
            .into_iter()
            .next()
            .map(|e| (e.key, last.last_key.clone())))
    }

    fn may_contain(&self, key: &[u8]) -> bool {
        let (off, len) = self.bloom;
        let bloom = &self.bytes.as_slice()[off..off + len];
        bloom_bits(stable_hash(key), len * 8).all(|bit| bloom[bit / 8] & (1 << (bit % 8)) != 0)
    }

    fn block(&self, i: usize) -> Result<&[u8]> {
        let h = &self.index[i];
        checked_region(self.bytes.as_slice(), h.offset, h.len).ok_or_else(|| {
            StorageError::corrupt(&self.path, format!("data block {i} checksum mismatch"))
        })
    }

    fn decode_block(&self, i: usize, out: &mut Vec<Entry>) -> Result<()> {
        let block = self.block(i)?;
        let mut r = Reader::new(block);
        let bad = || StorageError::corrupt(&self.path, format!("undecodable data block {i}"));
        while !r.is_empty() {
            let key = r.len_prefixed().map_err(|_| bad())?.to_vec();
            let mut lsn = Lsn(r.u64().map_err(|_| bad())?);
            if self.meta.bulk {
                lsn = self.meta.max_lsn;
            }
            let value = match r.u8().map_err(|_| bad())? {
                0 => None,
                1 => Some(Arc::from(r.len_prefixed().map_err(|_| bad())?)),
                _ => return Err(bad()),
            };
            out.push(Entry { key, lsn, value });
        }
        Ok(())
    }

    /// The newest version of `key` with LSN `<= at`. Walks the block in
    /// place: only the matching value is copied.
    pub fn get(&self, key: &[u8], at: Lsn) -> Result<Option<(Lsn, VersionValue)>> {
        if self.meta.min_lsn > at || !self.may_contain(key) {
            return Ok(None);
        }
        let mut i = self.index.partition_point(|h| h.last_key.as_slice() < key);
        while i < self.index.len() {
            let block = self.block(i)?;
            let bad = || StorageError::corrupt(&self.path, format!("undecodable data block {i}"));
            let mut r = Reader::new(block);
            while !r.is_empty() {
                let k = r.len_prefixed().map_err(|_| bad())?;
                let mut lsn = Lsn(r.u64().map_err(|_| bad())?);
                if self.meta.bulk {
                    lsn = self.meta.max_lsn;
                }
                let value = match r.u8().map_err(|_| bad())? {
                    0 => None,
                    1 => Some(r.len_prefixed().map_err(|_| bad())?),
                    _ => return Err(bad()),
                };
                match k.cmp(key) {
                    Ordering::Less => continue,
                    Ordering::Greater => return Ok(None),
                    Ordering::Equal if lsn <= at => {
                        return Ok(Some((lsn, value.map(Arc::from))));
                    }
                    Ordering::Equal => continue,
                }
            }
            i += 1;
        }
        Ok(None)
    }

    /// Iterates every entry in order, block by block.
    pub fn iter(self: &Arc<Self>) -> RowFileIter {
        RowFileIter {
            file: self.clone(),
            block: 0,
            buf: Vec::new().into_iter(),
        }
    }
}

/// Returns `b[off..off+len]` if the CRC32C stored after it matches.
fn checked_region(b: &[u8], off: usize, len: usize) -> Option<&[u8]> {
    let end = off.checked_add(len)?;
    let region = b.get(off..end)?;
    let crc = b.get(end..end + 4)?;
    let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    (crc32c::crc32c(region) == crc).then_some(region)
}

pub struct RowFileIter {
    file: Arc<RowFile>,
    block: usize,
    buf: std::vec::IntoIter<Entry>,
}

impl Iterator for RowFileIter {
    type Item = Result<Entry>;
    fn next(&mut self) -> Option<Result<Entry>> {
        loop {
            if let Some(e) = self.buf.next() {
                return Some(Ok(e));
            }
            if self.block >= self.file.index.len() {
                return None;
            }
            let mut v = Vec::new();
            if let Err(e) = self.file.decode_block(self.block, &mut v) {
                self.block = self.file.index.len();
                return Some(Err(e));
            }
            self.block += 1;
            self.buf = v.into_iter();
        }
    }
}

// ---- the tablet's published state ----

/// An immutable view of a row tablet: what a snapshot holds.
#[derive(Clone, Default)]
pub struct RowVersion {
    pub memtable: Arc<RowMemtable>,
    /// Memtables being flushed (newest first); still read until their file
    /// is installed.
    pub frozen: Vec<Arc<RowMemtable>>,
    /// Newest first.
    pub l0: Vec<Arc<RowFile>>,
    /// Sorted by key, non-overlapping.
    pub l1: Vec<Arc<RowFile>>,
}

impl RowVersion {
    /// Point read: the row bytes of `key` as of `at`, or `None` if absent or
    /// deleted.
    pub fn get(&self, key: &[u8], at: Lsn) -> Result<Option<Arc<[u8]>>> {
        if let Some((_, v)) = self.memtable.get(key, at) {
            return Ok(v);
        }
        for m in &self.frozen {
            if let Some((_, v)) = m.get(key, at) {
                return Ok(v);
            }
        }
        for f in &self.l0 {
            if let Some((_, v)) = f.get(key, at)? {
                return Ok(v);
            }
        }
        // L1 files are non-overlapping; at most one can hold the key, but they
        // carry no key range here, so each bloom filter decides quickly.
        for f in &self.l1 {
            if let Some((_, v)) = f.get(key, at)? {
                return Ok(v);
            }
        }
        Ok(None)
    }

    /// Every live row as of `at`, in key order.
    pub fn scan(&self, at: Lsn) -> MergeIter {
        let mut sources: Vec<Box<dyn Iterator<Item = Result<Entry>> + Send>> = Vec::new();
        let mem_entries: Vec<Entry> = self.memtable.iter().collect();
        sources.push(Box::new(mem_entries.into_iter().map(Ok)));
        for m in &self.frozen {
            let v: Vec<Entry> = m.iter().collect();
            sources.push(Box::new(v.into_iter().map(Ok)));
        }
        for f in self.l0.iter().chain(self.l1.iter()) {
            sources.push(Box::new(f.iter()));
        }
        MergeIter::new(sources, Some(at), true)
    }

    pub fn approx_entries(&self) -> u64 {
        self.memtable.len() as u64
            + self.frozen.iter().map(|m| m.len() as u64).sum::<u64>()
            + self
                .l0
                .iter()
                .chain(&self.l1)
                .map(|f| f.meta.entries)
                .sum::<u64>()
    }
}

/// K-way merge over sorted sources. With `at`, yields for each key only the
/// newest version `<= at`, and (with `live_only`) skips delete markers.
pub struct MergeIter {
    sources: Vec<Box<dyn Iterator<Item = Result<Entry>> + Send>>,
    heap: BinaryHeap<HeapItem>,
    at: Option<Lsn>,
    live_only: bool,
    started: bool,
    error: Option<StorageError>,
}

struct HeapItem {
    entry: Entry,
    src: usize,
}

impl PartialEq for HeapItem {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for HeapItem {}
impl PartialOrd for HeapItem {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for HeapItem {
    fn cmp(&self, o: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse for (key asc, lsn desc).
        o.entry
            .key
            .cmp(&self.entry.key)
            .then(self.entry.lsn.cmp(&o.entry.lsn))
            .then(o.src.cmp(&self.src))
    }
}

impl MergeIter {
    pub fn new(
        sources: Vec<Box<dyn Iterator<Item = Result<Entry>> + Send>>,
        at: Option<Lsn>,
        live_only: bool,
    ) -> MergeIter {
        MergeIter {
            sources,
            heap: BinaryHeap::new(),
            at,
            live_only,
            started: false,
            error: None,
        }
    }

    fn pull(&mut self, src: usize) {
        match self.sources[src].next() {
            Some(Ok(entry)) => self.heap.push(HeapItem { entry, src }),
            Some(Err(e)) if self.error.is_none() => self.error = Some(e),
            Some(Err(_)) => {}
            None => {}
        }
    }
}

impl Iterator for MergeIter {
    /// Yields the newest visible version of each key (or every version when
    /// `at` is `None`: used by compaction, which keeps only the first).
    type Item = Result<Entry>;
    fn next(&mut self) -> Option<Result<Entry>> {
        if !self.started {
            self.started = true;
            for i in 0..self.sources.len() {
                self.pull(i);
            }
        }
        loop {
            if let Some(e) = self.error.take() {
                return Some(Err(e));
            }
            let top = self.heap.pop()?;
            self.pull(top.src);
            let e = top.entry;
            if let Some(at) = self.at {
                if e.lsn > at {
                    continue;
                }
            }
            // skip older versions of the same key
            while let Some(next) = self.heap.peek() {
                if next.entry.key != e.key {
                    break;
                }
                let Some(n) = self.heap.pop() else { break };
                self.pull(n.src);
            }
            if let Some(e) = self.error.take() {
                return Some(Err(e));
            }
            if self.live_only && e.value.is_none() {
                continue;
            }
            return Some(Ok(e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> VersionValue {
        Some(Arc::from(s.as_bytes()))
    }

    #[test]
    fn memtable_reads_the_newest_version_at_an_lsn() {
        let m = RowMemtable::default();
        m.insert(b"a".to_vec(), Lsn(1), v("a1"));
        m.insert(b"a".to_vec(), Lsn(5), v("a5"));
        m.insert(b"a".to_vec(), Lsn(7), None);
        m.insert(b"b".to_vec(), Lsn(2), v("b2"));
        assert_eq!(m.get(b"a", Lsn(0)), None);
        assert_eq!(m.get(b"a", Lsn(4)).unwrap().1, v("a1"));
        assert_eq!(m.get(b"a", Lsn(6)).unwrap().1, v("a5"));
        assert_eq!(m.get(b"a", Lsn(9)).unwrap().1, None);
        assert_eq!(m.get(b"c", Lsn(9)), None);
    }

    #[test]
    fn files_round_trip_and_detect_flipped_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::local(dir.path()).unwrap();
        let mut b = RowFileBuilder::default();
        for i in 0..5000u32 {
            let key = format!("k{i:06}").into_bytes();
            b.add(&Entry {
                key: key.clone(),
                lsn: Lsn(10),
                value: v(&format!("v{i}")),
            });
            b.add(&Entry {
                key,
                lsn: Lsn(3),
                value: v("old"),
            });
        }
        let (bytes, meta) = b.finish(FileId(1), 0);
        store
            .put(&format!("s/{}", row_file_name(FileId(1))), bytes.clone())
            .unwrap();
        let f = Arc::new(RowFile::open(&store, "s", meta.clone()).unwrap());
        assert_eq!(f.get(b"k000042", Lsn(20)).unwrap().unwrap().1, v("v42"));
        assert_eq!(f.get(b"k000042", Lsn(5)).unwrap().unwrap().1, v("old"));
        assert!(f.get(b"k000042", Lsn(2)).unwrap().is_none());
        assert!(f.get(b"zzz", Lsn(20)).unwrap().is_none());
        let live: Vec<_> = MergeIter::new(vec![Box::new(f.iter())], Some(Lsn(20)), true)
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(live.len(), 5000);
        drop(f);

        let mut bad = bytes;
        bad[100] ^= 1;
        store
            .put(&format!("s/{}", row_file_name(FileId(1))), bad)
            .unwrap();
        let f = RowFile::open(&store, "s", meta).unwrap();
        match f.get(b"k000000", Lsn(20)) {
            Err(StorageError::Corrupt { path, detail }) => {
                assert!(path.ends_with(row_file_name(FileId(1))), "{path:?}");
                assert!(detail.contains("checksum"));
            }
            other => panic!("flipped byte not detected: {other:?}"),
        }
    }
}
