//! Catalog changes as part of the session's transaction, and waiting for
//! other transactions' changes.
//!
//! Every CREATE TABLE, ALTER TABLE and COMMENT ON runs in a transaction
//! (the open block, or the statement's implicit one) through
//! [`Transaction::ddl`]: the change is undone unless the transaction
//! commits, and commits with its writes through one commit-log record
//! (`eddy_storage::ddl`). The changed table is locked exclusively until the
//! transaction ends; while any table is so locked, every statement first
//! takes the shared lock of each table it names, so it waits for the change
//! to commit or roll back instead of reading or writing under a definition
//! that may be undone (PostgreSQL's ACCESS EXCLUSIVE / ACCESS SHARE locks).
//! While no definition is changing, statements take no table lock at all.

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{CopySource, ObjectName, Statement};
use eddy_storage::{Ddl, LockMode, LockWait, Table, TABLE_LOCK_KEY};

use super::{run_blocking, Session};
use crate::error::{Result, SqlError};
use crate::rewrite::table_name;
use crate::txn::{Isolation, Transaction};

impl Session {
    pub(super) fn ddl_txn(&mut self, what: &str) -> Result<&mut Transaction> {
        self.txn
            .as_mut()
            .ok_or_else(|| SqlError::Internal(format!("{what} outside a transaction")))
    }

    /// Locks `table` exclusively for `what`, a change of its definition in
    /// the session's transaction (waits for the transactions using it, at
    /// most `lock_timeout`); returns the table as it is once locked.
    pub(super) fn lock_for_ddl(&mut self, table: &Arc<Table>, what: &str) -> Result<Arc<Table>> {
        let t = self.ddl_txn(what)?;
        if t.truncated_any() {
            return Err(SqlError::FeatureNotSupported(format!(
                "{what} in a transaction that ran TRUNCATE is not supported yet"
            )));
        }
        if t.explicit && t.isolation == Isolation::RepeatableRead && t.snapshot_pinned() {
            // the pinned snapshot holds the table under its old definition
            return Err(SqlError::FeatureNotSupported(format!(
                "{what} in a REPEATABLE READ transaction after its first query is not supported; run it before any query of the transaction, or at READ COMMITTED"
            )));
        }
        self.lock_table_exclusive(table)
    }

    /// Locks `table` exclusively in the session's transaction without
    /// changing its definition (DROP TABLE, TRUNCATE): waits for every
    /// transaction using it and keeps others out until this one ends.
    /// Returns the table its name stands for once locked: whoever held the
    /// lock may have dropped it (42P01) or put another table under the name
    /// (then that one is locked too).
    pub(super) fn lock_table_exclusive(&mut self, table: &Arc<Table>) -> Result<Arc<Table>> {
        const ATTEMPTS: usize = 16;
        let engine = Arc::clone(&self.db.engine);
        let name = table.def().name.clone();
        let t = self.ddl_txn("a table lock")?;
        let mut target = Arc::clone(table);
        for _ in 0..ATTEMPTS {
            run_blocking(|| t.lock_table_for_ddl(&target))?;
            let current = engine
                .table(&name)
                .ok_or_else(|| SqlError::UndefinedTable(name.clone()))?;
            if current.def().id == target.def().id {
                return Ok(current);
            }
            target = current;
        }
        Err(SqlError::Storage(
            eddy_storage::StorageError::SerializationFailure,
        ))
    }

    /// One change of a table's definition in the session's transaction
    /// (after [`Session::lock_for_ddl`]); the transaction's writes to the
    /// table follow the new definition.
    pub(super) fn ddl_change(
        &mut self,
        change: impl FnOnce(&Ddl<'_>) -> eddy_storage::Result<Arc<Table>>,
    ) -> Result<Arc<Table>> {
        let t = self.ddl_txn("a catalog change")?;
        let new = run_blocking(|| change(&t.ddl()))?;
        t.table_altered(&new);
        Ok(new)
    }

    /// Waits while another transaction changes the definition of a table
    /// `stmt` names (see the module doc). Inside a block the shared locks
    /// are kept to its end, as PostgreSQL keeps ACCESS SHARE.
    pub(super) fn wait_for_table_ddl(&mut self, stmt: &Statement) -> Result<()> {
        let engine = Arc::clone(&self.db.engine);
        if engine.locks().tables_locked() == 0 {
            return Ok(());
        }
        let mut tables: Vec<Arc<Table>> = Vec::new();
        let mut add = |name: &ObjectName| {
            if let Some(t) = table_name(name).ok().and_then(|n| engine.table(&n)) {
                if !tables.iter().any(|x| x.def().id == t.def().id) {
                    tables.push(t);
                }
            }
        };
        // COPY's table is not among the relations sqlparser visits
        if let Statement::Copy {
            source: CopySource::Table { table_name, .. },
            ..
        } = stmt
        {
            add(table_name);
        }
        let _ = datafusion::sql::sqlparser::ast::visit_relations(stmt, |name| {
            add(name);
            std::ops::ControlFlow::<()>::Continue(())
        });
        if tables.is_empty() {
            return Ok(());
        }
        if let Some(t) = self.txn.as_ref() {
            return run_blocking(|| tables.iter().try_for_each(|tb| t.lock_table_shared(tb)));
        }
        // autocommit: wait for the lock, then let it go at once
        let timeout = self.lock_timeout()?;
        let waiter = engine.begin_txn();
        let result = run_blocking(|| {
            tables.iter().try_for_each(|tb| {
                engine
                    .locks()
                    .lock(
                        waiter,
                        tb.def().id,
                        TABLE_LOCK_KEY,
                        LockMode::Shared,
                        LockWait::Block(timeout),
                        &tb.def().name,
                    )
                    .map(|_| ())
            })
        });
        engine.locks().release_all(waiter);
        result.map_err(SqlError::from)
    }
}
