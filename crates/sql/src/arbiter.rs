//! The arbiter of `INSERT ... ON CONFLICT`: Eddy's storage resolves
//! conflicts on the primary key only, so on a table with UNIQUE indexes an
//! ON CONFLICT that PostgreSQL would arbitrate on a unique index (no
//! target, a unique index's columns or constraint) is refused with 0A000
//! instead of raising 23505 where PostgreSQL would skip or update.

use std::collections::BTreeSet;

use datafusion::sql::sqlparser::ast::{ConflictTarget, OnConflict};
use eddy_common::TableDef;

use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, table_name};

/// Refuses an ON CONFLICT whose arbiter would be a UNIQUE index.
pub fn check_arbiter(def: &TableDef, oc: &OnConflict) -> Result<()> {
    if !def.indexes.iter().any(|i| i.unique) {
        return Ok(());
    }
    let pk: BTreeSet<&str> = def
        .primary_key
        .iter()
        .filter_map(|&c| def.columns.get(c).map(|c| c.name.as_str()))
        .collect();
    let on_pk = match &oc.conflict_target {
        Some(ConflictTarget::Columns(cols)) => {
            let named: Vec<String> = cols.iter().map(ident_name).collect();
            !pk.is_empty() && named.iter().map(String::as_str).collect::<BTreeSet<_>>() == pk
        }
        Some(ConflictTarget::OnConstraint(name)) => {
            table_name(name).is_ok_and(|n| n == format!("{}_pkey", def.name))
        }
        None => false,
    };
    if on_pk {
        return Ok(());
    }
    Err(SqlError::FeatureNotSupported(format!(
        "ON CONFLICT on table \"{}\" with UNIQUE indexes must name its primary key as the conflict target: unique indexes cannot arbitrate yet",
        def.name
    )))
}
