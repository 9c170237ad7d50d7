//! Roles and privileges in a session: the access check every statement
//! passes before it runs (`crate::privileges` says what it needs), and the
//! statements that manage roles and grants: CREATE/ALTER/DROP ROLE (and
//! USER), GRANT/REVOKE on tables, views, sequences and schemas (views'
//! and sequences' in `relation_grants.rs`), and GRANT/REVOKE of role
//! membership.
//!
//! Table grants change the table's definition through the session's
//! transaction (`Session::ddl_change`), so they commit or roll back with
//! it. Role statements and schema grants change `crate::roles`, which is
//! not transactional: inside a block they are refused (25001).

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    Action, AlterRoleOperation, CreateRole, Expr, GrantObjects, Grantee, GranteeName, GranteesType,
    ObjectName, Password, Privileges as SqlPrivileges, RoleOption, Statement, Value as SqlValue,
    ValueWithSpan,
};
use eddy_common::{TablePrivileges, ViewDef};
use eddy_storage::Table;

use super::relation_grants::sequence_privileges_of;
use super::{Output, Session};
use crate::error::{Result, SqlError};
use crate::privileges::{owner_of, table_privileges, view_owner, view_privileges};
use crate::rewrite::{ident_name, table_name};
use crate::roles::RoleOptions;

impl Session {
    /// Refuses `stmt` (42501) unless the session's user may run it: see
    /// `crate::privileges`. A superuser may run anything.
    pub(crate) fn check_access(&self, stmt: &Statement) -> Result<()> {
        let roles = &self.db.roles;
        if roles.privileges_of(&self.user).superuser {
            // a superuser reads every view, but a view's query still runs
            // with its owner's privileges (PostgreSQL's rule; CREATE VIEW
            // runs nothing)
            if runs_views(stmt) && self.reads_views(stmt) {
                for (name, _) in crate::privileges::needs(stmt).tables {
                    if let Some(v) = table_name(&name).ok().and_then(|n| self.view(&n)) {
                        self.check_view_relations(&v, 0)?;
                    }
                }
            }
            return Ok(());
        }
        self.check_schema_access(stmt)?;
        let needs = crate::privileges::needs(stmt);
        if needs.tables.is_empty() && needs.owned.is_empty() && !needs.create_in_public {
            return Ok(());
        }
        // a relation created in a user schema needs CREATE there instead
        // (`check_schema_access`)
        let in_user_schema = match stmt {
            Statement::CreateTable(ct) => table_name(&ct.name)
                .ok()
                .is_some_and(|n| self.is_schema_storage_name(&n)),
            _ => false,
        };
        if needs.create_in_public && !in_user_schema && !roles.may_create_in_public(&self.user) {
            return Err(SqlError::InsufficientPrivilege(
                "permission denied for schema public".into(),
            ));
        }
        let mine = roles.effective_roles(&self.user);
        for (name, need) in &needs.tables {
            let Some(t) = self.named_table(name) else {
                if let Some(v) = table_name(name).ok().and_then(|n| self.view(&n)) {
                    if runs_views(stmt) {
                        self.check_view_access(&v, *need, &mine, 0)?;
                    } else if !view_privileges(&mine, &v).contains(*need) {
                        return Err(SqlError::InsufficientPrivilege(format!(
                            "permission denied for view {}",
                            v.name
                        )));
                    }
                }
                continue;
            };
            if !table_privileges(&mine, t.def()).contains(*need) {
                return Err(SqlError::InsufficientPrivilege(format!(
                    "permission denied for table {}",
                    t.def().name
                )));
            }
        }
        for name in &needs.owned {
            let Some(t) = self.named_table(name) else {
                continue;
            };
            if !mine.contains(owner_of(t.def())) {
                return Err(not_owner(&t));
            }
        }
        Ok(())
    }

    /// Refuses (42501) a use of view `view` needing `need` by a user whose
    /// effective roles are `roles` unless they hold `need` on the view,
    /// and the view's owner may read what the view reads (a view's query
    /// runs with its owner's privileges, as in PostgreSQL; `depth`: views
    /// of views, bounded).
    fn check_view_access(
        &self,
        view: &ViewDef,
        need: TablePrivileges,
        roles: &HashSet<String>,
        depth: usize,
    ) -> Result<()> {
        if !view_privileges(roles, view).contains(need) {
            return Err(SqlError::InsufficientPrivilege(format!(
                "permission denied for view {}",
                view.name
            )));
        }
        self.check_view_relations(view, depth)
    }

    /// Refuses (42501) unless the owner of `view` may read every relation
    /// its query reads (a view's query runs with its owner's privileges;
    /// a view it reads runs with that view's owner's, even under a
    /// superuser's view).
    fn check_view_relations(&self, view: &ViewDef, depth: usize) -> Result<()> {
        if depth >= crate::views::MAX_DEPTH {
            return Err(SqlError::FeatureNotSupported(format!(
                "views nested deeper than {} are not supported",
                crate::views::MAX_DEPTH
            )));
        }
        let owner = view_owner(view);
        let superuser = self.db.roles.privileges_of(owner).superuser;
        let theirs = if superuser {
            HashSet::new()
        } else {
            self.db.roles.effective_roles(owner)
        };
        for dep in &view.depends_on {
            if let Some(t) = self.db.engine.table(dep) {
                if !superuser
                    && !table_privileges(&theirs, t.def()).contains(TablePrivileges::SELECT)
                {
                    return Err(SqlError::InsufficientPrivilege(format!(
                        "permission denied for table {}",
                        t.def().name
                    )));
                }
            } else if let Some(v) = self.view(dep) {
                if superuser {
                    self.check_view_relations(&v, depth + 1)?;
                } else {
                    self.check_view_access(&v, TablePrivileges::SELECT, &theirs, depth + 1)?;
                }
            }
        }
        Ok(())
    }

    /// Whether the user may run a statement that creates or drops
    /// streaming objects (sources, materialized views, sinks): only a
    /// superuser, until the stream layer checks the tables a view reads.
    pub(super) fn check_stream_ddl(&self) -> Result<()> {
        if self.db.roles.privileges_of(&self.user).superuser {
            return Ok(());
        }
        Err(SqlError::InsufficientPrivilege(
            "must be superuser to create or drop sources, materialized views and sinks".into(),
        ))
    }

    fn named_table(&self, name: &ObjectName) -> Option<Arc<Table>> {
        table_name(name).ok().and_then(|n| self.db.engine.table(&n))
    }

    /// Refuses (42501) unless the user owns table `name` (or is a
    /// superuser); a table that does not exist passes (the statement
    /// reports it).
    pub(super) fn check_owner_named(&self, name: &str) -> Result<()> {
        let roles = &self.db.roles;
        if roles.privileges_of(&self.user).superuser {
            return Ok(());
        }
        match self.db.engine.table(name) {
            Some(t)
                if !roles
                    .effective_roles(&self.user)
                    .contains(owner_of(t.def())) =>
            {
                Err(not_owner(&t))
            }
            _ => Ok(()),
        }
    }

    pub(super) fn require_superuser(&self, what: &str) -> Result<()> {
        if self.db.roles.privileges_of(&self.user).superuser {
            return Ok(());
        }
        Err(SqlError::InsufficientPrivilege(format!(
            "permission denied to {what}\nDETAIL:  Only superusers may {what} in Eddy."
        )))
    }

    /// `CREATE ROLE` / `CREATE USER` (`login_default`: USER logs in).
    pub(super) fn create_role(&mut self, cr: CreateRole, login_default: bool) -> Result<Output> {
        self.refuse_in_block("CREATE ROLE")?;
        self.require_superuser("create role")?;
        refuse_role_option(cr.create_db == Some(true), "CREATEDB")?;
        refuse_role_option(cr.create_role == Some(true), "CREATEROLE")?;
        refuse_role_option(cr.replication == Some(true), "REPLICATION")?;
        refuse_role_option(cr.bypassrls == Some(true), "BYPASSRLS")?;
        refuse_role_option(cr.inherit == Some(false), "NOINHERIT")?;
        refuse_role_option(cr.connection_limit.is_some(), "CONNECTION LIMIT")?;
        refuse_role_option(cr.valid_until.is_some(), "VALID UNTIL")?;
        refuse_role_option(
            !cr.in_group.is_empty() || !cr.role.is_empty() || !cr.user.is_empty(),
            "IN GROUP / ROLE / USER",
        )?;
        refuse_role_option(!cr.admin.is_empty(), "ADMIN")?;
        refuse_role_option(cr.authorization_owner.is_some(), "AUTHORIZATION")?;
        let opts = RoleOptions {
            superuser: cr.superuser,
            login: Some(cr.login.unwrap_or(login_default)),
            password: cr.password.as_ref().map(password_option).transpose()?,
        };
        let in_roles: Vec<String> = cr.in_role.iter().map(ident_name).collect();
        for name in &cr.names {
            let name = role_name(name)?;
            if cr.if_not_exists && self.db.roles.get(&name).is_some() {
                continue;
            }
            self.db.roles.create(&name, &opts, &in_roles)?;
        }
        Ok(Output::Command("CREATE ROLE".into()))
    }

    /// `ALTER ROLE name [WITH] options`: a superuser may change any role;
    /// any role may change its own password (as in PostgreSQL).
    pub(super) fn alter_role(
        &mut self,
        name: &datafusion::sql::sqlparser::ast::Ident,
        operation: AlterRoleOperation,
    ) -> Result<Output> {
        self.refuse_in_block("ALTER ROLE")?;
        let name = ident_name(name);
        let AlterRoleOperation::WithOptions { options } = operation else {
            return Err(SqlError::FeatureNotSupported(
                "only ALTER ROLE ... [WITH] options is supported (RENAME, SET and RESET are not)"
                    .into(),
            ));
        };
        let mut opts = RoleOptions::default();
        for o in &options {
            match o {
                RoleOption::SuperUser(b) => opts.superuser = Some(*b),
                RoleOption::Login(b) => opts.login = Some(*b),
                RoleOption::Password(p) => opts.password = Some(password_option(p)?),
                RoleOption::Inherit(true) => {}
                other => {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "role option {other} is not supported"
                    )))
                }
            }
        }
        let own_password_only =
            name == self.user && opts.superuser.is_none() && opts.login.is_none();
        if !own_password_only {
            self.require_superuser("alter role")?;
        }
        if self.db.roles.get(&name).is_none() {
            return Err(SqlError::UndefinedObject(format!(
                "role \"{name}\" does not exist"
            )));
        }
        self.db.roles.alter(&name, &opts)?;
        Ok(Output::Command("ALTER ROLE".into()))
    }

    /// `DROP ROLE [IF EXISTS] names`: refused while a role owns a table,
    /// view or sequence or holds a grant on one (2BP01), or is the
    /// session's own (55006).
    pub(super) fn drop_roles(&mut self, names: &[ObjectName], if_exists: bool) -> Result<Output> {
        self.refuse_in_block("DROP ROLE")?;
        self.require_superuser("drop role")?;
        for n in names {
            let name = role_name(n)?;
            if self.db.roles.get(&name).is_none() {
                if if_exists {
                    self.notice(
                        "00000",
                        &format!("role \"{name}\" does not exist, skipping"),
                    );
                    continue;
                }
                return Err(SqlError::UndefinedObject(format!(
                    "role \"{name}\" does not exist"
                )));
            }
            if name == self.user {
                return Err(SqlError::ObjectInUse(
                    "current user cannot be dropped".into(),
                ));
            }
            let mut deps = Vec::new();
            for t in self.db.engine.tables() {
                let d = t.def();
                role_dependency(
                    &mut deps,
                    &name,
                    "table",
                    &d.name,
                    d.owner.as_deref(),
                    &d.acl,
                );
            }
            for v in self.visible_views() {
                role_dependency(
                    &mut deps,
                    &name,
                    "view",
                    &v.name,
                    v.owner.as_deref(),
                    &v.acl,
                );
            }
            for (d, _) in self.db.sequences.list() {
                role_dependency(
                    &mut deps,
                    &name,
                    "sequence",
                    &d.name,
                    d.owner.as_deref(),
                    &d.acl,
                );
            }
            if !deps.is_empty() {
                return Err(SqlError::DependentObjects(format!(
                    "role \"{name}\" cannot be dropped because some objects depend on it\nDETAIL:  {}",
                    deps.join("\n")
                )));
            }
            self.db.roles.drop_role(&name)?;
        }
        Ok(Output::Command("DROP ROLE".into()))
    }

    /// `GRANT role [, ...] TO role [, ...]` and its REVOKE (read from
    /// tokens: `crate::custom_commands`).
    pub(super) fn grant_roles(
        &mut self,
        roles: &[String],
        members: &[String],
        revoke: bool,
    ) -> Result<Output> {
        let what = if revoke { "REVOKE" } else { "GRANT" };
        self.refuse_in_block(&format!("{what} of a role"))?;
        self.require_superuser("grant or revoke role membership")?;
        for role in roles {
            for member in members {
                if revoke {
                    self.db.roles.revoke_membership(role, member)?;
                } else {
                    self.db.roles.grant_membership(role, member)?;
                }
            }
        }
        Ok(Output::Command(format!("{what} ROLE")))
    }

    /// `GRANT/REVOKE privileges ON [TABLE] t, ... | ALL TABLES IN SCHEMA
    /// public | SCHEMA public TO/FROM grantees`.
    pub(super) fn grant_privileges(
        &mut self,
        privileges: &SqlPrivileges,
        objects: Option<&GrantObjects>,
        grantees: &[Grantee],
        revoke: bool,
    ) -> Result<Output> {
        let tag = if revoke { "REVOKE" } else { "GRANT" };
        let grantees = grantees
            .iter()
            .map(|g| self.grantee(g))
            .collect::<Result<Vec<_>>>()?;
        match objects {
            Some(GrantObjects::Tables(names)) => {
                for n in names {
                    let name = table_name(n)?;
                    if let Some(view) = self.view(&name) {
                        let privs = table_privileges_of(privileges)?;
                        self.change_view_grants(view, privs, &grantees, revoke)?;
                    } else if self.table(&name).is_err() && self.sequence_visible(&name) {
                        // PostgreSQL lets ON TABLE name a sequence
                        let privs = sequence_privileges_of(privileges)?;
                        self.change_sequence_grants(&name, privs, &grantees, revoke)?;
                    } else {
                        let privs = table_privileges_of(privileges)?;
                        let t = self.table(&name)?;
                        self.change_grants(&t, privs, &grantees, revoke)?;
                    }
                }
            }
            Some(GrantObjects::Sequences(names)) => {
                let privs = sequence_privileges_of(privileges)?;
                for n in names {
                    let name = table_name(n)?;
                    if !self.sequence_visible(&name) {
                        // PostgreSQL's message for a relation of another kind
                        return Err(if self.table(&name).is_ok() || self.view(&name).is_some() {
                            SqlError::WrongObjectType(format!("\"{name}\" is not a sequence"))
                        } else {
                            SqlError::UndefinedTable(name)
                        });
                    }
                    self.change_sequence_grants(&name, privs, &grantees, revoke)?;
                }
            }
            Some(GrantObjects::AllTablesInSchema { schemas }) => {
                let named = self.schemas_named(schemas)?;
                let privs = table_privileges_of(privileges)?;
                let user_schemas = self.visible_schema_names();
                let in_named = |name: &str| {
                    let (schema, _) = crate::schemas::split(name, &user_schemas);
                    named.iter().any(|n| n == schema) && !crate::temp_tables::is_reserved(name)
                };
                let mut tables = self.db.engine.tables();
                tables.retain(|t| in_named(&t.def().name));
                tables.sort_by(|a, b| a.def().name.cmp(&b.def().name));
                for t in tables {
                    self.change_grants(&t, privs, &grantees, revoke)?;
                }
                // ALL TABLES takes in views too, as in PostgreSQL
                let mut views = self.visible_views();
                views.retain(|v| in_named(&v.name));
                views.sort_by(|a, b| a.name.cmp(&b.name));
                for v in views {
                    self.change_view_grants(v, privs, &grantees, revoke)?;
                }
            }
            Some(GrantObjects::AllSequencesInSchema { schemas }) => {
                let named = self.schemas_named(schemas)?;
                let privs = sequence_privileges_of(privileges)?;
                let user_schemas = self.visible_schema_names();
                let mut names = self.db.sequences.names();
                names.retain(|name| {
                    let (schema, _) = crate::schemas::split(name, &user_schemas);
                    named.iter().any(|n| n == schema) && self.sequence_visible(name)
                });
                names.sort();
                for name in names {
                    self.change_sequence_grants(&name, privs, &grantees, revoke)?;
                }
            }
            Some(GrantObjects::Schemas(schemas)) => {
                let mut user_schemas = Vec::new();
                let mut public = Vec::new();
                for s in schemas {
                    if role_name(s)? == crate::schemas::PUBLIC {
                        public.push(s.clone());
                    } else {
                        user_schemas.push(role_name(s)?);
                    }
                }
                if !user_schemas.is_empty() {
                    self.grant_on_user_schemas(privileges, &user_schemas, &grantees, revoke)?;
                }
                if public.is_empty() {
                    return Ok(Output::Command(tag.into()));
                }
                check_public_schemas(&public)?;
                self.refuse_in_block(&format!("{tag} on a schema"))?;
                self.require_superuser("grant or revoke privileges on schema public")?;
                let actions: Vec<&Action> = match privileges {
                    SqlPrivileges::All { .. } => vec![&Action::Create { obj_type: None }],
                    SqlPrivileges::Actions(a) => a.iter().collect(),
                };
                for a in actions {
                    match a {
                        Action::Create { obj_type: None } => {
                            for g in &grantees {
                                self.db
                                    .roles
                                    .set_public_schema_create(g.as_deref(), !revoke)?;
                            }
                        }
                        // every role holds USAGE on public and keeps it
                        Action::Usage if !revoke => {}
                        other => {
                            return Err(SqlError::FeatureNotSupported(format!(
                                "{tag} {other} ON SCHEMA is not supported (only CREATE, and GRANT USAGE, which every role holds)"
                            )))
                        }
                    }
                }
            }
            Some(other) => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "{tag} ON {other} is not supported (tables, views, sequences and schemas only)"
                )))
            }
            None => return Err(SqlError::Syntax(format!("{tag} needs ON objects"))),
        }
        Ok(Output::Command(tag.into()))
    }

    /// The schemas of `ALL ... IN SCHEMA` (3F000 for one that does not
    /// exist).
    fn schemas_named(&self, schemas: &[ObjectName]) -> Result<Vec<String>> {
        let user_schemas = self.visible_schema_names();
        let mut named = Vec::new();
        for s in schemas {
            let name = role_name(s)?;
            if name != crate::schemas::PUBLIC && !user_schemas.contains(&name) {
                return Err(SqlError::UndefinedSchema(format!(
                    "schema \"{name}\" does not exist"
                )));
            }
            named.push(name);
        }
        Ok(named)
    }

    /// `None` for PUBLIC; a role that exists otherwise.
    fn grantee(&self, g: &Grantee) -> Result<Option<String>> {
        match (&g.grantee_type, &g.name) {
            (GranteesType::Public, _) => Ok(None),
            (
                GranteesType::None | GranteesType::Role | GranteesType::User | GranteesType::Group,
                Some(GranteeName::ObjectName(n)),
            ) => {
                let name = role_name(n)?;
                if name == "public" {
                    return Ok(None);
                }
                if self.db.roles.get(&name).is_none() {
                    return Err(SqlError::UndefinedObject(format!(
                        "role \"{name}\" does not exist"
                    )));
                }
                Ok(Some(name))
            }
            _ => Err(SqlError::FeatureNotSupported(format!(
                "grantee {g} is not supported"
            ))),
        }
    }

    /// Adds or removes `privs` for `grantees` on `table`, as its owner (or
    /// a superuser) may: a catalog change of the session's transaction.
    fn change_grants(
        &mut self,
        table: &Arc<Table>,
        privs: TablePrivileges,
        grantees: &[Option<String>],
        revoke: bool,
    ) -> Result<()> {
        let superuser = self.db.roles.privileges_of(&self.user).superuser;
        let mine = self.db.roles.effective_roles(&self.user);
        if !superuser && !mine.contains(owner_of(table.def())) {
            return Err(not_owner(table));
        }
        let locked = self.lock_for_ddl(table, if revoke { "REVOKE" } else { "GRANT" })?;
        let def = locked.def();
        let owner = def.owner.clone();
        let grantor = owner_of(def).to_string();
        let acl =
            crate::privileges::change_acl(def.acl.clone(), privs, grantees, &grantor, revoke)?;
        let name = def.name.clone();
        self.ddl_change(|ddl| ddl.set_access(&name, owner, acl))?;
        Ok(())
    }
}

/// DROP ROLE's DETAIL line for relation `relation` of `kind` (owned by
/// `owner`, with grants `acl`) when it depends on `role`.
fn role_dependency(
    deps: &mut Vec<String>,
    role: &str,
    kind: &str,
    relation: &str,
    owner: Option<&str>,
    acl: &[eddy_common::AclItem],
) {
    if owner == Some(role) {
        deps.push(format!("owner of {kind} {relation}"));
    } else if acl.iter().any(|a| a.grantee.as_deref() == Some(role)) {
        deps.push(format!("privileges for {kind} {relation}"));
    }
}

/// Whether `stmt` runs the queries of the views it names (CREATE VIEW
/// only plans them: a view over a view whose owner lost a privilege can
/// be created, as in PostgreSQL, and fails when read).
fn runs_views(stmt: &Statement) -> bool {
    !matches!(stmt, Statement::CreateView(_))
}

fn not_owner(t: &Table) -> SqlError {
    SqlError::InsufficientPrivilege(format!("must be owner of table {}", t.def().name))
}

fn refuse_role_option(present: bool, what: &str) -> Result<()> {
    if present {
        return Err(SqlError::FeatureNotSupported(format!(
            "role option {what} is not supported"
        )));
    }
    Ok(())
}

fn role_name(n: &ObjectName) -> Result<String> {
    match n.0.as_slice() {
        [p] => p
            .as_ident()
            .map(ident_name)
            .ok_or_else(|| SqlError::Syntax(format!("bad role name {n}"))),
        _ => Err(SqlError::Syntax(format!("bad role name {n}"))),
    }
}

/// `PASSWORD 'text'` (stored as a SCRAM verifier) or `PASSWORD NULL`.
fn password_option(p: &Password) -> Result<Option<String>> {
    match p {
        Password::NullPassword => Ok(None),
        Password::Password(Expr::Value(ValueWithSpan {
            value: SqlValue::SingleQuotedString(s),
            ..
        })) => Ok(Some(crate::roles::scram_verifier(s)?)),
        Password::Password(Expr::Value(ValueWithSpan {
            value: SqlValue::DollarQuotedString(d),
            ..
        })) => Ok(Some(crate::roles::scram_verifier(&d.value)?)),
        Password::Password(_) => Err(SqlError::Syntax(
            "PASSWORD needs a string literal or NULL".into(),
        )),
    }
}

/// The table privileges a GRANT names (column lists and other privilege
/// kinds are refused).
fn table_privileges_of(p: &SqlPrivileges) -> Result<TablePrivileges> {
    let actions = match p {
        SqlPrivileges::All { .. } => return Ok(TablePrivileges::ALL),
        SqlPrivileges::Actions(a) => a,
    };
    let mut out = TablePrivileges::NONE;
    for a in actions {
        let (p, columns) = match a {
            Action::Select { columns } => (TablePrivileges::SELECT, columns.is_some()),
            Action::Insert { columns } => (TablePrivileges::INSERT, columns.is_some()),
            Action::Update { columns } => (TablePrivileges::UPDATE, columns.is_some()),
            Action::Delete => (TablePrivileges::DELETE, false),
            Action::Truncate => (TablePrivileges::TRUNCATE, false),
            Action::References { columns } => (TablePrivileges::REFERENCES, columns.is_some()),
            Action::Trigger => (TablePrivileges::TRIGGER, false),
            other => {
                return Err(SqlError::InvalidGrant(format!(
                    "invalid privilege type {other} for table"
                )))
            }
        };
        if columns {
            return Err(SqlError::FeatureNotSupported(
                "column-level privileges are not supported; grant on the whole table".into(),
            ));
        }
        out = out.union(p);
    }
    Ok(out)
}

fn check_public_schemas(schemas: &[ObjectName]) -> Result<()> {
    for s in schemas {
        let name = role_name(s)?;
        if name != "public" {
            return Err(SqlError::UndefinedObject(format!(
                "schema \"{name}\" does not exist"
            )));
        }
    }
    Ok(())
}
