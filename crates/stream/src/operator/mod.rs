//! The `Operator` trait every chained operator implements, and the simple
//! stateless operators (map, flat_map, filter, watermark assignment, union,
//! co-flat-map).
//!
//! Contract between the task loop and an operator:
//! * `process` may be called many times between two `snapshot`s; a snapshot
//!   must capture everything `process` has seen so far (the task flushes
//!   outputs before snapshotting, so emitted records are not part of it).
//! * `watermark(wm)` is called with a non-decreasing `wm`; an operator that
//!   does not care forwards it.
//! * `finish` is called once when every input has ended; after it only
//!   `snapshot` and `checkpoint_complete` may follow.
//! * `checkpoint_complete(id)` is called only after checkpoint `id` is
//!   durable; sinks commit there.

pub mod keyed;
pub mod sink;
pub mod window;

use std::marker::PhantomData;
use std::time::Instant;

use crate::error::Result;
use crate::types::{downcast, AnyBatch, CheckpointId, Data, Timestamp};

/// Where an operator sends its output.
pub trait Emitter {
    /// Sends a batch (`Vec<T>` of the operator's output type).
    fn emit(&mut self, batch: AnyBatch) -> Result<()>;
    /// Forwards a watermark.
    fn watermark(&mut self, wm: Timestamp) -> Result<()>;
}

/// Information about the subtask an operator instance runs in.
#[derive(Debug, Clone)]
pub struct SubtaskInfo {
    /// Index of this subtask.
    pub index: usize,
    /// Parallelism of its vertex.
    pub parallelism: usize,
    /// Restart attempt (0 for the first run).
    pub attempt: u32,
    /// Human-readable name `job/vertex#index`.
    pub name: String,
}

/// A dataflow operator instance (one per chain position per subtask).
pub trait Operator: Send {
    /// Processes a batch from input `input` (0, or 1 for the second input of a two-input operator).
    fn process(&mut self, input: usize, batch: AnyBatch, out: &mut dyn Emitter) -> Result<()>;
    /// Handles a new (larger) input watermark.
    fn watermark(&mut self, wm: Timestamp, out: &mut dyn Emitter) -> Result<()> {
        out.watermark(wm)
    }
    /// Earliest processing-time timer, if any.
    fn next_timer(&self) -> Option<Instant> {
        None
    }
    /// Fires processing-time timers due at `now`.
    fn on_timer(&mut self, _now: Instant, _out: &mut dyn Emitter) -> Result<()> {
        Ok(())
    }
    /// Every input has ended: emit what is left.
    fn finish(&mut self, _out: &mut dyn Emitter) -> Result<()> {
        Ok(())
    }
    /// Snapshot for checkpoint `id` (sinks pre-commit here). `None`: stateless.
    fn snapshot(&mut self, _id: CheckpointId) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }
    /// Restores from a snapshot taken by `snapshot`.
    fn restore(&mut self, _state: &[u8]) -> Result<()> {
        Ok(())
    }
    /// Checkpoint `id` is durable (`is_final`: the job's last one).
    fn checkpoint_complete(&mut self, _id: CheckpointId, _is_final: bool) -> Result<()> {
        Ok(())
    }
    /// Whether this operator commits output on checkpoint completion.
    fn is_committing_sink(&self) -> bool {
        false
    }
}

/// Collects the output of a per-record function into a batch.
pub struct MapOp<T, U, F> {
    f: F,
    _t: PhantomData<fn(T) -> U>,
}

impl<T, U, F> MapOp<T, U, F> {
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        MapOp { f, _t: PhantomData }
    }
}

impl<T: Data, U: Data, F: FnMut(T) -> U + Send> Operator for MapOp<T, U, F> {
    fn process(&mut self, _input: usize, batch: AnyBatch, out: &mut dyn Emitter) -> Result<()> {
        let v = downcast::<T>(batch)?;
        let o: Vec<U> = v.into_iter().map(&mut self.f).collect();
        out.emit(Box::new(o))
    }
}

/// `flat_map`: the function pushes any number of outputs per record.
pub struct FlatMapOp<T, U, F> {
    f: F,
    _t: PhantomData<fn(T) -> U>,
}

impl<T, U, F> FlatMapOp<T, U, F> {
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        FlatMapOp { f, _t: PhantomData }
    }
}

impl<T: Data, U: Data, F: FnMut(T, &mut Vec<U>) + Send> Operator for FlatMapOp<T, U, F> {
    fn process(&mut self, _input: usize, batch: AnyBatch, out: &mut dyn Emitter) -> Result<()> {
        let v = downcast::<T>(batch)?;
        let mut o: Vec<U> = Vec::with_capacity(v.len() * 2);
        for r in v {
            (self.f)(r, &mut o);
        }
        if o.is_empty() {
            return Ok(());
        }
        out.emit(Box::new(o))
    }
}

/// `try_map`: a fallible map; an error fails the task (and restarts the job).
pub struct TryMapOp<T, U, F> {
    f: F,
    _t: PhantomData<fn(T) -> U>,
}

impl<T, U, F> TryMapOp<T, U, F> {
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        TryMapOp { f, _t: PhantomData }
    }
}

impl<T: Data, U: Data, F: FnMut(T) -> Result<U> + Send> Operator for TryMapOp<T, U, F> {
    fn process(&mut self, _input: usize, batch: AnyBatch, out: &mut dyn Emitter) -> Result<()> {
        let v = downcast::<T>(batch)?;
        let mut o = Vec::with_capacity(v.len());
        for r in v {
            o.push((self.f)(r)?);
        }
        out.emit(Box::new(o))
    }
}

/// `filter`.
pub struct FilterOp<T, F> {
    f: F,
    _t: PhantomData<fn(T)>,
}

impl<T, F> FilterOp<T, F> {
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        FilterOp { f, _t: PhantomData }
    }
}

impl<T: Data, F: FnMut(&T) -> bool + Send> Operator for FilterOp<T, F> {
    fn process(&mut self, _input: usize, batch: AnyBatch, out: &mut dyn Emitter) -> Result<()> {
        let mut v = downcast::<T>(batch)?;
        v.retain(|r| (self.f)(r));
        if v.is_empty() {
            return Ok(());
        }
        out.emit(Box::new(v))
    }
}

/// Passes batches through (union, and the input side of a network edge).
pub struct IdentityOp;

impl Operator for IdentityOp {
    fn process(&mut self, _input: usize, batch: AnyBatch, out: &mut dyn Emitter) -> Result<()> {
        out.emit(batch)
    }
}

/// Bounded out-of-orderness watermark generation: after each batch emits
/// `max_ts_seen - bound` if it grew. Input watermarks are not forwarded
/// (this operator is the watermark origin).
pub struct WatermarkOp<T, F> {
    ts: F,
    bound: Timestamp,
    max_ts: Timestamp,
    last_wm: Timestamp,
    _t: PhantomData<fn(T)>,
}

impl<T, F> WatermarkOp<T, F> {
    /// Watermarks lag the largest timestamp by `bound` ms.
    pub fn new(bound: Timestamp, ts: F) -> Self {
        WatermarkOp {
            ts,
            bound,
            max_ts: Timestamp::MIN,
            last_wm: Timestamp::MIN,
            _t: PhantomData,
        }
    }
}

impl<T: Data, F: Fn(&T) -> Timestamp + Send> Operator for WatermarkOp<T, F> {
    fn process(&mut self, _input: usize, batch: AnyBatch, out: &mut dyn Emitter) -> Result<()> {
        let v = downcast::<T>(batch)?;
        for r in &v {
            self.max_ts = self.max_ts.max((self.ts)(r));
        }
        out.emit(Box::new(v))?;
        if self.max_ts != Timestamp::MIN {
            let wm = self.max_ts.saturating_sub(self.bound);
            if wm > self.last_wm {
                self.last_wm = wm;
                out.watermark(wm)?;
            }
        }
        Ok(())
    }
    fn watermark(&mut self, _wm: Timestamp, _out: &mut dyn Emitter) -> Result<()> {
        Ok(())
    }
    fn snapshot(&mut self, _id: CheckpointId) -> Result<Option<Vec<u8>>> {
        Ok(Some(serde_json::to_vec(&(self.max_ts, self.last_wm))?))
    }
    fn restore(&mut self, state: &[u8]) -> Result<()> {
        let (m, l): (Timestamp, Timestamp) = serde_json::from_slice(state)?;
        self.max_ts = m;
        self.last_wm = l;
        Ok(())
    }
}

/// Two-input flat map (`connect(...).flat_map(f1, f2)`).
pub struct CoFlatMapOp<A, B, U, F1, F2> {
    f1: F1,
    f2: F2,
    _t: PhantomData<fn(A, B) -> U>,
}

impl<A, B, U, F1, F2> CoFlatMapOp<A, B, U, F1, F2> {
    /// Wraps the two functions.
    pub fn new(f1: F1, f2: F2) -> Self {
        CoFlatMapOp {
            f1,
            f2,
            _t: PhantomData,
        }
    }
}

impl<A, B, U, F1, F2> Operator for CoFlatMapOp<A, B, U, F1, F2>
where
    A: Data,
    B: Data,
    U: Data,
    F1: FnMut(A, &mut Vec<U>) + Send,
    F2: FnMut(B, &mut Vec<U>) + Send,
{
    fn process(&mut self, input: usize, batch: AnyBatch, out: &mut dyn Emitter) -> Result<()> {
        let mut o = Vec::new();
        if input == 0 {
            for r in downcast::<A>(batch)? {
                (self.f1)(r, &mut o);
            }
        } else {
            for r in downcast::<B>(batch)? {
                (self.f2)(r, &mut o);
            }
        }
        if o.is_empty() {
            return Ok(());
        }
        out.emit(Box::new(o))
    }
}
