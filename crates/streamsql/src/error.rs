//! `StreamSqlError`: what can go wrong planning, starting or running a
//! stream job, and the SQLSTATE a client sees for it (through `SqlError`).

use eddy_sql::SqlError;

pub type Result<T> = std::result::Result<T, StreamSqlError>;

#[derive(Debug, thiserror::Error)]
pub enum StreamSqlError {
    #[error("syntax error: {0}")]
    Syntax(String),
    /// Valid SQL that streaming does not support (refused at CREATE).
    #[error("{0}")]
    NotSupported(String),
    #[error("{0}")]
    InvalidOption(String),
    #[error("{0} \"{1}\" does not exist")]
    Undefined(&'static str, String),
    #[error("{0} \"{1}\" already exists")]
    Duplicate(&'static str, String),
    #[error("{0}")]
    Dependent(String),
    #[error(transparent)]
    Sql(#[from] SqlError),
    #[error(transparent)]
    Storage(#[from] eddy_storage::StorageError),
    #[error(transparent)]
    Stream(#[from] eddy_stream::StreamError),
    #[error(transparent)]
    DataFusion(#[from] datafusion::error::DataFusionError),
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    /// A connector's external system (a Kafka broker, a topic, a record).
    #[error("{0}")]
    Connector(String),
    #[error("checkpoint state: {0}")]
    State(String),
    #[error("{0}")]
    Internal(String),
}

impl From<StreamSqlError> for SqlError {
    fn from(e: StreamSqlError) -> SqlError {
        match e {
            StreamSqlError::Syntax(m) => SqlError::Syntax(m),
            StreamSqlError::NotSupported(m) => SqlError::FeatureNotSupported(m),
            StreamSqlError::InvalidOption(m) => SqlError::InvalidParameter(m),
            StreamSqlError::Undefined(_, name) => SqlError::UndefinedTable(name),
            e @ StreamSqlError::Duplicate(..) => SqlError::DuplicateObject(e.to_string()),
            StreamSqlError::Dependent(m) => SqlError::DependentObjects(m),
            StreamSqlError::Connector(m) => SqlError::NotInPrerequisiteState(m),
            StreamSqlError::Sql(e) => e,
            StreamSqlError::Storage(e) => SqlError::Storage(e),
            StreamSqlError::DataFusion(e) => SqlError::DataFusion(e),
            other => SqlError::Internal(other.to_string()),
        }
    }
}

impl From<StreamSqlError> for eddy_stream::StreamError {
    fn from(e: StreamSqlError) -> eddy_stream::StreamError {
        match e {
            StreamSqlError::Stream(e) => e,
            other => eddy_stream::StreamError::Internal(other.to_string()),
        }
    }
}
