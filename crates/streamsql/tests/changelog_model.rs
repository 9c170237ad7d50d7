//! Model test of a change-log source feeding a keyed view, on a real
//! storage engine: random transactions of inserts, updates and deletes
//! over a three-shard table (some of them failing, so never committed),
//! polls of the change log, checkpoints with crashes at every point of the
//! two-phase protocol. After every commit the view must equal the
//! aggregate over the table as it was at the cut the reader had reached;
//! at the end, the aggregate over the table.

use std::collections::BTreeMap;
use std::sync::Arc;

use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{CreateTable, Engine, EngineConfig, OnConflict, Table, WriteOp};
use eddy_stream::operator::sink::FINAL_TAG;
use eddy_stream::operator::{Emitter, Operator};
use eddy_stream::source::SourceReader;
use eddy_stream::types::{AnyBatch, CheckpointId};
use eddy_streamsql::batch::ArrowBatch;
use eddy_streamsql::changelog::{ChangeLogReader, ChangeLogSpec};
use eddy_streamsql::plan::plan_view;
use eddy_streamsql::statements::{parse, StreamStatement};
use eddy_streamsql::view_op::{checkpoint_table, view_table, ViewOperator, ViewTarget};
use proptest::prelude::*;

const IDS: i64 = 12;
const KEYS: i32 = 3;

struct NoOutput;

impl Emitter for NoOutput {
    fn emit(&mut self, _batch: AnyBatch) -> eddy_stream::Result<()> {
        Ok(())
    }
    fn watermark(&mut self, _wm: i64) -> eddy_stream::Result<()> {
        Ok(())
    }
}

#[derive(Debug, Clone)]
enum Write {
    /// Insert or replace row `id` with `(k, v)`.
    Put(i64, i32, i64),
    Delete(i64),
}

#[derive(Debug, Clone)]
enum Step {
    /// One transaction; `fail` adds an insert of an existing key that
    /// must fail (23505), so none of it commits.
    Txn { writes: Vec<Write>, fail: bool },
    /// The reader polls the table once and the view takes its change.
    Poll,
    /// Snapshot of reader and view; then (if `durable`) the checkpoint is
    /// durable, then (if `committed`) the view commits it.
    Checkpoint { durable: bool, committed: bool },
    /// The process dies: a new reader and view restore the last durable
    /// checkpoint (or start afresh).
    Crash,
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        3 => (0..IDS, 0..KEYS, -50i64..50).prop_map(|(id, k, v)| Write::Put(id, k, v)),
        1 => (0..IDS).prop_map(Write::Delete),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (prop::collection::vec(write(), 1..5), prop::bool::weighted(0.15))
            .prop_map(|(writes, fail)| Step::Txn { writes, fail }),
        3 => Just(Step::Poll),
        3 => (any::<bool>(), any::<bool>())
            .prop_map(|(durable, committed)| Step::Checkpoint { durable, committed }),
        1 => Just(Step::Crash),
    ]
}

type Model = BTreeMap<i64, (i32, i64)>;

/// The view's query over the table: k → (count, sum of v).
fn answer(rows: &Model) -> BTreeMap<i32, (i64, i64)> {
    let mut out: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    for (k, v) in rows.values() {
        let g = out.entry(*k).or_default();
        g.0 += 1;
        g.1 += v;
    }
    out
}

fn view_contents(target: &ViewTarget) -> BTreeMap<i32, (i64, i64)> {
    let mut out = BTreeMap::new();
    for k in 0..KEYS {
        if let Some(row) = target.table.get(&[Value::Int(k)]).expect("get") {
            match row.as_slice() {
                [Value::Int(k), Value::BigInt(n), Value::BigInt(s)] => {
                    out.insert(*k, (*n, *s));
                }
                other => panic!("unexpected row {other:?}"),
            }
        }
    }
    out
}

fn recorded_position(target: &ViewTarget) -> Option<String> {
    match target
        .checkpoints
        .get(&[Value::Text(target.job.clone())])
        .expect("get")
        .as_deref()
    {
        Some([_, _, _, _, Value::Text(p)]) => Some(p.clone()),
        _ => None,
    }
}

fn apply(engine: &Engine, table: &Arc<Table>, model: &mut Model, writes: &[Write], fail: bool) {
    let mut ops = Vec::new();
    let mut next = model.clone();
    for w in writes {
        match w {
            Write::Put(id, k, v) => {
                ops.push(WriteOp::Insert {
                    row: vec![Value::BigInt(*id), Value::Int(*k), Value::BigInt(*v)],
                    on_conflict: OnConflict::Replace,
                });
                next.insert(*id, (*k, *v));
            }
            Write::Delete(id) => {
                ops.push(WriteOp::Delete {
                    key: table.key_of(&[Value::BigInt(*id)]).expect("key"),
                });
                next.remove(id);
            }
        }
    }
    if fail {
        // the same new key inserted twice: the whole transaction fails
        // (23505) and nothing of it commits
        for _ in 0..2 {
            ops.push(WriteOp::Insert {
                row: vec![Value::BigInt(IDS + 1), Value::Int(0), Value::BigInt(0)],
                on_conflict: OnConflict::Error,
            });
        }
    }
    let r = engine.commit(vec![(Arc::clone(table), ops)]);
    if fail {
        assert!(r.is_err(), "a transaction with a duplicate key must fail");
    } else {
        r.expect("commit");
        *model = next;
    }
}

fn run(steps: Vec<Step>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.sync = false;
    let engine = Engine::open(cfg).expect("engine");
    let table = engine
        .create_table(CreateTable {
            name: "t".into(),
            columns: vec![
                ColumnDef::new("id", ColumnType::BigInt, false),
                ColumnDef::new("k", ColumnType::Int, false),
                ColumnDef::new("v", ColumnType::BigInt, false),
            ],
            primary_key: vec![0],
            distribution_key: vec![0],
            orientation: Orientation::Row,
            table_group: None,
            shard_count: Some(3),
            checks: Vec::new(),
        })
        .expect("table");
    let columns = vec![
        ("id".to_string(), ColumnType::BigInt),
        ("k".to_string(), ColumnType::Int),
        ("v".to_string(), ColumnType::BigInt),
    ];
    let options = [("table".to_string(), "t".to_string())].into();
    let spec = Arc::new(ChangeLogSpec::new(&columns, &options).expect("spec"));
    let StreamStatement::CreateView { query, .. } = parse(
        "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n, sum(v) AS s FROM src GROUP BY k",
    )
    .expect("parse") else {
        panic!("not a view")
    };
    let mut plan = plan_view(&query, &[("src".into(), spec.schema())]).expect("plan");
    assert_eq!(plan.retract_refusal, None);
    plan.retractions = true;
    let plan = Arc::new(plan);
    let target = ViewTarget {
        table: engine
            .create_table(view_table("v", &plan))
            .expect("view table"),
        checkpoints: engine
            .create_table(checkpoint_table())
            .expect("checkpoints"),
        engine: Arc::clone(&engine),
        job: "v".into(),
        stats: Arc::default(),
    };
    let fresh = || -> (ChangeLogReader, ViewOperator) {
        (
            spec.reader(Arc::clone(&engine)).expect("reader"),
            ViewOperator::new(Arc::clone(&plan), target.clone()).expect("operator"),
        )
    };
    let (mut reader, mut op) = fresh();
    let mut model = Model::new();
    // the table as of each cut the readers reached, by position text
    let mut at_cut: BTreeMap<String, Model> = BTreeMap::new();
    let mut durable: Option<(Vec<u8>, Vec<u8>)> = None;
    let mut next_id = 1u64;
    let check = |at_cut: &BTreeMap<String, Model>| match recorded_position(&target) {
        Some(p) => assert_eq!(
            view_contents(&target),
            answer(&at_cut[&p]),
            "the view at the recorded cut {p}"
        ),
        None => assert_eq!(view_contents(&target), BTreeMap::new(), "nothing committed"),
    };
    let poll = |reader: &mut ChangeLogReader,
                op: &mut ViewOperator,
                model: &Model,
                at_cut: &mut BTreeMap<String, Model>| {
        if let Some(b) = reader.next_change().expect("poll") {
            let cut = b.schema().metadata()["eddy.cut"].clone();
            at_cut.insert(cut, model.clone());
            op.process(0, Box::new(vec![ArrowBatch(b)]), &mut NoOutput)
                .expect("process");
        }
    };
    for s in steps {
        match s {
            Step::Txn { writes, fail } => apply(&engine, &table, &mut model, &writes, fail),
            Step::Poll => poll(&mut reader, &mut op, &model, &mut at_cut),
            Step::Checkpoint {
                durable: d,
                committed,
            } => {
                let id = CheckpointId(next_id);
                next_id += 1;
                let source = reader.snapshot().expect("source snapshot");
                let view = op.snapshot(id).expect("snapshot").expect("state");
                if d {
                    durable = Some((source, view));
                    if committed {
                        op.checkpoint_complete(id, false).expect("commit");
                        check(&at_cut);
                    }
                }
            }
            Step::Crash => {
                (reader, op) = fresh();
                if let Some((source, view)) = &durable {
                    reader.restore(source).expect("restore source");
                    op.restore(view).expect("restore view");
                }
                check(&at_cut);
            }
        }
    }
    poll(&mut reader, &mut op, &model, &mut at_cut);
    op.snapshot(CheckpointId(FINAL_TAG))
        .expect("final snapshot");
    op.checkpoint_complete(CheckpointId(FINAL_TAG), true)
        .expect("final commit");
    assert_eq!(view_contents(&target), answer(&model), "the finished view");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_view_equals_the_table_aggregate_at_its_recorded_cut(
        steps in prop::collection::vec(step(), 1..40)
    ) {
        run(steps);
    }
}

#[test]
fn a_group_whose_rows_are_all_deleted_leaves_the_view() {
    run(vec![
        Step::Txn {
            writes: vec![Write::Put(1, 0, 5), Write::Put(2, 1, 7)],
            fail: false,
        },
        Step::Poll,
        Step::Checkpoint {
            durable: true,
            committed: true,
        },
        Step::Txn {
            writes: vec![Write::Delete(1), Write::Put(2, 2, 7)],
            fail: false,
        },
        Step::Poll,
        Step::Checkpoint {
            durable: true,
            committed: true,
        },
        Step::Crash,
        Step::Txn {
            writes: vec![Write::Put(3, 0, 1)],
            fail: true,
        },
    ]);
}

#[test]
fn a_checkpoint_table_from_before_positions_gains_the_column_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.sync = false;
    let engine = Engine::open(cfg).expect("engine");
    let mut old = checkpoint_table();
    old.columns.pop();
    let t = engine.create_table(old).expect("old checkpoint table");
    engine
        .commit(vec![(
            t,
            vec![WriteOp::Insert {
                row: vec![
                    Value::Text("v".into()),
                    Value::BigInt(3),
                    Value::BigInt(10),
                    Value::Timestamp(0),
                ],
                on_conflict: OnConflict::Error,
            }],
        )])
        .expect("an old checkpoint row");
    let _manager =
        eddy_streamsql::StreamManager::start(Arc::clone(&engine), dir.path()).expect("start");
    let t = engine
        .table(eddy_streamsql::view_op::CHECKPOINT_TABLE)
        .expect("table");
    assert_eq!(t.def().columns.len(), 5);
    assert_eq!(
        t.get(&[Value::Text("v".into())]).expect("get"),
        Some(vec![
            Value::Text("v".into()),
            Value::BigInt(3),
            Value::BigInt(10),
            Value::Timestamp(0),
            Value::Null
        ]),
        "the old row reads with a NULL position"
    );
}
