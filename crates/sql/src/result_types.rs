//! Result types as PostgreSQL's: int4 literals, numeric averages and sums.
//!
//! DataFusion's SQL planner makes every integer literal an `Int64`, so
//! `SELECT 1` answers an int8 column and `int4_col + 1` is int8, where
//! PostgreSQL says int4 for a literal in int4's range, int8 beyond it and
//! numeric beyond that. And DataFusion's `avg` of integers is float8 and
//! its `sum(int8)` int8 (wrapping on overflow), where PostgreSQL's are
//! numeric. This analyzer rule, run *before* DataFusion's type coercion:
//! * turns each `Int64` literal whose value fits an int4 into an `Int32`
//!   literal; coercion then types the expressions around it as
//!   PostgreSQL's operators would (int4 + int4 is int4, checked for
//!   overflow by `checked_arith`; `int8_col = 1` compares as int8);
//! * gives `avg` of an integer argument the argument `CAST(x AS
//!   NUMERIC(38,13))`, and of a numeric one of scale below 13 the same
//!   integer digits at scale 13, so the average is numeric with 17
//!   decimal places, which a projection over the aggregate rounds to 16
//!   (`round_averages`; PostgreSQL's display scale for an average between
//!   1 and 10,000; PostgreSQL varies it with the value's magnitude, an
//!   Arrow column cannot; windows' averages alike), and
//!   `sum` of an int8 argument `CAST(x AS NUMERIC(38,0))`
//!   (exact; `sum` of int2/int4 stays int8 as in PostgreSQL); `sum` of a
//!   float argument becomes `crate::float_sum`'s, which fails on overflow
//!   as PostgreSQL's does (DataFusion's gives Infinity). Aggregate and
//!   window uses alike. The GPU offload (`eddy-gpu`) computes decimals of at
//!   most 18 digits, so it leaves these two aggregates to the CPU;
//! * types a `VALUES` column that mixes floats with numerics as a float
//!   (PostgreSQL's resolution; DataFusion makes it numeric);
//! * computes a real (float4) operand mixed with an integer or numeric one
//!   in double precision, both sides cast to float8, as PostgreSQL's
//!   cross-type operators (`float48pl`, `float48eq`, ...) do: `real_col + 1`
//!   is float8 and `real_col = 0.1` compares the real's exact value with
//!   0.1 as a double (false for a stored 0.1, as in PostgreSQL), where
//!   DataFusion would narrow the other side to real. Arithmetic,
//!   comparisons and BETWEEN alike; real with real stays real. An IN list
//!   is left to DataFusion: PostgreSQL gives the list the common type of
//!   all its items, which is real where a real meets integers and
//!   numerics, as DataFusion's is.
//!
//! Invariants:
//! * Only literals the SQL text wrote are narrowed. The rule runs once, in
//!   analysis, before any parameter is bound: a prepared statement's
//!   parameters are bound into the analysed plan (`session/prepared.rs`),
//!   and the text fallback binds an int8 parameter as `CAST(n AS BIGINT)`,
//!   so an int8 parameter stays int8.
//! * Output names do not change (names are preserved as DataFusion's type
//!   coercion preserves them), so nodes above that refer to a column by
//!   name still find it; every node's schema is recomputed on the way up.
//! * `LIMIT`/`OFFSET` keep their `Int64` literals (DataFusion reads them as
//!   such); a `VALUES` column is narrowed only when every row holds an
//!   integer literal that fits, and its schema follows.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::WindowFunctionDefinition;
use datafusion::logical_expr::{
    Cast, Expr, ExprSchemable, LogicalPlan, Operator, Projection, RecursiveQuery, Values,
};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule; it must run before DataFusion's `TypeCoercion`.
#[derive(Debug, Default)]
pub struct PgResultTypes;

impl AnalyzerRule for PgResultTypes {
    fn name(&self) -> &str {
        "eddy_pg_result_types"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        Ok(plan.transform_up_with_subqueries(narrow_node)?.data)
    }
}

/// The analyzer's rules in order: this one, DataFusion's own, then
/// Eddy's checked arithmetic (which needs coerced operand types), for a
/// session in UTC.
pub fn analyzer_rules() -> Vec<Arc<dyn AnalyzerRule + Send + Sync>> {
    analyzer_rules_in(Arc::default())
}

/// [`analyzer_rules`] for a session whose TimeZone is `zone`'s
/// (`crate::zone_rules`).
pub fn analyzer_rules_in(
    zone: Arc<crate::zone_rules::ZoneState>,
) -> Vec<Arc<dyn AnalyzerRule + Send + Sync>> {
    use datafusion::optimizer::analyzer::resolve_grouping_function::ResolveGroupingFunction;
    use datafusion::optimizer::analyzer::type_coercion::TypeCoercion;
    vec![
        // first: a lateral unnest planned before anything reads its
        // outer references (crate::lateral_unnest)
        Arc::new(crate::lateral_unnest::LateralUnnest),
        Arc::new(PgResultTypes),
        Arc::new(crate::uuid_type::UuidCoercion),
        Arc::new(ResolveGroupingFunction::new()),
        Arc::new(TypeCoercion::new()),
        // right after coercion: its implicit casts between timestamp
        // types are read on the session zone's wall clock
        Arc::new(crate::zone_rules::SessionZoneRule::new(zone)),
        Arc::new(crate::numeric_division::PgNumericDivision),
        Arc::new(crate::text_casts::PgTextCasts),
        Arc::new(crate::checked_arith::CheckedArithmetic),
        // last: it takes what the analyzer's final check would refuse
        Arc::new(crate::subquery::ApplyUncheckedSubqueries),
    ]
}

fn narrow_node(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    match plan {
        LogicalPlan::Limit(_) => Ok(Transformed::no(plan)),
        LogicalPlan::Values(v) => {
            narrow_values(v).map(|v| Transformed::yes(LogicalPlan::Values(v)))
        }
        LogicalPlan::RecursiveQuery(q) => align_recursive_terms(q),
        plan => crate::node_rewrite::rewrite_node_expressions(plan, |e, input| {
            narrow_literal(e)?
                .transform_data(|e| crate::case_literals::resolve_case_literals(e, input))?
                .transform_data(|e| numeric_aggregate(e, input))?
                .transform_data(|e| real_widening(e, input))
        })?
        .transform_data(round_averages),
    }
}

fn narrow_literal(e: Expr) -> DfResult<Transformed<Expr>> {
    match e {
        Expr::Literal(ScalarValue::Int64(Some(v)), meta) => match i32::try_from(v) {
            Ok(n) => Ok(Transformed::yes(Expr::Literal(
                ScalarValue::Int32(Some(n)),
                meta,
            ))),
            Err(_) => Ok(Transformed::no(Expr::Literal(
                ScalarValue::Int64(Some(v)),
                meta,
            ))),
        },
        e => Ok(Transformed::no(e)),
    }
}

/// A recursive query's two terms after narrowing, cast back to the types
/// of its work table. The planner typed the work table (what the recursive
/// term reads) by the static term before any narrowing: `SELECT 1 UNION
/// ALL SELECT n + 1 FROM t` has an int8 work table, so `n + 1` stays int8
/// while the static `1` became int4, and the two terms no longer agree.
/// Each term's column whose type differs from the work table's is cast to
/// it (PostgreSQL would make both int4; the values are the same).
fn align_recursive_terms(q: RecursiveQuery) -> DfResult<Transformed<LogicalPlan>> {
    let Some(work_table) = work_table_schema(&q.recursive_term, &q.name)? else {
        return Ok(Transformed::no(LogicalPlan::RecursiveQuery(q)));
    };
    let static_term = cast_to_fields(&q.static_term, &work_table)?;
    let recursive_term = cast_to_fields(&q.recursive_term, &work_table)?;
    if static_term.is_none() && recursive_term.is_none() {
        return Ok(Transformed::no(LogicalPlan::RecursiveQuery(q)));
    }
    RecursiveQuery::try_new(
        q.name,
        static_term.unwrap_or(q.static_term),
        recursive_term.unwrap_or(q.recursive_term),
        q.is_distinct,
    )
    .map(|q| Transformed::yes(LogicalPlan::RecursiveQuery(q)))
}

/// The schema of the scan of work table `name` inside `recursive_term`.
fn work_table_schema(
    recursive_term: &LogicalPlan,
    name: &str,
) -> DfResult<Option<datafusion::arrow::datatypes::SchemaRef>> {
    let mut found = None;
    recursive_term.apply(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            if scan.table_name.table() == name {
                found = Some(scan.source.schema());
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(found)
}

/// `plan` under a projection casting each column whose type differs from
/// `fields`' to it; None when every type is already equal (or the widths
/// differ, which DataFusion reports itself).
fn cast_to_fields(
    plan: &Arc<LogicalPlan>,
    fields: &datafusion::arrow::datatypes::Schema,
) -> DfResult<Option<Arc<LogicalPlan>>> {
    let schema = plan.schema();
    if schema.fields().len() != fields.fields().len()
        || schema
            .fields()
            .iter()
            .zip(fields.fields())
            .all(|(a, b)| a.data_type() == b.data_type())
    {
        return Ok(None);
    }
    let exprs = schema
        .iter()
        .zip(fields.fields())
        .map(|((qualifier, field), want)| {
            let column = Expr::Column(Column::from((qualifier, field)));
            if field.data_type() == want.data_type() {
                column
            } else {
                Expr::Cast(Cast::new(Box::new(column), want.data_type().clone()))
                    .alias_qualified(qualifier.cloned(), field.name())
            }
        })
        .collect();
    Projection::try_new(exprs, Arc::clone(plan)).map(|p| Some(Arc::new(LogicalPlan::Projection(p))))
}

/// `avg(integer)` and `sum(int8)` over a numeric argument (module doc).
fn numeric_aggregate(e: Expr, input: &DFSchema) -> DfResult<Transformed<Expr>> {
    let (name, args) = match &e {
        Expr::AggregateFunction(f) => (f.func.name(), &f.params.args),
        Expr::WindowFunction(w) => match &w.fun {
            WindowFunctionDefinition::AggregateUDF(f) => (f.name(), &w.params.args),
            WindowFunctionDefinition::WindowUDF(_) => return Ok(Transformed::no(e)),
        },
        _ => return Ok(Transformed::no(e)),
    };
    let [arg] = args.as_slice() else {
        return Ok(Transformed::no(e));
    };
    // a type this node cannot tell yet (an unresolved column) is left alone
    let Ok(ty) = arg.get_type(input) else {
        return Ok(Transformed::no(e));
    };
    if name == "sum" && matches!(ty, DataType::Float64 | DataType::Float32) {
        return Ok(Transformed::yes(checked_float_sum(e)));
    }
    let avg_scale = AVG_INPUT_SCALE;
    let target = match (name, ty) {
        (
            "avg",
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64,
        ) => DataType::Decimal128(38, avg_scale),
        // a numeric average at PostgreSQL's 16 fraction digits (rounded by
        // `round_averages`), not Arrow's input scale + 4 (truncated)
        ("avg", DataType::Decimal128(p, s)) if s < avg_scale => {
            let integer_digits = i16::from(p) - i16::from(s);
            match u8::try_from(integer_digits + i16::from(avg_scale)) {
                Ok(wide) if wide <= 38 => DataType::Decimal128(wide, avg_scale),
                _ => return Ok(Transformed::no(e)),
            }
        }
        ("sum", DataType::Int64 | DataType::UInt64) => DataType::Decimal128(38, 0),
        _ => return Ok(Transformed::no(e)),
    };
    let cast = |a: Expr| vec![Expr::Cast(Cast::new(Box::new(a), target.clone()))];
    Ok(Transformed::yes(match e {
        Expr::AggregateFunction(mut f) => {
            let a = std::mem::take(&mut f.params.args);
            f.params.args = a.into_iter().flat_map(cast).collect();
            Expr::AggregateFunction(f)
        }
        Expr::WindowFunction(mut w) => {
            let a = std::mem::take(&mut w.params.args);
            w.params.args = a.into_iter().flat_map(cast).collect();
            Expr::WindowFunction(w)
        }
        e => e,
    }))
}

/// The scale `avg`'s numeric argument is given (at least): Arrow's average
/// adds 4, one digit more than PostgreSQL's 16, which `round_averages`
/// rounds away.
const AVG_INPUT_SCALE: i8 = 13;

/// The fraction digits of a numeric average (PostgreSQL's
/// `NUMERIC_MIN_SIG_DIGITS` for an average between 1 and 10,000).
const AVG_SCALE: i8 = 16;

/// An aggregate (or window) whose numeric averages come out of Arrow one
/// digit (or more) finer than PostgreSQL prints them, under a projection that
/// casts each to PostgreSQL's scale: the cast rounds half away from zero
/// as PostgreSQL's division does (`avg(x)` of 1, 2, 2 is
/// 1.6666666666666667, where Arrow's division truncates). Other columns
/// pass through; names and qualifiers stay.
fn round_averages(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    // the aggregates' (or window functions') columns come last
    let (schema, computed) = match &plan {
        LogicalPlan::Aggregate(agg) => (Arc::clone(&agg.schema), &agg.aggr_expr),
        LogicalPlan::Window(w) => (Arc::clone(&w.schema), &w.window_expr),
        _ => return Ok(Transformed::no(plan)),
    };
    let first_aggregate = schema.fields().len().saturating_sub(computed.len());
    let mut targets = vec![None; schema.fields().len()];
    for (i, e) in computed.iter().enumerate() {
        let inner = match e {
            Expr::Alias(a) => a.expr.as_ref(),
            e => e,
        };
        let name = match inner {
            Expr::AggregateFunction(f) => f.func.name(),
            Expr::WindowFunction(w) => match &w.fun {
                WindowFunctionDefinition::AggregateUDF(f) => f.name(),
                WindowFunctionDefinition::WindowUDF(_) => continue,
            },
            _ => continue,
        };
        if name != "avg" {
            continue;
        }
        let Some(field) = schema.fields().get(first_aggregate + i) else {
            continue;
        };
        if let DataType::Decimal128(p, s) = field.data_type() {
            let scale = AVG_SCALE.max(s.saturating_sub(4));
            if *s > scale {
                if let Some(t) = targets.get_mut(first_aggregate + i) {
                    *t = Some(DataType::Decimal128(*p, scale));
                }
            }
        }
    }
    if targets.iter().all(Option::is_none) {
        return Ok(Transformed::no(plan));
    }
    let exprs = schema
        .iter()
        .zip(targets)
        .map(|((qualifier, field), target)| {
            let column = Expr::Column(Column::from((qualifier, field)));
            match target {
                Some(t) => Expr::Cast(Cast::new(Box::new(column), t))
                    .alias_qualified(qualifier.cloned(), field.name()),
                None => column,
            }
        })
        .collect();
    Projection::try_new(exprs, Arc::new(plan)).map(|p| Transformed::yes(LogicalPlan::Projection(p)))
}

/// `sum` of a float argument as `crate::float_sum`'s checked sum.
fn checked_float_sum(e: Expr) -> Expr {
    let udaf = Arc::new(crate::float_sum::float_sum_udaf());
    match e {
        Expr::AggregateFunction(mut f) => {
            f.func = udaf;
            Expr::AggregateFunction(f)
        }
        Expr::WindowFunction(mut w) => {
            w.fun = WindowFunctionDefinition::AggregateUDF(udaf);
            Expr::WindowFunction(w)
        }
        e => e,
    }
}

/// Whether `t` is a type PostgreSQL converts to float8 when it meets a
/// real: integers and numeric (a float8 operand already widens the real).
fn meets_real_as_double(t: &DataType) -> bool {
    t.is_integer() || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..))
}

/// `real op integer/numeric` in double precision (module doc). An operand
/// this node cannot type yet is left alone.
fn real_widening(e: Expr, input: &DFSchema) -> DfResult<Transformed<Expr>> {
    let types = |exprs: &[&Expr]| -> Option<Vec<DataType>> {
        exprs.iter().map(|x| x.get_type(input).ok()).collect()
    };
    let mixed =
        |ts: &[DataType]| ts.contains(&DataType::Float32) && ts.iter().any(meets_real_as_double);
    let double = |x: Expr| Expr::Cast(Cast::new(Box::new(x), DataType::Float64));
    match e {
        Expr::BinaryExpr(b)
            if matches!(
                b.op,
                Operator::Plus
                    | Operator::Minus
                    | Operator::Multiply
                    | Operator::Divide
                    | Operator::Modulo
                    | Operator::Eq
                    | Operator::NotEq
                    | Operator::Lt
                    | Operator::LtEq
                    | Operator::Gt
                    | Operator::GtEq
                    | Operator::IsDistinctFrom
                    | Operator::IsNotDistinctFrom
            ) && types(&[&b.left, &b.right]).is_some_and(|ts| mixed(&ts)) =>
        {
            Ok(Transformed::yes(Expr::BinaryExpr(
                datafusion::logical_expr::BinaryExpr::new(
                    Box::new(double(*b.left)),
                    b.op,
                    Box::new(double(*b.right)),
                ),
            )))
        }
        Expr::Between(b) if types(&[&b.expr, &b.low, &b.high]).is_some_and(|ts| mixed(&ts)) => Ok(
            Transformed::yes(Expr::Between(datafusion::logical_expr::Between::new(
                Box::new(double(*b.expr)),
                b.negated,
                Box::new(double(*b.low)),
                Box::new(double(*b.high)),
            ))),
        ),
        e => Ok(Transformed::no(e)),
    }
}

/// A `VALUES` column whose every row is an int4-sized integer literal (or
/// NULL of int8) becomes an int4 column.
fn narrow_values(v: Values) -> DfResult<Values> {
    let v = float_values(v)?;
    let Values { schema, mut values } = v;
    let width = schema.fields().len();
    let narrowable: Vec<bool> = (0..width)
        .map(|col| {
            values.iter().all(|row| match row.get(col) {
                Some(Expr::Literal(ScalarValue::Int64(Some(v)), _)) => i32::try_from(*v).is_ok(),
                Some(Expr::Literal(ScalarValue::Int64(None), _)) => true,
                _ => false,
            }) && values.iter().any(|row| {
                matches!(
                    row.get(col),
                    Some(Expr::Literal(ScalarValue::Int64(Some(_)), _))
                )
            })
        })
        .collect();
    if !narrowable.contains(&true) {
        return Ok(Values { schema, values });
    }
    for row in &mut values {
        for (e, narrow) in row.iter_mut().zip(&narrowable) {
            if !*narrow {
                continue;
            }
            if let Expr::Literal(s, meta) = e {
                let narrowed = match s {
                    ScalarValue::Int64(Some(v)) => i32::try_from(*v).ok(),
                    _ => None,
                };
                *e = Expr::Literal(ScalarValue::Int32(narrowed), meta.take());
            }
        }
    }
    let types: Vec<Option<DataType>> = narrowable
        .iter()
        .map(|n| n.then_some(DataType::Int32))
        .collect();
    Ok(Values {
        schema: retyped_schema(&schema, &types)?,
        values,
    })
}

/// `e` without a cast to `to` the planner put around it.
fn uncast<'a>(e: &'a Expr, to: &DataType) -> Option<&'a Expr> {
    match e {
        Expr::Cast(c) if c.field.data_type() == to => Some(c.expr.as_ref()),
        e => Some(e),
    }
}

/// A `VALUES` column that mixes floats with numerics is a float column,
/// as PostgreSQL resolves it (double precision is the preferred type of
/// the numeric category; real where reals meet only numerics and
/// integers). DataFusion makes it numeric, which changes the floats' values
/// and fails on one beyond numeric's range. Type coercion then casts the
/// other rows to the float type.
fn float_values(v: Values) -> DfResult<Values> {
    let Values { schema, values } = v;
    let empty = DFSchema::empty();
    let mut retyped: Vec<Option<DataType>> = Vec::with_capacity(schema.fields().len());
    for (col, f) in schema.fields().iter().enumerate() {
        if !matches!(
            f.data_type(),
            DataType::Decimal128(..) | DataType::Decimal256(..)
        ) {
            retyped.push(None);
            continue;
        }
        // (the planner may have cast each row to the column's type already)
        let types: Vec<DataType> = values
            .iter()
            .filter_map(|row| row.get(col).and_then(|e| uncast(e, f.data_type())))
            .filter_map(|e| e.get_type(&empty).ok())
            .collect();
        retyped.push(if types.contains(&DataType::Float64) {
            Some(DataType::Float64)
        } else if types.contains(&DataType::Float32) {
            Some(DataType::Float32)
        } else {
            None
        });
    }
    if retyped.iter().all(Option::is_none) {
        return Ok(Values { schema, values });
    }
    let mut values = values;
    for row in &mut values {
        for ((e, t), f) in row.iter_mut().zip(&retyped).zip(schema.fields()) {
            let Some(t) = t else { continue };
            let inner = uncast(e, f.data_type()).unwrap_or(e).clone();
            *e = match inner.get_type(&empty) {
                Ok(ty) if &ty == t => inner,
                _ => Expr::Cast(Cast::new(Box::new(inner), t.clone())),
            };
        }
    }
    Ok(Values {
        schema: retyped_schema(&schema, &retyped)?,
        values,
    })
}

/// `schema` with column `k` of type `types[k]` where that is given.
fn retyped_schema(schema: &DFSchema, types: &[Option<DataType>]) -> DfResult<Arc<DFSchema>> {
    let fields = schema
        .iter()
        .zip(types)
        .map(|((q, f), t)| {
            let f = match t {
                Some(t) => Arc::new(f.as_ref().clone().with_data_type(t.clone())),
                None => Arc::clone(f),
            };
            (q.cloned(), f)
        })
        .collect();
    Ok(Arc::new(DFSchema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    )?))
}

/// `sql`'s answer, planned by a DataFusion session with Eddy's analyzer
/// rules (the unit tests of the rules share it).
#[cfg(test)]
pub(crate) async fn answer_with_eddy_rules(
    sql: &str,
) -> Vec<datafusion::arrow::array::RecordBatch> {
    let state = datafusion::execution::SessionStateBuilder::new()
        .with_default_features()
        .with_analyzer_rules(analyzer_rules())
        .build();
    datafusion::prelude::SessionContext::new_with_state(state)
        .sql(sql)
        .await
        .expect("plans")
        .collect()
        .await
        .expect("runs")
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    /// A DataFusion session with Eddy's analyzer rules.
    fn session() -> SessionContext {
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_default_features()
            .with_analyzer_rules(analyzer_rules())
            .build();
        SessionContext::new_with_state(state)
    }

    /// The first batch of `sql`'s answer.
    async fn first_batch(sql: &str) -> datafusion::arrow::array::RecordBatch {
        let rows = answer_with_eddy_rules(sql).await;
        rows.into_iter().next().expect("a batch")
    }

    async fn types_of(sql: &str) -> Vec<DataType> {
        let ctx = session();
        let df = ctx.sql(sql).await.expect("plans");
        let plan = ctx.state().optimize(df.logical_plan()).expect("analyses");
        plan.schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect()
    }

    #[tokio::test]
    async fn literals_are_int4_when_they_fit() {
        assert_eq!(
            types_of("SELECT 1 AS a, -2147483648 AS b, 2147483648 AS c, 1 + 1 AS d, CAST(1 AS BIGINT) AS e").await,
            [
                DataType::Int32,
                DataType::Int32,
                DataType::Int64,
                DataType::Int32,
                DataType::Int64
            ]
        );
    }

    #[tokio::test]
    async fn integer_averages_and_bigint_sums_are_numeric() {
        assert_eq!(
            types_of(
                "SELECT avg(x) AS a, sum(x) AS s, sum(x + 3000000000) AS b, \
                 avg(x * 1.5) AS f \
                 FROM (VALUES (1), (2)) AS v(x)"
            )
            .await,
            [
                DataType::Decimal128(38, 16),
                DataType::Int64,
                DataType::Decimal128(38, 0),
                DataType::Float64,
            ]
        );
        assert_eq!(
            types_of("SELECT avg(x) OVER () AS w FROM (VALUES (1), (2)) AS v(x)").await,
            [DataType::Decimal128(38, 16)]
        );
    }

    #[tokio::test]
    async fn values_columns_follow_their_rows() {
        assert_eq!(
            types_of("SELECT * FROM (VALUES (1, 1), (2, 3000000000)) AS v(a, b)").await,
            [DataType::Int32, DataType::Int64]
        );
        // a float among numerics makes the column a float (PostgreSQL's
        // preferred type), where DataFusion would make it numeric
        assert_eq!(
            types_of("SELECT * FROM (VALUES (CAST(1.5 AS DOUBLE), CAST(1.5 AS DECIMAL(3, 2))), (CAST(2.25 AS DECIMAL(3, 2)), CAST(1 AS REAL))) AS v(a, b)").await,
            [DataType::Float64, DataType::Float32]
        );
        let batch = first_batch(
            "SELECT * FROM (VALUES (CAST(1e307 AS DOUBLE)), (CAST(2 AS DECIMAL(3, 0)))) AS v(a)",
        )
        .await;
        assert_eq!(batch.num_rows(), 2);
    }

    #[tokio::test]
    async fn names_and_limits_survive() {
        let batch = first_batch("SELECT x + 1, count(*) FROM (VALUES (1), (2), (2)) AS v(x) GROUP BY x + 1 ORDER BY 1 LIMIT 1").await;
        assert_eq!(batch.num_rows(), 1);
        assert_eq!(batch.schema().field(0).data_type(), &DataType::Int32);
    }

    #[tokio::test]
    async fn recursive_terms_agree_after_narrowing() {
        let batch = first_batch("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 5) SELECT max(n), count(*) FROM t").await;
        let max = datafusion::arrow::array::AsArray::as_primitive::<
            datafusion::arrow::datatypes::Int64Type,
        >(batch.column(0));
        assert_eq!(max.value(0), 5);
    }
}
