//! The subtask loop: reads input channels (aligning barriers), drives the
//! operator chain, batches output by size and timeout, and talks to the
//! JobManager (acks, finish, commit notifications).
//!
//! Barrier alignment invariant: once `Barrier(n)` arrived on a channel that
//! channel is not read until every channel that has not ended delivered
//! `Barrier(n)`; then outputs are flushed, every operator is snapshotted,
//! `Barrier(n)` is sent on every output channel and `n` is acknowledged, in
//! that order. All blocking waits are bounded and check the cancel flag.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select, SendTimeoutError, Sender};
use serde::{Deserialize, Serialize};

use crate::error::{Result, StreamError};
use crate::operator::sink::FINAL_TAG;
use crate::operator::{Emitter, Operator};
use crate::source::{ErasedSource, SourcePoll};
use crate::types::{AnyBatch, CheckpointId, EdgeWriter, Message, SubtaskId, Timestamp};

/// JobManager -> task.
#[derive(Debug, Clone, Copy)]
pub enum TaskControl {
    /// Sources: inject `Barrier(id)` now.
    TriggerCheckpoint(CheckpointId),
    /// Checkpoint `id` is durable (`true`: the job's final one).
    CheckpointComplete(CheckpointId, bool),
}

/// Task -> JobManager.
pub enum TaskEvent {
    /// The task took its snapshot for checkpoint `id`.
    Ack {
        /// The task.
        task: SubtaskId,
        /// The checkpoint.
        id: CheckpointId,
        /// Its state.
        state: TaskState,
    },
    /// Every input ended; this is the task's final state.
    Finished {
        /// The task.
        task: SubtaskId,
        /// Its final state.
        state: TaskState,
    },
    /// The task failed.
    Failed {
        /// The task.
        task: SubtaskId,
        /// Why.
        error: StreamError,
    },
}

/// Snapshot of one subtask: its source position and one entry per chained operator.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskState {
    /// Source position, for source tasks.
    pub source: Option<Vec<u8>>,
    /// Operator states, in chain order (`None`: stateless).
    pub ops: Vec<Option<Vec<u8>>>,
}

fn put_opt(out: &mut Vec<u8>, v: &Option<Vec<u8>>) {
    match v {
        None => out.push(0),
        Some(b) => {
            out.push(1);
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
        }
    }
}

fn get_opt(b: &[u8], pos: &mut usize) -> Result<Option<Vec<u8>>> {
    let bad = || StreamError::Checkpoint("truncated task state".into());
    let tag = *b.get(*pos).ok_or_else(bad)?;
    *pos += 1;
    if tag == 0 {
        return Ok(None);
    }
    let len_bytes: [u8; 8] = b
        .get(*pos..*pos + 8)
        .ok_or_else(bad)?
        .try_into()
        .map_err(|_| bad())?;
    let len = u64::from_le_bytes(len_bytes) as usize;
    *pos += 8;
    let v = b
        .get(*pos..pos.saturating_add(len))
        .ok_or_else(bad)?
        .to_vec();
    *pos += len;
    Ok(Some(v))
}

impl TaskState {
    /// Compact binary encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_opt(&mut out, &self.source);
        out.extend_from_slice(&(self.ops.len() as u64).to_le_bytes());
        for o in &self.ops {
            put_opt(&mut out, o);
        }
        out
    }
    /// Decodes `encode`'s output.
    pub fn decode(b: &[u8]) -> Result<TaskState> {
        let mut pos = 0;
        let source = get_opt(b, &mut pos)?;
        let n_bytes: [u8; 8] = b
            .get(pos..pos + 8)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| StreamError::Checkpoint("truncated task state".into()))?;
        pos += 8;
        let n = u64::from_le_bytes(n_bytes) as usize;
        let mut ops = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            ops.push(get_opt(b, &mut pos)?);
        }
        Ok(TaskState { source, ops })
    }
}

/// Sends on a bounded channel, waiting in short slices that check `cancel`.
pub fn send_blocking(tx: &Sender<Message>, msg: Message, cancel: &AtomicBool) -> Result<()> {
    let mut msg = msg;
    loop {
        match tx.send_timeout(msg, Duration::from_millis(20)) {
            Ok(()) => return Ok(()),
            Err(SendTimeoutError::Timeout(m)) => {
                if cancel.load(Ordering::Relaxed) {
                    return Err(StreamError::Cancelled);
                }
                msg = m;
            }
            Err(SendTimeoutError::Disconnected(_)) => return Err(StreamError::ChannelClosed),
        }
    }
}

/// One outgoing job edge of a subtask.
pub struct OutEdge {
    /// Partitioning writer.
    pub writer: Box<dyn EdgeWriter>,
    /// One sender per consumer channel.
    pub senders: Vec<Sender<Message>>,
}

/// The chain tail: writes batches to the outgoing edges.
pub struct TaskOutput {
    /// Outgoing edges.
    pub edges: Vec<OutEdge>,
    /// Clones a batch of the tail's type (for several outgoing edges).
    pub clone_batch: fn(&AnyBatch) -> Result<AnyBatch>,
    /// When the oldest unflushed record was buffered.
    pub first_pending: Option<Instant>,
    /// Cancel flag of the attempt.
    pub cancel: Arc<AtomicBool>,
}

impl TaskOutput {
    /// Sends every buffered record.
    pub fn flush(&mut self) -> Result<()> {
        let cancel = &self.cancel;
        for e in &mut self.edges {
            let OutEdge { writer, senders } = e;
            writer.flush(&mut |c, b| send_blocking(&senders[c], Message::Data(b), cancel))?;
        }
        self.first_pending = None;
        Ok(())
    }
    /// Flushes, then sends `make()` on every channel.
    pub fn broadcast(&mut self, make: impl Fn() -> Message) -> Result<()> {
        self.flush()?;
        for e in &self.edges {
            for s in &e.senders {
                send_blocking(s, make(), &self.cancel)?;
            }
        }
        Ok(())
    }
}

impl Emitter for TaskOutput {
    fn emit(&mut self, batch: AnyBatch) -> Result<()> {
        let n = self.edges.len();
        if n == 0 {
            return Ok(());
        }
        let cancel = &self.cancel;
        let mut batch = Some(batch);
        let mut pending = false;
        for (i, e) in self.edges.iter_mut().enumerate() {
            let b = if i + 1 == n {
                batch.take()
            } else {
                match &batch {
                    Some(b) => Some((self.clone_batch)(b)?),
                    None => None,
                }
            };
            let Some(b) = b else { break };
            let OutEdge { writer, senders } = e;
            writer.write(b, &mut |c, b| {
                send_blocking(&senders[c], Message::Data(b), cancel)
            })?;
            pending |= writer.has_pending();
        }
        if pending && self.first_pending.is_none() {
            self.first_pending = Some(Instant::now());
        }
        Ok(())
    }
    fn watermark(&mut self, wm: Timestamp) -> Result<()> {
        self.broadcast(|| Message::Watermark(wm))
    }
}

struct ChainEmitter<'a> {
    rest: &'a mut [Box<dyn Operator>],
    out: &'a mut TaskOutput,
}

impl Emitter for ChainEmitter<'_> {
    fn emit(&mut self, batch: AnyBatch) -> Result<()> {
        match self.rest.split_first_mut() {
            Some((op, rest)) => op.process(
                0,
                batch,
                &mut ChainEmitter {
                    rest,
                    out: self.out,
                },
            ),
            None => self.out.emit(batch),
        }
    }
    fn watermark(&mut self, wm: Timestamp) -> Result<()> {
        match self.rest.split_first_mut() {
            Some((op, rest)) => op.watermark(
                wm,
                &mut ChainEmitter {
                    rest,
                    out: self.out,
                },
            ),
            None => self.out.watermark(wm),
        }
    }
}

/// Chained operators: each calls the next directly.
pub struct Chain {
    /// Operators, head first.
    pub ops: Vec<Box<dyn Operator>>,
    /// The tail output.
    pub out: TaskOutput,
}

impl Chain {
    fn process(&mut self, input: usize, batch: AnyBatch) -> Result<()> {
        match self.ops.split_first_mut() {
            Some((op, rest)) => op.process(
                input,
                batch,
                &mut ChainEmitter {
                    rest,
                    out: &mut self.out,
                },
            ),
            None => self.out.emit(batch),
        }
    }
    fn emit_into_chain(&mut self, batch: AnyBatch) -> Result<()> {
        ChainEmitter {
            rest: &mut self.ops,
            out: &mut self.out,
        }
        .emit(batch)
    }
    fn watermark(&mut self, wm: Timestamp) -> Result<()> {
        ChainEmitter {
            rest: &mut self.ops,
            out: &mut self.out,
        }
        .watermark(wm)
    }
    fn next_timer(&self) -> Option<Instant> {
        self.ops.iter().filter_map(|o| o.next_timer()).min()
    }
    fn fire_timers(&mut self, now: Instant) -> Result<()> {
        for i in 0..self.ops.len() {
            if self.ops[i].next_timer().is_some_and(|t| t <= now) {
                let (head, rest) = self.ops.split_at_mut(i + 1);
                head[i].on_timer(
                    now,
                    &mut ChainEmitter {
                        rest,
                        out: &mut self.out,
                    },
                )?;
            }
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        for i in 0..self.ops.len() {
            let (head, rest) = self.ops.split_at_mut(i + 1);
            head[i].finish(&mut ChainEmitter {
                rest,
                out: &mut self.out,
            })?;
        }
        Ok(())
    }
    fn snapshot(&mut self, id: CheckpointId) -> Result<Vec<Option<Vec<u8>>>> {
        self.ops.iter_mut().map(|o| o.snapshot(id)).collect()
    }
    fn complete(&mut self, id: CheckpointId, is_final: bool) -> Result<()> {
        for o in &mut self.ops {
            o.checkpoint_complete(id, is_final)?;
        }
        Ok(())
    }
    fn has_committing_sink(&self) -> bool {
        self.ops.iter().any(|o| o.is_committing_sink())
    }
}

/// An input channel of a subtask.
pub struct InputChannel {
    /// Receiving end.
    pub rx: Receiver<Message>,
    /// Which input of the head operator.
    pub input: usize,
    ended: bool,
    blocked: bool,
    wm: Timestamp,
}

impl InputChannel {
    /// A channel feeding input `input`.
    pub fn new(rx: Receiver<Message>, input: usize) -> Self {
        InputChannel {
            rx,
            input,
            ended: false,
            blocked: false,
            wm: Timestamp::MIN,
        }
    }
}

/// Counters a task updates for progress reporting.
#[derive(Default)]
pub struct TaskMetrics {
    /// Records emitted by sources.
    pub source_records: AtomicU64,
}

/// A runnable subtask.
pub struct Task {
    /// Identity.
    pub id: SubtaskId,
    /// Name for logs.
    pub name: String,
    /// The source, for source tasks.
    pub source: Option<Box<dyn ErasedSource>>,
    /// The operator chain.
    pub chain: Chain,
    /// Input channels (empty for sources).
    pub inputs: Vec<InputChannel>,
    /// Commands from the JobManager.
    pub control: Receiver<TaskControl>,
    /// Events to the JobManager.
    pub events: Sender<TaskEvent>,
    /// Attempt-wide cancel flag.
    pub cancel: Arc<AtomicBool>,
    /// Records per poll of a source.
    pub batch_size: usize,
    /// Current input watermark (starts at `Timestamp::MIN`).
    pub current_wm: Timestamp,
    /// Flush timeout of output buffers.
    pub buffer_timeout: Duration,
    /// Shared progress counters.
    pub metrics: Arc<TaskMetrics>,
    /// The newest checkpoint this task acknowledged (0: none).
    pub last_acked: u64,
}

impl Task {
    /// Restores the source position and operator states.
    pub fn restore(&mut self, state: &TaskState) -> Result<()> {
        if let (Some(s), Some(b)) = (self.source.as_mut(), state.source.as_ref()) {
            s.restore(b)?;
        }
        if state.ops.len() != self.chain.ops.len() {
            return Err(StreamError::Checkpoint(format!(
                "{}: snapshot has {} operators, chain has {}",
                self.name,
                state.ops.len(),
                self.chain.ops.len()
            )));
        }
        for (op, st) in self.chain.ops.iter_mut().zip(&state.ops) {
            if let Some(b) = st {
                op.restore(b)?;
            }
        }
        Ok(())
    }

    /// Runs to completion, cancellation or failure.
    pub fn run(mut self) -> Result<()> {
        if self.source.is_some() {
            self.run_source()?;
        } else {
            self.run_inputs()?;
        }
        self.finish()
    }

    fn check_cancel(&self) -> Result<()> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(StreamError::Cancelled);
        }
        Ok(())
    }

    fn flush_deadline(&self) -> Option<Instant> {
        self.chain
            .out
            .first_pending
            .map(|t| t + self.buffer_timeout)
    }

    /// Flushes on timeout and fires due timers.
    fn housekeeping(&mut self) -> Result<()> {
        let now = Instant::now();
        if self.flush_deadline().is_some_and(|d| d <= now) {
            self.chain.out.flush()?;
        }
        if self.chain.next_timer().is_some_and(|t| t <= now) {
            self.chain.fire_timers(now)?;
        }
        Ok(())
    }

    fn wait_budget(&self, cap: Duration) -> Duration {
        let now = Instant::now();
        let mut until = now + cap;
        if let Some(d) = self.flush_deadline() {
            until = until.min(d);
        }
        if let Some(t) = self.chain.next_timer() {
            until = until.min(t);
        }
        until.saturating_duration_since(now)
    }

    fn checkpoint(&mut self, id: CheckpointId) -> Result<()> {
        self.chain.out.flush()?;
        let source = match &self.source {
            Some(s) => Some(s.snapshot()?),
            None => None,
        };
        let ops = self.chain.snapshot(id)?;
        self.chain.out.broadcast(|| Message::Barrier(id))?;
        tracing::debug!(task = %self.name, checkpoint = id.0, "snapshot taken");
        self.last_acked = self.last_acked.max(id.0);
        self.events
            .send(TaskEvent::Ack {
                task: self.id,
                id,
                state: TaskState { source, ops },
            })
            .map_err(|_| StreamError::Cancelled)
    }

    fn on_control(&mut self, c: TaskControl) -> Result<()> {
        match c {
            TaskControl::TriggerCheckpoint(id) => {
                if self.source.is_some() {
                    self.checkpoint(id)?;
                }
                Ok(())
            }
            TaskControl::CheckpointComplete(id, is_final) => self.chain.complete(id, is_final),
        }
    }

    fn run_source(&mut self) -> Result<()> {
        loop {
            self.check_cancel()?;
            while let Ok(c) = self.control.try_recv() {
                self.on_control(c)?;
            }
            let Some(src) = self.source.as_mut() else {
                return Err(StreamError::Internal("source task without source".into()));
            };
            let (batch, n, st) = src.poll(self.batch_size)?;
            if let Some(b) = batch {
                self.metrics
                    .source_records
                    .fetch_add(n as u64, Ordering::Relaxed);
                self.chain.emit_into_chain(b)?;
            }
            match st {
                SourcePoll::Ready => {}
                SourcePoll::Finished => return Ok(()),
                SourcePoll::Idle(d) => {
                    let wait = self.wait_budget(d);
                    if let Ok(c) = self.control.recv_timeout(wait) {
                        self.on_control(c)?;
                    }
                }
            }
            self.housekeeping()?;
        }
    }

    fn aligned(&self) -> bool {
        self.inputs.iter().all(|c| c.ended || c.blocked)
    }

    fn on_message(
        &mut self,
        ch: usize,
        msg: Message,
        aligning: &mut Option<CheckpointId>,
    ) -> Result<()> {
        match msg {
            Message::Data(b) => {
                let input = self.inputs[ch].input;
                self.chain.process(input, b)?;
            }
            Message::Watermark(w) => {
                let c = &mut self.inputs[ch];
                c.wm = c.wm.max(w);
                self.advance_watermark()?;
            }
            Message::Barrier(id) => {
                match *aligning {
                    Some(cur) if cur != id => {
                        return Err(StreamError::Internal(format!(
                            "{}: barrier {} while aligning {}",
                            self.name, id.0, cur.0
                        )))
                    }
                    _ => *aligning = Some(id),
                }
                self.inputs[ch].blocked = true;
            }
            Message::End => {
                self.inputs[ch].ended = true;
                self.inputs[ch].blocked = false;
                self.advance_watermark()?;
            }
        }
        if let Some(id) = *aligning {
            if self.aligned() {
                *aligning = None;
                self.checkpoint(id)?;
                for c in &mut self.inputs {
                    c.blocked = false;
                }
            }
        }
        Ok(())
    }

    fn advance_watermark(&mut self) -> Result<()> {
        let m = self.inputs.iter().filter(|c| !c.ended).map(|c| c.wm).min();
        if let Some(m) = m {
            if m > self.current_wm {
                self.current_wm = m;
                self.chain.watermark(m)?;
            }
        }
        Ok(())
    }

    fn run_inputs(&mut self) -> Result<()> {
        let mut aligning: Option<CheckpointId> = None;
        let mut rr = 0usize;
        loop {
            self.check_cancel()?;
            while let Ok(c) = self.control.try_recv() {
                self.on_control(c)?;
            }
            if self.inputs.iter().all(|c| c.ended) {
                return Ok(());
            }
            // fast path: poll ready channels without building a Select
            let n = self.inputs.len();
            let mut got = None;
            for k in 0..n {
                let i = (rr + k) % n;
                let c = &self.inputs[i];
                if c.ended || c.blocked {
                    continue;
                }
                if let Ok(m) = c.rx.try_recv() {
                    got = Some((i, m));
                    rr = i + 1;
                    break;
                }
            }
            if let Some((i, m)) = got {
                self.on_message(i, m, &mut aligning)?;
                self.housekeeping()?;
                continue;
            }
            let wait = self.wait_budget(Duration::from_millis(50));
            let mut sel = Select::new();
            let mut map = Vec::with_capacity(n);
            for (i, c) in self.inputs.iter().enumerate() {
                if !c.ended && !c.blocked {
                    sel.recv(&c.rx);
                    map.push(i);
                }
            }
            let ctrl = sel.recv(&self.control);
            let got = match sel.select_timeout(wait) {
                Ok(op) => {
                    let k = op.index();
                    if k == ctrl {
                        Some(Err(op.recv(&self.control)))
                    } else {
                        let i = map[k];
                        Some(Ok((i, op.recv(&self.inputs[i].rx))))
                    }
                }
                Err(_) => None,
            };
            drop(sel);
            match got {
                Some(Err(Ok(c))) => self.on_control(c)?,
                Some(Err(Err(_))) => return Err(StreamError::Cancelled),
                Some(Ok((i, Ok(m)))) => self.on_message(i, m, &mut aligning)?,
                Some(Ok((_, Err(_)))) => {
                    self.check_cancel()?;
                    return Err(StreamError::ChannelClosed);
                }
                None => {}
            }
            self.housekeeping()?;
        }
    }

    /// End of input: finish operators, send `End`, report the final state,
    /// and (sinks) wait for the final commit.
    fn finish(mut self) -> Result<()> {
        self.chain.finish()?;
        self.chain.out.broadcast(|| Message::End)?;
        let source = match &self.source {
            Some(s) => Some(s.snapshot()?),
            None => None,
        };
        let ops = self.chain.snapshot(CheckpointId(FINAL_TAG))?;
        self.events
            .send(TaskEvent::Finished {
                task: self.id,
                state: TaskState { source, ops },
            })
            .map_err(|_| StreamError::Cancelled)?;
        if !self.chain.has_committing_sink() {
            return Ok(());
        }
        loop {
            self.check_cancel()?;
            match self.control.recv_timeout(Duration::from_millis(50)) {
                // A checkpoint this task did not acknowledge holds its final state
                // (the JobManager uses the `Finished` snapshot for it): commit
                // everything. One it did acknowledge holds only what came
                // before its barrier: commit up to it and keep waiting.
                Ok(TaskControl::CheckpointComplete(id, is_final)) => {
                    if is_final || id.0 > self.last_acked {
                        return self.chain.complete(id, true);
                    }
                    self.chain.complete(id, false)?;
                }
                Ok(TaskControl::TriggerCheckpoint(_)) => {}
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    return Err(StreamError::Cancelled)
                }
            }
        }
    }
}
