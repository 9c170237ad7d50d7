//! The 22 TPC-H queries with the specification's validation parameters.
//!
//! Texts live in `crates/bench/queries/tpch/q*.sql`. Portable across Eddy,
//! DuckDB, DataFusion and PostgreSQL: Q15's view is a CTE, intervals carry
//! no precision. Q11's FRACTION is 0.0001 / SF, so use [`queries`] for texts
//! at a given scale factor.

/// (name, SQL template) of every query, in order; Q11 holds `:fraction`.
pub const TEMPLATES: [(&str, &str); 22] = [
    ("q1", include_str!("../../queries/tpch/q1.sql")),
    ("q2", include_str!("../../queries/tpch/q2.sql")),
    ("q3", include_str!("../../queries/tpch/q3.sql")),
    ("q4", include_str!("../../queries/tpch/q4.sql")),
    ("q5", include_str!("../../queries/tpch/q5.sql")),
    ("q6", include_str!("../../queries/tpch/q6.sql")),
    ("q7", include_str!("../../queries/tpch/q7.sql")),
    ("q8", include_str!("../../queries/tpch/q8.sql")),
    ("q9", include_str!("../../queries/tpch/q9.sql")),
    ("q10", include_str!("../../queries/tpch/q10.sql")),
    ("q11", include_str!("../../queries/tpch/q11.sql")),
    ("q12", include_str!("../../queries/tpch/q12.sql")),
    ("q13", include_str!("../../queries/tpch/q13.sql")),
    ("q14", include_str!("../../queries/tpch/q14.sql")),
    ("q15", include_str!("../../queries/tpch/q15.sql")),
    ("q16", include_str!("../../queries/tpch/q16.sql")),
    ("q17", include_str!("../../queries/tpch/q17.sql")),
    ("q18", include_str!("../../queries/tpch/q18.sql")),
    ("q19", include_str!("../../queries/tpch/q19.sql")),
    ("q20", include_str!("../../queries/tpch/q20.sql")),
    ("q21", include_str!("../../queries/tpch/q21.sql")),
    ("q22", include_str!("../../queries/tpch/q22.sql")),
];

/// The 22 queries for scale factor `sf`.
pub fn queries(sf: f64) -> Vec<(&'static str, String)> {
    let fraction = format!("{:.10}", 0.0001 / sf);
    TEMPLATES
        .iter()
        .map(|(n, q)| (*n, q.replace(":fraction", &fraction)))
        .collect()
}
