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

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A one-round cross-shard commit (`CommitRecord` in `commit.rs`) whose
/// commit record reached disk while one of its prepare records did not
/// (torn off its shard's WAL, as a crash before that shard's fdatasync
/// leaves it) is absent from every shard after recovery, never on some;
/// with every record intact it is on all of them.
#[test]
fn one_round_commit_is_all_or_nothing_when_a_prepare_record_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path()).unwrap();
    let t = e
        .create_table(CreateTable {
            name: "t".into(),
            columns: vec![
                ColumnDef::new("k", ColumnType::BigInt, false),
                ColumnDef::new("v", ColumnType::Text, true),
            ],
            primary_key: vec![0],
            distribution_key: vec![],
            orientation: Orientation::Row,
            table_group: None,
            shard_count: Some(4),
            checks: Vec::new(),
        })
        .unwrap();
    let rows = |keys: std::ops::Range<i64>| -> Vec<WriteOp> {
        keys.map(|k| WriteOp::Insert {
            row: vec![Value::BigInt(k), Value::Text(format!("v{k}"))],
            on_conflict: OnConflict::Error,
        })
        .collect()
    };
    e.commit(vec![(t.clone(), rows(0..100))]).unwrap();
    e.commit(vec![(t.clone(), rows(1000..1040))]).unwrap();
    drop(t);
    drop(e);
    let intact = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), intact.path());

    // every shard's WAL ends with the second transaction's prepare record
    let shard_wals: Vec<PathBuf> = files_with(dir.path(), "wal")
        .into_iter()
        .filter(|p| {
            std::fs::metadata(p).unwrap().len() > 0 && !p.to_string_lossy().contains("txnlog")
        })
        .collect();
    assert_eq!(shard_wals.len(), 4, "{shard_wals:?}");
    let b = std::fs::read(&shard_wals[2]).unwrap();
    std::fs::write(&shard_wals[2], &b[..b.len() - 7]).unwrap();

    let e = open(dir.path()).unwrap();
    assert_eq!(
        scan_all(&e).unwrap(),
        100,
        "the torn transaction on no shard"
    );
    let t = e.table("t").unwrap();
    for k in 1000..1040 {
        assert_eq!(t.get(&[Value::BigInt(k)]).unwrap(), None, "key {k}");
    }
    // recovery emptied the commit log: the torn record can never meet a
    // later prepare record at the same LSN
    t.write(rows(2000..2040)).unwrap();
    drop(t);
    drop(e);
    let e = open(dir.path()).unwrap();
    assert_eq!(scan_all(&e).unwrap(), 140);
    drop(e);

    let e = open(intact.path()).unwrap();
    assert_eq!(
        scan_all(&e).unwrap(),
        140,
        "intact: both transactions whole"
    );
}
