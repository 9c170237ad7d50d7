//! Views against the real server, where more than one session or a
//! restart matters: a view is visible to others only once its transaction
//! commits; two transactions changing one view cannot both win; a kill -9
//! keeps committed views and loses the others; a view is read by its owner
//! (and superusers) only; prepared statements read views. Single-session
//! semantics, checked against PostgreSQL 15: `tests/slt/views.slt`.

use tokio_postgres::Client;

mod common;
use common::*;

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

async fn count(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.expect(sql).get(0)
}

async fn fails_with(c: &Client, sql: &str, sqlstate: &str) {
    let e = c
        .simple_query(sql)
        .await
        .expect_err(&format!("{sql} succeeded"));
    assert_eq!(code(&e), sqlstate, "{sql}: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn others_see_a_view_after_commit_and_competing_changes_do_not_both_win() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    let b = srv.connect().await;
    a.batch_execute(
        "CREATE TABLE base (id INT PRIMARY KEY, v INT) WITH (shard_count = 2);
         INSERT INTO base VALUES (1, 10), (2, 20), (3, 30)",
    )
    .await
    .unwrap();

    // created in a block: not there for others until COMMIT
    a.batch_execute("BEGIN; CREATE VIEW big AS SELECT id FROM base WHERE v > 15")
        .await
        .unwrap();
    assert_eq!(count(&a, "SELECT count(*) FROM big").await, 2);
    fails_with(&b, "SELECT * FROM big", "42P01").await;
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(count(&b, "SELECT count(*) FROM big").await, 2);

    // replaced in a block while another session replaces it and commits
    // first: the block's COMMIT fails (40001) and the other's stands
    a.batch_execute("BEGIN; CREATE OR REPLACE VIEW big AS SELECT id FROM base WHERE v > 25")
        .await
        .unwrap();
    assert_eq!(count(&b, "SELECT count(*) FROM big").await, 2);
    b.batch_execute("CREATE OR REPLACE VIEW big AS SELECT id FROM base WHERE v > 5")
        .await
        .unwrap();
    let e = a.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(code(&e), "40001", "{e}");
    assert_eq!(count(&a, "SELECT count(*) FROM big").await, 3);

    // two creates of one name: the second to commit gets 42P07
    a.batch_execute("BEGIN; CREATE VIEW twin AS SELECT 1 AS one")
        .await
        .unwrap();
    b.batch_execute("CREATE VIEW twin AS SELECT 2 AS one")
        .await
        .unwrap();
    let e = a.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(code(&e), "42P07", "{e}");
    let one: i32 = a
        .query_one("SELECT one FROM twin", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(one, 2);

    // a dropped view stays for others until the drop commits
    // (the failing SELECT inside a savepoint: an error aborts the block)
    a.batch_execute("BEGIN; DROP VIEW twin; SAVEPOINT s")
        .await
        .unwrap();
    fails_with(&a, "SELECT * FROM twin", "42P01").await;
    a.batch_execute("ROLLBACK TO SAVEPOINT s").await.unwrap();
    assert_eq!(count(&b, "SELECT count(*) FROM twin").await, 1);
    a.batch_execute("COMMIT").await.unwrap();
    fails_with(&b, "SELECT * FROM twin", "42P01").await;

    // prepared statements (the extended protocol) read views, with
    // parameters bound into the view's filters
    let st = b
        .prepare("SELECT id FROM big WHERE id >= $1 ORDER BY id")
        .await
        .unwrap();
    let ids: Vec<i32> = b
        .query(&st, &[&2i32])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, vec![2, 3]);
    // the prepared statement reads the view as it is at each Execute
    a.batch_execute("CREATE OR REPLACE VIEW big AS SELECT id FROM base WHERE id = 3")
        .await
        .unwrap();
    let ids: Vec<i32> = b
        .query(&st, &[&1i32])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, vec![3]);
    a.batch_execute("DROP VIEW big").await.unwrap();
    let e = b.query(&st, &[&1i32]).await.unwrap_err();
    assert_eq!(code(&e), "42P01", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_keeps_committed_views_and_loses_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    {
        let srv = Server::start_in(None, data.clone(), "trust");
        let c = srv.connect().await;
        c.batch_execute(
            "CREATE TABLE k_t (id INT PRIMARY KEY, v INT);
             INSERT INTO k_t VALUES (1, 1), (2, 2);
             CREATE VIEW k_kept AS SELECT id FROM k_t;
             BEGIN;
             CREATE TABLE k_new (id INT PRIMARY KEY);
             INSERT INTO k_new VALUES (7);
             CREATE VIEW k_over_new (n) AS SELECT id FROM k_new;
             COMMIT;
             BEGIN;
             CREATE VIEW k_lost AS SELECT 1 AS x;
             DROP VIEW k_kept",
        )
        .await
        .unwrap();
        srv.kill_9();
        drop(c);
    }
    let srv = Server::start_in(Some(dir), data, "trust");
    let c = srv.connect().await;
    assert_eq!(count(&c, "SELECT count(*) FROM k_kept").await, 2);
    let n: i32 = c
        .query_one("SELECT n FROM k_over_new", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 7);
    fails_with(&c, "SELECT * FROM k_lost", "42P01").await;
    // the lost view's name is free; the kept ones still protect their tables
    c.batch_execute("CREATE VIEW k_lost AS SELECT 2 AS x")
        .await
        .unwrap();
    fails_with(&c, "DROP TABLE k_t", "2BP01").await;
    // views do not take table OIDs: every relation's OID is its own
    assert_eq!(
        count(
            &c,
            "SELECT count(DISTINCT oid) - count(*) FROM pg_class WHERE relname LIKE 'k\\_%'"
        )
        .await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_is_read_by_its_owner_grantees_and_superusers() {
    let srv = Server::start("scram");
    let su = srv.connect().await;
    su.batch_execute(
        "CREATE TABLE secret (id INT PRIMARY KEY, pay INT);
         INSERT INTO secret VALUES (1, 100);
         CREATE VIEW secret_v AS SELECT id FROM secret;
         CREATE ROLE alice LOGIN PASSWORD 'alice-pw';
         GRANT SELECT ON secret TO alice;
         GRANT CREATE ON SCHEMA public TO alice",
    )
    .await
    .unwrap();
    let alice = srv.connect_as("alice", "alice-pw").await.unwrap();
    // not her view: 42501 until she is granted SELECT on it
    fails_with(&alice, "SELECT * FROM secret_v", "42501").await;
    su.batch_execute("GRANT SELECT ON secret_v TO alice")
        .await
        .unwrap();
    assert_eq!(count(&alice, "SELECT count(*) FROM secret_v").await, 1);
    su.batch_execute("REVOKE SELECT ON secret_v FROM alice")
        .await
        .unwrap();
    fails_with(&alice, "SELECT * FROM secret_v", "42501").await;
    // her own view over a table she may read
    alice
        .batch_execute("CREATE VIEW mine AS SELECT pay FROM secret")
        .await
        .unwrap();
    assert_eq!(count(&alice, "SELECT count(*) FROM mine").await, 1);
    // only the owner replaces or drops it
    fails_with(&alice, "DROP VIEW secret_v", "42501").await;
    fails_with(
        &alice,
        "CREATE OR REPLACE VIEW secret_v AS SELECT id FROM secret",
        "42501",
    )
    .await;
    // a view cannot read what its creator may not
    su.batch_execute("CREATE TABLE hidden (x INT)")
        .await
        .unwrap();
    fails_with(&alice, "CREATE VIEW peek AS SELECT x FROM hidden", "42501").await;
    // given to her (as pg_dump writes it: ALTER TABLE), the view is hers
    su.batch_execute("ALTER TABLE secret_v OWNER TO alice")
        .await
        .unwrap();
    assert_eq!(count(&alice, "SELECT count(*) FROM secret_v").await, 1);
    let owner: String = su
        .query_one(
            "SELECT viewowner::text FROM pg_views WHERE viewname = 'secret_v'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(owner, "alice");
    // a view's query runs with its owner's privileges: given to her, a
    // view over what she may not read fails for everyone, a superuser
    // too, as in PostgreSQL ("permission denied for table hidden")
    su.batch_execute("CREATE VIEW hidden_v AS SELECT x FROM hidden")
        .await
        .unwrap();
    su.batch_execute("ALTER TABLE hidden_v OWNER TO alice")
        .await
        .unwrap();
    fails_with(&alice, "SELECT * FROM hidden_v", "42501").await;
    fails_with(&su, "SELECT * FROM hidden_v", "42501").await;
    su.batch_execute("GRANT SELECT ON hidden TO alice")
        .await
        .unwrap();
    assert_eq!(count(&su, "SELECT count(*) FROM hidden_v").await, 0);
    su.batch_execute("REVOKE SELECT ON hidden FROM alice; ALTER TABLE hidden_v OWNER TO eddy")
        .await
        .unwrap();
    // and only its owner gives it away
    fails_with(&alice, "ALTER TABLE hidden_v OWNER TO alice", "42501").await;
}
