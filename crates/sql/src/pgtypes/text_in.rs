//! Decoding text input into a column type (parameters, COPY text/CSV,
//! literals coerced by the planner): [`parse_text`] and the per-type
//! readers it uses (integers, floats, bytea, uuid, interval), plus
//! `char(n)`/`varchar(n)` length rules.
//!
//! Before touching: input is client text; errors carry PostgreSQL's
//! SQLSTATE (22P02 syntax, 22003 range, 22001 length).

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use super::*;

use eddy_common::{
    parse_interval, parse_uuid, ColumnType, Interval, IntervalError, Value, UUID_LEN,
};

use crate::error::{Result, SqlError};

/// Parses interval text (PostgreSQL's `interval_in`): 22007 if it is not
/// one, 22008 out of range.
pub fn interval_from_text(s: &str) -> Result<Interval> {
    parse_interval(s).map_err(|e| match e {
        IntervalError::Syntax => {
            SqlError::InvalidDatetime(format!("invalid input syntax for type interval: \"{s}\""))
        }
        IntervalError::OutOfRange => {
            SqlError::DatetimeOverflow(format!("interval out of range: \"{s}\""))
        }
    })
}

/// Parses a uuid's text form (PostgreSQL's `uuid_in`): 22P02 if it is not one.
pub fn uuid_from_text(s: &str) -> Result<[u8; UUID_LEN]> {
    parse_uuid(s).ok_or_else(|| {
        SqlError::InvalidText(format!("invalid input syntax for type uuid: \"{s}\""))
    })
}

/// [`parse_text`] in a session whose TimeZone is `zone`: `timestamptz`
/// text without a zone suffix (alone or in an array) is a wall-clock time
/// in `zone`.
pub fn parse_text_in(
    s: &str,
    ty: ColumnType,
    zone: &crate::session_zone::SessionZone,
) -> Result<Value> {
    if zone.is_utc() {
        return parse_text(s, ty);
    }
    match ty {
        ColumnType::TimestampTz => Ok(Value::Timestamp(timestamp_instant_in(s, zone)?)),
        ColumnType::Array(e) => Ok(Value::Array(crate::array_type::parse_array_text_in(
            s,
            e.column_type(),
            zone,
        )?)),
        _ => parse_text(s, ty),
    }
}

/// Parse the text form of a value into a column of type `ty`.
pub fn parse_text(s: &str, ty: ColumnType) -> Result<Value> {
    let bad = || {
        SqlError::InvalidText(format!(
            "invalid input syntax for type {}: \"{s}\"",
            ty.pg_name()
        ))
    };
    let out_of_range = || {
        SqlError::NumericOutOfRange(format!(
            "value \"{s}\" is out of range for type {}",
            ty.pg_name()
        ))
    };
    // float4in/float8in word it without "value"
    let float_out_of_range = || {
        SqlError::NumericOutOfRange(format!("\"{s}\" is out of range for type {}", ty.pg_name()))
    };
    let t = s.trim();
    Ok(match ty {
        ColumnType::Boolean => match t.to_ascii_lowercase().as_str() {
            "t" | "true" | "yes" | "on" | "1" | "y" => Value::Boolean(true),
            "f" | "false" | "no" | "off" | "0" | "n" => Value::Boolean(false),
            _ => return Err(bad()),
        },
        ColumnType::SmallInt => {
            Value::SmallInt(
                parse_int::<i16>(t).map_err(|e| if e { out_of_range() } else { bad() })?,
            )
        }
        ColumnType::Int => {
            Value::Int(parse_int::<i32>(t).map_err(|e| if e { out_of_range() } else { bad() })?)
        }
        ColumnType::BigInt => {
            Value::BigInt(parse_int::<i64>(t).map_err(|e| if e { out_of_range() } else { bad() })?)
        }
        ColumnType::Real => {
            Value::Real(parse_float(t).map_err(|e| if e { float_out_of_range() } else { bad() })?)
        }
        ColumnType::Double => {
            Value::Double(parse_float(t).map_err(|e| if e { float_out_of_range() } else { bad() })?)
        }
        ColumnType::Decimal(..) | ColumnType::Numeric if is_special_numeric(t) => {
            return Err(unstorable_numeric(t, ty));
        }
        // numeric(p,s) rounds to s digits; an unconstrained numeric keeps
        // the value exactly or refuses it (docs/decisions/0003)
        ColumnType::Decimal(..) | ColumnType::Numeric => {
            let (p, sc) = match ty {
                ColumnType::Decimal(p, sc) => (p, sc),
                _ => eddy_common::NUMERIC_STORAGE,
            };
            let parsed = if ty == ColumnType::Numeric {
                parse_decimal_exact(t, p, sc).map_err(|_| inexact_numeric(t))?
            } else {
                parse_decimal(t, p, sc)
            };
            Value::Decimal(parsed.ok_or_else(|| {
                if t.chars()
                    .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
                {
                    out_of_range()
                } else {
                    bad()
                }
            })?)
        }
        ColumnType::Text => Value::Text(s.to_string()),
        ColumnType::Varchar(_) | ColumnType::Char(_) => Value::Text(fit_length(s, ty)?),
        ColumnType::Date => Value::Date(date_of_text(t).map_err(|e| e.to_sql("date", s))?),
        ColumnType::Timestamp => Value::Timestamp(timestamp_wall_clock(t)?),
        ColumnType::TimestampTz => Value::Timestamp(timestamp_instant(t)?),
        ColumnType::Bytea => Value::Bytea(bytea_from_text(s)?),
        ColumnType::Uuid => Value::Uuid(uuid_from_text(s)?),
        ColumnType::Json => {
            crate::json::check_json(s)?;
            Value::Text(s.to_string())
        }
        ColumnType::Jsonb => Value::Text(crate::json::normalize_jsonb(s)?),
        ColumnType::Interval => Value::Interval(interval_from_text(s)?),
        ColumnType::Time => Value::Time(time_from_text(s)?),
        ColumnType::Array(e) => {
            Value::Array(crate::array_type::parse_array_text(s, e.column_type())?)
        }
    })
}

/// Text stored into `varchar(n)` or `char(n)`, as PostgreSQL's
/// `varchar_input` / `bpchar_input` check it on assignment: longer than n
/// characters is 22001 unless everything past n is spaces (then cut);
/// `char(n)` values are stored without trailing spaces (see
/// `ColumnType::Char`), which is how PostgreSQL compares them.
pub fn fit_length(s: &str, ty: ColumnType) -> Result<String> {
    let (limit, is_char) = match ty {
        ColumnType::Varchar(n) => (n, false),
        ColumnType::Char(n) => (n, true),
        _ => return Ok(s.to_string()),
    };
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let kept = match s.char_indices().nth(limit) {
        None => s,
        Some((cut, _)) => {
            let (head, tail) = s.split_at(cut);
            if tail.chars().any(|c| c != ' ') {
                return Err(SqlError::StringTooLong(ty.pg_name()));
            }
            head
        }
    };
    Ok(if is_char {
        kept.trim_end_matches(' ').to_string()
    } else {
        kept.to_string()
    })
}

/// `char(n)` as PostgreSQL prints it: padded with spaces to n characters.
pub fn pad_char(s: &str, n: u32, out: &mut String) {
    out.push_str(s);
    let len = s.chars().count();
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    out.extend(std::iter::repeat_n(' ', n.saturating_sub(len)));
}

/// `Err(true)` = out of range, `Err(false)` = not a number.
pub(super) fn parse_int<T: std::str::FromStr + TryFrom<i128>>(
    t: &str,
) -> std::result::Result<T, bool> {
    match t.parse::<i128>() {
        Ok(v) => T::try_from(v).map_err(|_| true),
        Err(_) => {
            // PostgreSQL accepts "1.0"? No: int input rejects fractions. Keep strict.
            if !t.is_empty()
                && t.trim_start_matches(['-', '+'])
                    .chars()
                    .all(|c| c.is_ascii_digit())
            {
                Err(true)
            } else {
                Err(false)
            }
        }
    }
}

/// Float text as PostgreSQL's `float8in` / `float4in` read it: surrounding
/// whitespace, `NaN`, `Infinity`, `inf` with either sign in any case, and
/// decimal numbers. `Err(true)` for a number whose magnitude the type
/// cannot hold (overflow, or underflow to zero: 22003), `Err(false)` for
/// text that is not a number (22P02).
pub(super) fn parse_float<F>(t: &str) -> std::result::Result<F, bool>
where
    F: std::str::FromStr + Copy + PartialEq + Into<f64>,
{
    let t = t.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    let special = matches!(body, "nan" | "inf" | "infinity");
    // body is a suffix of lower: the difference is the number of signs
    let signs = lower.len().checked_sub(body.len()).ok_or(false)?;
    if special && signs > 1 {
        return Err(false);
    }
    // Rust also reads "nan", "inf" and "infinity" in any case, with a sign
    let v: F = lower.parse().map_err(|_| false)?;
    let f: f64 = v.into();
    if !special && f.is_infinite() {
        return Err(true);
    }
    if f == 0.0
        && body
            .split(['e'])
            .next()
            .is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)))
    {
        return Err(true);
    }
    Ok(v)
}

/// Text as `bytea` input, PostgreSQL's `byteain`: `\x` and hex digit pairs
/// (whitespace allowed between pairs), or the escape format where `\\` is
/// a backslash and `\ooo` (three octal digits, the first 0-3) a byte.
/// `None` for anything else; [`bytea_from_text`] says why.
pub fn parse_bytea_text(s: &str) -> Option<Vec<u8>> {
    bytea_from_text(s).ok()
}

/// [`parse_bytea_text`] with PostgreSQL's errors: 22023 for bad hex, 22P02
/// for a bad escape.
pub fn bytea_from_text(s: &str) -> Result<Vec<u8>> {
    let b = s.as_bytes();
    if let Some(hex) = b.strip_prefix(b"\\x") {
        let mut out = Vec::with_capacity(hex.len() / 2);
        let mut rest = hex;
        while let Some((&c, tail)) = rest.split_first() {
            if matches!(c, b' ' | b'\n' | b'\t' | b'\r') {
                rest = tail;
                continue;
            }
            let digit = |c: u8| {
                (c as char).to_digit(16).ok_or_else(|| {
                    SqlError::InvalidParameter(format!(
                        "invalid hexadecimal digit: \"{}\"",
                        String::from_utf8_lossy(&[c])
                    ))
                })
            };
            let hi = digit(c)?;
            let (lo, tail) = match tail.split_first() {
                Some((&c, tail)) => (digit(c)?, tail),
                None => {
                    return Err(SqlError::InvalidParameter(
                        "invalid hexadecimal data: odd number of digits".into(),
                    ))
                }
            };
            out.push(hex_byte(hi, lo)?);
            rest = tail;
        }
        return Ok(out);
    }
    let mut out = Vec::with_capacity(b.len());
    let mut rest = b;
    while let Some((&c, tail)) = rest.split_first() {
        if c != b'\\' {
            out.push(c);
            rest = tail;
            continue;
        }
        match tail {
            [d1 @ b'0'..=b'3', d2 @ b'0'..=b'7', d3 @ b'0'..=b'7', more @ ..] => {
                out.push(octal_byte(*d1, *d2, *d3)?);
                rest = more;
            }
            [b'\\', more @ ..] => {
                out.push(b'\\');
                rest = more;
            }
            _ => {
                return Err(SqlError::InvalidText(
                    "invalid input syntax for type bytea".into(),
                ))
            }
        }
    }
    Ok(out)
}

/// The byte of two hex digit values (each below 16, so it fits).
fn hex_byte(hi: u32, lo: u32) -> Result<u8> {
    hi.checked_mul(16)
        .and_then(|h| h.checked_add(lo))
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(|| SqlError::Internal("hex digit above 15".into()))
}

/// The byte of a `\ddd` octal escape whose digits the caller matched
/// (`0-3`, `0-7`, `0-7`: at most 255).
fn octal_byte(d1: u8, d2: u8, d3: u8) -> Result<u8> {
    let v = |d: u8| d.checked_sub(b'0');
    v(d1)
        .and_then(|a| a.checked_mul(64))
        .and_then(|a| Some((a, v(d2)?.checked_mul(8)?, v(d3)?)))
        .and_then(|(a, b, c)| a.checked_add(b)?.checked_add(c))
        .ok_or_else(|| SqlError::Internal("octal escape above 255".into()))
}

/// `NaN`, `Infinity` and `-Infinity`, the numeric values Eddy's decimals
/// cannot hold.
pub(super) fn is_special_numeric(t: &str) -> bool {
    [
        "nan",
        "infinity",
        "+infinity",
        "-infinity",
        "inf",
        "+inf",
        "-inf",
    ]
    .iter()
    .any(|w| t.eq_ignore_ascii_case(w))
}

/// 22003 for a value an unconstrained `numeric` column cannot hold
/// exactly (docs/decisions/0003): it is refused, never rounded.
pub(crate) fn inexact_numeric(value: &str) -> SqlError {
    let (precision, scale) = eddy_common::NUMERIC_STORAGE;
    SqlError::NumericOutOfRange(format!(
        "numeric value {value} cannot be stored exactly in an unconstrained numeric column, \
         which holds at most {scale} digits after the decimal point (and {} before it): \
         declare the column numeric(p,s) to round values to s digits, or round the value",
        i16::from(precision).saturating_sub(i16::from(scale))
    ))
}

pub(super) fn unstorable_numeric(t: &str, ty: ColumnType) -> SqlError {
    SqlError::FeatureNotSupported(format!(
        "cannot convert {t} to type {}: Eddy has no NaN or infinite numeric",
        ty.pg_name()
    ))
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

    use eddy_common::{ColumnType, Value};

    #[test]
    fn bytea_text_is_read_as_byteain_does() {
        // answers from PostgreSQL 15
        assert_eq!(bytea_from_text("\\x68656c6c6f").unwrap(), b"hello");
        assert_eq!(bytea_from_text("\\x68 65\n6C").unwrap(), b"hel");
        assert_eq!(bytea_from_text("\\x").unwrap(), b"");
        assert_eq!(bytea_from_text("\\000ab\\\\c").unwrap(), b"\0ab\\c");
        assert_eq!(bytea_from_text("a\\101\\377").unwrap(), b"aA\xff");
        assert_eq!(bytea_from_text("plain é").unwrap(), "plain é".as_bytes());
        for (bad, state) in [
            ("\\x6", "22023"),
            ("\\x6g", "22023"),
            ("\\x6 8", "22023"),
            ("\\9", "22P02"),
            ("\\400", "22P02"),
            ("\\00", "22P02"),
            ("ab\\", "22P02"),
            ("\\X41", "22P02"),
        ] {
            assert_eq!(bytea_from_text(bad).unwrap_err().sqlstate(), state, "{bad}");
        }
        assert_eq!(
            parse_text("\\001", ColumnType::Bytea).unwrap(),
            Value::Bytea(vec![1])
        );
    }

    #[test]
    fn bad_text_is_an_error_not_a_panic() {
        assert_eq!(
            parse_text("x", ColumnType::Int).unwrap_err().sqlstate(),
            "22P02"
        );
        assert_eq!(
            parse_text("99999999999", ColumnType::Int)
                .unwrap_err()
                .sqlstate(),
            "22003"
        );
        assert!(parse_binary(&[1, 2], oid::INT4, ColumnType::Int).is_err());
    }
}
