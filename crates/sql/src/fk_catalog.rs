//! How the catalogs show FOREIGN KEY constraints (`pg_constraint` rows of
//! contype 'f', `pg_get_constraintdef`, `information_schema`), as
//! PostgreSQL 15 shows them (`docs/design/foreign_keys.md`).

use eddy_common::{FkAction, ForeignKeyDef, TableDef};
use eddy_storage::Table;

use crate::catalog::table_oid;

/// OID of a table's `k`-th foreign key: above every other OID Eddy hands
/// out (tables, columns, indexes and checks stay below 2^31), below 2^32.
pub fn fk_oid(t: &Table, k: usize) -> i64 {
    (1_i64 << 31) | ((table_oid(t) << 6) & 0x7FFF_FFC0) | (k as i64 & 63)
}

/// An identifier as `pg_get_constraintdef` prints it: quoted unless it is
/// a plain lower-case name.
pub fn ident(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

fn names(def: &TableDef, cols: &[usize]) -> String {
    cols.iter()
        .filter_map(|c| def.columns.get(*c))
        .map(|c| ident(&c.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `FOREIGN KEY (p_id) REFERENCES p(id) ON DELETE CASCADE`; the table
/// named `public.p` where `public` is not on the search path, and a user
/// schema's table always qualified (`crate::deparse`).
pub fn definition(
    child: &TableDef,
    fk: &ForeignKeyDef,
    parent: &TableDef,
    public_on_path: bool,
    schemas: &[String],
) -> String {
    let mut out = format!(
        "FOREIGN KEY ({}) REFERENCES {}({})",
        names(child, &fk.columns),
        crate::schemas::qualified_text(&parent.name, schemas, public_on_path),
        names(parent, &fk.ref_columns)
    );
    if fk.on_update != FkAction::NoAction {
        out.push_str(&format!(" ON UPDATE {}", fk.on_update.sql()));
    }
    if fk.on_delete != FkAction::NoAction {
        out.push_str(&format!(" ON DELETE {}", fk.on_delete.sql()));
    }
    if fk.deferrable {
        out.push_str(" DEFERRABLE");
    }
    if fk.initially_deferred {
        out.push_str(" INITIALLY DEFERRED");
    }
    out
}

/// `conkey`, `confkey`: 1-based column numbers.
pub fn attnums(cols: &[usize]) -> Vec<i16> {
    cols.iter()
        .map(|c| i16::try_from(c + 1).unwrap_or(i16::MAX))
        .collect()
}

/// The position of each referenced column in the referenced table's
/// primary key (1-based; `key_column_usage.position_in_unique_constraint`).
pub fn positions_in_key(fk: &ForeignKeyDef, parent: &TableDef) -> Vec<Option<i64>> {
    fk.ref_columns
        .iter()
        .map(|c| {
            parent
                .primary_key
                .iter()
                .position(|k| k == c)
                .map(|p| p as i64 + 1)
        })
        .collect()
}
