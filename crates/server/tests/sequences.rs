//! Sequences and RETURNING against the real server: SERIAL ids are never
//! handed out twice, not across kill -9 (the sequence logs ahead of what it
//! hands out); RETURNING over the extended protocol is described with its
//! real types before it runs.

use std::collections::BTreeSet;

mod common;
use common::Server;

/// Four clients insert through a prepared `INSERT ... RETURNING id`; the
/// server is killed with SIGKILL three times. Every id returned is unique,
/// every committed row is there after each restart with the id it was given,
/// and the ids handed out after a restart are above all earlier ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serial_ids_never_repeat_across_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let mut returned: BTreeSet<i32> = BTreeSet::new();
    for round in 0..3 {
        let srv = Server::start_in(None, data.clone(), "trust");
        let setup = srv.connect().await;
        if round == 0 {
            setup
                .batch_execute(
                    "CREATE TABLE events (id serial PRIMARY KEY, round int, payload text)",
                )
                .await
                .expect("create");
        }
        // what survived the last kill is exactly what was acknowledged
        let rows = setup
            .query("SELECT id FROM events", &[])
            .await
            .expect("ids");
        let stored: BTreeSet<i32> = rows.iter().map(|r| r.get(0)).collect();
        assert_eq!(
            stored, returned,
            "round {round}: committed rows after restart"
        );
        let floor = returned.iter().next_back().copied().unwrap_or(0);
        let mut tasks = Vec::new();
        for client in 0..4 {
            let c = srv.connect().await;
            tasks.push(tokio::spawn(async move {
                let stmt = c
                    .prepare("INSERT INTO events (round, payload) VALUES ($1, $2) RETURNING id")
                    .await
                    .expect("prepare");
                let mut ids = Vec::new();
                for i in 0..25 {
                    let row = c
                        .query_one(&stmt, &[&round, &format!("c{client} #{i}")])
                        .await
                        .expect("insert");
                    ids.push(row.get::<_, i32>(0));
                }
                ids
            }));
        }
        for t in tasks {
            for id in t.await.expect("client") {
                assert!(id > floor, "round {round}: id {id} not above {floor}");
                assert!(returned.insert(id), "id {id} handed out twice");
            }
        }
        drop(srv); // SIGKILL
    }
    let srv = Server::start_in(Some(dir), data, "trust");
    let c = srv.connect().await;
    let rows = c.query("SELECT id FROM events", &[]).await.expect("ids");
    let stored: BTreeSet<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(stored, returned);
    assert_eq!(returned.len(), 300);
    let next: i64 = c
        .query_one("SELECT nextval('events_id_seq')", &[])
        .await
        .expect("nextval")
        .get(0);
    assert!(next > i64::from(*returned.iter().next_back().unwrap_or(&0)));
}

/// RETURNING through Parse/Describe/Bind/Execute: the row description
/// carries the target's column types, parameters bind, and the command tag
/// counts the rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returning_over_the_extended_protocol() {
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute(
        "CREATE TABLE acct (id bigserial PRIMARY KEY, owner varchar(20) NOT NULL, \
         balance numeric(12,2) DEFAULT 0, opened date DEFAULT '2024-01-01')",
    )
    .await
    .expect("create");
    let ins = c
        .prepare("INSERT INTO acct (owner, balance) VALUES ($1, $2::text::numeric) RETURNING id, owner, balance::text, opened::text")
        .await
        .expect("prepare insert");
    let types: Vec<String> = ins
        .columns()
        .iter()
        .map(|c| c.type_().name().to_string())
        .collect();
    assert_eq!(types, ["int8", "varchar", "text", "text"]);
    let row = c
        .query_one(&ins, &[&"ann", &"12.50"])
        .await
        .expect("insert");
    assert_eq!(row.get::<_, i64>(0), 1);
    assert_eq!(row.get::<_, &str>(1), "ann");
    assert_eq!(row.get::<_, &str>(2), "12.50");
    assert_eq!(row.get::<_, &str>(3), "2024-01-01");
    let n = c.execute(&ins, &[&"bob", &"3"]).await.expect("insert");
    assert_eq!(n, 1, "INSERT 0 1 with RETURNING counts its row");

    let upd = c
        .prepare("UPDATE acct SET balance = balance + $1::text::numeric WHERE owner <> $2 RETURNING id, owner")
        .await
        .expect("prepare update");
    let rows = c.query(&upd, &[&"1", &"nobody"]).await.expect("update");
    let mut ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2]);

    let del = c
        .prepare("DELETE FROM acct WHERE id = $1 RETURNING owner, balance::text")
        .await
        .expect("prepare delete");
    let row = c.query_one(&del, &[&2i64]).await.expect("delete");
    assert_eq!(row.get::<_, &str>(0), "bob");
    assert_eq!(row.get::<_, &str>(1), "4.00");
    assert!(c
        .query(&del, &[&2i64])
        .await
        .expect("delete again")
        .is_empty());

    // a RETURNING statement inside a rolled-back block leaves nothing
    c.batch_execute("BEGIN").await.expect("begin");
    let row = c.query_one(&ins, &[&"temp", &"1"]).await.expect("insert");
    assert_eq!(row.get::<_, i64>(0), 3);
    c.batch_execute("ROLLBACK").await.expect("rollback");
    let n: i64 = c
        .query_one("SELECT count(*) FROM acct WHERE owner = 'temp'", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 0);
    // ... but the sequence moved on, as in PostgreSQL
    let row = c.query_one(&ins, &[&"carl", &"0"]).await.expect("insert");
    assert_eq!(row.get::<_, i64>(0), 4);

    // unknown columns in RETURNING fail at Parse with 42703
    let e = c
        .prepare("INSERT INTO acct (owner) VALUES ('x') RETURNING nope")
        .await
        .expect_err("bad returning");
    assert_eq!(e.code().map(|s| s.code()), Some("42703"));
}

/// Sequences a transaction block creates live and die with it: a kill -9
/// while the block is open leaves none of them after the restart (neither
/// `CREATE SEQUENCE` nor a SERIAL column's), while those of committed
/// blocks are all there; a sequence a block dropped is back after a kill
/// before its COMMIT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequences_of_an_open_block_do_not_survive_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let srv = Server::start_in(None, data.clone(), "trust");
    let c = srv.connect().await;
    c.batch_execute(
        "BEGIN; CREATE SEQUENCE kept_s START 40; CREATE TABLE kept_t (id serial PRIMARY KEY); COMMIT; \
         CREATE SEQUENCE doomed_drop",
    )
    .await
    .expect("committed block");
    let open = srv.connect().await;
    open.batch_execute(
        "BEGIN; CREATE SEQUENCE lost_s; CREATE TABLE lost_t (id serial PRIMARY KEY); \
         DROP SEQUENCE doomed_drop",
    )
    .await
    .expect("open block");
    // the block's sequence draws values (written to its file) before the kill
    let v: i64 = open
        .query_one("SELECT nextval('lost_s')", &[])
        .await
        .expect("nextval in block")
        .get(0);
    assert_eq!(v, 1);
    drop(srv); // SIGKILL with the block open
    let srv = Server::start_in(Some(dir), data, "trust");
    let c = srv.connect().await;
    let names: Vec<String> = c
        .query(
            "SELECT relname FROM pg_catalog.pg_class WHERE relkind = 'S' ORDER BY relname",
            &[],
        )
        .await
        .expect("sequences")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(names, ["doomed_drop", "kept_s", "kept_t_id_seq"]);
    let next: i64 = c
        .query_one("SELECT nextval('kept_s')", &[])
        .await
        .expect("kept")
        .get(0);
    assert_eq!(next, 40);
    let err = c
        .query_one("SELECT nextval('lost_s')", &[])
        .await
        .expect_err("lost_s must be gone");
    assert_eq!(err.code().map(|s| s.code()), Some("42P01"));
    // the table of the open block is gone too, so its name is free again
    c.batch_execute(
        "CREATE TABLE lost_t (id serial PRIMARY KEY); INSERT INTO lost_t DEFAULT VALUES",
    )
    .await
    .expect("recreate");
    let id: i32 = c
        .query_one("SELECT id FROM lost_t", &[])
        .await
        .expect("serial")
        .get(0);
    assert_eq!(id, 1);
}

/// A crash right after the commit record of a transaction that changed
/// the catalog, before its sequences are settled
/// (`EDDY_FAULT_CRASH_AFTER_COMMIT_RECORD` aborts the server there): the
/// next start-up settles them by that record. A table dropped and created
/// again with a SERIAL column gets the new sequence, not the old one
/// (whose values would repeat the new table's ids); a dropped table's
/// sequence goes; a grant made in the transaction is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequences_follow_a_commit_record_across_a_crash_right_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    {
        let srv = Server::start_in(None, data.clone(), "trust");
        let c = srv.connect().await;
        c.batch_execute(
            "CREATE ROLE app; CREATE TABLE t (id serial PRIMARY KEY, v int);
             INSERT INTO t (v) SELECT g FROM generate_series(1, 5) g;
             CREATE TABLE gone (id serial PRIMARY KEY); CREATE SEQUENCE s",
        )
        .await
        .expect("setup");
        assert_eq!(
            c.query_one("SELECT max(id) FROM t", &[])
                .await
                .expect("max")
                .get::<_, i32>(0),
            5
        );
    }
    let srv = Server::start_with_env(
        None,
        data.clone(),
        "trust",
        &[("EDDY_FAULT_CRASH_AFTER_COMMIT_RECORD", "1")],
    );
    let c = srv.connect().await;
    c.batch_execute("BEGIN; DROP TABLE t; CREATE TABLE t (id serial PRIMARY KEY, v int)")
        .await
        .expect("replacing block");
    c.batch_execute("DROP TABLE gone; GRANT USAGE ON SEQUENCE s TO app")
        .await
        .expect("more of the block");
    // the server aborts after the commit record
    assert!(
        c.batch_execute("COMMIT").await.is_err(),
        "the server crashed"
    );
    drop(srv);
    let srv = Server::start_in(Some(dir), data, "trust");
    let c = srv.connect().await;
    let id: i32 = c
        .query_one("INSERT INTO t (v) VALUES (1) RETURNING id", &[])
        .await
        .expect("insert into the new t")
        .get(0);
    assert_eq!(id, 1, "the new table's sequence, not the old one's");
    let seqs: Vec<String> = c
        .query(
            "SELECT relname FROM pg_class WHERE relkind = 'S' ORDER BY relname",
            &[],
        )
        .await
        .expect("sequences")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(seqs, ["s", "t_id_seq"], "gone_id_seq went with its table");
    let granted: bool = c
        .query_one("SELECT has_sequence_privilege('app', 's', 'USAGE')", &[])
        .await
        .expect("grant")
        .get(0);
    assert!(granted, "the grant of the committed transaction is there");
    let journals = std::fs::read_dir(srv.data_dir.join("sequences"))
        .expect("sequences dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "intent"))
        })
        .count();
    assert_eq!(journals, 0);
}
