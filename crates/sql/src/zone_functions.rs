//! The conversions a session whose TimeZone is not UTC applies to values
//! (`crate::session_zone` says where and why):
//! * [`TIMESTAMPTZ_IN_ZONE`]: text read as a `timestamptz` there;
//! * [`ZONE_ADD_INTERVAL`]: a `timestamptz` plus an interval whose months
//!   and days move the wall clock, as PostgreSQL's
//!   `timestamptz_pl_interval` does (so `+ interval '1 day'` across a
//!   daylight-saving change keeps the time of day);
//! * [`cast_on_wall_clock`]: a column stored into a column of another
//!   date/time type (INSERT, UPDATE, COPY, ALTER COLUMN TYPE);
//! * [`localize_output`]: results labelled with the zone, so that their
//!   text is written on its wall clock (`pgtypes::cell_text`).
//!
//! Invariant: none of these changes an instant that arrives with its
//! offset; they only decide which instant a wall-clock time means, and
//! which wall-clock time an instant is written as.

use std::sync::Arc;

use chrono::{DateTime, Months, Utc};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, RecordBatch, TimestampMicrosecondArray,
    TimestampMicrosecondBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Field, IntervalMonthDayNanoType, IntervalUnit, Schema, SchemaRef, TimeUnit,
    TimestampMicrosecondType,
};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use eddy_common::ColumnType;
use futures::StreamExt;

use crate::at_time_zone::{resolve_zone, to_instant, to_wall_clock, Zone};
use crate::error::{Result, SqlError};
use crate::session::Output;
use crate::session_zone::SessionZone;

/// `eddy_timestamptz_in_zone(text [, zone])`: PostgreSQL's `timestamptz`
/// input with `zone` as the session's TimeZone (UTC without one; a
/// `timestamptz` literal is written as this call with its text only, and
/// `crate::zone_rules` adds the zone of a session that is not in UTC).
pub const TIMESTAMPTZ_IN_ZONE: &str = "eddy_timestamptz_in_zone";
/// `eddy_zone_add_interval(ts, interval, zone, sign)`: `ts + sign *
/// interval` with months and days added on `zone`'s wall clock.
pub const ZONE_ADD_INTERVAL: &str = "eddy_zone_add_interval";

/// `eddy_zone_series(start, stop, step, zone)`: `generate_series` of
/// `timestamptz` values, each the previous plus `step` on `zone`'s wall
/// clock (PostgreSQL's `generate_series_timestamptz`), as a list.
pub const ZONE_SERIES: &str = "eddy_zone_series";

const UTC_LABEL: &str = "+00:00";
const MICROS_PER_DAY: i64 = 86_400_000_000;

fn instant_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some(UTC_LABEL.into()))
}

fn overflow() -> SqlError {
    SqlError::DatetimeOverflow("timestamp out of range".into())
}

/// An argument as microsecond instants.
fn instants(a: &ArrayRef) -> DfResult<TimestampMicrosecondArray> {
    Ok(cast(a, &instant_type())?
        .as_primitive::<TimestampMicrosecondType>()
        .clone())
}

/// An argument as month-day-nanosecond intervals.
fn intervals(a: &ArrayRef) -> DfResult<datafusion::arrow::array::IntervalMonthDayNanoArray> {
    Ok(cast(a, &DataType::Interval(IntervalUnit::MonthDayNano))?
        .as_primitive::<IntervalMonthDayNanoType>()
        .clone())
}

/// An argument as text.
fn texts(a: &ArrayRef) -> DfResult<datafusion::arrow::array::StringArray> {
    Ok(cast(a, &DataType::Utf8)?.as_string::<i32>().clone())
}

/// A zone argument, resolved once per distinct text.
struct ZoneCache(Option<(String, Zone)>);

impl ZoneCache {
    fn get(&mut self, text: &str) -> DfResult<Zone> {
        match &self.0 {
            Some((t, z)) if t == text => Ok(*z),
            _ => {
                let z = resolve_zone(text).map_err(DataFusionError::from)?;
                self.0 = Some((text.to_string(), z));
                Ok(z)
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestamptzInZone {
    signature: Signature,
}

impl ScalarUDFImpl for TimestamptzInZone {
    fn name(&self) -> &str {
        TIMESTAMPTZ_IN_ZONE
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(instant_type())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = crate::udf_args::all_scalar(&args.args);
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (text, zones) = match arrays.as_slice() {
            // the session's zone not given: a UTC session's
            [text] => (text, None),
            [text, zones] => (text, Some(zones)),
            _ => {
                return Err(DataFusionError::Plan(format!(
                    "{TIMESTAMPTZ_IN_ZONE} takes text and a zone"
                )))
            }
        };
        let text = cast(text, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let zones = match zones {
            Some(z) => cast(z, &DataType::Utf8)?,
            None => Arc::new(datafusion::arrow::array::StringArray::from(vec![
                "UTC";
                text.len()
            ])),
        };
        let zones = zones.as_string::<i32>();
        let mut cache = ZoneCache(None);
        let mut out = TimestampMicrosecondBuilder::with_capacity(text.len());
        for i in 0..text.len() {
            if text.is_null(i) || zones.is_null(i) {
                out.append_null();
                continue;
            }
            let zone = cache.get(zones.value(i))?;
            out.append_value(
                crate::pgtypes::timestamp_instant_in_zone(text.value(i), zone)
                    .map_err(DataFusionError::from)?,
            );
        }
        let out: ArrayRef = Arc::new(out.finish().with_timezone(UTC_LABEL));
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ZoneAddInterval {
    signature: Signature,
}

/// `ts + sign * interval` as PostgreSQL's `timestamptz_pl_interval`: the
/// months on the wall clock (the day clamped to the month's last), then the
/// days on the wall clock, then the time as elapsed time.
fn add_interval(ts: i64, months: i32, days: i32, nanos: i64, sign: i32, zone: Zone) -> Result<i64> {
    let months = months.checked_mul(sign).ok_or_else(overflow)?;
    let days = days.checked_mul(sign).ok_or_else(overflow)?;
    let micros = (nanos / 1000)
        .checked_mul(i64::from(sign))
        .ok_or_else(overflow)?;
    let mut t = ts;
    if months != 0 {
        let wall = DateTime::<Utc>::from_timestamp_micros(to_wall_clock(t, zone)?)
            .ok_or_else(overflow)?
            .naive_utc();
        let moved = if months > 0 {
            wall.checked_add_months(Months::new(months.unsigned_abs()))
        } else {
            wall.checked_sub_months(Months::new(months.unsigned_abs()))
        }
        .ok_or_else(overflow)?;
        t = to_instant(moved.and_utc().timestamp_micros(), zone)?;
    }
    if days != 0 {
        let wall = i64::from(days)
            .checked_mul(MICROS_PER_DAY)
            .and_then(|d| to_wall_clock(t, zone).ok()?.checked_add(d))
            .ok_or_else(overflow)?;
        t = to_instant(wall, zone)?;
    }
    t.checked_add(micros).ok_or_else(overflow)
}

impl ScalarUDFImpl for ZoneAddInterval {
    fn name(&self) -> &str {
        ZONE_ADD_INTERVAL
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(instant_type())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = crate::udf_args::all_scalar(&args.args);
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [ts, interval, zones, sign] = arrays.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "{ZONE_ADD_INTERVAL} takes a timestamp, an interval, a zone and a sign"
            )));
        };
        let (ts, interval, zones) = (instants(ts)?, intervals(interval)?, texts(zones)?);
        let sign = cast(sign, &DataType::Int32)?;
        let sign = sign.as_primitive::<datafusion::arrow::datatypes::Int32Type>();
        let mut cache = ZoneCache(None);
        let mut out = TimestampMicrosecondBuilder::with_capacity(ts.len());
        for i in 0..ts.len() {
            if ts.is_null(i) || interval.is_null(i) || zones.is_null(i) || sign.is_null(i) {
                out.append_null();
                continue;
            }
            let zone = cache.get(zones.value(i))?;
            let iv = interval.value(i);
            out.append_value(
                add_interval(
                    ts.value(i),
                    iv.months,
                    iv.days,
                    iv.nanoseconds,
                    sign.value(i),
                    zone,
                )
                .map_err(DataFusionError::from)?,
            );
        }
        let out: ArrayRef = Arc::new(out.finish().with_timezone(UTC_LABEL));
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ZoneSeries {
    signature: Signature,
}

/// The list's type: `timestamptz` items.
fn series_type() -> DataType {
    DataType::new_list(instant_type(), true)
}

/// An interval's sign as PostgreSQL's `interval_cmp` against zero sees it
/// (a month is 30 days, a day 24 hours).
fn interval_sign(months: i32, days: i32, nanos: i64) -> i32 {
    let total =
        (i128::from(months) * 30 + i128::from(days)) * 86_400_000_000_000 + i128::from(nanos);
    match total.cmp(&0) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    }
}

impl ScalarUDFImpl for ZoneSeries {
    fn name(&self) -> &str {
        ZONE_SERIES
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(series_type())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        use datafusion::arrow::array::ListBuilder;
        let all_scalar = crate::udf_args::all_scalar(&args.args);
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [start, stop, step, zones] = arrays.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "{ZONE_SERIES} takes a start, a stop, a step and a zone"
            )));
        };
        let (start, stop) = (instants(start)?, instants(stop)?);
        let (step, zones) = (intervals(step)?, texts(zones)?);
        let mut cache = ZoneCache(None);
        let mut out = ListBuilder::new(TimestampMicrosecondBuilder::new().with_timezone(UTC_LABEL));
        for i in 0..start.len() {
            if start.is_null(i) || stop.is_null(i) || step.is_null(i) || zones.is_null(i) {
                out.append_null();
                continue;
            }
            let zone = cache.get(zones.value(i))?;
            let values = series_values(start.value(i), stop.value(i), step.value(i), zone, None)?;
            out.values().append_slice(&values);
            out.append(true);
        }
        let out: ArrayRef = Arc::new(out.finish());
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

/// `generate_series(start, stop, step)` of instants (microseconds) with
/// the step on `zone`'s wall clock, as PostgreSQL's; at most `limit`
/// values (54000 beyond: the series of a table function is built whole).
pub(crate) fn series_values(
    start: i64,
    end: i64,
    step: datafusion::arrow::datatypes::IntervalMonthDayNano,
    zone: Zone,
    limit: Option<usize>,
) -> DfResult<Vec<i64>> {
    let direction = interval_sign(step.months, step.days, step.nanoseconds);
    if direction == 0 {
        return Err(DataFusionError::from(SqlError::InvalidParameter(
            "step size cannot equal zero".into(),
        )));
    }
    let mut values = Vec::new();
    let mut at = start;
    while (direction > 0 && at <= end) || (direction < 0 && at >= end) {
        if limit.is_some_and(|l| values.len() >= l) {
            return Err(DataFusionError::from(SqlError::ProgramLimitExceeded(
                format!(
                    "generate_series in FROM gives at most {} values in a session whose \
                 TimeZone has daylight saving",
                    limit.unwrap_or_default()
                ),
            )));
        }
        values.push(at);
        let next = add_interval(at, step.months, step.days, step.nanoseconds, 1, zone)
            .map_err(DataFusionError::from)?;
        if next == at {
            break;
        }
        at = next;
    }
    Ok(values)
}

/// [`ZONE_SERIES`].
pub fn zone_series_function() -> ScalarUDF {
    ScalarUDF::new_from_impl(ZoneSeries {
        signature: Signature::any(4, Volatility::Immutable),
    })
}

/// [`TIMESTAMPTZ_IN_ZONE`].
pub fn timestamptz_in_zone_function() -> ScalarUDF {
    use datafusion::logical_expr::TypeSignature;
    ScalarUDF::new_from_impl(TimestamptzInZone {
        signature: Signature::one_of(
            vec![TypeSignature::Any(1), TypeSignature::Any(2)],
            Volatility::Immutable,
        ),
    })
}

/// [`ZONE_ADD_INTERVAL`].
pub fn zone_add_interval_function() -> ScalarUDF {
    ScalarUDF::new_from_impl(ZoneAddInterval {
        signature: Signature::any(4, Volatility::Immutable),
    })
}

/// The functions, for the session to register.
pub fn zone_functions() -> Vec<ScalarUDF> {
    vec![
        timestamptz_in_zone_function(),
        zone_add_interval_function(),
        zone_series_function(),
    ]
}

/// A column of `a`'s date/time type stored into a column of type `ty` on
/// `zone`'s wall clock: a `timestamp` or `date` into `timestamptz` is the
/// instant the zone's clocks showed it, a `timestamptz` into `timestamp`
/// or `date` the zone's wall clock at that instant. `None` for every other
/// pair of types (no zone is involved).
pub fn cast_on_wall_clock(
    a: &ArrayRef,
    ty: ColumnType,
    zone: &SessionZone,
) -> Result<Option<ArrayRef>> {
    let micros = |a: &ArrayRef, tz: Option<Arc<str>>| -> Result<TimestampMicrosecondArray> {
        let c = cast(a, &DataType::Timestamp(TimeUnit::Microsecond, tz))?;
        Ok(c.as_primitive::<TimestampMicrosecondType>().clone())
    };
    let convert = |values: &TimestampMicrosecondArray,
                   f: &dyn Fn(i64) -> Result<i64>|
     -> Result<TimestampMicrosecondArray> {
        let mut out = TimestampMicrosecondBuilder::with_capacity(values.len());
        for v in values.iter() {
            match v {
                Some(v) => out.append_value(f(v)?),
                None => out.append_null(),
            }
        }
        Ok(out.finish())
    };
    Ok(match (a.data_type(), ty) {
        (
            DataType::Timestamp(_, None) | DataType::Date32 | DataType::Date64,
            ColumnType::TimestampTz,
        ) => {
            let wall = micros(a, None)?;
            let out = convert(&wall, &|w| zone.instant_of(w))?;
            Some(Arc::new(out.with_timezone(UTC_LABEL)))
        }
        (DataType::Timestamp(_, Some(_)), ColumnType::Timestamp) => {
            let instants = micros(a, Some(UTC_LABEL.into()))?;
            Some(Arc::new(convert(&instants, &|t| zone.wall_clock_of(t))?))
        }
        (DataType::Timestamp(_, Some(_)), ColumnType::Date) => {
            let instants = micros(a, Some(UTC_LABEL.into()))?;
            let wall = convert(&instants, &|t| zone.wall_clock_of(t))?;
            let days: Date32Array = wall
                .iter()
                .map(|w| {
                    w.map(|w| i32::try_from(w.div_euclid(MICROS_PER_DAY)).map_err(|_| overflow()))
                        .transpose()
                })
                .collect::<Result<_>>()?;
            Some(Arc::new(days))
        }
        _ => None,
    })
}

/// `t` with every `timestamptz` (also inside a list or a record) labelled
/// `label`; `None` if there is none to relabel.
pub(crate) fn relabel_type(t: &DataType, label: &Arc<str>) -> Option<DataType> {
    match t {
        DataType::Timestamp(unit, Some(l)) if l != label => {
            Some(DataType::Timestamp(*unit, Some(Arc::clone(label))))
        }
        DataType::List(f) => relabel_type(f.data_type(), label)
            .map(|inner| DataType::List(Arc::new(f.as_ref().clone().with_data_type(inner)))),
        DataType::Struct(fields) => {
            let relabelled: Vec<Option<DataType>> = fields
                .iter()
                .map(|f| relabel_type(f.data_type(), label))
                .collect();
            relabelled.iter().any(Option::is_some).then(|| {
                DataType::Struct(
                    fields
                        .iter()
                        .zip(relabelled)
                        .map(|(f, t)| match t {
                            Some(t) => Arc::new(f.as_ref().clone().with_data_type(t)),
                            None => Arc::clone(f),
                        })
                        .collect(),
                )
            })
        }
        _ => None,
    }
}

fn relabel_schema(schema: &SchemaRef, label: &Arc<str>) -> Option<SchemaRef> {
    let mut changed = false;
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match relabel_type(f.data_type(), label) {
            Some(t) => {
                changed = true;
                f.as_ref().clone().with_data_type(t)
            }
            None => f.as_ref().clone(),
        })
        .collect();
    changed.then(|| Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())))
}

fn relabel_batch(batch: RecordBatch, schema: &SchemaRef) -> DfResult<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(Arc::clone(c))
            } else {
                // the same instants under another label: no value changes
                cast(c, f.data_type()).map_err(DataFusionError::from)
            }
        })
        .collect::<DfResult<Vec<_>>>()?;
    Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
}

/// `a` labelled with `zone` where it is a `timestamptz` (or a list of
/// them), for text written on the zone's wall clock; as it is otherwise.
pub fn localize_array(a: &ArrayRef, zone: &SessionZone) -> Result<ArrayRef> {
    let Some(t) = zone
        .output_label()
        .and_then(|label| relabel_type(a.data_type(), &label))
    else {
        return Ok(Arc::clone(a));
    };
    Ok(cast(a, &t)?)
}

/// A result whose `timestamptz` columns carry `zone`'s label, so that their
/// text is written on its wall clock. Unchanged in a UTC session and for
/// results without such columns; binary values are the same instants.
pub fn localize_output(out: Output, zone: &SessionZone) -> Output {
    let Some(label) = zone.output_label() else {
        return out;
    };
    let relabel = |schema: SchemaRef,
                   stream: datafusion::execution::SendableRecordBatchStream|
     -> (SchemaRef, datafusion::execution::SendableRecordBatchStream) {
        let Some(localized) = relabel_schema(&schema, &label) else {
            return (schema, stream);
        };
        let target = Arc::clone(&localized);
        let mapped = stream.map(move |b| b.and_then(|b| relabel_batch(b, &target)));
        (
            Arc::clone(&localized),
            Box::pin(RecordBatchStreamAdapter::new(localized, mapped)),
        )
    };
    match out {
        Output::Rows {
            schema,
            stream,
            command,
        } => {
            let (schema, stream) = relabel(schema, stream);
            Output::Rows {
                schema,
                stream,
                command,
            }
        }
        Output::CopyOut(mut copy) => {
            let (schema, stream) = relabel(Arc::clone(&copy.schema), copy.stream);
            copy.schema = schema;
            copy.stream = stream;
            Output::CopyOut(copy)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(s: &str) -> i64 {
        chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
            .expect("timestamp")
            .and_utc()
            .timestamp_micros()
    }

    #[test]
    fn days_and_months_move_the_wall_clock() {
        // PostgreSQL 15, TimeZone Europe/Berlin (summer time from
        // 2024-03-31 02:00 local)
        let berlin = resolve_zone("Europe/Berlin").expect("zone");
        // '2024-03-30 12:00+01' + '1 day' = '2024-03-31 12:00+02'
        let t = micros("2024-03-30 11:00:00");
        assert_eq!(
            add_interval(t, 0, 1, 0, 1, berlin).ok(),
            Some(micros("2024-03-31 10:00:00"))
        );
        // + '24 hours' is elapsed time: 13:00+02
        assert_eq!(
            add_interval(t, 0, 0, 86_400_000_000_000, 1, berlin).ok(),
            Some(micros("2024-03-31 11:00:00"))
        );
        // '2024-01-31 12:00+01' + '1 month' = '2024-02-29 12:00+01'
        assert_eq!(
            add_interval(micros("2024-01-31 11:00:00"), 1, 0, 0, 1, berlin).ok(),
            Some(micros("2024-02-29 11:00:00"))
        );
        // minus: '2024-03-31 12:00+02' - '1 day' = '2024-03-30 12:00+01'
        assert_eq!(
            add_interval(micros("2024-03-31 10:00:00"), 0, 1, 0, -1, berlin).ok(),
            Some(t)
        );
    }
}
