//! # eddy-stream: Eddy's dataflow stream engine (the Hummer design)
//!
//! This crate owns stream processing in Eddy: the typed DataStream API
//! ([`api`]), the compilation StreamGraph -> JobGraph -> ExecutionGraph
//! ([`graph`]), the runtime with its JobManager, TaskManager slots,
//! batching channels, checkpoints and restarts ([`runtime`]), operators and
//! windows ([`operator`]), keyed state ([`state`]), sources ([`source`]) and
//! the `eddy stream ...` command-line entry points ([`cli`]).
//!
//! ```no_run
//! use eddy_stream::prelude::*;
//! let env = StreamEnv::new(JobConfig::default().parallelism(2));
//! let counts = env
//!     .read_text_file("corpus.txt")
//!     .flat_map(|line: String, out: &mut Vec<(Word, u64)>| {
//!         for w in line.split_whitespace() {
//!             out.push((Word::new(w), 1));
//!         }
//!     })
//!     .key_by(|(w, _): &(Word, u64)| w.clone())
//!     .reduce_at_end(|acc: &mut (Word, u64), v: (Word, u64)| acc.1 += v.1)
//!     .collect();
//! env.execute("wordcount")?;
//! println!("{} distinct words", counts.len());
//! # Ok::<(), eddy_stream::StreamError>(())
//! ```
//!
//! Invariants the whole crate relies on:
//! * Per channel, messages are FIFO; a `Barrier(n)` separates the records
//!   of checkpoint `n` from later ones, and a task snapshots only once
//!   barrier `n` arrived on every input that has not ended (alignment).
//! * A checkpoint is complete only when every subtask acknowledged it (or
//!   finished) and its `_metadata` is durable; sinks commit only after that.
//! * After any task failure every task of the job restarts from the newest
//!   complete checkpoint and sources rewind to its offsets: state and the
//!   transactional sinks (collect, file) are exactly-once.
//! * Input data, files and the network never reach a panic: they produce
//!   [`StreamError`].
//!
//! Where to look next: `docs/design/stream.md` (protocols),
//! [`runtime::task`] (the subtask loop and barrier alignment),
//! [`operator::sink`] (two-phase commit), `docs/benchmarks/stream.md`.

pub mod api;
pub mod cli;
pub mod error;
pub mod graph;
pub mod operator;
pub mod runtime;
pub mod source;
pub mod state;
pub mod types;

pub use error::{Result, StreamError};

/// Short word type for word counts (inline up to 23 bytes, no allocation).
pub type Word = smol_str::SmolStr;

/// Everything a job needs.
pub mod prelude {
    pub use crate::api::{
        ConnectedStreams, DataStream, JoinSpec, KeyedStream, StreamEnv, WindowedStream,
    };
    pub use crate::error::{Result, StreamError};
    pub use crate::operator::keyed::AggregateFunction;
    pub use crate::operator::sink::{read_committed_lines, CollectHandle};
    pub use crate::operator::window::{TimeMode, Window, WindowKind, WindowResult, WindowSpec};
    pub use crate::runtime::{ClusterConfig, JobConfig, JobHandle, JobResult, JobStatus};
    pub use crate::state::KeyedState;
    pub use crate::types::{Data, Key, Timestamp};
    pub use crate::Word;
}
