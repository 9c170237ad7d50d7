//! Temporary tables (`CREATE TEMP TABLE`): private to the session that
//! creates them and dropped with it (docs/design/sql.md, "Temporary
//! tables").
//!
//! A temporary table is an ordinary storage table under a reserved name,
//! `pg_temp_<N>.<name>`, where `N` is the creating session's temp id (unique
//! in the server process, [`new_temp_id`]). Each statement's relation names
//! are resolved on the AST before anything else sees it
//! ([`resolve_names`]): an unqualified name, or one qualified by `pg_temp`,
//! that names one of the session's temporary tables becomes the reserved
//! name (so it shadows a permanent table of the same name, PostgreSQL's
//! `pg_temp` coming first in the search path), and a reserved name of
//! another session is refused as undefined (42P01).
//!
//! Invariants:
//! * isolation: a session only ever reaches reserved names with its own id;
//!   ids are never reused while the process runs;
//! * cleanup: the session drops its temporary tables when it ends
//!   (`Session`'s `Drop`, whatever ended the connection), and the server
//!   drops every reserved name at start-up ([`drop_leftovers`]), so none
//!   survives a restart or a crash.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};

use datafusion::sql::sqlparser::ast::{
    AlterTableOperation, Ident, ObjectName, ObjectNamePart, ObjectType, Query, RenameTableNameKind,
    Statement, TableAlias, TableFactor, VisitMut, VisitorMut,
};
use eddy_storage::Engine;

use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, CteScopes};

/// Reserved names start with this, then the session's temp id and a dot.
const PREFIX: &str = "pg_temp_";

/// A temp id not given to any other session of this process.
pub fn new_temp_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The storage name of session `id`'s temporary table `name`.
pub fn storage_name(id: u64, name: &str) -> String {
    format!("{PREFIX}{id}.{name}")
}

/// `(session temp id, user-visible name)` of a reserved storage name.
pub fn parse_storage_name(name: &str) -> Option<(u64, &str)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (id, table) = rest.split_once('.')?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((id.parse().ok()?, table))
}

/// The name a user wrote for the table stored as `name` (a temporary
/// table's storage name carries the session's id), for messages.
pub fn shown_name(name: &str) -> &str {
    parse_storage_name(name).map_or(name, |(_, n)| n)
}

/// `text` with the storage names of temporary tables shown as their
/// users' names (`pg_temp_3.t_pkey` → `t_pkey`), for error messages: only
/// the owning session ever reaches one.
pub fn user_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let after = &rest[at + PREFIX.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        out.push_str(&rest[..at]);
        if digits > 0 && after[digits..].starts_with('.') {
            rest = &after[digits + 1..];
        } else {
            out.push_str(PREFIX);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Whether `name` is reserved for temporary tables (a permanent table may
/// not take it).
pub fn is_reserved(name: &str) -> bool {
    parse_storage_name(name).is_some()
}

/// The storage names of session `id`'s temporary tables.
pub fn session_tables(engine: &Engine, id: u64) -> Vec<String> {
    engine
        .tables()
        .iter()
        .map(|t| t.def().name.clone())
        .filter(|n| parse_storage_name(n).is_some_and(|(i, _)| i == id))
        .collect()
}

/// Drops every temporary table left by an earlier run of the server (a
/// crash or kill leaves them behind). Returns the names dropped.
pub fn drop_leftovers(engine: &Engine) -> Result<Vec<String>> {
    let names: Vec<String> = engine
        .tables()
        .iter()
        .map(|t| t.def().name.clone())
        .filter(|n| is_reserved(n))
        .collect();
    for n in &names {
        engine.drop_table(n)?;
    }
    Ok(names)
}

/// The user's name of a temporary table named by `name`: `t` or
/// `pg_temp.t`; `None` for any other shape.
pub fn temp_candidate(name: &ObjectName) -> Option<(bool, String)> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(id) => Some(ident_name(id)),
            ObjectNamePart::Function(_) => None,
        })
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        [t] => Some((false, t.clone())),
        [schema, t] if schema == "pg_temp" => Some((true, t.clone())),
        _ => None,
    }
}

fn quoted(name: String) -> ObjectName {
    ObjectName(vec![ObjectNamePart::Identifier(Ident::with_quote(
        '"', name,
    ))])
}

/// Resolves session `id`'s temporary table names in `stmt` (see the module
/// docs). `exists` says whether a storage table exists, `index_exists`
/// whether an index does (a temporary table's named index is reserved
/// like the table, for DROP INDEX). A CREATE TABLE's own
/// name is left alone: a plain CREATE TABLE makes a permanent table even
/// where a temporary one has the name, as in PostgreSQL.
pub fn resolve_names(
    stmt: &mut Statement,
    id: u64,
    exists: &dyn Fn(&str) -> bool,
    index_exists: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let mut r = Resolver {
        id,
        exists,
        ctes: CteScopes::default(),
    };
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
    match stmt {
        Statement::Drop {
            names,
            object_type: ObjectType::Index,
            ..
        } => {
            let r = Resolver {
                id,
                exists: index_exists,
                ctes: CteScopes::default(),
            };
            for n in names {
                r.rename(n)?;
            }
        }
        Statement::Drop {
            names,
            object_type: ObjectType::Table,
            ..
        } => {
            for n in names {
                r.rename(n)?;
            }
        }
        Statement::Copy {
            source: datafusion::sql::sqlparser::ast::CopySource::Table { table_name, .. },
            ..
        } => r.rename(table_name)?,
        Statement::AlterTable(at) => {
            // a temporary table renamed stays temporary; no other table may
            // take a reserved name
            let temp = crate::rewrite::table_name(&at.name)
                .ok()
                .and_then(|n| parse_storage_name(&n).map(|(owner, _)| owner))
                == Some(id);
            for op in &mut at.operations {
                if let AlterTableOperation::RenameTable {
                    table_name: RenameTableNameKind::To(to) | RenameTableNameKind::As(to),
                } = op
                {
                    let Ok(new) = crate::rewrite::table_name(to) else {
                        continue;
                    };
                    // Already this session's storage name: the statement was
                    // resolved before (at Parse, then again at Execute), and
                    // resolving must not nest the prefix.
                    let resolved = parse_storage_name(&new).map(|(owner, _)| owner) == Some(id);
                    if temp && !resolved {
                        *to = quoted(storage_name(id, &new));
                    } else if is_reserved(&new) && !(temp && resolved) {
                        return Err(SqlError::ReservedName(format!(
                            "table name \"{new}\" is reserved for temporary tables"
                        )));
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

struct Resolver<'a> {
    id: u64,
    exists: &'a dyn Fn(&str) -> bool,
    /// The CTE names of the queries being visited, innermost last: a CTE
    /// comes before any table of its name, as in PostgreSQL.
    ctes: CteScopes,
}

impl Resolver<'_> {
    /// The storage name `name` stands for, where it is a temporary table
    /// of this session.
    fn target(&self, name: &ObjectName) -> Option<String> {
        let (qualified, table) = temp_candidate(name)?;
        if !qualified && self.ctes.contains(&table) {
            return None;
        }
        let storage = storage_name(self.id, &table);
        (self.exists)(&storage).then_some(storage)
    }

    fn rename(&self, name: &mut ObjectName) -> Result<()> {
        if let Some(storage) = self.target(name) {
            *name = quoted(storage);
            return Ok(());
        }
        if let [ObjectNamePart::Identifier(id)] = name.0.as_slice() {
            // another session's reserved name: not visible here
            if let Some((owner, _)) = parse_storage_name(&ident_name(id)) {
                if owner != self.id {
                    return Err(SqlError::UndefinedTable(ident_name(id)));
                }
            }
        }
        Ok(())
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
        // keep the user's name as the qualifier of its columns (`t.a`)
        if let TableFactor::Table {
            name, alias: None, ..
        } = tf
        {
            if let (Some(_), Some((_, table))) = (self.target(name), temp_candidate(name)) {
                if let TableFactor::Table { alias, .. } = tf {
                    *alias = Some(TableAlias {
                        explicit: true,
                        name: Ident::with_quote('"', table),
                        columns: vec![],
                        at: None,
                    });
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, name: &mut ObjectName) -> ControlFlow<SqlError> {
        match self.rename(name) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_names_round_trip() {
        let n = storage_name(7, "t.x");
        assert_eq!(parse_storage_name(&n), Some((7, "t.x")));
        assert_eq!(parse_storage_name("pg_temp_x.t"), None);
        assert_eq!(parse_storage_name("pg_temp.t"), None);
        assert!(!is_reserved("t"));
        assert_eq!(
            user_text("relation \"pg_temp_12.t\" violates \"pg_temp_12.t_pkey\" pg_temp_x"),
            "relation \"t\" violates \"t_pkey\" pg_temp_x"
        );
    }

    #[test]
    fn resolving_twice_changes_nothing() {
        // A prepared statement is resolved at Parse and again at Execute
        // (found by the extended-protocol slt run: a rename nested the
        // prefix, `pg_temp_3.pg_temp_3.s2`).
        let exists = |n: &str| n == "pg_temp_3.s" || n == "pg_temp_3.t";
        for sql in [
            "ALTER TABLE s RENAME TO s2",
            "SELECT t.a FROM t JOIN pg_temp.s ON true",
            "DROP TABLE t",
        ] {
            let mut once = crate::rewrite::parse_statement(sql).unwrap();
            resolve_names(&mut once, 3, &exists, &|_| false).unwrap();
            let mut twice = once.clone();
            resolve_names(&mut twice, 3, &exists, &|_| false).unwrap();
            assert_eq!(once.to_string(), twice.to_string(), "{sql}");
        }
        let mut rename = crate::rewrite::parse_statement("ALTER TABLE s RENAME TO s2").unwrap();
        resolve_names(&mut rename, 3, &exists, &|_| false).unwrap();
        assert!(
            rename.to_string().contains("RENAME TO \"pg_temp_3.s2\""),
            "{rename}"
        );
    }

    #[test]
    fn resolves_own_names_only() {
        let mut stmt = crate::rewrite::parse_statement(
            "SELECT t.a FROM t JOIN pg_temp.u ON true JOIN v ON true",
        )
        .unwrap();
        let exists = |n: &str| n == "pg_temp_3.t" || n == "pg_temp_3.u";
        resolve_names(&mut stmt, 3, &exists, &|_| false).unwrap();
        let text = stmt.to_string();
        assert!(text.contains("\"pg_temp_3.t\" AS \"t\""), "{text}");
        assert!(text.contains("\"pg_temp_3.u\" AS \"u\""), "{text}");
        assert!(text.contains("JOIN v"), "{text}");
        let mut cte =
            crate::rewrite::parse_statement("WITH t AS (SELECT 1 AS a) SELECT a FROM t").unwrap();
        resolve_names(&mut cte, 3, &exists, &|_| false).unwrap();
        assert!(!cte.to_string().contains("pg_temp_3"), "{cte}");
        // a role is not a table
        let mut role = crate::rewrite::parse_statement("DROP ROLE t").unwrap();
        resolve_names(&mut role, 3, &exists, &|_| false).unwrap();
        assert_eq!(role.to_string(), "DROP ROLE t");
        let mut other = crate::rewrite::parse_statement("SELECT * FROM \"pg_temp_4.t\"").unwrap();
        assert!(matches!(
            resolve_names(&mut other, 3, &exists, &|_| false),
            Err(SqlError::UndefinedTable(_))
        ));
    }
}
