//! SQL front-end fuzz target (issue 15), end to end against the real `eddy`
//! binary started with `--auth trust` on a loopback port.
//!
//! The corpus is every statement of `tests/slt/*.slt` (run once, in file
//! order, so the tables they create exist) plus the seeds in
//! `tests/fuzz/seeds/sql/` (one statement per file: the historic server
//! killers such as 10,000-term expressions and deep nesting). Then random
//! cases from a fixed-seed RNG mutate corpus statements at the token level:
//! a token dropped, doubled, swapped with another or replaced by a hostile
//! one (extreme numbers, `NaN`, empty and long strings, NULL, parameters,
//! operators, keywords), two statements spliced, a statement cut short,
//! or a subexpression nested hundreds of times. Each case is sent over the
//! simple protocol, or over the extended protocol (Parse/Bind/Execute with
//! no parameters), on a connection whose `statement_timeout` is 2 s.
//!
//! A case fails when the server process exits, when a statement is not
//! answered within the statement timeout plus a grace period, when the
//! server closes the connection, when a reply carries the error of a
//! caught panic (XX000 "a bug in Eddy"), or when a fresh connection can
//! no longer run `SELECT 1`; at the end the server's log must hold no panic
//! record. `COPY` (its own decoder target), and stream DDL (`CREATE
//! SOURCE / SINK / MATERIALIZED VIEW`: the jobs outlive the statement) are
//! left out of the mutations.
//!
//! `EDDY_FUZZ_CASES` sets the number of random cases (default 1500) and
//! `EDDY_FUZZ_SEED` the RNG seed; the run also stops at a time budget
//! (`EDDY_FUZZ_SECS`, default 60 s) so CI stays bounded on a slow machine.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

mod common;
use common::rng::Rng;
use common::*;

/// One of `items`, by reference.
fn pick<'a>(rng: &mut Rng, items: &'a [String]) -> &'a str {
    &items[rng.below(items.len())]
}

const STATEMENT_TIMEOUT: &str = "2s";
/// How long past the statement timeout an answer may take (planning of a
/// huge statement, a loaded CI machine).
const GRACE: Duration = Duration::from_secs(20);

/// Tokens a mutation may insert.
const HOSTILE: &[&str] = &[
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "2147483648",
    "-2147483649",
    "1e308",
    "1e-400",
    "0",
    "-0.0",
    "'NaN'",
    "'Infinity'",
    "'-infinity'",
    "''",
    "NULL",
    "$1",
    "$2147483647",
    "'\u{00e9}\u{4e2d}\u{1f600}'",
    "E'\\x00'",
    "'\\'",
    "(",
    ")",
    ",",
    ";",
    "::",
    "::int2",
    "::numeric(1000,999)",
    "::date",
    "::timestamp",
    "/",
    "%",
    "||",
    "*",
    "AND",
    "OR",
    "NOT",
    "IN",
    "ANY",
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP BY",
    "ORDER BY",
    "LIMIT",
    "OFFSET",
    "UNION",
    "JOIN",
    "ON",
    "LATERAL",
    "RETURNING",
    "CASE",
    "WHEN",
    "END",
    "DISTINCT",
    "OVER ()",
    "FOR UPDATE",
    "generate_series(1, 100000)",
    "(SELECT 1)",
    "(SELECT count(*) FROM q)",
    "EXISTS (SELECT 1)",
    "ARRAY[1, NULL]",
    "'2000-13-45'",
    "'5000000-01-01'",
    "repeat('x', 100000)",
];

/// Whether a statement may be mutated (see the module doc).
fn mutable(stmt: &str) -> bool {
    let up = stmt.to_ascii_uppercase();
    let words: Vec<&str> = up.split_whitespace().collect();
    let has = |w: &str| words.contains(&w);
    !(has("COPY") || has("SOURCE") || has("SINK") || (has("MATERIALIZED") && has("VIEW")))
}

/// The statements of an slt file: the lines after `statement ...` or
/// `query ...` up to a blank line or `----`.
fn slt_statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if !(t.starts_with("statement") || t.starts_with("query")) {
            continue;
        }
        let mut sql = String::new();
        for l in lines.by_ref() {
            if l.trim().is_empty() || l.trim() == "----" {
                break;
            }
            sql.push_str(l);
            sql.push('\n');
        }
        let sql = sql.trim().to_string();
        if !sql.is_empty() {
            out.push(sql);
        }
    }
    out
}

fn corpus() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/slt")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|p| slt_statements(&std::fs::read_to_string(p).expect("slt file")))
        .collect()
}

fn seeds(dir: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .expect("tests/fuzz/seeds/sql")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .map(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().to_string());
            (
                name.unwrap_or_default(),
                std::fs::read_to_string(&p).expect("seed"),
            )
        })
        .collect();
    out.sort();
    out
}

/// Splits a statement into rough tokens: quoted strings and quoted
/// identifiers whole, words, numbers, and single punctuation characters.
fn tokens(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = sql.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' || c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += 1;
            }
            i = (i + 1).min(chars.len());
            out.push(chars[start..i].iter().collect());
        } else if c.is_alphanumeric() || c == '_' || c == '.' || c == '$' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || "_.$".contains(chars[i])) {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

fn mutate(rng: &mut Rng, corpus: &[String]) -> String {
    let base = pick(rng, corpus).to_string();
    let mut t = tokens(&base);
    if t.is_empty() {
        return base;
    }
    let hostile = || HOSTILE.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let rounds = 1 + rng.below(3);
    for _ in 0..rounds {
        let at = rng.below(t.len());
        match rng.below(8) {
            0 => {
                if t.len() > 1 {
                    t.remove(at);
                }
            }
            1 => {
                let dup = t[at].clone();
                t.insert(at, dup);
            }
            2 => {
                let other = rng.below(t.len());
                t.swap(at, other);
            }
            3 | 4 => t[at] = pick(rng, &hostile()).to_string(),
            5 => t.insert(at, pick(rng, &hostile()).to_string()),
            6 => {
                // splice: this statement's head, another's tail
                let other = tokens(pick(rng, corpus));
                let from = rng.below(other.len());
                t.truncate(at + 1);
                t.extend(other.into_iter().skip(from));
            }
            _ => t.truncate(at.max(1)),
        }
    }
    let mut sql = t.join(" ");
    if rng.below(12) == 0 {
        // nest the whole statement's first literal-ish token deeply
        let depth = 50 + rng.below(400);
        sql = format!("SELECT {}1{}", "(".repeat(depth), ")".repeat(depth));
    }
    sql
}

struct Fuzz {
    srv: Server,
    log: PathBuf,
    client: Client,
    failures: Vec<String>,
}

impl Fuzz {
    async fn connect(srv: &Server) -> Client {
        let c = srv.connect().await;
        c.batch_execute(&format!("SET statement_timeout = '{STATEMENT_TIMEOUT}'"))
            .await
            .expect("set statement_timeout");
        c
    }

    /// A new connection after the server closed the old one; the test
    /// stops if the server is gone.
    async fn reconnect(&mut self) {
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if self.srv.child.try_wait().ok().flatten().is_some() {
                self.give_up();
            }
            let url = format!(
                "host=127.0.0.1 port={} user=eddy dbname=eddy password=x",
                self.srv.port
            );
            if let Ok((c, conn)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
                tokio::spawn(conn);
                if c.batch_execute(&format!("SET statement_timeout = '{STATEMENT_TIMEOUT}'"))
                    .await
                    .is_ok()
                {
                    self.client = c;
                    return;
                }
            }
        }
        self.give_up();
    }

    /// Stops the test with every failure so far and the log's tail.
    fn give_up(&self) -> ! {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "the server is gone; failures:\n{}\nlog tail:\n{}",
            self.failures.join("\n"),
            tail.join("\n")
        );
    }

    /// Runs one statement; records a failure if the server misbehaves.
    async fn case(&mut self, label: &str, sql: &str, extended: bool) {
        let run = async {
            if extended {
                self.client.query(sql, &[]).await.map(|_| ())
            } else {
                self.client.simple_query(sql).await.map(|_| ())
            }
        };
        let limit = Duration::from_secs(2) + GRACE;
        let short: String = sql.chars().take(300).collect();
        match tokio::time::timeout(limit, run).await {
            Err(_) => self.failures.push(format!(
                "{label}: no answer within {limit:?} (statement_timeout {STATEMENT_TIMEOUT}): {short}"
            )),
            Ok(Err(e)) => {
                if let Some(db) = e.as_db_error() {
                    if *db.code() == SqlState::INTERNAL_ERROR && db.message().contains("a bug in Eddy")
                    {
                        self.failures
                            .push(format!("{label}: caught panic {}: {short}", db.message()));
                    }
                }
            }
            Ok(Ok(())) => {}
        }
        if self.srv.child.try_wait().ok().flatten().is_some() {
            self.failures
                .push(format!("{label}: the server exited: {short}"));
            self.give_up();
        }
        if self.client.is_closed() {
            self.failures.push(format!(
                "{label}: the server closed the connection: {short}"
            ));
            self.reconnect().await;
            return;
        }
        // leave no transaction block open for the next case (a warning
        // when there is none)
        let _ = tokio::time::timeout(limit, self.client.simple_query("ROLLBACK")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_front_end_fuzz() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    let log = dir.path().join("eddy.log");
    let srv = Server::start_logged(None, data, "trust", &log);
    let client = Fuzz::connect(&srv).await;
    let mut f = Fuzz {
        srv,
        log,
        client,
        failures: Vec::new(),
    };
    let budget = Duration::from_secs(
        std::env::var("EDDY_FUZZ_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(60),
    );

    let corpus: Vec<String> = corpus().into_iter().filter(|s| mutable(s)).collect();
    assert!(
        corpus.len() > 200,
        "the slt corpus: {} statements",
        corpus.len()
    );
    // every corpus statement once, so the tables exist
    for (i, sql) in corpus.iter().enumerate() {
        f.case(&format!("corpus {i}"), sql, false).await;
    }
    // the seeds, over both protocols
    let seed_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz/seeds/sql");
    let seeds = seeds(&seed_dir);
    assert!(!seeds.is_empty(), "seeds in {seed_dir:?}");
    for (name, sql) in &seeds {
        f.case(&format!("seed {name} (simple)"), sql, false).await;
        f.case(&format!("seed {name} (extended)"), sql, true).await;
    }

    let seed: u64 = std::env::var("EDDY_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x05ee_d5c1);
    let cases: usize = std::env::var("EDDY_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let mut rng = Rng(seed);
    let mut ran = 0;
    for i in 0..cases {
        if started.elapsed() > budget {
            break;
        }
        let sql = mutate(&mut rng, &corpus);
        let extended = rng.below(3) == 0;
        f.case(&format!("case {i} (seed {seed:#x})"), &sql, extended)
            .await;
        ran += 1;
    }

    // the server still answers a fresh connection
    let fresh = f.srv.connect().await;
    let row = fresh.query_one("SELECT 1", &[]).await.expect("SELECT 1");
    assert_eq!(row.get::<_, i32>(0), 1);
    f.srv.stop();
    let log = std::fs::read_to_string(&f.log).unwrap_or_default();
    let panics: Vec<&str> = log.lines().filter(|l| l.contains("panic:")).collect();
    eprintln!(
        "sql fuzz: {} corpus statements, {} seeds, {ran} random cases in {:?}",
        corpus.len(),
        seeds.len(),
        started.elapsed()
    );
    assert!(
        f.failures.is_empty() && panics.is_empty(),
        "{} failures:\n{}\npanics in the log:\n{}",
        f.failures.len(),
        f.failures.join("\n"),
        panics.join("\n")
    );
}
