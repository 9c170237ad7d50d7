//! Casts of real, double precision and numeric to smallint, integer and
//! bigint as PostgreSQL computes them: a float is rounded to the nearest
//! integer with ties to even (`dtoi4`'s `rint`), a numeric with ties away
//! from zero (`numeric_int4`), and a result outside the target type is
//! 22003 ("integer out of range"), as is NaN or an infinity.
//!
//! Arrow's cast truncates toward zero (`CAST(2.7 AS integer)` was 2,
//! `INSERT INTO t (int_col) VALUES (2.5)` stored 2; PostgreSQL stores 3)
//! and, for numerics, kept a value the rounding takes out of range
//! (`2147483647.5::numeric::int` was 2147483647). The analyzer rule
//! ([`super::CheckedArithmetic`]) plans every such cast, explicit or added
//! by coercion, as `eddy_to_int2`, `eddy_to_int4` or `eddy_to_int8`; rows
//! written into integer columns (INSERT, UPDATE, COPY) are converted by
//! the same [`to_integers`] (`session::cast_column`).

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, AsArray, Int16Array, Int32Array, Int64Array};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Float32Type, Float64Type};
use datafusion::common::DataFusionError;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::float::result;
use crate::error::SqlError;
use crate::pgtypes;
use eddy_common::ColumnType;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Target {
    Int2,
    Int4,
    Int8,
}

impl Target {
    fn out_of_range(self) -> SqlError {
        pgtypes::integer_out_of_range(match self {
            Target::Int2 => ColumnType::SmallInt,
            Target::Int4 => ColumnType::Int,
            Target::Int8 => ColumnType::BigInt,
        })
    }

    fn data_type(self) -> DataType {
        match self {
            Target::Int2 => DataType::Int16,
            Target::Int4 => DataType::Int32,
            Target::Int8 => DataType::Int64,
        }
    }
}

static TO_INT2: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(ToInteger::new(Target::Int2))));
static TO_INT4: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(ToInteger::new(Target::Int4))));
static TO_INT8: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(ToInteger::new(Target::Int8))));

/// The casts of this module.
pub(super) fn all() -> Vec<Arc<ScalarUDF>> {
    [&*TO_INT2, &*TO_INT4, &*TO_INT8]
        .into_iter()
        .map(Arc::clone)
        .collect()
}

/// The checked cast from `from` to `to`, if PostgreSQL's rounding applies.
pub(super) fn cast_udf(from: &DataType, to: &DataType) -> Option<Arc<ScalarUDF>> {
    if !matches!(
        from,
        DataType::Float32 | DataType::Float64 | DataType::Decimal128(..)
    ) {
        return None;
    }
    let udf = match to {
        DataType::Int16 => &*TO_INT2,
        DataType::Int32 => &*TO_INT4,
        DataType::Int64 => &*TO_INT8,
        _ => return None,
    };
    Some(Arc::clone(udf))
}

/// A double (or a real, widened exactly) as a bigint (ties to even).
fn float_to_i64(x: f64, target: Target) -> Result<i64, SqlError> {
    pgtypes::float_to_bigint(x).ok_or_else(|| target.out_of_range())
}

/// A decimal of `scale` as a bigint: ties away from zero.
fn decimal_to_i64(v: i128, scale: i8, target: Target) -> Result<i64, SqlError> {
    let rounded = if scale > 0 {
        let unit = 10i128
            .checked_pow(u32::from(scale.unsigned_abs()))
            .ok_or_else(|| target.out_of_range())?;
        let quotient = v.checked_div(unit).ok_or_else(|| target.out_of_range())?;
        let remainder = v.checked_rem(unit).ok_or_else(|| target.out_of_range())?;
        // |remainder| < unit <= 10^38, so doubling it cannot overflow i128
        let twice = remainder.unsigned_abs().checked_mul(2);
        match twice {
            Some(t) if t >= unit.unsigned_abs() => quotient
                .checked_add(v.signum())
                .ok_or_else(|| target.out_of_range())?,
            _ => quotient,
        }
    } else {
        let unit = 10i128
            .checked_pow(u32::from(scale.unsigned_abs()))
            .ok_or_else(|| target.out_of_range())?;
        v.checked_mul(unit).ok_or_else(|| target.out_of_range())?
    };
    i64::try_from(rounded).map_err(|_| target.out_of_range())
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ToInteger {
    target: Target,
    signature: Signature,
}

impl ToInteger {
    fn new(target: Target) -> ToInteger {
        ToInteger {
            target,
            // the rule plans it only over a real, double or numeric argument
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ToInteger {
    fn name(&self) -> &str {
        match self.target {
            Target::Int2 => "eddy_to_int2",
            Target::Int4 => "eddy_to_int4",
            Target::Int8 => "eddy_to_int8",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(self.target.data_type())
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
        let out = to_integers(input, &self.target.data_type())
            .map_err(|e| DataFusionError::External(Box::new(e)))?
            .ok_or_else(|| {
                DataFusionError::Plan(format!(
                    "{} takes real, double precision or numeric, not {}",
                    self.name(),
                    input.data_type()
                ))
            })?;
        result(out, scalar)
    }
}

/// `input` (real, double precision or numeric) cast to integer type `to`
/// with PostgreSQL's rounding and range (module doc); `None` when this is
/// not such a cast. Also used where rows are written into integer columns
/// (`session::cast_column`: INSERT, UPDATE, COPY).
pub fn to_integers(input: &ArrayRef, to: &DataType) -> Result<Option<ArrayRef>, SqlError> {
    let target = match to {
        DataType::Int16 => Target::Int2,
        DataType::Int32 => Target::Int4,
        DataType::Int64 => Target::Int8,
        _ => return Ok(None),
    };
    let wide: Int64Array = match input.data_type() {
        DataType::Float64 => input
            .as_primitive::<Float64Type>()
            .iter()
            .map(|x| x.map(|x| float_to_i64(x, target)).transpose())
            .collect::<Result<_, _>>()?,
        DataType::Float32 => input
            .as_primitive::<Float32Type>()
            .iter()
            .map(|x| x.map(|x| float_to_i64(f64::from(x), target)).transpose())
            .collect::<Result<_, _>>()?,
        DataType::Decimal128(_, scale) => input
            .as_primitive::<Decimal128Type>()
            .iter()
            .map(|v| v.map(|v| decimal_to_i64(v, *scale, target)).transpose())
            .collect::<Result<_, _>>()?,
        _ => return Ok(None),
    };
    Ok(Some(match target {
        Target::Int8 => Arc::new(wide),
        Target::Int4 => {
            let out: Int32Array = wide
                .iter()
                .map(|x| {
                    x.map(|x| i32::try_from(x).map_err(|_| target.out_of_range()))
                        .transpose()
                })
                .collect::<Result<_, _>>()?;
            Arc::new(out)
        }
        Target::Int2 => {
            let out: Int16Array = wide
                .iter()
                .map(|x| {
                    x.map(|x| i16::try_from(x).map_err(|_| target.out_of_range()))
                        .transpose()
                })
                .collect::<Result<_, _>>()?;
            Arc::new(out)
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_round_ties_to_even_and_check_the_range() {
        for (x, r) in [
            (2.5, 2),
            (3.5, 4),
            (-2.5, -2),
            (2.7, 3),
            (-2.7, -3),
            (0.5, 0),
        ] {
            assert_eq!(float_to_i64(x, Target::Int8).unwrap(), r, "{x}");
        }
        for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 9.3e18, -9.3e18] {
            let e = float_to_i64(x, Target::Int8).unwrap_err();
            assert_eq!(e.sqlstate(), "22003", "{x}");
        }
        assert_eq!(
            float_to_i64(-9_223_372_036_854_775_808.0, Target::Int8).unwrap(),
            i64::MIN
        );
    }

    #[test]
    fn decimals_round_ties_away_from_zero() {
        // (unscaled value, scale, expected)
        for (v, s, r) in [
            (25, 1, 3),
            (-25, 1, -3),
            (24, 1, 2),
            (2_499, 3, 2),
            (2_500, 3, 3),
            (-2_500, 3, -3),
            (7, 0, 7),
            (7, -2, 700),
        ] {
            assert_eq!(decimal_to_i64(v, s, Target::Int4).unwrap(), r, "{v}e-{s}");
        }
        let e = decimal_to_i64(i128::MAX, 0, Target::Int8).unwrap_err();
        assert_eq!(e.sqlstate(), "22003");
        let e = decimal_to_i64(i128::MAX, -5, Target::Int8).unwrap_err();
        assert_eq!(e.sqlstate(), "22003");
        assert_eq!(
            decimal_to_i64(i128::MAX, 38, Target::Int8).unwrap(),
            2,
            "1.7e38 at scale 38 is 1.70..., which rounds to 2"
        );
    }
}
