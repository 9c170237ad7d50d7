//! A PostgreSQL database moved into Eddy the way users move one: pg_dump's
//! plain SQL output (tests/dumps/shop-pg15.sql, made by PostgreSQL 15's
//! pg_dump from tests/dumps/shop-schema.sql) restored with psql, and its
//! custom format (shop-pg15.dump) with pg_restore, then read and written
//! with psql. Everything the restore writes (an empty
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

/// psql (and pg_restore) are PostgreSQL's client package, which `.ci/run`
/// installs; in CI their absence fails the test.
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

/// `program` (psql or pg_restore) against `srv` with `args`; (success,
/// stdout, stderr).
fn run(program: &str, srv: &Server, args: &[&str]) -> (bool, String, String) {
    let mut cmd = Command::new(program);
    if program == "psql" {
        cmd.arg("-X");
    }
    let out = cmd
        .args(["-h", "127.0.0.1", "-U", "eddy", "-d", "eddy"])
        .args(["-p", &srv.port.to_string()])
        .args(args)
        .env_remove("PGOPTIONS")
        .env_remove("PGTZ")
        .env("PGPASSWORD", "secret")
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// How the dump goes in.
enum Restore {
    /// `psql -f shop-pg15.sql`, in one transaction or not.
    Psql { single_transaction: bool },
    /// `pg_restore shop-pg15.dump` (the custom format), likewise.
    PgRestore { single_transaction: bool },
}

fn restore_and_check(how: Restore) {
    let srv = Server::start("trust");
    let plain = dumps().join("shop-pg15.sql");
    let custom = dumps().join("shop-pg15.dump");
    let (program, mut args, one) = match how {
        Restore::Psql { single_transaction } => (
            "psql",
            vec![
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-f",
                plain.to_str().expect("utf-8 path"),
            ],
            single_transaction.then_some("-1"),
        ),
        Restore::PgRestore { single_transaction } => (
            "pg_restore",
            vec!["--exit-on-error", custom.to_str().expect("utf-8 path")],
            single_transaction.then_some("--single-transaction"),
        ),
    };
    args.extend(one);
    let (ok, _, err) = run(program, &srv, &args);
    assert!(ok && err.is_empty(), "{program} failed:\n{err}");

    let checks = dumps().join("shop-checks.sql");
    let (ok, out, err) = run(
        "psql",
        &srv,
        &["-A", "-f", checks.to_str().expect("utf-8 path")],
    );
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
        restore_and_check(Restore::Psql {
            single_transaction: true,
        });
    }
}

#[test]
fn a_pg_dump_restores_statement_by_statement_and_reads_as_in_postgres() {
    if have_psql() {
        restore_and_check(Restore::Psql {
            single_transaction: false,
        });
    }
}

/// pg_restore sends what psql would, but also a comment-only query (the
/// dump's header: PostgreSQL's empty query) and COPY data with its `\.`
/// line and the blank lines after it.
#[test]
fn a_custom_format_dump_restores_with_pg_restore() {
    if have_psql() {
        restore_and_check(Restore::PgRestore {
            single_transaction: false,
        });
        restore_and_check(Restore::PgRestore {
            single_transaction: true,
        });
    }
}
