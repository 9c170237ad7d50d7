//! Child-process servers for a benchmark run: a private PostgreSQL and the Eddy server.
//!
//! Both are started on free loopback ports in their own temporary data
//! directories and stopped (and their directories removed) on drop, so an
//! interrupted run leaves nothing running.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};

/// Where a PostgreSQL-protocol server listens and who to log in as.
#[derive(Debug, Clone)]
pub struct PgTarget {
    /// Host name or IP.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// User name.
    pub user: String,
    /// Password (empty for trust).
    pub password: String,
    /// Database name.
    pub dbname: String,
}

impl PgTarget {
    /// Parses `host:port`.
    pub fn from_addr(addr: &str, user: &str, password: &str, dbname: &str) -> Result<Self> {
        let (host, port) = addr.rsplit_once(':').ok_or_else(|| {
            BenchError::InvalidArgument(format!("address `{addr}` is not host:port"))
        })?;
        let port = port
            .parse()
            .map_err(|_| BenchError::InvalidArgument(format!("bad port in `{addr}`")))?;
        Ok(PgTarget {
            host: host.to_string(),
            port,
            user: user.to_string(),
            password: password.to_string(),
            dbname: dbname.to_string(),
        })
    }

    /// A tokio-postgres config for this target.
    pub fn config(&self) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        c.host(&self.host)
            .port(self.port)
            .user(&self.user)
            .dbname(&self.dbname);
        if !self.password.is_empty() {
            c.password(&self.password);
        }
        c.connect_timeout(Duration::from_secs(10));
        c
    }
}

/// A free TCP port on 127.0.0.1 (free when asked; good enough for a harness).
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Waits until `host:port` accepts TCP connections. A connection whose two
/// ends are the same socket address does not count: on loopback a client
/// retrying a port nothing listens on can be handed that port and connect
/// to itself.
pub fn wait_for_port(port: u16, timeout: Duration, child: Option<&mut Child>) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut child = child;
    loop {
        if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            if s.local_addr().ok() != s.peer_addr().ok() {
                return Ok(());
            }
        }
        if let Some(c) = child.as_deref_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(BenchError::Process {
                    command: "server".into(),
                    detail: format!("exited with {status} before listening on {port}"),
                });
            }
        }
        if Instant::now() > deadline {
            return Err(BenchError::Timeout(format!(
                "nothing listens on 127.0.0.1:{port}"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn run_checked(cmd: &mut Command) -> Result<String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| BenchError::Process {
        command: shown.clone(),
        detail: e.to_string(),
    })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        let tail: String = text
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(BenchError::Process {
            command: shown,
            detail: format!("{}: {tail}", out.status),
        });
    }
    Ok(text)
}

fn is_root() -> bool {
    // SAFETY-free check: root's home and uid show in `id -u`.
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The newest `/usr/lib/postgresql/<v>/bin` (Debian layout), or the directory of `initdb` on PATH.
pub fn find_postgres_bin() -> Option<PathBuf> {
    let mut best: Option<(u32, PathBuf)> = None;
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        for e in rd.flatten() {
            let v: u32 = e.file_name().to_string_lossy().parse().unwrap_or(0);
            let bin = e.path().join("bin");
            if bin.join("postgres").exists() && best.as_ref().is_none_or(|(bv, _)| v > *bv) {
                best = Some((v, bin));
            }
        }
    }
    best.map(|(_, p)| p)
}

/// A private PostgreSQL instance (initdb'd in a temporary directory).
pub struct PostgresServer {
    bin: PathBuf,
    dir: PathBuf,
    as_postgres_user: bool,
    /// Where it listens; user `postgres`, trust authentication.
    pub target: PgTarget,
}

impl PostgresServer {
    /// initdb + start with settings for analytics on this machine.
    pub fn start(bin: Option<PathBuf>) -> Result<Self> {
        let bin = bin
            .or_else(find_postgres_bin)
            .ok_or_else(|| BenchError::Process {
                command: "initdb".into(),
                detail: "PostgreSQL not found (run scripts/bench/setup.sh or pass --pg-bin)".into(),
            })?;
        let port = free_port()?;
        let dir = std::env::temp_dir().join(format!("eddy-bench-pg-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| BenchError::io(&dir, e))?;
        let as_postgres_user = is_root();
        if as_postgres_user {
            run_checked(Command::new("chown").arg("-R").arg("postgres").arg(&dir))?;
        }
        let server = PostgresServer {
            bin,
            dir: dir.clone(),
            as_postgres_user,
            target: PgTarget {
                host: "127.0.0.1".into(),
                port,
                user: "postgres".into(),
                password: String::new(),
                dbname: "postgres".into(),
            },
        };
        let data = dir.join("data");
        server.pg_command("initdb", |c| {
            c.arg("-D").arg(&data).args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-locale",
            ]);
        })?;
        let mem_gb = crate::harness::machine_memory_gb();
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        let shared = ((mem_gb / 4.0).clamp(0.25, 8.0) * 1024.0) as u64;
        let opts = format!(
            "-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c shared_buffers={shared}MB \
             -c work_mem=256MB -c maintenance_work_mem=512MB -c effective_cache_size={cache}MB \
             -c max_worker_processes={w} -c max_parallel_workers={cpus} \
             -c max_parallel_workers_per_gather={cpus} -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off -c wal_level=minimal -c max_wal_senders=0 -c max_wal_size=8GB",
            sock = dir.display(),
            cache = (mem_gb * 512.0) as u64,
            w = cpus + 8,
        );
        let log = dir.join("postgres.log");
        server.pg_command("pg_ctl", |c| {
            c.arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .arg("-o")
                .arg(&opts)
                .args(["-w", "-t", "60", "start"]);
        })?;
        wait_for_port(port, Duration::from_secs(30), None)?;
        Ok(server)
    }

    /// `postgres --version`, e.g. "PostgreSQL 15.13".
    pub fn version(&self) -> String {
        run_checked(Command::new(self.bin.join("postgres")).arg("--version"))
            .map(|s| s.trim().replace("postgres (PostgreSQL) ", "PostgreSQL "))
            .unwrap_or_else(|_| "PostgreSQL (unknown)".into())
    }

    fn pg_command(&self, tool: &str, args: impl FnOnce(&mut Command)) -> Result<String> {
        let exe = self.bin.join(tool);
        let mut cmd = if self.as_postgres_user {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.current_dir(&self.dir);
        args(&mut cmd);
        run_checked(&mut cmd)
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = self.pg_command("pg_ctl", |c| {
            c.arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "-w", "stop"]);
        });
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The Eddy server as a child process (`eddy server ... --auth trust`).
pub struct EddyServer {
    child: Child,
    dir: PathBuf,
    /// Where it listens; user `eddy`.
    pub target: PgTarget,
    /// Its HTTP port (`/metrics`).
    pub http_port: u16,
}

impl EddyServer {
    /// The `eddy` executable: `explicit`, else this process when it is `eddy`,
    /// else an `eddy` beside this executable.
    pub fn find_binary(explicit: Option<PathBuf>) -> Result<PathBuf> {
        if let Some(p) = explicit {
            return Ok(p);
        }
        let me = std::env::current_exe()?;
        if me.file_stem().is_some_and(|s| s == "eddy") {
            return Ok(me);
        }
        let sibling = me.with_file_name("eddy");
        if sibling.exists() {
            return Ok(sibling);
        }
        Err(BenchError::InvalidArgument(
            "cannot find the `eddy` binary: run `eddy bench`, pass --eddy-bin or --eddy-addr"
                .into(),
        ))
    }

    /// Starts `eddy server` on free ports with a fresh data directory under `scratch`.
    pub fn start(bin: &Path, scratch: &Path) -> Result<Self> {
        Self::start_with_args(bin, scratch, &[])
    }

    /// [`EddyServer::start`] with more arguments (e.g. `--config FILE`).
    pub fn start_with_args(
        bin: &Path,
        scratch: &Path,
        extra: &[std::ffi::OsString],
    ) -> Result<Self> {
        let pg_port = free_port()?;
        let http_port = free_port()?;
        let dir = scratch.join(format!("eddy-data-{}-{pg_port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| BenchError::io(&dir, e))?;
        let log_path = dir.with_extension("log");
        let log = std::fs::File::create(&log_path).map_err(|e| BenchError::io(&log_path, e))?;
        let log2 = log.try_clone()?;
        let mut child = Command::new(bin)
            .arg("server")
            .arg("--data-dir")
            .arg(&dir)
            .arg("--pg-addr")
            .arg(format!("127.0.0.1:{pg_port}"))
            .arg("--http-addr")
            .arg(format!("127.0.0.1:{http_port}"))
            .args(["--auth", "trust"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| BenchError::Process {
                command: format!("{} server", bin.display()),
                detail: e.to_string(),
            })?;
        if let Err(e) = wait_for_port(pg_port, Duration::from_secs(60), Some(&mut child)) {
            let _ = child.kill();
            let _ = child.wait();
            let tail = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(BenchError::Process {
                command: format!("{} server", bin.display()),
                detail: format!("{e}; log: {}", tail.chars().take(2000).collect::<String>()),
            });
        }
        Ok(EddyServer {
            child,
            dir,
            http_port,
            target: PgTarget {
                host: "127.0.0.1".into(),
                port: pg_port,
                user: "eddy".into(),
                password: String::new(),
                dbname: "eddy".into(),
            },
        })
    }
}

impl Drop for EddyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
