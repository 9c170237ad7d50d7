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
    let one: i32 = c.query_one("SELECT 1", &[]).await.unwrap().get(0);
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

    // a text parameter that is not UTF-8: 22021, as PostgreSQL says
    let code = bind_error(&c, "SELECT $1::text", Type::TEXT, vec![b'a', 0xff]).await;
    assert_eq!(code, "22021");
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

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .unwrap_or_else(|| panic!("not a server error: {e}"))
        .code()
        .code()
        .to_string()
}

/// A bug that panics costs the statement that hit it, never the server or
/// another session: the client gets XX000, an implicit transaction is
/// rolled back, an explicit block becomes failed (25P02 until ROLLBACK).
/// `eddy_fault_panic` exists only under `EDDY_FAULT_INJECTION=1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_costs_one_statement_not_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let mut srv =
        Server::start_with_env(Some(dir), path, "scram", &[("EDDY_FAULT_INJECTION", "1")]);
    let c = srv.connect().await;
    let other = srv.connect().await;
    c.batch_execute("CREATE TABLE p (id INT PRIMARY KEY, v TEXT)")
        .await
        .unwrap();

    // while rows stream to the client (simple and extended protocol)
    let e = c
        .simple_query("SELECT eddy_fault_panic('boom in a scan') FROM p UNION ALL SELECT eddy_fault_panic('x')")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "XX000");
    let e = c
        .query("SELECT eddy_fault_panic($1)", &[&"boom"])
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "XX000");
    let message = e.as_db_error().map(|d| d.message().to_string());
    assert!(
        message.as_deref().is_some_and(|m| m.contains("boom")),
        "{message:?}"
    );
    still_alive(&mut srv, &c).await;

    // inside an autocommit write: nothing of it lands, the session goes on
    let e = c
        .batch_execute("INSERT INTO p SELECT 1, eddy_fault_panic('in insert')")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "XX000");
    c.batch_execute("INSERT INTO p VALUES (2, 'two')")
        .await
        .unwrap();
    let n: i64 = other
        .query_one("SELECT count(*) FROM p", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        n, 1,
        "the panicked insert must not land and later ones must"
    );

    // inside a block: the transaction is failed and only rolls back
    c.batch_execute("BEGIN; INSERT INTO p VALUES (3, 'three')")
        .await
        .unwrap();
    let e = c
        .batch_execute("INSERT INTO p SELECT 4, eddy_fault_panic('in block')")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "XX000");
    let e = c.batch_execute("COMMIT").await;
    // COMMIT of a failed block reports ROLLBACK, as in PostgreSQL
    assert!(e.is_ok(), "{e:?}");
    let n: i64 = other
        .query_one("SELECT count(*) FROM p", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "a block that hit a panic must not commit");
    still_alive(&mut srv, &other).await;
}

/// Reads backend messages until one of type `until` (or the end); returns
/// them as (type, body).
async fn read_messages(sock: &mut tokio::net::TcpStream, until: u8) -> Vec<(u8, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    loop {
        let mut head = [0u8; 5];
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            sock.read_exact(&mut head),
        )
        .await;
        if !matches!(read, Ok(Ok(_))) {
            return out;
        }
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut body = vec![0u8; len.saturating_sub(4)];
        if sock.read_exact(&mut body).await.is_err() {
            return out;
        }
        let kind = head[0];
        out.push((kind, body));
        if kind == until {
            return out;
        }
    }
}

fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// A message whose counts or lengths overrun it is a protocol violation:
/// the client gets FATAL 08P01 ("invalid message format") and its
/// connection ends; nothing panics, and other connections go on. (pgwire's
/// decoders used to read past the message or panic: see
/// docs/decisions/0001-patched-pgwire.md.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_message_gets_08p01() {
    use tokio::io::AsyncWriteExt;
    let mut srv = Server::start("trust");
    let c = srv.connect().await;
    let mut sock = tokio::net::TcpStream::connect(("127.0.0.1", srv.port))
        .await
        .unwrap();
    let mut startup = Vec::new();
    startup.extend_from_slice(&196608u32.to_be_bytes());
    for kv in ["user", "eddy", "database", "eddy"] {
        startup.extend_from_slice(kv.as_bytes());
        startup.push(0);
    }
    startup.push(0);
    let mut msg = ((startup.len() + 4) as u32).to_be_bytes().to_vec();
    msg.extend_from_slice(&startup);
    sock.write_all(&msg).await.unwrap();
    let greeting = read_messages(&mut sock, b'Z').await;
    assert_eq!(greeting.last().map(|m| m.0), Some(b'Z'), "no ReadyForQuery");

    let mut parse = b"\0SELECT $1::text\0".to_vec();
    parse.extend_from_slice(&1u16.to_be_bytes());
    parse.extend_from_slice(&25u32.to_be_bytes());
    // Bind: one text parameter that claims 2^31 - 1 bytes but has 4
    let mut bind = b"\0\0".to_vec();
    bind.extend_from_slice(&0u16.to_be_bytes());
    bind.extend_from_slice(&1u16.to_be_bytes());
    bind.extend_from_slice(&i32::MAX.to_be_bytes());
    bind.extend_from_slice(b"abcd");
    let mut wire = frame(b'P', &parse);
    wire.extend(frame(b'B', &bind));
    wire.extend(frame(b'S', &[]));
    sock.write_all(&wire).await.unwrap();
    let replies = read_messages(&mut sock, b'Z').await;
    let error = replies
        .iter()
        .find(|(kind, _)| *kind == b'E')
        .map(|(_, body)| body.clone())
        .expect("an ErrorResponse");
    let fields: Vec<(u8, String)> = error
        .split(|b| *b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| (f[0], String::from_utf8_lossy(&f[1..]).into_owned()))
        .collect();
    assert!(fields.contains(&(b'C', "08P01".to_string())), "{fields:?}");
    assert!(fields.contains(&(b'S', "FATAL".to_string())), "{fields:?}");
    still_alive(&mut srv, &c).await;
}

/// A statement nested thousands of levels deep (`1+1+...+1`, a long OR
/// chain) overflowed a worker's stack and aborted the server; it is now
/// 54001 ("stack depth limit exceeded", as PostgreSQL says), and one just
/// under the limit still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_too_deep_is_54001_not_a_crash() {
    let mut srv = Server::start("scram");
    let c = srv.connect().await;
    c.batch_execute("CREATE TABLE deep (id INT PRIMARY KEY)")
        .await
        .unwrap();
    let sum = format!("SELECT {}", vec!["1"; 10_000].join(" + "));
    let ors = format!(
        "SELECT count(*) FROM deep WHERE {}",
        (0..10_000)
            .map(|i| format!("id = {i}"))
            .collect::<Vec<_>>()
            .join(" OR ")
    );
    for sql in [&sum, &ors] {
        let e = c.simple_query(sql).await.unwrap_err();
        assert_eq!(sqlstate(&e), "54001");
        let e = c.prepare(sql).await.unwrap_err();
        assert_eq!(sqlstate(&e), "54001");
        still_alive(&mut srv, &c).await;
    }
    let under = format!("SELECT ({})::text", vec!["1"; 300].join(" + "));
    let rows = c.simple_query(&under).await.unwrap();
    let value = rows.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
        _ => None,
    });
    assert_eq!(value.as_deref(), Some("300"));
}

/// Binary COPY data that stops inside a tuple (a dropped upload) is an
/// error and loads nothing, as in PostgreSQL ("unexpected EOF in COPY
/// data", 22P04); it used to commit the complete tuples before the cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_binary_copy_loads_nothing() {
    let mut srv = Server::start("scram");
    let c = srv.connect().await;
    c.batch_execute("CREATE TABLE cb (id INT PRIMARY KEY)")
        .await
        .unwrap();
    let mut data = b"PGCOPY\n\xff\r\n\0".to_vec();
    data.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
    for id in [1i32, 2] {
        data.extend_from_slice(&1i16.to_be_bytes());
        data.extend_from_slice(&4i32.to_be_bytes());
        data.extend_from_slice(&id.to_be_bytes());
    }
    data.extend_from_slice(&1i16.to_be_bytes());
    data.extend_from_slice(&4i32.to_be_bytes());
    data.extend_from_slice(&[0, 0]); // half of the third tuple's value
    let sink = c
        .copy_in("COPY cb FROM STDIN WITH (FORMAT binary)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from(data)).await.unwrap();
    let e = sink.finish().await.unwrap_err();
    assert_eq!(sqlstate(&e), "22P04", "{e:?}");
    let n: i64 = c
        .query_one("SELECT count(*) FROM cb", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    // and a partial signature is not an empty load
    let sink = c
        .copy_in("COPY cb FROM STDIN WITH (FORMAT binary)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"PGCOP"))
        .await
        .unwrap();
    let e = sink.finish().await.unwrap_err();
    assert_eq!(sqlstate(&e), "22P04", "{e:?}");
    still_alive(&mut srv, &c).await;
}
