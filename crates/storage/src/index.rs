//! The secondary-index tablet of one table in one shard: an ordered map
//! from (index key, primary key) to the LSN that removed the entry.
//!
//! Invariants (`docs/design/indexes.md` has the whole design):
//! * **Live entries are the latest state.** An entry with `removed == None`
//!   exists iff the newest applied version of its primary key has that index
//!   key. Entries change only in `Shard::apply` (and the bulk install and
//!   build paths), under the shard's commit lock, before the LSN that made
//!   the change is published.
//! * **No false negatives at a snapshot.** An entry removed at `L` stays
//!   (with `removed == Some(L)`) until purged; a lookup at `S` returns every
//!   entry with `removed` unset or above `S`, a superset of the rows visible
//!   at `S` with a key in range. Callers read each candidate at `S` and
//!   re-check the predicate.
//! * **Purges raise a floor.** Purging removed entries raises `gc_floor` to
//!   the newest purged removal; a lookup at `S < gc_floor` is refused
//!   (`None`), and the caller scans the table instead.

use std::collections::BTreeMap;
use std::ops::Bound;

use eddy_common::{IndexDef, Lsn, Value};
use parking_lot::RwLock;

use crate::codec::encode_key_value;

/// Removed entries are purged once there are this many and more than live
/// ones.
const PURGE_MIN: usize = 4096;

/// The memcomparable key of `row` under index columns `cols`, floats
/// normalised so that values SQL calls equal encode equally (`-0 = 0`,
/// every NaN the same); `None` when the row lacks a column.
pub fn index_key(cols: &[usize], row: &[Value]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(16 * cols.len());
    for &c in cols {
        encode_index_value(row.get(c)?, &mut out);
    }
    Some(out)
}

/// Appends one value of an index key (see [`index_key`]).
pub fn encode_index_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Double(f) if *f == 0.0 => encode_key_value(&Value::Double(0.0), out),
        Value::Double(f) if f.is_nan() => encode_key_value(&Value::Double(f64::NAN), out),
        Value::Real(f) if *f == 0.0 => encode_key_value(&Value::Real(0.0), out),
        Value::Real(f) if f.is_nan() => encode_key_value(&Value::Real(f32::NAN), out),
        other => encode_key_value(other, out),
    }
}

/// Whether any indexed column of `row` is NULL (such a key never
/// conflicts: NULLs are distinct).
pub fn has_null(cols: &[usize], row: &[Value]) -> bool {
    cols.iter().any(|&c| row.get(c).is_none_or(|v| v.is_null()))
}

/// First byte of an encoded non-NULL value (`codec::KEY_VALUE`): an
/// unbounded lower end starts here, so NULL keys are not candidates of a
/// range (no range predicate matches NULL).
const FIRST_NON_NULL: u8 = 0x01;

#[derive(Default)]
struct IndexState {
    entries: BTreeMap<(Vec<u8>, Vec<u8>), Option<Lsn>>,
    removed: usize,
    gc_floor: Lsn,
}

/// One index of one table in one shard.
pub struct ShardIndex {
    pub def: IndexDef,
    state: RwLock<IndexState>,
}

impl ShardIndex {
    pub fn new(def: IndexDef) -> ShardIndex {
        ShardIndex {
            def,
            state: RwLock::new(IndexState::default()),
        }
    }

    /// Records that the row under `pk` changed from `old` to `new` at
    /// `lsn` (either may be absent: insert, delete).
    pub fn apply_change(&self, pk: &[u8], old: Option<&[Value]>, new: Option<&[Value]>, lsn: Lsn) {
        let cols = &self.def.columns;
        let old_key = old.and_then(|r| index_key(cols, r));
        let new_key = new.and_then(|r| index_key(cols, r));
        if old_key == new_key && new_key.is_some() {
            // unchanged key: still live (revived if an earlier version had it)
            if let Some(k) = new_key {
                self.state.write().entries.insert((k, pk.to_vec()), None);
            }
            return;
        }
        let mut st = self.state.write();
        if let Some(k) = old_key {
            if let Some(e) = st.entries.get_mut(&(k, pk.to_vec())) {
                if e.is_none() {
                    *e = Some(lsn);
                    st.removed += 1;
                }
            }
        }
        if let Some(k) = new_key {
            if let Some(Some(_)) = st.entries.insert((k, pk.to_vec()), None) {
                st.removed = st.removed.saturating_sub(1);
            }
        }
        let live = st.entries.len() - st.removed;
        if st.removed >= PURGE_MIN && st.removed > live {
            purge(&mut st);
        }
    }

    /// Adds a live entry (building from stored rows).
    pub fn add_live(&self, pk: &[u8], row: &[Value]) {
        if let Some(k) = index_key(&self.def.columns, row) {
            self.state.write().entries.insert((k, pk.to_vec()), None);
        }
    }

    /// Forgets every entry; lookups below `floor` are refused from now on
    /// (a rebuild keeps no removed entries).
    pub fn clear(&self, floor: Lsn) {
        let mut st = self.state.write();
        st.entries.clear();
        st.removed = 0;
        st.gc_floor = st.gc_floor.max(floor);
    }

    /// Primary keys of the live rows with index key `key` (a UNIQUE check
    /// against the latest state).
    pub fn live_owners(&self, key: &[u8]) -> Vec<Vec<u8>> {
        let st = self.state.read();
        let lo = (key.to_vec(), Vec::new());
        st.entries
            .range(lo..)
            .take_while(|((k, _), _)| k.as_slice() == key)
            .filter(|(_, removed)| removed.is_none())
            .map(|((_, pk), _)| pk.clone())
            .collect()
    }

    /// Primary keys (each once) of every entry whose key's leading encoded
    /// columns lie within `(lower, upper)` and that was not removed at or
    /// before `at`; `None` when entries that `at` may need were purged.
    pub fn lookup(
        &self,
        lower: &Bound<Vec<u8>>,
        upper: &Bound<Vec<u8>>,
        at: Lsn,
    ) -> Option<Vec<Vec<u8>>> {
        let st = self.state.read();
        if at < st.gc_floor {
            return None;
        }
        let start = match lower {
            Bound::Included(b) | Bound::Excluded(b) => b.clone(),
            Bound::Unbounded => vec![FIRST_NON_NULL],
        };
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for ((k, pk), removed) in st.entries.range((start, Vec::new())..) {
            if let Bound::Excluded(b) = lower {
                if k.starts_with(b) {
                    continue;
                }
            }
            let within = match upper {
                Bound::Unbounded => true,
                Bound::Included(b) => k.as_slice() <= b.as_slice() || k.starts_with(b),
                Bound::Excluded(b) => k.as_slice() < b.as_slice(),
            };
            if !within {
                break;
            }
            // a key whose row changed index key within the range after `at`
            // has two entries: each row once
            if removed.is_none_or(|l| l > at) && seen.insert(pk.as_slice()) {
                out.push(pk.clone());
            }
        }
        Some(out)
    }

    /// Live entries as (index key, primary key), in order (tests, checks).
    pub fn live_entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.state
            .read()
            .entries
            .iter()
            .filter(|(_, r)| r.is_none())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Number of entries, removed ones included.
    pub fn len(&self) -> usize {
        self.state.read().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn purge(st: &mut IndexState) {
    let mut floor = st.gc_floor;
    st.entries.retain(|_, removed| match removed {
        Some(l) => {
            floor = floor.max(*l);
            false
        }
        None => true,
    });
    st.removed = 0;
    st.gc_floor = floor;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx() -> ShardIndex {
        ShardIndex::new(IndexDef {
            name: "i".into(),
            columns: vec![1],
            unique: false,
            constraint: false,
            descending: vec![],
        })
    }

    fn row(pk: i32, a: Option<i32>) -> Vec<Value> {
        vec![Value::Int(pk), a.map_or(Value::Null, Value::Int)]
    }

    fn key(a: i32) -> Vec<u8> {
        index_key(&[0], &[Value::Int(a)]).unwrap_or_default()
    }

    #[test]
    fn a_snapshot_sees_the_key_a_row_had_then() {
        let i = idx();
        i.apply_change(b"1", None, Some(&row(1, Some(5))), Lsn(1));
        i.apply_change(b"1", Some(&row(1, Some(5))), Some(&row(1, Some(6))), Lsn(2));
        let eq = |a: i32, at: u64| {
            i.lookup(&Bound::Included(key(a)), &Bound::Included(key(a)), Lsn(at))
                .unwrap_or_default()
        };
        assert_eq!(eq(5, 1), vec![b"1".to_vec()]);
        assert!(eq(5, 2).is_empty());
        assert_eq!(eq(6, 2), vec![b"1".to_vec()]);
        assert_eq!(i.live_owners(&key(6)), vec![b"1".to_vec()]);
        assert!(i.live_owners(&key(5)).is_empty());
    }

    #[test]
    fn ranges_respect_their_bounds_and_skip_nulls() {
        let i = idx();
        for (pk, a) in [(1, Some(1)), (2, Some(2)), (3, Some(3)), (4, None)] {
            i.apply_change(pk.to_string().as_bytes(), None, Some(&row(pk, a)), Lsn(1));
        }
        let got = |lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>| {
            i.lookup(&lo, &hi, Lsn(1)).unwrap_or_default().len()
        };
        assert_eq!(got(Bound::Excluded(key(1)), Bound::Unbounded), 2);
        assert_eq!(got(Bound::Unbounded, Bound::Excluded(key(3))), 2);
        assert_eq!(got(Bound::Included(key(2)), Bound::Included(key(3))), 2);
        assert_eq!(got(Bound::Unbounded, Bound::Unbounded), 3);
    }

    #[test]
    fn purging_refuses_older_snapshots() {
        let i = idx();
        for n in 0..(PURGE_MIN as i32 + 10) {
            let pk = n.to_string();
            i.apply_change(pk.as_bytes(), None, Some(&row(n, Some(n))), Lsn(1));
            i.apply_change(pk.as_bytes(), Some(&row(n, Some(n))), None, Lsn(2));
        }
        assert!(i
            .lookup(&Bound::Unbounded, &Bound::Unbounded, Lsn(1))
            .is_none());
        assert_eq!(
            i.lookup(&Bound::Unbounded, &Bound::Unbounded, Lsn(2)),
            Some(vec![])
        );
    }

    #[test]
    fn minus_zero_and_zero_are_one_key() {
        assert_eq!(
            index_key(&[0], &[Value::Double(-0.0)]),
            index_key(&[0], &[Value::Double(0.0)])
        );
    }
}
