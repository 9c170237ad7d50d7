//! Intervals compared and sorted as PostgreSQL orders them
//! (`interval_cmp_value`): by their total length with a month counted as
//! 30 days and a day as 24 hours, so `interval '1 day' = '24 hours'` and
//! `interval '25 hours' > '1 day'` are true. Arrow compares the (months,
//! days, nanoseconds) triple field by field, which answered false to both.
//!
//! The analyzer rule ([`super::CheckedArithmetic`]) rewrites a comparison
//! of two intervals to the same comparison of their keys
//! (`eddy_interval_key`, a 128-bit number of nanoseconds as an integral
//! `numeric`), and sorts an ORDER BY on an interval by its key; the values
//! themselves are unchanged. Not done: GROUP BY, DISTINCT, `min`/`max` and
//! window ordering still use Arrow's order, so `'24 hours'` and `'1 day'`
//! are two groups (PostgreSQL: one).

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, AsArray, Decimal128Array};
use datafusion::arrow::datatypes::{DataType, IntervalMonthDayNano, IntervalMonthDayNanoType};
use datafusion::common::DataFusionError;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::float::result;

static INTERVAL_KEY: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(IntervalKey::new())));

pub(super) fn udf() -> Arc<ScalarUDF> {
    Arc::clone(&INTERVAL_KEY)
}

/// Whether `t` is the interval type this module orders.
pub(super) fn is_interval(t: &DataType) -> bool {
    t == &super::timestamp_diff::INTERVAL
}

/// `e` (an interval) as its ordering key.
pub(super) fn key(e: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(udf(), vec![e]))
}

const NANOS_PER_DAY: i128 = 86_400_000_000_000;

/// PostgreSQL's `interval_cmp_value` in nanoseconds; cannot overflow: the
/// months and days are 32-bit, the nanoseconds 64-bit.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "|months| * 30 * 8.64e13 + |days| * 8.64e13 + |nanos| < 2^100"
)]
fn cmp_value(iv: IntervalMonthDayNano) -> i128 {
    let days = i128::from(iv.months) * 30 + i128::from(iv.days);
    days * NANOS_PER_DAY + i128::from(iv.nanoseconds)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalKey {
    signature: Signature,
}

impl IntervalKey {
    fn new() -> IntervalKey {
        IntervalKey {
            signature: Signature::exact(
                vec![super::timestamp_diff::INTERVAL],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for IntervalKey {
    fn name(&self) -> &str {
        "eddy_interval_key"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Decimal128(38, 0))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args.as_slice(), [ColumnarValue::Scalar(_)]);
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [input] = arrays.as_slice() else {
            return Err(DataFusionError::Plan(
                "eddy_interval_key takes one argument".into(),
            ));
        };
        let keys: Decimal128Array = input
            .as_primitive_opt::<IntervalMonthDayNanoType>()
            .ok_or_else(|| DataFusionError::Plan("eddy_interval_key takes an interval".into()))?
            .unary(cmp_value);
        let out: ArrayRef = Arc::new(keys.with_precision_and_scale(38, 0)?);
        result(out, scalar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::arithmetic_side_effects, reason = "small test values")]
    fn iv(months: i32, days: i32, hours: i64) -> IntervalMonthDayNano {
        IntervalMonthDayNano {
            months,
            days,
            nanoseconds: hours * 3_600_000_000_000,
        }
    }

    #[test]
    fn lengths_order_as_postgresql() {
        assert_eq!(cmp_value(iv(0, 1, 0)), cmp_value(iv(0, 0, 24)));
        assert!(cmp_value(iv(0, 0, 25)) > cmp_value(iv(0, 1, 0)));
        assert_eq!(cmp_value(iv(1, 0, 0)), cmp_value(iv(0, 30, 0)));
        assert!(cmp_value(iv(2, 0, 0)) > cmp_value(iv(0, 59, 0)));
        assert!(cmp_value(iv(0, -1, 0)) < cmp_value(iv(0, 0, -23)));
        let extreme = IntervalMonthDayNano {
            months: i32::MAX,
            days: i32::MAX,
            nanoseconds: i64::MAX,
        };
        assert!(cmp_value(extreme) > 0);
    }
}
