//! A source's watermark: `WATERMARK FOR ts AS ts - INTERVAL '5 seconds'`,
//! and the clock that drops late rows.
//!
//! Invariant the view operator relies on: **the watermark is a function of
//! the source prefix, row by row.** Before row `i` the watermark is `max(ts
//! of the rows before i that were kept) - delay` (no watermark before the
//! first row); row `i` is late, and dropped, when its time is below it (a
//! NULL time is late too). Batch boundaries play no part, so a job replaying
//! the source after a restore (whose batches are cut differently) keeps and
//! drops exactly the same rows, and a test can compute the answer from the
//! rows alone. The watermark only grows; a window `[s, e)` is *closed* once
//! the watermark is at least `e`: every row it could still receive would be
//! late, so its state can be dropped without changing any answer.
//!
//! The clock is part of the view operator's checkpoint (its maximum time
//! and the count of late rows), so it is restored with the groups.

use datafusion::arrow::array::{Array, BooleanArray, RecordBatch, TimestampMicrosecondArray};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, Ident};
use eddy_common::ColumnType;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StreamSqlError};

/// A source's watermark as the catalog keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatermarkDef {
    /// The event-time column (a timestamp).
    pub column: String,
    /// How far the watermark trails the largest time seen, in µs (>= 0).
    pub delay_micros: i64,
}

impl WatermarkDef {
    /// Binds `WATERMARK FOR column AS expr` to the source's `columns`:
    /// `expr` is `column` or `column - INTERVAL '...'` (a constant, not
    /// negative); anything else is refused (0A000).
    pub fn bind(
        column: &Ident,
        expr: &Expr,
        columns: &[(String, ColumnType)],
    ) -> Result<WatermarkDef> {
        let name = eddy_sql::rewrite::ident_name(column);
        match columns.iter().find(|(n, _)| *n == name) {
            Some((_, ColumnType::Timestamp | ColumnType::TimestampTz)) => {}
            Some((_, ty)) => {
                return Err(StreamSqlError::Sql(eddy_sql::SqlError::DatatypeMismatch(
                    format!("the watermark column \"{name}\" must be a timestamp, not {ty}"),
                )))
            }
            None => {
                return Err(StreamSqlError::Sql(eddy_sql::SqlError::UndefinedColumn(
                    format!("watermark column \"{name}\" is not a column of the source"),
                )))
            }
        }
        let shape = || {
            StreamSqlError::NotSupported(format!(
                "watermark {expr} is not supported: write {name} or {name} - INTERVAL '...'"
            ))
        };
        let is_column = |e: &Expr| matches!(e, Expr::Identifier(id) if eddy_sql::rewrite::ident_name(id) == name);
        let mut e = expr;
        while let Expr::Nested(inner) = e {
            e = inner;
        }
        let delay_micros = match e {
            e if is_column(e) => 0,
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Minus,
                right,
            } if is_column(left) => {
                let state = datafusion::prelude::SessionContext::new().state();
                crate::window::interval_micros(&state, right).map_err(|e| match e {
                    StreamSqlError::NotSupported(_) | StreamSqlError::DataFusion(_) => shape(),
                    other => other,
                })?
            }
            _ => return Err(shape()),
        };
        if delay_micros < 0 {
            return Err(StreamSqlError::InvalidOption(format!(
                "watermark {expr} runs ahead of its column: the interval must not be negative"
            )));
        }
        Ok(WatermarkDef {
            column: name,
            delay_micros,
        })
    }

    /// The definition as SQL, for `SHOW SOURCES`.
    pub fn describe(&self) -> String {
        let d = self.delay_micros;
        let interval = if d % 1_000_000 == 0 {
            format!("{} seconds", d / 1_000_000)
        } else if d % 1000 == 0 {
            format!("{} milliseconds", d / 1000)
        } else {
            format!("{d} microseconds")
        };
        format!(
            "WATERMARK FOR {c} AS {c} - INTERVAL '{interval}'",
            c = self.column
        )
    }
}

/// What of the clock goes into a checkpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockState {
    /// The largest time of a kept row (`None`: no row yet).
    pub max_time: Option<i64>,
    /// Rows dropped as late so far.
    pub late_rows: u64,
}

/// Drops late rows and keeps the watermark (see the module doc).
#[derive(Debug, Clone)]
pub struct EventClock {
    /// The time column's index in the source's schema.
    column: usize,
    delay: i64,
    state: ClockState,
}

impl EventClock {
    pub fn new(column: usize, delay_micros: i64) -> EventClock {
        EventClock {
            column,
            delay: delay_micros,
            state: ClockState::default(),
        }
    }

    /// The watermark now: rows below it are late, windows ending at or
    /// before it are closed.
    pub fn watermark(&self) -> Option<i64> {
        self.state.max_time.map(|m| m.saturating_sub(self.delay))
    }

    pub fn state(&self) -> ClockState {
        self.state
    }

    pub fn restore(&mut self, state: ClockState) {
        self.state = state;
    }

    /// `batch` (the source's schema) without its late rows; advances the
    /// watermark row by row.
    pub fn admit(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let times = batch
            .columns()
            .get(self.column)
            .filter(|c| matches!(c.data_type(), DataType::Timestamp(TimeUnit::Microsecond, _)))
            .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
            .ok_or_else(|| {
                StreamSqlError::Internal("the watermark column is not a timestamp".into())
            })?;
        let mut keep = Vec::with_capacity(times.len());
        let mut late = 0u64;
        for i in 0..times.len() {
            let kept = times.is_valid(i) && {
                let t = times.value(i);
                let on_time = self.watermark().is_none_or(|w| t >= w);
                if on_time && self.state.max_time.is_none_or(|m| t > m) {
                    self.state.max_time = Some(t);
                }
                on_time
            };
            late += u64::from(!kept);
            keep.push(kept);
        }
        if late == 0 {
            return Ok(batch);
        }
        self.state.late_rows += late;
        Ok(filter_record_batch(&batch, &BooleanArray::from(keep))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    use std::sync::Arc;

    fn bind(expr: &str) -> Result<WatermarkDef> {
        let e = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(expr)
            .and_then(|mut p| p.parse_expr())
            .expect("expr");
        WatermarkDef::bind(
            &Ident::new("TS"),
            &e,
            &[
                ("ts".into(), ColumnType::Timestamp),
                ("k".into(), ColumnType::Int),
            ],
        )
    }

    #[test]
    fn a_watermark_is_its_column_less_a_constant_interval() {
        assert_eq!(
            bind("ts - INTERVAL '5 seconds'").expect("5 s").delay_micros,
            5_000_000
        );
        assert_eq!(
            bind("(ts - INTERVAL '1' MINUTE)")
                .expect("1 min")
                .delay_micros,
            60_000_000
        );
        assert_eq!(
            bind("ts - INTERVAL '250 milliseconds'")
                .expect("ms")
                .delay_micros,
            250_000
        );
        assert_eq!(bind("ts").expect("no delay").delay_micros, 0);
        assert_eq!(
            bind("ts - INTERVAL '5 seconds'").expect("5 s").describe(),
            "WATERMARK FOR ts AS ts - INTERVAL '5 seconds'"
        );
        for refused in [
            "ts + INTERVAL '5 seconds'",
            "k - INTERVAL '5 seconds'",
            "ts - INTERVAL '1 month'",
            "ts - 5",
            "now()",
        ] {
            assert!(
                matches!(bind(refused), Err(StreamSqlError::NotSupported(_))),
                "{refused}: {:?}",
                bind(refused)
            );
        }
        assert!(matches!(
            bind("ts - INTERVAL '-5 seconds'"),
            Err(StreamSqlError::InvalidOption(_))
        ));
        let on_int = WatermarkDef::bind(
            &Ident::new("k"),
            &Expr::Identifier(Ident::new("k")),
            &[("k".into(), ColumnType::Int)],
        );
        assert!(matches!(on_int, Err(StreamSqlError::Sql(_))));
    }

    fn batch(times: &[Option<i64>]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            true,
        )]));
        RecordBatch::try_new(
            schema,
            vec![Arc::new(TimestampMicrosecondArray::from(times.to_vec()))],
        )
        .expect("batch")
    }

    fn kept(b: &RecordBatch) -> Vec<i64> {
        let a = b
            .column(0)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .expect("ts");
        a.values().to_vec()
    }

    #[test]
    fn late_rows_are_dropped_row_by_row_and_counted() {
        let mut c = EventClock::new(0, 10);
        assert_eq!(c.watermark(), None);
        let out = c
            .admit(batch(&[
                Some(100),
                Some(95),
                Some(89),
                Some(90),
                None,
                Some(120),
                Some(109),
            ]))
            .expect("admit");
        // 100 sets the watermark to 90: 95 and 90 are on time, 89 is late;
        // 120 moves it to 110, so 109 is late
        assert_eq!(kept(&out), vec![100, 95, 90, 120]);
        assert_eq!(c.watermark(), Some(110));
        assert_eq!(c.state().late_rows, 3, "two late rows and a NULL time");
    }

    #[test]
    fn batch_boundaries_do_not_change_what_is_late() {
        let times: Vec<Option<i64>> = (0..200i64).map(|i| Some(i * 7 - (i * 7919 % 50))).collect();
        let mut whole = EventClock::new(0, 20);
        let all = kept(&whole.admit(batch(&times)).expect("admit"));
        for cut in [1usize, 3, 64] {
            let mut parts = EventClock::new(0, 20);
            let mut got = Vec::new();
            for chunk in times.chunks(cut) {
                got.extend(kept(&parts.admit(batch(chunk)).expect("admit")));
            }
            assert_eq!(got, all, "batches of {cut}");
            assert_eq!(parts.state(), whole.state());
        }
        assert!(whole.state().late_rows > 0, "the sequence has late rows");
    }

    #[test]
    fn a_restored_clock_continues_where_the_checkpoint_was() {
        let mut a = EventClock::new(0, 5);
        a.admit(batch(&[Some(50), Some(30)])).expect("admit");
        let mut b = EventClock::new(0, 5);
        b.restore(a.state());
        let out = b.admit(batch(&[Some(44), Some(45)])).expect("admit");
        assert_eq!(kept(&out), vec![45]);
        assert_eq!(b.state().late_rows, 2);
    }
}
