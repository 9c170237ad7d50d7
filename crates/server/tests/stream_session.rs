//! SESSION windows end to end against the real server: a datagen source
//! whose times run out of order (so late-arriving rows bridge and merge
//! sessions), with a WATERMARK; a session view emitting on update and one
//! with EMIT ON WINDOW CLOSE. Each view table is checked against the
//! sessions this test computes itself by batch recomputation from the
//! generator's rows (late rows dropped row by row as the design says):
//! mid-stream after each kill -9 and restart (in one statement with the
//! checkpoint row, so against exactly the rows it records), and when the
//! source has ended. Plus the refusals (0A000) of what is not built:
//! SESSION without a watermark or with its bounds used before the
//! aggregate, and a stream-stream join without an interval; and an injected task panic
//! (the job restarts from its checkpoint).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow::array::{Int32Array, Int64Array, TimestampMicrosecondArray};
use eddy_common::ColumnType;
use eddy_streamsql::datagen::DatagenSpec;
use tokio_postgres::Client;

mod common;
use common::stream_jobs::{recorded_after, wait_finished};
use common::*;

/// The session gap.
const GAP: i64 = 10_000;

const SECOND: i64 = 1_000_000;
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

/// (session start µs, k) → (session end µs, count, sum of ids).
type Sessions = BTreeMap<(i64, i32), (i64, i64, i64)>;

/// The sessions of the on-time rows, by batch recomputation: each key's
/// rows in time order, cut where two consecutive times are GAP or more
/// apart; with `closed_at`, only sessions ending at or before it.
fn sessions(rows: &[(i64, i32, i64)], closed_at: Option<i64>) -> Sessions {
    let (mut kept, _, _) = on_time(rows);
    kept.sort_by_key(|r| (r.1, r.2));
    let mut out = Sessions::new();
    let mut open: Option<(i64, i32, i64, i64, i64)> = None;
    let close = |s: Option<(i64, i32, i64, i64, i64)>, out: &mut Sessions| {
        if let Some((start, k, last, n, total)) = s {
            if closed_at.is_none_or(|c| last + GAP <= c) {
                out.insert((start, k), (last + GAP, n, total));
            }
        }
    };
    for (id, k, t) in kept {
        open = match open {
            Some((start, ok, last, n, total)) if ok == k && t - last < GAP => {
                Some((start, k, t, n + 1, total + id))
            }
            other => {
                close(other, &mut out);
                Some((t, k, t, 1, id))
            }
        };
    }
    close(open, &mut out);
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

/// View `job`'s rows (`window_start, window_end, k, n, total`) and the
/// source rows its checkpoint records, read in one statement (one
/// snapshot); also whether that commit was the final one.
async fn view_at_checkpoint(c: &Client, job: &str) -> Option<(i64, bool, Sessions)> {
    let rows = c
        .query(
            &format!(
                "SELECT c.source_rows, c.checkpoint, v.window_start, v.window_end, v.k, v.n, \
                 v.total FROM eddy_stream_checkpoints c LEFT JOIN {job} v ON true \
                 WHERE c.job = $1"
            ),
            &[&job],
        )
        .await
        .expect("read view");
    let first = rows.first()?;
    let recorded: i64 = first.get(0);
    let last = first.get::<_, i64>(1) == i64::MAX;
    let mut got = Sessions::new();
    for r in &rows {
        let Some(start) = r.get::<_, Option<SystemTime>>(2) else {
            continue;
        };
        let end: SystemTime = r.get(3);
        got.insert((micros(start), r.get(4)), (micros(end), r.get(5), r.get(6)));
    }
    Some((recorded, last, got))
}

/// What the EMIT ON WINDOW CLOSE view over `prefix` holds.
fn closed_sessions(prefix: &[(i64, i32, i64)], last: bool) -> Sessions {
    let (_, wm, _) = on_time(prefix);
    sessions(
        prefix,
        if last {
            None
        } else {
            Some(wm.unwrap_or(i64::MIN))
        },
    )
}

fn view_sql(name: &str, emit: &str) -> String {
    format!(
        "CREATE MATERIALIZED VIEW {name} WITH (checkpoint_interval_ms = 50) AS \
         SELECT window_start, window_end, k, count(*) AS n, sum(id) AS total \
         FROM SESSION(events, ts, INTERVAL '10 milliseconds') \
         GROUP BY window_start, window_end, k {emit}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_keeps_sessions_exact() {
    let rounds: u64 = std::env::var("EDDY_STREAM_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let rows_total = 5_000 * (rounds as i64 + 3);
    let all = source_rows(rows_total);
    // the generator's disorder makes late rows bridge sessions: the
    // emit-on-update view must retract rows, or this test checks little
    let merges = {
        let (kept, _, _) = on_time(&all);
        let mut per_key: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
        let mut bridged = 0;
        for (_, k, t) in kept {
            let times = per_key.entry(k).or_default();
            let before = times.iter().filter(|x| **x < t).max().copied();
            let after = times.iter().filter(|x| **x > t).min().copied();
            if let (Some(b), Some(a)) = (before, after) {
                if a - b >= GAP && t - b < GAP && a - t < GAP {
                    bridged += 1;
                }
            }
            times.push(t);
        }
        bridged
    };
    assert!(merges > 0, "the stream has rows that merge two sessions");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    {
        let srv = Server::start_in(None, data.clone(), "trust");
        let c = srv.connect().await;
        c.batch_execute(&source_sql("events", rows_total, 8000))
            .await
            .expect("create source");
        c.batch_execute(&view_sql("upd", ""))
            .await
            .expect("create view");
        c.batch_execute(&view_sql("eowc", "EMIT ON WINDOW CLOSE"))
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
        if let Some((n, _, got)) = view_at_checkpoint(&c, "upd").await {
            assert_eq!(
                got,
                sessions(&all[..n as usize], None),
                "round {round}: emit on update over {n} rows"
            );
            seen.push(n);
        }
        if let Some((n, last, got)) = view_at_checkpoint(&c, "eowc").await {
            assert_eq!(
                got,
                closed_sessions(&all[..n as usize], last),
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
    eprintln!("source rows recorded at each restart: {seen:?}; {merges} bridging rows");
    let srv = Server::start_in(Some(dir), data, "trust");
    let c = srv.connect().await;
    for view in ["upd", "eowc"] {
        assert_eq!(
            wait_finished(&c, view, Duration::from_secs(120)).await,
            rows_total
        );
    }
    let want = sessions(&all, None);
    for view in ["upd", "eowc"] {
        let (_, _, got) = view_at_checkpoint(&c, view).await.expect("view");
        assert_eq!(got, want, "the finished view {view}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_built_is_refused() {
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute(&source_sql("events", 10, 1000))
        .await
        .expect("create source");
    c.batch_execute(
        "CREATE SOURCE plain (id bigint, k int, ts timestamp) WITH (connector = 'datagen', \
         datagen.max.rows = 10)",
    )
    .await
    .expect("create source");
    c.batch_execute(
        "CREATE SOURCE other (id bigint, k int, ts timestamp, \
         WATERMARK FOR ts AS ts - INTERVAL '1 second') WITH (connector = 'datagen', \
         datagen.max.rows = 10)",
    )
    .await
    .expect("create source");
    for (sql, state) in [
        // no watermark: sessions would never close
        (
            "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM \
             SESSION(plain, ts, INTERVAL '1' SECOND) GROUP BY window_start",
            "0A000",
        ),
        // the bounds are per row until sessions merge: no use before the aggregate
        (
            "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM \
             SESSION(events, ts, INTERVAL '1' SECOND) WHERE window_end > ts \
             GROUP BY window_start",
            "0A000",
        ),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT k, max(window_end) FROM \
             SESSION(events, ts, INTERVAL '1' SECOND) GROUP BY k",
            "0A000",
        ),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) FROM \
             SESSION(events, ts, INTERVAL '1' SECOND) GROUP BY k",
            "0A000",
        ),
        // a stream-stream outer join (inner equi-joins are built)
        (
            "CREATE MATERIALIZED VIEW v AS SELECT a.k, count(*) AS n FROM events a \
             LEFT JOIN other b ON a.k = b.k GROUP BY a.k",
            "0A000",
        ),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM \
             SESSION(events, ts, INTERVAL '1' SECOND, INTERVAL '1' SECOND) \
             GROUP BY window_start",
            "42601",
        ),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM \
             SESSION(events, ts, INTERVAL '1' MONTH) GROUP BY window_start",
            "0A000",
        ),
    ] {
        refused(&c, sql, state).await;
    }
    // nothing half-made is left behind
    let views = c.query("SHOW MATERIALIZED VIEWS", &[]).await.expect("show");
    assert!(views.is_empty(), "no view was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_panic_restores_the_sessions() {
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
    c.batch_execute(&view_sql("upd", ""))
        .await
        .expect("create view");
    assert_eq!(
        wait_finished(&c, "upd", Duration::from_secs(90)).await,
        ROWS
    );
    let (_, _, got) = view_at_checkpoint(&c, "upd").await.expect("view");
    assert_eq!(
        got,
        sessions(&source_rows(ROWS), None),
        "the view after a restart"
    );
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(
        text.contains("injected fault"),
        "the panic happened: {text}"
    );
}
