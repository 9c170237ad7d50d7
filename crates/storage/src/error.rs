//! The storage engine's error type, grouped by who is at fault.

use std::path::PathBuf;

use crate::arrow_values::ConversionError;
use eddy_common::{ColumnType, Value};

/// Everything that can go wrong in the storage engine.
///
/// Variants fall in three groups: the user's fault (bad definitions, constraint
/// violations), the environment's (I/O, full disk) and corruption (a file whose
/// checksum or structure is wrong: never returned as data).
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    // ---- user errors ----
    #[error("table \"{0}\" already exists")]
    TableExists(String),
    #[error("table \"{0}\" does not exist")]
    TableNotFound(String),
    #[error("schema \"{0}\" already exists")]
    SchemaExists(String),
    #[error("table group \"{0}\" already exists")]
    TableGroupExists(String),
    #[error("table group \"{0}\" does not exist")]
    TableGroupNotFound(String),
    #[error("column \"{column}\" of relation \"{table}\" already exists")]
    ColumnExists { table: String, column: String },
    #[error("column \"{0}\" does not exist")]
    ColumnNotFound(String),
    #[error("invalid table definition: {0}")]
    InvalidDefinition(String),
    #[error("duplicate key value violates unique constraint \"{table}_pkey\": Key ({key}) already exists")]
    DuplicateKey { table: String, key: String },
    /// A UNIQUE index (or constraint) named `constraint` already holds `key`.
    #[error("duplicate key value violates unique constraint \"{constraint}\": Key ({key}) already exists")]
    UniqueViolation { constraint: String, key: String },
    /// CREATE UNIQUE INDEX over rows that already repeat a key.
    #[error("could not create unique index \"{index}\": Key ({key}) is duplicated")]
    DuplicatedKey { index: String, key: String },
    #[error(
        "null value in column \"{column}\" of relation \"{table}\" violates not-null constraint"
    )]
    NotNull {
        table: String,
        column: String,
        /// The failing row with its columns' types, where a row (not a
        /// column batch) was checked: PostgreSQL's DETAIL prints it.
        row: Option<Vec<(Value, ColumnType)>>,
    },
    #[error("value for column \"{column}\" of relation \"{table}\" has the wrong type: expected {expected}, got {got}")]
    WrongType {
        table: String,
        column: String,
        expected: String,
        got: String,
    },
    #[error("row for relation \"{table}\" has {got} values, expected {expected}")]
    WrongArity {
        table: String,
        expected: usize,
        got: usize,
    },
    /// Something storage does not do (yet), refused rather than done wrong.
    #[error("{0}")]
    Unsupported(String),
    /// An ON CONFLICT DO UPDATE callback refused the row, with the
    /// SQLSTATE its caller gave.
    #[error("{}", .0.message)]
    ConflictUpdate(crate::shard::ConflictUpdateError),

    // ---- concurrency ----
    #[error("deadlock detected: transaction {waiter} waits for transaction {holder}, which waits for it")]
    Deadlock { waiter: u64, holder: u64 },
    #[error("could not obtain lock on row in relation \"{0}\"")]
    LockNotAvailable(String),
    #[error("canceling statement due to lock timeout")]
    LockTimeout,
    #[error("could not serialize access due to concurrent update")]
    SerializationFailure,

    // ---- environment ----
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("object store error: {0}")]
    ObjectStore(#[from] object_store::Error),
    #[error("arrow error in {context}: {source}")]
    Arrow {
        context: String,
        #[source]
        source: arrow::error::ArrowError,
    },
    /// A value that does not match its column's type, or an array that
    /// does not hold its column's type, met while building or reading a
    /// batch. Storage checks rows (`codec::check_row`) and bulk batches
    /// before this point, so this is a bug upstream: it is loud (XX000)
    /// and the write that met it commits nothing.
    #[error("{context}: {source}")]
    Conversion {
        context: String,
        #[source]
        source: ConversionError,
    },
    #[error("the storage engine is closed")]
    Closed,
    #[error("the storage engine failed earlier and refuses writes until restarted: {0}")]
    Poisoned(String),

    // ---- corruption ----
    #[error("corrupt file {path}: {detail}")]
    Corrupt { path: PathBuf, detail: String },
}

impl StorageError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> StorageError {
        StorageError::Io {
            path: path.into(),
            source,
        }
    }

    pub fn corrupt(path: impl Into<PathBuf>, detail: impl Into<String>) -> StorageError {
        StorageError::Corrupt {
            path: path.into(),
            detail: detail.into(),
        }
    }

    pub fn arrow(context: impl Into<String>, source: arrow::error::ArrowError) -> StorageError {
        StorageError::Arrow {
            context: context.into(),
            source,
        }
    }

    pub fn conversion(context: impl Into<String>, source: ConversionError) -> StorageError {
        StorageError::Conversion {
            context: context.into(),
            source,
        }
    }

    /// The PostgreSQL SQLSTATE a client should see for this error.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            StorageError::TableExists(_) => "42P07",
            StorageError::SchemaExists(_) => "42P06",
            StorageError::TableNotFound(_) => "42P01",
            StorageError::TableGroupExists(_) => "42710",
            StorageError::TableGroupNotFound(_) => "42704",
            StorageError::ColumnExists { .. } => "42701",
            StorageError::ColumnNotFound(_) => "42703",
            StorageError::InvalidDefinition(_) => "42P16",
            StorageError::DuplicateKey { .. }
            | StorageError::UniqueViolation { .. }
            | StorageError::DuplicatedKey { .. } => "23505",
            StorageError::NotNull { .. } => "23502",
            StorageError::WrongType { .. } => "42804",
            StorageError::WrongArity { .. } => "42601",
            StorageError::ConflictUpdate(e) => e.sqlstate,
            StorageError::Unsupported(_) => "0A000",
            StorageError::Deadlock { .. } => "40P01",
            StorageError::LockNotAvailable(_) | StorageError::LockTimeout => "55P03",
            StorageError::SerializationFailure => "40001",
            StorageError::Io { source, .. } if is_disk_full(source) => "53100",
            StorageError::Io { .. } => "58030",
            StorageError::ObjectStore(_) => "58030",
            StorageError::Conversion { source, .. } => match source {
                ConversionError::IntervalOutOfRange | ConversionError::TimestampOutOfRange => {
                    source.sqlstate()
                }
                _ => "XX000",
            },
            StorageError::Arrow { .. } => "XX000",
            StorageError::Closed => "57P01",
            StorageError::Poisoned(_) => "58030",
            StorageError::Corrupt { .. } => "XX001",
        }
    }
}

fn is_disk_full(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull || e.raw_os_error() == Some(28)
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;
