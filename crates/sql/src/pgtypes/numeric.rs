//! `numeric`: scaled-integer text formatting and parsing, the exact text
//! of a numeric parameter ([`NumericText`]), and the base-10000 binary wire
//! form (encode and decode).
//!
//! Before touching: a `Decimal128` is an `i128` with a scale; binary input
//! headers (ndigits, weight, sign, dscale) come from the client and are
//! validated (22P03) before any arithmetic uses them.

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use bytes::{BufMut, BytesMut};

use crate::error::{Result, SqlError};

/// Format a scaled integer with `scale` digits after the point.
pub fn format_decimal(v: i128, scale: i8) -> String {
    if scale <= 0 {
        let mut s = v.to_string();
        if v != 0 {
            s.extend(std::iter::repeat_n('0', usize::from(scale.unsigned_abs())));
        }
        return s;
    }
    let neg = v < 0;
    let digits = v.unsigned_abs().to_string();
    let scale = usize::from(scale.unsigned_abs());
    let (int, frac) = match digits.len().checked_sub(scale) {
        Some(n) if n > 0 => {
            let (a, b) = digits.split_at(n);
            (a.to_string(), b.to_string())
        }
        _ => ("0".to_string(), format!("{digits:0>scale$}")),
    };
    format!("{}{int}.{frac}", if neg { "-" } else { "" })
}

/// Parse a decimal literal into a scaled integer, rounding half away from
/// zero. `None` for malformed text and for values that need more than
/// `precision` digits. Work is bounded by `precision`, not by the exponent
/// or the number of digits written.
pub fn parse_decimal(s: &str, precision: u8, scale: i8) -> Option<i128> {
    parse_decimal_rounding(s, precision, scale).map(|(v, _)| v)
}

/// What [`parse_decimal`] makes of `s` when the value must be held
/// exactly: `Ok(None)` for malformed text or too many digits before the
/// point (as [`parse_decimal`]'s `None`), `Err` carrying the rounded value
/// when a non-zero digit lies past `scale` after the point (an
/// unconstrained `numeric` column refuses it, docs/decisions/0003).
pub fn parse_decimal_exact(s: &str, precision: u8, scale: i8) -> Result<Option<i128>, i128> {
    match parse_decimal_rounding(s, precision, scale) {
        None => Ok(None),
        Some((v, true)) => Ok(Some(v)),
        Some((v, false)) => Err(v),
    }
}

/// [`parse_decimal`], and whether the value was exact at `scale` (no
/// non-zero digit dropped).
fn parse_decimal_rounding(s: &str, precision: u8, scale: i8) -> Option<(i128, bool)> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        // `i` is an ASCII letter: both slices are on char boundaries
        Some(i) => {
            let (m, e) = body.split_at_checked(i)?;
            (m, e.get(1..)?.parse::<i32>().ok()?)
        }
        None => (body, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let limit = 10i128.checked_pow(u32::from(precision))?;
    // significant digits, leading zeros dropped
    let lead = int
        .bytes()
        .chain(frac.bytes())
        .take_while(|b| *b == b'0')
        .count();
    let digits: Vec<u8> = int
        .bytes()
        .chain(frac.bytes())
        .skip(lead)
        .map(|b| b.checked_sub(b'0'))
        .collect::<Option<_>>()?;
    if digits.is_empty() {
        return Some((0, true));
    }
    // how many digits the scaled integer has (digits[0] is not zero)
    let point = i64::try_from(int.len())
        .ok()?
        .checked_sub(i64::try_from(lead).ok()?)?
        .checked_add(i64::from(exp))?;
    let want = point.checked_add(i64::from(scale))?;
    if want > i64::from(precision) {
        return None; // at least 10^precision
    }
    if want < 0 {
        // below half a unit of the last place (digits[0] is not zero)
        return Some((0, false));
    }
    let want = usize::try_from(want).ok()?;
    let mut value: i128 = 0;
    for i in 0..want {
        let d = digits.get(i).copied().unwrap_or(0);
        value = value.checked_mul(10)?.checked_add(i128::from(d))?;
    }
    let exact = digits
        .get(want..)
        .is_none_or(|rest| rest.iter().all(|d| *d == 0));
    if digits.get(want).is_some_and(|d| *d >= 5) {
        value = value.checked_add(1)?;
    }
    if value >= limit {
        return None;
    }
    Some((if neg { value.checked_neg()? } else { value }, exact))
}

/// A `numeric` value as PostgreSQL reads it, before it meets a column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NumericText {
    /// `numeric_out`'s text: `-12.340`, no exponent, no leading zeros,
    /// exactly the value's display scale of fraction digits.
    Finite(String),
    NaN,
    Infinity,
    NegInfinity,
}

impl NumericText {
    /// The text PostgreSQL prints for the value.
    pub fn into_text(self) -> String {
        match self {
            NumericText::Finite(t) => t,
            NumericText::NaN => "NaN".into(),
            NumericText::Infinity => "Infinity".into(),
            NumericText::NegInfinity => "-Infinity".into(),
        }
    }
}

/// `NUMERIC_WEIGHT_MAX` in decimal digits: the most integer digits a
/// `numeric` holds.
pub(super) const NUMERIC_MAX_INT_DIGITS: i64 = 131_072;
/// `NUMERIC_DSCALE_MAX`: the most fraction digits a `numeric` holds.
pub(super) const NUMERIC_MAX_SCALE: i64 = 16_383;

/// Read numeric text as PostgreSQL's `numeric_in` does and give it back as
/// `numeric_out` prints it, scale included: `1.50` stays `1.50`, `1.50e1` is
/// `15.0` (display scale `max(0, fraction digits - exponent)`), `-0.0` is
/// `0.0`. 22P02 for text that is not a number, 22003 ("value overflows
/// numeric format") past PostgreSQL's 131072 integer or 16383 fraction
/// digits; the work and the text are bounded by those limits.
pub fn numeric_from_text(s: &str) -> Result<NumericText> {
    let bad = || SqlError::InvalidText(format!("invalid input syntax for type numeric: \"{s}\""));
    let overflow = || SqlError::NumericOutOfRange("value overflows numeric format".into());
    let t = s.trim();
    let specials = [
        ("nan", NumericText::NaN),
        ("infinity", NumericText::Infinity),
        ("+infinity", NumericText::Infinity),
        ("inf", NumericText::Infinity),
        ("+inf", NumericText::Infinity),
        ("-infinity", NumericText::NegInfinity),
        ("-inf", NumericText::NegInfinity),
    ];
    if let Some((_, v)) = specials.iter().find(|(w, _)| t.eq_ignore_ascii_case(w)) {
        return Ok(v.clone());
    }
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        // `i` is an ASCII letter: both slices are on char boundaries
        Some(i) => {
            let (m, e) = body.split_at_checked(i).ok_or_else(bad)?;
            (m, Some(e.get(1..).ok_or_else(bad)?))
        }
        None => (body, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    let exp: i64 = match exp {
        None => 0,
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            // numeric_in refuses exponents from INT_MAX / 2 on
            let magnitude = digits.trim_start_matches('0');
            let value = match magnitude.parse::<i64>() {
                Ok(v) if magnitude.len() <= 10 && v < i64::from(i32::MAX / 2) => v,
                _ if magnitude.is_empty() => 0,
                _ => return Err(overflow()),
            };
            if e.starts_with('-') {
                value.checked_neg().ok_or_else(overflow)?
            } else {
                value
            }
        }
    };
    let digits = int.as_bytes().iter().chain(frac.as_bytes());
    let len = |s: &str| i64::try_from(s.len()).map_err(|_| overflow());
    let scale_digits = len(frac)?.checked_sub(exp).ok_or_else(overflow)?.max(0);
    if scale_digits > NUMERIC_MAX_SCALE {
        return Err(overflow());
    }
    let scale = usize::try_from(scale_digits).map_err(|_| overflow())?;
    // where the point goes in the digits once the exponent is applied
    let point = len(int)?.checked_add(exp).ok_or_else(overflow)?;
    let Some(lead) = digits.clone().position(|d| *d != b'0') else {
        // zero, whatever its exponent
        let mut out = String::from("0");
        if scale > 0 {
            out.push('.');
            out.extend(std::iter::repeat_n('0', scale));
        }
        return Ok(NumericText::Finite(out));
    };
    let lead = i64::try_from(lead).map_err(|_| overflow())?;
    if point.checked_sub(lead).ok_or_else(overflow)? > NUMERIC_MAX_INT_DIGITS {
        return Err(overflow());
    }
    let digits: Vec<u8> = digits.copied().collect();
    // a capacity hint: sign, point, and the digits written
    let int_digits = usize::try_from(point.max(1)).map_err(|_| overflow())?;
    let mut out = String::with_capacity(scale.saturating_add(int_digits).saturating_add(2));
    if neg {
        out.push('-');
    }
    // integer part from the first significant digit, then exactly `scale`
    // fraction digits; positions outside the digits written are zeros
    let digit = |i: i64| {
        usize::try_from(i)
            .ok()
            .and_then(|i| digits.get(i))
            .map_or('0', |d| *d as char)
    };
    if point <= lead {
        out.push('0');
    } else {
        out.extend((lead..point).map(digit));
    }
    if scale > 0 {
        out.push('.');
        let end = point.checked_add(scale_digits).ok_or_else(overflow)?;
        out.extend((point..end).map(digit));
    }
    Ok(NumericText::Finite(out))
}

/// `NUMERIC_MAX_PRECISION + NUMERIC_MAX_RESULT_SCALE`: the most base-10000
/// digits PostgreSQL accepts in a binary numeric.
pub(super) const NUMERIC_MAX_NDIGITS: i16 = 3000;
/// `NUMERIC_MAX_DISPLAY_SCALE`.
pub(super) const NUMERIC_MAX_DSCALE: i16 = 1000;
pub(super) const NUMERIC_POS: u16 = 0x0000;
pub(super) const NUMERIC_NEG: u16 = 0x4000;
pub(super) const NUMERIC_NAN: u16 = 0xC000;
pub(super) const NUMERIC_PINF: u16 = 0xD000;
pub(super) const NUMERIC_NINF: u16 = 0xF000;

// Server-side values only: an i128 has at most 39 digits and |scale| is
// at most 127, so every length, group count and weight here is below 100,
// each group is four ASCII digits (below 10^4), and the casts to i16/i32
// cannot truncate.
#[allow(clippy::arithmetic_side_effects, clippy::cast_possible_truncation)]
pub(super) fn numeric_binary(v: i128, scale: i8, out: &mut BytesMut) {
    // PostgreSQL numeric: ndigits, weight, sign, dscale, then base-10000
    // digits. Built from the decimal digits, so no step can overflow.
    let dscale = usize::from(scale.max(0).unsigned_abs());
    let mut digits = v.unsigned_abs().to_string().into_bytes();
    if v == 0 {
        digits.clear();
    } else if scale < 0 {
        digits.extend(std::iter::repeat_n(b'0', usize::from(scale.unsigned_abs())));
    }
    // integer digits padded on the left and fraction digits padded on the
    // right to whole groups of four
    let (int, frac) = if digits.len() > dscale {
        let (a, b) = digits.split_at(digits.len() - dscale);
        (a.to_vec(), b.to_vec())
    } else {
        let mut f = vec![b'0'; dscale - digits.len()];
        f.extend_from_slice(&digits);
        (Vec::new(), f)
    };
    let mut padded = vec![b'0'; (4 - int.len() % 4) % 4];
    padded.extend_from_slice(&int);
    let int_groups = padded.len() / 4;
    padded.extend_from_slice(&frac);
    padded.resize(padded.len().div_ceil(4) * 4, b'0');
    let mut groups: Vec<i16> = padded
        .chunks(4)
        .map(|c| c.iter().fold(0i16, |acc, d| acc * 10 + i16::from(d - b'0')))
        .collect();
    let mut weight = int_groups as i32 - 1;
    // strip leading and trailing zero groups
    let lead = groups.iter().take_while(|g| **g == 0).count();
    groups.drain(..lead);
    weight -= lead as i32;
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    out.put_i16(groups.len() as i16);
    out.put_i16(weight as i16);
    out.put_u16(if v < 0 { NUMERIC_NEG } else { NUMERIC_POS });
    out.put_i16(dscale as i16);
    for g in groups {
        out.put_i16(g);
    }
}

/// A binary numeric, decoded but not yet converted to a column type.
#[derive(Debug, PartialEq)]
pub(super) enum WireNumeric {
    /// The value's text, `-12.340` style, with `dscale` fraction digits.
    Finite(String),
    NaN,
    Infinity,
    NegInfinity,
}

/// Decode a binary numeric, validating its header as PostgreSQL's
/// `numeric_recv` does before allocating anything sized by it. The text
/// built is bounded: at most 32768 integer groups and 250 fraction groups.
pub(super) fn parse_numeric_binary(b: &[u8]) -> Result<WireNumeric> {
    let bad = |what: &str| SqlError::InvalidBinary(format!("{what} in external \"numeric\" value"));
    let short = || SqlError::InvalidBinary("insufficient data left in message".into());
    let i16_at = |at: usize| {
        b.get(at..)
            .and_then(|s| s.first_chunk::<2>())
            .map(|s| i16::from_be_bytes(*s))
            .ok_or_else(short)
    };
    let nd = i16_at(0)?;
    let weight = i32::from(i16_at(2)?);
    // the sign word is a bit pattern (0xC000 is NaN), not a number
    let sign = i16_at(4)?.cast_unsigned();
    let dscale = i16_at(6)?;
    if !(0..=NUMERIC_MAX_NDIGITS).contains(&nd) {
        return Err(bad("invalid length"));
    }
    let nd = usize::from(nd.unsigned_abs());
    if nd.checked_mul(2).and_then(|n| n.checked_add(8)) != Some(b.len()) {
        return Err(SqlError::InvalidBinary(
            "incorrect binary data format in numeric value".into(),
        ));
    }
    if !matches!(
        sign,
        NUMERIC_POS | NUMERIC_NEG | NUMERIC_NAN | NUMERIC_PINF | NUMERIC_NINF
    ) {
        return Err(bad("invalid sign"));
    }
    if !(0..=NUMERIC_MAX_DSCALE).contains(&dscale) {
        return Err(bad("invalid scale"));
    }
    let dscale = usize::from(dscale.unsigned_abs());
    let mut digits = Vec::with_capacity(nd);
    for pair in b.get(8..).ok_or_else(short)?.chunks_exact(2) {
        let d = i16::from_be_bytes(<[u8; 2]>::try_from(pair).map_err(|_| short())?);
        if !(0..10_000).contains(&d) {
            return Err(bad("invalid digit"));
        }
        digits.push(d);
    }
    match sign {
        NUMERIC_NAN => return Ok(WireNumeric::NaN),
        NUMERIC_PINF => return Ok(WireNumeric::Infinity),
        NUMERIC_NINF => return Ok(WireNumeric::NegInfinity),
        _ => {}
    }
    // digit `i` has weight `weight - i`: integer group k (k >= 0) is
    // digits[weight - k], fraction group k (k >= 1) is digits[weight + k];
    // an index outside the digits is a zero group
    let digit = |i: Option<i32>| -> i16 {
        i.and_then(|i| usize::try_from(i).ok())
            .and_then(|i| digits.get(i).copied())
            .unwrap_or(0)
    };
    let group = |k: i32| digit(weight.checked_sub(k));
    let mut text = String::new();
    if sign == NUMERIC_NEG {
        text.push('-');
    }
    if weight < 0 {
        text.push('0');
    } else {
        text.push_str(&group(weight).to_string());
        for k in (0..weight).rev() {
            text.push_str(&format!("{:04}", group(k)));
        }
    }
    if dscale > 0 {
        text.push('.');
        let mut frac = String::with_capacity(dscale.saturating_add(4));
        // dscale <= NUMERIC_MAX_DSCALE, so the group count fits an i32
        let frac_groups = i32::try_from(dscale.div_ceil(4)).map_err(|_| bad("invalid scale"))?;
        for k in 1..=frac_groups {
            frac.push_str(&format!("{:04}", digit(weight.checked_add(k))));
        }
        frac.truncate(dscale);
        text.push_str(&frac);
    }
    Ok(WireNumeric::Finite(text))
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
pub(super) mod tests {
    use super::*;
    use crate::pgtypes::*;
    use bytes::BytesMut;
    use eddy_common::{ColumnType, Value};

    #[test]
    fn decimals_parse_and_format() {
        assert_eq!(parse_decimal("12.345", 10, 2), Some(1235));
        assert_eq!(parse_decimal("-0.5", 10, 0), Some(-1));
        assert_eq!(parse_decimal("1e3", 10, 1), Some(10_000));
        assert_eq!(parse_decimal("abc", 10, 2), None);
        assert_eq!(parse_decimal("1000", 3, 0), None);
        assert_eq!(format_decimal(-5, 2), "-0.05");
        assert_eq!(format_decimal(12345, 2), "123.45");
    }

    #[test]
    fn numeric_binary_round_trips() {
        for (v, s) in [(12345i128, 2i8), (-1, 3), (0, 0), (100_000_000, 0), (5, 6)] {
            let mut out = BytesMut::new();
            numeric_binary(v, s, &mut out);
            let text = parse_numeric_binary(&out).unwrap();
            assert_eq!(text, WireNumeric::Finite(format_decimal(v, s)), "{v} {s}");
        }
    }

    #[test]
    fn numeric_text_keeps_its_scale() {
        // answers from PostgreSQL 15: SELECT '<input>'::numeric
        let n = |s: &str| match numeric_from_text(s) {
            Ok(v) => v.into_text(),
            Err(e) => e.sqlstate().to_string(),
        };
        for (input, want) in [
            ("12345.6789", "12345.6789"),
            ("1.50", "1.50"),
            (" -001.50 ", "-1.50"),
            ("+.5", "0.5"),
            ("5.", "5"),
            ("1e3", "1000"),
            ("1.50e1", "15.0"),
            ("1.5E+1", "15"),
            ("5e-3", "0.005"),
            ("-0.00", "0.00"),
            ("0", "0"),
            ("NaN", "NaN"),
            ("-inf", "-Infinity"),
            ("Infinity", "Infinity"),
            ("0e5000000", "0"),
            ("1e131072", "22003"),
            ("1e-16384", "22003"),
            ("1e2147483648", "22003"),
            ("1e99999999999", "22003"),
            ("1e", "22P02"),
            ("1.2.3", "22P02"),
            (".", "22P02"),
            ("1_000", "22P02"),
            ("--1", "22P02"),
            ("", "22P02"),
        ] {
            assert_eq!(n(input), want, "{input}");
        }
        assert_eq!(n("1e1000").len(), 1001);
        assert_eq!(n("1e-1001").len(), 1003);
        assert_eq!(n("1e131071").len(), 131_072);
        assert_eq!(n("1e-16383").len(), 16_385);
    }

    /// A binary numeric from its header fields and base-10000 digits.
    pub(in crate::pgtypes) fn numeric(
        nd: i16,
        weight: i16,
        sign: u16,
        dscale: i16,
        digits: &[i16],
    ) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&nd.to_be_bytes());
        b.extend_from_slice(&weight.to_be_bytes());
        b.extend_from_slice(&sign.to_be_bytes());
        b.extend_from_slice(&dscale.to_be_bytes());
        for d in digits {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b
    }

    pub(in crate::pgtypes) fn state(r: Result<Value>) -> &'static str {
        r.unwrap_err().sqlstate()
    }

    const DEC: ColumnType = ColumnType::Decimal(38, 10);

    #[test]
    fn binary_numeric_header_is_validated() {
        // Before: a negative dscale became a huge usize and the fraction
        // loop pushed '0' until the process ran out of memory.
        let neg_scale = numeric(1, 0, 0, -1, &[1]);
        assert_eq!(state(parse_binary(&neg_scale, oid::NUMERIC, DEC)), "22P03");
        let huge_scale = numeric(1, 0, 0, 1001, &[1]);
        assert_eq!(state(parse_binary(&huge_scale, oid::NUMERIC, DEC)), "22P03");
        // negative / absurd digit counts: 8 + 2 * (-1 as usize) overflowed
        for nd in [-1i16, i16::MIN, 3001, i16::MAX] {
            let b = numeric(nd, 0, 0, 0, &[1]);
            assert_eq!(state(parse_binary(&b, oid::NUMERIC, DEC)), "22P03", "{nd}");
        }
        // length must be exactly 8 + 2 * ndigits
        assert_eq!(
            state(parse_binary(&numeric(2, 0, 0, 0, &[1]), oid::NUMERIC, DEC)),
            "22P03"
        );
        assert_eq!(
            state(parse_binary(
                &numeric(1, 0, 0, 0, &[1, 2]),
                oid::NUMERIC,
                DEC
            )),
            "22P03"
        );
        assert_eq!(state(parse_binary(&[0, 0, 0], oid::NUMERIC, DEC)), "22P03");
        // sign and digits
        assert_eq!(
            state(parse_binary(
                &numeric(1, 0, 0x1234, 0, &[1]),
                oid::NUMERIC,
                DEC
            )),
            "22P03"
        );
        for d in [-1i16, 10_000, i16::MAX] {
            let b = numeric(1, 0, 0, 0, &[d]);
            assert_eq!(state(parse_binary(&b, oid::NUMERIC, DEC)), "22P03");
        }
        // extreme weights are bounded work and a clean error or value
        let far = numeric(1, i16::MAX, 0, 1000, &[9999]);
        assert_eq!(state(parse_binary(&far, oid::NUMERIC, DEC)), "22003");
        let tiny = numeric(1, i16::MIN, 0x4000, 1000, &[9999]);
        assert_eq!(
            parse_binary(&tiny, oid::NUMERIC, DEC).unwrap(),
            Value::Decimal(0)
        );
        assert!(matches!(
            parse_binary(&far, oid::NUMERIC, ColumnType::Text).unwrap(),
            Value::Text(t) if t.len() == 4 * 32_768 + 1001
        ));
        // a valid value still decodes: -12.5 = -(12, 5000 x 10^-4), dscale 1
        let v = numeric(2, 0, 0x4000, 1, &[12, 5000]);
        assert_eq!(
            parse_binary(&v, oid::NUMERIC, ColumnType::Decimal(10, 2)).unwrap(),
            Value::Decimal(-1250)
        );
    }

    #[test]
    fn numeric_nan_and_infinity_are_clear_errors_or_floats() {
        for sign in [0xC000u16, 0xD000, 0xF000] {
            let b = numeric(0, 0, sign, 0, &[]);
            assert_eq!(state(parse_binary(&b, oid::NUMERIC, DEC)), "0A000");
            assert_eq!(
                state(parse_binary(&b, oid::NUMERIC, ColumnType::Int)),
                "0A000"
            );
            let Value::Double(f) = parse_binary(&b, oid::NUMERIC, ColumnType::Double).unwrap()
            else {
                panic!("not a double")
            };
            assert!(f.is_nan() || f.is_infinite());
        }
        assert_eq!(state(parse_text("NaN", DEC)), "0A000");
        assert_eq!(state(parse_text("-Infinity", DEC)), "0A000");
    }

    #[test]
    fn numeric_encoding_does_not_overflow() {
        // Before: the fraction padding multiplied a 38-digit value by 1000
        // in u128 and overflowed.
        let max = 10i128.pow(38) - 1;
        for (v, s) in [
            (max, 1i8),
            (-max, 1),
            (max, 37),
            (max, 0),
            (5, -2),
            (-123, -5),
            (1, 38),
            (12_345_678, 4),
        ] {
            let mut out = BytesMut::new();
            numeric_binary(v, s, &mut out);
            let WireNumeric::Finite(text) = parse_numeric_binary(&out).unwrap() else {
                panic!("not finite")
            };
            assert_eq!(text, format_decimal(v, s), "{v} {s}");
        }
        assert_eq!(format_decimal(5, -2), "500");
        // no overflow negating i8::MIN
        assert!(format_decimal(1, i8::MIN).ends_with('0'));
    }

    #[test]
    fn decimal_text_work_is_bounded_by_precision() {
        let start = std::time::Instant::now();
        // Before: "0e999999999" looped a billion times; "1e2147483647"
        // overflowed i32 computing the point.
        assert_eq!(parse_decimal("0e999999999", 38, 10), Some(0));
        assert_eq!(parse_decimal("1e2147483647", 38, 10), None);
        assert_eq!(parse_decimal("1e-2147483648", 38, 10), Some(0));
        assert_eq!(parse_decimal("0.00000000005", 38, 10), Some(1));
        assert_eq!(parse_decimal("0.00000000004", 38, 10), Some(0));
        assert_eq!(parse_decimal("99.995", 4, 2), None);
        assert_eq!(parse_decimal("99.994", 4, 2), Some(9999));
        assert_eq!(parse_decimal("-1.5", 38, 0), Some(-2));
        assert_eq!(parse_decimal("1é", 38, 0), None);
        assert_eq!(parse_decimal("1e5é", 38, 0), None);
        let long = format!("0.{}1", "0".repeat(100_000));
        assert_eq!(parse_decimal(&long, 38, 10), Some(0));
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
    }
}

/// A numeric (its text, as a NUMERIC parameter carries it) as a value of
/// integer column type `ty`, as PostgreSQL's assignment cast computes it
/// (`numeric_int2/4/8`): rounded to the nearest integer, ties away from
/// zero; 22003 beyond the type; NaN and the infinities are 0A000.
pub fn numeric_text_to_integer(
    text: &str,
    ty: eddy_common::ColumnType,
) -> Result<eddy_common::Value> {
    use eddy_common::{ColumnType, Value};
    let name = ty.pg_name();
    let t = match numeric_from_text(text)? {
        NumericText::Finite(t) => t,
        NumericText::NaN => {
            return Err(SqlError::FeatureNotSupported(format!(
                "cannot convert NaN to {name}"
            )))
        }
        NumericText::Infinity | NumericText::NegInfinity => {
            return Err(SqlError::FeatureNotSupported(format!(
                "cannot convert infinity to {name}"
            )))
        }
    };
    let range = || super::integer_out_of_range(ty);
    let (neg, magnitude) = match t.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, t.as_str()),
    };
    let (whole, fraction) = magnitude.split_once('.').unwrap_or((magnitude, ""));
    // more digits than any integer type holds: out of range before parsing
    if whole.len() > 20 {
        return Err(range());
    }
    let mut v: i128 = whole.parse().map_err(|_| range())?;
    if fraction.as_bytes().first().is_some_and(|d| *d >= b'5') {
        v = v.checked_add(1).ok_or_else(range)?;
    }
    if neg {
        v = v.checked_neg().ok_or_else(range)?;
    }
    Ok(match ty {
        ColumnType::SmallInt => Value::SmallInt(i16::try_from(v).map_err(|_| range())?),
        ColumnType::Int => Value::Int(i32::try_from(v).map_err(|_| range())?),
        _ => Value::BigInt(i64::try_from(v).map_err(|_| range())?),
    })
}

#[cfg(test)]
mod integer_tests {
    use super::*;
    use eddy_common::{ColumnType, Value};

    #[test]
    fn numerics_round_into_integers_as_postgresql_assigns_them() {
        let int = |s: &str| numeric_text_to_integer(s, ColumnType::Int);
        assert_eq!(int("2.5").ok(), Some(Value::Int(3)));
        assert_eq!(int("-2.5").ok(), Some(Value::Int(-3)));
        assert_eq!(int("2.49999").ok(), Some(Value::Int(2)));
        assert_eq!(int("-0.4").ok(), Some(Value::Int(0)));
        assert_eq!(int("2147483647.4").ok(), Some(Value::Int(i32::MAX)));
        assert_eq!(
            int("2147483647.5").map_err(|e| e.sqlstate()).err(),
            Some("22003")
        );
        assert_eq!(int("NaN").map_err(|e| e.sqlstate()).err(), Some("0A000"));
        assert_eq!(
            int("-Infinity").map_err(|e| e.sqlstate()).err(),
            Some("0A000")
        );
        assert_eq!(
            numeric_text_to_integer("1e30", ColumnType::BigInt)
                .map_err(|e| e.sqlstate())
                .err(),
            Some("22003")
        );
        assert_eq!(
            numeric_text_to_integer("-32768.4", ColumnType::SmallInt).ok(),
            Some(Value::SmallInt(i16::MIN))
        );
        assert_eq!(
            numeric_text_to_integer("9223372036854775807", ColumnType::BigInt).ok(),
            Some(Value::BigInt(i64::MAX))
        );
    }
}
