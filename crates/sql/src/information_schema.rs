//! `information_schema` as PostgreSQL 15 presents it, over the engine's
//! tables: `tables`, `columns`, `schemata`, `views`, `table_constraints`,
//! `key_column_usage`. DataFusion's own information_schema describes
//! columns by Arrow type (`Int32`, `Utf8`, `Decimal128(18, 4)`), which no
//! PostgreSQL tool understands; this one uses PostgreSQL's type names,
//! `udt_name`s, lengths, precisions and scales.
//!
//! Like `pg_catalog` (`catalog.rs`), each view is built when a query looks
//! it up, from the engine's tables at that moment.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::common::ScalarValue;
use eddy_common::{ArrayElem, ColumnType, TableDef};
use eddy_storage::Engine;

use crate::catalog::mem_table;

/// The views this schema has.
const VIEWS: &[&str] = &[
    "tables",
    "columns",
    "schemata",
    "views",
    "table_constraints",
    "key_column_usage",
    "referential_constraints",
];

/// The `information_schema` schema of one database.
pub struct InformationSchema {
    engine: Arc<Engine>,
    database: String,
    /// What the session's open block dropped (not shown).
    dropped: crate::catalog::DroppedInBlock,
}

impl std::fmt::Debug for InformationSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformationSchema")
            .field("database", &self.database)
            .finish()
    }
}

impl InformationSchema {
    pub fn new(engine: Arc<Engine>, database: &str) -> InformationSchema {
        InformationSchema {
            engine,
            database: database.to_string(),
            dropped: Default::default(),
        }
    }

    /// Leaves out what the session's open block has dropped.
    pub fn with_dropped_in_block(mut self, dropped: crate::catalog::DroppedInBlock) -> Self {
        self.dropped = dropped;
        self
    }
}

#[async_trait]
impl SchemaProvider for InformationSchema {
    fn table_names(&self) -> Vec<String> {
        VIEWS.iter().map(|s| s.to_string()).collect()
    }

    async fn table(&self, name: &str) -> datafusion::error::Result<Option<Arc<dyn TableProvider>>> {
        if !VIEWS.contains(&name) {
            return Ok(None);
        }
        let block = self.dropped.read().clone();
        let dropped = &block.dropped;
        let mut defs: Vec<Arc<TableDef>> = self
            .engine
            .tables()
            .iter()
            .map(|t| t.def().clone())
            // temporary tables are their sessions' own (`crate::temp_tables`)
            .filter(|d| !crate::temp_tables::is_reserved(&d.name))
            // nor a table its block is dropping
            .filter(|d| !crate::session::is_going_away(&d.name))
            .filter(|d| !dropped.contains(&d.name))
            .collect();
        defs.sort_by(|a, b| a.name.cmp(&b.name));
        let mut views = block.views_over(self.engine.views());
        views.sort_by(|a, b| a.name.cmp(&b.name));
        let schemas = block.schemas_over(self.engine.schemas());
        Ok(Some(Arc::new(build(
            name,
            &defs,
            &views,
            &schemas,
            &self.database,
        )?)))
    }

    fn table_exist(&self, name: &str) -> bool {
        VIEWS.contains(&name)
    }
}

type S = ScalarValue;
const T: DataType = DataType::Utf8;
const I: DataType = DataType::Int32;

fn s(v: &str) -> S {
    S::Utf8(Some(v.to_string()))
}
fn i(v: i64) -> S {
    i32::try_from(v).map_or(S::Int32(None), |v| S::Int32(Some(v)))
}
fn null() -> S {
    S::Utf8(None)
}
fn yes_no(v: bool) -> S {
    s(if v { "YES" } else { "NO" })
}

/// PostgreSQL's description of a column type: (data_type, udt_name,
/// character_maximum_length, numeric_precision, numeric_precision_radix,
/// numeric_scale, datetime_precision).
type TypeFacts = (
    &'static str,
    &'static str,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

fn type_facts(t: ColumnType) -> TypeFacts {
    match t {
        // PostgreSQL describes an array column only as ARRAY and its type
        ColumnType::Array(e) => (
            "ARRAY",
            match e {
                ArrayElem::Boolean => "_bool",
                ArrayElem::SmallInt => "_int2",
                ArrayElem::Int => "_int4",
                ArrayElem::BigInt => "_int8",
                ArrayElem::Real => "_float4",
                ArrayElem::Double => "_float8",
                ArrayElem::Decimal(..) => "_numeric",
                ArrayElem::Text => "_text",
                ArrayElem::Varchar(_) => "_varchar",
                ArrayElem::Date => "_date",
                ArrayElem::Timestamp => "_timestamp",
                ArrayElem::TimestampTz => "_timestamptz",
                ArrayElem::Uuid => "_uuid",
            },
            None,
            None,
            None,
            None,
            None,
        ),
        ColumnType::Boolean => ("boolean", "bool", None, None, None, None, None),
        ColumnType::SmallInt => ("smallint", "int2", None, Some(16), Some(2), Some(0), None),
        ColumnType::Int => ("integer", "int4", None, Some(32), Some(2), Some(0), None),
        ColumnType::BigInt => ("bigint", "int8", None, Some(64), Some(2), Some(0), None),
        ColumnType::Real => ("real", "float4", None, Some(24), Some(2), None, None),
        ColumnType::Double => (
            "double precision",
            "float8",
            None,
            Some(53),
            Some(2),
            None,
            None,
        ),
        ColumnType::Decimal(p, sc) => (
            "numeric",
            "numeric",
            None,
            Some(i64::from(p)),
            Some(10),
            Some(i64::from(sc)),
            None,
        ),
        ColumnType::Numeric => ("numeric", "numeric", None, None, Some(10), None, None),
        ColumnType::Text => ("text", "text", None, None, None, None, None),
        ColumnType::Varchar(n) => (
            "character varying",
            "varchar",
            Some(i64::from(n)),
            None,
            None,
            None,
            None,
        ),
        ColumnType::Char(n) => (
            "character",
            "bpchar",
            Some(i64::from(n)),
            None,
            None,
            None,
            None,
        ),
        ColumnType::Date => ("date", "date", None, None, None, None, Some(0)),
        ColumnType::Timestamp => (
            "timestamp without time zone",
            "timestamp",
            None,
            None,
            None,
            None,
            Some(6),
        ),
        ColumnType::TimestampTz => (
            "timestamp with time zone",
            "timestamptz",
            None,
            None,
            None,
            None,
            Some(6),
        ),
        ColumnType::Bytea => ("bytea", "bytea", None, None, None, None, None),
        ColumnType::Uuid => ("uuid", "uuid", None, None, None, None, None),
        ColumnType::Json => ("json", "json", None, None, None, None, None),
        ColumnType::Jsonb => ("jsonb", "jsonb", None, None, None, None, None),
        ColumnType::Interval => ("interval", "interval", None, None, None, None, Some(6)),
        ColumnType::Time => (
            "time without time zone",
            "time",
            None,
            None,
            None,
            None,
            Some(6),
        ),
    }
}

fn opt(v: Option<i64>) -> S {
    v.map_or(S::Int32(None), i)
}

fn build(
    name: &str,
    defs: &[Arc<TableDef>],
    views: &[eddy_common::ViewDef],
    schemas: &[eddy_common::SchemaDef],
    db: &str,
) -> datafusion::error::Result<datafusion::datasource::MemTable> {
    // the schema and the name of a relation's storage name (`crate::schemas`)
    let names: Vec<String> = schemas.iter().map(|d| d.name.clone()).collect();
    let sch = |n: &str| s(crate::schemas::split(n, &names).0);
    let rel = |n: &str| s(crate::schemas::split(n, &names).1);
    match name {
        "tables" => mem_table(
            &[
                ("table_catalog", T),
                ("table_schema", T),
                ("table_name", T),
                ("table_type", T),
                ("self_referencing_column_name", T),
                ("reference_generation", T),
                ("user_defined_type_catalog", T),
                ("user_defined_type_schema", T),
                ("user_defined_type_name", T),
                ("is_insertable_into", T),
                ("is_typed", T),
                ("commit_action", T),
            ],
            defs.iter()
                .map(|d| {
                    vec![
                        s(db),
                        sch(&d.name),
                        rel(&d.name),
                        s("BASE TABLE"),
                        null(),
                        null(),
                        null(),
                        null(),
                        null(),
                        s("YES"),
                        s("NO"),
                        null(),
                    ]
                })
                .chain(views.iter().map(|v| {
                    vec![
                        s(db),
                        sch(&v.name),
                        rel(&v.name),
                        s("VIEW"),
                        null(),
                        null(),
                        null(),
                        null(),
                        null(),
                        s("NO"),
                        s("NO"),
                        null(),
                    ]
                }))
                .collect(),
        ),
        "columns" => {
            let mut rows = Vec::new();
            for d in defs {
                for (pos, c) in d.columns.iter().enumerate() {
                    let (data_type, udt, max_len, precision, radix, scale, dt_precision) =
                        type_facts(c.ty);
                    let octets = max_len.map(|n| n.saturating_mul(4));
                    let in_key = d.primary_key.contains(&pos);
                    rows.push(vec![
                        s(db),
                        sch(&d.name),
                        rel(&d.name),
                        s(&c.name),
                        i(i64::try_from(pos).unwrap_or(i64::MAX).saturating_add(1)),
                        // identity columns have no default here, as in PostgreSQL
                        match (&c.default, c.identity) {
                            (Some(d), None) => {
                                s(&crate::deparse::qualified_default(d, true, &names))
                            }
                            _ => null(),
                        },
                        yes_no(c.nullable && !in_key),
                        s(data_type),
                        opt(max_len),
                        opt(octets),
                        opt(precision),
                        opt(radix),
                        opt(scale),
                        opt(dt_precision),
                        null(),
                        s(db),
                        s("pg_catalog"),
                        s(udt),
                        s(if c.identity.is_some() { "YES" } else { "NO" }),
                        match c.identity {
                            Some(eddy_common::Identity::Always) => s("ALWAYS"),
                            Some(eddy_common::Identity::ByDefault) => s("BY DEFAULT"),
                            None => null(),
                        },
                        s("NEVER"),
                        null(),
                        s("YES"),
                        null(),
                        null(),
                    ]);
                }
            }
            mem_table(
                &[
                    ("table_catalog", T),
                    ("table_schema", T),
                    ("table_name", T),
                    ("column_name", T),
                    ("ordinal_position", I),
                    ("column_default", T),
                    ("is_nullable", T),
                    ("data_type", T),
                    ("character_maximum_length", I),
                    ("character_octet_length", I),
                    ("numeric_precision", I),
                    ("numeric_precision_radix", I),
                    ("numeric_scale", I),
                    ("datetime_precision", I),
                    ("interval_type", T),
                    ("udt_catalog", T),
                    ("udt_schema", T),
                    ("udt_name", T),
                    ("is_identity", T),
                    ("identity_generation", T),
                    ("is_generated", T),
                    ("generation_expression", T),
                    ("is_updatable", T),
                    ("collation_name", T),
                    ("domain_name", T),
                ],
                rows,
            )
        }
        "schemata" => mem_table(
            &[
                ("catalog_name", T),
                ("schema_name", T),
                ("schema_owner", T),
                ("default_character_set_catalog", T),
                ("default_character_set_schema", T),
                ("default_character_set_name", T),
                ("sql_path", T),
            ],
            ["information_schema", "pg_catalog", "public"]
                .iter()
                .map(|n| (n.to_string(), crate::roles::BOOTSTRAP_SUPERUSER))
                .chain(schemas.iter().map(|d| {
                    (
                        d.name.clone(),
                        d.owner
                            .as_deref()
                            .unwrap_or(crate::roles::BOOTSTRAP_SUPERUSER),
                    )
                }))
                .map(|(n, owner)| vec![s(db), s(&n), s(owner), null(), null(), null(), null()])
                .collect(),
        ),
        "views" => mem_table(
            &[
                ("table_catalog", T),
                ("table_schema", T),
                ("table_name", T),
                ("view_definition", T),
                ("check_option", T),
                ("is_updatable", T),
                ("is_insertable_into", T),
                ("is_trigger_updatable", T),
                ("is_trigger_deletable", T),
                ("is_trigger_insertable_into", T),
            ],
            views
                .iter()
                .map(|v| {
                    vec![
                        s(db),
                        sch(&v.name),
                        rel(&v.name),
                        s(&v.query),
                        s("NONE"),
                        s("NO"),
                        s("NO"),
                        s("NO"),
                        s("NO"),
                        s("NO"),
                    ]
                })
                .collect(),
        ),
        "table_constraints" => {
            let mut rows: Vec<Vec<S>> = defs
                .iter()
                .filter(|d| !d.primary_key.is_empty())
                .map(|d| {
                    vec![
                        s(db),
                        sch(&format!("{}_pkey", d.name)),
                        rel(&format!("{}_pkey", d.name)),
                        s(db),
                        sch(&d.name),
                        rel(&d.name),
                        s("PRIMARY KEY"),
                        s("NO"),
                        s("NO"),
                        s("YES"),
                        null(),
                    ]
                })
                .collect();
            for d in defs {
                for fk in &d.foreign_keys {
                    rows.push(vec![
                        s(db),
                        sch(&fk.name),
                        rel(&fk.name),
                        s(db),
                        sch(&d.name),
                        rel(&d.name),
                        s("FOREIGN KEY"),
                        s(if fk.deferrable { "YES" } else { "NO" }),
                        s(if fk.initially_deferred { "YES" } else { "NO" }),
                        s("YES"),
                        null(),
                    ]);
                }
            }
            mem_table(
                &[
                    ("constraint_catalog", T),
                    ("constraint_schema", T),
                    ("constraint_name", T),
                    ("table_catalog", T),
                    ("table_schema", T),
                    ("table_name", T),
                    ("constraint_type", T),
                    ("is_deferrable", T),
                    ("initially_deferred", T),
                    ("enforced", T),
                    ("nulls_distinct", T),
                ],
                rows,
            )
        }
        "referential_constraints" => {
            let mut rows = Vec::new();
            for d in defs {
                for fk in &d.foreign_keys {
                    let parent = defs.iter().find(|p| p.id == fk.ref_table);
                    rows.push(vec![
                        s(db),
                        sch(&fk.name),
                        rel(&fk.name),
                        s(db),
                        parent.map_or(null(), |p| sch(&p.name)),
                        parent.map_or(null(), |p| rel(&format!("{}_pkey", p.name))),
                        s("NONE"),
                        s(fk.on_update.sql()),
                        s(fk.on_delete.sql()),
                    ]);
                }
            }
            mem_table(
                &[
                    ("constraint_catalog", T),
                    ("constraint_schema", T),
                    ("constraint_name", T),
                    ("unique_constraint_catalog", T),
                    ("unique_constraint_schema", T),
                    ("unique_constraint_name", T),
                    ("match_option", T),
                    ("update_rule", T),
                    ("delete_rule", T),
                ],
                rows,
            )
        }
        "key_column_usage" => {
            let mut rows = Vec::new();
            for d in defs {
                for (k, col) in d.primary_key.iter().enumerate() {
                    let Some(c) = d.columns.get(*col) else {
                        continue;
                    };
                    rows.push(vec![
                        s(db),
                        sch(&format!("{}_pkey", d.name)),
                        rel(&format!("{}_pkey", d.name)),
                        s(db),
                        sch(&d.name),
                        rel(&d.name),
                        s(&c.name),
                        i(i64::try_from(k).unwrap_or(i64::MAX).saturating_add(1)),
                        S::Int32(None),
                    ]);
                }
            }
            for d in defs {
                for fk in &d.foreign_keys {
                    let Some(parent) = defs.iter().find(|p| p.id == fk.ref_table) else {
                        continue;
                    };
                    let pos = crate::fk_catalog::positions_in_key(fk, parent);
                    for (k, col) in fk.columns.iter().enumerate() {
                        let Some(c) = d.columns.get(*col) else {
                            continue;
                        };
                        rows.push(vec![
                            s(db),
                            sch(&fk.name),
                            rel(&fk.name),
                            s(db),
                            sch(&d.name),
                            rel(&d.name),
                            s(&c.name),
                            i(i64::try_from(k).unwrap_or(i64::MAX).saturating_add(1)),
                            pos.get(k).copied().flatten().map_or(S::Int32(None), i),
                        ]);
                    }
                }
            }
            mem_table(
                &[
                    ("constraint_catalog", T),
                    ("constraint_schema", T),
                    ("constraint_name", T),
                    ("table_catalog", T),
                    ("table_schema", T),
                    ("table_name", T),
                    ("column_name", T),
                    ("ordinal_position", I),
                    ("position_in_unique_constraint", I),
                ],
                rows,
            )
        }
        other => Err(datafusion::error::DataFusionError::Plan(format!(
            "information_schema.{other} does not exist"
        ))),
    }
}
