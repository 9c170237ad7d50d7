//! `OffloadToGpu`: the physical optimizer rule that puts subtrees on the GPU.
//!
//! Runs after DataFusion's own rules (so joins already have their final
//! CollectLeft/Partitioned mode and aggregates their Partial/Final split),
//! top-down, and replaces:
//! * `ProjectionExec`? over `FilterExec` → [`GpuScanExec`];
//! * a chain of inner `HashJoinExec`s in CollectLeft mode, each probing the
//!   next with one equi-key and a build side that fits device memory →
//!   one [`GpuJoinExec`] (all levels fused in one kernel);
//! * `AggregateExec` in Partial mode with SUM/COUNT/MIN/MAX/AVG →
//!   [`GpuPreAggExec`] (the Final aggregate stays on the CPU).
//!
//! Each candidate is offloaded only when a device is present (or forced by
//! the test hook), `eddy.gpu` is not `off`, the input is above
//! `eddy.gpu_min_rows` in `auto` mode, and code generation succeeds. Every
//! candidate left on the CPU counts one fallback with its reason.

use std::sync::Arc;

use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{JoinType, NullEquality};
use datafusion::config::ConfigOptions;
use datafusion::error::Result as DfResult;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::ExecutionPlan;
use parking_lot::Mutex;

use crate::codegen::Unsupported;
use crate::exec::scan::ScanOutput;
use crate::exec::{GpuJoinExec, GpuPreAggExec, GpuScanExec};
use crate::metrics::{FallbackReason, GpuMetrics, GPU_METRICS};
use crate::mode::{GpuMode, GpuOptions};

/// A candidate: the GPU operator's name, the plan (or why not), and the
/// input whose size decides `auto` mode.
type Attempt = (
    &'static str,
    Result<Arc<dyn ExecutionPlan>, Unsupported>,
    Arc<dyn ExecutionPlan>,
);

/// One planning decision, for tests and debug logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The CPU operator considered (`FilterExec`, `HashJoinExec`, ...).
    pub operator: String,
    /// The GPU operator that replaced it, if any.
    pub offloaded_as: Option<&'static str>,
    /// Why it stayed on the CPU, if it did.
    pub reason: Option<Unsupported>,
}

/// The rule. `OffloadToGpu::default()` asks device discovery; tests use
/// [`OffloadToGpu::with_forced_device`].
#[derive(Debug, Default)]
pub struct OffloadToGpu {
    force_device: Option<bool>,
    last: Mutex<Vec<Decision>>,
}

/// Default largest build side, when `eddy.gpu_max_build_bytes` is 0 and no
/// device tells us better: 2 GiB.
const DEFAULT_MAX_BUILD_BYTES: usize = 2 << 30;

impl OffloadToGpu {
    /// The rule, deciding by device discovery.
    pub fn new() -> Self {
        Self::default()
    }

    /// Test hook: plan as if a device were (or were not) present.
    pub fn with_forced_device(present: bool) -> Self {
        OffloadToGpu {
            force_device: Some(present),
            last: Mutex::new(Vec::new()),
        }
    }

    /// Decisions of the last `optimize` call.
    pub fn last_decisions(&self) -> Vec<Decision> {
        self.last.lock().clone()
    }

    /// The last plan's decisions as lines for `EXPLAIN`, one per candidate
    /// operator, in plan order: `HashJoinExec -> GpuJoinExec`, or
    /// `HashJoinExec kept on the CPU: <reason>`. Empty when the rule did not
    /// run (GPU off, no device).
    pub fn explain_lines(&self) -> Vec<String> {
        self.last
            .lock()
            .iter()
            .map(|d| match (&d.offloaded_as, &d.reason) {
                (Some(gpu), _) => format!("{} -> {gpu}", d.operator),
                (None, Some(r)) => format!("{} kept on the CPU: {r}", d.operator),
                (None, None) => format!("{} kept on the CPU", d.operator),
            })
            .collect()
    }

    /// Rewrites `plan` and returns the decisions taken.
    pub fn rewrite(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> DfResult<(Arc<dyn ExecutionPlan>, Vec<Decision>)> {
        let opts = GpuOptions::from_config(config);
        if opts.gpu == GpuMode::Off {
            return Ok((plan, vec![]));
        }
        let present = self
            .force_device
            .unwrap_or_else(crate::device::device_available_for_planning);
        if !present {
            return Ok((plan, vec![]));
        }
        let mut decisions = Vec::new();
        let out = plan.transform_down(|node| {
            let (new, decision) = self.consider(&node, &opts);
            if let Some(d) = decision {
                match (&d.offloaded_as, &d.reason) {
                    (Some(_), _) => GpuMetrics::add(&GPU_METRICS.offloaded, 1),
                    (None, Some(r)) => GPU_METRICS.fallback(r.reason),
                    (None, None) => {}
                }
                tracing::debug!(operator = %d.operator, offloaded_as = ?d.offloaded_as, reason = ?d.reason.as_ref().map(|r| r.to_string()), "OffloadToGpu decision");
                decisions.push(d);
            }
            Ok(match new {
                Some(n) => Transformed::yes(n),
                None => Transformed::no(node),
            })
        })?;
        Ok((out.data, decisions))
    }

    fn consider(
        &self,
        node: &Arc<dyn ExecutionPlan>,
        opts: &GpuOptions,
    ) -> (Option<Arc<dyn ExecutionPlan>>, Option<Decision>) {
        let attempt: Option<Attempt> = if let Some(agg) = node.downcast_ref::<AggregateExec>() {
            let fused = if opts.gpu_fuse.0 {
                plan_join_agg(node, opts)
            } else {
                Err(Unsupported::operator("eddy.gpu_fuse is off"))
            };
            (*agg.mode() == AggregateMode::Partial).then(|| match fused {
                Ok((fused, fact)) => ("GpuJoinAggExec", Ok(fused), fact),
                Err(why) => {
                    tracing::debug!(reason = %why, "join and aggregate not fused");
                    ("GpuPreAggExec", plan_preagg(node), Arc::clone(agg.input()))
                }
            })
        } else if let Some(j) = node.downcast_ref::<HashJoinExec>() {
            match fact_to_probe_side(j) {
                Some((wrap, join, probe)) => {
                    let planned = plan_join(&join, opts).and_then(|gpu| match wrap {
                        Some(w) => datafusion::physical_plan::execution_plan::replace_children_if_necessary(w, vec![gpu])
                            .map_err(|e| Unsupported::operator(e.to_string())),
                        None => Ok(gpu),
                    });
                    Some(("GpuJoinExec", planned, probe))
                }
                None => Some(("GpuJoinExec", plan_join(node, opts), Arc::clone(j.right()))),
            }
        } else if let Some(p) = node.downcast_ref::<ProjectionExec>() {
            let input = p.input();
            match input.downcast_ref::<FilterExec>() {
                Some(f) => Some(("GpuScanExec", plan_scan(node), Arc::clone(f.input()))),
                None if p.expr().iter().any(|e| {
                    e.expr
                        .downcast_ref::<datafusion::physical_expr::expressions::Column>()
                        .is_none()
                }) =>
                {
                    Some(("GpuScanExec", plan_scan(node), Arc::clone(input)))
                }
                None => None,
            }
        } else if let Some(f) = node.downcast_ref::<FilterExec>() {
            Some(("GpuScanExec", plan_scan(node), Arc::clone(f.input())))
        } else {
            None
        };
        let Some((gpu_name, result, size_input)) = attempt else {
            return (None, None);
        };
        let operator = node.name().to_string();
        let result = result.and_then(|plan| {
            if opts.gpu == GpuMode::Auto {
                if let Some(rows) = estimated_rows(&size_input) {
                    if rows < opts.gpu_min_rows {
                        return Err(Unsupported {
                            reason: FallbackReason::BelowThreshold,
                            detail: format!(
                                "{rows} input rows < eddy.gpu_min_rows = {}",
                                opts.gpu_min_rows
                            ),
                        });
                    }
                }
            }
            Ok(plan)
        });
        match result {
            Ok(p) => (
                Some(p),
                Some(Decision {
                    operator,
                    offloaded_as: Some(gpu_name),
                    reason: None,
                }),
            ),
            Err(r) => (
                None,
                Some(Decision {
                    operator,
                    offloaded_as: None,
                    reason: Some(r),
                }),
            ),
        }
    }
}

fn statistics(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<datafusion::common::Statistics>> {
    use datafusion::physical_plan::{StatisticsArgs, StatisticsContext};
    StatisticsContext::new()
        .compute(plan.as_ref(), &StatisticsArgs::new())
        .ok()
}

fn estimated_rows(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    match statistics(plan)?.num_rows {
        Precision::Exact(n) | Precision::Inexact(n) => Some(n),
        Precision::Absent => None,
    }
}

fn estimated_bytes(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    match statistics(plan)?.total_byte_size {
        Precision::Exact(n) | Precision::Inexact(n) => Some(n),
        Precision::Absent => None,
    }
}

/// A star join that DataFusion planned with the fact side (a join of
/// unknown size) as the build side and a dimension as the probe side, with
/// the inputs swapped: the dimension becomes the build side, the fact side
/// the probe side, no longer gathered into one partition. Returns the
/// column-restoring projection (if the swap needs one), the swapped join and
/// its probe input; None when the join is not of that shape.
///
/// Found on the first device run: in SSB Q2.x and Q4.x the fact side was
/// the build side, so the host built a 6M-row table on one thread and the
/// probe ran in one partition (GPU 5-7x slower than the CPU plan).
#[allow(clippy::type_complexity)]
fn fact_to_probe_side(
    j: &HashJoinExec,
) -> Option<(
    Option<Arc<dyn ExecutionPlan>>,
    Arc<dyn ExecutionPlan>,
    Arc<dyn ExecutionPlan>,
)> {
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    use datafusion::physical_plan::ExecutionPlanProperties;
    if *j.join_type() != JoinType::Inner
        || *j.partition_mode() != PartitionMode::CollectLeft
        || j.filter().is_some()
        || !contains_join(j.left())
        || contains_join(j.right())
    {
        return None;
    }
    // A dynamic filter DataFusion attached for the old build side would
    // forbid the swap; the copy drops it (the probe scan then reads
    // unpruned, which is still correct).
    let fresh = j.builder().reset_state().build_exec().ok()?;
    let swapped = fresh
        .downcast_ref::<HashJoinExec>()?
        .swap_inputs(PartitionMode::CollectLeft)
        .ok()?;
    let (wrap, join) = if swapped.downcast_ref::<HashJoinExec>().is_some() {
        (None, swapped)
    } else {
        let p = swapped.downcast_ref::<ProjectionExec>()?;
        let inner = Arc::clone(p.input());
        inner.downcast_ref::<HashJoinExec>()?;
        (Some(swapped), inner)
    };
    let hj = join.downcast_ref::<HashJoinExec>()?;
    // The build side is collected whole; the probe side keeps its
    // partitions (the CoalescePartitionsExec was there for the build).
    let build = Arc::clone(hj.left());
    let build = if build.output_partitioning().partition_count() != 1 {
        Arc::new(CoalescePartitionsExec::new(build)) as Arc<dyn ExecutionPlan>
    } else {
        build
    };
    let probe = match hj.right().downcast_ref::<CoalescePartitionsExec>() {
        Some(c) => Arc::clone(c.input()),
        None => Arc::clone(hj.right()),
    };
    let join = datafusion::physical_plan::execution_plan::replace_children_if_necessary(
        join,
        vec![build, Arc::clone(&probe)],
    )
    .ok()?;
    Some((wrap, join, probe))
}

/// Most build-side rows a GPU join accepts. The host builds the device
/// table on one thread; on the first device run (H100, SSB SF1) DataFusion
/// put a 6M-row intermediate join on the build side of Q2.x and Q4.x, and
/// building that table took most of the query's time (GpuJoin 5-7x slower
/// than the CPU plan).
const MAX_BUILD_ROWS: usize = 1 << 21;

/// Why a join's build side is too large for the device path, if it is:
/// estimated above [`MAX_BUILD_ROWS`], or itself a join whose size is not
/// estimated (in a star join that is the fact side).
fn build_too_many_rows(build: &Arc<dyn ExecutionPlan>) -> Option<String> {
    match estimated_rows(build) {
        Some(r) if r > MAX_BUILD_ROWS => {
            Some(format!("build side of about {r} rows > {MAX_BUILD_ROWS}"))
        }
        Some(_) => None,
        None if contains_join(build) => {
            Some("build side is a join of unknown size (the fact side of a star join)".into())
        }
        None => None,
    }
}

fn contains_join(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.downcast_ref::<HashJoinExec>().is_some()
        || plan.children().iter().any(|c| contains_join(c))
}

fn unsupported_to_df(u: crate::error::GpuError) -> Unsupported {
    match u {
        crate::error::GpuError::Unsupported(u) => u,
        other => Unsupported::operator(other.to_string()),
    }
}

/// `[ProjectionExec] FilterExec input` or `ProjectionExec input` → GpuScanExec.
pub fn plan_scan(node: &Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>, Unsupported> {
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_expr::PhysicalExpr;

    let (filter, filter_path_depth) = if let Some(f) = node.downcast_ref::<FilterExec>() {
        (Some(f), 0usize)
    } else if let Some(p) = node.downcast_ref::<ProjectionExec>() {
        (p.input().downcast_ref::<FilterExec>(), 1)
    } else {
        return Err(Unsupported::operator(format!(
            "{} is not a scan shape",
            node.name()
        )));
    };
    if node.fetch().is_some() || filter.is_some_and(|f| f.fetch().is_some()) {
        return Err(Unsupported::operator("filter with a row limit (fetch)"));
    }
    // The input the kernel reads, and the input-column index of each column
    // of the filter's output.
    let (input, input_path, predicate, filter_cols): (
        Arc<dyn ExecutionPlan>,
        Vec<usize>,
        _,
        Vec<usize>,
    ) = match filter {
        Some(f) => {
            let n = f.input().schema().fields().len();
            let cols = match f.projection() {
                Some(p) => p.iter().copied().collect(),
                None => (0..n).collect(),
            };
            (
                Arc::clone(f.input()),
                vec![0; filter_path_depth + 1],
                Some(Arc::clone(f.predicate())),
                cols,
            )
        }
        None => {
            let p = node
                .downcast_ref::<ProjectionExec>()
                .ok_or_else(|| Unsupported::operator("projection expected"))?;
            let n = p.input().schema().fields().len();
            (Arc::clone(p.input()), vec![0], None, (0..n).collect())
        }
    };
    let input_schema = input.schema();
    let mut outputs = Vec::new();
    let mut computed: Vec<Arc<dyn PhysicalExpr>> = Vec::new();
    match node.downcast_ref::<ProjectionExec>() {
        Some(p) => {
            for pe in p.expr() {
                // Remap columns of the filter's output to the input's.
                let remapped = Arc::clone(&pe.expr)
                    .transform(|e| {
                        if let Some(c) = e.downcast_ref::<Column>() {
                            let Some(i) = filter_cols.get(c.index()).copied() else {
                                return datafusion::common::internal_err!(
                                    "projection column out of range"
                                );
                            };
                            let name = input_schema.field(i).name().clone();
                            return Ok(Transformed::yes(
                                Arc::new(Column::new(&name, i)) as Arc<dyn PhysicalExpr>
                            ));
                        }
                        Ok(Transformed::no(e))
                    })
                    .map_err(|e| Unsupported::expr(e.to_string()))?
                    .data;
                if let Some(c) = remapped.downcast_ref::<Column>() {
                    outputs.push(ScanOutput::Input(c.index()));
                } else {
                    outputs.push(ScanOutput::Computed(computed.len()));
                    computed.push(remapped);
                }
            }
        }
        None => outputs.extend(filter_cols.iter().map(|i| ScanOutput::Input(*i))),
    }
    let exec = GpuScanExec::try_new(
        Arc::clone(node),
        input_path,
        input,
        predicate,
        computed,
        outputs,
    )
    .map_err(unsupported_to_df)?;
    Ok(Arc::new(exec))
}

/// Whether one HashJoinExec can be a level of a fused GPU star join.
pub fn join_level_supported(j: &HashJoinExec) -> Result<(), Unsupported> {
    if *j.join_type() != JoinType::Inner {
        return Err(Unsupported::operator(format!("{} join", j.join_type())));
    }
    if j.filter().is_some() {
        return Err(Unsupported::operator("join with a non-equi filter"));
    }
    if *j.partition_mode() != PartitionMode::CollectLeft {
        return Err(Unsupported::operator(format!(
            "join in {:?} mode (needs CollectLeft)",
            j.partition_mode()
        )));
    }
    if j.fetch().is_some() {
        return Err(Unsupported::operator("join with a row limit (fetch)"));
    }
    if j.on().len() != 1 {
        return Err(Unsupported::operator(format!(
            "join on {} keys",
            j.on().len()
        )));
    }
    if j.null_equality() != NullEquality::NullEqualsNothing {
        return Err(Unsupported::operator("join with NULL = NULL"));
    }
    Ok(())
}

/// A chain of HashJoinExecs → GpuJoinExec.
pub fn plan_join(
    node: &Arc<dyn ExecutionPlan>,
    opts: &GpuOptions,
) -> Result<Arc<dyn ExecutionPlan>, Unsupported> {
    let max_build = if opts.gpu_max_build_bytes > 0 {
        opts.gpu_max_build_bytes
    } else {
        crate::device::discover()
            .devices
            .first()
            .map(|d| d.total_memory / 4)
            .unwrap_or(DEFAULT_MAX_BUILD_BYTES)
    };
    let mut levels = 0;
    let mut depth = 0;
    let mut cur = Arc::clone(node);
    let mut first_err = None;
    loop {
        // A column-only projection between two joins (DataFusion's re-order
        // after swapping a join's inputs) is part of the chain.
        let mut skipped = 0;
        if levels > 0 {
            if let Some(p) = cur.downcast_ref::<ProjectionExec>() {
                let cols_only = p.expr().iter().all(|e| {
                    e.expr
                        .downcast_ref::<datafusion::physical_expr::expressions::Column>()
                        .is_some()
                });
                if cols_only && p.input().downcast_ref::<HashJoinExec>().is_some() {
                    let next = Arc::clone(p.input());
                    cur = next;
                    skipped = 1;
                }
            }
        }
        let Some(j) = cur.downcast_ref::<HashJoinExec>() else {
            break;
        };
        if let Err(e) = join_level_supported(j) {
            first_err.get_or_insert(e);
            break;
        }
        if let Some(detail) = build_too_many_rows(j.left()) {
            first_err.get_or_insert(Unsupported {
                reason: FallbackReason::BuildTooLarge,
                detail,
            });
            break;
        }
        if let Some(b) = estimated_bytes(j.left()) {
            if b > max_build {
                first_err.get_or_insert(Unsupported {
                    reason: FallbackReason::BuildTooLarge,
                    detail: format!("build side of {b} bytes > {max_build}"),
                });
                break;
            }
        }
        levels += 1;
        depth += 1 + skipped;
        let next = Arc::clone(j.right());
        cur = next;
    }
    if levels == 0 {
        return Err(first_err.unwrap_or_else(|| Unsupported::operator("not a join")));
    }
    let exec = GpuJoinExec::try_new(Arc::clone(node), depth).map_err(unsupported_to_df)?;
    Ok(Arc::new(exec))
}

/// A planned GPU operator and the input whose size decides `auto` mode.
pub type PlannedWithInput = (Arc<dyn ExecutionPlan>, Arc<dyn ExecutionPlan>);

/// A Partial AggregateExec over (projections over) a star join →
/// GpuJoinAggExec, the join and the partial aggregation in one kernel.
/// Returns the operator and its fact input (whose size decides `auto`
/// mode). Any refusal leaves the plan to the unfused operators.
pub fn plan_join_agg(
    node: &Arc<dyn ExecutionPlan>,
    opts: &GpuOptions,
) -> Result<PlannedWithInput, Unsupported> {
    use datafusion::physical_plan::execution_plan::replace_children_if_necessary;
    let agg = node
        .downcast_ref::<AggregateExec>()
        .ok_or_else(|| Unsupported::operator("not an AggregateExec"))?;
    // Projections are inlined into the kernel's expressions; a repartition
    // under a partial aggregate only spreads rows (any spread of rows gives
    // the same final answer), so the fused operator keeps the fact side's
    // own partitions instead.
    let mut projections: Vec<Arc<dyn ExecutionPlan>> = Vec::new();
    let mut cur = Arc::clone(agg.input());
    loop {
        let next = if let Some(p) = cur.downcast_ref::<ProjectionExec>() {
            projections.push(Arc::clone(&cur));
            Arc::clone(p.input())
        } else if let Some(r) = cur.downcast_ref::<RepartitionExec>() {
            Arc::clone(r.input())
        } else {
            break;
        };
        cur = next;
    }
    let j = cur
        .downcast_ref::<HashJoinExec>()
        .ok_or_else(|| Unsupported::operator("aggregate input is not a join"))?;
    let join = match fact_to_probe_side(j) {
        Some((wrap, join, _)) => {
            projections.extend(wrap);
            join
        }
        None => Arc::clone(&cur),
    };
    // The aggregate rebuilt over its projections over the (swapped) join.
    let mut chain = Arc::clone(&join);
    let mut rebuilt_projections = Vec::with_capacity(projections.len());
    for p in projections.iter().rev() {
        chain = replace_children_if_necessary(Arc::clone(p), vec![chain])
            .map_err(|e| Unsupported::operator(e.to_string()))?;
        rebuilt_projections.push(Arc::clone(&chain));
    }
    rebuilt_projections.reverse();
    let template = replace_children_if_necessary(Arc::clone(node), vec![chain])
        .map_err(|e| Unsupported::operator(e.to_string()))?;
    let gpu_join = plan_join(&join, opts)?;
    let fact = gpu_join
        .children()
        .first()
        .map(|c| Arc::clone(*c))
        .ok_or_else(|| Unsupported::operator("join without a fact input"))?;
    // The fact side's filter goes into the same kernel when it can (one
    // copy of the fact columns instead of a GpuScan round trip first);
    // otherwise the filter stays a child, offloaded on its own.
    if let Some(ff) = crate::exec::join_agg::FactFilter::of(&fact) {
        let filtered = crate::exec::GpuJoinAggExec::try_new(
            Arc::clone(&template),
            &rebuilt_projections,
            Arc::clone(&gpu_join),
            Some(ff),
        );
        match filtered {
            Ok(exec) => {
                let input = exec
                    .children()
                    .first()
                    .map(|c| Arc::clone(*c))
                    .unwrap_or(fact);
                return Ok((Arc::new(exec), input));
            }
            Err(e) => tracing::debug!(reason = %e, "fact filter not fused"),
        }
    }
    let exec = crate::exec::GpuJoinAggExec::try_new(template, &rebuilt_projections, gpu_join, None)
        .map_err(unsupported_to_df)?;
    Ok((Arc::new(exec), fact))
}

/// A Partial AggregateExec → GpuPreAggExec.
pub fn plan_preagg(node: &Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>, Unsupported> {
    let exec = GpuPreAggExec::try_new(Arc::clone(node)).map_err(unsupported_to_df)?;
    Ok(Arc::new(exec))
}

impl PhysicalOptimizerRule for OffloadToGpu {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let (plan, decisions) = self.rewrite(plan, config)?;
        *self.last.lock() = decisions;
        Ok(plan)
    }

    fn name(&self) -> &str {
        "OffloadToGpu"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
