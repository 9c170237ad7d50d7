//! Result types are PostgreSQL's (issue 12, "Result shape differs"): integer
//! literals are int4 when they fit, `avg` of integers and `sum(int8)` are
//! numeric; and prepared queries (planned once, `session/prepared.rs`) give
//! the answers the same statement gives as text, on fresh data each time.
//!
//! Every expectation is PostgreSQL 15's answer. Set `EDDY_WIRE_VALUES_PG` to
//! a libpq connection string (`host=127.0.0.1 port=5432 user=postgres
//! dbname=postgres`) to run the same assertions against PostgreSQL too.

use tokio_postgres::types::Type;
use tokio_postgres::{Client, SimpleQueryMessage};

mod common;
use common::wire::{on_servers, Text};

async fn exec(c: &Client, sql: &str) {
    if let Err(e) = c.batch_execute(sql).await {
        panic!("{sql}: {e:?}");
    }
}

/// The result column types a statement is described with.
async fn must_describe(c: &Client, sql: &str) -> Vec<Type> {
    let stmt = c
        .prepare(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    stmt.columns().iter().map(|c| c.type_().clone()).collect()
}

/// The first row of a simple query, as text.
async fn first_row(c: &Client, sql: &str) -> Vec<String> {
    let msgs = c
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    msgs.iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(
                (0..r.len())
                    .map(|i| r.get(i).unwrap_or("NULL").to_string())
                    .collect(),
            ),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{sql}: no row"))
}

/// An integer column of either width, as i64.
fn int_at(row: &tokio_postgres::Row, i: usize) -> i64 {
    match row.columns()[i].type_() {
        &Type::INT4 => i64::from(row.get::<_, i32>(i)),
        &Type::INT8 => row.get::<_, i64>(i),
        other => panic!("column {i} is {other}, not an integer"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integer_literals_are_int4_when_they_fit() {
    on_servers(|c| async move {
        assert_eq!(
            must_describe(&c, "SELECT 1, 2147483648, 1 + 1, -2147483648, 7 / 2").await,
            [Type::INT4, Type::INT8, Type::INT4, Type::INT4, Type::INT4]
        );
        assert_eq!(
            must_describe(&c, "SELECT x FROM (VALUES (1), (2)) AS v(x)").await,
            [Type::INT4]
        );
        assert_eq!(
            must_describe(&c, "SELECT 1 UNION ALL SELECT 2147483648").await,
            [Type::INT8]
        );
        let e = c
            .batch_execute("SELECT 2147483647 + 1")
            .await
            .expect_err("int4 overflow");
        assert_eq!(e.code().map(|s| s.code()), Some("22003"));
        assert_eq!(
            first_row(&c, "SELECT 2147483647 + 1::bigint, 2147483648").await,
            ["2147483648", "2147483648"]
        );
        exec(&c, "DROP TABLE IF EXISTS rt_ints").await;
        exec(
            &c,
            "CREATE TABLE rt_ints (id INT PRIMARY KEY, i INT, b BIGINT, s SMALLINT)",
        )
        .await;
        exec(&c, "INSERT INTO rt_ints VALUES (1, 1, 1, 1), (2, 2, 2, 2)").await;
        assert_eq!(
            must_describe(&c, "SELECT i + 1, b + 1, s + 1 FROM rt_ints").await,
            [Type::INT4, Type::INT8, Type::INT4]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integer_averages_and_bigint_sums_are_numeric() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS rt_aggs").await;
        exec(
            &c,
            "CREATE TABLE rt_aggs (id INT PRIMARY KEY, i INT, b BIGINT)",
        )
        .await;
        exec(
            &c,
            "INSERT INTO rt_aggs VALUES (1, 1, 9223372036854775807), (2, 2, 9223372036854775807)",
        )
        .await;
        let sql = "SELECT sum(i), sum(b), avg(i), count(*) FROM rt_aggs";
        assert_eq!(
            must_describe(&c, sql).await,
            [Type::INT8, Type::NUMERIC, Type::NUMERIC, Type::INT8]
        );
        // sum(int8) does not wrap: it is exact
        assert_eq!(
            first_row(&c, sql).await,
            ["3", "18446744073709551614", "1.5000000000000000", "2"]
        );
        // (PostgreSQL's display scale follows the value: avg(1) is
        // 1.00000000000000000000; Eddy's numeric average has 16 places)
        assert_eq!(
            must_describe(&c, "SELECT avg(i) OVER (ORDER BY id) FROM rt_aggs").await,
            [Type::NUMERIC]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_queries_answer_as_text_queries_do() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS rt_prep").await;
        exec(
            &c,
            "CREATE TABLE rt_prep (id INT PRIMARY KEY, v INT, d NUMERIC(10,2))",
        )
        .await;
        exec(
            &c,
            "INSERT INTO rt_prep VALUES (1, 10, 0.05), (2, 20, 0.06)",
        )
        .await;
        let count = c
            .prepare("SELECT count(*) FROM rt_prep WHERE v >= $1")
            .await
            .expect("prepare");
        assert_eq!(count.params(), [Type::INT4]);
        let n = |r: Vec<tokio_postgres::Row>| int_at(&r[0], 0);
        assert_eq!(n(c.query(&count, &[&15i32]).await.expect("run")), 1);
        exec(&c, "INSERT INTO rt_prep VALUES (3, 30, 0.07)").await;
        // the statement sees rows written after it was prepared
        assert_eq!(n(c.query(&count, &[&15i32]).await.expect("run")), 2);
        assert_eq!(n(c.query(&count, &[&0i32]).await.expect("run")), 3);

        // a NUMERIC parameter with more decimal places than the column
        let below = c
            .prepare_typed(
                "SELECT count(*) FROM rt_prep WHERE d < $1",
                &[Type::NUMERIC],
            )
            .await
            .expect("prepare");
        assert_eq!(n(c.query(&below, &[&Text("0.065")]).await.expect("run")), 2);
        assert_eq!(n(c.query(&below, &[&Text("0.06")]).await.expect("run")), 1);

        // a parameter among a table function's arguments
        let series = c
            .prepare("SELECT * FROM generate_series(1, $1)")
            .await
            .expect("generate_series(1, $1)");
        let rows = c.query(&series, &[&Text("3")]).await.expect("run");
        let got: Vec<i64> = rows.iter().map(|r| int_at(r, 0)).collect();
        assert_eq!(got, [1, 2, 3]);
    })
    .await;
}

/// What the extended protocol's Describe announces is what Execute sends
/// (found by running `tests/slt` over the extended protocol, `slt.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_protocol_describes_what_executes() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS rt_desc").await;
        exec(&c, "CREATE TABLE rt_desc (id INT PRIMARY KEY, qty INT)").await;

        // RETURNING is described with the types it runs with: int4 * 2
        // is int4 (it was described as int8 and sent as int4)
        let ins = "INSERT INTO rt_desc VALUES (1, 7) RETURNING qty * 2 AS doubled";
        assert_eq!(must_describe(&c, ins).await, [Type::INT4]);
        let rows = c.query(ins, &[]).await.expect("INSERT RETURNING");
        assert_eq!(rows[0].get::<_, i32>(0), 14);

        // SQL-level EXECUTE describes its statement's columns (it was
        // NoData, then rows came)
        exec(&c, "DEALLOCATE ALL").await;
        exec(
            &c,
            "PREPARE rt_get AS SELECT id, qty FROM rt_desc WHERE id = $1",
        )
        .await;
        assert_eq!(
            must_describe(&c, "EXECUTE rt_get (1)").await,
            [Type::INT4, Type::INT4]
        );
        let rows = c.query("EXECUTE rt_get (1)", &[]).await.expect("EXECUTE");
        assert_eq!(rows[0].get::<_, i32>(1), 7);

        // a PREPARE's $n are its statement's, not the PREPARE's own
        // parameters (Parse described one; Execute without it failed)
        let prep = c
            .prepare("PREPARE rt_next (int) AS SELECT $1 + 1")
            .await
            .expect("prepare PREPARE");
        assert!(prep.params().is_empty());
        c.execute(&prep, &[])
            .await
            .expect("PREPARE over Bind/Execute");
        let rows = c.query("EXECUTE rt_next (41)", &[]).await.expect("EXECUTE");
        assert_eq!(rows[0].get::<_, i32>(0), 42);

        // SHOW is described with the columns it sends
        let show = must_describe(&c, "SHOW ALL").await;
        let msgs = c.simple_query("SHOW ALL").await.expect("SHOW ALL");
        let width = msgs.iter().find_map(|m| match m {
            SimpleQueryMessage::RowDescription(cols) => Some(cols.len()),
            _ => None,
        });
        assert_eq!(Some(show.len()), width, "SHOW ALL");
        let show_all = c.prepare("SHOW ALL").await.expect("prepare SHOW ALL");
        let names: Vec<&str> = show_all.columns().iter().map(|c| c.name()).collect();
        assert_eq!(names, ["name", "setting", "description"]);
        let described = msgs.iter().find_map(|m| match m {
            SimpleQueryMessage::Row(r) if r.get(0) == Some("statement_timeout") => {
                r.get(2).map(str::to_string)
            }
            _ => None,
        });
        assert_eq!(
            described.as_deref(),
            Some("Sets the maximum allowed duration of any statement.")
        );
        let iso = c
            .prepare("SHOW transaction isolation level")
            .await
            .expect("prepare SHOW");
        assert_eq!(iso.columns()[0].name(), "transaction_isolation");

        // in an aborted block Parse refuses what the block would refuse
        exec(&c, "BEGIN").await;
        assert!(c.batch_execute("SELECT 1 / 0").await.is_err());
        let e = c
            .prepare("SELECT 1")
            .await
            .expect_err("Parse in an aborted block");
        assert_eq!(e.code().map(|s| s.code()), Some("25P02"));
        c.prepare("ROLLBACK").await.expect("ROLLBACK parses");
        exec(&c, "ROLLBACK").await;
        exec(&c, "DROP TABLE rt_desc").await;
    })
    .await;
}
