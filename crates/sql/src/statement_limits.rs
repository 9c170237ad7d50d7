//! Statements too deep to plan are refused before anything recurses over
//! them. A left-deep chain such as `1+1+...+1` or `a=0 OR a=1 OR ...` with
//! a few thousand terms is a syntax tree thousands of levels deep, and the
//! parser's consumers (Eddy's rewrites, DataFusion's planner, even dropping
//! the tree) recurse once per level: at about 500 levels the 2 MiB stack of
//! a runtime worker overflowed and the whole server aborted. PostgreSQL
//! answers 54001 ("stack depth limit exceeded"); so does Eddy, from a
//! conservative estimate taken on the tokens, and the server's threads have
//! stacks large enough for everything under the limit
//! (`STACK_BYTES_PER_LEVEL` times the limit, see the server's runtime).
//!
//! The estimate: operators are counted per comma-separated item at each
//! parenthesis level (a clause keyword starts a new item), and the depth
//! of a point is the sum of the counts of its enclosing levels plus their
//! number. A flat list (`IN (1, 2, ...)`, many VALUES rows) stays shallow.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::error::{Result, SqlError};

/// The deepest expression Eddy plans. Planning time grows with the square
/// of the depth in DataFusion (a 1,000-term integer sum plans in about a
/// second in a debug build, a fifth of that in release), so the limit
/// keeps planning, which cannot be interrupted, short.
pub const MAX_EXPRESSION_DEPTH: usize = 1_000;

/// Stack a planning thread is given per level of expression depth, for
/// sizing the server's thread stacks: measured, a 2 MiB stack held about
/// 450 levels in a debug build (4.5 KiB a level), so this leaves a margin
/// of more than three.
pub const STACK_BYTES_PER_LEVEL: usize = 16 << 10;

/// Refuses (54001) a statement whose expressions nest deeper than
/// [`MAX_EXPRESSION_DEPTH`].
pub fn check_depth(tokens: &[TokenWithSpan]) -> Result<()> {
    let mut levels: Vec<usize> = vec![0];
    let mut enclosing = 0usize; // sum of the counts of the enclosing levels
                                // `x::a::b::...` nests one cast per `::` (a 2,000-cast chain overflowed
                                // a worker's stack before casts were counted); a cast between two
                                // operators adds one level at its leaf only, so a run of casts counts
                                // until the next operator, comma, parenthesis or clause.
    let mut cast_run = 0usize;
    for t in tokens {
        if matches!(t.token, Token::DoubleColon) {
            cast_run = cast_run.saturating_add(1);
        } else if !matches!(t.token, Token::Word(_) | Token::Whitespace(_)) || is_operator(&t.token)
        {
            cast_run = 0;
        }
        match &t.token {
            Token::LParen | Token::LBracket => {
                let current = levels.last().copied().unwrap_or(0);
                enclosing = enclosing.saturating_add(current);
                levels.push(0);
            }
            Token::RParen | Token::RBracket if levels.len() > 1 => {
                levels.pop();
                let parent = levels.last().copied().unwrap_or(0);
                enclosing = enclosing.saturating_sub(parent);
            }
            Token::Comma | Token::SemiColon => {
                if let Some(c) = levels.last_mut() {
                    *c = 0;
                }
            }
            Token::Word(w) if starts_item(w.keyword) => {
                if let Some(c) = levels.last_mut() {
                    *c = 0;
                }
            }
            token if is_operator(token) => {
                if let Some(c) = levels.last_mut() {
                    *c = c.saturating_add(1);
                }
            }
            _ => {}
        }
        let here = levels.last().copied().unwrap_or(0);
        let depth = enclosing
            .saturating_add(here)
            .saturating_add(cast_run)
            .saturating_add(levels.len());
        if depth > MAX_EXPRESSION_DEPTH {
            return Err(SqlError::StatementTooDeep(format!(
                "stack depth limit exceeded: an expression nests deeper than {MAX_EXPRESSION_DEPTH} \
                 levels; use IN (...) or = ANY($1) instead of long OR chains, or split the statement"
            )));
        }
    }
    Ok(())
}

fn starts_item(k: Keyword) -> bool {
    matches!(
        k,
        Keyword::SELECT
            | Keyword::FROM
            | Keyword::WHERE
            | Keyword::HAVING
            | Keyword::GROUP
            | Keyword::ORDER
            | Keyword::LIMIT
            | Keyword::VALUES
            | Keyword::SET
            | Keyword::WHEN
            | Keyword::THEN
            | Keyword::ELSE
            | Keyword::UNION
            | Keyword::JOIN
            | Keyword::ON
    )
}

fn is_operator(t: &Token) -> bool {
    match t {
        Token::Word(w) => matches!(
            w.keyword,
            Keyword::AND
                | Keyword::OR
                | Keyword::NOT
                | Keyword::IS
                | Keyword::LIKE
                | Keyword::ILIKE
        ),
        Token::Whitespace(_)
        | Token::Number(..)
        | Token::Char(_)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::EscapedStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::NationalStringLiteral(_)
        | Token::Placeholder(_)
        | Token::Period
        | Token::Colon
        | Token::DoubleColon
        | Token::EOF => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    fn check(sql: &str) -> Result<()> {
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        check_depth(&tokens)
    }

    #[test]
    fn cast_chains_count_one_level_per_cast() {
        let chain = format!("SELECT 1{}", "::int8::int4".repeat(1000));
        assert!(matches!(check(&chain), Err(SqlError::StatementTooDeep(_))));
        let flat: Vec<String> = (0..3000).map(|i| format!("'{i}'::int4")).collect();
        assert!(check(&format!("SELECT {}", flat.join(", "))).is_ok());
    }

    #[test]
    fn deep_chains_are_refused_flat_lists_are_not() {
        let chain = format!("SELECT {}", vec!["1"; 1100].join(" + "));
        assert_eq!(check(&chain).unwrap_err().sqlstate(), "54001");
        let ors = format!(
            "SELECT * FROM t WHERE {}",
            (0..600)
                .map(|i| format!("id = {i}"))
                .collect::<Vec<_>>()
                .join(" OR ")
        );
        assert_eq!(check(&ors).unwrap_err().sqlstate(), "54001");
        let list = format!(
            "SELECT * FROM t WHERE id IN ({})",
            (0..50_000)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(check(&list).is_ok());
        let values = format!(
            "INSERT INTO t VALUES {}",
            (0..20_000)
                .map(|i| format!("({i}, -{i}, 'x' || 'y')"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(check(&values).is_ok());
        assert!(check(&format!("SELECT {}", vec!["1::int8"; 900].join(" + "))).is_ok());
    }
}
