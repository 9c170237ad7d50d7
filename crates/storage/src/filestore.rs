//! Where shard files live: an `object_store` with local disk as the default.
//!
//! Invariants:
//! * [`FileStore::put`] returns only once the file is durable: for the local
//!   store the file and its directory are fsync'd (object_store's
//!   `LocalFileSystem` renames into place but does not fsync).
//! * A file is never modified after `put`; readers map it read-only.
//! * Reads of a local store memory-map the file (zero-copy); a remote store's
//!   file is fetched whole into memory on first open.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use crate::error::{Result, StorageError};
use crate::wal::fsync_dir;

/// Bytes of one shard file, kept alive by whoever reads them.
#[derive(Clone)]
pub enum FileBytes {
    Mapped(Arc<memmap2::Mmap>),
    Owned(Bytes),
}

impl FileBytes {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m,
            FileBytes::Owned(b) => b,
        }
    }
}

pub struct FileStore {
    store: Arc<dyn ObjectStore>,
    /// Set when the store is the local file system rooted here.
    local_root: Option<PathBuf>,
}

impl FileStore {
    /// The embedded default: files under `root` on local disk.
    pub fn local(root: &FsPath) -> Result<FileStore> {
        std::fs::create_dir_all(root).map_err(|e| StorageError::io(root, e))?;
        let store = LocalFileSystem::new_with_prefix(root)?;
        Ok(FileStore {
            store: Arc::new(store),
            local_root: Some(root.to_path_buf()),
        })
    }

    /// Any other object store (S3-compatible and so on).
    pub fn remote(store: Arc<dyn ObjectStore>) -> FileStore {
        FileStore {
            store,
            local_root: None,
        }
    }

    /// A display path for error messages.
    pub fn display_path(&self, rel: &str) -> PathBuf {
        match &self.local_root {
            Some(r) => r.join(rel),
            None => PathBuf::from(format!("{}/{}", self.store, rel)),
        }
    }

    /// Writes a whole file durably.
    pub fn put(&self, rel: &str, bytes: Vec<u8>) -> Result<()> {
        let loc = ObjPath::from(rel);
        futures::executor::block_on(self.store.put(&loc, PutPayload::from(bytes)))?;
        if let Some(root) = &self.local_root {
            let p = root.join(rel);
            let f = std::fs::File::open(&p).map_err(|e| StorageError::io(&p, e))?;
            f.sync_all().map_err(|e| StorageError::io(&p, e))?;
            if let Some(dir) = p.parent() {
                fsync_dir(dir)?;
            }
        }
        Ok(())
    }

    pub fn get(&self, rel: &str) -> Result<FileBytes> {
        match &self.local_root {
            Some(root) => {
                let p = root.join(rel);
                let f = std::fs::File::open(&p).map_err(|e| StorageError::io(&p, e))?;
                // SAFETY: shard files are immutable once written (module
                // invariant); nothing truncates or rewrites a mapped file.
                let m = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| StorageError::io(&p, e))?;
                Ok(FileBytes::Mapped(Arc::new(m)))
            }
            None => {
                let loc = ObjPath::from(rel);
                let bytes = futures::executor::block_on(async {
                    self.store.get(&loc).await?.bytes().await
                })?;
                Ok(FileBytes::Owned(bytes))
            }
        }
    }

    /// Deletes a file; a missing file is not an error (deletes are retried
    /// by start-up garbage collection).
    pub fn delete(&self, rel: &str) -> Result<()> {
        let loc = ObjPath::from(rel);
        match futures::executor::block_on(self.store.delete(&loc)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Names of the files directly under `prefix` (for garbage collection).
    pub fn list(&self, prefix: &str) -> Result<Vec<String>> {
        match &self.local_root {
            Some(root) => {
                let dir = root.join(prefix);
                let mut out = Vec::new();
                let rd = match std::fs::read_dir(&dir) {
                    Ok(rd) => rd,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
                    Err(e) => return Err(StorageError::io(&dir, e)),
                };
                for ent in rd {
                    let ent = ent.map_err(|e| StorageError::io(&dir, e))?;
                    if ent.file_type().map(|t| t.is_file()).unwrap_or(false) {
                        out.push(ent.file_name().to_string_lossy().to_string());
                    }
                }
                Ok(out)
            }
            None => {
                use futures::StreamExt;
                let loc = ObjPath::from(prefix);
                let metas: Vec<_> =
                    futures::executor::block_on(self.store.list(Some(&loc)).collect::<Vec<_>>());
                let mut out = Vec::new();
                for m in metas {
                    let m = m?;
                    if let Some(name) = m.location.filename() {
                        out.push(name.to_string());
                    }
                }
                Ok(out)
            }
        }
    }
}
