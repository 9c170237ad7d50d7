//! PostgreSQL's `to_date(text, template)` and `to_timestamp(text,
//! template)` (and `to_timestamp(seconds since the epoch)`).
//!
//! DataFusion's functions of these names take chrono formats, so
//! PostgreSQL's `to_date('2020-01-02', 'YYYY-MM-DD')` failed. These read
//! the input with the template patterns `to_char` writes
//! ([`crate::to_char::Template`]), as PostgreSQL 15's `to_timestamp` does
//! outside FX mode:
//! * a space in the template skips any spaces in the input; any other
//!   template character that is no pattern skips one input character (a
//!   separator in the template also matches none when the input has a
//!   letter or digit there); quoted text skips as many characters;
//! * numeric fields skip leading spaces and read at most their width in
//!   digits (`YYYY` reads more when a separator follows), month and day
//!   names are matched without regard to case, `AM`/`PM` and `BC`/`AD`
//!   are read; text after the last pattern is ignored;
//! * missing fields default to 0001-01-01 00:00:00 BC (year 0); `YY` is the year
//!   nearest 2020; `DDD` without a month is the day of the year.
//!
//! Patterns that PostgreSQL reads but Eddy does not (ISO weeks and years,
//! `WW`, `W`, `CC`, `Q`, `J`, `RM`, `SSSS`, `D`, `TZ`, `TZH`, `TZM`, `OF`,
//! `YYY`, `Y`) are refused with 0A000. A value out of range is 22008, a
//! value that is not a number or name 22007, as in PostgreSQL.
//! `to_timestamp` reads the time in the session's zone: a third argument
//! names it where that is not UTC (`crate::zone_rules` adds it).

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;

use crate::error::SqlError;
use crate::pg_functions::{arity, function, no_function};
use crate::to_char::{Field, Node, Template, DAYS};

/// The functions, for the session to register over DataFusion's.
pub fn to_timestamp_functions() -> Vec<datafusion::logical_expr::ScalarUDF> {
    vec![
        function("to_date", coerce_to_date, |_| Ok(DataType::Date32), to_date),
        function(
            "to_timestamp",
            coerce_to_timestamp,
            |_| Ok(timestamptz()),
            to_timestamp,
        ),
    ]
}

fn timestamptz() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
}

fn is_text(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
    )
}

fn coerce_to_date(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("to_date", args, 2, 2)?;
    if !args.iter().all(is_text) {
        return Err(no_function("to_date", args));
    }
    Ok(vec![DataType::Utf8, DataType::Utf8])
}

fn coerce_to_timestamp(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("to_timestamp", args, 1, 3)?;
    match args {
        [t] if t.is_numeric() || t == &DataType::Null => Ok(vec![DataType::Float64]),
        [a, b] if is_text(a) && is_text(b) => Ok(vec![DataType::Utf8, DataType::Utf8]),
        // the session's zone (`crate::zone_rules`)
        [a, b, c] if is_text(a) && is_text(b) && is_text(c) => {
            Ok(vec![DataType::Utf8, DataType::Utf8, DataType::Utf8])
        }
        _ => Err(no_function("to_timestamp", args)),
    }
}

fn text_arg(v: Option<&ScalarValue>) -> Option<&str> {
    match v {
        Some(ScalarValue::Utf8(Some(s))) => Some(s),
        _ => None,
    }
}

fn to_date(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let (Some(input), Some(template)) = (text_arg(args.first()), text_arg(args.get(1))) else {
        return Ok(ScalarValue::Date32(None));
    };
    let at = parse(input, template)?;
    let days = at.date().signed_duration_since(epoch_date()).num_days();
    let days = i32::try_from(days).map_err(|_| out_of_range(input))?;
    Ok(ScalarValue::Date32(Some(days)))
}

fn to_timestamp(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let label = Some("+00:00".into());
    if let [ScalarValue::Float64(seconds)] = args {
        let Some(seconds) = seconds else {
            return Ok(ScalarValue::TimestampMicrosecond(None, label));
        };
        if !seconds.is_finite() {
            return Err(SqlError::FeatureNotSupported(
                "to_timestamp of an infinite or NaN value is not supported: Eddy stores no infinite timestamps"
                    .into(),
            ));
        }
        let micros = (seconds * 1_000_000.0).round();
        // within chrono's range, which is within i64 microseconds
        if DateTime::<Utc>::from_timestamp_micros(micros as i64).is_none() || micros.abs() > 9.0e18
        {
            return Err(SqlError::DatetimeOverflow(format!(
                "timestamp out of range: \"{seconds}\""
            )));
        }
        #[allow(clippy::cast_possible_truncation)]
        return Ok(ScalarValue::TimestampMicrosecond(
            Some(micros as i64),
            label,
        ));
    }
    let (Some(input), Some(template)) = (text_arg(args.first()), text_arg(args.get(1))) else {
        return Ok(ScalarValue::TimestampMicrosecond(None, label));
    };
    let at = parse(input, template)?;
    let wall = at.and_utc().timestamp_micros();
    // the session's zone, when it is not UTC (`crate::zone_rules`)
    let instant = match text_arg(args.get(2)) {
        Some(zone) => {
            crate::at_time_zone::to_instant(wall, crate::at_time_zone::resolve_zone(zone)?)?
        }
        None => wall,
    };
    Ok(ScalarValue::TimestampMicrosecond(Some(instant), label))
}

fn epoch_date() -> NaiveDate {
    DateTime::<Utc>::UNIX_EPOCH.date_naive()
}

fn out_of_range(input: &str) -> SqlError {
    SqlError::DatetimeOverflow(format!("date/time field value out of range: \"{input}\""))
}

fn invalid(value: &str, pattern: &str, detail: &str) -> SqlError {
    SqlError::InvalidDatetime(format!(
        "invalid value \"{value}\" for \"{pattern}\": {detail}"
    ))
}

/// The fields read so far.
#[derive(Default)]
struct Fields {
    year: Option<i64>,
    month: Option<u32>,
    day: Option<u32>,
    day_of_year: Option<u32>,
    hour: Option<u32>,
    twelve_hour: bool,
    pm: Option<bool>,
    minute: Option<u32>,
    second: Option<u32>,
    micros: Option<u32>,
    bc: bool,
}

struct Input<'a> {
    chars: Vec<char>,
    at: usize,
    text: &'a str,
}

impl Input<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    fn rest(&self) -> String {
        self.chars.get(self.at..).unwrap_or(&[]).iter().collect()
    }

    /// Up to `width` digits (no limit: `None`); the number and its text.
    fn digits(&mut self, width: Option<usize>, pattern: &str) -> Result<(i64, String), SqlError> {
        self.skip_spaces();
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit())
            && width.is_none_or(|w| self.at - start < w)
        {
            self.at += 1;
        }
        let text: String = self
            .chars
            .get(start..self.at)
            .unwrap_or(&[])
            .iter()
            .collect();
        if text.is_empty() {
            let rest = self.rest();
            return Err(if rest.is_empty() {
                SqlError::InvalidDatetime(format!(
                    "source string too short for \"{pattern}\" formatting field"
                ))
            } else {
                invalid(&rest, pattern, "Value must be an integer.")
            });
        }
        let n = text.parse::<i64>().map_err(|_| {
            invalid(
                &text,
                pattern,
                "Value must be in the range -2147483648 to 2147483647.",
            )
        })?;
        Ok((n, text))
    }

    /// The index of the word of `words` (compared without case, on its
    /// first `len` characters when given) at the cursor.
    fn word(
        &mut self,
        words: &[&str],
        len: Option<usize>,
        pattern: &str,
    ) -> Result<usize, SqlError> {
        self.skip_spaces();
        for (i, w) in words.iter().enumerate() {
            let w: Vec<char> = w.chars().take(len.unwrap_or(usize::MAX)).collect();
            let here = self.chars.get(self.at..self.at + w.len());
            if here.is_some_and(|h| {
                h.iter()
                    .zip(&w)
                    .all(|(a, b)| a.to_lowercase().eq(b.to_lowercase()))
            }) {
                self.at += w.len();
                return Ok(i);
            }
        }
        Err(invalid(
            &self.rest(),
            pattern,
            "The given value did not match any of the allowed values for this field.",
        ))
    }
}

/// The English month names (chrono's are PostgreSQL's).
fn month_names() -> [&'static str; 12] {
    use chrono::Month::*;
    [
        January, February, March, April, May, June, July, August, September, October, November,
        December,
    ]
    .map(|m| m.name())
}

fn small(n: i64, text: &str, pattern: &str) -> Result<u32, SqlError> {
    u32::try_from(n)
        .map_err(|_| invalid(text, pattern, "Value must be in the range 0 to 4294967295."))
}

fn refuse(pattern: &str) -> SqlError {
    SqlError::FeatureNotSupported(format!(
        "the template pattern \"{pattern}\" is not supported by Eddy's to_date and to_timestamp"
    ))
}

/// Reads one field at the cursor into `fields`. `greedy_year`: a
/// separator follows, so `YYYY` may read more than four digits.
fn read_field(
    input: &mut Input<'_>,
    field: Field,
    greedy_year: bool,
    fields: &mut Fields,
) -> Result<(), SqlError> {
    match field {
        Field::Year | Field::YearComma => {
            let (mut n, _) = input.digits(if greedy_year { None } else { Some(4) }, "YYYY")?;
            if field == Field::YearComma && input.peek() == Some(',') {
                input.at += 1;
                let (rest, text) = input.digits(Some(3), "Y,YYY")?;
                if text.len() != 3 {
                    return Err(invalid(
                        &text,
                        "Y,YYY",
                        "Field requires 3 characters, but only fewer remain.",
                    ));
                }
                n = n * 1000 + rest;
            }
            fields.year = Some(n);
        }
        Field::Year2 => {
            let (n, _) = input.digits(Some(2), "YY")?;
            // the year nearest 2020
            fields.year = Some(if n < 70 { 2000 + n } else { 1900 + n });
        }
        Field::Month => {
            let (n, t) = input.digits(Some(2), "MM")?;
            fields.month = Some(small(n, &t, "MM")?);
        }
        Field::Day => {
            let (n, t) = input.digits(Some(2), "DD")?;
            fields.day = Some(small(n, &t, "DD")?);
        }
        Field::DayOfYear => {
            let (n, t) = input.digits(Some(3), "DDD")?;
            fields.day_of_year = Some(small(n, &t, "DDD")?);
        }
        Field::Hh24 => {
            let (n, t) = input.digits(Some(2), "HH24")?;
            fields.hour = Some(small(n, &t, "HH24")?);
        }
        Field::Hh12 => {
            let (n, t) = input.digits(Some(2), "HH12")?;
            fields.hour = Some(small(n, &t, "HH12")?);
            fields.twelve_hour = true;
        }
        Field::Mi => {
            let (n, t) = input.digits(Some(2), "MI")?;
            fields.minute = Some(small(n, &t, "MI")?);
        }
        Field::Ss => {
            let (n, t) = input.digits(Some(2), "SS")?;
            fields.second = Some(small(n, &t, "SS")?);
        }
        Field::Ms | Field::Us | Field::Ff(_) => {
            let width = match field {
                Field::Ms => 3,
                Field::Us => 6,
                Field::Ff(n) => n as usize,
                _ => 6,
            };
            let (n, t) = input.digits(Some(width), "US")?;
            // a fraction of a second, as in PostgreSQL: `SS.MS` of `12.3`
            // is 300 milliseconds
            let scale = 10u32.pow(6u32.saturating_sub(t.len() as u32));
            let micros = small(n, &t, "US")?.saturating_mul(scale);
            fields.micros = Some(micros);
        }
        Field::MonthName(_) => {
            fields.month = Some(input.word(&month_names(), None, "Month")? as u32 + 1);
        }
        Field::MonthAbbrev(_) => {
            fields.month = Some(input.word(&month_names(), Some(3), "Mon")? as u32 + 1);
        }
        Field::DayName(_) => {
            input.word(&DAYS, None, "Day")?;
        }
        Field::DayAbbrev(_) => {
            input.word(&DAYS, Some(3), "Dy")?;
        }
        Field::Meridian(_, dotted) => {
            let words: &[&str] = if dotted {
                &["a.m.", "p.m."]
            } else {
                &["am", "pm"]
            };
            fields.pm = Some(input.word(words, None, "AM")? == 1);
        }
        Field::Era(_, dotted) => {
            let words: &[&str] = if dotted {
                &["a.d.", "b.c."]
            } else {
                &["ad", "bc"]
            };
            fields.bc = input.word(words, None, "AD")? == 1;
        }
        Field::Year3 => return Err(refuse("YYY")),
        Field::Year1 => return Err(refuse("Y")),
        Field::IsoYear | Field::IsoYear3 | Field::IsoYear2 | Field::IsoYear1 => {
            return Err(refuse("IYYY"))
        }
        Field::IsoDayOfWeek | Field::IsoDayOfYear | Field::IsoWeek => return Err(refuse("IW")),
        Field::SecondsOfDay => return Err(refuse("SSSS")),
        Field::DayOfWeek => return Err(refuse("D")),
        Field::WeekOfYear => return Err(refuse("WW")),
        Field::WeekOfMonth => return Err(refuse("W")),
        Field::Century => return Err(refuse("CC")),
        Field::Quarter => return Err(refuse("Q")),
        Field::Julian => return Err(refuse("J")),
        Field::RomanMonth(_) => return Err(refuse("RM")),
        Field::ZoneName(_) | Field::Offset | Field::OffsetHours | Field::OffsetMinutes => {
            return Err(refuse("TZ"))
        }
    }
    Ok(())
}

/// Reads `text` with `template` (module doc).
fn parse(text: &str, template: &str) -> Result<NaiveDateTime, SqlError> {
    let template = Template::parse(template);
    let nodes = template.nodes();
    let mut input = Input {
        chars: text.chars().collect(),
        at: 0,
        text,
    };
    let mut fields = Fields::default();
    for (i, node) in nodes.iter().enumerate() {
        match node {
            Node::Literal(literal) => {
                for c in literal.chars() {
                    if c.is_whitespace() {
                        input.skip_spaces();
                    } else if c.is_alphanumeric() {
                        if input.peek().is_some() {
                            input.at += 1;
                        }
                    } else {
                        input.skip_spaces();
                        // a separator matches one, or none before a value
                        if input.peek().is_some_and(|p| !p.is_alphanumeric()) {
                            input.at += 1;
                        }
                    }
                }
            }
            Node::Field { field, .. } => {
                let greedy_year = !matches!(nodes.get(i + 1), Some(Node::Field { .. }));
                read_field(&mut input, *field, greedy_year, &mut fields)?;
            }
        }
    }
    build(&fields, input.text)
}

fn build(f: &Fields, text: &str) -> Result<NaiveDateTime, SqlError> {
    // no year: PostgreSQL's year 0, which it prints as 1 BC
    let year = match f.year {
        Some(y) if f.bc => 1 - y,
        Some(y) => y,
        None => 0,
    };
    let year = i32::try_from(year).map_err(|_| out_of_range(text))?;
    let date = match (f.month, f.day, f.day_of_year) {
        (None, None, Some(doy)) => NaiveDate::from_yo_opt(year, doy),
        (m, d, _) => NaiveDate::from_ymd_opt(year, m.unwrap_or(1), d.unwrap_or(1)),
    }
    .ok_or_else(|| out_of_range(text))?;
    let mut hour = f.hour.unwrap_or(0);
    if f.twelve_hour || f.pm.is_some() {
        if !(1..=12).contains(&hour) && f.twelve_hour {
            return Err(SqlError::InvalidDatetime(format!(
                "hour \"{hour}\" is invalid for the 12-hour clock"
            )));
        }
        match f.pm {
            Some(true) if hour < 12 => hour += 12,
            Some(false) if hour == 12 => hour = 0,
            _ => {}
        }
    }
    date.and_hms_micro_opt(
        hour,
        f.minute.unwrap_or(0),
        f.second.unwrap_or(0),
        f.micros.unwrap_or(0),
    )
    .ok_or_else(|| out_of_range(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, template: &str) -> Result<String, &'static str> {
        parse(text, template)
            .map(|t| t.format("%Y-%m-%d %H:%M:%S%.f").to_string())
            .map_err(|e| e.sqlstate())
    }

    #[test]
    fn templates_read_as_postgresql_reads_them() {
        assert_eq!(
            at("2020-01-02", "YYYY-MM-DD").as_deref(),
            Ok("2020-01-02 00:00:00")
        );
        assert_eq!(
            at("05 Dec 2000", "DD Mon YYYY").as_deref(),
            Ok("2000-12-05 00:00:00")
        );
        assert_eq!(
            at("2011-12-18 11:38 PM", "YYYY-MM-DD HH12:MI AM").as_deref(),
            Ok("2011-12-18 23:38:00")
        );
        assert_eq!(
            at("20200102", "YYYYMMDD").as_deref(),
            Ok("2020-01-02 00:00:00")
        );
        assert_eq!(
            at("2020/1/2 3:4:5.25", "YYYY/MM/DD HH24:MI:SS.US").as_deref(),
            Ok("2020-01-02 03:04:05.250")
        );
        assert_eq!(
            at("march 3, 99", "Month DD, YY").as_deref(),
            Ok("1999-03-03 00:00:00")
        );
        assert_eq!(at("2020-02-30", "YYYY-MM-DD"), Err("22008"));
        assert_eq!(at("2020-xx-01", "YYYY-MM-DD"), Err("22007"));
        assert_eq!(at("2020", "IYYY"), Err("0A000"));
        assert_eq!(at("13:00 PM", "HH12:MI AM"), Err("22007"));
    }
}
