//! Tests of `arrow_values`: every column type round-trips values through
//! Arrow, and a value or array of the wrong type is refused (it used to be
//! stored as NULL).

// Tests index fixed fixtures; a panic there is a failing test.
#![allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use super::*;
use eddy_common::ArrayElem;
use proptest::prelude::*;

fn elems() -> Vec<ArrayElem> {
    vec![
        ArrayElem::Boolean,
        ArrayElem::SmallInt,
        ArrayElem::Int,
        ArrayElem::BigInt,
        ArrayElem::Real,
        ArrayElem::Double,
        ArrayElem::Decimal(10, 2),
        ArrayElem::Decimal(38, 0),
        ArrayElem::Text,
        ArrayElem::Varchar(5),
        ArrayElem::Date,
        ArrayElem::Timestamp,
        ArrayElem::TimestampTz,
        ArrayElem::Uuid,
    ]
}

/// Every column type (parameterised ones at a few parameters).
fn all_types() -> Vec<ColumnType> {
    let mut v = vec![
        ColumnType::Boolean,
        ColumnType::SmallInt,
        ColumnType::Int,
        ColumnType::BigInt,
        ColumnType::Real,
        ColumnType::Double,
        ColumnType::Decimal(10, 2),
        ColumnType::Decimal(38, 0),
        ColumnType::Text,
        ColumnType::Date,
        ColumnType::Timestamp,
        ColumnType::Bytea,
        ColumnType::Varchar(5),
        ColumnType::Char(3),
        ColumnType::TimestampTz,
        ColumnType::Uuid,
        ColumnType::Json,
        ColumnType::Jsonb,
        ColumnType::Interval,
        ColumnType::Time,
    ];
    v.extend(elems().into_iter().map(ColumnType::Array));
    v
}

/// Floats without NaN (NaN != NaN would fail equality, not conversion).
fn f32s() -> impl Strategy<Value = f32> {
    prop::num::f32::ANY.prop_filter("not NaN", |f| !f.is_nan())
}

fn f64s() -> impl Strategy<Value = f64> {
    prop::num::f64::ANY.prop_filter("not NaN", |f| !f.is_nan())
}

/// A non-null value of type `ty`.
fn scalar(ty: ColumnType) -> BoxedStrategy<Value> {
    match ty.storage() {
        ColumnType::Boolean => any::<bool>().prop_map(Value::Boolean).boxed(),
        ColumnType::SmallInt => any::<i16>().prop_map(Value::SmallInt).boxed(),
        ColumnType::Int => any::<i32>().prop_map(Value::Int).boxed(),
        ColumnType::BigInt => any::<i64>().prop_map(Value::BigInt).boxed(),
        ColumnType::Real => f32s().prop_map(Value::Real).boxed(),
        ColumnType::Double => f64s().prop_map(Value::Double).boxed(),
        ColumnType::Decimal(..) => any::<i64>()
            .prop_map(|x| Value::Decimal(i128::from(x)))
            .boxed(),
        ColumnType::Text => ".{0,12}".prop_map(Value::Text).boxed(),
        ColumnType::Date => any::<i32>().prop_map(Value::Date).boxed(),
        ColumnType::Timestamp => any::<i64>().prop_map(Value::Timestamp).boxed(),
        ColumnType::Bytea => prop::collection::vec(any::<u8>(), 0..12)
            .prop_map(Value::Bytea)
            .boxed(),
        ColumnType::Uuid => any::<[u8; 16]>().prop_map(Value::Uuid).boxed(),
        ColumnType::Interval => (
            any::<i32>(),
            any::<i32>(),
            -(i64::MAX / 1000)..=(i64::MAX / 1000),
        )
            .prop_map(|(months, days, micros)| {
                Value::Interval(Interval {
                    months,
                    days,
                    micros,
                })
            })
            .boxed(),
        ColumnType::Time => (0i64..86_400_000_000).prop_map(Value::Time).boxed(),
        ColumnType::Array(e) => {
            let item = prop_oneof![
                1 => Just(Value::Null),
                4 => scalar(e.column_type()),
            ];
            prop::collection::vec(item, 0..4)
                .prop_map(Value::Array)
                .boxed()
        }
        _ => unreachable!("storage() of {ty:?}"),
    }
}

/// A column type and a column of values (NULL or of that type).
fn column() -> impl Strategy<Value = (ColumnType, Vec<Value>)> {
    prop::sample::select(all_types()).prop_flat_map(|ty| {
        let v = prop_oneof![1 => Just(Value::Null), 4 => scalar(ty)];
        (Just(ty), prop::collection::vec(v, 0..8))
    })
}

/// One value of each kind, to try against each column type.
fn one_of_each_kind() -> Vec<Value> {
    vec![
        Value::Boolean(true),
        Value::SmallInt(1),
        Value::Int(1),
        Value::BigInt(1),
        Value::Real(1.0),
        Value::Double(1.0),
        Value::Decimal(1),
        Value::Text("1".into()),
        Value::Date(1),
        Value::Timestamp(1),
        Value::Bytea(vec![1]),
        Value::Uuid([1; 16]),
        Value::Interval(Interval {
            months: 1,
            days: 1,
            micros: 1,
        }),
        Value::Time(1),
        Value::Array(vec![Value::Int(1)]),
    ]
}

proptest! {
    #[test]
    fn every_column_type_round_trips_values_through_arrow((ty, vals) in column()) {
        let mut b = ColumnBuilder::new(ty, vals.len());
        for v in &vals {
            b.append(v).unwrap();
        }
        let a = b.finish();
        prop_assert_eq!(a.data_type(), &ty.to_arrow());
        prop_assert_eq!(a.len(), vals.len());
        for (i, v) in vals.iter().enumerate() {
            prop_assert_eq!(&value_at(a.as_ref(), ty, i).unwrap(), v);
        }
    }
}

#[test]
fn text_into_an_int_column_is_an_error_not_null() {
    let mut b = ColumnBuilder::new(ColumnType::Int, 2);
    let e = b.append(&Value::Text("7".into())).unwrap_err();
    assert!(matches!(
        e,
        ConversionError::ValueMismatch {
            column: ColumnType::Int,
            value: "text"
        }
    ));
    assert_eq!(
        e.to_string(),
        "a text value does not fit a column of type integer"
    );
    // nothing was appended
    assert_eq!(b.len(), 0);
}

#[test]
fn every_value_of_another_type_is_refused_and_appends_nothing() {
    for ty in all_types() {
        for v in one_of_each_kind() {
            let mut b = ColumnBuilder::new(ty, 1);
            match b.append(&v) {
                Ok(()) => {
                    assert!(v.fits(ty), "{v:?} accepted by {ty:?}");
                    assert_eq!(value_at(b.finish().as_ref(), ty, 0).unwrap(), v);
                }
                Err(e) => {
                    // no implicit widening: Int into BigInt is refused too
                    assert!(!v.fits(ty), "{v:?} refused by {ty:?}: {e}");
                    assert!(b.is_empty(), "{ty:?} kept part of {v:?}");
                }
            }
        }
    }
}

#[test]
fn an_array_with_a_wrong_element_is_refused_whole() {
    let ty = ColumnType::Array(ArrayElem::Int);
    let mut b = ColumnBuilder::new(ty, 2);
    let bad = Value::Array(vec![Value::Int(1), Value::Text("x".into())]);
    assert!(b.append(&bad).is_err());
    let nested = Value::Array(vec![Value::Array(vec![])]);
    assert!(b.append(&nested).is_err());
    b.append(&Value::Array(vec![Value::Int(2)])).unwrap();
    let a = b.finish();
    assert_eq!(a.len(), 1);
    assert_eq!(
        value_at(a.as_ref(), ty, 0).unwrap(),
        Value::Array(vec![Value::Int(2)])
    );
}

#[test]
fn an_interval_past_arrows_range_is_refused() {
    let mut b = ColumnBuilder::new(ColumnType::Interval, 1);
    let huge = Value::Interval(Interval {
        months: 0,
        days: 0,
        micros: i64::MAX,
    });
    let e = b.append(&huge).unwrap_err();
    assert!(matches!(e, ConversionError::IntervalOutOfRange));
    assert_eq!(e.sqlstate(), "22008");
}

#[test]
fn an_array_of_another_type_is_an_error_not_null() {
    let ints: ArrayRef = Arc::new(Int32Array::from(vec![Some(1)]));
    for ty in [ColumnType::BigInt, ColumnType::Text, ColumnType::Uuid] {
        let e = value_at(ints.as_ref(), ty, 0).unwrap_err();
        assert!(matches!(e, ConversionError::ArrayMismatch { .. }), "{ty:?}");
        assert_eq!(e.sqlstate(), "XX000");
    }
    // a decimal at another scale would be another number
    let dec: ArrayRef = Arc::new(
        Decimal128Array::from(vec![Some(12345)])
            .with_precision_and_scale(10, 2)
            .unwrap(),
    );
    assert!(value_at(dec.as_ref(), ColumnType::Decimal(10, 4), 0).is_err());
    assert_eq!(
        value_at(dec.as_ref(), ColumnType::Decimal(12, 2), 0).unwrap(),
        Value::Decimal(12345)
    );
    // past the end is an error, not a panic
    assert!(matches!(
        value_at(ints.as_ref(), ColumnType::Int, 1),
        Err(ConversionError::RowOutOfBounds { row: 1, len: 1 })
    ));
}

#[test]
fn other_arrow_encodings_of_a_type_read_as_its_values() {
    let view: ArrayRef = Arc::new(StringViewArray::from(vec![Some("a"), None]));
    assert_eq!(
        value_at(view.as_ref(), ColumnType::Varchar(3), 0).unwrap(),
        Value::Text("a".into())
    );
    assert_eq!(
        value_at(view.as_ref(), ColumnType::Text, 1).unwrap(),
        Value::Null
    );
    let secs: ArrayRef = Arc::new(TimestampSecondArray::from(vec![Some(2)]));
    assert_eq!(
        value_at(secs.as_ref(), ColumnType::TimestampTz, 0).unwrap(),
        Value::Timestamp(2_000_000)
    );
    let far: ArrayRef = Arc::new(TimestampSecondArray::from(vec![Some(i64::MAX)]));
    assert!(matches!(
        value_at(far.as_ref(), ColumnType::Timestamp, 0),
        Err(ConversionError::TimestampOutOfRange)
    ));
}

#[test]
fn rows_round_trip_through_a_batch() {
    let types = [ColumnType::Int, ColumnType::Text];
    let rows = vec![
        vec![Value::Int(1), Value::Text("a".into())],
        vec![Value::Null, Value::Null],
    ];
    let arrays = rows_to_arrays(&types, &rows).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(schema, arrays).unwrap();
    assert_eq!(batch_rows(&batch, &types).unwrap(), rows);
    // a column the batch lacks reads as NULL
    let wider = [ColumnType::Int, ColumnType::Text, ColumnType::Date];
    assert_eq!(
        row_at(&batch, &wider, 0).unwrap(),
        vec![Value::Int(1), Value::Text("a".into()), Value::Null]
    );
    let bad = vec![vec![Value::Text("1".into()), Value::Null]];
    assert!(rows_to_arrays(&types, &bad).is_err());
}
