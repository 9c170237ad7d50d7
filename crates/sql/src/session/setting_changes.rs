//! Settings inside a transaction block, as PostgreSQL keeps them:
//! * `SET` in a block lasts past COMMIT and is undone by ROLLBACK (and by
//!   ROLLBACK TO a savepoint taken before it);
//! * `SET LOCAL` lasts until the block ends, committed or not;
//! * `SET LOCAL` (and `set_config(..., true)`) outside a block changes
//!   nothing: its transaction is the statement itself.
//!
//! Before, every SET was applied to the session at once and kept: `SET
//! LOCAL statement_timeout` in one transaction limited every later one, a
//! `SET LOCAL app.tenant` outlived its transaction, and ROLLBACK undid no
//! SET.
//!
//! [`SettingChanges`] records, for each setting changed in the open block,
//! its value before the block and the value COMMIT keeps; the session
//! calls it at BEGIN, SET, SAVEPOINT, ROLLBACK TO, RELEASE, COMMIT and
//! ROLLBACK, and re-applies what a restored setting acts on
//! (`Session::apply_gpu_setting`).

use std::collections::BTreeMap;

use super::Session;

/// A setting's value, `None` where it has none (a custom setting never
/// set).
type Value = Option<String>;

/// What the open block did to the session's settings.
#[derive(Debug, Default)]
pub(super) struct SettingChanges {
    /// Each setting changed in the block: its value before the block.
    before: BTreeMap<String, Value>,
    /// Each setting SET (not LOCAL) in the block: the value COMMIT keeps.
    kept: BTreeMap<String, Value>,
    /// Savepoints, oldest first.
    savepoints: Vec<SettingsAt>,
}

/// The settings and `kept` when a savepoint was taken.
#[derive(Debug, Clone)]
struct SettingsAt {
    name: String,
    settings: BTreeMap<String, String>,
    kept: BTreeMap<String, Value>,
}

impl SettingChanges {
    /// Notes that `name` is about to become `new` in the block (`local`:
    /// until the block ends).
    fn record(&mut self, settings: &BTreeMap<String, String>, name: &str, local: bool, new: Value) {
        self.before
            .entry(name.to_string())
            .or_insert_with(|| settings.get(name).cloned());
        if !local {
            self.kept.insert(name.to_string(), new);
        }
    }

    /// The values the block's end leaves (`commit`: kept SETs, else the
    /// values before the block), for the settings it changed.
    fn finish(self, commit: bool) -> Vec<(String, Value)> {
        let SettingChanges {
            before, mut kept, ..
        } = self;
        before
            .into_iter()
            .map(|(name, before)| {
                let value = match kept.remove(&name) {
                    Some(v) if commit => v,
                    _ => before,
                };
                (name, value)
            })
            .collect()
    }
}

impl Session {
    /// Sets `name` to `value` (already validated and applied to what it
    /// acts on) with the block rules of the module doc. `SET LOCAL`
    /// outside a block does nothing, as in PostgreSQL.
    pub(super) fn store_setting(&mut self, name: String, value: String, local: bool) {
        if self.in_transaction_block() {
            self.setting_changes
                .record(&self.settings, &name, local, Some(value.clone()));
        } else if local {
            return;
        }
        self.settings.insert(name, value);
    }

    /// Records, after the fact, what a change made by other means than
    /// [`Session::store_setting`] (RESET, RESET ALL, SET SESSION
    /// CHARACTERISTICS) did to the settings, which were `before`: as SETs.
    pub(super) fn note_settings_changed(&mut self, before: &BTreeMap<String, String>) {
        if !self.in_transaction_block() {
            return;
        }
        let names: Vec<String> = before
            .keys()
            .chain(self.settings.keys())
            .filter(|n| before.get(*n) != self.settings.get(*n))
            .cloned()
            .collect();
        for n in names {
            self.setting_changes
                .before
                .entry(n.clone())
                .or_insert_with(|| before.get(&n).cloned());
            let now = self.settings.get(&n).cloned();
            self.setting_changes.kept.insert(n, now);
        }
    }

    /// A block begins: nothing changed yet.
    pub(super) fn begin_setting_changes(&mut self) {
        self.setting_changes = SettingChanges::default();
    }

    /// The block ends: SETs stay (`commit`) or are undone, SET LOCALs are
    /// undone.
    pub(super) fn end_setting_changes(&mut self, commit: bool) {
        let changes = std::mem::take(&mut self.setting_changes);
        for (name, value) in changes.finish(commit) {
            if self.settings.get(&name) != value.as_ref() {
                self.restore_setting(&name, value);
            }
        }
    }

    fn restore_setting(&mut self, name: &str, value: Value) {
        match value {
            Some(v) => {
                if let Err(e) = self.apply_gpu_setting(name, &v) {
                    tracing::warn!(setting = name, error = %e, "restoring a setting");
                }
                self.settings.insert(name.to_string(), v);
            }
            None => {
                self.settings.remove(name);
            }
        }
    }

    pub(super) fn savepoint_settings(&mut self, name: &str) {
        let snapshot = SettingsAt {
            name: name.to_string(),
            settings: self.settings.clone(),
            kept: self.setting_changes.kept.clone(),
        };
        self.setting_changes.savepoints.push(snapshot);
    }

    /// ROLLBACK TO `name`: the settings as they were at the savepoint,
    /// which stays.
    pub(super) fn rollback_settings_to(&mut self, name: &str) {
        let Some(at) = self
            .setting_changes
            .savepoints
            .iter()
            .rposition(|s| s.name == name)
        else {
            return;
        };
        self.setting_changes
            .savepoints
            .truncate(at.saturating_add(1));
        let Some(SettingsAt { settings, kept, .. }) =
            self.setting_changes.savepoints.last().cloned()
        else {
            return;
        };
        self.setting_changes.kept = kept;
        let names: Vec<String> = self
            .settings
            .keys()
            .chain(settings.keys())
            .filter(|n| self.settings.get(*n) != settings.get(*n))
            .cloned()
            .collect();
        for n in names {
            self.restore_setting(&n, settings.get(&n).cloned());
        }
    }

    /// RELEASE `name`: that savepoint and the later ones go.
    pub(super) fn release_settings(&mut self, name: &str) {
        if let Some(at) = self
            .setting_changes
            .savepoints
            .iter()
            .rposition(|s| s.name == name)
        {
            self.setting_changes.savepoints.truncate(at);
        }
    }

    /// Applies what `set_config` queued (`crate::set_config`), before the
    /// next statement or transaction command runs.
    pub(super) fn apply_pending_settings(&mut self) {
        let pending = std::mem::take(&mut *self.pending_settings.lock());
        for p in pending {
            self.store_setting(p.name, p.value, p.local);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn commit_keeps_sets_and_drops_locals_rollback_drops_both() {
        let s = settings(&[("a", "1"), ("b", "1")]);
        let mut c = SettingChanges::default();
        c.record(&s, "a", false, Some("2".into()));
        c.record(&s, "b", true, Some("2".into()));
        c.record(&s, "x.y", true, Some("v".into()));
        let mut done = c.finish(true);
        done.sort();
        assert_eq!(
            done,
            vec![
                ("a".to_string(), Some("2".to_string())),
                ("b".to_string(), Some("1".to_string())),
                ("x.y".to_string(), None),
            ]
        );
        let mut c = SettingChanges::default();
        c.record(&s, "a", false, Some("2".into()));
        assert_eq!(
            c.finish(false),
            vec![("a".to_string(), Some("1".to_string()))]
        );
    }

    #[test]
    fn a_local_after_a_set_commits_the_set() {
        let s = settings(&[("a", "1")]);
        let mut c = SettingChanges::default();
        c.record(&s, "a", false, Some("2".into()));
        let now = settings(&[("a", "2")]);
        c.record(&now, "a", true, Some("3".into()));
        assert_eq!(
            c.finish(true),
            vec![("a".to_string(), Some("2".to_string()))]
        );
    }
}
