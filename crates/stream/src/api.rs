//! The typed DataStream API: `StreamEnv` creates sources, `DataStream<T>`
//! transformations add nodes and edges to the StreamGraph, and
//! `StreamEnv::execute` compiles and runs the job.
//!
//! User functions must be `Clone + Send + Sync + 'static`: every subtask
//! (and every restart) gets its own copy.

use std::cell::RefCell;
use std::hash::Hash;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use crate::error::{Result, StreamError};
use crate::graph::{
    ExecutionGraph, JobGraph, NodeKind, OperatorFactory, Partitioning, SourceFactory, StreamGraph,
};
use crate::operator::keyed::{
    AggFolder, AggregateFunction, EmitMode, KeyedAggOp, KeyedProcessOp, ReduceFolder,
};
use crate::operator::sink::{CollectHandle, CollectSinkOp, FileSinkOp, ForEachSinkOp, PrintSinkOp};
use crate::operator::window::{
    TimeMode, WindowEvent, WindowJoinOp, WindowKind, WindowOp, WindowResult, WindowSpec,
};
use crate::operator::{
    CoFlatMapOp, FilterOp, FlatMapOp, IdentityOp, MapOp, Operator, SubtaskInfo, TryMapOp,
    WatermarkOp,
};
use crate::runtime::{JobConfig, JobHandle, JobManager, JobResult, JobShared};
use crate::source::{self, ErasedSource, SourceAdapter, SourceReader};
use crate::state::KeyedState;
use crate::types::{key_hash, Data, HashWriter, Key, NodeId, Timestamp, TypeInfo, WriterFactory};

struct EnvInner {
    graph: StreamGraph,
    config: JobConfig,
}

/// The execution environment: configuration plus the StreamGraph being built.
#[derive(Clone)]
pub struct StreamEnv {
    inner: Rc<RefCell<EnvInner>>,
}

/// A stream of `T` records.
pub struct DataStream<T> {
    env: StreamEnv,
    node: NodeId,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for DataStream<T> {
    fn clone(&self) -> Self {
        DataStream {
            env: self.env.clone(),
            node: self.node,
            _t: PhantomData,
        }
    }
}

fn op_factory<O: Operator + 'static>(
    f: impl Fn(&SubtaskInfo) -> Result<O> + Send + Sync + 'static,
) -> OperatorFactory {
    Arc::new(move |i| Ok(Box::new(f(i)?) as Box<dyn Operator>))
}

fn hash_partitioning<T: Data, K: Hash, KF: Fn(&T) -> K + Clone + Send + Sync + 'static>(
    kf: KF,
) -> Partitioning {
    let w: WriterFactory = Arc::new(move |n, b| {
        let kf = kf.clone();
        Box::new(HashWriter::new(n, b, move |r: &T| key_hash(&kf(r))))
    });
    Partitioning::Hash(w)
}

impl StreamEnv {
    /// A new environment.
    pub fn new(config: JobConfig) -> Self {
        StreamEnv {
            inner: Rc::new(RefCell::new(EnvInner {
                graph: StreamGraph::default(),
                config,
            })),
        }
    }

    /// The configuration.
    pub fn config(&self) -> JobConfig {
        self.inner.borrow().config.clone()
    }

    /// Replaces the configuration.
    pub fn set_config(&self, config: JobConfig) {
        self.inner.borrow_mut().config = config;
    }

    fn add_node(&self, name: &str, kind: NodeKind, out_type: TypeInfo) -> NodeId {
        self.inner.borrow_mut().graph.add_node(name, kind, out_type)
    }

    fn add_edge(&self, from: NodeId, to: NodeId, input: usize, p: Partitioning) {
        self.inner.borrow_mut().graph.add_edge(from, to, input, p);
    }

    fn stream<T>(&self, node: NodeId) -> DataStream<T> {
        DataStream {
            env: self.clone(),
            node,
            _t: PhantomData,
        }
    }

    /// A source from a reader factory (one reader per subtask).
    pub fn add_source<T: Data, R: SourceReader<T> + 'static>(
        &self,
        name: &str,
        make: impl Fn(&SubtaskInfo) -> Result<R> + Send + Sync + 'static,
    ) -> DataStream<T> {
        let f: SourceFactory = Arc::new(move |i| {
            Ok(Box::new(SourceAdapter::<T, R>::new(make(i)?)) as Box<dyn ErasedSource>)
        });
        let id = self.add_node(name, NodeKind::Source(f), TypeInfo::of::<T>());
        self.stream(id)
    }

    /// Text lines of a file or of every file in a directory (names starting
    /// with `_` or `.` skipped). Replayable by byte offset.
    pub fn read_text_file(&self, path: impl AsRef<Path>) -> DataStream<String> {
        let p: PathBuf = path.as_ref().to_path_buf();
        self.add_source("text-file", move |i| {
            source::FileSource::new(&p, i, source::parse_text, false)
        })
    }

    /// CSV rows (fields as strings) of a file or directory.
    pub fn read_csv(&self, path: impl AsRef<Path>) -> DataStream<Vec<String>> {
        let p: PathBuf = path.as_ref().to_path_buf();
        self.add_source("csv-file", move |i| {
            source::FileSource::new(&p, i, source::parse_csv, true)
        })
    }

    /// JSON-lines records of a file or directory.
    pub fn read_json_lines<T: Data>(&self, path: impl AsRef<Path>) -> DataStream<T> {
        let p: PathBuf = path.as_ref().to_path_buf();
        self.add_source("json-file", move |i| {
            source::FileSource::new(&p, i, source::parse_json::<T>, true)
        })
    }

    /// Text lines from a TCP socket (parallelism 1, not replayable).
    pub fn socket_text_stream(&self, addr: &str) -> DataStream<String> {
        let a = addr.to_string();
        let s = self.add_source("socket", move |_| Ok(source::SocketSource::new(&a)));
        if let Some(n) = self.inner.borrow_mut().graph.node_mut(s.node) {
            n.max_parallelism = Some(1);
        }
        s
    }

    /// Generator: records `f(0..count)` (unbounded if `count` is `None`), at
    /// `rate` records/s in total if set. Replayable.
    pub fn generate<T: Data, F>(&self, count: Option<u64>, rate: Option<f64>, f: F) -> DataStream<T>
    where
        F: Fn(u64) -> T + Clone + Send + Sync + 'static,
    {
        self.add_source("generator", move |i| {
            Ok(source::GeneratorSource::new(f.clone(), i, count, rate))
        })
    }

    /// A bounded stream of the given records.
    pub fn from_collection<T: Data>(&self, items: Vec<T>) -> DataStream<T> {
        let items = Arc::new(items);
        let n = items.len() as u64;
        self.generate(Some(n), None, move |i| items[i as usize].clone())
    }

    /// `events` Nexmark events (the `nexmark` crate, default configuration).
    pub fn nexmark(&self, events: u64) -> DataStream<nexmark::event::Event> {
        self.add_source("nexmark", move |i| {
            Ok(source::NexmarkSource::new(
                nexmark::config::NexmarkConfig::default(),
                events,
                i,
            ))
        })
    }

    /// The JobGraph the current StreamGraph compiles to.
    pub fn job_graph(&self) -> Result<JobGraph> {
        let inner = self.inner.borrow();
        let default_p = inner
            .config
            .parallelism
            .unwrap_or_else(|| inner.config.total_slots());
        JobGraph::compile(inner.graph.clone(), default_p)
    }

    fn prepare(&self, name: &str) -> Result<(JobManager, Arc<JobShared>)> {
        let job = self.job_graph()?;
        let config = self.config();
        let tms = config.task_manager_specs();
        let eg = ExecutionGraph::build(job, tms)?;
        for v in &eg.job.vertices {
            tracing::info!(job = name, vertex = v.id.0, parallelism = v.parallelism, chain = %v.name, "vertex");
        }
        let shared = JobShared::new();
        Ok((JobManager::new(name, eg, config, shared.clone())?, shared))
    }

    /// Runs the job in this thread until it finishes (bounded sources), is
    /// cancelled or fails.
    pub fn execute(&self, name: &str) -> Result<JobResult> {
        let (jm, _) = self.prepare(name)?;
        jm.run()
    }

    /// Starts the job in the background and returns its handle.
    pub fn submit(&self, name: &str) -> Result<JobHandle> {
        let (jm, shared) = self.prepare(name)?;
        let t = std::thread::Builder::new()
            .name("job-manager".into())
            .spawn(move || jm.run())
            .map_err(|e| StreamError::io("spawn job manager", e))?;
        Ok(JobHandle::new(shared, t))
    }
}

impl<T: Data> DataStream<T> {
    fn then<U: Data>(&self, name: &str, f: OperatorFactory, p: Partitioning) -> DataStream<U> {
        let id = self.env.add_node(
            name,
            NodeKind::Operator {
                factory: f,
                inputs: 1,
            },
            TypeInfo::of::<U>(),
        );
        self.env.add_edge(self.node, id, 0, p);
        self.env.stream(id)
    }

    /// Adds an operator made by `factory` (one instance per subtask, fed by
    /// a forward edge): the way to run an operator this API has no method
    /// for (e.g. a SQL view maintained by `eddy-streamsql`).
    pub fn transform<U: Data>(&self, name: &str, factory: OperatorFactory) -> DataStream<U> {
        self.then(name, factory, Partitioning::Forward)
    }

    /// Sets this operator's parallelism.
    pub fn set_parallelism(self, p: usize) -> Self {
        if let Some(n) = self.env.inner.borrow_mut().graph.node_mut(self.node) {
            n.parallelism = Some(p.max(1));
        }
        self
    }

    /// Renames this operator.
    pub fn name(self, name: &str) -> Self {
        if let Some(n) = self.env.inner.borrow_mut().graph.node_mut(self.node) {
            n.name = name.to_string();
        }
        self
    }

    /// Keeps this operator out of any chain.
    pub fn disable_chaining(self) -> Self {
        if let Some(n) = self.env.inner.borrow_mut().graph.node_mut(self.node) {
            n.chainable = false;
        }
        self
    }

    /// One output per record.
    pub fn map<U: Data, F: Fn(T) -> U + Clone + Send + Sync + 'static>(
        &self,
        f: F,
    ) -> DataStream<U> {
        self.then(
            "map",
            op_factory(move |_| Ok(MapOp::new(f.clone()))),
            Partitioning::Forward,
        )
    }

    /// A fallible map: an error fails the task (and restarts the job).
    pub fn try_map<U: Data, F: Fn(T) -> Result<U> + Clone + Send + Sync + 'static>(
        &self,
        f: F,
    ) -> DataStream<U> {
        self.then(
            "try_map",
            op_factory(move |_| Ok(TryMapOp::new(f.clone()))),
            Partitioning::Forward,
        )
    }

    /// Any number of outputs per record (pushed onto the vector).
    pub fn flat_map<U: Data, F: Fn(T, &mut Vec<U>) + Clone + Send + Sync + 'static>(
        &self,
        f: F,
    ) -> DataStream<U> {
        self.then(
            "flat_map",
            op_factory(move |_| Ok(FlatMapOp::new(f.clone()))),
            Partitioning::Forward,
        )
    }

    /// Records for which `f` holds.
    pub fn filter<F: Fn(&T) -> bool + Clone + Send + Sync + 'static>(&self, f: F) -> DataStream<T> {
        self.then(
            "filter",
            op_factory(move |_| Ok(FilterOp::new(f.clone()))),
            Partitioning::Forward,
        )
    }

    /// Redistributes batches round-robin over the next operator's subtasks.
    pub fn rebalance(&self) -> DataStream<T> {
        self.then(
            "rebalance",
            op_factory(|_| Ok(IdentityOp)),
            Partitioning::Rebalance,
        )
    }

    /// Event-time watermarks with bounded out-of-orderness `bound_ms`.
    pub fn assign_timestamps<F: Fn(&T) -> Timestamp + Clone + Send + Sync + 'static>(
        &self,
        bound_ms: Timestamp,
        ts: F,
    ) -> DataStream<T> {
        self.then(
            "watermarks",
            op_factory(move |_| Ok(WatermarkOp::new(bound_ms, ts.clone()))),
            Partitioning::Forward,
        )
    }

    /// Partitions by key.
    pub fn key_by<K: Key, KF: Fn(&T) -> K + Clone + Send + Sync + 'static>(
        &self,
        kf: KF,
    ) -> KeyedStream<K, T, KF> {
        KeyedStream {
            stream: self.clone(),
            key: kf,
            _k: PhantomData,
        }
    }

    /// Merges streams of the same type.
    pub fn union(&self, others: &[DataStream<T>]) -> DataStream<T> {
        let id = self.env.add_node(
            "union",
            NodeKind::Operator {
                factory: op_factory(|_| Ok(IdentityOp)),
                inputs: 1,
            },
            TypeInfo::of::<T>(),
        );
        self.env.add_edge(self.node, id, 0, Partitioning::Forward);
        for o in others {
            self.env.add_edge(o.node, id, 0, Partitioning::Forward);
        }
        self.env.stream(id)
    }

    /// Two streams processed by one two-input operator.
    pub fn connect<B: Data>(&self, other: &DataStream<B>) -> ConnectedStreams<T, B> {
        ConnectedStreams {
            a: self.clone(),
            b: other.clone(),
        }
    }

    /// Windowed inner join on `ka(a) == kb(b)`: `f(key, a, b)` for every pair
    /// in the same window.
    pub fn join<B, K, KA, KB, O, F>(
        &self,
        other: &DataStream<B>,
        ka: KA,
        kb: KB,
        spec: JoinSpec<T, B>,
        f: F,
    ) -> Result<DataStream<O>>
    where
        B: Data,
        K: Key,
        O: Data,
        KA: Fn(&T) -> K + Clone + Send + Sync + 'static,
        KB: Fn(&B) -> K + Clone + Send + Sync + 'static,
        F: Fn(&K, &T, &B) -> O + Clone + Send + Sync + 'static,
    {
        if matches!(spec.kind, WindowKind::Session { .. }) {
            return Err(StreamError::Plan(
                "session windows are not supported in joins".into(),
            ));
        }
        let (ka2, kb2) = (ka.clone(), kb.clone());
        let factory = op_factory(move |_| {
            Ok(WindowJoinOp::new(
                ka.clone(),
                kb.clone(),
                spec.kind,
                spec.time_a.clone(),
                spec.time_b.clone(),
                f.clone(),
            ))
        });
        let id = self.env.add_node(
            "window-join",
            NodeKind::Operator { factory, inputs: 2 },
            TypeInfo::of::<O>(),
        );
        self.env.add_edge(self.node, id, 0, hash_partitioning(ka2));
        self.env.add_edge(other.node, id, 1, hash_partitioning(kb2));
        Ok(self.env.stream(id))
    }

    fn sink(&self, name: &str, f: OperatorFactory) -> DataStream<()> {
        self.then(name, f, Partitioning::Forward)
    }

    /// Collects the committed output in memory (exactly-once).
    pub fn collect(&self) -> CollectHandle<T> {
        let h = CollectHandle::default();
        let h2 = h.clone();
        self.sink(
            "collect",
            op_factory(move |i| Ok(CollectSinkOp::new(h2.clone(), i.index))),
        );
        h
    }

    /// Like `collect`, into an existing handle (e.g. shared by a job and its restored run).
    pub fn collect_into(&self, handle: &CollectHandle<T>) -> DataStream<()> {
        let h = handle.clone();
        self.sink(
            "collect",
            op_factory(move |i| Ok(CollectSinkOp::new(h.clone(), i.index))),
        )
    }

    /// Exactly-once text file sink: `format` writes one line per record
    /// into `dir/part-<subtask>-<checkpoint>`.
    pub fn write_text<F: Fn(&T, &mut String) + Clone + Send + Sync + 'static>(
        &self,
        dir: impl AsRef<Path>,
        format: F,
    ) -> DataStream<()> {
        let d = dir.as_ref().to_path_buf();
        self.sink(
            "file-sink",
            op_factory(move |i| FileSinkOp::new(&d, i.index, i.attempt, format.clone())),
        )
    }

    /// Prints one line per record to stdout.
    pub fn print<F: Fn(&T, &mut String) + Clone + Send + Sync + 'static>(
        &self,
        format: F,
    ) -> DataStream<()> {
        self.sink(
            "print",
            op_factory(move |_| Ok(PrintSinkOp::new(format.clone()))),
        )
    }

    /// Calls `f` for every record (side effects are at-least-once).
    pub fn for_each<F: Fn(T) + Clone + Send + Sync + 'static>(&self, f: F) -> DataStream<()> {
        self.sink(
            "for_each",
            op_factory(move |_| Ok(ForEachSinkOp::new(f.clone()))),
        )
    }
}

/// A stream partitioned by `KF`.
pub struct KeyedStream<K, T, KF> {
    stream: DataStream<T>,
    key: KF,
    _k: PhantomData<fn() -> K>,
}

impl<K: Key, T: Data, KF: Fn(&T) -> K + Clone + Send + Sync + 'static> KeyedStream<K, T, KF> {
    fn keyed<O: Data>(&self, name: &str, f: OperatorFactory) -> DataStream<O> {
        self.stream
            .then(name, f, hash_partitioning(self.key.clone()))
    }

    /// Rolling reduce `f(&mut acc, v)`: emits each changed key's new value after every input batch.
    pub fn reduce<F: Fn(&mut T, T) + Clone + Send + Sync + 'static>(&self, f: F) -> DataStream<T> {
        self.reduce_mode(f, EmitMode::Updates)
    }

    /// Reduce emitting only the final value per key when the input ends (bounded jobs).
    pub fn reduce_at_end<F: Fn(&mut T, T) + Clone + Send + Sync + 'static>(
        &self,
        f: F,
    ) -> DataStream<T> {
        self.reduce_mode(f, EmitMode::AtEnd)
    }

    fn reduce_mode<F: Fn(&mut T, T) + Clone + Send + Sync + 'static>(
        &self,
        f: F,
        mode: EmitMode,
    ) -> DataStream<T> {
        let kf = self.key.clone();
        self.keyed(
            "reduce",
            op_factory(move |_| {
                Ok(KeyedAggOp::new(
                    kf.clone(),
                    ReduceFolder(f.clone()),
                    |_: &K, v: T| v,
                    mode,
                ))
            }),
        )
    }

    /// Rolling aggregate: emits `(key, result)` for each changed key after every input batch.
    pub fn aggregate<A: AggregateFunction<T> + Clone>(&self, agg: A) -> DataStream<(K, A::Out)> {
        self.aggregate_mode(agg, EmitMode::Updates)
    }

    /// Aggregate emitting `(key, result)` once per key when the input ends.
    pub fn aggregate_at_end<A: AggregateFunction<T> + Clone>(
        &self,
        agg: A,
    ) -> DataStream<(K, A::Out)> {
        self.aggregate_mode(agg, EmitMode::AtEnd)
    }

    fn aggregate_mode<A: AggregateFunction<T> + Clone>(
        &self,
        agg: A,
        mode: EmitMode,
    ) -> DataStream<(K, A::Out)> {
        let kf = self.key.clone();
        self.keyed(
            "aggregate",
            op_factory(move |_| {
                Ok(KeyedAggOp::new(
                    kf.clone(),
                    AggFolder(agg.clone()),
                    |k: &K, o: A::Out| (k.clone(), o),
                    mode,
                ))
            }),
        )
    }

    /// `f(key, value, state, out)` with keyed value/list/map state.
    pub fn process<O: Data, F>(&self, f: F) -> DataStream<O>
    where
        F: FnMut(&K, T, &mut KeyedState<K>, &mut Vec<O>) -> Result<()>
            + Clone
            + Send
            + Sync
            + 'static,
    {
        let kf = self.key.clone();
        self.keyed(
            "process",
            op_factory(move |_| Ok(KeyedProcessOp::new(kf.clone(), f.clone()))),
        )
    }

    /// Windows over this keyed stream.
    pub fn window(&self, spec: WindowSpec<T>) -> WindowedStream<K, T, KF> {
        WindowedStream {
            keyed: KeyedStream {
                stream: self.stream.clone(),
                key: self.key.clone(),
                _k: PhantomData,
            },
            spec,
        }
    }
}

/// A keyed, windowed stream.
pub struct WindowedStream<K, T, KF> {
    keyed: KeyedStream<K, T, KF>,
    spec: WindowSpec<T>,
}

type Fired<K, O, T> = DataStream<WindowEvent<K, O, T>>;

fn split_main<K: Key, O: Data, T: Data>(s: &Fired<K, O, T>) -> DataStream<WindowResult<K, O>> {
    s.flat_map(
        |e: WindowEvent<K, O, T>, out: &mut Vec<WindowResult<K, O>>| {
            if let WindowEvent::Fired(r) = e {
                out.push(r)
            }
        },
    )
}

fn split_late<K: Key, O: Data, T: Data>(s: &Fired<K, O, T>) -> DataStream<T> {
    s.flat_map(|e: WindowEvent<K, O, T>, out: &mut Vec<T>| {
        if let WindowEvent::Late(r) = e {
            out.push(r)
        }
    })
}

impl<K: Key, T: Data, KF: Fn(&T) -> K + Clone + Send + Sync + 'static> WindowedStream<K, T, KF> {
    fn reduce_events<F: Fn(&mut T, T) + Clone + Send + Sync + 'static>(
        &self,
        f: F,
    ) -> Fired<K, T, T> {
        let kf = self.keyed.key.clone();
        let spec = self.spec.clone();
        self.keyed.keyed(
            "window-reduce",
            op_factory(move |_| {
                Ok(WindowOp::new(
                    kf.clone(),
                    ReduceFolder(f.clone()),
                    spec.clone(),
                ))
            }),
        )
    }

    fn aggregate_events<A: AggregateFunction<T> + Clone>(&self, agg: A) -> Fired<K, A::Out, T> {
        let kf = self.keyed.key.clone();
        let spec = self.spec.clone();
        self.keyed.keyed(
            "window-aggregate",
            op_factory(move |_| {
                Ok(WindowOp::new(
                    kf.clone(),
                    AggFolder(agg.clone()),
                    spec.clone(),
                ))
            }),
        )
    }

    /// Reduces each window; late records are dropped.
    pub fn reduce<F: Fn(&mut T, T) + Clone + Send + Sync + 'static>(
        &self,
        f: F,
    ) -> DataStream<WindowResult<K, T>> {
        split_main(&self.reduce_events(f))
    }

    /// Reduces each window; also returns the late side output.
    pub fn reduce_with_late<F: Fn(&mut T, T) + Clone + Send + Sync + 'static>(
        &self,
        f: F,
    ) -> (DataStream<WindowResult<K, T>>, DataStream<T>) {
        let e = self.reduce_events(f);
        (split_main(&e), split_late(&e))
    }

    /// Aggregates each window; late records are dropped.
    pub fn aggregate<A: AggregateFunction<T> + Clone>(
        &self,
        agg: A,
    ) -> DataStream<WindowResult<K, A::Out>> {
        split_main(&self.aggregate_events(agg))
    }

    /// Aggregates each window; also returns the late side output.
    pub fn aggregate_with_late<A: AggregateFunction<T> + Clone>(
        &self,
        agg: A,
    ) -> (DataStream<WindowResult<K, A::Out>>, DataStream<T>) {
        let e = self.aggregate_events(agg);
        (split_main(&e), split_late(&e))
    }
}

/// Two streams feeding one two-input operator.
pub struct ConnectedStreams<A, B> {
    a: DataStream<A>,
    b: DataStream<B>,
}

impl<A: Data, B: Data> ConnectedStreams<A, B> {
    /// One two-input operator from `factory`: records of the first stream
    /// arrive as input 0, of the second as input 1.
    pub fn transform<U: Data>(&self, name: &str, factory: OperatorFactory) -> DataStream<U> {
        let env = &self.a.env;
        let id = env.add_node(
            name,
            NodeKind::Operator { factory, inputs: 2 },
            TypeInfo::of::<U>(),
        );
        env.add_edge(self.a.node, id, 0, Partitioning::Forward);
        env.add_edge(self.b.node, id, 1, Partitioning::Forward);
        env.stream(id)
    }

    /// `f1` for records of the first stream, `f2` for the second.
    pub fn flat_map<U, F1, F2>(&self, f1: F1, f2: F2) -> DataStream<U>
    where
        U: Data,
        F1: Fn(A, &mut Vec<U>) + Clone + Send + Sync + 'static,
        F2: Fn(B, &mut Vec<U>) + Clone + Send + Sync + 'static,
    {
        let factory = op_factory(move |_| Ok(CoFlatMapOp::new(f1.clone(), f2.clone())));
        let env = &self.a.env;
        let id = env.add_node(
            "co-flat-map",
            NodeKind::Operator { factory, inputs: 2 },
            TypeInfo::of::<U>(),
        );
        env.add_edge(self.a.node, id, 0, Partitioning::Forward);
        env.add_edge(self.b.node, id, 1, Partitioning::Forward);
        env.stream(id)
    }
}

/// Window and time domains of a window join.
pub struct JoinSpec<A, B> {
    /// Window shape (tumbling or sliding).
    pub kind: WindowKind,
    /// Time of the first input.
    pub time_a: TimeMode<A>,
    /// Time of the second input.
    pub time_b: TimeMode<B>,
}

impl<A, B> JoinSpec<A, B> {
    /// Processing-time windows.
    pub fn processing(kind: WindowKind) -> Self {
        JoinSpec {
            kind,
            time_a: TimeMode::Processing,
            time_b: TimeMode::Processing,
        }
    }
    /// Event-time windows with a timestamp per side.
    pub fn event_time(
        kind: WindowKind,
        ta: impl Fn(&A) -> Timestamp + Send + Sync + 'static,
        tb: impl Fn(&B) -> Timestamp + Send + Sync + 'static,
    ) -> Self {
        JoinSpec {
            kind,
            time_a: TimeMode::Event(Arc::new(ta)),
            time_b: TimeMode::Event(Arc::new(tb)),
        }
    }
}
