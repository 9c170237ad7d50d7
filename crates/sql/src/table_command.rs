//! `TABLE name`: SQL's short form of `SELECT * FROM name`, which psql users
//! type (`TABLE t;`).
//!
//! sqlparser reads the form badly: it takes the three tokens after `TABLE`
//! whatever they are (so `TABLE t LIMIT 5` would lose its LIMIT), drops the
//! quoting of the name, and DataFusion does not plan it. So the form is
//! recognised on the tokens, before parsing: a statement that is only
//! `TABLE name` or `TABLE schema.name` becomes `SELECT * FROM name`, and is
//! then planned, privilege-checked and rewritten as any SELECT. `TABLE`
//! anywhere else in a query (`TABLE t ORDER BY a`, `TABLE a UNION TABLE b`,
//! after WITH) is refused with 0A000 after parsing ([`refuse_table_queries`]),
//! never run without its clauses.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Query, SetExpr, Statement, Visit, Visitor};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace};

use crate::error::{Result, SqlError};

fn significant(t: &TokenWithSpan) -> bool {
    !matches!(t.token, Token::Whitespace(_))
}

/// `TABLE name [;]` as `SELECT * FROM name [;]`; any other token list is
/// returned as it is.
pub fn table_as_select(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let words: Vec<&Token> = tokens
        .iter()
        .filter(|t| significant(t))
        .map(|t| &t.token)
        .collect();
    let body = match words.as_slice() {
        [rest @ .., Token::SemiColon] => rest,
        all => all,
    };
    let is_name = |t: &Token| matches!(t, Token::Word(_));
    let simple = match body {
        [Token::Word(w), name] => {
            w.keyword == Keyword::TABLE && w.quote_style.is_none() && is_name(name)
        }
        [Token::Word(w), schema, Token::Period, name] => {
            w.keyword == Keyword::TABLE
                && w.quote_style.is_none()
                && is_name(schema)
                && is_name(name)
        }
        _ => false,
    };
    if !simple {
        return tokens;
    }
    let mut out = Vec::with_capacity(tokens.len() + 4);
    let mut replaced = false;
    for t in tokens {
        if !replaced && significant(&t) {
            replaced = true;
            let span = t.span;
            for token in [
                Token::make_keyword("SELECT"),
                Token::Whitespace(Whitespace::Space),
                Token::Mul,
                Token::Whitespace(Whitespace::Space),
                Token::make_keyword("FROM"),
            ] {
                out.push(TokenWithSpan::new(token, span));
            }
            continue;
        }
        out.push(t);
    }
    out
}

/// 0A000 for a `TABLE` form left in the statement (module doc).
pub fn refuse_table_queries(stmt: &Statement) -> Result<()> {
    match stmt.visit(&mut TableQueries) {
        ControlFlow::Break(()) => Err(SqlError::FeatureNotSupported(
            "TABLE is supported only as a whole statement (TABLE name); write SELECT * FROM name"
                .into(),
        )),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct TableQueries;

fn has_table(body: &SetExpr) -> bool {
    match body {
        SetExpr::Table(_) => true,
        SetExpr::SetOperation { left, right, .. } => has_table(left) || has_table(right),
        SetExpr::Query(q) => has_table(&q.body),
        _ => false,
    }
}

impl Visitor for TableQueries {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if has_table(&query.body) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(sql: &str) -> Result<String> {
        crate::rewrite::parse_statement(sql).map(|s| s.to_string())
    }

    #[test]
    fn a_whole_table_statement_is_a_select() {
        assert_eq!(run("TABLE t").ok().as_deref(), Some("SELECT * FROM t"));
        assert_eq!(
            run("table public.t;").ok().as_deref(),
            Some("SELECT * FROM public.t")
        );
        assert_eq!(
            run("TABLE \"Mixed\"").ok().as_deref(),
            Some("SELECT * FROM \"Mixed\"")
        );
        // a table called "table" is still a table
        assert_eq!(
            run("SELECT * FROM \"table\"").ok().as_deref(),
            Some("SELECT * FROM \"table\"")
        );
    }

    #[test]
    fn table_with_more_clauses_is_refused() {
        for sql in [
            "TABLE t LIMIT 1",
            "TABLE t ORDER BY a",
            "SELECT * FROM (TABLE t) AS x",
            "SELECT 1 UNION TABLE t",
            "WITH x AS (SELECT 1) TABLE x",
        ] {
            match run(sql) {
                Ok(s) => panic!("{sql} accepted as {s}"),
                Err(e) => assert!(matches!(e.sqlstate(), "0A000" | "42601"), "{sql}: {e}"),
            }
        }
    }
}
