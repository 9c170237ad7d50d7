//! Prepared queries planned once, with placeholders, and bound at Execute.
//!
//! At Parse a query is planned by DataFusion with its `$n` left as
//! placeholders, each placeholder typed by the parameter's type (the
//! client's declared type, else the one inferred from the column it meets,
//! else text), and analysed (type coercion, `result_types`,
//! `checked_arith`). The analysed plan is kept in the [`Prepared`]
//! statement. Each Execute converts the parameters to exactly those types,
//! binds them with `LogicalPlan::with_param_values`, puts fresh table
//! providers in place of the ones planned (so each execution reads its own
//! snapshot) and only then optimizes and plans physically: the optimizer
//! sees literals, so scan filters, pruning and join order work as for a
//! query sent as text.
//!
//! Invariants:
//! * A bound plan has no placeholder and every literal has the type its
//!   placeholder had, so the analysed plan's coercions stay right.
//! * A table whose definition changed since Parse (another schema under
//!   the name) is never read through the old plan: the statement is
//!   planned again from its text with the parameters substituted.
//! * The fixed-plan path (`fastpath`) is tried first, as before: point
//!   lookups and single-row writes never reach this module.
//!
//! What still takes the text path (parameters substituted into the AST and
//! the statement planned at every Execute, `rewrite::substitute_params`):
//! * statements other than queries: INSERT, UPDATE, DELETE, COPY, DDL,
//!   EXPLAIN, and `SELECT ... FOR UPDATE/SHARE` (`locking.rs`);
//! * queries DataFusion cannot plan with placeholders: a parameter among a
//!   table function's arguments (`generate_series(1, $1)`: the function is
//!   called while planning and needs values), and queries whose analysis
//!   fails with typed placeholders;
//! * queries calling `current_setting` (the value is bound on the AST when
//!   the statement is planned, and settings may change between executions);
//! * an execution whose NUMERIC parameter does not fit its placeholder's
//!   type exactly (more decimal places than the column it meets has), or
//!   any value that does not convert to its placeholder's type: the text
//!   path gives PostgreSQL's answer (or its error) for those.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{ScalarValue, TableReference};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::logical_expr::expr::Placeholder;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    visit_expressions, FunctionArg, FunctionArgExpr, SetExpr, Statement, TableFactor,
};
use eddy_common::{ColumnType, Value};

use super::{Output, ResultColumn, Session};
use crate::error::{Result, SqlError};
use crate::pgtypes::{self, oid, pg_oid};
use crate::rewrite;

/// A query planned at Parse: its analysed plan and each parameter's type.
#[derive(Debug)]
pub struct PlannedQuery {
    plan: LogicalPlan,
    types: Vec<DataType>,
    /// The TimeZone the plan's conversions were analysed with
    /// (`crate::zone_rules`).
    zone: crate::session_zone::SessionZone,
}

/// A planned query with one Execute's parameters bound.
pub(super) struct BoundQuery {
    pub(super) plan: LogicalPlan,
    /// The parameters, for the text path if the plan has gone stale.
    pub(super) params: Vec<Value>,
    pub(super) param_types: Vec<u32>,
}

/// What Parse learned about a query.
pub(super) struct Described {
    pub(super) columns: Vec<ResultColumn>,
    pub(super) planned: Option<Arc<PlannedQuery>>,
}

impl Session {
    /// Parse of a query (or EXPLAIN): fills in the parameter types it can
    /// infer (`param_types` slots still 0), describes its result columns and,
    /// where it can, keeps its analysed plan (module doc).
    pub(super) async fn describe_query(
        &self,
        stmt: &Statement,
        param_types: &mut [u32],
    ) -> Result<Described> {
        let mut s = stmt.clone();
        self.compat(&mut s)?;
        let state = self.planning_state();
        let plan = match state
            .statement_to_plan(DFStatement::Statement(Box::new(s.clone())))
            .await
        {
            Ok(plan) => plan,
            Err(e) if !param_types.is_empty() => {
                let e = self.planning_error(&s, e);
                return self.describe_with_nulls(stmt, param_types, e).await;
            }
            Err(e) => return Err(self.planning_error(&s, e)),
        };
        let mut inferred = plan.get_parameter_types().unwrap_or_default();
        for (name, ty) in crate::array_type::array_placeholder_types(&plan) {
            let slot = inferred.entry(name).or_insert(None);
            if slot.is_none() {
                *slot = Some(ty);
            }
        }
        for (name, ty) in &inferred {
            let idx = name.trim_start_matches('$').parse::<usize>().unwrap_or(0);
            if let (Some(slot), Some(ty)) = (param_types.get_mut(idx.wrapping_sub(1)), ty) {
                if *slot == 0 {
                    *slot = pg_oid(ty);
                }
            }
        }
        if matches!(stmt, Statement::Explain { .. }) {
            return Ok(Described {
                columns: ResultColumn::of_schema(plan.schema().as_arrow()),
                planned: None,
            });
        }
        let types: Vec<DataType> = param_types
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let inferred = inferred.get(&format!("${}", i + 1)).cloned().flatten();
                placeholder_type(*o, inferred)
            })
            .collect();
        let unanalysed_columns = ResultColumn::of_schema(plan.schema().as_arrow());
        let analysed = set_placeholder_types(plan, &types).and_then(|p| {
            Ok(state
                .analyzer()
                .execute_and_check(p, state.config_options(), |_, _| {})?)
        });
        let Ok(analysed) = analysed else {
            // the text path will plan it (and report its error) at Execute
            return Ok(Described {
                columns: unanalysed_columns,
                planned: None,
            });
        };
        let columns = ResultColumn::of_schema(analysed.schema().as_arrow());
        let plannable = match stmt {
            // a view may be replaced or dropped after Parse, and a kept plan
            // would go on reading its old query: the text path expands it
            // at every Execute
            Statement::Query(q) => {
                q.locks.is_empty() && !calls_current_setting(stmt) && !self.reads_views(stmt)
            }
            _ => false,
        };
        Ok(Described {
            columns,
            planned: plannable.then(|| {
                Arc::new(PlannedQuery {
                    plan: analysed,
                    types,
                    zone: self.time_zone(),
                })
            }),
        })
    }

    /// A query DataFusion cannot plan with placeholders (a table function
    /// called with one): described with the parameters NULL, run by the
    /// text path. A parameter among a table function's arguments is int8
    /// unless declared. `original` is the error if even that fails.
    async fn describe_with_nulls(
        &self,
        stmt: &Statement,
        param_types: &mut [u32],
        original: SqlError,
    ) -> Result<Described> {
        for i in table_function_params(stmt) {
            if let Some(slot) = param_types.get_mut(i.wrapping_sub(1)) {
                if *slot == 0 {
                    *slot = oid::INT8;
                }
            }
        }
        let mut s = stmt.clone();
        rewrite::substitute_params(&mut s, &vec![Value::Null; param_types.len()])?;
        self.compat(&mut s)?;
        let state = self.planning_state();
        let Ok(plan) = state
            .statement_to_plan(DFStatement::Statement(Box::new(s)))
            .await
        else {
            return Err(original);
        };
        let schema = match state.analyzer().execute_and_check(
            plan.clone(),
            state.config_options(),
            |_, _| {},
        ) {
            Ok(analysed) => analysed.schema().as_arrow().clone(),
            Err(_) => plan.schema().as_arrow().clone(),
        };
        Ok(Described {
            columns: ResultColumn::of_schema(&schema),
            planned: None,
        })
    }

    /// Runs a bound plan: fresh providers, then optimizer and physical
    /// planner (never the analyzer again: it would retype the bound
    /// literals). `None`: a table changed under the plan; plan again.
    pub(super) async fn run_bound(&self, plan: LogicalPlan) -> Result<Option<Output>> {
        let Some(plan) = self.refresh_scans(plan).await? else {
            return Ok(None);
        };
        let state = self.planning_state();
        let optimized = state.optimizer().optimize(plan, &state, |_, _| {})?;
        let physical = state
            .query_planner()
            .create_physical_plan(&optimized, &state)
            .await?;
        let schema = physical.schema();
        let stream = self.execute_plan(physical)?;
        Ok(Some(Output::Rows {
            schema,
            stream,
            command: "SELECT",
        }))
    }

    /// The text path for a bound query whose plan went stale.
    pub(super) async fn run_replanned(
        &mut self,
        stmt: &Statement,
        bound: &BoundQuery,
    ) -> Result<Output> {
        let mut s = stmt.clone();
        rewrite::bind_numeric_params(&mut s, &bound.params, &bound.param_types);
        rewrite::substitute_typed_params(&mut s, &bound.params, &bound.param_types)?;
        self.compat(&mut s)?;
        self.run_query(s).await
    }

    /// Every table scan gets the provider its name resolves to now (a new
    /// snapshot of the table; pg_catalog synthesised anew). `None` when a
    /// name now stands for another schema.
    async fn refresh_scans(&self, plan: LogicalPlan) -> Result<Option<LogicalPlan>> {
        let mut names: Vec<TableReference> = Vec::new();
        plan.apply_with_subqueries(|p| {
            if let LogicalPlan::TableScan(s) = p {
                if !names.contains(&s.table_name) {
                    names.push(s.table_name.clone());
                }
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        let mut fresh: HashMap<TableReference, Arc<dyn TableProvider>> = HashMap::new();
        for name in names {
            if let Ok(p) = self.ctx.table_provider(name.clone()).await {
                fresh.insert(name, p);
            }
        }
        let mut stale = false;
        let plan = plan
            .transform_up_with_subqueries(|p| match p {
                LogicalPlan::TableScan(mut scan) => {
                    let Some(new) = fresh.get(&scan.table_name) else {
                        // not in the catalog: a table function's result,
                        // made from the statement's own values
                        let eddy = source_as_provider(&scan.source).ok().is_some_and(|p| {
                            let any: &dyn std::any::Any = p.as_ref();
                            any.is::<crate::provider::EddyTable>()
                        });
                        stale |= eddy;
                        return Ok(Transformed::no(LogicalPlan::TableScan(scan)));
                    };
                    if new.schema() != scan.source.schema() {
                        stale = true;
                        return Ok(Transformed::no(LogicalPlan::TableScan(scan)));
                    }
                    scan.source = provider_as_source(Arc::clone(new));
                    Ok(Transformed::yes(LogicalPlan::TableScan(scan)))
                }
                p => Ok(Transformed::no(p)),
            })?
            .data;
        Ok((!stale).then_some(plan))
    }
}

impl PlannedQuery {
    /// The plan with `params` bound; `None` when a value does not convert
    /// exactly to its placeholder's type, or the session's TimeZone is no
    /// longer the one the plan was analysed with (the text path runs it
    /// then).
    pub(super) fn bind(
        &self,
        params: &[Value],
        zone: &crate::session_zone::SessionZone,
    ) -> Result<Option<LogicalPlan>> {
        if *zone != self.zone {
            return Ok(None);
        }
        let mut scalars = Vec::with_capacity(params.len());
        for (v, ty) in params.iter().zip(&self.types) {
            match param_scalar(v, ty, zone) {
                Some(s) => scalars.push(s),
                None => return Ok(None),
            }
        }
        Ok(Some(self.plan.clone().with_param_values(scalars)?))
    }
}

/// The Arrow type a placeholder is planned with: DataFusion's inference
/// when it agrees with the parameter's OID (it keeps a decimal's precision
/// and scale), else the OID's type; text for unknown types.
fn placeholder_type(param_oid: u32, inferred: Option<DataType>) -> DataType {
    if let Some(t) = inferred.filter(|t| pg_oid(t) == param_oid && *t != DataType::Null) {
        return t;
    }
    match pgtypes::column_type_for_oid(param_oid) {
        Some(ColumnType::TimestampTz) => ColumnType::TimestampTz.to_arrow(),
        Some(t) => t.to_arrow(),
        None => DataType::Utf8,
    }
}

/// Gives every `$n` in the plan the type `types[n - 1]`.
fn set_placeholder_types(plan: LogicalPlan, types: &[DataType]) -> Result<LogicalPlan> {
    let plan = plan
        .transform_up_with_subqueries(|p| {
            let p = p
                .map_expressions(|e| {
                    e.transform_up(|e| match e {
                        Expr::Placeholder(Placeholder { id, field }) => {
                            let idx = id.trim_start_matches('$').parse::<usize>().unwrap_or(0);
                            match types.get(idx.wrapping_sub(1)) {
                                Some(t) => {
                                    let f = Arc::new(Field::new(id.as_str(), t.clone(), true));
                                    Ok(Transformed::yes(Expr::Placeholder(Placeholder {
                                        id,
                                        field: Some(f),
                                    })))
                                }
                                None => Ok(Transformed::no(Expr::Placeholder(Placeholder {
                                    id,
                                    field,
                                }))),
                            }
                        }
                        e => Ok(Transformed::no(e)),
                    })
                })?
                .data;
            p.recompute_schema().map(Transformed::yes)
        })?
        .data;
    Ok(plan)
}

/// `v` as a literal of exactly `ty`; `None` when it is not one exactly.
fn param_scalar(
    v: &Value,
    ty: &DataType,
    zone: &crate::session_zone::SessionZone,
) -> Option<ScalarValue> {
    let scalar = match (v, ty) {
        (Value::Null, t) => return ScalarValue::try_from(t).ok(),
        // text without an offset is a wall-clock time in the session's zone
        (Value::Text(t), DataType::Timestamp(_, Some(_))) if !zone.is_utc() => {
            let v = pgtypes::parse_text_in(t, ColumnType::TimestampTz, zone).ok()?;
            pgtypes::value_to_scalar(&v, ColumnType::TimestampTz)
        }
        // NUMERIC parameters arrive as their exact text
        (Value::Text(t), DataType::Decimal128(p, s)) => {
            let digits = t.trim();
            let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
            let plain = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
            let int = int.strip_prefix(['-', '+']).unwrap_or(int);
            if !plain(int) || !plain(frac) || int.is_empty() && frac.is_empty() {
                return None;
            }
            let scale = usize::try_from(*s).ok()?;
            if frac.len() > scale {
                return None;
            }
            let x = pgtypes::parse_decimal(digits, *p, *s)?;
            return Some(ScalarValue::Decimal128(Some(x), *p, *s));
        }
        (Value::Text(t), DataType::FixedSizeBinary(16)) => {
            let u = pgtypes::uuid_from_text(t).ok()?;
            return Some(pgtypes::value_to_scalar(&Value::Uuid(u), ColumnType::Uuid));
        }
        // array parameters arrive as their text form (`parse_param`)
        (Value::Text(t), DataType::List(_)) => {
            let ty @ ColumnType::Array(_) = ColumnType::from_arrow(ty)? else {
                return None;
            };
            let v = pgtypes::parse_text(t, ty).ok()?;
            return Some(pgtypes::value_to_scalar(&v, ty));
        }
        (Value::Text(t), _) => ScalarValue::Utf8(Some(t.clone())),
        (Value::Timestamp(_), DataType::Timestamp(_, Some(_))) => {
            pgtypes::value_to_scalar(v, ColumnType::TimestampTz)
        }
        (v, _) => pgtypes::value_to_scalar(v, ColumnType::Text),
    };
    if scalar.data_type() == *ty {
        return Some(scalar);
    }
    scalar.cast_to(ty).ok().filter(|s| !s.is_null())
}

/// Whether the statement calls `current_setting` (bound on the AST when
/// planned: `Session::compat`).
fn calls_current_setting(stmt: &Statement) -> bool {
    visit_expressions(stmt, |e| match e {
        datafusion::sql::sqlparser::ast::Expr::Function(f)
            if f.name.to_string().eq_ignore_ascii_case("current_setting") =>
        {
            std::ops::ControlFlow::Break(())
        }
        _ => std::ops::ControlFlow::Continue(()),
    })
    .is_break()
}

/// The `$n` written directly as arguments of a table function in a FROM
/// clause of the statement's top-level SELECT (`generate_series(1, $1)`).
fn table_function_params(stmt: &Statement) -> Vec<usize> {
    let mut out = Vec::new();
    let Statement::Query(q) = stmt else {
        return out;
    };
    let SetExpr::Select(select) = q.body.as_ref() else {
        return out;
    };
    let factors = select
        .from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)));
    for factor in factors {
        let TableFactor::Table {
            args: Some(args), ..
        } = factor
        else {
            continue;
        };
        for arg in &args.args {
            if let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg {
                if let Some(n) = rewrite::placeholder_index(e) {
                    out.push(n);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc() -> crate::session_zone::SessionZone {
        crate::session_zone::SessionZone::utc()
    }

    #[test]
    fn numeric_parameters_bind_only_exactly() {
        let t = DataType::Decimal128(15, 2);
        assert_eq!(
            param_scalar(&Value::Text("0.05".into()), &t, &utc()),
            Some(ScalarValue::Decimal128(Some(5), 15, 2))
        );
        assert_eq!(
            param_scalar(&Value::Text("-12".into()), &t, &utc()),
            Some(ScalarValue::Decimal128(Some(-1200), 15, 2))
        );
        assert_eq!(param_scalar(&Value::Text("0.055".into()), &t, &utc()), None);
        assert_eq!(param_scalar(&Value::Text("NaN".into()), &t, &utc()), None);
        assert_eq!(param_scalar(&Value::Text("1e3".into()), &t, &utc()), None);
    }

    #[test]
    fn parameters_take_their_placeholder_type() {
        assert_eq!(
            param_scalar(&Value::Int(7), &DataType::Int64, &utc()),
            Some(ScalarValue::Int64(Some(7)))
        );
        assert_eq!(
            param_scalar(&Value::BigInt(1 << 40), &DataType::Int32, &utc()),
            None,
            "out of range: the text path answers 22003"
        );
        assert_eq!(
            param_scalar(&Value::Null, &DataType::Int32, &utc()),
            Some(ScalarValue::Int32(None))
        );
        assert_eq!(
            param_scalar(&Value::Text("x".into()), &DataType::Utf8, &utc()),
            Some(ScalarValue::Utf8(Some("x".into())))
        );
    }
}
