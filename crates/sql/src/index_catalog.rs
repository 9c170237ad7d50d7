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
    /// The column list as PostgreSQL prints it: `a, b DESC`.
    pub fn column_list(&self, t: &Table) -> String {
        let d = t.def();
        self.columns
            .iter()
            .enumerate()
            .filter_map(|(n, &c)| {
                let name = d.columns.get(c)?.name.clone();
                Some(if self.descending.get(n).copied().unwrap_or(false) {
                    format!("{name} DESC")
                } else {
                    name
                })
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `pg_get_indexdef`: `CREATE [UNIQUE] INDEX name ON public.t USING btree (cols)`.
    pub fn definition(&self, t: &Table) -> String {
        format!(
            "CREATE {}INDEX {} ON public.{} USING btree ({})",
            if self.unique { "UNIQUE " } else { "" },
            self.name,
            t.def().name,
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

    /// `pg_index.indkey`: 1-based column numbers separated by spaces.
    pub fn indkey(&self) -> String {
        self.columns
            .iter()
            .map(|c| (c + 1).to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `pg_index.indoption`: per column 1 for DESC (3 = DESC NULLS FIRST).
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
