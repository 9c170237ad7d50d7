//! PostgreSQL's `to_char(timestamp | timestamptz | date, text)`.
//!
//! DataFusion's `to_char` takes a chrono `strftime` format: PostgreSQL's
//! templates (`'YYYY-MM-DD HH24:MI'`) came back unchanged as text, a wrong
//! answer with no error. This function replaces it and reads PostgreSQL
//! 15's template patterns ("Template Patterns for Date/Time Formatting"):
//! every keyword (`HH24`, `MI`, `SS`, `MS`, `US`, `FF1`-`FF6`, `SSSS(S)`,
//! `AM`/`A.M.` in both cases, `Y,YYY`, `YYYY`-`Y`, `IYYY`-`I`, `BC`/`AD`,
//! `MONTH`/`Month`/`month`, `MON`, `MM`, `DAY`, `DY`, `DDD`, `IDDD`, `DD`,
//! `D`, `ID`, `W`, `WW`, `IW`, `CC`, `J`, `Q`, `RM`, `TZ`, `TZH`, `TZM`,
//! `OF`), the `FM` prefix (no padding), the `TH`/`th` suffix (ordinal), `FX`,
//! `TM` and `SP` (no effect in `to_char`, as in PostgreSQL), double-quoted
//! literal text and `\"`; any other character is copied.
//!
//! A date is formatted as the timestamp with time zone of its midnight, as
//! PostgreSQL resolves `to_char(date, text)`. A timestamp with time zone
//! is written in UTC (`TZ` is `UTC`); in a session in another zone
//! `crate::zone_rules` adds the zone as a third argument, and each value
//! is written on that zone's wall clock with its abbreviation and offset
//! at that instant (`CET`/`CEST`, `+01`/`+02`; a date at the zone's
//! midnight); for a timestamp without time zone `TZ` is empty and `OF` is
//! `+00`, as in PostgreSQL. Integers, numerics and floats are formatted by
//! `crate::to_char_number`, intervals by `crate::to_char_interval`.

use std::sync::Arc;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, IntervalMonthDayNanoType, IntervalUnit, TimeUnit,
    TimestampMicrosecondType,
};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::SqlError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Case {
    Upper,
    Capital,
    Lower,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    Hh24,
    Hh12,
    Mi,
    Ss,
    Ms,
    Us,
    Ff(u32),
    SecondsOfDay,
    Year,
    YearComma,
    Year3,
    Year2,
    Year1,
    IsoYear,
    IsoYear3,
    IsoYear2,
    IsoYear1,
    Month,
    Day,
    DayOfYear,
    DayOfWeek,
    IsoDayOfWeek,
    IsoDayOfYear,
    IsoWeek,
    WeekOfYear,
    WeekOfMonth,
    Century,
    Quarter,
    Julian,
    MonthName(Case),
    MonthAbbrev(Case),
    DayName(Case),
    DayAbbrev(Case),
    Meridian(Case, bool),
    Era(Case, bool),
    RomanMonth(Case),
    ZoneName(Case),
    Offset,
    OffsetHours,
    OffsetMinutes,
}

/// The keywords whose spelling is fixed (the case-sensitive ones, in every
/// spelling PostgreSQL knows).
const TEXT_KEYWORDS: &[(&str, Field)] = &[
    ("MONTH", Field::MonthName(Case::Upper)),
    ("Month", Field::MonthName(Case::Capital)),
    ("month", Field::MonthName(Case::Lower)),
    ("MON", Field::MonthAbbrev(Case::Upper)),
    ("Mon", Field::MonthAbbrev(Case::Capital)),
    ("mon", Field::MonthAbbrev(Case::Lower)),
    ("DAY", Field::DayName(Case::Upper)),
    ("Day", Field::DayName(Case::Capital)),
    ("day", Field::DayName(Case::Lower)),
    ("DY", Field::DayAbbrev(Case::Upper)),
    ("Dy", Field::DayAbbrev(Case::Capital)),
    ("dy", Field::DayAbbrev(Case::Lower)),
    ("A.M.", Field::Meridian(Case::Upper, true)),
    ("P.M.", Field::Meridian(Case::Upper, true)),
    ("a.m.", Field::Meridian(Case::Lower, true)),
    ("p.m.", Field::Meridian(Case::Lower, true)),
    ("AM", Field::Meridian(Case::Upper, false)),
    ("PM", Field::Meridian(Case::Upper, false)),
    ("am", Field::Meridian(Case::Lower, false)),
    ("pm", Field::Meridian(Case::Lower, false)),
    ("A.D.", Field::Era(Case::Upper, true)),
    ("B.C.", Field::Era(Case::Upper, true)),
    ("a.d.", Field::Era(Case::Lower, true)),
    ("b.c.", Field::Era(Case::Lower, true)),
    ("AD", Field::Era(Case::Upper, false)),
    ("BC", Field::Era(Case::Upper, false)),
    ("ad", Field::Era(Case::Lower, false)),
    ("bc", Field::Era(Case::Lower, false)),
    ("RM", Field::RomanMonth(Case::Upper)),
    ("rm", Field::RomanMonth(Case::Lower)),
    ("TZH", Field::OffsetHours),
    ("tzh", Field::OffsetHours),
    ("TZM", Field::OffsetMinutes),
    ("tzm", Field::OffsetMinutes),
    ("TZ", Field::ZoneName(Case::Upper)),
    ("tz", Field::ZoneName(Case::Lower)),
    ("OF", Field::Offset),
    ("of", Field::Offset),
];

/// The numeric keywords, matched in upper or lower case.
const NUMBER_KEYWORDS: &[(&str, Field)] = &[
    ("HH24", Field::Hh24),
    ("HH12", Field::Hh12),
    ("HH", Field::Hh12),
    ("MI", Field::Mi),
    ("SSSSS", Field::SecondsOfDay),
    ("SSSS", Field::SecondsOfDay),
    ("SS", Field::Ss),
    ("MS", Field::Ms),
    ("US", Field::Us),
    ("FF1", Field::Ff(1)),
    ("FF2", Field::Ff(2)),
    ("FF3", Field::Ff(3)),
    ("FF4", Field::Ff(4)),
    ("FF5", Field::Ff(5)),
    ("FF6", Field::Ff(6)),
    ("Y,YYY", Field::YearComma),
    ("YYYY", Field::Year),
    ("YYY", Field::Year3),
    ("YY", Field::Year2),
    ("Y", Field::Year1),
    ("IYYY", Field::IsoYear),
    ("IYY", Field::IsoYear3),
    ("IY", Field::IsoYear2),
    ("IDDD", Field::IsoDayOfYear),
    ("ID", Field::IsoDayOfWeek),
    ("IW", Field::IsoWeek),
    ("I", Field::IsoYear1),
    ("MM", Field::Month),
    ("DDD", Field::DayOfYear),
    ("DD", Field::Day),
    ("D", Field::DayOfWeek),
    ("WW", Field::WeekOfYear),
    ("W", Field::WeekOfMonth),
    ("CC", Field::Century),
    ("Q", Field::Quarter),
    ("J", Field::Julian),
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    Literal(String),
    Field {
        field: Field,
        fill_mode: bool,
        ordinal: Option<Case>,
    },
}

/// A parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template(Vec<Node>);

fn starts_with_at(chars: &[char], at: usize, word: &str) -> bool {
    (at..)
        .zip(word.chars())
        .all(|(i, w)| chars.get(i) == Some(&w))
}

/// The longest keyword at `at`: its length in characters and field.
fn keyword_at(chars: &[char], at: usize) -> Option<(usize, Field)> {
    let text = TEXT_KEYWORDS
        .iter()
        .filter(|(k, _)| starts_with_at(chars, at, k))
        .map(|(k, f)| (k.chars().count(), *f));
    let number = NUMBER_KEYWORDS
        .iter()
        .filter(|(k, _)| {
            starts_with_at(chars, at, k) || starts_with_at(chars, at, &k.to_lowercase())
        })
        .map(|(k, f)| (k.chars().count(), *f));
    // the longest wins (`MONTH` over `MON` over `MM`, `DAY` over `DD`)
    text.chain(number).max_by_key(|(len, _)| *len)
}

impl Template {
    /// Reads PostgreSQL's template syntax (module doc). Never fails: what is
    /// no keyword is text, as in PostgreSQL.
    pub fn parse(template: &str) -> Template {
        let chars: Vec<char> = template.chars().collect();
        let mut nodes = Vec::new();
        let mut literal = String::new();
        let mut i = 0;
        while i < chars.len() {
            let mut fill_mode = false;
            loop {
                if starts_with_at(&chars, i, "FM") || starts_with_at(&chars, i, "fm") {
                    fill_mode = true;
                } else if !(starts_with_at(&chars, i, "FX")
                    || starts_with_at(&chars, i, "fx")
                    || starts_with_at(&chars, i, "TM")
                    || starts_with_at(&chars, i, "tm"))
                {
                    break;
                }
                i += 2;
            }
            if let Some((len, field)) = keyword_at(&chars, i) {
                i += len;
                let ordinal = if starts_with_at(&chars, i, "TH") {
                    Some(Case::Upper)
                } else if starts_with_at(&chars, i, "th") {
                    Some(Case::Lower)
                } else {
                    None
                };
                if ordinal.is_some() {
                    i += 2;
                }
                if starts_with_at(&chars, i, "SP") || starts_with_at(&chars, i, "sp") {
                    i += 2;
                }
                if !literal.is_empty() {
                    nodes.push(Node::Literal(std::mem::take(&mut literal)));
                }
                nodes.push(Node::Field {
                    field,
                    fill_mode,
                    ordinal,
                });
                continue;
            }
            let Some(&c) = chars.get(i) else {
                break;
            };
            match c {
                '"' => {
                    // quoted text, `\"` inside it is a quote
                    i += 1;
                    while let Some(&q) = chars.get(i) {
                        if q == '"' {
                            break;
                        }
                        if q == '\\' && chars.get(i + 1) == Some(&'"') {
                            literal.push('"');
                            i += 2;
                            continue;
                        }
                        literal.push(q);
                        i += 1;
                    }
                    i += 1;
                }
                '\\' if chars.get(i + 1) == Some(&'"') => {
                    literal.push('"');
                    i += 2;
                }
                c => {
                    literal.push(c);
                    i += 1;
                }
            }
        }
        if !literal.is_empty() {
            nodes.push(Node::Literal(literal));
        }
        Template(nodes)
    }

    /// The template's literal text and fields, in order.
    pub(crate) fn nodes(&self) -> &[Node] {
        &self.0
    }

    /// Formats `at`. `with_zone`: a timestamp with time zone, in UTC.
    pub fn format(&self, at: NaiveDateTime, with_zone: bool) -> String {
        let utc = ZoneLabel::utc();
        self.format_in(at, with_zone.then_some(&utc))
    }

    /// Formats `at`, the wall clock of a timestamp with time zone in the
    /// zone `zone` describes (`None`: a timestamp without time zone).
    pub fn format_in(&self, at: NaiveDateTime, zone: Option<&ZoneLabel>) -> String {
        let mut out = String::new();
        for node in &self.0 {
            match node {
                Node::Literal(s) => out.push_str(s),
                Node::Field {
                    field,
                    fill_mode,
                    ordinal,
                } => format_field(&mut out, at, *field, *fill_mode, *ordinal, zone),
            }
        }
        out
    }
}

pub(crate) const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const ROMAN: [&str; 12] = [
    "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII",
];

/// The English name of `date`'s month (chrono's names are PostgreSQL's).
fn month_name(date: NaiveDate) -> &'static str {
    u8::try_from(date.month())
        .ok()
        .and_then(|m| chrono::Month::try_from(m).ok())
        .map_or("", |m| m.name())
}

pub(crate) fn cased(s: &str, case: Case) -> String {
    match case {
        Case::Upper => s.to_uppercase(),
        Case::Capital => s.to_string(),
        Case::Lower => s.to_lowercase(),
    }
}

/// PostgreSQL's ordinal suffix of `n` (`get_th`).
fn ordinal_suffix(n: i64, case: Case) -> &'static str {
    let n = n.unsigned_abs();
    let th = if (11..=13).contains(&(n % 100)) {
        "th"
    } else {
        match n % 10 {
            1 => "st",
            2 => "nd",
            3 => "rd",
            _ => "th",
        }
    };
    match (case, th) {
        (Case::Lower | Case::Capital, s) => s,
        (Case::Upper, "st") => "ST",
        (Case::Upper, "nd") => "ND",
        (Case::Upper, "rd") => "RD",
        (Case::Upper, _) => "TH",
    }
}

/// A year as PostgreSQL prints it: 1 BC is year 1, not 0.
fn era_year(year: i32) -> i64 {
    let y = i64::from(year);
    if y <= 0 {
        1 - y
    } else {
        y
    }
}

/// The zone a timestamp with time zone is written in: its abbreviation
/// (`TZ`) and offset east of UTC in seconds (`OF`, `TZH`, `TZM`) at the
/// value's instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneLabel {
    pub abbreviation: String,
    pub offset_seconds: i32,
}

impl ZoneLabel {
    pub fn utc() -> ZoneLabel {
        ZoneLabel {
            abbreviation: "UTC".into(),
            offset_seconds: 0,
        }
    }
}

fn format_field(
    out: &mut String,
    at: NaiveDateTime,
    field: Field,
    fill_mode: bool,
    ordinal: Option<Case>,
    zone: Option<&ZoneLabel>,
) {
    let name = |s: &str, pad: usize| {
        if fill_mode {
            s.to_string()
        } else {
            format!("{s:<pad$}")
        }
    };
    let number = |n: i64, width: usize| -> (i64, usize) { (n, width) };
    let date = at.date();
    let year = era_year(date.year());
    let iso = date.iso_week();
    let nanos = i64::from(at.nanosecond().min(999_999_999));
    let (value, width) = match field {
        Field::Hh24 => number(i64::from(at.hour()), 2),
        Field::Hh12 => number(i64::from((at.hour() + 11) % 12 + 1), 2),
        Field::Mi => number(i64::from(at.minute()), 2),
        Field::Ss => number(i64::from(at.second()), 2),
        Field::Ms => number(nanos / 1_000_000, 3),
        Field::Us => number(nanos / 1_000, 6),
        Field::Ff(digits) => number(nanos / 10i64.pow(9 - digits), digits as usize),
        Field::SecondsOfDay => number(i64::from(at.num_seconds_from_midnight()), 0),
        Field::Year => number(year, 4),
        Field::YearComma => {
            out.push_str(&format!("{},{:03}", year / 1000, year % 1000));
            push_ordinal(out, year, ordinal);
            return;
        }
        Field::Year3 => number(year % 1000, 3),
        Field::Year2 => number(year % 100, 2),
        Field::Year1 => number(year % 10, 1),
        Field::IsoYear => number(era_year(iso.year()), 4),
        Field::IsoYear3 => number(era_year(iso.year()) % 1000, 3),
        Field::IsoYear2 => number(era_year(iso.year()) % 100, 2),
        Field::IsoYear1 => number(era_year(iso.year()) % 10, 1),
        Field::Month => number(i64::from(date.month()), 2),
        Field::Day => number(i64::from(date.day()), 2),
        Field::DayOfYear => number(i64::from(date.ordinal()), 3),
        Field::DayOfWeek => number(i64::from(date.weekday().number_from_sunday()), 1),
        Field::IsoDayOfWeek => number(i64::from(date.weekday().number_from_monday()), 1),
        Field::IsoDayOfYear => number(
            (i64::from(iso.week()) - 1) * 7 + i64::from(date.weekday().number_from_monday()),
            3,
        ),
        Field::IsoWeek => number(i64::from(iso.week()), 2),
        Field::WeekOfYear => number((i64::from(date.ordinal()) - 1) / 7 + 1, 2),
        Field::WeekOfMonth => number((i64::from(date.day()) - 1) / 7 + 1, 1),
        Field::Century => {
            let y = i64::from(date.year());
            let century = if y <= 0 {
                y / 100 - 1
            } else {
                (y - 1) / 100 + 1
            };
            number(century, if century >= 0 { 2 } else { 3 })
        }
        Field::Quarter => number((i64::from(date.month()) - 1) / 3 + 1, 1),
        // days since 24 November 4714 BC (proleptic Gregorian)
        Field::Julian => number(i64::from(date.num_days_from_ce()) + 1_721_425, 0),
        Field::MonthName(case) => {
            out.push_str(&name(&cased(month_name(date), case), 9));
            return;
        }
        Field::MonthAbbrev(case) => {
            let m = month_name(date);
            out.push_str(&cased(m.get(..3).unwrap_or(m), case));
            return;
        }
        Field::DayName(case) => {
            let d = DAYS
                .get(date.weekday().num_days_from_sunday() as usize)
                .copied()
                .unwrap_or("");
            out.push_str(&name(&cased(d, case), 9));
            return;
        }
        Field::DayAbbrev(case) => {
            let d = DAYS
                .get(date.weekday().num_days_from_sunday() as usize)
                .copied()
                .unwrap_or("");
            out.push_str(&cased(d.get(..3).unwrap_or(d), case));
            return;
        }
        Field::Meridian(case, dots) => {
            let s = match (at.hour() >= 12, dots) {
                (false, false) => "AM",
                (true, false) => "PM",
                (false, true) => "A.M.",
                (true, true) => "P.M.",
            };
            out.push_str(&cased(s, case));
            return;
        }
        Field::Era(case, dots) => {
            let s = match (date.year() <= 0, dots) {
                (false, false) => "AD",
                (true, false) => "BC",
                (false, true) => "A.D.",
                (true, true) => "B.C.",
            };
            out.push_str(&cased(s, case));
            return;
        }
        Field::RomanMonth(case) => {
            let r = ROMAN.get(date.month0() as usize).copied().unwrap_or("");
            out.push_str(&name(&cased(r, case), 4));
            return;
        }
        Field::ZoneName(case) => {
            if let Some(z) = zone {
                out.push_str(&cased(&z.abbreviation, case));
            }
            return;
        }
        Field::Offset | Field::OffsetHours | Field::OffsetMinutes => {
            // a timestamp without time zone: +00, as PostgreSQL
            let offset = zone.map_or(0, |z| z.offset_seconds);
            let a = offset.unsigned_abs();
            match field {
                // `+01`, `+05:30`: the zone's own text of an offset
                Field::Offset => crate::session_zone::push_offset(offset, out),
                Field::OffsetHours => {
                    let sign = if offset < 0 { '-' } else { '+' };
                    out.push_str(&format!("{sign}{:02}", a / 3600))
                }
                _ => out.push_str(&format!("{:02}", a / 60 % 60)),
            }
            return;
        }
    };
    if fill_mode || width == 0 {
        out.push_str(&value.to_string());
    } else if value < 0 {
        out.push_str(&format!("-{:0w$}", value.unsigned_abs(), w = width - 1));
    } else {
        out.push_str(&format!("{value:0width$}"));
    }
    push_ordinal(out, value, ordinal);
}

pub(crate) fn push_ordinal(out: &mut String, value: i64, ordinal: Option<Case>) {
    if let Some(case) = ordinal {
        out.push_str(ordinal_suffix(value, case));
    }
}

/// `to_char` over timestamps and dates (module doc).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ToChar {
    signature: Signature,
}

fn refuse(what: &DataType) -> DataFusionError {
    DataFusionError::External(Box::new(SqlError::FeatureNotSupported(format!(
        "to_char of {what} is not supported: Eddy's to_char formats timestamp, timestamp with time zone, date, interval and numeric values"
    ))))
}

impl ScalarUDFImpl for ToChar {
    fn name(&self) -> &str {
        "to_char"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        // a third argument, the session's zone, is added by
        // `crate::zone_rules` (and coerced again by a later pass)
        let (value, template, zone) = match args {
            [value, template] => (value, template, None),
            [value, template, zone] => (value, template, Some(zone)),
            _ => {
                return Err(DataFusionError::Plan(
                    "function to_char takes two arguments".into(),
                ))
            }
        };
        let value = match value {
            DataType::Date32 | DataType::Date64 => DataType::Date32,
            DataType::Timestamp(_, zone) => {
                DataType::Timestamp(TimeUnit::Microsecond, zone.clone())
            }
            DataType::Null => DataType::Timestamp(TimeUnit::Microsecond, None),
            DataType::Decimal128(..) => value.clone(),
            DataType::Interval(_) => DataType::Interval(IntervalUnit::MonthDayNano),
            t if t.is_integer() => DataType::Int64,
            t if t.is_floating() => DataType::Float64,
            // refused by `return_type`: an error here would be reported as
            // "no function matches" (42883), and PostgreSQL has one
            other => other.clone(),
        };
        let template = match template {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => {
                DataType::Utf8
            }
            other => {
                return Err(DataFusionError::Plan(format!(
                    "function to_char takes a text template, not {other}"
                )))
            }
        };
        Ok(match zone {
            None => vec![value, template],
            Some(_) => vec![value, template, DataType::Utf8],
        })
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args.first() {
            Some(
                DataType::Date32
                | DataType::Timestamp(..)
                | DataType::Decimal128(..)
                | DataType::Int64
                | DataType::Float64
                | DataType::Interval(IntervalUnit::MonthDayNano),
            )
            | None => Ok(DataType::Utf8),
            Some(other) => Err(refuse(other)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (values, templates, zone) = match arrays.as_slice() {
            [values, templates] => (values, templates, None),
            // the session's zone (`crate::zone_rules`)
            [values, templates, zone] => {
                let name = zone
                    .as_string_opt::<i32>()
                    .filter(|z| !z.is_empty() && z.is_valid(0))
                    .map(|z| z.value(0).to_string())
                    .ok_or_else(|| DataFusionError::Internal("to_char's zone".into()))?;
                let zone = crate::at_time_zone::resolve_zone(&name)?;
                (values, templates, Some(zone))
            }
            _ => {
                return Err(DataFusionError::Plan(
                    "function to_char takes two arguments".into(),
                ))
            }
        };
        let templates = templates
            .as_string_opt::<i32>()
            .ok_or_else(|| DataFusionError::Internal("to_char's template is not text".into()))?;
        if matches!(
            values.data_type(),
            DataType::Decimal128(..) | DataType::Int64 | DataType::Float64
        ) {
            let out = format_numbers(values.as_ref(), templates)?;
            return crate::udf_args::scalar_if(all_scalar, out);
        }
        if let Some(intervals) = values.as_primitive_opt::<IntervalMonthDayNanoType>() {
            let out = format_intervals(intervals, templates)?;
            return crate::udf_args::scalar_if(all_scalar, out);
        }
        let with_zone = match values.data_type() {
            DataType::Timestamp(_, zone) => zone.is_some(),
            _ => true,
        };
        let at = |i: usize| -> Option<NaiveDateTime> {
            if values.is_null(i) {
                return None;
            }
            match values.data_type() {
                DataType::Date32 => {
                    let days = values.as_primitive::<Date32Type>().value(i);
                    NaiveDate::from_num_days_from_ce_opt(days.checked_add(719_163)?)
                        .and_then(|d| d.and_hms_opt(0, 0, 0))
                }
                _ => {
                    let micros = values.as_primitive::<TimestampMicrosecondType>().value(i);
                    DateTime::from_timestamp_micros(micros).map(|t| t.naive_utc())
                }
            }
        };
        let mut out = StringBuilder::new();
        let mut parsed: Option<(String, Template)> = None;
        for i in 0..values.len() {
            if templates.is_null(i) {
                out.append_null();
                continue;
            }
            let Some(t) = at(i) else {
                out.append_null();
                continue;
            };
            let template = cached(&mut parsed, templates.value(i), |t| Ok(Template::parse(t)))?;
            match zone {
                Some(z) if with_zone => {
                    // the instant (a date: its midnight in the zone) on
                    // the zone's wall clock, with the zone's label then
                    let micros = t.and_utc().timestamp_micros();
                    let instant = if values.data_type() == &DataType::Date32 {
                        crate::at_time_zone::to_instant(micros, z)?
                    } else {
                        micros
                    };
                    let wall = crate::at_time_zone::to_wall_clock(instant, z)?;
                    let (abbreviation, offset_seconds) =
                        crate::at_time_zone::zone_label_at(instant, z)?;
                    let wall = DateTime::from_timestamp_micros(wall)
                        .map(|w| w.naive_utc())
                        .ok_or_else(|| {
                            SqlError::DatetimeOverflow("timestamp out of range".into())
                        })?;
                    let label = ZoneLabel {
                        abbreviation,
                        offset_seconds,
                    };
                    out.append_value(template.format_in(wall, Some(&label)));
                }
                _ => out.append_value(template.format(t, with_zone)),
            }
        }
        let out: ArrayRef = Arc::new(out.finish());
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

/// The template `text` parsed, kept in `parsed` for the rows after it that
/// share it (a column's template is usually one constant).
fn cached<'a, T>(
    parsed: &'a mut Option<(String, T)>,
    text: &str,
    parse: impl FnOnce(&str) -> Result<T, SqlError>,
) -> Result<&'a T, SqlError> {
    if !matches!(parsed, Some((seen, _)) if seen == text) {
        *parsed = Some((text.to_string(), parse(text)?));
    }
    parsed
        .as_ref()
        .map(|(_, t)| t)
        .ok_or_else(|| SqlError::Internal("to_char: no template".into()))
}

/// `to_char(interval, template)` for a column of intervals
/// (`crate::to_char_interval`).
fn format_intervals(
    values: &datafusion::arrow::array::IntervalMonthDayNanoArray,
    templates: &datafusion::arrow::array::StringArray,
) -> DfResult<ArrayRef> {
    let mut out = StringBuilder::new();
    let mut parsed: Option<(String, Template)> = None;
    for i in 0..values.len() {
        if values.is_null(i) || templates.is_null(i) {
            out.append_null();
            continue;
        }
        let template = cached(&mut parsed, templates.value(i), |t| Ok(Template::parse(t)))?;
        out.append_value(crate::to_char_interval::format_interval(
            template,
            values.value(i),
        )?);
    }
    Ok(Arc::new(out.finish()))
}

/// `to_char(number, template)` for a column of integers, numerics or
/// floats (`crate::to_char_number`).
fn format_numbers(
    values: &dyn Array,
    templates: &datafusion::arrow::array::StringArray,
) -> DfResult<ArrayRef> {
    use crate::to_char_number::{decimal_parts, float_parts, NumberTemplate};
    use datafusion::arrow::datatypes::{Decimal128Type, Float64Type, Int64Type};
    let mut out = StringBuilder::new();
    let mut parsed: Option<(String, NumberTemplate)> = None;
    for i in 0..values.len() {
        if values.is_null(i) || templates.is_null(i) {
            out.append_null();
            continue;
        }
        let template = cached(&mut parsed, templates.value(i), NumberTemplate::parse)?;
        let places = template.fraction_places();
        let (negative, int, frac) = match values.data_type() {
            DataType::Decimal128(_, scale) => decimal_parts(
                values.as_primitive::<Decimal128Type>().value(i),
                *scale,
                places,
            ),
            DataType::Int64 => decimal_parts(
                i128::from(values.as_primitive::<Int64Type>().value(i)),
                0,
                places,
            ),
            _ => float_parts(values.as_primitive::<Float64Type>().value(i), places)?,
        };
        out.append_value(template.format(negative, &int, &frac));
    }
    Ok(Arc::new(out.finish()))
}

/// The function, registered over DataFusion's `to_char`.
pub fn to_char_function() -> ScalarUDF {
    ScalarUDF::new_from_impl(ToChar {
        signature: Signature::user_defined(Volatility::Immutable),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").unwrap()
    }

    fn fmt(t: &str, template: &str) -> String {
        Template::parse(template).format(at(t), false)
    }

    #[test]
    fn common_templates() {
        let t = "2024-03-05 14:07:09.123456";
        assert_eq!(fmt(t, "YYYY-MM-DD HH24:MI:SS"), "2024-03-05 14:07:09");
        assert_eq!(fmt(t, "HH12:MI AM"), "02:07 PM");
        assert_eq!(fmt(t, "FMHH12:MI pm"), "2:07 pm");
        assert_eq!(fmt(t, "Month DD, YYYY"), "March     05, 2024");
        assert_eq!(fmt(t, "FMMonth FMDDth, YYYY"), "March 5th, 2024");
        assert_eq!(fmt(t, "Dy Mon DD"), "Tue Mar 05");
        assert_eq!(fmt(t, "DAY day"), "TUESDAY   tuesday  ");
        assert_eq!(fmt(t, "MS US FF2"), "123 123456 12");
        assert_eq!(fmt(t, "Q WW W DDD D ID IW IYYY"), "1 10 1 065 3 2 10 2024");
        assert_eq!(fmt(t, "J CC RM"), "2460375 21 III ");
        assert_eq!(fmt(t, "\"Year\" YYYY \\\"x\\\""), "Year 2024 \"x\"");
        assert_eq!(fmt(t, "Y,YYY yyyy hh24"), "2,024 2024 14");
        assert_eq!(fmt(t, "SSSS"), "50829");
        assert_eq!(fmt(t, "DDTH DDth"), "05TH 05th");
    }

    #[test]
    fn ordinals_and_zones() {
        for (d, s) in [
            (1, "1st"),
            (2, "2nd"),
            (3, "3rd"),
            (11, "11th"),
            (22, "22nd"),
        ] {
            let t = format!("2024-01-{d:02} 00:00:00");
            assert_eq!(fmt(&t, "FMDDth"), s);
        }
        let t = at("2024-01-01 00:00:00");
        assert_eq!(Template::parse("TZ OF").format(t, true), "UTC +00");
        assert_eq!(Template::parse("TZ|OF").format(t, false), "|+00");
    }

    #[test]
    fn text_that_is_no_keyword_is_copied() {
        assert_eq!(fmt("2024-01-01 00:00:00", "x% !"), "x% !");
    }
}
