//! What a statement needs to be allowed, read from its AST before it runs:
//! the table privileges on each table it names, the tables it must own,
//! and whether it creates a table in schema `public`. `Session` checks
//! these against the roles (`crate::roles`) and each table's owner and
//! grants (`TableDef::owner`, `TableDef::acl`) on every path a statement
//! can take (fixed plan, DataFusion, COPY, cursors), before it reads or
//! writes anything.
//!
//! The rules are PostgreSQL's, at table granularity:
//! * every table a statement reads needs SELECT (subqueries, joins, CTE
//!   bodies, INSERT ... SELECT sources, UPDATE ... FROM, DELETE ... USING);
//! * INSERT needs INSERT on its target, ON CONFLICT DO UPDATE also UPDATE
//!   and SELECT; UPDATE needs UPDATE, DELETE needs DELETE, and either also
//!   SELECT on its target when it reads the target's columns (a WHERE, a
//!   SET expression naming a column, RETURNING);
//! * MERGE needs SELECT on its target, and INSERT, UPDATE and DELETE for
//!   the actions its clauses take (DO NOTHING takes none);
//! * COPY FROM needs INSERT, COPY TO SELECT; TRUNCATE needs TRUNCATE;
//! * ALTER TABLE, DROP TABLE, COMMENT ON and CREATE INDEX need ownership
//!   (membership in the owning role);
//! * CREATE TABLE needs CREATE on schema `public`.
//!
//! A name that is not an Eddy table (a CTE, `pg_catalog` and
//! `information_schema` relations, a table that does not exist) needs
//! nothing here: the statement then runs or fails as it would anyway.
//! Column-level grants are not implemented (refused where granted).

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    CommentObject, CopySource, Expr, FromTable, MergeAction, ObjectName, ObjectType,
    OnConflictAction, OnInsert, Query, Statement, TableFactor, TableObject, Visit, Visitor,
};
use eddy_common::{AclItem, TableDef, TablePrivileges, ViewDef};

use crate::roles::BOOTSTRAP_SUPERUSER;

/// What one statement needs.
#[derive(Debug, Default)]
pub struct Needs {
    /// Tables with the privileges needed on each (a name may repeat).
    pub tables: Vec<(ObjectName, TablePrivileges)>,
    /// Tables the user must own.
    pub owned: Vec<ObjectName>,
    /// Creates a table in schema `public`.
    pub create_in_public: bool,
}

/// The privileges `stmt` needs.
pub fn needs(stmt: &Statement) -> Needs {
    let mut n = Needs::default();
    match stmt {
        Statement::Explain { statement, .. } => return needs(statement),
        Statement::Drop {
            object_type: ObjectType::Table,
            names,
            ..
        } => {
            n.owned.extend(names.iter().cloned());
            return n;
        }
        // an index is no table: `Session::drop_indexes` checks that the
        // user owns the index's table
        Statement::Drop {
            object_type: ObjectType::Index,
            ..
        } => return n,
        Statement::AlterTable(at) => {
            n.owned.push(at.name.clone());
            return n;
        }
        Statement::Comment {
            object_type,
            object_name,
            ..
        } => {
            if matches!(object_type, CommentObject::Table) {
                n.owned.push(object_name.clone());
            } else if matches!(object_type, CommentObject::Column) {
                // `table.column`: the table is all but the last part
                let mut t = object_name.clone();
                t.0.pop();
                if !t.0.is_empty() {
                    n.owned.push(t);
                }
            }
            return n;
        }
        Statement::CreateIndex(ci) => {
            n.owned.push(ci.table_name.clone());
            return n;
        }
        Statement::Truncate(t) => {
            for target in &t.table_names {
                n.tables
                    .push((target.name.clone(), TablePrivileges::TRUNCATE));
            }
            return n;
        }
        Statement::Grant(_) | Statement::Revoke(_) => return n,
        _ => {}
    }
    let mut reads = relations(stmt);
    let mut target = |name: &ObjectName, need: TablePrivileges, reads_target: bool| {
        if let Some(i) = reads.iter().position(|r| r == name) {
            reads.remove(i);
        }
        let need = if reads_target {
            need.union(TablePrivileges::SELECT)
        } else {
            need
        };
        n.tables.push((name.clone(), need));
    };
    match stmt {
        Statement::Insert(ins) => {
            if let TableObject::TableName(name) = &ins.table {
                let do_update = matches!(
                    &ins.on,
                    Some(OnInsert::OnConflict(c)) if matches!(c.action, OnConflictAction::DoUpdate(_))
                );
                let need = if do_update {
                    TablePrivileges::INSERT.union(TablePrivileges::UPDATE)
                } else {
                    TablePrivileges::INSERT
                };
                target(name, need, do_update || ins.returning.is_some());
            }
        }
        Statement::Update(u) => {
            if let TableFactor::Table { name, .. } = &u.table.relation {
                let reads_columns = u.selection.is_some()
                    || u.returning.is_some()
                    || u.assignments.iter().any(|a| names_a_column(&a.value));
                target(name, TablePrivileges::UPDATE, reads_columns);
            }
        }
        Statement::Delete(d) => {
            let from = match &d.from {
                FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t.first(),
            };
            if let Some(TableFactor::Table { name, .. }) = from.map(|t| &t.relation) {
                let reads_columns = d.selection.is_some() || d.returning.is_some();
                target(name, TablePrivileges::DELETE, reads_columns);
            }
        }
        Statement::Merge(m) => {
            if let TableFactor::Table { name, .. } = &m.table {
                // each action's privilege, and SELECT: ON reads the target
                let mut need = TablePrivileges::NONE;
                for c in &m.clauses {
                    need = need.union(match &c.action {
                        a if crate::merge::is_do_nothing(a) => TablePrivileges::NONE,
                        MergeAction::Insert(_) => TablePrivileges::INSERT,
                        MergeAction::Update(_) => TablePrivileges::UPDATE,
                        MergeAction::Delete { .. } => TablePrivileges::DELETE,
                    });
                }
                target(name, need, true);
            }
        }
        Statement::Copy {
            source: CopySource::Table { table_name, .. },
            to,
            ..
        } => {
            let need = if *to {
                TablePrivileges::SELECT
            } else {
                TablePrivileges::INSERT
            };
            target(table_name, need, false);
        }
        Statement::CreateTable(ct) => {
            if let Some(i) = reads.iter().position(|r| *r == ct.name) {
                reads.remove(i);
            }
            // a temporary table is made in the session's own schema, which
            // needs no CREATE on public (PostgreSQL's TEMP privilege is
            // granted to PUBLIC)
            let temporary = ct.temporary
                || matches!(
                    crate::temp_tables::temp_candidate(&ct.name),
                    Some((true, _))
                );
            n.create_in_public = !temporary;
        }
        _ => {}
    }
    n.tables
        .extend(reads.into_iter().map(|r| (r, TablePrivileges::SELECT)));
    n
}

/// Every relation `stmt` names, CTE names left out.
fn relations(stmt: &Statement) -> Vec<ObjectName> {
    let mut ctes = CteNames::default();
    let _ = stmt.visit(&mut ctes);
    let mut out = Vec::new();
    let _ = datafusion::sql::sqlparser::ast::visit_relations(stmt, |name| {
        let is_cte = name.0.len() == 1
            && crate::rewrite::table_name(name).is_ok_and(|t| ctes.0.contains(&t));
        if !is_cte {
            out.push(name.clone());
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

/// The names `WITH` clauses define.
#[derive(Default)]
struct CteNames(HashSet<String>);

impl Visitor for CteNames {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        if let Some(with) = &q.with {
            for cte in &with.cte_tables {
                self.0.insert(crate::rewrite::ident_name(&cte.alias.name));
            }
        }
        ControlFlow::Continue(())
    }
}

/// Whether an expression reads a column (any identifier).
fn names_a_column(e: &Expr) -> bool {
    let mut found = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(e, |x| {
        if matches!(x, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

/// The role owning `def` (tables made before roles existed belong to the
/// bootstrap superuser).
pub fn owner_of(def: &TableDef) -> &str {
    def.owner.as_deref().unwrap_or(BOOTSTRAP_SUPERUSER)
}

/// The privileges on `def` of a user whose effective roles (itself and
/// every role it is a member of) are `roles`: all of them for the owner,
/// else what was granted to one of `roles` or to PUBLIC.
pub fn table_privileges(roles: &HashSet<String>, def: &TableDef) -> TablePrivileges {
    relation_privileges(roles, owner_of(def), &def.acl, TablePrivileges::ALL)
}

/// The privileges on a relation owned by `owner` with grants `acl` of a
/// user whose effective roles are `roles` (`all`: what its owner holds).
pub fn relation_privileges(
    roles: &HashSet<String>,
    owner: &str,
    acl: &[AclItem],
    all: TablePrivileges,
) -> TablePrivileges {
    if roles.contains(owner) {
        return all;
    }
    acl.iter()
        .filter(|a| a.grantee.as_ref().is_none_or(|g| roles.contains(g)))
        .fold(TablePrivileges::NONE, |acc, a| acc.union(a.privileges))
}

/// The role owning `view` (views made before owners were kept belong to
/// the bootstrap superuser).
pub fn view_owner(view: &ViewDef) -> &str {
    view.owner.as_deref().unwrap_or(BOOTSTRAP_SUPERUSER)
}

/// The privileges on `view` of a user whose effective roles are `roles`.
pub fn view_privileges(roles: &HashSet<String>, view: &ViewDef) -> TablePrivileges {
    relation_privileges(roles, view_owner(view), &view.acl, TablePrivileges::ALL)
}

/// `relacl`'s items as PostgreSQL prints them (`owner=arwdDxt/owner`,
/// `alice=r/owner`, `=r/owner` for PUBLIC), or `None` when nothing was
/// granted (PostgreSQL's NULL: default privileges).
pub fn acl_items(def: &TableDef) -> Option<Vec<String>> {
    relation_acl_items(owner_of(def), &def.acl, &TablePrivileges::NAMED)
}

/// `relacl`'s items of a relation owned by `owner` with grants `acl`,
/// letters in the order of `named` (a table's or a sequence's).
pub fn relation_acl_items(
    owner: &str,
    acl: &[AclItem],
    named: &[(TablePrivileges, char, &'static str)],
) -> Option<Vec<String>> {
    if acl.is_empty() {
        return None;
    }
    let all = TablePrivileges::all_of(named);
    let mut items = vec![format!("{owner}={}/{owner}", all.letters_in(named))];
    for a in acl {
        items.push(format!(
            "{}={}/{}",
            a.grantee.as_deref().unwrap_or(""),
            a.privileges.letters_in(named),
            a.grantor
        ));
    }
    Some(items)
}

/// `relacl` as text (`{owner=arwdDxt/owner,alice=r/owner}`).
pub fn acl_text(def: &TableDef) -> Option<String> {
    acl_items(def).map(|items| format!("{{{}}}", items.join(",")))
}

/// `acl` with `privs` granted to (or revoked from) each of `grantees`
/// (`None`: PUBLIC) by `grantor`; grants left empty are removed. The
/// grantor's own privileges are implicit: granting them changes nothing,
/// revoking them is refused (0A000; PostgreSQL lets an owner revoke them,
/// Eddy does not model that).
pub fn change_acl(
    mut acl: Vec<AclItem>,
    privs: TablePrivileges,
    grantees: &[Option<String>],
    grantor: &str,
    revoke: bool,
) -> crate::error::Result<Vec<AclItem>> {
    for g in grantees {
        if g.as_deref() == Some(grantor) {
            if revoke {
                return Err(crate::error::SqlError::FeatureNotSupported(
                    "revoking an owner's own privileges is not supported".into(),
                ));
            }
            continue;
        }
        match acl.iter_mut().find(|a| a.grantee == *g) {
            Some(a) if revoke => a.privileges = a.privileges.without(privs),
            Some(a) => a.privileges = a.privileges.union(privs),
            None if revoke => {}
            None => acl.push(AclItem {
                grantee: g.clone(),
                privileges: privs,
                grantor: grantor.to_string(),
            }),
        }
    }
    acl.retain(|a| !a.privileges.is_empty());
    Ok(acl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn of(sql: &str) -> Vec<(String, String)> {
        let stmt = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .ok()
            .and_then(|mut v| v.pop());
        let Some(stmt) = stmt else {
            return vec![("parse error".into(), sql.into())];
        };
        let n = needs(&stmt);
        let mut out: Vec<(String, String)> = n
            .tables
            .iter()
            .map(|(t, p)| (t.to_string(), p.letters()))
            .collect();
        out.extend(n.owned.iter().map(|t| (t.to_string(), "owner".into())));
        if n.create_in_public {
            out.push(("public".into(), "create".into()));
        }
        out
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn reads_need_select_everywhere() {
        assert_eq!(
            of("SELECT * FROM a JOIN b ON a.x = b.x WHERE a.y IN (SELECT y FROM c)"),
            pairs(&[("a", "r"), ("b", "r"), ("c", "r")])
        );
        assert_eq!(
            of("WITH w AS (SELECT * FROM a) SELECT * FROM w"),
            pairs(&[("a", "r")])
        );
        assert_eq!(of("EXPLAIN SELECT * FROM a"), pairs(&[("a", "r")]));
    }

    #[test]
    fn writes_need_their_privilege_and_select_when_they_read() {
        assert_eq!(of("INSERT INTO t VALUES (1)"), pairs(&[("t", "a")]));
        assert_eq!(
            of("INSERT INTO t SELECT * FROM s"),
            pairs(&[("t", "a"), ("s", "r")])
        );
        assert_eq!(
            of("INSERT INTO t VALUES (1) ON CONFLICT (id) DO UPDATE SET n = t.n + 1"),
            pairs(&[("t", "arw")])
        );
        assert_eq!(of("UPDATE t SET n = 1"), pairs(&[("t", "w")]));
        assert_eq!(
            of("UPDATE t SET n = n + 1 WHERE id = 1"),
            pairs(&[("t", "rw")])
        );
        assert_eq!(of("DELETE FROM t"), pairs(&[("t", "d")]));
        assert_eq!(of("DELETE FROM t WHERE id = 1"), pairs(&[("t", "rd")]));
        assert_eq!(of("TRUNCATE t, u"), pairs(&[("t", "D"), ("u", "D")]));
        assert_eq!(of("COPY t FROM STDIN"), pairs(&[("t", "a")]));
        assert_eq!(of("COPY t TO STDOUT"), pairs(&[("t", "r")]));
        assert_eq!(of("COPY (SELECT * FROM t) TO STDOUT"), pairs(&[("t", "r")]));
    }

    #[test]
    fn ddl_needs_ownership_or_schema_create() {
        assert_eq!(
            of("DROP TABLE t, u"),
            pairs(&[("t", "owner"), ("u", "owner")])
        );
        assert_eq!(
            of("ALTER TABLE t ADD COLUMN c int"),
            pairs(&[("t", "owner")])
        );
        assert_eq!(of("COMMENT ON COLUMN t.c IS 'x'"), pairs(&[("t", "owner")]));
        assert_eq!(
            of("CREATE TABLE n (id int)"),
            pairs(&[("public", "create")])
        );
        assert_eq!(
            of("CREATE TABLE n AS SELECT * FROM t"),
            pairs(&[("t", "r"), ("public", "create")])
        );
    }

    #[test]
    fn grants_decide_and_owners_have_all() {
        let mut def = TableDef {
            id: eddy_common::TableId(1),
            name: "t".into(),
            columns: vec![],
            primary_key: vec![],
            distribution_key: vec![],
            orientation: eddy_common::Orientation::Row,
            table_group: eddy_common::TableGroupId(1),
            schema_version: 1,
            checks: vec![],
            comment: None,
            owner: Some("alice".into()),
            acl: vec![],
            indexes: vec![],
            foreign_keys: vec![],
        };
        let roles = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<HashSet<_>>();
        assert_eq!(
            table_privileges(&roles(&["alice"]), &def),
            TablePrivileges::ALL
        );
        assert_eq!(
            table_privileges(&roles(&["bob"]), &def),
            TablePrivileges::NONE
        );
        assert_eq!(acl_text(&def), None);
        def.acl.push(eddy_common::AclItem {
            grantee: Some("readers".into()),
            privileges: TablePrivileges::SELECT,
            grantor: "alice".into(),
        });
        def.acl.push(eddy_common::AclItem {
            grantee: None,
            privileges: TablePrivileges::INSERT,
            grantor: "alice".into(),
        });
        assert_eq!(
            table_privileges(&roles(&["bob", "readers"]), &def),
            TablePrivileges::SELECT.union(TablePrivileges::INSERT)
        );
        assert_eq!(
            table_privileges(&roles(&["bob"]), &def),
            TablePrivileges::INSERT
        );
        assert_eq!(
            acl_text(&def).as_deref(),
            Some("{alice=arwdDxt/alice,readers=r/alice,=a/alice}")
        );
    }
}
