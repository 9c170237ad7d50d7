//! ALTER TABLE operations that change only what the catalog says:
//! `RENAME TO`, `RENAME COLUMN`, `ALTER COLUMN SET DEFAULT / DROP DEFAULT /
//! DROP NOT NULL` (`Ddl::alter_columns`: stored files address columns by
//! position, so nothing is rewritten). Each is a catalog change of the
//! session's transaction (`session::ddl_txn`), undone if it rolls back.
//! Sequences owned by a renamed table or column follow it (outside a block
//! only: sequences are not transactional).
//!
//! `SET NOT NULL` is refused (0A000): a writer holding the table's previous
//! definition could still store a NULL after the check, and a constraint
//! that can be broken is not offered.

use datafusion::sql::sqlparser::ast::{AlterColumnOperation, Ident, ObjectName};
use eddy_storage::{StorageError, Table};
use std::sync::Arc;

use super::Session;
use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, table_name};

impl Session {
    /// `COMMENT ON TABLE t | COLUMN t.c IS 'text' | NULL`: a catalog change
    /// of the session's transaction, undone if it rolls back.
    pub(super) fn comment_on(
        &mut self,
        object_type: datafusion::sql::sqlparser::ast::CommentObject,
        name: &ObjectName,
        comment: Option<String>,
        if_exists: bool,
    ) -> Result<super::Output> {
        use datafusion::sql::sqlparser::ast::CommentObject;
        let parts: Vec<String> = name
            .0
            .iter()
            .filter_map(|p| p.as_ident().map(ident_name))
            .collect();
        let (table, column) = match (object_type, parts.as_slice()) {
            (CommentObject::Table, [.., t]) => (t.clone(), None),
            (CommentObject::Column, [.., t, c]) => (t.clone(), Some(c.clone())),
            (CommentObject::Table | CommentObject::Column, _) => {
                return Err(SqlError::Syntax(format!("bad name in COMMENT ON: {name}")))
            }
            (CommentObject::Schema, [schema]) if schema != crate::schemas::PUBLIC => {
                self.comment_on_schema(schema, comment)?;
                return Ok(super::Output::Command("COMMENT".into()));
            }
            (other, _) => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "COMMENT ON {other:?} is not supported"
                )))
            }
        };
        if self.table(&table).is_err() {
            if if_exists {
                return Ok(super::Output::Command("COMMENT".into()));
            }
            return Err(SqlError::UndefinedTable(table));
        }
        let target = self.table(&table)?;
        let _locked = self.lock_for_ddl(&target, "COMMENT ON")?;
        if let Some(c) = &column {
            if self.table(&table)?.def().column_index(c).is_none() {
                return Err(SqlError::UndefinedColumn(format!(
                    "{c}\" of relation \"{table}"
                )));
            }
        }
        match column {
            None => {
                self.ddl_change(|ddl| ddl.set_table_comment(&table, comment))?;
            }
            Some(c) => {
                self.ddl_change(|ddl| {
                    ddl.alter_columns(&table, |cols| {
                        let col = cols
                            .iter_mut()
                            .find(|col| col.name == c)
                            .ok_or_else(|| StorageError::ColumnNotFound(c.clone()))?;
                        col.comment = comment;
                        Ok(())
                    })
                })?;
            }
        }
        Ok(super::Output::Command("COMMENT".into()))
    }

    /// Sequences record their owner outside the catalog's transactions:
    /// a rename of their owner reaches them when the transaction commits
    /// (`Session::rename_sequence_owners`), never before, so a ROLLBACK or
    /// a crash leaves them pointing at the names that stay.
    fn rename_owner_at_commit(&mut self, rename: crate::txn::OwnerRename) -> Result<()> {
        self.ddl_txn("a rename")?
            .sequence_owner_renames
            .push(rename);
        Ok(())
    }

    pub(super) fn rename_table(&mut self, from: &str, to: &ObjectName) -> Result<()> {
        let to = table_name(to)?;
        if self.db.sequences.exists(&to) {
            return Err(SqlError::DuplicateTable(to));
        }
        self.ddl_change(|ddl| ddl.rename_table(from, &to))?;
        self.rename_owner_at_commit(crate::txn::OwnerRename {
            from_table: from.to_string(),
            from_column: None,
            to_table: to,
            to_column: None,
        })
    }

    pub(super) fn rename_column(&mut self, table: &str, old: &Ident, new: &Ident) -> Result<()> {
        let (old, new) = (ident_name(old), ident_name(new));
        let def = self.table(table)?.def().clone();
        if let Some(c) = def
            .checks
            .iter()
            .find(|c| super::checks::refers_to(&c.expr, &old))
        {
            return Err(SqlError::FeatureNotSupported(format!(
                "column \"{old}\" is used by check constraint \"{}\"; renaming it is not supported yet",
                c.name
            )));
        }
        self.ddl_change(|ddl| {
            ddl.alter_columns(table, |cols| {
                if cols.iter().any(|c| c.name == new) {
                    return Err(StorageError::ColumnExists {
                        table: table.to_string(),
                        column: new.clone(),
                    });
                }
                let c = cols
                    .iter_mut()
                    .find(|c| c.name == old)
                    .ok_or_else(|| StorageError::ColumnNotFound(old.clone()))?;
                c.name = new.clone();
                Ok(())
            })
        })?;
        self.rename_owner_at_commit(crate::txn::OwnerRename {
            from_table: table.to_string(),
            from_column: Some(old),
            to_table: table.to_string(),
            to_column: Some(new),
        })
    }

    /// SET NOT NULL: 23502 when a row the transaction sees (committed, or
    /// its own) holds NULL in `column`, with PostgreSQL's message.
    async fn check_no_nulls(&mut self, table: &str, t: &Arc<Table>, column: &str) -> Result<()> {
        use datafusion::common::{Column, TableReference};
        use datafusion::logical_expr::{col, Expr};
        self.install_tables(std::slice::from_ref(t))?;
        let reference = TableReference::partial("public", table);
        let plan = self
            .ctx
            .table(reference)
            .await?
            .filter(Expr::Column(Column::new_unqualified(column)).is_null())?
            .limit(0, Some(1))?
            .select(vec![col(Column::new_unqualified(column))])?
            .into_unoptimized_plan();
        let (_, batches) = super::collect_rows(self.run_plan(plan).await?).await?;
        if batches.iter().any(|b| b.num_rows() > 0) {
            // the message names the table as the user wrote it
            let shown = crate::temp_tables::shown_name(table);
            return Err(SqlError::NotNullViolation(format!(
                "column \"{column}\" of relation \"{shown}\" contains null values"
            )));
        }
        Ok(())
    }

    pub(super) async fn alter_column(
        &mut self,
        table: &str,
        column: &Ident,
        op: AlterColumnOperation,
    ) -> Result<()> {
        let cname = ident_name(column);
        let t = self.table(table)?;
        let def = t.def().clone();
        let (idx, col) = column_of(&def, table, &cname)?;
        let col = col.clone();
        // PostgreSQL answers 42601 here (use DROP IDENTITY instead)
        let identity_error = || {
            SqlError::Syntax(format!(
                "column \"{cname}\" of relation \"{table}\" is an identity column"
            ))
        };
        let new_default: Option<Option<String>>;
        let mut drop_not_null = false;
        let mut set_not_null = false;
        match op {
            AlterColumnOperation::SetDefault { value } => {
                if col.identity.is_some() {
                    return Err(identity_error());
                }
                // a sequence's default as PostgreSQL prints it (bound to the
                // sequence, whatever schema the text named it with)
                let text = match crate::sequences::sequence_of_default(&value.to_string()) {
                    Some(seq) => super::sequence_ddl::nextval_default(&seq),
                    None => value.to_string(),
                };
                self.check_default(&col, &text).await?;
                new_default = Some(Some(text));
            }
            AlterColumnOperation::DropDefault => {
                if col.identity.is_some() {
                    return Err(identity_error());
                }
                new_default = Some(None);
            }
            AlterColumnOperation::DropNotNull => {
                if def.primary_key.contains(&idx) {
                    return Err(SqlError::InvalidDefinition(format!(
                        "column \"{cname}\" is in a primary key"
                    )));
                }
                if col.identity.is_some() {
                    return Err(identity_error());
                }
                new_default = None;
                drop_not_null = true;
            }
            AlterColumnOperation::SetNotNull => {
                // The table is locked against other writers (ALTER TABLE's
                // exclusive lock, held to the transaction's end), so no
                // NULL can arrive between this check and the change.
                self.check_no_nulls(table, &t, &cname).await?;
                new_default = None;
                set_not_null = true;
            }
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "ALTER COLUMN ... {other} is not supported"
                )))
            }
        }
        self.ddl_change(|ddl| {
            ddl.alter_columns(table, |cols| {
                let c = cols
                    .get_mut(idx)
                    .ok_or_else(|| StorageError::ColumnNotFound(cname.clone()))?;
                if let Some(d) = new_default {
                    c.default = d;
                }
                if drop_not_null {
                    c.nullable = true;
                }
                if set_not_null {
                    c.nullable = false;
                }
                Ok(())
            })
        })?;
        Ok(())
    }
}

/// Column `name` of `table` (laid out as `def`) and its position (42703
/// when there is none).
pub(super) fn column_of<'d>(
    def: &'d eddy_common::TableDef,
    table: &str,
    name: &str,
) -> Result<(usize, &'d eddy_common::ColumnDef)> {
    def.column_index(name)
        .and_then(|i| def.columns.get(i).map(|c| (i, c)))
        .ok_or_else(|| SqlError::UndefinedColumn(format!("{name}\" of relation \"{table}")))
}
