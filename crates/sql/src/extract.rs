//! `EXTRACT(field FROM x)` with PostgreSQL 15's result type, numeric:
//! `extract(epoch from interval '1 hour')` is `3600.000000`, `extract(second
//! from ...)` keeps six fraction digits, `extract(milliseconds ...)` three,
//! every other field is a whole number, and the epoch of a date has none.
//! DataFusion plans EXTRACT as `date_part`, an int (a double for the
//! epoch): the text differed (`3600`) and drivers read an int or a float
//! where PostgreSQL's give a decimal (psycopg's `Decimal`, pgjdbc's
//! `BigDecimal`). `date_part(text, x)` itself keeps its own planning.
//!
//! [`ExtractPlanner`] plans EXTRACT as `eddy_extract(field, x)`, of type
//! `numeric` (Decimal128(38, [`extract_scale`])). It computes every field
//! as PostgreSQL does, in UTC: the exact epoch (`checked_arith`'s), the
//! microseconds of the minute as seconds and milliseconds, an interval's
//! fields from its months, days and nanoseconds (DataFusion's dropped the
//! fraction of an interval's seconds), the century, decade and millennium
//! DataFusion lacks, the Julian day of a date; DataFusion's `date_part`
//! for the rest. A session in another zone reads a timestamptz on its
//! wall clock: `crate::zone_rules` treats the call as it treats
//! `date_part`, and for the `timezone`, `timezone_hour` and
//! `timezone_minute` fields adds the zone as a third argument: the offset
//! east of UTC at the value's instant (in UTC, 0). What PostgreSQL refuses is refused with its SQLSTATE: a
//! time field of a date or a date field of an interval (0A000), an unknown
//! field (22023); and so is the Julian day of a timestamp, whose fraction
//! Eddy does not compute (0A000).

use std::sync::{Arc, LazyLock};

use chrono::Datelike;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Field, FieldRef, Int32Type, IntervalMonthDayNanoType, IntervalUnit,
    TimeUnit,
};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

use crate::error::SqlError;

/// The UDF's name.
pub const EXTRACT: &str = "eddy_extract";

/// Numeric precision of every EXTRACT result (PostgreSQL's numeric has
/// none; the values fit in far fewer digits).
const PRECISION: u8 = 38;

const MICROS_PER_MINUTE: i64 = 60_000_000;
const NANOS_PER_MINUTE: i64 = 60_000_000_000;
const NANOS_PER_HOUR: i64 = 3_600_000_000_000;
/// The Julian day of 1970-01-01.
const JULIAN_OF_UNIX_EPOCH: i64 = 2_440_588;

static EXTRACT_UDF: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(Extract::new())));

/// The `eddy_extract` function (`crate::zone_rules` calls it with the
/// session's zone for the `timezone*` fields).
pub fn extract_function() -> Arc<ScalarUDF> {
    Arc::clone(&EXTRACT_UDF)
}

/// Plans EXTRACT (see the module's comment).
#[derive(Debug, Default)]
pub struct ExtractPlanner;

impl ExprPlanner for ExtractPlanner {
    fn plan_extract(&self, args: Vec<Expr>) -> DfResult<PlannerResult<Vec<Expr>>> {
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(Arc::clone(&EXTRACT_UDF), args),
        )))
    }
}

/// The fields of PostgreSQL's EXTRACT, by what computes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// Seconds since 1970 (since midnight for a time; an interval's length).
    Epoch,
    /// Seconds within the minute, the microseconds as fraction (scale 6).
    Second,
    /// Milliseconds within the minute, the microseconds as fraction.
    Millisecond,
    /// Microseconds within the minute.
    Microsecond,
    Minute,
    Hour,
    Day,
    Month,
    Quarter,
    Year,
    Decade,
    Century,
    Millennium,
    Julian,
    /// `timezone`, `timezone_hour`, `timezone_minute`.
    Zone,
    /// Fields of a date only (`week`, `dow`, `isodow`, `doy`, `isoyear`),
    /// as DataFusion's `date_part` computes them.
    Calendar,
}

fn part_of(field: &str) -> Option<Part> {
    Some(match field {
        "epoch" => Part::Epoch,
        "second" | "seconds" | "s" | "sec" | "secs" => Part::Second,
        "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" | "mseconds" => Part::Millisecond,
        "microsecond" | "microseconds" | "us" | "usec" | "usecs" | "useconds" => Part::Microsecond,
        "minute" | "minutes" | "m" | "min" | "mins" => Part::Minute,
        "hour" | "hours" | "h" | "hr" | "hrs" => Part::Hour,
        "day" | "days" | "d" => Part::Day,
        "month" | "months" | "mon" | "mons" => Part::Month,
        "quarter" | "qtr" => Part::Quarter,
        "year" | "years" | "y" | "yr" | "yrs" => Part::Year,
        "decade" | "decades" => Part::Decade,
        "century" | "centuries" => Part::Century,
        "millennium" | "millennia" | "millenniums" | "mil" | "mils" => Part::Millennium,
        "julian" | "j" => Part::Julian,
        "timezone" | "timezone_hour" | "timezone_minute" => Part::Zone,
        "week" | "dow" | "isodow" | "doy" | "isoyear" => Part::Calendar,
        _ => return None,
    })
}

/// PostgreSQL's scale of `extract(field from x)` for x of type `t`.
pub fn extract_scale(field: &str, t: &DataType) -> i8 {
    match part_of(field) {
        Some(Part::Epoch) if matches!(t, DataType::Date32 | DataType::Date64) => 0,
        Some(Part::Epoch | Part::Second) => 6,
        Some(Part::Millisecond) => 3,
        _ => 0,
    }
}

/// PostgreSQL's name of a type in EXTRACT's errors.
fn type_name(t: &DataType) -> &'static str {
    match t {
        DataType::Date32 | DataType::Date64 => "date",
        DataType::Timestamp(_, Some(_)) => "timestamp with time zone",
        DataType::Timestamp(_, None) => "timestamp without time zone",
        DataType::Time32(_) | DataType::Time64(_) => "time without time zone",
        DataType::Interval(_) => "interval",
        _ => "this type",
    }
}

/// The field of a call, lower case, or PostgreSQL's 22023.
fn field_of(value: Option<&ScalarValue>, t: &DataType) -> DfResult<(String, Part)> {
    let field = value
        .and_then(|v| v.try_as_str().flatten())
        .map(|s| s.trim().to_ascii_lowercase())
        .ok_or_else(|| DataFusionError::Plan("EXTRACT needs a field name".into()))?;
    match part_of(&field) {
        Some(p) => Ok((field, p)),
        None => Err(SqlError::InvalidParameter(format!(
            "unit \"{field}\" not recognized for type {}",
            type_name(t)
        ))
        .into()),
    }
}

/// Whether PostgreSQL's EXTRACT reads `part` of a value of type `t`.
fn supported(part: Part, t: &DataType) -> bool {
    use Part::*;
    match t {
        DataType::Date32 | DataType::Date64 => !matches!(
            part,
            Second | Millisecond | Microsecond | Minute | Hour | Zone
        ),
        // a timestamp's Julian day has a fraction of day (PostgreSQL: 20
        // digits of it), which Eddy does not compute: refused
        DataType::Timestamp(_, zone) => part != Julian && (zone.is_some() || part != Zone),
        DataType::Time32(_) | DataType::Time64(_) => {
            matches!(
                part,
                Epoch | Second | Millisecond | Microsecond | Minute | Hour
            )
        }
        DataType::Interval(IntervalUnit::MonthDayNano) => !matches!(part, Julian | Zone | Calendar),
        _ => true,
    }
}

/// `eddy_extract(field, x)`: date_part's arguments and coercions, a
/// numeric result.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Extract {
    signature: Signature,
}

impl Extract {
    fn new() -> Extract {
        Extract {
            // date_part's coercions, plus the zone argument
            // (`coerce_types`)
            signature: Signature::user_defined(datafusion::logical_expr::Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Extract {
    fn name(&self) -> &str {
        EXTRACT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Err(DataFusionError::Internal(
            "eddy_extract's type comes from its field".into(),
        ))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let x = args
            .arg_fields
            .get(1)
            .ok_or_else(|| DataFusionError::Plan("EXTRACT takes a field and a value".into()))?;
        let t = x.data_type();
        let (field, part) = field_of(args.scalar_arguments.first().copied().flatten(), t)?;
        if !supported(part, t) {
            return Err(SqlError::FeatureNotSupported(format!(
                "unit \"{field}\" not supported for type {}",
                type_name(t)
            ))
            .into());
        }
        Ok(Arc::new(Field::new(
            EXTRACT,
            DataType::Decimal128(PRECISION, extract_scale(&field, t)),
            x.is_nullable(),
        )))
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        // the session's zone (`crate::zone_rules`), added after coercion
        // and coerced again by a later pass
        if let [field, x, _zone] = arg_types {
            return Ok(vec![field.clone(), x.clone(), DataType::Utf8]);
        }
        let fields: Vec<_> = arg_types
            .iter()
            .map(|t| Arc::new(Field::new("a", t.clone(), true)))
            .collect();
        Ok(
            datafusion::logical_expr::type_coercion::functions::fields_with_udf(
                &fields,
                datafusion::functions::datetime::date_part().as_ref(),
            )?
            .iter()
            .map(|f| f.data_type().clone())
            .collect(),
        )
    }

    /// In UTC (a session's zone is applied by `crate::zone_rules`).
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let to = args.return_field.data_type().clone();
        let DataType::Decimal128(precision, scale) = to else {
            return Err(DataFusionError::Internal("EXTRACT is numeric".into()));
        };
        let scalar = matches!(args.args.get(1), Some(ColumnarValue::Scalar(_)));
        let x = args
            .args
            .get(1)
            .ok_or_else(|| DataFusionError::Plan("EXTRACT takes a field and a value".into()))?
            .to_array(args.number_rows)?;
        let field_value = match args.args.first() {
            Some(ColumnarValue::Scalar(v)) => Some(v),
            _ => None,
        };
        let (field, part) = field_of(field_value, x.data_type())?;
        let unscaled = |values: Vec<Option<i128>>| -> DfResult<ArrayRef> {
            Ok(Arc::new(
                Decimal128Array::from(values).with_precision_and_scale(precision, scale)?,
            ))
        };
        let out: ArrayRef = match (part, x.data_type()) {
            (Part::Epoch, _) => match crate::checked_arith::epoch_array(&x)? {
                Some(exact) => cast(&exact, &to)?,
                None => cast(&date_part(&args, "epoch")?, &to)?,
            },
            (_, DataType::Interval(IntervalUnit::MonthDayNano)) => {
                unscaled(interval_part(&x, part))?
            }
            // the microseconds of the minute are the unscaled value of
            // seconds (scale 6) and of milliseconds (scale 3)
            (Part::Second | Part::Millisecond, _) => {
                let micros = date_part(&args, "microsecond")?;
                let micros = micros.as_primitive_opt::<Int32Type>().ok_or_else(|| {
                    DataFusionError::Internal("date_part(microsecond) is an int".into())
                })?;
                unscaled(micros.iter().map(|m| m.map(i128::from)).collect())?
            }
            (Part::Zone, DataType::Timestamp(_, Some(_))) => {
                // the zone's offset east of UTC at each instant (no zone
                // argument: UTC, no offset)
                let zone = match args.args.get(2) {
                    Some(ColumnarValue::Scalar(z)) => z
                        .try_as_str()
                        .flatten()
                        .map(crate::at_time_zone::resolve_zone)
                        .transpose()?,
                    _ => None,
                };
                let instants = cast(&x, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
                let instants = instants
                    .as_primitive::<datafusion::arrow::datatypes::TimestampMicrosecondType>();
                let mut values = Vec::with_capacity(instants.len());
                for v in instants.iter() {
                    let offset = match (v, zone) {
                        (None, _) => None,
                        (Some(_), None) => Some(0),
                        (Some(m), Some(z)) => Some(crate::at_time_zone::zone_label_at(m, z)?.1),
                    };
                    // PostgreSQL's parts: hours and minutes keep the sign
                    values.push(offset.map(|o| {
                        i128::from(match field.as_str() {
                            "timezone_hour" => o / 3600,
                            "timezone_minute" => o / 60 % 60,
                            _ => o,
                        })
                    }));
                }
                unscaled(values)?
            }
            (Part::Decade | Part::Century | Part::Millennium | Part::Julian, t) => {
                let days = days_of(&x, t)?;
                unscaled(
                    days.into_iter()
                        .map(|d| d.and_then(|d| calendar_part(d, part)))
                        .collect(),
                )?
            }
            _ => cast(&date_part(&args, &field)?, &to)?,
        };
        if scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }
}

/// DataFusion's `date_part(field, x)` over the call's value.
fn date_part(args: &ScalarFunctionArgs, field: &str) -> DfResult<ArrayRef> {
    let udf = datafusion::functions::datetime::date_part();
    let name = ScalarValue::Utf8(Some(field.into()));
    let mut call = args.clone();
    if let Some(first) = call.args.first_mut() {
        *first = ColumnarValue::Scalar(name.clone());
    }
    call.return_field = udf.return_field_from_args(ReturnFieldArgs {
        arg_fields: &call.arg_fields,
        scalar_arguments: &[Some(&name), None],
    })?;
    udf.invoke_with_args(call)?.into_array(args.number_rows)
}

/// An interval's field as PostgreSQL's `interval_part` computes it (the
/// unscaled value: microseconds for seconds and milliseconds).
fn interval_part(x: &ArrayRef, part: Part) -> Vec<Option<i128>> {
    x.as_primitive::<IntervalMonthDayNanoType>()
        .iter()
        .map(|v| {
            let v = v?;
            let (months, days, nanos) = (v.months, v.days, v.nanoseconds);
            let years = i128::from(months / 12);
            Some(match part {
                Part::Second | Part::Millisecond | Part::Microsecond => {
                    i128::from((nanos / 1000) % MICROS_PER_MINUTE)
                }
                Part::Minute => i128::from((nanos / NANOS_PER_MINUTE) % 60),
                Part::Hour => i128::from(nanos / NANOS_PER_HOUR),
                Part::Day => i128::from(days),
                Part::Month => i128::from(months % 12),
                Part::Quarter => i128::from((months % 12) / 3 + 1),
                Part::Year => years,
                Part::Decade => years / 10,
                Part::Century => years / 100,
                Part::Millennium => years / 1000,
                // refused when planned (`supported`)
                Part::Epoch | Part::Julian | Part::Zone | Part::Calendar => return None,
            })
        })
        .collect()
}

/// Days since 1970 of each date or timestamp (its UTC date).
fn days_of(x: &ArrayRef, t: &DataType) -> DfResult<Vec<Option<i64>>> {
    Ok(match t {
        DataType::Date32 => x
            .as_primitive::<Date32Type>()
            .iter()
            .map(|d| d.map(i64::from))
            .collect(),
        DataType::Timestamp(..) => {
            let micros = cast(x, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
            micros
                .as_primitive::<datafusion::arrow::datatypes::TimestampMicrosecondType>()
                .iter()
                .map(|m| m.map(|m| m.div_euclid(86_400_000_000)))
                .collect()
        }
        other => {
            return Err(SqlError::FeatureNotSupported(format!(
                "EXTRACT of this field from {other} is not supported"
            ))
            .into())
        }
    })
}

/// The decade, century, millennium or Julian day of a day since 1970, as
/// PostgreSQL's `timestamp_part` computes them (its year of 1 BC is 0).
fn calendar_part(days: i64, part: Part) -> Option<i128> {
    if part == Part::Julian {
        return Some(i128::from(days) + i128::from(JULIAN_OF_UNIX_EPOCH));
    }
    let date = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?
        .checked_add_signed(chrono::Duration::try_days(days)?)?;
    let year = i128::from(date.year());
    Some(match part {
        Part::Decade if year >= 0 => year / 10,
        Part::Decade => -((8 - (year - 1)) / 10),
        Part::Century if year > 0 => (year + 99) / 100,
        Part::Century => -((99 - (year - 1)) / 100),
        Part::Millennium if year > 0 => (year + 999) / 1000,
        Part::Millennium => -((999 - (year - 1)) / 1000),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_postgresql_15s() {
        let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
        assert_eq!(extract_scale("epoch", &ts), 6);
        assert_eq!(extract_scale("epoch", &DataType::Date32), 0);
        assert_eq!(extract_scale("second", &ts), 6);
        assert_eq!(extract_scale("milliseconds", &ts), 3);
        assert_eq!(extract_scale("microseconds", &ts), 0);
        assert_eq!(extract_scale("year", &DataType::Date32), 0);
    }

    fn day(y: i32, m: u32, d: u32) -> i64 {
        let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
        chrono::NaiveDate::from_ymd_opt(y, m, d)
            .map(|x| (x - epoch).num_days())
            .unwrap_or_default()
    }

    /// PostgreSQL 15's answers (44 BC is chrono's year -43).
    #[test]
    fn centuries_and_decades_count_as_postgresql_does() {
        for ((y, m, d), part, want) in [
            ((2000, 12, 31), Part::Century, 20),
            ((2001, 1, 1), Part::Century, 21),
            ((2000, 1, 1), Part::Millennium, 2),
            ((2001, 1, 1), Part::Millennium, 3),
            ((2024, 1, 1), Part::Decade, 202),
            ((-43, 3, 15), Part::Century, -1),
            ((-43, 3, 15), Part::Decade, -5),
            ((-43, 3, 15), Part::Millennium, -1),
            ((2024, 1, 1), Part::Julian, 2_460_311),
        ] {
            assert_eq!(
                calendar_part(day(y, m, d), part),
                Some(want),
                "{y}-{m}-{d} {part:?}"
            );
        }
    }
}
