//! PostgreSQL 15's text functions that DataFusion lacks: `parse_ident`,
//! `unistr`, `regexp_substr` and `pg_size_bytes`, each with PostgreSQL's
//! rules and errors (compared with PostgreSQL 15 in
//! `tests/slt/text_functions.slt`).
//!
//! * `parse_ident(text [, strict])`: a qualified name split at its dots;
//!   unquoted parts are lower-cased, quoted parts kept with `""` undone;
//!   in strict mode (the default) anything after the name is 22023.
//! * `unistr(text)`: `\XXXX`, `\+XXXXXX`, `\uXXXX`, `\UXXXXXXXX` and `\\`
//!   decoded, UTF-16 surrogate pairs joined; a malformed escape is 42601,
//!   a code point beyond U+10FFFF 22023.
//! * `regexp_substr(s, pattern [, start [, n [, flags [, subexpr]]]])`:
//!   the n-th match at or after character `start`, or its `subexpr`-th
//!   group; NULL when there is none. Patterns are Eddy's regular
//!   expressions (those of `~`), flags `i` and `c`.
//! * `pg_size_bytes(text)`: a size such as `1.5 GB` in bytes, rounded half
//!   away from zero; units `bytes`, `kB`, `MB`, `GB`, `TB`, `PB` (1024
//!   based, any case); 22023 for anything else, 22003 past bigint.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::ScalarUDF;

use crate::error::SqlError;
use crate::pg_functions::{arity, function, is_text, no_function, regex_with_flags, text_list};

/// The functions, for the session to register.
pub fn text_functions() -> Vec<ScalarUDF> {
    vec![
        function(
            "parse_ident",
            coerce_parse_ident,
            |_| Ok(text_list()),
            parse_ident,
        ),
        function("unistr", coerce_unistr, |_| Ok(DataType::Utf8), unistr),
        function(
            "regexp_substr",
            coerce_regexp_substr,
            |_| Ok(DataType::Utf8),
            regexp_substr,
        ),
        function(
            "pg_size_bytes",
            coerce_size_bytes,
            |_| Ok(DataType::Int64),
            pg_size_bytes,
        ),
    ]
}

fn is_integer(t: &DataType) -> bool {
    t.is_integer() || *t == DataType::Null
}

fn coerce_parse_ident(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("parse_ident", args, 1, 2)?;
    match args {
        [a] if is_text(a) => Ok(vec![DataType::Utf8]),
        [a, b] if is_text(a) && matches!(b, DataType::Boolean | DataType::Null) => {
            Ok(vec![DataType::Utf8, DataType::Boolean])
        }
        _ => Err(no_function("parse_ident", args)),
    }
}

fn coerce_unistr(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("unistr", args, 1, 1)?;
    if !args.iter().all(is_text) {
        return Err(no_function("unistr", args));
    }
    Ok(vec![DataType::Utf8])
}

fn coerce_size_bytes(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("pg_size_bytes", args, 1, 1)?;
    if !args.iter().all(is_text) {
        return Err(no_function("pg_size_bytes", args));
    }
    Ok(vec![DataType::Utf8])
}

/// `(text, text [, int [, int [, text [, int]]]])`.
fn coerce_regexp_substr(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("regexp_substr", args, 2, 6)?;
    let ok = args.iter().enumerate().all(|(i, t)| match i {
        0 | 1 | 4 => is_text(t),
        _ => is_integer(t),
    });
    if !ok {
        return Err(no_function("regexp_substr", args));
    }
    Ok(args
        .iter()
        .enumerate()
        .map(|(i, _)| match i {
            0 | 1 | 4 => DataType::Utf8,
            _ => DataType::Int64,
        })
        .collect())
}

fn as_str(v: Option<&ScalarValue>) -> Option<&str> {
    match v? {
        ScalarValue::Utf8(s) => s.as_deref(),
        _ => None,
    }
}

// ---- parse_ident ---------------------------------------------------------

fn not_identifier(s: &str) -> SqlError {
    SqlError::InvalidParameter(format!("string is not a valid identifier: \"{s}\""))
}

/// PostgreSQL's `scanner_isspace`.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c')
}

fn ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || !c.is_ascii()
}

fn ident_cont(c: char) -> bool {
    ident_start(c) || c.is_ascii_digit() || c == '$'
}

/// The parts of the qualified name `s` (misc.c's `parse_ident`).
fn split_identifier(s: &str, strict: bool) -> Result<Vec<String>, SqlError> {
    let chars: Vec<char> = s.chars().collect();
    let at = |i: usize| chars.get(i).copied();
    let mut i = 0;
    while at(i).is_some_and(is_space) {
        i += 1;
    }
    let mut parts = Vec::new();
    let mut after_dot = false;
    loop {
        let mut found = false;
        if at(i) == Some('"') {
            let mut part = String::new();
            i += 1;
            loop {
                match at(i) {
                    None => {
                        return Err(not_identifier(s)
                            .with_detail("String has unclosed double quotes.".into()))
                    }
                    Some('"') if at(i + 1) == Some('"') => {
                        part.push('"');
                        i += 2;
                    }
                    Some('"') => {
                        i += 1;
                        break;
                    }
                    Some(c) => {
                        part.push(c);
                        i += 1;
                    }
                }
            }
            if part.is_empty() {
                return Err(
                    not_identifier(s).with_detail("Quoted identifier must not be empty.".into())
                );
            }
            parts.push(part);
            found = true;
        } else if at(i).is_some_and(ident_start) {
            let start = i;
            while at(i).is_some_and(ident_cont) {
                i += 1;
            }
            let part: String = chars[start..i]
                .iter()
                .map(|c| c.to_ascii_lowercase())
                .collect();
            parts.push(part);
            found = true;
        }
        if !found {
            return Err(if at(i) == Some('.') {
                not_identifier(s).with_detail("No valid identifier before \".\".".into())
            } else if after_dot {
                not_identifier(s).with_detail("No valid identifier after \".\".".into())
            } else {
                not_identifier(s)
            });
        }
        while at(i).is_some_and(is_space) {
            i += 1;
        }
        match at(i) {
            Some('.') => {
                after_dot = true;
                i += 1;
                while at(i).is_some_and(is_space) {
                    i += 1;
                }
            }
            None => break,
            Some(_) if strict => return Err(not_identifier(s)),
            Some(_) => break,
        }
    }
    Ok(parts)
}

fn parse_ident(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let strict = match args.get(1) {
        Some(ScalarValue::Boolean(Some(b))) => *b,
        Some(v) if v.is_null() => return null_list(),
        _ => true,
    };
    let Some(s) = as_str(args.first()) else {
        return null_list();
    };
    let items: Vec<ScalarValue> = split_identifier(s, strict)?
        .into_iter()
        .map(|p| ScalarValue::Utf8(Some(p)))
        .collect();
    Ok(ScalarValue::List(ScalarValue::new_list_nullable(
        &items,
        &DataType::Utf8,
    )))
}

fn null_list() -> Result<ScalarValue, SqlError> {
    ScalarValue::try_from(&text_list()).map_err(|e| SqlError::Internal(e.to_string()))
}

// ---- unistr --------------------------------------------------------------

fn bad_escape() -> SqlError {
    SqlError::SyntaxMessage("invalid Unicode escape".into())
        .with_detail("Unicode escapes must be \\XXXX, \\+XXXXXX, \\uXXXX, or \\UXXXXXXXX.".into())
}

fn bad_surrogate() -> SqlError {
    SqlError::SyntaxMessage("invalid Unicode surrogate pair".into())
}

/// The code point written with `digits` hex digits at `chars[at..]`.
fn hex_at(chars: &[char], at: usize, digits: usize) -> Option<u32> {
    let hex = chars.get(at..at + digits)?;
    hex.iter()
        .try_fold(0u32, |acc, c| Some(acc * 16 + c.to_digit(16)?))
}

fn decode_unistr(s: &str) -> Result<String, SqlError> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut high: Option<u32> = None;
    while let Some(&c) = chars.get(i) {
        if c != '\\' {
            if high.is_some() {
                return Err(bad_surrogate());
            }
            out.push(c);
            i += 1;
            continue;
        }
        let (cp, len) = match chars.get(i + 1) {
            Some('\\') if high.is_none() => {
                out.push('\\');
                i += 2;
                continue;
            }
            Some('+') => (hex_at(&chars, i + 2, 6), 8),
            Some('u') => (hex_at(&chars, i + 2, 4), 6),
            Some('U') => (hex_at(&chars, i + 2, 8), 10),
            _ => (hex_at(&chars, i + 1, 4), 5),
        };
        let cp = cp.ok_or_else(bad_escape)?;
        i += len;
        if cp > 0x10FFFF {
            return Err(SqlError::InvalidParameter(format!(
                "invalid Unicode code point: {cp:04X}"
            )));
        }
        match (high.take(), cp) {
            (None, 0xD800..=0xDBFF) => high = Some(cp),
            (Some(h), 0xDC00..=0xDFFF) => {
                let joined = 0x10000 + ((h - 0xD800) << 10) + (cp - 0xDC00);
                out.push(char::from_u32(joined).ok_or_else(bad_surrogate)?);
            }
            (Some(_), _) | (None, 0xDC00..=0xDFFF) => return Err(bad_surrogate()),
            (None, cp) => out.push(char::from_u32(cp).ok_or_else(bad_escape)?),
        }
    }
    if high.is_some() {
        return Err(bad_surrogate());
    }
    Ok(out)
}

fn unistr(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    Ok(ScalarValue::Utf8(match as_str(args.first()) {
        Some(s) => Some(decode_unistr(s)?),
        None => None,
    }))
}

// ---- regexp_substr -------------------------------------------------------

fn regexp_substr(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    if args.iter().any(ScalarValue::is_null) {
        return Ok(ScalarValue::Utf8(None));
    }
    let int = |i: usize, default: i64| match args.get(i) {
        Some(ScalarValue::Int64(Some(v))) => *v,
        _ => default,
    };
    let (Some(s), Some(pattern)) = (as_str(args.first()), as_str(args.get(1))) else {
        return Ok(ScalarValue::Utf8(None));
    };
    let invalid = |name: &str, v: i64| {
        SqlError::InvalidParameter(format!("invalid value for parameter \"{name}\": {v}"))
    };
    let start = int(2, 1);
    if start <= 0 {
        return Err(invalid("start", start));
    }
    let n = int(3, 1);
    if n <= 0 {
        return Err(invalid("n", n));
    }
    let subexpr = int(5, 0);
    if subexpr < 0 {
        return Err(invalid("subexpr", subexpr));
    }
    let re = regex_with_flags("regexp_substr", pattern, as_str(args.get(4)))?;
    // `start` counts characters; past the end there is nothing to find
    let skip = usize::try_from(start - 1).unwrap_or(usize::MAX);
    let Some(offset) = s
        .char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(s.len()))
        .nth(skip)
    else {
        return Ok(ScalarValue::Utf8(None));
    };
    let wanted = usize::try_from(n - 1).unwrap_or(usize::MAX);
    let Some(caps) = re.captures_iter(&s[offset..]).nth(wanted) else {
        return Ok(ScalarValue::Utf8(None));
    };
    let group = usize::try_from(subexpr).unwrap_or(usize::MAX);
    Ok(ScalarValue::Utf8(
        caps.get(group).map(|m| m.as_str().to_string()),
    ))
}

// ---- pg_size_bytes -------------------------------------------------------

const SIZE_UNITS: &[(&str, u32)] = &[
    ("bytes", 0),
    ("kB", 10),
    ("MB", 20),
    ("GB", 30),
    ("TB", 40),
    ("PB", 50),
];

fn invalid_size(s: &str) -> SqlError {
    SqlError::InvalidParameter(format!("invalid size: \"{s}\""))
}

fn bigint_out_of_range() -> SqlError {
    SqlError::NumericOutOfRange("bigint out of range".into())
}

/// `mantissa * 10^exp10 * 2^shift` rounded half away from zero to an
/// int8, with overflow as 22003.
fn scaled(mantissa: i128, exp10: i64, shift: u32) -> Result<i64, SqlError> {
    let mut v = mantissa
        .checked_mul(1i128 << shift)
        .ok_or_else(bigint_out_of_range)?;
    if exp10 >= 0 {
        for _ in 0..exp10 {
            v = v.checked_mul(10).ok_or_else(bigint_out_of_range)?;
        }
    } else {
        let mut divisor: i128 = 1;
        for _ in 0..exp10.unsigned_abs() {
            divisor = match divisor.checked_mul(10) {
                Some(d) => d,
                // the value is a fraction of the largest divisor: 0
                None => return Ok(0),
            };
        }
        let (q, r) = (v / divisor, v % divisor);
        v = if r.unsigned_abs() * 2 >= divisor.unsigned_abs() {
            q + v.signum()
        } else {
            q
        };
    }
    i64::try_from(v).map_err(|_| bigint_out_of_range())
}

fn size_in_bytes(text: &str) -> Result<i64, SqlError> {
    let s = text.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let b = s.as_bytes();
    let mut i = 0;
    let negative = b.first() == Some(&b'-');
    if matches!(b.first(), Some(b'-' | b'+')) {
        i += 1;
    }
    let mut mantissa: i128 = 0;
    let mut exp10: i64 = 0;
    let mut digits = false;
    let push = |d: u8, m: &mut i128| -> Result<(), SqlError> {
        *m = m
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(d - b'0')))
            .ok_or_else(bigint_out_of_range)?;
        Ok(())
    };
    while let Some(d) = b.get(i).filter(|d| d.is_ascii_digit()) {
        push(*d, &mut mantissa)?;
        digits = true;
        i += 1;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while let Some(d) = b.get(i).filter(|d| d.is_ascii_digit()) {
            // fraction digits past 36 significant ones cannot change an
            // int8 result
            if mantissa < 10i128.pow(36) {
                push(*d, &mut mantissa)?;
                exp10 -= 1;
            }
            digits = true;
            i += 1;
        }
    }
    if !digits {
        return Err(invalid_size(s));
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        // an exponent only when digits follow (else 'e' starts the unit)
        let mut j = i + 1;
        let sign: i64 = match b.get(j) {
            Some(b'-') => {
                j += 1;
                -1
            }
            Some(b'+') => {
                j += 1;
                1
            }
            _ => 1,
        };
        let first = j;
        let mut e: i64 = 0;
        while let Some(d) = b.get(j).filter(|d| d.is_ascii_digit()) {
            e = e.saturating_mul(10).saturating_add(i64::from(d - b'0'));
            j += 1;
        }
        if j > first {
            exp10 = exp10.saturating_add(sign * e);
            i = j;
        }
    }
    let unit = s
        .get(i..)
        .unwrap_or("")
        .trim_matches(|c: char| c.is_ascii_whitespace());
    let shift = if unit.is_empty() {
        0
    } else {
        SIZE_UNITS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(unit))
            .map(|(_, shift)| *shift)
            .ok_or_else(|| {
                SqlError::InvalidParameter(format!("invalid size: \"{text}\""))
                    .with_detail(format!("Invalid size unit: \"{unit}\"."))
            })?
    };
    if mantissa == 0 {
        return Ok(0);
    }
    // a huge exponent overflows; a tiny one rounds to 0 (`scaled`)
    if exp10 > 40 {
        return Err(bigint_out_of_range());
    }
    scaled(
        if negative { -mantissa } else { mantissa },
        exp10.max(-80),
        shift,
    )
}

fn pg_size_bytes(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    Ok(ScalarValue::Int64(match as_str(args.first()) {
        Some(s) => Some(size_in_bytes(s)?),
        None => None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_as_postgres_does() {
        assert_eq!(
            split_identifier("  a . \"B.c\"  ", true).unwrap(),
            vec!["a", "B.c"]
        );
        assert_eq!(split_identifier("A$1_é", true).unwrap(), vec!["a$1_é"]);
        assert_eq!(split_identifier("\"a\"\"b\"", true).unwrap(), vec!["a\"b"]);
        assert_eq!(split_identifier("a.b junk", false).unwrap(), vec!["a", "b"]);
        for bad in ["a.b junk", ".a", "a.", "\"\"", "\"a", "1a", ""] {
            let e = split_identifier(bad, true).unwrap_err();
            assert_eq!(e.sqlstate(), "22023", "{bad}");
        }
    }

    #[test]
    fn unicode_escapes_decode() {
        assert_eq!(
            decode_unistr("d\\0061t\\+000061 \\u0041\\U00000042 \\\\").unwrap(),
            "data AB \\"
        );
        assert_eq!(decode_unistr("\\D83D\\DE00").unwrap(), "😀");
        assert_eq!(decode_unistr("\\xyz").unwrap_err().sqlstate(), "42601");
        assert_eq!(decode_unistr("a\\").unwrap_err().sqlstate(), "42601");
        assert_eq!(decode_unistr("\\D800").unwrap_err().sqlstate(), "42601");
        assert_eq!(decode_unistr("\\DE00").unwrap_err().sqlstate(), "42601");
        assert_eq!(decode_unistr("\\+110000").unwrap_err().sqlstate(), "22023");
    }

    #[test]
    fn sizes_parse_as_postgres_does() {
        assert_eq!(size_in_bytes("1.5 PB").unwrap(), 1_688_849_860_263_936);
        assert_eq!(size_in_bytes(" -1.5e3kb ").unwrap(), -1_536_000);
        assert_eq!(size_in_bytes(".5 kB").unwrap(), 512);
        assert_eq!(size_in_bytes("0.5").unwrap(), 1);
        assert_eq!(size_in_bytes("-0.5").unwrap(), -1);
        assert_eq!(size_in_bytes("1e-90").unwrap(), 0);
        assert_eq!(size_in_bytes("9223372036854775807").unwrap(), i64::MAX);
        assert_eq!(
            size_in_bytes("9223372036854775808").unwrap_err().sqlstate(),
            "22003"
        );
        assert_eq!(size_in_bytes("1e400").unwrap_err().sqlstate(), "22003");
        for bad in ["abc", "1e", "1 B", "1 XB", "", "-"] {
            assert_eq!(size_in_bytes(bad).unwrap_err().sqlstate(), "22023", "{bad}");
        }
    }
}
