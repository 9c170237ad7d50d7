//! Views in the catalog (`CREATE [OR REPLACE] VIEW`, `DROP VIEW`).
//!
//! Storage keeps a view's definition ([`ViewDef`]) in `catalog.json` next
//! to the tables, in the same relation namespace; the SQL layer plans and
//! expands it. Invariants:
//!
//! * **Changes commit with their transaction.** A transaction keeps its
//!   view changes to itself until it commits; just before its commit point
//!   they are recorded under its id ([`Ddl::views_at_commit`], in the same
//!   `catalog.json` write as a check of them), and they are applied when
//!   its commit-log record is durable (`finish_ddl`), or at open when the
//!   log names it ([`crate::ddl::resolve_at_open`]); otherwise they are
//!   forgotten. So a view and the rest of its transaction are visible
//!   together or not at all, and nobody sees a view before its commit.
//! * **No lost change.** Each change names the committed version it was
//!   made against; the record is refused (40001) when the view has changed
//!   since, or when another transaction has a change of the same name
//!   recorded and not yet applied, and refused with 42P07 when a create
//!   meets a view or table of the same name. Table creates and renames
//!   check the view names too.

use eddy_common::{TxnId, ViewDef};
use serde::{Deserialize, Serialize};

use crate::ddl::Ddl;
use crate::engine::{CatalogData, Engine};
use crate::error::{Result, StorageError};
use crate::manifest;

/// One change a transaction makes to the views: view `name`, as committed
/// at `base_version` (`None`: no such view), becomes `new` (`None`:
/// dropped).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewChange {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<ViewDef>,
}

/// Applies committed `changes` in order (each replaces or drops the view
/// of its name).
pub fn apply(views: &mut Vec<ViewDef>, changes: &[ViewChange]) {
    for c in changes {
        views.retain(|v| v.name != c.name);
        if let Some(new) = &c.new {
            let mut new = new.clone();
            new.version = c.base_version.map_or(1, |v| v.saturating_add(1));
            views.push(new);
        }
    }
}

impl CatalogData {
    /// Whether `name` is a committed view or has a view change recorded.
    pub(crate) fn names_view(&self, name: &str) -> bool {
        self.views.iter().any(|v| v.name == name)
            || self
                .in_flight
                .iter()
                .any(|d| d.views.iter().any(|c| c.name == name && c.new.is_some()))
    }

    /// The check of [`Ddl::views_at_commit`]: `changes` of `owner` against
    /// the committed views, the tables and others' recorded changes.
    fn check_view_changes(
        &self,
        owner: TxnId,
        changes: &[ViewChange],
        table_exists: impl Fn(&str) -> bool,
    ) -> Result<()> {
        // a name the transaction changes twice: the first change names the
        // committed version, the later ones build on it
        let mut seen: Vec<&str> = Vec::new();
        for c in changes {
            if seen.contains(&c.name.as_str()) {
                continue;
            }
            seen.push(&c.name);
            let committed = self.views.iter().find(|v| v.name == c.name);
            let others = self
                .in_flight
                .iter()
                .filter(|d| d.txn != owner)
                .any(|d| d.views.iter().any(|o| o.name == c.name));
            if others || committed.map(|v| v.version) != c.base_version {
                if c.base_version.is_none() && committed.is_some() {
                    return Err(StorageError::TableExists(c.name.clone()));
                }
                return Err(StorageError::SerializationFailure);
            }
            if c.base_version.is_none() && c.new.is_some() && table_exists(&c.name) {
                return Err(StorageError::TableExists(c.name.clone()));
            }
        }
        Ok(())
    }
}

impl Engine {
    /// The committed views.
    pub fn views(&self) -> Vec<ViewDef> {
        if !self.has_views() {
            return Vec::new();
        }
        self.inner().catalog.lock().views.clone()
    }

    /// The committed view `name`.
    pub fn view(&self, name: &str) -> Option<ViewDef> {
        if !self.has_views() {
            return None;
        }
        self.inner()
            .catalog
            .lock()
            .views
            .iter()
            .find(|v| v.name == name)
            .cloned()
    }

    /// Whether any view is committed (no lock taken).
    pub fn has_views(&self) -> bool {
        self.inner()
            .view_count
            .load(std::sync::atomic::Ordering::Acquire)
            > 0
    }

    /// A relation id no table or view has had: a new view's OID.
    pub fn reserve_relation_id(&self) -> Result<eddy_common::TableId> {
        let inner = self.inner();
        inner.check_open()?;
        let mut cat = inner.catalog.lock();
        let mut next = cat.clone();
        let id = eddy_common::TableId(next.next_table_id);
        next.next_table_id = next
            .next_table_id
            .checked_add(1)
            .ok_or_else(|| StorageError::InvalidDefinition("relation ids exhausted".into()))?;
        manifest::write_atomic(&inner.cfg.data_dir.join("catalog.json"), &next)?;
        *cat = next;
        Ok(id)
    }

    /// Recounts the committed views after the catalog changed.
    pub(crate) fn count_views(&self, cat: &CatalogData) {
        self.inner()
            .view_count
            .store(cat.views.len(), std::sync::atomic::Ordering::Release);
    }
}

impl Ddl<'_> {
    /// Records the owner's view changes just before its commit point (see
    /// the module doc): refused with 42P07 or 40001 when they conflict,
    /// and then nothing is recorded.
    pub fn views_at_commit(&self, changes: &[ViewChange]) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let inner = self.engine().inner();
        self.record_at_commit(
            "a view change",
            |cat, owner| {
                cat.check_view_changes(owner, changes, |n| inner.tables.read().contains_key(n))
            },
            |entry| entry.views = changes.to_vec(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::{TableId, ViewColumn};

    fn view(name: &str, query: &str) -> ViewDef {
        ViewDef {
            id: TableId(7),
            name: name.into(),
            columns: vec![ViewColumn {
                name: "a".into(),
                type_oid: 23,
                typmod: -1,
            }],
            query: query.into(),
            depends_on: vec![],
            owner: None,
            acl: Vec::new(),
            comment: None,
            version: 0,
        }
    }

    fn change(name: &str, base: Option<u64>, new: Option<ViewDef>) -> ViewChange {
        ViewChange {
            name: name.into(),
            base_version: base,
            new,
        }
    }

    #[test]
    fn apply_creates_replaces_and_drops_with_growing_versions() {
        let mut views = Vec::new();
        apply(
            &mut views,
            &[change("v", None, Some(view("v", "SELECT 1")))],
        );
        assert_eq!(views.len(), 1);
        assert_eq!(views[0].version, 1);
        apply(
            &mut views,
            &[change("v", Some(1), Some(view("v", "SELECT 2")))],
        );
        assert_eq!(views[0].query, "SELECT 2");
        assert_eq!(views[0].version, 2);
        apply(&mut views, &[change("v", Some(2), None)]);
        assert!(views.is_empty());
    }

    #[test]
    fn stale_and_competing_changes_are_refused() {
        let mut cat: CatalogData = serde_json::from_str(
            r#"{"next_table_id":1,"next_group_id":1,"groups":[],"tables":[],"rowid_limit":0}"#,
        )
        .unwrap();
        apply(
            &mut cat.views,
            &[change("v", None, Some(view("v", "SELECT 1")))],
        );
        let none = |_: &str| false;
        // a create meeting a committed view: 42P07
        let e = cat
            .check_view_changes(TxnId(1), &[change("v", None, Some(view("v", "x")))], none)
            .unwrap_err();
        assert!(matches!(e, StorageError::TableExists(_)));
        // a replace made against an older version: 40001
        let e = cat
            .check_view_changes(TxnId(1), &[change("v", Some(0), None)], none)
            .unwrap_err();
        assert!(matches!(e, StorageError::SerializationFailure));
        assert!(cat
            .check_view_changes(TxnId(1), &[change("v", Some(1), None)], none)
            .is_ok());
        // another transaction's recorded change of the same name: 40001
        cat.entry(TxnId(2)).views = vec![change("w", None, Some(view("w", "y")))];
        assert!(cat.names_view("w"));
        let e = cat
            .check_view_changes(TxnId(1), &[change("w", None, Some(view("w", "z")))], none)
            .unwrap_err();
        assert!(matches!(e, StorageError::SerializationFailure));
        // a create meeting a table: 42P07
        let e = cat
            .check_view_changes(
                TxnId(1),
                &[change("t", None, Some(view("t", "z")))],
                |n: &str| n == "t",
            )
            .unwrap_err();
        assert!(matches!(e, StorageError::TableExists(_)));
    }
}
