//! End-to-end tests: start the real `eddy` binary on a free loopback port
//! with a temporary data directory and talk to it with tokio-postgres,
//! psql and pgbench (when installed). No mocks.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio_postgres::NoTls;

mod common;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_prepared_and_errors() {
    let mut srv = Server::start("scram");
    let c = srv.connect().await;
    c.batch_execute("CREATE TABLE kv (k BIGINT PRIMARY KEY, v TEXT, n INT) WITH (orientation = 'row,column', shard_count = 2)")
        .await
        .unwrap();
    c.batch_execute("INSERT INTO kv VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)")
        .await
        .unwrap();
    // prepared fast-path lookup with a binary bind
    let get = c.prepare("SELECT v, n FROM kv WHERE k = $1").await.unwrap();
    let row = c.query_one(&get, &[&2i64]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "b");
    assert_eq!(row.get::<_, i32>(1), 20);
    assert!(c.query_opt(&get, &[&99i64]).await.unwrap().is_none());
    // IN list and ANY
    let rows = c
        .query("SELECT k FROM kv WHERE k IN ($1, $2)", &[&1i64, &3i64])
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let rows = c
        .query("SELECT k FROM kv WHERE k = ANY($1)", &[&vec![1i64, 2]])
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    // upsert
    let n = c
        .execute("INSERT INTO kv VALUES ($1, $2, $3) ON CONFLICT (k) DO UPDATE SET n = kv.n + EXCLUDED.n", &[&1i64, &"z", &5i32])
        .await
        .unwrap();
    assert_eq!(n, 1);
    let row = c
        .query_one("SELECT n FROM kv WHERE k = 1", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 15);
    c.execute(
        "INSERT INTO kv VALUES (1, 'x', 0) ON CONFLICT DO NOTHING",
        &[],
    )
    .await
    .unwrap();
    // update / delete with arbitrary WHERE
    assert_eq!(
        c.execute("UPDATE kv SET v = v || '!' WHERE n >= 20", &[])
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        c.execute("DELETE FROM kv WHERE v = 'c!'", &[])
            .await
            .unwrap(),
        1
    );
    let rows = c
        .query("SELECT k, v FROM kv ORDER BY k", &[])
        .await
        .unwrap();
    let got: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, vec![(1, "a".to_string()), (2, "b!".to_string())]);
    // SQLSTATEs
    let err = |e: tokio_postgres::Error| e.code().map(|c| c.code().to_string()).unwrap_or_default();
    assert_eq!(
        err(c.batch_execute("SELECT * FROM nope").await.unwrap_err()),
        "42P01"
    );
    // PostgreSQL's words, with the name as the statement wrote it, over
    // both protocols (was "table 'eddy.public.nope' not found")
    let message = |e: tokio_postgres::Error| {
        e.as_db_error()
            .map(|d| (d.code().code().to_string(), d.message().to_string()))
    };
    for sql in [
        "SELECT * FROM nope",
        "SELECT k FROM kv WHERE k IN (SELECT k FROM public.nope)",
        "WITH w AS (SELECT 1) SELECT * FROM w, nope.t",
    ] {
        let written = sql.rsplit(' ').find(|w| w.contains("nope")).unwrap_or("");
        let written = written.trim_end_matches(')');
        let want = Some((
            "42P01".to_string(),
            format!("relation \"{written}\" does not exist"),
        ));
        assert_eq!(
            message(c.batch_execute(sql).await.unwrap_err()),
            want,
            "{sql}"
        );
        assert_eq!(message(c.prepare(sql).await.unwrap_err()), want, "{sql}");
    }
    assert_eq!(
        err(c.batch_execute("SELECT nope FROM kv").await.unwrap_err()),
        "42703"
    );
    assert_eq!(err(c.batch_execute("SELEC 1").await.unwrap_err()), "42601");
    assert_eq!(
        err(c.batch_execute("SELECT 1/0").await.unwrap_err()),
        "22012"
    );
    let dup = c
        .batch_execute("INSERT INTO kv VALUES (2, 'dup', 1)")
        .await
        .unwrap_err();
    // PostgreSQL's words: the key is the DETAIL, not part of the message
    let db = dup.as_db_error().expect("db error");
    assert_eq!(
        db.message(),
        "duplicate key value violates unique constraint \"kv_pkey\""
    );
    assert_eq!(db.detail(), Some("Key (k)=(2) already exists."));
    assert_eq!(err(dup), "23505");
    // the connection still works after errors
    c.batch_execute("BEGIN; INSERT INTO kv VALUES (7, 'seven', 7); COMMIT")
        .await
        .unwrap();
    let v: String = c.query_one("SELECT version()", &[]).await.unwrap().get(0);
    assert!(v.contains("Eddy"));
    drop(c);

    // restart durability
    srv.stop();
    let data = srv.data_dir.clone();
    let dir = srv._dir.take();
    drop(srv);
    let srv2 = Server::start_in(dir, data, "scram");
    let c = srv2.connect().await;
    let rows = c.query("SELECT k FROM kv ORDER BY k", &[]).await.unwrap();
    let ks: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(ks, vec![1, 2, 7]);
}

/// COPY FROM evaluates a table's CHECK constraints on every row, outside
/// and inside a transaction block, as PostgreSQL does: one failing row
/// fails the COPY with 23514 naming the constraint, and nothing of it is
/// loaded; NULL passes a check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_checks_every_row() {
    use futures::SinkExt;
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute(
        "CREATE TABLE stock (sku int PRIMARY KEY, qty int CHECK (qty >= 0), \
         price numeric(8,2), CONSTRAINT stock_price_positive CHECK (price > 0))",
    )
    .await
    .unwrap();
    async fn copy(c: &tokio_postgres::Client, data: &'static [u8]) -> Result<u64, String> {
        let sink = c.copy_in("COPY stock FROM STDIN").await.unwrap();
        futures::pin_mut!(sink);
        sink.send(bytes::Bytes::from_static(data)).await.unwrap();
        sink.finish().await.map_err(|e| {
            let db = e.as_db_error().expect("db error");
            format!(
                "{} {} | {}",
                db.code().code(),
                db.message(),
                db.detail().unwrap_or_default()
            )
        })
    }
    assert_eq!(copy(&c, b"1\t5\t1.50\n2\t\\N\t\\N\n").await, Ok(2));
    let e = copy(&c, b"3\t1\t2.00\n4\t-1\t2.00\n").await.unwrap_err();
    assert_eq!(
        e,
        "23514 new row for relation \"stock\" violates check constraint \"stock_qty_check\" \
         | Failing row contains (4, -1, 2.00)."
    );
    let e = copy(&c, b"5\t1\t0\n").await.unwrap_err();
    assert!(e.contains("stock_price_positive"), "{e}");
    // inside a block: the error aborts it, the rows before it roll back
    c.batch_execute("BEGIN").await.unwrap();
    assert_eq!(copy(&c, b"6\t1\t1.00\n").await, Ok(1));
    assert!(copy(&c, b"7\t-9\t1.00\n").await.is_err());
    c.batch_execute("ROLLBACK").await.unwrap();
    let skus: Vec<i32> = c
        .query("SELECT sku FROM stock ORDER BY sku", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(skus, vec![1, 2]);
}

/// A COPY line that does not read says where in PostgreSQL's CONTEXT
/// field, apart from the message, as PostgreSQL 15 says it (answers
/// recorded from PostgreSQL 15 with psql).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_errors_say_where_in_a_context_line() {
    use futures::SinkExt;
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute("CREATE TABLE ct2 (a int, b text)")
        .await
        .unwrap();
    async fn copy(c: &tokio_postgres::Client, data: &'static [u8]) -> (String, String, String) {
        let sink = c.copy_in("COPY ct2 FROM STDIN").await.unwrap();
        futures::pin_mut!(sink);
        sink.send(bytes::Bytes::from_static(data)).await.unwrap();
        let e = sink.finish().await.unwrap_err();
        let db = e.as_db_error().expect("db error");
        (
            db.code().code().to_string(),
            db.message().to_string(),
            db.where_().unwrap_or_default().to_string(),
        )
    }
    let wanted = |code: &str, message: &str, context: &str| {
        (code.to_string(), message.to_string(), context.to_string())
    };
    assert_eq!(
        copy(&c, b"1\tok\nzz\tw\n").await,
        wanted(
            "22P02",
            "invalid input syntax for type integer: \"zz\"",
            "COPY ct2, line 2, column a: \"zz\""
        )
    );
    assert_eq!(
        copy(&c, b"1\n").await,
        wanted(
            "22P04",
            "missing data for column \"b\"",
            "COPY ct2, line 1: \"1\""
        )
    );
    assert_eq!(
        copy(&c, b"1\tx\ty\n").await,
        wanted(
            "22P04",
            "extra data after last expected column",
            "COPY ct2, line 1: \"1\tx\ty\""
        )
    );
    let long: &'static [u8] = Box::leak(format!("{}\tx\n", "9".repeat(120)).into_bytes().into());
    let (code, _, context) = copy(&c, long).await;
    assert_eq!(code, "22003");
    assert_eq!(
        context,
        format!("COPY ct2, line 1, column a: \"{}...\"", "9".repeat(100))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_and_out() {
    use futures::SinkExt;
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute("CREATE TABLE t (id INT PRIMARY KEY, name TEXT, score DOUBLE PRECISION)")
        .await
        .unwrap();
    let sink = c
        .copy_in("COPY t FROM STDIN WITH (FORMAT csv)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(
        b"1,alice,1.5\n2,\"bob, jr\",2.5\n3,,\n",
    ))
    .await
    .unwrap();
    let n = sink.finish().await.unwrap();
    assert_eq!(n, 3);
    let row = c
        .query_one("SELECT name, score FROM t WHERE id = 2", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "bob, jr");
    // a malformed row: nothing is loaded, clear error with the line number
    let sink = c.copy_in("COPY t FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(
        b"10\tx\t1\n11\ty\tnot-a-number\n",
    ))
    .await
    .unwrap();
    let e = sink.finish().await.unwrap_err();
    let db = e.as_db_error().expect("db error");
    assert_eq!(db.code().code(), "22P02");
    assert!(
        db.where_().is_some_and(|w| w.contains("line 2")),
        "{:?}",
        db.where_()
    );
    let cnt: i64 = c
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(cnt, 3);
    // COPY TO STDOUT
    let stream = c
        .copy_out("COPY (SELECT id, name FROM t ORDER BY id) TO STDOUT WITH (FORMAT csv)")
        .await
        .unwrap();
    use futures::TryStreamExt;
    let chunks: Vec<bytes::Bytes> = stream.try_collect().await.unwrap();
    let text: String = chunks
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    assert_eq!(text, "1,alice\n2,\"bob, jr\"\n3,\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_rejects_a_wrong_password_and_many_connections_work() {
    let srv = Server::start("scram");
    let e = srv
        .connect_as("eddy", "wrong")
        .await
        .map(|_| ())
        .expect_err("must fail");
    assert!(
        e.to_string().to_lowercase().contains("password") || e.code().is_some(),
        "{e}"
    );
    let c = srv.connect().await;
    c.batch_execute("CREATE TABLE c (id INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    let mut handles = Vec::new();
    for i in 0..8i32 {
        let cl = srv.connect().await;
        handles.push(tokio::spawn(async move {
            for j in 0..10i32 {
                cl.execute("INSERT INTO c VALUES ($1, $2)", &[&(i * 100 + j), &j])
                    .await
                    .unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let n: i64 = c
        .query_one("SELECT count(*) FROM c", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 80);
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn psql(server: &Server, sql: &str) -> (bool, String) {
    let out = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
            "-U",
            "eddy",
            "-d",
            "eddy",
        ])
        .args(["-X", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .env("PGPASSWORD", "secret")
        .output()
        .expect("run psql");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn psql_describe_commands_work() {
    if !have("psql") {
        println!("notice: psql is not installed; skipping the psql test");
        return;
    }
    let server = Server::start("scram");
    let (ok, out) = psql(
        &server,
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer TEXT NOT NULL, amount DECIMAL(12,2)) WITH (orientation = 'row,column')",
    );
    assert!(ok, "{out}");
    let (ok, out) = psql(&server, "\\dt");
    assert!(ok && out.contains("orders"), "\\dt: {out}");
    let (ok, out) = psql(&server, "\\d orders");
    assert!(
        ok && out.contains("customer") && out.contains("amount"),
        "\\d: {out}"
    );
    let (ok, out) = psql(&server, "\\d+ orders");
    assert!(ok && out.contains("customer"), "\\d+: {out}");
    let (ok, out) = psql(
        &server,
        "INSERT INTO orders VALUES (1, 'ann', 10.50); SELECT customer, amount FROM orders",
    );
    assert!(ok && out.contains("ann") && out.contains("10.50"), "{out}");
    // \du's "Member of" lists the role's grants (it was empty: an
    // ARRAY(SELECT ...) over pg_catalog was taken for an empty catalog)
    let (ok, out) = psql(
        &server,
        "CREATE ROLE readers; CREATE ROLE ann LOGIN; GRANT readers TO ann",
    );
    assert!(ok, "{out}");
    let (ok, out) = psql(&server, "\\du");
    let ann = out.lines().find(|l| l.trim_start().starts_with("ann"));
    assert!(
        ok && ann.is_some_and(|l| l.contains("{readers}")),
        "\\du: {out}"
    );
}

#[test]
fn pgbench_initialises_and_runs_select_only_prepared() {
    if !have("pgbench") {
        println!("notice: pgbench is not installed; skipping the pgbench test");
        return;
    }
    let server = Server::start("scram");
    let port = server.port.to_string();
    let base = ["-h", "127.0.0.1", "-p", port.as_str(), "-U", "eddy"];
    let init = Command::new("pgbench")
        .args(["-i", "-s", "1"])
        .args(base)
        .arg("eddy")
        .env("PGPASSWORD", "secret")
        .output()
        .expect("run pgbench -i");
    let text =
        String::from_utf8_lossy(&init.stderr).to_string() + &String::from_utf8_lossy(&init.stdout);
    assert!(init.status.success(), "pgbench -i failed: {text}");
    let run = Command::new("pgbench")
        .args(["-S", "-M", "prepared", "-T", "5", "-c", "2"])
        .args(base)
        .arg("eddy")
        .env("PGPASSWORD", "secret")
        .output()
        .expect("run pgbench -S");
    let text =
        String::from_utf8_lossy(&run.stdout).to_string() + &String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "pgbench -S failed: {text}");
    let processed: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
        .and_then(|s| s.split('/').next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    assert!(processed > 100, "too few transactions: {text}");
    println!(
        "pgbench -S -M prepared -T 5 -c 2: {}",
        text.lines()
            .filter(|l| l.starts_with("tps"))
            .collect::<Vec<_>>()
            .join("; ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_request_stops_a_running_query() {
    let server = Server::start("scram");
    let client = server.connect().await;
    let token = client.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        token.cancel_query(NoTls).await
    });
    let started = Instant::now();
    let r = client
        .simple_query(
            "SELECT count(*) FROM generate_series(1, 20000000000) AS t(x) WHERE x % 7 = 3",
        )
        .await;
    let _ = canceller.await;
    let err = r.expect_err("the query should have been cancelled");
    assert_eq!(err.code().map(|c| c.code()), Some("57014"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    // the connection is still usable
    let rows = client.simple_query("SELECT 1").await.expect("after cancel");
    assert!(!rows.is_empty());
}

fn code_of(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

/// `statement_timeout` stops a statement that runs too long with 57014
/// ("canceling statement due to statement timeout"), while it plans, runs
/// or streams; what the stopped statement wrote never lands, the session
/// goes on in autocommit, and inside a block the block fails (25P02) as in
/// PostgreSQL. A client's cancel of a write leaves the session clean too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_timeout_stops_statements_and_leaves_the_session_clean() {
    let server = Server::start("scram");
    let c = server.connect().await;
    let other = server.connect().await;
    c.batch_execute("CREATE TABLE st (id BIGINT PRIMARY KEY, v BIGINT)")
        .await
        .unwrap();
    let e = c
        .batch_execute("SET statement_timeout = 'soon'")
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), "22023");
    c.batch_execute("SET statement_timeout = '300ms'")
        .await
        .unwrap();
    let long_select =
        "SELECT count(*) FROM generate_series(1, 20000000000) AS t(x) WHERE x % 7 = 3";
    let long_insert = "INSERT INTO st SELECT x, x FROM generate_series(1, 2000000000) AS t(x)";
    for sql in [long_select, long_insert] {
        let started = Instant::now();
        let e = c.simple_query(sql).await.unwrap_err();
        assert_eq!(code_of(&e), "57014", "{sql}: {e}");
        let message = e.as_db_error().map(|d| d.message().to_string());
        assert_eq!(
            message.as_deref(),
            Some("canceling statement due to statement timeout")
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{sql}");
    }
    // the extended protocol too
    let e = c.query(long_select, &[]).await.unwrap_err();
    assert_eq!(code_of(&e), "57014");
    // nothing of the stopped INSERT landed, and the next one commits
    c.batch_execute("INSERT INTO st VALUES (1, 1)")
        .await
        .unwrap();
    let n: i64 = other
        .query_one("SELECT count(*) FROM st", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);

    // inside a block the timeout fails the block
    c.batch_execute("BEGIN; INSERT INTO st VALUES (2, 2)")
        .await
        .unwrap();
    let e = c.simple_query(long_insert).await.unwrap_err();
    assert_eq!(code_of(&e), "57014");
    let e = c.simple_query("SELECT 1").await.unwrap_err();
    assert_eq!(code_of(&e), "25P02");
    c.batch_execute("ROLLBACK").await.unwrap();
    c.batch_execute("SET statement_timeout = 0").await.unwrap();
    let n: i64 = other
        .query_one("SELECT count(*) FROM st", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);

    // a client's cancel in the middle of a write: the session is clean after
    let token = c.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        token.cancel_query(NoTls).await
    });
    let e = c.simple_query(long_insert).await.unwrap_err();
    let _ = canceller.await;
    assert_eq!(code_of(&e), "57014");
    c.batch_execute("INSERT INTO st VALUES (3, 3)")
        .await
        .unwrap();
    let n: i64 = other
        .query_one("SELECT count(*) FROM st", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2, "the write after a cancel must commit on its own");
}

/// CSV records that arrive split across many CopyData messages, with
/// quoted newlines and quotes cut between messages, load exactly; a long
/// record is scanned once (it was rescanned from its start on every
/// message: a 16 MiB field in 64 KiB messages took 1.2 s, quadratically).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_records_split_across_messages_load_exactly() {
    use futures::SinkExt;
    let server = Server::start("scram");
    let c = server.connect().await;
    c.batch_execute("CREATE TABLE chunks (id INT PRIMARY KEY, v TEXT)")
        .await
        .unwrap();
    let long = "y".repeat(200_000);
    let data = format!("1,\"a,\nb\"\"c\"\n2,plain\n3,\"{long}\"\n4,\"multi\nline\nvalue\"\n");
    let sink = c
        .copy_in("COPY chunks FROM STDIN WITH (FORMAT csv)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    for piece in data.as_bytes().chunks(7) {
        sink.send(bytes::Bytes::copy_from_slice(piece))
            .await
            .unwrap();
    }
    assert_eq!(sink.finish().await.unwrap(), 4);
    let rows = c
        .query("SELECT id, v FROM chunks ORDER BY id", &[])
        .await
        .unwrap();
    let got: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        got,
        vec![
            (1, "a,\nb\"c".to_string()),
            (2, "plain".to_string()),
            (3, long),
            (4, "multi\nline\nvalue".to_string()),
        ]
    );
}

/// More connections than `--max-connections` are refused as PostgreSQL
/// refuses them (FATAL 53300, "sorry, too many clients already"); a place
/// freed by a closed connection is taken by the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_limit_get_53300() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let server = Server::start_with(Some(dir), path, "scram", &[], &["--max-connections", "2"]);
    let a = server.connect().await;
    let b = server.connect().await;
    let e = server
        .connect_as("eddy", "secret")
        .await
        .expect_err("a third connection must be refused");
    assert_eq!(code_of(&e), "53300", "{e}");
    drop(b);
    // the server notices the close asynchronously
    let mut c = None;
    for _ in 0..50 {
        if let Ok(client) = server.connect_as("eddy", "secret").await {
            c = Some(client);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let c = c.expect("a freed place is taken");
    for client in [&a, &c] {
        let rows = client.simple_query("SELECT 1").await.unwrap();
        assert!(!rows.is_empty());
    }
}

/// The server's resident memory in bytes (`VmRSS`).
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// `n` connections opened at once (in waves of 100), each running
/// `SELECT 1`; the clients, and how many failed.
async fn open_many(server: &Server, n: usize) -> (Vec<tokio_postgres::Client>, Vec<String>) {
    let mut clients = Vec::new();
    let mut errors = Vec::new();
    for wave in 0..n.div_ceil(100) {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..(n - wave * 100).min(100) {
            let port = server.port;
            set.spawn(async move {
                let url = format!("host=127.0.0.1 port={port} user=eddy password=x dbname=eddy");
                let (c, conn) = tokio_postgres::connect(&url, NoTls).await?;
                tokio::spawn(conn);
                c.simple_query("SELECT 1").await?;
                Ok::<_, tokio_postgres::Error>(c)
            });
        }
        while let Some(r) = set.join_next().await {
            match r {
                Ok(Ok(c)) => clients.push(c),
                Ok(Err(e)) => errors.push(format!("{e} ({})", code_of(&e))),
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    (clients, errors)
}

async fn wait_for_connections(server: &Server, n: usize) {
    assert!(
        server
            .metric_line_within(&format!("eddy_connections {n}"), 10)
            .await,
        "the server did not come to {n} connections"
    );
}

/// Issue 15's load test: 1,000 concurrent connections (the configured
/// `max_connections`) open and query with no error; more are refused
/// cleanly with 53300; after they close, 1,000 more open, query and close
/// with no error; the server gives back at least half the memory the
/// connections took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_connections_then_53300_and_memory_comes_back() {
    const N: usize = 1000;
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let server = Server::start_with(
        Some(dir),
        path,
        "trust",
        &[],
        &["--max-connections", "1000"],
    );
    let pid = server.child.id();
    drop(server.connect().await);
    wait_for_connections(&server, 0).await;
    let before = rss_bytes(pid);

    let (clients, errors) = open_many(&server, N).await;
    assert!(
        errors.is_empty(),
        "{} errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    assert_eq!(clients.len(), N);
    let (extra, refused) = open_many(&server, 20).await;
    assert!(
        extra.is_empty(),
        "over max_connections: {} accepted",
        extra.len()
    );
    assert!(
        refused.iter().all(|e| e.ends_with("(53300)")),
        "refused otherwise than with 53300: {refused:?}"
    );
    let peak = rss_bytes(pid);
    drop(clients);
    wait_for_connections(&server, 0).await;

    // churn: open, query, close
    for _ in 0..2 {
        let (clients, errors) = open_many(&server, N / 2).await;
        assert!(errors.is_empty(), "churn: {errors:?}");
        drop(clients);
    }
    wait_for_connections(&server, 0).await;
    // the server trims its heap after a drop in connections (`memory_trim`)
    let bound = |peak: u64| before + peak.saturating_sub(before) / 2 + (16 << 20);
    let mut after = rss_bytes(pid);
    for _ in 0..50 {
        if after <= bound(peak) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = rss_bytes(pid);
    }
    eprintln!(
        "1000 connections: RSS {} MiB before, {} MiB with 1000 open, {} MiB after; {:?}",
        before >> 20,
        peak >> 20,
        after >> 20,
        started.elapsed()
    );
    // Measured: 25 MiB before, about 160 with 1,000 open, 75-85 after
    // (without the trim 170-190 and growing with churn). Not all of it
    // comes back: what stays is heap pages still holding a few live
    // allocations each.
    assert!(
        after <= bound(peak),
        "memory not given back: {before} before, {peak} at the peak, {after} after"
    );
}

/// A hard open-file limit too low for `max_connections` stops the server
/// at start-up with a message naming both ways out, instead of failing
/// accepts under load; a soft limit below the need is raised.
#[test]
fn max_connections_beyond_the_open_file_limit_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let run = |limit: &str, max: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n {limit} && exec \"$0\" server --data-dir \"$1\" --pg-addr 127.0.0.1:0 \
                 --http-addr 127.0.0.1:0 --auth trust --max-connections {max} & pid=$!; \
                 sleep 3; if kill $pid 2>/dev/null; then wait $pid; echo STARTED; else wait $pid; fi"
            ))
            .arg(env!("CARGO_BIN_EXE_eddy"))
            .arg(dir.path())
            .output()
            .expect("run eddy")
    };
    let out = run("600", "1000");
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("STARTED"), "{text}");
    assert!(
        text.contains("open files") && text.contains("max_connections"),
        "{text}"
    );
    let ok = run("1200", "100");
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(text.contains("STARTED"), "{text}");
}

/// A constraint violation names its schema, table, column and constraint
/// in the error's fields, as PostgreSQL's does (psycopg's `diag`, asyncpg's
/// `constraint_name`, pgjdbc's `getConstraint()`): the values below are
/// PostgreSQL 15's for the same statements.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constraint_errors_name_their_table_and_constraint() {
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute(
        "CREATE SCHEMA app;
         CREATE TABLE app.users (id INT PRIMARY KEY, email TEXT UNIQUE, age INT CHECK (age > 0), name TEXT NOT NULL);
         CREATE TABLE posts (id INT PRIMARY KEY, author INT REFERENCES app.users (id));
         INSERT INTO app.users VALUES (1, 'a@x', 30, 'a');
         INSERT INTO posts VALUES (10, 1);",
    )
    .await
    .unwrap();
    let fields = |sql: &'static str| {
        let c = &c;
        async move {
            let e = c.batch_execute(sql).await.expect_err(sql);
            let db = e.as_db_error().expect("a server error");
            (
                db.code().code().to_string(),
                db.schema().map(str::to_string),
                db.table().map(str::to_string),
                db.column().map(str::to_string),
                db.constraint().map(str::to_string),
            )
        }
    };
    let s = |v: &str| Some(v.to_string());
    assert_eq!(
        fields("INSERT INTO app.users VALUES (1, 'b@x', 5, 'b')").await,
        ("23505".into(), s("app"), s("users"), None, s("users_pkey"))
    );
    assert_eq!(
        fields("INSERT INTO app.users VALUES (2, 'a@x', 5, 'b')").await,
        (
            "23505".into(),
            s("app"),
            s("users"),
            None,
            s("users_email_key")
        )
    );
    assert_eq!(
        fields("INSERT INTO app.users VALUES (3, 'c@x', -1, 'c')").await,
        (
            "23514".into(),
            s("app"),
            s("users"),
            None,
            s("users_age_check")
        )
    );
    assert_eq!(
        fields("INSERT INTO app.users VALUES (4, 'd@x', 1, NULL)").await,
        ("23502".into(), s("app"), s("users"), s("name"), None)
    );
    assert_eq!(
        fields("INSERT INTO posts VALUES (11, 99)").await,
        (
            "23503".into(),
            s("public"),
            s("posts"),
            None,
            s("posts_author_fkey")
        )
    );
    // deleting the parent: PostgreSQL names the referencing table
    assert_eq!(
        fields("DELETE FROM app.users WHERE id = 1").await,
        (
            "23503".into(),
            s("public"),
            s("posts"),
            None,
            s("posts_author_fkey")
        )
    );
    // NOT NULL's DETAIL prints the failing row, as PostgreSQL 15 does
    let e = c
        .batch_execute("INSERT INTO app.users VALUES (5, 'e@x', 2, NULL)")
        .await
        .expect_err("not null");
    assert_eq!(
        e.as_db_error().and_then(|d| d.detail()),
        Some("Failing row contains (5, e@x, 2, null).")
    );
    // a block's COMMIT-time and the extended protocol's errors carry them too
    let e = c
        .execute("INSERT INTO posts VALUES ($1, $2)", &[&10i32, &1i32])
        .await
        .expect_err("duplicate");
    let db = e.as_db_error().expect("a server error");
    assert_eq!(db.constraint(), Some("posts_pkey"));
    assert_eq!(db.table(), Some("posts"));
    assert_eq!(db.schema(), Some("public"));
}
