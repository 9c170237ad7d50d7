//! Scheduling groups: who is charged for a poll, and with what share.
//!
//! A group's virtual runtime grows by `cpu_ns / share` for every poll of one
//! of its contexts; the scheduler runs a context of the runnable group with
//! the smallest virtual runtime. Groups belong to a *class* (`serving`,
//! `ingest`, `background`, `analytics`, or a name from the configuration)
//! whose counters `/metrics` shows; a class has many groups (one per
//! analytical query), a group many contexts.

use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::scheduler::Shared;
use crate::task::{JoinHandle, Task};

/// The smallest and largest share a group may have.
pub const MIN_SHARE: u32 = 1;
pub const MAX_SHARE: u32 = 1000;

/// Upper bounds (ns of CPU) of the poll-time histogram's buckets; the
/// last bucket is everything above.
pub const POLL_BUCKETS_NS: [u64; 5] = [100_000, 1_000_000, 5_000_000, 20_000_000, 100_000_000];

/// Counters of one class of groups, summed over its groups.
#[derive(Debug, Default)]
pub(crate) struct ClassStats {
    /// Polls by CPU time: `POLL_BUCKETS_NS`, then the rest. A poll is the
    /// quantum a waking serving context may have to wait for.
    pub(crate) poll_buckets: [AtomicU64; 6],
    pub(crate) cpu_ns: AtomicU64,
    pub(crate) polls: AtomicU64,
    /// Time contexts spent runnable before a worker picked them.
    pub(crate) wait_ns: AtomicU64,
    pub(crate) max_wait_ns: AtomicU64,
    /// Contexts runnable now (queued, not running).
    pub(crate) queued: AtomicU64,
    /// Groups of the class that exist now.
    pub(crate) groups: AtomicU64,
    /// Contexts of the class that exist now.
    pub(crate) contexts: AtomicU64,
}

/// A class's counters at one moment, for `/metrics` and the console.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassSnapshot {
    pub name: String,
    pub cpu: Duration,
    pub polls: u64,
    pub wait: Duration,
    pub max_wait: Duration,
    pub queued: u64,
    pub groups: u64,
    pub contexts: u64,
    /// Polls per bucket of [`POLL_BUCKETS_NS`] (not cumulative), then the
    /// polls above the last bound.
    pub poll_buckets: [u64; 6],
}

impl ClassStats {
    pub(crate) fn snapshot(&self, name: &str) -> ClassSnapshot {
        ClassSnapshot {
            name: name.to_string(),
            cpu: Duration::from_nanos(self.cpu_ns.load(Ordering::Relaxed)),
            polls: self.polls.load(Ordering::Relaxed),
            wait: Duration::from_nanos(self.wait_ns.load(Ordering::Relaxed)),
            max_wait: Duration::from_nanos(self.max_wait_ns.load(Ordering::Relaxed)),
            queued: self.queued.load(Ordering::Relaxed),
            groups: self.groups.load(Ordering::Relaxed),
            contexts: self.contexts.load(Ordering::Relaxed),
            poll_buckets: std::array::from_fn(|i| {
                self.poll_buckets
                    .get(i)
                    .map_or(0, |b| b.load(Ordering::Relaxed))
            }),
        }
    }
}

pub(crate) struct GroupInner {
    pub(crate) id: u64,
    pub(crate) class: Arc<ClassStats>,
    pub(crate) class_name: Arc<str>,
    share: AtomicU32,
    /// Normalised CPU nanoseconds: sum of `cpu_ns / share` over its polls,
    /// raised to the scheduler's floor when the group wakes up.
    pub(crate) vruntime: AtomicU64,
    pub(crate) cpu_ns: AtomicU64,
    pub(crate) shared: Arc<Shared>,
}

impl GroupInner {
    pub(crate) fn new(
        id: u64,
        class_name: Arc<str>,
        class: Arc<ClassStats>,
        share: u32,
        shared: Arc<Shared>,
        vruntime: u64,
    ) -> GroupInner {
        class.groups.fetch_add(1, Ordering::Relaxed);
        GroupInner {
            id,
            class,
            class_name,
            share: AtomicU32::new(share.clamp(MIN_SHARE, MAX_SHARE)),
            vruntime: AtomicU64::new(vruntime),
            cpu_ns: AtomicU64::new(0),
            shared,
        }
    }

    /// Charges one poll's CPU time.
    pub(crate) fn charge(&self, cpu_ns: u64) {
        let share = u64::from(self.share.load(Ordering::Relaxed).max(MIN_SHARE));
        self.vruntime.fetch_add(cpu_ns / share, Ordering::Relaxed);
        self.cpu_ns.fetch_add(cpu_ns, Ordering::Relaxed);
        self.class.cpu_ns.fetch_add(cpu_ns, Ordering::Relaxed);
        self.class.polls.fetch_add(1, Ordering::Relaxed);
        let bucket = POLL_BUCKETS_NS
            .iter()
            .position(|b| cpu_ns <= *b)
            .unwrap_or(POLL_BUCKETS_NS.len());
        if let Some(b) = self.class.poll_buckets.get(bucket) {
            b.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for GroupInner {
    fn drop(&mut self) {
        self.class.groups.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A scheduling group. Cloning gives another handle to the same group; the
/// group lives while a handle or one of its contexts does.
#[derive(Clone)]
pub struct Group {
    pub(crate) inner: Arc<GroupInner>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("id", &self.inner.id)
            .field("class", &&*self.inner.class_name)
            .field("share", &self.share())
            .finish()
    }
}

impl Group {
    /// Runs `future` as a new execution context of this group.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Task::spawn(Arc::clone(&self.inner), future)
    }

    /// A new group of `class` on the same scheduler (e.g. the group of an
    /// analytical query, made from the connection's context).
    pub fn sibling(&self, class: &str, share: u32) -> Group {
        self.inner.shared.new_group(class, share)
    }

    /// CPU time this group's contexts have used.
    pub fn cpu_time(&self) -> Duration {
        Duration::from_nanos(self.inner.cpu_ns.load(Ordering::Relaxed))
    }

    pub fn share(&self) -> u32 {
        self.inner.share.load(Ordering::Relaxed)
    }

    /// Changes the share; it applies to CPU time charged from now on.
    pub fn set_share(&self, share: u32) {
        self.inner
            .share
            .store(share.clamp(MIN_SHARE, MAX_SHARE), Ordering::Relaxed);
    }

    pub fn class(&self) -> &str {
        &self.inner.class_name
    }

    /// Makes this the group that [`crate::current_group`] names on this
    /// thread until the guard drops: work spawned meanwhile (DataFusion's
    /// tasks, Eddy's scans) is charged to it.
    pub fn enter(&self) -> EnterGuard {
        let previous = crate::scheduler::set_current_group(Some(self.clone()));
        EnterGuard { previous }
    }
}

/// Restores the previous current group when dropped.
pub struct EnterGuard {
    previous: Option<Group>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        crate::scheduler::set_current_group(self.previous.take());
    }
}
