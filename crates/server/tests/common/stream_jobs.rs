//! Progress of a materialized view's job, read from the server's
//! `eddy_stream_checkpoints` table, for the stream tests.

use std::time::{Duration, Instant};

use tokio_postgres::Client;

/// The source rows view `job`'s last commit recorded, and whether that
/// commit was its final one (the source finished).
pub async fn recorded(c: &Client, job: &str) -> Option<(i64, bool)> {
    c.query(
        "SELECT source_rows, checkpoint FROM eddy_stream_checkpoints WHERE job = $1",
        &[&job],
    )
    .await
    .expect("checkpoint row")
    .first()
    .map(|r| (r.get(0), r.get::<_, i64>(1) == i64::MAX))
}

/// Waits (at most `limit`) for view `job`'s final commit; its source rows.
pub async fn wait_finished(c: &Client, job: &str, limit: Duration) -> i64 {
    let deadline = Instant::now() + limit;
    loop {
        if let Some((rows, true)) = recorded(c, job).await {
            return rows;
        }
        assert!(Instant::now() < deadline, "view {job} did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (at most 60 s) until view `job` has committed more than `than`
/// source rows, or finished.
pub async fn recorded_after(c: &Client, job: &str, than: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if recorded(c, job)
            .await
            .is_some_and(|(rows, done)| rows > than || done)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{job} made no progress past {than}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
