//! Subqueries DataFusion cannot decorrelate (or would decorrelate wrongly),
//! run by a dependent join: the `Apply` logical node and its operator.
//!
//! Invariants:
//! * A correlated scalar subquery DataFusion's analyzer would refuse (not
//!   aggregated, or in ORDER BY) becomes an Apply in the analyzer, last
//!   ([`ApplyUncheckedSubqueries`]); its plan stays reachable to parameter
//!   binding and the optimizer (`ApplyNode::carry`).
//! * DataFusion's rules (`DecorrelatePredicateSubquery`,
//!   `ScalarSubqueryToJoin`) keep every subquery they turn into a correct
//!   join. Before them, [`ProtectSubqueries`] takes out of their reach the
//!   `IN` subqueries their joins would answer wrongly (three-valued logic:
//!   correlated `NOT IN`, `IN` under NOT / IS NULL / CASE) and those with
//!   two-level correlation (a nested subquery reading this level); just
//!   before `push_down_filter`, [`ApplyCorrelatedFilters`] takes every
//!   correlated subquery left in a Filter (that rule would move it where
//!   its outer references name missing columns); after the whole
//!   optimizer, [`EddyQueryPlanner`] takes every subquery expression still
//!   left in a Projection, Filter, Aggregate or Sort.
//! * Each one taken becomes a column of an [`ApplyNode`] under the node it
//!   was in (a Projection above a Filter or Sort drops the column again, so
//!   every schema above is unchanged). [`exec::ApplyExec`] computes it: per
//!   distinct binding of the outer columns the subquery reads, it binds
//!   them as literals ([`bind::bind_outer`]), optimizes, plans and runs the
//!   subquery in the statement's session (same snapshot, same memory pool)
//!   and caches the outcome.
//! * Outcomes are PostgreSQL's: scalar — one row gives its value, none
//!   NULL, more than one 21000; EXISTS — whether a row exists; IN — three-
//!   valued ([`bind::InSet`]).
//! * Cached outcomes reserve from the query's memory pool (53200 when it is
//!   full); the operator awaits each run, so cancel and statement_timeout
//!   stop it between (and inside) runs.
//!
//! Related: `docs/design/sql.md` ("Subqueries"), `tests/slt/subqueries.slt`.

pub mod bind;
pub mod exec;
pub mod rewrite;

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{DFSchema, DFSchemaRef, Result as DfResult};
use datafusion::logical_expr::{Expr, LogicalPlan, Subquery, UserDefinedLogicalNodeCore};

pub use exec::EddyQueryPlanner;
pub use rewrite::{
    optimizer_rules, ApplyCorrelatedFilters, ApplyUncheckedSubqueries, ProtectSubqueries,
};

/// What the subquery's rows become.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ApplyKind {
    /// `(SELECT ...)`: the only row's value, NULL without rows.
    Scalar,
    /// `[NOT] EXISTS (SELECT ...)`.
    Exists { negated: bool },
    /// `probe [NOT] IN (SELECT ...)`; `probe` is over the Apply's input.
    In { probe: Box<Expr>, negated: bool },
}

/// One subquery of an [`ApplyNode`]: its plan (with outer references to
/// the node's input) and the name of the column it yields.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Applied {
    pub kind: ApplyKind,
    pub plan: Arc<LogicalPlan>,
    pub name: String,
}

impl Applied {
    fn field(&self) -> DfResult<Field> {
        let ty = match &self.kind {
            ApplyKind::Scalar => match self.plan.schema().fields().first() {
                Some(f) => f.data_type().clone(),
                None => {
                    return datafusion::common::plan_err!("a scalar subquery must return a column")
                }
            },
            ApplyKind::Exists { .. } | ApplyKind::In { .. } => DataType::Boolean,
        };
        let nullable = !matches!(self.kind, ApplyKind::Exists { .. });
        Ok(Field::new(&self.name, ty, nullable))
    }
}

/// Dependent join: every row of `input`, plus one column per subquery,
/// evaluated for that row's values of the outer columns it reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApplyNode {
    pub input: LogicalPlan,
    pub subqueries: Vec<Applied>,
    /// Whether the scalar subqueries' plans are also shown to DataFusion as
    /// expressions (`ScalarSubquery` with no outer columns listed, so its
    /// invariant checks pass): an Apply made by the analyzer needs that,
    /// for `with_param_values` (prepared statements) and the optimizer
    /// must still reach into them. Cleared before physical planning.
    pub carry: bool,
    schema: DFSchemaRef,
}

impl ApplyNode {
    pub fn try_new(input: LogicalPlan, subqueries: Vec<Applied>) -> DfResult<ApplyNode> {
        Self::try_new_carrying(input, subqueries, false)
    }

    /// An Apply whose subquery plans DataFusion's tree walks reach (see
    /// `carry`); all its subqueries must be scalar.
    pub fn try_new_carrying(
        input: LogicalPlan,
        subqueries: Vec<Applied>,
        carry: bool,
    ) -> DfResult<ApplyNode> {
        if carry && subqueries.iter().any(|s| s.kind != ApplyKind::Scalar) {
            return datafusion::common::internal_err!("Apply carries scalar subqueries only");
        }
        let fields = subqueries
            .iter()
            .map(Applied::field)
            .collect::<DfResult<Vec<_>>>()?;
        let added = DFSchema::from_unqualified_fields(fields.into(), Default::default())?;
        let schema = Arc::new(input.schema().join(&added)?);
        Ok(ApplyNode {
            input,
            subqueries,
            carry,
            schema,
        })
    }
}

impl PartialOrd for ApplyNode {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        (self == other).then_some(std::cmp::Ordering::Equal)
    }
}

impl UserDefinedLogicalNodeCore for ApplyNode {
    fn name(&self) -> &str {
        "Apply"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    /// The probes of the IN subqueries, then (when `carry`) the subquery
    /// plans. Otherwise the plans are not expressions of this node: they
    /// run per binding, optimized then.
    fn expressions(&self) -> Vec<Expr> {
        let probes = self.subqueries.iter().filter_map(|s| match &s.kind {
            ApplyKind::In { probe, .. } => Some(probe.as_ref().clone()),
            _ => None,
        });
        let carried = self.subqueries.iter().filter(|_| self.carry).map(|s| {
            Expr::ScalarSubquery(Subquery {
                subquery: Arc::clone(&s.plan),
                outer_ref_columns: vec![],
                spans: Default::default(),
            })
        });
        probes.chain(carried).collect()
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Apply:")?;
        for s in &self.subqueries {
            let what = match &s.kind {
                ApplyKind::Scalar => "scalar".to_string(),
                ApplyKind::Exists { negated } => {
                    if *negated { "NOT EXISTS" } else { "EXISTS" }.to_string()
                }
                ApplyKind::In { probe, negated } => {
                    format!("{probe} {}IN", if *negated { "NOT " } else { "" })
                }
            };
            write!(f, " {}={what}", s.name)?;
        }
        Ok(())
    }

    fn with_exprs_and_inputs(&self, exprs: Vec<Expr>, inputs: Vec<LogicalPlan>) -> DfResult<Self> {
        let Some(input) = inputs.into_iter().next() else {
            return datafusion::common::internal_err!("Apply takes one input");
        };
        let mut exprs = exprs.into_iter();
        let mut subqueries = self.subqueries.clone();
        for s in &mut subqueries {
            if let ApplyKind::In { probe, .. } = &mut s.kind {
                match exprs.next() {
                    Some(e) => **probe = e,
                    None => return datafusion::common::internal_err!("Apply: missing IN probe"),
                }
            }
        }
        if self.carry {
            for s in &mut subqueries {
                match exprs.next() {
                    Some(Expr::ScalarSubquery(sq)) => s.plan = sq.subquery,
                    _ => return datafusion::common::internal_err!("Apply: missing subquery"),
                }
            }
        }
        ApplyNode::try_new_carrying(input, subqueries, self.carry)
    }

    /// A predicate on the input's columns means the same below the Apply.
    fn prevent_predicate_push_down_columns(&self) -> std::collections::HashSet<String> {
        self.subqueries.iter().map(|s| s.name.clone()).collect()
    }
}
