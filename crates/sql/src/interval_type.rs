//! `'...'::interval` in DataFusion plans: Arrow's own interval parser does
//! not know PostgreSQL's forms (`04:05:06`, `@ 1 hour ago`, ISO 8601), so a
//! cast of a string literal to interval is rewritten on the AST
//! (`rewrite.rs`) to `eddy_interval_in(text)`, which reads it with
//! `eddy_common::interval` (22007 / 22008 as PostgreSQL) and which
//! DataFusion folds to a constant.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, IntervalMonthDayNanoBuilder};
use datafusion::arrow::datatypes::{DataType, IntervalUnit};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::pgtypes::{interval_arrow, interval_from_text};

/// The name of the text -> interval function.
pub const INTERVAL_IN: &str = "eddy_interval_in";

#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalIn {
    signature: Signature,
}

impl ScalarUDFImpl for IntervalIn {
    fn name(&self) -> &str {
        INTERVAL_IN
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Interval(IntervalUnit::MonthDayNano))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let [arg] = args.args.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "{INTERVAL_IN} takes one argument"
            )));
        };
        let all_scalar = matches!(arg, ColumnarValue::Scalar(_));
        let a = arg.to_array(args.number_rows)?;
        let mut out = IntervalMonthDayNanoBuilder::with_capacity(a.len());
        for s in a.as_string::<i32>().iter() {
            match s {
                None => out.append_null(),
                Some(s) => {
                    let iv = interval_from_text(s)
                        .and_then(interval_arrow)
                        .map_err(|e| DataFusionError::External(Box::new(e)))?;
                    out.append_value(iv);
                }
            }
        }
        let out: ArrayRef = Arc::new(out.finish());
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

/// The interval functions a session registers.
pub fn interval_functions() -> Vec<ScalarUDF> {
    vec![ScalarUDF::new_from_impl(IntervalIn {
        signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
    })]
}
