//! `DROP TABLE`: each table waits for the transactions using it, takes
//! the views that read it (refused, or dropped with CASCADE) and the
//! sequences it owns with it; inside a block it goes at COMMIT and stays
//! on ROLLBACK.

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::ObjectName;

use super::{run_blocking, Output, Session};
use crate::error::{Result, SqlError};
use crate::rewrite::table_name;

impl Session {
    /// `DROP TABLE [IF EXISTS] names [CASCADE]`.
    pub(super) fn drop_tables(
        &mut self,
        names: Vec<ObjectName>,
        if_exists: bool,
        cascade: bool,
    ) -> Result<Output> {
        let in_block = self.txn.as_ref().is_some_and(|t| t.explicit);
        let dropping: Vec<String> = names.iter().filter_map(|n| table_name(n).ok()).collect();
        // views reading them: refused, or dropped with them (CASCADE)
        let views = self.dependent_views(&dropping, "table", cascade)?;
        self.drop_views_cascaded(&views)?;
        // referencing tables before the tables they reference: an
        // autocommit DROP drops each at once, and none may be left
        // naming a table already gone
        let names = self.referencing_first(names);
        for n in &names {
            let name = table_name(n)?;
            if self.table(&name).is_err() {
                if self.view(&name).is_some() {
                    return Err(SqlError::WrongObjectType(format!(
                        "\"{name}\" is not a table\nHINT:  Use DROP VIEW to remove a view."
                    )));
                }
                if if_exists {
                    self.notice(
                        "00000",
                        &format!("table \"{name}\" does not exist, skipping"),
                    );
                    continue;
                }
                return Err(SqlError::UndefinedTable(name));
            }
            if in_block {
                // dropped at COMMIT, kept by ROLLBACK; others wait
                // for this transaction to end
                let table = self.table(&name)?;
                let table = self.lock_table_exclusive(&table)?;
                self.drop_dependents(&table, &dropping, cascade)?;
                if let Some(t) = self.txn.as_mut() {
                    t.dropped_tables.push(name);
                }
                continue;
            }
            // waits for every transaction using the table
            let table = self.table(&name)?;
            let table = self.lock_table_exclusive(&table)?;
            self.drop_dependents(&table, &dropping, cascade)?;
            let engine = Arc::clone(&self.db.engine);
            run_blocking(|| engine.drop_table(&name))?;
            self.drop_owned_sequences(&name);
        }
        Ok(Output::Command("DROP TABLE".into()))
    }
}
