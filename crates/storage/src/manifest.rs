//! Small metadata files replaced atomically: the catalog and each shard's
//! manifest (file lists, flushed LSN, delete maps).
//!
//! Write order, so that a crash at any point leaves either the old or the
//! new file and never a mix: write `NAME.tmp` -> fsync it -> rename over
//! `NAME` -> fsync the directory. The content ends with a CRC32C line so a
//! damaged file is an error naming it, never a silently wrong catalog.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use eddy_common::{FileId, Lsn, TableId};
use roaring::RoaringBitmap;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::column_tablet::ColumnFileMeta;
use crate::error::{Result, StorageError};
use crate::row_tablet::RowFileMeta;
use crate::wal::fsync_dir;

/// Writes `value` as JSON to `path` atomically and durably.
pub fn write_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let body = serde_json::to_vec_pretty(value)
        .map_err(|e| StorageError::corrupt(path, format!("cannot serialise: {e}")))?;
    let crc = crc32c::crc32c(&body);
    let tmp = path.with_extension("tmp");
    let mut f = fs::File::create(&tmp).map_err(|e| StorageError::io(&tmp, e))?;
    f.write_all(&body)
        .and_then(|_| writeln!(f, "\n#crc32c={crc:08x}"))
        .and_then(|_| f.sync_all())
        .map_err(|e| StorageError::io(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| StorageError::io(path, e))?;
    if let Some(dir) = path.parent() {
        fsync_dir(dir)?;
    }
    Ok(())
}

/// Reads a file written by [`write_atomic`]; `Ok(None)` if it does not exist.
pub fn read_checked<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StorageError::io(path, e)),
    };
    let text = String::from_utf8(bytes).map_err(|_| StorageError::corrupt(path, "not UTF-8"))?;
    let (body, tail) = text
        .rsplit_once("\n#crc32c=")
        .ok_or_else(|| StorageError::corrupt(path, "missing checksum line"))?;
    let want = u32::from_str_radix(tail.trim(), 16)
        .map_err(|_| StorageError::corrupt(path, "bad checksum line"))?;
    if crc32c::crc32c(body.as_bytes()) != want {
        return Err(StorageError::corrupt(path, "checksum mismatch"));
    }
    serde_json::from_str(body)
        .map(Some)
        .map_err(|e| StorageError::corrupt(path, format!("undecodable: {e}")))
}

/// Files of one table in one shard.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TabletFiles {
    pub row_l0: Vec<RowFileMeta>,
    pub row_l1: Vec<RowFileMeta>,
    pub col: Vec<ColumnFileMeta>,
    /// Deleted rows per column file, as of `flushed_lsn`.
    pub col_deletes: BTreeMap<u64, Vec<u8>>,
}

/// A shard's durable state apart from the WAL.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Manifest {
    /// Every write with LSN `<=` this is in the files below; the WAL is
    /// replayed from the next LSN.
    pub flushed_lsn: Lsn,
    pub tables: BTreeMap<u32, TabletFiles>,
}

impl Manifest {
    pub fn all_file_names(&self) -> Vec<String> {
        let mut v = Vec::new();
        for t in self.tables.values() {
            for f in t.row_l0.iter().chain(&t.row_l1) {
                v.push(crate::row_tablet::row_file_name(f.id));
            }
            for f in &t.col {
                v.push(crate::column_tablet::column_file_name(f.id));
            }
        }
        v
    }

    pub fn max_file_id(&self) -> FileId {
        let mut m = 0;
        for t in self.tables.values() {
            for f in t.row_l0.iter().chain(&t.row_l1) {
                m = m.max(f.id.0);
            }
            for f in &t.col {
                m = m.max(f.id.0);
            }
        }
        FileId(m)
    }

    pub fn table(&self, id: TableId) -> Option<&TabletFiles> {
        self.tables.get(&id.0)
    }
}

pub fn bitmap_to_bytes(b: &RoaringBitmap) -> Vec<u8> {
    let mut v = Vec::with_capacity(b.serialized_size());
    // Writing into a Vec cannot fail.
    let _ = b.serialize_into(&mut v);
    v
}

pub fn bitmap_from_bytes(path: &Path, bytes: &[u8]) -> Result<RoaringBitmap> {
    RoaringBitmap::deserialize_from(bytes)
        .map_err(|e| StorageError::corrupt(path, format!("undecodable delete map: {e}")))
}
