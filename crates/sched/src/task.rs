//! Execution contexts: a future, the group it is charged to, and the state
//! machine that makes sure it is queued at most once.
//!
//! State (one atomic byte, like tokio's task header):
//! * `IDLE`: waiting for a wake-up; neither queued nor running;
//! * `QUEUED`: in its group's run queue exactly once;
//! * `RUNNING`: a worker is polling it;
//! * `NOTIFIED`: woken while running: the worker re-queues it after the poll;
//! * `DONE`: finished, panicked or aborted; its future has been dropped.
//!
//! Only the worker that moved a context to `RUNNING` touches its future, and
//! it drops the future outside the scheduler's lock (a future's destructor
//! may wake other contexts, which takes that lock).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures::channel::oneshot;
use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;

use crate::clock;
use crate::group::GroupInner;

const IDLE: u8 = 0;
const QUEUED: u8 = 1;
const RUNNING: u8 = 2;
const NOTIFIED: u8 = 3;
const DONE: u8 = 4;

pub(crate) struct Task {
    state: AtomicU8,
    future: Mutex<Option<BoxFuture<'static, ()>>>,
    /// The group charged and queued into; a context may move to another
    /// group for a while ([`crate::switch_context_group`]), only during
    /// one of its own polls.
    group: Mutex<Arc<GroupInner>>,
    /// The class counted in `contexts` (where it was spawned).
    home_class: Arc<crate::group::ClassStats>,
    cancelled: AtomicBool,
    panicked: AtomicBool,
    /// When it was last queued (`clock::wall_ns`), for wait-time metrics.
    pub(crate) queued_at: AtomicU64,
}

/// What a worker should do with a context after polling it.
pub(crate) enum AfterPoll {
    /// Finished or waiting for a wake-up: nothing.
    Nothing,
    /// Woken while it ran: queue it again.
    Requeue,
}

impl Task {
    pub(crate) fn spawn<F>(group: Arc<GroupInner>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let body = async move {
            // caught here, not in `run`, so the handle learns of the panic
            // before it sees the sender dropped
            let out = std::panic::AssertUnwindSafe(future).catch_unwind().await;
            let out = out.map_err(|panic| {
                tracing::error!(panic = panic_message(&panic), "execution context panicked");
                JoinError::Panicked
            });
            let _ = tx.send(out);
        }
        .boxed();
        group.class.contexts.fetch_add(1, Ordering::Relaxed);
        let task = Arc::new(Task {
            state: AtomicU8::new(QUEUED),
            future: Mutex::new(Some(body)),
            home_class: Arc::clone(&group.class),
            group: Mutex::new(group),
            cancelled: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            queued_at: AtomicU64::new(0),
        });
        task.group().shared.clone().enqueue(Arc::clone(&task));
        JoinHandle { rx, task }
    }

    /// Polls the future once on the calling worker. Returns the CPU time the
    /// poll used and what to do next.
    pub(crate) fn run(self: &Arc<Self>) -> (u64, AfterPoll) {
        self.state.store(RUNNING, Ordering::Release);
        let mut slot = self.future.lock();
        if self.cancelled.load(Ordering::Acquire) {
            let dropped = slot.take();
            drop(slot);
            self.finish();
            drop(dropped);
            return (0, AfterPoll::Nothing);
        }
        let Some(future) = slot.as_mut() else {
            drop(slot);
            self.finish();
            return (0, AfterPoll::Nothing);
        };
        let waker = Waker::from(Arc::clone(self));
        let mut cx = Context::from_waker(&waker);
        let cpu0 = clock::thread_cpu_ns();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            future.as_mut().poll(&mut cx)
        }));
        let cpu = clock::thread_cpu_ns().saturating_sub(cpu0);
        match result {
            Ok(Poll::Pending) => {
                drop(slot);
                match self.state.compare_exchange(
                    RUNNING,
                    IDLE,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => (cpu, AfterPoll::Nothing),
                    Err(_) => {
                        // NOTIFIED: woken during the poll
                        self.state.store(QUEUED, Ordering::Release);
                        (cpu, AfterPoll::Requeue)
                    }
                }
            }
            Ok(Poll::Ready(())) => {
                let done = slot.take();
                drop(slot);
                self.finish();
                drop(done);
                (cpu, AfterPoll::Nothing)
            }
            Err(panic) => {
                self.panicked.store(true, Ordering::Release);
                let done = slot.take();
                drop(slot);
                self.finish();
                drop(done);
                tracing::error!(
                    class = &*self.group().class_name,
                    panic = panic_message(&panic),
                    "execution context panicked"
                );
                (cpu, AfterPoll::Nothing)
            }
        }
    }

    /// The group the context is charged to now.
    pub(crate) fn group(&self) -> Arc<GroupInner> {
        Arc::clone(&self.group.lock())
    }

    /// Moves the context to `group`; returns the group it was in.
    pub(crate) fn set_group(&self, group: Arc<GroupInner>) -> Arc<GroupInner> {
        std::mem::replace(&mut *self.group.lock(), group)
    }

    fn finish(&self) {
        if self.state.swap(DONE, Ordering::AcqRel) != DONE {
            self.home_class.contexts.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn abort(self: &Arc<Self>) {
        self.cancelled.store(true, Ordering::Release);
        self.wake_by_ref();
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> &str {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "(not a string)"
    }
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut current = self.state.load(Ordering::Acquire);
        loop {
            let next = match current {
                IDLE => QUEUED,
                RUNNING => NOTIFIED,
                _ => return, // already queued or notified, or done
            };
            match self
                .state
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if next == QUEUED {
                        self.group().shared.clone().enqueue(Arc::clone(self));
                    }
                    return;
                }
                Err(actual) => current = actual,
            }
        }
    }
}

/// Why a context gave no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    #[error("the execution context was aborted")]
    Aborted,
    #[error("the execution context panicked")]
    Panicked,
}

/// The result of a context. Dropping the handle detaches the context (it
/// runs on); [`JoinHandle::abort_on_drop`] makes dropping stop it.
pub struct JoinHandle<T> {
    rx: oneshot::Receiver<Result<T, JoinError>>,
    task: Arc<Task>,
}

impl<T> JoinHandle<T> {
    /// Stops the context at its next scheduling point: its future is
    /// dropped without being polled again.
    pub fn abort(&self) {
        self.task.abort();
    }

    pub fn abort_on_drop(self) -> AbortOnDrop<T> {
        AbortOnDrop { handle: self }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.rx.poll_unpin(cx) {
            Poll::Ready(Ok(v)) => Poll::Ready(v),
            Poll::Ready(Err(_)) => {
                Poll::Ready(Err(if self.task.panicked.load(Ordering::Acquire) {
                    JoinError::Panicked
                } else {
                    JoinError::Aborted
                }))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A [`JoinHandle`] that aborts its context when dropped.
pub struct AbortOnDrop<T> {
    handle: JoinHandle<T>,
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.handle).poll(cx)
    }
}

/// Lets other runnable contexts go first: the calling context is queued
/// again behind them (by virtual runtime, like any wake-up).
pub async fn yield_now() {
    struct YieldNow(bool);
    impl Future for YieldNow {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                Poll::Ready(())
            } else {
                self.0 = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
    YieldNow(false).await
}
