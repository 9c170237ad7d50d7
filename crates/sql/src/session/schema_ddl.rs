//! The session's side of schemas (`crate::schemas`): the schemas it sees,
//! name resolution of each statement under its search path, `CREATE
//! SCHEMA`, `DROP SCHEMA`, `ALTER SCHEMA`, `GRANT/REVOKE ... ON SCHEMA`,
//! and the USAGE and CREATE privileges a statement needs on them.
//!
//! A schema change is the transaction's own until it commits
//! (`Transaction::schema_changes`, recorded in storage at the commit
//! point: `eddy_storage::schemas`), as a view change is. Creating a
//! relation in a schema takes the schema's lock shared, dropping or
//! renaming the schema takes it exclusively (PostgreSQL's locks on the
//! namespace), so no relation can be created in a schema being dropped.
//!
//! As in PostgreSQL: only a superuser creates schemas (Eddy's database is
//! owned by the bootstrap superuser and CREATE on it cannot be granted);
//! a schema's owner (and superusers) may use it, create in it, drop it and
//! grant USAGE and CREATE on it; anyone else needs USAGE to reach its
//! relations and CREATE to create in it; DROP SCHEMA refuses a schema that
//! holds relations unless CASCADE, which drops them.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    Action, AlterSchema, AlterSchemaOperation, CopySource, ObjectName, ObjectNamePart,
    Privileges as SqlPrivileges, SchemaName, Statement,
};
use eddy_common::SchemaDef;
use eddy_storage::schemas::SchemaChange;
use eddy_storage::LockMode;

use super::{run_blocking, Output, Session};
use crate::error::{ErrorObject, Result, SqlError};
use crate::rewrite::ident_name;
use crate::roles::BOOTSTRAP_SUPERUSER;
use crate::schemas::{self, parse_acl_item, Scope, PUBLIC};

/// The relations of one schema, by kind (storage names).
#[derive(Default)]
struct Contents {
    tables: Vec<String>,
    views: Vec<String>,
    sequences: Vec<String>,
}

impl Contents {
    fn is_empty(&self) -> bool {
        self.tables.is_empty() && self.views.is_empty() && self.sequences.is_empty()
    }

    /// PostgreSQL's DETAIL lines (`table app.t`, ...).
    fn detail(&self, schemas: &[String], suffix: &str) -> String {
        let shown = |kind: &str, n: &String| {
            let (s, r) = schemas::split(n, schemas);
            format!("{kind} {s}.{r}{suffix}")
        };
        self.tables
            .iter()
            .map(|n| shown("table", n))
            .chain(self.views.iter().map(|n| shown("view", n)))
            .chain(self.sequences.iter().map(|n| shown("sequence", n)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn len(&self) -> usize {
        self.tables.len() + self.views.len() + self.sequences.len()
    }
}

/// `USAGE` and `CREATE` as `nspacl` letters.
const USAGE: char = 'U';
const CREATE: char = 'C';

impl Session {
    /// The user schemas this session sees: the committed ones with its
    /// transaction's changes.
    /// Shared, not copied, while the transaction changed none (every
    /// statement reads them to resolve its names).
    pub(crate) fn visible_schemas(&self) -> Arc<Vec<SchemaDef>> {
        let committed = self.db.engine.schemas_shared();
        match &self.txn {
            Some(t) if !t.schema_changes.is_empty() => {
                let mut all = committed.as_ref().clone();
                eddy_storage::schemas::apply(&mut all, &t.schema_changes);
                Arc::new(all)
            }
            _ => committed,
        }
    }

    /// The names of [`Session::visible_schemas`].
    pub(super) fn visible_schema_names(&self) -> Vec<String> {
        self.visible_schemas()
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }

    fn sees_schemas(&self) -> bool {
        self.db.engine.has_schemas()
            || self
                .txn
                .as_ref()
                .is_some_and(|t| !t.schema_changes.is_empty())
    }

    fn schema_def(&self, name: &str) -> Option<SchemaDef> {
        self.visible_schemas()
            .iter()
            .find(|s| s.name == name)
            .cloned()
    }

    /// The search path's schemas that exist and the user may use (USAGE:
    /// PostgreSQL skips the others), in order, and every user schema's
    /// name.
    fn path_and_schemas(&self) -> (Vec<String>, Vec<String>) {
        let visible = self.visible_schemas();
        let value = self
            .settings
            .get("search_path")
            .map_or("\"$user\", public", String::as_str);
        let path = schemas::path_elements(value, &self.user)
            .into_iter()
            .filter(|e| {
                e == PUBLIC
                    || visible
                        .iter()
                        .find(|s| s.name == *e)
                        .is_some_and(|s| self.schema_privileges(s).contains(&USAGE))
            })
            .collect();
        (path, visible.iter().map(|s| s.name.clone()).collect())
    }

    /// The search path's existing schemas (`current_schemas`).
    pub(crate) fn effective_path(&self) -> Vec<String> {
        if !self.sees_schemas() {
            let on = self
                .settings
                .get("search_path")
                .is_none_or(|p| crate::search_path::names_public(p));
            return if on {
                vec![PUBLIC.to_string()]
            } else {
                Vec::new()
            };
        }
        self.path_and_schemas().0
    }

    /// Resolves the names of `stmt` that mean relations of user schemas
    /// (`crate::schemas::resolve_names`); nothing to do while there are
    /// none.
    pub(crate) fn resolve_schema_names(&self, stmt: &mut Statement) -> Result<()> {
        if !self.sees_schemas() {
            return Ok(());
        }
        self.with_scope(|scope| schemas::resolve_names(stmt, scope))
    }

    /// [`Session::resolve_schema_names`] of one name of a command Eddy
    /// parses itself (`created`: a name it creates).
    pub(crate) fn resolve_schema_name(&self, name: &mut ObjectName, created: bool) -> Result<()> {
        if !self.sees_schemas() {
            return Ok(());
        }
        self.with_scope(|scope| schemas::resolve_name(name, scope, created))
    }

    fn with_scope<R>(&self, f: impl FnOnce(&Scope<'_>) -> R) -> R {
        let (path, names) = self.path_and_schemas();
        let engine = Arc::clone(&self.db.engine);
        let relation_exists = |n: &str| {
            engine.table(n).is_some() || self.view(n).is_some() || self.db.sequences.exists(n)
        };
        let index_exists = |n: &str| engine.tables().iter().any(|t| t.def().index(n).is_some());
        let scope = Scope {
            schemas: &names,
            path: &path,
            relation_exists: &relation_exists,
            index_exists: &index_exists,
        };
        f(&scope)
    }

    /// `e` as the client sees it: naming user schemas' relations as
    /// PostgreSQL names them in messages (`crate::schemas::user_text`).
    pub(crate) fn shown_error(&self, e: SqlError) -> SqlError {
        let object = e.raw_object().map(|raw| self.shown_object(raw));
        let e = self.shown_in_schemas(e);
        match object {
            Some(object) => e.about(object),
            None => e,
        }
    }

    /// An error's object fields as the user names things: the schema
    /// split from the relation's storage name, a temporary table by its
    /// own name (no schema), the table of a unique index found by the
    /// index's name.
    fn shown_object(&self, raw: ErrorObject) -> ErrorObject {
        let names: Vec<String> = if self.sees_schemas() {
            self.visible_schema_names()
        } else {
            Vec::new()
        };
        let table = raw.table.or_else(|| {
            let index = raw.constraint.as_deref()?;
            self.db
                .engine
                .tables()
                .into_iter()
                .find(|t| t.def().indexes.iter().any(|i| i.name == index))
                .map(|t| t.def().name.clone())
        });
        let (schema, table) = match table {
            Some(t) if crate::temp_tables::is_reserved(&t) => {
                (None, Some(crate::temp_tables::shown_name(&t).to_string()))
            }
            Some(t) => {
                let (schema, name) = schemas::split(&t, &names);
                (Some(schema.to_string()), Some(name.to_string()))
            }
            None => (None, None),
        };
        let constraint = raw
            .constraint
            .map(|c| crate::temp_tables::user_text(schemas::split(&c, &names).1));
        ErrorObject {
            schema,
            table,
            column: raw.column,
            constraint,
        }
    }

    /// `e` with the storage names in its message and detail as the user
    /// names the relations.
    fn shown_in_schemas(&self, e: SqlError) -> SqlError {
        if !self.sees_schemas() {
            return e;
        }
        let names: Vec<String> = self.visible_schema_names();
        let message = e.client_message();
        let shown = schemas::user_text(&message, &names);
        let detail = e.detail();
        let shown_detail = detail.as_deref().map(|d| schemas::user_text(d, &names));
        if shown == message && shown_detail == detail {
            return e;
        }
        SqlError::InSchemas {
            inner: Box::new(e),
            message: shown,
            detail: shown_detail,
        }
    }

    /// Whether `name` is the storage name of a user schema's relation
    /// (such a name is qualified, whatever the search path).
    pub(crate) fn is_schema_storage_name(&self, name: &str) -> bool {
        if !self.sees_schemas() {
            return false;
        }
        let names: Vec<String> = self.visible_schema_names();
        schemas::split(name, &names).0 != PUBLIC
    }

    /// The privileges (`U`, `C`) the session's user holds on `schema`.
    fn schema_privileges(&self, schema: &SchemaDef) -> HashSet<char> {
        let roles = &self.db.roles;
        schemas::held_privileges(
            schema,
            roles.privileges_of(&self.user).superuser,
            &roles.effective_roles(&self.user),
        )
        .chars()
        .collect()
    }

    /// Refuses (42501) a statement that reaches a user schema's relation
    /// without USAGE on the schema, or creates one there without CREATE.
    pub(crate) fn check_schema_access(&self, stmt: &Statement) -> Result<()> {
        if !self.sees_schemas() || self.db.roles.privileges_of(&self.user).superuser {
            return Ok(());
        }
        let schemas = self.visible_schemas();
        let names: Vec<String> = schemas.iter().map(|s| s.name.clone()).collect();
        let (named, created) = named_relations(stmt);
        for (storage, creates) in named
            .iter()
            .map(|n| (n, false))
            .chain(created.iter().map(|n| (n, true)))
        {
            let (schema, _) = schemas::split(storage, &names);
            let Some(def) = schemas.iter().find(|s| s.name == schema) else {
                continue;
            };
            let held = self.schema_privileges(def);
            let need = if creates { CREATE } else { USAGE };
            if !held.contains(&need) {
                return Err(SqlError::InsufficientPrivilege(format!(
                    "permission denied for schema {schema}"
                )));
            }
        }
        Ok(())
    }

    /// Takes the lock of the schema `storage` (a relation's storage name
    /// about to be created) is in, shared: a DROP SCHEMA waits for this
    /// transaction, and this one for a DROP in progress (then the schema
    /// may be gone: 3F000).
    pub(super) fn lock_schema_of(&mut self, storage: &str) -> Result<()> {
        if !self.sees_schemas() {
            return Ok(());
        }
        let schemas = self.visible_schemas();
        let names: Vec<String> = schemas.iter().map(|s| s.name.clone()).collect();
        let (schema, _) = schemas::split(storage, &names);
        let Some(def) = schemas.iter().find(|s| s.name == schema) else {
            return Ok(());
        };
        let Some(t) = self.txn.as_ref() else {
            return Ok(());
        };
        run_blocking(|| t.lock_schema(def.id, &def.name, LockMode::Shared))?;
        if self.schema_def(schema).is_none_or(|now| now.id != def.id) {
            return Err(SqlError::UndefinedSchema(format!(
                "schema \"{schema}\" does not exist"
            )));
        }
        Ok(())
    }

    /// The relations schema `name` holds; sequences a table owns go with
    /// the table and are not listed.
    fn schema_contents(&self, name: &str, names: &[String]) -> Contents {
        let in_schema = |n: &str| schemas::split(n, names).0 == name;
        let mut c = Contents::default();
        for t in self.db.engine.tables() {
            if in_schema(&t.def().name) {
                c.tables.push(t.def().name.clone());
            }
        }
        for v in self.visible_views() {
            if in_schema(&v.name) {
                c.views.push(v.name);
            }
        }
        for (s, _) in self.db.sequences.list() {
            if in_schema(&s.name) && s.owned_by.is_none() {
                c.sequences.push(s.name);
            }
        }
        c.tables.sort();
        c.views.sort();
        c.sequences.sort();
        c
    }

    /// `CREATE SCHEMA [IF NOT EXISTS] name [AUTHORIZATION role]`.
    pub(super) fn create_schema(
        &mut self,
        schema_name: &SchemaName,
        if_not_exists: bool,
        has_options: bool,
    ) -> Result<Output> {
        if has_options {
            return Err(SqlError::FeatureNotSupported(
                "CREATE SCHEMA options (WITH, OPTIONS, DEFAULT COLLATE, CLONE) are not supported"
                    .into(),
            ));
        }
        let (name, owner) = match schema_name {
            SchemaName::Simple(n) => (single_name(n)?, None),
            SchemaName::UnnamedAuthorization(role) => (ident_name(role), Some(ident_name(role))),
            SchemaName::NamedAuthorization(n, role) => (single_name(n)?, Some(ident_name(role))),
        };
        if !self.db.roles.privileges_of(&self.user).superuser {
            return Err(SqlError::InsufficientPrivilege(format!(
                "permission denied for database {}",
                self.db.name
            )));
        }
        if let Some(role) = &owner {
            if self.db.roles.get(role).is_none() {
                return Err(SqlError::UndefinedObject(format!(
                    "role \"{role}\" does not exist"
                )));
            }
        }
        let exists = schemas::is_system_schema(&name) || self.schema_def(&name).is_some();
        if exists {
            if if_not_exists {
                self.notice(
                    "42P06",
                    &format!("schema \"{name}\" already exists, skipping"),
                );
                return Ok(Output::Command("CREATE SCHEMA".into()));
            }
            return Err(SqlError::DuplicateSchema(format!(
                "schema \"{name}\" already exists"
            )));
        }
        check_new_schema_name(&name)?;
        let prefix = format!("{name}.");
        let clash = self
            .db
            .engine
            .tables()
            .iter()
            .map(|t| t.def().name.clone())
            .chain(self.visible_views().into_iter().map(|v| v.name))
            .chain(self.db.sequences.names())
            .find(|n| n.starts_with(&prefix));
        if let Some(n) = clash {
            return Err(SqlError::FeatureNotSupported(format!(
                "CREATE SCHEMA {name}: relation \"{n}\" of schema public begins with the schema's name and a dot; Eddy could not tell it from a relation of the schema (rename it first)"
            )));
        }
        let engine = Arc::clone(&self.db.engine);
        let id = run_blocking(|| engine.reserve_relation_id())?;
        let def = SchemaDef {
            id,
            name: name.clone(),
            owner: owner.filter(|o| o != BOOTSTRAP_SUPERUSER),
            acl: Vec::new(),
            comment: None,
            version: 0,
        };
        let t = self.ddl_txn("CREATE SCHEMA")?;
        t.schema_changes.push(SchemaChange {
            name,
            base_version: None,
            new: Some(def),
        });
        Ok(Output::Command("CREATE SCHEMA".into()))
    }

    /// Refuses (42501) unless the user owns `schema` (or is a superuser).
    fn check_schema_owner(&self, schema: &SchemaDef) -> Result<()> {
        let roles = &self.db.roles;
        if roles.privileges_of(&self.user).superuser {
            return Ok(());
        }
        let owner = schema.owner.as_deref().unwrap_or(BOOTSTRAP_SUPERUSER);
        if roles.effective_roles(&self.user).contains(owner) {
            return Ok(());
        }
        Err(SqlError::InsufficientPrivilege(format!(
            "must be owner of schema {}",
            schema.name
        )))
    }

    /// Locks `schema` exclusively in the session's transaction; returns
    /// it as it is once locked (it may have been dropped meanwhile).
    fn lock_schema_exclusive(&mut self, schema: &SchemaDef) -> Result<SchemaDef> {
        let t = self.ddl_txn("a schema lock")?;
        run_blocking(|| t.lock_schema(schema.id, &schema.name, LockMode::Exclusive))?;
        match self.schema_def(&schema.name) {
            Some(now) if now.id == schema.id => Ok(now),
            _ => Err(SqlError::UndefinedSchema(format!(
                "schema \"{}\" does not exist",
                schema.name
            ))),
        }
    }

    /// `DROP SCHEMA [IF EXISTS] names [CASCADE | RESTRICT]`.
    pub(super) fn drop_schemas(
        &mut self,
        names: &[ObjectName],
        if_exists: bool,
        cascade: bool,
    ) -> Result<Output> {
        for n in names {
            let name = single_name(n)?;
            let Some(schema) = self.schema_def(&name) else {
                if schemas::is_system_schema(&name) {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "DROP SCHEMA {name}: schema {name} is part of every Eddy database"
                    )));
                }
                if if_exists {
                    self.notice(
                        "00000",
                        &format!("schema \"{name}\" does not exist, skipping"),
                    );
                    continue;
                }
                return Err(SqlError::UndefinedSchema(format!(
                    "schema \"{name}\" does not exist"
                )));
            };
            self.check_schema_owner(&schema)?;
            let schema = self.lock_schema_exclusive(&schema)?;
            let all: Vec<String> = self.visible_schema_names();
            let contents = self.schema_contents(&name, &all);
            if !contents.is_empty() {
                if !cascade {
                    return Err(SqlError::DependentObjects(format!(
                        "cannot drop schema {name} because other objects depend on it\nDETAIL:  {}\nHINT:  Use DROP ... CASCADE to drop the dependent objects too.",
                        contents.detail(&all, &format!(" depends on schema {name}"))
                    )));
                }
                let detail = contents.detail(&all, "");
                let message = if contents.len() == 1 {
                    format!("drop cascades to {detail}")
                } else {
                    format!(
                        "drop cascades to {} other objects\nDETAIL:  drop cascades to {}",
                        contents.len(),
                        detail.replace('\n', "\ndrop cascades to ")
                    )
                };
                self.notice("00000", &message);
                let quoted = |v: &Vec<String>| -> Vec<ObjectName> {
                    v.iter()
                        .map(|n| {
                            ObjectName(vec![ObjectNamePart::Identifier(
                                datafusion::sql::sqlparser::ast::Ident::with_quote('"', n.clone()),
                            )])
                        })
                        .collect()
                };
                if !contents.views.is_empty() {
                    self.drop_views(&quoted(&contents.views), true, true)?;
                }
                if !contents.tables.is_empty() {
                    self.drop_tables(quoted(&contents.tables), true, true)?;
                }
                if !contents.sequences.is_empty() {
                    self.drop_sequence_statement(&quoted(&contents.sequences), true)?;
                }
            }
            let t = self.ddl_txn("DROP SCHEMA")?;
            t.schema_changes.push(SchemaChange {
                name,
                base_version: Some(schema.version),
                new: None,
            });
        }
        Ok(Output::Command("DROP SCHEMA".into()))
    }

    /// `ALTER SCHEMA` of a user schema: RENAME TO (of a schema without
    /// relations) and OWNER TO. `Ok(false)`: not a user schema.
    pub(super) fn alter_user_schema(&mut self, alter: &AlterSchema) -> Result<bool> {
        let name = single_name(&alter.name)?;
        let Some(schema) = self.schema_def(&name) else {
            return Ok(false);
        };
        self.check_schema_owner(&schema)?;
        let mut schema = self.lock_schema_exclusive(&schema)?;
        let base = schema.version;
        let mut new_name = name.clone();
        for operation in &alter.operations {
            match operation {
                AlterSchemaOperation::OwnerTo { owner } => {
                    let role = self.new_owner(owner)?;
                    let superuser = self.db.roles.privileges_of(&self.user).superuser;
                    if !superuser && !self.db.roles.effective_roles(&self.user).contains(&role) {
                        return Err(SqlError::InsufficientPrivilege(format!(
                            "must be able to SET ROLE \"{role}\""
                        )));
                    }
                    let old = schema
                        .owner
                        .clone()
                        .unwrap_or_else(|| BOOTSTRAP_SUPERUSER.to_string());
                    schema.acl = schema
                        .acl
                        .iter()
                        .filter_map(|item| parse_acl_item(item))
                        .filter(|(grantee, _, _)| *grantee != role)
                        .map(|(grantee, privs, grantor)| {
                            let grantor = if grantor == old {
                                role.clone()
                            } else {
                                grantor
                            };
                            format!("{grantee}={privs}/{grantor}")
                        })
                        .collect();
                    schema.owner = Some(role).filter(|r| r != BOOTSTRAP_SUPERUSER);
                }
                AlterSchemaOperation::Rename { name: to } => {
                    let to = single_name(to)?;
                    if schemas::is_system_schema(&to) || self.schema_def(&to).is_some() {
                        return Err(SqlError::DuplicateSchema(format!(
                            "schema \"{to}\" already exists"
                        )));
                    }
                    check_new_schema_name(&to)?;
                    let all: Vec<String> = self.visible_schema_names();
                    if !self.schema_contents(&name, &all).is_empty() {
                        return Err(SqlError::FeatureNotSupported(format!(
                            "ALTER SCHEMA {name} RENAME of a schema that holds relations is not supported; rename it while it is empty"
                        )));
                    }
                    new_name = to.clone();
                    schema.name = to;
                }
                other => {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "ALTER SCHEMA ... {other} is not supported"
                    )))
                }
            }
        }
        let t = self.ddl_txn("ALTER SCHEMA")?;
        if new_name == name {
            t.schema_changes.push(SchemaChange {
                name,
                base_version: Some(base),
                new: Some(schema),
            });
        } else {
            t.schema_changes.push(SchemaChange {
                name,
                base_version: Some(base),
                new: None,
            });
            t.schema_changes.push(SchemaChange {
                name: new_name,
                base_version: None,
                new: Some(schema),
            });
        }
        Ok(true)
    }

    /// `GRANT/REVOKE USAGE | CREATE | ALL ON SCHEMA s TO grantees` of
    /// user schemas (`schemas` names no `public`).
    pub(super) fn grant_on_user_schemas(
        &mut self,
        privileges: &SqlPrivileges,
        schemas_named: &[String],
        grantees: &[Option<String>],
        revoke: bool,
    ) -> Result<()> {
        let letters: Vec<char> = match privileges {
            SqlPrivileges::All { .. } => vec![USAGE, CREATE],
            SqlPrivileges::Actions(actions) => actions
                .iter()
                .map(|a| match a {
                    Action::Usage => Ok(USAGE),
                    Action::Create { obj_type: None } => Ok(CREATE),
                    other => Err(SqlError::InvalidGrant(format!(
                        "invalid privilege type {other} for schema"
                    ))),
                })
                .collect::<Result<_>>()?,
        };
        for name in schemas_named {
            let Some(schema) = self.schema_def(name) else {
                return Err(SqlError::UndefinedSchema(format!(
                    "schema \"{name}\" does not exist"
                )));
            };
            self.check_schema_owner(&schema)?;
            let mut schema = self.lock_schema_exclusive(&schema)?;
            let grantor = schema
                .owner
                .clone()
                .unwrap_or_else(|| BOOTSTRAP_SUPERUSER.to_string());
            let mut items: Vec<(String, String, String)> = schema
                .acl
                .iter()
                .filter_map(|item| parse_acl_item(item))
                .collect();
            for g in grantees {
                let grantee = g.clone().unwrap_or_default();
                if grantee == grantor {
                    // the owner's privileges are its own
                    continue;
                }
                match items.iter_mut().find(|(who, _, _)| *who == grantee) {
                    Some((_, privs, _)) => {
                        let mut set: Vec<char> = privs.chars().collect();
                        for l in &letters {
                            if revoke {
                                set.retain(|c| c != l);
                            } else if !set.contains(l) {
                                set.push(*l);
                            }
                        }
                        set.sort_by_key(|c| if *c == USAGE { 0 } else { 1 });
                        *privs = set.into_iter().collect();
                    }
                    None if !revoke => {
                        items.push((grantee, letters.iter().collect(), grantor.clone()));
                    }
                    None => {}
                }
            }
            items.retain(|(_, privs, _)| !privs.is_empty());
            schema.acl = items
                .into_iter()
                .map(|(grantee, privs, grantor)| format!("{grantee}={privs}/{grantor}"))
                .collect();
            let base = schema.version;
            let t = self.ddl_txn("GRANT ON SCHEMA")?;
            t.schema_changes.push(SchemaChange {
                name: name.clone(),
                base_version: Some(base),
                new: Some(schema),
            });
        }
        Ok(())
    }

    /// `COMMENT ON SCHEMA s IS ...` of a user schema.
    pub(super) fn comment_on_schema(&mut self, name: &str, comment: Option<String>) -> Result<()> {
        let Some(schema) = self.schema_def(name) else {
            return Err(SqlError::UndefinedSchema(format!(
                "schema \"{name}\" does not exist"
            )));
        };
        self.check_schema_owner(&schema)?;
        let mut schema = self.lock_schema_exclusive(&schema)?;
        schema.comment = comment.filter(|c| !c.is_empty());
        let base = schema.version;
        let t = self.ddl_txn("COMMENT ON SCHEMA")?;
        t.schema_changes.push(SchemaChange {
            name: name.to_string(),
            base_version: Some(base),
            new: Some(schema),
        });
        Ok(())
    }
}

/// A schema's name: one identifier.
fn single_name(name: &ObjectName) -> Result<String> {
    match name.0.as_slice() {
        [ObjectNamePart::Identifier(id)] => Ok(ident_name(id)),
        _ => Err(SqlError::Syntax(format!(
            "improper qualified name (too many dotted names): {name}"
        ))),
    }
}

/// What a new schema's name may not be (module doc of `crate::schemas`).
fn check_new_schema_name(name: &str) -> Result<()> {
    if name.starts_with("pg_") {
        return Err(SqlError::ReservedName(format!(
            "unacceptable schema name \"{name}\"\nDETAIL:  The prefix \"pg_\" is reserved for system schemas."
        )));
    }
    if name.contains('.') || name.is_empty() {
        return Err(SqlError::FeatureNotSupported(format!(
            "schema name \"{name}\": a schema name with a dot is not supported"
        )));
    }
    Ok(())
}

/// The storage names `stmt` reaches and the ones it creates (resolved
/// names: see `crate::schemas`).
fn named_relations(stmt: &Statement) -> (Vec<String>, Vec<String>) {
    let mut named = Vec::new();
    let mut created = Vec::new();
    let one = |n: &ObjectName| crate::rewrite::table_name(n).ok();
    match stmt {
        Statement::CreateTable(ct) => created.extend(one(&ct.name)),
        Statement::CreateView(cv) => created.extend(one(&cv.name)),
        Statement::CreateSequence { name, .. } => created.extend(one(name)),
        Statement::CreateIndex(ci) => created.extend(ci.name.as_ref().and_then(one)),
        Statement::Drop { names, .. } => named.extend(names.iter().filter_map(one)),
        Statement::Copy {
            source: CopySource::Table { table_name, .. },
            ..
        } => named.extend(one(table_name)),
        Statement::Explain { statement, .. } => return named_relations(statement),
        _ => {}
    }
    let _ = datafusion::sql::sqlparser::ast::visit_relations(stmt, |name| {
        named.extend(one(name));
        std::ops::ControlFlow::<()>::Continue(())
    });
    // a created table's name is among the relations visited
    named.retain(|n| !created.contains(n));
    (named, created)
}
