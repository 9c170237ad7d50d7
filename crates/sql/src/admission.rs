//! Admission of analytical statements under overload (issue 16, item 4).
//!
//! Every statement DataFusion executes (queries, and the source queries of
//! DML) takes a place among at most `max_running` before its plan produces
//! a row; fixed plans (point lookups, single-row writes) never wait here.
//! A statement beyond the limit waits in a queue of at most `max_queued`
//! (first come, first served: tokio's semaphore is fair) and beyond that
//! is refused at once with 53000, so overload turns into waiting analytics
//! and a clear error, not into serving starved of CPU and memory.
//!
//! Invariants:
//! * the place is taken inside the statement's output stream, before its
//!   first batch is pulled, and held until the stream is dropped (end,
//!   cancel, `statement_timeout`, disconnect, a portal closed early), so a
//!   waiting statement can be cancelled like a running one;
//! * the queue bound is checked when the statement starts (synchronously,
//!   so the client gets 53000 instead of a result that fails later);
//! * without a limit (the default) nothing is counted and nothing waits.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Result, SqlError};

/// The admission gate of a database.
pub struct Admission {
    places: Arc<Semaphore>,
    max_running: usize,
    max_queued: usize,
    queued: AtomicUsize,
    admitted: AtomicU64,
    refused: AtomicU64,
    wait_ns: AtomicU64,
}

/// What `/metrics` shows of the gate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdmissionStats {
    pub max_running: usize,
    pub running: usize,
    pub queued: usize,
    pub admitted: u64,
    pub refused: u64,
    pub wait_ns: u64,
}

impl Admission {
    /// A gate for `max_running` statements at once and `max_queued`
    /// waiting (both at least 1).
    pub fn new(max_running: usize, max_queued: usize) -> Admission {
        let max_running = max_running.clamp(1, Semaphore::MAX_PERMITS);
        Admission {
            places: Arc::new(Semaphore::new(max_running)),
            max_running,
            max_queued: max_queued.max(1),
            queued: AtomicUsize::new(0),
            admitted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
        }
    }

    pub fn stats(&self) -> AdmissionStats {
        AdmissionStats {
            max_running: self.max_running,
            running: self
                .max_running
                .saturating_sub(self.places.available_permits()),
            queued: self.queued.load(Ordering::Acquire),
            admitted: self.admitted.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            wait_ns: self.wait_ns.load(Ordering::Relaxed),
        }
    }

    /// Wraps a statement's output: it waits for a place before its first
    /// batch (see the module doc). Fails at once with 53000 when every
    /// place is taken and the queue is full.
    pub fn admit(
        self: &Arc<Admission>,
        stream: SendableRecordBatchStream,
    ) -> Result<SendableRecordBatchStream> {
        let ticket = match Arc::clone(&self.places).try_acquire_owned() {
            Ok(permit) => {
                self.admitted.fetch_add(1, Ordering::Relaxed);
                Ticket::Admitted(permit)
            }
            Err(_) => {
                let queued = self.queued.fetch_add(1, Ordering::AcqRel);
                if queued >= self.max_queued {
                    self.queued.fetch_sub(1, Ordering::AcqRel);
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    return Err(SqlError::TooManyStatements(format!(
                        "{} analytical statements are running and {} waiting, the most this \
                         server admits (scheduler.max_running_queries, \
                         scheduler.max_queued_queries); try again later",
                        self.max_running, self.max_queued
                    )));
                }
                Ticket::Queued(Queued {
                    gate: Arc::clone(self),
                    since: Instant::now(),
                })
            }
        };
        let schema = stream.schema();
        let out = futures::stream::unfold(State::Waiting(ticket, stream), |state| async move {
            match state {
                State::Waiting(ticket, mut stream) => {
                    let permit = ticket.place().await?;
                    let batch = stream.next().await?;
                    Some((batch, State::Running(permit, stream)))
                }
                State::Running(permit, mut stream) => {
                    let batch = stream.next().await?;
                    Some((batch, State::Running(permit, stream)))
                }
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, out)))
    }
}

enum State {
    Waiting(Ticket, SendableRecordBatchStream),
    Running(OwnedSemaphorePermit, SendableRecordBatchStream),
}

enum Ticket {
    Admitted(OwnedSemaphorePermit),
    Queued(Queued),
}

/// A place in the queue; leaving it (admitted or dropped) frees it.
struct Queued {
    gate: Arc<Admission>,
    since: Instant,
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.gate.queued.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Ticket {
    /// The place, once free (`None` only if the gate was closed, which it
    /// never is).
    async fn place(self) -> Option<OwnedSemaphorePermit> {
        match self {
            Ticket::Admitted(p) => Some(p),
            Ticket::Queued(q) => {
                let permit = Arc::clone(&q.gate.places).acquire_owned().await.ok()?;
                let waited = u64::try_from(q.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
                q.gate.wait_ns.fetch_add(waited, Ordering::Relaxed);
                q.gate.admitted.fetch_add(1, Ordering::Relaxed);
                Some(permit)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int32Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;

    fn one_batch() -> SendableRecordBatchStream {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, false)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int32Array::from(vec![1]))],
        )
        .map_err(datafusion::error::DataFusionError::from);
        Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::iter(vec![batch]),
        ))
    }

    #[tokio::test]
    async fn places_queue_and_refusal() {
        let gate = Arc::new(Admission::new(1, 1));
        let mut first = gate.admit(one_batch()).expect("first runs");
        assert!(first.next().await.is_some());
        assert_eq!(gate.stats().running, 1);
        let mut second = gate.admit(one_batch()).expect("second queues");
        assert_eq!(gate.stats().queued, 1);
        let third = gate.admit(one_batch());
        assert!(
            matches!(third, Err(SqlError::TooManyStatements(_))),
            "the queue is full"
        );
        // the second waits while the first holds its place
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), second.next()).await;
        assert!(waited.is_err(), "admitted while the place was taken");
        drop(first);
        assert!(
            second.next().await.is_some(),
            "admitted once the place is free"
        );
        assert_eq!(gate.stats().queued, 0);
        drop(second);
        let s = gate.stats();
        assert_eq!((s.running, s.admitted, s.refused), (0, 2, 1));
        assert!(s.wait_ns > 0);
    }

    #[tokio::test]
    async fn a_dropped_waiter_leaves_the_queue() {
        let gate = Arc::new(Admission::new(1, 4));
        let mut first = gate.admit(one_batch()).expect("runs");
        assert!(first.next().await.is_some());
        let waiting = gate.admit(one_batch()).expect("queues");
        assert_eq!(gate.stats().queued, 1);
        drop(waiting);
        assert_eq!(gate.stats().queued, 0);
    }
}
