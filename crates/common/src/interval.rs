//! PostgreSQL's `interval`: months, days and microseconds kept apart (a
//! month is not a fixed number of days, nor a day of microseconds), its
//! text output (`IntervalStyle = postgres`) and the input forms
//! applications send: `1 year 2 mons 3 days 04:05:06`, `@ 1 hour ago`,
//! `1.5 days`, `-04:05`, ISO 8601 `P1Y2M3DT4H5M6.5S` and a bare number of
//! seconds. All arithmetic is checked: out of range is an error, never a
//! wrap.

use std::fmt::Write;

/// An interval as PostgreSQL stores it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Interval {
    pub months: i32,
    pub days: i32,
    pub micros: i64,
}

/// Why interval text was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IntervalError {
    /// Not an interval at all (PostgreSQL: 22007).
    #[error("invalid input syntax for type interval")]
    Syntax,
    /// A field out of range (PostgreSQL: 22008).
    #[error("interval out of range")]
    OutOfRange,
}

const MICROS_PER_SEC: i64 = 1_000_000;
const MICROS_PER_MIN: i64 = 60 * MICROS_PER_SEC;
const MICROS_PER_HOUR: i64 = 60 * MICROS_PER_MIN;
const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;
/// The most microseconds Eddy keeps in the time part: its Arrow type
/// (`Interval(MonthDayNano)`) counts nanoseconds in an i64.
pub const MAX_INTERVAL_MICROS: i64 = i64::MAX / 1000;

impl Interval {
    pub const ZERO: Interval = Interval {
        months: 0,
        days: 0,
        micros: 0,
    };

    /// Nanoseconds of the time part, for Arrow's `IntervalMonthDayNano`.
    pub fn nanos(self) -> Option<i64> {
        self.micros.checked_mul(1000)
    }
}

/// Accumulates fields in exact units: months, days, microseconds, with
/// fractions spilling down as PostgreSQL's `AdjustFractDays` etc. do
/// (a month is 30 days, a day 24 hours for spilled fractions).
#[derive(Default)]
struct Acc {
    months: i64,
    days: i64,
    micros: i128,
}

impl Acc {
    fn add_months(&mut self, whole: i64, frac: f64) -> Result<(), IntervalError> {
        self.months = self
            .months
            .checked_add(whole)
            .ok_or(IntervalError::OutOfRange)?;
        self.add_days_f(frac * 30.0)
    }

    /// Fractional days: whole days, the rest as time.
    fn add_days_f(&mut self, v: f64) -> Result<(), IntervalError> {
        if !v.is_finite() || v.abs() > 1e9 {
            return Err(IntervalError::OutOfRange);
        }
        let whole = v.trunc();
        self.add_days(whole as i64, v - whole)
    }

    fn add_days(&mut self, whole: i64, frac: f64) -> Result<(), IntervalError> {
        self.days = self
            .days
            .checked_add(whole)
            .ok_or(IntervalError::OutOfRange)?;
        self.add_micros_f(frac * MICROS_PER_DAY as f64)
    }

    fn add_micros_f(&mut self, v: f64) -> Result<(), IntervalError> {
        if !v.is_finite() || v.abs() > 1e30 {
            return Err(IntervalError::OutOfRange);
        }
        self.micros = self
            .micros
            .checked_add(v.round() as i128)
            .ok_or(IntervalError::OutOfRange)?;
        Ok(())
    }

    fn add_unit(&mut self, num: &Number, unit: Unit) -> Result<(), IntervalError> {
        let (whole, frac) = (num.whole, num.frac);
        let whole_times = |k: i64| whole.checked_mul(k).ok_or(IntervalError::OutOfRange);
        match unit {
            Unit::Micro => self.add_micros_f(num.value()),
            Unit::Milli => self.add_micros_f(num.value() * 1000.0),
            Unit::Second => self.add_micros_f(num.value() * MICROS_PER_SEC as f64),
            Unit::Minute => self.add_micros_f(num.value() * MICROS_PER_MIN as f64),
            Unit::Hour => self.add_micros_f(num.value() * MICROS_PER_HOUR as f64),
            Unit::Day => self.add_days(whole, frac),
            Unit::Week => {
                self.add_days(whole_times(7)?, 0.0)?;
                self.add_days_f(frac * 7.0)
            }
            Unit::Month => self.add_months(whole, frac),
            Unit::Year => self.add_months(whole_times(12)?, frac * 12.0),
            Unit::Decade => self.add_months(whole_times(120)?, frac * 120.0),
            Unit::Century => self.add_months(whole_times(1200)?, frac * 1200.0),
            Unit::Millennium => self.add_months(whole_times(12000)?, frac * 12000.0),
        }
    }

    fn finish(self, negate: bool) -> Result<Interval, IntervalError> {
        let sign: i128 = if negate { -1 } else { 1 };
        let months =
            i32::try_from(i128::from(self.months) * sign).map_err(|_| IntervalError::OutOfRange)?;
        let days =
            i32::try_from(i128::from(self.days) * sign).map_err(|_| IntervalError::OutOfRange)?;
        let micros = i64::try_from(self.micros * sign).map_err(|_| IntervalError::OutOfRange)?;
        if micros.unsigned_abs() > MAX_INTERVAL_MICROS.unsigned_abs() {
            return Err(IntervalError::OutOfRange);
        }
        Ok(Interval {
            months,
            days,
            micros,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Unit {
    Micro,
    Milli,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
    Decade,
    Century,
    Millennium,
}

fn unit_of(word: &str) -> Option<Unit> {
    Some(match word {
        "microsecond" | "microseconds" | "us" | "usec" | "usecs" | "useconds" => Unit::Micro,
        "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" | "mseconds" => Unit::Milli,
        "second" | "seconds" | "s" | "sec" | "secs" => Unit::Second,
        "minute" | "minutes" | "m" | "min" | "mins" => Unit::Minute,
        "hour" | "hours" | "h" | "hr" | "hrs" => Unit::Hour,
        "day" | "days" | "d" => Unit::Day,
        "week" | "weeks" | "w" => Unit::Week,
        "month" | "months" | "mon" | "mons" => Unit::Month,
        "year" | "years" | "y" | "yr" | "yrs" => Unit::Year,
        "decade" | "decades" => Unit::Decade,
        "century" | "centuries" | "c" => Unit::Century,
        "millennium" | "millennia" | "millenniums" => Unit::Millennium,
        _ => return None,
    })
}

/// A signed decimal number split into its whole part and its fraction
/// (both carrying the sign).
struct Number {
    whole: i64,
    frac: f64,
}

impl Number {
    fn value(&self) -> f64 {
        self.whole as f64 + self.frac
    }
}

fn parse_number(s: &str) -> Result<Number, IntervalError> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, s.get(1..).unwrap_or("")),
        Some(b'+') => (false, s.get(1..).unwrap_or("")),
        _ => (false, s),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return Err(IntervalError::Syntax);
    }
    let whole: i64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| IntervalError::OutOfRange)?
    };
    let frac: f64 = if frac.is_empty() {
        0.0
    } else {
        format!("0.{frac}")
            .parse()
            .map_err(|_| IntervalError::Syntax)?
    };
    Ok(if neg {
        Number {
            whole: -whole,
            frac: -frac,
        }
    } else {
        Number { whole, frac }
    })
}

/// `[-+]hh:mm[:ss[.frac]]` as microseconds.
fn parse_clock(s: &str) -> Result<i128, IntervalError> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, s.get(1..).unwrap_or("")),
        Some(b'+') => (false, s.get(1..).unwrap_or("")),
        _ => (false, s),
    };
    let parts: Vec<&str> = body.split(':').collect();
    let int = |x: &str| -> Result<i128, IntervalError> {
        if x.is_empty() || !x.bytes().all(|b| b.is_ascii_digit()) || x.len() > 18 {
            return Err(IntervalError::Syntax);
        }
        x.parse::<i128>().map_err(|_| IntervalError::Syntax)
    };
    let (h, m, sec) = match parts.as_slice() {
        [h, m] => (int(h)?, int(m)?, "0"),
        [h, m, s] => (int(h)?, int(m)?, *s),
        _ => return Err(IntervalError::Syntax),
    };
    if m > 59 {
        return Err(IntervalError::OutOfRange);
    }
    let n = parse_number(sec)?;
    if n.whole < 0 || n.frac < 0.0 || sec.starts_with('+') {
        return Err(IntervalError::Syntax);
    }
    if n.whole > 59 {
        return Err(IntervalError::OutOfRange);
    }
    let micros = h * i128::from(MICROS_PER_HOUR)
        + m * i128::from(MICROS_PER_MIN)
        + i128::from(n.whole) * i128::from(MICROS_PER_SEC)
        + (n.frac * MICROS_PER_SEC as f64).round() as i128;
    Ok(if neg { -micros } else { micros })
}

/// ISO 8601 `P[nY][nM][nW][nD][T[nH][nM][nS]]`.
fn parse_iso(s: &str) -> Result<Interval, IntervalError> {
    let body = s.get(1..).ok_or(IntervalError::Syntax)?;
    if body.is_empty() {
        return Err(IntervalError::Syntax);
    }
    let mut acc = Acc::default();
    let mut in_time = false;
    let mut num = String::new();
    let mut any = false;
    for c in body.chars() {
        match c {
            'T' if num.is_empty() && !in_time => in_time = true,
            '0'..='9' | '.' | '-' | '+' => num.push(c),
            _ => {
                let n = parse_number(&num)?;
                num.clear();
                let unit = match (in_time, c) {
                    (false, 'Y') => Unit::Year,
                    (false, 'M') => Unit::Month,
                    (false, 'W') => Unit::Week,
                    (false, 'D') => Unit::Day,
                    (true, 'H') => Unit::Hour,
                    (true, 'M') => Unit::Minute,
                    (true, 'S') => Unit::Second,
                    _ => return Err(IntervalError::Syntax),
                };
                acc.add_unit(&n, unit)?;
                any = true;
            }
        }
    }
    if !num.is_empty() || !any {
        return Err(IntervalError::Syntax);
    }
    acc.finish(false)
}

/// Parses interval text as PostgreSQL's `interval_in` does for the forms
/// in the module doc.
pub fn parse_interval(s: &str) -> Result<Interval, IntervalError> {
    let t = s.trim();
    if t.len() > 256 {
        return Err(IntervalError::Syntax);
    }
    if t.starts_with('P') {
        return parse_iso(t);
    }
    let lower = t.to_ascii_lowercase();
    let mut words: Vec<String> = Vec::new();
    // split on spaces, and between a number and the unit glued to it
    for w in lower.split_whitespace() {
        let split = w
            .char_indices()
            .find(|(i, c)| *i > 0 && c.is_ascii_alphabetic())
            .map(|(i, _)| i)
            .filter(|&i| {
                w.get(..i)
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit() || b"+-.".contains(&b)))
            });
        match split {
            Some(i) => {
                words.push(w.get(..i).unwrap_or("").to_string());
                words.push(w.get(i..).unwrap_or("").to_string());
            }
            None => words.push(w.to_string()),
        }
    }
    let mut it = words.iter().map(String::as_str).peekable();
    if it.peek() == Some(&"@") {
        it.next();
    }
    let mut acc = Acc::default();
    let mut ago = false;
    let mut any = false;
    while let Some(w) = it.next() {
        if ago {
            return Err(IntervalError::Syntax);
        }
        if w == "ago" {
            ago = true;
            continue;
        }
        if w.contains(':') {
            let m = parse_clock(w)?;
            acc.micros = acc.micros.checked_add(m).ok_or(IntervalError::OutOfRange)?;
            any = true;
            continue;
        }
        let n = parse_number(w)?;
        match it.peek().and_then(|u| unit_of(u)) {
            Some(unit) => {
                it.next();
                acc.add_unit(&n, unit)?;
            }
            // a number alone is seconds
            None => acc.add_unit(&n, Unit::Second)?,
        }
        any = true;
    }
    if !any {
        return Err(IntervalError::Syntax);
    }
    acc.finish(ago)
}

fn part(out: &mut String, value: i64, unit: &str, is_zero: &mut bool, is_before: &mut bool) {
    if value == 0 {
        return;
    }
    let _ = write!(
        out,
        "{}{}{} {}{}",
        if *is_zero { "" } else { " " },
        if *is_before && value > 0 { "+" } else { "" },
        value,
        unit,
        if value != 1 { "s" } else { "" }
    );
    *is_before = value < 0;
    *is_zero = false;
}

/// PostgreSQL's text form (`IntervalStyle = postgres`, its `EncodeInterval`).
pub fn format_interval(iv: Interval) -> String {
    let mut out = String::new();
    let years = i64::from(iv.months / 12);
    let mons = i64::from(iv.months % 12);
    let mut is_zero = true;
    let mut is_before = false;
    part(&mut out, years, "year", &mut is_zero, &mut is_before);
    part(&mut out, mons, "mon", &mut is_zero, &mut is_before);
    part(
        &mut out,
        i64::from(iv.days),
        "day",
        &mut is_zero,
        &mut is_before,
    );
    let t = iv.micros;
    if is_zero || t != 0 {
        let hour = t / MICROS_PER_HOUR;
        let rest = t % MICROS_PER_HOUR;
        let min = rest / MICROS_PER_MIN;
        let rest = rest % MICROS_PER_MIN;
        let sec = rest / MICROS_PER_SEC;
        let fsec = rest % MICROS_PER_SEC;
        let minus = t < 0;
        let _ = write!(
            out,
            "{}{}{:02}:{:02}:{:02}",
            if is_zero { "" } else { " " },
            if minus {
                "-"
            } else if is_before {
                "+"
            } else {
                ""
            },
            hour.unsigned_abs(),
            min.unsigned_abs(),
            sec.unsigned_abs()
        );
        if fsec != 0 {
            let frac = format!("{:06}", fsec.unsigned_abs());
            out.push('.');
            out.push_str(frac.trim_end_matches('0'));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(months: i32, days: i32, micros: i64) -> Interval {
        Interval {
            months,
            days,
            micros,
        }
    }

    #[test]
    fn output_is_postgresqls() {
        let h = MICROS_PER_HOUR;
        for (v, want) in [
            (iv(0, 0, 0), "00:00:00"),
            (
                iv(14, 3, 4 * h + 5 * MICROS_PER_MIN + 6 * MICROS_PER_SEC),
                "1 year 2 mons 3 days 04:05:06",
            ),
            (iv(1, 1, 0), "1 mon 1 day"),
            (iv(24, 0, 0), "2 years"),
            (iv(-14, 0, 0), "-1 years -2 mons"),
            (iv(-1, 3, 0), "-1 mons +3 days"),
            (iv(0, -1, h), "-1 days +01:00:00"),
            (iv(0, 0, -h - 500_000), "-01:00:00.5"),
            (iv(0, 0, 123), "00:00:00.000123"),
            (iv(0, 0, 100 * h), "100:00:00"),
        ] {
            assert_eq!(format_interval(v), want);
        }
    }

    #[test]
    fn input_forms() {
        let h = MICROS_PER_HOUR;
        for (s, want) in [
            (
                "1 year 2 mons 3 days 04:05:06",
                iv(14, 3, 4 * h + 5 * MICROS_PER_MIN + 6 * MICROS_PER_SEC),
            ),
            ("P1Y2M", iv(14, 0, 0)),
            (
                "P1Y2M3DT4H5M6.5S",
                iv(14, 3, 4 * h + 5 * MICROS_PER_MIN + 6_500_000),
            ),
            ("PT1H", iv(0, 0, h)),
            ("@ 1 hour ago", iv(0, 0, -h)),
            ("1.5 days", iv(0, 1, 12 * h)),
            ("1.5 months", iv(1, 15, 0)),
            ("2 weeks", iv(0, 14, 0)),
            ("-04:05", iv(0, 0, -(4 * h + 5 * MICROS_PER_MIN))),
            ("10", iv(0, 0, 10 * MICROS_PER_SEC)),
            ("1h 30m", iv(0, 0, h + 30 * MICROS_PER_MIN)),
            ("  3 DAYS  ", iv(0, 3, 0)),
            ("1 day -1 hours", iv(0, 1, -h)),
            ("1 mon -1 day", iv(1, -1, 0)),
            ("0.5 seconds", iv(0, 0, 500_000)),
        ] {
            assert_eq!(parse_interval(s), Ok(want), "{s}");
        }
        for s in [
            "",
            "P",
            "PT",
            "1 fortnight",
            "day",
            "1 day ago ago",
            "1:2:3:4",
            "P1X",
            "abc",
            "--1 day",
            "1:60",
            "@",
            "ago",
            "1..5 days",
            "é",
        ] {
            assert!(parse_interval(s).is_err(), "{s}");
        }
        assert_eq!(
            parse_interval("99999999999 years"),
            Err(IntervalError::OutOfRange)
        );
        assert_eq!(
            parse_interval("9999999999999999999 hours"),
            Err(IntervalError::OutOfRange)
        );
        assert!(parse_interval(&"1 day ".repeat(1000)).is_err());
    }
}
