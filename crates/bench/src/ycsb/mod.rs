//! YCSB over the PostgreSQL protocol: the `usertable`, its loader, and a
//! closed- and open-loop load generator (the Hologres serving benchmark).
//!
//! * Table: `usertable(ycsb_key BIGINT PRIMARY KEY, field0..field9 TEXT)`,
//!   100-byte fields whose content is a pure function of (key, field).
//! * Workloads: C (100% reads) and B (95% reads, 5% single-field updates),
//!   through prepared statements; keys uniform, zipfian or scrambled zipfian
//!   ([`keys`]).
//! * Closed loop ([`driver::closed_loop`]): N connections, each with W
//!   requests in flight (pipelined on the connection, as Hologres' W).
//! * Open loop ([`driver::open_loop`]): a fixed total rate; latency is
//!   measured from each request's intended start, so a stalled server cannot
//!   hide its queueing (no coordinated omission).
//!
//! Latencies go to HdrHistogram in microseconds.

pub mod driver;
pub mod keys;

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::dataset::{ChunkJob, ChunkSource};
use crate::error::{BenchError, Result};

/// Fields per row.
pub const FIELDS: usize = 10;
/// Bytes per field.
pub const FIELD_LEN: usize = 100;
/// Rows per generated file.
const ROWS_PER_CHUNK: u64 = 500_000;
const ALNUM: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// `CREATE TABLE usertable ...`.
pub fn create_table_sql() -> String {
    let fields: Vec<String> = (0..FIELDS).map(|i| format!("field{i} TEXT")).collect();
    format!(
        "CREATE TABLE usertable (ycsb_key BIGINT PRIMARY KEY, {})",
        fields.join(", ")
    )
}

/// Arrow schema of the usertable.
pub fn schema() -> SchemaRef {
    let mut f = vec![Field::new("ycsb_key", DataType::Int64, false)];
    f.extend((0..FIELDS).map(|i| Field::new(format!("field{i}"), DataType::Utf8, false)));
    Arc::new(Schema::new(f))
}

/// The 100-byte value of (key, field, version): deterministic, alphanumeric.
pub fn field_value(key: u64, field: usize, version: u64, out: &mut String) {
    out.clear();
    let mut x = key
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((field as u64) << 56)
        .wrapping_add(version.wrapping_mul(0xD1B5_4A32_D192_ED03));
    for _ in 0..FIELD_LEN {
        x ^= x >> 33;
        x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        x ^= x >> 29;
        out.push(ALNUM[(x % ALNUM.len() as u64) as usize] as char);
    }
}

/// Appends rows `start..end` as CSV (no header) to `out`.
pub fn rows_csv(start: u64, end: u64, out: &mut Vec<u8>) {
    let mut v = String::with_capacity(FIELD_LEN);
    for key in start..end {
        out.extend_from_slice(key.to_string().as_bytes());
        for f in 0..FIELDS {
            field_value(key, f, 0, &mut v);
            out.push(b',');
            out.extend_from_slice(v.as_bytes());
        }
        out.push(b'\n');
    }
}

/// The usertable as a [`ChunkSource`] (Parquet files under `DATA/ycsb-sfN/usertable/`,
/// where N is rows / 1M).
#[derive(Debug, Clone)]
pub struct YcsbGenerator {
    rows: u64,
}

impl YcsbGenerator {
    /// A usertable of `rows` rows (>= 1).
    pub fn new(rows: u64) -> Result<Self> {
        if rows == 0 {
            return Err(BenchError::InvalidArgument(
                "YCSB needs at least one row".into(),
            ));
        }
        Ok(YcsbGenerator { rows })
    }
}

impl ChunkSource for YcsbGenerator {
    fn benchmark(&self) -> &'static str {
        "ycsb"
    }

    fn scale_factor(&self) -> f64 {
        self.rows as f64 / 1e6
    }

    fn seed(&self) -> u64 {
        0
    }

    fn jobs(&self) -> Vec<ChunkJob> {
        (0..self.rows.div_ceil(ROWS_PER_CHUNK))
            .map(|c| ChunkJob {
                table: "usertable",
                chunk: c as usize,
                est_rows: ROWS_PER_CHUNK.min(self.rows - c * ROWS_PER_CHUNK),
            })
            .collect()
    }

    fn generate(
        &self,
        job: &ChunkJob,
        sink: &mut dyn FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let start = job.chunk as u64 * ROWS_PER_CHUNK;
        let end = (start + ROWS_PER_CHUNK).min(self.rows);
        let schema = schema();
        let mut v = String::with_capacity(FIELD_LEN);
        let mut s = start;
        while s < end {
            let e = (s + 50_000).min(end);
            let mut keys = Int64Builder::with_capacity((e - s) as usize);
            let mut fields: Vec<StringBuilder> = (0..FIELDS)
                .map(|_| {
                    StringBuilder::with_capacity((e - s) as usize, (e - s) as usize * FIELD_LEN)
                })
                .collect();
            for key in s..e {
                keys.append_value(key as i64);
                for (f, b) in fields.iter_mut().enumerate() {
                    field_value(key, f, 0, &mut v);
                    b.append_value(&v);
                }
            }
            let mut cols: Vec<ArrayRef> = vec![Arc::new(keys.finish())];
            cols.extend(fields.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
            sink(RecordBatch::try_new(schema.clone(), cols)?)?;
            s = e;
        }
        Ok(())
    }
}

/// Key distribution names on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Distribution {
    /// Uniform over all keys.
    Uniform,
    /// Zipfian (constant 0.99), hottest keys first.
    Zipfian,
    /// Zipfian ranks hashed over the key space (YCSB's default zipfian).
    Scrambled,
}

impl Distribution {
    /// The chooser over `records` keys.
    pub fn chooser(self, records: u64) -> keys::KeyChooser {
        match self {
            Distribution::Uniform => keys::KeyChooser::Uniform(records),
            Distribution::Zipfian => {
                keys::KeyChooser::Zipfian(keys::Zipfian::new(records, keys::ZIPFIAN_CONSTANT))
            }
            Distribution::Scrambled => keys::KeyChooser::ScrambledZipfian(keys::Zipfian::new(
                records,
                keys::ZIPFIAN_CONSTANT,
            )),
        }
    }
}

/// A YCSB report: every run of one invocation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct YcsbReport {
    /// Label of the target (`eddy`, `postgres`).
    pub label: String,
    /// Server version.
    pub server_version: String,
    /// UTC date.
    pub date: String,
    /// Machine.
    pub machine: String,
    /// Command line.
    pub command: String,
    /// Rows in usertable.
    pub records: u64,
    /// Load time when loaded in this run (s).
    pub load_s: Option<f64>,
    /// Runs: (workload, distribution, result).
    pub runs: Vec<YcsbRun>,
}

/// One run with its workload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct YcsbRun {
    /// Workload (C or B).
    pub workload: driver::Mix,
    /// Key distribution.
    pub distribution: Distribution,
    /// The measurement.
    #[serde(flatten)]
    pub result: driver::RunResult,
}

/// Markdown table of a YCSB report.
pub fn markdown(r: &YcsbReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "# YCSB on {} — {}\n", r.label, r.date);
    let _ = writeln!(s, "- Server: {}", r.server_version);
    let _ = writeln!(s, "- Machine: {}", r.machine);
    let _ = writeln!(s, "- Command: `{}`", r.command);
    let _ = writeln!(
        s,
        "- usertable: {} rows x 10 fields of 100 bytes{}\n",
        r.records,
        r.load_s
            .map(|l| format!(", loaded in {l:.1} s ({:.0} rows/s)", r.records as f64 / l))
            .unwrap_or_default()
    );
    let _ = writeln!(s, "| workload | keys | mode | conns | W | offered/s | QPS | p50 µs | p95 µs | p99 µs | p99.9 µs | errors |");
    let _ = writeln!(
        s,
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for run in &r.runs {
        let x = &run.result;
        let _ = writeln!(
            s,
            "| {:?} | {:?} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {} |",
            run.workload,
            run.distribution,
            x.mode,
            x.connections,
            if x.mode == "closed" {
                x.depth.to_string()
            } else {
                "—".into()
            },
            x.target_rate
                .map(|t| format!("{t:.0}"))
                .unwrap_or_else(|| "—".into()),
            x.qps,
            x.p50_us,
            x.p95_us,
            x.p99_us,
            x.p999_us,
            x.errors + x.dropped
        );
    }
    s
}

use serde::{Deserialize, Serialize};
