//! Corruption tests: a flipped byte in a shard file or a WAL record is
//! detected, the error names the file, and bad data is never returned.

use std::path::{Path, PathBuf};

use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{CreateTable, Engine, EngineConfig, OnConflict, StorageError, WriteOp};

fn open(dir: &Path) -> Result<std::sync::Arc<Engine>, StorageError> {
    let mut cfg = EngineConfig::new(dir);
    cfg.background_compaction = false;
    Engine::open(cfg)
}

fn load(e: &Engine, orientation: Orientation, rows: i64) {
    let t = e
        .create_table(CreateTable {
            name: "t".into(),
            columns: vec![
                ColumnDef::new("k", ColumnType::BigInt, false),
                ColumnDef::new("v", ColumnType::Text, true),
            ],
            primary_key: vec![0],
            distribution_key: vec![],
            orientation,
            table_group: None,
            shard_count: Some(1),
            checks: Vec::new(),
        })
        .unwrap();
    for chunk in (0..rows).collect::<Vec<_>>().chunks(500) {
        let ops = chunk
            .iter()
            .map(|&k| WriteOp::Insert {
                row: vec![Value::BigInt(k), Value::Text(format!("value-{k:08}"))],
                on_conflict: OnConflict::Replace,
            })
            .collect();
        t.write(ops).unwrap();
    }
}

fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn flip(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= 0x20;
    std::fs::write(path, b).unwrap();
}

fn scan_all(e: &Engine) -> Result<usize, StorageError> {
    let t = e.table("t").unwrap();
    let mut n = 0;
    for p in t.snapshot().partitions() {
        for b in p.scan(None, false, &|_| true)? {
            n += b?.num_rows();
        }
    }
    Ok(n)
}

fn assert_names(err: StorageError, file: &Path) {
    match err {
        StorageError::Corrupt { path, .. } => assert_eq!(path, file),
        other => panic!("expected a corruption error naming {file:?}, got {other}"),
    }
}

#[test]
fn flipped_byte_in_a_column_file_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path()).unwrap();
    load(&e, Orientation::Column, 5000);
    e.close().unwrap();
    drop(e);
    let files = files_with(dir.path(), "arrow");
    assert_eq!(files.len(), 1);
    let len = std::fs::metadata(&files[0]).unwrap().len() as usize;
    flip(&files[0], len / 3); // inside the data
    let e = open(dir.path()).unwrap();
    assert_names(scan_all(&e).unwrap_err(), &files[0]);
}

#[test]
fn flipped_byte_in_a_column_file_footer_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path()).unwrap();
    load(&e, Orientation::Column, 100);
    e.close().unwrap();
    drop(e);
    let files = files_with(dir.path(), "arrow");
    let len = std::fs::metadata(&files[0]).unwrap().len() as usize;
    flip(&files[0], len - 40);
    match open(dir.path()) {
        Err(err) => assert_names(err, &files[0]),
        Ok(_) => panic!("damaged footer went unnoticed"),
    }
}

#[test]
fn flipped_byte_in_a_row_file_is_detected_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path()).unwrap();
    load(&e, Orientation::Row, 5000);
    e.close().unwrap();
    drop(e);
    let files = files_with(dir.path(), "row");
    assert_eq!(files.len(), 1);
    flip(&files[0], 200);
    let e = open(dir.path()).unwrap();
    assert_names(scan_all(&e).unwrap_err(), &files[0]);
    // the damaged block holds the first keys: a point read there fails too
    let t = e.table("t").unwrap();
    assert_names(t.get(&[Value::BigInt(1)]).unwrap_err(), &files[0]);
}

#[test]
fn flipped_byte_in_a_wal_record_fails_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path()).unwrap();
    load(&e, Orientation::RowColumn, 2000); // 4 WAL records, nothing flushed
    drop(e); // crash: no flush
    let wals: Vec<PathBuf> = files_with(dir.path(), "wal")
        .into_iter()
        .filter(|p| {
            std::fs::metadata(p).unwrap().len() > 0 && !p.to_string_lossy().contains("txnlog")
        })
        .collect();
    assert_eq!(wals.len(), 1, "{wals:?}");
    flip(&wals[0], 100); // inside the first of several records
    match open(dir.path()) {
        Err(err) => assert_names(err, &wals[0]),
        Ok(_) => panic!("damaged WAL record went unnoticed"),
    }
}

#[test]
fn torn_wal_tail_loses_only_the_unacknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path()).unwrap();
    load(&e, Orientation::Row, 1000); // 2 records of 500 rows
    drop(e);
    let wal = files_with(dir.path(), "wal")
        .into_iter()
        .find(|p| {
            std::fs::metadata(p).unwrap().len() > 0 && !p.to_string_lossy().contains("txnlog")
        })
        .unwrap();
    let b = std::fs::read(&wal).unwrap();
    std::fs::write(&wal, &b[..b.len() - 7]).unwrap(); // tear the last record
    let e = open(dir.path()).unwrap();
    assert_eq!(scan_all(&e).unwrap(), 500);
}
