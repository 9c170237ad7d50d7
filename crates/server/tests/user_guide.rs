//! `docs/user-guide.md` is executable: every ```sql block runs, in the
//! order the guide gives, against a freshly started real server, so the
//! guide cannot drift from the code.
//!
//! Conventions of the guide's blocks:
//! * statements end with `;` (split with sqlparser's tokenizer, so a `;`
//!   in a string or a comment does not split);
//! * `COPY ... FROM STDIN` is followed by its data lines and a line `\.`,
//!   as in a psql script; `COPY ... TO STDOUT` runs as a copy-out;
//! * a block whose fence reads ```` ```sql error=XXXXX ```` holds one
//!   statement that must fail with SQLSTATE `XXXXX`: what Eddy refuses,
//!   shown as refused;
//! * every other statement must succeed.

use datafusion::sql::sqlparser::ast::{CopySource, CopyTarget, Statement};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use futures::SinkExt;
use tokio_postgres::Client;

mod common;
use common::*;

/// One ```sql block of the guide.
#[derive(Debug)]
struct Block {
    /// Line of the opening fence (1-based), for messages.
    line: usize,
    /// `error=XXXXX` of the fence.
    expect_error: Option<String>,
    text: String,
}

fn sql_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        let fence = line.trim_start();
        match open.take() {
            Some(b) if fence.starts_with("```") => blocks.push(b),
            Some(mut b) => {
                b.text.push_str(line);
                b.text.push('\n');
                open = Some(b);
            }
            None => {
                let Some(info) = fence.strip_prefix("```sql") else {
                    continue;
                };
                let mut expect_error = None;
                for word in info.split_whitespace() {
                    match word.strip_prefix("error=") {
                        Some(code) => expect_error = Some(code.to_string()),
                        None => panic!("line {}: unknown fence attribute {word:?}", i + 1),
                    }
                }
                open = Some(Block {
                    line: i + 1,
                    expect_error,
                    text: String::new(),
                });
            }
        }
    }
    assert!(open.is_none(), "an unclosed ```sql block");
    blocks
}

/// A step of a block.
#[derive(Debug, PartialEq)]
enum Step {
    Sql(String),
    /// `COPY ... FROM STDIN` and the data lines after it.
    CopyIn(String, String),
    /// `COPY ... TO STDOUT`.
    CopyOut(String),
}

/// Byte offset of a tokenizer location (1-based line and character).
fn offset(text: &str, line: u64, column: u64) -> usize {
    let mut at = 0;
    for (n, l) in text.split_inclusive('\n').enumerate() {
        if n as u64 + 1 == line {
            return at
                + l.char_indices()
                    .nth(column.saturating_sub(1) as usize)
                    .map(|(i, _)| i)
                    .unwrap_or(l.len());
        }
        at += l.len();
    }
    text.len()
}

enum Copy {
    No,
    In,
    Out,
}

fn copy_kind(sql: &str) -> Copy {
    match Parser::parse_sql(&PostgreSqlDialect {}, sql).as_deref() {
        Ok(
            [Statement::Copy {
                to: false,
                target: CopyTarget::Stdin,
                source: CopySource::Table { .. },
                ..
            }],
        ) => Copy::In,
        Ok(
            [Statement::Copy {
                to: true,
                target: CopyTarget::Stdout,
                ..
            }],
        ) => Copy::Out,
        _ => Copy::No,
    }
}

/// The block's statements in order (see the module doc).
fn steps(block: &Block) -> Vec<Step> {
    let lines: Vec<&str> = block.text.lines().collect();
    let mut out = Vec::new();
    let mut pending = String::new();
    let mut i = 0;
    while i < lines.len() {
        pending.push_str(lines[i]);
        pending.push('\n');
        i += 1;
        // an unterminated string or comment: the statement goes on
        let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, &pending).tokenize_with_location()
        else {
            continue;
        };
        let mut statements = Vec::new();
        let mut start = 0;
        let mut unfinished = false;
        for t in &tokens {
            match &t.token {
                Token::SemiColon => {
                    let end = offset(&pending, t.span.start.line, t.span.start.column);
                    let sql = pending[start..end].trim();
                    if !sql.is_empty() {
                        statements.push(sql.to_string());
                    }
                    start = end + 1;
                    unfinished = false;
                }
                Token::Whitespace(_) => {}
                _ => unfinished = true,
            }
        }
        if unfinished {
            continue;
        }
        pending.clear();
        for sql in statements {
            match copy_kind(&sql) {
                Copy::In => {
                    let mut data = String::new();
                    loop {
                        let line = lines.get(i).unwrap_or_else(|| {
                            panic!("line {}: COPY FROM STDIN data has no \\. line", block.line)
                        });
                        i += 1;
                        if line.trim_end() == "\\." {
                            break;
                        }
                        data.push_str(line);
                        data.push('\n');
                    }
                    out.push(Step::CopyIn(sql, data));
                }
                Copy::Out => out.push(Step::CopyOut(sql)),
                Copy::No => out.push(Step::Sql(sql)),
            }
        }
    }
    assert!(
        pending.trim().is_empty(),
        "block at line {}: a statement without a closing ';': {pending}",
        block.line
    );
    out
}

async fn run(c: &Client, step: &Step) -> Result<(), tokio_postgres::Error> {
    match step {
        Step::Sql(sql) => c.simple_query(sql).await.map(|_| ()),
        Step::CopyIn(sql, data) => {
            let sink = c.copy_in::<_, bytes::Bytes>(sql.as_str()).await?;
            futures::pin_mut!(sink);
            sink.send(bytes::Bytes::from(data.clone())).await?;
            sink.finish().await.map(|_| ())
        }
        Step::CopyOut(sql) => {
            use futures::TryStreamExt;
            let stream = c.copy_out(sql.as_str()).await?;
            let chunks: Vec<bytes::Bytes> = stream.try_collect().await?;
            assert!(!chunks.is_empty(), "{sql}: no rows");
            Ok(())
        }
    }
}

#[test]
fn blocks_split_into_statements() {
    let guide = "text\n```sql\nSELECT 'a;b'; -- c;\nSELECT\n  2;\nCOPY t FROM STDIN WITH (FORMAT csv);\n1,x;y\n\\.\nCOPY t TO STDOUT;\n```\n```sql error=0A000\nSET work_mem = '1MB';\n```\n";
    let blocks = sql_blocks(guide);
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[1].expect_error.as_deref(), Some("0A000"));
    assert_eq!(
        steps(&blocks[0]),
        vec![
            Step::Sql("SELECT 'a;b'".into()),
            Step::Sql("SELECT\n  2".into()),
            Step::CopyIn(
                "COPY t FROM STDIN WITH (FORMAT csv)".into(),
                "1,x;y\n".into()
            ),
            Step::CopyOut("COPY t TO STDOUT".into()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sql_example_of_the_user_guide_runs() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/user-guide.md");
    let guide = std::fs::read_to_string(path).expect("docs/user-guide.md");
    let blocks = sql_blocks(&guide);
    assert!(
        blocks.len() >= 5,
        "the guide has only {} sql blocks",
        blocks.len()
    );
    let server = Server::start("scram");
    let c = server.connect().await;
    let mut ran = 0;
    for block in &blocks {
        let steps = steps(block);
        assert!(!steps.is_empty(), "empty block at line {}", block.line);
        match &block.expect_error {
            Some(code) => {
                assert_eq!(
                    steps.len(),
                    1,
                    "block at line {}: an error= block holds one statement",
                    block.line
                );
                match run(&c, &steps[0]).await {
                    Ok(()) => panic!(
                        "docs/user-guide.md:{}: {:?} succeeded, the guide says it fails with {code}",
                        block.line, steps[0]
                    ),
                    Err(e) => assert_eq!(
                        e.code().map(|s| s.code()),
                        Some(code.as_str()),
                        "docs/user-guide.md:{}: {:?}: {e:?}",
                        block.line,
                        steps[0]
                    ),
                }
            }
            None => {
                for step in &steps {
                    if let Err(e) = run(&c, step).await {
                        panic!("docs/user-guide.md:{}: {step:?} failed: {e:?}", block.line);
                    }
                }
            }
        }
        ran += steps.len();
    }
    println!(
        "{} blocks, {ran} statements of the user guide ran",
        blocks.len()
    );
}
