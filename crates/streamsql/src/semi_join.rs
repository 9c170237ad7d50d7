//! The **semi join** of `interval_join.rs` (`JoinKind::LeftSemi` /
//! `RightSemi`: `WHERE k IN (SELECT k FROM s2)`, or an inner join whose
//! other side DataFusion's `EliminateJoin` proved contributes no column and
//! no duplicate, as in Nexmark q8) is the equi-join in a semi mode, without
//! an interval (`docs/design/streams-into-tables.md`, "Semi joins of two
//! append-only inputs"). Invariants:
//! * **A kept-side row is emitted exactly once, when it and a matching
//!   row of the other (existence) side have both been seen**, whatever
//!   the interleaving; its columns only. The answer is the batch semi join
//!   of the two prefixes (NULL keys match nothing).
//! * **No key is held on both sides at once**: an arriving kept row whose
//!   key the existence side holds is emitted at once and never held; the
//!   others are held until their key arrives. The existence side holds
//!   one row per distinct key; a key's first arrival releases (emits and
//!   un-indexes) the kept rows waiting for it, a later arrival does
//!   nothing.
//! * **The snapshot holds exactly the indexed rows** (released rows are
//!   not written), so after a restore no released row is emitted again;
//!   released rows' memory is reclaimed at checkpoints once they outnumber
//!   the waiting ones.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::filter_record_batch;

use super::{Held, JoinInput, KeyTime};
use crate::error::Result;

impl Held {
    /// How many rows the index holds.
    pub(super) fn indexed(&self) -> usize {
        self.index.values().map(BTreeSet::len).sum()
    }

    /// The indexed rows, in arrival order, as one batch (`None`: none).
    pub(super) fn indexed_rows(&self, input: &JoinInput) -> Result<Option<RecordBatch>> {
        let mut at: Vec<(usize, usize)> = self
            .index
            .values()
            .flatten()
            .map(|(_, b, r)| (*b, *r))
            .collect();
        if at.is_empty() {
            return Ok(None);
        }
        at.sort_unstable();
        let columns = self.rows_at(input, &at)?;
        Ok(Some(RecordBatch::try_new_with_options(
            Arc::clone(&input.schema),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(at.len())),
        )?))
    }

    /// Frees a semi join's released rows once they outnumber the waiting
    /// ones (so each row is copied O(1) times on average): the indexed
    /// rows become one batch.
    pub(super) fn reclaim(&mut self, input: &JoinInput) -> Result<()> {
        let all: usize = self.batches.iter().map(RecordBatch::num_rows).sum();
        if all <= 2 * self.indexed() {
            return Ok(());
        }
        let kept = self.indexed_rows(input)?;
        self.batches.clear();
        self.index.clear();
        if let Some(kept) = kept {
            self.hold(input, kept)?;
        }
        Ok(())
    }
}

/// One batch of a semi join's side `me` (its rows after its stages) met
/// with the other side's held rows: the kept side's rows it makes (as
/// columns, and how many), holding what must wait (module doc).
pub(super) fn semi(
    (me, mine): (&mut Held, &JoinInput),
    (other, theirs): (&mut Held, &JoinInput),
    kept_is_me: bool,
    batch: &RecordBatch,
) -> Result<(Vec<ArrayRef>, usize)> {
    let keys = me.keys_and_times(mine, batch)?;
    if kept_is_me {
        // matched now: emitted, never held; unmatched: held until their
        // key arrives; a NULL key: neither (it matches nothing)
        let matched = |kt: &KeyTime| kt.as_ref().map(|(k, _)| other.index.contains_key(k));
        let emit: BooleanArray = keys
            .iter()
            .map(|kt| Some(matched(kt) == Some(true)))
            .collect();
        let wait: BooleanArray = keys
            .iter()
            .map(|kt| Some(matched(kt) == Some(false)))
            .collect();
        let out = filter_record_batch(batch, &emit)?;
        let waiting = filter_record_batch(batch, &wait)?;
        if waiting.num_rows() > 0 {
            me.hold(mine, waiting)?;
        }
        let n = out.num_rows();
        return Ok((out.columns().to_vec(), n));
    }
    // the existence side: a key's first arrival releases the kept rows
    // waiting for it (they leave the index: emitted once) and is held once
    let mut new_keys: HashSet<Box<[u8]>> = HashSet::new();
    let mut released: Vec<(usize, usize)> = Vec::new();
    let mut first = Vec::with_capacity(keys.len());
    for kt in keys {
        let is_first = match kt {
            Some((key, _)) if !me.index.contains_key(&key) && !new_keys.contains(&key) => {
                if let Some(waiting) = other.index.remove(&key) {
                    released.extend(waiting.into_iter().map(|(_, b, r)| (b, r)));
                }
                new_keys.insert(key);
                true
            }
            _ => false,
        };
        first.push(Some(is_first));
    }
    let firsts = filter_record_batch(batch, &BooleanArray::from(first))?;
    if firsts.num_rows() > 0 {
        me.hold(mine, firsts)?;
    }
    // in the kept side's arrival order
    released.sort_unstable();
    Ok((other.rows_at(theirs, &released)?, released.len()))
}
