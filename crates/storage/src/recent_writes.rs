//! The LSN of the latest committed write of each recently written row of a
//! shard: how a writer holding a row lock learns whether the row changed
//! after the snapshot it read the row in.
//!
//! Invariant: for every key, `last_write(key)` is at or above the LSN of
//! the key's latest committed write. Keys not in the map answer `floor`,
//! which is raised whenever the map forgets entries (it is bounded) and
//! whenever a bulk load writes keys it does not list, so an answer may be
//! too high (a needless re-check or 40001) but never too low (a lost
//! update).

use std::collections::HashMap;

use eddy_common::{Lsn, TableId};

/// Entries kept per shard before the map is emptied and the floor raised.
const MAX_ENTRIES: usize = 1 << 20;

#[derive(Default)]
pub struct RecentWrites {
    map: HashMap<(TableId, Vec<u8>), Lsn>,
    floor: Lsn,
    max: Lsn,
}

impl RecentWrites {
    /// A tracker after recovery: everything counts as written at `lsn`.
    pub fn starting_at(lsn: Lsn) -> RecentWrites {
        RecentWrites {
            map: HashMap::new(),
            floor: lsn,
            max: lsn,
        }
    }

    pub fn record(&mut self, table: TableId, key: &[u8], lsn: Lsn) {
        if self.map.len() >= MAX_ENTRIES {
            self.map.clear();
            self.floor = self.max;
        }
        self.max = self.max.max(lsn);
        self.map.insert((table, key.to_vec()), lsn);
    }

    /// Every key may have been written at `lsn` (bulk loads).
    pub fn record_all(&mut self, lsn: Lsn) {
        self.map.clear();
        self.max = self.max.max(lsn);
        self.floor = self.max;
    }

    pub fn last_write(&self, table: TableId, key: &[u8]) -> Lsn {
        // Look the key up without allocating a tuple key.
        match self.map.get(&(table, key.to_vec())) {
            Some(l) => (*l).max(self.floor),
            None => self.floor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_answers_below_the_latest_write() {
        let mut r = RecentWrites::starting_at(Lsn(10));
        assert_eq!(r.last_write(TableId(1), b"a"), Lsn(10));
        r.record(TableId(1), b"a", Lsn(12));
        assert_eq!(r.last_write(TableId(1), b"a"), Lsn(12));
        assert_eq!(r.last_write(TableId(2), b"a"), Lsn(10));
        r.record_all(Lsn(20));
        assert_eq!(r.last_write(TableId(1), b"a"), Lsn(20));
        assert_eq!(r.last_write(TableId(1), b"b"), Lsn(20));
    }
}
