//! Casts to text with PostgreSQL's output text.
//!
//! Arrow's cast to `Utf8` writes a timestamp as `2020-01-02T03:04:05`, a
//! double as `1e20` and an interval as `1 days 2 hours`, where PostgreSQL's
//! `ts::text`, `'x' || ts` and `format('%s', ...)` write `2020-01-02
//! 03:04:05`, `1e+20` and `1 day 02:00:00`: the text its output function
//! sends to clients. This analyzer rule, run after DataFusion's type
//! coercion (which writes the implicit casts of `||` and of text function
//! arguments as `Cast` nodes), replaces every cast to text of a timestamp,
//! time, interval or floating-point value with `eddy_text_out(x)`, which
//! writes each value with the wire encoder's [`cell_text`].
//!
//! The other direction, for one type: an implicit cast of text to
//! `timestamptz` (an untyped literal beside a timestamptz, `ts <
//! '2024-01-01 02:00+00'`) is read by PostgreSQL's input,
//! `eddy_timestamptz_in_zone(text)` (`crate::zone_functions`), in a UTC
//! session; Arrow's parser refused offsets such as `+00` and `+05:30`
//! written without minutes. In another zone `crate::zone_rules` has
//! already read them in it.
//!
//! Invariants:
//! * The text of a cast equals what the same value sends as a result
//!   column in text format.
//! * Booleans keep Arrow's cast: PostgreSQL's `true::text` is `true` (its
//!   output function's `t` is what a result column sends).
//! * Output names do not change (as in [`crate::result_types`]).
//!
//! [`cell_text`]: crate::pgtypes::cell_text

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::DFSchema;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, TryCast, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

/// The function's name.
pub const TEXT_OUT: &str = "eddy_text_out";

/// The analyzer rule; it must run after DataFusion's `TypeCoercion`.
#[derive(Debug, Default)]
pub struct PgTextCasts;

impl AnalyzerRule for PgTextCasts {
    fn name(&self) -> &str {
        "eddy_pg_text_casts"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        Ok(plan.transform_up_with_subqueries(text_node)?.data)
    }
}

fn text_node(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    if matches!(plan, LogicalPlan::Values(_) | LogicalPlan::Limit(_)) {
        return Ok(Transformed::no(plan));
    }
    crate::node_rewrite::rewrite_node_expressions(plan, text_cast)
}

/// Whether Arrow's text for `t` differs from PostgreSQL's output text.
fn needs_postgres_text(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(..)
            | DataType::Time32(_)
            | DataType::Time64(_)
            | DataType::Interval(_)
            | DataType::Float32
            | DataType::Float64
    )
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

fn text_cast(e: Expr, input: &DFSchema) -> DfResult<Transformed<Expr>> {
    let (inner, to) = match &e {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => (expr, field),
        _ => return Ok(Transformed::no(e)),
    };
    if let DataType::Timestamp(_, Some(_)) = to.data_type() {
        if to.metadata().is_empty() && is_text(&inner.get_type(input)?) {
            let to = to.data_type().clone();
            let (Expr::Cast(Cast { expr, .. }) | Expr::TryCast(TryCast { expr, .. })) = e else {
                return Err(DataFusionError::Internal("text cast changed shape".into()));
            };
            let read = Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::new(crate::zone_functions::timestamptz_in_zone_function()),
                vec![*expr],
            ));
            let read_type = read.get_type(input)?;
            return Ok(Transformed::yes(if read_type == to {
                read
            } else {
                Expr::Cast(Cast::new(Box::new(read), to))
            }));
        }
    }
    // a cast to a declared type (json, ...) keeps its own conversion
    if !is_text(to.data_type())
        || !to.metadata().is_empty()
        || !needs_postgres_text(&inner.get_type(input)?)
    {
        return Ok(Transformed::no(e));
    }
    let to = to.data_type().clone();
    let (Expr::Cast(Cast { expr, .. }) | Expr::TryCast(TryCast { expr, .. })) = e else {
        return Err(DataFusionError::Internal("text cast changed shape".into()));
    };
    let text = Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(text_out_function()),
        vec![*expr],
    ));
    Ok(Transformed::yes(if to == DataType::Utf8 {
        text
    } else {
        Expr::Cast(Cast::new(Box::new(text), to))
    }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TextOut {
    signature: Signature,
}

impl ScalarUDFImpl for TextOut {
    fn name(&self) -> &str {
        TEXT_OUT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args.first(), Some(ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some(values) = arrays.first() else {
            return Err(DataFusionError::Plan(format!(
                "{TEXT_OUT} takes one argument"
            )));
        };
        let mut out = StringBuilder::with_capacity(values.len(), values.len() * 16);
        let mut cell = String::new();
        for row in 0..values.len() {
            if values.is_null(row) {
                out.append_null();
                continue;
            }
            cell.clear();
            crate::pgtypes::cell_text(values.as_ref(), row, &mut cell)
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            out.append_value(&cell);
        }
        let out: ArrayRef = Arc::new(out.finish());
        crate::udf_args::scalar_if(scalar, out)
    }
}

/// `eddy_text_out(x)`: `x` as PostgreSQL's output function writes it.
pub fn text_out_function() -> ScalarUDF {
    ScalarUDF::new_from_impl(TextOut {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;

    async fn text_of(sql: &str) -> Vec<String> {
        let batches = crate::result_types::answer_with_eddy_rules(sql).await;
        let batch = batches.first().expect("a batch");
        batch
            .columns()
            .iter()
            .map(|c| {
                let c = datafusion::arrow::compute::cast(
                    c,
                    &datafusion::arrow::datatypes::DataType::Utf8,
                )
                .expect("text");
                c.as_string::<i32>().value(0).to_string()
            })
            .collect()
    }

    #[tokio::test]
    async fn casts_to_text_write_postgresql_text() {
        assert_eq!(
            text_of(
                "SELECT CAST(TIMESTAMP '2020-01-02 03:04:05.5' AS TEXT), \
                 'x' || TIMESTAMP '2020-01-02 03:04:05', CAST(CAST(1e20 AS DOUBLE) AS TEXT), \
                 CAST(INTERVAL '1 day 2 hours' AS TEXT), CAST(true AS TEXT), CAST(1.5 AS TEXT)"
            )
            .await,
            [
                "2020-01-02 03:04:05.5",
                "x2020-01-02 03:04:05",
                "1e+20",
                "1 day 02:00:00",
                "true",
                "1.5"
            ]
        );
    }
}
