//! Schemas other than `public` in the catalog (`CREATE SCHEMA`, `DROP
//! SCHEMA`, `ALTER SCHEMA`).
//!
//! Storage keeps a schema's definition ([`SchemaDef`]) in `catalog.json`
//! next to the tables and views; the SQL layer names the schema's
//! relations and decides who may use it. The invariants are the views'
//! ([`crate::views`]), for the same reasons:
//!
//! * **Changes commit with their transaction.** A transaction keeps its
//!   schema changes to itself; just before its commit point they are
//!   recorded under its id ([`Ddl::schemas_at_commit`], one `catalog.json`
//!   write with their check) and applied when its commit-log record is
//!   durable, or at open when the log names it; otherwise forgotten.
//! * **No lost change.** Each change names the committed version it was
//!   made against; the record is refused (40001) when the schema changed
//!   since or another transaction has a change of the same name recorded,
//!   and with 42P06 when a create meets a committed schema of its name.

use eddy_common::{SchemaDef, TxnId};
use serde::{Deserialize, Serialize};

use crate::ddl::Ddl;
use crate::engine::{CatalogData, Engine};
use crate::error::{Result, StorageError};

/// One change a transaction makes to the schemas: schema `name`, as
/// committed at `base_version` (`None`: no such schema), becomes `new`
/// (`None`: dropped).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaChange {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<SchemaDef>,
}

/// Applies committed `changes` in order (each replaces or drops the schema
/// of its name).
pub fn apply(schemas: &mut Vec<SchemaDef>, changes: &[SchemaChange]) {
    for c in changes {
        schemas.retain(|s| s.name != c.name);
        if let Some(new) = &c.new {
            let mut new = new.clone();
            new.version = c.base_version.map_or(1, |v| v.saturating_add(1));
            schemas.push(new);
        }
    }
}

impl CatalogData {
    /// The check of [`Ddl::schemas_at_commit`].
    fn check_schema_changes(&self, owner: TxnId, changes: &[SchemaChange]) -> Result<()> {
        let mut seen: Vec<&str> = Vec::new();
        for c in changes {
            // the first change of a name names the committed version; the
            // later ones build on it
            if seen.contains(&c.name.as_str()) {
                continue;
            }
            seen.push(&c.name);
            let committed = self.schemas.iter().find(|s| s.name == c.name);
            let others = self
                .in_flight
                .iter()
                .filter(|d| d.txn != owner)
                .any(|d| d.schemas.iter().any(|o| o.name == c.name));
            if others || committed.map(|s| s.version) != c.base_version {
                if c.base_version.is_none() && committed.is_some() {
                    return Err(StorageError::SchemaExists(c.name.clone()));
                }
                return Err(StorageError::SerializationFailure);
            }
        }
        Ok(())
    }
}

impl Engine {
    /// The committed schemas (other than `public`).
    pub fn schemas(&self) -> Vec<SchemaDef> {
        self.schemas_shared().as_ref().clone()
    }

    /// The committed schemas, without a copy: what a statement reads to
    /// resolve its names (no catalog lock is taken).
    pub fn schemas_shared(&self) -> std::sync::Arc<Vec<SchemaDef>> {
        std::sync::Arc::clone(&self.inner().committed_schemas.read())
    }

    /// Whether any schema is committed: statements skip resolving schema
    /// names while none is.
    pub fn has_schemas(&self) -> bool {
        !self.inner().committed_schemas.read().is_empty()
    }

    /// Publishes the committed schemas after the catalog changed.
    pub(crate) fn publish_schemas(&self, cat: &CatalogData) {
        *self.inner().committed_schemas.write() = std::sync::Arc::new(cat.schemas.clone());
    }
}

impl Ddl<'_> {
    /// Records the owner's schema changes just before its commit point
    /// (see the module doc): refused with 42P06 or 40001 when they
    /// conflict, and then nothing is recorded.
    pub fn schemas_at_commit(&self, changes: &[SchemaChange]) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        self.record_at_commit(
            "a schema change",
            |cat, owner| cat.check_schema_changes(owner, changes),
            |entry| entry.schemas = changes.to_vec(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::TableId;

    fn schema(name: &str) -> SchemaDef {
        SchemaDef {
            id: TableId(9),
            name: name.into(),
            owner: None,
            acl: vec![],
            comment: None,
            version: 0,
        }
    }

    #[test]
    fn apply_creates_replaces_and_drops() {
        let mut all = Vec::new();
        apply(
            &mut all,
            &[SchemaChange {
                name: "app".into(),
                base_version: None,
                new: Some(schema("app")),
            }],
        );
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].version, 1);
        let mut owned = schema("app");
        owned.owner = Some("alice".into());
        apply(
            &mut all,
            &[SchemaChange {
                name: "app".into(),
                base_version: Some(1),
                new: Some(owned),
            }],
        );
        assert_eq!(all[0].version, 2);
        assert_eq!(all[0].owner.as_deref(), Some("alice"));
        apply(
            &mut all,
            &[SchemaChange {
                name: "app".into(),
                base_version: Some(2),
                new: None,
            }],
        );
        assert!(all.is_empty());
    }
}
