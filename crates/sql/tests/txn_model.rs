//! Model test of transactions (proptest): several sessions interleave
//! transfers between accounts, ledger inserts and deletes, savepoints,
//! commits, rollbacks, isolation levels and engine crashes (the engine is
//! dropped without a flush and reopened, so recovery replays the WAL), on
//! real storage in a temporary directory.
//!
//! The model does not predict which statements fail: a statement may fail
//! only with 55P03 (a row lock held by another session; the lock timeout is
//! short) or 40001 (REPEATABLE READ conflict), which aborts its block, as
//! in PostgreSQL. What it checks after every step, through a fresh session:
//! * the total of all balances never changes (no half transfer is ever
//!   visible, not even across shards);
//! * every balance and the ledger equal the model's committed state: every
//!   acknowledged commit is there (also after a crash), nothing of a
//!   rolled-back, aborted or uncommitted transaction ever is.

use std::collections::BTreeMap;
use std::sync::Arc;

use eddy_sql::{Database, Output, Session};
use eddy_storage::{Engine, EngineConfig};
use proptest::prelude::*;

mod common;

const ACCOUNTS: i64 = 6;
const SESSIONS: usize = 3;
const START: i64 = 100;

#[derive(Clone, Debug)]
enum Op {
    Begin {
        s: usize,
        repeatable: bool,
    },
    Transfer {
        s: usize,
        from: i64,
        to: i64,
        amount: i64,
    },
    Ledger {
        s: usize,
        key: i64,
    },
    Unledger {
        s: usize,
        key: i64,
    },
    Savepoint {
        s: usize,
    },
    RollbackTo {
        s: usize,
    },
    Commit {
        s: usize,
    },
    Rollback {
        s: usize,
    },
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    let s = 0..SESSIONS;
    prop_oneof![
        3 => (s.clone(), any::<bool>()).prop_map(|(s, repeatable)| Op::Begin { s, repeatable }),
        6 => (s.clone(), 0..ACCOUNTS, 0..ACCOUNTS, 1..20i64)
            .prop_map(|(s, from, to, amount)| Op::Transfer { s, from, to, amount }),
        2 => (s.clone(), 0..20i64).prop_map(|(s, key)| Op::Ledger { s, key }),
        1 => (s.clone(), 0..20i64).prop_map(|(s, key)| Op::Unledger { s, key }),
        1 => s.clone().prop_map(|s| Op::Savepoint { s }),
        1 => s.clone().prop_map(|s| Op::RollbackTo { s }),
        3 => s.clone().prop_map(|s| Op::Commit { s }),
        1 => s.clone().prop_map(|s| Op::Rollback { s }),
        1 => Just(Op::Crash),
    ]
}

/// What the database holds once committed.
#[derive(Clone, Debug, Default, PartialEq)]
struct State {
    bal: BTreeMap<i64, i64>,
    ledger: BTreeMap<i64, i64>,
}

/// A block's writes at a savepoint: balance deltas and ledger changes.
type Saved = (BTreeMap<i64, i64>, BTreeMap<i64, Option<i64>>);

/// A session's open block as the model sees it.
#[derive(Clone, Debug)]
struct Block {
    /// The state the block would commit (its own view of its writes on
    /// top of what it read; transfers are increments, so they compose).
    deltas: BTreeMap<i64, i64>,
    ledger: BTreeMap<i64, Option<i64>>,
    savepoints: Vec<Saved>,
    aborted: bool,
}

async fn run(s: &mut Session, sql: &str) -> Result<Vec<Vec<i64>>, String> {
    run_tagged(s, sql).await.map(|r| r.0)
}

/// Rows of the statements and the tag of the last command.
async fn run_tagged(s: &mut Session, sql: &str) -> Result<(Vec<Vec<i64>>, String), String> {
    let mut rows = Vec::new();
    let mut tag = String::new();
    for out in s.simple_query(sql).await {
        match out.map_err(|e| {
            eprintln!("{sql}: {} {}", e.sqlstate(), e.client_message());
            e.sqlstate().to_string()
        })? {
            Output::Command(t) => tag = t,
            other => rows.extend(common::rows_i64(other).await?),
        }
    }
    Ok((rows, tag))
}

struct World {
    dir: tempfile::TempDir,
    db: Arc<Database>,
    sessions: Vec<Session>,
    blocks: Vec<Option<Block>>,
    committed: State,
}

fn open_db(dir: &std::path::Path) -> Arc<Database> {
    common::open_db(dir, 16 << 10) // flush often
}

async fn sessions(db: &Arc<Database>) -> Vec<Session> {
    common::sessions(db, SESSIONS).await
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open_db(dir.path());
        let mut s = Session::new(Arc::clone(&db), "eddy", 99).expect("session");
        run(
            &mut s,
            "CREATE TABLE acct (id INT PRIMARY KEY, bal BIGINT NOT NULL) WITH (shard_count = 3);
             CREATE TABLE ledger (k BIGINT PRIMARY KEY, amount BIGINT) WITH (shard_count = 2, orientation = 'column')",
        )
        .await
        .expect("ddl");
        let values: Vec<String> = (0..ACCOUNTS).map(|i| format!("({i}, {START})")).collect();
        run(
            &mut s,
            &format!("INSERT INTO acct VALUES {}", values.join(",")),
        )
        .await
        .expect("seed");
        let committed = State {
            bal: (0..ACCOUNTS).map(|i| (i, START)).collect(),
            ledger: BTreeMap::new(),
        };
        let sessions = sessions(&db).await;
        World {
            dir,
            db,
            sessions,
            blocks: vec![None; SESSIONS],
            committed,
        }
    }

    /// Runs `sql` in session `s`'s block; a failure must be a lock timeout
    /// or a serialization failure and aborts the block.
    async fn in_block(&mut self, s: usize, sql: &str) -> Option<String> {
        let b = self.blocks[s].as_mut()?;
        let r = run_tagged(&mut self.sessions[s], sql).await;
        match r {
            Ok((_, tag)) => {
                assert!(!b.aborted, "{sql} succeeded in an aborted block");
                Some(tag)
            }
            Err(code) if b.aborted => {
                assert_eq!(code, "25P02", "{sql} in an aborted block");
                None
            }
            Err(code) => {
                assert!(
                    code == "55P03" || code == "40001",
                    "{sql} failed with {code}"
                );
                b.aborted = true;
                None
            }
        }
    }

    async fn step(&mut self, op: &Op) {
        match *op {
            Op::Begin { s, repeatable } => {
                if self.blocks[s].is_some() {
                    return;
                }
                let sql = if repeatable {
                    "BEGIN ISOLATION LEVEL REPEATABLE READ"
                } else {
                    "BEGIN"
                };
                run(&mut self.sessions[s], sql).await.expect("begin");
                self.blocks[s] = Some(Block {
                    deltas: BTreeMap::new(),
                    ledger: BTreeMap::new(),
                    savepoints: Vec::new(),
                    aborted: false,
                });
            }
            Op::Transfer {
                s,
                from,
                to,
                amount,
            } => {
                if from == to {
                    return;
                }
                let sql = format!(
                    "UPDATE acct SET bal = bal - {amount} WHERE id = {from};
                     UPDATE acct SET bal = bal + {amount} WHERE id = {to}"
                );
                // Both statements or (on failure) the block is aborted anyway.
                if self.in_block(s, &sql).await.is_some() {
                    let b = self.blocks[s].as_mut().expect("block");
                    *b.deltas.entry(from).or_default() -= amount;
                    *b.deltas.entry(to).or_default() += amount;
                }
            }
            // The model takes the row counts Eddy reports; the checks then
            // hold Eddy to them.
            Op::Ledger { s, key } => {
                let sql = format!(
                    "INSERT INTO ledger VALUES ({key}, {}) ON CONFLICT DO NOTHING",
                    key * 10
                );
                if self.in_block(s, &sql).await.as_deref() == Some("INSERT 0 1") {
                    let b = self.blocks[s].as_mut().expect("block");
                    b.ledger.insert(key, Some(key * 10));
                }
            }
            Op::Unledger { s, key } => {
                let sql = format!("DELETE FROM ledger WHERE k = {key}");
                if self.in_block(s, &sql).await.as_deref() == Some("DELETE 1") {
                    let b = self.blocks[s].as_mut().expect("block");
                    b.ledger.insert(key, None);
                }
            }
            Op::Savepoint { s } => {
                let Some(b) = self.blocks[s].as_mut() else {
                    return;
                };
                if b.aborted {
                    return;
                }
                let snap = (b.deltas.clone(), b.ledger.clone());
                if self.in_block(s, "SAVEPOINT sp").await.is_some() {
                    if let Some(b) = self.blocks[s].as_mut() {
                        b.savepoints.push(snap);
                    }
                }
            }
            Op::RollbackTo { s } => {
                let Some(b) = self.blocks[s].as_mut() else {
                    return;
                };
                let Some((d, l)) = b.savepoints.last().cloned() else {
                    return;
                };
                run(&mut self.sessions[s], "ROLLBACK TO SAVEPOINT sp")
                    .await
                    .expect("rollback to");
                b.deltas = d;
                b.ledger = l;
                b.aborted = false;
            }
            Op::Commit { s } => {
                let Some(b) = self.blocks[s].take() else {
                    return;
                };
                let r = run(&mut self.sessions[s], "COMMIT").await;
                match r {
                    Ok(_) if !b.aborted => {
                        for (a, d) in &b.deltas {
                            *self.committed.bal.entry(*a).or_default() += d;
                        }
                        for (k, v) in &b.ledger {
                            match v {
                                Some(v) => self.committed.ledger.insert(*k, *v),
                                None => self.committed.ledger.remove(k),
                            };
                        }
                    }
                    Ok(_) => {} // COMMIT of an aborted block rolls back
                    Err(code) => panic!("COMMIT failed with {code}"),
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
                // Sessions and their open blocks die with the process; the
                // engine is dropped without a flush and reopened.
                self.sessions.clear();
                self.blocks = vec![None; SESSIONS];
                let placeholder = tempfile::tempdir().expect("tempdir");
                self.db = open_placeholder(placeholder.path());
                self.db = open_db(self.dir.path());
                self.sessions = sessions(&self.db).await;
            }
        }
    }

    async fn check(&mut self, after: &Op) {
        let mut s = Session::new(Arc::clone(&self.db), "eddy", 77).expect("session");
        let bal = run(&mut s, "SELECT id, bal FROM acct ORDER BY id")
            .await
            .expect("read balances");
        let total: i64 = bal.iter().map(|r| r[1]).sum();
        assert_eq!(total, ACCOUNTS * START, "total changed after {after:?}");
        let got: BTreeMap<i64, i64> = bal.iter().map(|r| (r[0], r[1])).collect();
        assert_eq!(got, self.committed.bal, "balances after {after:?}");
        let ledger = run(&mut s, "SELECT k, amount FROM ledger ORDER BY k")
            .await
            .expect("read ledger");
        let got: BTreeMap<i64, i64> = ledger.iter().map(|r| (r[0], r[1])).collect();
        assert_eq!(got, self.committed.ledger, "ledger after {after:?}");
    }
}

/// A throwaway database so the real one can be dropped before reopening
/// (in a directory of its own per crash: the tests of this binary run in
/// parallel).
fn open_placeholder(dir: &std::path::Path) -> Arc<Database> {
    let mut cfg = EngineConfig::new(dir);
    cfg.background_compaction = false;
    Arc::new(
        Database::open(Engine::open(cfg).expect("placeholder"), "eddy", None).expect("database"),
    )
}

/// Runs `ops` on a fresh database, checking the model after every step.
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
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn transactions_match_a_serial_model(ops in proptest::collection::vec(op(), 1..60)) {
        run_schedule(&ops);
    }
}

/// The schedule the model must reject if REPEATABLE READ let a stale
/// snapshot overwrite a newer commit (a lost update); checked by
/// injecting exactly that bug.
#[test]
fn repeatable_read_refuses_a_stale_overwrite() {
    let ops = [
        Op::Begin {
            s: 1,
            repeatable: true,
        },
        Op::Ledger { s: 1, key: 1 },
        Op::Begin {
            s: 0,
            repeatable: false,
        },
        Op::Transfer {
            s: 0,
            from: 0,
            to: 1,
            amount: 5,
        },
        Op::Commit { s: 0 },
        Op::Transfer {
            s: 1,
            from: 0,
            to: 2,
            amount: 3,
        },
        Op::Commit { s: 1 },
        Op::Begin {
            s: 2,
            repeatable: false,
        },
        Op::Savepoint { s: 2 },
        Op::Transfer {
            s: 2,
            from: 3,
            to: 4,
            amount: 7,
        },
        Op::RollbackTo { s: 2 },
        Op::Transfer {
            s: 2,
            from: 4,
            to: 5,
            amount: 2,
        },
        Op::Crash,
        Op::Commit { s: 2 },
    ];
    run_schedule(&ops);
}
