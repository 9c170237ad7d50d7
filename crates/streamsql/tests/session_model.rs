//! Model test of SESSION views on a real storage engine: a source with a
//! watermark whose times run out of order (and below zero), a random gap,
//! a session view that emits on window close and one that emits on update
//! (keyed by window_start alone, with a HAVING that deletes rows, so merged
//! and grown sessions retract their old rows), random checkpoints and
//! crashes at every point of the two-phase protocol; the source replays
//! from the restored position in batches cut differently. After every
//! commit and at the end, each view table must equal the sessions computed
//! here by batch recomputation (sort each key's on-time rows, cut where two
//! consecutive times are `gap` or more apart) over the rows its checkpoint
//! records, and after every checkpoint the operator may hold state only
//! for open sessions.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::TimestampMicrosecondArray;
use datafusion::arrow::array::{Array, Int32Array, Int64Array, RecordBatch};
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

/// The update view shows a session while it holds fewer rows than this.
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

/// (session start, k) → (session end, count, sum of ids, max id, distinct
/// ids modulo 3).
type Sessions = BTreeMap<(i64, i32), (i64, i64, i64, i64, i64)>;

/// Every session of the on-time rows, by batch recomputation: each key's
/// rows in time order, cut where consecutive times are `gap` or more apart.
fn sessions(rows: &[Row], gap: i64) -> Sessions {
    let (mut kept, _) = on_time(rows);
    kept.sort_by_key(|r| (r.1, r.2));
    let mut out = Sessions::new();
    // (start, k, last time, ids)
    let mut current: Option<(i64, i32, i64, Vec<i64>)> = None;
    let close = |c: Option<(i64, i32, i64, Vec<i64>)>, out: &mut Sessions| {
        if let Some((start, k, last, ids)) = c {
            let mods: std::collections::BTreeSet<i64> = ids.iter().map(|i| i % 3).collect();
            let value = (
                last + gap,
                ids.len() as i64,
                ids.iter().sum(),
                ids.iter().copied().max().unwrap_or(0),
                mods.len() as i64,
            );
            out.insert((start, k), value);
        }
    };
    for (id, k, t) in kept {
        current = match current {
            Some((start, ck, last, mut ids)) if ck == k && t - last < gap => {
                ids.push(id);
                Some((start, k, t, ids))
            }
            other => {
                close(other, &mut out);
                Some((t, k, t, vec![id]))
            }
        };
    }
    close(current, &mut out);
    out
}

/// The EMIT ON WINDOW CLOSE view: the sessions the watermark has closed
/// (all of them once the source has ended).
fn closed_answer(rows: &[Row], gap: i64, ended: bool) -> Sessions {
    let (_, wm) = on_time(rows);
    let mut out = sessions(rows, gap);
    out.retain(|_, v| ended || wm.is_some_and(|w| v.0 <= w));
    out
}

/// The emit-on-update view (no window_end column: reported as 0).
fn update_answer(rows: &[Row], gap: i64) -> Sessions {
    let mut out = sessions(rows, gap);
    out.retain(|_, v| v.1 < SHOWN_BELOW);
    out.into_iter()
        .map(|(key, (_, n, s, top, d))| (key, (0, n, s, top, d)))
        .collect()
}

/// Sessions still open (the state the operator may keep).
fn open_sessions(rows: &[Row], gap: i64) -> usize {
    let (_, wm) = on_time(rows);
    sessions(rows, gap)
        .values()
        .filter(|v| wm.is_none_or(|w| v.0 > w))
        .count()
}

fn ts_column(b: &RecordBatch, c: usize) -> &TimestampMicrosecondArray {
    b.column(c)
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .expect("timestamp")
}

/// The view table: (window_start, k) → (window_end or 0, n, s, top, d).
fn table_rows(table: &Table) -> Sessions {
    let def = table.def();
    let col = |name: &str| def.columns.iter().position(|c| c.name == name);
    let must = |name: &str| col(name).expect("column");
    let (ws, we, k) = (must("window_start"), col("window_end"), must("k"));
    let (n, s, top, d) = (must("n"), must("s"), must("top"), must("d"));
    let mut out = Sessions::new();
    for part in table.snapshot().partitions() {
        for b in part.scan(None, false, &|_| true).expect("scan") {
            let b = b.expect("batch");
            let starts = ts_column(&b, ws);
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
            let int = |c: usize| {
                b.column(c)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .expect("bigint")
                    .clone()
            };
            let (ss, tops, ds) = (int(s), int(top), int(d));
            for i in 0..b.num_rows() {
                let end = we.map_or(0, |c| ts_column(&b, c).value(i));
                let dup = out.insert(
                    (starts.value(i), ks.value(i)),
                    (end, ns.value(i), ss.value(i), tops.value(i), ds.value(i)),
                );
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
    closing: bool,
    gap: i64,
    target: ViewTarget,
    plan: Arc<eddy_streamsql::plan::ViewPlan>,
    op: ViewOperator,
    durable: Option<(Vec<u8>, usize)>,
}

impl View {
    fn new(engine: &Arc<Engine>, checkpoints: &Arc<Table>, closing: bool, gap: i64) -> View {
        let name = if closing { "closed" } else { "updated" };
        let sql = if closing {
            format!(
                "CREATE MATERIALIZED VIEW closed AS SELECT window_start, window_end, k, \
                 count(*) AS n, sum(id) AS s, max(id) AS top, count(DISTINCT id % 3) AS d \
                 FROM SESSION(src, ts, INTERVAL '{gap} \
                 milliseconds') GROUP BY window_start, window_end, k EMIT ON WINDOW CLOSE"
            )
        } else {
            format!(
                "CREATE MATERIALIZED VIEW updated AS SELECT k, sess.window_start, \
                 count(*) AS n, sum(id) AS s, max(id) AS top, count(DISTINCT id % 3) AS d \
                 FROM SESSION(src, ts, INTERVAL '{gap}' \
                 MILLISECOND) AS sess WHERE id >= 0 GROUP BY k, sess.window_start \
                 HAVING count(*) < {SHOWN_BELOW}"
            )
        };
        let plan = Arc::new(plan_over_src(&sql));
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
            closing,
            gap: gap * MS,
            target,
            plan,
            op,
            durable: None,
        }
    }

    fn answer(&self, rows: &[Row], ended: bool) -> Sessions {
        if self.closing {
            closed_answer(rows, self.gap, ended)
        } else {
            update_answer(rows, self.gap)
        }
    }

    fn check_committed(&self, log: &[Row]) {
        let n = recorded_rows(&self.target);
        assert_eq!(
            table_rows(&self.target.table),
            self.answer(&log[..n], false),
            "view {} over the {n} recorded rows",
            self.target.job
        );
    }
}

fn run(gap: i64, steps: Vec<Step>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.sync = false;
    let engine = Engine::open(cfg).expect("engine");
    let checkpoints = engine
        .create_table(checkpoint_table())
        .expect("checkpoints");
    let mut views = [
        View::new(&engine, &checkpoints, true, gap),
        View::new(&engine, &checkpoints, false, gap),
    ];
    let mut log: Vec<Row> = Vec::new();
    // the source's clock starts below zero: sessions cross the epoch
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
                        open_sessions(&log, v.gap),
                        "view {}: state only for open sessions",
                        v.target.job
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
            v.target.job
        );
        assert_eq!(
            v.op.group_count(),
            0,
            "the end of the source closes every session"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn session_views_are_exact_for_their_recorded_rows_through_crashes(
        gap in 1..8i64,
        steps in prop::collection::vec(step(), 1..40)
    ) {
        run(gap, steps);
    }
}

#[test]
fn a_late_row_between_two_sessions_merges_them() {
    // gap 3 ms, delay 5 ms: rows at 0 and 4 ms are two sessions; the row at
    // 2 ms (4 ms back, on time) bridges them; the update view retracts the
    // row of the session at 4 ms and writes the merged one
    run(
        3,
        vec![
            Step::Batch(vec![(0, 40, 0), (0, 4, 0)]),
            Step::Checkpoint {
                durable: true,
                committed: true,
            },
            Step::Batch(vec![(0, 0, 2)]),
            Step::Checkpoint {
                durable: true,
                committed: true,
            },
            Step::Crash,
            Step::Batch(vec![(0, 20, 0)]),
            Step::Checkpoint {
                durable: true,
                committed: true,
            },
        ],
    );
}

#[test]
fn the_merge_is_what_the_model_says() {
    let gap = 3 * MS;
    let rows: Vec<Row> = vec![(0, 0, 0), (1, 0, 4 * MS), (2, 0, 2 * MS), (3, 1, 2 * MS)];
    assert_eq!(
        sessions(&rows, gap),
        Sessions::from([
            ((0, 0), (7 * MS, 3, 3, 2, 3)),
            ((2 * MS, 1), (5 * MS, 1, 3, 3, 1))
        ])
    );
    // exactly `gap` apart: two sessions (windows are half-open)
    let rows: Vec<Row> = vec![(0, 0, 0), (1, 0, 3 * MS)];
    assert_eq!(sessions(&rows, gap).len(), 2);
}
