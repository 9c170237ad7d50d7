//! Random client bytes and text into every decoder: any result is fine, a
//! panic is not.

use super::*;
use eddy_common::ColumnType;
use proptest::collection::vec;
use proptest::prelude::*;

const OIDS: &[u32] = &[
    oid::BOOL,
    oid::BYTEA,
    oid::CHAR,
    oid::NAME,
    oid::INT8,
    oid::INT2,
    oid::INT4,
    oid::TEXT,
    oid::OID,
    oid::FLOAT4,
    oid::FLOAT8,
    oid::UNKNOWN,
    oid::VARCHAR,
    oid::BPCHAR,
    oid::DATE,
    oid::TIME,
    oid::TIMESTAMP,
    oid::TIMESTAMPTZ,
    oid::INTERVAL,
    oid::NUMERIC,
    oid::INT2_ARRAY,
    oid::INT4_ARRAY,
    oid::TEXT_ARRAY,
    oid::UUID,
    oid::UUID_ARRAY,
    oid::JSON,
    oid::JSONB,
    0,
    u32::MAX,
];

const TYPES: &[ColumnType] = &[
    ColumnType::Boolean,
    ColumnType::SmallInt,
    ColumnType::Int,
    ColumnType::BigInt,
    ColumnType::Real,
    ColumnType::Double,
    ColumnType::Decimal(38, 10),
    ColumnType::Decimal(5, 2),
    ColumnType::Decimal(38, 0),
    ColumnType::Numeric,
    ColumnType::Decimal(1, 1),
    ColumnType::Text,
    ColumnType::Date,
    ColumnType::Timestamp,
    ColumnType::Bytea,
    ColumnType::Uuid,
    ColumnType::Time,
    ColumnType::Json,
    ColumnType::Jsonb,
    ColumnType::Interval,
];

fn any_type() -> impl Strategy<Value = ColumnType> {
    proptest::sample::select(TYPES)
}

fn any_oid() -> impl Strategy<Value = u32> {
    proptest::sample::select(OIDS)
}

/// Text that looks enough like numbers, dates and zones to get deep
/// into the parsers, multi-byte characters included.
fn datish() -> impl Strategy<Value = String> {
    "[0-9 :+\\-.TZzeE,é日\\\\xNaInfity]{0,40}"
}

fn be16(v: i16) -> [u8; 2] {
    v.to_be_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parse_binary_never_panics(bytes in vec(any::<u8>(), 0..48), o in any_oid(), ty in any_type()) {
        let _ = parse_binary(&bytes, o, ty);
        let _ = binary_array_to_text(&bytes);
    }

    #[test]
    fn numeric_headers_never_panic(
        nd in prop_oneof![0i16..6, any::<i16>()],
        weight in any::<i16>(),
        sign in prop_oneof![
            Just(0u16), Just(0x4000u16), Just(0xC000u16), Just(0xD000u16), Just(0xF000u16),
            any::<u16>(),
        ],
        dscale in prop_oneof![0i16..40, any::<i16>()],
        digits in vec(prop_oneof![0i16..10_000, any::<i16>()], 0..6),
        ty in any_type(),
    ) {
        let mut b = Vec::new();
        b.extend_from_slice(&be16(nd));
        b.extend_from_slice(&be16(weight));
        b.extend_from_slice(&sign.to_be_bytes());
        b.extend_from_slice(&be16(dscale));
        for d in &digits {
            b.extend_from_slice(&be16(*d));
        }
        let _ = parse_binary(&b, oid::NUMERIC, ty);
    }

    #[test]
    fn array_headers_never_panic(
        ndim in -1i32..8,
        flags in -1i32..3,
        elem in any_oid(),
        dims in vec((prop_oneof![-2i32..4, any::<i32>()], any::<i32>()), 0..3),
        elems in vec((prop_oneof![-3i32..10, any::<i32>()], vec(any::<u8>(), 0..10)), 0..5),
    ) {
        let mut b = Vec::new();
        b.extend_from_slice(&ndim.to_be_bytes());
        b.extend_from_slice(&flags.to_be_bytes());
        b.extend_from_slice(&elem.to_be_bytes());
        for (len, lower) in &dims {
            b.extend_from_slice(&len.to_be_bytes());
            b.extend_from_slice(&lower.to_be_bytes());
        }
        for (len, data) in &elems {
            b.extend_from_slice(&len.to_be_bytes());
            b.extend_from_slice(data);
        }
        let _ = binary_array_to_text(&b);
    }

    #[test]
    fn parse_text_never_panics(s in prop_oneof![any::<String>(), datish()], ty in any_type()) {
        let _ = parse_text(&s, ty);
        let _ = parse_decimal(&s, 38, 10);
        let _ = parse_bytea_text(&s);
        let _ = numeric_from_text(&s);
        let _ = parse_param(s.as_bytes(), oid::NUMERIC, false);
        let _ = timestamp_wall_clock(&s);
    }
}
