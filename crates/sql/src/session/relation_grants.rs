//! GRANT and REVOKE on views and sequences (tables: `roles_ddl.rs`).
//!
//! Both are changes of the session's transaction, as a table's grants
//! are: a view's grants are part of its definition and change through a
//! view change (`Session::change_view`, committed or dropped with the
//! transaction); a sequence's live in its file and change when the
//! transaction commits (`SequenceChange::Acl`, as OWNER TO), each change
//! built on the transaction's earlier ones. Only the owner (a member of
//! the owning role) or a superuser grants, as in PostgreSQL; the owner's
//! own privileges are implicit (`crate::privileges::change_acl`).
//!
//! What the grants allow is checked elsewhere: reading a view in
//! `Session::check_access` (SELECT on the view, and the view's relations
//! with its owner's privileges), a sequence's functions in
//! `crate::sequence_functions`.

use datafusion::sql::sqlparser::ast::{Action, Privileges as SqlPrivileges};
use eddy_common::{TablePrivileges, ViewDef};

use super::Session;
use crate::error::{Result, SqlError};
use crate::privileges::{change_acl, view_owner};
use crate::sequences::SequenceChange;

impl Session {
    /// Grants or revokes `privs` on view `view` for `grantees`.
    pub(super) fn change_view_grants(
        &mut self,
        view: ViewDef,
        privs: TablePrivileges,
        grantees: &[Option<String>],
        revoke: bool,
    ) -> Result<()> {
        self.check_view_owner(&view)?;
        let owner = view_owner(&view).to_string();
        let acl = change_acl(view.acl.clone(), privs, grantees, &owner, revoke)?;
        let name = view.name.clone();
        self.change_view(&name, Some(ViewDef { acl, ..view }))
    }

    /// Grants or revokes `privs` on sequence `name` for `grantees`, when
    /// the transaction commits.
    pub(super) fn change_sequence_grants(
        &mut self,
        name: &str,
        privs: TablePrivileges,
        grantees: &[Option<String>],
        revoke: bool,
    ) -> Result<()> {
        let def = match self.db.sequences.def(name) {
            Some(d) if self.sequence_visible(name) => d,
            _ => return Err(SqlError::UndefinedTable(name.to_string())),
        };
        let owner = def
            .owner
            .clone()
            .unwrap_or_else(|| crate::roles::BOOTSTRAP_SUPERUSER.to_string());
        let roles = &self.db.roles;
        if !roles.privileges_of(&self.user).superuser
            && !roles.effective_roles(&self.user).contains(&owner)
        {
            return Err(SqlError::InsufficientPrivilege(format!(
                "must be owner of sequence {name}"
            )));
        }
        let tag = if revoke { "REVOKE" } else { "GRANT" };
        let txn = self.ddl_txn(tag)?;
        // the grants as this transaction left them so far
        let base = txn
            .sequence_owned_by
            .iter()
            .rev()
            .find_map(|(n, c)| match c {
                SequenceChange::Acl(acl) if n == name => Some(acl.clone()),
                _ => None,
            })
            .unwrap_or(def.acl);
        let acl = change_acl(base, privs, grantees, &owner, revoke)?;
        txn.sequence_owned_by
            .push((name.to_string(), SequenceChange::Acl(acl)));
        Ok(())
    }
}

/// The sequence privileges a GRANT names (`ALL`: USAGE, SELECT and
/// UPDATE); any other is PostgreSQL's 0LP01.
pub(super) fn sequence_privileges_of(p: &SqlPrivileges) -> Result<TablePrivileges> {
    let actions = match p {
        SqlPrivileges::All { .. } => return Ok(TablePrivileges::SEQUENCE_ALL),
        SqlPrivileges::Actions(a) => a,
    };
    let mut out = TablePrivileges::NONE;
    for a in actions {
        out = out.union(match a {
            Action::Usage => TablePrivileges::USAGE,
            Action::Select { columns: None } => TablePrivileges::SELECT,
            Action::Update { columns: None } => TablePrivileges::UPDATE,
            other => {
                return Err(SqlError::InvalidGrant(format!(
                    "invalid privilege type {other} for sequence"
                )))
            }
        });
    }
    Ok(out)
}
