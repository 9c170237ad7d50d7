//! PostgreSQL's result column names (`count`, `?column?`, `int4`, `case`)
//! instead of DataFusion's (`count(*)`, `Int64(1) + Int64(1)`), and result
//! lists with repeated names (`SELECT $1, $1`, `SELECT a, a`), which
//! PostgreSQL allows and DataFusion's unique-name rule refuses.
//!
//! How: before planning, every select-list item of every SELECT in the
//! statement that has no alias and is not a plain column gets, as its
//! alias, the name PostgreSQL's `FigureColname` gives it. Where a name
//! repeats within one select list, the repeat's alias carries a hidden
//! suffix ([`HIDDEN`] and a number) that keeps DataFusion's names unique;
//! [`visible`] strips it wherever a name leaves Eddy (row descriptions,
//! COPY headers, the columns of CREATE TABLE AS).
//!
//! Invariant: the pass only adds aliases; it never changes what an item
//! computes, so ORDER BY / GROUP BY by expression or position still
//! resolve as before, and ORDER BY by the new name resolves as in
//! PostgreSQL.

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    ArrayElemTypeDef, DataType as SqlType, Expr, Ident, ObjectName, ObjectNamePart, Query,
    SelectItem, SetExpr, Statement, TimezoneInfo, TrimWhereField, VisitMut, VisitorMut,
};

use crate::rewrite::ident_name;

/// Separates a visible column name from the suffix that keeps a repeated
/// name unique inside DataFusion (a control character no SQL writer uses).
pub const HIDDEN: char = '\u{1f}';

/// The name a client sees for a result field named `name` by the planner.
pub fn visible(name: &str) -> &str {
    match name.find(HIDDEN) {
        Some(i) => name.get(..i).unwrap_or(name),
        None => name,
    }
}

/// Aliases the select lists of every query in `stmt` (see the module doc).
pub fn name_columns(stmt: &mut Statement) {
    let _ = VisitMut::visit(stmt, &mut Namer);
}

struct Namer;

impl VisitorMut for Namer {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        name_set_expr(&mut query.body);
        ControlFlow::Continue(())
    }
}

fn name_set_expr(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => name_select_list(&mut select.projection),
        // only the left arm names a set operation's columns; the right arm
        // still needs unique names inside DataFusion
        SetExpr::SetOperation { left, right, .. } => {
            name_set_expr(left);
            name_set_expr(right);
        }
        // a parenthesised query is visited as a query of its own
        _ => {}
    }
}

fn name_select_list(items: &mut [SelectItem]) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for item in items.iter_mut() {
        let (name, plain_column) = match item {
            SelectItem::UnnamedExpr(e) => match e {
                Expr::Identifier(id) => (ident_name(id), true),
                Expr::CompoundIdentifier(parts) => match parts.last() {
                    Some(id) => (ident_name(id), true),
                    None => continue,
                },
                other => (figure_name(other).0, false),
            },
            SelectItem::ExprWithAlias { alias, .. } => (ident_name(alias), true),
            _ => continue,
        };
        let count = seen.entry(name.clone()).or_insert(0);
        *count += 1;
        let alias = if *count > 1 {
            format!("{name}{HIDDEN}{count}")
        } else if plain_column {
            // DataFusion already names a column (or an alias) this way
            continue;
        } else {
            name
        };
        let alias = Ident::with_quote('"', alias);
        let taken = std::mem::replace(item, SelectItem::Wildcard(Default::default()));
        *item = match taken {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                SelectItem::ExprWithAlias { expr, alias }
            }
            other => other,
        };
    }
}

/// PostgreSQL's `FigureColnameInternal`: the name and its strength (2: a
/// column or function name, 1: a keyword-like name such as `case`, 0: none,
/// which prints as `?column?`).
fn figure_name(e: &Expr) -> (String, u8) {
    let named = |s: &str, strength: u8| (s.to_string(), strength);
    match e {
        Expr::Identifier(id) => (ident_name(id), 2),
        Expr::CompoundIdentifier(parts) => match parts.last() {
            Some(id) => (ident_name(id), 2),
            None => named("?column?", 0),
        },
        Expr::Nested(inner) | Expr::Collate { expr: inner, .. } => figure_name(inner),
        // `a[1]`, `a[2:3]`: the subscripted expression's name; `x.f` the
        // field's (PostgreSQL's A_Indirection)
        Expr::CompoundFieldAccess { root, access_chain } => {
            use datafusion::sql::sqlparser::ast::AccessExpr;
            match access_chain
                .iter()
                .rev()
                .find(|a| matches!(a, AccessExpr::Dot(_)))
            {
                Some(AccessExpr::Dot(Expr::Identifier(id))) => (ident_name(id), 2),
                Some(_) => named("?column?", 0),
                None => figure_name(root),
            }
        }
        Expr::Function(f) => match last_name(&f.name) {
            Some(n) => (n, 2),
            None => named("?column?", 0),
        },
        Expr::Cast {
            expr, data_type, ..
        } => {
            let inner = figure_name(expr);
            if inner.1 <= 1 {
                (type_name(data_type), 1)
            } else {
                inner
            }
        }
        Expr::TypedString(t) => (type_name(&t.data_type), 1),
        Expr::Interval(_) => named("interval", 1),
        Expr::Case { .. } => named("case", 1),
        // (`NOT EXISTS` is an operator over it, unnamed)
        Expr::Exists { negated: true, .. } => named("?column?", 0),
        Expr::Exists { .. } => named("exists", 2),
        Expr::Array(_) => named("array", 2),
        Expr::Tuple(_) => named("row", 2),
        Expr::Subquery(q) => match first_item_name(q) {
            Some(n) => (n, 2),
            None => named("?column?", 0),
        },
        Expr::Extract { .. } => named("extract", 2),
        // (PostgreSQL's `timezone(zone, ts)`)
        Expr::AtTimeZone { .. } => named("timezone", 2),
        Expr::Substring {
            shorthand: true, ..
        } => named("substr", 2),
        Expr::Substring { .. } => named("substring", 2),
        Expr::Position { .. } => named("position", 2),
        Expr::Overlay { .. } => named("overlay", 2),
        Expr::Ceil { .. } => named("ceil", 2),
        Expr::Floor { .. } => named("floor", 2),
        Expr::Trim {
            trim_where: Some(TrimWhereField::Leading),
            ..
        } => named("ltrim", 2),
        Expr::Trim {
            trim_where: Some(TrimWhereField::Trailing),
            ..
        } => named("rtrim", 2),
        Expr::Trim { .. } => named("btrim", 2),
        _ => named("?column?", 0),
    }
}

fn last_name(name: &ObjectName) -> Option<String> {
    match name.0.last()? {
        ObjectNamePart::Identifier(id) => Some(ident_name(id)),
        ObjectNamePart::Function(_) => None,
    }
}

/// The output name of a scalar subquery: that of its first column.
fn first_item_name(q: &Query) -> Option<String> {
    let mut body = q.body.as_ref();
    loop {
        match body {
            SetExpr::Select(s) => {
                return match s.projection.first()? {
                    SelectItem::ExprWithAlias { alias, .. } => Some(ident_name(alias)),
                    SelectItem::UnnamedExpr(e) => Some(figure_name(e).0),
                    _ => None,
                };
            }
            SetExpr::SetOperation { left, .. } => body = left,
            SetExpr::Query(inner) => body = &inner.body,
            _ => return None,
        }
    }
}

/// The name PostgreSQL's parser gives a type written in a cast
/// (`::integer` is `int4`, `::varchar(10)` is `varchar`).
fn type_name(t: &SqlType) -> String {
    let n = match t {
        SqlType::SmallInt(_) | SqlType::Int2(_) => "int2",
        SqlType::Int(_) | SqlType::Integer(_) | SqlType::Int4(_) => "int4",
        SqlType::BigInt(_) | SqlType::Int8(_) => "int8",
        SqlType::Real | SqlType::Float4 => "float4",
        SqlType::Double(_) | SqlType::DoublePrecision | SqlType::Float8 | SqlType::Float(_) => {
            "float8"
        }
        SqlType::Numeric(_) | SqlType::Decimal(_) | SqlType::Dec(_) => "numeric",
        SqlType::Text | SqlType::String(_) => "text",
        SqlType::Varchar(_) | SqlType::CharacterVarying(_) | SqlType::CharVarying(_) => "varchar",
        SqlType::Char(_) | SqlType::Character(_) => "bpchar",
        SqlType::Bool | SqlType::Boolean => "bool",
        SqlType::Date => "date",
        SqlType::Time(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => "timetz",
        SqlType::Time(..) => "time",
        SqlType::Timestamp(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => "timestamptz",
        SqlType::Timestamp(..) => "timestamp",
        SqlType::Interval { .. } => "interval",
        SqlType::Bytea => "bytea",
        SqlType::Uuid => "uuid",
        SqlType::JSON => "json",
        SqlType::JSONB => "jsonb",
        SqlType::Regclass => "regclass",
        SqlType::Array(
            ArrayElemTypeDef::SquareBracket(inner, _)
            | ArrayElemTypeDef::AngleBracket(inner)
            | ArrayElemTypeDef::Parenthesis(inner),
        ) => return type_name(inner),
        SqlType::Custom(name, _) => return last_name(name).unwrap_or_else(|| "?column?".into()),
        _ => return t.to_string().to_lowercase(),
    };
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::parse_statement;

    fn named(sql: &str) -> String {
        let mut stmt = parse_statement(sql).unwrap();
        name_columns(&mut stmt);
        stmt.to_string().replace(HIDDEN, "~")
    }

    #[test]
    fn figures_postgres_names() {
        assert_eq!(
            named("SELECT count(*), sum(x), 1 + 1, 'a', a, t.b FROM t"),
            "SELECT count(*) AS \"count\", sum(x) AS \"sum\", 1 + 1 AS \"?column?\", 'a' AS \"?column?~2\", a, t.b FROM t"
        );
        assert_eq!(
            named("SELECT '1'::int, x::text, CASE WHEN true THEN 1 END, CAST(count(*) AS BIGINT)"),
            "SELECT '1'::INT AS \"int4\", x::TEXT AS \"x\", CASE WHEN true THEN 1 END AS \"case\", CAST(count(*) AS BIGINT) AS \"count\""
        );
        assert_eq!(
            named("SELECT (SELECT max(v) FROM u), EXISTS (SELECT 1), DATE '2020-01-01'"),
            "SELECT (SELECT max(v) AS \"max\" FROM u) AS \"max\", EXISTS (SELECT 1 AS \"?column?\") AS \"exists\", DATE '2020-01-01' AS \"date\""
        );
        assert_eq!(
            named("SELECT ids[1], t.ids[2:3] FROM t"),
            "SELECT ids[1] AS \"ids\", t.ids[2:3] AS \"ids~2\" FROM t"
        );
    }

    #[test]
    fn repeated_names_stay_unique_inside() {
        assert_eq!(
            named("SELECT a, a, b AS a FROM t"),
            "SELECT a, a AS \"a~2\", b AS \"a~3\" FROM t"
        );
        assert_eq!(visible("a\u{1f}2"), "a");
        assert_eq!(visible("count"), "count");
    }
}
