//! The arbiter of `INSERT ... ON CONFLICT`: which conflicts the clause
//! resolves. A conflict on the primary key is resolved in storage's terms
//! (`eddy_storage::OnConflict`); a conflict on a UNIQUE index is resolved
//! by the insert itself (`session::insert_rows`): DO NOTHING skips the row,
//! DO UPDATE finds the row that holds the proposed row's index key and
//! updates it.
//!
//! As in PostgreSQL: without a conflict target every unique index and the
//! primary key arbitrate DO NOTHING, and DO UPDATE is 42601; a column list
//! arbitrates on the primary key or the unique indexes with exactly those
//! columns (42P10 when none has them); `ON CONSTRAINT name` on that
//! constraint (42704 when the table has none of that name). A
//! transaction writing the same unique value is waited for
//! (`Transaction::lock_unique_value`), as in PostgreSQL.

use std::collections::BTreeSet;

use datafusion::sql::sqlparser::ast::{ConflictTarget, OnConflict, OnConflictAction};
use eddy_common::TableDef;

use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, table_name};

/// What an ON CONFLICT arbitrates on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Arbiters {
    /// A conflict on the primary key is resolved by the clause (else it is
    /// 23505).
    pub primary_key: bool,
    /// UNIQUE indexes (by name) whose conflicts the clause resolves. When
    /// the target names them they all have the same columns.
    pub unique: Vec<String>,
}

impl Arbiters {
    fn key_only() -> Arbiters {
        Arbiters {
            primary_key: true,
            unique: Vec::new(),
        }
    }

    fn on_unique(unique: Vec<String>) -> Arbiters {
        Arbiters {
            primary_key: false,
            unique,
        }
    }

    /// Only the primary key arbitrates: what storage resolves itself.
    pub fn is_key_only(&self) -> bool {
        self.primary_key && self.unique.is_empty()
    }
}

/// The arbiters of an ON CONFLICT (module doc), or the error PostgreSQL
/// gives for its target.
pub fn arbiters(def: &TableDef, oc: &OnConflict) -> Result<Arbiters> {
    let names = |cols: &[usize]| -> BTreeSet<String> {
        cols.iter()
            .filter_map(|&c| def.columns.get(c).map(|c| c.name.clone()))
            .collect()
    };
    match &oc.conflict_target {
        Some(ConflictTarget::Columns(cols)) => {
            let named: BTreeSet<String> = cols.iter().map(ident_name).collect();
            if def.has_primary_key() && named == names(&def.primary_key) {
                return Ok(Arbiters::key_only());
            }
            let matching: Vec<String> = def
                .indexes
                .iter()
                .filter(|i| i.unique && names(&i.columns) == named)
                .map(|i| i.name.clone())
                .collect();
            if matching.is_empty() {
                return Err(SqlError::InvalidColumnReference(
                    "there is no unique or exclusion constraint matching the ON CONFLICT specification"
                        .into(),
                ));
            }
            Ok(Arbiters::on_unique(matching))
        }
        Some(ConflictTarget::OnConstraint(name)) => {
            let n = table_name(name)?;
            if def.has_primary_key() && n == format!("{}_pkey", def.name) {
                return Ok(Arbiters::key_only());
            }
            match def
                .indexes
                .iter()
                .find(|i| i.unique && i.constraint && i.name == n)
            {
                Some(i) => Ok(Arbiters::on_unique(vec![i.name.clone()])),
                None => Err(SqlError::UndefinedObject(format!(
                    "constraint \"{n}\" for table \"{}\" does not exist",
                    def.name
                ))),
            }
        }
        None if matches!(oc.action, OnConflictAction::DoUpdate(_)) => Err(SqlError::Syntax(
            "ON CONFLICT DO UPDATE requires inference specification or constraint name".into(),
        )),
        None => Ok(Arbiters {
            primary_key: true,
            unique: def
                .indexes
                .iter()
                .filter(|i| i.unique)
                .map(|i| i.name.clone())
                .collect(),
        }),
    }
}
