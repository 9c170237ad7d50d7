//! Real PostgreSQL drivers against the real server: psycopg 3, psycopg2,
//! asyncpg, node-postgres and pgjdbc each run a script from `tests/drivers/`
//! (transactions, savepoints, 25P02, rollback on exception and disconnect,
//! exact numeric and bytea values, concurrent increments) against a fresh
//! `eddy server`. The same scripts pass against PostgreSQL 15
//! (`scripts/ci/drivers-against-postgres.sh`), so their expectations are
//! PostgreSQL's.
//!
//! The drivers come from the package registries through
//! `scripts/ci/install-drivers.sh` into `target/drivers/`; this test runs the
//! script once per test binary. Where the install fails (no network, no
//! python3/npm/mvn) the tests fail in CI (`CI` or `EDDY_REQUIRE_DRIVERS` set)
//! and print a notice and pass elsewhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod common;
use common::*;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the install script once; true when it succeeded.
fn drivers_installed() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/ci/install-drivers.sh"))
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => true,
            Ok(o) => {
                eprintln!(
                    "install-drivers.sh failed:\n{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                );
                false
            }
            Err(e) => {
                eprintln!("cannot run install-drivers.sh: {e}");
                false
            }
        }
    })
}

/// Whether a missing driver must fail the test rather than skip it.
fn required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("EDDY_REQUIRE_DRIVERS").is_some()
}

/// `Some(path)` when `path` exists under target/drivers; otherwise fails (CI)
/// or returns None after a notice.
fn tool(relative: &str) -> Option<PathBuf> {
    let path = repo_root().join("target/drivers").join(relative);
    if drivers_installed() && path.exists() {
        return Some(path);
    }
    assert!(
        !required(),
        "{} is missing and CI requires the driver tests",
        path.display()
    );
    eprintln!(
        "notice: {} missing; driver test skipped (run scripts/ci/install-drivers.sh)",
        path.display()
    );
    None
}

/// Runs `cmd` with the server's port in its environment, bounded in time,
/// and asserts that it succeeded.
fn run_against(server: &Server, mut cmd: Command, what: &str) {
    cmd.current_dir(repo_root())
        .env("EDDY_PORT", server.port.to_string())
        .env("EDDY_USER", "eddy")
        .env("EDDY_PASSWORD", "secret")
        .env("EDDY_DB", "eddy")
        .env_remove("EDDY_REFERENCE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
    let out = wait_bounded(child, Duration::from_secs(240), what);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains(": ok"),
        "{what} did not report ok:\n{stdout}\n{stderr}"
    );
}

fn wait_bounded(mut child: std::process::Child, limit: Duration, what: &str) -> Output {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("collect output");
                panic!(
                    "{what} ran past {limit:?}:\n{}\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
    child.wait_with_output().expect("collect output")
}

fn python_script(script: &str) {
    let Some(python) = tool("venv/bin/python") else {
        return;
    };
    let server = Server::start("scram");
    let mut cmd = Command::new(python);
    cmd.arg(format!("tests/drivers/{script}"));
    run_against(&server, cmd, script);
}

#[test]
fn sqlalchemy_orm_serial_ids_returning_and_rollback() {
    python_script("sqlalchemy_orm.py");
}

#[test]
fn asyncpg_pool_resets_and_advisory_locks() {
    python_script("asyncpg_pool.py");
}

#[test]
fn server_side_cursors_psycopg2_and_psycopg3() {
    python_script("server_cursors.py");
}

#[test]
fn psycopg3_transactions_and_values() {
    python_script("psycopg3_txn.py");
}

#[test]
fn psycopg2_transactions_and_values() {
    python_script("psycopg2_txn.py");
}

#[test]
fn asyncpg_transactions_and_concurrent_increments() {
    python_script("asyncpg_txn.py");
}

#[test]
fn node_postgres_transactions() {
    let Some(modules) = tool("node/node_modules") else {
        return;
    };
    let server = Server::start("scram");
    let mut cmd = Command::new("node");
    cmd.arg("tests/drivers/node_pg_txn.js")
        .env("NODE_PATH", modules);
    run_against(&server, cmd, "node-postgres");
}

#[test]
fn pgjdbc_savepoints_and_rollback() {
    let Some(jars) = tool("jars") else {
        return;
    };
    let jar = std::fs::read_dir(&jars)
        .expect("read target/drivers/jars")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "jar"))
        .expect("pgjdbc jar in target/drivers/jars");
    let server = Server::start("scram");
    let mut cmd = Command::new("java");
    cmd.arg("-cp").arg(jar).arg("tests/drivers/JdbcTxn.java");
    run_against(&server, cmd, "pgjdbc");
}
