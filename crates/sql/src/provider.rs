//! `EddyTable`: DataFusion's view of one Eddy table, and `EddyScanExec`,
//! the scan operator over a table snapshot.
//!
//! Invariants:
//! * one provider is built per statement (the schema provider makes a fresh
//!   one on every lookup) and it takes at most one [`TableSnapshot`], on its
//!   first scan: every scan of the table in one query reads the same LSNs;
//! * filters are reported `Inexact`: DataFusion re-applies them, Eddy only
//!   uses them to skip row groups whose min/max cannot match;
//! * storage scans are synchronous, so each DataFusion partition runs them
//!   on a blocking thread and hands batches over a bounded channel (2
//!   batches): back-pressure, never an unbounded buffer.

use std::cmp::Ordering;
use std::fmt;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::datasource::TableType;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use eddy_common::{ColumnType, Value};
use eddy_storage::{RowGroupStats, ScanPartition, Table, TableSnapshot};

use crate::join_filter::JoinKeyFilter;
use crate::pgtypes::coerce_value;
use crate::scan_filter::{RowFilters, ScanFilter};

/// Name of the hidden key column of DML scans.
pub const KEY_COLUMN: &str = "_eddy_key";

/// The snapshots the session's current statement reads, by table: one
/// consistent cut, overlaid with the transaction's own writes. A table not
/// in it is read at a snapshot taken when the scan is planned.
#[derive(Default)]
pub struct ReadView {
    snapshots:
        parking_lot::Mutex<std::collections::HashMap<eddy_common::TableId, Arc<TableSnapshot>>>,
}

impl fmt::Debug for ReadView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReadView")
    }
}

impl ReadView {
    /// Installs the snapshots of the next statement.
    pub fn set(&self, snaps: std::collections::HashMap<eddy_common::TableId, Arc<TableSnapshot>>) {
        *self.snapshots.lock() = snaps;
    }

    pub fn get(&self, table: eddy_common::TableId) -> Option<Arc<TableSnapshot>> {
        self.snapshots.lock().get(&table).cloned()
    }
}

/// One Eddy table as a DataFusion table.
pub struct EddyTable {
    table: Arc<Table>,
    view: Option<Arc<ReadView>>,
    schema: SchemaRef,
    /// Expose the hidden `_eddy_key` column last (UPDATE/DELETE scans).
    with_key: bool,
    snapshot: OnceLock<Arc<TableSnapshot>>,
    /// Whether supported filters are applied by the scan (`Exact`).
    scan_filters: bool,
}

/// Measured filter selectivities by (table, snapshot LSNs, predicate text):
/// the optimizer asks on every pass and for every sub-chain of a join tree,
/// and repeated queries over unchanged data ask the same again. Any write
/// changes the LSNs and so the key; the map is emptied when it grows large.
static SELECTIVITIES: OnceLock<std::sync::Mutex<std::collections::HashMap<String, Option<f64>>>> =
    OnceLock::new();
const SELECTIVITY_CACHE_ENTRIES: usize = 4096;

impl fmt::Debug for EddyTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EddyTable")
            .field("name", &self.table.def().name)
            .field("with_key", &self.with_key)
            .finish()
    }
}

impl EddyTable {
    pub fn new(table: Arc<Table>, with_key: bool) -> EddyTable {
        let base = table.schema();
        // char(n) / varchar(n) columns say so in their field's metadata:
        // the wire layer announces bpchar / varchar and pads char(n)
        let mut fields: Vec<Field> = base
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| match table.def().columns.get(i) {
                Some(c) => f
                    .as_ref()
                    .clone()
                    .with_metadata(crate::pgtypes::declared_type_metadata(c.ty)),
                None => f.as_ref().clone(),
            })
            .collect();
        if with_key {
            fields.push(Field::new(KEY_COLUMN, DataType::Binary, false));
        }
        let schema = Arc::new(Schema::new_with_metadata(fields, base.metadata().clone()));
        EddyTable {
            table,
            view: None,
            schema,
            with_key,
            snapshot: OnceLock::new(),
            scan_filters: true,
        }
    }

    /// With `false`, every filter is `Inexact` and stays a DataFusion
    /// `FilterExec` (which the GPU rule can offload).
    pub fn with_scan_filters(mut self, on: bool) -> EddyTable {
        self.scan_filters = on;
        self
    }

    /// Reads through the session's statement snapshots.
    pub fn with_view(mut self, view: Arc<ReadView>) -> EddyTable {
        self.view = Some(view);
        self
    }

    fn snapshot(&self) -> Arc<TableSnapshot> {
        Arc::clone(self.snapshot.get_or_init(|| {
            self.view
                .as_ref()
                .and_then(|v| v.get(self.table.def().id))
                .unwrap_or_else(|| Arc::new(self.table.snapshot()))
        }))
    }

    /// Rows of the statement's snapshot (an upper bound: deletes not yet
    /// compacted are counted).
    pub fn num_rows(&self) -> u64 {
        self.snapshot()
            .partitions()
            .iter()
            .map(|p| p.num_rows_upper_bound())
            .sum()
    }

    /// The fraction of rows for which `predicate` is true, measured on a
    /// sample of at most about [`SAMPLE_ROWS`] rows (every k-th row group of
    /// the snapshot, so sorted data is still sampled end to end). For the
    /// join-order rule; `None` when the predicate cannot be evaluated here
    /// (unknown columns, subqueries).
    pub fn filter_selectivity(&self, predicate: &Expr) -> Option<f64> {
        let key = format!(
            "{:?}|{:?}|{}",
            self.table.def().id,
            self.snapshot().lsns(),
            predicate
        );
        let cache = SELECTIVITIES.get_or_init(Default::default);
        if let Some(known) = cache.lock().ok()?.get(&key) {
            return *known;
        }
        let measured = self.measure_selectivity(predicate);
        if let Ok(mut cache) = cache.lock() {
            if cache.len() >= SELECTIVITY_CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(key, measured);
        }
        measured
    }

    fn measure_selectivity(&self, predicate: &Expr) -> Option<f64> {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        use datafusion::common::{Column, DFSchema};
        use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
        use datafusion::physical_expr::{create_physical_expr, execution_props::ExecutionProps};
        use std::cell::Cell;

        let def = self.table.def();
        let mut cols: Vec<usize> = Vec::new();
        for c in predicate.column_refs() {
            let i = def.columns.iter().position(|d| d.name == c.name)?;
            if !cols.contains(&i) {
                cols.push(i);
            }
        }
        if cols.is_empty() {
            return None;
        }
        let unqualified = predicate
            .clone()
            .transform(|e| {
                Ok(match e {
                    Expr::Column(c) => {
                        Transformed::yes(Expr::Column(Column::new_unqualified(c.name)))
                    }
                    other => Transformed::no(other),
                })
            })
            .ok()?
            .data;
        let schema = Arc::new(self.table.schema().project(&cols).ok()?);
        let df_schema = DFSchema::try_from(schema.as_ref().clone()).ok()?;
        let physical = create_physical_expr(
            &unqualified,
            &df_schema,
            &ExecutionProps::new(),
            &PhysicalPlanningContext::default(),
        )
        .ok()?;

        let partitions = self.snapshot().partitions();
        let total: u64 = partitions.iter().map(|p| p.num_rows_upper_bound()).sum();
        let stride = (total / SAMPLE_ROWS).max(1) as usize;
        let seen_groups = Cell::new(0usize);
        let keep = |_: &RowGroupStats| {
            let n = seen_groups.get();
            seen_groups.set(n + 1);
            n.is_multiple_of(stride)
        };
        let (mut evaluated, mut passed) = (0usize, 0usize);
        for p in &partitions {
            for batch in p.scan(Some(&cols), false, &keep).ok()? {
                let batch = batch.ok()?;
                let batch =
                    RecordBatch::try_new(Arc::clone(&schema), batch.columns().to_vec()).ok()?;
                let result = physical
                    .evaluate(&batch)
                    .ok()?
                    .into_array(batch.num_rows())
                    .ok()?;
                let mask = result
                    .as_any()
                    .downcast_ref::<datafusion::arrow::array::BooleanArray>()?;
                evaluated += batch.num_rows();
                passed += mask.true_count();
                if evaluated as u64 >= 2 * SAMPLE_ROWS {
                    break;
                }
            }
        }
        if evaluated == 0 {
            return Some(if total == 0 { 0.0 } else { 1.0 });
        }
        Some(passed as f64 / evaluated as f64)
    }
}

/// Rows [`EddyTable::filter_selectivity`] aims to evaluate.
pub const SAMPLE_ROWS: u64 = 64 * 1024;

#[async_trait]
impl TableProvider for EddyTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> datafusion::error::Result<Vec<TableProviderFilterPushDown>> {
        // Filters the scan evaluates itself are Exact (DataFusion drops its
        // FilterExec); the rest only prune row groups and DataFusion
        // re-applies them.
        Ok(filters
            .iter()
            .map(|f| match ScanFilter::terms_of(f, &self.schema) {
                Some(_) if self.scan_filters => TableProviderFilterPushDown::Exact,
                _ => TableProviderFilterPushDown::Inexact,
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        let ncols = self.table.def().columns.len();
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let wanted: Vec<usize> = projection.cloned().unwrap_or(all);
        let out_schema = Arc::new(self.schema.project(&wanted)?);
        let types: Vec<ColumnType> = self.table.def().columns.iter().map(|c| c.ty).collect();
        let names: Vec<String> = self
            .table
            .def()
            .columns
            .iter()
            .map(|c| c.name.clone())
            .collect();
        if let Some(choice) = crate::index_scan::choose_index(self.table.def(), filters) {
            // a filter the node cannot evaluate itself (one it could not
            // plan) leaves the table to the ordinary scan below
            match crate::index_scan::IndexScanExec::try_new(
                state,
                Arc::clone(self.table.def()),
                self.snapshot(),
                choice,
                filters,
                wanted.clone(),
                Arc::clone(&self.schema),
            ) {
                Ok(exec) => return Ok(Arc::new(exec)),
                Err(e) => {
                    tracing::debug!(table = %self.table.def().name, error = %e, "index scan not planned")
                }
            }
        }
        let prune = Arc::new(PrunePredicate::from_filters(filters, &names, &types));
        let exact = Arc::new(if self.scan_filters {
            ScanFilter::from_filters(filters, &self.schema)
        } else {
            ScanFilter::default()
        });
        let target = state.config().target_partitions().max(1);
        let partitions = split_for_parallelism(self.snapshot().partitions(), target);
        let groups = group_partitions(partitions, target);
        let group_stats: Vec<ScanStats> = groups
            .iter()
            .map(|g| ScanStats::of_group(g, &wanted, &types))
            .collect();
        Ok(Arc::new(EddyScanExec::new(
            self.table.def().name.clone(),
            ncols,
            wanted,
            out_schema,
            groups,
            group_stats,
            Pushdown {
                prune,
                exact,
                limit,
            },
        )))
    }
}

/// `parts` with its largest column files cut into row-group ranges until
/// there are about `target` of them: after a bulk load a table has one large
/// file per shard, and a scan of whole files would use as many cores as the
/// table has shards (2 of 16 on the first GPU machine run, where the scan
/// was the whole query's bottleneck).
fn split_for_parallelism(parts: Vec<ScanPartition>, target: usize) -> Vec<ScanPartition> {
    if parts.len() >= target {
        return parts;
    }
    let total: u64 = parts.iter().map(|p| p.num_rows_upper_bound()).sum();
    if total == 0 {
        return parts;
    }
    let mut out = Vec::with_capacity(target);
    for p in parts {
        // Each partition gets pieces in proportion to its rows.
        let rows = p.num_rows_upper_bound();
        let pieces =
            usize::try_from((u128::from(rows) * target as u128).div_ceil(u128::from(total)))
                .unwrap_or(1)
                .max(1);
        out.extend(p.split_row_groups(pieces));
    }
    out
}

/// Spread scan partitions over at most `target` groups, balancing rows.
fn group_partitions(mut parts: Vec<ScanPartition>, target: usize) -> Vec<Vec<Arc<ScanPartition>>> {
    parts.sort_by_key(|p| std::cmp::Reverse(p.num_rows_upper_bound()));
    let n = target.min(parts.len()).max(1);
    let mut groups: Vec<(u64, Vec<Arc<ScanPartition>>)> = (0..n).map(|_| (0, Vec::new())).collect();
    for p in parts {
        let rows = p.num_rows_upper_bound();
        if let Some(g) = groups.iter_mut().min_by_key(|g| g.0) {
            g.0 += rows;
            g.1.push(Arc::new(p));
        }
    }
    groups.into_iter().map(|g| g.1).collect()
}

/// Planner statistics of one scan group, per output column: row count (an
/// upper bound: deletes not yet compacted are counted) and, for numeric and
/// date columns whose partitions are all files, min/max and null counts from
/// the row-group statistics. Estimates only (`Inexact`): DataFusion uses
/// them to order joins, never to answer a query.
#[derive(Clone, Debug)]
struct ScanStats {
    rows: u64,
    /// Per output column: (min, max, nulls), `None` where unknown.
    columns: Vec<Option<(Value, Value, u64)>>,
}

impl ScanStats {
    fn of_group(group: &[Arc<ScanPartition>], wanted: &[usize], types: &[ColumnType]) -> ScanStats {
        let rows = group.iter().map(|p| p.num_rows_upper_bound()).sum();
        let row_groups: Vec<Vec<RowGroupStats>> = group
            .iter()
            .filter(|p| p.num_rows_upper_bound() > 0)
            .map(|p| p.row_groups())
            .collect();
        let all_files = row_groups.iter().all(|rg| !rg.is_empty());
        let columns = wanted
            .iter()
            .map(|&c| {
                let ty = *types.get(c)?;
                if !all_files || !has_range_statistics(ty) {
                    return None;
                }
                let mut acc: Option<(Value, Value, u64)> = None;
                for rg in row_groups.iter().flatten() {
                    let cs = rg.columns.get(c)?;
                    acc = Some(match acc {
                        None => (cs.min.clone(), cs.max.clone(), cs.null_count),
                        Some((lo, hi, n)) => (
                            min_value(lo, cs.min.clone()),
                            max_value(hi, cs.max.clone()),
                            n + cs.null_count,
                        ),
                    });
                }
                acc
            })
            .collect();
        ScanStats { rows, columns }
    }

    /// Combine the statistics of two groups of the same scan.
    fn merge(self, other: &ScanStats) -> ScanStats {
        let columns = self
            .columns
            .into_iter()
            .zip(&other.columns)
            .map(|(a, b)| match (a, b) {
                (Some((lo, hi, n)), Some((lo2, hi2, n2))) => Some((
                    min_value(lo, lo2.clone()),
                    max_value(hi, hi2.clone()),
                    n + n2,
                )),
                _ => None,
            })
            .collect();
        ScanStats {
            rows: self.rows + other.rows,
            columns,
        }
    }

    fn to_datafusion(
        &self,
        schema: SchemaRef,
        limit: Option<usize>,
    ) -> datafusion::common::Statistics {
        use datafusion::common::stats::Precision;
        let rows = match limit {
            Some(l) => self.rows.min(l as u64),
            None => self.rows,
        };
        let mut stats = datafusion::common::Statistics::new_unknown(&schema);
        stats.num_rows = Precision::Inexact(rows as usize);
        for ((cs, field), known) in stats
            .column_statistics
            .iter_mut()
            .zip(schema.fields())
            .zip(&self.columns)
        {
            let Some((lo, hi, nulls)) = known else {
                continue;
            };
            let Some(ty) = ColumnType::from_arrow(field.data_type()) else {
                continue;
            };
            let lo = crate::pgtypes::value_to_scalar(lo, ty);
            let hi = crate::pgtypes::value_to_scalar(hi, ty);
            if lo.is_null() || hi.is_null() {
                continue;
            }
            cs.min_value = Precision::Inexact(lo);
            cs.max_value = Precision::Inexact(hi);
            cs.null_count = Precision::Inexact(*nulls as usize);
        }
        stats
    }
}

/// Types whose stored min/max are exact values (text statistics may be
/// truncated prefixes, so they are left out of planner estimates).
fn has_range_statistics(ty: ColumnType) -> bool {
    matches!(
        ty,
        ColumnType::SmallInt
            | ColumnType::Int
            | ColumnType::BigInt
            | ColumnType::Real
            | ColumnType::Double
            | ColumnType::Decimal(..)
            | ColumnType::Numeric
            | ColumnType::Date
            | ColumnType::Timestamp
            | ColumnType::Time
    )
}

/// `b` if it is non-NULL and orders `wanted` against `a`, else `a` (NULL
/// only when both are).
fn pick(a: Value, b: Value, wanted: Ordering) -> Value {
    match (&a, &b) {
        (Value::Null, _) => b,
        (_, Value::Null) => a,
        _ if cmp_values(&b, &a) == Some(wanted) => b,
        _ => a,
    }
}

fn min_value(a: Value, b: Value) -> Value {
    pick(a, b, Ordering::Less)
}

fn max_value(a: Value, b: Value) -> Value {
    pick(a, b, Ordering::Greater)
}

/// What DataFusion pushed into a scan.
struct Pushdown {
    prune: Arc<PrunePredicate>,
    exact: Arc<ScanFilter>,
    limit: Option<usize>,
}

/// What [`EddyScanExec::whole_units`] returns.
pub(crate) struct WholeUnits<'a> {
    /// Per output partition, its scan units.
    pub groups: &'a [Vec<Arc<ScanPartition>>],
    /// The table column behind each output column (`ncols`: the key).
    pub wanted: &'a [usize],
    pub ncols: usize,
}

/// Scan of one table snapshot: partition `i` reads the scan partitions of group `i`.
#[derive(Clone)]
pub struct EddyScanExec {
    table: String,
    ncols: usize,
    /// Provider-schema indices DataFusion wants, in its order (`ncols` = key).
    wanted: Vec<usize>,
    groups: Vec<Vec<Arc<ScanPartition>>>,
    /// Planner statistics, one per group.
    group_stats: Vec<ScanStats>,
    prune: Arc<PrunePredicate>,
    /// Filters reported `Exact`: applied here, not by DataFusion.
    exact: Arc<ScanFilter>,
    /// Build-side keys of hash joins above (table column, keys): rows
    /// whose key no such join can match are dropped here.
    join_filters: Vec<(usize, Arc<JoinKeyFilter>)>,
    limit: Option<usize>,
    props: Arc<PlanProperties>,
}

impl fmt::Debug for EddyScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EddyScanExec({})", self.table)
    }
}

impl EddyScanExec {
    fn new(
        table: String,
        ncols: usize,
        wanted: Vec<usize>,
        schema: SchemaRef,
        groups: Vec<Vec<Arc<ScanPartition>>>,
        group_stats: Vec<ScanStats>,
        pushdown: Pushdown,
    ) -> EddyScanExec {
        let Pushdown {
            prune,
            exact,
            limit,
        } = pushdown;
        let props = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(groups.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        EddyScanExec {
            table,
            ncols,
            wanted,
            groups,
            group_stats,
            prune,
            exact,
            join_filters: Vec::new(),
            limit,
            props: Arc::new(props),
        }
    }
}

impl EddyScanExec {
    /// What a device-resident read of this scan needs: per output
    /// partition its scan units, the table column behind each output
    /// column (`ncols` for the hidden key), and `ncols`. `None` when the
    /// scan itself drops rows that a kernel reading whole pieces would
    /// keep: a row limit, or filters the scan applies (`Exact`). The row
    /// group pruning and join key filters only skip rows that cannot
    /// match, so a reader may ignore them.
    pub(crate) fn whole_units(&self) -> Option<WholeUnits<'_>> {
        if self.limit.is_some() || !self.exact.is_empty() {
            return None;
        }
        Some(WholeUnits {
            groups: &self.groups,
            wanted: &self.wanted,
            ncols: self.ncols,
        })
    }

    /// This scan, also dropping rows whose output column `column` has no
    /// key in `filter` (see `join_filter`); `None` for the hidden key column.
    pub fn with_join_filter(
        &self,
        column: usize,
        filter: Arc<JoinKeyFilter>,
    ) -> Option<Arc<dyn ExecutionPlan>> {
        let table_column = *self.wanted.get(column)?;
        if table_column >= self.ncols {
            return None;
        }
        let mut scan = self.clone();
        scan.join_filters.push((table_column, filter));
        Some(Arc::new(scan))
    }
}

impl DisplayAs for EddyScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let parts: usize = self.groups.iter().map(|g| g.len()).sum();
        write!(
            f,
            "EddyScanExec: table={}, partitions={}, scan_units={}, projection={:?}, prune_predicates={}",
            self.table,
            self.groups.len(),
            parts,
            self.wanted,
            self.prune.conds.len()
        )?;
        if !self.exact.is_empty() {
            write!(f, ", filter_terms={}", self.exact.len())?;
        }
        if !self.join_filters.is_empty() {
            write!(f, ", join_key_filters={}", self.join_filters.len())?;
        }
        if let Some(l) = self.limit {
            write!(f, ", limit={l}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for EddyScanExec {
    fn name(&self) -> &str {
        "EddyScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    /// Row counts and numeric min/max let DataFusion's join selection build
    /// hash tables on the small side (also after a join: its output estimate
    /// needs key ranges) and broadcast small dimensions instead of
    /// repartitioning the fact table.
    fn partition_statistics(
        &self,
        partition: Option<usize>,
    ) -> datafusion::error::Result<Arc<datafusion::common::Statistics>> {
        let schema = self.schema();
        let stats = match partition {
            Some(i) => self.group_stats.get(i).cloned(),
            None => self
                .group_stats
                .split_first()
                .map(|(first, rest)| rest.iter().fold(first.clone(), |acc, g| acc.merge(g))),
        };
        let stats = match stats {
            Some(s) => s.to_datafusion(schema, self.limit),
            None => {
                let mut s = datafusion::common::Statistics::new_unknown(&schema);
                s.num_rows = datafusion::common::stats::Precision::Exact(0);
                s
            }
        };
        Ok(Arc::new(stats))
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> datafusion::error::Result<TreeNodeRecursion>,
    ) -> datafusion::error::Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> datafusion::error::Result<SendableRecordBatchStream> {
        let schema = self.schema();
        let units: Vec<Arc<ScanPartition>> =
            self.groups.get(partition).cloned().unwrap_or_default();
        let (tx, rx) = tokio::sync::mpsc::channel::<datafusion::error::Result<RecordBatch>>(2);
        let wanted = self.wanted.clone();
        let ncols = self.ncols;
        let prune = Arc::clone(&self.prune);
        let exact = Arc::clone(&self.exact);
        let join_filters = self.join_filters.clone();
        let limit = self.limit;
        let out_schema = Arc::clone(&schema);
        let scan = async move {
            // Join filters are looked at now, on the first poll: the hash
            // joins above have read their build sides by then.
            let mut row_filters = RowFilters::new(exact, join_filters);
            let with_key = wanted.contains(&ncols);
            // storage projection: wanted data columns in order of first use
            let mut cols: Vec<usize> = Vec::new();
            for &w in &wanted {
                if w < ncols && !cols.contains(&w) {
                    cols.push(w);
                }
            }
            // columns only the scan's own filters read come last
            let filter_columns: Vec<usize> = row_filters.columns();
            for c in filter_columns {
                if !cols.contains(&c) {
                    cols.push(c);
                }
            }
            let need_rows_only = cols.is_empty() && !with_key;
            if need_rows_only && ncols > 0 {
                cols.push(0);
            }
            let keep = |rg: &RowGroupStats| prune.keep(rg);
            let mut sent = 0usize;
            for unit in units {
                let iter = match unit.scan(Some(&cols), with_key, &keep) {
                    Ok(it) => it,
                    Err(e) => {
                        let _ = tx.send(Err(DataFusionError::External(Box::new(e)))).await;
                        return;
                    }
                };
                for batch in iter {
                    let out = batch
                        .map_err(|e| DataFusionError::External(Box::new(e)))
                        .and_then(|b| {
                            row_filters.apply(b, |c: usize| cols.iter().position(|x| *x == c))
                        })
                        .and_then(|b| reorder(&b, &wanted, &cols, ncols, &out_schema));
                    if matches!(&out, Ok(b) if b.num_rows() == 0) {
                        continue;
                    }
                    let rows = out.as_ref().map(|b| b.num_rows()).unwrap_or(0);
                    if tx.send(out).await.is_err() {
                        return; // the query was dropped or cancelled
                    }
                    sent += rows;
                    if limit.is_some_and(|l| sent >= l) {
                        return;
                    }
                    // one batch is this context's quantum
                    eddy_sched::yield_now().await;
                }
            }
        };
        // The storage scan starts on the first poll, not here.
        let mut scan = Some(scan);
        let stream = futures::stream::unfold(rx, move |mut rx| {
            if let Some(scan) = scan.take() {
                crate::scheduling::spawn_storage_scan(scan);
            }
            async move { rx.recv().await.map(|item| (item, rx)) }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// Turn a storage batch (columns `cols`, then the key if requested) into the
/// batch DataFusion asked for (provider indices `wanted`).
fn reorder(
    batch: &RecordBatch,
    wanted: &[usize],
    cols: &[usize],
    ncols: usize,
    schema: &SchemaRef,
) -> datafusion::error::Result<RecordBatch> {
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(wanted.len());
    for &w in wanted {
        let idx = if w == ncols {
            batch.num_columns().checked_sub(1)
        } else {
            cols.iter().position(|c| *c == w)
        };
        let a = idx
            .and_then(|i| batch.columns().get(i))
            .ok_or_else(|| DataFusionError::Internal(format!("storage batch lacks column {w}")))?;
        arrays.push(Arc::clone(a));
    }
    let opts = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        arrays,
        &opts,
    )?)
}

// ---------------------------------------------------------------------------
// row-group pruning

#[derive(Debug, Clone, Copy, PartialEq)]
enum CmpOp {
    Eq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

#[derive(Debug)]
struct Cond {
    col: usize,
    op: CmpOp,
    value: Value,
}

/// Conjunction of `column op literal` conditions checked against row-group
/// min/max. Conditions it cannot understand are simply left out (it only
/// ever keeps too much, never too little).
#[derive(Debug, Default)]
pub struct PrunePredicate {
    conds: Vec<Cond>,
}

impl PrunePredicate {
    fn from_filters(filters: &[Expr], names: &[String], types: &[ColumnType]) -> PrunePredicate {
        let mut p = PrunePredicate::default();
        for f in filters {
            p.collect(f, names, types);
        }
        p
    }

    fn collect(&mut self, e: &Expr, names: &[String], types: &[ColumnType]) {
        // Conjuncts that are not comparisons are simply not used.
        crate::scan_filter::for_each_comparison(e, &mut |col, op, lit| {
            let cop = match op {
                Operator::Eq => CmpOp::Eq,
                Operator::Lt => CmpOp::Lt,
                Operator::LtEq => CmpOp::LtEq,
                Operator::Gt => CmpOp::Gt,
                Operator::GtEq => CmpOp::GtEq,
                _ => return,
            };
            self.push(col, cop, lit, names, types);
        });
    }

    fn push(
        &mut self,
        col: &str,
        op: CmpOp,
        lit: &ScalarValue,
        names: &[String],
        types: &[ColumnType],
    ) {
        let Some(idx) = names.iter().position(|n| n == col) else {
            return;
        };
        let Some(v) = scalar_to_value(lit) else {
            return;
        };
        if let Ok(v) = coerce_value(v, types[idx]) {
            if !v.is_null() {
                self.conds.push(Cond {
                    col: idx,
                    op,
                    value: v,
                });
            }
        }
    }

    /// Whether a row group may hold matching rows.
    pub fn keep(&self, rg: &RowGroupStats) -> bool {
        for c in &self.conds {
            let Some(stats) = rg.columns.get(c.col) else {
                continue;
            };
            let (min, max) = (&stats.min, &stats.max);
            if min.is_null() || max.is_null() {
                continue; // unknown
            }
            let (Some(lo), Some(hi)) = (cmp_values(&c.value, min), cmp_values(&c.value, max))
            else {
                continue;
            };
            let possible = match c.op {
                CmpOp::Eq => lo != Ordering::Less && hi != Ordering::Greater,
                CmpOp::Lt => lo == Ordering::Greater, // min < v
                CmpOp::LtEq => lo != Ordering::Less,  // min <= v
                CmpOp::Gt => hi == Ordering::Less,    // max > v
                CmpOp::GtEq => hi != Ordering::Greater, // max >= v
            };
            if !possible {
                return false;
            }
        }
        true
    }
}

/// A stored value for a DataFusion literal, when it has one.
pub fn scalar_to_value(s: &ScalarValue) -> Option<Value> {
    Some(match s {
        ScalarValue::Boolean(Some(b)) => Value::Boolean(*b),
        ScalarValue::Int8(Some(x)) => Value::SmallInt(*x as i16),
        ScalarValue::Int16(Some(x)) => Value::SmallInt(*x),
        ScalarValue::Int32(Some(x)) => Value::Int(*x),
        ScalarValue::Int64(Some(x)) => Value::BigInt(*x),
        ScalarValue::UInt8(Some(x)) => Value::SmallInt(*x as i16),
        ScalarValue::UInt16(Some(x)) => Value::Int(*x as i32),
        ScalarValue::UInt32(Some(x)) => Value::BigInt(*x as i64),
        ScalarValue::UInt64(Some(x)) => Value::BigInt(i64::try_from(*x).ok()?),
        ScalarValue::Float32(Some(x)) => Value::Real(*x),
        ScalarValue::Float64(Some(x)) => Value::Double(*x),
        ScalarValue::Decimal128(Some(x), _, s) => {
            Value::Text(crate::pgtypes::format_decimal(*x, *s))
        }
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Value::Text(s.clone()),
        ScalarValue::Date32(Some(d)) => Value::Date(*d),
        ScalarValue::TimestampMicrosecond(Some(t), _) => Value::Timestamp(*t),
        ScalarValue::TimestampMillisecond(Some(t), _) => Value::Timestamp(t.checked_mul(1000)?),
        ScalarValue::TimestampSecond(Some(t), _) => Value::Timestamp(t.checked_mul(1_000_000)?),
        ScalarValue::TimestampNanosecond(Some(t), _) => Value::Timestamp(*t / 1000),
        ScalarValue::Binary(Some(b))
        | ScalarValue::LargeBinary(Some(b))
        | ScalarValue::BinaryView(Some(b)) => Value::Bytea(b.clone()),
        ScalarValue::Time64Microsecond(Some(t)) => Value::Time(*t),
        ScalarValue::IntervalMonthDayNano(Some(x)) => Value::Interval(eddy_common::Interval {
            months: x.months,
            days: x.days,
            micros: x.nanoseconds / 1000,
        }),
        ScalarValue::FixedSizeBinary(16, Some(b)) => {
            Value::Uuid(<[u8; eddy_common::UUID_LEN]>::try_from(b.as_slice()).ok()?)
        }
        s if s.is_null() => Value::Null,
        _ => return None,
    })
}

/// Order two values of the same type; `None` for mixed types or NaN.
pub fn cmp_values(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Boolean(x), Value::Boolean(y)) => Some(x.cmp(y)),
        (Value::SmallInt(x), Value::SmallInt(y)) => Some(x.cmp(y)),
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::BigInt(x), Value::BigInt(y)) => Some(x.cmp(y)),
        (Value::Real(x), Value::Real(y)) => x.partial_cmp(y),
        (Value::Double(x), Value::Double(y)) => x.partial_cmp(y),
        (Value::Decimal(x), Value::Decimal(y)) => Some(x.cmp(y)),
        (Value::Text(x), Value::Text(y)) => Some(x.cmp(y)),
        (Value::Date(x), Value::Date(y)) => Some(x.cmp(y)),
        (Value::Timestamp(x), Value::Timestamp(y)) => Some(x.cmp(y)),
        (Value::Bytea(x), Value::Bytea(y)) => Some(x.cmp(y)),
        (Value::Uuid(x), Value::Uuid(y)) => Some(x.cmp(y)),
        (Value::Time(x), Value::Time(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, lit};
    use eddy_storage::ColumnStats;

    #[test]
    fn prunes_row_groups_outside_the_range() {
        let names = vec!["a".to_string()];
        let types = vec![ColumnType::Int];
        let p = PrunePredicate::from_filters(&[col("a").gt(lit(10i32))], &names, &types);
        let rg = |lo, hi| RowGroupStats {
            rows: 10,
            columns: vec![ColumnStats {
                min: Value::Int(lo),
                max: Value::Int(hi),
                null_count: 0,
            }],
        };
        assert!(!p.keep(&rg(0, 10)));
        assert!(p.keep(&rg(0, 11)));
        let p = PrunePredicate::from_filters(&[col("a").eq(lit(5i64))], &names, &types);
        assert!(p.keep(&rg(0, 10)));
        assert!(!p.keep(&rg(6, 10)));
    }
}
