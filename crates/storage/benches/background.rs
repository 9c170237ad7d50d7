//! Writes during flush and compaction (issue 16):
//! `cargo bench -p eddy-storage --bench background [-- --rows N --runs N]`.
//!
//! One shard holds a large column table `big` and a small row table `hot`.
//! `big` gets three flushed files of `--rows` rows each plus `--rows` rows
//! in its memtable; then one writer upserts single rows into `hot`
//! (fsync'd group commit) while a background thread
//! * `flush+compaction`: flushes the shard and runs a full compaction
//!   (merging `big`'s four files, 4 x `--rows` rows);
//! * `compaction off`: only flushes;
//! * `flush under lock`: flushes holding the commit lock throughout, as
//!   flushes did before they moved off it (the writer waits);
//! * `idle`: nothing (the writer alone, for as long as the first mode took).
//!
//! Reports the writer's upsert latency p50 / p99 / max while the
//! background work ran, and how long the work took; the median of the
//! runs per mode. `docs/benchmarks/storage.md` records results.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{CreateTable, Engine, EngineConfig, OnConflict, Table, WriteOp};
use hdrhistogram::Histogram;
use rand::Rng;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    FlushCompact,
    FlushOnly,
    FlushLocked,
    Idle,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::FlushCompact => "flush+compaction",
            Mode::FlushOnly => "compaction off",
            Mode::FlushLocked => "flush under lock (old)",
            Mode::Idle => "idle",
        }
    }
}

fn arg(name: &str, default: usize) -> usize {
    let v: Vec<String> = std::env::args().collect();
    v.iter()
        .position(|a| a == name)
        .and_then(|i| v.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn table(e: &Engine, name: &str, o: Orientation) -> Arc<Table> {
    e.create_table(CreateTable {
        name: name.into(),
        columns: vec![
            ColumnDef::new("k", ColumnType::BigInt, false),
            ColumnDef::new("n", ColumnType::BigInt, true),
            ColumnDef::new("v", ColumnType::Text, true),
        ],
        primary_key: vec![0],
        distribution_key: vec![],
        orientation: o,
        table_group: Some("g".into()),
        shard_count: None,
        checks: Vec::new(),
    })
    .expect("create table")
}

fn load(t: &Table, from: i64, rows: i64) {
    let payload = "p".repeat(80);
    let mut k = from;
    while k < from + rows {
        let ops = (k..(k + 5000).min(from + rows))
            .map(|k| WriteOp::Insert {
                row: vec![
                    Value::BigInt(k),
                    Value::BigInt(k * 7),
                    Value::Text(format!("{payload}{k}")),
                ],
                on_conflict: OnConflict::Replace,
            })
            .collect();
        t.write(ops).expect("load");
        k += 5000;
    }
}

struct Result1 {
    hist: Histogram<u64>,
    work: Duration,
}

fn run(mode: Mode, rows: i64, idle_for: Duration) -> Result1 {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(dir.path());
    cfg.background_compaction = false;
    cfg.memtable_bytes = usize::MAX;
    let e = Engine::open(cfg).expect("open");
    e.create_table_group("g", 1).expect("group");
    let big = table(&e, "big", Orientation::Column);
    let hot = table(&e, "hot", Orientation::Row);
    for round in 0..3 {
        load(&big, round * rows, rows);
        e.flush().expect("flush");
    }
    load(&big, 3 * rows, rows);
    // some deleted rows for the compaction to drop
    let dels: Vec<WriteOp> = (0..rows / 10)
        .map(|i| WriteOp::Delete {
            key: big.key_of(&[Value::BigInt(i * 10)]).expect("key"),
        })
        .collect();
    big.write(dels).expect("deletes");

    // 0 before the background work, 1 while it runs, 2 after: a write is
    // counted if it overlaps the work (one blocked throughout included)
    let phase = Arc::new(AtomicU8::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (hot, phase, stop) = (hot.clone(), phase.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            let mut rng = rand::rng();
            while !stop.load(Ordering::Acquire) {
                let k = rng.random_range(0..10_000i64);
                let started = phase.load(Ordering::Acquire);
                let s = Instant::now();
                hot.write(vec![WriteOp::Insert {
                    row: vec![
                        Value::BigInt(k),
                        Value::BigInt(k),
                        Value::Text("hot".into()),
                    ],
                    on_conflict: OnConflict::Replace,
                }])
                .expect("upsert");
                if started <= 1 && phase.load(Ordering::Acquire) >= 1 {
                    let _ = h.record(s.elapsed().as_micros() as u64);
                }
            }
            h
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    phase.store(1, Ordering::Release);
    let start = Instant::now();
    match mode {
        Mode::FlushCompact => {
            e.flush().expect("flush");
            e.compact(Some("big")).expect("compact");
        }
        Mode::FlushOnly => e.flush().expect("flush"),
        Mode::FlushLocked => e.flush_holding_commit_locks().expect("flush"),
        Mode::Idle => std::thread::sleep(idle_for),
    }
    let work = start.elapsed();
    phase.store(2, Ordering::Release);
    stop.store(true, Ordering::Release);
    let hist = writer.join().expect("writer");
    e.close().expect("close");
    Result1 { hist, work }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let rows = arg("--rows", 200_000) as i64;
    let runs = arg("--runs", 3);
    let modes = [
        Mode::FlushCompact,
        Mode::FlushOnly,
        Mode::FlushLocked,
        Mode::Idle,
    ];
    let mut results: Vec<(Mode, Vec<Result1>)> = modes.iter().map(|m| (*m, Vec::new())).collect();
    let mut idle_for = Duration::from_secs(2);
    for r in 0..runs {
        for (mode, out) in results.iter_mut() {
            let res = run(*mode, rows, idle_for);
            if *mode == Mode::FlushCompact {
                idle_for = res.work;
            }
            eprintln!(
                "run {r} {:<24} work {:>7.0} ms  upserts {:>5}  p50 {:>7} us  p99 {:>7} us  max {:>7} us",
                mode.name(),
                res.work.as_secs_f64() * 1e3,
                res.hist.len(),
                res.hist.value_at_quantile(0.5),
                res.hist.value_at_quantile(0.99),
                res.hist.max()
            );
            out.push(res);
        }
    }
    println!("| background work | work ms | upserts | p50 µs | p99 µs | max µs |");
    println!("|---|---|---|---|---|---|");
    for (mode, out) in &results {
        let m = |f: &dyn Fn(&Result1) -> f64| median(out.iter().map(f).collect());
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            mode.name(),
            m(&|r| r.work.as_secs_f64() * 1e3),
            m(&|r| r.hist.len() as f64),
            m(&|r| r.hist.value_at_quantile(0.5) as f64),
            m(&|r| r.hist.value_at_quantile(0.99) as f64),
            m(&|r| r.hist.max() as f64),
        );
    }
}
