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
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::Expr;
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

/// The type PostgreSQL gives `ceil(x)`, `floor(x)`, `trunc(x)` and
/// `trunc(x, n)` (a constant `n`) of a numeric `x` of type `arg`: scale 0,
/// or `n` (at least 0), with the digits the integer part needs. None when
/// DataFusion's own type is already that, or for other calls. DataFusion
/// keeps the argument's scale (`ceil(2.1)` printed `3.0`, `trunc(2.15, 5)`
/// `2.15`); the values it computes are integral at the new scale, so a
/// cast to it is exact.
///
/// Returns the result type and the type the argument is widened to first:
/// one more digit, so that `ceil(9.9::numeric(2,1))` has room for 10
/// (DataFusion failed with "Decimal overflow while applying ceil").
pub(super) fn numeric_result_type(
    f: &ScalarFunction,
    arg: &DataType,
) -> Option<(DataType, DataType)> {
    let DataType::Decimal128(p, s) = arg else {
        return None;
    };
    let scale: i8 = match (f.func.name(), f.args.as_slice()) {
        ("ceil" | "floor" | "trunc", [_]) => 0,
        ("trunc", [_, n]) => i8::try_from(constant_integer(n)?.clamp(0, 38)).ok()?,
        _ => return None,
    };
    if scale == *s {
        return None;
    }
    // one more integer digit: ceil and floor can carry (9.9 -> 10)
    let digits = (i16::from(*p) - i16::from(*s) + i16::from(scale) + 1).clamp(1, 38);
    Some((
        DataType::Decimal128(u8::try_from(digits).ok()?, scale),
        DataType::Decimal128((*p).saturating_add(1).min(38), *s),
    ))
}

/// An integer constant, possibly under casts (type coercion casts a
/// literal to the parameter type it meets).
fn constant_integer(e: &Expr) -> Option<i64> {
    match e {
        Expr::Literal(v, _) => match v {
            ScalarValue::Int64(Some(n)) => Some(*n),
            ScalarValue::Int32(Some(n)) => Some(i64::from(*n)),
            ScalarValue::Int16(Some(n)) => Some(i64::from(*n)),
            ScalarValue::Int8(Some(n)) => Some(i64::from(*n)),
            _ => None,
        },
        Expr::Cast(c) => constant_integer(&c.expr),
        _ => None,
    }
}

/// The field and the operand of a `date_part` call (what EXTRACT plans
/// as) whose field is a constant.
pub(super) fn date_part_call(f: &ScalarFunction) -> Option<(&str, &Expr)> {
    if f.func.name() != "date_part" {
        return None;
    }
    match f.args.as_slice() {
        [Expr::Literal(
            ScalarValue::Utf8(Some(field))
            | ScalarValue::LargeUtf8(Some(field))
            | ScalarValue::Utf8View(Some(field)),
            _,
        ), x] => Some((field, x)),
        _ => None,
    }
}

/// `extract(second | millisecond from x)` (EXTRACT plans as `date_part`)
/// with the fraction PostgreSQL keeps: DataFusion answered whole seconds
/// (`extract(second from '10:00:05.5')` was 5; PostgreSQL 5.500000).
/// Rebuilt from the microseconds within the minute as a numeric of
/// EXTRACT's scale (6 for seconds, 3 for milliseconds), exactly: the
/// integer times 0.000001 (or 0.001). An explicit `date_part` gets the
/// same numeric (PostgreSQL's is a double of the same value). None for
/// other calls.
pub(super) fn fractional_date_part(f: &ScalarFunction) -> Option<Expr> {
    let (field, x) = date_part_call(f)?;
    let scale: i8 = match field.to_ascii_lowercase().as_str() {
        "second" | "seconds" | "s" | "sec" | "secs" => 6,
        "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" => 3,
        _ => return None,
    };
    let micros = Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::clone(&f.func),
        vec![
            Expr::Literal(ScalarValue::Utf8(Some("microsecond".into())), None),
            x.clone(),
        ],
    ));
    // 0.000001 or 0.001: one unit of the last digit kept
    let unit = ScalarValue::Decimal128(Some(1), u8::try_from(scale).ok()?.saturating_add(1), scale);
    Some(Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(
        Box::new(Expr::Cast(datafusion::logical_expr::expr::Cast::new(
            Box::new(micros),
            DataType::Decimal128(10, 0),
        ))),
        datafusion::logical_expr::Operator::Multiply,
        Box::new(Expr::Literal(unit, None)),
    )))
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
