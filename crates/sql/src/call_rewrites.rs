//! PostgreSQL calls that are another spelling of an operator or function
//! Eddy already has, rewritten on the AST before planning:
//! * `mod(a, b)` is `a % b` (PostgreSQL's `int4mod`, `int8mod`,
//!   `numeric_mod`: the same operator, so the same result types and the
//!   same 22012 on a zero divisor through checked arithmetic);
//! * `timezone(zone, ts)` and `ts AT TIME ZONE zone` are both
//!   `eddy_at_time_zone(ts, zone)` (PostgreSQL documents them as
//!   equivalent; DataFusion's own `AT TIME ZONE` keeps the instant,
//!   `crate::at_time_zone`);
//! * the keywords `localtimestamp` and `localtime` are `now()` as a
//!   timestamp and as a time (on the session zone's wall clock:
//!   `crate::zone_rules`);
//! * `div(a, b)` is `trunc(a::numeric / b::numeric)` (PostgreSQL has only
//!   `div(numeric, numeric)`: the quotient truncated toward zero, 22012 on
//!   a zero divisor);
//! * `array_remove(a, x)` is DataFusion's `array_remove_all` (DataFusion's
//!   `array_remove` removes the first match only; PostgreSQL's removes
//!   every element equal to `x`);
//! * `string_to_table(s, d [, null])` and `regexp_split_to_table(s, p
//!   [, flags])` are `unnest` of `string_to_array` and of
//!   `regexp_split_to_array` (PostgreSQL defines them so);
//! * `make_interval(...)` with named or omitted arguments is
//!   `eddy_make_interval` with all seven (`crate::make_interval`);
//! * `date_part('timezone', x)` (and `timezone_hour`, `timezone_minute`)
//!   is `EXTRACT(timezone FROM x)::float8` (DataFusion's `date_part` has
//!   no zone fields; `crate::extract` answers them in every session zone);
//! * the literal `U&'...'` is a plain string literal of what it spells.
//!
//! Only plain calls are rewritten: unqualified or `pg_catalog.`-qualified,
//! two positional arguments, no DISTINCT, ORDER BY, FILTER or OVER (an
//! aggregate-like call of these is left for the planner to refuse).

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, CastKind, DataType, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentList, FunctionArguments, Ident, ObjectName, ObjectNamePart, TimezoneInfo,
    Value,
};

/// The plain call `name(args...)`.
pub(crate) fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// The lower-case name of `f` when it is unqualified or in `pg_catalog`.
fn plain_name(f: &Function) -> Option<String> {
    let ident = |p: &ObjectNamePart| match p {
        ObjectNamePart::Identifier(i) => Some(if i.quote_style.is_some() {
            i.value.clone()
        } else {
            i.value.to_ascii_lowercase()
        }),
        _ => None,
    };
    match f.name.0.as_slice() {
        [name] => ident(name),
        [schema, name] if ident(schema).as_deref() == Some("pg_catalog") => ident(name),
        _ => None,
    }
}

/// The two positional arguments of a plain call.
fn two_args(f: &Function) -> Option<(Expr, Expr)> {
    if f.filter.is_some() || f.over.is_some() || !f.within_group.is_empty() {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
        return None;
    }
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(a)), FunctionArg::Unnamed(FunctionArgExpr::Expr(b))] => {
            Some((a.clone(), b.clone()))
        }
        _ => None,
    }
}

/// The `min..=max` positional arguments of a plain call.
fn positional_args(f: &Function, min: usize, max: usize) -> Option<Vec<Expr>> {
    if f.filter.is_some() || f.over.is_some() || !f.within_group.is_empty() {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    if list.duplicate_treatment.is_some()
        || !list.clauses.is_empty()
        || !(min..=max).contains(&list.args.len())
    {
        return None;
    }
    list.args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

fn as_numeric(e: Expr) -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(Expr::Nested(Box::new(e))),
        data_type: DataType::Numeric(datafusion::sql::sqlparser::ast::ExactNumberInfo::None),
        array: false,
        format: None,
    }
}

/// `date_part('timezone' | 'timezone_hour' | 'timezone_minute', x)` as
/// `EXTRACT(field FROM x)::float8`, which `crate::extract` answers in any
/// session zone (DataFusion's `date_part` refuses these fields); other
/// fields stay DataFusion's.
fn zone_date_part(field: &Expr, x: Expr) -> Option<Expr> {
    use datafusion::sql::sqlparser::ast::{DateTimeField, ExtractSyntax};
    let Expr::Value(v) = field else {
        return None;
    };
    let Value::SingleQuotedString(name) = &v.value else {
        return None;
    };
    let field = match name.to_ascii_lowercase().as_str() {
        "timezone" => DateTimeField::Timezone,
        "timezone_hour" => DateTimeField::TimezoneHour,
        "timezone_minute" => DateTimeField::TimezoneMinute,
        _ => return None,
    };
    Some(Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(Expr::Extract {
            field,
            syntax: ExtractSyntax::From,
            expr: Box::new(x),
        }),
        data_type: DataType::DoublePrecision,
        array: false,
        format: None,
    })
}

fn at_time_zone(ts: Expr, zone: Expr) -> Expr {
    call(crate::at_time_zone::AT_TIME_ZONE, vec![ts, zone])
}

/// Rewrites `e` when it is one of the calls above.
pub(crate) fn rewrite(e: &mut Expr) {
    if let Expr::Value(v) = e {
        // U&'...' is the string it spells (the parser decodes its escapes;
        // DataFusion plans only plain string literals)
        if let Value::UnicodeStringLiteral(s) = &mut v.value {
            v.value = Value::SingleQuotedString(std::mem::take(s));
        }
        return;
    }
    if let Expr::AtTimeZone {
        timestamp,
        time_zone,
    } = e
    {
        let ts = std::mem::replace(timestamp.as_mut(), Expr::Value(Value::Null.into()));
        let zone = std::mem::replace(time_zone.as_mut(), Expr::Value(Value::Null.into()));
        *e = at_time_zone(ts, zone);
        return;
    }
    // the keywords parse as a bare identifier or as a call without
    // parentheses, as `current_catalog` does
    let keyword = match &*e {
        Expr::Identifier(id) if id.quote_style.is_none() => Some(id.value.to_ascii_lowercase()),
        Expr::Function(f) if matches!(f.args, FunctionArguments::None) => plain_name(f),
        _ => None,
    };
    let local = match keyword.as_deref() {
        Some("localtimestamp") => Some(DataType::Timestamp(None, TimezoneInfo::None)),
        Some("localtime") => Some(DataType::Time(None, TimezoneInfo::None)),
        _ => None,
    };
    if let Some(data_type) = local {
        *e = Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(call("now", vec![])),
            data_type,
            array: false,
            format: None,
        };
        return;
    }
    let Expr::Function(f) = e else {
        return;
    };
    let Some(name) = plain_name(f) else {
        return;
    };
    let new = match name.as_str() {
        "mod" => two_args(f).map(|(a, b)| Expr::BinaryOp {
            left: Box::new(Expr::Nested(Box::new(a))),
            op: BinaryOperator::Modulo,
            right: Box::new(Expr::Nested(Box::new(b))),
        }),
        "timezone" => two_args(f).map(|(zone, ts)| at_time_zone(ts, zone)),
        "div" => two_args(f).map(|(a, b)| {
            call(
                "trunc",
                vec![Expr::BinaryOp {
                    left: Box::new(as_numeric(a)),
                    op: BinaryOperator::Divide,
                    right: Box::new(as_numeric(b)),
                }],
            )
        }),
        "array_remove" => two_args(f).map(|(a, b)| call("array_remove_all", vec![a, b])),
        "string_to_table" => {
            positional_args(f, 2, 3).map(|args| call("unnest", vec![call("string_to_array", args)]))
        }
        "regexp_split_to_table" => positional_args(f, 2, 3)
            .map(|args| call("unnest", vec![call("regexp_split_to_array", args)])),
        "make_interval" => crate::make_interval::complete_call(f),
        "date_part" => two_args(f).and_then(|(field, x)| zone_date_part(&field, x)),
        _ => None,
    };
    if let Some(new) = new {
        *e = new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut e = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_expr())
            .expect("parses");
        rewrite(&mut e);
        e.to_string()
    }

    #[test]
    fn calls_become_operators() {
        assert_eq!(rewritten("mod(a + 1, 3)"), "(a + 1) % (3)");
        assert_eq!(rewritten("pg_catalog.mod(a, b)"), "(a) % (b)");
        assert_eq!(
            rewritten("timezone('UTC', ts)"),
            "eddy_at_time_zone(ts, 'UTC')"
        );
        assert_eq!(
            rewritten("ts AT TIME ZONE 'UTC'"),
            "eddy_at_time_zone(ts, 'UTC')"
        );
        // not a plain call: left alone
        assert_eq!(rewritten("mod(a)"), "mod(a)");
        assert_eq!(rewritten("s.mod(a, b)"), "s.mod(a, b)");
        assert_eq!(rewritten("localtimestamp"), "CAST(now() AS TIMESTAMP)");
        assert_eq!(rewritten("\"localtime\""), "\"localtime\"");
    }
}
