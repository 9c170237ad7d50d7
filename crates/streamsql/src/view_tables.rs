//! The tables a view's job writes: the view's own table (keyed by its
//! GROUP BY columns) and `eddy_stream_checkpoints`, where each commit
//! records `(job, checkpoint, source rows, committed at, source position)`.

use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{CreateTable, Table};

use crate::error::Result;
use crate::plan::ViewPlan;

/// The table every committed checkpoint is recorded in.
pub const CHECKPOINT_TABLE: &str = "eddy_stream_checkpoints";

/// The definition of the checkpoint table.
pub fn checkpoint_table() -> CreateTable {
    CreateTable {
        name: CHECKPOINT_TABLE.into(),
        columns: vec![
            ColumnDef::new("job", ColumnType::Text, false),
            ColumnDef::new("checkpoint", ColumnType::BigInt, false),
            ColumnDef::new("source_rows", ColumnType::BigInt, false),
            ColumnDef::new("committed_at", ColumnType::Timestamp, false),
            position_column(),
        ],
        primary_key: vec![0],
        distribution_key: vec![0],
        orientation: Orientation::Row,
        table_group: None,
        shard_count: None,
        checks: Vec::new(),
    }
}

/// The checkpoint table's last column: a change-log source's cut
/// (`shard:lsn,...`), null for other sources. Added to checkpoint tables
/// created before it existed.
pub fn position_column() -> ColumnDef {
    ColumnDef::new("source_position", ColumnType::Text, true)
}

/// The definition of view `name`'s table: the query's columns, keyed and
/// distributed by the GROUP BY columns (never null).
pub fn view_table(name: &str, plan: &ViewPlan) -> CreateTable {
    let mut columns = plan.columns.clone();
    for k in &plan.primary_key {
        if let Some(c) = columns.get_mut(*k) {
            c.nullable = false;
        }
    }
    CreateTable {
        name: name.to_string(),
        columns,
        primary_key: plan.primary_key.clone(),
        distribution_key: plan.primary_key.clone(),
        // An append-only view's rows arrive as one bulk load per
        // checkpoint (files, no WAL record per row) and are read by scans;
        // a grouped view's rows are upserted and looked up by key.
        orientation: if plan.append {
            Orientation::Column
        } else {
            Orientation::Row
        },
        table_group: None,
        shard_count: None,
        checks: Vec::new(),
    }
}

/// The checkpoint job `job` last committed (-1: none).
pub fn committed_checkpoint(checkpoints: &Table, job: &str) -> Result<i64> {
    Ok(
        match checkpoints.get(&[Value::Text(job.to_string())])?.as_deref() {
            Some([_, Value::BigInt(n), ..]) => *n,
            _ => -1,
        },
    )
}
