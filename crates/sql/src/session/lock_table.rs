//! `LOCK TABLE name [, ...] [IN mode MODE] [NOWAIT]` (pg_dump locks every
//! table it dumps IN ACCESS SHARE MODE; migrations lock before they
//! change a table).
//!
//! Eddy's table locks have two modes, and LOCK TABLE takes them as
//! PostgreSQL's two modes they are: ACCESS SHARE (what every statement
//! naming a table takes while a definition changes: it keeps ALTER, DROP
//! and TRUNCATE of the table out until the transaction ends) and ACCESS
//! EXCLUSIVE (what ALTER TABLE takes: every other transaction's use of
//! the table waits). The six modes between them conflict with writers or
//! with each other in ways Eddy's locks cannot express, so they are
//! refused (0A000) rather than taken as a stronger or weaker lock.
//!
//! As in PostgreSQL: only inside a transaction block (25P01), held to its
//! end, in a read-only transaction too (a lock writes nothing); ACCESS
//! SHARE needs SELECT on the table, ACCESS EXCLUSIVE one of UPDATE, DELETE
//! or TRUNCATE (42501); NOWAIT fails at once with 55P03 when the lock is
//! held. A view
//! is refused (0A000; PostgreSQL locks the tables under it).

use datafusion::sql::sqlparser::ast::{Lock, LockTableMode};
use eddy_common::TablePrivileges;

use super::{run_blocking, Output, Session};
use crate::error::{Result, SqlError};
use crate::privileges::table_privileges;
use crate::rewrite::table_name;

impl Session {
    pub(super) fn lock_tables(&mut self, lock: Lock) -> Result<Output> {
        if !self.in_transaction_block() {
            return Err(SqlError::NoActiveTransaction("LOCK TABLE".into()));
        }
        // PostgreSQL's default mode
        let exclusive = match lock.lock_mode.unwrap_or(LockTableMode::AccessExclusive) {
            LockTableMode::AccessShare => false,
            LockTableMode::AccessExclusive => true,
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "LOCK TABLE ... IN {other} MODE is not supported: Eddy's table locks are \
                     ACCESS SHARE and ACCESS EXCLUSIVE"
                )))
            }
        };
        let mut tables = Vec::with_capacity(lock.tables.len());
        for target in &lock.tables {
            let name = table_name(&target.name)?;
            let Some(table) = self.db.engine.table(&name) else {
                if self.view(&name).is_some() {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "LOCK TABLE of view \"{name}\" is not supported"
                    )));
                }
                return Err(SqlError::UndefinedTable(name));
            };
            self.check_lock_privilege(&table, exclusive)?;
            tables.push(table);
        }
        let t = self.ddl_txn("LOCK TABLE")?;
        let saved = t.lock_timeout;
        if lock.nowait {
            t.lock_timeout = Some(std::time::Duration::ZERO);
        }
        let result = tables.iter().try_for_each(|table| {
            if exclusive {
                self.lock_table_exclusive(table).map(|_| ())
            } else {
                let t = self.ddl_txn("LOCK TABLE")?;
                run_blocking(|| t.lock_table_shared(table))
            }
        });
        if let Ok(t) = self.ddl_txn("LOCK TABLE") {
            t.lock_timeout = saved;
        }
        result.map(|()| Output::Command("LOCK TABLE".into()))
    }

    fn check_lock_privilege(&self, table: &eddy_storage::Table, exclusive: bool) -> Result<()> {
        let roles = &self.db.roles;
        if roles.privileges_of(&self.user).superuser {
            return Ok(());
        }
        let held = table_privileges(&roles.effective_roles(&self.user), table.def());
        let allowed = if exclusive {
            [
                TablePrivileges::UPDATE,
                TablePrivileges::DELETE,
                TablePrivileges::TRUNCATE,
            ]
            .iter()
            .any(|p| held.contains(*p))
        } else {
            held.contains(TablePrivileges::SELECT)
        };
        if allowed {
            return Ok(());
        }
        Err(SqlError::InsufficientPrivilege(format!(
            "permission denied for table {}",
            crate::temp_tables::shown_name(&table.def().name)
        )))
    }
}
