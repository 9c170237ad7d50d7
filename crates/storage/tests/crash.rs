//! Crash test: a writer runs in a child process (this test binary, re-run
//! with `EDDY_CRASH_CHILD` set) and is killed with SIGKILL at random
//! moments, many times. After each kill the parent reopens the database and
//! checks that
//! * every acknowledged write is present (values only grow, so the stored
//!   value of a key is at least the last acknowledged one), and
//! * no unacknowledged write is partly visible: every write sets two keys
//!   on different shards to the same value in one atomic write, so the two
//!   must always be equal, and a bulk load of 100 rows is all or nothing.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{rows_to_batch, CreateTable, Engine, EngineConfig, OnConflict, WriteOp};
use rand::Rng;

const PAIRS: i64 = 16;

fn open(dir: &str) -> std::sync::Arc<Engine> {
    let mut cfg = EngineConfig::new(dir);
    cfg.memtable_bytes = 64 << 10; // flush often, so crashes hit flushes too
    Engine::open(cfg).unwrap()
}

fn ensure_tables(e: &Engine) {
    if !e.table_groups().iter().any(|g| g.name == "g") {
        e.create_table_group("g", 2).unwrap();
    }
    for (name, o) in [
        ("kv_row", Orientation::Row),
        ("kv_col", Orientation::Column),
    ] {
        if e.table(name).is_none() {
            e.create_table(CreateTable {
                name: name.into(),
                columns: vec![
                    ColumnDef::new("k", ColumnType::BigInt, false),
                    ColumnDef::new("v", ColumnType::BigInt, false),
                ],
                primary_key: vec![0],
                distribution_key: vec![],
                orientation: o,
                table_group: Some("g".into()),
                shard_count: None,
                checks: Vec::new(),
            })
            .unwrap();
        }
    }
    // an append-only view's table and its checkpoint marks: two groups
    if e.table("appended").is_none() {
        e.create_table(CreateTable {
            name: "appended".into(),
            columns: vec![ColumnDef::new("pos", ColumnType::BigInt, false)],
            primary_key: vec![],
            distribution_key: vec![],
            orientation: Orientation::Column,
            table_group: None,
            shard_count: Some(3),
            checks: Vec::new(),
        })
        .unwrap();
    }
}

/// The rows committed into `appended`, as recorded with them in `kv_row`
/// (key -1).
fn appended_mark(e: &Engine) -> i64 {
    match e
        .table("kv_row")
        .unwrap()
        .get(&[Value::BigInt(-1)])
        .unwrap()
    {
        Some(r) => match r[1] {
            Value::BigInt(v) => v,
            _ => panic!("bad mark {r:?}"),
        },
        None => 0,
    }
}

/// As an append-only view commits a checkpoint: rows under their positions
/// by bulk load, and the new position in another table, in one
/// transaction (`BulkLoader::commit_with`).
fn appender(e: &Engine, out: &std::sync::Mutex<std::io::Stdout>) {
    let mut rng = rand::rng();
    let t = e.table("appended").unwrap();
    let marks = e.table("kv_row").unwrap();
    let mut pos = appended_mark(e);
    loop {
        let n: i64 = rng.random_range(1..40);
        let rows: Vec<Vec<Value>> = (pos..pos + n).map(|p| vec![Value::BigInt(p)]).collect();
        let ids: Vec<u64> = (pos..pos + n).map(|p| p as u64).collect();
        let mut l = t.bulk_loader();
        l.push_at(rows_to_batch(&t, &rows).unwrap(), &ids).unwrap();
        pos += n;
        let mark = WriteOp::Insert {
            row: vec![Value::BigInt(-1), Value::BigInt(pos)],
            on_conflict: OnConflict::Replace,
        };
        l.commit_with(vec![(std::sync::Arc::clone(&marks), vec![mark])])
            .unwrap();
        if let Ok(mut o) = out.lock() {
            let _ = writeln!(o, "appended {pos}");
            let _ = o.flush();
        }
    }
}

/// Writer threads of the child: concurrent multi-shard commits reach the
/// commit log in any order (the order their ids were handed out is not the
/// order they commit in), which recovery must accept.
const WRITERS: i64 = 4;

/// The child: writes forever from several threads, printing each
/// acknowledged write.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("EDDY_CRASH_CHILD") else {
        return; // not running as the child
    };
    // A writer that fails must fail the run, not just stop writing.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("crash child: {info}");
        std::process::abort();
    }));
    let e = open(&dir);
    ensure_tables(&e);
    let out = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    if let Ok(mut o) = out.lock() {
        let _ = writeln!(o, "ready");
        let _ = o.flush();
    }
    let base: i64 = std::env::var("EDDY_CRASH_BASE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let e = std::sync::Arc::clone(&e);
            let out = std::sync::Arc::clone(&out);
            std::thread::spawn(move || writer(&e, w, base, &out))
        })
        .collect();
    {
        let e = std::sync::Arc::clone(&e);
        let out = std::sync::Arc::clone(&out);
        threads.push(std::thread::spawn(move || appender(&e, &out)));
    }
    for t in threads {
        let _ = t.join();
    }
}

/// One writer: pairs `p` with `p % WRITERS == w`, values increasing.
fn writer(e: &Engine, w: i64, base: i64, out: &std::sync::Mutex<std::io::Stdout>) {
    let mut rng = rand::rng();
    let mut v = base + w;
    loop {
        v += WRITERS;
        let say = |line: String| {
            if let Ok(mut o) = out.lock() {
                let _ = writeln!(o, "{line}");
                let _ = o.flush();
            }
        };
        if w == 0 && v % 50 < WRITERS {
            // bulk load: 100 rows with key 1000+i, all value v
            let name = if v % 100 < 50 { "kv_row" } else { "kv_col" };
            let t = e.table(name).unwrap();
            let rows: Vec<Vec<Value>> = (0..100)
                .map(|i| vec![Value::BigInt(1000 + i), Value::BigInt(v)])
                .collect();
            let mut l = t.bulk_loader();
            l.push(rows_to_batch(&t, &rows).unwrap()).unwrap();
            l.commit().unwrap();
            say(format!("bulk {name} {v}"));
            continue;
        }
        let p = rng.random_range(0..PAIRS / WRITERS) * WRITERS + w;
        let pair = |p: i64| {
            vec![
                WriteOp::Insert {
                    row: vec![Value::BigInt(p), Value::BigInt(v)],
                    on_conflict: OnConflict::Replace,
                },
                WriteOp::Insert {
                    row: vec![Value::BigInt(p + 100), Value::BigInt(v)],
                    on_conflict: OnConflict::Replace,
                },
            ]
        };
        if v % 3 == 0 {
            // one transaction over both tables (and both shards)
            let batch = ["kv_row", "kv_col"]
                .iter()
                .map(|n| (e.table(n).unwrap(), pair(p)))
                .collect();
            e.commit(batch).unwrap();
            say(format!("ack kv_row {p} {v}"));
            say(format!("ack kv_col {p} {v}"));
        } else {
            let name = if v % 2 == 0 { "kv_row" } else { "kv_col" };
            e.table(name).unwrap().write(pair(p)).unwrap();
            say(format!("ack {name} {p} {v}"));
        }
    }
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = dir.path().to_str().unwrap().to_string();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rng();
    // last acknowledged value per (table, key)
    let mut acked: std::collections::HashMap<(String, i64), i64> = Default::default();
    let mut base = 0i64;
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut kills = 0;
    // rows of `appended` acknowledged
    let mut appended = 0i64;
    while kills < 12 && Instant::now() < deadline {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("EDDY_CRASH_CHILD", &dirs)
            .env("EDDY_CRASH_BASE", base.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>()
        });
        std::thread::sleep(Duration::from_millis(rng.random_range(150..700)));
        assert!(
            matches!(child.try_wait(), Ok(None)),
            "the child died before it was killed (a writer failed)"
        );
        unsafe {
            libc::kill(child.id() as i32, libc::SIGKILL);
        }
        let _ = child.wait();
        let lines = reader.join().unwrap();
        assert!(
            lines.iter().any(|l| l.ends_with("ready")),
            "child never started: {lines:?}"
        );
        kills += 1;
        for l in &lines {
            let f: Vec<&str> = l.split(' ').collect();
            match f.as_slice() {
                ["ack", t, p, v] => {
                    let (p, v): (i64, i64) = (p.parse().unwrap(), v.parse().unwrap());
                    acked.insert((t.to_string(), p), v);
                    acked.insert((t.to_string(), p + 100), v);
                    base = base.max(v);
                }
                ["appended", n] => appended = appended.max(n.parse().unwrap()),
                ["bulk", t, v] => {
                    let v: i64 = v.parse().unwrap();
                    for i in 0..100 {
                        acked.insert((t.to_string(), 1000 + i), v);
                    }
                    base = base.max(v);
                }
                _ => {}
            }
        }
        // Writes after the last ack may or may not have landed; values in
        // the next run start above anything the killed child could have
        // written (it writes at most a few thousand per run).
        base += 1_000_000;

        let e = open(&dirs);
        ensure_tables(&e);
        for name in ["kv_row", "kv_col"] {
            let t = e.table(name).unwrap();
            let get = |k: i64| match t.get(&[Value::BigInt(k)]).unwrap() {
                Some(r) => match r[1] {
                    Value::BigInt(v) => Some(v),
                    _ => panic!("bad row {r:?}"),
                },
                None => None,
            };
            for p in 0..PAIRS {
                let (a, b) = (get(p), get(p + 100));
                assert_eq!(a, b, "{name}: pair {p} half-applied after crash {kills}");
                if let Some(&want) = acked.get(&(name.to_string(), p)) {
                    assert!(
                        a.is_some_and(|a| a >= want),
                        "{name}: key {p} lost acked value {want}, has {a:?}"
                    );
                }
            }
            let bulk: Vec<Option<i64>> = (0..100).map(|i| get(1000 + i)).collect();
            assert!(
                bulk.iter().all(|v| *v == bulk[0]),
                "{name}: bulk load partly visible: {bulk:?}"
            );
            if let Some(&want) = acked.get(&(name.to_string(), 1000)) {
                assert!(
                    bulk[0].is_some_and(|v| v >= want),
                    "{name}: acked bulk load {want} lost"
                );
            }
        }
        // the bulk rows and their mark: both or neither, each position once
        let mark = appended_mark(&e);
        assert!(
            mark >= appended,
            "acknowledged appended rows {appended} lost: mark {mark}"
        );
        let t = e.table("appended").unwrap();
        let mut positions: Vec<i64> = Vec::new();
        for part in t.snapshot().partitions() {
            for b in part.scan(None, false, &|_| true).unwrap() {
                let b = b.unwrap();
                let c = b
                    .column(0)
                    .as_any()
                    .downcast_ref::<arrow::array::Int64Array>()
                    .unwrap();
                positions.extend(c.values().iter());
            }
        }
        positions.sort_unstable();
        assert_eq!(
            positions,
            (0..mark).collect::<Vec<_>>(),
            "appended rows disagree with their mark after crash {kills}"
        );
        drop(e);
    }
    assert!(kills >= 5, "only {kills} crash rounds ran");
    assert!(appended > 0, "no appended checkpoint was acknowledged");
}
