//! PostgreSQL's set-returning json functions, `regexp_matches` and
//! `pg_partition_ancestors` on the AST: each call becomes `unnest` of a list function of
//! [`crate::json_srf`], which DataFusion expands into rows.
//!
//! * **In a select list** (the item, a cast of it, or an operand of an
//!   operator such as `->>`): `jsonb_array_elements(j)` becomes
//!   `eddy_jsonb_in(unnest(eddy_srf_jsonb_array_elements(j)))`, named
//!   `jsonb_array_elements` when it is the whole item; several such calls
//!   in one list are zipped, as PostgreSQL 10+ does. `json[b]_each[_text]`
//!   gives one record text `(key,value)` per member, as PostgreSQL prints
//!   the record.
//! * **In FROM** (`f(args) [AS e[(cols)]]`, `LATERAL f(args)`, `WITH
//!   ORDINALITY`): the call becomes a derived table `(SELECT
//!   unnest(list1) AS key, unnest(list2) AS value) AS e`, lateral when an
//!   argument names a column and the call is not first in its FROM list
//!   (there a column is an outer query's: a correlated subquery); `crate::lateral_unnest` then plans a lateral
//!   one as an unnest over the left side, since DataFusion cannot run a
//!   correlated unnest. Columns are named as PostgreSQL names them: `value`
//!   / `key, value` (the functions' OUT parameters) whatever the table
//!   alias, a scalar function's one column by the table alias or else the
//!   function's name.
//! * json / jsonb columns keep their type: an unnested element passes
//!   through `eddy_json_in` / `eddy_jsonb_in` (an unnest drops the
//!   declared type of list elements).
//!
//! A call anywhere else reaches the refusing function of the same name
//! (0A000), as PostgreSQL refuses a set-returning function in WHERE.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions, CastKind, DataType as SqlType, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, Ident, ObjectName, ObjectNamePart, Query, Select, SelectFlavor,
    SelectItem, SetExpr, TableAlias, TableFactor, Value as SqlValue, VisitMut, VisitorMut,
};

use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;

use crate::call_rewrites::call;
use crate::json_functions::{JSONB_IN, JSON_IN};
use crate::json_srf::{list_function, Part, JSON_SRFS, REGEXP_MATCHES};
use crate::rewrite::ident_name;

/// `pg_partition_ancestors(regclass)`: a partition and its ancestors.
pub(crate) const PARTITION_ANCESTORS: &str = "pg_partition_ancestors";

/// The list function `pg_partition_ancestors` unnests
/// (`crate::catalog`: always empty, Eddy has no partitions).
pub(crate) const PARTITION_ANCESTORS_LIST: &str = "eddy_partition_ancestors";

/// Applies the rewrites of the module doc to `stmt`.
pub fn rewrite<S: VisitMut>(stmt: &mut S) {
    let _ = stmt.visit(&mut SrfRewrite);
}

struct SrfRewrite;

/// One output column of a set-returning function in FROM: its name (None:
/// named by the table alias, else the function) and its list.
struct Column {
    name: Option<&'static str>,
    list: Expr,
}

/// The set-returning function `name` names, with its arguments: the lists
/// of its columns (in FROM) and its one list (in a select list).
struct Srf {
    name: String,
    columns: Vec<Column>,
    select_list: Expr,
}

fn srf_of(f: &Function) -> Option<Srf> {
    let name = function_name(&f.name)?;
    if f.over.is_some() || f.filter.is_some() || !f.within_group.is_empty() {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
        return None;
    }
    let args = plain_args(&list.args)?;
    srf_call(&name, args)
}

fn plain_args(args: &[FunctionArg]) -> Option<Vec<Expr>> {
    args.iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

fn function_name(name: &ObjectName) -> Option<String> {
    match name.0.as_slice() {
        [ObjectNamePart::Identifier(f)] => Some(ident_name(f)),
        [ObjectNamePart::Identifier(s), ObjectNamePart::Identifier(f)]
            if ident_name(s) == "pg_catalog" =>
        {
            Some(ident_name(f))
        }
        _ => None,
    }
}

fn unnest(e: Expr) -> Expr {
    call("unnest", vec![e])
}

fn srf_call(name: &str, args: Vec<Expr>) -> Option<Srf> {
    if name == PARTITION_ANCESTORS {
        // (psql's `\d` asks for the foreign keys that reference a table
        // through it)
        let [relation] = <[Expr; 1]>::try_from(args).ok()?;
        let list = call(PARTITION_ANCESTORS_LIST, vec![relation]);
        return Some(Srf {
            name: name.to_string(),
            columns: vec![Column {
                name: Some("relid"),
                list: list.clone(),
            }],
            select_list: unnest(list),
        });
    }
    if name == "regexp_matches" {
        if !(2..=3).contains(&args.len()) {
            return None;
        }
        let list = call(REGEXP_MATCHES, args);
        return Some(Srf {
            name: name.to_string(),
            columns: vec![Column {
                name: None,
                list: list.clone(),
            }],
            select_list: unnest(list),
        });
    }
    let (_, jsonb, parts) = JSON_SRFS.iter().find(|(n, _, _)| *n == name)?;
    if args.len() != 1 {
        return None;
    }
    let list = |part: Part| call(&list_function(name, part), args.clone());
    let typed = |e: Expr| call(if *jsonb { JSONB_IN } else { JSON_IN }, vec![e]);
    let (columns, select_list) = match parts {
        [Part::Elements] => (
            vec![Column {
                name: Some("value"),
                list: list(Part::Elements),
            }],
            typed(unnest(list(Part::Elements))),
        ),
        [Part::ElementsText] => (
            vec![Column {
                name: Some("value"),
                list: list(Part::ElementsText),
            }],
            unnest(list(Part::ElementsText)),
        ),
        [Part::Keys] => (
            vec![Column {
                name: None,
                list: list(Part::Keys),
            }],
            unnest(list(Part::Keys)),
        ),
        [Part::Keys, values] => {
            let record = if *values == Part::Values {
                Part::Records
            } else {
                Part::TextRecords
            };
            (
                vec![
                    Column {
                        name: Some("key"),
                        list: list(Part::Keys),
                    },
                    Column {
                        name: Some("value"),
                        list: list(*values),
                    },
                ],
                unnest(list(record)),
            )
        }
        _ => return None,
    };
    Some(Srf {
        name: name.to_string(),
        columns,
        select_list,
    })
}

impl VisitorMut for SrfRewrite {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        rewrite_factor(factor, LeftSide::Unknown);
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        // the first item of a FROM list has no left side, and a column
        // that names none of the items before a call is an outer query's:
        // planned as a correlated subquery is (a lateral wrapper there
        // would hide the reference from the subquery's binding,
        // `crate::subquery`)
        if let SetExpr::Select(select) = query.body.as_mut() {
            let mut left: Vec<String> = Vec::new();
            for (i, item) in select.from.iter_mut().enumerate() {
                let side = if i == 0 {
                    LeftSide::None
                } else {
                    LeftSide::Named(&left)
                };
                rewrite_factor(&mut item.relation, side);
                left.extend(relation_name(&item.relation));
                for join in &item.joins {
                    left.extend(relation_name(&join.relation));
                }
            }
        }
        expand_items(&mut query.body);
        ControlFlow::Continue(())
    }
}

/// What a call in FROM may refer to on its left.
#[derive(Clone, Copy)]
enum LeftSide<'a> {
    /// Nothing: the call is first in its FROM list.
    None,
    /// The relations of the FROM list before it, by name or alias: a
    /// column qualified by another name is an outer query's.
    Named(&'a [String]),
    /// Unknown: any column may be the left side's.
    Unknown,
}

/// Rewrites `factor` when it calls a set-returning function of this
/// module, lateral where an argument may name a column of `left`.
fn rewrite_factor(factor: &mut TableFactor, left: LeftSide<'_>) {
    let (name, args, alias, ordinality, lateral) = match factor {
        TableFactor::Table {
            name,
            args: Some(args),
            alias,
            with_ordinality,
            ..
        } => (name, &args.args, alias, *with_ordinality, false),
        TableFactor::Function {
            lateral,
            name,
            args,
            with_ordinality,
            alias,
        } => (name, &*args, alias, *with_ordinality, *lateral),
        _ => return,
    };
    let Some(fname) = function_name(name) else {
        return;
    };
    let Some(args) = plain_args(args) else {
        return;
    };
    let lateral = match left {
        LeftSide::None => false,
        LeftSide::Unknown => lateral || args.iter().any(names_a_column),
        LeftSide::Named(names) => lateral || args.iter().any(|a| names_a_left_column(a, names)),
    };
    let Some(srf) = srf_call(&fname, args) else {
        return;
    };
    let alias = alias.take();
    *factor = from_form(srf, alias, ordinality, lateral);
}

fn names_a_column(e: &Expr) -> bool {
    visit_expressions(e, |e| {
        if matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// Whether `e` names a column that may be one of the relations `left`:
/// an unqualified column, or one qualified by one of their names.
fn names_a_left_column(e: &Expr, left: &[String]) -> bool {
    visit_expressions(e, |e| match e {
        Expr::Identifier(_) => ControlFlow::Break(()),
        Expr::CompoundIdentifier(parts) => {
            let qualifier = parts.len().checked_sub(2).and_then(|i| parts.get(i));
            match qualifier {
                Some(q) if !left.contains(&ident_name(q)) => ControlFlow::Continue(()),
                _ => ControlFlow::Break(()),
            }
        }
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// The name a FROM item's columns are qualified by: its alias, else the
/// last part of its table name.
fn relation_name(factor: &TableFactor) -> Option<String> {
    match factor {
        TableFactor::Table { alias: Some(a), .. }
        | TableFactor::Derived { alias: Some(a), .. }
        | TableFactor::Function { alias: Some(a), .. }
        | TableFactor::UNNEST { alias: Some(a), .. } => Some(ident_name(&a.name)),
        TableFactor::Table { name, .. } => match name.0.last() {
            Some(ObjectNamePart::Identifier(i)) => Some(ident_name(i)),
            _ => None,
        },
        _ => None,
    }
}

fn item(expr: Expr, name: &str) -> SelectItem {
    SelectItem::ExprWithAlias {
        expr,
        alias: Ident::with_quote('"', name),
    }
}

/// The derived table that gives the rows of `srf` in FROM.
fn from_form(srf: Srf, alias: Option<TableAlias>, ordinality: bool, lateral: bool) -> TableFactor {
    let table = alias
        .as_ref()
        .map(|a| a.name.clone())
        .unwrap_or_else(|| Ident::new(&srf.name));
    let mut items = Vec::new();
    for c in &srf.columns {
        let mut e = unnest(c.list.clone());
        // the json / jsonb values (not the _text forms' nor regexp's)
        if c.name == Some("value") && !srf.name.ends_with("_text") {
            let jsonb = srf.name.starts_with("jsonb");
            e = call(if jsonb { JSONB_IN } else { JSON_IN }, vec![e]);
        }
        let name = c.name.map_or_else(|| ident_name(&table), str::to_string);
        items.push(item(e, &name));
    }
    if ordinality {
        // 1..n beside the n rows of the first list, zipped by unnest
        let n = Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(call("cardinality", vec![srf.columns[0].list.clone()])),
            data_type: SqlType::BigInt(None),
            array: false,
            format: None,
        };
        let stop = Expr::BinaryOp {
            left: Box::new(n),
            op: datafusion::sql::sqlparser::ast::BinaryOperator::Plus,
            right: Box::new(Expr::value(SqlValue::Number("1".into(), false))),
        };
        let range = call(
            "range",
            vec![Expr::value(SqlValue::Number("1".into(), false)), stop],
        );
        items.push(item(unnest(range), "ordinality"));
    }
    let alias = match alias {
        Some(a) => a,
        None => TableAlias {
            explicit: true,
            name: table,
            columns: vec![],
            at: None,
        },
    };
    TableFactor::Derived {
        lateral,
        subquery: Box::new(select_query(items)),
        alias: Some(alias),
        sample: None,
    }
}

fn select_query(projection: Vec<SelectItem>) -> Query {
    let select = Select {
        select_token: AttachedToken::empty(),
        optimizer_hints: vec![],
        distinct: None,
        select_modifiers: None,
        top: None,
        top_before_distinct: false,
        projection,
        exclude: None,
        into: None,
        from: vec![],
        lateral_views: vec![],
        prewhere: None,
        selection: None,
        connect_by: vec![],
        group_by: GroupByExpr::Expressions(vec![], vec![]),
        cluster_by: vec![],
        distribute_by: vec![],
        sort_by: vec![],
        having: None,
        named_window: vec![],
        qualify: None,
        window_before_qualify: false,
        value_table_mode: None,
        flavor: SelectFlavor::Standard,
    };
    Query {
        with: None,
        body: Box::new(SetExpr::Select(Box::new(select))),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: vec![],
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: vec![],
    }
}

fn expand_items(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            for it in &mut select.projection {
                let (expr, named) = match it {
                    SelectItem::UnnamedExpr(e) => (e, false),
                    SelectItem::ExprWithAlias { expr, .. } => (expr, true),
                    _ => continue,
                };
                // PostgreSQL names the column after the function when the
                // item is the call or a cast of it
                let own_name = match &*expr {
                    Expr::Function(f) => srf_of(f).map(|s| s.name),
                    Expr::Cast { expr, .. } => match expr.as_ref() {
                        Expr::Function(f) => srf_of(f).map(|s| s.name),
                        _ => None,
                    },
                    _ => None,
                };
                if !expand(expr) || named {
                    continue;
                }
                if let Some(name) = own_name {
                    let e = std::mem::replace(expr, Expr::value(SqlValue::Null));
                    *it = item(e, &name);
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            expand_items(left);
            expand_items(right);
        }
        // a nested query is visited as a Query of its own
        _ => {}
    }
}

/// Rewrites the calls in `e` where PostgreSQL makes rows of them; whether
/// there was one.
fn expand(e: &mut Expr) -> bool {
    match e {
        Expr::Function(f) => match srf_of(f) {
            Some(srf) => {
                *e = srf.select_list;
                true
            }
            None => false,
        },
        Expr::Cast { expr, .. } | Expr::Nested(expr) | Expr::UnaryOp { expr, .. } => expand(expr),
        // `(regexp_matches(...))[1]`
        Expr::CompoundFieldAccess { root, .. } => expand(root),
        Expr::BinaryOp { left, right, .. } => {
            let l = expand(left);
            let r = expand(right);
            l || r
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses");
        super::rewrite(&mut stmts);
        stmts[0].to_string()
    }

    #[test]
    fn select_list_calls_become_unnest() {
        assert_eq!(
            rewritten("SELECT jsonb_array_elements(j), id FROM t"),
            "SELECT eddy_jsonb_in(unnest(eddy_srf_jsonb_array_elements(j))) AS \"jsonb_array_elements\", id FROM t"
        );
        assert_eq!(
            rewritten("SELECT json_each_text(j) AS e FROM t"),
            "SELECT unnest(eddy_srf_json_each_text_records(j)) AS e FROM t"
        );
        assert_eq!(
            rewritten("SELECT regexp_matches(s, 'a', 'g')->>1 FROM t WHERE jsonb_object_keys(j) = 'a'"),
            "SELECT unnest(eddy_srf_regexp_matches(s, 'a', 'g')) ->> 1 FROM t WHERE jsonb_object_keys(j) = 'a'"
        );
    }

    #[test]
    fn from_calls_become_derived_tables() {
        assert_eq!(
            rewritten("SELECT * FROM t, jsonb_each_text(t.j) AS e(k, v)"),
            "SELECT * FROM t, LATERAL (SELECT unnest(eddy_srf_jsonb_each_text_keys(t.j)) AS \"key\", \
             unnest(eddy_srf_jsonb_each_text_values(t.j)) AS \"value\") AS e (k, v)"
        );
        assert_eq!(
            rewritten("SELECT * FROM jsonb_object_keys('{}') k"),
            "SELECT * FROM (SELECT unnest(eddy_srf_jsonb_object_keys_keys('{}')) AS \"k\") k"
        );
        // first in its FROM: an outer reference, not a lateral one
        assert_eq!(
            rewritten("SELECT (SELECT count(*) FROM json_object_keys(t.j)) FROM t"),
            "SELECT (SELECT count(*) FROM (SELECT unnest(eddy_srf_json_object_keys_keys(t.j)) \
             AS \"json_object_keys\") AS json_object_keys) FROM t"
        );
        assert_eq!(
            rewritten("SELECT * FROM json_array_elements('[]')"),
            "SELECT * FROM (SELECT eddy_json_in(unnest(eddy_srf_json_array_elements('[]'))) AS \"value\") AS json_array_elements"
        );
    }
}
