//! Unit tests of `plan.rs`: the cut of each supported shape and the
//! refusals.

use super::*;
use crate::interval_join::JoinKind;
use crate::statements::{parse, StreamStatement};
use crate::watermark::WatermarkDef;
use datafusion::arrow::datatypes::{DataType, Field, Schema};

fn plan(sql: &str) -> Result<ViewPlan> {
    let StreamStatement::CreateView { query, .. } = parse(sql).expect("parse") else {
        panic!("not a view");
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k", DataType::Int32, false),
        Field::new("url", DataType::Utf8, false),
    ]));
    plan_view(&query, &[("s".into(), schema)])
}

#[test]
fn a_grouped_aggregate_is_cut_into_parts() {
    let p = plan(
        "CREATE MATERIALIZED VIEW v AS SELECT k, count(*), sum(id) AS total, avg(id) \
         FROM s WHERE id % 2 = 0 GROUP BY k HAVING count(*) > 1",
    )
    .expect("plan");
    assert_eq!(p.source, "s");
    assert_eq!(p.group_exprs.len(), 1);
    assert_eq!(p.aggregates.len(), 3);
    let names: Vec<&str> = p.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["k", "count", "total", "avg"]);
    assert_eq!(p.primary_key, vec![0]);
    assert!(!p.pre.is_empty(), "the WHERE clause is a pre stage");
    assert!(!p.post.is_empty(), "HAVING is a post stage");
}

#[test]
fn the_key_follows_the_group_columns_through_the_select_list() {
    let p = plan(
        "CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n, url, k % 3 AS b FROM s \
         GROUP BY url, k % 3",
    )
    .expect("plan");
    assert_eq!(p.primary_key, vec![1, 2]);
}

#[test]
fn a_view_without_group_by_is_append_only() {
    let p = plan(
        "CREATE MATERIALIZED VIEW v AS SELECT id, k * 2 AS k2, 0.5 * id AS half FROM s \
         WHERE k % 3 = 0",
    )
    .expect("plan");
    assert!(p.append);
    assert!(p.aggregates.is_empty() && p.group_exprs.is_empty() && p.post.is_empty());
    assert!(p.primary_key.is_empty(), "rows are keyed by their position");
    let names: Vec<&str> = p.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["id", "k2", "half"]);
    assert!(
        matches!(p.columns[2].ty, ColumnType::Decimal(..)),
        "0.5 is numeric"
    );
    let p = plan("CREATE MATERIALIZED VIEW v AS SELECT * FROM s").expect("plan");
    assert!(p.append);
    assert_eq!(p.columns.len(), 3);
}

#[test]
fn count_distinct_is_one_aggregate() {
    let p = plan(
        "CREATE MATERIALIZED VIEW v AS SELECT k, count(DISTINCT url) AS urls FROM s \
         GROUP BY k",
    )
    .expect("plan");
    assert_eq!(p.aggregates.len(), 1);
    assert!(p.aggregates[0].is_distinct());
}

#[test]
fn what_cannot_be_maintained_is_refused() {
    for sql in [
        "CREATE MATERIALIZED VIEW v AS SELECT id FROM s ORDER BY id",
        "CREATE MATERIALIZED VIEW v AS SELECT id FROM s LIMIT 3",
        "CREATE MATERIALIZED VIEW v AS SELECT a.id FROM s a JOIN s b ON a.id = b.id",
        "CREATE MATERIALIZED VIEW v AS SELECT id, row_number() OVER () FROM s",
        "CREATE MATERIALIZED VIEW v AS SELECT count(*) FROM s",
        "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) FROM s GROUP BY k ORDER BY k",
        "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) FROM s GROUP BY k LIMIT 3",
        "CREATE MATERIALIZED VIEW v AS SELECT count(*) FROM s GROUP BY k",
        "CREATE MATERIALIZED VIEW v AS SELECT k, stddev(id) FROM s GROUP BY k",
        "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) FILTER (WHERE id > 1) FROM s \
         GROUP BY k",
        "CREATE MATERIALIZED VIEW v AS SELECT a.k, count(*) FROM s a JOIN s b ON a.id = \
         b.id GROUP BY a.k",
    ] {
        match plan(sql) {
            Err(StreamSqlError::NotSupported(_)) => {}
            other => panic!("{sql}: {other:?}"),
        }
    }
}

fn plan_windowed(sql: &str, watermark: Option<&str>) -> Result<ViewPlan> {
    let StreamStatement::CreateView { query, emit, .. } = parse(sql)? else {
        panic!("not a view");
    };
    let ts = DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Microsecond, None);
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int32, false),
        Field::new("ts", ts.clone(), false),
        Field::new("other", ts, false),
    ]));
    let watermarks: Vec<(String, WatermarkDef)> = watermark
        .map(|c| {
            vec![(
                "s".to_string(),
                WatermarkDef {
                    column: c.to_string(),
                    delay_micros: 1_000_000,
                },
            )]
        })
        .unwrap_or_default();
    plan_view_with(&query, &[("s".into(), schema)], &watermarks, emit)
}

#[test]
fn a_tumbling_window_is_assigned_by_the_scan_and_keys_the_view() {
    let p = plan_windowed(
        "CREATE MATERIALIZED VIEW v AS SELECT window_start, window_end, k, count(*) AS n \
         FROM TUMBLE(s, ts, INTERVAL '10' SECOND) WHERE k > 0 \
         GROUP BY window_start, window_end, k EMIT ON WINDOW CLOSE",
        Some("ts"),
    )
    .expect("plan");
    let (spec, schema) = p.time.window.clone().expect("window");
    assert_eq!(
        spec.kind,
        crate::window::WindowKind::Tumble { size: 10_000_000 }
    );
    assert_eq!(spec.time_column, 1);
    assert_eq!(
        schema.fields().len(),
        5,
        "the source and two window columns"
    );
    assert_eq!(p.time.watermark, Some((1, 1_000_000)));
    assert_eq!(p.primary_key, vec![0, 1, 2]);
    let end = p
        .time
        .window_end
        .expect("closed windows are told by window_end");
    assert_eq!(end.start_plus, None);
    assert_eq!(p.time.emit, EmitMode::OnWindowClose);
    let names: Vec<&str> = p.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["window_start", "window_end", "k", "n"]);
}

#[test]
fn a_hopping_window_grouped_by_its_start_alone() {
    let p = plan_windowed(
        "CREATE MATERIALIZED VIEW v AS SELECT k, hop.window_start AS ws, sum(k) AS total \
         FROM Hop(s, ts, INTERVAL '1 second', INTERVAL '3 seconds') AS hop \
         GROUP BY hop.window_start, k",
        Some("ts"),
    )
    .expect("plan");
    let (spec, _) = p.time.window.clone().expect("window");
    assert_eq!(
        spec.kind,
        crate::window::WindowKind::Hop {
            hop: 1_000_000,
            size: 3_000_000
        }
    );
    let end = p.time.window_end.expect("window key");
    assert_eq!(end.start_plus, Some(3_000_000));
    assert_eq!(p.time.emit, EmitMode::OnUpdate);
    // without a watermark the view is kept, but no window ever closes
    let p = plan_windowed(
        "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM \
         TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY window_start",
        None,
    )
    .expect("plan without a watermark");
    assert!(p.time.window.is_some() && p.time.window_end.is_none());
    // a window on another column than the watermark's neither
    let p = plan_windowed(
        "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM \
         TUMBLE(s, other, INTERVAL '1' MINUTE) GROUP BY window_start",
        Some("ts"),
    )
    .expect("plan on another column");
    assert!(p.time.window_end.is_none());
    assert_eq!(p.time.watermark, Some((1, 1_000_000)));
}

#[test]
fn a_session_window_is_keyed_by_its_bounds() {
    let p = plan_windowed(
        "CREATE MATERIALIZED VIEW v AS SELECT k, s.window_end AS ends, count(*) AS n \
         FROM SESSION(s, ts, INTERVAL '5' SECOND) AS s WHERE k > 0 \
         GROUP BY k, s.window_end HAVING count(*) > 1 EMIT ON WINDOW CLOSE",
        Some("ts"),
    )
    .expect("plan");
    let (spec, _) = p.time.window.clone().expect("window");
    assert_eq!(
        spec.kind,
        crate::window::WindowKind::Session { gap: 5_000_000 }
    );
    let key = p.time.session.expect("session key");
    assert_eq!(
        (key.gap, key.start_group, key.end_group),
        (5_000_000, None, Some(1))
    );
    assert!(p.time.window_end.is_none(), "sessions are not groups");
    assert_eq!(p.time.emit, EmitMode::OnWindowClose);
    let names: Vec<&str> = p.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["k", "ends", "n"]);
}

#[test]
fn session_bounds_used_before_the_aggregate_are_refused() {
    for (sql, wm) in [
        // no watermark, or one on another column: sessions never close
        (
            "SELECT window_start, count(*) FROM SESSION(s, ts, INTERVAL '1' SECOND) \
             GROUP BY window_start",
            None,
        ),
        (
            "SELECT window_start, count(*) FROM SESSION(s, other, INTERVAL '1' SECOND) \
             GROUP BY window_start",
            Some("ts"),
        ),
        (
            "SELECT window_start, count(*) FROM SESSION(s, ts, INTERVAL '1' SECOND) \
             WHERE window_end > other GROUP BY window_start",
            Some("ts"),
        ),
        (
            "SELECT k, min(window_start) FROM SESSION(s, ts, INTERVAL '1' SECOND) \
             GROUP BY k",
            Some("ts"),
        ),
        (
            "SELECT k, date_trunc('hour', window_start) AS h, count(*) FROM \
             SESSION(s, ts, INTERVAL '1' SECOND) GROUP BY k, date_trunc('hour', \
             window_start)",
            Some("ts"),
        ),
        (
            "SELECT k, count(*) FROM SESSION(s, ts, INTERVAL '1' SECOND) GROUP BY k",
            Some("ts"),
        ),
    ] {
        let sql = format!("CREATE MATERIALIZED VIEW v AS {sql}");
        match plan_windowed(&sql, wm) {
            Err(StreamSqlError::NotSupported(_)) => {}
            other => panic!("{sql}: {other:?}"),
        }
    }
    match plan_windowed(
        "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM SESSION(s, ts, \
         INTERVAL '1' SECOND, INTERVAL '1' SECOND) GROUP BY window_start",
        Some("ts"),
    ) {
        Err(StreamSqlError::Syntax(_)) => {}
        other => panic!("an offset: {other:?}"),
    }
}

fn plan_joined(sql: &str, right_watermark: bool) -> Result<ViewPlan> {
    let StreamStatement::CreateView { query, emit, .. } = parse(sql)? else {
        panic!("not a view");
    };
    let ts = DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Microsecond, None);
    let schema = |extra: &str| {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int32, false),
            Field::new("ts", ts.clone(), false),
            Field::new(extra, DataType::Int64, false),
        ]))
    };
    let wm = |name: &str| {
        (
            name.to_string(),
            WatermarkDef {
                column: "ts".into(),
                delay_micros: 1_000_000,
            },
        )
    };
    let mut watermarks = vec![wm("a")];
    if right_watermark {
        watermarks.push(wm("b"));
    }
    plan_view_with(
        &query,
        &[("a".into(), schema("x")), ("b".into(), schema("y"))],
        &watermarks,
        emit,
    )
}

#[test]
fn an_interval_join_of_two_sources_is_cut_into_its_sides() {
    for (sql, lower, upper) in [
        (
            "SELECT a.k, count(*) AS n, sum(b.y) AS s FROM a JOIN b ON a.k = b.k AND b.ts \
             BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '2' SECOND \
             WHERE a.x > 0 GROUP BY a.k",
            -1_000_000,
            2_000_000,
        ),
        (
            "SELECT b.k, count(*) AS n FROM a JOIN b ON b.k = a.k AND a.ts <= b.ts AND \
             b.ts < a.ts + INTERVAL '3 seconds' GROUP BY b.k",
            0,
            2_999_999,
        ),
    ] {
        let p = plan_joined(&format!("CREATE MATERIALIZED VIEW v AS {sql}"), true)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let j = p.join.clone().expect("an interval join");
        assert_eq!(j.interval, Some((lower, upper)), "{sql}");
        assert_eq!(
            (j.left.source.as_str(), j.right.source.as_str()),
            ("a", "b")
        );
        assert_eq!(j.left.watermark, Some((1, 1_000_000)));
        assert_eq!(j.right.watermark, Some((1, 1_000_000)));
        assert_eq!(p.source, "a");
        assert!(p.time.watermark.is_none(), "each side keeps its own clock");
    }
}

#[test]
fn an_equi_join_of_two_sources_needs_no_interval_and_no_watermark() {
    for (sql, append) in [
        (
            "SELECT a.k, count(*) AS n, sum(b.y) AS s FROM a JOIN b ON a.k = b.k \
             WHERE a.x > 0 GROUP BY a.k",
            false,
        ),
        (
            "SELECT a.x, b.y, a.ts FROM a JOIN b ON b.k = a.k AND a.x = b.y WHERE b.y % 2 = 0",
            true,
        ),
    ] {
        let p = plan_joined(&format!("CREATE MATERIALIZED VIEW v AS {sql}"), false)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(p.append, append, "{sql}");
        let j = p.join.clone().expect("a join");
        assert_eq!(j.interval, None, "{sql}");
        assert_eq!((j.left.time, j.right.time), (None, None));
        assert_eq!(j.left.watermark, None, "no clock: no row is late");
        assert_eq!(j.right.watermark, None);
        assert!(p.time.watermark.is_none());
        assert!(p.primary_key.is_empty() == append);
    }
}

#[test]
fn other_stream_stream_joins_are_refused() {
    for (sql, right_wm) in [
        (
            "SELECT a.k, count(*) FROM a JOIN b ON a.k = b.k AND a.x < b.y GROUP BY a.k",
            true,
        ),
        (
            "SELECT a.k, b.y FROM a JOIN b ON a.k = b.k AND a.x < b.y",
            true,
        ),
        ("SELECT a.k, b.y FROM a FULL JOIN b ON a.k = b.k", true),
        (
            "SELECT a.k, count(*) FROM a RIGHT JOIN b ON a.k = b.k GROUP BY a.k",
            true,
        ),
        (
            "SELECT a.k, b.y FROM a JOIN b ON a.k = b.k EMIT ON WINDOW CLOSE",
            true,
        ),
        (
            "SELECT a.k, count(*) FROM a LEFT JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts \
             AND a.ts + INTERVAL '1' SECOND GROUP BY a.k",
            true,
        ),
        (
            "SELECT a.k, count(*) FROM a JOIN b ON a.k = b.k AND b.ts >= a.ts GROUP BY a.k",
            true,
        ),
        (
            "SELECT a.k, count(*) FROM a JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND \
             a.ts + INTERVAL '1' SECOND AND a.x < b.y GROUP BY a.k",
            true,
        ),
        (
            "SELECT a.k, count(*) FROM a JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND \
             a.ts + INTERVAL '1' SECOND GROUP BY a.k",
            false,
        ),
        (
            "SELECT a.k, count(*) FROM a JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND \
             a.ts + INTERVAL '1' MONTH GROUP BY a.k",
            true,
        ),
        (
            "SELECT a.k, count(*) FROM a JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND \
             a.ts + INTERVAL '1' SECOND GROUP BY a.k EMIT ON WINDOW CLOSE",
            true,
        ),
    ] {
        match plan_joined(&format!("CREATE MATERIALIZED VIEW v AS {sql}"), right_wm) {
            Err(StreamSqlError::NotSupported(_)) => {}
            other => panic!("{sql}: {other:?}"),
        }
    }
}

#[test]
fn windows_that_cannot_be_kept_are_refused() {
    for (sql, wm) in [
        (
            "CREATE MATERIALIZED VIEW v AS SELECT count(*), k FROM SESSION(s, ts, \
             INTERVAL '1' SECOND) GROUP BY k",
            Some("ts"),
        ),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM TUMBLE(s, ts, \
             INTERVAL '1' SECOND, INTERVAL '1' SECOND) GROUP BY window_start",
            Some("ts"),
        ),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM TUMBLE(s, ts, \
             INTERVAL '1' MONTH) GROUP BY window_start",
            Some("ts"),
        ),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) FROM s GROUP BY k \
             EMIT ON WINDOW CLOSE",
            Some("ts"),
        ),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) FROM TUMBLE(s, ts, \
             INTERVAL '1' SECOND) GROUP BY k EMIT ON WINDOW CLOSE",
            Some("ts"),
        ),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM TUMBLE(s, ts, \
             INTERVAL '1' SECOND) GROUP BY window_start EMIT ON WINDOW CLOSE",
            None,
        ),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM TUMBLE(s, \
             other, INTERVAL '1' SECOND) GROUP BY window_start EMIT ON WINDOW CLOSE",
            Some("ts"),
        ),
    ] {
        match plan_windowed(sql, wm) {
            Err(StreamSqlError::NotSupported(_)) => {}
            other => panic!("{sql}: {other:?}"),
        }
    }
    for (sql, what) in [
        (
            "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM HOP(s, ts, \
             INTERVAL '2' SECOND, INTERVAL '3' SECOND) GROUP BY window_start",
            "a size that is not a multiple of the hop",
        ),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM TUMBLE(s, ts, \
             INTERVAL '0' SECOND) GROUP BY window_start",
            "an empty window",
        ),
    ] {
        match plan_windowed(sql, Some("ts")) {
            Err(StreamSqlError::InvalidOption(_)) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
    match plan_windowed(
        "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM TUMBLE(nope, ts, \
         INTERVAL '1' SECOND) GROUP BY window_start",
        Some("ts"),
    ) {
        Err(StreamSqlError::Undefined(..)) => {}
        other => panic!("unknown source: {other:?}"),
    }
    match plan_windowed(
        "CREATE MATERIALIZED VIEW v AS SELECT window_start, count(*) FROM TUMBLE(s, k, \
         INTERVAL '1' SECOND) GROUP BY window_start",
        Some("ts"),
    ) {
        Err(StreamSqlError::Sql(_)) => {}
        other => panic!("a window on an integer: {other:?}"),
    }
}

/// q8's shape over sources `a` and `b`: two TUMBLE aggregates joined on
/// their key and window bounds (`{join}`: the join keyword).
fn q8_over_ab(join: &str, emit: &str) -> String {
    format!(
        "CREATE MATERIALIZED VIEW v AS SELECT p.k, p.n, p.starttime FROM (SELECT k, max(x) AS n, \
         window_start AS starttime, window_end AS endtime FROM TUMBLE(a, ts, INTERVAL '10' \
         SECOND) GROUP BY k, window_start, window_end) AS p {join} (SELECT k, window_start AS \
         starttime, window_end AS endtime FROM TUMBLE(b, ts, INTERVAL '10' SECOND) GROUP BY k, \
         window_start, window_end) AS q ON p.k = q.k AND p.starttime = q.starttime AND \
         p.endtime = q.endtime {emit}"
    )
}

#[test]
fn a_join_of_two_window_aggregates_is_two_grouped_sides_under_an_equi_join() {
    let p = plan_joined(&q8_over_ab("JOIN", "EMIT ON WINDOW CLOSE"), true).expect("plan");
    assert!(p.append, "the pairs are appended");
    let j = p.join.as_ref().expect("a join");
    assert!(j.interval.is_none(), "an equi-join");
    // no column of q is selected and q is unique on the join keys:
    // DataFusion's EliminateJoin makes the inner join a semi join
    assert_eq!(j.kind, JoinKind::LeftSemi);
    assert_eq!(
        j.joined_schema.fields().len(),
        left_width(&p),
        "p's columns only"
    );
    assert_eq!(
        (j.left.source.as_str(), j.right.source.as_str()),
        ("a", "b")
    );
    assert_eq!(j.left.keys.len(), 3, "the key and both window bounds");
    assert!(j.left.stages.is_empty() && j.left.scan_projection.is_none());
    let [left, right] = p.window_inputs.as_slice() else {
        panic!("two window aggregates: {}", p.window_inputs.len());
    };
    for (side, source, aggregates) in [(left, "a", 1), (right, "b", 0)] {
        assert_eq!(side.source, source);
        assert!(!side.append && side.join.is_none());
        assert_eq!(side.aggregates.len(), aggregates);
        assert_eq!(side.time.emit, EmitMode::OnWindowClose);
        assert!(
            side.time.window_end.is_some(),
            "{source} closes its windows"
        );
        assert!(side.time.watermark.is_some(), "by {source}'s watermark");
    }
    // the join's inputs are the sides' outputs
    assert_eq!(j.left.schema.fields().len(), left.columns.len());
    assert_eq!(j.right.schema.fields().len(), right.columns.len());
    let names: Vec<&str> = p.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["k", "n", "starttime"]);
}

#[test]
fn joins_of_window_aggregates_that_cannot_be_kept_are_refused() {
    for (what, sql, right_watermark) in [
        ("emit on update", q8_over_ab("JOIN", ""), true),
        (
            // (selecting a column of q: without one, q unique on the keys,
            // DataFusion's EliminateJoin drops the LEFT JOIN altogether)
            "an outer join",
            q8_over_ab("LEFT JOIN", "EMIT ON WINDOW CLOSE")
                .replace("SELECT p.k, p.n, p.starttime", "SELECT p.k, p.n, q.endtime"),
            true,
        ),
        (
            "a side without a watermark",
            q8_over_ab("JOIN", "EMIT ON WINDOW CLOSE"),
            false,
        ),
        (
            "a condition other than equalities",
            q8_over_ab("JOIN", "EMIT ON WINDOW CLOSE").replace("p.k = q.k", "p.k > q.k"),
            true,
        ),
        (
            "an anti join",
            "CREATE MATERIALIZED VIEW v AS SELECT p.k, p.n FROM (SELECT k, max(x) AS n, \
             window_start AS starttime FROM TUMBLE(a, ts, INTERVAL '10' SECOND) GROUP BY k, \
             window_start) AS p WHERE NOT EXISTS (SELECT 1 FROM (SELECT k, window_start AS \
             starttime FROM TUMBLE(b, ts, INTERVAL '10' SECOND) GROUP BY k, window_start) AS q \
             WHERE q.k = p.k AND q.starttime = p.starttime) EMIT ON WINDOW CLOSE"
                .to_string(),
            true,
        ),
    ] {
        match plan_joined(&sql, right_watermark) {
            Err(StreamSqlError::NotSupported(why)) if what == "an outer join" => {
                assert!(why.contains("Left"), "{why}")
            }
            Err(StreamSqlError::NotSupported(why)) => eprintln!("{what}: {why}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

/// The width of the left window aggregate's output (a semi join's rows).
fn left_width(p: &ViewPlan) -> usize {
    p.window_inputs.first().map_or(0, |l| l.columns.len())
}

#[test]
fn a_join_of_window_aggregates_selecting_both_sides_stays_inner() {
    let sql = q8_over_ab("JOIN", "EMIT ON WINDOW CLOSE")
        .replace("SELECT p.k, p.n, p.starttime", "SELECT p.k, p.n, q.endtime");
    let p = plan_joined(&sql, true).expect("plan");
    let j = p.join.as_ref().expect("a join");
    assert_eq!(j.kind, JoinKind::Inner);
    let names: Vec<&str> = p.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["k", "n", "endtime"]);
}

#[test]
fn in_and_exists_over_two_sources_are_semi_equi_joins() {
    for (sql, append) in [
        (
            "SELECT a.k, a.x FROM a WHERE a.k IN (SELECT k FROM b WHERE y > 0)",
            true,
        ),
        (
            "SELECT a.k, a.x FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.k AND b.y = a.x)",
            true,
        ),
        (
            "SELECT a.k, count(*) AS n FROM a WHERE a.k IN (SELECT k FROM b) GROUP BY a.k",
            false,
        ),
    ] {
        let p = plan_joined(&format!("CREATE MATERIALIZED VIEW v AS {sql}"), false)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(p.append, append, "{sql}");
        let j = p.join.as_ref().expect("a join");
        assert_eq!(j.kind, JoinKind::LeftSemi, "{sql}");
        assert_eq!(j.interval, None);
        assert_eq!(
            (j.left.source.as_str(), j.right.source.as_str()),
            ("a", "b")
        );
        assert_eq!(
            j.joined_schema.fields().len(),
            j.left.schema.fields().len(),
            "{sql}: a's columns only"
        );
    }
}

#[test]
fn anti_joins_and_semi_joins_with_other_conditions_are_refused() {
    for sql in [
        "SELECT a.k, a.x FROM a WHERE a.k NOT IN (SELECT k FROM b)",
        "SELECT a.k, a.x FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.k = a.k)",
        "SELECT a.k, a.x FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.k AND b.y > a.x)",
    ] {
        match plan_joined(&format!("CREATE MATERIALIZED VIEW v AS {sql}"), true) {
            Err(StreamSqlError::NotSupported(why)) => eprintln!("{sql}: {why}"),
            other => panic!("{sql}: {other:?}"),
        }
    }
}
