//! `eddy bench ...`: the clap command tree and its dispatcher.
//!
//! The `eddy` binary mounts [`BenchCommand`] as its `bench` subcommand and
//! calls [`run`]; `eddy-bench` (this crate's binary) does the same at top level.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::dataset::{dataset_dir_name, generate_or_reuse, write_dataset, WriteOptions};
use crate::error::{BenchError, Result};
use crate::harness::{self, HarnessOptions, Workload};
use crate::ssb::{SsbGenerator, SsbOptions};
use crate::tpch::TpchGenerator;

/// `eddy bench <command>`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Generate a data set (SSB, TPC-H or YCSB) without running anything.
    #[command(subcommand)]
    Gen(GenCommand),
    /// Star Schema Benchmark: 13 queries on Eddy and its peers.
    Ssb(SsbArgs),
    /// TPC-H: 22 queries on Eddy and its peers.
    Tpch(TpchArgs),
    /// YCSB serving load over the PostgreSQL protocol (closed and open loop).
    Ycsb(YcsbArgs),
    /// Freshness of a materialized view (event arrival to visible commit) at fixed event rates.
    Freshness(crate::freshness::FreshnessArgs),
    /// Nexmark q0-q3 and q7's window aggregate as materialized views: source rows/s per core.
    Nexmark(crate::nexmark::NexmarkArgs),
    /// TPC-H Q6 with parameters: prepared once and executed, against sent as text.
    Prepared(crate::prepared::PreparedArgs),
    /// Point-lookup latency while 0, 1, 4, 16 analytical queries loop (Eddy and PostgreSQL).
    Mixed(crate::mixed::MixedArgs),
}

/// `eddy bench gen <benchmark>`.
#[derive(Debug, Subcommand)]
pub enum GenCommand {
    /// Star Schema Benchmark tables to Parquet under DATA/ssb-sfN/.
    Ssb(GenSsbArgs),
    /// TPC-H tables (tpchgen) to Parquet under DATA/tpch-sfN/.
    Tpch(GenCommon),
    /// The YCSB usertable to Parquet (DATA/ycsb-sfN/, N = rows / 1M) or one CSV file.
    Ycsb(GenYcsbArgs),
}

/// `eddy bench gen ycsb`.
#[derive(Debug, Clone, Args)]
pub struct GenYcsbArgs {
    /// Rows.
    #[arg(long, default_value_t = 1_000_000)]
    pub records: u64,
    /// csv (one file DATA/ycsb-<rows>.csv, no header) or parquet.
    #[arg(long, value_enum, default_value_t = FileFormat::Parquet)]
    pub format: FileFormat,
    /// Directory that holds data sets.
    #[arg(long, default_value = "bench-data")]
    pub data: PathBuf,
}

/// A server `eddy bench ycsb` starts itself when no --target-addr is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StartServer {
    /// A private PostgreSQL.
    Postgres,
    /// `eddy server` (this executable or --eddy-bin).
    Eddy,
}

/// `eddy bench ycsb`.
#[derive(Debug, Clone, Args)]
pub struct YcsbArgs {
    /// Server to drive (host:port); without it, --start starts one.
    #[arg(long)]
    pub target_addr: Option<String>,
    /// Server to start when there is no --target-addr.
    #[arg(long, value_enum, default_value_t = StartServer::Postgres)]
    pub start: StartServer,
    /// The `eddy` executable for --start eddy.
    #[arg(long)]
    pub eddy_bin: Option<PathBuf>,
    /// User [default: postgres, or eddy for --start eddy].
    #[arg(long)]
    pub user: Option<String>,
    /// Password (empty: none).
    #[arg(long, default_value = "")]
    pub password: String,
    /// Database [default: the user name].
    #[arg(long)]
    pub dbname: Option<String>,
    /// Create and load usertable first (always done for a started server).
    #[arg(long)]
    pub load: bool,
    /// Rows in usertable.
    #[arg(long, default_value_t = 1_000_000)]
    pub records: u64,
    /// Workloads, comma separated: c, b.
    #[arg(long, default_value = "c,b")]
    pub workloads: String,
    /// Key distributions, comma separated: uniform, zipfian, scrambled.
    #[arg(long, default_value = "uniform,zipfian")]
    pub distributions: String,
    /// Connection counts of the closed-loop runs.
    #[arg(long, default_value = "1,4,16,64")]
    pub connections: String,
    /// Requests in flight per connection (pipeline depth W).
    #[arg(long, default_value_t = 1)]
    pub depth: usize,
    /// Seconds measured per run.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds of warm-up before each run.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Open-loop runs at these fractions of the best closed-loop QPS.
    #[arg(long, default_value = "0.5,0.8")]
    pub open_fractions: String,
    /// Open-loop runs at these fixed rates (ops/s), in addition.
    #[arg(long)]
    pub rates: Option<String>,
    /// Connections of the open-loop runs [default: the largest closed-loop count].
    #[arg(long)]
    pub open_connections: Option<usize>,
    /// Label of the target in the report [default: postgres / eddy / target].
    #[arg(long)]
    pub label: Option<String>,
    /// Where ycsb-<label>.json / .md go.
    #[arg(long, default_value = "docs/benchmarks")]
    pub out: PathBuf,
}

fn parse_list<T: std::str::FromStr>(s: &str, what: &str) -> Result<Vec<T>> {
    split_list(s)?
        .iter()
        .map(|x| {
            x.parse::<T>()
                .map_err(|_| BenchError::InvalidArgument(format!("bad {what} `{x}`")))
        })
        .collect()
}

fn run_ycsb(a: YcsbArgs) -> Result<()> {
    use crate::harness::servers::{EddyServer, PgTarget, PostgresServer};
    use crate::ycsb::driver::{self, Mix, RunSpec};
    use crate::ycsb::{Distribution, YcsbReport, YcsbRun};
    let mixes: Vec<Mix> = split_list(&a.workloads)?
        .iter()
        .map(|w| {
            Mix::from_str(w, true)
                .map_err(|_| BenchError::InvalidArgument(format!("bad workload `{w}`")))
        })
        .collect::<Result<_>>()?;
    let dists: Vec<Distribution> = split_list(&a.distributions)?
        .iter()
        .map(|d| {
            Distribution::from_str(d, true)
                .map_err(|_| BenchError::InvalidArgument(format!("bad distribution `{d}`")))
        })
        .collect::<Result<_>>()?;
    let conn_counts: Vec<usize> = parse_list(&a.connections, "connection count")?;
    let fractions: Vec<f64> = parse_list(&a.open_fractions, "fraction")?;
    let rates: Vec<f64> = match &a.rates {
        Some(r) => parse_list(r, "rate")?,
        None => vec![],
    };
    if a.records == 0 || a.duration <= 0.0 || a.warmup < 0.0 {
        return Err(BenchError::InvalidArgument(
            "records and duration must be positive".into(),
        ));
    }
    // Keep a started server alive for the whole run.
    let mut _pg: Option<PostgresServer> = None;
    let mut _eddy: Option<EddyServer> = None;
    let mut load = a.load;
    let (target, label, version_hint) = match &a.target_addr {
        Some(addr) => {
            let user = a.user.clone().unwrap_or_else(|| "postgres".into());
            let db = a.dbname.clone().unwrap_or_else(|| user.clone());
            (
                PgTarget::from_addr(addr, &user, &a.password, &db)?,
                a.label.clone().unwrap_or_else(|| "target".into()),
                None,
            )
        }
        None => {
            load = true;
            match a.start {
                StartServer::Postgres => {
                    let s = PostgresServer::start(None)?;
                    let t = s.target.clone();
                    let v = s.version();
                    _pg = Some(s);
                    (
                        t,
                        a.label.clone().unwrap_or_else(|| "postgres".into()),
                        Some(v),
                    )
                }
                StartServer::Eddy => {
                    let bin = EddyServer::find_binary(a.eddy_bin.clone())?;
                    let scratch = std::env::temp_dir();
                    let s = EddyServer::start(&bin, &scratch)?;
                    let mut t = s.target.clone();
                    if let Some(u) = &a.user {
                        t.user = u.clone();
                    }
                    if let Some(d) = &a.dbname {
                        t.dbname = d.clone();
                    }
                    _eddy = Some(s);
                    (t, a.label.clone().unwrap_or_else(|| "eddy".into()), None)
                }
            }
        }
    };
    let records = a.records;
    let command = command_line();
    let report = crate::harness::block_on(async move {
        let server_version = match version_hint {
            Some(v) => v,
            None => crate::harness::pgwire::server_version(&target).await,
        };
        let mut rep = YcsbReport {
            label: label.clone(),
            server_version,
            date: crate::harness::report::now_utc(),
            machine: crate::harness::machine_description(),
            command,
            records,
            ..YcsbReport::default()
        };
        if load {
            eprintln!("loading {records} rows into usertable");
            let s = driver::load(&target, records, 4).await?;
            eprintln!("loaded in {s:.1}s");
            rep.load_s = Some(s);
        }
        for &mix in &mixes {
            for &dist in &dists {
                let keys = std::sync::Arc::new(dist.chooser(records));
                let mut best = 0.0f64;
                for &c in &conn_counts {
                    let spec = RunSpec {
                        target: target.clone(),
                        records,
                        mix,
                        keys: keys.clone(),
                        connections: c,
                        depth: a.depth.max(1),
                        duration: std::time::Duration::from_secs_f64(a.duration),
                        warmup: std::time::Duration::from_secs_f64(a.warmup),
                    };
                    let r = driver::closed_loop(&spec).await?;
                    eprintln!("{mix:?} {dist:?} closed c={c} W={}: {:.0} qps p50 {}us p99 {}us p999 {}us errors {}",
                        spec.depth, r.qps, r.p50_us, r.p99_us, r.p999_us, r.errors);
                    best = best.max(r.qps);
                    rep.runs.push(YcsbRun {
                        workload: mix,
                        distribution: dist,
                        result: r,
                    });
                }
                let oc = a
                    .open_connections
                    .or_else(|| conn_counts.iter().copied().max())
                    .unwrap_or(1);
                let mut offered: Vec<f64> = fractions
                    .iter()
                    .map(|f| f * best)
                    .filter(|r| *r > 0.0)
                    .collect();
                offered.extend(rates.iter().copied());
                for rate in offered {
                    let spec = RunSpec {
                        target: target.clone(),
                        records,
                        mix,
                        keys: keys.clone(),
                        connections: oc,
                        depth: 1,
                        duration: std::time::Duration::from_secs_f64(a.duration),
                        warmup: std::time::Duration::from_secs_f64(a.warmup),
                    };
                    let r = driver::open_loop(&spec, rate).await?;
                    eprintln!("{mix:?} {dist:?} open c={oc} rate {rate:.0}: {:.0} qps p50 {}us p99 {}us p999 {}us errors {} dropped {}",
                        r.qps, r.p50_us, r.p99_us, r.p999_us, r.errors, r.dropped);
                    rep.runs.push(YcsbRun {
                        workload: mix,
                        distribution: dist,
                        result: r,
                    });
                }
            }
        }
        Ok(rep)
    })?;
    std::fs::create_dir_all(&a.out).map_err(|e| BenchError::io(&a.out, e))?;
    let json = a.out.join(format!("ycsb-{}.json", report.label));
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)
        .map_err(|e| BenchError::io(&json, e))?;
    let md = a.out.join(format!("ycsb-{}.md", report.label));
    let text = crate::ycsb::markdown(&report);
    std::fs::write(&md, &text).map_err(|e| BenchError::io(&md, e))?;
    println!("{text}");
    eprintln!("wrote {} and {}", json.display(), md.display());
    Ok(())
}

/// Options shared by the data generators.
#[derive(Debug, Clone, Args)]
pub struct GenCommon {
    /// Scale factor (fractions like 0.01 are allowed).
    #[arg(long, default_value_t = 1.0)]
    pub sf: f64,
    /// Directory that holds data sets.
    #[arg(long, default_value = "bench-data")]
    pub data: PathBuf,
    /// Generator threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Regenerate even when a matching data set exists.
    #[arg(long)]
    pub force: bool,
}

impl GenCommon {
    fn write_options(&self) -> WriteOptions {
        let mut o = WriteOptions::default();
        if let Some(t) = self.threads {
            o.threads = t.max(1);
        }
        o
    }
}

/// `eddy bench gen ssb`.
#[derive(Debug, Clone, Args)]
pub struct GenSsbArgs {
    #[command(flatten)]
    pub common: GenCommon,
    /// Seed of the generator.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Options of an analytics harness run (`eddy bench ssb|tpch`).
#[derive(Debug, Clone, Args)]
pub struct AnalyticsArgs {
    /// Scale factor.
    #[arg(long, default_value_t = 1.0)]
    pub sf: f64,
    /// Engines, comma separated; the first is the one ratios are of:
    /// eddy, duckdb, datafusion, datafusion-mem, postgres, and eddy-gpu
    /// (one Eddy server queried with `eddy.gpu` off, then on: two columns).
    #[arg(long, default_value = "eddy,duckdb,datafusion,postgres")]
    pub engines: String,
    /// Directory that holds data sets (generated when missing).
    #[arg(long, default_value = "bench-data")]
    pub data: PathBuf,
    /// Timed runs per query, after one warm-up.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Only these queries (comma separated, e.g. q1.1,q2.1).
    #[arg(long)]
    pub queries: Option<String>,
    /// Where the JSON, Markdown and PNG report goes.
    #[arg(long, default_value = "docs/benchmarks")]
    pub out: PathBuf,
    /// Scratch directory [default: DATA/scratch].
    #[arg(long)]
    pub scratch: Option<PathBuf>,
    /// Python with duckdb and datafusion [default: .venv-bench/bin/python].
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Use a running Eddy server at host:port instead of starting one.
    #[arg(long)]
    pub eddy_addr: Option<String>,
    /// The `eddy` executable to start [default: this one / a sibling].
    #[arg(long)]
    pub eddy_bin: Option<PathBuf>,
    /// Eddy user.
    #[arg(long, default_value = "eddy")]
    pub eddy_user: String,
    /// Eddy password (empty for trust).
    #[arg(long, default_value = "")]
    pub eddy_password: String,
    /// Eddy database.
    #[arg(long, default_value = "eddy")]
    pub eddy_db: String,
    /// Use a running PostgreSQL at host:port (user postgres, trust) instead of a private one.
    #[arg(long)]
    pub postgres_addr: Option<String>,
    /// PostgreSQL's bin directory [default: newest /usr/lib/postgresql/*/bin].
    #[arg(long)]
    pub pg_bin: Option<PathBuf>,
    /// Threads for the generator and the peers [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Connections loading in parallel over the PostgreSQL protocol.
    #[arg(long, default_value_t = 2)]
    pub load_connections: usize,
    /// Skip the PNG chart.
    #[arg(long)]
    pub no_chart: bool,
    /// Per-query timeout on Eddy and PostgreSQL, seconds (0: none); a query
    /// that times out is reported as an error.
    #[arg(long, default_value_t = 300)]
    pub query_timeout: u64,
}

impl AnalyticsArgs {
    fn harness_options(&self) -> Result<HarnessOptions> {
        Ok(HarnessOptions {
            engines: split_list(&self.engines)?,
            runs: self.runs.max(1),
            out_dir: self.out.clone(),
            scratch: self
                .scratch
                .clone()
                .unwrap_or_else(|| self.data.join("scratch")),
            python: self.python.clone(),
            eddy_addr: self.eddy_addr.clone(),
            eddy_bin: self.eddy_bin.clone(),
            eddy_user: self.eddy_user.clone(),
            eddy_password: self.eddy_password.clone(),
            eddy_db: self.eddy_db.clone(),
            postgres_addr: self.postgres_addr.clone(),
            pg_bin: self.pg_bin.clone(),
            threads: self.threads,
            load_connections: self.load_connections.max(1),
            chart: !self.no_chart,
            query_timeout_s: self.query_timeout,
            command: command_line(),
        })
    }

    fn write_options(&self) -> WriteOptions {
        let mut o = WriteOptions::default();
        if let Some(t) = self.threads {
            o.threads = t.max(1);
        }
        o
    }

    fn select_queries(&self, all: Vec<(String, String)>) -> Result<Vec<(String, String)>> {
        let chosen: Vec<(String, String)> = match &self.queries {
            None => all,
            Some(list) => {
                let want = split_list(list)?;
                let mut v = Vec::new();
                for w in want {
                    let norm = format!("q{}", w.trim_start_matches(['q', 'Q']));
                    let (n, q) = all
                        .iter()
                        .find(|(n, _)| *n == norm)
                        .ok_or_else(|| BenchError::InvalidArgument(format!("no query `{w}`")))?;
                    v.push((n.to_string(), q.to_string()));
                }
                v
            }
        };
        Ok(chosen)
    }
}

/// `eddy bench ssb`.
#[derive(Debug, Clone, Args)]
pub struct SsbArgs {
    #[command(flatten)]
    pub common: AnalyticsArgs,
    /// Seed of the generator.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// This process's command line, for reports.
pub fn command_line() -> String {
    let args: Vec<String> = std::env::args().collect();
    let mut s = args.join(" ");
    if let Some(first) = args.first() {
        if let Some(name) = std::path::Path::new(first).file_name() {
            s = std::iter::once(name.to_string_lossy().into_owned())
                .chain(args.iter().skip(1).cloned())
                .collect::<Vec<_>>()
                .join(" ");
        }
    }
    s
}

fn run_ssb(args: SsbArgs) -> Result<()> {
    let a = &args.common;
    let gen = SsbGenerator::new(SsbOptions {
        sf: a.sf,
        seed: args.seed,
        ..SsbOptions::default()
    })?;
    let dir = a.data.join(dataset_dir_name("ssb", a.sf));
    let manifest = generate_or_reuse(&gen, &dir, &a.write_options())?;
    let w = Workload {
        benchmark: "ssb",
        sf: a.sf,
        dir,
        manifest,
        tables: crate::ssb::TABLES.iter().map(|t| t.to_string()).collect(),
        fact_table: crate::ssb::FACT_TABLE,
        queries: a.select_queries(
            crate::ssb::queries::QUERIES
                .iter()
                .map(|(n, q)| (n.to_string(), q.to_string()))
                .collect(),
        )?,
    };
    let rep = harness::run(&w, &a.harness_options()?)?;
    println!("{}", harness::report::markdown(&rep));
    Ok(())
}

/// `eddy bench tpch`.
#[derive(Debug, Clone, Args)]
pub struct TpchArgs {
    #[command(flatten)]
    pub common: AnalyticsArgs,
}

fn run_tpch(args: TpchArgs) -> Result<()> {
    let a = &args.common;
    let gen = TpchGenerator::new(a.sf)?;
    let dir = a.data.join(dataset_dir_name("tpch", a.sf));
    let manifest = generate_or_reuse(&gen, &dir, &a.write_options())?;
    let w = Workload {
        benchmark: "tpch",
        sf: a.sf,
        dir,
        manifest,
        tables: crate::tpch::TABLES.iter().map(|t| t.to_string()).collect(),
        fact_table: crate::tpch::FACT_TABLE,
        queries: a.select_queries(
            crate::tpch::queries::queries(a.sf)
                .into_iter()
                .map(|(n, q)| (n.to_string(), q))
                .collect(),
        )?,
    };
    let rep = harness::run(&w, &a.harness_options()?)?;
    println!("{}", harness::report::markdown(&rep));
    Ok(())
}

/// Output format of a generated file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FileFormat {
    /// Comma separated values with a header.
    Csv,
    /// Apache Parquet.
    Parquet,
}

/// Runs a bench command to completion.
pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Ssb(args) => run_ssb(args),
        BenchCommand::Tpch(args) => run_tpch(args),
        BenchCommand::Ycsb(args) => run_ycsb(args),
        BenchCommand::Freshness(args) => crate::freshness::run(args),
        BenchCommand::Nexmark(args) => crate::nexmark::run(args),
        BenchCommand::Prepared(args) => crate::prepared::run(args),
        BenchCommand::Mixed(args) => crate::mixed::run(args),
        BenchCommand::Gen(GenCommand::Ycsb(args)) => {
            let start = std::time::Instant::now();
            match args.format {
                FileFormat::Parquet => {
                    let gen = crate::ycsb::YcsbGenerator::new(args.records)?;
                    let dir = args
                        .data
                        .join(dataset_dir_name("ycsb", args.records as f64 / 1e6));
                    let m = generate_or_reuse(&gen, &dir, &WriteOptions::default())?;
                    print_manifest(&dir, &m, start.elapsed().as_secs_f64());
                }
                FileFormat::Csv => {
                    std::fs::create_dir_all(&args.data)
                        .map_err(|e| BenchError::io(&args.data, e))?;
                    let path = args.data.join(format!("ycsb-{}.csv", args.records));
                    let f = std::fs::File::create(&path).map_err(|e| BenchError::io(&path, e))?;
                    let mut w = std::io::BufWriter::new(f);
                    let mut s = 0;
                    while s < args.records {
                        let e = (s + 10_000).min(args.records);
                        let mut buf = Vec::new();
                        crate::ycsb::rows_csv(s, e, &mut buf);
                        std::io::Write::write_all(&mut w, &buf)
                            .map_err(|e| BenchError::io(&path, e))?;
                        s = e;
                    }
                    std::io::Write::flush(&mut w).map_err(|e| BenchError::io(&path, e))?;
                    println!(
                        "{} ({} rows) in {:.1}s",
                        path.display(),
                        args.records,
                        start.elapsed().as_secs_f64()
                    );
                }
            }
            Ok(())
        }
        BenchCommand::Gen(GenCommand::Tpch(args)) => {
            let gen = TpchGenerator::new(args.sf)?;
            let dir = args.data.join(dataset_dir_name("tpch", args.sf));
            let start = std::time::Instant::now();
            let m = if args.force {
                write_dataset(&gen, &dir, &args.write_options())?
            } else {
                generate_or_reuse(&gen, &dir, &args.write_options())?
            };
            print_manifest(&dir, &m, start.elapsed().as_secs_f64());
            Ok(())
        }
        BenchCommand::Gen(GenCommand::Ssb(args)) => {
            let gen = SsbGenerator::new(SsbOptions {
                sf: args.common.sf,
                seed: args.seed,
                ..SsbOptions::default()
            })?;
            let dir = args
                .common
                .data
                .join(dataset_dir_name("ssb", args.common.sf));
            let start = std::time::Instant::now();
            let m = if args.common.force {
                write_dataset(&gen, &dir, &args.common.write_options())?
            } else {
                generate_or_reuse(&gen, &dir, &args.common.write_options())?
            };
            print_manifest(&dir, &m, start.elapsed().as_secs_f64());
            Ok(())
        }
    }
}

fn print_manifest(dir: &std::path::Path, m: &crate::dataset::Manifest, secs: f64) {
    println!(
        "{} ({} sf {}) in {:.1}s",
        dir.display(),
        m.benchmark,
        m.scale_factor,
        secs
    );
    for (name, t) in &m.tables {
        println!(
            "  {name:<10} {:>12} rows {:>4} files {:>10.1} MB arrow",
            t.rows,
            t.files.len(),
            t.column_bytes.values().sum::<u64>() as f64 / 1e6
        );
    }
}

/// Parses "a,b,c" into a list, rejecting empties.
pub fn split_list(s: &str) -> Result<Vec<String>> {
    let v: Vec<String> = s
        .split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect();
    if v.is_empty() {
        return Err(BenchError::InvalidArgument(format!("empty list `{s}`")));
    }
    Ok(v)
}
