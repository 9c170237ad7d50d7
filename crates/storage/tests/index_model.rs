//! Model test of secondary indexes: random upserts, deletes, multi-row
//! writes, bulk loads, flushes, compactions and crash+reopen, on row,
//! column and row+column tables. After every step, and through snapshots
//! taken earlier, every index lookup answers exactly the model's rows (the
//! index equals one built from the visible rows), and a write that would
//! repeat a UNIQUE key fails with 23505 and changes nothing.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use eddy_common::{ColumnDef, ColumnType, IndexDef, Orientation, Row, Value};
use eddy_storage::index::index_key;
use eddy_storage::{
    rows_to_batch, CreateTable, Engine, EngineConfig, OnConflict, Table, TableSnapshot, WriteOp,
};
use proptest::prelude::*;

/// k -> (v, u): `v` has a plain index, `u` (table `b*` only) a UNIQUE one.
type Model = BTreeMap<i64, Cells>;

/// (v, u) of one row.
type Cells = (Option<i64>, Option<i64>);

#[derive(Clone, Debug)]
enum Op {
    /// (table, k, v, u) with OnConflict::Replace.
    Upsert(usize, i64, Option<i64>, Option<i64>),
    Delete(usize, i64),
    Multi(usize, Vec<(i64, Option<Cells>)>),
    /// Plain-index tables only (bulk loads refuse UNIQUE indexes).
    Bulk(usize, Vec<(i64, Option<i64>)>),
    Flush,
    Compact,
    Snapshot(usize),
    Crash,
}

/// Tables 0-2: "a<o>" (3 shards, index on v); 3-5: "b<o>" (index on v,
/// UNIQUE on u without the distribution key; 3 shards, b2 one shard).
const TABLES: usize = 6;
const ORIENTATIONS: [Orientation; 3] = [
    Orientation::Row,
    Orientation::Column,
    Orientation::RowColumn,
];

fn name(t: usize) -> String {
    format!("{}{}", if t < 3 { "a" } else { "b" }, t % 3)
}

fn small() -> impl Strategy<Value = Option<i64>> {
    prop::option::weighted(0.85, 0..6i64)
}

fn op() -> impl Strategy<Value = Op> {
    let t = 0..TABLES;
    let k = 0..16i64;
    prop_oneof![
        6 => (t.clone(), k.clone(), small(), small()).prop_map(|(t, k, v, u)| Op::Upsert(t, k, v, u)),
        3 => (t.clone(), k.clone()).prop_map(|(t, k)| Op::Delete(t, k)),
        3 => (t.clone(), prop::collection::vec((k.clone(), prop::option::of((small(), small()))), 1..5))
            .prop_map(|(t, v)| Op::Multi(t, v)),
        2 => (0..3usize, prop::collection::vec((k, small()), 1..8)).prop_map(|(t, v)| Op::Bulk(t, v)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        2 => t.prop_map(Op::Snapshot),
        2 => Just(Op::Crash),
    ]
}

fn open(dir: &std::path::Path) -> Arc<Engine> {
    let mut cfg = EngineConfig::new(dir);
    cfg.sync = false;
    cfg.background_compaction = false;
    Engine::open(cfg).unwrap()
}

fn create_tables(e: &Engine) {
    for t in 0..TABLES {
        let n = name(t);
        e.create_table(CreateTable {
            name: n.clone(),
            columns: vec![
                ColumnDef::new("k", ColumnType::BigInt, false),
                ColumnDef::new("v", ColumnType::BigInt, true),
                ColumnDef::new("u", ColumnType::BigInt, true),
            ],
            primary_key: vec![0],
            distribution_key: vec![],
            orientation: ORIENTATIONS[t % 3],
            table_group: None,
            // b0, b1: the UNIQUE index spans shards; b2: one shard
            shard_count: Some(if t == 5 { 1 } else { 3 }),
            checks: Vec::new(),
        })
        .unwrap();
        let ddl = e.ddl(None);
        ddl.create_index(&n, index("iv", 1, false)).unwrap();
        if t >= 3 {
            ddl.create_index(&n, index("iu", 2, true)).unwrap();
        }
    }
}

fn index(name: &str, col: usize, unique: bool) -> IndexDef {
    IndexDef {
        name: name.into(),
        columns: vec![col],
        unique,
        constraint: false,
        descending: vec![],
    }
}

fn row(k: i64, v: Option<i64>, u: Option<i64>) -> Row {
    let cell = |x: Option<i64>| x.map_or(Value::Null, Value::BigInt);
    vec![Value::BigInt(k), cell(v), cell(u)]
}

fn key(x: i64) -> Vec<u8> {
    index_key(&[0], &[Value::BigInt(x)]).unwrap()
}

/// Keys the index lookup finds with `col` within the bounds (after the
/// caller's re-check of the predicate), against the model's.
fn must_answer_like_the_model(snap: &TableSnapshot, m: &Model, what: &str) {
    let probes: Vec<(Bound<i64>, Bound<i64>)> = (0..6)
        .map(|x| (Bound::Included(x), Bound::Included(x)))
        .chain([
            (Bound::Included(2), Bound::Excluded(4)),
            (Bound::Excluded(1), Bound::Unbounded),
            (Bound::Unbounded, Bound::Included(2)),
        ])
        .collect();
    let indexes: &[(&str, usize)] = if snap.def().indexes.len() > 1 {
        &[("iv", 1), ("iu", 2)]
    } else {
        &[("iv", 1)]
    };
    for &(ix, col) in indexes {
        for (lo, hi) in &probes {
            let within = |x: i64| lo_ok(lo, x) && hi_ok(hi, x);
            let enc = |b: &Bound<i64>| match b {
                Bound::Included(x) => Bound::Included(key(*x)),
                Bound::Excluded(x) => Bound::Excluded(key(*x)),
                Bound::Unbounded => Bound::Unbounded,
            };
            let Some(rows) = snap.index_lookup(ix, &enc(lo), &enc(hi)).unwrap() else {
                continue; // answered by a scan instead: nothing to compare
            };
            let mut got: Vec<i64> = rows
                .iter()
                .filter_map(|(_, r)| match (&r[0], &r[col]) {
                    (Value::BigInt(k), Value::BigInt(x)) if within(*x) => Some(*k),
                    _ => None,
                })
                .collect();
            got.sort_unstable();
            let want: Vec<i64> = m
                .iter()
                .filter(|(_, (v, u))| {
                    let x = if col == 1 { v } else { u };
                    x.is_some_and(within)
                })
                .map(|(k, _)| *k)
                .collect();
            assert_eq!(got, want, "{what}: {} {ix} {lo:?}..{hi:?}", snap.def().name);
        }
    }
}

fn lo_ok(b: &Bound<i64>, x: i64) -> bool {
    match b {
        Bound::Included(l) => x >= *l,
        Bound::Excluded(l) => x > *l,
        Bound::Unbounded => true,
    }
}

fn hi_ok(b: &Bound<i64>, x: i64) -> bool {
    match b {
        Bound::Included(h) => x <= *h,
        Bound::Excluded(h) => x < *h,
        Bound::Unbounded => true,
    }
}

/// Whether `m` repeats a non-NULL `u` (table `t` has the UNIQUE index).
fn breaks_unique(t: usize, m: &Model) -> bool {
    if t < 3 {
        return false;
    }
    let mut seen = std::collections::HashSet::new();
    m.values().filter_map(|(_, u)| *u).any(|u| !seen.insert(u))
}

fn write(tb: &Table, t: usize, m: &mut Model, ops: Vec<WriteOp>, next: Model) {
    let r = tb.write(ops);
    if breaks_unique(t, &next) {
        assert_eq!(
            r.map(|_| ()).unwrap_err().sqlstate(),
            "23505",
            "{}",
            name(t)
        );
    } else {
        r.unwrap();
        *m = next;
    }
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    create_tables(&engine);
    let mut models: Vec<Model> = vec![Model::new(); TABLES];
    let mut snaps: Vec<(TableSnapshot, Model)> = Vec::new();
    let table = |e: &Engine, t: usize| e.table(&name(t)).unwrap();
    for op in ops {
        match op {
            Op::Upsert(t, k, v, u) => {
                let mut next = models[t].clone();
                next.insert(k, (v, u));
                let ops = vec![WriteOp::Insert {
                    row: row(k, v, u),
                    on_conflict: OnConflict::Replace,
                }];
                write(&table(&engine, t), t, &mut models[t], ops, next);
            }
            Op::Delete(t, k) => {
                let tb = table(&engine, t);
                let key = tb.key_of(&[Value::BigInt(k)]).unwrap();
                tb.write(vec![WriteOp::Delete { key }]).unwrap();
                models[t].remove(&k);
            }
            Op::Multi(t, kvs) => {
                let tb = table(&engine, t);
                let mut next = models[t].clone();
                let mut ops = Vec::new();
                for (k, change) in kvs {
                    match change {
                        Some((v, u)) => {
                            next.insert(k, (v, u));
                            ops.push(WriteOp::Insert {
                                row: row(k, v, u),
                                on_conflict: OnConflict::Replace,
                            });
                        }
                        None => {
                            next.remove(&k);
                            ops.push(WriteOp::Delete {
                                key: tb.key_of(&[Value::BigInt(k)]).unwrap(),
                            });
                        }
                    }
                }
                write(&tb, t, &mut models[t], ops, next);
            }
            Op::Bulk(t, kvs) => {
                let tb = table(&engine, t);
                let rows: Vec<Row> = kvs.iter().map(|(k, v)| row(*k, *v, None)).collect();
                let mut l = tb.bulk_loader();
                l.push(rows_to_batch(&tb, &rows).unwrap()).unwrap();
                l.commit().unwrap();
                for (k, v) in kvs {
                    models[t].insert(k, (v, None));
                }
            }
            Op::Flush => engine.flush().unwrap(),
            Op::Compact => engine.compact(None).unwrap(),
            Op::Snapshot(t) => snaps.push((table(&engine, t).snapshot(), models[t].clone())),
            Op::Crash => {
                for (s, m) in snaps.drain(..) {
                    must_answer_like_the_model(&s, &m, "an earlier snapshot");
                }
                drop(engine);
                engine = open(dir.path());
            }
        }
        for (t, m) in models.iter().enumerate() {
            must_answer_like_the_model(&table(&engine, t).snapshot(), m, "latest");
        }
    }
    for (s, m) in snaps.drain(..) {
        must_answer_like_the_model(&s, &m, "an earlier snapshot");
    }
    drop(engine);
    let engine = open(dir.path());
    for (t, m) in models.iter().enumerate() {
        must_answer_like_the_model(&table(&engine, t).snapshot(), m, "after reopen");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, max_shrink_iters: 200, ..ProptestConfig::default() })]
    #[test]
    fn indexes_match_the_model(ops in prop::collection::vec(op(), 1..30)) {
        run(ops);
    }
}

#[test]
fn a_bulk_load_between_snapshots_keeps_old_snapshots_right() {
    run(vec![
        Op::Upsert(0, 1, Some(2), None),
        Op::Snapshot(0),
        Op::Upsert(0, 1, Some(3), None),
        Op::Bulk(0, vec![(1, Some(4)), (2, Some(2))]),
        Op::Snapshot(0),
        Op::Delete(0, 2),
        Op::Crash,
    ]);
}
