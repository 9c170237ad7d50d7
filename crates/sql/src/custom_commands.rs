//! Statements Eddy reads itself, from the tokens of sqlparser's tokenizer
//! (never by matching text prefixes): Eddy's own `CREATE TABLE GROUP`, and
//! PostgreSQL utility commands sqlparser does not parse or that Eddy
//! answers without planning (VACUUM, ANALYZE, CHECKPOINT, DISCARD,
//! DEALLOCATE, RESET, CLOSE).
//!
//! LISTEN, UNLISTEN and NOTIFY are not here: sqlparser parses them
//! (`Statement::LISTEN` ...) and `session/listen.rs` runs them. `CLOSE
//! ALL` closes the session's SQL cursors; `CLOSE name` of a cursor that
//! does not exist is 34000, as in PostgreSQL.

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::{Result, SqlError};

/// A recognised command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CustomCommand {
    /// `VACUUM [FULL|FREEZE|VERBOSE|ANALYZE ...] [table]`: a full compaction.
    Vacuum {
        table: Option<String>,
    },
    Analyze,
    Checkpoint,
    /// `DISCARD ALL | PLANS | SEQUENCES | TEMP`: the word, upper-cased.
    Discard(String),
    /// `DEALLOCATE [PREPARE] name`, or `ALL` (`None`).
    Deallocate(Option<String>),
    /// `RESET name`, or `RESET ALL` (`None`).
    Reset(Option<String>),
    /// `CREATE TABLE GROUP name [WITH (shard_count = n)]`.
    CreateTableGroup {
        name: String,
        shard_count: Option<u32>,
    },
    CloseAll,
    /// `CLOSE name`.
    Close(String),
    /// `GRANT role [, ...] TO role [, ...]` (`revoke`: `REVOKE role [, ...]
    /// FROM role [, ...]`): role membership, which sqlparser does not parse.
    GrantRole {
        roles: Vec<String>,
        members: Vec<String>,
        revoke: bool,
    },
    /// `SET CONSTRAINTS {ALL | name [, ...]} {DEFERRED | IMMEDIATE}`
    /// (`names`: `None` for ALL).
    SetConstraints {
        names: Option<Vec<String>>,
        deferred: bool,
    },
    /// `FETCH` (rows) or `MOVE` (`is_move`: the position only).
    Fetch {
        cursor: String,
        direction: FetchDirection,
        is_move: bool,
    },
    /// `ALTER SEQUENCE`, or an identity added to a column
    /// (`crate::sequence_parse`).
    Alter(Box<crate::sequence_parse::AlterCommand>),
}

/// Where a FETCH or MOVE goes, in PostgreSQL's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchDirection {
    /// `n` rows forward (`NEXT` is 1, `FORWARD`/no direction is 1).
    Forward(u64),
    ForwardAll,
    Backward(u64),
    BackwardAll,
    Absolute(i64),
    Relative(i64),
}

/// One meaningful token: a word (keyword or identifier, with its quoting)
/// or any other token.
#[derive(Debug)]
enum Tok {
    Word {
        keyword: Keyword,
        /// The identifier as PostgreSQL folds it (lower case unless quoted).
        name: String,
        quoted: bool,
    },
    Other(Token),
}

fn tokens(sql: &str) -> Option<Vec<Tok>> {
    let toks = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    Some(
        toks.into_iter()
            .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon | Token::EOF))
            .map(|t| match t {
                Token::Word(w) => Tok::Word {
                    keyword: w.keyword,
                    quoted: w.quote_style.is_some(),
                    name: if w.quote_style.is_some() {
                        w.value
                    } else {
                        w.value.to_lowercase()
                    },
                },
                other => Tok::Other(other),
            })
            .collect(),
    )
}

fn keyword(t: Option<&Tok>) -> Option<Keyword> {
    match t {
        Some(Tok::Word { keyword, .. }) => Some(*keyword),
        _ => None,
    }
}

fn name(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Word { name, .. }) => Some(name),
        _ => None,
    }
}

/// The command `sql` is, if it is one of these; `Err` for one of them
/// written wrongly.
pub fn recognise(sql: &str) -> Result<Option<CustomCommand>> {
    let Some(t) = tokens(sql) else {
        return Ok(None);
    };
    let Some(first) = keyword(t.first()) else {
        return Ok(None);
    };
    if let Some(Tok::Word { quoted: true, .. }) = t.first() {
        return Ok(None);
    }
    if first == Keyword::ALTER {
        return crate::sequence_parse::parse_alter(sql)
            .map(|c| c.map(|c| CustomCommand::Alter(Box::new(c))))
            .map_err(|e| SqlError::Syntax(e.to_string()));
    }
    let cmd = match first {
        Keyword::VACUUM => {
            let table = t
                .iter()
                .skip(1)
                .filter(|w| {
                    !matches!(
                        keyword(Some(w)),
                        Some(Keyword::ANALYZE | Keyword::FULL | Keyword::VERBOSE | Keyword::FREEZE)
                    )
                })
                .find_map(|w| name(Some(w)))
                .map(str::to_string);
            CustomCommand::Vacuum { table }
        }
        Keyword::ANALYZE => CustomCommand::Analyze,
        // not sqlparser keywords: known by their (unquoted, folded) names
        _ if name(t.first()) == Some("analyse") => CustomCommand::Analyze,
        _ if name(t.first()) == Some("checkpoint") && t.len() == 1 => CustomCommand::Checkpoint,
        Keyword::DISCARD => {
            CustomCommand::Discard(name(t.get(1)).map(str::to_uppercase).ok_or_else(|| {
                SqlError::Syntax("DISCARD needs ALL, PLANS, SEQUENCES or TEMP".into())
            })?)
        }
        Keyword::DEALLOCATE => {
            let i = if keyword(t.get(1)) == Some(Keyword::PREPARE) {
                2
            } else {
                1
            };
            match (t.get(i), t.len() == i + 1) {
                (Some(w), true) if keyword(Some(w)) == Some(Keyword::ALL) => {
                    CustomCommand::Deallocate(None)
                }
                (Some(w), true) if name(Some(w)).is_some() => {
                    CustomCommand::Deallocate(name(Some(w)).map(str::to_string))
                }
                _ => {
                    return Err(SqlError::Syntax(
                        "expected DEALLOCATE [PREPARE] name | ALL".into(),
                    ))
                }
            }
        }
        Keyword::RESET => match (t.get(1), t.len()) {
            (Some(w), 2) if keyword(Some(w)) == Some(Keyword::ALL) => CustomCommand::Reset(None),
            (Some(w), 2) => CustomCommand::Reset(name(Some(w)).map(str::to_string)),
            // `RESET eddy.query_memory_limit`: a dotted custom name
            (Some(Tok::Word { name: prefix, .. }), 4)
                if matches!(t.get(2), Some(Tok::Other(Token::Period))) =>
            {
                match name(t.get(3)) {
                    Some(n) => CustomCommand::Reset(Some(format!("{prefix}.{n}"))),
                    None => {
                        return Err(SqlError::Syntax(
                            "RESET needs one setting name or ALL".into(),
                        ))
                    }
                }
            }
            _ => {
                return Err(SqlError::Syntax(
                    "RESET needs one setting name or ALL".into(),
                ))
            }
        },
        Keyword::GRANT | Keyword::REVOKE
            if !t.iter().any(|w| keyword(Some(w)) == Some(Keyword::ON)) =>
        {
            grant_role(&t, first == Keyword::REVOKE)?
        }
        Keyword::FETCH => fetch(&t, false)?,
        _ if name(t.first()) == Some("move") => fetch(&t, true)?,
        Keyword::SET if name(t.get(1)) == Some("constraints") && !is_assignment(&t) => {
            set_constraints(&t)?
        }
        Keyword::CLOSE => match (t.get(1), t.len()) {
            (Some(w), 2) if keyword(Some(w)) == Some(Keyword::ALL) => CustomCommand::CloseAll,
            (Some(w), 2) => CustomCommand::Close(name(Some(w)).unwrap_or_default().to_string()),
            _ => return Err(SqlError::Syntax("CLOSE needs a cursor name or ALL".into())),
        },
        Keyword::CREATE
            if keyword(t.get(1)) == Some(Keyword::TABLE)
                && keyword(t.get(2)) == Some(Keyword::GROUP)
                && name(t.get(3)).is_some()
                && !matches!(t.get(4), Some(Tok::Other(Token::LParen))) =>
        {
            create_table_group(&t)?
        }
        _ => return Ok(None),
    };
    Ok(Some(cmd))
}

/// `SET constraints = ...` / `SET constraints TO ...` would set a
/// parameter of that name: not the command.
fn is_assignment(t: &[Tok]) -> bool {
    matches!(t.get(2), Some(Tok::Other(Token::Eq))) || keyword(t.get(2)) == Some(Keyword::TO)
}

/// `SET CONSTRAINTS {ALL | name [, ...]} {DEFERRED | IMMEDIATE}`; a
/// schema-qualified name is refused (Eddy has one schema).
fn set_constraints(t: &[Tok]) -> Result<CustomCommand> {
    let syntax = || {
        SqlError::Syntax(
            "expected SET CONSTRAINTS {ALL | name [, ...]} {DEFERRED | IMMEDIATE}".into(),
        )
    };
    let deferred = match t.last().and_then(|w| name(Some(w))) {
        Some("deferred") if t.len() > 3 => true,
        Some("immediate") if t.len() > 3 => false,
        _ => return Err(syntax()),
    };
    let list = &t[2..t.len() - 1];
    if let [only] = list {
        if keyword(Some(only)) == Some(Keyword::ALL) {
            return Ok(CustomCommand::SetConstraints {
                names: None,
                deferred,
            });
        }
    }
    let mut names = Vec::new();
    for (k, w) in list.iter().enumerate() {
        match (k % 2, w) {
            (0, Tok::Word { name, .. }) => names.push(name.clone()),
            (1, Tok::Other(Token::Comma)) => {}
            (1, Tok::Other(Token::Period)) => {
                return Err(SqlError::FeatureNotSupported(
                    "SET CONSTRAINTS with a schema-qualified name is not supported".into(),
                ))
            }
            _ => return Err(syntax()),
        }
    }
    if names.is_empty() || list.len().is_multiple_of(2) {
        return Err(syntax());
    }
    Ok(CustomCommand::SetConstraints {
        names: Some(names),
        deferred,
    })
}

/// `GRANT a, b TO c, d` / `REVOKE a, b FROM c, d` (a GRANT without ON
/// grants roles). Options (`WITH ADMIN OPTION`, `GRANTED BY`, `ADMIN
/// OPTION FOR`, `CASCADE`) are refused.
fn grant_role(t: &[Tok], revoke: bool) -> Result<CustomCommand> {
    let (what, sep) = if revoke {
        ("REVOKE", Keyword::FROM)
    } else {
        ("GRANT", Keyword::TO)
    };
    let list = |from: usize, stop: Option<Keyword>| -> Result<(Vec<String>, usize)> {
        let mut names = Vec::new();
        let mut i = from;
        loop {
            match t.get(i) {
                Some(w @ Tok::Word { name, .. })
                    if stop.is_none_or(|k| keyword(Some(w)) != Some(k)) =>
                {
                    names.push(name.clone());
                    i += 1;
                }
                _ => break,
            }
            match t.get(i) {
                Some(Tok::Other(Token::Comma)) => i += 1,
                _ => break,
            }
        }
        Ok((names, i))
    };
    let (roles, i) = list(1, Some(sep))?;
    if roles.is_empty() || keyword(t.get(i)) != Some(sep) {
        return Err(SqlError::Syntax(format!(
            "expected {what} role [, ...] {} role [, ...]",
            if revoke { "FROM" } else { "TO" }
        )));
    }
    if roles
        .iter()
        .any(|r| r == "admin" || r == "inherit" || r == "set")
        && revoke
    {
        return Err(SqlError::FeatureNotSupported(
            "REVOKE ... OPTION FOR is not supported".into(),
        ));
    }
    let (members, end) = list(i + 1, None)?;
    if members.is_empty() {
        return Err(SqlError::Syntax(format!("{what} needs a role to act on")));
    }
    if end != t.len() {
        return Err(SqlError::FeatureNotSupported(format!(
            "{what} of a role supports no options (WITH ADMIN OPTION, GRANTED BY, CASCADE)"
        )));
    }
    Ok(CustomCommand::GrantRole {
        roles,
        members,
        revoke,
    })
}

/// A signed count at `t[i]` (`5`, `-1`), and the index after it.
fn count_at(t: &[Tok], i: usize) -> Option<(i64, usize)> {
    match t.get(i) {
        Some(Tok::Other(Token::Number(n, _))) => Some((n.parse().ok()?, i + 1)),
        Some(Tok::Other(Token::Minus)) => match t.get(i + 1) {
            Some(Tok::Other(Token::Number(n, _))) => {
                Some((n.parse::<i64>().ok()?.checked_neg()?, i + 2))
            }
            _ => None,
        },
        Some(Tok::Other(Token::Plus)) => count_at(t, i + 1).filter(|(n, _)| *n >= 0),
        _ => None,
    }
}

/// `{FETCH|MOVE} [direction] [FROM|IN] cursor`, PostgreSQL's grammar.
fn fetch(t: &[Tok], is_move: bool) -> Result<CustomCommand> {
    let bad = || {
        SqlError::Syntax(format!(
            "expected {} [direction] [FROM | IN] cursor_name",
            if is_move { "MOVE" } else { "FETCH" }
        ))
    };
    let signed = |n: i64| -> FetchDirection {
        if n >= 0 {
            FetchDirection::Forward(n.unsigned_abs())
        } else {
            FetchDirection::Backward(n.unsigned_abs())
        }
    };
    let mut i = 1;
    let direction = match keyword(t.get(i)) {
        Some(Keyword::NEXT) => {
            i += 1;
            FetchDirection::Forward(1)
        }
        Some(Keyword::PRIOR) => {
            i += 1;
            FetchDirection::Backward(1)
        }
        Some(Keyword::FIRST) => {
            i += 1;
            FetchDirection::Absolute(1)
        }
        Some(Keyword::LAST) => {
            i += 1;
            FetchDirection::Absolute(-1)
        }
        Some(Keyword::ALL) => {
            i += 1;
            FetchDirection::ForwardAll
        }
        Some(k @ (Keyword::ABSOLUTE | Keyword::RELATIVE)) => {
            let (n, next) = count_at(t, i + 1).ok_or_else(bad)?;
            i = next;
            if k == Keyword::ABSOLUTE {
                FetchDirection::Absolute(n)
            } else {
                FetchDirection::Relative(n)
            }
        }
        Some(k @ (Keyword::FORWARD | Keyword::BACKWARD)) => {
            let forward = k == Keyword::FORWARD;
            i += 1;
            if keyword(t.get(i)) == Some(Keyword::ALL) {
                i += 1;
                if forward {
                    FetchDirection::ForwardAll
                } else {
                    FetchDirection::BackwardAll
                }
            } else if let Some((n, next)) = count_at(t, i) {
                i = next;
                if forward {
                    signed(n)
                } else {
                    signed(n.checked_neg().ok_or_else(bad)?)
                }
            } else if forward {
                FetchDirection::Forward(1)
            } else {
                FetchDirection::Backward(1)
            }
        }
        _ => match count_at(t, i) {
            Some((n, next)) => {
                i = next;
                signed(n)
            }
            None => FetchDirection::Forward(1),
        },
    };
    if matches!(keyword(t.get(i)), Some(Keyword::FROM | Keyword::IN)) {
        i += 1;
    }
    let cursor = name(t.get(i)).ok_or_else(bad)?.to_string();
    if t.len() != i + 1 {
        return Err(bad());
    }
    Ok(CustomCommand::Fetch {
        cursor,
        direction,
        is_move,
    })
}

/// `CREATE TABLE GROUP name [WITH (shard_count = n)]` (tokens 0..3 checked).
fn create_table_group(t: &[Tok]) -> Result<CustomCommand> {
    let group = name(t.get(3))
        .ok_or_else(|| SqlError::Syntax("CREATE TABLE GROUP needs a name".into()))?
        .to_string();
    let rest = t.get(4..).unwrap_or_default();
    if rest.is_empty() {
        return Ok(CustomCommand::CreateTableGroup {
            name: group,
            shard_count: None,
        });
    }
    let bad_shards =
        || SqlError::InvalidParameter("shard_count must be an integer between 1 and 1024".into());
    match rest {
        [Tok::Word {
            keyword: Keyword::WITH,
            ..
        }, Tok::Other(Token::LParen), Tok::Word { name: option, .. }, Tok::Other(Token::Eq), value, Tok::Other(Token::RParen)]
            if option == "shard_count" =>
        {
            let n = match value {
                Tok::Other(Token::Number(n, _)) => n.parse::<u32>().ok(),
                Tok::Other(Token::SingleQuotedString(s)) => s.parse::<u32>().ok(),
                _ => None,
            }
            .filter(|n| (1..=1024).contains(n))
            .ok_or_else(bad_shards)?;
            Ok(CustomCommand::CreateTableGroup {
                name: group,
                shard_count: Some(n),
            })
        }
        [Tok::Word {
            keyword: Keyword::WITH,
            ..
        }, Tok::Other(Token::LParen), Tok::Word { name: option, .. }, ..] => Err(
            SqlError::InvalidParameter(format!("unknown table group option \"{option}\"")),
        ),
        _ => Err(SqlError::Syntax(
            "expected CREATE TABLE GROUP name [WITH (shard_count = n)]".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognised_by_tokens_not_prefixes() {
        // a table named `groups` is a table, not a table group
        assert_eq!(recognise("CREATE TABLE groups (id int)").unwrap(), None);
        assert_eq!(recognise("create table group_x (id int)").unwrap(), None);
        assert_eq!(recognise("SELECT * FROM resetting").unwrap(), None);
        assert_eq!(recognise("resetx").unwrap(), None);
        assert_eq!(
            recognise("CREATE TABLE GROUP g1 WITH (shard_count = 2)").unwrap(),
            Some(CustomCommand::CreateTableGroup {
                name: "g1".into(),
                shard_count: Some(2)
            })
        );
        assert_eq!(
            recognise("create table group \"G\"").unwrap(),
            Some(CustomCommand::CreateTableGroup {
                name: "G".into(),
                shard_count: None
            })
        );
        assert_eq!(
            recognise("CREATE TABLE GROUP g WITH (shard_count = 0)")
                .unwrap_err()
                .sqlstate(),
            "22023"
        );
        assert_eq!(
            recognise("-- pool reset\nRESET ALL;").unwrap(),
            Some(CustomCommand::Reset(None))
        );
        assert_eq!(
            recognise("reset statement_timeout").unwrap(),
            Some(CustomCommand::Reset(Some("statement_timeout".into())))
        );
        assert_eq!(recognise("UNLISTEN *").unwrap(), None, "sqlparser's");
        assert_eq!(
            recognise("close all").unwrap(),
            Some(CustomCommand::CloseAll)
        );
        assert_eq!(
            recognise("close c1").unwrap(),
            Some(CustomCommand::Close("c1".into()))
        );
        let f = |sql: &str| match recognise(sql).unwrap() {
            Some(CustomCommand::Fetch {
                cursor,
                direction,
                is_move,
            }) => (cursor, direction, is_move),
            other => panic!("{sql}: {other:?}"),
        };
        use FetchDirection as D;
        assert_eq!(
            f("FETCH FORWARD 2000 FROM \"c\""),
            ("c".into(), D::Forward(2000), false)
        );
        assert_eq!(f("fetch c"), ("c".into(), D::Forward(1), false));
        assert_eq!(f("fetch next in c"), ("c".into(), D::Forward(1), false));
        assert_eq!(f("FETCH -2 c"), ("c".into(), D::Backward(2), false));
        assert_eq!(
            f("fetch backward 3 from c"),
            ("c".into(), D::Backward(3), false)
        );
        assert_eq!(
            f("fetch backward from c"),
            ("c".into(), D::Backward(1), false)
        );
        assert_eq!(
            f("fetch absolute -1 from c"),
            ("c".into(), D::Absolute(-1), false)
        );
        assert_eq!(f("fetch last from c"), ("c".into(), D::Absolute(-1), false));
        assert_eq!(f("fetch all from c"), ("c".into(), D::ForwardAll, false));
        assert_eq!(
            f("MOVE FORWARD 5 FROM c"),
            ("c".into(), D::Forward(5), true)
        );
        assert_eq!(
            f("move relative 0 in c"),
            ("c".into(), D::Relative(0), true)
        );
        assert!(recognise("fetch from").is_err());
        assert!(recognise("fetch 1 from c extra").is_err());
        assert_eq!(
            recognise("vacuum full t").unwrap(),
            Some(CustomCommand::Vacuum {
                table: Some("t".into())
            })
        );
    }
}
