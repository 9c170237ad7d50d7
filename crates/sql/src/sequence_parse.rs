//! `CREATE SEQUENCE`, `ALTER SEQUENCE` and `ALTER TABLE ... ADD GENERATED
//! ... AS IDENTITY` parsed from their tokens with PostgreSQL's grammar.
//!
//! sqlparser accepts the options only in one fixed order (INCREMENT,
//! MINVALUE, MAXVALUE, START, CACHE, CYCLE), where PostgreSQL takes them
//! in any order (`CREATE SEQUENCE s START 10 INCREMENT BY 5` is a syntax
//! error to sqlparser). This parser reads the same statement with sqlparser's
//! own token-level API and builds sqlparser's `Statement::CreateSequence`,
//! so everything after parsing is unchanged. sqlparser has no ALTER
//! SEQUENCE at all, nor an identity's `SEQUENCE NAME` (which pg_dump
//! writes): those become [`AlterCommand`]s, run as Eddy's own commands
//! (`crate::custom_commands`).

use datafusion::sql::sqlparser::ast::{
    DataType, Expr, Ident, ObjectName, Owner, SequenceOptions, Statement,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
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

/// What a list of sequence options said (`CREATE SEQUENCE`, `ALTER
/// SEQUENCE`, an identity column's parenthesised options).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedOptions {
    pub data_type: Option<DataType>,
    pub options: Vec<SequenceOptions>,
    /// `OWNED BY t.c` (`Some(Some(..))`) or `OWNED BY NONE` (`Some(None)`).
    pub owned_by: Option<Option<ObjectName>>,
    /// `SEQUENCE NAME n` (identity columns only).
    pub sequence_name: Option<ObjectName>,
    /// `RESTART [[WITH] n]` (`ALTER SEQUENCE` only): `Some(None)` restarts
    /// at the start value.
    pub restart: Option<Option<Expr>>,
}

/// Which options a statement takes beyond the common ones.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OptionsOf {
    Create,
    Alter,
    Identity,
}

/// Reads options in any order, each at most once, until a token that
/// starts none.
fn parse_options(p: &mut Parser, of: OptionsOf) -> Result<ParsedOptions, ParserError> {
    let mut out = ParsedOptions::default();
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
        if of != OptionsOf::Identity && p.parse_keyword(Keyword::AS) {
            once("AS", p)?;
            out.data_type = Some(p.parse_data_type()?);
        } else if p.parse_keyword(Keyword::INCREMENT) {
            once("INCREMENT", p)?;
            let by = p.parse_keyword(Keyword::BY);
            out.options
                .push(SequenceOptions::IncrementBy(p.parse_number()?, by));
        } else if p.parse_keyword(Keyword::MINVALUE) {
            once("MINVALUE", p)?;
            out.options
                .push(SequenceOptions::MinValue(Some(p.parse_number()?)));
        } else if p.parse_keyword(Keyword::MAXVALUE) {
            once("MAXVALUE", p)?;
            out.options
                .push(SequenceOptions::MaxValue(Some(p.parse_number()?)));
        } else if p.parse_keywords(&[Keyword::NO, Keyword::MINVALUE]) {
            once("MINVALUE", p)?;
            out.options.push(SequenceOptions::MinValue(None));
        } else if p.parse_keywords(&[Keyword::NO, Keyword::MAXVALUE]) {
            once("MAXVALUE", p)?;
            out.options.push(SequenceOptions::MaxValue(None));
        } else if p.parse_keywords(&[Keyword::NO, Keyword::CYCLE]) {
            once("CYCLE", p)?;
            // sqlparser's flag is "NO": Cycle(true) is NO CYCLE
            out.options.push(SequenceOptions::Cycle(true));
        } else if p.parse_keyword(Keyword::CYCLE) {
            once("CYCLE", p)?;
            out.options.push(SequenceOptions::Cycle(false));
        } else if p.parse_keyword(Keyword::START) {
            once("START", p)?;
            let with = p.parse_keyword(Keyword::WITH);
            out.options
                .push(SequenceOptions::StartWith(p.parse_number()?, with));
        } else if p.parse_keyword(Keyword::CACHE) {
            once("CACHE", p)?;
            out.options.push(SequenceOptions::Cache(p.parse_number()?));
        } else if of == OptionsOf::Alter && p.parse_keyword(Keyword::RESTART) {
            once("RESTART", p)?;
            let with = p.parse_keyword(Keyword::WITH);
            out.restart = Some(if with || starts_number(p) {
                Some(p.parse_number()?)
            } else {
                None
            });
        } else if of != OptionsOf::Identity && p.parse_keywords(&[Keyword::OWNED, Keyword::BY]) {
            once("OWNED BY", p)?;
            out.owned_by = Some(if p.parse_keyword(Keyword::NONE) {
                None
            } else {
                Some(p.parse_object_name(false)?)
            });
        } else if of == OptionsOf::Identity && p.parse_keywords(&[Keyword::SEQUENCE, Keyword::NAME])
        {
            once("SEQUENCE NAME", p)?;
            out.sequence_name = Some(p.parse_object_name(false)?);
        } else {
            break;
        }
    }
    Ok(out)
}

fn starts_number(p: &Parser) -> bool {
    matches!(
        p.peek_token().token,
        Token::Number(..) | Token::Minus | Token::Plus
    )
}

/// A trailing `;` is the statement's end; anything else is an error.
fn expect_end(p: &mut Parser) -> Result<(), ParserError> {
    while p.consume_token(&Token::SemiColon) {}
    if p.peek_token().token != Token::EOF {
        return p.expected("end of statement", p.peek_token());
    }
    Ok(())
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
    let parsed = parse_options(p, OptionsOf::Create)?;
    expect_end(p)?;
    Ok(Statement::CreateSequence {
        temporary,
        if_not_exists,
        name,
        data_type: parsed.data_type,
        sequence_options: parsed.options,
        // OWNED BY NONE is the default
        owned_by: parsed.owned_by.flatten(),
    })
}

/// `ALTER SEQUENCE [IF EXISTS] name ...`, which sqlparser does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterSequence {
    pub if_exists: bool,
    pub name: ObjectName,
    pub action: AlterSequenceAction,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterSequenceAction {
    /// Options, `RESTART` and `OWNED BY`, as many as written.
    Options(Box<ParsedOptions>),
    OwnerTo(Owner),
    RenameTo(ObjectName),
    SetSchema(ObjectName),
}

/// `ALTER TABLE [IF EXISTS] [ONLY] t ALTER [COLUMN] c ADD GENERATED
/// {ALWAYS | BY DEFAULT} AS IDENTITY [(options)]`, as pg_dump writes it
/// (with `SEQUENCE NAME`, which sqlparser does not parse).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddIdentity {
    pub if_exists: bool,
    pub table: ObjectName,
    pub column: Ident,
    pub always: bool,
    pub options: Box<ParsedOptions>,
}

/// `ALTER VIEW [IF EXISTS] name ...`, which sqlparser does not parse (it
/// reads only `ALTER VIEW name AS query`, not PostgreSQL's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterView {
    pub if_exists: bool,
    pub name: ObjectName,
    pub action: AlterViewAction,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterViewAction {
    RenameTo(Ident),
    RenameColumn {
        from: Ident,
        to: Ident,
    },
    OwnerTo(Owner),
    /// An action PostgreSQL has and Eddy refuses (0A000): its words.
    Unsupported(String),
}

/// The statements of an `ALTER` Eddy reads itself: `Ok(None)` for any
/// other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterCommand {
    Sequence(AlterSequence),
    AddIdentity(AddIdentity),
    View(AlterView),
}

/// Reads `sql` as ALTER SEQUENCE or ALTER TABLE ... ADD GENERATED ... AS
/// IDENTITY; `Ok(None)` when it is neither.
pub fn parse_alter(sql: &str) -> Result<Option<AlterCommand>, ParserError> {
    let dialect = PostgreSqlDialect {};
    let mut p = Parser::new(&dialect).try_with_sql(sql)?;
    if !p.parse_keyword(Keyword::ALTER) {
        return Ok(None);
    }
    if p.parse_keyword(Keyword::SEQUENCE) {
        return alter_sequence(&mut p).map(|a| Some(AlterCommand::Sequence(a)));
    }
    if p.parse_keyword(Keyword::VIEW) {
        return alter_view(&mut p).map(|a| a.map(AlterCommand::View));
    }
    if !p.parse_keyword(Keyword::TABLE) {
        return Ok(None);
    }
    let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let _only = p.parse_keyword(Keyword::ONLY);
    let Ok(table) = p.parse_object_name(false) else {
        return Ok(None);
    };
    let _descendants = p.consume_token(&Token::Mul);
    if !p.parse_keyword(Keyword::ALTER) {
        return Ok(None);
    }
    let _ = p.parse_keyword(Keyword::COLUMN);
    let Ok(column) = p.parse_identifier() else {
        return Ok(None);
    };
    if !p.parse_keywords(&[Keyword::ADD, Keyword::GENERATED]) {
        return Ok(None);
    }
    let always = if p.parse_keyword(Keyword::ALWAYS) {
        true
    } else {
        p.expect_keywords(&[Keyword::BY, Keyword::DEFAULT])?;
        false
    };
    p.expect_keywords(&[Keyword::AS, Keyword::IDENTITY])?;
    let options = if p.consume_token(&Token::LParen) {
        let o = parse_options(&mut p, OptionsOf::Identity)?;
        p.expect_token(&Token::RParen)?;
        Box::new(o)
    } else {
        Box::default()
    };
    expect_end(&mut p)?;
    Ok(Some(AlterCommand::AddIdentity(AddIdentity {
        if_exists,
        table,
        column,
        always,
        options,
    })))
}

/// The role after `OWNER TO`.
fn parse_owner(p: &mut Parser) -> Result<Owner, ParserError> {
    Ok(if p.parse_keyword(Keyword::CURRENT_ROLE) {
        Owner::CurrentRole
    } else if p.parse_keyword(Keyword::CURRENT_USER) {
        Owner::CurrentUser
    } else if p.parse_keyword(Keyword::SESSION_USER) {
        Owner::SessionUser
    } else {
        Owner::Ident(p.parse_identifier()?)
    })
}

/// `ALTER VIEW [IF EXISTS] name RENAME TO new | RENAME [COLUMN] a TO b |
/// OWNER TO role`; PostgreSQL's other actions (`SET`, `RESET`, `ALTER
/// [COLUMN]`) to be refused; `None` for anything else (sqlparser's `AS`).
fn alter_view(p: &mut Parser) -> Result<Option<AlterView>, ParserError> {
    let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = p.parse_object_name(false)?;
    let action = if p.parse_keywords(&[Keyword::RENAME, Keyword::TO]) {
        AlterViewAction::RenameTo(p.parse_identifier()?)
    } else if p.parse_keyword(Keyword::RENAME) {
        let _ = p.parse_keyword(Keyword::COLUMN);
        let from = p.parse_identifier()?;
        p.expect_keyword_is(Keyword::TO)?;
        AlterViewAction::RenameColumn {
            from,
            to: p.parse_identifier()?,
        }
    } else if p.parse_keywords(&[Keyword::OWNER, Keyword::TO]) {
        AlterViewAction::OwnerTo(parse_owner(p)?)
    } else if let Some(k) = p.parse_one_of_keywords(&[Keyword::SET, Keyword::RESET, Keyword::ALTER])
    {
        // named by its first two words; the rest is not read
        let next = p.next_token();
        let words = format!("{k:?} {next}").to_uppercase();
        return Ok(Some(AlterView {
            if_exists,
            name,
            action: AlterViewAction::Unsupported(words),
        }));
    } else {
        return Ok(None);
    };
    expect_end(p)?;
    Ok(Some(AlterView {
        if_exists,
        name,
        action,
    }))
}

fn alter_sequence(p: &mut Parser) -> Result<AlterSequence, ParserError> {
    let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = p.parse_object_name(false)?;
    let action = if p.parse_keywords(&[Keyword::OWNER, Keyword::TO]) {
        AlterSequenceAction::OwnerTo(parse_owner(p)?)
    } else if p.parse_keywords(&[Keyword::RENAME, Keyword::TO]) {
        AlterSequenceAction::RenameTo(p.parse_object_name(false)?)
    } else if p.parse_keywords(&[Keyword::SET, Keyword::SCHEMA]) {
        AlterSequenceAction::SetSchema(p.parse_object_name(false)?)
    } else {
        let parsed = parse_options(p, OptionsOf::Alter)?;
        if parsed.data_type.is_none()
            && parsed.options.is_empty()
            && parsed.owned_by.is_none()
            && parsed.restart.is_none()
        {
            return p.expected("a sequence option", p.peek_token());
        }
        AlterSequenceAction::Options(Box::new(parsed))
    };
    expect_end(p)?;
    Ok(AlterSequence {
        if_exists,
        name,
        action,
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

    #[test]
    fn alter_sequence_and_identity_as_pg_dump_writes_them() {
        let Some(AlterCommand::Sequence(a)) =
            parse_alter("ALTER SEQUENCE public.s OWNED BY public.t.id;").unwrap()
        else {
            panic!("not ALTER SEQUENCE")
        };
        let AlterSequenceAction::Options(o) = a.action else {
            panic!("{a:?}")
        };
        assert_eq!(o.owned_by.unwrap().unwrap().to_string(), "public.t.id");
        let Some(AlterCommand::Sequence(a)) =
            parse_alter("alter sequence if exists s owned by none").unwrap()
        else {
            panic!("not ALTER SEQUENCE")
        };
        assert!(a.if_exists);
        assert!(matches!(a.action, AlterSequenceAction::Options(o) if o.owned_by == Some(None)));
        let Some(AlterCommand::Sequence(a)) = parse_alter("ALTER SEQUENCE s RESTART").unwrap()
        else {
            panic!("not ALTER SEQUENCE")
        };
        assert!(matches!(a.action, AlterSequenceAction::Options(o) if o.restart == Some(None)));
        assert!(parse_alter("ALTER SEQUENCE s RESTART WITH 5 RESTART").is_err());
        assert!(parse_alter("ALTER SEQUENCE s").is_err());
        assert!(matches!(
            parse_alter("ALTER SEQUENCE s OWNER TO CURRENT_USER").unwrap(),
            Some(AlterCommand::Sequence(AlterSequence {
                action: AlterSequenceAction::OwnerTo(Owner::CurrentUser),
                ..
            }))
        ));

        let Some(AlterCommand::AddIdentity(a)) = parse_alter(
            "ALTER TABLE public.orders ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
                SEQUENCE NAME public.orders_id_seq START WITH 1 INCREMENT BY 1
                NO MINVALUE NO MAXVALUE CACHE 1);",
        )
        .unwrap() else {
            panic!("not ADD IDENTITY")
        };
        assert!(!a.always);
        assert_eq!(a.table.to_string(), "public.orders");
        assert_eq!(
            a.options.sequence_name.as_ref().map(|n| n.to_string()),
            Some("public.orders_id_seq".into())
        );
        assert_eq!(a.options.options.len(), 5);
        assert!(matches!(
            parse_alter("ALTER TABLE ONLY t ALTER c ADD GENERATED ALWAYS AS IDENTITY").unwrap(),
            Some(AlterCommand::AddIdentity(AddIdentity { always: true, .. }))
        ));
        // other ALTERs are sqlparser's
        assert!(parse_alter("ALTER TABLE t ADD COLUMN c int")
            .unwrap()
            .is_none());
        assert!(parse_alter("ALTER TABLE t ALTER COLUMN c SET DEFAULT 1")
            .unwrap()
            .is_none());
        assert!(parse_alter("ALTER ROLE r LOGIN").unwrap().is_none());
    }
}
