//! Catalog changes inside transactions (`Engine::ddl`): undone at open
//! unless their transaction committed, committed together with its rows
//! through the commit log, undone live by `rollback_ddl` (whole or to a
//! savepoint's mark), and the table lock that keeps others out meanwhile.
//! A "crash" here drops the engine without closing it: memtables are lost,
//! and what recovery finds is what was made durable.

use std::sync::Arc;

use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{CreateTable, Engine, EngineConfig, OnConflict, WriteOp, TABLE_LOCK_KEY};

fn open(dir: &std::path::Path) -> Arc<Engine> {
    let mut cfg = EngineConfig::new(dir);
    cfg.background_compaction = false;
    Engine::open(cfg).expect("open")
}

fn spec(name: &str, shards: u32) -> CreateTable {
    CreateTable {
        name: name.into(),
        columns: vec![
            ColumnDef::new("k", ColumnType::BigInt, false),
            ColumnDef::new("v", ColumnType::BigInt, true),
        ],
        primary_key: vec![0],
        distribution_key: vec![],
        orientation: Orientation::RowColumn,
        table_group: None,
        shard_count: Some(shards),
        checks: Vec::new(),
    }
}

fn inserts(rows: impl IntoIterator<Item = (i64, i64)>) -> Vec<WriteOp> {
    rows.into_iter()
        .map(|(k, v)| WriteOp::Insert {
            row: vec![Value::BigInt(k), Value::BigInt(v)],
            on_conflict: OnConflict::Error,
        })
        .collect()
}

fn count(e: &Engine, name: &str) -> usize {
    let t = e.table(name).expect("table");
    (0..100)
        .filter(|k| t.get(&[Value::BigInt(*k)]).expect("get").is_some())
        .count()
}

#[test]
fn uncommitted_changes_are_undone_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = open(dir.path());
        let base = e.create_table(spec("base", 2)).unwrap();
        e.commit(vec![(base, inserts((0..10).map(|k| (k, k))))])
            .unwrap();
        let txn = e.begin_txn();
        e.ddl(Some(txn)).create_table(spec("fresh", 3)).unwrap();
        e.ddl(Some(txn))
            .add_column("base", ColumnDef::new("extra", ColumnType::Text, true))
            .unwrap();
        e.ddl(Some(txn)).rename_table("base", "renamed").unwrap();
        assert!(e.table("base").is_none());
        // a flush while the change is in flight writes files under the
        // new definition: they must still read under the old one
        e.flush().unwrap();
        // crash: dropped without commit or close
    }
    let e = open(dir.path());
    assert!(
        e.table("fresh").is_none(),
        "a created table of an uncommitted transaction survived"
    );
    assert!(e.table("renamed").is_none());
    let base = e.table("base").expect("the renamed table is back");
    assert_eq!(base.def().columns.len(), 2, "the added column survived");
    assert_eq!(count(&e, "base"), 10);
    assert_eq!(
        base.get(&[Value::BigInt(3)]).unwrap(),
        Some(vec![Value::BigInt(3), Value::BigInt(3)])
    );
    // the name is free again (the table group its creation made stays:
    // an empty group is harmless)
    e.create_table(spec("fresh", 3)).unwrap();
}

#[test]
fn committed_changes_and_rows_survive_together() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = open(dir.path());
        let base = e.create_table(spec("base", 2)).unwrap();
        e.commit(vec![(base, inserts([(1, 1)]))]).unwrap();
        let txn = e.begin_txn();
        let fresh = e.ddl(Some(txn)).create_table(spec("fresh", 3)).unwrap();
        let base = e
            .ddl(Some(txn))
            .add_column("base", ColumnDef::new("extra", ColumnType::BigInt, true))
            .unwrap();
        let wide = vec![WriteOp::Insert {
            row: vec![Value::BigInt(2), Value::BigInt(2), Value::BigInt(42)],
            on_conflict: OnConflict::Error,
        }];
        e.commit_txn(
            txn,
            vec![(fresh, inserts((0..30).map(|k| (k, 2 * k)))), (base, wide)],
        )
        .unwrap();
        assert!(!e.has_ddl(txn));
    }
    let e = open(dir.path());
    assert_eq!(count(&e, "fresh"), 30);
    let base = e.table("base").unwrap();
    assert_eq!(base.def().columns.len(), 3);
    assert_eq!(
        base.get(&[Value::BigInt(2)]).unwrap(),
        Some(vec![Value::BigInt(2), Value::BigInt(2), Value::BigInt(42)])
    );
    assert_eq!(
        base.get(&[Value::BigInt(1)]).unwrap(),
        Some(vec![Value::BigInt(1), Value::BigInt(1), Value::Null])
    );
}

#[test]
fn drops_go_with_the_commit_record() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = open(dir.path());
        for name in ["gone", "stays"] {
            let t = e.create_table(spec(name, 2)).unwrap();
            e.commit(vec![(t, inserts([(1, 1), (2, 2)]))]).unwrap();
        }
        e.flush().unwrap(); // files to delete
                            // committed: "gone" is dropped with a write to "stays"
        let txn = e.begin_txn();
        let gone = e.table("gone").unwrap();
        e.ddl(Some(txn)).drop_at_commit(&[gone]).unwrap();
        let stays = e.table("stays").unwrap();
        e.commit_txn(txn, vec![(stays, inserts([(3, 3)]))]).unwrap();
        assert!(e.table("gone").is_none());
        // not committed: the drop is recorded, then the engine dies
        let txn = e.begin_txn();
        let stays = e.table("stays").unwrap();
        e.ddl(Some(txn)).drop_at_commit(&[stays]).unwrap();
    }
    let e = open(dir.path());
    assert!(e.table("gone").is_none());
    assert_eq!(
        count(&e, "stays"),
        3,
        "a drop whose transaction did not commit took the table"
    );
    e.create_table(spec("gone", 2)).unwrap();
    assert_eq!(count(&e, "gone"), 0, "the dropped table's rows came back");
}

#[test]
fn a_change_without_rows_commits_through_the_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = open(dir.path());
        let txn = e.begin_txn();
        e.ddl(Some(txn)).create_table(spec("empty", 1)).unwrap();
        e.commit_txn(txn, Vec::new()).unwrap();
    }
    let e = open(dir.path());
    assert!(e.table("empty").is_some());
}

#[test]
fn the_commit_log_names_committed_catalog_transactions_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let (committed, lost) = {
        let e = open(dir.path());
        let committed = e.begin_txn();
        e.ddl(Some(committed))
            .create_table(spec("made", 1))
            .unwrap();
        e.commit_txn(committed, Vec::new()).unwrap();
        // recorded, then the engine dies before its commit
        let lost = e.begin_txn();
        e.ddl(Some(lost)).create_table(spec("lost", 1)).unwrap();
        (committed, lost)
    };
    let e = open(dir.path());
    // what the SQL layer asks to settle its sequences with a transaction
    assert!(e.committed_before_open(committed));
    assert!(!e.committed_before_open(lost));
    assert!(e.table("made").is_some());
    assert!(e.table("lost").is_none());
}

#[test]
fn rollback_undoes_live_and_to_a_mark() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let base = e.create_table(spec("base", 2)).unwrap();
    e.commit(vec![(base, inserts([(1, 1)]))]).unwrap();
    let txn = e.begin_txn();
    e.ddl(Some(txn)).create_table(spec("early", 1)).unwrap();
    let mark = e.ddl_mark(txn);
    assert_eq!(mark, 1);
    e.ddl(Some(txn)).create_table(spec("late", 1)).unwrap();
    e.ddl(Some(txn))
        .add_column("base", ColumnDef::new("extra", ColumnType::Text, true))
        .unwrap();
    e.ddl(Some(txn))
        .alter_columns("base", |cols| {
            if let Some(c) = cols.get_mut(1) {
                c.name = "value".into();
            }
            Ok(())
        })
        .unwrap();
    let version_before_undo = e.table("base").unwrap().def().schema_version;
    e.rollback_ddl(txn, mark).unwrap();
    assert!(e.table("early").is_some());
    assert!(e.table("late").is_none());
    let base = e.table("base").unwrap();
    assert_eq!(base.def().columns.len(), 2);
    assert_eq!(base.def().columns[1].name, "v");
    assert!(
        base.def().schema_version > version_before_undo,
        "an undone definition must get a newer version"
    );
    assert!(e.has_ddl(txn));
    e.rollback_ddl(txn, 0).unwrap();
    assert!(e.table("early").is_none());
    assert!(!e.has_ddl(txn));
    assert_eq!(count(&e, "base"), 1);
    e.locks().release_all(txn);
    drop(e);
    let e = open(dir.path());
    assert!(e.table("early").is_none() && e.table("late").is_none());
    assert_eq!(e.table("base").unwrap().def().columns[1].name, "v");
}

#[test]
fn a_created_table_is_locked_by_its_creator_until_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    assert_eq!(e.locks().tables_locked(), 0);
    let txn = e.begin_txn();
    let t = e.ddl(Some(txn)).create_table(spec("mine", 1)).unwrap();
    assert_eq!(e.locks().tables_locked(), 1);
    let other = e.begin_txn();
    let wait = e.locks().lock(
        other,
        t.def().id,
        TABLE_LOCK_KEY,
        eddy_storage::LockMode::Shared,
        eddy_storage::LockWait::NoWait,
        "mine",
    );
    assert!(
        wait.is_err(),
        "another transaction got the table while it was being created"
    );
    e.commit_txn(txn, Vec::new()).unwrap();
    e.locks().release_all(txn);
    assert_eq!(e.locks().tables_locked(), 0);
    assert!(e
        .locks()
        .lock(
            other,
            t.def().id,
            TABLE_LOCK_KEY,
            eddy_storage::LockMode::Shared,
            eddy_storage::LockWait::NoWait,
            "mine",
        )
        .unwrap());
}
