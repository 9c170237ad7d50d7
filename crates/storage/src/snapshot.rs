//! Snapshot reads: a table's state at one LSN per shard, split into
//! independent scan partitions.
//!
//! A snapshot holds `Arc`s of the tablet versions (memtable, file lists) and
//! the delete bitmaps as of its LSN, so a scan never blocks a writer, a
//! writer never blocks a scan, and the scan's answer never changes while it
//! runs. Read-your-writes: a write returns only after the shard's visible
//! LSN covers it, and a snapshot taken afterwards reads at least that LSN.
//!
//! Partitions never merge across files: each column file is scanned on its
//! own with its visibility (LSN) and delete bitmaps, so all of them can run
//! in parallel.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use eddy_common::{ColumnType, Lsn, Row, TableDef};
use roaring::RoaringBitmap;

use crate::arrow_conv::{null_column, RowGroupStats, KEY_COLUMN};
use crate::arrow_values::ColumnBuilder;
use crate::codec::decode_row_bytes;
use crate::column_tablet::ColumnFile;
use crate::engine::Table;
use crate::error::{Result, StorageError};
use crate::row_tablet::RowVersion;

const ROW_SCAN_BATCH: usize = 8192;

/// A table at one LSN per shard.
pub struct TableSnapshot {
    def: Arc<TableDef>,
    lsns: Vec<Lsn>,
    partitions: Vec<ScanPartition>,
    /// Per shard: its tablets and, for a row tablet, the version pinned at
    /// the snapshot (index lookups read candidates by key at `lsns`).
    pub(crate) shards: Vec<ShardView>,
    /// The transaction's own writes laid over this snapshot, if any.
    pub(crate) overlay: Option<Arc<Overlay>>,
}

/// What an index lookup needs of one shard of a snapshot.
#[derive(Clone)]
pub(crate) struct ShardView {
    pub(crate) shard: Arc<crate::shard::Shard>,
    pub(crate) tablets: Option<Arc<crate::shard::Tablets>>,
    pub(crate) rows: Option<Arc<RowVersion>>,
}

impl TableSnapshot {
    pub(crate) fn take(table: &Table) -> TableSnapshot {
        let def = table.def().clone();
        let mut lsns = Vec::new();
        let mut partitions = Vec::new();
        let mut shards = Vec::new();
        for shard in table.shards() {
            let at = shard.visible_lsn();
            lsns.push(at);
            let tablets = shard.tablets(def.id);
            shards.push(ShardView {
                shard: Arc::clone(shard),
                rows: tablets
                    .as_ref()
                    .and_then(|t| t.row.as_ref().map(|r| r.read().clone())),
                tablets: tablets.clone(),
            });
            let Some(t) = tablets else {
                continue;
            };
            partitions.extend(shard_partitions(&def, &t, at));
        }
        TableSnapshot {
            def,
            lsns,
            partitions,
            shards,
            overlay: None,
        }
    }

    pub fn def(&self) -> &Arc<TableDef> {
        &self.def
    }

    /// The read LSN of every shard.
    pub fn lsns(&self) -> Vec<Lsn> {
        self.lsns.clone()
    }

    pub fn partitions(&self) -> Vec<ScanPartition> {
        self.partitions.clone()
    }

    /// This snapshot as one transaction sees it: its own uncommitted writes
    /// replace (or delete) the snapshot's versions of their keys.
    pub fn with_overlay(&self, overlay: Arc<Overlay>) -> TableSnapshot {
        let mut partitions: Vec<ScanPartition> = if overlay.truncated {
            Vec::new()
        } else {
            self.partitions
                .iter()
                .map(|p| ScanPartition {
                    hidden: (!overlay.hidden.is_empty()).then(|| Arc::clone(&overlay)),
                    ..p.clone()
                })
                .collect()
        };
        if !overlay.rows.is_empty() {
            partitions.push(ScanPartition {
                def: self.def.clone(),
                at: Lsn::MAX,
                source: Source::Overlay(Arc::clone(&overlay)),
                hidden: None,
                only: None,
            });
        }
        TableSnapshot {
            def: self.def.clone(),
            lsns: self.lsns.clone(),
            partitions,
            shards: self.shards.clone(),
            overlay: Some(overlay),
        }
    }

    /// This snapshot reduced to the rows stored under `keys` (a statement
    /// re-checking rows that changed under it).
    pub fn restricted_to(&self, keys: Arc<HashSet<Vec<u8>>>) -> TableSnapshot {
        TableSnapshot {
            def: self.def.clone(),
            lsns: self.lsns.clone(),
            partitions: self
                .partitions
                .iter()
                .map(|p| ScanPartition {
                    only: Some(Arc::clone(&keys)),
                    ..p.clone()
                })
                .collect(),
            shards: self.shards.clone(),
            overlay: self.overlay.clone(),
        }
    }
}

/// The scan partitions of one shard's tablets of `def` at `at`.
pub(crate) fn shard_partitions(
    def: &Arc<TableDef>,
    t: &crate::shard::Tablets,
    at: Lsn,
) -> Vec<ScanPartition> {
    let mut partitions = Vec::new();
    if let Some(cl) = &t.col {
        let v = cl.read().clone();
        let snap = v.snapshot(at);
        for (file, deletes) in snap.files {
            let groups = 0..file.row_group_count();
            partitions.push(ScanPartition {
                def: def.clone(),
                at,
                source: Source::File {
                    file,
                    deletes,
                    groups,
                },
                hidden: None,
                only: None,
            });
        }
        // Frozen memtables (being flushed) read exactly like the memtable
        // until their file replaces them in the tablet version.
        for (columns, batches, deletes) in snap.frozen {
            if batches.is_empty() {
                continue;
            }
            partitions.push(ScanPartition {
                def: def.clone(),
                at,
                source: Source::Memtable {
                    batches,
                    deletes,
                    ncols: columns.len(),
                },
                hidden: None,
                only: None,
            });
        }
        if !snap.mem.is_empty() {
            partitions.push(ScanPartition {
                def: def.clone(),
                at,
                source: Source::Memtable {
                    batches: snap.mem,
                    deletes: snap.mem_deletes,
                    ncols: snap.columns.len(),
                },
                hidden: None,
                only: None,
            });
        }
    } else if let Some(rl) = &t.row {
        partitions.push(ScanPartition {
            def: def.clone(),
            at,
            source: Source::Rows(rl.read().clone()),
            hidden: None,
            only: None,
        });
    }
    partitions
}

/// A transaction's uncommitted writes to one table.
#[derive(Default, Debug)]
pub struct Overlay {
    /// Keys the transaction wrote (replaced or deleted): the snapshot's
    /// versions of them are hidden.
    pub hidden: HashSet<Vec<u8>>,
    /// The rows the transaction wrote, by key.
    pub rows: Vec<(Vec<u8>, Row)>,
    /// The transaction truncated the table: no snapshot row is visible.
    pub truncated: bool,
}

#[derive(Clone)]
enum Source {
    File {
        file: Arc<ColumnFile>,
        deletes: RoaringBitmap,
        /// The row groups this partition reads: all of the file's, or a
        /// contiguous part of them after [`ScanPartition::split_row_groups`].
        groups: std::ops::Range<usize>,
    },
    Memtable {
        batches: Vec<RecordBatch>,
        deletes: RoaringBitmap,
        ncols: usize,
    },
    Rows(Arc<RowVersion>),
    Overlay(Arc<Overlay>),
}

/// What [`ScanPartition::immutable_rows`] returns: whole row groups
/// `groups` of column file `file` of table `table` (at `schema_version`),
/// `rows` rows, all visible.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ImmutableRows {
    pub table: u64,
    pub schema_version: u32,
    pub file: u64,
    pub groups: std::ops::Range<usize>,
    pub rows: u64,
}

/// An independent unit of a scan.
#[derive(Clone)]
pub struct ScanPartition {
    def: Arc<TableDef>,
    at: Lsn,
    source: Source,
    /// Keys a transaction overwrote: rows with them are skipped.
    hidden: Option<Arc<Overlay>>,
    /// When set, only rows with these keys are read.
    only: Option<Arc<HashSet<Vec<u8>>>>,
}

/// The output schema of a scan with this projection.
pub fn scan_schema(def: &TableDef, projection: Option<&[usize]>, with_key: bool) -> SchemaRef {
    let full = def.arrow_schema();
    let mut fields: Vec<Field> = match projection {
        Some(p) => p.iter().map(|&i| full.field(i).clone()).collect(),
        None => full.fields().iter().map(|f| f.as_ref().clone()).collect(),
    };
    if with_key {
        fields.push(Field::new(KEY_COLUMN, DataType::Binary, false));
    }
    Arc::new(Schema::new(fields))
}

impl ScanPartition {
    pub fn num_rows_upper_bound(&self) -> u64 {
        match &self.source {
            Source::File { file, groups, .. } => {
                if *groups == (0..file.row_group_count()) {
                    file.meta.rows
                } else {
                    groups.clone().map(|g| file.row_group_rows(g)).sum()
                }
            }
            Source::Memtable { batches, .. } => batches.iter().map(|b| b.num_rows() as u64).sum(),
            Source::Rows(v) => v.approx_entries(),
            Source::Overlay(o) => o.rows.len() as u64,
        }
    }

    /// Statistics per row group; empty when unknown.
    pub fn row_groups(&self) -> Vec<RowGroupStats> {
        match &self.source {
            Source::File { file, groups, .. } => {
                groups.clone().map(|g| file.row_group_stats(g)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Bytes of the file behind this partition (0 for memory); a part of a
    /// file counts its share of the file's rows.
    pub fn file_bytes(&self) -> u64 {
        match &self.source {
            Source::File { file, .. } => {
                let rows = self.num_rows_upper_bound();
                if rows >= file.meta.rows || file.meta.rows == 0 {
                    file.meta.bytes
                } else {
                    let share =
                        u128::from(file.meta.bytes) * u128::from(rows) / u128::from(file.meta.rows);
                    u64::try_from(share).unwrap_or(file.meta.bytes)
                }
            }
            _ => 0,
        }
    }

    /// The identity of this partition's rows when it is whole row groups of
    /// a column file that the snapshot sees entirely: every row committed
    /// at or before it, none deleted, none hidden or filtered by a
    /// transaction's overlay. Column files are immutable and a file id is
    /// never reused within a process, so the same identity always reads the
    /// same rows and values, and a cache of decoded or device copies may be
    /// keyed on it. `None` for memory sources and any partial visibility.
    pub fn immutable_rows(&self) -> Option<ImmutableRows> {
        if self.hidden.is_some() || self.only.is_some() {
            return None;
        }
        let Source::File {
            file,
            deletes,
            groups,
        } = &self.source
        else {
            return None;
        };
        if file.meta.max_lsn > self.at {
            return None;
        }
        let first = if groups.start < file.row_group_count() {
            u32::try_from(file.row_group_start(groups.start)).ok()?
        } else {
            0
        };
        let rows = self.num_rows_upper_bound();
        let end = u32::try_from(u64::from(first).checked_add(rows)?).ok()?;
        if deletes.range_cardinality(first..end) != 0 {
            return None;
        }
        Some(ImmutableRows {
            table: u64::from(self.def.id.0),
            schema_version: self.def.schema_version,
            file: file.meta.id.0,
            groups: groups.clone(),
            rows,
        })
    }

    /// Whether this partition is known to read no row (an empty memory
    /// table), so a reader of [`immutable_rows`](Self::immutable_rows) may
    /// skip it.
    pub fn is_known_empty(&self) -> bool {
        match &self.source {
            Source::Memtable { batches, .. } => batches.iter().all(|b| b.num_rows() == 0),
            _ => false,
        }
    }

    /// This partition cut into at most `pieces` partitions of contiguous
    /// row groups, about equal in rows, that together read exactly what it
    /// reads (same snapshot, deletes and key filters). Only a column file
    /// with several row groups is cut; anything else comes back whole. A
    /// scan uses this to give every core work when a table has fewer files
    /// than the machine has cores (one large file per shard after a bulk
    /// load).
    pub fn split_row_groups(&self, pieces: usize) -> Vec<ScanPartition> {
        let Source::File {
            file,
            deletes,
            groups,
        } = &self.source
        else {
            return vec![self.clone()];
        };
        let n = groups.len();
        let pieces = pieces.min(n);
        if pieces <= 1 {
            return vec![self.clone()];
        }
        let rows: Vec<u64> = groups.clone().map(|g| file.row_group_rows(g)).collect();
        let total: u64 = rows.iter().sum();
        let mut out = Vec::with_capacity(pieces);
        let mut start = groups.start;
        let mut taken = 0u64;
        for (i, r) in rows.iter().enumerate() {
            taken += r;
            let g = groups.start + i + 1;
            // Cut after row group g-1 once this piece reached its share of
            // the rows, leaving at least one row group per remaining piece.
            let done = out.len() + 1;
            let remaining_groups = groups.end - g;
            let remaining_pieces = pieces - done;
            let share = total.saturating_mul(done as u64) / pieces as u64;
            if done < pieces
                && remaining_groups >= remaining_pieces
                && (taken >= share || remaining_groups == remaining_pieces)
            {
                out.push(self.with_groups(file, deletes, start..g));
                start = g;
            }
        }
        if start < groups.end {
            out.push(self.with_groups(file, deletes, start..groups.end));
        }
        out
    }

    fn with_groups(
        &self,
        file: &Arc<ColumnFile>,
        deletes: &RoaringBitmap,
        groups: std::ops::Range<usize>,
    ) -> ScanPartition {
        ScanPartition {
            source: Source::File {
                file: Arc::clone(file),
                deletes: deletes.clone(),
                groups,
            },
            ..self.clone()
        }
    }

    /// Scans the partition. See `docs/design/storage-api.md`.
    pub fn scan(
        &self,
        projection: Option<&[usize]>,
        with_key: bool,
        keep_row_group: &dyn Fn(&RowGroupStats) -> bool,
    ) -> Result<Box<dyn Iterator<Item = Result<RecordBatch>> + Send>> {
        if self.hidden.is_none() && self.only.is_none() {
            return self.scan_source(projection, with_key, keep_row_group);
        }
        let hidden = self.hidden.clone();
        let only = self.only.clone();
        // Read the keys too, drop the rows the transaction overwrote (and
        // those outside `only`).
        let inner = self.scan_source(projection, true, keep_row_group)?;
        Ok(Box::new(inner.map(move |b| {
            let b = b?;
            let key_col = b.num_columns() - 1;
            let keys = b
                .column(key_col)
                .as_any()
                .downcast_ref::<arrow::array::BinaryArray>()
                .ok_or_else(|| {
                    StorageError::InvalidDefinition("key column is not binary".into())
                })?;
            let keep: BooleanArray = (0..keys.len())
                .map(|i| {
                    let k = keys.value(i);
                    Some(
                        !hidden.as_ref().is_some_and(|h| h.hidden.contains(k))
                            && only.as_ref().is_none_or(|o| o.contains(k)),
                    )
                })
                .collect();
            let mut b = arrow::compute::filter_record_batch(&b, &keep)
                .map_err(|e| StorageError::arrow("overlay filter", e))?;
            if !with_key {
                let keep_cols: Vec<usize> = (0..key_col).collect();
                b = b
                    .project(&keep_cols)
                    .map_err(|e| StorageError::arrow("overlay projection", e))?;
            }
            Ok(b)
        })))
    }

    fn scan_source(
        &self,
        projection: Option<&[usize]>,
        with_key: bool,
        keep_row_group: &dyn Fn(&RowGroupStats) -> bool,
    ) -> Result<Box<dyn Iterator<Item = Result<RecordBatch>> + Send>> {
        let ncols = self.def.columns.len();
        let proj: Vec<usize> = match projection {
            Some(p) => {
                if let Some(&bad) = p.iter().find(|&&i| i >= ncols) {
                    return Err(StorageError::InvalidDefinition(format!(
                        "projection index {bad} out of range"
                    )));
                }
                p.to_vec()
            }
            None => (0..ncols).collect(),
        };
        let schema = scan_schema(&self.def, Some(&proj), with_key);
        let types: Vec<ColumnType> = self.def.columns.iter().map(|c| c.ty).collect();
        match &self.source {
            Source::Overlay(o) => {
                let mut builders: Vec<ColumnBuilder> = proj
                    .iter()
                    .map(|&i| ColumnBuilder::new(types[i], o.rows.len()))
                    .collect();
                let mut keys = arrow::array::BinaryBuilder::new();
                for (key, row) in &o.rows {
                    for (b, &i) in builders.iter_mut().zip(&proj) {
                        b.append(row.get(i).unwrap_or(&eddy_common::Value::Null))
                            .map_err(|e| StorageError::conversion("overlay batch", e))?;
                    }
                    if with_key {
                        keys.append_value(key);
                    }
                }
                let mut cols: Vec<ArrayRef> = builders.iter_mut().map(|b| b.finish()).collect();
                if with_key {
                    cols.push(Arc::new(keys.finish()));
                }
                let b = RecordBatch::try_new_with_options(
                    schema,
                    cols,
                    &arrow::record_batch::RecordBatchOptions::new()
                        .with_row_count(Some(o.rows.len())),
                )
                .map_err(|e| StorageError::arrow("overlay batch", e));
                Ok(Box::new(std::iter::once(b)))
            }
            Source::File {
                file,
                deletes,
                groups,
            } => {
                let kept: Vec<usize> = groups
                    .clone()
                    .filter(|&g| keep_row_group(&file.row_group_stats(g)))
                    .collect();
                let file = file.clone();
                let deletes = deletes.clone();
                let at = self.at;
                let need_lsn = file.meta.max_lsn > at && file.meta.min_lsn != file.meta.max_lsn;
                let fncols = file.ncols();
                // stored columns to decode: projected ones the file has, then lsn, key
                let mut stored: Vec<usize> = proj.iter().copied().filter(|&i| i < fncols).collect();
                let lsn_pos = need_lsn.then(|| {
                    stored.push(fncols);
                    stored.len() - 1
                });
                let key_pos = with_key.then(|| {
                    stored.push(fncols + 1);
                    stored.len() - 1
                });
                Ok(Box::new(kept.into_iter().filter_map(move |g| {
                    let run = || -> Result<Option<RecordBatch>> {
                        let b = file.read_row_group(g, Some(&stored))?;
                        let start = file.row_group_start(g) as u32;
                        let mask = visibility(&b, start, &deletes, lsn_pos, at);
                        assemble(&schema, &types, &proj, fncols, &b, mask, key_pos)
                    };
                    run().transpose()
                })))
            }
            Source::Memtable {
                batches,
                deletes,
                ncols: mncols,
            } => {
                let mut start = 0u32;
                let mut items = Vec::with_capacity(batches.len());
                for b in batches {
                    items.push((start, b.clone()));
                    start += b.num_rows() as u32;
                }
                let deletes = deletes.clone();
                let at = self.at;
                let mncols = *mncols;
                Ok(Box::new(items.into_iter().filter_map(move |(start, b)| {
                    let mut stored: Vec<usize> =
                        proj.iter().copied().filter(|&i| i < mncols).collect();
                    stored.push(mncols);
                    let lsn_pos = Some(stored.len() - 1);
                    let key_pos = with_key.then(|| {
                        stored.push(mncols + 1);
                        stored.len() - 1
                    });
                    let run = || -> Result<Option<RecordBatch>> {
                        let b = b
                            .project(&stored)
                            .map_err(|e| StorageError::arrow("memtable projection", e))?;
                        let mask = visibility(&b, start, &deletes, lsn_pos, at);
                        assemble(&schema, &types, &proj, mncols, &b, mask, key_pos)
                    };
                    run().transpose()
                })))
            }
            Source::Rows(v) => {
                let width = ncols;
                let mut merge = v.scan(self.at);
                let mut done = false;
                Ok(Box::new(std::iter::from_fn(move || {
                    if done {
                        return None;
                    }
                    let mut builders: Vec<ColumnBuilder> = proj
                        .iter()
                        .map(|&i| ColumnBuilder::new(types[i], ROW_SCAN_BATCH))
                        .collect();
                    let mut keys = arrow::array::BinaryBuilder::new();
                    let mut n = 0;
                    while n < ROW_SCAN_BATCH {
                        match merge.next() {
                            None => {
                                done = true;
                                break;
                            }
                            Some(Err(e)) => {
                                done = true;
                                return Some(Err(e));
                            }
                            Some(Ok(e)) => {
                                let Some(bytes) = e.value else { continue };
                                let row = match decode_row_bytes(&bytes, width, "row file") {
                                    Ok(r) => r,
                                    Err(err) => {
                                        done = true;
                                        return Some(Err(err));
                                    }
                                };
                                for (b, &i) in builders.iter_mut().zip(&proj) {
                                    if let Err(err) = b.append(&row[i]) {
                                        done = true;
                                        return Some(Err(StorageError::conversion(
                                            "row scan batch",
                                            err,
                                        )));
                                    }
                                }
                                if with_key {
                                    keys.append_value(&e.key);
                                }
                                n += 1;
                            }
                        }
                    }
                    if n == 0 {
                        return None;
                    }
                    let mut cols: Vec<ArrayRef> = builders.iter_mut().map(|b| b.finish()).collect();
                    if with_key {
                        cols.push(Arc::new(keys.finish()));
                    }
                    Some(
                        RecordBatch::try_new(schema.clone(), cols)
                            .map_err(|e| StorageError::arrow("row scan batch", e)),
                    )
                })))
            }
        }
    }
}

/// Which rows of a batch starting at row `start` are visible at `at`.
fn visibility(
    b: &RecordBatch,
    start: u32,
    deletes: &RoaringBitmap,
    lsn_pos: Option<usize>,
    at: Lsn,
) -> Option<BooleanArray> {
    let n = b.num_rows() as u32;
    let any_deleted = deletes.range_cardinality(start..start + n) > 0;
    let lsns = lsn_pos.and_then(|p| b.column(p).as_any().downcast_ref::<UInt64Array>().cloned());
    let any_future = lsns
        .as_ref()
        .is_some_and(|l| arrow::compute::max(l).is_some_and(|m| m > at.0));
    if !any_deleted && !any_future {
        return None;
    }
    Some(
        (0..n)
            .map(|r| {
                let dead = any_deleted && deletes.contains(start + r);
                let future =
                    any_future && lsns.as_ref().is_some_and(|l| l.value(r as usize) > at.0);
                Some(!dead && !future)
            })
            .collect(),
    )
}

/// Builds the output batch: projected columns (NULL for columns the stored
/// batch predates), then the key column, filtered by `mask`.
fn assemble(
    schema: &SchemaRef,
    types: &[ColumnType],
    proj: &[usize],
    stored_ncols: usize,
    b: &RecordBatch,
    mask: Option<BooleanArray>,
    key_pos: Option<usize>,
) -> Result<Option<RecordBatch>> {
    let n = b.num_rows();
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(proj.len() + 1);
    let mut src = 0;
    for &i in proj {
        if i < stored_ncols {
            cols.push(b.column(src).clone());
            src += 1;
        } else {
            cols.push(null_column(types[i], n));
        }
    }
    if let Some(k) = key_pos {
        cols.push(b.column(k).clone());
    }
    // Filter before the batch takes the table's schema: a deleted or
    // not-yet-visible version may hold a NULL in a column declared NOT NULL
    // since (ALTER COLUMN ... SET NOT NULL checks only the visible rows).
    let (cols, rows) = match mask {
        Some(m) => {
            let keep = arrow::compute::FilterBuilder::new(&m).optimize().build();
            let cols = cols
                .iter()
                .map(|c| keep.filter(c))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| StorageError::arrow("visibility filter", e))?;
            (cols, keep.count())
        }
        None => (cols, n),
    };
    let opts = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows));
    let out = RecordBatch::try_new_with_options(schema.clone(), cols, &opts)
        .map_err(|e| StorageError::arrow("scan batch", e))?;
    Ok((out.num_rows() > 0).then_some(out))
}
