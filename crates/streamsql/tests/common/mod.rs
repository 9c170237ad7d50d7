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

/// A step of a two-source join model test.
#[derive(Debug, Clone)]
pub enum JoinStep {
    /// Rows of source 0 (a) or 1 (b): (k, time in ms, any order).
    Batch(usize, Vec<(i32, i64)>),
    Checkpoint {
        durable: bool,
        committed: bool,
    },
    Crash,
}

/// The view's rows in a comparable form (each model says how it fills it).
pub type JoinAnswer = std::collections::BTreeMap<(i64, i64, i32), i64>;

/// What a two-source join model test checks of its view.
pub trait JoinModel: std::fmt::Debug {
    /// The view by batch recomputation over the sources' prefixes.
    fn answer(&self, a: &[Row], b: &[Row]) -> JoinAnswer;
    /// The view's table in the same form.
    fn table_rows(&self, table: &eddy_storage::Table) -> JoinAnswer;
    /// The rows the join holds once it has seen both prefixes.
    fn held(&self, a: &[Row], b: &[Row]) -> usize;
    /// Checks of the view's statistics after a checkpoint committed (with
    /// `commits_before` commits before it and `held` rows expected).
    fn after_commit(&self, _target: &ViewTarget, _commits_before: u64, _held: usize) {}
}

/// Runs `steps` through the view `plan` over sources a and b, with
/// checkpoints, commits and crashes (restore from the last durable
/// snapshot, replay what followed it); after every commit and crash the
/// view's table must equal `model`'s answer over the rows its recorded
/// checkpoint covers, and at the end over every row.
pub fn run_join_model(model: &dyn JoinModel, plan: ViewPlan, steps: Vec<JoinStep>) {
    use eddy_storage::{Engine, EngineConfig};
    use eddy_stream::operator::sink::FINAL_TAG;
    use eddy_stream::types::CheckpointId;
    use eddy_streamsql::view_op::{checkpoint_table, view_table};
    use std::collections::HashMap;

    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.sync = false;
    let engine = Engine::open(cfg).expect("engine");
    let checkpoints = engine
        .create_table(checkpoint_table())
        .expect("checkpoints");
    let plan = Arc::new(plan);
    let target = ViewTarget {
        table: engine
            .create_table(view_table("joined", &plan))
            .expect("view table"),
        checkpoints: Arc::clone(&checkpoints),
        engine: Arc::clone(&engine),
        job: "joined".into(),
        stats: Arc::default(),
    };
    let mut op = Op::new(&plan, &target);
    let mut logs: [Vec<Row>; 2] = [Vec::new(), Vec::new()];
    let mut next_id = 1u64;
    // checkpoint tag → the source positions it covers
    let mut positions: HashMap<u64, (usize, usize)> = HashMap::new();
    let mut durable: Option<(Vec<u8>, usize, usize)> = None;
    let check = |logs: &[Vec<Row>; 2], positions: &HashMap<u64, (usize, usize)>| {
        let (na, nb) = positions
            .get(&recorded_tag(&target))
            .copied()
            .unwrap_or((0, 0));
        assert_eq!(
            model.table_rows(&target.table),
            model.answer(&logs[0][..na], &logs[1][..nb]),
            "{model:?} over the {na} + {nb} recorded rows"
        );
    };
    for s in steps {
        match s {
            JoinStep::Batch(side, rows) => {
                let rows: Vec<Row> = rows
                    .into_iter()
                    .enumerate()
                    .map(|(i, (k, ms))| ((logs[side].len() + i) as i64, k, ms * MS))
                    .collect();
                logs[side].extend_from_slice(&rows);
                op.op()
                    .process(
                        side,
                        Box::new(vec![ArrowBatch(batch(&rows))]),
                        &mut NoOutput,
                    )
                    .expect("process");
            }
            JoinStep::Checkpoint {
                durable: keep,
                committed,
            } => {
                let id = CheckpointId(next_id);
                next_id += 1;
                positions.insert(id.0, (logs[0].len(), logs[1].len()));
                let snap = op.op().snapshot(id).expect("snapshot").expect("state");
                let held = model.held(&logs[0], &logs[1]);
                assert_eq!(op.held(), held, "{model:?}: the rows the join holds");
                if keep {
                    durable = Some((snap, logs[0].len(), logs[1].len()));
                    if committed {
                        let commits = target.stats.report().commits;
                        op.op().checkpoint_complete(id, false).expect("commit");
                        check(&logs, &positions);
                        model.after_commit(&target, commits, held);
                    }
                }
            }
            JoinStep::Crash => {
                op = Op::new(&plan, &target);
                let (fa, fb) = match &durable {
                    Some((snap, fa, fb)) => {
                        op.op().restore(snap).expect("restore");
                        (*fa, *fb)
                    }
                    None => (0, 0),
                };
                check(&logs, &positions);
                replay_two_sources(op.op(), &logs[0][fa..], &logs[1][fb..]);
            }
        }
    }
    positions.insert(FINAL_TAG, (logs[0].len(), logs[1].len()));
    op.op()
        .snapshot(CheckpointId(FINAL_TAG))
        .expect("final snapshot");
    op.op()
        .checkpoint_complete(CheckpointId(FINAL_TAG), true)
        .expect("final commit");
    assert_eq!(
        model.table_rows(&target.table),
        model.answer(&logs[0], &logs[1]),
        "{model:?}: the finished view"
    );
}
