//! `idle_in_transaction_session_timeout`: a connection that waits for its
//! client inside an open transaction block (ReadyForQuery status T or E)
//! longer than its session's timeout is told `FATAL 25P03` and closed; its
//! transaction rolls back and its row locks are released, as in
//! PostgreSQL.
//!
//! Each accepted connection gets an [`IdleWatch`], registered under the
//! peer address so that the protocol handlers (which only see the client)
//! can find it. The handlers arm the watch when they send a ReadyForQuery
//! with status T or E and disarm it whenever the client sends anything;
//! the connection task races the protocol loop against
//! [`IdleWatch::expired`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// One connection's idle-in-transaction deadline.
#[derive(Default)]
pub struct IdleWatch {
    deadline: parking_lot::Mutex<Option<Instant>>,
    changed: Notify,
    /// The connection runs over TLS: bytes written straight to its socket
    /// would break the TLS stream, so it is closed without a message.
    encrypted: std::sync::atomic::AtomicBool,
    /// `pg_terminate_backend` asked the connection to end.
    terminate: Notify,
}

impl IdleWatch {
    /// The connection negotiated TLS.
    pub fn mark_encrypted(&self) {
        self.encrypted
            .store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn is_encrypted(&self) -> bool {
        self.encrypted.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The connection now waits for its client inside a block.
    pub fn arm(&self, timeout: Duration) {
        *self.deadline.lock() = Some(Instant::now() + timeout);
        self.changed.notify_one();
    }

    /// Ends the connection (`pg_terminate_backend`): the connection task
    /// wakes from [`IdleWatch::terminated`], even if it is asked before it
    /// waits.
    pub fn terminate(&self) {
        self.terminate.notify_one();
    }

    /// Resolves once [`IdleWatch::terminate`] was called.
    pub async fn terminated(&self) {
        self.terminate.notified().await
    }

    /// The client sent something: no longer idle.
    pub fn disarm(&self) {
        let mut d = self.deadline.lock();
        if d.is_some() {
            *d = None;
            self.changed.notify_one();
        }
    }

    /// Resolves when an armed deadline passes without being disarmed.
    pub async fn expired(&self) {
        loop {
            let deadline = *self.deadline.lock();
            match deadline {
                None => self.changed.notified().await,
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {
                            if self.deadline.lock().is_some_and(|d| d <= Instant::now()) {
                                return;
                            }
                        }
                        _ = self.changed.notified() => {}
                    }
                }
            }
        }
    }
}

/// The watches of the live connections, by peer address.
#[derive(Default)]
pub struct IdleWatches(parking_lot::Mutex<HashMap<SocketAddr, Arc<IdleWatch>>>);

impl IdleWatches {
    /// A watch for a new connection, removed again when the guard drops.
    pub fn register(self: &Arc<Self>, peer: SocketAddr) -> (Arc<IdleWatch>, WatchGuard) {
        let w = Arc::new(IdleWatch::default());
        self.0.lock().insert(peer, Arc::clone(&w));
        (
            w,
            WatchGuard {
                peer,
                registry: Arc::clone(self),
            },
        )
    }

    pub fn get(&self, peer: &SocketAddr) -> Option<Arc<IdleWatch>> {
        self.0.lock().get(peer).cloned()
    }
}

pub struct WatchGuard {
    peer: SocketAddr,
    registry: Arc<IdleWatches>,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.registry.0.lock().remove(&self.peer);
    }
}

/// How often a connection checks that its client is still there.
pub const PEER_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Resolves once the client has closed the connection (checked every
/// [`PEER_CHECK_INTERVAL`]): the protocol task may be busy running a
/// statement and not reading, and a statement whose client is gone must
/// stop, not run to its end.
pub async fn peer_gone(fd: &Fd) {
    let mut tick = tokio::time::interval(PEER_CHECK_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if fd.peer_closed() {
            return;
        }
    }
}

/// A second handle on a connection's socket (a `dup` of its descriptor,
/// through std's safe API), to tell the client why the connection ends and
/// to end it, independently of the protocol task that owns the socket.
/// Costs one descriptor per connection.
pub struct Fd(Option<std::net::TcpStream>);

impl Fd {
    pub fn of(sock: &tokio::net::TcpStream) -> Fd {
        use std::os::fd::AsFd;
        Fd(sock
            .as_fd()
            .try_clone_to_owned()
            .ok()
            .map(std::net::TcpStream::from)
            // never block a runtime thread in `peer_closed` (the flag is
            // the socket's, which tokio set already)
            .filter(|s| s.set_nonblocking(true).is_ok()))
    }

    /// Whether the client closed the connection (or it broke), without
    /// reading anything from it: a peek that sees end-of-stream or an
    /// error. Bytes waiting to be read mean the client is still there.
    /// Over TLS a client's close_notify alert is such bytes, so there only
    /// a connection closed without it (or reset) is seen.
    pub fn peer_closed(&self) -> bool {
        let Some(s) = &self.0 else {
            return false;
        };
        let mut byte = [0u8; 1];
        match s.peek(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ),
        }
    }

    /// Shuts the connection down without a message (a TLS connection).
    pub fn shut_down(&self) {
        if let Some(s) = &self.0 {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Sends `FATAL <code>: <message>` and shuts the connection down (best
    /// effort: the client may be gone already). Plaintext connections only.
    pub fn send_fatal(&self, code: &str, message: &str) {
        use std::io::Write;
        if let Some(s) = &self.0 {
            let mut w: &std::net::TcpStream = s;
            let _ = w.write_all(&fatal_message(code, message));
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// The ErrorResponse PostgreSQL sends before it closes a connection.
pub fn fatal_message(code: &str, message: &str) -> Vec<u8> {
    let mut body = Vec::new();
    for (field, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', code),
        (b'M', message),
    ] {
        body.push(field);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut msg = vec![b'E'];
    // the body is a few dozen bytes: the length always fits
    msg.extend_from_slice(&(u32::try_from(body.len() + 4).unwrap_or(u32::MAX)).to_be_bytes());
    msg.extend_from_slice(&body);
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fires_only_when_armed_and_not_disarmed() {
        let w = Arc::new(IdleWatch::default());
        let fired = {
            let w = Arc::clone(&w);
            tokio::spawn(async move { w.expired().await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!fired.is_finished(), "never armed");
        w.arm(Duration::from_millis(300));
        tokio::time::sleep(Duration::from_millis(50)).await;
        w.disarm();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!fired.is_finished(), "disarmed in time");
        w.arm(Duration::from_millis(100));
        tokio::time::timeout(Duration::from_secs(5), fired)
            .await
            .expect("expired after its deadline")
            .expect("watch task");
    }
}
