//! Transactions end to end, against the real server over the protocol:
//! privacy until COMMIT, ROLLBACK and savepoints, 25P02 and the
//! ReadyForQuery status byte, no lost updates under concurrency, atomic
//! multi-shard visibility, isolation levels, deadlocks, and kill -9 during
//! multi-shard commits. Expected answers are PostgreSQL 15's.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

mod common;
use common::*;

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

async fn one_i64(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.expect(sql).get(0)
}

/// A minimal protocol client that reports ReadyForQuery's status byte
/// (tokio-postgres does not expose it).
struct RawConn(std::net::TcpStream);

impl RawConn {
    fn connect(port: u16) -> RawConn {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut body = Vec::new();
        body.extend_from_slice(&196608i32.to_be_bytes());
        for (k, v) in [("user", "eddy"), ("database", "eddy")] {
            body.extend_from_slice(k.as_bytes());
            body.push(0);
            body.extend_from_slice(v.as_bytes());
            body.push(0);
        }
        body.push(0);
        let mut msg = ((body.len() + 4) as i32).to_be_bytes().to_vec();
        msg.extend_from_slice(&body);
        s.write_all(&msg).unwrap();
        let mut c = RawConn(s);
        c.until_ready();
        c
    }

    fn read_msg(&mut self) -> (u8, Vec<u8>) {
        let mut head = [0u8; 5];
        self.0.read_exact(&mut head).expect("read message");
        let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut body = vec![0u8; len - 4];
        self.0.read_exact(&mut body).expect("read body");
        (head[0], body)
    }

    /// Reads to ReadyForQuery: (status byte, SQLSTATEs of errors seen).
    fn until_ready(&mut self) -> (char, Vec<String>) {
        let mut errors = Vec::new();
        loop {
            let (t, body) = self.read_msg();
            match t {
                b'Z' => return (body[0] as char, errors),
                b'E' => {
                    let mut fields = body.split(|b| *b == 0);
                    let code = fields
                        .find(|f| f.first() == Some(&b'C'))
                        .map(|f| String::from_utf8_lossy(&f[1..]).to_string())
                        .unwrap_or_default();
                    errors.push(code);
                }
                _ => {}
            }
        }
    }

    fn query(&mut self, sql: &str) -> (char, Vec<String>) {
        let mut msg = vec![b'Q'];
        msg.extend_from_slice(&((sql.len() + 5) as i32).to_be_bytes());
        msg.extend_from_slice(sql.as_bytes());
        msg.push(0);
        self.0.write_all(&msg).unwrap();
        self.until_ready()
    }

    /// Parse/Bind/Execute/Sync of one statement without parameters.
    fn extended(&mut self, sql: &str) -> (char, Vec<String>) {
        let mut out = Vec::new();
        let frame = |t: u8, body: &[u8], out: &mut Vec<u8>| {
            out.push(t);
            out.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
            out.extend_from_slice(body);
        };
        let mut parse = vec![0u8];
        parse.extend_from_slice(sql.as_bytes());
        parse.extend_from_slice(&[0, 0, 0]);
        frame(b'P', &parse, &mut out);
        frame(b'B', &[0, 0, 0, 0, 0, 0, 0, 0], &mut out);
        frame(b'E', &[0, 0, 0, 0, 0], &mut out);
        frame(b'S', &[], &mut out);
        self.0.write_all(&out).unwrap();
        self.until_ready()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_savepoints_privacy_and_status_bytes() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = srv.connect().await;
    a.batch_execute(
        "CREATE TABLE t (k INT PRIMARY KEY, v TEXT) WITH (shard_count = 4);
         INSERT INTO t VALUES (1, 'one'), (2, 'two')",
    )
    .await
    .unwrap();

    // ROLLBACK undoes an insert and an update; other sessions never see them.
    a.batch_execute("BEGIN; INSERT INTO t VALUES (3, 'three'); UPDATE t SET v = 'uno' WHERE k = 1")
        .await
        .unwrap();
    assert_eq!(
        one_i64(&a, "SELECT count(*) FROM t").await,
        3,
        "own insert seen"
    );
    let v: String = a
        .query_one("SELECT v FROM t WHERE k = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, "uno", "own update seen");
    assert_eq!(
        one_i64(&b, "SELECT count(*) FROM t").await,
        2,
        "uncommitted insert hidden"
    );
    let v: String = b
        .query_one("SELECT v FROM t WHERE k = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, "one", "uncommitted update hidden");
    a.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(one_i64(&a, "SELECT count(*) FROM t").await, 2);
    let v: String = a
        .query_one("SELECT v FROM t WHERE k = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, "one");

    // COMMIT publishes everything at once.
    a.batch_execute(
        "BEGIN; INSERT INTO t VALUES (3, 'three'), (4, 'four'); DELETE FROM t WHERE k = 2; COMMIT",
    )
    .await
    .unwrap();
    assert_eq!(one_i64(&b, "SELECT sum(k) FROM t").await, 8);

    // Savepoints.
    a.batch_execute(
        "BEGIN; INSERT INTO t VALUES (10, 'a'); SAVEPOINT s1; INSERT INTO t VALUES (11, 'b');
         ROLLBACK TO SAVEPOINT s1; INSERT INTO t VALUES (12, 'c'); RELEASE SAVEPOINT s1; COMMIT",
    )
    .await
    .unwrap();
    let ks: Vec<i32> = a
        .query("SELECT k FROM t WHERE k >= 10 ORDER BY k", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ks, vec![10, 12]);

    // 25P02 after an error, until ROLLBACK; prepared statements too.
    a.batch_execute("BEGIN").await.unwrap();
    let e = a
        .batch_execute("INSERT INTO t VALUES (1, 'dup')")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "23505");
    let e = a.query("SELECT 1", &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::IN_FAILED_SQL_TRANSACTION));
    let e = a.batch_execute("SELECT 1").await.unwrap_err();
    assert_eq!(code(&e), "25P02");
    a.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(one_i64(&a, "SELECT 1::bigint").await, 1);

    // SERIALIZABLE is refused, never weakened.
    let e = a
        .batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "0A000");
    let e = a
        .batch_execute("SET default_transaction_isolation = 'serializable'")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "0A000");
    let iso: String = a
        .query_one("SHOW transaction_isolation", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(iso, "read committed");

    // READ ONLY refuses writes (25006).
    a.batch_execute("BEGIN READ ONLY").await.unwrap();
    let e = a.batch_execute("DELETE FROM t").await.unwrap_err();
    assert_eq!(code(&e), "25006");
    a.batch_execute("ROLLBACK").await.unwrap();

    // The status byte at every step, as PostgreSQL 15 sends it.
    let mut raw = RawConn::connect(srv.port);
    assert_eq!(raw.query("SELECT 1"), ('I', vec![]));
    assert_eq!(raw.query("BEGIN"), ('T', vec![]));
    assert_eq!(raw.query("SAVEPOINT s"), ('T', vec![]));
    assert_eq!(raw.query("SELECT 1/0"), ('E', vec!["22012".into()]));
    assert_eq!(raw.query("SELECT 1"), ('E', vec!["25P02".into()]));
    assert_eq!(raw.query("ROLLBACK TO SAVEPOINT s"), ('T', vec![]));
    assert_eq!(raw.query("SELECT 1"), ('T', vec![]));
    assert_eq!(raw.extended("SELECT 1/0"), ('E', vec!["22012".into()]));
    assert_eq!(raw.extended("SELECT 1"), ('E', vec!["25P02".into()]));
    assert_eq!(raw.extended("ROLLBACK TO SAVEPOINT s"), ('T', vec![]));
    assert_eq!(raw.extended("COMMIT"), ('I', vec![]));
    assert_eq!(raw.query("BEGIN; SELECT 1/0"), ('E', vec!["22012".into()]));
    assert_eq!(
        raw.query("COMMIT"),
        ('I', vec![]),
        "COMMIT of an aborted block rolls back"
    );
    assert_eq!(raw.query("SELECT 1/0"), ('I', vec!["22012".into()]));
    assert_eq!(
        raw.query("ROLLBACK TO SAVEPOINT x"),
        ('I', vec!["25P01".into()])
    );
    assert_eq!(raw.extended("BEGIN"), ('T', vec![]));
    assert_eq!(raw.extended("ROLLBACK"), ('I', vec![]));

    // A client that dies inside a transaction leaves nothing, and its row
    // locks go with it.
    let dying = srv.connect().await;
    dying
        .batch_execute(
            "BEGIN; INSERT INTO t VALUES (50, 'ghost'); UPDATE t SET v = 'locked' WHERE k = 1",
        )
        .await
        .unwrap();
    drop(dying);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let upd = tokio::time::timeout(
        Duration::from_secs(10),
        b.execute("UPDATE t SET v = 'free' WHERE k = 1", &[]),
    )
    .await
    .expect("the dead client's lock was released")
    .unwrap();
    assert_eq!(upd, 1);
    assert_eq!(one_i64(&b, "SELECT count(*) FROM t WHERE k = 50").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_increments_are_never_lost() {
    let srv = Arc::new(Server::start("trust"));
    let c = srv.connect().await;
    c.batch_execute(
        "CREATE TABLE counters (id INT PRIMARY KEY, n BIGINT NOT NULL, name TEXT UNIQUE)
           WITH (shard_count = 2);
         INSERT INTO counters VALUES (1, 0, 'one'), (2, 0, 'two')",
    )
    .await
    .unwrap();
    const CLIENTS: i64 = 8;
    const EACH: i64 = 40;
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let srv = Arc::clone(&srv);
        tasks.push(tokio::spawn(async move {
            let c = srv.connect().await;
            for j in 0..EACH {
                if i % 2 == 0 && j % 3 == 0 {
                    // autocommit
                    c.execute("UPDATE counters SET n = n + 1 WHERE id = 1", &[])
                        .await
                        .unwrap();
                } else if i % 2 == 0 && j % 3 == 1 {
                    // an upsert arbitrated by the UNIQUE column: the row
                    // it finds is locked and read again before the update
                    c.execute(
                        "INSERT INTO counters VALUES ($1, 1, 'one') \
                         ON CONFLICT (name) DO UPDATE SET n = counters.n + 1",
                        &[&(100 + i as i32)],
                    )
                    .await
                    .unwrap();
                } else if i % 2 == 0 {
                    // autocommit, the increment joined from a VALUES list
                    // (UPDATE ... FROM: its rows are re-checked too)
                    c.execute(
                        "UPDATE counters SET n = counters.n + d.inc \
                         FROM (VALUES (1, 1)) AS d(id, inc) WHERE counters.id = d.id",
                        &[],
                    )
                    .await
                    .unwrap();
                } else {
                    // in a block, touching both rows in a fixed order
                    c.batch_execute(
                        "BEGIN; UPDATE counters SET n = n + 1 WHERE id = 1;
                         UPDATE counters SET n = n + 1 WHERE id = 2; COMMIT",
                    )
                    .await
                    .unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        one_i64(&c, "SELECT n FROM counters WHERE id = 1").await,
        CLIENTS * EACH
    );
    assert_eq!(
        one_i64(&c, "SELECT n FROM counters WHERE id = 2").await,
        CLIENTS / 2 * EACH
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_keep_the_total_and_readers_never_see_half_a_commit() {
    let srv = Arc::new(Server::start("trust"));
    let c = srv.connect().await;
    c.batch_execute(
        "CREATE TABLE acct (id INT PRIMARY KEY, bal BIGINT NOT NULL) WITH (shard_count = 4)",
    )
    .await
    .unwrap();
    let values: Vec<String> = (0..16).map(|i| format!("({i}, 1000)")).collect();
    c.batch_execute(&format!("INSERT INTO acct VALUES {}", values.join(",")))
        .await
        .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4u64 {
        let srv = Arc::clone(&srv);
        writers.push(tokio::spawn(async move {
            let c = srv.connect().await;
            let mut x = w * 7 + 1;
            for _ in 0..25 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let from = (x >> 33) % 16;
                let to = (from + 1 + (x >> 40) % 15) % 16;
                // fixed lock order avoids deadlocks between writers
                let (lo, hi) = if from < to { (from, to) } else { (to, from) };
                let amount = if lo == from { 7 } else { -7 };
                c.batch_execute(&format!(
                    "BEGIN; UPDATE acct SET bal = bal - {amount} WHERE id = {lo};
                     UPDATE acct SET bal = bal + {amount} WHERE id = {hi}; COMMIT"
                ))
                .await
                .unwrap();
            }
        }));
    }
    let reader = {
        let srv = Arc::clone(&srv);
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let c = srv.connect().await;
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                assert_eq!(
                    one_i64(&c, "SELECT sum(bal)::bigint FROM acct").await,
                    16_000
                );
                reads += 1;
            }
            reads
        })
    };
    for w in writers {
        w.await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(reader.await.unwrap() > 0);
    assert_eq!(
        one_i64(&c, "SELECT sum(bal)::bigint FROM acct").await,
        16_000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_levels_deletes_and_deadlocks() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = srv.connect().await;
    a.batch_execute(
        "CREATE TABLE r (k INT PRIMARY KEY, v INT) WITH (shard_count = 2);
         INSERT INTO r VALUES (1, 10), (2, 20)",
    )
    .await
    .unwrap();

    // REPEATABLE READ: a stable snapshot, and the second writer gets 40001.
    a.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    assert_eq!(one_i64(&a, "SELECT sum(v)::bigint FROM r").await, 30);
    b.execute("UPDATE r SET v = v + 1 WHERE k = 1", &[])
        .await
        .unwrap();
    assert_eq!(
        one_i64(&a, "SELECT sum(v)::bigint FROM r").await,
        30,
        "snapshot is stable"
    );
    let e = a
        .batch_execute("UPDATE r SET v = v + 100 WHERE k = 1")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "40001");
    a.batch_execute("ROLLBACK").await.unwrap();

    // READ COMMITTED: each statement sees the latest commits.
    a.batch_execute("BEGIN").await.unwrap();
    assert_eq!(one_i64(&a, "SELECT v::bigint FROM r WHERE k = 1").await, 11);
    b.execute("UPDATE r SET v = 12 WHERE k = 1", &[])
        .await
        .unwrap();
    assert_eq!(one_i64(&a, "SELECT v::bigint FROM r WHERE k = 1").await, 12);
    a.batch_execute("COMMIT").await.unwrap();

    // A row deleted while another transaction waits to update it stays
    // deleted (PostgreSQL: UPDATE 0).
    a.batch_execute("BEGIN; DELETE FROM r WHERE k = 2")
        .await
        .unwrap();
    let b_upd = tokio::spawn(async move {
        let n = b
            .execute("UPDATE r SET v = v + 1 WHERE k = 2", &[])
            .await
            .unwrap();
        (b, n)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!b_upd.is_finished(), "the update waits for the deleter");
    a.batch_execute("COMMIT").await.unwrap();
    let (b, n) = b_upd.await.unwrap();
    assert_eq!(n, 0);
    assert_eq!(one_i64(&a, "SELECT count(*) FROM r WHERE k = 2").await, 0);

    // Deadlock: one side gets 40P01, the other goes on.
    a.batch_execute("INSERT INTO r VALUES (2, 20)")
        .await
        .unwrap();
    a.batch_execute("BEGIN; UPDATE r SET v = 0 WHERE k = 1")
        .await
        .unwrap();
    b.batch_execute("BEGIN; UPDATE r SET v = 0 WHERE k = 2")
        .await
        .unwrap();
    let a_task = tokio::spawn(async move {
        let r = a.batch_execute("UPDATE r SET v = 1 WHERE k = 2").await;
        (a, r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rb = b.batch_execute("UPDATE r SET v = 1 WHERE k = 1").await;
    let e = rb.expect_err("closing the cycle is a deadlock");
    assert_eq!(code(&e), "40P01");
    b.batch_execute("ROLLBACK").await.unwrap();
    let (a, ra) = a_task.await.unwrap();
    ra.unwrap();
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(one_i64(&a, "SELECT sum(v)::bigint FROM r").await, 1);

    // lock_timeout.
    a.batch_execute("BEGIN; UPDATE r SET v = 5 WHERE k = 1")
        .await
        .unwrap();
    b.batch_execute("SET lock_timeout = '200ms'").await.unwrap();
    let e = b
        .batch_execute("UPDATE r SET v = 6 WHERE k = 1")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "55P03");
    a.batch_execute("ROLLBACK").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_and_truncate_inside_a_block_commit_or_roll_back_with_it() {
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute(
        "CREATE TABLE cp (k INT PRIMARY KEY, v TEXT); INSERT INTO cp VALUES (1, 'old')",
    )
    .await
    .unwrap();
    for (end, expect) in [("ROLLBACK", 1i64), ("COMMIT", 2)] {
        c.batch_execute("BEGIN; TRUNCATE cp").await.unwrap();
        let sink = c.copy_in("COPY cp FROM STDIN").await.unwrap();
        use futures::SinkExt;
        let mut sink = Box::pin(sink);
        sink.send(bytes::Bytes::from_static(b"5\tfive\n6\tsix\n"))
            .await
            .unwrap();
        sink.as_mut().finish().await.unwrap();
        assert_eq!(one_i64(&c, "SELECT count(*) FROM cp").await, 2);
        c.batch_execute(end).await.unwrap();
        assert_eq!(
            one_i64(&c, "SELECT count(*) FROM cp").await,
            expect,
            "after {end}"
        );
    }
}

/// kill -9 while writers commit multi-shard transactions; every restart
/// must succeed and every transfer be all-or-nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_during_multi_shard_commits_restarts_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    {
        let srv = Server::start_in(None, data.clone(), "trust");
        let c = srv.connect().await;
        c.batch_execute(
            "CREATE TABLE acct (id INT PRIMARY KEY, bal BIGINT NOT NULL) WITH (shard_count = 4)",
        )
        .await
        .unwrap();
        let values: Vec<String> = (0..32).map(|i| format!("({i}, 100)")).collect();
        c.batch_execute(&format!("INSERT INTO acct VALUES {}", values.join(",")))
            .await
            .unwrap();
    }
    // More rounds on demand: EDDY_CRASH_ROUNDS=200 cargo test -p eddy-server
    // --test transactions kill_during
    let rounds: u64 = std::env::var("EDDY_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    for round in 0..rounds {
        let srv = Arc::new(Server::start_in(None, data.clone(), "trust"));
        let c = srv.connect().await;
        assert_eq!(
            one_i64(&c, "SELECT sum(bal)::bigint FROM acct").await,
            3200,
            "round {round}: the total survives the crash"
        );
        let mut writers = Vec::new();
        for w in 0..4u64 {
            let srv = Arc::clone(&srv);
            writers.push(tokio::spawn(async move {
                let Ok(c) = srv.connect_as("eddy", "").await else {
                    return;
                };
                let mut x = round * 31 + w;
                loop {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    let a = (x >> 33) % 32;
                    let b = (a + 1 + (x >> 45) % 31) % 32;
                    let (lo, hi) = (a.min(b), a.max(b));
                    let r = c
                        .batch_execute(&format!(
                            "BEGIN; UPDATE acct SET bal = bal - 1 WHERE id = {lo};
                             UPDATE acct SET bal = bal + 1 WHERE id = {hi};
                             INSERT INTO acct VALUES ({}, 0) ON CONFLICT DO NOTHING; COMMIT",
                            1000 + x % 1000
                        ))
                        .await;
                    if r.is_err() {
                        return; // the server died
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(300 + 150 * (round % 8))).await;
        srv.kill_9();
        for w in writers {
            let _ = w.await;
        }
        drop(c);
        drop(srv);
    }
    let srv = Server::start_in(Some(dir), data, "trust");
    let c = srv.connect().await;
    assert_eq!(one_i64(&c, "SELECT sum(bal)::bigint FROM acct").await, 3200);
    // the writers did commit transfers between the crashes
    assert!(one_i64(&c, "SELECT count(*) FROM acct WHERE id >= 1000").await > 0);
    assert!(one_i64(&c, "SELECT count(*) FROM acct WHERE id < 32 AND bal <> 100").await > 0);
}

/// PostgreSQL 15: a session idle inside a block longer than
/// idle_in_transaction_session_timeout gets FATAL 25P03 and is closed; its
/// transaction rolls back and its locks go. Idle outside a block, or busy
/// inside one, it is never cut off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_in_transaction_timeout_ends_the_session_and_frees_its_locks() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    a.batch_execute(
        "CREATE TABLE it (id INT PRIMARY KEY, v INT NOT NULL); INSERT INTO it VALUES (1, 0);
         SET idle_in_transaction_session_timeout = '300ms'",
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        one_i64(&a, "SELECT count(*) FROM it").await,
        1,
        "idle outside a block"
    );
    // busy inside a block: statements closer together than the timeout
    a.batch_execute("BEGIN").await.unwrap();
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(120)).await;
        a.execute("UPDATE it SET v = v + 1 WHERE id = 1", &[])
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(
        a.query("SELECT 1", &[]).await.is_err(),
        "the idle session is closed"
    );
    let b = srv.connect().await;
    let row = b
        .query_one("SELECT v FROM it WHERE id = 1 FOR UPDATE NOWAIT", &[])
        .await
        .expect("the lock was released");
    assert_eq!(row.get::<_, i32>(0), 0, "the block was rolled back");

    // What the client is told, over the raw protocol (extended-protocol
    // Sync arms the watch as ReadyForQuery does for a simple query).
    let mut raw = RawConn::connect(srv.port);
    raw.query("SET idle_in_transaction_session_timeout = 200");
    assert_eq!(raw.extended("BEGIN").0, 'T');
    let (kind, body) = raw.read_msg();
    assert_eq!(kind, b'E');
    let text = String::from_utf8_lossy(&body).to_string();
    assert!(text.contains("FATAL") && text.contains("25P03"), "{text}");
    let mut rest = [0u8; 1];
    assert_eq!(
        raw.0.read(&mut rest).unwrap_or(0),
        0,
        "then the connection ends"
    );
}
