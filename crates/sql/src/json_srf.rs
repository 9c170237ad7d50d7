//! The values of PostgreSQL's set-returning json functions and
//! `regexp_matches`, as one list per input row: `json[b]_array_elements`,
//! `json[b]_array_elements_text`, `json[b]_each`, `json[b]_each_text`,
//! `json[b]_object_keys` and `regexp_matches`. DataFusion's table
//! functions take only constant arguments, so `crate::srf_rewrite` turns
//! each call into `unnest` of the lists made here, which gives one row per
//! element in FROM (lateral too) and in a select list alike.
//!
//! Invariants:
//! * A NULL argument gives an empty list, so no rows, as in PostgreSQL.
//! * `jsonb` values come out in jsonb's normal form ([`crate::json`]);
//!   `json` values are the input's own text of each element or member
//!   (spans found by [`spans`]), keys in text order with duplicates, as
//!   PostgreSQL's json functions print them.
//! * The `_text` forms give a JSON string unquoted and a JSON null as SQL
//!   NULL; errors are PostgreSQL's 22023 (elements of a non-array, members
//!   of a non-object), 22P02 (not JSON), 2201B (bad pattern).

use std::sync::Arc;

use datafusion::arrow::array::{ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::error::SqlError;
use crate::json::{self, JNode};
use crate::json_functions::is_text;
use crate::udf_args::text_at;

/// What one of the list functions gives for a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Part {
    /// `json[b]_array_elements`
    Elements,
    /// `json[b]_array_elements_text`
    ElementsText,
    /// the keys of `json[b]_each[_text]` and `json[b]_object_keys`
    Keys,
    /// the values of `json[b]_each`
    Values,
    /// the values of `json[b]_each_text`
    TextValues,
    /// `json[b]_each` in a select list: one record text `(key,value)`
    Records,
    /// `json[b]_each_text` in a select list
    TextRecords,
}

/// A list function of [`Part`] over json (`jsonb: false`) or jsonb.
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonList {
    part: Part,
    jsonb: bool,
    /// the PostgreSQL function, for error messages
    sql_name: &'static str,
    name: String,
    signature: Signature,
}

/// The name of the list function behind `part` of the PostgreSQL function
/// `sql_name` (one per name, so that its errors name the function called).
pub(crate) fn list_function(sql_name: &str, part: Part) -> String {
    let suffix = match part {
        Part::Elements | Part::ElementsText => "",
        Part::Keys => "_keys",
        Part::Values | Part::TextValues => "_values",
        Part::Records | Part::TextRecords => "_records",
    };
    format!("eddy_srf_{sql_name}{suffix}")
}

/// `regexp_matches`' list function: a `text[]` per match.
pub(crate) const REGEXP_MATCHES: &str = "eddy_srf_regexp_matches";

/// The set-returning functions' PostgreSQL names, whether each is jsonb,
/// and what it lists (its `each` forms list keys and values).
pub(crate) const JSON_SRFS: [(&str, bool, &[Part]); 10] = [
    ("json_array_elements", false, &[Part::Elements]),
    ("jsonb_array_elements", true, &[Part::Elements]),
    ("json_array_elements_text", false, &[Part::ElementsText]),
    ("jsonb_array_elements_text", true, &[Part::ElementsText]),
    ("json_each", false, &[Part::Keys, Part::Values]),
    ("jsonb_each", true, &[Part::Keys, Part::Values]),
    ("json_each_text", false, &[Part::Keys, Part::TextValues]),
    ("jsonb_each_text", true, &[Part::Keys, Part::TextValues]),
    ("json_object_keys", false, &[Part::Keys]),
    ("jsonb_object_keys", true, &[Part::Keys]),
];

/// The functions of this module, for the session to register: the list
/// functions and one refusing function under each
/// PostgreSQL name for a call left where rows cannot be made (a WHERE
/// clause, an aggregate's argument).
pub fn srf_functions() -> Vec<ScalarUDF> {
    let mut out = Vec::new();
    for (sql_name, jsonb, parts) in JSON_SRFS {
        // the each forms also give records in a select list
        let record = match parts {
            [Part::Keys, Part::Values] => Some(Part::Records),
            [Part::Keys, _] => Some(Part::TextRecords),
            _ => None,
        };
        for &part in parts.iter().chain(record.as_ref()) {
            out.push(ScalarUDF::new_from_impl(JsonList {
                part,
                jsonb,
                sql_name,
                name: list_function(sql_name, part),
                signature: Signature::any(1, Volatility::Immutable),
            }));
        }
        out.push(refusing(sql_name));
    }
    out.push(ScalarUDF::new_from_impl(RegexpMatches {
        signature: Signature::variadic_any(Volatility::Immutable),
    }));
    out.push(refusing("regexp_matches"));
    out.push(refusing(crate::srf_rewrite::PARTITION_ANCESTORS));
    out
}

fn refusing(sql_name: &str) -> ScalarUDF {
    ScalarUDF::new_from_impl(Refused {
        name: sql_name.to_string(),
        signature: Signature::variadic_any(Volatility::Immutable),
    })
}

fn text_list() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

fn all_scalar(args: &[ColumnarValue]) -> bool {
    args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)))
}

fn check_text_args(name: &str, fields: &[FieldRef], min: usize, max: usize) -> DfResult<()> {
    if fields.len() < min || fields.len() > max || !fields.iter().all(|f| is_text(f.data_type())) {
        let types: Vec<String> = fields.iter().map(|f| f.data_type().to_string()).collect();
        return Err(DataFusionError::from(SqlError::UndefinedOperator(format!(
            "function {name}({}) does not exist",
            types.join(", ")
        ))));
    }
    Ok(())
}

impl ScalarUDFImpl for JsonList {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(text_list())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        check_text_args(self.sql_name, args.arg_fields, 1, 1)?;
        Ok(Arc::new(Field::new(self.name(), text_list(), true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = all_scalar(&args.args);
        let rows = if scalar { 1 } else { args.number_rows };
        let mut b = ListBuilder::new(StringBuilder::new());
        for row in 0..rows {
            if let Some(text) = text_at(&args.args, 0, row)? {
                let items = json_items(self.part, self.jsonb, self.sql_name, &text)
                    .map_err(DataFusionError::from)?;
                for item in items {
                    b.values().append_option(item);
                }
            }
            b.append(true);
        }
        crate::udf_args::scalar_if(scalar, Arc::new(b.finish()))
    }
}

fn not_array(node_kind: &str) -> SqlError {
    SqlError::InvalidParameter(format!("cannot extract elements from {node_kind}"))
}

fn not_object(sql_name: &str, node_kind: &str) -> SqlError {
    if sql_name.ends_with("object_keys") {
        SqlError::InvalidParameter(format!("cannot call {sql_name} on {node_kind}"))
    } else {
        SqlError::InvalidParameter(format!("cannot call {sql_name} on a non-object"))
    }
}

/// What `part` lists for one (non-NULL) argument.
pub(crate) fn json_items(
    part: Part,
    jsonb: bool,
    sql_name: &str,
    text: &str,
) -> Result<Vec<Option<String>>, SqlError> {
    if jsonb {
        let mut node = json::parse(text, "jsonb")?;
        json::canonicalize(&mut node);
        jsonb_items(part, sql_name, node)
    } else {
        // PostgreSQL's json functions print each element's own text
        json::check_json(text)?;
        json_text_items(part, sql_name, text)
    }
}

fn kind_of(node: &JNode) -> &'static str {
    match node {
        JNode::Array(_) => "an array",
        JNode::Object(_) => "an object",
        _ => "a scalar",
    }
}

fn jsonb_items(part: Part, sql_name: &str, node: JNode) -> Result<Vec<Option<String>>, SqlError> {
    match (part, node) {
        (Part::Elements, JNode::Array(items)) => {
            Ok(items.iter().map(|v| Some(json::to_text(v))).collect())
        }
        (Part::ElementsText, JNode::Array(items)) => Ok(items.iter().map(json::as_text).collect()),
        (Part::Elements | Part::ElementsText, other) => Err(not_array(kind_of(&other))),
        (_, JNode::Object(members)) => Ok(members
            .iter()
            .map(|(k, v)| match part {
                Part::Keys => Some(k.clone()),
                Part::Values => Some(json::to_text(v)),
                Part::TextValues => json::as_text(v),
                Part::Records => Some(record(&[Some(k), Some(&json::to_text(v))])),
                _ => Some(record(&[Some(k), json::as_text(v).as_deref()])),
            })
            .collect()),
        (_, other) => Err(not_object(sql_name, kind_of(&other))),
    }
}

/// A json value's text as the `_text` forms give it: a string unquoted,
/// `null` as NULL, anything else its own text.
fn json_text_of(span: &str) -> Result<Option<String>, SqlError> {
    if span.starts_with('"') {
        return unquote(span).map(Some);
    }
    Ok((span != "null").then(|| span.to_string()))
}

fn unquote(span: &str) -> Result<String, SqlError> {
    serde_json::from_str::<String>(span)
        .map_err(|e| SqlError::InvalidText(format!("invalid input syntax for type json ({e})")))
}

fn json_text_items(
    part: Part,
    sql_name: &str,
    text: &str,
) -> Result<Vec<Option<String>>, SqlError> {
    let (kind, items) = spans(text);
    match (part, kind) {
        (Part::Elements, Kind::Array) => Ok(items
            .into_iter()
            .map(|(_, v)| Some(v.to_string()))
            .collect()),
        (Part::ElementsText, Kind::Array) => {
            items.into_iter().map(|(_, v)| json_text_of(v)).collect()
        }
        (Part::Elements | Part::ElementsText, k) => Err(not_array(k.name())),
        (_, Kind::Object) => items
            .into_iter()
            .map(|(k, v)| {
                let key = unquote(k)?;
                Ok(match part {
                    Part::Keys => Some(key),
                    Part::Values => Some(v.to_string()),
                    Part::TextValues => json_text_of(v)?,
                    Part::Records => Some(record(&[Some(&key), Some(v)])),
                    _ => Some(record(&[Some(&key), json_text_of(v)?.as_deref()])),
                })
            })
            .collect(),
        (_, k) => Err(not_object(sql_name, k.name())),
    }
}

/// PostgreSQL's text of a record (`record_out`): fields between
/// parentheses, a NULL as nothing, a field quoted when it is empty or holds
/// a quote, backslash, parenthesis, comma or space, with `"` and `\`
/// doubled inside quotes.
pub(crate) fn record(fields: &[Option<&str>]) -> String {
    let mut out = String::from("(");
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let Some(s) = f else { continue };
        let quote = s.is_empty()
            || s.chars().any(|c| {
                matches!(
                    c,
                    '"' | '\\' | '(' | ')' | ',' | ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}'
                )
            });
        if !quote {
            out.push_str(s);
            continue;
        }
        out.push('"');
        for c in s.chars() {
            if c == '"' || c == '\\' {
                out.push(c);
            }
            out.push(c);
        }
        out.push('"');
    }
    out.push(')');
    out
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    Array,
    Object,
    Scalar,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Array => "an array",
            Kind::Object => "an object",
            Kind::Scalar => "a scalar",
        }
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_ws(b[i]) {
        i += 1;
    }
    i
}

/// The end (exclusive) of the JSON value starting at `i` of valid JSON.
fn value_end(b: &[u8], i: usize) -> usize {
    let mut j = i;
    let mut depth = 0usize;
    let mut in_string = false;
    while j < b.len() {
        let c = b[j];
        if in_string {
            match c {
                b'\\' => j += 1,
                b'"' => {
                    in_string = false;
                    if depth == 0 {
                        return j + 1;
                    }
                }
                _ => {}
            }
        } else {
            match c {
                b'"' => in_string = true,
                b'[' | b'{' => depth += 1,
                b']' | b'}' if depth == 0 => return j,
                b']' | b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return j + 1;
                    }
                }
                b',' if depth == 0 => return j,
                c if depth == 0 && is_ws(c) => return j,
                _ => {}
            }
        }
        j += 1;
    }
    j
}

/// The top-level elements (key span empty) or members (key span the quoted
/// key) of JSON text already checked to be valid, as slices of it.
pub(crate) fn spans(text: &str) -> (Kind, Vec<(&str, &str)>) {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    let kind = match b.get(i) {
        Some(b'[') => Kind::Array,
        Some(b'{') => Kind::Object,
        _ => return (Kind::Scalar, Vec::new()),
    };
    let mut out = Vec::new();
    i = skip_ws(b, i + 1);
    while i < b.len() && b[i] != b']' && b[i] != b'}' {
        let mut key = "";
        if kind == Kind::Object {
            let end = value_end(b, i);
            key = text.get(i..end).unwrap_or("");
            i = skip_ws(b, end);
            // the colon
            i = skip_ws(b, i + 1);
        }
        let end = value_end(b, i);
        out.push((key, text.get(i..end).unwrap_or("")));
        i = skip_ws(b, end);
        if b.get(i) == Some(&b',') {
            i = skip_ws(b, i + 1);
        }
    }
    (kind, out)
}

/// `regexp_matches(string, pattern [, flags])` as a list of `text[]`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct RegexpMatches {
    signature: Signature,
}

fn text_array_list() -> DataType {
    DataType::List(Arc::new(Field::new("item", text_list(), true)))
}

impl ScalarUDFImpl for RegexpMatches {
    fn name(&self) -> &str {
        REGEXP_MATCHES
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(text_array_list())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        check_text_args("regexp_matches", args.arg_fields, 2, 3)?;
        Ok(Arc::new(Field::new(self.name(), text_array_list(), true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = all_scalar(&args.args);
        let rows = if scalar { 1 } else { args.number_rows };
        let mut b = ListBuilder::new(ListBuilder::new(StringBuilder::new()));
        // the pattern is a constant nearly always: compiled once then
        let mut compiled: Option<(String, Option<String>, regex::Regex, bool)> = None;
        for row in 0..rows {
            let s = text_at(&args.args, 0, row)?;
            let pattern = text_at(&args.args, 1, row)?;
            let flags = if args.args.len() > 2 {
                match text_at(&args.args, 2, row)? {
                    Some(f) => Some(f),
                    None => {
                        b.append(true);
                        continue;
                    }
                }
            } else {
                None
            };
            let (Some(s), Some(pattern)) = (s, pattern) else {
                b.append(true);
                continue;
            };
            let fresh = !matches!(&compiled, Some((p, f, _, _)) if *p == pattern && *f == flags);
            if fresh {
                let (re, global) =
                    regex_for(&pattern, flags.as_deref()).map_err(DataFusionError::from)?;
                compiled = Some((pattern, flags, re, global));
            }
            if let Some((_, _, re, global)) = &compiled {
                for groups in matches(re, *global, &s) {
                    let inner = b.values();
                    for g in groups {
                        inner.values().append_option(g);
                    }
                    inner.append(true);
                }
            }
            b.append(true);
        }
        crate::udf_args::scalar_if(scalar, Arc::new(b.finish()))
    }
}

/// The regex of a pattern and PostgreSQL's flags, and whether `g` was
/// given. Flags PostgreSQL knows but Eddy does not implement are 0A000;
/// others are PostgreSQL's 22023.
pub(crate) fn regex_for(
    pattern: &str,
    flags: Option<&str>,
) -> Result<(regex::Regex, bool), SqlError> {
    let mut builder = regex::RegexBuilder::new(pattern);
    let mut global = false;
    for f in flags.unwrap_or("").chars() {
        match f {
            'g' => global = true,
            'i' => {
                builder.case_insensitive(true);
            }
            'c' => {
                builder.case_insensitive(false);
            }
            'b' | 'e' | 'm' | 'n' | 'p' | 'q' | 's' | 't' | 'w' | 'x' => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "regular expression option \"{f}\" is not supported by Eddy (it supports g, i and c)"
                )))
            }
            other => {
                return Err(SqlError::InvalidParameter(format!(
                    "invalid regular expression option: \"{other}\""
                )))
            }
        }
    }
    let re = builder
        .size_limit(1 << 20)
        .build()
        .map_err(|e| SqlError::InvalidRegularExpression(e.to_string()))?;
    Ok((re, global))
}

/// Each match's capture groups (an unmatched one NULL), or the whole match
/// when the pattern has none; only the first match unless `global`.
pub(crate) fn matches(re: &regex::Regex, global: bool, s: &str) -> Vec<Vec<Option<String>>> {
    let mut out = Vec::new();
    for caps in re.captures_iter(s) {
        let groups: Vec<Option<String>> = if caps.len() > 1 {
            (1..caps.len())
                .map(|i| caps.get(i).map(|m| m.as_str().to_string()))
                .collect()
        } else {
            vec![caps.get(0).map(|m| m.as_str().to_string())]
        };
        out.push(groups);
        if !global {
            break;
        }
    }
    out
}

/// Refuses with 0A000 when planned: registered under each set-returning
/// function's name, it is a call left where PostgreSQL would make rows and
/// Eddy cannot.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Refused {
    name: String,
    signature: Signature,
}

impl ScalarUDFImpl for Refused {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Err(DataFusionError::from(SqlError::FeatureNotSupported(
            format!(
                "set-returning function {} is supported only in FROM and as a select-list item \
             (alone, cast, subscripted or an operand of an operator)",
                self.name
            ),
        )))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Err(DataFusionError::from(SqlError::FeatureNotSupported(
            format!("{} is not supported here", self.name),
        )))
    }
}

/// For tests: the list a function gives for one argument.
#[cfg(test)]
fn items(part: Part, jsonb: bool, text: &str) -> Result<Vec<Option<String>>, &'static str> {
    json_items(part, jsonb, "f", text).map_err(|e| e.sqlstate())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(v: &[&str]) -> Vec<Option<String>> {
        v.iter().map(|s| Some(s.to_string())).collect()
    }

    #[test]
    fn json_keeps_each_elements_text() {
        assert_eq!(
            items(
                Part::Elements,
                false,
                r#" [ 1.50 , {"b" : 2, "a":[1,"]"]},"x\"y" ,null] "#
            ),
            Ok(some(&[
                "1.50",
                r#"{"b" : 2, "a":[1,"]"]}"#,
                r#""x\"y""#,
                "null"
            ]))
        );
        assert_eq!(
            items(Part::ElementsText, false, r#"["a\nb", null, [1]]"#),
            Ok(vec![Some("a\nb".into()), None, Some("[1]".into())])
        );
        assert_eq!(items(Part::Elements, false, "[]"), Ok(vec![]));
        assert_eq!(items(Part::Elements, false, r#"{"a":1}"#), Err("22023"));
        assert_eq!(items(Part::Elements, false, "3"), Err("22023"));
        assert_eq!(items(Part::Elements, false, "[1,"), Err("22P02"));
    }

    #[test]
    fn json_each_keeps_order_and_duplicates_jsonb_does_not() {
        let text = r#"{"bb":1,"a":"x","bb":{"c" :null}}"#;
        assert_eq!(items(Part::Keys, false, text), Ok(some(&["bb", "a", "bb"])));
        assert_eq!(
            items(Part::Values, false, text),
            Ok(some(&["1", r#""x""#, r#"{"c" :null}"#]))
        );
        assert_eq!(items(Part::Keys, true, text), Ok(some(&["a", "bb"])));
        assert_eq!(
            items(Part::Values, true, text),
            Ok(some(&[r#""x""#, r#"{"c": null}"#]))
        );
        assert_eq!(
            items(Part::TextValues, true, r#"{"a":null,"b":"s"}"#),
            Ok(vec![None, Some("s".into())])
        );
        assert_eq!(items(Part::Keys, true, "[1]"), Err("22023"));
        assert_eq!(items(Part::Values, false, "1"), Err("22023"));
    }

    #[test]
    fn records_quote_as_postgresql() {
        // PostgreSQL 15: SELECT jsonb_each('{"b":"x y","a":null,"c":[1,2]}')
        assert_eq!(
            items(Part::Records, true, r#"{"b":"x y","a":null,"c":[1,2]}"#),
            Ok(some(&["(a,null)", r#"(b,"""x y""")"#, r#"(c,"[1, 2]")"#]))
        );
        assert_eq!(
            items(Part::TextRecords, false, r#"{"b":"x y","a":null,"":"\\"}"#),
            Ok(some(&[r#"(b,"x y")"#, "(a,)", r#"("","\\")"#]))
        );
    }

    #[test]
    fn regexp_matches_groups_and_flags() {
        let (re, global) = regex_for(r"(\d)(\w)?", Some("g")).expect("compiles");
        assert_eq!(
            matches(&re, global, "a1b2"),
            vec![
                vec![Some("1".to_string()), Some("b".to_string())],
                vec![Some("2".to_string()), None]
            ]
        );
        let (re, global) = regex_for("B", Some("i")).expect("compiles");
        assert_eq!(
            matches(&re, global, "abcb"),
            vec![vec![Some("b".to_string())]]
        );
        assert_eq!(
            regex_for("a", Some("z")).err().map(|e| e.sqlstate()),
            Some("22023")
        );
        assert_eq!(
            regex_for("a", Some("x")).err().map(|e| e.sqlstate()),
            Some("0A000")
        );
        assert_eq!(
            regex_for("(", None).err().map(|e| e.sqlstate()),
            Some("2201B")
        );
    }
}
