//! The real `eddy` binary on a free loopback port with a temporary data
//! directory, for end-to-end tests. No mocks.
#![allow(dead_code)]

pub mod drivers;
pub mod rng;
pub mod stream_jobs;
pub mod wire;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls};

pub struct Server {
    pub child: Child,
    pub port: u16,
    /// The HTTP port (`/metrics`).
    pub http_port: u16,
    pub _dir: Option<tempfile::TempDir>,
    pub data_dir: std::path::PathBuf,
}

/// The SQLSTATE `sql` fails with on `c` ("ok" when it succeeds).
pub async fn code_of(c: &Client, sql: &str) -> String {
    match c.batch_execute(sql).await {
        Ok(()) => "ok".into(),
        Err(e) => e
            .as_db_error()
            .map(|d| d.code().code().to_string())
            .unwrap_or_else(|| format!("not a server error: {e}")),
    }
}

/// A port nothing listens on now and that this test binary has not handed
/// out before: tests run in parallel threads, and the kernel may offer a
/// port just released by another test's probe, so one server's HTTP port
/// could become another's PostgreSQL port (a client then talks to the
/// metrics server and is reset).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    for _ in 0..100 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(54329);
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
    panic!("no free port")
}

/// Waits until `child` listens on `port`. A connection counts only when
/// its two ends differ: on loopback a client retrying a port nothing
/// listens on can be handed that same port and connect to itself, which
/// would look like a server that is up. Returns the exit status when the
/// child exits first.
fn wait_listening(child: &mut Child, port: u16) -> Result<(), std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(status);
        }
        if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let self_connected = s.local_addr().ok() == s.peer_addr().ok();
            if !self_connected && listens_on(child.id(), port) != Some(false) {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("eddy did not listen on {port} within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether process `pid` holds the socket listening on loopback `port`
/// (Linux: `/proc/net/tcp` names the listener's inode, `/proc/<pid>/fd`
/// the process's sockets); `None` where that cannot be read. A probe once
/// succeeded on a port the new server had not bound yet (the server never
/// printed its banner and the test's first connection was refused), so a
/// connection alone does not prove the server is up.
fn listens_on(pid: u32, port: u16) -> Option<bool> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let want = format!("0100007F:{port:04X}");
    // fields: sl local_address rem_address st ... inode (the 10th)
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(1) == Some(&want.as_str()) && f.get(3) == Some(&"0A"))
                .then(|| f.get(9).map(|i| format!("socket:[{i}]")))
                .flatten()
        })
        .collect();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let ours = fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .ok()
            .is_some_and(|t| inodes.iter().any(|i| t.as_os_str() == i.as_str()))
    });
    if !ours {
        eprintln!("port {port} answered, but not by eddy (pid {pid}); waiting for it");
    }
    Some(ours)
}

impl Server {
    /// Kills the server with SIGKILL (a crash: nothing is flushed).
    pub fn kill_9(&self) {
        let _ = Command::new("kill")
            .args(["-9", &self.child.id().to_string()])
            .status();
    }

    pub fn start_in(
        dir: Option<tempfile::TempDir>,
        data_dir: std::path::PathBuf,
        auth: &str,
    ) -> Server {
        Server::start_with_env(dir, data_dir, auth, &[])
    }

    /// `start_in` with extra environment variables for the server.
    pub fn start_with_env(
        dir: Option<tempfile::TempDir>,
        data_dir: std::path::PathBuf,
        auth: &str,
        env: &[(&str, &str)],
    ) -> Server {
        Server::start_with(dir, data_dir, auth, env, &[])
    }

    /// `start_in` with extra environment variables and command-line flags.
    pub fn start_with(
        dir: Option<tempfile::TempDir>,
        data_dir: std::path::PathBuf,
        auth: &str,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Server {
        Server::launch(dir, data_dir, auth, env, args, None)
    }

    /// `start_in` with the server's log (stderr) written to `log`.
    pub fn start_logged(
        dir: Option<tempfile::TempDir>,
        data_dir: std::path::PathBuf,
        auth: &str,
        log: &std::path::Path,
    ) -> Server {
        std::fs::File::create(log).expect("log file");
        Server::launch(dir, data_dir, auth, &[], &[], Some(log))
    }

    /// `start_with_env` with the server's log (stderr) written to `log`.
    pub fn start_logged_with_env(
        dir: Option<tempfile::TempDir>,
        data_dir: std::path::PathBuf,
        auth: &str,
        env: &[(&str, &str)],
        log: &std::path::Path,
    ) -> Server {
        std::fs::File::create(log).expect("log file");
        Server::launch(dir, data_dir, auth, env, &[], Some(log))
    }

    fn launch(
        dir: Option<tempfile::TempDir>,
        data_dir: std::path::PathBuf,
        auth: &str,
        env: &[(&str, &str)],
        args: &[&str],
        log: Option<&std::path::Path>,
    ) -> Server {
        // A probed port can be taken again before the server binds it (by
        // another test's client socket, say): the server then exits with
        // "address in use". Such a start is retried on fresh ports.
        const LAUNCHES: usize = 5;
        for launch in 1..=LAUNCHES {
            let port = free_port();
            let http = free_port();
            let err = match log {
                Some(path) => Stdio::from(
                    std::fs::OpenOptions::new()
                        .append(true)
                        .open(path)
                        .expect("log file"),
                ),
                None => Stdio::inherit(),
            };
            let mut child = Command::new(env!("CARGO_BIN_EXE_eddy"))
                .args(["server", "--data-dir"])
                .arg(&data_dir)
                .args([
                    "--pg-addr",
                    &format!("127.0.0.1:{port}"),
                    "--http-addr",
                    &format!("127.0.0.1:{http}"),
                    "--auth",
                    auth,
                ])
                .args(args)
                .env("EDDY_PASSWORD", "secret")
                .env("EDDY_LOG", "warn")
                .envs(env.iter().copied())
                .stdout(Stdio::null())
                .stderr(err)
                .spawn()
                .expect("start eddy");
            match wait_listening(&mut child, port) {
                Ok(()) => {
                    return Server {
                        child,
                        port,
                        http_port: http,
                        _dir: dir,
                        data_dir,
                    }
                }
                Err(status) if launch < LAUNCHES => {
                    eprintln!("eddy exited ({status}) before listening on {port}; retrying");
                }
                Err(status) => panic!("eddy exited ({status}) before listening, {LAUNCHES} times"),
            }
        }
        unreachable!("the last launch returns or panics")
    }

    pub fn start(auth: &str) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().to_path_buf();
        Server::start_in(Some(dir), path, auth)
    }

    pub async fn connect(&self) -> Client {
        self.connect_as("eddy", "secret").await.expect("connect")
    }

    pub async fn connect_as(&self, user: &str, pw: &str) -> Result<Client, tokio_postgres::Error> {
        let conn = format!(
            "host=127.0.0.1 port={} user={user} password={pw} dbname=eddy",
            self.port
        );
        let (client, connection) = tokio_postgres::connect(&conn, NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Whether `/metrics` shows the line `line` (name and value) within
    /// about `seconds`, polling every 20 ms.
    pub async fn metric_line_within(&self, line: &str, seconds: u64) -> bool {
        let line = format!("{line}\n");
        for _ in 0..seconds * 50 {
            if self.metrics().contains(&line) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// The body of `GET /metrics`.
    pub fn metrics(&self) -> String {
        use std::io::{Read, Write};
        let mut s =
            std::net::TcpStream::connect(("127.0.0.1", self.http_port)).expect("connect http");
        // the superuser's credentials (`eddy`, `secret`): a server with
        // password authentication asks for them, a trusting one ignores them
        s.write_all(
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ZWRkeTpzZWNyZXQ=\r\n\r\n",
        )
        .expect("request");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("response");
        out
    }

    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
