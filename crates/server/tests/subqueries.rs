//! Correlated subqueries over the extended protocol: planned once at Parse
//! with `$n` placeholders (inside the subqueries too), bound at Execute.
//! `tests/slt/subqueries.slt` covers the simple protocol; the answers here
//! are PostgreSQL 15's for the same data.

mod common;
use common::Server;

const SETUP: &str = "CREATE TABLE t1 (id INT PRIMARY KEY, a INT, c INT);
    INSERT INTO t1 VALUES (1, 10, 1), (2, 20, 2), (3, 30, 3), (4, NULL, 4), (5, 50, NULL);
    CREATE TABLE t2 (id INT PRIMARY KEY, b INT, c INT);
    INSERT INTO t2 VALUES (1, 10, 1), (2, 10, 2), (3, 30, 2), (4, NULL, 3), (5, 60, 5)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_inside_correlated_subqueries_are_bound_at_execute() {
    let srv = Server::start("trust");
    let client = srv.connect().await;
    client.batch_execute(SETUP).await.expect("setup");

    // non-equality correlation, aggregated (the dependent join)
    let stmt = client
        .prepare("SELECT id, (SELECT count(*) FROM t2 WHERE t2.c > t1.c + $1) FROM t1 ORDER BY id")
        .await
        .expect("prepare");
    for (shift, want) in [(0, vec![4i64, 2, 1, 1, 0]), (1, vec![2, 1, 1, 0, 0])] {
        let rows = client.query(&stmt, &[&shift]).await.expect("execute");
        let got: Vec<(i32, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let want: Vec<(i32, i64)> = (1..=5).zip(want).collect();
        assert_eq!(got, want, "shift {shift}");
    }

    // not aggregated: DataFusion's analyzer refuses it, Eddy's Apply runs
    // it, with the parameter bound inside
    let stmt = client
        .prepare("SELECT id, (SELECT b FROM t2 WHERE t2.id = t1.id + $1) FROM t1 ORDER BY id")
        .await
        .expect("prepare");
    let rows = client.query(&stmt, &[&1i32]).await.expect("execute");
    let got: Vec<(i32, Option<i32>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        got,
        vec![
            (1, Some(10)),
            (2, Some(30)),
            (3, None),
            (4, Some(60)),
            (5, None)
        ]
    );
    // two rows for one outer row: 21000 at Execute
    let err = client
        .query(
            "SELECT id, (SELECT b FROM t2 WHERE t2.c > t1.c - $1) FROM t1",
            &[&0i32],
        )
        .await
        .expect_err("more than one row");
    assert_eq!(
        err.as_db_error().map(|e| e.code().code()),
        Some("21000"),
        "{err:?}"
    );

    // IN and EXISTS in the select list, three-valued
    let rows = client
        .query(
            "SELECT id, a NOT IN (SELECT b FROM t2 WHERE t2.c < t1.c + $1), \
             EXISTS (SELECT 1 FROM t2 WHERE t2.b > t1.a + $1) FROM t1 ORDER BY id",
            &[&0i32],
        )
        .await
        .expect("in/exists");
    let got: Vec<(i32, Option<bool>, bool)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, Some(true), true),
            (2, Some(true), true),
            (3, Some(false), true),
            (4, None, false),
            (5, Some(true), true),
        ]
    );
}

/// A dependent join over many bindings stops at statement_timeout, and its
/// cached outcomes count against the query memory limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_dependent_join_is_bounded() {
    let srv = Server::start("trust");
    let client = srv.connect().await;
    client
        .batch_execute(
            "CREATE TABLE big (id INT PRIMARY KEY, c INT);
             INSERT INTO big SELECT g, g FROM generate_series(1, 10000) AS g",
        )
        .await
        .expect("setup");
    client
        .batch_execute("SET statement_timeout = '300ms'")
        .await
        .expect("set");
    let started = std::time::Instant::now();
    let err = client
        .simple_query("SELECT sum((SELECT count(*) FROM big AS x WHERE x.c > big.c)) FROM big")
        .await
        .expect_err("timeout");
    assert_eq!(
        err.as_db_error().map(|e| e.code().code()),
        Some("57014"),
        "{err:?}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    client
        .batch_execute("SET statement_timeout = 0; SET eddy.query_memory_limit = '1MB'")
        .await
        .expect("set");
    let err = client
        .simple_query(
            "SELECT count(*) FROM big WHERE id NOT IN \
             (SELECT x.c FROM big AS x WHERE x.c > big.c / 2) OR id < 0",
        )
        .await
        .expect_err("memory");
    assert_eq!(
        err.as_db_error().map(|e| e.code().code()),
        Some("53200"),
        "{err:?}"
    );
    // the session goes on
    let rows = client
        .simple_query(
            "SELECT (SELECT count(*) FROM big AS x WHERE x.c > big.c) FROM big WHERE id = 9990",
        )
        .await
        .expect("after");
    assert!(
        matches!(rows.get(1), Some(tokio_postgres::SimpleQueryMessage::Row(r)) if r.get(0) == Some("10"))
    );
}
