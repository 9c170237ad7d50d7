//! SQL text and AST preprocessing: splitting a simple-query string into
//! statements, parsing with the PostgreSQL dialect, rewriting PostgreSQL
//! idioms DataFusion does not know (`OPERATOR(pg_catalog.~)`, `COLLATE`,
//! `::regclass`, `pg_catalog.`-qualified functions, unqualified `pg_*`
//! tables), and substituting bound parameters as literals.
//!
//! Every rewrite here is semantics-preserving for Eddy's catalog; none
//! touches a user table's data.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions, visit_expressions_mut, visit_relations_mut, AccessExpr, BinaryOperator,
    CastKind, CharacterLength, DataType as SqlType, ExactNumberInfo, Expr, Function, FunctionArg,
    FunctionArgExpr, FunctionArguments, Ident, ObjectName, ObjectNamePart, Statement, Subscript,
    TimezoneInfo, TypedString, Value as SqlValue, ValueWithSpan, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::Span;
use eddy_common::{ColumnType, Value};

use crate::call_rewrites::call;
use crate::error::{Result, SqlError};
use crate::pgtypes::{self, format_decimal, numeric_from_text, value_text, NumericText};

/// Split a query string into statements at top-level `;`, honouring quotes,
/// dollar quotes and comments. Empty statements are dropped.
pub fn split_statements(sql: &str) -> Vec<String> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' | b'"' => {
                let q = bytes[i];
                i += 1;
                while i < bytes.len() {
                    if bytes[i] == q {
                        if i + 1 < bytes.len() && bytes[i + 1] == q {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'$' => {
                // $tag$ ... $tag$ (but not $1 parameters)
                let rest = &sql[i..];
                let tag_end = rest[1..].find('$').map(|p| p + 1);
                match tag_end {
                    Some(e)
                        if rest[1..e].chars().all(|c| c.is_alphanumeric() || c == '_')
                            && !rest[1..e].starts_with(|c: char| c.is_ascii_digit()) =>
                    {
                        let tag = &rest[..=e];
                        match rest[e + 1..].find(tag) {
                            Some(close) => i += e + 1 + close + tag.len(),
                            None => i = bytes.len(),
                        }
                    }
                    _ => i += 1,
                }
            }
            b';' => {
                let s = sql[start..i].trim();
                if !s.is_empty() && !is_only_comments(s) {
                    out.push(s.to_string());
                }
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < sql.len() {
        let s = sql[start..].trim();
        if !s.is_empty() && !is_only_comments(s) {
            out.push(s.to_string());
        }
    }
    out
}

/// Whether `s` holds nothing but whitespace and comments (`-- ...`,
/// `/* ... */`): PostgreSQL's empty query, answered with
/// EmptyQueryResponse (pg_restore sends a dump's comment header alone).
pub fn is_only_comments(s: &str) -> bool {
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    Tokenizer::new(&PostgreSqlDialect {}, s)
        .tokenize()
        .is_ok_and(|tokens| {
            tokens
                .iter()
                .all(|t| matches!(t, Token::Whitespace(_) | Token::EOF))
        })
}

/// The words that may end the name of an array element type.
const ARRAY_ELEMENT_TYPE_WORDS: &[&str] = &[
    "smallint",
    "int2",
    "int",
    "integer",
    "int4",
    "bigint",
    "int8",
    "real",
    "float4",
    "precision",
    "float8",
    "float",
    "numeric",
    "decimal",
    "text",
    "varchar",
    "varying",
    "bool",
    "boolean",
    "date",
    "timestamp",
    "timestamptz",
    "zone",
    "uuid",
];

/// PostgreSQL's SQL-standard array type spelling `integer ARRAY` as the
/// `integer[]` sqlparser reads: an unquoted `ARRAY` keyword that is not
/// followed by `[` or `(` (which make it an array constructor) can only
/// end a type name, so its token becomes `[` `]`.
fn array_keyword_suffix(
    mut tokens: Vec<datafusion::sql::sqlparser::tokenizer::TokenWithSpan>,
) -> Vec<datafusion::sql::sqlparser::tokenizer::TokenWithSpan> {
    use datafusion::sql::sqlparser::keywords::Keyword;
    use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};
    let is_array = |t: &Token| matches!(t, Token::Word(w) if w.keyword == Keyword::ARRAY && w.quote_style.is_none());
    if !tokens.iter().any(|t| is_array(&t.token)) {
        return tokens;
    }
    let mut i = 0;
    while i < tokens.len() {
        if is_array(&tokens[i].token) {
            let next = tokens[i + 1..]
                .iter()
                .find(|t| !matches!(t.token, Token::Whitespace(_)))
                .map(|t| &t.token);
            let constructor = matches!(next, Some(Token::LBracket | Token::LParen));
            let after_type = i > 0
                && tokens[..i]
                    .iter()
                    .rev()
                    .find(|t| !matches!(t.token, Token::Whitespace(_)))
                    .is_some_and(|t| match &t.token {
                        Token::RParen => true,
                        Token::Word(w) => ARRAY_ELEMENT_TYPE_WORDS
                            .contains(&w.value.to_ascii_lowercase().as_str()),
                        _ => false,
                    });
            if !constructor && after_type {
                let span = tokens[i].span;
                tokens[i] = TokenWithSpan::new(Token::LBracket, span);
                tokens.insert(i + 1, TokenWithSpan::new(Token::RBracket, span));
                i += 1;
            }
        }
        i += 1;
    }
    tokens
}

/// `x OPERATOR(pg_catalog.=) ANY (array[...])` (pg_dump's and psql's
/// pattern queries): the parser takes `OPERATOR(...)` as a custom operator,
/// which it refuses before ANY/ALL/SOME, so there the construct becomes
/// the comparison it names (`=`, `<>`, `<`, `>`, `<=`, `>=`, `~`, `~*`,
/// `!~`, `!~*`), as PostgreSQL's `pg_catalog` operators are. Any other
/// operator, or one not followed by ANY/ALL/SOME, is left to the parser.
fn operator_any(
    tokens: Vec<datafusion::sql::sqlparser::tokenizer::TokenWithSpan>,
) -> Vec<datafusion::sql::sqlparser::tokenizer::TokenWithSpan> {
    use datafusion::sql::sqlparser::keywords::Keyword;
    use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};
    let is_word = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k && w.quote_style.is_none());
    if !tokens.iter().any(|t| is_word(&t.token, Keyword::OPERATOR)) {
        return tokens;
    }
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if !tokens
            .get(i)
            .is_some_and(|t| is_word(&t.token, Keyword::OPERATOR))
        {
            if let Some(t) = tokens.get(i) {
                out.push(t.clone());
            }
            i += 1;
            continue;
        }
        // the tokens from i on, whitespace aside: OPERATOR ( [schema .] op ) ANY
        let significant: Vec<(usize, &Token)> = tokens[i..]
            .iter()
            .enumerate()
            .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_)))
            .take(7)
            .map(|(k, t)| (i + k, &t.token))
            .collect();
        let comparison = |t: &Token| {
            matches!(
                t,
                Token::Eq
                    | Token::Neq
                    | Token::Lt
                    | Token::Gt
                    | Token::LtEq
                    | Token::GtEq
                    | Token::Tilde
                    | Token::TildeAsterisk
                    | Token::ExclamationMarkTilde
                    | Token::ExclamationMarkTildeAsterisk
            )
        };
        let quantified = |t: &Token| {
            is_word(t, Keyword::ANY) || is_word(t, Keyword::ALL) || is_word(t, Keyword::SOME)
        };
        let matched = match significant.as_slice() {
            [_, (_, Token::LParen), (_, Token::Word(schema)), (_, Token::Period), (_, op), (end, Token::RParen), (_, next), ..]
                if schema.value.eq_ignore_ascii_case("pg_catalog")
                    && comparison(op)
                    && quantified(next) =>
            {
                Some(((*op).clone(), *end))
            }
            [_, (_, Token::LParen), (_, op), (end, Token::RParen), (_, next), ..]
                if comparison(op) && quantified(next) =>
            {
                Some(((*op).clone(), *end))
            }
            _ => None,
        };
        match (matched, tokens.get(i)) {
            (Some((op, end)), Some(first)) => {
                out.push(TokenWithSpan::new(op, first.span));
                i = end + 1;
            }
            (_, Some(t)) => {
                out.push(t.clone());
                i += 1;
            }
            (_, None) => break,
        }
    }
    out
}

/// `FROM ONLY t` / `JOIN ONLY t` / `UPDATE ONLY t` (pg_dump's `DECLARE
/// ... FOR SELECT ... FROM ONLY public.t`): ONLY excludes a table's
/// inheritance children, and Eddy's tables have none, so `ONLY t` is `t`.
/// The word is dropped there (the parser does not take it); `ALTER TABLE
/// ONLY` and `TRUNCATE ONLY`, which the parser takes, are left alone.
fn without_only(
    tokens: Vec<datafusion::sql::sqlparser::tokenizer::TokenWithSpan>,
) -> Vec<datafusion::sql::sqlparser::tokenizer::TokenWithSpan> {
    use datafusion::sql::sqlparser::keywords::Keyword;
    use datafusion::sql::sqlparser::tokenizer::Token;
    let keyword = |t: &Token| match t {
        Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    };
    if !tokens
        .iter()
        .any(|t| keyword(&t.token) == Some(Keyword::ONLY))
    {
        return tokens;
    }
    let mut out: Vec<datafusion::sql::sqlparser::tokenizer::TokenWithSpan> =
        Vec::with_capacity(tokens.len());
    for t in tokens {
        if keyword(&t.token) == Some(Keyword::ONLY) {
            let previous = out
                .iter()
                .rev()
                .find(|p| !matches!(p.token, Token::Whitespace(_)))
                .and_then(|p| keyword(&p.token));
            if matches!(
                previous,
                Some(Keyword::FROM | Keyword::JOIN | Keyword::UPDATE)
            ) {
                continue;
            }
        }
        out.push(t);
    }
    out
}

/// Parse exactly one statement with the PostgreSQL dialect.
pub fn parse_statement(sql: &str) -> Result<Statement> {
    let normalized = normalize_copy_options(sql);
    let dialect = PostgreSqlDialect {};
    let tokens = datafusion::sql::sqlparser::tokenizer::Tokenizer::new(
        &dialect,
        normalized.as_deref().unwrap_or(sql),
    )
    .tokenize_with_location()
    .map_err(|e| SqlError::Syntax(e.to_string()))?;
    let tokens = crate::merge::merge_tokens(crate::overriding::mark_overriding(tokens));
    let tokens = crate::table_command::table_as_select(without_only(operator_any(
        array_keyword_suffix(crate::lock_strengths::stronger_lock_clauses(tokens)),
    )));
    crate::statement_limits::check_depth(&tokens)?;
    if crate::sequence_parse::is_create_sequence(&tokens) {
        let mut p = Parser::new(&dialect).with_tokens_with_locations(tokens);
        return Ok(crate::sequence_parse::parse_create_sequence(&mut p)?);
    }
    let tokens = match crate::role_parse::parse_user_statement(tokens)? {
        Ok(stmt) => return Ok(stmt),
        Err(tokens) => tokens,
    };
    let mut stmts = Parser::new(&dialect)
        .with_tokens_with_locations(tokens)
        .parse_statements()?;
    let stmt = match stmts.len() {
        1 => stmts.remove(0),
        0 => return Err(SqlError::Syntax("empty statement".into())),
        _ => return Err(SqlError::Syntax("expected one statement".into())),
    };
    crate::table_command::refuse_table_queries(&stmt)?;
    // Refuse `$0` and `$70000` here, before anything sizes a vector by a
    // parameter number.
    if sql.contains('$') {
        check_params(&stmt)?;
    }
    Ok(stmt)
}

/// PostgreSQL's COPY accepts `on`/`off` for boolean options (`WITH (freeze
/// on)`, as pgbench sends); the parser wants `true`/`false`. Only a bare
/// `on`/`off` word right after a boolean option name changes; quoted text
/// (`DELIMITER ','`) and everything else is kept byte for byte.
fn normalize_copy_options(sql: &str) -> Option<String> {
    let trimmed = sql.trim_start();
    if !trimmed
        .get(..4)
        .is_some_and(|w| w.eq_ignore_ascii_case("copy"))
    {
        return None;
    }
    // Word tokens (start, end) outside quotes.
    let bytes = sql.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q {
                    i += 1;
                }
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                words.push((start, i));
            }
            _ => i += 1,
        }
    }
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0;
    for pair in words.windows(2) {
        let (name, value) = (&sql[pair[0].0..pair[0].1], &sql[pair[1].0..pair[1].1]);
        let boolean_option = ["freeze", "header", "oids"]
            .iter()
            .any(|o| name.eq_ignore_ascii_case(o));
        let replacement = match value.to_ascii_lowercase().as_str() {
            "on" if boolean_option => "true",
            "off" if boolean_option => "false",
            _ => continue,
        };
        out.push_str(&sql[copied..pair[1].0]);
        out.push_str(replacement);
        copied = pair[1].1;
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&sql[copied..]);
    Some(out)
}

/// Lower-case an unquoted identifier, keep a quoted one.
pub fn ident_name(id: &Ident) -> String {
    if id.quote_style.is_some() {
        id.value.clone()
    } else {
        id.value.to_lowercase()
    }
}

/// The table named by an object name (`t`, `public.t`, `eddy.public.t`).
pub fn table_name(name: &ObjectName) -> Result<String> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(id) => Ok(ident_name(id)),
            ObjectNamePart::Function(_) => Err(SqlError::FeatureNotSupported(format!(
                "unsupported name {name}"
            ))),
        })
        .collect::<Result<_>>()?;
    match parts.as_slice() {
        [t] => Ok(t.clone()),
        [schema, t] if schema == "public" => Ok(t.clone()),
        [_, schema, t] if schema == "public" => Ok(t.clone()),
        _ => Err(SqlError::UndefinedTable(name.to_string())),
    }
}

fn last_ident(name: &ObjectName) -> Option<String> {
    match name.0.last()? {
        ObjectNamePart::Identifier(id) => Some(id.value.to_lowercase()),
        ObjectNamePart::Function(_) => None,
    }
}

/// Rewrite PostgreSQL catalog idioms into what DataFusion understands.
/// `is_user_table` says whether a bare name is one of the user's tables
/// (then `pg_*` names are left alone).
pub fn pg_compat(stmt: &mut Statement, user_table_oid: &dyn Fn(&str) -> Option<i64>) {
    let is_user_table = |n: &str| user_table_oid(n).is_some();
    // first: the catalog rewrites below use generate_series's list form
    crate::set_returning::rewrite(stmt);
    crate::srf_rewrite::rewrite(stmt);
    crate::fetch_first::fetch_as_limit(stmt);
    match stmt {
        Statement::Query(q) => {
            empty_publication_query(q);
            values_literals(q);
            regclass_results_by_name(q);
        }
        Statement::Insert(datafusion::sql::sqlparser::ast::Insert {
            source: Some(q), ..
        }) => values_literals(q),
        _ => {}
    }
    let _ = visit_relations_mut(stmt, |rel| {
        if rel.0.len() == 1 {
            if let Some(n) = last_ident(rel) {
                // a `pg_` table function (`FROM pg_listening_channels()`)
                // is found by its bare name, not as a catalog relation
                if n.starts_with("pg_")
                    && !is_user_table(&n)
                    && n != crate::notify::LISTENING_CHANNELS
                {
                    rel.0
                        .insert(0, ObjectNamePart::Identifier(Ident::new("pg_catalog")));
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    // after the qualification above: `pg_x` is `pg_catalog.pg_x` by now
    crate::catalog_references::rewrite(stmt, &|name| relation_oid(name, user_table_oid));
    let _ = visit_expressions_mut(stmt, |e| {
        rewrite_expr(e);
        ControlFlow::<()>::Continue(())
    });
    // after the expressions: `array(select ... from pg_catalog.f(...))`
    // is recognised by its qualified table function (`reads_qualified_catalog`)
    let _ = stmt.visit(&mut CatalogTableFunctions);
}

/// The OID of the relation `name` names: a `pg_catalog` relation's, or a
/// user table's (`user_table_oid`).
fn relation_oid(name: &ObjectName, user_table_oid: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| p.as_ident().map(ident_name))
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        [schema, relation] if schema == "pg_catalog" => {
            crate::catalog::catalog_relation_oid(relation)
        }
        [schema, relation] if schema == "public" => user_table_oid(relation),
        [relation] => user_table_oid(relation),
        _ => None,
    }
}

/// The escape argument of `eddy_similar_escape`: the text, or NULL for
/// the default backslash.
fn escape_expr(escape: Option<&str>) -> Expr {
    match escape {
        Some(e) => string_expr(e.to_string()),
        None => Expr::Value(SqlValue::Null.into()),
    }
}

/// `text`, `varchar` or `name`, however spelled (`pg_catalog.text`).
fn names_text_type(t: &SqlType) -> bool {
    match t {
        SqlType::Text | SqlType::Varchar(_) | SqlType::String(_) => true,
        SqlType::Custom(name, _) => {
            matches!(
                last_ident(name).as_deref(),
                Some("text" | "varchar" | "name")
            )
        }
        _ => false,
    }
}

/// `X` of `eddy_regclass(X)`, the rewritten `X::regclass`.
fn regclass_lookup_argument(e: &Expr) -> Option<Expr> {
    lookup_argument(e, "eddy_regclass")
}

/// `X` of the call `function(X)`.
fn lookup_argument(e: &Expr, function: &str) -> Option<Expr> {
    let Expr::Function(f) = e else {
        return None;
    };
    if last_ident(&f.name).as_deref() != Some(function) {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))] => Some(arg.clone()),
        _ => None,
    }
}

/// A regclass that a query returns is printed by PostgreSQL as the
/// relation's name (`conrelid::regclass AS ontable`, psql's `\d`), while
/// Eddy computes with regclass as the relation's oid (a bigint, so that
/// `c.oid = 't'::regclass` compares). So a `::regclass` cast that is a
/// whole result column of the statement's own select list becomes the
/// name; one in a subquery, a condition or an expression stays the oid.
fn regclass_results_by_name(q: &mut datafusion::sql::sqlparser::ast::Query) {
    use datafusion::sql::sqlparser::ast::{SelectItem, SetExpr};
    let SetExpr::Select(select) = q.body.as_mut() else {
        return;
    };
    for item in select.projection.iter_mut() {
        let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = item else {
            continue;
        };
        let Expr::Cast {
            expr, data_type, ..
        } = e
        else {
            continue;
        };
        let regclass = match data_type {
            SqlType::Regclass => true,
            SqlType::Custom(name, _) => last_ident(&*name).as_deref() == Some("regclass"),
            _ => false,
        };
        if regclass {
            let inner = std::mem::replace(expr.as_mut(), Expr::Value(SqlValue::Null.into()));
            *e = call("eddy_regclass_name", vec![inner]);
        }
    }
}

/// `FROM pg_catalog.generate_series(1, 32) pos(n)` (pgjdbc's
/// getImportedKeys): a table function named with `pg_catalog.` is found by
/// its bare name, as its scalar functions are; `FROM
/// information_schema._pg_expandarray(a)` by Eddy's name for it.
struct CatalogTableFunctions;

impl VisitorMut for CatalogTableFunctions {
    type Break = ();

    fn pre_visit_table_factor(
        &mut self,
        table_factor: &mut datafusion::sql::sqlparser::ast::TableFactor,
    ) -> ControlFlow<()> {
        if let datafusion::sql::sqlparser::ast::TableFactor::Table {
            name,
            args: Some(_),
            ..
        } = table_factor
        {
            if let [ObjectNamePart::Identifier(schema), ObjectNamePart::Identifier(function)] =
                name.0.as_slice()
            {
                let schema = ident_name(schema);
                if schema == "pg_catalog" {
                    name.0.remove(0);
                } else if schema == "information_schema"
                    && ident_name(function) == crate::expand_array::PG_NAME
                {
                    // `FROM information_schema._pg_expandarray(a)`
                    // (`crate::expand_array::ExpandArrayRows`)
                    *name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(
                        crate::expand_array::EXPAND_ARRAY,
                    ))]);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// A literal such as `1e308` or `1.5e-300`: beyond what DataFusion's
/// decimal literals hold (38 digits, scale at least -128), but at most 15
/// significant digits, which a double holds exactly as written. It is typed
/// double precision (PostgreSQL types it numeric and prints every digit;
/// the value is the same, and where it is stored into a float column or
/// compared with one, so is the result). Any other such literal is left for
/// the planner to refuse.
fn float_literal_beyond_numeric(written: &str, digits: &str) -> Option<Expr> {
    if fits_decimal_literal(written) {
        return None;
    }
    let significant = digits
        .bytes()
        .filter(u8::is_ascii_digit)
        .skip_while(|b| *b == b'0')
        .collect::<Vec<u8>>();
    let trailing_zeros = significant.iter().rev().take_while(|b| **b == b'0').count();
    if significant.len() - trailing_zeros > 15 {
        return None;
    }
    let value: f64 = written.parse().ok()?;
    if !value.is_normal() {
        return None;
    }
    Some(cast_to(
        string_expr(written.to_string()),
        SqlType::DoublePrecision,
    ))
}

/// Whether DataFusion's decimal literal takes `written` (`1e38` is
/// `Decimal128(1, -38)`): at most 38 digits and a scale of at least -128.
fn fits_decimal_literal(written: &str) -> bool {
    let (mantissa, exponent) = match written.split_once(['e', 'E']) {
        Some((m, e)) => match e.parse::<i64>() {
            Ok(e) => (m, e),
            Err(_) => return false,
        },
        None => (written, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0').len().max(1) as i64;
    let scale = frac.len() as i64 - exponent;
    let precision = if scale > 0 { digits.max(scale) } else { digits };
    scale >= -128 && precision <= 38
}

fn rewrite_expr(e: &mut Expr) {
    crate::call_rewrites::rewrite(e);
    match e {
        // PostgreSQL's `1.50` is a numeric, not a float: keep its digits
        // and scale (DataFusion would read a Float64)
        Expr::Value(ValueWithSpan {
            value: SqlValue::Number(n, _),
            ..
        }) if n.contains(['.', 'e', 'E']) || n.parse::<i64>().is_err() => {
            if let Ok(NumericText::Finite(text)) = numeric_from_text(n) {
                if let Some(typed) = decimal_literal(&text) {
                    *e = typed;
                } else if let Some(float) = float_literal_beyond_numeric(n, &text) {
                    *e = float;
                }
            }
        }
        Expr::TypedString(TypedString {
            data_type, value, ..
        }) if matches!(
            data_type,
            SqlType::Timestamp(..) | SqlType::Bytea | SqlType::Date
        ) =>
        {
            // `TIMESTAMPTZ '...'`, `DATE '...'`: the same as a cast of the string
            let inner = Expr::Value(value.clone());
            let data_type = data_type.clone();
            *e = Expr::Cast {
                kind: CastKind::Cast,
                expr: Box::new(inner),
                data_type,
                array: false,
                format: None,
            };
            rewrite_expr(e);
        }
        Expr::BinaryOp { op, .. } => {
            if let BinaryOperator::PGCustomBinaryOperator(parts) = op {
                let new = match parts.last().map(|s| s.as_str()) {
                    Some("~") => Some(BinaryOperator::PGRegexMatch),
                    Some("~*") => Some(BinaryOperator::PGRegexIMatch),
                    Some("!~") => Some(BinaryOperator::PGRegexNotMatch),
                    Some("!~*") => Some(BinaryOperator::PGRegexNotIMatch),
                    Some("=") => Some(BinaryOperator::Eq),
                    Some("<>") => Some(BinaryOperator::NotEq),
                    Some("<") => Some(BinaryOperator::Lt),
                    Some(">") => Some(BinaryOperator::Gt),
                    _ => None,
                };
                if let Some(n) = new {
                    *op = n;
                }
            }
        }
        // `current_catalog` is SQL's name for the database, a keyword
        // without parentheses (pgjdbc's DatabaseMetaData selects it)
        Expr::Identifier(id)
            if id.quote_style.is_none() && id.value.eq_ignore_ascii_case("current_catalog") =>
        {
            *e = call("current_database", vec![]);
        }
        Expr::Function(f)
            if matches!(f.args, FunctionArguments::None)
                && last_ident(&f.name).as_deref() == Some("current_catalog") =>
        {
            *e = call("current_database", vec![]);
        }
        Expr::Collate { expr, .. } => {
            let inner = std::mem::replace(expr.as_mut(), Expr::Value(SqlValue::Null.into()));
            *e = inner;
            rewrite_expr(e);
        }
        // SIMILAR TO as PostgreSQL's anchored regular expression
        // (`crate::similar_to`)
        Expr::SimilarTo {
            negated,
            expr,
            pattern,
            escape_char,
        } => {
            let escape = match escape_char.as_ref().map(|v| &v.value) {
                None => None,
                Some(SqlValue::SingleQuotedString(s)) => Some(s.clone()),
                // (`ESCAPE NULL`: the default)
                Some(_) => None,
            };
            // a literal pattern translated now; any other, or one that
            // fails (refused where it runs, with its SQLSTATE), at run time
            let translated = string_literal(pattern)
                .and_then(|p| crate::similar_to::similar_to_regex(p, escape.as_deref()).ok());
            let regex = match translated {
                Some(r) => string_expr(r),
                None => call(
                    crate::similar_to::SIMILAR_ESCAPE,
                    vec![pattern.as_ref().clone(), escape_expr(escape.as_deref())],
                ),
            };
            let op = if *negated {
                BinaryOperator::PGRegexNotMatch
            } else {
                BinaryOperator::PGRegexMatch
            };
            let subject = std::mem::replace(expr.as_mut(), Expr::Value(SqlValue::Null.into()));
            *e = Expr::BinaryOp {
                left: Box::new(subject),
                op,
                right: Box::new(regex),
            };
        }
        // `INTERVAL '1 day 01:00'` read as `'1 day 01:00'::interval` is
        // (PostgreSQL's input forms; DataFusion's parser refused this one)
        Expr::Interval(iv)
            if iv.leading_field.is_none()
                && iv.leading_precision.is_none()
                && iv.last_field.is_none()
                && iv.fractional_seconds_precision.is_none()
                && string_literal(&iv.value).is_some() =>
        {
            if let Some(text) = string_literal(&iv.value) {
                *e = call(
                    crate::interval_type::INTERVAL_IN,
                    vec![string_expr(text.to_string())],
                );
            }
        }
        // `oid::regclass::text`: the relation's name, as PostgreSQL prints
        // a regclass (the inner cast is already Eddy's oid lookup)
        Expr::Cast {
            expr, data_type, ..
        } if names_text_type(data_type) && regclass_lookup_argument(expr).is_some() => {
            if let Some(arg) = regclass_lookup_argument(expr) {
                *e = call("eddy_regclass_name", vec![arg]);
            }
        }
        // `oid::regtype::text`: the type's name, as PostgreSQL prints a
        // regtype (`-` for 0; asyncpg's type introspection reads it)
        Expr::Cast {
            expr, data_type, ..
        } if names_text_type(data_type) && lookup_argument(expr, "eddy_regtype").is_some() => {
            if let Some(arg) = lookup_argument(expr, "eddy_regtype") {
                *e = call("eddy_regtype_name", vec![arg]);
            }
        }
        Expr::Cast {
            expr, data_type, ..
        } => {
            if let Some(new) = typed_cast(expr, data_type) {
                *e = new;
                return;
            }
            let custom = match data_type {
                SqlType::Custom(name, _) => last_ident(name),
                SqlType::Regclass => Some("regclass".into()),
                _ => None,
            };
            match custom.as_deref() {
                // `'pg_catalog.array_in'::regproc` (pgjdbc's TypeInfoCache
                // compares `typinput` with it): a function named by a
                // literal is its name, as Eddy's `pg_type.typinput` and
                // `typoutput` hold function names
                Some("regproc") | Some("regprocedure")
                    if string_literal(expr).is_some_and(|n| regproc_name(n).is_some()) =>
                {
                    if let Some(name) = string_literal(expr).and_then(regproc_name) {
                        *e = string_expr(name);
                    }
                }
                Some("regnamespace") => {
                    let inner =
                        std::mem::replace(expr.as_mut(), Expr::Value(SqlValue::Null.into()));
                    *e = call("eddy_regnamespace", vec![inner]);
                }
                Some("regclass") | Some("regproc") | Some("regprocedure") => {
                    let inner =
                        std::mem::replace(expr.as_mut(), Expr::Value(SqlValue::Null.into()));
                    *e = call("eddy_regclass", vec![inner]);
                }
                Some("regtype") => {
                    let inner =
                        std::mem::replace(expr.as_mut(), Expr::Value(SqlValue::Null.into()));
                    *e = call("eddy_regtype", vec![inner]);
                }
                // an oid is an unsigned 32-bit integer, announced as `oid`
                // (`pgtypes::pg_oid`), as the catalogs' oid columns are
                Some("oid") => *data_type = SqlType::IntUnsigned(None),
                Some("regrole") | Some("xid") | Some("int2vector") | Some("oidvector") => {
                    *data_type = SqlType::BigInt(None);
                }
                Some("text") | Some("name") | Some("bpchar") | Some("varchar") | Some("char") => {
                    *data_type = SqlType::Text;
                }
                Some("int4") | Some("int") | Some("integer") => *data_type = SqlType::Int(None),
                Some("int8") | Some("bigint") => *data_type = SqlType::BigInt(None),
                Some("int2") | Some("smallint") => *data_type = SqlType::SmallInt(None),
                Some("bool") | Some("boolean") => *data_type = SqlType::Boolean,
                Some("float8") => *data_type = SqlType::Float64,
                Some("float4") => *data_type = SqlType::Float32,
                _ => {}
            }
        }
        Expr::Subquery(q) => {
            if reads_pg_collation(q) {
                // Eddy has one collation, the default, and no column overrides
                // it: psql's `(SELECT collname ... WHERE a.attcollation <>
                // t.typcollation)` is always NULL, and its non-equality
                // correlation is beyond DataFusion's decorrelation.
                *e = Expr::Value(SqlValue::Null.into());
            } else if aggregate_catalog_scalar_subquery(q) {
                // Conjuncts that read only the outer row (psql's `AND
                // a.atthasdef`) stop DataFusion's decorrelation; as a guard
                // outside the subquery they mean the same: no row, NULL.
                if let Some(guard) = take_outer_only_conjuncts(q) {
                    let sub = std::mem::replace(e, Expr::Value(SqlValue::Null.into()));
                    *e = Expr::Case {
                        case_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                        end_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                        operand: None,
                        conditions: vec![datafusion::sql::sqlparser::ast::CaseWhen {
                            condition: guard,
                            result: sub,
                        }],
                        else_result: None,
                    };
                }
            }
        }
        Expr::Function(f)
            if last_ident(&f.name).as_deref() == Some("array")
                && matches!(&f.args, FunctionArguments::Subquery(q)
                    if reads_qualified_catalog(q) && !reads_role_memberships(q)) =>
        {
            // psql's `array(select ...)` over catalog objects Eddy does not
            // have: TOAST options (`unnest(tc.reloptions)`, tc a LEFT JOIN
            // that never matches), policy roles (pg_policy is empty),
            // publications. Each is evaluated on no row or yields no element:
            // a NULL text[] (array_to_string and unnest still take it).
            // Role memberships exist (`\du`'s "Member of"): planned below.
            *e = Expr::Cast {
                kind: datafusion::sql::sqlparser::ast::CastKind::DoubleColon,
                expr: Box::new(Expr::Value(SqlValue::Null.into())),
                data_type: SqlType::Array(
                    datafusion::sql::sqlparser::ast::ArrayElemTypeDef::SquareBracket(
                        Box::new(SqlType::Text),
                        None,
                    ),
                ),
                array: false,
                format: None,
            };
        }
        // `ARRAY(SELECT ...)` of Eddy's own tables (`crate::array_subquery`)
        Expr::Function(f)
            if last_ident(&f.name).as_deref() == Some("array")
                && matches!(&f.args, FunctionArguments::Subquery(_)) =>
        {
            if let FunctionArguments::Subquery(q) = &f.args {
                if let Some(new) = crate::array_subquery::array_of_subquery(q) {
                    *e = new;
                }
            }
        }
        Expr::Function(f)
            if matches!(
                last_ident(&f.name).as_deref(),
                Some("nextval") | Some("currval") | Some("setval")
            ) =>
        {
            // `nextval('s'::regclass)`: the cast became `eddy_regclass('s')`
            // (an OID) below; a sequence function takes the name itself.
            if f.name.0.len() == 2 {
                f.name.0.remove(0);
            }
            if let FunctionArguments::List(list) = &mut f.args {
                if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(first))) =
                    list.args.first_mut()
                {
                    if let Expr::Function(inner) = first {
                        if last_ident(&inner.name).as_deref() == Some("eddy_regclass") {
                            if let FunctionArguments::List(inner_args) = &mut inner.args {
                                if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(name))) =
                                    inner_args.args.pop()
                                {
                                    *first = name;
                                }
                            }
                        }
                    }
                }
            }
        }
        Expr::Function(f)
            if last_ident(&f.name).as_deref() == Some("generate_subscripts")
                && subscripts_args(f).is_some() =>
        {
            // PostgreSQL's set-returning `generate_subscripts(a, dim)`:
            // Eddy's arrays have one dimension and subscripts from 1
            // (others are refused on input), so it is `unnest(CASE WHEN
            // dim = 1 THEN generate_series(1, cardinality(a)) END)`: no row
            // for NULL, an empty array or another dimension, and in a
            // select list it zips with an `unnest(a)` beside it, as
            // SQLAlchemy's index reflection pairs them. The dimension is
            // often a bound parameter, so it is tested at execution.
            if let Some((array, dim)) = subscripts_args(f) {
                let subscripts = call(
                    "generate_series",
                    vec![
                        Expr::value(SqlValue::Number("1".into(), false)),
                        call("cardinality", vec![array]),
                    ],
                );
                let first = Expr::BinaryOp {
                    left: Box::new(dim),
                    op: BinaryOperator::Eq,
                    right: Box::new(Expr::value(SqlValue::Number("1".into(), false))),
                };
                let only_first = Expr::Case {
                    case_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                    end_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                    operand: None,
                    conditions: vec![datafusion::sql::sqlparser::ast::CaseWhen {
                        condition: first,
                        result: subscripts,
                    }],
                    else_result: None,
                };
                *e = call("unnest", vec![only_first]);
            }
        }
        Expr::Function(f) if is_expand_array(f) => {
            // `information_schema._pg_expandarray(a)`: the records `(x, n)`
            // of the array's elements, one row each (`crate::expand_array`)
            let args = std::mem::replace(&mut f.args, FunctionArguments::None);
            let inner = Expr::Function(Function {
                name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(
                    crate::expand_array::EXPAND_ARRAY,
                ))]),
                args,
                ..f.clone()
            });
            *e = call("unnest", vec![inner]);
        }
        // `(record).field`: PostgreSQL's field selection from a composite
        // value (pgjdbc's `(information_schema._pg_expandarray(k)).n`,
        // `(result.keys).x`); DataFusion plans a field name given as a
        // string, `(record)['field']`
        Expr::CompoundFieldAccess { root, access_chain }
            if !matches!(root.as_ref(), Expr::Identifier(_)) =>
        {
            for access in access_chain.iter_mut() {
                if let AccessExpr::Dot(Expr::Identifier(id)) = access {
                    let name = ident_name(id);
                    *access = AccessExpr::Subscript(Subscript::Index {
                        index: Expr::value(SqlValue::SingleQuotedString(name)),
                    });
                }
            }
        }
        Expr::Function(f) if f.name.0.len() == 2 => {
            if let Some(ObjectNamePart::Identifier(first)) = f.name.0.first() {
                if first.value.eq_ignore_ascii_case("pg_catalog") {
                    f.name.0.remove(0);
                }
            }
        }
        _ => {}
    }
}

/// The function a regproc literal names: `pg_catalog.array_in` and
/// `array_in` are `array_in` (`regprocedure`'s argument list dropped);
/// `None` for a name in another schema or not a plain name.
fn regproc_name(text: &str) -> Option<String> {
    let t = text.trim();
    let t = t.split_once('(').map_or(t, |(name, _)| name).trim();
    let bare = match t.split_once('.') {
        Some((schema, name)) if schema.eq_ignore_ascii_case("pg_catalog") => name,
        Some(_) => return None,
        None => t,
    };
    let plain = !bare.is_empty() && bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    plain.then(|| bare.to_ascii_lowercase())
}

/// `information_schema._pg_expandarray(...)`, as PostgreSQL resolves it:
/// only with its schema (`information_schema` is not on the search path).
fn is_expand_array(f: &Function) -> bool {
    match f.name.0.as_slice() {
        [ObjectNamePart::Identifier(schema), ObjectNamePart::Identifier(name)] => {
            ident_name(schema) == "information_schema"
                && ident_name(name) == crate::expand_array::PG_NAME
        }
        _ => false,
    }
}

/// The array and dimension arguments of `generate_subscripts(a, dim)`.
fn subscripts_args(f: &Function) -> Option<(Expr, Expr)> {
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(array)), FunctionArg::Unnamed(FunctionArgExpr::Expr(dim))] => {
            Some((array.clone(), dim.clone()))
        }
        _ => None,
    }
}

/// The text of a string literal (`'...'`, `E'...'`, `$$...$$`).
fn string_literal(e: &Expr) -> Option<&str> {
    match e {
        Expr::Value(ValueWithSpan {
            value:
                SqlValue::SingleQuotedString(s)
                | SqlValue::EscapedStringLiteral(s)
                | SqlValue::DollarQuotedString(datafusion::sql::sqlparser::ast::DollarQuotedString {
                    value: s,
                    ..
                }),
            ..
        }) => Some(s),
        Expr::Nested(inner) => string_literal(inner),
        _ => None,
    }
}

fn string_expr(s: String) -> Expr {
    Expr::Value(ValueWithSpan {
        value: SqlValue::SingleQuotedString(s),
        span: Span::empty(),
    })
}

fn cast_to(expr: Expr, data_type: SqlType) -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(expr),
        data_type,
        array: false,
        format: None,
    }
}

/// The Arrow type of `timestamptz` values: instants in microseconds,
/// labelled UTC whatever the session's zone (`crate::session_zone`).
const TIMESTAMPTZ_ARROW: &str = "Timestamp(Microsecond, Some(\"+00:00\"))";

/// A cast PostgreSQL gives a different answer for than DataFusion, as the
/// expression that gives PostgreSQL's; `None` to keep the cast.
/// * `'\x6869'::bytea`, `'a\000'::bytea`: `byteain` decodes the text
///   (DataFusion would take its UTF-8 bytes);
/// * `x::timestamptz`: an instant (DataFusion's is a timestamp without
///   zone); a literal is read in the session's zone, its offset kept
///   (`crate::zone_functions::TIMESTAMPTZ_IN_ZONE`);
/// * `'2024-01-01 12:30+02'::timestamp`: the suffix is ignored;
/// * a `date`, `timestamp` or `timestamptz` literal Eddy's reader refuses:
///   PostgreSQL's error (`crate::datetime_in`);
/// * `x::varchar(n)`: an explicit cast truncates to n characters.
fn typed_cast(expr: &Expr, data_type: &SqlType) -> Option<Expr> {
    let custom = match data_type {
        SqlType::Custom(name, _) => last_ident(name),
        _ => None,
    };
    let naive = || SqlType::Timestamp(None, TimezoneInfo::None);
    // Arrow would wrap a string into a one-element list: text is read by
    // PostgreSQL's array input instead (`array_type`)
    let is_array = matches!(data_type, SqlType::Array(_))
        || custom.as_deref().is_some_and(|c| c.starts_with('_'));
    if is_oid_array_type(data_type) {
        // oids are bigints in Eddy (as `x::oid` is)
        return Some(call(
            crate::array_type::ARRAY_IN,
            vec![
                expr.clone(),
                string_expr(crate::array_type::type_arg(ColumnType::Array(
                    eddy_common::ArrayElem::BigInt,
                ))),
            ],
        ));
    }
    if is_array {
        if let Ok(ty @ ColumnType::Array(_)) = pgtypes::column_type_from_sql(data_type) {
            return Some(call(
                crate::array_type::ARRAY_IN,
                vec![expr.clone(), string_expr(crate::array_type::type_arg(ty))],
            ));
        }
    }
    match data_type {
        // Arrow has no text -> uuid cast (`uuid_type`)
        _ if matches!(data_type, SqlType::Uuid) || custom.as_deref() == Some("uuid") => {
            Some(call(crate::uuid_type::UUID_IN, vec![expr.clone()]))
        }
        // `'1 year 2 mons 04:05:06'::interval`: PostgreSQL's input forms,
        // given to Arrow's interval cast in a form it reads
        SqlType::Interval { fields: None, .. } => {
            let s = string_literal(expr)?;
            Some(call(
                crate::interval_type::INTERVAL_IN,
                vec![string_expr(s.to_string())],
            ))
        }
        // json and jsonb are text checked (jsonb normalized) by functions
        _ if matches!(data_type, SqlType::JSON) || custom.as_deref() == Some("json") => {
            Some(call(crate::json_functions::JSON_IN, vec![expr.clone()]))
        }
        _ if matches!(data_type, SqlType::JSONB) || custom.as_deref() == Some("jsonb") => {
            Some(call(crate::json_functions::JSONB_IN, vec![expr.clone()]))
        }
        _ if matches!(data_type, SqlType::Bytea) || custom.as_deref() == Some("bytea") => {
            let bytes = pgtypes::parse_bytea_text(string_literal(expr)?)?;
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            Some(Expr::Value(ValueWithSpan {
                value: SqlValue::HexStringLiteral(hex),
                span: Span::empty(),
            }))
        }
        SqlType::Timestamp(_, TimezoneInfo::Tz | TimezoneInfo::WithTimeZone) => {
            // a literal is read by PostgreSQL's rules in the session's zone
            // (which `crate::zone_rules` adds), refused while planning with
            // PostgreSQL's error if it is no timestamp
            if string_literal(expr).is_some() {
                return Some(call(
                    crate::zone_functions::TIMESTAMPTZ_IN_ZONE,
                    vec![expr.clone()],
                ));
            }
            Some(call(
                "arrow_cast",
                vec![
                    cast_to(expr.clone(), naive()),
                    string_expr(TIMESTAMPTZ_ARROW.into()),
                ],
            ))
        }
        SqlType::Timestamp(_, TimezoneInfo::None | TimezoneInfo::WithoutTimeZone) => {
            let s = string_literal(expr)?;
            let Ok(t) = pgtypes::timestamp_wall_clock(s) else {
                // refused while planning, with PostgreSQL's error
                return Some(call(crate::datetime_in::TIMESTAMP_IN, vec![expr.clone()]));
            };
            let canonical = value_text(&Value::Timestamp(t), None);
            // already canonical: leave it (and stop the rewrite repeating)
            (canonical != s).then(|| cast_to(string_expr(canonical), naive()))
        }
        SqlType::Date => {
            let s = string_literal(expr)?;
            match pgtypes::date_in(s) {
                // a time or zone after the date (`'2024-06-01 +02'`) is
                // dropped, as PostgreSQL's date_in drops it
                Ok(d) => {
                    let canonical = value_text(&Value::Date(d), None);
                    (canonical != s).then(|| cast_to(string_expr(canonical), SqlType::Date))
                }
                // refused while planning, with PostgreSQL's error
                Err(_) => Some(call(crate::datetime_in::DATE_IN, vec![expr.clone()])),
            }
        }
        SqlType::Numeric(ExactNumberInfo::None)
        | SqlType::Decimal(ExactNumberInfo::None)
        | SqlType::Dec(ExactNumberInfo::None) => {
            // `numeric` without a scale keeps the value's own, which only a
            // literal shows before execution: `'1.50'::numeric` is 1.50
            if let Expr::Cast {
                data_type: SqlType::Decimal(ExactNumberInfo::PrecisionAndScale(..)),
                expr: inner,
                ..
            } = expr
            {
                if string_literal(inner).is_some() {
                    return Some(expr.clone());
                }
            }
            let Some(literal) = string_literal(expr) else {
                // a parameter's cast types the parameter: left to DataFusion
                if matches!(
                    expr,
                    Expr::Value(ValueWithSpan {
                        value: SqlValue::Placeholder(_),
                        ..
                    })
                ) {
                    return None;
                }
                // typed by what it casts (`crate::numeric_cast`)
                return Some(call(crate::numeric_cast::NUMERIC_CAST, vec![expr.clone()]));
            };
            match numeric_from_text(literal).ok()? {
                NumericText::Finite(text) => decimal_literal(&text),
                _ => None,
            }
        }
        SqlType::Varchar(Some(CharacterLength::IntegerLength { length, .. }))
        | SqlType::CharacterVarying(Some(CharacterLength::IntegerLength { length, .. }))
        | SqlType::CharVarying(Some(CharacterLength::IntegerLength { length, .. })) => {
            let n = i64::try_from(*length).ok()?;
            Some(call(
                "left",
                vec![
                    cast_to(expr.clone(), SqlType::Text),
                    Expr::Value(ValueWithSpan {
                        value: SqlValue::Number(n.to_string(), false),
                        span: Span::empty(),
                    }),
                ],
            ))
        }
        // `char(n)`: cut to n characters, then padded to n with spaces
        SqlType::Char(len) | SqlType::Character(len) => {
            let n = match len {
                None => 1,
                Some(CharacterLength::IntegerLength { length, .. }) => {
                    i64::try_from(*length).ok()?
                }
                Some(CharacterLength::Max) => return None,
            };
            let n_expr = || {
                Expr::Value(ValueWithSpan {
                    value: SqlValue::Number(n.to_string(), false),
                    span: Span::empty(),
                })
            };
            let cut = call("left", vec![cast_to(expr.clone(), SqlType::Text), n_expr()]);
            Some(call("rpad", vec![cut, n_expr()]))
        }
        _ => None,
    }
}

/// A numeric literal as a typed decimal, `CAST('12.50' AS DECIMAL(4,2))`,
/// from `numeric_out` text: its digits and scale, exactly. `None` when it
/// needs more than the 38 digits Eddy's decimals hold.
pub fn decimal_literal(text: &str) -> Option<Expr> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let scale = frac.len() as u64;
    let int_digits = int.trim_start_matches('0').len() as u64;
    let precision = (int_digits + scale).max(1);
    if precision > 38 {
        return None;
    }
    Some(cast_to(
        string_expr(text.to_string()),
        SqlType::Decimal(ExactNumberInfo::PrecisionAndScale(precision, scale as i64)),
    ))
}

/// Bind the NUMERIC parameters (`types[i]` is the parameter's OID) as typed
/// decimal literals, keeping the scale the client sent; [`parse_param`]
/// gave them as their exact text. Other placeholders are left for
/// [`substitute_params`]. Returns whether any placeholder was replaced.
///
/// [`parse_param`]: crate::pgtypes::parse_param
pub fn bind_numeric_params(stmt: &mut Statement, params: &[Value], types: &[u32]) -> bool {
    let mut changed = false;
    let _ = visit_expressions_mut(stmt, |e| {
        if let Expr::Value(ValueWithSpan {
            value: SqlValue::Placeholder(p),
            ..
        }) = e
        {
            if let Some(n) = param_number(p) {
                if types.get(n - 1) == Some(&pgtypes::oid::NUMERIC) {
                    if let Some(v) = params.get(n - 1) {
                        *e = match v {
                            Value::Text(t) => {
                                decimal_literal(t).unwrap_or_else(|| string_expr(t.clone()))
                            }
                            other => value_to_expr(other, None),
                        };
                        changed = true;
                    }
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    changed
}

/// A multi-row VALUES list (an INSERT's rows) whose column mixes string
/// literals with other values. PostgreSQL converts each row's value to the
/// target column on its own; DataFusion first unifies the column's type,
/// which fails for `'NaN'` next to `1.5` (decimal) or a string next to a
/// `timestamptz`. So, per column: numbers among strings become the string
/// of their `numeric_out` text (converted to the column like any other
/// literal), and strings among `::timestamptz` casts are cast likewise.
fn values_literals(q: &mut datafusion::sql::sqlparser::ast::Query) {
    use datafusion::sql::sqlparser::ast::SetExpr;
    let SetExpr::Values(values) = q.body.as_mut() else {
        return;
    };
    if values.rows.len() < 2 {
        return;
    }
    let width = values.rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let is_number = |e: &Expr| match e {
        Expr::Value(ValueWithSpan {
            value: SqlValue::Number(..),
            ..
        }) => true,
        Expr::UnaryOp { expr, .. } => matches!(
            expr.as_ref(),
            Expr::Value(ValueWithSpan {
                value: SqlValue::Number(..),
                ..
            })
        ),
        _ => false,
    };
    let is_timestamptz = |e: &Expr| {
        matches!(e, Expr::Cast { data_type: SqlType::Timestamp(_, tz), .. }
            if matches!(tz, TimezoneInfo::Tz | TimezoneInfo::WithTimeZone))
    };
    for j in 0..width {
        let column = || values.rows.iter().filter_map(|r| r.get(j));
        if !column().any(|e| string_literal(e).is_some()) {
            continue;
        }
        let numbers_to_text = column().any(is_number);
        let cast_strings = column().any(is_timestamptz);
        for row in values.rows.iter_mut() {
            let Some(e) = row.get_mut(j) else { continue };
            if numbers_to_text && is_number(e) {
                if let Ok(n) = numeric_from_text(&e.to_string()) {
                    *e = string_expr(n.into_text());
                }
            } else if cast_strings && string_literal(e).is_some() {
                let inner = std::mem::replace(e, Expr::Value(SqlValue::Null.into()));
                *e = cast_to(inner, SqlType::Timestamp(None, TimezoneInfo::Tz));
            }
        }
    }
}

/// The relations of a SELECT's FROM list, joined ones included.
fn from_relations(
    sel: &datafusion::sql::sqlparser::ast::Select,
) -> impl Iterator<Item = &datafusion::sql::sqlparser::ast::TableFactor> {
    sel.from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)))
}

/// `a AND b AND ...`, or `None` for no conjunct.
fn and_all(conjuncts: Vec<Expr>) -> Option<Expr> {
    conjuncts.into_iter().reduce(|a, b| Expr::BinaryOp {
        left: Box::new(a),
        op: BinaryOperator::And,
        right: Box::new(b),
    })
}

/// Eddy has no publications: a query each of whose branches reads a
/// `pg_publication*` table (psql's `\d` footer) has no rows. It is answered
/// as such, because its array arithmetic (`prattrs[s]`, `array_upper`) is
/// beyond DataFusion.
fn empty_publication_query(q: &mut datafusion::sql::sqlparser::ast::Query) {
    use datafusion::sql::sqlparser::ast::{SelectItem, SetExpr, TableFactor};
    fn leaves<'a>(
        e: &'a SetExpr,
        out: &mut Vec<&'a datafusion::sql::sqlparser::ast::Select>,
    ) -> bool {
        match e {
            SetExpr::Select(s) => {
                out.push(s);
                true
            }
            SetExpr::SetOperation { left, right, .. } => leaves(left, out) && leaves(right, out),
            _ => false,
        }
    }
    let mut selects = Vec::new();
    if !leaves(&q.body, &mut selects) {
        return;
    }
    let reads_publication = |s: &datafusion::sql::sqlparser::ast::Select| {
        from_relations(s).any(|r| {
            matches!(r, TableFactor::Table { name, .. }
                if last_ident(name).is_some_and(|n| n.starts_with("pg_publication")))
        })
    };
    if !selects.iter().all(|s| reads_publication(s)) {
        return;
    }
    let Some(first) = selects.first() else {
        return;
    };
    let columns: Vec<String> = first
        .projection
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            SelectItem::ExprWithAlias { alias, .. } => format!("NULL AS \"{}\"", alias.value),
            SelectItem::UnnamedExpr(Expr::Identifier(id)) => format!("NULL AS \"{}\"", id.value),
            SelectItem::UnnamedExpr(Expr::CompoundIdentifier(p)) if !p.is_empty() => {
                format!("NULL AS \"{}\"", p[p.len() - 1].value)
            }
            _ => format!("NULL AS column{}", i + 1),
        })
        .collect();
    if let Ok(Statement::Query(empty)) =
        parse_statement(&format!("SELECT {} WHERE false", columns.join(", ")))
    {
        *q = *empty;
    }
}

/// Whether a subquery reads any relation or table function named with the
/// `pg_catalog.` schema (psql's `array(select ... from pg_catalog.x ...)`).
/// Decided on the AST: relations anywhere in the subquery, nested ones
/// included.
fn reads_qualified_catalog(q: &datafusion::sql::sqlparser::ast::Query) -> bool {
    use datafusion::sql::sqlparser::ast::visit_relations;
    visit_relations(q, |name: &ObjectName| {
        let qualified = name.0.len() == 2
            && matches!(name.0.first(), Some(ObjectNamePart::Identifier(i))
                if i.value.eq_ignore_ascii_case("pg_catalog"));
        if qualified {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// Whether a query reads `pg_auth_members`, whose rows Eddy has (its role
/// grants), unlike the catalogs of [`reads_qualified_catalog`]'s rule.
fn reads_role_memberships(q: &datafusion::sql::sqlparser::ast::Query) -> bool {
    use datafusion::sql::sqlparser::ast::visit_relations;
    visit_relations(q, |name: &ObjectName| {
        if last_ident(name).as_deref() == Some("pg_auth_members") {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

fn reads_pg_collation(q: &datafusion::sql::sqlparser::ast::Query) -> bool {
    use datafusion::sql::sqlparser::ast::{SetExpr, TableFactor};
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return false;
    };
    from_relations(sel).any(|r| {
        matches!(r, TableFactor::Table { name, .. } if last_ident(name).as_deref() == Some("pg_collation"))
    })
}

/// psql and drivers put correlated scalar subqueries over catalog tables in
/// their select lists (`(SELECT c.collname FROM pg_collation c WHERE ...)`);
/// DataFusion only decorrelates aggregated ones. Over catalog tables such a
/// subquery yields at most one row, so wrapping its one output in `max()`
/// keeps the answer. User tables are never touched.
fn aggregate_catalog_scalar_subquery(q: &mut datafusion::sql::sqlparser::ast::Query) -> bool {
    use datafusion::sql::sqlparser::ast::{GroupByExpr, SelectItem, SetExpr, TableFactor};
    let SetExpr::Select(sel) = q.body.as_mut() else {
        return false;
    };
    let group_by_empty = match &sel.group_by {
        GroupByExpr::Expressions(v, _) => v.is_empty(),
        GroupByExpr::All(_) => false,
    };
    if sel.projection.len() != 1 || !group_by_empty || sel.from.is_empty() || sel.having.is_some() {
        return false;
    }
    let catalog_only = from_relations(sel).all(|r| match r {
        TableFactor::Table { name, .. } => {
            name.0.len() == 2
                && matches!(name.0.first(), Some(ObjectNamePart::Identifier(i))
                    if i.value.eq_ignore_ascii_case("pg_catalog")
                        || i.value.eq_ignore_ascii_case("information_schema"))
        }
        _ => false,
    });
    if !catalog_only {
        return false;
    }
    let wrap = |e: &mut Expr| {
        if let Expr::Function(f) = e {
            let name = f.name.to_string().to_ascii_lowercase();
            if matches!(
                name.as_str(),
                "count"
                    | "sum"
                    | "min"
                    | "max"
                    | "avg"
                    | "array_agg"
                    | "string_agg"
                    | "bool_and"
                    | "bool_or"
            ) {
                return;
            }
        }
        let inner = std::mem::replace(e, Expr::Value(SqlValue::Null.into()));
        *e = call("max", vec![inner]);
    };
    match &mut sel.projection[0] {
        SelectItem::UnnamedExpr(e) => {
            let alias = Ident::new("value");
            let mut inner = std::mem::replace(e, Expr::Value(SqlValue::Null.into()));
            wrap(&mut inner);
            sel.projection[0] = SelectItem::ExprWithAlias { expr: inner, alias };
        }
        SelectItem::ExprWithAlias { expr, .. } => wrap(expr),
        _ => return false,
    }
    true
}

/// Removes from a subquery's WHERE the `AND` conjuncts whose columns are all
/// qualified by a name that is not one of the subquery's own relations (so
/// they read only the outer row), and returns them joined by `AND`.
fn take_outer_only_conjuncts(q: &mut datafusion::sql::sqlparser::ast::Query) -> Option<Expr> {
    use datafusion::sql::sqlparser::ast::{SetExpr, TableFactor};
    let SetExpr::Select(sel) = q.body.as_mut() else {
        return None;
    };
    let mut local: Vec<String> = Vec::new();
    for r in from_relations(sel) {
        if let TableFactor::Table { name, alias, .. } = r {
            if let Some(n) = last_ident(name) {
                local.push(n);
            }
            if let Some(a) = alias {
                local.push(a.name.value.to_ascii_lowercase());
            }
        }
    }
    let selection = sel.selection.take()?;
    let mut conjuncts = Vec::new();
    split_and(selection, &mut conjuncts);
    let (outer, inner): (Vec<Expr>, Vec<Expr>) = conjuncts.into_iter().partition(|c| {
        let mut qualifiers = Vec::new();
        let mut unqualified = false;
        let _ = datafusion::sql::sqlparser::ast::visit_expressions(c, |e| {
            match e {
                Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                    qualifiers.push(parts[parts.len() - 2].value.to_ascii_lowercase())
                }
                Expr::Identifier(_) | Expr::Subquery(_) | Expr::Exists { .. } => unqualified = true,
                _ => {}
            }
            ControlFlow::<()>::Continue(())
        });
        !unqualified && !qualifiers.is_empty() && qualifiers.iter().all(|q| !local.contains(q))
    });
    sel.selection = and_all(inner);
    and_all(outer)
}

fn split_and(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            split_and(*left, out);
            split_and(*right, out);
        }
        Expr::Nested(inner)
            if matches!(
                inner.as_ref(),
                Expr::BinaryOp {
                    op: BinaryOperator::And,
                    ..
                }
            ) =>
        {
            split_and(*inner, out)
        }
        other => out.push(other),
    }
}

/// `CAST('... +00' AS TIMESTAMP WITH TIME ZONE)`: the instant `micros`.
fn instant_literal(micros: i64) -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(string_expr(format!(
            "{}+00",
            value_text(&Value::Timestamp(micros), None)
        ))),
        data_type: SqlType::Timestamp(None, TimezoneInfo::Tz),
        array: false,
        format: None,
    }
}

/// A literal expression for a bound parameter value.
pub fn value_to_expr(v: &Value, decimal_scale: Option<i8>) -> Expr {
    let lit = |v: SqlValue| {
        Expr::Value(ValueWithSpan {
            value: v,
            span: Span::empty(),
        })
    };
    let cast = |text: String, data_type: SqlType| Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(lit(SqlValue::SingleQuotedString(text))),
        data_type,
        array: false,
        format: None,
    };
    match v {
        Value::Null => lit(SqlValue::Null),
        Value::Boolean(b) => lit(SqlValue::Boolean(*b)),
        Value::SmallInt(x) => cast(x.to_string(), SqlType::SmallInt(None)),
        Value::Int(x) => cast(x.to_string(), SqlType::Int(None)),
        // a cast, so that `result_types` leaves an int8 parameter int8
        Value::BigInt(x) => Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(lit(SqlValue::Number(x.to_string(), false))),
            data_type: SqlType::BigInt(None),
            array: false,
            format: None,
        },
        Value::Real(_) => cast(value_text(v, None), SqlType::Real),
        Value::Double(_) => cast(value_text(v, None), SqlType::DoublePrecision),
        Value::Decimal(x) => lit(SqlValue::Number(
            format_decimal(*x, decimal_scale.unwrap_or(0)),
            false,
        )),
        Value::Text(s) => lit(SqlValue::SingleQuotedString(s.clone())),
        Value::Date(_) => cast(value_text(v, None), SqlType::Date),
        Value::Timestamp(_) => cast(
            value_text(v, None),
            SqlType::Timestamp(None, datafusion::sql::sqlparser::ast::TimezoneInfo::None),
        ),
        Value::Bytea(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            lit(SqlValue::HexStringLiteral(hex))
        }
        Value::Time(_) => cast(
            value_text(v, None),
            SqlType::Time(None, datafusion::sql::sqlparser::ast::TimezoneInfo::None),
        ),
        Value::Interval(iv) => cast(
            crate::pgtypes::interval_arrow_text(*iv),
            SqlType::Interval {
                fields: None,
                precision: None,
            },
        ),
        // an array parameter is its text form, typed where it meets a column
        Value::Array(items) => lit(SqlValue::SingleQuotedString(
            crate::array_type::array_value_text(items, decimal_scale),
        )),
        Value::Uuid(u) => call(
            crate::uuid_type::UUID_IN,
            vec![lit(SqlValue::SingleQuotedString(eddy_common::format_uuid(
                u,
            )))],
        ),
    }
}

/// The most parameters a statement can take: the Bind message counts them
/// in 16 bits, and PostgreSQL refuses higher `$n`.
pub const MAX_PARAMS: usize = 65_535;

/// `$n` -> n for a numbered placeholder with n in `1..=MAX_PARAMS`.
fn param_number(p: &str) -> Option<usize> {
    p.strip_prefix('$')
        .filter(|n| n.len() <= 5)
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| (1..=MAX_PARAMS).contains(n))
}

/// A numbered placeholder (`$` and digits only) whose number is out of range.
fn is_bad_param_number(p: &str) -> bool {
    p.strip_prefix('$')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        && param_number(p).is_none()
}

/// Refuse a scalar or IN subquery that returns no column (`(SELECT FROM
/// t)`) with PostgreSQL's 42601: DataFusion indexed its empty schema and
/// panicked. (EXISTS (SELECT FROM t) is fine: it reads no column.)
pub fn check_columnless_subqueries(stmt: &Statement) -> Result<()> {
    use datafusion::sql::sqlparser::ast::SetExpr;
    let columnless = |q: &datafusion::sql::sqlparser::ast::Query| matches!(q.body.as_ref(), SetExpr::Select(s) if s.projection.is_empty());
    let mut bad: Option<&'static str> = None;
    let _ = visit_expressions(stmt, |e| {
        bad = match e {
            Expr::Subquery(q) if columnless(q) => Some("subquery must return only one column"),
            Expr::InSubquery { subquery, .. } if columnless(subquery) => {
                Some("subquery has too few columns")
            }
            _ => None,
        };
        if bad.is_some() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    match bad {
        Some(m) => Err(SqlError::SyntaxMessage(m.into())),
        None => Ok(()),
    }
}

/// Refuse placeholders `$0` and above `$65535` with 42P02, as PostgreSQL does.
pub fn check_params(stmt: &Statement) -> Result<()> {
    let mut bad: Option<String> = None;
    let _ = visit_expressions(stmt, |e| {
        if let Expr::Value(ValueWithSpan {
            value: SqlValue::Placeholder(p),
            ..
        }) = e
        {
            if is_bad_param_number(p) {
                bad = Some(p.clone());
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    match bad {
        Some(p) => Err(SqlError::UndefinedParameter(p)),
        None => Ok(()),
    }
}

/// Replace `$n` placeholders with the literal values of the parameters.
pub fn substitute_params(stmt: &mut Statement, params: &[Value]) -> Result<()> {
    substitute_typed_params(stmt, params, &[])
}

/// [`substitute_params`] knowing each parameter's type (`oids`): a
/// `timestamptz` value is an instant, written with its offset as a
/// `timestamptz` literal (a `timestamp` literal would be a wall-clock time
/// in the session's zone).
pub fn substitute_typed_params(stmt: &mut Statement, params: &[Value], oids: &[u32]) -> Result<()> {
    let mut err: Option<SqlError> = None;
    let _ = visit_expressions_mut(stmt, |e| {
        if let Expr::Value(ValueWithSpan {
            value: SqlValue::Placeholder(p),
            ..
        }) = e
        {
            match param_number(p) {
                Some(n) if n <= params.len() => {
                    *e = match (&params[n - 1], oids.get(n - 1)) {
                        (Value::Timestamp(t), Some(&crate::pgtypes::oid::TIMESTAMPTZ)) => {
                            instant_literal(*t)
                        }
                        (v, _) => value_to_expr(v, None),
                    };
                }
                _ => {
                    err = Some(SqlError::UndefinedParameter(p.clone()));
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    });
    match err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The highest `$n` in a statement (the number of parameters it takes).
/// Numbers outside `1..=MAX_PARAMS` are not counted ([`parse_statement`]
/// has already refused them), so the result never exceeds [`MAX_PARAMS`].
/// SQL-level `PREPARE p (int) AS ... $1` takes none: its `$n` are the
/// parameters of the statement it names, given later by `EXECUTE p (...)`
/// (PostgreSQL's Parse of such a PREPARE describes no parameters).
pub fn count_params(stmt: &mut Statement) -> usize {
    if let Statement::Prepare { .. } = stmt {
        return 0;
    }
    let mut max = 0;
    let _ = visit_expressions(&*stmt, |e| {
        if let Expr::Value(ValueWithSpan {
            value: SqlValue::Placeholder(p),
            ..
        }) = e
        {
            if let Some(n) = param_number(p) {
                max = max.max(n);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    max
}

/// Whether `t` names `oid[]` (or an array of another type Eddy reads as
/// an oid: `regtype[]`, `regclass[]`).
fn is_oid_array_type(t: &SqlType) -> bool {
    use datafusion::sql::sqlparser::ast::ArrayElemTypeDef;
    let oid_like = |name: Option<String>| {
        matches!(
            name.as_deref(),
            Some("oid" | "regtype" | "regclass" | "regproc")
        )
    };
    match t {
        SqlType::Array(
            ArrayElemTypeDef::SquareBracket(inner, _)
            | ArrayElemTypeDef::AngleBracket(inner)
            | ArrayElemTypeDef::Parenthesis(inner),
        ) => match inner.as_ref() {
            SqlType::Custom(name, _) => oid_like(last_ident(name)),
            SqlType::Regclass => true,
            _ => false,
        },
        SqlType::Custom(name, _) => {
            matches!(
                last_ident(name).as_deref(),
                Some("_oid" | "_regtype" | "_regclass")
            )
        }
        _ => false,
    }
}

/// The types PostgreSQL gives parameters cast to `oid[]` (`$1::oid[]`,
/// asyncpg's type introspection) and to `oid`: `oid[]` (1028) and `oid`
/// (26), which clients encode with their own codecs, where DataFusion
/// would infer Eddy's `int8[]` that such a client has no codec for (and
/// `oid` has no `ColumnType` for `fastpath::infer_param_types` to find).
/// Fills only unknown (0) slots.
pub fn declared_oid_params(stmt: &Statement, types: &mut [u32]) {
    let _ = visit_expressions(stmt, |e| {
        if let Expr::Cast {
            expr, data_type, ..
        } = e
        {
            if let Expr::Value(ValueWithSpan {
                value: SqlValue::Placeholder(p),
                ..
            }) = expr.as_ref()
            {
                let slot = param_number(p).and_then(|n| types.get_mut(n.wrapping_sub(1)));
                if let Some(slot) = slot.filter(|s| **s == 0) {
                    if is_oid_array_type(data_type) {
                        *slot = pgtypes::oid::OID_ARRAY;
                    } else if matches!(data_type, SqlType::Custom(name, _)
                        if last_ident(name).as_deref() == Some("oid"))
                    {
                        *slot = pgtypes::oid::OID;
                    }
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `$n` -> n when the expression is a placeholder with n in `1..=MAX_PARAMS`.
pub fn placeholder_index(e: &Expr) -> Option<usize> {
    match e {
        Expr::Value(ValueWithSpan {
            value: SqlValue::Placeholder(p),
            ..
        }) => param_number(p),
        Expr::Cast { expr, .. } => placeholder_index(expr),
        Expr::Nested(inner) => placeholder_index(inner),
        _ => None,
    }
}

/// The CTE names in scope while a visitor walks a statement, innermost
/// query last: a CTE comes before any relation of its name, as in
/// PostgreSQL (the name resolvers of `temp_tables`, `schemas` and
/// `search_path` keep one).
#[derive(Debug, Default)]
pub struct CteScopes(Vec<Vec<String>>);

impl CteScopes {
    /// Entering query `q` (its WITH names come into scope).
    pub fn enter(&mut self, q: &datafusion::sql::sqlparser::ast::Query) {
        self.0.push(query_cte_names(q));
    }

    /// Leaving the innermost query.
    pub fn leave(&mut self) {
        self.0.pop();
    }

    /// Whether `name` is a CTE in scope.
    pub fn contains(&self, name: &str) -> bool {
        self.0.iter().flatten().any(|c| c == name)
    }
}

/// The names of the CTEs `q`'s own WITH defines (not those of queries
/// inside it), as PostgreSQL folds them.
pub fn query_cte_names(q: &datafusion::sql::sqlparser::ast::Query) -> Vec<String> {
    q.with
        .as_ref()
        .map(|w| {
            w.cte_tables
                .iter()
                .map(|c| ident_name(&c.alias.name))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pgtypes::oid;

    #[test]
    fn array_keyword_after_a_type_is_brackets() {
        let printed = |sql: &str| parse_statement(sql).map(|s| s.to_string());
        assert_eq!(
            printed("CREATE TABLE t (a int ARRAY, b text ARRAY NOT NULL)").unwrap(),
            printed("CREATE TABLE t (a int[], b text[] NOT NULL)").unwrap()
        );
        // constructors stay constructors
        assert_eq!(
            printed("SELECT ARRAY[1], ARRAY(SELECT 1)").unwrap(),
            "SELECT ARRAY[1], ARRAY(SELECT 1)"
        );
        // only after a type name
        assert!(!printed("SELECT ARRAY").is_ok_and(|s| s.contains("[]")));
        assert!(!printed("SELECT x FROM t ARRAY").is_ok_and(|s| s.contains("[]")));
    }

    #[test]
    fn an_operator_construct_before_any_is_its_comparison() {
        let printed = |sql: &str| parse_statement(sql).map(|s| s.to_string());
        assert_eq!(
            printed("SELECT 1 WHERE c.relkind OPERATOR(pg_catalog.=) ANY (array['r', 'v'])")
                .unwrap(),
            "SELECT 1 WHERE c.relkind = ANY(ARRAY['r', 'v'])"
        );
        assert_eq!(
            printed(
                "SELECT 1 WHERE x OPERATOR(<>) ALL (array[1]) AND y OPERATOR(pg_catalog.~) 'a'"
            )
            .unwrap(),
            "SELECT 1 WHERE x <> ALL(ARRAY[1]) AND y OPERATOR(pg_catalog.~) 'a'"
        );
        // another schema's operator is not PostgreSQL's comparison
        assert!(parse_statement("SELECT 1 WHERE x OPERATOR(myschema.=) ANY (array[1])").is_err());
    }

    #[test]
    fn only_is_the_table_itself() {
        let printed = |sql: &str| parse_statement(sql).map(|s| s.to_string());
        assert_eq!(
            printed("SELECT a FROM ONLY public.t JOIN ONLY u ON true").unwrap(),
            "SELECT a FROM public.t JOIN u ON true"
        );
        assert_eq!(
            printed("UPDATE ONLY t SET a = 1").unwrap(),
            "UPDATE t SET a = 1"
        );
        assert_eq!(printed("DELETE FROM ONLY t").unwrap(), "DELETE FROM t");
        // where the parser takes ONLY, it stays
        assert!(printed("ALTER TABLE ONLY t ADD CONSTRAINT c CHECK (a > 0)")
            .unwrap()
            .contains("ONLY"));
    }

    #[test]
    fn splits_statements_outside_quotes() {
        let v = split_statements("select ';'; select $$a;b$$ ; -- c;\n select 1;");
        assert_eq!(v, vec!["select ';'", "select $$a;b$$", "-- c;\n select 1"]);
        assert_eq!(split_statements(" ; ;"), Vec::<String>::new());
        // comments alone are no statement (pg_restore sends a dump's header)
        assert_eq!(
            split_statements("--\n-- PostgreSQL database dump\n--\n\n"),
            Vec::<String>::new()
        );
        assert_eq!(split_statements("/* c */ ; -- d"), Vec::<String>::new());
        assert_eq!(
            split_statements("/* c */ SELECT 1; -- d"),
            vec!["/* c */ SELECT 1"]
        );
        assert!(!is_only_comments("SELECT 1 -- c"));
        assert!(!is_only_comments("'unterminated"));
        assert_eq!(split_statements("select $1"), vec!["select $1"]);
    }

    #[test]
    fn rewrites_psql_idioms() {
        let mut s = parse_statement(
            "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) '^(t)$' COLLATE pg_catalog.default AND c.oid = 't'::regclass",
        )
        .unwrap();
        pg_compat(&mut s, &|_| None);
        let text = s.to_string();
        assert!(text.contains("c.relname ~ '^(t)$'"), "{text}");
        assert!(text.contains("eddy_regclass('t')"), "{text}");
    }

    #[test]
    fn catalog_array_subqueries_become_null_arrays_and_user_ones_stay() {
        let rewritten = |sql: &str| {
            let mut s = parse_statement(sql).unwrap();
            pg_compat(&mut s, &|_| None);
            s.to_string()
        };
        // psql's TOAST options: a table function qualified with pg_catalog
        let toast = rewritten(
            "SELECT array_to_string(array(SELECT 'toast.' || x FROM pg_catalog.unnest(tc.reloptions) x), ', ') FROM pg_catalog.pg_class c",
        );
        assert!(toast.contains("NULL::TEXT[]"), "{toast}");
        // a catalog relation nested in a join inside the subquery
        let publications = rewritten(
            "SELECT ARRAY(SELECT p.pubname FROM pg_catalog.pg_publication p JOIN pg_catalog.pg_publication_rel pr ON (p.oid = pr.prpubid) WHERE pr.prrelid = c.oid) FROM pg_catalog.pg_class c",
        );
        assert!(publications.contains("NULL::TEXT[]"), "{publications}");
        // role memberships exist (psql's `\du`): aggregated, not NULL
        let member_of = rewritten(
            "SELECT ARRAY(SELECT b.rolname FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles b ON (m.roleid = b.oid) WHERE m.member = r.oid) FROM pg_catalog.pg_roles r",
        );
        assert!(
            member_of.contains("eddy_array_or_empty((SELECT array_agg(b.rolname)"),
            "{member_of}"
        );
        // a user's subquery is an aggregate of its rows
        // (`crate::array_subquery`), even one that mentions pg_catalog in
        // a string (the old check matched the printed text)
        let user = rewritten("SELECT ARRAY(SELECT 'pg_catalog.x' FROM t) FROM u");
        assert!(
            user.contains("eddy_array_or_empty((SELECT array_agg('pg_catalog.x') FROM t))"),
            "{user}"
        );
    }

    #[test]
    fn rewrites_psql_describe_subqueries() {
        let mut s = parse_statement(
            "SELECT a.attname, (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef), \
             (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation, \
             pg_catalog.array_to_string(c.reloptions || array(select 'toast.' || x from pg_catalog.unnest(tc.reloptions) x), ', ') \
             FROM pg_catalog.pg_attribute a",
        )
        .unwrap();
        pg_compat(&mut s, &|_| None);
        let text = s.to_string();
        assert!(text.contains("CASE WHEN a.atthasdef THEN (SELECT max(pg_get_expr(d.adbin, d.adrelid, true)) AS value"), "{text}");
        assert!(text.contains("NULL AS attcollation"), "{text}");
        assert!(
            text.contains("array_to_string(c.reloptions || NULL"),
            "{text}"
        );
    }

    #[test]
    fn copy_boolean_options_accept_on_off_and_keep_quoted_text() {
        assert_eq!(
            normalize_copy_options("copy t from stdin with (freeze on, DELIMITER ',', header OFF)")
                .as_deref(),
            Some("copy t from stdin with (freeze true, DELIMITER ',', header false)")
        );
        assert_eq!(
            normalize_copy_options("COPY t FROM STDIN (FORMAT csv, DELIMITER ',')"),
            None
        );
        assert_eq!(normalize_copy_options("select 'freeze on'"), None);
    }

    #[test]
    fn substitutes_parameters() {
        let mut s = parse_statement("SELECT * FROM t WHERE a = $1 AND b = $2").unwrap();
        assert_eq!(count_params(&mut s), 2);
        substitute_params(&mut s, &[Value::BigInt(5), Value::Text("x'y".into())]).unwrap();
        assert_eq!(
            s.to_string(),
            "SELECT * FROM t WHERE a = CAST(5 AS BIGINT) AND b = 'x''y'"
        );
        let mut s = parse_statement("SELECT $3").unwrap();
        assert_eq!(
            substitute_params(&mut s, &[]).unwrap_err().sqlstate(),
            "42P02"
        );
    }

    #[test]
    fn sql_prepare_takes_no_parameters_of_its_own() {
        // Before: the extended protocol's Parse of this PREPARE described
        // three parameters, and its Execute with none failed (08P01).
        let mut s = parse_statement("PREPARE ins (int, text) AS INSERT INTO t VALUES ($1, $2, $3)")
            .unwrap();
        assert_eq!(count_params(&mut s), 0);
        let mut s = parse_statement("EXECUTE ins ($1, 'a', $2)").unwrap();
        assert_eq!(count_params(&mut s), 2);
    }

    fn compat(sql: &str) -> String {
        let mut s = parse_statement(sql).unwrap();
        pg_compat(&mut s, &|_| None);
        s.to_string()
    }

    #[test]
    fn numeric_literals_keep_their_digits_and_scale() {
        assert_eq!(
            compat("INSERT INTO t VALUES (1, 12345.6789, 1.50, -1.005, 1e3, 7)"),
            "INSERT INTO t VALUES (1, CAST('12345.6789' AS DECIMAL(9,4)), \
             CAST('1.50' AS DECIMAL(3,2)), -CAST('1.005' AS DECIMAL(4,3)), \
             CAST('1000' AS DECIMAL(4,0)), 7)"
        );
        assert_eq!(
            compat("SELECT 0.05, 99999999999999999999"),
            "SELECT CAST('0.05' AS DECIMAL(2,2)), CAST('99999999999999999999' AS DECIMAL(20,0))"
        );
        // more digits than a decimal holds: left to DataFusion
        let long = format!("SELECT 1.{}", "1".repeat(40));
        assert_eq!(compat(&long), long);
        // applying the rewrite twice changes nothing more
        let once = compat("SELECT 1.5 + x FROM t");
        assert_eq!(compat(&once), once);
    }

    #[test]
    fn values_columns_mixing_strings_convert_row_by_row() {
        assert_eq!(
            compat("INSERT INTO t VALUES (1, 'NaN', 2.50), (2, 1e3, -1.5), (3, -2, 'x')"),
            "INSERT INTO t VALUES (1, 'NaN', '2.50'), (2, '1000', '-1.5'), (3, '-2', 'x')"
        );
        assert_eq!(
            compat("INSERT INTO t VALUES ('2024-01-01 12:30+02'), ('2024-01-01'::timestamptz)"),
            "INSERT INTO t VALUES (eddy_timestamptz_in_zone('2024-01-01 12:30+02')), \
             (eddy_timestamptz_in_zone('2024-01-01'))"
        );
        // columns of one kind are left to the literal rewrites
        assert_eq!(
            compat("INSERT INTO t VALUES (1, 'a'), (2, 'b')"),
            "INSERT INTO t VALUES (1, 'a'), (2, 'b')"
        );
    }

    #[test]
    fn casts_postgresql_answers_differently() {
        assert_eq!(
            compat(r"SELECT '\x6869'::bytea, 'a\000b'::bytea, BYTEA '\x00'"),
            "SELECT X'6869', X'610062', X'00'"
        );
        // not a valid bytea literal: left alone (DataFusion reports it)
        assert_eq!(compat(r"SELECT '\9'::bytea"), r"SELECT '\9'::BYTEA");
        assert_eq!(
            compat("SELECT '2024-01-01 12:30+02'::timestamptz, ts::timestamptz FROM t"),
            "SELECT eddy_timestamptz_in_zone('2024-01-01 12:30+02'), \
             arrow_cast(CAST(ts AS TIMESTAMP), 'Timestamp(Microsecond, Some(\"+00:00\"))') FROM t"
        );
        assert_eq!(
            compat("SELECT '2024-01-01 12:30+02'::timestamp, TIMESTAMP '2024-01-01 12:30:00'"),
            "SELECT CAST('2024-01-01 12:30:00' AS TIMESTAMP), CAST('2024-01-01 12:30:00' AS TIMESTAMP)"
        );
        assert_eq!(
            compat("SELECT '1.50'::numeric, 1.50::numeric, CAST(' 1e1 ' AS DECIMAL), x::numeric FROM t"),
            "SELECT CAST('1.50' AS DECIMAL(3,2)), CAST('1.50' AS DECIMAL(3,2)), \
             CAST('10' AS DECIMAL(2,0)), eddy_numeric(x) FROM t"
        );
        assert_eq!(
            compat("SELECT 'abcdef'::varchar(3)"),
            "SELECT left(CAST('abcdef' AS TEXT), 3)"
        );
    }

    #[test]
    fn numeric_parameters_bind_as_typed_decimals() {
        let mut s = parse_statement("UPDATE t SET m = m + $1, s = $2 WHERE id = $3").unwrap();
        let params = [
            Value::Text("0.005".into()),
            Value::Text("x".into()),
            Value::Int(1),
        ];
        let types = [oid::NUMERIC, oid::TEXT, oid::INT4];
        assert!(bind_numeric_params(&mut s, &params, &types));
        assert_eq!(
            s.to_string(),
            "UPDATE t SET m = m + CAST('0.005' AS DECIMAL(3,3)), s = $2 WHERE id = $3"
        );
        substitute_params(&mut s, &params).unwrap();
        assert_eq!(
            s.to_string(),
            "UPDATE t SET m = m + CAST('0.005' AS DECIMAL(3,3)), s = 'x' WHERE id = CAST('1' AS INT)"
        );
        let mut s = parse_statement("SELECT $1").unwrap();
        assert!(!bind_numeric_params(&mut s, &[Value::Int(1)], &[oid::INT4]));
    }

    #[test]
    fn parameter_numbers_above_65535_are_refused_before_allocation() {
        // Before: count_params returned 4_000_000_000 and prepare built a
        // Vec of that many parameter types.
        for sql in [
            "SELECT $4000000000",
            "SELECT $65536",
            "SELECT $0",
            "SELECT 1 WHERE $1 = $99999999999999999999999999",
            "INSERT INTO t VALUES ($1, $70000)",
        ] {
            let e = parse_statement(sql).unwrap_err();
            assert_eq!(e.sqlstate(), "42P02", "{sql}: {e}");
        }
        let mut s = parse_statement("SELECT $65535, $1").unwrap();
        assert_eq!(count_params(&mut s), MAX_PARAMS);
        // an AST built without parse_statement still never counts past the limit
        let mut s = Parser::parse_sql(&PostgreSqlDialect {}, "SELECT $4000000000")
            .unwrap()
            .remove(0);
        assert_eq!(count_params(&mut s), 0);
        assert!(check_params(&s).is_err());
        let placeholder = |p: &str| {
            Expr::Value(ValueWithSpan {
                value: SqlValue::Placeholder(p.into()),
                span: Span::empty(),
            })
        };
        assert_eq!(placeholder_index(&placeholder("$4000000000")), None);
        assert_eq!(placeholder_index(&placeholder("$0")), None);
        assert_eq!(placeholder_index(&placeholder("$65535")), Some(65_535));
        // dollar-quoted strings are not placeholders
        assert!(parse_statement("SELECT $$ $4000000000 $$").is_ok());
    }
}
