//! `ALTER VIEW` (read by `crate::sequence_parse`, as sqlparser does not
//! parse PostgreSQL's), and the forms of `ALTER TABLE` PostgreSQL also
//! takes for a view: RENAME TO, RENAME COLUMN and OWNER TO.
//!
//! Each is a view change of the session's transaction
//! (`Session::change_view`), so ROLLBACK undoes it and a competing change
//! of the same view fails one of the two (40001). A rename is the old
//! name dropped and the new one created with the same definition (its
//! oid, owner, grants and comment go with it), in one transaction.
//!
//! Views name the relations they read by name (`ViewDef::depends_on`,
//! the stored query text), so a view another view reads is not renamed
//! and its columns are not renamed (0A000, naming the reader), where
//! PostgreSQL, which keeps oids, lets both happen. Other actions (SET
//! SCHEMA, SET/RESET options, ALTER COLUMN ... SET DEFAULT) are refused
//! with 0A000.

use datafusion::sql::sqlparser::ast::{AlterTableOperation, Ident, RenameTableNameKind};
use eddy_common::ViewDef;

use super::{Output, Session};
use crate::error::{Result, SqlError};
use crate::rewrite::ident_name;
use crate::sequence_parse::{AlterView, AlterViewAction};

impl Session {
    /// `ALTER VIEW [IF EXISTS] name ...`.
    pub(super) fn alter_view(&mut self, a: AlterView) -> Result<Output> {
        let done = Ok(Output::Command("ALTER VIEW".into()));
        let name = crate::rewrite::table_name(&a.name)?;
        let Some(view) = self.view(&name) else {
            if self.table(&name).is_ok() || self.sequence_visible(&name) {
                return Err(SqlError::WrongObjectType(format!(
                    "\"{name}\" is not a view"
                )));
            }
            if a.if_exists {
                self.notice(
                    "00000",
                    &format!("relation \"{name}\" does not exist, skipping"),
                );
                return done;
            }
            return Err(SqlError::UndefinedTable(name));
        };
        match a.action {
            AlterViewAction::RenameTo(new) => self.rename_view(view, &new)?,
            AlterViewAction::RenameColumn { from, to } => {
                self.rename_view_column(view, &from, &to)?
            }
            AlterViewAction::OwnerTo(owner) => self.alter_view_owner(view, &owner)?,
            AlterViewAction::Unsupported(words) => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "ALTER VIEW ... {words} is not supported"
                )))
            }
        }
        done
    }

    /// `ALTER TABLE view ...` with one operation PostgreSQL takes for a
    /// view: `None` when `ops` is not one of them (the caller reports the
    /// view as no table).
    pub(super) fn alter_table_on_view(
        &mut self,
        view: ViewDef,
        ops: &[AlterTableOperation],
    ) -> Option<Result<()>> {
        match ops {
            [AlterTableOperation::OwnerTo { new_owner }] => {
                Some(self.alter_view_owner(view, new_owner))
            }
            [AlterTableOperation::RenameTable {
                table_name: RenameTableNameKind::To(new) | RenameTableNameKind::As(new),
            }] => Some(match new.0.as_slice() {
                [part] => match part.as_ident() {
                    Some(id) => self.rename_view(view, id),
                    None => Err(SqlError::Syntax(format!("bad view name {new}"))),
                },
                _ => Err(SqlError::FeatureNotSupported(
                    "RENAME TO a qualified name is not supported (use SET SCHEMA)".into(),
                )),
            }),
            [AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            }] => Some(self.rename_view_column(view, old_column_name, new_column_name)),
            _ => None,
        }
    }

    /// Renames `view` to `new` in its own schema.
    fn rename_view(&mut self, view: ViewDef, new: &Ident) -> Result<()> {
        self.check_view_owner(&view)?;
        let schemas = self.visible_schema_names();
        let (schema, _) = crate::schemas::split(&view.name, &schemas);
        let bare = ident_name(new);
        let new_name = if schema == crate::schemas::PUBLIC {
            bare.clone()
        } else {
            format!("{schema}.{bare}")
        };
        if new_name == view.name {
            return Ok(());
        }
        if crate::temp_tables::is_reserved(&new_name) {
            return Err(SqlError::FeatureNotSupported(
                "a view cannot take a temporary relation's name".into(),
            ));
        }
        self.refuse_renaming_read_view(&view, "rename")?;
        self.free_dropped_table_name(&new_name)?;
        self.refuse_replacing_dropped_sequence(&new_name, "view")?;
        if self.table(&new_name).is_ok()
            || self.view(&new_name).is_some()
            || self.sequence_visible(&new_name)
        {
            return Err(SqlError::DuplicateTable(bare));
        }
        let old = view.name.clone();
        self.change_view(&old, None)?;
        self.change_view(
            &new_name.clone(),
            Some(ViewDef {
                name: new_name,
                ..view
            }),
        )
    }

    /// Renames column `from` of `view` to `to`.
    fn rename_view_column(&mut self, mut view: ViewDef, from: &Ident, to: &Ident) -> Result<()> {
        self.check_view_owner(&view)?;
        let (from, to) = (ident_name(from), ident_name(to));
        if !view.columns.iter().any(|c| c.name == from) {
            return Err(SqlError::UndefinedColumn(from));
        }
        if view.columns.iter().any(|c| c.name == to) {
            return Err(eddy_storage::StorageError::ColumnExists {
                table: view.name,
                column: to,
            }
            .into());
        }
        self.refuse_renaming_read_view(&view, "rename a column of")?;
        for c in &mut view.columns {
            if c.name == from {
                c.name = to.clone();
            }
        }
        let name = view.name.clone();
        self.change_view(&name, Some(view))
    }

    /// 0A000 when another view reads `view` (module doc).
    fn refuse_renaming_read_view(&self, view: &ViewDef, what: &str) -> Result<()> {
        let reader = self
            .visible_views()
            .into_iter()
            .find(|v| v.depends_on.contains(&view.name));
        match reader {
            Some(r) => Err(SqlError::FeatureNotSupported(format!(
                "cannot {what} view {} while view {} reads it (Eddy's views name their relations and columns by name)\nHINT:  Drop view {} first, then create it again.",
                view.name, r.name, r.name
            ))),
            None => Ok(()),
        }
    }
}
