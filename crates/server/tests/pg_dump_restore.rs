//! A PostgreSQL database moved into Eddy the way users move one: pg_dump's
//! plain SQL output (tests/dumps/shop-pg15.sql, made by PostgreSQL 15's
//! pg_dump from tests/dumps/shop-schema.sql) restored with psql, then
//! read and written with psql. Everything the restore writes (an empty
//! search_path, ownership, sequences owned by columns, identities added to
//! columns, COPY into tables with CHECK constraints, primary keys, unique
//! and foreign keys added after the data, setval) must succeed, and
//! tests/dumps/shop-checks.sql must print exactly what PostgreSQL printed
//! for the same restore (tests/dumps/shop-checks.expected, made by
//! scripts/ci/make-dump-fixture.sh).

use std::path::PathBuf;
use std::process::{Command, Stdio};

mod common;
use common::Server;

fn dumps() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/dumps")
}

/// psql is part of PostgreSQL's client package, which `.ci/run` installs;
/// in CI its absence fails the test.
fn have_psql() -> bool {
    let found = Command::new("psql")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found || !common::drivers::required(),
        "psql is not installed (postgresql-client)"
    );
    found
}

/// psql against `srv` with `args`; (success, stdout, stderr).
fn psql(srv: &Server, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("psql")
        .args(["-X", "-h", "127.0.0.1", "-U", "eddy", "-d", "eddy"])
        .args(["-p", &srv.port.to_string()])
        .args(args)
        .env_remove("PGOPTIONS")
        .env_remove("PGTZ")
        .env("PGPASSWORD", "secret")
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::null())
        .output()
        .expect("run psql");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn restore_and_check(single_transaction: bool) {
    let srv = Server::start("trust");
    let dump = dumps().join("shop-pg15.sql");
    let dump = dump.to_str().expect("utf-8 path");
    let mut args = vec!["-q", "-v", "ON_ERROR_STOP=1", "-f", dump];
    if single_transaction {
        args.push("-1");
    }
    let (ok, _, err) = psql(&srv, &args);
    assert!(ok && err.is_empty(), "restore failed:\n{err}");

    let checks = dumps().join("shop-checks.sql");
    let (ok, out, err) = psql(&srv, &["-A", "-f", checks.to_str().expect("utf-8 path")]);
    assert!(ok, "checks failed: {err}");
    let expected =
        std::fs::read_to_string(dumps().join("shop-checks.expected")).expect("expected output");
    let got = format!("{out}{err}");
    if got != expected {
        for (i, (g, e)) in got.lines().zip(expected.lines()).enumerate() {
            assert_eq!(g, e, "line {} of the checks' output", i + 1);
        }
        assert_eq!(got, expected, "the checks' output");
    }
}

#[test]
fn a_pg_dump_restores_in_one_transaction_and_reads_as_in_postgres() {
    if have_psql() {
        restore_and_check(true);
    }
}

#[test]
fn a_pg_dump_restores_statement_by_statement_and_reads_as_in_postgres() {
    if have_psql() {
        restore_and_check(false);
    }
}
