//! `INSERT ... ON CONFLICT DO UPDATE SET ... [WHERE ...]`: the assignments
//! and the condition are planned once by DataFusion, through the session's
//! analyzer, over the existing row (qualified by the table's name or the
//! INSERT's alias) and the proposed row (`excluded`); storage evaluates
//! them on each conflicting pair under the row's lock.
//!
//! Invariants:
//! * An expression means here what it means in a SELECT: the same type
//!   coercion and the same Eddy rules (checked integer and float
//!   arithmetic, numeric division scale, rounding casts), so
//!   `amount = t.amount + excluded.amount` on a numeric column adds
//!   decimals and `n = excluded.n / 0` is 22012.
//! * An assigned value reaches its column through `session::cast_column`,
//!   the conversion INSERT and UPDATE use (rounding, length and range
//!   checks), and an error keeps its SQLSTATE (the callback's error names
//!   it; storage does not map messages).
//! * The condition keeps the existing row unless it is true (NULL keeps
//!   it, as in PostgreSQL).
//! * What is not planned here is refused when the statement is prepared
//!   (0A000): subqueries, assignments to the primary key, row assignments.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::DFSchema;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{EmptyRelation, Expr as LogicalExpr, LogicalPlan, Projection};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::sql::sqlparser::ast::{
    visit_expressions, Assignment, AssignmentTarget, Expr, ExprWithAlias, ObjectNamePart,
};
use eddy_common::{ColumnType, Row, TableDef};
use eddy_storage::{ConflictUpdateError, ConflictUpdateFn};

use crate::error::{Result, SqlError};
use crate::rewrite::ident_name;

/// The qualifier of the proposed row.
const EXCLUDED: &str = "excluded";

/// Plan `DO UPDATE SET assignments [WHERE selection]` for table `def`,
/// whose existing row is named `qualifier` (its name or alias).
pub fn conflict_updater(
    state: &SessionState,
    def: &TableDef,
    qualifier: &str,
    assignments: &[Assignment],
    selection: Option<&Expr>,
    zone: crate::session_zone::SessionZone,
) -> Result<ConflictUpdateFn> {
    let mut targets = Vec::with_capacity(assignments.len());
    for a in assignments {
        let AssignmentTarget::ColumnName(n) = &a.target else {
            return Err(SqlError::FeatureNotSupported(
                "row assignments in ON CONFLICT DO UPDATE are not supported".into(),
            ));
        };
        let name = match n.0.last() {
            Some(ObjectNamePart::Identifier(id)) => ident_name(id),
            _ => return Err(SqlError::Syntax(format!("bad column {n}"))),
        };
        let idx = def
            .column_index(&name)
            .ok_or_else(|| SqlError::UndefinedColumn(name.clone()))?;
        if def.primary_key.contains(&idx) {
            return Err(SqlError::FeatureNotSupported(
                "ON CONFLICT DO UPDATE cannot change the primary key".into(),
            ));
        }
        refuse_subqueries(&a.value)?;
        targets.push((idx, a.value.clone()));
    }
    if let Some(s) = selection {
        refuse_subqueries(s)?;
    }

    let table_schema: SchemaRef = Arc::new(Schema::new(
        def.columns
            .iter()
            .map(|c| Field::new(&c.name, c.ty.to_arrow(), true))
            .collect::<Vec<_>>(),
    ));
    let both = DFSchema::try_from_qualified_schema(qualifier, &table_schema)?.join(
        &DFSchema::try_from_qualified_schema(EXCLUDED, &table_schema)?,
    )?;
    let plan_expr = |e: &Expr| -> Result<LogicalExpr> {
        Ok(state.create_logical_expr_from_sql_expr(
            ExprWithAlias {
                expr: e.clone(),
                alias: None,
            },
            &both,
        )?)
    };
    // one projection holds every expression, so one analyzer pass types
    // them all: the assignments in order, then the condition
    let mut exprs = Vec::with_capacity(targets.len() + 1);
    for (n, (_, e)) in targets.iter().enumerate() {
        exprs.push(plan_expr(e)?.alias(format!("set{n}")));
    }
    if let Some(s) = selection {
        exprs.push(plan_expr(s)?.alias("condition"));
    }
    let input = LogicalPlan::EmptyRelation(EmptyRelation {
        produce_one_row: false,
        schema: Arc::new(both.clone()),
    });
    let plan = LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(input))?);
    let analyzed = state
        .analyzer()
        .execute_and_check(plan, state.config_options(), |_, _| {})?;
    let LogicalPlan::Projection(p) = analyzed else {
        return Err(SqlError::Internal(
            "ON CONFLICT DO UPDATE did not plan as a projection".into(),
        ));
    };
    let mut physical = p
        .expr
        .into_iter()
        .map(|e| state.create_physical_expr(e, &both))
        .collect::<datafusion::error::Result<Vec<_>>>()?;
    let condition = match selection {
        Some(_) => {
            let c = physical.pop().ok_or_else(|| {
                SqlError::Internal("ON CONFLICT DO UPDATE lost its condition".into())
            })?;
            if c.data_type(both.as_arrow())? != DataType::Boolean {
                return Err(SqlError::DatatypeMismatch(
                    "argument of WHERE must be type boolean".into(),
                ));
            }
            Some(c)
        }
        None => None,
    };
    let sets: Vec<(usize, ColumnType, String, Arc<dyn PhysicalExpr>)> = targets
        .iter()
        .zip(physical)
        .filter_map(|((idx, _), e)| {
            let c = def.columns.get(*idx)?;
            Some((*idx, c.ty, c.name.clone(), e))
        })
        .collect();
    let pair = PairLayout {
        schema: Arc::new(both.as_arrow().clone()),
        types: def
            .columns
            .iter()
            .chain(def.columns.iter())
            .map(|c| c.ty)
            .collect(),
    };
    Ok(Arc::new(move |existing: &Row, excluded: &Row| {
        update_row(&pair, condition.as_ref(), &sets, existing, excluded, &zone).map_err(|e| {
            ConflictUpdateError {
                sqlstate: e.sqlstate(),
                message: e.client_message(),
            }
        })
    }))
}

/// The one-row batch of (existing, excluded) the expressions read.
struct PairLayout {
    schema: SchemaRef,
    types: Vec<ColumnType>,
}

fn update_row(
    pair: &PairLayout,
    condition: Option<&Arc<dyn PhysicalExpr>>,
    sets: &[(usize, ColumnType, String, Arc<dyn PhysicalExpr>)],
    existing: &Row,
    excluded: &Row,
    zone: &crate::session_zone::SessionZone,
) -> Result<Option<Row>> {
    let both: Row = existing.iter().chain(excluded.iter()).cloned().collect();
    let batch = eddy_storage::arrow_values::batch_from_rows(&pair.schema, &pair.types, &[both])?;
    if let Some(c) = condition {
        let v = c.evaluate(&batch)?.into_array(1)?;
        let keep = v
            .as_boolean_opt()
            .is_some_and(|b| b.is_valid(0) && b.value(0));
        if !keep {
            return Ok(None);
        }
    }
    let mut row = existing.clone();
    for (idx, ty, name, e) in sets {
        let v = e.evaluate(&batch)?.into_array(1)?;
        let v = super::cast_column(&v, *ty, name, zone)?;
        let value = eddy_storage::arrow_values::value_at(v.as_ref(), *ty, 0)?;
        let slot = row
            .get_mut(*idx)
            .ok_or_else(|| SqlError::Internal("ON CONFLICT DO UPDATE: short row".into()))?;
        *slot = value;
    }
    Ok(Some(row))
}

fn refuse_subqueries(e: &Expr) -> Result<()> {
    let found = visit_expressions(e, |e| {
        if matches!(
            e,
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
        ) {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    });
    if found.is_break() {
        return Err(SqlError::FeatureNotSupported(
            "subqueries in ON CONFLICT DO UPDATE are not supported".into(),
        ));
    }
    Ok(())
}
