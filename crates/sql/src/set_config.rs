//! `set_config(name, value, is_local)`: PostgreSQL's function form of
//! `SET [LOCAL] name = value` (asyncpg calls it to turn `jit` off while it
//! introspects types; row-level-security setups call it to set a custom
//! setting per transaction).
//!
//! A function cannot reach its session's settings while a plan runs, so
//! the function checks the setting as SET would (`validate_setting`),
//! queues the change in the session's [`PendingSettings`] and answers the
//! new value; the session applies the queue, with SET's transactional
//! rules, before it runs its next statement or transaction command
//! (`Session::apply_pending_settings`). The change is therefore visible
//! from the next statement on, not to a `current_setting` call in the same
//! statement (PostgreSQL's order inside one statement is unspecified
//! anyway). The function is volatile: it is evaluated at each execution,
//! never folded into a plan.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use parking_lot::Mutex;

use crate::error::SqlError;

/// Validates `SET name = value`, answering the value to store.
pub type Validate = fn(&str, &str) -> Result<String, SqlError>;

/// One queued `set_config` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingSetting {
    pub name: String,
    pub value: String,
    pub local: bool,
}

/// The changes `set_config` made that the session has not applied yet.
pub type PendingSettings = Arc<Mutex<Vec<PendingSetting>>>;

struct SetConfig {
    signature: Signature,
    pending: PendingSettings,
    validate: Validate,
}

impl std::fmt::Debug for SetConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("set_config")
    }
}

// one per session; equal to itself only
impl PartialEq for SetConfig {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.pending, &other.pending)
    }
}

impl Eq for SetConfig {}

impl std::hash::Hash for SetConfig {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.pending).hash(state);
    }
}

impl ScalarUDFImpl for SetConfig {
    fn name(&self) -> &str {
        "set_config"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        if args.len() != 3 {
            let types: Vec<String> = args.iter().map(|t| t.to_string()).collect();
            return Err(DataFusionError::from(SqlError::UndefinedOperator(format!(
                "function set_config({}) does not exist",
                types.join(", ")
            ))));
        }
        Ok(DataType::Utf8)
    }
    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        Ok(match args.len() {
            3 => vec![DataType::Utf8, DataType::Utf8, DataType::Boolean],
            _ => args.to_vec(),
        })
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = crate::udf_args::all_scalar(&args.args);
        let arrays: Vec<ArrayRef> = ColumnarValue::values_to_arrays(&args.args)?;
        let [names, values, locals] = arrays.as_slice() else {
            return Err(DataFusionError::Internal(
                "set_config takes three arguments".into(),
            ));
        };
        let names = cast(names, &DataType::Utf8)?;
        let values = cast(values, &DataType::Utf8)?;
        let (names, values) = (names.as_string::<i32>(), values.as_string::<i32>());
        let locals = locals.as_boolean_opt().ok_or_else(|| {
            DataFusionError::Internal("set_config: is_local is not boolean".into())
        })?;
        let rows = if all_scalar { 1 } else { args.number_rows };
        let mut out = StringBuilder::with_capacity(rows, 16);
        for row in 0..rows.min(names.len()) {
            if names.is_null(row) {
                return Err(DataFusionError::from(SqlError::NullValueNotAllowed(
                    "SET requires parameter name".into(),
                )));
            }
            let name = names.value(row).to_ascii_lowercase();
            // a NULL value is RESET's: not supported through set_config
            if values.is_null(row) {
                return Err(DataFusionError::from(SqlError::FeatureNotSupported(
                    format!("set_config('{name}', NULL, ...) is not supported: use RESET {name}"),
                )));
            }
            let value = (self.validate)(&name, values.value(row)).map_err(DataFusionError::from)?;
            let local = !locals.is_null(row) && locals.value(row);
            self.pending.lock().push(PendingSetting {
                name,
                value: value.clone(),
                local,
            });
            out.append_value(value);
        }
        let out: ArrayRef = Arc::new(out.finish());
        crate::udf_args::scalar_if(all_scalar, out)
    }
}

/// The session's `set_config`, queueing into `pending`.
pub fn set_config_function(pending: &PendingSettings, validate: Validate) -> ScalarUDF {
    ScalarUDF::new_from_impl(SetConfig {
        signature: Signature::user_defined(Volatility::Volatile),
        pending: Arc::clone(pending),
        validate,
    })
}
