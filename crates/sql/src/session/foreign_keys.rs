//! FOREIGN KEY constraints (`docs/design/foreign_keys.md`): defined by
//! CREATE TABLE, stored in the referencing table's definition, enforced on
//! both tables' writes inside the writing transaction.
//!
//! The invariant: no committed state has a referencing row (all key
//! columns non-NULL, MATCH SIMPLE) whose referenced row is gone. Kept with
//! row locks, as PostgreSQL keeps it with FOR KEY SHARE:
//! * a write of a referencing row takes the referenced row's lock SHARED
//!   (the lock of its primary key, whether or not a row holds it now) and
//!   then checks the referenced row's latest committed version (or the
//!   transaction's own write of it), not the statement's snapshot; the
//!   lock is kept to the end of the transaction;
//! * a DELETE or key UPDATE of a referenced row holds its lock EXCLUSIVE
//!   (as every write does) and then looks for referencing rows in the
//!   latest committed state overlaid with its own writes.
//!
//! Either the child's writer holds the shared lock first (the parent's
//! writer waits for it to end, then sees its committed rows) or the
//! parent's writer holds the exclusive lock first (the child's writer waits,
//! then finds the parent gone): a committed orphan needs both to miss the
//! other, which the lock table rules out.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, BinaryArray};
use datafusion::sql::sqlparser::ast::{
    ConstraintReferenceMatchKind, DeferrableInitial, ForeignKeyConstraint, ObjectName,
    ReferentialAction,
};
use eddy_common::{ColumnType, FkAction, ForeignKeyDef, Row, TableDef, TableId, Value};
use eddy_storage::codec::describe_columns;
use eddy_storage::engine::key_for_row;
use eddy_storage::{Key, LockMode, StorageError, Table, TableSnapshot};

use super::{run_blocking, Session};
use crate::deferred_fk::TableRef;
use crate::error::{ErrorObject, Result, SqlError};
use crate::fastpath::FastPlan;
use crate::pgtypes;
use crate::rewrite::{ident_name, table_name};
use crate::txn::{Isolation, Transaction};

/// Re-scans of a referencing table whose rows changed under a cascade
/// before it gives up (40001).
const MAX_RESCANS: usize = 100;

/// A FOREIGN KEY as CREATE TABLE wrote it, before it is resolved.
pub(super) struct PendingFk {
    pub name: Option<String>,
    pub columns: Vec<String>,
    pub parent: String,
    pub ref_columns: Vec<String>,
    pub on_delete: FkAction,
    pub on_update: FkAction,
    pub deferrable: bool,
    pub initially_deferred: bool,
}

fn action(a: Option<&ReferentialAction>) -> FkAction {
    match a {
        None | Some(ReferentialAction::NoAction) => FkAction::NoAction,
        Some(ReferentialAction::Restrict) => FkAction::Restrict,
        Some(ReferentialAction::Cascade) => FkAction::Cascade,
        Some(ReferentialAction::SetNull) => FkAction::SetNull,
        Some(ReferentialAction::SetDefault) => FkAction::SetDefault,
    }
}

/// Reads a column (`column`: its name) or table constraint; refuses what
/// Eddy does not enforce.
pub(super) fn pending(
    fk: &ForeignKeyConstraint,
    column: Option<String>,
    name: Option<String>,
) -> Result<PendingFk> {
    match fk.match_kind {
        None | Some(ConstraintReferenceMatchKind::Simple) => {}
        Some(k) => {
            return Err(SqlError::FeatureNotSupported(format!(
                "foreign keys with {k} are not supported yet (only MATCH SIMPLE)"
            )))
        }
    }
    let (mut deferrable, mut initially_deferred) = (false, false);
    if let Some(c) = &fk.characteristics {
        initially_deferred = c.initially == Some(DeferrableInitial::Deferred);
        deferrable = c.deferrable.unwrap_or(initially_deferred);
        if initially_deferred && !deferrable {
            return Err(SqlError::Syntax(
                "constraint declared INITIALLY DEFERRED must be DEFERRABLE".into(),
            ));
        }
        if c.enforced == Some(false) {
            return Err(SqlError::FeatureNotSupported(
                "NOT ENFORCED constraints are not supported".into(),
            ));
        }
    }
    let on_update = action(fk.on_update.as_ref());
    if !matches!(on_update, FkAction::NoAction | FkAction::Restrict) {
        return Err(SqlError::FeatureNotSupported(format!(
            "ON UPDATE {} is not supported yet (NO ACTION and RESTRICT are)",
            on_update.sql()
        )));
    }
    let columns = match column {
        Some(c) => vec![c],
        None => fk.columns.iter().map(ident_name).collect(),
    };
    Ok(PendingFk {
        name: fk.name.as_ref().map(ident_name).or(name),
        columns,
        parent: table_name(&fk.foreign_table)?,
        ref_columns: fk.referred_columns.iter().map(ident_name).collect(),
        on_delete: action(fk.on_delete.as_ref()),
        on_update,
        deferrable,
        initially_deferred,
    })
}

enum Compat {
    Yes,
    /// PostgreSQL accepts the pair through a cross-type operator Eddy
    /// does not compare keys with yet.
    Unsupported,
    No,
}

fn compat(child: ColumnType, parent: ColumnType) -> Compat {
    use ColumnType::*;
    let int = |t: ColumnType| matches!(t, SmallInt | Int | BigInt);
    let text = |t: ColumnType| matches!(t, Text | Varchar(_) | Char(_));
    if child == parent || (int(child) && int(parent)) || (text(child) && text(parent)) {
        return Compat::Yes;
    }
    match (child, parent) {
        (Decimal(..), Decimal(..)) => Compat::Unsupported,
        (Real | Double, Real | Double) => Compat::Unsupported,
        (c, Real | Double | Decimal(..)) if int(c) => Compat::Unsupported,
        (Date, Timestamp | TimestampTz) | (Timestamp, TimestampTz) | (TimestampTz, Timestamp) => {
            Compat::Unsupported
        }
        _ => Compat::No,
    }
}

/// `v` as a value of the referenced column's type; `None` when no value of
/// that type can equal it (an integer out of its range).
fn to_parent(v: &Value, ty: ColumnType) -> Option<Value> {
    let wide = match v {
        Value::SmallInt(x) => Some(i64::from(*x)),
        Value::Int(x) => Some(i64::from(*x)),
        Value::BigInt(x) => Some(*x),
        _ => None,
    };
    match (wide, ty) {
        (Some(x), ColumnType::SmallInt) => i16::try_from(x).ok().map(Value::SmallInt),
        (Some(x), ColumnType::Int) => i32::try_from(x).ok().map(Value::Int),
        (Some(x), ColumnType::BigInt) => Some(Value::BigInt(x)),
        _ => Some(v.clone()),
    }
}

/// What a referencing row points at.
pub(super) enum Target {
    /// A key column is NULL: MATCH SIMPLE lets the row pass.
    Null,
    /// No referenced row can match (a value out of the key's range).
    Impossible,
    /// The referenced row's storage key, and a row of the referenced
    /// table's shape holding the key values.
    Key(Key, Row),
}

pub(super) fn target_of(fk: &ForeignKeyDef, parent: &TableDef, row: &[Value]) -> Target {
    let mut prow = vec![Value::Null; parent.columns.len()];
    for (&c, &p) in fk.columns.iter().zip(&fk.ref_columns) {
        let Some(v) = row.get(c) else {
            return Target::Null;
        };
        if v.is_null() {
            return Target::Null;
        }
        let Some(ty) = parent.columns.get(p).map(|c| c.ty) else {
            return Target::Impossible;
        };
        match to_parent(v, ty) {
            Some(pv) => prow[p] = pv,
            None => return Target::Impossible,
        }
    }
    Target::Key(key_for_row(parent, &prow, 0), prow)
}

pub(super) fn not_present(
    child: &TableDef,
    fk: &ForeignKeyDef,
    parent: &TableDef,
    row: &[Value],
) -> SqlError {
    SqlError::ForeignKeyViolation(format!(
        "insert or update on table \"{}\" violates foreign key constraint \"{}\"",
        child.name, fk.name
    ))
    .with_detail(format!(
        "Key ({}) is not present in table \"{}\".",
        describe_columns(child, &fk.columns, row),
        parent.name
    ))
    .about(ErrorObject::constraint_of(&child.name, &fk.name))
}

pub(super) fn still_referenced(
    parent: &TableDef,
    fk: &ForeignKeyDef,
    child: &TableDef,
    prow: &[Value],
) -> SqlError {
    SqlError::ForeignKeyViolation(format!(
        "update or delete on table \"{}\" violates foreign key constraint \"{}\" on table \"{}\"",
        parent.name, fk.name, child.name
    ))
    .with_detail(format!(
        "Key ({}) is still referenced from table \"{}\".",
        describe_columns(parent, &fk.ref_columns, prow),
        child.name
    ))
    // PostgreSQL names the referencing table, in both directions
    .about(ErrorObject::constraint_of(&child.name, &fk.name))
}

fn type_name(ty: ColumnType) -> String {
    crate::catalog::format_type(i64::from(pgtypes::oid_for_column_type(ty)), -1)
        .unwrap_or_else(|| format!("{ty:?}"))
}

fn is_temp(name: &str) -> bool {
    name.starts_with("pg_temp_")
}

/// The rows of `snap` (laid out as `child`) that reference one of `keys`
/// through `fk`: (storage key, row, the referenced values as a row of
/// `parent`'s shape).
fn matching_rows(
    snap: &TableSnapshot,
    fk: &ForeignKeyDef,
    parent: &TableDef,
    keys: &HashSet<Vec<u8>>,
) -> Result<Vec<(Vec<u8>, Row, Row)>> {
    let types: Vec<ColumnType> = snap.def().columns.iter().map(|c| c.ty).collect();
    let mut out = Vec::new();
    for part in snap.partitions() {
        for batch in part.scan(None, true, &|_| true)? {
            let batch = batch?;
            let Some(key_col) = batch
                .columns()
                .last()
                .and_then(|c| c.as_any().downcast_ref::<BinaryArray>())
            else {
                return Err(SqlError::Internal("scan without its key column".into()));
            };
            for r in 0..batch.num_rows() {
                let row = eddy_storage::arrow_values::row_at(&batch, &types, r)?;
                if let Target::Key(k, prow) = target_of(fk, parent, &row) {
                    if keys.contains(&k.0) {
                        out.push((key_col.value(r).to_vec(), row, prow));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Finds the referencing rows of `keys` in the latest committed state of
/// `child` overlaid with the transaction's writes; with `lock`, locks them
/// exclusively and re-scans until none changed after the scan (a cascade
/// writes them: it must decide on their newest versions).
pub(super) fn referencing_rows(
    txn: &mut Transaction,
    child: &Arc<Table>,
    fk: &ForeignKeyDef,
    parent: &TableDef,
    keys: &HashSet<Vec<u8>>,
    lock: bool,
) -> Result<Vec<(Vec<u8>, Row, Row)>> {
    let pinned = (txn.isolation == Isolation::RepeatableRead).then(|| txn.statement_lsns(child));
    for _ in 0..MAX_RESCANS {
        let snap = txn.latest_snapshot(child);
        let found = matching_rows(&snap, fk, parent, keys)?;
        if !lock || found.is_empty() {
            return Ok(found);
        }
        let ks: Vec<&[u8]> = found.iter().map(|(k, _, _)| k.as_slice()).collect();
        txn.lock_rows(child, ks.iter().copied(), LockMode::Exclusive)?;
        if let Some(lsns) = &pinned {
            // rows REPEATABLE READ's snapshot does not hold: PostgreSQL's
            // crosscheck fails the same way
            if txn.changed_after(child, lsns, ks.iter().copied())? {
                return Err(StorageError::SerializationFailure.into());
            }
        }
        if !txn.changed_since(child, &snap, ks.iter().copied())? {
            return Ok(found);
        }
    }
    Err(StorageError::SerializationFailure.into())
}

impl Session {
    pub(super) fn fk_txn(&mut self) -> Result<&mut Transaction> {
        self.txn
            .as_mut()
            .ok_or_else(|| SqlError::Internal("statement outside a transaction".into()))
    }

    pub(super) fn table_by_id(&self, id: TableId) -> Result<Arc<Table>> {
        self.db
            .engine
            .tables()
            .into_iter()
            .find(|t| t.def().id == id)
            .ok_or_else(|| SqlError::Internal(format!("referenced table {} is gone", id.0)))
    }

    /// Every foreign key that references table `parent`, with its table
    /// (tables this transaction dropped are gone already).
    pub(super) fn referencing(&self, parent: TableId) -> Vec<(Arc<Table>, ForeignKeyDef)> {
        let dropped: &[String] = self
            .txn
            .as_ref()
            .map(|t| t.dropped_tables.as_slice())
            .unwrap_or(&[]);
        let mut out = Vec::new();
        for t in self.db.engine.tables() {
            if dropped.iter().any(|d| *d == t.def().name) {
                continue;
            }
            for fk in &t.def().foreign_keys {
                if fk.ref_table == parent {
                    out.push((Arc::clone(&t), fk.clone()));
                }
            }
        }
        out
    }

    /// Whether a fixed plan's write needs the foreign-key work, which only
    /// the general path does: an INSERT or UPDATE of a referencing table, a
    /// DELETE of a referenced one. (A fixed UPDATE never changes the key,
    /// so a referenced table's UPDATE needs nothing.)
    pub(super) fn fixed_plan_declines(&self, plan: &FastPlan) -> bool {
        let Some(t) = plan.written_table().and_then(|n| self.db.engine.table(n)) else {
            return false;
        };
        let def = t.def();
        match plan {
            FastPlan::Delete { .. } => {
                def.has_primary_key() && !self.referencing(def.id).is_empty()
            }
            _ => !def.foreign_keys.is_empty(),
        }
    }

    /// CREATE TABLE and ALTER TABLE ADD FOREIGN KEY: the constraints of the
    /// table `child` (created or locked by this transaction), named and
    /// checked as PostgreSQL checks them.
    /// Each referenced table is locked exclusively until the transaction
    /// ends, so it cannot be dropped meanwhile.
    pub(super) fn resolve_foreign_keys(
        &mut self,
        child: &TableDef,
        pending: Vec<PendingFk>,
    ) -> Result<Vec<ForeignKeyDef>> {
        let mut out: Vec<ForeignKeyDef> = Vec::new();
        let mut taken: Vec<String> = child.checks.iter().map(|c| c.name.clone()).collect();
        taken.extend(child.indexes.iter().map(|i| i.name.clone()));
        // ALTER TABLE ADD FOREIGN KEY: the table's own foreign keys, and
        // its primary key (PostgreSQL's constraint `<table>_pkey`)
        taken.extend(child.foreign_keys.iter().map(|f| f.name.clone()));
        if child.has_primary_key() {
            taken.push(format!(
                "{}_pkey",
                crate::temp_tables::shown_name(&child.name)
            ));
        }
        // explicit names first, as PostgreSQL reserves them
        for p in pending.iter().filter_map(|p| p.name.as_ref()) {
            if taken.contains(p) {
                return Err(SqlError::DuplicateObject(format!(
                    "constraint \"{p}\" for relation \"{}\" already exists",
                    child.name
                )));
            }
            taken.push(p.clone());
        }
        for p in pending {
            let parent_def: TableDef = if p.parent == child.name {
                child.clone()
            } else {
                let parent = self.table(&p.parent)?;
                if is_temp(&child.name) || is_temp(&parent.def().name) {
                    return Err(SqlError::FeatureNotSupported(
                        "foreign keys on or to temporary tables are not supported yet".into(),
                    ));
                }
                if self
                    .db
                    .streams
                    .as_deref()
                    .is_some_and(|s| s.owns_table(&p.parent))
                {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "a foreign key cannot reference materialized view \"{}\"",
                        p.parent
                    )));
                }
                // PostgreSQL locks it too (SHARE ROW EXCLUSIVE): a DROP of
                // it waits for this transaction, then sees the constraint
                self.lock_table_exclusive(&parent)?.def().as_ref().clone()
            };
            let col_index = |def: &TableDef, n: &str| {
                def.column_index(n)
                    .ok_or_else(|| SqlError::UndefinedColumn(n.to_string()))
            };
            let columns: Vec<usize> = p
                .columns
                .iter()
                .map(|c| col_index(child, c))
                .collect::<Result<_>>()?;
            let ref_columns: Vec<usize> = if p.ref_columns.is_empty() {
                if parent_def.primary_key.is_empty() {
                    return Err(SqlError::UndefinedObject(format!(
                        "there is no primary key for referenced table \"{}\"",
                        parent_def.name
                    )));
                }
                parent_def.primary_key.clone()
            } else {
                p.ref_columns
                    .iter()
                    .map(|c| col_index(&parent_def, c))
                    .collect::<Result<_>>()?
            };
            if columns.len() != ref_columns.len() {
                return Err(SqlError::InvalidForeignKey(
                    "number of referencing and referenced columns for foreign key disagree".into(),
                ));
            }
            let as_set = |v: &[usize]| {
                let mut s = v.to_vec();
                s.sort_unstable();
                s
            };
            let wanted = as_set(&ref_columns);
            let distinct = wanted.windows(2).all(|w| w[0] != w[1]);
            let is_pk = distinct && wanted == as_set(&parent_def.primary_key);
            if !is_pk {
                let is_unique = distinct
                    && parent_def
                        .indexes
                        .iter()
                        .any(|i| i.unique && as_set(&i.columns) == wanted);
                if is_unique {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "a foreign key referencing a UNIQUE constraint of \"{}\" rather than its primary key is not supported yet",
                        parent_def.name
                    )));
                }
                return Err(SqlError::InvalidForeignKey(format!(
                    "there is no unique constraint matching given keys for referenced table \"{}\"",
                    parent_def.name
                )));
            }
            let name = match &p.name {
                Some(n) => n.clone(),
                None => {
                    let base = format!("{}_{}_fkey", child.name, p.columns.join("_"));
                    let mut name = base.clone();
                    let mut k = 0u32;
                    while taken.contains(&name) {
                        k += 1;
                        name = format!("{base}{k}");
                    }
                    taken.push(name.clone());
                    name
                }
            };
            for (&c, &r) in columns.iter().zip(&ref_columns) {
                let (cc, rc) = (&child.columns[c], &parent_def.columns[r]);
                match compat(cc.ty, rc.ty) {
                    Compat::Yes => {}
                    Compat::Unsupported => {
                        return Err(SqlError::FeatureNotSupported(format!(
                            "foreign key constraint \"{name}\": comparing {} with {} keys is not supported yet",
                            type_name(cc.ty),
                            type_name(rc.ty)
                        )))
                    }
                    Compat::No => {
                        return Err(SqlError::DatatypeMismatch(format!(
                            "foreign key constraint \"{name}\" cannot be implemented"
                        ))
                        .with_detail(format!(
                            "Key columns \"{}\" and \"{}\" are of incompatible types: {} and {}.",
                            cc.name,
                            rc.name,
                            type_name(cc.ty),
                            type_name(rc.ty)
                        )))
                    }
                }
            }
            if matches!(p.on_delete, FkAction::SetNull | FkAction::SetDefault)
                && columns.iter().any(|c| child.primary_key.contains(c))
            {
                return Err(SqlError::FeatureNotSupported(format!(
                    "ON DELETE {} on primary key columns is not supported",
                    p.on_delete.sql()
                )));
            }
            out.push(ForeignKeyDef {
                name,
                columns,
                ref_table: parent_def.id,
                ref_columns,
                on_delete: p.on_delete,
                on_update: p.on_update,
                deferrable: p.deferrable,
                initially_deferred: p.initially_deferred,
            });
        }
        Ok(out)
    }

    /// Fails with 23503 unless every row of `rows` (written to table
    /// `def`) whose key columns are all non-NULL has its referenced row.
    /// Takes each referenced row's lock shared, to the end of the
    /// transaction, and reads the row's latest committed version.
    ///
    /// A constraint deferred in this transaction is not checked here: the
    /// table is recorded, and its rows are checked at commit
    /// (`deferred_fk.rs`).
    pub(super) fn check_parents(&mut self, def: &TableDef, rows: &[Row]) -> Result<()> {
        if def.foreign_keys.is_empty() || rows.is_empty() {
            return Ok(());
        }
        for fk in &def.foreign_keys {
            if self.fk_deferred(fk) {
                let child = TableRef {
                    id: def.id,
                    name: def.name.clone(),
                };
                self.fk_txn()?.deferred.defer_child_check(child, &fk.name);
                continue;
            }
            self.check_parents_of(def, fk, rows)?;
        }
        Ok(())
    }

    /// [`Session::check_parents`] for one constraint, now.
    pub(super) fn check_parents_of(
        &mut self,
        def: &TableDef,
        fk: &ForeignKeyDef,
        rows: &[Row],
    ) -> Result<()> {
        let parent = self.table_by_id(fk.ref_table)?;
        let pdef = Arc::clone(parent.def());
        let txn = self.fk_txn()?;
        run_blocking(|| -> Result<()> {
            let pinned =
                (txn.isolation == Isolation::RepeatableRead).then(|| txn.statement_lsns(&parent));
            let mut seen: HashSet<Vec<u8>> = HashSet::new();
            for row in rows {
                let key = match target_of(fk, &pdef, row) {
                    Target::Null => continue,
                    Target::Impossible => return Err(not_present(def, fk, &pdef, row)),
                    Target::Key(k, _) => k,
                };
                if !seen.insert(key.0.clone()) {
                    continue;
                }
                txn.lock_rows(&parent, [key.as_bytes()], LockMode::Shared)?;
                let present = match txn.own_row(&parent, key.as_bytes()) {
                    Some(own) => own.is_some(),
                    None if txn.truncated(&parent) => false,
                    None => {
                        if let Some(lsns) = &pinned {
                            if txn.changed_after(&parent, lsns, [key.as_bytes()])? {
                                return Err(StorageError::SerializationFailure.into());
                            }
                        }
                        parent.get_by_key(&key)?.is_some()
                    }
                };
                if !present {
                    return Err(not_present(def, fk, &pdef, row));
                }
            }
            Ok(())
        })?;
        Ok(())
    }

    /// DROP TABLE of `name`: 2BP01 while a table outside `dropping` keeps
    /// a foreign key to it (PostgreSQL's message and DETAIL); with
    /// `cascade`, those constraints are dropped first, as PostgreSQL drops
    /// them.
    pub(super) fn drop_dependents(
        &mut self,
        table: &Arc<Table>,
        dropping: &[String],
        cascade: bool,
    ) -> Result<()> {
        let name = table.def().name.clone();
        let deps: Vec<(Arc<Table>, ForeignKeyDef)> = self
            .referencing(table.def().id)
            .into_iter()
            .filter(|(t, _)| t.def().name != name && !dropping.contains(&t.def().name))
            .collect();
        if deps.is_empty() {
            return Ok(());
        }
        if !cascade {
            let detail: Vec<String> = deps
                .iter()
                .map(|(t, fk)| {
                    format!(
                        "constraint {} on table {} depends on table {name}",
                        fk.name,
                        t.def().name
                    )
                })
                .collect();
            return Err(SqlError::DependentObjects(format!(
                "cannot drop table {name} because other objects depend on it"
            ))
            .with_detail(detail.join("\n")));
        }
        let in_block = self.txn.as_ref().is_some_and(|t| t.explicit);
        let id = table.def().id;
        let mut done: Vec<String> = Vec::new();
        for (child, _) in deps {
            let cname = child.def().name.clone();
            if done.contains(&cname) {
                continue;
            }
            done.push(cname.clone());
            let child = self.lock_for_ddl(&child, "DROP TABLE ... CASCADE")?;
            let keep: Vec<ForeignKeyDef> = child
                .def()
                .foreign_keys
                .iter()
                .filter(|fk| fk.ref_table != id)
                .cloned()
                .collect();
            if in_block {
                let t = self.ddl_txn("DROP TABLE")?;
                run_blocking(|| t.ddl().set_foreign_keys(&cname, keep))?;
            } else {
                // the table itself goes at once, outside the transaction:
                // the constraints go first, so no crash leaves one that
                // names a missing table
                let engine = Arc::clone(&self.db.engine);
                run_blocking(|| engine.ddl(None).set_foreign_keys(&cname, keep))?;
            }
        }
        Ok(())
    }

    /// `names` (of a DROP TABLE) ordered so that a table comes before the
    /// tables of the list it references.
    pub(super) fn referencing_first(&self, mut names: Vec<ObjectName>) -> Vec<ObjectName> {
        let mut out = Vec::with_capacity(names.len());
        while !names.is_empty() {
            let defs: Vec<Option<Arc<TableDef>>> = names
                .iter()
                .map(|n| {
                    let name = table_name(n).ok()?;
                    self.db.engine.table(&name).map(|t| Arc::clone(t.def()))
                })
                .collect();
            // one no other remaining table references (else the first: a cycle)
            let pick = (0..names.len())
                .find(|&i| {
                    let Some(d) = &defs[i] else { return true };
                    !defs.iter().enumerate().any(|(j, o)| {
                        j != i
                            && o.as_ref().is_some_and(|o| {
                                o.foreign_keys.iter().any(|fk| fk.ref_table == d.id)
                            })
                    })
                })
                .unwrap_or(0);
            out.push(names.remove(pick));
        }
        out
    }

    /// TRUNCATE refuses a table another table's foreign key references
    /// (PostgreSQL refuses it unless the referencing tables are truncated
    /// too; Eddy refuses that as well: TRUNCATE gives the table a new id).
    pub(super) fn refuse_truncate_referenced(&self, tables: &[Arc<Table>]) -> Result<()> {
        let names: Vec<&str> = tables.iter().map(|t| t.def().name.as_str()).collect();
        for t in tables {
            let refs = self.referencing(t.def().id);
            if let Some((child, _)) = refs.first() {
                if refs
                    .iter()
                    .all(|(c, _)| names.contains(&c.def().name.as_str()))
                {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "TRUNCATE of table \"{}\", which a foreign key references, is not supported yet",
                        t.def().name
                    )));
                }
                return Err(SqlError::FeatureNotSupported(
                    "cannot truncate a table referenced in a foreign key constraint".into(),
                )
                .with_detail(format!(
                    "Table \"{}\" references \"{}\".",
                    child.def().name,
                    t.def().name
                )));
            }
        }
        Ok(())
    }
}
