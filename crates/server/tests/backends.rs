//! `pg_stat_activity`, `pg_cancel_backend` and `pg_terminate_backend`
//! against the real server with several connections and roles. Each
//! expectation is PostgreSQL 15's (checked by hand with psycopg against
//! PostgreSQL 15: the same states, queries, 57014 for a cancelled query
//! and 57P01 for a terminated connection; 42501 for a role that may not
//! signal).

use std::time::{Duration, Instant};

use tokio_postgres::Client;

mod common;
use common::*;

async fn pid(c: &Client) -> i32 {
    c.query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0)
}

/// `(state, query)` of backend `pid` as `c` sees it.
async fn activity(c: &Client, pid: i32) -> (Option<String>, Option<String>) {
    let row = c
        .query_one(
            "SELECT state, query FROM pg_stat_activity WHERE pid = $1",
            &[&pid],
        )
        .await
        .expect("pg_stat_activity row");
    (row.get(0), row.get(1))
}

fn code(e: &tokio_postgres::Error) -> Option<&str> {
    e.code().map(|c| c.code())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_stat_activity_shows_each_connection_to_whom_postgres_shows_it() {
    let srv = Server::start("trust");
    let admin = srv.connect().await;
    admin
        .batch_execute(
            "CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; CREATE ROLE watcher LOGIN;
             GRANT pg_monitor TO watcher",
        )
        .await
        .expect("roles");
    let alice = srv.connect_as("alice", "unused").await.expect("alice");
    let bob = srv.connect_as("bob", "unused").await.expect("bob");
    let watcher = srv.connect_as("watcher", "unused").await.expect("watcher");
    let (alice_pid, admin_pid) = (pid(&alice).await, pid(&admin).await);

    alice
        .batch_execute("BEGIN; SELECT 42 AS answer")
        .await
        .expect("alice's block");
    let own = (
        Some("idle in transaction".to_string()),
        Some("BEGIN; SELECT 42 AS answer".to_string()),
    );
    // the superuser and pg_monitor see what alice does
    assert_eq!(activity(&admin, alice_pid).await, own);
    assert_eq!(activity(&watcher, alice_pid).await, own);
    // bob sees that she is there, not what she does
    assert_eq!(
        activity(&bob, alice_pid).await,
        (None, Some("<insufficient privilege>".to_string()))
    );
    let row = bob
        .query_one(
            "SELECT usename, datname, client_addr IS NULL, backend_start IS NULL \
             FROM pg_stat_activity WHERE pid = $1",
            &[&alice_pid],
        )
        .await
        .expect("bob's view");
    assert_eq!(row.get::<_, String>(0), "alice");
    assert_eq!(row.get::<_, String>(1), "eddy");
    assert!(row.get::<_, bool>(2) && row.get::<_, bool>(3));

    // the block's start, its name as the client set it
    let row = admin
        .query_one(
            "SELECT xact_start IS NOT NULL AND xact_start <= query_start, application_name \
             FROM pg_stat_activity WHERE pid = $1",
            &[&alice_pid],
        )
        .await
        .expect("alice's block");
    assert!(row.get::<_, bool>(0), "xact_start inside the block");
    assert_eq!(row.get::<_, String>(1), "");
    // a failed block, then idle with the last statement
    let _ = alice.batch_execute("SELECT 1/0").await;
    assert_eq!(
        activity(&admin, alice_pid).await.0.as_deref(),
        Some("idle in transaction (aborted)")
    );
    alice.batch_execute("ROLLBACK").await.expect("rollback");
    assert_eq!(
        activity(&admin, alice_pid).await,
        (Some("idle".to_string()), Some("ROLLBACK".to_string()))
    );
    alice
        .batch_execute("SET application_name = 'renamed'")
        .await
        .expect("set");
    let row = admin
        .query_one(
            "SELECT xact_start IS NULL, application_name FROM pg_stat_activity WHERE pid = $1",
            &[&alice_pid],
        )
        .await
        .expect("alice idle");
    assert!(row.get::<_, bool>(0), "no transaction while idle");
    assert_eq!(row.get::<_, String>(1), "renamed");
    // the asking session is active, running the query that asks (alice
    // sees her own)
    let (state, query) = activity(&alice, alice_pid).await;
    assert_eq!(state.as_deref(), Some("active"));
    assert!(query.unwrap_or_default().contains("pg_stat_activity"));
    let (state, query) = activity(&admin, admin_pid).await;
    assert_eq!(state.as_deref(), Some("active"));
    assert!(query.unwrap_or_default().contains("pg_stat_activity"));
    let n: i64 = admin
        .query_one("SELECT count(*) FROM pg_stat_activity", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_terminate_reach_the_backend_when_the_role_may_signal_it() {
    let srv = Server::start("trust");
    let admin = srv.connect().await;
    admin
        .batch_execute(
            "CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; CREATE ROLE killer LOGIN;
             GRANT pg_signal_backend TO killer",
        )
        .await
        .expect("roles");
    let alice = srv.connect_as("alice", "unused").await.expect("alice");
    let bob = srv.connect_as("bob", "unused").await.expect("bob");
    let killer = srv.connect_as("killer", "unused").await.expect("killer");
    let (alice_pid, admin_pid) = (pid(&alice).await, pid(&admin).await);

    // who may not: 42501, and nothing is signalled
    for (who, target) in [(&bob, alice_pid), (&killer, admin_pid), (&alice, admin_pid)] {
        for f in ["pg_cancel_backend", "pg_terminate_backend"] {
            let e = who
                .query_one(&format!("SELECT {f}($1::int)"), &[&target])
                .await
                .expect_err("refused");
            assert_eq!(code(&e), Some("42501"), "{f}: {e}");
        }
    }
    assert!(alice.query_one("SELECT 1", &[]).await.is_ok());
    // an unknown pid: false
    let none: bool = bob
        .query_one("SELECT pg_cancel_backend(7)", &[])
        .await
        .expect("unknown pid")
        .get(0);
    assert!(!none);

    // pg_signal_backend cancels alice's long query: 57014 there, and the
    // connection goes on
    let long = tokio::spawn(async move {
        let r = alice
            .query_one("SELECT count(*) FROM generate_series(1, 2000000000)", &[])
            .await;
        (alice, r)
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (state, _) = activity(&admin, alice_pid).await;
        if state.as_deref() == Some("active") {
            break;
        }
        assert!(Instant::now() < deadline, "alice's query never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let signalled: bool = killer
        .query_one("SELECT pg_cancel_backend($1::int)", &[&alice_pid])
        .await
        .expect("cancel")
        .get(0);
    assert!(signalled);
    let (alice, r) = tokio::time::timeout(Duration::from_secs(20), long)
        .await
        .expect("cancelled in time")
        .expect("task");
    assert_eq!(code(&r.expect_err("cancelled")), Some("57014"));
    assert!(alice.query_one("SELECT 1", &[]).await.is_ok());

    // the superuser terminates alice's connection inside a block: 57P01,
    // and her insert rolls back
    admin
        .batch_execute("CREATE TABLE kept (id int PRIMARY KEY); GRANT ALL ON kept TO alice")
        .await
        .expect("table");
    alice
        .batch_execute("BEGIN; INSERT INTO kept VALUES (1)")
        .await
        .expect("alice's insert");
    let signalled: bool = admin
        .query_one("SELECT pg_terminate_backend($1::int)", &[&alice_pid])
        .await
        .expect("terminate")
        .get(0);
    assert!(signalled);
    let e = alice
        .batch_execute("COMMIT")
        .await
        .expect_err("the connection is closed");
    assert!(
        code(&e) == Some("57P01") || e.is_closed(),
        "alice after pg_terminate_backend: {e}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
                &[&alice_pid],
            )
            .await
            .expect("count")
            .get(0);
        if n == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "alice's backend is still listed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let kept: i64 = admin
        .query_one("SELECT count(*) FROM kept", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(kept, 0, "the terminated block rolled back");
    let e = admin
        .query_one("SELECT pg_terminate_backend($1::int, -1)", &[&alice_pid])
        .await
        .expect_err("negative timeout");
    assert_eq!(code(&e), Some("22023"));

    // with a timeout the call returns once the connection is gone
    let again = srv
        .connect_as("alice", "unused")
        .await
        .expect("alice again");
    let again_pid = pid(&again).await;
    let ended: bool = killer
        .query_one("SELECT pg_terminate_backend($1::int, 10000)", &[&again_pid])
        .await
        .expect("terminate and wait")
        .get(0);
    assert!(ended);
    let n: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
            &[&again_pid],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 0, "gone when pg_terminate_backend returned");
    let gone: bool = killer
        .query_one("SELECT pg_terminate_backend($1::int, 100)", &[&again_pid])
        .await
        .expect("an ended pid")
        .get(0);
    assert!(!gone);
}
