//! `CREATE SEQUENCE` parsed from its tokens with PostgreSQL's grammar.
//!
//! sqlparser accepts the options only in one fixed order (INCREMENT,
//! MINVALUE, MAXVALUE, START, CACHE, CYCLE), where PostgreSQL takes them
//! in any order (`CREATE SEQUENCE s START 10 INCREMENT BY 5` is a syntax
//! error to sqlparser). This parser reads the same statement with sqlparser's
//! own token-level API and builds sqlparser's `Statement::CreateSequence`,
//! so everything after parsing is unchanged.

use datafusion::sql::sqlparser::ast::{SequenceOptions, Statement};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// Whether the tokens start `CREATE [TEMP|TEMPORARY] SEQUENCE`.
pub fn is_create_sequence(tokens: &[TokenWithSpan]) -> bool {
    let mut words = tokens.iter().filter_map(|t| match &t.token {
        Token::Whitespace(_) => None,
        Token::Word(w) => Some(Some(w.keyword)),
        _ => Some(None),
    });
    if words.next() != Some(Some(Keyword::CREATE)) {
        return false;
    }
    match words.next() {
        Some(Some(Keyword::TEMP | Keyword::TEMPORARY)) => {
            words.next() == Some(Some(Keyword::SEQUENCE))
        }
        Some(Some(Keyword::SEQUENCE)) => true,
        _ => false,
    }
}

/// Parses `CREATE [TEMP] SEQUENCE [IF NOT EXISTS] name [AS type] options...
/// [OWNED BY t.c | NONE]`, options in any order, each at most once.
pub fn parse_create_sequence(p: &mut Parser) -> Result<Statement, ParserError> {
    p.expect_keyword_is(Keyword::CREATE)?;
    let temporary = p
        .parse_one_of_keywords(&[Keyword::TEMP, Keyword::TEMPORARY])
        .is_some();
    p.expect_keyword_is(Keyword::SEQUENCE)?;
    let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = p.parse_object_name(false)?;
    let mut data_type = None;
    let mut options: Vec<SequenceOptions> = Vec::new();
    let mut owned_by = None;
    let mut seen: Vec<&'static str> = Vec::new();
    let mut once = |what: &'static str, p: &Parser| -> Result<(), ParserError> {
        if seen.contains(&what) {
            return Err(ParserError::ParserError(format!(
                "conflicting or redundant options: {what} at {}",
                p.peek_token().span.start
            )));
        }
        seen.push(what);
        Ok(())
    };
    loop {
        if p.parse_keyword(Keyword::AS) {
            once("AS", p)?;
            data_type = Some(p.parse_data_type()?);
        } else if p.parse_keyword(Keyword::INCREMENT) {
            once("INCREMENT", p)?;
            let by = p.parse_keyword(Keyword::BY);
            options.push(SequenceOptions::IncrementBy(p.parse_number()?, by));
        } else if p.parse_keyword(Keyword::MINVALUE) {
            once("MINVALUE", p)?;
            options.push(SequenceOptions::MinValue(Some(p.parse_number()?)));
        } else if p.parse_keyword(Keyword::MAXVALUE) {
            once("MAXVALUE", p)?;
            options.push(SequenceOptions::MaxValue(Some(p.parse_number()?)));
        } else if p.parse_keywords(&[Keyword::NO, Keyword::MINVALUE]) {
            once("MINVALUE", p)?;
            options.push(SequenceOptions::MinValue(None));
        } else if p.parse_keywords(&[Keyword::NO, Keyword::MAXVALUE]) {
            once("MAXVALUE", p)?;
            options.push(SequenceOptions::MaxValue(None));
        } else if p.parse_keywords(&[Keyword::NO, Keyword::CYCLE]) {
            once("CYCLE", p)?;
            // sqlparser's flag is "NO": Cycle(true) is NO CYCLE
            options.push(SequenceOptions::Cycle(true));
        } else if p.parse_keyword(Keyword::CYCLE) {
            once("CYCLE", p)?;
            options.push(SequenceOptions::Cycle(false));
        } else if p.parse_keyword(Keyword::START) {
            once("START", p)?;
            let with = p.parse_keyword(Keyword::WITH);
            options.push(SequenceOptions::StartWith(p.parse_number()?, with));
        } else if p.parse_keyword(Keyword::CACHE) {
            once("CACHE", p)?;
            options.push(SequenceOptions::Cache(p.parse_number()?));
        } else if p.parse_keywords(&[Keyword::OWNED, Keyword::BY]) {
            once("OWNED BY", p)?;
            owned_by = Some(p.parse_object_name(false)?);
        } else {
            break;
        }
    }
    // a trailing `;` is the statement's end
    while p.consume_token(&Token::SemiColon) {}
    if p.peek_token().token != Token::EOF {
        return p.expected("end of statement", p.peek_token());
    }
    Ok(Statement::CreateSequence {
        temporary,
        if_not_exists,
        name,
        data_type,
        sequence_options: options,
        owned_by,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::parse_statement;

    #[test]
    fn options_in_any_order() {
        let s = parse_statement("CREATE SEQUENCE s START 10 INCREMENT BY 5 NO CYCLE").unwrap();
        let Statement::CreateSequence {
            sequence_options, ..
        } = s
        else {
            panic!("{s:?}")
        };
        assert_eq!(sequence_options.len(), 3);
        assert!(matches!(sequence_options[2], SequenceOptions::Cycle(true)));
        assert!(parse_statement("create sequence s cache 1 cache 2").is_err());
        assert!(parse_statement("create sequence s start").is_err());
        assert!(
            parse_statement("create sequence if not exists a.s as integer owned by t.c").is_ok()
        );
        assert!(parse_statement("create sequence s bogus").is_err());
    }
}
