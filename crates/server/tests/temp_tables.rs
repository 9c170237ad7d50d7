//! Temporary tables against the real server: private to their session
//! (another session neither sees them nor is stopped from making its own of
//! the same name), shadowing a permanent table of the same name, dropped
//! when the client goes (cleanly or not) and gone after a kill -9 and
//! restart. Single-session semantics: `tests/slt/temp_tables.slt`.

use std::time::Duration;

use tokio_postgres::{Client, SimpleQueryMessage};

mod common;
use common::*;

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

/// The first column of every row, as text.
async fn column(c: &Client, sql: &str) -> Vec<String> {
    c.simple_query(sql)
        .await
        .expect(sql)
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap_or("NULL").to_string()),
            _ => None,
        })
        .collect()
}

async fn error_code(c: &Client, sql: &str) -> String {
    match c.simple_query(sql).await {
        Ok(_) => panic!("{sql} succeeded"),
        Err(e) => code(&e),
    }
}

/// Whether the storage catalog names any temporary table.
fn catalog_has_temp(srv: &Server) -> bool {
    std::fs::read_to_string(srv.data_dir.join("catalog.json"))
        .map(|s| s.contains("pg_temp_"))
        .unwrap_or(false)
}

async fn wait_no_temp(srv: &Server) -> bool {
    for _ in 0..200 {
        if !catalog_has_temp(srv) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_to_the_session_and_shadowing() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = srv.connect().await;
    a.batch_execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v TEXT);
         INSERT INTO t VALUES (1, 'permanent');
         CREATE TEMP TABLE t (id INT PRIMARY KEY, v TEXT);
         INSERT INTO t VALUES (1, 'temp a'), (2, 'two');
         CREATE TEMPORARY TABLE only_a (x INT)",
    )
    .await
    .unwrap();
    // the session's own temporary table comes first
    assert_eq!(
        column(&a, "SELECT t.v FROM t ORDER BY t.id").await,
        ["temp a", "two"]
    );
    assert_eq!(
        column(&a, "SELECT v FROM pg_temp.t WHERE id = 2").await,
        ["two"]
    );
    assert_eq!(column(&a, "SELECT v FROM public.t").await, ["permanent"]);
    // errors name the table as the session knows it
    let dup = a
        .simple_query("INSERT INTO t VALUES (1, 'again')")
        .await
        .unwrap_err();
    let message = dup.as_db_error().map(|d| d.message().to_string());
    assert_eq!(code(&dup), "23505");
    assert!(
        message.as_deref().is_some_and(|m| !m.contains("pg_temp_")),
        "{message:?}"
    );
    // extended protocol (a prepared statement) resolves the same way
    let row = a
        .query_one("SELECT v FROM t WHERE id = $1", &[&2i32])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "two");
    // another session sees the permanent table only
    assert_eq!(column(&b, "SELECT v FROM t").await, ["permanent"]);
    assert_eq!(error_code(&b, "SELECT * FROM only_a").await, "42P01");
    assert_eq!(error_code(&b, "SELECT * FROM pg_temp.t").await, "42P01");
    assert_eq!(
        column(
            &b,
            "SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'pg_temp%'"
        )
        .await,
        ["0"]
    );
    // ... and may make its own of the same name
    b.batch_execute(
        "CREATE TEMP TABLE only_a (x INT); INSERT INTO only_a VALUES (7), (8);
         CREATE TEMP TABLE t AS SELECT id, v || ' copy' AS v FROM t",
    )
    .await
    .unwrap();
    assert_eq!(column(&b, "SELECT sum(x) FROM only_a").await, ["15"]);
    assert_eq!(column(&a, "SELECT count(*) FROM only_a").await, ["0"]);
    assert_eq!(column(&b, "SELECT v FROM t").await, ["permanent copy"]);
    // DML on the temporary table leaves the permanent one alone
    a.batch_execute(
        "UPDATE t SET v = 'updated' WHERE id = 1; DELETE FROM t WHERE t.id = 2;
         INSERT INTO only_a SELECT id FROM t",
    )
    .await
    .unwrap();
    assert_eq!(column(&a, "SELECT v FROM t").await, ["updated"]);
    assert_eq!(column(&a, "SELECT x FROM only_a").await, ["1"]);
    assert_eq!(column(&b, "SELECT v FROM public.t").await, ["permanent"]);
    // a second temporary table of the name: 42P07
    assert_eq!(
        error_code(&a, "CREATE TEMP TABLE t (id INT)").await,
        "42P07"
    );
    a.batch_execute("CREATE TEMP TABLE IF NOT EXISTS t (id INT)")
        .await
        .unwrap();
    // another session's storage name is not reachable
    assert_eq!(
        error_code(&b, "SELECT * FROM \"pg_temp_1.t\"").await,
        "42P01"
    );
    // renamed, it stays private
    a.batch_execute("ALTER TABLE only_a RENAME TO renamed_a")
        .await
        .unwrap();
    assert_eq!(column(&a, "SELECT x FROM renamed_a").await, ["1"]);
    assert_eq!(error_code(&b, "SELECT * FROM renamed_a").await, "42P01");
    // DROP TABLE takes the temporary one first, then the permanent one
    a.batch_execute("DROP TABLE t").await.unwrap();
    assert_eq!(column(&a, "SELECT v FROM t").await, ["permanent"]);
    a.batch_execute("CREATE TEMP TABLE oc (x INT) ON COMMIT PRESERVE ROWS")
        .await
        .unwrap();
}

/// ON COMMIT past what the slt file can reach: an autocommit COPY (its own
/// commit path) and a fixed-plan INSERT into a DELETE ROWS table leave it
/// empty; a COPY inside a block keeps its rows until COMMIT; an ON COMMIT
/// DROP table takes its SERIAL sequence with it, in the catalog too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_commit_actions_follow_every_commit_path() {
    use futures::SinkExt;
    let srv = Server::start("trust");
    let a = srv.connect().await;
    a.batch_execute("CREATE TEMP TABLE d (id INT PRIMARY KEY, v TEXT) ON COMMIT DELETE ROWS")
        .await
        .unwrap();
    let copy = |c: &'static [u8]| {
        let a = &a;
        async move {
            let sink = a.copy_in("COPY d FROM STDIN").await.unwrap();
            futures::pin_mut!(sink);
            sink.send(bytes::Bytes::from_static(c)).await.unwrap();
            sink.finish().await.unwrap()
        }
    };
    assert_eq!(copy(b"1\tone\n2\ttwo\n").await, 2);
    assert_eq!(column(&a, "SELECT count(*) FROM d").await, ["0"]);
    // a prepared single-row INSERT (a fixed plan elsewhere)
    let ins = a.prepare("INSERT INTO d VALUES ($1, $2)").await.unwrap();
    a.execute(&ins, &[&5i32, &"five"]).await.unwrap();
    assert_eq!(column(&a, "SELECT count(*) FROM d").await, ["0"]);
    a.batch_execute("BEGIN").await.unwrap();
    assert_eq!(copy(b"3\tthree\n").await, 1);
    a.execute(&ins, &[&4i32, &"four"]).await.unwrap();
    assert_eq!(column(&a, "SELECT count(*) FROM d").await, ["2"]);
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(column(&a, "SELECT count(*) FROM d").await, ["0"]);

    a.batch_execute(
        "BEGIN; CREATE TEMP TABLE s (id SERIAL PRIMARY KEY, v TEXT) ON COMMIT DROP; \
         INSERT INTO s (v) VALUES ('x'), ('y')",
    )
    .await
    .unwrap();
    assert_eq!(column(&a, "SELECT max(id) FROM s").await, ["2"]);
    assert_eq!(
        column(
            &a,
            "SELECT count(*) FROM pg_class WHERE relname LIKE '%s_id_seq%'"
        )
        .await,
        ["1"]
    );
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(error_code(&a, "SELECT * FROM s").await, "42P01");
    assert_eq!(
        column(
            &a,
            "SELECT count(*) FROM pg_class WHERE relname LIKE '%s_id_seq%'"
        )
        .await,
        ["0"]
    );
    assert!(catalog_has_temp(&srv), "d is still there");
    a.batch_execute("DROP TABLE d").await.unwrap();
    assert!(!catalog_has_temp(&srv), "no temporary table is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temp_tables_named_index_is_private() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = srv.connect().await;
    for c in [&a, &b] {
        c.batch_execute(
            "CREATE TEMP TABLE ix (id INT, v INT); CREATE INDEX ix_v ON ix (v);
             INSERT INTO ix VALUES (1, 10), (2, 20)",
        )
        .await
        .unwrap();
    }
    assert_eq!(column(&a, "SELECT id FROM ix WHERE v = 20").await, ["2"]);
    b.batch_execute("DROP INDEX ix_v").await.unwrap();
    assert_eq!(error_code(&b, "DROP INDEX ix_v").await, "42704");
    a.batch_execute("DROP INDEX ix_v").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_without_create_on_public_makes_temp_tables() {
    let srv = Server::start("scram");
    let admin = srv.connect().await;
    admin
        .batch_execute("CREATE ROLE plain LOGIN PASSWORD 'plain-pw'")
        .await
        .unwrap();
    let plain = srv.connect_as("plain", "plain-pw").await.unwrap();
    assert_eq!(
        error_code(&plain, "CREATE TABLE perm (x INT)").await,
        "42501"
    );
    plain
        .batch_execute(
            "CREATE TEMP TABLE mine (x INT); INSERT INTO mine VALUES (1);
             UPDATE mine SET x = 2",
        )
        .await
        .unwrap();
    assert_eq!(column(&plain, "SELECT x FROM mine").await, ["2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_into_and_out_of_a_temp_table() {
    use futures::{SinkExt, StreamExt};
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute("CREATE TEMP TABLE ct (id INT, v TEXT)")
        .await
        .unwrap();
    let sink = c.copy_in("COPY ct FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"1\tone\n2\ttwo\n"))
        .await
        .unwrap();
    assert_eq!(sink.finish().await.unwrap(), 2);
    let out = c.copy_out("COPY ct TO STDOUT").await.unwrap();
    futures::pin_mut!(out);
    let mut text = Vec::new();
    while let Some(chunk) = out.next().await {
        text.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(String::from_utf8_lossy(&text), "1\tone\n2\ttwo\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_undoes_create_temp_table() {
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute("BEGIN; CREATE TEMP TABLE r (x INT); INSERT INTO r VALUES (1); ROLLBACK")
        .await
        .unwrap();
    assert_eq!(error_code(&c, "SELECT * FROM r").await, "42P01");
    c.batch_execute("BEGIN; CREATE TEMP TABLE r (x INT); INSERT INTO r VALUES (1); COMMIT")
        .await
        .unwrap();
    assert_eq!(column(&c, "SELECT x FROM r").await, ["1"]);
    c.batch_execute("DISCARD TEMP").await.unwrap();
    assert_eq!(error_code(&c, "SELECT * FROM r").await, "42P01");
    assert!(wait_no_temp(&srv).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_when_the_client_goes() {
    let srv = Server::start("trust");
    let observer = srv.connect().await;
    // a clean close
    let c = srv.connect().await;
    c.batch_execute("CREATE TEMP TABLE gone (x INT); INSERT INTO gone VALUES (1)")
        .await
        .unwrap();
    assert!(catalog_has_temp(&srv));
    drop(c);
    assert!(wait_no_temp(&srv).await, "a closed session's table stayed");
    // an abrupt one, in the middle of a transaction block: the socket
    // closes without a Terminate message
    let conn = format!(
        "host=127.0.0.1 port={} user=eddy password=x dbname=eddy",
        srv.port
    );
    let (c, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
        .await
        .unwrap();
    let conn_task = tokio::spawn(connection);
    c.batch_execute(
        "CREATE TEMP TABLE gone (x INT); BEGIN; INSERT INTO gone VALUES (2);
         CREATE TEMP TABLE gone_too (x INT)",
    )
    .await
    .unwrap();
    assert!(catalog_has_temp(&srv));
    conn_task.abort();
    let _ = conn_task.await;
    assert!(
        wait_no_temp(&srv).await,
        "an aborted session's tables stayed"
    );
    observer
        .batch_execute("CREATE TEMP TABLE gone (x INT)")
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_after_kill_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    {
        let srv = Server::start_in(None, data.clone(), "trust");
        let c = srv.connect().await;
        c.batch_execute(
            "CREATE TABLE kept (x INT); INSERT INTO kept VALUES (1);
             CREATE TEMP TABLE lost (x INT); INSERT INTO lost VALUES (1)",
        )
        .await
        .unwrap();
        assert!(catalog_has_temp(&srv));
        srv.kill_9();
        std::mem::forget(c);
        let mut srv = srv;
        let _ = srv.child.wait();
        assert!(catalog_has_temp(&srv), "the kill left the table behind");
    }
    let srv = Server::start_in(Some(dir), data, "trust");
    let c = srv.connect().await;
    assert!(
        !catalog_has_temp(&srv),
        "a temporary table survived a restart"
    );
    assert_eq!(column(&c, "SELECT x FROM kept").await, ["1"]);
    assert_eq!(error_code(&c, "SELECT * FROM lost").await, "42P01");
}
