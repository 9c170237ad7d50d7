//! `CASE ... THEN '1' ELSE 2 END`: a result written as a string literal
//! takes the type the other results resolve to.
//!
//! PostgreSQL types a quoted literal as `unknown` until its context
//! resolves it: among CASE's results, to the type the others have in
//! common (`integer` here), so a literal that does not read as that type
//! fails (22P02 `invalid input syntax for type integer: "x"`). DataFusion
//! types it as text from the start and makes the whole CASE text. Run in
//! `result_types`' analyzer pass (before type coercion, after integer
//! literals became int4), this casts such literals to the common type of
//! the other results when that is a number or a boolean; coercion then
//! types the CASE as PostgreSQL does. DataFusion's planner already needs
//! the type of a CASE that is an operand of an arithmetic operator
//! (`CASE ... END + 1`), so [`CaseLiteralPlanner`] resolves those
//! operands as they are planned. Left alone: a CASE whose other
//! results are all literals or NULL (text, as in PostgreSQL), or include
//! any text, and other target types (dates and times, whose text reads
//! in the session's zone; the CASE stays text there, as before).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::Case;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::type_coercion::other::get_coerce_type_for_case_expression;
use datafusion::logical_expr::{Cast, Expr, ExprSchemable};

/// The largest scale a numeric literal keeps here (Arrow's decimal).
const MAX_DECIMAL_DIGITS: u8 = 38;

/// A quoted literal, `unknown` to PostgreSQL.
fn untyped(e: &Expr) -> Option<&str> {
    match e {
        Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)), _) => {
            Some(s.as_str())
        }
        _ => None,
    }
}

fn is_null_literal(e: &Expr) -> bool {
    matches!(e, Expr::Literal(v, _) if v.is_null())
}

/// A result's type, an integer literal in int4's range counting as int4
/// (`result_types` narrows it so, after the planner has run).
fn result_type(e: &Expr, input: &DFSchema) -> DfResult<DataType> {
    match e {
        Expr::Literal(ScalarValue::Int64(Some(v)), _) if i32::try_from(*v).is_ok() => {
            Ok(DataType::Int32)
        }
        e => e.get_type(input),
    }
}

/// Resolves a CASE's quoted literals where it is an operand of an
/// operator, before DataFusion types the operator.
#[derive(Debug, Default)]
pub struct CaseLiteralPlanner;

impl ExprPlanner for CaseLiteralPlanner {
    fn plan_binary_op(
        &self,
        mut expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawBinaryExpr>> {
        expr.left = resolve_case_literals(expr.left, schema)?.data;
        expr.right = resolve_case_literals(expr.right, schema)?.data;
        Ok(PlannerResult::Original(expr))
    }
}

/// The type a quoted literal `text` is cast to for results of common
/// type `common`, if Eddy resolves it (see the module doc).
fn literal_target(common: &DataType, text: &str) -> Option<DataType> {
    match common {
        t if t.is_integer() || t.is_floating() || *t == DataType::Boolean => Some(t.clone()),
        // numeric has no fixed scale in PostgreSQL: the literal keeps its
        // own fraction digits, coercion widens the others to match
        DataType::Decimal128(_, scale) => {
            let digits = text.trim().split_once('.').map_or(0, |(_, f)| {
                f.chars().take_while(char::is_ascii_digit).count()
            });
            let own = u8::try_from(digits).unwrap_or(MAX_DECIMAL_DIGITS);
            let scale = u8::try_from(*scale)
                .unwrap_or(0)
                .max(own)
                .min(MAX_DECIMAL_DIGITS);
            let scale = i8::try_from(scale).unwrap_or(0);
            Some(DataType::Decimal128(MAX_DECIMAL_DIGITS, scale))
        }
        _ => None,
    }
}

/// Casts a CASE's quoted-literal results as the module doc says.
pub(crate) fn resolve_case_literals(e: Expr, input: &DFSchema) -> DfResult<Transformed<Expr>> {
    let Expr::Case(case) = e else {
        return Ok(Transformed::no(e));
    };
    let results: Vec<&Expr> = case
        .when_then_expr
        .iter()
        .map(|(_, then)| then.as_ref())
        .chain(case.else_expr.as_deref())
        .collect();
    if !results.iter().any(|r| untyped(r).is_some()) {
        return Ok(Transformed::no(Expr::Case(case)));
    }
    let mut typed = Vec::new();
    for r in results
        .iter()
        .filter(|r| untyped(r).is_none() && !is_null_literal(r))
    {
        typed.push(result_type(r, input)?);
    }
    let textual = |t: &DataType| {
        matches!(
            t,
            DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 | DataType::Null
        )
    };
    let common = match typed.split_first() {
        Some((first, rest)) if !typed.iter().any(textual) => {
            get_coerce_type_for_case_expression(rest, Some(first))
        }
        _ => None,
    };
    let Some(common) = common else {
        return Ok(Transformed::no(Expr::Case(case)));
    };
    let resolve = |x: Box<Expr>| -> Box<Expr> {
        match untyped(&x).and_then(|text| literal_target(&common, text)) {
            Some(target) => Box::new(Expr::Cast(Cast::new(x, target))),
            None => x,
        }
    };
    let Case {
        expr,
        when_then_expr,
        else_expr,
    } = case;
    let when_then_expr = when_then_expr
        .into_iter()
        .map(|(when, then)| (when, resolve(then)))
        .collect();
    let else_expr = else_expr.map(resolve);
    Ok(Transformed::yes(Expr::Case(Case {
        expr,
        when_then_expr,
        else_expr,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_literals_keep_their_fraction_digits() {
        let common = DataType::Decimal128(12, 2);
        assert_eq!(
            literal_target(&common, "1.2345"),
            Some(DataType::Decimal128(38, 4))
        );
        assert_eq!(
            literal_target(&common, "7"),
            Some(DataType::Decimal128(38, 2))
        );
        assert_eq!(literal_target(&DataType::Int32, "x"), Some(DataType::Int32));
        assert_eq!(literal_target(&DataType::Date32, "2024-01-01"), None);
    }
}
