//! PostgreSQL's error for a column read outside GROUP BY: SQLSTATE 42803,
//! `column "t.c" must appear in the GROUP BY clause or be used in an
//! aggregate function`. DataFusion refuses the same queries with a plan
//! error (42000 on the wire, its own wording), which drivers and tools
//! that branch on 42803 do not recognise.
//!
//! The planner's refusal decides *that* the query is wrong; this module
//! only says *why*, on the AST, and only after planning failed: a grouped
//! SELECT (GROUP BY, HAVING, or an aggregate in its select list) whose
//! select list or HAVING reads a column of one of its own FROM tables
//! outside an aggregate call and outside every GROUP BY expression (a
//! GROUP BY position or output name counts as the select item it names).
//! The GROUP BY it reads already holds the columns a primary key
//! determines (`crate::group_by_key` runs first). Anything it cannot
//! resolve (a name no FROM table has, a derived table, GROUPING SETS)
//! finds nothing, and the planner's error stands: a wrong code is never
//! given to a query the module does not understand.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArguments, GroupByExpr, Query, Select, SelectItem, SetExpr, Statement, Value,
    Visit, Visitor,
};
use eddy_common::TableDef;

use crate::group_by_key::{column_of, relations, Relation};
use crate::rewrite::ident_name;

/// PostgreSQL's aggregate functions (a call of one without OVER is an
/// aggregate; its arguments may read any column).
const AGGREGATES: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "string_agg",
    "array_agg",
    "bool_and",
    "bool_or",
    "every",
    "bit_and",
    "bit_or",
    "bit_xor",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "variance",
    "var_pop",
    "var_samp",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
    "percentile_cont",
    "percentile_disc",
    "mode",
    "corr",
    "covar_pop",
    "covar_samp",
    "regr_avgx",
    "regr_avgy",
    "regr_count",
    "regr_intercept",
    "regr_r2",
    "regr_slope",
    "regr_sxx",
    "regr_sxy",
    "regr_syy",
];

/// The message of the first column `stmt` reads outside its GROUP BY
/// (module doc), if one is found; `table` finds a table by name.
pub fn ungrouped_column(
    stmt: &Statement,
    table: &dyn Fn(&str) -> Option<Arc<TableDef>>,
) -> Option<String> {
    let mut finder = Finder {
        table,
        ctes: Vec::new(),
        found: None,
    };
    let _ = stmt.visit(&mut finder);
    finder.found.map(|column| {
        format!(
            "column \"{column}\" must appear in the GROUP BY clause or be used in an aggregate \
             function"
        )
    })
}

struct Finder<'a> {
    table: &'a dyn Fn(&str) -> Option<Arc<TableDef>>,
    /// The names the WITH clauses in scope define, one list per query.
    ctes: Vec<Vec<String>>,
    found: Option<String>,
}

impl Visitor for Finder<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        self.ctes.push(
            query
                .with
                .iter()
                .flat_map(|w| w.cte_tables.iter())
                .map(|c| ident_name(&c.alias.name))
                .collect(),
        );
        if let SetExpr::Select(select) = query.body.as_ref() {
            let ctes = &self.ctes;
            // a CTE shadows the table of its name
            let table = |n: &str| {
                if ctes.iter().flatten().any(|c| c == n) {
                    None
                } else {
                    (self.table)(n)
                }
            };
            if let Some(column) = check_select(select, &table) {
                self.found = Some(column);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
        self.ctes.pop();
        ControlFlow::Continue(())
    }
}

/// Whether `e` calls one of PostgreSQL's aggregates (without OVER).
pub(crate) fn is_aggregate_call(e: &Expr) -> bool {
    match e {
        Expr::Function(f) if f.over.is_none() => f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .is_some_and(|id| AGGREGATES.contains(&ident_name(id).as_str())),
        _ => false,
    }
}

/// An expression compared as PostgreSQL matches GROUP BY expressions:
/// by its text, names folded to lower case.
fn key_text(e: &Expr) -> String {
    match e {
        // `"gb"."b"` (as `group_by_key` writes names) is `gb.b`
        Expr::Identifier(id) => ident_name(id),
        Expr::CompoundIdentifier(parts) => {
            parts.iter().map(ident_name).collect::<Vec<_>>().join(".")
        }
        e => e.to_string().to_ascii_lowercase(),
    }
}

/// Whether the select list has an aggregate call (outside subqueries).
fn has_aggregate(select: &Select) -> bool {
    struct Any(usize);
    impl Visitor for Any {
        type Break = ();
        fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.0 += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.0 = self.0.saturating_sub(1);
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if self.0 == 0 && is_aggregate_call(e) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }
    select
        .projection
        .iter()
        .any(|item| item.visit(&mut Any(0)).is_break())
}

/// The first column `select` reads outside its GROUP BY, as `t.c`.
fn check_select(select: &Select, table: &dyn Fn(&str) -> Option<Arc<TableDef>>) -> Option<String> {
    let GroupByExpr::Expressions(grouped, modifiers) = &select.group_by else {
        return None;
    };
    if !modifiers.is_empty() {
        return None;
    }
    if grouped.is_empty() && select.having.is_none() && !has_aggregate(select) {
        return None;
    }
    let rels = relations(select, table);
    if rels.is_empty() || rels.len() != table_factor_count(select) {
        // a derived table, a function or a CTE in FROM: not understood
        return None;
    }
    let mut keys: Vec<String> = Vec::new();
    for g in grouped {
        keys.push(key_text(g));
        // GROUP BY 2 or GROUP BY an output name: that select item
        let named = match g {
            Expr::Value(v) => match &v.value {
                Value::Number(n, _) => n
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| i.checked_sub(1))
                    .and_then(|i| select.projection.get(i))
                    .and_then(item_expr),
                _ => None,
            },
            Expr::Identifier(id) => select.projection.iter().find_map(|item| match item {
                SelectItem::ExprWithAlias { expr, alias }
                    if ident_name(alias) == ident_name(id) =>
                {
                    Some(expr)
                }
                _ => None,
            }),
            _ => None,
        };
        if let Some(e) = named {
            keys.push(key_text(e));
        }
    }
    let grouped_column = |i: usize, column: &str| {
        let q = ident_name(&rels[i].qualifier);
        keys.iter()
            .any(|k| *k == column || *k == format!("{q}.{column}"))
    };
    for item in &select.projection {
        match item {
            SelectItem::Wildcard(_) => {
                for (i, r) in rels.iter().enumerate() {
                    for c in &r.def.columns {
                        if !grouped_column(i, &c.name) {
                            return Some(qualified(r, &c.name));
                        }
                    }
                }
            }
            SelectItem::QualifiedWildcard(..) | SelectItem::ExprWithAliases { .. } => return None,
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                if let Some(c) = ungrouped_in(e, &keys, &rels) {
                    return Some(c);
                }
            }
        }
    }
    select
        .having
        .as_ref()
        .and_then(|h| ungrouped_in(h, &keys, &rels))
}

fn item_expr(item: &SelectItem) -> Option<&Expr> {
    match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
        _ => None,
    }
}

/// Tables and other relations of the FROM list.
fn table_factor_count(select: &Select) -> usize {
    select.from.iter().map(|f| 1 + f.joins.len()).sum()
}

fn qualified(r: &Relation, column: &str) -> String {
    format!("{}.{column}", ident_name(&r.qualifier))
}

/// The first column of `rels` that `e` reads outside an aggregate call,
/// a subquery and every GROUP BY expression.
fn ungrouped_in(e: &Expr, keys: &[String], rels: &[Relation]) -> Option<String> {
    struct Walk<'a> {
        keys: &'a [String],
        rels: &'a [Relation],
        /// Per open expression: whether it hides what it contains.
        hiding: Vec<bool>,
        hidden: usize,
        queries: usize,
        found: Option<String>,
    }
    impl Visitor for Walk<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.queries += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.queries = self.queries.saturating_sub(1);
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            let hides = self.queries > 0
                || is_aggregate_call(e)
                || self.keys.contains(&key_text(e))
                // FILTER / WITHIN GROUP forms and lambdas are left alone
                || matches!(e, Expr::Function(f) if matches!(f.args, FunctionArguments::Subquery(_)));
            self.hiding.push(hides);
            if hides {
                self.hidden += 1;
            }
            if self.hidden == 0 {
                if let Some((i, column)) = column_of(e, self.rels) {
                    // `t.c` and `c` name the same grouped column
                    let q = ident_name(&self.rels[i].qualifier);
                    let grouped = self
                        .keys
                        .iter()
                        .any(|k| *k == column || *k == format!("{q}.{column}"));
                    if !grouped {
                        self.found = Some(qualified(&self.rels[i], &column));
                        return ControlFlow::Break(());
                    }
                }
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
            if self.hiding.pop() == Some(true) {
                self.hidden = self.hidden.saturating_sub(1);
            }
            ControlFlow::Continue(())
        }
    }
    let mut walk = Walk {
        keys,
        rels,
        hiding: Vec::new(),
        hidden: 0,
        queries: 0,
        found: None,
    };
    let _ = e.visit(&mut walk);
    walk.found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group_by_key::tests::def;

    /// The column reported for `sql`, after the key-dependent columns
    /// joined its GROUP BY (as `Session::compat` leaves it).
    fn reported(sql: &str) -> Option<String> {
        let tables = [
            def("gb", &["a", "b", "c"], &[0]),
            def("o", &["id", "b", "total"], &[]),
        ];
        let lookup = |n: &str| tables.iter().find(|t| t.name == n).cloned();
        let mut stmt = crate::rewrite::parse_statement(sql).expect("parses");
        crate::group_by_key::add_dependent_columns(&mut stmt, &lookup);
        ungrouped_column(&stmt, &lookup)
            .map(|m| m.split('"').nth(1).unwrap_or_default().to_string())
    }

    /// PostgreSQL 15 names the same column for each.
    #[test]
    fn the_first_ungrouped_column_is_named_as_postgresql_names_it() {
        for (sql, column) in [
            ("SELECT b, c FROM gb GROUP BY b", "gb.c"),
            ("SELECT b, count(*) FROM gb", "gb.b"),
            ("SELECT b FROM gb HAVING count(*) > 1", "gb.b"),
            ("SELECT b + 1 FROM gb GROUP BY b + 2", "gb.b"),
            ("SELECT max(b) OVER (), c FROM gb GROUP BY b", "gb.c"),
            ("SELECT x.c FROM gb AS x GROUP BY x.b", "x.c"),
            ("SELECT * FROM gb GROUP BY b", "gb.a"),
            (
                "SELECT gb.b, sum(o.total), o.id FROM gb JOIN o ON gb.b = o.b GROUP BY gb.b",
                "o.id",
            ),
            ("SELECT b FROM gb GROUP BY c HAVING sum(a) > c + b", "gb.b"),
        ] {
            assert_eq!(reported(sql).as_deref(), Some(column), "{sql}");
        }
    }

    #[test]
    fn grouped_and_aggregated_reads_are_not_reported() {
        for sql in [
            "SELECT b, count(*) FROM gb GROUP BY b",
            "SELECT gb.b, count(c) FROM gb GROUP BY b",
            "SELECT b + 1 FROM gb GROUP BY b + 1",
            "SELECT b AS k, sum(c) FROM gb GROUP BY k",
            "SELECT b, sum(c) FROM gb GROUP BY 1",
            // the primary key determines the other columns
            "SELECT a, b, c FROM gb GROUP BY a",
            "SELECT count(*) FILTER (WHERE c > 1) FROM gb",
            "SELECT b FROM gb",
            // what it does not understand: left to the planner
            "SELECT s.b FROM (SELECT b, c FROM gb) AS s GROUP BY s.c",
            "SELECT b, (SELECT max(c) FROM gb AS i WHERE i.a = 1) FROM gb GROUP BY b",
            "SELECT nosuch FROM gb GROUP BY b",
        ] {
            assert_eq!(reported(sql), None, "{sql}");
        }
    }
}
