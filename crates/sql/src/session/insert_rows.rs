//! Rows an INSERT (and COPY inside a block, a key-moving UPDATE, the
//! fixed-plan path's transactional inserts) writes into a transaction:
//! each key is locked, then checked against the transaction's own writes
//! and the latest committed version, and ON CONFLICT resolves what it
//! arbitrates (`crate::arbiter`): the primary key in storage's terms, and
//! for DO NOTHING the UNIQUE indexes it names, whose violation skips the
//! row instead of failing the statement.

use std::collections::HashSet;
use std::sync::Arc;

use eddy_common::{Lsn, Row};
use eddy_storage::engine::key_for_row;
use eddy_storage::{LockMode, OnConflict, StorageError, Table};

use crate::error::{Result, SqlError};
use crate::txn::{Isolation, Transaction};

/// How an insert resolves conflicts.
#[derive(Clone, Copy)]
pub(crate) struct Conflicts<'a> {
    /// On the primary key (`Error` when the conflict target is a UNIQUE
    /// index: a key conflict is then 23505).
    pub on_conflict: &'a OnConflict,
    /// UNIQUE indexes (by name) whose violation skips the row (DO NOTHING).
    pub skip_unique: &'a [String],
}

impl Conflicts<'static> {
    /// Every conflict is an error (23505).
    pub fn error() -> Conflicts<'static> {
        Conflicts {
            on_conflict: &OnConflict::Error,
            skip_unique: &[],
        }
    }
}

impl Conflicts<'_> {
    /// Whether a write's result is a conflict on an index that skips the
    /// row (the write left nothing behind: the check comes first).
    fn skipped(&self, r: Result<()>) -> Result<bool> {
        match r {
            Ok(()) => Ok(false),
            Err(SqlError::Storage(StorageError::UniqueViolation { constraint, .. }))
                if self.skip_unique.contains(&constraint) =>
            {
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }
}

/// Inserts rows into the transaction: each key is locked, then checked
/// against the transaction's own writes and the latest committed version.
pub(crate) fn insert_rows(
    txn: &mut Transaction,
    table: &Arc<Table>,
    lsns: &[Lsn],
    rows: Vec<Row>,
    conflicts: Conflicts<'_>,
    mut written: Option<&mut Vec<Row>>,
) -> Result<u64> {
    let on_conflict = conflicts.on_conflict;
    let def = table.def().clone();
    let mut n = 0u64;
    // DO UPDATE: the keys this statement inserted or updated; a second
    // proposed row for one of them is PostgreSQL's 21000
    let mut touched: HashSet<Vec<u8>> = HashSet::new();
    let updates = matches!(on_conflict, OnConflict::Update(_));
    for row in rows {
        eddy_storage::codec::check_row(&def, &row)?;
        if !def.has_primary_key() {
            let kept = row.clone();
            if conflicts.skipped(txn.append(table, row))? {
                continue;
            }
            if let Some(w) = written.as_mut() {
                w.push(kept);
            }
            n += 1;
            continue;
        }
        let key = key_for_row(&def, &row, 0);
        if updates && !touched.insert(key.as_bytes().to_vec()) {
            return Err(SqlError::ConflictUpdateTwice);
        }
        txn.lock_rows(table, [key.as_bytes()], LockMode::Exclusive)?;
        let existing = match txn.own_row(table, key.as_bytes()) {
            Some(own) => own,
            None if txn.truncated(table) => None,
            None => {
                if txn.isolation == Isolation::RepeatableRead
                    && txn.changed_after(table, lsns, [key.as_bytes()])?
                {
                    return Err(StorageError::SerializationFailure.into());
                }
                table.get_by_key(&key)?
            }
        };
        let new_row = match (existing, on_conflict) {
            (None, _) => Some(row),
            (Some(_), OnConflict::Error) => {
                return Err(StorageError::DuplicateKey {
                    table: def.name.clone(),
                    key: eddy_storage::codec::describe_values(&def, &row),
                }
                .into())
            }
            (Some(_), OnConflict::DoNothing) => None,
            (Some(_), OnConflict::Replace) => Some(row),
            (Some(old), OnConflict::Update(f)) => {
                match f(&old, &row).map_err(StorageError::ConflictUpdate)? {
                    Some(new) => {
                        eddy_storage::codec::check_row(&def, &new)?;
                        if key_for_row(&def, &new, 0) != key {
                            return Err(SqlError::FeatureNotSupported(
                                "ON CONFLICT DO UPDATE cannot change the primary key".into(),
                            ));
                        }
                        Some(new)
                    }
                    None => None,
                }
            }
        };
        if let Some(r) = new_row {
            let kept = r.clone();
            if conflicts.skipped(txn.put(table, key.0, Some(r)))? {
                continue;
            }
            if let Some(w) = written.as_mut() {
                w.push(kept);
            }
            n += 1;
        }
    }
    Ok(n)
}
