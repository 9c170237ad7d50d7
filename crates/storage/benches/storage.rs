//! Storage-engine system benchmark:
//! `cargo bench -p eddy-storage --bench storage [-- --seconds N --bulk-rows N]`.
//!
//! Measures, in one run on the same disk:
//! * the disk's fdatasync ceiling (4 KiB append + fdatasync, one thread),
//! * single-row upserts/s with fsync'd group commit at 1, 8 and 64 writers,
//! * bulk-load rows/s of a 17-column (SSB lineorder-shaped) table,
//! * point-lookup latency p50/p99 from the memtable and from files, with a
//!   warm and a cold (evicted with posix_fadvise) page cache.
//!
//! Prints a markdown table; `docs/benchmarks/storage.md` records results.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, Int32Array, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{CreateTable, Engine, EngineConfig, OnConflict, WriteOp};
use hdrhistogram::Histogram;
use rand::Rng;

struct Args {
    seconds: f64,
    bulk_rows: usize,
    lookup_rows: i64,
}

fn args() -> Args {
    let mut a = Args {
        seconds: 3.0,
        bulk_rows: 2_000_000,
        lookup_rows: 200_000,
    };
    let v: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < v.len() {
        match v[i].as_str() {
            "--seconds" => {
                a.seconds = v
                    .get(i + 1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(a.seconds)
            }
            "--bulk-rows" => {
                a.bulk_rows = v
                    .get(i + 1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(a.bulk_rows)
            }
            "--lookup-rows" => {
                a.lookup_rows = v
                    .get(i + 1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(a.lookup_rows)
            }
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

fn engine(dir: &std::path::Path) -> Arc<Engine> {
    let mut cfg = EngineConfig::new(dir);
    cfg.memtable_bytes = 256 << 20;
    Engine::open(cfg).expect("open engine")
}

fn kv_table(e: &Engine, name: &str, o: Orientation) -> Arc<eddy_storage::Table> {
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
        shard_count: None,
        checks: Vec::new(),
    })
    .expect("create table")
}

fn fsync_ceiling(dir: &std::path::Path, seconds: f64) -> f64 {
    let p = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&p).expect("probe file");
    let buf = vec![7u8; 4096];
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < seconds {
        f.write_all(&buf).expect("write");
        f.sync_data().expect("fdatasync");
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn upserts(dir: &std::path::Path, writers: usize, seconds: f64) -> (f64, Histogram<u64>) {
    let e = engine(dir);
    let t = kv_table(&e, &format!("up{writers}"), Orientation::Row);
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let payload = "x".repeat(100);
    let mut handles = Vec::new();
    for w in 0..writers {
        let (t, stop, count, payload) = (t.clone(), stop.clone(), count.clone(), payload.clone());
        handles.push(std::thread::spawn(move || {
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            let mut rng = rand::rng();
            while !stop.load(Ordering::Relaxed) {
                let k = rng.random_range(0..1_000_000i64) * 64 + w as i64;
                let s = Instant::now();
                t.write(vec![WriteOp::Insert {
                    row: vec![Value::BigInt(k), Value::Text(payload.clone())],
                    on_conflict: OnConflict::Replace,
                }])
                .expect("upsert");
                let _ = h.record(s.elapsed().as_micros() as u64);
                count.fetch_add(1, Ordering::Relaxed);
            }
            h
        }));
    }
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut hist = Histogram::<u64>::new(3).expect("histogram");
    for h in handles {
        hist.add(h.join().expect("writer")).expect("merge");
    }
    let rate = count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    e.close().expect("close");
    (rate, hist)
}

fn lineorder_batch(start: i64, n: usize) -> RecordBatch {
    let mut rng = rand::rng();
    let i32s = |rng: &mut rand::rngs::ThreadRng, hi: i32| -> ArrayRef {
        Arc::new(Int32Array::from_iter_values(
            (0..n).map(|_| rng.random_range(0..hi)),
        ))
    };
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(
            (0..n as i64).map(|i| (start + i) / 4),
        )), // orderkey
        Arc::new(Int32Array::from_iter_values(
            (0..n as i64).map(|i| ((start + i) % 4) as i32 + 1),
        )), // linenumber
        i32s(&mut rng, 300_000),
        i32s(&mut rng, 800_000),
        i32s(&mut rng, 20_000),
        i32s(&mut rng, 20_000_000),
        Arc::new(StringArray::from_iter_values((0..n).map(|i| {
            ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECI", "5-LOW"][i % 5]
        }))),
        i32s(&mut rng, 2),
        i32s(&mut rng, 51),
        i32s(&mut rng, 10_000_000),
        i32s(&mut rng, 50_000_000),
        i32s(&mut rng, 11),
        i32s(&mut rng, 10_000_000),
        i32s(&mut rng, 100_000),
        i32s(&mut rng, 9),
        i32s(&mut rng, 20_000_000),
        Arc::new(StringArray::from_iter_values((0..n).map(|i| {
            ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"][i % 7]
        }))),
    ];
    let schema = Arc::new(lineorder_def().arrow_schema_for_bench());
    RecordBatch::try_new(schema, cols).expect("batch")
}

struct LineorderDef(Vec<ColumnDef>);
impl LineorderDef {
    fn arrow_schema_for_bench(&self) -> arrow::datatypes::Schema {
        arrow::datatypes::Schema::new(
            self.0
                .iter()
                .map(|c| arrow::datatypes::Field::new(&c.name, c.ty.to_arrow(), c.nullable))
                .collect::<Vec<_>>(),
        )
    }
}

fn lineorder_def() -> LineorderDef {
    let names = [
        "lo_orderkey",
        "lo_linenumber",
        "lo_custkey",
        "lo_partkey",
        "lo_suppkey",
        "lo_orderdate",
        "lo_orderpriority",
        "lo_shippriority",
        "lo_quantity",
        "lo_extendedprice",
        "lo_ordtotalprice",
        "lo_discount",
        "lo_revenue",
        "lo_supplycost",
        "lo_tax",
        "lo_commitdate",
        "lo_shipmode",
    ];
    LineorderDef(
        names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let ty = match i {
                    0 => ColumnType::BigInt,
                    6 | 16 => ColumnType::Text,
                    _ => ColumnType::Int,
                };
                ColumnDef::new(*n, ty, false)
            })
            .collect(),
    )
}

fn bulk(dir: &std::path::Path, rows: usize) -> f64 {
    let e = engine(dir);
    let t = e
        .create_table(CreateTable {
            name: "lineorder".into(),
            columns: lineorder_def().0,
            primary_key: vec![0, 1],
            distribution_key: vec![0],
            orientation: Orientation::Column,
            table_group: None,
            shard_count: None,
            checks: Vec::new(),
        })
        .expect("create lineorder");
    let batch_rows = 65_536;
    let batches: Vec<RecordBatch> = (0..rows.div_ceil(batch_rows))
        .map(|b| {
            lineorder_batch(
                (b * batch_rows) as i64,
                batch_rows.min(rows - b * batch_rows),
            )
        })
        .collect();
    let start = Instant::now();
    let mut l = t.bulk_loader();
    for b in batches {
        l.push(b).expect("push");
    }
    let n = l.commit().expect("commit");
    let rate = n as f64 / start.elapsed().as_secs_f64();
    e.close().expect("close");
    rate
}

fn evict(dir: &std::path::Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for ent in rd.flatten() {
            let p = ent.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(f) = std::fs::File::open(&p) {
                use std::os::fd::AsRawFd;
                unsafe {
                    libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
                }
            }
        }
    }
}

fn lookups(t: &eddy_storage::Table, rows: i64, n: usize) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(3).expect("histogram");
    let mut rng = rand::rng();
    for _ in 0..n {
        let k = rng.random_range(0..rows);
        let s = Instant::now();
        let r = t.get(&[Value::BigInt(k)]).expect("get");
        let _ = h.record(s.elapsed().as_nanos() as u64);
        assert!(r.is_some());
    }
    h
}

fn main() {
    let a = args();
    let base = std::env::var("EDDY_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let dir = tempfile::tempdir_in(base).expect("temp dir");
    println!(
        "# eddy-storage benchmark ({} s per upsert run, {} bulk rows)",
        a.seconds, a.bulk_rows
    );
    let ceiling = fsync_ceiling(dir.path(), a.seconds.min(2.0));
    println!("\n| measure | value | note |\n|---|---|---|");
    println!("| disk fdatasync/s (4 KiB appends, 1 thread) | {ceiling:.0} | the ceiling for one writer |");
    for w in [1usize, 8, 64] {
        let d = dir.path().join(format!("up{w}"));
        let (rate, h) = upserts(&d, w, a.seconds);
        println!(
            "| upserts/s, {w} writers, fsync group commit | {rate:.0} | {:.2}x the fdatasync ceiling; latency p50 {} µs, p99 {} µs |",
            rate / ceiling,
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.99)
        );
    }
    let rate = bulk(&dir.path().join("bulk"), a.bulk_rows);
    println!("| bulk load, 17-column lineorder, rows/s | {rate:.0} | {} rows, 2 shards, column orientation |", a.bulk_rows);

    // point lookups
    let d = dir.path().join("lookup");
    let e = engine(&d);
    let t = kv_table(&e, "kv", Orientation::Row);
    let payload = "y".repeat(100);
    for chunk in (0..a.lookup_rows).collect::<Vec<_>>().chunks(1000) {
        t.write(
            chunk
                .iter()
                .map(|&k| WriteOp::Insert {
                    row: vec![Value::BigInt(k), Value::Text(payload.clone())],
                    on_conflict: OnConflict::Replace,
                })
                .collect(),
        )
        .expect("load");
    }
    let report = |name: &str, h: &Histogram<u64>| {
        println!(
            "| point lookup {name}: p50 / p99 | {:.1} / {:.1} µs | {} lookups |",
            h.value_at_quantile(0.5) as f64 / 1000.0,
            h.value_at_quantile(0.99) as f64 / 1000.0,
            h.len()
        );
    };
    let h = lookups(&t, a.lookup_rows, 100_000);
    report("memtable", &h);
    e.flush().expect("flush");
    let _ = lookups(&t, a.lookup_rows, 100_000);
    let h = lookups(&t, a.lookup_rows, 100_000);
    report("files, warm cache", &h);
    e.close().expect("close");
    drop(t);
    drop(e);
    evict(&d);
    let e = engine(&d);
    let t = e.table("kv").expect("kv");
    let h = lookups(&t, a.lookup_rows, 2_000);
    report("files, cold cache (first 2000 after eviction)", &h);
}
