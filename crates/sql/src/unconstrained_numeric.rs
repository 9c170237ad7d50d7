//! Values written into an unconstrained `numeric` column
//! ([`ColumnType::Numeric`], stored as `Decimal128(38, 10)`): kept exactly
//! or refused (22003), never rounded (docs/decisions/0003). Text goes
//! through `pgtypes::parse_text_in` (which checks the same rule); this
//! module converts the array sources INSERT and UPDATE produce: decimals
//! of any scale, and floats, which first become numeric as PostgreSQL's
//! `float8_numeric` / `float4_numeric` make them (15 or 6 significant
//! digits, so `0.1::float8` is `0.1`).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Array};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Float32Type, Float64Type};
use eddy_common::NUMERIC_STORAGE;

use crate::error::{Result, SqlError};
use crate::pgtypes::{format_decimal, inexact_numeric, parse_decimal_exact};

/// `a` as the stored array of an unconstrained numeric column, for the
/// decimal and float sources; `None` for other sources (integers, which
/// are exact, and text, parsed value by value by the caller).
pub(crate) fn to_stored(a: &ArrayRef) -> Result<Option<ArrayRef>> {
    let (precision, scale) = NUMERIC_STORAGE;
    let values: Vec<Option<i128>> = match a.data_type() {
        DataType::Decimal128(_, s) if *s > scale => {
            let drop = u32::try_from(i16::from(*s) - i16::from(scale))
                .map_err(|_| SqlError::Internal("a decimal scale out of range".into()))?;
            let unit = 10i128
                .checked_pow(drop)
                .ok_or_else(|| SqlError::Internal(format!("a decimal of scale {s} has no unit")))?;
            a.as_primitive::<Decimal128Type>()
                .iter()
                .map(|v| {
                    v.map(|v| {
                        if v % unit == 0 {
                            Ok(v / unit)
                        } else {
                            Err(inexact_numeric(&format_decimal(v, *s)))
                        }
                    })
                    .transpose()
                })
                .collect::<Result<_>>()?
        }
        DataType::Float64 => a
            .as_primitive::<Float64Type>()
            .iter()
            .map(|v| v.map(|f| from_float(f, 15)).transpose())
            .collect::<Result<_>>()?,
        DataType::Float32 => a
            .as_primitive::<Float32Type>()
            .iter()
            .map(|v| v.map(|f| from_float(f64::from(f), 6)).transpose())
            .collect::<Result<_>>()?,
        _ => return Ok(None),
    };
    let out = Decimal128Array::from(values)
        .with_precision_and_scale(precision, scale)
        .map_err(|e| SqlError::Internal(format!("building a numeric column: {e}")))?;
    Ok(Some(Arc::new(out)))
}

/// A float as PostgreSQL's float-to-numeric cast reads it: its text with
/// `digits` significant digits (15 for float8, 6 for float4), kept
/// exactly or refused.
pub(crate) fn from_float(f: f64, digits: usize) -> Result<i128> {
    if !f.is_finite() {
        return Err(SqlError::FeatureNotSupported(format!(
            "cannot convert {f} to type numeric: Eddy has no NaN or infinite numeric"
        )));
    }
    let text = format!("{:.*e}", digits.saturating_sub(1), f);
    let (precision, scale) = NUMERIC_STORAGE;
    match parse_decimal_exact(&text, precision, scale) {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(SqlError::NumericOutOfRange(
            "numeric field overflow: an unconstrained numeric column holds at most 28 digits \
             before the decimal point"
                .into(),
        )),
        Err(_) => Err(inexact_numeric(&shortest(f, &text))),
    }
}

/// The float as a person reads it (`0.000000000001`, not
/// `1.00000000000000e-12`), unless that is longer.
fn shortest(f: f64, fallback: &str) -> String {
    let s = f.to_string();
    if s.len() <= fallback.len() {
        s
    } else {
        fallback.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Float64Array, Int32Array};

    fn stored(a: ArrayRef) -> Result<Vec<Option<i128>>> {
        let out = to_stored(&a)?.expect("converted");
        Ok(out.as_primitive::<Decimal128Type>().iter().collect())
    }

    #[test]
    fn decimals_and_floats_are_kept_exactly_or_refused() {
        // scale 15, digits past the 10th all zero: kept
        let exact = Decimal128Array::from(vec![Some(1_500_000_000_000_000), None])
            .with_precision_and_scale(20, 15)
            .unwrap();
        assert_eq!(
            stored(Arc::new(exact)).unwrap(),
            vec![Some(15_000_000_000), None]
        );
        // 0.123456789012345: refused, not rounded
        let inexact = Decimal128Array::from(vec![Some(123_456_789_012_345)])
            .with_precision_and_scale(15, 15)
            .unwrap();
        let e = stored(Arc::new(inexact)).unwrap_err();
        assert_eq!(e.sqlstate(), "22003");
        assert!(e.to_string().contains("0.123456789012345"), "{e}");
        // 0.1 as a float8 is 0.1 (15 digits), 1e-12 has 12 fraction digits
        assert_eq!(
            stored(Arc::new(Float64Array::from(vec![0.1, 2.5]))).unwrap(),
            vec![Some(1_000_000_000), Some(25_000_000_000)]
        );
        let e = stored(Arc::new(Float64Array::from(vec![1e-12]))).unwrap_err();
        assert!(e.to_string().contains("0.000000000001"), "{e}");
        assert_eq!(
            stored(Arc::new(Float64Array::from(vec![f64::NAN])))
                .unwrap_err()
                .sqlstate(),
            "0A000"
        );
        assert_eq!(
            stored(Arc::new(Float64Array::from(vec![1e30])))
                .unwrap_err()
                .sqlstate(),
            "22003"
        );
        // integers are left to the plain cast
        assert!(
            to_stored(&(Arc::new(Int32Array::from(vec![1])) as ArrayRef))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn exact_text_parsing_tells_rounding_from_exact() {
        assert_eq!(
            parse_decimal_exact("1.50", 38, 10),
            Ok(Some(15_000_000_000))
        );
        assert_eq!(
            parse_decimal_exact("1200e-2", 38, 10),
            Ok(Some(120_000_000_000))
        );
        assert_eq!(parse_decimal_exact("0.00000000010", 38, 10), Ok(Some(1)));
        assert!(parse_decimal_exact("0.00000000001", 38, 10).is_err());
        assert!(parse_decimal_exact("1e-30", 38, 10).is_err());
        assert_eq!(parse_decimal_exact("0e-30", 38, 10), Ok(Some(0)));
        assert_eq!(parse_decimal_exact("1e40", 38, 10), Ok(None));
        assert_eq!(parse_decimal_exact("x", 38, 10), Ok(None));
    }
}
