//! A panic is a bug, never a client's fault, and must cost at most the one
//! statement that hit it: every statement of a connection runs under
//! `catch_unwind` (in `pg::with_session`; result streams under
//! [`guarded_stream`]), which turns an unwinding panic into
//! `SqlError::Internal` (SQLSTATE XX000) for that
//! client. The hook installed by [`install_hook`] logs each panic once,
//! with its location and a backtrace, through `tracing`.
//!
//! What a caught panic leaves behind (`Session::recover_from_interrupted_statement`): an
//! implicit transaction is rolled back; an explicit block is marked failed,
//! so its writes can only be rolled back, never committed half-applied.
//! Locks the statement took are released by their guards' `Drop` while
//! unwinding. The session and every other connection go on.

use std::any::Any;
use std::backtrace::Backtrace;
use std::panic::AssertUnwindSafe;

use eddy_sql::SqlError;
use futures::{Stream, StreamExt};

/// Replaces the default hook (a bare line on stderr) with a log record that
/// carries the thread, the location and a backtrace.
pub fn install_hook() {
    std::panic::set_hook(Box::new(|info| {
        if pgwire::messages::decoding() {
            // a client's malformed message, answered with 08P01 by the
            // decoder's caller (see docs/decisions/0001-patched-pgwire.md)
            tracing::debug!(
                "malformed protocol message: {}",
                payload_text(info.payload())
            );
            return;
        }
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_else(|| "unknown location".into());
        let thread = std::thread::current();
        let message = payload_text(info.payload());
        let backtrace = Backtrace::force_capture();
        tracing::error!(
            thread = thread.name().unwrap_or("unnamed"),
            %location,
            "panic: {message}\n{backtrace}"
        );
    }));
}

/// The text of a panic payload (`panic!("...")` gives `&str` or `String`).
pub fn payload_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".into()
    }
}

/// The error a caught panic is answered with.
pub fn internal(payload: Box<dyn Any + Send>) -> SqlError {
    SqlError::Internal(format!(
        "internal error (a bug in Eddy, logged by the server): {}",
        payload_text(payload.as_ref())
    ))
}

/// A stream that ends with one XX000 error where the inner stream panics
/// (the inner stream is not polled again after that).
pub fn guarded_stream<T, S>(inner: S) -> impl Stream<Item = Result<T, SqlError>> + Send
where
    S: Stream<Item = Result<T, SqlError>> + Send,
{
    AssertUnwindSafe(inner)
        .catch_unwind()
        .map(|item| item.unwrap_or_else(|payload| Err(internal(payload))))
}
