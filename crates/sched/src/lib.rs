//! Eddy's execution-context scheduler (Hologres's HOS, on one machine).
//!
//! Owns: a fixed number of CPU *slots* (one per core by default) and the
//! worker threads that fill them; *execution contexts* (futures polled
//! cooperatively, one poll at a time); *scheduling groups* with shares.
//! The server runs every connection, every analytical query, Eddy's scans
//! and DataFusion's spawned operator tasks as contexts here, so the choice
//! of what gets the CPU next is made in one place, by share.
//!
//! Invariants:
//! * the runnable context of the group with the smallest virtual runtime
//!   (`sum of cpu_ns / share`) runs next; contexts of one group take turns;
//! * a group that was idle re-enters at most `WAKE_CREDIT` behind the
//!   least-served runnable group: it cannot bank CPU while idle, and a
//!   waking serving context runs after at most one quantum of another;
//! * at most `slots` contexts run at once, except while a worker that is
//!   blocked inside a poll (it gave its slot up) finishes that poll;
//! * a context is polled by one worker at a time and queued at most once
//!   (see `task.rs` for the state machine); the scheduler's lock is never
//!   held across a poll or a future's destructor.
//!
//! Not here: admission (how many analytical queries may start) and the
//! mapping of sessions and roles to groups are the server's; what a group
//! is charged is CPU time, measured per thread.
//!
//! Where to look next: `docs/design/scheduler.md`; `eddy-sql`'s session
//! (per-query groups, scans as contexts) and `eddy-server`'s `main.rs`
//! (connections as contexts).

mod clock;
mod group;
mod runqueue;
mod scheduler;
mod task;

pub use group::{ClassSnapshot, EnterGuard, Group, MAX_SHARE, MIN_SHARE, POLL_BUCKETS_NS};
pub use scheduler::{
    block_in_place, current_group, on_worker, switch_context_group, ContextGroupGuard, Scheduler,
    SchedulerConfig,
};
pub use task::{yield_now, AbortOnDrop, JoinError, JoinHandle};

/// The class names Eddy uses.
pub mod class {
    /// Connections: protocol handling, fixed-plan lookups, single-row writes.
    pub const SERVING: &str = "serving";
    /// One group per analytical query, with the session's share.
    pub const ANALYTICS: &str = "analytics";
    /// WAL apply and stream sinks.
    pub const INGEST: &str = "ingest";
    /// Flush and compaction.
    pub const BACKGROUND: &str = "background";
}

#[cfg(test)]
mod tests;
