//! `json` / `jsonb` in DataFusion plans: the casts `x::json`, `x::jsonb`
//! (rewritten on the AST to `eddy_json_in` / `eddy_jsonb_in`) and the
//! operators `->`, `->>`, `@>` and `?`, which the SQL planner hands to
//! [`JsonPlanner`] (a DataFusion `ExprPlanner`) as the UDFs below. Values
//! are Arrow `Utf8`; a result that is json or jsonb says so in its field's
//! metadata (`pgtypes::DECLARED_TYPE_KEY`), which gives its OID.
//! The semantics live in [`crate::json`].

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::DFSchema;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;
use eddy_common::ColumnType;

use crate::error::SqlError;
use crate::json::{self, JNode, Key};
use crate::pgtypes::declared_type_metadata;

/// Name of the text -> json function (`x::json`).
pub const JSON_IN: &str = "eddy_json_in";
/// Name of the text -> jsonb function (`x::jsonb`).
pub const JSONB_IN: &str = "eddy_jsonb_in";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    JsonIn,
    JsonbIn,
    /// `->`
    Get,
    /// `->>`
    GetText,
    /// `@>`
    Contains,
    /// `?`
    Exists,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonFunction {
    op: Op,
    signature: Signature,
}

pub(crate) fn is_text(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 | DataType::Null
    )
}

/// The strings of a text array (NULLs as `None`).
pub(crate) fn strings(a: &ArrayRef) -> DfResult<Vec<Option<String>>> {
    Ok(match a.data_type() {
        DataType::Utf8 => a
            .as_string::<i32>()
            .iter()
            .map(|s| s.map(str::to_string))
            .collect(),
        DataType::LargeUtf8 => a
            .as_string::<i64>()
            .iter()
            .map(|s| s.map(str::to_string))
            .collect(),
        DataType::Utf8View => a
            .as_string_view()
            .iter()
            .map(|s| s.map(str::to_string))
            .collect(),
        DataType::Null => vec![None; a.len()],
        other => {
            return Err(DataFusionError::from(SqlError::DatatypeMismatch(format!(
                "operator does not exist for type {other}"
            ))))
        }
    })
}

/// The keys of `->`'s right operand: text names or integer indexes.
pub(crate) fn keys(a: &ArrayRef) -> DfResult<Vec<Option<Key>>> {
    let ints = |v: Vec<Option<i64>>| v.into_iter().map(|x| x.map(Key::Index)).collect();
    Ok(match a.data_type() {
        DataType::Int16 => ints(
            a.as_primitive::<datafusion::arrow::datatypes::Int16Type>()
                .iter()
                .map(|x| x.map(i64::from))
                .collect(),
        ),
        DataType::Int32 => ints(
            a.as_primitive::<datafusion::arrow::datatypes::Int32Type>()
                .iter()
                .map(|x| x.map(i64::from))
                .collect(),
        ),
        DataType::Int64 => ints(
            a.as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                .iter()
                .collect(),
        ),
        _ => strings(a)?.into_iter().map(|s| s.map(Key::Name)).collect(),
    })
}

pub(crate) fn parse_cell(s: &str) -> DfResult<JNode> {
    json::parse(s, "json").map_err(DataFusionError::from)
}

impl JsonFunction {
    fn return_type_of(&self) -> DataType {
        match self.op {
            Op::Contains | Op::Exists => DataType::Boolean,
            _ => DataType::Utf8,
        }
    }
}

impl ScalarUDFImpl for JsonFunction {
    fn name(&self) -> &str {
        match self.op {
            Op::JsonIn => JSON_IN,
            Op::JsonbIn => JSONB_IN,
            Op::Get => "eddy_jsonb_get",
            Op::GetText => "eddy_jsonb_get_text",
            Op::Contains => "eddy_jsonb_contains",
            Op::Exists => "eddy_jsonb_exists",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(self.return_type_of())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let declared = match self.op {
            Op::JsonIn => Some(ColumnType::Json),
            Op::JsonbIn | Op::Get => Some(ColumnType::Jsonb),
            _ => None,
        };
        let mut f = Field::new(self.name(), self.return_type_of(), true);
        if let Some(t) = declared {
            f = f.with_metadata(declared_type_metadata(t));
        }
        let first_text = args
            .arg_fields
            .first()
            .is_some_and(|f| is_text(f.data_type()));
        if !first_text {
            return Err(DataFusionError::from(SqlError::DatatypeMismatch(format!(
                "{} takes json or jsonb",
                self.name()
            ))));
        }
        Ok(Arc::new(f))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = args.number_rows;
        let arrays = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<DfResult<Vec<_>>>()?;
        let out: ArrayRef = match (self.op, arrays.as_slice()) {
            (Op::JsonIn | Op::JsonbIn, [a]) => {
                let mut b = StringBuilder::with_capacity(a.len(), 0);
                for s in strings(a)? {
                    match s {
                        None => b.append_null(),
                        Some(s) if self.op == Op::JsonIn => {
                            json::check_json(&s).map_err(DataFusionError::from)?;
                            b.append_value(s);
                        }
                        Some(s) => b.append_value(
                            json::normalize_jsonb(&s).map_err(DataFusionError::from)?,
                        ),
                    }
                }
                Arc::new(b.finish())
            }
            (Op::Get | Op::GetText, [j, k]) => {
                let mut b = StringBuilder::with_capacity(j.len(), 0);
                for (s, key) in strings(j)?.into_iter().zip(keys(k)?) {
                    let (Some(s), Some(key)) = (s, key) else {
                        b.append_null();
                        continue;
                    };
                    let mut node = parse_cell(&s)?;
                    json::canonicalize(&mut node);
                    let got = json::get(&node, &key);
                    match (self.op, got) {
                        (_, None) => b.append_null(),
                        (Op::Get, Some(v)) => b.append_value(json::to_text(v)),
                        (_, Some(v)) => b.append_option(json::as_text(v)),
                    }
                }
                Arc::new(b.finish())
            }
            (Op::Contains, [l, r]) => {
                let mut b = BooleanBuilder::with_capacity(l.len());
                for (a, c) in strings(l)?.into_iter().zip(strings(r)?) {
                    match (a, c) {
                        (Some(a), Some(c)) => {
                            b.append_value(json::contains(&parse_cell(&a)?, &parse_cell(&c)?))
                        }
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            (Op::Exists, [l, r]) => {
                let mut b = BooleanBuilder::with_capacity(l.len());
                for (a, k) in strings(l)?.into_iter().zip(strings(r)?) {
                    match (a, k) {
                        (Some(a), Some(k)) => b.append_value(json::has_key(&parse_cell(&a)?, &k)),
                        _ => b.append_null(),
                    }
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
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

fn function(op: Op) -> ScalarUDF {
    let arity = match op {
        Op::JsonIn | Op::JsonbIn => 1,
        _ => 2,
    };
    ScalarUDF::new_from_impl(JsonFunction {
        op,
        signature: Signature::any(arity, Volatility::Immutable),
    })
}

/// The json functions a session registers (the casts' targets).
pub fn json_functions() -> Vec<ScalarUDF> {
    vec![function(Op::JsonIn), function(Op::JsonbIn)]
}

/// Plans `->`, `->>`, `@>` and `?` whose left operand is text (a json or
/// jsonb column, or a cast to one), and through
/// [`crate::json_paths::plan_path_op`] `#>`, `#>>`, `?|`, `?&`, and `-`,
/// `||` on jsonb; anything else is left to DataFusion.
#[derive(Debug, Default)]
pub struct JsonPlanner;

impl ExprPlanner for JsonPlanner {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawBinaryExpr>> {
        // `@>` / `<@` with an array on either side: the other side, when
        // not yet an array (a string literal, a text parameter), is read as
        // that array type, as PostgreSQL resolves an unknown operand
        if matches!(expr.op, BinaryOperator::AtArrow | BinaryOperator::ArrowAt) {
            let is_list = |t: &Option<DataType>| {
                matches!(t, Some(DataType::List(_) | DataType::LargeList(_)))
            };
            let lt = schema_type(&expr.left, schema);
            let rt = schema_type(&expr.right, schema);
            if is_list(&lt) || is_list(&rt) {
                let contains = expr.op == BinaryOperator::AtArrow;
                let RawBinaryExpr {
                    mut left,
                    mut right,
                    ..
                } = expr;
                match (&lt, &rt) {
                    (Some(t), r) if is_list(&lt) && !is_list(r) => {
                        right = match crate::array_type::array_in_for(t, right) {
                            Ok(e) | Err(e) => e,
                        };
                    }
                    (l, Some(t)) if is_list(&rt) && !is_list(l) => {
                        left = match crate::array_type::array_in_for(t, left) {
                            Ok(e) | Err(e) => e,
                        };
                    }
                    _ => {}
                }
                let (outer, inner) = if contains {
                    (left, right)
                } else {
                    (right, left)
                };
                return Ok(PlannerResult::Planned(
                    datafusion::functions_nested::expr_fn::array_has_all(outer, inner),
                ));
            }
        }
        let expr = match crate::json_paths::plan_path_op(expr, schema)? {
            PlannerResult::Planned(e) => return Ok(PlannerResult::Planned(e)),
            PlannerResult::Original(expr) => expr,
        };
        let op = match expr.op {
            BinaryOperator::Arrow => Op::Get,
            BinaryOperator::LongArrow => Op::GetText,
            BinaryOperator::AtArrow => Op::Contains,
            BinaryOperator::Question => Op::Exists,
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let left_type = schema_type(&expr.left, schema);
        let left_is_text = matches!(left_type, Some(t) if is_text(&t));
        if !left_is_text {
            return Ok(PlannerResult::Original(expr));
        }
        let RawBinaryExpr { left, right, .. } = expr;
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(Arc::new(function(op)), vec![left, right]),
        )))
    }
}

pub(crate) fn schema_type(e: &Expr, schema: &DFSchema) -> Option<DataType> {
    use datafusion::logical_expr::ExprSchemable;
    e.get_type(schema).ok()
}
