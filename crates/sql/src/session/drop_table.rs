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
        self.cascade_notice(&views);
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
                self.publish_dropped();
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

impl Session {
    /// Whether the session's open block has dropped table `name` (under
    /// that name, or under the hidden one [`Session::free_dropped_table_name`]
    /// gave it).
    pub(super) fn table_dropped_in_block(&self, name: &str) -> bool {
        self.txn
            .as_ref()
            .is_some_and(|t| t.dropped_tables.iter().any(|d| d == name))
    }

    /// Frees `name` for a CREATE in the block that dropped table `name`
    /// (`pg_restore --clean --single-transaction` drops and recreates
    /// every table in one transaction). The dropped table stays until
    /// COMMIT, so it moves out of the way: an in-flight rename to a hidden
    /// name, undone with the block's other catalog changes by ROLLBACK (or
    /// ROLLBACK TO a savepoint before it, or recovery), and dropped under
    /// that name by the COMMIT, whose commit-log record decides both. The
    /// sequences it owned go with it at COMMIT, as PostgreSQL drops them
    /// with their table; its writes in the block are forgotten.
    pub(super) fn free_dropped_table_name(&mut self, name: &str) -> Result<()> {
        if !self.table_dropped_in_block(name) {
            return Ok(());
        }
        let Some(table) = self.db.engine.table(name) else {
            return Ok(());
        };
        let id = table.def().id;
        let t = self.ddl_txn("DROP TABLE")?;
        let hidden = format!("{name}{DROPPED_MARK}{}_{}", t.id.0, id.0);
        self.ddl_change(|ddl| ddl.rename_table(name, &hidden))?;
        let owned = self.db.sequences.owned_by_table(name);
        let t = self.ddl_txn("DROP TABLE")?;
        t.forget_writes(id);
        for d in t.dropped_tables.iter_mut().filter(|d| *d == name) {
            d.clone_from(&hidden);
        }
        for s in owned {
            if !t.dropped_sequences.contains(&s) {
                t.dropped_sequences.push(s);
            }
        }
        self.publish_dropped();
        Ok(())
    }
}

/// What a table dropped and then replaced in one block is renamed with
/// until the block ends (`<name>__eddy_dropped_<txn>_<table id>`).
const DROPPED_MARK: &str = "__eddy_dropped_";

/// Whether `name` is the hidden name of a table a block in progress is
/// dropping: a table dropped and replaced in the block, or the old table
/// of a rewrite (`table_rewrite`). Catalogs do not show these.
pub(crate) fn is_going_away(name: &str) -> bool {
    name.contains(DROPPED_MARK) || name.contains(super::table_rewrite::OLD_MARK)
}
