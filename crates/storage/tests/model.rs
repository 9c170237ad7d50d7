//! Model test: random upserts, deletes, multi-shard writes, bulk loads,
//! flushes, compactions and crash+reopen on row, column and row+column
//! tables, checked against an in-memory `BTreeMap` model — both at the
//! latest state and through snapshots taken at earlier LSNs. A flush or
//! compaction may be paused half way (`Op::Paused`, through the engine's
//! test hook) while the next writes run, and may be cut short there as by
//! a crash.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, Int64Array, StringArray};
use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{
    rows_to_batch, BackgroundStage, CreateTable, Engine, EngineConfig, OnConflict, Table,
    TableSnapshot, WriteOp,
};
use proptest::prelude::*;

type Model = BTreeMap<i64, String>;

#[derive(Clone, Debug)]
enum Op {
    Upsert(usize, i64, u8),
    Delete(usize, i64),
    /// Several keys in one atomic write (spans shards).
    Multi(usize, Vec<(i64, Option<u8>)>),
    InsertIfAbsent(usize, i64, u8),
    Bulk(usize, Vec<(i64, u8)>),
    Flush,
    Compact,
    Snapshot,
    Crash,
    /// A flush (`compact` false) or compaction on another thread, paused at
    /// its first (`late` false) or second hook point while the next `n`
    /// write or snapshot ops run; with `crash` it stops there and the
    /// engine crashes right after.
    Paused {
        /// the table whose shards' work pauses
        t: usize,
        compact: bool,
        late: bool,
        n: usize,
        /// writes to table `t` made first during the pause (a value, or
        /// `None`: a delete)
        writes: Vec<(i64, Option<u8>)>,
        crash: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let t = 0..3usize;
    let k = 0..24i64;
    prop_oneof![
        6 => (t.clone(), k.clone(), any::<u8>()).prop_map(|(t, k, v)| Op::Upsert(t, k, v)),
        3 => (t.clone(), k.clone()).prop_map(|(t, k)| Op::Delete(t, k)),
        3 => (t.clone(), prop::collection::vec((k.clone(), prop::option::of(any::<u8>())), 1..6))
            .prop_map(|(t, v)| Op::Multi(t, v)),
        2 => (t.clone(), k.clone(), any::<u8>()).prop_map(|(t, k, v)| Op::InsertIfAbsent(t, k, v)),
        2 => (t, prop::collection::vec((k, any::<u8>()), 1..12)).prop_map(|(t, v)| Op::Bulk(t, v)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        2 => Just(Op::Snapshot),
        2 => Just(Op::Crash),
        3 => (
            (0..3usize, any::<bool>(), any::<bool>(), 0..6usize),
            prop::collection::vec((0..24i64, prop::option::of(any::<u8>())), 0..8),
            prop::bool::weighted(0.3)
        )
            .prop_map(|((t, compact, late, n), writes, crash)| Op::Paused {
                t,
                compact,
                late,
                n,
                writes,
                crash
            }),
    ]
}

/// Runs a flush or compaction on a thread, paused at `stage` while
/// `during` runs; with `fail` it stops there. Returns whether it paused.
fn paused(
    e: &Arc<Engine>,
    t: &Table,
    compact: bool,
    stage: BackgroundStage,
    fail: bool,
    during: impl FnOnce(),
) -> bool {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::sync_channel;
    use std::sync::Mutex;
    let (at_tx, at_rx) = sync_channel::<()>(1);
    let (go_tx, go_rx) = sync_channel::<()>(1);
    let (at_tx, go_rx) = (Mutex::new(at_tx), Mutex::new(go_rx));
    let fired = AtomicBool::new(false);
    t.set_background_hook(Some(Arc::new(move |s| {
        if s != stage || fired.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let _ = at_tx.lock().unwrap().send(());
        let _ = go_rx.lock().unwrap().recv();
        if fail {
            return Err(eddy_storage::StorageError::Poisoned(
                "test: cut short".into(),
            ));
        }
        Ok(())
    })));
    let e2 = Arc::clone(e);
    let h = std::thread::spawn(move || {
        if compact {
            e2.compact(None)
        } else {
            e2.flush()
        }
    });
    let reached = loop {
        if at_rx
            .recv_timeout(std::time::Duration::from_millis(10))
            .is_ok()
        {
            break true;
        }
        if h.is_finished() {
            break false;
        }
    };
    if reached {
        during();
        go_tx.send(()).unwrap();
    }
    let r = h.join().unwrap();
    t.set_background_hook(None);
    assert_eq!(r.is_err(), reached && fail, "{r:?}");
    reached
}

const ORIENTATIONS: [Orientation; 3] = [
    Orientation::Row,
    Orientation::Column,
    Orientation::RowColumn,
];

fn open(dir: &std::path::Path) -> Arc<Engine> {
    let mut cfg = EngineConfig::new(dir);
    cfg.sync = false; // logical recovery is what is checked here; see crash.rs for fsync
    cfg.background_compaction = false;
    Engine::open(cfg).unwrap()
}

fn create_tables(e: &Engine) {
    for (i, o) in ORIENTATIONS.iter().enumerate() {
        e.create_table(CreateTable {
            name: format!("t{i}"),
            columns: vec![
                ColumnDef::new("k", ColumnType::BigInt, false),
                ColumnDef::new("v", ColumnType::Text, true),
            ],
            primary_key: vec![0],
            distribution_key: vec![],
            orientation: *o,
            table_group: None,
            shard_count: Some(3),
            checks: Vec::new(),
        })
        .unwrap();
    }
}

fn val(v: u8) -> String {
    format!("v{v}")
}

fn row(k: i64, v: &str) -> Vec<Value> {
    vec![Value::BigInt(k), Value::Text(v.to_string())]
}

fn scan(snap: &TableSnapshot) -> Model {
    let mut out = Model::new();
    for p in snap.partitions() {
        for b in p.scan(None, false, &|_| true).unwrap() {
            let b = b.unwrap();
            let k = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            let v = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
            for i in 0..b.num_rows() {
                let prev = out.insert(k.value(i), v.value(i).to_string());
                assert!(prev.is_none(), "key {} appears twice in a scan", k.value(i));
            }
        }
    }
    out
}

fn check_latest(t: &Table, m: &Model) {
    assert_eq!(&scan(&t.snapshot()), m, "scan of {}", t.def().name);
    for k in 0..24 {
        let got = t.get(&[Value::BigInt(k)]).unwrap();
        let want = m.get(&k).map(|v| row(k, v));
        assert_eq!(got, want, "get({k}) on {}", t.def().name);
    }
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    create_tables(&engine);
    let mut models: Vec<Model> = vec![Model::new(); 3];
    let mut snaps: Vec<(TableSnapshot, Model)> = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        let op = ops[i].clone();
        i += 1;
        match op {
            Op::Paused {
                t,
                compact,
                late,
                n,
                writes,
                crash,
            } => {
                let stage = match (compact, late) {
                    (false, false) => BackgroundStage::FlushFrozen,
                    (false, true) => BackgroundStage::FlushWritten,
                    (true, false) => BackgroundStage::CompactionPicked,
                    (true, true) => BackgroundStage::CompactionWritten,
                };
                // only writes and snapshots run during the pause (another
                // flush, compaction or crash would wait for this one)
                let mut during: Vec<Op> = writes
                    .into_iter()
                    .map(|(k, v)| match v {
                        Some(v) => Op::Upsert(t, k, v),
                        None => Op::Delete(t, k),
                    })
                    .collect();
                let next: Vec<Op> = ops[i..]
                    .iter()
                    .take(n)
                    .take_while(|o| {
                        !matches!(o, Op::Flush | Op::Compact | Op::Crash | Op::Paused { .. })
                    })
                    .cloned()
                    .collect();
                i += next.len();
                during.extend(next);
                let tb = table(&engine, t);
                let reached = paused(&engine, &tb, compact, stage, crash, || {
                    for o in during.iter().cloned() {
                        apply_write(&engine, &mut models, &mut snaps, o);
                    }
                    for (t, m) in models.iter().enumerate() {
                        check_latest(&table(&engine, t), m);
                    }
                });
                if !reached {
                    for o in during {
                        apply_write(&engine, &mut models, &mut snaps, o);
                    }
                } else if crash {
                    for (s, m) in snaps.drain(..) {
                        assert_eq!(&scan(&s), &m, "snapshot at {:?}", s.lsns());
                    }
                    drop(engine);
                    engine = open(dir.path());
                }
            }
            Op::Flush => engine.flush().unwrap(),
            Op::Compact => engine.compact(None).unwrap(),
            Op::Crash => {
                // Earlier snapshots must still read what they saw.
                for (s, m) in snaps.drain(..) {
                    assert_eq!(
                        &scan(&s),
                        &m,
                        "snapshot at {:?} of {}",
                        s.lsns(),
                        s.def().name
                    );
                }
                drop(engine);
                engine = open(dir.path());
            }
            o => apply_write(&engine, &mut models, &mut snaps, o),
        }
    }
    for (s, m) in snaps.drain(..) {
        assert_eq!(
            &scan(&s),
            &m,
            "snapshot at {:?} of {}",
            s.lsns(),
            s.def().name
        );
    }
    for (i, m) in models.iter().enumerate() {
        check_latest(&table(&engine, i), m);
    }
    drop(engine);
    let engine = open(dir.path());
    for (i, m) in models.iter().enumerate() {
        check_latest(&table(&engine, i), m);
    }
}

fn table(e: &Engine, i: usize) -> Arc<Table> {
    e.table(&format!("t{i}")).unwrap()
}

/// Applies a write or snapshot op to the engine and the models.
fn apply_write(
    engine: &Engine,
    models: &mut [Model],
    snaps: &mut Vec<(TableSnapshot, Model)>,
    op: Op,
) {
    {
        match op {
            Op::Upsert(t, k, v) => {
                table(engine, t)
                    .write(vec![WriteOp::Insert {
                        row: row(k, &val(v)),
                        on_conflict: OnConflict::Replace,
                    }])
                    .unwrap();
                models[t].insert(k, val(v));
            }
            Op::Delete(t, k) => {
                let tb = table(engine, t);
                let key = tb.key_of(&[Value::BigInt(k)]).unwrap();
                tb.write(vec![WriteOp::Delete { key }]).unwrap();
                models[t].remove(&k);
            }
            Op::Multi(t, kvs) => {
                let tb = table(engine, t);
                let mut ops = Vec::new();
                for (k, v) in &kvs {
                    match v {
                        Some(v) => {
                            ops.push(WriteOp::Insert {
                                row: row(*k, &val(*v)),
                                on_conflict: OnConflict::Replace,
                            });
                        }
                        None => ops.push(WriteOp::Delete {
                            key: tb.key_of(&[Value::BigInt(*k)]).unwrap(),
                        }),
                    }
                }
                tb.write(ops).unwrap();
                for (k, v) in kvs {
                    match v {
                        Some(v) => models[t].insert(k, val(v)),
                        None => models[t].remove(&k),
                    };
                }
            }
            Op::InsertIfAbsent(t, k, v) => {
                let r = table(engine, t).write(vec![WriteOp::Insert {
                    row: row(k, &val(v)),
                    on_conflict: OnConflict::Error,
                }]);
                match models[t].contains_key(&k) {
                    true => assert_eq!(r.unwrap_err().sqlstate(), "23505"),
                    false => {
                        r.unwrap();
                        models[t].insert(k, val(v));
                    }
                }
            }
            Op::Bulk(t, kvs) => {
                let tb = table(engine, t);
                let rows: Vec<_> = kvs.iter().map(|(k, v)| row(*k, &val(*v))).collect();
                let mut l = tb.bulk_loader();
                l.push(rows_to_batch(&tb, &rows).unwrap()).unwrap();
                l.commit().unwrap();
                for (k, v) in kvs {
                    models[t].insert(k, val(v));
                }
            }
            Op::Snapshot => {
                let t = snaps.len() % 3;
                snaps.push((table(engine, t).snapshot(), models[t].clone()));
            }
            Op::Flush | Op::Compact | Op::Crash | Op::Paused { .. } => {
                unreachable!("not a write")
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, max_shrink_iters: 200, ..ProptestConfig::default() })]
    #[test]
    fn storage_matches_the_model(ops in prop::collection::vec(op(), 1..40)) {
        run(ops);
    }
}

#[test]
fn a_long_mixed_run_matches_the_model() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut ops = Vec::new();
    for _ in 0..400 {
        let t = rng.random_range(0..3);
        let k = rng.random_range(0..24);
        ops.push(match rng.random_range(0..20) {
            0 => Op::Flush,
            1 => Op::Compact,
            2 => Op::Crash,
            3 => Op::Snapshot,
            4 => Op::Bulk(t, (0..5).map(|i| ((k + i) % 24, rng.random())).collect()),
            5..=7 => Op::Delete(t, k),
            8 => Op::Multi(
                t,
                vec![(k, Some(1)), ((k + 7) % 24, None), ((k + 3) % 24, Some(2))],
            ),
            9 | 10 => Op::Paused {
                t,
                compact: rng.random(),
                late: rng.random(),
                n: rng.random_range(0..6),
                writes: (0..rng.random_range(0..8))
                    .map(|i| ((k + 5 * i) % 24, rng.random_range(0..3u8).checked_sub(1)))
                    .collect(),
                crash: rng.random_range(0..4) == 0,
            },
            _ => Op::Upsert(t, k, rng.random()),
        });
    }
    run(ops);
}
