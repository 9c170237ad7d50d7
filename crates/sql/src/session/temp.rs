//! The session's side of temporary tables (`crate::temp_tables`): name
//! resolution of each statement, the storage name CREATE TEMP TABLE takes,
//! `ON COMMIT DELETE ROWS / DROP`, and dropping the session's temporary
//! tables (DISCARD TEMP, session end).
//!
//! `ON COMMIT` runs after each commit of this session (a block's COMMIT or
//! a statement's implicit commit), as PostgreSQL runs it at commit: a
//! `DELETE ROWS` table that holds rows is emptied, a `DROP` table is
//! dropped. A temporary table is private to its session, so nobody can see
//! its rows between the commit and that step; a crash in between leaves
//! nothing either, because a restart drops every temporary table. Writes
//! to such a table never take a fixed plan (those commit on their own,
//! past this step), and an autocommit COPY into a `DELETE ROWS` table
//! empties it after its load (`crate::copy`).

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{CreateTable, Ident, ObjectName, ObjectNamePart, OnCommit};

use super::{run_blocking, Session};
use crate::error::{Result, SqlError};
use crate::fastpath::FastPlan;
use crate::temp_tables;

impl Session {
    /// Resolves the statement's names of this session's temporary tables
    /// (`temp_tables::resolve_names`), then those of user schemas'
    /// relations (`Session::resolve_schema_names`), to their storage names.
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
        )?;
        self.resolve_schema_names(stmt)
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
            if ct.on_commit.is_some() {
                return Err(SqlError::InvalidDefinition(
                    "ON COMMIT can only be used on temporary tables".into(),
                ));
            }
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

    /// Records what `ON COMMIT` does to the temporary table `storage` just
    /// created (`None`: PRESERVE ROWS, nothing).
    pub(super) fn set_temp_commit_action(&self, storage: &str, action: Option<CommitAction>) {
        let mut actions = self.temp_on_commit.lock();
        match action {
            Some(a) => actions.insert(storage.to_string(), a),
            None => actions.remove(storage),
        };
    }

    /// Whether a fixed plan must leave `plan` to the general path: it
    /// writes a temporary table with an ON COMMIT action, which runs after
    /// the general path's commit.
    pub(super) fn temp_commit_action_declines(&self, plan: &FastPlan) -> bool {
        let actions = self.temp_on_commit.lock();
        !actions.is_empty()
            && plan
                .written_table()
                .is_some_and(|t| actions.contains_key(t))
    }

    /// After a COPY outside a transaction block committed (its own
    /// commit, past the session's): the ON COMMIT actions.
    pub fn after_autocommit_copy(&self) {
        self.run_temp_commit_actions();
    }

    /// Forgets the actions of tables that are gone (a rolled-back CREATE,
    /// a DROP TABLE): a later table of the same name starts without one.
    pub(super) fn forget_dropped_temp_actions(&self) {
        let engine = &self.db.engine;
        self.temp_on_commit
            .lock()
            .retain(|name, _| engine.table(name).is_some());
    }

    /// Runs the ON COMMIT actions after a commit. The commit stands
    /// whatever happens here: a failure is logged (the table is emptied or
    /// dropped at the next commit, or at the session's end).
    pub(super) fn run_temp_commit_actions(&self) {
        if self.temp_on_commit.lock().is_empty() {
            return;
        }
        self.forget_dropped_temp_actions();
        let actions: Vec<(String, CommitAction)> = self
            .temp_on_commit
            .lock()
            .iter()
            .map(|(n, c)| (n.clone(), *c))
            .collect();
        let engine = Arc::clone(&self.db.engine);
        for (name, action) in actions {
            let r = match action {
                CommitAction::DeleteRows => match engine.table(&name) {
                    Some(t) if t.approx_row_count() > 0 => {
                        run_blocking(|| engine.truncate_table(&name))
                    }
                    _ => Ok(()),
                },
                CommitAction::Drop => run_blocking(|| engine.drop_table(&name)).map(|()| {
                    self.temp_on_commit.lock().remove(&name);
                    self.drop_owned_sequences(&name);
                }),
            };
            if let Err(e) = r {
                tracing::warn!(table = %name, error = %e, "ON COMMIT action of a temporary table failed");
            }
        }
    }
}

/// What a temporary table's `ON COMMIT` clause asks for at each commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CommitAction {
    /// `ON COMMIT DELETE ROWS`: emptied.
    DeleteRows,
    /// `ON COMMIT DROP`: dropped at the end of the creating transaction.
    Drop,
}

impl CommitAction {
    /// The action of a CREATE TABLE's clause (`PRESERVE ROWS`, or none:
    /// nothing to do).
    pub(crate) fn of(clause: Option<&OnCommit>) -> Option<CommitAction> {
        match clause? {
            OnCommit::PreserveRows => None,
            OnCommit::DeleteRows => Some(CommitAction::DeleteRows),
            OnCommit::Drop => Some(CommitAction::Drop),
        }
    }
}
