//! `FOR NO KEY UPDATE` and `FOR KEY SHARE`, PostgreSQL's weaker row locks,
//! which sqlparser does not read: recognised on the tokens before parsing
//! and taken as `FOR UPDATE` and `FOR SHARE`.
//!
//! Eddy's row locks have two strengths, exclusive (FOR UPDATE, and every
//! writer) and shared (FOR SHARE). PostgreSQL's FOR NO KEY UPDATE
//! conflicts with FOR SHARE, FOR NO KEY UPDATE, FOR UPDATE and every
//! writer of the row; the exclusive lock conflicts with all of those too,
//! and also with FOR KEY SHARE. FOR KEY SHARE conflicts with FOR UPDATE
//! and with writers that change or delete the key; the shared lock
//! conflicts with those and with every other writer too. So each is taken
//! as a lock at least as strong: every conflict PostgreSQL has is kept
//! (no write it keeps out gets in), and a few more waits happen where
//! PostgreSQL would not wait (a non-key UPDATE behind FOR KEY SHARE, FOR
//! NO KEY UPDATE behind FOR KEY SHARE). SKIP LOCKED and NOWAIT act on
//! those stronger conflicts.

use datafusion::sql::sqlparser::keywords::Keyword;

use crate::token_words::{keyword, significant, significant_positions};
use datafusion::sql::sqlparser::tokenizer::TokenWithSpan;

/// `FOR NO KEY UPDATE` as `FOR UPDATE`, `FOR KEY SHARE` as `FOR SHARE`.
pub fn stronger_lock_clauses(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    if !tokens.iter().any(|t| keyword(t) == Some(Keyword::KEY)) {
        return tokens;
    }
    // the significant tokens' positions
    let words = significant_positions(&tokens);
    let kw = |n: usize| words.get(n).and_then(|&i| tokens.get(i)).and_then(keyword);
    let mut drop = vec![false; tokens.len()];
    for n in 0..words.len() {
        if kw(n) != Some(Keyword::FOR) {
            continue;
        }
        // the words to drop, by position among the significant tokens
        let dropped: &[usize] = match (kw(n + 1), kw(n + 2), kw(n + 3)) {
            (Some(Keyword::NO), Some(Keyword::KEY), Some(Keyword::UPDATE)) => &[1, 2],
            (Some(Keyword::KEY), Some(Keyword::SHARE), _) => &[1],
            _ => continue,
        };
        for d in dropped {
            let Some(&at) = words.get(n + d) else {
                continue;
            };
            // the word and the whitespace after it
            let mut i = at;
            while let Some(slot) = drop.get_mut(i) {
                if i != at && tokens.get(i).is_some_and(significant) {
                    break;
                }
                *slot = true;
                i += 1;
            }
        }
    }
    tokens
        .into_iter()
        .zip(drop)
        .filter_map(|(t, d)| (!d).then_some(t))
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::rewrite::parse_statement;

    #[test]
    fn weaker_locks_are_taken_as_the_stronger_ones() {
        for (sql, shown) in [
            (
                "SELECT * FROM t WHERE id = 1 FOR NO KEY UPDATE",
                "SELECT * FROM t WHERE id = 1 FOR UPDATE",
            ),
            (
                "select * from t for key share of t nowait",
                "SELECT * FROM t FOR SHARE OF t NOWAIT",
            ),
            (
                "SELECT * FROM t FOR NO KEY UPDATE SKIP LOCKED",
                "SELECT * FROM t FOR UPDATE SKIP LOCKED",
            ),
            // quoted words are names, not keywords
            (
                "SELECT \"key\" FROM t FOR UPDATE",
                "SELECT \"key\" FROM t FOR UPDATE",
            ),
        ] {
            assert_eq!(parse_statement(sql).unwrap().to_string(), shown, "{sql}");
        }
    }
}
