//! Memory control for query execution: one server-wide budget shared by
//! every session, and a per-query limit inside it. DataFusion's operators
//! reserve what they hold (hash tables, sort buffers, aggregation state)
//! from the session's [`QueryPool`]; sorts and grouped aggregations spill
//! to files under the data directory's `spill/` when a reservation is
//! refused, and an operator that cannot spill (a hash join's build side)
//! fails its query with 53200 `out of memory` instead of growing the
//! process until the kernel kills it.
//!
//! Invariants:
//! * a session runs one statement at a time, so the session's pool bounds
//!   one query: `reserved() <= limit` always holds (a refused `try_grow`
//!   changes nothing), and `limit` is the session's
//!   `eddy.query_memory_limit` (default: [`MemoryBudget::default_query_limit`]);
//! * every byte a query reserves is also reserved from the server pool, so
//!   all queries together stay within the server budget; the server pool
//!   is a `FairSpillPool`: spilling operators share what non-spilling ones
//!   leave;
//! * `spill/` is emptied when the database opens (files of a previous
//!   process are garbage: a query never outlives its server).
//!
//! What it does not bound: Eddy's own storage (memtables have their own
//! limit, `memtable_bytes`), rows a client has not yet read from a
//! streaming result, and DataFusion operators that do not reserve what
//! they allocate.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::{
    FairSpillPool, MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

use crate::error::{Result, SqlError};

/// The server-wide budget and where spills go.
#[derive(Clone, Debug)]
pub struct MemoryBudget {
    server: Arc<dyn MemoryPool>,
    server_bytes: usize,
    default_query_limit: usize,
    spill_dir: PathBuf,
}

impl MemoryBudget {
    /// A budget of `server_bytes` for all queries together, `query_bytes`
    /// for one by default, spilling under `data_dir/spill` (emptied now).
    pub fn new(data_dir: &Path, server_bytes: usize, query_bytes: usize) -> Result<MemoryBudget> {
        let spill_dir = data_dir.join("spill");
        match std::fs::remove_dir_all(&spill_dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(SqlError::Io {
                    path: spill_dir.display().to_string(),
                    source: e,
                })
            }
        }
        std::fs::create_dir_all(&spill_dir).map_err(|e| SqlError::Io {
            path: spill_dir.display().to_string(),
            source: e,
        })?;
        Ok(MemoryBudget {
            server: Arc::new(FairSpillPool::new(server_bytes)),
            server_bytes,
            default_query_limit: query_bytes.min(server_bytes),
            spill_dir,
        })
    }

    /// The defaults for this machine: half its memory for queries, a
    /// quarter of that for one query.
    pub fn for_machine(data_dir: &Path) -> Result<MemoryBudget> {
        let total = physical_memory().unwrap_or(8 << 30);
        let server = total / 2;
        MemoryBudget::new(data_dir, server, server / 4)
    }

    pub fn server_bytes(&self) -> usize {
        self.server_bytes
    }

    pub fn default_query_limit(&self) -> usize {
        self.default_query_limit
    }

    /// Bytes reserved by all running queries now.
    pub fn reserved(&self) -> usize {
        self.server.reserved()
    }

    pub fn spill_dir(&self) -> &Path {
        &self.spill_dir
    }

    /// A pool for one session's queries, which run `parallelism`
    /// partitions at once.
    pub fn session_pool(&self, parallelism: usize) -> Arc<QueryPool> {
        Arc::new(QueryPool {
            server: Arc::clone(&self.server),
            limit: AtomicUsize::new(self.default_query_limit),
            parallelism: parallelism.max(1),
            state: parking_lot::Mutex::default(),
        })
    }
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn physical_memory() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// One session's share: at most `limit` bytes, each also reserved from
/// the server pool. Inside the limit, operators that can spill (sorts,
/// grouped aggregations) together hold at most what operators that cannot
/// spill leave, less a quarter of the limit; each past its first
/// reservation holds at most an even share of that. So a sort that fills
/// its share still leaves room for the merge of its runs and for a hash
/// table, as DataFusion's `FairSpillPool` does for a whole process.
#[derive(Debug)]
pub struct QueryPool {
    server: Arc<dyn MemoryPool>,
    limit: AtomicUsize,
    /// Spilling operators expected to run at once (the session's target
    /// partitions: one sort per partition): a share is never larger than
    /// an even part for that many, even before all of them registered.
    parallelism: usize,
    state: parking_lot::Mutex<QueryUse>,
}

#[derive(Debug, Default)]
struct QueryUse {
    spillable_consumers: usize,
    spillable: usize,
    unspillable: usize,
    /// Bytes by consumer id, with its name: the largest are named when a
    /// query runs out (as DataFusion's `TrackConsumersPool` does).
    by_consumer: std::collections::HashMap<usize, (String, usize)>,
}

impl QueryUse {
    fn total(&self) -> usize {
        self.spillable.saturating_add(self.unspillable)
    }

    fn track(&mut self, r: &MemoryReservation, grow: usize, shrink: usize) {
        let e = self
            .by_consumer
            .entry(r.consumer().id())
            .or_insert_with(|| (r.consumer().name().to_string(), 0));
        e.1 = e.1.saturating_add(grow).saturating_sub(shrink);
        if e.1 == 0 {
            self.by_consumer.remove(&r.consumer().id());
        }
    }

    /// The three largest holders, for an error message.
    fn largest(&self) -> String {
        let mut v: Vec<&(String, usize)> = self.by_consumer.values().collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.1));
        v.iter()
            .take(3)
            .map(|(n, b)| format!("{n} {}", human(*b)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn add(&mut self, spill: bool, n: usize) {
        if spill {
            self.spillable = self.spillable.saturating_add(n);
        } else {
            self.unspillable = self.unspillable.saturating_add(n);
        }
    }
}

impl QueryPool {
    pub fn set_limit(&self, bytes: usize) {
        self.limit.store(bytes, Ordering::Release);
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Acquire)
    }
}

impl fmt::Display for QueryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "QueryPool(used: {}, limit: {})",
            self.state.lock().total(),
            self.limit()
        )
    }
}

impl MemoryPool for QueryPool {
    fn name(&self) -> &str {
        "eddy_query_pool"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            let mut st = self.state.lock();
            st.spillable_consumers = st.spillable_consumers.saturating_add(1);
        }
        self.server.register(consumer);
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            let mut st = self.state.lock();
            st.spillable_consumers = st.spillable_consumers.saturating_sub(1);
        }
        self.server.unregister(consumer);
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.server.grow(reservation, additional);
        let mut st = self.state.lock();
        st.add(reservation.consumer().can_spill(), additional);
        st.track(reservation, additional, 0);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.server.shrink(reservation, shrink);
        let mut st = self.state.lock();
        st.track(reservation, 0, shrink);
        if reservation.consumer().can_spill() {
            st.spillable = st.spillable.saturating_sub(shrink);
        } else {
            st.unspillable = st.unspillable.saturating_sub(shrink);
        }
    }

    fn try_grow(
        &self,
        reservation: &MemoryReservation,
        additional: usize,
    ) -> datafusion::error::Result<()> {
        let limit = self.limit();
        let spill = reservation.consumer().can_spill();
        let mut st = self.state.lock();
        let fits = if spill {
            // operators that spill share what the others leave, less a
            // quarter of the limit kept for the others (a sort's merge, a
            // hash table), each at most an even share (its first batch may
            // be larger: it has nothing to spill yet)
            let room = limit
                .saturating_sub(st.unspillable)
                .saturating_sub(limit / 4);
            let share = room / st.spillable_consumers.max(self.parallelism);
            let within_room = st.spillable.saturating_add(additional) <= room;
            within_room
                && (reservation.size() == 0
                    || reservation.size().saturating_add(additional) <= share)
        } else {
            st.total().saturating_add(additional) <= limit
        };
        if !fits {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "out of memory: the query needs more than its limit of {} (eddy.query_memory_limit) for {}; {} already held (largest: {})",
                human(limit),
                reservation.consumer().name(),
                human(st.total()),
                st.largest()
            )));
        }
        self.server.try_grow(reservation, additional).map_err(|_| {
            DataFusionError::ResourcesExhausted(format!(
                "out of memory: the server's query memory ({}) is in use by running queries; {} could not get {}",
                human(self.server_limit()),
                reservation.consumer().name(),
                human(additional)
            ))
        })?;
        st.add(spill, additional);
        st.track(reservation, additional, 0);
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.state.lock().total()
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.limit())
    }
}

impl QueryPool {
    fn server_limit(&self) -> usize {
        match self.server.memory_limit() {
            MemoryLimit::Finite(n) => n,
            _ => usize::MAX,
        }
    }
}

/// `1.5 MB`-style sizes for messages.
fn human(bytes: usize) -> String {
    const UNITS: [&str; 4] = ["bytes", "kB", "MB", "GB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A memory size as PostgreSQL's memory settings read it: a number with
/// an optional unit `B`, `kB`, `MB`, `GB` or `TB` (1024-based); a bare
/// number is kilobytes.
pub fn parse_memory_size(text: &str) -> Option<usize> {
    let t = text.trim().trim_matches('\'');
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num.parse().ok()?;
    let mult: usize = match unit.trim() {
        "" | "kB" => 1 << 10,
        "B" => 1,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_postgresql_reads_them() {
        assert_eq!(parse_memory_size("64MB"), Some(64 << 20));
        assert_eq!(parse_memory_size("'1GB'"), Some(1 << 30));
        assert_eq!(parse_memory_size("4096"), Some(4 << 20));
        assert_eq!(parse_memory_size("10 kB"), Some(10 << 10));
        assert_eq!(parse_memory_size("12mb"), None);
        assert_eq!(parse_memory_size("-1MB"), None);
        assert_eq!(parse_memory_size("99999999999999TB"), None);
    }

    #[test]
    fn a_query_never_holds_more_than_its_limit_nor_the_server_more_than_its_budget() {
        let dir = std::env::temp_dir().join(format!("eddy-mem-{}", std::process::id()));
        let budget = MemoryBudget::new(&dir, 1000, 600).expect("budget");
        // (none of these consumers can spill: each may take the whole limit)
        let a: Arc<dyn MemoryPool> = budget.session_pool(1);
        let b: Arc<dyn MemoryPool> = budget.session_pool(1);
        let ra = MemoryConsumer::new("a").register(&a);
        let rb = MemoryConsumer::new("b").register(&b);
        assert!(ra.try_grow(600).is_ok());
        assert!(ra.try_grow(1).is_err(), "over the query limit");
        assert_eq!(a.reserved(), 600);
        assert!(rb.try_grow(500).is_err(), "over the server budget");
        assert!(rb.try_grow(400).is_ok());
        assert_eq!(budget.reserved(), 1000);
        ra.shrink(300);
        assert!(rb.try_grow(200).is_ok());
        drop(ra);
        assert_eq!(a.reserved(), 0);
        assert_eq!(budget.reserved(), 600);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn spilling_operators_leave_room_for_the_others() {
        let dir = std::env::temp_dir().join(format!("eddy-mem-s-{}", std::process::id()));
        let budget = MemoryBudget::new(&dir, 10_000, 1000).expect("budget");
        let q: Arc<dyn MemoryPool> = budget.session_pool(1);
        let s1 = MemoryConsumer::new("sort1")
            .with_can_spill(true)
            .register(&q);
        let s2 = MemoryConsumer::new("sort2")
            .with_can_spill(true)
            .register(&q);
        // two spilling consumers share three quarters of the limit
        assert!(s1.try_grow(375).is_ok());
        assert!(s1.try_grow(1).is_err());
        assert!(s2.try_grow(375).is_ok());
        // the merge (cannot spill) still gets the last quarter
        let merge = MemoryConsumer::new("merge").register(&q);
        assert!(merge.try_grow(250).is_ok());
        assert!(merge.try_grow(1).is_err());
        assert_eq!(q.reserved(), 1000);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
