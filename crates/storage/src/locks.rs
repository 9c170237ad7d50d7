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
//!   waiter that wakes and takes a fresh snapshot sees the holder's writes.

use std::collections::{HashMap, HashSet};
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

#[derive(Default)]
struct State {
    rows: HashMap<RowId, Holder>,
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
    released: Condvar,
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
        loop {
            let blockers = st
                .rows
                .get(&row)
                .map(|h| h.blockers(owner, mode))
                .unwrap_or_default();
            if blockers.is_empty() {
                st.waits_for.remove(&owner);
                st.grant(owner, row, mode);
                self.tables_locked
                    .store(st.exclusive_tables, std::sync::atomic::Ordering::Release);
                return Ok(true);
            }
            match wait {
                LockWait::NoWait => {
                    return Err(StorageError::LockNotAvailable(table_name.to_string()))
                }
                LockWait::Skip => return Ok(false),
                LockWait::Block(_) => {}
            }
            if st.reaches(&blockers, owner) {
                st.waits_for.remove(&owner);
                return Err(StorageError::Deadlock {
                    waiter: owner.0,
                    holder: blockers[0].0,
                });
            }
            st.waits_for.insert(owner, blockers);
            // a lock wait gives the scheduler's CPU slot up while it lasts
            match deadline {
                Some(d) => {
                    if eddy_sched::block_in_place(|| self.released.wait_until(&mut st, d))
                        .timed_out()
                    {
                        st.waits_for.remove(&owner);
                        return Err(StorageError::LockTimeout);
                    }
                }
                None => eddy_sched::block_in_place(|| self.released.wait(&mut st)),
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
        }
        drop(st);
        self.released.notify_all();
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
}
