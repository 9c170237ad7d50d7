//! The server's connections as SQL sees them: the rows of
//! `pg_stat_activity` and the functions `pg_cancel_backend(pid)` and
//! `pg_terminate_backend(pid [, timeout])`.
//!
//! The connections are the front end's (eddy-server keeps their registry);
//! it hands them to the database as a [`Backends`] once it serves
//! ([`crate::session::Database::backends`], set once). Without one (an
//! embedded database, unit tests) no connection is listed and no pid
//! exists.
//!
//! Invariants (PostgreSQL 15's rules):
//! * every connection is listed to every role, with its pid, role and
//!   database; what it does (`query`, `state`, the client's address, the
//!   times) is shown only to a superuser, to a role with the privileges of
//!   the connection's role, and to members of `pg_read_all_stats` (which
//!   `pg_monitor` is): for anyone else `query` reads `<insufficient
//!   privilege>` and the rest is NULL;
//! * a backend may be signalled by a superuser, by a role with the
//!   privileges of its role, or by a member of `pg_signal_backend`, except
//!   a superuser's backend, which only a superuser may signal; anyone else
//!   gets 42501 and nothing is signalled;
//! * an unknown pid signals nothing and answers false (PostgreSQL adds a
//!   WARNING, which Eddy does not send).
//!
//! `pg_cancel_backend` stops the backend's running statement as a
//! CancelRequest does (57014 there); `pg_terminate_backend` closes its
//! connection with `FATAL 57P01`, rolling back its open transaction. With
//! a positive `timeout` (milliseconds) it then waits, up to that long, for
//! the connection to be gone from the registry: true if it ended in time,
//! false if not (PostgreSQL adds a WARNING, which Eddy does not send).

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use eddy_common::ColumnType;

use crate::error::SqlError;
use crate::roles::{Roles, READ_ALL_STATS, SIGNAL_BACKEND};

/// What a connection is doing, as `pg_stat_activity.state` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendState {
    Active,
    Idle,
    IdleInTransaction,
    IdleInTransactionAborted,
}

impl BackendState {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendState::Active => "active",
            BackendState::Idle => "idle",
            BackendState::IdleInTransaction => "idle in transaction",
            BackendState::IdleInTransactionAborted => "idle in transaction (aborted)",
        }
    }
}

/// One connection.
#[derive(Clone, Debug)]
pub struct BackendInfo {
    pub pid: i32,
    pub user: String,
    /// The session's `application_name` at its last ReadyForQuery.
    pub application_name: String,
    pub client: Option<SocketAddr>,
    pub backend_start: SystemTime,
    /// When the session's current transaction began (`None`: none).
    pub xact_start: Option<SystemTime>,
    /// When the statement in `query` began (`None`: no statement yet).
    pub query_start: Option<SystemTime>,
    pub state_change: SystemTime,
    pub state: BackendState,
    /// The running statement, or the last one when idle ("" before any).
    pub query: String,
}

/// The front end's connections.
pub trait Backends: Send + Sync {
    /// Every open connection.
    fn list(&self) -> Vec<BackendInfo>;
    /// Stops the running statement of the connection `pid`, as a
    /// CancelRequest does; false when there is no such connection.
    fn cancel(&self, pid: i32) -> bool;
    /// Closes the connection `pid` (`FATAL 57P01`); false when there is
    /// no such connection.
    fn terminate(&self, pid: i32) -> bool;
}

/// Where the front end puts its [`Backends`] (once).
pub type BackendsSlot = Arc<OnceLock<Arc<dyn Backends>>>;

/// Whether `me` may see what a connection of `owner` does.
pub fn sees(roles: &Roles, me: &str, owner: &str) -> bool {
    if roles.privileges_of(me).superuser {
        return true;
    }
    let mine = roles.effective_roles(me);
    mine.contains(owner) || mine.contains(READ_ALL_STATS)
}

/// Whether `me` may cancel or terminate a backend of `owner`
/// (`pg_cancel_backend`'s rule, which the console's cancel follows too).
pub fn may_signal(roles: &Roles, me: &str, owner: &str) -> bool {
    if roles.privileges_of(me).superuser {
        return true;
    }
    if roles.get(owner).is_some_and(|r| r.superuser) {
        return false;
    }
    let mine = roles.effective_roles(me);
    mine.contains(owner) || mine.contains(SIGNAL_BACKEND)
}

/// `pg_stat_activity`'s columns.
pub(crate) fn activity_columns() -> Vec<(&'static str, DataType)> {
    let ts = ColumnType::TimestampTz.to_arrow();
    vec![
        ("datid", DataType::UInt32),
        ("datname", DataType::Utf8),
        ("pid", DataType::Int32),
        ("leader_pid", DataType::Int32),
        ("usesysid", DataType::UInt32),
        ("usename", DataType::Utf8),
        ("application_name", DataType::Utf8),
        ("client_addr", DataType::Utf8),
        ("client_hostname", DataType::Utf8),
        ("client_port", DataType::Int32),
        ("backend_start", ts.clone()),
        ("xact_start", ts.clone()),
        ("query_start", ts.clone()),
        ("state_change", ts),
        ("wait_event_type", DataType::Utf8),
        ("wait_event", DataType::Utf8),
        ("state", DataType::Utf8),
        ("backend_xid", DataType::Int64),
        ("backend_xmin", DataType::Int64),
        ("query_id", DataType::Int64),
        ("query", DataType::Utf8),
        ("backend_type", DataType::Utf8),
    ]
}

fn micros(t: SystemTime) -> ScalarValue {
    let us = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_micros()).ok());
    ScalarValue::Int64(us)
}

/// `pg_stat_activity`'s rows as `me` may see them, in the order of
/// [`activity_columns`].
pub(crate) fn activity_rows(
    slot: &BackendsSlot,
    roles: &Roles,
    me: &str,
    database_oid: i64,
    database: &str,
) -> Vec<Vec<ScalarValue>> {
    let Some(backends) = slot.get() else {
        return Vec::new();
    };
    let text = |s: &str| ScalarValue::Utf8(Some(s.to_string()));
    let null = ScalarValue::Null;
    backends
        .list()
        .into_iter()
        .map(|b| {
            let owner_oid = roles.get(&b.user).map(|r| r.oid);
            let head = vec![
                ScalarValue::Int64(Some(database_oid)),
                text(database),
                ScalarValue::Int32(Some(b.pid)),
                null.clone(),
                ScalarValue::Int64(owner_oid),
                text(&b.user),
            ];
            let tail = if sees(roles, me, &b.user) {
                vec![
                    text(&b.application_name),
                    b.client.map_or(null.clone(), |c| text(&c.ip().to_string())),
                    null.clone(),
                    b.client.map_or(null.clone(), |c| {
                        ScalarValue::Int32(Some(i32::from(c.port())))
                    }),
                    micros(b.backend_start),
                    b.xact_start.map_or(null.clone(), micros),
                    b.query_start.map_or(null.clone(), micros),
                    micros(b.state_change),
                    null.clone(),
                    null.clone(),
                    text(b.state.as_str()),
                    null.clone(),
                    null.clone(),
                    null.clone(),
                    text(&b.query),
                    text("client backend"),
                ]
            } else {
                let mut hidden = vec![null.clone(); 14];
                hidden.push(text("<insufficient privilege>"));
                hidden.push(text("client backend"));
                hidden
            };
            head.into_iter().chain(tail).collect()
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Signal {
    Cancel,
    Terminate,
}

/// `pg_cancel_backend` or `pg_terminate_backend` for the session of `user`.
#[derive(Debug)]
struct SignalBackend {
    signal: Signal,
    slot: BackendsSlot,
    roles: Arc<Roles>,
    user: String,
    signature: Signature,
}

// one function per signal: it identifies the function
impl PartialEq for SignalBackend {
    fn eq(&self, other: &Self) -> bool {
        self.signal == other.signal && self.user == other.user
    }
}

impl Eq for SignalBackend {}

impl std::hash::Hash for SignalBackend {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.signal.hash(state);
        self.user.hash(state);
    }
}

impl std::fmt::Debug for dyn Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Backends")
    }
}

impl SignalBackend {
    fn name(signal: Signal) -> &'static str {
        match signal {
            Signal::Cancel => "pg_cancel_backend",
            Signal::Terminate => "pg_terminate_backend",
        }
    }

    /// 42501 unless `self.user` may signal a backend of `owner`.
    fn check(&self, owner: &str) -> Result<(), SqlError> {
        let (what, whose) = match self.signal {
            Signal::Cancel => ("cancel query", "cancel queries of"),
            Signal::Terminate => ("terminate process", "terminate processes of"),
        };
        if self.roles.privileges_of(&self.user).superuser {
            return Ok(());
        }
        if self.roles.get(owner).is_some_and(|r| r.superuser) {
            return Err(
                SqlError::InsufficientPrivilege(format!("permission denied to {what}")).with_detail(
                    format!(
                        "Only roles with the SUPERUSER attribute may {whose} roles with the SUPERUSER attribute."
                    ),
                ),
            );
        }
        let mine = self.roles.effective_roles(&self.user);
        if mine.contains(owner) || mine.contains(SIGNAL_BACKEND) {
            return Ok(());
        }
        Err(
            SqlError::InsufficientPrivilege(format!("permission denied to {what}")).with_detail(
                format!(
                    "Only roles with privileges of the role whose backend is signalled or with privileges of the \"{SIGNAL_BACKEND}\" role may {what}."
                ),
            ),
        )
    }

    /// Waits until the connection `pid` is gone, at most `timeout`
    /// milliseconds; whether it went.
    fn wait_gone(&self, pid: i32, timeout: i64) -> bool {
        let Some(backends) = self.slot.get() else {
            return true;
        };
        let limit = std::time::Duration::from_millis(u64::try_from(timeout).unwrap_or(0));
        let start = std::time::Instant::now();
        crate::session::run_blocking(|| loop {
            if !backends.list().iter().any(|b| b.pid == pid) {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        })
    }

    fn signal_one(&self, pid: i32) -> Result<bool, SqlError> {
        let Some(backends) = self.slot.get() else {
            return Ok(false);
        };
        let Some(target) = backends.list().into_iter().find(|b| b.pid == pid) else {
            return Ok(false);
        };
        self.check(&target.user)?;
        Ok(match self.signal {
            Signal::Cancel => backends.cancel(pid),
            Signal::Terminate => backends.terminate(pid),
        })
    }
}

impl ScalarUDFImpl for SignalBackend {
    fn name(&self) -> &str {
        Self::name(self.signal)
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        let integer = |t: &DataType| t.is_integer() || *t == DataType::Null;
        let ok = match (self.signal, args) {
            (_, [pid]) => integer(pid),
            (Signal::Terminate, [pid, timeout]) => integer(pid) && integer(timeout),
            _ => false,
        };
        if !ok {
            return Err(crate::pg_functions::no_function(Self::name(self.signal), args).into());
        }
        // PostgreSQL's (pid int4, timeout int8): a parameter is announced so
        let mut types = vec![DataType::Int32];
        types.extend(args.iter().skip(1).map(|_| DataType::Int64));
        Ok(types)
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        use crate::udf_args::{all_scalar, int_at, scalar_if};
        let all_scalar = all_scalar(&args.args);
        let rows = if all_scalar { 1 } else { args.number_rows };
        let mut out = datafusion::arrow::array::BooleanBuilder::with_capacity(rows);
        for row in 0..rows {
            if let Some(timeout) = int_at(&args.args, 1, row)? {
                if timeout < 0 {
                    return Err(SqlError::InvalidParameter(
                        "\"timeout\" must not be negative".into(),
                    )
                    .into());
                }
            }
            let timeout = int_at(&args.args, 1, row)?.unwrap_or(0);
            match int_at(&args.args, 0, row)? {
                // coerced to int4: in range
                Some(pid) => match i32::try_from(pid) {
                    Ok(pid) => {
                        let signalled = self.signal_one(pid)?;
                        out.append_value(
                            signalled && (timeout == 0 || self.wait_gone(pid, timeout)),
                        );
                    }
                    Err(_) => out.append_value(false),
                },
                None => out.append_null(),
            }
        }
        scalar_if(all_scalar, std::sync::Arc::new(out.finish()))
    }
}

/// `pg_cancel_backend` and `pg_terminate_backend` for a session of `user`.
pub fn signal_functions(slot: &BackendsSlot, roles: &Arc<Roles>, user: &str) -> Vec<ScalarUDF> {
    [Signal::Cancel, Signal::Terminate]
        .into_iter()
        .map(|signal| {
            ScalarUDF::new_from_impl(SignalBackend {
                signal,
                slot: Arc::clone(slot),
                roles: Arc::clone(roles),
                user: user.to_string(),
                signature: Signature::user_defined(Volatility::Volatile),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Vec<BackendInfo>);

    impl Backends for Fixed {
        fn list(&self) -> Vec<BackendInfo> {
            self.0.clone()
        }
        fn cancel(&self, pid: i32) -> bool {
            self.0.iter().any(|b| b.pid == pid)
        }
        fn terminate(&self, pid: i32) -> bool {
            self.0.iter().any(|b| b.pid == pid)
        }
    }

    fn backend(pid: i32, user: &str) -> BackendInfo {
        BackendInfo {
            pid,
            user: user.into(),
            application_name: "app".into(),
            client: "127.0.0.1:5000".parse().ok(),
            backend_start: SystemTime::now(),
            xact_start: Some(SystemTime::now()),
            query_start: Some(SystemTime::now()),
            state_change: SystemTime::now(),
            state: BackendState::Active,
            query: "SELECT secret".into(),
        }
    }

    fn setup() -> (BackendsSlot, Arc<Roles>) {
        let roles = Arc::new(Roles::in_memory());
        for r in ["alice", "bob", "watcher", "killer"] {
            roles
                .create(r, &crate::roles::RoleOptions::default(), &[])
                .unwrap();
        }
        roles.grant_membership("pg_monitor", "watcher").unwrap();
        roles.grant_membership(SIGNAL_BACKEND, "killer").unwrap();
        let slot: BackendsSlot = Arc::default();
        let fixed: Arc<dyn Backends> =
            Arc::new(Fixed(vec![backend(1, "alice"), backend(2, "eddy")]));
        assert!(slot.set(fixed).is_ok());
        (slot, roles)
    }

    fn query_of(rows: &[Vec<ScalarValue>], pid: i32) -> ScalarValue {
        let row = rows
            .iter()
            .find(|r| r[2] == ScalarValue::Int32(Some(pid)))
            .unwrap();
        row[20].clone()
    }

    #[test]
    fn what_a_backend_does_is_shown_to_whom_postgres_shows_it() {
        let (slot, roles) = setup();
        let secret = ScalarValue::Utf8(Some("SELECT secret".into()));
        let hidden = ScalarValue::Utf8(Some("<insufficient privilege>".into()));
        for (me, alice, eddy) in [
            ("eddy", &secret, &secret),
            ("alice", &secret, &hidden),
            ("bob", &hidden, &hidden),
            ("watcher", &secret, &secret),
        ] {
            let rows = activity_rows(&slot, &roles, me, 1, "eddy");
            assert_eq!(rows.len(), 2, "{me}");
            assert_eq!(rows[0].len(), activity_columns().len());
            assert_eq!(&query_of(&rows, 1), alice, "{me} on alice");
            assert_eq!(&query_of(&rows, 2), eddy, "{me} on eddy");
        }
    }

    #[test]
    fn signalling_needs_the_role_or_pg_signal_backend() {
        let (slot, roles) = setup();
        let f = |user: &str| SignalBackend {
            signal: Signal::Cancel,
            slot: Arc::clone(&slot),
            roles: Arc::clone(&roles),
            user: user.into(),
            signature: Signature::user_defined(Volatility::Volatile),
        };
        assert!(f("alice").signal_one(1).unwrap());
        assert!(f("killer").signal_one(1).unwrap());
        assert!(f("eddy").signal_one(2).unwrap());
        assert_eq!(f("bob").signal_one(1).unwrap_err().sqlstate(), "42501");
        // a superuser's backend: superusers only
        assert_eq!(f("killer").signal_one(2).unwrap_err().sqlstate(), "42501");
        assert!(!f("bob").signal_one(99).unwrap());
    }
}
