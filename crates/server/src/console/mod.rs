//! The console: the HTTP listener (`--http-addr`) that serves the web
//! console's pages, their JSON under `/api/`, Prometheus `/metrics` and
//! `/health`.
//!
//! Routes (anything else is 404; a known path with another method is 405):
//! * `GET /`, `/statements`, `/tables`, `/streams`, `/scheduler`: HTML
//!   pages rendered on the server ([`pages`]), no script;
//! * `GET /api/overview|statements|tables|streams|scheduler`: the same
//!   data as JSON ([`data`]);
//! * `POST /api/statements/<id>/cancel`: cancels a running statement the
//!   way a PostgreSQL CancelRequest does (`Backend::cancel_statement`);
//! * `GET /metrics` (Prometheus text), `GET /health`.
//!
//! Who may look: with password authentication every route but `/health`
//! needs a role's name and password ([`login`]); a role sees statement
//! texts and may cancel as `pg_stat_activity` and `pg_cancel_backend`
//! allow it. Cancel is moreover served only when the listener is bound to
//! a loopback address, and only to a request whose `Host` names a loopback
//! address (a page of another site cannot reach it through DNS rebinding)
//! and whose `Origin`, when the browser sends one, is the console itself
//! (no cross-site form posts). See `docs/console.md`.
//!
//! Where to look next: [`activity`] (the running-statement registry the
//! protocol handlers in `crate::pg` feed), [`http`] (request limits).

pub mod activity;
pub mod data;
pub mod html;
pub mod http;
pub mod login;
pub mod pages;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use eddy_storage::Engine;
use eddy_streamsql::StreamManager;
use tokio::net::TcpListener;

use crate::pg::Backend;
use http::{Method, Request, Response};
use login::Viewer;

/// At most this many HTTP connections are served at once; more are
/// answered 503 at once.
const MAX_HTTP_CONNECTIONS: usize = 64;

/// How the server was started, as the overview shows it.
pub struct ServerInfo {
    pub started: Instant,
    pub started_wall: SystemTime,
    /// Absolute.
    pub data_dir: PathBuf,
    pub pg_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub auth: &'static str,
    pub tls: bool,
    /// The console itself is served over HTTPS.
    pub https: bool,
    pub max_connections: usize,
}

impl ServerInfo {
    /// The server checks passwords, so the console does too.
    pub fn password_required(&self) -> bool {
        self.auth != "trust"
    }
}

/// Everything the console reads.
pub struct Console {
    pub engine: Arc<Engine>,
    pub streams: Arc<StreamManager>,
    pub backend: Arc<Backend>,
    pub info: ServerInfo,
    throughput: data::ThroughputSamples,
}

impl Console {
    pub fn new(
        engine: Arc<Engine>,
        streams: Arc<StreamManager>,
        backend: Arc<Backend>,
        info: ServerInfo,
    ) -> Console {
        Console {
            engine,
            streams,
            backend,
            info,
            throughput: data::ThroughputSamples::default(),
        }
    }

    /// Why cancel is off for every request, if it is.
    pub fn cancel_refusal(&self) -> Option<String> {
        (!self.info.http_addr.ip().is_loopback()).then(|| {
            format!(
                "the console listens on {}, not on a loopback address; start the server \
                 with --http-addr 127.0.0.1:{} to cancel from the console, or cancel from a \
                 client (pg_cancel_backend, psql's Ctrl-C)",
                self.info.http_addr,
                self.info.http_addr.port()
            )
        })
    }
}

/// Samples the stream jobs' committed figures once a second, so that the
/// streams page can show a throughput.
async fn sample_streams(console: Arc<Console>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let c = Arc::clone(&console);
        // it reads the checkpoint table: off the async workers
        let done = tokio::task::spawn_blocking(move || {
            let reports = c.streams.job_reports();
            c.throughput.record(&reports);
        })
        .await;
        if done.is_err() {
            return;
        }
    }
}

/// How long a client has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the console until the listener fails for good: over HTTPS with
/// `tls` (the server's certificate), else plain HTTP.
pub async fn serve(
    listener: TcpListener,
    console: Arc<Console>,
    tls: Option<crate::tls::TlsAcceptor>,
) {
    tokio::spawn(sample_streams(Arc::clone(&console)));
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_HTTP_CONNECTIONS));
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "console accept failed; pausing");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let console = Arc::clone(&console);
        let permit = Arc::clone(&slots).try_acquire_owned();
        let tls = tls.clone();
        tokio::spawn(async move {
            let busy = permit.is_err();
            match tls {
                None => answer(sock, &console, peer.ip(), busy).await,
                Some(acceptor) => {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(sock)).await {
                        Ok(Ok(stream)) => answer(stream, &console, peer.ip(), busy).await,
                        // a plain-HTTP request or a client that gave up:
                        // nothing can be said to it
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, %peer, "console TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(%peer, "console TLS handshake timed out"),
                    }
                }
            }
            drop(permit);
        });
    }
}

/// Reads one request from `sock` and answers it (503 when `busy`).
async fn answer<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut sock: S,
    console: &Arc<Console>,
    peer: std::net::IpAddr,
    busy: bool,
) {
    if busy {
        let busy = Response::text(
            503,
            "Service Unavailable",
            "too many console requests at once",
        );
        http::write_response(&mut sock, &busy, false).await;
        return;
    }
    let request = match http::read_request(&mut sock).await {
        Ok(Ok(r)) => r,
        Ok(Err(bad)) => {
            http::write_response(&mut sock, &bad.response(), false).await;
            return;
        }
        Err(_) => return,
    };
    let head_only = request.method == Method::Head;
    let response = respond(console, &request, peer).await;
    http::write_response(&mut sock, &response, head_only).await;
}

/// The page or API behind a GET path, rendered off the async workers
/// (table statistics and the checkpoint table are read).
async fn get(console: &Arc<Console>, path: &str, viewer: Viewer) -> Option<Response> {
    let c = Arc::clone(console);
    let path = path.to_string();
    let scheduler = data::scheduler(console);
    let r = tokio::task::spawn_blocking(move || -> Option<Response> {
        Some(match path.as_str() {
            "/" => Response::html(pages::overview(&data::overview(&c))),
            "/statements" => Response::html(pages::statements(&data::statements(&c, &viewer))),
            "/tables" => Response::html(pages::tables(&data::tables(&c))),
            "/streams" => Response::html(pages::streams(&data::streams(&c))),
            "/scheduler" => Response::html(pages::scheduler(&scheduler)),
            "/api/overview" => Response::json(200, "OK", &data::overview(&c)),
            "/api/statements" => Response::json(200, "OK", &data::statements(&c, &viewer)),
            "/api/tables" => Response::json(200, "OK", &data::tables(&c)),
            "/api/streams" => Response::json(200, "OK", &data::streams(&c)),
            "/api/scheduler" => Response::json(200, "OK", &scheduler),
            "/metrics" => Response::new(
                200,
                "OK",
                "text/plain; version=0.0.4",
                c.backend.metrics.render().into_bytes(),
            ),
            "/health" => Response::text(200, "OK", "ok"),
            _ => return None,
        })
    })
    .await;
    match r {
        Ok(r) => r,
        Err(e) => Some(Response::text(
            500,
            "Internal Server Error",
            &format!("the page failed: {e}"),
        )),
    }
}

const GET_PATHS: [&str; 12] = [
    "/",
    "/statements",
    "/tables",
    "/streams",
    "/scheduler",
    "/api/overview",
    "/api/statements",
    "/api/tables",
    "/api/streams",
    "/api/scheduler",
    "/metrics",
    "/health",
];

/// `<id>` of `/api/statements/<id>/cancel`.
fn cancel_target(path: &str) -> Option<&str> {
    path.strip_prefix("/api/statements/")?
        .strip_suffix("/cancel")
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

async fn respond(console: &Arc<Console>, request: &Request, peer: std::net::IpAddr) -> Response {
    let path = request.path.as_str();
    // a liveness probe carries no credentials and shows nothing
    let viewer = if path == "/health" {
        Viewer::Trusted
    } else {
        match login::authenticate(console, request, peer).await {
            Ok(v) => v,
            Err(refused) => return refused,
        }
    };
    if let Some(id) = cancel_target(path) {
        return match request.method {
            Method::Post => cancel(console, request, id, &viewer).await,
            _ => Response::text(405, "Method Not Allowed", "cancel is a POST")
                .with_header("Allow", "POST".into()),
        };
    }
    if !GET_PATHS.contains(&path) {
        return Response::text(404, "Not Found", "not found");
    }
    match request.method {
        Method::Get | Method::Head => match get(console, path, viewer).await {
            Some(r) => r,
            None => Response::text(404, "Not Found", "not found"),
        },
        Method::Post | Method::Other(_) => Response::text(
            405,
            "Method Not Allowed",
            "this page only answers GET and HEAD",
        )
        .with_header("Allow", "GET, HEAD".into()),
    }
}

/// Whether `host` (a Host header: `name[:port]`) names a loopback address.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Why a cancel request is refused before its target is looked at.
fn refuse_cancel(console: &Console, request: &Request) -> Option<String> {
    if let Some(why) = console.cancel_refusal() {
        return Some(why);
    }
    let host = request.header("host").unwrap_or_default();
    if !is_loopback_host(host) {
        return Some(format!(
            "cancel is served only to requests for a loopback host, not \"{host}\""
        ));
    }
    if let Some(origin) = request.header("origin") {
        let same = origin
            .strip_prefix("http://")
            .is_some_and(|o| o.eq_ignore_ascii_case(host));
        if !same {
            return Some(format!(
                "cancel is refused to pages of another origin ({origin})"
            ));
        }
    }
    None
}

async fn cancel(console: &Arc<Console>, request: &Request, id: &str, viewer: &Viewer) -> Response {
    if let Some(why) = refuse_cancel(console, request) {
        return Response::json(403, "Forbidden", &serde_json::json!({ "error": why }));
    }
    let activity = &console.backend.activity;
    let Some((session_id, seq)) = activity::parse_statement_id(id) else {
        return Response::json(
            400,
            "Bad Request",
            &serde_json::json!({ "error": format!("\"{id}\" is not a statement id (<session>.<n>)") }),
        );
    };
    let Some(session) = activity.session(session_id) else {
        return Response::json(
            404,
            "Not Found",
            &serde_json::json!({ "error": format!("no session {session_id}") }),
        );
    };
    if !viewer.may_signal(&console.backend.db.roles, &session.user) {
        return Response::json(
            403,
            "Forbidden",
            &serde_json::json!({ "error": "permission denied to cancel query" }),
        );
    }
    if !activity.is_running(&session, seq) {
        return Response::json(
            409,
            "Conflict",
            &serde_json::json!({ "error": format!("statement {id} is not running") }),
        );
    }
    let (pid, secret) = session.cancel_key();
    let found = console.backend.cancel_statement(pid, secret).await;
    tracing::info!(
        statement = id,
        session = session_id,
        pid,
        found,
        "cancel from the console"
    );
    let wants_html = request
        .header("accept")
        .is_some_and(|a| a.contains("text/html"));
    if wants_html {
        // a form post from the statements page: back to it
        return Response::new(
            303,
            "See Other",
            "text/plain; charset=utf-8",
            b"cancelled\n".to_vec(),
        )
        .with_header("Location", "/statements".into());
    }
    Response::json(200, "OK", &serde_json::json!({ "cancelled": id }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_paths_name_one_statement() {
        assert_eq!(cancel_target("/api/statements/3.4/cancel"), Some("3.4"));
        assert_eq!(cancel_target("/api/statements//cancel"), None);
        assert_eq!(cancel_target("/api/statements/a/b/cancel"), None);
        assert_eq!(cancel_target("/api/statements/3.4"), None);
    }

    #[test]
    fn loopback_hosts() {
        for h in [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "127.0.0.1",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "",
            "evil.example:8080",
            "10.0.0.1:8080",
            "[::2]:1",
            "127.0.0.1.nip.io",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
