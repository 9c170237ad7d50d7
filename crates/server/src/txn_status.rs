//! The transaction status byte of ReadyForQuery (I, T, E), taken from the
//! session rather than inferred from the responses.
//!
//! pgwire infers the status from the kinds of responses a statement gave,
//! which cannot express PostgreSQL's rules (ROLLBACK TO SAVEPOINT leaves an
//! aborted block for an open one; a failed COMMIT ends the block). So the
//! simple-query cycle and Sync are overridden here to report
//! `Session::txn_status`, and an error the session did not see itself (a
//! row stream failing after the statement returned, a COPY failing, a
//! protocol error) is passed to `Session::note_error`, which aborts an open
//! block as PostgreSQL does.
//!
//! Invariant: every ReadyForQuery this server sends carries the session's
//! status after the statements before it, and is preceded by the
//! notifications delivered to the session when that status is Idle
//! (`crate::notifications`).

use std::fmt::Debug;
use std::sync::Arc;

use futures::future::{select, Either};
use futures::{Sink, SinkExt};
use pgwire::api::query::{
    send_execution_response, send_query_response, send_ready_for_query, SimpleQueryHandler,
};
use pgwire::api::results::Response;
use pgwire::api::store::PortalStore;
use pgwire::api::{
    copy, ClientInfo, ClientPortalStore, ConnectionHandle, PgWireConnectionState, DEFAULT_NAME,
};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::response::{EmptyQueryResponse, ReadyForQuery, TransactionStatus};
use pgwire::messages::simplequery::Query;
use pgwire::messages::PgWireBackendMessage;

use crate::pg::{slot, Backend};
use eddy_sql::session::TxnStatus;

/// The session's status (Idle before the session exists).
pub async fn session_status<C: ClientInfo>(client: &C, backend: &Backend) -> TransactionStatus {
    let s = slot(client, backend);
    let guard = s.session.lock().await;
    match guard.as_ref().map(|s| s.txn_status()) {
        Some(TxnStatus::InBlock) => TransactionStatus::Transaction,
        Some(TxnStatus::Failed) => TransactionStatus::Error,
        _ => TransactionStatus::Idle,
    }
}

/// Arms the connection's idle-in-transaction watch when it is about to wait
/// for its client inside a block (see `crate::idle`).
async fn arm_idle<C: ClientInfo>(client: &C, backend: &Backend, status: TransactionStatus) {
    if status == TransactionStatus::Idle {
        return;
    }
    let s = slot(client, backend);
    let Some(watch) = &s.idle else { return };
    let timeout = s
        .session
        .lock()
        .await
        .as_ref()
        .and_then(|sess| sess.idle_in_transaction_timeout());
    if let Some(t) = timeout {
        watch.arm(t);
    }
}

/// Before a ReadyForQuery with `status`: sends the changed reported
/// settings (`Session::take_parameter_changes`) and the warnings the
/// session's statements gave (`Session::take_notices`) and records the status and the
/// session's `application_name` for `pg_stat_activity` (before it is sent:
/// the client may ask another connection about this one as soon as it has
/// it). One lock of the session for both, on every statement's path.
async fn ready_state_and_notices<C>(
    client: &mut C,
    backend: &Backend,
    status: TransactionStatus,
) -> PgWireResult<()>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let s = crate::pg::new_or_existing_slot(client, backend);
    let (changes, notices) = {
        let mut guard = s.session.lock().await;
        let name = guard.as_ref().map_or("", |sess| sess.application_name());
        s.activity.session.set_ready_state(
            status != TransactionStatus::Idle,
            status == TransactionStatus::Error,
            name,
        );
        guard
            .as_mut()
            .map(|sess| (sess.take_parameter_changes(), sess.take_notices()))
            .unwrap_or_default()
    };
    for (name, value) in changes {
        client
            .feed(PgWireBackendMessage::ParameterStatus(
                pgwire::messages::startup::ParameterStatus::new(name.to_string(), value),
            ))
            .await?;
    }
    for n in notices {
        let mut info = pgwire::error::ErrorInfo::new(n.severity.into(), n.code.into(), n.message);
        info.detail = n.detail;
        client
            .feed(PgWireBackendMessage::NoticeResponse(info.into()))
            .await?;
    }
    Ok(())
}

/// An error reached the client outside the session's own statement path.
pub async fn note_error<C: ClientInfo>(client: &C, backend: &Backend) {
    let s = slot(client, backend);
    let mut guard = s.session.lock().await;
    if let Some(sess) = guard.as_mut() {
        sess.note_error();
    }
}

/// Sets the client's status from the session (before pgwire reports it).
pub async fn sync_status<C: ClientInfo>(client: &mut C, backend: &Backend) {
    let status = session_status(client, backend).await;
    client.set_transaction_status(status);
}

/// pgwire's simple-query cycle, with the status from the session.
pub async fn on_query<C>(backend: &Backend, client: &mut C, query: Query) -> PgWireResult<()>
where
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let r = run_query(backend, client, query).await;
    if r.is_err() {
        // pgwire answers the error and then ReadyForQuery with the
        // client's status turned to E where it was not I.
        note_error(client, backend).await;
        sync_status(client, backend).await;
        let status = client.transaction_status();
        crate::notifications::ready_after_error(client, status);
        // the warnings of the statements before the failing one (the
        // connection's own error, if sending fails, is `r`'s to report)
        let _ = ready_state_and_notices(client, backend, status).await;
    }
    r
}

async fn run_query<C>(backend: &Backend, client: &mut C, query: Query) -> PgWireResult<()>
where
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
        return Err(PgWireError::NotReadyForQuery);
    }
    client.set_state(PgWireConnectionState::QueryInProgress);
    let text = query.query;
    if text.chars().all(|c| c == ';' || c.is_whitespace()) {
        client
            .feed(PgWireBackendMessage::EmptyQueryResponse(
                EmptyQueryResponse::new(),
            ))
            .await?;
    } else {
        let handle = client.session_extensions().get::<Arc<ConnectionHandle>>();
        let resp = match handle {
            Some(h) => {
                let cancel = h.start_query().await;
                match select(Box::pin(backend.do_query(client, &text)), cancel).await {
                    Either::Left((r, _)) => r,
                    Either::Right(_) => Err(PgWireError::QueryCanceled),
                }
            }
            None => backend.do_query(client, &text).await,
        }?;
        for r in resp {
            match r {
                Response::EmptyQuery => {
                    client
                        .feed(PgWireBackendMessage::EmptyQueryResponse(
                            EmptyQueryResponse::new(),
                        ))
                        .await?;
                }
                Response::Query(results) => send_query_response(client, results, true).await?,
                Response::Execution(tag)
                | Response::TransactionStart(tag)
                | Response::TransactionEnd(tag) => send_execution_response(client, tag).await?,
                Response::Error(e) => {
                    client
                        .feed(PgWireBackendMessage::ErrorResponse((*e).into()))
                        .await?;
                }
                Response::CopyIn(result) => {
                    copy::send_copy_in_response(client, result).await?;
                    client.set_state(PgWireConnectionState::CopyInProgress(false));
                }
                Response::CopyOut(result) => copy::send_copy_out_response(client, result).await?,
                Response::CopyBoth(result) => {
                    copy::send_copy_both_response(client, result).await?;
                    client.set_state(PgWireConnectionState::CopyInProgress(false));
                }
            }
        }
    }
    // During COPY FROM STDIN, ReadyForQuery comes when the copy ends.
    sync_status(client, backend).await;
    if !matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
        client.set_state(PgWireConnectionState::ReadyForQuery);
        let status = client.transaction_status();
        crate::notifications::before_ready(client, backend, status).await?;
        ready_state_and_notices(client, backend, status).await?;
        send_ready_for_query(client, status).await?;
        arm_idle(client, backend, status).await;
    }
    Ok(())
}

/// pgwire's Sync, with the status from the session. An E that pgwire set
/// while the session is still in an open block is an error the session did
/// not see (a failed Bind, a row stream failing): it aborts the block.
pub async fn on_sync<C>(backend: &Backend, client: &mut C) -> PgWireResult<()>
where
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    if client.transaction_status() == TransactionStatus::Error
        && session_status(client, backend).await == TransactionStatus::Transaction
    {
        note_error(client, backend).await;
    }
    sync_status(client, backend).await;
    client.portal_store().rm_portal(DEFAULT_NAME);
    let status = client.transaction_status();
    crate::notifications::before_ready(client, backend, status).await?;
    ready_state_and_notices(client, backend, status).await?;
    client
        .send(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(
            status,
        )))
        .await?;
    client.flush().await?;
    arm_idle(client, backend, status).await;
    Ok(())
}
