//! Column tablet: Arrow memtable, Arrow IPC shard files, delete maps and the
//! primary-key index that finds the live version of a key.
//!
//! * Rows are stored with two hidden columns, `_eddy_lsn` (the LSN that
//!   wrote the row) and `_eddy_key` (its memcomparable key). An update is a
//!   delete of the old (file, row) plus an insert into the memtable.
//! * Shard files are standard Arrow IPC files, read through a memory map
//!   with zero copies. Each record batch is a row group. The IPC footer's
//!   custom metadata `eddy.meta` holds per row group and per column
//!   min/max/null counts, a CRC32C of every row group, and the key range;
//!   the manifest holds CRCs of the file's head (schema) and tail (footer).
//!   A row group is checked against its CRC the first time it is read.
//! * The memtable's rows keep their order when flushed, so the memtable's
//!   delete map becomes the file's delete map unchanged: the file is opened
//!   with the very same `Arc<Mutex<DeleteMap>>`. A flush first *freezes*
//!   the memtable ([`ColumnVersion::frozen`]); deletes that arrive while
//!   its file is written land in that shared map and so reach the file.
//! * Invariant: at most one version of a key is live (not deleted) in the
//!   whole tablet; the primary-key index points at it.
//!
//! Only the shard's commit leader mutates a tablet; readers use snapshots
//! ([`ColumnVersion::snapshot`]) and never block it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering as AtOrd};
use std::sync::{Arc, OnceLock};

use arrow::array::*;
use arrow::buffer::Buffer;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow_ipc::reader::{read_footer_length, FileDecoder};
use arrow_ipc::writer::FileWriter;
use eddy_common::{ColumnType, FileId, Lsn, Row};
use parking_lot::Mutex;
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};

use crate::arrow_conv::*;
use crate::arrow_values::{row_at, rows_to_arrays};
use crate::delete_map::DeleteMap;
use crate::error::{Result, StorageError};
use crate::filestore::{FileBytes, FileStore};

/// Keeps a column file's buffer alive for the row-group buffers made from
/// it ([`ColumnFile::block_buffer`]).
struct FileBufferOwner(#[allow(dead_code, reason = "held, never read")] Buffer);

pub const ROW_GROUP_ROWS: usize = 64 * 1024;
/// Pending memtable rows are sealed into an Arrow batch at this size.
const SEAL_ROWS: usize = 8192;

/// Column names and types of a tablet (the table's visible columns).
pub type Columns = Vec<(String, ColumnType)>;

// ---------------------------------------------------------------- memtable

struct Pending {
    rows: Vec<(Row, Lsn, Vec<u8>)>,
}

pub struct ColMemtable {
    pub columns: Columns,
    schema: SchemaRef,
    /// Sealed batches in arrival order, with the stored schema.
    sealed: Mutex<Vec<RecordBatch>>,
    pending: Mutex<Pending>,
    /// key -> memtable row of the live version.
    pk: Mutex<HashMap<Vec<u8>, u32>>,
    pub deletes: Arc<Mutex<DeleteMap>>,
    rows: std::sync::atomic::AtomicU32,
    bytes: std::sync::atomic::AtomicUsize,
}

impl ColMemtable {
    pub fn new(columns: Columns) -> ColMemtable {
        ColMemtable {
            schema: stored_schema(&columns),
            columns,
            sealed: Mutex::new(Vec::new()),
            pending: Mutex::new(Pending { rows: Vec::new() }),
            pk: Mutex::new(HashMap::new()),
            deletes: Arc::new(Mutex::new(DeleteMap::default())),
            rows: 0.into(),
            bytes: 0.into(),
        }
    }

    pub fn len(&self) -> u32 {
        self.rows.load(AtOrd::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn approx_bytes(&self) -> usize {
        self.bytes.load(AtOrd::Relaxed)
    }

    fn append(&self, key: Vec<u8>, row: Row, lsn: Lsn) {
        let pos = self.rows.load(AtOrd::Relaxed);
        let size = 64 + key.len() + row.len() * 16;
        self.pk.lock().insert(key.clone(), pos);
        let mut p = self.pending.lock();
        p.rows.push((row, lsn, key));
        if p.rows.len() >= SEAL_ROWS {
            self.seal_locked(&mut p);
        }
        drop(p);
        self.bytes.fetch_add(size, AtOrd::Relaxed);
        self.rows.store(pos + 1, AtOrd::Release);
    }

    fn seal_locked(&self, p: &mut Pending) {
        if p.rows.is_empty() {
            return;
        }
        // The rows passed `codec::check_row` (whose acceptance is exactly
        // `arrow_values::check_value`'s) before they were committed, and the
        // schema is built from the same column types, so this cannot fail
        // unless a builder is wrong; the rows then stay pending (and
        // readable by key) rather than being sealed with NULLs.
        match self.seal_batch(p) {
            Ok(b) => {
                self.sealed.lock().push(b);
                p.rows.clear();
            }
            Err(e) => tracing::error!(error = %e, "cannot seal memtable rows"),
        }
    }

    fn seal_batch(&self, p: &Pending) -> Result<RecordBatch> {
        let types: Vec<ColumnType> = self.columns.iter().map(|c| c.1).collect();
        let rows: Vec<Row> = p.rows.iter().map(|(row, _, _)| row.clone()).collect();
        let mut cols = rows_to_arrays(&types, &rows)
            .map_err(|e| StorageError::conversion("sealing memtable rows", e))?;
        let lsns: UInt64Array = p.rows.iter().map(|(_, l, _)| Some(l.0)).collect();
        let keys: BinaryArray = p.rows.iter().map(|(_, _, k)| Some(k.as_slice())).collect();
        cols.push(Arc::new(lsns));
        cols.push(Arc::new(keys));
        RecordBatch::try_new(self.schema.clone(), cols)
            .map_err(|e| StorageError::arrow("sealing memtable rows", e))
    }

    /// Sealed batches covering every row applied so far.
    pub fn batches(&self) -> Vec<RecordBatch> {
        let mut p = self.pending.lock();
        self.seal_locked(&mut p);
        self.sealed.lock().clone()
    }

    fn lookup(&self, key: &[u8]) -> Option<u32> {
        let r = *self.pk.lock().get(key)?;
        (!self.deletes.lock().is_deleted(r)).then_some(r)
    }

    /// The row at memtable position `pos` (must exist).
    fn row(&self, pos: u32) -> Result<Option<Row>> {
        let types: Vec<ColumnType> = self.columns.iter().map(|c| c.1).collect();
        let sealed = self.sealed.lock();
        let mut base = 0u32;
        for b in sealed.iter() {
            let n = b.num_rows() as u32;
            if pos < base + n {
                return row_at(b, &types, (pos - base) as usize)
                    .map(Some)
                    .map_err(|e| StorageError::conversion("reading a memtable row", e));
            }
            base += n;
        }
        drop(sealed);
        let p = self.pending.lock();
        Ok(p.rows.get((pos - base) as usize).map(|r| r.0.clone()))
    }
}

// ---------------------------------------------------------------- files

/// What the manifest records about a column file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ColumnFileMeta {
    pub id: FileId,
    pub rows: u64,
    /// The LSN range of the rows. For bulk-loaded files both are the commit
    /// LSN, which overrides the (zero) `_eddy_lsn` column.
    pub min_lsn: Lsn,
    pub max_lsn: Lsn,
    pub bytes: u64,
    pub head_crc: u32,
    pub tail_crc: u32,
    pub head_len: u64,
    pub tail_len: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct RowGroupMeta {
    rows: u64,
    crc: u32,
    stats: Vec<ColumnStats>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct FileMetaJson {
    ncols: usize,
    rows: u64,
    row_groups: Vec<RowGroupMeta>,
    min_key: Vec<u8>,
    max_key: Vec<u8>,
}

pub fn column_file_name(id: FileId) -> String {
    format!("{:016}.arrow", id.0)
}

/// A column file under construction: stored-schema batches in, IPC bytes out.
pub struct ColumnFileWriter {
    columns: Columns,
    schema: SchemaRef,
    buffered: Vec<RecordBatch>,
    buffered_rows: usize,
    writer: FileWriter<Vec<u8>>,
    groups: Vec<RowGroupMeta>,
    head_len: usize,
    rows: u64,
    min_lsn: Lsn,
    max_lsn: Lsn,
    min_key: Option<Vec<u8>>,
    max_key: Option<Vec<u8>>,
}

impl ColumnFileWriter {
    pub fn new(columns: Columns) -> Result<ColumnFileWriter> {
        let schema = stored_schema(&columns);
        let writer = FileWriter::try_new(Vec::new(), &schema)
            .map_err(|e| StorageError::arrow("starting a column file", e))?;
        let head_len = writer.get_ref().len();
        Ok(ColumnFileWriter {
            columns,
            schema,
            buffered: Vec::new(),
            buffered_rows: 0,
            writer,
            groups: Vec::new(),
            head_len,
            rows: 0,
            min_lsn: Lsn::MAX,
            max_lsn: Lsn::ZERO,
            min_key: None,
            max_key: None,
        })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn rows(&self) -> u64 {
        self.rows + self.buffered_rows as u64
    }

    pub fn approx_bytes(&self) -> usize {
        self.writer.get_ref().len()
            + self
                .buffered
                .iter()
                .map(|b| b.get_array_memory_size())
                .sum::<usize>()
    }

    /// Adds a batch with the stored schema; rows keep their order.
    pub fn push(&mut self, batch: RecordBatch) -> Result<()> {
        let mut batch = batch;
        while batch.num_rows() > 0 {
            let room = ROW_GROUP_ROWS - self.buffered_rows;
            let take = room.min(batch.num_rows());
            self.buffered.push(batch.slice(0, take));
            self.buffered_rows += take;
            batch = batch.slice(take, batch.num_rows() - take);
            if self.buffered_rows == ROW_GROUP_ROWS {
                self.write_group()?;
            }
        }
        Ok(())
    }

    fn write_group(&mut self) -> Result<()> {
        if self.buffered_rows == 0 {
            return Ok(());
        }
        let group = arrow::compute::concat_batches(&self.schema, &self.buffered)
            .map_err(|e| StorageError::arrow("building a row group", e))?;
        self.buffered.clear();
        self.buffered_rows = 0;
        let n = self.columns.len();
        let stats = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (_, ty))| column_stats(group.column(i).as_ref(), *ty))
            .collect();
        if let Some(l) = group.column(n).as_any().downcast_ref::<UInt64Array>() {
            if let (Some(lo), Some(hi)) = (arrow::compute::min(l), arrow::compute::max(l)) {
                self.min_lsn = self.min_lsn.min(Lsn(lo));
                self.max_lsn = self.max_lsn.max(Lsn(hi));
            }
        }
        if let Some(k) = group.column(n + 1).as_any().downcast_ref::<BinaryArray>() {
            if let Some(lo) = arrow::compute::min_binary(k) {
                if self.min_key.as_deref().is_none_or(|m| lo < m) {
                    self.min_key = Some(lo.to_vec());
                }
            }
            if let Some(hi) = arrow::compute::max_binary(k) {
                if self.max_key.as_deref().is_none_or(|m| hi > m) {
                    self.max_key = Some(hi.to_vec());
                }
            }
        }
        let before = self.writer.get_ref().len();
        self.writer
            .write(&group)
            .map_err(|e| StorageError::arrow("writing a row group", e))?;
        let after = self.writer.get_ref().len();
        let crc = crc32c::crc32c(&self.writer.get_ref()[before..after]);
        self.rows += group.num_rows() as u64;
        self.groups.push(RowGroupMeta {
            rows: group.num_rows() as u64,
            crc,
            stats,
        });
        Ok(())
    }

    /// Finishes the file. `lsn_override` is the commit LSN of a bulk load.
    pub fn finish(
        mut self,
        id: FileId,
        lsn_override: Option<Lsn>,
    ) -> Result<(Vec<u8>, ColumnFileMeta)> {
        self.write_group()?;
        let data_end = self.writer.get_ref().len();
        let meta = FileMetaJson {
            ncols: self.columns.len(),
            rows: self.rows,
            row_groups: std::mem::take(&mut self.groups),
            min_key: self.min_key.take().unwrap_or_default(),
            max_key: self.max_key.take().unwrap_or_default(),
        };
        let json = serde_json::to_string(&meta)
            .map_err(|e| StorageError::InvalidDefinition(format!("file metadata: {e}")))?;
        self.writer.write_metadata("eddy.meta", json);
        self.writer
            .finish()
            .map_err(|e| StorageError::arrow("finishing a column file", e))?;
        let bytes = self
            .writer
            .into_inner()
            .map_err(|e| StorageError::arrow("finishing a column file", e))?;
        let (min_lsn, max_lsn) = match lsn_override {
            Some(l) => (l, l),
            None if self.rows == 0 => (Lsn::ZERO, Lsn::ZERO),
            None => (self.min_lsn, self.max_lsn),
        };
        let m = ColumnFileMeta {
            id,
            rows: self.rows,
            min_lsn,
            max_lsn,
            bytes: bytes.len() as u64,
            head_crc: crc32c::crc32c(&bytes[..self.head_len]),
            tail_crc: crc32c::crc32c(&bytes[data_end..]),
            head_len: self.head_len as u64,
            tail_len: (bytes.len() - data_end) as u64,
        };
        Ok((bytes, m))
    }
}

pub struct ColumnFile {
    pub meta: ColumnFileMeta,
    pub path: std::path::PathBuf,
    _bytes: FileBytes,
    buffer: Buffer,
    schema: SchemaRef,
    version: arrow_ipc::MetadataVersion,
    blocks: Vec<arrow_ipc::Block>,
    groups: Vec<RowGroupMeta>,
    /// First row of each row group.
    group_start: Vec<u64>,
    verified: Vec<AtomicBool>,
    ncols: usize,
    min_key: Vec<u8>,
    max_key: Vec<u8>,
    key_index: OnceLock<Result<KeyIndex, String>>,
    pub deletes: Arc<Mutex<DeleteMap>>,
}

/// Sorted positions of every row's key, built on first use.
struct KeyIndex {
    keys: Vec<BinaryArray>,
    /// (row group, row) sorted by key.
    order: Vec<(u32, u32)>,
}

impl ColumnFile {
    pub fn open(
        store: &FileStore,
        dir: &str,
        meta: ColumnFileMeta,
        deletes: Arc<Mutex<DeleteMap>>,
    ) -> Result<ColumnFile> {
        let rel = format!("{dir}/{}", column_file_name(meta.id));
        let path = store.display_path(&rel);
        let bytes = store.get(&rel)?;
        let corrupt = |d: String| StorageError::corrupt(&path, d);
        let b = bytes.as_slice();
        if b.len() as u64 != meta.bytes {
            return Err(corrupt(format!(
                "size is {} bytes, the manifest says {}",
                b.len(),
                meta.bytes
            )));
        }
        let (hl, tl) = (meta.head_len as usize, meta.tail_len as usize);
        if hl + tl > b.len()
            || crc32c::crc32c(&b[..hl]) != meta.head_crc
            || crc32c::crc32c(&b[b.len() - tl..]) != meta.tail_crc
        {
            return Err(corrupt("schema or footer checksum mismatch".into()));
        }
        let buffer = match &bytes {
            FileBytes::Mapped(m) => {
                let ptr = std::ptr::NonNull::new(m.as_ptr() as *mut u8)
                    .ok_or_else(|| corrupt("empty mapping".into()))?;
                // SAFETY: the mapping lives as long as the Arc we hand to the
                // buffer as its owner, and the file is immutable.
                unsafe { Buffer::from_custom_allocation(ptr, m.len(), m.clone()) }
            }
            FileBytes::Owned(bb) => Buffer::from(bb.clone()),
        };
        let trailer: [u8; 10] = b[b.len() - 10..]
            .try_into()
            .map_err(|_| corrupt("short file".into()))?;
        let footer_len =
            read_footer_length(trailer).map_err(|e| corrupt(format!("bad IPC trailer: {e}")))?;
        let footer_start = (b.len() - 10)
            .checked_sub(footer_len)
            .ok_or_else(|| corrupt("footer length out of range".into()))?;
        let footer = arrow_ipc::root_as_footer(&b[footer_start..b.len() - 10])
            .map_err(|e| corrupt(format!("bad IPC footer: {e}")))?;
        let fb_schema = footer
            .schema()
            .ok_or_else(|| corrupt("footer has no schema".into()))?;
        let schema = Arc::new(arrow_ipc::convert::fb_to_schema(fb_schema));
        let blocks: Vec<arrow_ipc::Block> = footer
            .recordBatches()
            .map(|v| v.iter().copied().collect())
            .unwrap_or_default();
        let meta_json = footer
            .custom_metadata()
            .and_then(|kvs| {
                kvs.iter()
                    .find(|kv| kv.key() == Some("eddy.meta"))
                    .and_then(|kv| kv.value().map(str::to_string))
            })
            .ok_or_else(|| corrupt("no eddy.meta in the footer".into()))?;
        let fm: FileMetaJson =
            serde_json::from_str(&meta_json).map_err(|e| corrupt(format!("bad eddy.meta: {e}")))?;
        if fm.row_groups.len() != blocks.len() || fm.rows != meta.rows {
            return Err(corrupt("row groups disagree with the footer".into()));
        }
        for blk in &blocks {
            let end = blk.offset() as u64 + blk.metaDataLength() as u64 + blk.bodyLength() as u64;
            if blk.offset() < 0 || end > b.len() as u64 {
                return Err(corrupt("row group outside the file".into()));
            }
        }
        let mut group_start = Vec::with_capacity(fm.row_groups.len());
        let mut acc = 0;
        for g in &fm.row_groups {
            group_start.push(acc);
            acc += g.rows;
        }
        Ok(ColumnFile {
            path,
            buffer,
            version: footer.version(),
            verified: fm
                .row_groups
                .iter()
                .map(|_| AtomicBool::new(false))
                .collect(),
            ncols: fm.ncols,
            groups: fm.row_groups,
            group_start,
            blocks,
            schema,
            min_key: fm.min_key,
            max_key: fm.max_key,
            meta,
            _bytes: bytes,
            key_index: OnceLock::new(),
            deletes,
        })
    }

    pub fn ncols(&self) -> usize {
        self.ncols
    }

    pub fn row_group_count(&self) -> usize {
        self.blocks.len()
    }

    pub fn row_group_stats(&self, i: usize) -> RowGroupStats {
        RowGroupStats {
            rows: self.groups[i].rows,
            columns: self.groups[i].stats.clone(),
        }
    }

    /// Rows of row group `i` (without cloning its statistics).
    pub fn row_group_rows(&self, i: usize) -> u64 {
        self.groups[i].rows
    }

    pub fn row_group_start(&self, i: usize) -> u64 {
        self.group_start[i]
    }

    /// Decodes row group `i` with the given projection of stored columns.
    pub fn read_row_group(&self, i: usize, projection: Option<&[usize]>) -> Result<RecordBatch> {
        let blk = &self.blocks[i];
        let len = blk.metaDataLength() as usize + blk.bodyLength() as usize;
        let data = self.block_buffer(i, blk.offset(), len)?;
        if !self.verified[i].load(AtOrd::Relaxed) {
            if crc32c::crc32c(data.as_slice()) != self.groups[i].crc {
                return Err(StorageError::corrupt(
                    &self.path,
                    format!("row group {i} checksum mismatch"),
                ));
            }
            self.verified[i].store(true, AtOrd::Relaxed);
        }
        let mut dec = FileDecoder::new(self.schema.clone(), self.version);
        if let Some(p) = projection {
            dec = dec.with_projection(p.to_vec());
        }
        dec.read_record_batch(blk, &data)
            .map_err(|e| {
                StorageError::corrupt(&self.path, format!("row group {i} undecodable: {e}"))
            })?
            .ok_or_else(|| StorageError::corrupt(&self.path, format!("row group {i} is empty")))
    }

    /// Row group `i`'s bytes as a buffer of their own, sharing the file's
    /// memory. Arrays decoded from it report the row group's size as
    /// theirs, not the whole file's (a slice of the file's buffer would):
    /// operators reserve memory by that size (`eddy-sql`'s query pool), so
    /// with whole-file sizes a sort under a limit smaller than the file
    /// could not even hold one batch to spill.
    fn block_buffer(&self, i: usize, offset: i64, len: usize) -> Result<Buffer> {
        let in_file = usize::try_from(offset).ok().filter(|o| {
            o.checked_add(len)
                .is_some_and(|end| end <= self.buffer.len())
        });
        let Some(offset) = in_file else {
            return Err(StorageError::corrupt(
                &self.path,
                format!("row group {i} lies outside the file"),
            ));
        };
        let Some(ptr) = std::ptr::NonNull::new(self.buffer.as_ptr().cast_mut()) else {
            return Err(StorageError::corrupt(&self.path, "empty file buffer"));
        };
        // SAFETY: `offset + len <= self.buffer.len()` (checked above), so
        // the range lies inside the file's buffer, which is immutable and
        // lives as long as the owner handed over with it (a clone of it).
        Ok(unsafe {
            Buffer::from_custom_allocation(
                ptr.add(offset),
                len,
                Arc::new(FileBufferOwner(self.buffer.clone())),
            )
        })
    }

    fn key_index(&self) -> Result<&KeyIndex> {
        let idx = self.key_index.get_or_init(|| {
            let mut keys = Vec::with_capacity(self.blocks.len());
            let mut order = Vec::with_capacity(self.meta.rows as usize);
            for g in 0..self.blocks.len() {
                let b = self
                    .read_row_group(g, Some(&[self.ncols + 1]))
                    .map_err(|e| e.to_string())?;
                let k = b
                    .column(0)
                    .as_any()
                    .downcast_ref::<BinaryArray>()
                    .ok_or("key column is not binary")?
                    .clone();
                for r in 0..k.len() {
                    order.push((g as u32, r as u32));
                }
                keys.push(k);
            }
            order.sort_unstable_by(|a, b| {
                keys[a.0 as usize]
                    .value(a.1 as usize)
                    .cmp(keys[b.0 as usize].value(b.1 as usize))
            });
            Ok(KeyIndex { keys, order })
        });
        idx.as_ref()
            .map_err(|e| StorageError::corrupt(&self.path, e.clone()))
    }

    /// The row number of `key` in this file, deleted or not.
    pub fn find_key(&self, key: &[u8]) -> Result<Option<u32>> {
        if self.meta.rows == 0 || key < self.min_key.as_slice() || key > self.max_key.as_slice() {
            return Ok(None);
        }
        let idx = self.key_index()?;
        let key_at = |&(g, r): &(u32, u32)| idx.keys[g as usize].value(r as usize);
        let i = idx.order.partition_point(|p| key_at(p) < key);
        // Several dead versions of one key may share a file (compaction keeps
        // order, not uniqueness); prefer a live one.
        let mut found = None;
        for p in &idx.order[i..] {
            if key_at(p) != key {
                break;
            }
            let row = (self.group_start[p.0 as usize] + p.1 as u64) as u32;
            if !self.deletes.lock().is_deleted(row) {
                return Ok(Some(row));
            }
            found = Some(row);
        }
        Ok(found)
    }

    /// Reads row `row` as a table row of `types`.
    pub fn row(&self, row: u32, types: &[ColumnType]) -> Result<Row> {
        let g = self.group_start.partition_point(|&s| s <= row as u64) - 1;
        let b = self.read_row_group(g, None)?;
        row_at(&b, types, (row as u64 - self.group_start[g]) as usize)
            .map_err(|e| StorageError::conversion("reading a column-file row", e))
    }

    pub fn key_range(&self) -> (&[u8], &[u8]) {
        (&self.min_key, &self.max_key)
    }
}

// ---------------------------------------------------------------- tablet

/// Where the live version of a key is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    Mem(u32),
    /// (index into [`ColumnVersion::frozen`], row)
    Frozen(usize, u32),
    File(usize, u32),
}

/// The tablet's published state. Replaced (not mutated) on flush and
/// compaction; memtable and delete maps are append-only.
#[derive(Clone)]
pub struct ColumnVersion {
    pub memtable: Arc<ColMemtable>,
    /// Memtables being flushed, oldest first: newer than every file, older
    /// than `memtable`. Read (and deleted from) like the memtable until
    /// their file replaces them.
    pub frozen: Vec<Arc<ColMemtable>>,
    /// Oldest first.
    pub files: Vec<Arc<ColumnFile>>,
}

/// What a scan of one tablet at one LSN reads.
pub struct ColumnSnapshot {
    pub at: Lsn,
    pub columns: Columns,
    pub mem: Vec<RecordBatch>,
    pub mem_deletes: RoaringBitmap,
    /// Frozen memtables (batches, deletes at `at`), oldest first.
    pub frozen: Vec<(Columns, Vec<RecordBatch>, RoaringBitmap)>,
    pub files: Vec<(Arc<ColumnFile>, RoaringBitmap)>,
}

impl ColumnVersion {
    pub fn new(columns: Columns) -> ColumnVersion {
        ColumnVersion {
            memtable: Arc::new(ColMemtable::new(columns)),
            frozen: Vec::new(),
            files: Vec::new(),
        }
    }

    /// Rows in the memtable and the frozen memtables.
    pub fn memtable_rows(&self) -> u64 {
        u64::from(self.memtable.len()) + self.frozen.iter().map(|m| u64::from(m.len())).sum::<u64>()
    }

    pub fn snapshot(&self, at: Lsn) -> ColumnSnapshot {
        ColumnSnapshot {
            at,
            columns: self.memtable.columns.clone(),
            mem: self.memtable.batches(),
            mem_deletes: self.memtable.deletes.lock().visible_at(at),
            frozen: self
                .frozen
                .iter()
                .map(|m| {
                    (
                        m.columns.clone(),
                        m.batches(),
                        m.deletes.lock().visible_at(at),
                    )
                })
                .collect(),
            files: self
                .files
                .iter()
                .filter(|f| f.meta.min_lsn <= at)
                .map(|f| (f.clone(), f.deletes.lock().visible_at(at)))
                .collect(),
        }
    }

    /// Finds the live version of `key` (leader only).
    pub fn locate(&self, key: &[u8]) -> Result<Option<Location>> {
        if let Some(r) = self.memtable.lookup(key) {
            return Ok(Some(Location::Mem(r)));
        }
        for (i, m) in self.frozen.iter().enumerate().rev() {
            if let Some(r) = m.lookup(key) {
                return Ok(Some(Location::Frozen(i, r)));
            }
        }
        for (i, f) in self.files.iter().enumerate().rev() {
            if let Some(r) = f.find_key(key)? {
                if !f.deletes.lock().is_deleted(r) {
                    return Ok(Some(Location::File(i, r)));
                }
            }
        }
        Ok(None)
    }

    pub fn read(&self, loc: Location) -> Result<Option<Row>> {
        let types: Vec<ColumnType> = self.memtable.columns.iter().map(|c| c.1).collect();
        match loc {
            Location::Mem(r) => self.memtable.row(r),
            Location::Frozen(i, r) => self.frozen[i].row(r),
            Location::File(i, r) => self.files[i].row(r, &types).map(Some),
        }
    }

    /// Current live row of `key` (leader only).
    pub fn get(&self, key: &[u8]) -> Result<Option<Row>> {
        match self.locate(key)? {
            Some(loc) => self.read(loc),
            None => Ok(None),
        }
    }

    fn mark_deleted(&self, loc: Location, lsn: Lsn) {
        match loc {
            Location::Mem(r) => self.memtable.deletes.lock().delete(lsn, r),
            Location::Frozen(i, r) => self.frozen[i].deletes.lock().delete(lsn, r),
            Location::File(i, r) => self.files[i].deletes.lock().delete(lsn, r),
        }
    }

    /// Applies an upsert (leader only).
    pub fn put(&self, key: Vec<u8>, row: Row, lsn: Lsn) -> Result<()> {
        if let Some(loc) = self.locate(&key)? {
            self.mark_deleted(loc, lsn);
        }
        self.memtable.append(key, row, lsn);
        Ok(())
    }

    /// Applies a delete (leader only).
    pub fn delete(&self, key: &[u8], lsn: Lsn) -> Result<()> {
        if let Some(loc) = self.locate(key)? {
            self.mark_deleted(loc, lsn);
        }
        Ok(())
    }

    /// Marks older live versions of every key in `file` deleted at `lsn`,
    /// so that the newly installed bulk file wins (leader only).
    pub fn supersede_keys_of(&self, file: &ColumnFile, lsn: Lsn) -> Result<()> {
        let (lo, hi) = file.key_range();
        let overlaps_mem = !self.memtable.is_empty() || !self.frozen.is_empty();
        let overlapping: Vec<usize> = (0..self.files.len())
            .filter(|&i| {
                let (a, b) = self.files[i].key_range();
                self.files[i].meta.rows > 0 && a <= hi && lo <= b
            })
            .collect();
        if !overlaps_mem && overlapping.is_empty() {
            return Ok(());
        }
        for g in 0..file.row_group_count() {
            let b = file.read_row_group(g, Some(&[file.ncols() + 1]))?;
            let Some(keys) = b.column(0).as_any().downcast_ref::<BinaryArray>() else {
                return Err(StorageError::corrupt(
                    &file.path,
                    "key column is not binary",
                ));
            };
            for k in keys.iter().flatten() {
                if let Some(r) = self.memtable.lookup(k) {
                    self.memtable.deletes.lock().delete(lsn, r);
                }
                for m in &self.frozen {
                    if let Some(r) = m.lookup(k) {
                        m.deletes.lock().delete(lsn, r);
                    }
                }
                for &i in &overlapping {
                    if let Some(r) = self.files[i].find_key(k)? {
                        self.files[i].deletes.lock().delete(lsn, r);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::Value;

    fn cols() -> Columns {
        vec![
            ("k".into(), ColumnType::BigInt),
            ("v".into(), ColumnType::Text),
        ]
    }

    fn key(i: i64) -> Vec<u8> {
        crate::codec::encode_key(&[&Value::BigInt(i)]).0
    }

    #[test]
    fn updates_delete_the_old_version_and_snapshots_stay_stable() {
        let v = ColumnVersion::new(cols());
        for i in 0..10 {
            v.put(
                key(i),
                vec![Value::BigInt(i), Value::Text("a".into())],
                Lsn(1),
            )
            .unwrap();
        }
        let before = v.snapshot(Lsn(1));
        v.put(
            key(3),
            vec![Value::BigInt(3), Value::Text("b".into())],
            Lsn(2),
        )
        .unwrap();
        v.delete(&key(4), Lsn(3)).unwrap();
        assert_eq!(before.mem_deletes.len(), 0);
        let after = v.snapshot(Lsn(3));
        assert_eq!(after.mem_deletes.iter().collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(v.get(&key(3)).unwrap().unwrap()[1], Value::Text("b".into()));
        assert_eq!(v.get(&key(4)).unwrap(), None);
    }

    #[test]
    fn files_round_trip_with_stats_and_detect_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::local(dir.path()).unwrap();
        let v = ColumnVersion::new(cols());
        for i in 0..100_000i64 {
            v.put(
                key(i),
                vec![Value::BigInt(i), Value::Text(format!("v{i}"))],
                Lsn(1 + i as u64 / 1000),
            )
            .unwrap();
        }
        let mut w = ColumnFileWriter::new(cols()).unwrap();
        for b in v.memtable.batches() {
            w.push(b).unwrap();
        }
        let (bytes, meta) = w.finish(FileId(7), None).unwrap();
        assert_eq!(meta.rows, 100_000);
        assert_eq!((meta.min_lsn, meta.max_lsn), (Lsn(1), Lsn(100)));
        store
            .put(&format!("d/{}", column_file_name(FileId(7))), bytes.clone())
            .unwrap();
        let f = ColumnFile::open(&store, "d", meta.clone(), Default::default()).unwrap();
        assert_eq!(f.row_group_count(), 2);
        let s = f.row_group_stats(1);
        assert_eq!(s.columns[0].min, Value::BigInt(65536));
        assert_eq!(s.columns[0].max, Value::BigInt(99_999));
        assert_eq!(f.find_key(&key(77_777)).unwrap(), Some(77_777));
        assert_eq!(f.find_key(&key(100_001)).unwrap(), None);
        let rg = f.read_row_group(1, Some(&[0])).unwrap();
        assert_eq!(rg.num_rows(), 100_000 - 65536);
        // a row group weighs its own bytes, not the file's (query memory
        // limits reserve by this size)
        let weight = rg.get_array_memory_size();
        assert!(
            weight * 2 < meta.bytes as usize,
            "row group 1 weighs {weight} of a {}-byte file",
            meta.bytes
        );

        // flip a byte inside the second row group's data
        let mut bad = bytes;
        let off = (meta.bytes / 2 + meta.bytes / 4) as usize;
        bad[off] ^= 0x10;
        store
            .put(&format!("d/{}", column_file_name(FileId(7))), bad)
            .unwrap();
        let f = ColumnFile::open(&store, "d", meta, Default::default()).unwrap();
        let errs = (0..2)
            .filter(|&g| f.read_row_group(g, None).is_err())
            .count();
        assert_eq!(errs, 1, "exactly the damaged row group fails");
    }
}
