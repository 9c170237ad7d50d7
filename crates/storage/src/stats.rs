//! A table's storage as it stands now, for the console: per shard its
//! memtables and its files (kind, level, rows, bytes), read from the
//! tablets' current versions.
//!
//! Read-only and cheap: it clones the `Arc`s of each tablet's current
//! version under the tablet's read lock (as a snapshot does) and reads
//! file metadata already in memory; it never opens a file, never blocks a
//! writer for longer than that clone, and never takes the publish gate (the
//! figures of different shards may be a few commits apart).
//! [`Table::exact_row_count`] is the one exception to "cheap": it merges a
//! row tablet's versions, and declines tables over a bound the caller sets.

use eddy_common::Lsn;

use crate::column_tablet::column_file_name;
use crate::engine::Table;
use crate::row_tablet::row_file_name;

/// One file of a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStats {
    /// File name inside the shard's directory (`<id>.row`, `<id>.arrow`).
    pub name: String,
    /// `row` (sorted run of a row tablet) or `column` (Arrow IPC file).
    pub kind: &'static str,
    /// LSM level of a row file; `None` for column files.
    pub level: Option<u32>,
    /// Entries of a row file (versions and delete markers included), or
    /// rows of a column file less its deleted rows.
    pub rows: u64,
    /// Bytes on disk.
    pub bytes: u64,
}

/// One shard of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardStats {
    pub shard: u32,
    /// The shard's directory relative to the data directory (`tg1/s0`).
    pub dir: String,
    pub visible_lsn: Lsn,
    /// Rows in memtables not yet flushed (row tablets count versions).
    pub memtable_rows: u64,
    /// Approximate bytes those memtables hold.
    pub memtable_bytes: u64,
    pub files: Vec<FileStats>,
}

/// Every shard of a table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableStats {
    pub shards: Vec<ShardStats>,
}

impl TableStats {
    /// Bytes of all files on disk (memtables excluded).
    pub fn file_bytes(&self) -> u64 {
        self.shards
            .iter()
            .flat_map(|s| &s.files)
            .map(|f| f.bytes)
            .sum()
    }

    /// Number of files.
    pub fn file_count(&self) -> usize {
        self.shards.iter().map(|s| s.files.len()).sum()
    }
}

impl Table {
    /// Live rows at each shard's visible LSN, counted by merging the row
    /// tablets' versions (updates and deletes resolved): `None` for a table
    /// without a row tablet, or whose row tablets hold more than
    /// `max_entries` versions (the merge reads every one of them).
    pub fn exact_row_count(&self, max_entries: u64) -> Option<u64> {
        let id = self.def().id;
        let mut versions = Vec::new();
        let mut entries = 0u64;
        for shard in self.shards() {
            let t = shard.tablets(id)?;
            let v = t.row.as_ref()?.read().clone();
            entries = entries.saturating_add(v.approx_entries());
            if entries > max_entries {
                return None;
            }
            versions.push((v, shard.visible_lsn()));
        }
        let mut rows = 0u64;
        for (v, at) in versions {
            for entry in v.scan(at) {
                entry.ok()?;
                rows += 1;
            }
        }
        Some(rows)
    }

    /// The table's memtables and files now (see the module doc).
    pub fn storage_stats(&self) -> TableStats {
        let id = self.def().id;
        let mut shards = Vec::new();
        for shard in self.shards() {
            let mut stats = ShardStats {
                shard: shard.id.0,
                dir: shard.rel_dir.clone(),
                visible_lsn: shard.visible_lsn(),
                memtable_rows: 0,
                memtable_bytes: 0,
                files: Vec::new(),
            };
            if let Some(t) = shard.tablets(id) {
                if let Some(rl) = &t.row {
                    let v = rl.read().clone();
                    for m in std::iter::once(&v.memtable).chain(&v.frozen) {
                        stats.memtable_rows += m.len() as u64;
                        stats.memtable_bytes += m.approx_bytes() as u64;
                    }
                    for f in v.l0.iter().chain(&v.l1) {
                        stats.files.push(FileStats {
                            name: row_file_name(f.meta.id),
                            kind: "row",
                            level: Some(f.meta.level),
                            rows: f.meta.entries,
                            bytes: f.meta.bytes,
                        });
                    }
                }
                if let Some(cl) = &t.col {
                    let v = cl.read().clone();
                    // a row,column table keeps the same rows in both
                    // tablets: count the memtable once
                    if t.row.is_none() {
                        stats.memtable_rows += v.memtable_rows();
                        for m in std::iter::once(&v.memtable).chain(&v.frozen) {
                            stats.memtable_bytes += m.approx_bytes() as u64;
                        }
                    }
                    for f in &v.files {
                        let deleted = f.deletes.lock().len();
                        stats.files.push(FileStats {
                            name: column_file_name(f.meta.id),
                            kind: "column",
                            level: None,
                            rows: f.meta.rows.saturating_sub(deleted),
                            bytes: f.meta.bytes,
                        });
                    }
                }
            }
            shards.push(stats);
        }
        TableStats { shards }
    }
}
