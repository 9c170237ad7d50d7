//! A client that disconnects in the middle of a statement stops it: the
//! server checks every connection's socket (every 100 ms) while the
//! protocol task is busy, and drops the running statement when the client
//! is gone, so its CPU is released (PostgreSQL notices at its next write;
//! a long aggregate would otherwise run to its end).

mod common;

use std::time::Duration;

use common::Server;

/// The server process's CPU time so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // fields after the command name, which is in parentheses
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnected_clients_statement_stops() {
    let server = Server::start("trust");
    let pid = server.child.id();
    let conn = format!(
        "host=127.0.0.1 port={} user=eddy password=x dbname=eddy",
        server.port
    );
    let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
        .await
        .unwrap();
    let conn_task = tokio::spawn(connection);
    let query = tokio::spawn(async move {
        client
            .query_one("SELECT count(*) FROM generate_series(1, 20000000000)", &[])
            .await
            .map(|_| ())
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let busy_from = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let busy = cpu_ticks(pid) - busy_from;
    assert!(busy >= 30, "the statement was running: {busy} ticks in 1 s");

    // the client goes away without a word (its socket closes)
    conn_task.abort();
    query.abort();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let from = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after = cpu_ticks(pid) - from;
    assert!(
        after <= 15,
        "the server still burns CPU after the client left: {after} ticks in 1 s (was {busy})"
    );
    // and serves others
    let c = server.connect().await;
    let one: i64 = c.query_one("SELECT 1::bigint", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
}
