//! LISTEN, UNLISTEN and NOTIFY statements, and the moments a session's
//! queued notifications reach the hub (`crate::notify`): its transaction's
//! commit, or, for `pg_notify` calls made while an autocommit query's rows
//! streamed, the end of the query cycle (`Session::flush_notifications`).

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{Ident, Statement};

use super::{Output, Session};
use crate::error::{Result, SqlError};
use crate::notify::{channel_identifier, Mailbox};
use crate::rewrite::ident_name;

/// A channel is an identifier; sqlparser also reads a string literal
/// there (`LISTEN 'x'`), which PostgreSQL's grammar refuses (42601).
fn channel_name(channel: &Ident) -> Result<String> {
    if channel.quote_style == Some('\'') {
        return Err(SqlError::Syntax(format!(
            "syntax error at or near \"'{}'\"",
            channel.value
        )));
    }
    Ok(channel_identifier(&ident_name(channel)))
}

impl Session {
    /// Queues the statement's action in the open transaction (the block's,
    /// or the statement's own, which commits when it returns).
    pub(super) fn listen_notify(&mut self, stmt: Statement) -> Result<Output> {
        match stmt {
            Statement::LISTEN { channel } => {
                self.notify.listen(&channel_name(&channel)?);
                Ok(Output::Command("LISTEN".into()))
            }
            Statement::UNLISTEN { channel } => {
                // sqlparser reads `*` as an unquoted identifier "*"
                if channel.quote_style.is_none() && channel.value == "*" {
                    self.notify.unlisten(None);
                } else {
                    self.notify.unlisten(Some(&channel_name(&channel)?));
                }
                Ok(Output::Command("UNLISTEN".into()))
            }
            Statement::NOTIFY { channel, payload } => {
                self.notify
                    .notify(&channel_name(&channel)?, payload.as_deref().unwrap_or(""))?;
                Ok(Output::Command("NOTIFY".into()))
            }
            _ => Err(SqlError::Internal("not LISTEN/UNLISTEN/NOTIFY".into())),
        }
    }

    /// Where this session's notifications wait for its connection.
    pub fn notification_mailbox(&self) -> Arc<Mailbox> {
        Arc::clone(self.notify.mailbox())
    }

    /// The end of a query cycle (before ReadyForQuery): outside a block,
    /// what `pg_notify` queued while rows streamed after the statement's
    /// own commit is delivered now. One that no longer fits a listener's
    /// mailbox (54000) is dropped with a warning: the statement that sent
    /// it has already completed.
    pub fn flush_notifications(&mut self) {
        if self.txn.is_some() || !self.notify.has_pending() {
            return;
        }
        match self.notify.pre_commit() {
            Ok(()) => self.notify.commit(),
            Err(e) => {
                tracing::warn!(error = %e, "notifications sent while rows streamed are dropped");
                self.notify.abort();
            }
        }
    }
}
