//! `WITH` on INSERT, UPDATE and DELETE, and data-modifying `WITH` queries,
//! on the parser's AST.
//!
//! Two jobs, both before a statement is checked or planned:
//!
//! * [`hoist`]: `WITH ctes INSERT/UPDATE/DELETE/MERGE ...` (which the parser
//!   gives as a query whose body is the DML statement) becomes the DML
//!   statement itself, so every check (privileges, read-only, locks) and
//!   every DML path sees the statement it knows. INSERT's source query
//!   takes the CTEs as its own `WITH`; UPDATE, DELETE and MERGE, whose AST has no
//!   `WITH`, get each reference to a CTE replaced by the CTE's query as a
//!   derived table (what DataFusion does with a CTE anyway: it inlines
//!   it).
//! * [`split`]: a query whose `WITH` holds INSERT/UPDATE/DELETE queries
//!   (PostgreSQL's data-modifying statements in WITH) becomes a list of
//!   statements run in order in one transaction: each data-modifying CTE,
//!   then the primary statement. A later statement reads an earlier one's
//!   RETURNING rows as `eddy_dml.__with_<n>`, put in the CTE's place
//!   (the CTE's name and column names stay), and the session registers
//!   those rows under that name before the later statement runs
//!   (`Session::run_data_modifying_with`).
//!
//! Invariants:
//! * A data-modifying CTE is a top-level entry of the primary query's
//!   `WITH`; one anywhere else is PostgreSQL's 0A000 "must be at the top
//!   level" ([`refuse_nested`]), and so is a locking clause anywhere but on
//!   a query's own SELECT or a WITH query of it (it would not lock).
//! * Each part sees only the CTEs before it (PostgreSQL's scoping of a
//!   non-recursive WITH); a reference to a data-modifying CTE without
//!   RETURNING is PostgreSQL's 0A000.
//! * The parts run one after another, so a later part would see an earlier
//!   one's writes, where PostgreSQL's sub-statements all read the
//!   statement's starting snapshot; the session refuses (0A000) a
//!   statement where a table an earlier part writes is read or written by
//!   a later one, so no answer differs from PostgreSQL's.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Cte, FromTable, ObjectName, ObjectNamePart, Query, SetExpr, Statement, TableFactor,
    TableObject, Visit, VisitMut, Visitor, VisitorMut, With,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, CteScopes};

/// The schema the earlier parts' rows are registered in.
pub const ROWS_SCHEMA: &str = "eddy_dml";

/// One statement of a data-modifying WITH, in the order it runs.
#[derive(Debug, Clone)]
pub struct Part {
    pub stmt: Statement,
    /// For a data-modifying CTE with RETURNING, or a locking one: the name
    /// (in [`ROWS_SCHEMA`]) its rows are registered under for the later
    /// parts.
    pub rows_as: Option<String>,
}

/// Whether `body` is an INSERT, UPDATE, DELETE or MERGE.
fn is_dml(body: &SetExpr) -> bool {
    matches!(
        body,
        SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_)
    )
}

/// Whether a CTE runs as a part of its own before the statements after
/// it: a data-modifying one, or one with a locking clause (`WITH next AS
/// (SELECT ... FOR UPDATE SKIP LOCKED) UPDATE ...`: PostgreSQL never folds
/// such a CTE into the query that reads it).
fn runs_first(cte: &Cte) -> bool {
    is_dml(&cte.query.body) || !cte.query.locks.is_empty()
}

/// Whether `stmt` is a query whose WITH holds a data-modifying statement
/// or a locking query: it runs as parts ([`split`]).
pub fn runs_in_parts(stmt: &Statement) -> bool {
    matches!(stmt, Statement::Query(q) if query_runs_in_parts(q))
}

fn query_runs_in_parts(q: &Query) -> bool {
    q.with
        .as_ref()
        .is_some_and(|w| w.cte_tables.iter().any(runs_first))
}

fn top_level_only() -> SqlError {
    SqlError::FeatureNotSupported(
        "WITH clause containing a data-modifying statement must be at the top level".into(),
    )
}

/// Everything of a query besides its WITH and body must be absent when the
/// body is a DML statement (the parser gives none).
fn dml_statement(q: Query) -> Result<Statement> {
    let Query {
        body,
        order_by,
        limit_clause,
        fetch,
        locks,
        for_clause,
        settings,
        format_clause,
        pipe_operators,
        ..
    } = q;
    if order_by.is_some()
        || limit_clause.is_some()
        || fetch.is_some()
        || !locks.is_empty()
        || for_clause.is_some()
        || settings.is_some()
        || format_clause.is_some()
        || !pipe_operators.is_empty()
    {
        return Err(SqlError::FeatureNotSupported(
            "clauses after a data-modifying statement in WITH".into(),
        ));
    }
    match *body {
        SetExpr::Insert(s) | SetExpr::Update(s) | SetExpr::Delete(s) | SetExpr::Merge(s) => Ok(s),
        _ => Err(SqlError::Internal("not a DML statement".into())),
    }
}

/// `WITH ctes <DML>` as the DML statement carrying the CTEs; any other
/// statement unchanged. A data-modifying WITH is left to [`split`].
pub fn hoist(stmt: Statement) -> Result<Statement> {
    match stmt {
        Statement::Query(q) if is_dml(&q.body) && !query_runs_in_parts(&q) => {
            let with = q.with.clone();
            let dml = dml_statement(*q)?;
            let dml = attach(dml, with)?;
            refuse_nested(&dml)?;
            Ok(dml)
        }
        // checked part by part (`split`)
        stmt if runs_in_parts(&stmt) => Ok(stmt),
        // not run, or checked when its statement is prepared
        stmt @ (Statement::Explain { .. } | Statement::Prepare { .. }) => Ok(stmt),
        stmt => {
            refuse_nested(&stmt)?;
            Ok(stmt)
        }
    }
}

/// `dml` with `with`'s CTEs visible to it.
fn attach(mut dml: Statement, with: Option<With>) -> Result<Statement> {
    let Some(with) = with.filter(|w| !w.cte_tables.is_empty()) else {
        return Ok(dml);
    };
    match &mut dml {
        Statement::Insert(ins) => {
            // INSERT ... DEFAULT VALUES reads nothing
            if let Some(source) = ins.source.as_mut() {
                prepend_ctes(source, with)?;
            }
        }
        Statement::Update(_) | Statement::Delete(_) | Statement::Merge(_) => {
            if with.recursive {
                return Err(SqlError::FeatureNotSupported(
                    "WITH RECURSIVE on UPDATE, DELETE or MERGE is not supported".into(),
                ));
            }
            inline_ctes(&mut dml, with.cte_tables)?;
        }
        _ => {}
    }
    Ok(dml)
}

/// `with`'s CTEs before those of `query`'s own WITH.
fn prepend_ctes(query: &mut Query, with: With) -> Result<()> {
    match query.with.as_mut() {
        None => query.with = Some(with),
        Some(own) => {
            for cte in &with.cte_tables {
                let name = ident_name(&cte.alias.name);
                if own
                    .cte_tables
                    .iter()
                    .any(|c| ident_name(&c.alias.name) == name)
                {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "WITH query \"{name}\" named both on an INSERT and on its SELECT"
                    )));
                }
            }
            own.recursive |= with.recursive;
            let mut ctes = with.cte_tables;
            ctes.append(&mut own.cte_tables);
            own.cte_tables = ctes;
        }
    }
    Ok(())
}

/// Replaces every reference to one of `ctes` in `stmt` by the CTE's query
/// as a derived table (each CTE with the earlier ones inlined first).
fn inline_ctes<V: VisitMut>(stmt: &mut V, ctes: Vec<Cte>) -> Result<()> {
    let mut inlined: Vec<(String, Cte)> = Vec::with_capacity(ctes.len());
    for mut cte in ctes {
        let _ = VisitMut::visit(cte.query.as_mut(), &mut Inliner::new(&inlined));
        inlined.push((ident_name(&cte.alias.name), cte));
    }
    let _ = VisitMut::visit(stmt, &mut Inliner::new(&inlined));
    Ok(())
}

/// The visitor of [`inline_ctes`]: a name a nested WITH defines again is
/// that WITH's, not ours, inside its query.
struct Inliner<'a> {
    ctes: &'a [(String, Cte)],
    shadowed: CteScopes,
}

impl<'a> Inliner<'a> {
    fn new(ctes: &'a [(String, Cte)]) -> Self {
        Inliner {
            ctes,
            shadowed: CteScopes::default(),
        }
    }

    fn cte(&self, name: &ObjectName) -> Option<&'a Cte> {
        let [ObjectNamePart::Identifier(id)] = name.0.as_slice() else {
            return None;
        };
        let n = ident_name(id);
        if self.shadowed.contains(&n) {
            return None;
        }
        self.ctes.iter().find(|(c, _)| *c == n).map(|(_, c)| c)
    }
}

impl VisitorMut for Inliner<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        self.shadowed.enter(q);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.shadowed.leave();
        ControlFlow::Continue(())
    }

    // after the children: the derived table put in place is not visited
    // again (a CTE whose query reads a table of its own name stays right)
    fn post_visit_table_factor(&mut self, tf: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = tf
        else {
            return ControlFlow::Continue(());
        };
        let Some(cte) = self.cte(name) else {
            return ControlFlow::Continue(());
        };
        let alias = match alias.take() {
            Some(mut a) => {
                if a.columns.is_empty() {
                    a.columns = cte.alias.columns.clone();
                }
                a
            }
            None => {
                let mut a = cte.alias.clone();
                a.explicit = true;
                a
            }
        };
        *tf = TableFactor::Derived {
            lateral: false,
            subquery: cte.query.clone(),
            alias: Some(alias),
            sample: None,
        };
        ControlFlow::Continue(())
    }
}

/// Whether `stmt` has RETURNING.
fn has_returning(stmt: &Statement) -> bool {
    match stmt {
        Statement::Insert(i) => i.returning.is_some(),
        Statement::Update(u) => u.returning.is_some(),
        Statement::Delete(d) => d.returning.is_some(),
        _ => false,
    }
}

/// The table a DML statement writes.
pub fn target(stmt: &Statement) -> Option<&ObjectName> {
    match stmt {
        Statement::Insert(i) => match &i.table {
            TableObject::TableName(n) => Some(n),
            _ => None,
        },
        Statement::Update(u) => match &u.table.relation {
            TableFactor::Table { name, .. } => Some(name),
            _ => None,
        },
        Statement::Delete(d) => match &d.from {
            FromTable::WithFromKeyword(v) | FromTable::WithoutKeyword(v) => {
                match v.first().map(|t| &t.relation) {
                    Some(TableFactor::Table { name, .. }) => Some(name),
                    _ => None,
                }
            }
        },
        Statement::Merge(m) => match &m.table {
            TableFactor::Table { name, .. } => Some(name),
            _ => None,
        },
        _ => None,
    }
}

/// `SELECT * FROM eddy_dml.<table>`, the body put in place of a
/// data-modifying CTE for the parts after it.
fn rows_query(table: &str) -> Result<Box<Query>> {
    Ok(Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&format!("SELECT * FROM {ROWS_SCHEMA}.{table}"))?
        .parse_query()?)
}

/// A data-modifying WITH as the statements to run in order; the last is
/// the primary statement.
pub fn split(stmt: Statement) -> Result<Vec<Part>> {
    let Statement::Query(mut q) = stmt else {
        return Err(SqlError::Internal("not a query".into()));
    };
    let Some(with) = q.with.take() else {
        return Err(SqlError::Internal("no WITH".into()));
    };
    let mut visible: Vec<Cte> = Vec::new();
    let mut without_returning: Vec<String> = Vec::new();
    let mut parts = Vec::new();
    let scope = |visible: &Vec<Cte>| {
        Some(With {
            with_token: with.with_token.clone(),
            recursive: with.recursive,
            cte_tables: visible.clone(),
        })
    };
    for (n, mut cte) in with.cte_tables.clone().into_iter().enumerate() {
        if !runs_first(&cte) {
            visible.push(cte);
            continue;
        }
        if !is_dml(&cte.query.body) {
            // a locking query: its rows are locked once, by a statement of
            // their own, and read by the parts after it; one nobody reads
            // is not run (PostgreSQL runs a SELECT in WITH only when read)
            let name = ident_name(&cte.alias.name);
            let later = with.cte_tables.iter().skip(n + 1).map(|c| c.query.as_ref());
            if !later.chain([q.as_ref()]).any(|l| reads_name(l, &name)) {
                continue;
            }
            let mut query = cte.query.clone();
            if let Some(scope) = scope(&visible).filter(|w| !w.cte_tables.is_empty()) {
                prepend_ctes(&mut query, scope)?;
            }
            let stmt = Statement::Query(query);
            refuse_nested(&stmt)?;
            let table = format!("__with_{n}");
            parts.push(Part {
                stmt,
                rows_as: Some(table.clone()),
            });
            cte.query = rows_query(&table)?;
            cte.materialized = None;
            visible.push(cte);
            continue;
        }
        if matches!(cte.query.body.as_ref(), SetExpr::Merge(_)) {
            // PostgreSQL's own refusal
            return Err(SqlError::FeatureNotSupported(
                "MERGE not supported in WITH query".into(),
            ));
        }
        if cte.query.with.is_some() {
            return Err(SqlError::FeatureNotSupported(
                "WITH inside a data-modifying statement in WITH".into(),
            ));
        }
        let name = ident_name(&cte.alias.name);
        let dml = dml_statement(*cte.query.clone())?;
        refuse_without_returning(&dml, &without_returning)?;
        let rows_as = has_returning(&dml).then(|| format!("__with_{n}"));
        let stmt = attach(dml, scope(&visible))?;
        refuse_nested(&stmt)?;
        parts.push(Part {
            stmt,
            rows_as: rows_as.clone(),
        });
        match rows_as {
            Some(table) => {
                cte.query = rows_query(&table)?;
                cte.materialized = None;
                visible.push(cte);
            }
            None => without_returning.push(name),
        }
    }
    q.with = scope(&visible).filter(|w| !w.cte_tables.is_empty());
    let primary = if is_dml(&q.body) {
        attach(dml_statement(*q)?, scope(&visible))?
    } else {
        Statement::Query(q)
    };
    refuse_nested(&primary)?;
    refuse_without_returning(&primary, &without_returning)?;
    parts.push(Part {
        stmt: primary,
        rows_as: None,
    });
    Ok(parts)
}

/// Whether `node` names relation `name` (one part, unqualified).
fn reads_name<V: Visit>(node: &V, name: &str) -> bool {
    datafusion::sql::sqlparser::ast::visit_relations(node, |n| match n.0.as_slice() {
        [ObjectNamePart::Identifier(id)] if ident_name(id) == name => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// PostgreSQL's 0A000 for a reference to a data-modifying CTE that has no
/// RETURNING.
fn refuse_without_returning(stmt: &Statement, names: &[String]) -> Result<()> {
    match names.iter().find(|n| reads_name(stmt, n)) {
        Some(name) => Err(SqlError::FeatureNotSupported(format!(
            "WITH query \"{name}\" does not have a RETURNING clause"
        ))),
        None => Ok(()),
    }
}

/// What a statement may not hold below its top.
enum Nested {
    Dml,
    Locks,
}

/// Finds a query whose body is a DML statement, or one with a locking
/// clause other than the statement's own query.
struct FindNested {
    /// The statement is a query: its own (first) query may lock.
    top_may_lock: bool,
    depth: usize,
}

impl Visitor for FindNested {
    type Break = Nested;

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<Nested> {
        self.depth += 1;
        if is_dml(&q.body) {
            return ControlFlow::Break(Nested::Dml);
        }
        let own_query = self.top_may_lock && self.depth == 1;
        if !q.locks.is_empty() && !own_query {
            return ControlFlow::Break(Nested::Locks);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &Query) -> ControlFlow<Nested> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }
}

/// A statement (or a part) may hold no data-modifying query anywhere
/// inside (PostgreSQL's 0A000: they must be at the top level), and no
/// locking clause but on its own query: one in a subquery, a derived
/// table, a view, a cursor or INSERT's SELECT would not lock (refused,
/// 0A000, never ignored).
pub fn refuse_nested(stmt: &Statement) -> Result<()> {
    let mut finder = FindNested {
        top_may_lock: matches!(stmt, Statement::Query(_)),
        depth: 0,
    };
    match Visit::visit(stmt, &mut finder) {
        ControlFlow::Break(Nested::Dml) => Err(top_level_only()),
        ControlFlow::Break(Nested::Locks) => Err(SqlError::FeatureNotSupported(
            "FOR UPDATE/FOR SHARE is supported on a SELECT statement's own query and on a \
             query of its WITH, not in a subquery, a view, a cursor or INSERT's SELECT"
                .into(),
        )),
        ControlFlow::Continue(()) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::parse_statement;

    fn hoisted(sql: &str) -> String {
        hoist(parse_statement(sql).unwrap()).unwrap().to_string()
    }

    #[test]
    fn insert_takes_the_ctes_on_its_source() {
        assert_eq!(
            hoisted("WITH x AS (SELECT 1 AS id) INSERT INTO t SELECT id FROM x"),
            "INSERT INTO t WITH x AS (SELECT 1 AS id) SELECT id FROM x"
        );
    }

    #[test]
    fn update_and_delete_read_the_ctes_as_derived_tables() {
        assert_eq!(
            hoisted("WITH x(k) AS (SELECT 1) UPDATE t SET v = 2 WHERE id IN (SELECT k FROM x)"),
            "UPDATE t SET v = 2 WHERE id IN (SELECT k FROM (SELECT 1) AS x (k))"
        );
        assert_eq!(
            hoisted(
                "WITH a AS (SELECT 1 AS k), b AS (SELECT k FROM a) \
                 DELETE FROM t USING b AS bb WHERE t.id = bb.k"
            ),
            "DELETE FROM t USING (SELECT k FROM (SELECT 1 AS k) AS a) AS bb WHERE t.id = bb.k"
        );
    }

    #[test]
    fn a_nested_with_of_the_same_name_is_its_own() {
        assert_eq!(
            hoisted(
                "WITH x AS (SELECT 1 AS k) DELETE FROM t WHERE id IN \
                 (WITH x AS (SELECT 2 AS k) SELECT k FROM x)"
            ),
            "DELETE FROM t WHERE id IN (WITH x AS (SELECT 2 AS k) SELECT k FROM x)"
        );
    }

    #[test]
    fn a_cte_reading_a_table_of_its_own_name_reads_the_table() {
        assert_eq!(
            hoisted("WITH t AS (SELECT * FROM t) DELETE FROM u WHERE id IN (SELECT id FROM t)"),
            "DELETE FROM u WHERE id IN (SELECT id FROM (SELECT * FROM t) AS t)"
        );
    }

    #[test]
    fn data_modifying_ctes_run_first_and_are_read_as_rows() {
        let parts = split(
            parse_statement(
                "WITH a AS (SELECT 1 AS k), d AS (DELETE FROM t WHERE id IN (SELECT k FROM a) RETURNING *), \
                 e AS (UPDATE u SET v = 1) INSERT INTO arch SELECT * FROM d",
            )
            .unwrap(),
        )
        .unwrap();
        let shown: Vec<String> = parts.iter().map(|p| p.stmt.to_string()).collect();
        assert_eq!(
            shown,
            [
                "DELETE FROM t WHERE id IN (SELECT k FROM (SELECT 1 AS k) AS a) RETURNING *",
                "UPDATE u SET v = 1",
                "INSERT INTO arch WITH a AS (SELECT 1 AS k), d AS (SELECT * FROM eddy_dml.__with_1) SELECT * FROM d",
            ]
        );
        assert_eq!(parts[0].rows_as.as_deref(), Some("__with_1"));
        assert_eq!(parts[1].rows_as, None);
    }

    #[test]
    fn a_locking_cte_runs_first_when_read() {
        let sql = "WITH next AS (SELECT id FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) \
                   UPDATE jobs SET state = 'running' FROM next WHERE jobs.id = next.id RETURNING jobs.id";
        let parts = split(parse_statement(sql).unwrap()).unwrap();
        let shown: Vec<String> = parts.iter().map(|p| p.stmt.to_string()).collect();
        assert_eq!(
            shown,
            [
                "SELECT id FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
                "UPDATE jobs SET state = 'running' FROM (SELECT * FROM eddy_dml.__with_0) AS next \
                 WHERE jobs.id = next.id RETURNING jobs.id",
            ]
        );
        // read by nobody: not run, as PostgreSQL runs no unread SELECT
        let parts =
            split(parse_statement("WITH l AS (SELECT id FROM jobs FOR UPDATE) SELECT 1").unwrap())
                .unwrap();
        assert_eq!(parts.len(), 1);
    }

    #[test]
    fn locks_below_the_top_are_refused_not_ignored() {
        for sql in [
            "SELECT * FROM (SELECT id FROM t FOR UPDATE) s",
            "SELECT 1 FROM t WHERE id IN (SELECT id FROM t FOR SHARE)",
            "INSERT INTO u SELECT * FROM t FOR UPDATE",
            "DELETE FROM t WHERE id = (SELECT id FROM t LIMIT 1 FOR UPDATE SKIP LOCKED)",
            "DECLARE c CURSOR FOR SELECT * FROM t FOR UPDATE",
            "CREATE VIEW v AS SELECT * FROM t FOR UPDATE",
        ] {
            let e = hoist(parse_statement(sql).unwrap()).unwrap_err();
            assert_eq!(e.sqlstate(), "0A000", "{sql}");
        }
        for sql in [
            "SELECT * FROM t FOR UPDATE",
            "PREPARE p AS SELECT * FROM t FOR UPDATE",
            "EXPLAIN SELECT * FROM t FOR UPDATE",
        ] {
            assert!(hoist(parse_statement(sql).unwrap()).is_ok(), "{sql}");
        }
    }

    #[test]
    fn refusals_are_postgresqls() {
        for (sql, msg) in [
            (
                "WITH d AS (DELETE FROM t) SELECT * FROM d",
                "does not have a RETURNING clause",
            ),
            (
                "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM (WITH e AS (DELETE FROM u RETURNING *) SELECT 1) s",
                "must be at the top level",
            ),
        ] {
            let e = split(parse_statement(sql).unwrap()).unwrap_err();
            assert_eq!(e.sqlstate(), "0A000", "{sql}");
            assert!(e.to_string().contains(msg), "{sql}: {e}");
        }
    }
}
