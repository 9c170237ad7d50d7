//! The OffloadToGpu rule's decisions and the CPU fallback, on a machine
//! without a GPU: the rule is told a device is present, so Gpu*Exec nodes
//! are planned; executing them finds no device and runs the kept CPU
//! subtree, which must give exactly the plain CPU answer.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::{displayable, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use eddy_gpu::check::canonical_rows;
use eddy_gpu::optimizer::Decision;
use eddy_gpu::{FallbackReason, GpuOptions, OffloadToGpu, GPU_METRICS};

const FACT_ROWS: i64 = 20000;

fn tables() -> Vec<(&'static str, Arc<Schema>, Vec<ArrayRef>)> {
    let n = FACT_ROWS;
    let lo = vec![
        Arc::new(Int32Array::from(
            (0..n)
                .map(|i| (i % 7 != 3).then_some((i % 50) as i32))
                .collect::<Vec<_>>(),
        )) as ArrayRef,
        Arc::new(Int32Array::from(
            (0..n).map(|i| (i % 11) as i32).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            (0..n).map(|i| 1000 + (i * 37) % 9000).collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            (0..n)
                .map(|i| 19920101 + (i % 5) as i32 * 10000)
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            (0..n).map(|i| (i * 13) % 200 + 1).collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            (0..n)
                .map(|i| (i % 13 != 0).then_some((i % 20) as i32 + 1))
                .collect::<Vec<_>>(),
        )),
    ];
    let lo_schema = Arc::new(Schema::new(vec![
        Field::new("lo_quantity", DataType::Int32, true),
        Field::new("lo_discount", DataType::Int32, false),
        Field::new("lo_revenue", DataType::Int64, false),
        Field::new("lo_orderdate", DataType::Int32, false),
        Field::new("lo_partkey", DataType::Int64, false),
        Field::new("lo_suppkey", DataType::Int32, true),
    ]));
    let d_schema = Arc::new(Schema::new(vec![
        Field::new("d_datekey", DataType::Int32, false),
        Field::new("d_year", DataType::Int32, false),
    ]));
    let d = vec![
        Arc::new(Int32Array::from(
            (0..5).map(|y| 19920101 + y * 10000).collect::<Vec<_>>(),
        )) as ArrayRef,
        Arc::new(Int32Array::from(
            (0..5).map(|y| 1992 + y).collect::<Vec<_>>(),
        )),
    ];
    let p_schema = Arc::new(Schema::new(vec![
        Field::new("p_partkey", DataType::Int64, false),
        Field::new("p_brand1", DataType::Utf8, false),
    ]));
    let p = vec![
        Arc::new(Int64Array::from(
            (1..=50)
                .map(|k| k * 1_000_003 % 1_000_000_007)
                .collect::<Vec<_>>(),
        )) as ArrayRef,
        Arc::new(StringArray::from(
            (1..=50)
                .map(|k| format!("MFGR#{}", 2200 + k % 40))
                .collect::<Vec<_>>(),
        )),
    ];
    // p_partkey values are scattered (hash table); lo_partkey points into them.
    let lo_partkey: Vec<i64> = (0..n)
        .map(|i| ((i * 13) % 50 + 1) * 1_000_003 % 1_000_000_007)
        .collect();
    let mut lo = lo;
    lo[4] = Arc::new(Int64Array::from(lo_partkey));
    let s_schema = Arc::new(Schema::new(vec![
        Field::new("s_suppkey", DataType::Int32, false),
        Field::new("s_region", DataType::Utf8, false),
    ]));
    let s = vec![
        Arc::new(Int32Array::from((1..=20).collect::<Vec<_>>())) as ArrayRef,
        Arc::new(StringArray::from(
            (1..=20)
                .map(|k| ["ASIA", "EUROPE", "AMERICA"][k % 3])
                .collect::<Vec<_>>(),
        )),
    ];
    vec![
        ("lineorder", lo_schema, lo),
        ("dwdate", d_schema, d),
        ("part", p_schema, p),
        ("supplier", s_schema, s),
    ]
}

fn register(ctx: &SessionContext) {
    for (name, schema, cols) in tables() {
        let batch = RecordBatch::try_new(Arc::clone(&schema), cols).expect("batch");
        // Two partitions of the fact table, to exercise per-partition paths.
        let parts = if name == "lineorder" {
            let h = batch.num_rows() / 2;
            vec![
                vec![batch.slice(0, h)],
                vec![batch.slice(h, batch.num_rows() - h)],
            ]
        } else {
            vec![vec![batch]]
        };
        ctx.register_table(
            name,
            Arc::new(MemTable::try_new(schema, parts).expect("memtable")),
        )
        .expect("register");
    }
}

fn gpu_ctx(present: bool) -> (SessionContext, Arc<OffloadToGpu>) {
    let rule = Arc::new(OffloadToGpu::with_forced_device(present));
    let config = SessionConfig::new()
        .with_target_partitions(2)
        .with_option_extension(GpuOptions::default());
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_physical_optimizer_rule(Arc::clone(&rule) as _)
        .build();
    let ctx = SessionContext::new_with_state(state);
    register(&ctx);
    (ctx, rule)
}

fn cpu_ctx() -> SessionContext {
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    register(&ctx);
    ctx
}

async fn plan(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
    ctx.sql(sql)
        .await
        .expect("sql")
        .create_physical_plan()
        .await
        .expect("plan")
}

fn shown(p: &Arc<dyn ExecutionPlan>) -> String {
    displayable(p.as_ref()).indent(false).to_string()
}

async fn must_equal_cpu(gpu: &SessionContext, sql: &str) {
    let want = canonical_rows(
        &cpu_ctx()
            .sql(sql)
            .await
            .expect("cpu sql")
            .collect()
            .await
            .expect("cpu run"),
    )
    .expect("rows");
    let got = canonical_rows(
        &gpu.sql(sql)
            .await
            .expect("gpu sql")
            .collect()
            .await
            .expect("gpu run"),
    )
    .expect("rows");
    assert!(!want.is_empty(), "query returns rows: {sql}");
    assert_eq!(got, want, "{sql}");
}

async fn set(ctx: &SessionContext, stmt: &str) {
    ctx.sql(stmt)
        .await
        .expect("set")
        .collect()
        .await
        .expect("set run");
}

const SCAN: &str = "select lo_quantity, lo_discount * 2 + lo_quantity as x from lineorder where lo_discount between 1 and 3 and lo_quantity < 25";
const STAR: &str = "select d_year, sum(lo_revenue) as rev, count(*) as n, min(lo_quantity) as mq, avg(lo_discount) as ad \
                    from lineorder, dwdate, part where lo_orderdate = d_datekey and lo_partkey = p_partkey \
                    group by d_year order by d_year";

#[tokio::test]
async fn scan_is_offloaded_and_falls_back_to_the_exact_cpu_answer() {
    let (ctx, rule) = gpu_ctx(true);
    set(&ctx, "SET eddy.gpu = 'on'").await;
    let p = plan(&ctx, SCAN).await;
    let text = shown(&p);
    assert!(text.contains("GpuScanExec"), "{text}");
    assert!(
        !text.contains("FilterExec"),
        "the filter was replaced: {text}"
    );
    assert!(rule
        .last_decisions()
        .iter()
        .any(|d| d.offloaded_as == Some("GpuScanExec")));
    let before = GPU_METRICS.fallbacks(FallbackReason::DeviceError);
    must_equal_cpu(&ctx, SCAN).await;
    if !eddy_gpu::discover().has_device() {
        assert!(
            GPU_METRICS.fallbacks(FallbackReason::DeviceError) > before,
            "device failure counted"
        );
    }
    // EXPLAIN shows the node.
    let explain = ctx
        .sql(&format!("EXPLAIN {SCAN}"))
        .await
        .expect("explain")
        .collect()
        .await
        .expect("run");
    let rows = canonical_rows(&explain).expect("rows").join("\n");
    assert!(rows.contains("GpuScanExec"), "{rows}");
}

#[tokio::test]
async fn star_join_and_partial_aggregate_are_offloaded_and_correct() {
    let (ctx, rule) = gpu_ctx(true);
    set(&ctx, "SET eddy.gpu = 'on'").await;
    let p = plan(&ctx, STAR).await;
    let text = shown(&p);
    // DataFusion put the intermediate join (the fact side, size unknown) on
    // the build side of the top join. The rule swaps that join's inputs
    // (the dimension becomes the build side; a fact-sized host table made
    // GpuJoin 5-7x slower than the CPU on an H100), so both levels fuse into
    // one kernel over the partitioned fact table, and the partial
    // aggregation above them into the same kernel (the round robin
    // repartition between them dropped: the fact side keeps its partitions).
    assert!(
        text.contains("GpuJoinAggExec: levels=2, gby=[d_year@"),
        "{text}"
    );
    assert!(
        !text.contains("GpuPreAggExec") && !text.contains("GpuJoinExec"),
        "fused, not two operators: {text}"
    );
    assert!(
        !text.contains("HashJoinExec"),
        "no join left on the CPU: {text}"
    );
    assert!(
        text.contains("AggregateExec: mode=Final"),
        "final aggregation stays on the CPU: {text}"
    );
    let d: Vec<Decision> = rule.last_decisions();
    assert!(
        d.iter()
            .any(|x| x.operator == "AggregateExec" && x.offloaded_as == Some("GpuJoinAggExec")),
        "{d:?}"
    );
    // Without a device the fused operator runs the CPU plan it keeps (the
    // aggregate rebuilt over the swapped joins): the same answer.
    must_equal_cpu(&ctx, STAR).await;
}

#[tokio::test]
async fn unsupported_types_stay_on_the_cpu_with_a_reason() {
    let (ctx, rule) = gpu_ctx(true);
    set(&ctx, "SET eddy.gpu = 'on'").await;
    let sql = "select s_suppkey from supplier where s_region = 'ASIA'";
    let p = plan(&ctx, sql).await;
    let text = shown(&p);
    assert!(
        text.contains("FilterExec") && !text.contains("GpuScanExec"),
        "{text}"
    );
    let d = rule.last_decisions();
    let filter = d
        .iter()
        .find(|x| x.operator == "FilterExec")
        .expect("filter considered");
    assert_eq!(filter.offloaded_as, None);
    assert_eq!(
        filter.reason.as_ref().map(|r| r.reason),
        Some(FallbackReason::UnsupportedType),
        "{d:?}"
    );
    must_equal_cpu(&ctx, sql).await;
}

#[tokio::test]
async fn auto_mode_keeps_small_inputs_on_the_cpu() {
    let (ctx, rule) = gpu_ctx(true);
    set(&ctx, "SET eddy.gpu = 'auto'").await;
    set(&ctx, "SET eddy.gpu_min_rows = 1000000").await;
    let p = plan(&ctx, SCAN).await;
    assert!(
        !shown(&p).contains("Gpu"),
        "{}\n{:?}",
        shown(&p),
        rule.last_decisions()
    );
    let d = rule.last_decisions();
    assert!(
        d.iter()
            .any(|x| x.reason.as_ref().map(|r| r.reason) == Some(FallbackReason::BelowThreshold)),
        "{d:?}"
    );
    // Lower the threshold under the input size: offloaded.
    set(&ctx, "SET eddy.gpu_min_rows = 100").await;
    assert!(shown(&plan(&ctx, SCAN).await).contains("GpuScanExec"));
}

#[tokio::test]
async fn off_mode_or_no_device_plans_nothing_on_the_gpu() {
    let (ctx, rule) = gpu_ctx(true);
    set(&ctx, "SET eddy.gpu = 'off'").await;
    assert!(!shown(&plan(&ctx, STAR).await).contains("Gpu"));
    assert!(rule.last_decisions().is_empty());
    let (ctx, _) = gpu_ctx(false);
    set(&ctx, "SET eddy.gpu = 'on'").await;
    assert!(!shown(&plan(&ctx, STAR).await).contains("Gpu"));
    must_equal_cpu(&ctx, STAR).await;
}

#[tokio::test]
async fn gpu_plans_survive_a_runtime_switch_off() {
    // Planned with the GPU on, executed after SET eddy.gpu = off: the
    // operators run their CPU subtrees directly.
    let (ctx, _) = gpu_ctx(true);
    set(&ctx, "SET eddy.gpu = 'on'").await;
    let df = ctx.sql(STAR).await.expect("sql");
    set(&ctx, "SET eddy.gpu = 'off'").await;
    let got = canonical_rows(&df.collect().await.expect("run")).expect("rows");
    let want = canonical_rows(
        &cpu_ctx()
            .sql(STAR)
            .await
            .expect("sql")
            .collect()
            .await
            .expect("run"),
    )
    .expect("rows");
    assert_eq!(got, want);
}

#[test]
fn discovery_reports_cpu_only_without_panicking() {
    let inv = eddy_gpu::discover();
    let line = inv.to_string();
    println!("{line}");
    if !eddy_gpu::device::driver_present() {
        assert!(!inv.has_device());
        assert!(line.contains("CPU-only"), "{line}");
    }
}

/// SSB Q1.1's shape: the fact side's own filter goes into the fused kernel
/// (one copy of the fact columns, no GpuScan round trip first); the CPU
/// plan the operator keeps still filters, so the answers agree.
#[tokio::test]
async fn the_fact_filter_is_fused_with_the_join_and_the_aggregate() {
    let (ctx, _rule) = gpu_ctx(true);
    set(&ctx, "SET eddy.gpu = 'on'").await;
    let sql = "select d_year, sum(lo_revenue) as rev, count(*) as n \
               from lineorder, dwdate where lo_orderdate = d_datekey \
               and lo_discount between 1 and 3 and lo_quantity < 25 \
               group by d_year order by d_year";
    let p = plan(&ctx, sql).await;
    let text = shown(&p);
    assert!(
        text.contains("GpuJoinAggExec: levels=1, fact filter=") && text.contains("lo_quantity"),
        "{text}"
    );
    assert!(
        !text.contains("FilterExec") && !text.contains("GpuScanExec"),
        "the fact filter runs in the fused kernel: {text}"
    );
    must_equal_cpu(&ctx, sql).await;
    set(&ctx, "SET eddy.gpu_fuse = off").await;
    let text = shown(&plan(&ctx, sql).await);
    assert!(
        text.contains("GpuPreAggExec") && text.contains("GpuScanExec"),
        "{text}"
    );
    must_equal_cpu(&ctx, sql).await;
}
