//! One-dimensional array columns (`int4[]`, `text[]`, ...) in SQL and on
//! the wire.
//!
//! An array column is `ColumnType::Array(elem)`, an Arrow `List` of the
//! element's Arrow type (see `eddy_common::ArrayElem`). This file owns:
//! * PostgreSQL's text form: [`parse_array_text`] (`array_in`: braces,
//!   double quotes, backslash escapes, unquoted `NULL`) and
//!   [`write_array_text`] (`array_out`'s quoting);
//! * the binary form of a result cell ([`write_array_binary`],
//!   `array_send`); binary parameters are read by
//!   `pgtypes::binary_array_to_text` and then by [`parse_array_text`];
//! * `x::int4[]` in plans: the AST rewrite turns it into
//!   `eddy_array_in(x, '<type>')`, which reads text by the element's input
//!   rules (Arrow would wrap a string into a one-element list).
//!
//! Columns, literals and parameters have one dimension with lower bound 1:
//! a literal or binary value with more dimensions, or another lower bound,
//! is refused (0A000), never flattened or shifted. The ARRAY constructor
//! nests lists (`ARRAY[[1,2],[3,4]]`); such a value is written in
//! PostgreSQL's multi-dimensional text and binary forms
//! (`crate::array_dimensions` checks it is rectangular).

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::{cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use eddy_common::{ColumnType, Value};

use crate::error::{Result, SqlError};
use crate::pgtypes;

/// The name of the text -> array function (`x::int4[]`).
pub const ARRAY_IN: &str = "eddy_array_in";
/// `eddy_array_out(list)`: an array's PostgreSQL text.
pub const ARRAY_OUT: &str = "eddy_array_out";

/// PostgreSQL's `array_isspace`.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}')
}

/// Reads PostgreSQL's text form of a one-dimensional array whose elements
/// have type `elem`. Malformed text is 22P02 ("malformed array literal");
/// an element that its type does not accept keeps that type's error; more
/// than one dimension or a lower bound other than 1 is 0A000.
pub fn parse_array_text(s: &str, elem: ColumnType) -> Result<Vec<Value>> {
    parse_array_text_in(s, elem, &crate::session_zone::SessionZone::utc())
}

/// [`parse_array_text`] in a session whose TimeZone is `zone`
/// (`pgtypes::parse_text_in`).
pub fn parse_array_text_in(
    s: &str,
    elem: ColumnType,
    zone: &crate::session_zone::SessionZone,
) -> Result<Vec<Value>> {
    let malformed = || SqlError::InvalidText(format!("malformed array literal: \"{s}\""));
    let mut chars = s.trim_start_matches(is_space).chars().peekable();
    // optional dimensions: [1:n]=
    let mut declared_len: Option<i64> = None;
    if chars.peek() == Some(&'[') {
        let mut dims = Vec::new();
        while chars.peek() == Some(&'[') {
            chars.next();
            let mut body = String::new();
            loop {
                match chars.next() {
                    Some(']') => break,
                    Some(c) => body.push(c),
                    None => return Err(malformed()),
                }
            }
            let (lo, hi) = match body.split_once(':') {
                Some((lo, hi)) => (lo.trim(), hi.trim()),
                None => ("1", body.trim()),
            };
            let lo: i64 = lo.parse().map_err(|_| malformed())?;
            let hi: i64 = hi.parse().map_err(|_| malformed())?;
            if hi < lo.saturating_sub(1) {
                return Err(SqlError::InvalidParameter(
                    "upper bound cannot be less than lower bound".into(),
                ));
            }
            dims.push((lo, hi));
        }
        while chars.peek().is_some_and(|c| is_space(*c)) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(malformed());
        }
        if dims.len() > 1 {
            return Err(multidimensional());
        }
        if let Some(&(lo, hi)) = dims.first() {
            if lo != 1 {
                return Err(lower_bound(lo));
            }
            declared_len = Some(hi);
        }
        while chars.peek().is_some_and(|c| is_space(*c)) {
            chars.next();
        }
    }
    if chars.next() != Some('{') {
        return Err(malformed());
    }
    let mut items = Vec::new();
    loop {
        while chars.peek().is_some_and(|c| is_space(*c)) {
            chars.next();
        }
        match chars.peek() {
            Some('}') if items.is_empty() => {
                chars.next();
                break;
            }
            Some('{') => {
                // a sub-array: refused as unsupported only when the whole
                // literal is well-formed braces, else malformed
                return Err(if balanced(s) {
                    multidimensional()
                } else {
                    malformed()
                });
            }
            _ => {}
        }
        let mut buf = String::new();
        // length of `buf` up to its last quoted, escaped or non-space char
        let mut keep = 0usize;
        let mut literal = false;
        let mut in_quotes = false;
        let end = loop {
            let Some(c) = chars.next() else {
                return Err(malformed());
            };
            if in_quotes {
                match c {
                    '\\' => buf.push(chars.next().ok_or_else(malformed)?),
                    '"' => in_quotes = false,
                    c => buf.push(c),
                }
                keep = buf.len();
                continue;
            }
            match c {
                '\\' => {
                    buf.push(chars.next().ok_or_else(malformed)?);
                    literal = true;
                    keep = buf.len();
                }
                '"' => {
                    in_quotes = true;
                    literal = true;
                    keep = buf.len();
                }
                ',' | '}' => break c,
                '{' => return Err(malformed()),
                c if is_space(c) => buf.push(c),
                c => {
                    buf.push(c);
                    keep = buf.len();
                }
            }
        };
        buf.truncate(keep);
        if buf.is_empty() && !literal {
            return Err(malformed());
        }
        items.push(if !literal && buf.eq_ignore_ascii_case("NULL") {
            Value::Null
        } else {
            element_value(&buf, elem, zone)?
        });
        if end == '}' {
            break;
        }
    }
    if chars.any(|c| !is_space(c)) {
        return Err(malformed());
    }
    if let Some(n) = declared_len {
        if i64::try_from(items.len()).ok() != Some(n) {
            return Err(SqlError::InvalidText(format!(
                "malformed array literal: \"{s}\""
            )));
        }
    }
    Ok(items)
}

/// One element's text read by its type's input rules (a numeric element
/// rounds to the element's scale, a varchar(n) element is checked).
fn element_value(
    text: &str,
    elem: ColumnType,
    zone: &crate::session_zone::SessionZone,
) -> Result<Value> {
    pgtypes::parse_text_in(text, elem, zone)
}

fn multidimensional() -> SqlError {
    SqlError::FeatureNotSupported("multidimensional arrays are not supported".into())
}

fn lower_bound(lo: i64) -> SqlError {
    SqlError::FeatureNotSupported(format!(
        "arrays with a lower bound other than 1 are not supported (lower bound {lo})"
    ))
}

/// Whether an array literal is well-formed nested braces (outside
/// quotes): every brace level holds only sub-arrays or only elements,
/// with nothing but spaces after the outermost closing brace. Iterative:
/// client text decides the depth.
fn balanced(s: &str) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Holds {
        Nothing,
        Arrays,
        Elements,
    }
    let mut stack: Vec<Holds> = Vec::new();
    let mut in_quotes = false;
    let mut escaped = false;
    let mut closed = false;
    let mark = |stack: &mut Vec<Holds>, kind: Holds| -> bool {
        match stack.last_mut() {
            Some(top) if *top == Holds::Nothing || *top == kind => {
                *top = kind;
                true
            }
            _ => false,
        }
    };
    for c in s.chars() {
        if closed {
            if !is_space(c) {
                return false;
            }
            continue;
        }
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' | '"' if stack.is_empty() => return false,
            '\\' => {
                escaped = true;
                if !mark(&mut stack, Holds::Elements) {
                    return false;
                }
            }
            '"' => {
                in_quotes = !in_quotes;
                if !mark(&mut stack, Holds::Elements) {
                    return false;
                }
            }
            _ if in_quotes => {}
            '{' => {
                if !stack.is_empty() && !mark(&mut stack, Holds::Arrays) {
                    return false;
                }
                stack.push(Holds::Nothing);
            }
            '}' => {
                if stack.pop().is_none() {
                    return false;
                }
                closed = stack.is_empty();
            }
            ',' => {}
            c if is_space(c) => {}
            _ if stack.is_empty() => return false,
            _ => {
                if !mark(&mut stack, Holds::Elements) {
                    return false;
                }
            }
        }
    }
    closed && !in_quotes
}

/// Appends one element's text as `array_out` writes it: double-quoted
/// (with `"` and `\` escaped) when empty, `NULL` in any case, or holding
/// a brace, comma, quote, backslash or space.
pub fn push_element_text(t: &str, out: &mut String) {
    let quote = t.is_empty()
        || t.eq_ignore_ascii_case("NULL")
        || t.chars()
            .any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || is_space(c));
    if !quote {
        out.push_str(t);
        return;
    }
    out.push('"');
    for c in t.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// The text form of a list cell: `{1,NULL,"a b"}`.
pub fn write_array_text(items: &dyn Array, out: &mut String) -> Result<()> {
    if crate::array_dimensions::is_list(items.data_type()) {
        // a multi-dimensional value: `{{1,2},{3,4}}`, checked rectangular
        if crate::array_dimensions::array_shape(items)?.is_empty() {
            out.push_str("{}");
            return Ok(());
        }
        out.push('{');
        for i in 0..items.len() {
            if i > 0 {
                out.push(',');
            }
            let sub = list_items(items, i)
                .ok_or_else(|| SqlError::Internal("list cell out of range".into()))?;
            write_array_text(sub.as_ref(), out)?;
        }
        out.push('}');
        return Ok(());
    }
    out.push('{');
    let mut buf = String::new();
    for i in 0..items.len() {
        if i > 0 {
            out.push(',');
        }
        if items.is_null(i) {
            out.push_str("NULL");
            continue;
        }
        buf.clear();
        pgtypes::cell_text(items, i, &mut buf)?;
        push_element_text(&buf, out);
    }
    out.push('}');
    Ok(())
}

/// The text form of an array value (`scale` for numeric elements).
pub fn array_value_text(items: &[Value], scale: Option<i8>) -> String {
    let mut out = String::from("{");
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match v {
            Value::Null => out.push_str("NULL"),
            v => push_element_text(&pgtypes::value_text(v, scale), &mut out),
        }
    }
    out.push('}');
    out
}

/// `array_send` of a list cell: dimensions (0 for an empty array, else
/// 1), whether any element is NULL, the element type, the length and
/// lower bound 1, then each element as a length-prefixed binary value.
pub fn write_array_binary(items: &dyn Array, elem_oid: u32, out: &mut BytesMut) -> Result<()> {
    if crate::array_dimensions::is_list(items.data_type()) {
        return write_nested_binary(items, out);
    }
    let n = i32::try_from(items.len())
        .map_err(|_| SqlError::ProgramLimitExceeded("array too large".into()))?;
    out.put_i32(i32::from(n > 0));
    out.put_i32(i32::from(items.null_count() > 0));
    out.put_u32(elem_oid);
    if n > 0 {
        out.put_i32(n);
        out.put_i32(1);
    }
    for i in 0..items.len() {
        pgtypes::encode_cell(items, i, pgtypes::Format::Binary, out)?;
    }
    Ok(())
}

/// `array_send` of a multi-dimensional value: one (length, lower bound 1)
/// pair per dimension, then the innermost elements in row-major order.
fn write_nested_binary(items: &dyn Array, out: &mut BytesMut) -> Result<()> {
    let shape = crate::array_dimensions::array_shape(items)?;
    let elem_oid = pgtypes::pg_oid(crate::array_dimensions::leaf_type(items.data_type()));
    let mut has_null = false;
    crate::array_dimensions::for_each_leaf(items, &mut |a, i| {
        has_null |= a.is_null(i);
        Ok(())
    })?;
    let too_large = || SqlError::ProgramLimitExceeded("array too large".into());
    out.put_i32(i32::try_from(shape.len()).map_err(|_| too_large())?);
    out.put_i32(i32::from(has_null));
    out.put_u32(elem_oid);
    for d in &shape {
        out.put_i32(i32::try_from(*d).map_err(|_| too_large())?);
        out.put_i32(1);
    }
    if shape.is_empty() {
        return Ok(());
    }
    crate::array_dimensions::for_each_leaf(items, &mut |a, i| {
        pgtypes::encode_cell(a, i, pgtypes::Format::Binary, out)
    })
}

/// The elements of row `row` of a list array (`None` if it is not one).
pub fn list_items(array: &dyn Array, row: usize) -> Option<ArrayRef> {
    if row >= array.len() {
        return None;
    }
    match array.data_type() {
        DataType::List(_) => Some(array.as_list::<i32>().value(row)),
        DataType::LargeList(_) => Some(array.as_list::<i64>().value(row)),
        DataType::FixedSizeList(..) => Some(array.as_fixed_size_list().value(row)),
        _ => None,
    }
}

/// The type argument of `eddy_array_in` for an array type (its serde
/// JSON, read back by [`type_of_arg`]).
pub fn type_arg(ty: ColumnType) -> String {
    serde_json::to_string(&ty).unwrap_or_default()
}

fn type_of_arg(v: Option<&ScalarValue>) -> DfResult<ColumnType> {
    let text = match v {
        Some(ScalarValue::Utf8(Some(s)))
        | Some(ScalarValue::Utf8View(Some(s)))
        | Some(ScalarValue::LargeUtf8(Some(s))) => s,
        _ => {
            return Err(DataFusionError::Plan(format!(
                "{ARRAY_IN} needs a constant type argument"
            )))
        }
    };
    match serde_json::from_str::<ColumnType>(text) {
        Ok(t @ ColumnType::Array(_)) => Ok(t),
        _ => Err(DataFusionError::Plan(format!(
            "{ARRAY_IN}: bad type argument {text}"
        ))),
    }
}

/// `eddy_array_in(x, type)`: text read as an array of `type`; a list
/// cast to it.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayIn {
    signature: Signature,
}

impl ScalarUDFImpl for ArrayIn {
    fn name(&self) -> &str {
        ARRAY_IN
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Err(DataFusionError::Internal(format!(
            "{ARRAY_IN} types its result from its arguments"
        )))
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let ty = type_of_arg(args.scalar_arguments.get(1).copied().flatten())?;
        Ok(Arc::new(Field::new(ARRAY_IN, ty.to_arrow(), true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (value, ty) = match args.args.as_slice() {
            [v, ColumnarValue::Scalar(t)] => (v, type_of_arg(Some(t))?),
            _ => {
                return Err(DataFusionError::Plan(format!(
                    "{ARRAY_IN} takes a value and a type"
                )))
            }
        };
        let all_scalar = matches!(value, ColumnarValue::Scalar(_));
        let a = value.to_array(args.number_rows)?;
        let out = text_to_array(&a, ty).map_err(DataFusionError::from)?;
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

/// Text (read by [`parse_array_text`]), NULL, or a list (elements cast)
/// as an array of type `ty`.
pub fn text_to_array(a: &ArrayRef, ty: ColumnType) -> Result<ArrayRef> {
    // an explicit cast to varchar(n)[] cuts each element to n characters,
    // as PostgreSQL's explicit varchar cast does (no 22001)
    if let ColumnType::Array(eddy_common::ArrayElem::Varchar(n)) = ty {
        let text = text_to_array(a, ColumnType::Array(eddy_common::ArrayElem::Text))?;
        return truncate_elements(&text, n);
    }
    let target = ty.to_arrow();
    match a.data_type() {
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => {
            let text = cast_with_options(a, &DataType::Utf8, &CastOptions::default())?;
            let mut b = eddy_storage::arrow_values::ColumnBuilder::new(ty, text.len());
            for s in text.as_string::<i32>().iter() {
                let v = match s {
                    Some(s) => pgtypes::parse_text(s, ty)?,
                    None => Value::Null,
                };
                b.append(&v)?;
            }
            Ok(b.finish())
        }
        DataType::Null | DataType::List(_) | DataType::LargeList(_) => {
            let opts = CastOptions {
                safe: false,
                ..Default::default()
            };
            Ok(cast_with_options(a, &target, &opts)?)
        }
        other => Err(SqlError::DatatypeMismatch(format!(
            "cannot cast type {} to {}",
            other,
            ty.pg_name()
        ))),
    }
}

/// `eddy_array_in(e, <the array type of Arrow type dt>)`, or `e` back
/// when `dt` is no array column type.
pub fn array_in_for(
    dt: &DataType,
    e: datafusion::logical_expr::Expr,
) -> std::result::Result<datafusion::logical_expr::Expr, datafusion::logical_expr::Expr> {
    use datafusion::logical_expr::expr::ScalarFunction;
    match ColumnType::from_arrow(dt) {
        Some(ty @ ColumnType::Array(_)) => Ok(datafusion::logical_expr::Expr::ScalarFunction(
            ScalarFunction::new_udf(
                Arc::new(array_in_udf()),
                vec![
                    e,
                    datafusion::logical_expr::Expr::Literal(
                        ScalarValue::Utf8(Some(type_arg(ty))),
                        None,
                    ),
                ],
            ),
        )),
        _ => Err(e),
    }
}

/// Types for untyped parameters that meet an array, as PostgreSQL infers
/// them and DataFusion does not: `$1 = ANY(a)` (`array_has(a, $1)`) takes
/// the element type, `a[$1]` (`array_element(a, $1)`) an integer.
pub fn array_placeholder_types(
    plan: &datafusion::logical_expr::LogicalPlan,
) -> std::collections::HashMap<String, DataType> {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::utils::merge_schema;
    use datafusion::logical_expr::{Expr, ExprSchemable};
    let mut out = std::collections::HashMap::new();
    let _ = plan.apply_with_subqueries(|node| {
        let schema = merge_schema(&node.inputs());
        node.apply_expressions(|e| {
            e.apply(|x| {
                if let Expr::ScalarFunction(f) = x {
                    if let [list, Expr::Placeholder(p)] = f.args.as_slice() {
                        if p.field.is_none() {
                            let ty = match (f.name(), list.get_type(&schema)) {
                                ("array_has", Ok(t)) => pgtypes_list_element(&t),
                                ("array_element", Ok(_)) => Some(DataType::Int32),
                                _ => None,
                            };
                            if let Some(ty) = ty {
                                out.insert(p.id.clone(), ty);
                            }
                        }
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    out
}

fn pgtypes_list_element(t: &DataType) -> Option<DataType> {
    match t {
        DataType::List(f) | DataType::LargeList(f) => Some(f.data_type().clone()),
        _ => None,
    }
}

/// `eddy_array_in`.
pub fn array_in_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(ArrayIn {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

/// A list of strings with every element cut to `n` characters.
fn truncate_elements(a: &ArrayRef, n: u32) -> Result<ArrayRef> {
    use datafusion::arrow::array::{ListArray, StringBuilder};
    let list = a
        .as_list_opt::<i32>()
        .ok_or_else(|| SqlError::Internal("varchar array is not a list".into()))?;
    let values = cast_with_options(list.values(), &DataType::Utf8, &CastOptions::default())?;
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    let mut out = StringBuilder::with_capacity(values.len(), 0);
    for v in values.as_string::<i32>().iter() {
        match v {
            Some(s) => match s.char_indices().nth(n) {
                Some((cut, _)) => out.append_value(s.get(..cut).unwrap_or(s)),
                None => out.append_value(s),
            },
            None => out.append_null(),
        }
    }
    Ok(Arc::new(ListArray::try_new(
        Arc::new(Field::new_list_field(DataType::Utf8, true)),
        list.offsets().clone(),
        Arc::new(out.finish()),
        list.nulls().cloned(),
    )?))
}

/// `eddy_array_out(a)`: an array's text as PostgreSQL's `array_out`
/// prints it (`{1,2}`, `{"a b",NULL}`): what `a::text` gives
/// (`uuid_type`'s analyzer rule turns a cast of a list to text into it;
/// Arrow's cast would print `[1, 2]`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayOut {
    signature: Signature,
}

impl ScalarUDFImpl for ArrayOut {
    fn name(&self) -> &str {
        ARRAY_OUT
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        let Some(list) = args.args.first() else {
            return Err(DataFusionError::Plan(
                "eddy_array_out needs an array".into(),
            ));
        };
        let list = list.to_array(n)?;
        let mut out = datafusion::arrow::array::StringBuilder::with_capacity(list.len(), 0);
        let mut text = String::new();
        for row in 0..list.len() {
            match list_items(list.as_ref(), row) {
                Some(items) if !list.is_null(row) => {
                    text.clear();
                    write_array_text(items.as_ref(), &mut text).map_err(DataFusionError::from)?;
                    out.append_value(&text);
                }
                _ => out.append_null(),
            }
        }
        let out: ArrayRef = Arc::new(out.finish());
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

/// `eddy_array_out(e)` (see [`ArrayOut`]).
pub fn array_out(e: datafusion::logical_expr::Expr) -> datafusion::logical_expr::Expr {
    datafusion::logical_expr::Expr::ScalarFunction(
        datafusion::logical_expr::expr::ScalarFunction::new_udf(
            Arc::new(ScalarUDF::new_from_impl(ArrayOut {
                signature: Signature::any(1, Volatility::Immutable),
            })),
            vec![e],
        ),
    )
}

/// The array functions Eddy adds to DataFusion's (or replaces).
pub fn array_functions() -> Vec<ScalarUDF> {
    let mut out = vec![array_in_udf()];
    out.extend(crate::array_dimensions::shape_functions());
    out
}

#[cfg(test)]
// Tests index and do arithmetic on fixed fixtures; a panic there is a
// failing test, which is what it should be.
#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
mod tests {
    use super::*;

    fn ints(s: &str) -> Result<Vec<Value>> {
        parse_array_text(s, ColumnType::Int)
    }

    #[test]
    fn text_arrays_parse_as_postgresql() {
        assert_eq!(
            ints("{1,2,NULL}").unwrap(),
            vec![Value::Int(1), Value::Int(2), Value::Null]
        );
        assert_eq!(ints(" { } ").unwrap(), vec![]);
        assert_eq!(ints("{}").unwrap(), vec![]);
        assert_eq!(
            ints("{ 1 , -2 }").unwrap(),
            vec![Value::Int(1), Value::Int(-2)]
        );
        assert_eq!(
            ints("[1:2]={3,4}").unwrap(),
            vec![Value::Int(3), Value::Int(4)]
        );
        let t = parse_array_text(
            r#"{"a b","c\"d",NULL,"NULL",null, x y ,\ ,""}"#,
            ColumnType::Text,
        )
        .unwrap();
        assert_eq!(
            t,
            vec![
                Value::Text("a b".into()),
                Value::Text("c\"d".into()),
                Value::Null,
                Value::Text("NULL".into()),
                Value::Null,
                Value::Text("x y".into()),
                Value::Text(" ".into()),
                Value::Text("".into()),
            ]
        );
        assert_eq!(
            parse_array_text("{é,日本}", ColumnType::Text).unwrap(),
            vec![Value::Text("é".into()), Value::Text("日本".into())]
        );
    }

    #[test]
    fn malformed_text_arrays_are_refused() {
        let state = |s: &str| ints(s).unwrap_err().sqlstate();
        for s in [
            "",
            "1,2",
            "{",
            "{1",
            "{1,",
            "{1,}",
            "{,}",
            "{,1}",
            "{1,,2}",
            "{1}x",
            "{1}}",
            "{\"1}",
            "{1\\",
            "{1{2}}",
            "{{1},2}",
            "{{1}",
            "[1:2]{1,2}",
            "[1:3]={1,2}",
            "[a:b]={1}",
            "[1:2={1,2}",
        ] {
            assert_eq!(state(s), "22P02", "{s}");
        }
        // the element's own error
        assert_eq!(state("{1,x}"), "22P02");
        assert_eq!(state("{99999999999}"), "22003");
        assert_eq!(
            parse_array_text("{abcd}", ColumnType::Varchar(3))
                .unwrap_err()
                .sqlstate(),
            "22001"
        );
        // more than one dimension, another lower bound: not supported
        for s in ["{{1,2},{3,4}}", "{{}}", "[0:1]={1,2}", "[1:1][1:1]={{1}}"] {
            assert_eq!(state(s), "0A000", "{s}");
        }
        // nested braces deep enough to matter are refused without recursion
        let deep = format!("{}{}", "{".repeat(100_000), "}".repeat(100_000));
        assert_eq!(state(&deep), "0A000");
        assert_eq!(state(&"{".repeat(100_000)), "22P02");
    }

    #[test]
    fn elements_quote_as_array_out_does() {
        let items = vec![
            Value::Text("a b".into()),
            Value::Text("c\"d\\".into()),
            Value::Null,
            Value::Text("NULL".into()),
            Value::Text("".into()),
            Value::Text("plain".into()),
            Value::Text("{x,y}".into()),
        ];
        let text = array_value_text(&items, None);
        assert_eq!(text, r#"{"a b","c\"d\\",NULL,"NULL","",plain,"{x,y}"}"#);
        assert_eq!(parse_array_text(&text, ColumnType::Text).unwrap(), items);
    }
}
