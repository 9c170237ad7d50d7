//! `GpuPreAggExec`: partial GROUP BY on the device; the final aggregation
//! stays on the CPU (DataFusion's Final `AggregateExec` above it, unchanged).
//!
//! One global hash table per partition lives on the device for the whole
//! input: every batch's kernel adds into it with atomics (pre-aggregated per
//! block in shared memory first, so hot groups cost one global atomic per
//! block, not per row). The partial states are read back once, at the end,
//! in exactly the schema of the Partial `AggregateExec` it replaced.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Array, Float64Array, Int64Array, RecordBatch, StringArray,
    UInt32Array, UInt64Array,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use cudarc::driver::PushKernelArg;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use super::{
    common_arg, device_allowed, fallback, flag, grid_for, launch, rebuild, stage_batch, Arg,
    DictSets,
};
use crate::codegen::kernels::{AggFunc, AggSlot, AggSpec, KernelSource, Param, PreAggKernelSpec};
use crate::codegen::Unsupported;
use crate::datapath::Pipeline;
use crate::device::{runtime, GpuRuntime};
use crate::error::{GpuError, Result};
use crate::metrics::{GpuMetrics, GPU_METRICS};

/// Partial aggregation on the device; see the module doc.
#[derive(Debug)]
pub struct GpuPreAggExec {
    input: Arc<dyn ExecutionPlan>,
    template: Arc<dyn ExecutionPlan>,
    cpu: Arc<dyn ExecutionPlan>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Group keys that are strings: interned to codes on the host.
    string_keys: Vec<usize>,
    aggs: Vec<AggSpec>,
    kernel: Arc<KernelSource>,
    kernel_schema: SchemaRef,
}

pub(crate) fn is_string(dt: &DataType) -> bool {
    match dt {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => is_string(v),
        _ => false,
    }
}

/// Group key expressions.
pub(crate) type GroupKeys = Vec<Arc<dyn PhysicalExpr>>;

/// The group keys and aggregates of a Partial `AggregateExec` that the
/// device can compute (no GROUPING SETS, DISTINCT, FILTER, ordered or
/// limited aggregation; SUM/COUNT/MIN/MAX/AVG of one argument), over the
/// aggregate's input schema.
pub(crate) fn aggregate_specs(agg: &AggregateExec) -> Result<(GroupKeys, Vec<AggSpec>)> {
    if *agg.mode() != AggregateMode::Partial {
        return Err(Unsupported::operator(format!("aggregate mode {:?}", agg.mode())).into());
    }
    if !agg.group_expr().is_single() {
        return Err(Unsupported::operator("GROUPING SETS / ROLLUP / CUBE").into());
    }
    if *agg.input_order_mode() != datafusion::physical_plan::InputOrderMode::Linear {
        // An ordered (streaming) partial aggregate promises an output order
        // a hash table does not keep.
        return Err(Unsupported::operator("ordered (streaming) aggregation").into());
    }
    if agg.limit_options().is_some() {
        return Err(Unsupported::operator("aggregate with a limit").into());
    }
    if agg.filter_expr().iter().any(|f| f.is_some()) {
        return Err(Unsupported::operator("aggregate FILTER clause").into());
    }
    let keys = agg
        .group_expr()
        .expr()
        .iter()
        .map(|(e, _)| Arc::clone(e))
        .collect();
    let mut aggs = Vec::new();
    for a in agg.aggr_expr() {
        if a.is_distinct() {
            return Err(Unsupported::operator(format!("{}(DISTINCT)", a.fun().name())).into());
        }
        if !a.order_bys().is_empty() {
            return Err(Unsupported::operator("ordered aggregate").into());
        }
        let args = a.expressions();
        let arg = args
            .first()
            .map(|e| exact_integer_argument(e, &agg.input().schema()));
        if args.len() > 1 {
            return Err(Unsupported::operator(format!(
                "{} with {} arguments",
                a.fun().name(),
                args.len()
            ))
            .into());
        }
        let func = AggFunc::from_planned(a.fun().name(), arg.as_ref())
            .ok_or_else(|| Unsupported::operator(format!("aggregate {}", a.fun().name())))?;
        aggs.push(AggSpec {
            func,
            arg: if func == AggFunc::CountStar {
                None
            } else {
                arg
            },
        });
    }
    Ok((keys, aggs))
}

/// An aggregate argument `CAST(x AS DECIMAL(p, 0))` of an integer `x` (how
/// Eddy plans `sum(bigint)`, whose PostgreSQL type is numeric) as `x`: the
/// kernel's accumulators are exact 128-bit integers and the partial state
/// is decoded into the aggregate's own decimal type, so the value is the
/// same and the device needs no 38-digit decimals.
fn exact_integer_argument(e: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Arc<dyn PhysicalExpr> {
    use datafusion::physical_expr::expressions::CastExpr;
    if let Some(c) = e.downcast_ref::<CastExpr>() {
        let integer_input = c.expr().data_type(schema).is_ok_and(|t| t.is_integer());
        if integer_input && matches!(c.cast_type(), DataType::Decimal128(_, 0)) {
            return Arc::clone(c.expr());
        }
    }
    Arc::clone(e)
}

impl GpuPreAggExec {
    /// Builds the operator from a Partial `AggregateExec`.
    pub fn try_new(template: Arc<dyn ExecutionPlan>) -> Result<Self> {
        let agg = template
            .downcast_ref::<AggregateExec>()
            .ok_or_else(|| GpuError::Unsupported(Unsupported::operator("not an AggregateExec")))?;
        let (keys, aggs) = aggregate_specs(agg)?;
        let input = Arc::clone(agg.input());
        let in_schema = input.schema();
        let mut fields: Vec<Field> = in_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut string_keys = Vec::new();
        for e in &keys {
            let dt = e
                .data_type(&in_schema)
                .map_err(|x| Unsupported::expr(x.to_string()))?;
            if is_string(&dt) {
                let c = e.downcast_ref::<Column>().ok_or_else(|| {
                    Unsupported::expr(format!("string group key {e} is not a column"))
                })?;
                string_keys.push(c.index());
                fields[c.index()] = Field::new(fields[c.index()].name(), DataType::UInt32, true);
            }
        }
        let kernel_schema = Arc::new(Schema::new(fields));
        let kernel = Arc::new(
            PreAggKernelSpec {
                schema: Arc::clone(&kernel_schema),
                keys: keys.clone(),
                aggs: aggs.clone(),
            }
            .generate()?,
        );
        let cpu = rebuild(&template, &[vec![0]], std::slice::from_ref(&input))?;
        Ok(GpuPreAggExec {
            input,
            template,
            cpu,
            keys,
            string_keys,
            aggs,
            kernel,
            kernel_schema,
        })
    }

    /// The generated kernel.
    pub fn kernel(&self) -> &KernelSource {
        &self.kernel
    }
}

impl DisplayAs for GpuPreAggExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        let aggs: Vec<String> = self
            .aggs
            .iter()
            .map(|a| match &a.arg {
                Some(x) => format!("{:?}({x})", a.func),
                None => format!("{:?}", a.func),
            })
            .collect();
        write!(
            f,
            "GpuPreAggExec: gby=[{}], aggr=[{}], final aggregation on CPU",
            keys.join(", "),
            aggs.join(", ")
        )
    }
}

impl ExecutionPlan for GpuPreAggExec {
    fn name(&self) -> &str {
        "GpuPreAggExec"
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
        for e in self
            .keys
            .iter()
            .chain(self.aggs.iter().filter_map(|a| a.arg.as_ref()))
        {
            r = f(e)?;
            if r == TreeNodeRecursion::Stop {
                break;
            }
        }
        Ok(r)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return datafusion::common::internal_err!("GpuPreAggExec takes one child");
        }
        let input = children.swap_remove(0);
        let cpu = rebuild(&self.template, &[vec![0]], std::slice::from_ref(&input))?;
        Ok(Arc::new(GpuPreAggExec {
            input,
            template: Arc::clone(&self.template),
            cpu,
            keys: self.keys.clone(),
            string_keys: self.string_keys.clone(),
            aggs: self.aggs.clone(),
            kernel: Arc::clone(&self.kernel),
            kernel_schema: Arc::clone(&self.kernel_schema),
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
            Err(e) => return fallback("GpuPreAggExec", &self.cpu, partition, context, &e),
        };
        let job = PreAggJob {
            input: Arc::clone(&self.input),
            cpu: Arc::clone(&self.cpu),
            kernel: Arc::clone(&self.kernel),
            kernel_schema: Arc::clone(&self.kernel_schema),
            string_keys: self.string_keys.clone(),
            keys: self.keys.clone(),
            schema: self.schema(),
        };
        let schema = self.schema();
        let s = futures::stream::once(async move { job.run(partition, context, rt).await })
            .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, s)))
    }
}

struct PreAggJob {
    input: Arc<dyn ExecutionPlan>,
    cpu: Arc<dyn ExecutionPlan>,
    kernel: Arc<KernelSource>,
    kernel_schema: SchemaRef,
    string_keys: Vec<usize>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
}

/// Strings of one group key column ↔ dense codes.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    codes: HashMap<String, u32>,
    strings: Vec<String>,
}

impl Interner {
    pub(crate) fn encode(&mut self, a: &ArrayRef) -> Result<ArrayRef> {
        let s = cast(a, &DataType::Utf8)?;
        let s = s.as_string::<i32>();
        let mut out = Vec::with_capacity(s.len());
        for v in s.iter() {
            out.push(match v {
                None => None,
                Some(v) => Some(match self.codes.get(v) {
                    Some(c) => *c,
                    None => {
                        let c = self.strings.len() as u32;
                        self.strings.push(v.to_string());
                        self.codes.insert(v.to_string(), c);
                        c
                    }
                }),
            });
        }
        Ok(Arc::new(UInt32Array::from(out)))
    }
}

/// The device group table of one partition: slot states, key words,
/// accumulators, and the overflow and row-error flags.
pub(crate) struct GroupTable {
    cap: usize,
    nkw: usize,
    nacc: usize,
    state: Arc<cudarc::driver::CudaSlice<u8>>,
    keys: Arc<cudarc::driver::CudaSlice<u8>>,
    acc: Arc<cudarc::driver::CudaSlice<u8>>,
    overflow: Arc<cudarc::driver::CudaSlice<u8>>,
    err: Arc<cudarc::driver::CudaSlice<u8>>,
    compact: cudarc::driver::CudaFunction,
    blocks: u32,
}

/// What a group table holds at the end: the ready slots, all key words and
/// all accumulator words.
pub(crate) struct GroupContents {
    slots: Vec<usize>,
    keys: Vec<u64>,
    acc: Vec<u64>,
}

impl GroupTable {
    /// An empty table of `cap` slots (a power of two) for `nkeys` group
    /// keys and the accumulators of `kernel` (whose module holds the
    /// table's kernels, [`crate::codegen::kernels::GROUP_TABLE_KERNELS`]),
    /// zeroed and initialised on the device (synchronised).
    pub(crate) fn alloc(
        dev: &crate::device::GpuDevice,
        kernel: &KernelSource,
        cap: usize,
        nkeys: usize,
    ) -> Result<GroupTable> {
        let stream = &dev.streams[0];
        let aggs = &kernel.aggs;
        let nkw = nkeys + 1;
        let nacc: usize = aggs.iter().map(|a| a.words).sum::<usize>().max(1);
        let zeros = |len: usize| -> Result<Arc<cudarc::driver::CudaSlice<u8>>> {
            Ok(Arc::new(
                stream
                    .alloc_zeros::<u8>(len)
                    .map_err(GpuError::driver("cuMemAlloc (group table)"))?,
            ))
        };
        let cache = crate::compile::cache();
        let cc = dev.info.compute_capability;
        let init = cache.function_named(&dev.ctx, kernel, cc, "eddy_group_init")?;
        let compact = cache.function_named(&dev.ctx, kernel, cc, "eddy_group_compact")?;
        let table = GroupTable {
            cap,
            nkw,
            nacc,
            state: zeros(cap * 4)?,
            keys: zeros(cap * nkw * 8)?,
            acc: zeros(cap * nacc * 8)?,
            overflow: zeros(4)?,
            err: zeros(4)?,
            compact,
            blocks: grid_for(dev, cap),
        };
        // MIN/MAX start from the extremes; sums and counts from zero.
        if aggs.iter().any(|a| a.init().iter().any(|w| *w != 0)) {
            let cap64 = cap as u64;
            let mut b = stream.launch_builder(&init);
            b.arg(table.acc.as_ref());
            b.arg(&cap64);
            // SAFETY: `eddy_group_init(acc, cap)` writes cap * EDDY_NACC words,
            // the size of `acc`.
            unsafe { b.launch(table.config()) }
                .map_err(GpuError::driver("cuLaunchKernel (group init)"))?;
            GpuMetrics::add(&GPU_METRICS.kernel_launches, 1);
        }
        stream
            .synchronize()
            .map_err(GpuError::driver("cuStreamSynchronize"))?;
        Ok(table)
    }

    fn config(&self) -> cudarc::driver::LaunchConfig {
        cudarc::driver::LaunchConfig {
            grid_dim: (self.blocks, 1, 1),
            block_dim: (crate::codegen::kernels::BLOCK_THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// The argument of a group-table parameter, None for other parameters.
    pub(crate) fn arg(&self, p: &Param) -> Option<Arg> {
        Some(match p {
            Param::GroupState => Arg::Dev(Arc::clone(&self.state)),
            Param::GroupKeys => Arg::Dev(Arc::clone(&self.keys)),
            Param::GroupAcc => Arg::Dev(Arc::clone(&self.acc)),
            Param::GroupMask => Arg::U64(self.cap as u64 - 1),
            Param::Overflow => Arg::Dev(Arc::clone(&self.overflow)),
            Param::Err => Arg::Dev(Arc::clone(&self.err)),
            _ => return None,
        })
    }

    /// Ends a pass: records the host time spent submitting, waits for
    /// every slot of `pipeline` (the kernels that add into the table), and
    /// reads the table back ([`GroupTable::read`]).
    pub(crate) fn finish(
        &self,
        pipeline: &mut crate::datapath::Pipeline,
        stream: &Arc<cudarc::driver::CudaStream>,
        kernel: &str,
        submit_ns: u64,
    ) -> Result<Option<GroupContents>> {
        GpuMetrics::add(&GPU_METRICS.submit_ns, submit_ns);
        let complete_started = std::time::Instant::now();
        for s in &mut pipeline.slots {
            s.reset()?;
        }
        let contents = self.read(stream, kernel)?;
        GpuMetrics::add_elapsed(&GPU_METRICS.complete_ns, complete_started);
        Ok(contents)
    }

    /// Reads the table back once every kernel that adds into it has
    /// finished: the flags, then only the ready groups, gathered on the
    /// device. `Ok(None)`: it overflowed (retry larger); an error when a
    /// row raised an SQL error (the CPU plan then raises it).
    pub(crate) fn read(
        &self,
        stream: &Arc<cudarc::driver::CudaStream>,
        kernel: &str,
    ) -> Result<Option<GroupContents>> {
        let down = |b: &cudarc::driver::CudaView<'_, u8>| -> Result<Vec<u8>> {
            let v = stream
                .clone_dtoh(b)
                .map_err(GpuError::driver("cuMemcpyDtoH (group table)"))?;
            GpuMetrics::add(&GPU_METRICS.bytes_d2h, v.len() as u64);
            Ok(v)
        };
        if flag(&down(&self.err.slice(..))?) {
            return Err(GpuError::Internal(format!(
                "row error flagged by the {kernel} kernel"
            )));
        }
        if flag(&down(&self.overflow.slice(..))?) {
            return Ok(None);
        }
        let width = self.nkw + self.nacc;
        let out = stream
            .alloc_zeros::<u8>(self.cap * width * 8)
            .map_err(GpuError::driver("cuMemAlloc (group gather)"))?;
        let count = stream
            .alloc_zeros::<u8>(8)
            .map_err(GpuError::driver("cuMemAlloc (group count)"))?;
        let cap64 = self.cap as u64;
        let mut b = stream.launch_builder(&self.compact);
        b.arg(self.state.as_ref());
        b.arg(self.keys.as_ref());
        b.arg(self.acc.as_ref());
        b.arg(&cap64);
        b.arg(&out);
        b.arg(&count);
        // SAFETY: `eddy_group_compact` reads the table's cap slots and writes
        // at most cap groups of `width` words into `out`, sized for that.
        unsafe { b.launch(self.config()) }
            .map_err(GpuError::driver("cuLaunchKernel (group compact)"))?;
        GpuMetrics::add(&GPU_METRICS.kernel_launches, 1);
        let n = u64s(&down(&count.slice(..))?).first().copied().unwrap_or(0) as usize;
        if n > self.cap {
            return Err(GpuError::Internal("group count past the table".into()));
        }
        let words = if n == 0 {
            Vec::new()
        } else {
            u64s(&down(&out.slice(..n * width * 8))?)
        };
        let mut keys = Vec::with_capacity(n * self.nkw);
        let mut acc = Vec::with_capacity(n * self.nacc);
        for g in words.chunks_exact(width) {
            keys.extend_from_slice(&g[..self.nkw]);
            acc.extend_from_slice(&g[self.nkw..]);
        }
        Ok(Some(GroupContents {
            slots: (0..n).collect(),
            keys,
            acc,
        }))
    }

    /// Partial states in `schema` (the Partial AggregateExec's output):
    /// group keys first (key `k` a string when `string_key[k]` names its
    /// interner), then each aggregate's state columns.
    pub(crate) fn decode(
        &self,
        contents: &GroupContents,
        schema: &SchemaRef,
        string_key: &[Option<usize>],
        aggs: &[AggSlot],
        interners: &[Interner],
    ) -> Result<RecordBatch> {
        decode_partial(
            schema,
            string_key,
            aggs,
            &contents.slots,
            &contents.keys,
            &contents.acc,
            self.nkw,
            self.nacc,
            interners,
        )
    }
}

pub(crate) const INITIAL_SLOTS: usize = 1 << 16;

impl PreAggJob {
    async fn run(
        self,
        partition: usize,
        ctx: Arc<TaskContext>,
        rt: Arc<GpuRuntime>,
    ) -> DfResult<SendableRecordBatchStream> {
        let mut cap = INITIAL_SLOTS;
        for _attempt in 0..3 {
            match self.attempt(partition, &ctx, &rt, cap).await {
                Ok(Some(batch)) => {
                    let s = futures::stream::iter(vec![Ok(batch)]);
                    return Ok(Box::pin(RecordBatchStreamAdapter::new(
                        Arc::clone(&self.schema),
                        s,
                    )));
                }
                Ok(None) => cap *= 8, // the table overflowed: retry larger
                Err(AttemptError::Df(e)) => return Err(e),
                Err(AttemptError::Gpu(e)) => {
                    return fallback("GpuPreAggExec", &self.cpu, partition, ctx, &e)
                }
            }
        }
        let e = GpuError::Overflow {
            kernel: "eddy_preagg".into(),
            retries: 3,
        };
        fallback("GpuPreAggExec", &self.cpu, partition, ctx, &e)
    }

    /// One pass over the input. `Ok(None)`: the table overflowed.
    async fn attempt(
        &self,
        partition: usize,
        ctx: &Arc<TaskContext>,
        rt: &Arc<GpuRuntime>,
        cap: usize,
    ) -> std::result::Result<Option<RecordBatch>, AttemptError> {
        let dev = rt.device_for(partition)?;
        let func = crate::compile::cache().function(
            &dev.ctx,
            &self.kernel,
            dev.info.compute_capability,
        )?;
        let stream = &dev.streams[0];
        let table = GroupTable::alloc(dev, &self.kernel, cap, self.keys.len())?;
        let mut pipeline = Pipeline::for_device(dev)?;
        let mut interners: Vec<Interner> = self
            .string_keys
            .iter()
            .map(|_| Interner::default())
            .collect();
        let mut dict_sets = DictSets::default();
        let mut input = super::coalesced(
            self.input
                .execute(partition, Arc::clone(ctx))
                .map_err(AttemptError::Df)?,
        );
        let mut submit_ns = 0u64;
        while let Some(batch) = input.next().await {
            let batch = batch.map_err(AttemptError::Df)?;
            let batch_started = std::time::Instant::now();
            if batch.num_rows() == 0 {
                continue;
            }
            let mut cols = batch.columns().to_vec();
            for (k, idx) in self.string_keys.iter().enumerate() {
                cols[*idx] = interners[k].encode(&cols[*idx])?;
            }
            let kb = RecordBatch::try_new(Arc::clone(&self.kernel_schema), cols)?;
            let sets = dict_sets.for_batch(&self.kernel, &self.kernel_schema, &kb)?;
            let si = pipeline.next_slot()?;
            let slot = &mut pipeline.slots[si];
            let inputs = stage_batch(slot, dev, &self.kernel, &kb, &sets, 0)?;
            let mut args = Vec::new();
            for p in &self.kernel.params {
                if let Some(a) = common_arg(p, &inputs)? {
                    args.push(a);
                    continue;
                }
                args.push(
                    table.arg(p).ok_or_else(|| {
                        GpuError::Internal(format!("preagg kernel parameter {p:?}"))
                    })?,
                );
            }
            launch(slot, &func, grid_for(dev, kb.num_rows()), &args)?;
            GpuMetrics::add(&GPU_METRICS.rows_processed, kb.num_rows() as u64);
            submit_ns += u64::try_from(batch_started.elapsed().as_nanos()).unwrap_or(0);
        }
        let Some(contents) = table.finish(&mut pipeline, stream, "preagg", submit_ns)? else {
            return Ok(None);
        };
        let string_key: Vec<Option<usize>> = self
            .keys
            .iter()
            .map(|k| {
                k.downcast_ref::<Column>()
                    .and_then(|c| self.string_keys.iter().position(|i| *i == c.index()))
            })
            .collect();
        Ok(Some(table.decode(
            &contents,
            &self.schema,
            &string_key,
            &self.kernel.aggs,
            &interners,
        )?))
    }
}

/// Partial states, in the Partial AggregateExec's output schema; see
/// [`GroupTable::decode`].
#[allow(clippy::too_many_arguments)]
fn decode_partial(
    schema: &SchemaRef,
    string_key: &[Option<usize>],
    aggs: &[AggSlot],
    slots: &[usize],
    keys: &[u64],
    acc: &[u64],
    nkw: usize,
    nacc: usize,
    interners: &[Interner],
) -> Result<RecordBatch> {
    let mut cols: Vec<ArrayRef> = Vec::new();
    let fields = schema.fields();
    for (k, string_pos) in string_key.iter().enumerate() {
        let dt = fields[k].data_type();
        let vals: Vec<Option<i128>> = slots
            .iter()
            .map(|s| {
                let null = keys[s * nkw + nkw - 1] & (1 << k) != 0;
                (!null).then(|| i128::from(keys[s * nkw + k] as i64))
            })
            .collect();
        cols.push(match string_pos {
            Some(p) => {
                let p = *p;
                let strings: StringArray = vals
                    .iter()
                    .map(|v| {
                        v.and_then(|c| interners[p].strings.get(c as usize).map(|s| s.as_str()))
                    })
                    .collect();
                cast(&(Arc::new(strings) as ArrayRef), dt)?
            }
            None => typed(vals.into_iter().map(|v| v.map(Num::I)).collect(), dt)?,
        });
    }
    let mut f = string_key.len();
    for a in aggs {
        let w = |s: usize, i: usize| acc[s * nacc + a.offset + i];
        let float = a.arg_ty.is_some_and(|t| t.is_float());
        let sum = |s: usize| -> Num {
            if float {
                Num::F(f64::from_bits(w(s, 0)))
            } else {
                Num::I((i128::from(w(s, 1) as i64) << 64) | i128::from(w(s, 0)))
            }
        };
        let cnt_word = match (a.func, float) {
            (AggFunc::Sum | AggFunc::Avg, false) => 2,
            _ => 1,
        };
        match a.func {
            AggFunc::CountStar | AggFunc::Count => {
                cols.push(typed(
                    slots
                        .iter()
                        .map(|s| Some(Num::I(i128::from(w(*s, 0)))))
                        .collect(),
                    fields[f].data_type(),
                )?);
                f += 1;
            }
            AggFunc::Sum => {
                cols.push(typed(
                    slots
                        .iter()
                        .map(|s| (w(*s, cnt_word) > 0).then(|| sum(*s)))
                        .collect(),
                    fields[f].data_type(),
                )?);
                f += 1;
            }
            AggFunc::Min | AggFunc::Max => {
                let v = |s: usize| {
                    if float {
                        Num::F(f64::from_bits(w(s, 0)))
                    } else {
                        Num::I(i128::from(w(s, 0) as i64))
                    }
                };
                cols.push(typed(
                    slots
                        .iter()
                        .map(|s| (w(*s, 1) > 0).then(|| v(*s)))
                        .collect(),
                    fields[f].data_type(),
                )?);
                f += 1;
            }
            AggFunc::Avg => {
                cols.push(typed(
                    slots
                        .iter()
                        .map(|s| Some(Num::I(i128::from(w(*s, cnt_word)))))
                        .collect(),
                    fields[f].data_type(),
                )?);
                cols.push(typed(
                    slots
                        .iter()
                        .map(|s| (w(*s, cnt_word) > 0).then(|| sum(*s)))
                        .collect(),
                    fields[f + 1].data_type(),
                )?);
                f += 2;
            }
        }
    }
    Ok(RecordBatch::try_new(Arc::clone(schema), cols)?)
}

pub(crate) enum AttemptError {
    Df(DataFusionError),
    Gpu(GpuError),
}

impl From<GpuError> for AttemptError {
    fn from(e: GpuError) -> Self {
        AttemptError::Gpu(e)
    }
}

impl From<arrow::error::ArrowError> for AttemptError {
    fn from(e: arrow::error::ArrowError) -> Self {
        AttemptError::Df(e.into())
    }
}

fn u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect()
}

/// A decoded number: integers (and scaled decimals) or floats.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Num {
    I(i128),
    F(f64),
}

/// An Arrow array of `dt` from decoded numbers (integers wrap like
/// DataFusion's: a SUM(Int64) state is the 128-bit sum truncated).
pub(crate) fn typed(vals: Vec<Option<Num>>, dt: &DataType) -> Result<ArrayRef> {
    let as_f = |n: Num| match n {
        Num::I(i) => i as f64,
        Num::F(f) => f,
    };
    let as_i = |n: Num| match n {
        Num::I(i) => i,
        Num::F(f) => f as i128,
    };
    Ok(match dt {
        DataType::Float64 | DataType::Float32 | DataType::Float16 => {
            let a: ArrayRef = Arc::new(
                vals.into_iter()
                    .map(|v| v.map(as_f))
                    .collect::<Float64Array>(),
            );
            cast(&a, dt)?
        }
        DataType::Decimal128(p, s) => Arc::new(
            vals.into_iter()
                .map(|v| v.map(as_i))
                .collect::<Decimal128Array>()
                .with_precision_and_scale(*p, *s)?,
        ),
        DataType::UInt64 => Arc::new(
            vals.into_iter()
                .map(|v| v.map(|n| as_i(n) as u64))
                .collect::<UInt64Array>(),
        ),
        DataType::Date32 => {
            let a: ArrayRef = Arc::new(
                vals.into_iter()
                    .map(|v| v.map(|n| as_i(n) as i32))
                    .collect::<arrow::array::Int32Array>(),
            );
            cast(&a, dt)?
        }
        _ => {
            let a: ArrayRef = Arc::new(
                vals.into_iter()
                    .map(|v| v.map(|n| as_i(n) as i64))
                    .collect::<Int64Array>(),
            );
            if a.data_type() == dt {
                a
            } else {
                cast(&a, dt)?
            }
        }
    })
}
