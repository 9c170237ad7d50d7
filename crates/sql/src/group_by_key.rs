//! GROUP BY a table's primary key, selecting its other columns.
//!
//! PostgreSQL accepts `SELECT c.name, sum(o.total) FROM c JOIN o ... GROUP
//! BY c.id` when `c.id` is `c`'s primary key: every other column of `c` is
//! functionally dependent on it, so it has one value per group. Django
//! groups its annotations this way (its PostgreSQL backend sets
//! `allows_group_by_selected_pks`), and DataFusion refuses the query
//! (42803) unless the table declares the key.
//!
//! Declaring the key to DataFusion (`TableProvider::constraints`) was
//! tried and dropped: DataFusion then carries the key's uniqueness through
//! joins where it no longer holds (a lateral join over a set-returning
//! function kept `t.id` unique and dropped the rest of an `ORDER BY t.id,
//! e.value`), a wrong order. So the dependency is used on the AST instead,
//! where it is exact: when the GROUP BY of a SELECT names every primary-key
//! column of one of its tables, the other columns of that table the select
//! list, HAVING or ORDER BY read are added to the GROUP BY. Adding a column
//! the key determines splits no group, so the answer is PostgreSQL's.
//!
//! Only plain tables of the SELECT's own FROM are considered (by alias or
//! name; a name a WITH clause in scope defines is a CTE, not the table);
//! references inside subqueries are left alone; GROUPING SETS, CUBE and
//! ROLLUP are left to the planner.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    Expr, GroupByExpr, Ident, ObjectNamePart, OrderBy, OrderByKind, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, Statement, TableFactor, Visit, VisitMut, Visitor,
    VisitorMut,
};
use eddy_common::TableDef;

use crate::rewrite::{ident_name, table_name};

/// Adds the key-dependent columns to every GROUP BY of `stmt` (module
/// doc); `table` finds a table's definition by name.
pub fn add_dependent_columns(stmt: &mut Statement, table: &dyn Fn(&str) -> Option<Arc<TableDef>>) {
    let _ = stmt.visit(&mut Grouping {
        table,
        ctes: Vec::new(),
    });
}

struct Grouping<'a> {
    table: &'a dyn Fn(&str) -> Option<Arc<TableDef>>,
    /// The names the WITH clauses in scope define, one list per query.
    ctes: Vec<Vec<String>>,
}

impl VisitorMut for Grouping<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        self.ctes.push(
            query
                .with
                .iter()
                .flat_map(|w| w.cte_tables.iter())
                .map(|c| ident_name(&c.alias.name))
                .collect(),
        );
        let ctes = &self.ctes;
        // a CTE shadows the table of its name
        let table = |n: &str| {
            if ctes.iter().flatten().any(|c| c == n) {
                None
            } else {
                (self.table)(n)
            }
        };
        let Query { body, order_by, .. } = query;
        if let SetExpr::Select(select) = body.as_mut() {
            complete_group_by(select, order_by.as_ref(), &table);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.ctes.pop();
        ControlFlow::Continue(())
    }
}

/// A table of the FROM list.
pub(crate) struct Relation {
    /// What its columns are qualified by (its alias, else its name).
    pub(crate) qualifier: Ident,
    pub(crate) def: Arc<TableDef>,
}

impl Relation {
    fn is(&self, qualifier: &Ident) -> bool {
        ident_name(qualifier) == ident_name(&self.qualifier)
    }

    fn has_column(&self, name: &str) -> bool {
        self.def.column_index(name).is_some()
    }
}

pub(crate) fn relations(
    select: &Select,
    table: &dyn Fn(&str) -> Option<Arc<TableDef>>,
) -> Vec<Relation> {
    let mut out = Vec::new();
    for from in &select.from {
        for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
        {
            let TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } = factor
            else {
                continue;
            };
            let Some(def) = table_name(name).ok().and_then(|n| table(&n)) else {
                continue;
            };
            let qualifier = match (alias, name.0.last()) {
                (Some(a), _) => a.name.clone(),
                (None, Some(ObjectNamePart::Identifier(id))) => id.clone(),
                _ => continue,
            };
            out.push(Relation { qualifier, def });
        }
    }
    out
}

/// The relation and column an expression names, if it is a column of one
/// of `rels` (a bare name only when exactly one relation has it).
pub(crate) fn column_of(e: &Expr, rels: &[Relation]) -> Option<(usize, String)> {
    match e {
        Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
            let column = ident_name(&parts[1]);
            let i = rels
                .iter()
                .position(|r| r.is(&parts[0]) && r.has_column(&column))?;
            Some((i, column))
        }
        Expr::Identifier(id) => {
            let column = ident_name(id);
            let mut owners = rels
                .iter()
                .enumerate()
                .filter(|(_, r)| r.has_column(&column));
            match (owners.next(), owners.next()) {
                (Some((i, _)), None) => Some((i, column)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Collects the columns of `rels` an expression tree reads, outside
/// subqueries.
struct Reads<'a> {
    rels: &'a [Relation],
    depth: usize,
    found: Vec<(usize, String)>,
}

impl Visitor for Reads<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
        self.depth = self.depth.saturating_sub(1);
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        if self.depth == 0 {
            if let Some(c) = column_of(e, self.rels) {
                if !self.found.contains(&c) {
                    self.found.push(c);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

fn complete_group_by(
    select: &mut Select,
    order_by: Option<&OrderBy>,
    table: &dyn Fn(&str) -> Option<Arc<TableDef>>,
) {
    let GroupByExpr::Expressions(grouped, modifiers) = &select.group_by else {
        return;
    };
    if grouped.is_empty() || !modifiers.is_empty() {
        return;
    }
    let rels = relations(select, table);
    let in_group: Vec<(usize, String)> =
        grouped.iter().filter_map(|e| column_of(e, &rels)).collect();
    let keyed: Vec<usize> = (0..rels.len())
        .filter(|&i| {
            let def = &rels[i].def;
            !def.primary_key.is_empty()
                && def.primary_key.iter().all(|&k| {
                    def.columns
                        .get(k)
                        .is_some_and(|c| in_group.contains(&(i, c.name.clone())))
                })
        })
        .collect();
    if keyed.is_empty() {
        return;
    }
    let mut reads = Reads {
        rels: &rels,
        depth: 0,
        found: Vec::new(),
    };
    for item in &select.projection {
        match item {
            SelectItem::Wildcard(_) => {
                for &i in &keyed {
                    for c in &rels[i].def.columns {
                        reads.found.push((i, c.name.clone()));
                    }
                }
            }
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(n), _) => {
                if let Some(ObjectNamePart::Identifier(q)) = n.0.last() {
                    for &i in keyed.iter().filter(|&&i| rels[i].is(q)) {
                        for c in &rels[i].def.columns {
                            reads.found.push((i, c.name.clone()));
                        }
                    }
                }
            }
            other => {
                let _ = other.visit(&mut reads);
            }
        }
    }
    if let Some(h) = &select.having {
        let _ = h.visit(&mut reads);
    }
    if let Some(OrderBy {
        kind: OrderByKind::Expressions(items),
        ..
    }) = order_by
    {
        for o in items {
            let _ = o.expr.visit(&mut reads);
        }
    }
    let mut added: Vec<Expr> = Vec::new();
    for (i, column) in reads.found {
        if !keyed.contains(&i) || in_group.contains(&(i, column.clone())) {
            continue;
        }
        let e = Expr::CompoundIdentifier(vec![
            rels[i].qualifier.clone(),
            Ident::with_quote('"', column.as_str()),
        ]);
        if !added.contains(&e) {
            added.push(e);
        }
    }
    if let GroupByExpr::Expressions(grouped, _) = &mut select.group_by {
        grouped.extend(added);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use eddy_common::{ColumnDef, ColumnType};

    /// A table of int columns with the key `pk` (column positions).
    pub(crate) fn def(name: &str, columns: &[&str], pk: &[usize]) -> Arc<TableDef> {
        Arc::new(TableDef {
            id: eddy_common::TableId(1),
            name: name.into(),
            columns: columns
                .iter()
                .map(|c| ColumnDef::new(*c, ColumnType::Int, true))
                .collect(),
            primary_key: pk.to_vec(),
            distribution_key: vec![],
            orientation: eddy_common::Orientation::Row,
            table_group: eddy_common::TableGroupId(1),
            schema_version: 1,
            checks: vec![],
            comment: None,
            owner: None,
            acl: vec![],
            indexes: vec![],
            foreign_keys: vec![],
        })
    }

    fn rewritten(sql: &str) -> String {
        let tables = [
            def("c", &["id", "name", "city"], &[0]),
            def("o", &["id", "c_id", "total"], &[0]),
            def("nokey", &["id", "v"], &[]),
        ];
        let lookup = |n: &str| tables.iter().find(|t| t.name == n).cloned();
        let mut stmt = crate::rewrite::parse_statement(sql).expect("parses");
        add_dependent_columns(&mut stmt, &lookup);
        stmt.to_string()
    }

    #[test]
    fn key_dependent_columns_join_the_group_by() {
        assert_eq!(
            rewritten("SELECT c.name, sum(o.total) FROM c LEFT JOIN o ON c.id = o.c_id GROUP BY c.id ORDER BY c.city"),
            "SELECT c.name, sum(o.total) FROM c LEFT JOIN o ON c.id = o.c_id GROUP BY c.id, c.\"name\", c.\"city\" ORDER BY c.city"
        );
        assert_eq!(
            rewritten("SELECT x.name, count(*) FROM c AS x GROUP BY x.id HAVING x.city > 1"),
            "SELECT x.name, count(*) FROM c AS x GROUP BY x.id, x.\"name\", x.\"city\" HAVING x.city > 1"
        );
        // a bare name that only one table has
        assert_eq!(
            rewritten("SELECT name, count(o.id) FROM c JOIN o ON c.id = o.c_id GROUP BY c.id"),
            "SELECT name, count(o.id) FROM c JOIN o ON c.id = o.c_id GROUP BY c.id, c.\"name\""
        );
    }

    #[test]
    fn other_groupings_are_left_alone() {
        for sql in [
            // not the key
            "SELECT c.name, count(*) FROM c GROUP BY c.city",
            // a table without a key
            "SELECT v, count(*) FROM nokey GROUP BY id",
            // a column of another table than the grouped key's
            "SELECT o.total, count(*) FROM c JOIN o ON c.id = o.c_id GROUP BY c.id, o.c_id",
            // inside a subquery
            "SELECT c.id, (SELECT max(x.total) FROM o AS x WHERE x.c_id = 1) FROM c GROUP BY c.id",
            // a CTE named like a table is not the table
            "WITH c AS (SELECT 1 AS id, 2 AS name) SELECT c.name FROM c GROUP BY c.id",
            "SELECT c.name FROM c GROUP BY ROLLUP (c.id)",
        ] {
            let once = rewritten(sql);
            let plain = crate::rewrite::parse_statement(sql)
                .expect("parses")
                .to_string();
            assert_eq!(once, plain, "{sql}");
        }
    }
}
