//! Schemas end to end, against the real server: who may use and create in
//! a schema (USAGE, CREATE, ownership: 42501 otherwise, and a search path
//! skipping a schema without USAGE; PostgreSQL 15 gives the same answers,
//! recorded in `tests/postgres15/schema_privileges.txt`), a DROP SCHEMA waiting for a transaction creating in the
//! schema (so no relation is left without its schema), and schemas
//! surviving a kill -9 exactly as committed. The SQL behaviour itself,
//! checked against PostgreSQL 15 over both protocols, is
//! `tests/slt/schemas.slt`.

mod common;

use std::time::Duration;

use common::{code_of, Server};
use tokio_postgres::Client;

async fn count(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.expect(sql).get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_privileges_follow_postgresql() {
    let server = Server::start("trust");
    let su = server.connect().await;
    su.batch_execute(
        "CREATE ROLE alice LOGIN;
         CREATE ROLE bob LOGIN;
         CREATE SCHEMA owned AUTHORIZATION alice;
         CREATE SCHEMA shared;
         CREATE TABLE shared.t (id int PRIMARY KEY, v text);
         INSERT INTO shared.t VALUES (1, 'one');
         GRANT SELECT ON shared.t TO bob;",
    )
    .await
    .unwrap();
    let alice = server.connect_as("alice", "x").await.unwrap();
    let bob = server.connect_as("bob", "x").await.unwrap();

    // only a superuser creates schemas
    assert_eq!(code_of(&alice, "CREATE SCHEMA mine").await, "42501");
    // the owner uses its schema and creates in it
    assert_eq!(
        code_of(
            &alice,
            "CREATE TABLE owned.a (x int); INSERT INTO owned.a VALUES (1)"
        )
        .await,
        "ok"
    );
    assert_eq!(count(&alice, "SELECT count(*) FROM owned.a").await, 1);
    // others need USAGE, even with the table's grant
    assert_eq!(code_of(&bob, "SELECT * FROM shared.t").await, "42501");
    assert_eq!(
        code_of(&alice, "CREATE TABLE shared.b (x int)").await,
        "42501"
    );
    assert_eq!(
        code_of(&alice, "GRANT USAGE ON SCHEMA shared TO bob").await,
        "42501"
    );
    su.batch_execute("GRANT USAGE ON SCHEMA shared TO bob")
        .await
        .unwrap();
    assert_eq!(count(&bob, "SELECT count(*) FROM shared.t").await, 1);
    // USAGE is not CREATE; and the table's own privileges still apply
    assert_eq!(
        code_of(&bob, "CREATE TABLE shared.c (x int)").await,
        "42501"
    );
    assert_eq!(code_of(&bob, "DELETE FROM shared.t").await, "42501");
    let privileges: (bool, bool) = {
        let row = bob
            .query_one(
                "SELECT has_schema_privilege('shared', 'USAGE'), has_schema_privilege('shared', 'CREATE')",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(privileges, (true, false));
    su.batch_execute("GRANT CREATE ON SCHEMA shared TO bob")
        .await
        .unwrap();
    assert_eq!(code_of(&bob, "CREATE TABLE shared.c (x int)").await, "ok");
    let acl: String = su
        .query_one(
            "SELECT nspacl::text FROM pg_namespace WHERE nspname = 'shared'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(acl, "{eddy=UC/eddy,bob=UC/eddy}");
    // the search path skips a schema without USAGE, as PostgreSQL's does
    su.batch_execute("REVOKE USAGE ON SCHEMA shared FROM bob")
        .await
        .unwrap();
    assert_eq!(
        code_of(&bob, "SET search_path = shared, public; SELECT * FROM t").await,
        "42P01"
    );
    let path: String = bob
        .query_one("SELECT current_schemas(false)::text", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(path, "{public}");
    // only the owner (or a superuser) drops, renames or gives it away
    assert_eq!(code_of(&bob, "DROP SCHEMA owned CASCADE").await, "42501");
    assert_eq!(
        code_of(&bob, "ALTER SCHEMA owned OWNER TO bob").await,
        "42501"
    );
    assert_eq!(code_of(&alice, "DROP SCHEMA owned CASCADE").await, "ok");
    let owner: String = su
        .query_one(
            "SELECT pg_get_userbyid(nspowner)::text FROM pg_namespace WHERE nspname = 'shared'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(owner, "eddy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_schema_waits_for_a_create_in_it_and_kill_9_keeps_what_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let server = Server::start_in(None, data.clone(), "trust");
    let a = server.connect().await;
    let b = server.connect().await;
    a.batch_execute("CREATE SCHEMA app; CREATE TABLE app.first (x int)")
        .await
        .unwrap();

    // A creates in the schema; B's DROP SCHEMA waits for A to commit and
    // then drops A's table too, so no relation outlives its schema
    a.batch_execute("BEGIN; CREATE TABLE app.second (x int); INSERT INTO app.second VALUES (1)")
        .await
        .unwrap();
    let dropper = tokio::spawn(async move {
        let r = b.batch_execute("DROP SCHEMA app CASCADE").await;
        (b, r)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!dropper.is_finished(), "DROP SCHEMA did not wait");
    a.batch_execute("COMMIT").await.unwrap();
    let (b, dropped) = dropper.await.unwrap();
    dropped.expect("DROP SCHEMA after the commit");
    assert_eq!(
        count(
            &b,
            "SELECT count(*) FROM pg_class WHERE relname IN ('first', 'second', 'app.first', 'app.second')"
        )
        .await,
        0
    );
    assert_eq!(code_of(&a, "SELECT * FROM app.second").await, "42P01");

    // committed: kept; open at the kill: gone
    a.batch_execute(
        "CREATE SCHEMA kept; CREATE TABLE kept.t (id int PRIMARY KEY); INSERT INTO kept.t VALUES (7);
         COMMENT ON SCHEMA kept IS 'survives';
         BEGIN; CREATE SCHEMA lost; CREATE TABLE lost.t (id int); DROP SCHEMA kept CASCADE;",
    )
    .await
    .unwrap();
    drop((a, b));
    drop(server); // SIGKILL
    let server = Server::start_in(Some(dir), data, "trust");
    let c = server.connect().await;
    assert_eq!(
        count(&c, "SELECT count(*) FROM kept.t WHERE id = 7").await,
        1
    );
    assert_eq!(code_of(&c, "SELECT * FROM lost.t").await, "42P01");
    let names: Vec<String> = c
        .query(
            "SELECT nspname::text FROM pg_namespace WHERE nspname NOT LIKE 'pg_%' ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(names, ["information_schema", "kept", "public"]);
    let comment: String = c
        .query_one(
            "SELECT obj_description('kept'::regnamespace, 'pg_namespace')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(comment, "survives");
}

/// A statement prepared over the extended protocol (Parse once, Bind and
/// Execute many times, as every driver's prepared statements and pgjdbc's
/// server-side statements do) follows search_path: executed under another
/// path it reads what its names mean there, point lookups (fixed plans)
/// and planned queries alike, as PostgreSQL re-parses it; when that would
/// change its result columns, 0A000 as in PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_follow_search_path_changes() {
    let server = Server::start("trust");
    let c = server.connect().await;
    c.batch_execute(
        "CREATE SCHEMA tenant;
         CREATE TABLE accounts (id int PRIMARY KEY, owner text);
         CREATE TABLE tenant.accounts (id int PRIMARY KEY, owner text);
         INSERT INTO accounts VALUES (1, 'public'), (2, 'public');
         INSERT INTO tenant.accounts VALUES (1, 'tenant');
         CREATE TABLE shaped (v text);
         CREATE TABLE tenant.shaped (v int, w int);",
    )
    .await
    .unwrap();
    let point = c
        .prepare("SELECT owner FROM accounts WHERE id = $1")
        .await
        .unwrap();
    let counted = c.prepare("SELECT count(*) FROM accounts").await.unwrap();
    let whole = c.prepare("SELECT * FROM shaped").await.unwrap();
    let owner = |rows: Vec<tokio_postgres::Row>| -> Vec<String> {
        rows.iter().map(|r| r.get::<_, String>(0)).collect()
    };
    assert_eq!(owner(c.query(&point, &[&1i32]).await.unwrap()), ["public"]);
    assert_eq!(
        c.query_one(&counted, &[]).await.unwrap().get::<_, i64>(0),
        2
    );

    c.batch_execute("SET search_path = tenant, public")
        .await
        .unwrap();
    assert_eq!(owner(c.query(&point, &[&1i32]).await.unwrap()), ["tenant"]);
    assert_eq!(
        c.query_one(&counted, &[]).await.unwrap().get::<_, i64>(0),
        1
    );
    let changed = c.query(&whole, &[]).await.unwrap_err();
    assert_eq!(changed.code().map(|c| c.code()), Some("0A000"), "{changed}");

    c.batch_execute("RESET search_path").await.unwrap();
    assert_eq!(owner(c.query(&point, &[&2i32]).await.unwrap()), ["public"]);
    assert_eq!(c.query(&whole, &[]).await.unwrap().len(), 0);
}
