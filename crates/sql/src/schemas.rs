//! Schemas other than `public` (`CREATE SCHEMA`): how their relations are
//! named in storage, and how a statement's names reach them
//! (docs/design/schemas.md).
//!
//! A relation `n` of schema `s` is an ordinary storage relation (table,
//! view, sequence, index) named `s.n`; a relation of `public` keeps its
//! plain name. Before a statement is recognised, planned or prepared,
//! [`resolve_names`] rewrites its relation names on the AST: `s.n` (and
//! an unqualified `n` the search path finds in `s`) becomes the one
//! quoted identifier `"s.n"`, with `n` as the table alias so `n.col`
//! still binds. So every later layer (fixed plans, DML, COPY, DDL,
//! DataFusion's `public` provider) sees a plain storage name and needs no
//! change, as for temporary tables (`crate::temp_tables`).
//!
//! Invariants:
//! * a storage name splits one way: a schema's name never contains a dot
//!   (CREATE SCHEMA refuses one), and no `public` relation's name may
//!   start with a schema's name and a dot (CREATE SCHEMA refuses a name
//!   that such a relation starts with, and [`Scope::check_public_name`]
//!   refuses creating one);
//! * resolving twice changes nothing (a prepared statement is resolved at
//!   Parse and again at Execute): a name already in storage form is left
//!   alone;
//! * the catalog shows `(schema, name)` from [`split`], never the storage
//!   form.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    AlterTableOperation, ColumnOption, CommentObject, CopySource, DataType, Expr, FunctionArg,
    FunctionArgExpr, FunctionArguments, GrantObjects, Ident, ObjectName, ObjectNamePart,
    ObjectType, Query, RenameTableNameKind, Statement, TableAlias, TableConstraint, TableFactor,
    Value as SqlValue, VisitMut, VisitorMut,
};

use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, CteScopes};

/// The schema every Eddy database has; its relations keep plain names.
pub const PUBLIC: &str = "public";

/// Schemas of the system, never created or dropped by a user.
pub fn is_system_schema(name: &str) -> bool {
    matches!(name, "pg_catalog" | "information_schema" | PUBLIC)
        || name == "pg_temp"
        || crate::temp_tables::parse_storage_name(&format!("{name}.x")).is_some()
}

/// The storage name of relation `name` of schema `schema`.
pub fn storage_name(schema: &str, name: &str) -> String {
    if schema == PUBLIC {
        name.to_string()
    } else {
        format!("{schema}.{name}")
    }
}

/// `(schema, name)` of storage name `storage`, given the user schemas.
pub fn split<'a>(storage: &'a str, schemas: &[String]) -> (&'a str, &'a str) {
    if let Some((schema, name)) = storage.split_once('.') {
        if schemas.iter().any(|s| s == schema) {
            return (schema, name);
        }
    }
    (PUBLIC, storage)
}

/// Storage name `storage` as a definition prints it (`pg_get_viewdef`,
/// `pg_get_expr`, `pg_get_constraintdef`): a user schema's relation
/// always qualified, a `public` one qualified only where `public` is not
/// on the search path; each part quoted where it needs it.
pub fn qualified_text(storage: &str, schemas: &[String], public_on_path: bool) -> String {
    let quote = crate::pg_functions::quote_identifier;
    match split(storage, schemas) {
        (PUBLIC, name) if public_on_path => quote(name),
        (schema, name) => format!("{}.{}", quote(schema), quote(name)),
    }
}

/// `text` (an error message) with the storage names of user schemas'
/// relations shown as PostgreSQL shows a relation in a message, without
/// its schema: `"app.t"` becomes `"t"`, `table app.t` becomes `table t`.
pub fn user_text(text: &str, schemas: &[String]) -> String {
    let mut out = text.to_string();
    for schema in schemas {
        for lead in ["\"", "table ", "view ", "sequence ", "relation "] {
            out = out.replace(&format!("{lead}{schema}."), lead);
        }
    }
    out
}

/// The search path's schema names in order, as `search_path` holds them
/// (`"$user"` stands for `user`); empty elements dropped.
pub fn path_elements(value: &str, user: &str) -> Vec<String> {
    value
        .split(',')
        .filter_map(|element| {
            let element = element.trim().trim_matches('\'');
            let name = match element.strip_prefix('"').and_then(|e| e.strip_suffix('"')) {
                Some(quoted) => quoted.replace("\"\"", "\""),
                None => element.to_ascii_lowercase(),
            };
            match name.as_str() {
                "" => None,
                "$user" => Some(user.to_string()),
                _ => Some(name),
            }
        })
        .collect()
}

/// `(grantee, privileges, grantor)` of an `nspacl` item
/// (`grantee=UC/grantor`; an empty grantee is PUBLIC).
pub fn parse_acl_item(item: &str) -> Option<(String, String, String)> {
    let (grantee, rest) = item.split_once('=')?;
    let (privs, grantor) = rest.split_once('/')?;
    Some((grantee.to_string(), privs.to_string(), grantor.to_string()))
}

/// The privileges (`nspacl` letters: `U` USAGE, `C` CREATE) a role holds
/// on `schema`, given whether it is a superuser and the roles it has the
/// privileges of (`mine`): all for a superuser or the owner's members,
/// else what the grants to those roles and to PUBLIC give.
pub fn held_privileges(
    schema: &eddy_common::SchemaDef,
    superuser: bool,
    mine: &std::collections::HashSet<String>,
) -> String {
    let owner = schema
        .owner
        .as_deref()
        .unwrap_or(crate::roles::BOOTSTRAP_SUPERUSER);
    if superuser || mine.contains(owner) {
        return "UC".to_string();
    }
    schema
        .acl
        .iter()
        .filter_map(|item| parse_acl_item(item))
        .filter(|(grantee, _, _)| grantee.is_empty() || mine.contains(grantee.as_str()))
        .map(|(_, privs, _)| privs)
        .collect()
}

/// What name resolution needs to know of the session.
pub struct Scope<'a> {
    /// The user schemas the session sees (not `public`).
    pub schemas: &'a [String],
    /// The search path's schemas that exist, in order (`public` and user
    /// schemas only).
    pub path: &'a [String],
    /// Whether a relation (table, view, sequence) of this storage name
    /// exists.
    pub relation_exists: &'a dyn Fn(&str) -> bool,
    /// Whether an index of this storage name exists.
    pub index_exists: &'a dyn Fn(&str) -> bool,
}

impl Scope<'_> {
    fn is_schema(&self, name: &str) -> bool {
        self.schemas.iter().any(|s| s == name)
    }

    /// Whether `name` is a storage name of a user schema's relation.
    pub fn is_storage_name(&self, name: &str) -> bool {
        split(name, self.schemas).0 != PUBLIC
    }

    /// The schema an unqualified CREATE puts its relation in: the first
    /// schema of the path that exists (`None`: none does).
    pub fn creation_schema(&self) -> Option<&str> {
        self.path.first().map(String::as_str)
    }

    /// Refuses a `public` relation name that would read as a user
    /// schema's storage name (see the module doc).
    pub fn check_public_name(&self, name: &str) -> Result<()> {
        if self.is_storage_name(name) {
            return Err(SqlError::FeatureNotSupported(format!(
                "relation name \"{name}\" begins with the name of schema \"{}\" and a dot; Eddy cannot tell it from a relation of that schema",
                split(name, self.schemas).0
            )));
        }
        Ok(())
    }

    /// The storage name a read of `name` means, where it is not `name`
    /// itself (a user schema's relation). `exists` says whether a storage
    /// name exists in the relevant namespace.
    fn found(&self, name: &ObjectName, exists: &dyn Fn(&str) -> bool) -> Option<String> {
        match parts(name)?.as_slice() {
            [schema, n] | [_, schema, n] if self.is_schema(schema) => Some(storage_name(schema, n)),
            [n] if !self.is_storage_name(n) && !crate::temp_tables::is_reserved(n) => {
                for schema in self.path {
                    let storage = storage_name(schema, n);
                    if exists(&storage) {
                        return (schema != PUBLIC).then_some(storage);
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// The storage name a CREATE of `name` makes, where it is not `name`
    /// itself; 3F000 for a schema that does not exist.
    fn created(&self, name: &ObjectName) -> Result<Option<String>> {
        let Some(parts) = parts(name) else {
            return Ok(None);
        };
        match parts.as_slice() {
            [schema, n] | [_, schema, n] => {
                if self.is_schema(schema) {
                    Ok(Some(storage_name(schema, n)))
                } else if is_system_schema(schema) {
                    Ok(None)
                } else {
                    Err(SqlError::UndefinedSchema(format!(
                        "schema \"{schema}\" does not exist"
                    )))
                }
            }
            [n] if self.is_storage_name(n) => Ok(None),
            [n] => {
                self.check_public_name(n)?;
                Ok(match self.creation_schema() {
                    Some(schema) if schema != PUBLIC => Some(storage_name(schema, n)),
                    _ => None,
                })
            }
            _ => Ok(None),
        }
    }
}

/// The identifiers of `name` (`None` if a part is not one).
fn parts(name: &ObjectName) -> Option<Vec<String>> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(id) => Some(ident_name(id)),
            ObjectNamePart::Function(_) => None,
        })
        .collect()
}

fn quoted(name: String) -> ObjectName {
    ObjectName(vec![ObjectNamePart::Identifier(Ident::with_quote(
        '"', name,
    ))])
}

/// The last part of `name`, as written.
fn last_part(name: &ObjectName) -> Option<String> {
    match name.0.last()? {
        ObjectNamePart::Identifier(id) => Some(ident_name(id)),
        ObjectNamePart::Function(_) => None,
    }
}

/// Resolves the names of `stmt` that mean relations of user schemas to
/// their storage names (see the module doc).
pub fn resolve_names(stmt: &mut Statement, scope: &Scope<'_>) -> Result<()> {
    created_names(stmt, scope)?;
    let mut r = Resolver {
        scope,
        ctes: CteScopes::default(),
    };
    // a created relation's name was resolved above, as a CREATE resolves
    let created = match stmt {
        Statement::CreateTable(ct) => Some(std::mem::replace(&mut ct.name, ObjectName(vec![]))),
        _ => None,
    };
    let flow = stmt.visit(&mut r);
    if let (Statement::CreateTable(ct), Some(name)) = (&mut *stmt, created) {
        ct.name = name;
    }
    if let ControlFlow::Break(e) = flow {
        return Err(e);
    }
    other_names(stmt, &r)
}

/// Resolves one relation name of a command Eddy parses itself (ALTER
/// SEQUENCE, an identity's table and sequence): `created` for a name the
/// command creates.
pub fn resolve_name(name: &mut ObjectName, scope: &Scope<'_>, created: bool) -> Result<()> {
    let storage = if created {
        scope.created(name)?
    } else {
        scope.found(name, scope.relation_exists)
    };
    if let Some(storage) = storage {
        *name = quoted(storage);
    }
    Ok(())
}

/// The names CREATE statements give their relations.
fn created_names(stmt: &mut Statement, scope: &Scope<'_>) -> Result<()> {
    let name = match stmt {
        Statement::CreateTable(ct) if !ct.temporary => &mut ct.name,
        Statement::CreateView(cv) if !cv.temporary => &mut cv.name,
        Statement::CreateSequence {
            temporary: false,
            name,
            ..
        } => name,
        Statement::Explain { statement, .. } => return created_names(statement, scope),
        Statement::Prepare { statement, .. } => return created_names(statement, scope),
        _ => return Ok(()),
    };
    if let Some(storage) = scope.created(name)? {
        *name = quoted(storage);
    }
    Ok(())
}

/// Names the visitor does not reach (sqlparser visits a statement's
/// relations only in some positions).
fn other_names(stmt: &mut Statement, r: &Resolver<'_>) -> Result<()> {
    let scope = r.scope;
    match stmt {
        Statement::Explain { statement, .. } | Statement::Prepare { statement, .. } => {
            other_names(statement, r)
        }
        Statement::Drop {
            object_type, names, ..
        } => {
            let exists = match object_type {
                ObjectType::Table | ObjectType::View | ObjectType::Sequence => {
                    scope.relation_exists
                }
                ObjectType::Index => scope.index_exists,
                _ => return Ok(()),
            };
            for n in names {
                if let Some(storage) = scope.found(n, exists) {
                    *n = quoted(storage);
                }
            }
            Ok(())
        }
        Statement::CreateIndex(ci) => {
            // the index goes into its table's schema
            let Ok(table) = crate::rewrite::table_name(&ci.table_name) else {
                return Ok(());
            };
            let (schema, _) = split(&table, scope.schemas);
            if let Some(name) = &mut ci.name {
                if let (true, Some(n)) = (schema != PUBLIC, last_part(name)) {
                    if name.0.len() == 1 && !scope.is_storage_name(&n) {
                        *name = quoted(storage_name(schema, &n));
                    }
                }
            }
            Ok(())
        }
        Statement::CreateTable(ct) => {
            // the tables foreign keys reference
            for c in &mut ct.columns {
                for o in &mut c.options {
                    if let ColumnOption::ForeignKey(fk) = &mut o.option {
                        r.rename(&mut fk.foreign_table);
                    }
                }
            }
            for c in &mut ct.constraints {
                if let TableConstraint::ForeignKey(fk) = c {
                    r.rename(&mut fk.foreign_table);
                }
            }
            Ok(())
        }
        Statement::AlterView { name, .. } => {
            r.rename(name);
            Ok(())
        }
        Statement::Copy {
            source: CopySource::Table { table_name, .. },
            ..
        } => {
            r.rename(table_name);
            Ok(())
        }
        Statement::Comment {
            object_type,
            object_name,
            ..
        } => {
            match object_type {
                CommentObject::Column => {
                    // `[schema.]table.column`
                    if let Some(column) = object_name.0.pop() {
                        r.rename(object_name);
                        object_name.0.push(column);
                    }
                }
                CommentObject::Table | CommentObject::View => r.rename(object_name),
                _ => {}
            }
            Ok(())
        }
        Statement::Grant(g) => {
            grant_objects(g.objects.as_mut(), r);
            Ok(())
        }
        Statement::Revoke(rv) => {
            grant_objects(rv.objects.as_mut(), r);
            Ok(())
        }
        Statement::AlterTable(at) => {
            // a relation renamed stays in its schema
            let Ok(table) = crate::rewrite::table_name(&at.name) else {
                return Ok(());
            };
            let (schema, _) = split(&table, scope.schemas);
            for op in &mut at.operations {
                if let AlterTableOperation::AddConstraint {
                    constraint: TableConstraint::ForeignKey(fk),
                    ..
                } = op
                {
                    r.rename(&mut fk.foreign_table);
                }
                if let AlterTableOperation::RenameTable {
                    table_name: RenameTableNameKind::To(to) | RenameTableNameKind::As(to),
                } = op
                {
                    match parts(to).as_deref() {
                        // resolved before (at Parse, now at Execute)
                        Some([n]) if schema != PUBLIC && split(n, scope.schemas).0 == schema => {}
                        Some([n]) if schema != PUBLIC && !scope.is_storage_name(n) => {
                            *to = quoted(storage_name(schema, n));
                        }
                        Some([n]) => scope.check_public_name(n)?,
                        Some(_) => {
                            return Err(SqlError::Syntax(
                                "the new name of ALTER TABLE ... RENAME TO cannot be qualified"
                                    .into(),
                            ))
                        }
                        None => {}
                    }
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn grant_objects(objects: Option<&mut GrantObjects>, r: &Resolver<'_>) {
    if let Some(GrantObjects::Tables(names) | GrantObjects::Sequences(names)) = objects {
        for n in names {
            r.rename(n);
        }
    }
}

struct Resolver<'a> {
    scope: &'a Scope<'a>,
    /// The CTE names of the queries being visited, innermost last: a CTE
    /// comes before any table of its name, as in PostgreSQL.
    ctes: CteScopes,
}

impl Resolver<'_> {
    /// The storage name relation `name` stands for, where it is a user
    /// schema's relation.
    fn target(&self, name: &ObjectName) -> Option<String> {
        if let Some([n]) = parts(name).as_deref() {
            if self.ctes.contains(n) {
                return None;
            }
        }
        self.scope.found(name, self.scope.relation_exists)
    }

    fn rename(&self, name: &mut ObjectName) {
        if let Some(storage) = self.target(name) {
            *name = quoted(storage);
        }
    }

    /// A relation named by constant text (`nextval('s')`,
    /// `'t'::regclass`): an unqualified name the path finds in a user
    /// schema becomes that relation's quoted storage name (a qualified
    /// one is read as the storage name at run time:
    /// `crate::sequences::resolve_name`).
    fn text(&self, text: &mut String) {
        let Ok(parts) = crate::sequences::name_parts(text) else {
            return;
        };
        let [n] = parts.as_slice() else { return };
        let name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(n.clone()))]);
        if let Some(storage) = self.target(&name) {
            *text = format!("\"{}\"", storage.replace('"', "\"\""));
        }
    }

    fn expr(&self, e: &mut Expr) {
        match e {
            Expr::Cast {
                data_type: DataType::Regclass,
                expr,
                ..
            } => {
                if let Some(t) = text_constant(expr) {
                    self.text(t);
                }
            }
            Expr::Function(f) => {
                let Some(ObjectNamePart::Identifier(last)) = f.name.0.last() else {
                    return;
                };
                let named = matches!(
                    ident_name(last).as_str(),
                    "nextval" | "currval" | "setval" | "pg_get_serial_sequence" | "to_regclass"
                );
                let FunctionArguments::List(list) = &mut f.args else {
                    return;
                };
                if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))) =
                    list.args.first_mut()
                {
                    if named {
                        if let Some(t) = text_constant(arg) {
                            self.text(t);
                        }
                    }
                }
            }
            // `s.t.col`: the table's alias is `t` (see `pre_visit_table_factor`)
            Expr::CompoundIdentifier(ids)
                if ids.len() == 3
                    && ids
                        .first()
                        .is_some_and(|s| self.scope.is_schema(&ident_name(s))) =>
            {
                ids.remove(0);
            }
            _ => {}
        }
    }
}

/// The text of a string constant (`'s'`, or `'s'::regclass` inside).
fn text_constant(e: &mut Expr) -> Option<&mut String> {
    match e {
        Expr::Value(v) => match &mut v.value {
            SqlValue::SingleQuotedString(s) => Some(s),
            _ => None,
        },
        Expr::Cast {
            data_type: DataType::Regclass,
            expr,
            ..
        } => text_constant(expr),
        Expr::Nested(inner) => text_constant(inner),
        _ => None,
    }
}

impl VisitorMut for Resolver<'_> {
    type Break = SqlError;

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<SqlError> {
        self.ctes.enter(q);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<SqlError> {
        self.ctes.leave();
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, tf: &mut TableFactor) -> ControlFlow<SqlError> {
        if let TableFactor::Table {
            name, alias, args, ..
        } = tf
        {
            if args.is_some() {
                // a table function (`generate_series(...)`), not a relation
                return ControlFlow::Continue(());
            }
            if let Some(storage) = self.target(name) {
                if alias.is_none() {
                    // keep the user's name as the qualifier of its columns
                    *alias = last_part(name).map(|n| TableAlias {
                        explicit: true,
                        name: Ident::with_quote('"', n),
                        columns: vec![],
                        at: None,
                    });
                }
                *name = quoted(storage);
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, name: &mut ObjectName) -> ControlFlow<SqlError> {
        // table factors were renamed above (a table function's name is
        // never a relation there, and `target` finds none for it)
        self.rename(name);
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<SqlError> {
        self.expr(e);
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(sql: &str, path: &[&str]) -> Result<String> {
        let schemas = vec!["app".to_string(), "ops".to_string()];
        let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        let exists = |n: &str| matches!(n, "app.t" | "t" | "u" | "app.s" | "ops.t");
        let index_exists = |n: &str| n == "app.i";
        let scope = Scope {
            schemas: &schemas,
            path: &path,
            relation_exists: &exists,
            index_exists: &index_exists,
        };
        let mut stmt = crate::rewrite::parse_statement(sql)?;
        resolve_names(&mut stmt, &scope)?;
        let once = stmt.to_string();
        resolve_names(&mut stmt, &scope)?;
        assert_eq!(once, stmt.to_string(), "resolving twice: {sql}");
        Ok(once)
    }

    #[test]
    fn qualified_names_reach_storage_names() {
        let q = resolved("SELECT app.t.a, t.b FROM app.t WHERE a > 1", &["public"]).unwrap();
        assert_eq!(q, "SELECT t.a, t.b FROM \"app.t\" AS \"t\" WHERE a > 1");
        let q = resolved("SELECT * FROM app.t x JOIN u ON true", &["public"]).unwrap();
        assert_eq!(q, "SELECT * FROM \"app.t\" x JOIN u ON true");
        let q = resolved("INSERT INTO app.t VALUES (1)", &["public"]).unwrap();
        assert_eq!(q, "INSERT INTO \"app.t\" VALUES (1)");
        let q = resolved("DROP TABLE app.t, t", &["public"]).unwrap();
        assert_eq!(q, "DROP TABLE \"app.t\", t");
        let q = resolved("DROP INDEX app.i", &["public"]).unwrap();
        assert_eq!(q, "DROP INDEX \"app.i\"");
        let q = resolved("COPY app.t FROM STDIN", &["public"]).unwrap();
        assert!(q.starts_with("COPY \"app.t\""), "{q}");
        // public and unknown schemas are left to the later layers
        let q = resolved("SELECT * FROM public.t, nope.t", &["public"]).unwrap();
        assert_eq!(q, "SELECT * FROM public.t, nope.t");
    }

    #[test]
    fn the_search_path_finds_unqualified_names_in_order() {
        let q = resolved("SELECT * FROM t", &["app", "public"]).unwrap();
        assert_eq!(q, "SELECT * FROM \"app.t\" AS \"t\"");
        let q = resolved("SELECT * FROM t", &["public", "app"]).unwrap();
        assert_eq!(q, "SELECT * FROM t");
        let q = resolved("SELECT * FROM u", &["app", "public"]).unwrap();
        assert_eq!(q, "SELECT * FROM u");
        let q = resolved("WITH t AS (SELECT 1) SELECT * FROM t", &["app"]).unwrap();
        assert_eq!(q, "WITH t AS (SELECT 1) SELECT * FROM t");
        let q = resolved("SELECT nextval('s'), 's'::regclass", &["app"]).unwrap();
        assert_eq!(q, "SELECT nextval('\"app.s\"'), '\"app.s\"'::REGCLASS");
        let q = resolved("SELECT * FROM generate_series(1, 2) AS t", &["app"]).unwrap();
        assert_eq!(q, "SELECT * FROM generate_series(1, 2) AS t");
    }

    #[test]
    fn creates_go_to_the_named_or_first_schema() {
        let q = resolved("CREATE TABLE app.n (a INT)", &["public"]).unwrap();
        assert_eq!(q, "CREATE TABLE \"app.n\" (a INT)");
        let q = resolved("CREATE TABLE n (a INT)", &["app", "public"]).unwrap();
        assert_eq!(q, "CREATE TABLE \"app.n\" (a INT)");
        let q = resolved("CREATE VIEW v AS SELECT * FROM t", &["app", "public"]).unwrap();
        assert_eq!(
            q,
            "CREATE VIEW \"app.v\" AS SELECT * FROM \"app.t\" AS \"t\""
        );
        let q = resolved("CREATE INDEX j ON app.t (a)", &["public"]).unwrap();
        assert_eq!(q, "CREATE INDEX \"app.j\" ON \"app.t\"(a)");
        let q = resolved(
            "CREATE TABLE app.c (id INT REFERENCES app.t(a), b INT, FOREIGN KEY (b) REFERENCES t(a))",
            &["app"],
        )
        .unwrap();
        assert_eq!(
            q,
            "CREATE TABLE \"app.c\" (id INT REFERENCES \"app.t\" (a), b INT, FOREIGN KEY (b) REFERENCES \"app.t\"(a))"
        );
        let q = resolved(
            "ALTER TABLE app.t ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES ops.t(a)",
            &["public"],
        )
        .unwrap();
        assert!(q.ends_with("REFERENCES \"ops.t\"(a)"), "{q}");
        let q = resolved("ALTER TABLE app.t RENAME TO t2", &["public"]).unwrap();
        assert_eq!(q, "ALTER TABLE \"app.t\" RENAME TO \"app.t2\"");
        let e = resolved("CREATE TABLE nope.n (a INT)", &["public"]).unwrap_err();
        assert_eq!(e.sqlstate(), "3F000");
        let e = resolved("CREATE TABLE \"app.x\" (a INT)", &["public"]).unwrap();
        // already a storage name: a CREATE of app's relation
        assert_eq!(e, "CREATE TABLE \"app.x\" (a INT)");
    }

    #[test]
    fn storage_names_split_only_at_a_schema() {
        let schemas = vec!["app".to_string()];
        assert_eq!(split("app.t", &schemas), ("app", "t"));
        assert_eq!(split("app.t.x", &schemas), ("app", "t.x"));
        assert_eq!(split("other.t", &schemas), ("public", "other.t"));
        assert_eq!(split("t", &schemas), ("public", "t"));
        assert_eq!(
            path_elements("\"$user\", public, 'App', \"Q\"", "bob"),
            vec!["bob", "public", "app", "Q"]
        );
        assert!(is_system_schema("pg_temp_3"));
        assert_eq!(
            user_text(
                "new row for relation \"app.t\" violates check constraint \"app.t_a_check\" (permission denied for table app.t) other.t",
                &schemas
            ),
            "new row for relation \"t\" violates check constraint \"t_a_check\" (permission denied for table t) other.t"
        );
        assert!(!is_system_schema("app"));
    }
}
