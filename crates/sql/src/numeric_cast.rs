//! `x::numeric` without a precision: PostgreSQL's unconstrained numeric
//! keeps each value's own scale, so an integer cast to it has none
//! (`20::numeric` is `20`) and a `numeric(10,2)` keeps its two digits.
//! Arrow's decimals have one scale per column, and DataFusion casts to
//! `Decimal128(38, 10)`, which printed `20.0000000000`.
//!
//! So a cast of a non-literal to unconstrained numeric is
//! [`NUMERIC_CAST`]`(x)` on the AST (`crate::rewrite`), typed by its
//! argument: integers as decimals of scale 0 wide enough for the type,
//! a decimal as itself; anything else (floats, text: their scale depends
//! on the value) keeps DataFusion's `Decimal128(38, 10)`. The simplifier
//! turns the call into the plain cast to that type, so plans are as
//! before for everything but the type.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    Cast, ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// `eddy_numeric(x)`: `x` as an unconstrained numeric.
pub const NUMERIC_CAST: &str = "eddy_numeric";

/// The decimal an unconstrained numeric of `from` values is.
pub fn unconstrained_numeric_type(from: &DataType) -> DataType {
    match from {
        DataType::Int8 | DataType::UInt8 => DataType::Decimal128(3, 0),
        DataType::Int16 | DataType::UInt16 => DataType::Decimal128(5, 0),
        DataType::Int32 | DataType::UInt32 => DataType::Decimal128(10, 0),
        DataType::Int64 => DataType::Decimal128(19, 0),
        DataType::UInt64 => DataType::Decimal128(20, 0),
        d @ (DataType::Decimal128(..) | DataType::Decimal256(..)) => d.clone(),
        _ => DataType::Decimal128(38, 10),
    }
}

/// The function [`NUMERIC_CAST`] names.
pub fn numeric_cast_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(NumericCast {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct NumericCast {
    signature: Signature,
}

impl ScalarUDFImpl for NumericCast {
    fn name(&self) -> &str {
        NUMERIC_CAST
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args.first() {
            Some(t) => Ok(unconstrained_numeric_type(t)),
            None => Err(DataFusionError::Plan(format!(
                "{NUMERIC_CAST} takes one argument"
            ))),
        }
    }
    fn simplify(
        &self,
        mut args: Vec<Expr>,
        info: &SimplifyContext,
    ) -> DfResult<ExprSimplifyResult> {
        if args.len() != 1 {
            return Ok(ExprSimplifyResult::Original(args));
        }
        let arg = args.swap_remove(0);
        let to = unconstrained_numeric_type(&info.get_data_type(&arg)?);
        Ok(ExprSimplifyResult::Simplified(Expr::Cast(Cast::new(
            Box::new(arg),
            to,
        ))))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let to = args.return_field.data_type().clone();
        let Some(arg) = args.args.into_iter().next() else {
            return Err(DataFusionError::Plan(format!(
                "{NUMERIC_CAST} takes one argument"
            )));
        };
        arg.cast_to(&to, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_have_no_scale_and_decimals_keep_theirs() {
        assert_eq!(
            unconstrained_numeric_type(&DataType::Int32),
            DataType::Decimal128(10, 0)
        );
        assert_eq!(
            unconstrained_numeric_type(&DataType::Int64),
            DataType::Decimal128(19, 0)
        );
        assert_eq!(
            unconstrained_numeric_type(&DataType::Decimal128(10, 2)),
            DataType::Decimal128(10, 2)
        );
        assert_eq!(
            unconstrained_numeric_type(&DataType::Float64),
            DataType::Decimal128(38, 10)
        );
    }
}
