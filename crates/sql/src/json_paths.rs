//! jsonb paths and edits: the operators `#>`, `#>>`, `-`, `||`, `?|` and
//! `?&` (planned by [`plan_path_op`], which the json `ExprPlanner` calls)
//! and `jsonb_set`.
//!
//! A path is a text array: a literal such as `'{a,b}'` (read as
//! PostgreSQL's array text) or an `ARRAY['a','b']`. Along a path an object
//! is entered by key, an array by an integer element (negative counts from
//! the end), as PostgreSQL's `jsonb_extract_path` and `setPath` do.
//!
//! `-` and `||` are planned only when an operand is declared jsonb (a
//! jsonb column, a cast, a jsonb function): `text || text` stays string
//! concatenation, and `json - x` is 42883 as in PostgreSQL.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;
use eddy_common::{ColumnType, Value};

use crate::error::SqlError;
use crate::json::{self, JNode, Key};
use crate::json_functions::{is_text, keys, parse_cell, schema_type, strings};
use crate::pgtypes::{declared_type, declared_type_metadata};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    /// `#>`
    Path,
    /// `#>>`
    PathText,
    /// `jsonb - text | int | text[]`
    Delete,
    /// `jsonb || jsonb`
    Concat,
    /// `?|`
    ExistsAny,
    /// `?&`
    ExistsAll,
    /// `jsonb_set(target, path, new [, create_missing])`
    Set,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct PathFunction {
    op: Op,
    signature: Signature,
}

fn function(op: Op) -> ScalarUDF {
    let signature = match op {
        Op::Set => Signature::one_of(
            vec![TypeSignature::Any(3), TypeSignature::Any(4)],
            Volatility::Immutable,
        ),
        _ => Signature::any(2, Volatility::Immutable),
    };
    ScalarUDF::new_from_impl(PathFunction { op, signature })
}

/// `jsonb_set`, for the session to register (the operators' functions are
/// planned directly).
pub fn json_path_functions() -> Vec<ScalarUDF> {
    vec![function(Op::Set)]
}

/// The type an expression is declared to have (json, jsonb), if any.
fn declared(e: &Expr, schema: &DFSchema) -> Option<ColumnType> {
    use datafusion::logical_expr::ExprSchemable;
    let (_, field) = e.to_field(schema).ok()?;
    declared_type(&field)
}

/// A string literal, whose type PostgreSQL would resolve from the other
/// operand (`jsonb || '[1]'`).
fn untyped_literal(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Literal(ScalarValue::Utf8(_) | ScalarValue::Utf8View(_), _)
    )
}

/// Plans `#>`, `#>>`, `?|`, `?&` on text, and `-`, `||` on jsonb;
/// anything else is handed back unchanged.
pub fn plan_path_op(
    expr: RawBinaryExpr,
    schema: &DFSchema,
) -> DfResult<PlannerResult<RawBinaryExpr>> {
    let left_text = schema_type(&expr.left, schema).is_some_and(|t| is_text(&t));
    let left = declared(&expr.left, schema);
    let right = declared(&expr.right, schema);
    let op = match expr.op {
        BinaryOperator::HashArrow if left_text => Op::Path,
        BinaryOperator::HashLongArrow if left_text => Op::PathText,
        BinaryOperator::QuestionPipe if left_text => Op::ExistsAny,
        BinaryOperator::QuestionAnd if left_text => Op::ExistsAll,
        BinaryOperator::Minus if left == Some(ColumnType::Jsonb) => Op::Delete,
        BinaryOperator::Minus if left == Some(ColumnType::Json) => {
            return Err(DataFusionError::from(SqlError::UndefinedOperator(
                "operator does not exist: json - (delete works on jsonb)".into(),
            )))
        }
        BinaryOperator::StringConcat
            if (left == Some(ColumnType::Jsonb)
                && (right == Some(ColumnType::Jsonb) || untyped_literal(&expr.right)))
                || (right == Some(ColumnType::Jsonb) && untyped_literal(&expr.left)) =>
        {
            Op::Concat
        }
        _ => return Ok(PlannerResult::Original(expr)),
    };
    let RawBinaryExpr { left, right, .. } = expr;
    Ok(PlannerResult::Planned(Expr::ScalarFunction(
        ScalarFunction::new_udf(Arc::new(function(op)), vec![left, right]),
    )))
}

/// The text arrays of a path argument: PostgreSQL array text or a list of
/// text; a NULL array is `None`, a NULL element `None` inside.
type Path = Vec<Option<String>>;

fn paths(a: &ArrayRef) -> DfResult<Vec<Option<Path>>> {
    match a.data_type() {
        DataType::List(_) | DataType::LargeList(_) => (0..a.len())
            .map(|row| {
                if a.is_null(row) {
                    return Ok(None);
                }
                match crate::array_type::list_items(a.as_ref(), row) {
                    Some(items) => strings(&items).map(Some),
                    None => Ok(None),
                }
            })
            .collect(),
        _ => strings(a)?
            .into_iter()
            .map(|s| {
                let Some(s) = s else { return Ok(None) };
                let items = crate::array_type::parse_array_text(&s, ColumnType::Text)
                    .map_err(DataFusionError::from)?;
                Ok(Some(
                    items
                        .into_iter()
                        .map(|v| match v {
                            Value::Text(t) => Some(t),
                            _ => None,
                        })
                        .collect(),
                ))
            })
            .collect(),
    }
}

/// A path element read as an array index (PostgreSQL's `strtoint`:
/// leading white space, an optional sign, digits, nothing after).
fn index_of(el: &str) -> Option<i64> {
    el.trim_start_matches([' ', '\t', '\n', '\r', '\u{b}', '\u{c}'])
        .parse::<i32>()
        .ok()
        .map(i64::from)
}

/// `j #> path`: the value at the path, `None` when any step is missing.
pub(crate) fn path_get<'a>(node: &'a JNode, path: &[Option<String>]) -> Option<&'a JNode> {
    let mut at = node;
    for el in path {
        let el = el.as_ref()?;
        at = match at {
            JNode::Object(_) => json::get(at, &Key::Name(el.clone()))?,
            JNode::Array(_) => json::get(at, &Key::Index(index_of(el)?))?,
            _ => return None,
        };
    }
    Some(at)
}

/// `jsonb_set`'s walk (PostgreSQL's `setPath`): replaces the value at the
/// path; adds the last step when it is missing and `create` is set (a key
/// to an object; an index past either end of an array appends or
/// prepends); leaves everything else, scalars on the way included, alone.
pub(crate) fn set_path(
    node: &mut JNode,
    path: &[Option<String>],
    level: usize,
    new: &JNode,
    create: bool,
) -> Result<(), SqlError> {
    let Some(el) = path.get(level) else {
        return Ok(());
    };
    let Some(el) = el else {
        return Err(SqlError::NullValueNotAllowed(format!(
            "path element at position {} is null",
            level + 1
        )));
    };
    let last = level + 1 == path.len();
    match node {
        JNode::Object(members) => match members.iter().rposition(|(k, _)| k == el) {
            Some(at) if last => members[at].1 = new.clone(),
            Some(at) => set_path(&mut members[at].1, path, level + 1, new, create)?,
            None if last && create => members.push((el.clone(), new.clone())),
            None => {}
        },
        JNode::Array(items) => {
            let idx = index_of(el).ok_or_else(|| {
                SqlError::InvalidText(format!(
                    "path element at position {} is not an integer: \"{el}\"",
                    level + 1
                ))
            })?;
            let n = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = if idx < 0 { n + idx } else { idx };
            if at < 0 {
                if last && create {
                    items.insert(0, new.clone());
                }
            } else if let Some(item) = usize::try_from(at).ok().and_then(|i| items.get_mut(i)) {
                if last {
                    *item = new.clone();
                } else {
                    set_path(item, path, level + 1, new, create)?;
                }
            } else if last && create {
                items.push(new.clone());
            }
        }
        _ => {}
    }
    Ok(())
}

/// The right operand of `jsonb - x`: a key or index, or a text array of keys.
enum Deletion {
    One(Key),
    Keys(Path),
}

fn cannot_delete_from_scalar() -> SqlError {
    SqlError::InvalidParameter("cannot delete from scalar".into())
}

/// `j - key`: an object's member, or an array's string elements equal to it.
fn delete_key(node: &mut JNode, key: &str) -> Result<(), SqlError> {
    match node {
        JNode::Object(members) => members.retain(|(k, _)| k != key),
        JNode::Array(items) => items.retain(|v| !matches!(v, JNode::String(s) if s == key)),
        _ => return Err(cannot_delete_from_scalar()),
    }
    Ok(())
}

/// `j - n`: an array's element (negative from the end; none if out of range).
fn delete_index(node: &mut JNode, idx: i64) -> Result<(), SqlError> {
    match node {
        JNode::Array(items) => {
            let n = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = if idx < 0 { n + idx } else { idx };
            if let Ok(at) = usize::try_from(at) {
                if at < items.len() {
                    items.remove(at);
                }
            }
            Ok(())
        }
        JNode::Object(_) => Err(SqlError::InvalidParameter(
            "cannot delete from object using integer index".into(),
        )),
        _ => Err(cannot_delete_from_scalar()),
    }
}

/// `a || b` (PostgreSQL's `IteratorConcat`): two objects merge, the
/// right's members winning; otherwise both become arrays (a scalar or an
/// object as one element) and are concatenated.
pub(crate) fn concat(a: JNode, b: JNode) -> JNode {
    match (a, b) {
        (JNode::Object(mut x), JNode::Object(y)) => {
            x.extend(y);
            let mut out = JNode::Object(x);
            json::canonicalize(&mut out);
            out
        }
        (a, b) => {
            let items = |n: JNode| match n {
                JNode::Array(v) => v,
                other => vec![other],
            };
            let mut out = items(a);
            out.extend(items(b));
            JNode::Array(out)
        }
    }
}

fn jsonb(s: &str) -> DfResult<JNode> {
    let mut node = parse_cell(s)?;
    json::canonicalize(&mut node);
    Ok(node)
}

impl PathFunction {
    fn result(&self) -> (DataType, Option<ColumnType>) {
        match self.op {
            Op::Path | Op::Delete | Op::Concat | Op::Set => {
                (DataType::Utf8, Some(ColumnType::Jsonb))
            }
            Op::PathText => (DataType::Utf8, None),
            Op::ExistsAny | Op::ExistsAll => (DataType::Boolean, None),
        }
    }
}

impl ScalarUDFImpl for PathFunction {
    fn name(&self) -> &str {
        match self.op {
            Op::Path => "eddy_jsonb_path",
            Op::PathText => "eddy_jsonb_path_text",
            Op::Delete => "eddy_jsonb_delete",
            Op::Concat => "eddy_jsonb_concat",
            Op::ExistsAny => "eddy_jsonb_exists_any",
            Op::ExistsAll => "eddy_jsonb_exists_all",
            Op::Set => "jsonb_set",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(self.result().0)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let texts = match self.op {
            Op::Concat => 2,
            _ => 1,
        };
        let all_text = args
            .arg_fields
            .iter()
            .take(texts)
            .all(|f| is_text(f.data_type()));
        if !all_text {
            return Err(DataFusionError::from(SqlError::UndefinedOperator(format!(
                "{} takes jsonb",
                self.name()
            ))));
        }
        let (t, declared) = self.result();
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
        let arrays = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<DfResult<Vec<_>>>()?;
        let out: ArrayRef = match (self.op, arrays.as_slice()) {
            (Op::Path | Op::PathText, [j, p]) => {
                let mut b = StringBuilder::new();
                for (s, path) in strings(j)?.into_iter().zip(paths(p)?) {
                    let (Some(s), Some(path)) = (s, path) else {
                        b.append_null();
                        continue;
                    };
                    let node = jsonb(&s)?;
                    match (self.op, path_get(&node, &path)) {
                        (_, None) => b.append_null(),
                        (Op::Path, Some(v)) => b.append_value(json::to_text(v)),
                        (_, Some(v)) => b.append_option(json::as_text(v)),
                    }
                }
                Arc::new(b.finish())
            }
            (Op::ExistsAny | Op::ExistsAll, [j, p]) => {
                let mut b = BooleanBuilder::new();
                for (s, path) in strings(j)?.into_iter().zip(paths(p)?) {
                    let (Some(s), Some(path)) = (s, path) else {
                        b.append_null();
                        continue;
                    };
                    let node = parse_cell(&s)?;
                    // NULL elements are skipped, as in PostgreSQL
                    let mut present = path.iter().flatten().map(|k| json::has_key(&node, k));
                    b.append_value(if self.op == Op::ExistsAny {
                        present.any(|x| x)
                    } else {
                        present.all(|x| x)
                    });
                }
                Arc::new(b.finish())
            }
            (Op::Delete, [j, k]) => {
                let whats: Vec<Option<Deletion>> =
                    if matches!(k.data_type(), DataType::List(_) | DataType::LargeList(_)) {
                        paths(k)?
                            .into_iter()
                            .map(|p| p.map(Deletion::Keys))
                            .collect()
                    } else {
                        keys(k)?.into_iter().map(|k| k.map(Deletion::One)).collect()
                    };
                let mut b = StringBuilder::new();
                for (s, what) in strings(j)?.into_iter().zip(whats) {
                    let (Some(s), Some(what)) = (s, what) else {
                        b.append_null();
                        continue;
                    };
                    let mut node = jsonb(&s)?;
                    let done = match what {
                        Deletion::One(Key::Name(k)) => delete_key(&mut node, &k),
                        Deletion::One(Key::Index(i)) => delete_index(&mut node, i),
                        Deletion::Keys(_)
                            if !matches!(node, JNode::Object(_) | JNode::Array(_)) =>
                        {
                            Err(cannot_delete_from_scalar())
                        }
                        Deletion::Keys(list) => list
                            .iter()
                            .flatten()
                            .try_for_each(|k| delete_key(&mut node, k)),
                    };
                    done.map_err(DataFusionError::from)?;
                    b.append_value(json::to_text(&node));
                }
                Arc::new(b.finish())
            }
            (Op::Concat, [l, r]) => {
                let mut b = StringBuilder::new();
                for (x, y) in strings(l)?.into_iter().zip(strings(r)?) {
                    match (x, y) {
                        (Some(x), Some(y)) => {
                            b.append_value(json::to_text(&concat(jsonb(&x)?, jsonb(&y)?)))
                        }
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            (Op::Set, [j, p, new, rest @ ..]) => {
                let creates: Vec<Option<bool>> = match rest {
                    [] => vec![Some(true); rows],
                    [c] if matches!(c.data_type(), DataType::Boolean) => {
                        c.as_boolean().iter().collect()
                    }
                    [c] if matches!(c.data_type(), DataType::Null) => vec![None; rows],
                    _ => {
                        return Err(DataFusionError::from(SqlError::UndefinedOperator(
                            "function jsonb_set: create_missing must be boolean".into(),
                        )))
                    }
                };
                let mut b = StringBuilder::new();
                let rows_in = strings(j)?
                    .into_iter()
                    .zip(paths(p)?)
                    .zip(strings(new)?)
                    .zip(creates);
                for (((s, path), new), create) in rows_in {
                    // strict, as PostgreSQL's jsonb_set
                    let (Some(s), Some(path), Some(new), Some(create)) = (s, path, new, create)
                    else {
                        b.append_null();
                        continue;
                    };
                    let mut node = jsonb(&s)?;
                    if !matches!(node, JNode::Object(_) | JNode::Array(_)) {
                        return Err(DataFusionError::from(SqlError::InvalidParameter(
                            "cannot set path in scalar".into(),
                        )));
                    }
                    set_path(&mut node, &path, 0, &jsonb(&new)?, create)
                        .map_err(DataFusionError::from)?;
                    json::canonicalize(&mut node);
                    b.append_value(json::to_text(&node));
                }
                Arc::new(b.finish())
            }
            _ => {
                return Err(DataFusionError::Plan(format!(
                    "{}: wrong number of arguments",
                    self.name()
                )))
            }
        };
        crate::udf_args::scalar_if(scalar, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> JNode {
        jsonb(s).unwrap()
    }

    fn path(els: &[&str]) -> Path {
        els.iter().map(|s| Some(s.to_string())).collect()
    }

    #[test]
    fn path_get_walks_objects_and_arrays() {
        let j = p(r#"{"a":{"b":[1,2,{"c":"x"}]}}"#);
        assert_eq!(
            path_get(&j, &path(&["a", "b", "-1", "c"])),
            Some(&JNode::String("x".into()))
        );
        assert_eq!(path_get(&j, &path(&["a", "b", " 0"])), Some(&JNode::Int(1)));
        assert_eq!(path_get(&j, &path(&["a", "b", "x"])), None);
        assert_eq!(path_get(&j, &path(&["a", "b", "-4"])), None);
        assert_eq!(path_get(&j, &[None]), None);
        assert_eq!(path_get(&j, &[]), Some(&j));
    }

    #[test]
    fn set_path_is_postgresqls_set_path() {
        let set = |j: &str, els: &[&str], new: &str, create: bool| {
            let mut n = p(j);
            set_path(&mut n, &path(els), 0, &p(new), create).map(|_| {
                json::canonicalize(&mut n);
                json::to_text(&n)
            })
        };
        assert_eq!(
            set(r#"{"a":{"b":1}}"#, &["a", "b"], "2", true).unwrap(),
            r#"{"a": {"b": 2}}"#
        );
        assert_eq!(
            set(r#"{"a":[1,2]}"#, &["a", "-1"], "9", true).unwrap(),
            r#"{"a": [1, 9]}"#
        );
        assert_eq!(
            set(r#"{"a":1}"#, &["c"], "3", false).unwrap(),
            r#"{"a": 1}"#
        );
        assert_eq!(
            set(r#"{"b":1}"#, &["a"], "3", true).unwrap(),
            r#"{"a": 3, "b": 1}"#
        );
        assert_eq!(set("[1,2]", &["5"], "3", true).unwrap(), "[1, 2, 3]");
        assert_eq!(set("[1,2]", &["-5"], "3", true).unwrap(), "[3, 1, 2]");
        assert_eq!(
            set(r#"{"a":1}"#, &["a", "b"], "3", true).unwrap(),
            r#"{"a": 1}"#
        );
        assert_eq!(
            set("[1]", &["x"], "3", true).unwrap_err().sqlstate(),
            "22P02"
        );
        let mut n = p(r#"{"a":1}"#);
        let err = set_path(&mut n, &[None], 0, &JNode::Null, true).unwrap_err();
        assert_eq!(err.sqlstate(), "22004");
    }

    #[test]
    fn delete_and_concat_follow_postgresql() {
        let mut n = p(r#"{"a":1,"b":2}"#);
        delete_key(&mut n, "a").unwrap();
        assert_eq!(json::to_text(&n), r#"{"b": 2}"#);
        let mut n = p(r#"["a","b",1]"#);
        delete_key(&mut n, "a").unwrap();
        delete_index(&mut n, -1).unwrap();
        assert_eq!(json::to_text(&n), r#"["b"]"#);
        assert_eq!(
            delete_index(&mut p("{}"), 0).unwrap_err().sqlstate(),
            "22023"
        );
        assert_eq!(
            delete_key(&mut p("1"), "a").unwrap_err().sqlstate(),
            "22023"
        );
        assert_eq!(json::to_text(&concat(p("1"), p("2"))), "[1, 2]");
        assert_eq!(
            json::to_text(&concat(p(r#"{"a":1}"#), p("[1]"))),
            r#"[{"a": 1}, 1]"#
        );
        assert_eq!(
            json::to_text(&concat(p(r#"{"a":1,"b":1}"#), p(r#"{"a":2}"#))),
            r#"{"a": 2, "b": 1}"#
        );
    }
}
