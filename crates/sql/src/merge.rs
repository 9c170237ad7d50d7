//! PostgreSQL's MERGE, read on the parser's AST: the clauses checked and
//! put in the shape the session runs (`session/merge.rs`), and the
//! expressions its two scans select.
//!
//! sqlparser reads PostgreSQL 15's MERGE except two forms, which
//! [`merge_tokens`] recognises on the tokens before parsing:
//! * `THEN DO NOTHING`: taken as the action word the clause's kind allows
//!   (`DELETE` after WHEN MATCHED, `INSERT VALUES (DEFAULT)` after WHEN NOT
//!   MATCHED) whose word token reads `DO NOTHING`; a client cannot write
//!   that token (the tokenizer gives `DO NOTHING` no keyword), so
//!   [`read`] tells the two apart on the action's token;
//! * `INSERT DEFAULT VALUES`: taken as `INSERT VALUES (DEFAULT)`, which
//!   PostgreSQL defines to mean the same (every column not given takes its
//!   default).
//!
//! Which clause acts on a row is PostgreSQL's rule: the first WHEN clause
//! of its kind whose condition is true. The scans compute it as `CASE
//! WHEN c1 THEN 1 WHEN c2 THEN 2 ... ELSE 0 END` ([`chosen_clause`]), and
//! each value a clause writes as a CASE over the same conditions
//! ([`chosen_value`]), so a value is computed only for the rows whose
//! clause writes it (an error in another clause's expression is not
//! raised for them).

use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    Assignment, CaseWhen, Expr, Ident, Merge, MergeAction, MergeClauseKind, MergeInsertKind,
    ObjectName, ObjectNamePart, TableFactor, Value,
};
use datafusion::sql::sqlparser::keywords::Keyword;

use crate::token_words::{keyword, significant_positions};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Word};

use crate::error::{Result, SqlError};
use crate::rewrite::ident_name;

/// The text of the action word that stands for `DO NOTHING`.
const DO_NOTHING: &str = "DO NOTHING";

/// What a WHEN MATCHED clause does to its target row.
#[derive(Debug, Clone, PartialEq)]
pub enum MatchedAction {
    Update(Vec<Assignment>),
    Delete,
    Nothing,
}

/// The row a WHEN NOT MATCHED clause inserts: `columns` (the table's
/// columns in order when empty) take `values`.
#[derive(Debug, Clone, PartialEq)]
pub struct InsertValues {
    pub columns: Vec<String>,
    pub values: Vec<Expr>,
    /// `OVERRIDING SYSTEM | USER VALUE` (`crate::overriding`).
    pub overriding: Option<crate::overriding::Overriding>,
}

/// One WHEN clause: its condition (`AND ...`) and its action.
#[derive(Debug, Clone, PartialEq)]
pub struct Clause<A> {
    pub predicate: Option<Expr>,
    pub action: A,
}

/// A MERGE statement as the session runs it.
#[derive(Debug, Clone)]
pub struct MergeStatement {
    /// The target table's name, and the name its rows are known by (the
    /// alias, else the table's name).
    pub target: ObjectName,
    pub target_alias: Option<String>,
    pub source: TableFactor,
    pub on: Expr,
    pub matched: Vec<Clause<MatchedAction>>,
    /// `None`: DO NOTHING.
    pub not_matched: Vec<Clause<Option<InsertValues>>>,
}

impl MergeStatement {
    /// Whether some WHEN MATCHED clause writes (the matched rows need a
    /// scan and locks).
    pub fn writes_matched(&self) -> bool {
        self.matched
            .iter()
            .any(|c| c.action != MatchedAction::Nothing)
    }

    /// Whether some WHEN NOT MATCHED clause inserts.
    pub fn inserts(&self) -> bool {
        self.not_matched.iter().any(|c| c.action.is_some())
    }

    pub fn updates(&self) -> bool {
        self.matched
            .iter()
            .any(|c| matches!(c.action, MatchedAction::Update(_)))
    }

    pub fn deletes(&self) -> bool {
        self.matched
            .iter()
            .any(|c| c.action == MatchedAction::Delete)
    }
}

impl MergeStatement {
    /// PostgreSQL's 42P01 for a WHEN NOT MATCHED clause that names the
    /// target (known as `alias`): there is no target row to read.
    pub fn refuse_target_in_not_matched(&self, alias: &str) -> Result<()> {
        for clause in &self.not_matched {
            let exprs = clause
                .predicate
                .iter()
                .chain(clause.action.iter().flat_map(|a| a.values.iter()));
            for e in exprs {
                let named = datafusion::sql::sqlparser::ast::visit_expressions(e, |x| match x {
                    Expr::CompoundIdentifier(parts)
                        if parts.len() > 1
                            && parts.first().map(ident_name).as_deref() == Some(alias) =>
                    {
                        std::ops::ControlFlow::Break(())
                    }
                    _ => std::ops::ControlFlow::Continue(()),
                });
                if named.is_break() {
                    return Err(SqlError::UndefinedRelation(format!(
                        "invalid reference to FROM-clause entry for table \"{alias}\""
                    )));
                }
            }
        }
        Ok(())
    }
}

fn token_like(t: &TokenWithSpan, token: Token) -> TokenWithSpan {
    TokenWithSpan {
        token,
        span: t.span,
    }
}

fn word(value: &str, keyword: Keyword) -> Token {
    Token::Word(Word {
        value: value.to_string(),
        quote_style: None,
        keyword,
    })
}

/// `DO NOTHING` and `INSERT DEFAULT VALUES` of a MERGE's clauses in forms
/// sqlparser reads (see the module doc); tokens of statements without
/// MERGE are returned as they are.
pub fn merge_tokens(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    // MERGE anywhere (EXPLAIN MERGE, WITH ... MERGE); the patterns below
    // occur in no other statement
    if !tokens.iter().any(|t| keyword(t) == Some(Keyword::MERGE)) {
        return tokens;
    }
    let words = significant_positions(&tokens);
    let kw = |n: usize| words.get(n).and_then(|&i| tokens.get(i)).and_then(keyword);
    // (first token, last token, what stands in their place)
    let mut replaced: Vec<(usize, usize, Vec<Token>)> = Vec::new();
    let mut not_matched = false;
    for n in 0..words.len() {
        let (Some(&at), Some(&end)) = (words.get(n + 1), words.get(n + 2)) else {
            break;
        };
        match (kw(n), kw(n + 1), kw(n + 2)) {
            // a clause's kind (a CASE's WHEN is followed by an expression)
            (Some(Keyword::WHEN), Some(Keyword::MATCHED), _) => not_matched = false,
            (Some(Keyword::WHEN), Some(Keyword::NOT), Some(Keyword::MATCHED)) => not_matched = true,
            (Some(Keyword::THEN), Some(Keyword::DO), Some(Keyword::NOTHING)) => {
                let stand_in = if not_matched {
                    vec![
                        word(DO_NOTHING, Keyword::INSERT),
                        word("VALUES", Keyword::VALUES),
                        Token::LParen,
                        word("DEFAULT", Keyword::DEFAULT),
                        Token::RParen,
                    ]
                } else {
                    vec![word(DO_NOTHING, Keyword::DELETE)]
                };
                replaced.push((at, end, stand_in));
            }
            (Some(Keyword::INSERT), Some(Keyword::DEFAULT), Some(Keyword::VALUES)) => {
                replaced.push((
                    at,
                    end,
                    vec![
                        word("VALUES", Keyword::VALUES),
                        Token::LParen,
                        word("DEFAULT", Keyword::DEFAULT),
                        Token::RParen,
                    ],
                ));
            }
            _ => {}
        }
    }
    if replaced.is_empty() {
        return tokens;
    }
    let mut out = Vec::with_capacity(tokens.len() + 4 * replaced.len());
    let mut next = replaced.into_iter().peekable();
    let mut skip_to = None;
    for (i, t) in tokens.into_iter().enumerate() {
        if let Some(end) = skip_to {
            if i <= end {
                continue;
            }
            skip_to = None;
        }
        match next.peek() {
            Some((start, _, _)) if *start == i => {
                if let Some((_, end, stand_in)) = next.next() {
                    out.extend(stand_in.into_iter().map(|s| token_like(&t, s)));
                    skip_to = Some(end);
                }
            }
            _ => out.push(t),
        }
    }
    out
}

fn do_nothing_token(token: &TokenWithSpan) -> bool {
    matches!(&token.token, Token::Word(w) if w.value == DO_NOTHING)
}

/// Whether a parsed MERGE action is `DO NOTHING` (see the module doc).
pub fn is_do_nothing(action: &MergeAction) -> bool {
    match action {
        MergeAction::Delete { delete_token } => do_nothing_token(&delete_token.0),
        MergeAction::Insert(ins) => do_nothing_token(&ins.insert_token.0),
        MergeAction::Update(_) => false,
    }
}

fn syntax(near: &str) -> SqlError {
    SqlError::SyntaxMessage(format!("syntax error at or near \"{near}\""))
}

/// Checks a parsed MERGE against PostgreSQL 15's rules and reads it.
pub fn read(m: Merge) -> Result<MergeStatement> {
    if m.output.is_some() {
        return Err(SqlError::FeatureNotSupported(
            "MERGE ... RETURNING is not supported (PostgreSQL 17 added it; PostgreSQL 15's \
             MERGE returns no rows)"
                .into(),
        ));
    }
    if !m.optimizer_hints.is_empty() {
        return Err(syntax("/*+"));
    }
    if !m.into {
        return Err(syntax("USING"));
    }
    let (target, target_alias) = match m.table {
        TableFactor::Table {
            name,
            alias,
            args: None,
            with_hints,
            version: None,
            partitions,
            ..
        } if with_hints.is_empty() && partitions.is_empty() => {
            if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
                return Err(syntax("("));
            }
            (name, alias.map(|a| ident_name(&a.name)))
        }
        other => {
            return Err(SqlError::FeatureNotSupported(format!(
                "MERGE INTO {other}: the target must be a table"
            )))
        }
    };
    let mut matched = Vec::new();
    let mut not_matched = Vec::new();
    let mut unconditional = [false, false];
    for clause in m.clauses {
        let kind_slot = match clause.clause_kind {
            MergeClauseKind::Matched => 0,
            MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => 1,
            MergeClauseKind::NotMatchedBySource => {
                return Err(SqlError::FeatureNotSupported(
                    "WHEN NOT MATCHED BY SOURCE is not supported (PostgreSQL 17 added it)".into(),
                ))
            }
        };
        if unconditional.get(kind_slot).copied().unwrap_or(false) {
            return Err(SqlError::SyntaxMessage(
                "unreachable WHEN clause specified after unconditional WHEN clause".into(),
            ));
        }
        if clause.predicate.is_none() {
            if let Some(slot) = unconditional.get_mut(kind_slot) {
                *slot = true;
            }
        }
        let predicate = clause.predicate;
        if is_do_nothing(&clause.action) {
            if kind_slot == 0 {
                matched.push(Clause {
                    predicate,
                    action: MatchedAction::Nothing,
                });
            } else {
                not_matched.push(Clause {
                    predicate,
                    action: None,
                });
            }
            continue;
        }
        match clause.action {
            MergeAction::Delete { .. } => matched.push(Clause {
                predicate,
                action: MatchedAction::Delete,
            }),
            MergeAction::Update(u) => {
                if u.update_predicate.is_some() || u.delete_predicate.is_some() {
                    return Err(syntax(if u.update_predicate.is_some() {
                        "WHERE"
                    } else {
                        "DELETE"
                    }));
                }
                matched.push(Clause {
                    predicate,
                    action: MatchedAction::Update(u.assignments),
                });
            }
            MergeAction::Insert(ins) => {
                if ins.insert_predicate.is_some() {
                    return Err(syntax("WHERE"));
                }
                let MergeInsertKind::Values(v) = ins.kind else {
                    return Err(syntax("ROW"));
                };
                let mut rows = v.rows.into_iter();
                let (Some(row), None) = (rows.next(), rows.next()) else {
                    return Err(syntax(","));
                };
                let columns = ins
                    .columns
                    .iter()
                    .map(|c| match c.0.as_slice() {
                        [ObjectNamePart::Identifier(id)] => Ok(ident_name(id)),
                        _ => Err(syntax(".")),
                    })
                    .collect::<Result<Vec<_>>>()?;
                let overriding = crate::overriding::of_token(&ins.insert_token.0);
                let values = row.content;
                if !columns.is_empty() && values.len() > columns.len() {
                    return Err(SqlError::SyntaxMessage(
                        "INSERT has more expressions than target columns".into(),
                    ));
                }
                if !columns.is_empty() && values.len() < columns.len() {
                    return Err(SqlError::SyntaxMessage(
                        "INSERT has more target columns than expressions".into(),
                    ));
                }
                not_matched.push(Clause {
                    predicate,
                    action: Some(InsertValues {
                        columns,
                        values,
                        overriding,
                    }),
                });
            }
        }
    }
    Ok(MergeStatement {
        target,
        target_alias,
        source: m.source,
        on: *m.on,
        matched,
        not_matched,
    })
}

fn condition(predicate: &Option<Expr>) -> Expr {
    predicate
        .clone()
        .unwrap_or_else(|| Expr::value(Value::Boolean(true)))
}

fn case(conditions: Vec<CaseWhen>, else_result: Option<Expr>) -> Expr {
    Expr::Case {
        case_token: AttachedToken::empty(),
        end_token: AttachedToken::empty(),
        operand: None,
        conditions,
        else_result: else_result.map(Box::new),
    }
}

/// `CASE WHEN c1 THEN 1 WHEN c2 THEN 2 ... ELSE 0 END`: the number of the
/// clause (from 1) that acts on a row, 0 for none.
pub fn chosen_clause<A>(clauses: &[Clause<A>]) -> Expr {
    let conditions = clauses
        .iter()
        .enumerate()
        .map(|(i, c)| CaseWhen {
            condition: condition(&c.predicate),
            result: Expr::value(Value::Number((i + 1).to_string(), false)),
        })
        .collect();
    case(
        conditions,
        Some(Expr::value(Value::Number("0".into(), false))),
    )
}

/// `CASE WHEN c1 THEN v1 WHEN c2 THEN v2 ... ELSE otherwise END`, where
/// `value(i)` is what clause `i` gives (`None`: `otherwise`).
pub fn chosen_value<A>(
    clauses: &[Clause<A>],
    value: impl Fn(usize, &Clause<A>) -> Option<Expr>,
    otherwise: Expr,
) -> Expr {
    let conditions = clauses
        .iter()
        .enumerate()
        .map(|(i, c)| CaseWhen {
            condition: condition(&c.predicate),
            result: value(i, c).unwrap_or_else(|| otherwise.clone()),
        })
        .collect();
    case(conditions, Some(otherwise))
}

/// A NULL literal.
pub fn null() -> Expr {
    Expr::value(Value::Null)
}

/// An identifier quoted as given.
pub fn quoted(name: &str) -> Ident {
    Ident::with_quote('"', name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::parse_statement;
    use datafusion::sql::sqlparser::ast::Statement;

    fn merge(sql: &str) -> Result<MergeStatement> {
        match parse_statement(sql)? {
            Statement::Merge(m) => read(m),
            other => panic!("not a MERGE: {other}"),
        }
    }

    #[test]
    fn do_nothing_is_read_for_both_kinds() {
        let m = merge(
            "MERGE INTO t USING s ON t.id = s.id \
             WHEN MATCHED AND s.x > 1 THEN DO NOTHING \
             WHEN MATCHED THEN DELETE \
             WHEN NOT MATCHED AND s.x IS NULL THEN DO NOTHING \
             WHEN NOT MATCHED THEN INSERT DEFAULT VALUES",
        )
        .unwrap();
        assert_eq!(m.matched.len(), 2);
        assert_eq!(m.matched[0].action, MatchedAction::Nothing);
        assert_eq!(m.matched[1].action, MatchedAction::Delete);
        assert_eq!(m.not_matched[0].action, None);
        let Some(ins) = &m.not_matched[1].action else {
            panic!("DEFAULT VALUES read as DO NOTHING");
        };
        assert!(ins.columns.is_empty());
        assert_eq!(ins.values.len(), 1);
        assert!(m.deletes() && !m.updates() && m.inserts() && m.writes_matched());
    }

    #[test]
    fn a_column_named_like_the_marker_is_not_taken_for_it() {
        // a quoted "DO NOTHING" is an identifier, never the marker
        let m = merge(
            "MERGE INTO t USING s ON t.id = s.id \
             WHEN MATCHED THEN UPDATE SET \"DO NOTHING\" = 1",
        )
        .unwrap();
        assert!(matches!(m.matched[0].action, MatchedAction::Update(_)));
        // statements other than MERGE keep their tokens
        assert!(parse_statement("SELECT CASE WHEN true THEN 1 END").is_ok());
        // EXPLAIN of a MERGE reads DO NOTHING too
        let Ok(Statement::Explain { statement, .. }) = parse_statement(
            "EXPLAIN MERGE INTO t USING s ON true WHEN NOT MATCHED THEN DO NOTHING",
        ) else {
            panic!("EXPLAIN MERGE ... DO NOTHING not parsed");
        };
        let Statement::Merge(m) = *statement else {
            panic!("not a MERGE");
        };
        assert_eq!(read(m).unwrap().not_matched[0].action, None);
    }

    #[test]
    fn postgresql_15s_rules_are_kept() {
        let code = |sql: &str| merge(sql).err().map(|e| e.sqlstate());
        assert_eq!(
            code("MERGE INTO t USING s ON true WHEN MATCHED THEN DELETE WHEN MATCHED THEN DELETE"),
            Some("42601")
        );
        assert_eq!(
            code("MERGE INTO t USING s ON true WHEN NOT MATCHED BY SOURCE THEN DELETE"),
            Some("0A000")
        );
        assert_eq!(
            code("MERGE INTO t USING s ON true WHEN NOT MATCHED THEN INSERT (a) VALUES (1, 2)"),
            Some("42601")
        );
        assert_eq!(
            code("MERGE INTO t USING s ON true WHEN NOT MATCHED THEN INSERT VALUES (1), (2)"),
            Some("42601")
        );
        assert_eq!(
            code("MERGE INTO t USING s ON true WHEN MATCHED THEN DELETE RETURNING *"),
            Some("0A000")
        );
        assert_eq!(
            code("MERGE t USING s ON true WHEN MATCHED THEN DELETE"),
            Some("42601")
        );
        // a conditional clause may follow a conditional one
        assert_eq!(
            code("MERGE INTO t USING s ON true WHEN MATCHED AND s.a THEN DELETE WHEN MATCHED THEN DELETE"),
            None
        );
    }

    #[test]
    fn the_chosen_clause_is_the_first_whose_condition_holds() {
        let m = merge(
            "MERGE INTO t USING s ON t.id = s.id \
             WHEN MATCHED AND s.x > 1 THEN DELETE WHEN MATCHED THEN UPDATE SET x = s.x",
        )
        .unwrap();
        assert_eq!(
            chosen_clause(&m.matched).to_string(),
            "CASE WHEN s.x > 1 THEN 1 WHEN true THEN 2 ELSE 0 END"
        );
        let v = chosen_value(
            &m.matched,
            |i, _| (i == 1).then(|| Expr::Identifier(quoted("v"))),
            null(),
        );
        assert_eq!(
            v.to_string(),
            "CASE WHEN s.x > 1 THEN NULL WHEN true THEN \"v\" ELSE NULL END"
        );
    }
}
