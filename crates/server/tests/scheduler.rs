//! The scheduler through the real server: point lookups keep answering
//! while analytical queries loop on the same data, each analytical query
//! is charged to its session's scheduling group, and the groups come from
//! the configuration file (`docs/design/scheduler.md`).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Server;

const CONFIG: &str = r#"
[scheduler]
slots = 2
serving_share = 8

[scheduler.groups]
reporting = 1
dashboards = 4

[scheduler.roles]
grafana = "dashboards"
"#;

fn start() -> (Server, tempfile::TempDir) {
    start_with(CONFIG)
}

fn start_with(config_text: &str) -> (Server, tempfile::TempDir) {
    let files = tempfile::tempdir().expect("tempdir");
    let config = files.path().join("eddy.toml");
    std::fs::write(&config, config_text).expect("config");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let server = Server::start_with(
        Some(dir),
        data,
        "trust",
        &[],
        &["--config", config.to_str().expect("utf-8 path")],
    );
    (server, files)
}

/// The value of a metric line `name{class="class"} v`.
fn metric(body: &str, name: &str, class: &str) -> Option<f64> {
    let prefix = format!("{name}{{class=\"{class}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_keep_answering_while_analytical_queries_loop() {
    let (server, _files) = start();
    lookups_keep_answering(&server).await;
}

/// The same with connections as `serving` contexts on the scheduler's
/// slots (`connections_on = "contexts"`; by default they stay on the
/// network threads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_keep_answering_with_connections_as_contexts() {
    let (server, _files) = start_with("[scheduler]\nslots = 2\nconnections_on = \"contexts\"\n");
    lookups_keep_answering(&server).await;
}

async fn lookups_keep_answering(server: &Server) {
    let c = server.connect().await;
    c.batch_execute(
        "CREATE TABLE facts (id bigint PRIMARY KEY, v bigint);
         INSERT INTO facts SELECT i, i * 7 % 1000 FROM generate_series(1, 200000) AS g(i);",
    )
    .await
    .expect("load");

    let before = server.metrics();
    // three connections loop over an aggregate that takes a while
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut loops = Vec::new();
    for i in 0..3 {
        let a = server.connect().await;
        let (stop, done) = (Arc::clone(&stop), Arc::clone(&done));
        loops.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let sql = format!(
                    "SELECT count(DISTINCT (a.v * {m} + b.id) % 100003) \
                     FROM facts a JOIN facts b ON a.id = b.id",
                    m = i + 31
                );
                a.query_one(sql.as_str(), &[])
                    .await
                    .expect("analytical query");
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let lookup = c
        .prepare("SELECT v FROM facts WHERE id = $1")
        .await
        .expect("prepare");
    let mut worst = Duration::ZERO;
    let mut total = Duration::ZERO;
    const LOOKUPS: u32 = 200;
    for i in 0..LOOKUPS {
        let id = i64::from(i) * 997 % 200_000 + 1;
        let t = Instant::now();
        let row = c.query_one(&lookup, &[&id]).await.expect("lookup");
        let took = t.elapsed();
        assert_eq!(row.get::<_, i64>(0), id * 7 % 1000);
        worst = worst.max(took);
        total += took;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.await.expect("loop");
    }
    // a functional bound, not a benchmark (`eddy bench mixed` measures):
    // a lookup waits at most for a few quanta of the analytical contexts,
    // never for a whole analytical query
    let mean = total / LOOKUPS;
    assert!(
        worst < Duration::from_secs(1),
        "slowest lookup {worst:?} (mean {mean:?})"
    );
    assert!(
        done.load(Ordering::Relaxed) >= 1,
        "the analytical queries made no progress"
    );

    let body = server.metrics();
    let cpu =
        |b: &str, class: &str| metric(b, "eddy_sched_cpu_seconds_total", class).unwrap_or(0.0);
    let analytics = cpu(&body, "analytics") - cpu(&before, "analytics");
    let serving = cpu(&body, "serving") - cpu(&before, "serving");
    eprintln!("lookups: worst {worst:?}, mean {mean:?}; CPU: analytics {analytics:.3} s, serving {serving:.3} s");
    assert!(
        analytics > serving,
        "the analytical queries were charged to their own groups: analytics {analytics} s, serving {serving} s"
    );
    assert!(
        metric(&body, "eddy_sched_queued", "serving").is_some(),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_choose_their_group_and_roles_start_in_theirs() {
    let (server, _files) = start();
    let c = server.connect().await;
    let show = |row: tokio_postgres::Row| row.get::<_, String>(0);
    assert_eq!(
        show(
            c.query_one("SHOW eddy.scheduling_group", &[])
                .await
                .unwrap()
        ),
        "analytics"
    );
    c.batch_execute("SET eddy.scheduling_group = 'dashboards'")
        .await
        .expect("set");
    assert_eq!(
        show(
            c.query_one("SHOW eddy.scheduling_group", &[])
                .await
                .unwrap()
        ),
        "dashboards"
    );
    c.query_one("SELECT count(*) FROM generate_series(1, 100000)", &[])
        .await
        .expect("query in dashboards");
    let body = server.metrics();
    assert!(
        metric(&body, "eddy_sched_cpu_seconds_total", "dashboards").is_some_and(|s| s > 0.0),
        "the query was charged to its group's class: {body}"
    );

    let e = c
        .batch_execute("SET eddy.scheduling_group = 'serving'")
        .await
        .expect_err("serving is not a query group");
    let db = e.as_db_error().expect("db error");
    assert_eq!(db.code().code(), "22023", "{}", db.message());
    assert!(db.message().contains("dashboards"), "{}", db.message());

    c.batch_execute("RESET eddy.scheduling_group")
        .await
        .expect("reset");
    assert_eq!(
        show(
            c.query_one("SHOW eddy.scheduling_group", &[])
                .await
                .unwrap()
        ),
        "analytics"
    );

    c.batch_execute("CREATE ROLE grafana LOGIN")
        .await
        .expect("role");
    let g = server.connect_as("grafana", "x").await.expect("grafana");
    assert_eq!(
        show(
            g.query_one("SHOW eddy.scheduling_group", &[])
                .await
                .unwrap()
        ),
        "dashboards"
    );
}

#[test]
fn a_bad_scheduler_configuration_is_refused_at_start() {
    let files = tempfile::tempdir().expect("tempdir");
    let config = files.path().join("eddy.toml");
    std::fs::write(&config, "[scheduler.groups]\nserving = 3\n").expect("config");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["server", "--data-dir"])
        .arg(files.path().join("data"))
        .args(["--auth", "trust", "--pg-addr", "127.0.0.1:0", "--config"])
        .arg(&config)
        .output()
        .expect("run eddy");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server's own"), "{err}");
}

/// Admission control (`[scheduler] max_running_queries`): with one place
/// and one queue slot, a second analytical statement waits while the
/// first runs, a third is refused with 53000, a point lookup never waits,
/// and once the first ends (stopped by its `statement_timeout`) the
/// waiting one runs. `/metrics` counts all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analytical_statements_wait_for_a_place_and_overflow_is_refused() {
    let (server, _files) =
        start_with("[scheduler]\nmax_running_queries = 1\nmax_queued_queries = 1\n");
    let setup = server.connect().await;
    setup
        .batch_execute(
            "CREATE TABLE adm (id INT PRIMARY KEY, v INT); INSERT INTO adm VALUES (1, 10)",
        )
        .await
        .expect("setup");

    let long = server.connect().await;
    long.batch_execute("SET statement_timeout = '3s'")
        .await
        .expect("timeout");
    let running = tokio::spawn(async move {
        long.simple_query(
            "SELECT count(*) FROM generate_series(1, 1000000000) AS g(a) WHERE a % 7 = 3",
        )
        .await
    });
    assert!(
        server
            .metric_line_within("eddy_admission_running 1", 2)
            .await,
        "the long statement never took its place"
    );

    let waiting_client = server.connect().await;
    let started = Instant::now();
    let waiting = tokio::spawn(async move {
        let r = waiting_client
            .query_one("SELECT sum(v) FROM adm", &[])
            .await;
        (r.map(|row| row.get::<_, i64>(0)), started.elapsed())
    });
    assert!(
        server
            .metric_line_within("eddy_admission_queued 1", 2)
            .await,
        "the second statement is not queued"
    );

    let third = server.connect().await;
    let err = third
        .query_one("SELECT count(*) FROM adm", &[])
        .await
        .expect_err("the queue is full");
    assert_eq!(err.code().map(|c| c.code()), Some("53000"), "{err}");

    // a point lookup is a fixed plan: it never waits for a place
    let lookup = server.connect().await;
    let t = Instant::now();
    let row = lookup
        .query_one("SELECT v FROM adm WHERE id = $1", &[&1i32])
        .await
        .expect("lookup");
    assert_eq!(row.get::<_, i32>(0), 10);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());

    let first = running.await.expect("join");
    let e = first.expect_err("stopped by statement_timeout");
    assert_eq!(e.code().map(|c| c.code()), Some("57014"), "{e}");
    let (sum, waited) = waiting.await.expect("join");
    assert_eq!(sum.expect("admitted after the first ended"), 10);
    assert!(waited > Duration::from_millis(200), "{waited:?}");

    let body = server.metrics();
    assert!(body.contains("eddy_admission_refused_total 1\n"), "{body}");
    assert!(body.contains("eddy_admission_queued 0\n"), "{body}");
    let wait: f64 = body
        .lines()
        .find_map(|l| l.strip_prefix("eddy_admission_wait_seconds_total "))
        .and_then(|v| v.trim().parse().ok())
        .expect("wait metric");
    assert!(wait > 0.1, "{wait}");
}
