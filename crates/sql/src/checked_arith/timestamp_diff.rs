//! `timestamp - timestamp` (and `timestamptz - timestamptz`) as
//! PostgreSQL's `timestamp_mi`: an interval of whole days and the time
//! left over (`2 days 02:30:15.5`, `-1 days -12:00:00`), never months.
//!
//! DataFusion answers an Arrow `Duration`, a type PostgreSQL does not
//! have: it went to clients as text (`PT181815.5S`), compared wrongly with
//! intervals (`max(t) - min(t) > interval '1 day'` was false for two days)
//! and refused `date_trunc`. The analyzer rule
//! ([`super::CheckedArithmetic`]) plans the subtraction as
//! `eddy_timestamp_diff`, whose result is `Interval(MonthDayNano)`, the
//! type of every other interval in Eddy. A difference beyond the interval
//! range is 22008, as in PostgreSQL.

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, IntervalMonthDayNanoArray};
use datafusion::arrow::datatypes::{
    DataType, IntervalMonthDayNano, IntervalUnit, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use datafusion::common::DataFusionError;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::float::result;
use crate::error::SqlError;

const MICROS_PER_DAY: i64 = 86_400_000_000;

pub(super) static TIMESTAMP_DIFF: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(TimestampDiff::new())));

/// The type of the difference.
pub(super) const INTERVAL: DataType = DataType::Interval(IntervalUnit::MonthDayNano);

/// The replacement for `l - r` on operands of type `t`, if it is a
/// timestamp difference.
pub(super) fn minus_udf(t: &DataType) -> Option<Arc<ScalarUDF>> {
    matches!(t, DataType::Timestamp(..)).then(|| Arc::clone(&TIMESTAMP_DIFF))
}

fn out_of_range() -> SqlError {
    SqlError::DatetimeOverflow("interval out of range".into())
}

/// `l - r` in microseconds as PostgreSQL's interval: whole days, then the
/// rest (same sign, as `interval_justify_hours` leaves it).
fn difference(l: i64, r: i64) -> Result<IntervalMonthDayNano, SqlError> {
    let micros = l.checked_sub(r).ok_or_else(out_of_range)?;
    let days = micros
        .checked_div(MICROS_PER_DAY)
        .ok_or_else(out_of_range)?;
    let rest = micros
        .checked_rem(MICROS_PER_DAY)
        .ok_or_else(out_of_range)?;
    Ok(IntervalMonthDayNano {
        months: 0,
        days: i32::try_from(days).map_err(|_| out_of_range())?,
        nanoseconds: rest.checked_mul(1000).ok_or_else(out_of_range)?,
    })
}

/// A timestamp column's values in microseconds.
pub(super) fn micros(a: &ArrayRef) -> Result<Vec<Option<i64>>, DataFusionError> {
    let scale = |v: Option<i64>, mul: i64, div: i64| -> DfResult<Option<i64>> {
        v.map(|v| {
            v.checked_mul(mul)
                .and_then(|v| v.checked_div(div))
                .ok_or_else(|| DataFusionError::External(Box::new(out_of_range())))
        })
        .transpose()
    };
    match a.data_type() {
        DataType::Timestamp(TimeUnit::Microsecond, _) => Ok(a
            .as_primitive::<TimestampMicrosecondType>()
            .iter()
            .collect()),
        DataType::Timestamp(TimeUnit::Millisecond, _) => a
            .as_primitive::<TimestampMillisecondType>()
            .iter()
            .map(|v| scale(v, 1000, 1))
            .collect(),
        DataType::Timestamp(TimeUnit::Second, _) => a
            .as_primitive::<TimestampSecondType>()
            .iter()
            .map(|v| scale(v, 1_000_000, 1))
            .collect(),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => a
            .as_primitive::<TimestampNanosecondType>()
            .iter()
            .map(|v| scale(v, 1, 1000))
            .collect(),
        other => Err(DataFusionError::Plan(format!(
            "eddy_timestamp_diff takes timestamps, not {other}"
        ))),
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestampDiff {
    signature: Signature,
}

impl TimestampDiff {
    fn new() -> TimestampDiff {
        TimestampDiff {
            // the rule plans it only over two timestamps of one type
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for TimestampDiff {
    fn name(&self) -> &str {
        "eddy_timestamp_diff"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(INTERVAL)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [l, r] = arrays.as_slice() else {
            return Err(DataFusionError::Plan(
                "eddy_timestamp_diff takes two arguments".into(),
            ));
        };
        let out: IntervalMonthDayNanoArray = micros(l)?
            .into_iter()
            .zip(micros(r)?)
            .map(|pair| match pair {
                (Some(l), Some(r)) => difference(l, r).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<_, SqlError>>()
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let out: ArrayRef = Arc::new(out);
        debug_assert_eq!(out.len(), l.len());
        result(out, scalar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::arithmetic_side_effects, reason = "small test values")]
    fn iv(days: i32, micros: i64) -> IntervalMonthDayNano {
        IntervalMonthDayNano {
            months: 0,
            days,
            nanoseconds: micros * 1000,
        }
    }

    #[test]
    fn differences_are_days_and_time() {
        let day = MICROS_PER_DAY;
        assert_eq!(difference(7 * day, 0).unwrap(), iv(7, 0));
        assert_eq!(
            difference(2 * day + 9_015_500_000, 0).unwrap(),
            iv(2, 9_015_500_000)
        );
        assert_eq!(difference(0, day + day / 2).unwrap(), iv(-1, -day / 2));
        assert_eq!(difference(5, 5).unwrap(), iv(0, 0));
        assert_eq!(difference(i64::MAX, -1).unwrap_err().sqlstate(), "22008");
    }
}
