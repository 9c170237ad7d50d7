//! Model test of catalog changes inside transactions (proptest): several
//! sessions interleave CREATE TABLE, ALTER TABLE ADD COLUMN, DROP TABLE and
//! inserts inside blocks, with savepoints, commits, rollbacks and crashes
//! (the data directory is copied as it is, open blocks and all, and the
//! copy opened: what a kill -9 leaves), on real storage in a temporary
//! directory.
//!
//! The model does not predict which statements fail: a statement may fail
//! only with a lock timeout (55P03: another block holds the table), a
//! deadlock (40P01), or because the table's existence or a column is not
//! what the block assumed when another block changed it first (42P01,
//! 42P07, 42701), and the failure aborts the block, as in PostgreSQL. It
//! takes Eddy's word for what succeeded, and holds Eddy to it: whenever no
//! block is open, a fresh session must see exactly the committed tables,
//! each with the committed columns and keys: every acknowledged commit is
//! there (also after a crash), nothing of a rolled-back, aborted or
//! uncommitted block ever is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use eddy_sql::{Database, Session};
use proptest::prelude::*;

mod common;

const TABLES: usize = 3;
const SESSIONS: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    Begin { s: usize },
    Create { s: usize, t: usize },
    AddColumn { s: usize, t: usize },
    Insert { s: usize, t: usize, k: i64 },
    Drop { s: usize, t: usize },
    Savepoint { s: usize },
    RollbackTo { s: usize },
    Commit { s: usize },
    Rollback { s: usize },
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    let s = 0..SESSIONS;
    let t = 0..TABLES;
    prop_oneof![
        3 => s.clone().prop_map(|s| Op::Begin { s }),
        3 => (s.clone(), t.clone()).prop_map(|(s, t)| Op::Create { s, t }),
        2 => (s.clone(), t.clone()).prop_map(|(s, t)| Op::AddColumn { s, t }),
        4 => (s.clone(), t.clone(), 0..8i64).prop_map(|(s, t, k)| Op::Insert { s, t, k }),
        1 => (s.clone(), t.clone()).prop_map(|(s, t)| Op::Drop { s, t }),
        1 => s.clone().prop_map(|s| Op::Savepoint { s }),
        1 => s.clone().prop_map(|s| Op::RollbackTo { s }),
        3 => s.clone().prop_map(|s| Op::Commit { s }),
        1 => s.clone().prop_map(|s| Op::Rollback { s }),
        1 => Just(Op::Crash),
    ]
}

/// A table as the model knows it: its column count and keys.
#[derive(Clone, Debug, Default, PartialEq)]
struct TableState {
    columns: usize,
    keys: BTreeSet<i64>,
}

/// Committed tables by number.
type Schema = BTreeMap<usize, TableState>;

/// One change a block made; applied to the committed schema when it
/// commits (others may have committed changes to the same table in between,
/// e.g. a column added to a table the block only inserted into).
#[derive(Clone, Debug)]
enum Change {
    Create(usize),
    AddColumn(usize),
    Insert(usize, i64),
    Drop(usize),
}

fn apply(schema: &mut Schema, c: &Change) {
    match *c {
        Change::Create(t) => {
            schema.insert(
                t,
                TableState {
                    columns: 1,
                    keys: BTreeSet::new(),
                },
            );
        }
        Change::AddColumn(t) => {
            if let Some(st) = schema.get_mut(&t) {
                st.columns += 1;
            }
        }
        Change::Insert(t, k) => {
            if let Some(st) = schema.get_mut(&t) {
                st.keys.insert(k);
            }
        }
        Change::Drop(t) => {
            schema.remove(&t);
        }
    }
}

/// A session's open block.
#[derive(Clone, Debug)]
struct Block {
    changes: Vec<Change>,
    /// How many changes each savepoint keeps.
    savepoints: Vec<usize>,
    aborted: bool,
}

fn name(t: usize) -> String {
    format!("dm{t}")
}

async fn run(s: &mut Session, sql: &str) -> Result<Vec<Vec<i64>>, String> {
    let mut rows = Vec::new();
    for out in s.simple_query(sql).await {
        rows.extend(common::rows_i64(out.map_err(|e| e.sqlstate().to_string())?).await?);
    }
    Ok(rows)
}

fn open_db(dir: &std::path::Path) -> Arc<Database> {
    common::open_db(dir, 8 << 10) // flush often
}

async fn sessions(db: &Arc<Database>) -> Vec<Session> {
    common::sessions(db, SESSIONS).await
}

struct World {
    dir: tempfile::TempDir,
    db: Arc<Database>,
    sessions: Vec<Session>,
    blocks: Vec<Option<Block>>,
    committed: Schema,
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open_db(dir.path());
        let sessions = sessions(&db).await;
        World {
            dir,
            db,
            sessions,
            blocks: vec![None; SESSIONS],
            committed: Schema::new(),
        }
    }

    /// The table as session `s`'s block sees it.
    fn view(&self, s: usize, t: usize) -> Option<TableState> {
        let mut schema = self.committed.clone();
        for c in self.blocks[s].iter().flat_map(|b| &b.changes) {
            apply(&mut schema, c);
        }
        schema.get(&t).cloned()
    }

    /// Runs `sql` in `s`'s open block; `true` when it succeeded. A failure
    /// must be one the module doc allows, and aborts the block.
    async fn in_block(&mut self, s: usize, sql: &str) -> bool {
        let Some(b) = self.blocks[s].as_mut() else {
            return false;
        };
        if b.aborted {
            return false;
        }
        match run(&mut self.sessions[s], sql).await {
            Ok(_) => true,
            Err(code) => {
                assert!(
                    ["55P03", "40P01", "42P01", "42P07", "42701"].contains(&code.as_str()),
                    "{sql} failed with {code}"
                );
                b.aborted = true;
                false
            }
        }
    }

    fn record(&mut self, s: usize, change: Change) {
        if let Some(b) = self.blocks[s].as_mut() {
            b.changes.push(change);
        }
    }

    async fn step(&mut self, op: &Op) {
        match *op {
            Op::Begin { s } => {
                if self.blocks[s].is_none() {
                    run(&mut self.sessions[s], "BEGIN").await.expect("begin");
                    self.blocks[s] = Some(Block {
                        changes: Vec::new(),
                        savepoints: Vec::new(),
                        aborted: false,
                    });
                }
            }
            Op::Create { s, t } => {
                if self.view(s, t).is_some() {
                    return;
                }
                let sql = format!(
                    "CREATE TABLE {} (k BIGINT PRIMARY KEY) WITH (shard_count = 2)",
                    name(t)
                );
                if self.in_block(s, &sql).await {
                    self.record(s, Change::Create(t));
                }
            }
            Op::AddColumn { s, t } => {
                let Some(state) = self.view(s, t) else {
                    return;
                };
                let sql = format!(
                    "ALTER TABLE {} ADD COLUMN c{} BIGINT",
                    name(t),
                    state.columns
                );
                if self.in_block(s, &sql).await {
                    self.record(s, Change::AddColumn(t));
                }
            }
            Op::Insert { s, t, k } => {
                let Some(state) = self.view(s, t) else {
                    return;
                };
                // every column gets a value, so a row written before an ADD
                // COLUMN of the same block is told apart by its NULL
                let values: Vec<String> = (0..state.columns).map(|_| k.to_string()).collect();
                let sql = format!(
                    "INSERT INTO {} VALUES ({}) ON CONFLICT DO NOTHING",
                    name(t),
                    values.join(", ")
                );
                if self.in_block(s, &sql).await {
                    self.record(s, Change::Insert(t, k));
                }
            }
            Op::Drop { s, t } => {
                if self.view(s, t).is_none() {
                    return;
                }
                if self.in_block(s, &format!("DROP TABLE {}", name(t))).await {
                    self.record(s, Change::Drop(t));
                }
            }
            Op::Savepoint { s } => {
                let Some(snap) = self.blocks[s]
                    .as_ref()
                    .filter(|b| !b.aborted)
                    .map(|b| b.changes.len())
                else {
                    return;
                };
                if self.in_block(s, "SAVEPOINT sp").await {
                    if let Some(b) = self.blocks[s].as_mut() {
                        b.savepoints.push(snap);
                    }
                }
            }
            Op::RollbackTo { s } => {
                let Some(snap) = self.blocks[s]
                    .as_ref()
                    .and_then(|b| b.savepoints.last().copied())
                else {
                    return;
                };
                run(&mut self.sessions[s], "ROLLBACK TO SAVEPOINT sp")
                    .await
                    .expect("rollback to");
                if let Some(b) = self.blocks[s].as_mut() {
                    b.changes.truncate(snap);
                    b.aborted = false;
                }
            }
            Op::Commit { s } => {
                let Some(b) = self.blocks[s].take() else {
                    return;
                };
                run(&mut self.sessions[s], "COMMIT").await.expect("commit");
                if !b.aborted {
                    for c in &b.changes {
                        apply(&mut self.committed, c);
                    }
                }
            }
            Op::Rollback { s } => {
                if self.blocks[s].take().is_some() {
                    run(&mut self.sessions[s], "ROLLBACK")
                        .await
                        .expect("rollback");
                }
            }
            Op::Crash => {
                // What a kill -9 leaves is what is on disk now, open blocks
                // and all: copied before the sessions are dropped (dropping
                // them would roll their blocks back, as a disconnect does).
                let crashed = tempfile::tempdir().expect("tempdir");
                copy_dir(self.dir.path(), crashed.path());
                self.sessions.clear();
                self.blocks = vec![None; SESSIONS];
                self.db = open_db(crashed.path());
                self.dir = crashed;
                self.sessions = sessions(&self.db).await;
            }
        }
    }

    /// With no block open, the database holds exactly the committed schema.
    async fn check(&mut self, after: &Op) {
        if self.blocks.iter().any(Option::is_some) {
            return;
        }
        let mut s = Session::new(Arc::clone(&self.db), "eddy", 77).expect("session");
        for t in 0..TABLES {
            let n = name(t);
            let cols = run(
                &mut s,
                &format!(
                    "SELECT count(*) FROM information_schema.columns WHERE table_name = '{n}'"
                ),
            )
            .await
            .expect("columns");
            let want = self.committed.get(&t);
            assert_eq!(
                cols.first().and_then(|r| r.first()).copied().unwrap_or(0) as usize,
                want.map_or(0, |w| w.columns),
                "columns of {n} after {after:?}"
            );
            let Some(want) = want else {
                continue;
            };
            let rows = run(&mut s, &format!("SELECT * FROM {n} ORDER BY k"))
                .await
                .expect("rows");
            let keys: BTreeSet<i64> = rows.iter().filter_map(|r| r.first().copied()).collect();
            assert_eq!(keys, want.keys, "keys of {n} after {after:?}");
            for r in &rows {
                assert_eq!(r.len(), want.columns, "width of {n} after {after:?}");
            }
        }
    }

    /// Ends every open block, then checks.
    async fn finish(&mut self) {
        for s in 0..SESSIONS {
            self.step(&Op::Rollback { s }).await;
        }
        self.check(&Op::Rollback { s: 0 }).await;
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn run_schedule(ops: &[Op]) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut w = World::new().await;
        for op in ops {
            w.step(op).await;
            w.check(op).await;
        }
        w.finish().await;
    });
}

proptest! {
    // EDDY_DDL_MODEL_CASES=1000 for a longer run
    #![proptest_config(ProptestConfig {
        cases: std::env::var("EDDY_DDL_MODEL_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48),
        ..ProptestConfig::default()
    })]

    #[test]
    fn catalog_changes_match_a_serial_model(ops in proptest::collection::vec(op(), 1..50)) {
        run_schedule(&ops);
    }
}

/// A fixed schedule through every path: a create, a column and rows
/// committed; a savepoint undoing a column; a crash with a block open.
#[test]
fn a_crash_keeps_exactly_the_committed_changes() {
    let ops = [
        Op::Begin { s: 0 },
        Op::Create { s: 0, t: 0 },
        Op::Insert { s: 0, t: 0, k: 1 },
        Op::AddColumn { s: 0, t: 0 },
        Op::Insert { s: 0, t: 0, k: 2 },
        Op::Commit { s: 0 },
        Op::Begin { s: 1 },
        Op::Savepoint { s: 1 },
        Op::AddColumn { s: 1, t: 0 },
        Op::Insert { s: 1, t: 0, k: 3 },
        Op::RollbackTo { s: 1 },
        Op::Insert { s: 1, t: 0, k: 4 },
        Op::Create { s: 1, t: 1 },
        Op::Commit { s: 1 },
        Op::Begin { s: 2 },
        Op::Drop { s: 2, t: 1 },
        Op::Create { s: 2, t: 2 },
        Op::AddColumn { s: 2, t: 0 },
        Op::Insert { s: 2, t: 0, k: 5 },
        Op::Crash,
        Op::Begin { s: 0 },
        Op::Drop { s: 0, t: 1 },
        Op::Commit { s: 0 },
    ];
    run_schedule(&ops);
}
