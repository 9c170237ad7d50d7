//! Runs a view's stateless stages (filters and projections DataFusion
//! planned, see `plan.rs`) on Arrow batches.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, RecordBatch};
use datafusion::arrow::compute::{and, filter_record_batch};
use datafusion::arrow::datatypes::Schema;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Result, StreamSqlError};
use crate::plan::Stage;

pub(crate) fn eval(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Result<ArrayRef> {
    Ok(expr.evaluate(batch)?.into_array(batch.num_rows())?)
}

pub(crate) fn as_mask(a: &ArrayRef) -> Result<BooleanArray> {
    a.as_any()
        .downcast_ref::<BooleanArray>()
        .cloned()
        .ok_or_else(|| StreamSqlError::Internal("a filter predicate is not boolean".into()))
}

/// Runs `stage` on `batch`, dropping the rows a filter rejects.
pub(crate) fn run_stage(stage: &Stage, batch: RecordBatch) -> Result<RecordBatch> {
    match stage {
        Stage::Filter {
            predicate,
            projection,
        } => {
            let mask = as_mask(&eval(predicate, &batch)?)?;
            let kept = filter_record_batch(&batch, &mask)?;
            Ok(match projection {
                Some(p) => kept.project(p)?,
                None => kept,
            })
        }
        Stage::Project { exprs, schema } => project(exprs, schema, &batch),
        Stage::Lookup(join) => join.run(batch),
    }
}

pub(crate) fn project(
    exprs: &[Arc<dyn PhysicalExpr>],
    schema: &Arc<Schema>,
    batch: &RecordBatch,
) -> Result<RecordBatch> {
    let columns = exprs
        .iter()
        .map(|e| eval(e, batch))
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// Runs `stages` keeping every row: a filter only narrows `mask`.
pub(crate) fn run_masked(
    stages: &[Stage],
    mut batch: RecordBatch,
) -> Result<(RecordBatch, BooleanArray)> {
    let mut mask = BooleanArray::from(vec![true; batch.num_rows()]);
    for stage in stages {
        match stage {
            Stage::Filter {
                predicate,
                projection,
            } => {
                mask = and(&mask, &as_mask(&eval(predicate, &batch)?)?)?;
                if let Some(p) = projection {
                    batch = batch.project(p)?;
                }
            }
            Stage::Project { exprs, schema } => batch = project(exprs, schema, &batch)?,
            // the planner puts joins below the aggregate only
            Stage::Lookup(_) => {
                return Err(StreamSqlError::Internal(
                    "a lookup join after the aggregate".into(),
                ))
            }
        }
    }
    Ok((batch, mask))
}

/// Where each output column of `stages` comes from: `origin[i]` says what
/// column `i` of the input to the first stage is (`None`: nothing the
/// caller tracks); the answer says the same of the last stage's output. A
/// column passes through a filter's projection and a projection that
/// selects it unchanged; any computed column is `None`.
pub(crate) fn trace_origins(
    mut origin: Vec<Option<usize>>,
    stages: &[Stage],
) -> Vec<Option<usize>> {
    use datafusion::physical_expr::expressions::Column;
    for stage in stages {
        origin = match stage {
            Stage::Filter { projection, .. } => match projection {
                None => origin,
                Some(p) => p
                    .iter()
                    .map(|i| origin.get(*i).copied().flatten())
                    .collect(),
            },
            Stage::Project { exprs, .. } => exprs
                .iter()
                .map(|e| {
                    e.downcast_ref::<Column>()
                        .and_then(|c| origin.get(c.index()).copied().flatten())
                })
                .collect(),
            Stage::Lookup(join) => join.trace(origin),
        };
    }
    origin
}
