//! `INSERT ... OVERRIDING SYSTEM VALUE` and `OVERRIDING USER VALUE`, which
//! sqlparser does not read: recognised on the tokens before parsing.
//!
//! The three words are taken out and the `INSERT` word before them is
//! marked: its token's text becomes `INSERT OVERRIDING SYSTEM VALUE` (or
//! `USER`), which no client can write (the tokenizer never makes such a
//! word), while its keyword stays INSERT, so the parser reads the
//! statement as it would without the clause and keeps the token in the
//! INSERT's AST (`Insert::insert_token`, `MergeInsertExpr::insert_token`).
//! [`of_token`] reads the mark back.
//!
//! PostgreSQL's meaning, kept by the INSERT path (`session/defaults.rs`):
//! * SYSTEM VALUE: a value given for a `GENERATED ALWAYS AS IDENTITY`
//!   column is stored (without the clause: 428C9);
//! * USER VALUE: values given for identity columns are ignored and each
//!   row takes the column's next identity value.
//!
//! The fixed-plan path declines a marked INSERT.

use datafusion::sql::sqlparser::keywords::Keyword;

use crate::token_words::{keyword, significant_positions};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// An INSERT's OVERRIDING clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overriding {
    SystemValue,
    UserValue,
}

const SYSTEM_MARK: &str = "INSERT OVERRIDING SYSTEM VALUE";
const USER_MARK: &str = "INSERT OVERRIDING USER VALUE";

/// `OVERRIDING` is no keyword of sqlparser's: an unquoted word.
fn is_overriding(t: &TokenWithSpan) -> bool {
    matches!(&t.token, Token::Word(w) if w.quote_style.is_none()
        && w.value.eq_ignore_ascii_case("overriding"))
}

/// Takes `OVERRIDING SYSTEM|USER VALUE` out of the tokens, marking the
/// INSERT word before each (module doc).
pub fn mark_overriding(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    if !tokens.iter().any(is_overriding) {
        return tokens;
    }
    let words = significant_positions(&tokens);
    let kw = |n: usize| words.get(n).and_then(|&i| tokens.get(i)).and_then(keyword);
    let mut drop = vec![false; tokens.len()];
    // (the INSERT word's position, its mark)
    let mut marks: Vec<(usize, &'static str)> = Vec::new();
    let mut last_insert: Option<usize> = None;
    for n in 0..words.len() {
        let Some(&at) = words.get(n) else { break };
        if kw(n) == Some(Keyword::INSERT) {
            last_insert = Some(at);
            continue;
        }
        if !tokens.get(at).is_some_and(is_overriding) {
            continue;
        }
        let mark = match (kw(n + 1), kw(n + 2)) {
            (Some(Keyword::SYSTEM), Some(Keyword::VALUE)) => SYSTEM_MARK,
            (Some(Keyword::USER), Some(Keyword::VALUE)) => USER_MARK,
            _ => continue,
        };
        let Some(insert) = last_insert.take() else {
            continue;
        };
        marks.push((insert, mark));
        let end = words.get(n + 2).copied().unwrap_or(at);
        for slot in drop.iter_mut().take(end + 1).skip(at) {
            *slot = true;
        }
    }
    let mut tokens = tokens;
    for (insert, mark) in marks {
        if let Some(Token::Word(w)) = tokens.get_mut(insert).map(|t| &mut t.token) {
            w.value = mark.to_string();
        }
    }
    tokens
        .into_iter()
        .zip(drop)
        .filter_map(|(t, d)| (!d).then_some(t))
        .collect()
}

/// The OVERRIDING clause marked on an INSERT's token, if any.
pub fn of_token(token: &TokenWithSpan) -> Option<Overriding> {
    match &token.token {
        Token::Word(w) if w.value == SYSTEM_MARK => Some(Overriding::SystemValue),
        Token::Word(w) if w.value == USER_MARK => Some(Overriding::UserValue),
        _ => None,
    }
}

/// The INSERT word token carrying `overriding` (for an INSERT Eddy builds
/// itself, e.g. MERGE's), made like `like`.
pub fn marked_token(like: &TokenWithSpan, overriding: Overriding) -> TokenWithSpan {
    let mark = match overriding {
        Overriding::SystemValue => SYSTEM_MARK,
        Overriding::UserValue => USER_MARK,
    };
    TokenWithSpan {
        token: Token::Word(datafusion::sql::sqlparser::tokenizer::Word {
            value: mark.to_string(),
            quote_style: None,
            keyword: Keyword::INSERT,
        }),
        span: like.span,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::parse_statement;
    use datafusion::sql::sqlparser::ast::{MergeAction, Statement};

    fn insert_mark(sql: &str) -> Option<Overriding> {
        match parse_statement(sql).unwrap() {
            Statement::Insert(i) => of_token(&i.insert_token.0),
            other => panic!("not an INSERT: {other}"),
        }
    }

    #[test]
    fn the_clause_marks_its_insert() {
        assert_eq!(
            insert_mark("INSERT INTO t (id, v) OVERRIDING SYSTEM VALUE VALUES (1, 'a')"),
            Some(Overriding::SystemValue)
        );
        assert_eq!(
            insert_mark("insert into t overriding user value select * from s"),
            Some(Overriding::UserValue)
        );
        assert_eq!(insert_mark("INSERT INTO t VALUES (1)"), None);
        // a column named overriding is a column
        assert_eq!(insert_mark("INSERT INTO t (overriding) VALUES (1)"), None);
        let Statement::Merge(m) = parse_statement(
            "MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED THEN \
             INSERT (id) OVERRIDING SYSTEM VALUE VALUES (s.id)",
        )
        .unwrap() else {
            panic!("not a MERGE");
        };
        let MergeAction::Insert(ins) = &m.clauses[0].action else {
            panic!("not an INSERT clause");
        };
        assert_eq!(of_token(&ins.insert_token.0), Some(Overriding::SystemValue));
    }
}
