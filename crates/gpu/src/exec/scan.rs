//! `GpuScanExec`: filter + projection of a scan's output on the device.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, BooleanArray, RecordBatch};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result as DfResult;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use super::{
    common_arg, device_allowed, fallback, flag, grid_for, launch, rebuild, stage_batch, Arg,
    DictSets,
};
use crate::codegen::kernels::{KernelSource, Param, ScanKernelSpec};
use crate::codegen::DevType;
use crate::datapath::Pipeline;
use crate::device::{runtime, GpuDevice};
use crate::error::{GpuError, Result};
use crate::metrics::{GpuMetrics, GPU_METRICS};

/// Where an output column of the scan comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanOutput {
    /// Input column, gathered on the host with the keep bitmap.
    Input(usize),
    /// Computed projection `j` of the kernel.
    Computed(usize),
}

/// Filter and projection over `input`, on the device; the CPU subtree it
/// replaced (`FilterExec` / `ProjectionExec`) is kept for fallback.
#[derive(Debug)]
pub struct GpuScanExec {
    input: Arc<dyn ExecutionPlan>,
    /// The replaced CPU subtree, rebuilt over `input`.
    cpu: Arc<dyn ExecutionPlan>,
    /// Template and the path of `input` inside it.
    template: Arc<dyn ExecutionPlan>,
    input_path: Vec<usize>,
    predicate: Option<Arc<dyn PhysicalExpr>>,
    outputs: Vec<ScanOutput>,
    kernel: Arc<KernelSource>,
    spec: ScanKernelSpec,
}

impl GpuScanExec {
    /// Builds the operator; `predicate` and `computed` refer to `input`'s
    /// schema. Fails with the unsupported reason when the kernel cannot be
    /// generated.
    pub fn try_new(
        template: Arc<dyn ExecutionPlan>,
        input_path: Vec<usize>,
        input: Arc<dyn ExecutionPlan>,
        predicate: Option<Arc<dyn PhysicalExpr>>,
        computed: Vec<Arc<dyn PhysicalExpr>>,
        outputs: Vec<ScanOutput>,
    ) -> Result<Self> {
        let spec = ScanKernelSpec {
            schema: input.schema(),
            filter: predicate.clone(),
            projections: computed,
        };
        let kernel = Arc::new(spec.generate()?);
        let cpu = rebuild(
            &template,
            std::slice::from_ref(&input_path),
            std::slice::from_ref(&input),
        )?;
        Ok(GpuScanExec {
            input,
            cpu,
            template,
            input_path,
            predicate,
            outputs,
            kernel,
            spec,
        })
    }

    /// The generated kernel.
    pub fn kernel(&self) -> &KernelSource {
        &self.kernel
    }

    /// The CPU subtree this operator falls back to.
    pub fn cpu_plan(&self) -> &Arc<dyn ExecutionPlan> {
        &self.cpu
    }
}

impl DisplayAs for GpuScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "GpuScanExec: ")?;
        match &self.predicate {
            Some(p) => write!(f, "filter={p}")?,
            None => write!(f, "filter=none")?,
        }
        let outs: Vec<String> = self
            .outputs
            .iter()
            .map(|o| match o {
                ScanOutput::Input(i) => format!("#{i}"),
                ScanOutput::Computed(j) => self
                    .spec
                    .projections
                    .get(*j)
                    .map(|e| e.to_string())
                    .unwrap_or_default(),
            })
            .collect();
        write!(
            f,
            ", projection=[{}], kernel={:016x}",
            outs.join(", "),
            self.kernel.hash
        )
    }
}

impl ExecutionPlan for GpuScanExec {
    fn name(&self) -> &str {
        "GpuScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.cpu.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        let mut r = TreeNodeRecursion::Continue;
        for e in self.predicate.iter().chain(self.spec.projections.iter()) {
            r = f(e)?;
            if r == TreeNodeRecursion::Stop {
                break;
            }
        }
        Ok(r)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return datafusion::common::internal_err!("GpuScanExec takes one child");
        }
        let input = children.swap_remove(0);
        let cpu = rebuild(
            &self.template,
            std::slice::from_ref(&self.input_path),
            std::slice::from_ref(&input),
        )?;
        Ok(Arc::new(GpuScanExec {
            input,
            cpu,
            template: Arc::clone(&self.template),
            input_path: self.input_path.clone(),
            predicate: self.predicate.clone(),
            outputs: self.outputs.clone(),
            kernel: Arc::clone(&self.kernel),
            spec: self.spec.clone(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        if !device_allowed(&context) {
            return self.cpu.execute(partition, context);
        }
        let rt = match runtime() {
            Ok(rt) => rt,
            Err(e) => return fallback("GpuScanExec", &self.cpu, partition, context, &e),
        };
        let input = super::coalesced(self.input.execute(partition, Arc::clone(&context))?);
        let schema = self.schema();
        let state = ScanRun {
            kernel: Arc::clone(&self.kernel),
            outputs: self.outputs.clone(),
            schema: Arc::clone(&schema),
            predicate: self.predicate.clone(),
            computed: self.spec.projections.clone(),
            input_schema: self.input.schema(),
            rt,
            partition,
            pipeline: None,
            dict_sets: DictSets::default(),
        };
        // Batches are processed in chunks of as many batches as the device
        // has streams: their copies and kernels overlap, and each chunk is
        // emitted only once complete. A device error on a chunk re-runs that
        // chunk's batches on the CPU (same expressions, evaluated by
        // DataFusion), so output is never lost or duplicated.
        let chunks = input.chunks(crate::device::STREAMS_PER_DEVICE);
        let out = futures::stream::unfold((chunks, state), |(mut chunks, mut state)| async move {
            let chunk = chunks.next().await?;
            let res: DfResult<Vec<RecordBatch>> = (|| {
                let batches = chunk.into_iter().collect::<DfResult<Vec<_>>>()?;
                match state.run_chunk(&batches) {
                    Ok(out) => Ok(out),
                    Err(e) => {
                        GPU_METRICS.fallback(crate::metrics::FallbackReason::DeviceError);
                        tracing::warn!(operator = "GpuScanExec", error = %e, "GPU chunk failed; evaluating it on the CPU");
                        batches.iter().map(|b| state.cpu_batch(b)).collect()
                    }
                }
            })();
            Some((res, (chunks, state)))
        })
        .map_ok(|v| futures::stream::iter(v.into_iter().map(Ok)))
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, out)))
    }
}

struct ScanRun {
    kernel: Arc<KernelSource>,
    outputs: Vec<ScanOutput>,
    schema: SchemaRef,
    input_schema: SchemaRef,
    predicate: Option<Arc<dyn PhysicalExpr>>,
    computed: Vec<Arc<dyn PhysicalExpr>>,
    rt: Arc<crate::device::GpuRuntime>,
    partition: usize,
    pipeline: Option<Pipeline>,
    dict_sets: DictSets,
}

impl ScanRun {
    /// The CPU twin of the kernel for one batch: DataFusion evaluates the
    /// same expressions, so its result (or error) is the CPU plan's.
    fn cpu_batch(&self, batch: &RecordBatch) -> DfResult<RecordBatch> {
        let filtered = match &self.predicate {
            Some(p) => {
                let mask = p.evaluate(batch)?.into_array(batch.num_rows())?;
                let mask = mask
                    .as_any()
                    .downcast_ref::<BooleanArray>()
                    .ok_or_else(|| {
                        datafusion::error::DataFusionError::Internal("filter is not boolean".into())
                    })?;
                filter_record_batch(batch, mask)?
            }
            None => batch.clone(),
        };
        let mut cols = Vec::with_capacity(self.outputs.len());
        for o in &self.outputs {
            cols.push(match o {
                ScanOutput::Input(i) => Arc::clone(filtered.column(*i)),
                ScanOutput::Computed(j) => self.computed[*j]
                    .evaluate(&filtered)?
                    .into_array(filtered.num_rows())?,
            });
        }
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), cols)?)
    }

    fn run_chunk(&mut self, batches: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
        let rt = Arc::clone(&self.rt);
        let dev: &GpuDevice = rt.device_for(self.partition)?;
        let func = crate::compile::cache().function(
            &dev.ctx,
            &self.kernel,
            dev.info.compute_capability,
        )?;
        if self.pipeline.is_none() {
            self.pipeline = Some(Pipeline::for_device(dev)?);
        }
        // Submit every batch of the chunk, each on its own slot/stream.
        let submit_started = std::time::Instant::now();
        let mut submitted = Vec::new();
        for batch in batches {
            let n = batch.num_rows();
            let sets = self
                .dict_sets
                .for_batch(&self.kernel, &self.input_schema, batch)?;
            let pipeline = self
                .pipeline
                .as_mut()
                .ok_or_else(|| GpuError::Internal("no pipeline".into()))?;
            let si = pipeline.next_slot()?;
            let slot = &mut pipeline.slots[si];
            // The results come back into the same pinned arena (`fetch`).
            let results: usize = 4
                + n.div_ceil(32) * 4
                + self
                    .kernel
                    .outputs
                    .iter()
                    .map(|t| n * t.width() + n)
                    .sum::<usize>();
            let inputs = stage_batch(slot, dev, &self.kernel, batch, &sets, results)?;
            let keep = slot.zeroed(n.div_ceil(32) * 4)?;
            let mut outs = Vec::new();
            for t in &self.kernel.outputs {
                outs.push((slot.zeroed(n * t.width())?, slot.zeroed(n)?));
            }
            let err = slot.zeroed(4)?;
            let mut args = Vec::new();
            for p in &self.kernel.params {
                if let Some(a) = common_arg(p, &inputs)? {
                    args.push(a);
                    continue;
                }
                args.push(match p {
                    Param::KeepBits => Arg::Buf(keep),
                    Param::OutValues(j) => Arg::Buf(outs[*j].0),
                    Param::OutValid(j) => Arg::Buf(outs[*j].1),
                    Param::Err => Arg::Buf(err),
                    other => {
                        return Err(GpuError::Internal(format!(
                            "scan kernel parameter {other:?}"
                        )))
                    }
                });
            }
            launch(slot, &func, grid_for(dev, n), &args)?;
            GpuMetrics::add(&GPU_METRICS.rows_processed, n as u64);
            // Results are copied back asynchronously, behind the kernel on
            // this stream, into page-locked memory; completion waits once.
            let err = slot.fetch(err)?;
            let keep = slot.fetch(keep)?;
            let mut fetched_outs = Vec::with_capacity(outs.len());
            for (vb, nb) in outs {
                fetched_outs.push((slot.fetch(vb)?, slot.fetch(nb)?));
            }
            submitted.push((si, keep, fetched_outs, err));
        }
        // Complete them in order.
        GpuMetrics::add_elapsed(&GPU_METRICS.submit_ns, submit_started);
        let complete_started = std::time::Instant::now();
        let mut result = Vec::new();
        for (batch, (si, keep, outs, err)) in batches.iter().zip(submitted) {
            let pipeline = self
                .pipeline
                .as_ref()
                .ok_or_else(|| GpuError::Internal("no pipeline".into()))?;
            let slot = &pipeline.slots[si];
            slot.wait()?;
            if flag(slot.fetched(&err)?) {
                // A row error (division by zero): the CPU raises it.
                return Err(GpuError::Internal("row error flagged by the kernel".into()));
            }
            let n = batch.num_rows();
            let keep_bytes = slot.fetched(&keep)?.to_vec();
            let mask =
                BooleanArray::new(BooleanBuffer::new(Buffer::from_vec(keep_bytes), 0, n), None);
            let filtered = filter_record_batch(batch, &mask)?;
            let mut cols: Vec<ArrayRef> = Vec::new();
            for o in &self.outputs {
                cols.push(match o {
                    ScanOutput::Input(i) => Arc::clone(filtered.column(*i)),
                    ScanOutput::Computed(j) => {
                        let (vb, nb) = outs.get(*j).ok_or_else(|| {
                            GpuError::Internal(format!("scan output {j} not fetched"))
                        })?;
                        let values = slot.fetched(vb)?;
                        let valid = slot.fetched(nb)?;
                        let field_ty = self.schema.field(cols.len()).data_type().clone();
                        let full = array_from_device(
                            values,
                            valid,
                            self.kernel.outputs[*j],
                            &field_ty,
                            n,
                        )?;
                        arrow::compute::filter(&full, &mask)?
                    }
                });
            }
            result.push(RecordBatch::try_new(Arc::clone(&self.schema), cols)?);
        }
        GpuMetrics::add_elapsed(&GPU_METRICS.complete_ns, complete_started);
        Ok(result)
    }
}

/// Builds an Arrow array of `dt` from device values (`ty` layout) and one
/// validity byte per row.
pub(crate) fn array_from_device(
    values: &[u8],
    valid: &[u8],
    ty: DevType,
    dt: &DataType,
    n: usize,
) -> Result<ArrayRef> {
    let nulls = NullBuffer::from(valid.iter().take(n).map(|v| *v != 0).collect::<Vec<_>>());
    let buf = Buffer::from_vec(values.get(..n * ty.width()).unwrap_or(values).to_vec());
    let data = match (ty, dt) {
        (DevType::Dec64 { .. }, DataType::Decimal128(_, _)) => {
            let v: Vec<i128> = buf
                .typed_data::<i64>()
                .iter()
                .map(|x| i128::from(*x))
                .collect();
            arrow::array::ArrayData::builder(dt.clone())
                .len(n)
                .add_buffer(Buffer::from_vec(v))
                .nulls(Some(nulls))
                .build()?
        }
        _ => arrow::array::ArrayData::builder(dt.clone())
            .len(n)
            .add_buffer(buf)
            .nulls(Some(nulls))
            .build()?,
    };
    if n == 0 {
        return Ok(new_null_array(dt, 0));
    }
    Ok(arrow::array::make_array(data))
}

/// Downcast helper used by tests and the optimizer.
pub fn as_gpu_scan(plan: &dyn Any) -> Option<&GpuScanExec> {
    plan.downcast_ref::<GpuScanExec>()
}
