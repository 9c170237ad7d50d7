//! Rows an INSERT (and COPY inside a block, a key-moving UPDATE, the
//! fixed-plan path's transactional inserts) writes into a transaction:
//! each key is locked, then checked against the transaction's own writes
//! and the latest committed version, and ON CONFLICT resolves what it
//! arbitrates (`crate::arbiter`): the primary key in storage's terms; for
//! DO NOTHING the UNIQUE indexes it names, whose violation skips the row
//! instead of failing the statement; for DO UPDATE the UNIQUE indexes it
//! names, through which the proposed row finds the row it updates
//! ([`update_through_unique`]).

use std::collections::HashSet;
use std::sync::Arc;

use eddy_common::{IndexDef, Lsn, Row, TableDef};
use eddy_storage::engine::key_for_row;
use eddy_storage::{ConflictUpdateFn, Key, LockMode, OnConflict, StorageError, Table};

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
    /// DO UPDATE arbitrated by UNIQUE indexes: a proposed row that
    /// conflicts on them updates the row it conflicts with.
    pub update_unique: Option<UniqueUpdate<'a>>,
}

/// DO UPDATE through UNIQUE indexes.
#[derive(Clone, Copy)]
pub(crate) struct UniqueUpdate<'a> {
    /// The arbiter indexes' names (all on the same columns).
    pub indexes: &'a [String],
    /// (existing, proposed) -> the new row, `None` where DO UPDATE's WHERE
    /// keeps the old one.
    pub update: &'a ConflictUpdateFn,
}

impl Conflicts<'static> {
    /// Every conflict is an error (23505).
    pub fn error() -> Conflicts<'static> {
        Conflicts {
            on_conflict: &OnConflict::Error,
            skip_unique: &[],
            update_unique: None,
        }
    }
}

impl Conflicts<'_> {
    /// Whether a write's error is a conflict on an index that skips the
    /// row (the write left nothing behind: the check comes first).
    fn skips(&self, e: &SqlError) -> bool {
        matches!(e, SqlError::Storage(StorageError::UniqueViolation { constraint, .. })
            if self.skip_unique.contains(constraint))
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
    // DO UPDATE: the keys this statement inserted or updated (through a
    // unique index: the rows it reached); a second proposed row for one of
    // them is PostgreSQL's 21000
    let mut touched: HashSet<Vec<u8>> = HashSet::new();
    let updates = matches!(on_conflict, OnConflict::Update(_));
    let arbiter = match conflicts.update_unique {
        Some(u) => Some((u, arbiter_index(&def, u.indexes)?)),
        None => None,
    };
    for row in rows {
        eddy_storage::codec::check_row(&def, &row)?;
        if let Some((u, index)) = arbiter {
            if let Found::Updated { key, new } =
                update_through_unique(txn, table, lsns, u, index, &row)?
            {
                if !touched.insert(key) {
                    return Err(SqlError::ConflictUpdateTwice);
                }
                if let Some(new) = new {
                    if let Some(w) = written.as_mut() {
                        w.push(new);
                    }
                    n += 1;
                }
                continue;
            }
        }
        if !def.has_primary_key() {
            let kept = row.clone();
            let key = match txn.append(table, row) {
                Ok(key) => key,
                Err(e) if conflicts.skips(&e) => {
                    skip_seen_by_snapshot(txn, table, lsns, &kept, &e)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if arbiter.is_some() {
                touched.insert(key);
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
            match txn.put(table, key.0.clone(), Some(r)) {
                Ok(()) => {}
                Err(e) if conflicts.skips(&e) => {
                    skip_seen_by_snapshot(txn, table, lsns, &kept, &e)?;
                    continue;
                }
                Err(e) => return Err(e),
            }
            if arbiter.is_some() {
                touched.insert(key.0);
            }
            if let Some(w) = written.as_mut() {
                w.push(kept);
            }
            n += 1;
        }
    }
    Ok(n)
}

/// DO NOTHING skips a row for a conflict on a UNIQUE index (`e`). Under
/// REPEATABLE READ the conflicting row must be one the snapshot sees: a
/// row committed (or changed) after it is 40001, as in PostgreSQL, whose
/// transaction could otherwise skip an insert because of a row it cannot
/// read. The primary key has the same check before its lock
/// ([`insert_rows`]).
fn skip_seen_by_snapshot(
    txn: &Transaction,
    table: &Table,
    lsns: &[Lsn],
    row: &Row,
    e: &SqlError,
) -> Result<()> {
    if txn.isolation != Isolation::RepeatableRead {
        return Ok(());
    }
    let SqlError::Storage(StorageError::UniqueViolation { constraint, .. }) = e else {
        return Ok(());
    };
    let def = table.def();
    let Some(index) = def.indexes.iter().find(|i| &i.name == constraint) else {
        return Ok(());
    };
    let Some(index_key) = eddy_storage::index::index_key(&index.columns, row) else {
        return Ok(());
    };
    if let Some(owner) = txn.unique_owner(table, &index.name, &index_key)? {
        if txn.changed_after(table, lsns, [owner.as_slice()])? {
            return Err(StorageError::SerializationFailure.into());
        }
    }
    Ok(())
}

/// What a proposed row found through the arbiter index of DO UPDATE.
enum Found {
    /// No row holds its index key: it is inserted.
    None,
    /// The row under `key` held it; `new` is what was written there
    /// (`None`: DO UPDATE's WHERE kept the old row).
    Updated { key: Vec<u8>, new: Option<Row> },
}

/// How often a proposed row looks for its conflicting row again when the
/// row it found changed before its lock was granted, before the statement
/// fails with 40001.
const FIND_TRIES: usize = 16;

/// The arbiter index of DO UPDATE (the named indexes share their columns,
/// so the first one stands for all).
fn arbiter_index<'d>(def: &'d TableDef, names: &[String]) -> Result<&'d IndexDef> {
    let first = names
        .first()
        .ok_or_else(|| SqlError::Internal("ON CONFLICT DO UPDATE without an arbiter".into()))?;
    def.indexes
        .iter()
        .find(|i| &i.name == first)
        .ok_or_else(|| SqlError::Internal(format!("arbiter index \"{first}\" is gone")))
}

/// DO UPDATE through a UNIQUE index: finds the row that holds `row`'s key
/// in `index` (the transaction's own rows first, then committed ones;
/// where none does, after waiting for a transaction that writes the key),
/// locks that row, reads it again under the lock (READ COMMITTED: a row that
/// changed meanwhile is looked up anew; REPEATABLE READ: 40001), and writes
/// the update of it. A proposed row with a NULL in the index's columns
/// conflicts with nothing, as in PostgreSQL.
fn update_through_unique(
    txn: &mut Transaction,
    table: &Arc<Table>,
    lsns: &[Lsn],
    u: UniqueUpdate<'_>,
    index: &IndexDef,
    row: &Row,
) -> Result<Found> {
    if eddy_storage::index::has_null(&index.columns, row) {
        return Ok(Found::None);
    }
    let Some(index_key) = eddy_storage::index::index_key(&index.columns, row) else {
        return Ok(Found::None);
    };
    let def = Arc::clone(table.def());
    let mut value_locked = false;
    for _ in 0..FIND_TRIES {
        let Some(key) = txn.unique_owner(table, &index.name, &index_key)? else {
            if value_locked {
                return Ok(Found::None);
            }
            // no row holds the value: a transaction writing it now is
            // waited for, and its row is then committed (found on the next
            // look) or gone. Only now: an UPDATE locks its row before the
            // value, so taking the value's lock first would deadlock.
            txn.lock_unique_value(table, &index.name, &index_key)?;
            value_locked = true;
            continue;
        };
        txn.lock_rows(table, [key.as_slice()], LockMode::Exclusive)?;
        let current = match txn.own_row(table, &key) {
            Some(own) => own,
            None => {
                if txn.isolation == Isolation::RepeatableRead
                    && txn.changed_after(table, lsns, [key.as_slice()])?
                {
                    return Err(StorageError::SerializationFailure.into());
                }
                table.get_by_key(&Key(key.clone()))?
            }
        };
        let Some(old) = current else { continue };
        let still_holds = !eddy_storage::index::has_null(&index.columns, &old)
            && eddy_storage::index::index_key(&index.columns, &old).as_ref() == Some(&index_key);
        if !still_holds {
            continue;
        }
        let new = (u.update)(&old, row).map_err(StorageError::ConflictUpdate)?;
        if let Some(new) = &new {
            eddy_storage::codec::check_row(&def, new)?;
            if def.has_primary_key() && key_for_row(&def, new, 0).as_bytes() != key.as_slice() {
                return Err(SqlError::FeatureNotSupported(
                    "ON CONFLICT DO UPDATE cannot change the primary key".into(),
                ));
            }
            txn.put(table, key.clone(), Some(new.clone()))?;
        }
        return Ok(Found::Updated { key, new });
    }
    Err(StorageError::SerializationFailure.into())
}
