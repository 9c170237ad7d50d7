//! What a transaction still has to check before it commits: its deferred
//! foreign-key checks (`DEFERRABLE INITIALLY DEFERRED`, `SET CONSTRAINTS`;
//! `docs/design/foreign_keys.md`, "Deferred checks").
//!
//! PostgreSQL queues one trigger event per written row; Eddy records less
//! and checks the same at the end:
//! * a write of a referencing row under a deferred constraint records
//!   (child table, constraint); at the check, every row the transaction
//!   has written to that table, in its final version, must have its
//!   referenced row (a row written and later deleted or fixed needs
//!   nothing, as PostgreSQL skips the event of a dead row version);
//! * a DELETE or key UPDATE of referenced rows under a deferred NO ACTION
//!   constraint records the removed keys; at the check, no row of the
//!   referencing table may still reference a key that is still gone.
//!
//! The mode of each constraint is PostgreSQL's: `SET CONSTRAINTS name`
//! first, then `SET CONSTRAINTS ALL` (which forgets the named settings),
//! then the constraint's INITIALLY DEFERRED; a constraint that is not
//! DEFERRABLE is always checked at once. RESTRICT, CASCADE, SET NULL and
//! SET DEFAULT act at once whatever the mode (PostgreSQL defers only NO
//! ACTION). The whole state is saved with each savepoint: ROLLBACK TO
//! restores the modes and drops the checks recorded after it.

use std::collections::{BTreeSet, HashMap};

use eddy_common::{ForeignKeyDef, TableId};

/// A table as the checks remember it: by id, and by name for a table a
/// later statement of the transaction rewrote under a new id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TableRef {
    pub id: TableId,
    pub name: String,
}

/// Referenced keys a statement removed under a deferred NO ACTION.
#[derive(Clone, Debug)]
pub struct RemovedKeys {
    pub parent: TableRef,
    pub child: TableRef,
    pub constraint: String,
    pub keys: Vec<Vec<u8>>,
}

/// A transaction's constraint modes and pending checks.
#[derive(Clone, Debug, Default)]
pub struct DeferredChecks {
    /// `SET CONSTRAINTS ALL DEFERRED` (true) or `IMMEDIATE` (false).
    all: Option<bool>,
    /// `SET CONSTRAINTS name ...`, by constraint name.
    named: HashMap<String, bool>,
    /// (child table, constraint) whose written rows are checked.
    children: BTreeSet<(TableRef, String)>,
    removed: Vec<RemovedKeys>,
}

/// Which constraints a `SET CONSTRAINTS` names: all, or these names.
pub type Selection<'a> = Option<&'a [String]>;

impl DeferredChecks {
    /// Whether `fk` is checked at commit (module doc: the order of modes).
    pub fn is_deferred(&self, fk: &ForeignKeyDef) -> bool {
        if !fk.deferrable {
            return false;
        }
        if let Some(d) = self.named.get(&fk.name) {
            return *d;
        }
        self.all.unwrap_or(fk.initially_deferred)
    }

    /// `SET CONSTRAINTS <selection> DEFERRED | IMMEDIATE`.
    pub fn set_mode(&mut self, selection: Selection<'_>, deferred: bool) {
        match selection {
            None => {
                self.all = Some(deferred);
                self.named.clear();
            }
            Some(names) => {
                for n in names {
                    self.named.insert(n.clone(), deferred);
                }
            }
        }
    }

    pub fn defer_child_check(&mut self, child: TableRef, constraint: &str) {
        self.children.insert((child, constraint.to_string()));
    }

    pub fn defer_removed_keys(&mut self, removed: RemovedKeys) {
        self.removed.push(removed);
    }

    pub fn has_pending(&self) -> bool {
        !self.children.is_empty() || !self.removed.is_empty()
    }

    /// Takes the pending checks of the constraints `selection` names (all
    /// of them for `None`); the others stay.
    pub fn take_pending(
        &mut self,
        selection: Selection<'_>,
    ) -> (Vec<(TableRef, String)>, Vec<RemovedKeys>) {
        let chosen = |c: &str| selection.is_none_or(|names| names.iter().any(|n| n == c));
        let (children, kept): (BTreeSet<_>, BTreeSet<_>) = std::mem::take(&mut self.children)
            .into_iter()
            .partition(|(_, c)| chosen(c));
        self.children = kept;
        let (removed, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.removed)
            .into_iter()
            .partition(|r| chosen(&r.constraint));
        self.removed = kept;
        (children.into_iter().collect(), removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fk(name: &str, deferrable: bool, initially_deferred: bool) -> ForeignKeyDef {
        ForeignKeyDef {
            name: name.into(),
            columns: vec![0],
            ref_table: TableId(1),
            ref_columns: vec![0],
            on_delete: Default::default(),
            on_update: Default::default(),
            deferrable,
            initially_deferred,
        }
    }

    #[test]
    fn modes_follow_postgresql_order() {
        let mut d = DeferredChecks::default();
        let (a, b, fixed) = (
            fk("a", true, true),
            fk("b", true, false),
            fk("c", false, false),
        );
        assert!(d.is_deferred(&a) && !d.is_deferred(&b) && !d.is_deferred(&fixed));
        d.set_mode(None, true);
        assert!(d.is_deferred(&a) && d.is_deferred(&b) && !d.is_deferred(&fixed));
        d.set_mode(Some(&["a".to_string()]), false);
        assert!(!d.is_deferred(&a) && d.is_deferred(&b));
        // ALL forgets the named settings
        d.set_mode(None, true);
        assert!(d.is_deferred(&a));
        d.set_mode(None, false);
        assert!(!d.is_deferred(&a) && !d.is_deferred(&b));
    }

    #[test]
    fn pending_checks_are_taken_by_constraint() {
        let mut d = DeferredChecks::default();
        let t = |n: u32| TableRef {
            id: TableId(n),
            name: format!("t{n}"),
        };
        d.defer_child_check(t(1), "a");
        d.defer_child_check(t(1), "a");
        d.defer_child_check(t(2), "b");
        d.defer_removed_keys(RemovedKeys {
            parent: t(3),
            child: t(1),
            constraint: "a".into(),
            keys: vec![vec![1]],
        });
        let (children, removed) = d.take_pending(Some(&["a".to_string()]));
        assert_eq!(children.len(), 1);
        assert_eq!(removed.len(), 1);
        assert!(d.has_pending());
        let (children, removed) = d.take_pending(None);
        assert_eq!((children.len(), removed.len()), (1, 0));
        assert!(!d.has_pending());
    }
}
