//! `to_char(interval, text)`: PostgreSQL 15's date/time template patterns
//! applied to an interval's fields, as its `interval_to_char` does.
//!
//! The interval is split as PostgreSQL splits it: years = months / 12,
//! `MM` = months % 12, `DD` = days, `HH24` = whole hours of the time part
//! (not wrapped at 24), then minutes, seconds and microseconds; every part
//! keeps the sign of what it came from (`-01:-30` for minus 90 minutes).
//! `DDD` is (years * 12 + months) * 30 + days and `WW`, `W` follow from
//! it and `DD`; `HH`/`HH12` are the hours on a 12-hour clock and `AM`/`PM`
//! their half of the day. A numeric field is zero-padded to its width,
//! which grows by one for the sign where PostgreSQL's does (`HH24`, `MI`,
//! `SS`, `MM`, the years) and not where it does not (`DD`, `DDD`, `WW`).
//!
//! Fields that name a calendar date or zone (`MONTH`, `MON`, `DAY`, `DY`,
//! `D`, `ID`, `BC`/`AD`, `TZ`, `TZH`, `TZM`, `OF`) are 22007 "invalid format
//! specification for an interval value", as in PostgreSQL. The ISO-week
//! fields (`IYYY`...`I`, `IW`, `IDDD`) and `J`, for which PostgreSQL
//! prints numbers computed as if the interval were a date, are refused
//! with 0A000 instead of imitated.

use datafusion::arrow::datatypes::IntervalMonthDayNano;

use crate::error::SqlError;
use crate::to_char::{cased, push_ordinal, Case, Field, Node, Template};

/// PostgreSQL's `rm_months_upper`: December first.
const ROMAN_REVERSED: [&str; 12] = [
    "XII", "XI", "X", "IX", "VIII", "VII", "VI", "V", "IV", "III", "II", "I",
];

/// An interval's fields as PostgreSQL's `interval2itm` splits them.
struct Parts {
    years: i64,
    months: i64,
    days: i64,
    hours: i64,
    minutes: i64,
    seconds: i64,
    micros: i64,
    /// `tm_yday`: the whole span in 30-day months and days.
    day_of_year: i64,
}

impl Parts {
    fn of(v: IntervalMonthDayNano) -> Parts {
        let months = i64::from(v.months);
        let time = v.nanoseconds / 1000;
        let (years, months) = (months / 12, months % 12);
        let days = i64::from(v.days);
        Parts {
            years,
            months,
            days,
            hours: time / 3_600_000_000,
            minutes: time % 3_600_000_000 / 60_000_000,
            seconds: time % 60_000_000 / 1_000_000,
            micros: time % 1_000_000,
            day_of_year: (years * 12 + months) * 30 + days,
        }
    }
}

fn not_for_intervals() -> SqlError {
    SqlError::InvalidDatetime("invalid format specification for an interval value".into())
        .with_detail("Intervals are not tied to specific calendar dates.".into())
}

fn refused(what: &str) -> SqlError {
    SqlError::FeatureNotSupported(format!(
        "to_char of an interval does not support {what}: PostgreSQL prints it as if the interval were a date"
    ))
}

/// `template` applied to `v` (module doc).
pub(crate) fn format_interval(
    template: &Template,
    v: IntervalMonthDayNano,
) -> Result<String, SqlError> {
    let p = Parts::of(v);
    let mut out = String::new();
    for node in template.nodes() {
        match node {
            Node::Literal(s) => out.push_str(s),
            Node::Field {
                field,
                fill_mode,
                ordinal,
            } => format_field(&mut out, &p, *field, *fill_mode, *ordinal)?,
        }
    }
    Ok(out)
}

/// `value` zero-padded to `width` (its sign inside the width, as C's
/// `%0*d`), or unpadded in fill mode.
fn padded(value: i64, width: usize, fill_mode: bool) -> String {
    if fill_mode {
        value.to_string()
    } else {
        format!("{value:0width$}")
    }
}

/// The width of a field that PostgreSQL widens by one for a minus sign.
fn signed_width(value: i64, width: usize) -> usize {
    if value >= 0 {
        width
    } else {
        width + 1
    }
}

fn format_field(
    out: &mut String,
    p: &Parts,
    field: Field,
    fill_mode: bool,
    ordinal: Option<Case>,
) -> Result<(), SqlError> {
    let hour12 = match p.hours % 12 {
        0 => 12,
        h => h,
    };
    let (value, text) = match field {
        Field::Hh24 => (
            p.hours,
            padded(p.hours, signed_width(p.hours, 2), fill_mode),
        ),
        Field::Hh12 => (hour12, padded(hour12, signed_width(p.hours, 2), fill_mode)),
        Field::Mi => (
            p.minutes,
            padded(p.minutes, signed_width(p.minutes, 2), fill_mode),
        ),
        Field::Ss => (
            p.seconds,
            padded(p.seconds, signed_width(p.seconds, 2), fill_mode),
        ),
        // fraction fields are never shortened by FM, as in PostgreSQL
        Field::Ms => (p.micros / 1000, format!("{:03}", p.micros / 1000)),
        Field::Us => (p.micros, format!("{:06}", p.micros)),
        Field::Ff(digits) => {
            let v = p.micros / 10i64.pow(6u32.saturating_sub(digits));
            (v, format!("{v:0w$}", w = digits as usize))
        }
        Field::SecondsOfDay => {
            let v = p.hours * 3600 + p.minutes * 60 + p.seconds;
            (v, v.to_string())
        }
        Field::Year => (
            p.years,
            padded(p.years, signed_width(p.years, 4), fill_mode),
        ),
        Field::YearComma => {
            let thousands = p.years / 1000;
            out.push_str(&format!("{thousands},{:03}", p.years - thousands * 1000));
            push_ordinal(out, p.years, ordinal);
            return Ok(());
        }
        Field::Year3 => {
            let v = p.years % 1000;
            (v, padded(v, signed_width(p.years, 3), fill_mode))
        }
        Field::Year2 => {
            let v = p.years % 100;
            (v, padded(v, signed_width(p.years, 2), fill_mode))
        }
        Field::Year1 => {
            let v = p.years % 10;
            (v, padded(v, signed_width(p.years, 1), fill_mode))
        }
        Field::Month => (
            p.months,
            padded(p.months, signed_width(p.months, 2), fill_mode),
        ),
        Field::Day => (p.days, padded(p.days, 2, fill_mode)),
        Field::DayOfYear => (p.day_of_year, padded(p.day_of_year, 3, fill_mode)),
        Field::WeekOfYear => {
            let v = (p.day_of_year - 1) / 7 + 1;
            (v, padded(v, 2, fill_mode))
        }
        Field::WeekOfMonth => {
            let v = (p.days - 1) / 7 + 1;
            (v, v.to_string())
        }
        Field::Century => {
            let v = p.years / 100;
            let text = if (-99..=99).contains(&v) {
                padded(v, signed_width(v, 2), fill_mode)
            } else {
                v.to_string()
            };
            (v, text)
        }
        Field::Quarter => {
            if p.months == 0 {
                return Ok(());
            }
            let v = (p.months - 1) / 3 + 1;
            (v, v.to_string())
        }
        Field::Meridian(case, dots) => {
            let pm = p.hours % 24 >= 12;
            let s = match (pm, dots) {
                (false, false) => "AM",
                (true, false) => "PM",
                (false, true) => "A.M.",
                (true, true) => "P.M.",
            };
            out.push_str(&cased(s, case));
            return Ok(());
        }
        Field::RomanMonth(case) => {
            if p.months == 0 && p.years == 0 {
                return Ok(());
            }
            let index = match p.months {
                0 if p.years >= 0 => 0,
                0 => 11,
                m if m < 0 => -(m + 1),
                m => 12 - m,
            };
            let r = usize::try_from(index)
                .ok()
                .and_then(|i| ROMAN_REVERSED.get(i))
                .copied()
                .unwrap_or("");
            let r = cased(r, case);
            out.push_str(&if fill_mode { r } else { format!("{r:<4}") });
            return Ok(());
        }
        Field::MonthName(_)
        | Field::MonthAbbrev(_)
        | Field::DayName(_)
        | Field::DayAbbrev(_)
        | Field::DayOfWeek
        | Field::IsoDayOfWeek
        | Field::Era(..)
        | Field::ZoneName(_)
        | Field::Offset
        | Field::OffsetHours
        | Field::OffsetMinutes => return Err(not_for_intervals()),
        Field::IsoYear | Field::IsoYear3 | Field::IsoYear2 | Field::IsoYear1 => {
            return Err(refused("ISO years (IYYY)"))
        }
        Field::IsoWeek | Field::IsoDayOfYear => return Err(refused("ISO weeks (IW, IDDD)")),
        Field::Julian => return Err(refused("Julian days (J)")),
    };
    out.push_str(&text);
    push_ordinal(out, value, ordinal);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(months: i32, days: i32, micros: i64, template: &str) -> Result<String, SqlError> {
        format_interval(
            &Template::parse(template),
            IntervalMonthDayNano::new(months, days, micros * 1000),
        )
    }

    const HOUR: i64 = 3_600_000_000;
    const MINUTE: i64 = 60_000_000;

    /// PostgreSQL 15's answers.
    #[test]
    fn fields_print_as_postgres_prints_them() {
        let t = 4 * HOUR + 5 * MINUTE + 6_789_000;
        assert_eq!(
            fmt(
                14,
                3,
                t,
                "YYYY-MM-DD HH24:MI:SS.MS US FF2 SSSS DDD WW W Q CC Y,YYY YYY YY Y"
            )
            .unwrap(),
            "0001-02-03 04:05:06.789 789000 78 14706 423 61 1 1 00 0,001 001 01 1"
        );
        assert_eq!(
            fmt(-14, -3, -t, "YYYY MM DD HH24 MI SS MS US SSSS DDD").unwrap(),
            "-0001 -02 -3 -04 -05 -06 -789 -789000 -14706 -423"
        );
        assert_eq!(
            fmt(
                0,
                0,
                27 * HOUR + 3 * MINUTE,
                "HH HH12 HH24 FMHH24 HH24th MIth"
            )
            .unwrap(),
            "03 03 27 27 27th 03rd"
        );
        assert_eq!(
            fmt(0, 0, -90 * MINUTE, "HH24:MI HH12").unwrap(),
            "-01:-30 -01"
        );
        assert_eq!(fmt(0, 0, 0, "HH12").unwrap(), "12");
        assert_eq!(
            fmt(-60, 0, 0, "CC Y,YYY YYY YY Y").unwrap(),
            "00 0,-05 -005 -05 -5"
        );
        assert_eq!(
            fmt(12345 * 12, 0, 0, "CC Y,YYY YYYY").unwrap(),
            "123 12,345 12345"
        );
        assert_eq!(
            fmt(0, 0, 100 * HOUR + 13 * MINUTE, "HH24 HH12 AM pm A.M. p.m.").unwrap(),
            "100 04 AM am A.M. a.m."
        );
        assert_eq!(
            fmt(0, 45, 0, "WW W DDD FMWW FMDDD DDth").unwrap(),
            "07 7 045 7 45 45th"
        );
        assert_eq!(fmt(5, 0, 0, "Q RM|").unwrap(), "2 V   |");
        assert_eq!(fmt(0, 0, HOUR, "RM|Q").unwrap(), "|");
        assert_eq!(fmt(-2, -3, 0, "FMMM MM FMDD DD").unwrap(), "-2 -02 -3 -3");
    }

    #[test]
    fn calendar_fields_are_refused() {
        for t in ["Month", "MON", "DAY", "Dy", "D", "ID", "BC", "TZ", "OF"] {
            assert_eq!(fmt(0, 0, HOUR, t).unwrap_err().sqlstate(), "22007", "{t}");
        }
        for t in ["IYYY", "IW", "IDDD", "J"] {
            assert_eq!(fmt(0, 0, HOUR, t).unwrap_err().sqlstate(), "0A000", "{t}");
        }
    }
}
