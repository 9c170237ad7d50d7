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
//!
//! And the other way: a pg_dump of Eddy (its backup with PostgreSQL's
//! tools) restores into a new Eddy as the same database.

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

/// A dump's lines without the `\restrict` pair, whose key is random per
/// run, sorted: two dumps of the same database have the same lines, though
/// COPY's rows may come in another order (tables are sharded).
fn dump_lines(dump: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = dump
        .lines()
        .filter(|l| !l.starts_with("\\restrict") && !l.starts_with("\\unrestrict"))
        .collect();
    lines.sort_unstable();
    lines
}

/// Restores `file` into `srv` with psql in one transaction, stopping at
/// the first error.
fn psql_restore(srv: &Server, file: &std::path::Path) {
    let (ok, _, err) = run(
        "psql",
        srv,
        &[
            "-q",
            "-1",
            "-v",
            "ON_ERROR_STOP=1",
            "-f",
            file.to_str().expect("utf-8 path"),
        ],
    );
    assert!(
        ok && err.is_empty(),
        "psql restore of {} failed:\n{err}",
        file.display()
    );
}

/// A new Eddy with `dump` (Eddy's pg_dump, kept in `work`) restored by
/// psql in one transaction, whose own pg_dump is the same dump.
fn restored_as_it_was(dump: &str, work: &std::path::Path) -> Server {
    let plain = work.join("eddy.sql");
    std::fs::write(&plain, dump).expect("write the dump");
    let restored = Server::start("trust");
    psql_restore(&restored, &plain);
    let (ok, again, err) = run("pg_dump", &restored, &[]);
    assert!(
        ok && err.is_empty(),
        "pg_dump of the restored Eddy failed:\n{err}"
    );
    assert_eq!(
        dump_lines(&again),
        dump_lines(dump),
        "the restored database dumps differently"
    );
    restored
}

/// The checks' output on `srv` equals PostgreSQL's after its own restore.
fn assert_checks(srv: &Server) {
    assert_checks_of(srv, "shop");
}

/// `assert_checks` of fixture `name` (`<name>-checks.sql`, `.expected`).
fn assert_checks_of(srv: &Server, name: &str) {
    let checks = dumps().join(format!("{name}-checks.sql"));
    let (ok, out, err) = run(
        "psql",
        srv,
        &["-A", "-f", checks.to_str().expect("utf-8 path")],
    );
    assert!(ok, "checks failed: {err}");
    let expected = std::fs::read_to_string(dumps().join(format!("{name}-checks.expected")))
        .expect("expected output");
    // psql names the file in its errors by its path, which
    // scripts/ci/make-dump-fixture.sh gives relative to the repository
    let file = format!("{name}-checks.sql:");
    let err: String = err
        .lines()
        .map(|l| match (l.strip_prefix("psql:"), l.find(&file)) {
            (Some(_), Some(at)) => format!("psql:tests/dumps/{}\n", &l[at..]),
            _ => format!("{l}\n"),
        })
        .collect();
    assert_eq!(format!("{out}{err}"), expected, "the checks' output");
}

/// A PostgreSQL database that keeps its tables in schemas of its own
/// (`schemas-schema.sql`) moves into Eddy with its pg_dump and reads and
/// writes as it did in PostgreSQL; Eddy's own pg_dump of it restores into
/// a new Eddy as the same database, and `pg_dump -n` dumps one schema.
#[test]
fn a_database_with_schemas_moves_in_and_backs_up_with_pg_dump() {
    if !have_psql() {
        return;
    }
    let original = Server::start("trust");
    psql_restore(&original, &dumps().join("schemas-pg15.sql"));
    let (ok, dump, err) = run("pg_dump", &original, &[]);
    assert!(ok && err.is_empty(), "pg_dump of Eddy failed:\n{err}");
    for expected in [
        "CREATE SCHEMA inventory;",
        "COMMENT ON SCHEMA inventory IS 'stock and suppliers';",
        "CREATE TABLE inventory.parts (",
        "ALTER TABLE ONLY inventory.suppliers ALTER COLUMN id SET DEFAULT nextval('inventory.suppliers_id_seq'::regclass);",
        "ADD CONSTRAINT invoices_part_id_fkey FOREIGN KEY (part_id) REFERENCES inventory.parts(id);",
        "CREATE INDEX parts_label_idx ON inventory.parts USING btree (label);",
        "SELECT pg_catalog.setval('billing.invoice_no', 1002, true);",
        "CREATE VIEW billing.part_totals AS",
    ] {
        assert!(dump.contains(expected), "the dump lacks {expected:?}:\n{dump}");
    }
    let (ok, one, err) = run("pg_dump", &original, &["-n", "inventory"]);
    assert!(ok && err.is_empty(), "pg_dump -n of Eddy failed:\n{err}");
    assert!(one.contains("CREATE TABLE inventory.parts ("), "{one}");
    assert!(!one.contains("billing."), "{one}");
    assert_checks_of(&original, "schemas");

    let work = tempfile::tempdir().expect("tempdir");
    let restored = restored_as_it_was(&dump, work.path());
    assert_checks_of(&restored, "schemas");
}

/// A backup of Eddy with PostgreSQL's own tools: pg_dump of an Eddy
/// database (the shop, restored from PostgreSQL's dump) writes a script
/// that restores into a new Eddy in one transaction, where pg_dump writes
/// the same dump again and the shop reads and writes as PostgreSQL's did;
/// the custom format restores likewise with pg_restore, and so does the
/// directory format written by parallel workers (`pg_dump -j`), and a
/// schema-only dump followed by a data-only one.
#[test]
fn a_pg_dump_of_eddy_restores_into_eddy_as_it_was() {
    if !have_psql() {
        return;
    }
    let original = Server::start("trust");
    psql_restore(&original, &dumps().join("shop-pg15.sql"));
    let (ok, dump, err) = run("pg_dump", &original, &[]);
    assert!(ok && err.is_empty(), "pg_dump of Eddy failed:\n{err}");
    // what makes it restorable: qualified names under pg_dump's empty
    // search path, serial defaults set after their sequences exist, views
    // after their tables, PostgreSQL's spelling of CHECKs
    for expected in [
        "ALTER TABLE ONLY public.customers ALTER COLUMN id SET DEFAULT nextval('public.customers_id_seq'::regclass);",
        "CREATE VIEW public.big_spenders AS",
        "FROM (((public.customers c JOIN public.orders o",
        "ADD CONSTRAINT orders_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES public.customers(id) ON DELETE CASCADE;",
        "CONSTRAINT customers_balance_check CHECK ((balance >= ('-1000'::integer)::numeric))",
        "ALTER TABLE public.products ALTER COLUMN sku ADD GENERATED ALWAYS AS IDENTITY (",
        "SELECT pg_catalog.setval('public.invoice_numbers', 5010, true);",
        "CREATE UNIQUE INDEX products_uid_idx ON public.products USING btree (uid);",
        "COMMENT ON COLUMN public.customers.email IS 'unique, lower case';",
    ] {
        assert!(dump.contains(expected), "the dump lacks {expected:?}:\n{dump}");
    }
    // one table by pattern (`OPERATOR(pg_catalog.=) ANY (array[...])`)
    let (ok, one, err) = run("pg_dump", &original, &["-t", "cust*"]);
    assert!(ok && err.is_empty(), "pg_dump -t of Eddy failed:\n{err}");
    assert!(one.contains("CREATE TABLE public.customers ("), "{one}");
    assert!(!one.contains("CREATE TABLE public.orders ("), "{one}");

    let work = tempfile::tempdir().expect("tempdir");
    let restored = restored_as_it_was(&dump, work.path());
    assert_checks(&restored);

    let custom = work.path().join("eddy.dump");
    let (ok, _, err) = run(
        "pg_dump",
        &original,
        &["-Fc", "-f", custom.to_str().expect("utf-8 path")],
    );
    assert!(ok && err.is_empty(), "pg_dump -Fc of Eddy failed:\n{err}");
    let from_custom = Server::start("trust");
    let (ok, _, err) = run(
        "pg_restore",
        &from_custom,
        &[
            "--exit-on-error",
            "--single-transaction",
            custom.to_str().expect("utf-8 path"),
        ],
    );
    assert!(
        ok && err.is_empty(),
        "pg_restore of Eddy's dump failed:\n{err}"
    );
    assert_checks(&from_custom);
    // restored again over itself (the checks changed it): `--clean` drops
    // every object first, primary keys included, statement by statement
    let (ok, _, err) = run(
        "pg_restore",
        &from_custom,
        &[
            "--clean",
            "--if-exists",
            "--exit-on-error",
            custom.to_str().expect("utf-8 path"),
        ],
    );
    assert!(ok && err.is_empty(), "pg_restore --clean failed:\n{err}");
    assert_checks(&from_custom);
    // and in one transaction: each table and sequence is dropped and
    // created again under its name inside the block
    let (ok, _, err) = run(
        "pg_restore",
        &from_custom,
        &[
            "--clean",
            "--single-transaction",
            "--exit-on-error",
            custom.to_str().expect("utf-8 path"),
        ],
    );
    assert!(
        ok && err.is_empty(),
        "pg_restore --clean --single-transaction failed:\n{err}"
    );
    let (ok, again, err) = run("pg_dump", &from_custom, &[]);
    assert!(
        ok && err.is_empty(),
        "pg_dump after the restore failed:\n{err}"
    );
    assert_eq!(
        dump_lines(&again),
        dump_lines(&dump),
        "restored in one transaction, the database dumps as the original"
    );
    assert_checks(&from_custom);

    // in parallel: the workers read the leader's exported snapshot
    let directory = work.path().join("eddy.dir");
    let directory = directory.to_str().expect("utf-8 path");
    let (ok, _, err) = run("pg_dump", &original, &["-Fd", "-j", "2", "-f", directory]);
    assert!(ok && err.is_empty(), "pg_dump -j 2 of Eddy failed:\n{err}");
    let from_directory = Server::start("trust");
    let (ok, _, err) = run(
        "pg_restore",
        &from_directory,
        &["--exit-on-error", directory],
    );
    assert!(
        ok && err.is_empty(),
        "pg_restore of Eddy's parallel dump failed:\n{err}"
    );
    assert_checks(&from_directory);

    // the definitions, then the data alone: COPY into tables whose foreign
    // keys already exist checks each row against its referenced row
    let (ok, definitions, err) = run("pg_dump", &original, &["--schema-only"]);
    assert!(ok && err.is_empty(), "pg_dump --schema-only failed:\n{err}");
    let (ok, data, err) = run("pg_dump", &original, &["--data-only"]);
    assert!(ok && err.is_empty(), "pg_dump --data-only failed:\n{err}");
    assert!(!data.contains("CREATE TABLE"), "{data}");
    let (definitions_file, data_file) = (work.path().join("ddl.sql"), work.path().join("data.sql"));
    std::fs::write(&definitions_file, definitions).expect("write the definitions");
    std::fs::write(&data_file, data).expect("write the data");
    let in_two_steps = Server::start("trust");
    psql_restore(&in_two_steps, &definitions_file);
    psql_restore(&in_two_steps, &data_file);
    assert_checks(&in_two_steps);
}
