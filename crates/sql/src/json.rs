//! `json` and `jsonb` values: validation, jsonb's normal form, and the
//! operators `->`, `->>`, `@>` and `?`.
//!
//! Both types are stored as text (`ColumnType::storage` is `Text`): a
//! `json` value is its input text exactly, once `serde_json` has accepted
//! it; a `jsonb` value is the text of its normal form, as PostgreSQL's
//! `jsonb_out` prints it: object keys sorted by length, then bytewise, the
//! last of duplicate keys kept, `", "` between members and `": "` after a
//! key. Parsing is `serde_json`'s (recursion limit 128), into [`JNode`],
//! which keeps members in input order so the normal form is made here.
//!
//! Known difference from PostgreSQL: a jsonb number that is not an integer
//! is held as an `f64` (the workspace's `serde_json` has no
//! `arbitrary_precision`), so `1.50` prints `1.5` and digits past 17
//! significant ones are lost; integers up to 64 bits are exact. `json`
//! keeps its text exactly.

use std::cmp::Ordering;
use std::fmt::Write;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::{Result, SqlError};

/// A parsed JSON value, object members in input order.
#[derive(Clone, Debug, PartialEq)]
pub enum JNode {
    Null,
    Bool(bool),
    /// An integer that fits 64 bits (signed or not), exactly.
    Int(i128),
    Float(f64),
    String(String),
    Array(Vec<JNode>),
    Object(Vec<(String, JNode)>),
}

impl<'de> Deserialize<'de> for JNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<JNode, D::Error> {
        d.deserialize_any(JNodeVisitor)
    }
}

struct JNodeVisitor;

impl<'de> Visitor<'de> for JNodeVisitor {
    type Value = JNode;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<JNode, E> {
        Ok(JNode::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<JNode, E> {
        Ok(JNode::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<JNode, E> {
        Ok(JNode::Int(i128::from(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<JNode, E> {
        Ok(JNode::Int(i128::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<JNode, E> {
        Ok(JNode::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<JNode, E> {
        Ok(JNode::String(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<JNode, E> {
        Ok(JNode::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<JNode, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(JNode::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<JNode, A::Error> {
        let mut out = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, JNode>()? {
            out.push((k, v));
        }
        Ok(JNode::Object(out))
    }
}

fn invalid(type_name: &str, s: &str, e: &serde_json::Error) -> SqlError {
    SqlError::InvalidText(format!(
        "invalid input syntax for type {type_name}: \"{s}\" ({e})"
    ))
}

/// Parses JSON text; 22P02 if it is not JSON.
pub fn parse(s: &str, type_name: &str) -> Result<JNode> {
    serde_json::from_str::<JNode>(s).map_err(|e| invalid(type_name, s, &e))
}

/// Checks that `s` is JSON (PostgreSQL's `json_in`); the text is kept as is.
pub fn check_json(s: &str) -> Result<()> {
    serde_json::from_str::<de::IgnoredAny>(s)
        .map(|_| ())
        .map_err(|e| invalid("json", s, &e))
}

/// The jsonb normal form of JSON text (PostgreSQL's `jsonb_in` then
/// `jsonb_out`); 22P02 if it is not JSON.
pub fn normalize_jsonb(s: &str) -> Result<String> {
    let mut node = parse(s, "jsonb")?;
    canonicalize(&mut node);
    Ok(to_text(&node))
}

/// PostgreSQL's order of jsonb object keys: shorter first, then bytewise.
fn key_order(a: &str, b: &str) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// Sorts object keys as jsonb does and keeps the last of duplicates.
pub fn canonicalize(node: &mut JNode) {
    match node {
        JNode::Array(items) => items.iter_mut().for_each(canonicalize),
        JNode::Object(members) => {
            // stable: duplicates stay in input order, so the last wins
            members.sort_by(|a, b| key_order(&a.0, &b.0));
            let mut out: Vec<(String, JNode)> = Vec::with_capacity(members.len());
            for (k, mut v) in members.drain(..) {
                canonicalize(&mut v);
                match out.last_mut() {
                    Some(last) if last.0 == k => last.1 = v,
                    _ => out.push((k, v)),
                }
            }
            *members = out;
        }
        _ => {}
    }
}

fn write_string(s: &str, out: &mut String) {
    // serde_json escapes as PostgreSQL's escape_json: \" \\ \b \f \n \r \t
    // and other control characters as \u00XX
    match serde_json::to_string(s) {
        Ok(q) => out.push_str(&q),
        Err(_) => out.push_str("\"\""),
    }
}

fn write_node(node: &JNode, out: &mut String) {
    match node {
        JNode::Null => out.push_str("null"),
        JNode::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        JNode::Int(i) => {
            let _ = write!(out, "{i}");
        }
        JNode::Float(f) => {
            // finite (JSON has no NaN); Display never uses an exponent
            let _ = write!(out, "{f}");
        }
        JNode::String(s) => write_string(s, out),
        JNode::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_node(v, out);
            }
            out.push(']');
        }
        JNode::Object(members) => {
            out.push('{');
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(k, out);
                out.push_str(": ");
                write_node(v, out);
            }
            out.push('}');
        }
    }
}

/// jsonb's text form of a (canonical) node.
pub fn to_text(node: &JNode) -> String {
    let mut out = String::new();
    write_node(node, &mut out);
    out
}

/// `j -> 'key'` / `j -> n`: the member or element, `None` if absent.
/// A negative index counts from the end, as in PostgreSQL.
pub fn get<'a>(node: &'a JNode, key: &Key) -> Option<&'a JNode> {
    match (node, key) {
        (JNode::Object(members), Key::Name(k)) => {
            members.iter().rev().find(|(m, _)| m == k).map(|(_, v)| v)
        }
        (JNode::Array(items), Key::Index(i)) => {
            let len = i64::try_from(items.len()).ok()?;
            let at = if *i < 0 { len.checked_add(*i)? } else { *i };
            items.get(usize::try_from(at).ok()?)
        }
        _ => None,
    }
}

/// The right operand of `->` / `->>`.
#[derive(Clone, Debug, PartialEq)]
pub enum Key {
    Name(String),
    Index(i64),
}

/// `->>`'s text of a node: a string unquoted, JSON null as SQL NULL,
/// anything else its jsonb text.
pub fn as_text(node: &JNode) -> Option<String> {
    match node {
        JNode::Null => None,
        JNode::String(s) => Some(s.clone()),
        other => Some(to_text(other)),
    }
}

fn scalar_eq(a: &JNode, b: &JNode) -> bool {
    match (a, b) {
        (JNode::Int(x), JNode::Float(y)) | (JNode::Float(y), JNode::Int(x)) => {
            // equal only when the float is exactly that integer (the
            // saturating cast cannot reach a 64-bit integer's value falsely)
            y.fract() == 0.0 && (*y as i128) == *x
        }
        _ => a == b,
    }
}

/// `a @> b` on jsonb (PostgreSQL's `JsonbDeepContains`): objects contain
/// objects whose every member they contain, arrays contain arrays whose
/// every element one of theirs contains, scalars only equal scalars; at the
/// top level an array also contains a scalar it holds.
pub fn contains(a: &JNode, b: &JNode) -> bool {
    match (a, b) {
        (JNode::Array(items), b) if !matches!(b, JNode::Array(_) | JNode::Object(_)) => {
            items.iter().any(|x| scalar_eq(x, b))
        }
        _ => deep_contains(a, b),
    }
}

fn deep_contains(a: &JNode, b: &JNode) -> bool {
    match (a, b) {
        (JNode::Object(am), JNode::Object(bm)) => bm.iter().all(|(k, bv)| {
            am.iter()
                .rev()
                .find(|(ak, _)| ak == k)
                .is_some_and(|(_, av)| deep_contains(av, bv))
        }),
        (JNode::Array(ai), JNode::Array(bi)) => bi.iter().all(|bv| match bv {
            JNode::Array(_) | JNode::Object(_) => ai.iter().any(|av| deep_contains(av, bv)),
            scalar => ai.iter().any(|av| scalar_eq(av, scalar)),
        }),
        (JNode::Array(_) | JNode::Object(_), _) | (_, JNode::Array(_) | JNode::Object(_)) => false,
        (a, b) => scalar_eq(a, b),
    }
}

/// `j ? 'key'`: a top-level object key, or a string element of a top-level
/// array (or the string itself).
pub fn has_key(node: &JNode, key: &str) -> bool {
    match node {
        JNode::Object(members) => members.iter().any(|(k, _)| k == key),
        JNode::Array(items) => items
            .iter()
            .any(|v| matches!(v, JNode::String(s) if s == key)),
        JNode::String(s) => s == key,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonb_normal_form_is_postgresqls() {
        for (input, want) in [
            (r#"{"b":[1,2],"a":1}"#, r#"{"a": 1, "b": [1, 2]}"#),
            (r#"{"aa":1,"b":2,"a":3}"#, r#"{"a": 3, "b": 2, "aa": 1}"#),
            (r#"{"a":1,"a":2}"#, r#"{"a": 2}"#),
            (
                r#" [ true , null, "x\ny\u00e9" ] "#,
                "[true, null, \"x\\ny\u{e9}\"]",
            ),
            ("{}", "{}"),
            ("[]", "[]"),
            ("-12", "-12"),
            ("1.5", "1.5"),
            ("1e3", "1000"),
            ("18446744073709551615", "18446744073709551615"),
            (
                r#"{"k":{"z":1,"y":{"b":1,"a":2}}}"#,
                r#"{"k": {"y": {"a": 2, "b": 1}, "z": 1}}"#,
            ),
            (r#""\u0001""#, r#""\u0001""#),
        ] {
            assert_eq!(normalize_jsonb(input).unwrap(), want, "{input}");
        }
    }

    #[test]
    fn invalid_json_is_22p02_and_never_panics() {
        for bad in [
            "", "{", "[1,]", "{'a':1}", "nul", "1 2", "{\"a\"}", "\"\\x\"", "NaN",
        ] {
            assert_eq!(
                normalize_jsonb(bad).unwrap_err().sqlstate(),
                "22P02",
                "{bad}"
            );
            assert_eq!(check_json(bad).unwrap_err().sqlstate(), "22P02", "{bad}");
        }
        // nesting past serde_json's limit is an error, not a stack overflow
        let deep = "[".repeat(100_000);
        assert!(normalize_jsonb(&deep).is_err());
        assert!(check_json(&deep).is_err());
    }

    #[test]
    fn operators_follow_postgresql() {
        let j = parse(r#"{"a": {"b": [1, 2, "x"]}, "c": null, "d": "s"}"#, "jsonb").unwrap();
        let a = get(&j, &Key::Name("a".into())).unwrap();
        assert_eq!(to_text(a), r#"{"b": [1, 2, "x"]}"#);
        let b = get(a, &Key::Name("b".into())).unwrap();
        assert_eq!(get(b, &Key::Index(-1)).and_then(as_text), Some("x".into()));
        assert_eq!(get(b, &Key::Index(3)), None);
        assert_eq!(get(b, &Key::Index(i64::MIN)), None);
        assert_eq!(get(&j, &Key::Name("c".into())).and_then(as_text), None);
        assert_eq!(
            get(&j, &Key::Name("d".into())).and_then(as_text),
            Some("s".into())
        );
        let p = |s: &str| parse(s, "jsonb").unwrap();
        assert!(contains(&j, &p(r#"{"a": {"b": [2]}}"#)));
        assert!(!contains(&j, &p(r#"{"a": {"b": [3]}}"#)));
        assert!(contains(&p("[1, 2, [3]]"), &p("[[3], 1]")));
        assert!(contains(&p("[1, 2]"), &p("1")));
        assert!(!contains(&p("1"), &p("[1]")));
        assert!(contains(&p("1.0"), &p("1")));
        assert!(has_key(&j, "c"));
        assert!(!has_key(&j, "b"));
        assert!(has_key(&p(r#"["x", 1]"#), "x"));
    }
}
