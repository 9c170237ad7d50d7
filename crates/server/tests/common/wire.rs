//! Helpers of the wire-level tests (`wire_values.rs`, `wire_arrays.rs`,
//! `wire_result_types.rs`): simple-query rows as text and errors by
//! SQLSTATE, parameters sent as text whatever their type,
//! and running one body against PostgreSQL 15 (when
//! `EDDY_WIRE_VALUES_PG` names one) and then against Eddy.

use bytes::{BufMut, BytesMut};
use tokio_postgres::types::{Format, IsNull, ToSql, Type};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

use super::Server;

type BoxError = Box<dyn std::error::Error + Sync + Send>;

/// A parameter sent in text format, whatever its declared type, as
/// pgjdbc, node-postgres and psycopg 3 (text mode) send them.
#[derive(Debug)]
pub struct Text(pub &'static str);

impl ToSql for Text {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, _: &Type) -> Format {
        Format::Text
    }

    tokio_postgres::types::to_sql_checked!();
}

/// Runs `body` against PostgreSQL (when `EDDY_WIRE_VALUES_PG` is set) and
/// then against a fresh Eddy server.
pub async fn on_servers<F, Fut>(body: F)
where
    F: Fn(Client) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if let Ok(conn) = std::env::var("EDDY_WIRE_VALUES_PG") {
        let (client, connection) = tokio_postgres::connect(&conn, NoTls)
            .await
            .expect("connect to PostgreSQL");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        body(client).await;
    }
    let srv = Server::start("trust");
    body(srv.connect().await).await;
}

/// The rows of a simple query, every value as the text the server sent.
pub async fn text_rows(c: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let msgs = c
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    msgs.iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
            }
            _ => None,
        })
        .collect()
}

/// `text_rows` with every value present, for compact expectations.
pub async fn texts(c: &Client, sql: &str) -> Vec<Vec<String>> {
    text_rows(c, sql)
        .await
        .into_iter()
        .map(|r| r.into_iter().map(|v| v.unwrap_or("NULL".into())).collect())
        .collect()
}

pub fn rows(expected: &[&[&str]]) -> Vec<Vec<String>> {
    expected
        .iter()
        .map(|r| r.iter().map(|v| v.to_string()).collect())
        .collect()
}

pub fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .unwrap_or_else(|| panic!("not a server error: {e}"))
        .code()
        .code()
        .to_string()
}

pub async fn exec(c: &Client, sql: &str) {
    if let Err(e) = c.batch_execute(sql).await {
        match e.as_db_error() {
            Some(db) => panic!("{sql}: {} {}", db.code().code(), db.message()),
            None => panic!("{sql}: {e}"),
        }
    }
}

pub async fn simple_error(c: &Client, sql: &str) -> String {
    let e = c.batch_execute(sql).await.expect_err(sql);
    sqlstate(&e)
}
