//! Eddy's scan as a source of device-resident columns
//! (`eddy_sql::resident_scan`): the pieces it names for a partition hold
//! exactly the rows that partition of the scan produces, their column keys
//! name the same values across queries, and a scan that drops rows itself
//! (its own filters, a limit) or a partition with a deleted row is not
//! offered. Runs without a device: only the host side is checked here;
//! the device side runs in `scripts/gpu/device-run.sh`.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int32Array, Int64Array};
use datafusion::catalog::TableProvider;
use datafusion::execution::TaskContext;
use datafusion::prelude::{col, lit, SessionConfig, SessionContext};
use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_sql::provider::EddyTable;
use eddy_sql::resident_scan::resident_source;
use eddy_storage::{rows_to_batch, CreateTable, Engine, EngineConfig, WriteOp};
use futures::StreamExt;

fn pairs(k: &ArrayRef, v: &ArrayRef, out: &mut BTreeMap<i64, Option<i32>>) {
    let k = k.as_any().downcast_ref::<Int64Array>().expect("k");
    let v = v.as_any().downcast_ref::<Int32Array>().expect("v");
    for i in 0..k.len() {
        let prev = out.insert(k.value(i), v.is_valid(i).then(|| v.value(i)));
        assert!(prev.is_none(), "key {} twice", k.value(i));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resident_pieces_hold_exactly_each_scan_partitions_rows() {
    let dir = tempfile::tempdir().expect("dir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.sync = false;
    cfg.background_compaction = false;
    let engine = Engine::open(cfg).expect("engine");
    engine
        .create_table(CreateTable {
            name: "f".into(),
            columns: vec![
                ColumnDef::new("k", ColumnType::BigInt, false),
                ColumnDef::new("v", ColumnType::Int, true),
            ],
            primary_key: vec![0],
            distribution_key: vec![],
            orientation: Orientation::Column,
            table_group: None,
            shard_count: Some(1),
            checks: Vec::new(),
        })
        .expect("create");
    let t = engine.table("f").expect("table");
    let rows: Vec<Vec<Value>> = (0..300_000i64)
        .map(|k| {
            let v = if k % 7 == 0 {
                Value::Null
            } else {
                Value::Int((k % 1000) as i32)
            };
            vec![Value::BigInt(k), v]
        })
        .collect();
    let mut l = t.bulk_loader();
    l.push(rows_to_batch(&t, &rows).expect("batch"))
        .expect("push");
    l.commit().expect("commit");
    engine.flush().expect("flush");

    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(3));
    let state = ctx.state();
    let provider = EddyTable::new(Arc::clone(&t), false);
    // Output columns [v, k]: the pieces read by output column.
    let plan = provider
        .scan(&state, Some(&vec![1, 0]), &[], None)
        .await
        .expect("plan");
    let parts = plan.properties().output_partitioning().partition_count();
    assert_eq!(parts, 3);
    let source = resident_source(&plan).expect("a plain Eddy scan is a resident source");
    let mut keys = Vec::new();
    let mut total = 0usize;
    for p in 0..parts {
        let pieces = source
            .pieces(p)
            .expect("a bulk-loaded table is whole pieces");
        let mut from_pieces = BTreeMap::new();
        for piece in &pieces {
            let v = piece.read_column(0).expect("v");
            let k = piece.read_column(1).expect("k");
            assert_eq!(v.len(), piece.rows());
            assert_eq!(k.len(), piece.rows());
            pairs(&k, &v, &mut from_pieces);
            keys.push(piece.column_key(0).expect("v is stored"));
            keys.push(piece.column_key(1).expect("k is stored"));
        }
        let mut from_scan = BTreeMap::new();
        let mut s = plan
            .execute(p, Arc::new(TaskContext::from(&ctx)))
            .expect("execute");
        while let Some(b) = s.next().await {
            let b = b.expect("batch");
            pairs(b.column(1), b.column(0), &mut from_scan);
        }
        assert_eq!(from_pieces, from_scan, "partition {p}");
        total += from_pieces.len();
    }
    assert_eq!(total, 300_000);
    let distinct: std::collections::HashSet<_> = keys.iter().collect();
    assert_eq!(
        distinct.len(),
        keys.len(),
        "every column of every piece has its own key"
    );

    // A second query over the same data names the same keys.
    let again = provider
        .scan(&state, Some(&vec![0, 1]), &[], None)
        .await
        .expect("plan");
    let source2 = resident_source(&again).expect("source");
    let mut keys2 = Vec::new();
    for p in 0..3 {
        for piece in source2.pieces(p).expect("pieces") {
            keys2.push(piece.column_key(1).expect("v"));
            keys2.push(piece.column_key(0).expect("k"));
        }
    }
    let mut a = keys.clone();
    let mut b = keys2;
    a.sort();
    b.sort();
    assert_eq!(
        a, b,
        "the same values, the same keys, whatever the projection"
    );

    // A scan that applies its own filter or a limit drops rows a kernel
    // reading whole pieces would keep: not a source.
    let filtered = provider
        .scan(&state, None, &[col("v").lt(lit(10i32))], None)
        .await
        .expect("plan");
    assert_eq!(filtered.name(), "EddyScanExec");
    assert!(resident_source(&filtered).is_none(), "own filter");
    let limited = provider
        .scan(&state, None, &[], Some(10))
        .await
        .expect("plan");
    assert!(resident_source(&limited).is_none(), "limit");

    // A deleted row: its partition is no longer offered, the others are.
    t.write(vec![WriteOp::Delete {
        key: t.key_of(&[Value::BigInt(5)]).expect("key"),
    }])
    .expect("delete");
    let provider = EddyTable::new(Arc::clone(&t), false);
    let plan = provider
        .scan(&state, Some(&vec![1, 0]), &[], None)
        .await
        .expect("plan");
    let source = resident_source(&plan).expect("source");
    let offered: Vec<bool> = (0..3).map(|p| source.pieces(p).is_some()).collect();
    assert_eq!(
        offered.iter().filter(|o| !**o).count(),
        1,
        "only the partition with the deleted row is refused: {offered:?}"
    );
}
