//! Sequences: `CREATE SEQUENCE`, `nextval`, `currval`, `setval`,
//! `lastval`, and the sequences behind `SERIAL` and identity columns.
//!
//! Semantics are PostgreSQL's: a value handed out by `nextval` is never
//! handed out again, not after a ROLLBACK (sequences are not
//! transactional) and not after a crash; a crash may leave a gap.
//!
//! Durability works as PostgreSQL's WAL-logged sequences do: each sequence
//! is one file `<data dir>/sequences/<name>.json` (replaced by write, fsync,
//! rename, directory fsync) that records a value *at or beyond* the last one
//! handed out. `nextval` logs [`LOG_AHEAD`] values at a time, so one fsync
//! covers 32 calls; after a restart the sequence continues after the logged
//! value. Invariant: every value returned is at or before the logged value
//! (in the direction of the increment), so no value repeats after a crash.
//!
//! Sequences share the relation namespace with tables (42P07 on a clash),
//! as in PostgreSQL.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use eddy_common::AclItem;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::{Result, SqlError};

/// Values logged ahead per file write (PostgreSQL's SEQ_LOG_VALS).
pub const LOG_AHEAD: i64 = 32;

/// The column that owns a sequence (`SERIAL`, identity, `OWNED BY`): the
/// sequence is dropped with its table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnedBy {
    pub table: String,
    pub column: String,
}

/// A catalog change of a sequence, made when its transaction commits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SequenceChange {
    /// `ALTER SEQUENCE ... OWNED BY` (`None`: OWNED BY NONE).
    OwnedBy(Option<OwnedBy>),
    /// `ALTER ... OWNER TO role`.
    Owner(String),
    /// `GRANT` / `REVOKE ... ON SEQUENCE`: the grants it leaves.
    Acl(Vec<AclItem>),
    /// `ALTER SEQUENCE ... AS / INCREMENT / MINVALUE / MAXVALUE / START /
    /// CACHE / CYCLE`: the parameters it leaves.
    Parameters(SequenceParameters),
}

/// What `nextval` follows: the parameters `ALTER SEQUENCE` may change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceParameters {
    pub type_name: String,
    pub increment: i64,
    pub min: i64,
    pub max: i64,
    pub start: i64,
    pub cache: i64,
    pub cycle: bool,
}

impl SequenceParameters {
    /// The parameters of `def`.
    pub fn of(def: &SequenceDef) -> SequenceParameters {
        SequenceParameters {
            type_name: def.type_name.clone(),
            increment: def.increment,
            min: def.min,
            max: def.max,
            start: def.start,
            cache: def.cache,
            cycle: def.cycle,
        }
    }

    /// `def` with these parameters.
    pub fn apply_to(&self, def: &mut SequenceDef) {
        def.type_name.clone_from(&self.type_name);
        def.increment = self.increment;
        def.min = self.min;
        def.max = self.max;
        def.start = self.start;
        def.cache = self.cache;
        def.cycle = self.cycle;
    }
}

/// A sequence's definition, as `CREATE SEQUENCE` gave it (defaults filled).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceDef {
    pub name: String,
    /// `smallint`, `integer` or `bigint`: bounds the default MAXVALUE.
    pub type_name: String,
    pub increment: i64,
    pub min: i64,
    pub max: i64,
    pub start: i64,
    pub cache: i64,
    pub cycle: bool,
    pub owned_by: Option<OwnedBy>,
    /// The role owning the sequence (`None`: the bootstrap superuser, as
    /// for sequences made before owners were kept): its creator, or the
    /// role `ALTER ... OWNER TO` named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Grants on the sequence (USAGE, SELECT, UPDATE): what roles other
    /// than its owner may do with it (`crate::sequence_functions`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl: Vec<AclItem>,
}

impl SequenceDef {
    /// A definition with PostgreSQL's defaults for `type_name`
    /// (`smallint` / `integer` / `bigint`) and `increment`.
    pub fn with_defaults(name: &str, type_name: &str, increment: i64) -> SequenceDef {
        let type_max = type_max(type_name);
        let (min, max) = if increment > 0 {
            (1, type_max)
        } else {
            (-type_max - 1, -1)
        };
        SequenceDef {
            name: name.to_string(),
            type_name: type_name.to_string(),
            increment,
            min,
            max,
            start: if increment > 0 { min } else { max },
            cache: 1,
            cycle: false,
            owned_by: None,
            owner: None,
            acl: Vec::new(),
        }
    }

    /// Checks the definition as `CREATE SEQUENCE` does (22023).
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(SqlError::InvalidParameter(m));
        if self.increment == 0 {
            return bad("INCREMENT must not be zero".into());
        }
        let type_max = type_max(&self.type_name);
        let in_range = |v: i64| v <= type_max && v >= -type_max - 1;
        if !in_range(self.max) {
            return bad(format!(
                "MAXVALUE ({}) is out of range for sequence data type {}",
                self.max, self.type_name
            ));
        }
        if !in_range(self.min) {
            return bad(format!(
                "MINVALUE ({}) is out of range for sequence data type {}",
                self.min, self.type_name
            ));
        }
        if self.min >= self.max {
            return bad(format!(
                "MINVALUE ({}) must be less than MAXVALUE ({})",
                self.min, self.max
            ));
        }
        if self.start < self.min {
            return bad(format!(
                "START value ({}) cannot be less than MINVALUE ({})",
                self.start, self.min
            ));
        }
        if self.start > self.max {
            return bad(format!(
                "START value ({}) cannot be greater than MAXVALUE ({})",
                self.start, self.max
            ));
        }
        if self.cache < 1 {
            return bad(format!("CACHE ({}) must be greater than zero", self.cache));
        }
        Ok(())
    }
}

fn type_max(type_name: &str) -> i64 {
    match type_name {
        "smallint" => i64::from(i16::MAX),
        "integer" => i64::from(i32::MAX),
        _ => i64::MAX,
    }
}

/// What the file records.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct SequenceFile {
    def: SequenceDef,
    /// The logged value: every value handed out is at or before it.
    last_value: i64,
    /// Whether `last_value` itself has been handed out (false after CREATE
    /// and after `setval(.., false)`: the next `nextval` returns it).
    is_called: bool,
    /// Created by a transaction that has not committed yet: a start-up
    /// finding it (a crash before that commit) drops the sequence.
    /// Absent in files written before this field existed: committed.
    #[serde(default)]
    pending: bool,
    /// The committed sequence of the same name that this pending one
    /// replaces (dropped and created again in one block): a start-up
    /// finding it puts it back, as the block never committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    replaces: Option<Box<SequenceFile>>,
    /// The transaction committing this pending sequence, written just
    /// before that transaction's commit record: a start-up finding it
    /// asks the engine whether the record made it
    /// (`Engine::committed_before_open`) and commits or drops it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    committing: Option<u64>,
}

#[derive(Clone)]
struct SequenceState {
    def: SequenceDef,
    /// The last value handed out (or, when `!is_called`, the next one).
    last: i64,
    is_called: bool,
    /// The value the file records; `nextval` may hand out values up to it
    /// without writing.
    logged: i64,
    logged_is_called: bool,
    /// See [`SequenceFile::pending`].
    pending: bool,
    /// See [`SequenceFile::replaces`], as it stood (its last value
    /// included, which the file may log ahead of). Kept in memory after
    /// the file is marked committed, until [`Sequences::settle`]: a
    /// commit that fails after that still puts it back.
    replaces: Option<Box<SequenceState>>,
    /// See [`SequenceFile::committing`].
    committing: Option<u64>,
}

impl SequenceState {
    /// A sequence as `CREATE SEQUENCE` leaves it.
    fn created(def: SequenceDef, pending: bool, replaces: Option<Box<SequenceState>>) -> Self {
        SequenceState {
            last: def.start,
            is_called: false,
            logged: def.start,
            logged_is_called: false,
            pending,
            replaces,
            committing: None,
            def,
        }
    }

    /// A sequence as its file records it (after a restart, or put back).
    fn of_file(file: SequenceFile) -> Self {
        SequenceState {
            last: file.last_value,
            is_called: file.is_called,
            logged: file.last_value,
            logged_is_called: file.is_called,
            pending: file.pending,
            replaces: None,
            committing: None,
            def: file.def,
        }
    }

    /// What its file records: the logged value, and what it replaces
    /// only while pending (a committed file replaces nothing).
    fn file(&self) -> SequenceFile {
        SequenceFile {
            def: self.def.clone(),
            last_value: self.logged,
            is_called: self.logged_is_called,
            pending: self.pending,
            replaces: self
                .replaces
                .as_ref()
                .filter(|_| self.pending)
                .map(|r| Box::new(r.file())),
            committing: self.committing.filter(|_| self.pending),
        }
    }

    /// The value after `v`, or `None` past the bound without CYCLE.
    fn step(&self, v: i64) -> Result<i64> {
        let d = &self.def;
        let next = v.checked_add(d.increment);
        let past = match next {
            Some(n) => n > d.max || n < d.min,
            None => true,
        };
        match (past, next) {
            (false, Some(n)) => Ok(n),
            _ if d.cycle => Ok(if d.increment > 0 { d.min } else { d.max }),
            _ => Err(SqlError::SequenceLimit(format!(
                "nextval: reached {} value of sequence \"{}\" ({})",
                if d.increment > 0 {
                    "maximum"
                } else {
                    "minimum"
                },
                d.name,
                if d.increment > 0 { d.max } else { d.min }
            ))),
        }
    }

    /// Whether `v` may be handed out without logging first.
    fn covered(&self, v: i64) -> bool {
        if !self.logged_is_called {
            return false;
        }
        if self.def.increment > 0 {
            v <= self.logged && v > self.last_or_min()
        } else {
            v >= self.logged && v < self.last_or_max()
        }
    }

    fn last_or_min(&self) -> i64 {
        if self.is_called {
            self.last
        } else {
            self.def.min.saturating_sub(1)
        }
    }

    fn last_or_max(&self) -> i64 {
        if self.is_called {
            self.last
        } else {
            self.def.max.saturating_add(1)
        }
    }
}

/// All sequences of a database.
pub struct Sequences {
    dir: PathBuf,
    seqs: Mutex<BTreeMap<String, Arc<Mutex<SequenceState>>>>,
}

impl Sequences {
    /// Opens (creating) `<data_dir>/sequences` and loads every sequence.
    /// A pending sequence (its transaction had not committed) is dropped,
    /// or gives way to the one it replaced, unless `committed` says the
    /// transaction stamped on it committed (a crash between its commit
    /// record and the sequence's own commit): then it is committed.
    pub fn open(data_dir: &Path, committed: &dyn Fn(u64) -> bool) -> Result<Sequences> {
        let dir = data_dir.join("sequences");
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        let mut seqs = BTreeMap::new();
        let mut removed_pending = false;
        for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let path = entry.map_err(|e| io(&dir, e))?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                // a `.tmp` left by a crash between write and rename
                continue;
            }
            let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
            let mut file: SequenceFile = serde_json::from_slice(&bytes).map_err(|e| {
                SqlError::Internal(format!("sequence file {} is damaged: {e}", path.display()))
            })?;
            if file.pending && file.committing.is_some_and(committed) {
                file.pending = false;
                file.replaces = None;
                file.committing = None;
                let state = SequenceState::of_file(file);
                Self::write_file(&dir, &state)?;
                tracing::info!(sequence = %state.def.name, "committed a sequence whose transaction committed before a crash");
                seqs.insert(state.def.name.clone(), Arc::new(Mutex::new(state)));
                continue;
            }
            let file = match (file.pending, file.replaces.take()) {
                (false, _) => file,
                // its transaction never committed (a crash before COMMIT):
                // the sequence it replaced is back, or it is gone
                (true, Some(replaced)) => {
                    let state = SequenceState::of_file(*replaced);
                    Self::write_file(&dir, &state)?;
                    seqs.insert(state.def.name.clone(), Arc::new(Mutex::new(state)));
                    continue;
                }
                (true, None) => {
                    std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
                    removed_pending = true;
                    continue;
                }
            };
            let state = SequenceState::of_file(file);
            seqs.insert(state.def.name.clone(), Arc::new(Mutex::new(state)));
        }
        if removed_pending {
            sync_dir(&dir)?;
        }
        Ok(Sequences {
            dir,
            seqs: Mutex::new(seqs),
        })
    }

    pub fn exists(&self, name: &str) -> bool {
        self.seqs.lock().contains_key(name)
    }

    pub fn names(&self) -> Vec<String> {
        self.seqs.lock().keys().cloned().collect()
    }

    /// Every sequence's definition and its last value (`None` before the
    /// first `nextval`), for the catalog.
    pub fn list(&self) -> Vec<(SequenceDef, Option<i64>)> {
        let seqs: Vec<_> = self.seqs.lock().values().cloned().collect();
        seqs.iter()
            .map(|s| {
                let s = s.lock();
                (s.def.clone(), s.is_called.then_some(s.last))
            })
            .collect()
    }

    /// The definition of sequence `name`.
    pub fn def(&self, name: &str) -> Option<SequenceDef> {
        let seq = self.seqs.lock().get(name).cloned()?;
        let def = seq.lock().def.clone();
        Some(def)
    }

    /// Where sequence `name` stands: its last value (the start before the
    /// first `nextval`) and whether `nextval` has handed it out.
    pub fn position(&self, name: &str) -> Option<(i64, bool)> {
        let seq = self.seqs.lock().get(name).cloned()?;
        let s = seq.lock();
        Some((s.last, s.is_called))
    }

    /// Sequences owned by a column of `table`.
    pub fn owned_by_table(&self, table: &str) -> Vec<String> {
        self.owned_where(|o| o.table == table)
    }

    /// Sequences owned by column `column` of `table` (dropped with it).
    pub fn owned_by_column(&self, table: &str, column: &str) -> Vec<String> {
        self.owned_where(|o| o.table == table && o.column == column)
    }

    /// Sequences whose owning column `owner` accepts.
    fn owned_where(&self, owner: impl Fn(&OwnedBy) -> bool) -> Vec<String> {
        let seqs: Vec<_> = self.seqs.lock().values().cloned().collect();
        seqs.iter()
            .filter_map(|s| {
                let s = s.lock();
                s.def
                    .owned_by
                    .as_ref()
                    .filter(|o| owner(o))
                    .map(|_| s.def.name.clone())
            })
            .collect()
    }

    /// Follows a renamed table (`from_column`/`to_column` `None`) or column:
    /// sequences it owned are owned by the new name (durably).
    pub fn rename_owner(
        &self,
        from_table: &str,
        from_column: Option<&str>,
        to_table: &str,
        to_column: Option<&str>,
    ) -> Result<()> {
        let seqs: Vec<_> = self.seqs.lock().values().cloned().collect();
        for seq in seqs {
            let mut s = seq.lock();
            let Some(owner) = s.def.owned_by.as_mut() else {
                continue;
            };
            if owner.table != from_table || from_column.is_some_and(|c| c != owner.column) {
                continue;
            }
            owner.table = to_table.to_string();
            if let Some(c) = to_column {
                owner.column = c.to_string();
            }
            self.persist(&s)?;
        }
        Ok(())
    }

    /// Sets or clears the column that owns `name` (durably).
    pub fn set_owner(&self, name: &str, owner: String) -> Result<()> {
        let seq = self.get(name)?;
        let mut s = seq.lock();
        s.def.owner = Some(owner);
        self.persist(&s)
    }

    pub fn set_acl(&self, name: &str, acl: Vec<AclItem>) -> Result<()> {
        let seq = self.get(name)?;
        let mut s = seq.lock();
        s.def.acl = acl;
        self.persist(&s)
    }

    /// Gives `name` the parameters `ALTER SEQUENCE` left (durably). The
    /// file then logs the last value handed out, not a value ahead of it
    /// on the old increment: the next `nextval` logs ahead again on the
    /// new one, within the new bounds.
    pub fn set_parameters(&self, name: &str, parameters: &SequenceParameters) -> Result<()> {
        let seq = self.get(name)?;
        let mut s = seq.lock();
        parameters.apply_to(&mut s.def);
        s.logged = s.last;
        s.logged_is_called = s.is_called;
        self.persist(&s)
    }

    /// Type `type_name`'s largest value (its smallest is one less than the
    /// negative of it).
    pub fn type_max(type_name: &str) -> i64 {
        type_max(type_name)
    }

    pub fn set_owned_by(&self, name: &str, owned_by: Option<OwnedBy>) -> Result<()> {
        let seq = self.get(name)?;
        let mut s = seq.lock();
        s.def.owned_by = owned_by;
        self.persist(&s)
    }

    /// Creates a sequence; the caller checks the name against tables.
    /// `pending`: created by a transaction that has yet to commit
    /// ([`Sequences::commit_created`]); until then a restart drops it.
    pub fn create(&self, def: SequenceDef, pending: bool) -> Result<()> {
        def.validate()?;
        let mut seqs = self.seqs.lock();
        if seqs.contains_key(&def.name) {
            return Err(SqlError::DuplicateTable(def.name.clone()));
        }
        let state = SequenceState::created(def, pending, None);
        self.persist(&state)?;
        seqs.insert(state.def.name.clone(), Arc::new(Mutex::new(state)));
        Ok(())
    }

    /// Creates `def` pending, in place of the sequence of the same name
    /// that the creating block has dropped (`DROP SEQUENCE s; CREATE
    /// SEQUENCE s` in one block, as `pg_restore --clean
    /// --single-transaction` sends). One file write replaces the old
    /// file with the new one carrying the old (see
    /// [`SequenceFile::replaces`]), so a crash leaves one or the other;
    /// [`Sequences::drop_sequence`] puts the old one back. Replacing a
    /// sequence the block itself created keeps what that one replaced.
    pub fn replace(&self, def: SequenceDef) -> Result<()> {
        def.validate()?;
        let mut seqs = self.seqs.lock();
        let old = seqs
            .get(&def.name)
            .cloned()
            .ok_or_else(|| SqlError::UndefinedTable(def.name.clone()))?;
        let old = old.lock();
        let replaces = if old.pending {
            old.replaces.clone()
        } else {
            Some(Box::new(old.clone()))
        };
        let state = SequenceState::created(def, true, replaces);
        self.persist(&state)?;
        seqs.insert(state.def.name.clone(), Arc::new(Mutex::new(state)));
        Ok(())
    }

    /// Whether `name` is pending: created by a transaction that has not
    /// committed.
    pub fn is_pending(&self, name: &str) -> bool {
        self.seqs.lock().get(name).is_some_and(|s| s.lock().pending)
    }

    /// Whether `name` replaced a committed sequence that it would give
    /// way to if dropped now (see [`Sequences::replace`]).
    pub fn is_replacing(&self, name: &str) -> bool {
        self.seqs
            .lock()
            .get(name)
            .is_some_and(|s| s.lock().replaces.is_some())
    }

    /// Forgets what the sequences a transaction created replaced, once
    /// that transaction has committed.
    pub fn settle(&self, names: &[String]) {
        for name in names {
            if let Some(seq) = self.seqs.lock().get(name).cloned() {
                seq.lock().replaces = None;
            }
        }
    }

    /// Marks sequences a transaction created as committed (durably): just
    /// before that transaction commits when it writes no commit-log
    /// record, else just after, the files stamped with it first
    /// ([`Sequences::stamp_committing`]). Names no longer present (dropped
    /// again meanwhile) are skipped.
    pub fn commit_created(&self, names: &[String]) -> Result<()> {
        for name in names {
            let Some(seq) = self.seqs.lock().get(name).cloned() else {
                continue;
            };
            let mut s = seq.lock();
            if s.pending {
                s.pending = false;
                s.committing = None;
                self.persist(&s)?;
            }
        }
        Ok(())
    }

    /// Writes `txn` into the files of pending sequences `names` (durably),
    /// just before that transaction's commit record: see
    /// [`SequenceFile::committing`].
    pub fn stamp_committing(&self, names: &[String], txn: u64) -> Result<()> {
        for name in names {
            let Some(seq) = self.seqs.lock().get(name).cloned() else {
                continue;
            };
            let mut s = seq.lock();
            if s.pending {
                s.committing = Some(txn);
                self.persist(&s)?;
            }
        }
        Ok(())
    }

    /// Drops a sequence; `Ok(false)` when there is none of that name. A
    /// sequence that replaced one (see [`Sequences::replace`]) and is not
    /// settled yet gives way to the one it replaced.
    pub fn drop_sequence(&self, name: &str) -> Result<bool> {
        let mut seqs = self.seqs.lock();
        let Some(seq) = seqs.remove(name) else {
            return Ok(false);
        };
        let replaced = seq.lock().replaces.take();
        if let Some(old) = replaced {
            let state = *old;
            self.persist(&state)?;
            seqs.insert(name.to_string(), Arc::new(Mutex::new(state)));
            return Ok(true);
        }
        let path = self.path(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&path, e)),
        }
        sync_dir(&self.dir)?;
        Ok(true)
    }

    fn get(&self, name: &str) -> Result<Arc<Mutex<SequenceState>>> {
        self.seqs
            .lock()
            .get(name)
            .cloned()
            .ok_or_else(|| SqlError::UndefinedTable(name.to_string()))
    }

    /// The next value of `name` (durable before it is returned).
    pub fn nextval(&self, name: &str) -> Result<i64> {
        let seq = self.get(name)?;
        let mut s = seq.lock();
        let next = if s.is_called { s.step(s.last)? } else { s.last };
        if !s.covered(next) {
            // Log ahead: the value LOG_AHEAD-1 steps on, stopping at a bound.
            let mut logged = next;
            for _ in 1..LOG_AHEAD {
                match logged.checked_add(s.def.increment) {
                    Some(n) if n <= s.def.max && n >= s.def.min => logged = n,
                    _ => break,
                }
            }
            let file = SequenceState {
                def: s.def.clone(),
                last: logged,
                is_called: true,
                logged,
                logged_is_called: true,
                pending: s.pending,
                replaces: s.replaces.clone(),
                committing: s.committing,
            };
            self.persist(&file)?;
            s.logged = logged;
            s.logged_is_called = true;
        }
        s.last = next;
        s.is_called = true;
        Ok(next)
    }

    /// `setval(name, value, is_called)`: durable at once.
    pub fn setval(&self, name: &str, value: i64, is_called: bool) -> Result<i64> {
        let seq = self.get(name)?;
        let mut s = seq.lock();
        if value < s.def.min || value > s.def.max {
            return Err(SqlError::NumericOutOfRange(format!(
                "setval: value {value} is out of bounds for sequence \"{name}\" ({}..{})",
                s.def.min, s.def.max
            )));
        }
        let file = SequenceState {
            def: s.def.clone(),
            last: value,
            is_called,
            logged: value,
            logged_is_called: is_called,
            pending: s.pending,
            replaces: s.replaces.clone(),
            committing: s.committing,
        };
        self.persist(&file)?;
        s.last = value;
        s.is_called = is_called;
        s.logged = value;
        s.logged_is_called = is_called;
        Ok(value)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{}.json", file_stem(name)))
    }

    /// Writes `s`'s logged value (write, fsync, rename, directory fsync).
    fn persist(&self, s: &SequenceState) -> Result<()> {
        Self::write_file(&self.dir, s)
    }

    fn write_file(dir: &Path, s: &SequenceState) -> Result<()> {
        let body = serde_json::to_vec_pretty(&s.file())
            .map_err(|e| SqlError::Internal(format!("encoding a sequence: {e}")))?;
        let path = dir.join(format!("{}.json", file_stem(&s.def.name)));
        write_durably(dir, &path, &body)
    }

    /// The directory of the sequence files.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Writes `body` to `path` in `dir` durably: write, fsync, rename,
/// directory fsync.
pub(crate) fn write_durably(dir: &Path, path: &Path, body: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
        f.write_all(body).map_err(|e| io(&tmp, e))?;
        f.sync_all().map_err(|e| io(&tmp, e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))?;
    sync_dir(dir)
}

/// A file name for any sequence name: safe characters kept, others hex.
fn file_stem(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02x}"));
            }
        }
    }
    out
}

fn sync_dir(dir: &Path) -> Result<()> {
    let d = std::fs::File::open(dir).map_err(|e| io(dir, e))?;
    d.sync_all().map_err(|e| io(dir, e))
}

fn io(path: &Path, source: std::io::Error) -> SqlError {
    SqlError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The OID a sequence has in `pg_class` and `pg_sequence`: stable across
/// restarts (a hash of the name), above every table OID.
pub fn sequence_oid(name: &str) -> i64 {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    0x4000_0000 | i64::from(h & 0x0fff_ffff)
}

/// The parts of a relation name given as text (`'public."MySeq"'` is
/// `public`, `MySeq`), folded as PostgreSQL folds identifiers.
pub fn name_parts(text: &str) -> Result<Vec<String>> {
    let text = text.trim();
    let mut parts = Vec::new();
    let mut chars = text.chars().peekable();
    let mut cur = String::new();
    let mut quoted_part = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted_part = true;
                loop {
                    match chars.next() {
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            cur.push('"');
                        }
                        Some('"') => break,
                        Some(ch) => cur.push(ch),
                        None => {
                            return Err(SqlError::InvalidName(format!(
                                "invalid name syntax: {text}"
                            )))
                        }
                    }
                }
            }
            '.' => {
                parts.push(std::mem::take(&mut cur));
                quoted_part = false;
            }
            c if quoted_part => {
                return Err(SqlError::InvalidName(format!(
                    "invalid name syntax: {text} ({c})"
                )))
            }
            c => cur.extend(c.to_lowercase()),
        }
    }
    parts.push(cur);
    Ok(parts)
}

/// A sequence name as `nextval('...')` takes it: PostgreSQL parses the text
/// as a possibly qualified, possibly quoted identifier (`'MySeq'` is
/// `myseq`, `'"MySeq"'` is `MySeq`, `'public.s'` is `s`, `'app.s'` is the
/// storage name `app.s` of schema `app`'s `s`: `crate::schemas`; it
/// names nothing where `app` is no schema).
pub fn resolve_name(text: &str) -> Result<String> {
    let parts = name_parts(text)?;
    let name = match parts.as_slice() {
        [n] => n.clone(),
        [schema, n] if schema == "public" => n.clone(),
        [schema, n] if !schema.is_empty() && !n.is_empty() => {
            crate::schemas::storage_name(schema, n)
        }
        _ => {
            return Err(SqlError::InvalidName(format!(
                "invalid name syntax: {text}"
            )))
        }
    };
    if name.is_empty() {
        return Err(SqlError::InvalidName(format!(
            "invalid name syntax: {text}"
        )));
    }
    Ok(name)
}

/// The sequence a column default `nextval('name'::regclass)` draws from.
pub fn sequence_of_default(default: &str) -> Option<String> {
    use datafusion::sql::sqlparser::ast::{
        Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Value as SqlValue,
    };
    let expr = datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql(default)
    .ok()?
    .parse_expr()
    .ok()?;
    let Expr::Function(f) = expr else {
        return None;
    };
    if !f.name.to_string().eq_ignore_ascii_case("nextval") {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let mut arg = match list.args.first()? {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => e,
        _ => return None,
    };
    while let Expr::Cast { expr, .. } = arg {
        arg = expr;
    }
    match arg {
        Expr::Value(v) => match &v.value {
            SqlValue::SingleQuotedString(name) => resolve_name(name).ok(),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn values_never_repeat_across_reopen() {
        let d = dir();
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        s.create(SequenceDef::with_defaults("s", "bigint", 1), false)
            .unwrap();
        assert_eq!(s.nextval("s").unwrap(), 1);
        assert_eq!(s.nextval("s").unwrap(), 2);
        drop(s);
        // a crash: the in-memory position is lost, the logged one is not
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        let v = s.nextval("s").unwrap();
        assert!(v > 2, "{v}");
        assert_eq!(v, LOG_AHEAD + 1);
    }

    #[test]
    fn bounds_cycle_and_setval() {
        let d = dir();
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        let mut def = SequenceDef::with_defaults("c", "integer", 2);
        def.max = 5;
        s.create(def.clone(), false).unwrap();
        assert_eq!(s.nextval("c").unwrap(), 1);
        assert_eq!(s.nextval("c").unwrap(), 3);
        assert_eq!(s.nextval("c").unwrap(), 5);
        let e = s.nextval("c").unwrap_err();
        assert_eq!(e.sqlstate(), "2200H");
        def.name = "cy".into();
        def.cycle = true;
        s.create(def, false).unwrap();
        for want in [1, 3, 5, 1, 3] {
            assert_eq!(s.nextval("cy").unwrap(), want);
        }
        s.setval("c", 2, false).unwrap();
        assert_eq!(s.nextval("c").unwrap(), 2);
        assert_eq!(s.setval("c", 9, true).unwrap_err().sqlstate(), "22003");
        s.setval("c", 1, true).unwrap();
        drop(s);
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        assert_eq!(s.nextval("c").unwrap(), 3);
    }

    #[test]
    fn descending_and_drop() {
        let d = dir();
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        s.create(SequenceDef::with_defaults("down", "smallint", -1), false)
            .unwrap();
        assert_eq!(s.nextval("down").unwrap(), -1);
        assert_eq!(s.nextval("down").unwrap(), -2);
        assert!(s.drop_sequence("down").unwrap());
        assert!(!s.drop_sequence("down").unwrap());
        assert_eq!(s.nextval("down").unwrap_err().sqlstate(), "42P01");
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        assert!(!s.exists("down"));
    }

    #[test]
    fn pending_sequences_vanish_at_restart_unless_committed() {
        let d = dir();
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        for name in ["kept", "lost"] {
            s.create(SequenceDef::with_defaults(name, "bigint", 1), true)
                .unwrap();
            // values drawn before the commit are logged with the flag
            assert_eq!(s.nextval(name).unwrap(), 1);
        }
        s.commit_created(&["kept".to_string(), "never-created".to_string()])
            .unwrap();
        drop(s);
        // a crash before "lost"'s transaction committed
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        assert!(s.exists("kept"));
        assert!(!s.exists("lost"));
        assert_eq!(s.nextval("kept").unwrap(), LOG_AHEAD + 1);
        // the pending file is gone, not merely skipped
        drop(s);
        let files = std::fs::read_dir(d.path().join("sequences"))
            .unwrap()
            .count();
        assert_eq!(files, 1);
    }

    #[test]
    fn a_stamped_sequence_follows_its_transactions_commit_record() {
        let d = dir();
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        // "old" is replaced by a block, "fresh" created by another; both
        // stamped, then a crash before either is marked committed
        s.create(SequenceDef::with_defaults("old", "bigint", 1), false)
            .unwrap();
        let mut replacement = SequenceDef::with_defaults("old", "bigint", 1);
        replacement.start = 500;
        s.replace(replacement).unwrap();
        s.stamp_committing(&["old".to_string()], 7).unwrap();
        s.create(SequenceDef::with_defaults("fresh", "bigint", 1), true)
            .unwrap();
        s.stamp_committing(&["fresh".to_string()], 8).unwrap();
        drop(s);
        // transaction 7's record made it, 8's did not
        let s = Sequences::open(d.path(), &|t| t == 7).unwrap();
        assert_eq!(s.def("old").unwrap().start, 500);
        assert!(!s.is_pending("old"));
        assert!(!s.exists("fresh"));
        drop(s);
        // settled for good: a later start-up asks nothing
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        assert_eq!(s.def("old").unwrap().start, 500);
        // a stamp on a file whose record is not found changes nothing of
        // the old rule: the replaced one comes back
        let mut again = SequenceDef::with_defaults("old", "bigint", 1);
        again.start = 900;
        s.replace(again).unwrap();
        s.stamp_committing(&["old".to_string()], 9).unwrap();
        drop(s);
        let s = Sequences::open(d.path(), &|t| t == 7).unwrap();
        assert_eq!(s.def("old").unwrap().start, 500);
    }

    #[test]
    fn a_replaced_sequence_comes_back_unless_its_replacement_commits() {
        let d = dir();
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        let name = "r".to_string();
        s.create(SequenceDef::with_defaults(&name, "bigint", 1), false)
            .unwrap();
        assert_eq!(s.nextval(&name).unwrap(), 1);
        let mut new = SequenceDef::with_defaults(&name, "bigint", 1);
        new.start = 500;
        s.replace(new.clone()).unwrap();
        assert_eq!(s.nextval(&name).unwrap(), 500);
        assert!(s.is_replacing(&name));
        // rolled back: the old one where it stood, not where it logged to
        assert!(s.drop_sequence(&name).unwrap());
        assert_eq!(s.nextval(&name).unwrap(), 2);
        // a crash before the replacing block commits: the old one is back
        s.replace(new.clone()).unwrap();
        drop(s);
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        assert_eq!(s.def(&name).unwrap().start, 1);
        assert!(
            s.nextval(&name).unwrap() > 2,
            "a restart skips, never repeats"
        );
        // committed: the new one stays, and dropping it drops it
        s.replace(new).unwrap();
        s.commit_created(std::slice::from_ref(&name)).unwrap();
        s.settle(std::slice::from_ref(&name));
        assert!(!s.is_replacing(&name));
        drop(s);
        let s = Sequences::open(d.path(), &|_| false).unwrap();
        assert_eq!(s.def(&name).unwrap().start, 500);
        assert!(s.drop_sequence(&name).unwrap());
        assert!(!s.exists(&name));
    }

    #[test]
    fn invalid_definitions_are_refused() {
        let mut def = SequenceDef::with_defaults("x", "smallint", 1);
        def.max = 40000;
        assert_eq!(def.validate().unwrap_err().sqlstate(), "22023");
        let def = SequenceDef::with_defaults("x", "bigint", 0);
        assert_eq!(def.validate().unwrap_err().sqlstate(), "22023");
    }

    #[test]
    fn names_resolve_as_postgres_parses_them() {
        assert_eq!(resolve_name("MySeq").unwrap(), "myseq");
        assert_eq!(resolve_name("\"MySeq\"").unwrap(), "MySeq");
        assert_eq!(resolve_name("public.t_id_seq").unwrap(), "t_id_seq");
        assert!(resolve_name("a.b.c").is_err());
        assert!(resolve_name("\"open").is_err());
        assert_eq!(file_stem("a/b"), "a%2fb");
        assert_eq!(
            sequence_of_default("nextval('t_id_seq'::regclass)").as_deref(),
            Some("t_id_seq")
        );
        assert_eq!(
            sequence_of_default("nextval('\"T_seq\"'::regclass)").as_deref(),
            Some("T_seq")
        );
        assert_eq!(sequence_of_default("42"), None);
    }
}
