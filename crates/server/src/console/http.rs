//! The console's HTTP/1.1: one request per connection, read with fixed
//! limits, answered, closed.
//!
//! Limits (a client reaches this code, so nothing here may panic or grow
//! without bound): the request head is at most [`MAX_HEAD`] bytes and
//! [`MAX_HEADERS`] headers, a body at most [`MAX_BODY`] bytes (it is read
//! and discarded: no endpoint takes one), and the whole request must
//! arrive within [`READ_TIMEOUT`]. Chunked bodies are refused (411): every
//! browser sends a form's Content-Length.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub const MAX_HEAD: usize = 16 * 1024;
pub const MAX_HEADERS: usize = 64;
pub const MAX_BODY: usize = 4 * 1024;
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Other(String),
}

/// A parsed request head.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    /// The target's path, without its query string.
    pub path: String,
    /// Header names lower-cased, values trimmed.
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request was not read; each maps to the status answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadRequest {
    /// 400 with the reason.
    Malformed(&'static str),
    /// 413: head or body over the limits.
    TooLarge,
    /// 411: a body without Content-Length (chunked).
    LengthRequired,
    /// 505.
    Version,
}

impl BadRequest {
    pub fn response(&self) -> Response {
        match self {
            BadRequest::Malformed(why) => Response::text(400, "Bad Request", why),
            BadRequest::TooLarge => Response::text(
                413,
                "Payload Too Large",
                "request too large: the head may have 16 KiB, the body 4 KiB",
            ),
            BadRequest::LengthRequired => Response::text(
                411,
                "Length Required",
                "a body needs a Content-Length (chunked bodies are not accepted)",
            ),
            BadRequest::Version => Response::text(
                505,
                "HTTP Version Not Supported",
                "only HTTP/1.0 and HTTP/1.1 are served",
            ),
        }
    }
}

/// Why no request came at all: the connection is closed without an answer.
#[derive(Debug)]
pub enum NoRequest {
    Closed,
    TimedOut,
    Io,
}

/// Where the head ends (index just past the blank line), if it does.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Parses a complete request head (without the blank line's bytes
/// mattering). Pure: unit-tested below.
pub fn parse_head(head: &[u8]) -> Result<(Request, usize), BadRequest> {
    let text = std::str::from_utf8(head)
        .map_err(|_| BadRequest::Malformed("request head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadRequest::Malformed("malformed request line"));
    };
    if !version.starts_with("HTTP/") {
        return Err(BadRequest::Malformed("malformed request line"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(BadRequest::Version);
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(BadRequest::Malformed("malformed method"));
    }
    if !target.starts_with('/') {
        return Err(BadRequest::Malformed("the target must be a path"));
    }
    let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            continue;
        }
        if headers.len() == MAX_HEADERS {
            return Err(BadRequest::TooLarge);
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(BadRequest::Malformed("malformed header line"));
        };
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(BadRequest::Malformed("malformed header name"));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    let request = Request {
        method: match method {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            other => Method::Other(other.to_string()),
        },
        path,
        headers,
    };
    if request.header("transfer-encoding").is_some() {
        return Err(BadRequest::LengthRequired);
    }
    let body = match request.header("content-length") {
        None => 0,
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| BadRequest::Malformed("malformed Content-Length"))?,
    };
    if body > MAX_BODY {
        return Err(BadRequest::TooLarge);
    }
    Ok((request, body))
}

/// Reads one request (head, then its body, discarded).
pub async fn read_request<S: AsyncRead + Unpin>(
    sock: &mut S,
) -> Result<Result<Request, BadRequest>, NoRequest> {
    match tokio::time::timeout(READ_TIMEOUT, read_inner(sock)).await {
        Ok(r) => r,
        Err(_) => Err(NoRequest::TimedOut),
    }
}

async fn read_inner<S: AsyncRead + Unpin>(
    sock: &mut S,
) -> Result<Result<Request, BadRequest>, NoRequest> {
    let mut buf = vec![0u8; MAX_HEAD];
    let mut filled = 0;
    let end = loop {
        if let Some(end) = head_end(&buf[..filled]) {
            break end;
        }
        if filled == buf.len() {
            return Ok(Err(BadRequest::TooLarge));
        }
        let n = sock
            .read(&mut buf[filled..])
            .await
            .map_err(|_| NoRequest::Io)?;
        if n == 0 {
            return if filled == 0 {
                Err(NoRequest::Closed)
            } else {
                Ok(Err(BadRequest::Malformed("incomplete request head")))
            };
        }
        filled += n;
    };
    let (request, body) = match parse_head(&buf[..end]) {
        Ok(r) => r,
        Err(e) => return Ok(Err(e)),
    };
    // the body (at most MAX_BODY bytes) is read so that closing the
    // connection does not reset it before the client reads the answer
    let mut left = body.saturating_sub(filled - end);
    while left > 0 {
        let want = left.min(buf.len());
        let n = sock
            .read(&mut buf[..want])
            .await
            .map_err(|_| NoRequest::Io)?;
        if n == 0 {
            break;
        }
        left -= n;
    }
    Ok(Ok(request))
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub reason: &'static str,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// Further headers (Allow, Location).
    pub headers: Vec<(&'static str, String)>,
}

impl Response {
    pub fn new(
        status: u16,
        reason: &'static str,
        content_type: &'static str,
        body: Vec<u8>,
    ) -> Response {
        Response {
            status,
            reason,
            content_type,
            body,
            headers: Vec::new(),
        }
    }

    pub fn text(status: u16, reason: &'static str, body: &str) -> Response {
        let mut body = body.to_string();
        body.push('\n');
        Response::new(
            status,
            reason,
            "text/plain; charset=utf-8",
            body.into_bytes(),
        )
    }

    pub fn html(body: String) -> Response {
        Response::new(200, "OK", "text/html; charset=utf-8", body.into_bytes())
    }

    pub fn json<T: serde::Serialize>(status: u16, reason: &'static str, value: &T) -> Response {
        match serde_json::to_vec_pretty(value) {
            Ok(mut body) => {
                body.push(b'\n');
                Response::new(status, reason, "application/json", body)
            }
            Err(e) => Response::text(
                500,
                "Internal Server Error",
                &format!("cannot encode the answer: {e}"),
            ),
        }
    }

    pub fn with_header(mut self, name: &'static str, value: String) -> Response {
        self.headers.push((name, value));
        self
    }

    /// The bytes on the wire; `head_only` for HEAD requests.
    pub fn to_bytes(&self, head_only: bool) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n",
            self.status,
            self.reason,
            self.content_type,
            self.body.len()
        );
        if self.content_type.starts_with("text/html") {
            // pages are server-rendered: no script runs, forms post here
            out.push_str("Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'\r\n");
        }
        for (name, value) in &self.headers {
            out.push_str(name);
            out.push_str(": ");
            // header values are ours (paths, method lists): no line breaks
            out.push_str(&value.replace(['\r', '\n'], " "));
            out.push_str("\r\n");
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        if !head_only {
            bytes.extend_from_slice(&self.body);
        }
        bytes
    }
}

/// Writes `response` and closes the sending side.
pub async fn write_response<S: AsyncWrite + Unpin>(
    sock: &mut S,
    response: &Response,
    head_only: bool,
) {
    let _ = sock.write_all(&response.to_bytes(head_only)).await;
    let _ = sock.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<(Request, usize), BadRequest> {
        parse_head(s.as_bytes())
    }

    #[test]
    fn parses_a_browser_request() {
        let (r, body) = parse(
            "GET /statements?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: text/html\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.path, "/statements");
        assert_eq!(r.header("host"), Some("127.0.0.1:8080"));
        assert_eq!(body, 0);
    }

    #[test]
    fn refuses_what_it_does_not_serve() {
        assert_eq!(
            parse("GET / HTTP/2.0\r\n\r\n").unwrap_err(),
            BadRequest::Version
        );
        assert!(matches!(
            parse("GARBAGE\r\n\r\n").unwrap_err(),
            BadRequest::Malformed(_)
        ));
        assert!(matches!(
            parse("GET http://x/ HTTP/1.1\r\n\r\n").unwrap_err(),
            BadRequest::Malformed(_)
        ));
        assert!(matches!(
            parse("GET / HTTP/1.1\r\nno colon\r\n\r\n").unwrap_err(),
            BadRequest::Malformed(_)
        ));
        assert_eq!(
            parse("POST / HTTP/1.1\r\nContent-Length: 99999\r\n\r\n").unwrap_err(),
            BadRequest::TooLarge
        );
        assert!(matches!(
            parse("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n").unwrap_err(),
            BadRequest::Malformed(_)
        ));
        assert_eq!(
            parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap_err(),
            BadRequest::LengthRequired
        );
        let many: String = (0..=MAX_HEADERS).map(|i| format!("x{i}: y\r\n")).collect();
        assert_eq!(
            parse(&format!("GET / HTTP/1.1\r\n{many}\r\n")).unwrap_err(),
            BadRequest::TooLarge
        );
        assert!(matches!(
            parse_head(b"GET /\xff HTTP/1.1\r\n\r\n").unwrap_err(),
            BadRequest::Malformed(_)
        ));
    }

    #[tokio::test]
    async fn an_endless_head_is_too_large_and_a_body_is_drained() {
        let big = vec![b'a'; MAX_HEAD + 10];
        let mut r = &big[..];
        assert_eq!(
            read_request(&mut r).await.unwrap().unwrap_err(),
            BadRequest::TooLarge
        );
        let req = b"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
        let mut r = &req[..];
        let got = read_request(&mut r).await.unwrap().unwrap();
        assert_eq!(got.method, Method::Post);
        assert!(r.is_empty());
        let mut empty: &[u8] = &[];
        assert!(matches!(
            read_request(&mut empty).await,
            Err(NoRequest::Closed)
        ));
    }

    #[test]
    fn a_head_response_has_no_body() {
        let r = Response::text(200, "OK", "hello");
        let full = r.to_bytes(false);
        let head = r.to_bytes(true);
        assert!(full.ends_with(b"hello\n"));
        assert!(head.ends_with(b"\r\n\r\n"));
        assert!(String::from_utf8_lossy(&head).contains("Content-Length: 6"));
    }
}
