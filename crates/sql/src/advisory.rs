//! Session-level advisory locks: `pg_try_advisory_lock`,
//! `pg_advisory_unlock`, `pg_advisory_unlock_all` (and their shared and
//! two-key forms), held until unlocked or until the session ends.
//!
//! As in PostgreSQL a session may take the same lock several times and
//! must unlock it as many times; an exclusive lock excludes every other
//! session's lock on the key, a shared one only exclusive ones.
//!
//! The waiting forms (`pg_advisory_lock`, `pg_advisory_lock_shared`) and
//! the transaction-scoped ones (`pg_advisory_xact_lock`, ...) are refused
//! with 0A000 rather than approximated: a wait inside a running statement
//! could not be cancelled yet, and transaction-scoped locks need a release
//! at COMMIT/ROLLBACK that is not built.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use parking_lot::Mutex;

use crate::error::SqlError;
use crate::udf_args::int_at;

/// Who holds a key, and how many times.
#[derive(Default)]
struct Holders {
    exclusive: Option<(u64, u32)>,
    shared: HashMap<u64, u32>,
}

/// Every advisory lock of the database.
#[derive(Default)]
pub struct AdvisoryLocks {
    keys: Mutex<HashMap<i64, Holders>>,
}

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// A fresh owner id for a session (backend PIDs are random and may repeat).
pub fn new_owner() -> u64 {
    NEXT_OWNER.fetch_add(1, Ordering::Relaxed)
}

impl AdvisoryLocks {
    /// Takes the lock if no other session's lock conflicts.
    pub fn try_lock(&self, owner: u64, key: i64, shared: bool) -> bool {
        let mut keys = self.keys.lock();
        let h = keys.entry(key).or_default();
        let others_exclusive = h.exclusive.is_some_and(|(o, _)| o != owner);
        let others_shared = h.shared.keys().any(|o| *o != owner);
        if others_exclusive || (!shared && others_shared) {
            return false;
        }
        if shared {
            *h.shared.entry(owner).or_insert(0) += 1;
        } else {
            match &mut h.exclusive {
                Some((_, n)) => *n += 1,
                None => h.exclusive = Some((owner, 1)),
            }
        }
        true
    }

    /// Releases one hold; false when the session held none of that kind.
    pub fn unlock(&self, owner: u64, key: i64, shared: bool) -> bool {
        let mut keys = self.keys.lock();
        let Some(h) = keys.get_mut(&key) else {
            return false;
        };
        let released = if shared {
            match h.shared.get_mut(&owner) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    true
                }
                Some(_) => {
                    h.shared.remove(&owner);
                    true
                }
                None => false,
            }
        } else {
            match &mut h.exclusive {
                Some((o, n)) if *o == owner && *n > 1 => {
                    *n -= 1;
                    true
                }
                Some((o, _)) if *o == owner => {
                    h.exclusive = None;
                    true
                }
                _ => false,
            }
        };
        if h.exclusive.is_none() && h.shared.is_empty() {
            keys.remove(&key);
        }
        released
    }

    /// Releases everything `owner` holds (unlock_all, session end).
    pub fn release_all(&self, owner: u64) {
        let mut keys = self.keys.lock();
        keys.retain(|_, h| {
            if h.exclusive.is_some_and(|(o, _)| o == owner) {
                h.exclusive = None;
            }
            h.shared.remove(&owner);
            h.exclusive.is_some() || !h.shared.is_empty()
        });
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    TryLock { shared: bool },
    Unlock { shared: bool },
    UnlockAll,
    Refused,
}

struct AdvisoryFunction {
    name: &'static str,
    op: Op,
    signature: Signature,
    locks: Arc<AdvisoryLocks>,
    owner: u64,
}

impl std::fmt::Debug for AdvisoryFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AdvisoryFunction({})", self.name)
    }
}
impl PartialEq for AdvisoryFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.owner == other.owner
    }
}
impl Eq for AdvisoryFunction {}
impl std::hash::Hash for AdvisoryFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.owner.hash(state);
    }
}

/// The lock key of one row: `(bigint)` or `(int, int)` as PostgreSQL
/// combines them (high and low 32 bits).
fn key_at(args: &[ColumnarValue], row: usize) -> DfResult<Option<i64>> {
    match args.len() {
        1 => int_at(args, 0, row),
        2 => {
            let (Some(hi), Some(lo)) = (int_at(args, 0, row)?, int_at(args, 1, row)?) else {
                return Ok(None);
            };
            let (Ok(hi), Ok(lo)) = (i32::try_from(hi), i32::try_from(lo)) else {
                return Err(DataFusionError::External(Box::new(
                    SqlError::NumericOutOfRange("integer out of range".into()),
                )));
            };
            Ok(Some((i64::from(hi) << 32) | i64::from(lo as u32)))
        }
        _ => Ok(None),
    }
}

impl ScalarUDFImpl for AdvisoryFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(match self.op {
            Op::UnlockAll | Op::Refused => DataType::Null,
            _ => DataType::Boolean,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let n = args.number_rows;
        match self.op {
            Op::Refused => Err(DataFusionError::External(Box::new(
                SqlError::FeatureNotSupported(format!(
                    "{} is not supported yet (a wait for an advisory lock cannot be cancelled, \
                     and transaction-scoped advisory locks are not built); \
                     use pg_try_advisory_lock",
                    self.name
                )),
            ))),
            Op::UnlockAll => {
                self.locks.release_all(self.owner);
                Ok(ColumnarValue::Scalar(ScalarValue::Null))
            }
            Op::TryLock { shared } | Op::Unlock { shared } => {
                let mut out = BooleanBuilder::with_capacity(n);
                for row in 0..n {
                    match key_at(&args.args, row)? {
                        None => out.append_null(),
                        Some(key) => out.append_value(match self.op {
                            Op::TryLock { .. } => self.locks.try_lock(self.owner, key, shared),
                            _ => self.locks.unlock(self.owner, key, shared),
                        }),
                    }
                }
                Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
            }
        }
    }
}

/// The advisory lock functions of the session `owner`.
pub fn advisory_functions(locks: &Arc<AdvisoryLocks>, owner: u64) -> Vec<ScalarUDF> {
    let keyed = || {
        Signature::one_of(
            vec![TypeSignature::Any(1), TypeSignature::Any(2)],
            Volatility::Volatile,
        )
    };
    let mut functions = vec![
        (
            "pg_try_advisory_lock",
            Op::TryLock { shared: false },
            keyed(),
        ),
        (
            "pg_try_advisory_lock_shared",
            Op::TryLock { shared: true },
            keyed(),
        ),
        ("pg_advisory_unlock", Op::Unlock { shared: false }, keyed()),
        (
            "pg_advisory_unlock_shared",
            Op::Unlock { shared: true },
            keyed(),
        ),
        (
            "pg_advisory_unlock_all",
            Op::UnlockAll,
            Signature::nullary(Volatility::Volatile),
        ),
    ];
    for refused in [
        "pg_advisory_lock",
        "pg_advisory_lock_shared",
        "pg_advisory_xact_lock",
        "pg_advisory_xact_lock_shared",
        "pg_try_advisory_xact_lock",
        "pg_try_advisory_xact_lock_shared",
    ] {
        functions.push((refused, Op::Refused, keyed()));
    }
    functions
        .into_iter()
        .map(|(name, op, signature)| {
            ScalarUDF::new_from_impl(AdvisoryFunction {
                name,
                op,
                signature,
                locks: Arc::clone(locks),
                owner,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_shared_and_reentrant() {
        let l = AdvisoryLocks::default();
        assert!(l.try_lock(1, 7, false));
        assert!(l.try_lock(1, 7, false), "re-entrant for the holder");
        assert!(!l.try_lock(2, 7, false));
        assert!(!l.try_lock(2, 7, true));
        assert!(l.unlock(1, 7, false));
        assert!(!l.try_lock(2, 7, false), "still held once");
        assert!(l.unlock(1, 7, false));
        assert!(!l.unlock(1, 7, false), "not held any more");
        assert!(l.try_lock(2, 7, true));
        assert!(l.try_lock(3, 7, true));
        assert!(!l.try_lock(1, 7, false));
        l.release_all(2);
        l.release_all(3);
        assert!(l.try_lock(1, 7, false));
        l.release_all(1);
        assert!(l.keys.lock().is_empty());
    }
}
