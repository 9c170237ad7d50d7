//! Model test of an interval join view on a real storage engine: two
//! sources with watermarks whose times run out of order (late rows on both
//! sides), a random interval, batches of the two sources interleaved at
//! random, random checkpoints and crashes at every point of the two-phase
//! protocol; after a restore each source replays from its own restored
//! position, interleaved differently. After every commit and at the end
//! the view table must equal the join computed here by batch recomputation
//! (each side's on-time rows, every pair with equal keys and `b.ts - a.ts`
//! in the interval, then the aggregate) over the rows its checkpoint
//! covers, and after every checkpoint the join may hold only rows a future
//! on-time row could still match.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use datafusion::arrow::array::{Array, Int32Array, Int64Array};
use eddy_storage::{Engine, EngineConfig, Table};
use eddy_stream::operator::sink::FINAL_TAG;
use eddy_stream::operator::Operator;
use eddy_stream::types::CheckpointId;
use eddy_streamsql::batch::ArrowBatch;
use eddy_streamsql::plan::plan_view_with;
use eddy_streamsql::statements::{parse, StreamStatement};
use eddy_streamsql::view_op::{checkpoint_table, view_table, ViewOperator, ViewTarget};
use eddy_streamsql::watermark::WatermarkDef;
use proptest::prelude::*;

mod common;
use common::*;

#[derive(Debug, Clone)]
enum Step {
    /// Rows of source 0 (a) or 1 (b): (k, how far that source's clock
    /// advances in ms, how far the row's time lags it in ms).
    Batch(usize, Vec<(i32, i64, i64)>),
    Checkpoint {
        durable: bool,
        committed: bool,
    },
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0..2usize, prop::collection::vec((0..3i32, 0..4i64, 0..12i64), 0..6))
            .prop_map(|(side, rows)| Step::Batch(side, rows)),
        3 => (any::<bool>(), any::<bool>())
            .prop_map(|(durable, committed)| Step::Checkpoint { durable, committed }),
        1 => Just(Step::Crash),
    ]
}

/// k → (pairs, sum of a.id * 1000 + b.id).
type Answer = BTreeMap<i32, (i64, i64)>;

/// The view by batch recomputation over the two sources' prefixes.
fn answer(a: &[Row], b: &[Row], lower: i64, upper: i64) -> Answer {
    let (ka, _) = on_time(a);
    let (kb, _) = on_time(b);
    let mut out = Answer::new();
    for (ia, k, ta) in &ka {
        for (ib, kb_, tb) in &kb {
            let d = tb - ta;
            if k == kb_ && lower <= d && d <= upper {
                let g = out.entry(*k).or_default();
                g.0 += 1;
                g.1 += ia * 1000 + ib;
            }
        }
    }
    out
}

/// Rows the join may hold: those a future on-time row could match.
fn live_rows(a: &[Row], b: &[Row], lower: i64, upper: i64) -> usize {
    let (ka, wa) = on_time(a);
    let (kb, wb) = on_time(b);
    let left = ka
        .iter()
        .filter(|r| wb.is_none_or(|w| r.2 + upper >= w))
        .count();
    let right = kb
        .iter()
        .filter(|r| wa.is_none_or(|w| r.2 - lower >= w))
        .count();
    left + right
}

fn table_rows(table: &Table) -> Answer {
    let mut out = Answer::new();
    for part in table.snapshot().partitions() {
        for b in part.scan(None, false, &|_| true).expect("scan") {
            let b = b.expect("batch");
            let ks = b
                .column(0)
                .as_any()
                .downcast_ref::<Int32Array>()
                .expect("k");
            let int = |c: usize| {
                b.column(c)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .expect("bigint")
                    .clone()
            };
            let (ns, ss) = (int(1), int(2));
            for i in 0..b.num_rows() {
                let dup = out.insert(ks.value(i), (ns.value(i), ss.value(i)));
                assert!(dup.is_none(), "one row per key");
            }
        }
    }
    out
}

fn run(lower_ms: i64, upper_ms: i64, steps: Vec<Step>) {
    let (lower, upper) = (-lower_ms * MS, upper_ms * MS);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.sync = false;
    let engine = Engine::open(cfg).expect("engine");
    let checkpoints = engine
        .create_table(checkpoint_table())
        .expect("checkpoints");
    let sql = format!(
        "CREATE MATERIALIZED VIEW joined AS SELECT a.k, count(*) AS n, \
         sum(a.id * 1000 + b.id) AS s FROM a JOIN b ON a.k = b.k AND b.ts BETWEEN \
         a.ts - INTERVAL '{lower_ms} milliseconds' AND a.ts + INTERVAL '{upper_ms} \
         milliseconds' GROUP BY a.k"
    );
    let StreamStatement::CreateView { query, emit, .. } = parse(&sql).expect("parse") else {
        panic!("not a view")
    };
    let wm = |name: &str| {
        (
            name.to_string(),
            WatermarkDef {
                column: "ts".into(),
                delay_micros: DELAY,
            },
        )
    };
    let plan = Arc::new(
        plan_view_with(
            &query,
            &[("a".into(), schema()), ("b".into(), schema())],
            &[wm("a"), wm("b")],
            emit,
        )
        .expect("plan"),
    );
    let target = ViewTarget {
        table: engine
            .create_table(view_table("joined", &plan))
            .expect("view table"),
        checkpoints: Arc::clone(&checkpoints),
        engine: Arc::clone(&engine),
        job: "joined".into(),
        stats: Arc::default(),
    };
    let mut op = ViewOperator::new(Arc::clone(&plan), target.clone()).expect("operator");
    let mut logs: [Vec<Row>; 2] = [Vec::new(), Vec::new()];
    let mut clocks = [-40 * MS, -37 * MS];
    let mut next_id = 1u64;
    // checkpoint tag → the source positions it covers
    let mut positions: HashMap<u64, (usize, usize)> = HashMap::new();
    let mut durable: Option<(Vec<u8>, usize, usize)> = None;
    let check = |logs: &[Vec<Row>; 2], positions: &HashMap<u64, (usize, usize)>| {
        let (na, nb) = positions
            .get(&recorded_tag(&target))
            .copied()
            .unwrap_or((0, 0));
        assert_eq!(
            table_rows(&target.table),
            answer(&logs[0][..na], &logs[1][..nb], lower, upper),
            "over the {na} + {nb} recorded rows"
        );
    };
    for s in steps {
        match s {
            Step::Batch(side, rows) => {
                let rows: Vec<Row> = rows
                    .into_iter()
                    .map(|(k, advance, lag)| {
                        clocks[side] += advance * MS;
                        (logs[side].len() as i64, k, clocks[side] - lag * MS)
                    })
                    .collect();
                logs[side].extend_from_slice(&rows);
                op.process(
                    side,
                    Box::new(vec![ArrowBatch(batch(&rows))]),
                    &mut NoOutput,
                )
                .expect("process");
            }
            Step::Checkpoint {
                durable: keep,
                committed,
            } => {
                let id = CheckpointId(next_id);
                next_id += 1;
                positions.insert(id.0, (logs[0].len(), logs[1].len()));
                let snap = op.snapshot(id).expect("snapshot").expect("state");
                assert_eq!(
                    op.held_join_rows(),
                    live_rows(&logs[0], &logs[1], lower, upper),
                    "the join holds only rows that can still match"
                );
                if keep {
                    durable = Some((snap, logs[0].len(), logs[1].len()));
                    if committed {
                        op.checkpoint_complete(id, false).expect("commit");
                        check(&logs, &positions);
                    }
                }
            }
            Step::Crash => {
                op = ViewOperator::new(Arc::clone(&plan), target.clone()).expect("operator");
                let (fa, fb) = match &durable {
                    Some((snap, fa, fb)) => {
                        op.restore(snap).expect("restore");
                        (*fa, *fb)
                    }
                    None => (0, 0),
                };
                check(&logs, &positions);
                replay_two_sources(&mut op, &logs[0][fa..], &logs[1][fb..]);
            }
        }
    }
    positions.insert(FINAL_TAG, (logs[0].len(), logs[1].len()));
    op.snapshot(CheckpointId(FINAL_TAG))
        .expect("final snapshot");
    op.checkpoint_complete(CheckpointId(FINAL_TAG), true)
        .expect("final commit");
    assert_eq!(
        table_rows(&target.table),
        answer(&logs[0], &logs[1], lower, upper),
        "the finished view"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn an_interval_join_view_is_exact_for_its_recorded_rows_through_crashes(
        lower_ms in 0..6i64,
        upper_ms in 0..6i64,
        steps in prop::collection::vec(step(), 1..40)
    ) {
        run(lower_ms, upper_ms, steps);
    }
}

#[test]
fn a_pair_is_counted_once_whichever_row_comes_first() {
    run(
        2,
        2,
        vec![
            Step::Batch(0, vec![(0, 0, 0), (1, 1, 0)]),
            Step::Batch(1, vec![(0, 0, 0), (1, 2, 0)]),
            Step::Checkpoint {
                durable: true,
                committed: true,
            },
            Step::Batch(1, vec![(0, 1, 0)]),
            Step::Batch(0, vec![(0, 1, 0)]),
            Step::Checkpoint {
                durable: true,
                committed: false,
            },
            Step::Crash,
            Step::Batch(0, vec![(0, 30, 0)]),
            Step::Batch(1, vec![(0, 30, 0)]),
            Step::Checkpoint {
                durable: true,
                committed: true,
            },
        ],
    );
}
