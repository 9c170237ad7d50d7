//! Fixed plans inside a transaction block: primary-key lookups and
//! single-row writes that read and write through the session's
//! [`Transaction`] without DataFusion.
//!
//! The rules are the general path's (see [`crate::txn`] and
//! `session/dml.rs`), specialised to one key:
//! * a lookup reads the transaction's own write of the key if it made one,
//!   else the committed version at the statement's cut (READ COMMITTED: a
//!   cut taken now; REPEATABLE READ: the pinned snapshot's);
//! * a write locks its row first, then (REPEATABLE READ) fails with 40001
//!   if the row changed after the snapshot, then decides on the newest
//!   version (which, with the lock held, nobody else can change: that is
//!   PostgreSQL's EvalPlanQual for one row) and records the new version in
//!   the write set.
//!
//! When a version cannot be read by key (a column-only table whose key
//! changed after a REPEATABLE READ snapshot), [`Session::execute_fast_in_txn`]
//! returns `None` before it has changed anything and the caller takes the
//! general path.

use std::sync::Arc;

use eddy_common::{Row, Value};
use eddy_storage::{Key, LockMode, StorageError, Table};

use super::insert_rows::{insert_rows, Conflicts};
use super::{run_blocking, Output, Session};
use crate::error::{Result, SqlError};
use crate::fastpath::{self, FastPlan};
use crate::txn::{Isolation, Transaction};

impl Session {
    /// Runs `plan` in the open transaction; `None`: take the general path.
    pub(super) fn execute_fast_in_txn(
        &mut self,
        plan: &FastPlan,
        params: &[Value],
    ) -> Result<Option<Output>> {
        let engine = Arc::clone(&self.db.engine);
        let txn = self
            .txn
            .as_mut()
            .ok_or_else(|| SqlError::Internal("fixed plan outside a transaction".into()))?;
        run_blocking(|| match plan {
            FastPlan::Get {
                table,
                proj,
                columns,
                keys,
                ..
            } => {
                let t = fastpath::table_of(&engine, table)?;
                let def = t.def().clone();
                let keys = fastpath::lookup_keys(keys, &def, params)?;
                let lsns = txn.statement_lsns(&t);
                let mut rows = Vec::with_capacity(keys.len());
                for k in &keys {
                    match txn.point_read(&t, &t.key_of(k)?, &lsns)? {
                        Some(Some(r)) => rows.push(r),
                        Some(None) => {}
                        None => return Ok(None),
                    }
                }
                fastpath::projected_output(&def, table, proj, columns, rows).map(Some)
            }
            FastPlan::Insert {
                table,
                targets,
                values,
                on_conflict,
                ..
            } => {
                let t = fastpath::table_of(&engine, table)?;
                let def = t.def().clone();
                let row = fastpath::insert_row(
                    &def,
                    table,
                    targets,
                    values,
                    params,
                    txn.started_at_micros,
                )?;
                let lsns = txn.statement_lsns(&t);
                // ON CONFLICT DO UPDATE counts the rows it updated, as
                // PostgreSQL does; DO NOTHING only those it inserted.
                let n = insert_rows(
                    txn,
                    &t,
                    &lsns,
                    vec![row],
                    Conflicts {
                        on_conflict,
                        skip_unique: &[],
                        update_unique: None,
                    },
                    None,
                )?;
                Ok(Some(Output::Command(format!("INSERT 0 {n}"))))
            }
            FastPlan::Update {
                table,
                sets,
                adds,
                key,
                ..
            } => {
                let t = fastpath::table_of(&engine, table)?;
                let def = t.def().clone();
                let pk = fastpath::key_values(key, &def, params)?;
                if pk.iter().any(Value::is_null) {
                    return Ok(Some(Output::Command("UPDATE 0".into())));
                }
                let k = t.key_of(&pk)?;
                let Some(old) = locked_current(txn, &t, &k)? else {
                    return Ok(Some(Output::Command("UPDATE 0".into())));
                };
                let new =
                    fastpath::updated_row(&def, &old, sets, adds, params, txn.started_at_micros)?;
                eddy_storage::codec::check_row(&def, &new)?;
                txn.put(&t, k.0, Some(new))?;
                Ok(Some(Output::Command("UPDATE 1".into())))
            }
            FastPlan::Delete { table, key, .. } => {
                let t = fastpath::table_of(&engine, table)?;
                let def = t.def().clone();
                let pk = fastpath::key_values(key, &def, params)?;
                if pk.iter().any(Value::is_null) {
                    return Ok(Some(Output::Command("DELETE 0".into())));
                }
                let k = t.key_of(&pk)?;
                if locked_current(txn, &t, &k)?.is_none() {
                    return Ok(Some(Output::Command("DELETE 0".into())));
                }
                txn.put(&t, k.0, None)?;
                Ok(Some(Output::Command("DELETE 1".into())))
            }
        })
    }
}

/// Locks `key` and returns the version the write replaces: the
/// transaction's own, or the newest committed one (40001 under REPEATABLE
/// READ if that is newer than the snapshot).
fn locked_current(txn: &mut Transaction, t: &Arc<Table>, key: &Key) -> Result<Option<Row>> {
    // Only REPEATABLE READ compares with a snapshot; it is pinned before
    // the lock wait (a first statement's snapshot predates the wait).
    let pinned = (txn.isolation == Isolation::RepeatableRead).then(|| txn.statement_lsns(t));
    txn.lock_rows(t, [key.as_bytes()], LockMode::Exclusive)?;
    if let Some(own) = txn.own_row(t, key.as_bytes()) {
        return Ok(own);
    }
    if txn.truncated(t) {
        return Ok(None);
    }
    if let Some(lsns) = &pinned {
        if txn.changed_after(t, lsns, [key.as_bytes()])? {
            return Err(StorageError::SerializationFailure.into());
        }
    }
    Ok(t.get_by_key(key)?)
}
