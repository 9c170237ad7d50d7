//! The operator of an **append-only** materialized view: a query without
//! GROUP BY (filters and projections over one source, `ViewPlan::append`).
//!
//! Invariants (`docs/design/streams-into-tables.md`, "Append-only
//! materialized views"):
//! * **A view row's key is its source row's position.** The job runs at
//!   parallelism 1 with the source chained into this operator, so source
//!   row `i` (counted from the start of the source, across restores: the
//!   count is in the snapshot with the source's offset) is the `i`-th row
//!   this operator receives. The view row it makes (at most one: a filter
//!   keeps or drops it, a projection maps it) is stored under row id `i`
//!   of the view's table (`WriteOp::Put`; the table has no primary key, so
//!   the id is the storage's hidden row id, in no column). The same source
//!   prefix always gives the same (id, row) pairs.
//! * **Exactly once by construction.** The rows since the last snapshot
//!   are checkpoint `n`'s change; it is committed with the checkpoint row
//!   through the grouped views' commit path (`view_commit::commit_change`:
//!   one `Engine::commit`, skipped if the checkpoint is committed). A
//!   replay after a crash rewrites the same ids with the same rows
//!   (upserts), so even a change committed twice could not duplicate a row.
//! * **Over a join of two sources, a view row's key is its pair's
//!   number** (`ViewPlan::join`; `interval_join.rs` makes the pairs): the
//!   `j`-th pair the join emits, counted from the start across restores
//!   (the count is in the snapshot, with the join's held rows), is stored
//!   under row id `j`. Unlike a source position, that number depends on
//!   how the two inputs interleaved, which differs after a restore; it
//!   need not be the same on a replay, because no pair is ever committed
//!   under two numbers: a change is committed only after its checkpoint
//!   is saved (the runtime notifies `checkpoint_complete` after saving),
//!   so a restore resumes from a checkpoint at or after every committed
//!   change, whose pending changes keep the ids they were given. The pairs
//!   emitted after the restore are exactly those not in the restored
//!   join (each pair is emitted once, when its later row arrives), and
//!   they are numbered from the restored count, above every committed id.
//! * **No state but the pending change** (and, over a join, its held rows,
//!   which grow with the input unless an interval expires them). The
//!   snapshot is the source row count and the changes not yet committed
//!   (Arrow IPC, not JSON: at 1 M rows/s a change is tens of MB); nothing
//!   else grows with the view.
//! * **The path of a row allocates nothing per row**: the stages run on
//!   Arrow batches, the positions of the rows a filter keeps are one
//!   `UInt64Array` per batch; the commit hands the batch to the storage's
//!   bulk path (`BulkLoader::push_at` under the positions, committed with
//!   the checkpoint row by `BulkLoader::commit_with`): column files, no
//!   row is built.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, UInt64Array};
use datafusion::arrow::compute::{concat, concat_batches, filter, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use eddy_common::{ColumnType, Orientation, Row};
use eddy_sql::SqlError;
use eddy_storage::WriteOp;
use eddy_stream::operator::sink::FINAL_TAG;
use eddy_stream::operator::{Emitter, Operator};
use eddy_stream::types::{downcast, AnyBatch, CheckpointId};
use serde::{Deserialize, Serialize};

use crate::batch::{from_ipc, to_ipc, ArrowBatch};
use crate::error::{Result, StreamSqlError};
use crate::interval_join::{JoinSnapshot, JoinState};
use crate::plan::{Stage, ViewPlan};
use crate::stages::{as_mask, eval, project};
use crate::view_commit::{commit_view_write, ViewWrite};
use crate::view_op::{
    now_micros, Pending, StageSnapshot, ViewOperator, ViewTarget, INJECT_PANIC_ENV,
};

/// The first bytes of an append-only view's snapshot.
const MAGIC: &[u8; 8] = b"EDDYAPV1";

/// One checkpoint's rows: the view's columns (storable types) and, last,
/// each row's source position (`UInt64`).
struct Change {
    meta: Pending,
    rows: Option<RecordBatch>,
}

/// The snapshot's header (JSON), followed by each change's IPC bytes.
#[derive(Serialize, Deserialize)]
struct Header {
    source_rows: u64,
    position: Option<String>,
    pending: Vec<Pending>,
    /// Byte length of each pending change's rows (0: none).
    lengths: Vec<u64>,
    /// Over a join: the pairs emitted (the next pair's row id).
    #[serde(default)]
    pairs: u64,
    /// Over a join: its held rows (and clocks, for an interval join).
    #[serde(default)]
    join: Option<JoinSnapshot>,
    /// Over a join of two windowed aggregates: each side's open windows
    /// and clock.
    #[serde(default)]
    sides: Vec<StageSnapshot>,
}

/// Maintains one append-only view (parallelism 1).
pub struct AppendOperator {
    plan: Arc<ViewPlan>,
    target: ViewTarget,
    types: Vec<ColumnType>,
    /// Source rows seen: the position of the next one (over a join: both
    /// sources' rows).
    source_rows: u64,
    /// Over a join: its state (input 0 the left source, 1 the right) and
    /// the pairs it has emitted, the next pair's row id.
    join: Option<JoinState>,
    pairs: u64,
    /// Over a join of two windowed aggregates (`window_join.rs`): the
    /// sides' window aggregates (input 0 the left, 1 the right), whose
    /// closed windows' rows are the join's inputs.
    sides: Vec<ViewOperator>,
    /// View rows since the last snapshot, with their source positions.
    buffered: Vec<(RecordBatch, ArrayRef)>,
    /// (arrival µs, source rows) since the last snapshot (freshness).
    arrivals: Vec<(i64, u64)>,
    /// A Kafka source's offsets after its latest batch.
    position: Option<String>,
    pending: Vec<Change>,
    panic_at_rows: Option<u64>,
}

impl AppendOperator {
    pub fn new(plan: Arc<ViewPlan>, target: ViewTarget) -> Result<AppendOperator> {
        if !plan.append {
            return Err(StreamSqlError::Internal(
                "an append operator for a grouped view".into(),
            ));
        }
        let join = match &plan.join {
            Some(j) => Some(JoinState::new(Arc::clone(j))?),
            None => None,
        };
        let sides = plan
            .window_inputs
            .iter()
            .map(|side| ViewOperator::new(Arc::new(side.clone()), target.clone()))
            .collect::<Result<Vec<_>>>()?;
        Ok(AppendOperator {
            sides,
            join,
            pairs: 0,
            types: plan.columns.iter().map(|c| c.ty).collect(),
            plan,
            target,
            source_rows: 0,
            buffered: Vec::new(),
            arrivals: Vec::new(),
            position: None,
            pending: Vec::new(),
            panic_at_rows: None,
        })
    }

    /// Arms the injected panic (tests; see [`INJECT_PANIC_ENV`]).
    pub fn panic_at_rows(mut self, rows: Option<u64>) -> Self {
        self.panic_at_rows = rows;
        self
    }

    /// How many source rows the join holds (0 without one).
    pub fn held_join_rows(&self) -> usize {
        self.join.as_ref().map_or(0, JoinState::held_rows)
    }

    /// Runs the stages on one batch of source `input` and buffers the rows
    /// it keeps.
    fn add(&mut self, input: usize, batch: RecordBatch) -> Result<()> {
        let n = batch.num_rows() as u64;
        let first = self.source_rows;
        self.source_rows += n;
        if self.panic_at_rows.is_some_and(|at| self.source_rows >= at) {
            // deliberate: the stream runtime must contain it and restart
            panic!(
                "injected fault ({INJECT_PANIC_ENV}) at {} source rows",
                self.source_rows
            );
        }
        if n == 0 {
            return Ok(());
        }
        let now = now_micros();
        match self.arrivals.last_mut() {
            Some((at, rows)) if now - *at < 1000 => *rows += n,
            _ => self.arrivals.push((now, n)),
        }
        // a Kafka source's batch carries the offsets after it
        if let Some(position) = batch
            .schema()
            .metadata()
            .get(crate::changelog::CUT_METADATA)
        {
            self.position = Some(position.clone());
        }
        // a windowed side holds its rows until their window closes
        if let Some(side) = self.sides.get_mut(input) {
            return side.stage_feed(batch);
        }
        if self.join.is_some() {
            return self.join_rows(input, batch);
        }
        let batch = match &self.plan.scan_projection {
            Some(p) => batch.project(p)?,
            None => batch,
        };
        let ids: ArrayRef = Arc::new(UInt64Array::from_iter_values(first..first + n));
        self.keep(batch, ids)
    }

    /// Joins rows of `input` (a source's batch, or a side's closed
    /// windows) with the other side's held rows, numbering the pairs, and
    /// keeps the view rows they make.
    fn join_rows(&mut self, input: usize, rows: RecordBatch) -> Result<()> {
        let Some(join) = &mut self.join else {
            return Err(StreamSqlError::Internal(
                "join rows for a view without a join".into(),
            ));
        };
        let pairs = join.push(input, rows)?;
        let first = self.pairs;
        self.pairs += pairs.num_rows() as u64;
        let ids: ArrayRef = Arc::new(UInt64Array::from_iter_values(first..self.pairs));
        self.keep(pairs, ids)
    }

    /// Runs the stages on `batch` (rows under `positions`) and buffers the
    /// rows they keep.
    fn keep(&mut self, mut batch: RecordBatch, mut positions: ArrayRef) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        for stage in &self.plan.pre {
            match stage {
                Stage::Filter {
                    predicate,
                    projection,
                } => {
                    let mask = as_mask(&eval(predicate, &batch)?)?;
                    batch = filter_record_batch(&batch, &mask)?;
                    positions = filter(positions.as_ref(), &mask)?;
                    if let Some(p) = projection {
                        batch = batch.project(p)?;
                    }
                }
                Stage::Project { exprs, schema } => batch = project(exprs, schema, &batch)?,
                Stage::Lookup(_) => {
                    return Err(StreamSqlError::Internal(
                        "a lookup join in an append-only view".into(),
                    ))
                }
            }
            if batch.num_rows() == 0 {
                return Ok(());
            }
        }
        self.buffered.push((batch, positions));
        Ok(())
    }

    /// The rows buffered since the last snapshot as checkpoint `tag`'s
    /// change: the view's columns cast to their stored types, then the
    /// positions.
    fn take_change(&mut self, tag: u64) -> Result<Change> {
        let meta = Pending {
            tag,
            source_rows: self.source_rows,
            upserts: Vec::new(),
            deletes: Vec::new(),
            arrivals: std::mem::take(&mut self.arrivals),
            late_rows: self.join.as_ref().map_or(0, JoinState::late_rows)
                + self
                    .sides
                    .iter()
                    .map(ViewOperator::stage_late_rows)
                    .sum::<u64>(),
            position: self.position.clone(),
            held_rows: self.held_join_rows() as u64,
        };
        let buffered = std::mem::take(&mut self.buffered);
        let Some((first, _)) = buffered.first() else {
            return Ok(Change { meta, rows: None });
        };
        let schema = first.schema();
        if schema.fields().len() != self.plan.columns.len() {
            return Err(StreamSqlError::Internal(format!(
                "an append-only view's rows have {} columns, its table {}",
                schema.fields().len(),
                self.plan.columns.len()
            )));
        }
        let batch = concat_batches(&schema, buffered.iter().map(|(b, _)| b))?;
        let positions: Vec<&dyn Array> = buffered.iter().map(|(_, p)| p.as_ref()).collect();
        let positions = concat(&positions)?;
        let mut fields = Vec::with_capacity(batch.num_columns() + 1);
        let mut columns = Vec::with_capacity(batch.num_columns() + 1);
        for (c, def) in batch.columns().iter().zip(&self.plan.columns) {
            let stored = eddy_sql::session::cast_column(
                c,
                def.ty,
                &def.name,
                &eddy_sql::session_zone::SessionZone::utc(),
            )?;
            fields.push(Field::new(
                def.name.as_str(),
                stored.data_type().clone(),
                true,
            ));
            columns.push(stored);
        }
        fields.push(Field::new("_position", DataType::UInt64, false));
        columns.push(positions);
        let rows = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        Ok(Change {
            meta,
            rows: Some(rows),
        })
    }

    /// Commits `change` with its checkpoint row, unless it already is: as
    /// one bulk load under the rows' positions into a column table (views
    /// made since append-only views are column-stored), as row writes into
    /// a row table (views made before).
    fn commit(&self, change: &Change) -> Result<()> {
        commit_view_write(&self.target, &change.meta, || {
            let Some(rows) = &change.rows else {
                return Ok(ViewWrite::Ops(Vec::new()));
            };
            let width = self.types.len();
            let positions = rows
                .columns()
                .get(width)
                .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
                .ok_or_else(|| StreamSqlError::Internal("a change without positions".into()))?;
            let columns = rows.columns().get(..width).ok_or_else(|| {
                StreamSqlError::Internal("a change with fewer columns than the view".into())
            })?;
            if self.target.table.def().orientation == Orientation::Column {
                let batch = rows.project(&(0..width).collect::<Vec<_>>())?;
                let mut loader = self.target.table.bulk_loader();
                loader.push_at(batch, positions.values())?;
                return Ok(ViewWrite::Bulk(loader));
            }
            let mut ops = Vec::with_capacity(rows.num_rows());
            for (i, rowid) in positions.values().iter().enumerate() {
                let mut row: Row = Vec::with_capacity(width);
                for (a, ty) in columns.iter().zip(&self.types) {
                    row.push(
                        eddy_storage::arrow_values::value_at(a.as_ref(), *ty, i)
                            .map_err(SqlError::from)?,
                    );
                }
                ops.push(WriteOp::Put { row, rowid: *rowid });
            }
            Ok(ViewWrite::Ops(ops))
        })
    }

    fn encode(&mut self) -> Result<Vec<u8>> {
        let mut blobs = Vec::with_capacity(self.pending.len());
        for c in &self.pending {
            blobs.push(match &c.rows {
                Some(rows) => to_ipc(rows)?,
                None => Vec::new(),
            });
        }
        let header = Header {
            source_rows: self.source_rows,
            position: self.position.clone(),
            pending: self.pending.iter().map(|c| c.meta.clone()).collect(),
            lengths: blobs.iter().map(|b| b.len() as u64).collect(),
            pairs: self.pairs,
            join: match &self.join {
                Some(j) => Some(j.snapshot()?),
                None => None,
            },
            sides: self
                .sides
                .iter_mut()
                .map(ViewOperator::stage_snapshot)
                .collect::<Result<_>>()?,
        };
        let header = serde_json::to_vec(&header).map_err(|e| {
            StreamSqlError::Internal(format!("an append-only view's snapshot: {e}"))
        })?;
        let mut out =
            Vec::with_capacity(16 + header.len() + blobs.iter().map(Vec::len).sum::<usize>());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(&header);
        for b in blobs {
            out.extend_from_slice(&b);
        }
        Ok(out)
    }

    fn decode(state: &[u8]) -> Result<(Header, Vec<Option<RecordBatch>>)> {
        let bad = || StreamSqlError::State("an append-only view's snapshot is malformed".into());
        let rest = state.strip_prefix(MAGIC.as_slice()).ok_or_else(bad)?;
        let (len, rest) = rest.split_first_chunk::<8>().ok_or_else(bad)?;
        let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|_| bad())?;
        let header = rest.get(..len).ok_or_else(bad)?;
        let header: Header = serde_json::from_slice(header)
            .map_err(|e| StreamSqlError::State(format!("an append-only view's snapshot: {e}")))?;
        let mut at = len;
        let mut rows = Vec::with_capacity(header.lengths.len());
        for l in &header.lengths {
            let l = usize::try_from(*l).map_err(|_| bad())?;
            if l == 0 {
                rows.push(None);
                continue;
            }
            let bytes = rest.get(at..at + l).ok_or_else(bad)?;
            rows.push(Some(from_ipc(bytes)?));
            at += l;
        }
        if rows.len() != header.pending.len() {
            return Err(bad());
        }
        Ok((header, rows))
    }
}

impl Operator for AppendOperator {
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
        // windowed sides: the windows their watermarks closed (at the end
        // of the sources, all) go into the join now, each once
        let end = id.0 == FINAL_TAG;
        for input in 0..self.sides.len() {
            let closed = match self.sides.get_mut(input) {
                Some(side) => side.stage_take_closed(end)?,
                None => None,
            };
            if let Some(rows) = closed.filter(|r| r.num_rows() > 0) {
                self.join_rows(input, rows)?;
            }
        }
        if let Some(join) = &mut self.join {
            join.expire()?;
        }
        let change = self.take_change(id.0)?;
        // a checkpoint with no rows commits nothing (the final one always
        // commits: it records where the source ended)
        if change.rows.is_some() || id.0 == FINAL_TAG {
            self.pending.push(change);
        }
        Ok(Some(self.encode()?))
    }

    fn restore(&mut self, state: &[u8]) -> eddy_stream::Result<()> {
        let (header, rows) = Self::decode(state)?;
        self.buffered.clear();
        self.arrivals.clear();
        self.source_rows = header.source_rows;
        self.position = header.position;
        self.pairs = header.pairs;
        if let Some(join) = &mut self.join {
            match header.join {
                Some(state) => join.restore(state)?,
                None if header.source_rows > 0 => {
                    return Err(StreamSqlError::State(
                        "the checkpoint has no join state but the view joins two sources".into(),
                    )
                    .into())
                }
                None => {}
            }
        }
        if header.sides.len() == self.sides.len() {
            for (side, state) in self.sides.iter_mut().zip(header.sides) {
                side.stage_restore(state)?;
            }
        } else if header.source_rows > 0 {
            return Err(StreamSqlError::State(
                "the checkpoint's window aggregates do not match the view's".into(),
            )
            .into());
        }
        for (meta, rows) in header.pending.into_iter().zip(rows) {
            self.commit(&Change { meta, rows })?;
        }
        self.pending.clear();
        Ok(())
    }

    fn checkpoint_complete(&mut self, id: CheckpointId, is_final: bool) -> eddy_stream::Result<()> {
        let mut keep = Vec::new();
        for c in std::mem::take(&mut self.pending) {
            if is_final || c.meta.tag <= id.0 {
                self.commit(&c)?;
            } else {
                keep.push(c);
            }
        }
        self.pending = keep;
        Ok(())
    }

    fn is_committing_sink(&self) -> bool {
        true
    }
}
