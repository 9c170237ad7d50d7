//! Flush and compaction off the commit lock: writes made while a flush or
//! a compaction is half done (paused by the engine's test hook, see
//! `Engine::set_background_hook`) must commit at once, read back right
//! while it runs, and survive its install and a reopen: updates and deletes
//! of rows in a frozen memtable or in the files being compacted included.
//! A "crash" drops the engine without closing it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{Array, Int64Array, StringArray};
use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{
    rows_to_batch, BackgroundStage, CreateTable, Engine, EngineConfig, OnConflict, StorageError,
    Table, TableSnapshot, WriteOp,
};

type Model = BTreeMap<i64, String>;

fn open(dir: &std::path::Path) -> Arc<Engine> {
    let mut cfg = EngineConfig::new(dir);
    cfg.sync = false;
    cfg.background_compaction = false;
    Engine::open(cfg).expect("open")
}

fn create(e: &Engine, name: &str, o: Orientation) -> Arc<Table> {
    e.create_table(CreateTable {
        name: name.into(),
        columns: vec![
            ColumnDef::new("k", ColumnType::BigInt, false),
            ColumnDef::new("v", ColumnType::Text, true),
        ],
        primary_key: vec![0],
        distribution_key: vec![],
        orientation: o,
        table_group: None,
        // one shard: the paused shard holds every key
        shard_count: Some(1),
        checks: Vec::new(),
    })
    .expect("create")
}

fn upsert(t: &Table, m: &mut Model, k: i64, v: &str) {
    t.write(vec![WriteOp::Insert {
        row: vec![Value::BigInt(k), Value::Text(v.into())],
        on_conflict: OnConflict::Replace,
    }])
    .expect("upsert");
    m.insert(k, v.into());
}

fn delete(t: &Table, m: &mut Model, k: i64) {
    let key = t.key_of(&[Value::BigInt(k)]).expect("key");
    t.write(vec![WriteOp::Delete { key }]).expect("delete");
    m.remove(&k);
}

fn scan(snap: &TableSnapshot) -> Model {
    let mut out = Model::new();
    for p in snap.partitions() {
        for b in p.scan(None, false, &|_| true).expect("scan") {
            let b = b.expect("batch");
            let k = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            let v = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
            for i in 0..b.num_rows() {
                let prev = out.insert(k.value(i), v.value(i).to_string());
                assert!(prev.is_none(), "key {} appears twice in a scan", k.value(i));
            }
        }
    }
    out
}

fn check(t: &Table, m: &Model, keys: std::ops::Range<i64>, what: &str) {
    assert_eq!(&scan(&t.snapshot()), m, "scan of {} {what}", t.def().name);
    for k in keys {
        let got = t.get(&[Value::BigInt(k)]).expect("get");
        let want = m
            .get(&k)
            .map(|v| vec![Value::BigInt(k), Value::Text(v.clone())]);
        assert_eq!(got, want, "get({k}) of {} {what}", t.def().name);
    }
}

/// Runs `work` on a thread; the first time any shard reaches `stage` it
/// waits there while `during` runs here, then goes on (or, with `fail`,
/// stops there as a crash would). Returns `work`'s result, or `None` if
/// it never reached `stage`.
fn paused<F>(
    e: &Arc<Engine>,
    stage: BackgroundStage,
    fail: bool,
    work: F,
    during: impl FnOnce(),
) -> Option<Result<(), StorageError>>
where
    F: FnOnce(&Engine) -> Result<(), StorageError> + Send + 'static,
{
    let (at_tx, at_rx): (SyncSender<()>, Receiver<()>) = sync_channel(1);
    let (go_tx, go_rx): (SyncSender<()>, Receiver<()>) = sync_channel(1);
    let (at_tx, go_rx) = (Mutex::new(at_tx), Mutex::new(go_rx));
    let fired = AtomicBool::new(false);
    e.set_background_hook(Some(Arc::new(move |s| {
        if s != stage || fired.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let _ = at_tx.lock().unwrap().send(());
        let _ = go_rx.lock().unwrap().recv();
        if fail {
            return Err(StorageError::Poisoned("test: stopped here".into()));
        }
        Ok(())
    })));
    let e2 = Arc::clone(e);
    let h = std::thread::spawn(move || work(&e2));
    let deadline = Instant::now() + Duration::from_secs(30);
    let reached = loop {
        if at_rx.recv_timeout(Duration::from_millis(20)).is_ok() {
            break true;
        }
        if h.is_finished() {
            break false;
        }
        assert!(Instant::now() < deadline, "background work hung");
    };
    if reached {
        during();
        go_tx.send(()).unwrap();
    }
    let r = h.join().unwrap();
    e.set_background_hook(None);
    reached.then_some(r)
}

const ORIENTATIONS: [Orientation; 3] = [
    Orientation::Row,
    Orientation::Column,
    Orientation::RowColumn,
];

/// Every data file in the shard directories is one a table lists (no
/// garbage left by a flush or compaction, finished or cut short).
fn no_stray_files(dir: &std::path::Path, tables: &[&Table]) {
    let mut listed = std::collections::HashSet::new();
    for t in tables {
        for s in t.storage_stats().shards {
            for f in s.files {
                listed.insert(format!("{}/{}", s.dir, f.name));
            }
        }
    }
    for g in std::fs::read_dir(dir).unwrap().flatten() {
        if !g.file_name().to_string_lossy().starts_with("tg") {
            continue;
        }
        for s in std::fs::read_dir(g.path()).unwrap().flatten() {
            for f in std::fs::read_dir(s.path()).unwrap().flatten() {
                let name = f.file_name().to_string_lossy().to_string();
                if name.ends_with(".row") || name.ends_with(".arrow") {
                    let rel = format!(
                        "{}/{}/{name}",
                        g.file_name().to_string_lossy(),
                        s.file_name().to_string_lossy()
                    );
                    assert!(listed.contains(&rel), "stray file {rel}");
                }
            }
        }
    }
}

#[test]
fn writes_go_on_while_a_flush_writes_its_files() {
    for o in ORIENTATIONS {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path());
        let t = create(&e, "t", o);
        let mut m = Model::new();
        for k in 0..200 {
            upsert(&t, &mut m, k, &format!("a{k}"));
        }
        let mut before_install = None;
        let r = paused(
            &e,
            BackgroundStage::FlushFrozen,
            false,
            |e| e.flush(),
            || {
                // the frozen memtable is still read
                check(&t, &m, 0..260, "with the memtable frozen");
                for k in 0..50 {
                    upsert(&t, &mut m, k, &format!("b{k}"));
                }
                for k in 50..100 {
                    delete(&t, &mut m, k);
                }
                for k in 200..250 {
                    upsert(&t, &mut m, k, &format!("c{k}"));
                }
                upsert(&t, &mut m, 60, "again");
                // uniqueness sees the frozen rows
                let dup = t.write(vec![WriteOp::Insert {
                    row: vec![Value::BigInt(150), Value::Text("dup".into())],
                    on_conflict: OnConflict::Error,
                }]);
                assert_eq!(dup.unwrap_err().sqlstate(), "23505");
                check(&t, &m, 0..260, "after writes during the flush");
                before_install = Some((t.snapshot(), m.clone()));
            },
        );
        r.expect("the flush reached its pause").expect("flush");
        let (snap, snap_model) = before_install.unwrap();
        assert_eq!(scan(&snap), snap_model, "a snapshot taken mid-flush");
        check(&t, &m, 0..260, "after the flush");
        // deletes and updates after the files are written, before install
        let r = paused(
            &e,
            BackgroundStage::FlushWritten,
            false,
            |e| e.flush(),
            || {
                for k in 100..120 {
                    delete(&t, &mut m, k);
                }
                for k in 120..130 {
                    upsert(&t, &mut m, k, &format!("d{k}"));
                }
                delete(&t, &mut m, 210);
            },
        );
        r.expect("the flush reached its pause").expect("flush");
        check(&t, &m, 0..260, "after the second flush");
        no_stray_files(dir.path(), &[&t]);
        drop(t);
        drop(e);
        let e = open(dir.path());
        let t = e.table("t").unwrap();
        check(&t, &m, 0..260, "after a crash");
        e.flush().unwrap();
        e.close().unwrap();
        drop(e);
        let e = open(dir.path());
        let t = e.table("t").unwrap();
        check(&t, &m, 0..260, "after a clean reopen");
    }
}

#[test]
fn deletes_made_during_a_compaction_survive_it() {
    for o in ORIENTATIONS {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path());
        let t = create(&e, "t", o);
        let mut m = Model::new();
        // three files, with deleted rows in them
        for round in 0..3 {
            for k in 0..100 {
                upsert(&t, &mut m, round * 100 + k, &format!("r{round}k{k}"));
            }
            e.flush().unwrap();
        }
        for k in (0..300).step_by(7) {
            delete(&t, &mut m, k);
        }
        e.flush().unwrap();
        let stage = BackgroundStage::CompactionPicked;
        let r = paused(
            &e,
            stage,
            false,
            |e| e.compact(None),
            || {
                // rows of every input file: deleted, updated (moved to the
                // memtable), deleted again after an update
                for k in [1, 2, 101, 150, 299, 298] {
                    delete(&t, &mut m, k);
                }
                for k in [3, 103, 203] {
                    upsert(&t, &mut m, k, "moved");
                }
                upsert(&t, &mut m, 204, "x");
                delete(&t, &mut m, 204);
                check(&t, &m, 0..310, "during the compaction");
            },
        );
        r.expect("the compaction reached its pause")
            .expect("compaction");
        check(&t, &m, 0..310, "after the compaction");
        let r = paused(
            &e,
            BackgroundStage::CompactionWritten,
            false,
            |e| e.compact(None),
            || {
                for k in [4, 104, 204, 205, 296] {
                    delete(&t, &mut m, k);
                }
                upsert(&t, &mut m, 5, "moved again");
            },
        );
        // (a second full compaction: the deletes above made files dirty)
        r.expect("the compaction reached its pause")
            .expect("compaction");
        check(&t, &m, 0..310, "after the second compaction");
        no_stray_files(dir.path(), &[&t]);
        drop(t);
        drop(e);
        let e = open(dir.path());
        let t = e.table("t").unwrap();
        check(&t, &m, 0..310, "after a crash");
        e.compact(None).unwrap();
        check(&t, &m, 0..310, "after compacting again");
        drop(t);
        drop(e);
        let e = open(dir.path());
        check(&e.table("t").unwrap(), &m, 0..310, "after a second crash");
    }
}

#[test]
fn a_flush_or_compaction_cut_short_leaves_a_recoverable_shard() {
    let stages = [
        BackgroundStage::FlushFrozen,
        BackgroundStage::FlushWritten,
        BackgroundStage::CompactionPicked,
        BackgroundStage::CompactionWritten,
    ];
    for o in ORIENTATIONS {
        for stage in stages {
            let dir = tempfile::tempdir().unwrap();
            let e = open(dir.path());
            let t = create(&e, "t", o);
            let mut m = Model::new();
            for round in 0..2 {
                for k in 0..60 {
                    upsert(&t, &mut m, k * 2 + round, &format!("r{round}"));
                }
                e.flush().unwrap();
            }
            for k in 0..30 {
                upsert(&t, &mut m, k, "mem");
            }
            let flush = matches!(
                stage,
                BackgroundStage::FlushFrozen | BackgroundStage::FlushWritten
            );
            let work = move |e: &Engine| if flush { e.flush() } else { e.compact(None) };
            let r = paused(&e, stage, true, work, || {
                for k in 20..40 {
                    delete(&t, &mut m, k);
                }
                upsert(&t, &mut m, 25, "late");
            });
            assert!(r.expect("reached the stage").is_err(), "{stage:?}");
            // still right in memory, and writes go on
            check(&t, &m, 0..130, "after a failed background step");
            upsert(&t, &mut m, 200, "after");
            drop(t);
            drop(e);
            let e = open(dir.path());
            let t = e.table("t").unwrap();
            check(
                &t,
                &m,
                0..210,
                &format!("after a crash at {stage:?} ({o:?})"),
            );
            no_stray_files(dir.path(), &[&t]);
        }
    }
}

#[test]
fn a_bulk_load_during_a_flush_takes_its_frozen_memtables_over() {
    for o in ORIENTATIONS {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path());
        let t = create(&e, "t", o);
        let mut m = Model::new();
        for k in 0..50 {
            upsert(&t, &mut m, k, "old");
        }
        let r = paused(
            &e,
            BackgroundStage::FlushWritten,
            false,
            |e| e.flush(),
            || {
                upsert(&t, &mut m, 60, "mem");
                // the bulk rows must win over the frozen ones
                let rows: Vec<Vec<Value>> = (40..70)
                    .map(|k| vec![Value::BigInt(k), Value::Text("bulk".into())])
                    .collect();
                let mut l = t.bulk_loader();
                l.push(rows_to_batch(&t, &rows).unwrap()).unwrap();
                l.commit().unwrap();
                for k in 40..70 {
                    m.insert(k, "bulk".into());
                }
                delete(&t, &mut m, 45);
                delete(&t, &mut m, 5);
                check(&t, &m, 0..80, "after a bulk load during a flush");
            },
        );
        r.expect("the flush reached its pause").expect("flush");
        check(&t, &m, 0..80, "after the flush");
        no_stray_files(dir.path(), &[&t]);
        drop(t);
        drop(e);
        let e = open(dir.path());
        check(&e.table("t").unwrap(), &m, 0..80, "after a crash");
    }
}

#[test]
fn bounded_compaction_does_not_rewrite_every_file() {
    // A column tablet over the file-count trigger merges only its smallest
    // files, each compaction a bounded number of them.
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let t = create(&e, "t", Orientation::Column);
    let mut m = Model::new();
    for round in 0..18 {
        // one big file first, then small ones
        let n = if round == 0 { 2000 } else { 10 };
        for k in 0..n {
            upsert(&t, &mut m, round * 10_000 + k, "v");
        }
        e.flush().unwrap();
    }
    let files = |t: &Table| -> Vec<String> {
        t.storage_stats().shards[0]
            .files
            .iter()
            .map(|f| f.name.clone())
            .collect()
    };
    let before = files(&t);
    assert_eq!(before.len(), 18);
    // what the background thread does (not a full compaction)
    e.compact_if_needed().unwrap();
    let after = files(&t);
    assert!(after.contains(&before[0]), "the big file was rewritten");
    assert!(after.len() < before.len() && after.len() > 1, "{after:?}");
    assert_eq!(scan(&t.snapshot()), m);
}

#[test]
fn levelled_compaction_leaves_l1_files_l0_does_not_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let t = create(&e, "t", Orientation::Row);
    let mut m = Model::new();
    for k in 0..1000 {
        upsert(&t, &mut m, k, "low");
    }
    e.compact(None).unwrap(); // flush + full: one L1 file of keys 0..1000
    let l1 = |t: &Table| -> Vec<String> {
        t.storage_stats().shards[0]
            .files
            .iter()
            .filter(|f| f.level == Some(1))
            .map(|f| f.name.clone())
            .collect()
    };
    let low = l1(&t);
    assert_eq!(low.len(), 1);
    for round in 0..4 {
        for k in 0..10 {
            upsert(&t, &mut m, 5000 + round * 10 + k, "high");
        }
        e.flush().unwrap();
    }
    e.compact_if_needed().unwrap();
    let after = l1(&t);
    assert!(
        after.contains(&low[0]),
        "the untouched L1 file was rewritten"
    );
    assert_eq!(after.len(), 2, "{after:?}");
    // now L0 overlaps it: merged
    for round in 0..4 {
        upsert(&t, &mut m, round * 100, "new");
        delete(&t, &mut m, round * 100 + 1);
        e.flush().unwrap();
    }
    e.compact_if_needed().unwrap();
    let last = l1(&t);
    assert!(!last.contains(&low[0]), "the overlapped L1 file was kept");
    assert_eq!(last.len(), 2, "{last:?}");
    check(&t, &m, 0..1000, "after levelled compactions");
    drop(t);
    drop(e);
    let e = open(dir.path());
    check(&e.table("t").unwrap(), &m, 0..1000, "after a crash");
}

#[test]
fn add_column_and_truncate_during_a_flush() {
    for o in ORIENTATIONS {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path());
        let t = create(&e, "t", o);
        let mut m = Model::new();
        for k in 0..50 {
            upsert(&t, &mut m, k, "old");
        }
        // ADD COLUMN flushes under the commit lock: it takes the frozen
        // memtables over, with the deletes made before it
        let r = paused(
            &e,
            BackgroundStage::FlushWritten,
            false,
            |e| e.flush(),
            || {
                delete(&t, &mut m, 5);
                upsert(&t, &mut m, 60, "mem");
                let t2 = e
                    .add_column("t", ColumnDef::new("w", ColumnType::BigInt, true))
                    .unwrap();
                t2.write(vec![WriteOp::Insert {
                    row: vec![
                        Value::BigInt(7),
                        Value::Text("wide".into()),
                        Value::BigInt(1),
                    ],
                    on_conflict: OnConflict::Replace,
                }])
                .unwrap();
                m.insert(7, "wide".into());
                delete(&t2, &mut m, 8);
                assert_eq!(scan(&t2.snapshot()), m, "{o:?} after ADD COLUMN");
            },
        );
        r.expect("the flush reached its pause").expect("flush");
        let t = e.table("t").unwrap();
        assert_eq!(scan(&t.snapshot()), m, "{o:?} after the flush");
        no_stray_files(dir.path(), &[&t]);
        for k in 70..80 {
            upsert_wide(&t, &mut m, k, "to flush");
        }
        // TRUNCATE during a flush: the flush's files are unused
        let r = paused(
            &e,
            BackgroundStage::FlushFrozen,
            false,
            |e| e.flush(),
            || {
                e.truncate_table("t").unwrap();
                m.clear();
                upsert_wide(&e.table("t").unwrap(), &mut m, 1, "after truncate");
            },
        );
        // (the table may hold nothing to flush in this shard: no pause)
        if let Some(r) = r {
            r.expect("flush");
        }
        upsert_wide(&e.table("t").unwrap(), &mut m, 2, "after");
        let t = e.table("t").unwrap();
        assert_eq!(scan(&t.snapshot()), m, "{o:?} after TRUNCATE");
        no_stray_files(dir.path(), &[&t]);
        drop(t);
        drop(e);
        let e = open(dir.path());
        let t = e.table("t").unwrap();
        assert_eq!(scan(&t.snapshot()), m, "{o:?} after a crash");
        no_stray_files(dir.path(), &[&t]);
    }
}

/// An upsert into the table once it has the added third column.
fn upsert_wide(t: &Table, m: &mut Model, k: i64, v: &str) {
    t.write(vec![WriteOp::Insert {
        row: vec![Value::BigInt(k), Value::Text(v.into()), Value::Null],
        on_conflict: OnConflict::Replace,
    }])
    .expect("upsert");
    m.insert(k, v.into());
}
