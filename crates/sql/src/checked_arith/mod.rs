//! Arithmetic that fails where PostgreSQL's fails, instead of answering a
//! wrong number.
//!
//! DataFusion evaluates `+`, `-` and `*` on integers with wrapping kernels:
//! `9223372036854775807 + 1` is a negative number and `2147483647::int +
//! 1::int` is -2147483648, a wrong answer returned without an error (and
//! stored, by `UPDATE ... SET n = n * 2`). PostgreSQL answers 22003
//! ("integer out of range"). Floats follow IEEE 754 in DataFusion: `1e308 *
//! 10` is Infinity, `1e-308 * 1e-308` is 0, `1 / 0.0` is Infinity, `'1e300'::
//! real` is Infinity; PostgreSQL answers 22003 (overflow, underflow, out of
//! range for the type) and 22012 (division by zero), and has no `%` on
//! floats (42883).
//!
//! This analyzer rule, run after DataFusion's type coercion, replaces:
//! * `+ - *` whose operands are both int2, int4 or int8 with a checked
//!   function of the same type (`integer`: `eddy_int_add/sub/mul`);
//! * `+ - * /` whose operands are both real or both double precision with
//!   PostgreSQL's float operators (`float`: `eddy_float_add/sub/mul/div`),
//!   and refuses `%` on them (42883);
//! * a cast of double precision to real (`eddy_float8_to_float4`) and of
//!   text to real or double precision (`eddy_text_to_float4/8`), which
//!   check the range as `float4in`/`float8in` and PostgreSQL's casts do;
//! * a cast of real, double precision or numeric to smallint, integer or
//!   bigint (`to_integer`: `eddy_to_int2/4/8`), which rounds as PostgreSQL
//!   does (floats ties to even, numerics ties away from zero) where Arrow
//!   truncates, and checks the range (22003);
//! * `-` of two timestamps, whose result is an interval of days and time
//!   as PostgreSQL's (`timestamp_diff`: `eddy_timestamp_diff`) where
//!   DataFusion's is an Arrow duration;
//! * comparisons of two intervals and ORDER BY an interval, by length as
//!   PostgreSQL orders intervals (`interval_order`: `eddy_interval_key`);
//! * a date plus or minus an interval, computed as a timestamp at the
//!   date's midnight, as PostgreSQL's `date + interval` is (DataFusion's
//!   answer was a date: the hours were lost);
//! * `round` of one real or double precision argument, whose ties go to
//!   the even neighbour as C's `rint` (`rounding`: `eddy_float_round`);
//! * `extract(epoch from x)` / `date_part('epoch', x)`, exactly and with
//!   PostgreSQL's 365.25-day years of an interval (`epoch`:
//!   `eddy_epoch`).
//!
//! Invariants: result types (except those of a timestamp difference, a
//! date shifted by an interval and an epoch, a numeric as PostgreSQL's
//! EXTRACT gives, the point of those rewrites; every node
//! recomputes its schema) and output names do not change (names are preserved the
//! way DataFusion's own type coercion preserves them), so nothing above
//! the rewritten expression notices; only operands of one
//! type are rewritten (coercion has made them so); everything else is left
//! to DataFusion. Infinity and NaN operands still give Infinity and NaN
//! (`'inf'::float8 * 2`), as in PostgreSQL: only a non-finite result of
//! finite operands is an error.

mod epoch;
pub(crate) use epoch::epoch_array;
mod float;
mod integer;
mod interval_order;
mod math;
mod rounding;
mod timestamp_diff;
mod to_integer;

pub use math::math_functions;
pub use to_integer::to_integers;

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, DataFusionError};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::{Cast, ScalarFunction};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator, ScalarUDF};
use datafusion::optimizer::AnalyzerRule;

use crate::error::SqlError;

/// The analyzer rule; add it to a session after the built-in rules.
#[derive(Debug, Default)]
pub struct CheckedArithmetic;

impl AnalyzerRule for CheckedArithmetic {
    fn name(&self) -> &str {
        "eddy_checked_arithmetic"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        Ok(plan.transform_up_with_subqueries(rewrite_node)?.data)
    }
}

fn rewrite_node(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let schema = merge_schema(&plan.inputs());
    let names = NamePreserver::new(&plan);
    let rewritten = plan.map_expressions(|expr| {
        let original = names.save(&expr);
        // Types are computed bottom-up, once per node: the post-order walk
        // leaves each child's type on `types`, so a chain of n operators
        // costs O(n), not the O(n^2) of asking every node for its type
        // (`get_type` recurses through the whole subtree).
        let mut types: Vec<Option<DataType>> = Vec::new();
        expr.transform_up(|e| rewrite_expr(e, &schema, &mut types))
            .map(|t| t.update_data(|e| original.restore(e)))
    })?;
    // ORDER BY an interval sorts by its length
    let rewritten = rewritten.transform_data(|p| match p {
        LogicalPlan::Sort(mut sort) => {
            let input_schema = sort.input.schema().clone();
            let mut changed = false;
            for s in sort.expr.iter_mut() {
                if s.expr
                    .get_type(&input_schema)
                    .is_ok_and(|t| interval_order::is_interval(&t))
                {
                    s.expr = interval_order::key(s.expr.clone());
                    changed = true;
                }
            }
            Ok(if changed {
                Transformed::yes(LogicalPlan::Sort(sort))
            } else {
                Transformed::no(LogicalPlan::Sort(sort))
            })
        }
        other => Ok(Transformed::no(other)),
    })?;
    // a timestamp difference and a date shifted by an interval change
    // their expression's type, so every node recomputes its schema
    // (bottom-up, as visited), as DataFusion's type coercion does
    rewritten.map_data(|p| p.recompute_schema())
}

/// A binary expression whose operands are of two types, one of them a
/// numeric, with both cast to the types DataFusion's coercion picks for
/// them (and the new types); anything else unchanged.
fn recoerce_numeric_operands(
    e: Expr,
    child_types: Vec<Option<DataType>>,
) -> DfResult<(Expr, Vec<Option<DataType>>)> {
    let (l, r) = match child_types.as_slice() {
        [Some(l), Some(r)]
            if l != r
                && (matches!(l, DataType::Decimal128(..))
                    || matches!(r, DataType::Decimal128(..))) =>
        {
            (l.clone(), r.clone())
        }
        _ => return Ok((e, child_types)),
    };
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
        return Ok((e, child_types));
    };
    let Ok((lt, rt)) =
        datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer::new(&l, &op, &r)
            .get_input_types()
    else {
        return Ok((
            Expr::BinaryExpr(BinaryExpr { left, op, right }),
            child_types,
        ));
    };
    let cast = |x: Box<Expr>, from: &DataType, to: &DataType| {
        if from == to {
            x
        } else {
            Box::new(Expr::Cast(Cast::new(x, to.clone())))
        }
    };
    let e = Expr::BinaryExpr(BinaryExpr::new(
        cast(left, &l, &lt),
        op,
        cast(right, &r, &rt),
    ));
    Ok((e, vec![Some(lt), Some(rt)]))
}

fn rewrite_expr(
    e: Expr,
    schema: &DFSchema,
    types: &mut Vec<Option<DataType>>,
) -> DfResult<Transformed<Expr>> {
    let mut children = 0usize;
    e.apply_children(|_| {
        children += 1;
        Ok(TreeNodeRecursion::Continue)
    })?;
    let child_types = types.split_off(types.len().saturating_sub(children));
    // an operand this rule made numeric (EXTRACT's fraction or epoch) now
    // differs from the other one, which DataFusion coerced to the old
    // type: coerce the pair again, as DataFusion would have
    let (e, child_types) = recoerce_numeric_operands(e, child_types)?;
    let operands = match child_types.as_slice() {
        [Some(l), Some(r)] if l == r => Some(l.clone()),
        _ => None,
    };
    // a comparison of two intervals compares their lengths
    if let (Expr::BinaryExpr(BinaryExpr { op, .. }), Some(t)) = (&e, &operands) {
        if is_comparison(*op) && interval_order::is_interval(t) {
            let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
                return Ok(Transformed::no(e));
            };
            types.push(Some(DataType::Boolean));
            return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(interval_order::key(*left)),
                op,
                Box::new(interval_order::key(*right)),
            ))));
        }
    }
    // a date shifted by an interval is a timestamp, as in PostgreSQL
    // (`date + interval '1 hour'` kept the date and lost the hour)
    if let (
        Expr::BinaryExpr(BinaryExpr {
            op,
            left: le,
            right: re,
        }),
        [Some(l), Some(r)],
    ) = (&e, child_types.as_slice())
    {
        let date_first =
            l == &DataType::Date32 && interval_order::is_interval(r) && !integer_days(re);
        let date_second = interval_order::is_interval(l)
            && r == &DataType::Date32
            && *op == Operator::Plus
            && !integer_days(le);
        if matches!(op, Operator::Plus | Operator::Minus) && (date_first || date_second) {
            let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
                return Ok(Transformed::no(e));
            };
            let at_midnight = |d: Box<Expr>| {
                Box::new(Expr::Cast(Cast::new(
                    d,
                    DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Microsecond, None),
                )))
            };
            let (left, right) = if date_first {
                (at_midnight(left), right)
            } else {
                (left, at_midnight(right))
            };
            types.push(Some(DataType::Timestamp(
                datafusion::arrow::datatypes::TimeUnit::Microsecond,
                None,
            )));
            return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                left, op, right,
            ))));
        }
    }
    if let Expr::ScalarFunction(f) = &e {
        if let Some(exact) = epoch::exact_epoch(f, schema) {
            types.push(exact.get_type(schema).ok());
            return Ok(Transformed::yes(exact));
        }
        if let Some(with_fraction) = rounding::fractional_date_part(f) {
            types.push(with_fraction.get_type(schema).ok());
            return Ok(Transformed::yes(with_fraction));
        }
    }
    // ceil, floor and trunc of a numeric have PostgreSQL's scale (none, or
    // trunc's second argument); DataFusion kept the argument's
    if let (Expr::ScalarFunction(f), Some(Some(arg))) = (&e, child_types.first()) {
        if let Some((to, wide)) = rounding::numeric_result_type(f, arg) {
            let Expr::ScalarFunction(ScalarFunction { func, mut args }) = e else {
                return Ok(Transformed::no(e));
            };
            if let Some(x) = args.first_mut() {
                let inner = std::mem::replace(
                    x,
                    Expr::Literal(datafusion::common::ScalarValue::Null, None),
                );
                *x = Expr::Cast(Cast::new(Box::new(inner), wide));
            }
            types.push(Some(to.clone()));
            return Ok(Transformed::yes(Expr::Cast(Cast::new(
                Box::new(Expr::ScalarFunction(ScalarFunction { func, args })),
                to,
            ))));
        }
    }
    let replacement = match (&e, &operands, child_types.as_slice()) {
        (Expr::BinaryExpr(BinaryExpr { op, .. }), Some(t), _) => binary_udf(*op, t)?,
        (Expr::Cast(Cast { field, .. }), _, [Some(from)]) => {
            float::cast_udf(from, field.data_type())
                .or_else(|| to_integer::cast_udf(from, field.data_type()))
        }
        (Expr::ScalarFunction(f), _, [Some(arg)]) if f.func.name() == "round" => {
            rounding::round_udf(arg)
        }
        _ => None,
    };
    match (e, replacement) {
        (Expr::BinaryExpr(BinaryExpr { left, right, .. }), Some(udf)) => {
            // the result has the operands' type, except a timestamp
            // difference, which is an interval
            types.push(match operands {
                Some(DataType::Timestamp(..)) => Some(timestamp_diff::INTERVAL),
                other => other,
            });
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(udf, vec![*left, *right]),
            )))
        }
        (Expr::Cast(Cast { expr, field }), Some(udf)) => {
            types.push(Some(field.data_type().clone()));
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(udf, vec![*expr]),
            )))
        }
        (Expr::ScalarFunction(ScalarFunction { args, .. }), Some(udf)) => {
            // (the one argument's type: `eddy_float_round` keeps it)
            types.push(child_types.into_iter().next().flatten());
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(udf, args),
            )))
        }
        (e, _) => {
            // arithmetic on operands of one type has that type; anything
            // else is asked (a column this node cannot type, resolved
            // elsewhere, has none, and nothing above it is rewritten)
            let own = match (&e, operands) {
                (Expr::BinaryExpr(BinaryExpr { op, .. }), Some(t))
                    if matches!(
                        op,
                        Operator::Plus
                            | Operator::Minus
                            | Operator::Multiply
                            | Operator::Divide
                            | Operator::Modulo
                    ) && t.is_numeric() =>
                {
                    Some(t)
                }
                (Expr::BinaryExpr(BinaryExpr { op, .. }), _)
                    if is_comparison(*op) || matches!(op, Operator::And | Operator::Or) =>
                {
                    Some(DataType::Boolean)
                }
                _ => e.get_type(schema).ok(),
            };
            types.push(own);
            Ok(Transformed::no(e))
        }
    }
}

/// Whether `e` is DataFusion's coercion of an integer to an interval of
/// days (`date + 1`: `CAST(CAST(n * 86400 AS Duration) AS Interval)`),
/// which is PostgreSQL's `date + integer` and stays a date.
fn integer_days(e: &Expr) -> bool {
    match e {
        Expr::Cast(Cast { expr, .. }) => matches!(
            expr.as_ref(),
            Expr::Cast(Cast { field, .. }) if matches!(field.data_type(), DataType::Duration(_))
        ),
        _ => false,
    }
}

fn is_comparison(op: Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
    )
}

/// Every function this rule plans, for contexts that parse them by name
/// (the GPU kernel tests compile and run them against these CPU forms).
pub fn checked_functions() -> Vec<Arc<ScalarUDF>> {
    let mut all = vec![
        Arc::clone(&integer::ADD),
        Arc::clone(&integer::SUB),
        Arc::clone(&integer::MUL),
    ];
    all.extend(float::all());
    all.push(Arc::clone(&rounding::FLOAT_ROUND));
    all.extend(to_integer::all());
    all.push(Arc::clone(&timestamp_diff::TIMESTAMP_DIFF));
    all.push(Arc::clone(&epoch::EPOCH));
    all.push(interval_order::udf());
    all
}

/// The checked function for `op` on two operands of type `t`, if there is
/// one; `%` on floats is refused as PostgreSQL has no such operator.
fn binary_udf(op: Operator, t: &DataType) -> DfResult<Option<Arc<ScalarUDF>>> {
    Ok(match (op, t) {
        (Operator::Plus, DataType::Int16 | DataType::Int32 | DataType::Int64) => {
            Some(Arc::clone(&integer::ADD))
        }
        (Operator::Minus, DataType::Int16 | DataType::Int32 | DataType::Int64) => {
            Some(Arc::clone(&integer::SUB))
        }
        (Operator::Multiply, DataType::Int16 | DataType::Int32 | DataType::Int64) => {
            Some(Arc::clone(&integer::MUL))
        }
        (Operator::Minus, DataType::Timestamp(..)) => timestamp_diff::minus_udf(t),
        (Operator::Modulo, DataType::Float32 | DataType::Float64) => {
            let name = float::type_name(t);
            return Err(DataFusionError::External(Box::new(
                SqlError::UndefinedOperator(format!("operator does not exist: {name} % {name}")),
            )));
        }
        (op, DataType::Float32 | DataType::Float64) => float::binary_udf(op),
        _ => None,
    })
}
