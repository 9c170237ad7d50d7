//! Kafka sources and sinks end to end: the real `eddy server` binary and a
//! real Apache Kafka broker (KRaft, from `scripts/ci/install-kafka.sh`).
//!
//! * JSON records produced into a 3-partition topic are aggregated by a
//!   materialized view over a Kafka source; the view equals the answer
//!   computed from the produced records. The server is killed (-9) while
//!   records are still being produced and restarted: once the producer
//!   stops, every record is counted exactly once.
//! * A Kafka sink writes the view's rows to a topic as upserts keyed by
//!   the view's key; the topic, read back and folded by key (last value
//!   wins, a tombstone deletes), equals the view.
//! * Bad options, an unreachable broker, a missing topic and a malformed
//!   record are refused or fail the job with a visible error.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rskafka::client::partition::{Compression, OffsetAt, UnknownTopicHandling};
use rskafka::record::Record;
use tokio_postgres::Client;

mod common;
#[path = "common/kafka.rs"]
mod kafka;
use common::*;
use kafka::Broker;

/// k → (count, sum of v).
type Agg = BTreeMap<String, (i64, i64)>;

const KEYS: u64 = 7;
const PARTITIONS: i32 = 3;

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

fn event(i: u64) -> (String, i64) {
    (format!("k{}", i % KEYS), (i * 7 % 1000) as i64)
}

fn answer(n: u64) -> Agg {
    let mut out = Agg::new();
    for i in 0..n {
        let (k, v) = event(i);
        let g = out.entry(k).or_default();
        g.0 += 1;
        g.1 += v;
    }
    out
}

/// Produces events `from..to` as JSON, spread over the partitions.
async fn produce(broker: &Broker, topic: &str, from: u64, to: u64) {
    let client = broker.client().await;
    let ts = chrono::DateTime::from_timestamp_millis(1_700_000_000_000).expect("ts");
    for p in 0..PARTITIONS {
        let pc = client
            .partition_client(topic, p, UnknownTopicHandling::Retry)
            .await
            .expect("partition");
        let records: Vec<Record> = (from..to)
            .filter(|i| (*i % PARTITIONS as u64) as i32 == p)
            .map(|i| {
                let (k, v) = event(i);
                Record {
                    key: None,
                    // an extra field, and fields in another order, are fine
                    value: Some(
                        format!(r#"{{"v":{v},"k":"{k}","seq":{i},"note":"x"}}"#).into_bytes(),
                    ),
                    headers: BTreeMap::new(),
                    timestamp: ts,
                }
            })
            .collect();
        pc.produce(records, Compression::NoCompression)
            .await
            .expect("produce");
    }
}

async fn view(c: &Client) -> Agg {
    c.query("SELECT k, n, total FROM per_k", &[])
        .await
        .expect("view")
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect()
}

/// Waits (at most `limit`) until the view equals `want`; a count above
/// the answer at any time is a record counted twice.
async fn converges(c: &Client, want: &Agg, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let got = view(c).await;
        for (k, (n, _)) in &got {
            let most = want.get(k).map_or(0, |w| w.0);
            assert!(
                *n <= most,
                "key {k} counted {n} times, at most {most} records"
            );
        }
        if &got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the view did not converge: {got:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The sink topic read from the start, folded by key.
async fn sink_topic(broker: &Broker, topic: &str) -> Agg {
    let client = broker.client().await;
    let mut out = Agg::new();
    for p in 0..2 {
        let pc = client
            .partition_client(topic, p, UnknownTopicHandling::Retry)
            .await
            .expect("partition");
        let end = pc.get_offset(OffsetAt::Latest).await.expect("end");
        let mut offset = pc.get_offset(OffsetAt::Earliest).await.expect("start");
        while offset < end {
            let (records, _) = pc
                .fetch_records(offset, 1..1_000_000, 1000)
                .await
                .expect("fetch");
            for r in records {
                offset = offset.max(r.offset + 1);
                let key: serde_json::Value =
                    serde_json::from_slice(r.record.key.as_deref().expect("a key"))
                        .expect("the key is JSON");
                let k = key["k"].as_str().expect("key k").to_string();
                match r.record.value {
                    None => {
                        out.remove(&k);
                    }
                    Some(v) => {
                        let v: serde_json::Value = serde_json::from_slice(&v).expect("JSON value");
                        assert_eq!(v["k"], key["k"], "the key is the row's key");
                        out.insert(
                            k,
                            (
                                v["n"].as_i64().expect("n"),
                                v["total"].as_i64().expect("total"),
                            ),
                        );
                    }
                }
            }
        }
    }
    out
}

fn source_sql(name: &str, topic: &str, broker: &str, extra: &str) -> String {
    format!(
        "CREATE SOURCE {name} (k text, v bigint) WITH (connector = 'kafka', topic = '{topic}', \
         properties.bootstrap.server = '{broker}'{extra}) FORMAT JSON"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_source_view_and_sink_exactly_once_across_kill_9() {
    let Some(broker) = Broker::start() else {
        return;
    };
    broker.create_topic("events", PARTITIONS).await;
    broker.create_topic("totals", 2).await;
    const FIRST: u64 = 3000;
    const TOTAL: u64 = 9000;
    produce(&broker, "events", 0, FIRST).await;

    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let srv = Server::start_in(None, data.clone(), "trust");
    let c = srv.connect().await;
    c.batch_execute(&source_sql(
        "events",
        "events",
        &broker.address(),
        ", scan.startup.mode = 'earliest'",
    ))
    .await
    .expect("create source");
    c.batch_execute(
        "CREATE MATERIALIZED VIEW per_k WITH (checkpoint_interval_ms = 100) AS \
         SELECT k, count(*) AS n, sum(v) AS total FROM events GROUP BY k",
    )
    .await
    .expect("create view");
    converges(&c, &answer(FIRST), Duration::from_secs(60)).await;
    let position: String = c
        .query_one(
            "SELECT source_position FROM eddy_stream_checkpoints WHERE job = 'per_k'",
            &[],
        )
        .await
        .expect("checkpoint row")
        .get(0);
    assert_eq!(
        position, "kafka 0:1000,1:1000,2:1000",
        "the committed offsets of every partition"
    );
    c.batch_execute(&format!(
        "CREATE SINK totals_out FROM per_k WITH (connector = 'kafka', topic = 'totals', \
         properties.bootstrap.server = '{}') FORMAT JSON",
        broker.address()
    ))
    .await
    .expect("create sink");

    // more records while the server is killed and restarted
    let mut srv = srv;
    let mut produced = FIRST;
    let mut killed = false;
    while produced < TOTAL {
        let next = (produced + 500).min(TOTAL);
        produce(&broker, "events", produced, next).await;
        produced = next;
        if !killed && produced >= FIRST + 2500 {
            // let the view take part of it, then kill -9 mid-stream
            tokio::time::sleep(Duration::from_millis(150)).await;
            let _ = srv.child.kill();
            let _ = srv.child.wait();
            killed = true;
            produce(&broker, "events", produced, produced + 500).await;
            produced += 500;
            srv = Server::start_in(None, data.clone(), "trust");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(killed);
    let c = srv.connect().await;
    converges(&c, &answer(TOTAL), Duration::from_secs(60)).await;

    // the sink's topic, folded by key, equals the view
    let want = view(&c).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = sink_topic(&broker, "totals").await;
        if got == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sink topic does not match the view: {got:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let jobs = c.query("SHOW JOBS", &[]).await.expect("show jobs");
    let sink = jobs
        .iter()
        .find(|r| r.get::<_, String>(0) == "sink totals_out")
        .expect("the sink's job is listed");
    assert!(
        sink.get::<_, String>(1).starts_with("running"),
        "{:?}",
        sink.get::<_, String>(1)
    );
    let sinks = c.query("SHOW SINKS", &[]).await.expect("show sinks");
    assert_eq!(sinks.len(), 1);
    assert_eq!(sinks[0].get::<_, String>(1), "per_k");

    // a view with a sink cannot be dropped before the sink
    let e = c
        .batch_execute("DROP MATERIALIZED VIEW per_k")
        .await
        .expect_err("the sink depends on it");
    assert_eq!(code(&e), "2BP01", "{e:?}");
    c.batch_execute("DROP SINK totals_out; DROP MATERIALIZED VIEW per_k; DROP SOURCE events")
        .await
        .expect("drop");

    refusals_and_failures(&c, &broker).await;
}

/// Options Eddy does not implement, an unreachable broker, a missing
/// topic, and a malformed record.
async fn refusals_and_failures(c: &Client, broker: &Broker) {
    let addr = broker.address();
    for (sql, state) in [
        (
            source_sql(
                "s",
                "events",
                &addr,
                ", properties.security.protocol = 'SSL'",
            ),
            "0A000",
        ),
        (
            source_sql("s", "events", &addr, ", scan.startup.mode = 'timestamp'"),
            "22023",
        ),
        (
            source_sql("s", "events", &addr, ", group.id = 'g'"),
            "22023",
        ),
        (
            format!(
                "CREATE SOURCE s (k text) WITH (connector = 'kafka', topic = 'events', \
                 properties.bootstrap.server = '{addr}') FORMAT AVRO"
            ),
            "0A000",
        ),
        (
            format!(
                "CREATE SOURCE s (k text) WITH (connector = 'kafka', topic = 'events', \
                 properties.bootstrap.server = '{addr}')"
            ),
            "22023",
        ),
        (source_sql("s", "no_such_topic", &addr, ""), "55000"),
    ] {
        match c.batch_execute(&sql).await {
            Ok(()) => panic!("{sql}: accepted, expected {state}"),
            Err(e) => assert_eq!(code(&e), state, "{sql}: {e:?}"),
        }
    }
    let unreachable = c
        .batch_execute(&source_sql(
            "s",
            "events",
            &format!("127.0.0.1:{}", free_port()),
            "",
        ))
        .await
        .expect_err("unreachable");
    assert_eq!(code(&unreachable), "55000", "{unreachable:?}");
    assert!(
        format!("{unreachable:?}").contains("cannot reach Kafka broker"),
        "{unreachable:?}"
    );

    // a malformed record stops the job with its partition and offset
    broker.create_topic("bad", 1).await;
    let client = broker.client().await;
    let pc = client
        .partition_client("bad", 0, UnknownTopicHandling::Retry)
        .await
        .expect("partition");
    let ts = chrono::DateTime::from_timestamp_millis(1_700_000_000_000).expect("ts");
    let record = |v: &str| Record {
        key: None,
        value: Some(v.as_bytes().to_vec()),
        headers: BTreeMap::new(),
        timestamp: ts,
    };
    pc.produce(
        vec![record(r#"{"k":"a","v":1}"#), record("{not json")],
        Compression::NoCompression,
    )
    .await
    .expect("produce");
    c.batch_execute(&source_sql("bad_src", "bad", &addr, ""))
        .await
        .expect("source");
    c.batch_execute(
        "CREATE MATERIALIZED VIEW bad_view AS SELECT k, count(*) AS n FROM bad_src GROUP BY k",
    )
    .await
    .expect("view");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let jobs = c.query("SHOW JOBS", &[]).await.expect("show jobs");
        let status: String = jobs
            .iter()
            .find(|r| r.get::<_, String>(0) == "bad_view")
            .expect("listed")
            .get(1);
        if status.starts_with("failed") {
            assert!(
                status.contains("malformed record") && status.contains("offset 1"),
                "{status}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the job did not fail: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // the view is readable and holds at most the record before the bad one
    let rows = c
        .query("SELECT k, n FROM bad_view", &[])
        .await
        .expect("the view is readable");
    for r in &rows {
        assert_eq!((r.get::<_, String>(0), r.get::<_, i64>(1)), ("a".into(), 1));
    }
}

/// Ingest rate from Kafka into a view (docs/benchmarks/stream.md):
/// `EDDY_KAFKA_BENCH_RECORDS` (default 300 000) JSON records already in a
/// 3-partition topic, then a view over them; the time until the view's
/// commit covers all of them.
///
/// `cargo test --release -p eddy-server --test stream_kafka -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn kafka_ingest_rate() {
    let Some(broker) = Broker::start() else {
        return;
    };
    let n: u64 = std::env::var("EDDY_KAFKA_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    broker.create_topic("bench", PARTITIONS).await;
    let started = Instant::now();
    let mut at = 0;
    while at < n {
        let next = (at + 30_000).min(n);
        produce(&broker, "bench", at, next).await;
        at = next;
    }
    eprintln!(
        "produced {n} records in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let srv = Server::start("trust");
    let c = srv.connect().await;
    c.batch_execute(&source_sql("bench", "bench", &broker.address(), ""))
        .await
        .expect("source");
    let started = Instant::now();
    c.batch_execute(
        "CREATE MATERIALIZED VIEW per_k AS \
         SELECT k, count(*) AS n, sum(v) AS total FROM bench GROUP BY k",
    )
    .await
    .expect("view");
    converges(&c, &answer(n), Duration::from_secs(600)).await;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "BENCH kafka -> view: {n} records in {secs:.2} s = {:.0} records/s",
        n as f64 / secs
    );
}
