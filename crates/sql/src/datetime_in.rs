//! Text cast to `date`, `timestamp` and `timestamptz` read by PostgreSQL's
//! rules (`pgtypes::date_in`, `timestamp_wall_clock`, `timestamp_instant`)
//! where Arrow's cast would answer differently: a literal Eddy's reader
//! refuses becomes [`DATE_IN`] / [`TIMESTAMP_IN`] / [`TIMESTAMPTZ_IN`] of it
//! on the AST (`crate::rewrite::typed_cast`), which the simplifier folds
//! while planning, so the statement fails with PostgreSQL's SQLSTATE and
//! message: 22007 `invalid input syntax for type date: "garbage"`, 22008
//! `date/time field value out of range: "2024-02-30"`. Arrow's cast said
//! `Cannot cast string ...` (22P02), or read `2024-02-30` as March 1st.
//!
//! A literal the reader accepts keeps DataFusion's cast of its canonical
//! text, as before. `infinity` is refused (22008): Eddy's date and
//! timestamp columns cannot store it.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Date32Builder, TimestampNanosecondBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::SqlError;
use crate::pgtypes;

/// `eddy_date_in(text)`: a date read as PostgreSQL reads it.
pub const DATE_IN: &str = "eddy_date_in";
/// `eddy_timestamp_in(text)`: a timestamp (a zone suffix ignored).
pub const TIMESTAMP_IN: &str = "eddy_timestamp_in";
/// `eddy_timestamptz_in(text)`: an instant (a zone suffix applied), as a
/// timestamp in UTC for the caller's cast to `timestamptz`.
pub const TIMESTAMPTZ_IN: &str = "eddy_timestamptz_in";

#[derive(Debug, PartialEq, Eq, Hash, Clone, Copy)]
enum Kind {
    Date,
    Timestamp,
    TimestampTz,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct DatetimeIn {
    signature: Signature,
    kind: Kind,
}

impl ScalarUDFImpl for DatetimeIn {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Date => DATE_IN,
            Kind::Timestamp => TIMESTAMP_IN,
            Kind::TimestampTz => TIMESTAMPTZ_IN,
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(match self.kind {
            Kind::Date => DataType::Date32,
            Kind::Timestamp | Kind::TimestampTz => DataType::Timestamp(TimeUnit::Nanosecond, None),
        })
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = crate::udf_args::all_scalar(&args.args);
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some(text) = arrays.first() else {
            return Err(DataFusionError::Plan(format!("{} needs text", self.name())));
        };
        let text = cast(text, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let out: ArrayRef = match self.kind {
            Kind::Date => {
                let mut b = Date32Builder::with_capacity(text.len());
                for i in 0..text.len() {
                    if text.is_null(i) {
                        b.append_null();
                    } else {
                        b.append_value(
                            pgtypes::date_in(text.value(i)).map_err(DataFusionError::from)?,
                        );
                    }
                }
                Arc::new(b.finish())
            }
            Kind::Timestamp | Kind::TimestampTz => {
                let mut b = TimestampNanosecondBuilder::with_capacity(text.len());
                for i in 0..text.len() {
                    if text.is_null(i) {
                        b.append_null();
                        continue;
                    }
                    let s = text.value(i);
                    let micros = match self.kind {
                        Kind::TimestampTz => pgtypes::timestamp_instant(s),
                        _ => pgtypes::timestamp_wall_clock(s),
                    }
                    .map_err(DataFusionError::from)?;
                    let nanos = micros.checked_mul(1000).ok_or_else(|| {
                        DataFusionError::from(SqlError::DatetimeOverflow(
                            "timestamp out of range".into(),
                        ))
                    })?;
                    b.append_value(nanos);
                }
                Arc::new(b.finish())
            }
        };
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

/// The three functions, for the session to register.
pub fn datetime_in_functions() -> Vec<ScalarUDF> {
    [Kind::Date, Kind::Timestamp, Kind::TimestampTz]
        .into_iter()
        .map(|kind| {
            ScalarUDF::new_from_impl(DatetimeIn {
                signature: Signature::any(1, Volatility::Immutable),
                kind,
            })
        })
        .collect()
}
