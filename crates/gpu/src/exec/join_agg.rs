//! `GpuJoinAggExec`: a star join and the partial aggregation above it,
//! fused into one kernel per chunk (`eddy_join_preagg`).
//!
//! Replaces `AggregateExec(Partial)` over (column or computed projections
//! over) a chain of inner hash joins that [`GpuJoinExec`] accepts. As two
//! operators, every chunk of fact rows made two round trips: the join's
//! matched build row ids came back, the host gathered the joined rows with
//! Arrow `take`, and GpuPreAgg copied them to the device again. Fused, the
//! fact chunk goes to the device once; build columns the grouping reads
//! (`d_year`, `p_brand1` as codes, ...) are uploaded once per device next to
//! the build tables; the group table is read back once per partition.
//!
//! Invariants:
//! * The answer is the CPU plan's: the partial states have exactly the
//!   replaced aggregate's output schema, and anything the device path cannot
//!   do (a device error, a row error such as division by zero, a group table
//!   still full after two enlargements) runs the whole partition's CPU plan.
//! * String group keys must be build-side columns; they are interned to
//!   dense codes once, when the build sides are collected, and decoded at the
//!   end. A string key from the fact side is a planning refusal (the
//!   unfused operators then handle the plan).

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};
use parking_lot::Mutex;

use super::join::{JoinSource, Tables};
use super::preagg::{aggregate_specs, is_string, AttemptError, GroupTable, Interner};
use super::{
    common_arg, device_allowed, fallback, grid_for, launch, rebuild, stage_batch, Arg, DictSets,
    GpuJoinExec,
};
use crate::codegen::kernels::{AggSpec, BuildTable, JoinLevelSpec, KernelSource, Param};
use crate::codegen::{JoinAggKernelSpec, Unsupported};
use crate::datapath::Pipeline;
use crate::device::{runtime, GpuDevice, GpuRuntime};
use crate::error::{GpuError, Result};
use crate::metrics::{GpuMetrics, GPU_METRICS};
use crate::resident::{ResidentColumn, ResidentSource};

/// A build column on one device: values and validity (None: no NULLs).
type DeviceColumn = crate::datapath::KeptColumn;

/// What every partition shares once the build sides are collected.
struct BuildState {
    tables: Arc<Tables>,
    /// Per string group key (in key order), its codes.
    interners: Vec<Interner>,
    /// Virtual column → the build column as the kernel reads it (string
    /// keys as their codes).
    columns: HashMap<usize, ArrayRef>,
    /// Per device ordinal: the build columns uploaded there.
    device: Mutex<HashMap<usize, Arc<HashMap<usize, DeviceColumn>>>>,
    /// The kernel for the build layouts the tables took, generated once
    /// for every partition, and the same kernel's view staged per chunk
    /// (its fact columns only); why not, if the layouts cannot be served.
    kernel: std::result::Result<(Arc<KernelSource>, Arc<KernelSource>), Unsupported>,
}

/// The fused operator; see the module doc.
#[derive(Debug)]
pub struct GpuJoinAggExec {
    /// The star join this replaces with its aggregate (a [`GpuJoinExec`]);
    /// its build sides are this operator's children after the fact input.
    join: Arc<dyn ExecutionPlan>,
    /// The fact input, then each build side.
    children: Vec<Arc<dyn ExecutionPlan>>,
    /// The fact side's filter taken into the kernel, if any.
    fact_filter: Option<FactFilter>,
    template: Arc<dyn ExecutionPlan>,
    paths: Vec<Vec<usize>>,
    cpu: Arc<dyn ExecutionPlan>,
    spec: JoinAggKernelSpec,
    /// Per group key: the index of its interner when it is a string.
    string_key: Vec<Option<usize>>,
    /// Virtual columns of the string keys, in interner order.
    string_columns: Vec<usize>,
    /// Build columns the kernel reads (virtual indices).
    build_reads: Vec<usize>,
    display: String,
    state: Arc<futures::lock::Mutex<Option<Arc<BuildState>>>>,
}

/// A filter on the join's fact side (`[ProjectionExec of columns]
/// FilterExec input`) evaluated by the fused kernel: the operator then reads
/// the filter's input.
#[derive(Debug, Clone)]
pub struct FactFilter {
    /// The filter subtree (its top node), kept for the CPU plan.
    pub chain: Arc<dyn ExecutionPlan>,
    /// Child steps from `chain` to the filter's input.
    pub depth: usize,
    /// The predicate, over the filter's input.
    pub predicate: Arc<dyn PhysicalExpr>,
    /// For each output column of `chain`, its column of the filter's input.
    pub columns: Vec<usize>,
}

impl FactFilter {
    /// The filter of `fact`, when it is `[ProjectionExec of columns]
    /// FilterExec` without a row limit.
    pub fn of(fact: &Arc<dyn ExecutionPlan>) -> Option<FactFilter> {
        use datafusion::physical_plan::filter::FilterExec;
        let (projection, filter_node) = match fact.downcast_ref::<ProjectionExec>() {
            Some(p) => (Some(p), p.input()),
            None => (None, fact),
        };
        let f = filter_node.downcast_ref::<FilterExec>()?;
        if f.fetch().is_some() {
            return None;
        }
        let n = f.input().schema().fields().len();
        let filter_columns: Vec<usize> = match f.projection() {
            Some(p) => p.to_vec(),
            None => (0..n).collect(),
        };
        let columns = match projection {
            Some(p) => p
                .expr()
                .iter()
                .map(|e| {
                    e.expr
                        .downcast_ref::<Column>()
                        .and_then(|c| filter_columns.get(c.index()).copied())
                })
                .collect::<Option<Vec<_>>>()?,
            None => filter_columns,
        };
        Some(FactFilter {
            chain: Arc::clone(fact),
            depth: 1 + usize::from(projection.is_some()),
            predicate: Arc::clone(f.predicate()),
            columns,
        })
    }

    /// The filter's input.
    fn input(&self) -> Option<Arc<dyn ExecutionPlan>> {
        let mut cur = Arc::clone(&self.chain);
        for _ in 0..self.depth {
            let next = cur.children().first().map(|c| Arc::clone(*c))?;
            cur = next;
        }
        Some(cur)
    }
}

/// `e` over the chain's output, rewritten over the filter's input.
fn through_filter(
    e: &Arc<dyn PhysicalExpr>,
    columns: &[usize],
    schema: &Schema,
) -> std::result::Result<Arc<dyn PhysicalExpr>, Unsupported> {
    Arc::clone(e)
        .transform(|n| {
            if let Some(c) = n.downcast_ref::<Column>() {
                return match columns.get(c.index()) {
                    Some(i) => Ok(Transformed::yes(Arc::new(Column::new(
                        schema.field(*i).name(),
                        *i,
                    ))
                        as Arc<dyn PhysicalExpr>)),
                    None => datafusion::common::internal_err!("fact column out of range"),
                };
            }
            Ok(Transformed::no(n))
        })
        .map(|t| t.data)
        .map_err(|e| Unsupported::expr(e.to_string()))
}

impl fmt::Debug for BuildState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuildState")
            .field("levels", &self.tables.host.len())
            .finish()
    }
}

/// `e` with every column of `p`'s output replaced by its expression over
/// `p`'s input.
fn inline_projection(
    e: &Arc<dyn PhysicalExpr>,
    p: &ProjectionExec,
) -> std::result::Result<Arc<dyn PhysicalExpr>, Unsupported> {
    Arc::clone(e)
        .transform(|n| {
            if let Some(c) = n.downcast_ref::<Column>() {
                return match p.expr().get(c.index()) {
                    Some(pe) => Ok(Transformed::yes(Arc::clone(&pe.expr))),
                    None => datafusion::common::internal_err!("projection column out of range"),
                };
            }
            Ok(Transformed::no(n))
        })
        .map(|t| t.data)
        .map_err(|e| Unsupported::expr(e.to_string()))
}

/// `e` over the join chain's output, rewritten over the virtual schema.
fn to_virtual(
    e: &Arc<dyn PhysicalExpr>,
    sources: &[JoinSource],
    fact_columns: &[usize],
    offsets: &[usize],
    schema: &Schema,
) -> std::result::Result<Arc<dyn PhysicalExpr>, Unsupported> {
    Arc::clone(e)
        .transform(|n| {
            if let Some(c) = n.downcast_ref::<Column>() {
                let v = match sources.get(c.index()) {
                    Some(JoinSource::Fact(i)) => match fact_columns.get(*i) {
                        Some(f) => *f,
                        None => return datafusion::common::internal_err!("fact column"),
                    },
                    Some(JoinSource::Build { level, column }) => match offsets.get(*level) {
                        Some(o) => o + column,
                        None => return datafusion::common::internal_err!("join level"),
                    },
                    None => return datafusion::common::internal_err!("join column out of range"),
                };
                return Ok(Transformed::yes(
                    Arc::new(Column::new(schema.field(v).name(), v)) as Arc<dyn PhysicalExpr>,
                ));
            }
            Ok(Transformed::no(n))
        })
        .map(|t| t.data)
        .map_err(|e| Unsupported::expr(e.to_string()))
}

impl GpuJoinAggExec {
    /// Builds the operator from a Partial `AggregateExec` (`template`), its
    /// projections down to the join chain (top first, each over the next),
    /// and the [`GpuJoinExec`] planned for that chain (`join`, whose
    /// `template` is the chain's top join).
    pub fn try_new(
        template: Arc<dyn ExecutionPlan>,
        projections: &[Arc<dyn ExecutionPlan>],
        join: Arc<dyn ExecutionPlan>,
        fact_filter: Option<FactFilter>,
    ) -> Result<Self> {
        let agg = template
            .downcast_ref::<AggregateExec>()
            .ok_or_else(|| GpuError::Unsupported(Unsupported::operator("not an AggregateExec")))?;
        let (keys, aggs) = aggregate_specs(agg)?;
        let j = join
            .downcast_ref::<GpuJoinExec>()
            .ok_or_else(|| GpuError::Internal("fused join is not a GpuJoinExec".into()))?;
        let children = join.children();
        let join_fact = children
            .first()
            .map(|c| Arc::clone(*c))
            .ok_or_else(|| GpuError::Internal("join without a fact input".into()))?;
        // The fact input the kernel reads: the filter's input when the
        // fact side's filter is taken in, and each join fact column's place
        // in it.
        let (fact, fact_columns) = match &fact_filter {
            Some(ff) => (
                ff.input()
                    .ok_or_else(|| GpuError::Internal("fact filter without input".into()))?,
                ff.columns.clone(),
            ),
            None => {
                let n = join_fact.schema().fields().len();
                (Arc::clone(&join_fact), (0..n).collect())
            }
        };
        let fact_schema = fact.schema();
        // The virtual schema: fact columns, then each level's build columns.
        let mut fields: Vec<Field> = fact_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let nf = fields.len();
        let mut offsets = Vec::new();
        let mut build_columns: Vec<Range<usize>> = Vec::new();
        for b in children.iter().skip(1) {
            let start = fields.len();
            offsets.push(start);
            fields.extend(b.schema().fields().iter().map(|f| f.as_ref().clone()));
            build_columns.push(start..fields.len());
        }
        let plain = Schema::new(fields.clone());
        let map = |e: &Arc<dyn PhysicalExpr>| -> std::result::Result<_, Unsupported> {
            let mut e = Arc::clone(e);
            for p in projections {
                let p = p
                    .downcast_ref::<ProjectionExec>()
                    .ok_or_else(|| Unsupported::operator("not a projection"))?;
                e = inline_projection(&e, p)?;
            }
            to_virtual(&e, j.sources(), &fact_columns, &offsets, &plain)
        };
        let keys = keys
            .iter()
            .map(map)
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let aggs = aggs
            .iter()
            .map(|a| {
                Ok(AggSpec {
                    func: a.func,
                    arg: a.arg.as_ref().map(map).transpose()?,
                })
            })
            .collect::<std::result::Result<Vec<_>, Unsupported>>()?;
        // String keys: build columns, read as codes.
        let mut string_key = Vec::new();
        let mut string_columns = Vec::new();
        for k in &keys {
            let dt = k
                .data_type(&plain)
                .map_err(|x| Unsupported::expr(x.to_string()))?;
            if !is_string(&dt) {
                string_key.push(None);
                continue;
            }
            let c = k
                .downcast_ref::<Column>()
                .filter(|c| c.index() >= nf)
                .ok_or_else(|| {
                    Unsupported::expr(format!("string group key {k} is not a build column"))
                })?;
            string_key.push(Some(string_columns.len()));
            string_columns.push(c.index());
            fields[c.index()] = Field::new(fields[c.index()].name(), DataType::UInt32, true);
        }
        let spec = JoinAggKernelSpec {
            schema: Arc::new(Schema::new(fields)),
            fact_columns: nf,
            build_columns,
            filter: fact_filter.as_ref().map(|f| Arc::clone(&f.predicate)),
            levels: j
                .probe_keys()
                .iter()
                .map(|k| {
                    Ok(JoinLevelSpec {
                        probe_key: through_filter(k, &fact_columns, &plain)?,
                        table: BuildTable::Hash,
                    })
                })
                .collect::<std::result::Result<Vec<_>, Unsupported>>()?,
            keys,
            aggs,
        };
        let kernel = spec.generate()?;
        let build_reads = kernel
            .columns
            .iter()
            .map(|c| c.index)
            .filter(|i| *i >= nf)
            .collect();
        let prefix = vec![0usize; 1 + projections.len()];
        let mut paths: Vec<Vec<usize>> = j
            .paths()
            .iter()
            .map(|p| prefix.iter().chain(p).copied().collect())
            .collect();
        if let (Some(ff), Some(p)) = (&fact_filter, paths.first_mut()) {
            p.extend(std::iter::repeat_n(0, ff.depth));
        }
        let mut kids: Vec<Arc<dyn ExecutionPlan>> = children.into_iter().cloned().collect();
        if let Some(k) = kids.first_mut() {
            *k = Arc::clone(&fact);
        }
        let cpu = rebuild(&template, &paths, &kids)?;
        let display = format!(
            "GpuJoinAggExec: levels={}, {}gby=[{}], aggr=[{}], join and partial aggregation fused in one kernel, final aggregation on CPU",
            j.levels(),
            spec.filter
                .as_ref()
                .map(|f| format!("fact filter={f}, "))
                .unwrap_or_default(),
            spec.keys
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            spec.aggs
                .iter()
                .map(|a| match &a.arg {
                    Some(x) => format!("{:?}({x})", a.func),
                    None => format!("{:?}", a.func),
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(GpuJoinAggExec {
            join,
            children: kids,
            fact_filter,
            template,
            paths,
            cpu,
            spec,
            string_key,
            string_columns,
            build_reads,
            display,
            state: Arc::new(futures::lock::Mutex::new(None)),
        })
    }

    /// The kernel's specification (build layouts as planned: hashed).
    pub fn spec(&self) -> &JoinAggKernelSpec {
        &self.spec
    }

    /// Number of fused join levels.
    pub fn levels(&self) -> usize {
        self.spec.levels.len()
    }

    /// The kernel for the build layouts the run picks (`kinds`, one per
    /// level).
    pub fn kernel_for(
        &self,
        kinds: &[BuildTable],
    ) -> std::result::Result<KernelSource, Unsupported> {
        let mut spec = self.spec.clone();
        for (lv, k) in spec.levels.iter_mut().zip(kinds) {
            lv.table = *k;
        }
        spec.generate()
    }
}

impl DisplayAs for GpuJoinAggExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.display)?;
        // Whether the fact input can be read from device memory kept
        // between queries; each partition decides when it runs (a piece
        // with deleted or newer rows is staged instead).
        if self
            .children
            .first()
            .is_some_and(|c| crate::resident::source_of(c).is_some())
        {
            write!(f, ", fact columns device-resident where whole")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for GpuJoinAggExec {
    fn name(&self) -> &str {
        "GpuJoinAggExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.cpu.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.children.iter().collect()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        self.join.apply_expressions(f)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if children.len() != self.children.len() {
            return datafusion::common::internal_err!("GpuJoinAggExec: wrong number of children");
        }
        let mut join_children = children.clone();
        if let (Some(ff), Some(first)) = (&self.fact_filter, join_children.first_mut()) {
            *first = rebuild(&ff.chain, &[vec![0; ff.depth]], std::slice::from_ref(first))?;
        }
        let join = datafusion::physical_plan::execution_plan::replace_children_if_necessary(
            Arc::clone(&self.join),
            join_children,
        )?;
        let cpu = rebuild(&self.template, &self.paths, &children)?;
        Ok(Arc::new(GpuJoinAggExec {
            join,
            children,
            fact_filter: self.fact_filter.clone(),
            template: Arc::clone(&self.template),
            paths: self.paths.clone(),
            cpu,
            spec: self.spec.clone(),
            string_key: self.string_key.clone(),
            string_columns: self.string_columns.clone(),
            build_reads: self.build_reads.clone(),
            display: self.display.clone(),
            state: Arc::new(futures::lock::Mutex::new(None)),
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
            Err(e) => return fallback("GpuJoinAggExec", &self.cpu, partition, context, &e),
        };
        let job = JoinAggJob {
            join: Arc::clone(&self.join),
            fact: Arc::clone(&self.children[0]),
            cpu: Arc::clone(&self.cpu),
            spec: self.spec.clone(),
            string_key: self.string_key.clone(),
            string_columns: self.string_columns.clone(),
            build_reads: self.build_reads.clone(),
            state: Arc::clone(&self.state),
            schema: self.schema(),
            resident: crate::resident::source_of(&self.children[0]),
        };
        let schema = self.schema();
        let s = futures::stream::once(async move { job.run(partition, context, rt).await })
            .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, s)))
    }
}

/// What a running partition needs of the operator.
struct JoinAggJob {
    join: Arc<dyn ExecutionPlan>,
    fact: Arc<dyn ExecutionPlan>,
    cpu: Arc<dyn ExecutionPlan>,
    spec: JoinAggKernelSpec,
    string_key: Vec<Option<usize>>,
    string_columns: Vec<usize>,
    build_reads: Vec<usize>,
    state: Arc<futures::lock::Mutex<Option<Arc<BuildState>>>>,
    schema: SchemaRef,
    /// The fact input's immutable pieces, when it is a scan that has them.
    resident: Option<Arc<dyn ResidentSource>>,
}

impl JoinAggJob {
    fn gpu_join(&self) -> DfResult<&GpuJoinExec> {
        self.join
            .downcast_ref::<GpuJoinExec>()
            .ok_or_else(|| DataFusionError::Internal("fused join is not a GpuJoinExec".into()))
    }

    /// The build sides and the build columns the kernel reads, collected
    /// once for all partitions.
    async fn build_state(&self, ctx: &Arc<TaskContext>) -> DfResult<Arc<BuildState>> {
        let mut g = self.state.lock().await;
        if let Some(s) = g.as_ref() {
            return Ok(Arc::clone(s));
        }
        let tables = self.gpu_join()?.tables(ctx).await?;
        let mut interners: Vec<Interner> = self
            .string_columns
            .iter()
            .map(|_| Interner::default())
            .collect();
        let mut columns = HashMap::new();
        for v in &self.build_reads {
            let level = self
                .spec
                .level_of(*v)
                .ok_or_else(|| DataFusionError::Internal("build column level".into()))?;
            let start = self.spec.build_columns[level].start;
            let host = tables
                .host
                .get(level)
                .ok_or_else(|| DataFusionError::Internal("build level".into()))?;
            let array = Arc::clone(host.batch.column(v - start));
            let array = match self.string_columns.iter().position(|c| c == v) {
                Some(i) => interners[i]
                    .encode(&array)
                    .map_err(|e| DataFusionError::External(Box::new(e)))?,
                None => array,
            };
            columns.insert(*v, array);
        }
        let mut spec = self.spec.clone();
        for (lv, t) in spec.levels.iter_mut().zip(&tables.host) {
            lv.table = t.kind;
        }
        let kernel = spec.generate().map(|k| {
            let mut fact_view = k.clone();
            fact_view
                .columns
                .retain(|c| c.index < self.spec.fact_columns);
            (Arc::new(k), Arc::new(fact_view))
        });
        let s = Arc::new(BuildState {
            tables,
            interners,
            columns,
            device: Mutex::new(HashMap::new()),
            kernel,
        });
        *g = Some(Arc::clone(&s));
        Ok(s)
    }

    async fn run(
        self,
        partition: usize,
        ctx: Arc<TaskContext>,
        rt: Arc<GpuRuntime>,
    ) -> DfResult<SendableRecordBatchStream> {
        let state = self.build_state(&ctx).await?;
        let (kernel, fact_view) = match &state.kernel {
            Ok((k, v)) => (Arc::clone(k), Arc::clone(v)),
            Err(u) => {
                return fallback(
                    "GpuJoinAggExec",
                    &self.cpu,
                    partition,
                    ctx,
                    &GpuError::Unsupported(u.clone()),
                )
            }
        };
        let mut cap = super::preagg::INITIAL_SLOTS;
        for _attempt in 0..3 {
            match self
                .attempt(partition, &ctx, &rt, &state, (&kernel, &fact_view), cap)
                .await
            {
                Ok(Some(batch)) => {
                    let s = futures::stream::iter(vec![Ok(batch)]);
                    return Ok(Box::pin(RecordBatchStreamAdapter::new(
                        Arc::clone(&self.schema),
                        s,
                    )));
                }
                Ok(None) => cap *= 8,
                Err(AttemptError::Df(e)) => return Err(e),
                Err(AttemptError::Gpu(e)) => {
                    return fallback("GpuJoinAggExec", &self.cpu, partition, ctx, &e)
                }
            }
        }
        let e = GpuError::Overflow {
            kernel: "eddy_join_preagg".into(),
            retries: 3,
        };
        fallback("GpuJoinAggExec", &self.cpu, partition, ctx, &e)
    }

    /// The build columns on `dev`, uploaded on first use.
    fn device_columns(
        &self,
        state: &BuildState,
        kernel: &KernelSource,
        dev: &GpuDevice,
    ) -> Result<Arc<HashMap<usize, DeviceColumn>>> {
        if let Some(c) = state.device.lock().get(&dev.info.ordinal) {
            return Ok(Arc::clone(c));
        }
        let stream = &dev.streams[0];
        let mut out = HashMap::new();
        for c in kernel
            .columns
            .iter()
            .filter(|c| c.index >= self.spec.fact_columns)
        {
            let array = state
                .columns
                .get(&c.index)
                .ok_or_else(|| GpuError::Internal("build column not collected".into()))?;
            let host = crate::datapath::host_column(array, c.ty)?;
            out.insert(
                c.index,
                crate::datapath::upload_column(stream, &host, "upload build column")?,
            );
        }
        stream
            .synchronize()
            .map_err(GpuError::driver("cuStreamSynchronize"))?;
        let out = Arc::new(out);
        state
            .device
            .lock()
            .insert(dev.info.ordinal, Arc::clone(&out));
        Ok(out)
    }

    /// One pass over the partition's fact rows. `Ok(None)`: the group
    /// table overflowed.
    async fn attempt(
        &self,
        partition: usize,
        ctx: &Arc<TaskContext>,
        rt: &Arc<GpuRuntime>,
        state: &BuildState,
        (kernel, fact_view): (&Arc<KernelSource>, &KernelSource),
        cap: usize,
    ) -> std::result::Result<Option<RecordBatch>, AttemptError> {
        let dev = rt.device_for(partition)?;
        let func =
            crate::compile::cache().function(&dev.ctx, kernel, dev.info.compute_capability)?;
        let tables = state.tables.on_device(dev)?;
        let build_cols = self.device_columns(state, kernel, dev)?;
        let stream = &dev.streams[0];
        let table = GroupTable::alloc(dev, kernel, cap, self.spec.keys.len())?;
        let fact = Arc::clone(&self.fact);
        let fact_schema = fact.schema();
        let mut pipeline = Pipeline::for_device(dev)?;
        let mut dict_sets = DictSets::default();
        // Every parameter but the fact side's (`fact` answers those, or
        // None for the ones it does not own).
        let arg_of = |p: &Param, fact: &dyn Fn(&Param) -> Result<Option<Arg>>| -> Result<Arg> {
            let build = match p {
                Param::Column(i) if *i >= self.spec.fact_columns => {
                    Some(build_cols.get(i).map(|c| Arg::Dev(Arc::clone(&c.0))))
                }
                Param::Validity(i) if *i >= self.spec.fact_columns => Some(
                    build_cols
                        .get(i)
                        .map(|c| c.1.as_ref().map_or(Arg::Null, |v| Arg::Dev(Arc::clone(v)))),
                ),
                _ => None,
            };
            if let Some(a) = build {
                return a.ok_or_else(|| GpuError::Internal("build column missing".into()));
            }
            if let Some(a) = fact(p)? {
                return Ok(a);
            }
            if let Some(a) = state.tables.arg(&tables, p) {
                return a;
            }
            table
                .arg(p)
                .ok_or_else(|| GpuError::Internal(format!("fused kernel parameter {p:?}")))
        };
        let mut submit_ns = 0u64;
        // Resident columns used by this pass, held until its streams are
        // synchronised (`table.finish`).
        let mut held: Vec<ResidentColumn> = Vec::new();
        let pieces = match &self.resident {
            Some(r) if fact_view.dict_params.is_empty() => r.pieces(partition),
            _ => None,
        };
        if let Some(pieces) = pieces {
            for piece in &pieces {
                let rows = piece.rows();
                if rows == 0 {
                    continue;
                }
                let started = std::time::Instant::now();
                let mut cols: HashMap<usize, ResidentColumn> = HashMap::new();
                for c in &fact_view.columns {
                    let rc = crate::resident::cache().column(dev, piece.as_ref(), c)?;
                    held.push(rc.clone());
                    cols.insert(c.index, rc);
                }
                let missing = || GpuError::Internal("resident column missing".into());
                let fact = |p: &Param| -> Result<Option<Arg>> {
                    Ok(Some(match p {
                        Param::Rows => Arg::I64(rows as i64),
                        Param::Column(i) => {
                            Arg::Dev(Arc::clone(&cols.get(i).ok_or_else(missing)?.values))
                        }
                        Param::Validity(i) => match &cols.get(i).ok_or_else(missing)?.validity {
                            Some(v) => Arg::Dev(Arc::clone(v)),
                            None => Arg::Null,
                        },
                        _ => return Ok(None),
                    }))
                };
                let args = kernel
                    .params
                    .iter()
                    .map(|p| arg_of(p, &fact))
                    .collect::<Result<Vec<_>>>()?;
                let si = pipeline.next_slot()?;
                launch(&pipeline.slots[si], &func, grid_for(dev, rows), &args)?;
                GpuMetrics::add(&GPU_METRICS.rows_processed, rows as u64);
                submit_ns += u64::try_from(started.elapsed().as_nanos()).unwrap_or(0);
            }
        } else {
            let mut input = super::coalesced(
                fact.execute(partition, Arc::clone(ctx))
                    .map_err(AttemptError::Df)?,
            );
            while let Some(batch) = input.next().await {
                let batch = batch.map_err(AttemptError::Df)?;
                let started = std::time::Instant::now();
                if batch.num_rows() == 0 {
                    continue;
                }
                let sets = dict_sets.for_batch(fact_view, &fact_schema, &batch)?;
                let si = pipeline.next_slot()?;
                let slot = &mut pipeline.slots[si];
                let inputs = stage_batch(slot, dev, fact_view, &batch, &sets, 0)?;
                let staged = |p: &Param| common_arg(p, &inputs);
                let args = kernel
                    .params
                    .iter()
                    .map(|p| arg_of(p, &staged))
                    .collect::<Result<Vec<_>>>()?;
                launch(slot, &func, grid_for(dev, batch.num_rows()), &args)?;
                GpuMetrics::add(&GPU_METRICS.rows_processed, batch.num_rows() as u64);
                submit_ns += u64::try_from(started.elapsed().as_nanos()).unwrap_or(0);
            }
        }
        let finished = table.finish(&mut pipeline, stream, "join_preagg", submit_ns)?;
        drop(held);
        let Some(contents) = finished else {
            return Ok(None);
        };
        Ok(Some(table.decode(
            &contents,
            &self.schema,
            &self.string_key,
            &kernel.aggs,
            &state.interners,
        )?))
    }
}
