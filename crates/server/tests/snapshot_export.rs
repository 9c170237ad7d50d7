//! Exported snapshots end to end (`crates/sql/src/exported_snapshots.rs`):
//! a REPEATABLE READ transaction's `pg_export_snapshot()` read by another
//! connection's `SET TRANSACTION SNAPSHOT`, what `pg_dump -j` does, and
//! the refusals PostgreSQL 15 gives (codes recorded from it).

mod common;
use common::*;

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_snapshot_reads_what_the_exporter_reads() {
    let srv = Server::start("trust");
    let exporter = srv.connect().await;
    let writer = srv.connect().await;
    let importer = srv.connect().await;
    writer
        .batch_execute(
            "CREATE TABLE ev (id INT PRIMARY KEY, v INT) WITH (shard_count = 3);
             INSERT INTO ev SELECT i, i FROM generate_series(1, 10) AS s(i)",
        )
        .await
        .unwrap();

    exporter
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    let id: String = exporter
        .query_one("SELECT pg_catalog.pg_export_snapshot()", &[])
        .await
        .unwrap()
        .get(0);
    // committed after the export: neither transaction sees it
    writer
        .batch_execute("INSERT INTO ev VALUES (11, 11); DELETE FROM ev WHERE id = 1")
        .await
        .unwrap();

    importer
        .batch_execute(&format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SET TRANSACTION SNAPSHOT '{id}'"
        ))
        .await
        .unwrap();
    let sum = "SELECT count(*), sum(v) FROM ev";
    let seen = importer.query_one(sum, &[]).await.unwrap();
    assert_eq!((seen.get::<_, i64>(0), seen.get::<_, i64>(1)), (10, 55));
    let seen = exporter.query_one(sum, &[]).await.unwrap();
    assert_eq!((seen.get::<_, i64>(0), seen.get::<_, i64>(1)), (10, 55));
    // the importer may read while the exporter holds ACCESS SHARE, as
    // pg_dump's workers do
    exporter
        .batch_execute("LOCK TABLE ev IN ACCESS SHARE MODE")
        .await
        .unwrap();
    importer
        .batch_execute("LOCK TABLE ev IN ACCESS SHARE MODE NOWAIT")
        .await
        .unwrap();
    importer.batch_execute("COMMIT").await.unwrap();

    // once the exporting transaction ends, the identifier names nothing
    exporter.batch_execute("COMMIT").await.unwrap();
    importer
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    let gone = importer
        .batch_execute(&format!("SET TRANSACTION SNAPSHOT '{id}'"))
        .await
        .unwrap_err();
    assert_eq!(code(&gone), "22023", "{gone}");
    importer.batch_execute("ROLLBACK").await.unwrap();
    let fresh = importer.query_one(sum, &[]).await.unwrap();
    assert_eq!((fresh.get::<_, i64>(0), fresh.get::<_, i64>(1)), (10, 65));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_is_refused_where_postgres_refuses_it() {
    let srv = Server::start("trust");
    let exporter = srv.connect().await;
    let c = srv.connect().await;
    exporter
        .batch_execute(
            "CREATE TABLE ev (id INT PRIMARY KEY); BEGIN ISOLATION LEVEL REPEATABLE READ",
        )
        .await
        .unwrap();
    let id: String = exporter
        .query_one("SELECT pg_export_snapshot()", &[])
        .await
        .unwrap()
        .get(0);
    let set = format!("SET TRANSACTION SNAPSHOT '{id}'");
    // outside a block: nothing (PostgreSQL warns, 25P01)
    c.batch_execute(&set).await.unwrap();
    // under READ COMMITTED
    c.batch_execute("BEGIN").await.unwrap();
    let e = c.batch_execute(&set).await.unwrap_err();
    assert_eq!(code(&e), "0A000", "{e}");
    c.batch_execute("ROLLBACK").await.unwrap();
    // after the first query
    c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM ev")
        .await
        .unwrap();
    let e = c.batch_execute(&set).await.unwrap_err();
    assert_eq!(code(&e), "25001", "{e}");
    c.batch_execute("ROLLBACK").await.unwrap();
    // an identifier never exported
    c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    let e = c
        .batch_execute("SET TRANSACTION SNAPSHOT '00000000-00000000-1'")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "22023", "{e}");
    c.batch_execute("ROLLBACK").await.unwrap();
    exporter.batch_execute("COMMIT").await.unwrap();
}
