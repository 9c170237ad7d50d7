//! `SELECT ... FOR UPDATE / FOR SHARE [NOWAIT | SKIP LOCKED]` against the
//! real server, with PostgreSQL 15's outcome as the expected answer of each
//! step: waiting writers, NOWAIT's 55P03, a SKIP LOCKED job queue, READ
//! COMMITTED re-evaluation on the newest version, REPEATABLE READ's 40001,
//! and refusals (0A000) for shapes Eddy does not lock.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

mod common;
use common::*;

fn state(e: &tokio_postgres::Error) -> SqlState {
    e.code().cloned().unwrap_or(SqlState::INTERNAL_ERROR)
}

async fn ints(c: &Client, sql: &str) -> Vec<i32> {
    c.query(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn for_update_blocks_writers_and_share_shares() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = Arc::new(srv.connect().await);
    a.batch_execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, s TEXT) WITH (shard_count = 2);
         INSERT INTO t VALUES (1, 10, 'x'), (2, 20, 'y'), (3, 30, 'z')",
    )
    .await
    .unwrap();

    // The result has the query's columns only (no storage key).
    a.batch_execute("BEGIN").await.unwrap();
    let rows = a
        .query("SELECT * FROM t WHERE v >= 20 ORDER BY id FOR UPDATE", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].columns().len(), 3);
    assert_eq!(
        (rows[0].get::<_, i32>(0), rows[1].get::<_, String>(2)),
        (2, "z".to_string())
    );

    // A writer of a locked row waits until the holder ends.
    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { b.execute("UPDATE t SET v = v + 1 WHERE id = 2", &[]).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "UPDATE waits for FOR UPDATE's lock");
    // An unlocked row is free (a third connection: b waits).
    let c = srv.connect().await;
    c.execute("UPDATE t SET v = v + 1 WHERE id = 1", &[])
        .await
        .unwrap();
    // NOWAIT fails at once with 55P03.
    let e = c
        .query("SELECT id FROM t WHERE id = 3 FOR UPDATE NOWAIT", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::LOCK_NOT_AVAILABLE);
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(waiter.await.unwrap().unwrap(), 1);

    // FOR SHARE: two sharers at once; a writer waits for both.
    a.batch_execute("BEGIN").await.unwrap();
    b.batch_execute("BEGIN").await.unwrap();
    assert_eq!(
        ints(&a, "SELECT v FROM t WHERE id = 3 FOR SHARE").await,
        vec![30]
    );
    assert_eq!(
        ints(&b, "SELECT v FROM t WHERE id = 3 FOR SHARE").await,
        vec![30]
    );
    let e = c
        .query("SELECT v FROM t WHERE id = 3 FOR UPDATE NOWAIT", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::LOCK_NOT_AVAILABLE);
    a.batch_execute("COMMIT").await.unwrap();
    b.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        ints(&c, "SELECT v FROM t WHERE id = 3 FOR UPDATE NOWAIT").await,
        vec![30]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_locked_hands_each_worker_its_own_job() {
    let srv = Server::start("trust");
    let setup = srv.connect().await;
    setup
        .batch_execute(
            "CREATE TABLE jobs (id INT PRIMARY KEY, done BOOLEAN NOT NULL) WITH (shard_count = 3);
             INSERT INTO jobs SELECT i, false FROM generate_series(1, 6) AS s(i)",
        )
        .await
        .unwrap();
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(srv.connect().await);
    }
    let take = "SELECT id FROM jobs WHERE NOT done ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED";
    let mut got = Vec::new();
    for w in &workers {
        w.batch_execute("BEGIN").await.unwrap();
        got.extend(ints(w, take).await);
    }
    assert_eq!(
        got,
        vec![1, 2, 3],
        "each worker skips the rows the others hold"
    );
    // OFFSET counts locked rows only: the fourth taker skips 1-3 and takes 5.
    let last = srv.connect().await;
    last.batch_execute("BEGIN").await.unwrap();
    assert_eq!(
        ints(&last, "SELECT id FROM jobs WHERE NOT done ORDER BY id LIMIT 1 OFFSET 1 FOR UPDATE SKIP LOCKED").await,
        vec![5]
    );
    for (w, id) in workers.iter().zip(&got) {
        w.execute("UPDATE jobs SET done = true WHERE id = $1", &[id])
            .await
            .unwrap();
        w.batch_execute("COMMIT").await.unwrap();
    }
    last.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(ints(&last, take).await, vec![4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locked_rows_are_rechecked_on_their_newest_version() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = Arc::new(srv.connect().await);
    a.batch_execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL);
         INSERT INTO t VALUES (1, 10), (2, 20)",
    )
    .await
    .unwrap();

    // READ COMMITTED: the waiting locker returns the committed new value
    // (PostgreSQL: 11), and a row that no longer qualifies is not returned.
    a.batch_execute("BEGIN; UPDATE t SET v = v + 1 WHERE id = 1; UPDATE t SET v = 99 WHERE id = 2")
        .await
        .unwrap();
    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            b.query(
                "SELECT id, v FROM t WHERE v < 50 ORDER BY id FOR UPDATE",
                &[],
            )
            .await
            .map(|rows| {
                rows.iter()
                    .map(|r| (r.get::<_, i32>(0), r.get::<_, i32>(1)))
                    .collect::<Vec<_>>()
            })
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(waiter.await.unwrap().unwrap(), vec![(1, 11)]);

    // REPEATABLE READ: a row changed after the snapshot fails with 40001.
    b.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    assert_eq!(ints(&b, "SELECT v FROM t WHERE id = 1").await, vec![11]);
    a.execute("UPDATE t SET v = 12 WHERE id = 1", &[])
        .await
        .unwrap();
    let e = b
        .query("SELECT v FROM t WHERE id = 1 FOR UPDATE", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::T_R_SERIALIZATION_FAILURE);
    b.batch_execute("ROLLBACK").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_locking_shapes_are_refused() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    a.batch_execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT); CREATE TABLE u (id INT PRIMARY KEY);
         INSERT INTO t VALUES (1, 1)",
    )
    .await
    .unwrap();
    for sql in [
        // PostgreSQL: 0A000 FOR UPDATE is not allowed with aggregate functions
        "SELECT count(*) FROM t FOR UPDATE",
        // PostgreSQL locks both sides of a join; Eddy refuses rather than lock one
        "SELECT t.id FROM t JOIN u ON t.id = u.id FOR UPDATE",
        "SELECT DISTINCT v FROM t FOR SHARE",
    ] {
        let e = a.query(sql, &[]).await.unwrap_err();
        assert_eq!(state(&e), SqlState::FEATURE_NOT_SUPPORTED, "{sql}");
    }
    // PostgreSQL: 42P01 relation "u" in FOR UPDATE clause not found in FROM clause
    let e = a
        .query("SELECT id FROM t FOR UPDATE OF u", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::UNDEFINED_TABLE);
    // READ ONLY: PostgreSQL 25006
    a.batch_execute("BEGIN READ ONLY").await.unwrap();
    let e = a
        .query("SELECT id FROM t FOR UPDATE", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::READ_ONLY_SQL_TRANSACTION);
    a.batch_execute("ROLLBACK").await.unwrap();
    // autocommit FOR UPDATE works and releases its lock at once
    assert_eq!(ints(&a, "SELECT id FROM t FOR UPDATE").await, vec![1]);
    let b = srv.connect().await;
    assert_eq!(
        ints(&b, "SELECT id FROM t FOR UPDATE NOWAIT").await,
        vec![1]
    );
}
