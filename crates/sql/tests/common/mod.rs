//! What the model tests share: a database on real storage, sessions, and
//! reading a statement's rows as integers.

use std::sync::Arc;

use eddy_sql::{Database, Output, Session};
use eddy_storage::{Engine, EngineConfig};
use futures::StreamExt;

/// A database in `dir` whose shards flush at `memtable_bytes` (small, so
/// crashes meet files), without background compaction.
pub fn open_db(dir: &std::path::Path, memtable_bytes: usize) -> Arc<Database> {
    let mut cfg = EngineConfig::new(dir);
    cfg.memtable_bytes = memtable_bytes;
    cfg.background_compaction = false;
    Arc::new(Database::open(Engine::open(cfg).expect("open"), "eddy", None).expect("database"))
}

/// `n` sessions with a short lock timeout (the model tests drive them
/// from one task, so a wait must end).
pub async fn sessions(db: &Arc<Database>, n: usize) -> Vec<Session> {
    let mut v = Vec::new();
    for i in 0..n {
        let mut s = Session::new(Arc::clone(db), "eddy", i as i32 + 1).expect("session");
        for out in s.simple_query("SET lock_timeout = '20ms'").await {
            out.expect("set lock_timeout");
        }
        v.push(s);
    }
    v
}

/// The rows of `out` with every column cast to int8 (none for a command).
pub async fn rows_i64(out: Output) -> Result<Vec<Vec<i64>>, String> {
    let mut rows = Vec::new();
    let Output::Rows { mut stream, .. } = out else {
        return Ok(rows);
    };
    while let Some(b) = stream.next().await {
        let b = b.map_err(|e| e.to_string())?;
        let mut columns = Vec::with_capacity(b.num_columns());
        for c in b.columns() {
            let c = arrow::compute::cast(c, &arrow::datatypes::DataType::Int64)
                .map_err(|e| e.to_string())?;
            columns.push(
                c.as_any()
                    .downcast_ref::<arrow::array::Int64Array>()
                    .ok_or("not an integer")?
                    .clone(),
            );
        }
        for r in 0..b.num_rows() {
            rows.push(columns.iter().map(|c| c.value(r)).collect());
        }
    }
    Ok(rows)
}
