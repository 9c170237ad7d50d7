//! Snapshots one transaction exports and others import: PostgreSQL's
//! `pg_export_snapshot()` and `SET TRANSACTION SNAPSHOT 'id'`, with which
//! `pg_dump -j` has its workers read exactly what its leader reads.
//!
//! A REPEATABLE READ transaction reads every table at one cut, pinned at
//! its first statement (`crate::txn`); that pinned set of table snapshots
//! is what is exported, under an identifier, until the exporting
//! transaction ends. A transaction importing it, before its first query,
//! pins that same set, so both read the same committed rows (neither sees
//! the other's own writes, as in PostgreSQL).
//!
//! Invariants: an identifier names a snapshot only while the transaction
//! that exported it is open (the session removes its exports when the
//! transaction commits, rolls back or the connection ends); an import
//! copies the set, so it stays valid after the export is gone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{Expr, Query, SelectItem, SetExpr};
use eddy_common::TableId;
use eddy_storage::TableSnapshot;
use parking_lot::Mutex;

use crate::rewrite::ident_name;

/// A transaction's cut: each table's snapshot.
pub type Cut = HashMap<TableId, Arc<TableSnapshot>>;

/// The snapshots exported and not yet released, by identifier; shared by
/// every session of the database.
#[derive(Default)]
pub struct ExportedSnapshots {
    next: AtomicU64,
    exported: Mutex<HashMap<String, (u64, Cut)>>,
}

impl ExportedSnapshots {
    /// Exports `cut` for the session `owner`; its identifier.
    pub fn export(&self, owner: u64, cut: Cut) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        // PostgreSQL's form: virtual transaction id, then a counter
        let id = format!("{owner:08X}-{n:08X}-1");
        self.exported.lock().insert(id.clone(), (owner, cut));
        id
    }

    /// The cut exported under `id`, while its transaction is open.
    pub fn get(&self, id: &str) -> Option<Cut> {
        self.exported.lock().get(id).map(|(_, cut)| cut.clone())
    }

    /// Releases what the session `owner` exported (its transaction ended).
    pub fn release(&self, owner: u64) {
        self.exported.lock().retain(|_, (o, _)| *o != owner);
    }
}

/// Whether `q` is `SELECT pg_export_snapshot()` (possibly
/// `pg_catalog.`-qualified, aliased), which the session answers itself:
/// the snapshot is the transaction's, which a function cannot reach.
pub fn is_export_call(q: &Query) -> bool {
    let SetExpr::Select(select) = q.body.as_ref() else {
        return false;
    };
    if !select.from.is_empty() || select.selection.is_some() || q.with.is_some() {
        return false;
    }
    let [SelectItem::UnnamedExpr(Expr::Function(f))
    | SelectItem::ExprWithAlias {
        expr: Expr::Function(f),
        ..
    }] = select.projection.as_slice()
    else {
        return false;
    };
    let parts: Vec<String> = f
        .name
        .0
        .iter()
        .filter_map(|p| p.as_ident().map(ident_name))
        .collect();
    let no_arguments = match &f.args {
        datafusion::sql::sqlparser::ast::FunctionArguments::List(l) => l.args.is_empty(),
        datafusion::sql::sqlparser::ast::FunctionArguments::None => true,
        _ => false,
    };
    no_arguments
        && matches!(parts.as_slice(), [n] | [_, n] if n == "pg_export_snapshot")
        && (parts.len() == 1 || parts.first().map(String::as_str) == Some("pg_catalog"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::Statement;

    fn query(sql: &str) -> Box<Query> {
        match crate::rewrite::parse_statement(sql).unwrap() {
            Statement::Query(q) => q,
            other => panic!("not a query: {other}"),
        }
    }

    #[test]
    fn the_export_call_is_recognised_only_alone() {
        assert!(is_export_call(&query(
            "SELECT pg_catalog.pg_export_snapshot()"
        )));
        assert!(is_export_call(&query("select pg_export_snapshot() as s")));
        assert!(!is_export_call(&query("SELECT pg_export_snapshot(), 1")));
        assert!(!is_export_call(&query(
            "SELECT pg_export_snapshot() FROM t"
        )));
        assert!(!is_export_call(&query("SELECT other.pg_export_snapshot()")));
    }

    #[test]
    fn an_export_lives_until_its_owner_releases_it() {
        let exported = ExportedSnapshots::default();
        let a = exported.export(7, Cut::new());
        let b = exported.export(8, Cut::new());
        assert_ne!(a, b);
        assert!(exported.get(&a).is_some());
        exported.release(7);
        assert!(exported.get(&a).is_none());
        assert!(exported.get(&b).is_some());
        assert!(exported.get("nonsense").is_none());
    }
}
