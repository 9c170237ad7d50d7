//! What the token passes before parsing (`lock_strengths`, `merge`,
//! `overriding`) read tokens by: a token's keyword and the positions of
//! the significant (non-whitespace) tokens, so each pass matches word
//! sequences whatever the spacing and comments between them.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// The keyword of an unquoted word (`NoKeyword` for other words); `None`
/// for anything else.
pub fn keyword(t: &TokenWithSpan) -> Option<Keyword> {
    match &t.token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    }
}

/// Whether `t` is more than whitespace (comments are whitespace tokens).
pub fn significant(t: &TokenWithSpan) -> bool {
    !matches!(t.token, Token::Whitespace(_))
}

/// The positions of `tokens`' significant tokens, in order.
pub fn significant_positions(tokens: &[TokenWithSpan]) -> Vec<usize> {
    tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| significant(t))
        .map(|(i, _)| i)
        .collect()
}
