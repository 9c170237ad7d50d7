//! `interval * number`, `number * interval` and `interval / number`,
//! which DataFusion refuses ("Cannot get result type for temporal
//! operation"): planned (through [`IntervalArithPlanner`], a DataFusion
//! `ExprPlanner`, where both operand types are known) as
//! [`INTERVAL_MUL`] / [`INTERVAL_DIV`] with PostgreSQL's arithmetic
//! (`interval_mul` / `interval_div` of its `timestamp.c`): months and days
//! are multiplied and truncated each on its own, and their fractions
//! cascade down (a month is 30 days, a day 86,400 seconds), never up;
//! the time part is rounded to the microsecond. A result beyond the
//! field ranges is 22008, a division by zero 22012.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, IntervalMonthDayNanoArray};
use datafusion::arrow::datatypes::{DataType, IntervalMonthDayNano, IntervalUnit};
use datafusion::common::DFSchema;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;

use crate::error::SqlError;

/// `eddy_interval_mul(interval, float8)`.
pub const INTERVAL_MUL: &str = "eddy_interval_mul";
/// `eddy_interval_div(interval, float8)`.
pub const INTERVAL_DIV: &str = "eddy_interval_div";

const DAYS_PER_MONTH: f64 = 30.0;
const SECS_PER_DAY: f64 = 86_400.0;
const USECS_PER_SEC: f64 = 1_000_000.0;

/// Plans the operators of the module doc; anything else is left alone.
#[derive(Debug, Default)]
pub struct IntervalArithPlanner;

impl ExprPlanner for IntervalArithPlanner {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawBinaryExpr>> {
        let is_interval = |e: &Expr| {
            matches!(
                e.get_type(schema),
                Ok(DataType::Interval(IntervalUnit::MonthDayNano))
            )
        };
        // an untyped parameter beside an interval is a float8, as PostgreSQL
        // resolves it (its interval * and / take one)
        let untyped_parameter = |e: &Expr| matches!(e, Expr::Placeholder(p) if p.field.is_none());
        let is_number =
            |e: &Expr| untyped_parameter(e) || e.get_type(schema).is_ok_and(|t| t.is_numeric());
        let (operation, interval, factor) = match expr.op {
            BinaryOperator::Multiply if is_interval(&expr.left) && is_number(&expr.right) => {
                (Operation::Multiply, expr.left, expr.right)
            }
            BinaryOperator::Multiply if is_number(&expr.left) && is_interval(&expr.right) => {
                (Operation::Multiply, expr.right, expr.left)
            }
            BinaryOperator::Divide if is_interval(&expr.left) && is_number(&expr.right) => {
                (Operation::Divide, expr.left, expr.right)
            }
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let factor = match factor {
            Expr::Placeholder(mut p) if p.field.is_none() => {
                p.field = Some(Arc::new(datafusion::arrow::datatypes::Field::new(
                    "",
                    DataType::Float64,
                    true,
                )));
                Expr::Placeholder(p)
            }
            other => other,
        };
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            datafusion::logical_expr::expr::ScalarFunction::new_udf(
                Arc::new(udf(operation)),
                vec![interval, factor.cast_to(&DataType::Float64, schema)?],
            ),
        )))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Operation {
    Multiply,
    Divide,
}

/// The functions of this module, for the session to register.
pub fn interval_arith_functions() -> Vec<ScalarUDF> {
    vec![udf(Operation::Multiply), udf(Operation::Divide)]
}

fn udf(operation: Operation) -> ScalarUDF {
    ScalarUDF::new_from_impl(IntervalArith {
        operation,
        signature: Signature::exact(
            vec![
                DataType::Interval(IntervalUnit::MonthDayNano),
                DataType::Float64,
            ],
            Volatility::Immutable,
        ),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalArith {
    operation: Operation,
    signature: Signature,
}

impl ScalarUDFImpl for IntervalArith {
    fn name(&self) -> &str {
        match self.operation {
            Operation::Multiply => INTERVAL_MUL,
            Operation::Divide => INTERVAL_DIV,
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Interval(IntervalUnit::MonthDayNano))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let n = args.number_rows;
        let all_scalar = crate::udf_args::all_scalar(&args.args);
        let [interval, factor] = args.args.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "{} takes two arguments",
                self.name()
            )));
        };
        let intervals = interval.to_array(n)?;
        let factors = factor.to_array(n)?;
        let intervals =
            intervals.as_primitive::<datafusion::arrow::datatypes::IntervalMonthDayNanoType>();
        let factors = factors.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
        let mut out = Vec::with_capacity(intervals.len());
        for row in 0..intervals.len() {
            if intervals.is_null(row) || factors.is_null(row) {
                out.push(None);
                continue;
            }
            let result = apply(self.operation, intervals.value(row), factors.value(row))
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            out.push(Some(result));
        }
        crate::udf_args::scalar_if(all_scalar, Arc::new(IntervalMonthDayNanoArray::from(out)))
    }
}

/// PostgreSQL's `TSROUND`: to the nearest microsecond's worth of digits.
fn ts_round(x: f64) -> f64 {
    (x * USECS_PER_SEC).round_ties_even() / USECS_PER_SEC
}

fn out_of_range() -> SqlError {
    SqlError::DatetimeOverflow("interval out of range".into())
}

/// `interval * factor` or `interval / factor`, as PostgreSQL computes it.
fn apply(
    operation: Operation,
    span: IntervalMonthDayNano,
    factor: f64,
) -> Result<IntervalMonthDayNano, SqlError> {
    if operation == Operation::Divide && factor == 0.0 {
        return Err(SqlError::DivisionByZero);
    }
    let scale = |x: f64| match operation {
        Operation::Multiply => x * factor,
        Operation::Divide => x / factor,
    };
    let to_i32 = |x: f64| -> Result<i32, SqlError> {
        // (truncation toward zero, as C's cast; NaN and overflow refused)
        if x.is_nan() || x < f64::from(i32::MIN) || x >= f64::from(i32::MAX) + 1.0 {
            return Err(out_of_range());
        }
        Ok(x.trunc() as i32)
    };
    let months_exact = scale(f64::from(span.months));
    let days_exact = scale(f64::from(span.days));
    let months = to_i32(months_exact)?;
    let mut days = to_i32(days_exact)?;
    let month_remainder_days = ts_round((months_exact - f64::from(months)) * DAYS_PER_MONTH);
    let mut sec_remainder = ts_round(
        (days_exact - f64::from(days) + month_remainder_days - month_remainder_days.trunc())
            * SECS_PER_DAY,
    );
    if sec_remainder.abs() >= SECS_PER_DAY {
        let whole_days = (sec_remainder / SECS_PER_DAY).trunc();
        days = days
            .checked_add(to_i32(whole_days)?)
            .ok_or_else(out_of_range)?;
        sec_remainder -= whole_days * SECS_PER_DAY;
    }
    days = days
        .checked_add(to_i32(month_remainder_days.trunc())?)
        .ok_or_else(out_of_range)?;
    // Eddy's intervals are whole microseconds, as PostgreSQL's
    let micros = span.nanoseconds as f64 / 1000.0;
    let time = (scale(micros) + sec_remainder * USECS_PER_SEC).round_ties_even();
    if time.is_nan() || time.abs() >= 9.2e18 / 1000.0 {
        return Err(out_of_range());
    }
    Ok(IntervalMonthDayNano::new(
        months,
        days,
        (time as i64).checked_mul(1000).ok_or_else(out_of_range)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(months: i32, days: i32, micros: i64) -> IntervalMonthDayNano {
        IntervalMonthDayNano::new(months, days, micros * 1000)
    }

    #[test]
    fn fractions_cascade_down_as_in_postgresql() {
        // '1 mon 1 day 01:00:00' * 2
        assert_eq!(
            apply(Operation::Multiply, iv(1, 1, 3_600_000_000), 2.0).ok(),
            Some(iv(2, 2, 7_200_000_000))
        );
        // '1 mon' * 1.5 = '1 mon 15 days'
        assert_eq!(
            apply(Operation::Multiply, iv(1, 0, 0), 1.5).ok(),
            Some(iv(1, 15, 0))
        );
        // '1 day' * 1.5 = '1 day 12:00:00'
        assert_eq!(
            apply(Operation::Multiply, iv(0, 1, 0), 1.5).ok(),
            Some(iv(0, 1, 43_200_000_000))
        );
        // '1 mon' / 7 = '4 days 06:51:25.6896' (PostgreSQL 15)
        assert_eq!(
            apply(Operation::Divide, iv(1, 0, 0), 7.0).ok(),
            Some(iv(0, 4, 24_685_689_600))
        );
        // '-1 day' * 0.5 = '-12:00:00'
        assert_eq!(
            apply(Operation::Multiply, iv(0, -1, 0), 0.5).ok(),
            Some(iv(0, 0, -43_200_000_000))
        );
    }

    #[test]
    fn overflow_and_division_by_zero_are_errors() {
        assert!(matches!(
            apply(Operation::Divide, iv(0, 1, 0), 0.0),
            Err(SqlError::DivisionByZero)
        ));
        assert!(apply(Operation::Multiply, iv(i32::MAX, 0, 0), 2.0).is_err());
        assert!(apply(Operation::Multiply, iv(0, 1, 0), f64::NAN).is_err());
    }
}
