//! A column file cut into row-group ranges (`ScanPartition::split_row_groups`)
//! reads exactly what the whole file reads: every row once, deletes and the
//! snapshot's LSN honoured, row-group pruning still applied per range.

use std::collections::BTreeMap;

use arrow::array::{Array, Int64Array, StringArray};
use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{
    rows_to_batch, CreateTable, Engine, EngineConfig, OnConflict, ScanPartition, TableSnapshot,
    WriteOp,
};

fn scan(parts: &[ScanPartition]) -> BTreeMap<i64, String> {
    let mut out = BTreeMap::new();
    for p in parts {
        for b in p.scan(None, false, &|_| true).expect("scan") {
            let b = b.expect("batch");
            let k = b
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("k");
            let v = b
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .expect("v");
            for i in 0..b.num_rows() {
                let prev = out.insert(k.value(i), v.value(i).to_string());
                assert!(prev.is_none(), "key {} read twice", k.value(i));
            }
        }
    }
    out
}

fn whole(snap: &TableSnapshot) -> Vec<ScanPartition> {
    snap.partitions()
}

/// An engine with table `t` (k bigint key, v text) holding 300k rows from
/// one bulk load: one column file of 5 row groups (64K rows each).
fn loaded_table(
    dir: &std::path::Path,
) -> (std::sync::Arc<Engine>, std::sync::Arc<eddy_storage::Table>) {
    let mut cfg = EngineConfig::new(dir);
    cfg.sync = false;
    cfg.background_compaction = false;
    let engine = Engine::open(cfg).expect("engine");
    engine
        .create_table(CreateTable {
            name: "t".into(),
            columns: vec![
                ColumnDef::new("k", ColumnType::BigInt, false),
                ColumnDef::new("v", ColumnType::Text, true),
            ],
            primary_key: vec![0],
            distribution_key: vec![],
            orientation: Orientation::Column,
            table_group: None,
            shard_count: Some(1),
            checks: Vec::new(),
        })
        .expect("create");
    let t = engine.table("t").expect("table");
    let rows: Vec<Vec<Value>> = (0..300_000i64)
        .map(|k| vec![Value::BigInt(k), Value::Text(format!("v{k}"))])
        .collect();
    let mut l = t.bulk_loader();
    l.push(rows_to_batch(&t, &rows).expect("batch"))
        .expect("push");
    l.commit().expect("commit");
    engine.flush().expect("flush");
    (engine, t)
}

#[test]
fn row_group_ranges_read_every_row_once_with_deletes_and_snapshots() {
    let dir = tempfile::tempdir().expect("dir");
    let (_engine, t) = loaded_table(dir.path());
    let before = t.snapshot();
    // Delete a row in the first and one in the last row group.
    let ops = [5i64, 299_999]
        .iter()
        .map(|k| WriteOp::Delete {
            key: t.key_of(&[Value::BigInt(*k)]).expect("key"),
        })
        .collect();
    t.write(ops).expect("delete");
    let after = t.snapshot();

    for snap in [&before, &after] {
        let parts = whole(snap);
        let files: Vec<&ScanPartition> =
            parts.iter().filter(|p| p.row_groups().len() > 1).collect();
        assert_eq!(files.len(), 1, "one multi-row-group file");
        let want = scan(&parts);
        for pieces in [1, 2, 3, 5, 9] {
            let split: Vec<ScanPartition> = parts
                .iter()
                .flat_map(|p| p.split_row_groups(pieces))
                .collect();
            let file_pieces = split.len() - (parts.len() - 1);
            assert_eq!(file_pieces, pieces.min(5), "pieces for {pieces}");
            assert_eq!(
                scan(&split),
                want,
                "{pieces} pieces read what the file reads"
            );
            let rows: u64 = split.iter().map(|p| p.num_rows_upper_bound()).sum();
            let whole_rows: u64 = parts.iter().map(|p| p.num_rows_upper_bound()).sum();
            assert_eq!(rows, whole_rows, "row bounds add up");
        }
    }
    assert_eq!(scan(&whole(&before)).len(), 300_000);
    assert_eq!(scan(&whole(&after)).len(), 299_998);

    // Pruning still applies inside a range: keep only row groups whose
    // maximum key is below 70,000 (the first two).
    let split: Vec<ScanPartition> = whole(&before)
        .iter()
        .flat_map(|p| p.split_row_groups(5))
        .collect();
    let mut read = 0usize;
    for p in &split {
        let keep = |s: &eddy_storage::RowGroupStats| matches!(s.columns.first().map(|c| &c.min), Some(Value::BigInt(m)) if *m < 70_000);
        for b in p.scan(None, false, &keep).expect("scan") {
            read += b.expect("batch").num_rows();
        }
    }
    assert_eq!(read, 2 * 65_536);
}

/// `immutable_rows` names a piece only when the snapshot sees all of it:
/// deleted rows, and rows still in memory, take it away; the rows it
/// counts are the rows a scan of the piece reads.
#[test]
fn immutable_rows_name_only_pieces_the_snapshot_sees_whole() {
    let dir = tempfile::tempdir().expect("dir");
    let (_engine, t) = loaded_table(dir.path());
    let pieces = |snap: &TableSnapshot| -> Vec<ScanPartition> {
        snap.partitions()
            .iter()
            .flat_map(|p| p.split_row_groups(5))
            .collect()
    };
    let before = t.snapshot();
    let named: Vec<_> = pieces(&before)
        .iter()
        .map(|p| {
            let id = p.immutable_rows().expect("a whole bulk-loaded piece");
            let read: usize = p
                .scan(Some(&[0]), false, &|_| true)
                .expect("scan")
                .map(|b| b.expect("batch").num_rows())
                .sum();
            assert_eq!(id.rows, read as u64, "rows named are rows read");
            id
        })
        .collect();
    assert_eq!(named.len(), 5);
    assert_eq!(named.iter().map(|i| i.rows).sum::<u64>(), 300_000);
    let again: Vec<_> = pieces(&t.snapshot())
        .iter()
        .map(|p| p.immutable_rows())
        .collect();
    assert_eq!(
        again,
        named.iter().cloned().map(Some).collect::<Vec<_>>(),
        "the same pieces, the same names"
    );

    // A delete in the first row group: that piece loses its name, the
    // others keep theirs, and the older snapshot still sees it whole.
    t.write(vec![WriteOp::Delete {
        key: t.key_of(&[Value::BigInt(5)]).expect("key"),
    }])
    .expect("delete");
    let after = t.snapshot();
    let ids: Vec<_> = pieces(&after).iter().map(|p| p.immutable_rows()).collect();
    assert_eq!(ids.iter().filter(|i| i.is_none()).count(), 1, "{ids:?}");
    assert!(ids.iter().flatten().all(|i| named.contains(i)));
    assert!(pieces(&before).iter().all(|p| p.immutable_rows().is_some()));

    // A row still in memory is never named.
    t.write(vec![WriteOp::Insert {
        row: vec![Value::BigInt(1_000_000), Value::Text("new".into())],
        on_conflict: OnConflict::Error,
    }])
    .expect("insert");
    let memory: Vec<ScanPartition> = t
        .snapshot()
        .partitions()
        .into_iter()
        .filter(|p| p.row_groups().is_empty())
        .collect();
    assert!(
        memory.iter().any(|p| !p.is_known_empty()),
        "the new row is in a memory table"
    );
    assert!(memory.iter().all(|p| p.immutable_rows().is_none()));
}
