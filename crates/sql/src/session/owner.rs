//! `ALTER TABLE name OWNER TO role` (also `ALTER VIEW`/`ALTER SEQUENCE`
//! spelt as ALTER TABLE, as pg_dump writes them).
//!
//! A table's owner is part of its definition (`TableDef::owner`): the
//! change is a catalog change of the session's transaction, and the grants
//! the old owner made are kept, now made by the new one (PostgreSQL's
//! `aclnewowner`). As in PostgreSQL, only the owner (or a superuser) may
//! give a table away, and only to a role it is a member of.
//!
//! A view's owner (`ViewDef::owner`) is changed the same way, as a view
//! change of the transaction. Nothing is checked against what the view
//! reads: a view's query runs with its owner's privileges, checked at
//! every use (`Session::check_access`), so a new owner who may not read a
//! table the view reads makes the view fail (42501), as in PostgreSQL.
//!
//! A sequence's owner (`SequenceDef::owner`, its creator by default) is
//! changed at commit too (`sequence_alter.rs`); it may alter the
//! sequence, as may the owner of the table owning it.
//!
//! The schema `public`, owned by the bootstrap superuser, keeps its
//! owner: `ALTER SCHEMA public OWNER TO` that owner (which a pg_dump of
//! Eddy writes) changes nothing and is accepted; any other role is
//! refused (0A000), never recorded and ignored. Any other ALTER SCHEMA is
//! refused here.

use datafusion::sql::sqlparser::ast::{AlterSchema, AlterSchemaOperation, Owner};

use super::Session;
use crate::error::{Result, SqlError};
use crate::privileges::owner_of;
use crate::rewrite::ident_name;
use eddy_common::ViewDef;

impl Session {
    /// The role `OWNER TO` names, which must exist.
    pub(super) fn new_owner(&self, owner: &Owner) -> Result<String> {
        let name = match owner {
            Owner::Ident(id) => ident_name(id),
            Owner::CurrentRole | Owner::CurrentUser | Owner::SessionUser => self.user.clone(),
        };
        if self.db.roles.get(&name).is_none() {
            return Err(SqlError::UndefinedObject(format!(
                "role \"{name}\" does not exist"
            )));
        }
        Ok(name)
    }

    /// `ALTER TABLE table OWNER TO owner`; the table is locked for the
    /// change by the caller.
    pub(super) fn alter_table_owner(&mut self, table: &str, owner: &Owner) -> Result<()> {
        let new_owner = self.new_owner(owner)?;
        let Some(current) = self.db.engine.table(table) else {
            return Err(SqlError::UndefinedTable(table.to_string()));
        };
        let def = current.def();
        let old_owner = owner_of(def).to_string();
        if old_owner == new_owner {
            return Ok(());
        }
        let superuser = self.db.roles.privileges_of(&self.user).superuser;
        let mine = self.db.roles.effective_roles(&self.user);
        if !superuser {
            if !mine.contains(&old_owner) {
                return Err(SqlError::InsufficientPrivilege(format!(
                    "must be owner of table {table}"
                )));
            }
            if !mine.contains(&new_owner) {
                return Err(SqlError::InsufficientPrivilege(format!(
                    "must be able to SET ROLE \"{new_owner}\""
                )));
            }
            if !self.db.roles.may_create_in_public(&new_owner) {
                return Err(SqlError::InsufficientPrivilege(
                    "permission denied for schema public".into(),
                ));
            }
        }
        let mut acl = def.acl.clone();
        for item in &mut acl {
            if item.grantor == old_owner {
                item.grantor = new_owner.clone();
            }
        }
        // the new owner's own privileges are implicit: a grant to it goes
        acl.retain(|a| a.grantee.as_deref() != Some(new_owner.as_str()));
        let name = def.name.clone();
        self.ddl_change(|ddl| ddl.set_access(&name, Some(new_owner), acl))?;
        Ok(())
    }

    /// PostgreSQL's rule for `OWNER TO` of an object other than a table
    /// (`what`: "view v"): a superuser may; anyone else must own it
    /// (`owns`) and be a member of the new owner (42501 otherwise).
    pub(super) fn check_owner_change(&self, what: &str, owns: bool, new_owner: &str) -> Result<()> {
        let roles = &self.db.roles;
        if roles.privileges_of(&self.user).superuser {
            return Ok(());
        }
        if !owns {
            return Err(SqlError::InsufficientPrivilege(format!(
                "must be owner of {what}"
            )));
        }
        if !roles.effective_roles(&self.user).contains(new_owner) {
            return Err(SqlError::InsufficientPrivilege(format!(
                "must be able to SET ROLE \"{new_owner}\""
            )));
        }
        Ok(())
    }

    /// `ALTER TABLE view OWNER TO owner` (as pg_dump writes it for views).
    pub(super) fn alter_view_owner(&mut self, view: ViewDef, owner: &Owner) -> Result<()> {
        let new_owner = self.new_owner(owner)?;
        let old_owner = view
            .owner
            .clone()
            .unwrap_or_else(|| crate::roles::BOOTSTRAP_SUPERUSER.to_string());
        if old_owner == new_owner {
            return Ok(());
        }
        let owns = self
            .db
            .roles
            .effective_roles(&self.user)
            .contains(&old_owner);
        self.check_owner_change(&format!("view {}", view.name), owns, &new_owner)?;
        let name = view.name.clone();
        let changed = ViewDef {
            owner: Some(new_owner),
            ..view
        };
        self.change_view(&name, Some(changed))
    }

    /// `ALTER SCHEMA public OWNER TO` its owner (module doc).
    pub(super) fn alter_schema(&self, alter: &AlterSchema) -> Result<()> {
        let schema = crate::rewrite::table_name(&alter.name)?;
        if schema != "public" {
            return Err(if alter.if_exists {
                SqlError::FeatureNotSupported(format!(
                    "ALTER SCHEMA {schema}: Eddy has one schema, public"
                ))
            } else {
                SqlError::UndefinedSchema(format!("schema \"{schema}\" does not exist"))
            });
        }
        for operation in &alter.operations {
            match operation {
                AlterSchemaOperation::OwnerTo { owner } => self.alter_fixed_owner(
                    "schema",
                    "public",
                    crate::roles::BOOTSTRAP_SUPERUSER,
                    owner,
                )?,
                other => {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "ALTER SCHEMA public {other} is not supported"
                    )))
                }
            }
        }
        Ok(())
    }

    /// `OWNER TO` of schema public, whose owner is `current`.
    pub(super) fn alter_fixed_owner(
        &self,
        kind: &str,
        name: &str,
        current: &str,
        owner: &Owner,
    ) -> Result<()> {
        let new_owner = self.new_owner(owner)?;
        if new_owner == current {
            return Ok(());
        }
        Err(SqlError::FeatureNotSupported(format!(
            "changing the owner of {kind} \"{name}\" (owned by \"{current}\") is not supported"
        )))
    }
}
