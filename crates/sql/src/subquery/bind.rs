//! Binding one outer row into a correlated subquery, and what the
//! subquery's rows mean for the expression around it (scalar, EXISTS, IN).
//!
//! Invariant: a bound plan has no outer reference left that belongs to the
//! level being bound. Nested subqueries keep the outer references that
//! name a column of their own enclosing level (SQL resolves a name at the
//! nearest level that has it), so `t1.c` two levels down means the middle
//! `t1` when the middle query reads a `t1` too.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::{Exists, InSubquery, SetComparison};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, LogicalPlan, Subquery};

/// Outer columns of `plan` (at any depth) that name a column of `outer`,
/// the schema the subquery sits in: what one evaluation depends on.
pub fn outer_columns(plan: &LogicalPlan, outer: &datafusion::common::DFSchema) -> Vec<Column> {
    let mut found: Vec<Column> = Vec::new();
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                if let Expr::OuterReferenceColumn(_, c) = e {
                    if outer.has_column(c) && !found.contains(c) {
                        found.push(c.clone());
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    found
}

/// `plan` with every outer reference to a column in `values` replaced by
/// that value (cast to the reference's type), output names kept.
pub fn bind_outer(
    plan: &LogicalPlan,
    values: &HashMap<Column, ScalarValue>,
) -> DfResult<LogicalPlan> {
    if values.is_empty() {
        return Ok(plan.clone());
    }
    plan.clone()
        .transform_up(|node| bind_node(node, values))
        .map(|t| t.data)
}

fn bind_node(
    node: LogicalPlan,
    values: &HashMap<Column, ScalarValue>,
) -> DfResult<Transformed<LogicalPlan>> {
    // what a nested subquery of this node could mean by an outer reference
    // at this level: those names are not ours to bind
    let own: HashSet<Column> = node
        .inputs()
        .iter()
        .flat_map(|i| i.schema().columns())
        .collect();
    let nested: HashMap<Column, ScalarValue> = values
        .iter()
        .filter(|(c, _)| !own.contains(*c))
        .map(|(c, v)| (c.clone(), v.clone()))
        .collect();
    let preserver = NamePreserver::new(&node);
    node.map_expressions(|e| {
        let saved = preserver.save(&e);
        let t = e.transform_up(|e| bind_expr(e, values, &nested))?;
        Ok(if t.transformed {
            t.update_data(|e| saved.restore(e))
        } else {
            t
        })
    })
}

fn bind_expr(
    e: Expr,
    values: &HashMap<Column, ScalarValue>,
    nested: &HashMap<Column, ScalarValue>,
) -> DfResult<Transformed<Expr>> {
    Ok(match e {
        Expr::OuterReferenceColumn(field, c) => match values.get(&c) {
            Some(v) => {
                let v = if v.data_type() == *field.data_type() {
                    v.clone()
                } else {
                    v.cast_to(field.data_type())?
                };
                Transformed::yes(Expr::Literal(v, None))
            }
            None => Transformed::no(Expr::OuterReferenceColumn(field, c)),
        },
        Expr::ScalarSubquery(sq) if !nested.is_empty() => {
            Transformed::yes(Expr::ScalarSubquery(bind_subquery(sq, nested)?))
        }
        Expr::Exists(Exists { subquery, negated }) if !nested.is_empty() => {
            Transformed::yes(Expr::Exists(Exists {
                subquery: bind_subquery(subquery, nested)?,
                negated,
            }))
        }
        Expr::InSubquery(InSubquery {
            expr,
            subquery,
            negated,
        }) if !nested.is_empty() => Transformed::yes(Expr::InSubquery(InSubquery {
            expr,
            subquery: bind_subquery(subquery, nested)?,
            negated,
        })),
        Expr::SetComparison(SetComparison {
            expr,
            subquery,
            op,
            quantifier,
        }) if !nested.is_empty() => Transformed::yes(Expr::SetComparison(SetComparison {
            expr,
            subquery: bind_subquery(subquery, nested)?,
            op,
            quantifier,
        })),
        other => Transformed::no(other),
    })
}

fn bind_subquery(sq: Subquery, values: &HashMap<Column, ScalarValue>) -> DfResult<Subquery> {
    let plan = bind_outer(&sq.subquery, values)?;
    let outer_ref_columns = sq
        .outer_ref_columns
        .into_iter()
        .filter(|e| !matches!(e, Expr::OuterReferenceColumn(_, c) if values.contains_key(c)))
        .collect();
    Ok(Subquery {
        subquery: Arc::new(plan),
        outer_ref_columns,
        spans: sq.spans,
    })
}

/// The rows of an `x IN (subquery)` for one binding: the distinct non-NULL
/// values and whether a NULL was among them.
#[derive(Debug, Default)]
pub struct InSet {
    values: HashSet<ScalarValue>,
    has_null: bool,
}

impl InSet {
    pub fn insert(&mut self, v: ScalarValue) {
        if v.is_null() {
            self.has_null = true;
        } else {
            self.values.insert(normalize(v));
        }
    }

    /// `probe IN (rows)` in SQL's three-valued logic: false over no rows
    /// (whatever the probe), NULL for a NULL probe or when no row matches
    /// but one is NULL. `probe` must have the rows' type.
    pub fn contains(&self, probe: &ScalarValue) -> Option<bool> {
        if self.values.is_empty() && !self.has_null {
            return Some(false);
        }
        if probe.is_null() {
            return None;
        }
        if self.values.contains(&normalize(probe.clone())) {
            Some(true)
        } else if self.has_null {
            None
        } else {
            Some(false)
        }
    }

    /// Bytes held, for the query's memory pool.
    pub fn size(&self) -> usize {
        self.values.iter().map(ScalarValue::size).sum::<usize>() + std::mem::size_of::<Self>()
    }
}

/// SQL equality is not bit equality for floats: -0 equals 0.
fn normalize(v: ScalarValue) -> ScalarValue {
    match v {
        // -0.0 + 0.0 is +0.0 (IEEE 754); every other value is unchanged
        ScalarValue::Float64(Some(f)) => ScalarValue::Float64(Some(f + 0.0)),
        ScalarValue::Float32(Some(f)) => ScalarValue::Float32(Some(f + 0.0)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{DataType, Field};
    use datafusion::common::DFSchema;
    use datafusion::logical_expr::{col, lit, LogicalPlanBuilder};

    fn set(vals: &[Option<i32>]) -> InSet {
        let mut s = InSet::default();
        for v in vals {
            s.insert(ScalarValue::Int32(*v));
        }
        s
    }

    #[test]
    fn in_follows_three_valued_logic() {
        let null = ScalarValue::Int32(None);
        let one = ScalarValue::Int32(Some(1));
        let two = ScalarValue::Int32(Some(2));
        // x IN (empty) is false, even for NULL x
        assert_eq!(set(&[]).contains(&null), Some(false));
        assert_eq!(set(&[]).contains(&one), Some(false));
        assert_eq!(set(&[Some(1)]).contains(&one), Some(true));
        assert_eq!(set(&[Some(1)]).contains(&two), Some(false));
        assert_eq!(set(&[Some(1)]).contains(&null), None);
        assert_eq!(set(&[Some(1), None]).contains(&one), Some(true));
        assert_eq!(set(&[Some(1), None]).contains(&two), None);
        assert_eq!(set(&[None]).contains(&two), None);
    }

    #[test]
    fn negative_zero_equals_zero() {
        let mut s = InSet::default();
        s.insert(ScalarValue::Float64(Some(-0.0)));
        assert_eq!(s.contains(&ScalarValue::Float64(Some(0.0))), Some(true));
    }

    fn outer_ref(name: &str) -> Expr {
        Expr::OuterReferenceColumn(
            Arc::new(Field::new(name, DataType::Int32, true)),
            Column::new(Some("t1"), name),
        )
    }

    #[test]
    fn binding_replaces_outer_references_and_keeps_names() -> DfResult<()> {
        let inner = LogicalPlanBuilder::values(vec![vec![lit(1i32)], vec![lit(5i32)]])?
            .filter(col("column1").gt(outer_ref("c")))?
            .project(vec![col("column1"), outer_ref("c")])?
            .build()?;
        let names_before: Vec<String> = inner
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let outer = DFSchema::try_from_qualified_schema(
            "t1",
            &datafusion::arrow::datatypes::Schema::new(vec![Field::new(
                "c",
                DataType::Int32,
                true,
            )]),
        )?;
        assert_eq!(
            outer_columns(&inner, &outer),
            vec![Column::new(Some("t1"), "c")]
        );
        let values = HashMap::from([(Column::new(Some("t1"), "c"), ScalarValue::Int32(Some(3)))]);
        let bound = bind_outer(&inner, &values)?;
        assert!(!bound.contains_outer_reference());
        let names_after: Vec<String> = bound
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names_before, names_after);
        Ok(())
    }
}
