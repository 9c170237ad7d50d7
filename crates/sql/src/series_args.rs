//! `generate_series` in FROM with integer arguments of any width, as
//! PostgreSQL takes them: DataFusion's table function wants int8 literals,
//! so `generate_series(1, array_upper(current_schemas(false), 1))`
//! (pgjdbc's TypeInfoCache), whose second argument folds to an int4, would
//! be refused. This wrapper widens int2/int4 literal arguments to int8 and
//! Eddy's microsecond timestamps to the nanoseconds DataFusion's function
//! takes, and hands the call to it; anything else (dates, a non-literal)
//! reaches it unchanged, with its errors. DataFusion steps `timestamptz`
//! values in UTC: in a session whose zone has daylight saving, a step of
//! days or months (which PostgreSQL takes on the wall clock) is stepped
//! here instead (`zone_functions::series_values`, the select list's
//! stepping), the series built whole, at most [`MAX_WALL_CLOCK_SERIES`]
//! values (54000 beyond).
//!
//! Dates with an interval step are PostgreSQL's `generate_series(timestamptz,
//! timestamptz, interval)` (a date is cast to timestamptz, the preferred
//! type of its category, at midnight in the session's zone), and a step
//! written as an untyped literal (`'12 hours'`) is an interval: in FROM
//! here ([`IntegerArgs`]), in the select list by [`PgSeries`], which gives
//! DataFusion's scalar function those argument types. DataFusion stepped
//! dates as dates.

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

/// The step of `generate_series(start, stop, '12 hours')`: an untyped
/// literal is read as an interval, as PostgreSQL resolves it.
fn interval_step(e: &Expr) -> DfResult<Expr> {
    match e {
        Expr::Literal(ScalarValue::Utf8(Some(text)) | ScalarValue::Utf8View(Some(text)), _) => {
            let iv = crate::pgtypes::interval_from_text(text)?;
            Ok(Expr::Literal(
                ScalarValue::IntervalMonthDayNano(Some(crate::pgtypes::interval_arrow(iv)?)),
                None,
            ))
        }
        other => Ok(other.clone()),
    }
}

/// A date bound of a series with an interval step, as PostgreSQL casts
/// it: the timestamptz of its midnight in the session's zone.
fn date_as_instant(e: &Expr, zone: &crate::session_zone::SessionZone) -> DfResult<Expr> {
    match e {
        Expr::Literal(ScalarValue::Date32(d), _) => {
            let micros = match d {
                Some(days) => {
                    let wall = i64::from(*days)
                        .checked_mul(86_400_000_000)
                        .ok_or_else(|| {
                            crate::error::SqlError::NumericOutOfRange("date out of range".into())
                        })?;
                    Some(zone.instant_of(wall)?)
                }
                None => None,
            };
            Ok(Expr::Literal(
                ScalarValue::TimestampMicrosecond(micros, Some("+00:00".into())),
                None,
            ))
        }
        other => Ok(other.clone()),
    }
}

/// The most values of a series stepped on a daylight-saving zone's wall
/// clock in FROM (built whole: about 80 MB).
pub const MAX_WALL_CLOCK_SERIES: usize = 10_000_000;

/// `generate_series(start, stop, step)` in FROM of instant literals with a
/// step of days or months, on `zone`'s wall clock: one column `value`.
fn wall_clock_series(
    exprs: &[Expr],
    zone: &crate::session_zone::SessionZone,
) -> DfResult<Arc<dyn TableProvider>> {
    use datafusion::arrow::array::TimestampMicrosecondArray;
    use datafusion::arrow::datatypes::{Field, Schema, TimeUnit};
    let refused = || {
        datafusion::error::DataFusionError::from(crate::error::SqlError::FeatureNotSupported(
            "generate_series in FROM takes constant arguments".into(),
        ))
    };
    let micros = |e: &Expr| -> DfResult<Option<i64>> {
        match e {
            Expr::Literal(ScalarValue::TimestampMicrosecond(v, Some(_)), _) => Ok(*v),
            Expr::Literal(ScalarValue::TimestampNanosecond(v, Some(_)), _) => {
                Ok(v.map(|v| v.div_euclid(1000)))
            }
            _ => Err(refused()),
        }
    };
    let [start, stop, step] = exprs else {
        return Err(refused());
    };
    let step = match step {
        Expr::Literal(ScalarValue::IntervalMonthDayNano(v), _) => *v,
        _ => return Err(refused()),
    };
    let label: Arc<str> = "+00:00".into();
    let schema = Arc::new(Schema::new(vec![Field::new(
        "value",
        DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::clone(&label))),
        false,
    )]));
    let values = match (micros(start)?, micros(stop)?, step) {
        (Some(a), Some(b), Some(step)) => {
            let z = crate::at_time_zone::resolve_zone(zone.name())?;
            crate::zone_functions::series_values(a, b, step, z, Some(MAX_WALL_CLOCK_SERIES))?
        }
        // a NULL argument: no rows, as PostgreSQL
        _ => Vec::new(),
    };
    let column = TimestampMicrosecondArray::from(values).with_timezone(label);
    let batch = datafusion::arrow::record_batch::RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(column)],
    )?;
    Ok(Arc::new(datafusion::datasource::MemTable::try_new(
        schema,
        vec![vec![batch]],
    )?))
}

/// A bound written as an untyped literal beside a typed one
/// (`generate_series(timestamptz '...', '2024-04-01', '1 day')`): read as
/// that bound's type, as PostgreSQL resolves it (in the session's zone).
fn bound_like(e: &Expr, other: &Expr, zone: &crate::session_zone::SessionZone) -> DfResult<Expr> {
    use eddy_common::{ColumnType, Value};
    let Expr::Literal(ScalarValue::Utf8(Some(text)) | ScalarValue::Utf8View(Some(text)), _) = e
    else {
        return Ok(e.clone());
    };
    let value = |ty: ColumnType| crate::pgtypes::parse_text_in(text, ty, zone);
    Ok(match other {
        Expr::Literal(
            ScalarValue::TimestampMicrosecond(_, tz) | ScalarValue::TimestampNanosecond(_, tz),
            _,
        ) => {
            let ty = if tz.is_some() {
                ColumnType::TimestampTz
            } else {
                ColumnType::Timestamp
            };
            match value(ty)? {
                Value::Timestamp(m) => {
                    Expr::Literal(ScalarValue::TimestampMicrosecond(Some(m), tz.clone()), None)
                }
                _ => e.clone(),
            }
        }
        Expr::Literal(ScalarValue::Date32(_), _) => match value(ColumnType::Date)? {
            Value::Date(d) => Expr::Literal(ScalarValue::Date32(Some(d)), None),
            _ => e.clone(),
        },
        _ => e.clone(),
    })
}

impl TableFunctionImpl for IntegerArgs {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        if let [start, stop, step] = args.exprs() {
            // PostgreSQL's argument types (see the module's comment); the
            // call is made again with them
            let zone = self.zone.get();
            let typed = [
                bound_like(start, stop, &zone)?,
                bound_like(stop, start, &zone)?,
            ];
            let dates = typed
                .iter()
                .all(|e| matches!(e, Expr::Literal(ScalarValue::Date32(_), _)));
            let exprs = if dates {
                vec![
                    date_as_instant(&typed[0], &zone)?,
                    date_as_instant(&typed[1], &zone)?,
                    interval_step(step)?,
                ]
            } else {
                let [a, b] = typed;
                vec![a, b, interval_step(step)?]
            };
            if exprs.as_slice() != args.exprs() {
                return self.call_with_args(TableFunctionArgs::new(&exprs, args.session()));
            }
        }
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
            return wall_clock_series(args.exprs(), &self.zone.get());
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

/// `generate_series` in the select list with PostgreSQL's argument types
/// (see the module's comment): dates with an interval step are cast to
/// timestamptz, an untyped step to an interval; anything else is coerced
/// as DataFusion's function coerces it.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgSeries {
    inner: Arc<datafusion::logical_expr::ScalarUDF>,
    signature: datafusion::logical_expr::Signature,
}

impl PgSeries {
    pub fn new(inner: Arc<datafusion::logical_expr::ScalarUDF>) -> PgSeries {
        PgSeries {
            inner,
            signature: datafusion::logical_expr::Signature::user_defined(
                datafusion::logical_expr::Volatility::Immutable,
            ),
        }
    }
}

impl datafusion::logical_expr::ScalarUDFImpl for PgSeries {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &datafusion::logical_expr::Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(args)
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        use datafusion::arrow::datatypes::{IntervalUnit, TimeUnit};
        let is_date = |t: &DataType| matches!(t, DataType::Date32 | DataType::Date64);
        let is_text = |t: &DataType| matches!(t, DataType::Utf8 | DataType::Utf8View);
        let interval = DataType::Interval(IntervalUnit::MonthDayNano);
        if let [start, stop, step] = args {
            // dates (or a date and an untyped literal) stepped by an
            // interval or an untyped step: timestamptz
            let bounds_dates = (is_date(start) || is_text(start))
                && (is_date(stop) || is_text(stop))
                && (is_date(start) || is_date(stop));
            if bounds_dates && (matches!(step, DataType::Interval(_)) || is_text(step)) {
                let instant = DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()));
                return Ok(vec![instant.clone(), instant, interval]);
            }
            if let DataType::Timestamp(..) = start {
                if is_text(step) {
                    let stop = if is_text(stop) {
                        start.clone()
                    } else {
                        stop.clone()
                    };
                    return Ok(vec![start.clone(), stop, interval]);
                }
            }
        }
        let fields: Vec<_> = args
            .iter()
            .map(|t| {
                Arc::new(datafusion::arrow::datatypes::Field::new(
                    "a",
                    t.clone(),
                    true,
                ))
            })
            .collect();
        Ok(
            datafusion::logical_expr::type_coercion::functions::fields_with_udf(
                &fields,
                self.inner.as_ref(),
            )?
            .iter()
            .map(|f| f.data_type().clone())
            .collect(),
        )
    }

    fn invoke_with_args(
        &self,
        args: datafusion::logical_expr::ScalarFunctionArgs,
    ) -> DfResult<datafusion::logical_expr::ColumnarValue> {
        self.inner.invoke_with_args(args)
    }
}
