//! Model test of a join of two sources without a time interval (an
//! unbounded inner equi-join, Nexmark q3's shape) on a real storage engine,
//! for both kinds of view over it: a grouped view (`ViewOperator`) and a
//! plain, append-only one (`AppendOperator`, each pair stored under its
//! number among the pairs). The sources have watermarks and rows far out of
//! order: the join must ignore them (no row is late for a join without a
//! time condition). Batches of the two sources interleave at random, with
//! random checkpoints and crashes at every point of the two-phase protocol;
//! after a restore each source replays from its own restored position,
//! interleaved differently (b first, two rows at a time). After every
//! commit and at the end the view table must equal the batch join of the
//! prefixes its checkpoint covers (as a multiset for the append-only view:
//! no pair twice, none lost), and after every checkpoint the join holds
//! every row of both prefixes (nothing can be expired).

use datafusion::arrow::array::{Array, Int32Array, Int64Array};
use eddy_storage::Table;
use eddy_streamsql::plan::{plan_view_with, ViewPlan};
use eddy_streamsql::statements::{parse, StreamStatement};
use eddy_streamsql::view_op::ViewTarget;
use eddy_streamsql::watermark::WatermarkDef;
use proptest::prelude::*;

mod common;
use common::JoinStep as Step;
use common::*;

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0..2usize, prop::collection::vec((0..4i32, 0..100i64), 0..6))
            .prop_map(|(side, rows)| Step::Batch(side, rows)),
        3 => (any::<bool>(), any::<bool>())
            .prop_map(|(durable, committed)| Step::Checkpoint { durable, committed }),
        1 => Just(Step::Crash),
    ]
}

/// The view's rows in a comparable form: the grouped view's
/// `k → (pairs, sum of a.id * 1000 + b.id)`, or the plain view's pairs
/// `(a.id, b.id, k) → how many times stored`.
type Answer = JoinAnswer;

/// Rows of `a` the plain view's WHERE keeps (pushed below the join).
fn kept_by_where(id: i64) -> bool {
    id % 5 != 1
}

/// The view by batch recomputation over the two sources' prefixes: every
/// row, late or not.
fn answer(a: &[Row], b: &[Row], append: bool) -> Answer {
    let mut out = Answer::new();
    for (ia, ka, _) in a {
        for (ib, kb, _) in b {
            if ka != kb {
                continue;
            }
            if append {
                if kept_by_where(*ia) {
                    *out.entry((*ia, *ib, *ka)).or_default() += 1;
                }
            } else {
                *out.entry((i64::from(*ka), 0, 0)).or_default() += 1;
                *out.entry((i64::from(*ka), 1, 0)).or_default() += ia * 1000 + ib;
            }
        }
    }
    out
}

fn table_rows(table: &Table, append: bool) -> Answer {
    let mut out = Answer::new();
    for part in table.snapshot().partitions() {
        for b in part.scan(None, false, &|_| true).expect("scan") {
            let b = b.expect("batch");
            let int = |c: usize| {
                b.column(c)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .expect("bigint")
                    .clone()
            };
            let int32 = |c: usize| {
                b.column(c)
                    .as_any()
                    .downcast_ref::<Int32Array>()
                    .expect("int")
                    .clone()
            };
            for i in 0..b.num_rows() {
                if append {
                    let (aid, bid, k) = (int(0), int(1), int32(2));
                    *out.entry((aid.value(i), bid.value(i), k.value(i)))
                        .or_default() += 1;
                } else {
                    let (k, n, s) = (int32(0), int(1), int(2));
                    let k = i64::from(k.value(i));
                    assert!(
                        out.insert((k, 0, 0), n.value(i)).is_none(),
                        "one row per key"
                    );
                    out.insert((k, 1, 0), s.value(i));
                }
            }
        }
    }
    out
}

fn plan(append: bool) -> ViewPlan {
    let sql = if append {
        "CREATE MATERIALIZED VIEW joined AS SELECT a.id AS aid, b.id AS bid, a.k \
         FROM a JOIN b ON a.k = b.k WHERE a.id % 5 <> 1"
    } else {
        "CREATE MATERIALIZED VIEW joined AS SELECT a.k, count(*) AS n, \
         sum(a.id * 1000 + b.id) AS s FROM a JOIN b ON a.k = b.k GROUP BY a.k"
    };
    let StreamStatement::CreateView { query, emit, .. } = parse(sql).expect("parse") else {
        panic!("not a view")
    };
    // watermarks the join must not use (rows arrive far out of order)
    let wm = |name: &str| {
        (
            name.to_string(),
            WatermarkDef {
                column: "ts".into(),
                delay_micros: DELAY,
            },
        )
    };
    let plan = plan_view_with(
        &query,
        &[("a".into(), schema()), ("b".into(), schema())],
        &[wm("a"), wm("b")],
        emit,
    )
    .expect("plan");
    assert_eq!(plan.append, append);
    plan
}

/// The view: plain (append-only pairs) or grouped.
#[derive(Debug)]
struct EquiView {
    append: bool,
}

impl JoinModel for EquiView {
    fn answer(&self, a: &[Row], b: &[Row]) -> JoinAnswer {
        answer(a, b, self.append)
    }
    fn table_rows(&self, table: &Table) -> JoinAnswer {
        table_rows(table, self.append)
    }
    /// Nothing expires: every row of a (the plain view's WHERE keeps some)
    /// and of b is held.
    fn held(&self, a: &[Row], b: &[Row]) -> usize {
        a.iter()
            .filter(|r| !self.append || kept_by_where(r.0))
            .count()
            + b.len()
    }
    /// The held rows reach the view's stats with a commit (a checkpoint
    /// without a change commits nothing), as of the snapshot the commit
    /// carries: rows that arrived since are not in it yet.
    fn after_commit(&self, target: &ViewTarget, commits_before: u64, held: usize) {
        let stats = target.stats.report();
        if stats.commits > commits_before {
            assert!(stats.held_rows <= held as u64);
        }
    }
}

fn run(append: bool, steps: Vec<Step>) {
    run_join_model(&EquiView { append }, plan(append), steps);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn an_equi_join_view_is_exact_for_its_recorded_rows_through_crashes(
        append in any::<bool>(),
        steps in prop::collection::vec(step(), 1..40)
    ) {
        run(append, steps);
    }
}

/// A pair committed before a crash is not stored again under another
/// number when the replay interleaves the sides differently, and a pair
/// whose rows were both uncommitted is stored once.
#[test]
fn a_replay_that_interleaves_differently_stores_each_pair_once() {
    for append in [true, false] {
        run(
            append,
            vec![
                Step::Batch(0, vec![(0, 50), (1, 0), (0, 90)]),
                Step::Batch(1, vec![(0, 10), (1, 99)]),
                Step::Checkpoint {
                    durable: true,
                    committed: true,
                },
                Step::Batch(1, vec![(0, 0), (1, 1)]),
                Step::Batch(0, vec![(0, 2), (1, 3), (0, 4)]),
                Step::Batch(1, vec![(0, 5)]),
                Step::Checkpoint {
                    durable: true,
                    committed: false,
                },
                Step::Batch(0, vec![(0, 0)]),
                Step::Crash,
                Step::Batch(1, vec![(0, 7)]),
                Step::Checkpoint {
                    durable: true,
                    committed: true,
                },
                Step::Crash,
                Step::Batch(0, vec![(1, 8)]),
            ],
        );
    }
}
