//! The `eddy` binary: `eddy server` runs the PostgreSQL-protocol front end
//! over the storage engine, with the console and `/metrics` over HTTP
//! (`crate::console`), and says where it listens when it starts
//! (`crate::banner`).
//!
//! Subcommands are a clap enum: adding `eddy stream` / `eddy bench` is one
//! variant and one match arm each.
//!
//! Invariants: `--auth trust` is refused unless the PostgreSQL address is a
//! loopback address; under SCRAM a non-empty password for the superuser
//! `eddy` must come from `EDDY_PASSWORD` or the config file, and no
//! configured password is empty; TLS is on exactly when a certificate and a
//! key are given (`crate::tls`), and `--tls-require-remote` needs them;
//! SIGTERM/SIGINT close the engine (flush) before the process exits.
//! Who may do what: `crate::auth`, `docs/design/security.md`.

mod auth;
mod backends;
mod banner;
mod config;
mod console;
mod fd_limit;
mod idle;
mod memory_trim;
mod metrics;
mod notifications;
mod panics;
mod pg;
mod tls;
mod txn_status;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use eddy_sql::Database;
use eddy_storage::{Engine, EngineConfig};
use tokio::net::TcpListener;

use crate::config::FileConfig;
use crate::metrics::Metrics;
use crate::pg::{AuthMode, Backend, Handlers, Security};

#[derive(Parser)]
#[command(
    name = "eddy",
    version,
    about = "Eddy: a real-time database that speaks PostgreSQL"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run the database server.
    Server(ServerArgs),
    /// Stream jobs: wordcount, latency, nexmark.
    Stream {
        #[command(subcommand)]
        cmd: eddy_stream::cli::StreamCommand,
    },
    /// Benchmarks: SSB, TPC-H and YCSB against Eddy and its peers; view freshness.
    Bench {
        #[command(subcommand)]
        cmd: eddy_bench::cli::BenchCommand,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Auth {
    Scram,
    Trust,
    /// A verified client certificate whose common name is the user
    /// (PostgreSQL's `cert`); needs TLS and --tls-client-ca.
    Cert,
}

/// `--clientcert` (PostgreSQL's `clientcert` option of a login method).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ClientCertArg {
    /// A client certificate verified against --tls-client-ca.
    VerifyCa,
    /// That, and its common name is the user.
    VerifyFull,
}

#[derive(clap::Args)]
struct ServerArgs {
    /// Directory holding the database (created if missing).
    #[arg(long)]
    data_dir: PathBuf,
    /// PostgreSQL protocol address [default: 127.0.0.1:5433].
    #[arg(long)]
    pg_addr: Option<String>,
    /// HTTP address of the console and /metrics [default: 127.0.0.1:8080];
    /// the console cancels statements only on a loopback address.
    #[arg(long)]
    http_addr: Option<String>,
    /// Authentication: scram (default) or trust (loopback only).
    #[arg(long, value_enum)]
    auth: Option<Auth>,
    /// TOML configuration file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Client connections served at once; more get FATAL 53300
    /// [default: 100].
    #[arg(long)]
    max_connections: Option<usize>,
    /// Memory for all running queries together, e.g. 8GB [default: half
    /// the machine's memory]; sorts and aggregations spill beyond it.
    #[arg(long)]
    memory_limit: Option<String>,
    /// Memory for one query, e.g. 2GB [default: a quarter of
    /// --memory-limit]; beyond it a query spills or fails with 53200.
    #[arg(long)]
    query_memory_limit: Option<String>,
    /// PEM certificate chain: with --tls-key, clients may use TLS
    /// (sslmode=require).
    #[arg(long)]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long)]
    tls_key: Option<PathBuf>,
    /// Refuse connections without TLS from non-loopback clients (FATAL
    /// 28000); needs --tls-cert and --tls-key.
    #[arg(long)]
    tls_require_remote: bool,
    /// With TLS on, serve the console and /metrics on plain HTTP, not
    /// HTTPS (for a scraper or proxy on this machine); needs --tls-cert.
    #[arg(long)]
    http_plain: bool,
    /// PEM file of the CAs client certificates must chain to: clients are
    /// asked for one, and --auth cert logs in by it.
    #[arg(long)]
    tls_client_ca: Option<PathBuf>,
    /// PEM file of certificate revocation lists: a client certificate
    /// they revoke fails the handshake (PostgreSQL's ssl_crl_file); needs
    /// --tls-client-ca.
    #[arg(long)]
    tls_crl: Option<PathBuf>,
    /// Every login also needs a client certificate (PostgreSQL's
    /// clientcert=verify-ca / verify-full beside a password); needs
    /// --tls-client-ca.
    #[arg(long, value_enum)]
    clientcert: Option<ClientCertArg>,
}

#[derive(Debug, thiserror::Error)]
enum ServerError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error("invalid address {addr}: {reason}")]
    Addr { addr: String, reason: String },
    #[error("{0}")]
    Refused(String),
    #[error("storage: {0}")]
    Storage(#[from] eddy_storage::StorageError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Stream(eddy_stream::StreamError),
    #[error(transparent)]
    Bench(eddy_bench::BenchError),
    #[error("stream jobs: {0}")]
    StreamSql(#[from] eddy_streamsql::StreamSqlError),
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("database: {0}")]
    Database(eddy_sql::SqlError),
    #[error(transparent)]
    Accounts(#[from] auth::AccountError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

fn main() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("EDDY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    panics::install_hook();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Server(args) => run_server(args),
        Command::Stream { cmd } => eddy_stream::cli::run(cmd).map_err(ServerError::Stream),
        Command::Bench { cmd } => eddy_bench::cli::run(cmd).map_err(ServerError::Bench),
    };
    if let Err(e) = result {
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            msg.push_str(&format!(": {s}"));
            src = s.source();
        }
        eprintln!("eddy: {msg}");
        std::process::exit(1);
    }
}

fn parse_addr(a: &str) -> Result<SocketAddr, ServerError> {
    a.parse()
        .map_err(|e: std::net::AddrParseError| ServerError::Addr {
            addr: a.to_string(),
            reason: e.to_string(),
        })
}

fn run_server(args: ServerArgs) -> Result<(), ServerError> {
    let file = match &args.config {
        Some(p) => FileConfig::load(p)?,
        None => FileConfig::default(),
    };
    let pg_addr = parse_addr(
        args.pg_addr
            .as_deref()
            .or(file.server.pg_addr.as_deref())
            .unwrap_or("127.0.0.1:5433"),
    )?;
    let http_addr = parse_addr(
        args.http_addr
            .as_deref()
            .or(file.server.http_addr.as_deref())
            .unwrap_or("127.0.0.1:8080"),
    )?;
    let auth = match (args.auth, file.server.auth.as_deref()) {
        (Some(a), _) => a,
        (None, Some("trust")) => Auth::Trust,
        (None, Some("scram")) | (None, None) => Auth::Scram,
        (None, Some("cert")) => Auth::Cert,
        (None, Some(other)) => {
            return Err(ServerError::Refused(format!(
                "unknown auth \"{other}\": expected scram, cert or trust"
            )))
        }
    };
    let env_password = match std::env::var("EDDY_PASSWORD") {
        Ok(pw) => Some(pw),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(ServerError::Refused(
                "EDDY_PASSWORD is not valid UTF-8".into(),
            ))
        }
    };
    let password_from = match auth {
        Auth::Trust => banner::PasswordFrom::None,
        Auth::Cert => banner::PasswordFrom::Certificate,
        Auth::Scram if env_password.is_some() => banner::PasswordFrom::Env,
        Auth::Scram => banner::PasswordFrom::ConfigFile,
    };
    let accounts = Arc::new(auth::Accounts::new(
        &file.users,
        env_password,
        auth == Auth::Scram,
    )?);
    let auth_mode = match auth {
        Auth::Trust => {
            if !pg_addr.ip().is_loopback() {
                return Err(ServerError::Refused(format!(
                    "--auth trust is only allowed on a loopback address, not {pg_addr}"
                )));
            }
            AuthMode::Trust
        }
        Auth::Scram => AuthMode::Scram(Arc::new(auth::ScramUsers::new()?)),
        Auth::Cert => AuthMode::Cert,
    };
    let tls_cert = args.tls_cert.clone().or(file.server.tls_cert.clone());
    let tls_key = args.tls_key.clone().or(file.server.tls_key.clone());
    let tls_client_ca = args
        .tls_client_ca
        .clone()
        .or(file.server.tls_client_ca.clone());
    let tls_crl = args.tls_crl.clone().or(file.server.tls_crl.clone());
    if tls_crl.is_some() && tls_client_ca.is_none() {
        return Err(ServerError::Refused(
            "--tls-crl needs --tls-client-ca: it revokes client certificates".into(),
        ));
    }
    let tls = match (&tls_cert, &tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(
            cert,
            key,
            tls_client_ca.as_deref(),
            tls_crl.as_deref(),
        )?),
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => {
            return Err(ServerError::Refused(
                "TLS needs both a certificate and a key (--tls-cert and --tls-key)".into(),
            ))
        }
    };
    if tls_client_ca.is_some() && tls.is_none() {
        return Err(ServerError::Refused(
            "--tls-client-ca needs --tls-cert and --tls-key".into(),
        ));
    }
    if auth == Auth::Cert && tls_client_ca.is_none() {
        return Err(ServerError::Refused(
            "--auth cert needs --tls-client-ca (and --tls-cert, --tls-key): the CAs \
             client certificates are checked against"
                .into(),
        ));
    }
    let clientcert = match (args.clientcert, file.server.clientcert.as_deref()) {
        (Some(c), _) => Some(c),
        (None, None) => None,
        (None, Some("verify-ca")) => Some(ClientCertArg::VerifyCa),
        (None, Some("verify-full")) => Some(ClientCertArg::VerifyFull),
        (None, Some(other)) => {
            return Err(ServerError::Refused(format!(
                "unknown clientcert \"{other}\": expected verify-ca or verify-full"
            )))
        }
    };
    let clientcert = match (clientcert, auth) {
        (None, _) => None,
        (Some(_), _) if tls_client_ca.is_none() => {
            return Err(ServerError::Refused(
                "--clientcert needs --tls-client-ca (and --tls-cert, --tls-key)".into(),
            ))
        }
        // the cert method checks the certificate and its name already
        (Some(ClientCertArg::VerifyFull), Auth::Cert) => None,
        (Some(ClientCertArg::VerifyCa), Auth::Cert) => {
            return Err(ServerError::Refused(
                "clientcert only accepts verify-full when using cert authentication".into(),
            ))
        }
        (Some(ClientCertArg::VerifyCa), _) => Some(pg::ClientCert::VerifyCa),
        (Some(ClientCertArg::VerifyFull), _) => Some(pg::ClientCert::VerifyFull),
    };
    let require_tls_remote =
        args.tls_require_remote || file.server.tls_require_remote.unwrap_or(false);
    if require_tls_remote && tls.is_none() {
        return Err(ServerError::Refused(
            "--tls-require-remote needs --tls-cert and --tls-key".into(),
        ));
    }
    let http_plain = args.http_plain || file.server.http_plain.unwrap_or(false);
    // the console asks for passwords: over HTTPS whenever TLS is on
    let http_tls = match (&tls_cert, &tls_key) {
        (Some(cert), Some(key)) if !http_plain => Some(tls::http_acceptor(cert, key)?),
        (Some(_), Some(_)) => None,
        _ if http_plain => {
            return Err(ServerError::Refused(
                "--http-plain needs --tls-cert and --tls-key: without TLS the console is \
                 plain HTTP already"
                    .into(),
            ))
        }
        _ => None,
    };
    if tls.is_none() && !pg_addr.ip().is_loopback() {
        tracing::warn!(%pg_addr, "listening on a non-loopback address without TLS: passwords' SCRAM exchanges, queries and results cross the network in clear");
    }
    let security = Security {
        auth: auth_mode,
        clientcert,
        accounts,
        require_tls_remote,
    };
    let max_connections = args
        .max_connections
        .or(file.server.max_connections)
        .unwrap_or(100);
    if max_connections == 0 {
        return Err(ServerError::Refused(
            "max_connections must be at least 1".into(),
        ));
    }
    fd_limit::ensure(max_connections).map_err(ServerError::Refused)?;
    let size = |flag: &str, v: Option<String>| -> Result<Option<usize>, ServerError> {
        v.map(|text| {
            eddy_sql::memory::parse_memory_size(&text)
                .filter(|b| *b > 0)
                .ok_or_else(|| {
                    ServerError::Refused(format!(
                        "{flag} = \"{text}\": expected a size such as 512MB or 8GB"
                    ))
                })
        })
        .transpose()
    };
    let memory_limit = size(
        "memory_limit",
        args.memory_limit
            .clone()
            .or(file.server.memory_limit.clone()),
    )?;
    let query_memory_limit = size(
        "query_memory_limit",
        args.query_memory_limit
            .clone()
            .or(file.server.query_memory_limit.clone()),
    )?;
    let scheduling = eddy_sql::scheduling::SchedulingGroups::new(
        file.scheduler.groups.clone(),
        file.scheduler.roles.clone(),
    )
    .map_err(|e| ServerError::Refused(format!("[scheduler]: {e}")))?;
    let slots = match file.scheduler.slots {
        Some(0) => {
            return Err(ServerError::Refused(
                "[scheduler] slots must be at least 1".into(),
            ))
        }
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    // measured: connections on the network threads serve more lookups and
    // keep a lower p50 under analytics (docs/decisions/0002)
    let connections_on_contexts = match file.scheduler.connections_on.as_deref() {
        Some("contexts") => true,
        None | Some("io_threads") => false,
        Some(other) => {
            return Err(ServerError::Refused(format!(
                "[scheduler] connections_on = \"{other}\": expected \"contexts\" or \"io_threads\""
            )))
        }
    };
    let worker_nice = file
        .scheduler
        .worker_nice
        .unwrap_or(if connections_on_contexts { 0 } else { 10 });
    if !(0..=19).contains(&worker_nice) {
        return Err(ServerError::Refused(format!(
            "[scheduler] worker_nice = {worker_nice}: expected 0 to 19"
        )));
    }
    let admission = match (
        file.scheduler.max_running_queries,
        file.scheduler.max_queued_queries,
    ) {
        (Some(0), _) | (_, Some(0)) => {
            return Err(ServerError::Refused(
                "[scheduler] max_running_queries and max_queued_queries must be at least 1".into(),
            ))
        }
        (Some(running), queued) => Some(Arc::new(eddy_sql::admission::Admission::new(
            running,
            queued.unwrap_or(256),
        ))),
        (None, Some(_)) => {
            return Err(ServerError::Refused(
                "[scheduler] max_queued_queries needs max_running_queries".into(),
            ))
        }
        (None, None) => None,
    };
    let serving_share = file.scheduler.serving_share.unwrap_or(8);
    if !(eddy_sched::MIN_SHARE..=eddy_sched::MAX_SHARE).contains(&serving_share) {
        return Err(ServerError::Refused(format!(
            "[scheduler] serving_share = {serving_share}: expected {} to {}",
            eddy_sched::MIN_SHARE,
            eddy_sched::MAX_SHARE
        )));
    }
    let mut cfg = EngineConfig::new(&args.data_dir);
    if let Some(v) = file.storage.memtable_bytes {
        cfg.memtable_bytes = v;
    }
    if let Some(v) = file.storage.default_shard_count {
        cfg.default_shard_count = v;
    }
    if let Some(v) = file.storage.sync {
        cfg.sync = v;
    }
    if let Some(v) = file.storage.background_compaction {
        cfg.background_compaction = v;
    }
    tracing::info!(gpu = %eddy_gpu::discover(), "devices");
    let engine = Engine::open(cfg)?;
    // the engine created it: the start-up message and the console name it
    // whole
    let data_dir = std::fs::canonicalize(&args.data_dir).unwrap_or_else(|_| args.data_dir.clone());
    let streams = eddy_streamsql::StreamManager::start(Arc::clone(&engine), &args.data_dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // room for the deepest statement Eddy plans (statement_limits);
        // stacks are reserved, not committed, until used
        .thread_stack_size(
            eddy_sql::statement_limits::MAX_EXPRESSION_DEPTH
                * eddy_sql::statement_limits::STACK_BYTES_PER_LEVEL,
        )
        .build()
        .map_err(ServerError::Runtime)?;
    // every connection, query and scan runs as an execution context here;
    // tokio keeps the sockets, timers and the HTTP console
    let scheduler = eddy_sched::Scheduler::start(eddy_sched::SchedulerConfig {
        slots,
        // a context blocked in a lock wait holds a thread: one per
        // connection, the slots, and room for scans blocked on disk
        max_threads: max_connections.saturating_add(slots).saturating_add(64),
        stack_size: eddy_sql::statement_limits::MAX_EXPRESSION_DEPTH
            * eddy_sql::statement_limits::STACK_BYTES_PER_LEVEL,
        runtime: Some(runtime.handle().clone()),
        nice: worker_nice,
    });
    eddy_sql::scheduling::install_datafusion_tracer();
    tracing::info!(
        slots,
        serving_share,
        connections_on_contexts,
        worker_nice,
        "scheduler"
    );
    let result = runtime.block_on(serve(
        Arc::clone(&engine),
        Arc::clone(&streams),
        Listen {
            pg_addr,
            http_addr,
            max_connections,
            tls,
            http_tls,
            data_dir,
            password_from,
            memory_limit,
            query_memory_limit,
            scheduler: Arc::clone(&scheduler),
            serving_share,
            connections_on_contexts,
            scheduling,
            admission,
        },
        security,
        args.config.as_deref(),
    ));
    tracing::info!("stopping stream jobs");
    streams.shutdown();
    scheduler.shutdown();
    tracing::info!("closing the storage engine");
    let closed = engine.close();
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    result?;
    closed?;
    tracing::info!("eddy stopped");
    Ok(())
}

/// Where and how the server listens.
struct Listen {
    pg_addr: SocketAddr,
    http_addr: SocketAddr,
    max_connections: usize,
    tls: Option<tls::TlsAcceptor>,
    /// The console's HTTPS (`None`: plain HTTP).
    http_tls: Option<tls::TlsAcceptor>,
    /// Absolute.
    data_dir: PathBuf,
    password_from: banner::PasswordFrom,
    /// `--memory-limit` / `--query-memory-limit` (`eddy_sql::memory`).
    memory_limit: Option<usize>,
    query_memory_limit: Option<usize>,
    /// Where connections and queries run (`eddy_sched`).
    scheduler: Arc<eddy_sched::Scheduler>,
    serving_share: u32,
    /// Connections as `serving` contexts, else on tokio's threads.
    connections_on_contexts: bool,
    scheduling: eddy_sql::scheduling::SchedulingGroups,
    /// `[scheduler] max_running_queries` (`eddy_sql::admission`).
    admission: Option<Arc<eddy_sql::admission::Admission>>,
}

async fn serve(
    engine: Arc<Engine>,
    streams: Arc<eddy_streamsql::StreamManager>,
    listen: Listen,
    security: Security,
    config_file: Option<&std::path::Path>,
) -> Result<(), ServerError> {
    let Listen {
        pg_addr,
        http_addr,
        max_connections,
        tls,
        http_tls,
        data_dir,
        password_from,
        memory_limit,
        query_memory_limit,
        scheduler,
        serving_share,
        connections_on_contexts,
        scheduling,
        admission,
    } = listen;
    let started = (std::time::Instant::now(), std::time::SystemTime::now());
    let metrics = Arc::new(Metrics::default());
    let views = Arc::clone(&streams);
    metrics.add_section(Box::new(move |out| views.render_metrics(out)));
    let mut db = Database::open(
        Arc::clone(&engine),
        "eddy",
        Some(Arc::clone(&streams) as Arc<dyn eddy_sql::StreamStatements>),
    )
    .map_err(ServerError::Database)?;
    if let Some(path) = config_file {
        // it holds every user's password: never read or written by COPY
        db.server_files = db.server_files.clone().with_config_file(path);
    }
    if memory_limit.is_some() || query_memory_limit.is_some() {
        let server = memory_limit.unwrap_or(db.memory.server_bytes());
        let query = query_memory_limit.unwrap_or(server / 4);
        db.memory = eddy_sql::memory::MemoryBudget::new(&data_dir, server, query)
            .map_err(ServerError::Database)?;
    }
    tracing::info!(
        server = db.memory.server_bytes(),
        query = db.memory.default_query_limit(),
        "query memory"
    );
    db.scheduling = scheduling;
    db.scheduler = Some(Arc::clone(&scheduler));
    if let Some(gate) = &admission {
        let gate = Arc::clone(gate);
        metrics.add_section(Box::new(move |out| metrics::render_admission(out, &gate)));
    }
    db.admission = admission;
    let classes = Arc::clone(&scheduler);
    metrics.add_section(Box::new(move |out| {
        metrics::render_scheduler(out, &classes)
    }));
    // the config file's users become roles (verifiers only)
    security.accounts.seed(&db.roles)?;
    let db = Arc::new(db);
    let backend = Arc::new(Backend::new(db, Arc::clone(&metrics), security));
    // pg_stat_activity, pg_cancel_backend, pg_terminate_backend
    let connections: Arc<dyn eddy_sql::backends::Backends> =
        Arc::new(backends::ServerBackends::new(&backend));
    let _ = backend.db.backends.set(connections);
    let idle = Arc::clone(&backend.idle);
    let handlers = Arc::new(Handlers::new(Arc::clone(&backend)));
    // the HTTP port first: once the PostgreSQL port accepts, nothing left
    // can fail, so a client (or a start-up script) that sees it open never
    // meets a server about to exit because its second port was taken
    let http = TcpListener::bind(http_addr)
        .await
        .map_err(|e| ServerError::Listen {
            addr: http_addr.to_string(),
            source: e,
        })?;
    let pg = TcpListener::bind(pg_addr)
        .await
        .map_err(|e| ServerError::Listen {
            addr: pg_addr.to_string(),
            source: e,
        })?;
    let pg_bound = pg.local_addr().unwrap_or(pg_addr);
    let http_bound = http.local_addr().unwrap_or(http_addr);
    tracing::info!(pg = %pg_bound, http = %http_bound, tls = tls.is_some(), "eddy server listening");
    let console = Arc::new(console::Console::new(
        engine,
        streams,
        backend,
        console::ServerInfo {
            started: started.0,
            started_wall: started.1,
            data_dir: data_dir.clone(),
            pg_addr: pg_bound,
            http_addr: http_bound,
            auth: match password_from {
                banner::PasswordFrom::None => "trust",
                banner::PasswordFrom::Certificate => "cert",
                banner::PasswordFrom::Env | banner::PasswordFrom::ConfigFile => "scram",
            },
            tls: tls.is_some(),
            https: http_tls.is_some(),
            max_connections,
        },
    ));
    let https = http_tls.is_some();
    tokio::spawn(console::serve(http, console, http_tls));
    {
        use std::io::Write;
        let message = banner::startup_message(&banner::StartupInfo {
            version: env!("CARGO_PKG_VERSION"),
            pg: pg_bound,
            http: http_bound,
            password: password_from,
            tls: tls.is_some(),
            https,
            data_dir: &data_dir,
            config_file,
        });
        let _ = std::io::stderr().lock().write_all(message.as_bytes());
    }
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let live = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn(memory_trim::run(Arc::clone(&live)));
    let mut accept_errors = AcceptBackoff::default();
    // all connections share one group: their protocol work, fixed-plan
    // lookups and single-row writes (analytical queries get their own)
    let serving = scheduler.group(eddy_sched::class::SERVING, serving_share);
    loop {
        tokio::select! {
            _ = &mut shutdown => {
                tracing::info!("shutdown signal received");
                return Ok(());
            }
            accepted = pg.accept() => {
                match accepted {
                    Ok((sock, peer)) => {
                        accept_errors.reset();
                        let Some(slot) = ConnectionSlot::take(&live, max_connections) else {
                            tracing::warn!(%peer, max_connections, "connection refused: too many clients");
                            tokio::spawn(refuse_connection(sock));
                            continue;
                        };
                        let _ = sock.set_nodelay(true);
                        let h = Arc::clone(&handlers);
                        let acceptor = tls.clone();
                        let (watch, registration) = idle.register(peer);
                        let connection = async move {
                            let _registration = registration;
                            let _slot = slot;
                            let fd = idle::Fd::of(&sock);
                            // biased, the termination first: a client's
                            // next message racing pg_terminate_backend
                            // (the COMMIT of the block being ended) must
                            // find the connection ended, not run
                            tokio::select! {
                                biased;
                                _ = watch.terminated() => {
                                    // pg_terminate_backend: the protocol
                                    // future ends with this select (its
                                    // statement stops, its transaction
                                    // rolls back); the client is told why
                                    if watch.is_encrypted() {
                                        fd.shut_down();
                                    } else {
                                        fd.send_fatal("57P01", "terminating connection due to administrator command");
                                    }
                                    tracing::info!(%peer, "terminating connection due to administrator command");
                                }
                                _ = watch.expired() => {
                                    // The protocol loop is waiting for the
                                    // client: nothing else writes now. Over
                                    // TLS a plaintext message would corrupt
                                    // the stream: close without one.
                                    if watch.is_encrypted() {
                                        fd.shut_down();
                                    } else {
                                        fd.send_fatal("25P03", "terminating connection due to idle-in-transaction timeout");
                                    }
                                    tracing::info!(%peer, "terminating connection due to idle-in-transaction timeout");
                                }
                                r = pgwire::tokio::process_socket(sock, acceptor, h) => {
                                    if let Err(e) = r {
                                        tracing::debug!(error = %e, "connection ended with an error");
                                    }
                                }
                                _ = idle::peer_gone(&fd) => {
                                    // dropping the protocol future drops the
                                    // running statement: its DataFusion tasks
                                    // stop and its transaction rolls back
                                    tracing::info!(%peer, "client disconnected; its statement, if any, is stopped");
                                }
                            }
                        };
                        // detached either way: the connection ends by itself
                        if connections_on_contexts {
                            drop(serving.spawn(connection));
                        } else {
                            tokio::spawn(connection);
                        }
                    }
                    Err(e) => {
                        // out of file descriptors (or another transient
                        // error): retrying at once spins and floods the
                        // log, so wait, longer each time, and log once
                        // per pause
                        let pause = accept_errors.next_pause();
                        tracing::warn!(error = %e, pause_ms = pause.as_millis() as u64, "accept failed; pausing");
                        tokio::time::sleep(pause).await;
                    }
                }
            }
        }
    }
}

/// PostgreSQL's answer to a connection over `max_connections`: read the
/// startup packet (closing with it unread could reset the connection
/// before the client reads the reason), send FATAL 53300, close.
async fn refuse_connection(mut sock: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut startup = [0u8; 8192];
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), sock.read(&mut startup)).await;
    let _ = sock
        .write_all(&idle::fatal_message(
            "53300",
            "sorry, too many clients already",
        ))
        .await;
    let _ = sock.shutdown().await;
}

/// One of `max_connections` places; freed when the connection ends.
struct ConnectionSlot(Arc<std::sync::atomic::AtomicUsize>);

impl ConnectionSlot {
    fn take(live: &Arc<std::sync::atomic::AtomicUsize>, max: usize) -> Option<ConnectionSlot> {
        use std::sync::atomic::Ordering;
        live.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| ConnectionSlot(Arc::clone(live)))
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// How long the accept loop waits after consecutive failures: 10 ms,
/// doubling to 1 s.
#[derive(Default)]
struct AcceptBackoff {
    failures: u32,
}

impl AcceptBackoff {
    fn next_pause(&mut self) -> std::time::Duration {
        let ms = 10u64.saturating_mul(1u64 << self.failures.min(7)).min(1000);
        self.failures = self.failures.saturating_add(1);
        std::time::Duration::from_millis(ms)
    }

    fn reset(&mut self) {
        self.failures = 0;
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
