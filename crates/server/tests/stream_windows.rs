//! Event-time windows end to end against the real server: a datagen source
//! whose times run out of order, with a WATERMARK; TUMBLE and HOP views
//! emitting on update and a TUMBLE view with EMIT ON WINDOW CLOSE. Every
//! view table is checked against the windowed aggregate this test computes
//! itself from the source's rows (the generator is deterministic: the test
//! asks it for the same rows), with late rows dropped row by row as the
//! design says: mid-stream (in one statement with the checkpoint row, so
//! against exactly the rows it records), after kill -9 and restart, and
//! when the source has ended. Plus the refusals (0A000 and friends) and the
//! late-row metric.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow::array::{Int32Array, Int64Array, TimestampMicrosecondArray};
use eddy_common::ColumnType;
use eddy_streamsql::datagen::DatagenSpec;
use tokio_postgres::Client;

mod common;
use common::stream_jobs::{recorded_after, wait_finished};
use common::*;

const SECOND: i64 = 1_000_000;
/// 2026-01-01 00:00:00 in µs since the epoch (the source's first time).
const START: i64 = 1_767_225_600 * SECOND;
/// The source's watermark delay.
const DELAY: i64 = 2 * SECOND;

/// A source of `rows` rows: ids in sequence, four keys, one row per
/// event-time millisecond, each up to 2.5 s early in arrival (out of order).
fn source_sql(name: &str, rows: i64, rate: i64) -> String {
    format!(
        "CREATE SOURCE {name} (id bigint, k int, ts timestamp, \
         WATERMARK FOR ts AS ts - INTERVAL '2 seconds') WITH (connector = 'datagen', \
         datagen.rows.per.second = {rate}, datagen.max.rows = {rows}, \
         fields.id.kind = 'sequence', fields.k.kind = 'random', fields.k.min = 0, \
         fields.k.max = 3, fields.k.seed = 5, fields.ts.kind = 'sequence', \
         fields.ts.start = '2026-01-01 00:00:00', fields.ts.step_ms = 1, \
         fields.ts.out_of_order_ms = 2500, fields.ts.seed = 9)"
    )
}

/// The source's rows `0..n` as (id, k, time in µs), from the generator
/// with the options of [`source_sql`].
fn source_rows(n: i64) -> Vec<(i64, i32, i64)> {
    let options = [
        ("fields.id.kind", "sequence"),
        ("fields.k.kind", "random"),
        ("fields.k.min", "0"),
        ("fields.k.max", "3"),
        ("fields.k.seed", "5"),
        ("fields.ts.kind", "sequence"),
        ("fields.ts.start", "2026-01-01 00:00:00"),
        ("fields.ts.step_ms", "1"),
        ("fields.ts.out_of_order_ms", "2500"),
        ("fields.ts.seed", "9"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let spec = DatagenSpec::new(
        &[
            ("id".into(), ColumnType::BigInt),
            ("k".into(), ColumnType::Int),
            ("ts".into(), ColumnType::Timestamp),
        ],
        options,
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

/// The rows the watermark keeps, the watermark after them and the number
/// of late rows: a row is late when its time is below the largest time
/// kept before it less the delay.
fn on_time(rows: &[(i64, i32, i64)]) -> (Vec<(i64, i32, i64)>, Option<i64>, i64) {
    let mut max: Option<i64> = None;
    let mut kept = Vec::new();
    for r in rows {
        if max.is_some_and(|m| r.2 < m - DELAY) {
            continue;
        }
        max = Some(max.map_or(r.2, |m| m.max(r.2)));
        kept.push(*r);
    }
    let late = (rows.len() - kept.len()) as i64;
    (kept, max.map(|m| m - DELAY), late)
}

/// (window start µs, k) → (count, sum of ids, max id).
type Windows = BTreeMap<(i64, i32), (i64, i64, i64)>;

/// Windowed aggregate over the on-time rows: windows `[s, s + size)` with
/// `s` a multiple of `hop` (`hop == size`: tumbling); only windows ending
/// at or before `closed_at` when it is given.
fn windows(rows: &[(i64, i32, i64)], hop: i64, size: i64, closed_at: Option<i64>) -> Windows {
    let (kept, _, _) = on_time(rows);
    let mut out = Windows::new();
    for (id, k, t) in kept {
        let mut s = t.div_euclid(hop) * hop;
        while s + size > t {
            if closed_at.is_none_or(|c| s + size <= c) {
                let g = out.entry((s, k)).or_insert((0, 0, i64::MIN));
                g.0 += 1;
                g.1 += id;
                g.2 = g.2.max(id);
            }
            s -= hop;
        }
    }
    out
}

fn micros(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as i64
}

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

async fn refused(c: &Client, sql: &str, sqlstate: &str) {
    match c.batch_execute(sql).await {
        Ok(()) => panic!("{sql}: accepted, expected {sqlstate}"),
        Err(e) => assert_eq!(code(&e), sqlstate, "{sql}: {e:?}"),
    }
}

/// View `job`'s rows and the source rows its checkpoint records, read in
/// one statement (one snapshot). The view's columns are `window_start, k,
/// n, total` plus `top` when `with_top` (else top is reported as 0); also
/// whether that commit was the final one (the source had ended).
async fn view_at_checkpoint(c: &Client, job: &str, with_top: bool) -> Option<(i64, bool, Windows)> {
    let top = if with_top { "v.top" } else { "0::bigint" };
    let rows = c
        .query(
            &format!(
                "SELECT c.source_rows, c.checkpoint, v.window_start, v.k, v.n, v.total, {top} \
                 FROM eddy_stream_checkpoints c LEFT JOIN {job} v ON true WHERE c.job = $1"
            ),
            &[&job],
        )
        .await
        .expect("read view");
    let first = rows.first()?;
    let recorded: i64 = first.get(0);
    let last = first.get::<_, i64>(1) == i64::MAX;
    let mut got = Windows::new();
    for r in &rows {
        let Some(start) = r.get::<_, Option<SystemTime>>(2) else {
            continue;
        };
        got.insert((micros(start), r.get(3)), (r.get(4), r.get(5), r.get(6)));
    }
    Some((recorded, last, got))
}

/// What an EMIT ON WINDOW CLOSE view over `prefix` holds: the windows the
/// watermark has closed, or all of them after the final commit.
fn closed_windows(prefix: &[(i64, i32, i64)], last: bool) -> Windows {
    let (_, wm, _) = on_time(prefix);
    let closed_at = if last {
        None
    } else {
        Some(wm.unwrap_or(i64::MIN))
    };
    windows(prefix, SECOND, SECOND, closed_at)
}

/// Drops the max-id column when the view does not have it.
fn without_top(w: Windows) -> Windows {
    w.into_iter().map(|(k, (n, s, _))| (k, (n, s, 0))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windowed_views_equal_the_windowed_aggregate_of_the_stream() {
    const ROWS: i64 = 16_000;
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute(&source_sql("bids", ROWS, 4000))
        .await
        .expect("create source");
    c.batch_execute(
        "CREATE MATERIALIZED VIEW tumbled WITH (checkpoint_interval_ms = 100) AS \
         SELECT window_start, window_end, k, count(*) AS n, sum(id) AS total \
         FROM TUMBLE(bids, ts, INTERVAL '1' SECOND) GROUP BY window_start, window_end, k",
    )
    .await
    .expect("create a tumbling view");
    c.batch_execute(
        "CREATE MATERIALIZED VIEW closed WITH (checkpoint_interval_ms = 100) AS \
         SELECT window_start, k, count(*) AS n, sum(id) AS total, max(id) AS top \
         FROM TUMBLE(bids, ts, INTERVAL '1' SECOND) GROUP BY window_start, k \
         EMIT ON WINDOW CLOSE",
    )
    .await
    .expect("create an emit-on-window-close view");
    c.batch_execute(
        "CREATE MATERIALIZED VIEW hopped AS SELECT k, window_start, count(*) AS n, \
         sum(id) AS total FROM HOP(bids, ts, INTERVAL '500 milliseconds', INTERVAL '2 seconds') \
         GROUP BY window_start, k",
    )
    .await
    .expect("create a hopping view");
    let all = source_rows(ROWS);

    // mid-stream: EMIT ON WINDOW CLOSE holds exactly the closed windows of
    // the rows its checkpoint records, emit on update every window
    let mut checked = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let closed = view_at_checkpoint(&c, "closed", true).await;
        if let Some((n, last, got)) = &closed {
            let prefix = &all[..*n as usize];
            assert_eq!(
                *got,
                closed_windows(prefix, *last),
                "EMIT ON WINDOW CLOSE over {n} rows"
            );
            checked += usize::from(!*last && !got.is_empty());
        }
        if let Some((n, _, got)) = view_at_checkpoint(&c, "tumbled", false).await {
            let prefix = &all[..n as usize];
            assert_eq!(
                got,
                without_top(windows(prefix, SECOND, SECOND, None)),
                "emit on update over {n} rows"
            );
        }
        if closed.is_some_and(|(_, last, _)| last) {
            break;
        }
        assert!(Instant::now() < deadline, "the views did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        checked > 0,
        "no mid-stream commit of the EOWC view was seen"
    );

    for view in ["tumbled", "closed", "hopped"] {
        assert_eq!(
            wait_finished(&c, view, Duration::from_secs(120)).await,
            ROWS,
            "{view} finished"
        );
    }
    let (_, _, late) = on_time(&all);
    assert!(late > 0 && late < ROWS / 2, "some rows are late: {late}");
    let want = windows(&all, SECOND, SECOND, None);
    // the source's end closed every window
    let (_, _, got) = view_at_checkpoint(&c, "closed", true)
        .await
        .expect("closed view");
    assert_eq!(got, want, "the finished EMIT ON WINDOW CLOSE view");
    let (_, _, got) = view_at_checkpoint(&c, "tumbled", false)
        .await
        .expect("tumbled view");
    assert_eq!(got, without_top(want.clone()), "the finished tumbling view");
    let ends: BTreeSet<i64> = c
        .query("SELECT window_start, window_end FROM tumbled", &[])
        .await
        .expect("window bounds")
        .iter()
        .map(|r| micros(r.get::<_, SystemTime>(1)) - micros(r.get::<_, SystemTime>(0)))
        .collect();
    assert_eq!(ends, BTreeSet::from([SECOND]), "every window is one second");
    let (_, _, got) = view_at_checkpoint(&c, "hopped", false)
        .await
        .expect("hopped view");
    let hops = windows(&all, SECOND / 2, 2 * SECOND, None);
    assert_eq!(got, without_top(hops.clone()), "the finished hopping view");
    let rows_in_windows: i64 = hops.values().map(|g| g.0).sum();
    assert_eq!(
        rows_in_windows,
        4 * (ROWS - late),
        "each row in four windows"
    );
    assert!(
        want.keys().any(|(s, _)| *s == START) && want.keys().all(|(s, _)| *s >= START - 3 * SECOND),
        "windows start around the source's first time"
    );

    // late rows are counted, per view
    let metrics = srv.metrics();
    for view in ["tumbled", "closed", "hopped"] {
        assert!(
            metrics.contains(&format!(
                "eddy_view_late_rows_total{{view=\"{view}\"}} {late}"
            )),
            "{view}: {late} late rows in {metrics}"
        );
    }
    let sources = c.simple_query("SHOW SOURCES").await.expect("show sources");
    assert!(
        format!("{sources:?}").contains("WATERMARK FOR ts AS ts - INTERVAL '2 seconds'"),
        "{sources:?}"
    );

    // what is not built is refused, never accepted and ignored
    c.batch_execute(
        "CREATE SOURCE plain (k int, ts timestamp) WITH (connector = 'datagen', \
         datagen.max.rows = 10)",
    )
    .await
    .expect("a source without a watermark");
    for (sql, state) in [
        (
            "CREATE MATERIALIZED VIEW s1 AS SELECT window_start, count(*) FROM \
             SESSION(plain, ts, INTERVAL '1' SECOND) GROUP BY window_start",
            "0A000",
        ),
        (
            "CREATE MATERIALIZED VIEW s2 AS SELECT window_start, count(*) FROM \
             TUMBLE(plain, ts, INTERVAL '1' SECOND) GROUP BY window_start EMIT ON WINDOW CLOSE",
            "0A000",
        ),
        (
            "CREATE MATERIALIZED VIEW s3 AS SELECT k, count(*) FROM TUMBLE(bids, ts, \
             INTERVAL '1' SECOND) GROUP BY k EMIT ON WINDOW CLOSE",
            "0A000",
        ),
        (
            "CREATE MATERIALIZED VIEW s4 AS SELECT window_start, count(*) FROM TUMBLE(bids, ts, \
             INTERVAL '1' SECOND, INTERVAL '10' MILLISECOND) GROUP BY window_start",
            "0A000",
        ),
        (
            "CREATE MATERIALIZED VIEW s5 AS SELECT window_start, count(*) FROM TUMBLE(bids, ts, \
             INTERVAL '1' MONTH) GROUP BY window_start",
            "0A000",
        ),
        (
            "CREATE MATERIALIZED VIEW s6 AS SELECT window_start, count(*) FROM HOP(bids, ts, \
             INTERVAL '2' SECOND, INTERVAL '3' SECOND) GROUP BY window_start",
            "22023",
        ),
        (
            "CREATE MATERIALIZED VIEW s7 AS SELECT window_start, count(*) FROM TUMBLE(bids, k, \
             INTERVAL '1' SECOND) GROUP BY window_start",
            "42804",
        ),
        (
            "CREATE MATERIALIZED VIEW s8 AS SELECT k, count(*) FROM bids GROUP BY k \
             EMIT IMMEDIATELY",
            "0A000",
        ),
        (
            "CREATE SOURCE w1 (ts timestamp, WATERMARK FOR ts AS ts + INTERVAL '1 second') \
             WITH (connector = 'datagen')",
            "0A000",
        ),
        (
            "CREATE SOURCE w2 (k int, WATERMARK FOR k AS k) WITH (connector = 'datagen')",
            "42804",
        ),
    ] {
        refused(&c, sql, state).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_keeps_windows_and_the_watermark_exact() {
    let rounds: u64 = std::env::var("EDDY_STREAM_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let rows_total = 5_000 * (rounds as i64 + 3);
    let all = source_rows(rows_total);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    {
        let srv = Server::start_in(None, data.clone(), "trust");
        let c = srv.connect().await;
        c.batch_execute(&source_sql("events", rows_total, 8000))
            .await
            .expect("create source");
        c.batch_execute(
            "CREATE MATERIALIZED VIEW upd WITH (checkpoint_interval_ms = 50) AS \
             SELECT window_start, k, count(*) AS n, sum(id) AS total \
             FROM TUMBLE(events, ts, INTERVAL '1' SECOND) GROUP BY window_start, k",
        )
        .await
        .expect("create view");
        c.batch_execute(
            "CREATE MATERIALIZED VIEW eowc WITH (checkpoint_interval_ms = 50) AS \
             SELECT window_start, k, count(*) AS n, sum(id) AS total, max(id) AS top \
             FROM TUMBLE(events, ts, INTERVAL '1' SECOND) GROUP BY window_start, k \
             EMIT ON WINDOW CLOSE",
        )
        .await
        .expect("create view");
        recorded_after(&c, "upd", -1).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        // srv dropped: kill -9
    }
    let mut seen = Vec::new();
    for round in 0..rounds {
        let srv = Server::start_in(None, data.clone(), "trust");
        let c = srv.connect().await;
        if let Some((n, _, got)) = view_at_checkpoint(&c, "upd", false).await {
            let prefix = &all[..n as usize];
            assert_eq!(
                got,
                without_top(windows(prefix, SECOND, SECOND, None)),
                "round {round}: emit on update over {n} rows"
            );
            seen.push(n);
        }
        if let Some((n, last, got)) = view_at_checkpoint(&c, "eowc", true).await {
            assert_eq!(
                got,
                closed_windows(&all[..n as usize], last),
                "round {round}: EMIT ON WINDOW CLOSE over {n} rows"
            );
        }
        recorded_after(&c, "upd", seen.last().copied().unwrap_or(-1)).await;
        tokio::time::sleep(Duration::from_millis(300 + (round * 137) % 400)).await;
        drop(srv); // kill -9
    }
    assert_eq!(seen.len() as u64, rounds, "every restart found a commit");
    assert!(
        seen.iter().any(|r| *r > 0 && *r < rows_total),
        "the kills landed mid-stream: {seen:?}"
    );
    eprintln!("source rows recorded at each restart: {seen:?}");
    let srv = Server::start_in(Some(dir), data, "trust");
    let c = srv.connect().await;
    for view in ["upd", "eowc"] {
        assert_eq!(
            wait_finished(&c, view, Duration::from_secs(120)).await,
            rows_total
        );
    }
    let want = windows(&all, SECOND, SECOND, None);
    let (_, _, got) = view_at_checkpoint(&c, "eowc", true).await.expect("eowc");
    assert_eq!(got, want, "the finished EMIT ON WINDOW CLOSE view");
    let (_, _, got) = view_at_checkpoint(&c, "upd", false).await.expect("upd");
    assert_eq!(got, without_top(want), "the finished view");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_panic_restores_the_watermark_with_the_windows() {
    const ROWS: i64 = 12_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("eddy.log");
    let srv = Server::start_logged_with_env(
        None,
        dir.path().join("data"),
        "trust",
        &[("EDDY_FAULT_VIEW_PANIC_AT_ROWS", "5000")],
        &log,
    );
    let c = srv.connect().await;
    c.batch_execute(&source_sql("events", ROWS, 20_000))
        .await
        .expect("create source");
    c.batch_execute(
        "CREATE MATERIALIZED VIEW eowc WITH (checkpoint_interval_ms = 50) AS \
         SELECT window_start, k, count(*) AS n, sum(id) AS total, max(id) AS top \
         FROM TUMBLE(events, ts, INTERVAL '1' SECOND) GROUP BY window_start, k \
         EMIT ON WINDOW CLOSE",
    )
    .await
    .expect("create view");
    assert_eq!(
        wait_finished(&c, "eowc", Duration::from_secs(90)).await,
        ROWS
    );
    let all = source_rows(ROWS);
    let (_, _, got) = view_at_checkpoint(&c, "eowc", true).await.expect("eowc");
    assert_eq!(
        got,
        windows(&all, SECOND, SECOND, None),
        "the view after a restart"
    );
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(
        text.contains("injected fault"),
        "the panic happened: {text}"
    );
    // the restored clock counted each late row once
    let (_, _, late) = on_time(&all);
    let metrics = srv.metrics();
    assert!(
        metrics.contains(&format!(
            "eddy_view_late_rows_total{{view=\"eowc\"}} {late}"
        )),
        "{late} late rows in {metrics}"
    );
}
