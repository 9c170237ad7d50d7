//! The runtime: JobManager (control plane: submit, cancel, status,
//! checkpoint coordination, restarts) and TaskManagers (slots running
//! subtask threads), in one process by default.
//!
//! Restart protocol: any task failure fails the attempt; the JobManager sets
//! the attempt's cancel flag, joins every thread (all waits are bounded and
//! check the flag), and starts a new attempt in which every task restores
//! from the newest complete checkpoint (sources rewind to their offsets).
//! Checkpoint ids keep increasing across attempts.

pub mod checkpoint;
pub mod network;
pub mod task;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use crate::error::{Result, StreamError};
use crate::graph::{ExecutionGraph, NodeKind, TaskManagerSpec};
use crate::operator::{Operator, SubtaskInfo};
use crate::runtime::checkpoint::{CheckpointStorage, CompletedCheckpoint};
use crate::runtime::task::{
    Chain, InputChannel, OutEdge, Task, TaskControl, TaskEvent, TaskMetrics, TaskOutput, TaskState,
};
use crate::types::{CheckpointId, Message, SubtaskId, TaskManagerId, Timestamp};

/// Several processes, one TaskManager each, connected over TCP.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Data address (`host:port`) of every TaskManager, by id.
    pub data_addrs: Vec<String>,
    /// The TaskManager this process runs.
    pub local: u32,
    /// Slots per TaskManager.
    pub slots: usize,
}

/// Job configuration. Every option has a default (see `Default`).
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// Default parallelism of operators (default: number of slots).
    pub parallelism: Option<usize>,
    /// In-process TaskManagers (default 1).
    pub task_managers: usize,
    /// Slots per TaskManager (default: available cores).
    pub slots_per_task_manager: usize,
    /// Records per batch (default 1024).
    pub batch_size: usize,
    /// Longest a record waits in an output buffer (default 1 ms).
    pub buffer_timeout: Duration,
    /// Batches a channel holds before back-pressure (default 16).
    pub channel_capacity: usize,
    /// Checkpoint interval (default: none; a bounded job still takes its final checkpoint).
    pub checkpoint_interval: Option<Duration>,
    /// Checkpoint directory (default: in memory).
    pub checkpoint_dir: Option<PathBuf>,
    /// Start from the newest complete checkpoint in `checkpoint_dir` (default false: start fresh).
    pub restore_from_latest: bool,
    /// Restarts allowed after task failures (default 3).
    pub restart_attempts: u32,
    /// Pause before a restart (default 10 ms).
    pub restart_delay: Duration,
    /// Stop the job (as if killed) once this many checkpoints completed (tests).
    pub halt_after_checkpoints: Option<u64>,
    /// Multi-process mode (default: single process).
    pub cluster: Option<ClusterConfig>,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            parallelism: None,
            task_managers: 1,
            slots_per_task_manager: std::thread::available_parallelism().map_or(2, |n| n.get()),
            batch_size: 1024,
            buffer_timeout: Duration::from_millis(1),
            channel_capacity: 16,
            checkpoint_interval: None,
            checkpoint_dir: None,
            restore_from_latest: false,
            restart_attempts: 3,
            restart_delay: Duration::from_millis(10),
            halt_after_checkpoints: None,
            cluster: None,
        }
    }
}

macro_rules! setter {
    ($(#[$m:meta])* $name:ident: $t:ty => $field:ident = $conv:expr) => {
        $(#[$m])*
        pub fn $name(mut self, v: $t) -> Self {
            self.$field = $conv(v);
            self
        }
    };
}

impl JobConfig {
    setter!(/// Sets the default parallelism.
        parallelism: usize => parallelism = Some);
    setter!(/// Sets the slots per TaskManager.
        slots: usize => slots_per_task_manager = |v: usize| v.max(1));
    setter!(/// Sets the number of in-process TaskManagers.
        task_managers: usize => task_managers = |v: usize| v.max(1));
    setter!(/// Sets the batch size.
        batch_size: usize => batch_size = |v: usize| v.max(1));
    setter!(/// Sets the output buffer timeout.
        buffer_timeout: Duration => buffer_timeout = |v| v);
    setter!(/// Sets the channel capacity in batches.
        channel_capacity: usize => channel_capacity = |v: usize| v.max(1));
    setter!(/// Enables periodic checkpoints.
        checkpoint_interval: Duration => checkpoint_interval = Some);
    setter!(/// Stores checkpoints in a directory.
        checkpoint_dir: PathBuf => checkpoint_dir = Some);
    setter!(/// Restores from the newest checkpoint in the directory.
        restore_from_latest: bool => restore_from_latest = |v| v);
    setter!(/// Sets the restart budget.
        restart_attempts: u32 => restart_attempts = |v| v);
    setter!(/// Halts after n checkpoints (tests).
        halt_after_checkpoints: u64 => halt_after_checkpoints = Some);
    setter!(/// Runs as one TaskManager of a multi-process job.
        cluster: ClusterConfig => cluster = Some);

    /// The TaskManagers this configuration describes.
    pub fn task_manager_specs(&self) -> Vec<TaskManagerSpec> {
        match &self.cluster {
            Some(c) => c
                .data_addrs
                .iter()
                .enumerate()
                .map(|(i, a)| TaskManagerSpec {
                    id: TaskManagerId(i as u32),
                    slots: c.slots.max(1),
                    data_addr: Some(a.clone()),
                })
                .collect(),
            None => (0..self.task_managers.max(1))
                .map(|i| TaskManagerSpec {
                    id: TaskManagerId(i as u32),
                    slots: self.slots_per_task_manager.max(1),
                    data_addr: None,
                })
                .collect(),
        }
    }

    /// Total slots over all TaskManagers.
    pub fn total_slots(&self) -> usize {
        self.task_manager_specs().iter().map(|t| t.slots).sum()
    }
}

/// Lifecycle of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    /// Submitted, not yet running.
    Created,
    /// Running attempt `n` (0 = first).
    Running(u32),
    /// Every source ended and the final checkpoint committed.
    Finished,
    /// Cancelled by the user.
    Cancelled,
    /// Stopped by `halt_after_checkpoints`.
    Halted,
    /// Failed for good.
    Failed(String),
}

/// What a finished (or cancelled) job reports.
#[derive(Debug, Clone)]
pub struct JobResult {
    /// Job name.
    pub name: String,
    /// Final status.
    pub status: JobStatus,
    /// Restarts performed.
    pub restarts: u32,
    /// Checkpoints completed (including the final one).
    pub checkpoints: u64,
    /// Wall time.
    pub duration: Duration,
    /// Records emitted by the sources, over all attempts.
    pub source_records: u64,
}

/// Shared job state visible through a `JobHandle`.
pub struct JobShared {
    /// User cancel request.
    pub cancel: AtomicBool,
    /// Current status.
    pub status: Mutex<JobStatus>,
    /// Source records of the current attempt.
    pub metrics: Mutex<Arc<TaskMetrics>>,
    /// Source records of earlier attempts.
    pub earlier_records: AtomicU64,
}

impl JobShared {
    /// Fresh shared state.
    pub fn new() -> Arc<JobShared> {
        Arc::new(JobShared {
            cancel: AtomicBool::new(false),
            status: Mutex::new(JobStatus::Created),
            metrics: Mutex::new(Arc::new(TaskMetrics::default())),
            earlier_records: AtomicU64::new(0),
        })
    }
    /// Records emitted by sources so far.
    pub fn source_records(&self) -> u64 {
        self.earlier_records.load(Ordering::Relaxed)
            + self.metrics.lock().source_records.load(Ordering::Relaxed)
    }
}

/// Handle of a submitted job.
pub struct JobHandle {
    shared: Arc<JobShared>,
    thread: Option<JoinHandle<Result<JobResult>>>,
}

impl JobHandle {
    pub(crate) fn new(shared: Arc<JobShared>, thread: JoinHandle<Result<JobResult>>) -> Self {
        JobHandle {
            shared,
            thread: Some(thread),
        }
    }
    /// Current status.
    pub fn status(&self) -> JobStatus {
        self.shared.status.lock().clone()
    }
    /// Requests cancellation (returns at once).
    pub fn cancel(&self) {
        self.shared.cancel.store(true, Ordering::Relaxed);
    }
    /// Records emitted by the sources so far.
    pub fn source_records(&self) -> u64 {
        self.shared.source_records()
    }
    /// Whether the job has stopped.
    pub fn is_done(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }
    /// Waits for the job to end.
    pub fn wait(mut self) -> Result<JobResult> {
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| StreamError::Internal("job manager thread panicked".into()))?,
            None => Err(StreamError::Internal("job already waited for".into())),
        }
    }
}

enum AttemptEnd {
    Finished,
    Cancelled,
    Halted,
}

/// The JobManager: runs attempts of one job until it finishes, is
/// cancelled, or fails more often than allowed.
pub struct JobManager {
    name: String,
    graph: ExecutionGraph,
    config: JobConfig,
    storage: CheckpointStorage,
    shared: Arc<JobShared>,
    next_checkpoint: u64,
    checkpoints: u64,
}

struct Running {
    threads: Vec<JoinHandle<()>>,
    controls: Vec<(SubtaskId, bool, Sender<TaskControl>)>,
    cancel: Arc<AtomicBool>,
    events: Receiver<TaskEvent>,
    local: BTreeSet<SubtaskId>,
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

impl JobManager {
    /// A JobManager for a compiled job.
    pub fn new(
        name: &str,
        graph: ExecutionGraph,
        config: JobConfig,
        shared: Arc<JobShared>,
    ) -> Result<Self> {
        let storage = match &config.checkpoint_dir {
            Some(d) => {
                if !config.restore_from_latest {
                    // a fresh job must never restore an older run's checkpoints
                    let root = d.join(name);
                    if root.exists() {
                        std::fs::remove_dir_all(&root)
                            .map_err(|e| StreamError::io(root.display().to_string(), e))?;
                    }
                }
                CheckpointStorage::dir(d, name)?
            }
            None => CheckpointStorage::memory(),
        };
        if config.cluster.is_some() && config.checkpoint_interval.is_some() {
            return Err(StreamError::Plan(
                "checkpoints are not supported in multi-process mode".into(),
            ));
        }
        Ok(JobManager {
            name: name.to_string(),
            graph,
            config,
            storage,
            shared,
            next_checkpoint: 1,
            checkpoints: 0,
        })
    }

    fn set_status(&self, s: JobStatus) {
        *self.shared.status.lock() = s;
    }

    /// Runs the job to its end.
    pub fn run(mut self) -> Result<JobResult> {
        let start = Instant::now();
        let mut restore = if self.config.restore_from_latest {
            self.storage.latest()?
        } else {
            None
        };
        let mut restarts = 0u32;
        loop {
            if let Some(c) = &restore {
                self.next_checkpoint = self.next_checkpoint.max(c.id.0 + 1);
                tracing::info!(job = %self.name, checkpoint = c.id.0, "restoring");
            }
            self.set_status(JobStatus::Running(restarts));
            let outcome = self.run_attempt(restarts, restore.as_ref());
            let m = self
                .shared
                .metrics
                .lock()
                .source_records
                .load(Ordering::Relaxed);
            let status = match outcome {
                Ok(AttemptEnd::Finished) => JobStatus::Finished,
                Ok(AttemptEnd::Cancelled) => JobStatus::Cancelled,
                Ok(AttemptEnd::Halted) => JobStatus::Halted,
                Err(e) => {
                    self.shared.earlier_records.fetch_add(m, Ordering::Relaxed);
                    tracing::warn!(job = %self.name, attempt = restarts, error = %crate::error::error_chain(&e), "attempt failed");
                    if !e.is_retryable()
                        || restarts >= self.config.restart_attempts
                        || self.config.cluster.is_some()
                    {
                        self.set_status(JobStatus::Failed(crate::error::error_chain(&e)));
                        if restarts == 0 || !e.is_retryable() {
                            return Err(e);
                        }
                        return Err(StreamError::RestartsExhausted {
                            attempts: restarts + 1,
                            last: Box::new(e),
                        });
                    }
                    restarts += 1;
                    std::thread::sleep(self.config.restart_delay);
                    restore = self.storage.latest()?;
                    continue;
                }
            };
            self.set_status(status.clone());
            return Ok(JobResult {
                name: self.name.clone(),
                status,
                restarts,
                checkpoints: self.checkpoints,
                duration: start.elapsed(),
                source_records: self.shared.source_records(),
            });
        }
    }

    fn build_tasks(
        &self,
        attempt: u32,
        restore: Option<&CompletedCheckpoint>,
        metrics: &Arc<TaskMetrics>,
    ) -> Result<Running> {
        let eg = &self.graph;
        let cfg = &self.config;
        let local_tm = cfg.cluster.as_ref().map(|c| TaskManagerId(c.local));
        let is_local = |s: SubtaskId| -> bool {
            match local_tm {
                None => true,
                Some(tm) => eg.placements.iter().any(|p| p.subtask == s && p.tm == tm),
            }
        };
        let cancel = Arc::new(AtomicBool::new(false));
        let (ev_tx, ev_rx) = unbounded();
        // channels
        let mut outs: HashMap<(SubtaskId, usize), Vec<Option<Sender<Message>>>> = HashMap::new();
        let mut ins: HashMap<SubtaskId, Vec<InputChannel>> = HashMap::new();
        let mut net_threads = Vec::new();
        let mut incoming = HashMap::new();
        for c in &eg.channels {
            let (from_local, to_local) = (is_local(c.from), is_local(c.to));
            if !from_local && !to_local {
                continue;
            }
            let (tx, rx) = bounded(cfg.channel_capacity);
            let edge = &eg.job.edges[c.edge];
            let producer_type = {
                let v = &eg.job.vertices[edge.from.0 as usize];
                let tail = v
                    .nodes
                    .last()
                    .copied()
                    .ok_or_else(|| StreamError::Internal("empty vertex".into()))?;
                eg.job.stream.nodes[tail.0 as usize].out_type.clone()
            };
            if from_local {
                let slots = outs.entry((c.from, c.edge)).or_default();
                if slots.len() <= c.out_index {
                    slots.resize(c.out_index + 1, None);
                }
                slots[c.out_index] = Some(tx.clone());
            }
            if to_local {
                ins.entry(c.to)
                    .or_default()
                    .push(InputChannel::new(rx.clone(), edge.input));
            }
            if from_local && !to_local {
                let tm = eg
                    .placements
                    .iter()
                    .find(|p| p.subtask == c.to)
                    .map(|p| p.tm.0 as usize)
                    .unwrap_or(0);
                let addr = eg
                    .task_managers
                    .get(tm)
                    .and_then(|t| t.data_addr.clone())
                    .ok_or_else(|| {
                        StreamError::Plan(format!(
                            "TaskManager {tm} has no data address for a network edge"
                        ))
                    })?;
                net_threads.push(network::spawn_sender(
                    rx,
                    c.id,
                    addr,
                    producer_type.encode,
                    cancel.clone(),
                    ev_tx.clone(),
                    c.from,
                )?);
            } else if to_local && !from_local {
                incoming.insert(c.id, (tx, producer_type.decode));
            }
        }
        if !incoming.is_empty() {
            let tm = local_tm.map_or(0, |t| t.0 as usize);
            let addr = eg
                .task_managers
                .get(tm)
                .and_then(|t| t.data_addr.clone())
                .ok_or_else(|| StreamError::Plan("local TaskManager has no data address".into()))?;
            let listener =
                TcpListener::bind(&addr).map_err(|e| StreamError::io(addr.clone(), e))?;
            let owner = SubtaskId {
                vertex: crate::types::VertexId(u32::MAX),
                index: tm as u32,
            };
            net_threads.push(network::spawn_listener(
                listener,
                incoming,
                cancel.clone(),
                ev_tx.clone(),
                owner,
            )?);
        }
        // tasks
        let mut tasks = Vec::new();
        let mut controls = Vec::new();
        let mut local = BTreeSet::new();
        for p in &eg.placements {
            if !is_local(p.subtask) {
                continue;
            }
            let v = &eg.job.vertices[p.subtask.vertex.0 as usize];
            let info = SubtaskInfo {
                index: p.subtask.index as usize,
                parallelism: v.parallelism,
                attempt,
                name: format!("{}/{}#{}", self.name, v.name, p.subtask.index),
            };
            let mut source = None;
            let mut ops: Vec<Box<dyn Operator>> = Vec::new();
            for (i, n) in v.nodes.iter().enumerate() {
                match &eg.job.stream.nodes[n.0 as usize].kind {
                    NodeKind::Source(f) if i == 0 => source = Some(f(&info)?),
                    NodeKind::Source(_) => {
                        return Err(StreamError::Internal("source inside a chain".into()))
                    }
                    NodeKind::Operator { factory, .. } => ops.push(factory(&info)?),
                }
            }
            let tail = v
                .nodes
                .last()
                .copied()
                .ok_or_else(|| StreamError::Internal("empty vertex".into()))?;
            let tail_type = &eg.job.stream.nodes[tail.0 as usize].out_type;
            let mut edges = Vec::new();
            for (ei, e) in eg.job.edges.iter().enumerate() {
                if e.from != v.id {
                    continue;
                }
                let senders: Vec<Sender<Message>> = outs
                    .remove(&(p.subtask, ei))
                    .unwrap_or_default()
                    .into_iter()
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| StreamError::Internal("missing output channel".into()))?;
                let writer = (e.writer)(senders.len(), cfg.batch_size);
                edges.push(OutEdge { writer, senders });
            }
            let (ctl_tx, ctl_rx) = unbounded();
            let is_source = source.is_some();
            let mut task = Task {
                id: p.subtask,
                name: info.name.clone(),
                source,
                chain: Chain {
                    ops,
                    out: TaskOutput {
                        edges,
                        clone_batch: tail_type.clone_batch,
                        first_pending: None,
                        cancel: cancel.clone(),
                    },
                },
                inputs: ins.remove(&p.subtask).unwrap_or_default(),
                control: ctl_rx,
                events: ev_tx.clone(),
                cancel: cancel.clone(),
                batch_size: cfg.batch_size,
                current_wm: Timestamp::MIN,
                buffer_timeout: cfg.buffer_timeout,
                metrics: metrics.clone(),
                last_acked: 0,
            };
            if let Some(c) = restore {
                let st = c.states.get(&p.subtask).ok_or_else(|| {
                    StreamError::Checkpoint(format!(
                        "checkpoint {} has no state for {} (restoring at another parallelism is not supported)",
                        c.id.0, p.subtask
                    ))
                })?;
                task.restore(st)?;
            }
            controls.push((p.subtask, is_source, ctl_tx));
            local.insert(p.subtask);
            tasks.push(task);
        }
        drop(ev_tx);
        let mut threads = net_threads;
        for task in tasks {
            let events = task.events.clone();
            let id = task.id;
            let name = task.name.clone();
            let h = std::thread::Builder::new()
                .name(name.chars().take(15).collect())
                .spawn(move || {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.run()));
                    let err = match r {
                        Ok(Ok(())) => return,
                        Ok(Err(e)) => e,
                        Err(p) => StreamError::Task {
                            task: name.clone(),
                            message: format!("panicked: {}", panic_message(p.as_ref())),
                        },
                    };
                    let _ = events.send(TaskEvent::Failed {
                        task: id,
                        error: err,
                    });
                })
                .map_err(|e| StreamError::io("spawn task thread", e))?;
            threads.push(h);
        }
        Ok(Running {
            threads,
            controls,
            cancel,
            events: ev_rx,
            local,
        })
    }

    fn stop(r: Running) {
        r.cancel.store(true, Ordering::Relaxed);
        drop(r.controls);
        for t in r.threads {
            let _ = t.join();
        }
    }

    fn notify(r: &Running, id: CheckpointId, is_final: bool) {
        for (_, _, c) in &r.controls {
            let _ = c.send(TaskControl::CheckpointComplete(id, is_final));
        }
    }

    fn run_attempt(
        &mut self,
        attempt: u32,
        restore: Option<&CompletedCheckpoint>,
    ) -> Result<AttemptEnd> {
        let metrics = Arc::new(TaskMetrics::default());
        *self.shared.metrics.lock() = metrics.clone();
        let r = self.build_tasks(attempt, restore, &metrics)?;
        let total = r.local.len();
        let mut finished: BTreeMap<SubtaskId, TaskState> = BTreeMap::new();
        let mut pending: Option<(CheckpointId, BTreeMap<SubtaskId, TaskState>)> = None;
        let interval = self.config.checkpoint_interval;
        let mut next_trigger = interval.map(|i| Instant::now() + i);
        loop {
            if self.shared.cancel.load(Ordering::Relaxed) {
                Self::stop(r);
                return Ok(AttemptEnd::Cancelled);
            }
            let wait = next_trigger.map_or(Duration::from_millis(50), |t| {
                t.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(50))
            });
            match r.events.recv_timeout(wait) {
                Ok(TaskEvent::Ack { task, id, state }) => {
                    if let Some((pid, acks)) = pending.as_mut() {
                        if *pid == id {
                            acks.insert(task, state);
                        }
                    }
                }
                Ok(TaskEvent::Finished { task, state }) => {
                    finished.insert(task, state);
                }
                Ok(TaskEvent::Failed { task, error }) => {
                    tracing::warn!(job = %self.name, %task, error = %crate::error::error_chain(&error), "task failed");
                    Self::stop(r);
                    return Err(match error {
                        e @ StreamError::Task { .. } => e,
                        e if !e.is_retryable() => e,
                        e => StreamError::Task {
                            task: task.to_string(),
                            message: crate::error::error_chain(&e),
                        },
                    });
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    Self::stop(r);
                    return Err(StreamError::Internal("all tasks vanished".into()));
                }
            }
            // checkpoint completion: every task acked or finished
            if let Some((id, acks)) = &pending {
                if r.local
                    .iter()
                    .all(|t| acks.contains_key(t) || finished.contains_key(t))
                {
                    let mut states = acks.clone();
                    for (t, s) in &finished {
                        states.entry(*t).or_insert_with(|| s.clone());
                    }
                    let c = CompletedCheckpoint {
                        id: *id,
                        is_final: false,
                        states,
                    };
                    if let Err(e) = self.storage.save(&c) {
                        Self::stop(r);
                        return Err(e);
                    }
                    self.checkpoints += 1;
                    tracing::info!(job = %self.name, checkpoint = id.0, "checkpoint complete");
                    Self::notify(&r, *id, false);
                    pending = None;
                    if self
                        .config
                        .halt_after_checkpoints
                        .is_some_and(|n| self.checkpoints >= n)
                    {
                        Self::stop(r);
                        return Ok(AttemptEnd::Halted);
                    }
                }
            }
            if finished.len() == total && pending.is_none() {
                let id = CheckpointId(self.next_checkpoint);
                self.next_checkpoint += 1;
                let c = CompletedCheckpoint {
                    id,
                    is_final: true,
                    states: std::mem::take(&mut finished),
                };
                if let Err(e) = self.storage.save(&c) {
                    Self::stop(r);
                    return Err(e);
                }
                self.checkpoints += 1;
                Self::notify(&r, id, true);
                drop(r.controls);
                for t in r.threads {
                    let _ = t.join();
                }
                // a sink that failed to commit makes the attempt fail; the restart commits again
                if let Ok(TaskEvent::Failed { task, error }) = r.events.try_recv() {
                    return Err(StreamError::Task {
                        task: task.to_string(),
                        message: crate::error::error_chain(&error),
                    });
                }
                return Ok(AttemptEnd::Finished);
            }
            if let Some(t) = next_trigger {
                if Instant::now() >= t && pending.is_none() && finished.len() < total {
                    let id = CheckpointId(self.next_checkpoint);
                    self.next_checkpoint += 1;
                    pending = Some((id, BTreeMap::new()));
                    for (_, is_source, c) in &r.controls {
                        if *is_source {
                            let _ = c.send(TaskControl::TriggerCheckpoint(id));
                        }
                    }
                    next_trigger = interval.map(|i| Instant::now() + i);
                }
            }
        }
    }
}
