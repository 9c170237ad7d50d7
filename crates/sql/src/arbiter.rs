//! The arbiter of `INSERT ... ON CONFLICT`: which conflicts the clause
//! resolves. Eddy's storage resolves conflicts on the primary key; a
//! conflict on a UNIQUE index is resolved for DO NOTHING (the row is
//! skipped: [`arbiters`] names the indexes whose violation skips it), never for DO UPDATE, which is refused with 0A000 where PostgreSQL
//! would update through a unique index, instead of raising 23505 where
//! PostgreSQL would update.
//!
//! As in PostgreSQL: without a conflict target every unique index and the
//! primary key arbitrate; a column list arbitrates on the index with
//! exactly those columns (42P10 when none has them); `ON CONSTRAINT name`
//! on that constraint. A conflict with another transaction's uncommitted
//! row is found only when the rows commit (23505 at COMMIT, where
//! PostgreSQL waits for the other transaction and then skips).

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
    /// UNIQUE indexes (by name) whose violation makes DO NOTHING skip the
    /// row.
    pub unique: Vec<String>,
}

impl Arbiters {
    fn key_only() -> Arbiters {
        Arbiters {
            primary_key: true,
            unique: Vec::new(),
        }
    }

    /// Only the primary key arbitrates: what storage resolves itself.
    pub fn is_key_only(&self) -> bool {
        self.primary_key && self.unique.is_empty()
    }
}

/// The arbiters of an ON CONFLICT (module doc), or the error PostgreSQL
/// gives for its target, or 0A000 for one Eddy cannot use.
pub fn arbiters(def: &TableDef, oc: &OnConflict) -> Result<Arbiters> {
    if !def.indexes.iter().any(|i| i.unique) {
        return Ok(Arbiters::key_only());
    }
    let names = |cols: &[usize]| -> BTreeSet<String> {
        cols.iter()
            .filter_map(|&c| def.columns.get(c).map(|c| c.name.clone()))
            .collect()
    };
    let pk = names(&def.primary_key);
    let chosen: Option<Vec<String>> = match &oc.conflict_target {
        Some(ConflictTarget::Columns(cols)) => {
            let named: BTreeSet<String> = cols.iter().map(ident_name).collect();
            if !pk.is_empty() && named == pk {
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
            Some(matching)
        }
        Some(ConflictTarget::OnConstraint(name)) => {
            let n = table_name(name)?;
            if n == format!("{}_pkey", def.name) {
                return Ok(Arbiters::key_only());
            }
            match def
                .indexes
                .iter()
                .find(|i| i.unique && i.constraint && i.name == n)
            {
                Some(i) => Some(vec![i.name.clone()]),
                None => {
                    return Err(SqlError::UndefinedObject(format!(
                        "constraint \"{n}\" for table \"{}\" does not exist",
                        def.name
                    )))
                }
            }
        }
        None => None,
    };
    if matches!(oc.action, OnConflictAction::DoUpdate(_)) {
        return Err(SqlError::FeatureNotSupported(format!(
            "ON CONFLICT DO UPDATE on table \"{}\" with UNIQUE indexes must name its primary key as the conflict target: unique indexes cannot arbitrate an update yet",
            def.name
        )));
    }
    Ok(match chosen {
        Some(unique) => Arbiters {
            primary_key: false,
            unique,
        },
        None => Arbiters {
            primary_key: true,
            unique: def
                .indexes
                .iter()
                .filter(|i| i.unique)
                .map(|i| i.name.clone())
                .collect(),
        },
    })
}
