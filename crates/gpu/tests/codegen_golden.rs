//! Golden CUDA sources for representative expressions and the three
//! operator kernels. Regenerate with `EDDY_UPDATE_GOLDEN=1 cargo test -p
//! eddy-gpu --test codegen_golden`. Each source is also compiled with NVRTC
//! and with nvcc when they are present (skipped with a notice otherwise).

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::{cast, Expr};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::prelude::{col, lit, SessionContext};
use eddy_gpu::codegen::kernels::{
    AggFunc, AggSpec, BuildTable, JoinKernelSpec, JoinLevelSpec, PreAggKernelSpec, ScanKernelSpec,
};
use eddy_gpu::codegen::{ExprCompiler, KernelSource};
use eddy_gpu::FallbackReason;

fn dict() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("lo_quantity", DataType::Int32, true),
        Field::new("lo_discount", DataType::Int32, false),
        Field::new("lo_extendedprice", DataType::Decimal128(15, 2), false),
        Field::new("lo_orderdate", DataType::Date32, true),
        Field::new("s_region", dict(), true),
        Field::new("p_brand1", dict(), false),
        Field::new("lo_tax", DataType::Float64, true),
        Field::new("lo_name", DataType::Utf8, true),
        Field::new("lo_big", DataType::Decimal128(38, 2), true),
        Field::new("lo_partkey", DataType::Int64, false),
        Field::new("lo_suppkey", DataType::Int32, true),
    ]))
}

fn phys(e: Expr) -> Arc<dyn PhysicalExpr> {
    let s = schema();
    let df = DFSchema::try_from(s.as_ref().clone()).expect("dfschema");
    SessionContext::new()
        .create_physical_expr(e, &df)
        .expect("physical expr")
}

fn must_match_golden(name: &str, k: &KernelSource) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.cu"));
    let update = std::env::var_os("EDDY_UPDATE_GOLDEN").is_some();
    match std::fs::read_to_string(&path) {
        Ok(want) if !update => assert_eq!(
            k.source, want,
            "golden {name} differs; rerun with EDDY_UPDATE_GOLDEN=1 if intended"
        ),
        _ => {
            std::fs::write(&path, &k.source).expect("write golden");
            eprintln!("notice: wrote golden {}", path.display());
        }
    }
    must_compile(name, k);
}

fn must_compile(name: &str, k: &KernelSource) {
    // A host C++ compiler with CUDA stand-ins checks syntax and types
    // everywhere (CI has no CUDA compiler).
    match std::process::Command::new("c++").arg("--version").output() {
        Ok(o) if o.status.success() => {
            let dir = tempfile::tempdir().expect("tempdir");
            let cc = dir.path().join(format!("{name}.cc"));
            std::fs::write(&cc, &k.source).expect("write cc");
            let stub =
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/cuda_host_stub.h");
            let out = std::process::Command::new("c++")
                .args([
                    "-std=c++17",
                    "-fsyntax-only",
                    "-Wall",
                    "-Werror",
                    "-Wno-unused-variable",
                    "-Wno-unused-function",
                    "-include",
                ])
                .arg(&stub)
                .arg(&cc)
                .output()
                .expect("run c++");
            assert!(
                out.status.success(),
                "host C++ rejected {name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        _ => eprintln!("notice: no host C++ compiler; {name} not syntax-checked"),
    }
    if eddy_gpu::device::nvrtc_present() {
        eddy_gpu::compile::compile_source(&k.source, k.entry, "compute_75")
            .unwrap_or_else(|e| panic!("NVRTC rejected {name}: {e}"));
    } else {
        eprintln!("notice: NVRTC not present; {name} not compiled with NVRTC");
    }
    match std::process::Command::new("nvcc").arg("--version").output() {
        Ok(o) if o.status.success() => {
            let dir = tempfile::tempdir().expect("tempdir");
            let cu = dir.path().join(format!("{name}.cu"));
            std::fs::write(&cu, &k.source).expect("write cu");
            let out = std::process::Command::new("nvcc")
                .args(["--ptx", "-arch=compute_75", "-o"])
                .arg(dir.path().join(format!("{name}.ptx")))
                .arg(&cu)
                .output()
                .expect("run nvcc");
            assert!(
                out.status.success(),
                "nvcc rejected {name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        _ => eprintln!("notice: nvcc not present; {name} not compiled with nvcc"),
    }
}

#[test]
fn scan_between_and_arithmetic() {
    let spec = ScanKernelSpec {
        schema: schema(),
        filter: Some(phys(
            col("lo_discount")
                .between(lit(1), lit(3))
                .and(col("lo_quantity").lt(lit(25))),
        )),
        projections: vec![
            phys(col("lo_quantity") * lit(2) + col("lo_discount")),
            phys(col("lo_extendedprice") + col("lo_extendedprice")),
        ],
    };
    let k = spec.generate().expect("supported");
    // BETWEEN is two comparisons; the nullable column brings its bitmap.
    assert!(
        k.source.contains(">= ((int32_t)1)") && k.source.contains("<= ((int32_t)3)"),
        "{}",
        k.source
    );
    assert!(k.source.contains("eddy_is_null(valid0, row)"));
    assert!(
        !k.source.contains("valid1"),
        "non-nullable column without bitmap"
    );
    must_match_golden("scan_between_and_arithmetic", &k);
}

#[test]
fn scan_three_valued_logic_in_case_cast() {
    let case = Expr::Case(datafusion::logical_expr::Case {
        expr: None,
        when_then_expr: vec![(
            Box::new(col("lo_quantity").gt(lit(10))),
            Box::new(col("lo_tax")),
        )],
        else_expr: Some(Box::new(lit(0.0f64))),
    });
    let spec = ScanKernelSpec {
        schema: schema(),
        filter: Some(phys(
            col("lo_quantity")
                .in_list(vec![lit(1), lit(2), lit(3)], false)
                .or(col("lo_orderdate").is_null())
                .and(datafusion::logical_expr::not(col("lo_tax").gt(lit(0.5)))),
        )),
        projections: vec![phys(case), phys(cast(col("lo_discount"), DataType::Int64))],
    };
    let k = spec.generate().expect("supported");
    must_match_golden("scan_three_valued_logic_in_case_cast", &k);
}

#[test]
fn dictionary_predicates_become_code_tests() {
    let regions: ArrayRef = Arc::new(StringArray::from(vec![
        "AFRICA",
        "AMERICA",
        "ANTARCTICA",
        "ASIA",
        "EUROPE",
    ]));
    let brands: ArrayRef = Arc::new(StringArray::from(vec![
        "MFGR#111",
        "MFGR#119",
        "MFGR#121",
        "MFGR#122",
        "MFGR#1221",
        "MFGR#13",
        "MFGR#21",
    ]));
    let s = schema();
    let mut cx = ExprCompiler::new(&s)
        .with_static_dictionary(4, regions)
        .with_static_dictionary(5, brands);
    let v = cx
        .compile(&phys(col("s_region").eq(lit("ASIA"))))
        .expect("region");
    assert!(
        cx.compiled().body.contains("(c4 == 3)"),
        "{}",
        cx.compiled().body
    );
    assert_eq!(v.ty, eddy_gpu::codegen::DevType::Bool);
    cx.compile(&phys(col("p_brand1").like(lit("MFGR#12%"))))
        .expect("like");
    assert!(
        cx.compiled().body.contains("(c5 >= 2 && c5 <= 4)"),
        "{}",
        cx.compiled().body
    );
    cx.compile(&phys(
        col("s_region").in_list(vec![lit("AFRICA"), lit("EUROPE")], false),
    ))
    .expect("in");
    assert!(
        cx.compiled().body.contains("(c4 == 0 || c4 == 4)"),
        "{}",
        cx.compiled().body
    );
    cx.compile(&phys(
        col("p_brand1").between(lit("MFGR#2221"), lit("MFGR#2228")),
    ))
    .expect("between");
    assert!(cx.compiled().dict_params.is_empty());

    // Without a dictionary at generation time the code sets are parameters.
    let spec = ScanKernelSpec {
        schema: schema(),
        filter: Some(phys(
            col("s_region")
                .eq(lit("ASIA"))
                .and(col("p_brand1").like(lit("MFGR#12%"))),
        )),
        projections: vec![],
    };
    let k = spec.generate().expect("supported");
    assert_eq!(k.dict_params.len(), 2);
    must_match_golden("scan_dictionary_per_batch", &k);
}

#[test]
fn dictionary_code_sets_follow_datafusion_semantics() {
    let s = schema();
    let values: ArrayRef = Arc::new(StringArray::from(vec![Some("ASIA"), Some("EUROPE")]));
    let e = phys(col("s_region").not_eq(lit("ASIA")));
    let set = eddy_gpu::codegen::dict::evaluate_on_dictionary(&e, &s, 4, &values).expect("eval");
    assert_eq!(set.true_codes(), vec![1]);
    assert_eq!(set.null_row, None, "NULL <> 'ASIA' is NULL");
    let e = phys(col("s_region").is_null());
    let set = eddy_gpu::codegen::dict::evaluate_on_dictionary(&e, &s, 4, &values).expect("eval");
    assert!(set.true_codes().is_empty());
    assert_eq!(set.null_row, Some(true));
}

#[test]
fn unsupported_expressions_have_typed_reasons() {
    let s = schema();
    let cases: Vec<(Expr, FallbackReason)> = vec![
        (col("lo_name").eq(lit("x")), FallbackReason::UnsupportedType),
        (
            col("lo_big").gt(lit(ScalarValue::Decimal128(Some(1), 38, 2))),
            FallbackReason::UnsupportedType,
        ),
        (
            datafusion::functions::math::expr_fn::abs(col("lo_tax")).gt(lit(1.0)),
            FallbackReason::UnsupportedExpr,
        ),
    ];
    for (e, want) in cases {
        let mut cx = ExprCompiler::new(&s);
        let err = cx.compile(&phys(e.clone())).expect_err("unsupported");
        assert_eq!(err.reason, want, "{e}: {err}");
    }
}

#[test]
fn star_join_kernels() {
    let s = schema();
    let levels = vec![
        JoinLevelSpec {
            probe_key: phys(col("lo_orderdate")),
            table: BuildTable::Direct,
        },
        JoinLevelSpec {
            probe_key: phys(col("lo_partkey")),
            table: BuildTable::Hash,
        },
        JoinLevelSpec {
            probe_key: phys(col("lo_suppkey")),
            table: BuildTable::Direct,
        },
    ];
    let unique = JoinKernelSpec {
        schema: Arc::clone(&s),
        levels: levels.clone(),
        unique: true,
    }
    .generate()
    .expect("join");
    assert_eq!(
        unique.source.matches("__global__").count(),
        1,
        "all levels in one kernel"
    );
    assert!(
        !unique.source.contains("__syncthreads")
            && !unique.source.contains("grid.sync")
            && !unique.source.contains("<<<")
    );
    must_match_golden("join_star_unique", &unique);
    let multi = JoinKernelSpec {
        schema: s,
        levels,
        unique: false,
    }
    .generate()
    .expect("join");
    assert!(multi.source.contains("atomicAdd(out_count"));
    must_match_golden("join_star_multi", &multi);
}

#[test]
fn preagg_kernel() {
    let spec = PreAggKernelSpec {
        schema: schema(),
        keys: vec![phys(col("lo_orderdate")), phys(col("lo_quantity"))],
        aggs: vec![
            AggSpec {
                func: AggFunc::Sum,
                arg: Some(phys(col("lo_extendedprice"))),
            },
            AggSpec {
                func: AggFunc::CountStar,
                arg: None,
            },
            AggSpec {
                func: AggFunc::Min,
                arg: Some(phys(col("lo_discount"))),
            },
            AggSpec {
                func: AggFunc::Avg,
                arg: Some(phys(col("lo_tax"))),
            },
            AggSpec {
                func: AggFunc::Max,
                arg: Some(phys(col("lo_tax"))),
            },
        ],
    };
    let k = spec.generate().expect("preagg");
    assert!(
        k.source.contains("__shared__"),
        "pre-aggregates in shared memory"
    );
    assert!(!k.source.contains("grid.sync") && !k.source.contains("cudaDeviceSynchronize"));
    assert_eq!(
        k.aggs.iter().map(|a| a.words).sum::<usize>(),
        3 + 1 + 2 + 2 + 2
    );
    must_match_golden("preagg_group_by", &k);
}

#[test]
fn source_hash_is_stable() {
    assert_eq!(eddy_gpu::codegen::source_hash(""), 0xcbf2_9ce4_8422_2325);
    let a = ScanKernelSpec {
        schema: schema(),
        filter: Some(phys(col("lo_discount").gt(lit(1)))),
        projections: vec![],
    };
    assert_eq!(a.generate().expect("a").hash, a.generate().expect("a").hash);
}
