//! Record types, ids, channel messages and the type-erased batch vtable.
//!
//! Invariant: an `AnyBatch` flowing out of a node always holds a `Vec<T>`
//! of that node's output type `T`; `TypeInfo` of the node knows `T`.

use std::any::Any;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StreamError};

/// A record type that can flow through a stream: cloneable, sendable and
/// serialisable (for network edges and snapshots).
pub trait Data: Clone + Send + Sync + Serialize + DeserializeOwned + 'static {}
impl<T: Clone + Send + Sync + Serialize + DeserializeOwned + 'static> Data for T {}

/// A key of a keyed stream.
pub trait Key: Data + Hash + Eq + fmt::Debug {}
impl<T: Data + Hash + Eq + fmt::Debug> Key for T {}

/// A batch of records of a known type, erased: always a `Vec<T>`.
pub type AnyBatch = Box<dyn Any + Send>;

/// Event or processing time in milliseconds.
pub type Timestamp = i64;

/// Id of a StreamGraph node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// Id of a JobGraph vertex (a chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VertexId(pub u32);

/// One parallel instance of a vertex.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SubtaskId {
    /// The vertex.
    pub vertex: VertexId,
    /// Index among the vertex's `parallelism` subtasks.
    pub index: u32,
}

impl fmt::Display for SubtaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}#{}", self.vertex.0, self.index)
    }
}

/// Id of a checkpoint; increases over a job's life, across restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CheckpointId(pub u64);

/// Id of a TaskManager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskManagerId(pub u32);

/// What travels on a channel. Per channel, messages are FIFO.
pub enum Message {
    /// A batch of records (`Vec<T>` of the producing node's type).
    Data(AnyBatch),
    /// No record with a smaller event time will follow on this channel.
    Watermark(Timestamp),
    /// Checkpoint barrier: records before it belong to the checkpoint.
    Barrier(CheckpointId),
    /// The producer finished; nothing follows.
    End,
}

/// Downcasts an erased batch to its concrete `Vec<T>`.
pub fn downcast<T: 'static>(batch: AnyBatch) -> Result<Vec<T>> {
    batch.downcast::<Vec<T>>().map(|b| *b).map_err(|_| {
        StreamError::Internal(format!(
            "batch type mismatch: expected Vec<{}>",
            std::any::type_name::<T>()
        ))
    })
}

/// The hasher used for key partitioning. Fixed seed: every process of a job
/// must send a key to the same subtask.
pub fn key_hash<K: Hash + ?Sized>(k: &K) -> u64 {
    foldhash::fast::FixedState::with_seed(0x5eed_edd1_0001).hash_one(k)
}

/// Fast hash map used by keyed operators.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Creates an empty `FastMap`.
pub fn fast_map<K, V>() -> FastMap<K, V> {
    FastMap::with_hasher(foldhash::fast::RandomState::default())
}

/// Writes the output batches of one job edge into its channels: buffers
/// records per channel and hands out a batch when it is full (`batch_size`)
/// or on `flush`. Implemented per type and partitioning.
pub trait EdgeWriter: Send {
    /// Appends a batch; calls `send(channel, batch)` for each full buffer.
    fn write(
        &mut self,
        batch: AnyBatch,
        send: &mut dyn FnMut(usize, AnyBatch) -> Result<()>,
    ) -> Result<()>;
    /// Sends every non-empty buffer.
    fn flush(&mut self, send: &mut dyn FnMut(usize, AnyBatch) -> Result<()>) -> Result<()>;
    /// Whether some buffer holds records.
    fn has_pending(&self) -> bool;
}

/// Factory of an `EdgeWriter` for `(channels, batch_size)`.
pub type WriterFactory = Arc<dyn Fn(usize, usize) -> Box<dyn EdgeWriter> + Send + Sync>;

/// Type-erased operations on batches of one record type.
#[derive(Clone)]
pub struct TypeInfo {
    /// Rust type name, for messages.
    pub name: &'static str,
    /// Clones a batch (for a node with several outgoing edges).
    pub clone_batch: fn(&AnyBatch) -> Result<AnyBatch>,
    /// Number of records in a batch.
    pub len: fn(&AnyBatch) -> usize,
    /// Encodes a batch for a network edge.
    pub encode: fn(&AnyBatch) -> Result<Vec<u8>>,
    /// Decodes a batch from a network edge.
    pub decode: fn(&[u8]) -> Result<AnyBatch>,
    /// Writer sending every record of subtask i to subtask i.
    pub forward: WriterFactory,
    /// Writer spreading records round-robin over the channels.
    pub rebalance: WriterFactory,
}

impl TypeInfo {
    /// The vtable of `T`.
    pub fn of<T: Data>() -> TypeInfo {
        TypeInfo {
            name: std::any::type_name::<T>(),
            clone_batch: |b| {
                b.downcast_ref::<Vec<T>>()
                    .map(|v| Box::new(v.clone()) as AnyBatch)
                    .ok_or_else(|| StreamError::Internal("clone: batch type mismatch".into()))
            },
            len: |b| b.downcast_ref::<Vec<T>>().map_or(0, |v| v.len()),
            encode: |b| {
                let v = b
                    .downcast_ref::<Vec<T>>()
                    .ok_or_else(|| StreamError::Internal("encode: batch type mismatch".into()))?;
                Ok(serde_json::to_vec(v)?)
            },
            decode: |bytes| {
                let v: Vec<T> = serde_json::from_slice(bytes)?;
                Ok(Box::new(v))
            },
            forward: Arc::new(|_n, batch_size| Box::new(RoundRobinWriter::<T>::new(1, batch_size))),
            rebalance: Arc::new(|n, batch_size| {
                Box::new(RoundRobinWriter::<T>::new(n, batch_size))
            }),
        }
    }
}

/// Round-robin (or single-channel forward) writer: moves whole batches when
/// they are large enough, so the common case copies nothing.
pub struct RoundRobinWriter<T> {
    buf: Vec<T>,
    next: usize,
    channels: usize,
    batch_size: usize,
}

impl<T> RoundRobinWriter<T> {
    /// A writer over `channels` channels.
    pub fn new(channels: usize, batch_size: usize) -> Self {
        RoundRobinWriter {
            buf: Vec::new(),
            next: 0,
            channels: channels.max(1),
            batch_size: batch_size.max(1),
        }
    }
    fn target(&mut self) -> usize {
        let c = self.next;
        self.next = (self.next + 1) % self.channels;
        c
    }
}

impl<T: Data> EdgeWriter for RoundRobinWriter<T> {
    fn write(
        &mut self,
        batch: AnyBatch,
        send: &mut dyn FnMut(usize, AnyBatch) -> Result<()>,
    ) -> Result<()> {
        let mut v = downcast::<T>(batch)?;
        if self.buf.is_empty() && v.len() >= self.batch_size / 2 {
            let c = self.target();
            return send(c, Box::new(v));
        }
        if self.buf.is_empty() {
            self.buf = v;
        } else {
            self.buf.append(&mut v);
        }
        if self.buf.len() >= self.batch_size {
            let full = std::mem::take(&mut self.buf);
            let c = self.target();
            send(c, Box::new(full))?;
        }
        Ok(())
    }
    fn flush(&mut self, send: &mut dyn FnMut(usize, AnyBatch) -> Result<()>) -> Result<()> {
        if !self.buf.is_empty() {
            let full = std::mem::take(&mut self.buf);
            let c = self.target();
            send(c, Box::new(full))?;
        }
        Ok(())
    }
    fn has_pending(&self) -> bool {
        !self.buf.is_empty()
    }
}

/// Hash writer: record `r` goes to channel `hash(key(r)) % channels`.
pub struct HashWriter<T, F> {
    bufs: Vec<Vec<T>>,
    key_hash: F,
    batch_size: usize,
    pending: usize,
}

impl<T: Data, F: Fn(&T) -> u64 + Send> HashWriter<T, F> {
    /// A writer over `channels` channels.
    pub fn new(channels: usize, batch_size: usize, key_hash: F) -> Self {
        HashWriter {
            bufs: (0..channels.max(1))
                .map(|_| Vec::with_capacity(batch_size))
                .collect(),
            key_hash,
            batch_size: batch_size.max(1),
            pending: 0,
        }
    }
}

impl<T: Data, F: Fn(&T) -> u64 + Send> EdgeWriter for HashWriter<T, F> {
    fn write(
        &mut self,
        batch: AnyBatch,
        send: &mut dyn FnMut(usize, AnyBatch) -> Result<()>,
    ) -> Result<()> {
        let v = downcast::<T>(batch)?;
        let n = self.bufs.len() as u64;
        for r in v {
            let c = if n == 1 {
                0
            } else {
                ((self.key_hash)(&r) % n) as usize
            };
            let buf = &mut self.bufs[c];
            buf.push(r);
            self.pending += 1;
            if buf.len() >= self.batch_size {
                let full = std::mem::replace(buf, Vec::with_capacity(self.batch_size));
                self.pending -= full.len();
                send(c, Box::new(full))?;
            }
        }
        Ok(())
    }
    fn flush(&mut self, send: &mut dyn FnMut(usize, AnyBatch) -> Result<()>) -> Result<()> {
        for (c, buf) in self.bufs.iter_mut().enumerate() {
            if !buf.is_empty() {
                let full = std::mem::take(buf);
                send(c, Box::new(full))?;
            }
        }
        self.pending = 0;
        Ok(())
    }
    fn has_pending(&self) -> bool {
        self.pending > 0
    }
}
