//! GRANT and REVOKE on views and sequences, end to end against the real
//! server with SCRAM logins: who may read a view (SELECT on it, and the
//! view's query run with its owner's privileges), who may draw from a
//! sequence (`nextval`, `currval`, `lastval`, `setval`, a SERIAL column's
//! default), the catalog (`relacl`, `has_table_privilege`,
//! `has_sequence_privilege`), GRANT ... ON ALL TABLES / SEQUENCES IN
//! SCHEMA, ROLLBACK undoing grants, DROP ROLE refusing while grants
//! remain, and all of it surviving a restart. PostgreSQL 15 answers the
//! same statements the same way (but for the non-owner's GRANT, below):
//! `tests/postgres15/relation_grants.txt`, recorded by
//! `scripts/ci/relation-grants-against-postgres.sh` (one session per
//! statement there, so its `currval` and `lastval` find nothing drawn).

mod common;

use common::Server;
use tokio_postgres::Client;

async fn fails_with(c: &Client, sql: &str, code: &str) -> String {
    let e = c.batch_execute(sql).await.expect_err(sql);
    let db = e.as_db_error().unwrap_or_else(|| panic!("{sql}: {e}"));
    assert_eq!(db.code().code(), code, "{sql}: {}", db.message());
    db.message().to_string()
}

async fn int(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

async fn text(c: &Client, sql: &str) -> Option<String> {
    c.query_one(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_on_views_and_sequences() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let mut server = Server::start_in(None, data.clone(), "scram");
    let su = server.connect().await;
    su.batch_execute(
        "CREATE ROLE app LOGIN PASSWORD 'app-pw';
         CREATE ROLE owner1 LOGIN PASSWORD 'owner1-pw';
         CREATE TABLE t (id SERIAL PRIMARY KEY, v INT);
         CREATE TABLE u (id INT GENERATED ALWAYS AS IDENTITY, v INT);
         CREATE TABLE base (x INT);
         INSERT INTO base VALUES (1);
         CREATE VIEW v AS SELECT * FROM t;
         CREATE VIEW vv AS SELECT id FROM v;
         CREATE SEQUENCE s;
         GRANT SELECT, INSERT ON t TO app;
         GRANT INSERT ON u TO app;
         GRANT SELECT ON base TO owner1;
         GRANT CREATE ON SCHEMA public TO owner1;",
    )
    .await
    .unwrap();
    let app = server.connect_as("app", "app-pw").await.unwrap();
    let owner1 = server.connect_as("owner1", "owner1-pw").await.unwrap();

    // a view: SELECT on it, granted by its owner
    fails_with(&app, "SELECT * FROM v", "42501").await;
    su.batch_execute("GRANT SELECT ON v TO app").await.unwrap();
    assert_eq!(int(&app, "SELECT count(*) FROM v").await, 0);
    // a view over a view needs its own grant
    let m = fails_with(&app, "SELECT * FROM vv", "42501").await;
    assert_eq!(m, "permission denied for view vv");
    // ROLLBACK undoes a grant on a view
    su.batch_execute("BEGIN; GRANT SELECT ON vv TO app; ROLLBACK")
        .await
        .unwrap();
    fails_with(&app, "SELECT * FROM vv", "42501").await;

    // a SERIAL column's default needs USAGE on its sequence, as in
    // PostgreSQL; an identity column's does not
    let m = fails_with(&app, "INSERT INTO t (v) VALUES (1)", "42501").await;
    assert_eq!(m, "permission denied for sequence t_id_seq");
    app.batch_execute("INSERT INTO u (v) VALUES (1)")
        .await
        .unwrap();
    fails_with(&app, "SELECT nextval('s')", "42501").await;
    fails_with(&app, "SELECT currval('s')", "42501").await;
    su.batch_execute("GRANT USAGE ON SEQUENCE s, t_id_seq TO app")
        .await
        .unwrap();
    app.batch_execute("INSERT INTO t (v) VALUES (1)")
        .await
        .unwrap();
    assert_eq!(int(&app, "SELECT nextval('s')").await, 1);
    assert_eq!(int(&app, "SELECT currval('s')").await, 1);
    assert_eq!(int(&app, "SELECT lastval()").await, 1);
    // setval needs UPDATE
    fails_with(&app, "SELECT setval('s', 100)", "42501").await;
    su.batch_execute("GRANT UPDATE ON s TO app").await.unwrap();
    assert_eq!(int(&app, "SELECT setval('s', 100)").await, 100);
    // privileges a sequence does not have
    let m = fails_with(&su, "GRANT INSERT ON SEQUENCE s TO app", "0LP01").await;
    assert_eq!(m, "invalid privilege type INSERT for sequence");
    fails_with(&su, "GRANT SELECT ON SEQUENCE t TO app", "42809").await;
    fails_with(&su, "GRANT SELECT ON SEQUENCE nope TO app", "42P01").await;
    // only the owner grants (PostgreSQL warns 01007 "no privileges were
    // granted" to a non-owner holding privileges without grant option and
    // changes nothing; Eddy, which has no grant options, refuses)
    fails_with(&app, "GRANT SELECT ON v TO owner1", "42501").await;
    fails_with(&app, "GRANT USAGE ON SEQUENCE s TO owner1", "42501").await;
    // ROLLBACK undoes a grant on a sequence
    su.batch_execute("BEGIN; REVOKE USAGE ON SEQUENCE s FROM app; ROLLBACK")
        .await
        .unwrap();
    assert_eq!(int(&app, "SELECT nextval('s')").await, 101);

    // the catalog, as PostgreSQL shows it
    assert_eq!(
        text(&su, "SELECT relacl::text FROM pg_class WHERE relname = 's'").await,
        Some("{eddy=rwU/eddy,app=wU/eddy}".into())
    );
    assert_eq!(
        text(&su, "SELECT relacl::text FROM pg_class WHERE relname = 'v'").await,
        Some("{eddy=arwdDxt/eddy,app=r/eddy}".into())
    );
    let row = su
        .query_one(
            "SELECT has_table_privilege('app', 'v', 'SELECT'),
                    has_table_privilege('app', 'vv', 'SELECT'),
                    has_sequence_privilege('app', 's', 'USAGE'),
                    has_sequence_privilege('app', 's', 'SELECT')",
            &[],
        )
        .await
        .unwrap();
    let got: (bool, bool, bool, bool) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(got, (true, false, true, false));

    // a view's query runs with its owner's privileges
    owner1
        .batch_execute(
            "CREATE VIEW ov AS SELECT x FROM base; GRANT SELECT ON ov TO app;
             CREATE SEQUENCE os",
        )
        .await
        .unwrap();
    assert_eq!(int(&app, "SELECT count(*) FROM ov").await, 1);
    su.batch_execute("REVOKE SELECT ON base FROM owner1")
        .await
        .unwrap();
    let m = fails_with(&app, "SELECT * FROM ov", "42501").await;
    assert_eq!(m, "permission denied for table base");
    // ... for a superuser too, and through a superuser's view over it
    fails_with(&su, "SELECT * FROM ov", "42501").await;
    su.batch_execute("CREATE VIEW over_ov AS SELECT x FROM ov; GRANT SELECT ON over_ov TO app")
        .await
        .unwrap();
    let m = fails_with(&app, "SELECT * FROM over_ov", "42501").await;
    assert_eq!(m, "permission denied for table base");
    fails_with(&su, "SELECT * FROM over_ov", "42501").await;
    su.batch_execute("DROP VIEW over_ov").await.unwrap();
    su.batch_execute("GRANT SELECT ON base TO owner1")
        .await
        .unwrap();

    // ALL TABLES takes in views; ALL SEQUENCES every sequence
    su.batch_execute(
        "CREATE ROLE reader LOGIN PASSWORD 'reader-pw';
         GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader;
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO reader",
    )
    .await
    .unwrap();
    let reader = server.connect_as("reader", "reader-pw").await.unwrap();
    assert_eq!(int(&reader, "SELECT count(*) FROM vv").await, 1);
    assert_eq!(int(&reader, "SELECT nextval('os')").await, 1);
    // grants on views and sequences keep a role from being dropped
    let m = fails_with(&su, "DROP ROLE reader", "2BP01").await;
    assert!(m.contains("privileges for view vv"), "{m}");
    assert!(m.contains("privileges for sequence os"), "{m}");
    let m = fails_with(&su, "DROP ROLE owner1", "2BP01").await;
    assert!(m.contains("owner of view ov"), "{m}");
    assert!(m.contains("owner of sequence os"), "{m}");

    // everything survives a restart
    drop((app, owner1, reader, su));
    server.stop();
    let server = Server::start_in(Some(dir), data, "scram");
    let app = server.connect_as("app", "app-pw").await.unwrap();
    assert_eq!(int(&app, "SELECT count(*) FROM v").await, 1);
    assert!(int(&app, "SELECT nextval('s')").await > 101);
    fails_with(&app, "SELECT * FROM vv", "42501").await;
    let su = server.connect().await;
    su.batch_execute("REVOKE ALL ON SEQUENCE s FROM app; REVOKE SELECT ON v FROM app")
        .await
        .unwrap();
    fails_with(&app, "SELECT nextval('s')", "42501").await;
    fails_with(&app, "SELECT * FROM v", "42501").await;
}
