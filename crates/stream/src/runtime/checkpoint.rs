//! Checkpoint storage: completed checkpoints in a directory through
//! `object_store`'s `LocalFileSystem`, or in memory.
//!
//! Layout under `<dir>/<job>/`: `chk-<id>/<vertex>-<subtask>` (one
//! `TaskState` each), then `chk-<id>/_metadata` written last. A checkpoint
//! without `_metadata` is incomplete and is ignored (and deleted) by
//! recovery. The two newest complete checkpoints are kept.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StreamError};
use crate::runtime::task::TaskState;
use crate::types::{CheckpointId, SubtaskId, VertexId};

/// A complete checkpoint: the state of every subtask.
#[derive(Debug, Clone)]
pub struct CompletedCheckpoint {
    /// Id.
    pub id: CheckpointId,
    /// Whether it is the final checkpoint of a finished job.
    pub is_final: bool,
    /// State per subtask.
    pub states: BTreeMap<SubtaskId, TaskState>,
}

#[derive(Serialize, Deserialize)]
struct Metadata {
    id: u64,
    is_final: bool,
    subtasks: Vec<(u32, u32)>,
}

/// Where completed checkpoints go.
pub enum CheckpointStorage {
    /// Kept in memory (no directory configured).
    Memory(Mutex<Option<CompletedCheckpoint>>),
    /// A local directory through object_store.
    Dir {
        /// The store, rooted at `<dir>/<job>`.
        store: Arc<LocalFileSystem>,
        /// Runtime driving the async store API.
        rt: tokio::runtime::Runtime,
    },
}

fn ckpt_err(e: impl std::fmt::Display) -> StreamError {
    StreamError::Checkpoint(e.to_string())
}

fn chk_prefix(id: u64) -> String {
    format!("chk-{id:012}")
}

impl CheckpointStorage {
    /// In-memory storage.
    pub fn memory() -> Self {
        CheckpointStorage::Memory(Mutex::new(None))
    }

    /// Directory storage at `<dir>/<job>` (created if missing).
    pub fn dir(dir: &Path, job: &str) -> Result<Self> {
        let root = dir.join(job);
        std::fs::create_dir_all(&root)
            .map_err(|e| StreamError::io(root.display().to_string(), e))?;
        let store = LocalFileSystem::new_with_prefix(&root)
            .map_err(ckpt_err)?
            .with_automatic_cleanup(true);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| StreamError::io("checkpoint runtime", e))?;
        Ok(CheckpointStorage::Dir {
            store: Arc::new(store),
            rt,
        })
    }

    /// Persists a checkpoint: task states first, `_metadata` last.
    pub fn save(&self, c: &CompletedCheckpoint) -> Result<()> {
        match self {
            CheckpointStorage::Memory(m) => {
                *m.lock() = Some(c.clone());
                Ok(())
            }
            CheckpointStorage::Dir { store, rt } => rt.block_on(async {
                let prefix = chk_prefix(c.id.0);
                for (s, st) in &c.states {
                    let p = ObjPath::from(format!("{prefix}/{}-{}", s.vertex.0, s.index));
                    store
                        .put(&p, PutPayload::from(st.encode()))
                        .await
                        .map_err(ckpt_err)?;
                }
                let meta = Metadata {
                    id: c.id.0,
                    is_final: c.is_final,
                    subtasks: c.states.keys().map(|s| (s.vertex.0, s.index)).collect(),
                };
                let p = ObjPath::from(format!("{prefix}/_metadata"));
                store
                    .put(&p, PutPayload::from(serde_json::to_vec(&meta)?))
                    .await
                    .map_err(ckpt_err)?;
                Self::cleanup(store, c.id.0).await
            }),
        }
    }

    /// Deletes checkpoints older than the previous complete one, and incomplete ones.
    async fn cleanup(store: &LocalFileSystem, newest: u64) -> Result<()> {
        let all: Vec<_> = store.list(None).try_collect().await.map_err(ckpt_err)?;
        let mut ids = BTreeMap::<u64, bool>::new();
        for o in &all {
            let s = o.location.to_string();
            if let Some(id) = s
                .strip_prefix("chk-")
                .and_then(|r| r.split('/').next())
                .and_then(|n| n.parse::<u64>().ok())
            {
                let done = ids.entry(id).or_insert(false);
                *done |= s.ends_with("/_metadata");
            }
        }
        let complete: Vec<u64> = ids.iter().filter(|(_, d)| **d).map(|(i, _)| *i).collect();
        let keep_from = complete.iter().rev().nth(1).copied().unwrap_or(newest);
        for o in all {
            let s = o.location.to_string();
            let id = s
                .strip_prefix("chk-")
                .and_then(|r| r.split('/').next())
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(id) = id {
                let incomplete_old = !ids.get(&id).copied().unwrap_or(false) && id < newest;
                if id < keep_from || incomplete_old {
                    store.delete(&o.location).await.map_err(ckpt_err)?;
                }
            }
        }
        Ok(())
    }

    /// The newest complete checkpoint, if any.
    pub fn latest(&self) -> Result<Option<CompletedCheckpoint>> {
        match self {
            CheckpointStorage::Memory(m) => Ok(m.lock().clone()),
            CheckpointStorage::Dir { store, rt } => rt.block_on(async {
                let all: Vec<_> = store.list(None).try_collect().await.map_err(ckpt_err)?;
                let newest = all
                    .iter()
                    .filter_map(|o| {
                        let s = o.location.to_string();
                        if !s.ends_with("/_metadata") {
                            return None;
                        }
                        s.strip_prefix("chk-")?
                            .split('/')
                            .next()?
                            .parse::<u64>()
                            .ok()
                    })
                    .max();
                let Some(id) = newest else { return Ok(None) };
                let prefix = chk_prefix(id);
                let meta_bytes = store
                    .get(&ObjPath::from(format!("{prefix}/_metadata")))
                    .await
                    .map_err(ckpt_err)?
                    .bytes()
                    .await
                    .map_err(ckpt_err)?;
                let meta: Metadata = serde_json::from_slice(&meta_bytes)?;
                let mut states = BTreeMap::new();
                for (v, i) in meta.subtasks {
                    let b = store
                        .get(&ObjPath::from(format!("{prefix}/{v}-{i}")))
                        .await
                        .map_err(ckpt_err)?
                        .bytes()
                        .await
                        .map_err(ckpt_err)?;
                    states.insert(
                        SubtaskId {
                            vertex: VertexId(v),
                            index: i,
                        },
                        TaskState::decode(&b)?,
                    );
                }
                Ok(Some(CompletedCheckpoint {
                    id: CheckpointId(meta.id),
                    is_final: meta.is_final,
                    states,
                }))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(id: u64) -> CompletedCheckpoint {
        let mut states = BTreeMap::new();
        states.insert(
            SubtaskId {
                vertex: VertexId(0),
                index: 1,
            },
            TaskState {
                source: Some(vec![id as u8]),
                ops: vec![None, Some(vec![1, 2, 3])],
            },
        );
        CompletedCheckpoint {
            id: CheckpointId(id),
            is_final: false,
            states,
        }
    }

    #[test]
    fn dir_storage_returns_newest_complete_and_keeps_two() -> Result<()> {
        let d = tempfile::tempdir().map_err(|e| StreamError::io("tmp", e))?;
        let s = CheckpointStorage::dir(d.path(), "job")?;
        assert!(s.latest()?.is_none());
        for id in 1..=4 {
            s.save(&ck(id))?;
        }
        // an incomplete checkpoint (no _metadata) is ignored
        std::fs::create_dir_all(d.path().join("job/chk-000000000009"))
            .map_err(|e| StreamError::io("x", e))?;
        std::fs::write(d.path().join("job/chk-000000000009/0-1"), b"junk")
            .map_err(|e| StreamError::io("x", e))?;
        let l = s
            .latest()?
            .ok_or_else(|| StreamError::Internal("none".into()))?;
        assert_eq!(l.id, CheckpointId(4));
        assert_eq!(l.states, ck(4).states);
        let kept: Vec<_> = std::fs::read_dir(d.path().join("job"))
            .map_err(|e| StreamError::io("x", e))?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
            .filter(|n| n.starts_with("chk-0000000000") && !n.ends_with('9'))
            .collect();
        assert_eq!(kept.len(), 2, "{kept:?}");
        Ok(())
    }

    #[test]
    fn task_state_decode_rejects_truncation() {
        let st = ck(1).states.into_values().next().unwrap_or_default();
        let b = st.encode();
        assert_eq!(TaskState::decode(&b).ok(), Some(st));
        assert!(TaskState::decode(&b[..b.len() - 1]).is_err());
    }
}
