//! The PostgreSQL protocol front end: pgwire handlers that turn protocol
//! messages into `eddy_sql::Session` calls and `Output`s back into messages.
//!
//! Per connection, the session lives in pgwire's session extensions behind
//! a tokio mutex (one statement at a time per connection, as the protocol
//! requires). A COPY FROM STDIN in progress is held next to it. Cancel
//! requests go through pgwire's `ConnectionManager`: the running query's
//! future is dropped, which stops its scan threads at their next batch.
//! Each statement is in the console's registry of running statements
//! (`crate::console::activity`) from its handler's start until its last row
//! is sent; the console's cancel goes through [`Backend::cancel_statement`],
//! the same path as a CancelRequest.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use eddy_common::Value;
use eddy_sql::copy::{binary_header, binary_trailer, csv_header, encode_row, CopyIn};
use eddy_sql::pgtypes;
use eddy_sql::session::{statement_kind, Output};
use eddy_sql::{Database, Prepared, Session, SqlError};
use futures::{stream, FutureExt, Sink, SinkExt, StreamExt};
use pgwire::api::auth::sasl::scram::ScramAuth;
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata, AuthSource,
    DefaultServerParameterProvider, ServerParameterProvider, StartupHandler,
};
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyResponse, DataRowEncoder, FieldFormat, FieldInfo, QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::PortalStore;
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionManager, PgWireConnectionState, PgWireServerHandlers,
    PidSecretKeyGenerator, RandomPidSecretKeyGenerator, Type,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail, CopyOutResponse};
use pgwire::messages::data::DataRow;
use pgwire::messages::startup::SecretKey;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use crate::console::activity::{Activity, ActivityRegistration, RunningGuard, StatementText};
use crate::metrics::Metrics;
use crate::panics;

/// Map a SQL error to the protocol's error response.
pub fn error_info(e: &SqlError) -> ErrorInfo {
    let mut info = ErrorInfo::new(
        "ERROR".to_string(),
        e.sqlstate().to_string(),
        e.client_message(),
    );
    info.detail = e.detail();
    info.hint = e.hint();
    info.where_context = e.context();
    if let Some(o) = e.object() {
        info.schema = o.schema.clone();
        info.table = o.table.clone();
        info.column = o.column.clone();
        info.constraint = o.constraint.clone();
    }
    info
}

fn user_error(e: &SqlError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(e)))
}

/// Per-connection state kept in pgwire's session extensions.
pub struct SessionSlot {
    pub(crate) session: tokio::sync::Mutex<Option<Session>>,
    copy_in: parking_lot::Mutex<Option<Box<CopyIn>>>,
    cancel: Arc<CancelSignal>,
    /// A statement of this connection is running; still set when the next
    /// one starts means the last one was dropped before it finished.
    running: std::sync::atomic::AtomicBool,
    /// This connection's idle-in-transaction watch (see `crate::idle`).
    pub(crate) idle: Option<Arc<crate::idle::IdleWatch>>,
    /// This connection in the console's registry of running statements.
    pub(crate) activity: ActivityRegistration,
    _registration: CancelRegistration,
    _conn: ConnCount,
}

/// A connection's cancel flag. pgwire's own cancellation only covers the
/// planning future; rows are produced later, while pgwire streams them, so
/// the row stream watches this signal too (see [`cancellable`]).
#[derive(Default)]
pub struct CancelSignal {
    requested: std::sync::atomic::AtomicBool,
    /// The request came from `statement_timeout`, not from a client.
    timed_out: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
    /// The running statement's `statement_timeout` timer.
    timer: parking_lot::Mutex<Option<tokio::task::AbortHandle>>,
}

impl CancelSignal {
    /// Called when a statement starts: a cancel aimed at an earlier one is
    /// void, and so is the earlier statement's timer. With a timeout, a
    /// timer fires this signal when it passes (the statement's rows are
    /// streamed after the handler returns, so the timer outlives it).
    fn reset(self: &Arc<Self>, timeout: Option<std::time::Duration>) {
        if let Some(old) = self.timer.lock().take() {
            old.abort();
        }
        self.requested.store(false, Ordering::SeqCst);
        self.timed_out.store(false, Ordering::SeqCst);
        if let Some(after) = timeout {
            let signal = Arc::downgrade(self);
            let task = tokio::spawn(async move {
                tokio::time::sleep(after).await;
                if let Some(signal) = signal.upgrade() {
                    signal.timed_out.store(true, Ordering::SeqCst);
                    signal.fire();
                }
            });
            *self.timer.lock() = Some(task.abort_handle());
        }
    }

    fn fire(&self) {
        self.requested.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// The error that ends a statement this signal stopped.
    fn error(&self) -> SqlError {
        if self.timed_out.load(Ordering::SeqCst) {
            SqlError::StatementTimeout
        } else {
            SqlError::QueryCanceled
        }
    }

    /// Resolves once the signal fires (immediately if it has).
    async fn fired(&self) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.is_requested() {
            return;
        }
        notified.await;
    }
}

impl Drop for CancelSignal {
    fn drop(&mut self) {
        if let Some(timer) = self.timer.get_mut().take() {
            timer.abort();
        }
    }
}

type CancelKey = (i32, Bytes);

/// Removes a connection's cancel signal from the backend's registry on drop.
struct CancelRegistration {
    key: CancelKey,
    registry: Arc<parking_lot::Mutex<HashMap<CancelKey, Arc<CancelSignal>>>>,
}

impl Drop for CancelRegistration {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.key);
    }
}

/// Wraps a result stream so that a cancel request stops it (dropping the
/// DataFusion stream stops its scan tasks) and ends it with SQLSTATE 57014.
fn cancellable(
    stream: datafusion::execution::SendableRecordBatchStream,
    signal: Arc<CancelSignal>,
) -> impl futures::Stream<Item = Result<RecordBatch, SqlError>> + Send {
    stream::unfold(Some(stream), move |state| {
        let signal = Arc::clone(&signal);
        async move {
            let mut inner = state?;
            tokio::select! {
                biased;
                _ = signal.fired() => Some((Err(signal.error()), None)),
                next = inner.next() => next.map(|b| (b.map_err(SqlError::DataFusion), Some(inner))),
            }
        }
    })
}

struct ConnCount(Arc<Metrics>);
impl Drop for ConnCount {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Shared by all connections.
pub struct Backend {
    pub db: Arc<Database>,
    pub metrics: Arc<Metrics>,
    pub manager: Arc<ConnectionManager>,
    cancels: Arc<parking_lot::Mutex<HashMap<CancelKey, Arc<CancelSignal>>>>,
    pub auth: AuthMode,
    parser: Arc<EddyParser>,
    /// Idle-in-transaction watches of the live connections.
    pub idle: Arc<crate::idle::IdleWatches>,
    /// Failed password checks by client address (`crate::auth`).
    pub failed_logins: Arc<crate::auth::FailedLogins>,
    pub require_tls_remote: bool,
    /// A client certificate every login needs besides its method's own
    /// check (`--clientcert`).
    pub clientcert: Option<ClientCert>,
    /// Open sessions and their running statements (the console's).
    pub activity: Arc<Activity>,
}

#[derive(Clone, Debug)]
pub enum AuthMode {
    Trust,
    Scram(Arc<crate::auth::ScramUsers>),
    /// A client certificate verified against `--tls-client-ca` whose
    /// common name is the user (PostgreSQL's `cert` method).
    Cert,
}

/// PostgreSQL's `clientcert` option of a password (or trust) login: a
/// client certificate verified against `--tls-client-ca` is needed as
/// well (`verify-ca`), and its common name must be the user
/// (`verify-full`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCert {
    VerifyCa,
    VerifyFull,
}

/// How connections authenticate and what their users may do.
pub struct Security {
    pub auth: AuthMode,
    /// See [`ClientCert`]; None under `--auth cert`, which implies it.
    pub clientcert: Option<ClientCert>,
    /// Every configured user's privileges (`crate::auth`).
    pub accounts: Arc<crate::auth::Accounts>,
    /// Refuse plaintext connections from non-loopback clients.
    pub require_tls_remote: bool,
}

impl Backend {
    pub fn new(db: Arc<Database>, metrics: Arc<Metrics>, security: Security) -> Backend {
        if let AuthMode::Scram(users) = &security.auth {
            users.serve(Arc::clone(&db.roles));
        }
        Backend {
            db,
            metrics,
            manager: Arc::new(ConnectionManager::new()),
            cancels: Arc::default(),
            auth: security.auth,
            parser: Arc::new(EddyParser),
            idle: Arc::default(),
            failed_logins: Arc::default(),
            require_tls_remote: security.require_tls_remote,
            clientcert: security.clientcert,
            activity: Arc::default(),
        }
    }

    /// What a CancelRequest with this key does: pgwire's manager
    /// interrupts a statement still being planned, the connection's
    /// [`CancelSignal`] stops rows being produced; the statement ends with
    /// 57014. False when no connection has this key.
    pub async fn cancel_statement(&self, pid: i32, secret: &SecretKey) -> bool {
        let key: CancelKey = (pid, secret.to_bytes());
        let signal = self.cancels.lock().get(&key).cloned();
        match signal {
            Some(signal) => {
                signal.fire();
                self.manager.cancel(pid, secret).await;
                true
            }
            None => false,
        }
    }
}

fn parameter_provider() -> EddyParameters {
    let mut p = DefaultServerParameterProvider::default();
    p.server_version = eddy_sql::catalog::SERVER_VERSION.to_string();
    p.time_zone = "UTC".into();
    p.date_style = "ISO, MDY".into();
    EddyParameters(p)
}

/// The ParameterStatus values sent at startup: the server's, with the
/// client's own `TimeZone` where its startup message names a zone (the
/// session reads and writes timestamps there from its first statement).
pub struct EddyParameters(DefaultServerParameterProvider);

impl ServerParameterProvider for EddyParameters {
    fn server_parameters<C>(&self, client: &C) -> Option<HashMap<String, String>>
    where
        C: ClientInfo,
    {
        let mut params = self.0.server_parameters(client)?;
        let asked = eddy_sql::session::startup_settings_of(client.metadata())
            .into_iter()
            .rev()
            .find(|(k, _)| k == "timezone")
            .map(|(_, v)| v);
        if let Some(zone) = asked.and_then(|v| eddy_sql::session_zone::SessionZone::parse(&v).ok())
        {
            params.insert("TimeZone".into(), zone.name().to_string());
        }
        Some(params)
    }
}

/// Startup without a password (`--auth trust`, loopback only).
pub struct TrustStartup {
    manager: Arc<ConnectionManager>,
    database: String,
    /// A role that exists but may not log in is refused (28000).
    roles: Arc<eddy_sql::roles::Roles>,
    /// One for the server, so that every connection gets its own pid.
    pids: RandomPidSecretKeyGenerator,
    /// `--auth cert`: the login needs a verified client certificate whose
    /// common name is the user, and a role of that name that may log in.
    certificate: bool,
    /// `--clientcert` beside trust.
    clientcert: Option<ClientCert>,
}

#[async_trait]
impl StartupHandler for TrustStartup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let PgWireFrontendMessage::Startup(ref startup) = message {
            protocol_negotiation(client, startup).await?;
            save_startup_parameters_to_metadata(client, startup);
            check_database(client, &self.database)?;
            if self.certificate {
                check_certificate(client, &self.roles)?;
            } else if let Some(wanted) = self.clientcert {
                let user = client.metadata().get("user").cloned().unwrap_or_default();
                check_client_certificate(client, &user, wanted)?;
            }
            check_may_log_in(client, &self.roles)?;
            let (pid, key) = self.pids.generate(client);
            client.set_pid_and_secret_key(pid, key.clone());
            let (handle, guard) = self.manager.register(pid, key);
            client.session_extensions().insert(handle);
            client.session_extensions().insert(guard);
            finish_authentication(client, &parameter_provider()).await?;
        }
        Ok(())
    }
}

/// `--clientcert` (PostgreSQL's `clientcert=verify-ca|verify-full`): a
/// verified client certificate (the TLS handshake checked it against
/// `--tls-client-ca`), naming the user for `verify-full`. Checked at the
/// startup message, before the password is asked: PostgreSQL checks the
/// name after it, so where both fail Eddy names the certificate and
/// PostgreSQL the password (each FATAL, 28000 or 28P01).
fn check_client_certificate<C: ClientInfo>(
    client: &C,
    user: &str,
    wanted: ClientCert,
) -> PgWireResult<()> {
    let named = certified_user(client)?;
    if wanted == ClientCert::VerifyFull && named != user {
        tracing::warn!(%user, certificate = %named, "clientcert=verify-full: the certificate names another user");
        return Err(fatal_28000(format!(
            "certificate validation (clientcert=verify-full) failed for user \"{user}\""
        )));
    }
    Ok(())
}

/// A FATAL 28000 (invalid authorization) with `message`.
fn fatal_28000(message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "FATAL".into(),
        "28000".into(),
        message,
    )))
}

/// The common name of the client's verified certificate; PostgreSQL's
/// FATAL when it has none.
fn certified_user<C: ClientInfo>(client: &C) -> PgWireResult<String> {
    crate::tls::certificate_user(client.client_certificates())
        .ok_or_else(|| fatal_28000("connection requires a valid client certificate".into()))
}

/// PostgreSQL's `cert` authentication: the TLS handshake verified the
/// client's certificate against `--tls-client-ca`; its common name must be
/// the user, and the user a role. Each failure is FATAL 28000 with
/// PostgreSQL's message.
fn check_certificate<C: ClientInfo>(
    client: &C,
    roles: &eddy_sql::roles::Roles,
) -> PgWireResult<()> {
    let user = client.metadata().get("user").cloned().unwrap_or_default();
    let named = certified_user(client)?;
    if named != user {
        tracing::warn!(%user, certificate = %named, "certificate authentication failed: the certificate names another user");
        return Err(fatal_28000(format!(
            "certificate authentication failed for user \"{user}\""
        )));
    }
    if roles.get(&user).is_none() {
        return Err(fatal_28000(format!("role \"{user}\" does not exist")));
    }
    Ok(())
}

/// PostgreSQL's answer to a NOLOGIN role (a name that is no role logs in
/// under trust, with no privilege: `docs/design/security.md`).
fn check_may_log_in<C: ClientInfo>(client: &C, roles: &eddy_sql::roles::Roles) -> PgWireResult<()> {
    let user = client.metadata().get("user").cloned().unwrap_or_default();
    match roles.get(&user) {
        Some(r) if !r.login => Err(PgWireError::UserError(Box::new(ErrorInfo::new(
            "FATAL".into(),
            "28000".into(),
            format!("role \"{user}\" is not permitted to log in"),
        )))),
        _ => Ok(()),
    }
}

fn check_database<C: ClientInfo>(client: &C, database: &str) -> PgWireResult<()> {
    let md = client.metadata();
    let db = md
        .get("database")
        .or_else(|| md.get("user"))
        .cloned()
        .unwrap_or_default();
    if db != database {
        return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
            "FATAL".into(),
            "3D000".into(),
            format!("database \"{db}\" does not exist"),
        ))));
    }
    Ok(())
}

/// Startup with SCRAM-SHA-256; checks the database name after auth, and
/// counts failed password checks per client address (`crate::auth`).
pub struct ScramStartup {
    inner: SASLAuthStartupHandler<EddyParameters>,
    database: String,
    failed_logins: Arc<crate::auth::FailedLogins>,
    /// `--clientcert` beside the password.
    clientcert: Option<ClientCert>,
}

#[async_trait]
impl StartupHandler for ScramStartup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let PgWireFrontendMessage::Startup(ref startup) = message {
            let db = startup
                .parameters
                .get("database")
                .or_else(|| startup.parameters.get("user"))
                .cloned()
                .unwrap_or_default();
            if db != self.database {
                return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                    "FATAL".into(),
                    "3D000".into(),
                    format!("database \"{db}\" does not exist"),
                ))));
            }
            if let Some(wanted) = self.clientcert {
                // (pgwire copies the user into the client's metadata
                // only once it handles the message)
                let user = startup.parameters.get("user").cloned().unwrap_or_default();
                check_client_certificate(client, &user, wanted)?;
            }
        }
        let addr = client.socket_addr().ip();
        // checked at every step, so that connections opened together cannot
        // all try a password once the limit is reached
        if let crate::auth::LoginGate::Closed { retry_after } =
            self.failed_logins.gate(addr, std::time::Instant::now())
        {
            tracing::warn!(%addr, "login refused: too many failed attempts");
            return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                "FATAL".into(),
                "28000".into(),
                format!(
                    "too many failed authentication attempts from {addr}; try again in {} s",
                    retry_after.as_secs().max(1)
                ),
            ))));
        }
        match self.inner.on_startup(client, message).await {
            Err(PgWireError::InvalidPassword(scram_user)) => {
                // libpq leaves the SCRAM user name empty: the startup
                // message's is the one PostgreSQL names
                let user = client.metadata().get("user").cloned().unwrap_or(scram_user);
                self.failed_logins
                    .record_failure(addr, std::time::Instant::now());
                tracing::info!(%addr, "password authentication failed");
                // PostgreSQL's wording, the same for a wrong password and
                // a user that does not exist
                Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                    "FATAL".into(),
                    "28P01".into(),
                    format!("password authentication failed for user \"{user}\""),
                ))))
            }
            other => other,
        }
    }
}

/// The connection's session slot. Every handler reaches the session
/// through here, so this is also where the client stops being idle.
pub(crate) fn slot<C: ClientInfo>(client: &C, backend: &Backend) -> Arc<SessionSlot> {
    let s = new_or_existing_slot(client, backend);
    if let Some(w) = &s.idle {
        w.disarm();
    }
    s
}

pub(crate) fn new_or_existing_slot<C: ClientInfo>(
    client: &C,
    backend: &Backend,
) -> Arc<SessionSlot> {
    client.session_extensions().get_or_insert_with(|| {
        backend.metrics.connections.fetch_add(1, Ordering::Relaxed);
        let (pid, secret) = client.pid_and_secret_key();
        let key: CancelKey = (pid, secret.to_bytes());
        let user = client
            .metadata()
            .get("user")
            .cloned()
            .unwrap_or_else(|| "eddy".into());
        let application_name = client
            .metadata()
            .get("application_name")
            .cloned()
            .unwrap_or_default();
        let activity =
            backend
                .activity
                .register(pid, secret, user, application_name, client.socket_addr());
        let cancel = Arc::new(CancelSignal::default());
        backend
            .cancels
            .lock()
            .insert(key.clone(), Arc::clone(&cancel));
        SessionSlot {
            session: tokio::sync::Mutex::new(None),
            copy_in: parking_lot::Mutex::new(None),
            cancel,
            running: std::sync::atomic::AtomicBool::new(false),
            idle: backend.idle.get(&client.socket_addr()),
            activity,
            _registration: CancelRegistration {
                key,
                registry: Arc::clone(&backend.cancels),
            },
            _conn: ConnCount(Arc::clone(&backend.metrics)),
        }
    })
}

async fn with_session<C, T, F>(client: &C, backend: &Backend, f: F) -> Result<T, SqlError>
where
    C: ClientInfo,
    F: for<'a> FnOnce(&'a mut Session) -> futures::future::BoxFuture<'a, Result<T, SqlError>>,
{
    let s = slot(client, backend);
    let mut guard = s.session.lock().await;
    if guard.is_none() {
        let user = client
            .metadata()
            .get("user")
            .cloned()
            .unwrap_or_else(|| "eddy".into());
        let pid = client.pid_and_secret_key().0;
        let mut sess = Session::new(Arc::clone(&backend.db), &user, pid)?;
        sess.apply_startup_parameters(client.metadata());
        crate::notifications::register(client, sess.notification_mailbox());
        *guard = Some(sess);
    }
    let Some(sess) = guard.as_mut() else {
        return Err(SqlError::Internal("no session".into()));
    };
    if s.running.swap(true, Ordering::SeqCst) {
        // the previous statement was dropped where it stood (pgwire drops
        // a cancelled Execute): undo what it left open
        sess.recover_from_interrupted_statement();
    }
    s.cancel.reset(sess.statement_timeout().unwrap_or(None));
    let signal = Arc::clone(&s.cancel);
    let run = std::panic::AssertUnwindSafe(f(sess)).catch_unwind();
    let result = tokio::select! {
        biased;
        _ = signal.fired() => Err(signal.error()),
        r = run => match r {
            Ok(r) => Ok(r),
            Err(payload) => Err(panics::internal(payload)),
        },
    };
    s.running.store(false, Ordering::SeqCst);
    match result {
        Ok(r) => r,
        Err(e) => {
            sess.recover_from_interrupted_statement();
            Err(e)
        }
    }
}

fn pg_type(oid: u32) -> Type {
    Type::from_oid(oid).unwrap_or(Type::TEXT)
}

fn field_format(f: &Format, idx: usize) -> FieldFormat {
    match f {
        Format::UnifiedText => FieldFormat::Text,
        Format::UnifiedBinary => FieldFormat::Binary,
        Format::Individual(v) => match v.get(idx) {
            Some(1) => FieldFormat::Binary,
            _ => FieldFormat::Text,
        },
    }
}

fn fields_of(schema: &SchemaRef, formats: Option<&Format>) -> Vec<FieldInfo> {
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let fmt = formats
                .map(|x| field_format(x, i))
                .unwrap_or(FieldFormat::Text);
            FieldInfo::new(
                eddy_sql::output_names::visible(f.name()).to_string(),
                None,
                None,
                pg_type(pgtypes::field_oid(f)),
                fmt,
            )
        })
        .collect()
}

fn encode_batch(batch: &RecordBatch, formats: &[pgtypes::Format]) -> Vec<PgWireResult<DataRow>> {
    let batch = match pgtypes::present_batch(batch) {
        Ok(b) => b,
        Err(e) => return vec![Err(user_error(&e))],
    };
    let mut rows = Vec::with_capacity(batch.num_rows());
    for r in 0..batch.num_rows() {
        let mut buf = BytesMut::with_capacity(64);
        let mut res = Ok(());
        let schema = batch.schema();
        for (i, (f, c)) in schema.fields().iter().zip(batch.columns()).enumerate() {
            let fmt = formats.get(i).copied().unwrap_or(pgtypes::Format::Text);
            if let Err(e) = pgtypes::encode_field_cell(f, c.as_ref(), r, fmt, &mut buf) {
                res = Err(e);
                break;
            }
        }
        rows.push(match res {
            Ok(()) => Ok(DataRow::new(buf, batch.num_columns() as i16)),
            Err(e) => Err(user_error(&e)),
        });
    }
    rows
}

fn query_response(
    schema: SchemaRef,
    stream: datafusion::execution::SendableRecordBatchStream,
    formats: Option<&Format>,
    described: &[eddy_sql::ResultColumn],
    cancel: Arc<CancelSignal>,
    running: Option<Arc<RunningGuard>>,
) -> QueryResponse {
    let mut fields = fields_of(&schema, formats);
    // A column Describe announced as text but that runs as another type
    // (`SELECT $1`: the statement was planned before its parameters had
    // values) is sent as its text form, which is also text's binary form:
    // the client decodes what it was told to expect.
    let as_text: Vec<bool> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            described.get(i).is_some_and(|d| {
                matches!(d.type_oid, pgtypes::oid::TEXT | pgtypes::oid::VARCHAR)
                    && f.datatype().oid() != d.type_oid
            })
        })
        .collect();
    for (f, text) in fields.iter_mut().zip(&as_text) {
        if *text {
            *f = FieldInfo::new(f.name().to_string(), None, None, Type::TEXT, f.format());
        }
    }
    let fmts: Vec<pgtypes::Format> = fields
        .iter()
        .zip(&as_text)
        .map(|(f, text)| {
            if f.format() == FieldFormat::Binary && !text {
                pgtypes::Format::Binary
            } else {
                pgtypes::Format::Text
            }
        })
        .collect();
    let fields = Arc::new(fields);
    let rows = panics::guarded_stream(cancellable(stream, cancel)).flat_map(move |b| {
        // the statement runs (and shows in the console) until its rows
        // are sent or the stream is dropped
        let _running = &running;
        let items = match b {
            Ok(batch) => encode_batch(&batch, &fmts),
            Err(e) => vec![Err(user_error(&e))],
        };
        stream::iter(items)
    });
    QueryResponse::new(fields, rows)
}

/// Send a COPY TO STDOUT ourselves (exact row count, streaming).
async fn send_copy_out<C>(client: &mut C, out: eddy_sql::copy::CopyOut) -> PgWireResult<usize>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let binary = out.is_binary();
    let ncols = out.schema.fields().len();
    let fmt: i8 = if binary { 1 } else { 0 };
    client
        .send(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(
            fmt,
            ncols as i16,
            vec![fmt as i16; ncols],
        )))
        .await?;
    // Binary: the header goes out in one message with the first row (or
    // the trailer), as PostgreSQL sends it; tokio-postgres's
    // `BinaryCopyOutStream` reads a row right after the header in the same
    // message and fails on a header alone.
    let mut prefix = if binary { binary_header() } else { Vec::new() };
    if !binary && out.options.header {
        client
            .feed(PgWireBackendMessage::CopyData(CopyData::new(Bytes::from(
                csv_header(&out.schema, &out.options),
            ))))
            .await?;
    }
    let mut stream = out.stream;
    let mut n = 0usize;
    while let Some(b) = stream.next().await {
        let batch = b.map_err(|e| user_error(&SqlError::DataFusion(e)))?;
        let batch = pgtypes::present_batch(&batch).map_err(|e| user_error(&e))?;
        for r in 0..batch.num_rows() {
            let mut buf = BytesMut::new();
            buf.extend_from_slice(&prefix);
            prefix.clear();
            encode_row(&batch, r, &out.options, &mut buf).map_err(|e| user_error(&e))?;
            client
                .feed(PgWireBackendMessage::CopyData(CopyData::new(buf.freeze())))
                .await?;
            n += 1;
        }
    }
    if binary {
        prefix.extend_from_slice(&binary_trailer());
        client
            .feed(PgWireBackendMessage::CopyData(CopyData::new(Bytes::from(
                prefix,
            ))))
            .await?;
    }
    client
        .send(PgWireBackendMessage::CopyDone(CopyDone::new()))
        .await?;
    Ok(n)
}

async fn to_response<C>(
    client: &mut C,
    backend: &Backend,
    out: Result<Output, SqlError>,
    formats: Option<&Format>,
    described: &[eddy_sql::ResultColumn],
    running: &Arc<RunningGuard>,
) -> PgWireResult<Response>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    Ok(match out {
        Ok(Output::Rows {
            schema,
            stream,
            command,
        }) => {
            let mut response = query_response(
                schema,
                stream,
                formats,
                described,
                Arc::clone(&slot(client, backend).cancel),
                Some(Arc::clone(running)),
            );
            response.set_command_tag(command);
            Response::Query(response)
        }
        Ok(Output::Command(tag)) => Response::Execution(Tag::new(&tag)),
        Ok(Output::TxnStart(tag)) => Response::TransactionStart(Tag::new(&tag)),
        Ok(Output::TxnEnd(tag)) => Response::TransactionEnd(Tag::new(&tag)),
        Ok(Output::Empty) => Response::EmptyQuery,
        Ok(Output::CopyIn(c)) => {
            let (fmt, cols) = c.wire_format();
            tracing::info!(table = c.table_name(), "COPY FROM STDIN started");
            *slot(client, backend).copy_in.lock() = Some(c);
            Response::CopyIn(CopyResponse::new(fmt, cols, stream::empty()))
        }
        Ok(Output::CopyOut(c)) => {
            let n = send_copy_out(client, c).await?;
            Response::Execution(Tag::new("COPY").with_rows(n))
        }
        Err(e) => {
            tracing::debug!(error = %e.client_message(), sqlstate = e.sqlstate(), "statement failed");
            Response::Error(Box::new(error_info(&e)))
        }
    })
}

#[async_trait]
impl SimpleQueryHandler for Backend {
    async fn on_query<C>(
        &self,
        client: &mut C,
        query: pgwire::messages::simplequery::Query,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        crate::txn_status::on_query(self, client, query).await
    }

    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let start = Instant::now();
        let kind = statement_kind(query);
        let q: Arc<str> = Arc::from(query);
        let running = Arc::new(
            slot(client, self)
                .activity
                .session
                .begin(StatementText::Simple(Arc::clone(&q)), start),
        );
        let outs = match with_session(client, self, move |s| {
            Box::pin(async move { Ok(s.simple_query(&q).await) })
        })
        .await
        {
            Ok(v) => v,
            Err(e) => vec![Err(e)],
        };
        let ok = outs.iter().all(|o| o.is_ok());
        let mut resps = Vec::with_capacity(outs.len());
        for o in outs {
            resps.push(to_response(client, self, o, None, &[], &running).await?);
        }
        self.metrics.record(kind, start.elapsed(), ok);
        Ok(resps)
    }
}

/// The extended protocol's parser: statements are Eddy `Prepared`s.
pub struct EddyParser;

/// Statement stored by pgwire.
pub type Stmt = Arc<Prepared>;

#[async_trait]
impl QueryParser for EddyParser {
    type Statement = Stmt;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Stmt>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let backend = client
            .session_extensions()
            .get::<BackendRef>()
            .ok_or_else(|| user_error(&SqlError::Internal("no backend".into())))?;
        let oids: Vec<u32> = types
            .iter()
            .map(|t| t.as_ref().map(|t| t.oid()).unwrap_or(0))
            .collect();
        let sql = sql.to_string();
        let p = with_session(client, &backend.0, move |s| {
            Box::pin(async move { s.prepare(&sql, &oids).await })
        })
        .await
        .map_err(|e| user_error(&e))?;
        Ok(Some(Arc::new(p)))
    }

    fn get_parameter_types(&self, stmt: &Stmt) -> PgWireResult<Vec<Type>> {
        Ok(stmt.param_types.iter().map(|o| pg_type(*o)).collect())
    }

    fn get_result_schema(
        &self,
        stmt: &Stmt,
        column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        Ok(stmt
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let fmt = column_format
                    .map(|f| field_format(f, i))
                    .unwrap_or(FieldFormat::Text);
                FieldInfo::new(c.name.clone(), None, None, pg_type(c.type_oid), fmt)
            })
            .collect())
    }
}

/// Lets the parser (which only sees `&C`) find the backend.
pub struct BackendRef(pub Arc<Backend>);

/// A portal's parameters, as sent: the bytes and whether each is binary.
struct RawParams(Vec<(Option<Bytes>, bool)>);

impl RawParams {
    fn of(portal: &Portal<Stmt>) -> RawParams {
        RawParams(
            portal
                .parameters
                .iter()
                .enumerate()
                .map(|(i, raw)| {
                    let binary = field_format(&portal.parameter_format, i) == FieldFormat::Binary;
                    (raw.clone(), binary)
                })
                .collect(),
        )
    }

    /// The values, text read in the session's TimeZone (a `timestamptz`
    /// without an offset is a wall-clock time there).
    fn decode(
        &self,
        p: &Prepared,
        zone: &eddy_sql::session_zone::SessionZone,
    ) -> Result<Vec<Value>, SqlError> {
        let mut out = Vec::with_capacity(self.0.len());
        for (i, (raw, binary)) in self.0.iter().enumerate() {
            let oid = p.param_types.get(i).copied().unwrap_or(pgtypes::oid::TEXT);
            let Some(bytes) = raw else {
                out.push(Value::Null);
                continue;
            };
            out.push(pgtypes::parse_param_in(bytes, oid, *binary, zone)?);
        }
        Ok(out)
    }
}

/// The statement to run for `params`. NUMERIC parameters decode to their
/// exact text, which the fixed-plan path rounds to the column's scale; on
/// the general path they would be string literals, so they are bound here
/// as typed decimal literals (`CAST('1.50' AS DECIMAL(3,2))`) that keep
/// their scale and take part in arithmetic. The session substitutes the
/// other parameters. Statements without NUMERIC parameters are not copied.
fn bind_numeric_params(p: &Arc<Prepared>, params: &[Value]) -> Arc<Prepared> {
    // a statement planned with placeholders binds them itself
    if !p.param_types.contains(&pgtypes::oid::NUMERIC) || p.planned.is_some() {
        return Arc::clone(p);
    }
    let Some(stmt) = &p.stmt else {
        return Arc::clone(p);
    };
    let mut stmt = stmt.clone();
    if !eddy_sql::rewrite::bind_numeric_params(&mut stmt, params, &p.param_types) {
        return Arc::clone(p);
    }
    Arc::new(Prepared {
        sql: p.sql.clone(),
        stmt: Some(stmt),
        param_types: p.param_types.clone(),
        columns: p.columns.clone(),
        fast: p.fast.clone(),
        planned: None,
        resolution: p.resolution.clone(),
    })
}

/// The most rows one Execute returns before PortalSuspended.
const MAX_ROWS_PER_EXECUTE: i32 = 1 << 16;

fn clamp_max_rows(max_rows: i32) -> i32 {
    if max_rows <= 0 {
        0
    } else {
        max_rows.min(MAX_ROWS_PER_EXECUTE)
    }
}

#[async_trait]
impl ExtendedQueryHandler for Backend {
    type Statement = Stmt;
    type QueryParser = EddyParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        Arc::clone(&self.parser)
    }

    /// Execute's row limit as PostgreSQL reads it (zero or negative: all
    /// rows), capped at [`MAX_ROWS_PER_EXECUTE`]: the protocol layer
    /// reserves room for the limit before fetching, so a client's
    /// `max_rows` of 2^31 - 1 must not become a 2^31-element allocation.
    /// A capped Execute ends with PortalSuspended; the client asks again.
    async fn on_execute<C>(
        &self,
        client: &mut C,
        mut message: pgwire::messages::extendedquery::Execute,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        message.max_rows = clamp_max_rows(message.max_rows);
        self._on_execute(client, message).await
    }

    /// A portal the protocol does not know may be a SQL cursor: in
    /// PostgreSQL `DECLARE c CURSOR` makes a portal named `c`, and
    /// psycopg 3 describes its server-side cursors that way.
    async fn on_describe<C>(
        &self,
        client: &mut C,
        message: pgwire::messages::extendedquery::Describe,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if message.target_type == pgwire::messages::extendedquery::TARGET_TYPE_BYTE_PORTAL {
            if let Some(name) = message
                .name
                .clone()
                .filter(|n| client.portal_store().get_portal(n).is_none())
            {
                let columns = with_session(client, self, move |s| {
                    Box::pin(async move { Ok(s.cursor_columns(&name)) })
                })
                .await
                .map_err(|e| user_error(&e))?;
                if let Some(columns) = columns {
                    let fields = columns
                        .iter()
                        .map(|c| {
                            FieldInfo::new(
                                c.name.clone(),
                                None,
                                None,
                                pg_type(c.type_oid),
                                FieldFormat::Text,
                            )
                        })
                        .collect();
                    let response = pgwire::api::results::DescribePortalResponse::new(fields);
                    return pgwire::api::query::send_describe_response(client, &response).await;
                }
            }
        }
        self._on_describe(client, message).await
    }

    async fn on_sync<C>(
        &self,
        client: &mut C,
        _message: pgwire::messages::extendedquery::Sync,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        crate::txn_status::on_sync(self, client).await
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Stmt>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let start = Instant::now();
        let prepared = Arc::clone(&portal.statement.statement);
        let kind = statement_kind(&prepared.sql);
        let running = Arc::new(
            slot(client, self)
                .activity
                .session
                .begin(StatementText::Prepared(Arc::clone(&prepared)), start),
        );
        let raw = RawParams::of(portal);
        let statement = Arc::clone(&prepared);
        let out = with_session(client, self, move |s| {
            Box::pin(async move {
                let params = raw.decode(&statement, &s.time_zone())?;
                let p = bind_numeric_params(&statement, &params);
                s.execute_prepared(&p, &params).await
            })
        })
        .await;
        let ok = out.is_ok();
        let resp = to_response(
            client,
            self,
            out,
            Some(&portal.result_column_format),
            &prepared.columns,
            &running,
        )
        .await?;
        self.metrics.record(kind, start.elapsed(), ok);
        Ok(resp)
    }
}

#[async_trait]
impl CopyHandler for Backend {
    async fn on_copy_data<C>(&self, client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let s = slot(client, self);
        let taken = s.copy_in.lock().take();
        if let Some(mut c) = taken {
            let data = copy_data.data;
            let c = eddy_sql::session::run_blocking(move || {
                let _ = c.feed(&data);
                c
            });
            *s.copy_in.lock() = Some(c);
        }
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let start = Instant::now();
        let s = slot(client, self);
        let taken = s.copy_in.lock().take();
        let Some(c) = taken else {
            return Err(user_error(&SqlError::Internal(
                "no COPY in progress".into(),
            )));
        };
        let result = match eddy_sql::session::run_blocking(move || c.finish()) {
            Ok(eddy_sql::copy::CopyFinish::Committed(n)) => {
                // its own commit: the session's ON COMMIT actions follow
                with_session(client, self, move |s| {
                    Box::pin(async move {
                        s.after_autocommit_copy();
                        Ok(n)
                    })
                })
                .await
            }
            Ok(eddy_sql::copy::CopyFinish::InTransaction { table, batches }) => {
                with_session(client, self, move |s| {
                    Box::pin(async move { s.copy_into_transaction(&table, batches) })
                })
                .await
            }
            Err(e) => Err(e),
        };
        self.metrics.record("copy", start.elapsed(), result.is_ok());
        if result.is_err() {
            crate::txn_status::note_error(client, self).await;
        }
        crate::txn_status::sync_status(client, self).await;
        match result {
            Ok(n) => {
                let tag = Tag::new("COPY").with_rows(n as usize);
                client
                    .feed(PgWireBackendMessage::CommandComplete(tag.into()))
                    .await?;
                // in the simple protocol pgwire sends ReadyForQuery next
                let extended = matches!(
                    client.state(),
                    pgwire::api::PgWireConnectionState::CopyInProgress(true)
                );
                if !extended {
                    let status = client.transaction_status();
                    crate::notifications::before_ready(client, self, status).await?;
                }
                client.flush().await?;
                Ok(())
            }
            Err(e) => Err(user_error(&e)),
        }
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let s = slot(client, self);
        drop(s.copy_in.lock().take());
        crate::txn_status::note_error(client, self).await;
        crate::txn_status::sync_status(client, self).await;
        PgWireError::UserError(Box::new(ErrorInfo::new(
            "ERROR".into(),
            "57014".into(),
            format!("COPY from stdin failed: {}", fail.message),
        )))
    }
}

/// pgwire's factory of handlers for one server.
pub struct Handlers {
    pub backend: Arc<Backend>,
    pub trust: Option<Arc<TrustStartup>>,
    pub scram: Option<Arc<ScramStartup>>,
    pub cancel: Arc<CancelRequests>,
}

impl Handlers {
    pub fn new(backend: Arc<Backend>) -> Handlers {
        let database = backend.db.name.clone();
        let (trust, scram) = match &backend.auth {
            AuthMode::Trust | AuthMode::Cert => (
                Some(Arc::new(TrustStartup {
                    manager: Arc::clone(&backend.manager),
                    database,
                    roles: Arc::clone(&backend.db.roles),
                    pids: RandomPidSecretKeyGenerator::default(),
                    certificate: matches!(backend.auth, AuthMode::Cert),
                    clientcert: backend.clientcert,
                })),
                None,
            ),
            AuthMode::Scram(users) => {
                let mut auth = ScramAuth::new(Arc::clone(users) as Arc<dyn AuthSource>);
                auth.set_iterations(crate::auth::SCRAM_ITERATIONS);
                let inner = SASLAuthStartupHandler::new(Arc::new(parameter_provider()))
                    .with_scram(auth)
                    .with_connection_manager(Arc::clone(&backend.manager));
                (
                    None,
                    Some(Arc::new(ScramStartup {
                        inner,
                        database,
                        failed_logins: Arc::clone(&backend.failed_logins),
                        clientcert: backend.clientcert,
                    })),
                )
            }
        };
        let cancel = Arc::new(CancelRequests {
            backend: Arc::clone(&backend),
        });
        Handlers {
            backend,
            trust,
            scram,
            cancel,
        }
    }
}

/// Cancel requests: pgwire's manager interrupts a statement still being
/// planned; the connection's [`CancelSignal`] stops rows being produced.
pub struct CancelRequests {
    backend: Arc<Backend>,
}

#[async_trait]
impl pgwire::api::cancel::CancelHandler for CancelRequests {
    async fn on_cancel_request(&self, request: pgwire::messages::cancel::CancelRequest) {
        if self
            .backend
            .cancel_statement(request.pid, &request.secret_key)
            .await
        {
            tracing::info!(pid = request.pid, "cancel request");
        } else {
            // Unknown pid/key pairs are ignored, as PostgreSQL does.
            tracing::debug!(pid = request.pid, "cancel request for no connection");
        }
    }
}

/// Either startup handler, chosen at start.
pub struct Startup {
    trust: Option<Arc<TrustStartup>>,
    scram: Option<Arc<ScramStartup>>,
    backend: Arc<Backend>,
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if client.session_extensions().get::<BackendRef>().is_none() {
            client
                .session_extensions()
                .insert(BackendRef(Arc::clone(&self.backend)));
        }
        if matches!(
            client.state(),
            PgWireConnectionState::AwaitingStartup
                | PgWireConnectionState::AuthenticationInProgress
        ) {
            if matches!(client.state(), PgWireConnectionState::AwaitingStartup) {
                let peer = client.socket_addr();
                if client.is_secure() {
                    if let Some(w) = self.backend.idle.get(&peer) {
                        w.mark_encrypted();
                    }
                }
                if crate::auth::must_refuse_plaintext(
                    self.backend.require_tls_remote,
                    client.is_secure(),
                    peer.ip(),
                ) {
                    tracing::warn!(%peer, "plaintext connection refused: TLS is required for remote clients");
                    return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                        "FATAL".into(),
                        "28000".into(),
                        format!(
                            "connections from {} must use TLS (sslmode=require)",
                            peer.ip()
                        ),
                    ))));
                }
                // a setting Eddy cannot apply ends the connection, as in
                // PostgreSQL, rather than leaving the client believing it
                if let PgWireFrontendMessage::Startup(startup) = &message {
                    if let Err(e) = eddy_sql::session::check_startup_parameters(&startup.parameters)
                    {
                        return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                            "FATAL".into(),
                            e.sqlstate().into(),
                            e.to_string(),
                        ))));
                    }
                }
            }
            if let Some(t) = &self.trust {
                return t.on_startup(client, message).await;
            }
            if let Some(s) = &self.scram {
                return s.on_startup(client, message).await;
            }
        }
        Ok(())
    }
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::clone(&self.backend)
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::clone(&self.backend)
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        Arc::clone(&self.backend)
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        Arc::new(Startup {
            trust: self.trust.clone(),
            scram: self.scram.clone(),
            backend: Arc::clone(&self.backend),
        })
    }

    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        Arc::clone(&self.cancel)
    }
}

#[allow(dead_code)]
fn _assert_send(_: &StoredStatement<Stmt>, _: DataRowEncoder) {}
