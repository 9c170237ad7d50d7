//! Security end to end, against the real server: who may make the server
//! read or write its files through COPY, what an unknown user learns at
//! login, the limit on failed logins, TLS with psql, psycopg and pgjdbc,
//! the GSSENCRequest answer, and the start-up refusals (empty password,
//! half a TLS configuration). The invariants are in
//! `docs/design/security.md`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::drivers::*;
use common::*;

const CONFIG: &str = r#"
[[users]]
name = "alice"
password = "alice-pw"

[[users]]
name = "reader"
password = "reader-pw"
roles = ["pg_read_server_files"]

[[users]]
name = "writer"
password = "writer-pw"
roles = ["pg_write_server_files"]
"#;

/// A SCRAM server whose config file defines alice (no privilege), reader
/// and writer (one role each); `eddy` (password `secret`) is the superuser.
fn start_with_users(extra: &[&str]) -> (Server, PathBuf, tempfile::TempDir) {
    let files = tempfile::tempdir().expect("tempdir");
    let config = files.path().join("eddy.toml");
    std::fs::write(&config, CONFIG).expect("config");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let mut args = vec!["--config", config.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    let server = Server::start_with(Some(dir), data, "scram", &[], &args);
    (server, config, files)
}

/// The SQLSTATE and message of a failed statement.
async fn must_fail(c: &tokio_postgres::Client, sql: &str) -> (String, String) {
    let e = c.batch_execute(sql).await.expect_err(sql);
    let db = e.as_db_error().unwrap_or_else(|| panic!("{sql}: {e}"));
    (db.code().code().to_string(), db.message().to_string())
}

async fn must_fail_with(c: &tokio_postgres::Client, sql: &str, code: &str) -> String {
    let (got, msg) = must_fail(c, sql).await;
    assert_eq!(got, code, "{sql}: {msg}");
    msg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_files_need_the_superuser_or_a_role() {
    use futures::{SinkExt, TryStreamExt};
    let (server, config, files) = start_with_users(&[]);
    let su = server.connect().await;
    // every user may use the table itself: what is refused below is the
    // server files (crates/server/tests/roles.rs tests table privileges)
    su.batch_execute("CREATE TABLE t (id INT PRIMARY KEY, v TEXT); GRANT ALL ON t TO PUBLIC")
        .await
        .unwrap();
    let csv = files.path().join("rows.csv");
    std::fs::write(&csv, "1,a\n2,b\n").unwrap();
    let out = files.path().join("out.csv");
    let catalog = server.data_dir.join("catalog.json");
    assert!(catalog.exists(), "the data directory has catalog.json");
    let catalog_before = std::fs::read(&catalog).unwrap();
    let (csv, out, config, catalog_s) = (
        csv.display().to_string(),
        out.display().to_string(),
        config.display().to_string(),
        catalog.display().to_string(),
    );

    // an ordinary user: no server file at all, STDIN/STDOUT still open
    let alice = server.connect_as("alice", "alice-pw").await.unwrap();
    let superuser: String = alice
        .query_one("SHOW is_superuser", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(superuser, "off");
    let rolsuper: bool = alice
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!rolsuper);
    let msg = must_fail_with(&alice, "COPY t FROM '/etc/passwd'", "42501").await;
    assert_eq!(
        msg,
        "must be superuser or have privileges of the pg_read_server_files role to COPY from a file"
    );
    for path in [&csv, &config, &catalog_s, &"/proc/self/environ".to_string()] {
        must_fail_with(
            &alice,
            &format!("COPY t FROM '{path}' (FORMAT csv)"),
            "42501",
        )
        .await;
    }
    let msg = must_fail_with(&alice, &format!("COPY t TO '{out}'"), "42501").await;
    assert!(msg.contains("pg_write_server_files"), "{msg}");
    must_fail_with(
        &alice,
        &format!("COPY (SELECT 1) TO '{catalog_s}'"),
        "42501",
    )
    .await;
    assert!(!Path::new(&out).exists());
    let sink = alice
        .copy_in("COPY t FROM STDIN WITH (FORMAT csv)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"10,x\n"))
        .await
        .unwrap();
    assert_eq!(sink.finish().await.unwrap(), 1);
    let chunks: Vec<bytes::Bytes> = alice
        .copy_out("COPY (SELECT v FROM t WHERE id = 10) TO STDOUT")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(chunks.concat(), b"x\n");

    // pg_read_server_files: ordinary files, not the server's own
    let reader = server.connect_as("reader", "reader-pw").await.unwrap();
    reader
        .batch_execute(&format!("COPY t FROM '{csv}' (FORMAT csv)"))
        .await
        .unwrap();
    for path in [&config, &catalog_s] {
        let msg = must_fail_with(
            &reader,
            &format!("COPY t FROM '{path}' (FORMAT csv)"),
            "42501",
        )
        .await;
        assert!(msg.contains("only a superuser"), "{msg}");
    }
    must_fail_with(&reader, &format!("COPY t TO '{out}'"), "42501").await;

    // pg_write_server_files: ordinary files, never the data directory
    let writer = server.connect_as("writer", "writer-pw").await.unwrap();
    writer
        .batch_execute(&format!("COPY t TO '{out}' (FORMAT csv)"))
        .await
        .unwrap();
    assert!(std::fs::read_to_string(&out).unwrap().contains("1,a"));
    must_fail_with(&writer, &format!("COPY t FROM '{csv}'"), "42501").await;

    // the superuser: any regular file, but never a write into the data
    // directory or over the config file, never a device, /proc or a FIFO
    let superuser: String = su.query_one("SHOW is_superuser", &[]).await.unwrap().get(0);
    assert_eq!(superuser, "on");
    let rolsuper: bool = su
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(rolsuper);
    su.batch_execute(&format!("COPY (SELECT 7, 'z') TO '{out}' (FORMAT csv)"))
        .await
        .unwrap();
    su.batch_execute(&format!("COPY t FROM '{out}' (FORMAT csv)"))
        .await
        .unwrap();
    for target in [&catalog_s, &config] {
        must_fail_with(&su, &format!("COPY t TO '{target}'"), "42501").await;
    }
    let into_data = server.data_dir.join("new.csv").display().to_string();
    must_fail_with(&su, &format!("COPY t TO '{into_data}'"), "42501").await;
    assert!(!Path::new(&into_data).exists());
    let started = Instant::now();
    must_fail_with(&su, "COPY t FROM '/dev/zero'", "42501").await;
    must_fail_with(&su, "COPY t FROM '/proc/self/environ'", "42501").await;
    let fifo = files.path().join("fifo");
    if Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        let fifo = fifo.display().to_string();
        must_fail_with(&su, &format!("COPY t FROM '{fifo}'"), "42809").await;
        must_fail_with(&su, &format!("COPY t TO '{fifo}'"), "42809").await;
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused at once"
    );
    must_fail_with(&su, "COPY t TO 'relative.csv'", "42602").await;
    assert_eq!(std::fs::read(&catalog).unwrap(), catalog_before);
    let n: i64 = su
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trust_login_under_any_name_is_not_a_superuser() {
    let server = Server::start("trust");
    let nobody = server.connect_as("nobody", "unused").await.unwrap();
    let eddy = server.connect().await;
    eddy.batch_execute("CREATE TABLE t (id INT PRIMARY KEY); GRANT ALL ON t TO PUBLIC")
        .await
        .unwrap();
    must_fail_with(&nobody, "COPY t FROM '/etc/passwd'", "42501").await;
    must_fail_with(
        &nobody,
        "COPY t TO '/tmp/eddy-security-nobody.txt'",
        "42501",
    )
    .await;
    let on: String = eddy
        .query_one("SHOW is_superuser", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(on, "on");
}

// ---- SCRAM: what a client learns before it proves a password ----

fn startup_message(user: &str) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&196608i32.to_be_bytes());
    for (k, v) in [("user", user), ("database", "eddy")] {
        body.extend_from_slice(k.as_bytes());
        body.push(0);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut msg = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    msg.extend_from_slice(&body);
    msg
}

/// One backend message: its type byte and body.
fn read_message(s: &mut std::net::TcpStream) -> (u8, Vec<u8>) {
    let mut head = [0u8; 5];
    s.read_exact(&mut head).expect("message header");
    let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    let mut body = vec![0u8; len - 4];
    s.read_exact(&mut body).expect("message body");
    (head[0], body)
}

/// The server-first SCRAM message `user` is challenged with (r=...,s=...,i=...).
fn server_first(port: u16, user: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&startup_message(user)).unwrap();
    let (kind, body) = read_message(&mut s);
    assert_eq!(kind, b'R');
    assert_eq!(&body[..4], &10i32.to_be_bytes(), "AuthenticationSASL");
    let first = b"n,,n=,r=abcdefghijklmnopqrstuvwx";
    let mut body = b"SCRAM-SHA-256\0".to_vec();
    body.extend_from_slice(&(first.len() as i32).to_be_bytes());
    body.extend_from_slice(first);
    let mut msg = vec![b'p'];
    msg.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    msg.extend_from_slice(&body);
    s.write_all(&msg).unwrap();
    let (kind, body) = read_message(&mut s);
    assert_eq!(kind, b'R');
    assert_eq!(
        &body[..4],
        &11i32.to_be_bytes(),
        "AuthenticationSASLContinue"
    );
    String::from_utf8(body[4..].to_vec()).unwrap()
}

fn field<'a>(server_first: &'a str, key: &str) -> &'a str {
    server_first
        .split(',')
        .find_map(|f| f.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {server_first}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_user_looks_like_a_wrong_password() {
    let server = Server::start("scram");
    let port = server.port;
    let (m1, m2, t, e1, e2) = tokio::task::spawn_blocking(move || {
        (
            server_first(port, "mallory"),
            server_first(port, "mallory"),
            server_first(port, "trudy"),
            server_first(port, "eddy"),
            server_first(port, "eddy"),
        )
    })
    .await
    .unwrap();
    // stable per name, different between names, shaped like a real one
    assert_eq!(field(&m1, "s="), field(&m2, "s="));
    assert_ne!(field(&m1, "s="), field(&t, "s="));
    assert_eq!(field(&e1, "s="), field(&e2, "s="));
    assert_eq!(field(&m1, "s=").len(), field(&e1, "s=").len());
    assert_ne!(field(&m1, "s="), "AAAAAAAAAAAAAAAAAAAAAA==");
    assert_eq!(field(&m1, "i="), field(&e1, "i="));
    // nonces are fresh for every exchange
    assert_ne!(field(&e1, "r="), field(&e2, "r="));
    // the failure is the same, word for word but the name
    let wrong = server.connect_as("eddy", "wrong").await.expect_err("wrong");
    let unknown = server
        .connect_as("mallory", "x")
        .await
        .expect_err("unknown");
    let (w, u) = (
        wrong.as_db_error().expect("db error"),
        unknown.as_db_error().expect("db error"),
    );
    assert_eq!(w.code().code(), "28P01");
    assert_eq!(u.code().code(), "28P01");
    assert_eq!(w.severity(), u.severity());
    assert_eq!(
        w.message(),
        "password authentication failed for user \"eddy\""
    );
    assert_eq!(
        u.message(),
        "password authentication failed for user \"mallory\""
    );
    server.connect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_are_limited_per_address() {
    let server = Server::start("scram");
    for i in 0..5 {
        let e = server
            .connect_as("eddy", "wrong")
            .await
            .expect_err("wrong password");
        let db = e.as_db_error().expect("db error");
        assert_eq!(db.code().code(), "28P01", "attempt {i}: {}", db.message());
    }
    // the sixth attempt is refused before any password is checked, even
    // the right one
    let e = server
        .connect_as("eddy", "secret")
        .await
        .expect_err("refused");
    let db = e.as_db_error().expect("db error");
    assert_eq!(db.code().code(), "28000", "{}", db.message());
    assert!(db.message().contains("too many failed"), "{}", db.message());
}

// ---- start-up refusals ----

fn start_output(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let http = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_eddy"));
    cmd.args(["server", "--data-dir"])
        .arg(dir.path())
        .args(["--pg-addr", &format!("127.0.0.1:{port}")])
        .args(["--http-addr", &format!("127.0.0.1:{http}")])
        .args(args)
        .env_remove("EDDY_PASSWORD")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.success(), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return (true, "still running".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn empty_passwords_and_half_a_tls_configuration_are_refused() {
    let (ok, err) = start_output(&["--auth", "scram"], &[("EDDY_PASSWORD", "")]);
    assert!(!ok && err.contains("EDDY_PASSWORD is empty"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[[users]]\nname = \"bob\"\npassword = \"\"\n").unwrap();
    let (ok, err) = start_output(
        &["--auth", "scram", "--config", config.to_str().unwrap()],
        &[("EDDY_PASSWORD", "secret")],
    );
    assert!(
        !ok && err.contains("\"bob\"") && err.contains("empty"),
        "{err}"
    );
    let (ok, err) = start_output(&["--auth", "trust", "--tls-cert", "/nonexistent.pem"], &[]);
    assert!(!ok && err.contains("both a certificate and a key"), "{err}");
    let (ok, err) = start_output(&["--auth", "trust", "--tls-require-remote"], &[]);
    assert!(!ok && err.contains("--tls-require-remote needs"), "{err}");
}

// ---- TLS ----

/// A self-signed certificate and its key, made with the openssl CLI (None,
/// with a notice, where openssl is missing).
fn test_certificate(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if made.is_ok_and(|s| s.success()) {
        Some((cert, key))
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "openssl is needed for the TLS tests"
        );
        println!("notice: openssl is not installed; TLS test skipped");
        None
    }
}

fn start_tls(dir: &Path, extra: &[&str]) -> Option<Server> {
    let (cert, key) = test_certificate(dir)?;
    let mut args = vec![
        "--tls-cert",
        cert.to_str().expect("utf-8"),
        "--tls-key",
        key.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    let data = tempfile::tempdir().expect("tempdir");
    let path = data.path().to_path_buf();
    Some(Server::start_with(Some(data), path, "scram", &[], &args))
}

fn have_psql() -> bool {
    Command::new("psql")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// psql with `sslmode`, running `command`; (success, stdout + stderr).
fn psql(port: u16, sslmode: &str, command: &str) -> (bool, String) {
    run_psql(
        &format!("host=127.0.0.1 port={port} user=eddy dbname=eddy sslmode={sslmode}"),
        Some("secret"),
        command,
    )
}

/// psql with `conninfo` (and `password`, if any), running `command`;
/// (success, stdout + stderr).
fn run_psql(conninfo: &str, password: Option<&str>, command: &str) -> (bool, String) {
    let mut cmd = Command::new("psql");
    cmd.arg(conninfo)
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", command])
        .env_remove("PGPASSWORD")
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::null());
    if let Some(pw) = password {
        cmd.env("PGPASSWORD", pw);
    }
    let out = cmd.output().expect("run psql");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn psql_connects_with_sslmode_require() {
    if !have_psql() {
        println!("notice: psql is not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = start_tls(dir.path(), &["--tls-require-remote"]) else {
        return;
    };
    let (ok, out) = psql(server.port, "require", "SELECT 40 + 2");
    assert!(ok && out.trim() == "42", "{out}");
    let (ok, out) = psql(server.port, "require", "\\conninfo");
    assert!(ok && out.contains("SSL connection"), "{out}");
    assert!(out.contains("TLSv1.3"), "{out}");
    // loopback clients may still come in clear with --tls-require-remote
    let (ok, out) = psql(server.port, "disable", "\\conninfo");
    assert!(ok && !out.contains("SSL connection"), "{out}");
    // a server without TLS: sslmode=require fails, prefer falls back
    let plain = Server::start("scram");
    let (ok, out) = psql(plain.port, "require", "SELECT 1");
    assert!(!ok && out.contains("does not support SSL"), "{out}");
    let (ok, out) = psql(plain.port, "prefer", "SELECT 1");
    assert!(ok && out.trim() == "1", "{out}");
}

#[test]
fn gssenc_request_is_answered_no() {
    let server = Server::start("trust");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = 8i32.to_be_bytes().to_vec();
    req.extend_from_slice(&80877104i32.to_be_bytes());
    s.write_all(&req).unwrap();
    let mut answer = [0u8; 1];
    s.read_exact(&mut answer)
        .expect("an answer to GSSENCRequest");
    assert_eq!(answer[0], b'N');
    // the same connection goes on with a startup message
    s.write_all(&startup_message("eddy")).unwrap();
    let (kind, body) = read_message(&mut s);
    assert_eq!(kind, b'R');
    assert_eq!(&body[..4], &0i32.to_be_bytes(), "AuthenticationOk");
    // and an SSLRequest to a server without TLS gets 'N' as well
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = 8i32.to_be_bytes().to_vec();
    req.extend_from_slice(&80877103i32.to_be_bytes());
    s.write_all(&req).unwrap();
    s.read_exact(&mut answer).expect("an answer to SSLRequest");
    assert_eq!(answer[0], b'N');
}

// ---- drivers over TLS (target/drivers, as in drivers.rs) ----

#[test]
fn psycopg_connects_with_sslmode_require() {
    let Some(python) = tool("venv/bin/python") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = start_tls(dir.path(), &[]) else {
        return;
    };
    let mut cmd = Command::new(python);
    cmd.arg("tests/drivers/tls/psycopg_tls.py");
    run_against(&server, cmd, "psycopg over TLS");
}

#[test]
fn pgjdbc_connects_with_sslmode_require() {
    let Some(jars) = tool("jars") else {
        return;
    };
    let Some(jar) = std::fs::read_dir(&jars)
        .expect("read target/drivers/jars")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "jar"))
    else {
        panic!("no pgjdbc jar in {}", jars.display());
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = start_tls(dir.path(), &[]) else {
        return;
    };
    let mut cmd = Command::new("java");
    cmd.arg("-cp")
        .arg(jar)
        .arg("tests/drivers/tls/JdbcTls.java");
    run_against(&server, cmd, "pgjdbc over TLS");
}

/// Runs openssl with `args` in `dir`; whether it succeeded.
fn openssl(dir: &Path, args: &[&str]) -> bool {
    Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A CA (`<ca>.crt`, `<ca>.key`) and, signed by it, a client certificate
/// for each name (`<name>.crt`, `<name>.key`, the key 0600 as libpq wants
/// it); false where openssl is missing.
fn client_certificates(dir: &Path, ca: &str, names: &[&str]) -> bool {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let (ca_crt, ca_key) = (format!("{ca}.crt"), format!("{ca}.key"));
    let mut args = vec!["req", "-x509", "-days", "1", "-subj"];
    let subject = format!("/CN={ca}");
    args.push(&subject);
    args.extend_from_slice(&ec);
    args.extend_from_slice(&["-keyout", &ca_key, "-out", &ca_crt]);
    if !openssl(dir, &args) {
        return false;
    }
    std::fs::write(
        dir.join("client.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
    )
    .expect("ext file");
    for name in names {
        let (crt, key, csr) = (
            format!("{name}.crt"),
            format!("{name}.key"),
            format!("{name}.csr"),
        );
        let subject = format!("/CN={name}");
        let mut req = vec!["req", "-new", "-subj", &subject];
        req.extend_from_slice(&ec);
        req.extend_from_slice(&["-keyout", &key, "-out", &csr]);
        let signed = openssl(dir, &req)
            && openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    &ca_crt,
                    "-CAkey",
                    &ca_key,
                    "-CAcreateserial",
                    "-days",
                    "1",
                    "-extfile",
                    "client.ext",
                    "-out",
                    &crt,
                ],
            );
        if !signed {
            return false;
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join(&key), std::fs::Permissions::from_mode(0o600))
            .expect("chmod key");
    }
    true
}

/// psql as `user` with `sslmode` and, when given, the client certificate
/// `cert` (`<cert>.crt` / `.key` in `dir`); (success, stdout + stderr).
fn psql_with_certificate(
    port: u16,
    user: &str,
    sslmode: &str,
    dir: &Path,
    cert: Option<&str>,
    command: &str,
) -> (bool, String) {
    let mut conninfo =
        format!("host=127.0.0.1 port={port} user={user} dbname=eddy sslmode={sslmode}");
    if let Some(c) = cert {
        conninfo.push_str(&format!(
            " sslcert={} sslkey={}",
            dir.join(format!("{c}.crt")).display(),
            dir.join(format!("{c}.key")).display()
        ));
    }
    run_psql(&conninfo, None, command)
}

/// The files of a client-certificate test, in a temporary folder: the
/// server's certificate and key (`server.crt`/`.key` of
/// `test_certificate`), and CA `eddyca` with a client certificate for
/// each of `names`. None, with a notice, where psql or openssl cannot run.
fn certificate_files(names: &[&str]) -> Option<(tempfile::TempDir, [String; 3])> {
    if !have_psql() {
        println!("notice: psql is not installed; skipping");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = test_certificate(dir.path())?;
    if !client_certificates(dir.path(), "eddyca", names) {
        assert!(std::env::var_os("CI").is_none(), "openssl could not sign");
        println!("notice: openssl could not make client certificates; skipping");
        return None;
    }
    let text = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let ca = text(&dir.path().join("eddyca.crt"));
    let files = [text(&cert), text(&key), ca];
    Some((dir, files))
}

/// The server with `auth`, `env` and `args`, in a data directory of its
/// own.
fn start_in_tempdir(auth: &str, env: &[(&str, &str)], args: &[&str]) -> Server {
    let data = tempfile::tempdir().expect("tempdir");
    let path = data.path().to_path_buf();
    Server::start_with(Some(data), path, auth, env, args)
}

/// `--auth cert` (PostgreSQL's `cert` method): a client logs in with a
/// certificate issued by a CA of `--tls-client-ca` whose common name is
/// its user, and no password; each way of failing is FATAL 28000 with
/// PostgreSQL's message, and a certificate of another CA fails the TLS
/// handshake.
#[test]
fn client_certificates_log_in_with_auth_cert() {
    let Some((dir, [cert, key, ca])) = certificate_files(&["eddy", "alice", "bob"]) else {
        return;
    };
    let d = dir.path();
    assert!(
        client_certificates(d, "rogueca", &["rogue"]),
        "openssl could not sign"
    );
    // without a client CA, cert authentication cannot start
    let (ok, out) = start_output(&["--auth", "cert"], &[]);
    assert!(!ok && out.contains("--tls-client-ca"), "{out}");
    let server = start_in_tempdir(
        "cert",
        &[],
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            &ca,
        ],
    );
    let port = server.port;
    let (ok, out) = psql_with_certificate(
        port,
        "eddy",
        "require",
        d,
        Some("eddy"),
        "SELECT current_user",
    );
    assert!(ok && out.trim() == "eddy", "{out}");
    let (ok, out) = psql_with_certificate(
        port,
        "eddy",
        "require",
        d,
        Some("eddy"),
        "CREATE ROLE alice LOGIN",
    );
    assert!(ok, "{out}");
    let (ok, out) = psql_with_certificate(
        port,
        "alice",
        "require",
        d,
        Some("alice"),
        "SELECT current_user",
    );
    assert!(ok && out.trim() == "alice", "{out}");
    // another user's certificate
    let (ok, out) = psql_with_certificate(port, "alice", "require", d, Some("eddy"), "SELECT 1");
    assert!(
        !ok && out.contains("certificate authentication failed for user \"alice\""),
        "{out}"
    );
    // no certificate, over TLS or in clear
    for mode in ["require", "disable"] {
        let (ok, out) = psql_with_certificate(port, "eddy", mode, d, None, "SELECT 1");
        assert!(
            !ok && out.contains("connection requires a valid client certificate"),
            "{mode}: {out}"
        );
    }
    // a certificate for a name that is no role
    let (ok, out) = psql_with_certificate(port, "bob", "require", d, Some("bob"), "SELECT 1");
    assert!(!ok && out.contains("role \"bob\" does not exist"), "{out}");
    // a certificate of a CA the server does not trust: no handshake
    let (ok, out) = psql_with_certificate(port, "rogue", "require", d, Some("rogue"), "SELECT 1");
    assert!(!ok && out.to_lowercase().contains("ssl"), "{out}");
    // the server still serves
    let (ok, out) =
        psql_with_certificate(port, "eddy", "require", d, Some("eddy"), "SELECT 40 + 2");
    assert!(ok && out.trim() == "42", "{out}");
}

/// Revokes `name`'s certificate (issued by CA `ca` in `dir`) and writes
/// the CA's revocation list to `<ca>.crl`, with openssl's `ca` command;
/// false where it fails.
fn revoke(dir: &Path, ca: &str, name: &str) -> bool {
    std::fs::write(
        dir.join("ca.cnf"),
        "[ca]\ndefault_ca = eddy\n[eddy]\ndatabase = index.txt\ncrlnumber = crlnumber\n\
         default_md = sha256\ndefault_crl_days = 1\n",
    )
    .expect("ca config");
    std::fs::write(dir.join("index.txt"), "").expect("index");
    std::fs::write(dir.join("crlnumber"), "01\n").expect("crlnumber");
    let (crt, key, crl) = (
        format!("{ca}.crt"),
        format!("{ca}.key"),
        format!("{ca}.crl"),
    );
    let revoked = format!("{name}.crt");
    let with_ca = ["ca", "-config", "ca.cnf", "-keyfile", &key, "-cert", &crt];
    let mut revoke_args = with_ca.to_vec();
    revoke_args.extend_from_slice(&["-revoke", &revoked]);
    let mut list_args = with_ca.to_vec();
    list_args.extend_from_slice(&["-gencrl", "-out", &crl]);
    openssl(dir, &revoke_args) && openssl(dir, &list_args)
}

/// `--tls-crl` (PostgreSQL's `ssl_crl_file`): a client certificate the
/// list revokes fails the TLS handshake, others of the same CA still log
/// in; the option needs `--tls-client-ca`.
#[test]
fn revoked_client_certificates_fail_the_handshake() {
    let Some((dir, [cert, key, ca])) = certificate_files(&["eddy", "carol"]) else {
        return;
    };
    let d = dir.path();
    assert!(revoke(d, "eddyca", "carol"), "openssl could not revoke");
    let crl = d.join("eddyca.crl");
    let crl = crl.to_str().expect("utf-8");
    let tls = ["--tls-cert", &cert, "--tls-key", &key];
    let mut args = vec!["--auth", "cert", "--tls-crl", crl];
    args.extend_from_slice(&tls);
    let (ok, out) = start_output(&args, &[]);
    assert!(!ok && out.contains("--tls-client-ca"), "{out}");
    let mut args = vec!["--tls-client-ca", &ca, "--tls-crl", crl];
    args.extend_from_slice(&tls);
    let server = start_in_tempdir("cert", &[], &args);
    let port = server.port;
    let (ok, out) = psql_with_certificate(
        port,
        "eddy",
        "require",
        d,
        Some("eddy"),
        "CREATE ROLE carol LOGIN",
    );
    assert!(ok, "a certificate the list does not revoke: {out}");
    let (ok, out) = psql_with_certificate(port, "carol", "require", d, Some("carol"), "SELECT 1");
    assert!(!ok && out.contains("revoked"), "{out}");
    let (ok, out) = psql_with_certificate(
        port,
        "eddy",
        "require",
        d,
        Some("eddy"),
        "SELECT current_user",
    );
    assert!(ok && out.trim() == "eddy", "{out}");
}

/// psql as `user` over TLS with `password` and, when given, the client
/// certificate `cert` of `dir`; (success, stdout + stderr).
fn psql_with_certificate_and_password(
    port: u16,
    user: &str,
    password: &str,
    dir: &Path,
    cert: Option<&str>,
) -> (bool, String) {
    let mut conninfo =
        format!("host=127.0.0.1 port={port} user={user} dbname=eddy sslmode=require");
    if let Some(c) = cert {
        conninfo.push_str(&format!(
            " sslcert={} sslkey={}",
            dir.join(format!("{c}.crt")).display(),
            dir.join(format!("{c}.key")).display()
        ));
    }
    run_psql(&conninfo, Some(password), "SELECT current_user")
}

/// `--clientcert verify-full` beside SCRAM (PostgreSQL's
/// `clientcert=verify-full` on a password line): a login needs both the
/// password and a verified certificate naming the user; each missing part
/// is FATAL with PostgreSQL's message. verify-ca with `--auth cert`, and
/// `--clientcert` without `--tls-client-ca`, stop start-up.
#[test]
fn clientcert_verify_full_needs_a_certificate_beside_the_password() {
    let Some((dir, [cert, key, ca])) = certificate_files(&["eddy", "alice"]) else {
        return;
    };
    let d = dir.path();
    let tls = ["--tls-cert", cert.as_str(), "--tls-key", key.as_str()];
    let mut args = tls.to_vec();
    args.extend_from_slice(&["--clientcert", "verify-full"]);
    let (ok, out) = start_output(&args, &[("EDDY_PASSWORD", "eddy-secret")]);
    assert!(!ok && out.contains("--tls-client-ca"), "{out}");
    let mut cert_args = tls.to_vec();
    cert_args.extend_from_slice(&[
        "--tls-client-ca",
        &ca,
        "--auth",
        "cert",
        "--clientcert",
        "verify-ca",
    ]);
    let (ok, out) = start_output(&cert_args, &[]);
    assert!(!ok && out.contains("only accepts verify-full"), "{out}");

    args.extend_from_slice(&["--tls-client-ca", &ca]);
    let server = start_in_tempdir("scram", &[("EDDY_PASSWORD", "eddy-secret")], &args);
    let port = server.port;
    let (ok, out) =
        psql_with_certificate_and_password(port, "eddy", "eddy-secret", d, Some("eddy"));
    assert!(ok && out.trim() == "eddy", "{out}");
    let conninfo = format!(
        "host=127.0.0.1 port={port} user=eddy dbname=eddy sslmode=require sslcert={} sslkey={}",
        d.join("eddy.crt").display(),
        d.join("eddy.key").display()
    );
    let (ok, out) = run_psql(
        &conninfo,
        Some("eddy-secret"),
        "CREATE ROLE alice LOGIN PASSWORD 'alice-secret'",
    );
    assert!(ok, "{out}");
    // the password alone
    let (ok, out) = psql_with_certificate_and_password(port, "eddy", "eddy-secret", d, None);
    assert!(
        !ok && out.contains("connection requires a valid client certificate"),
        "{out}"
    );
    // another user's certificate
    let (ok, out) =
        psql_with_certificate_and_password(port, "alice", "alice-secret", d, Some("eddy"));
    assert!(
        !ok && out
            .contains("certificate validation (clientcert=verify-full) failed for user \"alice\""),
        "{out}"
    );
    // the right certificate, a wrong password
    let (ok, out) = psql_with_certificate_and_password(port, "alice", "wrong", d, Some("alice"));
    assert!(
        !ok && out.contains("password authentication failed for user \"alice\""),
        "{out}"
    );
    let (ok, out) =
        psql_with_certificate_and_password(port, "alice", "alice-secret", d, Some("alice"));
    assert!(ok && out.trim() == "alice", "{out}");
}

/// curl `url` trusting `ca` (if any) as user eddy; (success, body).
fn curl(url: &str, port: u16, ca: Option<&Path>) -> (bool, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "10", "-u", "eddy:secret"])
        .args(["--resolve", &format!("localhost:{port}:127.0.0.1")]);
    if let Some(ca) = ca {
        cmd.arg("--cacert").arg(ca);
    }
    let out = cmd.arg(url).output().expect("curl runs");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// With TLS on, the console (which asks for a role's password) and
/// /metrics are served over HTTPS with the server's certificate, so the
/// password never crosses the network in clear; `--http-plain` keeps
/// plain HTTP, and is refused without TLS.
#[test]
fn the_console_is_served_over_https_when_tls_is_on() {
    if Command::new("curl").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "curl is needed");
        println!("notice: curl is not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = start_tls(dir.path(), &[]) else {
        return;
    };
    let ca = dir.path().join("server.crt");
    let port = server.http_port;
    let https = format!("https://localhost:{port}");
    let (ok, body) = curl(&format!("{https}/api/overview"), port, Some(&ca));
    assert!(ok, "{body}");
    assert!(body.contains("\"https\": true"), "{body}");
    let (ok, body) = curl(&format!("{https}/metrics"), port, Some(&ca));
    assert!(ok && body.contains("eddy_"), "{body}");
    // the certificate is checked as any HTTPS client checks it
    let (ok, body) = curl(&format!("{https}/health"), port, None);
    assert!(!ok, "an untrusted certificate was accepted: {body}");
    // plain HTTP gets no page (the password would cross in clear)
    let (ok, body) = curl(&format!("http://localhost:{port}/api/overview"), port, None);
    assert!(!ok && !body.contains("\"https\""), "{body}");
    // the console still answers after those failed handshakes
    let (ok, body) = curl(&format!("{https}/health"), port, Some(&ca));
    assert!(ok && body.trim() == "ok", "{ok} {body}");
    drop(server);

    let plain = start_tls(dir.path(), &["--http-plain"]).expect("started before");
    let port = plain.http_port;
    let (ok, body) = curl(&format!("http://localhost:{port}/api/overview"), port, None);
    assert!(ok && body.contains("\"https\": false"), "{body}");
    drop(plain);
    let (ok, out) = start_output(&["--http-plain"], &[("EDDY_PASSWORD", "secret")]);
    assert!(
        !ok && out.contains("--http-plain needs --tls-cert"),
        "{out}"
    );
}
