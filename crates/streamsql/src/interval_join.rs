//! Interval joins of two sources: `FROM s1 JOIN s2 ON s1.k = s2.k AND
//! s2.ts BETWEEN s1.ts - INTERVAL 'a' AND s1.ts + INTERVAL 'b'`, the one
//! stream-stream join a view may hold.
//!
//! Invariants the view operator relies on:
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

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, RecordBatch, TimestampMicrosecondArray,
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

/// One input of an interval join.
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
    /// The time column in `schema`.
    pub time: usize,
    /// The source's watermark: (time column in the source, delay in µs);
    /// set by the planner, which checks that `time` is that column.
    pub watermark: Option<(usize, i64)>,
}

/// An interval join: pairs with equal keys and `right.time - left.time`
/// in `[lower, upper]` (µs).
#[derive(Debug, Clone)]
pub struct IntervalJoin {
    pub left: JoinInput,
    pub right: JoinInput,
    pub lower: i64,
    pub upper: i64,
    /// The left then right columns (the join's schema before projection).
    pub joined_schema: SchemaRef,
    pub projection: Option<Vec<usize>>,
}

fn refuse(why: impl std::fmt::Display) -> StreamSqlError {
    StreamSqlError::NotSupported(format!(
        "{why} (supported stream-stream join: an inner interval join of two sources with \
         watermarks, `JOIN s2 ON s1.k = s2.k AND s2.ts BETWEEN s1.ts - INTERVAL 'a' AND \
         s1.ts + INTERVAL 'b'` on their watermark columns)"
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
        if *join.join_type() != JoinType::Inner {
            return Err(refuse(format!(
                "a {} join of two streams",
                join.join_type()
            )));
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
        let filter = join.filter().ok_or_else(|| {
            refuse("a join of two streams without a time interval (its state would grow forever)")
        })?;
        let indices = filter.column_indices();
        let mut lower: Option<i64> = None;
        let mut upper: Option<i64> = None;
        let mut times: Option<(usize, usize)> = None;
        let shape = || refuse(format!("the join condition {}", filter.expression()));
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
        let lschema = join.left().schema();
        let rschema = join.right().schema();
        for (schema, t) in [(&lschema, ltime), (&rschema, rtime)] {
            let ty = schema.fields().get(t).map(|f| f.data_type().clone());
            if !matches!(ty, Some(DataType::Timestamp(TimeUnit::Microsecond, _))) {
                return Err(refuse("an interval on columns that are not timestamps"));
            }
        }
        let (lkeys, rkeys) = join
            .on()
            .iter()
            .map(|(l, r)| (Arc::clone(l), Arc::clone(r)))
            .unzip();
        let fields: Vec<_> = lschema
            .fields()
            .iter()
            .chain(rschema.fields().iter())
            .cloned()
            .collect();
        Ok(Some(IntervalJoin {
            left: JoinInput {
                source: lscan.source.clone(),
                scan_projection: lscan.projection.clone(),
                stages: lstages,
                schema: lschema,
                keys: lkeys,
                time: ltime,
                watermark: None,
            },
            right: JoinInput {
                source: rscan.source.clone(),
                scan_projection: rscan.projection.clone(),
                stages: rstages,
                schema: rschema,
                keys: rkeys,
                time: rtime,
                watermark: None,
            },
            lower,
            upper,
            joined_schema: Arc::new(Schema::new(fields)),
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
        if origin.get(self.time).copied().flatten() != Some(wm_col) {
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
    clock: EventClock,
    converter: RowConverter,
    batches: Vec<RecordBatch>,
    /// Key (Arrow row bytes) → the held rows, in time order (a probe is a
    /// range scan over the interval).
    index: HashMap<Box<[u8]>, BTreeSet<HeldAt>>,
}

/// Both sides' clocks and held rows, as a snapshot keeps them.
#[derive(Serialize, Deserialize)]
pub(crate) struct JoinSnapshot {
    left_clock: ClockState,
    right_clock: ClockState,
    left: Option<Vec<u8>>,
    right: Option<Vec<u8>>,
}

/// The running state of an interval join.
pub(crate) struct JoinState {
    plan: Arc<IntervalJoin>,
    left: Held,
    right: Held,
}

impl Held {
    fn new(input: &JoinInput) -> Result<Held> {
        let (column, delay) = input
            .watermark
            .ok_or_else(|| StreamSqlError::Internal("join input without a watermark".into()))?;
        let fields = input
            .keys
            .iter()
            .map(|k| Ok(SortField::new(k.data_type(&input.schema)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Held {
            clock: EventClock::new(column, delay),
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
        let times = batch
            .columns()
            .get(input.time)
            .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
            .ok_or_else(|| StreamSqlError::Internal("join time is not a timestamp".into()))?;
        Ok((0..batch.num_rows())
            .map(|i| {
                let null_key = keys.iter().any(|k| k.is_null(i));
                (!null_key && times.is_valid(i))
                    .then(|| (Box::from(rows.row(i).as_ref()), times.value(i)))
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

    fn state(&self, input: &JoinInput) -> Result<Option<Vec<u8>>> {
        if self.batches.is_empty() {
            return Ok(None);
        }
        Ok(Some(to_ipc(&concat_batches(
            &input.schema,
            &self.batches,
        )?)?))
    }
}

impl JoinState {
    pub(crate) fn new(plan: Arc<IntervalJoin>) -> Result<JoinState> {
        Ok(JoinState {
            left: Held::new(&plan.left)?,
            right: Held::new(&plan.right)?,
            plan,
        })
    }

    /// Rows dropped as late by either side.
    pub(crate) fn late_rows(&self) -> u64 {
        self.left.clock.state().late_rows + self.right.clock.state().late_rows
    }

    /// Takes a batch of source `input` (0: left, 1: right): the pairs it
    /// makes with the other side's held rows (the join's output schema),
    /// then holds its rows.
    pub(crate) fn push(&mut self, input: usize, batch: RecordBatch) -> Result<RecordBatch> {
        let plan = Arc::clone(&self.plan);
        let left_side = input == 0;
        let (me, other, mine, theirs) = if left_side {
            (&mut self.left, &self.right, &plan.left, &plan.right)
        } else {
            (&mut self.right, &self.left, &plan.right, &plan.left)
        };
        let batch = me.clock.admit(batch)?;
        let mut batch = match &mine.scan_projection {
            Some(p) => batch.project(p)?,
            None => batch,
        };
        for stage in &mine.stages {
            batch = run_stage(stage, batch)?;
        }
        // pairs: (row of the new batch, (held batch, held row))
        let mut pairs: Vec<(usize, (usize, usize))> = Vec::new();
        for (i, kt) in me.keys_and_times(mine, &batch)?.into_iter().enumerate() {
            let Some((key, t)) = kt else {
                continue;
            };
            // the other side's times u with right - left in [lower, upper]
            let (from, to) = if left_side {
                (t.saturating_add(plan.lower), t.saturating_add(plan.upper))
            } else {
                (t.saturating_sub(plan.upper), t.saturating_sub(plan.lower))
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
        let side_columns = |batches: &[&RecordBatch], at: &[(usize, usize)], width: usize| {
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
                .collect::<Result<Vec<ArrayRef>>>()
        };
        let held: Vec<&RecordBatch> = other.batches.iter().collect();
        let new = side_columns(&[&batch], &new_rows, batch.num_columns())?;
        let old = if held.is_empty() {
            // no pairs: empty columns of the other side
            theirs
                .schema
                .fields()
                .iter()
                .map(|f| datafusion::arrow::array::new_empty_array(f.data_type()))
                .collect()
        } else {
            side_columns(&held, &held_rows, theirs.schema.fields().len())?
        };
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
            &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(pairs.len())),
        )?;
        me.hold(mine, batch)?;
        Ok(match &plan.projection {
            Some(p) => joined.project(p)?,
            None => joined,
        })
    }

    /// Drops the held rows no future row can match (see the module doc).
    pub(crate) fn expire(&mut self) -> Result<()> {
        let plan = Arc::clone(&self.plan);
        if let Some(w) = self.right.clock.watermark() {
            let upper = plan.upper;
            self.left
                .compact(&plan.left, |t| t.checked_add(upper).is_none_or(|e| e >= w))?;
        }
        if let Some(w) = self.left.clock.watermark() {
            let lower = plan.lower;
            self.right
                .compact(&plan.right, |t| t.checked_sub(lower).is_none_or(|e| e >= w))?;
        }
        Ok(())
    }

    /// How many rows both sides hold.
    pub(crate) fn held_rows(&self) -> usize {
        self.left
            .batches
            .iter()
            .chain(&self.right.batches)
            .map(RecordBatch::num_rows)
            .sum()
    }

    pub(crate) fn snapshot(&self) -> Result<JoinSnapshot> {
        Ok(JoinSnapshot {
            left_clock: self.left.clock.state(),
            right_clock: self.right.clock.state(),
            left: self.left.state(&self.plan.left)?,
            right: self.right.state(&self.plan.right)?,
        })
    }

    pub(crate) fn restore(&mut self, snap: JoinSnapshot) -> Result<()> {
        let plan = Arc::clone(&self.plan);
        for (held, input, clock, bytes) in [
            (&mut self.left, &plan.left, snap.left_clock, snap.left),
            (&mut self.right, &plan.right, snap.right_clock, snap.right),
        ] {
            held.clock.restore(clock);
            held.batches.clear();
            held.index.clear();
            if let Some(bytes) = bytes {
                held.hold(input, from_ipc(&bytes)?)?;
            }
        }
        Ok(())
    }
}
