//! Model test of an append-only view (no GROUP BY, `append_op.rs`) on a
//! real storage engine: source rows with many exact duplicates (a view
//! keyed by its rows' values would collapse them) and times out of order
//! (a watermark plays no part: late rows are kept), random checkpoints and
//! crashes at every point of the two-phase protocol; the source replays
//! from the restored position in batches cut differently. After every
//! commit and at the end, the view table must equal, as a multiset, the
//! query applied to exactly the rows its checkpoint records: nothing
//! lost, nothing twice.

use std::sync::Arc;

use datafusion::arrow::array::{Array, Int32Array, Int64Array, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::DataType;
use eddy_common::Value;
use eddy_storage::{Engine, EngineConfig, Table};
use eddy_stream::operator::sink::FINAL_TAG;
use eddy_stream::operator::Operator;
use eddy_stream::types::CheckpointId;
use eddy_streamsql::append_op::AppendOperator;
use eddy_streamsql::batch::ArrowBatch;
use eddy_streamsql::plan::ViewPlan;
use eddy_streamsql::view_op::{checkpoint_table, view_table, ViewTarget};
use proptest::prelude::*;

mod common;
use common::*;

#[derive(Debug, Clone)]
enum Step {
    /// Source rows: (id, k, time lag in ms).
    Batch(Vec<(i64, i32, i64)>),
    Checkpoint {
        durable: bool,
        committed: bool,
    },
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => prop::collection::vec((0..4i64, 0..6i32, 0..20i64), 0..12).prop_map(Step::Batch),
        2 => (any::<bool>(), any::<bool>())
            .prop_map(|(durable, committed)| Step::Checkpoint { durable, committed }),
        1 => Just(Step::Crash),
    ]
}

/// The query's rows over `rows`: `id, k * 2, ts WHERE k % 3 <> 0`, sorted.
fn answer(rows: &[Row]) -> Vec<(i64, i32, i64)> {
    let mut out: Vec<_> = rows
        .iter()
        .filter(|r| r.1 % 3 != 0)
        .map(|r| (r.0, r.1 * 2, r.2))
        .collect();
    out.sort_unstable();
    out
}

fn table_rows(table: &Table) -> Vec<(i64, i32, i64)> {
    let mut out = Vec::new();
    for part in table.snapshot().partitions() {
        for b in part.scan(None, false, &|_| true).expect("scan") {
            let b = b.expect("batch");
            let ids = b
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("id");
            let ks = datafusion::arrow::compute::cast(b.column(1), &DataType::Int32).expect("k2");
            let ks = ks.as_any().downcast_ref::<Int32Array>().expect("k2");
            let ts = b
                .column(2)
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .expect("ts");
            for i in 0..b.num_rows() {
                out.push((ids.value(i), ks.value(i), ts.value(i)));
            }
        }
    }
    out.sort_unstable();
    out
}

fn recorded_rows(target: &ViewTarget) -> usize {
    match target
        .checkpoints
        .get(&[Value::Text(target.job.clone())])
        .expect("get")
        .as_deref()
    {
        Some([_, _, Value::BigInt(n), ..]) => *n as usize,
        _ => 0,
    }
}

fn check_committed(target: &ViewTarget, log: &[Row]) {
    let n = recorded_rows(target);
    assert_eq!(
        table_rows(&target.table),
        answer(&log[..n]),
        "the view over the {n} recorded rows"
    );
}

fn setup(engine: &Arc<Engine>) -> (Arc<ViewPlan>, ViewTarget) {
    let sql = "CREATE MATERIALIZED VIEW appended AS SELECT id, k * 2 AS k2, ts FROM src \
               WHERE k % 3 <> 0";
    let plan = Arc::new(plan_over_src(sql));
    assert!(plan.append && plan.primary_key.is_empty());
    let checkpoints = engine
        .create_table(checkpoint_table())
        .expect("checkpoints");
    let table = engine
        .create_table(view_table("appended", &plan))
        .expect("view table");
    assert!(table.def().primary_key.is_empty(), "the key is no column");
    let target = ViewTarget {
        table,
        checkpoints,
        engine: Arc::clone(engine),
        job: "appended".into(),
        stats: Arc::default(),
    };
    (plan, target)
}

fn run(steps: Vec<Step>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.sync = false;
    let engine = Engine::open(cfg).expect("engine");
    let (plan, target) = setup(&engine);
    let mut op = AppendOperator::new(Arc::clone(&plan), target.clone()).expect("operator");
    let mut durable: Option<(Vec<u8>, usize)> = None;
    let mut log: Vec<Row> = Vec::new();
    let mut clock = 100 * MS;
    let mut next_id = 1u64;
    for s in steps {
        match s {
            Step::Batch(rows) => {
                let rows: Vec<Row> = rows
                    .into_iter()
                    .map(|(id, k, lag)| {
                        clock += MS;
                        (id, k, clock - lag * MS)
                    })
                    .collect();
                log.extend_from_slice(&rows);
                op.process(0, Box::new(vec![ArrowBatch(batch(&rows))]), &mut NoOutput)
                    .expect("process");
            }
            Step::Checkpoint {
                durable: d,
                committed,
            } => {
                let id = CheckpointId(next_id);
                next_id += 1;
                let snap = op.snapshot(id).expect("snapshot").expect("state");
                if d {
                    durable = Some((snap, log.len()));
                    if committed {
                        op.checkpoint_complete(id, false).expect("commit");
                        check_committed(&target, &log);
                    }
                }
            }
            Step::Crash => {
                op = AppendOperator::new(Arc::clone(&plan), target.clone()).expect("operator");
                let from = match &durable {
                    Some((snap, pos)) => {
                        op.restore(snap).expect("restore");
                        *pos
                    }
                    None => 0,
                };
                check_committed(&target, &log);
                // the source replays what the restored state has not seen,
                // cut into batches of three rows
                for chunk in log[from..].chunks(3) {
                    op.process(0, Box::new(vec![ArrowBatch(batch(chunk))]), &mut NoOutput)
                        .expect("replay");
                }
            }
        }
    }
    // the end of the source: the final checkpoint commits everything
    let id = CheckpointId(FINAL_TAG);
    let snap = op.snapshot(id).expect("final snapshot").expect("state");
    op.checkpoint_complete(id, true).expect("final commit");
    assert_eq!(recorded_rows(&target), log.len());
    check_committed(&target, &log);
    // a restore of the final state commits nothing twice
    let mut again = AppendOperator::new(Arc::clone(&plan), target.clone()).expect("operator");
    again.restore(&snap).expect("restore final");
    check_committed(&target, &log);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn an_append_only_view_holds_every_kept_row_once(steps in prop::collection::vec(step(), 0..30)) {
        run(steps);
    }
}

#[test]
fn a_crash_after_the_commit_and_before_the_acknowledgement_writes_nothing_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.sync = false;
    let engine = Engine::open(cfg).expect("engine");
    let (plan, target) = setup(&engine);
    let mut op = AppendOperator::new(Arc::clone(&plan), target.clone()).expect("operator");
    // the same row four times: four view rows
    let log: Vec<Row> = vec![(7, 1, 5 * MS); 4];
    op.process(0, Box::new(vec![ArrowBatch(batch(&log))]), &mut NoOutput)
        .expect("process");
    let snap = op
        .snapshot(CheckpointId(1))
        .expect("snapshot")
        .expect("state");
    op.checkpoint_complete(CheckpointId(1), false)
        .expect("commit");
    check_committed(&target, &log);
    assert_eq!(table_rows(&target.table).len(), 4);
    // restored from the same checkpoint (its commit repeated): still four
    let mut op = AppendOperator::new(Arc::clone(&plan), target.clone()).expect("operator");
    op.restore(&snap).expect("restore");
    assert_eq!(table_rows(&target.table).len(), 4);
}
