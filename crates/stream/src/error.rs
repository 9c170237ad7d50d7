//! `StreamError`: the one error type of the crate, grouped by who is at fault.

use std::io;

/// Errors of the stream engine. Variants are grouped by who is at fault:
/// the job author (`Plan`), the outside world (`Io`, `Parse`, `Network`,
/// `Checkpoint`), the job's own functions (`Task`), and the engine
/// (`Internal`). Control-flow outcomes (`Cancelled`) are separate.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    // --- user: the job graph or its configuration is wrong ---
    /// The job graph or its configuration is invalid.
    #[error("invalid job: {0}")]
    Plan(String),

    // --- external: files, sockets, input data ---
    /// File or socket I/O failed.
    #[error("i/o error on {context}")]
    Io {
        /// What was being done (a path or an address).
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Input data could not be parsed.
    #[error("cannot parse {what}: {detail}")]
    Parse {
        /// What was being parsed (a file and offset, a format).
        what: String,
        /// Why it failed.
        detail: String,
    },
    /// A network edge failed (connect, protocol, peer gone).
    #[error("network edge: {0}")]
    Network(String),
    /// Checkpoint storage failed or holds something unreadable.
    #[error("checkpoint storage: {0}")]
    Checkpoint(String),
    /// Encoding or decoding a record or a snapshot failed.
    #[error("serialization: {0}")]
    Serde(#[from] serde_json::Error),

    // --- the job's own code ---
    /// A task failed (a user function returned an error or panicked).
    #[error("task {task} failed: {message}")]
    Task {
        /// The subtask that failed.
        task: String,
        /// The error or panic message.
        message: String,
    },
    /// The job failed more often than its restart strategy allows.
    #[error("job failed after {attempts} attempts; last failure: {last}")]
    RestartsExhausted {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        #[source]
        last: Box<StreamError>,
    },

    // --- control flow ---
    /// The job or task was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// A channel's other end is gone (its task exited).
    #[error("channel closed")]
    ChannelClosed,

    // --- engine bug ---
    /// An invariant of the engine does not hold.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The crate's result type.
pub type Result<T, E = StreamError> = std::result::Result<T, E>;

impl StreamError {
    /// An I/O error with the path or address it concerned.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        StreamError::Io {
            context: context.into(),
            source,
        }
    }

    /// Whether restarting the job can help (not for plan errors).
    pub fn is_retryable(&self) -> bool {
        match self {
            StreamError::Plan(_)
            | StreamError::Cancelled
            | StreamError::RestartsExhausted { .. } => false,
            StreamError::Io { .. }
            | StreamError::Parse { .. }
            | StreamError::Network(_)
            | StreamError::Checkpoint(_)
            | StreamError::Serde(_)
            | StreamError::Task { .. }
            | StreamError::ChannelClosed
            | StreamError::Internal(_) => true,
        }
    }
}

/// Formats an error with its whole `source()` chain.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
