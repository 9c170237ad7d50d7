//! The GPU operators and what they share: kernel launch, fallback, and the
//! CPU subtree each one keeps.
//!
//! Every `Gpu*Exec` is built from the CPU subtree it replaces. Its children
//! are that subtree's inputs (so `EXPLAIN` shows the Gpu node over the same
//! inputs); the subtree itself is kept, rebuilt over the current children,
//! and executed whenever the device path cannot run or fails.

pub mod join;
pub mod join_agg;
pub mod preagg;
pub mod scan;

use std::sync::Arc;

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use datafusion::error::Result as DfResult;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};

pub use join::GpuJoinExec;
pub use join_agg::GpuJoinAggExec;
pub use preagg::GpuPreAggExec;
pub use scan::GpuScanExec;

use crate::codegen::kernels::BLOCK_THREADS;
use crate::datapath::Slot;
use crate::device::GpuDevice;
use crate::error::{GpuError, Result};
use crate::metrics::{FallbackReason, GpuMetrics, GPU_METRICS};
use crate::mode::{GpuMode, GpuOptions};

/// Replaces the node at `path` (child indices from `plan`) with `new`.
pub(crate) fn replace_at(
    plan: &Arc<dyn ExecutionPlan>,
    path: &[usize],
    new: Arc<dyn ExecutionPlan>,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    let Some((first, rest)) = path.split_first() else {
        return Ok(new);
    };
    let mut kids: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    let Some(kid) = kids.get(*first).cloned() else {
        return datafusion::common::internal_err!(
            "GPU operator: no child {first} in {}",
            plan.name()
        );
    };
    kids[*first] = replace_at(&kid, rest, new)?;
    datafusion::physical_plan::execution_plan::replace_children_if_necessary(Arc::clone(plan), kids)
}

/// Rebuilds `template` with `inputs` at `paths`.
pub(crate) fn rebuild(
    template: &Arc<dyn ExecutionPlan>,
    paths: &[Vec<usize>],
    inputs: &[Arc<dyn ExecutionPlan>],
) -> DfResult<Arc<dyn ExecutionPlan>> {
    let mut plan = Arc::clone(template);
    for (p, i) in paths.iter().zip(inputs) {
        plan = replace_at(&plan, p, Arc::clone(i))?;
    }
    Ok(plan)
}

/// Whether this execution may use the device: the session's `eddy.gpu` at
/// run time (a later `SET eddy.gpu = off` wins over the plan).
pub(crate) fn device_allowed(ctx: &TaskContext) -> bool {
    GpuOptions::from_config(ctx.session_config().options()).gpu != GpuMode::Off
}

/// Runs the CPU subtree after a device failure: counted, logged, correct.
pub(crate) fn fallback(
    operator: &'static str,
    cpu: &Arc<dyn ExecutionPlan>,
    partition: usize,
    ctx: Arc<TaskContext>,
    err: &GpuError,
) -> DfResult<SendableRecordBatchStream> {
    GPU_METRICS.fallback(FallbackReason::DeviceError);
    tracing::warn!(operator, partition, error = %err, error_kind = err.kind(), "GPU path failed; running the CPU plan for this partition");
    cpu.execute(partition, ctx)
}

/// Rows per device launch. DataFusion hands operators batches of 8,192
/// rows; one launch, copy and wait per such batch left the first device run
/// (H100, SSB SF1) at 0.1-0.3x the CPU. The GPU operators gather their input
/// into chunks of this many rows first.
pub(crate) const CHUNK_ROWS: usize = 1 << 20;

/// `input` re-cut into batches of [`CHUNK_ROWS`] rows (the last may be
/// shorter). Rows keep their order; errors pass through.
pub(crate) fn coalesced(input: SendableRecordBatchStream) -> SendableRecordBatchStream {
    use futures::StreamExt;
    let schema = input.schema();
    let coalescer = arrow::compute::BatchCoalescer::new(Arc::clone(&schema), CHUNK_ROWS);
    let out = futures::stream::unfold(
        (input, coalescer, false),
        |(mut input, mut co, mut done)| async move {
            loop {
                if let Some(b) = co.next_completed_batch() {
                    return Some((Ok(b), (input, co, done)));
                }
                if done {
                    return None;
                }
                match input.next().await {
                    Some(Ok(b)) => {
                        if let Err(e) = co.push_batch(b) {
                            return Some((Err(e.into()), (input, co, true)));
                        }
                    }
                    Some(Err(e)) => return Some((Err(e), (input, co, true))),
                    None => {
                        done = true;
                        if let Err(e) = co.finish_buffered_batch() {
                            return Some((Err(e.into()), (input, co, true)));
                        }
                    }
                }
            }
        },
    );
    Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(schema, out))
}

/// A kernel argument.
#[derive(Debug)]
pub(crate) enum Arg {
    /// Buffer `i` of the slot.
    Buf(usize),
    /// A device buffer owned elsewhere (resident cache, join tables).
    Dev(Arc<cudarc::driver::CudaSlice<u8>>),
    /// A NULL pointer (no validity bitmap: no NULLs).
    Null,
    I64(i64),
    U64(u64),
    I32(i32),
}

/// Grid size: enough blocks to fill the device a few times over; the
/// kernels loop (grid-stride) over the rest.
pub(crate) fn grid_for(dev: &GpuDevice, rows: usize) -> u32 {
    let needed = rows.div_ceil(BLOCK_THREADS as usize).max(1);
    needed.min(dev.info.sm_count.max(1) as usize * 8) as u32
}

/// Launches `func` on the slot's stream with `args` in order.
pub(crate) fn launch(slot: &Slot, func: &CudaFunction, blocks: u32, args: &[Arg]) -> Result<()> {
    let null: u64 = 0;
    let stream = Arc::clone(&slot.stream);
    let mut b = stream.launch_builder(func);
    for a in args {
        match a {
            Arg::Buf(i) => {
                let buf = slot.buffers.get(*i).ok_or_else(|| {
                    GpuError::Internal(format!("kernel argument buffer {i} missing"))
                })?;
                b.arg(&buf.slice);
            }
            Arg::Dev(s) => {
                b.arg(s.as_ref());
            }
            Arg::Null => {
                b.arg(&null);
            }
            Arg::I64(v) => {
                b.arg(v);
            }
            Arg::U64(v) => {
                b.arg(v);
            }
            Arg::I32(v) => {
                b.arg(v);
            }
        }
    }
    let cfg = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the argument list is built from the kernel's own parameter
    // list (`KernelSource::params`), buffers are sized for `nrows`, and all
    // of them live in the slot (or behind Arcs) until its stream is synced.
    unsafe { b.launch(cfg) }.map_err(GpuError::driver("cuLaunchKernel"))?;
    GpuMetrics::add(&GPU_METRICS.kernel_launches, 1);
    Ok(())
}

/// Reads a little-endian `int` flag buffer.
pub(crate) fn flag(bytes: &[u8]) -> bool {
    bytes.iter().take(4).any(|b| *b != 0)
}

/// Dictionary code sets of a kernel's string predicates, per batch, cached
/// by dictionary identity (batches of one file share their dictionary).
#[derive(Debug, Default)]
pub(crate) struct DictSets {
    cache: std::collections::HashMap<(usize, usize, usize), Arc<crate::codegen::dict::DictSet>>,
}

impl DictSets {
    pub(crate) fn for_batch(
        &mut self,
        kernel: &crate::codegen::KernelSource,
        schema: &arrow::datatypes::Schema,
        batch: &arrow::array::RecordBatch,
    ) -> Result<Vec<Arc<crate::codegen::dict::DictSet>>> {
        use arrow::array::AsArray;
        let mut out = Vec::new();
        for d in &kernel.dict_params {
            let values = batch
                .column(d.column)
                .as_any_dictionary_opt()
                .ok_or_else(|| {
                    GpuError::Internal("dictionary parameter on a non-dictionary column".into())
                })?
                .values()
                .clone();
            let addr = values
                .to_data()
                .buffers()
                .first()
                .map(|b| b.as_ptr() as usize)
                .unwrap_or(0);
            let key = (d.id, addr, values.len());
            if let Some(s) = self.cache.get(&key) {
                out.push(Arc::clone(s));
                continue;
            }
            let set = Arc::new(crate::codegen::dict::evaluate_on_dictionary(
                &d.predicate,
                schema,
                d.column,
                &values,
            )?);
            self.cache.insert(key, Arc::clone(&set));
            out.push(set);
        }
        Ok(out)
    }
}

/// Device buffers of one batch's kernel inputs, in a slot.
#[derive(Debug, Default)]
pub(crate) struct BatchInputs {
    /// Column index → (values buffer, validity buffer).
    cols: std::collections::HashMap<usize, (usize, Option<usize>)>,
    /// Per dictionary parameter: TRUE set, NULL set, NULL-row value/flag.
    dsets: Vec<(usize, usize, i32, i32)>,
    rows: usize,
}

/// Stages the columns a kernel reads (and its code sets) into `slot`.
/// `extra` is how many more bytes of pinned arena the caller will upload.
pub(crate) fn stage_batch(
    slot: &mut Slot,
    dev: &GpuDevice,
    kernel: &crate::codegen::KernelSource,
    batch: &arrow::array::RecordBatch,
    sets: &[Arc<crate::codegen::dict::DictSet>],
    extra: usize,
) -> Result<BatchInputs> {
    let mut sizes = Vec::with_capacity(kernel.columns.len());
    for c in &kernel.columns {
        let array = batch.column(c.index);
        sizes.push((c, array, crate::datapath::staged_len(array, c.ty)?));
    }
    let words = |w: Vec<u32>| -> Vec<u8> { w.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let set_bytes: Vec<(Vec<u8>, Vec<u8>, i32, i32)> = sets
        .iter()
        .map(|s| {
            (
                words(s.truth_words()),
                words(s.null_words()),
                i32::from(s.null_row == Some(true)),
                i32::from(s.null_row.is_none()),
            )
        })
        .collect();
    let bytes: usize = sizes
        .iter()
        .map(|(_, _, (values, validity))| values + validity)
        .sum::<usize>()
        + set_bytes
            .iter()
            .map(|s| s.0.len() + s.1.len())
            .sum::<usize>()
        + extra;
    slot.reserve(&dev.ctx, bytes)?;
    let mut out = BatchInputs {
        rows: batch.num_rows(),
        ..Default::default()
    };
    // Each column is written from its Arrow buffer straight into the pinned
    // arena: one host copy (the first device run copied twice, via a Vec).
    for (c, array, (values, validity)) in sizes {
        let vb = slot.upload_with(values, |dst| {
            crate::datapath::write_values(array, c.ty, dst)
        })?;
        let nb = if validity > 0 {
            Some(slot.upload_with(validity, |dst| crate::datapath::write_validity(array, dst))?)
        } else {
            None
        };
        out.cols.insert(c.index, (vb, nb));
    }
    for (t, n, v, nn) in set_bytes {
        let tb = slot.upload(&t)?;
        let nb = slot.upload(&n)?;
        out.dsets.push((tb, nb, v, nn));
    }
    Ok(out)
}

/// The argument of a parameter every kernel shares, or None for the
/// operator-specific ones.
pub(crate) fn common_arg(
    p: &crate::codegen::kernels::Param,
    inputs: &BatchInputs,
) -> Result<Option<Arg>> {
    use crate::codegen::kernels::Param;
    let missing = || GpuError::Internal("kernel input not staged".into());
    Ok(Some(match p {
        Param::Rows => Arg::I64(inputs.rows as i64),
        Param::Column(i) => Arg::Buf(inputs.cols.get(i).ok_or_else(missing)?.0),
        Param::Validity(i) => match inputs.cols.get(i).ok_or_else(missing)?.1 {
            Some(b) => Arg::Buf(b),
            None => Arg::Null,
        },
        Param::DictTrue(k) => Arg::Buf(inputs.dsets.get(*k).ok_or_else(missing)?.0),
        Param::DictNull(k) => Arg::Buf(inputs.dsets.get(*k).ok_or_else(missing)?.1),
        Param::DictNullRowVal(k) => Arg::I32(inputs.dsets.get(*k).ok_or_else(missing)?.2),
        Param::DictNullRowNull(k) => Arg::I32(inputs.dsets.get(*k).ok_or_else(missing)?.3),
        _ => return Ok(None),
    }))
}
