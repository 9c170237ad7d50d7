//! Wire-protocol fuzz target (issue 12), end to end against the real
//! `eddy` binary started with `--auth trust` on a loopback port.
//!
//! Raw TCP connections send (a) mutated startup packets: random and huge
//! declared lengths, random protocol versions, SSLRequest, CancelRequest
//! and GSSENCRequest codes, missing NULs; and (b) after a valid startup,
//! random frontend messages: random type bytes and lengths, Parse with
//! random parameter counts and OIDs, Bind with random format codes,
//! parameter counts and lengths (-2, `i32::MAX`, values for every decoder),
//! Execute with `i32::MAX` rows, Describe/Close with random kinds,
//! CopyData/CopyDone/CopyFail in and out of COPY, FunctionCall, truncated
//! messages and mutated copies of valid Parse/Bind/Execute/Sync sequences.
//!
//! First every seed of `tests/fuzz/seeds/wire/` runs (`startup_*` files are
//! the first bytes of a connection, the others follow a valid login), then
//! random connections from a fixed-seed RNG (`EDDY_FUZZ_SEED` changes it,
//! `EDDY_FUZZ_CASES` raises the number of connections).
//!
//! After every connection the server process must still run and a fresh
//! connection must answer `SELECT 1`; no reply may carry the error of a
//! caught panic ("a bug in Eddy", XX000), and at the end the server's log
//! must hold no panic record.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod common;
use common::rng::Rng;
use common::*;

// ---------------------------------------------------------------------------
// deterministic RNG (`common::rng`), and the draws this target adds

impl Rng {
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// An i32 that is often a boundary.
    fn edgy_i32(&mut self) -> i32 {
        match self.below(4) {
            0 => self.pick(&[
                i32::MIN,
                i32::MAX,
                -1,
                -2,
                0,
                1,
                0x7FFF,
                0x8000,
                0xFFFF,
                1 << 30,
            ]),
            1 => self.next() as i32,
            _ => self.below(16) as i32 - 2,
        }
    }

    fn edgy_i16(&mut self) -> i16 {
        match self.below(4) {
            0 => self.pick(&[i16::MIN, i16::MAX, -1, -2, 0, 1, 1000, 3000, 16383]),
            1 => self.next() as i16,
            _ => self.below(8) as i16 - 1,
        }
    }
}

// ---------------------------------------------------------------------------
// frontend messages

fn cstr(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// A message: type byte, length (body + 4), body.
fn msg(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![ty];
    out.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn startup_packet(params: &[(&str, &str)]) -> Vec<u8> {
    let mut body = 196_608i32.to_be_bytes().to_vec();
    for (k, v) in params {
        cstr(&mut body, k);
        cstr(&mut body, v);
    }
    body.push(0);
    let mut out = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    out.extend(body);
    out
}

fn valid_startup() -> Vec<u8> {
    startup_packet(&[("user", "eddy"), ("database", "eddy")])
}

fn parse(name: &str, sql: &str, oids: &[u32]) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, name);
    cstr(&mut b, sql);
    b.extend_from_slice(&(oids.len() as i16).to_be_bytes());
    for o in oids {
        b.extend_from_slice(&o.to_be_bytes());
    }
    msg(b'P', &b)
}

fn bind(stmt: &str, formats: &[i16], params: &[Option<&[u8]>], results: &[i16]) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, "");
    cstr(&mut b, stmt);
    b.extend_from_slice(&(formats.len() as i16).to_be_bytes());
    for f in formats {
        b.extend_from_slice(&f.to_be_bytes());
    }
    b.extend_from_slice(&(params.len() as i16).to_be_bytes());
    for p in params {
        match p {
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(v) => {
                b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                b.extend_from_slice(v);
            }
        }
    }
    b.extend_from_slice(&(results.len() as i16).to_be_bytes());
    for f in results {
        b.extend_from_slice(&f.to_be_bytes());
    }
    msg(b'B', &b)
}

fn execute(max_rows: i32) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, "");
    b.extend_from_slice(&max_rows.to_be_bytes());
    msg(b'E', &b)
}

fn sync() -> Vec<u8> {
    msg(b'S', &[])
}

fn query(sql: &str) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, sql);
    msg(b'Q', &b)
}

/// Parameter types the server decodes specially, arrays, and unknowns.
const OIDS: &[u32] = &[
    0,
    16,
    17,
    20,
    21,
    23,
    25,
    26,
    114,
    700,
    701,
    1005,
    1007,
    1009,
    1016,
    1042,
    1043,
    1082,
    1083,
    1114,
    1184,
    1186,
    1700,
    2950,
    3802,
    4_294_967_295,
];

const STATEMENTS: &[&str] = &[
    "SELECT $1",
    "SELECT $1::int4 + 1",
    "SELECT $1::numeric",
    "SELECT $1::date, $2::timestamp",
    "SELECT $1::bytea, $2::text, $3::float8",
    "SELECT * FROM fz WHERE a = $1",
    "INSERT INTO fz VALUES ($1, $2, $3, $4, $5, $6)",
    "UPDATE fz SET b = $2 WHERE a = $1",
    "SELECT $1::int4[]",
    "SELECT 1",
    "",
    "SELECT $65535",
    "COPY fz FROM STDIN",
    "COPY fz FROM STDIN (FORMAT binary)",
];

/// A parameter value: bytes shaped for one of the binary decoders, text,
/// or noise.
fn param_value(r: &mut Rng) -> Vec<u8> {
    match r.below(10) {
        0 => r.bytes(12),
        1 => r
            .pick(&[1i32, i32::MAX, i32::MIN, -1])
            .to_be_bytes()
            .to_vec(),
        2 => r.pick(&[i64::MAX, i64::MIN, 0]).to_be_bytes().to_vec(),
        3 => {
            // binary numeric with random header fields
            let mut b = Vec::new();
            let nd = if r.chance(2) { 1 } else { r.edgy_i16() };
            for f in [
                nd,
                r.edgy_i16(),
                r.pick(&[0, 0x4000, -0x4000, -0x3000, 7]),
                r.edgy_i16(),
            ] {
                b.extend_from_slice(&f.to_be_bytes());
            }
            for _ in 0..r.below(4) {
                b.extend_from_slice(&r.edgy_i16().to_be_bytes());
            }
            b
        }
        4 => {
            // binary array with random header fields
            let mut b = Vec::new();
            for f in [
                if r.chance(2) { 1 } else { r.edgy_i32() },
                r.pick(&[0, 1, 2]),
                r.pick(OIDS) as i32,
                r.edgy_i32(),
                r.edgy_i32(),
            ] {
                b.extend_from_slice(&f.to_be_bytes());
            }
            for _ in 0..r.below(3) {
                b.extend_from_slice(&4i32.to_be_bytes());
                b.extend_from_slice(&r.edgy_i32().to_be_bytes());
            }
            b
        }
        5 => r
            .pick(&[
                "2024-01-01 10:00:00+é",
                "infinity",
                "5874898-01-01",
                "1e1073741824",
                "\\xzz",
                "NaN",
                "-Infinity",
                "99999999999999999999",
                "{1,2,3}",
                "t",
            ])
            .as_bytes()
            .to_vec(),
        _ => {
            let mut s = String::new();
            for _ in 0..r.below(10) {
                s.push(r.pick(&['1', '-', '.', 'e', ':', ' ', 'é', 'x', '\\', '0', '9']));
            }
            s.into_bytes()
        }
    }
}

/// One random frontend message.
fn random_message(r: &mut Rng) -> Vec<u8> {
    match r.below(16) {
        0 => {
            // random type byte, random declared length, random body
            let ty = r.next() as u8;
            let body = r.bytes(24);
            let mut out = vec![ty];
            let len = if r.chance(3) {
                r.edgy_i32()
            } else {
                body.len() as i32 + 4
            };
            out.extend_from_slice(&len.to_be_bytes());
            out.extend(body);
            out
        }
        1 | 2 => {
            // Parse with random parameter count and OIDs
            let mut b = Vec::new();
            cstr(&mut b, r.pick(&["", "s1", "s2"]));
            if r.chance(8) {
                b.extend(r.bytes(8)); // no NUL
            } else {
                cstr(&mut b, r.pick(STATEMENTS));
            }
            let declared = match r.below(4) {
                0 => r.pick(&[-1i16, i16::MIN, i16::MAX, -2]),
                1 => 65_535u16 as i16,
                _ => r.below(7) as i16,
            };
            b.extend_from_slice(&declared.to_be_bytes());
            let present = if r.chance(3) {
                r.below(8)
            } else {
                declared.clamp(0, 64) as usize
            };
            for _ in 0..present {
                let o = if r.chance(4) {
                    r.next() as u32
                } else {
                    r.pick(OIDS)
                };
                b.extend_from_slice(&o.to_be_bytes());
            }
            msg(b'P', &b)
        }
        3..=5 => {
            // Bind with random formats, counts and lengths
            let mut b = Vec::new();
            cstr(&mut b, r.pick(&["", "p1"]));
            cstr(&mut b, r.pick(&["", "s1", "s2", "nope"]));
            let nf = r.pick(&[0i16, 1, 1, 2, 3, -1, i16::MAX]);
            b.extend_from_slice(&nf.to_be_bytes());
            for _ in 0..nf.clamp(0, 8) {
                b.extend_from_slice(&r.pick(&[0i16, 1, 1, 2, -1, -2]).to_be_bytes());
            }
            let np = if r.chance(6) {
                r.pick(&[-1i16, i16::MAX, -2])
            } else {
                r.below(7) as i16
            };
            b.extend_from_slice(&np.to_be_bytes());
            for _ in 0..np.clamp(0, 8) {
                match r.below(8) {
                    0 => b.extend_from_slice(&(-1i32).to_be_bytes()),
                    1 => {
                        b.extend_from_slice(
                            &r.pick(&[-2i32, i32::MAX, i32::MIN, 1 << 30]).to_be_bytes(),
                        );
                        b.extend(r.bytes(4));
                    }
                    _ => {
                        let v = param_value(r);
                        b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                        b.extend(v);
                    }
                }
            }
            let nr = r.pick(&[0i16, 1, 2, -1, i16::MAX]);
            b.extend_from_slice(&nr.to_be_bytes());
            for _ in 0..nr.clamp(0, 8) {
                b.extend_from_slice(&r.pick(&[0i16, 1, 2, -1]).to_be_bytes());
            }
            msg(b'B', &b)
        }
        6 => {
            let mut b = Vec::new();
            cstr(&mut b, r.pick(&["", "p1"]));
            b.extend_from_slice(&r.pick(&[0, 1, -1, i32::MAX, i32::MIN]).to_be_bytes());
            msg(b'E', &b)
        }
        7 => {
            // Describe or Close with a random kind
            let mut b = vec![r.pick(&[b'S', b'P', b'X', 0, 0xFF])];
            cstr(&mut b, r.pick(&["", "s1", "p1", "nope"]));
            if r.chance(6) {
                b.pop(); // no NUL
            }
            msg(r.pick(b"DC"), &b)
        }
        8 => match r.below(3) {
            0 => msg(b'd', &r.bytes(32)),
            1 => msg(b'c', &[]),
            _ => {
                let mut b = Vec::new();
                cstr(&mut b, "fuzz");
                msg(b'f', &b)
            }
        },
        9 => {
            // FunctionCall
            let mut b = Vec::new();
            b.extend_from_slice(&r.pick(&[0u32, 1, 1598, u32::MAX]).to_be_bytes());
            let n = r.pick(&[0i16, 1, -1, i16::MAX]);
            b.extend_from_slice(&n.to_be_bytes());
            for _ in 0..n.clamp(0, 4) {
                b.extend_from_slice(&r.pick(&[0i16, 1, 5]).to_be_bytes());
            }
            let n = r.pick(&[0i16, 1, -1, i16::MAX]);
            b.extend_from_slice(&n.to_be_bytes());
            for _ in 0..n.clamp(0, 4) {
                b.extend_from_slice(&r.edgy_i32().to_be_bytes());
                b.extend(r.bytes(4));
            }
            b.extend_from_slice(&r.pick(&[0i16, 1, -1]).to_be_bytes());
            msg(b'F', &b)
        }
        10 => {
            // a simple query, sometimes hostile
            let sql = r.pick(&[
                "SELECT 1",
                "COPY fz FROM STDIN",
                "COPY fz FROM STDIN (FORMAT csv)",
                "COPY fz FROM STDIN (FORMAT binary)",
                "BEGIN",
                "ROLLBACK",
                "SELECT '2024-01-01 10:00:00+é'::timestamptz",
                "SELECT 1e1073741824::numeric",
                "",
                ";;;",
            ]);
            if r.chance(8) {
                msg(b'Q', sql.as_bytes()) // no NUL
            } else {
                query(sql)
            }
        }
        11 => msg(r.pick(b"SHXp"), &r.bytes(2)),
        12 => {
            // a valid message cut short, its declared length kept
            let mut m = parse("", r.pick(STATEMENTS), &[23, 25]);
            let cut = 5 + r.below(m.len() - 5);
            m.truncate(cut);
            m
        }
        _ => {
            // Parse/Bind/Execute/Sync with realistic parameters
            let sql = r.pick(STATEMENTS);
            let n = sql.matches('$').count().min(6);
            let oids: Vec<u32> = (0..n).map(|_| r.pick(OIDS)).collect();
            let values: Vec<Vec<u8>> = (0..n).map(|_| param_value(r)).collect();
            let params: Vec<Option<&[u8]>> = values.iter().map(|v| Some(&v[..])).collect();
            let formats: Vec<i16> = (0..n).map(|_| r.pick(&[0, 1, 1])).collect();
            let mut out = parse("", sql, &oids);
            out.extend(bind("", &formats, &params, &[r.pick(&[0, 1])]));
            out.extend(execute(r.pick(&[0, 1, i32::MAX])));
            out.extend(sync());
            out
        }
    }
}

/// Byte flips, insertions, deletions and a truncation.
fn mutate(r: &mut Rng, mut b: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + r.below(4) {
        let i = r.below(b.len() + 1);
        match r.below(4) {
            0 if i < b.len() => b[i] = r.next() as u8,
            1 => b.insert(i, r.next() as u8),
            2 if i < b.len() => {
                b.remove(i);
            }
            3 => b.truncate(i.max(1)),
            _ => {}
        }
    }
    b
}

/// The first bytes of a connection: a mutated startup packet.
fn random_startup(r: &mut Rng) -> Vec<u8> {
    let code = match r.below(8) {
        0 => 80_877_103,      // SSLRequest
        1 => 80_877_102,      // CancelRequest
        2 => 80_877_104,      // GSSENCRequest
        3 => r.next() as i32, // anything
        4 => 196_610,         // 3.2
        5 => 206_607,         // 3.9999
        6 => r.pick(&[0, 1, 2 << 16, 65_535, -1]),
        _ => 196_608, // 3.0
    };
    let mut body = code.to_be_bytes().to_vec();
    match code {
        80_877_102 => {
            body.extend_from_slice(&r.edgy_i32().to_be_bytes());
            body.extend_from_slice(&r.edgy_i32().to_be_bytes());
        }
        80_877_103 | 80_877_104 => {}
        _ => {
            let keys = [
                "user",
                "database",
                "options",
                "application_name",
                "replication",
                "",
                "x",
            ];
            for _ in 0..r.below(4) {
                cstr(&mut body, r.pick(&keys));
                if r.chance(5) {
                    body.extend(r.bytes(300)); // no NUL, maybe long
                } else {
                    cstr(&mut body, r.pick(&["eddy", "", "é", "true", "-c x=y"]));
                }
            }
            if !r.chance(4) {
                body.push(0);
            }
        }
    }
    let len = match r.below(6) {
        0 => r.edgy_i32(),
        1 => r.pick(&[i32::MAX, 10_001, 1 << 20, 0, 3, 7]),
        _ => body.len() as i32 + 4,
    };
    let mut out = len.to_be_bytes().to_vec();
    out.extend(body);
    if r.chance(4) {
        out = mutate(r, out);
    }
    if r.chance(6) {
        // after an SSLRequest answered 'N' a client sends its startup
        out.extend(valid_startup());
    }
    out
}

// ---------------------------------------------------------------------------
// talking to the server

/// What came back on one connection.
#[derive(Default)]
struct Reply {
    bytes: Vec<u8>,
    /// The server closed the connection (or reset it).
    closed: bool,
}

impl Reply {
    /// The messages of ErrorResponses (`E`, field `M`) in the reply, with
    /// their SQLSTATE (field `C`). Unparseable trailing bytes are ignored:
    /// the reply may start with a single SSL answer byte.
    fn errors(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut b = &self.bytes[..];
        if matches!(b.first(), Some(b'N' | b'S')) && b.len() > 1 && b[1] != 0 {
            b = &b[1..];
        }
        while b.len() >= 5 {
            let ty = b[0];
            let len = i32::from_be_bytes([b[1], b[2], b[3], b[4]]);
            let Ok(len) = usize::try_from(len) else { break };
            if len < 4 || b.len() < 1 + len {
                break;
            }
            let body = &b[5..1 + len];
            if ty == b'E' {
                let (mut code, mut message) = (String::new(), String::new());
                for field in body.split(|c| *c == 0) {
                    match field.first() {
                        Some(b'C') => code = String::from_utf8_lossy(&field[1..]).into(),
                        Some(b'M') => message = String::from_utf8_lossy(&field[1..]).into(),
                        _ => {}
                    }
                }
                out.push((code, message));
            }
            b = &b[1 + len..];
        }
        out
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Send `bytes` (after a valid login when `login`), then `tail`, and read
/// until the connection closes, `marker` appears in the reply, or nothing
/// arrives for `idle`.
async fn exchange(port: u16, login: bool, bytes: &[u8], tail: &[u8], idle: Duration) -> Reply {
    let mut reply = Reply::default();
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)).await else {
        panic!("cannot connect to the server");
    };
    let mut buf = vec![0u8; 64 << 10];
    if login {
        s.write_all(&valid_startup()).await.expect("send startup");
        // AuthenticationOk ... ReadyForQuery
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        while !contains(&got, b"Z\0\0\0\x05I") {
            assert!(Instant::now() < deadline, "no ReadyForQuery after startup");
            match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
                _ => panic!("login failed: {:?}", String::from_utf8_lossy(&got)),
            }
        }
    }
    let mut out = bytes.to_vec();
    out.extend_from_slice(tail);
    if s.write_all(&out).await.is_err() {
        reply.closed = true;
    }
    let marker = b"fz-end-of-case";
    loop {
        match tokio::time::timeout(idle, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                reply.closed = true;
                break;
            }
            Ok(Ok(n)) => {
                reply.bytes.extend_from_slice(&buf[..n]);
                if contains(&reply.bytes, marker) || reply.bytes.len() > 1 << 20 {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    reply
}

/// The end of every post-login case: a Sync (ends a failed extended
/// exchange) and a query whose answer says the server got through.
fn end_marker() -> Vec<u8> {
    let mut t = sync();
    t.extend(query("SELECT 'fz-end-of-case'"));
    t
}

struct Fuzz {
    srv: Server,
    log: PathBuf,
    cases: usize,
    /// How much of the server log has been searched for panics.
    log_seen: usize,
    /// Panics the server logged: (case, input as hex, panic record).
    panics: Vec<(String, String, String)>,
}

impl Fuzz {
    fn start() -> Fuzz {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let log = dir.path().join("server.log");
        let srv = Server::start_logged(Some(dir), data, "trust", &log);
        Fuzz {
            srv,
            log,
            cases: 0,
            log_seen: 0,
            panics: Vec::new(),
        }
    }

    /// One case: send, then check the reply and the server.
    async fn case(&mut self, what: &str, login: bool, bytes: &[u8], idle: Duration) {
        let tail = if login { end_marker() } else { Vec::new() };
        let reply = exchange(self.srv.port, login, bytes, &tail, idle).await;
        self.cases += 1;
        for (code, message) in reply.errors() {
            assert!(
                code != "XX000" || !message.contains("a bug in Eddy"),
                "{what}: a caught panic ({code} {message}) for input {}",
                hex(bytes)
            );
        }
        assert!(
            self.srv.child.try_wait().expect("try_wait").is_none(),
            "{what}: the server exited after input {}\n{}",
            hex(bytes),
            self.log_tail()
        );
        // a panic the server caught (the connection task or statement
        // survived it) is recorded; the run goes on to find the others
        for record in self.new_panic_records() {
            self.panics.push((what.to_string(), hex(bytes), record));
        }
        let c = self.srv.connect().await;
        let one: i32 = c
            .query_one("SELECT 1::int4", &[])
            .await
            .expect("SELECT 1")
            .get(0);
        assert_eq!(one, 1, "{what}");
    }

    /// The panic records (the hook logs `panic: <message>`, then a
    /// backtrace) the server log gained since the last call.
    fn new_panic_records(&mut self) -> Vec<String> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let new = log.get(self.log_seen..).unwrap_or("");
        self.log_seen = log.len();
        new.lines()
            .map(strip_ansi)
            .filter(|l| l.contains(" panic: "))
            .collect()
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = log.len().saturating_sub(4000);
        log.get(start..).unwrap_or(&log).to_string()
    }
}

/// A log line without its terminal colour codes.
fn strip_ansi(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... m
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Hex text (`#` to end of line is a comment, whitespace ignored) as bytes.
fn from_hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| l.bytes())
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("hex"), 16).expect("hex"))
        .collect()
}

fn seeds(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = e.expect("dir entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if !path.is_file() || name.starts_with('.') || name == "README.md" {
            continue;
        }
        let raw = std::fs::read(&path).expect("read seed");
        let bytes = if name.ends_with(".hex") {
            from_hex(&String::from_utf8(raw).expect("hex seed is text"))
        } else {
            raw
        };
        out.push((name, bytes));
    }
    out.sort();
    assert!(!out.is_empty(), "no seeds in {}", dir.display());
    out
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_protocol_fuzz() {
    let started = Instant::now();
    let mut f = Fuzz::start();
    {
        let c = f.srv.connect().await;
        c.batch_execute(
            "CREATE TABLE fz (a INT, b TEXT, c NUMERIC(10,2), d DATE, e TIMESTAMP, g BYTEA)",
        )
        .await
        .expect("create table");
    }
    let idle = Duration::from_millis(300);

    // the seed corpus
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz/seeds/wire");
    for (name, bytes) in seeds(&dir) {
        let login = !name.starts_with("startup_");
        f.case(&format!("seed {name}"), login, &bytes, idle).await;
    }

    // the largest counts the protocol can carry: 65535 parameter types
    // and 65535 NULL parameters (too big for a seed file)
    let oids = vec![23u32; 65_535];
    let nulls = vec![None; 65_535];
    let mut bytes = parse("", "SELECT $1", &oids);
    bytes.extend(bind("", &[], &nulls, &[]));
    bytes.extend(execute(0));
    bytes.extend(sync());
    f.case("65535 parameters", true, &bytes, idle).await;

    // random connections; about 400 frontend messages by default
    let seed = env_number("EDDY_FUZZ_SEED").unwrap_or(0x0EDD_F022);
    let connections = env_number("EDDY_FUZZ_CASES").unwrap_or(120) as usize;
    let mut r = Rng(seed);
    let mut messages = 0;
    for i in 0..connections {
        if i % 4 == 0 {
            let bytes = random_startup(&mut r);
            f.case(
                &format!("startup case {i} (seed {seed:#x})"),
                false,
                &bytes,
                idle,
            )
            .await;
            continue;
        }
        let mut bytes = Vec::new();
        for _ in 0..1 + r.below(7) {
            bytes.extend(random_message(&mut r));
            messages += 1;
        }
        if r.chance(4) {
            bytes = mutate(&mut r, bytes);
        }
        f.case(
            &format!("message case {i} (seed {seed:#x})"),
            true,
            &bytes,
            idle,
        )
        .await;
    }

    // one line per distinct panic message (numbers blanked), with the
    // first input that caused it
    let mut distinct: Vec<(String, &(String, String, String))> = Vec::new();
    for p in &f.panics {
        let message = p.2.split("panic:").nth(1).unwrap_or(&p.2);
        let key: String = message.chars().filter(|c| !c.is_ascii_digit()).collect();
        if !distinct.iter().any(|(k, _)| *k == key) {
            distinct.push((key, p));
        }
    }
    let report: Vec<String> = distinct
        .iter()
        .map(|(_, (what, input, record))| format!("{what}: {record}\n    input: {input}"))
        .collect();
    assert!(
        f.panics.is_empty(),
        "the server logged {} panics, {} distinct:\n{}",
        f.panics.len(),
        distinct.len(),
        report.join("\n")
    );
    eprintln!(
        "wire fuzz: {} cases, {messages} random messages, {:.1?}",
        f.cases,
        started.elapsed()
    );
}
