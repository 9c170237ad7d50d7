//! Query memory limits end to end (`eddy_sql::memory`): a sort or a hash
//! join that needs more than its query may hold fails with 53200 and
//! leaves the server and the session working; point lookups on another connection keep
//! answering meanwhile; the limit is a setting each session can change,
//! and a malformed size is refused.

mod common;

use std::time::{Duration, Instant};

use common::Server;

const ROWS: i64 = 600_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_spill_or_fail_with_53200_within_their_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let server = Server::start_with(
        Some(dir),
        data,
        "trust",
        &[],
        &["--memory-limit", "512MB", "--query-memory-limit", "256MB"],
    );
    let c = server.connect().await;
    c.batch_execute(&format!(
        "CREATE TABLE big (id BIGINT PRIMARY KEY, v TEXT);
         INSERT INTO big SELECT g, repeat('x', 60) || g FROM generate_series(1, {ROWS}) AS t(g);
         CHECKPOINT;"
    ))
    .await
    .unwrap();
    // (flushed: scans read the files' row groups, not the one large batch
    // the INSERT left in the memtable, which a sort must hold whole)
    let limit: String = c
        .query_one("SHOW eddy.query_memory_limit", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(limit, "262144kB");
    // about 45 MB of strings: more than this session's limit
    c.batch_execute("SET eddy.query_memory_limit = '16MB'")
        .await
        .unwrap();
    // a sort that cannot hold even the batches it must sort before it can
    // spill fails cleanly (each sorting partition reserves twice a row
    // group, about 11 MB; see docs/design/sql.md "Query memory")
    let e = c
        .query("SELECT v FROM big ORDER BY v DESC", &[])
        .await
        .expect_err("over the limit");
    assert_eq!(e.code().map(|c| c.code()), Some("53200"), "{e}");

    // at a limit below what the sort holds (about 56 MB of row groups) it
    // spills sorted runs to disk and merges them: every row, in order.
    // (Row groups are counted at their own size: counted at the whole
    // file's, each batch weighed 28 MB and this failed.)
    c.batch_execute("SET eddy.query_memory_limit = '48MB'")
        .await
        .unwrap();
    let rows = c
        .query("SELECT v FROM big ORDER BY v DESC", &[])
        .await
        .expect("a sort spills within 48 MB");
    assert_eq!(rows.len(), ROWS as usize);
    let sorted: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert!(sorted.windows(2).all(|w| w[0] >= w[1]), "in order");
    let plan: String = c
        .query("EXPLAIN ANALYZE SELECT v FROM big ORDER BY v DESC", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(1))
        .collect();
    let spills: u64 = plan
        .split("spill_count=")
        .skip(1)
        .filter_map(|rest| {
            rest.split(|ch: char| !ch.is_ascii_digit())
                .next()
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum();
    assert!(spills > 0, "the sort spilled: {plan}");
    c.batch_execute("SET eddy.query_memory_limit = '16MB'")
        .await
        .unwrap();

    // a join that must hold all of one side cannot spill: 53200
    let e = c
        .query_one("SELECT count(*) FROM big a JOIN big b ON a.v = b.v", &[])
        .await
        .expect_err("over the limit");
    let db = e.as_db_error().expect("server error");
    assert_eq!(db.code().code(), "53200", "{}", db.message());
    assert!(
        db.message().contains("eddy.query_memory_limit"),
        "{}",
        db.message()
    );

    // the session and the server go on; with room both answer
    c.batch_execute("SET eddy.query_memory_limit = '256MB'")
        .await
        .unwrap();
    let rows = c
        .query("SELECT v FROM big ORDER BY v DESC", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), ROWS as usize);
    let first: String = rows[0].get(0);
    let last: String = rows[rows.len() - 1].get(0);
    assert!(first > last);
    let n: i64 = c
        .query_one("SELECT count(*) FROM big a JOIN big b ON a.v = b.v", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, ROWS);

    // point lookups on another connection answer while a large query runs
    let other = server.connect().await;
    let heavy = tokio::spawn(async move {
        let r = c.query("SELECT v FROM big ORDER BY v", &[]).await;
        (c, r.map(|rows| rows.len()))
    });
    let mut slowest = Duration::ZERO;
    for i in 0..50i64 {
        let t = Instant::now();
        let v: String = other
            .query_one("SELECT v FROM big WHERE id = $1", &[&(i * 1000 + 1)])
            .await
            .unwrap()
            .get(0);
        slowest = slowest.max(t.elapsed());
        assert!(v.ends_with(&(i * 1000 + 1).to_string()));
    }
    assert!(
        slowest < Duration::from_secs(2),
        "slowest lookup {slowest:?}"
    );
    let (c, sorted) = heavy.await.unwrap();
    assert_eq!(sorted.unwrap(), ROWS as usize);

    // sizes are checked, RESET restores the server's default
    let e = c
        .batch_execute("SET eddy.query_memory_limit = 'lots'")
        .await
        .expect_err("bad size");
    assert_eq!(e.code().map(|c| c.code()), Some("22023"));
    c.batch_execute("RESET eddy.query_memory_limit")
        .await
        .unwrap();
    let limit: String = c
        .query_one("SHOW eddy.query_memory_limit", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(limit, "262144kB");
}
