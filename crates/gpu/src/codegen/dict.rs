//! String predicates on dictionary-encoded columns become code sets.
//!
//! Any boolean expression whose only column is one string dictionary column
//! (`s = 'ASIA'`, `s IN (...)`, `s LIKE 'MFGR#12%'`, `s BETWEEN ...`) is
//! evaluated once per dictionary entry on the host, with DataFusion itself,
//! so its semantics are exactly the CPU's. The device then only tests the
//! row's code against the resulting set: `code == 3`, a range of codes when
//! the dictionary is sorted, or a bitmap.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, BooleanArray, DictionaryArray, Int32Array, RecordBatch,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Int32Type, Schema};
use datafusion::physical_expr::expressions::{
    BinaryExpr, CaseExpr, CastExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr,
    Literal, NotExpr,
};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{GpuError, Result};

/// The value of a dictionary predicate for every code and for a NULL row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DictSet {
    /// `truth[code]`: the predicate is TRUE for that dictionary entry.
    pub truth: Vec<bool>,
    /// `null[code]`: the predicate is NULL for that dictionary entry.
    pub null: Vec<bool>,
    /// The predicate's value for a row whose code is NULL: `Some(b)`, or
    /// `None` when it is NULL.
    pub null_row: Option<bool>,
}

impl DictSet {
    /// Codes for which the predicate is TRUE.
    pub fn true_codes(&self) -> Vec<u32> {
        codes(&self.truth)
    }
    /// Codes for which the predicate is NULL.
    pub fn null_codes(&self) -> Vec<u32> {
        codes(&self.null)
    }
    /// Bit-packed `truth` (32 codes a word), the per-batch kernel parameter.
    pub fn truth_words(&self) -> Vec<u32> {
        pack(&self.truth)
    }
    /// Bit-packed `null`.
    pub fn null_words(&self) -> Vec<u32> {
        pack(&self.null)
    }
}

fn codes(bits: &[bool]) -> Vec<u32> {
    bits.iter()
        .enumerate()
        .filter(|(_, b)| **b)
        .map(|(i, _)| i as u32)
        .collect()
}

fn pack(bits: &[bool]) -> Vec<u32> {
    let mut w = vec![0u32; bits.len().div_ceil(32).max(1)];
    for (i, b) in bits.iter().enumerate() {
        if *b {
            w[i / 32] |= 1 << (i % 32);
        }
    }
    w
}

/// If `expr` is a boolean predicate over exactly one dictionary-encoded
/// string column (and nothing but literals), the index of that column.
pub fn single_dict_column(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<usize> {
    if !matches!(expr.data_type(schema), Ok(DataType::Boolean)) {
        return None;
    }
    let mut cols = HashSet::new();
    if !collect_columns(expr, &mut cols) || cols.len() != 1 {
        return None;
    }
    let idx = cols.into_iter().next()?;
    match schema.fields().get(idx).map(|f| f.data_type()) {
        Some(DataType::Dictionary(_, v))
            if matches!(
                v.as_ref(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) =>
        {
            Some(idx)
        }
        _ => None,
    }
}

/// Collects column indices; false if the tree holds a node that is not safe
/// to evaluate on a dictionary instead of on rows (anything non-deterministic
/// or not in this allow-list).
fn collect_columns(expr: &Arc<dyn PhysicalExpr>, out: &mut HashSet<usize>) -> bool {
    if let Some(c) = expr.downcast_ref::<Column>() {
        out.insert(c.index());
        return true;
    }
    let allowed = expr.downcast_ref::<Literal>().is_some()
        || expr.downcast_ref::<BinaryExpr>().is_some()
        || expr.downcast_ref::<NotExpr>().is_some()
        || expr.downcast_ref::<IsNullExpr>().is_some()
        || expr.downcast_ref::<IsNotNullExpr>().is_some()
        || expr.downcast_ref::<InListExpr>().is_some()
        || expr.downcast_ref::<LikeExpr>().is_some()
        || expr.downcast_ref::<CastExpr>().is_some()
        || expr.downcast_ref::<CaseExpr>().is_some();
    allowed && expr.children().into_iter().all(|c| collect_columns(c, out))
}

/// Evaluates `expr` (which references only column `col` of `schema`) on
/// every entry of the dictionary `values`, and on a NULL row.
pub fn evaluate_on_dictionary(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
    col: usize,
    values: &ArrayRef,
) -> Result<DictSet> {
    let n = values.len();
    let keys: Int32Array = (0..n as i32)
        .map(Some)
        .chain(std::iter::once(None))
        .collect();
    let dict: ArrayRef = Arc::new(DictionaryArray::<Int32Type>::try_new(
        keys,
        Arc::clone(values),
    )?);
    let field = schema
        .fields()
        .get(col)
        .ok_or_else(|| GpuError::Internal(format!("dictionary column {col} out of range")))?;
    let dict = if dict.data_type() == field.data_type() {
        dict
    } else {
        cast(&dict, field.data_type())?
    };
    // Every field nullable: the other columns are all-NULL placeholders the
    // predicate never reads.
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i == col {
                Arc::clone(&dict)
            } else {
                new_null_array(f.data_type(), n + 1)
            }
        })
        .collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
    let out = expr.evaluate(&batch)?.into_array(n + 1)?;
    let out = out
        .as_any()
        .downcast_ref::<BooleanArray>()
        .ok_or_else(|| GpuError::Internal("dictionary predicate did not return booleans".into()))?;
    let mut truth = Vec::with_capacity(n);
    let mut null = Vec::with_capacity(n);
    for i in 0..n {
        null.push(out.is_null(i));
        truth.push(out.is_valid(i) && out.value(i));
    }
    let null_row = if out.is_null(n) {
        None
    } else {
        Some(out.value(n))
    };
    Ok(DictSet {
        truth,
        null,
        null_row,
    })
}

/// C expression testing code variable `var` against the code set `codes`
/// (sorted), out of a dictionary of `n` entries. Returns `None` when the set
/// is large and scattered: the caller then uses a bitmap.
pub fn membership(var: &str, codes: &[u32], n: usize) -> Option<String> {
    if codes.is_empty() {
        return Some("false".into());
    }
    if codes.len() == n {
        return Some("true".into());
    }
    let (lo, hi) = (codes[0], codes[codes.len() - 1]);
    if codes.len() == 1 {
        return Some(format!("({var} == {lo})"));
    }
    if (hi - lo) as usize + 1 == codes.len() {
        return Some(format!("({var} >= {lo} && {var} <= {hi})"));
    }
    if codes.len() <= 8 {
        let parts: Vec<String> = codes.iter().map(|c| format!("{var} == {c}")).collect();
        return Some(format!("({})", parts.join(" || ")));
    }
    None
}
