//! Dates, timestamps and times: civil-calendar arithmetic, their text form
//! (PostgreSQL's `date_in`/`timestamp_in`/`time_in` subset) and the binary
//! form's epoch shift (2000-01-01).
//!
//! Before touching: values are days / microseconds since 1970-01-01; every
//! input is client-controlled, so out-of-range input is 22008 (or 22007 for
//! bad syntax), never an overflow or panic. Ranges are PostgreSQL's.

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, TimeUnit};

use crate::error::{Result, SqlError};

/// Days between 1970-01-01 and 2000-01-01 (PostgreSQL's epoch).
pub(super) const PG_EPOCH_DAYS: i32 = 10_957;
pub(super) const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
pub(super) const MICROS_PER_DAY: i64 = 86_400_000_000;

/// (year, month, day) of a day count since 1970-01-01 (proleptic Gregorian).
///
/// Howard Hinnant's algorithm. Callers pass day counts of PostgreSQL's
/// range (an `i32` date, or timestamp microseconds / `MICROS_PER_DAY`, so
/// below 2^37), where no step comes near `i64`'s range; the day (1..=31)
/// and month (1..=12) fit `u32` by construction.
#[allow(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Days since 1970-01-01 of a civil date.
///
/// The inverse of [`civil_from_days`]; `date_from_text` bounds the year to
/// `0..=MAX_YEAR` and the month and day to their ranges before calling, so
/// no step comes near `i64`'s range.
#[allow(clippy::arithmetic_side_effects)]
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(super) fn write_date(days: i64, out: &mut String) {
    use std::fmt::Write;
    let (y, m, d) = civil_from_days(days);
    if y <= 0 {
        // year 0 is 1 BC; y comes from a bounded day count, far from i64::MIN
        #[allow(clippy::arithmetic_side_effects)]
        let bc = 1 - y;
        let _ = write!(out, "{bc:04}-{m:02}-{d:02} BC");
    } else {
        let _ = write!(out, "{y:04}-{m:02}-{d:02}");
    }
}

/// Writes the timestamp without its era; true when it is BC, for the
/// caller to write ` BC` after the zone offset, as PostgreSQL does
/// (`0001-01-01 00:00:00+00 BC`).
#[must_use]
pub(super) fn write_timestamp(micros: i64, out: &mut String) -> bool {
    use std::fmt::Write;
    let days = micros.div_euclid(MICROS_PER_DAY);
    let tod = micros.rem_euclid(MICROS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    // year 0 is 1 BC; y comes from a bounded day count, far from i64::MIN
    #[allow(clippy::arithmetic_side_effects)]
    let (year, bc) = if y <= 0 { (1 - y, true) } else { (y, false) };
    let _ = write!(out, "{year:04}-{m:02}-{d:02} ");
    write_time(tod, out);
    bc
}

/// Why date/time text was refused: the SQLSTATE differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DtError {
    /// Not a date/time at all (22007).
    Syntax,
    /// A field or the whole value out of range (22008).
    Range,
    /// `infinity` / `-infinity`, which Eddy cannot store (22008).
    Infinite,
}

impl DtError {
    pub(super) fn to_sql(self, type_name: &str, input: &str) -> SqlError {
        match self {
            DtError::Syntax => SqlError::InvalidDatetime(format!(
                "invalid input syntax for type {type_name}: \"{input}\""
            )),
            DtError::Range => SqlError::DatetimeOverflow(format!(
                "date/time field value out of range: \"{input}\""
            )),
            DtError::Infinite => infinite_datetime(type_name),
        }
    }
}

pub(super) fn infinite_datetime(type_name: &str) -> SqlError {
    SqlError::DatetimeOverflow(format!(
        "{type_name} out of range: Eddy cannot store an infinite {type_name}"
    ))
}

/// The last year PostgreSQL's `date` accepts.
pub(super) const MAX_YEAR: i64 = 5_874_897;

/// A non-empty run of ASCII digits as a number; `Syntax` for anything else,
/// `Range` for more digits than a `u32` holds.
pub(super) fn digits_u32(s: &str) -> std::result::Result<u32, DtError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DtError::Syntax);
    }
    s.parse().map_err(|_| DtError::Range)
}

pub(super) fn is_infinity(s: &str) -> bool {
    ["infinity", "+infinity", "-infinity"]
        .iter()
        .any(|w| s.eq_ignore_ascii_case(w))
}

/// `YYYY-MM-DD` -> days since the Unix epoch.
pub(super) fn date_from_text(s: &str) -> std::result::Result<i32, DtError> {
    let s = s.trim();
    if is_infinity(s) {
        return Err(DtError::Infinite);
    }
    let mut it = s.splitn(3, '-');
    let mut field = || it.next().map(str::trim).ok_or(DtError::Syntax);
    let (y, m, d) = (field()?, field()?, field()?);
    let y = i64::from(digits_u32(y)?);
    let (m, d) = (digits_u32(m)?, digits_u32(d)?);
    if y > MAX_YEAR || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(DtError::Range);
    }
    let days = days_from_civil(y, m, d);
    // reject 2023-02-30 and friends
    if civil_from_days(days) != (y, m, d) {
        return Err(DtError::Range);
    }
    i32::try_from(days).map_err(|_| DtError::Range)
}

/// A date's text as PostgreSQL's `date_in` reads it: `YYYY-MM-DD`, also
/// followed by a time of day, a zone or both, which are read and dropped
/// (pgjdbc's `setDate` sends `2024-06-01 +02`).
pub(super) fn date_of_text(s: &str) -> std::result::Result<i32, DtError> {
    let s = s.trim();
    let Some(i) = s.find([' ', 'T']) else {
        return date_from_text(s);
    };
    let (date, rest) = s.split_at_checked(i).ok_or(DtError::Syntax)?;
    let rest = rest.get(1..).ok_or(DtError::Syntax)?.trim();
    let zone_only = rest == "Z"
        || rest.strip_prefix(['+', '-']).is_some_and(|z| {
            !z.is_empty() && z.len() <= 5 && z.bytes().all(|b| b.is_ascii_digit() || b == b':')
        });
    if rest.is_empty() || zone_only {
        return date_from_text(date);
    }
    let (wall, _) = timestamp_fields(s)?;
    i32::try_from(wall.div_euclid(MICROS_PER_DAY)).map_err(|_| DtError::Range)
}

/// Split a zone suffix (`Z`, `+HH`, `-HH:MM`, `+HHMM`) off a time of day:
/// (time, offset in seconds east of UTC if there is a suffix).
pub(super) fn split_zone(rest: &str) -> std::result::Result<(&str, Option<i64>), DtError> {
    let Some(i) = rest.rfind(['+', '-', 'Z']).filter(|i| *i >= 5) else {
        return Ok((rest, None));
    };
    // `i` is the byte offset of an ASCII character, so both halves are
    // char-boundary safe; `get` keeps it so even if that changes.
    let (time, zone) = (
        rest.get(..i).ok_or(DtError::Syntax)?,
        rest.get(i..).ok_or(DtError::Syntax)?,
    );
    if zone == "Z" {
        return Ok((time.trim(), Some(0)));
    }
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let z = zone.get(1..).ok_or(DtError::Syntax)?;
    let (h, m) = match z.split_once(':') {
        Some((h, m)) => (digits_u32(h)?, digits_u32(m)?),
        // all-ASCII-digit text, so slicing at 2 is on a char boundary
        None if z.len() == 4 && z.bytes().all(|b| b.is_ascii_digit()) => (
            digits_u32(z.get(..2).ok_or(DtError::Syntax)?)?,
            digits_u32(z.get(2..).ok_or(DtError::Syntax)?)?,
        ),
        None => (digits_u32(z)?, 0),
    };
    // PostgreSQL's limit on a numeric zone displacement
    if h > 15 || m > 59 {
        return Err(DtError::Range);
    }
    // h <= 15 and m <= 59 (checked above): at most 57,540 seconds
    #[allow(clippy::arithmetic_side_effects)]
    let offset = sign * (i64::from(h) * 3600 + i64::from(m) * 60);
    Ok((time.trim(), Some(offset)))
}

/// `YYYY-MM-DD[ T]HH:MM[:SS[.ffffff]][Z|+HH[:MM]]` -> microseconds since the
/// Unix epoch, with every step checked; a zone suffix converts to UTC.
pub(super) fn timestamp_from_text(s: &str) -> std::result::Result<i64, DtError> {
    timestamp_from_text_zone(s, true)
}

/// [`timestamp_from_text`]; with `apply_zone` false a zone suffix is read
/// and ignored, as PostgreSQL's `timestamp` (without time zone) input does.
pub(super) fn timestamp_from_text_zone(
    s: &str,
    apply_zone: bool,
) -> std::result::Result<i64, DtError> {
    let (wall, offset) = timestamp_fields(s)?;
    match offset {
        Some(east) if apply_zone => east
            .checked_mul(1_000_000)
            .and_then(|o| wall.checked_sub(o))
            .ok_or(DtError::Range),
        _ => Ok(wall),
    }
}

/// The wall-clock time a timestamp's text writes (microseconds, as if in
/// UTC) and its zone suffix's offset in seconds east, if it has one.
pub(super) fn timestamp_fields(s: &str) -> std::result::Result<(i64, Option<i64>), DtError> {
    let s = s.trim();
    if is_infinity(s) {
        return Err(DtError::Infinite);
    }
    let (date, rest) = match s.find([' ', 'T']) {
        Some(i) => {
            // `rest` starts with the one-byte separator
            let (date, rest) = s.split_at_checked(i).ok_or(DtError::Syntax)?;
            (date, rest.get(1..).ok_or(DtError::Syntax)?.trim())
        }
        None => (s, ""),
    };
    let day_start = i64::from(date_from_text(date)?)
        .checked_mul(MICROS_PER_DAY)
        .ok_or(DtError::Range)?;
    if rest.is_empty() {
        return Ok((day_start, None));
    }
    let (time, offset_secs) = split_zone(rest)?;
    let mut parts = time.splitn(3, ':');
    let h = digits_u32(parts.next().ok_or(DtError::Syntax)?)?;
    let mi = digits_u32(parts.next().ok_or(DtError::Syntax)?)?;
    let (sec, micros) = match parts.next() {
        None => (0, 0),
        Some(sec) => match sec.split_once('.') {
            Some((s, f)) => {
                if f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(DtError::Syntax);
                }
                // ASCII digits only, so byte slicing is char-boundary safe
                let digits = f.get(..f.len().min(6)).ok_or(DtError::Syntax)?;
                // `.25` is 250000 microseconds: pad to six digits
                (
                    digits_u32(s)?,
                    i64::from(digits_u32(&format!("{digits:0<6}"))?),
                )
            }
            None => (digits_u32(sec)?, 0),
        },
    };
    if h > 23 || mi > 59 || sec > 60 {
        return Err(DtError::Range);
    }
    // every field is range-checked above
    #[allow(clippy::arithmetic_side_effects)]
    let secs = i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(sec);
    let wall = secs
        .checked_mul(1_000_000)
        .and_then(|t| t.checked_add(micros))
        .and_then(|t| t.checked_add(day_start))
        .ok_or(DtError::Range)?;
    Ok((wall, offset_secs))
}

/// Parse `YYYY-MM-DD` into days since the Unix epoch.
pub fn parse_date(s: &str) -> Option<i32> {
    date_of_text(s).ok()
}

/// Parse `YYYY-MM-DD[ T]HH:MM[:SS[.ffffff]][Z|+HH[:MM]]` into microseconds
/// since the Unix epoch. A zone suffix is converted to UTC.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    timestamp_from_text(s).ok()
}

/// `date` text as PostgreSQL reads it, with its SQLSTATEs (22007 for
/// syntax, 22008 for a field out of range or an infinite date).
pub fn date_in(s: &str) -> Result<i32> {
    date_of_text(s).map_err(|e| e.to_sql("date", s))
}

/// `timestamp` text as PostgreSQL reads it: a zone suffix is ignored
/// (`'2024-01-01 12:30+02'::timestamp` is 12:30).
pub fn timestamp_wall_clock(s: &str) -> Result<i64> {
    timestamp_from_text_zone(s.trim(), false).map_err(|e| e.to_sql("timestamp", s))
}

/// `timestamptz` text as an instant: a zone suffix converts to UTC, no
/// suffix means UTC.
pub fn timestamp_instant(s: &str) -> Result<i64> {
    timestamp_from_text(s.trim()).map_err(|e| e.to_sql("timestamp with time zone", s))
}

/// `timestamptz` text as an instant in a session whose zone is `zone`: a
/// zone suffix converts to UTC, text without one is a wall-clock time in
/// `zone` (`timestamptz_in` under the session's TimeZone).
pub fn timestamp_instant_in(s: &str, zone: &crate::session_zone::SessionZone) -> Result<i64> {
    timestamp_instant_in_zone(s, zone.zone())
}

/// [`timestamp_instant_in`] with the zone resolved.
pub(crate) fn timestamp_instant_in_zone(s: &str, zone: crate::at_time_zone::Zone) -> Result<i64> {
    let (wall, offset) =
        timestamp_fields(s.trim()).map_err(|e| e.to_sql("timestamp with time zone", s))?;
    match offset {
        Some(east) => east
            .checked_mul(1_000_000)
            .and_then(|o| wall.checked_sub(o))
            .ok_or_else(|| DtError::Range.to_sql("timestamp with time zone", s)),
        None => crate::at_time_zone::to_instant(wall, zone),
    }
}

/// PostgreSQL's valid `date` range in days since 2000-01-01 (`IS_VALID_DATE`).
pub(super) const PG_DATE_RANGE: std::ops::Range<i32> = -2_451_545..2_145_031_949;
/// PostgreSQL's valid `timestamp` range in microseconds since 2000-01-01
/// (`IS_VALID_TIMESTAMP`).
pub(super) const PG_TIMESTAMP_RANGE: std::ops::Range<i64> =
    -211_813_488_000_000_000..9_223_371_331_200_000_000;

/// A binary `date` (days since 2000-01-01) as days since 1970-01-01.
pub(super) fn date_from_binary(raw: i32) -> Result<i32> {
    if raw == i32::MAX || raw == i32::MIN {
        return Err(infinite_datetime("date"));
    }
    let range = || SqlError::DatetimeOverflow("date out of range".into());
    if !PG_DATE_RANGE.contains(&raw) {
        return Err(range());
    }
    raw.checked_add(PG_EPOCH_DAYS).ok_or_else(range)
}

/// A binary `timestamp` (microseconds since 2000-01-01) as microseconds
/// since 1970-01-01.
pub(super) fn timestamp_from_binary(raw: i64) -> Result<i64> {
    if raw == i64::MAX || raw == i64::MIN {
        return Err(infinite_datetime("timestamp"));
    }
    let range = || SqlError::DatetimeOverflow("timestamp out of range".into());
    if !PG_TIMESTAMP_RANGE.contains(&raw) {
        return Err(range());
    }
    raw.checked_add(PG_EPOCH_MICROS).ok_or_else(range)
}

/// The microseconds since midnight in a non-null cell of a time array.
// i32 seconds * 10^6 and i32 milliseconds * 1000 stay below 2^51, and
// nanoseconds / 1000 divides by a non-zero constant: no overflow.
#[allow(clippy::arithmetic_side_effects)]
pub(super) fn time_cell(array: &dyn Array, row: usize) -> Result<i64> {
    use datafusion::arrow::datatypes::{
        Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType,
    };
    if row >= array.len() {
        return Err(SqlError::Internal("time cell out of range".into()));
    }
    Ok(match array.data_type() {
        DataType::Time64(TimeUnit::Microsecond) => {
            array.as_primitive::<Time64MicrosecondType>().value(row)
        }
        DataType::Time64(_) => array.as_primitive::<Time64NanosecondType>().value(row) / 1000,
        DataType::Time32(TimeUnit::Second) => {
            i64::from(array.as_primitive::<Time32SecondType>().value(row)) * 1_000_000
        }
        DataType::Time32(_) => {
            i64::from(array.as_primitive::<Time32MillisecondType>().value(row)) * 1000
        }
        other => return Err(SqlError::Internal(format!("time column holds {other}"))),
    })
}

/// `HH:MM:SS[.ffffff]`, as PostgreSQL prints a time.
pub(super) fn write_time(micros: i64, out: &mut String) {
    use std::fmt::Write;
    let secs = micros / 1_000_000;
    let frac = micros % 1_000_000;
    let _ = write!(
        out,
        "{:02}:{:02}:{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    );
    if frac != 0 {
        let s = format!("{frac:06}");
        out.push('.');
        out.push_str(s.trim_end_matches('0'));
    }
}

/// The most microseconds a time holds: `24:00:00`.
pub(super) const MAX_TIME_MICROS: i64 = MICROS_PER_DAY;

/// Parses a time (PostgreSQL's `time_in` for `HH:MM[:SS[.frac]]`): 22007
/// if it is not one, 22008 for a field out of range.
pub fn time_from_text(s: &str) -> Result<i64> {
    let bad = || SqlError::InvalidDatetime(format!("invalid input syntax for type time: \"{s}\""));
    let range =
        || SqlError::DatetimeOverflow(format!("date/time field value out of range: \"{s}\""));
    let t = s.trim();
    let mut parts = t.split(':');
    let field = |x: Option<&str>| -> Result<i64> {
        let x = x.ok_or_else(bad)?;
        if x.is_empty() || x.len() > 2 || !x.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        x.parse::<i64>().map_err(|_| bad())
    };
    let h = field(parts.next())?;
    let m = field(parts.next())?;
    let (sec, frac) = match parts.next() {
        None => (0, 0),
        Some(x) => {
            let (whole, frac) = x.split_once('.').unwrap_or((x, ""));
            let sec = field(Some(whole))?;
            if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            // round to microseconds
            let padded = format!("{frac:0<9}");
            let nanos: i64 = padded.parse().map_err(|_| bad())?;
            // nine digits at most: below 10^9
            #[allow(clippy::arithmetic_side_effects)]
            let micros = (nanos + 500) / 1000;
            (sec, micros)
        }
    };
    if parts.next().is_some() {
        return Err(bad());
    }
    if h > 24 || m > 59 || sec > 60 {
        return Err(range());
    }
    // every field is bounded just above (two digits each, frac <= 10^6)
    #[allow(clippy::arithmetic_side_effects)]
    let micros = ((h * 60 + m) * 60 + sec) * 1_000_000 + frac;
    if micros > MAX_TIME_MICROS {
        return Err(range());
    }
    Ok(micros)
}

#[cfg(test)]
// Tests index and do arithmetic on fixed fixtures; a panic there is a
// failing test, which is what it should be.
#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
mod tests {
    use super::*;
    use crate::pgtypes::numeric::tests::state;
    use crate::pgtypes::*;
    use bytes::BytesMut;
    use eddy_common::{ColumnType, Value};

    #[test]
    fn dates_round_trip() {
        for d in [-800_000i64, -1, 0, 1, 10_957, 19_000, 2_932_896] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
        assert_eq!(parse_date("2024-02-29"), Some(19_782));
        assert_eq!(parse_date("2023-02-29"), None);
        let mut s = String::new();
        let bc = write_timestamp(parse_timestamp("2024-01-02 03:04:05.25").unwrap(), &mut s);
        assert!(!bc);
        assert_eq!(s, "2024-01-02 03:04:05.25");
    }

    #[test]
    fn timestamps_with_zones() {
        // PostgreSQL 15, TimeZone UTC: timestamptz converts, timestamp ignores
        let utc = timestamp_instant("2024-01-01 12:30+02").unwrap();
        assert_eq!(
            value_text(&Value::Timestamp(utc), None),
            "2024-01-01 10:30:00"
        );
        let wall = timestamp_wall_clock("2024-01-01 12:30+02").unwrap();
        assert_eq!(
            value_text(&Value::Timestamp(wall), None),
            "2024-01-01 12:30:00"
        );
        assert_eq!(timestamp_instant("nope").unwrap_err().sqlstate(), "22007");
    }

    #[test]
    fn multibyte_time_zone_suffixes_are_errors_not_panics() {
        // Before: `z[..2]` on "1é1" sliced inside 'é' and panicked.
        for s in [
            "2024-01-01 10:00:00+1é1",
            "2024-01-01 10:00:00-é1",
            "2024-01-01 10:00:00+日本",
            "2024-01-01T10:00:00Zé",
            "2024-01-01 10:00:00.1é",
            "2024-01-01 1é:00",
            "2024-01-01 10:00:00+",
        ] {
            let e = parse_text(s, ColumnType::Timestamp).unwrap_err();
            assert_eq!(e.sqlstate(), "22007", "{s}: {e}");
        }
        // absurd offsets overflowed `h * 3600`
        for s in [
            "2024-01-01 10:00:00+99999999999999999999",
            "2024-01-01 10:00:00+16",
            "2024-01-01 10:00:00-05:60",
            "2024-01-01 25:00:00",
        ] {
            let e = parse_text(s, ColumnType::Timestamp).unwrap_err();
            assert!(matches!(e.sqlstate(), "22007" | "22008"), "{s}: {e}");
        }
        assert_eq!(
            parse_timestamp("2024-01-01 10:00:00+0530"),
            parse_timestamp("2024-01-01 04:30:00")
        );
        assert_eq!(
            parse_timestamp("2024-01-01 10:00:00-05"),
            parse_timestamp("2024-01-01T15:00:00Z")
        );
        assert_eq!(state(parse_text("2024-13-01", ColumnType::Date)), "22008");
        assert_eq!(state(parse_text("20x4-01-01", ColumnType::Date)), "22007");
    }

    #[test]
    fn infinite_and_extreme_datetimes_are_22008() {
        // Before: i32::MAX + PG_EPOCH_DAYS and i64::MAX + PG_EPOCH_MICROS
        // overflowed (a panic in debug builds, garbage in release).
        for raw in [i32::MAX, i32::MIN, 2_145_031_949, -2_451_546] {
            let e = parse_binary(&raw.to_be_bytes(), oid::DATE, ColumnType::Date).unwrap_err();
            assert_eq!(e.sqlstate(), "22008", "{raw}");
        }
        for raw in [i64::MAX, i64::MIN, i64::MAX - 1, -211_813_488_000_000_001] {
            for o in [oid::TIMESTAMP, oid::TIMESTAMPTZ] {
                let e = parse_binary(&raw.to_be_bytes(), o, ColumnType::Timestamp).unwrap_err();
                assert_eq!(e.sqlstate(), "22008", "{raw}");
            }
        }
        assert_eq!(
            parse_binary(&0i32.to_be_bytes(), oid::DATE, ColumnType::Date).unwrap(),
            Value::Date(PG_EPOCH_DAYS)
        );
        // a date far in the future fits `date` but not a timestamp
        let far = parse_binary(
            &2_145_031_948i32.to_be_bytes(),
            oid::DATE,
            ColumnType::Timestamp,
        );
        assert_eq!(state(far), "22008");
        for s in ["infinity", "-infinity", "+Infinity"] {
            assert_eq!(state(parse_text(s, ColumnType::Date)), "22008");
            assert_eq!(state(parse_text(s, ColumnType::Timestamp)), "22008");
        }
        // years whose day count overflowed days_from_civil
        assert_eq!(
            state(parse_text("99999999999999999-01-01", ColumnType::Date)),
            "22008"
        );
        assert_eq!(
            state(parse_text("5874897-12-31 10:00", ColumnType::Timestamp)),
            "22008"
        );
        assert!(parse_text("5874897-12-31", ColumnType::Date).is_ok());
        // timestamps in seconds that do not fit in microseconds
        let a = datafusion::arrow::array::TimestampSecondArray::from(vec![i64::MAX]);
        let mut out = BytesMut::new();
        let e = encode_cell(&a, 0, Format::Binary, &mut out).unwrap_err();
        assert_eq!(e.sqlstate(), "22008");
        let d = datafusion::arrow::array::Date32Array::from(vec![i32::MIN]);
        let e = encode_cell(&d, 0, Format::Binary, &mut out).unwrap_err();
        assert_eq!(e.sqlstate(), "22008");
    }
}
