//! MERGE end to end, against the real server over the protocol: no lost
//! update when clients merge into the same rows at once, parameters typed
//! from the target's columns at Parse, the command tag's count,
//! REPEATABLE READ's 40001, privileges per action, and the statement
//! undone whole on an error. Expected answers are PostgreSQL 15's; the
//! SQL behaviour itself is in `tests/slt/merge.slt`. Also EXPLAIN of
//! INSERT, UPDATE, DELETE and MERGE (`session/explain_dml.rs`): the plans
//! of the queries Eddy runs for them, never DataFusion's DML node.

use std::sync::Arc;

use tokio_postgres::Client;

mod common;
use common::*;

async fn one_i64(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.expect(sql).get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_merges_never_lose_an_increment() {
    let srv = Arc::new(Server::start("trust"));
    let c = srv.connect().await;
    c.batch_execute(
        "CREATE TABLE counters (id INT PRIMARY KEY, n BIGINT NOT NULL) WITH (shard_count = 2);
         INSERT INTO counters VALUES (1, 0), (2, 0)",
    )
    .await
    .unwrap();
    const CLIENTS: i64 = 6;
    const EACH: i64 = 30;
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let srv = Arc::clone(&srv);
        tasks.push(tokio::spawn(async move {
            let mut c = srv.connect().await;
            // prepared once: $1 typed int4 and $2 int8 from the target's
            // columns (the ON comparison and the assignment)
            let merge = c
                .prepare(
                    "MERGE INTO counters c USING (SELECT 1 AS one) s ON c.id = $1 \
                     WHEN MATCHED THEN UPDATE SET n = c.n + 1 \
                     WHEN NOT MATCHED THEN INSERT VALUES ($1, $2)",
                )
                .await
                .unwrap();
            for j in 0..EACH {
                let id: i32 = if (i + j) % 2 == 0 { 1 } else { 2 };
                let n = if j % 3 == 0 {
                    // inside a block, with a second statement
                    let tx = c.build_transaction().start().await.unwrap();
                    let n = tx.execute(&merge, &[&id, &0i64]).await.unwrap();
                    tx.commit().await.unwrap();
                    n
                } else {
                    c.execute(&merge, &[&id, &0i64]).await.unwrap()
                };
                assert_eq!(n, 1, "MERGE's tag counts the row it updated");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        one_i64(&c, "SELECT sum(n)::int8 FROM counters").await,
        CLIENTS * EACH
    );
    assert_eq!(
        one_i64(&c, "SELECT count(*) FROM counters").await,
        2,
        "no row inserted for a matched key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_counts_rolls_back_whole_and_fails_repeatable_read() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = srv.connect().await;
    a.batch_execute(
        "CREATE TABLE stock (item TEXT PRIMARY KEY, qty INT NOT NULL CHECK (qty >= 0));
         INSERT INTO stock VALUES ('apple', 5), ('pear', 1)",
    )
    .await
    .unwrap();
    // the tag counts inserted, updated and deleted rows together
    let n = a
        .execute(
            "MERGE INTO stock s USING (VALUES ('apple', 1), ('pear', -1), ('fig', 2)) v(item, d) \
             ON s.item = v.item \
             WHEN MATCHED AND s.qty + v.d = 0 THEN DELETE \
             WHEN MATCHED THEN UPDATE SET qty = s.qty + v.d \
             WHEN NOT MATCHED THEN INSERT VALUES (v.item, v.d)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(n, 3);
    // a CHECK violation by one row leaves every row as it was (PostgreSQL:
    // 23514, nothing inserted or updated)
    let e = a
        .execute(
            "MERGE INTO stock s USING (VALUES ('apple', 1), ('fig', -9), ('kiwi', 1)) v(item, d) \
             ON s.item = v.item WHEN MATCHED THEN UPDATE SET qty = s.qty + v.d \
             WHEN NOT MATCHED THEN INSERT VALUES (v.item, v.d)",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("23514"));
    let rows: Vec<(String, i32)> = a
        .query("SELECT item, qty FROM stock ORDER BY item", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rows, vec![("apple".into(), 6), ("fig".into(), 2)]);
    // REPEATABLE READ: a row changed since the snapshot fails with 40001
    a.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM stock")
        .await
        .unwrap();
    b.execute("UPDATE stock SET qty = 100 WHERE item = 'apple'", &[])
        .await
        .unwrap();
    let e = a
        .execute(
            "MERGE INTO stock s USING (VALUES ('apple')) v(item) ON s.item = v.item \
             WHEN MATCHED THEN UPDATE SET qty = s.qty + 1",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("40001"));
    a.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        one_i64(&a, "SELECT qty::int8 FROM stock WHERE item = 'apple'").await,
        100
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_needs_the_privilege_of_each_action_it_takes() {
    let srv = Server::start("trust");
    let admin = srv.connect().await;
    admin
        .batch_execute(
            "CREATE TABLE t (id INT PRIMARY KEY, v TEXT);
             INSERT INTO t VALUES (1, 'a');
             CREATE ROLE clerk LOGIN PASSWORD 'pw';
             GRANT SELECT, UPDATE ON t TO clerk",
        )
        .await
        .unwrap();
    let clerk = srv.connect_as("clerk", "pw").await.unwrap();
    let update = "MERGE INTO t USING (VALUES (1, 'b')) s(id, v) ON t.id = s.id \
                  WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN DO NOTHING";
    assert_eq!(clerk.execute(update, &[]).await.unwrap(), 1);
    for needs_more in [
        "MERGE INTO t USING (VALUES (2, 'c')) s(id, v) ON t.id = s.id \
         WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)",
        "MERGE INTO t USING (VALUES (1)) s(id) ON t.id = s.id WHEN MATCHED THEN DELETE",
    ] {
        let e = clerk.execute(needs_more, &[]).await.unwrap_err();
        assert_eq!(e.code().map(|c| c.code()), Some("42501"), "{needs_more}");
    }
    assert_eq!(one_i64(&admin, "SELECT count(*) FROM t").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_of_a_write_shows_the_queries_it_runs_and_writes_nothing() {
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v TEXT);
         CREATE TABLE s (id INT, v TEXT);
         INSERT INTO t VALUES (1, 'a'), (2, 'b');
         INSERT INTO s VALUES (2, 'x'), (3, 'y')",
    )
    .await
    .unwrap();
    let plan = |rows: Vec<tokio_postgres::Row>| -> Vec<(String, String)> {
        rows.iter().map(|r| (r.get(0), r.get(1))).collect()
    };
    for (sql, headline, label) in [
        (
            "EXPLAIN UPDATE t SET v = 'z' WHERE v > 'a'",
            "Update on t",
            "rows to update",
        ),
        (
            "EXPLAIN DELETE FROM t USING s WHERE t.id = s.id",
            "Delete on t",
            "rows to delete",
        ),
        (
            "EXPLAIN INSERT INTO t SELECT id + 10, v FROM s",
            "Insert on t",
            "rows to insert",
        ),
        (
            "EXPLAIN MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE \
             WHEN NOT MATCHED THEN DO NOTHING",
            "Merge on t",
            "matched rows",
        ),
        (
            "EXPLAIN WITH x AS (SELECT 1 AS k) DELETE FROM t USING x WHERE t.id = x.k",
            "Delete on t",
            "rows to delete",
        ),
    ] {
        // both protocols: simple, then prepared
        let simple: Vec<(String, String)> = c
            .simple_query(sql)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => Some((
                    r.get(0).unwrap_or_default().to_string(),
                    r.get(1).unwrap_or_default().to_string(),
                )),
                _ => None,
            })
            .collect();
        let prepared = plan(c.query(sql, &[]).await.unwrap());
        for rows in [simple, prepared] {
            assert_eq!(rows[0].0, "dml", "{sql}");
            assert!(rows[0].1.starts_with(headline), "{sql}: {rows:?}");
            assert!(
                rows.iter()
                    .any(|(t, _)| t == &format!("{label}: physical_plan")),
                "{sql}: {rows:?}"
            );
            // DataFusion's DML node is never shown: Eddy does not run it
            assert!(
                !rows.iter().any(|(t, _)| t.contains("error")),
                "{sql}: {rows:?}"
            );
        }
    }
    // a primary-key write takes the fixed plan: no query is planned
    let rows = plan(
        c.query("EXPLAIN UPDATE t SET v = 'q' WHERE id = 1", &[])
            .await
            .unwrap(),
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0].1.contains("fixed-plan path"), "{rows:?}");
    // EXPLAIN ANALYZE would write: refused
    let e = c
        .query("EXPLAIN ANALYZE DELETE FROM t", &[])
        .await
        .unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("0A000"));
    assert_eq!(one_i64(&c, "SELECT count(*) FROM t").await, 2);
    assert_eq!(
        c.query_one("SELECT v FROM t WHERE id = 2", &[])
            .await
            .unwrap()
            .get::<_, String>(0),
        "b"
    );
}
