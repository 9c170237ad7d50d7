//! Index maintenance on the shard's write path: building a table's index
//! tablets from its rows (at open, at CREATE INDEX, after a bulk load) and
//! the UNIQUE check of the commit leader (`Shard::resolve`).
//!
//! Invariant: everything here runs under the shard's commit lock (or at
//! open, before the shard serves anyone), so the rows read and the index
//! written cannot change meanwhile. `docs/design/indexes.md` has the design.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use eddy_common::{ColumnType, Lsn, Row, TableDef, TableId};

use crate::error::{Result, StorageError};
use crate::index::{has_null, index_key, ShardIndex};
use crate::shard::Tablets;

impl Tablets {
    /// This shard's indexes of the table.
    pub fn index_list(&self) -> Arc<Vec<Arc<ShardIndex>>> {
        self.indexes.read().clone()
    }

    /// Fills `indexes` (empty) from the tablet's rows as of `at`.
    pub(crate) fn build_indexes(&self, indexes: &[Arc<ShardIndex>], at: Lsn) -> Result<()> {
        if indexes.is_empty() {
            return Ok(());
        }
        let def = self.def.read().clone();
        let types: Vec<ColumnType> = def.columns.iter().map(|c| c.ty).collect();
        for part in crate::snapshot::shard_partitions(&def, self, at) {
            for batch in part.scan(None, true, &|_| true)? {
                let batch = batch?;
                let Some(keys) = batch
                    .columns()
                    .last()
                    .and_then(|c| c.as_any().downcast_ref::<arrow::array::BinaryArray>())
                else {
                    return Err(StorageError::InvalidDefinition(
                        "scan without its key column".into(),
                    ));
                };
                for r in 0..batch.num_rows() {
                    let row = crate::arrow_values::row_at(&batch, &types, r)
                        .map_err(|e| StorageError::conversion("building an index", e))?;
                    for ix in indexes {
                        ix.add_live(keys.value(r), &row);
                    }
                }
            }
        }
        Ok(())
    }

    /// Rebuilds every index from the latest state (after a bulk load,
    /// which adds rows without naming them); lookups below `floor` scan.
    pub(crate) fn rebuild_indexes(&self, floor: Lsn) -> Result<()> {
        let list = self.index_list();
        for ix in list.iter() {
            ix.clear(floor);
        }
        self.build_indexes(&list, Lsn::MAX)
    }
}

/// Effects of the writes resolved so far in one group commit (or one
/// prepare), not yet applied: rows by (table, key), and for every UNIQUE
/// index the keys of those rows that hold each index key.
#[derive(Clone, Default)]
pub(crate) struct GroupOverlay {
    pub(crate) rows: HashMap<(TableId, Vec<u8>), Option<Row>>,
    pub(crate) unique: HashMap<(TableId, String, Vec<u8>), BTreeSet<Vec<u8>>>,
}

impl GroupOverlay {
    /// Records that `key` of `tid` changes from `old` to `new`.
    pub(crate) fn set(
        &mut self,
        tid: TableId,
        key: Vec<u8>,
        indexes: &[Arc<ShardIndex>],
        old: Option<&Row>,
        new: Option<Row>,
    ) {
        for ix in indexes.iter().filter(|ix| ix.def.unique) {
            let cols = &ix.def.columns;
            if let Some(k) = old
                .filter(|r| !has_null(cols, r))
                .and_then(|r| index_key(cols, r))
            {
                if let Some(set) = self.unique.get_mut(&(tid, ix.def.name.clone(), k)) {
                    set.remove(&key);
                }
            }
            if let Some(k) = new
                .as_ref()
                .filter(|r| !has_null(cols, r))
                .and_then(|r| index_key(cols, r))
            {
                self.unique
                    .entry((tid, ix.def.name.clone(), k))
                    .or_default()
                    .insert(key.clone());
            }
        }
        self.rows.insert((tid, key), new);
    }
}

/// A new row's key under a UNIQUE index, checked once its write is
/// resolved: (table, index, index key, the row).
pub(crate) type UniqueProbe = (Arc<TableDef>, Arc<ShardIndex>, Vec<u8>, Row);

/// Fails if a probed index key is held by more than one row once the
/// write is resolved: the group's own holders plus the latest committed
/// owners the group did not overwrite.
pub(crate) fn check_unique_probes(overlay: &GroupOverlay, touched: Vec<UniqueProbe>) -> Result<()> {
    for (def, ix, k, row) in touched {
        let group = overlay
            .unique
            .get(&(def.id, ix.def.name.clone(), k.clone()));
        let committed = ix
            .live_owners(&k)
            .into_iter()
            .filter(|pk| !overlay.rows.contains_key(&(def.id, pk.clone())))
            .count();
        if group.map_or(0, |g| g.len()) + committed > 1 {
            return Err(StorageError::UniqueViolation {
                constraint: ix.def.name.clone(),
                key: crate::codec::describe_columns(&def, &ix.def.columns, &row),
            });
        }
    }
    Ok(())
}
