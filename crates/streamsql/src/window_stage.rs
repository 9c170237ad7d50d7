//! A window aggregate with EMIT ON WINDOW CLOSE run as one input of a join
//! of two windowed aggregates (Nexmark q8, `window_join.rs`): the same
//! groups, accumulators, clock and window closing as a grouped view's
//! [`ViewOperator`], but a closed window's rows come out as an Arrow batch
//! (the post stages' output, rows HAVING rejects left out) for the join
//! instead of being committed into a table. Nothing here commits: the
//! append operator that owns the stage commits the join's pairs.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::filter_record_batch;
use serde::{Deserialize, Serialize};

use super::ViewOperator;
use crate::error::Result;
use crate::watermark::{ClockState, EventClock};

/// A window stage's state in its owner's snapshot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StageSnapshot {
    /// The open windows' groups (Arrow IPC, as a grouped view keeps them).
    groups: Option<Vec<u8>>,
    clock: Option<ClockState>,
}

impl ViewOperator {
    /// Adds one batch of the stage's source to its groups (rows below the
    /// watermark are dropped as late, as in a grouped view).
    pub(crate) fn stage_feed(&mut self, batch: RecordBatch) -> Result<()> {
        self.source_rows += batch.num_rows() as u64;
        self.feed(batch, false)
    }

    /// The rows of every window the watermark has closed (at the end of
    /// the source, `end`: every window), each window emitted once: its
    /// groups are dropped as they are taken. `None`: none closed.
    pub(crate) fn stage_take_closed(&mut self, end: bool) -> Result<Option<RecordBatch>> {
        let closed_below = if end {
            Some(i64::MAX)
        } else {
            self.clock.as_ref().and_then(EventClock::watermark)
        };
        let Some(w) = closed_below else {
            return Ok(None);
        };
        for g in std::mem::take(&mut self.dirty) {
            if let Some(group) = self.groups.get_mut(g) {
                group.dirty = false;
            }
        }
        let closed: Vec<usize> = (0..self.groups.len())
            .filter(|g| {
                self.groups
                    .get(*g)
                    .and_then(|group| group.window_end)
                    .is_some_and(|e| e <= w)
            })
            .collect();
        if closed.is_empty() {
            return Ok(None);
        }
        let (columns, values) = self.group_values(&closed)?;
        let (out, mask) = self.output_batch(columns, values)?;
        self.drop_closed(w);
        Ok(Some(filter_record_batch(&out, &mask)?))
    }

    /// Rows the stage dropped as late.
    pub(crate) fn stage_late_rows(&self) -> u64 {
        self.clock.as_ref().map_or(0, |c| c.state().late_rows)
    }

    pub(crate) fn stage_snapshot(&mut self) -> Result<StageSnapshot> {
        Ok(StageSnapshot {
            groups: self.groups_state()?,
            clock: self.clock.as_ref().map(EventClock::state),
        })
    }

    pub(crate) fn stage_restore(&mut self, snap: StageSnapshot) -> Result<()> {
        self.index.clear();
        self.keys.clear();
        self.groups.clear();
        self.dirty.clear();
        if let Some(bytes) = &snap.groups {
            self.restore_groups(bytes)?;
        }
        if let (Some(clock), Some(state)) = (&mut self.clock, snap.clock) {
            clock.restore(state);
        }
        Ok(())
    }
}
