//! The session's side of temporary tables (`crate::temp_tables`): name
//! resolution of each statement, the storage name CREATE TEMP TABLE takes,
//! and dropping the session's temporary tables (DISCARD TEMP, session end).

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{CreateTable, Ident, ObjectName, ObjectNamePart, OnCommit};

use super::{run_blocking, Session};
use crate::error::{Result, SqlError};
use crate::temp_tables;

impl Session {
    /// Resolves the statement's names of this session's temporary tables
    /// to their storage names (`temp_tables::resolve_names`).
    pub(crate) fn resolve_temp_names(
        &self,
        stmt: &mut datafusion::sql::sqlparser::ast::Statement,
    ) -> Result<()> {
        let engine = Arc::clone(&self.db.engine);
        let index_exists = |n: &str| engine.tables().iter().any(|t| t.def().index(n).is_some());
        temp_tables::resolve_names(
            stmt,
            self.temp_id,
            &|n| engine.table(n).is_some(),
            &index_exists,
        )
    }

    /// The storage name of index `name` on table `table`: a temporary
    /// table's named index is private like the table.
    pub(super) fn index_storage_name(&self, table: &str, name: String) -> String {
        match temp_tables::parse_storage_name(table) {
            Some((owner, _)) if owner == self.temp_id => {
                temp_tables::storage_name(self.temp_id, &name)
            }
            _ => name,
        }
    }

    /// Turns a CREATE TEMP TABLE (or CREATE TABLE `pg_temp.t`) into the
    /// CREATE TABLE of its storage name. `Ok(false)`: a permanent table,
    /// left as it is (but refused a reserved name).
    pub(super) fn temp_create(&self, ct: &mut CreateTable) -> Result<bool> {
        let candidate = temp_tables::temp_candidate(&ct.name);
        let temporary = ct.temporary || matches!(candidate, Some((true, _)));
        if !temporary {
            if let Some(n) = ct.name.0.last().and_then(|p| match p {
                ObjectNamePart::Identifier(id) => Some(crate::rewrite::ident_name(id)),
                ObjectNamePart::Function(_) => None,
            }) {
                if temp_tables::is_reserved(&n) {
                    return Err(SqlError::ReservedName(format!(
                        "table name \"{n}\" is reserved for temporary tables"
                    )));
                }
            }
            return Ok(false);
        }
        match ct.on_commit {
            None | Some(OnCommit::PreserveRows) => {}
            Some(OnCommit::DeleteRows) => {
                return Err(SqlError::FeatureNotSupported(
                    "ON COMMIT DELETE ROWS is not supported".into(),
                ))
            }
            Some(OnCommit::Drop) => {
                return Err(SqlError::FeatureNotSupported(
                    "ON COMMIT DROP is not supported".into(),
                ))
            }
        }
        let Some((_, name)) = candidate else {
            return Err(SqlError::InvalidDefinition(
                "cannot create temporary relation in non-temporary schema".into(),
            ));
        };
        let storage = temp_tables::storage_name(self.temp_id, &name);
        if self.db.engine.table(&storage).is_some() && !ct.if_not_exists {
            return Err(SqlError::DuplicateTable(name));
        }
        ct.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::with_quote(
            '"', storage,
        ))]);
        ct.temporary = false;
        Ok(true)
    }

    /// Drops this session's temporary tables (and the sequences they own).
    pub(super) fn drop_temp_tables(&self) -> Result<()> {
        let engine = Arc::clone(&self.db.engine);
        for name in temp_tables::session_tables(&engine, self.temp_id) {
            run_blocking(|| engine.drop_table(&name))?;
            self.drop_owned_sequences(&name);
        }
        Ok(())
    }
}
