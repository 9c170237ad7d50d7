//! The 13 standard SSB queries, Q1.1-Q4.3, in the classic join form.
//!
//! The texts live in `crates/bench/queries/ssb/*.sql` and are compiled in;
//! harnesses write them out again for the peers.

/// (name, SQL) of every SSB query, in order.
pub const QUERIES: [(&str, &str); 13] = [
    ("q1.1", include_str!("../../queries/ssb/q1.1.sql")),
    ("q1.2", include_str!("../../queries/ssb/q1.2.sql")),
    ("q1.3", include_str!("../../queries/ssb/q1.3.sql")),
    ("q2.1", include_str!("../../queries/ssb/q2.1.sql")),
    ("q2.2", include_str!("../../queries/ssb/q2.2.sql")),
    ("q2.3", include_str!("../../queries/ssb/q2.3.sql")),
    ("q3.1", include_str!("../../queries/ssb/q3.1.sql")),
    ("q3.2", include_str!("../../queries/ssb/q3.2.sql")),
    ("q3.3", include_str!("../../queries/ssb/q3.3.sql")),
    ("q3.4", include_str!("../../queries/ssb/q3.4.sql")),
    ("q4.1", include_str!("../../queries/ssb/q4.1.sql")),
    ("q4.2", include_str!("../../queries/ssb/q4.2.sql")),
    ("q4.3", include_str!("../../queries/ssb/q4.3.sql")),
];

/// The SQL of query `name` (`q1.1` or `1.1`).
pub fn query(name: &str) -> Option<&'static str> {
    let want = name.trim_start_matches(['q', 'Q']);
    QUERIES
        .iter()
        .find(|(n, _)| &n[1..] == want)
        .map(|(_, sql)| *sql)
}
