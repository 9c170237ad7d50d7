//! `BenchError`: the one error type of `eddy-bench`, grouped by who is at fault.

use std::path::PathBuf;

/// Every failure of a generator or a harness.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    // --- the user: bad arguments or options ---
    /// An argument or option has a value the command cannot use.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    // --- the environment: files, processes, peers, servers ---
    /// A file or directory could not be read or written.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An I/O error not tied to one path (a pipe, a socket).
    #[error("I/O error: {0}")]
    IoPlain(#[from] std::io::Error),
    /// A child process (peer runner, PostgreSQL, the Eddy server) failed.
    #[error("process `{command}` failed: {detail}")]
    Process {
        /// The command line, shortened.
        command: String,
        /// Exit status and the tail of its output.
        detail: String,
    },
    /// A server speaking the PostgreSQL protocol returned an error.
    #[error("PostgreSQL protocol error: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// A peer engine gave a result the harness could not use.
    #[error("peer `{engine}`: {detail}")]
    Peer {
        /// The engine name.
        engine: String,
        /// What went wrong.
        detail: String,
    },
    /// A wait for a server or a process ran out of time.
    #[error("timed out: {0}")]
    Timeout(String),

    // --- the data: encoding and decoding ---
    /// Arrow could not build or convert a batch.
    #[error("arrow error: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// Parquet could not be written or read.
    #[error("parquet error: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// JSON could not be written or parsed.
    #[error("JSON error: {0}")]
    Json(#[from] serde_json::Error),

    // --- this crate: a bug ---
    /// An invariant of the crate does not hold.
    #[error("internal error: {0}")]
    Internal(String),
}

impl BenchError {
    /// Wraps an `io::Error` with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Result with [`BenchError`].
pub type Result<T, E = BenchError> = std::result::Result<T, E>;
