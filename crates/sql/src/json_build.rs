//! `json_build_object(k1, v1, ...)` and `json_build_array(v1, ...)`,
//! PostgreSQL's json constructors (SQLAlchemy's column reflection asks for
//! a column's identity options with `json_build_object`).
//!
//! The result is `json` (text, PostgreSQL's layout: `{"a" : 1, "b" : 2}`
//! and `[1, 2]`, as `json_build_*` print it). Each argument becomes the
//! JSON value PostgreSQL's `to_json` gives it: NULL is `null`; booleans
//! and numbers are bare (a float NaN or infinity is a string, as in
//! PostgreSQL); a json or jsonb argument is embedded as it is; arrays are
//! JSON arrays; dates and timestamps are ISO 8601 strings; anything else
//! is its text, quoted. Object keys are the text of their argument; a NULL
//! key and an odd number of arguments are 22023, as in PostgreSQL 15.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, Volatility,
};
use eddy_common::ColumnType;

use crate::error::SqlError;
use crate::pgtypes::{cell_text, declared_type_metadata, DECLARED_TYPE_KEY};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Shape {
    Object,
    Array,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonBuild {
    shape: Shape,
    /// `jsonb_build_*`: the json text is read back into jsonb's normal
    /// form (keys sorted, last duplicate kept, `", "` / `": "` layout).
    jsonb: bool,
    signature: Signature,
}

/// The constructors (json and jsonb), for the session to register.
pub fn json_build_functions() -> Vec<ScalarUDF> {
    [
        (Shape::Object, false),
        (Shape::Array, false),
        (Shape::Object, true),
        (Shape::Array, true),
    ]
    .into_iter()
    .map(|(shape, jsonb)| {
        ScalarUDF::new_from_impl(JsonBuild {
            shape,
            jsonb,
            signature: Signature::one_of(
                vec![TypeSignature::VariadicAny, TypeSignature::Nullary],
                Volatility::Stable,
            ),
        })
    })
    .collect()
}

impl ScalarUDFImpl for JsonBuild {
    fn name(&self) -> &str {
        match (self.shape, self.jsonb) {
            (Shape::Object, false) => "json_build_object",
            (Shape::Array, false) => "json_build_array",
            (Shape::Object, true) => "jsonb_build_object",
            (Shape::Array, true) => "jsonb_build_array",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        if self.shape == Shape::Object && !args.arg_fields.len().is_multiple_of(2) {
            return Err(DataFusionError::from(SqlError::InvalidParameter(
                "argument list must have even number of elements".into(),
            )));
        }
        Ok(Arc::new(
            Field::new(self.name(), DataType::Utf8, false).with_metadata(declared_type_metadata(
                if self.jsonb {
                    ColumnType::Jsonb
                } else {
                    ColumnType::Json
                },
            )),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if scalar { 1 } else { args.number_rows };
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<DfResult<_>>()?;
        let fields = &args.arg_fields;
        let mut out = StringBuilder::new();
        let mut text = String::new();
        for row in 0..rows {
            text.clear();
            match self.shape {
                Shape::Object => {
                    text.push('{');
                    for (pair, (keys, values)) in arrays.chunks(2).zip(fields.chunks(2)).enumerate()
                    {
                        let [key, value] = pair_of(keys)?;
                        let [_, value_field] = pair_of(values)?;
                        if key.logical_nulls().is_some_and(|n| n.is_null(row)) {
                            return Err(DataFusionError::from(SqlError::InvalidParameter(
                                "null value not allowed for object key".into(),
                            )));
                        }
                        if pair > 0 {
                            text.push_str(", ");
                        }
                        let mut k = String::new();
                        cell_text(key.as_ref(), row, &mut k).map_err(DataFusionError::from)?;
                        push_string(&mut text, &k);
                        text.push_str(" : ");
                        push_value(&mut text, value, value_field, row)?;
                    }
                    text.push('}');
                }
                Shape::Array => {
                    text.push('[');
                    for (i, (value, field)) in arrays.iter().zip(fields.iter()).enumerate() {
                        if i > 0 {
                            text.push_str(", ");
                        }
                        push_value(&mut text, value, field, row)?;
                    }
                    text.push(']');
                }
            }
            if self.jsonb {
                out.append_value(
                    crate::json::normalize_jsonb(&text).map_err(DataFusionError::from)?,
                );
            } else {
                out.append_value(&text);
            }
        }
        let array: ArrayRef = Arc::new(out.finish());
        if scalar {
            Ok(ColumnarValue::Scalar(
                datafusion::common::ScalarValue::try_from_array(&array, 0)?,
            ))
        } else {
            Ok(ColumnarValue::Array(array))
        }
    }
}

/// The two items of a chunk of two (an object's key and value).
fn pair_of<T>(chunk: &[T]) -> DfResult<[&T; 2]> {
    match chunk {
        [a, b] => Ok([a, b]),
        _ => Err(DataFusionError::from(SqlError::InvalidParameter(
            "argument list must have even number of elements".into(),
        ))),
    }
}

/// A JSON string literal of `s`.
fn push_string(out: &mut String, s: &str) {
    match serde_json::to_string(s) {
        Ok(q) => out.push_str(&q),
        // serializing a &str cannot fail; keep the output valid regardless
        Err(_) => out.push_str("\"\""),
    }
}

/// The JSON form of `array[row]` (module doc); also `to_json`'s and the
/// json aggregates' conversion of a value.
pub(crate) fn push_value(
    out: &mut String,
    array: &ArrayRef,
    field: &Field,
    row: usize,
) -> DfResult<()> {
    // a NULL literal is a NullArray, which has no validity bitmap
    if array.logical_nulls().is_some_and(|n| n.is_null(row)) {
        out.push_str("null");
        return Ok(());
    }
    let declared = field.metadata().get(DECLARED_TYPE_KEY).map(String::as_str);
    let mut text = String::new();
    match array.data_type() {
        DataType::List(inner) | DataType::LargeList(inner) => {
            let element = match array.data_type() {
                DataType::List(_) => array.as_list::<i32>().value(row),
                _ => array.as_list::<i64>().value(row),
            };
            // an array inside is array_to_json's: no space after commas
            out.push('[');
            for i in 0..element.len() {
                if i > 0 {
                    out.push(',');
                }
                push_value(out, &element, inner, i)?;
            }
            out.push(']');
            return Ok(());
        }
        DataType::Struct(fields) => {
            // a composite is composite_to_json's: no spaces; a ROW(...)
            // constructor's fields (DataFusion's c0, c1, ...) are
            // PostgreSQL's f1, f2, ...
            let positional = fields
                .iter()
                .enumerate()
                .all(|(i, f)| f.name() == &format!("c{i}"));
            let s = array.as_struct();
            out.push('{');
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if positional {
                    push_string(out, &format!("f{}", i + 1));
                } else {
                    push_string(out, f.name());
                }
                out.push(':');
                push_value(out, s.column(i), f, row)?;
            }
            out.push('}');
            return Ok(());
        }
        DataType::Boolean => {
            out.push_str(if array.as_boolean().value(row) {
                "true"
            } else {
                "false"
            });
            return Ok(());
        }
        _ => {}
    }
    cell_text(array.as_ref(), row, &mut text).map_err(DataFusionError::from)?;
    match array.data_type() {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => out.push_str(&text),
        // NaN and the infinities are no JSON numbers: PostgreSQL quotes them
        DataType::Float32 | DataType::Float64 => {
            if text
                .bytes()
                .all(|b| b.is_ascii_digit() || b"+-.e".contains(&b))
            {
                out.push_str(&text);
            } else {
                push_string(out, &text);
            }
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            if matches!(declared, Some("json" | "jsonb")) =>
        {
            out.push_str(&text);
        }
        // to_json's timestamps are ISO 8601 ("2020-01-01T10:00:00+00:00",
        // "...+05:30" in a session on that offset: `crate::zone_rules`)
        DataType::Timestamp(_, tz) => {
            let mut iso = text.replacen(' ', "T", 1);
            let hours_only = iso
                .rfind(['+', '-'])
                .is_some_and(|i| iso.len().saturating_sub(i) == 3);
            if tz.is_some() && hours_only {
                iso.push_str(":00");
            }
            push_string(out, &iso);
        }
        _ => push_string(out, &text),
    }
    Ok(())
}
