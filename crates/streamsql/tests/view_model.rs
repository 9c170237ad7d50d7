//! Model test of the view operator on a real storage engine: random
//! batches, checkpoints, and crashes at every point of the two-phase
//! protocol (before a checkpoint is durable, after it is durable but before
//! its commit, after the commit). After every commit and at the end, the
//! view table must equal the query over exactly the source rows recorded
//! in `eddy_stream_checkpoints`.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Int32Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use eddy_common::Value;
use eddy_storage::{Engine, EngineConfig};
use eddy_stream::operator::sink::FINAL_TAG;
use eddy_stream::operator::{Emitter, Operator};
use eddy_stream::types::{AnyBatch, CheckpointId};
use eddy_streamsql::batch::ArrowBatch;
use eddy_streamsql::plan::plan_view;
use eddy_streamsql::statements::{parse, StreamStatement};
use eddy_streamsql::view_op::{checkpoint_table, view_table, ViewOperator, ViewTarget};
use proptest::prelude::*;

const KEYS: i32 = 4;
/// A group is shown while it holds fewer rows than this (HAVING).
const SHOWN_BELOW: i64 = 6;

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
enum Step {
    /// A source batch of `(id, k)` rows.
    Batch(Vec<(i64, i32)>),
    /// Checkpoint: snapshot, then (if `durable`) mark it durable, then (if
    /// `committed`) tell the operator it completed.
    Checkpoint { durable: bool, committed: bool },
    /// The process dies; a new operator restores the last durable snapshot
    /// and the source replays from that snapshot's position.
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => prop::collection::vec((0i64..1000, 0..KEYS), 0..6).prop_map(Step::Batch),
        3 => (any::<bool>(), any::<bool>())
            .prop_map(|(durable, committed)| Step::Checkpoint { durable, committed }),
        1 => Just(Step::Crash),
    ]
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k", DataType::Int32, false),
    ]))
}

fn batch(rows: &[(i64, i32)]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.1))),
        ],
    )
    .expect("batch")
}

/// The query's answer over `rows`: k → (count, sum of ids), groups HAVING keeps.
fn answer(rows: &[(i64, i32)]) -> BTreeMap<i32, (i64, i64)> {
    let mut groups: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    for (id, k) in rows {
        let g = groups.entry(*k).or_default();
        g.0 += 1;
        g.1 += id;
    }
    groups.retain(|_, g| g.0 < SHOWN_BELOW);
    groups
}

fn table_contents(target: &ViewTarget) -> BTreeMap<i32, (i64, i64)> {
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

fn recorded_rows(target: &ViewTarget) -> Option<usize> {
    match target
        .checkpoints
        .get(&[Value::Text(target.job.clone())])
        .expect("get")
        .as_deref()
    {
        Some([_, _, Value::BigInt(n), ..]) => Some(*n as usize),
        _ => None,
    }
}

fn check_committed(target: &ViewTarget, all: &[(i64, i32)]) {
    let n = recorded_rows(target).unwrap_or(0);
    assert_eq!(
        table_contents(target),
        answer(&all[..n]),
        "the view over the {n} recorded rows"
    );
}

fn run(steps: Vec<Step>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.sync = false;
    let engine = Engine::open(cfg).expect("engine");
    let StreamStatement::CreateView { query, .. } = parse(&format!(
        "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n, sum(id) AS s FROM src \
         GROUP BY k HAVING count(*) < {SHOWN_BELOW}"
    ))
    .expect("parse") else {
        panic!("not a view")
    };
    let plan = Arc::new(plan_view(&query, &[("src".into(), schema())]).expect("plan"));
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
    let fresh = || ViewOperator::new(Arc::clone(&plan), target.clone()).expect("operator");
    // every row the source ever emitted, in order (the source is replayable)
    let mut log: Vec<(i64, i32)> = Vec::new();
    // rows the current operator has seen
    let mut fed = 0usize;
    let mut op = fresh();
    let mut next_id = 1u64;
    // (snapshot, source position) of the newest durable checkpoint
    let mut durable: Option<(Vec<u8>, usize)> = None;
    for s in steps {
        match s {
            Step::Batch(rows) => {
                log.extend_from_slice(&rows);
                op.process(0, Box::new(vec![ArrowBatch(batch(&rows))]), &mut NoOutput)
                    .expect("process");
                fed = log.len();
            }
            Step::Checkpoint {
                durable: d,
                committed,
            } => {
                let id = CheckpointId(next_id);
                next_id += 1;
                let snap = op.snapshot(id).expect("snapshot").expect("state");
                if d {
                    durable = Some((snap, fed));
                    if committed {
                        op.checkpoint_complete(id, false).expect("commit");
                        check_committed(&target, &log);
                    }
                }
            }
            Step::Crash => {
                op = fresh();
                let from = match &durable {
                    Some((snap, pos)) => {
                        op.restore(snap).expect("restore");
                        *pos
                    }
                    None => 0,
                };
                check_committed(&target, &log);
                // the source replays what the restored state has not seen
                if from < fed {
                    let replay = log[from..fed].to_vec();
                    op.process(0, Box::new(vec![ArrowBatch(batch(&replay))]), &mut NoOutput)
                        .expect("replay");
                }
            }
        }
    }
    op.snapshot(CheckpointId(FINAL_TAG))
        .expect("final snapshot");
    op.checkpoint_complete(CheckpointId(FINAL_TAG), true)
        .expect("final commit");
    assert_eq!(recorded_rows(&target), Some(log.len()));
    assert_eq!(table_contents(&target), answer(&log), "the finished view");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_view_is_exact_for_its_recorded_rows_through_crashes(
        steps in prop::collection::vec(step(), 1..40)
    ) {
        run(steps);
    }
}

#[test]
fn a_checkpoint_durable_but_not_committed_is_committed_on_restore() {
    run(vec![
        Step::Batch(vec![(1, 0), (2, 1)]),
        Step::Checkpoint {
            durable: true,
            committed: false,
        },
        Step::Crash,
        Step::Batch(vec![(3, 0)]),
    ]);
}
