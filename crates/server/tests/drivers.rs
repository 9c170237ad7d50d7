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

use std::process::Command;

mod common;
use common::drivers::*;
use common::*;

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

/// SQLAlchemy's Inspector (columns with defaults, identity and comments,
/// primary key, indexes, unique constraints, table comment), MetaData
/// reflection and pandas' read_sql_table, answered as PostgreSQL answers.
#[test]
fn sqlalchemy_inspector_reflection_and_pandas_read_sql_table() {
    python_script("sqlalchemy_inspector.py");
}

/// SQLAlchemy models kept in schemas of their own (`__table_args__ =
/// {"schema": ...}`): CreateSchema / DropSchema, create_all, ORM writes and
/// a relationship across schemas, and the Inspector's reflection of the
/// schemas' tables, keys and indexes, answered as PostgreSQL answers.
#[test]
fn sqlalchemy_models_in_schemas() {
    python_script("sqlalchemy_schemas.py");
}

/// SQLAlchemy's `ForeignKey(..., use_alter=True)` between two tables that
/// reference each other: `create_all` adds the constraint by ALTER TABLE
/// ... ADD CONSTRAINT ... FOREIGN KEY (issue 14), it is enforced on both
/// tables, and `drop_all` drops it by DROP CONSTRAINT first.
#[test]
fn sqlalchemy_use_alter_foreign_key_cycle() {
    python_script("sqlalchemy_alter_fk.py");
}

/// Alembic runs all pending migrations in one transaction: a failing one
/// rolls back the tables and columns of the others (transactional DDL).
#[test]
fn alembic_migrations_roll_back_together() {
    python_script("alembic_migrations.py");
}

/// Django 5: `migrate` for its own apps and a small one (deferred foreign
/// keys, `varchar_pattern_ops` indexes, DROP COLUMN, ALTER COLUMN TYPE),
/// then the ORM: annotations grouped by the key, many-to-many `add` (ON
/// CONFLICT DO NOTHING over a UNIQUE index), `bulk_update`, atomic blocks
/// and savepoints, a deferred foreign key failing at COMMIT.
#[test]
fn django_migrations_and_orm() {
    python_script("django_orm.py");
}

#[test]
fn asyncpg_pool_resets_and_advisory_locks() {
    python_script("asyncpg_pool.py");
}

/// asyncpg fetches and binds arrays of every stored element type (its
/// type introspection needs the catalogs' oid columns typed `oid`) and
/// reads oid columns as oids.
#[test]
fn asyncpg_arrays_and_oids() {
    python_script("asyncpg_types.py");
}

#[test]
fn server_side_cursors_psycopg2_and_psycopg3() {
    python_script("server_cursors.py");
}

/// psycopg 3's `notifies()` and asyncpg's `add_listener` on idle
/// connections (LISTEN / NOTIFY, `tests/drivers/listen_notify.py`).
#[test]
fn psycopg3_and_asyncpg_listen_notify() {
    python_script("listen_notify.py");
}

/// json_agg, jsonb_agg, jsonb_object_agg, to_json, row_to_json, jsonb_set
/// and `#>>` results come back through psycopg 3 as Python lists, dicts
/// and strings (json 114 / jsonb 3802 decoded by the driver), in text and
/// binary results (issue 14).
#[test]
fn psycopg3_decodes_json_functions() {
    python_script("psycopg_json.py");
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

/// Runs a single-file pgjdbc program from `tests/drivers/`.
fn pgjdbc_program(program: &str) {
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
    cmd.arg("-cp")
        .arg(jar)
        .arg(format!("tests/drivers/{program}"));
    run_against(&server, cmd, program);
}

#[test]
fn pgjdbc_savepoints_and_rollback() {
    pgjdbc_program("JdbcTxn.java");
}

/// pgjdbc's DatabaseMetaData (getTables, getColumns, getPrimaryKeys,
/// getIndexInfo, getImportedKeys/getExportedKeys/getCrossReference,
/// getSchemas, getTypeInfo, getCatalogs) over a composite primary key,
/// secondary and unique indexes and foreign keys, answered as PostgreSQL
/// 15 answers (`tests/drivers/JdbcMetadata.java`).
/// pgjdbc in a JVM whose zone is Europe/Berlin: the startup TimeZone, and
/// Timestamp, LocalDateTime, OffsetDateTime and dates as PostgreSQL 15
/// gives them (`tests/drivers/JdbcTimeZone.java`).
#[test]
fn pgjdbc_in_a_time_zone() {
    pgjdbc_program("JdbcTimeZone.java");
}

/// psycopg 3 and asyncpg in session time zones: startup options and SET
/// reported back, naive and aware datetimes, prepared statements across a
/// change of zone (`tests/drivers/time_zones.py`).
#[test]
fn psycopg3_and_asyncpg_time_zones() {
    python_script("time_zones.py");
}

/// Settings in the startup message (libpq options, asyncpg's
/// server_settings) applied as SET applies them, and a setting Eddy cannot
/// apply ending the connection with FATAL (`tests/drivers/startup_settings.py`).
#[test]
fn startup_settings_through_libpq_and_asyncpg() {
    python_script("startup_settings.py");
}

#[test]
fn pgjdbc_database_metadata() {
    pgjdbc_program("JdbcMetadata.java");
}
