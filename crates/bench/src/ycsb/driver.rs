//! The YCSB load generator: loading, closed loop and open loop over tokio-postgres.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tokio_postgres::{Client, Statement};

use super::keys::KeyChooser;
use super::{create_table_sql, field_value, rows_csv, FIELDS, FIELD_LEN};
use crate::error::{BenchError, Result};
use crate::harness::pgwire::connect;
use crate::harness::servers::PgTarget;

/// The operation mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Mix {
    /// Workload C: 100% reads.
    C,
    /// Workload B: 95% reads, 5% updates.
    B,
}

impl Mix {
    fn update_fraction(self) -> f64 {
        match self {
            Mix::C => 0.0,
            Mix::B => 0.05,
        }
    }
}

/// What one measured run does.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The server.
    pub target: PgTarget,
    /// Rows in usertable (keys 0..records).
    pub records: u64,
    /// Operation mix.
    pub mix: Mix,
    /// Key chooser.
    pub keys: Arc<KeyChooser>,
    /// Connections.
    pub connections: usize,
    /// Requests in flight per connection (closed loop).
    pub depth: usize,
    /// Measured time.
    pub duration: Duration,
    /// Unmeasured time before it.
    pub warmup: Duration,
}

/// One measured run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunResult {
    /// "closed" or "open".
    pub mode: String,
    /// Connections.
    pub connections: usize,
    /// Pipeline depth per connection (closed loop).
    pub depth: usize,
    /// Offered rate (open loop), ops/s.
    pub target_rate: Option<f64>,
    /// Operations completed in the measured window.
    pub ops: u64,
    /// Of which reads.
    pub reads: u64,
    /// Of which updates.
    pub updates: u64,
    /// Failed operations (and reads that found no row).
    pub errors: u64,
    /// Requests not sent because too many were outstanding (open loop).
    pub dropped: u64,
    /// Achieved operations per second.
    pub qps: f64,
    /// Latency percentiles, microseconds.
    pub p50_us: u64,
    /// 95th percentile.
    pub p95_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Maximum.
    pub max_us: u64,
    /// Mean.
    pub mean_us: f64,
    /// First error seen, if any.
    pub first_error: Option<String>,
}

fn new_hist() -> Result<Histogram<u64>> {
    Histogram::<u64>::new_with_bounds(1, 120_000_000, 3)
        .map_err(|e| BenchError::Internal(format!("histogram: {e}")))
}

fn summarize(
    mode: &str,
    spec: &RunSpec,
    hist: &Histogram<u64>,
    counts: &Counts,
    secs: f64,
) -> RunResult {
    let ops = hist.len();
    RunResult {
        mode: mode.to_string(),
        connections: spec.connections,
        depth: spec.depth,
        target_rate: None,
        ops,
        reads: counts.reads.load(Ordering::Relaxed),
        updates: counts.updates.load(Ordering::Relaxed),
        errors: counts.errors.load(Ordering::Relaxed),
        dropped: counts.dropped.load(Ordering::Relaxed),
        qps: ops as f64 / secs.max(1e-9),
        p50_us: hist.value_at_quantile(0.50),
        p95_us: hist.value_at_quantile(0.95),
        p99_us: hist.value_at_quantile(0.99),
        p999_us: hist.value_at_quantile(0.999),
        max_us: hist.max(),
        mean_us: hist.mean(),
        first_error: counts.first_error.lock().ok().and_then(|e| e.clone()),
    }
}

#[derive(Default)]
struct Counts {
    reads: AtomicU64,
    updates: AtomicU64,
    errors: AtomicU64,
    dropped: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
}

impl Counts {
    fn error(&self, msg: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut e) = self.first_error.lock() {
            e.get_or_insert(msg);
        }
    }
}

/// A connection with its prepared statements.
struct Conn {
    client: Client,
    read: Statement,
    updates: Vec<Statement>,
}

async fn open_conn(target: &PgTarget) -> Result<Arc<Conn>> {
    let client = connect(target).await?;
    let read = client
        .prepare("SELECT * FROM usertable WHERE ycsb_key = $1")
        .await?;
    let mut updates = Vec::with_capacity(FIELDS);
    for f in 0..FIELDS {
        updates.push(
            client
                .prepare(&format!(
                    "UPDATE usertable SET field{f} = $1 WHERE ycsb_key = $2"
                ))
                .await?,
        );
    }
    Ok(Arc::new(Conn {
        client,
        read,
        updates,
    }))
}

/// One operation; Ok(true) for a read, Ok(false) for an update.
async fn one_op(
    conn: &Conn,
    spec_mix: Mix,
    keys: &KeyChooser,
    rng: &mut ChaCha8Rng,
    buf: &mut String,
) -> std::result::Result<bool, String> {
    let key = keys.next(rng) as i64;
    let update =
        spec_mix.update_fraction() > 0.0 && rng.random::<f64>() < spec_mix.update_fraction();
    if update {
        let f = rng.random_range(0..FIELDS);
        field_value(key as u64, f, rng.random::<u64>() | 1, buf);
        conn.client
            .execute(&conn.updates[f], &[&buf.as_str(), &key])
            .await
            .map(|_| false)
            .map_err(|e| crate::harness::error_chain(&e))
    } else {
        match conn.client.query_opt(&conn.read, &[&key]).await {
            Ok(Some(_)) => Ok(true),
            Ok(None) => Err(format!("key {key} not found")),
            Err(e) => Err(crate::harness::error_chain(&e)),
        }
    }
}

/// Creates usertable and loads `records` rows with COPY over `connections` connections.
pub async fn load(target: &PgTarget, records: u64, connections: usize) -> Result<f64> {
    let client = connect(target).await?;
    client
        .batch_execute("DROP TABLE IF EXISTS usertable")
        .await?;
    client.batch_execute(&create_table_sql()).await?;
    let start = Instant::now();
    let conns = connections.clamp(1, 16) as u64;
    let per = records.div_ceil(conns);
    let mut tasks = Vec::new();
    for c in 0..conns {
        let target = target.clone();
        let (lo, hi) = (c * per, ((c + 1) * per).min(records));
        tasks.push(tokio::spawn(async move {
            if lo >= hi {
                return Ok::<u64, BenchError>(0);
            }
            use futures::SinkExt;
            let client = connect(&target).await?;
            let sink = client
                .copy_in::<_, bytes::Bytes>("COPY usertable FROM STDIN (FORMAT csv)")
                .await?;
            futures::pin_mut!(sink);
            let mut s = lo;
            while s < hi {
                let e = (s + 10_000).min(hi);
                let mut buf =
                    Vec::with_capacity(((e - s) as usize) * (FIELDS * (FIELD_LEN + 1) + 12));
                rows_csv(s, e, &mut buf);
                sink.send(bytes::Bytes::from(buf)).await?;
                s = e;
            }
            Ok(sink.finish().await?)
        }));
    }
    let mut loaded = 0;
    for t in tasks {
        loaded += t
            .await
            .map_err(|e| BenchError::Internal(format!("load task: {e}")))??;
    }
    if loaded != records {
        return Err(BenchError::Peer {
            engine: "target".into(),
            detail: format!("COPY loaded {loaded} of {records} rows"),
        });
    }
    if let Err(e) = client.batch_execute("VACUUM ANALYZE usertable").await {
        tracing::debug!(error = %e, "VACUUM ANALYZE not supported");
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Closed loop: every connection keeps `depth` requests in flight for the whole run.
pub async fn closed_loop(spec: &RunSpec) -> Result<RunResult> {
    let mut conns = Vec::new();
    for _ in 0..spec.connections.max(1) {
        conns.push(open_conn(&spec.target).await?);
    }
    let counts = Arc::new(Counts::default());
    let start = Instant::now();
    let measure_from = start + spec.warmup;
    let end = measure_from + spec.duration;
    let mut tasks = Vec::new();
    for (ci, conn) in conns.iter().enumerate() {
        for w in 0..spec.depth.max(1) {
            let conn = conn.clone();
            let counts = counts.clone();
            let keys = spec.keys.clone();
            let mix = spec.mix;
            let seed = (ci * 1_000 + w) as u64;
            tasks.push(tokio::spawn(async move {
                let mut hist = new_hist()?;
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let mut buf = String::with_capacity(FIELD_LEN);
                loop {
                    let t0 = Instant::now();
                    if t0 >= end {
                        break;
                    }
                    let r = one_op(&conn, mix, &keys, &mut rng, &mut buf).await;
                    let lat = t0.elapsed().as_micros().max(1) as u64;
                    if t0 >= measure_from {
                        match r {
                            Ok(read) => {
                                let _ = hist.record(lat);
                                if read {
                                    counts.reads.fetch_add(1, Ordering::Relaxed);
                                } else {
                                    counts.updates.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            Err(e) => counts.error(e),
                        }
                    } else if let Err(e) = r {
                        counts.error(e);
                    }
                }
                Ok::<Histogram<u64>, BenchError>(hist)
            }));
        }
    }
    let mut hist = new_hist()?;
    for t in tasks {
        let h = t
            .await
            .map_err(|e| BenchError::Internal(format!("client task: {e}")))??;
        hist.add(&h)
            .map_err(|e| BenchError::Internal(format!("histogram: {e}")))?;
    }
    let secs = spec.duration.as_secs_f64();
    Ok(summarize("closed", spec, &hist, &counts, secs))
}

/// Open loop: requests start on a fixed schedule at `rate` ops/s in total,
/// spread round-robin over the connections; latency counts from the scheduled start.
pub async fn open_loop(spec: &RunSpec, rate: f64) -> Result<RunResult> {
    if !(rate > 0.0 && rate.is_finite()) {
        return Err(BenchError::InvalidArgument(format!(
            "bad open-loop rate {rate}"
        )));
    }
    let mut conns = Vec::new();
    for _ in 0..spec.connections.max(1) {
        conns.push(open_conn(&spec.target).await?);
    }
    let counts = Arc::new(Counts::default());
    let (lat_tx, mut lat_rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let start = Instant::now() + Duration::from_millis(20);
    let measure_from = start + spec.warmup;
    let end = measure_from + spec.duration;
    const MAX_OUTSTANDING: usize = 4096;
    let mut senders = Vec::new();
    let mut dispatchers = Vec::new();
    for (ci, conn) in conns.iter().enumerate() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        senders.push(tx);
        let conn = conn.clone();
        let counts = counts.clone();
        let keys = spec.keys.clone();
        let mix = spec.mix;
        let lat_tx = lat_tx.clone();
        dispatchers.push(tokio::spawn(async move {
            let sem = Arc::new(tokio::sync::Semaphore::new(MAX_OUTSTANDING));
            let mut rng = ChaCha8Rng::seed_from_u64(ci as u64 + 77);
            let mut inflight = Vec::new();
            while let Some(intended) = rx.recv().await {
                let Ok(permit) = sem.clone().try_acquire_owned() else {
                    counts.dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let conn = conn.clone();
                let counts = counts.clone();
                let keys = keys.clone();
                let lat_tx = lat_tx.clone();
                let mut op_rng = ChaCha8Rng::seed_from_u64(rng.random());
                inflight.push(tokio::spawn(async move {
                    let mut buf = String::with_capacity(FIELD_LEN);
                    let r = one_op(&conn, mix, &keys, &mut op_rng, &mut buf).await;
                    let lat = intended.elapsed().as_micros().max(1) as u64;
                    drop(permit);
                    if intended >= measure_from {
                        match r {
                            Ok(read) => {
                                let _ = lat_tx.send(lat);
                                if read {
                                    counts.reads.fetch_add(1, Ordering::Relaxed);
                                } else {
                                    counts.updates.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            Err(e) => counts.error(e),
                        }
                    }
                }));
                if inflight.len() > 8192 {
                    inflight.retain(|h| !h.is_finished());
                }
            }
            for h in inflight {
                let _ = h.await;
            }
        }));
    }
    drop(lat_tx);
    // The pacer is an OS thread: tokio's timer has 1 ms granularity, too coarse for
    // schedules of tens of thousands of requests per second.
    let pacer = std::thread::spawn(move || {
        let period = Duration::from_secs_f64(1.0 / rate);
        let mut i: u64 = 0;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            loop {
                let next = start + period.mul_f64(i as f64);
                if next > now {
                    break;
                }
                let c = (i as usize) % senders.len();
                if senders[c].send(next).is_err() {
                    return;
                }
                i += 1;
            }
            let next = start + period.mul_f64(i as f64);
            let wait = next.saturating_duration_since(Instant::now());
            std::thread::sleep(wait.min(Duration::from_micros(200)));
        }
    });
    let collector = tokio::spawn(async move {
        let mut hist = new_hist()?;
        while let Some(l) = lat_rx.recv().await {
            let _ = hist.record(l);
        }
        Ok::<Histogram<u64>, BenchError>(hist)
    });
    pacer
        .join()
        .map_err(|_| BenchError::Internal("pacer thread panicked".into()))?;
    for d in dispatchers {
        d.await
            .map_err(|e| BenchError::Internal(format!("dispatcher: {e}")))?;
    }
    let hist = collector
        .await
        .map_err(|e| BenchError::Internal(format!("collector: {e}")))??;
    let mut r = summarize("open", spec, &hist, &counts, spec.duration.as_secs_f64());
    r.target_rate = Some(rate);
    Ok(r)
}
