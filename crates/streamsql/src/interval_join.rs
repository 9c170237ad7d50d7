//! Joins of two sources: the interval join `FROM s1 JOIN s2 ON s1.k = s2.k
//! AND s2.ts BETWEEN s1.ts - INTERVAL 'a' AND s1.ts + INTERVAL 'b'`, and
//! the unbounded equi-join `FROM s1 JOIN s2 ON s1.k = s2.k` (Nexmark q3),
//! the stream-stream joins a view may hold. The equi-join is the interval
//! join without bounds, clocks or expiry: one state, one operator.
//!
//! Invariants the view operators rely on (an equi-join keeps the second,
//! and the first and third do not apply to it: it drops no row as late,
//! needs no watermark, and holds every row it receives, since any future
//! row of the other side may match; its state grows with the input, as a
//! Flink regular join's does; the held-row count is the view's
//! `eddy_view_join_held_rows` gauge):
//! * **Each side is late-filtered by its own watermark, row by row** (as a
//!   single source is, `watermark.rs`): which rows of a side are kept
//!   depends only on that side's prefix, never on how the two sources
//!   interleave. The join's answer is the inner join of the two sides' kept
//!   rows: every pair with equal keys (NULL equals nothing) and `right.ts
//!   - left.ts` in `[lower, upper]`.
//! * **A pair is emitted once, when its later row arrives**: an arriving
//!   row is joined with the other side's held rows, then held itself. The
//!   output is append-only (an insertion per pair).
//! * **A held row is expired only when no future row can match it**: a
//!   left row at `t` matches right rows with time at most `t + upper`, and
//!   every future right row has time at least the right watermark; so it
//!   is dropped once the right watermark is above `t + upper` (a right row
//!   at `t` once the left watermark is above `t - lower`). Expiry happens
//!   at checkpoints, so the held rows and both clocks are in the view's
//!   snapshot (Arrow IPC per side): after a restore both sources replay
//!   from their checkpointed positions, in any interleaving, and every
//!   pair not yet counted is emitted exactly once.
//!
//! A **semi join** is the equi-join in a semi mode: `semi_join.rs`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions, TimestampMicrosecondArray,
};
use datafusion::arrow::compute::{concat_batches, filter_record_batch, interleave};
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::{JoinSide, JoinType, NullEquality, ScalarValue};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
use datafusion::physical_expr::split_conjunction;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::ExecutionPlan;
use serde::{Deserialize, Serialize};

use crate::batch::{from_ipc, to_ipc};
use crate::error::{Result, StreamSqlError};
use crate::plan::{skip_neutral, stage_of, Stage};
use crate::source_scan::SourceScanExec;
use crate::stages::{eval, run_stage};
use crate::watermark::{ClockState, EventClock};

#[path = "semi_join.rs"]
mod semi_join;
use semi_join::semi;

/// One input of a join of two sources.
#[derive(Debug, Clone)]
pub struct JoinInput {
    pub source: String,
    /// Source columns the scan keeps.
    pub scan_projection: Option<Vec<usize>>,
    /// Filters and projections between the scan and the join, bottom up.
    pub stages: Vec<Stage>,
    /// The stages' output (the join's input schema).
    pub schema: SchemaRef,
    /// Equi-join key expressions over `schema`.
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The time column in `schema` (an interval join; `None`: an
    /// equi-join, which reads no time).
    pub time: Option<usize>,
    /// The source's watermark: (time column in the source, delay in µs);
    /// set by the planner, which checks that `time` is that column.
    pub watermark: Option<(usize, i64)>,
}

/// Which rows a join of two inputs emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// Every pair with equal keys: the left then the right columns.
    Inner,
    /// Each left row once, when a right row with its key has been seen:
    /// the left columns only (a semi join, see the module doc).
    LeftSemi,
    /// Each right row once, when a left row with its key has been seen.
    RightSemi,
}

impl JoinKind {
    /// The kind of a join of `join_type`; `None`: a join type the stream
    /// joins do not build (outer, anti, mark joins).
    pub(crate) fn of(join_type: JoinType) -> Option<JoinKind> {
        match join_type {
            JoinType::Inner => Some(JoinKind::Inner),
            JoinType::LeftSemi => Some(JoinKind::LeftSemi),
            JoinType::RightSemi => Some(JoinKind::RightSemi),
            _ => None,
        }
    }

    /// The join's schema before its projection: both sides' columns for
    /// an inner join, the kept side's for a semi join (as DataFusion's).
    pub(crate) fn joined_schema(self, left: &Schema, right: &Schema) -> SchemaRef {
        let fields: Vec<_> = match self {
            JoinKind::Inner => left
                .fields()
                .iter()
                .chain(right.fields().iter())
                .cloned()
                .collect(),
            JoinKind::LeftSemi => left.fields().iter().cloned().collect(),
            JoinKind::RightSemi => right.fields().iter().cloned().collect(),
        };
        Arc::new(Schema::new(fields))
    }
}

/// A join of two sources: pairs with equal keys and, for an interval
/// join, `right.time - left.time` in `[lower, upper]` (µs); or a semi
/// join's rows of one side (`kind`).
#[derive(Debug, Clone)]
pub struct IntervalJoin {
    pub kind: JoinKind,
    pub left: JoinInput,
    pub right: JoinInput,
    /// `(lower, upper)` in µs; `None`: an equi-join without an interval.
    pub interval: Option<(i64, i64)>,
    /// The left then right columns, or a semi join's kept side's (the
    /// join's schema before projection).
    pub joined_schema: SchemaRef,
    pub projection: Option<Vec<usize>>,
}

fn refuse(why: impl std::fmt::Display) -> StreamSqlError {
    StreamSqlError::NotSupported(format!(
        "{why} (supported stream-stream joins: an inner equi-join of two append-only \
         sources, `JOIN s2 ON s1.k = s2.k`, optionally with a time interval on both sources' \
         watermark columns, `AND s2.ts BETWEEN s1.ts - INTERVAL 'a' AND s1.ts + INTERVAL 'b'`; \
         a semi equi-join, `WHERE s1.k IN (SELECT k FROM s2)`, without an interval)"
    ))
}

/// The source scan under `plan` through filters and projections, with
/// those stages (bottom up); `None` when something else is there.
fn input_of(plan: &Arc<dyn ExecutionPlan>) -> Option<(&SourceScanExec, Vec<Stage>)> {
    let mut stages = Vec::new();
    let mut node = skip_neutral(plan);
    loop {
        if let Some(scan) = node.downcast_ref::<SourceScanExec>() {
            stages.reverse();
            return Some((scan, stages));
        }
        stages.push(stage_of(node)?);
        node = match node.children().as_slice() {
            [c] => skip_neutral(c),
            _ => return None,
        };
    }
}

/// A constant interval's length in µs.
fn interval_of(expr: &Arc<dyn PhysicalExpr>) -> Option<i64> {
    let lit = expr.downcast_ref::<Literal>()?;
    match lit.value() {
        ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => i64::from(v.days)
            .checked_mul(86_400_000_000)?
            .checked_add(v.nanoseconds / 1000),
        ScalarValue::IntervalDayTime(Some(v)) => i64::from(v.days)
            .checked_mul(86_400_000_000)?
            .checked_add(i64::from(v.milliseconds) * 1000),
        _ => None,
    }
}

/// `column`, `column + interval` or `column - interval` of the join
/// filter: (side, column in that side's input, offset in µs).
fn linear(
    expr: &Arc<dyn PhysicalExpr>,
    indices: &[datafusion::physical_plan::joins::utils::ColumnIndex],
) -> Option<(JoinSide, usize, i64)> {
    if let Some(c) = expr.downcast_ref::<Column>() {
        let ci = indices.get(c.index())?;
        return Some((ci.side, ci.index, 0));
    }
    let b = expr.downcast_ref::<BinaryExpr>()?;
    let (side, index, offset) = linear(b.left(), indices)?;
    let by = interval_of(b.right())?;
    let by = match b.op() {
        Operator::Plus => by,
        Operator::Minus => by.checked_neg()?,
        _ => return None,
    };
    Some((side, index, offset.checked_add(by)?))
}

impl IntervalJoin {
    /// The interval join `join` plans, if both its inputs are sources
    /// (`None`: one is not, so it is no stream-stream join); a
    /// stream-stream join of any other form is refused.
    pub fn of(join: &HashJoinExec) -> Result<Option<IntervalJoin>> {
        let (Some((lscan, lstages)), Some((rscan, rstages))) =
            (input_of(join.left()), input_of(join.right()))
        else {
            return Ok(None);
        };
        let kind = JoinKind::of(*join.join_type())
            .ok_or_else(|| refuse(format!("a {} join of two streams", join.join_type())))?;
        if lscan.source == rscan.source {
            return Err(refuse(
                "a join of a source with itself (both sides would need one reader)",
            ));
        }
        if join.null_equality() != NullEquality::NullEqualsNothing {
            return Err(refuse("a join on IS NOT DISTINCT FROM"));
        }
        for scan in [lscan, rscan] {
            if scan.window.is_some() {
                return Err(refuse("a window in a join of two streams"));
            }
            if scan.limit.is_some() {
                return Err(refuse("LIMIT"));
            }
        }
        let (lkeys, rkeys) = join_keys(join);
        let lschema = join.left().schema();
        let rschema = join.right().schema();
        let joined_schema = kind.joined_schema(&lschema, &rschema);
        let input = |scan: &SourceScanExec,
                     stages: Vec<Stage>,
                     schema: SchemaRef,
                     keys: JoinKeys,
                     time: Option<usize>| JoinInput {
            source: scan.source.clone(),
            scan_projection: scan.projection.clone(),
            stages,
            schema,
            keys,
            time,
            watermark: None,
        };
        let Some(filter) = join.filter() else {
            // an equi-join: every pair with equal keys, state unbounded
            return Ok(Some(IntervalJoin {
                kind,
                left: input(lscan, lstages, lschema, lkeys, None),
                right: input(rscan, rstages, rschema, rkeys, None),
                interval: None,
                joined_schema,
                projection: join.projection.as_ref().map(|p| p.to_vec()),
            }));
        };
        if kind != JoinKind::Inner {
            return Err(refuse(format!(
                "a {} join with a condition other than equalities",
                join.join_type()
            )));
        }
        let indices = filter.column_indices();
        let mut lower: Option<i64> = None;
        let mut upper: Option<i64> = None;
        let mut times: Option<(usize, usize)> = None;
        let shape = || {
            refuse(format!(
                "the join condition {} (only equalities and a time interval)",
                filter.expression()
            ))
        };
        for c in split_conjunction(filter.expression()) {
            let b = c.downcast_ref::<BinaryExpr>().ok_or_else(shape)?;
            let (sa, ia, oa) = linear(b.left(), indices).ok_or_else(shape)?;
            let (sb, ib, ob) = linear(b.right(), indices).ok_or_else(shape)?;
            // d = right - left, compared with a constant
            let (op, bound, cols) = match (sa, sb) {
                (JoinSide::Right, JoinSide::Left) => (*b.op(), ob.checked_sub(oa), (ib, ia)),
                (JoinSide::Left, JoinSide::Right) => {
                    let flipped = b.op().swap().ok_or_else(shape)?;
                    (flipped, oa.checked_sub(ob), (ia, ib))
                }
                _ => return Err(shape()),
            };
            let bound = bound.ok_or_else(shape)?;
            if times.is_some_and(|t| t != cols) {
                return Err(refuse("an interval on more than one pair of time columns"));
            }
            times = Some(cols);
            match op {
                Operator::GtEq => lower = Some(lower.map_or(bound, |l| l.max(bound))),
                Operator::Gt => {
                    let b = bound.checked_add(1).ok_or_else(shape)?;
                    lower = Some(lower.map_or(b, |l| l.max(b)));
                }
                Operator::LtEq => upper = Some(upper.map_or(bound, |u| u.min(bound))),
                Operator::Lt => {
                    let b = bound.checked_sub(1).ok_or_else(shape)?;
                    upper = Some(upper.map_or(b, |u| u.min(b)));
                }
                _ => return Err(shape()),
            }
        }
        let (Some(lower), Some(upper), Some((ltime, rtime))) = (lower, upper, times) else {
            return Err(refuse(
                "a join of two streams without both bounds of a time interval",
            ));
        };
        if lower > upper {
            return Err(StreamSqlError::InvalidOption(format!(
                "the join's time interval is empty ({lower} µs to {upper} µs)"
            )));
        }
        for (schema, t) in [(&lschema, ltime), (&rschema, rtime)] {
            let ty = schema.fields().get(t).map(|f| f.data_type().clone());
            if !matches!(ty, Some(DataType::Timestamp(TimeUnit::Microsecond, _))) {
                return Err(refuse("an interval on columns that are not timestamps"));
            }
        }
        Ok(Some(IntervalJoin {
            kind,
            left: input(lscan, lstages, lschema, lkeys, Some(ltime)),
            right: input(rscan, rstages, rschema, rkeys, Some(rtime)),
            interval: Some((lower, upper)),
            joined_schema,
            projection: join.projection.as_ref().map(|p| p.to_vec()),
        }))
    }
}

impl JoinInput {
    /// Checks that the time column is the source's watermark column and
    /// records the watermark.
    pub(crate) fn bind_watermark(
        &mut self,
        source_schema: &Schema,
        watermark: Option<(String, i64)>,
    ) -> Result<()> {
        let Some((column, delay)) = watermark else {
            return Err(refuse(format!(
                "source \"{}\" has no WATERMARK: an interval join needs one on both sides",
                self.source
            )));
        };
        let (wm_col, _) = source_schema.column_with_name(&column).ok_or_else(|| {
            StreamSqlError::State(format!(
                "watermark column \"{column}\" is not in the source"
            ))
        })?;
        let origin = crate::stages::trace_origins(
            match &self.scan_projection {
                Some(p) => p.iter().map(|i| Some(*i)).collect(),
                None => (0..source_schema.fields().len()).map(Some).collect(),
            },
            &self.stages,
        );
        let time = self
            .time
            .ok_or_else(|| StreamSqlError::Internal("an equi-join has no time column".into()))?;
        if origin.get(time).copied().flatten() != Some(wm_col) {
            return Err(refuse(format!(
                "an interval on a column of \"{}\" other than its WATERMARK column",
                self.source
            )));
        }
        self.watermark = Some((wm_col, delay));
        Ok(())
    }
}

/// A held row by time: (time, batch, row).
type HeldAt = (i64, usize, usize);

/// A row's key (Arrow row bytes) and time; `None` when it can match
/// nothing (a NULL key or time).
type KeyTime = Option<(Box<[u8]>, i64)>;

/// The held rows of one side.
struct Held {
    /// The side's watermark (an interval join; an equi-join drops no row).
    clock: Option<EventClock>,
    converter: RowConverter,
    batches: Vec<RecordBatch>,
    /// Key (Arrow row bytes) → the held rows, in time order (a probe is a
    /// range scan over the interval).
    index: HashMap<Box<[u8]>, BTreeSet<HeldAt>>,
}

/// Both sides' clocks and held rows, as a snapshot keeps them.
#[derive(Serialize, Deserialize)]
pub(crate) struct JoinSnapshot {
    /// `None` for an equi-join (no clocks).
    #[serde(default)]
    left_clock: Option<ClockState>,
    #[serde(default)]
    right_clock: Option<ClockState>,
    left: Option<Vec<u8>>,
    right: Option<Vec<u8>>,
}

/// The running state of a join of two sources.
pub(crate) struct JoinState {
    plan: Arc<IntervalJoin>,
    left: Held,
    right: Held,
}

impl Held {
    fn new(input: &JoinInput, timed: bool) -> Result<Held> {
        let clock = match (timed, input.watermark) {
            (true, Some((column, delay))) => Some(EventClock::new(column, delay)),
            (true, None) => {
                return Err(StreamSqlError::Internal(
                    "interval join input without a watermark".into(),
                ))
            }
            (false, _) => None,
        };
        let fields = input
            .keys
            .iter()
            .map(|k| Ok(SortField::new(k.data_type(&input.schema)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Held {
            clock,
            converter: RowConverter::new(fields)?,
            batches: Vec::new(),
            index: HashMap::new(),
        })
    }

    /// Each row's key (`None`: a NULL in it, matching nothing) and time.
    fn keys_and_times(&self, input: &JoinInput, batch: &RecordBatch) -> Result<Vec<KeyTime>> {
        let keys = input
            .keys
            .iter()
            .map(|k| eval(k, batch))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let rows = self.converter.convert_columns(&keys)?;
        let times = match input.time {
            Some(t) => Some(
                batch
                    .columns()
                    .get(t)
                    .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
                    .ok_or_else(|| {
                        StreamSqlError::Internal("join time is not a timestamp".into())
                    })?,
            ),
            None => None,
        };
        // an equi-join's rows all sit at time 0 (it reads no time)
        Ok((0..batch.num_rows())
            .map(|i| {
                let null_key = keys.iter().any(|k| k.is_null(i));
                let time = match times {
                    Some(ts) => ts.is_valid(i).then(|| ts.value(i)),
                    None => Some(0),
                };
                match time {
                    Some(t) if !null_key => Some((Box::from(rows.row(i).as_ref()), t)),
                    _ => None,
                }
            })
            .collect())
    }

    fn hold(&mut self, input: &JoinInput, batch: RecordBatch) -> Result<()> {
        let b = self.batches.len();
        for (i, kt) in self.keys_and_times(input, &batch)?.into_iter().enumerate() {
            if let Some((key, t)) = kt {
                self.index.entry(key).or_default().insert((t, b, i));
            }
        }
        self.batches.push(batch);
        Ok(())
    }

    /// Keeps only the rows `live(time)` says, in one batch.
    fn compact(&mut self, input: &JoinInput, live: impl Fn(i64) -> bool) -> Result<()> {
        if self.batches.is_empty() {
            return Ok(());
        }
        let all = concat_batches(&input.schema, &self.batches)?;
        let times = self.keys_and_times(input, &all)?;
        let mask: BooleanArray = times
            .iter()
            .map(|kt| Some(kt.as_ref().is_some_and(|(_, t)| live(*t))))
            .collect();
        let kept = filter_record_batch(&all, &mask)?;
        self.batches.clear();
        self.index.clear();
        if kept.num_rows() > 0 {
            self.hold(input, kept)?;
        }
        Ok(())
    }

    /// The held rows as IPC bytes: all of them, or (a semi join, whose
    /// released rows stay in `batches` until reclaimed) only the indexed.
    fn state(&self, input: &JoinInput, indexed_only: bool) -> Result<Option<Vec<u8>>> {
        if indexed_only {
            return self.indexed_rows(input)?.map(|b| to_ipc(&b)).transpose();
        }
        if self.batches.is_empty() {
            return Ok(None);
        }
        Ok(Some(to_ipc(&concat_batches(
            &input.schema,
            &self.batches,
        )?)?))
    }

    /// The rows at `at` ((held batch, row)) as columns of `input`'s schema.
    fn rows_at(&self, input: &JoinInput, at: &[(usize, usize)]) -> Result<Vec<ArrayRef>> {
        if self.batches.is_empty() {
            return Ok(empty_columns(&input.schema));
        }
        let held: Vec<&RecordBatch> = self.batches.iter().collect();
        gather(&held, at, input.schema.fields().len())
    }
}

/// Empty columns of `schema`.
fn empty_columns(schema: &Schema) -> Vec<ArrayRef> {
    schema
        .fields()
        .iter()
        .map(|f| datafusion::arrow::array::new_empty_array(f.data_type()))
        .collect()
}

/// The first `width` columns of the rows `at` ((batch, row)) of `batches`.
fn gather(batches: &[&RecordBatch], at: &[(usize, usize)], width: usize) -> Result<Vec<ArrayRef>> {
    (0..width)
        .map(|c| {
            let arrays = batches
                .iter()
                .map(|b| b.columns().get(c).map(|a| a.as_ref() as &dyn Array))
                .collect::<Option<Vec<&dyn Array>>>()
                .ok_or_else(|| {
                    StreamSqlError::Internal("a held join row of another shape".into())
                })?;
            Ok(interleave(&arrays, at)?)
        })
        .collect()
}

impl JoinState {
    pub(crate) fn new(plan: Arc<IntervalJoin>) -> Result<JoinState> {
        let timed = plan.interval.is_some();
        Ok(JoinState {
            left: Held::new(&plan.left, timed)?,
            right: Held::new(&plan.right, timed)?,
            plan,
        })
    }

    /// Rows dropped as late by either side.
    pub(crate) fn late_rows(&self) -> u64 {
        [&self.left, &self.right]
            .iter()
            .filter_map(|h| h.clock.as_ref())
            .map(|c| c.state().late_rows)
            .sum()
    }

    /// Takes a batch of source `input` (0: left, 1: right): the pairs it
    /// makes with the other side's held rows (the join's output schema),
    /// then holds its rows.
    pub(crate) fn push(&mut self, input: usize, batch: RecordBatch) -> Result<RecordBatch> {
        let plan = Arc::clone(&self.plan);
        let left_side = input == 0;
        let (me, other, mine, theirs) = if left_side {
            (&mut self.left, &mut self.right, &plan.left, &plan.right)
        } else {
            (&mut self.right, &mut self.left, &plan.right, &plan.left)
        };
        let batch = match &mut me.clock {
            Some(clock) => clock.admit(batch)?,
            None => batch,
        };
        let mut batch = match &mine.scan_projection {
            Some(p) => batch.project(p)?,
            None => batch,
        };
        for stage in &mine.stages {
            batch = run_stage(stage, batch)?;
        }
        if plan.kind != JoinKind::Inner {
            let kept_is_me = (plan.kind == JoinKind::LeftSemi) == left_side;
            let (columns, rows) = semi((me, mine), (other, theirs), kept_is_me, &batch)?;
            let joined = RecordBatch::try_new_with_options(
                Arc::clone(&plan.joined_schema),
                columns,
                &RecordBatchOptions::new().with_row_count(Some(rows)),
            )?;
            return Ok(match &plan.projection {
                Some(p) => joined.project(p)?,
                None => joined,
            });
        }
        // pairs: (row of the new batch, (held batch, held row))
        let mut pairs: Vec<(usize, (usize, usize))> = Vec::new();
        for (i, kt) in me.keys_and_times(mine, &batch)?.into_iter().enumerate() {
            let Some((key, t)) = kt else {
                continue;
            };
            // the other side's times u with right - left in [lower, upper]
            // (an equi-join: every time, all held rows are at 0)
            let (from, to) = match plan.interval {
                Some((lower, upper)) if left_side => {
                    (t.saturating_add(lower), t.saturating_add(upper))
                }
                Some((lower, upper)) => (t.saturating_sub(upper), t.saturating_sub(lower)),
                None => (i64::MIN, i64::MAX),
            };
            let Some(held) = other.index.get(&key) else {
                continue;
            };
            for (_, b, r) in held.range((from, 0, 0)..=(to, usize::MAX, usize::MAX)) {
                pairs.push((i, (*b, *r)));
            }
        }
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(plan.joined_schema.fields().len());
        let new_rows: Vec<(usize, usize)> = pairs.iter().map(|(i, _)| (0, *i)).collect();
        let held_rows: Vec<(usize, usize)> = pairs.iter().map(|(_, h)| *h).collect();
        let new = gather(&[&batch], &new_rows, batch.num_columns())?;
        // (no held rows: no pairs, empty columns of the other side)
        let old = other.rows_at(theirs, &held_rows)?;
        if left_side {
            columns.extend(new);
            columns.extend(old);
        } else {
            columns.extend(old);
            columns.extend(new);
        }
        let joined = RecordBatch::try_new_with_options(
            Arc::clone(&plan.joined_schema),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(pairs.len())),
        )?;
        me.hold(mine, batch)?;
        Ok(match &plan.projection {
            Some(p) => joined.project(p)?,
            None => joined,
        })
    }

    /// Drops the held rows no future row can match (see the module doc).
    /// An equi-join expires nothing: any future row may match; a semi
    /// join frees the rows it has released.
    pub(crate) fn expire(&mut self) -> Result<()> {
        let plan = Arc::clone(&self.plan);
        if plan.kind != JoinKind::Inner {
            self.left.reclaim(&plan.left)?;
            return self.right.reclaim(&plan.right);
        }
        let Some((lower, upper)) = plan.interval else {
            // nothing to drop; not compacted either (that would copy the
            // whole, ever growing state at every checkpoint: the snapshot
            // concatenates it once, and a restore holds it as one batch)
            return Ok(());
        };
        if let Some(w) = self.right.clock.as_ref().and_then(EventClock::watermark) {
            self.left
                .compact(&plan.left, |t| t.checked_add(upper).is_none_or(|e| e >= w))?;
        }
        if let Some(w) = self.left.clock.as_ref().and_then(EventClock::watermark) {
            self.right
                .compact(&plan.right, |t| t.checked_sub(lower).is_none_or(|e| e >= w))?;
        }
        Ok(())
    }

    /// How many rows both sides hold (a semi join: that may still be
    /// emitted or match, not the released rows not yet reclaimed).
    pub(crate) fn held_rows(&self) -> usize {
        if self.plan.kind != JoinKind::Inner {
            return self.left.indexed() + self.right.indexed();
        }
        self.left
            .batches
            .iter()
            .chain(&self.right.batches)
            .map(RecordBatch::num_rows)
            .sum()
    }

    pub(crate) fn snapshot(&self) -> Result<JoinSnapshot> {
        let semi = self.plan.kind != JoinKind::Inner;
        Ok(JoinSnapshot {
            left_clock: self.left.clock.as_ref().map(EventClock::state),
            right_clock: self.right.clock.as_ref().map(EventClock::state),
            left: self.left.state(&self.plan.left, semi)?,
            right: self.right.state(&self.plan.right, semi)?,
        })
    }

    pub(crate) fn restore(&mut self, snap: JoinSnapshot) -> Result<()> {
        let plan = Arc::clone(&self.plan);
        for (held, input, clock, bytes) in [
            (&mut self.left, &plan.left, snap.left_clock, snap.left),
            (&mut self.right, &plan.right, snap.right_clock, snap.right),
        ] {
            match (&mut held.clock, clock) {
                (Some(c), Some(state)) => c.restore(state),
                (Some(_), None) => {
                    return Err(StreamSqlError::State(
                        "the checkpoint has no clock for an interval join's side".into(),
                    ))
                }
                (None, _) => {}
            }
            held.batches.clear();
            held.index.clear();
            if let Some(bytes) = bytes {
                held.hold(input, from_ipc(&bytes)?)?;
            }
        }
        Ok(())
    }
}

/// One side's key expressions of an equi-join.
pub(crate) type JoinKeys = Vec<Arc<dyn PhysicalExpr>>;

/// The equi-join's key expressions, left side and right side.
pub(crate) fn join_keys(join: &HashJoinExec) -> (JoinKeys, JoinKeys) {
    join.on()
        .iter()
        .map(|(l, r)| (Arc::clone(l), Arc::clone(r)))
        .unzip()
}
