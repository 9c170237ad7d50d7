//! `extract(epoch from x)` (and `date_part('epoch', x)`) exactly, as
//! PostgreSQL 15's numeric: DataFusion's is a double computed from
//! nanoseconds (`extract(epoch from timestamp '2024-01-01 00:00:01.25')`
//! was 1704067201.2499998) and counts a year of an interval as 12 months
//! of 30 days (`interval '1 year'` was 31104000 seconds; PostgreSQL counts
//! 365.25 days, 31557600).
//!
//! The rule replaces the call with `eddy_epoch(x)`, an exact numeric of
//! scale 6 (scale 0 for a date): microseconds since 1970 for a timestamp
//! (with or without zone, in UTC), since midnight for a time; for an
//! interval PostgreSQL's `interval_part` sum: years of 365.25 days, the
//! remaining months of 30 days, days of 86,400 seconds, and the time. It is
//! then cast to double precision, the type DataFusion planned the call's
//! users for (an aggregate over it is planned for a double before this
//! rule runs): the nearest double to the exact value, which prints as
//! PostgreSQL's `date_part` does (EXTRACT's numeric prints six fraction
//! digits in PostgreSQL: `3600.000000` where Eddy prints `3600`).

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, AsArray, Decimal128Array};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, IntervalUnit, Time64MicrosecondType, TimeUnit,
};
use datafusion::common::{DFSchema, DataFusionError};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use super::float::result;

pub(super) static EPOCH: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(Epoch::new())));

const MICROS_PER_SECOND: i128 = 1_000_000;
const SECONDS_PER_DAY: i128 = 86_400;

/// The types `eddy_epoch` reads.
fn reads(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(..)
            | DataType::Date32
            | DataType::Time64(_)
            | DataType::Interval(IntervalUnit::MonthDayNano)
    )
}

/// `eddy_epoch(x)`, a numeric of scale 6 (0 for a date), where it reads
/// x's type.
fn exact_epoch_of(x: Expr, schema: &DFSchema) -> Option<Expr> {
    reads(&x.get_type(schema).ok()?)
        .then(|| Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(&EPOCH), vec![x])))
}

/// The exact epochs of `x` (as `eddy_epoch`), or `None` for a type it does
/// not read.
pub(crate) fn epoch_array(x: &ArrayRef) -> DfResult<Option<ArrayRef>> {
    if !reads(x.data_type()) {
        return Ok(None);
    }
    epochs(x).map(Some)
}

/// `date_part('epoch', x)` as `eddy_epoch(x)` for the types it reads;
/// `None` for any other call.
pub(super) fn exact_epoch(f: &ScalarFunction, schema: &DFSchema) -> Option<Expr> {
    let (field, x) = super::rounding::date_part_call(f)?;
    if !field.trim().eq_ignore_ascii_case("epoch") {
        return None;
    }
    let exact = exact_epoch_of(x.clone(), schema)?;
    // the type DataFusion planned the call's users for (an aggregate over
    // it is planned for a double already)
    Some(Expr::Cast(datafusion::logical_expr::expr::Cast::new(
        Box::new(exact),
        DataType::Float64,
    )))
}

/// PostgreSQL's epoch of an interval in microseconds: years of 365.25
/// days, the other months of 30 (`interval_part_common`'s arithmetic,
/// done in quarter days to stay in integers).
fn interval_micros(months: i32, days: i32, nanos: i64) -> i128 {
    let (years, months) = (i128::from(months / 12), i128::from(months % 12));
    let quarter_days = 1461 * years + 120 * months + 4 * i128::from(days);
    quarter_days * (SECONDS_PER_DAY / 4) * MICROS_PER_SECOND + i128::from(nanos / 1000)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Epoch {
    signature: Signature,
}

impl Epoch {
    fn new() -> Epoch {
        Epoch {
            // planned only by the rule, over the types `exact_epoch` reads
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

fn scale_of(t: &DataType) -> i8 {
    if *t == DataType::Date32 {
        0
    } else {
        6
    }
}

impl ScalarUDFImpl for Epoch {
    fn name(&self) -> &str {
        "eddy_epoch"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        let t = args.first().unwrap_or(&DataType::Null);
        Ok(DataType::Decimal128(38, scale_of(t)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args.first(), Some(ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [x] = arrays.as_slice() else {
            return Err(DataFusionError::Plan(
                "eddy_epoch takes one argument".into(),
            ));
        };
        result(epochs(x)?, scalar)
    }
}

/// `eddy_epoch` of every value of `x`.
fn epochs(x: &ArrayRef) -> DfResult<ArrayRef> {
    {
        let values: Vec<Option<i128>> = match x.data_type() {
            DataType::Timestamp(..) => super::timestamp_diff::micros(x)?
                .into_iter()
                .map(|v| v.map(i128::from))
                .collect(),
            DataType::Date32 => x
                .as_primitive::<Date32Type>()
                .iter()
                .map(|d| d.map(|d| i128::from(d) * SECONDS_PER_DAY))
                .collect(),
            DataType::Time64(TimeUnit::Microsecond) => x
                .as_primitive::<Time64MicrosecondType>()
                .iter()
                .map(|t| t.map(i128::from))
                .collect(),
            // a time literal: nanoseconds, of which PostgreSQL keeps micros
            DataType::Time64(TimeUnit::Nanosecond) => x
                .as_primitive::<datafusion::arrow::datatypes::Time64NanosecondType>()
                .iter()
                .map(|t| t.map(|t| i128::from(t) / 1000))
                .collect(),
            DataType::Interval(IntervalUnit::MonthDayNano) => x
                .as_primitive::<datafusion::arrow::datatypes::IntervalMonthDayNanoType>()
                .iter()
                .map(|v| v.map(|v| interval_micros(v.months, v.days, v.nanoseconds)))
                .collect(),
            other => {
                return Err(DataFusionError::Plan(format!(
                    "eddy_epoch does not read {other}"
                )))
            }
        };
        let out =
            Decimal128Array::from(values).with_precision_and_scale(38, scale_of(x.data_type()))?;
        Ok(Arc::new(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PostgreSQL 15's answers, in microseconds.
    #[test]
    fn interval_epochs_count_years_of_365_25_days() {
        assert_eq!(interval_micros(12, 0, 0), 31_557_600_000_000);
        assert_eq!(interval_micros(1, 0, 0), 2_592_000_000_000);
        assert_eq!(interval_micros(13, 1, 500_000_000), 34_236_000_500_000);
        assert_eq!(interval_micros(-13, 0, 0), -34_149_600_000_000);
    }
}
