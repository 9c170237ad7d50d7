//! The analytics harness behind `eddy bench ssb` and `eddy bench tpch`.
//!
//! One run: generate or reuse the data set, then for each engine in turn
//! (each its own process: the Eddy server, a private PostgreSQL, or
//! `peer.py` for DuckDB / DataFusion) load the same Parquet files, run every
//! query once as a warm-up and `runs` times, and collect the answers. Then
//! check that every engine agrees with the first one that answered
//! ([`compare`]), and write `<bench>-sfN.json`, `.md` and `.png`
//! ([`report`]).

pub mod compare;
pub mod peer;
pub mod pgwire;
pub mod report;
pub mod servers;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::dataset::Manifest;
use crate::error::{BenchError, Result};
use servers::{EddyServer, PgTarget, PostgresServer};

/// Result rows kept per query for the cross-engine check.
pub const MAX_ROWS: usize = 1000;

/// A data set plus the queries to run on it.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `ssb` or `tpch`.
    pub benchmark: &'static str,
    /// Scale factor.
    pub sf: f64,
    /// Data set directory (holds `manifest.json`).
    pub dir: PathBuf,
    /// What the directory holds.
    pub manifest: Manifest,
    /// Tables to load.
    pub tables: Vec<String>,
    /// Fact table (rows/s and GB/s are of this table).
    pub fact_table: &'static str,
    /// (name, SQL) in order.
    pub queries: Vec<(String, String)>,
}

/// One query on one engine.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QueryRun {
    /// Query name (`q1.1`).
    pub name: String,
    /// Seconds of each timed run.
    #[serde(default)]
    pub times_s: Vec<f64>,
    /// Seconds of the warm-up run.
    #[serde(default)]
    pub warmup_s: Option<f64>,
    /// Error text when the query failed.
    #[serde(default)]
    pub error: Option<String>,
    /// Result column names.
    #[serde(default)]
    pub columns: Vec<String>,
    /// Result rows as text (NULL as None), at most [`MAX_ROWS`].
    #[serde(default)]
    pub rows: Vec<Vec<Option<String>>>,
}

/// One engine's whole run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EngineRun {
    /// Engine name (`eddy`, `duckdb`, `datafusion`, `datafusion-mem`, `postgres`).
    pub engine: String,
    /// Engine version.
    #[serde(default)]
    pub version: String,
    /// Seconds to load every table.
    #[serde(default)]
    pub load_s: f64,
    /// Per query, in workload order.
    #[serde(default)]
    pub queries: Vec<QueryRun>,
    /// Set when the engine could not run at all.
    #[serde(default)]
    pub error: Option<String>,
}

/// Options of an analytics run.
#[derive(Debug, Clone)]
pub struct HarnessOptions {
    /// Engines in order; the first is the one ratios are taken of.
    pub engines: Vec<String>,
    /// Timed runs per query (after one warm-up).
    pub runs: usize,
    /// Directory for the JSON / Markdown / PNG report.
    pub out_dir: PathBuf,
    /// Scratch directory (peer script, query files, server data).
    pub scratch: PathBuf,
    /// Python of the peers.
    pub python: Option<PathBuf>,
    /// An Eddy server already running (host:port); else one is started.
    pub eddy_addr: Option<String>,
    /// The `eddy` executable to start.
    pub eddy_bin: Option<PathBuf>,
    /// User / password / database for Eddy.
    pub eddy_user: String,
    /// Password for Eddy (empty: trust).
    pub eddy_password: String,
    /// Database for Eddy.
    pub eddy_db: String,
    /// An existing PostgreSQL (host:port, user postgres); else a private one is started.
    pub postgres_addr: Option<String>,
    /// PostgreSQL's bin directory.
    pub pg_bin: Option<PathBuf>,
    /// Threads for the peers (default: all cores).
    pub threads: Option<usize>,
    /// Parallel connections when loading over the PostgreSQL protocol.
    pub load_connections: usize,
    /// Render the PNG chart.
    pub chart: bool,
    /// Per-statement timeout on PostgreSQL-protocol engines (s; 0 = none).
    pub query_timeout_s: u64,
    /// The command line to record.
    pub command: String,
}

/// The full error chain of an error, one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        let t = x.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = x.source();
    }
    s
}

/// Total memory of this machine in GiB (from /proc/meminfo; 4 if unknown).
pub fn machine_memory_gb() -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0 / 1024.0)
        .unwrap_or(4.0)
}

/// "N cores, <model>, M GiB".
pub fn machine_description() -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} cores, {model}, {:.0} GiB", machine_memory_gb())
}

/// Runs `f` to completion on a fresh runtime in a thread of its own (safe inside or outside a runtime).
pub fn block_on<F: std::future::Future<Output = Result<T>> + Send + 'static, T: Send + 'static>(
    f: F,
) -> Result<T> {
    // A thread of its own, so this works whether or not the caller is inside a runtime.
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        rt.block_on(f)
    })
    .join()
    .map_err(|_| BenchError::Internal("async runner thread panicked".into()))?
}

/// Runs one engine over a PostgreSQL-protocol target.
fn run_pgwire(
    engine: &str,
    target: PgTarget,
    version: Option<String>,
    w: &Workload,
    opts: &HarnessOptions,
    path: pgwire::LoadPath,
) -> Result<EngineRun> {
    let mut runs = run_pgwire_passes(&[(engine, &[])], target, version, w, opts, path)?;
    runs.pop()
        .ok_or_else(|| BenchError::Internal("no run of a single pass".into()))
}

/// Loads `w` once into `target`, then runs every query once per pass: a
/// pass is an engine label and the session settings its connection starts
/// with. One load serves several configurations of the same server (the
/// GPU off and on), so they are compared over the same stored data.
fn run_pgwire_passes(
    passes: &[(&str, &[&str])],
    target: PgTarget,
    version: Option<String>,
    w: &Workload,
    opts: &HarnessOptions,
    path: pgwire::LoadPath,
) -> Result<Vec<EngineRun>> {
    let w2 = w.clone();
    let runs = opts.runs;
    let timeout = opts.query_timeout_s;
    let conns = opts.load_connections;
    let passes: Vec<(String, Vec<String>)> = passes
        .iter()
        .map(|(e, s)| (e.to_string(), s.iter().map(|x| x.to_string()).collect()))
        .collect();
    block_on(async move {
        let version = match version {
            Some(v) => v,
            None => pgwire::server_version(&target).await,
        };
        let first = passes.first().map(|p| p.0.clone()).unwrap_or_default();
        eprintln!("{first}: loading {} tables", w2.tables.len());
        let load_s = pgwire::load(&target, &w2, path, conns).await?;
        eprintln!("{first}: loaded in {load_s:.1}s");
        let mut out = Vec::new();
        for (engine, setup) in &passes {
            let setup: Vec<&str> = setup.iter().map(String::as_str).collect();
            let queries = pgwire::run_queries(&target, &w2, runs, engine, timeout, &setup).await?;
            out.push(EngineRun {
                engine: engine.clone(),
                version: version.clone(),
                load_s,
                queries,
                error: None,
            });
        }
        Ok(out)
    })
}

/// The passes of `eddy-gpu`: Eddy's CPU path, the GPU path, and the GPU
/// path with the star join and the partial aggregation as two operators
/// (`eddy.gpu_fuse = off`), over one server and one load. The GPU passes
/// force offload (`on`, not the size-gated `auto`) so every operator the
/// rule accepts runs on the device.
const EDDY_GPU_PASSES: [(&str, &[&str]); 3] = [
    ("eddy", &["SET eddy.gpu = off"]),
    ("eddy-gpu", &["SET eddy.gpu = on"]),
    (
        "eddy-gpu-unfused",
        &["SET eddy.gpu = on", "SET eddy.gpu_fuse = off"],
    ),
];

/// `eddy-gpu`: one Eddy server (started or at --eddy-addr), loaded once,
/// queried with the GPU off, on, and on without fusion; three engine runs
/// whose answers the report compares.
fn run_eddy_gpu_pair(w: &Workload, opts: &HarnessOptions) -> Result<Vec<EngineRun>> {
    with_eddy(opts, |t| {
        run_pgwire_passes(
            &EDDY_GPU_PASSES,
            t,
            None,
            w,
            opts,
            pgwire::LoadPath::ParquetFile,
        )
    })
}

/// Runs `run` against the Eddy server at --eddy-addr, or against one
/// started for it (stopped afterwards).
fn with_eddy<T>(opts: &HarnessOptions, run: impl FnOnce(PgTarget) -> Result<T>) -> Result<T> {
    if let Some(addr) = &opts.eddy_addr {
        return run(PgTarget::from_addr(
            addr,
            &opts.eddy_user,
            &opts.eddy_password,
            &opts.eddy_db,
        )?);
    }
    let bin = EddyServer::find_binary(opts.eddy_bin.clone())?;
    let server = EddyServer::start(&bin, &opts.scratch)?;
    let mut t = server.target.clone();
    t.user = opts.eddy_user.clone();
    t.dbname = opts.eddy_db.clone();
    let r = run(t);
    drop(server);
    r
}

fn run_engine(engine: &str, w: &Workload, opts: &HarnessOptions) -> Result<EngineRun> {
    match engine {
        "eddy" => with_eddy(opts, |t| {
            run_pgwire("eddy", t, None, w, opts, pgwire::LoadPath::ParquetFile)
        }),
        "postgres" => {
            if let Some(addr) = &opts.postgres_addr {
                let t = PgTarget::from_addr(addr, "postgres", "", "postgres")?;
                run_pgwire("postgres", t, None, w, opts, pgwire::LoadPath::CsvStdin)
            } else {
                let server = PostgresServer::start(opts.pg_bin.clone())?;
                let version = server.version();
                let r = run_pgwire(
                    "postgres",
                    server.target.clone(),
                    Some(version),
                    w,
                    opts,
                    pgwire::LoadPath::CsvStdin,
                );
                drop(server);
                r
            }
        }
        e if peer::PEER_ENGINES.contains(&e) => {
            let python = peer::find_python(opts.python.clone());
            peer::run_peer(&python, e, w, opts.runs, opts.threads, &opts.scratch)
        }
        other => Err(BenchError::InvalidArgument(format!(
            "unknown engine `{other}` (eddy, eddy-gpu, postgres, {})",
            peer::PEER_ENGINES.join(", ")
        ))),
    }
}

/// Runs every engine over `w`, checks answers and writes the report; returns it.
pub fn run(w: &Workload, opts: &HarnessOptions) -> Result<report::Report> {
    std::fs::create_dir_all(&opts.scratch).map_err(|e| BenchError::io(&opts.scratch, e))?;
    let mut runs = Vec::new();
    for engine in &opts.engines {
        eprintln!("== {engine} ==");
        let result = if engine == "eddy-gpu" {
            run_eddy_gpu_pair(w, opts)
        } else {
            run_engine(engine, w, opts).map(|r| vec![r])
        };
        match result {
            Ok(r) => runs.extend(r),
            Err(e) => {
                let msg = error_chain(&e);
                eprintln!("{engine}: failed: {msg}");
                runs.push(EngineRun {
                    engine: engine.clone(),
                    error: Some(msg),
                    ..EngineRun::default()
                });
            }
        }
    }
    let rep = report::build(w, &runs, opts);
    report::write(&rep, opts)?;
    Ok(rep)
}
