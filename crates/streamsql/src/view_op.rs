//! The operator that maintains one materialized view and commits it.
//!
//! Before touching this file, read the invariants in the crate doc and
//! `docs/design/streams-into-tables.md`. In short:
//! * `process` runs the view's pre stages on each source batch, finds each
//!   row's group (Arrow's row format of the GROUP BY values) and feeds the
//!   group's DataFusion accumulators; the group is marked dirty.
//! * `snapshot(n)` turns the dirty groups into the view's new rows (the
//!   accumulators' values through the post stages: a row HAVING rejects is
//!   a delete) and keeps them as checkpoint `n`'s pending change; the
//!   snapshot holds every group's accumulator state and the pending
//!   changes not yet committed.
//! * `checkpoint_complete(n)` commits each pending change up to `n` with the
//!   row `(job, n, source rows)` of `eddy_stream_checkpoints` in one
//!   `Engine::commit`. A change whose tag is not above the committed
//!   checkpoint is skipped, so commits repeated after a restore are no-ops.
//! * Event time (`watermark.rs`, `window.rs`): over a source with a
//!   watermark, late rows are dropped before the pre stages; a windowed
//!   view assigns windows next. A group whose window has closed (watermark
//!   at or past its end) can receive no more rows: at `snapshot(n)` its
//!   last change is taken first (emit on update: if dirty; EMIT ON WINDOW
//!   CLOSE: its only row), then its state is dropped, so state holds only
//!   open windows. The watermark is in the snapshot with the groups; the
//!   final checkpoint (the source ended) closes every window.
//! * A SESSION view keeps no groups: its rows go to `Sessions`
//!   (`session.rs`), which merges them into per-key sessions; at
//!   `snapshot(n)` the changed (or closed) sessions become rows and the
//!   rows of bounds that no longer exist become deletes.
//! * An interval-join view reads two sources (input 0 the left, 1 the
//!   right): `JoinState` (`interval_join.rs`) late-filters each side by its
//!   own clock, emits the pairs a batch makes with the other side's held
//!   rows into the pre stages, and expires held rows at `snapshot(n)`; its
//!   clocks and held rows are in the snapshot. A join without an interval
//!   (an equi-join) has no clocks and expires nothing.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Accumulator;
use eddy_common::{ColumnType, Row, Value};
use eddy_storage::{Engine, OnConflict, Table, WriteOp};
use eddy_stream::operator::sink::FINAL_TAG;
use eddy_stream::operator::{Emitter, Operator};
use eddy_stream::types::{downcast, AnyBatch, CheckpointId};
use serde::{Deserialize, Serialize};

use crate::batch::{from_ipc, to_ipc, ArrowBatch};
use crate::error::{Result, StreamSqlError};
use crate::interval_join::{JoinSnapshot, JoinState};
use crate::plan::ViewPlan;
use crate::session::Sessions;
use crate::stages::{eval, run_masked, run_stage};
pub(crate) use crate::view_commit::commit_change;
pub use crate::view_stats::{ViewStats, ViewStatsReport};
pub use crate::view_tables::{
    checkpoint_table, committed_checkpoint, position_column, view_table, CHECKPOINT_TABLE,
};
use crate::watermark::{ClockState, EventClock};
use crate::window::{assign, EmitMode};
use eddy_sql::SqlError;

#[path = "window_stage.rs"]
mod window_stage;
pub(crate) use window_stage::StageSnapshot;

/// Changes of one checkpoint, not yet committed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) tag: u64,
    pub(crate) source_rows: u64,
    pub(crate) upserts: Vec<Row>,
    /// Primary-key values of rows to delete.
    pub(crate) deletes: Vec<Vec<Value>>,
    /// (arrival time in µs since the epoch, source rows) of the batches
    /// this change covers, for the freshness figure.
    #[serde(default)]
    pub(crate) arrivals: Vec<(i64, u64)>,
    /// Source rows dropped as late up to this change.
    #[serde(default)]
    pub(crate) late_rows: u64,
    /// The change-log source's cut this change reaches (see
    /// `changelog.rs`), recorded in the checkpoint row.
    #[serde(default)]
    pub(crate) position: Option<String>,
    /// Source rows a join of two sources holds after this change (its
    /// state; the `eddy_view_join_held_rows` gauge).
    #[serde(default)]
    pub(crate) held_rows: u64,
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    source_rows: u64,
    pending: Vec<Pending>,
    /// Group columns then every aggregate's state columns (Arrow IPC);
    /// `None` when there are no groups yet.
    groups: Option<Vec<u8>>,
    /// The watermark's clock (sources with a watermark; absent in
    /// checkpoints written before watermarks existed).
    #[serde(default)]
    clock: Option<ClockState>,
    /// The change-log source's cut at this snapshot.
    #[serde(default)]
    position: Option<String>,
    /// A SESSION view's sessions (`session.rs`, Arrow IPC).
    #[serde(default)]
    sessions: Option<Vec<u8>>,
    /// An interval join's clocks and held rows (`interval_join.rs`).
    #[serde(default)]
    join: Option<JoinSnapshot>,
}

struct Group {
    accumulators: Vec<Box<dyn Accumulator>>,
    dirty: bool,
    /// The end of the group's window, when the view tracks closed windows.
    window_end: Option<i64>,
    /// Live rows (insertions minus retractions), over a change-log source:
    /// a group at zero is deleted from the view.
    rows: i64,
}

/// Where a view commits: the engine, its table and the checkpoint table.
#[derive(Clone)]
pub struct ViewTarget {
    pub engine: Arc<Engine>,
    pub job: String,
    pub table: Arc<Table>,
    pub checkpoints: Arc<Table>,
    pub stats: Arc<ViewStats>,
}

/// Maintains one materialized view (parallelism 1).
pub struct ViewOperator {
    plan: Arc<ViewPlan>,
    target: ViewTarget,
    types: Vec<ColumnType>,
    converter: RowConverter,
    /// Group key (Arrow row bytes) → index into `groups`.
    index: HashMap<Box<[u8]>, usize>,
    keys: Vec<Box<[u8]>>,
    groups: Vec<Group>,
    dirty: Vec<usize>,
    source_rows: u64,
    pending: Vec<Pending>,
    /// Arrivals since the last snapshot (see `Pending::arrivals`).
    arrivals: Vec<(i64, u64)>,
    /// The source's watermark, if it has one.
    clock: Option<EventClock>,
    /// The change-log source's latest cut (from its batches' metadata).
    position: Option<String>,
    /// A SESSION view's sessions (its groups stay empty).
    sessions: Option<Sessions>,
    /// An interval join's state: input 0 is its left source, 1 its right.
    join: Option<JoinState>,
    /// Fault injection for tests: panic once this many source rows have
    /// been seen (see [`INJECT_PANIC_ENV`]).
    panic_at_rows: Option<u64>,
}

/// Environment variable that makes every view job's first attempt panic
/// after that many source rows (fault-injection tests of restart and
/// exactly-once; never set in production).
pub const INJECT_PANIC_ENV: &str = "EDDY_FAULT_VIEW_PANIC_AT_ROWS";

/// A key's values as bytes to compare.
fn key_json(key: &[Value]) -> Result<Vec<u8>> {
    serde_json::to_vec(key).map_err(|e| StreamSqlError::Internal(format!("a view key: {e}")))
}

pub(crate) fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

impl ViewOperator {
    /// An operator with no groups.
    pub fn new(plan: Arc<ViewPlan>, target: ViewTarget) -> Result<ViewOperator> {
        let types = plan.columns.iter().map(|c| c.ty).collect();
        let clock = plan
            .time
            .watermark
            .map(|(column, delay)| EventClock::new(column, delay));
        let fields = plan
            .aggregate_schema
            .fields()
            .iter()
            .take(plan.group_exprs.len())
            .map(|f| SortField::new(f.data_type().clone()))
            .collect();
        let sessions = match plan.time.session {
            Some(key) => Some(Sessions::new(
                key,
                plan.aggregates.clone(),
                &plan.aggregate_schema,
                plan.group_exprs.len(),
            )?),
            None => None,
        };
        let join = match &plan.join {
            Some(j) => Some(JoinState::new(Arc::clone(j))?),
            None => None,
        };
        Ok(ViewOperator {
            sessions,
            join,
            converter: RowConverter::new(fields)?,
            plan,
            target,
            types,
            index: HashMap::new(),
            keys: Vec::new(),
            groups: Vec::new(),
            dirty: Vec::new(),
            source_rows: 0,
            pending: Vec::new(),
            arrivals: Vec::new(),
            clock,
            position: None,
            panic_at_rows: None,
        })
    }

    /// How many groups the operator holds state for (tests: closed
    /// windows must not be among them).
    pub fn group_count(&self) -> usize {
        self.groups.len() + self.sessions.as_ref().map_or(0, Sessions::len)
    }

    /// How many source rows an interval join holds (tests: expired rows
    /// must not be among them).
    pub fn held_join_rows(&self) -> usize {
        self.join.as_ref().map_or(0, JoinState::held_rows)
    }

    /// Arms the injected panic (tests; see [`INJECT_PANIC_ENV`]).
    pub fn panic_at_rows(mut self, rows: Option<u64>) -> Self {
        self.panic_at_rows = rows;
        self
    }

    fn new_group(&mut self, key: Box<[u8]>, window_end: Option<i64>) -> Result<usize> {
        let retractions = self.plan.retractions;
        let accumulators = self
            .plan
            .aggregates
            .iter()
            .map(|a| {
                if retractions {
                    a.create_sliding_accumulator()
                } else {
                    a.create_accumulator()
                }
            })
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let i = self.groups.len();
        self.groups.push(Group {
            accumulators,
            dirty: false,
            window_end,
            rows: 0,
        });
        self.index.insert(key.clone(), i);
        self.keys.push(key);
        Ok(i)
    }

    fn mark_dirty(&mut self, g: usize) {
        if let Some(group) = self.groups.get_mut(g) {
            if !group.dirty {
                group.dirty = true;
                self.dirty.push(g);
            }
        }
    }

    /// Feeds one batch of source `input` into the groups.
    fn add(&mut self, input: usize, batch: RecordBatch) -> Result<()> {
        let rows = batch.num_rows() as u64;
        self.source_rows += rows;
        if self.panic_at_rows.is_some_and(|n| self.source_rows >= n) {
            // deliberate: the stream runtime must contain it and restart
            panic!(
                "injected fault ({INJECT_PANIC_ENV}) at {} source rows",
                self.source_rows
            );
        }
        // batches arriving in the same millisecond share one entry
        let now = now_micros();
        match self.arrivals.last_mut() {
            Some((at, n)) if now - *at < 1000 => *n += rows,
            _ => self.arrivals.push((now, rows)),
        }
        if let Some(join) = &mut self.join {
            let joined = join.push(input, batch)?;
            return self.aggregate(joined, false);
        }
        if self.plan.retractions {
            return self.add_changes(batch);
        }
        // a Kafka source's batch carries the offsets after it
        if let Some(position) = batch
            .schema()
            .metadata()
            .get(crate::changelog::CUT_METADATA)
        {
            self.position = Some(position.clone());
        }
        self.feed(batch, false)
    }

    /// A change-log batch: its retractions (first rows, sign -1), then its
    /// insertions.
    fn add_changes(&mut self, batch: RecordBatch) -> Result<()> {
        if let Some(cut) = batch
            .schema()
            .metadata()
            .get(crate::changelog::CUT_METADATA)
        {
            self.position = Some(cut.clone());
        }
        let width = batch.num_columns().saturating_sub(1);
        let signs = batch
            .column(width)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Int8Array>()
            .ok_or_else(|| StreamSqlError::Internal("change-log batch without its sign".into()))?;
        let retracted = signs.values().iter().take_while(|s| **s < 0).count();
        let columns: Vec<usize> = (0..width).collect();
        let rows = batch.project(&columns)?;
        self.feed(rows.slice(0, retracted), true)?;
        self.feed(rows.slice(retracted, rows.num_rows() - retracted), false)
    }

    /// Runs the pipeline on `batch` and adds its rows to (or, with
    /// `retract`, removes them from) their groups.
    fn feed(&mut self, batch: RecordBatch, retract: bool) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let plan = Arc::clone(&self.plan);
        let batch = match &mut self.clock {
            Some(clock) => clock.admit(batch)?,
            None => batch,
        };
        let batch = match &plan.time.window {
            Some((spec, schema)) => assign(spec, &batch, schema)?,
            None => batch,
        };
        let batch = match &plan.scan_projection {
            Some(p) => batch.project(p)?,
            None => batch,
        };
        self.aggregate(batch, retract)
    }

    /// Runs the pre stages on `batch` (the scan's or the join's output)
    /// and adds its rows to (or, with `retract`, removes them from) their
    /// groups.
    fn aggregate(&mut self, mut batch: RecordBatch, retract: bool) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let plan = Arc::clone(&self.plan);
        for stage in &plan.pre {
            batch = run_stage(stage, batch)?;
        }
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let keys = plan
            .group_exprs
            .iter()
            .map(|e| eval(e, &batch))
            .collect::<Result<Vec<_>>>()?;
        if let Some(sessions) = &mut self.sessions {
            let args: Vec<Vec<ArrayRef>> = plan
                .aggregates
                .iter()
                .map(|a| a.expressions().iter().map(|e| eval(e, &batch)).collect())
                .collect::<Result<_>>()?;
            return sessions.add(&keys, &args);
        }
        let rows = self.converter.convert_columns(&keys)?;
        // rows of each group in this batch, groups in first-seen order
        let mut slot: HashMap<usize, usize> = HashMap::new();
        let mut members: Vec<(usize, Vec<u32>)> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let bytes: &[u8] = row.as_ref();
            let g = match self.index.get(bytes) {
                Some(g) => *g,
                None => {
                    let end = match &plan.time.window_end {
                        Some(w) => Some(w.end_at(&keys, i)?),
                        None => None,
                    };
                    self.new_group(bytes.into(), end)?
                }
            };
            let s = *slot.entry(g).or_insert_with(|| {
                members.push((g, Vec::new()));
                members.len() - 1
            });
            if let Some(m) = members.get_mut(s) {
                m.1.push(u32::try_from(i).map_err(|_| {
                    StreamSqlError::Internal("a batch of more than 2^32 rows".into())
                })?);
            }
        }
        let args: Vec<Vec<ArrayRef>> = plan
            .aggregates
            .iter()
            .map(|a| a.expressions().iter().map(|e| eval(e, &batch)).collect())
            .collect::<Result<_>>()?;
        for (g, rows) in members {
            let n = i64::try_from(rows.len()).unwrap_or(i64::MAX);
            let idx = datafusion::arrow::array::UInt32Array::from(rows);
            let group = self
                .groups
                .get_mut(g)
                .ok_or_else(|| StreamSqlError::Internal("group index out of range".into()))?;
            group.rows = if retract {
                group.rows - n
            } else {
                group.rows + n
            };
            for (acc, args) in group.accumulators.iter_mut().zip(&args) {
                let taken = args
                    .iter()
                    .map(|a| take(a.as_ref(), &idx, None))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                if retract {
                    acc.retract_batch(&taken)?;
                } else {
                    acc.update_batch(&taken)?;
                }
            }
            self.mark_dirty(g);
        }
        Ok(())
    }

    /// The view rows of the dirty groups, as checkpoint `tag`'s change.
    fn take_changes(&mut self, tag: u64) -> Result<Pending> {
        let dirty = std::mem::take(&mut self.dirty);
        self.rows_of(dirty, tag, true)
    }

    /// EMIT ON WINDOW CLOSE: the rows of the groups whose window ends at or
    /// before `closed_below`, as checkpoint `tag`'s change (a row HAVING
    /// rejects is not written: it never was).
    fn take_closed(&mut self, tag: u64, closed_below: Option<i64>) -> Result<Pending> {
        for g in std::mem::take(&mut self.dirty) {
            if let Some(group) = self.groups.get_mut(g) {
                group.dirty = false;
            }
        }
        let closed = match closed_below {
            Some(w) => (0..self.groups.len())
                .filter(|g| {
                    self.groups
                        .get(*g)
                        .and_then(|group| group.window_end)
                        .is_some_and(|end| end <= w)
                })
                .collect(),
            None => Vec::new(),
        };
        self.rows_of(closed, tag, false)
    }

    /// Drops the state of every group whose window ends at or before
    /// `closed_below` (their last change is taken already).
    fn drop_closed(&mut self, closed_below: i64) {
        if self.plan.time.window_end.is_none() || !self.dirty.is_empty() {
            return;
        }
        let keys = std::mem::take(&mut self.keys);
        let groups = std::mem::take(&mut self.groups);
        self.index.clear();
        for (key, group) in keys.into_iter().zip(groups) {
            if group.window_end.is_some_and(|end| end <= closed_below) {
                continue;
            }
            self.index.insert(key.clone(), self.groups.len());
            self.keys.push(key);
            self.groups.push(group);
        }
    }

    /// The view rows of `groups`, as checkpoint `tag`'s change; a row the
    /// post stages reject is a delete if `deletes`, else left out.
    fn rows_of(&mut self, dirty: Vec<usize>, tag: u64, deletes: bool) -> Result<Pending> {
        let mut pending = Pending {
            tag,
            source_rows: self.source_rows,
            upserts: Vec::new(),
            deletes: Vec::new(),
            arrivals: std::mem::take(&mut self.arrivals),
            late_rows: self.clock.as_ref().map_or(0, |c| c.state().late_rows)
                + self.join.as_ref().map_or(0, JoinState::late_rows),
            position: self.position.clone(),
            held_rows: 0,
        };
        if dirty.is_empty() {
            return Ok(pending);
        }
        let live: Vec<bool> = dirty
            .iter()
            .map(|g| {
                !self.plan.retractions || self.groups.get(*g).is_some_and(|group| group.rows > 0)
            })
            .collect();
        let (columns, values) = self.group_values(&dirty)?;
        self.write_rows(columns, values, &live, deletes, &mut pending)?;
        Ok(pending)
    }

    /// The GROUP BY columns and each aggregate's values (one list per
    /// aggregate) of `groups`, which are marked clean.
    fn group_values(&mut self, dirty: &[usize]) -> Result<(Vec<ArrayRef>, Vec<Vec<ScalarValue>>)> {
        let parser = self.converter.parser();
        let mut key_rows = Vec::with_capacity(dirty.len());
        for g in dirty {
            let key = self
                .keys
                .get(*g)
                .ok_or_else(|| StreamSqlError::Internal("group key out of range".into()))?;
            key_rows.push(parser.parse(key));
        }
        let columns = self.converter.convert_rows(key_rows)?;
        let group_count = self.plan.group_exprs.len();
        let mut values = Vec::with_capacity(self.plan.aggregates.len());
        for at in 0..self
            .plan
            .aggregate_schema
            .fields()
            .len()
            .saturating_sub(group_count)
        {
            let mut per_group = Vec::with_capacity(dirty.len());
            for g in dirty {
                let group = self
                    .groups
                    .get_mut(*g)
                    .ok_or_else(|| StreamSqlError::Internal("group index out of range".into()))?;
                group.dirty = false;
                let acc = group
                    .accumulators
                    .get_mut(at)
                    .ok_or_else(|| StreamSqlError::Internal("accumulator missing".into()))?;
                per_group.push(acc.evaluate()?);
            }
            values.push(per_group);
        }
        // a view without aggregates (GROUP BY only) marks its groups here
        for g in dirty {
            if let Some(group) = self.groups.get_mut(*g) {
                group.dirty = false;
            }
        }
        Ok((columns, values))
    }

    /// The view rows of groups whose GROUP BY columns are `columns` and
    /// whose aggregates' values are `values` (one list per aggregate),
    /// added to `pending`: a row whose group is `live` and that the post
    /// stages keep is an upsert; otherwise, if `deletes`, a delete.
    fn write_rows(
        &self,
        columns: Vec<ArrayRef>,
        values: Vec<Vec<ScalarValue>>,
        live: &[bool],
        deletes: bool,
        pending: &mut Pending,
    ) -> Result<()> {
        let (out, mask) = self.output_batch(columns, values)?;
        let mut stored = Vec::with_capacity(out.num_columns());
        for (c, def) in out.columns().iter().zip(&self.plan.columns) {
            stored.push(eddy_sql::session::cast_column(
                c,
                def.ty,
                &def.name,
                &eddy_sql::session_zone::SessionZone::utc(),
            )?);
        }
        for i in 0..out.num_rows() {
            let row: Row = stored
                .iter()
                .zip(&self.types)
                .map(|(a, ty)| eddy_storage::arrow_values::value_at(a.as_ref(), *ty, i))
                .collect::<std::result::Result<_, _>>()
                .map_err(SqlError::from)?;
            let alive = live.get(i).copied().unwrap_or(false);
            if alive && mask.is_valid(i) && mask.value(i) {
                pending.upserts.push(row);
            } else if deletes {
                let key = self
                    .plan
                    .primary_key
                    .iter()
                    .map(|k| row.get(*k).cloned().unwrap_or(Value::Null))
                    .collect();
                pending.deletes.push(key);
            }
        }
        Ok(())
    }

    /// The post stages' output for groups whose GROUP BY columns are
    /// `columns` and whose aggregates' values are `values`, and the mask
    /// of the rows they keep (HAVING).
    fn output_batch(
        &self,
        mut columns: Vec<ArrayRef>,
        values: Vec<Vec<ScalarValue>>,
    ) -> Result<(RecordBatch, datafusion::arrow::array::BooleanArray)> {
        let schema = Arc::clone(&self.plan.aggregate_schema);
        let group_count = self.plan.group_exprs.len();
        for (field, values) in schema.fields().iter().skip(group_count).zip(values) {
            let array = ScalarValue::iter_to_array(values)?;
            columns.push(if array.data_type() == field.data_type() {
                array
            } else {
                cast(&array, field.data_type())?
            });
        }
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        run_masked(&self.plan.post, batch)
    }

    /// A SESSION view's change at checkpoint `tag`: the sessions that
    /// changed (emit on update) or closed (EMIT ON WINDOW CLOSE), and
    /// deletes of the rows written under bounds no session has any more.
    fn take_sessions(&mut self, tag: u64, closed_below: Option<i64>) -> Result<Pending> {
        let mut pending = self.rows_of(Vec::new(), tag, false)?;
        let on_update = self.plan.time.emit == EmitMode::OnUpdate;
        let Some(sessions) = &mut self.sessions else {
            return Ok(pending);
        };
        let taken = sessions.take(on_update, closed_below)?;
        if let Some(w) = closed_below {
            sessions.drop_closed(w);
        }
        if taken.rows > 0 {
            let live = vec![true; taken.rows];
            self.write_rows(taken.groups, taken.values, &live, on_update, &mut pending)?;
        }
        if let Some(gone) = taken.gone {
            let mut keys = Vec::with_capacity(gone.len());
            for (g, column) in gone.iter().enumerate() {
                let def = self
                    .plan
                    .primary_key
                    .get(g)
                    .and_then(|c| self.plan.columns.get(*c))
                    .ok_or_else(|| StreamSqlError::Internal("view key column missing".into()))?;
                keys.push(eddy_sql::session::cast_column(
                    column,
                    def.ty,
                    &def.name,
                    &eddy_sql::session_zone::SessionZone::utc(),
                )?);
            }
            let written: std::collections::HashSet<Vec<u8>> = pending
                .upserts
                .iter()
                .map(|row| self.key_bytes(row))
                .collect::<Result<_>>()?;
            let n = keys.first().map_or(0, |c| c.len());
            for i in 0..n {
                let key: Vec<Value> = keys
                    .iter()
                    .zip(&self.plan.primary_key)
                    .map(|(a, c)| {
                        let ty = self.types.get(*c).copied().ok_or_else(|| {
                            StreamSqlError::Internal(format!("key column {c} has no type"))
                        })?;
                        eddy_storage::arrow_values::value_at(a.as_ref(), ty, i)
                            .map_err(|e| StreamSqlError::Sql(e.into()))
                    })
                    .collect::<Result<_>>()?;
                // a key written again in this change is replaced, not deleted
                if !written.contains(&key_json(&key)?) {
                    pending.deletes.push(key);
                }
            }
        }
        Ok(pending)
    }

    /// A view row's primary key, as bytes to compare.
    fn key_bytes(&self, row: &Row) -> Result<Vec<u8>> {
        let key: Vec<Value> = self
            .plan
            .primary_key
            .iter()
            .map(|k| row.get(*k).cloned().unwrap_or(Value::Null))
            .collect();
        key_json(&key)
    }

    /// Drops the groups whose rows were all retracted (their delete is
    /// taken already).
    fn drop_empty(&mut self) {
        if !self.plan.retractions || !self.dirty.is_empty() {
            return;
        }
        let keys = std::mem::take(&mut self.keys);
        let groups = std::mem::take(&mut self.groups);
        self.index.clear();
        for (key, group) in keys.into_iter().zip(groups) {
            if group.rows <= 0 {
                continue;
            }
            self.index.insert(key.clone(), self.groups.len());
            self.keys.push(key);
            self.groups.push(group);
        }
    }

    /// How many state columns aggregate `a`'s accumulator has (a sliding
    /// accumulator, over a change-log source, may keep more than
    /// `state_fields` names).
    fn state_width(
        &self,
        a: &datafusion::physical_expr::aggregate::AggregateFunctionExpr,
    ) -> Result<usize> {
        Ok(if self.plan.retractions {
            a.create_sliding_accumulator()?.state()?.len()
        } else {
            a.state_fields()?.len()
        })
    }

    fn groups_state(&mut self) -> Result<Option<Vec<u8>>> {
        if self.groups.is_empty() {
            return Ok(None);
        }
        let parser = self.converter.parser();
        let mut columns = self
            .converter
            .convert_rows(self.keys.iter().map(|k| parser.parse(k)))?;
        let mut fields: Vec<Field> = self
            .plan
            .aggregate_schema
            .fields()
            .iter()
            .take(self.plan.group_exprs.len())
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        let plan = Arc::clone(&self.plan);
        for (ai, a) in plan.aggregates.iter().enumerate() {
            let width = self.state_width(a)?;
            let mut per_field: Vec<Vec<ScalarValue>> =
                vec![Vec::with_capacity(self.groups.len()); width];
            for group in &mut self.groups {
                let acc = group
                    .accumulators
                    .get_mut(ai)
                    .ok_or_else(|| StreamSqlError::Internal("accumulator missing".into()))?;
                for (slot, v) in per_field.iter_mut().zip(acc.state()?) {
                    slot.push(v);
                }
            }
            for (j, values) in per_field.into_iter().enumerate() {
                let array = ScalarValue::iter_to_array(values)?;
                fields.push(Field::new(
                    format!("agg{ai}_{j}"),
                    array.data_type().clone(),
                    true,
                ));
                columns.push(array);
            }
        }
        if self.plan.retractions {
            fields.push(Field::new(
                "rows",
                datafusion::arrow::datatypes::DataType::Int64,
                false,
            ));
            columns.push(Arc::new(
                datafusion::arrow::array::Int64Array::from_iter_values(
                    self.groups.iter().map(|g| g.rows),
                ),
            ));
        }
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        Ok(Some(to_ipc(&batch)?))
    }

    fn restore_groups(&mut self, bytes: &[u8]) -> Result<()> {
        let batch = from_ipc(bytes)?;
        let g = self.plan.group_exprs.len();
        let keys: Vec<ArrayRef> = batch.columns().iter().take(g).cloned().collect();
        let rows = self.converter.convert_columns(&keys)?;
        let mut col = g;
        let mut state_cols: Vec<Vec<ArrayRef>> = Vec::with_capacity(self.plan.aggregates.len());
        let plan = Arc::clone(&self.plan);
        for a in &plan.aggregates {
            let n = self.state_width(a)?;
            let cols: Vec<ArrayRef> = batch.columns().iter().skip(col).take(n).cloned().collect();
            if cols.len() != n {
                return Err(StreamSqlError::State(
                    "aggregate state has fewer columns than the view's aggregates".into(),
                ));
            }
            state_cols.push(cols);
            col += n;
        }
        let live_rows = if self.plan.retractions {
            let rows = batch
                .columns()
                .get(col)
                .and_then(|c| {
                    c.as_any()
                        .downcast_ref::<datafusion::arrow::array::Int64Array>()
                })
                .ok_or_else(|| {
                    StreamSqlError::State("a change-log view's state without its row counts".into())
                })?;
            Some(rows.clone())
        } else {
            None
        };
        for (i, row) in rows.iter().enumerate() {
            let end = match &self.plan.time.window_end {
                Some(w) => Some(w.end_at(&keys, i)?),
                None => None,
            };
            let gi = self.new_group(row.as_ref().into(), end)?;
            let group = self
                .groups
                .get_mut(gi)
                .ok_or_else(|| StreamSqlError::Internal("group index out of range".into()))?;
            if let Some(rows) = &live_rows {
                group.rows = rows.value(i);
            }
            for (acc, cols) in group.accumulators.iter_mut().zip(&state_cols) {
                let slice: Vec<ArrayRef> = cols.iter().map(|c| c.slice(i, 1)).collect();
                acc.merge_batch(&slice)?;
            }
        }
        Ok(())
    }

    /// Commits `p` with its checkpoint row, unless it already is.
    fn commit(&self, p: &Pending) -> Result<()> {
        commit_change(&self.target, p, || {
            let t = &self.target;
            let mut ops = Vec::with_capacity(p.upserts.len() + p.deletes.len());
            for key in &p.deletes {
                ops.push(WriteOp::Delete {
                    key: t.table.key_of(key)?,
                });
            }
            for row in &p.upserts {
                ops.push(WriteOp::Insert {
                    row: row.clone(),
                    on_conflict: OnConflict::Replace,
                });
            }
            Ok(ops)
        })
    }
}

impl Operator for ViewOperator {
    fn process(
        &mut self,
        input: usize,
        batch: AnyBatch,
        _out: &mut dyn Emitter,
    ) -> eddy_stream::Result<()> {
        for b in downcast::<ArrowBatch>(batch)? {
            self.add(input, b.0)?;
        }
        Ok(())
    }

    fn watermark(&mut self, _wm: i64, _out: &mut dyn Emitter) -> eddy_stream::Result<()> {
        Ok(())
    }

    fn snapshot(&mut self, id: CheckpointId) -> eddy_stream::Result<Option<Vec<u8>>> {
        // the end of the source closes every window
        let closed_below = if id.0 == FINAL_TAG {
            Some(i64::MAX)
        } else {
            self.clock.as_ref().and_then(EventClock::watermark)
        };
        let mut change = match self.plan.time.emit {
            _ if self.sessions.is_some() => self.take_sessions(id.0, closed_below)?,
            EmitMode::OnUpdate => self.take_changes(id.0)?,
            EmitMode::OnWindowClose => self.take_closed(id.0, closed_below)?,
        };
        if let Some(w) = closed_below {
            self.drop_closed(w);
        }
        self.drop_empty();
        if let Some(join) = &mut self.join {
            join.expire()?;
            change.held_rows = join.held_rows() as u64;
        }
        // a checkpoint with no change commits nothing: the recorded
        // source position advances with the next real change
        // (the final one always commits: it records where the source ended)
        if !change.upserts.is_empty() || !change.deletes.is_empty() || id.0 == FINAL_TAG {
            self.pending.push(change);
        }
        let snap = Snapshot {
            source_rows: self.source_rows,
            pending: self.pending.clone(),
            groups: self.groups_state()?,
            clock: self.clock.as_ref().map(EventClock::state),
            position: self.position.clone(),
            sessions: match &mut self.sessions {
                Some(s) => s.state()?,
                None => None,
            },
            join: match &self.join {
                Some(j) => Some(j.snapshot()?),
                None => None,
            },
        };
        Ok(Some(serde_json::to_vec(&snap)?))
    }

    fn restore(&mut self, state: &[u8]) -> eddy_stream::Result<()> {
        let snap: Snapshot = serde_json::from_slice(state)?;
        self.index.clear();
        self.keys.clear();
        self.groups.clear();
        self.dirty.clear();
        if let Some(bytes) = &snap.groups {
            self.restore_groups(bytes)?;
        }
        if let Some(sessions) = &mut self.sessions {
            sessions.restore(snap.sessions.as_deref())?;
        }
        if let Some(join) = &mut self.join {
            match snap.join {
                Some(state) => join.restore(state)?,
                None if snap.source_rows > 0 => {
                    return Err(StreamSqlError::State(
                        "the checkpoint has no join state but the view joins two sources".into(),
                    )
                    .into())
                }
                None => {}
            }
        }
        self.source_rows = snap.source_rows;
        self.position = snap.position;
        match (&mut self.clock, snap.clock) {
            (Some(clock), Some(state)) => clock.restore(state),
            (Some(_), None) if snap.source_rows > 0 => {
                return Err(StreamSqlError::State(
                    "the checkpoint has no watermark state but the source has a watermark".into(),
                )
                .into())
            }
            _ => {}
        }
        for p in &snap.pending {
            self.commit(p)?;
        }
        self.pending.clear();
        Ok(())
    }

    fn checkpoint_complete(&mut self, id: CheckpointId, is_final: bool) -> eddy_stream::Result<()> {
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.pending) {
            if is_final || p.tag <= id.0 {
                self.commit(&p)?;
            } else {
                keep.push(p);
            }
        }
        self.pending = keep;
        Ok(())
    }

    fn is_committing_sink(&self) -> bool {
        true
    }
}
