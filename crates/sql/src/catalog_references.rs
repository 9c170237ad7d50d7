//! References to the catalogs that Eddy's catalog tables cannot answer
//! as columns: the system column `tableoid`, and a character of a `name`.
//!
//! PostgreSQL gives every relation hidden system columns; the one tools
//! read is `tableoid` (pg_dump identifies every object it dumps by its
//! catalog's `tableoid` and its `oid`). Eddy's relations have no hidden
//! columns, and a row of a relation always comes from that relation (Eddy
//! has no inheritance or partitions), so `tableoid` is a constant per
//! relation: a reference to it is replaced by that OID, cast to `oid`, and
//! a select item that is one keeps the name `tableoid` (clients find
//! result columns by name).
//!
//! PostgreSQL's `name` is a fixed array of characters, subscripted from 0
//! (pg_dump's `typname[0] = '_'`); Eddy's catalogs hold names as text, so
//! `c[i]` on a catalog column of type `name` becomes `substr(c, i + 1, 1)`.
//! An `int2vector` or `oidvector` column, a list in Eddy's catalogs, cast
//! to text is its numbers separated by spaces (`array_to_string(v, ' ')`),
//! as PostgreSQL prints it.
//!
//! Scoping follows SQL's: `x.c` names the relation whose alias (or,
//! without one, whose name) is `x` in the innermost query that has it,
//! and a bare `tableoid` names the only relation of its query's FROM (with
//! several, it is left alone and fails to resolve, where PostgreSQL says
//! it is ambiguous). Queries are rewritten innermost first, so a reference
//! that remains when an outer query is rewritten is a correlated one, and
//! resolves there. A reference to a relation whose OID is unknown (a CTE,
//! a derived table) is left alone.
//!
//! Also here, as it concerns a catalog function's type: `CASE ... THEN
//! acldefault(...) ELSE '{}' END` (pg_dump), whose untyped literal
//! PostgreSQL types as the other branch's `aclitem[]`, has the literal
//! cast to `text[]`, the type Eddy's ACLs have.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    AccessExpr, ArrayElemTypeDef, BinaryOperator, DataType, Expr, Ident, ObjectName, Query, Select,
    SelectItem, SetExpr, Subscript, TableFactor, Value, VisitMut, VisitorMut,
};

use crate::call_rewrites::call;

use crate::rewrite::ident_name;

const TABLEOID: &str = "tableoid";

/// Replaces the references of the module doc in `stmt`. `relation_oid` gives the OID
/// of a relation as the statement names it (after `pg_catalog`
/// qualification), or `None`.
pub fn rewrite(
    stmt: &mut datafusion::sql::sqlparser::ast::Statement,
    relation_oid: &dyn Fn(&ObjectName) -> Option<i64>,
) {
    let _ = stmt.visit(&mut TableOids { relation_oid });
    acl_case_literals(stmt);
}

struct TableOids<'a> {
    relation_oid: &'a dyn Fn(&ObjectName) -> Option<i64>,
}

impl VisitorMut for TableOids<'_> {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let single = match query.body.as_mut() {
            SetExpr::Select(select) => Some(self.scope(select)),
            _ => None,
        };
        self.rewrite_body(query.body.as_mut());
        // ORDER BY of a single SELECT sees its FROM
        if let (Some(scope), Some(order_by)) = (single, query.order_by.as_mut()) {
            replace_references(order_by, &scope);
        }
        ControlFlow::Continue(())
    }
}

/// A query's relations: the name a reference uses for each (its alias,
/// or its name's last part) and its OID.
type Scope = Vec<(String, i64)>;

impl TableOids<'_> {
    fn rewrite_body(&self, body: &mut SetExpr) {
        match body {
            SetExpr::Select(select) => {
                let scope = self.scope(select);
                if !scope.is_empty() {
                    for item in select.projection.iter_mut() {
                        if let SelectItem::UnnamedExpr(e) = item {
                            if table_oid(e, &scope).is_some() {
                                *item = SelectItem::ExprWithAlias {
                                    expr: e.clone(),
                                    alias: Ident::new(TABLEOID),
                                };
                            }
                        }
                    }
                    replace_references(select.as_mut(), &scope);
                }
            }
            SetExpr::SetOperation { left, right, .. } => {
                self.rewrite_body(left);
                self.rewrite_body(right);
            }
            _ => {}
        }
    }

    fn scope(&self, select: &Select) -> Scope {
        let mut scope = Scope::new();
        for from in &select.from {
            self.add_relation(&from.relation, &mut scope);
            for join in &from.joins {
                self.add_relation(&join.relation, &mut scope);
            }
        }
        scope
    }

    fn add_relation(&self, factor: &TableFactor, scope: &mut Scope) {
        match factor {
            TableFactor::Table { name, alias, .. } => {
                let Some(oid) = (self.relation_oid)(name) else {
                    return;
                };
                let reference = match alias {
                    Some(alias) => ident_name(&alias.name),
                    None => match name.0.last().and_then(|p| p.as_ident()) {
                        Some(id) => ident_name(id),
                        None => return,
                    },
                };
                scope.push((reference, oid));
            }
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => {
                self.add_relation(&table_with_joins.relation, scope);
                for join in &table_with_joins.joins {
                    self.add_relation(&join.relation, scope);
                }
            }
            _ => {}
        }
    }
}

/// The OID `e` is, where it is a `tableoid` reference `scope` resolves.
fn table_oid(e: &Expr, scope: &Scope) -> Option<i64> {
    match e {
        Expr::Identifier(id) if ident_name(id) == TABLEOID => match scope.as_slice() {
            [(_, oid)] => Some(*oid),
            _ => None,
        },
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [qualifier, column] if ident_name(column) == TABLEOID => {
                let q = ident_name(qualifier);
                scope.iter().find(|(r, _)| *r == q).map(|(_, oid)| *oid)
            }
            _ => None,
        },
        _ => None,
    }
}

/// Whether `e` is a column of type `name` of a catalog relation in
/// `scope`.
fn is_name_column(e: &Expr, scope: &Scope) -> bool {
    is_column_of_type(e, scope, &["name"])
}

/// Whether `e` is a column of a catalog relation in `scope` whose
/// PostgreSQL type is one of `types`.
fn is_column_of_type(e: &Expr, scope: &Scope, types: &[&str]) -> bool {
    let has_name_column = |oid: i64, column: &str| {
        crate::catalog_shape::column_type(oid, column).is_some_and(|t| types.contains(&t))
    };
    match e {
        Expr::Identifier(id) => {
            let column = ident_name(id);
            scope.iter().any(|(_, oid)| has_name_column(*oid, &column))
        }
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [qualifier, column] => {
                let (q, column) = (ident_name(qualifier), ident_name(column));
                scope
                    .iter()
                    .any(|(r, oid)| *r == q && has_name_column(*oid, &column))
            }
            _ => false,
        },
        _ => false,
    }
}

/// Replaces the references in `node` that `scope` resolves (module doc).
fn replace_references<N: VisitMut>(node: &mut N, scope: &Scope) {
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(node, |e| {
        if let Some(oid) = table_oid(e, scope) {
            *e = Expr::Cast {
                kind: datafusion::sql::sqlparser::ast::CastKind::DoubleColon,
                expr: Box::new(number(oid)),
                data_type: DataType::IntUnsigned(None),
                array: false,
                format: None,
            };
            return ControlFlow::<()>::Continue(());
        }
        // `v::text` of an int2vector or oidvector: its numbers spaced, as
        // PostgreSQL prints them (Eddy's catalogs hold them as lists)
        if let Expr::Cast {
            expr: inner,
            data_type: DataType::Text,
            ..
        } = e
        {
            if is_column_of_type(inner, scope, &["int2vector", "oidvector"]) {
                *e = call(
                    "array_to_string",
                    vec![
                        inner.as_ref().clone(),
                        Expr::Value(Value::SingleQuotedString(" ".into()).into()),
                    ],
                );
                return ControlFlow::<()>::Continue(());
            }
        }
        if let Expr::CompoundFieldAccess { root, access_chain } = e {
            // `c[i]`, or `q.c[i]` (a dot access then a subscript)
            let subscripted = match (root.as_ref(), access_chain.as_slice()) {
                (_, [AccessExpr::Subscript(Subscript::Index { index })]) => {
                    Some((root.as_ref().clone(), index.clone()))
                }
                (
                    Expr::Identifier(q),
                    [AccessExpr::Dot(Expr::Identifier(c)), AccessExpr::Subscript(Subscript::Index { index })],
                ) => Some((
                    Expr::CompoundIdentifier(vec![q.clone(), c.clone()]),
                    index.clone(),
                )),
                _ => None,
            };
            if let Some((column, index)) = subscripted {
                if is_name_column(&column, scope) {
                    let position = Expr::BinaryOp {
                        left: Box::new(Expr::Nested(Box::new(index))),
                        op: BinaryOperator::Plus,
                        right: Box::new(number(1)),
                    };
                    *e = call("substr", vec![column, position, number(1)]);
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

fn number(n: i64) -> Expr {
    Expr::Value(Value::Number(n.to_string(), false).into())
}

/// `CASE ... THEN acldefault(...) ELSE '{}' END`: the string literals
/// among the results of a CASE that has an `acldefault` result are cast
/// to `text[]` (module doc).
fn acl_case_literals(stmt: &mut datafusion::sql::sqlparser::ast::Statement) {
    let is_acldefault = |e: &Expr| {
        matches!(e, Expr::Function(f)
            if f.name.0.last().and_then(|p| p.as_ident()).map(ident_name).as_deref()
                == Some("acldefault"))
    };
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(stmt, |e| {
        if let Expr::Case {
            conditions,
            else_result,
            ..
        } = e
        {
            let has_acl = conditions.iter().any(|c| is_acldefault(&c.result))
                || else_result.as_deref().is_some_and(is_acldefault);
            if has_acl {
                let results = conditions
                    .iter_mut()
                    .map(|c| &mut c.result)
                    .chain(else_result.iter_mut().map(|b| b.as_mut()));
                for result in results {
                    if matches!(result, Expr::Value(v) if matches!(v.value, Value::SingleQuotedString(_)))
                    {
                        let literal = std::mem::replace(result, number(0));
                        *result = Expr::Cast {
                            kind: datafusion::sql::sqlparser::ast::CastKind::DoubleColon,
                            expr: Box::new(literal),
                            data_type: DataType::Array(ArrayElemTypeDef::SquareBracket(
                                Box::new(DataType::Text),
                                None,
                            )),
                            array: false,
                            format: None,
                        };
                    }
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::parse_statement;

    fn rewritten(sql: &str) -> String {
        let mut stmt = parse_statement(sql).unwrap();
        rewrite(&mut stmt, &|name| match name.to_string().as_str() {
            "pg_catalog.pg_class" | "pg_class" => Some(1259),
            "pg_catalog.pg_namespace" => Some(2615),
            "t" => Some(16386),
            _ => None,
        });
        stmt.to_string()
    }

    #[test]
    fn qualified_and_bare_references_become_the_relations_oid() {
        assert_eq!(
            rewritten("SELECT c.tableoid, c.oid FROM pg_catalog.pg_class c"),
            "SELECT 1259::INT UNSIGNED AS tableoid, c.oid FROM pg_catalog.pg_class c"
        );
        assert_eq!(
            rewritten("SELECT tableoid, oid FROM pg_class"),
            "SELECT 1259::INT UNSIGNED AS tableoid, oid FROM pg_class"
        );
        assert_eq!(
            rewritten("SELECT pg_class.tableoid FROM pg_class"),
            "SELECT 1259::INT UNSIGNED AS tableoid FROM pg_class"
        );
    }

    #[test]
    fn each_query_resolves_against_its_own_from() {
        let sql = rewritten(
            "SELECT n.tableoid, (SELECT c.tableoid FROM pg_catalog.pg_class c \
             WHERE c.relnamespace = n.oid AND n.tableoid > 0 LIMIT 1) \
             FROM pg_catalog.pg_namespace n JOIN t ON t.tableoid = 0",
        );
        assert_eq!(
            sql,
            "SELECT 2615::INT UNSIGNED AS tableoid, (SELECT 1259::INT UNSIGNED AS tableoid FROM pg_catalog.pg_class c \
             WHERE c.relnamespace = n.oid AND 2615::INT UNSIGNED > 0 LIMIT 1) \
             FROM pg_catalog.pg_namespace n JOIN t ON 16386::INT UNSIGNED = 0"
        );
    }

    #[test]
    fn a_name_is_subscripted_from_zero() {
        assert_eq!(
            rewritten(
                "SELECT relname[0] = '_', c.relname[1], relkind[0] FROM pg_catalog.pg_class c"
            ),
            "SELECT substr(relname, (0) + 1, 1) = '_', substr(c.relname, (1) + 1, 1), relkind[0] \
             FROM pg_catalog.pg_class c"
        );
    }

    #[test]
    fn an_acldefault_case_has_its_literals_typed() {
        assert_eq!(
            rewritten("SELECT CASE WHEN x THEN acldefault('r', 10) ELSE '{}' END FROM t"),
            "SELECT CASE WHEN x THEN acldefault('r', 10) ELSE '{}'::TEXT[] END FROM t"
        );
    }

    #[test]
    fn what_does_not_resolve_is_left_alone() {
        // two relations: a bare reference is ambiguous
        assert_eq!(
            rewritten("SELECT tableoid FROM pg_class, t"),
            "SELECT tableoid FROM pg_class, t"
        );
        // a relation of unknown OID, and an unknown qualifier
        assert_eq!(
            rewritten("SELECT x.tableoid, c.tableoid FROM other x"),
            "SELECT x.tableoid, c.tableoid FROM other x"
        );
        // a union's branches each see their own FROM
        assert_eq!(
            rewritten("SELECT tableoid FROM pg_class UNION ALL SELECT tableoid FROM t"),
            "SELECT 1259::INT UNSIGNED AS tableoid FROM pg_class UNION ALL SELECT 16386::INT UNSIGNED AS tableoid FROM t"
        );
    }
}
