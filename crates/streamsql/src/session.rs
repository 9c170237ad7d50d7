//! Session windows: the per-key sessions of a `SESSION(source, ts,
//! INTERVAL gap)` view, merged as rows arrive in any order.
//!
//! Invariant the view operator relies on: **for each key, the sessions held
//! are the connected components of the windows `[t, t + gap)` of the key's
//! on-time rows**: two rows share a session exactly when a chain of rows
//! links them with consecutive times less than `gap` apart. A session is
//! `[first time, last time + gap)` (`window_start`, `window_end`), and the
//! sessions of a key never overlap. A row arriving between two sessions
//! that its window touches merges them (the accumulators of one merge the
//! states of the others), so the answer does not depend on arrival order,
//! only on which rows the watermark kept.
//!
//! A session is *closed* once the watermark is at least its end: every row
//! that could still touch it (time below its end) would be late. Emit on
//! update writes, at each checkpoint, each session that changed and deletes
//! the row of every bound it was last written under that is gone (it grew
//! or was merged away); `EMIT ON WINDOW CLOSE` writes a session once, when
//! it closes. Closed sessions are dropped after their last change is taken,
//! so state holds only open sessions. The sessions (key, bounds, the bounds
//! last written, accumulator states) are in the view's snapshot.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, Int64Array, RecordBatch, TimestampMicrosecondArray, UInt32Array,
};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Accumulator;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::PhysicalExpr;

use crate::batch::{from_ipc, to_ipc};
use crate::error::{Result, StreamSqlError};
use crate::plan::Stage;

/// Where a session view's GROUP BY holds the session's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionKey {
    /// The gap in µs (> 0).
    pub gap: i64,
    /// Index of `window_start` among the GROUP BY expressions.
    pub start_group: Option<usize>,
    /// Index of `window_end` among the GROUP BY expressions.
    pub end_group: Option<usize>,
}

fn refuse(why: &str) -> StreamSqlError {
    StreamSqlError::NotSupported(format!(
        "SESSION windows need window_start or window_end as plain GROUP BY columns and \
         used nowhere else before the aggregate: {why}"
    ))
}

/// Checks that a SESSION view uses the window columns only as GROUP BY
/// columns passed through unchanged (their values are the per-row windows
/// until the operator merges them, so any other use would see the wrong
/// bounds), and says where they are in the GROUP BY.
pub fn session_key(
    gap: i64,
    source_width: usize,
    scan_projection: Option<&[usize]>,
    pre: &[Stage],
    group_exprs: &[Arc<dyn PhysicalExpr>],
    aggregates: &[Arc<AggregateFunctionExpr>],
) -> Result<SessionKey> {
    let (start, end) = (source_width, source_width + 1);
    let is_window = |o: Option<usize>| o == Some(start) || o == Some(end);
    // origin[i]: the windowed-source column that column i is, unchanged
    let mut origin: Vec<Option<usize>> = match scan_projection {
        Some(p) => p.iter().map(|i| Some(*i)).collect(),
        None => (0..source_width + 2).map(Some).collect(),
    };
    let reads_window = |e: &Arc<dyn PhysicalExpr>, origin: &[Option<usize>]| {
        collect_columns(e)
            .iter()
            .any(|c| is_window(origin.get(c.index()).copied().flatten()))
    };
    for stage in pre {
        match stage {
            Stage::Filter { predicate, .. } => {
                if reads_window(predicate, &origin) {
                    return Err(refuse("a filter reads them"));
                }
            }
            Stage::Project { exprs, .. } => {
                for e in exprs {
                    if e.downcast_ref::<Column>().is_none() && reads_window(e, &origin) {
                        return Err(refuse("an expression reads them"));
                    }
                }
            }
            Stage::Lookup(join) => {
                if join.source_keys().iter().any(|e| reads_window(e, &origin)) {
                    return Err(refuse("a lookup join's key reads them"));
                }
            }
        }
        origin = crate::stages::trace_origins(origin, std::slice::from_ref(stage));
    }
    let mut key = SessionKey {
        gap,
        start_group: None,
        end_group: None,
    };
    for (g, e) in group_exprs.iter().enumerate() {
        match e.downcast_ref::<Column>() {
            Some(c) => match origin.get(c.index()).copied().flatten() {
                Some(o) if o == start => key.start_group = Some(g),
                Some(o) if o == end => key.end_group = Some(g),
                _ => {}
            },
            None if reads_window(e, &origin) => {
                return Err(refuse("a GROUP BY expression computes on them"))
            }
            None => {}
        }
    }
    for a in aggregates {
        if a.expressions().iter().any(|e| reads_window(e, &origin)) {
            return Err(refuse("an aggregate reads them"));
        }
    }
    if key.start_group.is_none() && key.end_group.is_none() {
        return Err(refuse(
            "the view does not GROUP BY window_start or window_end",
        ));
    }
    Ok(key)
}

/// One session of one key.
pub(crate) struct Session {
    end: i64,
    accumulators: Vec<Box<dyn Accumulator>>,
    /// Changed since the last checkpoint.
    dirty: bool,
    /// The bounds the view's row was last written under (emit on update).
    written: Option<(i64, i64)>,
}

/// The rows of sessions taken at a checkpoint: their GROUP BY columns and
/// each aggregate's values, plus the GROUP BY columns of rows to delete.
pub(crate) struct Taken {
    pub(crate) groups: Vec<ArrayRef>,
    pub(crate) values: Vec<Vec<ScalarValue>>,
    pub(crate) rows: usize,
    pub(crate) gone: Option<Vec<ArrayRef>>,
}

/// The open sessions of a SESSION view, per key.
pub(crate) struct Sessions {
    key: SessionKey,
    aggregates: Vec<Arc<AggregateFunctionExpr>>,
    /// The GROUP BY columns' types (the aggregate's output schema).
    group_fields: Vec<Field>,
    /// GROUP BY indices of the key columns (all but the window's).
    key_groups: Vec<usize>,
    /// Arrow row format of the key columns (`None`: no key columns).
    converter: Option<RowConverter>,
    /// Key (Arrow row bytes) → sessions by start.
    by_key: HashMap<Box<[u8]>, BTreeMap<i64, Session>>,
    /// Bounds written before that no session has any more.
    gone: Vec<(Box<[u8]>, i64, i64)>,
}

impl Sessions {
    pub(crate) fn new(
        key: SessionKey,
        aggregates: Vec<Arc<AggregateFunctionExpr>>,
        aggregate_schema: &SchemaRef,
        group_count: usize,
    ) -> Result<Sessions> {
        let group_fields: Vec<Field> = aggregate_schema
            .fields()
            .iter()
            .take(group_count)
            .map(|f| f.as_ref().clone())
            .collect();
        let key_groups: Vec<usize> = (0..group_count)
            .filter(|g| Some(*g) != key.start_group && Some(*g) != key.end_group)
            .collect();
        let converter = if key_groups.is_empty() {
            None
        } else {
            let fields = key_groups
                .iter()
                .filter_map(|g| group_fields.get(*g))
                .map(|f| SortField::new(f.data_type().clone()))
                .collect();
            Some(RowConverter::new(fields)?)
        };
        Ok(Sessions {
            key,
            aggregates,
            group_fields,
            key_groups,
            converter,
            by_key: HashMap::new(),
            gone: Vec::new(),
        })
    }

    /// How many sessions are held.
    pub(crate) fn len(&self) -> usize {
        self.by_key.values().map(BTreeMap::len).sum()
    }

    fn accumulators(&self) -> Result<Vec<Box<dyn Accumulator>>> {
        new_accumulators(&self.aggregates)
    }

    /// The key of each row (the GROUP BY values but the window's).
    fn key_rows(&self, groups: &[ArrayRef], n: usize) -> Result<Vec<Box<[u8]>>> {
        let Some(converter) = &self.converter else {
            return Ok(vec![Box::from(&[][..]); n]);
        };
        let columns: Vec<ArrayRef> = self
            .key_groups
            .iter()
            .map(|g| {
                groups
                    .get(*g)
                    .cloned()
                    .ok_or_else(|| StreamSqlError::Internal("group column missing".into()))
            })
            .collect::<Result<_>>()?;
        let rows = converter.convert_columns(&columns)?;
        Ok(rows.iter().map(|r| Box::from(r.as_ref())).collect())
    }

    /// Each row's time, from its per-row window.
    fn times(&self, groups: &[ArrayRef]) -> Result<Vec<i64>> {
        let (g, back) = match (self.key.start_group, self.key.end_group) {
            (Some(g), _) => (g, 0),
            (None, Some(g)) => (g, self.key.gap),
            (None, None) => return Err(StreamSqlError::Internal("session without bounds".into())),
        };
        let column = groups
            .get(g)
            .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
            .ok_or_else(|| StreamSqlError::Internal("a session bound is not a timestamp".into()))?;
        Ok((0..column.len()).map(|i| column.value(i) - back).collect())
    }

    /// Adds rows (their GROUP BY columns `groups` and each aggregate's
    /// arguments `args`) to their sessions, merging the sessions a row's
    /// window touches.
    pub(crate) fn add(&mut self, groups: &[ArrayRef], args: &[Vec<ArrayRef>]) -> Result<()> {
        let n = groups.first().map_or(0, |c| c.len());
        if n == 0 {
            return Ok(());
        }
        let keys = self.key_rows(groups, n)?;
        let times = self.times(groups)?;
        // rows of each key, in time order
        let mut per_key: HashMap<&[u8], Vec<(i64, u32)>> = HashMap::new();
        for (i, (k, t)) in keys.iter().zip(&times).enumerate() {
            let i = u32::try_from(i)
                .map_err(|_| StreamSqlError::Internal("a batch of more than 2^32 rows".into()))?;
            per_key.entry(k.as_ref()).or_default().push((*t, i));
        }
        let gap = self.key.gap;
        for (key, mut rows) in per_key {
            rows.sort_unstable();
            // runs of rows less than `gap` apart: one session each
            let mut run: Vec<u32> = Vec::new();
            let mut first = 0i64;
            let mut last = 0i64;
            for (t, i) in rows {
                if !run.is_empty() && t - last >= gap {
                    let end = checked_end(last, gap)?;
                    self.add_run(key, first, end, &std::mem::take(&mut run), args)?;
                }
                if run.is_empty() {
                    first = t;
                }
                last = t;
                run.push(i);
            }
            if !run.is_empty() {
                let end = checked_end(last, gap)?;
                self.add_run(key, first, end, &run, args)?;
            }
        }
        Ok(())
    }

    /// Adds the rows `rows` of key `key`, whose windows span `[start, end)`.
    fn add_run(
        &mut self,
        key: &[u8],
        start: i64,
        end: i64,
        rows: &[u32],
        args: &[Vec<ArrayRef>],
    ) -> Result<()> {
        let sessions = self.by_key.entry(key.into()).or_default();
        // the sessions `[s, e)` this run touches: s < end and e > start
        // (sessions are disjoint, so their ends rise with their starts)
        let touched: Vec<i64> = sessions
            .range(..end)
            .rev()
            .take_while(|(_, s)| s.end > start)
            .map(|(s, _)| *s)
            .collect();
        let mut merged: Option<(i64, Session)> = None;
        for s in touched {
            let Some(session) = sessions.remove(&s) else {
                continue;
            };
            merged = Some(match merged {
                None => (s, session),
                Some((at, mut into)) => {
                    for (acc, mut other) in into.accumulators.iter_mut().zip(session.accumulators) {
                        let state: Vec<ArrayRef> = other
                            .state()?
                            .iter()
                            .map(ScalarValue::to_array)
                            .collect::<datafusion::error::Result<_>>()?;
                        acc.merge_batch(&state)?;
                    }
                    if let Some((ws, we)) = session.written {
                        self.gone.push((key.into(), ws, we));
                    }
                    into.end = into.end.max(session.end);
                    (at.min(s), into)
                }
            });
        }
        let (s, mut session) = match merged {
            Some(m) => m,
            None => (
                start,
                Session {
                    end,
                    accumulators: new_accumulators(&self.aggregates)?,
                    dirty: false,
                    written: None,
                },
            ),
        };
        let idx = UInt32Array::from(rows.to_vec());
        for (acc, args) in session.accumulators.iter_mut().zip(args) {
            let taken = args
                .iter()
                .map(|a| take(a.as_ref(), &idx, None))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            acc.update_batch(&taken)?;
        }
        session.end = session.end.max(end);
        session.dirty = true;
        sessions.insert(s.min(start), session);
        Ok(())
    }

    /// The GROUP BY columns of sessions `(key, start, end)`.
    fn group_columns(&self, bounds: &[(&[u8], i64, i64)]) -> Result<Vec<ArrayRef>> {
        let mut keys = match &self.converter {
            Some(c) => {
                let parser = c.parser();
                c.convert_rows(bounds.iter().map(|(k, _, _)| parser.parse(k)))?
            }
            None => Vec::new(),
        }
        .into_iter();
        let bound = |f: &Field, values: Vec<i64>| -> Result<ArrayRef> {
            match f.data_type() {
                DataType::Timestamp(TimeUnit::Microsecond, tz) => Ok(Arc::new(
                    TimestampMicrosecondArray::from(values).with_timezone_opt(tz.clone()),
                )),
                other => Err(StreamSqlError::Internal(format!(
                    "a session bound of type {other}"
                ))),
            }
        };
        let mut out = Vec::with_capacity(self.group_fields.len());
        for (g, f) in self.group_fields.iter().enumerate() {
            if Some(g) == self.key.start_group {
                out.push(bound(f, bounds.iter().map(|b| b.1).collect())?);
            } else if Some(g) == self.key.end_group {
                out.push(bound(f, bounds.iter().map(|b| b.2).collect())?);
            } else {
                out.push(
                    keys.next()
                        .ok_or_else(|| StreamSqlError::Internal("key column missing".into()))?,
                );
            }
        }
        Ok(out)
    }

    /// Takes the rows of sessions: with `changed`, those changed since the
    /// last checkpoint and the bounds written before that are gone (emit
    /// on update); else those closed by `closed_below` (EMIT ON WINDOW
    /// CLOSE), which are dropped. Clears every change mark.
    pub(crate) fn take(&mut self, changed: bool, closed_below: Option<i64>) -> Result<Taken> {
        let mut picked: Vec<(Box<[u8]>, i64, i64)> = Vec::new();
        let mut values: Vec<Vec<ScalarValue>> = vec![Vec::new(); self.aggregates.len()];
        let mut gone = std::mem::take(&mut self.gone);
        for (key, sessions) in &mut self.by_key {
            for (start, session) in sessions.iter_mut() {
                let dirty = std::mem::replace(&mut session.dirty, false);
                let take = if changed {
                    dirty
                } else {
                    closed_below.is_some_and(|w| session.end <= w)
                };
                if !take {
                    continue;
                }
                if changed {
                    let now = (*start, session.end);
                    if let Some((ws, we)) = session.written.filter(|w| *w != now) {
                        gone.push((key.clone(), ws, we));
                    }
                    session.written = Some(now);
                }
                for (slot, acc) in values.iter_mut().zip(&mut session.accumulators) {
                    slot.push(acc.evaluate()?);
                }
                picked.push((key.clone(), *start, session.end));
            }
        }
        if !changed {
            if let Some(w) = closed_below {
                self.drop_closed(w);
            }
        }
        let bounds: Vec<(&[u8], i64, i64)> = picked
            .iter()
            .map(|(k, s, e)| (k.as_ref(), *s, *e))
            .collect();
        let groups = self.group_columns(&bounds)?;
        let gone = if gone.is_empty() {
            None
        } else {
            let bounds: Vec<(&[u8], i64, i64)> =
                gone.iter().map(|(k, s, e)| (k.as_ref(), *s, *e)).collect();
            Some(self.group_columns(&bounds)?)
        };
        Ok(Taken {
            groups,
            values,
            rows: picked.len(),
            gone,
        })
    }

    /// Drops every session the watermark `closed_below` has closed.
    pub(crate) fn drop_closed(&mut self, closed_below: i64) {
        for sessions in self.by_key.values_mut() {
            sessions.retain(|_, s| s.end > closed_below);
        }
        self.by_key.retain(|_, s| !s.is_empty());
    }

    /// The sessions as Arrow IPC: key columns, start, end, the bounds last
    /// written (nullable), then every aggregate's state columns.
    pub(crate) fn state(&mut self) -> Result<Option<Vec<u8>>> {
        if self.by_key.is_empty() {
            return Ok(None);
        }
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut starts = Vec::new();
        let mut ends = Vec::new();
        let mut written_starts = Vec::new();
        let mut written_ends = Vec::new();
        let mut states: Vec<Vec<Vec<ScalarValue>>> = Vec::with_capacity(self.aggregates.len());
        for a in &self.aggregates {
            states.push(vec![Vec::new(); a.state_fields()?.len()]);
        }
        for (key, sessions) in &mut self.by_key {
            for (start, session) in sessions.iter_mut() {
                keys.push(key.as_ref());
                starts.push(*start);
                ends.push(session.end);
                written_starts.push(session.written.map(|w| w.0));
                written_ends.push(session.written.map(|w| w.1));
                for (per_agg, acc) in states.iter_mut().zip(&mut session.accumulators) {
                    for (slot, v) in per_agg.iter_mut().zip(acc.state()?) {
                        slot.push(v);
                    }
                }
            }
        }
        let mut fields = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        if let Some(c) = &self.converter {
            let parser = c.parser();
            for (g, col) in self
                .key_groups
                .iter()
                .zip(c.convert_rows(keys.iter().map(|k| parser.parse(k)))?)
            {
                let f = self
                    .group_fields
                    .get(*g)
                    .ok_or_else(|| StreamSqlError::Internal("group field missing".into()))?;
                fields.push(Field::new(format!("key{g}"), f.data_type().clone(), true));
                columns.push(col);
            }
        }
        for (name, values) in [("start", starts), ("end", ends)] {
            fields.push(Field::new(name, DataType::Int64, false));
            columns.push(Arc::new(Int64Array::from(values)));
        }
        for (name, values) in [
            ("written_start", written_starts),
            ("written_end", written_ends),
        ] {
            fields.push(Field::new(name, DataType::Int64, true));
            columns.push(Arc::new(Int64Array::from(values)));
        }
        for (ai, per_agg) in states.into_iter().enumerate() {
            for (j, values) in per_agg.into_iter().enumerate() {
                let array = ScalarValue::iter_to_array(values)?;
                fields.push(Field::new(
                    format!("agg{ai}_{j}"),
                    array.data_type().clone(),
                    true,
                ));
                columns.push(array);
            }
        }
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        Ok(Some(to_ipc(&batch)?))
    }

    /// Replaces the sessions by those of `bytes` ([`Sessions::state`]).
    pub(crate) fn restore(&mut self, bytes: Option<&[u8]>) -> Result<()> {
        self.by_key.clear();
        self.gone.clear();
        let Some(bytes) = bytes else {
            return Ok(());
        };
        let batch = from_ipc(bytes)?;
        let n = batch.num_rows();
        let width = self.key_groups.len();
        let bad = || StreamSqlError::State("a session view's state has the wrong shape".into());
        let key_columns: Vec<ArrayRef> = batch.columns().iter().take(width).cloned().collect();
        let keys: Vec<Box<[u8]>> = match &self.converter {
            Some(c) => c
                .convert_columns(&key_columns)?
                .iter()
                .map(|r| Box::from(r.as_ref()))
                .collect(),
            None => vec![Box::from(&[][..]); n],
        };
        let int = |i: usize| {
            batch
                .columns()
                .get(width + i)
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
                .ok_or_else(bad)
        };
        let (starts, ends, ws, we) = (int(0)?, int(1)?, int(2)?, int(3)?);
        let mut col = width + 4;
        let mut state_cols: Vec<Vec<ArrayRef>> = Vec::with_capacity(self.aggregates.len());
        for a in &self.aggregates {
            let w = a.state_fields()?.len();
            let cols: Vec<ArrayRef> = batch.columns().iter().skip(col).take(w).cloned().collect();
            if cols.len() != w {
                return Err(bad());
            }
            state_cols.push(cols);
            col += w;
        }
        for (i, key) in keys.into_iter().enumerate() {
            let mut accumulators = self.accumulators()?;
            for (acc, cols) in accumulators.iter_mut().zip(&state_cols) {
                let slice: Vec<ArrayRef> = cols.iter().map(|c| c.slice(i, 1)).collect();
                acc.merge_batch(&slice)?;
            }
            let written = (ws.is_valid(i) && we.is_valid(i)).then(|| (ws.value(i), we.value(i)));
            self.by_key.entry(key).or_default().insert(
                starts.value(i),
                Session {
                    end: ends.value(i),
                    accumulators,
                    dirty: false,
                    written,
                },
            );
        }
        Ok(())
    }
}

fn new_accumulators(
    aggregates: &[Arc<AggregateFunctionExpr>],
) -> Result<Vec<Box<dyn Accumulator>>> {
    Ok(aggregates
        .iter()
        .map(|a| a.create_accumulator())
        .collect::<datafusion::error::Result<Vec<_>>>()?)
}

fn checked_end(last: i64, gap: i64) -> Result<i64> {
    last.checked_add(gap)
        .ok_or_else(|| StreamSqlError::NotSupported(format!("no session holds time {last}")))
}
