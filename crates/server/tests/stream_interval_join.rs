//! Interval joins end to end against the real server: two datagen sources
//! whose times run out of order, each with a WATERMARK, joined on a key and
//! a time interval into a keyed aggregate; the server is killed (kill -9)
//! mid-stream and restarted, and the finished view must equal the join
//! this test computes by batch recomputation from the generators' rows
//! (each side's late rows dropped row by row, every pair with equal keys
//! and the time difference in the interval counted once). Plus refusals of
//! the stream-stream joins that are not built.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arrow::array::{Int32Array, Int64Array, TimestampMicrosecondArray};
use eddy_common::ColumnType;
use eddy_streamsql::datagen::DatagenSpec;
use tokio_postgres::Client;

mod common;
use common::stream_jobs::recorded;
use common::*;

const MS: i64 = 1_000;
/// Both sources' watermark delay.
const DELAY: i64 = 2_000 * MS;

/// Generator options of source `name`: four keys, `step` ms of event time
/// per row, each row up to 2.5 s early in arrival.
fn options(name: &str) -> Vec<(&'static str, String)> {
    let (kseed, tseed, step) = if name == "clicks" {
        (5, 9, 1)
    } else {
        (7, 11, 2)
    };
    vec![
        ("fields.id.kind", "sequence".into()),
        ("fields.k.kind", "random".into()),
        ("fields.k.min", "0".into()),
        ("fields.k.max", "3".into()),
        ("fields.k.seed", kseed.to_string()),
        ("fields.ts.kind", "sequence".into()),
        ("fields.ts.start", "2026-01-01 00:00:00".into()),
        ("fields.ts.step_ms", step.to_string()),
        ("fields.ts.out_of_order_ms", "2500".into()),
        ("fields.ts.seed", tseed.to_string()),
    ]
}

fn source_sql(name: &str, rows: i64, rate: i64) -> String {
    let opts: Vec<String> = options(name)
        .into_iter()
        .map(|(k, v)| format!("{k} = '{v}'"))
        .collect();
    format!(
        "CREATE SOURCE {name} (id bigint, k int, ts timestamp, \
         WATERMARK FOR ts AS ts - INTERVAL '2 seconds') WITH (connector = 'datagen', \
         datagen.rows.per.second = {rate}, datagen.max.rows = {rows}, {})",
        opts.join(", ")
    )
}

type Row = (i64, i32, i64);

fn source_rows(name: &str, n: i64) -> Vec<Row> {
    let spec = DatagenSpec::new(
        &[
            ("id".into(), ColumnType::BigInt),
            ("k".into(), ColumnType::Int),
            ("ts".into(), ColumnType::Timestamp),
        ],
        options(name)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
    .expect("datagen spec");
    let b = spec.batch(0, 1, n as usize).expect("rows");
    let ids = b
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("id");
    let ks = b
        .column(1)
        .as_any()
        .downcast_ref::<Int32Array>()
        .expect("k");
    let ts = b
        .column(2)
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .expect("ts");
    (0..b.num_rows())
        .map(|i| (ids.value(i), ks.value(i), ts.value(i)))
        .collect()
}

fn on_time(rows: &[Row]) -> Vec<Row> {
    let mut max: Option<i64> = None;
    let mut kept = Vec::new();
    for r in rows {
        if max.is_some_and(|m| r.2 < m - DELAY) {
            continue;
        }
        max = Some(max.map_or(r.2, |m| m.max(r.2)));
        kept.push(*r);
    }
    kept
}

/// k → (pairs, sum of clicks.id * 100000 + buys.id): every pair with
/// `buys.ts - clicks.ts` in [-5 ms, 10 ms].
fn joined(clicks: &[Row], buys: &[Row]) -> BTreeMap<i32, (i64, i64)> {
    let mut by_key: BTreeMap<i32, Vec<Row>> = BTreeMap::new();
    for b in on_time(buys) {
        by_key.entry(b.1).or_default().push(b);
    }
    let mut out = BTreeMap::new();
    for (ci, k, ct) in on_time(clicks) {
        for (bi, _, bt) in by_key.get(&k).into_iter().flatten() {
            let d = bt - ct;
            if (-5 * MS..=10 * MS).contains(&d) {
                let g: &mut (i64, i64) = out.entry(k).or_default();
                g.0 += 1;
                g.1 += ci * 100_000 + bi;
            }
        }
    }
    out
}

async fn wait_recorded(c: &Client, job: &str, than: i64, finished: bool) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some((rows, done)) = recorded(c, job).await {
            if (finished && done) || (!finished && rows > than) {
                return rows;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{job} made no progress past {than}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn view(c: &Client) -> BTreeMap<i32, (i64, i64)> {
    c.query("SELECT k, n, s FROM pairs", &[])
        .await
        .expect("read view")
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect()
}

const VIEW: &str = "CREATE MATERIALIZED VIEW pairs WITH (checkpoint_interval_ms = 50) AS \
    SELECT c.k, count(*) AS n, sum(c.id * 100000 + b.id) AS s FROM clicks c JOIN buys b \
    ON c.k = b.k AND b.ts BETWEEN c.ts - INTERVAL '5 milliseconds' \
    AND c.ts + INTERVAL '10 milliseconds' GROUP BY c.k";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_keeps_an_interval_join_exact() {
    const ROWS: i64 = 20_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let mut seen = Vec::new();
    {
        let srv = Server::start_in(None, data.clone(), "trust");
        let c = srv.connect().await;
        c.batch_execute(&source_sql("clicks", ROWS, 6000))
            .await
            .expect("create source");
        c.batch_execute(&source_sql("buys", ROWS, 6000))
            .await
            .expect("create source");
        c.batch_execute(VIEW).await.expect("create view");
        seen.push(wait_recorded(&c, "pairs", 0, false).await);
        tokio::time::sleep(Duration::from_millis(400)).await;
        // srv dropped: kill -9
    }
    for round in 0..2 {
        let srv = Server::start_in(None, data.clone(), "trust");
        let c = srv.connect().await;
        let before = recorded(&c, "pairs").await.map_or(0, |r| r.0);
        seen.push(wait_recorded(&c, "pairs", before, false).await);
        tokio::time::sleep(Duration::from_millis(300 + round * 250)).await;
        drop(srv); // kill -9
    }
    assert!(
        seen.iter().any(|r| *r > 0 && *r < 2 * ROWS),
        "the kills landed mid-stream: {seen:?}"
    );
    eprintln!("source rows recorded after each start: {seen:?}");
    let srv = Server::start_in(Some(dir), data, "trust");
    let c = srv.connect().await;
    assert_eq!(wait_recorded(&c, "pairs", 0, true).await, 2 * ROWS);
    let want = joined(&source_rows("clicks", ROWS), &source_rows("buys", ROWS));
    assert!(
        want.values().map(|v| v.0).sum::<i64>() > ROWS,
        "the interval matches many pairs"
    );
    assert_eq!(view(&c).await, want, "the finished join");
    // the second source is a dependency of the view
    match c.batch_execute("DROP SOURCE buys").await {
        Ok(()) => panic!("a source a view joins was dropped"),
        Err(e) => assert_eq!(e.code().map(|c| c.code()), Some("2BP01"), "{e:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_stream_stream_joins_are_refused() {
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute(&source_sql("clicks", 10, 1000))
        .await
        .expect("create source");
    c.batch_execute(&source_sql("buys", 10, 1000))
        .await
        .expect("create source");
    c.batch_execute(
        "CREATE SOURCE plain (id bigint, k int, ts timestamp) WITH (connector = 'datagen', \
         datagen.max.rows = 10)",
    )
    .await
    .expect("create source");
    for sql in [
        // no interval, another condition than equalities
        "SELECT c.k, count(*) AS n FROM clicks c JOIN buys b ON c.k = b.k AND b.id > c.id \
         GROUP BY c.k",
        // outer, without an interval
        "SELECT c.k, count(*) AS n FROM clicks c FULL JOIN buys b ON c.k = b.k GROUP BY c.k",
        // outer
        "SELECT c.k, count(*) AS n FROM clicks c LEFT JOIN buys b ON c.k = b.k AND b.ts \
         BETWEEN c.ts AND c.ts + INTERVAL '1' SECOND GROUP BY c.k",
        // one bound only
        "SELECT c.k, count(*) AS n FROM clicks c JOIN buys b ON c.k = b.k AND b.ts >= c.ts \
         GROUP BY c.k",
        // another condition besides the interval
        "SELECT c.k, count(*) AS n FROM clicks c JOIN buys b ON c.k = b.k AND b.ts BETWEEN \
         c.ts AND c.ts + INTERVAL '1' SECOND AND b.id > c.id GROUP BY c.k",
        // a side without a watermark
        "SELECT c.k, count(*) AS n FROM clicks c JOIN plain p ON c.k = p.k AND p.ts BETWEEN \
         c.ts AND c.ts + INTERVAL '1' SECOND GROUP BY c.k",
        // a source with itself
        "SELECT c.k, count(*) AS n FROM clicks c JOIN clicks d ON c.k = d.k AND d.ts BETWEEN \
         c.ts AND c.ts + INTERVAL '1' SECOND GROUP BY c.k",
        // EMIT ON WINDOW CLOSE (no window)
        "SELECT c.k, count(*) AS n FROM clicks c JOIN buys b ON c.k = b.k AND b.ts BETWEEN \
         c.ts AND c.ts + INTERVAL '1' SECOND GROUP BY c.k EMIT ON WINDOW CLOSE",
    ] {
        let sql = format!("CREATE MATERIALIZED VIEW v AS {sql}");
        match c.batch_execute(&sql).await {
            Ok(()) => panic!("{sql}: accepted, expected 0A000"),
            Err(e) => assert_eq!(e.code().map(|c| c.code()), Some("0A000"), "{sql}: {e:?}"),
        }
    }
    let views = c.query("SHOW MATERIALIZED VIEWS", &[]).await.expect("show");
    assert!(views.is_empty(), "no view was created");
}
