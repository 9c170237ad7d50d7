//! PostgreSQL's bytea functions that DataFusion lacks: `sha224`, `sha256`,
//! `sha384` and `sha512` (the SHA-2 digest of a bytea, as a bytea),
//! `bit_count(bytea)` (the number of bits set, a bigint), and `length`,
//! `octet_length` and `bit_length` of a bytea (bytes, bytes, bits; an
//! int4), which DataFusion's functions of those names refuse or read as
//! UTF-8. Those three take the place of DataFusion's under their names
//! ([`ByteaAwareLength`]) and hand text to DataFusion's own, unchanged.
//!
//! A text argument is read by bytea's input rules, as PostgreSQL reads an
//! untyped literal given to these functions: `sha256('\x01')` digests one
//! byte, `sha256('abc')` the three bytes of `abc`; a malformed escape is
//! 22P02, as the cast to bytea gives. Other argument types do not resolve
//! (42883), as in PostgreSQL, where these functions take bytea only.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use eddy_common::{ColumnType, Value};
use sha2::Digest;

use crate::error::SqlError;
use crate::pg_functions::{arity, function, no_function};

/// The functions, for the session to register.
pub fn bytea_functions() -> Vec<ScalarUDF> {
    vec![
        function("sha224", coerce_sha224, bytea, |a, _| {
            digest::<sha2::Sha224>(a)
        }),
        function("sha256", coerce_sha256, bytea, |a, _| {
            digest::<sha2::Sha256>(a)
        }),
        function("sha384", coerce_sha384, bytea, |a, _| {
            digest::<sha2::Sha384>(a)
        }),
        function("sha512", coerce_sha512, bytea, |a, _| {
            digest::<sha2::Sha512>(a)
        }),
        function(
            "bit_count",
            coerce_bit_count,
            |_| Ok(DataType::Int64),
            bit_count,
        ),
        ByteaAwareLength::udf(
            "length",
            datafusion::functions::unicode::character_length(),
            false,
        ),
        ByteaAwareLength::udf(
            "octet_length",
            datafusion::functions::string::octet_length(),
            false,
        ),
        ByteaAwareLength::udf(
            "bit_length",
            datafusion::functions::string::bit_length(),
            true,
        ),
    ]
}

/// `length`, `octet_length` or `bit_length`: of a bytea, its bytes (or
/// bits, `bits`) counted here; of text, DataFusion's function `text`.
#[derive(Debug)]
struct ByteaAwareLength {
    name: &'static str,
    text: Arc<ScalarUDF>,
    bits: bool,
    signature: Signature,
}

// one function per name: the name identifies it
impl PartialEq for ByteaAwareLength {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for ByteaAwareLength {}

impl std::hash::Hash for ByteaAwareLength {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ByteaAwareLength {
    fn udf(name: &'static str, text: Arc<ScalarUDF>, bits: bool) -> ScalarUDF {
        ScalarUDF::new_from_impl(ByteaAwareLength {
            name,
            text,
            bits,
            signature: Signature::user_defined(Volatility::Immutable),
        })
    }

    fn count(&self, bytes: &[u8]) -> DfResult<i32> {
        let n = if self.bits {
            bytes.len().checked_mul(8)
        } else {
            Some(bytes.len())
        };
        n.and_then(|n| i32::try_from(n).ok()).ok_or_else(|| {
            DataFusionError::from(SqlError::NumericOutOfRange("integer out of range".into()))
        })
    }
}

fn is_binary(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView
    )
}

impl ScalarUDFImpl for ByteaAwareLength {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        match args {
            [t] if is_binary(t) => Ok(vec![DataType::Binary]),
            [DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null] => {
                Ok(vec![DataType::Utf8])
            }
            _ => Err(no_function(self.name, args).into()),
        }
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args {
            [t] if is_binary(t) => Ok(DataType::Int32),
            _ => self.text.return_type(args),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let binary = args
            .arg_fields
            .first()
            .is_some_and(|f| is_binary(f.data_type()));
        if !binary {
            return self.text.invoke_with_args(args);
        }
        match args.args.first() {
            Some(ColumnarValue::Scalar(ScalarValue::Binary(b))) => Ok(ColumnarValue::Scalar(
                ScalarValue::Int32(b.as_deref().map(|b| self.count(b)).transpose()?),
            )),
            Some(ColumnarValue::Array(a)) => {
                use datafusion::arrow::array::AsArray;
                let a = a.as_binary_opt::<i32>().ok_or_else(|| {
                    DataFusionError::Internal(format!("{}: bytea is not Binary", self.name))
                })?;
                let counts = a
                    .iter()
                    .map(|b| b.map(|b| self.count(b)).transpose())
                    .collect::<DfResult<datafusion::arrow::array::Int32Array>>()?;
                Ok(ColumnarValue::Array(Arc::new(counts)))
            }
            _ => Err(DataFusionError::Internal(format!(
                "{}: a bytea argument that is not Binary",
                self.name
            ))),
        }
    }
}

fn bytea(_: &[DataType]) -> Result<DataType, SqlError> {
    Ok(DataType::Binary)
}

/// One argument, bytea or text (read as bytea's input).
fn coerce_bytea_arg(name: &str, args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity(name, args, 1, 1)?;
    match args.first() {
        Some(DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::Null) => {
            Ok(vec![DataType::Binary])
        }
        Some(DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => Ok(vec![DataType::Utf8]),
        _ => Err(no_function(name, args)),
    }
}

fn coerce_sha224(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    coerce_bytea_arg("sha224", args)
}
fn coerce_sha256(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    coerce_bytea_arg("sha256", args)
}
fn coerce_sha384(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    coerce_bytea_arg("sha384", args)
}
fn coerce_sha512(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    coerce_bytea_arg("sha512", args)
}
fn coerce_bit_count(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    coerce_bytea_arg("bit_count", args)
}

/// The argument's bytes; `None` for NULL.
fn bytes_of(args: &[ScalarValue]) -> Result<Option<Vec<u8>>, SqlError> {
    match args.first() {
        Some(ScalarValue::Binary(b)) => Ok(b.clone()),
        Some(ScalarValue::Utf8(Some(t))) => match crate::pgtypes::parse_text(t, ColumnType::Bytea)?
        {
            Value::Bytea(b) => Ok(Some(b)),
            _ => Err(SqlError::InvalidText(format!(
                "invalid input syntax for type bytea: \"{t}\""
            ))),
        },
        _ => Ok(None),
    }
}

fn digest<D: Digest>(args: &[ScalarValue]) -> Result<ScalarValue, SqlError> {
    Ok(ScalarValue::Binary(
        bytes_of(args)?.map(|b| D::digest(&b).to_vec()),
    ))
}

fn bit_count(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    Ok(ScalarValue::Int64(bytes_of(args)?.map(|b| {
        b.iter().map(|x| i64::from(x.count_ones())).sum()
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(v: ScalarValue) -> String {
        match v {
            ScalarValue::Binary(Some(b)) => b.iter().map(|x| format!("{x:02x}")).collect(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn digests_match_the_published_vectors() {
        let abc = [ScalarValue::Binary(Some(b"abc".to_vec()))];
        assert_eq!(
            hex(digest::<sha2::Sha256>(&abc).unwrap()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(digest::<sha2::Sha224>(&abc).unwrap()),
            "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"
        );
        // text is read as bytea input: hex form
        let hex_abc = [ScalarValue::Utf8(Some("\\x616263".into()))];
        assert_eq!(
            hex(digest::<sha2::Sha256>(&hex_abc).unwrap()),
            hex(digest::<sha2::Sha256>(&abc).unwrap())
        );
        assert_eq!(
            digest::<sha2::Sha256>(&[ScalarValue::Binary(None)]).unwrap(),
            ScalarValue::Binary(None)
        );
    }

    #[test]
    fn bit_count_counts_set_bits() {
        let v = [ScalarValue::Binary(Some(vec![0xff, 0x01, 0x00]))];
        assert_eq!(
            bit_count(&v, &DataType::Int64).unwrap(),
            ScalarValue::Int64(Some(9))
        );
    }
}
