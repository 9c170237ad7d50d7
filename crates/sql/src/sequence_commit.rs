//! What a committed transaction does to sequences after its commit point,
//! written down first so that a crash cannot lose it.
//!
//! Sequences live outside the catalog (`crate::sequences`), so the
//! changes a transaction makes to them take effect when it commits: the
//! sequences of the tables it dropped and the ones it dropped itself go,
//! owners are renamed with their tables and columns, OWNER TO, OWNED BY
//! and grants are applied ([`SequenceCommit`]). A transaction that
//! changed the catalog commits through a record in the commit log; before
//! that record its sequence changes are written to
//! `<data dir>/sequences/commit-<txn>.intent` (fsync'd), applied after it,
//! and the file removed. A start-up finding such a file applies it when
//! the commit log named the transaction (`Engine::committed_before_open`)
//! and removes it either way. Applying is idempotent (a drop of a dropped
//! sequence, a rename of a renamed owner change nothing), so a crash
//! while applying is repaired by applying again.
//!
//! A transaction without a commit-log record (no catalog change) has
//! nothing to tie its sequence changes to: they are applied after its
//! commit, unjournaled (`docs/design/transactions.md`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, SqlError};
use crate::sequences::{SequenceChange, Sequences};
use crate::txn::OwnerRename;

/// The sequence changes of one committed transaction, in the order they
/// are applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceCommit {
    pub txn: u64,
    /// Owners renamed with their tables or columns.
    #[serde(default)]
    pub renames: Vec<OwnerRename>,
    /// OWNER TO, OWNED BY and grants.
    #[serde(default)]
    pub changes: Vec<(String, SequenceChange)>,
    /// Tables the transaction dropped: the sequences their columns own go
    /// with them (when the table is indeed gone).
    #[serde(default)]
    pub dropped_tables: Vec<String>,
    /// Sequences DROP SEQUENCE named.
    #[serde(default)]
    pub dropped_sequences: Vec<String>,
}

impl SequenceCommit {
    pub fn is_empty(&self) -> bool {
        self.renames.is_empty()
            && self.changes.is_empty()
            && self.dropped_tables.is_empty()
            && self.dropped_sequences.is_empty()
    }

    /// Carries the changes out (`table_exists`: whether a dropped table
    /// is still there, in which case its sequences stay). A change that
    /// fails is logged and the rest go on: the transaction has committed.
    pub fn apply(&self, sequences: &Sequences, table_exists: &dyn Fn(&str) -> bool) {
        for r in &self.renames {
            if let Err(e) = sequences.rename_owner(
                &r.from_table,
                r.from_column.as_deref(),
                &r.to_table,
                r.to_column.as_deref(),
            ) {
                tracing::warn!(table = %r.from_table, error = %e, "could not rename the owner of a sequence at commit");
            }
        }
        for (name, change) in &self.changes {
            let r = match change.clone() {
                SequenceChange::OwnedBy(o) => sequences.set_owned_by(name, o),
                SequenceChange::Owner(role) => sequences.set_owner(name, role),
                SequenceChange::Acl(acl) => sequences.set_acl(name, acl),
                SequenceChange::Parameters(p) => sequences.set_parameters(name, &p),
            };
            if let Err(e) = r {
                tracing::warn!(sequence = %name, error = %e, "could not change a sequence at commit");
            }
        }
        let owned = self
            .dropped_tables
            .iter()
            .filter(|t| !table_exists(t))
            .flat_map(|t| sequences.owned_by_table(t));
        for name in owned.chain(self.dropped_sequences.iter().cloned()) {
            if let Err(e) = sequences.drop_sequence(&name) {
                tracing::warn!(sequence = %name, error = %e, "could not drop a sequence at commit");
            }
        }
    }
}

/// Where the journal of transaction `txn` is written.
fn journal_path(dir: &Path, txn: u64) -> PathBuf {
    dir.join(format!("commit-{txn}.intent"))
}

impl Sequences {
    /// Writes `c` durably, before its transaction's commit record.
    pub fn journal(&self, c: &SequenceCommit) -> Result<()> {
        let body = serde_json::to_vec(c)
            .map_err(|e| SqlError::Internal(format!("encoding a sequence journal: {e}")))?;
        crate::sequences::write_durably(self.dir(), &journal_path(self.dir(), c.txn), &body)
    }

    /// Removes the journal of `txn` (applied, or its transaction failed).
    pub fn forget_journal(&self, txn: u64) {
        let path = journal_path(self.dir(), txn);
        if let Err(e) = std::fs::remove_file(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %path.display(), error = %e, "could not remove a sequence journal");
            }
        }
    }

    /// Settles the journals a crash left: each is applied when
    /// `committed` says its transaction committed, then removed. A
    /// journal that does not parse was cut short by the crash, before its
    /// transaction's record: removed.
    pub fn settle_journals(
        &self,
        committed: &dyn Fn(u64) -> bool,
        table_exists: &dyn Fn(&str) -> bool,
    ) -> Result<()> {
        let dir = self.dir();
        let entries = std::fs::read_dir(dir).map_err(|e| SqlError::Io {
            path: dir.display().to_string(),
            source: e,
        })?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("intent") {
                continue;
            }
            let parsed = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<SequenceCommit>(&b).ok());
            match parsed {
                Some(c) if committed(c.txn) => {
                    tracing::info!(txn = c.txn, "applying the sequence changes of a transaction that committed before a crash");
                    c.apply(self, table_exists);
                    self.forget_journal(c.txn);
                }
                _ => {
                    if let Err(e) = std::fs::remove_file(&path) {
                        tracing::warn!(path = %path.display(), error = %e, "could not remove a sequence journal");
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sequences::{OwnedBy, SequenceDef};

    fn owned(name: &str, table: &str) -> SequenceDef {
        let mut d = SequenceDef::with_defaults(name, "bigint", 1);
        d.owned_by = Some(OwnedBy {
            table: table.into(),
            column: "id".into(),
        });
        d
    }

    #[test]
    fn a_journal_is_applied_at_start_up_only_if_its_transaction_committed() {
        let d = tempfile::tempdir().unwrap();
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        s.create(owned("a_id_seq", "a"), false).unwrap();
        s.create(owned("b_id_seq", "b"), false).unwrap();
        s.create(SequenceDef::with_defaults("loose", "bigint", 1), false)
            .unwrap();
        let committed = SequenceCommit {
            txn: 7,
            renames: vec![OwnerRename {
                from_table: "a".into(),
                from_column: None,
                to_table: "a2".into(),
                to_column: None,
            }],
            changes: vec![("loose".into(), SequenceChange::Owner("alice".into()))],
            dropped_tables: vec!["b".into()],
            dropped_sequences: Vec::new(),
        };
        let lost = SequenceCommit {
            txn: 8,
            dropped_sequences: vec!["loose".into()],
            ..SequenceCommit::default()
        };
        s.journal(&committed).unwrap();
        s.journal(&lost).unwrap();
        std::fs::write(
            d.path().join("sequences/commit-9.intent"),
            b"{\"txn\": 9, \"ren",
        )
        .unwrap();
        drop(s);
        // a crash after 7's record, before 8's
        let s = Sequences::open(d.path(), &|t| t == 7).unwrap();
        s.settle_journals(&|t| t == 7, &|t| t == "a2").unwrap();
        assert_eq!(s.owned_by_table("a2"), vec!["a_id_seq".to_string()]);
        assert!(!s.exists("b_id_seq"), "a dropped table's sequence went");
        assert_eq!(s.def("loose").unwrap().owner.as_deref(), Some("alice"));
        let left = std::fs::read_dir(d.path().join("sequences"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "intent"))
            })
            .count();
        assert_eq!(left, 0, "every journal is gone");
        // applying again changes nothing
        committed.apply(&s, &|t| t == "a2");
        assert_eq!(s.owned_by_table("a2"), vec!["a_id_seq".to_string()]);
        assert!(s.exists("loose"));
    }

    #[test]
    fn altered_parameters_reach_the_sequence_from_a_journal_and_its_values_follow_them() {
        let d = tempfile::tempdir().unwrap();
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        s.create(SequenceDef::with_defaults("p", "bigint", 1), false)
            .unwrap();
        // values logged ahead on the old increment
        assert_eq!(s.nextval("p").unwrap(), 1);
        assert_eq!(s.nextval("p").unwrap(), 2);
        let mut parameters = crate::sequences::SequenceParameters::of(&s.def("p").unwrap());
        parameters.increment = 10;
        parameters.max = 25;
        let commit = SequenceCommit {
            txn: 3,
            changes: vec![("p".into(), SequenceChange::Parameters(parameters))],
            ..SequenceCommit::default()
        };
        s.journal(&commit).unwrap();
        drop(s);
        // a crash after the commit record, before the change was applied
        let s = Sequences::open(d.path(), &|t| t == 3).unwrap();
        s.settle_journals(&|t| t == 3, &|_| true).unwrap();
        let def = s.def("p").unwrap();
        assert_eq!((def.increment, def.max), (10, 25));
        // the restart resumed after the values logged ahead (up to 32),
        // which are past the new bound
        assert!(s.nextval("p").is_err());
        // applying it on a running sequence: the next value follows at once
        let t = tempfile::tempdir().unwrap();
        let s = Sequences::open(t.path(), &|_| false).unwrap();
        s.create(SequenceDef::with_defaults("q", "bigint", 1), false)
            .unwrap();
        assert_eq!(s.nextval("q").unwrap(), 1);
        let mut parameters = crate::sequences::SequenceParameters::of(&s.def("q").unwrap());
        parameters.increment = 10;
        s.set_parameters("q", &parameters).unwrap();
        assert_eq!(s.nextval("q").unwrap(), 11);
        drop(s);
        // and what the file logs is on the new path
        let s = Sequences::open(t.path(), &|_| false).unwrap();
        let next = s.nextval("q").unwrap();
        assert!(next > 11 && (next - 1) % 10 == 0, "{next}");
    }
}
