//! The session's `TimeZone`: which zones the setting accepts, what SHOW
//! prints for each, and the conversions the rest of the crate applies with
//! it.
//!
//! A `timestamptz` is an instant everywhere inside Eddy: stored, compared
//! and computed as microseconds since the epoch in UTC, its Arrow type
//! labelled `+00:00`. The session zone never changes a stored value; it
//! only decides how an instant is read from and written as wall-clock time
//! (see `docs/design/time_zones.md` for every place that does):
//! * text without a zone suffix is a wall-clock time in the session zone
//!   ([`SessionZone::instant_of`]);
//! * text output is the wall-clock time with the zone's offset at that
//!   instant (`pgtypes::cell_text` of an array labelled with
//!   [`SessionZone::output_label`]);
//! * conversions to and from `timestamp`, `date` and `time`, `date_trunc`,
//!   `extract` and day or month arithmetic work on the wall clock
//!   (`crate::zone_rules`).
//!
//! Accepted values, as PostgreSQL's `check_timezone` reads them:
//! * an IANA zone name in any case (`europe/berlin` is `Europe/Berlin`);
//! * a plain number of hours, ISO-signed (east of Greenwich): `+02`, `-7`,
//!   `5.5`; SHOW prints PostgreSQL's `<+02>-02`;
//! * a POSIX offset, which counts hours *west*: `+05:30` is UTC-5:30, as
//!   is `UTC+5:30` (an abbreviation followed by an offset);
//! * `DEFAULT` and `LOCAL`: the server's zone, UTC.
//!
//! POSIX rules with a daylight-saving part (`CET-1CEST`) and interval
//! values (`INTERVAL '+02:00' HOUR TO MINUTE`) are refused (0A000); any
//! other text is 22023, PostgreSQL's "invalid value for parameter".

use std::borrow::Cow;
use std::str::FromStr;
use std::sync::Arc;

use chrono::{FixedOffset, Offset, TimeZone};

use crate::at_time_zone::{to_instant, to_wall_clock, Zone};
use crate::error::{Result, SqlError};

/// IANA names whose offset is zero at every instant.
const ALWAYS_UTC: &[&str] = &[
    "UTC",
    "Etc/UTC",
    "UCT",
    "Etc/UCT",
    "GMT",
    "Etc/GMT",
    "Etc/GMT+0",
    "Etc/GMT-0",
    "Etc/GMT0",
    "GMT0",
    "GMT+0",
    "GMT-0",
    "Greenwich",
    "Etc/Greenwich",
    "Universal",
    "Etc/Universal",
    "Zulu",
    "Etc/Zulu",
];

/// PostgreSQL's bound on a numeric zone (hours).
const MAX_OFFSET_HOURS: f64 = 15.0;

/// A session's time zone: the zone and the name SHOW prints for it.
#[derive(Debug, Clone)]
pub struct SessionZone {
    zone: Zone,
    name: Cow<'static, str>,
}

impl PartialEq for SessionZone {
    fn eq(&self, other: &SessionZone) -> bool {
        self.name == other.name
    }
}

impl Default for SessionZone {
    fn default() -> SessionZone {
        SessionZone::utc()
    }
}

impl SessionZone {
    /// The server's zone, and every session's until it sets another.
    pub fn utc() -> SessionZone {
        SessionZone {
            zone: Zone::Fixed(chrono::Utc.fix()),
            name: Cow::Borrowed("UTC"),
        }
    }

    /// The zone a `TimeZone` value names, or why it is refused.
    pub fn parse(value: &str) -> Result<SessionZone> {
        let text = value.trim();
        let lower = text.to_ascii_lowercase();
        if lower == "default" || lower == "local" {
            return Ok(SessionZone::utc());
        }
        let invalid = || {
            SqlError::InvalidParameter(format!(
                "invalid value for parameter \"TimeZone\": \"{value}\""
            ))
        };
        // a plain number: hours east of Greenwich
        if !text.is_empty()
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.'))
        {
            if let Ok(hours) = text.parse::<f64>() {
                if !hours.is_finite() || hours.abs() > MAX_OFFSET_HOURS {
                    return Err(invalid());
                }
                // |hours| <= 15: at most 54,000 seconds, exact in an i32
                #[allow(clippy::cast_possible_truncation)]
                let seconds = (hours * 3600.0).round() as i32;
                let offset = FixedOffset::east_opt(seconds).ok_or_else(invalid)?;
                return Ok(SessionZone {
                    zone: Zone::Fixed(offset),
                    name: Cow::Owned(numeric_zone_name(seconds)),
                });
            }
        }
        if let Ok(tz) = chrono_tz::Tz::from_str(text) {
            return Ok(SessionZone::named(tz));
        }
        if let Some(tz) = chrono_tz::TZ_VARIANTS
            .iter()
            .find(|tz| tz.name().eq_ignore_ascii_case(text))
        {
            return Ok(SessionZone::named(*tz));
        }
        // POSIX with a quoted abbreviation, as SHOW prints a plain number
        // (`<+02>-02`): the offset after it, west of Greenwich
        if let Some((_, rest)) = text.strip_prefix('<').and_then(|t| t.split_once('>')) {
            if let Some(offset) = crate::at_time_zone::posix_offset(rest) {
                return Ok(SessionZone {
                    zone: Zone::Fixed(offset),
                    name: Cow::Owned(text.to_string()),
                });
            }
        }
        // POSIX: an optional abbreviation of three or more letters, then
        // an offset west of Greenwich
        let letters = text.bytes().take_while(u8::is_ascii_alphabetic).count();
        let rest = text.get(letters..).unwrap_or_default();
        if letters == 0 || letters >= 3 {
            if let Some(offset) = crate::at_time_zone::posix_offset(rest) {
                return Ok(SessionZone {
                    zone: Zone::Fixed(offset),
                    name: Cow::Owned(text.to_string()),
                });
            }
            let offset_first = rest
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-'));
            if letters >= 3 && offset_first && rest.bytes().any(|b| b.is_ascii_alphabetic()) {
                return Err(SqlError::FeatureNotSupported(format!(
                    "TimeZone \"{value}\" is not supported: Eddy takes zone names and \
                     numeric offsets, not POSIX daylight-saving rules"
                )));
            }
        }
        Err(invalid())
    }

    fn named(tz: chrono_tz::Tz) -> SessionZone {
        SessionZone {
            zone: Zone::Named(tz),
            name: Cow::Borrowed(tz.name()),
        }
    }

    /// What `SHOW TimeZone` prints.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether every instant's wall clock is its UTC time.
    pub fn is_utc(&self) -> bool {
        match self.zone {
            Zone::Fixed(offset) => offset.local_minus_utc() == 0,
            Zone::Named(tz) => ALWAYS_UTC.contains(&tz.name()),
        }
    }

    /// Whether the offset is the same at every instant (no daylight
    /// saving or history): day and month arithmetic is then the same on
    /// the wall clock as in UTC.
    pub fn is_fixed(&self) -> bool {
        self.is_utc() || matches!(self.zone, Zone::Fixed(_))
    }

    pub(crate) fn zone(&self) -> Zone {
        self.zone
    }

    /// The zone text `eddy_at_time_zone` resolves to this very zone: the
    /// name, or the offset in POSIX's west-positive sign.
    pub(crate) fn at_time_zone_text(&self) -> String {
        match self.zone {
            Zone::Named(tz) => tz.name().to_string(),
            Zone::Fixed(offset) => {
                let west = -offset.local_minus_utc();
                let sign = if west < 0 { '-' } else { '+' };
                let a = west.unsigned_abs();
                format!("{sign}{:02}:{:02}:{:02}", a / 3600, a / 60 % 60, a % 60)
            }
        }
    }

    /// The Arrow zone label that makes the text encoder print an instant
    /// in this zone; `None` for UTC, which the encoder prints already.
    pub fn output_label(&self) -> Option<Arc<str>> {
        if self.is_utc() {
            return None;
        }
        Some(match self.zone {
            Zone::Named(tz) => Arc::from(tz.name()),
            Zone::Fixed(offset) => Arc::from(iso_offset_label(offset.local_minus_utc())),
        })
    }

    /// The instant at which this zone's clocks showed `wall` (a wall-clock
    /// time in microseconds, written as if it were UTC).
    pub fn instant_of(&self, wall: i64) -> Result<i64> {
        to_instant(wall, self.zone)
    }

    /// The wall-clock time in this zone at the instant `micros`.
    pub fn wall_clock_of(&self, micros: i64) -> Result<i64> {
        to_wall_clock(micros, self.zone)
    }
}

/// `+HH:MM` (east-positive, seconds appended when there are any): the
/// label form [`zone_of_label`] reads back.
fn iso_offset_label(east: i32) -> String {
    let sign = if east < 0 { '-' } else { '+' };
    let a = east.unsigned_abs();
    let mut s = format!("{sign}{:02}:{:02}", a / 3600, a / 60 % 60);
    if !a.is_multiple_of(60) {
        s.push_str(&format!(":{:02}", a % 60));
    }
    s
}

/// PostgreSQL's name for a zone set as a plain number: `<+02>-02`,
/// `<-07>+07`, `<+05:30>-05:30`.
fn numeric_zone_name(east: i32) -> String {
    let body = |sign: char, a: u32| {
        if a.is_multiple_of(3600) {
            format!("{sign}{:02}", a / 3600)
        } else {
            format!("{sign}{:02}:{:02}", a / 3600, a / 60 % 60)
        }
    };
    let a = east.unsigned_abs();
    let (east_sign, west_sign) = if east < 0 { ('-', '+') } else { ('+', '-') };
    format!("<{}>{}", body(east_sign, a), body(west_sign, a))
}

/// The zone an Arrow timestamp label names: `+00:00`, `UTC`, an IANA name
/// or an ISO offset `+HH:MM[:SS]` (east-positive). `None` if it names none.
pub(crate) fn zone_of_label(label: &str) -> Option<Zone> {
    if let Ok(tz) = chrono_tz::Tz::from_str(label) {
        return Some(Zone::Named(tz));
    }
    let (sign, body) = match label.as_bytes().first()? {
        b'+' => (1, label.get(1..)?),
        b'-' => (-1, label.get(1..)?),
        _ => return None,
    };
    let mut seconds = 0i32;
    let mut parts = 0;
    for (i, p) in body.split(':').enumerate() {
        if i > 2 || p.len() != 2 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let v: i32 = p.parse().ok()?;
        seconds = seconds.checked_mul(60)?.checked_add(v)?;
        parts = i + 1;
    }
    // `+HH` is hours, `+HH:MM` minutes too
    for _ in parts..3 {
        seconds = seconds.checked_mul(60)?;
    }
    FixedOffset::east_opt(sign * seconds).map(Zone::Fixed)
}

/// The offset of `zone` at the instant `micros`, in seconds east.
pub(crate) fn offset_at(zone: Zone, micros: i64) -> Option<i32> {
    let utc = chrono::DateTime::<chrono::Utc>::from_timestamp_micros(micros)?;
    Some(match zone {
        Zone::Fixed(offset) => offset.local_minus_utc(),
        Zone::Named(tz) => tz
            .offset_from_utc_datetime(&utc.naive_utc())
            .fix()
            .local_minus_utc(),
    })
}

/// An offset as PostgreSQL prints it after a timestamp: `+02`, `-03:30`,
/// `+00:53:28`.
pub(crate) fn push_offset(east: i32, out: &mut String) {
    let a = east.unsigned_abs();
    out.push(if east < 0 { '-' } else { '+' });
    out.push_str(&format!("{:02}", a / 3600));
    if !a.is_multiple_of(3600) {
        out.push_str(&format!(":{:02}", a / 60 % 60));
    }
    if !a.is_multiple_of(60) {
        out.push_str(&format!(":{:02}", a % 60));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(v: &str) -> String {
        SessionZone::parse(v)
            .map(|z| z.name().to_string())
            .unwrap_or_else(|e| e.sqlstate().into())
    }

    #[test]
    fn names_as_postgresql_shows_them() {
        // PostgreSQL 15's SHOW TimeZone after SET TIME ZONE <value>
        assert_eq!(name("europe/berlin"), "Europe/Berlin");
        assert_eq!(name("utc"), "UTC");
        assert_eq!(name("+02"), "<+02>-02");
        assert_eq!(name("-7"), "<-07>+07");
        assert_eq!(name("5.5"), "<+05:30>-05:30");
        assert_eq!(name("+05:30"), "+05:30");
        assert_eq!(name("UTC+3"), "UTC+3");
        assert_eq!(name("LOCAL"), "UTC");
        assert_eq!(name("nowhere"), "22023");
        assert_eq!(name("Mars/Olympus"), "22023");
        assert_eq!(name("16"), "22023");
        assert_eq!(name("CET-1CEST"), "0A000");
        // what SHOW prints reads back as the same zone
        assert_eq!(name("<+02>-02"), "<+02>-02");
        let z = SessionZone::parse("<+05:30>-05:30").expect("zone");
        assert!(matches!(z.zone(), Zone::Fixed(o) if o.local_minus_utc() == 19800));
    }

    #[test]
    fn offsets_keep_their_signs() {
        let east = |v: &str| match SessionZone::parse(v).map(|z| z.zone()) {
            Ok(Zone::Fixed(o)) => o.local_minus_utc(),
            _ => i32::MIN,
        };
        assert_eq!(east("+02"), 7200);
        assert_eq!(east("+05:30"), -19800);
        assert_eq!(east("UTC+3"), -10800);
        // the text handed to AT TIME ZONE names the same offset
        for v in ["+02", "+05:30", "-7", "UTC+3"] {
            let z = SessionZone::parse(v).expect("zone");
            let back = crate::at_time_zone::resolve_zone(&z.at_time_zone_text()).expect("zone");
            assert!(
                matches!(back, Zone::Fixed(o) if o.local_minus_utc() == east(v)),
                "{v}"
            );
        }
    }

    #[test]
    fn labels_read_back() {
        for v in ["Europe/Berlin", "+02", "+05:30", "America/St_Johns"] {
            let z = SessionZone::parse(v).expect("zone");
            let label = z.output_label().expect("not UTC");
            let back = zone_of_label(&label).expect("label");
            let t = 1_717_236_000_000_000;
            assert_eq!(offset_at(back, t), offset_at(z.zone(), t), "{v}");
        }
        assert!(SessionZone::parse("Etc/UTC")
            .expect("zone")
            .output_label()
            .is_none());
        let mut s = String::new();
        push_offset(-9000, &mut s);
        push_offset(3208, &mut s);
        assert_eq!(s, "-02:30+00:53:28");
    }
}
