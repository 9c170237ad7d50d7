//! PostgreSQL's json scalar functions that applications send besides the
//! operators: `to_json`, `to_jsonb`, `row_to_json`, `json[b]_array_length`,
//! `json[b]_typeof`, `json[b]_strip_nulls` and `jsonb_pretty`. (The path
//! functions and operators are in [`crate::json_paths`].)
//!
//! A value becomes JSON as `json_build_*` makes its arguments
//! ([`crate::json_build::push_value`]); `to_jsonb` reads that text back
//! into jsonb's normal form. A json argument is read by `serde_json`;
//! where PostgreSQL would print a json value's own text and that text is
//! not what Eddy can print back (a number such as `1.50` or `1e3`),
//! `json_strip_nulls` refuses with 0A000 rather than change the number.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int32Builder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use eddy_common::ColumnType;

use crate::error::SqlError;
use crate::json::{self, JNode};
use crate::json_build::push_value;
use crate::json_functions::{is_text, parse_cell, strings};
use crate::pgtypes::declared_type_metadata;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Fun {
    ToJson,
    ToJsonb,
    RowToJson,
    ArrayLength { jsonb: bool },
    Typeof { jsonb: bool },
    StripNulls { jsonb: bool },
    Pretty,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonScalar {
    fun: Fun,
    signature: Signature,
}

/// The functions of this module, for the session to register.
pub fn json_more_functions() -> Vec<ScalarUDF> {
    let mut funs = vec![Fun::ToJson, Fun::ToJsonb, Fun::RowToJson, Fun::Pretty];
    for jsonb in [false, true] {
        funs.extend([
            Fun::ArrayLength { jsonb },
            Fun::Typeof { jsonb },
            Fun::StripNulls { jsonb },
        ]);
    }
    funs.into_iter()
        .map(|fun| {
            ScalarUDF::new_from_impl(JsonScalar {
                fun,
                // to_json's text of a timestamptz depends on the session
                signature: Signature::any(1, Volatility::Stable),
            })
        })
        .collect()
}

impl JsonScalar {
    fn result_type(&self) -> (DataType, Option<ColumnType>) {
        match self.fun {
            Fun::ToJson | Fun::RowToJson | Fun::StripNulls { jsonb: false } => {
                (DataType::Utf8, Some(ColumnType::Json))
            }
            Fun::ToJsonb | Fun::StripNulls { jsonb: true } => {
                (DataType::Utf8, Some(ColumnType::Jsonb))
            }
            Fun::ArrayLength { .. } => (DataType::Int32, None),
            Fun::Typeof { .. } | Fun::Pretty => (DataType::Utf8, None),
        }
    }
}

impl ScalarUDFImpl for JsonScalar {
    fn name(&self) -> &str {
        match self.fun {
            Fun::ToJson => "to_json",
            Fun::ToJsonb => "to_jsonb",
            Fun::RowToJson => "row_to_json",
            Fun::ArrayLength { jsonb: false } => "json_array_length",
            Fun::ArrayLength { jsonb: true } => "jsonb_array_length",
            Fun::Typeof { jsonb: false } => "json_typeof",
            Fun::Typeof { jsonb: true } => "jsonb_typeof",
            Fun::StripNulls { jsonb: false } => "json_strip_nulls",
            Fun::StripNulls { jsonb: true } => "jsonb_strip_nulls",
            Fun::Pretty => "jsonb_pretty",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(self.result_type().0)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let arg = args.arg_fields.first().map(|f| f.data_type().clone());
        match (self.fun, &arg) {
            (Fun::ToJson | Fun::ToJsonb, _) => {}
            (Fun::RowToJson, Some(DataType::Struct(_))) => {}
            (Fun::RowToJson, other) => {
                return Err(DataFusionError::from(SqlError::UndefinedOperator(format!(
                    "function row_to_json({}) does not exist",
                    other
                        .as_ref()
                        .map_or("unknown".to_string(), |t| t.to_string())
                ))))
            }
            (_, Some(t)) if is_text(t) => {}
            (_, other) => {
                return Err(DataFusionError::from(SqlError::UndefinedOperator(format!(
                    "function {}({}) does not exist",
                    self.name(),
                    other
                        .as_ref()
                        .map_or("unknown".to_string(), |t| t.to_string())
                ))))
            }
        }
        let (t, declared) = self.result_type();
        let mut f = Field::new(self.name(), t, true);
        if let Some(d) = declared {
            f = f.with_metadata(declared_type_metadata(d));
        }
        Ok(Arc::new(f))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if scalar { 1 } else { args.number_rows };
        let (Some(arg), Some(field)) = (args.args.first(), args.arg_fields.first()) else {
            return Err(DataFusionError::Plan(format!(
                "{}: wrong number of arguments",
                self.name()
            )));
        };
        let a = arg.to_array(rows)?;
        let out: ArrayRef = match self.fun {
            Fun::ToJson | Fun::ToJsonb | Fun::RowToJson => {
                let mut b = StringBuilder::new();
                let mut text = String::new();
                for row in 0..rows {
                    if a.logical_nulls().is_some_and(|n| n.is_null(row)) {
                        b.append_null();
                        continue;
                    }
                    text.clear();
                    push_value(&mut text, &a, field, row)?;
                    if self.fun == Fun::ToJsonb {
                        b.append_value(
                            json::normalize_jsonb(&text).map_err(DataFusionError::from)?,
                        );
                    } else {
                        b.append_value(&text);
                    }
                }
                Arc::new(b.finish())
            }
            Fun::ArrayLength { .. } => {
                let mut b = Int32Builder::new();
                for s in strings(&a)? {
                    match s {
                        None => b.append_null(),
                        Some(s) => b.append_value(array_length(&parse_cell(&s)?)?),
                    }
                }
                Arc::new(b.finish())
            }
            Fun::Typeof { .. } => {
                let mut b = StringBuilder::new();
                for s in strings(&a)? {
                    b.append_option(
                        s.map(|s| parse_cell(&s).map(|n| type_name(&n)))
                            .transpose()?,
                    );
                }
                Arc::new(b.finish())
            }
            Fun::StripNulls { jsonb } => {
                let mut b = StringBuilder::new();
                for s in strings(&a)? {
                    let Some(s) = s else {
                        b.append_null();
                        continue;
                    };
                    let mut node = parse_cell(&s)?;
                    if jsonb {
                        json::canonicalize(&mut node);
                        strip_nulls(&mut node);
                        b.append_value(json::to_text(&node));
                    } else {
                        if !numbers_print_back(&s) {
                            return Err(DataFusionError::from(SqlError::FeatureNotSupported(
                                "json_strip_nulls on json holding a number that is not a plain \
                                 integer is not supported (cast it to jsonb)"
                                    .into(),
                            )));
                        }
                        strip_nulls(&mut node);
                        let mut out = String::new();
                        compact(&node, &mut out);
                        b.append_value(out);
                    }
                }
                Arc::new(b.finish())
            }
            Fun::Pretty => {
                let mut b = StringBuilder::new();
                for s in strings(&a)? {
                    let Some(s) = s else {
                        b.append_null();
                        continue;
                    };
                    let mut node = parse_cell(&s)?;
                    json::canonicalize(&mut node);
                    let mut out = String::new();
                    pretty(&node, 0, &mut out);
                    b.append_value(out);
                }
                Arc::new(b.finish())
            }
        };
        crate::udf_args::scalar_if(scalar, out)
    }
}

/// DataFusion's `struct` / `row` (a ROW constructor), whose fields also
/// keep an argument's json / jsonb declaration, so that `to_json(row(j))`
/// embeds a json value as PostgreSQL does instead of quoting its text.
/// Everything else is DataFusion's: fields `c0, c1, ...`, any argument types.
#[derive(Debug, PartialEq, Eq, Hash)]
struct RowConstructor {
    signature: Signature,
    aliases: Vec<String>,
}

/// The ROW constructor that replaces DataFusion's `struct` (same name and
/// alias), for the session to register after the built-in functions.
pub fn row_constructor() -> ScalarUDF {
    ScalarUDF::new_from_impl(RowConstructor {
        signature: Signature::variadic_any(Volatility::Immutable),
        aliases: vec!["row".to_string()],
    })
}

impl ScalarUDFImpl for RowConstructor {
    fn name(&self) -> &str {
        "struct"
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        if arg_types.is_empty() {
            return Err(DataFusionError::Plan(
                "struct requires at least one argument".into(),
            ));
        }
        Ok(DataType::Struct(
            arg_types
                .iter()
                .enumerate()
                .map(|(i, t)| Field::new(format!("c{i}"), t.clone(), true))
                .collect(),
        ))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        if args.arg_fields.is_empty() {
            return Err(DataFusionError::Plan(
                "struct requires at least one argument".into(),
            ));
        }
        let fields: Vec<Field> = args
            .arg_fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let field = Field::new(format!("c{i}"), f.data_type().clone(), true);
                // only json / jsonb: other declarations (varchar(n)) would
                // make equal ROWs of differently declared columns differ
                match f
                    .metadata()
                    .get(crate::pgtypes::DECLARED_TYPE_KEY)
                    .map(String::as_str)
                {
                    Some("json" | "jsonb") => field.with_metadata(f.metadata().clone()),
                    _ => field,
                }
            })
            .collect();
        Ok(Arc::new(Field::new(
            self.name(),
            DataType::Struct(fields.into()),
            true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let DataType::Struct(fields) = args.return_field.data_type() else {
            return Err(DataFusionError::Internal(
                "struct: the return type is no struct".into(),
            ));
        };
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array(Arc::new(
            datafusion::arrow::array::StructArray::try_new(fields.clone(), arrays, None)?,
        )))
    }
}

/// `json_array_length`: 22023 on anything but an array, as PostgreSQL.
fn array_length(node: &JNode) -> DfResult<i32> {
    match node {
        JNode::Array(items) => i32::try_from(items.len()).map_err(|_| {
            DataFusionError::from(SqlError::ProgramLimitExceeded(
                "array length exceeds the integer range".into(),
            ))
        }),
        JNode::Object(_) => Err(DataFusionError::from(SqlError::InvalidParameter(
            "cannot get array length of a non-array".into(),
        ))),
        _ => Err(DataFusionError::from(SqlError::InvalidParameter(
            "cannot get array length of a scalar".into(),
        ))),
    }
}

/// `json_typeof`'s names.
fn type_name(node: &JNode) -> &'static str {
    match node {
        JNode::Null => "null",
        JNode::Bool(_) => "boolean",
        JNode::Int(_) | JNode::Float(_) => "number",
        JNode::String(_) => "string",
        JNode::Array(_) => "array",
        JNode::Object(_) => "object",
    }
}

/// Drops object members whose value is null, at every depth (array
/// elements that are null stay, as in PostgreSQL).
fn strip_nulls(node: &mut JNode) {
    match node {
        JNode::Array(items) => items.iter_mut().for_each(strip_nulls),
        JNode::Object(members) => {
            members.retain(|(_, v)| *v != JNode::Null);
            members.iter_mut().for_each(|(_, v)| strip_nulls(v));
        }
        _ => {}
    }
}

/// Whether every number in JSON text `s` is a plain integer, which
/// [`compact`] prints back as written (json keeps its numbers' text; a
/// `1.50` or `1e3` would come back changed, and `-0` as `0`).
fn numbers_print_back(s: &str) -> bool {
    let mut in_string = false;
    let mut escaped = false;
    let mut number = String::new();
    let plain = |n: &str| n.is_empty() || (n != "-0" && !n.contains(['.', 'e', 'E', '+']));
    for c in s.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        // a number starts with a digit or '-'; `true` and `false` hold an 'e'
        let starts = c.is_ascii_digit() || c == '-';
        let goes_on = !number.is_empty() && matches!(c, '+' | '.' | 'e' | 'E');
        if starts || goes_on {
            number.push(c);
            continue;
        }
        if !plain(&number) {
            return false;
        }
        number.clear();
        if c == '"' {
            in_string = true;
        }
    }
    plain(&number)
}

/// json_strip_nulls' layout: no whitespace at all.
fn compact(node: &JNode, out: &mut String) {
    match node {
        JNode::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                compact(v, out);
            }
            out.push(']');
        }
        JNode::Object(members) => {
            out.push('{');
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&json::to_text(&JNode::String(k.clone())));
                out.push(':');
                compact(v, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&json::to_text(scalar)),
    }
}

fn indent(level: usize, out: &mut String) {
    for _ in 0..level {
        out.push_str("    ");
    }
}

/// `jsonb_pretty`'s layout (PostgreSQL's `JsonbToCStringIndent`): four
/// spaces a level, one member or element a line, an empty container's
/// closing bracket on its own line.
pub(crate) fn pretty(node: &JNode, level: usize, out: &mut String) {
    match node {
        JNode::Array(items) => {
            out.push_str("[\n");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(level + 1, out);
                pretty(v, level + 1, out);
            }
            if !items.is_empty() {
                out.push('\n');
            }
            indent(level, out);
            out.push(']');
        }
        JNode::Object(members) => {
            out.push_str("{\n");
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(level + 1, out);
                out.push_str(&json::to_text(&JNode::String(k.clone())));
                out.push_str(": ");
                pretty(v, level + 1, out);
            }
            if !members.is_empty() {
                out.push('\n');
            }
            indent(level, out);
            out.push('}');
        }
        scalar => out.push_str(&json::to_text(scalar)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> JNode {
        let mut n = json::parse(s, "jsonb").unwrap();
        json::canonicalize(&mut n);
        n
    }

    #[test]
    fn pretty_is_postgresqls_layout() {
        let mut out = String::new();
        pretty(&p(r#"{"d":[],"a":[1,{"b":null}],"c":{}}"#), 0, &mut out);
        assert_eq!(
            out,
            "{\n    \"a\": [\n        1,\n        {\n            \"b\": null\n        }\n    ],\n    \"c\": {\n    },\n    \"d\": [\n    ]\n}"
        );
        out.clear();
        pretty(&p("\"x\""), 0, &mut out);
        assert_eq!(out, "\"x\"");
    }

    #[test]
    fn strip_nulls_keeps_array_nulls() {
        let mut n = p(r#"{"a":null,"b":[null,{"c":null,"d":1}]}"#);
        strip_nulls(&mut n);
        let mut out = String::new();
        compact(&n, &mut out);
        assert_eq!(out, r#"{"b":[null,{"d":1}]}"#);
    }

    #[test]
    fn only_plain_integers_print_back() {
        assert!(numbers_print_back(
            r#"{"a": -12, "b": "1.5e3", "c": [0, 7]}"#
        ));
        assert!(numbers_print_back(r#""\"1.5""#));
        assert!(numbers_print_back("[true, false, null, 10]"));
        for bad in ["1.50", "[1e3]", "{\"a\":-0}", "2E1", "1.0"] {
            assert!(!numbers_print_back(bad), "{bad}");
        }
    }

    #[test]
    fn typeof_and_array_length_follow_postgresql() {
        assert_eq!(type_name(&p("1.5")), "number");
        assert_eq!(type_name(&p("{}")), "object");
        assert_eq!(array_length(&p("[1,[2,3]]")).unwrap(), 2);
        assert!(array_length(&p("{}")).is_err());
        assert!(array_length(&p("1")).is_err());
    }
}
