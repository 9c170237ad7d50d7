//! `ALTER TABLE ... ADD CONSTRAINT` (CHECK, UNIQUE, FOREIGN KEY; PRIMARY KEY is
//! `session.rs`'s rewrite) and `DROP CONSTRAINT`, as PostgreSQL runs them.
//!
//! Both run under ALTER TABLE's exclusive lock, held to the transaction's
//! end, and change only the catalog, inside the session's transaction
//! (undone by ROLLBACK):
//!
//! * ADD CHECK first counts the rows the transaction sees (its own writes
//!   too) that break the expression, through the table's own provider:
//!   23514 "check constraint ... is violated by some row". With the lock
//!   held no row can arrive between that count and the change. `NOT
//!   VALID` (skip the existing rows) is refused: Eddy keeps no
//!   "not validated" mark for the catalog to show.
//! * ADD FOREIGN KEY checks the existing rows with one anti join and
//!   locks the referenced table too (`fk_alter.rs`).
//! * ADD UNIQUE is a unique index marked as a constraint
//!   (`index_ddl::add_unique_constraints`, as CREATE TABLE's UNIQUE).
//! * DROP CONSTRAINT finds the name among the CHECKs, the UNIQUE
//!   constraints and the FOREIGN KEYs; a primary key cannot be dropped
//!   (0A000: the rows are stored by it), an unknown name is 42704.

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{Ident, TableConstraint};
use eddy_common::CheckConstraint as StoredCheck;

use super::checks::{name_checks, parse_check, PendingCheck};
use super::{index_ddl, Session};
use crate::error::{Result, SqlError};
use crate::provider::EddyTable;
use crate::rewrite::ident_name;
use crate::temp_tables::shown_name;

impl Session {
    /// `ALTER TABLE table ADD [CONSTRAINT name] CHECK (...) | UNIQUE (...) |
    /// FOREIGN KEY (...) REFERENCES ...`.
    pub(super) async fn add_constraint(
        &mut self,
        table: &str,
        constraint: TableConstraint,
        not_valid: bool,
    ) -> Result<()> {
        if not_valid {
            return Err(SqlError::FeatureNotSupported(
                "ADD CONSTRAINT ... NOT VALID is not supported: the existing rows are always checked"
                    .into(),
            ));
        }
        match constraint {
            TableConstraint::Check(c) => {
                if c.enforced == Some(false) {
                    return Err(SqlError::FeatureNotSupported(
                        "NOT ENFORCED constraints are not supported".into(),
                    ));
                }
                self.add_check(table, c.name.as_ref(), *c.expr).await
            }
            TableConstraint::Unique(u) => {
                let (name, columns) = index_ddl::unique_constraint(&u)?;
                if let Some(n) = &name {
                    self.refuse_taken_constraint_name(table, n)?;
                }
                self.add_unique_constraints(table, vec![(name, columns)])
            }
            TableConstraint::ForeignKey(fk) => self.add_foreign_key(table, &fk).await,
            other => Err(SqlError::FeatureNotSupported(format!(
                "ALTER TABLE ... ADD {other} is not supported"
            ))),
        }
    }

    pub(super) async fn add_check(
        &mut self,
        table: &str,
        name: Option<&Ident>,
        expr: datafusion::sql::sqlparser::ast::Expr,
    ) -> Result<()> {
        let t = self.table(table)?;
        let def = t.def().clone();
        // PostgreSQL's name, unique among the table's constraints
        let mut pending = def
            .checks
            .iter()
            .map(|c| {
                Ok(PendingCheck {
                    name: Some(c.name.clone()),
                    column: None,
                    expr: parse_check(&c.expr)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        pending.push(PendingCheck {
            name: name.map(ident_name),
            column: None,
            expr,
        });
        let mut named = name_checks(shown_name(table), pending)?;
        let Some(check) = named.pop() else {
            return Err(SqlError::Internal("a CHECK without a name".into()));
        };
        // (name_checks refused a repeated CHECK name; an index or foreign
        // key may hold it too)
        self.refuse_taken_constraint_name(table, &check.name)?;
        self.validate_check(table, &def.columns, &check).await?;
        // the rows the transaction sees, its own included
        self.install_tables(std::slice::from_ref(&t))?;
        let provider =
            Arc::new(EddyTable::new(Arc::clone(&t), false).with_view(Arc::clone(&self.view)));
        let failures = self.check_failures(table, &check, provider).await?;
        if failures > 0 {
            return Err(SqlError::CheckViolation(format!(
                "check constraint \"{}\" of relation \"{}\" is violated by some row",
                check.name,
                shown_name(table)
            )));
        }
        let mut checks = def.checks.clone();
        checks.push(StoredCheck {
            name: check.name,
            expr: check.expr,
        });
        let tname = table.to_string();
        self.ddl_change(move |ddl| ddl.set_checks(&tname, checks))?;
        Ok(())
    }

    /// 42710 when the table already has a constraint (or index) `name`.
    pub(super) fn refuse_taken_constraint_name(&self, table: &str, name: &str) -> Result<()> {
        let def = self.table(table)?.def().clone();
        let taken = def.checks.iter().any(|c| c.name == name)
            || def.foreign_keys.iter().any(|f| f.name == name)
            || def.indexes.iter().any(|i| i.name == name);
        if taken {
            return Err(duplicate(name, table));
        }
        Ok(())
    }

    /// `ALTER TABLE table DROP CONSTRAINT [IF EXISTS] name`.
    pub(super) fn drop_constraint(
        &mut self,
        table: &str,
        name: &Ident,
        if_exists: bool,
    ) -> Result<()> {
        let name = ident_name(name);
        let def = self.table(table)?.def().clone();
        let tname = table.to_string();
        if def.checks.iter().any(|c| c.name == name) {
            let checks = def
                .checks
                .iter()
                .filter(|c| c.name != name)
                .cloned()
                .collect();
            self.ddl_change(move |ddl| ddl.set_checks(&tname, checks))?;
            return Ok(());
        }
        if def.indexes.iter().any(|i| i.name == name && i.constraint) {
            self.ddl_change(move |ddl| ddl.drop_index(&tname, &name))?;
            return Ok(());
        }
        if def.foreign_keys.iter().any(|f| f.name == name) {
            let fks = def
                .foreign_keys
                .iter()
                .filter(|f| f.name != name)
                .cloned()
                .collect();
            self.ddl_change(move |ddl| ddl.set_foreign_keys(&tname, fks))?;
            return Ok(());
        }
        if if_exists {
            return Ok(());
        }
        Err(SqlError::UndefinedObject(format!(
            "constraint \"{name}\" of relation \"{}\" does not exist",
            shown_name(table)
        )))
    }
}

impl Session {
    /// Whether `name` is `table`'s primary key constraint (`t_pkey`).
    pub(super) fn names_primary_key(&self, table: &str, name: &Ident) -> Result<bool> {
        let def = self.table(table)?.def().clone();
        Ok(def.has_primary_key() && ident_name(name) == format!("{}_pkey", shown_name(table)))
    }
}

fn duplicate(name: &str, table: &str) -> SqlError {
    SqlError::DuplicateObject(format!(
        "constraint \"{name}\" for relation \"{}\" already exists",
        shown_name(table)
    ))
}
