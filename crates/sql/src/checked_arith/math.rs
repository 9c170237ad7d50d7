//! PostgreSQL's float math functions where IEEE 754 alone answers
//! differently (`float.c`'s `dsqrt`, `dlog1`, `dlog10`, `dexp`, `dpow`),
//! registered under the names SQL calls (`sqrt`, `ln`, `log`, `log10`,
//! `exp`, `power`, `pow`) in place of DataFusion's:
//!
//! * `sqrt` of a negative number is 2201F;
//! * `ln`, `log10` and `log` of zero or a negative number are 2201E;
//!   `log(b, x)` is `ln(x) / ln(b)` with both checked, and base 1 is 22012;
//! * `exp` that overflows or underflows is 22003 (`exp(1000)`,
//!   `exp(-1000)`; Infinity and -Infinity give Infinity and 0);
//! * `power`: zero to a negative power and a negative number to a
//!   non-integer power are 2201F; a finite result out of range is 22003;
//!   NaN and infinite operands follow POSIX, as PostgreSQL's do.
//!
//! Every argument is read as double precision and the result is double
//! precision, as PostgreSQL's float8 functions answer for integer and real
//! arguments (DataFusion's `power(int, int)` was bigint).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Float64Array};
use datafusion::arrow::compute::kernels::arity::{try_binary, try_unary};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::DataFusionError;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

use super::float::{arrow_error, overflow, result, underflow};
use crate::error::SqlError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Func {
    Sqrt,
    Ln,
    Log10,
    Exp,
    Power,
    /// `log(x)` (base 10) or `log(b, x)`.
    Log,
}

fn power_error(what: &str) -> SqlError {
    SqlError::InvalidPowerArgument(what.into())
}

fn log_error(x: f64) -> SqlError {
    SqlError::InvalidLogArgument(
        if x == 0.0 {
            "cannot take logarithm of zero"
        } else {
            "cannot take logarithm of a negative number"
        }
        .into(),
    )
}

fn sqrt(x: f64) -> Result<f64, SqlError> {
    if x < 0.0 {
        return Err(power_error("cannot take square root of a negative number"));
    }
    Ok(x.sqrt())
}

/// `ln` or `log10` of `x` (`f`), with `dlog1`'s checks.
fn log_with(x: f64, f: fn(f64) -> f64) -> Result<f64, SqlError> {
    if x <= 0.0 {
        // (NaN is not <= 0: it gives NaN)
        return Err(log_error(x));
    }
    let r = f(x);
    if r.is_infinite() && !x.is_infinite() {
        return Err(overflow());
    }
    if r == 0.0 && x != 1.0 {
        return Err(underflow());
    }
    Ok(r)
}

fn exp(x: f64) -> Result<f64, SqlError> {
    if x.is_nan() || x.is_infinite() {
        return Ok(x.exp());
    }
    let r = x.exp();
    if r.is_infinite() {
        return Err(overflow());
    }
    if r == 0.0 {
        return Err(underflow());
    }
    Ok(r)
}

fn power(x: f64, y: f64) -> Result<f64, SqlError> {
    // POSIX: NaN ^ 0 = 1 and 1 ^ NaN = 1; other NaN cases are NaN
    if x.is_nan() {
        return Ok(if y == 0.0 { 1.0 } else { f64::NAN });
    }
    if y.is_nan() {
        return Ok(if x == 1.0 { 1.0 } else { f64::NAN });
    }
    if x == 0.0 && y < 0.0 {
        return Err(power_error("zero raised to a negative power is undefined"));
    }
    if x < 0.0 && y.floor() != y {
        return Err(power_error(
            "a negative number raised to a non-integer power yields a complex result",
        ));
    }
    let r = x.powf(y);
    if x.is_infinite() || y.is_infinite() {
        // IEEE's answers are POSIX's, which PostgreSQL follows
        return Ok(r);
    }
    if r.is_infinite() {
        return Err(overflow());
    }
    if r == 0.0 && x != 0.0 {
        return Err(underflow());
    }
    Ok(r)
}

/// PostgreSQL's `log(b, x)`: both checked as logarithm arguments, base 1
/// divides by zero.
fn log_base(b: f64, x: f64) -> Result<f64, SqlError> {
    if b <= 0.0 {
        return Err(log_error(b));
    }
    if x <= 0.0 {
        return Err(log_error(x));
    }
    if b == 1.0 {
        return Err(SqlError::DivisionByZero);
    }
    Ok(x.ln() / b.ln())
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct MathUdf {
    func: Func,
    name: &'static str,
    signature: Signature,
}

impl MathUdf {
    fn new(func: Func, name: &'static str) -> MathUdf {
        let one = TypeSignature::Coercible(vec![float_arg()]);
        let two = TypeSignature::Coercible(vec![float_arg(), float_arg()]);
        let sigs = match func {
            Func::Power => vec![two],
            Func::Log => vec![one, two],
            _ => vec![one],
        };
        MathUdf {
            func,
            name,
            signature: Signature::one_of(sigs, Volatility::Immutable),
        }
    }
}

/// A double precision argument; integers, reals and numerics are cast.
fn float_arg() -> datafusion::logical_expr::Coercion {
    use datafusion::common::types::{logical_float64, NativeType};
    use datafusion::logical_expr::{Coercion, TypeSignatureClass};
    Coercion::new_implicit(
        TypeSignatureClass::Native(logical_float64()),
        vec![TypeSignatureClass::Numeric],
        NativeType::Float64,
    )
}

impl ScalarUDFImpl for MathUdf {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let floats = arrays
            .iter()
            .map(|a| {
                a.as_primitive_opt::<Float64Type>().ok_or_else(|| {
                    DataFusionError::Plan(format!("{} takes double precision", self.name))
                })
            })
            .collect::<DfResult<Vec<_>>>()?;
        let out: Float64Array = match (self.func, floats.as_slice()) {
            (Func::Sqrt, [x]) => try_unary(*x, |v| sqrt(v).map_err(arrow_error))?,
            (Func::Ln, [x]) => try_unary(*x, |v| log_with(v, f64::ln).map_err(arrow_error))?,
            (Func::Log10 | Func::Log, [x]) => {
                try_unary(*x, |v| log_with(v, f64::log10).map_err(arrow_error))?
            }
            (Func::Log, [b, x]) => try_binary(*b, *x, |b, x| log_base(b, x).map_err(arrow_error))?,
            (Func::Exp, [x]) => try_unary(*x, |v| exp(v).map_err(arrow_error))?,
            (Func::Power, [x, y]) => try_binary(*x, *y, |x, y| power(x, y).map_err(arrow_error))?,
            _ => {
                return Err(DataFusionError::Plan(format!(
                    "{}: wrong number of arguments",
                    self.name
                )))
            }
        };
        let out: ArrayRef = Arc::new(out);
        result(out, all_scalar)
    }
}

/// The functions, under the names SQL calls them by.
pub fn math_functions() -> Vec<ScalarUDF> {
    [
        (Func::Sqrt, "sqrt"),
        (Func::Ln, "ln"),
        (Func::Log10, "log10"),
        (Func::Log, "log"),
        (Func::Exp, "exp"),
        (Func::Power, "power"),
        (Func::Power, "pow"),
    ]
    .into_iter()
    .map(|(f, n)| ScalarUDF::new_from_impl(MathUdf::new(f, n)))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(r: Result<f64, SqlError>) -> Result<f64, &'static str> {
        r.map_err(|e| e.sqlstate())
    }

    #[test]
    fn domain_errors_are_postgresqls() {
        assert_eq!(state(sqrt(-1.0)), Err("2201F"));
        assert_eq!(state(sqrt(4.0)), Ok(2.0));
        assert!(sqrt(f64::NAN).is_ok_and(f64::is_nan));
        assert_eq!(state(log_with(0.0, f64::ln)), Err("2201E"));
        assert_eq!(state(log_with(-1.0, f64::log10)), Err("2201E"));
        assert_eq!(state(log_with(f64::INFINITY, f64::ln)), Ok(f64::INFINITY));
        assert_eq!(state(log_base(1.0, 5.0)), Err("22012"));
        assert_eq!(state(log_base(2.0, 8.0)), Ok(3.0));
        assert_eq!(state(power(0.0, -1.0)), Err("2201F"));
        assert_eq!(state(power(-8.0, 1.0 / 3.0)), Err("2201F"));
        assert_eq!(state(power(-2.0, 3.0)), Ok(-8.0));
    }

    #[test]
    fn range_errors_and_non_finite_operands() {
        assert_eq!(state(exp(1000.0)), Err("22003"));
        assert_eq!(state(exp(-1000.0)), Err("22003"));
        assert_eq!(state(exp(f64::NEG_INFINITY)), Ok(0.0));
        assert_eq!(state(power(10.0, 400.0)), Err("22003"));
        assert_eq!(state(power(10.0, -400.0)), Err("22003"));
        assert_eq!(state(power(f64::NAN, 0.0)), Ok(1.0));
        assert_eq!(state(power(1.0, f64::NAN)), Ok(1.0));
        assert_eq!(state(power(0.5, f64::INFINITY)), Ok(0.0));
        assert_eq!(state(power(f64::NEG_INFINITY, 3.0)), Ok(f64::NEG_INFINITY));
        assert_eq!(state(power(0.0, 0.0)), Ok(1.0));
    }
}
