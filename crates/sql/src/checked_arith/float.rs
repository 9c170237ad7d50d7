//! PostgreSQL's float operators and casts, where IEEE 754 alone answers
//! differently (`float.h`'s `float8_pl`, `float8_mul`, `float8_div` and
//! their float4 forms, `float4in`/`float8in`, `dtof`):
//!
//! * `+` and `-`: a non-finite result of finite operands is 22003 ("value
//!   out of range: overflow");
//! * `*`: that, and a zero product of non-zero operands is 22003
//!   ("underflow");
//! * `/`: a zero divisor is 22012 unless the dividend is NaN; an infinite
//!   quotient of a finite dividend is overflow; a zero quotient of a
//!   non-zero dividend and a finite divisor is underflow;
//! * double precision to real: overflow and underflow as above
//!   (`pgtypes::float4_from_float8`, the same check INSERT makes);
//! * text to real or double precision: `pgtypes::parse_text`, PostgreSQL's
//!   input syntax (`NaN`, `Infinity`, `inf` with a sign, in any case) and
//!   its range (22003 for `'1e300'::real`, 22P02 for text that is no
//!   number).
//!
//! real arithmetic is computed in double precision and rounded once: for
//! `+ - * /` that is exactly the single-precision result (double has more
//! than twice real's significand bits), so one loop serves both types.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float32Array, Float64Array};
use datafusion::arrow::compute::kernels::arity::{try_binary, try_unary};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::arrow::error::ArrowError;
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use eddy_common::{ColumnType, Value};

use crate::error::SqlError;
use crate::pgtypes;

/// PostgreSQL's name of a float type, for messages.
pub(super) fn type_name(t: &DataType) -> &'static str {
    match t {
        DataType::Float32 => "real",
        _ => "double precision",
    }
}

/// The checked function for `op` on two floats of one type.
pub(super) fn binary_udf(op: datafusion::logical_expr::Operator) -> Option<Arc<ScalarUDF>> {
    use datafusion::logical_expr::Operator;
    let udf = match op {
        Operator::Plus => &*ADD,
        Operator::Minus => &*SUB,
        Operator::Multiply => &*MUL,
        Operator::Divide => &*DIV,
        _ => return None,
    };
    Some(Arc::clone(udf))
}

/// The checked function replacing a cast from `from` to `to`, where
/// DataFusion's cast would give Infinity or zero for what PostgreSQL
/// refuses.
pub(super) fn cast_udf(from: &DataType, to: &DataType) -> Option<Arc<ScalarUDF>> {
    let text = matches!(
        from,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    let udf = match to {
        DataType::Float32 if from == &DataType::Float64 => &*FLOAT8_TO_FLOAT4,
        DataType::Float32 if text => &*TEXT_TO_FLOAT4,
        DataType::Float64 if text => &*TEXT_TO_FLOAT8,
        _ => return None,
    };
    Some(Arc::clone(udf))
}

/// The operators and casts of this module.
pub(super) fn all() -> Vec<Arc<ScalarUDF>> {
    [
        &*ADD,
        &*SUB,
        &*MUL,
        &*DIV,
        &*FLOAT8_TO_FLOAT4,
        &*TEXT_TO_FLOAT4,
        &*TEXT_TO_FLOAT8,
    ]
    .into_iter()
    .map(Arc::clone)
    .collect()
}

static ADD: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(FloatOp::new(Op::Add))));
static SUB: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(FloatOp::new(Op::Sub))));
static MUL: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(FloatOp::new(Op::Mul))));
static DIV: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(FloatOp::new(Op::Div))));
static FLOAT8_TO_FLOAT4: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(FloatCast::new(
        Cast::Float8ToFloat4,
    )))
});
static TEXT_TO_FLOAT4: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(FloatCast::new(Cast::TextToFloat4))));
static TEXT_TO_FLOAT8: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(FloatCast::new(Cast::TextToFloat8))));

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

pub(super) fn overflow() -> SqlError {
    SqlError::NumericOutOfRange("value out of range: overflow".into())
}

pub(super) fn underflow() -> SqlError {
    SqlError::NumericOutOfRange("value out of range: underflow".into())
}

/// `a op b` as PostgreSQL computes it; `round` narrows a double result to
/// the operands' type (identity for double precision).
fn checked(op: Op, a: f64, b: f64, round: fn(f64) -> f64) -> Result<f64, SqlError> {
    let finite = a.is_finite() && b.is_finite();
    match op {
        Op::Add | Op::Sub => {
            let r = round(if op == Op::Add { a + b } else { a - b });
            if r.is_infinite() && finite {
                return Err(overflow());
            }
            Ok(r)
        }
        Op::Mul => {
            let r = round(a * b);
            if r.is_infinite() && finite {
                return Err(overflow());
            }
            if r == 0.0 && a != 0.0 && b != 0.0 {
                return Err(underflow());
            }
            Ok(r)
        }
        Op::Div => {
            if b == 0.0 && !a.is_nan() {
                return Err(SqlError::DivisionByZero);
            }
            let r = round(a / b);
            if r.is_infinite() && a.is_finite() {
                return Err(overflow());
            }
            if r == 0.0 && a != 0.0 && b.is_finite() {
                return Err(underflow());
            }
            Ok(r)
        }
    }
}

fn to_float4(x: f64) -> f64 {
    // the rounding to single precision is the point; range is checked by
    // the caller on the rounded value
    #[allow(clippy::cast_possible_truncation)]
    let narrowed = x as f32;
    f64::from(narrowed)
}

pub(super) fn arrow_error(e: SqlError) -> ArrowError {
    ArrowError::ExternalError(Box::new(e))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FloatOp {
    op: Op,
    signature: Signature,
}

impl FloatOp {
    fn new(op: Op) -> FloatOp {
        let same = |t: DataType| TypeSignature::Exact(vec![t.clone(), t]);
        FloatOp {
            op,
            signature: Signature::one_of(
                vec![same(DataType::Float32), same(DataType::Float64)],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for FloatOp {
    fn name(&self) -> &str {
        match self.op {
            Op::Add => "eddy_float_add",
            Op::Sub => "eddy_float_sub",
            Op::Mul => "eddy_float_mul",
            Op::Div => "eddy_float_div",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        args.first()
            .cloned()
            .ok_or_else(|| DataFusionError::Plan(format!("{} takes two arguments", self.name())))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let both_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [l, r] = arrays.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "{} takes two arguments",
                self.name()
            )));
        };
        let op = self.op;
        let out: ArrayRef = match (
            l.as_primitive_opt::<Float32Type>(),
            r.as_primitive_opt::<Float32Type>(),
            l.as_primitive_opt::<Float64Type>(),
            r.as_primitive_opt::<Float64Type>(),
        ) {
            (Some(l), Some(r), _, _) => {
                let out: Float32Array = try_binary(l, r, |a, b| {
                    let v =
                        checked(op, f64::from(a), f64::from(b), to_float4).map_err(arrow_error)?;
                    // exact: `checked` rounded it to single precision
                    #[allow(clippy::cast_possible_truncation)]
                    Ok(v as f32)
                })?;
                Arc::new(out)
            }
            (_, _, Some(l), Some(r)) => {
                let out: Float64Array =
                    try_binary(l, r, |a, b| checked(op, a, b, |x| x).map_err(arrow_error))?;
                Arc::new(out)
            }
            _ => {
                return Err(DataFusionError::Plan(format!(
                    "{} takes two operands of one float type",
                    self.name()
                )))
            }
        };
        result(out, both_scalar)
    }
}

pub(super) fn result(out: ArrayRef, scalar: bool) -> DfResult<ColumnarValue> {
    if scalar {
        Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
    } else {
        Ok(ColumnarValue::Array(out))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Cast {
    Float8ToFloat4,
    TextToFloat4,
    TextToFloat8,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FloatCast {
    cast: Cast,
    signature: Signature,
}

impl FloatCast {
    fn new(cast: Cast) -> FloatCast {
        let one = |t: DataType| TypeSignature::Exact(vec![t]);
        let inputs = match cast {
            Cast::Float8ToFloat4 => vec![one(DataType::Float64)],
            Cast::TextToFloat4 | Cast::TextToFloat8 => vec![
                one(DataType::Utf8),
                one(DataType::LargeUtf8),
                one(DataType::Utf8View),
            ],
        };
        FloatCast {
            cast,
            signature: Signature::one_of(inputs, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for FloatCast {
    fn name(&self) -> &str {
        match self.cast {
            Cast::Float8ToFloat4 => "eddy_float8_to_float4",
            Cast::TextToFloat4 => "eddy_text_to_float4",
            Cast::TextToFloat8 => "eddy_text_to_float8",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(match self.cast {
            Cast::Float8ToFloat4 | Cast::TextToFloat4 => DataType::Float32,
            Cast::TextToFloat8 => DataType::Float64,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args.as_slice(), [ColumnarValue::Scalar(_)]);
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [input] = arrays.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "{} takes one argument",
                self.name()
            )));
        };
        let out: ArrayRef = match self.cast {
            Cast::Float8ToFloat4 => {
                let Some(input) = input.as_primitive_opt::<Float64Type>() else {
                    return Err(DataFusionError::Plan(format!(
                        "{} takes double precision",
                        self.name()
                    )));
                };
                let out: Float32Array = try_unary(input, |f| {
                    pgtypes::float4_from_float8(f).map_err(arrow_error)
                })?;
                Arc::new(out)
            }
            Cast::TextToFloat4 => {
                let out: Float32Array = parse_floats(input, ColumnType::Real, |v| match v {
                    Value::Real(f) => Some(f),
                    _ => None,
                })?;
                Arc::new(out)
            }
            Cast::TextToFloat8 => {
                let out: Float64Array = parse_floats(input, ColumnType::Double, |v| match v {
                    Value::Double(f) => Some(f),
                    _ => None,
                })?;
                Arc::new(out)
            }
        };
        result(out, scalar)
    }
}

/// Every string of `input` read as PostgreSQL reads a float of type `ty`
/// (`pick` takes the number out of the parsed value).
fn parse_floats<A, F>(input: &ArrayRef, ty: ColumnType, pick: fn(Value) -> Option<F>) -> DfResult<A>
where
    A: FromIterator<Option<F>>,
{
    texts(input)?
        .into_iter()
        .map(|s| {
            s.map(|s| pick(pgtypes::parse_text(s, ty)?).ok_or_else(|| bad_float(s, ty)))
                .transpose()
        })
        .collect::<Result<A, SqlError>>()
        .map_err(DataFusionError::from)
}

fn bad_float(s: &str, ty: ColumnType) -> SqlError {
    SqlError::InvalidText(format!(
        "invalid input syntax for type {}: \"{s}\"",
        ty.pg_name()
    ))
}

/// The strings of a text array of any of Arrow's three string layouts.
fn texts(a: &ArrayRef) -> DfResult<Vec<Option<&str>>> {
    if let Some(s) = a.as_string_opt::<i32>() {
        Ok(s.iter().collect())
    } else if let Some(s) = a.as_string_opt::<i64>() {
        Ok(s.iter().collect())
    } else if let Some(s) = a.as_string_view_opt() {
        Ok(s.iter().collect())
    } else {
        Err(DataFusionError::Plan(format!(
            "a text cast of {}",
            a.data_type()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f8(op: Op, a: f64, b: f64) -> Result<f64, &'static str> {
        checked(op, a, b, |x| x).map_err(|e| e.sqlstate())
    }

    fn f4(op: Op, a: f32, b: f32) -> Result<f64, &'static str> {
        checked(op, f64::from(a), f64::from(b), to_float4).map_err(|e| e.sqlstate())
    }

    #[test]
    fn overflow_and_underflow_of_finite_operands_are_errors() {
        assert_eq!(f8(Op::Mul, 1e308, 10.0), Err("22003"));
        assert_eq!(f8(Op::Add, 1e308, 1e308), Err("22003"));
        assert_eq!(f8(Op::Sub, -1e308, 1e308), Err("22003"));
        assert_eq!(f8(Op::Mul, 1e-308, 1e-308), Err("22003"));
        assert_eq!(f8(Op::Div, 1e-300, 1e300), Err("22003"));
        assert_eq!(f8(Op::Div, 1e300, 1e-300), Err("22003"));
        assert_eq!(f4(Op::Mul, 1e38, 1e38), Err("22003"));
        assert_eq!(f4(Op::Add, 3e38, 3e38), Err("22003"));
        assert_eq!(f4(Op::Mul, 1e-30, 1e-30), Err("22003"));
    }

    #[test]
    fn division_by_zero_is_22012_unless_the_dividend_is_nan() {
        assert_eq!(f8(Op::Div, 1.0, 0.0), Err("22012"));
        assert_eq!(f8(Op::Div, 0.0, 0.0), Err("22012"));
        assert_eq!(f8(Op::Div, f64::INFINITY, 0.0), Err("22012"));
        assert_eq!(f4(Op::Div, 2.0, -0.0), Err("22012"));
        assert!(f8(Op::Div, f64::NAN, 0.0).is_ok_and(f64::is_nan));
    }

    #[test]
    fn non_finite_operands_give_non_finite_results() {
        assert_eq!(f8(Op::Mul, f64::INFINITY, 2.0), Ok(f64::INFINITY));
        assert!(f8(Op::Sub, f64::INFINITY, f64::INFINITY).is_ok_and(f64::is_nan));
        assert!(f8(Op::Add, f64::NAN, 1.0).is_ok_and(f64::is_nan));
        assert_eq!(f8(Op::Div, 1.0, f64::INFINITY), Ok(0.0));
        assert_eq!(f8(Op::Mul, 0.0, 1e-308), Ok(0.0));
        assert_eq!(f4(Op::Mul, f32::INFINITY, 2.0), Ok(f64::INFINITY));
    }

    #[test]
    fn single_precision_results_are_rounded_once() {
        assert_eq!(f4(Op::Add, 0.1, 0.2), Ok(f64::from(0.1f32 + 0.2f32)));
        assert_eq!(f4(Op::Div, 1.0, 3.0), Ok(f64::from(1.0f32 / 3.0f32)));
        assert_eq!(f4(Op::Mul, 1.1, 1.1), Ok(f64::from(1.1f32 * 1.1f32)));
    }
}
