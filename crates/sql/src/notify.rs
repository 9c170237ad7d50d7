//! LISTEN / UNLISTEN / NOTIFY and `pg_notify`: the database's notification
//! hub, shared by its sessions as [`crate::advisory`]'s lock table is, and
//! each session's transactional queue. `docs/design/sql.md` ("LISTEN /
//! NOTIFY") has the design.
//!
//! Invariants:
//! * the hub ([`NotificationHub`], one per database) owns every listener
//!   registration: session id -> its channels and its [`Mailbox`]; a
//!   session that ends (or runs `UNLISTEN *` / `DISCARD ALL`) leaves no
//!   registration behind ([`SessionNotify`]'s `Drop`);
//! * a session's NOTIFYs, LISTENs and UNLISTENs are queued in its
//!   [`Pending`] and reach the hub only when its transaction commits (the
//!   statement's implicit one, or COMMIT of a block); ROLLBACK drops them,
//!   ROLLBACK TO SAVEPOINT drops those queued after the savepoint;
//! * within one transaction an identical (channel, payload) pair is queued
//!   once; delivery follows the order of sending, listeners in each
//!   mailbox receive them in commit order;
//! * nothing is unbounded: a transaction queues at most
//!   [`MAILBOX_MESSAGES`] notifications ([`MAILBOX_BYTES`] bytes), a
//!   listener's mailbox holds as many; a COMMIT whose notifications do not
//!   fit a listener's mailbox fails with 54000 before anything is
//!   committed, and a notifier never waits for a listener.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::datasource::MemTable;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TableType,
    Volatility,
};
use datafusion::physical_plan::ExecutionPlan;
use parking_lot::Mutex;

use crate::error::{Result, SqlError};
use crate::udf_args::text_at;

/// A payload must be shorter than this many bytes (PostgreSQL's
/// `NOTIFY_PAYLOAD_MAX_LENGTH`).
pub const PAYLOAD_LIMIT: usize = 8000;
/// A channel name is an identifier: at most 63 bytes (`NAMEDATALEN - 1`).
pub const CHANNEL_LIMIT: usize = 63;
/// The most notifications a listener's mailbox holds, and a transaction
/// queues.
pub const MAILBOX_MESSAGES: usize = 10_000;
/// The most channel and payload bytes a mailbox holds, and a transaction
/// queues.
pub const MAILBOX_BYTES: usize = 16 << 20;

/// One notification as a listener receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    /// The notifying session's backend process id.
    pub pid: i32,
    pub channel: String,
    pub payload: String,
}

impl Notification {
    fn bytes(&self) -> usize {
        self.channel.len() + self.payload.len()
    }
}

/// A listening session's delivered, not yet sent notifications.
#[derive(Default)]
pub struct Mailbox {
    queue: Mutex<VecDeque<Notification>>,
    bytes: std::sync::atomic::AtomicUsize,
    /// Wakes the connection waiting for its client (a permit is kept when
    /// nobody waits, so no wake-up is lost).
    wake: Arc<tokio::sync::Notify>,
}

impl Mailbox {
    /// Everything delivered so far, oldest first.
    pub fn take(&self) -> Vec<Notification> {
        let mut q = self.queue.lock();
        self.bytes.store(0, Ordering::Relaxed);
        q.drain(..).collect()
    }

    /// What the connection waits on while its client is idle.
    pub fn waker(&self) -> Arc<tokio::sync::Notify> {
        Arc::clone(&self.wake)
    }

    fn len(&self) -> usize {
        self.queue.lock().len()
    }

    fn room(&self) -> (usize, usize) {
        let q = self.queue.lock();
        let bytes = self.bytes.load(Ordering::Relaxed);
        (
            MAILBOX_MESSAGES.saturating_sub(q.len()),
            MAILBOX_BYTES.saturating_sub(bytes),
        )
    }

    /// Adds one; false (and nothing added) when it does not fit.
    fn push(&self, n: Notification) -> bool {
        let mut q = self.queue.lock();
        let bytes = self.bytes.load(Ordering::Relaxed);
        if q.len() >= MAILBOX_MESSAGES || bytes + n.bytes() > MAILBOX_BYTES {
            return false;
        }
        self.bytes.store(bytes + n.bytes(), Ordering::Relaxed);
        q.push_back(n);
        true
    }
}

struct Listener {
    /// In the order LISTEN added them (`pg_listening_channels`).
    channels: Vec<String>,
    mailbox: Arc<Mailbox>,
}

#[derive(Default)]
struct HubState {
    listeners: HashMap<u64, Listener>,
    by_channel: HashMap<String, BTreeSet<u64>>,
}

/// Every listener of the database.
#[derive(Default)]
pub struct NotificationHub {
    state: Mutex<HubState>,
    /// Notifications lost to a full mailbox by a race past the COMMIT check.
    dropped: AtomicU64,
}

impl NotificationHub {
    fn listen(&self, id: u64, mailbox: &Arc<Mailbox>, channel: &str) {
        let mut s = self.state.lock();
        let l = s.listeners.entry(id).or_insert_with(|| Listener {
            channels: Vec::new(),
            mailbox: Arc::clone(mailbox),
        });
        if l.channels.iter().any(|c| c == channel) {
            return;
        }
        l.channels.push(channel.to_string());
        s.by_channel
            .entry(channel.to_string())
            .or_default()
            .insert(id);
    }

    fn unlisten(&self, id: u64, channel: &str) {
        let mut s = self.state.lock();
        let HubState {
            listeners,
            by_channel,
        } = &mut *s;
        if let Some(l) = listeners.get_mut(&id) {
            l.channels.retain(|c| c != channel);
            if l.channels.is_empty() {
                listeners.remove(&id);
            }
        }
        if let Some(ids) = by_channel.get_mut(channel) {
            ids.remove(&id);
            if ids.is_empty() {
                by_channel.remove(channel);
            }
        }
    }

    /// Drops every registration of `id` (UNLISTEN *, session end).
    pub fn unlisten_all(&self, id: u64) {
        let mut s = self.state.lock();
        let HubState {
            listeners,
            by_channel,
        } = &mut *s;
        let Some(l) = listeners.remove(&id) else {
            return;
        };
        for c in l.channels {
            if let Some(ids) = by_channel.get_mut(&c) {
                ids.remove(&id);
                if ids.is_empty() {
                    by_channel.remove(&c);
                }
            }
        }
    }

    /// The channels `id` listens on, in LISTEN order.
    pub fn channels(&self, id: u64) -> Vec<String> {
        self.state
            .lock()
            .listeners
            .get(&id)
            .map(|l| l.channels.clone())
            .unwrap_or_default()
    }

    /// How many sessions listen, and on how many channels (tests, metrics).
    pub fn registrations(&self) -> (usize, usize) {
        let s = self.state.lock();
        (s.listeners.len(), s.by_channel.len())
    }

    /// 54000 when some listener's mailbox has no room for what `notes`
    /// would deliver to it (checked before a COMMIT commits).
    fn check_room(&self, notes: &[(String, String)]) -> Result<()> {
        if notes.is_empty() {
            return Ok(());
        }
        let s = self.state.lock();
        let mut need: HashMap<u64, (usize, usize)> = HashMap::new();
        for (channel, payload) in notes {
            for id in s.by_channel.get(channel).into_iter().flatten() {
                let e = need.entry(*id).or_default();
                e.0 += 1;
                e.1 += channel.len() + payload.len();
            }
        }
        for (id, (count, bytes)) in need {
            let Some(l) = s.listeners.get(&id) else {
                continue;
            };
            let (room, room_bytes) = l.mailbox.room();
            if count > room || bytes > room_bytes {
                return Err(queue_full());
            }
        }
        Ok(())
    }

    /// Delivers `notes` from the session `pid` to every listener, in order.
    fn deliver(&self, pid: i32, notes: Vec<(String, String)>) {
        if notes.is_empty() {
            return;
        }
        let s = self.state.lock();
        let mut woken: HashMap<u64, Arc<Mailbox>> = HashMap::new();
        for (channel, payload) in notes {
            for id in s.by_channel.get(&channel).into_iter().flatten() {
                let Some(l) = s.listeners.get(id) else {
                    continue;
                };
                let n = Notification {
                    pid,
                    channel: channel.clone(),
                    payload: payload.clone(),
                };
                if l.mailbox.push(n) {
                    woken.insert(*id, Arc::clone(&l.mailbox));
                } else {
                    let lost = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                    tracing::warn!(
                        channel = %channel,
                        listener_backlog = l.mailbox.len(),
                        lost,
                        "a listener's notification mailbox is full: notification dropped"
                    );
                }
            }
        }
        drop(s);
        for m in woken.values() {
            m.wake.notify_one();
        }
    }
}

fn queue_full() -> SqlError {
    SqlError::ProgramLimitExceeded("too many notifications in the NOTIFY queue".into())
}

/// A channel name as an identifier: truncated to 63 bytes, as PostgreSQL's
/// parser truncates identifiers.
pub fn channel_identifier(name: &str) -> String {
    if name.len() <= CHANNEL_LIMIT {
        return name.to_string();
    }
    let mut end = CHANNEL_LIMIT;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_string()
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ListenOp {
    Listen(String),
    Unlisten(String),
    UnlistenAll,
}

/// What a savepoint remembers: how much was queued when it was taken.
struct Mark {
    name: String,
    notes: usize,
    ops: usize,
}

/// A session's queued, uncommitted NOTIFYs and LISTEN/UNLISTENs.
#[derive(Default)]
pub struct Pending {
    notes: Vec<(String, String)>,
    seen: HashSet<(String, String)>,
    bytes: usize,
    ops: Vec<ListenOp>,
    marks: Vec<Mark>,
}

impl Pending {
    /// Queues a notification, checked as PostgreSQL's `Async_Notify` does.
    pub fn notify(&mut self, channel: &str, payload: &str) -> Result<()> {
        if channel.is_empty() {
            return Err(SqlError::InvalidParameter(
                "channel name cannot be empty".into(),
            ));
        }
        if channel.len() > CHANNEL_LIMIT {
            return Err(SqlError::InvalidParameter("channel name too long".into()));
        }
        if payload.len() >= PAYLOAD_LIMIT {
            return Err(SqlError::InvalidParameter("payload string too long".into()));
        }
        let key = (channel.to_string(), payload.to_string());
        if self.seen.contains(&key) {
            return Ok(());
        }
        let size = channel.len() + payload.len();
        if self.notes.len() >= MAILBOX_MESSAGES || self.bytes + size > MAILBOX_BYTES {
            return Err(queue_full());
        }
        self.bytes += size;
        self.seen.insert(key.clone());
        self.notes.push(key);
        Ok(())
    }

    fn truncate(&mut self, notes: usize, ops: usize) {
        self.notes.truncate(notes);
        self.ops.truncate(ops);
        self.seen = self.notes.iter().cloned().collect();
        self.bytes = self.notes.iter().map(|(c, p)| c.len() + p.len()).sum();
    }

    fn clear(&mut self) {
        *self = Pending::default();
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One session's side of LISTEN/NOTIFY.
pub struct SessionNotify {
    hub: Arc<NotificationHub>,
    id: u64,
    pid: i32,
    mailbox: Arc<Mailbox>,
    pending: Arc<Mutex<Pending>>,
}

impl Drop for SessionNotify {
    fn drop(&mut self) {
        self.hub.unlisten_all(self.id);
    }
}

impl SessionNotify {
    pub fn new(hub: &Arc<NotificationHub>, pid: i32) -> SessionNotify {
        SessionNotify {
            hub: Arc::clone(hub),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            pid,
            mailbox: Arc::default(),
            pending: Arc::default(),
        }
    }

    /// Where this session's notifications wait for its connection.
    pub fn mailbox(&self) -> &Arc<Mailbox> {
        &self.mailbox
    }

    pub fn notify(&self, channel: &str, payload: &str) -> Result<()> {
        self.pending.lock().notify(channel, payload)
    }

    pub fn listen(&self, channel: &str) {
        self.pending
            .lock()
            .ops
            .push(ListenOp::Listen(channel.to_string()));
    }

    /// `UNLISTEN channel`, or `UNLISTEN *` (`None`).
    pub fn unlisten(&self, channel: Option<&str>) {
        let op = match channel {
            Some(c) => ListenOp::Unlisten(c.to_string()),
            None => ListenOp::UnlistenAll,
        };
        self.pending.lock().ops.push(op);
    }

    /// DISCARD ALL: `UNLISTEN *` at once (it runs outside a block).
    pub fn unlisten_now(&self) {
        self.hub.unlisten_all(self.id);
    }

    pub fn savepoint(&self, name: &str) {
        let mut p = self.pending.lock();
        let mark = Mark {
            name: name.to_string(),
            notes: p.notes.len(),
            ops: p.ops.len(),
        };
        p.marks.push(mark);
    }

    /// ROLLBACK TO SAVEPOINT: what was queued after it is dropped (it
    /// stays, as the transaction's savepoint does).
    pub fn rollback_to(&self, name: &str) {
        let mut p = self.pending.lock();
        let Some(pos) = p.marks.iter().rposition(|m| m.name == name) else {
            return;
        };
        p.marks.truncate(pos + 1);
        let (notes, ops) = (p.marks[pos].notes, p.marks[pos].ops);
        p.truncate(notes, ops);
    }

    pub fn release(&self, name: &str) {
        let mut p = self.pending.lock();
        if let Some(pos) = p.marks.iter().rposition(|m| m.name == name) {
            p.marks.truncate(pos);
        }
    }

    /// Before the transaction commits: 54000 if its notifications cannot
    /// be delivered (a listener's mailbox is full).
    pub fn pre_commit(&self) -> Result<()> {
        let notes = self.pending.lock().notes.clone();
        self.hub.check_room(&notes)
    }

    /// The transaction committed: its LISTEN/UNLISTENs take effect, then
    /// its notifications are delivered (to this session too, if it
    /// listens, as in PostgreSQL).
    pub fn commit(&self) {
        let (ops, notes) = {
            let mut p = self.pending.lock();
            let ops = std::mem::take(&mut p.ops);
            let notes = std::mem::take(&mut p.notes);
            p.clear();
            (ops, notes)
        };
        for op in ops {
            match op {
                ListenOp::Listen(c) => self.hub.listen(self.id, &self.mailbox, &c),
                ListenOp::Unlisten(c) => self.hub.unlisten(self.id, &c),
                ListenOp::UnlistenAll => self.hub.unlisten_all(self.id),
            }
        }
        self.hub.deliver(self.pid, notes);
    }

    /// The transaction rolled back: nothing it queued happens.
    pub fn abort(&self) {
        self.pending.lock().clear();
    }

    /// Whether anything waits for a commit.
    pub fn has_pending(&self) -> bool {
        let p = self.pending.lock();
        !p.notes.is_empty() || !p.ops.is_empty()
    }

    /// `pg_notify(text, text)` and `pg_listening_channels()` of this session.
    pub fn functions(&self) -> (ScalarUDF, ScalarUDF, Arc<dyn TableFunctionImpl>) {
        let notify = ScalarUDF::new_from_impl(NotifyFunction {
            signature: Signature::string(2, Volatility::Volatile),
            pending: Arc::clone(&self.pending),
            id: self.id,
        });
        let refused = ScalarUDF::new_from_impl(ListeningChannelsScalar {
            signature: Signature::nullary(Volatility::Volatile),
            id: self.id,
        });
        let table = Arc::new(ListeningChannels {
            hub: Arc::clone(&self.hub),
            id: self.id,
        });
        (notify, refused, table)
    }
}

/// `pg_notify(channel, payload)`: NOTIFY as a function (NULLs read as
/// empty strings, as in PostgreSQL).
#[derive(Debug)]
struct NotifyFunction {
    signature: Signature,
    pending: Arc<Mutex<Pending>>,
    id: u64,
}

impl PartialEq for NotifyFunction {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for NotifyFunction {}
impl std::hash::Hash for NotifyFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pending({} notifications)", self.notes.len())
    }
}

impl ScalarUDFImpl for NotifyFunction {
    fn name(&self) -> &str {
        "pg_notify"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// PostgreSQL's `void`, whose text is the empty string.
    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        for row in 0..args.number_rows {
            let channel = text_at(&args.args, 0, row)?.unwrap_or_default();
            let payload = text_at(&args.args, 1, row)?.unwrap_or_default();
            self.pending
                .lock()
                .notify(&channel, &payload)
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
        }
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(
            Some(String::new()),
        )))
    }
}

/// `pg_listening_channels()` where a set-returning function cannot stand
/// (in a select list beside a FROM): refused rather than approximated.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ListeningChannelsScalar {
    signature: Signature,
    id: u64,
}

impl ScalarUDFImpl for ListeningChannelsScalar {
    fn name(&self) -> &str {
        "pg_listening_channels"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Err(DataFusionError::External(Box::new(
            SqlError::FeatureNotSupported(
                "pg_listening_channels() is supported in FROM or alone in a select list \
                 without FROM (SELECT pg_listening_channels()), not beside other tables"
                    .into(),
            ),
        )))
    }
}

/// `SELECT * FROM pg_listening_channels()`: the channels this session
/// listens on (committed LISTENs), one row each.
#[derive(Debug)]
struct ListeningChannels {
    hub: Arc<NotificationHub>,
    id: u64,
}

impl std::fmt::Debug for NotificationHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (sessions, channels) = self.registrations();
        write!(
            f,
            "NotificationHub({sessions} sessions, {channels} channels)"
        )
    }
}

/// The column name `pg_listening_channels()` answers under.
pub const LISTENING_CHANNELS: &str = "pg_listening_channels";

impl TableFunctionImpl for ListeningChannels {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        if !args.exprs().is_empty() {
            return Err(DataFusionError::Plan(
                "function pg_listening_channels takes no arguments".into(),
            ));
        }
        Ok(Arc::new(ChannelsTable {
            hub: Arc::clone(&self.hub),
            id: self.id,
            schema: Arc::new(Schema::new(vec![Field::new(
                LISTENING_CHANNELS,
                DataType::Utf8,
                false,
            )])),
        }))
    }
}

/// The rows of `pg_listening_channels()`, read from the hub when the query
/// runs (a prepared statement's plan outlives its Parse).
#[derive(Debug)]
struct ChannelsTable {
    hub: Arc<NotificationHub>,
    id: u64,
    schema: SchemaRef,
}

#[async_trait::async_trait]
impl TableProvider for ChannelsTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let channels = StringArray::from(self.hub.channels(self.id));
        let batch = RecordBatch::try_new(
            Arc::clone(&self.schema),
            vec![Arc::new(channels) as ArrayRef],
        )?;
        MemTable::try_new(Arc::clone(&self.schema), vec![vec![batch]])?
            .scan(state, projection, filters, limit)
            .await
    }
}

/// `SELECT pg_listening_channels() [AS name]` with no FROM (the usual way
/// to call it, a set-returning function in the select list) becomes
/// `SELECT pg_listening_channels [AS name] FROM pg_listening_channels()`.
pub fn rewrite_listening_channels(stmt: &mut datafusion::sql::sqlparser::ast::Statement) {
    use datafusion::sql::sqlparser::ast::{
        Expr, FunctionArguments, Ident, SelectItem, SetExpr, Statement,
    };
    let Statement::Query(q) = stmt else { return };
    let SetExpr::Select(sel) = q.body.as_mut() else {
        return;
    };
    if !sel.from.is_empty() || sel.projection.len() != 1 {
        return;
    }
    let expr = match &mut sel.projection[0] {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
        _ => return,
    };
    let Expr::Function(f) = expr else { return };
    let name = f.name.to_string().to_ascii_lowercase();
    if name != LISTENING_CHANNELS && name != "pg_catalog.pg_listening_channels" {
        return;
    }
    let no_args = match &f.args {
        FunctionArguments::None => true,
        FunctionArguments::List(l) => l.args.is_empty(),
        FunctionArguments::Subquery(_) => false,
    };
    if !no_args || f.over.is_some() || f.filter.is_some() {
        return;
    }
    let Ok(Statement::Query(template)) = crate::rewrite::parse_statement(
        "SELECT pg_listening_channels FROM pg_listening_channels()",
    ) else {
        return;
    };
    let SetExpr::Select(t) = *template.body else {
        return;
    };
    *expr = Expr::Identifier(Ident::new(LISTENING_CHANNELS));
    sel.from = t.from;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(hub: &Arc<NotificationHub>, pid: i32, listen: &[&str]) -> SessionNotify {
        let s = SessionNotify::new(hub, pid);
        for c in listen {
            s.listen(c);
        }
        s.commit();
        s
    }

    #[test]
    fn committed_notifications_reach_listeners_once_in_order() {
        let hub = Arc::new(NotificationHub::default());
        let a = session(&hub, 1, &["x"]);
        let b = session(&hub, 2, &[]);
        b.notify("x", "1").unwrap();
        b.notify("x", "2").unwrap();
        b.notify("x", "1").unwrap();
        b.notify("y", "1").unwrap();
        assert!(a.mailbox().take().is_empty(), "nothing before the commit");
        b.commit();
        let got = a.mailbox().take();
        assert_eq!(
            got.iter()
                .map(|n| (n.pid, n.payload.as_str()))
                .collect::<Vec<_>>(),
            vec![(2, "1"), (2, "2")]
        );
        assert!(b.mailbox().take().is_empty(), "b does not listen");
    }

    #[test]
    fn rollback_and_savepoints_drop_what_they_cover() {
        let hub = Arc::new(NotificationHub::default());
        let a = session(&hub, 1, &["x"]);
        let b = session(&hub, 2, &[]);
        b.notify("x", "gone").unwrap();
        b.abort();
        b.notify("x", "kept").unwrap();
        b.savepoint("s");
        b.notify("x", "undone").unwrap();
        b.listen("x");
        b.rollback_to("s");
        b.notify("x", "after").unwrap();
        b.commit();
        let got: Vec<String> = a.mailbox().take().into_iter().map(|n| n.payload).collect();
        assert_eq!(got, vec!["kept", "after"]);
        assert!(hub.channels(b.id).is_empty(), "the LISTEN was rolled back");
    }

    #[test]
    fn listen_applies_at_commit_and_session_end_cleans_up() {
        let hub = Arc::new(NotificationHub::default());
        let a = SessionNotify::new(&hub, 1);
        a.listen("x");
        a.listen("y");
        assert!(hub.channels(a.id).is_empty());
        a.notify("x", "self").unwrap();
        a.commit();
        assert_eq!(hub.channels(a.id), vec!["x", "y"]);
        assert_eq!(a.mailbox().take().len(), 1, "a listener hears itself");
        a.unlisten(Some("x"));
        a.commit();
        assert_eq!(hub.channels(a.id), vec!["y"]);
        drop(a);
        assert_eq!(hub.registrations(), (0, 0));
    }

    #[test]
    fn limits() {
        let hub = Arc::new(NotificationHub::default());
        let a = session(&hub, 1, &["x"]);
        let b = session(&hub, 2, &[]);
        assert!(b.notify("", "p").is_err());
        assert!(b.notify("x", &"p".repeat(PAYLOAD_LIMIT)).is_err());
        b.notify("x", &"p".repeat(PAYLOAD_LIMIT - 1)).unwrap();
        b.abort();
        for i in 0..MAILBOX_MESSAGES {
            b.notify("x", &i.to_string()).unwrap();
        }
        assert_eq!(
            b.notify("x", "one more").map_err(|e| e.sqlstate()),
            Err("54000")
        );
        b.pre_commit().unwrap();
        b.commit();
        b.notify("x", "full").unwrap();
        assert_eq!(b.pre_commit().map_err(|e| e.sqlstate()), Err("54000"));
        b.abort();
        assert_eq!(a.mailbox().take().len(), MAILBOX_MESSAGES);
        assert_eq!(channel_identifier(&"é".repeat(40)).len(), 62);
    }
}
