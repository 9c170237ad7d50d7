//! The bulk-load path: large batches written straight to shard files and
//! committed atomically across shards.
//!
//! 1. [`BulkLoader::push`] validates each batch, computes keys, routes rows
//!    to shards and buffers them; a full buffer becomes shard files (row
//!    and/or column, by the table's orientation), written and fsync'd but
//!    referenced by nothing yet.
//! 2. [`BulkLoader::commit`] writes the rest, then commits: one shard logs a
//!    single bulk-commit record; several shards run two-phase commit (a
//!    prepare record per shard, then the commit log fsync is the commit
//!    point, then each shard installs its files at its record's LSN).
//! 3. Dropping a loader without committing deletes its files; files of a
//!    crashed load are unreferenced and deleted by recovery.
//!
//! Rows with equal primary keys within one load: the last one wins. A row
//! whose key exists already replaces the old row (the old version is marked
//! deleted at the commit LSN).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, UInt32Array, UInt64Array};
use arrow::record_batch::RecordBatch;
use eddy_common::{ColumnType, Value};

use crate::arrow_values::{rows_to_arrays, value_at};
use crate::codec::{encode_key_value, encode_row, stable_hash};
use crate::column_tablet::{column_file_name, ColumnFileWriter};
use crate::engine::Table;
use crate::error::{Result, StorageError};
use crate::row_tablet::{row_file_name, Entry, RowFileBuilder};
use crate::shard::{columns_of, BulkFiles};

/// Rows buffered per shard before they are written as a file.
const CHUNK_ROWS: usize = 1 << 20;

struct ShardLoad {
    batches: Vec<RecordBatch>,
    rows: usize,
    files: BulkFiles,
}

pub struct BulkLoader {
    table: Arc<Table>,
    shards: Vec<ShardLoad>,
    rows: u64,
    committed: bool,
}

impl BulkLoader {
    pub(crate) fn new(table: Arc<Table>) -> BulkLoader {
        let n = table.shard_count() as usize;
        let id = table.def().id;
        BulkLoader {
            shards: (0..n)
                .map(|_| ShardLoad {
                    batches: Vec::new(),
                    rows: 0,
                    files: BulkFiles {
                        table: id,
                        ..Default::default()
                    },
                })
                .collect(),
            table,
            rows: 0,
            committed: false,
        }
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Adds a batch whose columns match the table's columns (by position and
    /// type). NOT NULL columns must have no NULLs.
    pub fn push(&mut self, batch: RecordBatch) -> Result<()> {
        self.push_rows(batch, None)
    }

    /// [`BulkLoader::push`] under the caller's row ids, one per row, into a
    /// table **without a primary key**: `WriteOp::Put`'s semantics (a row
    /// stored under an id replaces any row already there; the caller owns
    /// the table's id space). An append-only materialized view stores each
    /// checkpoint's rows this way, under their source positions.
    pub fn push_at(&mut self, batch: RecordBatch, rowids: &[u64]) -> Result<()> {
        if !self.table.def().primary_key.is_empty() {
            return Err(StorageError::Unsupported(format!(
                "a bulk load by row id into table \"{}\", which has a primary key",
                self.table.def().name
            )));
        }
        if rowids.len() != batch.num_rows() {
            return Err(StorageError::InvalidDefinition(format!(
                "a bulk load of {} rows with {} row ids",
                batch.num_rows(),
                rowids.len()
            )));
        }
        self.push_rows(batch, Some(rowids))
    }

    /// Validates `batch`, computes each row's key and shard (row ids from
    /// `rowids`, or freshly allocated) and buffers it for its shard.
    fn push_rows(&mut self, batch: RecordBatch, rowids: Option<&[u64]>) -> Result<()> {
        let def = self.table.def().clone();
        if batch.num_columns() != def.columns.len() {
            return Err(StorageError::WrongArity {
                table: def.name.clone(),
                expected: def.columns.len(),
                got: batch.num_columns(),
            });
        }
        for (c, a) in def.columns.iter().zip(batch.columns()) {
            if a.data_type() != &c.ty.to_arrow() {
                return Err(StorageError::WrongType {
                    table: def.name.clone(),
                    column: c.name.clone(),
                    expected: c.ty.pg_name(),
                    got: a.data_type().to_string(),
                });
            }
            if !c.nullable && a.null_count() > 0 {
                return Err(StorageError::NotNull {
                    table: def.name.clone(),
                    column: c.name.clone(),
                    row: None,
                });
            }
        }
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let nshards = self.shards.len() as u32;
        let types: Vec<ColumnType> = def.columns.iter().map(|c| c.ty).collect();
        // keys and shards, column at a time
        let mut keys: Vec<Vec<u8>> = vec![Vec::with_capacity(16); n];
        let mut shard_of: Vec<u32> = vec![0; n];
        if def.primary_key.is_empty() {
            let start = match rowids {
                Some(_) => 0,
                None => self.table.engine()?.alloc_rowids(n as u64)?,
            };
            let dist = &def.distribution_key;
            let mut dbuf: Vec<Vec<u8>> = vec![Vec::new(); if dist.is_empty() { 0 } else { n }];
            for &c in dist {
                let a = batch.column(c);
                for (r, buf) in dbuf.iter_mut().enumerate() {
                    let v = value_at(a.as_ref(), types[c], r)
                        .map_err(|e| StorageError::conversion("bulk load key", e))?;
                    encode_key_value(&v, buf);
                }
            }
            for r in 0..n {
                let rowid = match rowids {
                    Some(ids) => ids.get(r).copied().ok_or_else(|| {
                        StorageError::InvalidDefinition("a bulk load row without a row id".into())
                    })?,
                    None => start + r as u64,
                };
                let s = if dist.is_empty() {
                    (stable_hash(&rowid.to_le_bytes()) % nshards as u64) as u32
                } else {
                    (stable_hash(&dbuf[r]) % nshards as u64) as u32
                };
                shard_of[r] = s;
                let k = &mut keys[r];
                k.push(0x02);
                k.extend_from_slice(&s.to_be_bytes());
                k.extend_from_slice(&rowid.to_be_bytes());
            }
        } else {
            let dist = if def.distribution_key.is_empty() {
                def.primary_key.clone()
            } else {
                def.distribution_key.clone()
            };
            let mut dbuf: Vec<Vec<u8>> = vec![Vec::with_capacity(16); n];
            for &c in &def.primary_key {
                let a = batch.column(c);
                let in_dist = dist.contains(&c);
                for r in 0..n {
                    let v = value_at(a.as_ref(), types[c], r)
                        .map_err(|e| StorageError::conversion("bulk load key", e))?;
                    let before = keys[r].len();
                    encode_key_value(&v, &mut keys[r]);
                    if in_dist {
                        let enc = keys[r][before..].to_vec();
                        dbuf[r].extend_from_slice(&enc);
                    }
                }
            }
            for r in 0..n {
                shard_of[r] = (stable_hash(&dbuf[r]) % nshards as u64) as u32;
            }
        }
        let lsns: ArrayRef = Arc::new(UInt64Array::from(vec![0u64; n]));
        let keys: ArrayRef = Arc::new(BinaryArray::from_iter_values(keys.iter()));
        let mut cols = batch.columns().to_vec();
        cols.push(lsns);
        cols.push(keys);
        let stored_schema = crate::arrow_conv::stored_schema(&columns_of(&def));
        let full = RecordBatch::try_new(stored_schema, cols)
            .map_err(|e| StorageError::arrow("bulk batch", e))?;
        for s in 0..nshards {
            let idx: UInt32Array = (0..n as u32)
                .filter(|&r| shard_of[r as usize] == s)
                .map(Some)
                .collect();
            if idx.is_empty() {
                continue;
            }
            let part = if idx.len() == n {
                full.clone()
            } else {
                arrow::compute::take_record_batch(&full, &idx)
                    .map_err(|e| StorageError::arrow("routing rows to shards", e))?
            };
            let load = &mut self.shards[s as usize];
            load.rows += part.num_rows();
            load.batches.push(part);
            if load.rows >= CHUNK_ROWS {
                self.write_chunk(s as usize)?;
            }
        }
        self.rows += n as u64;
        Ok(())
    }

    /// Writes shard `s`'s buffered rows as files.
    fn write_chunk(&mut self, s: usize) -> Result<()> {
        let load = &mut self.shards[s];
        if load.rows == 0 {
            return Ok(());
        }
        let def = self.table.def().clone();
        let shard = self.table.shards()[s].clone();
        let schema = crate::arrow_conv::stored_schema(&columns_of(&def));
        let chunk = arrow::compute::concat_batches(&schema, &load.batches)
            .map_err(|e| StorageError::arrow("bulk chunk", e))?;
        load.batches.clear();
        load.rows = 0;
        let keycol = def.columns.len() + 1;
        let keys = chunk
            .column(keycol)
            .as_any()
            .downcast_ref::<BinaryArray>()
            .cloned()
            .ok_or_else(|| StorageError::InvalidDefinition("key column".into()))?;
        // last row wins among equal keys
        let chunk = if def.primary_key.is_empty() {
            chunk
        } else {
            let mut last: HashMap<&[u8], u32> = HashMap::with_capacity(keys.len());
            for (r, k) in keys.iter().enumerate() {
                last.insert(k.unwrap_or_default(), r as u32);
            }
            if last.len() == keys.len() {
                chunk
            } else {
                let mut keep: Vec<u32> = last.into_values().collect();
                keep.sort_unstable();
                let idx = UInt32Array::from(keep);
                arrow::compute::take_record_batch(&chunk, &idx)
                    .map_err(|e| StorageError::arrow("dedup", e))?
            }
        };
        let types: Vec<ColumnType> = def.columns.iter().map(|c| c.ty).collect();
        if def.orientation.has_column() {
            let mut w = ColumnFileWriter::new(columns_of(&def))?;
            w.push(chunk.clone())?;
            let id = shard.alloc_file_id();
            let (bytes, meta) = w.finish(id, Some(eddy_common::Lsn::ZERO))?;
            shard.store().put(
                &format!("{}/{}", shard.rel_dir, column_file_name(id)),
                bytes,
            )?;
            self.shards[s].files.col.push(meta);
        }
        if def.orientation.has_row() {
            let keys = chunk
                .column(keycol)
                .as_any()
                .downcast_ref::<BinaryArray>()
                .cloned()
                .ok_or_else(|| StorageError::InvalidDefinition("key column".into()))?;
            let mut order: Vec<u32> = (0..chunk.num_rows() as u32).collect();
            order.sort_unstable_by(|&a, &b| keys.value(a as usize).cmp(keys.value(b as usize)));
            let mut b = RowFileBuilder::default();
            let mut buf = Vec::with_capacity(256);
            for r in order {
                let row: Vec<Value> = types
                    .iter()
                    .enumerate()
                    .map(|(i, &ty)| value_at(chunk.column(i).as_ref(), ty, r as usize))
                    .collect::<Result<_, _>>()
                    .map_err(|e| StorageError::conversion("bulk load row file", e))?;
                buf.clear();
                encode_row(&row, &mut buf);
                b.add(&Entry {
                    key: keys.value(r as usize).to_vec(),
                    lsn: eddy_common::Lsn::ZERO,
                    value: Some(Arc::from(buf.as_slice())),
                });
            }
            let id = shard.alloc_file_id();
            let (bytes, meta) = b.finish(id, 0);
            shard
                .store()
                .put(&format!("{}/{}", shard.rel_dir, row_file_name(id)), bytes)?;
            self.shards[s].files.row.push(meta);
        }
        Ok(())
    }

    /// Writes what is buffered and makes the whole load visible atomically.
    /// Returns the number of rows pushed.
    pub fn commit(mut self) -> Result<u64> {
        let involved = self.write_rest()?;
        let engine = self.table.engine()?;
        let shards = self.table.shards().to_vec();
        match involved.as_slice() {
            [] => {}
            [s] => {
                let s = *s;
                let (mut g, lsn) =
                    shards[s].bulk_prepare(&self.shards[s].files, eddy_common::TxnId(0))?;
                // the record is the commit point: the files are the shard's
                // from here, whatever happens next
                self.committed = true;
                shards[s].bulk_finish(&mut g, &self.shards[s].files, lsn, true)?;
            }
            _ => {
                let txn = engine.next_txn();
                let mut prepared = Vec::new();
                for &s in &involved {
                    let (g, lsn) = shards[s].bulk_prepare(&self.shards[s].files, txn)?;
                    prepared.push((s, g, lsn));
                }
                engine.log_commit(txn)?;
                self.committed = true;
                for (s, g, lsn) in &mut prepared {
                    shards[*s].bulk_finish(g, &self.shards[*s].files, *lsn, false)?;
                }
                // All shards become visible together (see `commit`).
                let _gate = engine.publish_gate.write();
                for (s, _, lsn) in &prepared {
                    shards[*s].publish(*lsn);
                }
            }
        }
        self.committed = true;
        tracing::info!(table = %self.table.def().name, rows = self.rows, "bulk load committed");
        Ok(self.rows)
    }

    /// Commits the load **and** `writes` (row writes into other tables) as
    /// one transaction: both or neither become visible, after a crash too
    /// (`crate::commit`, "Bulk files with row writes"). The tables of
    /// `writes` must not share a table group with the loaded table. Returns
    /// the number of rows pushed.
    pub fn commit_with(mut self, writes: Vec<(Arc<Table>, Vec<crate::WriteOp>)>) -> Result<u64> {
        let involved = self.write_rest()?;
        let engine = self.table.engine()?;
        let files: Vec<(usize, &crate::shard::BulkFiles)> = involved
            .iter()
            .map(|&s| (s, &self.shards[s].files))
            .collect();
        let mut committed = false;
        let r = engine.commit_bulk_with(&self.table, &files, writes, &mut committed);
        // Past the commit point the files belong to the shards (an error
        // after it poisoned a shard, which recovery replays): never delete.
        self.committed = committed;
        r?;
        Ok(self.rows)
    }

    /// Refuses tables a bulk load cannot write, writes every buffered row
    /// as files and returns the shards that received any.
    fn write_rest(&mut self) -> Result<Vec<usize>> {
        // Bulk files are installed without resolving each row, so nothing
        // could check a UNIQUE index: such tables take the write path.
        if let Some(ix) = self.table.def().indexes.iter().find(|i| i.unique) {
            return Err(StorageError::Unsupported(format!(
                "a bulk load into table \"{}\" with unique index \"{}\" is not supported; insert its rows with INSERT",
                self.table.def().name,
                ix.name
            )));
        }
        for s in 0..self.shards.len() {
            self.write_chunk(s)?;
        }
        Ok((0..self.shards.len())
            .filter(|&s| {
                !self.shards[s].files.col.is_empty() || !self.shards[s].files.row.is_empty()
            })
            .collect())
    }
}

impl Drop for BulkLoader {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        let shards = self.table.shards().to_vec();
        for (s, load) in self.shards.iter().enumerate() {
            let dir = &shards[s].rel_dir;
            for f in &load.files.col {
                let _ = shards[s]
                    .store()
                    .delete(&format!("{dir}/{}", column_file_name(f.id)));
            }
            for f in &load.files.row {
                let _ = shards[s]
                    .store()
                    .delete(&format!("{dir}/{}", row_file_name(f.id)));
            }
        }
    }
}

/// Builds an Arrow batch of a table's columns from rows (for callers that
/// have rows but want the bulk path).
pub fn rows_to_batch(table: &Table, rows: &[eddy_common::Row]) -> Result<RecordBatch> {
    let def = table.def();
    let types: Vec<ColumnType> = def.columns.iter().map(|c| c.ty).collect();
    let cols =
        rows_to_arrays(&types, rows).map_err(|e| StorageError::conversion("rows to batch", e))?;
    RecordBatch::try_new(table.schema(), cols).map_err(|e| StorageError::arrow("rows to batch", e))
}
