//! `eddy bench mixed`: point-lookup latency while analytical queries run
//! on the same server (issue 16's serving-isolation benchmark).
//!
//! For each engine (Eddy and PostgreSQL 15, each started here on the same
//! machine, one after the other): load SSB at `--sf` and a YCSB usertable
//! of `--records` rows, then for each background count K in
//! `--background` (default 0, 1, 4, 16): start K connections that loop
//! over the 13 SSB queries (each starting at a different query, so the
//! predicates vary between them), run YCSB workload C as an open loop at
//! `--rate` lookups/s (prepared `SELECT * FROM usertable WHERE ycsb_key =
//! $1`, one request in flight per request slot, latency from each
//! request's scheduled start, so queueing cannot hide), then cancel the
//! background queries. Reported per engine and K: the lookup latency
//! percentiles and the analytical queries completed per second; the
//! headline figure is p99(K = 16) / p99(K = 0) per engine.
//! Nothing here knows Eddy's internals: it is a client, as a user is.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::dataset::{dataset_dir_name, generate_or_reuse, WriteOptions};
use crate::error::{BenchError, Result};
use crate::harness::pgwire::{self, LoadPath};
use crate::harness::servers::{EddyServer, PgTarget, PostgresServer};
use crate::harness::{block_on, Workload};
use crate::ssb::gen::{SsbGenerator, SsbOptions};
use crate::ycsb::driver::{self, Mix, RunResult, RunSpec};
use crate::ycsb::Distribution;

/// `eddy bench mixed`.
#[derive(Debug, Clone, Args)]
pub struct MixedArgs {
    /// SSB scale factor of the analytical data.
    #[arg(long, default_value_t = 1.0)]
    pub sf: f64,
    /// Rows of the usertable that lookups read.
    #[arg(long, default_value_t = 100_000)]
    pub records: u64,
    /// Lookups per second (open loop).
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Connections the lookups are spread over.
    #[arg(long, default_value_t = 4)]
    pub lookup_connections: usize,
    /// Background analytical connections, one phase per count.
    #[arg(long, default_value = "0,1,4,16")]
    pub background: String,
    /// Measured seconds per phase.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Unmeasured seconds before each phase's measurement.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Engines, in order: eddy, postgres.
    #[arg(long, default_value = "eddy,postgres")]
    pub engines: String,
    /// Directory that holds data sets (generated when missing).
    #[arg(long, default_value = "bench-data")]
    pub data: PathBuf,
    /// Where mixed.json and mixed.md go.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// The `eddy` executable to start [default: this one / a sibling].
    #[arg(long)]
    pub eddy_bin: Option<PathBuf>,
    /// A configuration file for the Eddy server started here (e.g. its
    /// `[scheduler]` section).
    #[arg(long)]
    pub eddy_config: Option<PathBuf>,
    /// PostgreSQL's bin directory [default: found on the machine].
    #[arg(long)]
    pub pg_bin: Option<PathBuf>,
}

/// One phase: lookups with `background` analytical connections running.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Phase {
    pub background: usize,
    pub lookups: RunResult,
    /// Analytical queries completed during the phase, per second.
    pub analytical_per_s: f64,
    /// Analytical queries that failed (a cancel at the end is not counted).
    pub analytical_errors: u64,
    /// Eddy only: polls of analytical contexts during the phase by CPU
    /// time (`eddy_sched_poll_seconds`), as (upper bound in seconds, count
    /// in that bucket); the quanta a lookup may wait for.
    #[serde(default)]
    pub analytics_polls: Vec<(String, u64)>,
}

/// One engine's phases.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EngineMixed {
    pub engine: String,
    pub version: String,
    pub phases: Vec<Phase>,
}

/// The whole report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MixedReport {
    pub date: String,
    pub machine: String,
    pub command: String,
    pub sf: f64,
    pub records: u64,
    pub rate: f64,
    pub duration_s: f64,
    pub engines: Vec<EngineMixed>,
}

/// Runs `eddy bench mixed`.
pub fn run(a: MixedArgs) -> Result<()> {
    let counts: Vec<usize> = crate::cli::split_list(&a.background)?
        .iter()
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| BenchError::InvalidArgument(format!("bad background count `{s}`")))
        })
        .collect::<Result<_>>()?;
    if !(a.rate > 0.0 && a.duration > 0.0 && a.warmup >= 0.0 && a.records > 0) {
        return Err(BenchError::InvalidArgument(
            "rate, duration and records must be positive".into(),
        ));
    }
    let gen = SsbGenerator::new(SsbOptions {
        sf: a.sf,
        ..SsbOptions::default()
    })?;
    let dir = a.data.join(dataset_dir_name("ssb", a.sf));
    let manifest = generate_or_reuse(&gen, &dir, &WriteOptions::default())?;
    let workload = Workload {
        benchmark: "ssb",
        sf: a.sf,
        dir,
        manifest,
        tables: crate::ssb::TABLES.iter().map(|t| t.to_string()).collect(),
        fact_table: crate::ssb::FACT_TABLE,
        queries: crate::ssb::queries::QUERIES
            .iter()
            .map(|(n, q)| (n.to_string(), q.to_string()))
            .collect(),
    };
    let mut report = MixedReport {
        date: crate::harness::report::now_utc(),
        machine: crate::harness::machine_description(),
        command: crate::cli::command_line(),
        sf: a.sf,
        records: a.records,
        rate: a.rate,
        duration_s: a.duration,
        engines: Vec::new(),
    };
    for engine in crate::cli::split_list(&a.engines)? {
        // each server lives for its own engine's phases only
        let (target, version, eddy, _pg) = match engine.as_str() {
            "eddy" => {
                let bin = EddyServer::find_binary(a.eddy_bin.clone())?;
                let extra: Vec<std::ffi::OsString> = match &a.eddy_config {
                    Some(c) => vec!["--config".into(), c.clone().into_os_string()],
                    None => Vec::new(),
                };
                let s = EddyServer::start_with_args(&bin, &std::env::temp_dir(), &extra)?;
                (s.target.clone(), String::new(), Some(s), None)
            }
            "postgres" => {
                let s = PostgresServer::start(a.pg_bin.clone())?;
                let v = s.version();
                (s.target.clone(), v, None, Some(s))
            }
            other => {
                return Err(BenchError::InvalidArgument(format!(
                    "unknown engine `{other}` (eddy, postgres)"
                )))
            }
        };
        let w = workload.clone();
        let (a2, counts2, engine2) = (a.clone(), counts.clone(), engine.clone());
        let metrics_port = eddy.as_ref().map(|e| e.http_port);
        let result = block_on(async move {
            let version = if version.is_empty() {
                pgwire::server_version(&target).await
            } else {
                version
            };
            eprintln!(
                "[{engine2}] loading SSB sf {} and usertable ({} rows)",
                a2.sf, a2.records
            );
            pgwire::load(&target, &w, LoadPath::CsvStdin, 2).await?;
            driver::load(&target, a2.records, 2).await?;
            let mut phases = Vec::new();
            for k in counts2 {
                eprintln!("[{engine2}] {k} background queries, {} lookups/s", a2.rate);
                let before = metrics_port.map(analytics_poll_buckets);
                let mut p = phase(&target, &w, &a2, k).await?;
                if let (Some(port), Some(before)) = (metrics_port, before) {
                    let after = analytics_poll_buckets(port);
                    p.analytics_polls = after
                        .into_iter()
                        .map(|(le, n)| {
                            let was = before.iter().find(|(l, _)| *l == le).map_or(0, |(_, n)| *n);
                            (le, n.saturating_sub(was))
                        })
                        .collect();
                }
                phases.push(p);
            }
            Ok(EngineMixed {
                engine: engine2,
                version,
                phases,
            })
        })?;
        report.engines.push(result);
    }
    std::fs::create_dir_all(&a.out).map_err(|e| BenchError::io(&a.out, e))?;
    let json = a.out.join("mixed.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)
        .map_err(|e| BenchError::io(&json, e))?;
    let md = a.out.join("mixed.md");
    let text = markdown(&report);
    std::fs::write(&md, &text).map_err(|e| BenchError::io(&md, e))?;
    println!("{text}");
    Ok(())
}

async fn phase(target: &PgTarget, w: &Workload, a: &MixedArgs, background: usize) -> Result<Phase> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mut loops = Vec::new();
    let mut cancels = Vec::new();
    for i in 0..background {
        let client = pgwire::connect(target).await?;
        cancels.push(client.cancel_token());
        let queries: Vec<String> = w.queries.iter().map(|(_, q)| q.clone()).collect();
        let (stop, done, errors) = (Arc::clone(&stop), Arc::clone(&done), Arc::clone(&errors));
        loops.push(tokio::spawn(async move {
            let mut q = i % queries.len().max(1);
            while !stop.load(Ordering::Relaxed) {
                let Some(sql) = queries.get(q) else { break };
                match client.simple_query(sql).await {
                    Ok(_) => {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        if !stop.load(Ordering::Relaxed) {
                            errors.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(error = %crate::harness::error_chain(&e), "analytical query failed");
                        }
                    }
                }
                q = (q + 1) % queries.len();
            }
        }));
    }
    let spec = RunSpec {
        target: target.clone(),
        records: a.records,
        mix: Mix::C,
        keys: Arc::new(Distribution::Uniform.chooser(a.records)),
        connections: a.lookup_connections.max(1),
        depth: 1,
        duration: Duration::from_secs_f64(a.duration),
        warmup: Duration::from_secs_f64(a.warmup),
    };
    // count analytical completions over the measured window only
    tokio::time::sleep(spec.warmup).await;
    let before = done.load(Ordering::Relaxed);
    let started = Instant::now();
    let spec = RunSpec {
        warmup: Duration::from_millis(200),
        ..spec
    };
    let lookups = driver::open_loop(&spec, a.rate).await?;
    let analytical = done.load(Ordering::Relaxed) - before;
    let secs = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for c in cancels {
        let _ = c.cancel_query(tokio_postgres::NoTls).await;
    }
    for l in loops {
        let _ = tokio::time::timeout(Duration::from_secs(60), l).await;
    }
    Ok(Phase {
        background,
        lookups,
        analytical_per_s: analytical as f64 / secs.max(1e-9),
        analytical_errors: errors.load(Ordering::Relaxed),
        analytics_polls: Vec::new(),
    })
}

/// Eddy's `eddy_sched_poll_seconds` buckets of class `analytics`, not
/// cumulative: (upper bound, polls). Empty when /metrics cannot be read.
fn analytics_poll_buckets(http_port: u16) -> Vec<(String, u64)> {
    use std::io::{Read, Write};
    let mut body = String::new();
    let read = std::net::TcpStream::connect(("127.0.0.1", http_port)).and_then(|mut s| {
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
        s.read_to_string(&mut body)
    });
    if read.is_err() {
        return Vec::new();
    }
    let prefix = "eddy_sched_poll_seconds_bucket{class=\"analytics\",le=\"";
    let mut out: Vec<(String, u64)> = Vec::new();
    let mut below = 0u64;
    for line in body.lines() {
        let Some(rest) = line.strip_prefix(prefix) else {
            continue;
        };
        let Some((le, count)) = rest.split_once("\"} ") else {
            continue;
        };
        let Ok(cumulative) = count.trim().parse::<u64>() else {
            continue;
        };
        out.push((le.to_string(), cumulative.saturating_sub(below)));
        below = cumulative;
    }
    out
}

/// The report as Markdown.
pub fn markdown(r: &MixedReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "# Serving latency under analytics — {}\n", r.date);
    let _ = writeln!(s, "- Machine: {}", r.machine);
    let _ = writeln!(s, "- Command: `{}`", r.command);
    let _ = writeln!(
        s,
        "- Lookups: YCSB C, uniform keys over {} rows, open loop at {:.0}/s, {} s per phase; background: SSB sf {} Q1.1-Q4.3 in a loop per connection\n",
        r.records, r.rate, r.duration_s, r.sf
    );
    let _ = writeln!(s, "| engine | background | lookups/s | p50 µs | p95 µs | p99 µs | p99.9 µs | max µs | p99 / p99(0) | analytical q/s | errors |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for e in &r.engines {
        let base = e
            .phases
            .iter()
            .find(|p| p.background == 0)
            .map(|p| p.lookups.p99_us.max(1) as f64);
        for p in &e.phases {
            let x = &p.lookups;
            let _ = writeln!(
                s,
                "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {:.2} | {} |",
                e.engine,
                p.background,
                x.qps,
                x.p50_us,
                x.p95_us,
                x.p99_us,
                x.p999_us,
                x.max_us,
                base.map(|b| format!("{:.2}", x.p99_us as f64 / b))
                    .unwrap_or_else(|| "—".into()),
                p.analytical_per_s,
                x.errors + x.dropped + p.analytical_errors
            );
        }
    }
    for e in &r.engines {
        let _ = writeln!(s, "\n- {}: {}", e.engine, e.version);
        for p in e.phases.iter().filter(|p| !p.analytics_polls.is_empty()) {
            let total: u64 = p.analytics_polls.iter().map(|(_, n)| n).sum();
            let cells: Vec<String> = p
                .analytics_polls
                .iter()
                .map(|(le, n)| format!("≤{le} s: {:.1} %", *n as f64 * 100.0 / total.max(1) as f64))
                .collect();
            let _ = writeln!(
                s,
                "  - {} background: {total} analytical polls; {}",
                p.background,
                cells.join(", ")
            );
        }
    }
    s
}
