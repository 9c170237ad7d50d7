//! Catalog changes inside transaction blocks, against the real server:
//! other sessions wait for a block that changes a table's definition (and
//! give up after `lock_timeout` with 55P03), see the change after COMMIT
//! and not after ROLLBACK; a kill -9 before COMMIT leaves none of the
//! block's tables, columns or rows, after COMMIT all of them. Single-session
//! semantics: `tests/slt/ddl_transactions.slt`.

use std::time::Duration;

use tokio_postgres::Client;

mod common;
use common::*;

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

async fn count(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.expect(sql).get(0)
}

/// Runs `sql` on a new connection in the background; the answer (rows or
/// SQLSTATE) arrives on the returned handle.
fn background(
    c: Client,
    sql: &'static str,
) -> tokio::task::JoinHandle<(Client, Result<usize, String>)> {
    tokio::spawn(async move {
        let r = c
            .simple_query(sql)
            .await
            .map(|m| m.len())
            .map_err(|e| code(&e));
        (c, r)
    })
}

/// LOCK TABLE holds others off as PostgreSQL's lock of the same mode:
/// ACCESS SHARE keeps ALTER TABLE waiting (and lets readers and writers
/// through) until the block ends; ACCESS EXCLUSIVE keeps readers waiting;
/// NOWAIT on a held lock fails at once with 55P03.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_table_holds_others_off_until_the_block_ends() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    a.batch_execute(
        "CREATE TABLE locked_t (id INT PRIMARY KEY, v INT); INSERT INTO locked_t VALUES (1, 1)",
    )
    .await
    .unwrap();

    a.batch_execute("BEGIN; LOCK TABLE locked_t IN ACCESS SHARE MODE")
        .await
        .unwrap();
    let b = srv.connect().await;
    b.batch_execute("INSERT INTO locked_t VALUES (2, 2)")
        .await
        .expect("a writer passes an ACCESS SHARE lock");
    assert_eq!(count(&b, "SELECT count(*) FROM locked_t").await, 2);
    let e = b
        .batch_execute("BEGIN; LOCK TABLE locked_t IN ACCESS EXCLUSIVE MODE NOWAIT")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "55P03");
    b.batch_execute("ROLLBACK").await.unwrap();
    let alter = background(b, "ALTER TABLE locked_t ADD COLUMN note TEXT");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !alter.is_finished(),
        "ALTER TABLE ran past an ACCESS SHARE lock"
    );
    a.batch_execute("COMMIT").await.unwrap();
    let (b, r) = tokio::time::timeout(Duration::from_secs(10), alter)
        .await
        .expect("ALTER TABLE was not woken by COMMIT")
        .unwrap();
    assert!(r.is_ok(), "ALTER TABLE after COMMIT: {r:?}");

    a.batch_execute("BEGIN; LOCK TABLE locked_t").await.unwrap();
    let reader = background(b, "SELECT count(*) FROM locked_t");
    // a point lookup (the fixed-plan path) waits too
    let lookup = background(srv.connect().await, "SELECT v FROM locked_t WHERE id = 1");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !reader.is_finished() && !lookup.is_finished(),
        "a reader ran past an ACCESS EXCLUSIVE lock"
    );
    a.batch_execute("ROLLBACK").await.unwrap();
    for waiting in [reader, lookup] {
        let (_, r) = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the reader was not woken by ROLLBACK")
            .unwrap();
        assert!(r.is_ok(), "reader after ROLLBACK: {r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn others_wait_for_a_definition_change_and_see_its_outcome() {
    let srv = Server::start("trust");
    let a = srv.connect().await;
    a.batch_execute(
        "CREATE TABLE shared_t (id INT PRIMARY KEY, v INT) WITH (shard_count = 2);
         INSERT INTO shared_t VALUES (1, 1), (2, 2)",
    )
    .await
    .unwrap();

    // ALTER ... COMMIT: a reader waits, then sees the new column
    a.batch_execute("BEGIN; ALTER TABLE shared_t ADD COLUMN note TEXT; UPDATE shared_t SET note = 'n' WHERE id = 1")
        .await
        .unwrap();
    let reader = background(
        srv.connect().await,
        "SELECT id, note FROM shared_t ORDER BY id",
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !reader.is_finished(),
        "a reader ran while the definition was changing"
    );
    a.batch_execute("COMMIT").await.unwrap();
    let (b, r) = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .expect("the reader was not woken by COMMIT")
        .unwrap();
    assert!(r.is_ok(), "reader after COMMIT: {r:?}");
    let note: Option<String> = b
        .query_one("SELECT note FROM shared_t WHERE id = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(note.as_deref(), Some("n"));

    // CREATE TABLE ... ROLLBACK: a writer to the new table waits, then
    // finds no table (PostgreSQL answers 42P01 at once: the table is not in
    // its catalog snapshot; Eddy makes it wait for the outcome)
    a.batch_execute("BEGIN; CREATE TABLE fresh_t (x INT); INSERT INTO fresh_t VALUES (1)")
        .await
        .unwrap();
    let writer = background(b, "INSERT INTO fresh_t VALUES (2)");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !writer.is_finished(),
        "a writer used a table whose creation had not committed"
    );
    a.batch_execute("ROLLBACK").await.unwrap();
    let (b, r) = tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the writer was not woken by ROLLBACK")
        .unwrap();
    assert_eq!(r, Err("42P01".to_string()));

    // COPY waits too (its table is not among the relations sqlparser visits)
    a.batch_execute("BEGIN; CREATE TABLE copied_t (x INT)")
        .await
        .unwrap();
    let copier = tokio::spawn(async move {
        let r = b
            .copy_out("COPY copied_t TO STDOUT")
            .await
            .map(|_| ())
            .map_err(|e| code(&e));
        (b, r)
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !copier.is_finished(),
        "COPY read a table whose creation had not committed"
    );
    a.batch_execute("ROLLBACK").await.unwrap();
    let (b, r) = tokio::time::timeout(Duration::from_secs(10), copier)
        .await
        .expect("COPY was not woken by ROLLBACK")
        .unwrap();
    assert_eq!(r, Err("42P01".to_string()));

    // lock_timeout bounds the wait (55P03); the table is usable afterwards
    a.batch_execute("BEGIN; ALTER TABLE shared_t RENAME COLUMN v TO val")
        .await
        .unwrap();
    b.batch_execute("SET lock_timeout = '300ms'").await.unwrap();
    let err = b
        .batch_execute("UPDATE shared_t SET v = 5 WHERE id = 2")
        .await
        .expect_err("the update did not wait for the ALTER");
    assert_eq!(code(&err), "55P03");
    a.batch_execute("ROLLBACK").await.unwrap();
    b.batch_execute("UPDATE shared_t SET v = 5 WHERE id = 2")
        .await
        .unwrap();
    assert_eq!(
        count(&b, "SELECT v::bigint FROM shared_t WHERE id = 2").await,
        5
    );

    // a block that used the table holds it: the ALTER waits for it
    b.batch_execute("BEGIN; SELECT count(*) FROM shared_t")
        .await
        .unwrap();
    a.batch_execute("BEGIN; CREATE TABLE unrelated_t (x INT)")
        .await
        .unwrap();
    // while some definition changes, statements take table locks: this one
    // is kept by b's block
    b.batch_execute("SELECT count(*) FROM shared_t")
        .await
        .unwrap();
    a.batch_execute("COMMIT").await.unwrap();
    let alter = background(a, "ALTER TABLE shared_t ADD COLUMN later INT");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !alter.is_finished(),
        "ALTER ran under a block that holds the table"
    );
    b.batch_execute("COMMIT").await.unwrap();
    let (_a, r) = tokio::time::timeout(Duration::from_secs(10), alter)
        .await
        .expect("ALTER was not woken")
        .unwrap();
    assert!(r.is_ok(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_before_commit_leaves_nothing_after_commit_everything() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    {
        let srv = Server::start_in(None, data.clone(), "trust");
        let c = srv.connect().await;
        c.batch_execute(
            "CREATE TABLE base_t (id INT PRIMARY KEY, v INT) WITH (shard_count = 3);
             INSERT INTO base_t VALUES (1, 1), (2, 2), (3, 3);
             CREATE TABLE doomed_t (id INT PRIMARY KEY); INSERT INTO doomed_t VALUES (1);
             CREATE TABLE spared_t (id INT PRIMARY KEY); INSERT INTO spared_t VALUES (1)",
        )
        .await
        .unwrap();
        let rows =
            |n: i64, f: &dyn Fn(i64) -> String| (1..=n).map(f).collect::<Vec<_>>().join(", ");
        // committed: a new table with rows on several shards and a column
        c.batch_execute(&format!(
            "BEGIN;
             CREATE TABLE made_t (id INT PRIMARY KEY, v TEXT) WITH (shard_count = 3);
             INSERT INTO made_t VALUES {};
             ALTER TABLE base_t ADD COLUMN w INT;
             UPDATE base_t SET w = id * 10;
             DROP TABLE doomed_t;
             COMMIT",
            rows(50, &|i| format!("({i}, 'r{i}')"))
        ))
        .await
        .unwrap();
        // not committed when the server dies
        c.batch_execute(&format!(
            "BEGIN;
             CREATE TABLE lost_t (id INT PRIMARY KEY) WITH (shard_count = 2);
             INSERT INTO lost_t VALUES {};
             ALTER TABLE base_t ADD COLUMN z INT;
             ALTER TABLE base_t RENAME TO base_renamed;
             INSERT INTO base_renamed VALUES (4, 4, 40, 400);
             DROP TABLE spared_t",
            rows(20, &|i| format!("({i})"))
        ))
        .await
        .unwrap();
        srv.kill_9();
        drop(c);
    }
    let srv = Server::start_in(Some(dir), data, "trust");
    let c = srv.connect().await;
    assert_eq!(count(&c, "SELECT count(*) FROM made_t").await, 50);
    assert_eq!(
        count(&c, "SELECT sum(w)::bigint FROM base_t").await,
        60,
        "the committed column and its values"
    );
    let doomed = c.simple_query("SELECT * FROM doomed_t").await.unwrap_err();
    assert_eq!(code(&doomed), "42P01", "a committed DROP TABLE came back");
    assert_eq!(count(&c, "SELECT count(*) FROM spared_t").await, 1);
    let lost = c.simple_query("SELECT * FROM lost_t").await.unwrap_err();
    assert_eq!(code(&lost), "42P01");
    let renamed = c
        .simple_query("SELECT * FROM base_renamed")
        .await
        .unwrap_err();
    assert_eq!(code(&renamed), "42P01");
    let z = c.simple_query("SELECT z FROM base_t").await.unwrap_err();
    assert_eq!(code(&z), "42703");
    assert_eq!(count(&c, "SELECT count(*) FROM base_t").await, 3);
    // the names are free and the tables writable after recovery
    c.batch_execute(
        "CREATE TABLE lost_t (id INT PRIMARY KEY); INSERT INTO lost_t VALUES (1);
         ALTER TABLE base_t ADD COLUMN z INT; INSERT INTO base_t VALUES (4, 4, 40, 400)",
    )
    .await
    .unwrap();
    assert_eq!(count(&c, "SELECT sum(z)::bigint FROM base_t").await, 400);
}

/// A block that drops a table and a sequence and creates them again under
/// the same names (as `pg_restore --clean --single-transaction` does):
/// killed before COMMIT, the old table, its rows and both sequences'
/// positions are back after restart, and nothing of the new ones; a
/// committed one keeps the new ones, and the hidden name the old table
/// waited under is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_inside_a_drop_and_recreate_block_brings_the_old_ones_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    {
        let srv = Server::start_in(None, data.clone(), "trust");
        let c = srv.connect().await;
        c.batch_execute(
            "CREATE TABLE kept_t (id SERIAL PRIMARY KEY, v TEXT) WITH (shard_count = 2);
             INSERT INTO kept_t (v) VALUES ('a'), ('b'), ('c');
             CREATE SEQUENCE kept_s START 40;
             SELECT nextval('kept_s');
             CREATE TABLE swapped_t (id INT PRIMARY KEY);
             INSERT INTO swapped_t VALUES (1);
             BEGIN;
             DROP TABLE swapped_t;
             CREATE TABLE swapped_t (id INT PRIMARY KEY, w INT);
             INSERT INTO swapped_t VALUES (2, 20);
             COMMIT;
             BEGIN;
             DROP TABLE kept_t;
             DROP SEQUENCE kept_s;
             CREATE TABLE kept_t (id SERIAL PRIMARY KEY, v TEXT, extra INT);
             INSERT INTO kept_t (v, extra) VALUES ('new', 1);
             CREATE SEQUENCE kept_s START 900;
             SELECT nextval('kept_s');",
        )
        .await
        .unwrap();
        srv.kill_9();
        drop(c);
    }
    let srv = Server::start_in(Some(dir), data, "trust");
    let c = srv.connect().await;
    assert_eq!(count(&c, "SELECT count(*) FROM kept_t").await, 3);
    let extra = c
        .simple_query("SELECT extra FROM kept_t")
        .await
        .unwrap_err();
    assert_eq!(code(&extra), "42703", "the new table's column survived");
    // both sequences continue past what they handed out (a restart may
    // skip values, never repeat one)
    assert!(count(&c, "SELECT nextval('kept_s')").await > 40);
    c.batch_execute("INSERT INTO kept_t (v) VALUES ('d')")
        .await
        .expect("the old table's serial still numbers its rows");
    assert!(count(&c, "SELECT max(id)::bigint FROM kept_t").await > 3);
    // the committed swap
    assert_eq!(count(&c, "SELECT sum(w)::bigint FROM swapped_t").await, 20);
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM pg_class WHERE relname LIKE '%eddy%' OR relname LIKE 'swapped%'"
        )
        .await,
        2,
        "the committed swap left its table and key index, nothing hidden"
    );
}
