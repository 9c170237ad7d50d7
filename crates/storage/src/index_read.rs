//! Index lookups at a snapshot: the rows of a [`TableSnapshot`] whose index
//! key lies in a range, read through the shards' index tablets.
//!
//! The answer is a *superset* of the snapshot's rows in the range (the
//! caller re-applies its predicate) and never misses one: each shard's
//! index returns every entry not removed at or before the snapshot's LSN
//! (`crate::index`), and each candidate is read by key *at that LSN*. When
//! that cannot be done exactly, the lookup answers `None` and the caller
//! scans: the index purged entries the snapshot may need, or a column-only
//! tablet (which keeps only the newest version of a key) has a candidate
//! written after the snapshot.

use std::ops::Bound;

use eddy_common::Row;

use crate::codec::decode_row_bytes;
use crate::error::{Result, StorageError};
use crate::snapshot::TableSnapshot;

/// A row with the storage key it is stored under.
pub type KeyedRow = (Vec<u8>, Row);

impl TableSnapshot {
    /// Rows (with their keys) of this snapshot (the transaction's own writes included) that
    /// may have index `index`'s leading encoded columns within
    /// `(lower, upper)`; `None`: the index cannot answer at this snapshot.
    pub fn index_lookup(
        &self,
        index: &str,
        lower: &Bound<Vec<u8>>,
        upper: &Bound<Vec<u8>>,
    ) -> Result<Option<Vec<KeyedRow>>> {
        let def = self.def();
        let width = def.columns.len();
        let mut out = Vec::new();
        let truncated = self.overlay.as_ref().is_some_and(|o| o.truncated);
        for (s, view) in self.shards.iter().enumerate() {
            if truncated {
                break;
            }
            let Some(tablets) = &view.tablets else {
                continue;
            };
            let at = *self.lsns().get(s).ok_or_else(|| {
                StorageError::InvalidDefinition("a snapshot without its shard".into())
            })?;
            let list = tablets.index_list();
            let Some(ix) = list.iter().find(|ix| ix.def.name == index) else {
                return Ok(None); // built after this snapshot's definition
            };
            let Some(keys) = ix.lookup(lower, upper, at) else {
                return Ok(None);
            };
            for key in keys {
                if self
                    .overlay
                    .as_ref()
                    .is_some_and(|o| o.hidden.contains(&key))
                {
                    continue;
                }
                let row = match (&view.rows, &tablets.col) {
                    (Some(rv), _) => match rv.get(&key, at)? {
                        Some(b) => Some(decode_row_bytes(&b, width, "row tablet")?),
                        None => None,
                    },
                    (None, Some(cl)) => {
                        if view.shard.last_write(def.id, &key) > at {
                            return Ok(None);
                        }
                        let v = cl.read().clone();
                        v.get(&key)?
                    }
                    (None, None) => None,
                };
                if let Some(mut r) = row {
                    r.resize(width, eddy_common::Value::Null);
                    out.push((key, r));
                }
            }
        }
        if let Some(o) = &self.overlay {
            out.extend(o.rows.iter().map(|(k, r)| {
                let mut r = r.clone();
                r.resize(width, eddy_common::Value::Null);
                (k.clone(), r)
            }));
        }
        Ok(Some(out))
    }
}

impl crate::engine::Table {
    /// Keys of the live rows (latest committed state, every shard) whose
    /// key under index `index` is `key` (encoded as
    /// [`crate::index::index_key`]): a UNIQUE check made before commit.
    pub fn index_owners(&self, index: &str, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        for shard in self.shards() {
            let Some(t) = shard.tablets(self.def().id) else {
                continue;
            };
            if let Some(ix) = t.index_list().iter().find(|ix| ix.def.name == index) {
                out.extend(ix.live_owners(key));
            }
        }
        Ok(out)
    }
}
