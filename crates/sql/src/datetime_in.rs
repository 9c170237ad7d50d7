//! Text cast to `date` and `timestamp` read by PostgreSQL's rules
//! (`pgtypes::date_in`, `timestamp_wall_clock`) where Arrow's cast would
//! answer differently: a literal Eddy's reader refuses becomes
//! [`DATE_IN`] / [`TIMESTAMP_IN`] of it
//! on the AST (`crate::rewrite::typed_cast`), which the simplifier folds
//! while planning, so the statement fails with PostgreSQL's SQLSTATE and
//! message: 22007 `invalid input syntax for type date: "garbage"`, 22008
//! `date/time field value out of range: "2024-02-30"`. Arrow's cast said
//! `Cannot cast string ...` (22P02), or read `2024-02-30` as March 1st.
//!
//! A literal the reader accepts keeps DataFusion's cast of its canonical
//! text, as before. A `timestamptz` literal is read in the session's zone
//! by `crate::zone_functions::TIMESTAMPTZ_IN_ZONE` instead. `infinity` is refused (22008): Eddy's date and
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

#[derive(Debug, PartialEq, Eq, Hash, Clone, Copy)]
enum Kind {
    Date,
    Timestamp,
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
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(match self.kind {
            Kind::Date => DataType::Date32,
            Kind::Timestamp => DataType::Timestamp(TimeUnit::Nanosecond, None),
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
            Kind::Timestamp => {
                let mut b = TimestampNanosecondBuilder::with_capacity(text.len());
                for i in 0..text.len() {
                    if text.is_null(i) {
                        b.append_null();
                        continue;
                    }
                    let s = text.value(i);
                    let micros = pgtypes::timestamp_wall_clock(s).map_err(DataFusionError::from)?;
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
    [Kind::Date, Kind::Timestamp]
        .into_iter()
        .map(|kind| {
            ScalarUDF::new_from_impl(DatetimeIn {
                signature: Signature::any(1, Volatility::Immutable),
                kind,
            })
        })
        .collect()
}
