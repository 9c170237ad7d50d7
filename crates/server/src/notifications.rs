//! Delivery of LISTEN/NOTIFY notifications (`eddy_sql::notify`) to the
//! client as NotificationResponse ('A': the notifier's process id, the
//! channel, the payload).
//!
//! Two moments, as in PostgreSQL, both only when no transaction block is
//! open (a session inside a block gets its notifications when it ends):
//! * just before a ReadyForQuery that reports Idle ([`before_ready`],
//!   called by `crate::txn_status`): what arrived during the cycle,
//!   including the session's own NOTIFYs when it listens;
//! * while the connection waits for its client after such a
//!   ReadyForQuery: the protocol loop waits on the socket and on the
//!   session's mailbox ([`ConnectionNotifications`], pgwire's
//!   `IdleMessages`, see `vendor/pgwire/EDDY-PATCH.md`), so a listener that
//!   sends nothing still receives them (psycopg's `notifies()`, asyncpg's
//!   `add_listener`).

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::{Sink, SinkExt};
use pgwire::api::{ClientInfo, IdleMessages};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::response::{NotificationResponse, TransactionStatus};
use pgwire::messages::PgWireBackendMessage;

use eddy_sql::notify::Mailbox;

use crate::pg::{slot, Backend};

/// A connection's view of its session's mailbox.
pub struct ConnectionNotifications {
    mailbox: Arc<Mailbox>,
    /// Set by a ReadyForQuery reporting Idle, cleared by the client's next
    /// message: only then may the protocol loop send on its own.
    idle: AtomicBool,
}

impl ConnectionNotifications {
    fn messages(&self) -> Vec<PgWireBackendMessage> {
        self.mailbox
            .take()
            .into_iter()
            .map(|n| {
                PgWireBackendMessage::NotificationResponse(NotificationResponse::new(
                    n.pid, n.channel, n.payload,
                ))
            })
            .collect()
    }
}

impl IdleMessages for ConnectionNotifications {
    fn wait(&self) -> futures::future::BoxFuture<'static, ()> {
        let wake = self.mailbox.waker();
        Box::pin(async move { wake.notified().await })
    }

    fn take(&self) -> Vec<PgWireBackendMessage> {
        if self.idle.load(Ordering::SeqCst) {
            self.messages()
        } else {
            Vec::new()
        }
    }

    fn client_message(&self) {
        self.idle.store(false, Ordering::SeqCst);
    }
}

/// Attaches a new session's mailbox to its connection.
pub fn register<C: ClientInfo>(client: &C, mailbox: Arc<Mailbox>) {
    let n = Arc::new(ConnectionNotifications {
        mailbox,
        idle: AtomicBool::new(false),
    });
    let idle: Arc<dyn IdleMessages> = Arc::clone(&n) as Arc<dyn IdleMessages>;
    client.session_extensions().insert(n);
    client.session_extensions().insert(idle);
}

/// Just before a ReadyForQuery with `status`: notifications `pg_notify`
/// queued while rows streamed are delivered (outside a block), then, when
/// the status is Idle, what waits in this session's mailbox is sent and
/// the connection may send more while it waits.
pub async fn before_ready<C>(
    client: &mut C,
    backend: &Backend,
    status: TransactionStatus,
) -> PgWireResult<()>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let Some(n) = client
        .session_extensions()
        .get::<Arc<ConnectionNotifications>>()
    else {
        return Ok(());
    };
    {
        let s = slot(client, backend);
        let mut guard = s.session.lock().await;
        if let Some(sess) = guard.as_mut() {
            sess.flush_notifications();
        }
    }
    if status != TransactionStatus::Idle {
        n.idle.store(false, Ordering::SeqCst);
        return Ok(());
    }
    for m in n.messages() {
        client.feed(m).await?;
    }
    n.idle.store(true, Ordering::SeqCst);
    Ok(())
}

/// pgwire itself answers with ReadyForQuery (`status`) after an error the
/// handlers returned: the connection may deliver while it waits.
pub fn ready_after_error<C: ClientInfo>(client: &C, status: TransactionStatus) {
    if let Some(n) = client
        .session_extensions()
        .get::<Arc<ConnectionNotifications>>()
    {
        n.idle
            .store(status == TransactionStatus::Idle, Ordering::SeqCst);
    }
}
