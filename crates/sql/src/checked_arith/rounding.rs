//! `round` of a float as PostgreSQL answers it: `round(double precision)`
//! is C's `rint`, which rounds a tie to the even neighbour (`round(2.5)`
//! is 2, `round(-0.5)` is -0), where DataFusion's `round` rounds ties away
//! from zero (3 and -1): a different number, not a different spelling.
//!
//! The analyzer rule ([`super::CheckedArithmetic`]) plans one-argument
//! `round` of a real or double precision argument as `eddy_float_round`;
//! `round` of integers and numerics (ties away from zero in PostgreSQL
//! too) and `round(x, n)` stay DataFusion's. The result keeps the
//! argument's type, as the rule's other rewrites do.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, AsArray, Float32Array, Float64Array};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::common::DataFusionError;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

use super::float::result;

pub(super) static FLOAT_ROUND: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(FloatRound::new())));

/// The replacement for `round(arg)` when `arg` has type `t`, if any.
pub(super) fn round_udf(t: &DataType) -> Option<Arc<ScalarUDF>> {
    matches!(t, DataType::Float32 | DataType::Float64).then(|| Arc::clone(&FLOAT_ROUND))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FloatRound {
    signature: Signature,
}

impl FloatRound {
    fn new() -> FloatRound {
        let one = |t: DataType| TypeSignature::Exact(vec![t]);
        FloatRound {
            signature: Signature::one_of(
                vec![one(DataType::Float32), one(DataType::Float64)],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for FloatRound {
    fn name(&self) -> &str {
        "eddy_float_round"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        args.first()
            .cloned()
            .ok_or_else(|| DataFusionError::Plan("eddy_float_round takes one argument".into()))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args.as_slice(), [ColumnarValue::Scalar(_)]);
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [x] = arrays.as_slice() else {
            return Err(DataFusionError::Plan(
                "eddy_float_round takes one argument".into(),
            ));
        };
        let out: ArrayRef = if let Some(x) = x.as_primitive_opt::<Float64Type>() {
            let out: Float64Array = x.unary(f64::round_ties_even);
            Arc::new(out)
        } else if let Some(x) = x.as_primitive_opt::<Float32Type>() {
            let out: Float32Array = x.unary(f32::round_ties_even);
            Arc::new(out)
        } else {
            return Err(DataFusionError::Plan(
                "eddy_float_round takes a real or double precision argument".into(),
            ));
        };
        result(out, scalar)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ties_go_to_the_even_neighbour() {
        for (x, r) in [
            (2.5f64, 2.0f64),
            (3.5, 4.0),
            (-2.5, -2.0),
            (2.4999, 2.0),
            (2.51, 3.0),
        ] {
            assert_eq!(x.round_ties_even(), r, "{x}");
        }
        let negative_zero = (-0.5f64).round_ties_even();
        assert!(negative_zero == 0.0 && negative_zero.is_sign_negative());
    }
}
