//! Types every Eddy layer shares: identifiers, log sequence numbers, SQL
//! column types, values and table definitions.
//!
//! This crate owns no behaviour beyond conversions; it must never depend on
//! the storage engine, DataFusion or the network stack, so that every other
//! crate can use it without a layer cycle.
//!
//! Invariants:
//! * identifiers are newtypes: an [`Lsn`] is never confused with a [`FileId`];
//! * every [`ColumnType`] maps to exactly one Arrow [`DataType`], and a
//!   [`Value`] of that type round-trips through it.
//!
//! Where to look next: `eddy-storage` (how rows are stored), `eddy-sql` (how
//! SQL names map to these types).

use std::fmt;
use std::sync::Arc;

use arrow_schema::{DataType, Field, IntervalUnit, Schema, TimeUnit};

pub mod interval;
pub use interval::{format_interval, parse_interval, Interval, IntervalError};
use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// Log sequence number of one shard. Monotonic per shard; a read at LSN
    /// `n` sees exactly the writes with LSN `<= n`.
    Lsn(u64)
);
id_type!(
    /// A shard of a table group.
    ShardId(u32)
);
id_type!(
    /// An immutable shard file, unique within the whole database.
    FileId(u64)
);
id_type!(
    /// A table, unique within the database and never reused.
    TableId(u32)
);
id_type!(
    /// A table group: tables that share shards and WALs.
    TableGroupId(u32)
);
id_type!(
    /// A cross-shard transaction (two-phase commit) id.
    TxnId(u64)
);

impl Lsn {
    pub const ZERO: Lsn = Lsn(0);
    pub const MAX: Lsn = Lsn(u64::MAX);
    pub fn next(self) -> Lsn {
        Lsn(self.0 + 1)
    }
}

/// Errors from parsing shared definitions.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CommonError {
    #[error("unknown orientation '{0}': expected 'row', 'column' or 'row,column'")]
    UnknownOrientation(String),
    #[error("value {value} does not fit column type {ty}")]
    TypeMismatch { value: String, ty: ColumnType },
}

/// The time zone of TIMESTAMPTZ columns' Arrow type (values are UTC).
pub const UTC_OFFSET: &str = "+00:00";

/// The precision and scale an unconstrained [`ColumnType::Numeric`] is
/// stored with.
pub const NUMERIC_STORAGE: (u8, i8) = (38, 10);

/// SQL column types Eddy stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ColumnType {
    Boolean,
    SmallInt,
    Int,
    BigInt,
    Real,
    Double,
    /// DECIMAL(precision, scale), stored as a scaled i128.
    Decimal(u8, i8),
    /// NUMERIC without a precision: stored as `Decimal(38, 10)`
    /// ([`NUMERIC_STORAGE`]), and a value is written only if it is held
    /// exactly there (no non-zero digit past the 10th after the point, at
    /// most 28 before it), never rounded (docs/decisions/0003).
    Numeric,
    Text,
    Date,
    /// TIMESTAMP without time zone, microseconds since the Unix epoch.
    Timestamp,
    Bytea,
    /// VARCHAR(n): text of at most n characters (stored as text).
    Varchar(u32),
    /// CHAR(n) (bpchar): text of at most n characters, stored without its
    /// trailing spaces and padded to n where PostgreSQL pads (output of
    /// the column itself); comparisons ignore trailing spaces as in
    /// PostgreSQL because none are stored.
    Char(u32),
    /// TIMESTAMP WITH TIME ZONE: an instant, microseconds since the Unix
    /// epoch in UTC (stored as a timestamp; its Arrow type carries "+00:00").
    TimestampTz,
    /// UUID: 16 bytes in RFC 4122 order (Arrow `FixedSizeBinary(16)`, a
    /// type no other column uses, so a result column of that Arrow type is
    /// a uuid). Ordered bytewise, as PostgreSQL's `uuid_cmp`.
    Uuid,
    /// JSON: the input text exactly as given (validated), stored as text.
    Json,
    /// JSONB: a JSON value in PostgreSQL's normal form (object keys sorted
    /// by length then bytes, the last of duplicate keys kept, its output
    /// spacing), stored as that text.
    Jsonb,
    /// INTERVAL: months, days and microseconds (Arrow
    /// `Interval(MonthDayNano)`); not a key type (PostgreSQL compares
    /// intervals by a normalized length, '1 mon' = '30 days').
    Interval,
    /// TIME without time zone: microseconds since midnight, 0 to
    /// 86,400,000,000 inclusive (PostgreSQL accepts `24:00:00`).
    Time,
    /// A one-dimensional array (lower bound 1) of an element type: Arrow
    /// `List` of the element's Arrow type, its item field nullable and
    /// named `item` as DataFusion's own lists are. Not a key type.
    Array(ArrayElem),
}

/// The element types an array column may have (see [`ColumnType::Array`]).
/// A closed set, so that `ColumnType` stays `Copy` and an array of arrays
/// cannot be declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArrayElem {
    Boolean,
    SmallInt,
    Int,
    BigInt,
    Real,
    Double,
    Decimal(u8, i8),
    Text,
    Varchar(u32),
    Date,
    Timestamp,
    TimestampTz,
    Uuid,
}

impl ArrayElem {
    /// The element's own column type.
    pub fn column_type(self) -> ColumnType {
        match self {
            ArrayElem::Boolean => ColumnType::Boolean,
            ArrayElem::SmallInt => ColumnType::SmallInt,
            ArrayElem::Int => ColumnType::Int,
            ArrayElem::BigInt => ColumnType::BigInt,
            ArrayElem::Real => ColumnType::Real,
            ArrayElem::Double => ColumnType::Double,
            ArrayElem::Decimal(p, s) => ColumnType::Decimal(p, s),
            ArrayElem::Text => ColumnType::Text,
            ArrayElem::Varchar(n) => ColumnType::Varchar(n),
            ArrayElem::Date => ColumnType::Date,
            ArrayElem::Timestamp => ColumnType::Timestamp,
            ArrayElem::TimestampTz => ColumnType::TimestampTz,
            ArrayElem::Uuid => ColumnType::Uuid,
        }
    }

    /// The element type for a column type, if arrays of it are supported.
    pub fn of(ty: ColumnType) -> Option<ArrayElem> {
        Some(match ty {
            ColumnType::Boolean => ArrayElem::Boolean,
            ColumnType::SmallInt => ArrayElem::SmallInt,
            ColumnType::Int => ArrayElem::Int,
            ColumnType::BigInt => ArrayElem::BigInt,
            ColumnType::Real => ArrayElem::Real,
            ColumnType::Double => ArrayElem::Double,
            ColumnType::Decimal(p, s) => ArrayElem::Decimal(p, s),
            ColumnType::Text => ArrayElem::Text,
            ColumnType::Varchar(n) => ArrayElem::Varchar(n),
            ColumnType::Date => ArrayElem::Date,
            ColumnType::Timestamp => ArrayElem::Timestamp,
            ColumnType::TimestampTz => ArrayElem::TimestampTz,
            ColumnType::Uuid => ArrayElem::Uuid,
            _ => return None,
        })
    }
}

impl ColumnType {
    /// The Arrow type that holds this column in batches and column files.
    pub fn to_arrow(self) -> DataType {
        match self {
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::SmallInt => DataType::Int16,
            ColumnType::Int => DataType::Int32,
            ColumnType::BigInt => DataType::Int64,
            ColumnType::Real => DataType::Float32,
            ColumnType::Double => DataType::Float64,
            ColumnType::Decimal(p, s) => DataType::Decimal128(p, s),
            ColumnType::Numeric => DataType::Decimal128(NUMERIC_STORAGE.0, NUMERIC_STORAGE.1),
            ColumnType::Text => DataType::Utf8,
            ColumnType::Date => DataType::Date32,
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            ColumnType::Bytea => DataType::Binary,
            ColumnType::Varchar(_) | ColumnType::Char(_) => DataType::Utf8,
            ColumnType::Json | ColumnType::Jsonb => DataType::Utf8,
            ColumnType::Interval => DataType::Interval(IntervalUnit::MonthDayNano),
            ColumnType::Time => DataType::Time64(TimeUnit::Microsecond),
            ColumnType::TimestampTz => {
                DataType::Timestamp(TimeUnit::Microsecond, Some(UTC_OFFSET.into()))
            }
            ColumnType::Uuid => DataType::FixedSizeBinary(UUID_LEN_I32),
            ColumnType::Array(e) => DataType::List(Arc::new(Field::new_list_field(
                e.column_type().to_arrow(),
                true,
            ))),
        }
    }

    /// The element type of an array type.
    pub fn element(self) -> Option<ColumnType> {
        match self {
            ColumnType::Array(e) => Some(e.column_type()),
            _ => None,
        }
    }

    /// The type whose values and encodings this type's stored values use:
    /// VARCHAR(n), CHAR(n), JSON and JSONB store text, TIMESTAMPTZ a
    /// timestamp, an unconstrained NUMERIC a `Decimal(38, 10)`. Code that
    /// only moves stored values matches on this; code that checks or
    /// presents values (the SQL layer) matches on the type itself.
    pub fn storage(self) -> ColumnType {
        match self {
            ColumnType::Varchar(_) | ColumnType::Char(_) => ColumnType::Text,
            ColumnType::Json | ColumnType::Jsonb => ColumnType::Text,
            ColumnType::TimestampTz => ColumnType::Timestamp,
            ColumnType::Numeric => ColumnType::Decimal(NUMERIC_STORAGE.0, NUMERIC_STORAGE.1),
            ColumnType::Array(e) => match e {
                ArrayElem::Varchar(_) => ColumnType::Array(ArrayElem::Text),
                ArrayElem::TimestampTz => ColumnType::Array(ArrayElem::Timestamp),
                other => ColumnType::Array(other),
            },
            other => other,
        }
    }

    /// The column type for an Arrow type, if Eddy can store it.
    pub fn from_arrow(dt: &DataType) -> Option<ColumnType> {
        Some(match dt {
            DataType::Boolean => ColumnType::Boolean,
            DataType::Int16 => ColumnType::SmallInt,
            DataType::Int32 => ColumnType::Int,
            DataType::Int64 => ColumnType::BigInt,
            DataType::Float32 => ColumnType::Real,
            DataType::Float64 => ColumnType::Double,
            DataType::Decimal128(p, s) => ColumnType::Decimal(*p, *s),
            DataType::Utf8 => ColumnType::Text,
            DataType::Date32 => ColumnType::Date,
            DataType::Timestamp(TimeUnit::Microsecond, None) => ColumnType::Timestamp,
            DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => ColumnType::TimestampTz,
            DataType::Binary => ColumnType::Bytea,
            DataType::FixedSizeBinary(UUID_LEN_I32) => ColumnType::Uuid,
            DataType::Interval(IntervalUnit::MonthDayNano) => ColumnType::Interval,
            DataType::Time64(TimeUnit::Microsecond) => ColumnType::Time,
            DataType::List(f) => {
                ColumnType::Array(ArrayElem::of(ColumnType::from_arrow(f.data_type())?)?)
            }
            _ => return None,
        })
    }

    /// PostgreSQL's name for the type, as `format_type` prints it.
    pub fn pg_name(self) -> String {
        match self {
            ColumnType::Boolean => "boolean".into(),
            ColumnType::SmallInt => "smallint".into(),
            ColumnType::Int => "integer".into(),
            ColumnType::BigInt => "bigint".into(),
            ColumnType::Real => "real".into(),
            ColumnType::Double => "double precision".into(),
            ColumnType::Decimal(p, s) => format!("numeric({p},{s})"),
            ColumnType::Numeric => "numeric".into(),
            ColumnType::Text => "text".into(),
            ColumnType::Date => "date".into(),
            ColumnType::Timestamp => "timestamp without time zone".into(),
            ColumnType::Bytea => "bytea".into(),
            ColumnType::Varchar(n) => format!("character varying({n})"),
            ColumnType::Char(n) => format!("character({n})"),
            ColumnType::TimestampTz => "timestamp with time zone".into(),
            ColumnType::Uuid => "uuid".into(),
            ColumnType::Json => "json".into(),
            ColumnType::Jsonb => "jsonb".into(),
            ColumnType::Interval => "interval".into(),
            ColumnType::Time => "time without time zone".into(),
            ColumnType::Array(e) => format!("{}[]", e.column_type().pg_name()),
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.pg_name())
    }
}

/// One SQL value. `Null` is typeless; every other variant matches exactly one
/// [`ColumnType`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Null,
    Boolean(bool),
    SmallInt(i16),
    Int(i32),
    BigInt(i64),
    Real(f32),
    Double(f64),
    /// Scaled integer; the scale comes from the column type.
    Decimal(i128),
    Text(String),
    /// Days since 1970-01-01.
    Date(i32),
    /// Microseconds since 1970-01-01 00:00:00.
    Timestamp(i64),
    Bytea(Vec<u8>),
    /// A UUID's 16 bytes.
    Uuid([u8; 16]),
    Interval(Interval),
    /// Microseconds since midnight.
    Time(i64),
    /// The elements of a one-dimensional array (each `Null` or a value of
    /// the element type).
    Array(Vec<Value>),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Whether this value may be stored in a column of type `ty`.
    pub fn fits(&self, ty: ColumnType) -> bool {
        if let (Value::Array(items), ColumnType::Array(e)) = (self, ty) {
            let et = e.column_type();
            return items
                .iter()
                .all(|v| !matches!(v, Value::Array(_)) && v.fits(et));
        }
        matches!(
            (self, ty.storage()),
            (Value::Null, _)
                | (Value::Boolean(_), ColumnType::Boolean)
                | (Value::SmallInt(_), ColumnType::SmallInt)
                | (Value::Int(_), ColumnType::Int)
                | (Value::BigInt(_), ColumnType::BigInt)
                | (Value::Real(_), ColumnType::Real)
                | (Value::Double(_), ColumnType::Double)
                | (Value::Decimal(_), ColumnType::Decimal(..))
                | (Value::Text(_), ColumnType::Text)
                | (Value::Date(_), ColumnType::Date)
                | (Value::Timestamp(_), ColumnType::Timestamp)
                | (Value::Bytea(_), ColumnType::Bytea)
                | (Value::Uuid(_), ColumnType::Uuid)
                | (Value::Interval(_), ColumnType::Interval)
                | (Value::Time(_), ColumnType::Time)
        )
    }
}

/// Bytes in a UUID.
pub const UUID_LEN: usize = 16;
const UUID_LEN_I32: i32 = 16;

/// Parses a UUID as PostgreSQL's `uuid_in` does: 32 hex digits (either
/// case), optionally inside `{...}`, with an optional hyphen after any
/// group of four digits. `None` for anything else.
pub fn parse_uuid(s: &str) -> Option<[u8; UUID_LEN]> {
    let inner = match s.strip_prefix('{') {
        Some(rest) => rest.strip_suffix('}')?,
        None => s,
    };
    let mut out = [0u8; UUID_LEN];
    let mut digits = 0usize;
    let mut bytes = inner.bytes().peekable();
    while let Some(c) = bytes.next() {
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        let slot = out.get_mut(digits / 2)?;
        *slot = if digits.is_multiple_of(2) {
            v << 4
        } else {
            *slot | v
        };
        digits += 1;
        // a hyphen may follow a group of four digits, but not end the value
        if digits.is_multiple_of(4) && digits < 2 * UUID_LEN && bytes.peek() == Some(&b'-') {
            bytes.next();
            bytes.peek()?;
        }
    }
    (digits == 2 * UUID_LEN).then_some(out)
}

/// A UUID as PostgreSQL prints it: lower-case hex, hyphenated 8-4-4-4-12.
pub fn format_uuid(u: &[u8; UUID_LEN]) -> String {
    use fmt::Write;
    let mut s = String::with_capacity(36);
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A row: one value per visible column, in table column order.
pub type Row = Vec<Value>;

/// How a table's data is laid out in its shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Orientation {
    /// Row tablet only: fastest point lookups.
    Row,
    /// Column tablet only: fastest scans.
    Column,
    /// Both tablets, kept in step by the shard's single WAL.
    RowColumn,
}

impl Orientation {
    pub fn has_row(self) -> bool {
        matches!(self, Orientation::Row | Orientation::RowColumn)
    }
    pub fn has_column(self) -> bool {
        matches!(self, Orientation::Column | Orientation::RowColumn)
    }
    pub fn parse(s: &str) -> Result<Orientation, CommonError> {
        let norm: String = s
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        match norm.as_str() {
            "row" => Ok(Orientation::Row),
            "column" => Ok(Orientation::Column),
            "row,column" | "column,row" => Ok(Orientation::RowColumn),
            _ => Err(CommonError::UnknownOrientation(s.to_string())),
        }
    }
}

impl fmt::Display for Orientation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Orientation::Row => "row",
            Orientation::Column => "column",
            Orientation::RowColumn => "row,column",
        })
    }
}

/// One column of a table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub ty: ColumnType,
    pub nullable: bool,
    /// The column's DEFAULT expression as SQL text, parsed again by the SQL
    /// layer where a row needs it (PostgreSQL keeps `pg_attrdef.adbin`
    /// the same way: an expression, not a value). `None`: NULL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// How the column is an identity column, if it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
    /// `COMMENT ON COLUMN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Identity {
    /// An INSERT may not give the column a value (428C9) unless it says
    /// `OVERRIDING SYSTEM VALUE`.
    Always,
    /// The sequence supplies a value only where the INSERT gives none.
    ByDefault,
}

impl ColumnDef {
    pub fn new(name: impl Into<String>, ty: ColumnType, nullable: bool) -> ColumnDef {
        ColumnDef {
            name: name.into(),
            ty,
            nullable,
            default: None,
            identity: None,
            comment: None,
        }
    }
}

/// A schema other than `public` as the catalog stores it (`CREATE
/// SCHEMA`). Its relations are stored under the name `<schema>.<name>`
/// (the SQL layer's `schemas` module owns that naming).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaDef {
    /// Drawn from the tables' id counter: its OID never equals a
    /// relation's.
    pub id: TableId,
    pub name: String,
    /// The owning role (`None`: the bootstrap superuser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Grants of USAGE and CREATE, as PostgreSQL's `nspacl` items
    /// (`grantee=UC/grantor`; an empty grantee is PUBLIC).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Grows with every committed change (as [`ViewDef::version`]).
    pub version: u64,
}

/// A view as the catalog stores it (`CREATE VIEW`): the SQL layer expands
/// its query wherever the view is named; storage only keeps it, in the
/// same catalog and relation namespace as the tables.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewDef {
    /// Drawn from the tables' id counter: a view's OID never equals a
    /// table's.
    pub id: TableId,
    pub name: String,
    /// The output columns, fixed when the view was created (as in
    /// PostgreSQL, a later change of the tables does not add any).
    pub columns: Vec<ViewColumn>,
    /// The defining query, as the parser prints it.
    pub query: String,
    /// The relations (tables and views) the query reads: they cannot be
    /// dropped or changed while the view exists (CASCADE drops it).
    pub depends_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Grants on the view (as [`TableDef::acl`]; SELECT is what reading
    /// it needs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl: Vec<AclItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Grows with every committed change: a transaction that replaces or
    /// drops the view names the version it saw, and its commit fails if
    /// another transaction changed the view first.
    pub version: u64,
}

/// One output column of a view, typed as PostgreSQL's catalogs show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewColumn {
    pub name: String,
    /// PostgreSQL type OID.
    pub type_oid: u32,
    /// PostgreSQL type modifier (-1: none).
    pub typmod: i32,
}

/// A table as the catalog stores it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableDef {
    pub id: TableId,
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Indices into `columns`. Empty means "no primary key": the storage
    /// engine then locates rows by an internal unique row id.
    pub primary_key: Vec<usize>,
    /// Indices into `columns` hashed to pick a shard. Empty means "the
    /// primary key" (or the row id when there is none).
    pub distribution_key: Vec<usize>,
    pub orientation: Orientation,
    pub table_group: TableGroupId,
    /// Incremented by every schema change (ADD COLUMN), so cached plans and
    /// files written under an older schema can be recognised.
    pub schema_version: u32,
    /// CHECK constraints every stored row satisfies (enforced by the SQL
    /// layer on every write path, or the path refuses the table).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckConstraint>,
    /// `COMMENT ON TABLE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// The owning role (`pg_class.relowner`); `None` for tables made before
    /// roles existed, which belong to the bootstrap superuser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// What GRANT gave other roles (`pg_class.relacl`); the owner's own
    /// privileges are implicit and never listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl: Vec<AclItem>,
    /// Secondary indexes (`CREATE [UNIQUE] INDEX`, UNIQUE constraints),
    /// maintained by storage in every shard of the table
    /// (`docs/design/indexes.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indexes: Vec<IndexDef>,
    /// FOREIGN KEY constraints of this table (the referencing side),
    /// enforced by the SQL layer on both tables' writes
    /// (`docs/design/foreign_keys.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_keys: Vec<ForeignKeyDef>,
}

/// `[CONSTRAINT name] FOREIGN KEY (columns) REFERENCES parent (ref_columns)`,
/// MATCH SIMPLE, not deferrable: a row whose `columns` are all non-NULL
/// has a row of the parent with equal `ref_columns` (the parent's primary
/// key, in the order the constraint names them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignKeyDef {
    pub name: String,
    /// Indices into this table's `columns`.
    pub columns: Vec<usize>,
    /// The referenced table, by id (a rename keeps the constraint).
    pub ref_table: TableId,
    /// Indices into the referenced table's `columns`, paired with `columns`.
    pub ref_columns: Vec<usize>,
    #[serde(default)]
    pub on_delete: FkAction,
    #[serde(default)]
    pub on_update: FkAction,
    /// DEFERRABLE: `SET CONSTRAINTS` may defer its check to commit.
    #[serde(default)]
    pub deferrable: bool,
    /// INITIALLY DEFERRED: checked at commit unless `SET CONSTRAINTS`
    /// says otherwise (only with `deferrable`).
    #[serde(default)]
    pub initially_deferred: bool,
}

/// What a referenced row's DELETE or key UPDATE does to referencing rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FkAction {
    /// Fails if referencing rows remain at the end of the statement.
    #[default]
    NoAction,
    /// Fails if any referencing row exists.
    Restrict,
    /// Deletes the referencing rows.
    Cascade,
    /// Sets the referencing columns to NULL.
    SetNull,
    /// Sets the referencing columns to their defaults.
    SetDefault,
}

impl FkAction {
    /// `pg_constraint.confupdtype` / `confdeltype`.
    pub fn code(self) -> char {
        match self {
            FkAction::NoAction => 'a',
            FkAction::Restrict => 'r',
            FkAction::Cascade => 'c',
            FkAction::SetNull => 'n',
            FkAction::SetDefault => 'd',
        }
    }

    /// The SQL words (`information_schema.referential_constraints`).
    pub fn sql(self) -> &'static str {
        match self {
            FkAction::NoAction => "NO ACTION",
            FkAction::Restrict => "RESTRICT",
            FkAction::Cascade => "CASCADE",
            FkAction::SetNull => "SET NULL",
            FkAction::SetDefault => "SET DEFAULT",
        }
    }
}

/// A secondary index of a table: ascending, NULLs last and distinct
/// (PostgreSQL's btree defaults).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexDef {
    /// Unique among the relations of the database.
    pub name: String,
    /// Indices into the table's `columns`, in index order.
    pub columns: Vec<usize>,
    /// Two live rows may not have equal non-NULL keys (SQLSTATE 23505).
    pub unique: bool,
    /// Made by a UNIQUE constraint (`pg_constraint` lists it) rather than
    /// by CREATE UNIQUE INDEX.
    #[serde(default)]
    pub constraint: bool,
    /// Per column, whether it was declared DESC (empty: all ascending).
    /// Lookups do not depend on it; the catalog shows it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub descending: Vec<bool>,
}

/// One grant on a relation (a table, a view or a sequence): `grantee` (a
/// role, or `None` for PUBLIC) holds `privileges`, granted by `grantor`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grantee: Option<String>,
    pub privileges: TablePrivileges,
    pub grantor: String,
}

/// A set of privileges on a relation, as PostgreSQL's ACL letters name
/// them: a table's or a view's ([`TablePrivileges::NAMED`], `arwdDxt`) or
/// a sequence's ([`TablePrivileges::SEQUENCE_NAMED`], `rwU`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TablePrivileges(pub u8);

impl TablePrivileges {
    pub const NONE: TablePrivileges = TablePrivileges(0);
    pub const INSERT: TablePrivileges = TablePrivileges(1);
    pub const SELECT: TablePrivileges = TablePrivileges(2);
    pub const UPDATE: TablePrivileges = TablePrivileges(4);
    pub const DELETE: TablePrivileges = TablePrivileges(8);
    pub const TRUNCATE: TablePrivileges = TablePrivileges(16);
    pub const REFERENCES: TablePrivileges = TablePrivileges(32);
    pub const TRIGGER: TablePrivileges = TablePrivileges(64);
    pub const ALL: TablePrivileges = TablePrivileges(127);
    /// A sequence's USAGE (`nextval`, `currval`).
    pub const USAGE: TablePrivileges = TablePrivileges(128);
    /// Every privilege a sequence has.
    pub const SEQUENCE_ALL: TablePrivileges = TablePrivileges(2 | 4 | 128);

    /// Each privilege with its ACL letter and SQL keyword, in PostgreSQL's
    /// order (`arwdDxt`).
    pub const NAMED: [(TablePrivileges, char, &'static str); 7] = [
        (TablePrivileges::INSERT, 'a', "INSERT"),
        (TablePrivileges::SELECT, 'r', "SELECT"),
        (TablePrivileges::UPDATE, 'w', "UPDATE"),
        (TablePrivileges::DELETE, 'd', "DELETE"),
        (TablePrivileges::TRUNCATE, 'D', "TRUNCATE"),
        (TablePrivileges::REFERENCES, 'x', "REFERENCES"),
        (TablePrivileges::TRIGGER, 't', "TRIGGER"),
    ];

    pub fn contains(self, other: TablePrivileges) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn union(self, other: TablePrivileges) -> TablePrivileges {
        TablePrivileges(self.0 | other.0)
    }

    pub fn without(self, other: TablePrivileges) -> TablePrivileges {
        TablePrivileges(self.0 & !other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// A sequence's privileges with their ACL letters and SQL keywords, in
    /// PostgreSQL's order (`rwU`).
    pub const SEQUENCE_NAMED: [(TablePrivileges, char, &'static str); 3] = [
        (TablePrivileges::SELECT, 'r', "SELECT"),
        (TablePrivileges::UPDATE, 'w', "UPDATE"),
        (TablePrivileges::USAGE, 'U', "USAGE"),
    ];

    /// Every privilege of `named` (a table's or a sequence's list).
    pub fn all_of(named: &[(TablePrivileges, char, &'static str)]) -> TablePrivileges {
        named
            .iter()
            .fold(TablePrivileges::NONE, |acc, (p, _, _)| acc.union(*p))
    }

    /// The ACL letters of a table's privileges (`arwd`).
    pub fn letters(self) -> String {
        self.letters_in(&TablePrivileges::NAMED)
    }

    /// The ACL letters in the order of `named` (a table's or a sequence's).
    pub fn letters_in(self, named: &[(TablePrivileges, char, &'static str)]) -> String {
        named
            .iter()
            .filter(|(p, _, _)| self.contains(*p))
            .map(|(_, c, _)| *c)
            .collect()
    }
}

/// `CONSTRAINT name CHECK (expr)`: `expr` is SQL text over the table's
/// columns, parsed again where rows are checked; a row passes unless the
/// expression is false (NULL passes), as in PostgreSQL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckConstraint {
    pub name: String,
    pub expr: String,
}

impl TableDef {
    /// The Arrow schema of the visible columns.
    pub fn arrow_schema(&self) -> Schema {
        Schema::new(
            self.columns
                .iter()
                .map(|c| Field::new(&c.name, c.ty.to_arrow(), c.nullable))
                .collect::<Vec<_>>(),
        )
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn has_primary_key(&self) -> bool {
        !self.primary_key.is_empty()
    }

    /// The index named `name`, if the table has one.
    pub fn index(&self, name: &str) -> Option<&IndexDef> {
        self.indexes.iter().find(|i| i.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_through_arrow() {
        for ty in [
            ColumnType::Boolean,
            ColumnType::SmallInt,
            ColumnType::Int,
            ColumnType::BigInt,
            ColumnType::Real,
            ColumnType::Double,
            ColumnType::Decimal(12, 2),
            ColumnType::Text,
            ColumnType::Date,
            ColumnType::Timestamp,
            ColumnType::Bytea,
            ColumnType::Uuid,
            ColumnType::Interval,
            ColumnType::Time,
        ] {
            assert_eq!(ColumnType::from_arrow(&ty.to_arrow()), Some(ty));
        }
    }

    #[test]
    fn orientation_parses_the_with_clause_spellings() {
        assert_eq!(Orientation::parse("row"), Ok(Orientation::Row));
        assert_eq!(Orientation::parse("Column"), Ok(Orientation::Column));
        assert_eq!(
            Orientation::parse("row, column"),
            Ok(Orientation::RowColumn)
        );
        assert!(Orientation::parse("rows").is_err());
    }

    #[test]
    fn uuids_parse_in_postgres_forms() {
        let want = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
        for s in [
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
        ] {
            let u = parse_uuid(s).unwrap_or_else(|| panic!("{s}"));
            assert_eq!(format_uuid(&u), want);
        }
        for s in [
            "",
            "{}",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",
            "-a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0eeb-c999c0b4ef8bb6d6bb9bd380a11",
            "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1é",
            " a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        ] {
            assert_eq!(parse_uuid(s), None, "{s}");
        }
    }

    #[test]
    fn array_types_map_to_lists_and_back() {
        for e in [
            ArrayElem::Boolean,
            ArrayElem::SmallInt,
            ArrayElem::Int,
            ArrayElem::BigInt,
            ArrayElem::Real,
            ArrayElem::Double,
            ArrayElem::Decimal(5, 2),
            ArrayElem::Text,
            ArrayElem::Date,
            ArrayElem::Timestamp,
            ArrayElem::TimestampTz,
            ArrayElem::Uuid,
        ] {
            let ty = ColumnType::Array(e);
            assert_eq!(ColumnType::from_arrow(&ty.to_arrow()), Some(ty));
            assert_eq!(ArrayElem::of(e.column_type()), Some(e));
        }
        assert_eq!(ColumnType::Array(ArrayElem::Int).pg_name(), "integer[]");
        assert_eq!(
            ColumnType::Array(ArrayElem::Varchar(3)).storage(),
            ColumnType::Array(ArrayElem::Text)
        );
        assert_eq!(ArrayElem::of(ColumnType::Interval), None);
        let ints = ColumnType::Array(ArrayElem::Int);
        assert!(Value::Array(vec![Value::Int(1), Value::Null]).fits(ints));
        assert!(!Value::Array(vec![Value::Text("1".into())]).fits(ints));
        assert!(!Value::Array(vec![Value::Array(vec![])]).fits(ints));
        assert!(!Value::Int(1).fits(ints));
    }

    #[test]
    fn values_fit_only_their_type() {
        assert!(Value::Int(1).fits(ColumnType::Int));
        assert!(!Value::Int(1).fits(ColumnType::BigInt));
        assert!(Value::Null.fits(ColumnType::Text));
    }
}
