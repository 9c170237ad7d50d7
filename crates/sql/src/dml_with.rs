//! `WITH` on INSERT, UPDATE and DELETE, and data-modifying `WITH` queries,
//! on the parser's AST.
//!
//! Two jobs, both before a statement is checked or planned:
//!
//! * [`hoist`]: `WITH ctes INSERT/UPDATE/DELETE ...` (which the parser
//!   gives as a query whose body is the DML statement) becomes the DML
//!   statement itself, so every check (privileges, read-only, locks) and
//!   every DML path sees the statement it knows. INSERT's source query
//!   takes the CTEs as its own `WITH`; UPDATE and DELETE, whose AST has no
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
//!   level" ([`refuse_nested`]).
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
use crate::rewrite::ident_name;

/// The schema the earlier parts' rows are registered in.
pub const ROWS_SCHEMA: &str = "eddy_dml";

/// One statement of a data-modifying WITH, in the order it runs.
#[derive(Debug, Clone)]
pub struct Part {
    pub stmt: Statement,
    /// For a data-modifying CTE with RETURNING: the name (in
    /// [`ROWS_SCHEMA`]) its rows are registered under for the later parts.
    pub rows_as: Option<String>,
}

/// Whether `body` is an INSERT, UPDATE, DELETE or MERGE.
fn is_dml(body: &SetExpr) -> bool {
    matches!(
        body,
        SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_)
    )
}

/// Whether `stmt` is a query whose WITH holds a data-modifying statement.
pub fn is_data_modifying(stmt: &Statement) -> bool {
    matches!(stmt, Statement::Query(q)
        if q.with.as_ref().is_some_and(|w| w.cte_tables.iter().any(|c| is_dml(&c.query.body))))
}

fn top_level_only() -> SqlError {
    SqlError::FeatureNotSupported(
        "WITH clause containing a data-modifying statement must be at the top level".into(),
    )
}

/// Everything of a query besides its WITH and body must be absent when the
/// body is a DML statement (the parser gives none; a MERGE is refused).
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
        SetExpr::Insert(s) | SetExpr::Update(s) | SetExpr::Delete(s) => Ok(s),
        SetExpr::Merge(_) => Err(SqlError::FeatureNotSupported(
            "MERGE is not supported".into(),
        )),
        _ => Err(SqlError::Internal("not a DML statement".into())),
    }
}

/// `WITH ctes <DML>` as the DML statement carrying the CTEs; any other
/// statement unchanged. A data-modifying WITH is left to [`split`].
pub fn hoist(stmt: Statement) -> Result<Statement> {
    match stmt {
        Statement::Query(q) if is_dml(&q.body) && !is_data_modifying_query(&q) => {
            let with = q.with.clone();
            let dml = dml_statement(*q)?;
            attach(dml, with)
        }
        other => Ok(other),
    }
}

fn is_data_modifying_query(q: &Query) -> bool {
    q.with
        .as_ref()
        .is_some_and(|w| w.cte_tables.iter().any(|c| is_dml(&c.query.body)))
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
        Statement::Update(_) | Statement::Delete(_) => {
            if with.recursive {
                return Err(SqlError::FeatureNotSupported(
                    "WITH RECURSIVE on UPDATE or DELETE is not supported".into(),
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
    shadowed: Vec<Vec<String>>,
}

impl<'a> Inliner<'a> {
    fn new(ctes: &'a [(String, Cte)]) -> Self {
        Inliner {
            ctes,
            shadowed: Vec::new(),
        }
    }

    fn cte(&self, name: &ObjectName) -> Option<&'a Cte> {
        let [ObjectNamePart::Identifier(id)] = name.0.as_slice() else {
            return None;
        };
        let n = ident_name(id);
        if self.shadowed.iter().flatten().any(|s| *s == n) {
            return None;
        }
        self.ctes.iter().find(|(c, _)| *c == n).map(|(_, c)| c)
    }
}

impl VisitorMut for Inliner<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        let names = q
            .with
            .as_ref()
            .map(|w| {
                w.cte_tables
                    .iter()
                    .map(|c| ident_name(&c.alias.name))
                    .collect()
            })
            .unwrap_or_default();
        self.shadowed.push(names);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.shadowed.pop();
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
        if !is_dml(&cte.query.body) {
            visible.push(cte);
            continue;
        }
        if cte.query.with.is_some() {
            return Err(SqlError::FeatureNotSupported(
                "WITH inside a data-modifying statement in WITH".into(),
            ));
        }
        let name = ident_name(&cte.alias.name);
        let dml = dml_statement(*cte.query.clone())?;
        refuse_nested(&dml)?;
        refuse_without_returning(&dml, &without_returning)?;
        let rows_as = has_returning(&dml).then(|| format!("__with_{n}"));
        parts.push(Part {
            stmt: attach(dml, scope(&visible))?,
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
        let dml = dml_statement(*q)?;
        refuse_nested(&dml)?;
        attach(dml, scope(&visible))?
    } else {
        let primary = Statement::Query(q);
        refuse_nested(&primary)?;
        primary
    };
    refuse_without_returning(&primary, &without_returning)?;
    parts.push(Part {
        stmt: primary,
        rows_as: None,
    });
    Ok(parts)
}

/// PostgreSQL's 0A000 for a reference to a data-modifying CTE that has no
/// RETURNING.
fn refuse_without_returning(stmt: &Statement, names: &[String]) -> Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    let found = datafusion::sql::sqlparser::ast::visit_relations(stmt, |n| match n.0.as_slice() {
        [ObjectNamePart::Identifier(id)] if names.contains(&ident_name(id)) => {
            ControlFlow::Break(ident_name(id))
        }
        _ => ControlFlow::Continue(()),
    });
    match found {
        ControlFlow::Break(name) => Err(SqlError::FeatureNotSupported(format!(
            "WITH query \"{name}\" does not have a RETURNING clause"
        ))),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Finds a query whose body is a DML statement.
struct NestedDml;

impl Visitor for NestedDml {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        if is_dml(&q.body) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

/// A part may hold no data-modifying query anywhere inside (PostgreSQL's
/// 0A000: they must be at the top level).
fn refuse_nested(stmt: &Statement) -> Result<()> {
    match Visit::visit(stmt, &mut NestedDml) {
        ControlFlow::Break(()) => Err(top_level_only()),
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
