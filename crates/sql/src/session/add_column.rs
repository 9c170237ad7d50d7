//! `ALTER TABLE ... ADD COLUMN` with everything CREATE TABLE takes on a
//! column: a DEFAULT (which the existing rows receive), SERIAL and
//! GENERATED AS IDENTITY (their sequence numbers the existing rows), NOT
//! NULL, PRIMARY KEY, UNIQUE, CHECK and REFERENCES.
//!
//! Invariants:
//! - Nothing is accepted and left undone: an option Eddy cannot honour is
//!   refused (0A000) before anything changes.
//! - Existing rows hold what PostgreSQL gives them: the default evaluated
//!   once per row (a volatile default such as `nextval` or `random()` per
//!   row, as PostgreSQL's table rewrite does); with no default, NULL, which
//!   a NOT NULL column refuses (23502).
//! - Every step is a catalog change or write of the session's transaction,
//!   so an error at any step (a default that fails on a row, a constraint
//!   that a row breaks) leaves the table as it was.

use datafusion::sql::sqlparser::ast::{ColumnDef as SqlColumnDef, ColumnOption, Expr};
use eddy_common::ColumnDef;

use super::foreign_keys;
use super::index_ddl;
use super::sequence_ddl;
use super::Session;
use crate::error::{Result, SqlError};
use crate::pgtypes::column_type_from_sql;
use crate::rewrite::ident_name;

/// The constraints a new column carries, added once it exists.
enum ColumnConstraint {
    Unique(Option<String>),
    Check(Option<String>, Box<Expr>),
    ForeignKey(foreign_keys::PendingFk),
}

impl Session {
    /// Adds `column` to table `table` (locked for the change by the caller).
    pub(super) async fn add_column(
        &mut self,
        table: &str,
        column: &SqlColumnDef,
        if_not_exists: bool,
    ) -> Result<()> {
        let name = ident_name(&column.name);
        let current = self.table(table)?;
        if current.def().column_index(&name).is_some() {
            if if_not_exists {
                return Ok(());
            }
            return Err(SqlError::Storage(
                eddy_storage::StorageError::ColumnExists {
                    table: table.to_string(),
                    column: name,
                },
            ));
        }
        let serial = sequence_ddl::serial_type(&column.data_type);
        let ty = match serial {
            Some((ty, _)) => ty,
            None => column_type_from_sql(&column.data_type)?,
        };
        let mut col = ColumnDef::new(name.clone(), ty, true);
        let mut constraints = Vec::new();
        let mut primary_key = false;
        for o in &column.options {
            let constraint_name = o.name.as_ref().map(ident_name);
            match &o.option {
                ColumnOption::NotNull => col.nullable = false,
                ColumnOption::Null => {}
                // applied by `column_default_options` below
                ColumnOption::Default(_)
                | ColumnOption::Generated { .. }
                | ColumnOption::Identity(_) => {}
                ColumnOption::Unique(u) => {
                    let (from_constraint, _) = index_ddl::unique_constraint(u)?;
                    constraints.push(ColumnConstraint::Unique(
                        constraint_name.or(from_constraint),
                    ));
                }
                ColumnOption::Check(check) => {
                    if check.enforced == Some(false) {
                        return Err(SqlError::FeatureNotSupported(
                            "NOT ENFORCED constraints are not supported".into(),
                        ));
                    }
                    constraints.push(ColumnConstraint::Check(
                        constraint_name.or(check.name.as_ref().map(ident_name)),
                        check.expr.clone(),
                    ));
                }
                ColumnOption::ForeignKey(fk) => constraints.push(ColumnConstraint::ForeignKey(
                    foreign_keys::pending(fk, Some(name.clone()), constraint_name)?,
                )),
                ColumnOption::PrimaryKey(_) => {
                    col.nullable = false;
                    primary_key = true;
                }
                other => {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "column option {other} is not supported in ADD COLUMN"
                    )))
                }
            }
        }
        let options: Vec<ColumnOption> = column.options.iter().map(|o| o.option.clone()).collect();
        let index = current.def().columns.len();
        let sequence = sequence_ddl::column_default_options(
            index,
            &mut col,
            serial.map(|(_, type_name)| type_name),
            &options,
        )?;
        if let Some(d) = &col.default {
            self.check_default(&col, d).await?;
        }
        if let Some(seq) = sequence {
            let mut cols = vec![col];
            // the sequence belongs to the column: position 0 of `cols`
            let wanted = sequence_ddl::ColumnSequence { column: 0, ..seq };
            self.create_column_sequences(table, &mut cols, vec![wanted])?;
            col = cols
                .pop()
                .ok_or_else(|| SqlError::Internal("a new column lost with its sequence".into()))?;
        }

        if primary_key && current.def().has_primary_key() {
            return Err(SqlError::InvalidDefinition(format!(
                "multiple primary keys for table \"{}\" are not allowed",
                crate::temp_tables::shown_name(table)
            )));
        }
        // (the transaction's own rows are not among the stored ones yet)
        let has_rows = current.approx_row_count() > 0
            || self
                .txn
                .as_ref()
                .is_some_and(|t| t.has_writes_to(current.def().id));
        if has_rows && col.default.is_some() {
            // every existing row gets the default: a rewrite of the table
            self.add_column_by_rewrite(table, col).await?;
        } else {
            if has_rows && !col.nullable {
                return Err(SqlError::NotNullViolation(format!(
                    "column \"{name}\" of relation \"{}\" contains null values",
                    crate::temp_tables::shown_name(table)
                )));
            }
            let not_null = !col.nullable;
            col.nullable = true;
            self.ddl_change(|ddl| ddl.add_column(table, col))?;
            if not_null {
                // (the table is empty and locked: no row can hold a NULL)
                let column_name = name.clone();
                self.ddl_change(|ddl| {
                    ddl.alter_columns(table, |cols| {
                        if let Some(c) = cols.iter_mut().find(|c| c.name == column_name) {
                            c.nullable = false;
                        }
                        Ok(())
                    })
                })?;
            }
        }

        if primary_key {
            // a rewrite keyed by the new column (its values checked unique)
            self.add_primary_key(table, std::slice::from_ref(&name))
                .await?;
        }
        for constraint in constraints {
            match constraint {
                ColumnConstraint::Unique(constraint_name) => {
                    if let Some(n) = &constraint_name {
                        self.refuse_taken_constraint_name(table, n)?;
                    }
                    self.add_unique_constraints(
                        table,
                        vec![(constraint_name, vec![name.clone()])],
                    )?;
                }
                ColumnConstraint::Check(constraint_name, expr) => {
                    let ident = constraint_name
                        .map(|n| datafusion::sql::sqlparser::ast::Ident::with_quote('"', n));
                    self.add_check(table, ident.as_ref(), *expr).await?;
                }
                ColumnConstraint::ForeignKey(fk) => {
                    self.add_pending_foreign_key(table, fk).await?;
                }
            }
        }
        Ok(())
    }
}
