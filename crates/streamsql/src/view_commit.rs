//! The one commit path of every view operator (grouped, windowed, joined
//! and append-only): a checkpoint's change and its row of
//! `eddy_stream_checkpoints` in one `Engine::commit`, skipped when the
//! checkpoint is recorded already (a commit repeated after a restore).

use std::sync::Arc;

use eddy_common::Value;
use eddy_storage::{BulkLoader, OnConflict, WriteOp};
use eddy_stream::operator::sink::FINAL_TAG;

use crate::error::Result;
use crate::view_op::{now_micros, Pending, ViewTarget};
use crate::view_tables::committed_checkpoint;

/// The `bigint` a checkpoint tag is recorded as (the final one as the
/// largest).
pub(crate) fn tag_value(tag: u64) -> i64 {
    if tag == FINAL_TAG {
        i64::MAX
    } else {
        i64::try_from(tag).unwrap_or(i64::MAX - 1)
    }
}

/// How a checkpoint's change reaches the view's table.
pub(crate) enum ViewWrite {
    /// Row operations (upserts and deletes of a grouped view; an
    /// append-only view stored in a row table before column-stored ones
    /// existed).
    Ops(Vec<WriteOp>),
    /// A bulk load of the rows under their ids (an append-only view in a
    /// column table): files, not one WAL record per row.
    Bulk(BulkLoader),
}

/// [`commit_view_write`] of row operations.
pub(crate) fn commit_change(
    t: &ViewTarget,
    p: &Pending,
    ops: impl FnOnce() -> Result<Vec<WriteOp>>,
) -> Result<()> {
    commit_view_write(t, p, || ops().map(ViewWrite::Ops))
}

/// Commits the view's change `p` (its write made by `write`) with its
/// checkpoint row `(job, tag, source rows, committed at, position)` in one
/// transaction, unless checkpoint `p.tag` is committed already (then
/// nothing is written: a commit repeated after a restore is a no-op). The
/// one commit path of every view operator (grouped and append-only).
pub(crate) fn commit_view_write(
    t: &ViewTarget,
    p: &Pending,
    write: impl FnOnce() -> Result<ViewWrite>,
) -> Result<()> {
    let tag = tag_value(p.tag);
    if tag <= committed_checkpoint(&t.checkpoints, &t.job)? {
        return Ok(());
    }
    let write = write()?;
    let source_rows = i64::try_from(p.source_rows).unwrap_or(i64::MAX);
    let committed_at = now_micros();
    let mut mark = vec![
        Value::Text(t.job.clone()),
        Value::BigInt(tag),
        Value::BigInt(source_rows),
        Value::Timestamp(committed_at),
    ];
    if t.checkpoints.def().columns.len() > mark.len() {
        mark.push(p.position.clone().map_or(Value::Null, Value::Text));
    }
    let mark = WriteOp::Insert {
        row: mark,
        on_conflict: OnConflict::Replace,
    };
    let rows_written = match write {
        ViewWrite::Ops(ops) => {
            let n = ops.len();
            t.engine.commit(vec![
                (Arc::clone(&t.table), ops),
                (Arc::clone(&t.checkpoints), vec![mark]),
            ])?;
            n
        }
        ViewWrite::Bulk(loader) => {
            let n = usize::try_from(loader.rows()).unwrap_or(usize::MAX);
            loader.commit_with(vec![(Arc::clone(&t.checkpoints), vec![mark])])?;
            n
        }
    };
    t.stats
        .record(p, rows_written, now_micros().max(committed_at));
    tracing::debug!(job = %t.job, checkpoint = tag, source_rows, "view committed");
    Ok(())
}
