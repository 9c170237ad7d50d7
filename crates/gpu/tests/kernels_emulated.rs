//! The generated kernels executed on the CPU (`tests/emulation/`) over the
//! buffers the device path would copy, and their answers compared with
//! DataFusion's: GpuScan over the expression corpus (NULLs, wrapping and
//! overflow, division by zero, decimals, dates, dictionary strings),
//! GpuPreAgg (shared-memory table, global fall-through, overflow) and
//! GpuJoin (direct and hashed tables, unique and many-match outputs).
//!
//! Needs a C++ compiler (`c++`); without one it prints a notice and skips
//! (fails when `EDDY_REQUIRE_NVRTC` is set, as in CI). No GPU, no CUDA.

mod common;
mod emulation;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::prelude::SessionContext;
use eddy_gpu::codegen::dict::{evaluate_on_dictionary, DictSet};
use eddy_gpu::codegen::kernels::{
    AggFunc, AggSpec, BuildTable, JoinKernelSpec, JoinLevelSpec, Param, PreAggKernelSpec,
    BLOCK_THREADS,
};
use eddy_gpu::codegen::{DevType, KernelSource};
use eddy_gpu::datapath::host_column;
use eddy_gpu::exec::join::HostTable;
use emulation::{Arg, EmuKernel};

/// Rows of the corpus batch: not a multiple of 32 or 8, so the last warp
/// and the last bitmap byte are partial.
const ROWS: usize = 3001;
/// Blocks per launch: fewer than the rows need, so every thread loops
/// (grid-stride) several times.
const GRID: u32 = 3;

/// The arguments every kernel shares (inputs and dictionary code sets), as
/// `exec::stage_batch` / `common_arg` build them.
fn input_arg(p: &Param, k: &KernelSource, batch: &RecordBatch, sets: &[DictSet]) -> Option<Arg> {
    let col = |i: usize| {
        let ty = k
            .columns
            .iter()
            .find(|c| c.index == i)
            .expect("column use")
            .ty;
        host_column(batch.column(i), ty).expect("device layout")
    };
    let words = |w: Vec<u32>| -> Vec<u8> { w.iter().flat_map(|x| x.to_le_bytes()).collect() };
    Some(match p {
        Param::Rows => Arg::Scalar(batch.num_rows() as u64),
        Param::Column(i) => Arg::bytes(&col(*i).values),
        Param::Validity(i) => match col(*i).validity {
            Some(v) => Arg::bytes(&v),
            None => Arg::Null,
        },
        Param::DictTrue(d) => Arg::bytes(&words(sets[*d].truth_words())),
        Param::DictNull(d) => Arg::bytes(&words(sets[*d].null_words())),
        Param::DictNullRowVal(d) => Arg::Scalar(u64::from(sets[*d].null_row == Some(true))),
        Param::DictNullRowNull(d) => Arg::Scalar(u64::from(sets[*d].null_row.is_none())),
        _ => return None,
    })
}

fn dict_sets(k: &KernelSource, batch: &RecordBatch) -> Vec<DictSet> {
    k.dict_params
        .iter()
        .map(|d| {
            let values = batch.column(d.column).as_any_dictionary().values().clone();
            evaluate_on_dictionary(&d.predicate, batch.schema().as_ref(), d.column, &values)
                .expect("code set")
        })
        .collect()
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().expect("4 bytes"))
}
fn i32_at(b: &[u8], i: usize) -> i32 {
    u32_at(b, i) as i32
}
fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

/// Device bytes of one value of `ty` (the width the kernel writes).
fn width(ty: DevType) -> usize {
    ty.width()
}

/// Whether two device values are the same answer: bit-equal, or both NaN.
fn same_value(ty: DevType, a: &[u8], b: &[u8]) -> bool {
    match ty {
        DevType::F64 => {
            let (x, y) = (
                f64::from_le_bytes(a.try_into().expect("8")),
                f64::from_le_bytes(b.try_into().expect("8")),
            );
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        DevType::F32 => {
            let (x, y) = (
                f32::from_le_bytes(a.try_into().expect("4")),
                f32::from_le_bytes(b.try_into().expect("4")),
            );
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        _ => a == b,
    }
}

/// What DataFusion answers for one scan: the kept rows and the projections
/// over them, or its error.
fn cpu_scan(
    batch: &RecordBatch,
    filter: Option<&Arc<dyn PhysicalExpr>>,
    projections: &[Arc<dyn PhysicalExpr>],
) -> Result<(Vec<bool>, Vec<ArrayRef>), String> {
    let keep: Vec<bool> = match filter {
        Some(f) => {
            let v = f
                .evaluate(batch)
                .and_then(|v| v.into_array(batch.num_rows()))
                .map_err(|e| e.to_string())?;
            let b = v.as_boolean();
            (0..b.len()).map(|i| b.is_valid(i) && b.value(i)).collect()
        }
        None => vec![true; batch.num_rows()],
    };
    let kept =
        filter_record_batch(batch, &BooleanArray::from(keep.clone())).map_err(|e| e.to_string())?;
    let mut outs = Vec::new();
    for p in projections {
        outs.push(
            p.evaluate(&kept)
                .and_then(|v| v.into_array(kept.num_rows()))
                .map_err(|e| e.to_string())?,
        );
    }
    Ok((keep, outs))
}

/// Runs one scan kernel on the emulator; returns (keep bits, outputs as
/// (values, valid bytes) per projection, error flag).
#[allow(clippy::type_complexity)]
fn emulate_scan(
    k: &KernelSource,
    emu: &EmuKernel,
    batch: &RecordBatch,
    grid: u32,
) -> (Vec<bool>, Vec<(Vec<u8>, Vec<u8>)>, bool) {
    let n = batch.num_rows();
    let sets = dict_sets(k, batch);
    let mut args: Vec<Arg> = k
        .params
        .iter()
        .map(|p| {
            input_arg(p, k, batch, &sets).unwrap_or_else(|| match p {
                Param::KeepBits => Arg::zeroed(n.div_ceil(32) * 4),
                Param::OutValues(j) => Arg::zeroed(n * width(k.outputs[*j])),
                Param::OutValid(_) => Arg::zeroed(n),
                Param::Err => Arg::zeroed(4),
                other => panic!("scan parameter {other:?}"),
            })
        })
        .collect();
    emu.launch(&mut args, grid, BLOCK_THREADS)
        .unwrap_or_else(|e| panic!("emulator: {e}"));
    let pos = |want: &Param| k.params.iter().position(|p| p == want).expect("param");
    let bits = args[pos(&Param::KeepBits)].as_bytes();
    let keep = (0..n)
        .map(|r| (u32_at(bits, r / 32) >> (r % 32)) & 1 == 1)
        .collect();
    let outs = (0..k.outputs.len())
        .map(|j| {
            (
                args[pos(&Param::OutValues(j))].as_bytes()[..n * width(k.outputs[j])].to_vec(),
                args[pos(&Param::OutValid(j))].as_bytes()[..n].to_vec(),
            )
        })
        .collect();
    let err = u32_at(args[pos(&Param::Err)].as_bytes(), 0) != 0;
    (keep, outs, err)
}

/// The corpus batch, and a slice of it starting at a bit offset (the
/// device layout re-aligns validity bitmaps then).
fn corpus_batches() -> Vec<(&'static str, RecordBatch)> {
    let full = common::corpus_batch(ROWS + 13);
    vec![
        ("batch", full.slice(0, ROWS)),
        ("slice@13", full.slice(13, ROWS)),
    ]
}

/// Compares one corpus scan; returns a description of each difference.
fn check_scan(
    label: &str,
    k: &KernelSource,
    emu: &EmuKernel,
    batch: &RecordBatch,
    filter: Option<&Arc<dyn PhysicalExpr>>,
    projections: &[Arc<dyn PhysicalExpr>],
    grid: u32,
) -> Vec<String> {
    let (keep, outs, err) = emulate_scan(k, emu, batch, grid);
    let mut diffs = Vec::new();
    match cpu_scan(batch, filter, projections) {
        Err(e) => {
            if !err {
                diffs.push(format!(
                    "{label}: DataFusion raises `{e}` but the kernel flags no error (the GPU would answer)"
                ));
            }
        }
        Ok(_) if err => {
            // The host would rerun the batch on the CPU (same answer), but a
            // kernel that flags an error the CPU plan does not raise never
            // succeeds on the device: projections must only see kept rows.
            diffs.push(format!(
                "{label}: kernel flags an error DataFusion does not raise"
            ));
        }
        Ok((want_keep, want_outs)) => {
            let bad: Vec<usize> = (0..keep.len())
                .filter(|&r| keep[r] != want_keep[r])
                .collect();
            if !bad.is_empty() {
                diffs.push(format!(
                    "{label}: keep differs on {} rows, first row {} (kernel {}, DataFusion {})",
                    bad.len(),
                    bad[0],
                    keep[bad[0]],
                    want_keep[bad[0]]
                ));
                return diffs;
            }
            let kept: Vec<usize> = (0..keep.len()).filter(|&r| keep[r]).collect();
            for (j, want) in want_outs.iter().enumerate() {
                let ty = k.outputs[j];
                let w = width(ty);
                let want_dev = host_column(want, ty).expect("device layout of the CPU answer");
                let (vals, valid) = &outs[j];
                for (i, &r) in kept.iter().enumerate() {
                    let want_valid = want.is_valid(i);
                    let got_valid = valid[r] != 0;
                    let same = want_valid == got_valid
                        && (!want_valid
                            || same_value(
                                ty,
                                &vals[r * w..(r + 1) * w],
                                &want_dev.values[i * w..(i + 1) * w],
                            ));
                    if !same {
                        diffs.push(format!(
                            "{label}: projection {j} row {r}: kernel {} {:?}, DataFusion {}",
                            if got_valid { "value" } else { "NULL" },
                            &vals[r * w..(r + 1) * w],
                            arrow::util::display::array_value_to_string(want, i)
                                .unwrap_or_default()
                        ));
                        break;
                    }
                }
            }
        }
    }
    diffs
}

#[test]
fn scan_kernels_answer_like_datafusion_on_the_expression_corpus() {
    if !emulation::cxx_available() {
        return;
    }
    let ctx = common::corpus_context();
    let mut diffs = Vec::new();
    let mut checked = 0;
    for (i, (filter, projections)) in common::CORPUS.iter().enumerate() {
        let spec = common::corpus_spec(&ctx, filter, projections);
        let Ok(k) = spec.generate() else {
            eprintln!("corpus #{i} [{filter}] {projections:?}: unsupported, not emulated");
            continue;
        };
        let emu = EmuKernel::build(&k);
        for (what, batch) in corpus_batches() {
            for grid in [GRID, (ROWS as u32).div_ceil(BLOCK_THREADS) + 1] {
                let label = format!("#{i} [{filter}] {projections:?} ({what}, grid {grid})");
                diffs.extend(check_scan(
                    &label,
                    &k,
                    &emu,
                    &batch,
                    spec.filter.as_ref(),
                    &spec.projections,
                    grid,
                ));
            }
        }
        checked += 1;
    }
    eprintln!("emulated {checked} corpus scan kernels");
    assert!(
        checked >= common::CORPUS.len() * 3 / 4,
        "most of the corpus is supported"
    );
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// Values of an integer-like array as the kernels see them: `(long
/// long)` of the device value (dates as days, decimals scaled).
fn as_i64s(a: &ArrayRef) -> Vec<Option<i64>> {
    use arrow::datatypes::*;
    macro_rules! prim {
        ($t:ty) => {
            a.as_primitive::<$t>()
                .iter()
                .map(|v| v.map(|x| x as i64))
                .collect()
        };
    }
    match a.data_type() {
        DataType::Int8 => prim!(Int8Type),
        DataType::Int16 => prim!(Int16Type),
        DataType::Int32 => prim!(Int32Type),
        DataType::Int64 => prim!(Int64Type),
        DataType::UInt8 => prim!(UInt8Type),
        DataType::UInt16 => prim!(UInt16Type),
        DataType::UInt32 => prim!(UInt32Type),
        DataType::UInt64 => prim!(UInt64Type),
        DataType::Date32 => prim!(Date32Type),
        DataType::Decimal128(_, _) => prim!(Decimal128Type),
        other => panic!("not integer-like: {other}"),
    }
}

fn as_f64s(a: &ArrayRef) -> Vec<Option<f64>> {
    let c = arrow::compute::cast(a, &DataType::Float64).expect("cast to double");
    c.as_primitive::<arrow::datatypes::Float64Type>()
        .iter()
        .collect()
}

fn eval(e: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> ArrayRef {
    e.evaluate(batch)
        .and_then(|v| v.into_array(batch.num_rows()))
        .expect("evaluate")
}

/// The accumulator words the kernel should end with for one group, from
/// the documented layout (`AggSlot`): exact 128-bit integer sums, counts,
/// MIN/MAX with a count; float sums in any order (compared loosely).
fn reference_preagg(
    k: &KernelSource,
    keys: &[Arc<dyn PhysicalExpr>],
    aggs: &[AggSpec],
    batches: &[RecordBatch],
) -> BTreeMap<Vec<u64>, Vec<u64>> {
    let nacc = k.aggs.iter().map(|a| a.words).sum::<usize>().max(1);
    let mut init = Vec::new();
    for a in &k.aggs {
        init.extend(a.init());
    }
    init.resize(nacc, 0);
    let mut groups: BTreeMap<Vec<u64>, Vec<u64>> = BTreeMap::new();
    for batch in batches {
        let kv: Vec<Vec<Option<i64>>> = keys.iter().map(|e| as_i64s(&eval(e, batch))).collect();
        let args: Vec<Option<ArrayRef>> = aggs
            .iter()
            .map(|a| a.arg.as_ref().map(|e| eval(e, batch)))
            .collect();
        for r in 0..batch.num_rows() {
            let mut key = Vec::new();
            let mut nullmask = 0u64;
            for (i, col) in kv.iter().enumerate() {
                match col[r] {
                    Some(v) => key.push(v as u64),
                    None => {
                        key.push(0);
                        nullmask |= 1 << i;
                    }
                }
            }
            key.push(nullmask);
            let acc = groups.entry(key).or_insert_with(|| init.clone());
            for (slot, arg) in k.aggs.iter().zip(&args) {
                let o = slot.offset;
                let float = slot.arg_ty.is_some_and(|t| t.is_float());
                if slot.func == AggFunc::CountStar {
                    acc[o] += 1;
                    continue;
                }
                let arg = arg.as_ref().expect("argument");
                if arg.is_null(r) {
                    continue;
                }
                match (slot.func, float) {
                    (AggFunc::Count, _) => acc[o] += 1,
                    (AggFunc::Sum | AggFunc::Avg, false) => {
                        let v = as_i64s(arg)[r].expect("value") as i128;
                        let s = ((acc[o + 1] as i128) << 64 | acc[o] as i128).wrapping_add(v);
                        acc[o] = s as u64;
                        acc[o + 1] = (s >> 64) as u64;
                        acc[o + 2] += 1;
                    }
                    (AggFunc::Sum | AggFunc::Avg, true) => {
                        let v = as_f64s(arg)[r].expect("value");
                        acc[o] = (f64::from_bits(acc[o]) + v).to_bits();
                        acc[o + 1] += 1;
                    }
                    (AggFunc::Min | AggFunc::Max, false) => {
                        let v = as_i64s(arg)[r].expect("value");
                        let cur = acc[o] as i64;
                        let pick = if slot.func == AggFunc::Min {
                            v.min(cur)
                        } else {
                            v.max(cur)
                        };
                        acc[o] = pick as u64;
                        acc[o + 1] += 1;
                    }
                    (AggFunc::Min | AggFunc::Max, true) => {
                        let v = as_f64s(arg)[r].expect("value");
                        let cur = f64::from_bits(acc[o]);
                        let pick = if slot.func == AggFunc::Min {
                            v.min(cur)
                        } else {
                            v.max(cur)
                        };
                        acc[o] = pick.to_bits();
                        acc[o + 1] += 1;
                    }
                    (AggFunc::CountStar, _) => unreachable!(),
                }
            }
        }
    }
    groups
}

/// Runs a PreAgg kernel over `batches` into one table of `cap` slots, as
/// GpuPreAggExec does (one launch a batch, the table kept across them).
/// Returns the groups, the overflow and error flags.
fn emulate_preagg(
    k: &KernelSource,
    emu: &EmuKernel,
    nkw: usize,
    batches: &[RecordBatch],
    cap: usize,
    grid: u32,
) -> (BTreeMap<Vec<u64>, Vec<u64>>, bool, bool) {
    let nacc = k.aggs.iter().map(|a| a.words).sum::<usize>().max(1);
    let mut init = Vec::new();
    for a in &k.aggs {
        init.extend(a.init());
    }
    init.resize(nacc, 0);
    let mut state = Arg::zeroed(cap * 4);
    let mut keys = Arg::zeroed(cap * nkw * 8);
    let mut acc = Arg::Buf((0..cap).flat_map(|_| init.iter().copied()).collect());
    let mut overflow = Arg::zeroed(4);
    let mut err = Arg::zeroed(4);
    for batch in batches {
        let sets = dict_sets(k, batch);
        let mut args: Vec<Arg> = k
            .params
            .iter()
            .map(|p| {
                input_arg(p, k, batch, &sets).unwrap_or_else(|| match p {
                    Param::GroupState => std::mem::replace(&mut state, Arg::Null),
                    Param::GroupKeys => std::mem::replace(&mut keys, Arg::Null),
                    Param::GroupAcc => std::mem::replace(&mut acc, Arg::Null),
                    Param::GroupMask => Arg::Scalar(cap as u64 - 1),
                    Param::Overflow => std::mem::replace(&mut overflow, Arg::Null),
                    Param::Err => std::mem::replace(&mut err, Arg::Null),
                    other => panic!("preagg parameter {other:?}"),
                })
            })
            .collect();
        emu.launch(&mut args, grid, BLOCK_THREADS)
            .unwrap_or_else(|e| panic!("emulator: {e}"));
        // Hand the table back for the next batch.
        for (p, a) in k.params.iter().zip(args) {
            match p {
                Param::GroupState => state = a,
                Param::GroupKeys => keys = a,
                Param::GroupAcc => acc = a,
                Param::Overflow => overflow = a,
                Param::Err => err = a,
                _ => {}
            }
        }
    }
    let (st, kb, ab) = (state.as_bytes(), keys.as_bytes(), acc.as_bytes());
    let mut groups = BTreeMap::new();
    for s in 0..cap {
        match u32_at(st, s) {
            0 => continue,
            2 => {}
            other => panic!("slot {s} left in state {other}"),
        }
        let key: Vec<u64> = (0..nkw).map(|i| u64_at(kb, s * nkw + i)).collect();
        let words: Vec<u64> = (0..nacc).map(|i| u64_at(ab, s * nacc + i)).collect();
        assert!(
            groups.insert(key.clone(), words).is_none(),
            "group {key:?} has two slots"
        );
    }
    (
        groups,
        u32_at(overflow.as_bytes(), 0) != 0,
        u32_at(err.as_bytes(), 0) != 0,
    )
}

fn same_accumulators(k: &KernelSource, got: &[u64], want: &[u64]) -> bool {
    for slot in &k.aggs {
        let o = slot.offset;
        let float = slot.arg_ty.is_some_and(|t| t.is_float());
        for i in 0..slot.words {
            let (g, w) = (got[o + i], want[o + i]);
            let float_word = float && i == 0;
            let ok = if float_word && matches!(slot.func, AggFunc::Sum | AggFunc::Avg) {
                // Summation order differs (per block, then merged).
                let (g, w) = (f64::from_bits(g), f64::from_bits(w));
                g == w || (g - w).abs() <= 1e-9 * w.abs().max(1.0)
            } else if float_word {
                // MIN/MAX of floats: equal as numbers (0.0 vs -0.0 depends
                // on which row came first, on the device too).
                f64::from_bits(g) == f64::from_bits(w)
            } else {
                g == w
            };
            if !ok {
                return false;
            }
        }
    }
    true
}

fn corpus_aggs(ctx: &SessionContext, schema: &Arc<Schema>) -> Vec<AggSpec> {
    let p = |s: &str| Some(common::physical(ctx, schema, s));
    vec![
        AggSpec {
            func: AggFunc::CountStar,
            arg: None,
        },
        AggSpec {
            func: AggFunc::Count,
            arg: p("f"),
        },
        AggSpec {
            func: AggFunc::Sum,
            arg: p("a"),
        },
        AggSpec {
            func: AggFunc::Sum,
            arg: p("c"),
        },
        AggSpec {
            func: AggFunc::Sum,
            arg: p("d"),
        },
        AggSpec {
            func: AggFunc::Sum,
            arg: p("f"),
        },
        AggSpec {
            func: AggFunc::Min,
            arg: p("c"),
        },
        AggSpec {
            func: AggFunc::Max,
            arg: p("h"),
        },
        AggSpec {
            func: AggFunc::Min,
            arg: p("f"),
        },
        AggSpec {
            func: AggFunc::Max,
            arg: p("g"),
        },
        AggSpec {
            func: AggFunc::Avg,
            arg: p("d2"),
        },
        AggSpec {
            func: AggFunc::Avg,
            arg: p("u"),
        },
        AggSpec {
            func: AggFunc::Max,
            arg: p("dt"),
        },
    ]
}

/// A preagg case: name, group keys, table slots.
type PreAggCase = (&'static str, Vec<Arc<dyn PhysicalExpr>>, usize);

#[test]
fn preagg_kernels_answer_like_a_reference_aggregation() {
    if !emulation::cxx_available() {
        return;
    }
    let ctx = SessionContext::new();
    let schema = common::corpus_schema();
    let full = common::corpus_batch(2 * ROWS);
    // Two batches into one table; the second starts at a bit offset.
    let batches = vec![full.slice(0, ROWS), full.slice(ROWS + 5, ROWS - 5)];
    let aggs = corpus_aggs(&ctx, &schema);
    let p = |s: &str| common::physical(&ctx, &schema, s);
    let mut diffs = Vec::new();
    // (name, keys, table slots): few groups stay in shared memory; many
    // groups (a x c: thousands) fall through to the global table.
    let cases: Vec<PreAggCase> = vec![
        ("no key", vec![], 16),
        ("k", vec![p("k")], 1024),
        (
            "a, b % 3, dt is null",
            vec![
                p("a"),
                p("b % 3"),
                p("case when dt is null then 1 else 0 end"),
            ],
            4096,
        ),
        ("a, c (many groups)", vec![p("a"), p("c")], 1 << 14),
        ("d, t", vec![p("d"), p("t")], 1 << 14),
    ];
    for (name, keys, cap) in cases {
        let k = PreAggKernelSpec {
            schema: Arc::clone(&schema),
            keys: keys.clone(),
            aggs: aggs.clone(),
        }
        .generate()
        .expect("supported");
        let emu = EmuKernel::build(&k);
        let want = reference_preagg(&k, &keys, &aggs, &batches);
        for grid in [GRID, 16] {
            let (got, overflow, err) =
                emulate_preagg(&k, &emu, keys.len() + 1, &batches, cap, grid);
            let label = format!("preagg [{name}] grid {grid}");
            assert!(!err, "{label}: error flag");
            assert!(
                !overflow,
                "{label}: overflow with {cap} slots for {} groups",
                want.len()
            );
            if got.len() != want.len() {
                diffs.push(format!(
                    "{label}: {} groups, want {}",
                    got.len(),
                    want.len()
                ));
                continue;
            }
            for (key, w) in &want {
                match got.get(key) {
                    None => diffs.push(format!("{label}: group {key:?} missing")),
                    Some(g) if !same_accumulators(&k, g, w) => {
                        diffs.push(format!("{label}: group {key:?}: kernel {g:?}, want {w:?}"))
                    }
                    _ => {}
                }
            }
            eprintln!("{label}: {} groups equal", want.len());
        }
    }
    // A table too small for the groups raises the overflow flag (the host
    // then retries with 8x the slots).
    let keys = vec![p("a"), p("c")];
    let k = PreAggKernelSpec {
        schema: Arc::clone(&schema),
        keys: keys.clone(),
        aggs: aggs.clone(),
    }
    .generate()
    .expect("supported");
    let emu = EmuKernel::build(&k);
    let (got, overflow, _) = emulate_preagg(&k, &emu, keys.len() + 1, &batches, 256, GRID);
    assert!(overflow, "256 slots for thousands of groups must overflow");
    assert!(got.len() <= 256);
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// One build side: its key column, as GpuJoinExec collects it.
fn build_side(keys: Vec<Option<i64>>) -> (Int64Array, HostTable) {
    let arr = Int64Array::from(keys);
    let schema = Arc::new(Schema::new(vec![Field::new("key", DataType::Int64, true)]));
    let batch =
        RecordBatch::try_new(schema, vec![Arc::new(arr.clone()) as ArrayRef]).expect("batch");
    let t = HostTable::build(batch, &arr).expect("host table");
    (arr, t)
}

/// Runs a join kernel; returns the output tuples (fact row, build row per
/// level), the many-match counter, and the error flag.
fn emulate_join(
    k: &KernelSource,
    emu: &EmuKernel,
    batch: &RecordBatch,
    tables: &[HostTable],
    unique: bool,
    cap: usize,
    grid: u32,
) -> (Vec<Vec<i32>>, u64, bool) {
    let n = batch.num_rows();
    let sets = dict_sets(k, batch);
    let i32s = |v: &[i32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let i64s = |v: &[i64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let out_len = if unique { n } else { cap };
    let mut args: Vec<Arg> = k
        .params
        .iter()
        .map(|p| {
            input_arg(p, k, batch, &sets).unwrap_or_else(|| match p {
                Param::DirectRows(l) => Arg::bytes(&i32s(&tables[*l].dm_rows)),
                Param::DirectMin(l) => Arg::Scalar(tables[*l].dm_min as u64),
                Param::DirectLen(l) => Arg::Scalar(tables[*l].dm_rows.len() as u64),
                Param::HashKeys(l) => Arg::bytes(&i64s(&tables[*l].ht_keys)),
                Param::HashRows(l) => Arg::bytes(&i32s(&tables[*l].ht_rows)),
                Param::HashNext(l) => Arg::bytes(&i32s(&tables[*l].next)),
                Param::HashMask(l) => Arg::Scalar(tables[*l].ht_mask),
                Param::KeepBits => Arg::zeroed(n.div_ceil(32) * 4),
                Param::OutCount => Arg::zeroed(8),
                Param::OutCapacity => Arg::Scalar(cap as u64),
                Param::OutFactRow => Arg::zeroed(cap * 4),
                Param::OutRowId(_) => Arg::bytes(&i32s(&vec![-7; out_len])),
                Param::Err => Arg::zeroed(4),
                other => panic!("join parameter {other:?}"),
            })
        })
        .collect();
    emu.launch(&mut args, grid, BLOCK_THREADS)
        .unwrap_or_else(|e| panic!("emulator: {e}"));
    let pos = |want: &Param| k.params.iter().position(|p| p == want).expect("param");
    let levels = tables.len();
    let rid = |l: usize, i: usize| i32_at(args[pos(&Param::OutRowId(l))].as_bytes(), i);
    let mut out = Vec::new();
    let count;
    if unique {
        let bits = args[pos(&Param::KeepBits)].as_bytes();
        for r in 0..n {
            if (u32_at(bits, r / 32) >> (r % 32)) & 1 == 1 {
                let mut t = vec![r as i32];
                t.extend((0..levels).map(|l| rid(l, r)));
                out.push(t);
            }
        }
        count = out.len() as u64;
    } else {
        count = u64_at(args[pos(&Param::OutCount)].as_bytes(), 0);
        let facts = args[pos(&Param::OutFactRow)].as_bytes();
        for i in 0..(count as usize).min(cap) {
            let mut t = vec![i32_at(facts, i)];
            t.extend((0..levels).map(|l| rid(l, i)));
            out.push(t);
        }
    }
    let err = u32_at(args[pos(&Param::Err)].as_bytes(), 0) != 0;
    (out, count, err)
}

/// A join case: name, and per level the probe key (SQL) and build keys.
type JoinCase = (&'static str, Vec<(&'static str, Vec<Option<i64>>)>);

/// Every (fact row, build rows) combination an inner equi-join chain
/// produces, by nested loops over the build keys (NULL keys never match).
#[allow(clippy::needless_range_loop)] // keys[level][row]
fn reference_join(
    batch: &RecordBatch,
    probes: &[Arc<dyn PhysicalExpr>],
    builds: &[Int64Array],
) -> Vec<Vec<i32>> {
    let keys: Vec<Vec<Option<i64>>> = probes.iter().map(|p| as_i64s(&eval(p, batch))).collect();
    let mut out = Vec::new();
    for r in 0..batch.num_rows() {
        let mut partial = vec![vec![r as i32]];
        for (l, b) in builds.iter().enumerate() {
            let mut next = Vec::new();
            if let Some(key) = keys[l][r] {
                let matches: Vec<i32> = (0..b.len())
                    .filter(|&i| b.is_valid(i) && b.value(i) == key)
                    .map(|i| i as i32)
                    .collect();
                for t in &partial {
                    for m in &matches {
                        let mut t = t.clone();
                        t.push(*m);
                        next.push(t);
                    }
                }
            }
            partial = next;
        }
        out.extend(partial);
    }
    out
}

#[test]
fn join_kernels_answer_like_nested_loops() {
    if !emulation::cxx_available() {
        return;
    }
    let ctx = SessionContext::new();
    let schema = common::corpus_schema();
    let batch = common::corpus_batch(ROWS + 3).slice(3, ROWS);
    let p = |s: &str| common::physical(&ctx, &schema, s);
    // Build sides: dense unique keys (direct-mapped), scattered unique keys
    // (hashed), keys with duplicates and NULLs (hashed, many matches).
    let dense: Vec<Option<i64>> = (0..50).map(Some).collect();
    let scattered: Vec<Option<i64>> = (-48..=48)
        .step_by(3)
        .map(Some)
        .chain([Some(1_000_000_000_000), None])
        .collect();
    let small: Vec<Option<i64>> = (-1..=2).map(Some).collect();
    let dups: Vec<Option<i64>> = (0..30)
        .map(|i| Some(i % 10))
        .chain([None, Some(2)])
        .collect();
    let dup_small: Vec<Option<i64>> = vec![Some(0), Some(1), Some(1), Some(3), None];
    let cases: Vec<JoinCase> = vec![
        (
            "unique direct+hash+direct",
            vec![
                ("k", dense.clone()),
                ("a", scattered.clone()),
                ("cast(b as bigint) + 1", small.clone()),
            ],
        ),
        ("unique one level", vec![("k", dense.clone())]),
        (
            "many matches",
            vec![
                ("k % 10", dups.clone()),
                ("cast(b as bigint) + 1", dup_small.clone()),
            ],
        ),
        (
            "many matches mixed",
            vec![
                ("a", scattered.clone()),
                ("k", dups.clone()),
                ("cast(b as bigint) + 1", small.clone()),
            ],
        ),
    ];
    let mut diffs = Vec::new();
    for (name, levels) in cases {
        let probes: Vec<Arc<dyn PhysicalExpr>> = levels.iter().map(|(e, _)| p(e)).collect();
        let sides: Vec<(Int64Array, HostTable)> = levels
            .iter()
            .map(|(_, keys)| build_side(keys.clone()))
            .collect();
        let unique = sides.iter().all(|(_, t)| t.unique);
        let layout: Vec<BuildTable> = sides.iter().map(|(_, t)| t.kind).collect();
        let k = JoinKernelSpec {
            schema: Arc::clone(&schema),
            levels: probes
                .iter()
                .zip(&layout)
                .map(|(e, t)| JoinLevelSpec {
                    probe_key: Arc::clone(e),
                    table: *t,
                })
                .collect(),
            unique,
        }
        .generate()
        .expect("supported");
        let emu = EmuKernel::build(&k);
        let builds: Vec<Int64Array> = sides.iter().map(|(a, _)| a.clone()).collect();
        let tables: Vec<HostTable> = sides.into_iter().map(|(_, t)| t).collect();
        let mut want = reference_join(&batch, &probes, &builds);
        want.sort();
        for grid in [GRID, 16] {
            let label = format!("join [{name}] {layout:?} unique={unique} grid {grid}");
            let cap = want.len() + 10;
            let (mut got, count, err) = emulate_join(&k, &emu, &batch, &tables, unique, cap, grid);
            assert!(!err, "{label}: error flag");
            got.sort();
            if got != want || count != want.len() as u64 {
                let first = got.iter().zip(&want).position(|(g, w)| g != w);
                diffs.push(format!(
                    "{label}: {} outputs (count {count}), want {}; first difference at {first:?}",
                    got.len(),
                    want.len()
                ));
            } else {
                eprintln!("{label}: {} outputs equal", want.len());
            }
            if !unique {
                // Too small an output buffer: the counter still counts
                // every combination (the host relaunches with that size)
                // and only the first `cap` slots are written.
                let (part, count, _) =
                    emulate_join(&k, &emu, &batch, &tables, unique, want.len() / 3, grid);
                assert_eq!(count, want.len() as u64, "{label}: overflowing counter");
                assert!(
                    part.iter().all(|t| want.binary_search(t).is_ok()),
                    "{label}: partial outputs are real"
                );
            }
        }
        assert!(!want.is_empty(), "{name}: the case joins something");
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// The kernel spec of a planned GpuScanExec, rebuilt from the CPU subtree
/// it keeps (as `optimizer::plan_scan` builds it: the filter's predicate,
/// the projection's computed expressions remapped to the input's columns).
/// None when the shape is not a filter / projection over an input.
fn planned_scan_spec(scan: &eddy_gpu::GpuScanExec) -> Option<eddy_gpu::codegen::ScanKernelSpec> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_plan::filter::FilterExec;
    use datafusion::physical_plan::projection::ProjectionExec;
    let node = scan.cpu_plan();
    let proj = node.downcast_ref::<ProjectionExec>();
    let filter = match proj {
        Some(p) => p.input().downcast_ref::<FilterExec>(),
        None => node.downcast_ref::<FilterExec>(),
    };
    let input = match (filter, proj) {
        (Some(f), _) => Arc::clone(f.input()),
        (None, Some(p)) => Arc::clone(p.input()),
        (None, None) => return None,
    };
    let schema = input.schema();
    let cols: Vec<usize> = match filter.and_then(|f| f.projection().clone()) {
        Some(p) => p.iter().copied().collect(),
        None => (0..schema.fields().len()).collect(),
    };
    let mut computed = Vec::new();
    if let Some(p) = proj {
        for pe in p.expr() {
            let e = Arc::clone(&pe.expr)
                .transform(|e| {
                    if let Some(c) = e.downcast_ref::<Column>() {
                        let i = cols[c.index()];
                        return Ok(Transformed::yes(
                            Arc::new(Column::new(schema.field(i).name(), i))
                                as Arc<dyn PhysicalExpr>,
                        ));
                    }
                    Ok(Transformed::no(e))
                })
                .expect("remap")
                .data;
            if e.downcast_ref::<Column>().is_none() {
                computed.push(e);
            }
        }
    }
    Some(eddy_gpu::codegen::ScanKernelSpec {
        schema,
        filter: filter.map(|f| Arc::clone(f.predicate())),
        projections: computed,
    })
}

fn collect_scans(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    out: &mut Vec<Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
) {
    if plan.downcast_ref::<eddy_gpu::GpuScanExec>().is_some() {
        out.push(Arc::clone(plan));
    }
    for c in plan.children() {
        collect_scans(c, out);
    }
}

/// The GpuScan kernels the rule plans for TPC-H and SSB (dates, decimals,
/// dictionary strings as the planner types them), executed on the emulator
/// over the operator's real input batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planned_scan_kernels_of_tpch_and_ssb_answer_like_datafusion() {
    if !emulation::cxx_available() {
        return;
    }
    let ssb: Vec<(String, String)> = eddy_gpu::check::SSB_QUERIES
        .iter()
        .map(|(n, q, _)| (format!("SSB {n}"), q.to_string()))
        .collect();
    let tpch: Vec<(String, String)> = eddy_bench::tpch::queries::queries(0.01)
        .into_iter()
        .map(|(n, q)| (format!("TPC-H {n}"), q))
        .collect();
    let suites = vec![
        (common::tpch_session(0.01).await, tpch),
        (common::ssb_session(0.01, true).await, ssb),
    ];
    let mut diffs = Vec::new();
    let mut checked = 0;
    let mut emus: BTreeMap<u64, EmuKernel> = BTreeMap::new();
    for (ctx, queries) in &suites {
        for (name, sql) in queries {
            let plan = common::plan(ctx, sql).await;
            let mut scans = Vec::new();
            collect_scans(&plan, &mut scans);
            for node in scans {
                let scan = node.downcast_ref::<eddy_gpu::GpuScanExec>().expect("scan");
                let k = scan.kernel();
                let Some(spec) = planned_scan_spec(scan) else {
                    eprintln!("{name}: scan shape not rebuilt, not emulated");
                    continue;
                };
                let again = spec.generate().expect("planned spec generates");
                assert_eq!(
                    again.hash, k.hash,
                    "{name}: the rebuilt spec gives the planned kernel"
                );
                let emu = emus.entry(k.hash).or_insert_with(|| EmuKernel::build(k));
                let input = Arc::clone(node.children()[0]);
                let mut rows = 0;
                // All partitions at once: a RepartitionExec below serves
                // its outputs together.
                let parts = datafusion::physical_plan::collect_partitioned(input, ctx.task_ctx())
                    .await
                    .expect("input");
                for (part, batches) in parts.iter().enumerate() {
                    for (bi, batch) in batches.iter().enumerate().take(2) {
                        rows += batch.num_rows();
                        let label = format!("{name} partition {part} batch {bi}");
                        diffs.extend(check_scan(
                            &label,
                            k,
                            emu,
                            batch,
                            spec.filter.as_ref(),
                            &spec.projections,
                            GRID,
                        ));
                    }
                }
                eprintln!(
                    "{name}: GpuScan kernel {:016x} emulated over {rows} rows",
                    k.hash
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "some planned scan was emulated");
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// The kernel spec of a planned GpuPreAggExec, rebuilt from the Partial
/// `AggregateExec` it keeps (as `GpuPreAggExec::try_new` builds it: string
/// group keys become UInt32 codes interned on the host). Returns the spec
/// and the indices of the string key columns.
fn planned_preagg_spec(
    node: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) -> (PreAggKernelSpec, Vec<usize>) {
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_plan::aggregates::AggregateExec;
    let agg = node
        .downcast_ref::<AggregateExec>()
        .expect("partial aggregate");
    let in_schema = agg.input().schema();
    let mut fields: Vec<Field> = in_schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut keys = Vec::new();
    let mut strings = Vec::new();
    for (e, _) in agg.group_expr().expr() {
        let dt = e.data_type(&in_schema).expect("key type");
        let is_string = matches!(
            dt,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) || matches!(&dt, DataType::Dictionary(_, v) if matches!(v.as_ref(), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View));
        if is_string {
            let c = e.downcast_ref::<Column>().expect("string key is a column");
            strings.push(c.index());
            fields[c.index()] = Field::new(fields[c.index()].name(), DataType::UInt32, true);
        }
        keys.push(Arc::clone(e));
    }
    let aggs = agg
        .aggr_expr()
        .iter()
        .map(|a| {
            let arg = a.expressions().first().cloned();
            let func = AggFunc::from_planned(a.fun().name(), arg.as_ref())
                .unwrap_or_else(|| panic!("planned aggregate {}", a.fun().name()));
            AggSpec {
                func,
                arg: if func == AggFunc::CountStar {
                    None
                } else {
                    arg
                },
            }
        })
        .collect();
    (
        PreAggKernelSpec {
            schema: Arc::new(Schema::new(fields)),
            keys,
            aggs,
        },
        strings,
    )
}

/// Replaces string key columns with codes in order of first appearance.
fn intern(
    batch: &RecordBatch,
    schema: &Arc<Schema>,
    strings: &[usize],
    dicts: &mut [std::collections::HashMap<String, u32>],
) -> RecordBatch {
    let mut cols = batch.columns().to_vec();
    for (k, &i) in strings.iter().enumerate() {
        let s = arrow::compute::cast(&cols[i], &DataType::Utf8).expect("strings");
        let codes: arrow::array::UInt32Array = s
            .as_string::<i32>()
            .iter()
            .map(|v| {
                v.map(|v| {
                    let n = dicts[k].len() as u32;
                    *dicts[k].entry(v.to_string()).or_insert(n)
                })
            })
            .collect();
        cols[i] = Arc::new(codes);
    }
    RecordBatch::try_new(Arc::clone(schema), cols).expect("interned batch")
}

/// The partial aggregates the rule plans for SSB and TPC-H, executed on
/// the emulator over the operator's real input (all of a partition's
/// batches into one table) and compared with the reference fold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planned_preagg_kernels_of_ssb_and_tpch_answer_like_a_reference() {
    if !emulation::cxx_available() {
        return;
    }
    let ssb: Vec<(String, String)> = eddy_gpu::check::SSB_QUERIES
        .iter()
        .map(|(n, q, _)| (format!("SSB {n}"), q.to_string()))
        .collect();
    let tpch: Vec<(String, String)> = eddy_bench::tpch::queries::queries(0.01)
        .into_iter()
        .map(|(n, q)| (format!("TPC-H {n}"), q))
        .collect();
    let suites = vec![
        (common::ssb_session(0.01, true).await, ssb),
        (common::tpch_session(0.01).await, tpch),
    ];
    let mut diffs = Vec::new();
    let mut checked = 0;
    for (ctx, queries) in &suites {
        for (name, sql) in queries {
            // The kernels the rule plans, then the same query planned with
            // the GPU off: its Partial AggregateExecs are what the
            // GpuPreAggExecs replaced (the rule runs last), and their inputs
            // run on the CPU.
            let plan = common::plan(ctx, sql).await;
            let mut nodes = Vec::new();
            collect_preaggs(&plan, &mut nodes);
            let planned: BTreeMap<u64, KernelSource> = nodes
                .iter()
                .map(|n| {
                    let k = n
                        .downcast_ref::<eddy_gpu::GpuPreAggExec>()
                        .expect("preagg")
                        .kernel();
                    (k.hash, k.clone())
                })
                .collect();
            common::set(ctx, "SET eddy.gpu = 'off'").await;
            let mut partials = Vec::new();
            collect_partials(&common::plan(ctx, sql).await, &mut partials);
            for i in 0..partials.len() {
                // A fresh plan each time: an executed RepartitionExec cannot
                // run again, and one aggregate's input may hold another.
                let mut fresh = Vec::new();
                collect_partials(&common::plan(ctx, sql).await, &mut fresh);
                let agg_node = fresh.swap_remove(i);
                let (spec, strings) = planned_preagg_spec(&agg_node);
                let Some(k) = spec.generate().ok().and_then(|g| planned.get(&g.hash)) else {
                    continue;
                };
                let emu = EmuKernel::build(k);
                let input = Arc::clone(agg_node.children()[0]);
                let parts =
                    match datafusion::physical_plan::collect_partitioned(input, ctx.task_ctx())
                        .await
                    {
                        Ok(p) => p,
                        Err(e) => {
                            // e.g. an input that needs its parent's scalar
                            // subquery (TPC-H q22) cannot run on its own.
                            eprintln!("{name}: input does not run alone ({e}); not emulated");
                            continue;
                        }
                    };
                for (part, raw) in parts.iter().enumerate() {
                    let mut dicts = vec![std::collections::HashMap::new(); strings.len()];
                    let batches: Vec<RecordBatch> = raw
                        .iter()
                        .filter(|b| b.num_rows() > 0)
                        .map(|b| intern(b, &spec.schema, &strings, &mut dicts))
                        .collect();
                    let want = reference_preagg(k, &spec.keys, &spec.aggs, &batches);
                    let cap = (want.len() * 2).next_power_of_two().max(1024);
                    let (got, overflow, err) =
                        emulate_preagg(k, &emu, spec.keys.len() + 1, &batches, cap, GRID);
                    let label = format!("{name} partition {part}");
                    assert!(
                        !overflow && !err,
                        "{label}: overflow {overflow}, error {err}"
                    );
                    if got.len() != want.len() {
                        diffs.push(format!(
                            "{label}: {} groups, want {}",
                            got.len(),
                            want.len()
                        ));
                        continue;
                    }
                    for (key, w) in &want {
                        match got.get(key) {
                            Some(g) if same_accumulators(k, g, w) => {}
                            g => diffs
                                .push(format!("{label}: group {key:?}: kernel {g:?}, want {w:?}")),
                        }
                    }
                    eprintln!(
                        "{label}: GpuPreAgg kernel {:016x}, {} rows, {} groups equal",
                        k.hash,
                        batches.iter().map(|b| b.num_rows()).sum::<usize>(),
                        want.len()
                    );
                }
                checked += 1;
            }
            common::set(ctx, "SET eddy.gpu = 'on'").await;
        }
    }
    assert!(checked > 0, "some planned partial aggregate was emulated");
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

fn collect_preaggs(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    out: &mut Vec<Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
) {
    if plan.downcast_ref::<eddy_gpu::GpuPreAggExec>().is_some() {
        out.push(Arc::clone(plan));
    }
    for c in plan.children() {
        collect_preaggs(c, out);
    }
}

fn collect_partials(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    out: &mut Vec<Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
) {
    use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
    if plan
        .downcast_ref::<AggregateExec>()
        .is_some_and(|a| *a.mode() == AggregateMode::Partial)
    {
        out.push(Arc::clone(plan));
    }
    for c in plan.children() {
        collect_partials(c, out);
    }
}

fn collect_joins(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    out: &mut Vec<Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
) {
    use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
    if plan.downcast_ref::<HashJoinExec>().is_some_and(|j| {
        *j.partition_mode() == PartitionMode::CollectLeft
            && *j.join_type() == datafusion::common::JoinType::Inner
            && j.on().len() == 1
            && j.filter().is_none()
    }) {
        out.push(Arc::clone(plan));
    }
    for c in plan.children() {
        collect_joins(c, out);
    }
}

/// Single-level joins the rule plans for SSB and TPC-H: the build side
/// (the CPU plan's HashJoinExec left input) turned into the host table the
/// operator builds, the probe side's real batches through the emulated
/// kernel, compared with nested loops. Fused multi-level joins are covered
/// by the corpus cases only (their probe keys are rewritten over the fact
/// input inside the operator).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planned_single_level_join_kernels_answer_like_nested_loops() {
    use datafusion::physical_plan::joins::HashJoinExec;
    if !emulation::cxx_available() {
        return;
    }
    let ssb: Vec<(String, String)> = eddy_gpu::check::SSB_QUERIES
        .iter()
        .map(|(n, q, _)| (format!("SSB {n}"), q.to_string()))
        .collect();
    let tpch: Vec<(String, String)> = eddy_bench::tpch::queries::queries(0.01)
        .into_iter()
        .map(|(n, q)| (format!("TPC-H {n}"), q))
        .collect();
    let suites = vec![
        (common::ssb_session(0.01, true).await, ssb),
        (common::tpch_session(0.01).await, tpch),
    ];
    let mut diffs = Vec::new();
    let mut checked = 0;
    for (ctx, queries) in &suites {
        for (name, sql) in queries {
            let plan = common::plan(ctx, sql).await;
            let mut planned: BTreeMap<u64, KernelSource> = BTreeMap::new();
            for k in common::planned_kernels(&plan) {
                if k.kernel.entry == "eddy_join" {
                    planned.insert(k.kernel.hash, k.kernel);
                }
            }
            common::set(ctx, "SET eddy.gpu = 'off'").await;
            let mut joins = Vec::new();
            collect_joins(&common::plan(ctx, sql).await, &mut joins);
            for i in 0..joins.len() {
                let mut fresh = Vec::new();
                collect_joins(&common::plan(ctx, sql).await, &mut fresh);
                let node = fresh.swap_remove(i);
                let j = node.downcast_ref::<HashJoinExec>().expect("join");
                let (bk, pk) = j.on()[0].clone();
                let Ok(left) =
                    datafusion::physical_plan::collect(Arc::clone(j.left()), ctx.task_ctx()).await
                else {
                    continue;
                };
                let build_keys: Vec<Option<i64>> = left
                    .iter()
                    .flat_map(|b| {
                        let a = eval(&bk, b);
                        match a.data_type() {
                            DataType::Utf8 | DataType::Utf8View | DataType::Dictionary(_, _) => {
                                vec![]
                            }
                            _ => as_i64s(&a),
                        }
                    })
                    .collect();
                if build_keys.is_empty() {
                    continue;
                }
                let (arr, table) = build_side(build_keys);
                let spec = JoinKernelSpec {
                    schema: j.right().schema(),
                    levels: vec![JoinLevelSpec {
                        probe_key: Arc::clone(&pk),
                        table: table.kind,
                    }],
                    unique: table.unique,
                };
                let Some(k) = spec.generate().ok().and_then(|g| planned.get(&g.hash)) else {
                    continue;
                };
                let emu = EmuKernel::build(k);
                let (kind, unique) = (table.kind, table.unique);
                let tables = [table];
                let Ok(parts) = datafusion::physical_plan::collect_partitioned(
                    Arc::clone(j.right()),
                    ctx.task_ctx(),
                )
                .await
                else {
                    continue;
                };
                let mut outputs = 0;
                for (part, batches) in parts.iter().enumerate() {
                    for (bi, batch) in batches.iter().enumerate().take(2) {
                        let mut want = reference_join(
                            batch,
                            std::slice::from_ref(&pk),
                            std::slice::from_ref(&arr),
                        );
                        want.sort();
                        let (mut got, count, err) =
                            emulate_join(k, &emu, batch, &tables, unique, want.len() + 10, GRID);
                        got.sort();
                        let label = format!("{name} join {i} partition {part} batch {bi}");
                        assert!(!err, "{label}: error flag");
                        if got != want || count != want.len() as u64 {
                            diffs.push(format!(
                                "{label}: {} outputs, want {}",
                                got.len(),
                                want.len()
                            ));
                        }
                        outputs += want.len();
                    }
                }
                eprintln!(
                    "{name}: GpuJoin kernel {:016x} ({:?}, unique {}) emulated, {outputs} outputs equal",
                    k.hash, kind, unique
                );
                checked += 1;
            }
            common::set(ctx, "SET eddy.gpu = 'on'").await;
        }
    }
    assert!(checked > 0, "some planned join was emulated");
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// The fused join + partial aggregation kernel over two levels (a direct
/// table with unique keys, a hashed table with duplicate and NULL keys),
/// grouping by build columns (one a string, read as codes) with aggregates
/// over fact columns and over an expression mixing fact and build columns,
/// the fact side's filter evaluated in the same kernel:
/// its groups and accumulators equal a reference aggregation over the rows
/// of a nested-loop join.
/// The ready groups of a fused kernel's group table (state, keys and
/// accumulator buffers of `cap` slots): key words → accumulator words.
fn ready_groups(
    (st, kb, ab): (&[u8], &[u8], &[u8]),
    cap: usize,
    nkw: usize,
    nacc: usize,
) -> BTreeMap<Vec<u64>, Vec<u64>> {
    let mut got = BTreeMap::new();
    for s in 0..cap {
        if u32_at(st, s) != 2 {
            continue;
        }
        let key: Vec<u64> = (0..nkw).map(|i| u64_at(kb, s * nkw + i)).collect();
        let words: Vec<u64> = (0..nacc).map(|i| u64_at(ab, s * nacc + i)).collect();
        assert!(got.insert(key, words).is_none(), "a group has two slots");
    }
    got
}

/// `got` has exactly `want`'s groups, each with the same accumulators.
fn assert_same_groups(
    k: &KernelSource,
    got: &BTreeMap<Vec<u64>, Vec<u64>>,
    want: &BTreeMap<Vec<u64>, Vec<u64>>,
    label: &str,
) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "the groups, {label}"
    );
    for (key, w) in want {
        assert!(
            same_accumulators(k, &got[key], w),
            "group {key:?} ({label}): got {:?}, want {w:?}",
            got[key]
        );
    }
}

#[test]
fn fused_join_preagg_kernel_answers_like_join_then_aggregate() {
    use arrow::array::{Float64Array, Int32Array, StringArray, UInt32Array};
    use arrow::compute::take;
    use eddy_gpu::codegen::JoinAggKernelSpec;
    if !emulation::cxx_available() {
        return;
    }
    let n = ROWS;
    // Fact: a dense foreign key (some NULL, some missing), a key into a side
    // with duplicates, a measure with NULLs, a float measure.
    let fk0: Int64Array = (0..n)
        .map(|i| (i % 13 != 5).then_some(((i * 7) % 60) as i64))
        .collect();
    let fk1: Int64Array = (0..n)
        .map(|i| (i % 17 != 3).then_some(((i * 5) % 12) as i64))
        .collect();
    let m: Int64Array = (0..n)
        .map(|i| (i % 11 != 0).then_some(i as i64 * 1_000_003 - 900_000_000))
        .collect();
    let f: Float64Array = (0..n).map(|i| Some(i as f64 * 0.25 - 7.0)).collect();
    let fact_fields = vec![
        Field::new("fk0", DataType::Int64, true),
        Field::new("fk1", DataType::Int64, true),
        Field::new("m", DataType::Int64, true),
        Field::new("f", DataType::Float64, false),
    ];
    let fact = RecordBatch::try_new(
        Arc::new(Schema::new(fact_fields.clone())),
        vec![Arc::new(fk0), Arc::new(fk1), Arc::new(m), Arc::new(f)],
    )
    .expect("fact");
    // Level 0: keys 0..50 unique and dense (direct table): year, name.
    let k0: Int64Array = (0..50).map(Some).collect();
    let year: Int32Array = (0..50).map(|i| Some(1992 + (i % 7))).collect();
    let names: StringArray = (0..50)
        .map(|i| Some(["ASIA", "EUROPE", "AMERICA"][(i % 3) as usize]))
        .collect();
    // Level 1: keys with duplicates and NULLs (hashed, chained): cat.
    let k1: Int64Array = (0..30)
        .map(|i| (i % 9 != 4).then_some((i % 10) as i64))
        .collect();
    let cat: Int32Array = (0..30).map(|i| (i % 4 != 1).then_some(i)).collect();
    let b0 = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("k0", DataType::Int64, false),
            Field::new("year", DataType::Int32, false),
            Field::new("name", DataType::Utf8, false),
        ])),
        vec![
            Arc::new(k0.clone()),
            Arc::new(year.clone()),
            Arc::new(names.clone()),
        ],
    )
    .expect("b0");
    let b1 = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("k1", DataType::Int64, true),
            Field::new("cat", DataType::Int32, true),
        ])),
        vec![Arc::new(k1.clone()), Arc::new(cat.clone())],
    )
    .expect("b1");
    let t0 = HostTable::build(b0, &k0).expect("table 0");
    let t1 = HostTable::build(b1, &k1).expect("table 1");
    assert_eq!((t0.kind, t0.unique), (BuildTable::Direct, true));
    assert_eq!((t1.kind, t1.unique), (BuildTable::Hash, false));
    // The name column as the codes the operator interns it to.
    let codes: UInt32Array = names
        .iter()
        .map(|s| {
            s.map(|s| match s {
                "ASIA" => 0u32,
                "EUROPE" => 1,
                _ => 2,
            })
        })
        .collect();
    let mut fields = fact_fields;
    fields.extend([
        Field::new("k0", DataType::Int64, false),
        Field::new("year", DataType::Int32, false),
        Field::new("name", DataType::UInt32, true),
        Field::new("k1", DataType::Int64, true),
        Field::new("cat", DataType::Int32, true),
    ]);
    let schema = Arc::new(Schema::new(fields));
    let build_arrays: Vec<(usize, ArrayRef)> = vec![
        (4, Arc::new(k0.clone())),
        (5, Arc::new(year)),
        (6, Arc::new(codes)),
        (7, Arc::new(k1.clone())),
        (8, Arc::new(cat)),
    ];
    let ctx = SessionContext::new();
    let p = |s: &str| common::physical(&ctx, &schema, s);
    let keys = vec![p("year"), p("name"), p("cat")];
    // The fact side's own filter, evaluated before the probe.
    let filter = p("fk0 <> 7 AND f > -6.5");
    let aggs = vec![
        AggSpec {
            func: AggFunc::CountStar,
            arg: None,
        },
        AggSpec {
            func: AggFunc::Sum,
            arg: Some(p("m")),
        },
        AggSpec {
            func: AggFunc::Sum,
            arg: Some(p("f")),
        },
        AggSpec {
            func: AggFunc::Min,
            arg: Some(p("m")),
        },
        AggSpec {
            func: AggFunc::Max,
            arg: Some(p("f")),
        },
        AggSpec {
            func: AggFunc::Count,
            arg: Some(p("cat")),
        },
        AggSpec {
            func: AggFunc::Avg,
            arg: Some(p("m + year")),
        },
    ];
    let spec = JoinAggKernelSpec {
        schema: Arc::clone(&schema),
        fact_columns: 4,
        build_columns: vec![4..7, 7..9],
        filter: Some(filter.clone()),
        levels: vec![
            JoinLevelSpec {
                probe_key: p("fk0"),
                table: BuildTable::Direct,
            },
            JoinLevelSpec {
                probe_key: p("fk1"),
                table: BuildTable::Hash,
            },
        ],
        keys: keys.clone(),
        aggs: aggs.clone(),
    };
    let k = spec.generate().expect("fused kernel");
    assert_eq!(k.entry, "eddy_join_preagg");
    let emu = EmuKernel::build(&k);

    // Reference: the nested-loop join's rows in the virtual schema.
    let (mut fi, mut r0, mut r1) = (Vec::new(), Vec::new(), Vec::new());
    let fk0 = fact.column(0).as_primitive::<arrow::datatypes::Int64Type>();
    let fk1 = fact.column(1).as_primitive::<arrow::datatypes::Int64Type>();
    let kept = eval(&filter, &fact);
    let kept = kept.as_boolean();
    assert!(kept.false_count() > 0, "the filter drops rows");
    for r in 0..n {
        if fk0.is_null(r) || fk1.is_null(r) || !kept.is_valid(r) || !kept.value(r) {
            continue;
        }
        for a in t0.probe(fk0.value(r)) {
            for b in t1.probe(fk1.value(r)) {
                fi.push(r as u32);
                r0.push(a as u32);
                r1.push(b as u32);
            }
        }
    }
    let (fi, r0, r1) = (
        UInt32Array::from(fi),
        UInt32Array::from(r0),
        UInt32Array::from(r1),
    );
    let mut vcols: Vec<ArrayRef> = fact
        .columns()
        .iter()
        .map(|c| take(c, &fi, None).expect("take"))
        .collect();
    for (i, a) in &build_arrays {
        let idx = if *i < 7 { &r0 } else { &r1 };
        vcols.push(take(a, idx, None).expect("take"));
    }
    let joined = RecordBatch::try_new(Arc::clone(&schema), vcols).expect("joined");
    assert!(joined.num_rows() > n, "the duplicate keys multiply rows");
    let want = reference_preagg(&k, &keys, &aggs, &[joined]);

    // The kernel, fed as GpuJoinAggExec feeds it: fact columns per chunk,
    // build columns and tables resident.
    let i32s = |v: &[i32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let i64s = |v: &[i64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let tables = [&t0, &t1];
    let nkw = keys.len() + 1;
    let nacc = k.aggs.iter().map(|a| a.words).sum::<usize>().max(1);
    let mut init = Vec::new();
    for a in &k.aggs {
        init.extend(a.init());
    }
    init.resize(nacc, 0);
    let cap = 1usize << 12;
    let make_args = |batch: &RecordBatch| -> Vec<Arg> {
        k.params
            .iter()
            .map(|p| {
                let build = |i: usize| -> Option<&ArrayRef> {
                    build_arrays.iter().find(|(j, _)| *j == i).map(|(_, a)| a)
                };
                let ty = |i: usize| k.columns.iter().find(|c| c.index == i).expect("use").ty;
                match p {
                    Param::Column(i) if *i >= 4 => Arg::bytes(
                        &host_column(build(*i).expect("build"), ty(*i))
                            .expect("layout")
                            .values,
                    ),
                    Param::Validity(i) if *i >= 4 => {
                        match host_column(build(*i).expect("build"), ty(*i))
                            .expect("layout")
                            .validity
                        {
                            Some(v) => Arg::bytes(&v),
                            None => Arg::Null,
                        }
                    }
                    Param::DirectRows(l) => Arg::bytes(&i32s(&tables[*l].dm_rows)),
                    Param::DirectMin(l) => Arg::Scalar(tables[*l].dm_min as u64),
                    Param::DirectLen(l) => Arg::Scalar(tables[*l].dm_rows.len() as u64),
                    Param::HashKeys(l) => Arg::bytes(&i64s(&tables[*l].ht_keys)),
                    Param::HashRows(l) => Arg::bytes(&i32s(&tables[*l].ht_rows)),
                    Param::HashNext(l) => Arg::bytes(&i32s(&tables[*l].next)),
                    Param::HashMask(l) => Arg::Scalar(tables[*l].ht_mask),
                    Param::GroupState => Arg::zeroed(cap * 4),
                    Param::GroupKeys => Arg::zeroed(cap * nkw * 8),
                    Param::GroupAcc => {
                        Arg::Buf((0..cap).flat_map(|_| init.iter().copied()).collect())
                    }
                    Param::GroupMask => Arg::Scalar(cap as u64 - 1),
                    Param::Overflow | Param::Err => Arg::zeroed(4),
                    other => input_arg(other, &k, batch, &[])
                        .unwrap_or_else(|| panic!("fused parameter {other:?}")),
                }
            })
            .collect()
    };
    let mut args = make_args(&fact);
    emu.launch(&mut args, GRID, BLOCK_THREADS)
        .unwrap_or_else(|e| panic!("emulator: {e}"));
    let pos = |want: &Param| k.params.iter().position(|p| p == want).expect("param");
    assert_eq!(
        u32_at(args[pos(&Param::Overflow)].as_bytes(), 0),
        0,
        "overflow"
    );
    assert_eq!(u32_at(args[pos(&Param::Err)].as_bytes(), 0), 0, "row error");
    let (st, kb, ab) = (
        args[pos(&Param::GroupState)].as_bytes(),
        args[pos(&Param::GroupKeys)].as_bytes(),
        args[pos(&Param::GroupAcc)].as_bytes(),
    );
    let got = ready_groups((st, kb, ab), cap, nkw, nacc);
    assert_same_groups(&k, &got, &want, "one launch");

    // Resident pieces (`eddy_gpu::resident`): the same fact rows as pieces
    // of uneven sizes cut at odd offsets, each laid out on its own by
    // `host_column` (as the cache uploads a piece) and launched in turn
    // into one group table, give the same groups.
    let owned = |p: &Param| {
        matches!(
            p,
            Param::GroupState | Param::GroupKeys | Param::GroupAcc | Param::Overflow | Param::Err
        )
    };
    let mut table_args: Vec<(usize, Arg)> = Vec::new();
    for w in [0usize, 1000, 1003, 2500, n].windows(2) {
        let piece = fact.slice(w[0], w[1] - w[0]);
        let mut pargs = make_args(&piece);
        for (i, a) in table_args.drain(..) {
            pargs[i] = a;
        }
        emu.launch(&mut pargs, GRID, BLOCK_THREADS)
            .unwrap_or_else(|e| panic!("emulator: {e}"));
        table_args = pargs
            .into_iter()
            .enumerate()
            .filter(|(i, _)| owned(&k.params[*i]))
            .collect();
    }
    let table_arg = |want: &Param| -> &[u8] {
        let i = pos(want);
        table_args
            .iter()
            .find(|(j, _)| *j == i)
            .map(|(_, a)| a.as_bytes())
            .expect("group table argument")
    };
    assert_eq!(u32_at(table_arg(&Param::Overflow), 0), 0, "overflow");
    assert_eq!(u32_at(table_arg(&Param::Err), 0), 0, "row error");
    let (pst, pkb, pab) = (
        table_arg(&Param::GroupState),
        table_arg(&Param::GroupKeys),
        table_arg(&Param::GroupAcc),
    );
    let by_pieces = ready_groups((pst, pkb, pab), cap, nkw, nacc);
    assert_same_groups(&k, &by_pieces, &want, "by pieces");

    // The group table's own kernels, from the same module: initialisation
    // on the device equals the host's, and the gather returns exactly the
    // ready groups.
    let helper = |entry: &'static str, n: usize| {
        let mut h = k.clone();
        h.entry = entry;
        h.params = vec![Param::Rows; n];
        EmuKernel::build(&h)
    };
    let mut init_args = vec![Arg::zeroed(cap * nacc * 8), Arg::Scalar(cap as u64)];
    helper("eddy_group_init", 2)
        .launch(&mut init_args, GRID, BLOCK_THREADS)
        .unwrap_or_else(|e| panic!("emulator: {e}"));
    let initialised = init_args[0].as_bytes();
    for s in [0, 1, cap / 2, cap - 1] {
        for (i, w) in init.iter().enumerate() {
            assert_eq!(u64_at(initialised, s * nacc + i), *w, "slot {s} word {i}");
        }
    }
    let width = nkw + nacc;
    let mut compact_args = vec![
        Arg::bytes(st),
        Arg::bytes(kb),
        Arg::bytes(ab),
        Arg::Scalar(cap as u64),
        Arg::zeroed(cap * width * 8),
        Arg::zeroed(8),
    ];
    helper("eddy_group_compact", 6)
        .launch(&mut compact_args, GRID, BLOCK_THREADS)
        .unwrap_or_else(|e| panic!("emulator: {e}"));
    let n = u64_at(compact_args[5].as_bytes(), 0) as usize;
    assert_eq!(n, got.len(), "gathered groups");
    let out = compact_args[4].as_bytes();
    let mut gathered = BTreeMap::new();
    for g in 0..n {
        let words: Vec<u64> = (0..width).map(|i| u64_at(out, g * width + i)).collect();
        gathered.insert(words[..nkw].to_vec(), words[nkw..].to_vec());
    }
    assert_eq!(gathered, got, "the gathered groups are the table's");
}
