//! StreamGraph -> JobGraph (operator chaining) -> ExecutionGraph
//! (parallel subtasks placed on slots, with memory or network channels).
//!
//! Chaining rule (`JobGraph::compile`): an edge `A -> B` is fused iff it is
//! `Forward`, `parallelism(A) == parallelism(B)`, A has exactly one outgoing
//! edge, B exactly one incoming edge, B is not a source, and neither node
//! has chaining disabled. A forward edge between different parallelisms is
//! shipped as `Rebalance`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Result, StreamError};
use crate::operator::{Operator, SubtaskInfo};
use crate::source::ErasedSource;
use crate::types::{NodeId, SubtaskId, TaskManagerId, TypeInfo, VertexId, WriterFactory};

/// Creates an operator instance for a subtask.
pub type OperatorFactory = Arc<dyn Fn(&SubtaskInfo) -> Result<Box<dyn Operator>> + Send + Sync>;
/// Creates a source instance for a subtask.
pub type SourceFactory = Arc<dyn Fn(&SubtaskInfo) -> Result<Box<dyn ErasedSource>> + Send + Sync>;

/// What a node does.
#[derive(Clone)]
pub enum NodeKind {
    /// No input; produces records.
    Source(SourceFactory),
    /// One or two inputs (or a sink: one input, no output).
    Operator {
        /// The factory.
        factory: OperatorFactory,
        /// Number of logical inputs (1 or 2).
        inputs: usize,
    },
}

/// A node of the StreamGraph: one API call.
#[derive(Clone)]
pub struct StreamNode {
    /// Id (index in `StreamGraph::nodes`).
    pub id: NodeId,
    /// Name for logs.
    pub name: String,
    /// What it does.
    pub kind: NodeKind,
    /// User-set parallelism.
    pub parallelism: Option<usize>,
    /// Upper bound (sockets: 1).
    pub max_parallelism: Option<usize>,
    /// Its output record type.
    pub out_type: TypeInfo,
    /// Whether it may be chained to its neighbours.
    pub chainable: bool,
}

/// How records of an edge are distributed over the consumer's subtasks.
#[derive(Clone)]
pub enum Partitioning {
    /// Subtask i to subtask i.
    Forward,
    /// Batches round-robin over all consumers.
    Rebalance,
    /// By key hash (the writer computes the key).
    Hash(WriterFactory),
}

impl Partitioning {
    fn label(&self) -> &'static str {
        match self {
            Partitioning::Forward => "forward",
            Partitioning::Rebalance => "rebalance",
            Partitioning::Hash(_) => "hash",
        }
    }
}

/// An edge of the StreamGraph.
#[derive(Clone)]
pub struct StreamEdge {
    /// Producer.
    pub from: NodeId,
    /// Consumer.
    pub to: NodeId,
    /// Which input of the consumer (0 or 1).
    pub input: usize,
    /// Distribution.
    pub partitioning: Partitioning,
}

/// The unoptimised logical job: one node per API call.
#[derive(Clone, Default)]
pub struct StreamGraph {
    /// Nodes in creation order (a topological order).
    pub nodes: Vec<StreamNode>,
    /// Edges.
    pub edges: Vec<StreamEdge>,
}

impl StreamGraph {
    /// Adds a node; returns its id.
    pub fn add_node(&mut self, name: &str, kind: NodeKind, out_type: TypeInfo) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(StreamNode {
            id,
            name: name.to_string(),
            kind,
            parallelism: None,
            max_parallelism: None,
            out_type,
            chainable: true,
        });
        id
    }
    /// Adds an edge.
    pub fn add_edge(&mut self, from: NodeId, to: NodeId, input: usize, partitioning: Partitioning) {
        self.edges.push(StreamEdge {
            from,
            to,
            input,
            partitioning,
        });
    }
    /// The node `id`.
    pub fn node_mut(&mut self, id: NodeId) -> Option<&mut StreamNode> {
        self.nodes.get_mut(id.0 as usize)
    }
    fn out_edges(&self, n: NodeId) -> impl Iterator<Item = &StreamEdge> {
        self.edges.iter().filter(move |e| e.from == n)
    }
    fn in_edges(&self, n: NodeId) -> impl Iterator<Item = &StreamEdge> {
        self.edges.iter().filter(move |e| e.to == n)
    }
}

/// How a job edge ships records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShipStrategy {
    /// Producer i to consumer i.
    Forward,
    /// Round-robin batches.
    Rebalance,
    /// Key hash.
    Hash,
}

/// A fused chain of operators, run by one thread per subtask.
#[derive(Clone)]
pub struct JobVertex {
    /// Id.
    pub id: VertexId,
    /// Chained nodes, head first.
    pub nodes: Vec<NodeId>,
    /// Parallelism.
    pub parallelism: usize,
    /// Name (`a -> b -> c`).
    pub name: String,
}

/// An edge between vertices.
#[derive(Clone)]
pub struct JobEdge {
    /// Producer vertex.
    pub from: VertexId,
    /// Consumer vertex.
    pub to: VertexId,
    /// Input of the consumer's head operator.
    pub input: usize,
    /// Shipping.
    pub strategy: ShipStrategy,
    /// Creates the producer-side writer.
    pub writer: WriterFactory,
}

/// The optimised logical job.
#[derive(Clone)]
pub struct JobGraph {
    /// Vertices in topological order.
    pub vertices: Vec<JobVertex>,
    /// Edges.
    pub edges: Vec<JobEdge>,
    /// The StreamGraph it was compiled from.
    pub stream: StreamGraph,
}

impl JobGraph {
    /// Resolves parallelism (user-set, else `default_parallelism`, capped by
    /// each node's maximum) and fuses chains.
    pub fn compile(stream: StreamGraph, default_parallelism: usize) -> Result<JobGraph> {
        if stream.nodes.is_empty() {
            return Err(StreamError::Plan("the job has no operators".into()));
        }
        let par: Vec<usize> = stream
            .nodes
            .iter()
            .map(|n| {
                let p = n.parallelism.unwrap_or(default_parallelism).max(1);
                n.max_parallelism.map_or(p, |m| p.min(m.max(1)))
            })
            .collect();
        for n in &stream.nodes {
            let ins = stream.in_edges(n.id).count();
            match &n.kind {
                NodeKind::Source(_) if ins > 0 => {
                    return Err(StreamError::Plan(format!("source {} has inputs", n.name)))
                }
                NodeKind::Operator { .. } if ins == 0 => {
                    return Err(StreamError::Plan(format!(
                        "operator {} has no input",
                        n.name
                    )))
                }
                _ => {}
            }
            for e in stream.in_edges(n.id) {
                if e.from >= n.id {
                    return Err(StreamError::Plan(format!(
                        "edge into {} is not in topological order",
                        n.name
                    )));
                }
            }
        }
        let chainable = |e: &StreamEdge| -> bool {
            let (a, b) = (
                &stream.nodes[e.from.0 as usize],
                &stream.nodes[e.to.0 as usize],
            );
            matches!(e.partitioning, Partitioning::Forward)
                && par[e.from.0 as usize] == par[e.to.0 as usize]
                && stream.out_edges(e.from).count() == 1
                && stream.in_edges(e.to).count() == 1
                && !matches!(b.kind, NodeKind::Source(_))
                && a.chainable
                && b.chainable
        };
        let mut vertex_of: BTreeMap<NodeId, usize> = BTreeMap::new();
        let mut vertices: Vec<JobVertex> = Vec::new();
        for n in &stream.nodes {
            let ins: Vec<&StreamEdge> = stream.in_edges(n.id).collect();
            if ins.len() == 1 && chainable(ins[0]) {
                let v = vertex_of[&ins[0].from];
                vertices[v].nodes.push(n.id);
                vertices[v].name.push_str(" -> ");
                vertices[v].name.push_str(&n.name);
                vertex_of.insert(n.id, v);
            } else {
                vertex_of.insert(n.id, vertices.len());
                vertices.push(JobVertex {
                    id: VertexId(vertices.len() as u32),
                    nodes: vec![n.id],
                    parallelism: par[n.id.0 as usize],
                    name: n.name.clone(),
                });
            }
        }
        let mut edges = Vec::new();
        for e in &stream.edges {
            let (fv, tv) = (vertex_of[&e.from], vertex_of[&e.to]);
            if fv == tv {
                continue;
            }
            let out_type = &stream.nodes[e.from.0 as usize].out_type;
            let (strategy, writer) = match &e.partitioning {
                Partitioning::Forward if vertices[fv].parallelism == vertices[tv].parallelism => {
                    (ShipStrategy::Forward, out_type.forward.clone())
                }
                Partitioning::Forward | Partitioning::Rebalance => {
                    (ShipStrategy::Rebalance, out_type.rebalance.clone())
                }
                Partitioning::Hash(w) => (ShipStrategy::Hash, w.clone()),
            };
            tracing::debug!(from = %stream.nodes[e.from.0 as usize].name, to = %stream.nodes[e.to.0 as usize].name,
                partitioning = e.partitioning.label(), "job edge");
            edges.push(JobEdge {
                from: VertexId(fv as u32),
                to: VertexId(tv as u32),
                input: e.input,
                strategy,
                writer,
            });
        }
        Ok(JobGraph {
            vertices,
            edges,
            stream,
        })
    }
}

/// A TaskManager as the scheduler sees it.
#[derive(Debug, Clone)]
pub struct TaskManagerSpec {
    /// Id.
    pub id: TaskManagerId,
    /// Number of slots.
    pub slots: usize,
    /// Data address for network edges (multi-process mode).
    pub data_addr: Option<String>,
}

/// Where one subtask runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The subtask.
    pub subtask: SubtaskId,
    /// Its TaskManager.
    pub tm: TaskManagerId,
    /// Its slot on that TaskManager.
    pub slot: usize,
}

/// One producer-subtask -> consumer-subtask channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelSpec {
    /// Index of the channel (stable across processes).
    pub id: usize,
    /// Index of the job edge.
    pub edge: usize,
    /// Producer.
    pub from: SubtaskId,
    /// Consumer.
    pub to: SubtaskId,
    /// Index of the consumer among the producer's channels of this edge.
    pub out_index: usize,
    /// Crosses TaskManagers (a network edge).
    pub network: bool,
}

/// The physical job: subtasks, placement and channels.
#[derive(Clone)]
pub struct ExecutionGraph {
    /// The logical job.
    pub job: JobGraph,
    /// One entry per subtask.
    pub placements: Vec<Placement>,
    /// All channels.
    pub channels: Vec<ChannelSpec>,
    /// TaskManagers.
    pub task_managers: Vec<TaskManagerSpec>,
}

impl ExecutionGraph {
    /// Expands vertices into subtasks placed round-robin over the slots,
    /// interleaving TaskManagers so that replicas of a vertex land on
    /// different TaskManagers first; subtask i of every vertex shares slot i
    /// (slot sharing: one pipeline per slot).
    pub fn build(job: JobGraph, task_managers: Vec<TaskManagerSpec>) -> Result<ExecutionGraph> {
        let mut slots: Vec<(TaskManagerId, usize)> = Vec::new();
        let max_slots = task_managers.iter().map(|t| t.slots).max().unwrap_or(0);
        for s in 0..max_slots {
            for tm in &task_managers {
                if s < tm.slots {
                    slots.push((tm.id, s));
                }
            }
        }
        if slots.is_empty() {
            return Err(StreamError::Plan("no task slots available".into()));
        }
        let mut placements = Vec::new();
        for v in &job.vertices {
            for i in 0..v.parallelism {
                let (tm, slot) = slots[i % slots.len()];
                placements.push(Placement {
                    subtask: SubtaskId {
                        vertex: v.id,
                        index: i as u32,
                    },
                    tm,
                    slot,
                });
            }
        }
        let tm_of = |s: SubtaskId| -> TaskManagerId {
            placements
                .iter()
                .find(|p| p.subtask == s)
                .map_or(TaskManagerId(0), |p| p.tm)
        };
        let mut channels = Vec::new();
        for (ei, e) in job.edges.iter().enumerate() {
            let pf = job.vertices[e.from.0 as usize].parallelism;
            let pt = job.vertices[e.to.0 as usize].parallelism;
            for i in 0..pf {
                let from = SubtaskId {
                    vertex: e.from,
                    index: i as u32,
                };
                let targets: Vec<usize> = match e.strategy {
                    ShipStrategy::Forward => vec![i],
                    ShipStrategy::Rebalance | ShipStrategy::Hash => (0..pt).collect(),
                };
                for (oi, j) in targets.into_iter().enumerate() {
                    let to = SubtaskId {
                        vertex: e.to,
                        index: j as u32,
                    };
                    channels.push(ChannelSpec {
                        id: channels.len(),
                        edge: ei,
                        from,
                        to,
                        out_index: oi,
                        network: tm_of(from) != tm_of(to),
                    });
                }
            }
        }
        Ok(ExecutionGraph {
            job,
            placements,
            channels,
            task_managers,
        })
    }

    /// Subtasks placed on `tm`.
    pub fn subtasks_on(&self, tm: TaskManagerId) -> Vec<SubtaskId> {
        self.placements
            .iter()
            .filter(|p| p.tm == tm)
            .map(|p| p.subtask)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::IdentityOp;
    use crate::types::{key_hash, HashWriter};

    fn op(g: &mut StreamGraph, name: &str, inputs: usize) -> NodeId {
        let f: OperatorFactory = Arc::new(|_| Ok(Box::new(IdentityOp) as Box<dyn Operator>));
        g.add_node(
            name,
            NodeKind::Operator { factory: f, inputs },
            TypeInfo::of::<u64>(),
        )
    }
    fn src(g: &mut StreamGraph, name: &str) -> NodeId {
        let f: SourceFactory = Arc::new(|_| Err(StreamError::Internal("unused".into())));
        g.add_node(name, NodeKind::Source(f), TypeInfo::of::<u64>())
    }
    fn hash() -> Partitioning {
        Partitioning::Hash(Arc::new(|n, b| {
            Box::new(HashWriter::<u64, _>::new(n, b, |v: &u64| key_hash(v)))
        }))
    }
    fn chains(j: &JobGraph) -> Vec<Vec<u32>> {
        j.vertices
            .iter()
            .map(|v| v.nodes.iter().map(|n| n.0).collect())
            .collect()
    }

    #[test]
    fn forward_edges_with_equal_parallelism_chain() -> Result<()> {
        let mut g = StreamGraph::default();
        let s = src(&mut g, "src");
        let m = op(&mut g, "map", 1);
        let f = op(&mut g, "filter", 1);
        g.add_edge(s, m, 0, Partitioning::Forward);
        g.add_edge(m, f, 0, Partitioning::Forward);
        let j = JobGraph::compile(g, 4)?;
        assert_eq!(chains(&j), vec![vec![0, 1, 2]]);
        assert!(j.edges.is_empty());
        assert_eq!(j.vertices[0].parallelism, 4);
        Ok(())
    }

    #[test]
    fn keyed_edge_breaks_the_chain() -> Result<()> {
        let mut g = StreamGraph::default();
        let s = src(&mut g, "src");
        let m = op(&mut g, "split", 1);
        let r = op(&mut g, "count", 1);
        let k = op(&mut g, "sink", 1);
        g.add_edge(s, m, 0, Partitioning::Forward);
        g.add_edge(m, r, 0, hash());
        g.add_edge(r, k, 0, Partitioning::Forward);
        let j = JobGraph::compile(g, 2)?;
        assert_eq!(chains(&j), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(j.edges.len(), 1);
        assert_eq!(j.edges[0].strategy, ShipStrategy::Hash);
        Ok(())
    }

    #[test]
    fn parallelism_mismatch_breaks_the_chain_and_rebalances() -> Result<()> {
        let mut g = StreamGraph::default();
        let s = src(&mut g, "socket");
        let m = op(&mut g, "map", 1);
        g.add_edge(s, m, 0, Partitioning::Forward);
        if let Some(n) = g.node_mut(s) {
            n.max_parallelism = Some(1);
        }
        let j = JobGraph::compile(g, 3)?;
        assert_eq!(chains(&j), vec![vec![0], vec![1]]);
        assert_eq!(j.edges[0].strategy, ShipStrategy::Rebalance);
        assert_eq!(j.vertices[0].parallelism, 1);
        assert_eq!(j.vertices[1].parallelism, 3);
        Ok(())
    }

    #[test]
    fn fan_out_fan_in_and_disabled_chaining_do_not_chain() -> Result<()> {
        let mut g = StreamGraph::default();
        let s = src(&mut g, "src");
        let a = op(&mut g, "a", 1);
        let b = op(&mut g, "b", 1);
        let u = op(&mut g, "union", 1);
        let c = op(&mut g, "c", 1);
        g.add_edge(s, a, 0, Partitioning::Forward);
        g.add_edge(s, b, 0, Partitioning::Forward);
        g.add_edge(a, u, 0, Partitioning::Forward);
        g.add_edge(b, u, 0, Partitioning::Forward);
        g.add_edge(u, c, 0, Partitioning::Forward);
        if let Some(n) = g.node_mut(c) {
            n.chainable = false;
        }
        let j = JobGraph::compile(g, 2)?;
        assert_eq!(
            chains(&j),
            vec![vec![0], vec![1], vec![2], vec![3], vec![4]]
        );
        assert!(j.edges.iter().all(|e| e.strategy == ShipStrategy::Forward));
        Ok(())
    }

    #[test]
    fn two_input_operator_heads_a_vertex_and_chains_downstream() -> Result<()> {
        let mut g = StreamGraph::default();
        let s1 = src(&mut g, "left");
        let s2 = src(&mut g, "right");
        let j2 = op(&mut g, "join", 2);
        let m = op(&mut g, "map", 1);
        g.add_edge(s1, j2, 0, hash());
        g.add_edge(s2, j2, 1, hash());
        g.add_edge(j2, m, 0, Partitioning::Forward);
        let j = JobGraph::compile(g, 2)?;
        assert_eq!(chains(&j), vec![vec![0], vec![1], vec![2, 3]]);
        assert_eq!(
            j.edges.iter().map(|e| e.input).collect::<Vec<_>>(),
            vec![0, 1]
        );
        Ok(())
    }

    #[test]
    fn execution_graph_places_round_robin_and_marks_network_channels() -> Result<()> {
        let mut g = StreamGraph::default();
        let s = src(&mut g, "src");
        let r = op(&mut g, "count", 1);
        g.add_edge(s, r, 0, hash());
        let j = JobGraph::compile(g, 2)?;
        let tms = vec![
            TaskManagerSpec {
                id: TaskManagerId(0),
                slots: 1,
                data_addr: None,
            },
            TaskManagerSpec {
                id: TaskManagerId(1),
                slots: 1,
                data_addr: None,
            },
        ];
        let eg = ExecutionGraph::build(j, tms)?;
        // replicas of a vertex go to different TaskManagers
        let tms_of_v0: Vec<u32> = eg
            .placements
            .iter()
            .filter(|p| p.subtask.vertex.0 == 0)
            .map(|p| p.tm.0)
            .collect();
        assert_eq!(tms_of_v0, vec![0, 1]);
        assert_eq!(eg.channels.len(), 4);
        assert_eq!(eg.channels.iter().filter(|c| c.network).count(), 2);
        Ok(())
    }

    #[test]
    fn source_with_input_is_rejected() {
        let mut g = StreamGraph::default();
        let a = src(&mut g, "a");
        let b = src(&mut g, "b");
        g.add_edge(a, b, 0, Partitioning::Forward);
        assert!(matches!(JobGraph::compile(g, 1), Err(StreamError::Plan(_))));
    }
}
