//! Numeric division with PostgreSQL's precision.
//!
//! Arrow divides `Decimal128(p1, s1)` by `Decimal128(p2, s2)` at scale
//! `s1 + 4`, so `1 / 3.0` is `0.3333` and `10.0 / 4` is `2.50000`, where
//! PostgreSQL gives at least 16 significant fraction digits
//! (`0.33333333333333333333`, `2.5000000000000000`). Now that `1.5` is a
//! numeric literal (`parse_float_as_decimal`), such divisions are common:
//! before, they were float8.
//!
//! This analyzer rule runs after DataFusion's type coercion and widens the
//! dividend's scale so that the quotient's scale is at least
//! [`MIN_QUOTIENT_SCALE`] and never below either operand's scale
//! (PostgreSQL's `select_div_scale` with a quotient weight of 0; it varies
//! the scale with the values, an Arrow column cannot).
//!
//! The dividend gets one digit more than the quotient needs, and the
//! quotient is cast back to its scale, which rounds the last digit as
//! PostgreSQL does (`2 / 3.0` is `0.6666666666666667`; Arrow's division
//! alone truncates).
//!
//! A `VALUES` list took its column types from its rows when it was
//! planned, before this rule: its cells are widened here too, and where a
//! column's type changes with them (a bare `VALUES (1.0 / 3)`) its type is
//! inferred again from the widened rows, names kept
//! (`crate::node_rewrite::retype_values`). `INSERT ... VALUES` evaluates
//! its list this way, so a quotient meets the column with 16 digits and is
//! rounded once, to the column's scale (it was computed at Arrow's 5
//! digits: `0.33333` was stored).
//!
//! Invariants:
//! * Only `Decimal128 / Decimal128` changes, and only by a cast of the
//!   dividend to a larger scale with the same integer digits and a cast of
//!   the quotient to one digit less scale (one more integer digit, for a
//!   rounding carry), so no value is refused that was not before: where 38
//!   digits do not leave room for the wider scale, the dividend keeps what
//!   fits (or is left as it was), and the quotient is then not rounded.
//! * Output names do not change (as in [`crate::result_types`]).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::DFSchema;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::BinaryExpr;
use datafusion::logical_expr::{Cast, Expr, ExprSchemable, LogicalPlan, Operator, Values};
use datafusion::optimizer::AnalyzerRule;

/// The smallest scale of a numeric quotient (PostgreSQL's
/// `NUMERIC_MIN_SIG_DIGITS`).
pub const MIN_QUOTIENT_SCALE: i8 = 16;

/// The scale Arrow adds to the dividend's for a quotient.
const ARROW_DIV_SCALE_INCREMENT: i8 = 4;

const MAX_PRECISION: u8 = 38;

/// The analyzer rule; it must run after DataFusion's `TypeCoercion`.
#[derive(Debug, Default)]
pub struct PgNumericDivision;

impl AnalyzerRule for PgNumericDivision {
    fn name(&self) -> &str {
        "eddy_pg_numeric_division"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        Ok(plan.transform_up_with_subqueries(widen_node)?.data)
    }
}

fn widen_node(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    match plan {
        LogicalPlan::Values(values) => widen_values(values),
        LogicalPlan::Limit(_) => Ok(Transformed::no(plan)),
        other => crate::node_rewrite::rewrite_node_expressions(other, widen_division),
    }
}

/// The quotients in a `VALUES` list's cells, and its column types where
/// those change (module doc).
fn widen_values(values: Values) -> DfResult<Transformed<LogicalPlan>> {
    let Values { schema, values } = values;
    let cells_schema = DFSchema::empty();
    let mut widened = false;
    let mut rows = Vec::with_capacity(values.len());
    for row in values {
        let mut cells = Vec::with_capacity(row.len());
        for cell in row {
            let cell = cell.transform_up(|e| widen_division(e, &cells_schema))?;
            widened |= cell.transformed;
            cells.push(cell.data);
        }
        rows.push(cells);
    }
    let plan = Values {
        schema,
        values: rows,
    };
    if widened {
        crate::node_rewrite::retype_values(plan).map(|t| Transformed::yes(t.data))
    } else {
        Ok(Transformed::no(LogicalPlan::Values(plan)))
    }
}

fn widen_division(e: Expr, input: &DFSchema) -> DfResult<Transformed<Expr>> {
    let Expr::BinaryExpr(BinaryExpr {
        left,
        op: Operator::Divide,
        right,
    }) = e
    else {
        return Ok(Transformed::no(e));
    };
    let types = (left.get_type(input), right.get_type(input));
    let (target, want) = match types {
        (Ok(DataType::Decimal128(p1, s1)), Ok(DataType::Decimal128(_, s2))) => {
            let want = quotient_scale(s1, s2);
            // one digit more than wanted, rounded away below
            (dividend_type(p1, s1, want.saturating_add(1)), want)
        }
        _ => (None, 0),
    };
    let left = match target {
        Some(ty) => Box::new(Expr::Cast(Cast::new(left, ty))),
        None => {
            return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Divide,
                right,
            })))
        }
    };
    let quotient = Expr::BinaryExpr(BinaryExpr {
        left,
        op: Operator::Divide,
        right,
    });
    // Arrow's division truncates; PostgreSQL rounds the last digit (half
    // away from zero, as Arrow's cast to a smaller scale does). The cast
    // keeps the quotient's integer digits and one more, for the carry.
    Ok(Transformed::yes(match quotient.get_type(input)? {
        DataType::Decimal128(p, s) if s == want.saturating_add(1) => {
            Expr::Cast(Cast::new(Box::new(quotient), DataType::Decimal128(p, want)))
        }
        _ => quotient,
    }))
}

/// The scale PostgreSQL gives a quotient of scales `s1` and `s2` whose
/// weight is 0 (module doc).
fn quotient_scale(s1: i8, s2: i8) -> i8 {
    MIN_QUOTIENT_SCALE.max(s1).max(s2)
}

/// The dividend's type for a quotient of scale `want` (or as close to it
/// as 38 digits allow), keeping its integer digits; `None` when it needs
/// no change or has no room.
fn dividend_type(p1: u8, s1: i8, want: i8) -> Option<DataType> {
    let integer_digits = i16::from(p1) - i16::from(s1);
    let room = i16::from(MAX_PRECISION) - integer_digits;
    let scale = i16::from(want - ARROW_DIV_SCALE_INCREMENT).min(room);
    if scale <= i16::from(s1) {
        return None;
    }
    let scale = i8::try_from(scale).ok()?;
    let precision = u8::try_from(integer_digits + i16::from(scale)).ok()?;
    Some(DataType::Decimal128(precision, scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dividends_widen_to_sixteen_quotient_digits_within_38() {
        // 1 / 3.0: Decimal(10,0) / Decimal(2,1) -> dividend scale 12
        assert_eq!(quotient_scale(0, 1), 16);
        assert_eq!(dividend_type(10, 0, 16), Some(DataType::Decimal128(22, 12)));
        // (15,2) columns keep 13 integer digits
        assert_eq!(dividend_type(15, 2, 16), Some(DataType::Decimal128(25, 12)));
        // a divisor of scale 20 asks for a quotient of scale 20
        assert_eq!(quotient_scale(0, 20), 20);
        assert_eq!(dividend_type(5, 0, 20), Some(DataType::Decimal128(21, 16)));
        // no room: 38 integer digits
        assert_eq!(dividend_type(38, 0, 16), None);
        // some room: 30 integer digits leave 8
        assert_eq!(dividend_type(30, 0, 16), Some(DataType::Decimal128(38, 8)));
        // already wide enough
        assert_eq!(dividend_type(30, 14, 16), None);
    }

    #[tokio::test]
    async fn quotients_have_postgresql_digits() {
        use datafusion::arrow::util::display::array_value_to_string;
        let mut config = datafusion::prelude::SessionConfig::new();
        config.options_mut().sql_parser.parse_float_as_decimal = true;
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .with_analyzer_rules(crate::result_types::analyzer_rules())
            .build();
        let ctx = datafusion::prelude::SessionContext::new_with_state(state);
        let batches = ctx
            .sql("SELECT 1 / 3.0, 10.0 / 4, CAST(7 AS NUMERIC(15,2)) / CAST(3 AS NUMERIC(15,2)), 1.0 / 8 AS q, 2 / 3.0")
            .await
            .expect("plans")
            .collect()
            .await
            .expect("runs");
        let batch = batches.first().expect("a batch");
        let cells: Vec<String> = batch
            .columns()
            .iter()
            .map(|c| array_value_to_string(c, 0).expect("prints"))
            .collect();
        // PostgreSQL 15: 0.33333333333333333333, 2.5000000000000000,
        // 2.3333333333333333, 0.12500000000000000000,
        // 0.66666666666666666667 (its scale follows the values; at least 16
        // digits here, always, the last one rounded)
        assert_eq!(
            cells,
            [
                "0.3333333333333333",
                "2.5000000000000000",
                "2.3333333333333333",
                "0.1250000000000000",
                "0.6666666666666667"
            ]
        );
        assert_eq!(batch.schema().field(3).name(), "q");
        // a quotient read by the nodes above it: their schemas follow its
        // wider type
        let batches = ctx
            .sql("SELECT q FROM (SELECT 1 / 3.0 AS q) AS s ORDER BY q LIMIT 1")
            .await
            .expect("plans")
            .collect()
            .await
            .expect("runs");
        let batch = batches.first().expect("a batch");
        let cell = array_value_to_string(batch.column(0), 0).expect("prints");
        assert_eq!(cell, "0.3333333333333333");
    }
}
