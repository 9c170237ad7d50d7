//! `GpuJoinExec`: a star join, every level probed in one kernel.
//!
//! The fact stream is probed against all build sides (dimension tables) by
//! the same thread, so there is no intermediate result and no sync point
//! between levels. Build sides are collected once, turned into tables on the
//! host (dense keys → direct-mapped arrays, others → open-addressing hash
//! tables, the architecture note's layout), uploaded once per device and
//! shared by every partition.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, UInt32Array};
use arrow::buffer::{BooleanBuffer, Buffer};
use arrow::compute::{cast, concat_batches, take};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};
use parking_lot::Mutex;

use super::{
    common_arg, device_allowed, fallback, flag, grid_for, launch, rebuild, stage_batch, Arg,
    DictSets,
};
use crate::codegen::kernels::{
    hash64, BuildTable, JoinKernelSpec, JoinLevelSpec, KernelSource, Param,
};
use crate::codegen::Unsupported;
use crate::datapath::Pipeline;
use crate::device::{runtime, GpuDevice, GpuRuntime};
use crate::error::{GpuError, Result};
use crate::metrics::{GpuMetrics, GPU_METRICS};

/// Where a column of the join's output comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinSource {
    /// Column of the fact (probe) input.
    Fact(usize),
    /// Column of build side `level`.
    Build { level: usize, column: usize },
}

/// One build side, as a table on the host.
#[derive(Debug)]
pub struct HostTable {
    /// All build rows, concatenated.
    pub batch: RecordBatch,
    /// Layout chosen.
    pub kind: BuildTable,
    /// Whether keys are unique.
    pub unique: bool,
    /// Direct: `rows[key - min]`.
    pub dm_rows: Vec<i32>,
    /// Direct: smallest key.
    pub dm_min: i64,
    /// Hash: slot keys, first row per slot, mask.
    pub ht_keys: Vec<i64>,
    pub ht_rows: Vec<i32>,
    pub ht_mask: u64,
    /// Next row with the same key (both layouts), -1 at the end.
    pub next: Vec<i32>,
}

impl HostTable {
    /// Builds the table from the build rows and their key values (NULL keys
    /// never match, as in SQL, so they are left out).
    pub fn build(batch: RecordBatch, keys: &Int64Array) -> Result<HostTable> {
        let n = keys.len();
        if n >= i32::MAX as usize {
            return Err(GpuError::Unsupported(Unsupported::operator(
                "build side over 2^31 rows",
            )));
        }
        let mut next = vec![-1i32; n];
        let (mut min, mut max, mut count) = (i64::MAX, i64::MIN, 0usize);
        for k in keys.iter().flatten() {
            min = min.min(k);
            max = max.max(k);
            count += 1;
        }
        let range = if count == 0 {
            0
        } else {
            (max as i128 - min as i128 + 1) as u128
        };
        let dense = count > 0 && range <= (4 * count).max(1024) as u128 && range <= 1 << 28;
        let mut t = HostTable {
            batch,
            kind: BuildTable::Hash,
            unique: true,
            dm_rows: vec![],
            dm_min: 0,
            ht_keys: vec![],
            ht_rows: vec![],
            ht_mask: 0,
            next: vec![],
        };
        if dense {
            let mut rows = vec![-1i32; range as usize];
            for (r, k) in keys.iter().enumerate() {
                let Some(k) = k else { continue };
                let i = (k - min) as usize;
                if rows[i] >= 0 {
                    t.unique = false;
                }
                next[r] = rows[i];
                rows[i] = r as i32;
            }
            if t.unique {
                t.kind = BuildTable::Direct;
                t.dm_rows = rows;
                t.dm_min = min;
                t.next = next;
                return Ok(t);
            }
            next.iter_mut().for_each(|x| *x = -1);
        }
        let cap = (2 * count).next_power_of_two().max(16);
        let mask = cap as u64 - 1;
        let mut hk = vec![0i64; cap];
        let mut hr = vec![-1i32; cap];
        for (r, k) in keys.iter().enumerate() {
            let Some(k) = k else { continue };
            let mut s = hash64(k as u64) & mask;
            loop {
                let slot = s as usize;
                if hr[slot] < 0 {
                    hk[slot] = k;
                    hr[slot] = r as i32;
                    break;
                }
                if hk[slot] == k {
                    t.unique = false;
                    next[r] = hr[slot];
                    hr[slot] = r as i32;
                    break;
                }
                s = (s + 1) & mask;
            }
        }
        t.ht_keys = hk;
        t.ht_rows = hr;
        t.ht_mask = mask;
        t.next = next;
        Ok(t)
    }

    /// Build rows matching `key` (the CPU twin of the kernel's probe).
    pub fn probe(&self, key: i64) -> Vec<i32> {
        let mut first = -1;
        match self.kind {
            BuildTable::Direct => {
                let i = key as i128 - self.dm_min as i128;
                if i >= 0 && (i as usize) < self.dm_rows.len() {
                    first = self.dm_rows[i as usize];
                }
            }
            BuildTable::Hash => {
                let mut s = hash64(key as u64) & self.ht_mask;
                loop {
                    let r = self.ht_rows[s as usize];
                    if r < 0 {
                        break;
                    }
                    if self.ht_keys[s as usize] == key {
                        first = r;
                        break;
                    }
                    s = (s + 1) & self.ht_mask;
                }
            }
        }
        let mut out = Vec::new();
        let mut r = first;
        while r >= 0 {
            out.push(r);
            r = self.next[r as usize];
        }
        out
    }
}

/// One device's copy of the build tables: per level, its buffers.
pub(crate) type DeviceTables = Vec<Vec<Arc<cudarc::driver::CudaSlice<u8>>>>;

/// Build sides, on the host and (lazily) on each device.
#[derive(Debug)]
pub(crate) struct Tables {
    pub(crate) host: Vec<HostTable>,
    device: Mutex<HashMap<usize, Arc<DeviceTables>>>,
}

impl Tables {
    /// The tables on `dev`, uploaded on first use and kept for every
    /// partition that runs there.
    pub(crate) fn on_device(&self, dev: &GpuDevice) -> Result<Arc<DeviceTables>> {
        if let Some(t) = self.device.lock().get(&dev.info.ordinal) {
            return Ok(Arc::clone(t));
        }
        let stream = &dev.streams[0];
        let up = |b: Vec<u8>| -> Result<Arc<cudarc::driver::CudaSlice<u8>>> {
            let b = if b.is_empty() { vec![0u8; 8] } else { b };
            GpuMetrics::add(&GPU_METRICS.bytes_h2d, b.len() as u64);
            Ok(Arc::new(
                stream
                    .clone_htod(&b)
                    .map_err(GpuError::driver("upload join table"))?,
            ))
        };
        let mut all = Vec::new();
        for t in &self.host {
            all.push(match t.kind {
                BuildTable::Direct => vec![up(bytes_of(&t.dm_rows))?],
                BuildTable::Hash => vec![
                    up(bytes_of(&t.ht_keys))?,
                    up(bytes_of(&t.ht_rows))?,
                    up(bytes_of(&t.next))?,
                ],
            });
        }
        stream
            .synchronize()
            .map_err(GpuError::driver("cuStreamSynchronize"))?;
        let all = Arc::new(all);
        self.device
            .lock()
            .insert(dev.info.ordinal, Arc::clone(&all));
        Ok(all)
    }

    /// The argument of a build-table parameter (`dt`: these tables on the
    /// launching device), None for other parameters.
    pub(crate) fn arg(&self, dt: &DeviceTables, p: &Param) -> Option<Result<Arg>> {
        let t = |l: usize, i: usize| -> Result<Arg> {
            dt.get(l)
                .and_then(|v| v.get(i))
                .map(|s| Arg::Dev(Arc::clone(s)))
                .ok_or_else(|| GpuError::Internal("join table".into()))
        };
        let h = |l: usize| {
            self.host
                .get(l)
                .ok_or_else(|| GpuError::Internal("join level".into()))
        };
        Some(match p {
            Param::DirectRows(l) => t(*l, 0),
            Param::DirectMin(l) => h(*l).map(|h| Arg::I64(h.dm_min)),
            Param::DirectLen(l) => h(*l).map(|h| Arg::I64(h.dm_rows.len() as i64)),
            Param::HashKeys(l) => t(*l, 0),
            Param::HashRows(l) => t(*l, 1),
            Param::HashNext(l) => t(*l, 2),
            Param::HashMask(l) => h(*l).map(|h| Arg::U64(h.ht_mask)),
            _ => return None,
        })
    }
}

/// A fused inner star join on the device; see the module doc.
#[derive(Debug)]
pub struct GpuJoinExec {
    /// Children: the fact input, then each build side (top level first).
    children: Vec<Arc<dyn ExecutionPlan>>,
    template: Arc<dyn ExecutionPlan>,
    paths: Vec<Vec<usize>>,
    cpu: Arc<dyn ExecutionPlan>,
    probe_keys: Vec<Arc<dyn PhysicalExpr>>,
    build_keys: Vec<Arc<dyn PhysicalExpr>>,
    sources: Vec<JoinSource>,
    tables: Arc<futures::lock::Mutex<Option<Arc<Tables>>>>,
}

fn bytes_of<T: Copy>(v: &[T]) -> Vec<u8> {
    let n = std::mem::size_of_val(v);
    // SAFETY: T is a plain integer type (i32/i64) here; viewing its storage
    // as bytes is always valid.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, n) }.to_vec()
}

impl GpuJoinExec {
    /// Builds the operator from the top `HashJoinExec` of a chain of
    /// `levels` joins, each probing the next (the optimizer checked each
    /// level's shape).
    pub fn try_new(template: Arc<dyn ExecutionPlan>, depth: usize) -> Result<Self> {
        // The chain, top-down: joins, and column-only projections between
        // them (DataFusion adds those when it swaps a join's inputs).
        let mut links: Vec<(bool, Arc<dyn ExecutionPlan>)> = Vec::new();
        let mut cur = Arc::clone(&template);
        for _ in 0..depth {
            let next = if let Some(j) = cur.downcast_ref::<HashJoinExec>() {
                links.push((true, Arc::clone(&cur)));
                Arc::clone(j.right())
            } else if let Some(p) = cur.downcast_ref::<ProjectionExec>() {
                links.push((false, Arc::clone(&cur)));
                Arc::clone(p.input())
            } else {
                return Err(GpuError::Internal("join chain shorter than planned".into()));
            };
            cur = next;
        }
        let levels = links.iter().filter(|l| l.0).count();
        let fact = cur;
        let fact_schema = fact.schema();
        // Column sources, from the innermost link up.
        let mut srcs: Vec<JoinSource> = (0..fact_schema.fields().len())
            .map(JoinSource::Fact)
            .collect();
        let mut probe_keys = vec![None; levels];
        let mut build_keys = vec![None; levels];
        let mut level = levels;
        for (is_join, node) in links.iter().rev() {
            if !is_join {
                let p = node
                    .downcast_ref::<ProjectionExec>()
                    .ok_or_else(|| GpuError::Internal("join chain changed".into()))?;
                srcs = p
                    .expr()
                    .iter()
                    .map(|e| {
                        e.expr
                            .downcast_ref::<Column>()
                            .and_then(|c| srcs.get(c.index()).copied())
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        GpuError::Unsupported(Unsupported::operator(
                            "computed projection inside a join chain",
                        ))
                    })?;
                continue;
            }
            level -= 1;
            let j = node
                .downcast_ref::<HashJoinExec>()
                .ok_or_else(|| GpuError::Internal("join chain changed".into()))?;
            let (bk, pk) = j
                .on()
                .first()
                .cloned()
                .ok_or_else(|| GpuError::Internal("join without keys".into()))?;
            // The probe key, rewritten over the fact schema.
            let key = Arc::clone(&pk)
                .transform(|e| {
                    if let Some(c) = e.downcast_ref::<Column>() {
                        return match srcs.get(c.index()) {
                            Some(JoinSource::Fact(i)) => Ok(Transformed::yes(
                                Arc::new(Column::new(fact_schema.field(*i).name(), *i))
                                    as Arc<dyn PhysicalExpr>,
                            )),
                            _ => Err(DataFusionError::NotImplemented(
                                "probe key from a build side (snowflake)".into(),
                            )),
                        };
                    }
                    Ok(Transformed::no(e))
                })
                .map_err(|e| GpuError::Unsupported(Unsupported::operator(e.to_string())))?
                .data;
            probe_keys[level] = Some(key);
            build_keys[level] = Some(bk);
            let nb = j.left().schema().fields().len();
            let mut joined: Vec<JoinSource> = (0..nb)
                .map(|column| JoinSource::Build { level, column })
                .collect();
            joined.extend(srcs.iter().copied());
            srcs = match &j.projection {
                Some(p) => p
                    .iter()
                    .map(|i| joined.get(*i).copied())
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| GpuError::Internal("join projection".into()))?,
                None => joined,
            };
        }
        let probe_keys: Vec<_> = probe_keys.into_iter().flatten().collect();
        let build_keys: Vec<_> = build_keys.into_iter().flatten().collect();
        // Generate both kernel variants now: an unsupported key type is a
        // planning decision, not a run-time surprise.
        for unique in [true, false] {
            let spec = join_spec(
                &fact_schema,
                &probe_keys,
                &vec![BuildTable::Hash; levels],
                unique,
            );
            spec.generate()?;
        }
        // Paths: a join's probe side is child 1, a projection's input child 0;
        // a build side is child 0 of its join.
        let steps: Vec<usize> = links
            .iter()
            .map(|(is_join, _)| usize::from(*is_join))
            .collect();
        let mut paths = vec![steps.clone()];
        let mut children = vec![fact];
        for (pos, (is_join, node)) in links.iter().enumerate() {
            if !is_join {
                continue;
            }
            let mut p = steps[..pos].to_vec();
            p.push(0);
            paths.push(p);
            let jj = node
                .downcast_ref::<HashJoinExec>()
                .ok_or_else(|| GpuError::Internal("join chain changed".into()))?;
            children.push(Arc::clone(jj.left()));
        }
        let cpu = rebuild(&template, &paths, &children)?;
        Ok(GpuJoinExec {
            children,
            template,
            paths,
            cpu,
            probe_keys,
            build_keys,
            sources: srcs,
            tables: Arc::new(futures::lock::Mutex::new(None)),
        })
    }

    /// Number of fused join levels.
    pub fn levels(&self) -> usize {
        self.probe_keys.len()
    }

    /// Where each output column comes from.
    pub fn sources(&self) -> &[JoinSource] {
        &self.sources
    }

    /// Probe keys per level, over the fact input.
    pub fn probe_keys(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.probe_keys
    }

    /// Build keys per level, over each build side.
    pub fn build_keys(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.build_keys
    }

    /// Paths from the replaced top join to each child (fact first).
    pub(crate) fn paths(&self) -> &[Vec<usize>] {
        &self.paths
    }

    /// The kernel for the given table layouts.
    pub fn kernel_for(
        &self,
        kinds: &[BuildTable],
        unique: bool,
    ) -> std::result::Result<KernelSource, Unsupported> {
        join_spec(&self.children[0].schema(), &self.probe_keys, kinds, unique).generate()
    }
}

fn join_spec(
    schema: &SchemaRef,
    keys: &[Arc<dyn PhysicalExpr>],
    kinds: &[BuildTable],
    unique: bool,
) -> JoinKernelSpec {
    JoinKernelSpec {
        schema: Arc::clone(schema),
        levels: keys
            .iter()
            .zip(kinds)
            .map(|(k, t)| JoinLevelSpec {
                probe_key: Arc::clone(k),
                table: *t,
            })
            .collect(),
        unique,
    }
}

impl DisplayAs for GpuJoinExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self
            .probe_keys
            .iter()
            .zip(&self.build_keys)
            .map(|(p, b)| format!("({p} = {b})"))
            .collect();
        write!(
            f,
            "GpuJoinExec: levels={}, on=[{}], fused in one kernel",
            self.levels(),
            keys.join(", ")
        )
    }
}

pub(crate) async fn collect_all(
    plan: &Arc<dyn ExecutionPlan>,
    ctx: &Arc<TaskContext>,
) -> DfResult<RecordBatch> {
    let mut batches = Vec::new();
    let n = plan.properties().partitioning.partition_count();
    for p in 0..n {
        let s = plan.execute(p, Arc::clone(ctx))?;
        batches.extend(s.try_collect::<Vec<_>>().await?);
    }
    Ok(concat_batches(&plan.schema(), &batches)?)
}

impl GpuJoinExec {
    /// The build sides as host tables, collected once per operator.
    pub(crate) async fn tables(&self, ctx: &Arc<TaskContext>) -> DfResult<Arc<Tables>> {
        let mut g = self.tables.lock().await;
        if let Some(t) = g.as_ref() {
            return Ok(Arc::clone(t));
        }
        let mut host = Vec::new();
        for (level, key) in self.build_keys.iter().enumerate() {
            let batch = collect_all(&self.children[level + 1], ctx).await?;
            let k = key.evaluate(&batch)?.into_array(batch.num_rows())?;
            let k = cast(&k, &DataType::Int64)?;
            let k = k
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| DataFusionError::Internal("join key cast".into()))?
                .clone();
            host.push(
                HostTable::build(batch, &k).map_err(|e| DataFusionError::External(Box::new(e)))?,
            );
        }
        let t = Arc::new(Tables {
            host,
            device: Mutex::new(HashMap::new()),
        });
        *g = Some(Arc::clone(&t));
        Ok(t)
    }
}

/// Output rows as (fact row, build row per level).
struct Matches {
    fact: Vec<u32>,
    rids: Vec<Vec<i32>>,
}

fn assemble(
    schema: &SchemaRef,
    sources: &[JoinSource],
    fact: &RecordBatch,
    tables: &Tables,
    m: &Matches,
) -> DfResult<RecordBatch> {
    let fact_idx = UInt32Array::from(m.fact.clone());
    let build_idx: Vec<UInt32Array> = m
        .rids
        .iter()
        .map(|r| UInt32Array::from(r.iter().map(|x| *x as u32).collect::<Vec<_>>()))
        .collect();
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(sources.len());
    for s in sources {
        cols.push(match s {
            JoinSource::Fact(i) => take(fact.column(*i), &fact_idx, None)?,
            JoinSource::Build { level, column } => take(
                tables.host[*level].batch.column(*column),
                &build_idx[*level],
                None,
            )?,
        });
    }
    Ok(RecordBatch::try_new(Arc::clone(schema), cols)?)
}

fn cpu_probe(
    keys: &[Arc<dyn PhysicalExpr>],
    fact: &RecordBatch,
    tables: &Tables,
) -> DfResult<Matches> {
    let mut key_arrays = Vec::new();
    for k in keys {
        let a = k.evaluate(fact)?.into_array(fact.num_rows())?;
        let a = cast(&a, &DataType::Int64)?;
        key_arrays.push(
            a.as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| DataFusionError::Internal("key cast".into()))?
                .clone(),
        );
    }
    let mut m = Matches {
        fact: vec![],
        rids: vec![vec![]; keys.len()],
    };
    let mut combo = vec![0i32; keys.len()];
    fn rec(
        level: usize,
        row: usize,
        keys: &[Int64Array],
        tables: &Tables,
        combo: &mut Vec<i32>,
        m: &mut Matches,
    ) {
        if level == keys.len() {
            m.fact.push(row as u32);
            for (l, r) in combo.iter().enumerate() {
                m.rids[l].push(*r);
            }
            return;
        }
        if keys[level].is_null(row) {
            return;
        }
        for r in tables.host[level].probe(keys[level].value(row)) {
            combo[level] = r;
            rec(level + 1, row, keys, tables, combo, m);
        }
    }
    for row in 0..fact.num_rows() {
        rec(0, row, &key_arrays, tables, &mut combo, &mut m);
    }
    Ok(m)
}

struct JoinRun {
    rt: Arc<GpuRuntime>,
    partition: usize,
    tables: Arc<Tables>,
    kernel: Arc<KernelSource>,
    unique: bool,
    pipeline: Option<Pipeline>,
    dict_sets: DictSets,
    fact_schema: SchemaRef,
    capacity: Vec<usize>,
}

impl JoinRun {
    fn device_tables(&self, dev: &GpuDevice) -> Result<Arc<DeviceTables>> {
        self.tables.on_device(dev)
    }

    fn run_chunk(&mut self, batches: &[RecordBatch]) -> Result<Vec<Matches>> {
        let rt = Arc::clone(&self.rt);
        let dev = rt.device_for(self.partition)?;
        let func = crate::compile::cache().function(
            &dev.ctx,
            &self.kernel,
            dev.info.compute_capability,
        )?;
        let dt = self.device_tables(dev)?;
        if self.pipeline.is_none() {
            self.pipeline = Some(Pipeline::for_device(dev)?);
        }
        let levels = self.tables.host.len();
        let submit_started = std::time::Instant::now();
        let mut submitted = Vec::new();
        for (bi, batch) in batches.iter().enumerate() {
            let n = batch.num_rows();
            let sets = self
                .dict_sets
                .for_batch(&self.kernel, &self.fact_schema, batch)?;
            let pipeline = self
                .pipeline
                .as_mut()
                .ok_or_else(|| GpuError::Internal("no pipeline".into()))?;
            let si = pipeline.next_slot()?;
            let slot = &mut pipeline.slots[si];
            // A unique join's results have fixed sizes: they come back into
            // the pinned arena behind the kernel (`fetch`).
            let results = if self.unique {
                4 + n.div_ceil(32) * 4 + levels * n * 4
            } else {
                0
            };
            let inputs = stage_batch(slot, dev, &self.kernel, batch, &sets, results)?;
            let cap = if self.unique {
                n
            } else {
                self.capacity.get(bi).copied().unwrap_or(n).max(n)
            };
            let keep = slot.zeroed(n.div_ceil(32) * 4)?;
            let count = slot.zeroed(8)?;
            let out_fact = slot.zeroed(cap * 4)?;
            let mut rid = Vec::new();
            for _ in 0..levels {
                rid.push(slot.zeroed(cap * 4)?);
            }
            let err = slot.zeroed(4)?;
            let mut args = Vec::new();
            for p in &self.kernel.params {
                if let Some(a) = common_arg(p, &inputs)? {
                    args.push(a);
                    continue;
                }
                if let Some(a) = self.tables.arg(&dt, p) {
                    args.push(a?);
                    continue;
                }
                args.push(match p {
                    Param::KeepBits => Arg::Buf(keep),
                    Param::OutCount => Arg::Buf(count),
                    Param::OutCapacity => Arg::U64(cap as u64),
                    Param::OutFactRow => Arg::Buf(out_fact),
                    Param::OutRowId(l) => Arg::Buf(rid[*l]),
                    Param::Err => Arg::Buf(err),
                    other => {
                        return Err(GpuError::Internal(format!(
                            "join kernel parameter {other:?}"
                        )))
                    }
                });
            }
            launch(slot, &func, grid_for(dev, n), &args)?;
            GpuMetrics::add(&GPU_METRICS.rows_processed, n as u64);
            let fetched = if self.unique {
                let e = slot.fetch(err)?;
                let k = slot.fetch(keep)?;
                let r = rid
                    .iter()
                    .map(|b| slot.fetch(*b))
                    .collect::<Result<Vec<_>>>()?;
                Some((e, k, r))
            } else {
                None
            };
            submitted.push((si, keep, count, out_fact, rid, err, cap, fetched));
        }
        GpuMetrics::add_elapsed(&GPU_METRICS.submit_ns, submit_started);
        let complete_started = std::time::Instant::now();
        let mut out = Vec::new();
        for (bi, (batch, (si, _keep, count, out_fact, rid, err, cap, fetched))) in
            batches.iter().zip(submitted).enumerate()
        {
            let pipeline = self
                .pipeline
                .as_ref()
                .ok_or_else(|| GpuError::Internal("no pipeline".into()))?;
            let slot = &pipeline.slots[si];
            let i32s = |b: &[u8]| -> Vec<i32> {
                b.chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            };
            if let Some((f_err, f_keep, f_rids)) = fetched {
                slot.wait()?;
                if flag(slot.fetched(&f_err)?) {
                    return Err(GpuError::Internal(
                        "row error flagged by the join kernel".into(),
                    ));
                }
                let n = batch.num_rows();
                let mask = BooleanArray::new(
                    BooleanBuffer::new(Buffer::from(slot.fetched(&f_keep)?), 0, n),
                    None,
                );
                let fact: Vec<u32> = (0..n)
                    .filter(|i| mask.value(*i))
                    .map(|i| i as u32)
                    .collect();
                let mut rids = Vec::new();
                for f in &f_rids {
                    let all = i32s(slot.fetched(f)?);
                    let picked = fact
                        .iter()
                        .map(|i| {
                            all.get(*i as usize).copied().ok_or_else(|| {
                                GpuError::Internal("join row id out of range".into())
                            })
                        })
                        .collect::<Result<Vec<i32>>>()?;
                    rids.push(picked);
                }
                out.push(Matches { fact, rids });
            } else {
                if flag(&slot.download(err)?) {
                    return Err(GpuError::Internal(
                        "row error flagged by the join kernel".into(),
                    ));
                }
                let c = slot.download(count)?;
                let total = u64::from_le_bytes(
                    c[..8]
                        .try_into()
                        .map_err(|_| GpuError::Internal("count".into()))?,
                ) as usize;
                if total > cap {
                    // PG-Strom's answer to the unknown join result size: the
                    // kernel counted what did not fit; relaunch larger.
                    if self.capacity.len() <= bi {
                        self.capacity.resize(bi + 1, 0);
                    }
                    self.capacity[bi] = total;
                    return Err(GpuError::Overflow {
                        kernel: "eddy_join".into(),
                        retries: 0,
                    });
                }
                let fact: Vec<u32> = i32s(&slot.download(out_fact)?)
                    .into_iter()
                    .take(total)
                    .map(|x| x as u32)
                    .collect();
                let mut rids: Vec<Vec<i32>> = Vec::new();
                for b in &rid {
                    rids.push(i32s(&slot.download(*b)?).into_iter().take(total).collect());
                }
                // Slots were taken in arbitrary order: restore the probe
                // side's order, which the replaced HashJoinExec keeps.
                let mut perm: Vec<usize> = (0..fact.len()).collect();
                perm.sort_by_key(|i| fact[*i]);
                let fact = perm.iter().map(|i| fact[*i]).collect();
                let rids = rids
                    .iter()
                    .map(|r| perm.iter().map(|i| r[*i]).collect())
                    .collect();
                out.push(Matches { fact, rids });
            }
        }
        GpuMetrics::add_elapsed(&GPU_METRICS.complete_ns, complete_started);
        Ok(out)
    }
}

impl ExecutionPlan for GpuJoinExec {
    fn name(&self) -> &str {
        "GpuJoinExec"
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
        let mut r = TreeNodeRecursion::Continue;
        for e in self.probe_keys.iter().chain(self.build_keys.iter()) {
            r = f(e)?;
            if r == TreeNodeRecursion::Stop {
                break;
            }
        }
        Ok(r)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if children.len() != self.children.len() {
            return datafusion::common::internal_err!("GpuJoinExec: wrong number of children");
        }
        let cpu = rebuild(&self.template, &self.paths, &children)?;
        Ok(Arc::new(GpuJoinExec {
            children,
            template: Arc::clone(&self.template),
            paths: self.paths.clone(),
            cpu,
            probe_keys: self.probe_keys.clone(),
            build_keys: self.build_keys.clone(),
            sources: self.sources.clone(),
            tables: Arc::new(futures::lock::Mutex::new(None)),
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
            Err(e) => return fallback("GpuJoinExec", &self.cpu, partition, context, &e),
        };
        let schema = self.schema();
        let this = GpuJoinHandle {
            cpu: Arc::clone(&self.cpu),
            fact: Arc::clone(&self.children[0]),
            probe_keys: self.probe_keys.clone(),
            sources: self.sources.clone(),
            schema: Arc::clone(&schema),
            tables: Arc::clone(&self.tables),
            build_keys: self.build_keys.clone(),
            children: self.children.clone(),
        };
        let fut = async move { this.run(partition, context, rt).await };
        let s = futures::stream::once(fut).try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, s)))
    }
}

/// What a running partition needs of the operator.
struct GpuJoinHandle {
    cpu: Arc<dyn ExecutionPlan>,
    fact: Arc<dyn ExecutionPlan>,
    probe_keys: Vec<Arc<dyn PhysicalExpr>>,
    build_keys: Vec<Arc<dyn PhysicalExpr>>,
    sources: Vec<JoinSource>,
    schema: SchemaRef,
    tables: Arc<futures::lock::Mutex<Option<Arc<Tables>>>>,
    children: Vec<Arc<dyn ExecutionPlan>>,
}

impl GpuJoinHandle {
    async fn run(
        self,
        partition: usize,
        ctx: Arc<TaskContext>,
        rt: Arc<GpuRuntime>,
    ) -> DfResult<SendableRecordBatchStream> {
        let shell = GpuJoinExec {
            children: self.children.clone(),
            template: Arc::clone(&self.cpu),
            paths: vec![],
            cpu: Arc::clone(&self.cpu),
            probe_keys: self.probe_keys.clone(),
            build_keys: self.build_keys.clone(),
            sources: self.sources.clone(),
            tables: Arc::clone(&self.tables),
        };
        let tables = shell.tables(&ctx).await?;
        let kinds: Vec<BuildTable> = tables.host.iter().map(|t| t.kind).collect();
        let unique = tables.host.iter().all(|t| t.unique);
        let kernel = match shell.kernel_for(&kinds, unique) {
            Ok(k) => Arc::new(k),
            Err(u) => {
                return fallback(
                    "GpuJoinExec",
                    &self.cpu,
                    partition,
                    ctx,
                    &GpuError::Unsupported(u),
                )
            }
        };
        let mut run = JoinRun {
            rt,
            partition,
            tables: Arc::clone(&tables),
            kernel,
            unique,
            pipeline: None,
            dict_sets: DictSets::default(),
            fact_schema: self.fact.schema(),
            capacity: vec![],
        };
        let input = super::coalesced(self.fact.execute(partition, Arc::clone(&ctx))?);
        let chunks = input.chunks(crate::device::STREAMS_PER_DEVICE);
        let keys = self.probe_keys;
        let schema = Arc::clone(&self.schema);
        let sources = self.sources;
        let out = futures::stream::unfold((chunks, run_state(&mut run)), move |(mut chunks, mut st)| {
            let keys = keys.clone();
            let schema = Arc::clone(&schema);
            let sources = sources.clone();
            async move {
                let chunk = chunks.next().await?;
                let res: DfResult<Vec<RecordBatch>> = (|| {
                    let batches = chunk.into_iter().collect::<DfResult<Vec<_>>>()?;
                    // Two tries on the device (the second after an output
                    // overflow resized the buffers), then the CPU twin.
                    let mut matches = st.run_chunk(&batches);
                    if matches!(matches, Err(GpuError::Overflow { .. })) {
                        matches = st.run_chunk(&batches);
                    }
                    let matches = match matches {
                        Ok(m) => m,
                        Err(e) => {
                            GPU_METRICS.fallback(crate::metrics::FallbackReason::DeviceError);
                            tracing::warn!(operator = "GpuJoinExec", error = %e, "GPU chunk failed; probing it on the CPU");
                            batches.iter().map(|b| cpu_probe(&keys, b, &st.tables)).collect::<DfResult<Vec<_>>>()?
                        }
                    };
                    batches.iter().zip(&matches).map(|(b, m)| assemble(&schema, &sources, b, &st.tables, m)).collect()
                })();
                Some((res, (chunks, st)))
            }
        })
        .map_ok(|v| futures::stream::iter(v.into_iter().map(Ok)))
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            out,
        )))
    }
}

fn run_state(run: &mut JoinRun) -> JoinRun {
    JoinRun {
        rt: Arc::clone(&run.rt),
        partition: run.partition,
        tables: Arc::clone(&run.tables),
        kernel: Arc::clone(&run.kernel),
        unique: run.unique,
        pipeline: run.pipeline.take(),
        dict_sets: std::mem::take(&mut run.dict_sets),
        fact_schema: Arc::clone(&run.fact_schema),
        capacity: std::mem::take(&mut run.capacity),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};

    fn batch(n: usize) -> RecordBatch {
        let s = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        RecordBatch::try_new(
            s,
            vec![Arc::new(Int64Array::from(
                (0..n as i64).collect::<Vec<_>>(),
            ))],
        )
        .expect("batch")
    }

    #[test]
    fn dense_unique_keys_use_a_direct_array() {
        let keys = Int64Array::from(vec![Some(10), Some(12), None, Some(11)]);
        let t = HostTable::build(batch(4), &keys).expect("table");
        assert_eq!(t.kind, BuildTable::Direct);
        assert!(t.unique);
        assert_eq!(t.probe(12), vec![1]);
        assert_eq!(t.probe(11), vec![3]);
        assert!(t.probe(13).is_empty());
        assert!(t.probe(9).is_empty());
    }

    #[test]
    fn sparse_or_duplicate_keys_use_a_hash_table() {
        let keys = Int64Array::from(vec![Some(1), Some(1_000_000_007), Some(1), Some(-5)]);
        let t = HostTable::build(batch(4), &keys).expect("table");
        assert_eq!(t.kind, BuildTable::Hash);
        assert!(!t.unique);
        let mut m = t.probe(1);
        m.sort();
        assert_eq!(m, vec![0, 2]);
        assert_eq!(t.probe(-5), vec![3]);
        assert!(t.probe(2).is_empty());
    }
}
