//! `sum` of real and double precision values as PostgreSQL's `float4pl` /
//! `float8pl` add them: a sum of finite values that overflows is an error
//! (22003, "value out of range: overflow"), not Infinity; a sum with an
//! infinite input is that infinity (or NaN), as IEEE says.
//!
//! DataFusion's `sum` of floats gives Infinity on overflow. The analyzer
//! rule of `crate::result_types` replaces `sum` of a float argument by
//! [`FloatSum`] (aggregate and window uses alike).
//!
//! Invariants: each addition is checked as PostgreSQL checks one (the
//! result is infinite while neither operand is), on the row path and when
//! partial sums are combined; a real sum is rounded to real after every
//! addition, so it overflows where PostgreSQL's does; no rows give NULL.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float32Type, Float64Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, TypeSignature, Volatility,
};

use crate::error::SqlError;

/// The name the analyzer gives the replacement.
pub const FLOAT_SUM: &str = "eddy_float_sum";

/// The aggregate (module doc).
pub fn float_sum_udaf() -> AggregateUDF {
    AggregateUDF::from(FloatSum {
        signature: Signature::one_of(
            vec![
                TypeSignature::Exact(vec![DataType::Float64]),
                TypeSignature::Exact(vec![DataType::Float32]),
            ],
            Volatility::Immutable,
        ),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FloatSum {
    signature: Signature,
}

impl AggregateUDFImpl for FloatSum {
    fn name(&self) -> &str {
        FLOAT_SUM
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        Ok(match args.first() {
            Some(DataType::Float32) => DataType::Float32,
            _ => DataType::Float64,
        })
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(FloatSumAccumulator {
            real: acc_args.return_field.data_type() == &DataType::Float32,
            sum: None,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format_state_name(args.name, "sum"),
            DataType::Float64,
            true,
        ))])
    }
}

#[derive(Debug)]
struct FloatSumAccumulator {
    /// Rounded to real after every addition.
    real: bool,
    /// None until a non-NULL value is seen.
    sum: Option<f64>,
}

fn overflow() -> DataFusionError {
    DataFusionError::External(Box::new(SqlError::NumericOutOfRange(
        "value out of range: overflow".into(),
    )))
}

impl FloatSumAccumulator {
    /// One checked addition (`float4pl` / `float8pl`).
    fn add(&mut self, v: f64) -> DfResult<()> {
        let Some(acc) = self.sum else {
            self.sum = Some(v);
            return Ok(());
        };
        let result = if self.real {
            // (both are reals already: the sum is kept rounded)
            #[allow(clippy::cast_possible_truncation)]
            let r = f64::from(acc as f32 + v as f32);
            r
        } else {
            acc + v
        };
        if result.is_infinite() && !acc.is_infinite() && !v.is_infinite() {
            return Err(overflow());
        }
        self.sum = Some(result);
        Ok(())
    }

    fn add_array(&mut self, values: &ArrayRef) -> DfResult<()> {
        match values.data_type() {
            DataType::Float64 => {
                for v in values.as_primitive::<Float64Type>().iter().flatten() {
                    self.add(v)?;
                }
            }
            DataType::Float32 => {
                for v in values.as_primitive::<Float32Type>().iter().flatten() {
                    self.add(f64::from(v))?;
                }
            }
            other => return Err(DataFusionError::Internal(format!("{FLOAT_SUM} of {other}"))),
        }
        Ok(())
    }
}

impl Accumulator for FloatSumAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        match values.first() {
            Some(v) => self.add_array(v),
            None => Ok(()),
        }
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        // partial sums combine as two operands of one addition
        match states.first() {
            Some(v) => self.add_array(v),
            None => Ok(()),
        }
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Float64(self.sum)])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        #[allow(clippy::cast_possible_truncation)]
        Ok(if self.real {
            ScalarValue::Float32(self.sum.map(|s| s as f32))
        } else {
            ScalarValue::Float64(self.sum)
        })
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Float32Array, Float64Array};

    fn sum_of(values: &[Option<f64>]) -> DfResult<ScalarValue> {
        let mut acc = FloatSumAccumulator {
            real: false,
            sum: None,
        };
        let a: ArrayRef = Arc::new(Float64Array::from(values.to_vec()));
        acc.update_batch(&[a])?;
        acc.evaluate()
    }

    #[test]
    fn finite_values_that_overflow_are_an_error() {
        let e = sum_of(&[Some(1e308), Some(1e308)]).unwrap_err();
        assert!(matches!(
            e,
            DataFusionError::External(ref x) if x.downcast_ref::<SqlError>().is_some_and(|s| s.sqlstate() == "22003")
        ));
        // PostgreSQL fails at the addition that overflows, whatever follows
        assert!(sum_of(&[Some(1e308), Some(1e308), Some(-1e308)]).is_err());
    }

    #[test]
    fn infinities_nulls_and_no_rows_are_as_in_postgresql() {
        assert_eq!(
            sum_of(&[Some(f64::INFINITY), Some(1e308)]).unwrap(),
            ScalarValue::Float64(Some(f64::INFINITY))
        );
        assert_eq!(
            sum_of(&[None, Some(1.5), None, Some(2.0)]).unwrap(),
            ScalarValue::Float64(Some(3.5))
        );
        assert_eq!(sum_of(&[None]).unwrap(), ScalarValue::Float64(None));
        let r = sum_of(&[Some(f64::INFINITY), Some(f64::NEG_INFINITY)]).unwrap();
        assert!(matches!(r, ScalarValue::Float64(Some(x)) if x.is_nan()));
    }

    #[test]
    fn a_real_sum_overflows_at_reals_bound_and_partial_sums_are_checked() {
        let mut acc = FloatSumAccumulator {
            real: true,
            sum: None,
        };
        let a: ArrayRef = Arc::new(Float32Array::from(vec![3e38_f32, 3e38]));
        assert!(acc.update_batch(&[a]).is_err());
        let mut acc = FloatSumAccumulator {
            real: false,
            sum: Some(1e308),
        };
        let partial: ArrayRef = Arc::new(Float64Array::from(vec![Some(1e308)]));
        assert!(acc.merge_batch(&[partial]).is_err());
    }
}
