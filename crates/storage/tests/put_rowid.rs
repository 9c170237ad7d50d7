//! `WriteOp::Put`: rows of a table without a primary key written under the
//! caller's row id (issue 13, append-only materialized views). Writing the
//! same ids again replaces the rows, before and after a reopen, so a replay
//! never duplicates; a table with a primary key refuses it.

use std::sync::Arc;

use arrow::array::{Array, Int64Array};
use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{CreateTable, Engine, EngineConfig, StorageError, Table, WriteOp};

fn open(dir: &std::path::Path) -> Arc<Engine> {
    let mut cfg = EngineConfig::new(dir);
    cfg.sync = false;
    cfg.background_compaction = false;
    Engine::open(cfg).expect("open")
}

fn create(e: &Engine, name: &str, primary_key: Vec<usize>) -> Arc<Table> {
    e.create_table(CreateTable {
        name: name.into(),
        columns: vec![
            ColumnDef::new("v", ColumnType::BigInt, false),
            ColumnDef::new("w", ColumnType::BigInt, true),
        ],
        primary_key,
        distribution_key: vec![],
        orientation: Orientation::Row,
        table_group: None,
        shard_count: Some(3),
        checks: Vec::new(),
    })
    .expect("create")
}

fn put(t: &Table, ids: std::ops::Range<u64>, w: i64) {
    let ops = ids
        .map(|id| WriteOp::Put {
            row: vec![Value::BigInt(id as i64), Value::BigInt(w)],
            rowid: id,
        })
        .collect();
    t.write(ops).expect("put");
}

/// Every row's (v, w), sorted.
fn rows(t: &Table) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for p in t.snapshot().partitions() {
        for b in p.scan(None, false, &|_| true).expect("scan") {
            let b = b.expect("batch");
            let v = b
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("v");
            let w = b
                .column(1)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("w");
            for i in 0..b.num_rows() {
                out.push((v.value(i), w.value(i)));
            }
        }
    }
    out.sort_unstable();
    out
}

#[test]
fn a_put_under_the_same_row_id_replaces_the_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let e = open(dir.path());
        let t = create(&e, "appended", Vec::new());
        put(&t, 0..100, 1);
        // a replay of part of it, and more
        put(&t, 50..150, 2);
        let got = rows(&t);
        assert_eq!(got.len(), 150, "no row twice");
        assert!(got[..50].iter().all(|r| r.1 == 1));
        assert!(got[50..].iter().all(|r| r.1 == 2));
    }
    // after a crash (no close) the WAL replays the same keys
    let e = open(dir.path());
    let t = e.table("appended").expect("table");
    assert_eq!(rows(&t).len(), 150);
    put(&t, 100..200, 3);
    let got = rows(&t);
    assert_eq!(got.len(), 200);
    assert_eq!(got.iter().filter(|r| r.1 == 3).count(), 100);
}

#[test]
fn a_table_with_a_primary_key_refuses_a_put() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = open(dir.path());
    let t = create(&e, "keyed", vec![0]);
    match t.write(vec![WriteOp::Put {
        row: vec![Value::BigInt(1), Value::Null],
        rowid: 1,
    }]) {
        Err(e @ StorageError::Unsupported(_)) => assert_eq!(e.sqlstate(), "0A000"),
        other => panic!("a put into a keyed table: {other:?}"),
    }
}
