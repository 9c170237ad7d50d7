//! A session's transaction: its snapshots, its private writes, its row
//! locks and savepoints. `docs/design/transactions.md` has the whole design.
//!
//! Invariants a reader needs before touching this file:
//! * **Private until COMMIT.** Writes go into [`Transaction`]'s write set,
//!   never to storage, until [`Transaction::commit`] hands all of them to
//!   [`Engine::commit`] at once (one WAL record on one shard, two-phase
//!   commit over several). Dropping a transaction (ROLLBACK, an aborting
//!   error, a closed connection) discards them and releases its locks.
//! * **Own writes are seen.** Every snapshot the transaction reads through
//!   is overlaid with its write set ([`eddy_storage::Overlay`]).
//! * **Locks before decisions.** A row is locked (exclusive, in the
//!   transaction's name) before the transaction decides what to write to
//!   it; after the lock is held, a row whose latest committed write is
//!   newer than the snapshot the decision was made on is re-decided on its
//!   newest version (READ COMMITTED, PostgreSQL's EvalPlanQual) or fails
//!   with 40001 (REPEATABLE READ).
//! * **Snapshots.** READ COMMITTED takes one consistent snapshot of the
//!   statement's tables per statement; REPEATABLE READ pins a snapshot of
//!   every table at its first statement and reads only that.
//! * **Catalog changes are the transaction's.** DDL goes through
//!   [`Transaction::ddl`] (`eddy_storage::ddl`): undone by ROLLBACK (to a
//!   savepoint: the changes after it), by dropping the transaction and by
//!   recovery, committed with the writes through one commit-log record.
//!   The changed table is locked exclusively ([`Transaction::lock_table_for_ddl`])
//!   until the end.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use eddy_common::{IndexDef, Lsn, Row, TableDef, TableId, TxnId};
use eddy_storage::{
    Ddl, Engine, Key, LockMode, LockWait, OnConflict, Overlay, StorageError, Table, TableSnapshot,
    WriteOp, TABLE_LOCK_KEY,
};

use eddy_storage::views::ViewChange;

use crate::deferred_fk::DeferredChecks;
use crate::error::{Result, SqlError};

/// Isolation levels Eddy honours. SERIALIZABLE is refused, never weakened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    ReadCommitted,
    RepeatableRead,
}

impl Isolation {
    pub fn parse(text: &str) -> Result<Isolation> {
        match text.trim().to_ascii_lowercase().as_str() {
            "read committed" | "read uncommitted" => Ok(Isolation::ReadCommitted),
            "repeatable read" => Ok(Isolation::RepeatableRead),
            "serializable" => Err(Isolation::serializable_refused()),
            other => Err(SqlError::InvalidParameter(format!(
                "invalid value for parameter \"transaction_isolation\": \"{other}\""
            ))),
        }
    }

    /// SERIALIZABLE is refused, never run as something weaker.
    pub fn serializable_refused() -> SqlError {
        SqlError::FeatureNotSupported(
            "SERIALIZABLE isolation is not supported; use REPEATABLE READ (snapshot isolation) or READ COMMITTED".into(),
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read committed",
            Isolation::RepeatableRead => "repeatable read",
        }
    }
}

/// First byte of the keys this transaction invents for rows it inserts
/// into tables without a primary key (storage keys start with 0x00-0x02).
const OWN_ROW_KEY: u8 = 0xFF;

/// Rows written per transaction before it is refused (it is held in memory).
pub const MAX_TXN_ROWS: usize = 4 << 20;

/// One table's part of a write set.
#[derive(Clone)]
pub struct TableWrites {
    pub table: Arc<Table>,
    /// Key -> new row, or `None` for deleted.
    pub rows: BTreeMap<Vec<u8>, Option<Row>>,
    /// TRUNCATE ran in this transaction (applied first at commit).
    pub truncated: bool,
    /// Per UNIQUE index and index key, the keys of `rows` holding it.
    unique: HashMap<(String, Vec<u8>), BTreeSet<Vec<u8>>>,
}

/// A transaction in progress.
pub struct Transaction {
    engine: Arc<Engine>,
    pub id: TxnId,
    pub isolation: Isolation,
    pub read_only: bool,
    /// Opened by BEGIN (false: the implicit transaction of one statement).
    pub explicit: bool,
    /// An error happened inside the block: only ROLLBACK may follow.
    pub aborted: bool,
    writes: BTreeMap<TableId, TableWrites>,
    savepoints: Vec<Savepoint>,
    /// REPEATABLE READ: the snapshots taken at the first statement.
    pinned: Option<HashMap<TableId, Arc<TableSnapshot>>>,
    /// Tables DROP TABLE named in this block: dropped when it commits,
    /// kept if it rolls back; the session treats them as gone meanwhile.
    pub dropped_tables: Vec<String>,
    /// Sequences created in this transaction (CREATE SEQUENCE, SERIAL and
    /// identity columns). Their files are marked pending until the commit,
    /// so a crash before it drops them at start-up; a rollback drops them.
    pub created_sequences: Vec<String>,
    /// Sequences DROP SEQUENCE named in this block: dropped when it commits,
    /// kept if it rolls back; this session treats them as gone meanwhile.
    pub dropped_sequences: Vec<String>,
    /// Sequence owners to rename when this transaction commits (a table
    /// or column that owns sequences was renamed): sequences live outside
    /// the catalog's transactions, so they follow only a committed rename.
    pub sequence_owner_renames: Vec<OwnerRename>,
    /// `ALTER SEQUENCE s OWNED BY ...` of this transaction, in order:
    /// applied when it commits, as the renames are.
    pub sequence_owned_by: Vec<(String, crate::sequences::SequenceChange)>,
    /// Views created, replaced or dropped in this transaction, in order:
    /// its own until it commits (`eddy_storage::views`).
    pub view_changes: Vec<ViewChange>,
    /// Schemas created, changed or dropped in this transaction, in order:
    /// its own until it commits (`eddy_storage::schemas`).
    pub schema_changes: Vec<eddy_storage::schemas::SchemaChange>,
    /// Constraint modes and the foreign-key checks deferred to commit.
    pub deferred: DeferredChecks,
    next_own_key: u64,
    /// Whether this transaction ever asked for a row lock (most read-only
    /// statements never do, and then skip the lock table at the end).
    locked: std::sync::atomic::AtomicBool,
    /// Whether this transaction changed the catalog (its changes are
    /// undone unless it commits).
    ddl: bool,
    /// `lock_timeout` (None: wait until the holder ends).
    pub lock_timeout: Option<Duration>,
    /// When the transaction began (BEGIN, or the statement of an implicit
    /// one), in microseconds since the Unix epoch: what `now()`,
    /// `CURRENT_TIMESTAMP` and `transaction_timestamp()` give inside it,
    /// as in PostgreSQL.
    pub started_at_micros: i64,
}

/// A renamed owner of sequences: (table, column) before and after; a
/// `None` column stands for every column (a renamed table).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OwnerRename {
    pub from_table: String,
    pub from_column: Option<String>,
    pub to_table: String,
    pub to_column: Option<String>,
}

/// What ROLLBACK TO SAVEPOINT restores.
struct Savepoint {
    name: String,
    writes: BTreeMap<TableId, TableWrites>,
    dropped: Vec<String>,
    created_sequences: Vec<String>,
    dropped_sequences: Vec<String>,
    /// The transaction's catalog changes so far (`Engine::ddl_mark`).
    ddl_mark: usize,
    owner_renames: usize,
    owned_by: usize,
    view_changes: usize,
    schema_changes: usize,
    deferred: DeferredChecks,
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if self.ddl {
            // undone before the table locks go: nobody sees the changes
            if let Err(e) = self.engine.rollback_ddl(self.id, 0) {
                tracing::error!(txn = self.id.0, error = %e, "could not undo the catalog changes of a rolled-back transaction; recovery will");
            }
        }
        if self.locked.load(std::sync::atomic::Ordering::Relaxed) {
            self.engine.locks().release_all(self.id);
        }
    }
}

impl Transaction {
    pub fn new(
        engine: Arc<Engine>,
        isolation: Isolation,
        read_only: bool,
        explicit: bool,
    ) -> Transaction {
        let id = engine.begin_txn();
        Transaction {
            engine,
            id,
            isolation,
            read_only,
            explicit,
            aborted: false,
            writes: BTreeMap::new(),
            savepoints: Vec::new(),
            pinned: None,
            dropped_tables: Vec::new(),
            created_sequences: Vec::new(),
            dropped_sequences: Vec::new(),
            sequence_owner_renames: Vec::new(),
            sequence_owned_by: Vec::new(),
            view_changes: Vec::new(),
            schema_changes: Vec::new(),
            deferred: DeferredChecks::default(),
            next_own_key: 0,
            locked: std::sync::atomic::AtomicBool::new(false),
            ddl: false,
            lock_timeout: None,
            started_at_micros: crate::fastpath::statement_time(),
        }
    }

    pub fn has_writes(&self) -> bool {
        !self.writes.is_empty()
    }

    /// Whether a statement has already run (the isolation level is fixed).
    pub fn started(&self) -> bool {
        self.pinned.is_some() || !self.writes.is_empty()
    }

    /// Snapshots of `tables` for one statement, overlaid with this
    /// transaction's writes.
    pub fn snapshots(&mut self, tables: &[Arc<Table>]) -> HashMap<TableId, Arc<TableSnapshot>> {
        let base: HashMap<TableId, Arc<TableSnapshot>> = match self.isolation {
            Isolation::ReadCommitted => tables
                .iter()
                .zip(self.engine.snapshot_tables(tables))
                .map(|(t, s)| (t.def().id, Arc::new(s)))
                .collect(),
            Isolation::RepeatableRead => tables
                .iter()
                .map(|t| (t.def().id, self.pinned_snapshot(t)))
                .collect(),
        };
        base.into_iter()
            .map(|(id, snap)| match self.writes.get(&id) {
                Some(w) => (id, Arc::new(snap.with_overlay(Arc::new(overlay_of(w))))),
                None => (id, snap),
            })
            .collect()
    }

    /// The latest committed state of `table` (whatever the isolation
    /// level), overlaid with this transaction's writes: what a foreign
    /// key check must see (`docs/design/foreign_keys.md`).
    pub fn latest_snapshot(&self, table: &Arc<Table>) -> TableSnapshot {
        let base = table.snapshot();
        match self.writes.get(&table.def().id) {
            Some(w) => base.with_overlay(Arc::new(overlay_of(w))),
            None => base,
        }
    }

    /// The cut this transaction reads at, to export
    /// (`crate::exported_snapshots`): REPEATABLE READ's pinned one
    /// (pinned now if no statement has run yet), or under READ COMMITTED
    /// every table as it is now.
    pub fn export_cut(&mut self) -> crate::exported_snapshots::Cut {
        match self.isolation {
            Isolation::RepeatableRead => {
                if let Some(first) = self.engine.tables().first() {
                    self.pinned_snapshot(first);
                }
                self.pinned.clone().unwrap_or_default()
            }
            Isolation::ReadCommitted => {
                let all = self.engine.tables();
                let snaps = self.engine.snapshot_tables(&all);
                all.iter()
                    .zip(snaps)
                    .map(|(t, s)| (t.def().id, Arc::new(s)))
                    .collect()
            }
        }
    }

    /// Reads at an exported cut from now on (`SET TRANSACTION SNAPSHOT`);
    /// the caller checked that this is a REPEATABLE READ transaction that
    /// has not run a query.
    pub fn import_cut(&mut self, cut: crate::exported_snapshots::Cut) {
        self.pinned = Some(cut);
    }

    /// REPEATABLE READ's snapshot of `table`, pinning every table's at the
    /// first statement.
    fn pinned_snapshot(&mut self, table: &Arc<Table>) -> Arc<TableSnapshot> {
        if self.pinned.is_none() {
            let all = self.engine.tables();
            let snaps = self.engine.snapshot_tables(&all);
            self.pinned = Some(
                all.iter()
                    .zip(snaps)
                    .map(|(t, s)| (t.def().id, Arc::new(s)))
                    .collect(),
            );
        }
        let pinned = self.pinned.get_or_insert_with(HashMap::new);
        // A table created after the snapshot: read it as it is now.
        Arc::clone(
            pinned
                .entry(table.def().id)
                .or_insert_with(|| Arc::new(table.snapshot())),
        )
    }

    /// The cut (one read LSN per shard) the current statement reads
    /// `table` at: REPEATABLE READ's pinned snapshot, or (READ COMMITTED)
    /// one taken now.
    pub fn statement_lsns(&mut self, table: &Arc<Table>) -> Vec<Lsn> {
        match self.isolation {
            Isolation::ReadCommitted => table.visible_lsns(),
            Isolation::RepeatableRead => self.pinned_snapshot(table).lsns(),
        }
    }

    /// The row under `key` as this transaction sees it at the cut `lsns`:
    /// its own write if it made one, else the committed version at the
    /// cut. `None` when that version cannot be read by key (the caller
    /// scans instead).
    pub fn point_read(
        &self,
        table: &Table,
        key: &Key,
        lsns: &[Lsn],
    ) -> Result<Option<Option<Row>>> {
        if let Some(own) = self.own_row(table, key.as_bytes()) {
            return Ok(Some(own));
        }
        if self.truncated(table) {
            return Ok(Some(None));
        }
        Ok(table.get_at(key, lsns)?)
    }

    /// Locks one row of `table` in `mode`; `Ok(false)` when `wait` is
    /// SKIP LOCKED and another transaction holds it.
    pub fn lock_row(
        &self,
        table: &Table,
        key: &[u8],
        mode: LockMode,
        wait: LockWait,
    ) -> Result<bool> {
        if key.first() == Some(&OWN_ROW_KEY) {
            return Ok(true);
        }
        self.locked
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(self
            .engine
            .locks()
            .lock(self.id, table.def().id, key, mode, wait, &table.def().name)?)
    }

    /// Catalog changes in this transaction's name (see the module doc).
    /// A table it creates is locked by it from the start.
    pub fn ddl(&mut self) -> Ddl<'_> {
        self.ddl = true;
        self.locked
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.engine.ddl(Some(self.id))
    }

    /// Whether this transaction has changed the catalog.
    pub fn has_ddl(&self) -> bool {
        self.ddl
    }

    /// Locks `table` exclusively for a change of its definition: waits
    /// for every other transaction that uses it (at most `lock_timeout`),
    /// and keeps others out until this one ends.
    pub fn lock_table_for_ddl(&self, table: &Table) -> Result<()> {
        self.lock_row(
            table,
            TABLE_LOCK_KEY,
            LockMode::Exclusive,
            LockWait::Block(self.lock_timeout),
        )?;
        Ok(())
    }

    /// Takes `table`'s shared table lock (waits while another transaction
    /// changes its definition); kept until this transaction ends.
    pub fn lock_table_shared(&self, table: &Table) -> Result<()> {
        self.lock_row(
            table,
            TABLE_LOCK_KEY,
            LockMode::Shared,
            LockWait::Block(self.lock_timeout),
        )?;
        Ok(())
    }

    /// Takes schema `id`'s lock in `mode` (shared while this transaction
    /// creates a relation in the schema, exclusive while it drops or
    /// changes the schema); kept until this transaction ends.
    pub fn lock_schema(&self, id: eddy_common::TableId, name: &str, mode: LockMode) -> Result<()> {
        self.locked
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.engine.locks().lock(
            self.id,
            id,
            TABLE_LOCK_KEY,
            mode,
            LockWait::Block(self.lock_timeout),
            name,
        )?;
        Ok(())
    }

    /// `table` got a new definition in this transaction (a column added,
    /// renamed, ...): its writes so far are carried to the new handle, and
    /// rows written before a column was added read NULL in it.
    pub fn table_altered(&mut self, table: &Arc<Table>) {
        let width = table.def().columns.len();
        let fix = |w: &mut TableWrites| {
            w.table = Arc::clone(table);
            for row in w.rows.values_mut().flatten() {
                if row.len() < width {
                    row.resize(width, eddy_common::Value::Null);
                }
            }
        };
        // savepoints keep the rows as they were: rolling back to one also
        // undoes the change
        if let Some(w) = self.writes.get_mut(&table.def().id) {
            fix(w);
        }
    }

    /// Forgets this transaction's writes to `table` (a rewrite copied them
    /// into the table that replaces it; the old one is dropped at commit).
    /// Savepoints keep theirs: rolling back to one also undoes the rewrite.
    pub fn forget_writes(&mut self, table: TableId) {
        self.writes.remove(&table);
    }

    /// Whether this transaction has written to `table` (rows that no
    /// count of the table's stored rows includes yet).
    pub fn has_writes_to(&self, table: TableId) -> bool {
        self.writes.contains_key(&table)
    }

    /// Whether this transaction truncated any table.
    pub fn truncated_any(&self) -> bool {
        self.writes.values().any(|w| w.truncated)
    }

    /// Whether REPEATABLE READ has pinned its snapshot (its first
    /// statement ran).
    pub fn snapshot_pinned(&self) -> bool {
        self.pinned.is_some()
    }

    /// Locks rows of `table` (skipping rows this transaction invented).
    pub fn lock_rows<'a>(
        &self,
        table: &Table,
        keys: impl IntoIterator<Item = &'a [u8]>,
        mode: LockMode,
    ) -> Result<()> {
        let wait = LockWait::Block(self.lock_timeout);
        for k in keys {
            if k.first() == Some(&OWN_ROW_KEY) {
                continue;
            }
            self.locked
                .store(true, std::sync::atomic::Ordering::Relaxed);
            self.engine
                .locks()
                .lock(self.id, table.def().id, k, mode, wait, &table.def().name)?;
        }
        Ok(())
    }

    /// The keys among `keys` whose latest committed write is newer than
    /// `snap` (rows this transaction wrote itself are not counted: it holds
    /// their locks since it wrote them).
    pub fn changed_since<'a>(
        &self,
        table: &Table,
        snap: &TableSnapshot,
        keys: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<bool> {
        self.changed_after(table, &snap.lsns(), keys)
    }

    /// [`Transaction::changed_since`] for a cut given by its LSNs.
    pub fn changed_after<'a>(
        &self,
        table: &Table,
        lsns: &[Lsn],
        keys: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<bool> {
        let own = self.writes.get(&table.def().id);
        for k in keys {
            if k.first() == Some(&OWN_ROW_KEY) || own.is_some_and(|w| w.rows.contains_key(k)) {
                continue;
            }
            let key = Key(k.to_vec());
            let at = lsns
                .get(table.shard_of_key(&key)?)
                .copied()
                .unwrap_or(Lsn::ZERO);
            if table.last_write(&key)? > at {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// What this transaction wrote under `key`: `Some(None)` deleted,
    /// `Some(Some(row))` written, `None` untouched.
    pub fn own_row(&self, table: &Table, key: &[u8]) -> Option<Option<Row>> {
        self.writes.get(&table.def().id)?.rows.get(key).cloned()
    }

    /// Whether this transaction truncated `table`.
    pub fn truncated(&self, table: &Table) -> bool {
        self.writes
            .get(&table.def().id)
            .is_some_and(|w| w.truncated)
    }

    fn table_writes(&mut self, table: &Arc<Table>) -> Result<&mut TableWrites> {
        let total: usize = self.writes.values().map(|w| w.rows.len()).sum();
        if total >= MAX_TXN_ROWS {
            return Err(SqlError::FeatureNotSupported(format!(
                "a transaction may write at most {MAX_TXN_ROWS} rows; load larger data with COPY outside a transaction block"
            )));
        }
        Ok(self
            .writes
            .entry(table.def().id)
            .or_insert_with(|| TableWrites {
                table: Arc::clone(table),
                rows: BTreeMap::new(),
                truncated: false,
                unique: HashMap::new(),
            }))
    }

    /// Records a new version (`Some`) or a delete (`None`) of `key`.
    ///
    /// A new version is checked against the table's UNIQUE indexes first
    /// (row by row, as PostgreSQL checks): against the transaction's own
    /// rows and the latest committed ones it has not overwritten. Another
    /// transaction's uncommitted row is found at COMMIT, under storage's
    /// commit lock.
    pub fn put(&mut self, table: &Arc<Table>, key: Vec<u8>, row: Option<Row>) -> Result<()> {
        let def = Arc::clone(table.def());
        let unique = def.indexes.iter().any(|i| i.unique);
        if let (true, Some(r)) = (unique, &row) {
            self.lock_unique_values(table, &def, r)?;
        }
        let w = self.table_writes(table)?;
        if unique {
            check_unique(w, &def, &key, row.as_ref())?;
        }
        if row.is_none() && key.first() == Some(&OWN_ROW_KEY) {
            // a row this transaction inserted and now deletes: it never existed
            w.rows.remove(&key);
        } else {
            w.rows.insert(key, row);
        }
        Ok(())
    }

    /// Locks the values `row` gives the table's UNIQUE indexes, until the
    /// transaction ends: a second transaction that writes the same value
    /// (an INSERT, an UPDATE, ON CONFLICT looking for its arbiter's row)
    /// waits for this one and then sees its outcome, as in PostgreSQL,
    /// instead of both passing the check and one failing at COMMIT.
    fn lock_unique_values(&self, table: &Table, def: &TableDef, row: &Row) -> Result<()> {
        for ix in def.indexes.iter().filter(|i| i.unique) {
            if eddy_storage::index::has_null(&ix.columns, row) {
                continue;
            }
            if let Some(k) = eddy_storage::index::index_key(&ix.columns, row) {
                self.lock_unique_value(table, &ix.name, &k)?;
            }
        }
        Ok(())
    }

    /// Locks `index_key` of the UNIQUE index `index` until the transaction
    /// ends (see [`Transaction::lock_unique_values`]).
    pub fn lock_unique_value(&self, table: &Table, index: &str, index_key: &[u8]) -> Result<()> {
        let lock_key = unique_value_lock_key(index, index_key);
        self.lock_rows(table, [lock_key.as_slice()], LockMode::Exclusive)
    }

    /// The rows this transaction has written to `table`, as they stand
    /// (rows it deleted left out).
    pub fn own_rows(&self, table: &Table) -> Vec<Row> {
        self.writes
            .get(&table.def().id)
            .map(|w| w.rows.values().flatten().cloned().collect())
            .unwrap_or_default()
    }

    /// Records a row inserted into a table without a primary key; returns
    /// the key it is written under.
    pub fn append(&mut self, table: &Arc<Table>, row: Row) -> Result<Vec<u8>> {
        let mut key = vec![OWN_ROW_KEY];
        key.extend_from_slice(&self.next_own_key.to_be_bytes());
        self.next_own_key += 1;
        self.put(table, key.clone(), Some(row))?;
        Ok(key)
    }

    /// The key of the row that holds `index_key` in the UNIQUE index
    /// `index`, as this transaction would write next: its own rows first,
    /// then the latest committed rows it has not overwritten or deleted.
    /// Not locked: the caller locks the row and checks it again.
    pub fn unique_owner(
        &self,
        table: &Table,
        index: &str,
        index_key: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let own = self.writes.get(&table.def().id);
        if let Some(w) = own {
            let held = w.unique.get(&(index.to_string(), index_key.to_vec()));
            if let Some(k) = held.and_then(|s| s.iter().next()) {
                return Ok(Some(k.clone()));
            }
            if w.truncated {
                return Ok(None);
            }
        }
        Ok(table
            .index_owners(index, index_key)?
            .into_iter()
            .find(|k| !own.is_some_and(|w| w.rows.contains_key(k))))
    }

    /// TRUNCATE inside the transaction: the table reads as empty from now
    /// on, and is emptied at commit before the rows written after it.
    pub fn truncate(&mut self, table: &Arc<Table>) -> Result<()> {
        let w = self.table_writes(table)?;
        w.rows.clear();
        w.unique.clear();
        w.truncated = true;
        Ok(())
    }

    pub fn savepoint(&mut self, name: &str) {
        self.savepoints.push(Savepoint {
            name: name.to_string(),
            writes: self.writes.clone(),
            dropped: self.dropped_tables.clone(),
            created_sequences: self.created_sequences.clone(),
            dropped_sequences: self.dropped_sequences.clone(),
            ddl_mark: if self.ddl {
                self.engine.ddl_mark(self.id)
            } else {
                0
            },
            owner_renames: self.sequence_owner_renames.len(),
            owned_by: self.sequence_owned_by.len(),
            view_changes: self.view_changes.len(),
            schema_changes: self.schema_changes.len(),
            deferred: self.deferred.clone(),
        });
    }

    /// ROLLBACK TO SAVEPOINT: writes and catalog changes after it are
    /// discarded (the savepoint stays); the locks stay held, as in
    /// PostgreSQL. The sequences created after the savepoint are returned
    /// for the caller to drop.
    pub fn rollback_to(&mut self, name: &str) -> Result<Vec<String>> {
        let pos = self.find_savepoint(name)?;
        self.savepoints.truncate(pos + 1);
        let Some(Savepoint {
            writes,
            dropped: dropped_before,
            created_sequences,
            dropped_sequences,
            ddl_mark,
            owner_renames,
            owned_by,
            view_changes,
            schema_changes,
            deferred,
            ..
        }) = self.savepoints.get(pos)
        else {
            return Err(SqlError::NoSuchSavepoint(name.to_string()));
        };
        self.sequence_owner_renames.truncate(*owner_renames);
        self.sequence_owned_by.truncate(*owned_by);
        self.view_changes.truncate(*view_changes);
        self.schema_changes.truncate(*schema_changes);
        self.deferred = deferred.clone();
        if self.ddl {
            self.engine.rollback_ddl(self.id, *ddl_mark)?;
        }
        self.writes = writes.clone();
        self.dropped_tables = dropped_before.clone();
        let undone: Vec<String> = self
            .created_sequences
            .iter()
            .filter(|s| !created_sequences.contains(s))
            .cloned()
            .collect();
        self.created_sequences = created_sequences.clone();
        self.dropped_sequences = dropped_sequences.clone();
        self.aborted = false;
        Ok(undone)
    }

    /// Whether any savepoint is open.
    pub fn has_savepoints(&self) -> bool {
        !self.savepoints.is_empty()
    }

    /// RELEASE SAVEPOINT: forgets it and every later one.
    pub fn release(&mut self, name: &str) -> Result<()> {
        let pos = self.find_savepoint(name)?;
        self.savepoints.truncate(pos);
        Ok(())
    }

    fn find_savepoint(&self, name: &str) -> Result<usize> {
        self.savepoints
            .iter()
            .rposition(|s| s.name == name)
            .ok_or_else(|| SqlError::NoSuchSavepoint(name.to_string()))
    }

    /// Makes every write durable and visible at once, then releases the
    /// locks (by dropping `self`).
    /// Whether [`Transaction::commit`] goes through the commit log: the
    /// transaction changed the catalog (tables, views, schemas), so its
    /// commit record decides, at a start-up after a crash too
    /// (`Engine::committed_before_open`).
    pub fn commits_through_the_log(&self) -> bool {
        self.ddl
            || !self.dropped_tables.is_empty()
            || !self.view_changes.is_empty()
            || !self.schema_changes.is_empty()
    }

    pub fn commit(mut self) -> Result<()> {
        let mut batch: Vec<(Arc<Table>, Vec<WriteOp>)> = Vec::new();
        for w in self.writes.values() {
            if self.dropped_tables.contains(&w.table.def().name) {
                continue; // dropped with the table
            }
            let mut table = Arc::clone(&w.table);
            if w.truncated {
                self.engine.truncate_table(&table.def().name)?;
                table = self
                    .engine
                    .table(&table.def().name)
                    .ok_or_else(|| SqlError::UndefinedTable(table.def().name.clone()))?;
            }
            let no_pk = !table.def().has_primary_key();
            let mut ops = Vec::with_capacity(w.rows.len());
            for (key, row) in &w.rows {
                let own = key.first() == Some(&OWN_ROW_KEY);
                if no_pk && !own && !w.truncated {
                    // a stored row without a key of its own: replace = delete + insert
                    ops.push(WriteOp::Delete {
                        key: Key(key.clone()),
                    });
                }
                match row {
                    Some(r) => ops.push(WriteOp::Insert {
                        row: r.clone(),
                        on_conflict: OnConflict::Replace,
                    }),
                    None if !no_pk && !w.truncated => ops.push(WriteOp::Delete {
                        key: Key(key.clone()),
                    }),
                    None => {}
                }
            }
            batch.push((table, ops));
        }
        // Tables DROP TABLE named go with this commit: recorded under its
        // id just before the commit point (`Ddl::drop_at_commit`).
        let dropped: Vec<Arc<Table>> = self
            .dropped_tables
            .iter()
            .filter_map(|n| self.engine.table(n))
            .collect();
        if !dropped.is_empty() {
            self.ddl().drop_at_commit(&dropped)?;
        }
        // and the view changes, checked against others' (42P07, 40001)
        if !self.view_changes.is_empty() {
            let changes = std::mem::take(&mut self.view_changes);
            self.ddl().views_at_commit(&changes)?;
        }
        if !self.schema_changes.is_empty() {
            let changes = std::mem::take(&mut self.schema_changes);
            self.ddl().schemas_at_commit(&changes)?;
        }
        if self.ddl {
            // commit_txn settles the catalog changes whatever happens
            self.ddl = false;
            self.engine.commit_txn(self.id, batch)?;
        } else if !batch.is_empty() {
            self.engine.commit(batch)?;
        }
        Ok(())
    }
}

/// The first byte of a UNIQUE value's lock key: no row key starts with it
/// (memcomparable keys start with a NULL/value/rowid tag, own rows with
/// [`OWN_ROW_KEY`], the table lock is `TABLE_LOCK_KEY`).
const UNIQUE_VALUE_LOCK: u8 = 0xFD;

/// The lock key of `index_key` in the UNIQUE index `index`.
fn unique_value_lock_key(index: &str, index_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + index.len() + index_key.len());
    k.push(UNIQUE_VALUE_LOCK);
    k.extend_from_slice(index.as_bytes());
    k.push(0);
    k.extend_from_slice(index_key);
    k
}

/// The UNIQUE check of [`Transaction::put`]; records `key`'s new index
/// keys in `w.unique` when it passes.
fn check_unique(w: &mut TableWrites, def: &TableDef, key: &[u8], row: Option<&Row>) -> Result<()> {
    let old = w.rows.get(key).cloned().flatten();
    let uniques: Vec<&IndexDef> = def.indexes.iter().filter(|i| i.unique).collect();
    let keys_of = |r: &Row| -> Vec<Option<Vec<u8>>> {
        uniques
            .iter()
            .map(|ix| {
                (!eddy_storage::index::has_null(&ix.columns, r))
                    .then(|| eddy_storage::index::index_key(&ix.columns, r))
                    .flatten()
            })
            .collect()
    };
    let new_keys = row.map(keys_of).unwrap_or_default();
    if let Some(r) = row {
        for (ix, k) in uniques.iter().zip(&new_keys) {
            let Some(k) = k else { continue };
            let own = w
                .unique
                .get(&(ix.name.clone(), k.clone()))
                .is_some_and(|s| s.iter().any(|o| o.as_slice() != key));
            let committed = !w.truncated
                && w.table
                    .index_owners(&ix.name, k)?
                    .iter()
                    .any(|o| o.as_slice() != key && !w.rows.contains_key(o));
            if own || committed {
                return Err(StorageError::UniqueViolation {
                    constraint: ix.name.clone(),
                    key: eddy_storage::codec::describe_columns(def, &ix.columns, r),
                }
                .into());
            }
        }
    }
    if let Some(o) = &old {
        for (ix, k) in uniques.iter().zip(keys_of(o)) {
            if let Some(k) = k {
                if let Some(s) = w.unique.get_mut(&(ix.name.clone(), k)) {
                    s.remove(key);
                }
            }
        }
    }
    for (ix, k) in uniques.iter().zip(new_keys) {
        if let Some(k) = k {
            w.unique
                .entry((ix.name.clone(), k))
                .or_default()
                .insert(key.to_vec());
        }
    }
    Ok(())
}

fn overlay_of(w: &TableWrites) -> Overlay {
    Overlay {
        hidden: w.rows.keys().cloned().collect(),
        rows: w
            .rows
            .iter()
            .filter_map(|(k, r)| r.as_ref().map(|r| (k.clone(), r.clone())))
            .collect(),
        truncated: w.truncated,
    }
}
