//! `CREATE USER` and `ALTER USER` as PostgreSQL means them: sqlparser
//! parses these words in Snowflake's grammar, while in PostgreSQL they are
//! `CREATE ROLE ... LOGIN` and `ALTER ROLE`. The `USER` keyword token is
//! exchanged for `ROLE` and sqlparser's role grammar reads the rest
//! (tokens, never text).

use datafusion::sql::sqlparser::ast::Statement;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Word};

/// The index of `USER` in `CREATE USER` / `ALTER USER`, if `tokens` start
/// so; and whether it is CREATE.
fn user_keyword(tokens: &[TokenWithSpan]) -> Option<(usize, bool)> {
    let mut words = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_)));
    let create = match words.next()?.1.token {
        Token::Word(Word {
            keyword: Keyword::CREATE,
            ..
        }) => true,
        Token::Word(Word {
            keyword: Keyword::ALTER,
            ..
        }) => false,
        _ => return None,
    };
    match words.next()? {
        (
            i,
            TokenWithSpan {
                token:
                    Token::Word(Word {
                        keyword: Keyword::USER,
                        quote_style: None,
                        ..
                    }),
                ..
            },
        ) => Some((i, create)),
        _ => None,
    }
}

/// `Some` for `CREATE USER` / `ALTER USER`: parsed as the role statement,
/// CREATE USER logging in unless it says NOLOGIN.
pub fn parse_user_statement(
    mut tokens: Vec<TokenWithSpan>,
) -> Result<std::result::Result<Statement, Vec<TokenWithSpan>>, ParserError> {
    let Some((i, create)) = user_keyword(&tokens) else {
        return Ok(Err(tokens));
    };
    if let Some(t) = tokens.get_mut(i) {
        t.token = Token::make_keyword("ROLE");
    }
    let mut stmts = Parser::new(&PostgreSqlDialect {})
        .with_tokens_with_locations(tokens)
        .parse_statements()?;
    let mut stmt = match stmts.len() {
        1 => stmts.remove(0),
        _ => return Err(ParserError::ParserError("expected one statement".into())),
    };
    if let (true, Statement::CreateRole(cr)) = (create, &mut stmt) {
        cr.login = Some(cr.login.unwrap_or(true));
    }
    Ok(Ok(stmt))
}
