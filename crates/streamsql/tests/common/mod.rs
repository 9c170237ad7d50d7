//! What the stream model tests (window, session, interval, equi and semi
//! join, append) share: their source rows, the operator output they
//! ignore, the watermark model, the plan of a view over their source, the
//! checkpoint a view's table records and the view operator of either kind.
#![allow(dead_code, reason = "each test binary uses a part")]

use std::sync::Arc;

use datafusion::arrow::array::TimestampMicrosecondArray;
use datafusion::arrow::array::{Int32Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use eddy_common::Value;
use eddy_stream::operator::{Emitter, Operator};
use eddy_stream::types::AnyBatch;
use eddy_streamsql::append_op::AppendOperator;
use eddy_streamsql::batch::ArrowBatch;
use eddy_streamsql::plan::{plan_view_with, ViewPlan};
use eddy_streamsql::statements::{parse, StreamStatement};
use eddy_streamsql::view_op::{ViewOperator, ViewTarget};
use eddy_streamsql::watermark::WatermarkDef;

pub const MS: i64 = 1000;
/// The watermark trails the largest time by this much.
pub const DELAY: i64 = 5 * MS;

/// A source row: (id, k, time in µs).
pub type Row = (i64, i32, i64);

pub struct NoOutput;

impl Emitter for NoOutput {
    fn emit(&mut self, _batch: AnyBatch) -> eddy_stream::Result<()> {
        Ok(())
    }
    fn watermark(&mut self, _wm: i64) -> eddy_stream::Result<()> {
        Ok(())
    }
}

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k", DataType::Int32, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
    ]))
}

pub fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(TimestampMicrosecondArray::from_iter_values(
                rows.iter().map(|r| r.2),
            )),
        ],
    )
    .expect("batch")
}

/// The rows the watermark keeps, and the watermark after them, computed
/// row by row: a row is late when its time is below the largest time kept
/// before it less the delay.
pub fn on_time(rows: &[Row]) -> (Vec<Row>, Option<i64>) {
    let mut max: Option<i64> = None;
    let mut kept = Vec::new();
    for r in rows {
        if max.is_some_and(|m| r.2 < m - DELAY) {
            continue;
        }
        max = Some(max.map_or(r.2, |m| m.max(r.2)));
        kept.push(*r);
    }
    (kept, max.map(|m| m - DELAY))
}

/// The plan of a `CREATE MATERIALIZED VIEW` statement over the source
/// `src` ([`schema`]), whose watermark trails `ts` by [`DELAY`].
pub fn plan_over_src(sql: &str) -> ViewPlan {
    let StreamStatement::CreateView { query, emit, .. } = parse(sql).expect("parse") else {
        panic!("not a view")
    };
    let watermark = WatermarkDef {
        column: "ts".into(),
        delay_micros: DELAY,
    };
    plan_view_with(
        &query,
        &[("src".into(), schema())],
        &[("src".into(), watermark)],
        emit,
    )
    .expect("plan")
}

/// After a crash, the two sources of a join replay from their own
/// positions, interleaved in batches of two rows, `b` (input 1) first: the
/// order differs from the first run's on purpose.
pub fn replay_two_sources(op: &mut dyn Operator, a: &[Row], b: &[Row]) {
    let mut ca = a.chunks(2);
    let mut cb = b.chunks(2);
    loop {
        let nb = cb.next();
        let na = ca.next();
        if na.is_none() && nb.is_none() {
            break;
        }
        for (side, chunk) in [(1, nb), (0, na)] {
            if let Some(c) = chunk {
                op.process(side, Box::new(vec![ArrowBatch(batch(c))]), &mut NoOutput)
                    .expect("replay");
            }
        }
    }
}

/// The checkpoint tag the view's table records (0: none).
pub fn recorded_tag(target: &ViewTarget) -> u64 {
    match target
        .checkpoints
        .get(&[Value::Text(target.job.clone())])
        .expect("get")
        .as_deref()
    {
        Some([_, Value::BigInt(tag), ..]) => *tag as u64,
        _ => 0,
    }
}

/// The view's operator, which is either kind.
pub enum Op {
    Grouped(Box<ViewOperator>),
    Append(Box<AppendOperator>),
}

impl Op {
    pub fn new(plan: &Arc<ViewPlan>, target: &ViewTarget) -> Op {
        if plan.append {
            Op::Append(Box::new(
                AppendOperator::new(Arc::clone(plan), target.clone()).expect("operator"),
            ))
        } else {
            Op::Grouped(Box::new(
                ViewOperator::new(Arc::clone(plan), target.clone()).expect("operator"),
            ))
        }
    }
    pub fn op(&mut self) -> &mut dyn Operator {
        match self {
            Op::Grouped(o) => o.as_mut(),
            Op::Append(o) => o.as_mut(),
        }
    }
    pub fn held(&self) -> usize {
        match self {
            Op::Grouped(o) => o.held_join_rows(),
            Op::Append(o) => o.held_join_rows(),
        }
    }
}
