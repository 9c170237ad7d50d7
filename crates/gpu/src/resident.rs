//! Fact columns kept on the device between queries.
//!
//! Five device runs showed where the GPU path's time goes: Eddy's scan
//! decodes the fact rows on the host, the operators copy them into chunks
//! and pinned memory, and they cross the bus on every query, so the
//! device's work was a small part of each query. Column files never change
//! once written, so a fact table's columns can be uploaded once and read
//! by every later query from device memory.
//!
//! The storage side names the pieces ([`ResidentSource`], implemented by
//! Eddy's scan in `crates/sql`, found through [`set_resolver`] because this
//! crate cannot name the SQL layer's types); this module keeps the device
//! copies ([`ResidentCache`]).
//!
//! Invariants:
//! * A cache key names immutable bytes: the piece's identity (a column
//!   file's whole row groups that the snapshot sees entirely, with no
//!   deleted or overlaid row: `ScanPartition::immutable_rows`), the table
//!   column, and the device layout it was written in. A hit is never
//!   checked again because it cannot be stale.
//! * A partition reads resident columns only when *every* piece of its
//!   scan partition is immutable, and then exactly those pieces: the rows
//!   are the CPU plan's rows for that partition, so a partition that falls
//!   back to the CPU plan neither loses nor repeats a row.
//! * The cache holds at most [`budget`] bytes per device, least recently
//!   used entries going first. An entry a running query uses is held by an
//!   `Arc` until that query's streams are synchronised, so eviction never
//!   frees memory a kernel is reading.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use arrow::array::{Array, ArrayRef};
use cudarc::driver::CudaSlice;
use datafusion::physical_plan::ExecutionPlan;
use parking_lot::Mutex;

use crate::codegen::expr::ColumnUse;
use crate::device::GpuDevice;
use crate::error::{GpuError, Result};
use crate::metrics::{GpuMetrics, GPU_METRICS};

/// A scan whose partitions may be read from device-resident columns.
pub trait ResidentSource: Send + Sync + fmt::Debug {
    /// The pieces output partition `partition` reads, in any order, or
    /// `None` when any of its rows is not in an immutable piece (memory
    /// tables, deleted rows, a transaction's own writes, a row limit, a
    /// filter the scan applies itself).
    fn pieces(&self, partition: usize) -> Option<Vec<Arc<dyn ResidentPiece>>>;
}

/// Immutable rows of a table (see the module invariants).
pub trait ResidentPiece: Send + Sync {
    /// Rows in the piece.
    fn rows(&self) -> usize;
    /// The identity of output column `column`'s values in this piece: the
    /// same key always means the same values. `None` for a column that is
    /// not stored (the hidden key column).
    fn column_key(&self, column: usize) -> Option<Vec<u64>>;
    /// Output column `column` for every row of the piece, decoded on the
    /// host.
    fn read_column(&self, column: usize) -> std::result::Result<ArrayRef, String>;
}

/// Finds the [`ResidentSource`] behind a plan node (Eddy's scan), or None.
pub type Resolver = fn(&Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ResidentSource>>;

static RESOLVER: OnceLock<Resolver> = OnceLock::new();

/// Registers how scans are recognised; the first registration wins (the
/// SQL layer registers one function, once per process).
pub fn set_resolver(resolver: Resolver) {
    let _ = RESOLVER.set(resolver);
}

/// The resident source behind `plan`, if one is registered and applies.
pub(crate) fn source_of(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ResidentSource>> {
    RESOLVER.get().and_then(|r| r(plan))
}

/// Bytes the cache may hold on a device: 40% of its memory, leaving the
/// rest to build tables, group tables and staging of queries whose input
/// is not resident.
pub fn budget(total_memory: usize) -> u64 {
    (total_memory as u64 / 5) * 2
}

/// One column of one piece on the device.
#[derive(Clone, Debug)]
pub(crate) struct ResidentColumn {
    pub values: Arc<CudaSlice<u8>>,
    /// None: the column has no NULL in this piece.
    pub validity: Option<Arc<CudaSlice<u8>>>,
}

/// (device ordinal, piece column key, device layout).
type CacheKey = (usize, Vec<u64>, crate::codegen::types::DevType);

/// The least-recently-used bookkeeping, apart from the device memory so
/// that it can be tested without a device.
#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    entries: HashMap<K, (V, u64, u64)>,
    bytes: u64,
    tick: u64,
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> Lru<K, V> {
    pub(crate) fn new() -> Self {
        Lru {
            entries: HashMap::new(),
            bytes: 0,
            tick: 0,
        }
    }

    /// The value under `key`, marked as just used.
    pub(crate) fn get(&mut self, key: &K) -> Option<V> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(key).map(|e| {
            e.2 = tick;
            e.0.clone()
        })
    }

    /// Inserts `value` of `bytes` bytes, first dropping least recently used
    /// entries until everything fits in `budget`. A value larger than the
    /// whole budget is not kept. Returns how many entries were dropped.
    pub(crate) fn insert(&mut self, key: K, value: V, bytes: u64, budget: u64) -> usize {
        if bytes > budget {
            return 0;
        }
        if let Some(old) = self.entries.remove(&key) {
            self.bytes -= old.1;
        }
        let mut dropped = 0;
        while self.bytes + bytes > budget {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.2)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(e) = self.entries.remove(&oldest) {
                self.bytes -= e.1;
                dropped += 1;
            }
        }
        self.tick += 1;
        self.bytes += bytes;
        self.entries.insert(key, (value, bytes, self.tick));
        dropped
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The device copies of resident columns, for every device.
pub(crate) struct ResidentCache {
    /// One bookkeeping per device ordinal (budgets differ per device).
    lru: Mutex<HashMap<usize, Lru<CacheKey, ResidentColumn>>>,
}

/// The process-wide cache.
pub(crate) fn cache() -> &'static ResidentCache {
    static CACHE: OnceLock<ResidentCache> = OnceLock::new();
    CACHE.get_or_init(|| ResidentCache {
        lru: Mutex::new(HashMap::new()),
    })
}

impl ResidentCache {
    /// `column` of `piece` on `dev`, uploaded on first use.
    pub(crate) fn column(
        &self,
        dev: &GpuDevice,
        piece: &dyn ResidentPiece,
        column: &ColumnUse,
    ) -> Result<ResidentColumn> {
        let id = piece.column_key(column.index).ok_or_else(|| {
            GpuError::Internal(format!("column {} has no resident identity", column.index))
        })?;
        let key: CacheKey = (dev.info.ordinal, id, column.ty);
        let ordinal = dev.info.ordinal;
        if let Some(c) = self.lru.lock().get_mut(&ordinal).and_then(|l| l.get(&key)) {
            GpuMetrics::add(&GPU_METRICS.resident_hits, 1);
            return Ok(c);
        }
        let array = piece
            .read_column(column.index)
            .map_err(|e| GpuError::Internal(format!("reading a resident column: {e}")))?;
        if array.len() != piece.rows() {
            return Err(GpuError::Internal(format!(
                "resident column has {} rows, its piece {}",
                array.len(),
                piece.rows()
            )));
        }
        let host = crate::datapath::host_column(&array, column.ty)?;
        let stream = &dev.streams[0];
        let (values, validity) =
            crate::datapath::upload_column(stream, &host, "upload resident column")?;
        // Kernels on other streams read it next: the copy must be done.
        stream
            .synchronize()
            .map_err(GpuError::driver("cuStreamSynchronize"))?;
        let bytes = (host.values.len() + host.validity.as_ref().map_or(0, Vec::len)) as u64;
        let col = ResidentColumn { values, validity };
        let mut all = self.lru.lock();
        let lru = all.entry(ordinal).or_insert_with(Lru::new);
        let dropped = lru.insert(key, col.clone(), bytes, budget(dev.info.total_memory));
        GpuMetrics::add(&GPU_METRICS.resident_loaded_bytes, bytes);
        GpuMetrics::add(&GPU_METRICS.resident_evictions, dropped as u64);
        GPU_METRICS
            .resident_bytes
            .store(lru.bytes(), std::sync::atomic::Ordering::Relaxed);
        tracing::debug!(
            entries = lru.len(),
            bytes = lru.bytes(),
            "resident column loaded"
        );
        Ok(col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_recently_used_entries_go_first_and_the_budget_holds() {
        let mut l: Lru<u32, &str> = Lru::new();
        assert_eq!(l.insert(1, "a", 40, 100), 0);
        assert_eq!(l.insert(2, "b", 40, 100), 0);
        // 1 is used again, so 2 is the oldest when 3 needs room.
        assert_eq!(l.get(&1), Some("a"));
        assert_eq!(l.insert(3, "c", 40, 100), 1);
        assert_eq!(l.get(&2), None);
        assert_eq!(l.get(&1), Some("a"));
        assert_eq!(l.get(&3), Some("c"));
        assert_eq!(l.bytes(), 80);
        // Larger than the whole budget: not kept, nothing dropped.
        assert_eq!(l.insert(4, "d", 101, 100), 0);
        assert_eq!(l.len(), 2);
        // Replacing a key frees its old size first.
        assert_eq!(l.insert(3, "c2", 60, 100), 0);
        assert_eq!(l.bytes(), 100);
        assert_eq!(l.insert(5, "e", 10, 100), 1);
        assert_eq!(l.get(&1), None);
        assert_eq!(l.get(&3), Some("c2"));
    }

    #[test]
    fn the_budget_is_two_fifths_of_device_memory() {
        assert_eq!(budget(100), 40);
        assert_eq!(budget(150 << 30), 60 << 30);
    }
}
