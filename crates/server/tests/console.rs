//! The console end to end: the real `eddy` binary, real clients, and each
//! page loaded in headless Chromium (Debian's `chromium`). Checks the
//! start-up message on stderr, that a running statement, a table with its
//! row count and a stream view show on their pages (HTML-escaped), that
//! the console's cancel ends the statement with 57014, and that the HTTP
//! listener answers bad requests with 4xx instead of failing.
//!
//! Chromium missing: the browser checks are skipped with a notice, unless
//! `EDDY_REQUIRE_CHROMIUM=1` (CI sets it in `.ci/run`), which fails them.
//! `EDDY_CONSOLE_SCREENSHOTS=<dir>` also saves a PNG of each page there
//! (how `docs/console/*.png` are made).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

const PAGES: [(&str, &str); 5] = [
    ("/", "overview"),
    ("/statements", "statements"),
    ("/tables", "tables"),
    ("/streams", "streams"),
    ("/scheduler", "scheduler"),
];

/// The Chromium binary, or `None` (with a notice) when it is missing and
/// not required.
fn chromium() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("EDDY_CHROMIUM").map(PathBuf::from),
        Some(PathBuf::from("/usr/bin/chromium")),
        Some(PathBuf::from("/usr/bin/chromium-browser")),
    ];
    if let Some(p) = candidates.into_iter().flatten().find(|p| p.exists()) {
        return Some(p);
    }
    if std::env::var("EDDY_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
        panic!("chromium is required (EDDY_REQUIRE_CHROMIUM=1) but not installed: apt-get install -y chromium");
    }
    eprintln!("NOTICE: chromium not found: the console's browser checks are skipped (apt-get install -y chromium)");
    None
}

/// Runs Chromium headless with `args` and `url`; its stdout.
fn run_chromium(bin: &Path, args: &[String], url: &str) -> String {
    let profile = tempfile::tempdir().expect("profile dir");
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().expect("wait chromium").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish loading {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().expect("chromium output")
}

fn dump_dom(bin: &Path, url: &str) -> String {
    let dom = run_chromium(bin, &["--dump-dom".to_string()], url);
    assert!(
        dom.contains("</html>"),
        "chromium gave no page for {url}: {dom}"
    );
    dom
}

/// One HTTP request over a plain socket: (status, body).
fn http(port: u16, request: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect http");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    // a refused request may be answered before all of it is written
    let _ = s.write_all(request.as_bytes());
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out).to_string();
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {out:?}"));
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// HTTP Basic credentials of the superuser `eddy` (password `secret`,
/// the test servers'): `eddy:secret`.
const EDDY: &str = "Authorization: Basic ZWRkeTpzZWNyZXQ=\r\n";

/// The header line of HTTP Basic credentials.
fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Authorization: Basic {token}\r\n")
}

fn get(port: u16, path: &str) -> (u16, String) {
    get_as(port, path, EDDY)
}

fn get_as(port: u16, path: &str, auth: &str) -> (u16, String) {
    http(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}\r\n"),
    )
}

fn post(port: u16, path: &str, host: &str) -> (u16, String) {
    post_as(port, path, host, EDDY)
}

fn post_as(port: u16, path: &str, host: &str, auth: &str) -> (u16, String) {
    http(
        port,
        &format!("POST {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Length: 0\r\n\r\n"),
    )
}

/// The start-up message, once the server printed it.
fn startup_message(log: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains("Metrics:") {
            return text;
        }
        assert!(Instant::now() < deadline, "no start-up message: {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const LONG_QUERY: &str =
    "SELECT count(*) AS \"<i>n</i>\" FROM generate_series(1, 20000000000) AS t(x) WHERE x % 7 = 3";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_pages_show_the_server_and_cancel_a_statement() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let log = dir.path().join("eddy.log");
    let server = Server::start_logged(None, data.clone(), "scram", &log);
    let (pg, http_port) = (server.port, server.http_port);

    // the start-up message says how to connect and where everything is
    let banner = startup_message(&log);
    let data_abs = std::fs::canonicalize(&data).expect("data dir");
    for want in [
        format!("PostgreSQL:  127.0.0.1:{pg} (auth scram, TLS off)"),
        format!(
            "Connect:     PGPASSWORD=\"$EDDY_PASSWORD\" psql -h 127.0.0.1 -p {pg} -U eddy eddy"
        ),
        format!("Data:        {}", data_abs.display()),
        format!("Console:     http://127.0.0.1:{http_port}/"),
        format!("Metrics:     http://127.0.0.1:{http_port}/metrics"),
    ] {
        assert!(
            banner.contains(&want),
            "start-up message lacks {want:?}:\n{banner}"
        );
    }

    // and its psql line connects, as printed (psql comes with pgbench's
    // package in .ci/run)
    let connect = banner
        .lines()
        .find_map(|l| l.trim().strip_prefix("Connect:"))
        .map(str::trim)
        .expect("a Connect: line");
    if Path::new("/usr/bin/psql").exists() {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{connect} -X -A -t -c 'SELECT 40 + 2'"))
            .env("EDDY_PASSWORD", "secret")
            .env_remove("PGPASSWORD")
            .output()
            .expect("run psql");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && text.trim() == "42",
            "{connect}: {text}"
        );
    } else {
        eprintln!("NOTICE: psql not found: the start-up message's psql line is not run");
    }

    let c = server.connect().await;
    c.batch_execute(
        "CREATE TABLE console_orders (id BIGINT PRIMARY KEY, amount INT);
         INSERT INTO console_orders SELECT x, x % 100 FROM generate_series(1, 1240) AS t(x);
         UPDATE console_orders SET amount = amount + 1 WHERE id <= 10;
         CHECKPOINT;
         DELETE FROM console_orders WHERE id > 1234;
         CREATE SOURCE console_clicks (id bigint, k int) WITH (connector = 'datagen',
           datagen.rows.per.second = 20000, fields.id.kind = 'sequence',
           fields.k.kind = 'random', fields.k.min = 0, fields.k.max = 9);
         CREATE MATERIALIZED VIEW console_clicks_by_k WITH (checkpoint_interval_ms = 200) AS
           SELECT k, count(*) AS n, sum(id) AS total FROM console_clicks WHERE id % 2 = 0 GROUP BY k",
    )
    .await
    .expect("setup");

    // a statement that runs for minutes unless cancelled
    let long = server.connect().await;
    let running = tokio::spawn(async move {
        let t = Instant::now();
        let r = long.simple_query(LONG_QUERY).await;
        (r, t.elapsed(), long)
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        let (status, body) = get(http_port, "/api/statements");
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("statements JSON");
        let found = v["running"].as_array().and_then(|a| {
            a.iter()
                .find(|r| r["text"].as_str() == Some(LONG_QUERY))
                .and_then(|r| r["id"].as_str().map(str::to_string))
        });
        if let Some(id) = found {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "the long statement never showed: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    if let Some(bin) = chromium() {
        // the console asks for a role's password: given in the URL
        let url = |p: &str| format!("http://eddy:secret@127.0.0.1:{http_port}{p}");
        let t = Instant::now();
        let dom = dump_dom(&bin, &url("/statements"));
        assert!(dom.contains("generate_series(1, 20000000000)"), "{dom}");
        assert!(
            dom.contains(&format!("/api/statements/{id}/cancel")),
            "{dom}"
        );
        // the statement's text is text, not markup
        assert!(dom.contains("&lt;i&gt;n&lt;/i&gt;"), "{dom}");
        assert!(!dom.contains("<i>n</i>"), "{dom}");
        // both sessions, one running the statement, the other idle
        assert!(dom.contains("Sessions") && dom.contains(">idle<"), "{dom}");
        assert!(dom.contains(&format!(">{id}<")), "{dom}");

        let dom = dump_dom(&bin, &url("/"));
        assert!(
            dom.contains("Overview") && dom.contains(&data_abs.display().to_string()),
            "{dom}"
        );

        let dom = dump_dom(&bin, &url("/tables"));
        let row = dom
            .split("<tr>")
            .find(|r| r.contains("href=\"#t-console_orders\""))
            .unwrap_or_else(|| panic!("no console_orders row: {dom}"));
        assert!(row.contains(">1234<"), "row count missing: {row}");
        assert!(row.contains("row,column"), "{row}");

        let dom = dump_dom(&bin, &url("/streams"));
        assert!(dom.contains("console_clicks_by_k"), "{dom}");
        assert!(dom.contains("source console_clicks"), "{dom}");
        assert!(dom.contains("parallelism 1"), "{dom}");

        let dom = dump_dom(&bin, &url("/scheduler"));
        assert!(dom.contains("No scheduler yet"), "{dom}");
        println!(
            "five pages loaded in chromium in {:.1} s",
            t.elapsed().as_secs_f64()
        );

        if let Some(out) = std::env::var_os("EDDY_CONSOLE_SCREENSHOTS") {
            let out = PathBuf::from(out);
            std::fs::create_dir_all(&out).expect("screenshot dir");
            // a view with a committed checkpoint and a throughput figure
            tokio::time::sleep(Duration::from_secs(3)).await;
            for (path, name) in PAGES {
                let file = out.join(format!("{name}.png"));
                run_chromium(
                    &bin,
                    &[
                        format!("--screenshot={}", file.display()),
                        "--window-size=1280,900".to_string(),
                        "--hide-scrollbars".to_string(),
                    ],
                    &url(path),
                );
                assert!(file.exists(), "no screenshot of {path}");
            }
        }
    }

    // JSON for every page
    for (path, _) in PAGES {
        let api = if path == "/" {
            "/api/overview".to_string()
        } else {
            format!("/api{path}")
        };
        let (status, body) = get(http_port, &api);
        assert_eq!(status, 200, "{api}: {body}");
        serde_json::from_str::<serde_json::Value>(&body)
            .unwrap_or_else(|e| panic!("{api}: {e}: {body}"));
    }
    let (_, tables) = get(http_port, "/api/tables");
    let tables: serde_json::Value = serde_json::from_str(&tables).expect("tables JSON");
    let orders = tables["tables"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["name"] == "console_orders"))
        .expect("console_orders in /api/tables");
    assert_eq!(orders["rows"], 1234);
    assert_eq!(orders["rows_exact"], true);
    assert!(
        orders["files"].as_array().is_some_and(|f| !f.is_empty()),
        "{orders}"
    );
    let view = tables["tables"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["name"] == "console_clicks_by_k"))
        .expect("the view's table in /api/tables");
    assert_eq!(view["kind"], "materialized view");
    assert!(
        view["rows"].as_u64().is_some_and(|n| n <= 10),
        "one row per k: {view}"
    );
    assert_eq!(orders["kind"], "table");

    // cancel is refused to another host (DNS rebinding) and another origin
    let cancel = format!("/api/statements/{id}/cancel");
    let (status, body) = post(http_port, &cancel, "evil.example");
    assert_eq!(status, 403, "{body}");
    let (status, body) = http(
        http_port,
        &format!("POST {cancel} HTTP/1.1\r\nHost: 127.0.0.1:{http_port}\r\n{EDDY}Origin: http://evil.example\r\nContent-Length: 0\r\n\r\n"),
    );
    assert_eq!(status, 403, "{body}");
    let (status, body) = get(http_port, &cancel);
    assert_eq!(status, 405, "{body}");
    assert!(
        !running.is_finished(),
        "a refused cancel stopped the statement"
    );

    // the console's cancel ends the statement as a CancelRequest does
    let (status, body) = post(http_port, &cancel, &format!("127.0.0.1:{http_port}"));
    assert_eq!(status, 200, "{body}");
    let (result, elapsed, long) = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the statement ended")
        .expect("join");
    let err = result.expect_err("the statement should have been cancelled");
    assert_eq!(err.code().map(|c| c.code()), Some("57014"), "{err}");
    println!("cancelled after {:.1} s", elapsed.as_secs_f64());
    let (status, body) = post(http_port, &cancel, &format!("127.0.0.1:{http_port}"));
    assert_eq!(status, 409, "a finished statement: {body}");
    let (status, _) = post(http_port, "/api/statements/x/cancel", "localhost");
    assert_eq!(status, 400);
    let (status, _) = post(http_port, "/api/statements/999999.1/cancel", "localhost");
    assert_eq!(status, 404);

    // bad requests get 4xx, and the listener keeps serving
    assert_eq!(get(http_port, "/nope").0, 404);
    assert_eq!(
        http(
            http_port,
            &format!("DELETE / HTTP/1.1\r\nHost: x\r\n{EDDY}\r\n")
        )
        .0,
        405
    );
    assert_eq!(post(http_port, "/tables", "localhost").0, 405);
    assert_eq!(http(http_port, "BOGUS\r\n\r\n").0, 400);
    assert_eq!(http(http_port, "GET / HTTP/2.0\r\n\r\n").0, 505);
    let huge = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(64 * 1024));
    assert_eq!(http(http_port, &huge).0, 413);
    assert_eq!(
        http(http_port, "POST /api/statements/1.1/cancel HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000000\r\n\r\n").0,
        413
    );
    assert_eq!(get(http_port, "/health"), (200, "ok\n".to_string()));
    assert!(get(http_port, "/metrics").1.contains("eddy_connections"));

    // the session survived its cancelled statement
    long.simple_query("SELECT 1").await.expect("after cancel");
    c.simple_query("SELECT 1").await.expect("other session");
    println!("console test took {:.1} s", started.elapsed().as_secs_f64());
}

/// On a non-loopback HTTP address the console has no cancel: the page
/// shows no button and says why, the endpoint answers 403.
#[test]
fn cancel_is_refused_when_the_console_is_not_on_loopback() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pg, http_port) = (free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["server", "--data-dir"])
        .arg(dir.path())
        .args(["--pg-addr", &format!("127.0.0.1:{pg}")])
        .args(["--http-addr", &format!("0.0.0.0:{http_port}")])
        .args(["--auth", "trust"])
        .env("EDDY_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start eddy");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", http_port)).is_err() {
        assert!(Instant::now() < deadline, "eddy did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, body) = post(http_port, "/api/statements/1.1/cancel", "localhost");
    let (page_status, page) = get(http_port, "/statements");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("not on a loopback address"), "{body}");
    assert_eq!(page_status, 200);
    assert!(page.contains("Cancel is off"), "{page}");
}

/// With password authentication the console asks for a role's password
/// (HTTP Basic, checked against the role's SCRAM verifier), and a role
/// sees and cancels only what `pg_stat_activity` and `pg_cancel_backend`
/// allow it: another role's statement text is `<insufficient privilege>`
/// and its cancel is 403, until the role is granted `pg_read_all_stats`
/// and `pg_signal_backend`. Failed passwords count toward the server's
/// per-address login limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_behind_roles() {
    let server = Server::start("scram");
    let http_port = server.http_port;
    let admin = server.connect().await;
    admin
        .batch_execute(
            "CREATE ROLE alice LOGIN PASSWORD 'wonder'; CREATE ROLE nologin_bob PASSWORD 'x'",
        )
        .await
        .expect("roles");
    let alice = basic("alice", "wonder");

    // no credentials, a wrong password, a role that may not log in: 401
    // with the challenge a browser answers with its login prompt
    let (status, body) = http(
        http_port,
        &format!("GET /statements HTTP/1.1\r\nHost: 127.0.0.1:{http_port}\r\n\r\n"),
    );
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains("Sessions"), "{body}");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", http_port)).expect("connect");
    s.write_all(b"GET /api/overview HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("request");
    let mut head = String::new();
    s.read_to_string(&mut head).expect("response");
    assert!(
        head.contains("WWW-Authenticate: Basic realm=\"Eddy console\""),
        "{head}"
    );
    assert!(!head.contains("data_dir"), "{head}");
    assert_eq!(
        get_as(http_port, "/api/overview", &basic("alice", "wrong")).0,
        401
    );
    assert_eq!(
        get_as(http_port, "/api/overview", &basic("nologin_bob", "x")).0,
        401
    );
    assert_eq!(get_as(http_port, "/metrics", "").0, 401);
    // the liveness probe needs none
    assert_eq!(get_as(http_port, "/health", ""), (200, "ok\n".to_string()));
    assert_eq!(get_as(http_port, "/api/overview", &alice).0, 200);

    // the superuser's long statement, as alice sees it
    let long = server.connect().await;
    let running = tokio::spawn(async move { long.simple_query(LONG_QUERY).await });
    let deadline = Instant::now() + Duration::from_secs(20);
    let (id, mine) = loop {
        let (status, body) = get(http_port, "/api/statements");
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("statements JSON");
        let found = v["running"].as_array().and_then(|a| {
            a.iter()
                .find(|r| r["text"].as_str() == Some(LONG_QUERY))
                .cloned()
        });
        if let Some(r) = found {
            break (r["id"].as_str().unwrap_or_default().to_string(), r);
        }
        assert!(
            Instant::now() < deadline,
            "the long statement never showed: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(mine["may_cancel"], true, "{mine}");
    let (status, body) = get_as(http_port, "/api/statements", &alice);
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("statements JSON");
    let theirs = v["running"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["id"].as_str() == Some(id.as_str())))
        .cloned()
        .unwrap_or_else(|| panic!("alice does not see statement {id}: {body}"));
    assert_eq!(theirs["text"], "<insufficient privilege>", "{theirs}");
    assert_eq!(theirs["client"], "", "{theirs}");
    assert_eq!(theirs["may_cancel"], false, "{theirs}");
    assert_eq!(v["viewer"], "alice");
    let (status, page) = get_as(http_port, "/statements", &alice);
    assert_eq!(status, 200);
    assert!(!page.contains("generate_series"), "{page}");
    assert!(
        !page.contains(&format!("/api/statements/{id}/cancel")),
        "{page}"
    );
    let cancel = format!("/api/statements/{id}/cancel");
    let (status, body) = post_as(http_port, &cancel, "localhost", &alice);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("permission denied to cancel query"), "{body}");
    assert!(!running.is_finished(), "alice's refused cancel stopped it");

    // pg_read_all_stats shows the text; a superuser's statement still
    // cannot be cancelled by a pg_signal_backend member (PostgreSQL's rule)
    admin
        .batch_execute("GRANT pg_read_all_stats TO alice; GRANT pg_signal_backend TO alice")
        .await
        .expect("grants");
    let (_, body) = get_as(http_port, "/api/statements", &alice);
    assert!(body.contains("generate_series"), "{body}");
    assert_eq!(post_as(http_port, &cancel, "localhost", &alice).0, 403);
    // the superuser may
    assert_eq!(post(http_port, &cancel, "localhost").0, 200);
    let r = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("cancelled in time")
        .expect("join");
    assert!(r.is_err(), "the statement was cancelled");

    // failed passwords are limited per address, as logins on the port are
    let mut limited = false;
    for _ in 0..10 {
        let (status, _) = get_as(http_port, "/", &basic("alice", "guess"));
        if status == 429 {
            limited = true;
            break;
        }
        assert_eq!(status, 401);
    }
    assert!(limited, "failed console logins were never limited");
    assert_eq!(
        get_as(http_port, "/", &alice).0,
        429,
        "even the right password waits"
    );
}
