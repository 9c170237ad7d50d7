//! Prepared queries are planned once, at Parse, and bound at each Execute
//! (`session/prepared.rs`): which statements keep a plan, and that a kept
//! plan reads each execution's own snapshot and survives a table changing
//! under it.

mod common;

use common::*;
use eddy_common::Value;
use eddy_sql::pgtypes::oid;
use eddy_sql::Session;

async fn run(s: &mut Session, sql: &str) {
    for out in s.simple_query(sql).await {
        out.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

async fn must_execute(s: &mut Session, p: &eddy_sql::Prepared, params: &[Value]) -> Vec<Vec<i64>> {
    let out = s
        .execute_prepared(p, params)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", p.sql));
    rows_i64(out).await.expect("integer rows")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_keep_their_plan_and_read_fresh_snapshots() {
    let dir = tempfile::tempdir().expect("dir");
    let db = open_db(dir.path(), 1 << 20);
    let mut s = sessions(&db, 1).await.remove(0);
    run(
        &mut s,
        "CREATE TABLE pp (id INT PRIMARY KEY, v INT, d NUMERIC(10,2))",
    )
    .await;
    run(&mut s, "INSERT INTO pp VALUES (1, 10, 0.05), (2, 20, 0.06)").await;

    let p = s
        .prepare("SELECT count(*) FROM pp WHERE v >= $1", &[])
        .await
        .expect("prepare");
    assert!(p.planned.is_some(), "a query is planned at Parse");
    assert_eq!(p.param_types, [oid::INT4], "typed by the column it meets");
    assert_eq!(must_execute(&mut s, &p, &[Value::Int(15)]).await, [[1]]);
    run(&mut s, "INSERT INTO pp VALUES (3, 30, 0.07)").await;
    // the same plan, a new snapshot and new parameters
    assert_eq!(must_execute(&mut s, &p, &[Value::Int(15)]).await, [[2]]);
    assert_eq!(must_execute(&mut s, &p, &[Value::Int(0)]).await, [[3]]);

    // NUMERIC parameters bind exactly or take the text path
    let n = s
        .prepare("SELECT count(*) FROM pp WHERE d < $1", &[oid::NUMERIC])
        .await
        .expect("prepare");
    assert!(n.planned.is_some());
    assert_eq!(
        must_execute(&mut s, &n, &[Value::Text("0.06".into())]).await,
        [[1]]
    );
    assert_eq!(
        must_execute(&mut s, &n, &[Value::Text("0.065".into())]).await,
        [[2]],
        "more decimal places than the column: compared exactly"
    );

    // the table replaced by one of another shape: planned again
    run(&mut s, "DROP TABLE pp").await;
    run(
        &mut s,
        "CREATE TABLE pp (id INT PRIMARY KEY, x TEXT, v INT)",
    )
    .await;
    run(&mut s, "INSERT INTO pp VALUES (1, 'a', 40)").await;
    assert_eq!(must_execute(&mut s, &p, &[Value::Int(15)]).await, [[1]]);
    run(&mut s, "DROP TABLE pp").await;
    assert!(
        s.execute_prepared(&p, &[Value::Int(15)]).await.is_err(),
        "a dropped table is not read through an old plan"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn which_statements_keep_a_plan() {
    let dir = tempfile::tempdir().expect("dir");
    let db = open_db(dir.path(), 1 << 20);
    let mut s = sessions(&db, 1).await.remove(0);
    run(&mut s, "CREATE TABLE pk (id BIGINT PRIMARY KEY, v INT)").await;
    run(&mut s, "INSERT INTO pk VALUES (1, 10), (2, 20)").await;

    // a point lookup stays a fixed plan (no DataFusion at all)
    let get = s
        .prepare("SELECT v FROM pk WHERE id = $1", &[])
        .await
        .expect("prepare");
    assert!(get.fast.is_some() && get.planned.is_none());
    assert_eq!(
        must_execute(&mut s, &get, &[Value::BigInt(2)]).await,
        [[20]]
    );

    // a table function called with a parameter: described with NULL,
    // planned with the value at each Execute
    let series = s
        .prepare("SELECT * FROM generate_series(1, $1)", &[])
        .await
        .expect("generate_series with a parameter");
    assert!(series.planned.is_none());
    assert_eq!(series.param_types, [oid::INT8]);
    assert_eq!(
        must_execute(&mut s, &series, &[Value::BigInt(3)]).await,
        [[1], [2], [3]]
    );

    // settings are bound when planned, so never kept
    let setting = s
        .prepare("SELECT current_setting('lock_timeout')", &[])
        .await
        .expect("prepare");
    assert!(setting.planned.is_none());

    // the same parameter twice, and one in the select list
    let twice = s
        .prepare("SELECT $1::int + 1, $1::int", &[])
        .await
        .expect("prepare");
    assert!(twice.planned.is_some());
    assert_eq!(
        must_execute(&mut s, &twice, &[Value::Text("41".into())]).await,
        [[42, 41]]
    );

    // DML takes the text path; an ON CONFLICT update reads its bound
    // parameters (typed casts there) as values
    let upsert = s
        .prepare(
            "INSERT INTO pk VALUES ($1, 0), ($2, 0) ON CONFLICT (id) DO UPDATE SET v = $3",
            &[oid::INT8, oid::INT8, oid::INT4],
        )
        .await
        .expect("prepare");
    assert!(upsert.planned.is_none());
    s.execute_prepared(
        &upsert,
        &[Value::BigInt(1), Value::BigInt(2), Value::Int(7)],
    )
    .await
    .expect("upsert");
    let all = s
        .prepare("SELECT id, v FROM pk ORDER BY id", &[])
        .await
        .expect("prepare");
    assert_eq!(must_execute(&mut s, &all, &[]).await, [[1, 7], [2, 7]]);

    // a declared type is honoured
    let int4 = s
        .prepare("SELECT count(*) FROM pk WHERE v = $1", &[oid::INT4])
        .await
        .expect("prepare");
    assert!(int4.planned.is_some());
    assert_eq!(int4.param_types, [oid::INT4]);
    assert_eq!(must_execute(&mut s, &int4, &[Value::Int(7)]).await, [[2]]);
}

/// `CURRENT_TIMESTAMP` / `now()` / `LOCALTIMESTAMP` written into timestamp
/// columns keep an INSERT or UPDATE on the fixed plan (pgbench's history
/// insert); every call in one statement takes the same instant, the
/// statement's start, as on the general path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_time_keeps_writes_on_the_fixed_plan() {
    let dir = tempfile::tempdir().expect("dir");
    let db = open_db(dir.path(), 1 << 20);
    let mut s = sessions(&db, 1).await.remove(0);
    run(
        &mut s,
        "CREATE TABLE hist (id INT, t TIMESTAMP, tz TIMESTAMPTZ, d DATE)",
    )
    .await;
    run(
        &mut s,
        "CREATE TABLE upd (id INT PRIMARY KEY, t TIMESTAMP, n INT)",
    )
    .await;
    let before = micros_now();
    let ins = s
        .prepare(
            "INSERT INTO hist (id, t, tz) VALUES ($1, CURRENT_TIMESTAMP, now())",
            &[],
        )
        .await
        .expect("prepare");
    assert!(ins.fast.is_some(), "statement time stays on the fixed plan");
    s.execute_prepared(&ins, &[Value::Int(1)])
        .await
        .expect("insert");
    run(
        &mut s,
        "INSERT INTO hist (id, t, tz) VALUES (2, LOCALTIMESTAMP, CURRENT_TIMESTAMP)",
    )
    .await;
    // a date column is not a timestamp: the general path, same answer kind
    let date = s
        .prepare("INSERT INTO hist (id, d) VALUES ($1, now())", &[])
        .await
        .expect("prepare");
    assert!(
        date.fast.is_none(),
        "now() into a date takes the general path"
    );
    s.execute_prepared(&date, &[Value::Int(3)])
        .await
        .expect("insert a date");
    let after = micros_now();

    let q = "SELECT id, CAST(date_part('epoch', t) * 1000000 AS BIGINT), \
             CAST(date_part('epoch', tz) * 1000000 AS BIGINT) FROM hist WHERE id < 3 ORDER BY id";
    let mut out = Vec::new();
    for o in s.simple_query(q).await {
        out = rows_i64(o.expect("select")).await.expect("ints");
    }
    assert_eq!(out.len(), 2);
    for row in &out {
        assert_eq!(row[1], row[2], "one instant per statement: {row:?}");
        assert!(
            (before - 2..=after + 2).contains(&row[1]),
            "{row:?} outside [{before}, {after}]"
        );
    }
    let mut dates = Vec::new();
    for o in s
        .simple_query("SELECT count(*) FROM hist WHERE d = CURRENT_DATE")
        .await
    {
        dates = rows_i64(o.expect("select")).await.expect("ints");
    }
    assert_eq!(dates, [[1]]);

    run(&mut s, "INSERT INTO upd VALUES (1, NULL, 0)").await;
    let upd = s
        .prepare(
            "UPDATE upd SET t = CURRENT_TIMESTAMP, n = n + 1 WHERE id = $1",
            &[],
        )
        .await
        .expect("prepare");
    assert!(
        upd.fast.is_some(),
        "UPDATE ... SET t = CURRENT_TIMESTAMP is fixed"
    );
    s.execute_prepared(&upd, &[Value::Int(1)])
        .await
        .expect("update");
    let mut got = Vec::new();
    for o in s
        .simple_query("SELECT n, CAST(date_part('epoch', t) * 1000000 AS BIGINT) FROM upd")
        .await
    {
        got = rows_i64(o.expect("select")).await.expect("ints");
    }
    assert_eq!(got.len(), 1);
    assert_eq!(got[0][0], 1);
    // (float seconds: a microsecond either way)
    assert!(
        (before - 2..=micros_now() + 2).contains(&got[0][1]),
        "{got:?}"
    );
}

/// Inside a transaction block `now()`, `CURRENT_TIMESTAMP` and
/// `transaction_timestamp()` give the block's start on both paths, as in
/// PostgreSQL; `statement_timestamp()` the statement's; `clock_timestamp()`
/// the clock. Outside a block each statement gets its own start again.
#[tokio::test]
async fn transaction_time_is_the_start_of_the_block() {
    let dir = tempfile::tempdir().expect("dir");
    let db = open_db(dir.path(), 1 << 20);
    let mut s = sessions(&db, 1).await.remove(0);
    run(
        &mut s,
        "CREATE TABLE ev (id INT PRIMARY KEY, t TIMESTAMPTZ)",
    )
    .await;
    let ins = s
        .prepare("INSERT INTO ev VALUES ($1, now())", &[])
        .await
        .expect("prepare");
    assert!(ins.fast.is_some(), "now() into timestamptz is a fixed plan");
    let epoch = |e: &str| format!("CAST(date_part('epoch', {e}) * 1000000 AS BIGINT)");
    let one_row = |out: Vec<Vec<i64>>| -> Vec<i64> {
        assert_eq!(out.len(), 1, "{out:?}");
        out.into_iter().next().unwrap_or_default()
    };

    let before = micros_now();
    run(&mut s, "BEGIN").await;
    let begun = micros_now();
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    s.execute_prepared(&ins, &[Value::Int(1)])
        .await
        .expect("fixed-plan insert");
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    run(&mut s, "INSERT INTO ev SELECT 2, CURRENT_TIMESTAMP").await;
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let stmt_start = micros_now();
    let q = format!(
        "SELECT {}, {}, {}, {}",
        epoch("now()"),
        epoch("transaction_timestamp()"),
        epoch("statement_timestamp()"),
        epoch("clock_timestamp()")
    );
    let mut times = Vec::new();
    for o in s.simple_query(&q).await {
        times = one_row(rows_i64(o.expect("select")).await.expect("ints"));
    }
    let [now, txn, stmt, clock] = times.as_slice() else {
        panic!("four times: {times:?}");
    };
    let near = |a: i64, b: i64| (a - b).abs() <= 2;
    assert!(
        near(*now, *txn),
        "now() = transaction_timestamp(): {times:?}"
    );
    assert!(
        (before - 2..=begun + 2).contains(now),
        "now() is the block's start [{before}, {begun}]: {times:?}"
    );
    assert!(
        *stmt >= stmt_start - 2,
        "statement_timestamp() is this statement's: {times:?}"
    );
    assert!(
        *clock >= *stmt - 2,
        "clock_timestamp() is not before the statement: {times:?}"
    );
    let mut written = Vec::new();
    for o in s
        .simple_query(&format!("SELECT id, {} FROM ev ORDER BY id", epoch("t")))
        .await
    {
        written = rows_i64(o.expect("select")).await.expect("ints");
    }
    assert_eq!(written.len(), 2);
    for row in &written {
        assert!(
            near(row[1], *now),
            "both paths wrote the block's start: {written:?} vs {now}"
        );
    }
    run(&mut s, "COMMIT").await;

    let mut after = Vec::new();
    for o in s.simple_query(&format!("SELECT {}", epoch("now()"))).await {
        after = one_row(rows_i64(o.expect("select")).await.expect("ints"));
    }
    assert!(
        after[0] >= stmt_start,
        "outside the block now() moves on: {after:?}"
    );
}

fn micros_now() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(d.as_micros()).expect("fits")
}
