//! `ApplyExec`, the operator behind [`ApplyNode`], and the query planner
//! that puts it in plans.
//!
//! For each input batch and each subquery: the rows' values of the outer
//! columns the subquery reads are grouped into distinct bindings (arrow
//! row format); a binding not seen before is bound into the subquery's
//! logical plan, which is optimized, planned (by this same planner, so
//! nested subqueries work alike) and run to the end (EXISTS stops at one
//! row, a scalar at two); its outcome is cached for the rest of the
//! statement, shared by the operator's partitions, its bytes reserved
//! from the query's memory pool.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::catalog::Session as DfSession;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::execution::context::{QueryPlanner, SessionState};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{LogicalPlan, LogicalPlanBuilder, UserDefinedLogicalNode};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    execute_stream, DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties,
    PlanProperties,
};
use datafusion::physical_planner::{DefaultPhysicalPlanner, ExtensionPlanner, PhysicalPlanner};
use futures::StreamExt;

use super::bind::{bind_outer, outer_columns, InSet};
use super::rewrite::apply_remaining;
use super::ApplyNode;
use crate::SqlError;

/// Eddy's query planner: DataFusion's, after every subquery expression the
/// optimizer left has become an Apply ([`apply_remaining`]).
#[derive(Debug, Default)]
pub struct EddyQueryPlanner;

#[async_trait]
impl QueryPlanner for EddyQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn DfSession,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let plan = apply_remaining(logical_plan.clone())?;
        DefaultPhysicalPlanner::with_extension_planners(vec![Arc::new(ApplyPlanner)])
            .create_physical_plan(&plan, session)
            .await
    }
}

/// Plans an [`ApplyNode`] as an [`ApplyExec`].
struct ApplyPlanner;

#[async_trait]
impl ExtensionPlanner for ApplyPlanner {
    async fn plan_extension(
        &self,
        planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        session: &dyn DfSession,
        planning_ctx: &datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext,
    ) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(apply) = node.as_any().downcast_ref::<ApplyNode>() else {
            return Ok(None);
        };
        let (Some(logical_input), Some(input)) = (logical_inputs.first(), physical_inputs.first())
        else {
            return datafusion::common::internal_err!("Apply takes one input");
        };
        let Some(state) = session.as_any().downcast_ref::<SessionState>() else {
            return datafusion::common::not_impl_err!(
                "correlated subqueries need a full DataFusion session"
            );
        };
        let outer = logical_input.schema();
        let mut subqueries = Vec::with_capacity(apply.subqueries.len());
        for s in &apply.subqueries {
            if let Some(c) = unavailable_outer_column(&s.plan, outer) {
                // DataFusion plans ORDER BY without the columns only a
                // subquery there reads
                return datafusion::common::not_impl_err!(
                    "a correlated subquery here cannot read column \"{}\": select it too",
                    c.name
                );
            }
            let columns = outer_columns(&s.plan, outer);
            let indices = columns
                .iter()
                .map(|c| outer.index_of_column(c))
                .collect::<DfResult<Vec<_>>>()?;
            let kind = match &s.kind {
                super::ApplyKind::Scalar => Kind::Scalar,
                super::ApplyKind::Exists { negated } => Kind::Exists { negated: *negated },
                super::ApplyKind::In { probe, negated } => Kind::In {
                    probe: planner.create_physical_expr(probe, outer, session, planning_ctx)?,
                    negated: *negated,
                },
            };
            let plan = match &s.kind {
                // one row answers EXISTS; two are enough to refuse a scalar
                super::ApplyKind::Exists { .. } => limit(&s.plan, 1)?,
                super::ApplyKind::Scalar => limit(&s.plan, 2)?,
                super::ApplyKind::In { .. } => s.plan.as_ref().clone(),
            };
            let ty = match &s.kind {
                super::ApplyKind::Scalar => s
                    .plan
                    .schema()
                    .fields()
                    .first()
                    .map(|f| f.data_type().clone())
                    .unwrap_or(DataType::Null),
                _ => DataType::Boolean,
            };
            subqueries.push(Arc::new(Subquery {
                kind,
                plan,
                columns,
                indices,
                ty,
                cache: parking_lot::Mutex::new(HashMap::new()),
            }));
        }
        let schema: SchemaRef = Arc::new(apply.schema().as_arrow().clone());
        Ok(Some(Arc::new(ApplyExec::new(
            Arc::clone(input),
            subqueries,
            Arc::new(state.clone()),
            schema,
        ))))
    }
}

/// An outer reference of `plan`'s own nodes (nested subqueries resolve
/// theirs at their level) that `outer` lacks.
fn unavailable_outer_column(
    plan: &LogicalPlan,
    outer: &datafusion::common::DFSchema,
) -> Option<Column> {
    let mut missing = None;
    let _ = plan.apply(|node| {
        node.apply_expressions(|e| {
            e.apply(|x| {
                if let datafusion::logical_expr::Expr::OuterReferenceColumn(_, c) = x {
                    if !outer.has_column(c) {
                        missing = Some(c.clone());
                        return Ok(TreeNodeRecursion::Stop);
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    missing
}

fn limit(plan: &LogicalPlan, n: usize) -> DfResult<LogicalPlan> {
    LogicalPlanBuilder::from(plan.clone())
        .limit(0, Some(n))?
        .build()
}

enum Kind {
    Scalar,
    Exists {
        negated: bool,
    },
    In {
        probe: Arc<dyn PhysicalExpr>,
        negated: bool,
    },
}

/// What one run of a subquery answered.
enum Outcome {
    Scalar(ScalarValue),
    Exists(bool),
    In(InSet),
}

impl Outcome {
    fn size(&self) -> usize {
        match self {
            Outcome::Scalar(v) => v.size(),
            Outcome::Exists(_) => 1,
            Outcome::In(s) => s.size(),
        }
    }
}

/// One subquery of an [`ApplyExec`].
struct Subquery {
    kind: Kind,
    /// the subquery, with outer references to `columns`
    plan: LogicalPlan,
    columns: Vec<Column>,
    /// where `columns` are in the input
    indices: Vec<usize>,
    /// the output column's type
    ty: DataType,
    /// outcomes by binding (arrow row bytes of the outer values)
    cache: parking_lot::Mutex<HashMap<Vec<u8>, Arc<Outcome>>>,
}

/// Dependent join: the input's rows, each with one column per subquery.
pub struct ApplyExec {
    input: Arc<dyn ExecutionPlan>,
    subqueries: Vec<Arc<Subquery>>,
    state: Arc<SessionState>,
    props: Arc<PlanProperties>,
}

impl ApplyExec {
    fn new(
        input: Arc<dyn ExecutionPlan>,
        subqueries: Vec<Arc<Subquery>>,
        state: Arc<SessionState>,
        schema: SchemaRef,
    ) -> ApplyExec {
        // the input's columns keep their places: its order holds
        let mut eq = EquivalenceProperties::new(schema);
        if let Some(order) = input.output_ordering() {
            eq.add_ordering(order.iter().cloned());
        }
        let props = PlanProperties::new(
            eq,
            input.output_partitioning().clone(),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        ApplyExec {
            input,
            subqueries,
            state,
            props: Arc::new(props),
        }
    }
}

impl fmt::Debug for ApplyExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApplyExec({} subqueries)", self.subqueries.len())
    }
}

impl DisplayAs for ApplyExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "ApplyExec: subqueries=[")?;
        for (i, s) in self.subqueries.iter().enumerate() {
            let kind = match &s.kind {
                Kind::Scalar => "scalar",
                Kind::Exists { .. } => "exists",
                Kind::In { .. } => "in",
            };
            let cols: Vec<String> = s.columns.iter().map(|c| c.flat_name()).collect();
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{kind}({})", cols.join(", "))?;
        }
        write!(f, "]")
    }
}

impl ExecutionPlan for ApplyExec {
    fn name(&self) -> &str {
        "ApplyExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        for s in &self.subqueries {
            if let Kind::In { probe, .. } = &s.kind {
                if f(probe)? == TreeNodeRecursion::Stop {
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let Some(input) = children.into_iter().next() else {
            return datafusion::common::internal_err!("ApplyExec takes one child");
        };
        Ok(Arc::new(ApplyExec::new(
            input,
            self.subqueries.clone(),
            Arc::clone(&self.state),
            self.schema(),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, Arc::clone(&context))?;
        let schema = self.schema();
        let reservation =
            MemoryConsumer::new(format!("ApplyExec[{partition}]")).register(context.memory_pool());
        let run = Arc::new(tokio::sync::Mutex::new(Runner {
            subqueries: self.subqueries.clone(),
            state: Arc::clone(&self.state),
            context,
            reservation,
        }));
        let out_schema = Arc::clone(&schema);
        let stream = input.then(move |batch| {
            let run = Arc::clone(&run);
            let out_schema = Arc::clone(&out_schema);
            async move {
                let batch = batch?;
                run.lock().await.extend(batch, out_schema).await
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// The per-partition state of an executing [`ApplyExec`].
struct Runner {
    subqueries: Vec<Arc<Subquery>>,
    state: Arc<SessionState>,
    context: Arc<TaskContext>,
    reservation: MemoryReservation,
}

impl Runner {
    /// `batch` with the subqueries' columns appended.
    async fn extend(&mut self, batch: RecordBatch, schema: SchemaRef) -> DfResult<RecordBatch> {
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        for s in self.subqueries.clone() {
            columns.push(self.column(&s, &batch).await?);
        }
        Ok(RecordBatch::try_new(schema, columns)?)
    }

    async fn column(&mut self, s: &Subquery, batch: &RecordBatch) -> DfResult<ArrayRef> {
        let n = batch.num_rows();
        let outer: Vec<ArrayRef> = s
            .indices
            .iter()
            .map(|&i| {
                batch
                    .columns()
                    .get(i)
                    .cloned()
                    .ok_or_else(|| DataFusionError::Internal("Apply: outer column".into()))
            })
            .collect::<DfResult<_>>()?;
        let keys: Vec<Vec<u8>> = if outer.is_empty() {
            vec![Vec::new(); n]
        } else {
            let converter = RowConverter::new(
                outer
                    .iter()
                    .map(|a| SortField::new(a.data_type().clone()))
                    .collect(),
            )?;
            let rows = converter.convert_columns(&outer)?;
            (0..n).map(|i| rows.row(i).as_ref().to_vec()).collect()
        };
        let mut outcomes: Vec<Arc<Outcome>> = Vec::with_capacity(n);
        let mut local: HashMap<&[u8], Arc<Outcome>> = HashMap::new();
        for (row, key) in keys.iter().enumerate() {
            if let Some(o) = local.get(key.as_slice()) {
                outcomes.push(Arc::clone(o));
                continue;
            }
            let cached = s.cache.lock().get(key).cloned();
            let o = match cached {
                Some(o) => o,
                None => {
                    let values = outer
                        .iter()
                        .zip(&s.columns)
                        .map(|(a, c)| Ok((c.clone(), ScalarValue::try_from_array(a, row)?)))
                        .collect::<DfResult<HashMap<_, _>>>()?;
                    let o = Arc::new(self.run(s, &values).await?);
                    self.reservation.try_grow(o.size() + key.len())?;
                    s.cache.lock().insert(key.clone(), Arc::clone(&o));
                    o
                }
            };
            local.insert(key.as_slice(), Arc::clone(&o));
            outcomes.push(o);
        }
        match &s.kind {
            Kind::Scalar => {
                let values = outcomes.iter().map(|o| match o.as_ref() {
                    Outcome::Scalar(v) => v.clone(),
                    _ => ScalarValue::Null,
                });
                if n == 0 {
                    return Ok(datafusion::arrow::array::new_empty_array(&s.ty));
                }
                let arr = ScalarValue::iter_to_array(values)?;
                if arr.data_type() == &s.ty {
                    Ok(arr)
                } else {
                    Ok(datafusion::arrow::compute::cast(&arr, &s.ty)?)
                }
            }
            Kind::Exists { negated } => Ok(Arc::new(
                outcomes
                    .iter()
                    .map(|o| match o.as_ref() {
                        Outcome::Exists(b) => Some(*b != *negated),
                        _ => None,
                    })
                    .collect::<BooleanArray>(),
            )),
            Kind::In { probe, negated } => {
                let probes = probe.evaluate(batch)?.into_array(n)?;
                let set_type = s
                    .plan
                    .schema()
                    .fields()
                    .first()
                    .map(|f| f.data_type().clone());
                let mut out = Vec::with_capacity(n);
                for (row, o) in outcomes.iter().enumerate() {
                    let Outcome::In(set) = o.as_ref() else {
                        out.push(None);
                        continue;
                    };
                    let mut p = ScalarValue::try_from_array(&probes, row)?;
                    if let Some(t) = &set_type {
                        if &p.data_type() != t {
                            p = p.cast_to(t)?;
                        }
                    }
                    out.push(set.contains(&p).map(|b| b != *negated));
                }
                Ok(Arc::new(out.into_iter().collect::<BooleanArray>()))
            }
        }
    }

    /// Runs `s` once for one binding of its outer columns.
    async fn run(&self, s: &Subquery, values: &HashMap<Column, ScalarValue>) -> DfResult<Outcome> {
        let bound = bind_outer(&s.plan, values)?;
        let optimized = self
            .state
            .optimizer()
            .optimize(bound, self.state.as_ref(), |_, _| {})?;
        let physical = self
            .state
            .query_planner()
            .create_physical_plan(&optimized, self.state.as_ref())
            .await?;
        let mut stream = execute_stream(physical, Arc::clone(&self.context))?;
        let mut outcome = match s.kind {
            Kind::Scalar => Outcome::Scalar(ScalarValue::try_from(&s.ty)?),
            Kind::Exists { .. } => Outcome::Exists(false),
            Kind::In { .. } => Outcome::In(InSet::default()),
        };
        let mut seen = 0usize;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            if batch.num_rows() == 0 {
                continue;
            }
            match &mut outcome {
                Outcome::Exists(b) => {
                    *b = true;
                    break;
                }
                Outcome::Scalar(v) => {
                    seen += batch.num_rows();
                    if seen > 1 {
                        return Err(DataFusionError::External(Box::new(
                            SqlError::CardinalityViolation,
                        )));
                    }
                    if let Some(col) = batch.columns().first() {
                        *v = ScalarValue::try_from_array(col, 0)?;
                    }
                }
                Outcome::In(set) => {
                    if let Some(col) = batch.columns().first() {
                        for i in 0..col.len() {
                            set.insert(ScalarValue::try_from_array(col, i)?);
                        }
                    }
                }
            }
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int32Array;
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::prelude::SessionContext;

    fn context() -> DfResult<SessionContext> {
        let state = SessionStateBuilder::new()
            .with_default_features()
            .with_optimizer_rules(super::super::optimizer_rules())
            .with_query_planner(Arc::new(EddyQueryPlanner))
            .with_analyzer_rule(Arc::new(super::super::ApplyUncheckedSubqueries))
            .build();
        let ctx = SessionContext::new_with_state(state);
        let table =
            |rows: &[(i32, Option<i32>, Option<i32>)], b: &str| -> DfResult<Arc<MemTable>> {
                let schema = Arc::new(Schema::new(vec![
                    Field::new("id", DataType::Int32, false),
                    Field::new(b, DataType::Int32, true),
                    Field::new("c", DataType::Int32, true),
                ]));
                let batch = RecordBatch::try_new(
                    Arc::clone(&schema),
                    vec![
                        Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.0))),
                        Arc::new(rows.iter().map(|r| r.1).collect::<Int32Array>()),
                        Arc::new(rows.iter().map(|r| r.2).collect::<Int32Array>()),
                    ],
                )?;
                Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
            };
        ctx.register_table(
            "t1",
            table(
                &[
                    (1, Some(10), Some(1)),
                    (2, Some(20), Some(2)),
                    (3, Some(30), Some(3)),
                    (4, None, Some(4)),
                    (5, Some(50), None),
                ],
                "a",
            )?,
        )?;
        ctx.register_table(
            "t2",
            table(
                &[
                    (1, Some(10), Some(1)),
                    (2, Some(10), Some(2)),
                    (3, Some(30), Some(2)),
                    (4, None, Some(3)),
                    (5, Some(60), Some(5)),
                ],
                "b",
            )?,
        )?;
        Ok(ctx)
    }

    /// The query's rows as text, `NULL` for nulls.
    async fn must_rows(ctx: &SessionContext, sql: &str) -> Vec<String> {
        let batches = match ctx.sql(sql).await {
            Ok(df) => df.collect().await,
            Err(e) => Err(e),
        };
        let batches = match batches {
            Ok(b) => b,
            Err(e) => panic!("{sql}: {e}"),
        };
        let mut out = Vec::new();
        for b in &batches {
            for r in 0..b.num_rows() {
                let cells: Vec<String> = b
                    .columns()
                    .iter()
                    .map(|c| match ScalarValue::try_from_array(c, r) {
                        Ok(v) if v.is_null() => "NULL".to_string(),
                        Ok(v) => v.to_string(),
                        Err(e) => panic!("{e}"),
                    })
                    .collect();
                out.push(cells.join(" "));
            }
        }
        out
    }

    #[tokio::test]
    async fn non_equality_scalar_subquery() -> DfResult<()> {
        let ctx = context()?;
        let rows = must_rows(
            &ctx,
            "SELECT id, (SELECT count(*) FROM t1 AS x WHERE x.c > t1.c) FROM t1 ORDER BY id",
        )
        .await;
        assert_eq!(rows, ["1 3", "2 2", "3 1", "4 0", "5 0"]);
        Ok(())
    }

    #[tokio::test]
    async fn in_and_not_in_in_the_select_list_are_three_valued() -> DfResult<()> {
        let ctx = context()?;
        let rows = must_rows(
            &ctx,
            "SELECT id, a IN (SELECT b FROM t2 WHERE t2.c <> t1.c), \
             a NOT IN (SELECT b FROM t2 WHERE t2.c < t1.c) FROM t1 ORDER BY id",
        )
        .await;
        // PostgreSQL 15
        assert_eq!(
            rows,
            [
                "1 true true",
                "2 NULL true",
                "3 true false",
                "4 NULL NULL",
                "5 false true"
            ]
        );
        Ok(())
    }

    #[tokio::test]
    async fn exists_in_the_select_list_and_not_in_in_where() -> DfResult<()> {
        let ctx = context()?;
        let rows = must_rows(
            &ctx,
            "SELECT id, EXISTS (SELECT 1 FROM t2 WHERE t2.b > t1.a) FROM t1 \
             WHERE a NOT IN (SELECT b FROM t2 WHERE t2.c < t1.c) ORDER BY id",
        )
        .await;
        assert_eq!(rows, ["1 true", "2 true", "5 true"]);
        Ok(())
    }

    #[tokio::test]
    async fn two_level_correlation() -> DfResult<()> {
        let ctx = context()?;
        // PostgreSQL 15
        let rows = must_rows(
            &ctx,
            "SELECT id, (SELECT max(b) FROM t2 WHERE t2.b IN \
             (SELECT x.a FROM t1 AS x WHERE x.c <= t1.c)) FROM t1 ORDER BY id",
        )
        .await;
        assert_eq!(rows, ["1 10", "2 10", "3 30", "4 30", "5 NULL"]);
        let rows = must_rows(
            &ctx,
            "SELECT id FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE t2.c = t1.c AND \
             EXISTS (SELECT 1 FROM t1 AS x WHERE x.a = t2.b AND x.id <> t1.id)) ORDER BY id",
        )
        .await;
        assert_eq!(rows, ["2"]);
        Ok(())
    }

    #[tokio::test]
    async fn correlated_filters_under_aliases_and_joins() -> DfResult<()> {
        let ctx = context()?;
        // PostgreSQL 15
        let rows = must_rows(
            &ctx,
            "SELECT id FROM t1 AS o WHERE a > (SELECT avg(a) FROM t1 AS i WHERE i.c <> o.c) \
             ORDER BY id",
        )
        .await;
        assert_eq!(rows, ["3"]);
        let rows = must_rows(
            &ctx,
            "SELECT t1.id, x.id FROM t1 JOIN t1 AS x ON x.id = t1.id + 1 \
             WHERE t1.a < (SELECT max(b) FROM t2 WHERE t2.c > x.c) ORDER BY t1.id",
        )
        .await;
        assert_eq!(rows, ["1 2", "2 3", "3 4"]);
        // the derived table swaps the names: s.c is t1.a
        let rows = must_rows(
            &ctx,
            "SELECT s.id FROM (SELECT id, a AS c, c AS a FROM t1) AS s \
             WHERE EXISTS (SELECT 1 FROM t2 WHERE t2.b > s.c) ORDER BY s.id",
        )
        .await;
        assert_eq!(rows, ["1", "2", "3", "5"]);
        Ok(())
    }

    #[tokio::test]
    async fn a_scalar_subquery_of_two_columns_stays_refused() -> DfResult<()> {
        let ctx = context()?;
        for sql in [
            "SELECT id, (SELECT b, c FROM t2 WHERE t2.id = t1.id) FROM t1",
            "SELECT id, (SELECT b, c FROM t2 WHERE t2.c > t1.c LIMIT 1) FROM t1",
        ] {
            let res = match ctx.sql(sql).await {
                Ok(df) => df.collect().await.map(|_| ()),
                Err(e) => Err(e),
            };
            assert!(res.is_err(), "{sql}");
        }
        Ok(())
    }

    #[tokio::test]
    async fn more_than_one_row_is_a_cardinality_violation() -> DfResult<()> {
        let ctx = context()?;
        let df = ctx
            .sql("SELECT id, (SELECT b FROM t2 WHERE t2.c > t1.c) FROM t1")
            .await?;
        let err = match df.collect().await {
            Ok(_) => panic!("expected an error"),
            Err(e) => e,
        };
        assert_eq!(crate::error::datafusion_sqlstate(&err), "21000");
        Ok(())
    }
}
