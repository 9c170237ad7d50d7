//! The GPU operators executed on a real device, their answers compared with
//! the CPU's: every entry of the expression corpus as a query through
//! GpuScanExec (NULLs, wrapping and checked overflow, division by zero,
//! decimals, dates, dictionary strings, Eddy's `eddy_int_*` /
//! `eddy_float_*`), and the SSB and TPC-H queries the rule offloads
//! (GpuScan, GpuJoin, GpuPreAgg, the fused GpuJoinAgg), each with `eddy.gpu = on` and `off` in
//! the same session.
//!
//! The emulation tests (`kernels_emulated.rs`) check the kernels' logic on
//! any machine; this file checks what only a device can: NVRTC's code for
//! the real chip, the launches, the copies and the fall-back of a kernel
//! that raised its error flag. Without a device (CI, the development
//! machines) each test prints a notice and passes; with
//! `EDDY_REQUIRE_DEVICE=1` a missing device fails it. Run on the lent GPU
//! machine by `scripts/gpu/device-tests.sh` with `--test-threads=1` (the
//! launch counters are process-wide).

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use eddy_gpu::metrics::FallbackReason;
use eddy_gpu::GPU_METRICS;

/// Corpus rows per batch (not a multiple of 32 or 8) and batches per
/// partition: enough rows that every launch uses many blocks.
const CORPUS_ROWS: usize = 100_003;
const CORPUS_BATCHES: usize = 3;

/// Whether a device is usable; a notice (or a failure, when required)
/// otherwise.
fn device_present() -> bool {
    let inv = eddy_gpu::discover();
    if inv.has_device() {
        eprintln!("{inv}");
        return true;
    }
    let required = std::env::var_os("EDDY_REQUIRE_DEVICE").is_some_and(|v| v != "0");
    assert!(!required, "EDDY_REQUIRE_DEVICE is set but {inv}");
    eprintln!("notice: {inv}; device tests skipped");
    false
}

/// Rows as sorted strings, every value printed exactly (floats in their
/// shortest round-trip form, so `-0` and `0`, and any last-bit difference,
/// stay apart).
fn exact_rows(batches: &[RecordBatch]) -> Vec<String> {
    let opts = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for b in batches {
        let fmts: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).expect("formatter"))
            .collect();
        for r in 0..b.num_rows() {
            let cells: Vec<String> = fmts.iter().map(|f| f.value(r).to_string()).collect();
            rows.push(cells.join("|"));
        }
    }
    rows.sort();
    rows
}

/// One query's run: its rows or its error, the kernels it launched, and
/// the chunks that fell back to the CPU after a device failure or a row
/// error flagged by a kernel.
struct Run {
    out: Result<Vec<String>, String>,
    launches: u64,
    fallbacks: u64,
}

async fn answer(ctx: &SessionContext, sql: &str, canon: fn(&[RecordBatch]) -> Vec<String>) -> Run {
    let launches = GPU_METRICS.kernel_launches.load(Ordering::Relaxed);
    let fallbacks = GPU_METRICS.fallbacks(FallbackReason::DeviceError);
    let out = match ctx.sql(sql).await {
        Ok(df) => df.collect().await.map(|b| canon(&b)),
        Err(e) => Err(e),
    };
    Run {
        out: out.map_err(|e| e.to_string()),
        launches: GPU_METRICS.kernel_launches.load(Ordering::Relaxed) - launches,
        fallbacks: GPU_METRICS.fallbacks(FallbackReason::DeviceError) - fallbacks,
    }
}

/// The GPU operators of `sql`'s physical plan, in plan order.
async fn gpu_operators(ctx: &SessionContext, sql: &str) -> Vec<String> {
    fn walk(p: &Arc<dyn datafusion::physical_plan::ExecutionPlan>, out: &mut Vec<String>) {
        if p.name().starts_with("Gpu") {
            out.push(p.name().to_string());
        }
        for c in p.children() {
            walk(c, out);
        }
    }
    let mut out = Vec::new();
    if let Ok(df) = ctx.sql(sql).await {
        if let Ok(plan) = df.create_physical_plan().await {
            walk(&plan, &mut out);
        }
    }
    out
}

/// Runs `sql` with the GPU off, then on; reports and returns the
/// difference, if any. A fall-back is a difference too where the CPU
/// answered (no row error can explain it: the device failed).
async fn compare(
    ctx: &SessionContext,
    label: &str,
    sql: &str,
    canon: fn(&[RecordBatch]) -> Vec<String>,
    on_device: &mut usize,
) -> Option<String> {
    common::set(ctx, "SET eddy.gpu = 'off'").await;
    let cpu = answer(ctx, sql, canon).await;
    common::set(ctx, "SET eddy.gpu = 'on'").await;
    let gpu = answer(ctx, sql, canon).await;
    if gpu.launches > 0 {
        *on_device += 1;
    }
    let operators = gpu_operators(ctx, sql).await;
    let rows = cpu.out.as_ref().map(|r| r.len()).unwrap_or(0);
    let failed = cpu.out.is_ok() && gpu.fallbacks > 0;
    let verdict = if cpu.out != gpu.out {
        "DIFFERENT"
    } else if failed {
        "FELL BACK"
    } else {
        "equal"
    };
    eprintln!(
        "{verdict}: {label} ({rows} rows, {} launches, {} fall-backs) [{}]",
        gpu.launches,
        gpu.fallbacks,
        operators.join(", ")
    );
    if cpu.out != gpu.out {
        Some(format!("{label}: {}", difference(&cpu.out, &gpu.out)))
    } else if failed {
        Some(format!(
            "{label}: the device path failed and fell back to the CPU"
        ))
    } else {
        None
    }
}

fn rounded_rows(batches: &[RecordBatch]) -> Vec<String> {
    eddy_gpu::check::canonical_rows(batches).expect("canonical rows")
}

/// A short description of the first difference between two answers.
fn difference(cpu: &Result<Vec<String>, String>, gpu: &Result<Vec<String>, String>) -> String {
    match (cpu, gpu) {
        (Ok(c), Ok(g)) if c.len() != g.len() => {
            format!("{} rows on the CPU, {} on the GPU", c.len(), g.len())
        }
        (Ok(c), Ok(g)) => match c.iter().zip(g).find(|(a, b)| a != b) {
            Some((a, b)) => format!("CPU row {a:?}, GPU row {b:?}"),
            None => "equal".into(),
        },
        (Err(c), Ok(_)) => format!("CPU error {c:?}, GPU answered"),
        (Ok(_), Err(g)) => format!("CPU answered, GPU error {g:?}"),
        (Err(c), Err(g)) => format!("CPU error {c:?}, GPU error {g:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn corpus_queries_answer_alike_on_the_device() {
    if !device_present() {
        return;
    }
    let ctx = common::gpu_session().await;
    for f in eddy_sql::checked_arith::checked_functions() {
        ctx.register_udf(f.as_ref().clone());
    }
    let batches: Vec<RecordBatch> = (0..CORPUS_BATCHES)
        .map(|_| common::corpus_batch(CORPUS_ROWS))
        .collect();
    let table = MemTable::try_new(common::corpus_schema(), vec![batches.clone(), batches])
        .expect("corpus table");
    ctx.register_table("corpus", Arc::new(table))
        .expect("register");

    let mut diffs = Vec::new();
    let mut on_device = 0;
    for (filter, projections) in common::CORPUS {
        let select = if projections.is_empty() {
            "*".to_string()
        } else {
            projections.join(", ")
        };
        let sql = if filter.is_empty() {
            format!("SELECT {select} FROM corpus")
        } else {
            format!("SELECT {select} FROM corpus WHERE {filter}")
        };
        diffs.extend(compare(&ctx, &sql, &sql, exact_rows, &mut on_device).await);
    }
    eprintln!(
        "corpus: {on_device} of {} queries launched kernels",
        common::CORPUS.len()
    );
    assert!(on_device > 0, "no corpus query ran on the device");
    assert!(
        diffs.is_empty(),
        "{} answers differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ssb_and_tpch_answer_alike_on_the_device() {
    if !device_present() {
        return;
    }
    let ssb: Vec<(String, String)> = eddy_gpu::check::SSB_QUERIES
        .iter()
        .map(|(n, q, _)| (format!("SSB {n}"), q.to_string()))
        .collect();
    let tpch: Vec<(String, String)> = eddy_bench::tpch::queries::queries(0.1)
        .into_iter()
        .map(|(n, q)| (format!("TPC-H {n}"), q))
        .collect();
    let suites = vec![
        (common::ssb_session(0.2, true).await, ssb),
        (common::tpch_session(0.1).await, tpch),
    ];
    let mut diffs = Vec::new();
    let mut on_device = 0;
    for (ctx, queries) in &suites {
        for (name, sql) in queries {
            diffs.extend(compare(ctx, name, sql, rounded_rows, &mut on_device).await);
        }
    }
    eprintln!("SSB + TPC-H: {on_device} queries launched kernels");
    assert!(on_device > 0, "no query ran on the device");
    // The star joins with their aggregation ran fused (one kernel).
    let (ssb_ctx, ssb_queries) = &suites[0];
    common::set(ssb_ctx, "SET eddy.gpu = 'on'").await;
    let mut fused = 0;
    for (_, sql) in ssb_queries {
        fused += usize::from(
            gpu_operators(ssb_ctx, sql)
                .await
                .iter()
                .any(|o| o == "GpuJoinAggExec"),
        );
    }
    eprintln!(
        "SSB: {fused} of {} queries planned with GpuJoinAggExec",
        ssb_queries.len()
    );
    assert!(fused > 0, "no SSB query was fused");
    assert!(
        diffs.is_empty(),
        "{} answers differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
