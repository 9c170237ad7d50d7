//! `AT TIME ZONE` and `timezone(zone, ts)` with PostgreSQL's meaning.
//!
//! DataFusion's `AT TIME ZONE` relabels a timestamp with a zone and keeps
//! the instant, so `timestamptz AT TIME ZONE 'Europe/Paris'` answered the
//! same instant. PostgreSQL converts between the two timestamp types:
//! * `timestamptz AT TIME ZONE z` is a `timestamp`: the wall-clock time in
//!   `z` at that instant;
//! * `timestamp AT TIME ZONE z` is a `timestamptz`: the instant at which
//!   the clocks in `z` showed that wall-clock time; a time skipped by a
//!   daylight-saving change is read with the offset before the change, and
//!   a time that occurs twice is the later one (standard time);
//! * a `date` is first a `timestamptz` at midnight in the session's zone
//!   (`crate::zone_rules` writes that cast on the zone's wall clock).
//!
//! Both spellings become the call `eddy_at_time_zone(ts, zone)` on the AST
//! (`crate::call_rewrites`). Zones are IANA names (case-insensitive, as in
//! PostgreSQL) and POSIX-style numeric offsets such as `+05`, which, as in
//! PostgreSQL, count hours *west* of Greenwich. Other POSIX specifications
//! (`UTC+5`, `EST5EDT` rules) and interval zones are refused with 0A000;
//! a name that is not a zone is 22023, PostgreSQL's "time zone ... not
//! recognized".

use std::str::FromStr;
use std::sync::Arc;

use chrono::{DateTime, FixedOffset, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, TimestampMicrosecondBuilder};
use datafusion::arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::SqlError;

/// The function's name.
pub const AT_TIME_ZONE: &str = "eddy_at_time_zone";

/// The zone Eddy labels a `timestamptz` result with.
const UTC_LABEL: &str = "+00:00";

/// A resolved zone.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Zone {
    Named(chrono_tz::Tz),
    Fixed(FixedOffset),
}

/// A POSIX numeric offset: `+05`, `-3:30`, `5`; hours west of Greenwich.
pub(crate) fn posix_offset(s: &str) -> Option<FixedOffset> {
    let (sign, body) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        b'0'..=b'9' => (1, s),
        _ => return None,
    };
    let mut parts = body.split(':');
    let mut field = |max: i32| -> Option<Option<i32>> {
        match parts.next() {
            None => Some(None),
            Some(p) if !p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse::<i32>().ok().filter(|v| *v <= max).map(Some)
            }
            Some(_) => None,
        }
    };
    let hours = field(168)??;
    let minutes = field(59)?.unwrap_or(0);
    let seconds = field(59)?.unwrap_or(0);
    if parts.next().is_some() {
        return None;
    }
    // west of Greenwich: `+05` is UTC-5
    FixedOffset::west_opt(sign * (hours * 3600 + minutes * 60 + seconds))
}

pub(crate) fn resolve_zone(name: &str) -> Result<Zone, SqlError> {
    let trimmed = name.trim();
    if let Ok(tz) = chrono_tz::Tz::from_str(trimmed) {
        return Ok(Zone::Named(tz));
    }
    if let Some(tz) = chrono_tz::TZ_VARIANTS
        .iter()
        .find(|tz| tz.name().eq_ignore_ascii_case(trimmed))
    {
        return Ok(Zone::Named(*tz));
    }
    if let Some(offset) = posix_offset(trimmed) {
        return Ok(Zone::Fixed(offset));
    }
    if trimmed.bytes().any(|b| b.is_ascii_digit()) {
        return Err(SqlError::FeatureNotSupported(format!(
            "time zone \"{name}\": Eddy takes zone names and numeric offsets, not POSIX zone rules"
        )));
    }
    Err(SqlError::InvalidParameter(format!(
        "time zone \"{name}\" not recognized"
    )))
}

fn overflow() -> SqlError {
    SqlError::DatetimeOverflow("timestamp out of range".into())
}

/// The wall-clock time in `zone` at the instant `micros` (UTC).
pub(crate) fn to_wall_clock(micros: i64, zone: Zone) -> Result<i64, SqlError> {
    let utc = DateTime::<Utc>::from_timestamp_micros(micros).ok_or_else(overflow)?;
    let local = match zone {
        Zone::Named(tz) => utc.with_timezone(&tz).naive_local(),
        Zone::Fixed(offset) => utc.with_timezone(&offset).naive_local(),
    };
    Ok(local.and_utc().timestamp_micros())
}

/// The zone's abbreviation and its offset east of UTC in seconds at the
/// instant `micros`, as PostgreSQL's `to_char` writes them (`TZ`, `OF`):
/// the tz database's abbreviation (`CET`, `CEST`, `JST`), or for a zone
/// without one and a fixed offset the offset as `+HH` or `+HHMM`.
pub(crate) fn zone_label_at(micros: i64, zone: Zone) -> Result<(String, i32), SqlError> {
    let utc = DateTime::<Utc>::from_timestamp_micros(micros).ok_or_else(overflow)?;
    let (abbreviation, offset) = match zone {
        Zone::Named(tz) => {
            use chrono_tz::OffsetName;
            let o = tz.offset_from_utc_datetime(&utc.naive_utc());
            let name = o
                .abbreviation()
                .filter(|a| a.chars().any(|c| c.is_ascii_alphabetic()))
                .map(str::to_string);
            (name, o.fix().local_minus_utc())
        }
        Zone::Fixed(offset) => (None, offset.local_minus_utc()),
    };
    let numeric = || {
        let sign = if offset < 0 { '-' } else { '+' };
        let a = offset.unsigned_abs();
        let (h, m) = (a / 3600, a / 60 % 60);
        if m == 0 {
            format!("{sign}{h:02}")
        } else {
            format!("{sign}{h:02}{m:02}")
        }
    };
    Ok((abbreviation.unwrap_or_else(numeric), offset))
}

/// The instant at which clocks in `zone` showed `micros` (a wall-clock
/// time written as if it were UTC).
pub(crate) fn to_instant(micros: i64, zone: Zone) -> Result<i64, SqlError> {
    let wall: NaiveDateTime = DateTime::<Utc>::from_timestamp_micros(micros)
        .ok_or_else(overflow)?
        .naive_utc();
    let offset_seconds = match zone {
        Zone::Fixed(offset) => offset.local_minus_utc(),
        Zone::Named(tz) => match tz.offset_from_local_datetime(&wall) {
            LocalResult::Single(o) => o.fix().local_minus_utc(),
            // twice on the clock: the later instant (standard time)
            LocalResult::Ambiguous(a, b) => {
                a.fix().local_minus_utc().min(b.fix().local_minus_utc())
            }
            // skipped: the offset in force before the change
            LocalResult::None => {
                let before = wall - chrono::Duration::hours(24);
                tz.offset_from_utc_datetime(&before).fix().local_minus_utc()
            }
        },
    };
    micros
        .checked_sub(i64::from(offset_seconds) * 1_000_000)
        .ok_or_else(overflow)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct AtTimeZoneUdf {
    signature: Signature,
}

impl ScalarUDFImpl for AtTimeZoneUdf {
    fn name(&self) -> &str {
        AT_TIME_ZONE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        let [ts, zone] = args else {
            return Err(DataFusionError::Plan(
                "AT TIME ZONE takes a timestamp and a zone".into(),
            ));
        };
        let ts = match ts {
            DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
            // a date is a timestamptz at midnight in the session's zone (UTC)
            DataType::Date32 | DataType::Date64 => {
                DataType::Timestamp(TimeUnit::Microsecond, Some(UTC_LABEL.into()))
            }
            DataType::Null => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC_LABEL.into())),
            other => {
                return Err(DataFusionError::from(SqlError::FeatureNotSupported(format!(
                    "AT TIME ZONE of a {other} value is not supported: Eddy converts timestamp, timestamp with time zone and date values"
                ))))
            }
        };
        let zone = match zone {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => {
                DataType::Utf8
            }
            other => {
                return Err(DataFusionError::from(SqlError::FeatureNotSupported(
                    format!(
                    "AT TIME ZONE with a {other} zone is not supported: Eddy takes the zone as text"
                ),
                )))
            }
        };
        Ok(vec![ts, zone])
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        Ok(match args.first() {
            Some(DataType::Timestamp(_, Some(_))) => {
                DataType::Timestamp(TimeUnit::Microsecond, None)
            }
            _ => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC_LABEL.into())),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [ts, zones] = arrays.as_slice() else {
            return Err(DataFusionError::Plan(
                "AT TIME ZONE takes a timestamp and a zone".into(),
            ));
        };
        let from_instant = matches!(ts.data_type(), DataType::Timestamp(_, Some(_)));
        let values = ts
            .as_primitive_opt::<TimestampMicrosecondType>()
            .ok_or_else(|| DataFusionError::Internal("AT TIME ZONE: not microseconds".into()))?;
        let zones = zones
            .as_string_opt::<i32>()
            .ok_or_else(|| DataFusionError::Internal("AT TIME ZONE: zone not text".into()))?;
        let mut out = TimestampMicrosecondBuilder::with_capacity(values.len());
        let mut cached: Option<(String, Zone)> = None;
        for i in 0..values.len() {
            if values.is_null(i) || zones.is_null(i) {
                out.append_null();
                continue;
            }
            let name = zones.value(i);
            let zone = match &cached {
                Some((n, z)) if n == name => *z,
                _ => {
                    let z = resolve_zone(name).map_err(DataFusionError::from)?;
                    cached = Some((name.to_string(), z));
                    z
                }
            };
            let v = values.value(i);
            let converted = if from_instant {
                to_wall_clock(v, zone)
            } else {
                to_instant(v, zone)
            }
            .map_err(DataFusionError::from)?;
            out.append_value(converted);
        }
        let result_zone: Option<Arc<str>> = if from_instant {
            None
        } else {
            Some(UTC_LABEL.into())
        };
        let out: ArrayRef = Arc::new(out.finish().with_timezone_opt(result_zone));
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

/// `eddy_at_time_zone(ts, zone)`.
pub fn at_time_zone_function() -> ScalarUDF {
    ScalarUDF::new_from_impl(AtTimeZoneUdf {
        signature: Signature::user_defined(Volatility::Immutable),
    })
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

    fn zone(s: &str) -> Zone {
        resolve_zone(s).expect("zone")
    }

    #[test]
    fn conversions_match_postgresql() {
        // PostgreSQL 15, session zone UTC
        let midnight = micros("2020-01-02 00:00:00");
        assert_eq!(
            to_wall_clock(midnight, zone("+05")).ok(),
            Some(micros("2020-01-01 19:00:00"))
        );
        assert_eq!(
            to_wall_clock(midnight, zone("europe/paris")).ok(),
            Some(micros("2020-01-02 01:00:00"))
        );
        assert_eq!(
            to_instant(midnight, zone("Asia/Tokyo")).ok(),
            Some(micros("2020-01-01 15:00:00"))
        );
        assert_eq!(
            to_wall_clock(micros("2020-07-02 00:00:00"), zone("EST")).ok(),
            Some(micros("2020-07-01 19:00:00"))
        );
        // skipped by the change to summer time: the offset before it
        assert_eq!(
            to_instant(micros("2020-03-08 02:30:00"), zone("America/New_York")).ok(),
            Some(micros("2020-03-08 07:30:00"))
        );
        // twice on the clock: the later instant
        assert_eq!(
            to_instant(micros("2020-11-01 01:30:00"), zone("America/New_York")).ok(),
            Some(micros("2020-11-01 06:30:00"))
        );
    }

    #[test]
    fn unknown_zones_are_refused() {
        assert_eq!(
            resolve_zone("Mars/Olympus").err().map(|e| e.sqlstate()),
            Some("22023")
        );
        assert_eq!(
            resolve_zone("UTC+5").err().map(|e| e.sqlstate()),
            Some("0A000")
        );
    }
}
