//! The registry of client sessions and the statement each one runs now,
//! read by the console's `/statements` page.
//!
//! Cost on the statement path (every statement, fixed-plan point lookups
//! included): [`SessionActivity::begin`] takes the session's own mutex
//! (never contended but by a console read) and stores an `Arc` of the
//! statement text (the prepared statement's `Arc` on the extended
//! protocol, the query's `Arc<str>` on the simple one: no copy of the
//! text); [`RunningGuard`]'s drop takes the same mutex again. The
//! registry's global lock is taken only when a connection opens or closes
//! and when the console reads it.
//!
//! A statement is running from the moment its handler starts until its
//! last row is sent (the guard travels with the row stream), which is when
//! a cancel can still stop it. The last statement stays known after it
//! ends, with the session's transaction state at its last ReadyForQuery,
//! for `pg_stat_activity` ([`Activity::backends`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use eddy_sql::Prepared;
use parking_lot::Mutex;
use pgwire::messages::startup::SecretKey;

/// The text of a running statement, shared with whoever owns it.
#[derive(Clone)]
pub enum StatementText {
    /// A simple-protocol query string (possibly several statements).
    Simple(Arc<str>),
    /// An extended-protocol statement.
    Prepared(Arc<Prepared>),
}

impl StatementText {
    pub fn as_str(&self) -> &str {
        match self {
            StatementText::Simple(s) => s,
            StatementText::Prepared(p) => &p.sql,
        }
    }
}

struct Running {
    seq: u64,
    text: StatementText,
    started: Instant,
}

#[derive(Default)]
struct RunningSlot {
    /// Statements begun on this session so far.
    seq: u64,
    current: Option<Running>,
    /// The statement that ended last.
    last: Option<Running>,
    /// When a statement last began or ended.
    changed: Option<Instant>,
}

/// [`SessionActivity::transaction`]'s values.
const TXN_IDLE: u8 = 0;
const TXN_IN_BLOCK: u8 = 1;
const TXN_FAILED: u8 = 2;

/// One client connection.
pub struct SessionActivity {
    /// The console's id of the session (never reused while the server runs).
    pub id: u64,
    /// The backend process id the client was given (cancel key, with
    /// `secret`).
    pub pid: i32,
    secret: SecretKey,
    pub user: String,
    /// The session's `application_name` at its last ReadyForQuery.
    application_name: Mutex<String>,
    pub peer: SocketAddr,
    pub connected_at: SystemTime,
    running: Mutex<RunningSlot>,
    /// The transaction state of the last ReadyForQuery (`TXN_*`).
    transaction: AtomicU8,
    /// When the open transaction block began: the start of the statement
    /// before the first ReadyForQuery inside it.
    block_start: Mutex<Option<Instant>>,
}

impl SessionActivity {
    /// Marks `text` as this session's running statement until the guard
    /// drops.
    pub fn begin(self: &Arc<Self>, text: StatementText, started: Instant) -> RunningGuard {
        let mut slot = self.running.lock();
        slot.seq += 1;
        let seq = slot.seq;
        slot.current = Some(Running { seq, text, started });
        slot.changed = Some(started);
        RunningGuard {
            session: Arc::clone(self),
            seq,
        }
    }

    /// The session's state as its ReadyForQuery is about to say it:
    /// inside a block, whether the block failed, and its
    /// `application_name` now.
    pub fn set_ready_state(&self, in_block: bool, failed: bool, application_name: &str) {
        let v = match (in_block, failed) {
            (_, true) => TXN_FAILED,
            (true, false) => TXN_IN_BLOCK,
            (false, false) => TXN_IDLE,
        };
        let was = self.transaction.swap(v, Ordering::Relaxed);
        // `running` before `block_start`, never both at once here (the
        // reader takes them in that order)
        let last_started = self.running.lock().last.as_ref().map(|r| r.started);
        {
            let mut start = self.block_start.lock();
            if v == TXN_IDLE {
                *start = None;
            } else if was == TXN_IDLE || start.is_none() {
                // the block began with the statement that just ended
                *start = last_started.or(Some(Instant::now()));
            }
        }
        let mut name = self.application_name.lock();
        if name.as_str() != application_name {
            *name = application_name.to_string();
        }
    }

    /// The backend key a CancelRequest for this session carries.
    pub fn cancel_key(&self) -> (i32, &SecretKey) {
        (self.pid, &self.secret)
    }
}

/// While alive, its statement is shown as running.
pub struct RunningGuard {
    session: Arc<SessionActivity>,
    seq: u64,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let mut slot = self.session.running.lock();
        // a later statement of the session may already have begun (a
        // suspended portal's rows outlive their Execute): leave it
        if slot.current.as_ref().is_some_and(|r| r.seq == self.seq) {
            slot.last = slot.current.take();
            slot.changed = Some(Instant::now());
        }
    }
}

/// A running statement as the console shows it.
#[derive(Clone, serde::Serialize)]
pub struct RunningStatement {
    /// `<session>.<n>`: the n-th statement of the session.
    pub id: String,
    pub session: u64,
    pub pid: i32,
    pub user: String,
    pub client: String,
    /// When the session connected, microseconds since the Unix epoch.
    pub connected_at_micros: i64,
    /// When the statement started, microseconds since the Unix epoch.
    pub started_at_micros: i64,
    pub elapsed_seconds: f64,
    pub text: String,
    /// Whether the role looking may cancel it (`pg_cancel_backend`'s rule).
    pub may_cancel: bool,
}

/// An open session as the console shows it.
#[derive(Clone, serde::Serialize)]
pub struct SessionInfo {
    pub session: u64,
    pub pid: i32,
    pub user: String,
    pub client: String,
    /// Microseconds since the Unix epoch.
    pub connected_at_micros: i64,
    pub connected_seconds: f64,
    /// Statements begun so far.
    pub statements: u64,
    /// `<session>.<n>` of the statement running now.
    pub running: Option<String>,
}

/// Parses a statement id of [`RunningStatement::id`].
pub fn parse_statement_id(id: &str) -> Option<(u64, u64)> {
    let (session, seq) = id.split_once('.')?;
    Some((session.parse().ok()?, seq.parse().ok()?))
}

/// Every open session.
#[derive(Default)]
pub struct Activity {
    next_id: AtomicU64,
    sessions: Mutex<BTreeMap<u64, Arc<SessionActivity>>>,
}

impl Activity {
    /// Registers a new connection; it leaves the registry when the
    /// returned registration drops.
    pub fn register(
        self: &Arc<Self>,
        pid: i32,
        secret: SecretKey,
        user: String,
        application_name: String,
        peer: SocketAddr,
    ) -> ActivityRegistration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let session = Arc::new(SessionActivity {
            id,
            pid,
            secret,
            user,
            application_name: Mutex::new(application_name),
            peer,
            connected_at: SystemTime::now(),
            running: Mutex::new(RunningSlot::default()),
            transaction: AtomicU8::new(TXN_IDLE),
            block_start: Mutex::new(None),
        });
        self.sessions.lock().insert(id, Arc::clone(&session));
        ActivityRegistration {
            session,
            registry: Arc::clone(self),
        }
    }

    /// Open sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.lock().len()
    }

    /// The session `id`.
    pub fn session(&self, id: u64) -> Option<Arc<SessionActivity>> {
        self.sessions.lock().get(&id).cloned()
    }

    /// The session whose backend pid is `pid`.
    pub fn by_pid(&self, pid: i32) -> Option<Arc<SessionActivity>> {
        self.sessions
            .lock()
            .values()
            .find(|s| s.pid == pid)
            .cloned()
    }

    /// Every open session as `pg_stat_activity` shows it.
    pub fn backends(&self) -> Vec<eddy_sql::backends::BackendInfo> {
        use eddy_sql::backends::{BackendInfo, BackendState};
        let sessions: Vec<Arc<SessionActivity>> = self.sessions.lock().values().cloned().collect();
        let now = Instant::now();
        let wall = SystemTime::now();
        let at = |t: Instant| {
            wall.checked_sub(now.saturating_duration_since(t))
                .unwrap_or(wall)
        };
        sessions
            .iter()
            .map(|s| {
                let slot = s.running.lock();
                let state = match (&slot.current, s.transaction.load(Ordering::Relaxed)) {
                    (Some(_), _) => BackendState::Active,
                    (None, TXN_IN_BLOCK) => BackendState::IdleInTransaction,
                    (None, TXN_FAILED) => BackendState::IdleInTransactionAborted,
                    (None, _) => BackendState::Idle,
                };
                let shown = slot.current.as_ref().or(slot.last.as_ref());
                // inside a block: since the block began; outside one, a
                // running statement is its own transaction
                let xact_start = (*s.block_start.lock())
                    .or_else(|| slot.current.as_ref().map(|r| r.started))
                    .map(at);
                BackendInfo {
                    pid: s.pid,
                    user: s.user.clone(),
                    application_name: s.application_name.lock().clone(),
                    client: Some(s.peer),
                    backend_start: s.connected_at,
                    xact_start,
                    query_start: shown.map(|r| at(r.started)),
                    state_change: slot.changed.map_or(s.connected_at, at),
                    state,
                    query: shown
                        .map(|r| r.text.as_str().to_string())
                        .unwrap_or_default(),
                }
            })
            .collect()
    }

    /// Whether statement `seq` of session `session` is running now.
    pub fn is_running(&self, session: &SessionActivity, seq: u64) -> bool {
        session
            .running
            .lock()
            .current
            .as_ref()
            .is_some_and(|r| r.seq == seq)
    }

    /// Every open session, oldest first.
    pub fn sessions(&self) -> Vec<SessionInfo> {
        let sessions: Vec<Arc<SessionActivity>> = self.sessions.lock().values().cloned().collect();
        let now = SystemTime::now();
        sessions
            .iter()
            .map(|s| {
                let slot = s.running.lock();
                SessionInfo {
                    session: s.id,
                    pid: s.pid,
                    user: s.user.clone(),
                    client: s.peer.to_string(),
                    connected_at_micros: micros_since_epoch(s.connected_at),
                    connected_seconds: now
                        .duration_since(s.connected_at)
                        .map(|d| d.as_secs_f64())
                        .unwrap_or(0.0),
                    statements: slot.seq,
                    running: slot.current.as_ref().map(|r| format!("{}.{}", s.id, r.seq)),
                }
            })
            .collect()
    }

    /// Every running statement, longest running first.
    pub fn running(&self) -> Vec<RunningStatement> {
        let sessions: Vec<Arc<SessionActivity>> = self.sessions.lock().values().cloned().collect();
        let now = Instant::now();
        let wall = SystemTime::now();
        let mut out = Vec::new();
        for s in sessions {
            let slot = s.running.lock();
            let Some(r) = slot.current.as_ref() else {
                continue;
            };
            let elapsed = now.saturating_duration_since(r.started);
            out.push(RunningStatement {
                id: format!("{}.{}", s.id, r.seq),
                session: s.id,
                pid: s.pid,
                user: s.user.clone(),
                client: s.peer.to_string(),
                connected_at_micros: micros_since_epoch(s.connected_at),
                // derived here, so that the statement path reads one clock
                started_at_micros: micros_since_epoch(wall.checked_sub(elapsed).unwrap_or(wall)),
                elapsed_seconds: elapsed.as_secs_f64(),
                text: r.text.as_str().to_string(),
                may_cancel: true,
            });
        }
        out.sort_by(|a, b| b.elapsed_seconds.total_cmp(&a.elapsed_seconds));
        out
    }
}

/// Microseconds since the Unix epoch (0 before it).
pub fn micros_since_epoch(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A connection's place in the registry; removes it on drop.
pub struct ActivityRegistration {
    pub session: Arc<SessionActivity>,
    registry: Arc<Activity>,
}

impl Drop for ActivityRegistration {
    fn drop(&mut self) {
        self.registry.sessions.lock().remove(&self.session.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> (Arc<Activity>, ActivityRegistration) {
        let a = Arc::new(Activity::default());
        let peer: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let r = a.register(7, SecretKey::I32(1), "eddy".into(), "app".into(), peer);
        (a, r)
    }

    #[test]
    fn a_statement_runs_until_its_guard_drops() {
        let (a, reg) = registry();
        assert!(a.running().is_empty());
        let g = reg
            .session
            .begin(StatementText::Simple("SELECT 1".into()), Instant::now());
        let running = a.running();
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].text, "SELECT 1");
        assert_eq!(running[0].id, format!("{}.1", reg.session.id));
        assert_eq!(
            parse_statement_id(&running[0].id),
            Some((reg.session.id, 1))
        );
        drop(g);
        assert!(a.running().is_empty());
    }

    #[test]
    fn an_old_guard_leaves_a_newer_statement_alone() {
        let (a, reg) = registry();
        let old = reg
            .session
            .begin(StatementText::Simple("a".into()), Instant::now());
        let _new = reg
            .session
            .begin(StatementText::Simple("b".into()), Instant::now());
        drop(old);
        let running = a.running();
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].text, "b");
        assert!(a.is_running(&reg.session, 2));
        assert!(!a.is_running(&reg.session, 1));
    }

    #[test]
    fn a_closed_session_leaves_the_registry() {
        let (a, reg) = registry();
        assert_eq!(a.session_count(), 1);
        assert_eq!(a.sessions().len(), 1);
        assert_eq!(a.sessions()[0].statements, 0);
        drop(reg);
        assert_eq!(a.session_count(), 0);
        assert!(a.sessions().is_empty());
    }

    /// What the statement path pays per statement: `begin` and the
    /// guard's drop (as the extended protocol does it, with the guard in an
    /// `Arc`). `cargo test -p eddy-server --bin eddy -- --ignored
    /// --nocapture begin_and_end_cost`.
    #[test]
    #[ignore]
    fn begin_and_end_cost() {
        let (_a, reg) = registry();
        let text = StatementText::Simple("SELECT v FROM t WHERE k = $1".into());
        let n = 2_000_000u32;
        let t = Instant::now();
        for _ in 0..n {
            let g = Arc::new(reg.session.begin(text.clone(), Instant::now()));
            drop(std::hint::black_box(g));
        }
        println!(
            "begin + end of a statement: {:.0} ns",
            t.elapsed().as_nanos() as f64 / f64::from(n)
        );
    }

    #[test]
    fn statement_ids_parse_strictly() {
        assert_eq!(parse_statement_id("3.14"), Some((3, 14)));
        for bad in ["", "3", "3.", ".4", "a.b", "3.4.5", "-1.2"] {
            assert_eq!(parse_statement_id(bad), None, "{bad}");
        }
    }
}
