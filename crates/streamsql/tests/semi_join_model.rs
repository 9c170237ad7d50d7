//! Model test of a semi join of two sources (the equi-join's semi mode,
//! `interval_join.rs`) on a real storage engine, in three views: an
//! append-only view of `a`'s rows `WHERE a.k IN (SELECT k FROM b)` (a
//! LeftSemi join), a grouped view over the same semi join, and `SELECT
//! DISTINCT b.id, b.k FROM a JOIN b ...`, which DataFusion's
//! `EliminateJoin` makes a RightSemi join (no column of `a` is used, the
//! DISTINCT ignores duplicates). Keys are few, so a kept row often
//! arrives before, and often after, its key on the other side. Batches of
//! the two sources interleave at random, with random checkpoints and
//! crashes at every point of the two-phase protocol; after a restore each
//! source replays from its own restored position, interleaved
//! differently. After every commit and at the end the view table must
//! equal the batch semi join of the prefixes its checkpoint covers (as a
//! multiset for the append-only view: no row twice, none lost), and after
//! every checkpoint the join holds exactly the kept rows still waiting for
//! their key and one row per distinct key of the other side.

use std::collections::BTreeSet;

use datafusion::arrow::array::{Array, Int32Array, Int64Array};
use eddy_storage::Table;
use eddy_streamsql::interval_join::JoinKind;
use eddy_streamsql::plan::{plan_view_with, ViewPlan};
use eddy_streamsql::statements::{parse, StreamStatement};
use eddy_streamsql::watermark::WatermarkDef;
use proptest::prelude::*;

mod common;
use common::JoinStep as Step;
use common::*;

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0..2usize, prop::collection::vec((0..6i32, 0..100i64), 0..6))
            .prop_map(|(side, rows)| Step::Batch(side, rows)),
        3 => (any::<bool>(), any::<bool>())
            .prop_map(|(durable, committed)| Step::Checkpoint { durable, committed }),
        1 => Just(Step::Crash),
    ]
}

/// The three views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    /// `SELECT a.id, a.k FROM a WHERE a.k IN (SELECT k FROM b) AND a.id %
    /// 5 <> 1`: append-only over a LeftSemi join.
    Plain,
    /// `k → (count, sum of a.id)` over the same LeftSemi join.
    Grouped,
    /// `SELECT DISTINCT b.id, b.k FROM a JOIN b ON a.k = b.k`: grouped
    /// over a RightSemi join.
    DistinctRight,
}

/// The view's rows in a comparable form: `(id, 0, k) → times stored`
/// (Plain, DistinctRight), or `(k, 0, 0) → count, (k, 1, 0) → sum`.
type Answer = JoinAnswer;

/// Rows of `a` the plain view's WHERE keeps (pushed below the join).
fn kept_by_where(id: i64) -> bool {
    id % 5 != 1
}

fn keys(rows: &[Row]) -> BTreeSet<i32> {
    rows.iter().map(|r| r.1).collect()
}

/// The view by batch recomputation over the two sources' prefixes (every
/// row: a join without a time condition drops none as late).
fn answer(a: &[Row], b: &[Row], view: View) -> Answer {
    let mut out = Answer::new();
    let (kept, other) = match view {
        View::DistinctRight => (b, keys(a)),
        _ => (a, keys(b)),
    };
    for (id, k, _) in kept {
        if !other.contains(k) {
            continue;
        }
        match view {
            View::Plain if !kept_by_where(*id) => {}
            View::Plain | View::DistinctRight => *out.entry((*id, 0, *k)).or_default() += 1,
            View::Grouped => {
                *out.entry((i64::from(*k), 0, 0)).or_default() += 1;
                *out.entry((i64::from(*k), 1, 0)).or_default() += id;
            }
        }
    }
    out
}

/// What the join holds after both prefixes: the kept rows whose key the
/// other side has not shown, and one row per distinct key of the other.
fn held(a: &[Row], b: &[Row], view: View) -> usize {
    let (kept, other) = match view {
        View::DistinctRight => (b, a),
        _ => (a, b),
    };
    let other_keys = keys(other);
    let waiting = kept
        .iter()
        .filter(|r| view != View::Plain || kept_by_where(r.0))
        .filter(|r| !other_keys.contains(&r.1))
        .count();
    waiting + other_keys.len()
}

fn table_rows(table: &Table, view: View) -> Answer {
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
                match view {
                    View::Plain | View::DistinctRight => {
                        let (id, k) = (int(0), int32(1));
                        let n = out.entry((id.value(i), 0, k.value(i))).or_default();
                        *n += 1;
                        assert!(
                            view == View::Plain || *n == 1,
                            "one row per distinct (id, k)"
                        );
                    }
                    View::Grouped => {
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
    }
    out
}

fn plan(view: View) -> ViewPlan {
    let sql = match view {
        View::Plain => {
            "CREATE MATERIALIZED VIEW joined AS SELECT a.id AS aid, a.k FROM a \
             WHERE a.k IN (SELECT k FROM b) AND a.id % 5 <> 1"
        }
        View::Grouped => {
            "CREATE MATERIALIZED VIEW joined AS SELECT a.k, count(*) AS n, sum(a.id) AS s \
             FROM a WHERE a.k IN (SELECT k FROM b) GROUP BY a.k"
        }
        View::DistinctRight => {
            "CREATE MATERIALIZED VIEW joined AS SELECT DISTINCT b.id AS bid, b.k \
             FROM a JOIN b ON a.k = b.k"
        }
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
    assert_eq!(plan.append, view == View::Plain);
    let kind = plan.join.as_ref().map(|j| j.kind);
    let want = match view {
        View::DistinctRight => JoinKind::RightSemi,
        _ => JoinKind::LeftSemi,
    };
    assert_eq!(kind, Some(want), "{view:?}");
    plan
}

impl JoinModel for View {
    fn answer(&self, a: &[Row], b: &[Row]) -> JoinAnswer {
        answer(a, b, *self)
    }
    fn table_rows(&self, table: &Table) -> JoinAnswer {
        table_rows(table, *self)
    }
    fn held(&self, a: &[Row], b: &[Row]) -> usize {
        held(a, b, *self)
    }
}

fn run(view: View, steps: Vec<Step>) {
    run_join_model(&view, plan(view), steps);
}

fn view() -> impl Strategy<Value = View> {
    prop_oneof![
        Just(View::Plain),
        Just(View::Grouped),
        Just(View::DistinctRight)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_semi_join_view_is_exact_for_its_recorded_rows_through_crashes(
        view in view(),
        steps in prop::collection::vec(step(), 1..40)
    ) {
        run(view, steps);
    }
}

/// Kept rows that wait for their key, rows matched on arrival, a second
/// arrival of a key (releasing nothing), and a replay after a crash that
/// interleaves the sides differently: each kept row stored once.
#[test]
fn each_kept_row_is_emitted_once_whichever_side_comes_first() {
    for view in [View::Plain, View::Grouped, View::DistinctRight] {
        run(
            view,
            vec![
                Step::Batch(0, vec![(0, 50), (1, 0), (0, 90), (2, 1)]),
                Step::Batch(1, vec![(0, 10), (0, 11), (3, 99)]),
                Step::Checkpoint {
                    durable: true,
                    committed: true,
                },
                Step::Batch(1, vec![(0, 0), (1, 1)]),
                Step::Batch(0, vec![(0, 2), (1, 3), (3, 4), (4, 4)]),
                Step::Batch(1, vec![(4, 5)]),
                Step::Checkpoint {
                    durable: true,
                    committed: false,
                },
                Step::Batch(0, vec![(2, 0)]),
                Step::Crash,
                Step::Batch(1, vec![(2, 7)]),
                Step::Checkpoint {
                    durable: true,
                    committed: true,
                },
                Step::Crash,
                Step::Batch(0, vec![(2, 8), (5, 8)]),
            ],
        );
    }
}
