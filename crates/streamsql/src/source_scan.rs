//! The leaf a view's source is planned as: the source registered as a
//! table of the planning session ([`SourceTable`]) whose scan is the marker
//! [`SourceScanExec`]. Neither is executed: the view operator feeds the
//! stages above the scan batch by batch (`plan.rs`).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::TableType;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};

use crate::window::WindowSpec;

/// The leaf the view's source is planned as. Never executed: the view
/// operator feeds the stages above it batch by batch.
#[derive(Debug)]
pub struct SourceScanExec {
    pub(crate) source: String,
    /// The window this scan assigns, and the windowed schema.
    pub(crate) window: Option<(WindowSpec, SchemaRef)>,
    pub(crate) projection: Option<Vec<usize>>,
    pub(crate) limit: Option<usize>,
    props: Arc<PlanProperties>,
}

impl DisplayAs for SourceScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "SourceScanExec: source={}", self.source)
    }
}

impl ExecutionPlan for SourceScanExec {
    fn name(&self) -> &str {
        "SourceScanExec"
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
        Err(datafusion::error::DataFusionError::NotImplemented(format!(
            "source \"{}\" is read only by materialized views",
            self.source
        )))
    }
}

/// A source as a table of the planning session.
#[derive(Debug)]
pub(crate) struct SourceTable {
    pub(crate) name: String,
    pub(crate) schema: SchemaRef,
    pub(crate) window: Option<WindowSpec>,
}

#[async_trait]
impl TableProvider for SourceTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        let schema = match projection {
            Some(p) => Arc::new(self.schema.project(p)?),
            None => Arc::clone(&self.schema),
        };
        let props = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(Arc::new(SourceScanExec {
            source: self.name.clone(),
            window: self.window.clone().map(|w| (w, Arc::clone(&self.schema))),
            projection: projection.cloned(),
            limit,
            props: Arc::new(props),
        }))
    }
}
