//! Delete map of one column-tablet file or memtable: which rows are deleted,
//! and at which LSN.
//!
//! Invariants:
//! * entries are appended in LSN order by the shard's single commit leader;
//! * a row is deleted at most once (the primary-key index only ever points
//!   at a live row);
//! * [`DeleteMap::visible_at`] is a pure function of the entries with
//!   LSN `<= at`, so a snapshot taken at `at` sees the same bitmap forever,
//!   however many deletes arrive later.
//! * After a restart all persisted deletes carry LSN 0: no reader can ask for
//!   an LSN below the last flush.

use eddy_common::Lsn;
use roaring::RoaringBitmap;

#[derive(Default, Clone)]
pub struct DeleteMap {
    /// (lsn, row), LSN ascending.
    entries: Vec<(Lsn, u32)>,
    all: RoaringBitmap,
}

impl DeleteMap {
    /// Restores a persisted bitmap (all entries at LSN 0).
    pub fn from_bitmap(all: RoaringBitmap) -> DeleteMap {
        DeleteMap {
            entries: all.iter().map(|r| (Lsn::ZERO, r)).collect(),
            all,
        }
    }

    pub fn delete(&mut self, lsn: Lsn, row: u32) {
        debug_assert!(self.entries.last().is_none_or(|&(l, _)| l <= lsn));
        if self.all.insert(row) {
            self.entries.push((lsn, row));
        }
    }

    pub fn is_deleted(&self, row: u32) -> bool {
        self.all.contains(row)
    }

    pub fn len(&self) -> u64 {
        self.all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Rows deleted at or below `at`.
    pub fn visible_at(&self, at: Lsn) -> RoaringBitmap {
        match self.entries.last() {
            None => RoaringBitmap::new(),
            Some(&(last, _)) if last <= at => self.all.clone(),
            Some(_) => {
                let n = self.entries.partition_point(|&(l, _)| l <= at);
                self.entries[..n].iter().map(|&(_, r)| r).collect()
            }
        }
    }

    /// Entries above `after` (carried over to a compacted file).
    pub fn entries_after(&self, after: Lsn) -> impl Iterator<Item = (Lsn, u32)> + '_ {
        let n = self.entries.partition_point(|&(l, _)| l <= after);
        self.entries[n..].iter().copied()
    }

    /// How many deletes were recorded (a mark for [`DeleteMap::entries_from`]).
    pub fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// Entries recorded after the first `mark` ones (deletes that arrived
    /// while a compaction rewrote this file: carried over to its output).
    pub fn entries_from(&self, mark: usize) -> &[(Lsn, u32)] {
        self.entries.get(mark..).unwrap_or(&[])
    }

    pub fn bitmap(&self) -> &RoaringBitmap {
        &self.all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_see_only_deletes_at_or_below_their_lsn() {
        let mut d = DeleteMap::default();
        d.delete(Lsn(3), 10);
        d.delete(Lsn(5), 11);
        d.delete(Lsn(5), 12);
        d.delete(Lsn(9), 10); // already deleted: ignored
        assert_eq!(d.visible_at(Lsn(2)).len(), 0);
        assert_eq!(d.visible_at(Lsn(4)).iter().collect::<Vec<_>>(), vec![10]);
        assert_eq!(d.visible_at(Lsn(5)).len(), 3);
        assert_eq!(d.entries_after(Lsn(3)).count(), 2);
        assert!(d.is_deleted(12) && !d.is_deleted(13));
    }
}
