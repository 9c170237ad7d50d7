//! Views on the AST: a view named in FROM is replaced by its defining
//! query, as PostgreSQL's rewriter does, before DataFusion plans the
//! statement; so a view is optimised together with the query that reads it
//! (filters pushed into it, joins reordered across it).
//!
//! Invariants:
//! * a name is a view only where a table could be named (a FROM item
//!   without arguments) and where no CTE of the statement has that name
//!   (CTE names shadow relations; as `crate::privileges`, the whole
//!   statement's CTE names count, not only those in scope);
//! * the replacement is `(<query>) AS <alias or view name>(<columns>)`:
//!   the view's column names are the ones fixed at CREATE VIEW, a user's
//!   column aliases override the first ones; the defining query is parsed
//!   from its stored text and its own views expanded in turn, at most
//!   [`MAX_DEPTH`] deep (a view that reads itself: 42P17);
//! * a view is never the target of a write: INSERT, UPDATE, DELETE, COPY
//!   FROM and TRUNCATE naming one are refused (Eddy's views are not
//!   updatable; PostgreSQL's simple views are, so 0A000).
//!
//! Privileges are checked on the statement before this runs
//! (`Session::check_access`): SELECT on the view for the user, and what
//! the view reads for the view's owner, as PostgreSQL checks them.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    CopySource, FromTable, Ident, ObjectName, Query, SelectItem, SetExpr, Statement, TableAlias,
    TableAliasColumnDef, TableFactor, TableObject, Visit, VisitMut, Visitor, VisitorMut,
};
use eddy_common::ViewDef;

use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, table_name};

/// How deep views may read views.
pub const MAX_DEPTH: usize = 32;

/// Finds a view by name (the session's view of the catalog: its own
/// transaction's changes over the committed views).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<ViewDef>;

/// Replaces every view `stmt` reads by its query (see the module doc);
/// refuses writes to views.
pub fn expand(stmt: &mut Statement, lookup: Lookup<'_>) -> Result<()> {
    refuse_writes(stmt, lookup)?;
    let ctes = cte_names(stmt);
    let mut v = Expander {
        lookup,
        ctes,
        depth: 0,
    };
    match VisitMut::visit(stmt, &mut v) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Whether `stmt` names a view anywhere (outside its CTE names).
pub fn names_a_view(stmt: &Statement, lookup: Lookup<'_>) -> bool {
    let ctes = cte_names(stmt);
    let found = datafusion::sql::sqlparser::ast::visit_relations(stmt, |name| {
        let is_view = table_name(name)
            .is_ok_and(|n| !(name.0.len() == 1 && ctes.contains(&n)) && lookup(&n).is_some());
        if is_view {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    found.is_break()
}

/// The view named `name`, if `name` is one (schema `public` or none).
fn view_named(name: &ObjectName, lookup: Lookup<'_>) -> Option<ViewDef> {
    table_name(name).ok().and_then(|n| lookup(&n))
}

fn refuse_writes(stmt: &Statement, lookup: Lookup<'_>) -> Result<()> {
    let refuse = |what: &str, v: &ViewDef| {
        Err(SqlError::FeatureNotSupported(format!(
            "cannot {what} view \"{}\": Eddy's views are not updatable",
            v.name
        )))
    };
    match stmt {
        Statement::Insert(ins) => {
            if let TableObject::TableName(name) = &ins.table {
                if let Some(v) = view_named(name, lookup) {
                    return refuse("insert into", &v);
                }
            }
        }
        Statement::Update(u) => {
            if let TableFactor::Table { name, .. } = &u.table.relation {
                if let Some(v) = view_named(name, lookup) {
                    return refuse("update", &v);
                }
            }
        }
        Statement::Merge(m) => {
            if let TableFactor::Table { name, .. } = &m.table {
                if let Some(v) = view_named(name, lookup) {
                    // PostgreSQL 15 itself cannot MERGE into a view
                    return Err(SqlError::FeatureNotSupported(format!(
                        "cannot execute MERGE on relation \"{}\"",
                        v.name
                    ))
                    .with_detail("This operation is not supported for views.".into()));
                }
            }
        }
        Statement::Delete(d) => {
            let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &d.from;
            for t in from {
                if let TableFactor::Table { name, .. } = &t.relation {
                    if let Some(v) = view_named(name, lookup) {
                        return refuse("delete from", &v);
                    }
                }
            }
        }
        Statement::Copy {
            source: CopySource::Table { table_name, .. },
            to,
            ..
        } => {
            if let Some(v) = view_named(table_name, lookup) {
                return Err(SqlError::WrongObjectType(if *to {
                    format!(
                        "cannot copy from view \"{}\"\nHINT:  Try the COPY (SELECT ...) TO variant.",
                        v.name
                    )
                } else {
                    format!("cannot copy to view \"{}\"", v.name)
                }));
            }
        }
        Statement::Truncate(t) => {
            for target in &t.table_names {
                if let Some(v) = view_named(&target.name, lookup) {
                    return Err(SqlError::WrongObjectType(format!(
                        "\"{}\" is not a table",
                        v.name
                    )));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The names the statement's WITH clauses define.
fn cte_names<V: Visit>(node: &V) -> HashSet<String> {
    struct Ctes(HashSet<String>);
    impl Visitor for Ctes {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
            if let Some(with) = &q.with {
                for cte in &with.cte_tables {
                    self.0.insert(ident_name(&cte.alias.name));
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut c = Ctes(HashSet::new());
    let _ = node.visit(&mut c);
    c.0
}

struct Expander<'a> {
    lookup: Lookup<'a>,
    ctes: HashSet<String>,
    depth: usize,
}

impl VisitorMut for Expander<'_> {
    type Break = SqlError;

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<SqlError> {
        let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let Ok(n) = table_name(name) else {
            return ControlFlow::Continue(());
        };
        if name.0.len() == 1 && self.ctes.contains(&n) {
            return ControlFlow::Continue(());
        }
        let Some(view) = (self.lookup)(&n) else {
            return ControlFlow::Continue(());
        };
        match self.replacement(&view, alias.take()) {
            Ok(derived) => {
                *factor = derived;
                ControlFlow::Continue(())
            }
            Err(e) => ControlFlow::Break(e),
        }
    }
}

impl Expander<'_> {
    /// `(<query>) AS alias(columns)` for `view`, its own views expanded.
    fn replacement(&self, view: &ViewDef, alias: Option<TableAlias>) -> Result<TableFactor> {
        if self.depth >= MAX_DEPTH {
            return Err(SqlError::InvalidObjectDefinition(format!(
                "infinite recursion detected in rules for relation \"{}\"",
                view.name
            )));
        }
        let mut query = parse_query(&view.query)?;
        let mut inner = Expander {
            lookup: self.lookup,
            ctes: cte_names(&query),
            depth: self.depth + 1,
        };
        if let ControlFlow::Break(e) = VisitMut::visit(&mut query, &mut inner) {
            return Err(e);
        }
        let mut alias = alias.unwrap_or_else(|| TableAlias {
            explicit: true,
            name: Ident::with_quote('"', &view.name),
            columns: vec![],
            at: None,
        });
        if alias.columns.len() > view.columns.len() {
            return Err(SqlError::InvalidColumnReference(format!(
                "table \"{}\" has {} columns available but {} columns specified",
                ident_name(&alias.name),
                view.columns.len(),
                alias.columns.len()
            )));
        }
        for c in view.columns.iter().skip(alias.columns.len()) {
            alias.columns.push(TableAliasColumnDef {
                name: Ident::with_quote('"', &c.name),
                data_type: None,
            });
        }
        Ok(TableFactor::Derived {
            lateral: false,
            subquery: Box::new(query),
            alias: Some(alias),
            sample: None,
        })
    }
}

/// A view's stored query, parsed.
pub fn parse_query(text: &str) -> Result<Query> {
    match crate::rewrite::parse_statement(text)? {
        Statement::Query(q) => Ok(*q),
        other => Err(SqlError::InvalidObjectDefinition(format!(
            "a view's definition is not a query: {other}"
        ))),
    }
}

/// The relations `query` names outside its CTEs (tables and views, as
/// storage names): what a view over it depends on.
pub fn relations_read(query: &Query) -> Vec<String> {
    let ctes = cte_names(query);
    let mut out: Vec<String> = Vec::new();
    let _ = datafusion::sql::sqlparser::ast::visit_relations(query, |name| {
        if let Ok(n) = table_name(name) {
            let is_cte = name.0.len() == 1 && ctes.contains(&n);
            if !is_cte && !out.contains(&n) {
                out.push(n);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

/// Whether `query`'s result columns include a `*` (then they follow the
/// tables' columns, and a column added to one would change the view).
pub fn has_wildcard(query: &Query) -> bool {
    fn set_has(e: &SetExpr) -> bool {
        match e {
            SetExpr::Select(s) => s.projection.iter().any(|i| {
                matches!(
                    i,
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
                )
            }),
            SetExpr::Query(q) => set_has(&q.body),
            SetExpr::SetOperation { left, right, .. } => set_has(left) || set_has(right),
            _ => false,
        }
    }
    // a `*` of a derived table or CTE in FROM passes the tables' columns
    // through as well
    struct Any(bool);
    impl Visitor for Any {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
            if set_has(&q.body) {
                self.0 = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut any = Any(false);
    let _ = query.visit(&mut any);
    any.0
}

/// Whether the query `text` may read a column named `column` of a table it
/// reads: a word of its tokens is that name (a column, the last part of a
/// qualified name, a `USING` list), or it has a `*` (every column, or a
/// multiplication: counted too) or a NATURAL join. An over-approximation
/// (a same-named column of another table counts), never a miss: what it
/// allows cannot break the view. Unreadable text counts as reading.
pub fn may_read_column(text: &str, column: &str) -> bool {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::keywords::Keyword;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, text).tokenize() else {
        return true;
    };
    tokens.iter().any(|t| match t {
        Token::Mul => true,
        Token::Word(w) if w.keyword == Keyword::NATURAL && w.quote_style.is_none() => true,
        Token::Word(w) => match w.quote_style {
            Some(_) => w.value == column,
            None => w.value.to_lowercase() == column,
        },
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::{TableId, ViewColumn};

    #[test]
    fn columns_a_view_may_read() {
        let q = "SELECT a, t.\"B\" FROM t JOIN u USING (k) WHERE x > 1";
        for c in ["a", "B", "k", "x"] {
            assert!(may_read_column(q, c), "{c}");
        }
        for c in ["b", "c", "A"] {
            assert!(!may_read_column(q, c), "{c}");
        }
        assert!(may_read_column("SELECT * FROM t", "c"));
        assert!(may_read_column("SELECT a FROM t NATURAL JOIN u", "c"));
    }

    fn view(name: &str, query: &str, cols: &[&str]) -> ViewDef {
        ViewDef {
            id: TableId(9),
            name: name.into(),
            columns: cols
                .iter()
                .map(|c| ViewColumn {
                    name: c.to_string(),
                    type_oid: 23,
                    typmod: -1,
                })
                .collect(),
            query: query.into(),
            depends_on: vec![],
            owner: None,
            acl: Vec::new(),
            comment: None,
            version: 1,
        }
    }

    fn expanded(sql: &str, views: &[ViewDef]) -> Result<String> {
        let mut stmt = crate::rewrite::parse_statement(sql)?;
        let lookup = |n: &str| views.iter().find(|v| v.name == n).cloned();
        expand(&mut stmt, &lookup)?;
        Ok(stmt.to_string())
    }

    #[test]
    fn a_view_becomes_its_query_with_its_column_names() {
        let v = view("v", "SELECT a + 1 FROM t", &["x"]);
        assert_eq!(
            expanded("SELECT x FROM v WHERE x > 1", std::slice::from_ref(&v)).unwrap(),
            "SELECT x FROM (SELECT a + 1 FROM t) AS \"v\" (\"x\") WHERE x > 1"
        );
        // a user's alias and column aliases win
        assert_eq!(
            expanded("SELECT y FROM public.v AS w(y)", &[v]).unwrap(),
            "SELECT y FROM (SELECT a + 1 FROM t) AS w (y)"
        );
    }

    #[test]
    fn views_of_views_expand_and_ctes_shadow_them() {
        let v = view("v", "SELECT a FROM t", &["a"]);
        let w = view("w", "SELECT a FROM v", &["a"]);
        let out = expanded("SELECT * FROM w", &[v.clone(), w]).unwrap();
        assert!(out.contains("(SELECT a FROM (SELECT a FROM t) AS \"v\" (\"a\")) AS \"w\""));
        let out = expanded("WITH v AS (SELECT 1 AS a) SELECT * FROM v", &[v]).unwrap();
        assert_eq!(out, "WITH v AS (SELECT 1 AS a) SELECT * FROM v");
    }

    #[test]
    fn a_view_reading_itself_is_refused() {
        let v = view("v", "SELECT a FROM v", &["a"]);
        let e = expanded("SELECT * FROM v", &[v]).unwrap_err();
        assert_eq!(e.sqlstate(), "42P17");
    }

    #[test]
    fn writes_to_views_are_refused() {
        let v = view("v", "SELECT a FROM t", &["a"]);
        for sql in [
            "INSERT INTO v VALUES (1)",
            "UPDATE v SET a = 1",
            "DELETE FROM v",
        ] {
            assert_eq!(
                expanded(sql, std::slice::from_ref(&v))
                    .unwrap_err()
                    .sqlstate(),
                "0A000",
                "{sql}"
            );
        }
        for sql in ["TRUNCATE v", "COPY v TO STDOUT"] {
            assert_eq!(
                expanded(sql, std::slice::from_ref(&v))
                    .unwrap_err()
                    .sqlstate(),
                "42809",
                "{sql}"
            );
        }
    }

    #[test]
    fn relations_and_wildcards_of_a_definition() {
        let q =
            parse_query("WITH c AS (SELECT * FROM t) SELECT c.a FROM c JOIN u ON true").unwrap();
        assert_eq!(relations_read(&q), vec!["t".to_string(), "u".to_string()]);
        assert!(has_wildcard(&q));
        let q = parse_query("SELECT a FROM t").unwrap();
        assert!(!has_wildcard(&q));
        assert!(has_wildcard(&parse_query("SELECT * FROM t").unwrap()));
    }
}
