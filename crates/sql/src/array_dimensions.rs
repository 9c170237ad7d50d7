//! The shape of an array value and the functions that report it:
//! `array_length`, `cardinality`, `array_upper`, `array_lower`,
//! `array_ndims` and `array_dims`, with PostgreSQL's answers.
//!
//! Array columns have one dimension (`crate::array_type`), but the ARRAY
//! constructor nests (`ARRAY[[1,2],[3,4]]` is a list of lists), and
//! PostgreSQL reads that as one two-dimensional array: rectangular, every
//! sub-array of one level the same length, lower bounds 1. [`array_shape`]
//! gives that shape or PostgreSQL's 2202E for a ragged value (PostgreSQL
//! refuses to build one), and the text and binary writers print a nested
//! value in PostgreSQL's multi-dimensional form through it.
//!
//! DataFusion's own functions answered for the outer list only
//! (`cardinality(ARRAY[[1,2],[3,4]])` was 2, PostgreSQL 4), unsigned, 0
//! for an empty array, and `array_dims` as a list; these replace them.

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Builder, StringBuilder};
use datafusion::arrow::compute::{cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::array_type::list_items;
use crate::error::SqlError;

/// Whether an Arrow type is a list (an array value).
pub fn is_list(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)
    )
}

fn ragged() -> SqlError {
    SqlError::ArraySubscript(
        "multidimensional arrays must have array expressions with matching dimensions".into(),
    )
}

/// The dimensions of one array value whose elements are `items`: one
/// length per level, outermost first. An array with no elements at some
/// level is empty (`[]`: no dimensions, as PostgreSQL's `'{}'`).
pub fn array_shape(items: &dyn Array) -> Result<Vec<usize>, SqlError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    if !is_list(items.data_type()) {
        return Ok(vec![items.len()]);
    }
    let mut inner: Option<Vec<usize>> = None;
    for i in 0..items.len() {
        if items.is_null(i) {
            return Err(ragged());
        }
        let sub = list_items(items, i).ok_or_else(ragged)?;
        let shape = array_shape(sub.as_ref())?;
        match &inner {
            Some(s) if s != &shape => return Err(ragged()),
            Some(_) => {}
            None => inner = Some(shape),
        }
    }
    let inner = inner.unwrap_or_default();
    if inner.is_empty() {
        // sub-arrays without elements: the whole array is empty
        return Ok(Vec::new());
    }
    let mut shape = Vec::with_capacity(inner.len().saturating_add(1));
    shape.push(items.len());
    shape.extend(inner);
    Ok(shape)
}

/// The Arrow type of the elements at the innermost level of a list type.
pub fn leaf_type(dt: &DataType) -> &DataType {
    match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            leaf_type(f.data_type())
        }
        other => other,
    }
}

/// Calls `each(array, row)` for the innermost elements of a rectangular
/// nested value, in PostgreSQL's (row-major) order.
pub fn for_each_leaf(
    items: &dyn Array,
    each: &mut dyn FnMut(&dyn Array, usize) -> Result<(), SqlError>,
) -> Result<(), SqlError> {
    if !is_list(items.data_type()) {
        for i in 0..items.len() {
            each(items, i)?;
        }
        return Ok(());
    }
    for i in 0..items.len() {
        let sub = list_items(items, i).ok_or_else(ragged)?;
        for_each_leaf(sub.as_ref(), each)?;
    }
    Ok(())
}

/// Which shape function a [`ShapeFunction`] is.
#[derive(Debug, PartialEq, Eq, Hash, Clone, Copy)]
enum Report {
    /// `array_length(a, dim)`
    Length,
    /// `cardinality(a)`: the number of elements, 0 when empty
    Cardinality,
    /// `array_upper(a, dim)`: the length, as every lower bound is 1
    Upper,
    /// `array_lower(a, dim)`: 1
    Lower,
    /// `array_ndims(a)`
    NDims,
    /// `array_dims(a)`: text such as `[1:2][1:3]`
    Dims,
}

/// One of the shape functions (module doc): integer results, NULL for an
/// empty array or a dimension the array lacks (`cardinality`: 0).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ShapeFunction {
    signature: Signature,
    report: Report,
}

fn int(n: usize) -> DfResult<i32> {
    i32::try_from(n).map_err(|_| {
        DataFusionError::from(SqlError::ProgramLimitExceeded("array too large".into()))
    })
}

impl ScalarUDFImpl for ShapeFunction {
    fn name(&self) -> &str {
        match self.report {
            Report::Length => "array_length",
            Report::Cardinality => "cardinality",
            Report::Upper => "array_upper",
            Report::Lower => "array_lower",
            Report::NDims => "array_ndims",
            Report::Dims => "array_dims",
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args.first() {
            Some(t) if is_list(t) || t == &DataType::Null => Ok(match self.report {
                Report::Dims => DataType::Utf8,
                _ => DataType::Int32,
            }),
            Some(other) => Err(DataFusionError::from(SqlError::UndefinedOperator(format!(
                "function {}({other}) does not exist",
                self.name()
            )))),
            None => Err(DataFusionError::Plan(format!(
                "{} needs an array",
                self.name()
            ))),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = crate::udf_args::all_scalar(&args.args);
        let n = args.number_rows;
        let arrays = args
            .args
            .iter()
            .map(|a| a.to_array(n))
            .collect::<DfResult<Vec<_>>>()?;
        let Some(list) = arrays.first() else {
            return Err(DataFusionError::Plan(format!(
                "{} needs an array",
                self.name()
            )));
        };
        let dims = match arrays.get(1) {
            Some(d) => Some(cast_with_options(
                d,
                &DataType::Int64,
                &CastOptions::default(),
            )?),
            None => None,
        };
        let mut ints = Int32Builder::with_capacity(list.len());
        let mut texts = StringBuilder::new();
        for row in 0..list.len() {
            let shape = match (list.is_null(row), list_items(list.as_ref(), row)) {
                (false, Some(items)) => {
                    Some(array_shape(items.as_ref()).map_err(DataFusionError::from)?)
                }
                _ => None,
            };
            // the 1-based dimension asked for, when it exists
            let level: Option<usize> = match &dims {
                None => None,
                Some(d) => {
                    let d = d.as_primitive::<Int64Type>();
                    if d.is_null(row) {
                        None
                    } else {
                        usize::try_from(d.value(row)).ok().filter(|&l| l >= 1)
                    }
                }
            };
            let at_level =
                |shape: &[usize]| level.and_then(|l| shape.get(l.checked_sub(1)?).copied());
            match (self.report, shape) {
                (Report::Dims, Some(s)) if !s.is_empty() => {
                    let text: String = s.iter().map(|d| format!("[1:{d}]")).collect();
                    texts.append_value(text);
                }
                (Report::Dims, _) => texts.append_null(),
                (Report::Cardinality, Some(s)) => {
                    let total = if s.is_empty() {
                        0
                    } else {
                        s.iter()
                            .try_fold(1usize, |acc, d| acc.checked_mul(*d))
                            .ok_or_else(|| {
                                DataFusionError::from(SqlError::ProgramLimitExceeded(
                                    "array too large".into(),
                                ))
                            })?
                    };
                    ints.append_value(int(total)?);
                }
                (Report::NDims, Some(s)) if !s.is_empty() => ints.append_value(int(s.len())?),
                (Report::Length | Report::Upper, Some(s)) => match at_level(&s) {
                    Some(len) => ints.append_value(int(len)?),
                    None => ints.append_null(),
                },
                (Report::Lower, Some(s)) => match at_level(&s) {
                    Some(_) => ints.append_value(1),
                    None => ints.append_null(),
                },
                _ => ints.append_null(),
            }
        }
        let out: ArrayRef = match self.report {
            Report::Dims => Arc::new(texts.finish()),
            _ => Arc::new(ints.finish()),
        };
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

/// The shape functions, registered over DataFusion's of the same names.
pub fn shape_functions() -> Vec<ScalarUDF> {
    [
        (Report::Length, 2),
        (Report::Cardinality, 1),
        (Report::Upper, 2),
        (Report::Lower, 2),
        (Report::NDims, 1),
        (Report::Dims, 1),
    ]
    .into_iter()
    .map(|(report, args)| {
        ScalarUDF::new_from_impl(ShapeFunction {
            signature: Signature::any(args, Volatility::Immutable),
            report,
        })
    })
    .collect()
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int32Array, ListArray};
    use datafusion::arrow::datatypes::Int32Type;

    fn nested(rows: Vec<Option<Vec<Option<i32>>>>) -> ListArray {
        ListArray::from_iter_primitive::<Int32Type, _, _>(rows)
    }

    #[test]
    fn shapes_of_flat_nested_empty_and_ragged_values() {
        let flat = Int32Array::from(vec![1, 2, 3]);
        assert_eq!(array_shape(&flat).unwrap(), vec![3]);
        let square = nested(vec![
            Some(vec![Some(1), Some(2)]),
            Some(vec![Some(3), None]),
        ]);
        assert_eq!(array_shape(&square).unwrap(), vec![2, 2]);
        let empty_inner = nested(vec![Some(vec![]), Some(vec![])]);
        assert_eq!(array_shape(&empty_inner).unwrap(), Vec::<usize>::new());
        let ragged = nested(vec![Some(vec![Some(1)]), Some(vec![Some(2), Some(3)])]);
        assert_eq!(array_shape(&ragged).unwrap_err().sqlstate(), "2202E");
        let null_inner = nested(vec![Some(vec![Some(1)]), None]);
        assert_eq!(array_shape(&null_inner).unwrap_err().sqlstate(), "2202E");
        let mut leaves = Vec::new();
        for_each_leaf(&square, &mut |a, i| {
            leaves.push((!a.is_null(i)).then(|| a.as_primitive::<Int32Type>().value(i)));
            Ok(())
        })
        .unwrap();
        assert_eq!(leaves, vec![Some(1), Some(2), Some(3), None]);
    }
}
