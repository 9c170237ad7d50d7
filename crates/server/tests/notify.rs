//! LISTEN / NOTIFY between sessions of the real server: a listener that
//! sends nothing still receives (the connection waits on its socket and
//! its mailbox), with the notifier's backend pid; a rolled-back NOTIFY
//! sends nothing; a committed block sends each distinct notification once,
//! in order; a listener inside a block receives at its end; a session that
//! goes leaves no registration behind. What SQL sees of it:
//! `tests/slt/notify.slt`.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio_postgres::{AsyncMessage, Client, NoTls, Notification, SimpleQueryMessage};

mod common;
use common::*;

/// A connection whose notifications come out of the receiver.
async fn listener(srv: &Server) -> (Client, UnboundedReceiver<Notification>) {
    let conn = format!(
        "host=127.0.0.1 port={} user=eddy password=secret dbname=eddy",
        srv.port
    );
    let (client, mut connection) = tokio_postgres::connect(&conn, NoTls)
        .await
        .expect("connect");
    let (tx, rx) = unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(m) = messages.next().await {
            match m {
                Ok(AsyncMessage::Notification(n)) => {
                    let _ = tx.send(n);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    (client, rx)
}

async fn pid(c: &Client) -> i32 {
    c.query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0)
}

async fn run(c: &Client, sql: &str) {
    c.batch_execute(sql).await.expect(sql);
}

/// The next notification, waiting up to 10 s.
async fn next(rx: &mut UnboundedReceiver<Notification>) -> Notification {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a notification within 10 s")
        .expect("connection open")
}

/// Nothing arrives within `ms`.
async fn quiet(rx: &mut UnboundedReceiver<Notification>, ms: u64) {
    if let Ok(Some(n)) = tokio::time::timeout(Duration::from_millis(ms), rx.recv()).await {
        panic!(
            "unexpected notification {:?} {:?}",
            n.channel(),
            n.payload()
        );
    }
}

fn seen(n: &Notification) -> (i32, String, String) {
    (n.process_id(), n.channel().into(), n.payload().into())
}

#[tokio::test(flavor = "multi_thread")]
async fn notifications_reach_idle_listeners_transactionally() {
    let srv = Server::start("trust");
    let (l, mut rx) = listener(&srv).await;
    let (n, _n_rx) = listener(&srv).await;
    let (l_pid, n_pid) = (pid(&l).await, pid(&n).await);
    assert_ne!(l_pid, n_pid);
    run(&l, "LISTEN jobs; LISTEN \"Other\"").await;

    // the listener is idle: delivered without it sending anything
    run(&n, "NOTIFY jobs, 'hello'").await;
    assert_eq!(
        seen(&next(&mut rx).await),
        (n_pid, "jobs".into(), "hello".into())
    );
    run(&n, "NOTIFY jobs").await;
    assert_eq!(
        seen(&next(&mut rx).await),
        (n_pid, "jobs".into(), "".into())
    );

    // rolled back: nothing; nor for a channel nobody listens on
    run(&n, "BEGIN; NOTIFY jobs, 'never'; ROLLBACK").await;
    run(&n, "BEGIN").await;
    run(&n, "NOTIFY jobs, 'never either'").await;
    run(&n, "ROLLBACK").await;
    run(&n, "NOTIFY nobody_listens, 'x'").await;
    quiet(&mut rx, 300).await;

    // a block: at COMMIT, each distinct (channel, payload) once, in order;
    // what follows a ROLLBACK TO SAVEPOINT only
    run(&n, "BEGIN").await;
    run(&n, "NOTIFY jobs, 'a'").await;
    quiet(&mut rx, 200).await;
    run(&n, "NOTIFY \"Other\", 'b'").await;
    run(&n, "NOTIFY jobs, 'a'").await;
    run(&n, "SAVEPOINT s").await;
    run(&n, "NOTIFY jobs, 'undone'").await;
    run(&n, "ROLLBACK TO SAVEPOINT s").await;
    run(&n, "SELECT pg_notify('jobs', 'c')").await;
    run(&n, "NOTIFY jobs, 'b'").await;
    quiet(&mut rx, 200).await;
    run(&n, "COMMIT").await;
    let got: Vec<_> = [
        next(&mut rx).await,
        next(&mut rx).await,
        next(&mut rx).await,
        next(&mut rx).await,
    ]
    .iter()
    .map(|x| (x.channel().to_string(), x.payload().to_string()))
    .collect();
    let want = [("jobs", "a"), ("Other", "b"), ("jobs", "c"), ("jobs", "b")]
        .map(|(c, p)| (c.to_string(), p.to_string()));
    assert_eq!(got, want);
    quiet(&mut rx, 300).await;

    // pg_notify outside a block, over the extended protocol too
    n.query("SELECT pg_notify('jobs', $1)", &[&"extended"])
        .await
        .expect("pg_notify");
    assert_eq!(next(&mut rx).await.payload(), "extended");
    n.execute("NOTIFY jobs, 'prepared'", &[])
        .await
        .expect("NOTIFY");
    assert_eq!(next(&mut rx).await.payload(), "prepared");

    // a listener inside a block receives when the block ends
    run(&l, "BEGIN").await;
    run(&n, "NOTIFY jobs, 'wait'").await;
    quiet(&mut rx, 300).await;
    run(&l, "SELECT 1").await;
    quiet(&mut rx, 100).await;
    run(&l, "COMMIT").await;
    assert_eq!(next(&mut rx).await.payload(), "wait");

    // a listener hears itself, with its own pid, right after the command
    run(&l, "NOTIFY jobs, 'self'").await;
    assert_eq!(
        seen(&next(&mut rx).await),
        (l_pid, "jobs".into(), "self".into())
    );

    // UNLISTEN: no more
    run(&l, "UNLISTEN jobs").await;
    run(&n, "NOTIFY jobs, 'gone'; NOTIFY \"Other\", 'still'").await;
    assert_eq!(next(&mut rx).await.payload(), "still");
    quiet(&mut rx, 200).await;
}

/// One transaction sending `count` distinct notifications on `full`.
async fn notify_many(c: &Client, from: u32, count: u32) -> Result<(), String> {
    run(c, "BEGIN").await;
    c.simple_query(&format!(
        "SELECT count(pg_notify('full', g::text)) FROM generate_series({from}, {}) AS g",
        from + count - 1
    ))
    .await
    .map_err(|e| e.to_string())?;
    match c.simple_query("COMMIT").await {
        Ok(_) => Ok(()),
        Err(e) => Err(e.code().map(|c| c.code().to_string()).unwrap_or_default()),
    }
}

/// A listener that never reads (inside a block) fills its mailbox: the
/// notifier's COMMIT fails with 54000 instead of waiting or growing the
/// queue. Once that listener disconnects, its registration is gone and the
/// same COMMIT succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn full_mailbox_refuses_commit_and_disconnect_cleans_up() {
    let srv = Server::start("trust");
    let (slow, _slow_rx) = listener(&srv).await;
    let (n, _n_rx) = listener(&srv).await;
    run(&slow, "LISTEN full").await;
    run(&slow, "BEGIN").await;
    notify_many(&n, 0, 6000).await.expect("first 6000 fit");
    assert_eq!(
        notify_many(&n, 6000, 6000).await,
        Err("54000".to_string()),
        "10,000 notifications wait for the slow listener"
    );
    drop(slow);
    let mut result = Err(String::new());
    for _ in 0..100 {
        result = notify_many(&n, 6000, 6000).await;
        if result.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(result, Ok(()), "the closed session's mailbox is gone");
    let rows = n
        .simple_query("SELECT count(*) FROM pg_listening_channels()")
        .await
        .expect("channels");
    assert!(rows
        .iter()
        .any(|m| matches!(m, SimpleQueryMessage::Row(r) if r.get(0) == Some("0"))));
}
