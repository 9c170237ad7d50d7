//! Decoding bound parameters and binary wire values: [`parse_param`]
//! dispatches on the parameter's OID and format; [`parse_binary`] reads
//! one binary value into a column type; [`binary_array_to_text`] turns a
//! binary array into its `{...}` literal.
//!
//! Before touching: every byte here comes from a client. Lengths and
//! counts are checked against the bytes actually present (22P03 or 08P01),
//! never trusted for indexing or allocation.

#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use super::*;

use eddy_common::{ColumnType, Interval, Value};

use crate::error::{Result, SqlError};

/// Decode one bound parameter of PostgreSQL type `oid` sent in text or
/// binary format. NUMERIC parameters become their exact text (a
/// [`Value::Decimal`] has no scale of its own): converted to the column
/// they meet, they round once, to that column's scale; other types decode
/// to the [`Value`] of their column type; unknown types stay text
/// (binary arrays as their `{...}` literal).
pub fn parse_param(raw: &[u8], oid: u32, binary: bool) -> Result<Value> {
    if oid == oid::NUMERIC {
        let n = if binary {
            match parse_numeric_binary(raw)? {
                WireNumeric::Finite(text) => numeric_from_text(&text)?,
                WireNumeric::NaN => NumericText::NaN,
                WireNumeric::Infinity => NumericText::Infinity,
                WireNumeric::NegInfinity => NumericText::NegInfinity,
            }
        } else {
            numeric_from_text(utf8_param(raw)?)?
        };
        return Ok(Value::Text(n.into_text()));
    }
    match (column_type_for_oid(oid), binary) {
        (Some(ty), false) => parse_text(utf8_param(raw)?, ty),
        (Some(ty), true) => parse_binary(raw, oid, ty),
        (None, false) => Ok(Value::Text(utf8_param(raw)?.to_string())),
        (None, true) => Ok(Value::Text(binary_array_to_text(raw)?)),
    }
}

/// [`parse_param`] in a session whose TimeZone is `zone`: a `timestamptz`
/// (or `timestamptz[]`) sent as text without an offset is a wall-clock
/// time there. Binary values are instants already.
pub fn parse_param_in(
    raw: &[u8],
    oid: u32,
    binary: bool,
    zone: &crate::session_zone::SessionZone,
) -> Result<Value> {
    match column_type_for_oid(oid) {
        Some(ty @ (ColumnType::TimestampTz | ColumnType::Array(_)))
            if !binary && !zone.is_utc() =>
        {
            parse_text_in(utf8_param(raw)?, ty, zone)
        }
        _ => parse_param(raw, oid, binary),
    }
}

pub(super) fn utf8_param(raw: &[u8]) -> Result<&str> {
    std::str::from_utf8(raw).map_err(|_| SqlError::InvalidEncoding(" in a parameter".into()))
}

/// Decode a binary-format value sent as PostgreSQL type `wire_oid`, then
/// convert it to the column type `ty`. Every length, header field and
/// range is checked before use: any byte string gives a value or an error.
pub fn parse_binary(b: &[u8], wire_oid: u32, ty: ColumnType) -> Result<Value> {
    let bad = || {
        SqlError::InvalidBinary(format!(
            "incorrect binary data format for a value of type oid {wire_oid}"
        ))
    };
    fn fixed<const N: usize>(b: &[u8], bad: impl Fn() -> SqlError) -> Result<[u8; N]> {
        b.try_into().map_err(|_| bad())
    }
    // an array (binary COPY into an array column): array_recv's layout,
    // checked by `binary_array_to_text`, then read by the element rules
    if let ColumnType::Array(_) = ty {
        return parse_text(&binary_array_to_text(b)?, ty);
    }
    let v = match wire_oid {
        oid::BOOL => Value::Boolean(fixed::<1>(b, bad)?[0] != 0),
        oid::INT2 => Value::SmallInt(i16::from_be_bytes(fixed(b, bad)?)),
        oid::INT4 => Value::Int(i32::from_be_bytes(fixed(b, bad)?)),
        oid::OID => Value::BigInt(i64::from(u32::from_be_bytes(fixed(b, bad)?))),
        oid::INT8 => Value::BigInt(i64::from_be_bytes(fixed(b, bad)?)),
        oid::FLOAT4 => Value::Real(f32::from_be_bytes(fixed(b, bad)?)),
        oid::FLOAT8 => Value::Double(f64::from_be_bytes(fixed(b, bad)?)),
        oid::DATE => Value::Date(date_from_binary(i32::from_be_bytes(fixed(b, bad)?))?),
        // timestamptz and timestamp convert through the session time
        // zone, which is UTC: the same microseconds
        oid::TIMESTAMP | oid::TIMESTAMPTZ => {
            Value::Timestamp(timestamp_from_binary(i64::from_be_bytes(fixed(b, bad)?))?)
        }
        oid::BYTEA => Value::Bytea(b.to_vec()),
        oid::UUID => Value::Uuid(fixed(b, bad)?),
        oid::TIME => {
            let t = i64::from_be_bytes(fixed(b, bad)?);
            if !(0..=MAX_TIME_MICROS).contains(&t) {
                return Err(SqlError::DatetimeOverflow("time out of range".into()));
            }
            Value::Time(t)
        }
        oid::INTERVAL => {
            let raw: [u8; 16] = fixed(b, bad)?;
            let (m, rest) = raw.split_at(8);
            let (d, mo) = rest.split_at(4);
            let micros = i64::from_be_bytes(m.try_into().map_err(|_| bad())?);
            if micros.unsigned_abs() > eddy_common::interval::MAX_INTERVAL_MICROS.unsigned_abs() {
                return Err(SqlError::DatetimeOverflow("interval out of range".into()));
            }
            Value::Interval(Interval {
                micros,
                days: i32::from_be_bytes(d.try_into().map_err(|_| bad())?),
                months: i32::from_be_bytes(mo.try_into().map_err(|_| bad())?),
            })
        }
        // jsonb's binary form: version 1, then the text
        oid::JSONB => {
            let text = match b.split_first() {
                Some((1, text)) => text,
                Some((v, _)) => {
                    return Err(SqlError::InvalidBinary(format!(
                        "unsupported jsonb version number {v}"
                    )))
                }
                None => return Err(bad()),
            };
            let s = std::str::from_utf8(text)
                .map_err(|_| SqlError::InvalidEncoding(" in a parameter".into()))?;
            return parse_text(s, ty);
        }
        oid::NUMERIC => {
            let special = match parse_numeric_binary(b)? {
                WireNumeric::Finite(text) => return parse_text(&text, ty),
                WireNumeric::NaN => "NaN",
                WireNumeric::Infinity => "Infinity",
                WireNumeric::NegInfinity => "-Infinity",
            };
            // floats and text hold these; decimals and integers cannot
            return match ty {
                ColumnType::Real | ColumnType::Double | ColumnType::Text => parse_text(special, ty),
                _ => Err(unstorable_numeric(special, ty)),
            };
        }
        // text-like and unknown types: the bytes are the text form
        _ => {
            let s = std::str::from_utf8(b)
                .map_err(|_| SqlError::InvalidEncoding(" in a parameter".into()))?;
            return parse_text(s, ty);
        }
    };
    coerce_value(v, ty)
}

/// PostgreSQL's `MAXDIM`.
pub(super) const MAX_ARRAY_DIMS: i32 = 6;

/// Reads big-endian fields off client bytes; running short is an error.
pub(super) struct WireReader<'a> {
    b: &'a [u8],
}

impl<'a> WireReader<'a> {
    fn short() -> SqlError {
        SqlError::InvalidBinary("insufficient data left in message".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.b.len() {
            return Err(Self::short());
        }
        let (head, tail) = self.b.split_at(n);
        self.b = tail;
        Ok(head)
    }

    fn i32(&mut self) -> Result<i32> {
        let s = <[u8; 4]>::try_from(self.take(4)?).map_err(|_| Self::short())?;
        Ok(i32::from_be_bytes(s))
    }

    fn remaining(&self) -> usize {
        self.b.len()
    }
}

/// A binary-format one-dimensional array parameter as its text literal
/// `{"a","b",NULL}`. The header (dimensions, flags, element count) is
/// checked against the bytes actually present before anything is
/// allocated, and the elements must use up the value exactly.
pub fn binary_array_to_text(b: &[u8]) -> Result<String> {
    let mut r = WireReader { b };
    let ndim = r.i32()?;
    let flags = r.i32()?;
    let elem_oid = u32::from_be_bytes(r.i32()?.to_be_bytes());
    if !(0..=MAX_ARRAY_DIMS).contains(&ndim) {
        return Err(SqlError::InvalidBinary(format!(
            "invalid number of dimensions: {ndim}"
        )));
    }
    if flags != 0 && flags != 1 {
        return Err(SqlError::InvalidBinary("invalid array flags".into()));
    }
    let mut count: usize = 1;
    for _ in 0..ndim {
        let len = r.i32()?;
        let lower = r.i32()?;
        let len = usize::try_from(len)
            .map_err(|_| SqlError::InvalidBinary(format!("invalid array dimension {len}")))?;
        if lower
            .checked_add(i32::try_from(len).unwrap_or(i32::MAX))
            .is_none()
        {
            return Err(SqlError::InvalidBinary(
                "array lower bound is too large".into(),
            ));
        }
        if lower != 1 && len > 0 {
            return Err(SqlError::FeatureNotSupported(format!(
                "arrays with a lower bound other than 1 are not supported (lower bound {lower})"
            )));
        }
        count = count.saturating_mul(len);
    }
    if ndim == 0 {
        count = 0;
    }
    // every element takes at least its 4-byte length: a count the bytes
    // cannot back is refused before it sizes anything
    if count > r.remaining() / 4 {
        return Err(WireReader::short());
    }
    if ndim > 1 {
        return Err(SqlError::FeatureNotSupported(
            "only one-dimensional array parameters are supported".into(),
        ));
    }
    let ty = column_type_for_oid(elem_oid).unwrap_or(ColumnType::Text);
    let mut out = String::from("{");
    for i in 0..count {
        if i > 0 {
            out.push(',');
        }
        let len = r.i32()?;
        if len == -1 {
            out.push_str("NULL");
            continue;
        }
        let len = usize::try_from(len).map_err(|_| WireReader::short())?;
        let raw = r.take(len)?;
        // numeric elements keep their own scale
        let v = if elem_oid == oid::NUMERIC {
            parse_param(raw, elem_oid, true)?
        } else {
            parse_binary(raw, elem_oid, ty)?
        };
        let t = value_text(&v, None);
        out.push('"');
        for c in t.chars() {
            if c == '\\' || c == '"' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    }
    if r.remaining() != 0 {
        return Err(SqlError::InvalidBinary(
            "incorrect binary data format in array value".into(),
        ));
    }
    out.push('}');
    Ok(out)
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
    use crate::pgtypes::numeric::tests::{numeric, state};
    use bytes::{BufMut, BytesMut};
    use eddy_common::{ColumnType, Value};

    #[test]
    fn intervals_and_json_decode_with_checked_lengths() {
        let iv = Interval {
            months: 14,
            days: 3,
            micros: 14_706_000_000,
        };
        let mut b = BytesMut::new();
        b.put_i64(iv.micros);
        b.put_i32(iv.days);
        b.put_i32(iv.months);
        assert_eq!(
            parse_param(&b, oid::INTERVAL, true).unwrap(),
            Value::Interval(iv)
        );
        assert_eq!(
            value_text(&Value::Interval(iv), None),
            "1 year 2 mons 3 days 04:05:06"
        );
        for bad in [&b[..15], &[0u8; 17][..], &[][..]] {
            assert_eq!(
                parse_param(bad, oid::INTERVAL, true)
                    .unwrap_err()
                    .sqlstate(),
                "22P03"
            );
        }
        let mut huge = BytesMut::new();
        huge.put_i64(i64::MAX);
        huge.put_i64(0);
        assert_eq!(
            parse_param(&huge, oid::INTERVAL, true)
                .unwrap_err()
                .sqlstate(),
            "22008"
        );
        assert_eq!(
            parse_text("1 fortnight", ColumnType::Interval)
                .unwrap_err()
                .sqlstate(),
            "22007"
        );
        // jsonb binary: version 1 then text; anything else refused
        assert_eq!(
            parse_param(b"\x01{\"b\":1,\"a\":2}", oid::JSONB, true).unwrap(),
            Value::Text(r#"{"a": 2, "b": 1}"#.into())
        );
        assert_eq!(
            parse_param(b"\x02{}", oid::JSONB, true)
                .unwrap_err()
                .sqlstate(),
            "22P03"
        );
        assert_eq!(
            parse_param(b"", oid::JSONB, true).unwrap_err().sqlstate(),
            "22P03"
        );
        assert_eq!(
            parse_param(b"{", oid::JSON, false).unwrap_err().sqlstate(),
            "22P02"
        );
        assert_eq!(
            coerce_value(Value::Text("[1,2]".into()), ColumnType::Jsonb).unwrap(),
            Value::Text("[1, 2]".into())
        );
    }

    #[test]
    fn numeric_parameters_keep_their_scale_until_they_meet_a_column() {
        // Before: parsed at scale 10, so 12345.6789 went into a
        // NUMERIC(18,4) column as 12345678900.0000.
        let text = parse_param(b"12345.6789", oid::NUMERIC, false).unwrap();
        assert_eq!(text, Value::Text("12345.6789".into()));
        let mut bin = BytesMut::new();
        numeric_binary(150, 2, &mut bin);
        let v = parse_param(&bin, oid::NUMERIC, true).unwrap();
        assert_eq!(v, Value::Text("1.50".into()));
        assert_eq!(
            coerce_value(text, ColumnType::Decimal(18, 4)).unwrap(),
            Value::Decimal(123_456_789)
        );
        assert_eq!(
            coerce_value(v, ColumnType::Decimal(10, 2)).unwrap(),
            Value::Decimal(150)
        );
        // rounding half away from zero, then 22003 past the precision
        let dec = |s: &str| {
            coerce_value(
                parse_param(s.as_bytes(), oid::NUMERIC, false).unwrap(),
                ColumnType::Decimal(10, 2),
            )
        };
        assert_eq!(dec("1.005").unwrap(), Value::Decimal(101));
        assert_eq!(dec("-1.005").unwrap(), Value::Decimal(-101));
        assert_eq!(dec("1.004").unwrap(), Value::Decimal(100));
        assert_eq!(dec("123456789.12").unwrap_err().sqlstate(), "22003");
        assert_eq!(dec("99999999.995").unwrap_err().sqlstate(), "22003");
        assert_eq!(dec("NaN").unwrap_err().sqlstate(), "0A000");
        // a negative zero from the wire prints as PostgreSQL's zero
        let neg_zero = numeric(1, 0, 0x4000, 2, &[0]);
        assert_eq!(
            parse_param(&neg_zero, oid::NUMERIC, true).unwrap(),
            Value::Text("0.00".into())
        );
        assert_eq!(state(parse_param(b"abc", oid::NUMERIC, false)), "22P02");
        assert_eq!(parse_param(b"7", oid::INT4, false).unwrap(), Value::Int(7));
        assert_eq!(
            parse_param(b"x", 0, false).unwrap(),
            Value::Text("x".into())
        );
    }

    #[test]
    fn binary_array_header_is_validated() {
        fn array(ndim: i32, flags: i32, elem: u32, dims: &[(i32, i32)], rest: &[u8]) -> Vec<u8> {
            let mut b = Vec::new();
            b.extend_from_slice(&ndim.to_be_bytes());
            b.extend_from_slice(&flags.to_be_bytes());
            b.extend_from_slice(&elem.to_be_bytes());
            for (len, lower) in dims {
                b.extend_from_slice(&len.to_be_bytes());
                b.extend_from_slice(&lower.to_be_bytes());
            }
            b.extend_from_slice(rest);
            b
        }
        let st = |b: &[u8]| binary_array_to_text(b).unwrap_err().sqlstate();
        // Before: Vec::with_capacity(2^31 - 1) of Strings aborted the process.
        let huge = array(1, 0, oid::INT4, &[(i32::MAX, 1)], &[0, 0, 0, 4, 0, 0, 0, 1]);
        assert_eq!(st(&huge), "22P03");
        assert_eq!(st(&array(1, 0, oid::INT4, &[(-1, 1)], &[])), "22P03");
        assert_eq!(st(&array(-1, 0, oid::INT4, &[], &[])), "22P03");
        assert_eq!(st(&array(7, 0, oid::INT4, &[], &[])), "22P03");
        assert_eq!(st(&array(0, 2, oid::INT4, &[], &[])), "22P03");
        assert_eq!(
            st(&array(1, 0, oid::INT4, &[(1, i32::MAX)], &[0; 8])),
            "22P03"
        );
        // element lengths below -1, or past the end
        let minus2 = array(1, 0, oid::INT4, &[(1, 1)], &(-2i32).to_be_bytes());
        assert_eq!(st(&minus2), "22P03");
        let past = array(1, 0, oid::INT4, &[(1, 1)], &[0x7f, 0xff, 0xff, 0xff, 1]);
        assert_eq!(st(&past), "22P03");
        // every truncation of a valid value is an error, never a panic
        let full = array(
            1,
            1,
            oid::TEXT,
            &[(2, 1)],
            &[0, 0, 0, 2, b'h', b'i', 0xff, 0xff, 0xff, 0xff],
        );
        assert!(binary_array_to_text(&full).is_ok());
        for cut in 0..full.len() {
            assert!(binary_array_to_text(&full[..cut]).is_err(), "{cut}");
        }
        // a lower bound other than 1 is refused, not shifted to 1
        let one = [0, 0, 0, 4, 0, 0, 0, 7];
        assert_eq!(st(&array(1, 0, oid::INT4, &[(1, 0)], &one)), "0A000");
        assert_eq!(st(&array(1, 0, oid::INT4, &[(1, -5)], &one)), "0A000");
        assert_eq!(
            binary_array_to_text(&array(1, 0, oid::INT4, &[(1, 1)], &one)).unwrap(),
            r#"{"7"}"#
        );
        // trailing bytes
        assert_eq!(st(&array(0, 0, oid::INT4, &[], &[0])), "22P03");
        // truncated header
        assert_eq!(st(&[0, 0, 0, 1, 0, 0]), "22P03");
        // valid multi-dimensional arrays are a clean "not supported"
        let two = array(
            2,
            0,
            oid::INT4,
            &[(1, 1), (1, 1)],
            &[0, 0, 0, 4, 0, 0, 0, 7],
        );
        assert_eq!(st(&two), "0A000");
        // and well-formed arrays still decode
        let mut elems = Vec::new();
        for e in [Some(1i32), None, Some(-3)] {
            match e {
                Some(v) => {
                    elems.extend_from_slice(&4i32.to_be_bytes());
                    elems.extend_from_slice(&v.to_be_bytes());
                }
                None => elems.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        let ok = array(1, 1, oid::INT4, &[(3, 1)], &elems);
        assert_eq!(binary_array_to_text(&ok).unwrap(), r#"{"1",NULL,"-3"}"#);
        assert_eq!(
            binary_array_to_text(&array(0, 0, oid::INT4, &[], &[])).unwrap(),
            "{}"
        );
        let text = array(1, 0, oid::TEXT, &[(1, 1)], &[0, 0, 0, 3, b'a', b'"', b'\\']);
        assert_eq!(binary_array_to_text(&text).unwrap(), r#"{"a\"\\"}"#);
        // numeric elements print with their scale, not as scaled integers
        let n = numeric(1, 0, 0, 1, &[7]);
        let mut el = (n.len() as i32).to_be_bytes().to_vec();
        el.extend_from_slice(&n);
        let arr = array(1, 0, oid::NUMERIC, &[(1, 1)], &el);
        assert_eq!(binary_array_to_text(&arr).unwrap(), r#"{"7.0"}"#);
    }
}
