//! The workers, the CPU slots and the choice of what runs next.
//!
//! Invariants (all under `Shared::state`'s lock):
//! * `running` counts the workers inside a poll that hold a CPU slot, and
//!   never exceeds `slots` except transiently while a worker that gave its
//!   slot up (blocked) finishes its poll;
//! * a group is in `runnable` iff it has at least one queued context, and
//!   then exactly once;
//! * the next context is the front of the runnable group with the smallest
//!   virtual runtime; a group that becomes runnable starts no further back
//!   than `min_vruntime - WAKE_CREDIT_NS`, so it cannot bank credit while
//!   idle, but a latency-sensitive group that wakes runs next;
//! * the lock is never held while a future is polled or dropped.
//!
//! A worker that blocks inside a poll (a lock wait, an fsync) gives its slot
//! up: explicitly through [`block_in_place`], or when the monitor sees it
//! use less than a quarter of a CPU for `BLOCKED_AFTER`; a spare thread
//! (at most `max_threads` in all) takes the slot so the CPUs stay busy.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::clock::{self, ClockId};
use crate::group::{ClassSnapshot, ClassStats, Group, GroupInner};
use crate::runqueue::{RunGroup, RunQueue};
use crate::task::{AfterPoll, Task};

/// How far behind the least-served runnable group a waking group may start:
/// one typical quantum, so a lookup that wakes runs next without letting a
/// group that slept for minutes starve the others.
const WAKE_CREDIT_NS: u64 = 2_000_000;
/// A poll running this long with under a quarter of a CPU is blocked.
const BLOCKED_AFTER: Duration = Duration::from_millis(5);
const MONITOR_TICK: Duration = Duration::from_millis(2);
/// Spare threads beyond the slots exit after this long without work.
const SPARE_IDLE: Duration = Duration::from_secs(10);

/// How the scheduler is sized.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// CPU slots: how many contexts run at once (one per core by default).
    pub slots: usize,
    /// Most worker threads, spares for blocked workers included.
    pub max_threads: usize,
    /// Stack of each worker thread.
    pub stack_size: usize,
    /// The tokio runtime whose timers and sockets contexts may use.
    pub runtime: Option<tokio::runtime::Handle>,
    /// The workers' OS niceness (0 to 19): above 0, threads outside the
    /// scheduler (e.g. connections served on tokio's threads) preempt its
    /// contexts at the kernel's next wake-up.
    pub nice: i32,
}

impl SchedulerConfig {
    pub fn new(slots: usize) -> SchedulerConfig {
        SchedulerConfig {
            slots: slots.max(1),
            max_threads: 512,
            stack_size: 2 << 20,
            runtime: None,
            nice: 0,
        }
    }
}

/// A group as the run queue sees it.
struct QueuedGroup(Arc<GroupInner>);

impl RunGroup for QueuedGroup {
    fn vruntime(&self) -> u64 {
        self.0.vruntime.load(Ordering::Relaxed)
    }
    fn raise_vruntime_to(&self, floor: u64) {
        self.0.vruntime.fetch_max(floor, Ordering::Relaxed);
    }
    fn same_group(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

struct WorkerInfo {
    clock: Option<ClockId>,
    /// `clock::wall_ns` when its current poll began; 0 when not polling.
    poll_started: u64,
    cpu_at_start: u64,
    /// Its slot was given up during the current poll.
    slot_released: bool,
}

struct State {
    runnable: RunQueue<QueuedGroup, Arc<Task>>,
    running: usize,
    /// Workers back from a blocking section, waiting for a slot; they go
    /// before idle workers (they are inside a poll).
    reacquiring: usize,
    slots: usize,
    threads: usize,
    /// Threads started that have not reached their loop yet.
    starting: usize,
    idle: usize,
    max_threads: usize,
    shutdown: bool,
    workers: Vec<Option<WorkerInfo>>,
}

impl State {
    fn free_slot(&self) -> bool {
        self.running + self.reacquiring < self.slots
    }

    fn worker(&mut self, id: usize) -> Option<&mut WorkerInfo> {
        self.workers.get_mut(id).and_then(Option::as_mut)
    }

    /// Whether a spare thread should start to take a slot given up.
    fn wants_spare(&self) -> bool {
        !self.shutdown
            && !self.runnable.is_empty()
            && self.idle == 0
            && self.starting == 0
            && self.free_slot()
            && self.threads < self.max_threads
    }
}

pub(crate) struct Shared {
    state: Mutex<State>,
    /// Idle workers wait here for work and a free slot.
    work: Condvar,
    /// Workers back from a blocking section wait here for a slot.
    slot_freed: Condvar,
    classes: Mutex<Vec<(Arc<str>, Arc<ClassStats>)>>,
    next_group: AtomicU64,
    config: SchedulerConfig,
    me: Weak<Shared>,
}

thread_local! {
    /// The scheduler and worker id of this thread, on worker threads.
    static WORKER: RefCell<Option<(Arc<Shared>, usize)>> = const { RefCell::new(None) };
    /// The group charged for work spawned from this thread now.
    static CURRENT: RefCell<Option<Group>> = const { RefCell::new(None) };
    /// The context a worker is polling now.
    static CURRENT_TASK: RefCell<Option<Arc<Task>>> = const { RefCell::new(None) };
}

pub(crate) fn set_current_group(group: Option<Group>) -> Option<Group> {
    CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), group))
}

/// The group the calling code runs in: the group of the context a worker
/// is polling, or one entered with [`Group::enter`].
pub fn current_group() -> Option<Group> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether the calling thread is one of a scheduler's workers.
pub fn on_worker() -> bool {
    WORKER.with(|w| w.borrow().is_some())
}

/// Runs `f`, which may block (a lock wait, an fsync, a blocking receive),
/// without holding a CPU slot: another worker runs meanwhile. Off a worker
/// thread it just runs `f`.
pub fn block_in_place<R>(f: impl FnOnce() -> R) -> R {
    let worker = WORKER.with(|w| w.borrow().clone());
    let Some((shared, id)) = worker else {
        return f();
    };
    // nested inside another blocking section: the slot is already given up
    if !shared.release_slot(id) {
        return f();
    }
    let out = f();
    shared.reacquire_slot(id);
    out
}

impl Shared {
    pub(crate) fn enqueue(self: Arc<Self>, task: Arc<Task>) {
        task.queued_at.store(clock::wall_ns(), Ordering::Relaxed);
        let group = task.group();
        group.class.queued.fetch_add(1, Ordering::Relaxed);
        let mut st = self.state.lock();
        if st.shutdown {
            drop(st);
            group.class.queued.fetch_sub(1, Ordering::Relaxed);
            return; // dropped outside the lock, here
        }
        st.runnable.push(QueuedGroup(group), task);
        if st.idle > 0 && st.free_slot() {
            self.work.notify_one();
        } else if st.wants_spare() {
            // every thread is blocked in a poll while a slot is free
            st.threads += 1;
            st.starting += 1;
            drop(st);
            self.start_worker();
        }
    }

    /// Gives the calling worker's slot up; false when it was already given
    /// up (a nested blocking section, or the monitor took it).
    fn release_slot(&self, id: usize) -> bool {
        let mut st = self.state.lock();
        let Some(w) = st.worker(id) else { return false };
        if w.slot_released {
            return false;
        }
        w.slot_released = true;
        st.running = st.running.saturating_sub(1);
        self.hand_over_slot(&mut st);
        let spare = st.wants_spare();
        if spare {
            st.threads += 1;
            st.starting += 1;
        }
        drop(st);
        if spare {
            self.start_worker();
        }
        true
    }

    fn reacquire_slot(&self, id: usize) {
        let mut st = self.state.lock();
        let released = st.worker(id).map(|w| w.slot_released).unwrap_or(false);
        if !released {
            return;
        }
        st.reacquiring += 1;
        while st.running >= st.slots && !st.shutdown {
            self.slot_freed.wait(&mut st);
        }
        st.reacquiring -= 1;
        st.running += 1;
        if let Some(w) = st.worker(id) {
            w.slot_released = false;
        }
    }

    /// A slot became free: a worker back from blocking gets it first, else
    /// an idle worker if there is work.
    fn hand_over_slot(&self, st: &mut State) {
        if st.reacquiring > 0 {
            self.slot_freed.notify_one();
        } else if !st.runnable.is_empty() && st.idle > 0 {
            self.work.notify_one();
        }
    }

    fn start_worker(&self) {
        let Some(shared) = self.me.upgrade() else {
            return;
        };
        let spawned = std::thread::Builder::new()
            .name("eddy-sched".into())
            .stack_size(self.config.stack_size)
            .spawn(move || worker_loop(shared));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start a scheduler worker");
            let mut st = self.state.lock();
            st.threads -= 1;
            st.starting -= 1;
        }
    }

    pub(crate) fn new_group(self: &Arc<Self>, class: &str, share: u32) -> Group {
        let (name, stats) = self.class(class);
        let id = self.next_group.fetch_add(1, Ordering::Relaxed);
        let vruntime = self.state.lock().runnable.min_vruntime();
        Group {
            inner: Arc::new(GroupInner::new(
                id,
                name,
                stats,
                share,
                Arc::clone(self),
                vruntime,
            )),
        }
    }

    fn class(&self, name: &str) -> (Arc<str>, Arc<ClassStats>) {
        let mut classes = self.classes.lock();
        if let Some((n, s)) = classes.iter().find(|(n, _)| &**n == name) {
            return (Arc::clone(n), Arc::clone(s));
        }
        let entry: (Arc<str>, Arc<ClassStats>) = (Arc::from(name), Arc::default());
        classes.push((Arc::clone(&entry.0), Arc::clone(&entry.1)));
        entry
    }
}

fn worker_loop(shared: Arc<Shared>) {
    let _runtime = shared.config.runtime.as_ref().map(|h| h.enter());
    if shared.config.nice > 0 {
        clock::set_thread_nice(shared.config.nice.min(19));
    }
    let id = {
        let mut st = shared.state.lock();
        st.starting = st.starting.saturating_sub(1);
        let info = WorkerInfo {
            clock: clock::current_thread_clock(),
            poll_started: 0,
            cpu_at_start: 0,
            slot_released: false,
        };
        match st.workers.iter().position(Option::is_none) {
            Some(i) => {
                if let Some(slot) = st.workers.get_mut(i) {
                    *slot = Some(info);
                }
                i
            }
            None => {
                st.workers.push(Some(info));
                st.workers.len() - 1
            }
        }
    };
    WORKER.with(|w| *w.borrow_mut() = Some((Arc::clone(&shared), id)));
    let mut st = shared.state.lock();
    loop {
        if st.shutdown {
            break;
        }
        if st.free_slot() {
            if let Some(task) = st.runnable.pick() {
                st.running += 1;
                let now = clock::wall_ns();
                let cpu_now = clock::thread_cpu_ns();
                if let Some(w) = st.worker(id) {
                    w.poll_started = now;
                    w.cpu_at_start = cpu_now;
                    w.slot_released = false;
                }
                drop(st);
                run_one(&task, now);
                st = shared.state.lock();
                let released = match st.worker(id) {
                    Some(w) => {
                        w.poll_started = 0;
                        std::mem::replace(&mut w.slot_released, false)
                    }
                    None => false,
                };
                if !released {
                    st.running = st.running.saturating_sub(1);
                    if st.reacquiring > 0 {
                        shared.slot_freed.notify_one();
                    }
                }
                continue;
            }
        }
        if st.threads > st.slots {
            st.idle += 1;
            let timed_out = shared.work.wait_for(&mut st, SPARE_IDLE).timed_out();
            st.idle -= 1;
            if timed_out && st.threads > st.slots && st.runnable.is_empty() {
                break;
            }
        } else {
            st.idle += 1;
            shared.work.wait(&mut st);
            st.idle -= 1;
        }
    }
    st.threads -= 1;
    if let Some(slot) = st.workers.get_mut(id) {
        *slot = None;
    }
    drop(st);
    WORKER.with(|w| *w.borrow_mut() = None);
}

/// Polls one context and charges its group (the one it is in when the poll
/// ends).
fn run_one(task: &Arc<Task>, picked_at: u64) {
    let group = task.group();
    let class = &group.class;
    class.queued.fetch_sub(1, Ordering::Relaxed);
    let waited = picked_at.saturating_sub(task.queued_at.load(Ordering::Relaxed));
    class.wait_ns.fetch_add(waited, Ordering::Relaxed);
    class.max_wait_ns.fetch_max(waited, Ordering::Relaxed);
    let previous = set_current_group(Some(Group { inner: group }));
    let previous_task = CURRENT_TASK.with(|c| c.replace(Some(Arc::clone(task))));
    let (cpu, after) = task.run();
    CURRENT_TASK.with(|c| c.replace(previous_task));
    set_current_group(previous);
    let group = task.group();
    group.charge(cpu);
    if let AfterPoll::Requeue = after {
        Arc::clone(&group.shared).enqueue(Arc::clone(task));
    }
}

/// Moves the context being polled on this thread to `group` until the
/// guard drops (which must happen inside one of its polls, e.g. a guard
/// held across an `.await` in its future): its CPU is charged to `group`
/// and it is queued by `group`'s virtual runtime. `None` off a worker.
/// The session uses it to plan and run an analytical statement in the
/// query's group while the connection's context does the work.
pub fn switch_context_group(group: &Group) -> Option<ContextGroupGuard> {
    let task = CURRENT_TASK.with(|c| c.borrow().clone())?;
    let previous = task.set_group(Arc::clone(&group.inner));
    let previous_current = set_current_group(Some(group.clone()));
    Some(ContextGroupGuard {
        task,
        previous: Some(previous),
        previous_current,
    })
}

/// Puts the context back in its group when dropped.
pub struct ContextGroupGuard {
    task: Arc<Task>,
    previous: Option<Arc<GroupInner>>,
    previous_current: Option<Group>,
}

impl Drop for ContextGroupGuard {
    fn drop(&mut self) {
        if let Some(previous) = self.previous.take() {
            self.task.set_group(previous);
        }
        // on the same poll's thread (always, for a guard held by the
        // context's own future): the current group follows
        let same = CURRENT_TASK.with(|c| {
            c.borrow()
                .as_ref()
                .is_some_and(|t| Arc::ptr_eq(t, &self.task))
        });
        if same {
            set_current_group(self.previous_current.take());
        }
    }
}

/// Watches for workers blocked inside a poll and lets a spare thread take
/// their slot.
fn monitor_loop(shared: Weak<Shared>) {
    loop {
        std::thread::sleep(MONITOR_TICK);
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let mut st = shared.state.lock();
        if st.shutdown {
            return;
        }
        if st.runnable.is_empty() {
            continue;
        }
        let now = clock::wall_ns();
        let blocked_after = u64::try_from(BLOCKED_AFTER.as_nanos()).unwrap_or(u64::MAX);
        let mut freed = 0usize;
        for w in st.workers.iter_mut().flatten() {
            if w.poll_started == 0 || w.slot_released {
                continue;
            }
            let wall = now.saturating_sub(w.poll_started);
            if wall < blocked_after {
                continue;
            }
            let Some(cpu) = w.clock.and_then(clock::clock_ns) else {
                continue;
            };
            let used = cpu.saturating_sub(w.cpu_at_start);
            if used.saturating_mul(4) < wall {
                w.slot_released = true;
                freed += 1;
            }
        }
        if freed == 0 {
            continue;
        }
        st.running = st.running.saturating_sub(freed);
        for _ in 0..freed {
            shared.hand_over_slot(&mut st);
        }
        // one spare per freed slot when no idle worker can take it
        let spares = if st.idle == 0 && !st.runnable.is_empty() {
            freed.min(st.max_threads.saturating_sub(st.threads))
        } else {
            0
        };
        st.threads += spares;
        st.starting += spares;
        drop(st);
        for _ in 0..spares {
            shared.start_worker();
        }
    }
}

/// A set of CPU slots shared by scheduling groups.
pub struct Scheduler {
    shared: Arc<Shared>,
}

impl Scheduler {
    /// Starts `config.slots` workers and the blocked-worker monitor.
    pub fn start(config: SchedulerConfig) -> Arc<Scheduler> {
        let slots = config.slots.max(1);
        let shared = Arc::new_cyclic(|me| Shared {
            state: Mutex::new(State {
                runnable: RunQueue::new(WAKE_CREDIT_NS),
                running: 0,
                reacquiring: 0,
                slots,
                threads: slots,
                starting: slots,
                idle: 0,
                max_threads: config.max_threads.max(slots),
                shutdown: false,
                workers: Vec::new(),
            }),
            work: Condvar::new(),
            slot_freed: Condvar::new(),
            classes: Mutex::new(Vec::new()),
            next_group: AtomicU64::new(1),
            config,
            me: Weak::clone(me),
        });
        for _ in 0..slots {
            shared.start_worker();
        }
        let weak = Arc::downgrade(&shared);
        let monitor = std::thread::Builder::new()
            .name("eddy-sched-monitor".into())
            .spawn(move || monitor_loop(weak));
        if let Err(e) = monitor {
            tracing::error!(error = %e, "cannot start the scheduler monitor");
        }
        Arc::new(Scheduler { shared })
    }

    /// A new group of class `class` with `share`.
    pub fn group(&self, class: &str, share: u32) -> Group {
        self.shared.new_group(class, share)
    }

    /// Counters of every class seen so far, in order of first use.
    pub fn classes(&self) -> Vec<ClassSnapshot> {
        self.shared
            .classes
            .lock()
            .iter()
            .map(|(n, s)| s.snapshot(n))
            .collect()
    }

    pub fn slots(&self) -> usize {
        self.shared.state.lock().slots
    }

    /// Slots held now: by polling workers and by workers waiting to take
    /// theirs back after a blocking section.
    #[cfg(test)]
    pub(crate) fn slots_held(&self) -> usize {
        let st = self.shared.state.lock();
        st.running + st.reacquiring
    }

    /// Worker threads now (slots plus spares for blocked workers).
    pub fn threads(&self) -> usize {
        self.shared.state.lock().threads
    }

    /// Stops the workers; queued contexts are dropped without running.
    pub fn shutdown(&self) {
        let queued = {
            let mut st = self.shared.state.lock();
            st.shutdown = true;
            st.runnable.take_all()
        };
        self.shared.work.notify_all();
        self.shared.slot_freed.notify_all();
        drop(queued);
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shutdown();
    }
}
