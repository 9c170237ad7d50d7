//! Deferred foreign-key checks at commit and `SET CONSTRAINTS`
//! (`crate::deferred_fk` says what is recorded; `docs/design/
//! foreign_keys.md`, "Deferred checks").
//!
//! The checks run while the transaction is still open, with its locks and
//! its own writes: at COMMIT (a failure rolls the transaction back, as
//! PostgreSQL's COMMIT does), at the end of a statement outside a block,
//! and at `SET CONSTRAINTS ... IMMEDIATE` for the constraints it names
//! (PostgreSQL checks the outstanding events then, retroactively).

use std::collections::HashSet;
use std::sync::Arc;

use eddy_common::ForeignKeyDef;
use eddy_storage::Table;

use super::foreign_keys::{referencing_rows, still_referenced};
use super::{run_blocking, Output, Session};
use crate::deferred_fk::{Selection, TableRef};
use crate::error::{Result, SqlError};

impl Session {
    /// Whether `fk` is checked at commit in the current transaction.
    pub(super) fn fk_deferred(&self, fk: &ForeignKeyDef) -> bool {
        fk.deferrable
            && self
                .txn
                .as_ref()
                .is_some_and(|t| t.deferred.is_deferred(fk))
    }

    /// The table a deferred check recorded: by id, else by name (a table
    /// rewritten since has a new id); `None` when it is gone.
    fn recorded_table(&self, t: &TableRef) -> Option<Arc<Table>> {
        if self
            .txn
            .as_ref()
            .is_some_and(|x| x.dropped_tables.contains(&t.name))
        {
            return None;
        }
        self.table_by_id(t.id)
            .ok()
            .or_else(|| self.db.engine.table(&t.name))
    }

    /// Runs the pending deferred checks of the constraints `selection`
    /// names (all for `None`) now.
    pub(super) fn run_deferred_checks(&mut self, selection: Selection<'_>) -> Result<()> {
        let Some(txn) = self.txn.as_mut() else {
            return Ok(());
        };
        if !txn.deferred.has_pending() {
            return Ok(());
        }
        let (children, removed) = txn.deferred.take_pending(selection);
        for (child, constraint) in children {
            let Some(table) = self.recorded_table(&child) else {
                continue;
            };
            let def = Arc::clone(table.def());
            // a constraint dropped since is not checked
            let Some(fk) = def.foreign_keys.iter().find(|f| f.name == constraint) else {
                continue;
            };
            let rows = self.fk_txn()?.own_rows(&table);
            self.check_parents_of(&def, fk, &rows)?;
        }
        for r in removed {
            let (Some(parent), Some(child)) = (
                self.recorded_table(&r.parent),
                self.recorded_table(&r.child),
            ) else {
                continue;
            };
            let cdef = Arc::clone(child.def());
            let Some(fk) = cdef
                .foreign_keys
                .iter()
                .find(|f| f.name == r.constraint && f.ref_table == parent.def().id)
            else {
                continue;
            };
            let pdef = Arc::clone(parent.def());
            let txn = self.fk_txn()?;
            // a key the transaction has written again is there
            let gone: HashSet<Vec<u8>> = r
                .keys
                .into_iter()
                .filter(|k| !matches!(txn.own_row(&parent, k), Some(Some(_))))
                .collect();
            if gone.is_empty() {
                continue;
            }
            let found = run_blocking(|| referencing_rows(txn, &child, fk, &pdef, &gone, false))?;
            if let Some((_, _, row)) = found.first() {
                return Err(still_referenced(&pdef, fk, &cdef, row));
            }
        }
        Ok(())
    }

    /// `SET CONSTRAINTS {ALL | name [, ...]} {DEFERRED | IMMEDIATE}`.
    /// Outside a transaction block it changes nothing (PostgreSQL warns).
    pub(super) fn set_constraints(
        &mut self,
        names: Option<Vec<String>>,
        deferred: bool,
    ) -> Result<Output> {
        if let Some(names) = &names {
            for n in names {
                self.check_deferrable_name(n)?;
            }
        }
        let explicit = self.txn.as_ref().is_some_and(|t| t.explicit);
        if explicit {
            if let Some(t) = self.txn.as_mut() {
                t.deferred.set_mode(names.as_deref(), deferred);
            }
            if !deferred {
                self.run_deferred_checks(names.as_deref())?;
            }
        }
        Ok(Output::Command("SET CONSTRAINTS".into()))
    }

    /// 42704 for a name no constraint has, 42809 for a constraint that is
    /// not DEFERRABLE (PostgreSQL's answers).
    fn check_deferrable_name(&self, name: &str) -> Result<()> {
        let mut found = false;
        for t in self.db.engine.tables() {
            let def = t.def();
            for fk in def.foreign_keys.iter().filter(|f| f.name == name) {
                if !fk.deferrable {
                    return Err(not_deferrable(name));
                }
                found = true;
            }
            let other = def.checks.iter().any(|c| c.name == name)
                || def.indexes.iter().any(|i| i.constraint && i.name == name)
                || (def.has_primary_key() && name == format!("{}_pkey", def.name));
            if other {
                return Err(not_deferrable(name));
            }
        }
        if found {
            Ok(())
        } else {
            Err(SqlError::UndefinedObject(format!(
                "constraint \"{name}\" does not exist"
            )))
        }
    }
}

fn not_deferrable(name: &str) -> SqlError {
    SqlError::WrongObjectType(format!("constraint \"{name}\" is not deferrable"))
}
