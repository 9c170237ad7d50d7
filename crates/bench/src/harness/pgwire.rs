//! Loading a data set into, and running queries on, a server that speaks the
//! PostgreSQL protocol (Eddy or PostgreSQL), with tokio-postgres.
//!
//! Loading: `CREATE TABLE` from the Parquet schema, then either
//! `COPY t FROM '/abs/file.parquet' (FORMAT parquet)` (Eddy's server-side
//! path) or `COPY t FROM STDIN (FORMAT csv)` fed from the Parquet files,
//! several files at once over several connections.

use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Schema};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use bytes::Bytes;
use futures::SinkExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tokio_postgres::{Client, SimpleQueryMessage};

use super::{QueryRun, Workload};
use crate::error::{BenchError, Result};
use crate::harness::servers::PgTarget;

/// How rows get into the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadPath {
    /// Server-side `COPY ... FROM 'file.parquet' (FORMAT parquet)`, CSV on failure.
    ParquetFile,
    /// `COPY ... FROM STDIN (FORMAT csv)`.
    CsvStdin,
}

/// Connects and drives the connection on the current runtime.
pub async fn connect(target: &PgTarget) -> Result<Client> {
    let (client, conn) = target.config().connect(tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "connection closed");
        }
    });
    Ok(client)
}

/// SQL type of an Arrow type for `CREATE TABLE`.
pub fn sql_type(dt: &DataType) -> Result<String> {
    Ok(match dt {
        DataType::Int16 => "smallint".into(),
        DataType::Int32 => "integer".into(),
        DataType::Int64 => "bigint".into(),
        DataType::Float32 => "real".into(),
        DataType::Float64 => "double precision".into(),
        DataType::Boolean => "boolean".into(),
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => "text".into(),
        DataType::Date32 => "date".into(),
        DataType::Decimal128(p, s) => format!("numeric({p},{s})"),
        other => {
            return Err(BenchError::InvalidArgument(format!(
                "no SQL type for Arrow {other}"
            )));
        }
    })
}

/// `CREATE TABLE "name" (...)` for an Arrow schema.
pub fn create_table_sql(name: &str, schema: &Schema) -> Result<String> {
    let cols = schema
        .fields()
        .iter()
        .map(|f| {
            Ok(format!(
                "{} {} not null",
                f.name(),
                sql_type(f.data_type())?
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(format!("CREATE TABLE \"{name}\" ({})", cols.join(", ")))
}

/// Arrow schema of a Parquet file.
pub fn parquet_schema(path: &Path) -> Result<Arc<Schema>> {
    let f = File::open(path).map_err(|e| BenchError::io(path, e))?;
    Ok(ParquetRecordBatchReaderBuilder::try_new(f)?
        .schema()
        .clone())
}

/// Appends a batch as CSV (strings always quoted, so '' is an empty string and nothing is NULL).
pub fn batch_to_csv(batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
    let opts = FormatOptions::default();
    let fmts = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let quoted: Vec<bool> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| {
            matches!(
                f.data_type(),
                DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
            )
        })
        .collect();
    let mut cell = String::new();
    for row in 0..batch.num_rows() {
        for (i, f) in fmts.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            cell.clear();
            use std::fmt::Write;
            write!(cell, "{}", f.value(row)).map_err(|e| BenchError::Internal(e.to_string()))?;
            if quoted[i] {
                out.push(b'"');
                for b in cell.bytes() {
                    if b == b'"' {
                        out.push(b'"');
                    }
                    out.push(b);
                }
                out.push(b'"');
            } else {
                out.extend_from_slice(cell.as_bytes());
            }
        }
        out.push(b'\n');
    }
    Ok(())
}

async fn copy_csv_file(client: &Client, table: &str, path: PathBuf) -> Result<u64> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Bytes>>(4);
    let reader = tokio::task::spawn_blocking(move || {
        let run = || -> Result<()> {
            let f = File::open(&path).map_err(|e| BenchError::io(&path, e))?;
            let rd = ParquetRecordBatchReaderBuilder::try_new(f)?
                .with_batch_size(16_384)
                .build()?;
            for batch in rd {
                let batch = batch?;
                let mut buf = Vec::with_capacity(batch.num_rows() * 96);
                batch_to_csv(&batch, &mut buf)?;
                if tx.blocking_send(Ok(Bytes::from(buf))).is_err() {
                    return Ok(());
                }
            }
            Ok(())
        };
        if let Err(e) = run() {
            let _ = tx.blocking_send(Err(e));
        }
    });
    let sink = client
        .copy_in::<_, Bytes>(&format!("COPY \"{table}\" FROM STDIN (FORMAT csv)"))
        .await?;
    futures::pin_mut!(sink);
    while let Some(chunk) = rx.recv().await {
        sink.send(chunk?).await?;
    }
    let n = sink.finish().await?;
    reader
        .await
        .map_err(|e| BenchError::Internal(format!("CSV reader task: {e}")))?;
    Ok(n)
}

/// Creates and loads every table of `w`; returns the seconds it took.
pub async fn load(
    target: &PgTarget,
    w: &Workload,
    path: LoadPath,
    connections: usize,
) -> Result<f64> {
    let client = connect(target).await?;
    let start = Instant::now();
    let mut files: VecDeque<(String, PathBuf)> = VecDeque::new();
    for table in &w.tables {
        let t = w.manifest.tables.get(table).ok_or_else(|| {
            BenchError::Internal(format!("table {table} missing from the manifest"))
        })?;
        let first = t
            .files
            .first()
            .ok_or_else(|| BenchError::Internal(format!("table {table} has no files")))?;
        let schema = parquet_schema(&w.dir.join(first))?;
        client
            .batch_execute(&format!("DROP TABLE IF EXISTS \"{table}\""))
            .await?;
        client
            .batch_execute(&create_table_sql(table, &schema)?)
            .await?;
        for f in &t.files {
            let abs = std::fs::canonicalize(w.dir.join(f))
                .map_err(|e| BenchError::io(w.dir.join(f), e))?;
            files.push_back((table.clone(), abs));
        }
    }
    let mut path = path;
    if path == LoadPath::ParquetFile {
        // Probe the server-side Parquet path with the first file; fall back to CSV.
        if let Some((table, file)) = files.front().cloned() {
            let sql = format!(
                "COPY \"{table}\" FROM '{}' (FORMAT parquet)",
                file.display()
            );
            match client.batch_execute(&sql).await {
                Ok(()) => {
                    files.pop_front();
                }
                Err(e) => {
                    tracing::warn!(error = %e, "server-side Parquet COPY failed; loading CSV over STDIN");
                    eprintln!(
                        "note: COPY FROM parquet failed ({e}); falling back to CSV over STDIN"
                    );
                    path = LoadPath::CsvStdin;
                }
            }
        }
    }
    let queue = Arc::new(Mutex::new(files));
    let mut tasks = Vec::new();
    for _ in 0..connections.max(1) {
        let queue = queue.clone();
        let target = target.clone();
        tasks.push(tokio::spawn(async move {
            let client = connect(&target).await?;
            loop {
                let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                let Some((table, file)) = next else { break };
                match path {
                    LoadPath::ParquetFile => {
                        let sql = format!(
                            "COPY \"{table}\" FROM '{}' (FORMAT parquet)",
                            file.display()
                        );
                        client.batch_execute(&sql).await?;
                    }
                    LoadPath::CsvStdin => {
                        copy_csv_file(&client, &table, file).await?;
                    }
                }
            }
            Ok::<(), BenchError>(())
        }));
    }
    for t in tasks {
        t.await
            .map_err(|e| BenchError::Internal(format!("load task: {e}")))??;
    }
    for table in &w.tables {
        // PostgreSQL needs statistics for sane join orders; Eddy may not know ANALYZE.
        if let Err(e) = client
            .batch_execute(&format!("VACUUM ANALYZE \"{table}\""))
            .await
        {
            tracing::debug!(error = %e, table, "VACUUM ANALYZE not supported");
        }
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Runs one statement, returning (columns, rows as text).
pub async fn query_text(
    client: &Client,
    sql: &str,
) -> Result<(Vec<String>, Vec<Vec<Option<String>>>)> {
    let msgs = client.simple_query(sql).await?;
    let mut cols = Vec::new();
    let mut rows = Vec::new();
    for m in msgs {
        if let SimpleQueryMessage::Row(r) = m {
            if cols.is_empty() {
                cols = r.columns().iter().map(|c| c.name().to_string()).collect();
            }
            rows.push((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect());
        }
    }
    Ok((cols, rows))
}

/// Runs every query of `w` once as a warm-up and then `runs` times, on one
/// connection that first runs each statement of `setup` (a failing setup
/// statement is an error: a comparison run under the wrong settings would
/// report the wrong thing).
pub async fn run_queries(
    target: &PgTarget,
    w: &Workload,
    runs: usize,
    engine: &str,
    timeout_s: u64,
    setup: &[&str],
) -> Result<Vec<QueryRun>> {
    let client = connect(target).await?;
    for stmt in setup {
        client.batch_execute(stmt).await?;
    }
    if timeout_s > 0 {
        if let Err(e) = client
            .batch_execute(&format!("SET statement_timeout = '{timeout_s}s'"))
            .await
        {
            tracing::debug!(error = %e, "statement_timeout not supported");
        }
    }
    let mut out = Vec::new();
    for (name, sql) in &w.queries {
        let mut q = QueryRun {
            name: name.clone(),
            ..QueryRun::default()
        };
        for i in 0..=runs {
            let start = Instant::now();
            match query_text(&client, sql).await {
                Ok((cols, rows)) => {
                    let secs = start.elapsed().as_secs_f64();
                    if i == 0 {
                        q.warmup_s = Some(secs);
                    } else {
                        q.times_s.push(secs);
                    }
                    q.columns = cols;
                    q.rows = rows.into_iter().take(super::MAX_ROWS).collect();
                }
                Err(e) => {
                    q.error = Some(super::error_chain(&e));
                    break;
                }
            }
        }
        eprintln!(
            "{engine} {name}: {:?}{}",
            q.times_s,
            q.error
                .as_deref()
                .map(|e| format!(" error: {e}"))
                .unwrap_or_default()
        );
        out.push(q);
    }
    Ok(out)
}

/// The server's version string (`SHOW server_version`, else `version()`).
pub async fn server_version(target: &PgTarget) -> String {
    let Ok(client) = connect(target).await else {
        return "unknown".into();
    };
    for sql in ["SHOW server_version", "SELECT version()"] {
        if let Ok((_, rows)) = query_text(&client, sql).await {
            if let Some(Some(v)) = rows.first().and_then(|r| r.first().cloned()) {
                return v;
            }
        }
    }
    "unknown".into()
}
