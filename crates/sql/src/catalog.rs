//! Catalog emulation: the `public` schema backed by the storage engine, and
//! a `pg_catalog` schema synthesised from it, plus the PostgreSQL functions
//! psql and drivers call while introspecting (`format_type`, `version()`, ...).
//!
//! Invariants:
//! * nothing here is stored: every `pg_catalog` table is rebuilt from the
//!   engine's current tables when a statement looks it up, so it is never
//!   stale;
//! * OIDs are derived from table ids: table `id` has OID `16384 + 2*id` and
//!   its primary-key index `16385 + 2*id`; namespaces are `pg_catalog` = 11,
//!   `public` = 2200, as in PostgreSQL.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use eddy_common::ColumnType;
use eddy_storage::{Engine, Table};

use crate::error::SqlError;
use crate::index_catalog::indexes_of;
use crate::pgtypes::{oid, oid_for_column_type, pg_typlen};
use crate::provider::EddyTable;
use crate::sequences::{sequence_oid, SequenceDef, Sequences};

pub const NS_PG_CATALOG: i64 = 11;
pub const NS_PUBLIC: i64 = 2200;
pub const NS_INFORMATION_SCHEMA: i64 = 13_000;
pub const DATABASE_OID: i64 = 16_383;
pub const SUPERUSER_OID: i64 = 10;

/// OID of a table.
pub fn table_oid(t: &Table) -> i64 {
    16_384 + 2 * t.def().id.0 as i64
}

/// OID of a table's primary-key index.
pub fn index_oid(t: &Table) -> i64 {
    table_oid(t) + 1
}

/// OID of a table's CHECK constraint number `k` (below the OIDs
/// `pg_attrdef` uses for the table's column defaults).
pub fn check_oid(t: &Table, k: usize) -> i64 {
    (table_oid(t) << 10) | (1023 - (k as i64 & 511))
}

/// The `public` schema: Eddy tables, looked up in the engine on every use,
/// and sequences, which read as PostgreSQL's one-row relation
/// (`SELECT last_value, is_called FROM s`, as pg_dump and scripts do).
pub struct PublicSchema {
    engine: Arc<Engine>,
    scan_filters: Arc<std::sync::atomic::AtomicBool>,
    view: Arc<crate::provider::ReadView>,
    sequences: Option<Arc<Sequences>>,
}

impl std::fmt::Debug for PublicSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PublicSchema")
    }
}

impl std::fmt::Debug for PgCatalogSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgCatalogSchema")
    }
}

impl PublicSchema {
    /// `scan_filters`: the session's switch for scans applying simple
    /// filters themselves (see `EddyTable::with_scan_filters`).
    pub fn new(
        engine: Arc<Engine>,
        scan_filters: Arc<std::sync::atomic::AtomicBool>,
        view: Arc<crate::provider::ReadView>,
    ) -> PublicSchema {
        PublicSchema {
            engine,
            scan_filters,
            view,
            sequences: None,
        }
    }

    /// Sequences read as relations too.
    pub fn with_sequences(mut self, sequences: Arc<Sequences>) -> PublicSchema {
        self.sequences = Some(sequences);
        self
    }

    /// Sequence `name` as a relation: `last_value` (the start before the
    /// first `nextval`), `log_cnt` (0: Eddy logs values ahead, but counts
    /// them differently from PostgreSQL's WAL) and `is_called`.
    fn sequence_relation(&self, name: &str) -> datafusion::error::Result<Option<MemTable>> {
        let Some((last, is_called)) = self.sequences.as_ref().and_then(|s| s.position(name)) else {
            return Ok(None);
        };
        mem_table(
            &[
                ("last_value", DataType::Int64),
                ("log_cnt", DataType::Int64),
                ("is_called", DataType::Boolean),
            ],
            vec![vec![
                ScalarValue::Int64(Some(last)),
                ScalarValue::Int64(Some(0)),
                ScalarValue::Boolean(Some(is_called)),
            ]],
        )
        .map(Some)
    }
}

#[async_trait]
impl SchemaProvider for PublicSchema {
    fn table_names(&self) -> Vec<String> {
        let schemas = schema_names(&self.engine);
        self.engine
            .tables()
            .iter()
            .map(|t| t.def().name.clone())
            // temporary tables are their sessions' own (`crate::temp_tables`)
            .filter(|n| !crate::temp_tables::is_reserved(n))
            // nor a table its block is dropping
            .filter(|n| !crate::session::is_going_away(n))
            // and a user schema's relations are not `public`'s
            .filter(|n| crate::schemas::split(n, &schemas).0 == crate::schemas::PUBLIC)
            .collect()
    }

    async fn table(&self, name: &str) -> datafusion::error::Result<Option<Arc<dyn TableProvider>>> {
        if self.engine.table(name).is_none() {
            if let Some(sequence) = self.sequence_relation(name)? {
                return Ok(Some(Arc::new(sequence)));
            }
        }
        Ok(self.engine.table(name).map(|t| {
            let scan_filters = self.scan_filters.load(std::sync::atomic::Ordering::Relaxed);
            Arc::new(
                EddyTable::new(t, false)
                    .with_scan_filters(scan_filters)
                    .with_view(Arc::clone(&self.view)),
            ) as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.engine.table(name).is_some()
    }
}

/// What the session's open transaction changed that its own catalog
/// queries show and other sessions' do not, as PostgreSQL's catalogs read
/// in that transaction would: the tables and sequences it dropped (the
/// engine keeps them until COMMIT) are left out; the views and schemas
/// it created, changed or dropped (its own until COMMIT) are shown as it
/// left them. The session publishes it before planning each statement
/// (`Session::publish_block_catalog`).
#[derive(Clone, Debug, Default)]
pub struct BlockCatalog {
    pub dropped: std::collections::HashSet<String>,
    pub views: Vec<eddy_storage::views::ViewChange>,
    pub schemas: Vec<eddy_storage::schemas::SchemaChange>,
}

impl BlockCatalog {
    /// The committed views with the transaction's changes applied.
    pub fn views_over(
        &self,
        mut committed: Vec<eddy_common::ViewDef>,
    ) -> Vec<eddy_common::ViewDef> {
        eddy_storage::views::apply(&mut committed, &self.views);
        committed
    }

    /// The committed schemas with the transaction's changes applied.
    pub fn schemas_over(
        &self,
        mut committed: Vec<eddy_common::SchemaDef>,
    ) -> Vec<eddy_common::SchemaDef> {
        eddy_storage::schemas::apply(&mut committed, &self.schemas);
        committed
    }
}

/// A session's [`BlockCatalog`], shared with its catalog schemas.
pub type DroppedInBlock = Arc<parking_lot::RwLock<BlockCatalog>>;

/// `pg_catalog`: PostgreSQL's system catalogs, synthesised.
pub struct PgCatalogSchema {
    engine: Arc<Engine>,
    sequences: Arc<Sequences>,
    database: String,
    /// Every role (`pg_roles`, `pg_auth_members`, owners and ACLs).
    roles: Arc<crate::roles::Roles>,
    /// The stream layer, whose sources `pg_class` lists.
    streams: Option<Arc<dyn crate::streams::StreamStatements>>,
    /// The server's connections (`pg_stat_activity`) and the session's
    /// user, who may see some of what they do (`crate::backends`).
    backends: Option<(crate::backends::BackendsSlot, String)>,
    /// What the session's open block dropped.
    dropped: DroppedInBlock,
}

impl PgCatalogSchema {
    /// Leaves out what the session's open block has dropped.
    pub fn with_dropped_in_block(mut self, dropped: DroppedInBlock) -> PgCatalogSchema {
        self.dropped = dropped;
        self
    }

    /// Lists the server's connections in `pg_stat_activity`, as `user`
    /// may see them.
    pub fn with_backends(
        mut self,
        backends: crate::backends::BackendsSlot,
        user: &str,
    ) -> PgCatalogSchema {
        self.backends = Some((backends, user.to_string()));
        self
    }

    /// Lists the stream layer's sources too (as views).
    pub fn with_streams(
        mut self,
        streams: Option<Arc<dyn crate::streams::StreamStatements>>,
    ) -> PgCatalogSchema {
        self.streams = streams;
        self
    }

    pub fn new(
        engine: Arc<Engine>,
        sequences: Arc<Sequences>,
        database: &str,
        roles: Arc<crate::roles::Roles>,
    ) -> PgCatalogSchema {
        PgCatalogSchema {
            engine,
            sequences,
            database: database.to_string(),
            roles,
            streams: None,
            backends: None,
            dropped: DroppedInBlock::default(),
        }
    }
}

const PG_TABLES: &[&str] = &[
    "pg_namespace",
    "pg_class",
    "pg_attribute",
    "pg_type",
    "pg_index",
    "pg_constraint",
    "pg_database",
    "pg_settings",
    "pg_am",
    "pg_roles",
    "pg_user",
    "pg_authid",
    "pg_auth_members",
    "pg_proc",
    "pg_description",
    "pg_attrdef",
    "pg_inherits",
    "pg_trigger",
    "pg_policy",
    "pg_statistic_ext",
    "pg_publication",
    "pg_publication_rel",
    "pg_publication_tables",
    "pg_rewrite",
    "pg_collation",
    "pg_tablespace",
    "pg_extension",
    "pg_range",
    "pg_enum",
    "pg_tables",
    "pg_indexes",
    "pg_views",
    "pg_matviews",
    "pg_sequence",
    "pg_depend",
    "pg_foreign_table",
    "pg_partitioned_table",
    "pg_stat_activity",
    "pg_locks",
    "pg_event_trigger",
    "pg_opclass",
    "pg_operator",
    "pg_cast",
];

/// Whether `name` is a `pg_catalog` relation (found by an unqualified
/// name whatever the search path, as in PostgreSQL).
pub(crate) fn is_catalog_relation(name: &str) -> bool {
    PG_TABLES.contains(&name) || crate::catalog_shape::relation_oid(name).is_some()
}

/// The catalog relations `crate::catalog_shape` builds whole.
fn shaped_relations() -> Vec<&'static str> {
    crate::catalog_shape::shaped_relations(&|n| PG_TABLES.contains(&n))
}

#[async_trait]
impl SchemaProvider for PgCatalogSchema {
    fn table_names(&self) -> Vec<String> {
        PG_TABLES
            .iter()
            .copied()
            .chain(shaped_relations())
            .map(str::to_string)
            .collect()
    }

    async fn table(&self, name: &str) -> datafusion::error::Result<Option<Arc<dyn TableProvider>>> {
        if !PG_TABLES.contains(&name) {
            let shaped = crate::catalog_shape::shaped_table(name)?;
            return Ok(shaped.map(|t| Arc::new(t) as Arc<dyn TableProvider>));
        }
        if name == "pg_stat_activity" {
            let rows = match &self.backends {
                Some((slot, user)) => crate::backends::activity_rows(
                    slot,
                    &self.roles,
                    user,
                    DATABASE_OID,
                    &self.database,
                ),
                None => Vec::new(),
            };
            let columns = crate::backends::activity_columns();
            let t = mem_table(&columns, rows)?;
            let t = crate::catalog_shape::complete(name, t).await?;
            return Ok(Some(Arc::new(t)));
        }
        // temporary tables are their sessions' own (`crate::temp_tables`)
        let mut tables = self.engine.tables();
        let block = self.dropped.read().clone();
        let dropped = &block.dropped;
        tables.retain(|t| {
            let name = &t.def().name;
            !crate::temp_tables::is_reserved(name)
                && !crate::session::is_going_away(name)
                && !dropped.contains(name)
        });
        let mut sequences = self.sequences.list();
        sequences.retain(|(def, _)| !dropped.contains(&def.name));
        let roles = self.roles.list();
        let user = CurrentUser {
            roles: &roles,
            public_create: self.roles.public_schema_create(),
        };
        let sources = self
            .streams
            .as_ref()
            .map(|s| s.relations())
            .unwrap_or_default();
        let views = block.views_over(self.engine.views());
        let schemas = block.schemas_over(self.engine.schemas());
        let relations = Relations {
            schemas: &schemas,
            tables: &tables,
            views: &views,
            sequences: &sequences,
            sources: &sources,
        };
        let t = build_pg_table(name, relations, &self.database, user)?;
        let t = crate::catalog_shape::complete(name, t).await?;
        Ok(Some(Arc::new(t)))
    }

    fn table_exist(&self, name: &str) -> bool {
        is_catalog_relation(name)
    }
}

// ---------------------------------------------------------------------------
// building the tables

type S = ScalarValue;

fn s(v: &str) -> S {
    S::Utf8(Some(v.to_string()))
}
fn i(v: i64) -> S {
    S::Int64(Some(v))
}
fn i4(v: i32) -> S {
    S::Int32(Some(v))
}
fn i2(v: i16) -> S {
    S::Int16(Some(v))
}
fn b(v: bool) -> S {
    S::Boolean(Some(v))
}
fn null_text() -> S {
    S::Utf8(None)
}
fn f4(v: f32) -> S {
    S::Float32(Some(v))
}

pub(crate) fn mem_table(
    cols: &[(&str, DataType)],
    rows: Vec<Vec<S>>,
) -> datafusion::error::Result<MemTable> {
    mem_table_typed(cols, rows, &[])
}

/// [`mem_table`] whose columns named in `declared` carry a PostgreSQL type
/// Arrow cannot say (field metadata `pgtypes::DECLARED_TYPE_KEY`).
fn mem_table_typed(
    cols: &[(&str, DataType)],
    rows: Vec<Vec<S>>,
    declared: &[(&str, &str)],
) -> datafusion::error::Result<MemTable> {
    let schema = Arc::new(Schema::new(
        cols.iter()
            .map(|(n, t)| {
                let f = Field::new(*n, t.clone(), true);
                match declared.iter().find(|(c, _)| c == n) {
                    Some((_, ty)) => f.with_metadata(
                        [(
                            crate::pgtypes::DECLARED_TYPE_KEY.to_string(),
                            ty.to_string(),
                        )]
                        .into(),
                    ),
                    None => f,
                }
            })
            .collect::<Vec<_>>(),
    ));
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(cols.len());
    for (ci, (_, ty)) in cols.iter().enumerate() {
        let vals: Vec<S> = rows
            .iter()
            .map(|r| match r.get(ci) {
                Some(v) if !v.is_null() => v.cast_to(ty),
                _ => S::try_from(ty),
            })
            .collect::<datafusion::error::Result<_>>()?;
        arrays.push(if vals.is_empty() {
            datafusion::arrow::array::new_empty_array(ty)
        } else {
            S::iter_to_array(vals)?
        });
    }
    let batch = RecordBatch::try_new(Arc::clone(&schema), arrays)?;
    MemTable::try_new(schema, vec![vec![batch]])
}

use DataType::{
    Boolean as B, Float32 as F4, Int16 as I2, Int32 as I4, Int64 as I8, UInt32 as O, Utf8 as T,
};

/// `text[]` columns (reloptions, stxkind): drivers apply `= any(...)`,
/// `||` and `array_to_string` to them.
fn text_array() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))
}

/// The OID of a system catalog named with or without `pg_catalog.`.
pub(crate) fn catalog_relation_oid(name: &str) -> Option<i64> {
    let bare = name.trim();
    let bare = bare.strip_prefix("pg_catalog.").unwrap_or(bare);
    crate::catalog_shape::relation_oid(bare)
}

/// `pg_index.indkey`: PostgreSQL's is `int2vector` (printed "1 2",
/// subscripts from 0); Eddy answers `int2[]` (printed "{1,2}", subscripts
/// from 1), which `unnest`, `= ANY` and `generate_subscripts` take as
/// drivers use them (SQLAlchemy's reflection unnests indkey). `indoption`
/// stays int2vector's text, which clients split.
fn int2_array() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Int16, true)))
}

fn int8_array() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true)))
}

fn int8_list(v: Vec<i64>) -> S {
    let items: Vec<S> = v.into_iter().map(i).collect();
    S::List(S::new_list_nullable(&items, &DataType::Int64))
}

fn i2_array(v: &[i16]) -> S {
    let items: Vec<S> = v.iter().map(|n| i2(*n)).collect();
    S::List(S::new_list_nullable(&items, &DataType::Int16))
}

/// Builtin types reported in pg_type: (oid, name, category, array oid of it).
const PG_TYPES: &[(u32, &str, &str, u32)] = &[
    (oid::BOOL, "bool", "B", 1000),
    (oid::BYTEA, "bytea", "U", 1001),
    (oid::CHAR, "char", "S", 1002),
    (oid::NAME, "name", "S", 1003),
    (oid::INT8, "int8", "N", 1016),
    (oid::INT2, "int2", "N", 1005),
    (oid::INT4, "int4", "N", 1007),
    (oid::TEXT, "text", "S", 1009),
    (oid::OID, "oid", "N", 1028),
    (oid::FLOAT4, "float4", "N", 1021),
    (oid::FLOAT8, "float8", "N", 1022),
    (oid::UNKNOWN, "unknown", "X", 0),
    (oid::BPCHAR, "bpchar", "S", 1014),
    (oid::VARCHAR, "varchar", "S", 1015),
    (oid::DATE, "date", "D", 1182),
    (oid::TIME, "time", "D", 1183),
    (oid::TIMESTAMP, "timestamp", "D", 1115),
    (oid::TIMESTAMPTZ, "timestamptz", "D", 1185),
    (oid::INTERVAL, "interval", "T", 1187),
    (oid::NUMERIC, "numeric", "N", 1231),
    (22, "int2vector", "A", 1006),
    (30, "oidvector", "A", 1013),
    (2205, "regclass", "N", 2210),
    (2206, "regtype", "N", 2211),
    (114, "json", "U", 199),
    (3802, "jsonb", "U", 3807),
    (2950, "uuid", "U", 2951),
    (2278, "void", "P", 0),
    (2249, "record", "P", 2287),
];

fn type_name(o: u32) -> String {
    PG_TYPES
        .iter()
        .find(|t| t.0 == o)
        .map(|t| t.1.to_string())
        .or_else(|| {
            PG_TYPES
                .iter()
                .find(|t| t.3 == o)
                .map(|t| format!("_{}", t.1))
        })
        .unwrap_or_else(|| "unknown".into())
}

/// `format_type(oid, typmod)` as PostgreSQL prints it.
pub fn format_type(o: i64, typmod: i64) -> Option<String> {
    let o = u32::try_from(o).ok()?;
    Some(match o {
        oid::BOOL => "boolean".into(),
        oid::INT2 => "smallint".into(),
        oid::INT4 => "integer".into(),
        oid::INT8 => "bigint".into(),
        oid::FLOAT4 => "real".into(),
        oid::FLOAT8 => "double precision".into(),
        oid::TEXT => "text".into(),
        oid::VARCHAR if typmod >= 4 => format!("character varying({})", typmod - 4),
        oid::VARCHAR => "character varying".into(),
        oid::BPCHAR if typmod >= 4 => format!("character({})", typmod - 4),
        oid::BPCHAR => "bpchar".into(),
        oid::DATE => "date".into(),
        oid::TIMESTAMP => "timestamp without time zone".into(),
        oid::TIME => "time without time zone".into(),
        oid::TIMESTAMPTZ => "timestamp with time zone".into(),
        oid::BYTEA => "bytea".into(),
        oid::NUMERIC if typmod >= 4 => {
            let m = typmod - 4;
            format!("numeric({},{})", (m >> 16) & 0xffff, m & 0xffff)
        }
        oid::NUMERIC => "numeric".into(),
        // an array type: its element's name and `[]` (the typmod is the
        // element's)
        other => match PG_TYPES.iter().find(|t| t.3 == other && t.3 != 0) {
            Some(t) => format!("{}[]", format_type(i64::from(t.0), typmod)?),
            None => type_name(other),
        },
    })
}

pub(crate) fn typmod_of(t: ColumnType) -> i32 {
    match t {
        ColumnType::Array(e) => typmod_of(e.column_type()),
        ColumnType::Decimal(p, s) => (((p as i32) << 16) | (s.max(0) as i32)) + 4,
        // VARHDRSZ + n, as PostgreSQL stores a length typmod
        ColumnType::Varchar(n) | ColumnType::Char(n) => {
            i32::try_from(n).map_or(-1, |n| n.saturating_add(4))
        }
        _ => -1,
    }
}

/// Every role, as the catalogs show them.
struct CurrentUser<'a> {
    roles: &'a [crate::roles::RoleDef],
    /// Roles holding CREATE on `public` (`None`: PUBLIC).
    public_create: Vec<Option<String>>,
}

impl CurrentUser<'_> {
    /// A role's oid (0 for a name that is not a role).
    fn oid_of(&self, name: &str) -> i64 {
        self.roles
            .iter()
            .find(|r| r.name == name)
            .map_or(0, |r| r.oid)
    }

    /// `nspacl` of `public`: the owner's USAGE and CREATE, PUBLIC's USAGE,
    /// and the CREATE grants.
    fn public_acl(&self) -> Vec<String> {
        let su = crate::roles::BOOTSTRAP_SUPERUSER;
        let mut items = vec![format!("{su}=UC/{su}"), format!("=U/{su}")];
        for g in &self.public_create {
            match g {
                None => items[1] = format!("=UC/{su}"),
                Some(r) => items.push(format!("{r}=C/{su}")),
            }
        }
        items
    }
}

/// `nspacl` of user schema `d` owned by `owner`: NULL while nothing was
/// granted (the owner's implicit USAGE and CREATE, as PostgreSQL's
/// default), else the owner's own item and the grants.
fn schema_acl(d: &eddy_common::SchemaDef, owner: &str) -> S {
    if d.acl.is_empty() {
        return null_text();
    }
    let mut items = vec![format!("{owner}=UC/{owner}")];
    items.extend(d.acl.iter().cloned());
    text_list(&items)
}

/// One row of `pg_class`: what differs between relations; the rest is
/// the same for every relation Eddy has (no TOAST, rules, triggers,
/// partitions or row security; permanent).
struct PgClassRow {
    oid: i64,
    name: String,
    namespace: i64,
    kind: &'static str,
    owner: i64,
    /// `pg_am` oid: 2 heap (tables), 403 btree (indexes), 0 none.
    am: i64,
    filenode: i64,
    pages: i32,
    tuples: f32,
    has_index: bool,
    natts: i16,
    checks: i16,
    /// PostgreSQL enforces foreign keys by triggers, so a table that has
    /// or is referenced by one has triggers (psql's `\d` lists foreign
    /// keys only then).
    has_triggers: bool,
    replident: &'static str,
    acl: S,
    options: S,
}

impl PgClassRow {
    /// Relation `name` (a storage name: `ns` says its schema).
    fn new(oid: i64, name: &str, kind: &'static str, ns: &Namespaces) -> PgClassRow {
        let (namespace, _, name) = ns.of(name);
        PgClassRow {
            oid,
            name: name.to_string(),
            namespace,
            kind,
            owner: SUPERUSER_OID,
            am: 0,
            filenode: oid,
            pages: 0,
            tuples: 0.0,
            has_index: false,
            natts: 0,
            checks: 0,
            has_triggers: false,
            replident: "n",
            acl: null_text(),
            options: null_text(),
        }
    }

    /// The cells in `pg_class`'s column order.
    fn cells(self) -> Vec<S> {
        vec![
            i(self.oid),
            s(&self.name),
            i(self.namespace),
            i(0),
            i(0),
            i(self.owner),
            i(self.am),
            i(self.filenode),
            i(0),
            i4(self.pages),
            f4(self.tuples),
            i4(0),
            i(0),
            b(self.has_index),
            b(false),
            s("p"),
            s(self.kind),
            i2(self.natts),
            i2(self.checks),
            b(false),
            b(self.has_triggers),
            b(false),
            b(false),
            b(false),
            b(true),
            s(self.replident),
            b(false),
            i(0),
            self.acl,
            null_text(),
            self.options,
        ]
    }
}

/// A `text[]` value.
fn text_list(items: &[String]) -> S {
    let v: Vec<S> = items.iter().map(|x| s(x)).collect();
    S::List(S::new_list_nullable(&v, &DataType::Utf8))
}

/// A table's `reloptions`: its orientation where it is not the one a
/// table of its shape gets by default (row and column with a primary key,
/// column without), so that a dump of it (pg_dump writes `WITH (...)` from
/// them) restores the same table in Eddy, and a table of the default
/// shape restores into PostgreSQL too.
fn reloptions(d: &eddy_common::TableDef) -> S {
    let default = if d.primary_key.is_empty() {
        eddy_common::Orientation::Column
    } else {
        eddy_common::Orientation::RowColumn
    };
    if d.orientation == default {
        null_text()
    } else {
        text_list(&[format!("orientation={}", d.orientation)])
    }
}

/// OID of the `n`th stream source (sorted by name), above every table's.
fn source_oid(n: usize) -> i64 {
    1_000_000_000 + n as i64
}

/// A `pg_attribute` row of column number `index` (from 0) with no
/// default, NOT NULL or identity: a view's, a stream source's, an index's.
fn plain_attribute(rel: i64, name: &str, type_oid: u32, index: usize, typmod: i32) -> Vec<S> {
    let len = pg_typlen(type_oid);
    vec![
        i(rel),
        s(name),
        i(i64::from(type_oid)),
        i2(len),
        i2(i16::try_from(index).unwrap_or(i16::MAX).saturating_add(1)),
        i4(typmod),
        b(false),
        b(false),
        b(false),
        s(""),
        s(""),
        b(false),
        b(true),
        i(0),
        i4(0),
        b(len > 0 && len <= 8),
        s(if len > 0 { "p" } else { "x" }),
        s(""),
        i4(-1),
    ]
}

/// The relations the catalog tables list.
struct Relations<'a> {
    /// The user schemas (`crate::schemas`), which name where each
    /// relation is.
    schemas: &'a [eddy_common::SchemaDef],
    tables: &'a [Arc<Table>],
    views: &'a [eddy_common::ViewDef],
    sequences: &'a [(SequenceDef, Option<i64>)],
    sources: &'a [crate::streams::StreamRelation],
}

/// OID of a view: its id comes from the tables' counter, so it never
/// equals a table's (or a table's primary-key index's).
pub fn view_oid(v: &eddy_common::ViewDef) -> i64 {
    16_384 + 2 * i64::from(v.id.0)
}

/// OID of a user schema: its id comes from the tables' counter, so it
/// never equals a relation's.
pub fn schema_oid(s: &eddy_common::SchemaDef) -> i64 {
    16_384 + 2 * i64::from(s.id.0)
}

/// Where the storage names of relations put them (`crate::schemas`).
struct Namespaces {
    /// `(name, oid)` of each user schema.
    schemas: Vec<(String, i64)>,
    names: Vec<String>,
}

impl Namespaces {
    fn new(schemas: &[eddy_common::SchemaDef]) -> Namespaces {
        Namespaces {
            schemas: schemas
                .iter()
                .map(|s| (s.name.clone(), schema_oid(s)))
                .collect(),
            names: schemas.iter().map(|s| s.name.clone()).collect(),
        }
    }

    /// `(schema oid, schema name, relation name)` of storage name `name`.
    fn of<'n>(&self, name: &'n str) -> (i64, &'n str, &'n str) {
        let (schema, relation) = crate::schemas::split(name, &self.names);
        let oid = self
            .schemas
            .iter()
            .find(|(n, _)| n == schema)
            .map_or(NS_PUBLIC, |(_, o)| *o);
        (oid, schema, relation)
    }
}

fn build_pg_table(
    name: &str,
    relations: Relations<'_>,
    database: &str,
    current: CurrentUser<'_>,
) -> datafusion::error::Result<MemTable> {
    let Relations {
        schemas,
        tables,
        views,
        sequences,
        sources,
    } = relations;
    let ns = Namespaces::new(schemas);
    match name {
        "pg_namespace" => mem_table(
            &[
                ("oid", O),
                ("nspname", T),
                ("nspowner", O),
                ("nspacl", text_array()),
            ],
            vec![
                vec![i(NS_PG_CATALOG), s("pg_catalog"), i(SUPERUSER_OID)],
                vec![
                    i(NS_PUBLIC),
                    s("public"),
                    i(SUPERUSER_OID),
                    text_list(&current.public_acl()),
                ],
                vec![
                    i(NS_INFORMATION_SCHEMA),
                    s("information_schema"),
                    i(SUPERUSER_OID),
                ],
            ]
            .into_iter()
            .chain(schemas.iter().map(|d| {
                let owner = d
                    .owner
                    .as_deref()
                    .unwrap_or(crate::roles::BOOTSTRAP_SUPERUSER);
                vec![
                    i(schema_oid(d)),
                    s(&d.name),
                    i(current.oid_of(owner)),
                    schema_acl(d, owner),
                ]
            }))
            .collect(),
        ),
        "pg_class" => {
            let mut rows = Vec::new();
            for (seq, _) in sequences {
                rows.push(
                    PgClassRow {
                        pages: 1,
                        tuples: 1.0,
                        natts: 3,
                        owner: current.oid_of(
                            seq.owner
                                .as_deref()
                                .unwrap_or(crate::roles::BOOTSTRAP_SUPERUSER),
                        ),
                        acl: crate::privileges::relation_acl_items(
                            seq.owner
                                .as_deref()
                                .unwrap_or(crate::roles::BOOTSTRAP_SUPERUSER),
                            &seq.acl,
                            &eddy_common::TablePrivileges::SEQUENCE_NAMED,
                        )
                        .map_or_else(null_text, |a| text_list(&a)),
                        ..PgClassRow::new(sequence_oid(&seq.name), &seq.name, "S", &ns)
                    }
                    .cells(),
                );
            }
            for (n, src) in sources.iter().enumerate() {
                rows.push(
                    PgClassRow {
                        filenode: 0,
                        natts: src.columns.len() as i16,
                        ..PgClassRow::new(source_oid(n), &src.name, "v", &ns)
                    }
                    .cells(),
                );
            }
            for v in views {
                rows.push(
                    PgClassRow {
                        owner: current.oid_of(crate::privileges::view_owner(v)),
                        acl: crate::privileges::relation_acl_items(
                            crate::privileges::view_owner(v),
                            &v.acl,
                            &eddy_common::TablePrivileges::NAMED,
                        )
                        .map_or_else(null_text, |a| text_list(&a)),
                        filenode: 0,
                        natts: i16::try_from(v.columns.len()).unwrap_or(i16::MAX),
                        ..PgClassRow::new(view_oid(v), &v.name, "v", &ns)
                    }
                    .cells(),
                );
            }
            for t in tables {
                let d = t.def();
                let has_pk = d.has_primary_key();
                rows.push(
                    PgClassRow {
                        owner: current.oid_of(crate::privileges::owner_of(d)),
                        am: 2,
                        tuples: t.approx_row_count() as f32,
                        has_index: has_pk || !d.indexes.is_empty(),
                        natts: d.columns.len() as i16,
                        checks: d.checks.len() as i16,
                        has_triggers: !d.foreign_keys.is_empty()
                            || tables.iter().any(|other| {
                                other
                                    .def()
                                    .foreign_keys
                                    .iter()
                                    .any(|fk| fk.ref_table == d.id)
                            }),
                        replident: "d",
                        acl: crate::privileges::acl_items(d)
                            .map_or_else(null_text, |a| text_list(&a)),
                        options: reloptions(d),
                        ..PgClassRow::new(table_oid(t), &d.name, "r", &ns)
                    }
                    .cells(),
                );
                for ix in indexes_of(t) {
                    rows.push(
                        PgClassRow {
                            am: 403,
                            // an index belongs to its table's owner
                            owner: current.oid_of(crate::privileges::owner_of(d)),
                            // a btree's metapage, PostgreSQL's count for a
                            // new index (pgjdbc's getIndexInfo shows it)
                            pages: 1,
                            natts: ix.columns.len() as i16,
                            ..PgClassRow::new(ix.oid, &ix.name, "i", &ns)
                        }
                        .cells(),
                    );
                }
            }
            mem_table(
                &[
                    ("oid", O),
                    ("relname", T),
                    ("relnamespace", O),
                    ("reltype", O),
                    ("reloftype", O),
                    ("relowner", O),
                    ("relam", O),
                    ("relfilenode", O),
                    ("reltablespace", O),
                    ("relpages", I4),
                    ("reltuples", F4),
                    ("relallvisible", I4),
                    ("reltoastrelid", O),
                    ("relhasindex", B),
                    ("relisshared", B),
                    ("relpersistence", T),
                    ("relkind", T),
                    ("relnatts", I2),
                    ("relchecks", I2),
                    ("relhasrules", B),
                    ("relhastriggers", B),
                    ("relhassubclass", B),
                    ("relrowsecurity", B),
                    ("relforcerowsecurity", B),
                    ("relispopulated", B),
                    ("relreplident", T),
                    ("relispartition", B),
                    ("relrewrite", O),
                    ("relacl", text_array()),
                    ("relpartbound", T),
                    ("reloptions", text_array()),
                ],
                rows,
            )
        }
        "pg_attribute" => {
            let mut rows = Vec::new();
            for (n, src) in sources.iter().enumerate() {
                for (a, (col, ty)) in src.columns.iter().enumerate() {
                    let o = oid_for_column_type(*ty);
                    rows.push(plain_attribute(source_oid(n), col, o, a, typmod_of(*ty)));
                }
            }
            for v in views {
                for (a, c) in v.columns.iter().enumerate() {
                    rows.push(plain_attribute(
                        view_oid(v),
                        &c.name,
                        c.type_oid,
                        a,
                        c.typmod,
                    ));
                }
            }
            for t in tables {
                let d = t.def();
                for (n, c) in d.columns.iter().enumerate() {
                    let o = oid_for_column_type(c.ty);
                    rows.push(vec![
                        i(table_oid(t)),
                        s(&c.name),
                        i(o as i64),
                        i2(pg_typlen(o)),
                        i2(n as i16 + 1),
                        i4(typmod_of(c.ty)),
                        b(!c.nullable || d.primary_key.contains(&n)),
                        b(c.default.is_some() && c.identity.is_none()),
                        b(false),
                        s(match c.identity {
                            Some(eddy_common::Identity::Always) => "a",
                            Some(eddy_common::Identity::ByDefault) => "d",
                            None => "",
                        }),
                        s(""),
                        b(false),
                        b(true),
                        i(0),
                        i4(i32::from(matches!(c.ty, ColumnType::Array(_)))),
                        b(pg_typlen(o) > 0 && pg_typlen(o) <= 8),
                        s(if pg_typlen(o) > 0 { "p" } else { "x" }),
                        s(""),
                        i4(-1),
                    ]);
                }
                for (n, &ci) in d.primary_key.iter().enumerate() {
                    let Some(c) = d.columns.get(ci) else { continue };
                    let o = oid_for_column_type(c.ty);
                    rows.push(plain_attribute(
                        index_oid(t),
                        &c.name,
                        o,
                        n,
                        typmod_of(c.ty),
                    ));
                }
            }
            mem_table(
                &[
                    ("attrelid", O),
                    ("attname", T),
                    ("atttypid", O),
                    ("attlen", I2),
                    ("attnum", I2),
                    ("atttypmod", I4),
                    ("attnotnull", B),
                    ("atthasdef", B),
                    ("atthasmissing", B),
                    ("attidentity", T),
                    ("attgenerated", T),
                    ("attisdropped", B),
                    ("attislocal", B),
                    ("attcollation", O),
                    ("attndims", I4),
                    ("attbyval", B),
                    ("attstorage", T),
                    ("attcompression", T),
                    ("attstattarget", I4),
                    // NULL: no column-level grants (pgjdbc's
                    // getColumnPrivileges reads the table's relacl then)
                    ("attacl", text_array()),
                ],
                rows,
            )
        }
        "pg_type" => {
            let mut rows = Vec::new();
            for (o, n, cat, arr) in PG_TYPES {
                let len = pg_typlen(*o);
                rows.push(vec![
                    i(*o as i64),
                    s(n),
                    i(NS_PG_CATALOG),
                    i(SUPERUSER_OID),
                    i2(len),
                    b(len > 0 && len <= 8),
                    s(if *cat == "P" { "p" } else { "b" }),
                    s(cat),
                    b(false),
                    b(true),
                    s(","),
                    i(0),
                    i(0),
                    i(*arr as i64),
                    s(&format!("{n}in")),
                    s(&format!("{n}out")),
                    s(&format!("{n}recv")),
                    s(&format!("{n}send")),
                    s(if len == 8 {
                        "d"
                    } else if len == 2 {
                        "s"
                    } else if len == 1 {
                        "c"
                    } else {
                        "i"
                    }),
                    s(if len > 0 { "p" } else { "x" }),
                    b(false),
                    i(0),
                    i4(-1),
                    i4(0),
                    i(if *cat == "S" { 100 } else { 0 }),
                ]);
                if *arr != 0 {
                    rows.push(vec![
                        i(*arr as i64),
                        s(&format!("_{n}")),
                        i(NS_PG_CATALOG),
                        i(SUPERUSER_OID),
                        i2(-1),
                        b(false),
                        s("b"),
                        s("A"),
                        b(false),
                        b(true),
                        s(","),
                        i(0),
                        i(*o as i64),
                        i(0),
                        s("array_in"),
                        s("array_out"),
                        s("array_recv"),
                        s("array_send"),
                        s(if len == 8 { "d" } else { "i" }),
                        s("x"),
                        b(false),
                        i(0),
                        i4(-1),
                        i4(0),
                        i(0),
                    ]);
                }
            }
            mem_table(
                &[
                    ("oid", O),
                    ("typname", T),
                    ("typnamespace", O),
                    ("typowner", O),
                    ("typlen", I2),
                    ("typbyval", B),
                    ("typtype", T),
                    ("typcategory", T),
                    ("typispreferred", B),
                    ("typisdefined", B),
                    ("typdelim", T),
                    ("typrelid", O),
                    ("typelem", O),
                    ("typarray", O),
                    ("typinput", T),
                    ("typoutput", T),
                    ("typreceive", T),
                    ("typsend", T),
                    ("typalign", T),
                    ("typstorage", T),
                    ("typnotnull", B),
                    ("typbasetype", O),
                    ("typtypmod", I4),
                    ("typndims", I4),
                    ("typcollation", O),
                    // NULL: no built-in type has a default (domains do)
                    ("typdefault", T),
                ],
                rows,
            )
        }
        "pg_index" => {
            let rows = tables
                .iter()
                .flat_map(|t| indexes_of(t).into_iter().map(move |ix| (t, ix)))
                .map(|(t, ix)| {
                    vec![
                        i(ix.oid),
                        i(table_oid(t)),
                        i2(ix.columns.len() as i16),
                        i2(ix.columns.len() as i16),
                        b(ix.unique),
                        b(ix.primary),
                        b(false),
                        b(true),
                        b(false),
                        b(true),
                        b(false),
                        b(true),
                        b(true),
                        b(false),
                        i2_array(&ix.indkey()),
                        null_text(),
                        null_text(),
                        b(false),
                        s(&ix.indoption()),
                        int8_list(
                            ix.columns
                                .iter()
                                .map(|c| {
                                    let ty = t.def().columns.get(*c).map(|col| col.ty);
                                    ty.map_or(0, |ty| {
                                        i64::from(crate::index_catalog::default_btree_opclass(
                                            oid_for_column_type(ty),
                                        ))
                                    })
                                })
                                .collect(),
                        ),
                    ]
                })
                .collect();
            mem_table_typed(
                &[
                    ("indexrelid", O),
                    ("indrelid", O),
                    ("indnatts", I2),
                    ("indnkeyatts", I2),
                    ("indisunique", B),
                    ("indisprimary", B),
                    ("indisexclusion", B),
                    ("indimmediate", B),
                    ("indisclustered", B),
                    ("indisvalid", B),
                    ("indcheckxmin", B),
                    ("indisready", B),
                    ("indislive", B),
                    ("indisreplident", B),
                    ("indkey", int2_array()),
                    ("indexprs", T),
                    ("indpred", T),
                    ("indnullsnotdistinct", B),
                    ("indoption", T),
                    // oidvector in PostgreSQL; an int8 array here
                    ("indclass", int8_array()),
                ],
                rows,
                // subscripted from 0 and printed `1 2` (`crate::int2vector`)
                &[
                    ("indkey", crate::int2vector::INT2VECTOR),
                    ("indoption", crate::int2vector::INT2VECTOR),
                ],
            )
        }
        "pg_constraint" => {
            let mut rows: Vec<Vec<S>> = tables
                .iter()
                .flat_map(|t| indexes_of(t).into_iter().map(move |ix| (t, ix)))
                .filter(|(_, ix)| ix.constraint)
                .map(|(t, ix)| {
                    let (namespace, _, name) = ns.of(&ix.name);
                    vec![
                        i(ix.oid),
                        s(name),
                        i(namespace),
                        s(if ix.primary { "p" } else { "u" }),
                        b(false),
                        b(false),
                        b(true),
                        i(table_oid(t)),
                        i(0),
                        i(ix.oid),
                        i(0),
                        s(" "),
                        s(" "),
                        s(" "),
                        b(true),
                        i4(0),
                        b(true),
                        i2_array(&ix.indkey()),
                        null_text(),
                        null_text(),
                    ]
                })
                .collect();
            for t in tables {
                for (k, fk) in t.def().foreign_keys.iter().enumerate() {
                    let parent = tables.iter().find(|p| p.def().id == fk.ref_table);
                    let (namespace, _, name) = ns.of(&fk.name);
                    rows.push(vec![
                        i(crate::fk_catalog::fk_oid(t, k)),
                        s(name),
                        i(namespace),
                        s("f"),
                        b(fk.deferrable),
                        b(fk.initially_deferred),
                        b(true),
                        i(table_oid(t)),
                        i(0),
                        i(parent.map(|p| index_oid(p)).unwrap_or(0)),
                        i(parent.map(|p| table_oid(p)).unwrap_or(0)),
                        s(&fk.on_update.code().to_string()),
                        s(&fk.on_delete.code().to_string()),
                        s("s"),
                        b(true),
                        i4(0),
                        b(true),
                        i2_array(&crate::fk_catalog::attnums(&fk.columns)),
                        i2_array(&crate::fk_catalog::attnums(&fk.ref_columns)),
                        null_text(),
                    ]);
                }
            }
            for t in tables {
                for (k, c) in t.def().checks.iter().enumerate() {
                    let (namespace, _, name) = ns.of(&c.name);
                    rows.push(vec![
                        i(check_oid(t, k)),
                        s(name),
                        i(namespace),
                        s("c"),
                        b(false),
                        b(false),
                        b(true),
                        i(table_oid(t)),
                        i(0),
                        i(0),
                        i(0),
                        s(" "),
                        s(" "),
                        s(" "),
                        b(true),
                        i4(0),
                        b(false),
                        null_text(),
                        null_text(),
                        s(&c.expr),
                    ]);
                }
            }
            // not a partition's constraint (psql's \d asks)
            for r in &mut rows {
                r.push(i(0));
            }
            mem_table(
                &[
                    ("oid", O),
                    ("conname", T),
                    ("connamespace", O),
                    ("contype", T),
                    ("condeferrable", B),
                    ("condeferred", B),
                    ("convalidated", B),
                    ("conrelid", O),
                    ("contypid", O),
                    ("conindid", O),
                    ("confrelid", O),
                    ("confupdtype", T),
                    ("confdeltype", T),
                    ("confmatchtype", T),
                    ("conislocal", B),
                    ("coninhcount", I4),
                    ("connoinherit", B),
                    // int2[] as in PostgreSQL: pgjdbc subscripts them
                    // (`con.confkey[pos.n]`) and expands them
                    // (`information_schema._pg_expandarray(con.conkey)`)
                    ("conkey", int2_array()),
                    ("confkey", int2_array()),
                    ("conbin", T),
                    ("conparentid", O),
                ],
                rows,
            )
        }
        "pg_database" => mem_table(
            &[
                ("oid", O),
                ("datname", T),
                ("datdba", O),
                ("encoding", I4),
                ("datcollate", T),
                ("datctype", T),
                ("datistemplate", B),
                ("datallowconn", B),
                ("datconnlimit", I4),
                ("dattablespace", O),
                ("datacl", text_array()),
                ("datlocprovider", T),
                ("daticulocale", T),
            ],
            vec![vec![
                i(DATABASE_OID),
                s(database),
                i(SUPERUSER_OID),
                i4(6),
                s("C"),
                s("C"),
                b(false),
                b(true),
                i4(-1),
                i(1663),
                null_text(),
                s("c"),
                null_text(),
            ]],
        ),
        "pg_settings" => {
            let rows = crate::session::DEFAULT_SETTINGS
                .iter()
                .map(|(n, v)| {
                    vec![
                        s(n),
                        s(v),
                        null_text(),
                        s("Eddy"),
                        s(""),
                        s("user"),
                        s("string"),
                        s("default"),
                        s(v),
                        s(v),
                    ]
                })
                .collect();
            mem_table(
                &[
                    ("name", T),
                    ("setting", T),
                    ("unit", T),
                    ("category", T),
                    ("short_desc", T),
                    ("context", T),
                    ("vartype", T),
                    ("source", T),
                    ("boot_val", T),
                    ("reset_val", T),
                ],
                rows,
            )
        }
        "pg_am" => mem_table(
            &[("oid", O), ("amname", T), ("amhandler", T), ("amtype", T)],
            vec![
                vec![i(2), s("heap"), s("heap_tableam_handler"), s("t")],
                vec![i(403), s("btree"), s("bthandler"), s("i")],
            ],
        ),
        "pg_roles" | "pg_user" | "pg_authid" => mem_table(
            &[
                ("oid", O),
                ("rolname", T),
                ("usename", T),
                ("usesysid", O),
                ("rolsuper", B),
                ("usesuper", B),
                ("rolinherit", B),
                ("rolcreaterole", B),
                ("rolcreatedb", B),
                ("usecreatedb", B),
                ("rolcanlogin", B),
                ("rolreplication", B),
                ("rolconnlimit", I4),
                ("rolpassword", T),
                ("rolvaliduntil", T),
                ("rolbypassrls", B),
            ],
            current
                .roles
                .iter()
                .map(|r| {
                    let su = r.superuser;
                    vec![
                        i(r.oid),
                        s(&r.name),
                        s(&r.name),
                        i(r.oid),
                        b(su),
                        b(su),
                        b(true),
                        b(su),
                        b(su),
                        b(su),
                        b(r.login),
                        b(su),
                        i4(-1),
                        // never the verifier (PostgreSQL's pg_roles)
                        if r.password.is_some() {
                            s("********")
                        } else {
                            null_text()
                        },
                        null_text(),
                        b(su),
                    ]
                })
                .collect(),
        ),
        "pg_auth_members" => mem_table(
            &[
                ("roleid", O),
                ("member", O),
                ("grantor", O),
                ("admin_option", B),
            ],
            current
                .roles
                .iter()
                .flat_map(|m| {
                    m.member_of
                        .iter()
                        .map(|r| vec![i(current.oid_of(r)), i(m.oid), i(SUPERUSER_OID), b(false)])
                })
                .collect(),
        ),
        "pg_tables" => mem_table(
            &[
                ("schemaname", T),
                ("tablename", T),
                ("tableowner", T),
                ("tablespace", T),
                ("hasindexes", B),
                ("hasrules", B),
                ("hastriggers", B),
                ("rowsecurity", B),
            ],
            tables
                .iter()
                .map(|t| {
                    let (_, schema, name) = ns.of(&t.def().name);
                    vec![
                        s(schema),
                        s(name),
                        s(crate::privileges::owner_of(t.def())),
                        null_text(),
                        b(t.def().has_primary_key()),
                        b(false),
                        b(false),
                        b(false),
                    ]
                })
                .collect(),
        ),
        "pg_indexes" => mem_table(
            &[
                ("schemaname", T),
                ("tablename", T),
                ("indexname", T),
                ("tablespace", T),
                ("indexdef", T),
            ],
            tables
                .iter()
                .flat_map(|t| indexes_of(t).into_iter().map(move |ix| (t, ix)))
                .map(|(t, ix)| {
                    let (_, schema, table) = ns.of(&t.def().name);
                    vec![
                        s(schema),
                        s(table),
                        s(ns.of(&ix.name).2),
                        null_text(),
                        s(&ix.definition(t, &ns.names)),
                    ]
                })
                .collect(),
        ),
        "pg_proc" => mem_table(
            &[
                ("oid", O),
                ("proname", T),
                ("pronamespace", O),
                ("proowner", O),
                ("prokind", T),
                ("prorettype", O),
                ("proargtypes", T),
                ("proretset", B),
            ],
            vec![],
        ),
        // COMMENT ON TABLE (objsubid 0) and COLUMN (its attnum)
        "pg_description" => {
            // PostgreSQL's comment on its `public` schema (pg_dump writes
            // nothing for it, and `COMMENT ... IS ''` for no comment)
            let mut rows = vec![vec![
                i(NS_PUBLIC),
                i(crate::catalog_shape::relation_oid("pg_namespace").unwrap_or(2615)),
                i4(0),
                s("standard public schema"),
            ]];
            for d in schemas {
                if let Some(c) = &d.comment {
                    rows.push(vec![
                        i(schema_oid(d)),
                        i(crate::catalog_shape::relation_oid("pg_namespace").unwrap_or(2615)),
                        i4(0),
                        s(c),
                    ]);
                }
            }
            for t in tables {
                let d = t.def();
                if let Some(c) = &d.comment {
                    rows.push(vec![i(table_oid(t)), i(1259), i4(0), s(c)]);
                }
                for (n, col) in d.columns.iter().enumerate() {
                    if let Some(c) = &col.comment {
                        rows.push(vec![i(table_oid(t)), i(1259), i4(n as i32 + 1), s(c)]);
                    }
                }
            }
            mem_table(
                &[
                    ("objoid", O),
                    ("classoid", O),
                    ("objsubid", I4),
                    ("description", T),
                ],
                rows,
            )
        }
        // one row per column DEFAULT; `adbin` holds the expression's text,
        // which `pg_get_expr` returns as it is
        "pg_attrdef" => {
            let mut rows = Vec::new();
            for t in tables {
                for (n, c) in t.def().columns.iter().enumerate() {
                    if let (Some(d), None) = (&c.default, c.identity) {
                        let attnum = n as i64 + 1;
                        rows.push(vec![
                            i(crate::catalog_dependencies::attrdef_oid(t, attnum)),
                            i(table_oid(t)),
                            i2(attnum as i16),
                            s(d),
                        ]);
                    }
                }
            }
            mem_table(
                &[("oid", O), ("adrelid", O), ("adnum", I2), ("adbin", T)],
                rows,
            )
        }
        "pg_inherits" => mem_table(
            &[
                ("inhrelid", O),
                ("inhparent", O),
                ("inhseqno", I4),
                ("inhdetachpending", B),
            ],
            vec![],
        ),
        "pg_trigger" => mem_table(
            &[
                ("oid", O),
                ("tgrelid", O),
                ("tgname", T),
                ("tgenabled", T),
                ("tgisinternal", B),
                ("tgparentid", O),
            ],
            vec![],
        ),
        "pg_policy" => mem_table(
            &[
                ("oid", O),
                ("polname", T),
                ("polrelid", O),
                ("polcmd", T),
                ("polpermissive", B),
                ("polroles", T),
                ("polqual", T),
                ("polwithcheck", T),
            ],
            vec![],
        ),
        "pg_statistic_ext" => mem_table(
            &[
                ("oid", O),
                ("stxrelid", O),
                ("stxname", T),
                ("stxnamespace", O),
                ("stxkeys", T),
                ("stxkind", text_array()),
                ("stxstattarget", I4),
            ],
            vec![],
        ),
        "pg_publication" => mem_table(
            &[
                ("oid", O),
                ("pubname", T),
                ("puballtables", B),
                ("pubinsert", B),
                ("pubupdate", B),
                ("pubdelete", B),
                ("pubtruncate", B),
                ("pubviaroot", B),
            ],
            vec![],
        ),
        "pg_publication_rel" => mem_table(
            &[
                ("oid", O),
                ("prpubid", O),
                ("prrelid", O),
                ("prqual", T),
                ("prattrs", T),
            ],
            vec![],
        ),
        "pg_publication_tables" => mem_table(
            &[("pubname", T), ("schemaname", T), ("tablename", T)],
            vec![],
        ),
        "pg_rewrite" => mem_table(
            &[
                ("oid", O),
                ("rulename", T),
                ("ev_class", O),
                ("ev_type", T),
                ("is_instead", B),
                ("ev_enabled", T),
            ],
            crate::catalog_dependencies::rewrite_rows(views),
        ),
        "pg_collation" => mem_table(
            &[
                ("oid", O),
                ("collname", T),
                ("collnamespace", O),
                ("collprovider", T),
                ("collencoding", I4),
            ],
            vec![
                vec![i(100), s("default"), i(NS_PG_CATALOG), s("d"), i4(-1)],
                vec![i(950), s("C"), i(NS_PG_CATALOG), s("c"), i4(-1)],
            ],
        ),
        "pg_tablespace" => mem_table(
            &[("oid", O), ("spcname", T), ("spcowner", O)],
            vec![vec![i(1663), s("pg_default"), i(SUPERUSER_OID)]],
        ),
        "pg_extension" => mem_table(
            &[
                ("oid", O),
                ("extname", T),
                ("extowner", O),
                ("extnamespace", O),
                ("extversion", T),
            ],
            vec![],
        ),
        "pg_range" => mem_table(
            &[("rngtypid", O), ("rngsubtype", O), ("rngmultitypid", O)],
            vec![],
        ),
        "pg_enum" => mem_table(
            &[
                ("oid", O),
                ("enumtypid", O),
                ("enumsortorder", F4),
                ("enumlabel", T),
            ],
            vec![],
        ),
        "pg_views" => mem_table(
            &[
                ("schemaname", T),
                ("viewname", T),
                ("viewowner", T),
                ("definition", T),
            ],
            views
                .iter()
                .map(|v| {
                    let (_, schema, name) = ns.of(&v.name);
                    vec![
                        s(schema),
                        s(name),
                        s(v.owner
                            .as_deref()
                            .unwrap_or(crate::roles::BOOTSTRAP_SUPERUSER)),
                        s(&crate::deparse::qualified_view_query(
                            &v.query, true, &ns.names,
                        )),
                    ]
                })
                .collect(),
        ),
        "pg_matviews" => mem_table(
            &[
                ("schemaname", T),
                ("matviewname", T),
                ("matviewowner", T),
                ("definition", T),
            ],
            vec![],
        ),
        "pg_sequence" => mem_table(
            &[
                ("seqrelid", O),
                ("seqtypid", O),
                ("seqstart", I8),
                ("seqincrement", I8),
                ("seqmax", I8),
                ("seqmin", I8),
                ("seqcache", I8),
                ("seqcycle", B),
            ],
            sequences
                .iter()
                .map(|(d, _)| {
                    vec![
                        i(sequence_oid(&d.name)),
                        i(match d.type_name.as_str() {
                            "smallint" => 21,
                            "integer" => 23,
                            _ => 20,
                        }),
                        i(d.start),
                        i(d.increment),
                        i(d.max),
                        i(d.min),
                        i(d.cache),
                        b(d.cycle),
                    ]
                })
                .collect(),
        ),
        // a sequence owned by a column depends on it automatically ('a'),
        // as SERIAL and identity columns make it in PostgreSQL
        "pg_depend" => {
            let rows = crate::catalog_dependencies::dependency_rows(tables, views, sequences);
            mem_table(
                &[
                    ("classid", O),
                    ("objid", O),
                    ("objsubid", I4),
                    ("refclassid", O),
                    ("refobjid", O),
                    ("refobjsubid", I4),
                    ("deptype", T),
                ],
                rows,
            )
        }
        "pg_foreign_table" => {
            mem_table(&[("ftrelid", O), ("ftserver", O), ("ftoptions", T)], vec![])
        }
        "pg_partitioned_table" => mem_table(
            &[("partrelid", O), ("partstrat", T), ("partnatts", I2)],
            vec![],
        ),
        "pg_locks" => mem_table(
            &[
                ("locktype", T),
                ("relation", O),
                ("pid", I4),
                ("mode", T),
                ("granted", B),
            ],
            vec![],
        ),
        "pg_event_trigger" => mem_table(&[("oid", O), ("evtname", T), ("evtevent", T)], vec![]),
        // the default btree classes of the types Eddy indexes
        "pg_opclass" => mem_table(
            &[
                ("oid", O),
                ("opcname", T),
                ("opcmethod", O),
                ("opcnamespace", O),
                ("opcintype", O),
                ("opcdefault", B),
                ("opckeytype", O),
            ],
            crate::index_catalog::BTREE_OPCLASSES
                .iter()
                .map(|(o, name, ty)| {
                    vec![
                        i(i64::from(*o)),
                        s(name),
                        i(403),
                        i(NS_PG_CATALOG),
                        i(i64::from(*ty)),
                        b(true),
                        i(0),
                    ]
                })
                .collect(),
        ),
        "pg_operator" => mem_table(
            &[
                ("oid", O),
                ("oprname", T),
                ("oprnamespace", O),
                ("oprleft", O),
                ("oprright", O),
                ("oprresult", O),
            ],
            vec![],
        ),
        "pg_cast" => mem_table(
            &[
                ("oid", O),
                ("castsource", O),
                ("casttarget", O),
                ("castfunc", O),
                ("castcontext", T),
                ("castmethod", T),
            ],
            vec![],
        ),
        other => Err(DataFusionError::Plan(format!("table '{other}' not found"))),
    }
}

// ---------------------------------------------------------------------------
// functions

type PgFnImpl = dyn Fn(&[ScalarValue]) -> ScalarValue + Send + Sync;

/// A PostgreSQL function emulated row by row on scalars (catalog helpers:
/// tiny inputs, so simplicity beats vectorisation).
struct PgFunction {
    name: String,
    ret: DataType,
    signature: Signature,
    f: Arc<PgFnImpl>,
}

impl std::fmt::Debug for PgFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgFunction({})", self.name)
    }
}

impl PartialEq for PgFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl Eq for PgFunction {}
impl std::hash::Hash for PgFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl ScalarUDFImpl for PgFunction {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(self.ret.clone())
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let n = args.number_rows;
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        if all_scalar {
            let vals: Vec<ScalarValue> = args
                .args
                .iter()
                .map(|a| match a {
                    ColumnarValue::Scalar(s) => s.clone(),
                    ColumnarValue::Array(_) => ScalarValue::Null,
                })
                .collect();
            let out = (self.f)(&vals).cast_to(&self.ret)?;
            return Ok(ColumnarValue::Scalar(out));
        }
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.clone().into_array(n))
            .collect::<datafusion::error::Result<_>>()?;
        let mut out = Vec::with_capacity(n);
        for row in 0..n {
            let vals: Vec<ScalarValue> = arrays
                .iter()
                .map(|a| ScalarValue::try_from_array(a, row))
                .collect::<datafusion::error::Result<_>>()?;
            out.push((self.f)(&vals).cast_to(&self.ret)?);
        }
        if out.is_empty() {
            return Ok(ColumnarValue::Array(
                datafusion::arrow::array::new_empty_array(&self.ret),
            ));
        }
        Ok(ColumnarValue::Array(ScalarValue::iter_to_array(out)?))
    }
}

fn arg_i64(v: &[ScalarValue], idx: usize) -> Option<i64> {
    match v.get(idx)? {
        ScalarValue::Int64(x) => *x,
        ScalarValue::Int32(x) => x.map(|x| x as i64),
        ScalarValue::Int16(x) => x.map(|x| x as i64),
        ScalarValue::UInt32(x) => x.map(|x| x as i64),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::Utf8View(Some(s))
        | ScalarValue::LargeUtf8(Some(s)) => s.trim().parse().ok(),
        _ => None,
    }
}

fn arg_str(v: &[ScalarValue], idx: usize) -> Option<String> {
    match v.get(idx)? {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::Utf8View(Some(s))
        | ScalarValue::LargeUtf8(Some(s)) => Some(s.clone()),
        x if x.is_null() => None,
        x => Some(x.to_string()),
    }
}

/// The OID of a type named by its first argument (or given as a number).
fn regtype_oid(v: &[ScalarValue]) -> ScalarValue {
    let Some(name) = arg_str(v, 0) else {
        return S::Int64(None);
    };
    if let Ok(n) = name.trim().parse::<i64>() {
        return i(n);
    }
    let n = name.trim().to_ascii_lowercase();
    PG_TYPES
        .iter()
        .find(|t| t.1 == n)
        .map(|t| i(t.0 as i64))
        .unwrap_or(S::Int64(None))
}

fn any_arity() -> Signature {
    Signature::one_of(
        vec![
            TypeSignature::Nullary,
            TypeSignature::Any(1),
            TypeSignature::Any(2),
            TypeSignature::Any(3),
        ],
        Volatility::Stable,
    )
}

fn udf(
    name: &str,
    ret: DataType,
    f: impl Fn(&[ScalarValue]) -> ScalarValue + Send + Sync + 'static,
) -> ScalarUDF {
    ScalarUDF::new_from_impl(PgFunction {
        name: name.to_string(),
        ret,
        signature: any_arity(),
        f: Arc::new(f),
    })
}

/// Functions that exist only when the server was started with
/// `EDDY_FAULT_INJECTION=1`, for the tests that prove a bug costs one
/// statement and not the server: `eddy_fault_panic(text)` panics with its
/// argument where it is evaluated.
pub fn fault_injection_functions() -> Vec<ScalarUDF> {
    if std::env::var("EDDY_FAULT_INJECTION").as_deref() != Ok("1") {
        return Vec::new();
    }
    vec![udf("eddy_fault_panic", T, |v| {
        let message = match v.first() {
            Some(ScalarValue::Utf8(Some(m))) => m.clone(),
            _ => "eddy_fault_panic".to_string(),
        };
        panic!("{message}")
    })]
}

/// PostgreSQL's `pg_size_pretty`: bytes below 10 kB, then the largest unit
/// that keeps the number below 20480, rounded half up.
fn size_pretty(size: i64) -> String {
    const LIMIT: i64 = 10 * 1024;
    const LIMIT2: i64 = LIMIT * 2 - 1;
    let half_rounded = |x: i64| (x + if x < 0 { -1 } else { 1 }) / 2;
    if size.abs() < LIMIT {
        return format!("{size} bytes");
    }
    // one extra bit kept for the rounding
    let mut v = size >> 9;
    for unit in ["kB", "MB", "GB", "TB"] {
        if v.abs() < LIMIT2 {
            return format!("{} {unit}", half_rounded(v));
        }
        v >>= 10;
    }
    format!("{} PB", half_rounded(v))
}

/// `pg_typeof(any)`: the type of its argument, named as PostgreSQL's
/// `regtype` prints it (`integer`, `numeric`, `character varying`).
pub fn pg_typeof() -> ScalarUDF {
    #[derive(Debug, PartialEq, Eq, Hash)]
    struct PgTypeof {
        signature: Signature,
    }
    impl ScalarUDFImpl for PgTypeof {
        fn name(&self) -> &str {
            "pg_typeof"
        }
        fn signature(&self) -> &Signature {
            &self.signature
        }
        fn return_type(&self, _arg_types: &[DataType]) -> datafusion::error::Result<DataType> {
            Ok(DataType::Utf8)
        }
        fn invoke_with_args(
            &self,
            args: ScalarFunctionArgs,
        ) -> datafusion::error::Result<ColumnarValue> {
            let name = args
                .arg_fields
                .first()
                .and_then(|f| format_type(i64::from(crate::pgtypes::field_oid(f)), -1))
                .unwrap_or_else(|| "unknown".into());
            Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))))
        }
    }
    ScalarUDF::new_from_impl(PgTypeof {
        signature: Signature::any(1, Volatility::Stable),
    })
}

/// `current_setting` calls the session could not bind to a value (see
/// `Session::bind_current_settings`): an unknown setting is 42704 (NULL
/// with `missing_ok`), a name computed per row is refused (0A000).
pub fn current_setting_fallback() -> ScalarUDF {
    #[derive(Debug, PartialEq, Eq, Hash)]
    struct CurrentSetting {
        signature: Signature,
    }
    impl ScalarUDFImpl for CurrentSetting {
        fn name(&self) -> &str {
            "current_setting"
        }
        fn signature(&self) -> &Signature {
            &self.signature
        }
        fn return_type(&self, _arg_types: &[DataType]) -> datafusion::error::Result<DataType> {
            Ok(DataType::Utf8)
        }
        fn invoke_with_args(
            &self,
            args: ScalarFunctionArgs,
        ) -> datafusion::error::Result<ColumnarValue> {
            let missing_ok = matches!(
                args.args.get(1),
                Some(ColumnarValue::Scalar(ScalarValue::Boolean(Some(true))))
            );
            let err = |e: SqlError| Err(DataFusionError::External(Box::new(e)));
            match args.args.first() {
                Some(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name)))) => {
                    if missing_ok {
                        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None)))
                    } else {
                        err(SqlError::UnknownSetting(name.clone()))
                    }
                }
                _ => err(SqlError::FeatureNotSupported(
                    "current_setting needs a constant setting name".into(),
                )),
            }
        }
    }
    ScalarUDF::new_from_impl(CurrentSetting {
        signature: Signature::one_of(
            vec![TypeSignature::Any(1), TypeSignature::Any(2)],
            Volatility::Stable,
        ),
    })
}

/// `has_table_privilege` (tables, views, sequences),
/// `has_sequence_privilege`, `has_schema_privilege` and `pg_get_userbyid`,
/// answered from the roles and each relation's owner and grants
/// (`crate::privileges`). A table is named by text or by oid; a user by
/// name (the session's user when left out).
fn privilege_functions(
    engine: Arc<Engine>,
    sequences: Arc<Sequences>,
    roles: Arc<crate::roles::Roles>,
    user: &str,
) -> Vec<ScalarUDF> {
    fn text(v: &ScalarValue) -> Option<String> {
        match v {
            ScalarValue::Utf8(Some(x))
            | ScalarValue::LargeUtf8(Some(x))
            | ScalarValue::Utf8View(Some(x)) => Some(x.clone()),
            _ => None,
        }
    }
    fn int(v: &ScalarValue) -> Option<i64> {
        match v {
            ScalarValue::Int64(Some(x)) => Some(*x),
            ScalarValue::Int32(Some(x)) => Some(i64::from(*x)),
            ScalarValue::Int16(Some(x)) => Some(i64::from(*x)),
            ScalarValue::UInt32(Some(x)) => Some(i64::from(*x)),
            ScalarValue::UInt64(Some(x)) => i64::try_from(*x).ok(),
            _ => None,
        }
    }
    /// The (user, object, privileges) of a 2- or 3-argument call.
    fn split(v: &[ScalarValue], me: &str) -> Option<(String, ScalarValue, String)> {
        match v {
            [obj, p] => Some((me.to_string(), obj.clone(), text(p)?)),
            [u, obj, p] => Some((text(u)?, obj.clone(), text(p)?)),
            _ => None,
        }
    }
    type Named = &'static [(eddy_common::TablePrivileges, char, &'static str)];
    /// The owner, grants and privilege names of the relation `obj` names
    /// (text or oid): a table or view, or a sequence (`sequences`).
    fn relation(
        e: &Engine,
        seqs: &Sequences,
        obj: &ScalarValue,
        tables: bool,
    ) -> Option<(String, Vec<eddy_common::AclItem>, Named)> {
        let name = match (text(obj), int(obj)) {
            (Some(name), _) => crate::sequences::resolve_name(&name)
                .ok()
                .unwrap_or_else(|| name.strip_prefix("public.").unwrap_or(&name).to_string()),
            (None, Some(oid)) => e
                .tables()
                .into_iter()
                .find(|t| table_oid(t) == oid)
                .map(|t| t.def().name.clone())
                .or_else(|| {
                    e.views()
                        .into_iter()
                        .find(|v| view_oid(v) == oid)
                        .map(|v| v.name)
                })
                .or_else(|| seqs.names().into_iter().find(|n| sequence_oid(n) == oid))?,
            _ => return None,
        };
        let named = &eddy_common::TablePrivileges::NAMED;
        if tables {
            if let Some(t) = e.table(&name) {
                let d = t.def();
                return Some((
                    crate::privileges::owner_of(d).to_string(),
                    d.acl.clone(),
                    named,
                ));
            }
            if let Some(v) = e.view(&name) {
                return Some((crate::privileges::view_owner(&v).to_string(), v.acl, named));
            }
        }
        let d = seqs.def(&name)?;
        let owner = d
            .owner
            .unwrap_or_else(|| crate::roles::BOOTSTRAP_SUPERUSER.to_string());
        Some((owner, d.acl, &eddy_common::TablePrivileges::SEQUENCE_NAMED))
    }
    /// `has_table_privilege` (`tables`) or `has_sequence_privilege`.
    fn has_privilege(
        e: &Engine,
        seqs: &Sequences,
        r: &crate::roles::Roles,
        me: &str,
        v: &[ScalarValue],
        tables: bool,
    ) -> ScalarValue {
        let Some((who, obj, privs)) = split(v, me) else {
            return ScalarValue::Boolean(None);
        };
        let Some((owner, acl, named)) = relation(e, seqs, &obj, tables) else {
            return ScalarValue::Boolean(None);
        };
        if r.privileges_of(&who).superuser {
            return b(true);
        }
        let all = eddy_common::TablePrivileges::all_of(named);
        let held =
            crate::privileges::relation_privileges(&r.effective_roles(&who), &owner, &acl, all);
        let any = privs.split(',').any(|p| {
            let p = p.trim().to_ascii_uppercase();
            let p = p.strip_suffix(" WITH GRANT OPTION").unwrap_or(&p);
            named
                .iter()
                .any(|(bit, _, kw)| *kw == p && held.contains(*bit))
        });
        b(any)
    }
    let (e, r, me, q) = (
        Arc::clone(&engine),
        Arc::clone(&roles),
        user.to_string(),
        Arc::clone(&sequences),
    );
    let table_fn = move |v: &[ScalarValue]| has_privilege(&e, &q, &r, &me, v, true);
    let (e5, r5, me5, q5) = (
        Arc::clone(&engine),
        Arc::clone(&roles),
        user.to_string(),
        sequences,
    );
    let sequence_fn = move |v: &[ScalarValue]| has_privilege(&e5, &q5, &r5, &me5, v, false);
    let (r2, me2, e2) = (Arc::clone(&roles), user.to_string(), Arc::clone(&engine));
    let schema_fn = move |v: &[ScalarValue]| {
        let Some((who, schema, privs)) = split(v, &me2) else {
            return ScalarValue::Boolean(None);
        };
        // a user schema: its owner and grants (`crate::schemas`)
        let user_schema = e2.schemas().into_iter().find(|d| {
            text(&schema).is_some_and(|n| n == d.name) || int(&schema) == Some(schema_oid(d))
        });
        let held = user_schema.map(|d| {
            crate::schemas::held_privileges(
                &d,
                r2.privileges_of(&who).superuser,
                &r2.effective_roles(&who),
            )
        });
        let any = privs
            .split(',')
            .any(|p| match (p.trim().to_ascii_uppercase().as_str(), &held) {
                ("USAGE", Some(h)) => h.contains('U'),
                ("CREATE", Some(h)) => h.contains('C'),
                ("USAGE", None) => true,
                ("CREATE", None) => {
                    r2.privileges_of(&who).superuser || r2.may_create_in_public(&who)
                }
                _ => false,
            });
        b(any)
    };
    let r3 = Arc::clone(&roles);
    let userbyid = move |v: &[ScalarValue]| {
        let oid = arg_i64(v, 0).unwrap_or(0);
        match r3.list().into_iter().find(|x| x.oid == oid) {
            Some(role) => s(&role.name),
            None => s(&format!("unknown (OID={oid})")),
        }
    };
    let r4 = Arc::clone(&roles);
    let acl_default = move |v: &[ScalarValue]| {
        let (Some(kind), Some(owner)) = (arg_str(v, 0), arg_i64(v, 1)) else {
            return ScalarValue::new_null_list(DataType::Utf8, true, 1);
        };
        let owner = r4
            .list()
            .into_iter()
            .find(|x| x.oid == owner)
            .map(|role| role.name)
            .unwrap_or_else(|| owner.to_string());
        match default_acl(&kind, &owner) {
            Some(items) => text_list(&items),
            None => ScalarValue::new_null_list(DataType::Utf8, true, 1),
        }
    };
    vec![
        udf("has_table_privilege", B, table_fn),
        udf("has_sequence_privilege", B, sequence_fn),
        udf("has_schema_privilege", B, schema_fn),
        udf("pg_get_userbyid", T, userbyid),
        udf("acldefault", text_array(), acl_default),
    ]
}

/// `acldefault(kind, owner)`: the privileges an object of `kind` (the
/// one-letter code PostgreSQL's `acldefault` takes) has while its ACL is
/// NULL, as `aclitem` text, PostgreSQL's items in its order. pg_dump
/// compares each ACL with it to write GRANT and REVOKE. `None` for a code
/// PostgreSQL does not have.
fn default_acl(kind: &str, owner: &str) -> Option<Vec<String>> {
    let owner_has = |privileges: &str| format!("{owner}={privileges}/{owner}");
    let public_has = |privileges: &str| format!("={privileges}/{owner}");
    Some(match kind {
        "c" | "p" => Vec::new(),
        "r" => vec![owner_has("arwdDxt")],
        "s" => vec![owner_has("rwU")],
        "d" => vec![public_has("Tc"), owner_has("CTc")],
        "f" => vec![public_has("X"), owner_has("X")],
        "l" | "T" => vec![public_has("U"), owner_has("U")],
        "L" => vec![owner_has("rw")],
        "n" => vec![owner_has("UC")],
        "t" => vec![owner_has("C")],
        "F" | "S" => vec![owner_has("U")],
        _ => return None,
    })
}

/// The oid `::regclass` gives `name`: an oid's digits as they are, else
/// the catalog relation, table, view, index or sequence of that name.
fn relation_oid(engine: &Engine, sequences: &Sequences, name: &str) -> Option<i64> {
    if let Ok(n) = name.trim().parse::<i64>() {
        return Some(n);
    }
    if let Some(o) = catalog_relation_oid(name) {
        return Some(o);
    }
    // a user schema's relation (`app.t`: storage name `app.t`)
    let resolved = crate::sequences::resolve_name(name).ok();
    if let Some(storage) = resolved
        .as_deref()
        .filter(|n| crate::schemas::split(n, &schema_names(engine)).0 != crate::schemas::PUBLIC)
    {
        if let Some(oid) = relation_named(engine, &[storage])
            .or_else(|| sequences.exists(storage).then(|| sequence_oid(storage)))
        {
            return Some(oid);
        }
    }
    let bare = name
        .trim()
        .trim_start_matches("public.")
        .trim_matches('"')
        .to_string();
    let lower = bare.to_lowercase();
    relation_named(engine, &[&bare, &lower]).or_else(|| {
        resolved
            .filter(|n| sequences.exists(n))
            .map(|n| sequence_oid(&n))
    })
}

/// The OID of the table, else view, else index (`'t_pkey'::regclass`,
/// pgjdbc and psql name them) that has one of `names`, the first name
/// first within each kind.
fn relation_named(engine: &Engine, names: &[&str]) -> Option<i64> {
    names
        .iter()
        .find_map(|n| engine.table(n).map(|t| table_oid(&t)))
        .or_else(|| {
            names
                .iter()
                .find_map(|n| engine.view(n).map(|v| view_oid(&v)))
        })
        .or_else(|| {
            engine.tables().iter().find_map(|t| {
                let ixs = indexes_of(t);
                names
                    .iter()
                    .find_map(|n| ixs.iter().find(|ix| ix.name == *n).map(|ix| ix.oid))
            })
        })
}

/// The OID `::regnamespace` gives `name`: an oid's digits as they are,
/// else the schema of that name (quoted or not), if Eddy has it.
fn namespace_oid(engine: &Engine, name: &str) -> Option<i64> {
    let name = name.trim();
    if let Ok(n) = name.parse::<i64>() {
        return Some(n);
    }
    let bare = match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        Some(quoted) => quoted.to_string(),
        None => name.to_ascii_lowercase(),
    };
    match bare.as_str() {
        "pg_catalog" => Some(NS_PG_CATALOG),
        "public" => Some(NS_PUBLIC),
        "information_schema" => Some(NS_INFORMATION_SCHEMA),
        _ => engine
            .schemas()
            .iter()
            .find(|s| s.name == bare)
            .map(schema_oid),
    }
}

/// The name PostgreSQL prints for relation `oid` as a regclass: the
/// relation's name, or the oid's digits where no relation has it.
fn relation_name(engine: &Engine, sequences: &Sequences, oid: i64) -> String {
    if let Some(name) = crate::catalog_shape::relation_name(oid) {
        return name.to_string();
    }
    let tables = engine.tables();
    tables
        .iter()
        .find(|t| table_oid(t) == oid)
        .map(|t| crate::temp_tables::shown_name(&t.def().name).to_string())
        .or_else(|| {
            engine
                .views()
                .into_iter()
                .find(|v| view_oid(v) == oid)
                .map(|v| v.name)
        })
        .or_else(|| {
            tables.iter().find_map(|t| {
                indexes_of(t)
                    .into_iter()
                    .find(|ix| ix.oid == oid)
                    .map(|ix| ix.name)
            })
        })
        .or_else(|| {
            sequences
                .names()
                .into_iter()
                .find(|n| sequence_oid(n) == oid)
        })
        .unwrap_or_else(|| oid.to_string())
}

/// Everything `version()` and `server_version` report.
pub const SERVER_VERSION: &str = "15.0";

/// The search path's existing schemas, in order, as the session last
/// computed them (before each statement, from `search_path`): what
/// `current_schema()`, `current_schemas()` and `pg_table_is_visible`
/// report, and whether definitions print `public`'s names qualified.
pub type PathState = Arc<parking_lot::RwLock<Vec<String>>>;

/// Whether `public` is on the search path of `path`.
fn public_on(path: &PathState) -> bool {
    path.read().iter().any(|s| s == crate::schemas::PUBLIC)
}

/// The user schemas' names.
fn schema_names(engine: &Engine) -> Vec<String> {
    engine
        .schemas_shared()
        .iter()
        .map(|s| s.name.clone())
        .collect()
}

/// `current_schema()` and `current_schemas(implicit)` of a session whose
/// search path is `path`: NULL and `{}` under pg_dump's empty path;
/// `pg_table_is_visible` (whether a relation's schema is on the path).
///
/// Also the functions whose text names relations, which PostgreSQL
/// qualifies where their schema is not on the path (`public` not on it,
/// or a user schema: `crate::catalog_dependencies`): `pg_get_viewdef` (a
/// view's definition by OID or name: the parser's text of its query, not
/// PostgreSQL's deparsed one), `pg_get_expr` (`pg_attrdef.adbin` is the
/// default's text already) and `pg_get_constraintdef`.
pub fn search_path_functions(
    path: PathState,
    engine: Arc<Engine>,
    sequences: Arc<Sequences>,
    block: DroppedInBlock,
) -> [ScalarUDF; 6] {
    let (path1, path2, path3, path4, path5) = (
        Arc::clone(&path),
        Arc::clone(&path),
        Arc::clone(&path),
        Arc::clone(&path),
        Arc::clone(&path),
    );
    let constraint_engine = Arc::clone(&engine);
    let (default_engine, visible_engine) = (Arc::clone(&engine), Arc::clone(&engine));
    [
        udf("pg_get_constraintdef", T, move |v| {
            let o = arg_i64(v, 0);
            let tables = constraint_engine.tables();
            let check = tables.iter().find_map(|t| {
                t.def()
                    .checks
                    .iter()
                    .enumerate()
                    .find(|(k, _)| Some(check_oid(t, *k)) == o)
                    .map(|(_, c)| crate::deparse::check_definition(&c.expr))
            });
            let fk = check.or_else(|| {
                tables.iter().find_map(|t| {
                    let (_, fk) = t
                        .def()
                        .foreign_keys
                        .iter()
                        .enumerate()
                        .find(|(k, _)| Some(crate::fk_catalog::fk_oid(t, *k)) == o)?;
                    let parent = tables.iter().find(|p| p.def().id == fk.ref_table)?;
                    Some(crate::fk_catalog::definition(
                        t.def(),
                        fk,
                        parent.def(),
                        public_on(&path4),
                        &schema_names(&constraint_engine),
                    ))
                })
            });
            if let Some(def) = fk {
                return s(&def);
            }
            tables
                .iter()
                .find_map(|t| {
                    indexes_of(t)
                        .into_iter()
                        .find(|ix| ix.constraint && Some(ix.oid) == o)
                        .map(|ix| ix.constraint_definition(t))
                })
                .map(|d| s(&d))
                .unwrap_or(null_text())
        }),
        udf("pg_get_expr", T, move |v| {
            arg_str(v, 0)
                .map(|e| {
                    s(&crate::deparse::qualified_default(
                        &e,
                        public_on(&path2),
                        &schema_names(&default_engine),
                    ))
                })
                .unwrap_or(null_text())
        }),
        udf("pg_get_viewdef", T, move |v| {
            let by_oid = arg_i64(v, 0);
            let by_name = arg_str(v, 0);
            let schemas = schema_names(&engine);
            // the session's own uncommitted views too (`BlockCatalog`)
            block
                .read()
                .views_over(engine.views())
                .into_iter()
                .find(|d| Some(view_oid(d)) == by_oid || by_name.as_deref() == Some(&d.name))
                .map(|d| {
                    s(&crate::deparse::qualified_view_query(
                        &d.query,
                        public_on(&path3),
                        &schemas,
                    ))
                })
                .unwrap_or(null_text())
        }),
        udf("current_schema", DataType::Utf8, move |_| {
            path1.read().first().map_or(null_text(), |p| s(p))
        }),
        // the search path as a name[]; with `true`, pg_catalog first, as
        // PostgreSQL puts it (pgjdbc's getSchemas and getTypeInfo read it)
        udf("current_schemas", text_array(), move |v| {
            let implicit = matches!(v.first(), Some(ScalarValue::Boolean(Some(true))));
            let mut names = Vec::new();
            if implicit {
                names.push(s("pg_catalog"));
            }
            names.extend(path.read().iter().map(|p| s(p)));
            ScalarValue::List(ScalarValue::new_list_nullable(&names, &DataType::Utf8))
        }),
        // a relation is visible where its schema is on the path (catalog
        // relations always are: pg_catalog is searched first)
        udf("pg_table_is_visible", B, move |v| {
            let Some(oid) = arg_i64(v, 0) else {
                return ScalarValue::Boolean(None);
            };
            if crate::catalog_shape::relation_name(oid).is_some() || oid < 16_384 {
                return b(true);
            }
            let name = relation_name(&visible_engine, &sequences, oid);
            let schemas = schema_names(&visible_engine);
            let (schema, _) = crate::schemas::split(&name, &schemas);
            b(path5.read().iter().any(|p| p == schema))
        }),
    ]
}

/// The PostgreSQL functions Eddy emulates, for a session of `user` on `database`.
pub fn pg_functions(
    engine: Arc<Engine>,
    sequences: Arc<Sequences>,
    database: &str,
    user: &str,
    backend_pid: i32,
    roles: Arc<crate::roles::Roles>,
    started_at: &str,
) -> Vec<ScalarUDF> {
    let started_at = started_at.to_string();
    let privilege_functions =
        privilege_functions(Arc::clone(&engine), Arc::clone(&sequences), roles, user);
    let db = database.to_string();
    let usr = user.to_string();
    let usr2 = user.to_string();
    let eng = Arc::clone(&engine);
    let eng3 = Arc::clone(&engine);
    let eng4 = Arc::clone(&engine);
    let serial_sequences = Arc::clone(&sequences);
    let eng5 = Arc::clone(&engine);
    let eng6 = Arc::clone(&engine);
    let eng8 = Arc::clone(&engine);
    let eng9 = Arc::clone(&engine);
    let sequences2 = Arc::clone(&sequences);
    vec![
        // the sequence a SERIAL or identity column draws from
        udf("pg_get_serial_sequence", T, move |v| {
            let (Some(table), Some(column)) = (arg_str(v, 0), arg_str(v, 1)) else {
                return null_text();
            };
            let Ok(table) = crate::sequences::resolve_name(&table) else {
                return null_text();
            };
            // the sequence the column owns (SERIAL, identity, OWNED BY),
            // whatever its default says, as PostgreSQL finds it
            eng4.table(&table)
                .filter(|t| t.def().column_index(&column).is_some())
                .and_then(|_| {
                    serial_sequences
                        .owned_by_column(&table, &column)
                        .into_iter()
                        .next()
                })
                .map(|seq| {
                    let schemas = schema_names(&eng4);
                    s(&crate::schemas::qualified_text(&seq, &schemas, false))
                })
                .unwrap_or(null_text())
        }),
        udf("version", T, |_| {
            s(&format!(
                "PostgreSQL {SERVER_VERSION} (Eddy {}) on x86_64-pc-linux-gnu, compiled by rustc, 64-bit",
                env!("CARGO_PKG_VERSION")
            ))
        }),
        udf("current_database", T, move |_| s(&db)),
        udf("current_user", T, move |_| s(&usr)),
        udf("session_user", T, move |_| s(&usr2)),
        udf("pg_backend_pid", I4, move |_| i4(backend_pid)),
        // Eddy has no partitions, and `pg_partition_ancestors` lists no
        // row for a relation that is not a partition (nor partitioned):
        // the list the rewritten call unnests is empty
        // (`crate::srf_rewrite`)
        udf(crate::srf_rewrite::PARTITION_ANCESTORS_LIST, int8_array(), |_| {
            int8_list(Vec::new())
        }),
        // `pg_trigger` has no rows (Eddy has no user triggers): no oid
        // ever reaches this, but psql's `\d` names it in its query
        udf("pg_get_triggerdef", T, |_| null_text()),
        udf("pg_type_is_visible", B, |_| b(true)),
        udf("pg_function_is_visible", B, |_| b(true)),
        udf("has_database_privilege", B, |_| b(true)),
        udf("pg_encoding_to_char", T, |_| s("UTF8")),
        udf("format_type", T, |v| match arg_i64(v, 0) {
            Some(o) => format_type(o, arg_i64(v, 1).unwrap_or(-1))
                .map(|x| s(&x))
                .unwrap_or(null_text()),
            None => null_text(),
        }),
        // pg_attrdef.adbin is the expression's text already
        // pg_proc holds no user functions: nothing to describe
        udf("pg_get_function_result", T, |_| null_text()),
        udf("pg_get_function_arguments", T, |_| null_text()),
        udf("pg_get_partkeydef", T, |_| null_text()),
        udf("pg_get_statisticsobjdef_columns", T, |_| null_text()),
        udf("pg_size_pretty", T, |v| match arg_i64(v, 0) {
            Some(n) => s(&size_pretty(n)),
            None => null_text(),
        }),
        // comments of tables (other objects have none)
        udf("obj_description", T, move |v| {
            let o = arg_i64(v, 0);
            // a user schema's comment (`obj_description(oid, 'pg_namespace')`)
            if arg_str(v, 1).is_none_or(|c| c == "pg_namespace") {
                if o == Some(NS_PUBLIC) {
                    // as `pg_description` has it
                    return s("standard public schema");
                }
                if let Some(d) = eng5.schemas().into_iter().find(|d| Some(schema_oid(d)) == o) {
                    return d.comment.map_or(null_text(), |c| s(&c));
                }
            }
            eng5.tables()
                .iter()
                .find(|t| Some(table_oid(t)) == o)
                .and_then(|t| t.def().comment.clone())
                .map(|c| s(&c))
                .unwrap_or(null_text())
        }),
        udf("col_description", T, move |v| {
            let (o, attnum) = (arg_i64(v, 0), arg_i64(v, 1));
            eng6.tables()
                .iter()
                .find(|t| Some(table_oid(t)) == o)
                .and_then(|t| {
                    let def = t.def();
                    let idx = usize::try_from(attnum?.checked_sub(1)?).ok()?;
                    def.columns.get(idx).and_then(|c| c.comment.clone())
                })
                .map(|c| s(&c))
                .unwrap_or(null_text())
        }),
        udf("shobj_description", T, |_| null_text()),
        udf("pg_tablespace_location", T, |_| s("")),
        // `pg_get_indexdef(oid)`, or with a column number above 0 that
        // column's name alone (pgjdbc's getIndexInfo asks so)
        udf("pg_get_indexdef", T, move |v| {
            let o = arg_i64(v, 0);
            let column = if v.len() > 1 { arg_i64(v, 1) } else { Some(0) };
            let Some(column) = column else {
                return null_text();
            };
            eng.tables()
                .iter()
                .find_map(|t| {
                    let ix = indexes_of(t).into_iter().find(|ix| Some(ix.oid) == o)?;
                    if column == 0 {
                        return Some(ix.definition(t, &schema_names(&eng)));
                    }
                    let k = usize::try_from(column.checked_sub(1)?).ok()?;
                    let c = *ix.columns.get(k)?;
                    t.def()
                        .columns
                        .get(c)
                        .map(|c| crate::fk_catalog::ident(&c.name))
                })
                .map(|d| s(&d))
                .unwrap_or(null_text())
        }),
        udf("eddy_regclass", I8, move |v| match arg_str(v, 0) {
            Some(name) => relation_oid(&eng3, &sequences, &name).map_or(S::Int64(None), i),
            None => S::Int64(None),
        }),
        // `'public'::regnamespace`: a schema's OID (digits as they are)
        udf("eddy_regnamespace", I8, move |v| match arg_str(v, 0) {
            Some(name) => namespace_oid(&eng9, &name).map_or(S::Int64(None), i),
            None => S::Int64(None),
        }),
        // a regclass as PostgreSQL prints it: the relation's name
        // (`crate::rewrite`, for a regclass in a query's result columns)
        udf("eddy_regclass_name", T, move |v| {
            let Some(arg) = arg_str(v, 0) else {
                return null_text();
            };
            match relation_oid(&eng8, &sequences2, &arg) {
                Some(o) => s(&relation_name(&eng8, &sequences2, o)),
                None => null_text(),
            }
        }),
        udf("eddy_regtype", I8, regtype_oid),
        // a regtype as PostgreSQL prints it (`crate::rewrite`): the type's
        // name, `-` for 0, the number for an OID that names no type
        udf("eddy_regtype_name", T, |v| match regtype_oid(v) {
            S::Int64(Some(0)) => s("-"),
            // (705 is the type `unknown` itself)
            S::Int64(Some(o)) => match format_type(o, -1) {
                Some(name) if name != "unknown" || o == 705 => s(&name),
                _ => s(&o.to_string()),
            },
            _ => null_text(),
        }),
        // PostgreSQL's to_regtype: the type's OID, NULL when there is none
        // (psycopg's TypeInfo.fetch, SQLAlchemy's dialect start-up)
        udf("to_regtype", I8, regtype_oid),
        udf("pg_postmaster_start_time", T, move |_| s(&started_at)),
        udf("pg_is_in_recovery", B, |_| b(false)),
    ]
    .into_iter()
    .chain(privilege_functions)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_as_postgres_prints_them() {
        assert_eq!(size_pretty(8192), "8192 bytes");
        assert_eq!(size_pretty(10240), "10 kB");
        assert_eq!(size_pretty(1_000_000), "977 kB");
        assert_eq!(size_pretty(123_456_789), "118 MB");
        assert_eq!(size_pretty(-20_000), "-20 kB");
    }

    #[test]
    fn format_type_prints_postgres_names() {
        assert_eq!(format_type(23, -1).as_deref(), Some("integer"));
        assert_eq!(
            format_type(1700, ((12 << 16) | 2) + 4).as_deref(),
            Some("numeric(12,2)")
        );
        assert_eq!(format_type(1007, -1).as_deref(), Some("integer[]"));
        assert_eq!(
            format_type(1015, 14).as_deref(),
            Some("character varying(10)[]")
        );
    }
}
