//! Stream-table lookup joins end to end against the real server: a
//! datagen source joined with a table on its primary key into a grouped
//! view; the finished view equals the join computed here (the table does
//! not change during the run, so processing-time lookups equal a batch
//! join). Plus the refusals of other join forms (0A000).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio_postgres::Client;

mod common;
use common::*;

const ROWS: i64 = 20_000;

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

async fn refused(c: &Client, sql: &str, sqlstate: &str) {
    match c.batch_execute(sql).await {
        Ok(()) => panic!("{sql}: accepted, expected {sqlstate}"),
        Err(e) => assert_eq!(code(&e), sqlstate, "{sql}: {e:?}"),
    }
}

async fn wait_finished(c: &Client, job: &str, limit: Duration) -> i64 {
    let deadline = Instant::now() + limit;
    loop {
        let rows = c
            .query(
                "SELECT checkpoint, source_rows FROM eddy_stream_checkpoints WHERE job = $1",
                &[&job],
            )
            .await
            .expect("checkpoint row");
        if let Some(r) = rows.first() {
            if r.get::<_, i64>(0) == i64::MAX {
                return r.get(1);
            }
        }
        assert!(Instant::now() < deadline, "view {job} did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_join_view_equals_the_join_of_the_stream_with_the_table() {
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute(
        "CREATE TABLE products (id bigint PRIMARY KEY, grp int NOT NULL, price bigint NOT NULL); \
         INSERT INTO products VALUES (0, 0, 1), (1, 1, 2), (2, 0, 3), (3, 1, 4)",
    )
    .await
    .expect("products");
    c.batch_execute(&format!(
        "CREATE SOURCE orders (id bigint, qty int) WITH (connector = 'datagen', \
         datagen.rows.per.second = 40000, datagen.max.rows = {ROWS}, \
         fields.id.kind = 'sequence', fields.qty.kind = 'sequence')"
    ))
    .await
    .expect("source");
    c.batch_execute(
        "CREATE MATERIALIZED VIEW per_grp WITH (checkpoint_interval_ms = 100) AS \
         SELECT p.grp, count(*) AS n, sum(p.price) AS total \
         FROM orders o JOIN products p ON o.id % 5 = p.id GROUP BY p.grp",
    )
    .await
    .expect("view");
    assert_eq!(
        wait_finished(&c, "per_grp", Duration::from_secs(120)).await,
        ROWS
    );
    // ids with id % 5 = 4 have no product: dropped by the inner join
    let mut want: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    for id in 0..ROWS {
        let p = id % 5;
        if p < 4 {
            let g = want.entry((p % 2) as i32).or_default();
            g.0 += 1;
            g.1 += p + 1;
        }
    }
    let got: BTreeMap<i32, (i64, i64)> = c
        .query("SELECT grp, n, total FROM per_grp", &[])
        .await
        .expect("view")
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    assert_eq!(got, want);

    c.batch_execute("CREATE SOURCE product_log FROM TABLE products")
        .await
        .expect("change log");
    for sql in [
        "CREATE MATERIALIZED VIEW r1 AS SELECT p.grp, count(*) FROM orders o RIGHT JOIN \
         products p ON o.id = p.id GROUP BY p.grp",
        "CREATE MATERIALIZED VIEW r2 AS SELECT p.id, count(*) FROM orders o JOIN products p \
         ON o.id = p.grp GROUP BY p.id",
        "CREATE MATERIALIZED VIEW r3 AS SELECT p.grp, count(*) FROM orders o JOIN products p \
         ON o.id = p.id AND o.qty > p.price GROUP BY p.grp",
        "CREATE MATERIALIZED VIEW r4 AS SELECT p.grp, count(*) FROM product_log l JOIN \
         products p ON l.id = p.id GROUP BY p.grp",
    ] {
        refused(&c, sql, "0A000").await;
    }
    // the view looks products up, the change-log source reads it
    refused(&c, "DROP TABLE products", "2BP01").await;
    refused(&c, "ALTER TABLE products RENAME TO items", "2BP01").await;
    c.batch_execute("ALTER TABLE products ADD COLUMN note text")
        .await
        .expect("adding a column breaks no reader");
    c.batch_execute("DROP MATERIALIZED VIEW per_grp; DROP SOURCE product_log; DROP TABLE products")
        .await
        .expect("dropped once nothing reads it");
}
