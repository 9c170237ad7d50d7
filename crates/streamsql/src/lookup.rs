//! Stream-table lookup joins: `FROM source s JOIN table t ON s.k = t.id`.
//!
//! Semantics (as RisingWave's and Flink's lookup joins): each source row,
//! when the view operator processes it, looks up the table's row under the
//! join key *at that moment* (one consistent cut per batch,
//! `Table::multi_get`). The result is never revised: a later change to the
//! table retracts nothing already joined. An inner join drops a source row
//! with no table row; `LEFT JOIN` (source on the left) keeps it with NULLs.
//!
//! What is accepted, checked on DataFusion's physical plan (`plan.rs`): a
//! hash join between the source's pipeline and the table's scan, equal on
//! **every primary-key column** of the table and on nothing else (so each
//! source row matches at most one table row), no residual condition;
//! filters on the table's columns are pushed into the scan and applied to
//! the looked-up row. Everything else (other join types, a key that is not
//! the primary key, stream-stream joins) is refused with 0A000.
//!
//! The table is looked up by name when the job starts ([`LookupJoin::bind`]);
//! a view over a change-log source cannot use a lookup join (a retraction
//! would look up a different row than its insertion did).

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use datafusion::arrow::compute::{filter, nullif};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, JoinType, NullEquality};
use datafusion::datasource::TableType;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use eddy_common::{ColumnType, TableDef, Value};
use eddy_storage::arrow_values::{value_at, ColumnBuilder};
use eddy_storage::Table;

use crate::error::{Result, StreamSqlError};
use crate::stages::eval;
use eddy_sql::SqlError;

/// A table a view may look up, as the planner sees it.
#[derive(Debug)]
pub struct LookupTable {
    def: Arc<TableDef>,
    /// The table's columns, all nullable (a LEFT JOIN's misses are NULL).
    schema: SchemaRef,
}

impl LookupTable {
    pub fn new(def: Arc<TableDef>) -> LookupTable {
        let fields: Vec<Field> = def
            .columns
            .iter()
            .map(|c| Field::new(&c.name, c.ty.to_arrow(), true))
            .collect();
        LookupTable {
            def,
            schema: Arc::new(Schema::new(fields)),
        }
    }
}

#[async_trait]
impl TableProvider for LookupTable {
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
        Ok(vec![TableProviderFilterPushDown::Exact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        let columns: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let schema = Arc::new(self.schema.project(&columns)?);
        let df_schema = DFSchema::try_from(self.schema.as_ref().clone())?;
        let filters = filters
            .iter()
            .map(|f| {
                // the filter names the table's columns under the query's
                // qualifier; the looked-up row has them unqualified
                let f = f
                    .clone()
                    .transform(|e| {
                        Ok(match e {
                            Expr::Column(c) => Transformed::yes(Expr::Column(
                                datafusion::common::Column::new_unqualified(c.name),
                            )),
                            other => Transformed::no(other),
                        })
                    })?
                    .data;
                state.create_physical_expr(f, &df_schema)
            })
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let props = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(Arc::new(LookupScanExec {
            def: Arc::clone(&self.def),
            columns,
            filters,
            props: Arc::new(props),
        }))
    }
}

/// The table side of a lookup join in the planned query. Never executed.
#[derive(Debug)]
pub struct LookupScanExec {
    def: Arc<TableDef>,
    /// Table columns the scan outputs.
    columns: Vec<usize>,
    /// Pushed-down filters over the table's full row.
    filters: Vec<Arc<dyn PhysicalExpr>>,
    props: Arc<PlanProperties>,
}

impl DisplayAs for LookupScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "LookupScanExec: table={}", self.def.name)
    }
}

impl ExecutionPlan for LookupScanExec {
    fn name(&self) -> &str {
        "LookupScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
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
        _partition: usize,
        _context: Arc<TaskContext>,
    ) -> datafusion::error::Result<SendableRecordBatchStream> {
        Err(datafusion::error::DataFusionError::NotImplemented(
            "a lookup join's table side is read by the view operator".into(),
        ))
    }
}

/// A planned lookup join: the stage the view operator runs.
pub struct LookupJoin {
    pub table: String,
    /// The source pipeline is the join's left input.
    source_left: bool,
    /// Source-side key expressions, one per primary-key column, in key order.
    keys: Vec<Arc<dyn PhysicalExpr>>,
    key_types: Vec<ColumnType>,
    columns: Vec<usize>,
    filters: Vec<Arc<dyn PhysicalExpr>>,
    /// Keep source rows without a match (LEFT JOIN), NULL-extended.
    keep_unmatched: bool,
    projection: Option<Vec<usize>>,
    schema: SchemaRef,
    bound: OnceLock<Arc<Table>>,
}

impl std::fmt::Debug for LookupJoin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LookupJoin")
            .field("table", &self.table)
            .field("keys", &self.keys)
            .field("keep_unmatched", &self.keep_unmatched)
            .finish_non_exhaustive()
    }
}

fn refuse(why: impl std::fmt::Display) -> StreamSqlError {
    StreamSqlError::NotSupported(format!(
        "{why} (supported: a lookup join of the source with a table, `JOIN table t ON s.col = \
         t.key` on every primary-key column of the table, inner or LEFT JOIN)"
    ))
}

impl LookupJoin {
    /// The lookup join `join` plans, if its inputs are the source's
    /// pipeline and a table's scan.
    pub fn of(join: &HashJoinExec) -> Result<LookupJoin> {
        let left = crate::plan::skip_neutral(join.left());
        let right = crate::plan::skip_neutral(join.right());
        let (source_left, scan) = match (
            left.downcast_ref::<LookupScanExec>(),
            right.downcast_ref::<LookupScanExec>(),
        ) {
            (Some(_), Some(_)) => return Err(refuse("a join of two tables")),
            (None, Some(s)) => (true, s),
            (Some(s), None) => (false, s),
            (None, None) => {
                return Err(refuse(
                    "a join of two inputs that are neither a source and a table nor two \
                     sources (an interval join), or of a table with filters or expressions \
                     below the join",
                ))
            }
        };
        let keep_unmatched = match (join.join_type(), source_left) {
            (JoinType::Inner, _) => false,
            (JoinType::Left, true) | (JoinType::Right, false) => true,
            (other, _) => return Err(refuse(format!("a {other} join"))),
        };
        if join.filter().is_some() {
            return Err(refuse(
                "a join condition other than equality of the source with the table's key",
            ));
        }
        if join.null_equality() != NullEquality::NullEqualsNothing {
            return Err(refuse("a join on IS NOT DISTINCT FROM"));
        }
        let pk = &scan.def.primary_key;
        let mut keys: Vec<Option<Arc<dyn PhysicalExpr>>> = vec![None; pk.len()];
        for (l, r) in join.on() {
            let (source_side, table_side) = if source_left { (l, r) } else { (r, l) };
            let column = table_side
                .downcast_ref::<Column>()
                .and_then(|c| scan.columns.get(c.index()))
                .ok_or_else(|| refuse("a join on an expression of the table's columns"))?;
            let at = pk
                .iter()
                .position(|k| k == column)
                .ok_or_else(|| refuse("a join on a column that is not the table's primary key"))?;
            match keys.get_mut(at) {
                Some(slot @ None) => *slot = Some(Arc::clone(source_side)),
                _ => return Err(refuse("a join naming a key column twice")),
            }
        }
        let keys: Vec<Arc<dyn PhysicalExpr>> = keys
            .into_iter()
            .collect::<Option<_>>()
            .ok_or_else(|| refuse("a join on part of the table's primary key"))?;
        let key_types = pk
            .iter()
            .map(|k| scan.def.columns.get(*k).map(|c| c.ty))
            .collect::<Option<_>>()
            .ok_or_else(|| StreamSqlError::Internal("key column out of range".into()))?;
        Ok(LookupJoin {
            table: scan.def.name.clone(),
            source_left,
            keys,
            key_types,
            columns: scan.columns.clone(),
            filters: scan.filters.clone(),
            keep_unmatched,
            projection: join.projection.as_ref().map(|p| p.to_vec()),
            schema: join.schema(),
            bound: OnceLock::new(),
        })
    }

    /// Whether the source's pipeline is the join's left input.
    pub fn source_left(&self) -> bool {
        self.source_left
    }

    /// Gives the join its table (at job start).
    pub fn bind(&self, table: Arc<Table>) {
        let _ = self.bound.set(table);
    }

    /// Where each output column comes from, given the same of the source
    /// side's columns (`None`: a table column, or computed).
    /// The source-side key expressions (over the join's source input).
    pub fn source_keys(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.keys
    }

    pub fn trace(&self, source: Vec<Option<usize>>) -> Vec<Option<usize>> {
        let table = vec![None; self.columns.len()];
        let all: Vec<Option<usize>> = if self.source_left {
            source.into_iter().chain(table).collect()
        } else {
            table.into_iter().chain(source).collect()
        };
        match &self.projection {
            Some(p) => p.iter().map(|i| all.get(*i).copied().flatten()).collect(),
            None => all,
        }
    }

    /// Joins one batch of source rows with the table's rows now.
    pub fn run(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let table = self
            .bound
            .get()
            .ok_or_else(|| StreamSqlError::Internal("lookup join not bound".into()))?;
        let n = batch.num_rows();
        let key_arrays = self
            .keys
            .iter()
            .map(|e| eval(e, &batch))
            .collect::<Result<Vec<_>>>()?;
        let mut asked = Vec::with_capacity(n);
        let mut slots = Vec::with_capacity(n);
        for i in 0..n {
            if key_arrays.iter().any(|a| a.is_null(i)) {
                slots.push(None);
                continue;
            }
            let pk: Vec<Value> = key_arrays
                .iter()
                .zip(&self.key_types)
                .map(|(a, ty)| value_at(a.as_ref(), *ty, i))
                .collect::<std::result::Result<_, _>>()
                .map_err(SqlError::from)?;
            slots.push(Some(asked.len()));
            asked.push(pk);
        }
        let found = table.multi_get(&asked)?;
        let def = table.def();
        let mut builders: Vec<ColumnBuilder> = def
            .columns
            .iter()
            .map(|c| ColumnBuilder::new(c.ty, n))
            .collect();
        let mut matched = Vec::with_capacity(n);
        for slot in &slots {
            let row = slot.and_then(|s| found.get(s)).and_then(Option::as_ref);
            matched.push(row.is_some());
            for (c, b) in builders.iter_mut().enumerate() {
                b.append(row.and_then(|r| r.get(c)).unwrap_or(&Value::Null))
                    .map_err(SqlError::from)?;
            }
        }
        let full: Vec<ArrayRef> = builders.iter_mut().map(ColumnBuilder::finish).collect();
        let fields: Vec<Field> = def
            .columns
            .iter()
            .map(|c| Field::new(&c.name, c.ty.to_arrow(), true))
            .collect();
        let full = RecordBatch::try_new(Arc::new(Schema::new(fields)), full)?;
        let mut keep = BooleanArray::from(matched);
        for f in &self.filters {
            let m = eval(f, &full)?;
            let m = m
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| StreamSqlError::Internal("a filter is not boolean".into()))?;
            let m: BooleanArray = m.iter().map(|v| Some(v.unwrap_or(false))).collect();
            keep = datafusion::arrow::compute::and(&keep, &m)?;
        }
        let mut table_side = Vec::with_capacity(self.columns.len());
        for c in &self.columns {
            let a = full
                .columns()
                .get(*c)
                .ok_or_else(|| StreamSqlError::Internal("lookup column out of range".into()))?;
            table_side.push(a.clone());
        }
        let mut source_side: Vec<ArrayRef> = batch.columns().to_vec();
        if self.keep_unmatched {
            let missing = datafusion::arrow::compute::not(&keep)?;
            table_side = table_side
                .iter()
                .map(|a| nullif(a.as_ref(), &missing))
                .collect::<std::result::Result<_, _>>()?;
        } else {
            table_side = table_side
                .iter()
                .map(|a| filter(a.as_ref(), &keep))
                .collect::<std::result::Result<_, _>>()?;
            source_side = source_side
                .iter()
                .map(|a| filter(a.as_ref(), &keep))
                .collect::<std::result::Result<_, _>>()?;
        }
        let all: Vec<ArrayRef> = if self.source_left {
            source_side.into_iter().chain(table_side).collect()
        } else {
            table_side.into_iter().chain(source_side).collect()
        };
        let out = match &self.projection {
            Some(p) => p
                .iter()
                .map(|i| {
                    all.get(*i).cloned().ok_or_else(|| {
                        StreamSqlError::Internal("join projection out of range".into())
                    })
                })
                .collect::<Result<Vec<_>>>()?,
            None => all,
        };
        let rows = if self.keep_unmatched {
            n
        } else {
            keep.true_count()
        };
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            out,
            &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }
}
