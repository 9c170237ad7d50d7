//! Planning a join of two windowed aggregates (Nexmark q8): `SELECT ...
//! FROM (SELECT ... FROM TUMBLE(s1, ...) GROUP BY ..., window_start,
//! window_end) AS a JOIN (SELECT ... FROM TUMBLE(s2, ...) GROUP BY ...) AS
//! b ON a.k = b.k AND ... EMIT ON WINDOW CLOSE`.
//!
//! Invariants (`docs/design/streams-into-tables.md`, "Joins of two
//! windowed aggregates"):
//! * **Each side is a grouped view's plan, emitting on window close**: a
//!   side emits each window's final rows once, when its own watermark
//!   passes the window's end, so both join inputs are append-only streams.
//!   Without EMIT ON WINDOW CLOSE a side would revise (retract) its rows,
//!   which the join cannot take: refused (0A000).
//! * **The join is the unbounded equi-join** (`interval_join.rs`) over the
//!   two sides' output rows, each pair emitted once, and the view is an
//!   append-only view over it (`append_op.rs`: each pair under its number).
//!   q8 itself reaches the planner as a **semi join** (DataFusion's
//!   `EliminateJoin` rewrites the inner join: no column of the auction
//!   side is selected and that side is unique on the join keys, a GROUP
//!   BY without aggregates), run by the same join in its semi mode: each
//!   person row once, when its window's auction row has been seen.
//!   No second join or window aggregate exists: the sides run
//!   `view_op.rs`'s groups (`window_stage.rs`).
//! * Anything else (outer joins, non-equi conditions, an aggregate over
//!   the join, a side that is not a windowed aggregate) is refused (0A000).

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::NullEquality;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::ExecutionPlan;

use crate::error::{Result, StreamSqlError};
use crate::interval_join::{IntervalJoin, JoinInput, JoinKind};
use crate::plan::{skip_neutral, stage_of, Stage, ViewPlan};

fn refuse(why: impl std::fmt::Display) -> StreamSqlError {
    StreamSqlError::NotSupported(format!(
        "{why} (supported join of two aggregates: an inner equi-join of two TUMBLE or HOP \
         window aggregates, each over one source, with EMIT ON WINDOW CLOSE, or the semi join \
         DataFusion makes of it when one side's columns are not selected)"
    ))
}

/// Whether `plan` is an aggregate under filters and projections.
pub(crate) fn is_aggregate(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut node = skip_neutral(plan);
    loop {
        if node.is::<AggregateExec>() {
            return true;
        }
        if stage_of(node).is_none() {
            return false;
        }
        node = match node.children().as_slice() {
            [c] => skip_neutral(c),
            _ => return false,
        };
    }
}

/// The plan of a view joining two windowed aggregates: each side planned
/// as a grouped view (by `cut`), the join over their outputs, `stages`
/// (bottom up) over the join's output, appended pair by pair.
pub(crate) fn plan(
    join: &HashJoinExec,
    stages: Vec<Stage>,
    output_schema: &SchemaRef,
    cut: fn(&Arc<dyn ExecutionPlan>) -> Result<ViewPlan>,
) -> Result<ViewPlan> {
    let kind = JoinKind::of(*join.join_type())
        .ok_or_else(|| refuse(format!("a {} join of two aggregates", join.join_type())))?;
    if join.null_equality() != NullEquality::NullEqualsNothing {
        return Err(refuse("a join on IS NOT DISTINCT FROM"));
    }
    if let Some(filter) = join.filter() {
        return Err(refuse(format!(
            "the join condition {} (only equalities)",
            filter.expression()
        )));
    }
    if stages.iter().any(|s| matches!(s, Stage::Lookup(_))) {
        return Err(refuse("a lookup join over a join of two aggregates"));
    }
    let left = cut(join.left())?;
    let right = cut(join.right())?;
    for side in [&left, &right] {
        if side.append || side.join.is_some() || side.time.window.is_none() {
            return Err(refuse(
                "a side of the join that is not a window aggregate over one source",
            ));
        }
    }
    if left.source == right.source {
        return Err(refuse(
            "a join of two aggregates of one source (both sides would need one reader)",
        ));
    }
    let (lkeys, rkeys) = crate::interval_join::join_keys(join);
    let lschema = join.left().schema();
    let rschema = join.right().schema();
    let joined_schema = kind.joined_schema(&lschema, &rschema);
    // the join reads the sides' output rows: no scan projection, no stage,
    // no time (an equi-join), no watermark of its own (the sides keep them)
    let input =
        |side: &ViewPlan, schema: SchemaRef, keys: crate::interval_join::JoinKeys| JoinInput {
            source: side.source.clone(),
            scan_projection: None,
            stages: Vec::new(),
            schema,
            keys,
            time: None,
            watermark: None,
        };
    let j = IntervalJoin {
        kind,
        left: input(&left, lschema, lkeys),
        right: input(&right, rschema, rkeys),
        interval: None,
        joined_schema,
        projection: join.projection.as_ref().map(|p| p.to_vec()),
    };
    let mut plan = crate::plan::append_join_plan(j, stages, output_schema)?;
    plan.window_inputs = vec![left, right];
    Ok(plan)
}
