//! The SQL layer's error type and its mapping to PostgreSQL SQLSTATEs.
//!
//! Every error a client can see goes through [`SqlError::sqlstate`], an
//! exhaustive match with no catch-all arm: adding a variant forces a
//! decision about its code.

use datafusion::arrow::error::ArrowError;
use datafusion::common::SchemaError;
use datafusion::error::DataFusionError;
use datafusion::sql::sqlparser::parser::ParserError;
use eddy_storage::arrow_values::ConversionError;
use eddy_storage::StorageError;

/// Everything that can go wrong while running one SQL statement.
///
/// Variants are grouped by who is at fault: the user (bad SQL, bad data),
/// the environment (storage, I/O) or Eddy itself (internal).
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    // ---- the user's fault ----
    #[error("syntax error: {0}")]
    Syntax(String),
    /// 42601 with PostgreSQL's own words (no "syntax error" prefix).
    #[error("{0}")]
    SyntaxMessage(String),
    #[error("relation \"{0}\" does not exist")]
    UndefinedTable(String),
    #[error("column \"{0}\" does not exist")]
    UndefinedColumn(String),
    #[error("column \"{0}\" specified more than once")]
    DuplicateColumn(String),
    #[error("{0}")]
    FeatureNotSupported(String),
    #[error("{0}")]
    InvalidDefinition(String),
    /// An object of another kind than the statement works on (a write to a
    /// materialized view).
    #[error("{0}")]
    WrongObjectType(String),
    #[error("{0}")]
    DuplicateObject(String),
    /// 55006: an object in use (dropping the session's own role).
    #[error("{0}")]
    ObjectInUse(String),
    /// 0LP01: a GRANT that cannot be (a membership cycle).
    #[error("{0}")]
    InvalidGrant(String),
    /// 42939: a name PostgreSQL reserves (`pg_` roles, `public`).
    #[error("{0}")]
    ReservedName(String),
    /// 42704: a role (or other non-relation object) that does not exist.
    #[error("{0}")]
    UndefinedObject(String),
    /// Other objects depend on the one being dropped.
    #[error("{0}")]
    DependentObjects(String),
    #[error("{0}")]
    DatatypeMismatch(String),
    /// 22P02: text that is not a value of its type; the message is
    /// PostgreSQL's whole sentence ("invalid input syntax for type ...").
    #[error("{0}")]
    InvalidText(String),
    #[error("{0}")]
    InvalidParameter(String),
    /// A NULL where PostgreSQL forbids one (a NULL jsonb path element,
    /// `format('%I', NULL)`).
    #[error("{0}")]
    NullValueNotAllowed(String),
    /// A binary-format value whose bytes are not a valid encoding (22P03).
    #[error("{0}")]
    InvalidBinary(String),
    /// Date/time text that is not a date or time at all (22007).
    #[error("{0}")]
    InvalidDatetime(String),
    /// A date or time outside what Eddy (or PostgreSQL) can represent (22008).
    #[error("{0}")]
    DatetimeOverflow(String),
    /// `$n` with no such parameter, or a number above 65535 (42P02).
    #[error("there is no parameter {0}")]
    UndefinedParameter(String),
    #[error("unrecognized configuration parameter \"{0}\"")]
    UnknownSetting(String),
    #[error("{0}")]
    BadCopyFile(String),
    #[error("{0}")]
    UniqueViolation(String),
    #[error("{0}")]
    CheckViolation(String),
    /// 23503: a FOREIGN KEY constraint broken by a write.
    #[error("{0}")]
    ForeignKeyViolation(String),
    /// 42830: a FOREIGN KEY that cannot reference what it names.
    #[error("{0}")]
    InvalidForeignKey(String),
    /// `inner` with PostgreSQL's DETAIL line (sent as the error's detail
    /// field); keeps the inner error's SQLSTATE and message.
    #[error("{}", inner.client_message())]
    WithDetail {
        inner: Box<SqlError>,
        detail: String,
    },
    /// `inner` with the relation, column and constraint it is about (the
    /// protocol's schema, table, column and constraint fields); keeps the
    /// inner error's SQLSTATE, message and detail.
    #[error("{}", inner.client_message())]
    About {
        inner: Box<SqlError>,
        object: ErrorObject,
    },
    #[error("relation \"{0}\" already exists")]
    DuplicateTable(String),
    /// 42712: two FROM items known by one name.
    #[error("table name \"{0}\" specified more than once")]
    DuplicateAlias(String),
    /// 42P10: e.g. more column aliases than a relation has columns.
    #[error("{0}")]
    InvalidColumnReference(String),
    /// 42P01 with PostgreSQL's own words (`view "v" does not exist`).
    #[error("{0}")]
    UndefinedRelation(String),
    /// 42P17: e.g. a view whose definition reads itself.
    #[error("{0}")]
    InvalidObjectDefinition(String),
    #[error("{0}")]
    InvalidName(String),
    /// 2200H: `nextval` past a sequence's bound without CYCLE.
    #[error("{0}")]
    SequenceLimit(String),
    /// 3F000: a relation created without a schema under a search path
    /// that names none Eddy has (pg_dump's empty path).
    #[error("no schema has been selected to create in")]
    NoSchemaSelected,
    /// 3F000: a schema Eddy does not have (it has `public` only).
    #[error("{0}")]
    UndefinedSchema(String),
    /// 42P06: CREATE SCHEMA of a name that exists.
    #[error("{0}")]
    DuplicateSchema(String),
    /// 55000: e.g. `currval` before `nextval` in this session.
    #[error("{0}")]
    NotInPrerequisiteState(String),
    /// 428C9: a value for a GENERATED ALWAYS column.
    #[error("{0}")]
    GeneratedAlways(String),
    #[error("cursor \"{0}\" does not exist")]
    InvalidCursorName(String),
    #[error("cursor \"{0}\" already exists")]
    DuplicateCursor(String),
    #[error("prepared statement \"{0}\" already exists")]
    DuplicatePreparedStatement(String),
    #[error("prepared statement \"{0}\" does not exist")]
    UndefinedPreparedStatement(String),
    #[error("{0}")]
    NotNullViolation(String),
    #[error("division by zero")]
    DivisionByZero,
    /// 22025: a bad ESCAPE of LIKE or SIMILAR TO.
    #[error("{0}")]
    InvalidEscapeSequence(String),
    /// 42883: an operator PostgreSQL does not have for these operand types
    /// (`%` on floats).
    #[error("{0}")]
    UndefinedOperator(String),
    #[error("{0}")]
    NumericOutOfRange(String),
    /// A logarithm of zero or a negative number.
    #[error("{0}")]
    InvalidLogArgument(String),
    /// A power function's argument outside its domain (`sqrt(-1)`,
    /// `power(0, -1)`).
    #[error("{0}")]
    InvalidPowerArgument(String),
    /// `width_bucket`'s count or bounds out of its domain.
    #[error("{0}")]
    InvalidArgumentForWidthBucket(String),
    /// A regular expression that does not compile.
    #[error("invalid regular expression: {0}")]
    InvalidRegularExpression(String),
    /// A string longer than its column's `varchar(n)` / `char(n)`.
    #[error("value too long for type {0}")]
    StringTooLong(String),
    /// 2202E: an array whose sub-arrays do not have matching dimensions.
    #[error("{0}")]
    ArraySubscript(String),
    #[error("canceling statement due to user request")]
    QueryCanceled,
    #[error("canceling statement due to statement timeout")]
    StatementTimeout,
    /// Bytes that are not UTF-8 (22021, "invalid byte sequence for
    /// encoding \"UTF8\"").
    #[error("invalid byte sequence for encoding \"UTF8\"{0}")]
    InvalidEncoding(String),
    /// A value or line larger than Eddy handles (54000).
    #[error("{0}")]
    ProgramLimitExceeded(String),
    /// A column read outside GROUP BY and aggregates (42803,
    /// `crate::grouping_error`).
    #[error("{0}")]
    Grouping(String),
    /// Admission control's queue is full (`crate::admission`).
    #[error("{0}")]
    TooManyStatements(String),
    /// A statement nested too deep to plan (see `statement_limits`).
    #[error("{0}")]
    StatementTooDeep(String),
    #[error("prepared statement expects {expected} parameters, got {got}")]
    WrongParameterCount { expected: usize, got: usize },
    /// Any statement but ROLLBACK after an error in a transaction block.
    #[error("current transaction is aborted, commands ignored until end of transaction block")]
    InFailedTransaction,
    /// A statement that cannot run inside a transaction block (25001).
    #[error("{0} cannot run inside a transaction block")]
    ActiveTransaction(String),
    #[error("cannot execute {0} in a read-only transaction")]
    ReadOnlyTransaction(String),
    #[error("savepoint \"{0}\" does not exist")]
    NoSuchSavepoint(String),
    #[error("{0} can only be used in transaction blocks")]
    NoActiveTransaction(String),
    /// 42501: the session lacks a privilege (a server file without the
    /// superuser or `pg_*_server_files` role; see `server_files`).
    #[error("{0}")]
    InsufficientPrivilege(String),
    /// 21000: two rows of one INSERT ... ON CONFLICT DO UPDATE for one key.
    #[error("ON CONFLICT DO UPDATE command cannot affect row a second time")]
    ConflictUpdateTwice,
    /// 21000: a MERGE whose target row matched two source rows that both
    /// update or delete it.
    #[error("MERGE command cannot affect row a second time")]
    MergeRowTwice,
    /// 21000: a scalar subquery that returned more than one row.
    #[error("more than one row returned by a subquery used as an expression")]
    CardinalityViolation,

    // ---- the environment ----
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A value that does not fit its column's type, or an array that does
    /// not hold it (`eddy_storage::arrow_values`): 42804 for a value
    /// (user-visible mismatch), XX000 for an array or builder (a bug),
    /// 22008 for an interval or timestamp past Arrow's range.
    #[error(transparent)]
    Conversion(#[from] ConversionError),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },

    // ---- DataFusion (classified by sqlstate()) and Eddy's own bugs ----
    #[error(transparent)]
    DataFusion(#[from] DataFusionError),
    #[error("internal error: {0}")]
    Internal(String),
    /// `inner`, said where it happened (a COPY line and column, as
    /// PostgreSQL's CONTEXT line says it: [`SqlError::context`]); keeps
    /// the inner error's SQLSTATE and message.
    #[error("{}\nCONTEXT:  {context}", inner.client_message())]
    InContext {
        context: String,
        inner: Box<SqlError>,
    },
    /// `inner` with its message and DETAIL naming the relations of user
    /// schemas as PostgreSQL names them, not by their storage names
    /// (`crate::schemas::user_text`); keeps the inner error's SQLSTATE.
    #[error("{message}")]
    InSchemas {
        inner: Box<SqlError>,
        message: String,
        detail: Option<String>,
    },
}

pub type Result<T, E = SqlError> = std::result::Result<T, E>;

impl From<ParserError> for SqlError {
    fn from(e: ParserError) -> SqlError {
        SqlError::Syntax(e.to_string())
    }
}

/// A `SqlError` raised inside DataFusion (a function, an operator) travels
/// as `External`, from which [`SqlError::sqlstate`] recovers its SQLSTATE.
impl From<SqlError> for DataFusionError {
    fn from(e: SqlError) -> DataFusionError {
        DataFusionError::External(Box::new(e))
    }
}

impl From<ArrowError> for SqlError {
    fn from(e: ArrowError) -> SqlError {
        SqlError::DataFusion(DataFusionError::ArrowError(Box::new(e), None))
    }
}

impl SqlError {
    /// The PostgreSQL SQLSTATE a client sees for this error.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            SqlError::InContext { inner, .. }
            | SqlError::WithDetail { inner, .. }
            | SqlError::About { inner, .. }
            | SqlError::InSchemas { inner, .. } => inner.sqlstate(),
            SqlError::Syntax(_) | SqlError::SyntaxMessage(_) => "42601",
            SqlError::UndefinedTable(_) | SqlError::UndefinedRelation(_) => "42P01",
            SqlError::UndefinedColumn(_) => "42703",
            SqlError::DuplicateColumn(_) => "42701",
            SqlError::FeatureNotSupported(_) => "0A000",
            SqlError::InvalidDefinition(_) => "42P16",
            SqlError::WrongObjectType(_) => "42809",
            SqlError::DuplicateObject(_) => "42710",
            SqlError::UndefinedObject(_) => "42704",
            SqlError::InvalidGrant(_) => "0LP01",
            SqlError::ObjectInUse(_) => "55006",
            SqlError::ReservedName(_) => "42939",
            SqlError::DependentObjects(_) => "2BP01",
            SqlError::DatatypeMismatch(_) => "42804",
            SqlError::InvalidText(_) => "22P02",
            SqlError::InvalidParameter(_) => "22023",
            SqlError::NullValueNotAllowed(_) => "22004",
            SqlError::InvalidBinary(_) => "22P03",
            SqlError::InvalidDatetime(_) => "22007",
            SqlError::DatetimeOverflow(_) => "22008",
            SqlError::UndefinedParameter(_) => "42P02",
            SqlError::UnknownSetting(_) => "42704",
            SqlError::BadCopyFile(_) => "22P04",
            SqlError::UniqueViolation(_) => "23505",
            SqlError::CheckViolation(_) => "23514",
            SqlError::ForeignKeyViolation(_) => "23503",
            SqlError::InvalidForeignKey(_) => "42830",
            SqlError::DuplicateTable(_) => "42P07",
            SqlError::DuplicateAlias(_) => "42712",
            SqlError::InvalidObjectDefinition(_) => "42P17",
            SqlError::InvalidColumnReference(_) => "42P10",
            SqlError::InvalidName(_) => "42602",
            SqlError::InsufficientPrivilege(_) => "42501",
            SqlError::CardinalityViolation
            | SqlError::ConflictUpdateTwice
            | SqlError::MergeRowTwice => "21000",
            SqlError::SequenceLimit(_) => "2200H",
            SqlError::NotInPrerequisiteState(_) => "55000",
            SqlError::NoSchemaSelected | SqlError::UndefinedSchema(_) => "3F000",
            SqlError::DuplicateSchema(_) => "42P06",
            SqlError::GeneratedAlways(_) => "428C9",
            SqlError::InvalidCursorName(_) => "34000",
            SqlError::DuplicateCursor(_) => "42P03",
            SqlError::DuplicatePreparedStatement(_) => "42P05",
            SqlError::UndefinedPreparedStatement(_) => "26000",
            SqlError::NotNullViolation(_) => "23502",
            SqlError::DivisionByZero => "22012",
            SqlError::InvalidEscapeSequence(_) => "22025",
            SqlError::UndefinedOperator(_) => "42883",
            SqlError::NumericOutOfRange(_) => "22003",
            SqlError::InvalidLogArgument(_) => "2201E",
            SqlError::InvalidPowerArgument(_) => "2201F",
            SqlError::InvalidArgumentForWidthBucket(_) => "2201G",
            SqlError::InvalidRegularExpression(_) => "2201B",
            SqlError::StringTooLong(_) => "22001",
            SqlError::ArraySubscript(_) => "2202E",
            SqlError::QueryCanceled | SqlError::StatementTimeout => "57014",
            SqlError::StatementTooDeep(_) => "54001",
            SqlError::TooManyStatements(_) => "53000",
            SqlError::ProgramLimitExceeded(_) => "54000",
            SqlError::Grouping(_) => "42803",
            SqlError::InvalidEncoding(_) => "22021",
            SqlError::WrongParameterCount { .. } => "08P01",
            SqlError::InFailedTransaction => "25P02",
            SqlError::ActiveTransaction(_) => "25001",
            SqlError::ReadOnlyTransaction(_) => "25006",
            SqlError::NoSuchSavepoint(_) => "3B001",
            SqlError::NoActiveTransaction(_) => "25P01",
            SqlError::Storage(e) => e.sqlstate(),
            SqlError::Conversion(e) => e.sqlstate(),
            SqlError::Io { source, .. } => match source.kind() {
                std::io::ErrorKind::NotFound => "58P01",
                _ => "58030",
            },
            SqlError::DataFusion(e) => datafusion_sqlstate(e),
            SqlError::Internal(_) => "XX000",
        }
    }

    /// `self` with a DETAIL line.
    pub fn with_detail(self, detail: String) -> SqlError {
        SqlError::WithDetail {
            inner: Box::new(self),
            detail,
        }
    }

    /// PostgreSQL's CONTEXT line for this error (where it happened), if
    /// it has one.
    pub fn context(&self) -> Option<String> {
        match self {
            SqlError::InContext { context, .. } => Some(crate::temp_tables::user_text(context)),
            SqlError::WithDetail { inner, .. }
            | SqlError::InSchemas { inner, .. }
            | SqlError::About { inner, .. } => inner.context(),
            _ => None,
        }
    }

    /// PostgreSQL's HINT line for this error, if it has one.
    pub fn hint(&self) -> Option<String> {
        match self {
            SqlError::MergeRowTwice => {
                Some("Ensure that not more than one source row matches any one target row.".into())
            }
            SqlError::InContext { inner, .. }
            | SqlError::About { inner, .. }
            | SqlError::WithDetail { inner, .. } => inner.hint(),
            _ => None,
        }
    }

    /// PostgreSQL's DETAIL line for this error, if it has one.
    pub fn detail(&self) -> Option<String> {
        match self {
            SqlError::WithDetail { detail, .. } => Some(crate::temp_tables::user_text(detail)),
            SqlError::InContext { inner, .. } | SqlError::About { inner, .. } => inner.detail(),
            SqlError::InSchemas { detail, .. } => detail.clone(),
            SqlError::Storage(e) => storage_detail(e).map(|(_, d)| d),
            _ => None,
        }
    }

    /// The message, with DataFusion's noise ("Error during planning: ")
    /// removed so clients see what PostgreSQL would print.
    /// (A temporary table is named as its session knows it, not by its
    /// storage name: `crate::temp_tables::user_text`.)
    pub fn client_message(&self) -> String {
        let text = match self {
            SqlError::InSchemas { message, .. } => return message.clone(),
            // the place goes in the CONTEXT field (`SqlError::context`)
            SqlError::InContext { inner, .. } | SqlError::About { inner, .. } => {
                return inner.client_message()
            }
            SqlError::DataFusion(e) => datafusion_message(e),
            SqlError::Storage(e) => match storage_detail(e) {
                Some((message, _)) => message,
                None => error_chain(self),
            },
            other => error_chain(other),
        };
        crate::temp_tables::user_text(&text)
    }
}

/// What an error is about, as PostgreSQL's error fields name it (schema,
/// table, column, constraint): psycopg's `diag.constraint_name`,
/// asyncpg's `constraint_name`, pgjdbc's `getConstraint()`. Applications
/// map a unique or foreign-key violation to the form field it concerns by
/// them. Built with storage names (`SqlError::raw_object`); the session
/// splits them into schema and name before the error is sent
/// (`Session::shown_error`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorObject {
    pub schema: Option<String>,
    pub table: Option<String>,
    pub column: Option<String>,
    pub constraint: Option<String>,
}

impl ErrorObject {
    /// A constraint of a table (storage names).
    pub fn constraint_of(table: &str, constraint: &str) -> ErrorObject {
        ErrorObject {
            table: Some(table.to_string()),
            constraint: Some(constraint.to_string()),
            ..ErrorObject::default()
        }
    }
}

impl SqlError {
    /// `self` about `object`.
    pub fn about(self, object: ErrorObject) -> SqlError {
        SqlError::About {
            inner: Box::new(self),
            object,
        }
    }

    /// The object fields to send: the outermost `About`'s.
    pub fn object(&self) -> Option<&ErrorObject> {
        match self {
            SqlError::About { object, .. } => Some(object),
            _ => None,
        }
    }

    /// What the error is about, in storage names: an `About` below any
    /// other wrapper, or a storage engine's constraint error.
    pub fn raw_object(&self) -> Option<ErrorObject> {
        match self {
            SqlError::About { object, .. } => Some(object.clone()),
            SqlError::WithDetail { inner, .. }
            | SqlError::InContext { inner, .. }
            | SqlError::InSchemas { inner, .. } => inner.raw_object(),
            SqlError::Storage(StorageError::DuplicateKey { table, .. }) => {
                Some(ErrorObject::constraint_of(table, &format!("{table}_pkey")))
            }
            SqlError::Storage(StorageError::UniqueViolation { constraint, .. }) => {
                Some(ErrorObject {
                    constraint: Some(constraint.clone()),
                    ..ErrorObject::default()
                })
            }
            SqlError::Storage(StorageError::NotNull { table, column, .. }) => Some(ErrorObject {
                table: Some(table.clone()),
                column: Some(column.clone()),
                ..ErrorObject::default()
            }),
            _ => None,
        }
    }
}

/// A storage error PostgreSQL reports as a message and a DETAIL line (the
/// key of a unique violation), split so; `None` for the others.
fn storage_detail(e: &StorageError) -> Option<(String, String)> {
    match e {
        StorageError::DuplicateKey { table, key } => Some((
            format!("duplicate key value violates unique constraint \"{table}_pkey\""),
            format!("Key ({key}) already exists."),
        )),
        StorageError::UniqueViolation { constraint, key } => Some((
            format!("duplicate key value violates unique constraint \"{constraint}\""),
            format!("Key ({key}) already exists."),
        )),
        StorageError::DuplicatedKey { index, key } => Some((
            format!("could not create unique index \"{index}\""),
            format!("Key ({key}) is duplicated."),
        )),
        StorageError::NotNull { row: Some(row), .. } => Some((e.to_string(), failing_row(row))),
        _ => None,
    }
}

/// `Failing row contains (1, null, abc).`, PostgreSQL's DETAIL of a NOT
/// NULL violation: each value as its type prints it (a timestamptz in
/// UTC, with its offset).
fn failing_row(row: &[(eddy_common::Value, eddy_common::ColumnType)]) -> String {
    use eddy_common::{ColumnType, Value};
    let cells: Vec<String> = row
        .iter()
        .map(|(v, ty)| match (v, ty) {
            (Value::Null, _) => "null".to_string(),
            (Value::Timestamp(_), ColumnType::TimestampTz) => {
                format!("{}+00", crate::pgtypes::value_text(v, None))
            }
            (_, ty) => match ty.storage() {
                ColumnType::Decimal(_, scale) => crate::pgtypes::value_text(v, Some(scale)),
                _ => crate::pgtypes::value_text(v, None),
            },
        })
        .collect();
    format!("Failing row contains ({}).", cells.join(", "))
}

/// The whole chain of an error, "outer: inner: innermost", without repeats.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

fn datafusion_message(e: &DataFusionError) -> String {
    match e {
        DataFusionError::Plan(m)
        | DataFusionError::Execution(m)
        | DataFusionError::NotImplemented(m)
        | DataFusionError::Configuration(m)
        | DataFusionError::ResourcesExhausted(m) => m.clone(),
        DataFusionError::ArrowError(a, _) => arrow_message(a),
        DataFusionError::SchemaError(s, _) => match s.as_ref() {
            SchemaError::FieldNotFound { field, .. } => {
                format!("column \"{}\" does not exist", field.name)
            }
            other => other.to_string(),
        },
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            datafusion_message(inner)
        }
        DataFusionError::Shared(inner) => datafusion_message(inner),
        DataFusionError::Collection(v) => v
            .first()
            .map(datafusion_message)
            .unwrap_or_else(|| e.to_string()),
        DataFusionError::External(inner) => match inner.downcast_ref::<SqlError>() {
            Some(s) => s.client_message(),
            None => error_chain(inner.as_ref()),
        },
        other => error_chain(other),
    }
}

fn arrow_message(a: &ArrowError) -> String {
    match a {
        ArrowError::DivideByZero => "division by zero".into(),
        ArrowError::CastError(m) | ArrowError::ParseError(m) | ArrowError::ComputeError(m) => {
            m.clone()
        }
        ArrowError::ExternalError(inner) => match inner.downcast_ref::<SqlError>() {
            Some(s) => s.client_message(),
            None => inner.to_string(),
        },
        other => other.to_string(),
    }
}

fn arrow_sqlstate(a: &ArrowError) -> &'static str {
    match a {
        ArrowError::DivideByZero => "22012",
        ArrowError::ArithmeticOverflow(_) => "22003",
        ArrowError::CastError(_) | ArrowError::ParseError(_) => "22P02",
        ArrowError::ComputeError(m) if m.contains("zero") => "22012",
        ArrowError::ComputeError(m) if m.contains("overflow") => "22003",
        ArrowError::ComputeError(_) => "22000",
        ArrowError::CsvError(_) | ArrowError::JsonError(_) | ArrowError::AvroError(_) => "22P04",
        ArrowError::SchemaError(_) => "42804",
        ArrowError::InvalidArgumentError(_) => "22023",
        ArrowError::ExternalError(inner) => match inner.downcast_ref::<SqlError>() {
            Some(s) => s.sqlstate(),
            None => "XX000",
        },
        ArrowError::NotYetImplemented(_) => "0A000",
        ArrowError::MemoryError(_) => "53200",
        ArrowError::IoError(..) => "58030",
        ArrowError::IpcError(_) | ArrowError::ParquetError(_) | ArrowError::CDataInterface(_) => {
            "XX000"
        }
        ArrowError::DictionaryKeyOverflowError
        | ArrowError::RunEndIndexOverflowError
        | ArrowError::OffsetOverflowError(_) => "54000",
    }
}

/// Classify a planning message by what PostgreSQL would call it.
fn plan_sqlstate(m: &str) -> &'static str {
    let lower = m.to_ascii_lowercase();
    if lower.contains("table") && lower.contains("not found") {
        "42P01"
    } else if lower.contains("no field named")
        || lower.contains("column") && lower.contains("not found")
    {
        "42703"
    } else if lower.contains("invalid function") || lower.contains("no function matches") {
        "42883"
    } else if lower.contains("coerc") || lower.contains("cannot infer") || lower.contains("type") {
        "42804"
    } else if lower.contains("ambiguous") {
        "42702"
    } else if lower.contains("placeholder") || lower.contains("parameter") {
        "42P18"
    } else {
        "42000"
    }
}

/// SQLSTATE for a DataFusion error: planning errors are 42xxx, data errors 22xxx.
pub fn datafusion_sqlstate(e: &DataFusionError) -> &'static str {
    match e {
        DataFusionError::ArrowError(a, _) => arrow_sqlstate(a),
        DataFusionError::ParquetError(_) => "22P04",
        DataFusionError::ObjectStore(_) => "58030",
        DataFusionError::IoError(_) => "58030",
        DataFusionError::SQL(..) => "42601",
        DataFusionError::NotImplemented(_) => "0A000",
        DataFusionError::Internal(_) => "XX000",
        DataFusionError::Plan(m) => plan_sqlstate(m),
        DataFusionError::Configuration(_) => "42704",
        DataFusionError::SchemaError(s, _) => match s.as_ref() {
            SchemaError::AmbiguousReference { .. } => "42702",
            SchemaError::DuplicateQualifiedField { .. }
            | SchemaError::DuplicateUnqualifiedField { .. } => "42701",
            SchemaError::FieldNotFound { .. } => "42703",
        },
        DataFusionError::Execution(m) => {
            let lower = m.to_ascii_lowercase();
            if lower.contains("divide by zero") || lower.contains("division by zero") {
                "22012"
            } else if lower.contains("overflow") {
                "22003"
            } else if lower.contains("cast") || lower.contains("parse") {
                "22P02"
            } else {
                "XX000"
            }
        }
        DataFusionError::ExecutionJoin(_) => "XX000",
        DataFusionError::ResourcesExhausted(_) => "53200",
        DataFusionError::External(inner) => {
            if let Some(s) = inner.downcast_ref::<SqlError>() {
                s.sqlstate()
            } else if let Some(s) = inner.downcast_ref::<StorageError>() {
                s.sqlstate()
            } else if let Some(s) = inner.downcast_ref::<ConversionError>() {
                s.sqlstate()
            } else {
                "XX000"
            }
        }
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            datafusion_sqlstate(inner)
        }
        DataFusionError::Shared(inner) => datafusion_sqlstate(inner),
        DataFusionError::Collection(v) => v.first().map(datafusion_sqlstate).unwrap_or("XX000"),
        DataFusionError::Substrait(_) | DataFusionError::Ffi(_) => "XX000",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_errors_keep_their_sqlstate_through_datafusion() {
        let value = || ConversionError::ValueMismatch {
            column: eddy_common::ColumnType::Int,
            value: "text",
        };
        assert_eq!(SqlError::from(value()).sqlstate(), "42804");
        let array = ConversionError::ArrayMismatch {
            column: eddy_common::ColumnType::Int,
            arrow: datafusion::arrow::datatypes::DataType::Utf8,
        };
        assert_eq!(SqlError::from(array).sqlstate(), "XX000");
        let e = SqlError::DataFusion(DataFusionError::External(Box::new(value())));
        assert_eq!(e.sqlstate(), "42804");
        let stored = eddy_storage::StorageError::conversion("sealing", value());
        assert_eq!(SqlError::from(stored).sqlstate(), "XX000");
    }

    #[test]
    fn plan_errors_map_to_42_codes() {
        let e = SqlError::DataFusion(DataFusionError::Plan(
            "table 'eddy.public.t' not found".into(),
        ));
        assert_eq!(e.sqlstate(), "42P01");
        let e = SqlError::DataFusion(DataFusionError::ArrowError(
            Box::new(ArrowError::DivideByZero),
            None,
        ));
        assert_eq!(e.sqlstate(), "22012");
        assert_eq!(SqlError::Syntax("x".into()).sqlstate(), "42601");
    }
}
