//! Row locks: who may write a row until their transaction ends.
//!
//! Every statement that changes or locks a row (UPDATE, DELETE, INSERT,
//! ON CONFLICT, fixed-plan writes) takes the row's lock in its
//! transaction's name before it decides what to write, and keeps it until
//! the transaction commits or rolls back ([`LockManager::release_all`]).
//! Readers never lock: they read snapshots.
//!
//! Invariants:
//! * a row has at most one exclusive holder, or any number of shared ones;
//! * a transaction waits for at most one lock at a time; the waits-for
//!   edges are kept here, and a wait that would close a cycle fails at once
//!   with [`StorageError::Deadlock`] (40P01) in the transaction that would
//!   close it, so a deadlock is never slept through;
//! * locks are released only after the holder's commit is visible, so a
//!   waiter that wakes and takes a fresh snapshot sees the holder's writes;
//! * a row's waiters queue on the row, and a change of the row's holders
//!   wakes the first waiter that can now be granted, no other (each waiter
//!   sleeps on its own condition variable). One commit used to wake every
//!   waiting transaction of the engine: at 32 pgbench clients queued on one
//!   branch row, each commit woke 31 threads to find the row taken again;
//! * a queued waiter's waits-for edges name the row's holders of now: they
//!   are recomputed whenever those change, so a cycle is found however
//!   the row changed hands while the waiter slept;
//! * a wake-up is never lost: a waiter that leaves the queue without the
//!   lock (timeout, deadlock) passes the wake-up on, and one that is
//!   granted wakes the next waiter the row can still be granted to (the
//!   next shared one).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_common::{TableId, TxnId};
use parking_lot::{Condvar, Mutex};

use crate::error::{Result, StorageError};

/// How a lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// FOR SHARE: others may share, nobody may write.
    Shared,
    /// Writes and FOR UPDATE.
    Exclusive,
}

/// What to do when a row is locked by another transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockWait {
    /// Wait, at most this long (`None`: until the holder ends).
    Block(Option<Duration>),
    /// NOWAIT: fail with 55P03 at once.
    NoWait,
    /// SKIP LOCKED: report the row as not locked (`Ok(false)`).
    Skip,
}

type RowId = (TableId, Vec<u8>);

/// The lock key that stands for a whole table (no row key starts with
/// 0xFE): a transaction changing the table's definition holds it
/// exclusively until it ends; statements of others take it shared while
/// any table is so held ([`LockManager::tables_locked`]).
pub const TABLE_LOCK_KEY: &[u8] = &[0xFE];

fn is_table_lock(row: &RowId) -> bool {
    row.1 == TABLE_LOCK_KEY
}

enum Holder {
    Exclusive(TxnId),
    Shared(Vec<TxnId>),
}

impl Holder {
    /// The transactions other than `me` that block a `mode` request.
    fn blockers(&self, me: TxnId, mode: LockMode) -> Vec<TxnId> {
        match (self, mode) {
            (Holder::Exclusive(t), _) if *t == me => vec![],
            (Holder::Exclusive(t), _) => vec![*t],
            (Holder::Shared(_), LockMode::Shared) => vec![],
            (Holder::Shared(ts), LockMode::Exclusive) => {
                ts.iter().copied().filter(|t| *t != me).collect()
            }
        }
    }
}

/// One transaction waiting for one row.
struct Waiter {
    txn: TxnId,
    mode: LockMode,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    rows: HashMap<RowId, Holder>,
    /// Each row's waiters, in arrival order.
    queues: HashMap<RowId, VecDeque<Arc<Waiter>>>,
    /// Tables whose [`TABLE_LOCK_KEY`] is held exclusively.
    exclusive_tables: usize,
    held: HashMap<TxnId, Vec<RowId>>,
    waits_for: HashMap<TxnId, Vec<TxnId>>,
}

impl State {
    /// Whether `from` reaches `target` through waits-for edges.
    fn reaches(&self, from: &[TxnId], target: TxnId) -> bool {
        let mut seen = HashSet::new();
        let mut stack: Vec<TxnId> = from.to_vec();
        while let Some(t) = stack.pop() {
            if t == target {
                return true;
            }
            if seen.insert(t) {
                if let Some(next) = self.waits_for.get(&t) {
                    stack.extend(next.iter().copied());
                }
            }
        }
        false
    }

    /// Recomputes the waits-for edges of `row`'s waiters from its holders
    /// of now, and wakes the first waiter the row can be granted to.
    fn holders_changed(&mut self, row: &RowId) {
        let State {
            rows,
            queues,
            waits_for,
            ..
        } = self;
        let Some(queue) = queues.get(row) else {
            return;
        };
        if queue.is_empty() {
            queues.remove(row);
            return;
        }
        let holder = rows.get(row);
        let mut woken = false;
        for w in queue {
            let blockers = holder
                .map(|h| h.blockers(w.txn, w.mode))
                .unwrap_or_default();
            if blockers.is_empty() {
                // the others keep their edges until this one is granted
                // (which calls this again) or leaves
                if !woken {
                    w.wake.notify_one();
                    woken = true;
                }
            } else {
                waits_for.insert(w.txn, blockers);
            }
        }
    }

    /// Takes `waiter` out of `row`'s queue.
    fn dequeue(&mut self, row: &RowId, waiter: &Arc<Waiter>) {
        if let Some(queue) = self.queues.get_mut(row) {
            queue.retain(|w| !Arc::ptr_eq(w, waiter));
            if queue.is_empty() {
                self.queues.remove(row);
            }
        }
    }

    fn grant(&mut self, me: TxnId, row: RowId, mode: LockMode) {
        let table_lock = is_table_lock(&row);
        let new_row = match self.rows.get_mut(&row) {
            None => {
                let h = match mode {
                    LockMode::Exclusive => {
                        self.exclusive_tables += usize::from(table_lock);
                        Holder::Exclusive(me)
                    }
                    LockMode::Shared => Holder::Shared(vec![me]),
                };
                self.rows.insert(row.clone(), h);
                true
            }
            Some(h) => {
                match (h, mode) {
                    (Holder::Exclusive(_), _) => {} // already mine
                    (h @ Holder::Shared(_), LockMode::Exclusive) => {
                        *h = Holder::Exclusive(me);
                        self.exclusive_tables += usize::from(table_lock);
                    }
                    (Holder::Shared(ts), LockMode::Shared) => {
                        if !ts.contains(&me) {
                            ts.push(me);
                        }
                    }
                }
                false
            }
        };
        let held = self.held.entry(me).or_default();
        if new_row || !held.contains(&row) {
            held.push(row);
        }
    }
}

/// The row-lock table of one engine.
#[derive(Default)]
pub struct LockManager {
    state: Mutex<State>,
    /// `State::exclusive_tables`, readable without the lock (every
    /// statement reads it: see [`LockManager::tables_locked`]).
    tables_locked: std::sync::atomic::AtomicUsize,
}

impl LockManager {
    /// Locks one row for `owner`. `Ok(true)`: held; `Ok(false)`: skipped
    /// (only with [`LockWait::Skip`]). `table_name` names the relation in
    /// errors.
    pub fn lock(
        &self,
        owner: TxnId,
        table: TableId,
        key: &[u8],
        mode: LockMode,
        wait: LockWait,
        table_name: &str,
    ) -> Result<bool> {
        let row: RowId = (table, key.to_vec());
        let deadline = match wait {
            LockWait::Block(Some(d)) => Some(Instant::now() + d),
            _ => None,
        };
        let mut st = self.state.lock();
        // this transaction's place in the row's queue, once it waits
        let mut queued: Option<Arc<Waiter>> = None;
        loop {
            let blockers = st
                .rows
                .get(&row)
                .map(|h| h.blockers(owner, mode))
                .unwrap_or_default();
            if blockers.is_empty() {
                if let Some(w) = queued.take() {
                    st.dequeue(&row, &w);
                }
                st.waits_for.remove(&owner);
                st.grant(owner, row.clone(), mode);
                // a shared grant may leave room for the next waiter; any
                // grant changes what the others wait for
                st.holders_changed(&row);
                self.tables_locked
                    .store(st.exclusive_tables, std::sync::atomic::Ordering::Release);
                return Ok(true);
            }
            match wait {
                // (only on the first pass: these never queue)
                LockWait::NoWait => {
                    return Err(StorageError::LockNotAvailable(table_name.to_string()))
                }
                LockWait::Skip => return Ok(false),
                LockWait::Block(_) => {}
            }
            if st.reaches(&blockers, owner) {
                st.waits_for.remove(&owner);
                if let Some(w) = queued.take() {
                    st.dequeue(&row, &w);
                    st.holders_changed(&row);
                }
                return Err(StorageError::Deadlock {
                    waiter: owner.0,
                    holder: blockers[0].0,
                });
            }
            st.waits_for.insert(owner, blockers);
            let me = match &queued {
                Some(w) => Arc::clone(w),
                None => {
                    let w = Arc::new(Waiter {
                        txn: owner,
                        mode,
                        wake: Condvar::new(),
                    });
                    st.queues
                        .entry(row.clone())
                        .or_default()
                        .push_back(Arc::clone(&w));
                    queued = Some(Arc::clone(&w));
                    w
                }
            };
            // a lock wait gives the scheduler's CPU slot up while it lasts
            match deadline {
                Some(d) => {
                    if eddy_sched::block_in_place(|| me.wake.wait_until(&mut st, d)).timed_out() {
                        st.waits_for.remove(&owner);
                        st.dequeue(&row, &me);
                        // a wake-up meant for this waiter goes to the next
                        st.holders_changed(&row);
                        return Err(StorageError::LockTimeout);
                    }
                }
                None => eddy_sched::block_in_place(|| me.wake.wait(&mut st)),
            }
        }
    }

    /// Releases every lock of `owner` (commit, rollback, disconnect) and
    /// wakes the waiters.
    pub fn release_all(&self, owner: TxnId) {
        let mut st = self.state.lock();
        st.waits_for.remove(&owner);
        let Some(rows) = st.held.remove(&owner) else {
            return;
        };
        for row in rows {
            let (remove, exclusive) = match st.rows.get_mut(&row) {
                Some(Holder::Exclusive(t)) => (*t == owner, *t == owner),
                Some(Holder::Shared(ts)) => {
                    ts.retain(|t| *t != owner);
                    (ts.is_empty(), false)
                }
                None => (false, false),
            };
            if exclusive && is_table_lock(&row) {
                st.exclusive_tables = st.exclusive_tables.saturating_sub(1);
                self.tables_locked
                    .store(st.exclusive_tables, std::sync::atomic::Ordering::Release);
            }
            if remove {
                st.rows.remove(&row);
            }
            st.holders_changed(&row);
        }
    }

    /// How many tables some transaction holds exclusively (their
    /// definitions are changing): while none is, statements need not take
    /// table locks at all.
    pub fn tables_locked(&self) -> usize {
        self.tables_locked
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Rows locked by anyone (for tests and metrics).
    pub fn locked_rows(&self) -> usize {
        self.state.lock().rows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const T: TableId = TableId(1);

    #[test]
    fn exclusive_waits_and_is_woken() {
        let m = Arc::new(LockManager::default());
        let block = LockWait::Block(None);
        assert!(m
            .lock(TxnId(1), T, b"k", LockMode::Exclusive, block, "t")
            .unwrap());
        let m2 = Arc::clone(&m);
        let h = std::thread::spawn(move || {
            m2.lock(TxnId(2), T, b"k", LockMode::Exclusive, block, "t")
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!h.is_finished(), "second writer must wait");
        m.release_all(TxnId(1));
        assert!(h.join().unwrap());
        assert!(matches!(
            m.lock(
                TxnId(3),
                T,
                b"k",
                LockMode::Exclusive,
                LockWait::NoWait,
                "t"
            ),
            Err(StorageError::LockNotAvailable(_))
        ));
        assert!(!m
            .lock(TxnId(3), T, b"k", LockMode::Exclusive, LockWait::Skip, "t")
            .unwrap());
        m.release_all(TxnId(2));
        assert_eq!(m.locked_rows(), 0);
    }

    #[test]
    fn shared_locks_share_and_block_writers() {
        let m = LockManager::default();
        let nw = LockWait::NoWait;
        m.lock(TxnId(1), T, b"k", LockMode::Shared, nw, "t")
            .unwrap();
        m.lock(TxnId(2), T, b"k", LockMode::Shared, nw, "t")
            .unwrap();
        assert!(m
            .lock(TxnId(3), T, b"k", LockMode::Exclusive, nw, "t")
            .is_err());
        m.release_all(TxnId(1));
        // the remaining sharer may upgrade
        m.lock(TxnId(2), T, b"k", LockMode::Exclusive, nw, "t")
            .unwrap();
    }

    #[test]
    fn deadlock_is_detected_in_the_closing_transaction() {
        let m = Arc::new(LockManager::default());
        let block = LockWait::Block(None);
        m.lock(TxnId(1), T, b"a", LockMode::Exclusive, block, "t")
            .unwrap();
        m.lock(TxnId(2), T, b"b", LockMode::Exclusive, block, "t")
            .unwrap();
        let m2 = Arc::clone(&m);
        let h =
            std::thread::spawn(move || m2.lock(TxnId(1), T, b"b", LockMode::Exclusive, block, "t"));
        std::thread::sleep(Duration::from_millis(50));
        let r = m.lock(TxnId(2), T, b"a", LockMode::Exclusive, block, "t");
        assert!(matches!(r, Err(StorageError::Deadlock { .. })), "{r:?}");
        m.release_all(TxnId(2));
        assert!(h.join().unwrap().unwrap());
    }

    #[test]
    fn lock_timeout_expires() {
        let m = LockManager::default();
        m.lock(
            TxnId(1),
            T,
            b"k",
            LockMode::Exclusive,
            LockWait::NoWait,
            "t",
        )
        .unwrap();
        let r = m.lock(
            TxnId(2),
            T,
            b"k",
            LockMode::Exclusive,
            LockWait::Block(Some(Duration::from_millis(30))),
            "t",
        );
        assert!(matches!(r, Err(StorageError::LockTimeout)));
    }

    /// Waits (up to 5 s) until `m` has `n` queued waiters on `key`.
    fn wait_queued(m: &LockManager, key: &[u8], n: usize) {
        let row: RowId = (T, key.to_vec());
        for _ in 0..500 {
            if m.state.lock().queues.get(&row).map_or(0, |q| q.len()) == n {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{n} waiters never queued");
    }

    #[test]
    fn a_cycle_is_found_after_the_row_changed_hands_under_a_sleeping_waiter() {
        // 1 holds a; 2 and 3 queue on a. When 1 ends, one of them gets a and
        // the other, still asleep, must now be seen waiting for it: if the
        // holder then waits for a row the sleeper holds, that is a deadlock
        let m = Arc::new(LockManager::default());
        let block = LockWait::Block(Some(Duration::from_secs(20)));
        m.lock(TxnId(1), T, b"a", LockMode::Exclusive, block, "t")
            .unwrap();
        m.lock(TxnId(2), T, b"b2", LockMode::Exclusive, block, "t")
            .unwrap();
        m.lock(TxnId(3), T, b"b3", LockMode::Exclusive, block, "t")
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let mut hs = Vec::new();
        for (me, other) in [(2u64, &b"b3"[..]), (3, &b"b2"[..])] {
            let (m2, tx) = (Arc::clone(&m), tx.clone());
            hs.push(std::thread::spawn(move || {
                m2.lock(TxnId(me), T, b"a", LockMode::Exclusive, block, "t")
                    .unwrap();
                tx.send(me).unwrap();
                // now wait for the row the other (asleep on a) holds
                let r = m2.lock(TxnId(me), T, other, LockMode::Exclusive, block, "t");
                (me, r)
            }));
            wait_queued(&m, b"a", hs.len());
        }
        m.release_all(TxnId(1));
        let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let (me, r) = hs.remove(usize::from(first == 3)).join().unwrap();
        assert_eq!(me, first);
        assert!(
            matches!(r, Err(StorageError::Deadlock { .. })),
            "{first} closed a cycle with the waiter asleep on a: {r:?}"
        );
        // the deadlock's victim rolls back; the other gets a, then its row
        m.release_all(TxnId(first));
        let (_, r) = hs.remove(0).join().unwrap();
        assert!(r.unwrap());
    }

    #[test]
    fn a_release_lets_every_queued_sharer_in() {
        let m = Arc::new(LockManager::default());
        let block = LockWait::Block(Some(Duration::from_secs(20)));
        m.lock(TxnId(1), T, b"k", LockMode::Exclusive, block, "t")
            .unwrap();
        let hs: Vec<_> = (2..6u64)
            .map(|me| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || m.lock(TxnId(me), T, b"k", LockMode::Shared, block, "t"))
            })
            .collect();
        wait_queued(&m, b"k", 4);
        m.release_all(TxnId(1));
        // each grant wakes the next sharer: all four hold it at once
        for h in hs {
            assert!(h.join().unwrap().unwrap());
        }
        assert_eq!(m.locked_rows(), 1);
    }

    #[test]
    fn no_wake_up_is_lost_among_timeouts_and_grants() {
        // writers churn on one row, some with timeouts too short to wait
        // out the queue: every writer ends (granted or timed out), none is
        // left asleep with the row free
        let m = Arc::new(LockManager::default());
        let hs: Vec<_> = (1..=16u64)
            .map(|me| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    let wait = if me % 3 == 0 {
                        LockWait::Block(Some(Duration::from_millis(1)))
                    } else {
                        LockWait::Block(Some(Duration::from_secs(20)))
                    };
                    for round in 0..20u64 {
                        let txn = TxnId(me * 1000 + round);
                        match m.lock(txn, T, b"hot", LockMode::Exclusive, wait, "t") {
                            Ok(true) => std::thread::sleep(Duration::from_micros(200)),
                            Err(StorageError::LockTimeout) if me % 3 == 0 => {}
                            other => panic!("{other:?}"),
                        }
                        m.release_all(txn);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(m.locked_rows(), 0);
        assert!(m.state.lock().queues.is_empty());
    }
}
