//! PostgreSQL scalar functions that DataFusion lacks and applications send:
//! `md5`, `scale`, `min_scale`, `sign`, `num_nulls`, `num_nonnulls`, `quote_literal`,
//! `quote_nullable`, `quote_ident`, `width_bucket`, `format` and
//! `regexp_split_to_array`. (`mod(a, b)` and `timezone(zone, ts)` are
//! rewritten on the AST into `a % b` and `ts AT TIME ZONE zone`,
//! `crate::rewrite`; `every` and `variance` are aliases of DataFusion's
//! `bool_and` and `var_samp`, registered by the session.)
//!
//! Each function is evaluated row by row over `ScalarValue`s
//! ([`RowFunction`]): none is on a hot path, and one evaluator per row keeps
//! each function's PostgreSQL rules in one place.
//!
//! Invariants:
//! * Argument types are PostgreSQL's resolution, made explicit in each
//!   function's `coerce`: where PostgreSQL would pick the double precision
//!   form for integer arguments (`sign`, `width_bucket`), so does Eddy; a
//!   numeric argument keeps the numeric form and exact arithmetic.
//! * `format` and `quote_literal` take their arguments as text through the
//!   cast to text, which writes PostgreSQL's text (`crate::text_casts`);
//!   arrays, records, bytea and uuids, whose cast does not, are refused
//!   with 0A000 rather than printed another way.
//! * Errors carry PostgreSQL's SQLSTATE and message (22023 for `format`'s
//!   specifiers, 2201G for `width_bucket`'s bounds, 22004 for a NULL
//!   identifier).

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::SqlError;

pub(crate) type Coerce = fn(&[DataType]) -> Result<Vec<DataType>, SqlError>;
pub(crate) type ReturnType = fn(&[DataType]) -> Result<DataType, SqlError>;
pub(crate) type Eval = fn(&[ScalarValue], &DataType) -> Result<ScalarValue, SqlError>;

/// A scalar function evaluated one row at a time.
#[derive(Debug)]
struct RowFunction {
    name: &'static str,
    signature: Signature,
    coerce: Coerce,
    returns: ReturnType,
    eval: Eval,
}

// one function per name: the name identifies it
impl PartialEq for RowFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for RowFunction {}

impl std::hash::Hash for RowFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for RowFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        (self.coerce)(args).map_err(DataFusionError::from)
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        (self.returns)(args).map_err(DataFusionError::from)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let ret = args.return_field.data_type().clone();
        let arrays: Vec<ArrayRef> = ColumnarValue::values_to_arrays(&args.args)?;
        let rows = if all_scalar { 1 } else { args.number_rows };
        let mut out = Vec::with_capacity(rows);
        let mut row = Vec::with_capacity(arrays.len());
        for i in 0..rows {
            row.clear();
            for a in &arrays {
                row.push(ScalarValue::try_from_array(a, i)?);
            }
            out.push((self.eval)(&row, &ret).map_err(DataFusionError::from)?);
        }
        if all_scalar {
            let one = out
                .pop()
                .ok_or_else(|| DataFusionError::Internal(format!("{}: no row", self.name)))?;
            return Ok(ColumnarValue::Scalar(one));
        }
        if out.is_empty() {
            return Ok(ColumnarValue::Array(
                datafusion::arrow::array::new_empty_array(&ret),
            ));
        }
        ScalarValue::iter_to_array(out).map(ColumnarValue::Array)
    }
}

pub(crate) fn function(
    name: &'static str,
    coerce: Coerce,
    returns: ReturnType,
    eval: Eval,
) -> ScalarUDF {
    ScalarUDF::new_from_impl(RowFunction {
        name,
        signature: Signature::user_defined(Volatility::Immutable),
        coerce,
        returns,
        eval,
    })
}

/// The functions, for the session to register.
pub fn pg_functions() -> Vec<ScalarUDF> {
    vec![
        function("md5", coerce_md5, |_| Ok(DataType::Utf8), md5),
        function("scale", coerce_scale, |_| Ok(DataType::Int32), scale),
        function(
            "min_scale",
            coerce_scale,
            |_| Ok(DataType::Int32),
            min_scale,
        ),
        function("sign", coerce_sign, sign_type, sign),
        function("num_nulls", keep_types, |_| Ok(DataType::Int32), num_nulls),
        function(
            "num_nonnulls",
            keep_types,
            |_| Ok(DataType::Int32),
            num_nonnulls,
        ),
        function("quote_literal", coerce_quotable, text, quote_literal_fn),
        function("quote_nullable", coerce_quotable, text, quote_nullable_fn),
        function("quote_ident", coerce_one_text, text, quote_ident_fn),
        function(
            "width_bucket",
            coerce_width_bucket,
            |_| Ok(DataType::Int32),
            width_bucket,
        ),
        function("format", coerce_format, text, format),
        function(
            "regexp_split_to_array",
            coerce_texts,
            |_| Ok(text_list()),
            regexp_split_to_array,
        ),
    ]
}

fn text(_: &[DataType]) -> Result<DataType, SqlError> {
    Ok(DataType::Utf8)
}

pub(crate) fn text_list() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

pub(crate) fn no_function(name: &str, args: &[DataType]) -> SqlError {
    let types: Vec<String> = args.iter().map(|t| t.to_string()).collect();
    SqlError::UndefinedOperator(format!(
        "function {name}({}) does not exist",
        types.join(", ")
    ))
}

pub(crate) fn arity(name: &str, args: &[DataType], min: usize, max: usize) -> Result<(), SqlError> {
    if args.len() < min || args.len() > max {
        return Err(no_function(name, args));
    }
    Ok(())
}

pub(crate) fn is_text(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
    )
}

fn is_integer(t: &DataType) -> bool {
    t.is_integer()
}

fn keep_types(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    Ok(args.to_vec())
}

fn coerce_texts(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("regexp_split_to_array", args, 2, 3)?;
    if !args.iter().all(is_text) {
        return Err(no_function("regexp_split_to_array", args));
    }
    Ok(vec![DataType::Utf8; args.len()])
}

fn coerce_one_text(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("quote_ident", args, 1, 1)?;
    if !args.iter().all(is_text) {
        return Err(no_function("quote_ident", args));
    }
    Ok(vec![DataType::Utf8])
}

fn as_str(v: &ScalarValue) -> Option<&str> {
    match v {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => s.as_deref(),
        _ => None,
    }
}

// ---- md5 -----------------------------------------------------------------

fn coerce_md5(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("md5", args, 1, 1)?;
    match &args[0] {
        t if is_text(t) => Ok(vec![DataType::Utf8]),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            Ok(vec![DataType::Binary])
        }
        _ => Err(no_function("md5", args)),
    }
}

fn md5(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let bytes: Option<&[u8]> = match args.first() {
        Some(ScalarValue::Binary(Some(b))) => Some(b),
        Some(v) => as_str(v).map(str::as_bytes),
        None => None,
    };
    Ok(ScalarValue::Utf8(
        bytes.map(|b| format!("{:x}", md5::compute(b))),
    ))
}

// ---- scale ---------------------------------------------------------------

fn coerce_scale(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("scale", args, 1, 1)?;
    match &args[0] {
        DataType::Decimal128(..) => Ok(args.to_vec()),
        t if is_integer(t) || t == &DataType::Null => Ok(vec![DataType::Int64]),
        _ => Err(no_function("scale", args)),
    }
}

/// The scale of a numeric value: Eddy keeps a numeric's scale per column
/// (a literal's is the digits it was written with), so it is the type's.
fn scale(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    Ok(ScalarValue::Int32(match args.first() {
        Some(ScalarValue::Decimal128(Some(_), _, s)) => Some(i32::from(*s)),
        Some(ScalarValue::Int64(Some(_))) => Some(0),
        _ => None,
    }))
}

/// The fewest fraction digits that write the value exactly: its scale
/// less its trailing fractional zeros (0 for zero and for integers).
fn min_scale(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    Ok(ScalarValue::Int32(match args.first() {
        Some(ScalarValue::Decimal128(Some(v), _, s)) => {
            let mut digits = i32::from(*s).max(0);
            let mut v = *v;
            while digits > 0 && v % 10 == 0 {
                v /= 10;
                digits -= 1;
            }
            Some(if v == 0 { 0 } else { digits })
        }
        Some(ScalarValue::Int64(Some(_))) => Some(0),
        _ => None,
    }))
}

// ---- sign ----------------------------------------------------------------

fn coerce_sign(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("sign", args, 1, 1)?;
    match &args[0] {
        DataType::Decimal128(..) => Ok(args.to_vec()),
        // PostgreSQL resolves sign(integer) to sign(double precision)
        t if t.is_numeric() || t == &DataType::Null => Ok(vec![DataType::Float64]),
        _ => Err(no_function("sign", args)),
    }
}

/// PostgreSQL's `numeric_sign` answers -1, 0 or 1 at scale 0.
fn sign_type(args: &[DataType]) -> Result<DataType, SqlError> {
    Ok(match args.first() {
        Some(DataType::Decimal128(..)) => DataType::Decimal128(1, 0),
        _ => DataType::Float64,
    })
}

fn sign(args: &[ScalarValue], ret: &DataType) -> Result<ScalarValue, SqlError> {
    match args.first() {
        Some(ScalarValue::Decimal128(v, _, _)) => {
            Ok(ScalarValue::Decimal128(v.map(i128::signum), 1, 0))
        }
        Some(ScalarValue::Float64(v)) => Ok(ScalarValue::Float64(v.map(|v| {
            if v.is_nan() {
                v
            } else if v > 0.0 {
                1.0
            } else if v < 0.0 {
                -1.0
            } else {
                0.0
            }
        }))),
        _ => ScalarValue::try_from(ret).map_err(|e| SqlError::Internal(e.to_string())),
    }
}

// ---- num_nulls / num_nonnulls --------------------------------------------

fn count_nulls(args: &[ScalarValue]) -> i32 {
    let n = args.iter().filter(|v| v.is_null()).count();
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn num_nulls(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    Ok(ScalarValue::Int32(Some(count_nulls(args))))
}

fn num_nonnulls(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let all = i32::try_from(args.len()).unwrap_or(i32::MAX);
    Ok(ScalarValue::Int32(Some(all - count_nulls(args))))
}

// ---- quoting ---------------------------------------------------------------

/// Types whose cast to text writes PostgreSQL's text: Arrow's own cast for
/// text, integers, numerics, dates and booleans (`true`, as PostgreSQL's
/// `bool::text`), and `crate::text_casts`, which runs after type coercion,
/// for timestamps, times, intervals and floats. Arrays, records, bytea and
/// uuids are not among them.
fn text_like_as_postgres(t: &DataType) -> bool {
    is_text(t)
        || t.is_numeric()
        || matches!(
            t,
            DataType::Decimal128(..)
                | DataType::Date32
                | DataType::Boolean
                | DataType::Timestamp(..)
                | DataType::Time32(_)
                | DataType::Time64(_)
                | DataType::Interval(_)
        )
}

fn coerce_quotable(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("quote_literal", args, 1, 1)?;
    if !text_like_as_postgres(&args[0]) {
        return Err(SqlError::FeatureNotSupported(format!(
            "quote_literal and quote_nullable of {} are not supported: Eddy quotes text, number, boolean, date and time values",
            args[0]
        )));
    }
    Ok(vec![DataType::Utf8])
}

/// PostgreSQL's `quote_literal`: quotes doubled, and backslashes doubled
/// under an `E` prefix.
pub fn quote_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 3);
    if s.contains('\\') {
        out.push('E');
    }
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// PostgreSQL's `quote_ident`: quoted unless it is a lower-case name
/// (letters, digits, `_`, not starting with a digit) that is not a keyword
/// PostgreSQL reserves in any way.
pub fn quote_identifier(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !crate::keywords::is_reserved_in_some_way(s);
    if plain {
        return s.to_string();
    }
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn quote_literal_fn(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    Ok(ScalarValue::Utf8(
        args.first().and_then(as_str).map(quote_literal),
    ))
}

fn quote_nullable_fn(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    Ok(ScalarValue::Utf8(Some(
        args.first()
            .and_then(as_str)
            .map_or_else(|| "NULL".to_string(), quote_literal),
    )))
}

fn quote_ident_fn(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    Ok(ScalarValue::Utf8(
        args.first().and_then(as_str).map(quote_identifier),
    ))
}

// ---- width_bucket ----------------------------------------------------------

fn coerce_width_bucket(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("width_bucket", args, 4, 4)?;
    if !args.iter().all(|t| t.is_numeric() || t == &DataType::Null)
        || !(is_integer(&args[3]) || args[3] == DataType::Null)
    {
        return Err(no_function("width_bucket", args));
    }
    let bounds = &args[..3];
    let any_float = bounds.iter().any(|t| t.is_floating());
    let decimal_scale = bounds
        .iter()
        .filter_map(|t| match t {
            DataType::Decimal128(_, s) => Some(*s),
            _ => None,
        })
        .max();
    let bound = match (any_float, decimal_scale) {
        (false, Some(s)) => DataType::Decimal128(38, s.max(0)),
        _ => DataType::Float64,
    };
    Ok(vec![bound.clone(), bound.clone(), bound, DataType::Int32])
}

fn bucket_error(message: &str) -> SqlError {
    SqlError::InvalidArgumentForWidthBucket(message.to_string())
}

fn width_bucket(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let [operand, low, high, count] = args else {
        return Err(SqlError::Internal(
            "width_bucket takes four arguments".into(),
        ));
    };
    let ScalarValue::Int32(Some(count)) = count else {
        return Ok(ScalarValue::Int32(None));
    };
    if *count <= 0 {
        return Err(bucket_error("count must be greater than zero"));
    }
    let result = match (operand, low, high) {
        (
            ScalarValue::Float64(Some(x)),
            ScalarValue::Float64(Some(lo)),
            ScalarValue::Float64(Some(hi)),
        ) => width_bucket_float(*x, *lo, *hi, *count)?,
        (
            ScalarValue::Decimal128(Some(x), ..),
            ScalarValue::Decimal128(Some(lo), ..),
            ScalarValue::Decimal128(Some(hi), ..),
        ) => width_bucket_exact(*x, *lo, *hi, *count)?,
        _ => return Ok(ScalarValue::Int32(None)),
    };
    Ok(ScalarValue::Int32(Some(result)))
}

/// PostgreSQL's `width_bucket_float8`.
fn width_bucket_float(x: f64, lo: f64, hi: f64, count: i32) -> Result<i32, SqlError> {
    if x.is_nan() || lo.is_nan() || hi.is_nan() {
        return Err(bucket_error(
            "operand, lower bound, and upper bound cannot be NaN",
        ));
    }
    if lo.is_infinite() || hi.is_infinite() {
        return Err(bucket_error("lower and upper bounds must be finite"));
    }
    if lo == hi {
        return Err(bucket_error("lower bound cannot equal upper bound"));
    }
    let n = f64::from(count);
    let inside = |frac: f64| -> i32 {
        // the quotient can round up to `count`, which would be a lie
        #[allow(clippy::cast_possible_truncation)]
        let b = (n * frac) as i32;
        b.min(count - 1) + 1
    };
    let over = || {
        count
            .checked_add(1)
            .ok_or_else(|| SqlError::NumericOutOfRange("integer out of range".into()))
    };
    if lo < hi {
        if x < lo {
            Ok(0)
        } else if x >= hi {
            over()
        } else if (hi - lo).is_finite() {
            Ok(inside((x - lo) / (hi - lo)))
        } else {
            Ok(inside((x / 2.0 - lo / 2.0) / (hi / 2.0 - lo / 2.0)))
        }
    } else if x > lo {
        Ok(0)
    } else if x <= hi {
        over()
    } else if (lo - hi).is_finite() {
        Ok(inside((lo - x) / (lo - hi)))
    } else {
        Ok(inside((lo / 2.0 - x / 2.0) / (lo / 2.0 - hi / 2.0)))
    }
}

/// PostgreSQL's `width_bucket_numeric`, exact on the scaled integers (all
/// three share one scale after coercion).
fn width_bucket_exact(x: i128, lo: i128, hi: i128, count: i32) -> Result<i32, SqlError> {
    if lo == hi {
        return Err(bucket_error("lower bound cannot equal upper bound"));
    }
    let over = || {
        count
            .checked_add(1)
            .ok_or_else(|| SqlError::NumericOutOfRange("integer out of range".into()))
    };
    let (offset, width) = if lo < hi {
        if x < lo {
            return Ok(0);
        }
        if x >= hi {
            return over();
        }
        (x - lo, hi - lo)
    } else {
        if x > lo {
            return Ok(0);
        }
        if x <= hi {
            return over();
        }
        (lo - x, lo - hi)
    };
    let overflow = || SqlError::NumericOutOfRange("numeric value out of range".into());
    let scaled = offset.checked_mul(i128::from(count)).ok_or_else(overflow)?;
    let bucket = i32::try_from(scaled / width).map_err(|_| overflow())?;
    Ok(bucket + 1)
}

// ---- format ----------------------------------------------------------------

fn coerce_format(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    let Some(first) = args.first() else {
        return Err(no_function("format", args));
    };
    if !is_text(first) {
        return Err(no_function("format", args));
    }
    let mut out = vec![DataType::Utf8];
    for t in &args[1..] {
        if t == &DataType::Boolean {
            // `%s` writes the output function's `t`, not the cast's `true`
            out.push(DataType::Boolean);
        } else if text_like_as_postgres(t) {
            out.push(DataType::Utf8);
        } else {
            return Err(SqlError::FeatureNotSupported(format!(
                "format() of a {t} argument is not supported: Eddy formats text, number, boolean, date and time arguments"
            )));
        }
    }
    Ok(out)
}

/// An argument's text as PostgreSQL's output function writes it; None for
/// NULL.
fn arg_text(v: &ScalarValue) -> Result<Option<String>, SqlError> {
    if v.is_null() {
        return Ok(None);
    }
    Ok(Some(match v {
        ScalarValue::Boolean(Some(b)) => if *b { "t" } else { "f" }.to_string(),
        v => match as_str(v) {
            Some(s) => s.to_string(),
            None => {
                let cast = v
                    .cast_to(&DataType::Utf8)
                    .map_err(|e| SqlError::Internal(e.to_string()))?;
                as_str(&cast).unwrap_or_default().to_string()
            }
        },
    }))
}

fn format_error(message: impl Into<String>) -> SqlError {
    SqlError::InvalidParameter(message.into())
}

/// Reads a decimal number at `chars[*at..]`; None when there is no digit.
fn read_number(chars: &[char], at: &mut usize) -> Result<Option<usize>, SqlError> {
    let start = *at;
    let mut n: usize = 0;
    while let Some(d) = chars.get(*at).and_then(|c| c.to_digit(10)) {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(d as usize))
            .filter(|n| *n <= i32::MAX as usize)
            .ok_or_else(|| format_error("number is out of range"))?;
        *at += 1;
    }
    Ok((*at > start).then_some(n))
}

/// PostgreSQL's `format(formatstr, args...)`: `%[position$][-][width]type`
/// with types `s`, `I`, `L` and `%%`; width may be `*` or `*n$`.
fn format(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let Some(template) = args.first() else {
        return Ok(ScalarValue::Utf8(None));
    };
    let Some(template) = as_str(template) else {
        return Ok(ScalarValue::Utf8(None));
    };
    let values = &args[1..];
    let chars: Vec<char> = template.chars().collect();
    let mut out = String::with_capacity(template.len());
    let mut next_arg = 0usize;
    let mut at = 0usize;
    let unterminated = || format_error("unterminated format() type specifier");
    let take = |index: usize| -> Result<&ScalarValue, SqlError> {
        values
            .get(index)
            .ok_or_else(|| format_error("too few arguments for format()"))
    };
    while let Some(&c) = chars.get(at) {
        at += 1;
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.get(at) == Some(&'%') {
            out.push('%');
            at += 1;
            continue;
        }
        // position: digits followed by '$'
        let save = at;
        let mut position = None;
        if let Some(n) = read_number(&chars, &mut at)? {
            if chars.get(at) == Some(&'$') {
                if n == 0 {
                    return Err(format_error(
                        "format specifies argument 0, but arguments are numbered from 1",
                    ));
                }
                position = Some(n - 1);
                at += 1;
            } else {
                at = save;
            }
        }
        let mut left = false;
        while chars.get(at) == Some(&'-') {
            left = true;
            at += 1;
        }
        let mut width: Option<i64> = None;
        if chars.get(at) == Some(&'*') {
            at += 1;
            let index = match read_number(&chars, &mut at)? {
                Some(n) if chars.get(at) == Some(&'$') => {
                    at += 1;
                    if n == 0 {
                        return Err(format_error(
                            "format specifies argument 0, but arguments are numbered from 1",
                        ));
                    }
                    n - 1
                }
                Some(_) => return Err(unterminated()),
                None => {
                    let i = next_arg;
                    next_arg += 1;
                    i
                }
            };
            width = match take(index)? {
                v if v.is_null() => None,
                v => {
                    let n = v
                        .cast_to(&DataType::Int64)
                        .ok()
                        .and_then(|v| match v {
                            ScalarValue::Int64(n) => n,
                            _ => None,
                        })
                        .ok_or_else(|| format_error("format() width must be an integer"))?;
                    Some(n)
                }
            };
        } else if let Some(n) = read_number(&chars, &mut at)? {
            width = Some(n as i64);
        }
        let Some(&kind) = chars.get(at) else {
            return Err(unterminated());
        };
        at += 1;
        let index = match position {
            Some(p) => {
                next_arg = p + 1;
                p
            }
            None => {
                let i = next_arg;
                next_arg += 1;
                i
            }
        };
        let value = take(index)?;
        let piece = match kind {
            's' => arg_text(value)?.unwrap_or_default(),
            'I' => match arg_text(value)? {
                Some(s) => quote_identifier(&s),
                None => {
                    return Err(SqlError::NullValueNotAllowed(
                        "null values cannot be formatted as an SQL identifier".into(),
                    ))
                }
            },
            'L' => match arg_text(value)? {
                Some(s) => quote_literal(&s),
                None => "NULL".to_string(),
            },
            other => {
                return Err(format_error(format!(
                    "unrecognized format() type specifier \"{other}\""
                )))
            }
        };
        let (left, width) = match width {
            Some(w) if w < 0 => (true, w.unsigned_abs()),
            Some(w) => (left, w.unsigned_abs()),
            None => (left, 0),
        };
        let pad = usize::try_from(width)
            .unwrap_or(usize::MAX)
            .saturating_sub(piece.chars().count());
        if pad > 0 && !left {
            out.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(&piece);
        if pad > 0 && left {
            out.extend(std::iter::repeat_n(' ', pad));
        }
    }
    Ok(ScalarValue::Utf8(Some(out)))
}

// ---- regexp_split_to_array -------------------------------------------------

/// `pattern` compiled with PostgreSQL's flags `i` and `c` (`g` is 22023
/// for `function`, which takes one match; any other flag 0A000).
pub(crate) fn regex_with_flags(
    function: &str,
    pattern: &str,
    flags: Option<&str>,
) -> Result<regex::Regex, SqlError> {
    let mut builder = regex::RegexBuilder::new(pattern);
    for f in flags.unwrap_or("").chars() {
        match f {
            'i' => {
                builder.case_insensitive(true);
            }
            'c' => {
                builder.case_insensitive(false);
            }
            'g' => {
                return Err(SqlError::InvalidParameter(format!(
                    "{function}() does not support the \"global\" option"
                )))
            }
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "regular expression flag \"{other}\" is not supported by Eddy (it supports i and c)"
                )))
            }
        }
    }
    builder
        .size_limit(1 << 20)
        .build()
        .map_err(|e| SqlError::InvalidRegularExpression(e.to_string()))
}

/// PostgreSQL's split: a zero-length match at the start or the end of the
/// string, or right after the previous match, does not split.
fn split_like_postgres(re: &regex::Regex, s: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut start = 0usize;
    let mut last_end: Option<usize> = None;
    for m in re.find_iter(s) {
        if m.start() == m.end()
            && (m.start() == 0 || m.start() == s.len() || last_end == Some(m.start()))
        {
            continue;
        }
        pieces.push(s[start..m.start()].to_string());
        start = m.end();
        last_end = Some(m.end());
    }
    pieces.push(s[start..].to_string());
    pieces
}

fn regexp_split_to_array(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let (Some(s), Some(pattern)) = (args.first().and_then(as_str), args.get(1).and_then(as_str))
    else {
        return ScalarValue::try_from(&text_list()).map_err(|e| SqlError::Internal(e.to_string()));
    };
    let flags = match args.get(2) {
        Some(v) if v.is_null() => {
            return ScalarValue::try_from(&text_list())
                .map_err(|e| SqlError::Internal(e.to_string()))
        }
        Some(v) => as_str(v),
        None => None,
    };
    let re = regex_with_flags("regexp_split_to_array", pattern, flags)?;
    let items: Vec<ScalarValue> = split_like_postgres(&re, s)
        .into_iter()
        .map(|p| ScalarValue::Utf8(Some(p)))
        .collect();
    Ok(ScalarValue::List(ScalarValue::new_list_nullable(
        &items,
        &DataType::Utf8,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> ScalarValue {
        ScalarValue::Utf8(Some(s.to_string()))
    }

    fn fmt(args: &[ScalarValue]) -> Result<String, &'static str> {
        match format(args, &DataType::Utf8) {
            Ok(ScalarValue::Utf8(Some(s))) => Ok(s),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.sqlstate()),
        }
    }

    #[test]
    fn format_follows_postgresql() {
        // PostgreSQL 15: format('%s|%I|%L|%%|%2$s|%-5s|%5s|', 'a b', 'X y', 'it''s', 'w', 'r')
        let args = [
            t("%s|%I|%L|%%|%2$s|%-5s|%5s|"),
            t("a b"),
            t("X y"),
            t("it's"),
            t("w"),
            t("r"),
        ];
        assert_eq!(
            fmt(&args).as_deref(),
            Ok("a b|\"X y\"|'it''s'|%|X y|it's |    w|")
        );
        assert_eq!(fmt(&[t("%s %s"), t("a")]), Err("22023"));
        assert_eq!(fmt(&[t("%q"), t("a")]), Err("22023"));
        assert_eq!(fmt(&[t("abc %")]), Err("22023"));
        assert_eq!(fmt(&[t("%I"), ScalarValue::Utf8(None)]), Err("22004"));
        assert_eq!(
            fmt(&[
                t("[%L] [%s]"),
                ScalarValue::Utf8(None),
                ScalarValue::Utf8(None)
            ])
            .as_deref(),
            Ok("[NULL] []")
        );
        assert_eq!(
            fmt(&[t("[%*s]"), ScalarValue::Int32(Some(-4)), t("x")]).as_deref(),
            Ok("[x   ]")
        );
        assert_eq!(fmt(&[t("%0$s"), t("x")]), Err("22023"));
        assert_eq!(
            fmt(&[t("%s"), ScalarValue::Boolean(Some(true))]).as_deref(),
            Ok("t")
        );
    }

    #[test]
    fn quoting_follows_postgresql() {
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal("a\\b'c"), "E'a\\\\b''c'");
        assert_eq!(quote_identifier("abc_1"), "abc_1");
        assert_eq!(quote_identifier("1abc"), "\"1abc\"");
        assert_eq!(quote_identifier("select"), "\"select\"");
        assert_eq!(quote_identifier("Ab\"c"), "\"Ab\"\"c\"");
        // unreserved keywords are not quoted
        assert_eq!(quote_identifier("abort"), "abort");
    }

    #[test]
    fn width_bucket_matches_postgresql() {
        assert_eq!(width_bucket_float(5.35, 0.024, 10.06, 5).ok(), Some(3));
        assert_eq!(width_bucket_float(-1.0, 0.0, 10.0, 5).ok(), Some(0));
        assert_eq!(width_bucket_float(10.0, 0.0, 10.0, 5).ok(), Some(6));
        assert_eq!(width_bucket_float(5.0, 10.0, 0.0, 5).ok(), Some(3));
        assert!(width_bucket_float(1.0, 2.0, 2.0, 5).is_err());
        // exact: 0.3 of [0, 0.9) in 3 buckets is the start of bucket 2
        assert_eq!(width_bucket_exact(3, 0, 9, 3).ok(), Some(2));
        assert_eq!(width_bucket_exact(9, 0, 9, 3).ok(), Some(4));
    }

    #[test]
    fn split_skips_degenerate_matches() {
        let re = regex_with_flags("t", "", None).expect("regex");
        assert_eq!(split_like_postgres(&re, "abc"), ["a", "b", "c"]);
        let re = regex_with_flags("t", "[0-9]+", None).expect("regex");
        assert_eq!(split_like_postgres(&re, "a1b22c"), ["a", "b", "c"]);
        assert_eq!(split_like_postgres(&re, "1a2"), ["", "a", ""]);
        let re = regex_with_flags("t", "x*", None).expect("regex");
        assert_eq!(split_like_postgres(&re, "axxb"), ["a", "b"]);
    }
}
