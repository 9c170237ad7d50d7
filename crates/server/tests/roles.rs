//! Roles and privileges end to end, against the real server with SCRAM:
//! CREATE/ALTER/DROP ROLE and USER, passwords kept only as SCRAM
//! verifiers, GRANT/REVOKE on tables (transactional) and on schema public,
//! role membership, every statement path refusing with 42501 (DataFusion,
//! fixed plans, COPY, DDL), the catalog views, and all of it surviving a
//! restart. PostgreSQL 15 gives the same SQLSTATEs for each refusal here
//! (CREATEDB aside, which Eddy refuses): `tests/postgres15/roles.txt`,
//! recorded by `scripts/ci/roles-against-postgres.sh`.

mod common;

use common::{code_of, Server};
use tokio_postgres::Client;

async fn must_fail_with(c: &Client, sql: &str, code: &str) -> String {
    let e = c.batch_execute(sql).await.expect_err(sql);
    let db = e.as_db_error().unwrap_or_else(|| panic!("{sql}: {e}"));
    assert_eq!(db.code().code(), code, "{sql}: {}", db.message());
    db.message().to_string()
}

async fn login_code(server: &Server, user: &str, pw: &str) -> String {
    match server.connect_as(user, pw).await {
        Ok(_) => "ok".into(),
        Err(e) => e
            .as_db_error()
            .map(|d| d.code().code().to_string())
            .unwrap_or_else(|| format!("{e}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_grants_and_every_path_refusing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let mut server = Server::start_in(None, data.clone(), "scram");
    let su = server.connect().await;
    su.batch_execute(
        "CREATE ROLE alice LOGIN PASSWORD 'alice-pw';
         CREATE USER bob WITH PASSWORD 'bob-pw';
         CREATE ROLE readers;
         CREATE TABLE secret_t (id INT PRIMARY KEY, v TEXT);
         INSERT INTO secret_t VALUES (1, 'one'), (2, 'two');",
    )
    .await
    .unwrap();

    // logins: the right password, a wrong one, a role without LOGIN
    assert_eq!(login_code(&server, "alice", "alice-pw").await, "ok");
    assert_eq!(login_code(&server, "bob", "bob-pw").await, "ok");
    assert_eq!(login_code(&server, "alice", "wrong").await, "28P01");
    assert_eq!(login_code(&server, "readers", "x").await, "28P01");

    // the password is kept only as a SCRAM verifier, never shown
    let roles_file = std::fs::read_to_string(data.join("roles.json")).unwrap();
    assert!(!roles_file.contains("alice-pw"));
    assert!(roles_file.contains("SCRAM-SHA-256$4096:"));
    let shown: String = su
        .query_one(
            "SELECT rolpassword FROM pg_authid WHERE rolname = 'alice'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(shown, "********");

    // without a grant, every path refuses
    let alice = server.connect_as("alice", "alice-pw").await.unwrap();
    let msg = must_fail_with(&alice, "SELECT * FROM secret_t", "42501").await;
    assert_eq!(msg, "permission denied for table secret_t");
    for sql in [
        "SELECT v FROM secret_t WHERE id = 1",
        "SELECT count(*) FROM (SELECT * FROM secret_t) s",
        "INSERT INTO secret_t VALUES (3, 'three')",
        "UPDATE secret_t SET v = 'x' WHERE id = 1",
        "DELETE FROM secret_t WHERE id = 1",
        "TRUNCATE secret_t",
        "COPY secret_t TO STDOUT",
        "BEGIN; DECLARE c CURSOR FOR SELECT * FROM secret_t",
        "WITH x AS (SELECT 1 AS id) DELETE FROM secret_t WHERE id IN (SELECT id FROM x)",
        "WITH d AS (DELETE FROM secret_t RETURNING *) SELECT 1",
        "WITH s AS (SELECT v FROM secret_t) SELECT * FROM s",
    ] {
        must_fail_with(&alice, sql, "42501").await;
        let _ = alice.batch_execute("ROLLBACK").await;
    }
    // the fixed-plan path, prepared (extended protocol)
    let e = alice
        .query("SELECT v FROM secret_t WHERE id = $1", &[&1i32])
        .await
        .expect_err("prepared lookup");
    assert_eq!(e.code().map(|c| c.code()), Some("42501"));
    // a query planned once at Parse and bound at each Execute
    let stmt = alice
        .prepare("SELECT count(*) FROM secret_t WHERE v = $1")
        .await
        .expect("Parse needs no privilege, as in PostgreSQL");
    for _ in 0..2 {
        let e = alice.query(&stmt, &[&"one"]).await.expect_err("bound plan");
        assert_eq!(e.code().map(|c| c.code()), Some("42501"));
    }
    assert_eq!(
        must_fail_with(&alice, "DROP TABLE secret_t", "42501").await,
        "must be owner of table secret_t"
    );
    must_fail_with(&alice, "ALTER TABLE secret_t ADD COLUMN w INT", "42501").await;
    assert_eq!(
        must_fail_with(&alice, "CREATE TABLE mine (id INT)", "42501").await,
        "permission denied for schema public"
    );
    must_fail_with(&alice, "CREATE ROLE eve", "42501").await;
    must_fail_with(&alice, "ALTER ROLE alice SUPERUSER", "42501").await;
    must_fail_with(&alice, "GRANT SELECT ON secret_t TO alice", "42501").await;

    // a grant to a role, and membership in it
    su.batch_execute("GRANT SELECT ON secret_t TO readers; GRANT readers TO alice")
        .await
        .unwrap();
    let n: i64 = alice
        .query_one("SELECT count(*) FROM secret_t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2);
    let v: String = alice
        .query_one("SELECT v FROM secret_t WHERE id = $1", &[&2i32])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, "two");
    must_fail_with(&alice, "INSERT INTO secret_t VALUES (3, 'three')", "42501").await;
    let (sel, ins): (bool, bool) = {
        let r = alice
            .query_one(
                "SELECT has_table_privilege('secret_t', 'SELECT'), has_table_privilege('secret_t', 'INSERT')",
                &[],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert!(sel && !ins);

    // GRANT inside a block rolls back with it
    su.batch_execute("BEGIN; GRANT INSERT ON secret_t TO bob; ROLLBACK")
        .await
        .unwrap();
    let bob = server.connect_as("bob", "bob-pw").await.unwrap();
    must_fail_with(&bob, "INSERT INTO secret_t VALUES (3, 'three')", "42501").await;
    su.batch_execute("BEGIN; GRANT INSERT ON secret_t TO bob; COMMIT")
        .await
        .unwrap();
    bob.batch_execute("INSERT INTO secret_t VALUES (3, 'three')")
        .await
        .unwrap();
    // INSERT alone does not let bob read (nor RETURNING)
    must_fail_with(&bob, "SELECT * FROM secret_t", "42501").await;
    must_fail_with(
        &bob,
        "INSERT INTO secret_t VALUES (4, 'four') RETURNING v",
        "42501",
    )
    .await;

    // CREATE on schema public: alice owns what she creates and grants it
    su.batch_execute("GRANT CREATE ON SCHEMA public TO alice")
        .await
        .unwrap();
    alice
        .batch_execute(
            "CREATE TABLE mine (id INT PRIMARY KEY, note TEXT);
             INSERT INTO mine VALUES (1, 'hers');",
        )
        .await
        .unwrap();
    must_fail_with(&bob, "SELECT * FROM mine", "42501").await;
    alice
        .batch_execute("GRANT SELECT ON mine TO bob")
        .await
        .unwrap();
    let note: String = bob
        .query_one("SELECT note FROM mine WHERE id = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(note, "hers");
    must_fail_with(&bob, "DROP TABLE mine", "42501").await;
    let owner: String = su
        .query_one(
            "SELECT tableowner FROM pg_tables WHERE tablename = 'mine'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(owner, "alice");
    let acl: String = su
        .query_one(
            "SELECT array_to_string(relacl, ',') FROM pg_class WHERE relname = 'mine'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(acl, "alice=arwdDxt/alice,bob=r/alice");

    // a role that holds a grant cannot be dropped until it is revoked
    let msg = must_fail_with(&su, "DROP ROLE readers", "2BP01").await;
    assert!(msg.contains("privileges for table secret_t"), "{msg}");

    // a role changes its own password, not its other attributes
    alice
        .batch_execute("ALTER ROLE alice PASSWORD 'alice-pw2'")
        .await
        .unwrap();
    assert_eq!(login_code(&server, "alice", "alice-pw").await, "28P01");
    assert_eq!(login_code(&server, "alice", "alice-pw2").await, "ok");

    // refused, never ignored
    for (sql, code) in [
        ("CREATE ROLE x CREATEDB", "0A000"),
        ("CREATE ROLE x VALID UNTIL '2030-01-01'", "0A000"),
        (
            "GRANT SELECT ON secret_t TO alice WITH GRANT OPTION",
            "0A000",
        ),
        ("GRANT SELECT (v) ON secret_t TO alice", "0A000"),
        ("GRANT SELECT ON secret_t TO nobody_here", "42704"),
        ("CREATE ROLE pg_mine", "42939"),
        ("CREATE ROLE alice", "42710"),
        ("DROP ROLE eddy", "55006"),
        ("BEGIN; CREATE ROLE y", "25001"),
        ("GRANT alice TO readers; GRANT readers TO alice", "0LP01"),
    ] {
        assert_eq!(code_of(&su, sql).await, code, "{sql}");
        let _ = su.batch_execute("ROLLBACK").await;
    }

    // everything survives a restart
    drop((alice, bob, su));
    server.stop();
    let server = Server::start_in(Some(dir), data, "scram");
    let alice = server.connect_as("alice", "alice-pw2").await.unwrap();
    let n: i64 = alice
        .query_one("SELECT count(*) FROM secret_t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 3);
    must_fail_with(&alice, "DELETE FROM secret_t", "42501").await;
    let su = server.connect().await;
    su.batch_execute(
        "REVOKE SELECT ON secret_t FROM readers; REVOKE readers FROM alice; DROP ROLE readers",
    )
    .await
    .unwrap();
    must_fail_with(&alice, "SELECT * FROM secret_t", "42501").await;
    let members: i64 = su
        .query_one(
            "SELECT count(*) FROM pg_auth_members WHERE member >= 16384",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    // (pg_monitor's three memberships in the predefined roles remain, as
    // in PostgreSQL)
    assert_eq!(members, 0, "readers' memberships went with it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_without_login_is_refused_even_under_trust() {
    let server = Server::start("trust");
    let su = server.connect().await;
    su.batch_execute("CREATE ROLE auditors").await.unwrap();
    let Err(e) = server.connect_as("auditors", "x").await else {
        panic!("a NOLOGIN role logged in");
    };
    let db = e.as_db_error().expect("server error");
    assert_eq!(db.code().code(), "28000");
    assert_eq!(db.message(), "role \"auditors\" is not permitted to log in");
    // a name that is no role still logs in, with no privilege
    let nobody = server.connect_as("nobody", "x").await.unwrap();
    su.batch_execute("CREATE TABLE t (id INT)").await.unwrap();
    must_fail_with(&nobody, "SELECT * FROM t", "42501").await;
    su.batch_execute("GRANT SELECT ON t TO PUBLIC")
        .await
        .unwrap();
    nobody.batch_execute("SELECT * FROM t").await.unwrap();
}
