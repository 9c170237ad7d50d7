//! `WriteOp::Put`: rows of a table without a primary key written under the
//! caller's row id (issue 13, append-only materialized views). Writing the
//! same ids again replaces the rows, before and after a reopen, so a replay
//! never duplicates; a table with a primary key refuses it. The same by
//! bulk load (`BulkLoader::push_at`), committed with row writes into
//! another table (`BulkLoader::commit_with`).

use std::sync::Arc;

use arrow::array::{Array, Int64Array};
use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{
    rows_to_batch, CreateTable, Engine, EngineConfig, OnConflict, StorageError, Table, WriteOp,
};

fn open(dir: &std::path::Path) -> Arc<Engine> {
    let mut cfg = EngineConfig::new(dir);
    cfg.sync = false;
    cfg.background_compaction = false;
    Engine::open(cfg).expect("open")
}

fn create(e: &Engine, name: &str, primary_key: Vec<usize>) -> Arc<Table> {
    create_as(e, name, primary_key, Orientation::Row)
}

fn create_as(
    e: &Engine,
    name: &str,
    primary_key: Vec<usize>,
    orientation: Orientation,
) -> Arc<Table> {
    e.create_table(CreateTable {
        name: name.into(),
        columns: vec![
            ColumnDef::new("v", ColumnType::BigInt, false),
            ColumnDef::new("w", ColumnType::BigInt, true),
        ],
        primary_key,
        distribution_key: vec![],
        orientation,
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

/// Loads ids `ids` with `w` by bulk load, committed with `mark` written
/// into `marks` (key 0).
fn load(t: &Arc<Table>, ids: std::ops::Range<u64>, w: i64, marks: &Arc<Table>, mark: i64) {
    let rows: Vec<Vec<Value>> = ids
        .clone()
        .map(|id| vec![Value::BigInt(id as i64), Value::BigInt(w)])
        .collect();
    let ids: Vec<u64> = ids.collect();
    let mut l = t.bulk_loader();
    l.push_at(rows_to_batch(t, &rows).expect("batch"), &ids)
        .expect("push_at");
    let op = WriteOp::Insert {
        row: vec![Value::BigInt(0), Value::BigInt(mark)],
        on_conflict: OnConflict::Replace,
    };
    l.commit_with(vec![(Arc::clone(marks), vec![op])])
        .expect("commit_with");
}

fn mark(marks: &Table) -> Option<i64> {
    marks
        .get(&[Value::BigInt(0)])
        .expect("get")
        .map(|r| match r[1] {
            Value::BigInt(v) => v,
            ref other => panic!("mark {other:?}"),
        })
}

#[test]
fn a_bulk_load_by_row_id_commits_with_row_writes_and_replaces_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let e = open(dir.path());
        let t = create_as(&e, "appended", Vec::new(), Orientation::Column);
        let marks = create(&e, "marks", vec![0]);
        load(&t, 0..100, 1, &marks, 100);
        assert_eq!(mark(&marks), Some(100));
        // ids loaded again replace their rows, by bulk load and by Put
        load(&t, 50..150, 2, &marks, 150);
        put(&t, 140..160, 3);
        let got = rows(&t);
        assert_eq!(got.len(), 160, "no row twice: {got:?}");
        assert!(got[..50].iter().all(|r| r.1 == 1));
        assert!(got[50..140].iter().all(|r| r.1 == 2));
        assert!(got[140..].iter().all(|r| r.1 == 3));
        assert_eq!(mark(&marks), Some(150));
    }
    // after a crash (no close) the WAL's records install the same files
    let e = open(dir.path());
    let t = e.table("appended").expect("table");
    let marks = e.table("marks").expect("marks");
    assert_eq!(rows(&t).len(), 160);
    assert_eq!(mark(&marks), Some(150));
    // many loads, one file per shard each: compaction flushes first (the
    // files are above the flushed LSN), then merges them
    for i in 0..20u64 {
        load(&t, 1000 + i * 10..1010 + i * 10, 4, &marks, i as i64);
    }
    let before = t.storage_stats().file_count();
    assert!(before >= 60, "20 loads into 3 shards made {before} files");
    e.compact_if_needed().expect("compact");
    let after = t.storage_stats().file_count();
    assert!(
        after < before,
        "compaction merged nothing: {before} -> {after} files"
    );
    assert_eq!(rows(&t).len(), 360);
    drop(e);
    let e = open(dir.path());
    let t = e.table("appended").expect("table");
    assert_eq!(rows(&t).len(), 360, "after compaction and reopen");
}

#[test]
fn a_bulk_load_by_row_id_is_refused_where_it_cannot_hold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = open(dir.path());
    let keyed = create_as(&e, "keyed", vec![0], Orientation::Column);
    let one = vec![vec![Value::BigInt(1), Value::Null]];
    let mut l = keyed.bulk_loader();
    match l.push_at(rows_to_batch(&keyed, &one).expect("batch"), &[1]) {
        Err(e @ StorageError::Unsupported(_)) => assert_eq!(e.sqlstate(), "0A000"),
        other => panic!("push_at into a keyed table: {other:?}"),
    }
    let t = create_as(&e, "appended", Vec::new(), Orientation::Column);
    let mut l = t.bulk_loader();
    assert!(
        l.push_at(rows_to_batch(&t, &one).expect("batch"), &[1, 2])
            .is_err(),
        "two ids for one row"
    );
    // row writes into the loaded table itself (one shard may hold both)
    let mut l = t.bulk_loader();
    l.push_at(rows_to_batch(&t, &one).expect("batch"), &[7])
        .expect("push_at");
    let own = WriteOp::Put {
        row: vec![Value::BigInt(2), Value::Null],
        rowid: 8,
    };
    l.commit_with(vec![(Arc::clone(&t), vec![own])])
        .expect("commit_with");
    let vs: Vec<i64> = rows(&t).into_iter().map(|r| r.0).collect();
    assert_eq!(vs, vec![1, 2], "the load and the row write, both");
}
