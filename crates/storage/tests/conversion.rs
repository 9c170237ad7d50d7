//! A value that does not match its column's type is refused at every
//! storage entry point; none is stored (or read back) as NULL. Before
//! `arrow_values`, an interval past Arrow's nanosecond range passed
//! `check_row`, was committed, and read back as NULL from the column
//! tablet; `rows_to_batch` turned a value of the wrong type into NULL.

use std::sync::Arc;

use eddy_common::{ColumnDef, ColumnType, Interval, Orientation, Value};
use eddy_storage::{rows_to_batch, CreateTable, Engine, EngineConfig, OnConflict, Table, WriteOp};

fn engine(dir: &std::path::Path) -> Arc<Engine> {
    let mut cfg = EngineConfig::new(dir);
    cfg.sync = false;
    cfg.background_compaction = false;
    Engine::open(cfg).expect("engine")
}

fn create(engine: &Engine, orientation: Orientation) -> Arc<Table> {
    engine
        .create_table(CreateTable {
            name: "t".into(),
            columns: vec![
                ColumnDef::new("k", ColumnType::BigInt, false),
                ColumnDef::new("n", ColumnType::Int, true),
                ColumnDef::new("i", ColumnType::Interval, true),
            ],
            primary_key: vec![0],
            distribution_key: vec![],
            orientation,
            table_group: None,
            shard_count: Some(1),
            checks: Vec::new(),
        })
        .expect("create");
    engine.table("t").expect("table")
}

fn insert(row: Vec<Value>) -> WriteOp {
    WriteOp::Insert {
        row,
        on_conflict: OnConflict::Error,
    }
}

fn scan_all(t: &Table) -> Vec<Vec<Value>> {
    let types = [ColumnType::BigInt, ColumnType::Int, ColumnType::Interval];
    let mut rows = Vec::new();
    for p in t.snapshot().partitions() {
        for b in p.scan(None, false, &|_| true).expect("scan") {
            let b = b.expect("batch");
            rows.extend(eddy_storage::arrow_values::batch_rows(&b, &types).expect("rows"));
        }
    }
    rows
}

#[test]
fn an_interval_arrow_cannot_hold_is_refused_before_commit() {
    for orientation in [Orientation::Column, Orientation::Row] {
        let dir = tempfile::tempdir().expect("dir");
        let engine = engine(dir.path());
        let t = create(&engine, orientation);
        let huge = Interval {
            months: 0,
            days: 0,
            micros: i64::MAX,
        };
        let e = t
            .write(vec![insert(vec![
                Value::BigInt(1),
                Value::Int(1),
                Value::Interval(huge),
            ])])
            .expect_err("refused");
        assert_eq!(e.sqlstate(), "22008", "{e}");
        let ok = Interval {
            months: 1,
            days: 2,
            micros: 3,
        };
        t.write(vec![insert(vec![
            Value::BigInt(2),
            Value::Null,
            Value::Interval(ok),
        ])])
        .expect("write");
        assert_eq!(
            scan_all(&t),
            vec![vec![Value::BigInt(2), Value::Null, Value::Interval(ok)]],
            "{orientation:?}: only the good row, exactly as written"
        );
    }
}

#[test]
fn a_value_of_the_wrong_type_is_refused_not_stored_as_null() {
    let dir = tempfile::tempdir().expect("dir");
    let engine = engine(dir.path());
    let t = create(&engine, Orientation::Column);
    let e = t
        .write(vec![insert(vec![
            Value::BigInt(1),
            Value::Text("7".into()),
            Value::Null,
        ])])
        .expect_err("refused");
    assert_eq!(e.sqlstate(), "42804", "{e}");
    // no implicit widening either: an int4 value in the bigint key
    let e = t
        .write(vec![insert(vec![Value::Int(1), Value::Null, Value::Null])])
        .expect_err("refused");
    assert_eq!(e.sqlstate(), "42804", "{e}");
    // the bulk path's row -> batch conversion used to write NULL here
    let e = rows_to_batch(
        &t,
        &[vec![Value::BigInt(1), Value::Text("7".into()), Value::Null]],
    )
    .expect_err("refused");
    assert_eq!(e.sqlstate(), "XX000", "{e}");
    assert!(e.to_string().contains("text value"), "{e}");
    assert!(scan_all(&t).is_empty());
}
