//! Eddy's storage engine, on the Hologres design: table groups split into
//! shards; per shard one WAL shared by every tablet; LSN-versioned row
//! tablets (point lookups) and column tablets (scans) with delete maps;
//! flush, compaction, bulk load with two-phase commit, and recovery.
//!
//! Invariants the rest of Eddy relies on:
//! * **Durability.** [`Table::write`] and [`BulkLoader::commit`] return only
//!   after their WAL record (or commit-log record) is fsync'd: an
//!   acknowledged write survives any crash.
//! * **Atomicity.** A write is one WAL record per shard, and a write over
//!   several shards commits through the commit log: after a crash it is
//!   visible whole or not at all.
//! * **Snapshots.** A [`TableSnapshot`] reads one LSN per shard; scans never
//!   block writers and writers never block scans; a write is visible to
//!   every snapshot taken after it returned (read-your-writes).
//! * **Corruption is loud.** Every WAL record, row-file block, column-file
//!   row group, manifest and catalog is checksummed; a mismatch is a
//!   [`StorageError::Corrupt`] naming the file, never wrong data.
//!
//! Where to look next: `docs/design/storage.md` (write path, read path,
//! recovery and the exact fsync order; flush and compaction off the commit
//! lock), [`shard`] (group commit, flush, compaction, recovery),
//! [`engine`] (catalog, routing, two-phase commit).

pub mod arrow_conv;
pub mod arrow_values;
pub mod bulk;
pub mod codec;
pub mod column_tablet;
pub mod commit;
pub mod ddl;
pub mod delete_map;
pub mod engine;
pub mod error;
pub mod filestore;
pub mod global_unique;
pub mod index;
pub mod index_read;
mod index_write;
pub mod locks;
pub mod manifest;
pub mod recent_writes;
pub mod row_tablet;
pub mod schemas;
pub mod shard;
pub mod snapshot;
pub mod stats;
pub mod views;
pub mod wal;

pub use arrow_conv::{ColumnStats, RowGroupStats, KEY_COLUMN};
pub use bulk::{rows_to_batch, BulkLoader};
pub use codec::Key;
pub use ddl::Ddl;
pub use engine::{CreateTable, Engine, EngineConfig, Table, TableGroupInfo, WriteOp};
pub use error::{Result, StorageError};
pub use locks::{LockManager, LockMode, LockWait, TABLE_LOCK_KEY};
pub use shard::{
    BackgroundHook, BackgroundStage, ConflictUpdateError, ConflictUpdateFn, OnConflict,
    WriteSummary,
};
pub use snapshot::{scan_schema, ImmutableRows, Overlay, ScanPartition, TableSnapshot};
