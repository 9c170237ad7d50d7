//! `ALTER TABLE child ADD [CONSTRAINT name] FOREIGN KEY (...) REFERENCES
//! parent (...)`, as PostgreSQL 15 runs it (`docs/design/foreign_keys.md`,
//! "ALTER TABLE ADD FOREIGN KEY").
//!
//! The constraint is resolved by CREATE TABLE's code
//! ([`Session::resolve_foreign_keys`]: names, key match, types, the
//! temporary-table rule), so both paths refuse and accept the same things.
//!
//! No orphan can commit: ALTER TABLE holds the child's exclusive table lock
//! and the resolution takes the parent's (Eddy's table locks have one
//! mode; PostgreSQL takes SHARE ROW EXCLUSIVE there), both to the end of
//! the transaction, so no transaction that starts later writes either
//! table before the commit; and the referenced parent rows' locks are
//! taken shared, which waits for a parent DELETE already running (a table
//! lock does not). The rows written after the commit are checked by the
//! ordinary enforcement, which reads the new definition.
//!
//! The existing rows are checked by one DataFusion query over both tables'
//! providers (the rows the transaction sees, its own writes too): the
//! child's rows with every key column non-NULL (MATCH SIMPLE), anti-joined
//! with the parent on the key, first row only. It streams, so a large
//! table is never held in memory.

use std::sync::Arc;

use datafusion::common::Column;
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::{Expr, JoinType, LogicalPlanBuilder};
use datafusion::sql::sqlparser::ast::ForeignKeyConstraint;
use eddy_common::{ColumnType, ForeignKeyDef, TableDef};
use eddy_storage::{LockMode, Table};

use super::foreign_keys::{not_present, pending, target_of, PendingFk, Target};
use super::{collect_rows, Session};
use crate::error::{Result, SqlError};
use crate::provider::EddyTable;

/// The names the two scans go by in the validation plan (never seen by a
/// client; distinct, so a self-reference scans one table twice).
const CHILD: &str = "__fk_child";
const PARENT: &str = "__fk_parent";

impl Session {
    /// Adds the constraint to `table` (locked by ALTER TABLE) after
    /// checking its rows; 23503 on the first orphan, with nothing changed.
    pub(super) async fn add_foreign_key(
        &mut self,
        table: &str,
        fk: &ForeignKeyConstraint,
    ) -> Result<()> {
        self.add_pending_foreign_key(table, pending(fk, None, None)?)
            .await
    }

    /// Adds the foreign key `wanted` to `table` once its rows are checked.
    pub(super) async fn add_pending_foreign_key(
        &mut self,
        table: &str,
        wanted: PendingFk,
    ) -> Result<()> {
        let child = self.table(table)?;
        let def = child.def().as_ref().clone();
        let Some(new_fk) = self.resolve_foreign_keys(&def, vec![wanted])?.pop() else {
            return Err(SqlError::Internal(
                "a foreign key lost in resolution".into(),
            ));
        };
        let parent = if new_fk.ref_table == def.id {
            Arc::clone(&child)
        } else {
            self.table_by_id(new_fk.ref_table)?
        };
        self.validate_foreign_key(&child, &parent, &new_fk).await?;
        let mut fks = def.foreign_keys.clone();
        fks.push(new_fk);
        let tname = table.to_string();
        self.ddl_change(move |ddl| ddl.set_foreign_keys(&tname, fks))?;
        Ok(())
    }

    /// 23503 unless every row of `child` with all key columns non-NULL has
    /// its referenced row in `parent`.
    async fn validate_foreign_key(
        &mut self,
        child: &Arc<Table>,
        parent: &Arc<Table>,
        fk: &ForeignKeyDef,
    ) -> Result<()> {
        let tables = if child.def().id == parent.def().id {
            vec![Arc::clone(child)]
        } else {
            vec![Arc::clone(child), Arc::clone(parent)]
        };
        self.lock_referenced_rows(child, parent, fk).await?;
        // after the row locks: a parent DELETE that was running when the
        // ALTER started has ended, and the check sees its outcome
        self.install_tables(&tables)?;
        let (cdef, pdef) = (child.def(), parent.def());
        let source = |t: &Arc<Table>| {
            provider_as_source(Arc::new(
                EddyTable::new(Arc::clone(t), false).with_view(Arc::clone(&self.view)),
            ))
        };
        let mut keys_present: Option<Expr> = None;
        let mut on = Vec::new();
        for (&c, &r) in fk.columns.iter().zip(&fk.ref_columns) {
            let cc = column(CHILD, cdef, c)?;
            let not_null = cc.clone().is_not_null();
            keys_present = Some(match keys_present {
                Some(e) => e.and(not_null),
                None => not_null,
            });
            on.push(cc.eq(column(PARENT, pdef, r)?));
        }
        let Some(keys_present) = keys_present else {
            return Err(SqlError::Internal("a foreign key without columns".into()));
        };
        let parents = LogicalPlanBuilder::scan(PARENT, source(parent), None)?.build()?;
        let plan = LogicalPlanBuilder::scan(CHILD, source(child), None)?
            .filter(keys_present)?
            .join_on(parents, JoinType::LeftAnti, on)?
            .limit(0, Some(1))?
            .build()?;
        let (_, batches) = collect_rows(self.run_plan(plan).await?).await?;
        let types: Vec<ColumnType> = cdef.columns.iter().map(|c| c.ty).collect();
        if let Some(b) = batches.iter().find(|b| b.num_rows() > 0) {
            let row = eddy_storage::arrow_values::row_at(b, &types, 0)?;
            return Err(not_present(cdef, fk, pdef, &row));
        }
        Ok(())
    }
}

impl Session {
    /// Takes the lock of every parent row the child's rows reference
    /// SHARED, to the end of the transaction, as a child row's write does
    /// (`foreign_keys.rs`, invariant 1). The table locks keep out the
    /// writers that start after the ALTER; these row locks wait for a
    /// parent DELETE or key UPDATE already running (it took no table lock,
    /// none being held when it started), and keep any later one out.
    /// The child's distinct keys come from one DataFusion aggregate,
    /// locked a batch at a time.
    async fn lock_referenced_rows(
        &mut self,
        child: &Arc<Table>,
        parent: &Arc<Table>,
        fk: &ForeignKeyDef,
    ) -> Result<()> {
        self.install_tables(std::slice::from_ref(child))?;
        let (cdef, pdef) = (child.def(), parent.def());
        let source = provider_as_source(Arc::new(
            EddyTable::new(Arc::clone(child), false).with_view(Arc::clone(&self.view)),
        ));
        let keys = fk
            .columns
            .iter()
            .map(|&c| column(CHILD, cdef, c))
            .collect::<Result<Vec<_>>>()?;
        let plan = LogicalPlanBuilder::scan(CHILD, source, None)?
            .aggregate(keys, Vec::<Expr>::new())?
            .build()?;
        let types: Vec<ColumnType> = fk
            .columns
            .iter()
            .filter_map(|&c| cdef.columns.get(c).map(|col| col.ty))
            .collect();
        let (_, batches) = collect_rows(self.run_plan(plan).await?).await?;
        let txn = self.fk_txn()?;
        for b in &batches {
            let mut locks: Vec<Vec<u8>> = Vec::with_capacity(b.num_rows());
            for r in 0..b.num_rows() {
                let values = eddy_storage::arrow_values::row_at(b, &types, r)?;
                // a row of the child's shape holding the key values
                let mut row = vec![eddy_common::Value::Null; cdef.columns.len()];
                for (&c, v) in fk.columns.iter().zip(values) {
                    if let Some(slot) = row.get_mut(c) {
                        *slot = v;
                    }
                }
                if let Target::Key(k, _) = target_of(fk, pdef, &row) {
                    locks.push(k.0);
                }
            }
            txn.lock_rows(parent, locks.iter().map(Vec::as_slice), LockMode::Shared)?;
        }
        Ok(())
    }
}

/// Column `i` of `def`, as the scan named `scan` presents it.
fn column(scan: &str, def: &TableDef, i: usize) -> Result<Expr> {
    let c = def
        .columns
        .get(i)
        .ok_or_else(|| SqlError::Internal(format!("foreign key column {i} is gone")))?;
    Ok(Expr::Column(Column::new(Some(scan), c.name.clone())))
}
