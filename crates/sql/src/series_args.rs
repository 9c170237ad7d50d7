//! `generate_series` in FROM with integer arguments of any width, as
//! PostgreSQL takes them: DataFusion's table function wants int8 literals,
//! so `generate_series(1, array_upper(current_schemas(false), 1))`
//! (pgjdbc's TypeInfoCache), whose second argument folds to an int4, would
//! be refused. This wrapper widens int2/int4 literal arguments to int8 and
//! Eddy's microsecond timestamps to the nanoseconds DataFusion's function
//! takes, and hands the call to it; anything else (dates, a non-literal)
//! reaches it unchanged, with its errors. DataFusion steps `timestamptz`
//! values in UTC: in a session whose zone has daylight saving, a step of
//! days or months (which PostgreSQL takes on the wall clock) is refused
//! (0A000); `generate_series` in the select list steps on the wall clock
//! (`crate::zone_rules`).

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::Expr;

/// DataFusion's `generate_series` (or another integer table function)
/// taking integer literals of any width.
#[derive(Debug)]
pub struct IntegerArgs {
    pub inner: Arc<dyn TableFunctionImpl>,
    /// The session's zone (`crate::zone_rules`).
    pub zone: Arc<crate::zone_rules::ZoneState>,
}

fn widen(e: &Expr) -> DfResult<Expr> {
    Ok(match e {
        Expr::Literal(
            v @ (ScalarValue::Int8(_)
            | ScalarValue::Int16(_)
            | ScalarValue::Int32(_)
            | ScalarValue::UInt8(_)
            | ScalarValue::UInt16(_)
            | ScalarValue::UInt32(_)),
            meta,
        ) => Expr::Literal(v.cast_to(&DataType::Int64)?, meta.clone()),
        Expr::Literal(ScalarValue::TimestampMicrosecond(v, tz), meta) => Expr::Literal(
            ScalarValue::TimestampNanosecond(v.and_then(|v| v.checked_mul(1000)), tz.clone()),
            meta.clone(),
        ),
        other => other.clone(),
    })
}

impl TableFunctionImpl for IntegerArgs {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let instants = args.exprs().first().is_some_and(|e| {
            matches!(
                e,
                Expr::Literal(
                    ScalarValue::TimestampMicrosecond(_, Some(_))
                        | ScalarValue::TimestampNanosecond(_, Some(_)),
                    _
                )
            )
        });
        let wall_clock_step = args.exprs().get(2).is_some_and(|e| match e {
            Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), _) => {
                v.months != 0 || v.days != 0
            }
            Expr::Literal(ScalarValue::IntervalYearMonth(Some(_)), _) => true,
            Expr::Literal(ScalarValue::IntervalDayTime(Some(v)), _) => v.days != 0,
            _ => false,
        });
        if instants && wall_clock_step && !self.zone.get().is_fixed() {
            return Err(datafusion::error::DataFusionError::from(
                crate::error::SqlError::FeatureNotSupported(
                    "generate_series of timestamptz values by days or months in FROM is not \
                     supported in a session whose TimeZone has daylight saving: call it in \
                     the select list"
                        .into(),
                ),
            ));
        }
        let exprs = args
            .exprs()
            .iter()
            .map(widen)
            .collect::<DfResult<Vec<_>>>()?;
        self.inner
            .call_with_args(TableFunctionArgs::new(&exprs, args.session()))
    }
}
