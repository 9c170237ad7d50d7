//! Byte encodings of keys and rows.
//!
//! * **Keys** use a memcomparable encoding: comparing two encoded keys as byte
//!   strings gives the same order as comparing the values column by column,
//!   and no encoded key is a proper prefix of another (every column is
//!   self-delimiting). Row tablets sort by these bytes; shards are picked by
//!   hashing them.
//! * **Rows** use a compact tagged encoding that is not ordered. A row
//!   written before `ALTER TABLE ADD COLUMN` decodes with NULLs padded at the
//!   end, so files and WAL records never need rewriting on a schema change.

use eddy_common::{ColumnType, Row, Value};

use crate::error::{Result, StorageError};

/// A memcomparable primary key (or internal row id) of one row.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(pub Vec<u8>);

impl Key {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

const KEY_NULL: u8 = 0x00;
const KEY_VALUE: u8 = 0x01;
const KEY_ROWID: u8 = 0x02;

/// Appends the memcomparable encoding of `v` to `out`.
pub fn encode_key_value(v: &Value, out: &mut Vec<u8>) {
    if v.is_null() {
        out.push(KEY_NULL);
        return;
    }
    out.push(KEY_VALUE);
    match v {
        Value::Null => {}
        Value::Boolean(b) => out.push(*b as u8),
        Value::SmallInt(i) => out.extend_from_slice(&((*i as u16) ^ 0x8000).to_be_bytes()),
        Value::Int(i) | Value::Date(i) => {
            out.extend_from_slice(&((*i as u32) ^ 0x8000_0000).to_be_bytes())
        }
        Value::BigInt(i) | Value::Timestamp(i) | Value::Time(i) => {
            out.extend_from_slice(&((*i as u64) ^ (1 << 63)).to_be_bytes())
        }
        Value::Decimal(i) => out.extend_from_slice(&((*i as u128) ^ (1 << 127)).to_be_bytes()),
        Value::Real(f) => {
            let bits = f.to_bits();
            let ordered = if bits >> 31 == 1 {
                !bits
            } else {
                bits | (1 << 31)
            };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        Value::Double(f) => {
            let bits = f.to_bits();
            let ordered = if bits >> 63 == 1 {
                !bits
            } else {
                bits | (1 << 63)
            };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        Value::Text(s) => encode_key_bytes(s.as_bytes(), out),
        Value::Bytea(b) => encode_key_bytes(b, out),
        // fixed width: already memcomparable and self-delimiting
        Value::Uuid(u) => out.extend_from_slice(u),
        // not a key type (`key_type_allowed`); equal values, equal bytes
        Value::Interval(iv) => {
            out.extend_from_slice(&((iv.months as u32) ^ 0x8000_0000).to_be_bytes());
            out.extend_from_slice(&((iv.days as u32) ^ 0x8000_0000).to_be_bytes());
            out.extend_from_slice(&((iv.micros as u64) ^ (1 << 63)).to_be_bytes());
        }
        // not a key type either (`key_type_allowed`): equal arrays give
        // equal bytes, which is all a non-key use needs
        Value::Array(items) => {
            let mut row = Vec::new();
            encode_row(items, &mut row);
            encode_key_bytes(&row, out);
        }
    }
}

/// Escapes 0x00 as 0x00 0xFF and terminates with 0x00 0x01, which keeps byte
/// order and makes the encoding self-delimiting.
fn encode_key_bytes(b: &[u8], out: &mut Vec<u8>) {
    for &c in b {
        out.push(c);
        if c == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// Encodes the given key columns of a row.
pub fn encode_key(values: &[&Value]) -> Key {
    let mut out = Vec::with_capacity(16);
    for v in values {
        encode_key_value(v, &mut out);
    }
    Key(out)
}

/// The key of a row in a table without a primary key.
pub fn rowid_key(rowid: u64) -> Key {
    let mut out = Vec::with_capacity(9);
    out.push(KEY_ROWID);
    out.extend_from_slice(&rowid.to_be_bytes());
    Key(out)
}

/// A stable 64-bit hash (FNV-1a) used for shard routing and bloom filters;
/// it must never change, because it decides where rows live on disk.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // final avalanche (splitmix64) so that nearby keys spread over shards
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

// ---- rows ----

const TAG_NULL: u8 = 0;
const TAG_FALSE: u8 = 1;
const TAG_TRUE: u8 = 2;
const TAG_I16: u8 = 3;
const TAG_I32: u8 = 4;
const TAG_I64: u8 = 5;
const TAG_F32: u8 = 6;
const TAG_F64: u8 = 7;
const TAG_DEC: u8 = 8;
const TAG_TEXT: u8 = 9;
const TAG_DATE: u8 = 10;
const TAG_TS: u8 = 11;
const TAG_BYTES: u8 = 12;
const TAG_UUID: u8 = 13;
const TAG_INTERVAL: u8 = 14;
const TAG_TIME: u8 = 15;
const TAG_ARRAY: u8 = 16;

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads bytes from an encoded buffer, failing (not panicking) on truncation.
pub struct Reader<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

#[derive(Debug)]
pub struct Truncated;

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        let end = self.pos.checked_add(n).ok_or(Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(Truncated)?;
        self.pos = end;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, Truncated> {
        Ok(self.bytes(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32, Truncated> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> Result<u64, Truncated> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    pub fn varint(&mut self) -> Result<u64, Truncated> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.u8()?;
            if shift > 63 {
                return Err(Truncated);
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
            shift += 7;
        }
    }
    pub fn len_prefixed(&mut self) -> Result<&'a [u8], Truncated> {
        let n = self.varint()? as usize;
        self.bytes(n)
    }
}

pub fn encode_row(row: &[Value], out: &mut Vec<u8>) {
    put_varint(out, row.len() as u64);
    for v in row {
        encode_value(v, out);
    }
}

/// Appends one tagged value (the row encoding of one column).
fn encode_value(v: &Value, out: &mut Vec<u8>) {
    {
        match v {
            Value::Null => out.push(TAG_NULL),
            Value::Boolean(false) => out.push(TAG_FALSE),
            Value::Boolean(true) => out.push(TAG_TRUE),
            Value::SmallInt(i) => {
                out.push(TAG_I16);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Int(i) => {
                out.push(TAG_I32);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::BigInt(i) => {
                out.push(TAG_I64);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Real(f) => {
                out.push(TAG_F32);
                out.extend_from_slice(&f.to_le_bytes());
            }
            Value::Double(f) => {
                out.push(TAG_F64);
                out.extend_from_slice(&f.to_le_bytes());
            }
            Value::Decimal(i) => {
                out.push(TAG_DEC);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Text(s) => {
                out.push(TAG_TEXT);
                put_varint(out, s.len() as u64);
                out.extend_from_slice(s.as_bytes());
            }
            Value::Date(d) => {
                out.push(TAG_DATE);
                out.extend_from_slice(&d.to_le_bytes());
            }
            Value::Timestamp(t) => {
                out.push(TAG_TS);
                out.extend_from_slice(&t.to_le_bytes());
            }
            Value::Bytea(b) => {
                out.push(TAG_BYTES);
                put_varint(out, b.len() as u64);
                out.extend_from_slice(b);
            }
            Value::Uuid(u) => {
                out.push(TAG_UUID);
                out.extend_from_slice(u);
            }
            Value::Time(t) => {
                out.push(TAG_TIME);
                out.extend_from_slice(&t.to_le_bytes());
            }
            Value::Interval(iv) => {
                out.push(TAG_INTERVAL);
                out.extend_from_slice(&iv.months.to_le_bytes());
                out.extend_from_slice(&iv.days.to_le_bytes());
                out.extend_from_slice(&iv.micros.to_le_bytes());
            }
            // element count, then each element as a tagged value
            Value::Array(items) => {
                out.push(TAG_ARRAY);
                put_varint(out, items.len() as u64);
                for item in items {
                    encode_value(item, out);
                }
            }
        }
    }
}

/// Decodes a row, padding with NULLs up to `width` columns.
pub fn decode_row(r: &mut Reader<'_>, width: usize) -> Result<Row, Truncated> {
    let n = r.varint()? as usize;
    if n > r.buf.len() {
        return Err(Truncated);
    }
    let mut row = Vec::with_capacity(n.max(width));
    for _ in 0..n {
        row.push(decode_value(r, true)?);
    }
    while row.len() < width {
        row.push(Value::Null);
    }
    Ok(row)
}

/// Decodes one tagged value; an array only where `array_ok` (arrays hold
/// no arrays).
fn decode_value(r: &mut Reader<'_>, array_ok: bool) -> Result<Value, Truncated> {
    let tag = r.u8()?;
    {
        let v = match tag {
            TAG_NULL => Value::Null,
            TAG_FALSE => Value::Boolean(false),
            TAG_TRUE => Value::Boolean(true),
            TAG_I16 => {
                let b = r.bytes(2)?;
                Value::SmallInt(i16::from_le_bytes([b[0], b[1]]))
            }
            TAG_I32 => Value::Int(r.u32()? as i32),
            TAG_I64 => Value::BigInt(r.u64()? as i64),
            TAG_F32 => Value::Real(f32::from_bits(r.u32()?)),
            TAG_F64 => Value::Double(f64::from_bits(r.u64()?)),
            TAG_DEC => {
                let b = r.bytes(16)?;
                let mut a = [0u8; 16];
                a.copy_from_slice(b);
                Value::Decimal(i128::from_le_bytes(a))
            }
            TAG_TEXT => {
                let b = r.len_prefixed()?;
                Value::Text(String::from_utf8(b.to_vec()).map_err(|_| Truncated)?)
            }
            TAG_DATE => Value::Date(r.u32()? as i32),
            TAG_TS => Value::Timestamp(r.u64()? as i64),
            TAG_BYTES => Value::Bytea(r.len_prefixed()?.to_vec()),
            TAG_UUID => {
                let mut a = [0u8; eddy_common::UUID_LEN];
                a.copy_from_slice(r.bytes(eddy_common::UUID_LEN)?);
                Value::Uuid(a)
            }
            TAG_TIME => Value::Time(r.u64()? as i64),
            TAG_INTERVAL => Value::Interval(eddy_common::Interval {
                months: r.u32()? as i32,
                days: r.u32()? as i32,
                micros: r.u64()? as i64,
            }),
            TAG_ARRAY if array_ok => {
                let n = r.varint()? as usize;
                // every element takes at least its tag byte
                if n > r.buf.len() {
                    return Err(Truncated);
                }
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(decode_value(r, false)?);
                }
                Value::Array(items)
            }
            _ => return Err(Truncated),
        };
        Ok(v)
    }
}

/// Decodes a full row buffer, naming `what` in the corruption error.
pub fn decode_row_bytes(bytes: &[u8], width: usize, what: &str) -> Result<Row> {
    decode_row(&mut Reader::new(bytes), width)
        .map_err(|_| StorageError::corrupt(what, "undecodable row"))
}

/// Checks a row against column types, nullability and arity.
pub fn check_row(def: &eddy_common::TableDef, row: &[Value]) -> Result<()> {
    if row.len() != def.columns.len() {
        return Err(StorageError::WrongArity {
            table: def.name.clone(),
            expected: def.columns.len(),
            got: row.len(),
        });
    }
    for (c, v) in def.columns.iter().zip(row) {
        if v.is_null() {
            if !c.nullable {
                return Err(StorageError::NotNull {
                    table: def.name.clone(),
                    column: c.name.clone(),
                    row: Some(
                        row.iter()
                            .cloned()
                            .zip(def.columns.iter().map(|c| c.ty))
                            .collect(),
                    ),
                });
            }
        } else if !v.fits(c.ty) {
            return Err(StorageError::WrongType {
                table: def.name.clone(),
                column: c.name.clone(),
                expected: c.ty.pg_name(),
                got: format!("{v:?}"),
            });
        } else {
            // what `fits` does not see (an interval past Arrow's range):
            // refused here, before the WAL, not when the row is sealed
            crate::arrow_values::check_value(v, c.ty)
                .map_err(|e| StorageError::conversion(format!("column \"{}\"", c.name), e))?;
        }
    }
    Ok(())
}

/// A short human-readable rendering of key values for error messages.
pub fn describe_values(def: &eddy_common::TableDef, row: &[Value]) -> String {
    describe_columns(def, &def.primary_key, row)
}

/// `a, b)=(1, x` for columns `cols` of `row` (inside PostgreSQL's
/// `Key (...)=(...)`).
pub fn describe_columns(def: &eddy_common::TableDef, cols: &[usize], row: &[Value]) -> String {
    let names: Vec<&str> = cols
        .iter()
        .filter_map(|&i| def.columns.get(i).map(|c| c.name.as_str()))
        .collect();
    let vals: Vec<String> = cols
        .iter()
        .map(|&i| match row.get(i) {
            Some(Value::Text(s)) => s.clone(),
            Some(Value::Null) | None => "NULL".into(),
            Some(Value::Boolean(b)) => b.to_string(),
            Some(Value::SmallInt(v)) => v.to_string(),
            Some(Value::Int(v)) | Some(Value::Date(v)) => v.to_string(),
            Some(Value::BigInt(v)) | Some(Value::Timestamp(v)) | Some(Value::Time(v)) => {
                v.to_string()
            }
            Some(Value::Decimal(v)) => v.to_string(),
            Some(Value::Real(v)) => v.to_string(),
            Some(Value::Double(v)) => v.to_string(),
            Some(Value::Bytea(b)) => format!("\\x{}", hex(b)),
            Some(Value::Uuid(u)) => eddy_common::format_uuid(u),
            Some(Value::Interval(iv)) => eddy_common::format_interval(*iv),
            Some(Value::Array(items)) => format!("{{{} elements}}", items.len()),
        })
        .collect();
    format!("{})=({}", names.join(", "), vals.join(", "))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Whether a column type may be part of a primary key.
pub fn key_type_allowed(ty: ColumnType) -> bool {
    !matches!(
        ty,
        ColumnType::Real | ColumnType::Double | ColumnType::Interval | ColumnType::Array(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Boolean),
            any::<i16>().prop_map(Value::SmallInt),
            any::<i32>().prop_map(Value::Int),
            any::<i64>().prop_map(Value::BigInt),
            any::<i64>().prop_map(|v| Value::Decimal(v as i128 * 1000)),
            ".{0,12}".prop_map(Value::Text),
            proptest::collection::vec(any::<u8>(), 0..12).prop_map(Value::Bytea),
            any::<[u8; 16]>().prop_map(Value::Uuid),
            (0i64..=86_400_000_000).prop_map(Value::Time),
            (any::<i32>(), any::<i32>(), any::<i64>()).prop_map(|(months, days, micros)| {
                Value::Interval(eddy_common::Interval {
                    months,
                    days,
                    micros,
                })
            }),
            any::<f64>()
                .prop_filter("nan", |f| !f.is_nan())
                .prop_map(Value::Double),
        ]
    }

    #[test]
    fn arrays_round_trip_and_nest_no_deeper() {
        let row = vec![
            Value::Array(vec![Value::Int(1), Value::Null, Value::Int(-3)]),
            Value::Array(vec![]),
            Value::Array(vec![Value::Text("a\"b".into()), Value::Null]),
            Value::Null,
        ];
        let mut buf = Vec::new();
        encode_row(&row, &mut buf);
        assert_eq!(decode_row(&mut Reader::new(&buf), 4).unwrap(), row);
        // an array inside an array is corruption, not a value
        let mut nested = Vec::new();
        encode_row(&[Value::Array(vec![Value::Array(vec![])])], &mut nested);
        assert!(decode_row(&mut Reader::new(&nested), 1).is_err());
        // a huge element count with no bytes behind it
        let bogus = [1u8, TAG_ARRAY, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(decode_row(&mut Reader::new(&bogus), 1).is_err());
        for cut in 0..buf.len() {
            let _ = decode_row(&mut Reader::new(&buf[..cut]), 4);
        }
    }

    proptest! {
        #[test]
        fn rows_round_trip(row in proptest::collection::vec(arb_value(), 0..8)) {
            let mut buf = Vec::new();
            encode_row(&row, &mut buf);
            let back = decode_row(&mut Reader::new(&buf), row.len() + 2).unwrap();
            prop_assert_eq!(&back[..row.len()], &row[..]);
            prop_assert_eq!(&back[row.len()..], &[Value::Null, Value::Null][..]);
        }

        #[test]
        fn uuid_keys_sort_like_bytes(a in any::<[u8; 16]>(), b in any::<[u8; 16]>(), x in any::<i32>()) {
            let ka = encode_key(&[&Value::Uuid(a), &Value::Int(x)]);
            let kb = encode_key(&[&Value::Uuid(b), &Value::Int(x)]);
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
        }

        #[test]
        fn bigint_keys_sort_like_values(a in any::<i64>(), b in any::<i64>()) {
            let ka = encode_key(&[&Value::BigInt(a)]);
            let kb = encode_key(&[&Value::BigInt(b)]);
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
        }

        #[test]
        fn text_keys_sort_like_values(a in ".{0,8}", b in ".{0,8}", x in any::<i32>()) {
            let ka = encode_key(&[&Value::Text(a.clone()), &Value::Int(x)]);
            let kb = encode_key(&[&Value::Text(b.clone()), &Value::Int(x)]);
            prop_assert_eq!(ka.cmp(&kb), a.as_bytes().cmp(b.as_bytes()));
        }

        #[test]
        fn double_keys_sort_like_values(a in -1e9f64..1e9, b in -1e9f64..1e9) {
            let ka = encode_key(&[&Value::Double(a)]);
            let kb = encode_key(&[&Value::Double(b)]);
            prop_assert_eq!(ka.cmp(&kb), a.partial_cmp(&b).unwrap());
        }

        #[test]
        fn truncated_rows_are_errors_not_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = decode_row(&mut Reader::new(&bytes), 3);
        }
    }
}
