//! Model test of windowed views on a real storage engine: a source with a
//! watermark whose times run out of order (and below zero), a TUMBLE view
//! that emits on window close and a HOP view that emits on update (with a
//! HAVING that deletes rows), random checkpoints and crashes at every point
//! of the two-phase protocol; the source replays from the restored
//! position in batches cut differently. After every commit and at the end,
//! each view table must equal the windowed aggregate computed here
//! directly from the rows its checkpoint records, and after every
//! checkpoint the operator may hold state only for open windows.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::TimestampMicrosecondArray;
use datafusion::arrow::array::{Array, Int32Array, Int64Array};
use eddy_common::Value;
use eddy_storage::{Engine, EngineConfig, Table};
use eddy_stream::operator::sink::FINAL_TAG;
use eddy_stream::operator::Operator;
use eddy_stream::types::CheckpointId;
use eddy_streamsql::batch::ArrowBatch;
use eddy_streamsql::view_op::{checkpoint_table, view_table, ViewOperator, ViewTarget};
use proptest::prelude::*;

mod common;
use common::*;

const TUMBLE: i64 = 10 * MS;
const HOP: i64 = 5 * MS;
const HOP_SIZE: i64 = 15 * MS;
/// The HOP view shows a group while it holds fewer rows than this.
const SHOWN_BELOW: i64 = 5;

#[derive(Debug, Clone)]
enum Step {
    /// Source rows: (k, how far the clock advances in ms, how far the row's
    /// time lags the clock in ms).
    Batch(Vec<(i32, i64, i64)>),
    Checkpoint {
        durable: bool,
        committed: bool,
    },
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => prop::collection::vec((0..3i32, 0..4i64, 0..12i64), 0..8).prop_map(Step::Batch),
        3 => (any::<bool>(), any::<bool>())
            .prop_map(|(durable, committed)| Step::Checkpoint { durable, committed }),
        1 => Just(Step::Crash),
    ]
}

/// (window start, k) → (count, sum of ids).
type Windows = BTreeMap<(i64, i32), (i64, i64)>;

/// The TUMBLE view (emit on window close) over `rows`: windows the
/// watermark has closed (all of them when the source has ended).
fn tumble_answer(rows: &[Row], ended: bool) -> Windows {
    let (kept, wm) = on_time(rows);
    let mut out = Windows::new();
    for (id, k, t) in kept {
        let start = t.div_euclid(TUMBLE) * TUMBLE;
        if ended || wm.is_some_and(|w| start + TUMBLE <= w) {
            let g = out.entry((start, k)).or_default();
            g.0 += 1;
            g.1 += id;
        }
    }
    out
}

/// Every hopping window `[s, s + HOP_SIZE)` holding `t`, found by brute force.
fn hops_of(t: i64) -> Vec<i64> {
    let lo = (t - HOP_SIZE).div_euclid(HOP) * HOP - HOP;
    (0..10)
        .map(|j| lo + j * HOP)
        .filter(|s| *s <= t && t < s + HOP_SIZE)
        .collect()
}

/// The HOP view (emit on update, HAVING count(*) < SHOWN_BELOW).
fn hop_answer(rows: &[Row]) -> Windows {
    let mut out = Windows::new();
    for (id, k, t) in on_time(rows).0 {
        for s in hops_of(t) {
            let g = out.entry((s, k)).or_default();
            g.0 += 1;
            g.1 += id;
        }
    }
    out.retain(|_, g| g.0 < SHOWN_BELOW);
    out
}

/// Groups whose window is still open (the state the operator may keep).
fn open_groups(rows: &[Row], starts: impl Fn(i64) -> Vec<i64>, size: i64) -> usize {
    let (kept, wm) = on_time(rows);
    let mut groups = std::collections::BTreeSet::new();
    for (_, k, t) in kept {
        for s in starts(t) {
            if wm.is_none_or(|w| s + size > w) {
                groups.insert((s, k));
            }
        }
    }
    groups.len()
}

/// The view table: (window_start, k) → (n, s), from a full scan.
fn table_rows(table: &Table) -> Windows {
    let def = table.def();
    let col = |name: &str| {
        def.columns
            .iter()
            .position(|c| c.name == name)
            .expect("column")
    };
    let (ws, k, n, s) = (col("window_start"), col("k"), col("n"), col("s"));
    let mut out = Windows::new();
    for part in table.snapshot().partitions() {
        for b in part.scan(None, false, &|_| true).expect("scan") {
            let b = b.expect("batch");
            let starts = b
                .column(ws)
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .expect("window_start");
            let ks = b
                .column(k)
                .as_any()
                .downcast_ref::<Int32Array>()
                .expect("k");
            let ns = b
                .column(n)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("n");
            let ss = b
                .column(s)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("s");
            for i in 0..b.num_rows() {
                let dup = out.insert((starts.value(i), ks.value(i)), (ns.value(i), ss.value(i)));
                assert!(dup.is_none(), "one row per key");
            }
        }
    }
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

struct View {
    name: &'static str,
    target: ViewTarget,
    plan: Arc<eddy_streamsql::plan::ViewPlan>,
    op: ViewOperator,
    durable: Option<(Vec<u8>, usize)>,
}

impl View {
    fn new(engine: &Arc<Engine>, checkpoints: &Arc<Table>, name: &'static str, sql: &str) -> View {
        let plan = Arc::new(plan_over_src(sql));
        let target = ViewTarget {
            table: engine
                .create_table(view_table(name, &plan))
                .expect("view table"),
            checkpoints: Arc::clone(checkpoints),
            engine: Arc::clone(engine),
            job: name.into(),
            stats: Arc::default(),
        };
        let op = ViewOperator::new(Arc::clone(&plan), target.clone()).expect("operator");
        View {
            name,
            target,
            plan,
            op,
            durable: None,
        }
    }

    fn answer(&self, rows: &[Row], ended: bool) -> Windows {
        if self.name == "tumbled" {
            tumble_answer(rows, ended)
        } else {
            hop_answer(rows)
        }
    }

    fn open_groups(&self, rows: &[Row]) -> usize {
        if self.name == "tumbled" {
            open_groups(rows, |t| vec![t.div_euclid(TUMBLE) * TUMBLE], TUMBLE)
        } else {
            open_groups(rows, hops_of, HOP_SIZE)
        }
    }

    fn check_committed(&self, log: &[Row]) {
        let n = recorded_rows(&self.target);
        assert_eq!(
            table_rows(&self.target.table),
            self.answer(&log[..n], false),
            "view {} over the {n} recorded rows",
            self.name
        );
    }
}

fn run(steps: Vec<Step>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.sync = false;
    let engine = Engine::open(cfg).expect("engine");
    let checkpoints = engine
        .create_table(checkpoint_table())
        .expect("checkpoints");
    let mut views = [
        View::new(
            &engine,
            &checkpoints,
            "tumbled",
            "CREATE MATERIALIZED VIEW tumbled AS SELECT window_start, k, count(*) AS n, \
             sum(id) AS s FROM TUMBLE(src, ts, INTERVAL '10 milliseconds') \
             GROUP BY window_start, k EMIT ON WINDOW CLOSE",
        ),
        View::new(
            &engine,
            &checkpoints,
            "hopped",
            &format!(
                "CREATE MATERIALIZED VIEW hopped AS SELECT window_start, window_end, k, \
                 count(*) AS n, sum(id) AS s FROM HOP(src, ts, INTERVAL '5 milliseconds', \
                 INTERVAL '15 milliseconds') GROUP BY window_start, window_end, k \
                 HAVING count(*) < {SHOWN_BELOW}"
            ),
        ),
    ];
    let mut log: Vec<Row> = Vec::new();
    // the source's clock starts below zero: windows cross the epoch
    let mut clock = -40 * MS;
    let mut next_id = 1u64;
    for s in steps {
        match s {
            Step::Batch(rows) => {
                let rows: Vec<Row> = rows
                    .into_iter()
                    .map(|(k, advance, lag)| {
                        clock += advance * MS;
                        (log.len() as i64, k, clock - lag * MS)
                    })
                    .collect();
                log.extend_from_slice(&rows);
                for v in &mut views {
                    v.op.process(0, Box::new(vec![ArrowBatch(batch(&rows))]), &mut NoOutput)
                        .expect("process");
                }
            }
            Step::Checkpoint { durable, committed } => {
                let id = CheckpointId(next_id);
                next_id += 1;
                for v in &mut views {
                    let snap = v.op.snapshot(id).expect("snapshot").expect("state");
                    assert_eq!(
                        v.op.group_count(),
                        v.open_groups(&log),
                        "view {}: state only for open windows",
                        v.name
                    );
                    if durable {
                        v.durable = Some((snap, log.len()));
                        if committed {
                            v.op.checkpoint_complete(id, false).expect("commit");
                            v.check_committed(&log);
                        }
                    }
                }
            }
            Step::Crash => {
                for v in &mut views {
                    v.op =
                        ViewOperator::new(Arc::clone(&v.plan), v.target.clone()).expect("operator");
                    let from = match &v.durable {
                        Some((snap, pos)) => {
                            v.op.restore(snap).expect("restore");
                            *pos
                        }
                        None => 0,
                    };
                    v.check_committed(&log);
                    // the source replays what the restored state has not
                    // seen, cut into batches of three rows
                    for chunk in log[from..].chunks(3) {
                        v.op.process(0, Box::new(vec![ArrowBatch(batch(chunk))]), &mut NoOutput)
                            .expect("replay");
                    }
                }
            }
        }
    }
    for v in &mut views {
        v.op.snapshot(CheckpointId(FINAL_TAG))
            .expect("final snapshot");
        v.op.checkpoint_complete(CheckpointId(FINAL_TAG), true)
            .expect("final commit");
        assert_eq!(recorded_rows(&v.target), log.len());
        assert_eq!(
            table_rows(&v.target.table),
            v.answer(&log, true),
            "the finished view {}",
            v.name
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn windowed_views_are_exact_for_their_recorded_rows_through_crashes(
        steps in prop::collection::vec(step(), 1..40)
    ) {
        run(steps);
    }
}

#[test]
fn a_window_closes_once_the_watermark_passes_its_end() {
    // clock: +3 ms per row; the fourth row lags 11 ms and is late
    let rows = vec![(0, 3, 0), (1, 3, 0), (0, 3, 0), (1, 3, 11), (0, 9, 0)];
    run(vec![
        Step::Batch(rows),
        Step::Checkpoint {
            durable: true,
            committed: true,
        },
        Step::Crash,
        Step::Batch(vec![(2, 20, 0)]),
        Step::Checkpoint {
            durable: true,
            committed: false,
        },
        Step::Crash,
        Step::Batch(vec![(2, 1, 30)]),
    ]);
}

#[test]
fn late_rows_are_counted_in_the_commit() {
    let rows: Vec<Row> = vec![(0, 0, 100 * MS), (1, 0, 90 * MS), (2, 0, 96 * MS)];
    assert_eq!(on_time(&rows).0.len(), 2, "the row 10 ms back is late");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.sync = false;
    let engine = Engine::open(cfg).expect("engine");
    let checkpoints = engine
        .create_table(checkpoint_table())
        .expect("checkpoints");
    let mut v = View::new(
        &engine,
        &checkpoints,
        "tumbled",
        "CREATE MATERIALIZED VIEW tumbled AS SELECT window_start, k, count(*) AS n, \
         sum(id) AS s FROM TUMBLE(src, ts, INTERVAL '10 milliseconds') \
         GROUP BY window_start, k EMIT ON WINDOW CLOSE",
    );
    v.op.process(0, Box::new(vec![ArrowBatch(batch(&rows))]), &mut NoOutput)
        .expect("process");
    v.op.snapshot(CheckpointId(FINAL_TAG)).expect("snapshot");
    v.op.checkpoint_complete(CheckpointId(FINAL_TAG), true)
        .expect("commit");
    assert_eq!(v.target.stats.report().late_rows, 1);
    assert_eq!(
        table_rows(&v.target.table),
        Windows::from([((90 * MS, 0), (1, 2)), ((100 * MS, 0), (1, 0))])
    );
}
