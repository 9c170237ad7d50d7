//! Runs every `tests/slt/*.slt` file against the real `eddy` binary over
//! the PostgreSQL protocol (tokio-postgres simple queries), one fresh
//! server per file.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use sqllogictest::{DBOutput, DefaultColumnType};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

mod common;
use common::Server;

struct Eddy {
    client: Client,
}

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

#[async_trait]
impl sqllogictest::AsyncDB for Eddy {
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
                    rows.push(
                        (0..r.len())
                            .map(|i| match r.get(i) {
                                None => "NULL".to_string(),
                                Some("") => "(empty)".to_string(),
                                Some(v) => v.to_string(),
                            })
                            .collect(),
                    );
                }
                SimpleQueryMessage::CommandComplete(n) => count = n,
                _ => {}
            }
        }
        Ok(match ncols {
            Some(n) => DBOutput::Rows {
                types: vec![DefaultColumnType::Any; n],
                rows,
            },
            None => DBOutput::StatementComplete(count),
        })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "eddy"
    }

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictests() {
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
    let mut failures = Vec::new();
    for file in files {
        let srv = Server::start("trust");
        let port = srv.port;
        let mut runner = sqllogictest::Runner::new(move || async move {
            let (client, conn) = tokio_postgres::connect(
                &format!("host=127.0.0.1 port={port} user=eddy dbname=eddy"),
                NoTls,
            )
            .await
            .map_err(DbError::from)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Eddy { client })
        });
        runner.with_column_validator(|_, _| true);
        match runner.run_file_async(&file).await {
            Ok(()) => println!("ok {}", file.display()),
            Err(e) => failures.push(format!("{}: {e}", file.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
