//! Event-time windows: `TUMBLE`, `HOP` and `SESSION` in a view's FROM
//! clause, bound on sqlparser's AST, and the assignment of each row to its
//! windows.
//!
//! `TUMBLE(source, ts, INTERVAL size)` and `HOP(source, ts, INTERVAL hop,
//! INTERVAL size)` (RisingWave's forms) are the source's rows with two
//! more columns, `window_start` and `window_end` (the time column's type):
//! a window is the half-open interval `[window_start, window_end)`, windows
//! start at multiples of their size (TUMBLE) or of the hop (HOP) counted
//! from the Unix epoch, so a row with time `t` is in the tumbling window
//! starting at `floor(t / size) * size` and in the `size / hop` hopping
//! windows whose start is a multiple of `hop` in `(t - size, t]`.
//! `SESSION(source, ts, INTERVAL gap)` gives each row the window `[t, t +
//! gap)`; the view operator merges a key's overlapping windows into
//! sessions (`session.rs`), so rows closer than `gap` share a session.
//!
//! [`bind_windows`] replaces each window call in the query's AST by a
//! table of the planning session whose scan carries the [`WindowSpec`];
//! the view operator then runs [`assign`] on every source batch (after the
//! watermark has dropped the late rows, see `watermark.rs`) before the
//! query's own stages. An offset argument and months in an interval are
//! refused with 0A000.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, RecordBatch, TimestampMicrosecondArray, UInt32Array,
};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::execution::SessionState;
use datafusion::logical_expr::Expr as LogicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::sql::sqlparser::ast::{
    Expr, ExprWithAlias, FunctionArg, FunctionArgExpr, Ident, ObjectName, ObjectNamePart, Query,
    TableAlias, TableFactor, VisitMut, VisitorMut,
};
use eddy_sql::SqlError;

use crate::error::{Result, StreamSqlError};
use crate::plan::Stage;

/// The column holding a window's first instant.
pub const WINDOW_START: &str = "window_start";
/// The column holding the instant after a window's last.
pub const WINDOW_END: &str = "window_end";

/// At most this many hopping windows hold one row (`size / hop`): each
/// row is copied once per window.
pub const MAX_WINDOWS_PER_ROW: i64 = 1000;

/// Microseconds in a day (an interval's days are 24 hours: a timestamp
/// without time zone has no daylight saving).
const DAY_MICROS: i64 = 86_400_000_000;

/// The windows a row falls into (sizes in microseconds, both positive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    Tumble {
        size: i64,
    },
    Hop {
        hop: i64,
        size: i64,
    },
    /// A session window (`session.rs`): the scan gives each row the window
    /// `[t, t + gap)`; the view operator merges a key's overlapping
    /// windows into sessions.
    Session {
        gap: i64,
    },
}

/// A window function bound to one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowSpec {
    pub kind: WindowKind,
    /// The time column's index in the source's schema.
    pub time_column: usize,
}

/// When a view writes a window's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmitMode {
    /// At every checkpoint where the row changed (an upsert).
    #[default]
    OnUpdate,
    /// Once, at the first checkpoint after the watermark passed the
    /// window's end; the window's state is dropped then.
    OnWindowClose,
}

/// Which GROUP BY column tells the window a group belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowEndKey {
    /// Index into the view's GROUP BY expressions.
    pub group: usize,
    /// `Some(size)`: the column is `window_start` (the end is `start +
    /// size`); `None`: it is `window_end`.
    pub start_plus: Option<i64>,
}

impl WindowKind {
    /// The window length in microseconds.
    pub fn size(&self) -> i64 {
        match self {
            WindowKind::Tumble { size } | WindowKind::Hop { size, .. } => *size,
            WindowKind::Session { gap } => *gap,
        }
    }

    /// Appends the `[start, end)` windows holding instant `t`, earliest
    /// first. Fails only when a bound leaves the 64-bit range.
    pub fn windows_of(&self, t: i64, out: &mut Vec<(i64, i64)>) -> Result<()> {
        let range = || StreamSqlError::NotSupported(format!("no window holds time {t}"));
        match *self {
            WindowKind::Tumble { size } => {
                let start = t.div_euclid(size).checked_mul(size).ok_or_else(range)?;
                out.push((start, start.checked_add(size).ok_or_else(range)?));
            }
            WindowKind::Hop { hop, size } => {
                let last = t.div_euclid(hop).checked_mul(hop).ok_or_else(range)?;
                let n = size / hop;
                for j in (0..n).rev() {
                    let start = j
                        .checked_mul(hop)
                        .and_then(|back| last.checked_sub(back))
                        .ok_or_else(range)?;
                    out.push((start, start.checked_add(size).ok_or_else(range)?));
                }
            }
            WindowKind::Session { gap } => out.push((t, t.checked_add(gap).ok_or_else(range)?)),
        }
        Ok(())
    }
}

/// The source's schema with `window_start` and `window_end` appended (the
/// time column's type, never null).
pub fn windowed_schema(source: &Schema, time_column: usize) -> Result<SchemaRef> {
    let ty = source
        .fields()
        .get(time_column)
        .map(|f| f.data_type().clone())
        .ok_or_else(|| StreamSqlError::Internal("window time column out of range".into()))?;
    let mut fields: Vec<Field> = source.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(WINDOW_START, ty.clone(), false));
    fields.push(Field::new(WINDOW_END, ty, false));
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        source.metadata().clone(),
    )))
}

/// The rows of `batch` (the source's schema) with their windows, as a batch
/// of `schema` ([`windowed_schema`]): one row per window a row falls into;
/// a row whose time is NULL falls into none.
pub fn assign(spec: &WindowSpec, batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let times = batch
        .columns()
        .get(spec.time_column)
        .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
        .ok_or_else(|| StreamSqlError::Internal("window time column is not a timestamp".into()))?;
    let tz = match times.data_type() {
        DataType::Timestamp(_, tz) => tz.clone(),
        _ => None,
    };
    let mut rows = Vec::with_capacity(batch.num_rows());
    let mut starts = Vec::with_capacity(batch.num_rows());
    let mut ends = Vec::with_capacity(batch.num_rows());
    let mut windows = Vec::new();
    for i in 0..times.len() {
        if times.is_null(i) {
            continue;
        }
        windows.clear();
        spec.kind.windows_of(times.value(i), &mut windows)?;
        let row = u32::try_from(i)
            .map_err(|_| StreamSqlError::Internal("a batch of more than 2^32 rows".into()))?;
        for (s, e) in &windows {
            rows.push(row);
            starts.push(*s);
            ends.push(*e);
        }
    }
    // one window per row and every row kept (TUMBLE without NULL times):
    // the source columns are the output's as they are
    let mut columns = if rows.len() == batch.num_rows() && times.null_count() == 0 {
        batch.columns().to_vec()
    } else {
        let idx = UInt32Array::from(rows);
        batch
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &idx, None))
            .collect::<std::result::Result<Vec<ArrayRef>, _>>()?
    };
    columns.push(Arc::new(
        TimestampMicrosecondArray::from(starts).with_timezone_opt(tz.clone()),
    ));
    columns.push(Arc::new(
        TimestampMicrosecondArray::from(ends).with_timezone_opt(tz),
    ));
    Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
}

/// A window call of the query, replaced by the planning-session table
/// `table`.
#[derive(Debug, Clone)]
pub struct BoundWindow {
    pub table: String,
    pub source: String,
    pub spec: WindowSpec,
}

/// Replaces every `TUMBLE(...)` / `HOP(...)` / `SESSION(...)` in `query`'s
/// FROM clauses by a table named as the returned [`BoundWindow`]s say
/// (aliased as the source unless the call has an alias). Malformed calls
/// are refused; other table functions are left to the planner (which
/// refuses them).
pub fn bind_windows(
    query: &mut Query,
    sources: &[(String, SchemaRef)],
    state: &SessionState,
) -> Result<Vec<BoundWindow>> {
    let mut binder = Binder {
        sources,
        state,
        bound: Vec::new(),
        error: None,
    };
    let _ = query.visit(&mut binder);
    match binder.error {
        Some(e) => Err(e),
        None => Ok(binder.bound),
    }
}

struct Binder<'a> {
    sources: &'a [(String, SchemaRef)],
    state: &'a SessionState,
    bound: Vec<BoundWindow>,
    error: Option<StreamSqlError>,
}

impl VisitorMut for Binder<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        match self.bind(factor) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

/// The window function a table factor's name calls, if any.
fn window_function(name: &ObjectName) -> Option<String> {
    match name.0.as_slice() {
        [ObjectNamePart::Identifier(id)] if id.quote_style.is_none() => {
            let f = id.value.to_ascii_lowercase();
            matches!(f.as_str(), "tumble" | "hop" | "session").then_some(f)
        }
        _ => None,
    }
}

fn usage(f: &str) -> StreamSqlError {
    StreamSqlError::Syntax(match f {
        "tumble" => "TUMBLE takes (source, time column, INTERVAL size)".into(),
        "session" => "SESSION takes (source, time column, INTERVAL gap)".into(),
        _ => "HOP takes (source, time column, INTERVAL hop, INTERVAL size)".into(),
    })
}

impl Binder<'_> {
    fn bind(&mut self, factor: &mut TableFactor) -> Result<()> {
        let TableFactor::Table {
            name,
            alias,
            args: args @ Some(_),
            with_ordinality,
            ..
        } = factor
        else {
            return Ok(());
        };
        let Some(f) = window_function(name) else {
            return Ok(());
        };
        if *with_ordinality {
            return Err(StreamSqlError::NotSupported(format!(
                "WITH ORDINALITY on {} is not supported",
                f.to_uppercase()
            )));
        }
        let call = args.as_ref().map(|a| (&a.args, a.settings.is_some()));
        let Some((call_args, false)) = call else {
            return Err(usage(&f));
        };
        let mut exprs = Vec::with_capacity(call_args.len());
        for a in call_args {
            match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => exprs.push(e),
                _ => return Err(usage(&f)),
            }
        }
        let wanted = if f == "hop" { 4 } else { 3 };
        if exprs.len() == wanted + 1 && f != "session" {
            return Err(StreamSqlError::NotSupported(format!(
                "{} with an offset is not supported yet: windows are aligned to the Unix epoch",
                f.to_uppercase()
            )));
        }
        let [source, column, sizes @ ..] = exprs.as_slice() else {
            return Err(usage(&f));
        };
        if exprs.len() != wanted {
            return Err(usage(&f));
        }
        let source = match source {
            Expr::Identifier(id) => eddy_sql::rewrite::ident_name(id),
            Expr::CompoundIdentifier(parts) => {
                crate::statements::object_name(&ObjectName::from(parts.clone()))?
            }
            _ => return Err(usage(&f)),
        };
        let Expr::Identifier(column) = column else {
            return Err(usage(&f));
        };
        let column = eddy_sql::rewrite::ident_name(column);
        let schema = self
            .sources
            .iter()
            .find(|(n, _)| *n == source)
            .map(|(_, s)| s)
            .ok_or_else(|| StreamSqlError::Undefined("source", source.clone()))?;
        let (time_column, field) = schema.column_with_name(&column).ok_or_else(|| {
            StreamSqlError::Sql(SqlError::UndefinedColumn(format!(
                "column \"{column}\" does not exist in source \"{source}\""
            )))
        })?;
        if !matches!(
            field.data_type(),
            DataType::Timestamp(TimeUnit::Microsecond, _)
        ) {
            return Err(StreamSqlError::Sql(SqlError::DatatypeMismatch(format!(
                "the time column of {} must be a timestamp, \"{column}\" is {}",
                f.to_uppercase(),
                field.data_type()
            ))));
        }
        let mut micros = Vec::with_capacity(sizes.len());
        for s in sizes {
            let m = interval_micros(self.state, s)?;
            if m <= 0 {
                return Err(StreamSqlError::InvalidOption(format!(
                    "a window interval must be positive, got {s}"
                )));
            }
            micros.push(m);
        }
        let kind = match micros.as_slice() {
            [gap] if f == "session" => WindowKind::Session { gap: *gap },
            [size] => WindowKind::Tumble { size: *size },
            [hop, size] => {
                if size % hop != 0 {
                    return Err(StreamSqlError::InvalidOption(format!(
                        "the HOP window size ({size} µs) must be a multiple of its hop ({hop} µs)"
                    )));
                }
                if size / hop > MAX_WINDOWS_PER_ROW {
                    return Err(StreamSqlError::NotSupported(format!(
                        "HOP with more than {MAX_WINDOWS_PER_ROW} windows per row (size / hop) \
                         is not supported"
                    )));
                }
                WindowKind::Hop {
                    hop: *hop,
                    size: *size,
                }
            }
            _ => return Err(usage(&f)),
        };
        let mut table = format!("{f} {}", self.bound.len());
        while self.sources.iter().any(|(n, _)| *n == table) {
            table.push('_');
        }
        if alias.is_none() {
            *alias = Some(TableAlias {
                explicit: true,
                name: Ident::with_quote('"', source.clone()),
                columns: Vec::new(),
                at: None,
            });
        }
        *name = ObjectName::from(vec![Ident::with_quote('"', table.clone())]);
        *args = None;
        self.bound.push(BoundWindow {
            table,
            source,
            spec: WindowSpec { kind, time_column },
        });
        Ok(())
    }
}

/// The length of a constant interval expression in microseconds, planned
/// by DataFusion's SQL front end (so every interval syntax a query accepts
/// is accepted). Months are refused: they have no fixed length.
pub fn interval_micros(state: &SessionState, expr: &Expr) -> Result<i64> {
    let planned = state.create_logical_expr_from_sql_expr(
        ExprWithAlias {
            expr: expr.clone(),
            alias: None,
        },
        &DFSchema::empty(),
    )?;
    let not_interval =
        || StreamSqlError::NotSupported(format!("{expr} must be a constant INTERVAL"));
    let months = || {
        StreamSqlError::NotSupported(format!(
            "interval {expr} counts months, which have no fixed length: use days or smaller \
             units"
        ))
    };
    let overflow = || StreamSqlError::InvalidOption(format!("interval {expr} is out of range"));
    let LogicalExpr::Literal(value, _) = planned else {
        return Err(not_interval());
    };
    match value {
        ScalarValue::IntervalMonthDayNano(Some(v)) => {
            if v.months != 0 {
                return Err(months());
            }
            if v.nanoseconds % 1000 != 0 {
                return Err(StreamSqlError::NotSupported(format!(
                    "interval {expr} is finer than a microsecond"
                )));
            }
            i64::from(v.days)
                .checked_mul(DAY_MICROS)
                .and_then(|d| d.checked_add(v.nanoseconds / 1000))
                .ok_or_else(overflow)
        }
        ScalarValue::IntervalDayTime(Some(v)) => i64::from(v.days)
            .checked_mul(DAY_MICROS)
            .and_then(|d| d.checked_add(i64::from(v.milliseconds) * 1000))
            .ok_or_else(overflow),
        ScalarValue::IntervalYearMonth(Some(_)) => Err(months()),
        _ => Err(not_interval()),
    }
}

/// Follows the columns of the window's output (`window_start` at
/// `source_width`, `window_end` after it) through the scan projection and
/// the pre stages to the GROUP BY expressions; `None` when no GROUP BY
/// expression is one of them unchanged.
pub fn window_end_key(
    kind: &WindowKind,
    source_width: usize,
    scan_projection: Option<&[usize]>,
    pre: &[Stage],
    group_exprs: &[Arc<dyn datafusion::physical_expr::PhysicalExpr>],
) -> Option<WindowEndKey> {
    // origin[i]: the windowed-source column that column i of the current
    // stage's output is, if it is one unchanged
    let origin = crate::stages::trace_origins(
        match scan_projection {
            Some(p) => p.iter().map(|i| Some(*i)).collect(),
            None => (0..source_width + 2).map(Some).collect(),
        },
        pre,
    );
    let source_of = |g: &Arc<dyn datafusion::physical_expr::PhysicalExpr>| {
        g.downcast_ref::<Column>()
            .and_then(|c| origin.get(c.index()).copied().flatten())
    };
    let end = source_width + 1;
    if let Some(group) = group_exprs.iter().position(|g| source_of(g) == Some(end)) {
        return Some(WindowEndKey {
            group,
            start_plus: None,
        });
    }
    group_exprs
        .iter()
        .position(|g| source_of(g) == Some(source_width))
        .map(|group| WindowEndKey {
            group,
            start_plus: Some(kind.size()),
        })
}

impl WindowEndKey {
    /// The window end of the group whose GROUP BY values are row `row` of
    /// `keys`.
    pub fn end_at(&self, keys: &[ArrayRef], row: usize) -> Result<i64> {
        let column = keys
            .get(self.group)
            .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
            .filter(|c| row < c.len() && c.is_valid(row))
            .ok_or_else(|| {
                StreamSqlError::Internal("a group's window column is not a timestamp".into())
            })?;
        let v = column.value(row);
        match self.start_plus {
            None => Ok(v),
            Some(size) => v.checked_add(size).ok_or_else(|| {
                StreamSqlError::Internal(format!("window starting at {v} ends out of range"))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(kind: WindowKind, t: i64) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        kind.windows_of(t, &mut out).expect("windows");
        out
    }

    #[test]
    fn a_tumbling_window_holds_its_start_but_not_its_end() {
        let k = WindowKind::Tumble { size: 10 };
        assert_eq!(windows(k, 0), vec![(0, 10)]);
        assert_eq!(windows(k, 9), vec![(0, 10)]);
        assert_eq!(windows(k, 10), vec![(10, 20)]);
    }

    #[test]
    fn negative_times_round_down_not_towards_zero() {
        let k = WindowKind::Tumble { size: 10 };
        assert_eq!(windows(k, -1), vec![(-10, 0)]);
        assert_eq!(windows(k, -10), vec![(-10, 0)]);
        assert_eq!(windows(k, -11), vec![(-20, -10)]);
        let h = WindowKind::Hop { hop: 5, size: 15 };
        assert_eq!(windows(h, -1), vec![(-15, 0), (-10, 5), (-5, 10)]);
    }

    #[test]
    fn hopping_windows_overlap_size_over_hop_times() {
        let h = WindowKind::Hop { hop: 5, size: 15 };
        assert_eq!(windows(h, 7), vec![(-5, 10), (0, 15), (5, 20)]);
        assert_eq!(windows(h, 15), vec![(5, 20), (10, 25), (15, 30)]);
        for t in -40..40 {
            let w = windows(h, t);
            assert_eq!(w.len(), 3);
            assert!(w
                .iter()
                .all(|(s, e)| *s <= t && t < *e && e - s == 15 && s % 5 == 0));
        }
        // hop == size is a tumbling window
        let same = WindowKind::Hop { hop: 10, size: 10 };
        for t in -25..25 {
            assert_eq!(
                windows(same, t),
                windows(WindowKind::Tumble { size: 10 }, t)
            );
        }
    }

    #[test]
    fn a_session_row_opens_the_window_of_its_gap() {
        let k = WindowKind::Session { gap: 10 };
        assert_eq!(windows(k, -3), vec![(-3, 7)]);
        assert_eq!(k.size(), 10);
        assert!(k.windows_of(i64::MAX - 5, &mut Vec::new()).is_err());
    }

    #[test]
    fn bounds_out_of_range_are_an_error_not_a_wrap() {
        let k = WindowKind::Tumble { size: 1_000_000 };
        assert!(k.windows_of(i64::MAX, &mut Vec::new()).is_err());
        assert!(k.windows_of(i64::MIN, &mut Vec::new()).is_err());
    }

    #[test]
    fn assign_copies_a_row_into_each_of_its_windows() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int32, false),
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(datafusion::arrow::array::Int32Array::from(vec![1, 2, 3])),
                Arc::new(TimestampMicrosecondArray::from(vec![
                    Some(7),
                    None,
                    Some(-1),
                ])),
            ],
        )
        .expect("batch");
        let out_schema = windowed_schema(&schema, 1).expect("schema");
        let spec = WindowSpec {
            kind: WindowKind::Hop { hop: 5, size: 10 },
            time_column: 1,
        };
        let out = assign(&spec, &batch, &out_schema).expect("assign");
        assert_eq!(out.num_rows(), 4, "two windows each, the NULL time in none");
        let ks = out
            .column(0)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Int32Array>()
            .expect("k");
        let starts = out
            .column(2)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .expect("start");
        let ends = out
            .column(3)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .expect("end");
        let got: Vec<(i32, i64, i64)> = (0..4)
            .map(|i| (ks.value(i), starts.value(i), ends.value(i)))
            .collect();
        assert_eq!(got, vec![(1, 0, 10), (1, 5, 15), (3, -10, 0), (3, -5, 5)]);
    }

    #[test]
    fn assign_a_tumbling_window_keeps_the_rows_as_they_are() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            false,
        )]));
        let times = TimestampMicrosecondArray::from(vec![-1, 0, 25]).with_timezone("+00:00");
        let batch =
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(times)]).expect("batch");
        let out_schema = windowed_schema(&schema, 0).expect("schema");
        let spec = WindowSpec {
            kind: WindowKind::Tumble { size: 10 },
            time_column: 0,
        };
        let out = assign(&spec, &batch, &out_schema).expect("assign");
        assert_eq!(out.column(0), batch.column(0));
        let bounds = |c: usize| {
            out.column(c)
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .expect("bound")
                .values()
                .to_vec()
        };
        assert_eq!(bounds(1), vec![-10, 0, 20]);
        assert_eq!(bounds(2), vec![0, 10, 30]);
        assert_eq!(
            out.schema().field(1).data_type(),
            batch.schema().field(0).data_type()
        );
    }
}
