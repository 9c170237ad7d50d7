//! What the GPU-less kernel checks share (`kernels_compile.rs`,
//! `kernels_emulated.rs`): the CUDA tools from `target/cuda-tools/`, real
//! plans over SSB and TPC-H data with the rule forced "device present", the
//! kernels of every `Gpu*Exec` in a plan, and the expression corpus.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use eddy_gpu::codegen::kernels::BuildTable;
use eddy_gpu::codegen::KernelSource;
use eddy_gpu::{GpuJoinAggExec, GpuJoinExec, GpuOptions, GpuPreAggExec, GpuScanExec, OffloadToGpu};

/// NVRTC and ptxas as `scripts/ci/install-cuda-tools.sh` lays them out.
pub struct CudaTools {
    pub ptxas: PathBuf,
}

/// `EDDY_CUDA_TOOLS`, else `<repo>/target/cuda-tools`.
pub fn cuda_tools_dir() -> PathBuf {
    match std::env::var_os("EDDY_CUDA_TOOLS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/cuda-tools"),
    }
}

/// Whether a missing toolchain must fail the test (CI sets it).
pub fn required() -> bool {
    std::env::var_os("EDDY_REQUIRE_NVRTC").is_some_and(|v| v != "0")
}

/// Loads the wheel's libnvrtc before cudarc looks for it, and finds ptxas.
/// cudarc opens NVRTC by name (`libnvrtc.so.12` among others) and glibc
/// answers a name with a library already loaded under that soname, so
/// opening it once by path here is enough; LD_LIBRARY_PATH is not needed.
/// None (after a notice) when the tools are not installed and not required.
pub fn cuda_tools() -> Option<CudaTools> {
    let dir = cuda_tools_dir();
    let lib = dir.join("lib/libnvrtc.so.12");
    let ptxas = dir.join("bin/ptxas");
    if lib.exists() {
        // SAFETY: loading NVIDIA's NVRTC runs only its own initialisers; the
        // handle is leaked on purpose so the library stays for cudarc.
        match unsafe { libloading::Library::new(&lib) } {
            Ok(l) => std::mem::forget(l),
            Err(e) => eprintln!("notice: cannot load {}: {e}", lib.display()),
        }
    }
    let have_nvrtc = eddy_gpu::device::nvrtc_present();
    let have_ptxas = std::process::Command::new(&ptxas)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if have_nvrtc && have_ptxas {
        return Some(CudaTools { ptxas });
    }
    let why = format!(
        "CUDA tools missing (nvrtc: {have_nvrtc}, ptxas: {have_ptxas}) under {}; run scripts/ci/install-cuda-tools.sh",
        dir.display()
    );
    assert!(!required(), "EDDY_REQUIRE_NVRTC is set: {why}");
    eprintln!("notice: {why}; kernels not compiled for devices");
    None
}

/// A session with the rule forced "device present" and `eddy.gpu = on`.
pub async fn gpu_session() -> SessionContext {
    let rule = Arc::new(OffloadToGpu::with_forced_device(true));
    let config = SessionConfig::new()
        .with_target_partitions(2)
        .with_option_extension(GpuOptions::default());
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_physical_optimizer_rule(rule as _)
        .build();
    let ctx = SessionContext::new_with_state(state);
    set(&ctx, "SET eddy.gpu = 'on'").await;
    ctx
}

/// Runs a statement that returns nothing (SET).
pub async fn set(ctx: &SessionContext, stmt: &str) {
    ctx.sql(stmt)
        .await
        .expect("set")
        .collect()
        .await
        .expect("set run");
}

fn dictionary_strings(batch: &RecordBatch) -> RecordBatch {
    let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 => Field::new(f.name(), dict.clone(), f.is_nullable()),
            _ => f.as_ref().clone(),
        })
        .collect();
    let cols: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .zip(&fields)
        .map(|(c, f)| cast(c, f.data_type()).expect("cast"))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).expect("batch")
}

fn register(ctx: &SessionContext, name: &str, batches: Vec<RecordBatch>, dict: bool) {
    let batches: Vec<RecordBatch> = if dict {
        batches.iter().map(dictionary_strings).collect()
    } else {
        batches
    };
    let schema = batches.first().expect("rows").schema();
    // Two partitions, as the real plans have several.
    let mut parts = vec![Vec::new(), Vec::new()];
    for (i, b) in batches.into_iter().enumerate() {
        parts[i % 2].push(b);
    }
    parts.retain(|p| !p.is_empty());
    ctx.register_table(
        name,
        Arc::new(MemTable::try_new(schema, parts).expect("memtable")),
    )
    .expect("register");
}

/// SSB at scale factor `sf` (the `date` table registered as `dwdate`, as
/// the check's queries name it); strings dictionary-encoded when `dict`.
pub async fn ssb_session(sf: f64, dict: bool) -> SessionContext {
    use eddy_bench::ssb::{SsbGenerator, SsbOptions};
    let ctx = gpu_session().await;
    let g = SsbGenerator::new(SsbOptions {
        sf,
        batch_rows: 8192,
        ..Default::default()
    })
    .expect("ssb generator");
    for t in eddy_bench::ssb::TABLES {
        let name = if t == "date" { "dwdate" } else { t };
        register(&ctx, name, g.generate_table(t).expect("ssb table"), dict);
    }
    ctx
}

/// TPC-H at scale factor `sf`.
pub async fn tpch_session(sf: f64) -> SessionContext {
    let ctx = gpu_session().await;
    let g = eddy_bench::tpch::TpchGenerator::new(sf).expect("tpch generator");
    for t in eddy_bench::tpch::TABLES {
        register(&ctx, t, g.generate_table(t).expect("tpch table"), false);
    }
    ctx
}

/// The physical plan of `sql` (the last statement of it).
pub async fn plan(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
    ctx.sql(sql)
        .await
        .unwrap_or_else(|e| panic!("sql {sql}: {e}"))
        .create_physical_plan()
        .await
        .unwrap_or_else(|e| panic!("plan {sql}: {e}"))
}

/// One generated kernel of a plan, labelled by operator and variant.
pub struct PlannedKernel {
    pub label: String,
    pub kernel: KernelSource,
}

/// Join table layouts a GpuJoinExec may pick at run time for `levels`
/// levels: all direct-mapped, all hashed, and alternating (both phases).
pub fn join_layouts(levels: usize) -> Vec<Vec<BuildTable>> {
    let alt = |first: bool| {
        (0..levels)
            .map(|l| {
                if (l % 2 == 0) == first {
                    BuildTable::Direct
                } else {
                    BuildTable::Hash
                }
            })
            .collect::<Vec<_>>()
    };
    let mut v = vec![
        vec![BuildTable::Direct; levels],
        vec![BuildTable::Hash; levels],
        alt(true),
        alt(false),
    ];
    v.dedup();
    v.sort_by_key(|l| format!("{l:?}"));
    v.dedup();
    v
}

/// Every kernel of every `Gpu*Exec` in `plan` (joins: every table layout,
/// unique and many-match variants).
pub fn planned_kernels(plan: &Arc<dyn ExecutionPlan>) -> Vec<PlannedKernel> {
    let mut out = Vec::new();
    collect(plan, &mut out);
    out
}

fn collect(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<PlannedKernel>) {
    if let Some(s) = plan.downcast_ref::<GpuScanExec>() {
        out.push(PlannedKernel {
            label: "GpuScanExec".into(),
            kernel: s.kernel().clone(),
        });
    } else if let Some(p) = plan.downcast_ref::<GpuPreAggExec>() {
        out.push(PlannedKernel {
            label: "GpuPreAggExec".into(),
            kernel: p.kernel().clone(),
        });
    } else if let Some(f) = plan.downcast_ref::<GpuJoinAggExec>() {
        for layout in join_layouts(f.levels()) {
            let k = f
                .kernel_for(&layout)
                .unwrap_or_else(|e| panic!("planned fused join has no kernel: {e}"));
            out.push(PlannedKernel {
                label: format!("GpuJoinAggExec{layout:?}"),
                kernel: k,
            });
        }
    } else if let Some(j) = plan.downcast_ref::<GpuJoinExec>() {
        for layout in join_layouts(j.levels()) {
            for unique in [true, false] {
                let k = j
                    .kernel_for(&layout, unique)
                    .unwrap_or_else(|e| panic!("planned join has no kernel: {e}"));
                out.push(PlannedKernel {
                    label: format!("GpuJoinExec{layout:?}{}", if unique { "" } else { "*" }),
                    kernel: k,
                });
            }
        }
    }
    for c in plan.children() {
        collect(c, out);
    }
}

// ---------------------------------------------------------------------------
// The expression corpus: a batch with NULLs and edge values in every type
// the code generator supports, and filters / projections over it in SQL.

/// The corpus schema (names are what the SQL below refers to).
pub fn corpus_schema() -> Arc<Schema> {
    let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Int32, false),
        Field::new("c", DataType::Int64, true),
        Field::new("e", DataType::Int64, false),
        Field::new("h", DataType::Int16, true),
        Field::new("t", DataType::Int8, false),
        Field::new("u", DataType::UInt32, true),
        Field::new("f", DataType::Float64, true),
        Field::new("g", DataType::Float32, false),
        Field::new("d", DataType::Decimal128(15, 2), true),
        Field::new("d2", DataType::Decimal128(15, 2), false),
        Field::new("dt", DataType::Date32, true),
        Field::new("flag", DataType::Boolean, true),
        Field::new("s", dict, true),
        Field::new("z", DataType::Int32, false),
        Field::new("k", DataType::Int64, false),
    ]))
}

/// `rows` rows of the corpus. Row i is a pure function of i, with NULLs at
/// co-prime periods so every combination of NULL operands occurs; `b` and
/// `e` hold zeros and -1 (division errors), `c` the extremes of int64.
pub fn corpus_batch(rows: usize) -> RecordBatch {
    use arrow::array::{
        BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float32Array, Float64Array,
        Int16Array, Int32Array, Int64Array, Int8Array, StringArray, UInt32Array,
    };
    use arrow::datatypes::Int32Type;
    let n = rows as i64;
    let a = Int32Array::from(
        (0..n)
            .map(|i| (i % 7 != 3).then_some((i % 97 - 48) as i32))
            .collect::<Vec<_>>(),
    );
    let b = Int32Array::from((0..n).map(|i| (i % 5 - 2) as i32).collect::<Vec<_>>());
    let c = Int64Array::from(
        (0..n)
            .map(|i| match i % 11 {
                0 => None,
                1 => Some(i64::MAX),
                2 => Some(i64::MIN),
                3 => Some(-1),
                4 => Some(i64::MAX / 3 + i),
                _ => Some(i * 1_000_003 - 7_000_000),
            })
            .collect::<Vec<_>>(),
    );
    let e = Int64Array::from((0..n).map(|i| i % 3 - 1).collect::<Vec<_>>());
    let h = Int16Array::from(
        (0..n)
            .map(|i| match i % 13 {
                0 => None,
                1 => Some(i16::MAX),
                2 => Some(i16::MIN),
                _ => Some((i % 300 - 150) as i16),
            })
            .collect::<Vec<_>>(),
    );
    let t = Int8Array::from((0..n).map(|i| (i % 256 - 128) as i8).collect::<Vec<_>>());
    let u = UInt32Array::from(
        (0..n)
            .map(|i| {
                (i % 17 != 5).then_some(if i % 4 == 0 {
                    u32::MAX - i as u32
                } else {
                    i as u32
                })
            })
            .collect::<Vec<_>>(),
    );
    let f = Float64Array::from(
        (0..n)
            .map(|i| match i % 19 {
                0 => None,
                1 => Some(0.0),
                2 => Some(-0.0),
                3 => Some(1e300),
                _ => Some((i as f64 - 1000.0) / 8.0),
            })
            .collect::<Vec<_>>(),
    );
    let g = Float32Array::from(
        (0..n)
            .map(|i| (i % 101) as f32 * 0.25 - 10.0)
            .collect::<Vec<_>>(),
    );
    let d = Decimal128Array::from(
        (0..n)
            .map(|i| (i % 9 != 4).then_some(i as i128 * 137 - 150_000))
            .collect::<Vec<_>>(),
    )
    .with_precision_and_scale(15, 2)
    .expect("decimal");
    let d2 = Decimal128Array::from(
        (0..n)
            .map(|i| (i % 1000) as i128 * 25 + 1)
            .collect::<Vec<_>>(),
    )
    .with_precision_and_scale(15, 2)
    .expect("decimal");
    let dt = Date32Array::from(
        (0..n)
            .map(|i| (i % 23 != 0).then_some(8035 + (i * 37 % 2600) as i32))
            .collect::<Vec<_>>(),
    );
    let flag = BooleanArray::from(
        (0..n)
            .map(|i| (i % 3 != 0).then_some(i % 2 == 0))
            .collect::<Vec<_>>(),
    );
    let values = StringArray::from(vec!["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]);
    let keys = Int32Array::from(
        (0..n)
            .map(|i| (i % 6 != 1).then_some((i * 7 % 5) as i32))
            .collect::<Vec<_>>(),
    );
    let s = DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values)).expect("dictionary");
    let z = Int32Array::from(
        (0..n)
            .map(|i| (i % 9 + 1) as i32 * if i % 2 == 0 { 1 } else { -1 })
            .collect::<Vec<_>>(),
    );
    let k = Int64Array::from((0..n).map(|i| i * 7 % 61).collect::<Vec<_>>());
    let cols: Vec<ArrayRef> = vec![
        Arc::new(a),
        Arc::new(b),
        Arc::new(c),
        Arc::new(e),
        Arc::new(h),
        Arc::new(t),
        Arc::new(u),
        Arc::new(f),
        Arc::new(g),
        Arc::new(d),
        Arc::new(d2),
        Arc::new(dt),
        Arc::new(flag),
        Arc::new(s),
        Arc::new(z),
        Arc::new(k),
    ];
    RecordBatch::try_new(corpus_schema(), cols).expect("corpus batch")
}

/// (filter, projections) in SQL over [`corpus_schema`]; an empty filter
/// means none. Each is one GpuScan kernel.
pub const CORPUS: &[(&str, &[&str])] = &[
    // Comparisons, BETWEEN, three-valued AND / OR / NOT.
    ("a > 10", &["a + b", "a - b", "a * b"]),
    ("a between -5 and 20 and b < 1", &["a * 3 - b"]),
    ("a < 0 or flag", &["c + e"]),
    ("not (a > 0 and flag)", &[]),
    ("(a > 0) is null", &["b"]),
    ("a is not null and c is null", &["b * 2"]),
    ("flag or a is null", &[]),
    ("not flag", &[]),
    ("flag = (a > 3)", &[]),
    // Wrapping integer arithmetic at the edges of int64 / int16 / int8.
    ("", &["c + c", "c - e", "c * 3", "-c"]),
    ("", &["h + h", "h * h", "-h"]),
    ("", &["t + t", "t * t"]),
    ("u > 100", &["u + u", "u * 2"]),
    // Division and remainder: by zero and MIN / -1 are errors.
    ("", &["a / z", "a % z", "c / z"]),
    ("", &["a / b"]),
    ("", &["a % b"]),
    ("", &["c / e"]),
    ("b <> 0", &["a / b"]),
    ("", &["case when b <> 0 then a / b else -1 end"]),
    ("e <> 0 and c > 0", &["c / e", "c % e"]),
    // Floats.
    ("f > 1.5", &["f * 2.0 + 1.0", "f / f", "f - g"]),
    ("g < 0", &["g * g"]),
    ("", &["g / 2"]),
    ("", &["f % 3.0"]),
    // Decimals.
    ("d > d2", &["d + d2", "d - d2"]),
    ("d is not null", &["d * d2"]),
    ("d between 10.00 and 1000.00", &["d"]),
    ("", &["d * 2"]),
    ("d2 < 100", &["d2 + 1.5"]),
    (
        "d <= d2 or d is null",
        &["cast(d as decimal(18, 2)) * cast(2 as decimal(3, 0))"],
    ),
    // Dates.
    ("dt >= date '1995-01-01' and dt < date '1996-01-01'", &["a"]),
    ("dt is null or dt > date '1998-06-30'", &[]),
    // IN lists with and without NULL.
    ("a in (1, 2, 3, -48)", &[]),
    ("a not in (1, 2, 3)", &[]),
    ("a in (1, null)", &[]),
    ("a not in (1, null)", &[]),
    ("b in (0, 2)", &["b + 1"]),
    // CASE, both forms, with NULL branches.
    ("", &["case when a > 0 then a when a < -10 then -a end"]),
    ("", &["case b when 0 then 100 when 1 then 200 else a end"]),
    ("case when flag then a > 0 else b = 0 end", &[]),
    ("", &["case when d > 0 then d else d2 end"]),
    // Casts that widen.
    (
        "",
        &["cast(a as bigint) * 100000", "cast(a as double) / 3.0"],
    ),
    ("", &["cast(h as int) + b", "cast(t as bigint)"]),
    ("", &["cast(a as decimal(12, 2)) + d2"]),
    // Dictionary strings.
    ("s = 'ASIA'", &["a"]),
    ("s <> 'ASIA'", &[]),
    ("s in ('ASIA', 'EUROPE')", &[]),
    ("s like 'A%'", &[]),
    ("s between 'AMERICA' and 'EUROPE'", &[]),
    ("s is null", &[]),
    ("s = 'ASIA' or a > 40", &[]),
    // Booleans mixed with everything.
    ("flag and s = 'EUROPE' and d is not null", &["c + 1"]),
    // Eddy's checked arithmetic, as its SQL layer plans `+ - *` on
    // integers and `+ - * /` on floats (the CPU side runs eddy-sql's own
    // functions; see `corpus_context`): values where nothing fails, the
    // kernel's error flag where the CPU raises 22003 or 22012.
    (
        "",
        &[
            "eddy_int_add(a, b)",
            "eddy_int_sub(a, b)",
            "eddy_int_mul(a, b)",
        ],
    ),
    ("c > 0 and c < 1000000000", &["eddy_int_mul(c, c)"]),
    ("", &["eddy_int_add(c, e)"]),
    ("", &["eddy_int_mul(c, c)"]),
    (
        "",
        &[
            "eddy_float_add(f, f)",
            "eddy_float_sub(f, f)",
            "eddy_float_mul(g, g)",
        ],
    ),
    ("f <> 0", &["eddy_float_div(f, f)"]),
    (
        "g <> 0",
        &["eddy_float_div(g, g)", "eddy_float_div(cast(1 as real), g)"],
    ),
    ("", &["eddy_float_mul(f, f)"]),
    ("", &["eddy_float_div(f, f)"]),
    ("", &["eddy_float_mul(f, cast('5e-324' as double))"]),
];

/// A physical expression from SQL over `schema`, as the planner makes it:
/// type coercion, then the logical simplifier (constant folding: `date
/// '1995-01-01'` becomes a Date32 literal, `CAST(NULL AS BIGINT)` a typed
/// NULL), then the physical planner.
pub fn physical(
    ctx: &SessionContext,
    schema: &Arc<Schema>,
    sql: &str,
) -> Arc<dyn datafusion::physical_expr::PhysicalExpr> {
    use datafusion::logical_expr::simplify::SimplifyContext;
    use datafusion::optimizer::simplify_expressions::ExprSimplifier;
    let df = Arc::new(
        datafusion::common::DFSchema::try_from(schema.as_ref().clone()).expect("dfschema"),
    );
    let e = ctx
        .parse_sql_expr(sql, &df)
        .unwrap_or_else(|e| panic!("parse {sql}: {e}"));
    let simplifier = ExprSimplifier::new(
        SimplifyContext::builder()
            .with_schema(Arc::clone(&df))
            .build(),
    );
    let e = simplifier
        .coerce(e, &df)
        .and_then(|e| simplifier.simplify(e))
        .unwrap_or_else(|e| panic!("simplify {sql}: {e}"));
    ctx.create_physical_expr(e, &df)
        .unwrap_or_else(|e| panic!("physical {sql}: {e}"))
}

/// The context the corpus is parsed in: DataFusion's functions and Eddy's
/// checked arithmetic (`eddy_int_*`, `eddy_float_*`), so entries can name
/// the forms Eddy's SQL layer plans and the CPU side evaluates them with
/// eddy-sql's own implementations.
pub fn corpus_context() -> SessionContext {
    let ctx = SessionContext::new();
    for f in eddy_sql::checked_arith::checked_functions() {
        ctx.register_udf(f.as_ref().clone());
    }
    ctx
}

/// The scan kernel spec of one corpus entry.
pub fn corpus_spec(
    ctx: &SessionContext,
    filter: &str,
    projections: &[&str],
) -> eddy_gpu::codegen::ScanKernelSpec {
    let schema = corpus_schema();
    eddy_gpu::codegen::ScanKernelSpec {
        schema: Arc::clone(&schema),
        filter: (!filter.is_empty()).then(|| physical(ctx, &schema, filter)),
        projections: projections
            .iter()
            .map(|p| physical(ctx, &schema, p))
            .collect(),
    }
}
