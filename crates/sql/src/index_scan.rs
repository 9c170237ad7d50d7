//! `IndexScanExec`: a table scan answered through a secondary index when
//! the pushed-down filters bound the index's leading columns (equality on a
//! prefix, then a range on the next column; `BETWEEN` counts as a range).
//!
//! Correctness does not depend on the index being exact: storage returns a
//! superset of the snapshot's rows in the bounds (`TableSnapshot::
//! index_lookup`), and this node re-applies *every* pushed-down filter
//! (Exact and Inexact alike) before projecting. When the index cannot
//! answer at the statement's snapshot, the node scans the whole snapshot
//! instead, with the same filters: the answer is the full scan's either
//! way. Floating-point columns are used for equality only (`-0` and `0`
//! are one index key; a range's edge could differ from the filter's order).

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BinaryBuilder, BooleanArray, RecordBatch};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, DataFusionError, ScalarValue};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, Operator};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use eddy_common::{ColumnType, IndexDef, Row, TableDef, Value};
use eddy_storage::arrow_values::ColumnBuilder;
use eddy_storage::index::encode_index_value;
use eddy_storage::TableSnapshot;

use crate::scan_filter::for_each_comparison;

/// Which index a scan uses and the bounds on its encoded leading columns.
#[derive(Clone, Debug)]
pub struct IndexChoice {
    pub index: String,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    /// The comparisons the bounds come from, for EXPLAIN.
    shown: Vec<String>,
    /// Leading columns bound by equality.
    eq_columns: usize,
}

/// The best index for `filters`: most leading columns bound by equality,
/// then a range; unique indexes first among equals. `None`: no index helps.
pub fn choose_index(def: &TableDef, filters: &[Expr]) -> Option<IndexChoice> {
    let mut comparisons: Vec<(usize, Operator, Value, String)> = Vec::new();
    for f in filters {
        for_each_comparison(f, &mut |name, op, lit| {
            let Some(col) = def.column_index(name) else {
                return;
            };
            let Some(ty) = def.columns.get(col).map(|c| c.ty) else {
                return;
            };
            if let Some(v) = literal_value(lit, ty) {
                comparisons.push((col, op, v, format!("{name} {op} {lit}")));
            }
        });
    }
    let mut best: Option<IndexChoice> = None;
    for ix in &def.indexes {
        let Some(choice) = bounds_for(def, ix, &comparisons) else {
            continue;
        };
        let better = match &best {
            None => true,
            Some(b) => {
                (choice.eq_columns, choice.shown.len(), ix.unique)
                    > (
                        b.eq_columns,
                        b.shown.len(),
                        def.index(&b.index).is_some_and(|i| i.unique),
                    )
            }
        };
        if better {
            best = Some(choice);
        }
    }
    best
}

fn bounds_for(
    def: &TableDef,
    ix: &IndexDef,
    comparisons: &[(usize, Operator, Value, String)],
) -> Option<IndexChoice> {
    let mut prefix = Vec::new();
    let mut shown = Vec::new();
    let mut eq_columns = 0;
    for &col in &ix.columns {
        match comparisons
            .iter()
            .find(|(c, op, ..)| *c == col && *op == Operator::Eq)
        {
            Some((_, _, v, text)) => {
                encode_index_value(v, &mut prefix);
                shown.push(text.clone());
                eq_columns += 1;
            }
            None => break,
        }
    }
    let next = ix.columns.get(eq_columns).copied();
    let ranged = next.filter(|&c| {
        !matches!(
            def.columns.get(c).map(|c| c.ty),
            Some(ColumnType::Real | ColumnType::Double) | None
        )
    });
    let bound = |ops: &[Operator]| {
        ranged.and_then(|c| {
            comparisons
                .iter()
                .find(|(col, op, ..)| *col == c && ops.contains(op))
        })
    };
    let lo = bound(&[Operator::Gt, Operator::GtEq]);
    let hi = bound(&[Operator::Lt, Operator::LtEq]);
    if eq_columns == 0 && lo.is_none() && hi.is_none() {
        return None;
    }
    let with = |v: &Value| {
        let mut k = prefix.clone();
        encode_index_value(v, &mut k);
        k
    };
    let lower = match lo {
        Some((_, Operator::Gt, v, text)) => {
            shown.push(text.clone());
            Bound::Excluded(with(v))
        }
        Some((_, _, v, text)) => {
            shown.push(text.clone());
            Bound::Included(with(v))
        }
        None if prefix.is_empty() => Bound::Unbounded,
        None => Bound::Included(prefix.clone()),
    };
    let upper = match hi {
        Some((_, Operator::Lt, v, text)) => {
            shown.push(text.clone());
            Bound::Excluded(with(v))
        }
        Some((_, _, v, text)) => {
            shown.push(text.clone());
            Bound::Included(with(v))
        }
        None if prefix.is_empty() => Bound::Unbounded,
        None => Bound::Included(prefix.clone()),
    };
    Some(IndexChoice {
        index: ix.name.clone(),
        lower,
        upper,
        shown,
        eq_columns,
    })
}

/// The literal as a value of column type `ty`, only where it is exactly of
/// that type (a literal DataFusion did not coerce is left to the filter).
fn literal_value(lit: &ScalarValue, ty: ColumnType) -> Option<Value> {
    Some(match (lit, ty) {
        (ScalarValue::Boolean(Some(b)), ColumnType::Boolean) => Value::Boolean(*b),
        (ScalarValue::Int16(Some(v)), ColumnType::SmallInt) => Value::SmallInt(*v),
        (ScalarValue::Int32(Some(v)), ColumnType::Int) => Value::Int(*v),
        (ScalarValue::Int64(Some(v)), ColumnType::BigInt) => Value::BigInt(*v),
        (ScalarValue::Float32(Some(v)), ColumnType::Real) => Value::Real(*v),
        (ScalarValue::Float64(Some(v)), ColumnType::Double) => Value::Double(*v),
        (ScalarValue::Decimal128(Some(v), _, s), ColumnType::Decimal(..) | ColumnType::Numeric)
            if matches!(ty.storage(), ColumnType::Decimal(_, cs) if cs == *s) =>
        {
            Value::Decimal(*v)
        }
        (
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)),
            ColumnType::Text | ColumnType::Varchar(_),
        ) => Value::Text(s.clone()),
        (ScalarValue::Date32(Some(v)), ColumnType::Date) => Value::Date(*v),
        (ScalarValue::TimestampMicrosecond(Some(v), None), ColumnType::Timestamp) => {
            Value::Timestamp(*v)
        }
        _ => return None,
    })
}

/// A scan of one table through one index (see the module doc).
pub struct IndexScanExec {
    table: String,
    def: Arc<TableDef>,
    snapshot: Arc<TableSnapshot>,
    choice: IndexChoice,
    /// Every pushed-down filter, over the table's full row.
    filters: Vec<Arc<dyn PhysicalExpr>>,
    /// Output columns: indices into the row, `ncols` is the key column.
    wanted: Vec<usize>,
    full_schema: SchemaRef,
    props: Arc<PlanProperties>,
}

impl IndexScanExec {
    /// `schema` is the provider's (table columns, then the key column).
    pub fn try_new(
        state: &dyn datafusion::catalog::Session,
        def: Arc<TableDef>,
        snapshot: Arc<TableSnapshot>,
        choice: IndexChoice,
        filters: &[Expr],
        wanted: Vec<usize>,
        schema: SchemaRef,
    ) -> datafusion::error::Result<IndexScanExec> {
        let ncols = def.columns.len();
        let full_schema = Arc::new(schema.project(&(0..ncols).collect::<Vec<_>>())?);
        let df_schema = DFSchema::try_from(full_schema.as_ref().clone())?;
        let filters = filters
            .iter()
            .map(|f| {
                // the provider's columns are unqualified here
                let f = f
                    .clone()
                    .transform(|e| {
                        Ok(match e {
                            Expr::Column(c) => {
                                Transformed::yes(Expr::Column(Column::new_unqualified(c.name)))
                            }
                            other => Transformed::no(other),
                        })
                    })?
                    .data;
                state.create_physical_expr(f, &df_schema)
            })
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let out_schema = Arc::new(schema.project(&wanted)?);
        let props = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(out_schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Ok(IndexScanExec {
            table: def.name.clone(),
            def,
            snapshot,
            choice,
            filters,
            wanted,
            full_schema,
            props,
        })
    }

    /// The rows and keys the index gives, or every row of the snapshot
    /// when it cannot answer.
    fn candidates(&self) -> datafusion::error::Result<Vec<(Vec<u8>, Row)>> {
        let found = self
            .snapshot
            .index_lookup(&self.choice.index, &self.choice.lower, &self.choice.upper)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        if let Some(rows) = found {
            return Ok(rows);
        }
        tracing::debug!(table = %self.table, index = %self.choice.index, "index cannot answer at this snapshot; scanning");
        let types: Vec<ColumnType> = self.def.columns.iter().map(|c| c.ty).collect();
        let mut out = Vec::new();
        for part in self.snapshot.partitions() {
            let batches = part
                .scan(None, true, &|_| true)
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            for b in batches {
                let b = b.map_err(|e| DataFusionError::External(Box::new(e)))?;
                let keys = b
                    .columns()
                    .last()
                    .and_then(|c| {
                        c.as_any()
                            .downcast_ref::<datafusion::arrow::array::BinaryArray>()
                    })
                    .ok_or_else(|| {
                        DataFusionError::Internal("scan without its key column".into())
                    })?;
                for r in 0..b.num_rows() {
                    let row = eddy_storage::arrow_values::row_at(&b, &types, r)
                        .map_err(|e| DataFusionError::External(Box::new(e)))?;
                    out.push((keys.value(r).to_vec(), row));
                }
            }
        }
        Ok(out)
    }

    fn batch(&self) -> datafusion::error::Result<RecordBatch> {
        let rows = self.candidates()?;
        let ncols = self.def.columns.len();
        let mut builders: Vec<ColumnBuilder> = self
            .def
            .columns
            .iter()
            .map(|c| ColumnBuilder::new(c.ty, rows.len()))
            .collect();
        let mut keys = BinaryBuilder::new();
        for (k, row) in &rows {
            for (i, b) in builders.iter_mut().enumerate() {
                b.append(row.get(i).unwrap_or(&Value::Null))
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
            }
            keys.append_value(k);
        }
        let cols: Vec<ArrayRef> = builders.iter_mut().map(|b| b.finish()).collect();
        let mut batch = RecordBatch::try_new(Arc::clone(&self.full_schema), cols)?;
        let mut key_col: ArrayRef = Arc::new(keys.finish());
        for f in &self.filters {
            let mask = f.evaluate(&batch)?.into_array(batch.num_rows())?;
            let mask = mask
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| DataFusionError::Internal("a filter that is not boolean".into()))?
                .clone();
            batch = filter_record_batch(&batch, &mask)?;
            key_col = datafusion::arrow::compute::filter(&key_col, &mask)?;
        }
        let out: Vec<ArrayRef> = self
            .wanted
            .iter()
            .map(|&w| {
                if w == ncols {
                    Ok(Arc::clone(&key_col))
                } else {
                    batch
                        .columns()
                        .get(w)
                        .cloned()
                        .ok_or_else(|| DataFusionError::Internal(format!("no column {w}")))
                }
            })
            .collect::<datafusion::error::Result<_>>()?;
        Ok(RecordBatch::try_new_with_options(
            self.schema(),
            out,
            &datafusion::arrow::array::RecordBatchOptions::new()
                .with_row_count(Some(batch.num_rows())),
        )?)
    }
}

impl fmt::Debug for IndexScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexScanExec")
            .field("table", &self.table)
            .field("choice", &self.choice)
            .field("wanted", &self.wanted)
            .finish()
    }
}

impl DisplayAs for IndexScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "IndexScanExec: table={}, index={}, bounds=[{}], projection={:?}",
            self.table,
            self.choice.index,
            self.choice.shown.join(" AND "),
            self.wanted
        )
    }
}

impl ExecutionPlan for IndexScanExec {
    fn name(&self) -> &str {
        "IndexScanExec"
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
        let batch = self.batch();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            futures::stream::iter(std::iter::once(batch)),
        )))
    }
}
