//! Fixed plans (primary-key lookups and single-row writes that skip
//! DataFusion) inside transaction blocks and in the simple protocol, against
//! the real server: they see the transaction's own writes, keep them
//! private, lock their rows, honour REPEATABLE READ, compute `n = n + $1`
//! with PostgreSQL's integer overflow rule, and read multi-key lookups at
//! one consistent cut. Every expected answer is PostgreSQL 15's.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

mod common;
use common::*;

async fn get_n(c: &Client, table: &str, id: i32) -> Option<i32> {
    c.query_opt(&format!("SELECT n FROM {table} WHERE id = $1"), &[&id])
        .await
        .expect("lookup")
        .map(|r| r.get(0))
}

fn state(e: &tokio_postgres::Error) -> SqlState {
    e.code().cloned().unwrap_or(SqlState::INTERNAL_ERROR)
}

async fn own_writes_private_and_rolled_back(srv: &Server, orientation: &str) {
    let a = srv.connect().await;
    let b = srv.connect().await;
    let t = format!("kv_{orientation}");
    a.batch_execute(&format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, n INT NOT NULL, s TEXT)
           WITH (shard_count = 3, orientation = '{orientation}');
         INSERT INTO {t} VALUES (1, 10, 'a'), (2, 20, 'b')"
    ))
    .await
    .unwrap();
    let insert = a
        .prepare(&format!("INSERT INTO {t} VALUES ($1, $2, $3)"))
        .await
        .unwrap();
    let add = a
        .prepare(&format!("UPDATE {t} SET n = n + $1 WHERE id = $2"))
        .await
        .unwrap();

    a.batch_execute("BEGIN").await.unwrap();
    a.execute(&insert, &[&3i32, &30i32, &"c"]).await.unwrap();
    assert_eq!(
        get_n(&a, &t, 3).await,
        Some(30),
        "own insert, prepared lookup"
    );
    assert_eq!(a.execute(&add, &[&5i32, &1i32]).await.unwrap(), 1);
    assert_eq!(get_n(&a, &t, 1).await, Some(15), "own increment");
    // the simple protocol's literal statements take the same plans
    a.batch_execute(&format!(
        "DELETE FROM {t} WHERE id = 2; UPDATE {t} SET s = 'z' WHERE id = 3"
    ))
    .await
    .unwrap();
    assert_eq!(get_n(&a, &t, 2).await, None, "own delete");
    let ids: Vec<i32> = a
        .query(&format!("SELECT id FROM {t} WHERE id IN (1, 2, 3) "), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, vec![1, 3], "IN-list lookup through the write set");
    let s: String = a
        .query_one(&format!("SELECT s FROM {t} WHERE id = 3"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(s, "z");
    // another session sees none of it
    assert_eq!(get_n(&b, &t, 1).await, Some(10));
    assert_eq!(get_n(&b, &t, 2).await, Some(20));
    assert_eq!(get_n(&b, &t, 3).await, None);
    // a duplicate of the transaction's own insert is refused
    let e = a
        .execute(&insert, &[&3i32, &0i32, &"dup"])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::UNIQUE_VIOLATION);
    let e = a
        .query_opt(&format!("SELECT n FROM {t} WHERE id = 1"), &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::IN_FAILED_SQL_TRANSACTION);
    a.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(get_n(&a, &t, 1).await, Some(10), "rolled back");
    assert_eq!(get_n(&a, &t, 3).await, None, "rolled back");

    a.batch_execute("BEGIN").await.unwrap();
    a.execute(&add, &[&1i32, &1i32]).await.unwrap();
    a.batch_execute(&format!("INSERT INTO {t} VALUES (4, 40, 'd')"))
        .await
        .unwrap();
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(get_n(&b, &t, 1).await, Some(11), "committed");
    assert_eq!(get_n(&b, &t, 4).await, Some(40), "committed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_and_writes_in_blocks_see_own_writes_only() {
    let srv = Server::start("trust");
    own_writes_private_and_rolled_back(&srv, "row").await;
    own_writes_private_and_rolled_back(&srv, "column").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn increments_overflow_lock_and_recheck_like_postgres() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = srv.connect().await;
    a.batch_execute(
        "CREATE TABLE c (id INT PRIMARY KEY, n INT NOT NULL, m SMALLINT);
         INSERT INTO c VALUES (1, 2147483600, 32000), (2, 0, NULL)",
    )
    .await
    .unwrap();

    // PostgreSQL: ERROR 22003 integer out of range / smallint out of range.
    let e = a
        .execute("UPDATE c SET n = n + 100 WHERE id = 1", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
    let e = a
        .execute("UPDATE c SET m = m + $1 WHERE id = 1", &[&1000i16])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
    // NULL + 1 is NULL; n - $1 and $1 + n
    a.execute("UPDATE c SET m = m + 1, n = 5 + n WHERE id = 2", &[])
        .await
        .unwrap();
    a.execute("UPDATE c SET n = n - $1 WHERE id = 1", &[&600i32])
        .await
        .unwrap();
    let r = a
        .query_one("SELECT n, m FROM c WHERE id = 2", &[])
        .await
        .unwrap();
    assert_eq!((r.get::<_, i32>(0), r.get::<_, Option<i16>>(1)), (5, None));
    assert_eq!(get_n(&a, "c", 1).await, Some(2147483000));
    a.batch_execute("BEGIN").await.unwrap();
    let e = a
        .batch_execute("UPDATE c SET n = n + 1000 WHERE id = 1")
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
    a.batch_execute("ROLLBACK").await.unwrap();

    // READ COMMITTED: a waiting writer re-reads the newest version.
    a.batch_execute("BEGIN; UPDATE c SET n = n + 100 WHERE id = 2")
        .await
        .unwrap();
    let b = Arc::new(b);
    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            b.batch_execute("BEGIN; UPDATE c SET n = n + 1 WHERE id = 2; COMMIT")
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "the second writer waits for the row lock"
    );
    a.batch_execute("COMMIT").await.unwrap();
    waiter.await.unwrap().unwrap();
    assert_eq!(get_n(&a, "c", 2).await, Some(106), "no increment lost");

    // REPEATABLE READ: the snapshot holds; writing a row changed since fails.
    a.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    assert_eq!(get_n(&a, "c", 2).await, Some(106));
    b.execute("UPDATE c SET n = n + 1 WHERE id = 2", &[])
        .await
        .unwrap();
    assert_eq!(get_n(&a, "c", 2).await, Some(106), "snapshot kept");
    let e = a
        .execute("UPDATE c SET n = n + 1 WHERE id = 2", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::T_R_SERIALIZATION_FAILURE);
    a.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(get_n(&a, "c", 2).await, Some(107));

    // READ ONLY refuses fixed-plan writes too.
    a.batch_execute("BEGIN READ ONLY").await.unwrap();
    let e = a
        .execute("UPDATE c SET n = 0 WHERE id = 2", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::READ_ONLY_SQL_TRANSACTION);
    a.batch_execute("ROLLBACK; SET default_transaction_read_only = on")
        .await
        .unwrap();
    let e = a
        .execute("DELETE FROM c WHERE id = 2", &[])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::READ_ONLY_SQL_TRANSACTION);
}

/// Multi-key lookups read one consistent cut: transfers between keys on
/// different shards never show a lookup a total other than the invariant.
async fn lookups_see_whole_commits(srv: &Arc<Server>, orientation: &str) {
    let c = srv.connect().await;
    let t = format!("acct_{orientation}");
    c.batch_execute(&format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, bal BIGINT NOT NULL)
           WITH (shard_count = 4, orientation = '{orientation}')"
    ))
    .await
    .unwrap();
    let values: Vec<String> = (0..8).map(|i| format!("({i}, 100)")).collect();
    c.batch_execute(&format!("INSERT INTO {t} VALUES {}", values.join(",")))
        .await
        .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let srv = Arc::clone(srv);
        let t = t.clone();
        tokio::spawn(async move {
            let c = srv.connect().await;
            for i in 0..60i64 {
                let (lo, hi) = (i % 8, (i * 3 + 1) % 8);
                if lo == hi {
                    continue;
                }
                let (lo, hi) = (lo.min(hi), lo.max(hi));
                c.batch_execute(&format!(
                    "BEGIN; UPDATE {t} SET bal = bal - 3 WHERE id = {lo};
                     UPDATE {t} SET bal = bal + 3 WHERE id = {hi}; COMMIT"
                ))
                .await
                .unwrap();
            }
        })
    };
    let reader = {
        let srv = Arc::clone(srv);
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let c = srv.connect().await;
            let ids: Vec<i32> = (0..8).collect();
            let by_list = c
                .prepare(&format!("SELECT bal FROM {t} WHERE id = ANY($1)"))
                .await
                .unwrap();
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let rows = c.query(&by_list, &[&ids]).await.unwrap();
                let total: i64 = rows.iter().map(|r| r.get::<_, i64>(0)).sum();
                assert_eq!(
                    (rows.len(), total),
                    (8, 800),
                    "a lookup saw half a commit ({t})"
                );
                reads += 1;
            }
            reads
        })
    };
    writer.await.unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(reader.await.unwrap() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_key_lookups_never_see_half_a_commit() {
    let srv = Arc::new(Server::start("trust"));
    lookups_see_whole_commits(&srv, "row").await;
    lookups_see_whole_commits(&srv, "column").await;
}
