//! Reading the arguments of a scalar function row by row, for Eddy's own
//! functions that act per row (sequences, advisory locks), and giving back
//! a result computed as an array.

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::ColumnarValue;

/// Argument `i` in row `row` (`None` when there is no such argument).
pub fn scalar_at(args: &[ColumnarValue], i: usize, row: usize) -> DfResult<Option<ScalarValue>> {
    match args.get(i) {
        None => Ok(None),
        Some(ColumnarValue::Scalar(s)) => Ok(Some(s.clone())),
        Some(ColumnarValue::Array(arr)) => Ok(Some(ScalarValue::try_from_array(arr, row)?)),
    }
}

/// Argument `i` in row `row` as a bigint (`None` for NULL or none).
pub fn int_at(args: &[ColumnarValue], i: usize, row: usize) -> DfResult<Option<i64>> {
    match scalar_at(args, i, row)? {
        None => Ok(None),
        Some(v) if v.is_null() => Ok(None),
        Some(v) => match v.cast_to(&DataType::Int64)? {
            ScalarValue::Int64(x) => Ok(x),
            _ => Ok(None),
        },
    }
}

/// Argument `i` in row `row` as text (`None` for NULL or none).
pub fn text_at(args: &[ColumnarValue], i: usize, row: usize) -> DfResult<Option<String>> {
    Ok(match scalar_at(args, i, row)? {
        None => None,
        Some(ScalarValue::Utf8(s) | ScalarValue::Utf8View(s) | ScalarValue::LargeUtf8(s)) => s,
        Some(v) if v.is_null() => None,
        Some(v) => Some(v.to_string()),
    })
}

/// Whether every argument is a scalar (then the result must be one).
pub fn all_scalar(args: &[ColumnarValue]) -> bool {
    args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)))
}

/// `out` as the function's result: a scalar when every argument was one
/// (DataFusion then expects a scalar back), else the array.
pub fn scalar_if(all_scalar: bool, out: ArrayRef) -> DfResult<ColumnarValue> {
    if all_scalar && out.len() == 1 {
        Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
    } else {
        Ok(ColumnarValue::Array(out))
    }
}
