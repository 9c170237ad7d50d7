//! Streaming statements: recognised on sqlparser's tokens, parsed on its
//! parser and AST (never by matching or splicing SQL text).
//!
//! ```sql
//! CREATE SOURCE [IF NOT EXISTS] name (column type, ...
//!         [, WATERMARK FOR ts AS ts - INTERVAL '5 seconds'])
//!     WITH (connector = 'datagen', datagen.max.rows = 1000, ...);
//! CREATE SOURCE [IF NOT EXISTS] name (column type, ...)
//!     WITH (connector = 'nexmark', nexmark.table.type = 'bid', ...);
//! CREATE SOURCE [IF NOT EXISTS] name (column type, ...)
//!     WITH (connector = 'kafka', topic = 't',
//!           properties.bootstrap.server = 'host:port',
//!           scan.startup.mode = 'earliest' | 'latest')
//!     FORMAT JSON | CSV;
//! CREATE SINK [IF NOT EXISTS] name FROM view
//!     WITH (connector = 'kafka', topic = 't',
//!           properties.bootstrap.server = 'host:port') FORMAT JSON;
//! DROP SINK [IF EXISTS] name; SHOW SINKS;
//! CREATE SOURCE [IF NOT EXISTS] name FROM TABLE table
//!     [WITH (start = 'earliest' | 'now')];   -- the table's change log
//! CREATE MATERIALIZED VIEW [IF NOT EXISTS] name
//!     [WITH (checkpoint_interval_ms = 1000)] AS query [EMIT ON WINDOW CLOSE];
//! DROP SOURCE [IF EXISTS] name;
//! DROP MATERIALIZED VIEW [IF EXISTS] name;
//! SHOW SOURCES; SHOW MATERIALIZED VIEWS; SHOW JOBS;
//! ```
//!
//! `ALTER`/`REFRESH MATERIALIZED VIEW` are recognised so that
//! they are refused with 0A000 instead of reaching the table DDL path.

use std::collections::BTreeMap;

use datafusion::sql::sqlparser::ast::{
    ColumnDef, ColumnOption, CreateTableOptions, Expr, Ident, ObjectName, Query, SqlOption,
    Statement, TableConstraint, Value as SqlValue,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use eddy_common::ColumnType;

use crate::error::{Result, StreamSqlError};
use crate::watermark::WatermarkDef;
use crate::window::EmitMode;

/// A parsed streaming statement.
#[derive(Debug)]
pub enum StreamStatement {
    CreateSource {
        def: SourceDef,
        if_not_exists: bool,
    },
    CreateView {
        def: ViewDef,
        query: Box<Query>,
        if_not_exists: bool,
        /// `EMIT ON WINDOW CLOSE` or the default, emit on update.
        emit: EmitMode,
    },
    DropSource {
        name: String,
        if_exists: bool,
    },
    CreateSink {
        def: SinkDef,
        if_not_exists: bool,
    },
    DropSink {
        name: String,
        if_exists: bool,
    },
    ShowSinks,
    DropView {
        name: String,
        if_exists: bool,
    },
    ShowSources,
    ShowViews,
    ShowJobs,
}

/// A source as the catalog keeps it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SourceDef {
    pub name: String,
    pub columns: Vec<(String, ColumnType)>,
    pub connector: String,
    /// Every option but `connector`, keys lower-cased.
    pub options: BTreeMap<String, String>,
    /// `WATERMARK FOR column AS column - INTERVAL '...'`, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark: Option<WatermarkDef>,
}

/// A sink as the catalog keeps it: a view's changes written out.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SinkDef {
    pub name: String,
    /// The materialized view whose changes it writes.
    pub from: String,
    pub connector: String,
    /// Every option but `connector` (with `format`), keys lower-cased.
    pub options: BTreeMap<String, String>,
}

/// A materialized view as the catalog keeps it: its statement, parsed
/// again at every start.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ViewDef {
    pub name: String,
    /// The source it reads (set when the view is planned).
    #[serde(default)]
    pub source: String,
    /// The second source of an interval join (set when planned).
    #[serde(default)]
    pub joined: Option<String>,
    pub statement: String,
    pub checkpoint_interval_ms: u64,
    /// Literals with a fraction (`0.908`) are numeric, as in queries. False
    /// for views created before (absent from their catalog entries): they
    /// were planned with double precision literals and stay so.
    #[serde(default)]
    pub numeric_literals: bool,
}

/// The statement kinds, by their leading words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    CreateSource,
    CreateView,
    DropSource,
    DropView,
    CreateSink,
    DropSink,
    ShowSinks,
    ShowSources,
    ShowViews,
    ShowJobs,
    Refused(&'static str),
}

fn leading_words(sql: &str) -> Option<Vec<String>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let words = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .take(4)
        .map_while(|t| match t {
            Token::Word(w) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
            _ => None,
        })
        .collect();
    Some(words)
}

fn kind_of(sql: &str) -> Option<Kind> {
    let words = leading_words(sql)?;
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    Some(match w.as_slice() {
        ["CREATE", "SOURCE", ..] => Kind::CreateSource,
        ["CREATE", "MATERIALIZED", "VIEW", ..] => Kind::CreateView,
        ["CREATE", "SINK", ..] => Kind::CreateSink,
        ["DROP", "SINK", ..] => Kind::DropSink,
        ["SHOW", "SINKS", ..] => Kind::ShowSinks,
        ["CREATE", "OR", "REPLACE", "MATERIALIZED"] => {
            Kind::Refused("CREATE OR REPLACE MATERIALIZED VIEW")
        }
        ["DROP", "SOURCE", ..] => Kind::DropSource,
        ["DROP", "MATERIALIZED", "VIEW", ..] => Kind::DropView,
        ["ALTER", "MATERIALIZED", "VIEW", ..] => Kind::Refused("ALTER MATERIALIZED VIEW"),
        ["REFRESH", "MATERIALIZED", "VIEW", ..] => Kind::Refused("REFRESH MATERIALIZED VIEW"),
        ["SHOW", "SOURCES", ..] => Kind::ShowSources,
        ["SHOW", "MATERIALIZED", "VIEWS", ..] => Kind::ShowViews,
        ["SHOW", "JOBS", ..] => Kind::ShowJobs,
        _ => return None,
    })
}

/// Whether `sql` is a streaming statement.
pub fn recognises(sql: &str) -> bool {
    kind_of(sql).is_some()
}

fn syntax(e: ParserError) -> StreamSqlError {
    StreamSqlError::Syntax(e.to_string())
}

/// The catalog name of an object (lower-cased unless quoted, `public.`
/// allowed).
pub fn object_name(name: &ObjectName) -> Result<String> {
    Ok(eddy_sql::rewrite::table_name(name)?)
}

/// Parses a statement [`recognises`] accepted.
pub fn parse(sql: &str) -> Result<StreamStatement> {
    let kind =
        kind_of(sql).ok_or_else(|| StreamSqlError::Internal("not a streaming statement".into()))?;
    let mut p = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .map_err(syntax)?;
    let stmt = match kind {
        Kind::Refused(what) => {
            return Err(StreamSqlError::NotSupported(format!(
                "{what} is not supported: a materialized view is kept current by its job and \
                 is changed by DROP and CREATE"
            )))
        }
        Kind::CreateSource => parse_create_source(&mut p)?,
        Kind::CreateSink => parse_create_sink(&mut p)?,
        Kind::DropSink => {
            p.expect_keyword(Keyword::DROP).map_err(syntax)?;
            p.next_token();
            let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
            let name = object_name(&p.parse_object_name(false).map_err(syntax)?)?;
            StreamStatement::DropSink { name, if_exists }
        }
        Kind::ShowSinks => {
            p.next_token();
            p.next_token();
            StreamStatement::ShowSinks
        }
        Kind::CreateView => {
            let stmt = p.parse_statement().map_err(syntax)?;
            let Statement::CreateView(cv) = stmt else {
                return Err(StreamSqlError::Syntax(
                    "expected CREATE MATERIALIZED VIEW".into(),
                ));
            };
            if cv.or_replace || cv.or_alter || cv.temporary || cv.to.is_some() {
                return Err(StreamSqlError::NotSupported(
                    "CREATE MATERIALIZED VIEW supports neither OR REPLACE, TEMPORARY nor TO".into(),
                ));
            }
            if !cv.columns.is_empty() {
                return Err(StreamSqlError::NotSupported(
                    "a column list on CREATE MATERIALIZED VIEW is not supported: name the \
                     columns with AS in the query"
                        .into(),
                ));
            }
            let mut checkpoint_interval_ms = 1000;
            let options = match &cv.options {
                CreateTableOptions::None => Vec::new(),
                CreateTableOptions::With(o) => o.clone(),
                other => {
                    return Err(StreamSqlError::NotSupported(format!(
                        "materialized view options {other} are not supported"
                    )))
                }
            };
            for o in options {
                match o {
                    SqlOption::KeyValue { key, value }
                        if key.value.eq_ignore_ascii_case("checkpoint_interval_ms") =>
                    {
                        let text = option_text(&value)?;
                        checkpoint_interval_ms = text
                            .parse::<u64>()
                            .ok()
                            .filter(|v| (10..=3_600_000).contains(v))
                            .ok_or_else(|| {
                                StreamSqlError::InvalidOption(format!(
                                    "checkpoint_interval_ms must be an integer from 10 to \
                                     3600000, got {text:?}"
                                ))
                            })?;
                    }
                    other => {
                        return Err(StreamSqlError::InvalidOption(format!(
                            "unknown materialized view option {other}"
                        )))
                    }
                }
            }
            StreamStatement::CreateView {
                def: ViewDef {
                    name: object_name(&cv.name)?,
                    source: String::new(),
                    joined: None,
                    statement: sql.to_string(),
                    checkpoint_interval_ms,
                    numeric_literals: true,
                },
                query: cv.query,
                if_not_exists: cv.if_not_exists,
                emit: parse_emit(&mut p)?,
            }
        }
        Kind::DropSource | Kind::DropView => {
            p.expect_keyword(Keyword::DROP).map_err(syntax)?;
            if kind == Kind::DropView {
                p.expect_keywords(&[Keyword::MATERIALIZED, Keyword::VIEW])
                    .map_err(syntax)?;
            } else {
                p.next_token();
            }
            let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
            let name = object_name(&p.parse_object_name(false).map_err(syntax)?)?;
            if p.parse_keyword(Keyword::CASCADE) {
                return Err(StreamSqlError::NotSupported(
                    "DROP ... CASCADE is not supported for streaming objects: drop the views \
                     first"
                        .into(),
                ));
            }
            let _ = p.parse_keyword(Keyword::RESTRICT);
            if kind == Kind::DropView {
                StreamStatement::DropView { name, if_exists }
            } else {
                StreamStatement::DropSource { name, if_exists }
            }
        }
        Kind::ShowSources | Kind::ShowJobs => {
            p.next_token();
            p.next_token();
            if kind == Kind::ShowJobs {
                StreamStatement::ShowJobs
            } else {
                StreamStatement::ShowSources
            }
        }
        Kind::ShowViews => {
            for _ in 0..3 {
                p.next_token();
            }
            StreamStatement::ShowViews
        }
    };
    while p.consume_token(&Token::SemiColon) {}
    if p.peek_token().token != Token::EOF {
        return Err(StreamSqlError::Syntax(format!(
            "unexpected {} after the statement (a streaming statement is sent alone)",
            p.peek_token().token
        )));
    }
    Ok(stmt)
}

fn option_text(value: &Expr) -> Result<String> {
    match value {
        Expr::Value(v) => match &v.value {
            SqlValue::SingleQuotedString(s) | SqlValue::Number(s, _) => Ok(s.clone()),
            SqlValue::Boolean(b) => Ok(b.to_string()),
            other => Err(StreamSqlError::InvalidOption(format!(
                "option value {other} must be a string, a number or a boolean"
            ))),
        },
        Expr::UnaryOp { op, expr } if op.to_string() == "-" => {
            Ok(format!("-{}", option_text(expr)?))
        }
        other => Err(StreamSqlError::InvalidOption(format!(
            "option value {other} must be a string, a number or a boolean"
        ))),
    }
}

fn parse_create_source(p: &mut Parser) -> Result<StreamStatement> {
    p.expect_keyword(Keyword::CREATE).map_err(syntax)?;
    p.next_token(); // SOURCE (checked by kind_of)
    let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = object_name(&p.parse_object_name(false).map_err(syntax)?)?;
    if p.parse_keywords(&[Keyword::FROM, Keyword::TABLE]) {
        return parse_change_log_source(p, name, if_not_exists);
    }
    let (columns, constraints, watermark) = parse_source_columns(p)?;
    if !constraints.is_empty() {
        return Err(StreamSqlError::NotSupported(
            "a source has no constraints".into(),
        ));
    }
    if columns.is_empty() {
        return Err(StreamSqlError::Syntax(
            "a source needs at least one column".into(),
        ));
    }
    let mut cols = Vec::with_capacity(columns.len());
    for c in &columns {
        if let Some(o) = c
            .options
            .iter()
            .find(|o| !matches!(o.option, ColumnOption::NotNull))
        {
            return Err(StreamSqlError::NotSupported(format!(
                "column option {} is not supported on a source column",
                o.option
            )));
        }
        let col = eddy_sql::rewrite::ident_name(&c.name);
        if cols.iter().any(|(n, _)| n == &col) {
            return Err(StreamSqlError::Duplicate("column", col));
        }
        cols.push((col, eddy_sql::pgtypes::column_type_from_sql(&c.data_type)?));
    }
    let watermark = watermark
        .map(|(column, expr)| WatermarkDef::bind(&column, &expr, &cols))
        .transpose()?;
    p.expect_keyword(Keyword::WITH).map_err(syntax)?;
    let mut options = parse_with_options(p)?;
    parse_format(p, &mut options)?;
    let connector = options.remove("connector").ok_or_else(|| {
        StreamSqlError::InvalidOption("a source needs WITH (connector = '...')".into())
    })?;
    if connector.eq_ignore_ascii_case(crate::changelog::CONNECTOR) {
        return Err(StreamSqlError::InvalidOption(
            "connector 'table' is written CREATE SOURCE name FROM TABLE table".into(),
        ));
    }
    Ok(StreamStatement::CreateSource {
        def: SourceDef {
            name,
            columns: cols,
            connector: connector.to_ascii_lowercase(),
            options,
            watermark,
        },
        if_not_exists,
    })
}

/// `CREATE SOURCE name FROM TABLE table [WITH (start = '...')]`, after
/// `FROM TABLE`: the columns are the table's, filled in by the manager.
fn parse_change_log_source(
    p: &mut Parser,
    name: String,
    if_not_exists: bool,
) -> Result<StreamStatement> {
    let table = object_name(&p.parse_object_name(false).map_err(syntax)?)?;
    let mut options = if p.parse_keyword(Keyword::WITH) {
        parse_with_options(p)?
    } else {
        BTreeMap::new()
    };
    if let Some(k) = options.keys().find(|k| k.as_str() != "start") {
        return Err(StreamSqlError::InvalidOption(format!(
            "unknown option {k} for a change-log source (supported: start)"
        )));
    }
    if let Some(start) = options.get("start") {
        crate::changelog::parse_start(start)?;
    }
    options.insert("table".into(), table);
    Ok(StreamStatement::CreateSource {
        def: SourceDef {
            name,
            columns: Vec::new(),
            connector: crate::changelog::CONNECTOR.into(),
            options,
            watermark: None,
        },
        if_not_exists,
    })
}

/// `CREATE SINK [IF NOT EXISTS] name FROM view WITH (...) FORMAT JSON`.
fn parse_create_sink(p: &mut Parser) -> Result<StreamStatement> {
    p.expect_keyword(Keyword::CREATE).map_err(syntax)?;
    p.next_token(); // SINK (checked by kind_of)
    let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = object_name(&p.parse_object_name(false).map_err(syntax)?)?;
    if p.peek_token().token == Token::LParen || word_ahead(p, 0, "AS") {
        return Err(StreamSqlError::NotSupported(
            "a sink is written CREATE SINK name FROM materialized_view WITH (...)".into(),
        ));
    }
    p.expect_keyword(Keyword::FROM).map_err(syntax)?;
    let from = object_name(&p.parse_object_name(false).map_err(syntax)?)?;
    p.expect_keyword(Keyword::WITH).map_err(syntax)?;
    let mut options = parse_with_options(p)?;
    parse_format(p, &mut options)?;
    let connector = options
        .remove("connector")
        .ok_or_else(|| {
            StreamSqlError::InvalidOption("a sink needs WITH (connector = '...')".into())
        })?
        .to_ascii_lowercase();
    if connector != crate::kafka::CONNECTOR {
        return Err(StreamSqlError::NotSupported(format!(
            "sink connector '{connector}' is not supported (supported: kafka)"
        )));
    }
    Ok(StreamStatement::CreateSink {
        def: SinkDef {
            name,
            from,
            connector,
            options,
        },
        if_not_exists,
    })
}

/// `[FORMAT JSON | CSV]` (or `FORMAT PLAIN ENCODE JSON | CSV`) after the
/// options, kept as the option `format`.
fn parse_format(p: &mut Parser, options: &mut BTreeMap<String, String>) -> Result<()> {
    if !word_ahead(p, 0, "FORMAT") {
        return Ok(());
    }
    p.next_token();
    let mut word = p.parse_identifier().map_err(syntax)?.value;
    if word.eq_ignore_ascii_case("plain") && word_ahead(p, 0, "ENCODE") {
        p.next_token();
        word = p.parse_identifier().map_err(syntax)?.value;
    }
    let format = word.to_ascii_lowercase();
    if format != "json" && format != "csv" {
        return Err(StreamSqlError::NotSupported(format!(
            "FORMAT {word} is not supported (supported: JSON, CSV)"
        )));
    }
    if options.insert("format".into(), format).is_some() {
        return Err(StreamSqlError::InvalidOption(
            "the format is given twice (option and FORMAT)".into(),
        ));
    }
    Ok(())
}

/// `(key = value, ...)` after WITH; keys lower-cased, each at most once.
fn parse_with_options(p: &mut Parser) -> Result<BTreeMap<String, String>> {
    p.expect_token(&Token::LParen).map_err(syntax)?;
    let mut options = BTreeMap::new();
    loop {
        let key = match p.peek_token().token {
            Token::SingleQuotedString(s) => {
                p.next_token();
                s.to_ascii_lowercase()
            }
            _ => {
                let parts = p.parse_object_name(false).map_err(syntax)?;
                parts
                    .0
                    .iter()
                    .map(|part| part.to_string().to_ascii_lowercase())
                    .collect::<Vec<_>>()
                    .join(".")
            }
        };
        p.expect_token(&Token::Eq).map_err(syntax)?;
        let value = p.parse_expr().map_err(syntax)?;
        let text = option_text(&value)?;
        if options.insert(key.clone(), text).is_some() {
            return Err(StreamSqlError::InvalidOption(format!(
                "option {key} is given twice"
            )));
        }
        if !p.consume_token(&Token::Comma) {
            break;
        }
    }
    p.expect_token(&Token::RParen).map_err(syntax)?;
    Ok(options)
}

/// Whether the unquoted word `word` comes `n` tokens ahead.
fn word_ahead(p: &Parser, n: usize, word: &str) -> bool {
    matches!(&p.peek_nth_token_ref(n).token,
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

/// `[EMIT ON WINDOW CLOSE]` after a view's query.
fn parse_emit(p: &mut Parser) -> Result<EmitMode> {
    if !word_ahead(p, 0, "EMIT") {
        return Ok(EmitMode::OnUpdate);
    }
    p.next_token();
    if !p.parse_keywords(&[Keyword::ON, Keyword::WINDOW, Keyword::CLOSE]) {
        return Err(StreamSqlError::NotSupported(format!(
            "EMIT {} is not supported (supported: EMIT ON WINDOW CLOSE, or no EMIT clause to \
             emit on update)",
            p.peek_token().token
        )));
    }
    Ok(EmitMode::OnWindowClose)
}

type SourceColumns = (Vec<ColumnDef>, Vec<TableConstraint>, Option<(Ident, Expr)>);

/// A source's parenthesised column list: columns, table constraints (the
/// caller refuses them) and at most one `WATERMARK FOR column AS expr`.
fn parse_source_columns(p: &mut Parser) -> Result<SourceColumns> {
    let mut columns = Vec::new();
    let mut constraints = Vec::new();
    let mut watermark = None;
    p.expect_token(&Token::LParen).map_err(syntax)?;
    if p.consume_token(&Token::RParen) {
        return Ok((columns, constraints, watermark));
    }
    loop {
        // `watermark` alone may still name a column: only `WATERMARK FOR`
        // starts the clause
        let for_next = matches!(&p.peek_nth_token_ref(1).token,
            Token::Word(w) if w.keyword == Keyword::FOR);
        if word_ahead(p, 0, "WATERMARK") && for_next {
            p.next_token();
            p.next_token();
            let column = p.parse_identifier().map_err(syntax)?;
            p.expect_keyword(Keyword::AS).map_err(syntax)?;
            let expr = p.parse_expr().map_err(syntax)?;
            if watermark.replace((column, expr)).is_some() {
                return Err(StreamSqlError::NotSupported(
                    "a source has at most one WATERMARK".into(),
                ));
            }
        } else if let Some(c) = p.parse_optional_table_constraint().map_err(syntax)? {
            constraints.push(c);
        } else {
            columns.push(p.parse_column_def().map_err(syntax)?);
        }
        if p.consume_token(&Token::RParen) {
            return Ok((columns, constraints, watermark));
        }
        p.expect_token(&Token::Comma).map_err(syntax)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_only_streaming_statements() {
        assert!(recognises(
            "create source s (a int) with (connector='datagen')"
        ));
        assert!(recognises(
            "  /* c */ CREATE MATERIALIZED VIEW v AS SELECT 1"
        ));
        assert!(recognises("show jobs"));
        assert!(recognises("DROP MATERIALIZED VIEW v"));
        assert!(!recognises("CREATE VIEW v AS SELECT 1"));
        assert!(!recognises("SELECT 'CREATE SOURCE'"));
        assert!(!recognises("CREATE TABLE source (a int)"));
        assert!(!recognises("SHOW \"jobs\""));
    }

    #[test]
    fn parses_a_source_with_dotted_options() {
        let s = parse(
            "CREATE SOURCE IF NOT EXISTS Clicks (id bigint, url text) WITH (connector = \
             'datagen', datagen.max.rows = 100, 'fields.id.kind' = 'sequence');",
        )
        .expect("parse");
        let StreamStatement::CreateSource { def, if_not_exists } = s else {
            panic!("not a source: {s:?}");
        };
        assert!(if_not_exists);
        assert_eq!(def.name, "clicks");
        assert_eq!(def.connector, "datagen");
        assert_eq!(def.columns[0], ("id".to_string(), ColumnType::BigInt));
        assert_eq!(def.options["datagen.max.rows"], "100");
        assert_eq!(def.options["fields.id.kind"], "sequence");
    }

    #[test]
    fn parses_a_change_log_source() {
        let s = parse("CREATE SOURCE Log FROM TABLE public.Orders WITH (start = 'NOW')")
            .expect("parse");
        let StreamStatement::CreateSource { def, .. } = s else {
            panic!("not a source: {s:?}");
        };
        assert_eq!(def.name, "log");
        assert_eq!(def.connector, crate::changelog::CONNECTOR);
        assert_eq!(def.options["table"], "orders");
        assert_eq!(def.options["start"], "NOW");
        assert!(def.columns.is_empty(), "filled in from the table at CREATE");
        let s = parse("CREATE SOURCE log FROM TABLE t").expect("parse");
        let StreamStatement::CreateSource { def, .. } = s else {
            panic!("not a source: {s:?}");
        };
        assert_eq!(def.options.len(), 1);
        for (sql, not_supported) in [
            (
                "CREATE SOURCE l FROM TABLE t WITH (start = '0/16B3748')",
                true,
            ),
            ("CREATE SOURCE l FROM TABLE t WITH (start = 'later')", false),
            ("CREATE SOURCE l FROM TABLE t WITH (format = 'json')", false),
            ("CREATE SOURCE l (a int) WITH (connector = 'table')", false),
        ] {
            match parse(sql) {
                Err(StreamSqlError::NotSupported(_)) if not_supported => {}
                Err(StreamSqlError::InvalidOption(_)) if !not_supported => {}
                other => panic!("{sql}: {other:?}"),
            }
        }
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        for sql in [
            "CREATE SINK k FROM v WITH (connector='blackhole')",
            "CREATE SINK k AS SELECT 1",
            "CREATE SOURCE s (a int) WITH (connector='kafka') FORMAT AVRO",
            "REFRESH MATERIALIZED VIEW v",
            "CREATE SOURCE s (a int PRIMARY KEY) WITH (connector='datagen')",
            "CREATE OR REPLACE MATERIALIZED VIEW v AS SELECT 1",
            "CREATE MATERIALIZED VIEW v (x) AS SELECT 1",
            "DROP SOURCE s CASCADE",
        ] {
            let e = parse(sql).expect_err(sql);
            assert!(matches!(e, StreamSqlError::NotSupported(_)), "{sql}: {e}");
        }
        let e = parse("CREATE MATERIALIZED VIEW v WITH (speed = 1) AS SELECT 1").unwrap_err();
        assert!(matches!(e, StreamSqlError::InvalidOption(_)), "{e}");
        let e = parse("SHOW JOBS; SELECT 1").unwrap_err();
        assert!(matches!(e, StreamSqlError::Syntax(_)), "{e}");
    }

    #[test]
    fn parses_kafka_sources_and_sinks() {
        let s = parse(
            "CREATE SOURCE ev (k text, v bigint) WITH (connector = 'kafka', topic = 'ev', \
             properties.bootstrap.server = '127.0.0.1:9092', scan.startup.mode = 'earliest') \
             FORMAT JSON",
        )
        .expect("parse");
        let StreamStatement::CreateSource { def, .. } = s else {
            panic!("not a source: {s:?}");
        };
        assert_eq!(def.connector, "kafka");
        assert_eq!(def.options["format"], "json");
        assert_eq!(def.options["properties.bootstrap.server"], "127.0.0.1:9092");
        let s = parse(
            "CREATE SINK IF NOT EXISTS out FROM mv WITH (connector = 'kafka', topic = 'o', \
             properties.bootstrap.server = 'h:1') FORMAT PLAIN ENCODE JSON;",
        )
        .expect("parse");
        let StreamStatement::CreateSink { def, if_not_exists } = s else {
            panic!("not a sink: {s:?}");
        };
        assert!(if_not_exists);
        assert_eq!((def.name.as_str(), def.from.as_str()), ("out", "mv"));
        assert_eq!(def.options["format"], "json");
        assert!(matches!(
            parse("DROP SINK IF EXISTS out").expect("drop"),
            StreamStatement::DropSink {
                if_exists: true,
                ..
            }
        ));
        assert!(matches!(
            parse("SHOW SINKS").expect("show"),
            StreamStatement::ShowSinks
        ));
        let e = parse(
            "CREATE SOURCE s (a int) WITH (connector = 'kafka', format = 'json') FORMAT JSON",
        )
        .expect_err("twice");
        assert!(matches!(e, StreamSqlError::InvalidOption(_)), "{e}");
    }

    #[test]
    fn parses_a_view_and_its_interval() {
        let s = parse(
            "create materialized view V with (checkpoint_interval_ms = 200) as \
             select k, count(*) from s group by k",
        )
        .expect("parse");
        let StreamStatement::CreateView { def, .. } = s else {
            panic!("not a view");
        };
        assert_eq!(def.name, "v");
        assert_eq!(def.checkpoint_interval_ms, 200);
    }

    #[test]
    fn parses_a_watermark_among_the_columns() {
        let s = parse(
            "CREATE SOURCE bids (id bigint, ts timestamp, WATERMARK FOR ts AS ts - INTERVAL \
             '5 seconds', watermark int) WITH (connector = 'datagen')",
        )
        .expect("parse");
        let StreamStatement::CreateSource { def, .. } = s else {
            panic!("not a source: {s:?}");
        };
        let names: Vec<&str> = def.columns.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["id", "ts", "watermark"],
            "`watermark` alone is a column"
        );
        let w = def.watermark.expect("watermark");
        assert_eq!((w.column.as_str(), w.delay_micros), ("ts", 5_000_000));
        // old catalogs (no watermark field) stay readable
        let old: SourceDef =
            serde_json::from_str(r#"{"name":"s","columns":[],"connector":"datagen","options":{}}"#)
                .expect("old catalog entry");
        assert_eq!(old.watermark, None);
    }

    #[test]
    fn refuses_watermarks_it_cannot_keep() {
        for sql in [
            "CREATE SOURCE s (ts timestamp, WATERMARK FOR ts AS ts + INTERVAL '1 second') \
             WITH (connector = 'datagen')",
            "CREATE SOURCE s (ts timestamp, WATERMARK FOR ts AS ts, WATERMARK FOR ts AS ts) \
             WITH (connector = 'datagen')",
        ] {
            let e = parse(sql).expect_err(sql);
            assert!(matches!(e, StreamSqlError::NotSupported(_)), "{sql}: {e}");
        }
        let e = parse(
            "CREATE SOURCE s (ts timestamp, WATERMARK FOR nope AS nope) WITH (connector = \
             'datagen')",
        )
        .expect_err("unknown column");
        assert!(matches!(e, StreamSqlError::Sql(_)), "{e}");
    }

    #[test]
    fn views_are_planned_with_the_literal_types_they_were_created_with() {
        // a catalog entry written before `numeric_literals` existed
        let old: ViewDef = serde_json::from_str(
            r#"{"name":"v","statement":"CREATE MATERIALIZED VIEW v AS SELECT 1","checkpoint_interval_ms":1000}"#,
        )
        .unwrap();
        assert!(!old.numeric_literals);
        let StreamStatement::CreateView { def, .. } =
            parse("CREATE MATERIALIZED VIEW v AS SELECT k, sum(0.5 * x) FROM s GROUP BY k")
                .unwrap()
        else {
            panic!("not a view");
        };
        assert!(def.numeric_literals);
        let again: ViewDef = serde_json::from_str(&serde_json::to_string(&def).unwrap()).unwrap();
        assert!(again.numeric_literals);
    }

    #[test]
    fn parses_emit_on_window_close() {
        let emit_of = |sql: &str| match parse(sql) {
            Ok(StreamStatement::CreateView { emit, .. }) => Ok(emit),
            Ok(other) => panic!("not a view: {other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(
            emit_of(
                "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM \
                 TUMBLE(s, ts, INTERVAL '1' SECOND) GROUP BY window_start EMIT ON WINDOW CLOSE;"
            )
            .expect("eowc"),
            EmitMode::OnWindowClose
        );
        assert_eq!(
            emit_of("CREATE MATERIALIZED VIEW v AS SELECT k, count(*) FROM s GROUP BY k")
                .expect("default"),
            EmitMode::OnUpdate
        );
        let e = emit_of(
            "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) FROM s GROUP BY k EMIT IMMEDIATELY",
        )
        .expect_err("other emit");
        assert!(matches!(e, StreamSqlError::NotSupported(_)), "{e}");
    }
}
