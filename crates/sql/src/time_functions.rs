//! PostgreSQL's current-time functions that DataFusion lacks:
//! `transaction_timestamp()`, `statement_timestamp()` and
//! `clock_timestamp()`.
//!
//! What each one gives (PostgreSQL 15, "Current Date/Time"):
//! * `transaction_timestamp()` is `now()`: the start of the transaction
//!   block, or of the statement outside one. The session puts that
//!   instant into DataFusion's `query_execution_start_time`
//!   ([`crate::session::Session`]'s `planning_state`), so this function
//!   folds to the same constant as `now()` in the same statement.
//! * `statement_timestamp()` is the start of the current statement, also
//!   inside a block. The session records it in a [`StatementClock`] each
//!   time it plans a statement.
//! * `clock_timestamp()` reads the clock when it runs. It is volatile, so it
//!   is never folded; Eddy reads the clock once per batch of rows, where
//!   PostgreSQL reads it once per row.
//!
//! All three return the type DataFusion's `now()` returns under the same
//! configuration, so the three compare and mix with `now()` directly.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

/// The start of the statement a session is planning, in nanoseconds since
/// the Unix epoch (`i64::MIN`: none planned yet). Shared between the
/// session and its `statement_timestamp()` function.
#[derive(Debug, Default)]
pub struct StatementClock(AtomicI64);

impl StatementClock {
    pub fn new() -> Arc<StatementClock> {
        Arc::new(StatementClock(AtomicI64::new(i64::MIN)))
    }

    /// Records the start of the statement being planned.
    pub fn set(&self, start: chrono::DateTime<chrono::Utc>) {
        if let Some(ns) = start.timestamp_nanos_opt() {
            self.0.store(ns, Ordering::Relaxed);
        }
    }

    fn get(&self) -> Option<i64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|ns| *ns != i64::MIN)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Which {
    Transaction,
    Statement,
    Clock,
}

#[derive(Debug)]
struct CurrentTime {
    which: Which,
    signature: Signature,
    timezone: Option<Arc<str>>,
    statement: Arc<StatementClock>,
}

impl PartialEq for CurrentTime {
    fn eq(&self, other: &Self) -> bool {
        self.which == other.which
            && self.timezone == other.timezone
            && Arc::ptr_eq(&self.statement, &other.statement)
    }
}

impl Eq for CurrentTime {}

impl std::hash::Hash for CurrentTime {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.which.hash(state);
        self.timezone.hash(state);
    }
}

impl CurrentTime {
    fn new(which: Which, config: &ConfigOptions, statement: Arc<StatementClock>) -> CurrentTime {
        let volatility = match which {
            Which::Clock => Volatility::Volatile,
            Which::Transaction | Which::Statement => Volatility::Stable,
        };
        CurrentTime {
            which,
            signature: Signature::nullary(volatility),
            timezone: config.execution.time_zone.as_deref().map(Arc::from),
            statement,
        }
    }

    fn value(&self, ns: Option<i64>) -> ScalarValue {
        ScalarValue::TimestampNanosecond(ns, self.timezone.clone())
    }
}

impl ScalarUDFImpl for CurrentTime {
    fn name(&self) -> &str {
        match self.which {
            Which::Transaction => "transaction_timestamp",
            Which::Statement => "statement_timestamp",
            Which::Clock => "clock_timestamp",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        Some(ScalarUDF::new_from_impl(CurrentTime::new(
            self.which,
            config,
            Arc::clone(&self.statement),
        )))
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(Arc::new(Field::new(
            self.name(),
            DataType::Timestamp(TimeUnit::Nanosecond, self.timezone.clone()),
            false,
        )))
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Timestamp(
            TimeUnit::Nanosecond,
            self.timezone.clone(),
        ))
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        let ns = match self.which {
            Which::Transaction => info
                .query_execution_start_time()
                .and_then(|t| t.timestamp_nanos_opt()),
            Which::Statement => self.statement.get(),
            Which::Clock => None,
        };
        Ok(match ns {
            Some(ns) => ExprSimplifyResult::Simplified(Expr::Literal(self.value(Some(ns)), None)),
            None => ExprSimplifyResult::Original(args),
        })
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let ns = match self.which {
            Which::Clock => chrono::Utc::now().timestamp_nanos_opt(),
            Which::Statement => self.statement.get(),
            // Like DataFusion's `now()`, folded by `simplify` from the
            // planning state's start time. The error also keeps the
            // constant evaluator (which runs before `simplify` and has no
            // start time) from folding it to something else.
            Which::Transaction => {
                return Err(datafusion::common::DataFusionError::Internal(
                    "transaction_timestamp() is folded at planning".into(),
                ))
            }
        };
        Ok(ColumnarValue::Scalar(self.value(ns)))
    }
}

/// The three functions of one session, `statement_timestamp()` reading
/// `statement`.
pub fn current_time_functions(
    config: &ConfigOptions,
    statement: &Arc<StatementClock>,
) -> Vec<ScalarUDF> {
    [Which::Transaction, Which::Statement, Which::Clock]
        .into_iter()
        .map(|w| ScalarUDF::new_from_impl(CurrentTime::new(w, config, Arc::clone(statement))))
        .collect()
}
