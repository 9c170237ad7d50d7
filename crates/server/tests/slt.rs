//! Runs every `tests/slt/*.slt` file against the real `eddy` binary over
//! both PostgreSQL query protocols, one fresh server per file and protocol:
//!
//! * `sqllogictests` sends each record as a simple query (tokio-postgres
//!   `simple_query`);
//! * `sqllogictests_extended` sends each record as Parse, Describe
//!   statement, Bind (results in text format), Describe portal, Execute and
//!   Sync, written with `postgres-protocol`'s frontend messages over a
//!   plain TCP connection (tokio-postgres always asks for binary results),
//!   so cells compare as text exactly as with the simple protocol. It also
//!   checks what drivers rely on: the statement and the portal are
//!   described with the same column types, in text format, every row has
//!   the described number of cells, and one Sync answers one error at most.
//!
//! Both protocols cover every file; the two tests run side by side (each
//! file takes a fresh server per protocol, so neither sees the other's
//! tables).
//!
//! Both render a NULL as `NULL`, an empty string as `(empty)` and an error
//! as `SQLSTATE: message`, so `statement error 42P07` lines match on the
//! code the server sent. `EDDY_SLT=types_` runs only the files whose name
//! contains `types_`.
//!
//! A record holding several statements cannot be one extended-protocol
//! statement: PostgreSQL answers Parse with 42601 ("cannot insert multiple
//! commands into a prepared statement"). The extended run checks that Eddy
//! refuses it the same way, then sends the statements (as sqlparser's AST
//! splits them, printed back from the AST) one after another, each with
//! its own Parse..Sync, outside the implicit block a simple query would
//! give them. A record sqlparser cannot read (Eddy's own commands) is sent
//! whole: one such record of several statements fails loudly with 42601.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::{backend, frontend};
use sqllogictest::{DBOutput, DefaultColumnType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

mod common;
use common::Server;

/// A protocol error shown as `SQLSTATE: message`, so `statement error 42P07`
/// lines match on the code the server sent.
#[derive(Debug)]
struct DbError(String);

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DbError {}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            Some(db) => DbError(format!("{}: {}", db.code().code(), db.message())),
            None => DbError(e.to_string()),
        }
    }
}

impl From<std::io::Error> for DbError {
    fn from(e: std::io::Error) -> Self {
        DbError(format!("protocol: {e}"))
    }
}

/// A cell as both runners show it.
fn cell(v: Option<&str>) -> String {
    match v {
        None => "NULL".to_string(),
        Some("") => "(empty)".to_string(),
        Some(v) => v.to_string(),
    }
}

/// The simple query protocol, through tokio-postgres.
struct Simple {
    client: Client,
}

#[async_trait]
impl sqllogictest::AsyncDB for Simple {
    type Error = DbError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, Self::Error> {
        let msgs = self.client.simple_query(sql).await?;
        let mut rows = Vec::new();
        let mut ncols = None;
        let mut count = 0;
        for m in msgs {
            match m {
                SimpleQueryMessage::RowDescription(cols) => ncols = Some(cols.len()),
                SimpleQueryMessage::Row(r) => {
                    ncols = Some(r.len());
                    rows.push((0..r.len()).map(|i| cell(r.get(i))).collect());
                }
                SimpleQueryMessage::CommandComplete(n) => count = n,
                _ => {}
            }
        }
        Ok(output(ncols, rows, count))
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "eddy"
    }

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await
    }
}

fn output(ncols: Option<usize>, rows: Vec<Vec<String>>, count: u64) -> DBOutput<DefaultColumnType> {
    match ncols {
        Some(n) => DBOutput::Rows {
            types: vec![DefaultColumnType::Any; n],
            rows,
        },
        None => DBOutput::StatementComplete(count),
    }
}

/// The extended query protocol over a plain TCP connection: every record
/// is the unnamed statement and portal, results asked for in text format.
struct Extended {
    stream: TcpStream,
    /// Bytes read from the server and not yet parsed into messages.
    read: BytesMut,
}

/// What one Parse..Sync round trip answered.
#[derive(Default)]
struct Answer {
    ncols: Option<usize>,
    rows: Vec<Vec<String>>,
    count: u64,
    error: Option<DbError>,
}

impl Extended {
    async fn connect(port: u16) -> Result<Extended, DbError> {
        let stream = TcpStream::connect(("127.0.0.1", port)).await?;
        let mut conn = Extended {
            stream,
            read: BytesMut::new(),
        };
        let mut buf = BytesMut::new();
        frontend::startup_message([("user", "eddy"), ("database", "eddy")], &mut buf)?;
        conn.stream.write_all(&buf).await?;
        loop {
            match conn.message().await? {
                backend::Message::AuthenticationOk
                | backend::Message::ParameterStatus(_)
                | backend::Message::BackendKeyData(_)
                | backend::Message::NoticeResponse(_) => {}
                backend::Message::ReadyForQuery(_) => return Ok(conn),
                backend::Message::ErrorResponse(e) => return Err(db_error(&e)),
                _ => return Err(DbError("unexpected message at start-up".into())),
            }
        }
    }

    /// The next message from the server.
    async fn message(&mut self) -> Result<backend::Message, DbError> {
        loop {
            if let Some(m) = backend::Message::parse(&mut self.read)? {
                return Ok(m);
            }
            if self.stream.read_buf(&mut self.read).await? == 0 {
                return Err(DbError("protocol: the server closed the connection".into()));
            }
        }
    }

    /// Parse, Describe statement, Bind (text results), Describe portal,
    /// Execute, Sync; reads up to ReadyForQuery. Besides the answer it
    /// checks what a driver relies on: the statement and the portal
    /// describe the same columns, the portal's in text format, and every
    /// row has the described number of cells.
    async fn round_trip(&mut self, sql: &str) -> Result<Answer, DbError> {
        let mut buf = BytesMut::new();
        frontend::parse("", sql, [], &mut buf)?;
        frontend::describe(b'S', "", &mut buf)?;
        frontend::bind(
            "",
            "",
            [],
            std::iter::empty::<()>(),
            |_, _| unreachable!("no parameters"),
            [0], // one format code for every column: text
            &mut buf,
        )
        .map_err(|_| DbError("protocol: Bind".into()))?;
        frontend::describe(b'P', "", &mut buf)?;
        frontend::execute("", 0, &mut buf)?;
        frontend::sync(&mut buf);
        self.stream.write_all(&buf).await?;
        let mut answer = Answer::default();
        // the columns (type OIDs) the statement's Describe announced
        let mut statement_columns: Option<Vec<u32>> = None;
        let mut bound = false;
        let protocol = |what: String| Err(DbError(format!("protocol: {what} [SQL] {sql}")));
        loop {
            match self.message().await? {
                backend::Message::ReadyForQuery(_) => return Ok(answer),
                backend::Message::ErrorResponse(e) => {
                    // after an error the server skips to Sync: one error only
                    if let Some(first) = &answer.error {
                        return protocol(format!("a second error after {first}: {}", db_error(&e)));
                    }
                    answer.error = Some(db_error(&e));
                }
                backend::Message::BindComplete => bound = true,
                backend::Message::NoData if !bound => statement_columns = Some(Vec::new()),
                backend::Message::NoData => {
                    if statement_columns.as_ref().is_some_and(|c| !c.is_empty()) {
                        return protocol("the statement described columns, its portal none".into());
                    }
                }
                backend::Message::RowDescription(d) => {
                    let mut oids = Vec::new();
                    let mut fields = d.fields();
                    while let Some(f) = fields.next()? {
                        if bound && f.format() != 0 {
                            return protocol(format!("column {} is not in text format", f.name()));
                        }
                        oids.push(f.type_oid());
                    }
                    if !bound {
                        statement_columns = Some(oids);
                        continue;
                    }
                    if statement_columns.as_ref().is_some_and(|c| *c != oids) {
                        return protocol(format!(
                            "the statement described column types {statement_columns:?}, its portal {oids:?}"
                        ));
                    }
                    answer.ncols = Some(oids.len());
                }
                backend::Message::DataRow(r) => {
                    let mut row = Vec::new();
                    let mut ranges = r.ranges();
                    while let Some(range) = ranges.next()? {
                        row.push(match range {
                            None => cell(None),
                            Some(range) => match std::str::from_utf8(&r.buffer()[range]) {
                                Ok(s) => cell(Some(s)),
                                Err(_) => return protocol("a cell is not UTF-8".into()),
                            },
                        });
                    }
                    if answer.ncols != Some(row.len()) {
                        return protocol(format!(
                            "a row of {} cells after a description of {:?}",
                            row.len(),
                            answer.ncols
                        ));
                    }
                    answer.rows.push(row);
                }
                backend::Message::CommandComplete(c) => {
                    // as tokio-postgres reads a tag: its last word, if a number
                    answer.count = c
                        .tag()?
                        .rsplit(' ')
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                }
                backend::Message::CopyInResponse(_) => {
                    // as tokio-postgres's simple_query: a COPY FROM STDIN
                    // has no data here, so it fails
                    let mut fail = BytesMut::new();
                    frontend::copy_fail(
                        "COPY FROM STDIN is not supported by the runner",
                        &mut fail,
                    )?;
                    self.stream.write_all(&fail).await?;
                }
                backend::Message::PortalSuspended => {
                    return protocol("PortalSuspended without a row limit".into());
                }
                backend::Message::ParseComplete
                | backend::Message::ParameterDescription(_)
                | backend::Message::EmptyQueryResponse
                | backend::Message::NoticeResponse(_)
                // asynchronous, as from PostgreSQL (notify.slt listens to
                // its own NOTIFYs); drivers take it aside
                | backend::Message::NotificationResponse(_)
                | backend::Message::ParameterStatus(_)
                | backend::Message::CopyOutResponse(_)
                | backend::Message::CopyData(_)
                | backend::Message::CopyDone => {}
                _ => return protocol("unexpected message".into()),
            }
        }
    }
}

fn db_error(e: &backend::ErrorResponseBody) -> DbError {
    let mut code = String::new();
    let mut message = String::new();
    let mut fields = e.fields();
    while let Ok(Some(f)) = fields.next() {
        match f.type_() {
            b'C' => code = String::from_utf8_lossy(f.value_bytes()).into_owned(),
            b'M' => message = String::from_utf8_lossy(f.value_bytes()).into_owned(),
            _ => {}
        }
    }
    DbError(format!("{code}: {message}"))
}

/// The statements of a record that holds more than one, as sqlparser's
/// PostgreSQL dialect reads them; `None` for one statement, or for text
/// sqlparser cannot read (Eddy's own commands: the server decides).
fn several_statements(sql: &str) -> Option<Vec<String>> {
    let stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).ok()?;
    (stmts.len() > 1).then(|| stmts.iter().map(|s| s.to_string()).collect())
}

#[async_trait]
impl sqllogictest::AsyncDB for Extended {
    type Error = DbError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, Self::Error> {
        let Some(stmts) = several_statements(sql) else {
            let a = self.round_trip(sql).await?;
            return match a.error {
                Some(e) => Err(e),
                None => Ok(output(a.ncols, a.rows, a.count)),
            };
        };
        // PostgreSQL refuses several statements in one Parse (42601);
        // Eddy must too. Then each runs on its own, the rows of all of
        // them together as the simple protocol shows them.
        let whole = self.round_trip(sql).await?;
        match &whole.error {
            Some(e) if e.0.starts_with("42601:") => {}
            other => {
                return Err(DbError(format!(
                    "Parse of several statements: wanted 42601, got {}",
                    other
                        .as_ref()
                        .map_or("success".to_string(), |e| e.0.clone())
                )))
            }
        }
        let (mut ncols, mut rows, mut count) = (None, Vec::new(), 0);
        for s in stmts {
            let a = self.round_trip(&s).await?;
            if let Some(e) = a.error {
                return Err(e);
            }
            ncols = a.ncols.or(ncols);
            rows.extend(a.rows);
            count = a.count;
        }
        Ok(output(ncols, rows, count))
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "eddy"
    }

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await
    }
}

/// The `.slt` files to run (`EDDY_SLT` filters them by name).
fn slt_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/slt")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        // `EDDY_SLT=types_` runs only the files whose name contains it
        .filter(|p| match std::env::var("EDDY_SLT") {
            Ok(f) => p.to_string_lossy().contains(f.as_str()),
            Err(_) => true,
        })
        .collect();
    files.sort();
    assert!(!files.is_empty());
    files
}

/// A failure with whether the file's server was still running: a
/// "connection refused" at a file's first record was seen twice in this
/// suite and in `hermitage.rs` without any message from the server; its
/// exit status tells a crash from a probe answered by another listener.
fn with_server_state(e: String, mut srv: Server) -> String {
    let state = match srv.child.try_wait() {
        Ok(Some(status)) => format!("the server had exited ({status})"),
        Ok(None) => "the server was still running".to_string(),
        Err(err) => format!("the server's state is unknown ({err})"),
    };
    format!("{e}\n({state}, port {})", srv.port)
}

/// Runs one file through connections `make` opens.
async fn run_file<D, M>(file: &Path, make: M) -> Result<(), String>
where
    D: sqllogictest::AsyncDB<ColumnType = DefaultColumnType> + 'static,
    M: sqllogictest::MakeConnection<Conn = D>,
{
    let mut runner = sqllogictest::Runner::new(make);
    runner.with_column_validator(|_, _| true);
    runner
        .run_file_async(file)
        .await
        .map_err(|e| format!("{}: {e}", file.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictests() {
    let mut failures = Vec::new();
    for file in slt_files() {
        let srv = Server::start("trust");
        let port = srv.port;
        let result = run_file(&file, move || async move {
            let (client, conn) = tokio_postgres::connect(
                &format!("host=127.0.0.1 port={port} user=eddy dbname=eddy"),
                NoTls,
            )
            .await
            .map_err(DbError::from)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Simple { client })
        })
        .await;
        match result {
            Ok(()) => println!("ok (simple) {}", file.display()),
            Err(e) => failures.push(with_server_state(e, srv)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictests_extended() {
    let mut failures = Vec::new();
    for file in slt_files() {
        let srv = Server::start("trust");
        let port = srv.port;
        let result = run_file(&file, move || Extended::connect(port)).await;
        match result {
            Ok(()) => println!("ok (extended) {}", file.display()),
            Err(e) => failures.push(with_server_state(e, srv)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
