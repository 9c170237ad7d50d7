//! Every kernel Eddy generates, compiled for real devices on a machine
//! without a GPU: the kernels of the 13 SSB queries (plain and
//! dictionary-encoded strings), of every TPC-H query the rule offloads, of
//! the expression corpus and the golden files, each through Eddy's own NVRTC
//! path (`compile::compile_source`) for `compute_80` and `compute_90`, and
//! the PTX assembled by `ptxas` for `sm_80` and `sm_90` (register
//! allocation, shared memory and instruction selection: what a driver's JIT
//! would do on an A100 / H100).
//!
//! NVRTC and ptxas come from NVIDIA's PyPI wheels, installed into
//! `target/cuda-tools/` by `scripts/ci/install-cuda-tools.sh` (`.ci/run` does
//! this and sets `EDDY_REQUIRE_NVRTC=1`, so there a missing toolchain fails
//! the test; elsewhere it prints a notice and skips).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use eddy_gpu::codegen::kernels::{
    AggFunc, AggSpec, BuildTable, JoinKernelSpec, JoinLevelSpec, PreAggKernelSpec,
};
use eddy_gpu::codegen::KernelSource;

/// (virtual arch for NVRTC, real arch for ptxas): Ampere and Hopper.
const ARCHS: [(&str, &str); 2] = [("compute_80", "sm_80"), ("compute_90", "sm_90")];

struct Unit {
    /// Where the kernel came from (first label when deduplicated).
    label: String,
    kernel: KernelSource,
}

fn add(units: &mut BTreeMap<u64, Unit>, label: String, kernel: KernelSource) {
    units.entry(kernel.hash).or_insert(Unit { label, kernel });
}

async fn query_kernels(
    units: &mut BTreeMap<u64, Unit>,
    ctx: &datafusion::prelude::SessionContext,
    suite: &str,
    queries: &[(String, String)],
) -> Vec<String> {
    let mut offloaded = Vec::new();
    for (name, sql) in queries {
        let plan = common::plan(ctx, sql).await;
        let ks = common::planned_kernels(&plan);
        if !ks.is_empty() {
            offloaded.push(name.clone());
        }
        for k in ks {
            add(units, format!("{suite} {name} {}", k.label), k.kernel);
        }
    }
    offloaded
}

fn corpus_kernels(units: &mut BTreeMap<u64, Unit>) -> usize {
    let ctx = common::corpus_context();
    let mut supported = 0;
    for (i, (filter, projections)) in common::CORPUS.iter().enumerate() {
        match common::corpus_spec(&ctx, filter, projections).generate() {
            Ok(k) => {
                supported += 1;
                add(
                    units,
                    format!("corpus scan #{i} [{filter}] {projections:?}"),
                    k,
                );
            }
            Err(e) => eprintln!("corpus #{i} [{filter}] {projections:?}: unsupported: {e}"),
        }
    }
    let schema = common::corpus_schema();
    let p = |s: &str| common::physical(&ctx, &schema, s);
    // Partial aggregation over every accumulator kind.
    let aggs = vec![
        AggSpec {
            func: AggFunc::CountStar,
            arg: None,
        },
        AggSpec {
            func: AggFunc::Count,
            arg: Some(p("f")),
        },
        AggSpec {
            func: AggFunc::Sum,
            arg: Some(p("a")),
        },
        AggSpec {
            func: AggFunc::Sum,
            arg: Some(p("d")),
        },
        AggSpec {
            func: AggFunc::Sum,
            arg: Some(p("f")),
        },
        AggSpec {
            func: AggFunc::Min,
            arg: Some(p("c")),
        },
        AggSpec {
            func: AggFunc::Max,
            arg: Some(p("h")),
        },
        AggSpec {
            func: AggFunc::Min,
            arg: Some(p("f")),
        },
        AggSpec {
            func: AggFunc::Max,
            arg: Some(p("g")),
        },
        AggSpec {
            func: AggFunc::Avg,
            arg: Some(p("d2")),
        },
        AggSpec {
            func: AggFunc::Avg,
            arg: Some(p("f")),
        },
    ];
    for (name, keys) in [
        ("no key", vec![]),
        ("one key", vec![p("k")]),
        ("three keys", vec![p("a"), p("dt"), p("b % 3")]),
    ] {
        let k = PreAggKernelSpec {
            schema: Arc::clone(&schema),
            keys,
            aggs: aggs.clone(),
        }
        .generate()
        .expect("corpus preagg is supported");
        add(units, format!("corpus preagg ({name})"), k);
    }
    // Joins: nullable and computed probe keys, every layout.
    let keys = [p("k"), p("a"), p("cast(b as bigint) + 1")];
    for layout in common::join_layouts(keys.len()) {
        for unique in [true, false] {
            let k = JoinKernelSpec {
                schema: Arc::clone(&schema),
                levels: keys
                    .iter()
                    .zip(&layout)
                    .map(|(k, t)| JoinLevelSpec {
                        probe_key: Arc::clone(k),
                        table: *t,
                    })
                    .collect(),
                unique,
            }
            .generate()
            .expect("corpus join is supported");
            add(units, format!("corpus join {layout:?} unique={unique}"), k);
        }
    }
    let one = JoinKernelSpec {
        schema: Arc::clone(&schema),
        levels: vec![JoinLevelSpec {
            probe_key: p("k"),
            table: BuildTable::Direct,
        }],
        unique: true,
    }
    .generate()
    .expect("one-level join");
    add(units, "corpus join one level".into(), one);
    supported
}

fn golden_kernels(units: &mut BTreeMap<u64, Unit>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("golden dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    files.sort();
    for f in files {
        let source = std::fs::read_to_string(&f).expect("read golden");
        let entry = ["eddy_scan", "eddy_join", "eddy_preagg"]
            .into_iter()
            .find(|e| source.contains(&format!(" {e}(")))
            .expect("golden kernel has a known entry point");
        let hash = eddy_gpu::codegen::source_hash(&source);
        let kernel = KernelSource {
            entry,
            source,
            hash,
            params: vec![],
            columns: vec![],
            dict_params: vec![],
            outputs: vec![],
            aggs: vec![],
            shared_slots: 0,
        };
        add(
            units,
            format!("golden {}", f.file_name().expect("name").to_string_lossy()),
            kernel,
        );
    }
}

/// One kernel for each arch: NVRTC to PTX, then ptxas to SASS. The error
/// names the kernel, the arch, the compiler's log and the source. Ok(true)
/// when NVRTC fused a float multiply-add (`fma.rn.f32/f64`).
fn must_compile(unit: &Unit, ptxas: &Path, dir: &Path) -> Result<bool, String> {
    let k = &unit.kernel;
    let mut fused = false;
    for (virt, real) in ARCHS {
        let ptx = eddy_gpu::compile::compile_source(&k.source, k.entry, virt).map_err(|e| {
            format!(
                "NVRTC ({virt}) rejected {}: {e}\n--- source ---\n{}",
                unit.label, k.source
            )
        })?;
        if !ptx.contains(&format!(".entry {}", k.entry)) {
            return Err(format!(
                "PTX of {} ({virt}) has no entry {}",
                unit.label, k.entry
            ));
        }
        fused |= ptx.contains("fma.rn.f");
        let ptx_path = dir.join(format!("{:016x}-{virt}.ptx", k.hash));
        std::fs::write(&ptx_path, &ptx).map_err(|e| e.to_string())?;
        let out = std::process::Command::new(ptxas)
            .args(["-arch", real, "-O3", "--warn-on-spills", "-o"])
            .arg(dir.join(format!("{:016x}-{real}.cubin", k.hash)))
            .arg(&ptx_path)
            .output()
            .map_err(|e| format!("run ptxas: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "ptxas ({real}) rejected {}: {}{}\n--- source ---\n{}",
                unit.label,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                k.source
            ));
        }
    }
    Ok(fused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_generated_kernel_compiles_for_sm80_and_sm90() {
    let Some(tools) = common::cuda_tools() else {
        return;
    };
    let started = std::time::Instant::now();
    let mut units = BTreeMap::new();

    let ssb: Vec<(String, String)> = eddy_gpu::check::SSB_QUERIES
        .iter()
        .map(|(n, q, _)| (n.to_string(), q.to_string()))
        .collect();
    for dict in [false, true] {
        let ctx = common::ssb_session(0.01, dict).await;
        let suite = if dict { "SSB(dict)" } else { "SSB" };
        let offloaded = query_kernels(&mut units, &ctx, suite, &ssb).await;
        eprintln!("{suite}: {} of 13 queries offloaded", offloaded.len());
        assert_eq!(
            offloaded.len(),
            ssb.len(),
            "every SSB query has a GPU operator ({suite}): {offloaded:?}"
        );
    }
    let tpch: Vec<(String, String)> = eddy_bench::tpch::queries::queries(0.01)
        .into_iter()
        .map(|(n, q)| (n.to_string(), q))
        .collect();
    let ctx = common::tpch_session(0.01).await;
    let offloaded = query_kernels(&mut units, &ctx, "TPC-H", &tpch).await;
    eprintln!("TPC-H: offloaded {offloaded:?}");
    assert!(
        !offloaded.is_empty(),
        "the rule offloads part of some TPC-H query"
    );
    let supported = corpus_kernels(&mut units);
    eprintln!(
        "corpus: {supported} of {} scans supported",
        common::CORPUS.len()
    );
    golden_kernels(&mut units);
    let generated = started.elapsed();

    // Compile on every core; each NVRTC program is independent.
    let dir = tempfile::tempdir().expect("tempdir");
    let units: Vec<Unit> = units.into_values().collect();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let fused = std::sync::Mutex::new(Vec::new());
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut errs = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(u) = units.get(i) else { break };
                        match must_compile(u, &tools.ptxas, dir.path()) {
                            Ok(true) => fused.lock().expect("lock").push(u.label.clone()),
                            Ok(false) => {}
                            Err(e) => errs.push(e),
                        }
                    }
                    errs
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("compile thread"))
            .collect()
    });
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for u in &units {
        *by_kind.entry(u.kernel.entry).or_default() += 1;
    }
    eprintln!(
        "compiled {} distinct kernels ({by_kind:?}) for {:?}: generated in {:.1?}, compiled in {:.1?}",
        units.len(),
        ARCHS.map(|a| a.1),
        generated,
        started.elapsed() - generated
    );
    // NVRTC contracts float `a * b + c` into one FMA by default, so such
    // device results would differ from the CPU's in the last bit;
    // `compile.rs` passes `--fmad=false` and no kernel may fuse.
    let fused = fused.into_inner().expect("lock");
    assert!(
        fused.is_empty(),
        "{} kernels fuse float multiply-adds (results differ from the CPU's in the last bit): {fused:?}",
        fused.len()
    );
    // The first few failures in full (log and source), then one line each.
    let shown: Vec<String> = failures
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i < 3 {
                f.clone()
            } else {
                f.lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect()
            }
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} kernels failed to compile:\n{}",
        failures.len(),
        units.len(),
        shown.join("\n\n")
    );
}
