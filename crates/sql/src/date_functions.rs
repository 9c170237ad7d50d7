//! PostgreSQL's date/time functions that DataFusion lacks: `age`,
//! `justify_days`, `justify_hours`, `justify_interval`, `make_timestamp`,
//! `make_timestamptz` and `isfinite`.
//!
//! Each follows PostgreSQL 15's algorithm (`timestamp_age`,
//! `interval_justify_*`, `make_timestamp_internal`), on Arrow's
//! microsecond timestamps and month-day-nanosecond intervals; they are
//! evaluated row by row through [`crate::pg_functions`]'s `RowFunction`.
//!
//! Invariants:
//! * `age` is PostgreSQL's symbolic difference: whole years and months
//!   first, then days counted in the month before the later date, then the
//!   time of day; its sign is the sign of `a - b`.
//! * `age(ts)` measures from midnight today in UTC (refused in a session
//!   in another zone: `crate::zone_rules`); `make_timestamptz` without a
//!   zone reads the time on the session zone's wall clock (the rule adds
//!   it), and a `timestamptz` argument of `age` is compared as that zone's
//!   wall-clock time (the rule's cast).
//! * Eddy stores no infinite date or timestamp, so `isfinite` is true for
//!   every value it holds (NULL for NULL).

use datafusion::arrow::datatypes::{DataType, IntervalMonthDayNano, TimeUnit};
use datafusion::common::ScalarValue;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike, Utc};

use crate::at_time_zone::{resolve_zone, to_instant};
use crate::error::SqlError;
use crate::pg_functions::{arity, function, no_function};

const MICROS_PER_DAY: i64 = 86_400_000_000;
const NANOS_PER_MICRO: i64 = 1_000;
const DAYS_PER_MONTH: i32 = 30;

/// The functions, for the session to register.
pub fn date_functions() -> Vec<datafusion::logical_expr::ScalarUDF> {
    vec![
        function("age", coerce_age, |_| Ok(interval_type()), age),
        function(
            "justify_days",
            coerce_interval,
            |_| Ok(interval_type()),
            justify_days,
        ),
        function(
            "justify_hours",
            coerce_interval,
            |_| Ok(interval_type()),
            justify_hours,
        ),
        function(
            "justify_interval",
            coerce_interval,
            |_| Ok(interval_type()),
            justify_interval,
        ),
        function(
            "make_timestamp",
            coerce_make,
            |_| Ok(DataType::Timestamp(TimeUnit::Microsecond, None)),
            make_timestamp,
        ),
        function(
            "make_timestamptz",
            coerce_make,
            |_| {
                Ok(DataType::Timestamp(
                    TimeUnit::Microsecond,
                    Some("+00:00".into()),
                ))
            },
            make_timestamptz,
        ),
        function(
            "isfinite",
            coerce_isfinite,
            |_| Ok(DataType::Boolean),
            isfinite,
        ),
    ]
}

fn interval_type() -> DataType {
    DataType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano)
}

fn micros_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, None)
}

// ---- age -------------------------------------------------------------------

fn coerce_age(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("age", args, 1, 2)?;
    args.iter()
        .map(|t| match t {
            DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 | DataType::Null => {
                Ok(micros_type())
            }
            _ => Err(no_function("age", args)),
        })
        .collect()
}

fn timestamp_micros(v: &ScalarValue) -> Option<i64> {
    match v {
        ScalarValue::TimestampMicrosecond(Some(m), _) => Some(*m),
        _ => None,
    }
}

fn datetime(micros: i64) -> Result<NaiveDateTime, SqlError> {
    DateTime::<Utc>::from_timestamp_micros(micros)
        .map(|t| t.naive_utc())
        .ok_or_else(|| SqlError::DatetimeOverflow("timestamp out of range".into()))
}

fn days_in_month(year: i32, month: u32) -> i64 {
    let first = NaiveDate::from_ymd_opt(year, month, 1);
    let next = if month == 12 {
        NaiveDate::from_ymd_opt(year + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)
    };
    match (first, next) {
        (Some(a), Some(b)) => (b - a).num_days(),
        _ => 31,
    }
}

/// PostgreSQL's `timestamp_age(a, b)`.
fn symbolic_age(a: i64, b: i64) -> Result<IntervalMonthDayNano, SqlError> {
    let (t1, t2) = (datetime(a)?, datetime(b)?);
    let micros_of = |t: &NaiveDateTime| i64::from(t.nanosecond() / 1_000);
    let mut fsec = micros_of(&t1) - micros_of(&t2);
    let mut sec = i64::from(t1.second()) - i64::from(t2.second());
    let mut min = i64::from(t1.minute()) - i64::from(t2.minute());
    let mut hour = i64::from(t1.hour()) - i64::from(t2.hour());
    let mut mday = i64::from(t1.day()) - i64::from(t2.day());
    let mut mon = i64::from(t1.month()) - i64::from(t2.month());
    let mut year = i64::from(t1.year()) - i64::from(t2.year());
    let flip = a < b;
    if flip {
        for f in [
            &mut fsec, &mut sec, &mut min, &mut hour, &mut mday, &mut mon, &mut year,
        ] {
            *f = -*f;
        }
    }
    while fsec < 0 {
        fsec += 1_000_000;
        sec -= 1;
    }
    while sec < 0 {
        sec += 60;
        min -= 1;
    }
    while min < 0 {
        min += 60;
        hour -= 1;
    }
    while hour < 0 {
        hour += 24;
        mday -= 1;
    }
    // days borrowed from the month before the later date
    let (by, bm) = if flip {
        (t1.year(), t1.month())
    } else {
        (t2.year(), t2.month())
    };
    while mday < 0 {
        mday += days_in_month(by, bm);
        mon -= 1;
    }
    while mon < 0 {
        mon += 12;
        year -= 1;
    }
    if flip {
        for f in [
            &mut fsec, &mut sec, &mut min, &mut hour, &mut mday, &mut mon, &mut year,
        ] {
            *f = -*f;
        }
    }
    let overflow = || SqlError::DatetimeOverflow("interval out of range".into());
    let months = i32::try_from(year * 12 + mon).map_err(|_| overflow())?;
    let days = i32::try_from(mday).map_err(|_| overflow())?;
    let micros = ((hour * 60 + min) * 60 + sec) * 1_000_000 + fsec;
    Ok(IntervalMonthDayNano::new(
        months,
        days,
        micros * NANOS_PER_MICRO,
    ))
}

fn age(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let (a, b) = match args {
        [b] => {
            let today = Utc::now()
                .date_naive()
                .and_hms_opt(0, 0, 0)
                .map(|t| t.and_utc().timestamp_micros());
            (today, timestamp_micros(b))
        }
        [a, b] => (timestamp_micros(a), timestamp_micros(b)),
        _ => (None, None),
    };
    let (Some(a), Some(b)) = (a, b) else {
        return Ok(ScalarValue::IntervalMonthDayNano(None));
    };
    Ok(ScalarValue::IntervalMonthDayNano(Some(symbolic_age(a, b)?)))
}

// ---- justify_* ---------------------------------------------------------------

fn coerce_interval(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("justify_interval", args, 1, 1)?;
    match &args[0] {
        DataType::Interval(_) | DataType::Null => Ok(vec![interval_type()]),
        _ => Err(no_function("justify_interval", args)),
    }
}

fn interval_arg(args: &[ScalarValue]) -> Option<(i32, i32, i64)> {
    match args.first() {
        Some(ScalarValue::IntervalMonthDayNano(Some(v))) => {
            Some((v.months, v.days, v.nanoseconds / NANOS_PER_MICRO))
        }
        _ => None,
    }
}

fn interval_value(months: i64, days: i64, micros: i64) -> Result<ScalarValue, SqlError> {
    let overflow = || SqlError::DatetimeOverflow("interval out of range".into());
    Ok(ScalarValue::IntervalMonthDayNano(Some(
        IntervalMonthDayNano::new(
            i32::try_from(months).map_err(|_| overflow())?,
            i32::try_from(days).map_err(|_| overflow())?,
            micros.checked_mul(NANOS_PER_MICRO).ok_or_else(overflow)?,
        ),
    )))
}

fn justify_days(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let Some((months, days, micros)) = interval_arg(args) else {
        return Ok(ScalarValue::IntervalMonthDayNano(None));
    };
    let (mut months, mut days) = (i64::from(months), i64::from(days));
    let per = i64::from(DAYS_PER_MONTH);
    let whole = days / per;
    days -= whole * per;
    months += whole;
    if months > 0 && days < 0 {
        days += per;
        months -= 1;
    } else if months < 0 && days > 0 {
        days -= per;
        months += 1;
    }
    interval_value(months, days, micros)
}

fn justify_hours(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let Some((months, days, micros)) = interval_arg(args) else {
        return Ok(ScalarValue::IntervalMonthDayNano(None));
    };
    let mut days = i64::from(days);
    let whole = micros / MICROS_PER_DAY;
    let mut micros = micros - whole * MICROS_PER_DAY;
    days += whole;
    if days > 0 && micros < 0 {
        micros += MICROS_PER_DAY;
        days -= 1;
    } else if days < 0 && micros > 0 {
        micros -= MICROS_PER_DAY;
        days += 1;
    }
    interval_value(i64::from(months), days, micros)
}

fn justify_interval(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let Some((months, days, micros)) = interval_arg(args) else {
        return Ok(ScalarValue::IntervalMonthDayNano(None));
    };
    let (mut months, mut days) = (i64::from(months), i64::from(days));
    let per = i64::from(DAYS_PER_MONTH);
    let whole_days = micros / MICROS_PER_DAY;
    let mut micros = micros - whole_days * MICROS_PER_DAY;
    days += whole_days;
    let whole_months = days / per;
    days -= whole_months * per;
    months += whole_months;
    if months > 0 && (days < 0 || (days == 0 && micros < 0)) {
        days += per;
        months -= 1;
    } else if months < 0 && (days > 0 || (days == 0 && micros > 0)) {
        days -= per;
        months += 1;
    }
    if days > 0 && micros < 0 {
        micros += MICROS_PER_DAY;
        days -= 1;
    } else if days < 0 && micros > 0 {
        micros -= MICROS_PER_DAY;
        days += 1;
    }
    interval_value(months, days, micros)
}

// ---- make_timestamp(tz) ------------------------------------------------------

fn coerce_make(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("make_timestamp", args, 6, 7)?;
    let mut out = Vec::with_capacity(args.len());
    for (i, t) in args.iter().enumerate() {
        let ok = match i {
            0..=4 => t.is_integer() || t == &DataType::Null,
            5 => t.is_numeric() || t == &DataType::Null,
            _ => matches!(
                t,
                DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 | DataType::Null
            ),
        };
        if !ok {
            return Err(no_function("make_timestamp", args));
        }
        out.push(match i {
            0..=4 => DataType::Int32,
            5 => DataType::Float64,
            _ => DataType::Utf8,
        });
    }
    Ok(out)
}

/// PostgreSQL's `make_timestamp_internal`: the wall-clock time in
/// microseconds, or 22008 with PostgreSQL's message.
fn wall_clock(args: &[ScalarValue]) -> Result<Option<i64>, SqlError> {
    let int = |i: usize| match args.get(i) {
        Some(ScalarValue::Int32(v)) => *v,
        _ => None,
    };
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute)) =
        (int(0), int(1), int(2), int(3), int(4))
    else {
        return Ok(None);
    };
    let Some(ScalarValue::Float64(Some(sec))) = args.get(5) else {
        return Ok(None);
    };
    // a negative year is BC: -1 is 1 BC, year 0 of the proleptic calendar
    let calendar_year = if year < 0 { year + 1 } else { year };
    let date = (year != 0)
        .then(|| {
            u32::try_from(month)
                .ok()
                .zip(u32::try_from(day).ok())
                .and_then(|(m, d)| NaiveDate::from_ymd_opt(calendar_year, m, d))
        })
        .flatten()
        .ok_or_else(|| {
            SqlError::DatetimeOverflow(format!(
                "date field value out of range: {year}-{month:02}-{day:02}"
            ))
        })?;
    let time_error = || {
        SqlError::DatetimeOverflow(format!(
            "time field value out of range: {hour}:{minute:02}:{sec:02}"
        ))
    };
    if !(0..24).contains(&hour) || !(0..60).contains(&minute) || !(0.0..60.0).contains(sec) {
        return Err(time_error());
    }
    #[allow(clippy::cast_possible_truncation)]
    let sec_micros = (sec * 1_000_000.0).round() as i64;
    let day_micros = (i64::from(hour) * 3600 + i64::from(minute) * 60) * 1_000_000 + sec_micros;
    let midnight = date
        .and_hms_opt(0, 0, 0)
        .ok_or_else(time_error)?
        .and_utc()
        .timestamp_micros();
    midnight
        .checked_add(day_micros)
        .map(Some)
        .ok_or_else(|| SqlError::DatetimeOverflow("timestamp out of range".into()))
}

fn make_timestamp(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    if args.len() != 6 {
        return Err(SqlError::UndefinedOperator(
            "function make_timestamp takes six arguments".into(),
        ));
    }
    Ok(ScalarValue::TimestampMicrosecond(wall_clock(args)?, None))
}

fn make_timestamptz(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let label = Some("+00:00".into());
    let Some(wall) = wall_clock(args)? else {
        return Ok(ScalarValue::TimestampMicrosecond(None, label));
    };
    let instant = match args.get(6) {
        None => wall,
        Some(ScalarValue::Utf8(Some(zone))) => to_instant(wall, resolve_zone(zone)?)?,
        Some(_) => return Ok(ScalarValue::TimestampMicrosecond(None, label)),
    };
    Ok(ScalarValue::TimestampMicrosecond(Some(instant), label))
}

// ---- isfinite ------------------------------------------------------------------

fn coerce_isfinite(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("isfinite", args, 1, 1)?;
    match &args[0] {
        DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(..)
        | DataType::Interval(_)
        | DataType::Null => Ok(args.to_vec()),
        _ => Err(no_function("isfinite", args)),
    }
}

fn isfinite(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    Ok(ScalarValue::Boolean(
        args.first()
            .map(|v| !v.is_null())
            .filter(|present| *present),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(s: &str) -> i64 {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
            .expect("timestamp")
            .and_utc()
            .timestamp_micros()
    }

    fn parts(v: IntervalMonthDayNano) -> (i32, i32, i64) {
        (v.months, v.days, v.nanoseconds / 1_000)
    }

    #[test]
    fn age_is_postgresqls_symbolic_difference() {
        // age('2001-04-10', '1957-06-13') = 43 years 9 mons 27 days
        let a = symbolic_age(micros("2001-04-10 00:00:00"), micros("1957-06-13 00:00:00"))
            .expect("age");
        assert_eq!(parts(a), (43 * 12 + 9, 27, 0));
        // age('2020-03-01', '2020-01-31 12:00') = 1 mon -- 29 days 12:00
        let b = symbolic_age(micros("2020-03-01 00:00:00"), micros("2020-01-31 12:00:00"))
            .expect("age");
        assert_eq!(parts(b), (1, 0, 12 * 3_600_000_000));
        let c = symbolic_age(micros("1957-06-13 00:00:00"), micros("2001-04-10 00:00:00"))
            .expect("age");
        assert_eq!(parts(c), (-(43 * 12 + 9), -27, 0));
    }

    #[test]
    fn justify_follows_postgresql() {
        let iv = |m, d, us: i64| {
            [ScalarValue::IntervalMonthDayNano(Some(
                IntervalMonthDayNano::new(m, d, us * 1_000),
            ))]
        };
        let get = |v: Result<ScalarValue, SqlError>| match v {
            Ok(ScalarValue::IntervalMonthDayNano(Some(v))) => parts(v),
            other => panic!("{other:?}"),
        };
        let ty = interval_type();
        assert_eq!(get(justify_days(&iv(0, 35, 0), &ty)), (1, 5, 0));
        assert_eq!(get(justify_days(&iv(1, -35, 0), &ty)), (0, -5, 0));
        assert_eq!(
            get(justify_hours(&iv(0, 0, 27 * 3_600_000_000), &ty)),
            (0, 1, 3 * 3_600_000_000)
        );
        // justify_interval('1 mon -1 hour') = 29 days 23:00:00
        assert_eq!(
            get(justify_interval(&iv(1, 0, -3_600_000_000), &ty)),
            (0, 29, 23 * 3_600_000_000)
        );
    }
}
