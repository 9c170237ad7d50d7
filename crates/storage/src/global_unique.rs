//! UNIQUE indexes whose columns lack the distribution key on multi-shard
//! tables ("global" unique indexes): equal keys may be stored in different
//! shards, decided under different commit locks, so each shard's check
//! (`Shard::resolve`) alone cannot see a duplicate in another shard.
//!
//! Invariant: every write to such a table is committed holding the table's
//! *unique lock* (one per table, taken in table-id order before any commit
//! lock, held until the write is published), and is checked under it
//! against the latest state of **every** shard plus the write's own final
//! rows. Writers of the table are serialised (its shards still apply
//! other tables' writes concurrently); with no other writer of the table,
//! the latest state cannot change between the check and the apply. Bulk
//! loads refuse UNIQUE indexes, so no write reaches the table around it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use eddy_common::{Row, TableDef, TableId};
use parking_lot::Mutex;

use crate::commit::Routed;
use crate::engine::EngineInner;
use crate::error::{Result, StorageError};
use crate::index::{has_null, index_key};
use crate::shard::{OnConflict, ShardOpKind};

/// Whether `def` (with `shards` shards) has a UNIQUE index that needs the
/// cross-shard check.
pub fn has_global_unique(def: &TableDef, shards: usize) -> bool {
    shards > 1
        && def
            .indexes
            .iter()
            .any(|ix| ix.unique && !holds_distribution_key(def, &ix.columns))
}

fn holds_distribution_key(def: &TableDef, cols: &[usize]) -> bool {
    let dist: &[usize] = if def.distribution_key.is_empty() {
        &def.primary_key
    } else {
        &def.distribution_key
    };
    !dist.is_empty() && dist.iter().all(|d| cols.contains(d))
}

/// A table's definition, its group, and the final row (`None`: deleted)
/// of every key a write touches.
type FinalRows = (
    Arc<TableDef>,
    eddy_common::TableGroupId,
    BTreeMap<Vec<u8>, Option<Row>>,
);

/// The per-table unique locks (see the module doc).
#[derive(Default)]
pub(crate) struct UniqueLocks {
    locks: Mutex<HashMap<TableId, Arc<Mutex<()>>>>,
}

impl UniqueLocks {
    /// The locks of the tables of `routed` that need the check, in table-id
    /// order (lock them in this order).
    pub(crate) fn for_write(&self, inner: &EngineInner, routed: &Routed) -> Vec<Arc<Mutex<()>>> {
        let mut tables: BTreeMap<TableId, ()> = BTreeMap::new();
        for ((group, _), (_, ops)) in routed {
            let shards = inner.groups.read().get(group).map_or(1, |g| g.shards.len());
            for op in ops {
                if has_global_unique(&op.table, shards) {
                    tables.insert(op.table.id, ());
                }
            }
        }
        let mut map = self.locks.lock();
        tables
            .keys()
            .map(|id| Arc::clone(map.entry(*id).or_default()))
            .collect()
    }
}

impl EngineInner {
    /// The cross-shard UNIQUE check of a write (its tables' unique locks
    /// held): the final row of every key the write touches, against the
    /// latest rows of every shard it does not touch.
    pub(crate) fn check_global_unique(&self, routed: &Routed) -> Result<()> {
        // per table: key -> final row, and the table's definition and group
        let mut finals: BTreeMap<TableId, FinalRows> = BTreeMap::new();
        for ((group, _), (shard, ops)) in routed {
            let shards = self.groups.read().get(group).map_or(1, |g| g.shards.len());
            for op in ops {
                if !has_global_unique(&op.table, shards) {
                    continue;
                }
                let entry = finals
                    .entry(op.table.id)
                    .or_insert_with(|| (Arc::clone(&op.table), *group, BTreeMap::new()));
                let existing = match entry.2.get(&op.key.0) {
                    Some(r) => r.clone(),
                    None => match shard.tablets(op.table.id) {
                        Some(t) => t.current(&op.key.0)?,
                        None => None,
                    },
                };
                let new = match &op.kind {
                    ShardOpKind::Delete => None,
                    ShardOpKind::Insert { row, on_conflict } => match (existing, on_conflict) {
                        (None, _) => Some(row.clone()),
                        (Some(_), OnConflict::Error | OnConflict::Replace) => Some(row.clone()),
                        (Some(old), OnConflict::DoNothing) => Some(old),
                        (Some(old), OnConflict::Update(f)) => match f(&old, row) {
                            Ok(Some(new)) => Some(new),
                            Ok(None) => Some(old),
                            // the shard's resolve reports it
                            Err(_) => Some(old),
                        },
                    },
                };
                entry.2.insert(op.key.0.clone(), new);
            }
        }
        for (def, group, rows) in finals.values() {
            let Some(g) = self.groups.read().get(group).cloned() else {
                continue;
            };
            for ix in def.indexes.iter().filter(|ix| ix.unique) {
                let cols = &ix.columns;
                let mut holders: HashMap<Vec<u8>, usize> = HashMap::new();
                for row in rows.values().flatten() {
                    if has_null(cols, row) {
                        continue;
                    }
                    if let Some(k) = index_key(cols, row) {
                        *holders.entry(k).or_default() += 1;
                    }
                }
                for row in rows.values().flatten() {
                    if has_null(cols, row) {
                        continue;
                    }
                    let Some(k) = index_key(cols, row) else {
                        continue;
                    };
                    let mut n = holders.get(&k).copied().unwrap_or(0);
                    for s in &g.shards {
                        let Some(t) = s.tablets(def.id) else { continue };
                        if let Some(six) = t.index_list().iter().find(|i| i.def.name == ix.name) {
                            n += six
                                .live_owners(&k)
                                .iter()
                                .filter(|pk| !rows.contains_key(*pk))
                                .count();
                        }
                    }
                    if n > 1 {
                        return Err(StorageError::UniqueViolation {
                            constraint: ix.name.clone(),
                            key: crate::codec::describe_columns(def, cols, row),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
