//! Every index of a table as the catalog lists it (`pg_class` kind 'i',
//! `pg_index`, `pg_indexes`, `pg_constraint`, `pg_get_indexdef`): the
//! primary key's `<table>_pkey` and the secondary indexes of `TableDef`.

use eddy_storage::Table;

use crate::catalog::{index_oid, table_oid};

/// One index of a table, as the catalog shows it.
pub struct IndexEntry {
    pub oid: i64,
    pub name: String,
    /// Indices into the table's columns.
    pub columns: Vec<usize>,
    pub descending: Vec<bool>,
    pub unique: bool,
    pub primary: bool,
    /// Made by a constraint (PRIMARY KEY or UNIQUE): `pg_constraint` lists it.
    pub constraint: bool,
}

/// OID of secondary index number `k` of `t`: counted down from 511 in the
/// table's block (column defaults count up from 1, CHECKs use 512-1023).
pub fn secondary_index_oid(t: &Table, k: usize) -> i64 {
    (table_oid(t) << 10) | (511 - (k as i64 & 255))
}

/// The indexes of `t`: its primary key first, then the secondary ones.
pub fn indexes_of(t: &Table) -> Vec<IndexEntry> {
    let d = t.def();
    let mut out = Vec::with_capacity(d.indexes.len() + 1);
    if d.has_primary_key() {
        out.push(IndexEntry {
            oid: index_oid(t),
            name: format!("{}_pkey", d.name),
            columns: d.primary_key.clone(),
            descending: vec![],
            unique: true,
            primary: true,
            constraint: true,
        });
    }
    for (k, ix) in d.indexes.iter().enumerate() {
        out.push(IndexEntry {
            oid: secondary_index_oid(t, k),
            name: ix.name.clone(),
            columns: ix.columns.clone(),
            descending: ix.descending.clone(),
            unique: ix.unique,
            primary: false,
            constraint: ix.constraint,
        });
    }
    out
}

impl IndexEntry {
    /// The column list as PostgreSQL prints it: `a, b DESC`, `"Mixed"`
    /// (names quoted where they need it).
    pub fn column_list(&self, t: &Table) -> String {
        let d = t.def();
        self.columns
            .iter()
            .enumerate()
            .filter_map(|(n, &c)| {
                let name = crate::fk_catalog::ident(&d.columns.get(c)?.name);
                Some(if self.descending.get(n).copied().unwrap_or(false) {
                    format!("{name} DESC")
                } else {
                    name
                })
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `pg_get_indexdef`: `CREATE [UNIQUE] INDEX name ON public.t USING
    /// btree (cols)` (`schemas`: the user schemas, whose relations'
    /// storage names carry their schema: `crate::schemas`).
    pub fn definition(&self, t: &Table, schemas: &[String]) -> String {
        let (_, index) = crate::schemas::split(&self.name, schemas);
        format!(
            "CREATE {}INDEX {} ON {} USING btree ({})",
            if self.unique { "UNIQUE " } else { "" },
            crate::fk_catalog::ident(index),
            crate::schemas::qualified_text(&t.def().name, schemas, false),
            self.column_list(t)
        )
    }

    /// `pg_get_constraintdef` of the constraint the index backs.
    pub fn constraint_definition(&self, t: &Table) -> String {
        format!(
            "{} ({})",
            if self.primary {
                "PRIMARY KEY"
            } else {
                "UNIQUE"
            },
            self.column_list(t)
        )
    }

    /// `pg_index.indkey`: 1-based column numbers (an int2 array here; see
    /// the catalog's pg_index).
    pub fn indkey(&self) -> Vec<i16> {
        self.columns
            .iter()
            .map(|c| i16::try_from(c + 1).unwrap_or(i16::MAX))
            .collect()
    }

    /// `pg_index.indoption`: per column 3 for DESC (DESC NULLS FIRST),
    /// else 0, separated by spaces: int2vector's text, which clients read
    /// as a string (SQLAlchemy splits it).
    pub fn indoption(&self) -> String {
        (0..self.columns.len())
            .map(|n| {
                if self.descending.get(n).copied().unwrap_or(false) {
                    "3"
                } else {
                    "0"
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// PostgreSQL 15's default btree operator classes: (opclass OID, name,
/// input type OID), for `pg_opclass` and `pg_index.indclass`. varchar
/// columns use text's, as in PostgreSQL.
pub const BTREE_OPCLASSES: &[(u32, &str, u32)] = &[
    (1978, "int4_ops", 23),
    (1979, "int2_ops", 21),
    (3122, "date_ops", 1082),
    (3123, "float8_ops", 701),
    (3124, "int8_ops", 20),
    (3125, "numeric_ops", 1700),
    (3126, "text_ops", 25),
    (3127, "timestamptz_ops", 1184),
    (3128, "timestamp_ops", 1114),
    (10003, "bool_ops", 16),
    (10004, "bpchar_ops", 1042),
    (10006, "bytea_ops", 17),
    (10012, "float4_ops", 700),
    (10022, "interval_ops", 1186),
    (10038, "time_ops", 1083),
    (10065, "uuid_ops", 2950),
    (10088, "jsonb_ops", 3802),
];

/// The default btree operator class of a type (0, as PostgreSQL's "no
/// class", for a type without one here).
pub fn default_btree_opclass(type_oid: u32) -> u32 {
    let key = if type_oid == crate::pgtypes::oid::VARCHAR {
        crate::pgtypes::oid::TEXT
    } else {
        type_oid
    };
    BTREE_OPCLASSES
        .iter()
        .find(|(_, _, t)| *t == key)
        .map_or(0, |(o, _, _)| *o)
}
