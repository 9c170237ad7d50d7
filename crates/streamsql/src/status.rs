//! What the server's console shows of each materialized view's job: its
//! graph as the stream engine compiled it (chained operators and their
//! parallelism), the steps its view operator runs, its status, its commit
//! figures and its last checkpoint. Built by
//! [`StreamManager::job_reports`](crate::StreamManager::job_reports) from
//! what the manager already tracks; nothing here is estimated.

use eddy_common::{Row, Value};
use eddy_stream::graph::{JobGraph, ShipStrategy};
use serde::Serialize;

use crate::plan::{Stage, ViewPlan};
use crate::statements::{SourceDef, ViewDef};
use crate::view_op::ViewStatsReport;

/// Subtasks of every view job (one source subtask feeding one view
/// operator: the operator's state is not partitioned yet).
pub const VIEW_JOB_PARALLELISM: usize = 1;

/// A vertex of the compiled job graph: operators chained into one task.
#[derive(Debug, Clone, Serialize)]
pub struct VertexReport {
    pub id: u32,
    /// The chained operators, head first.
    pub operators: Vec<String>,
    pub parallelism: usize,
}

/// An edge between two vertices.
#[derive(Debug, Clone, Serialize)]
pub struct EdgeReport {
    pub from: u32,
    pub to: u32,
    /// `forward`, `rebalance` or `hash`.
    pub strategy: &'static str,
}

/// A job's graph as `JobGraph::compile` made it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct JobGraphReport {
    pub vertices: Vec<VertexReport>,
    pub edges: Vec<EdgeReport>,
}

impl JobGraphReport {
    pub fn of(job: &JobGraph) -> JobGraphReport {
        let node_name = |n: &eddy_stream::types::NodeId| {
            job.stream
                .nodes
                .get(n.0 as usize)
                .map(|node| node.name.clone())
                .unwrap_or_else(|| format!("node {}", n.0))
        };
        JobGraphReport {
            vertices: job
                .vertices
                .iter()
                .map(|v| VertexReport {
                    id: v.id.0,
                    operators: v.nodes.iter().map(node_name).collect(),
                    parallelism: v.parallelism,
                })
                .collect(),
            edges: job
                .edges
                .iter()
                .map(|e| EdgeReport {
                    from: e.from.0,
                    to: e.to.0,
                    strategy: match e.strategy {
                        ShipStrategy::Forward => "forward",
                        ShipStrategy::Rebalance => "rebalance",
                        ShipStrategy::Hash => "hash",
                    },
                })
                .collect(),
        }
    }
}

/// The newest committed checkpoint of a job (its row of
/// `eddy_stream_checkpoints`).
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointReport {
    pub checkpoint: i64,
    /// Source rows the view reflects as of this checkpoint.
    pub source_rows: i64,
    /// Commit time, microseconds since the Unix epoch (UTC).
    pub committed_at_micros: i64,
}

/// One view's job.
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    /// The view (and its table, of the same name).
    pub view: String,
    pub source: String,
    /// The source's connector (`datagen`); empty when the source is gone.
    pub connector: String,
    /// `running`, `running (restart n)`, `failed: ...`, ...
    pub status: String,
    pub definition: String,
    pub checkpoint_interval_ms: u64,
    /// Empty when the job did not start.
    pub graph: JobGraphReport,
    /// What the view operator does to each batch, in order.
    pub steps: Vec<String>,
    /// Records the job's sources emitted since it last started.
    pub source_records: Option<u64>,
    /// Commits since the server started.
    pub commits: u64,
    /// Rows upserted or deleted in the view's table since the server
    /// started.
    pub rows_written: u64,
    /// Source rows covered by the last commit (since the view was created).
    pub committed_source_rows: u64,
    /// (quantile, seconds) from a source row's arrival to the commit that
    /// made it visible, since the server started; empty before a commit.
    pub freshness: Vec<(f64, f64)>,
    pub freshness_count: u64,
    pub last_checkpoint: Option<CheckpointReport>,
}

/// What the manager knows of one view, gathered under its catalog lock.
pub(crate) struct JobParts<'a> {
    pub view: &'a ViewDef,
    pub source: Option<&'a SourceDef>,
    pub plan: Option<&'a ViewPlan>,
    pub status: String,
    pub source_records: Option<u64>,
    pub stats: Option<ViewStatsReport>,
    pub graph: Option<&'a JobGraphReport>,
    /// The view's row of the checkpoint table.
    pub checkpoint: Option<Row>,
}

impl JobReport {
    pub(crate) fn from_parts(p: JobParts<'_>) -> JobReport {
        let stats = p.stats.unwrap_or_default();
        let last_checkpoint = match p.checkpoint.as_deref() {
            Some([_, Value::BigInt(c), Value::BigInt(s), Value::Timestamp(at), ..]) => {
                Some(CheckpointReport {
                    checkpoint: *c,
                    source_rows: *s,
                    committed_at_micros: *at,
                })
            }
            _ => None,
        };
        JobReport {
            view: p.view.name.clone(),
            source: p.view.source.clone(),
            connector: p.source.map(|s| s.connector.clone()).unwrap_or_default(),
            status: p.status,
            definition: p.view.statement.clone(),
            checkpoint_interval_ms: p.view.checkpoint_interval_ms,
            graph: p.graph.cloned().unwrap_or_default(),
            steps: p.plan.map(steps_of).unwrap_or_default(),
            source_records: p.source_records,
            commits: stats.commits,
            rows_written: stats.rows_written,
            committed_source_rows: stats.source_rows,
            freshness: stats.freshness,
            freshness_count: stats.freshness_count,
            last_checkpoint,
        }
    }
}

fn list<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn stage_step(stage: &Stage, filter_word: &str) -> String {
    match stage {
        Stage::Filter { predicate, .. } => format!("{filter_word} {predicate}"),
        Stage::Project { exprs, .. } => format!("project {}", list(exprs)),
        Stage::Lookup(join) => format!("lookup join {}", join.table),
    }
}

/// The view operator's steps: stages before the aggregate, the keyed
/// aggregate, stages after it (a filter there is the HAVING clause).
fn steps_of(plan: &ViewPlan) -> Vec<String> {
    let mut steps: Vec<String> = plan.pre.iter().map(|s| stage_step(s, "filter")).collect();
    let aggregates = list(plan.aggregates.iter().map(|a| a.name().to_string()));
    if plan.group_exprs.is_empty() {
        steps.push(format!("aggregate (one group): {aggregates}"));
    } else {
        steps.push(format!(
            "aggregate by {}: {aggregates}",
            list(&plan.group_exprs)
        ));
    }
    steps.extend(plan.post.iter().map(|s| stage_step(s, "having")));
    steps
}
