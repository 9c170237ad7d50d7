//! `SELECT ... FOR UPDATE / FOR SHARE [NOWAIT | SKIP LOCKED]` against the
//! real server, with PostgreSQL 15's outcome as the expected answer of each
//! step: waiting writers, NOWAIT's 55P03, a SKIP LOCKED job queue, READ
//! COMMITTED re-evaluation on the newest version, REPEATABLE READ's 40001,
//! joins (every table, or those named by OF), and refusals (0A000) for
//! shapes Eddy does not lock.

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

/// Runs `sql` on `c` in a task of its own (it may wait for a lock); its
/// rows as pairs of ints.
fn spawn_pairs(
    c: &Arc<Client>,
    sql: &'static str,
) -> tokio::task::JoinHandle<Result<Vec<(i32, i32)>, tokio_postgres::Error>> {
    let c = Arc::clone(c);
    tokio::spawn(async move {
        c.query(sql, &[]).await.map(|rows| {
            rows.iter()
                .map(|r| (r.get::<_, i32>(0), r.get::<_, i32>(1)))
                .collect()
        })
    })
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

/// The job-queue statement of pg-boss and its kind: a locking CTE picks
/// the job, the UPDATE (or DELETE) takes it, in one statement. Each worker
/// gets its own job; the CTE's rows are locked once, by a statement of
/// their own, before the UPDATE reads them (PostgreSQL never folds a
/// locking CTE into its reader).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locking_cte_hands_each_worker_its_own_job() {
    let srv = Server::start("trust");
    let setup = srv.connect().await;
    setup
        .batch_execute(
            "CREATE TABLE jobs (id INT PRIMARY KEY, state TEXT NOT NULL) WITH (shard_count = 3);
             INSERT INTO jobs SELECT i, 'new' FROM generate_series(1, 5) AS s(i)",
        )
        .await
        .unwrap();
    let take = "WITH next AS (SELECT id FROM jobs WHERE state = 'new' ORDER BY id LIMIT 1 \
                FOR UPDATE SKIP LOCKED) \
                UPDATE jobs SET state = 'running' FROM next WHERE jobs.id = next.id RETURNING jobs.id";
    let mut workers = Vec::new();
    let mut got = Vec::new();
    for _ in 0..3 {
        let w = srv.connect().await;
        w.batch_execute("BEGIN").await.unwrap();
        got.extend(ints(&w, take).await);
        workers.push(w);
    }
    assert_eq!(
        got,
        vec![1, 2, 3],
        "each worker skips the jobs the others hold"
    );
    // DELETE ... WHERE id IN (the CTE), over the extended protocol
    let d = srv.connect().await;
    let rows = d
        .query(
            "WITH next AS (SELECT id FROM jobs WHERE state = 'new' ORDER BY id LIMIT $1 \
             FOR UPDATE SKIP LOCKED) DELETE FROM jobs WHERE id IN (SELECT id FROM next) RETURNING id",
            &[&5i64],
        )
        .await
        .unwrap();
    let deleted: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        deleted,
        vec![4, 5],
        "the held jobs are skipped, not deleted"
    );
    for w in &workers {
        w.batch_execute("ROLLBACK").await.unwrap();
    }
    assert_eq!(
        ints(
            &setup,
            "SELECT id FROM jobs WHERE state = 'new' ORDER BY id"
        )
        .await,
        vec![1, 2, 3]
    );
    // a lock below the top of a statement would not lock: refused, never
    // ignored (PostgreSQL locks there)
    for sql in [
        "SELECT * FROM (SELECT id FROM jobs FOR UPDATE) s",
        "UPDATE jobs SET state = 'x' WHERE id = (SELECT id FROM jobs LIMIT 1 FOR UPDATE SKIP LOCKED)",
        "INSERT INTO jobs SELECT id + 10, state FROM jobs FOR UPDATE",
        "BEGIN; DECLARE c CURSOR FOR SELECT id FROM jobs FOR UPDATE",
    ] {
        let e = setup.batch_execute(sql).await.unwrap_err();
        assert_eq!(state(&e), SqlState::FEATURE_NOT_SUPPORTED, "{sql}");
        let _ = setup.batch_execute("ROLLBACK").await;
    }
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
    let waiter = spawn_pairs(
        &b,
        "SELECT id, v FROM t WHERE v < 50 ORDER BY id FOR UPDATE",
    );
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
        // PostgreSQL: 0A000 FOR UPDATE cannot be applied to the nullable
        // side of an outer join
        "SELECT t.id FROM t LEFT JOIN u ON t.id = u.id FOR UPDATE",
        "SELECT t.id FROM t RIGHT JOIN u ON t.id = u.id FOR UPDATE OF t",
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
    // FOR NO KEY UPDATE and FOR KEY SHARE take the stronger FOR UPDATE and
    // FOR SHARE locks: every conflict PostgreSQL has is kept (the second
    // NO KEY UPDATE and a writer wait, KEY SHAREs share), and a KEY SHARE
    // behind a NO KEY UPDATE waits where PostgreSQL's would not
    a.batch_execute("BEGIN").await.unwrap();
    assert_eq!(
        ints(&a, "SELECT id FROM t WHERE id = 1 FOR NO KEY UPDATE").await,
        vec![1]
    );
    let other = srv.connect().await;
    for sql in [
        "SELECT id FROM t WHERE id = 1 FOR NO KEY UPDATE NOWAIT",
        "SELECT id FROM t WHERE id = 1 FOR SHARE NOWAIT",
        "SELECT id FROM t WHERE id = 1 FOR KEY SHARE NOWAIT",
    ] {
        let e = other.query(sql, &[]).await.unwrap_err();
        assert_eq!(state(&e), SqlState::LOCK_NOT_AVAILABLE, "{sql}");
    }
    a.batch_execute("ROLLBACK; BEGIN").await.unwrap();
    assert_eq!(
        ints(&a, "SELECT id FROM t WHERE id = 1 FOR KEY SHARE").await,
        vec![1]
    );
    assert_eq!(
        ints(&other, "SELECT id FROM t WHERE id = 1 FOR KEY SHARE NOWAIT").await,
        vec![1]
    );
    let e = other
        .query("SELECT id FROM t WHERE id = 1 FOR UPDATE NOWAIT", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::LOCK_NOT_AVAILABLE);
    a.batch_execute("ROLLBACK").await.unwrap();
    // autocommit FOR UPDATE works and releases its lock at once
    assert_eq!(ints(&a, "SELECT id FROM t FOR UPDATE").await, vec![1]);
    let b = srv.connect().await;
    assert_eq!(
        ints(&b, "SELECT id FROM t FOR UPDATE NOWAIT").await,
        vec![1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_locks_the_rows_of_every_table_it_names() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = Arc::new(srv.connect().await);
    a.batch_execute(
        "CREATE TABLE customers (id INT PRIMARY KEY, name TEXT NOT NULL) WITH (shard_count = 2);
         CREATE TABLE orders (id INT PRIMARY KEY, cust INT NOT NULL, amount INT NOT NULL)
             WITH (shard_count = 2);
         INSERT INTO customers VALUES (1, 'ann'), (2, 'bob');
         INSERT INTO orders VALUES (10, 1, 100), (11, 1, 110), (20, 2, 200)",
    )
    .await
    .unwrap();

    // Both sides are locked: customer 1 and its two orders (the customer
    // row appears twice in the result and is locked once).
    a.batch_execute("BEGIN").await.unwrap();
    let rows = a
        .query(
            "SELECT o.id, c.name FROM orders o JOIN customers c ON o.cust = c.id \
             WHERE c.id = 1 ORDER BY o.id FOR UPDATE",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].columns().len(), 2, "no storage keys in the result");
    for sql in [
        "SELECT id FROM customers WHERE id = 1 FOR UPDATE NOWAIT",
        "SELECT id FROM orders WHERE id = 11 FOR SHARE NOWAIT",
    ] {
        let e = b.query(sql, &[]).await.unwrap_err();
        assert_eq!(state(&e), SqlState::LOCK_NOT_AVAILABLE, "{sql}");
    }
    // rows outside the result are free
    assert_eq!(
        ints(&b, "SELECT id FROM orders WHERE cust = 2 FOR UPDATE NOWAIT").await,
        vec![20]
    );
    // a writer of a locked customer waits for the holder
    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            b.execute("UPDATE customers SET name = 'anne' WHERE id = 1", &[])
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "UPDATE waits for the join's lock");
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(waiter.await.unwrap().unwrap(), 1);

    // OF names the tables to lock: customers stay free.
    a.batch_execute("BEGIN").await.unwrap();
    let rows = a
        .query(
            "SELECT o.id FROM orders o, customers c WHERE o.cust = c.id AND c.id = 2 \
             FOR UPDATE OF o",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        ints(
            &b,
            "SELECT id FROM customers WHERE id = 2 FOR UPDATE NOWAIT"
        )
        .await,
        vec![2]
    );
    let e = b
        .query("SELECT id FROM orders WHERE id = 20 FOR UPDATE NOWAIT", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::LOCK_NOT_AVAILABLE);
    // ... and an outer join may lock its preserved side
    let rows = a
        .query(
            "SELECT o.id FROM orders o LEFT JOIN customers c ON o.cust = c.id \
             WHERE o.id = 10 FOR SHARE OF o",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    a.batch_execute("COMMIT").await.unwrap();

    // SKIP LOCKED passes over a result row any of whose rows is locked.
    a.batch_execute("BEGIN").await.unwrap();
    assert_eq!(
        ints(&a, "SELECT id FROM orders WHERE id = 11 FOR UPDATE").await,
        vec![11]
    );
    assert_eq!(
        ints(
            &b,
            "SELECT o.id FROM orders o JOIN customers c ON o.cust = c.id \
             ORDER BY o.id FOR UPDATE SKIP LOCKED"
        )
        .await,
        vec![10, 20]
    );
    a.batch_execute("COMMIT").await.unwrap();

    // READ COMMITTED: a result row whose locked row changed meanwhile comes
    // back with the committed values if it still qualifies (PostgreSQL:
    // (10, 150)), and not at all if not (order 11 moved to customer 2).
    a.batch_execute(
        "BEGIN; UPDATE orders SET amount = 150 WHERE id = 10; \
         UPDATE orders SET cust = 2 WHERE id = 11",
    )
    .await
    .unwrap();
    let waiter = spawn_pairs(
        &b,
        "SELECT o.id, o.amount FROM orders o JOIN customers c ON o.cust = c.id \
                 WHERE c.name = 'anne' ORDER BY o.id FOR UPDATE",
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(waiter.await.unwrap().unwrap(), vec![(10, 150)]);
}
