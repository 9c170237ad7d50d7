//! One hostile parameter or row must cost the client an error with
//! PostgreSQL's SQLSTATE, never the server: each case below used to crash,
//! hang or exhaust memory, and after each the same connection still works
//! and the process is still running.

use std::error::Error;

use bytes::{BufMut, BytesMut};
use futures::SinkExt;
use tokio_postgres::types::{IsNull, ToSql, Type};
use tokio_postgres::Client;

mod common;
use common::*;

/// A parameter sent as exactly these bytes, whatever its declared type.
#[derive(Debug)]
struct Raw(Vec<u8>);

impl ToSql for Raw {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

fn be(parts: &[i64], widths: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    for (v, w) in parts.iter().zip(widths) {
        out.extend_from_slice(&v.to_be_bytes()[8 - w..]);
    }
    out
}

/// Bind `raw` as the one parameter of `sql` (declared as `ty`) and return
/// the SQLSTATE of the error it must produce.
async fn bind_error(c: &Client, sql: &str, ty: Type, raw: Vec<u8>) -> String {
    let stmt = c.prepare_typed(sql, &[ty]).await.expect("prepare");
    let e = c
        .query(&stmt, &[&Raw(raw)])
        .await
        .expect_err("hostile parameter accepted");
    e.as_db_error()
        .unwrap_or_else(|| panic!("not a server error: {e}"))
        .code()
        .code()
        .to_string()
}

async fn still_alive(srv: &mut Server, c: &Client) {
    let one: i64 = c.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
    assert!(srv.child.try_wait().unwrap().is_none(), "server exited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_parameters_get_sqlstates_not_crashes() {
    let mut srv = Server::start("scram");
    let c = srv.connect().await;

    // $4000000000 sized a Vec of parameter types
    let e = c.prepare("SELECT $4000000000").await.unwrap_err();
    assert_eq!(e.as_db_error().unwrap().code().code(), "42P02");
    still_alive(&mut srv, &c).await;

    // a negative numeric dscale looped until out of memory
    let numeric = be(&[1, 0, 0, -1, 1], &[2, 2, 2, 2, 2]);
    let code = bind_error(&c, "SELECT $1::numeric", Type::NUMERIC, numeric).await;
    assert_eq!(code, "22P03");
    still_alive(&mut srv, &c).await;

    // an array declaring 2^31 - 1 elements was Vec::with_capacity'd
    let array = be(
        &[1, 0, 23, i32::MAX as i64, 1, 4, 7],
        &[4, 4, 4, 4, 4, 4, 4],
    );
    let code = bind_error(&c, "SELECT $1::int4[]", Type::INT4_ARRAY, array).await;
    assert_eq!(code, "22P03");
    still_alive(&mut srv, &c).await;

    // binary infinity dates and timestamps overflowed the epoch shift
    let code = bind_error(
        &c,
        "SELECT $1::date",
        Type::DATE,
        i32::MAX.to_be_bytes().to_vec(),
    )
    .await;
    assert_eq!(code, "22008");
    let code = bind_error(
        &c,
        "SELECT $1::timestamp",
        Type::TIMESTAMP,
        i64::MIN.to_be_bytes().to_vec(),
    )
    .await;
    assert_eq!(code, "22008");
    still_alive(&mut srv, &c).await;

    // a multi-byte zone suffix was sliced inside a character
    c.batch_execute("CREATE TABLE ts (id INT PRIMARY KEY, at TIMESTAMP)")
        .await
        .unwrap();
    let sink = c.copy_in("COPY ts FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from(
        "1\t2024-01-01 10:00:00+1\u{e9}1\n".as_bytes().to_vec(),
    ))
    .await
    .unwrap();
    let e = sink.finish().await.unwrap_err();
    assert!(e.as_db_error().is_some(), "{e}");
    still_alive(&mut srv, &c).await;
}
