//! The set-returning json functions and `regexp_matches` (issue 14) answer
//! with PostgreSQL's column names and types: `value` json / jsonb, `key`
//! text, a scalar function's column named by the table alias or the
//! function, `text[]` rows of `regexp_matches`, a bigint `ordinality`, and
//! a lateral call beside a table whose columns have the same names. The
//! values themselves are in tests/slt/json_srf.slt.
//!
//! Every expectation is PostgreSQL 15's answer. Set `EDDY_WIRE_VALUES_PG`
//! to a libpq connection string to run the same assertions against
//! PostgreSQL too.

use tokio_postgres::types::Type;
use tokio_postgres::Client;

mod common;
use common::wire::{on_servers, texts};

/// The result columns a statement is described with: name and type.
async fn columns(c: &Client, sql: &str) -> Vec<(String, Type)> {
    let stmt = c
        .prepare(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    stmt.columns()
        .iter()
        .map(|c| (c.name().to_string(), c.type_().clone()))
        .collect()
}

fn named(cols: &[(&str, Type)]) -> Vec<(String, Type)> {
    cols.iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_are_named_and_typed_as_postgresql() {
    on_servers(|c| async move {
        for (sql, want) in [
            (
                "SELECT * FROM jsonb_array_elements('[1]')",
                vec![("value", Type::JSONB)],
            ),
            (
                "SELECT * FROM json_array_elements('[1]') AS e",
                vec![("value", Type::JSON)],
            ),
            (
                "SELECT * FROM jsonb_array_elements_text('[1]') e",
                vec![("value", Type::TEXT)],
            ),
            (
                "SELECT * FROM jsonb_each('{\"a\": 1}')",
                vec![("key", Type::TEXT), ("value", Type::JSONB)],
            ),
            (
                "SELECT * FROM json_each('{\"a\": 1}') AS e(k, v)",
                vec![("k", Type::TEXT), ("v", Type::JSON)],
            ),
            (
                "SELECT * FROM json_each_text('{\"a\": 1}')",
                vec![("key", Type::TEXT), ("value", Type::TEXT)],
            ),
            (
                "SELECT * FROM jsonb_object_keys('{\"a\": 1}')",
                vec![("jsonb_object_keys", Type::TEXT)],
            ),
            (
                "SELECT * FROM json_object_keys('{\"a\": 1}') AS k",
                vec![("k", Type::TEXT)],
            ),
            (
                "SELECT * FROM regexp_matches('a', 'a')",
                vec![("regexp_matches", Type::TEXT_ARRAY)],
            ),
            (
                "SELECT * FROM regexp_matches('a', 'a') AS r",
                vec![("r", Type::TEXT_ARRAY)],
            ),
            (
                "SELECT * FROM jsonb_array_elements('[1]') WITH ORDINALITY",
                vec![("value", Type::JSONB), ("ordinality", Type::INT8)],
            ),
            (
                "SELECT jsonb_array_elements('[1]')",
                vec![("jsonb_array_elements", Type::JSONB)],
            ),
            (
                "SELECT json_array_elements('[1]'), json_array_elements_text('[1]')",
                vec![
                    ("json_array_elements", Type::JSON),
                    ("json_array_elements_text", Type::TEXT),
                ],
            ),
            (
                "SELECT json_object_keys('{\"a\": 1}')",
                vec![("json_object_keys", Type::TEXT)],
            ),
            (
                "SELECT regexp_matches('a', 'a', 'g')",
                vec![("regexp_matches", Type::TEXT_ARRAY)],
            ),
        ] {
            assert_eq!(columns(&c, sql).await, named(&want), "{sql}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lateral_calls_keep_the_left_columns() {
    on_servers(|c| async move {
        c.batch_execute(
            "DROP TABLE IF EXISTS srf_w; CREATE TABLE srf_w (id int, value jsonb); \
             INSERT INTO srf_w VALUES (1, '{\"b\": [1], \"a\": 2}'), (2, '{}'), (3, NULL)",
        )
        .await
        .expect("setup");
        // the function's `key, value` beside the table's own `value`
        let sql = "SELECT * FROM srf_w, jsonb_each(srf_w.value) ORDER BY key";
        assert_eq!(
            columns(&c, sql).await,
            named(&[
                ("id", Type::INT4),
                ("value", Type::JSONB),
                ("key", Type::TEXT),
                ("value", Type::JSONB),
            ])
        );
        assert_eq!(
            texts(&c, sql).await,
            [
                ["1", "{\"a\": 2, \"b\": [1]}", "a", "2"],
                ["1", "{\"a\": 2, \"b\": [1]}", "b", "[1]"],
            ]
        );
        let sql = "SELECT w.id, e.value FROM srf_w w JOIN LATERAL jsonb_each(w.value) AS e \
                   ON e.key = 'b' CROSS JOIN LATERAL jsonb_array_elements(e.value) AS x";
        assert_eq!(
            columns(&c, sql).await,
            named(&[("id", Type::INT4), ("value", Type::JSONB)])
        );
        assert_eq!(texts(&c, sql).await, [["1", "[1]"]]);
        c.batch_execute("DROP TABLE srf_w").await.expect("cleanup");
    })
    .await;
}
