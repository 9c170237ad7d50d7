//! `txid_current()`: the id of the transaction the statement runs in (a
//! block's, or the statement's own in autocommit), as PostgreSQL's
//! `txid_current` gives its transaction's. Eddy's transaction ids
//! (`eddy_storage::Engine::begin_txn`) grow across restarts (they start
//! above the commit log and the clock), so the value is unique and
//! increasing as PostgreSQL's epoch-extended ids are; they are not small
//! numbers. The session records its transaction's id before planning each
//! statement (`Session::planning_state`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::SqlError;

/// The function's name.
pub const TXID_CURRENT: &str = "txid_current";

/// The id of the session's open transaction (0: none).
#[derive(Debug, Default)]
pub struct CurrentTxid(AtomicU64);

impl CurrentTxid {
    pub fn set(&self, id: Option<u64>) {
        self.0.store(id.unwrap_or(0), Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct TxidCurrent {
    signature: Signature,
    current: Arc<CurrentTxid>,
}

impl PartialEq for TxidCurrent {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.current, &other.current)
    }
}

impl Eq for TxidCurrent {}

impl std::hash::Hash for TxidCurrent {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        TXID_CURRENT.hash(state);
    }
}

impl ScalarUDFImpl for TxidCurrent {
    fn name(&self) -> &str {
        TXID_CURRENT
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }
    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let id = self.current.0.load(Ordering::Relaxed);
        let id = i64::try_from(id).ok().filter(|id| *id > 0).ok_or_else(|| {
            DataFusionError::from(SqlError::Internal(
                "txid_current() outside a transaction".into(),
            ))
        })?;
        Ok(ColumnarValue::Scalar(ScalarValue::Int64(Some(id))))
    }
}

/// `txid_current()` of the session whose transaction `current` records.
pub fn txid_function(current: &Arc<CurrentTxid>) -> ScalarUDF {
    ScalarUDF::new_from_impl(TxidCurrent {
        signature: Signature::nullary(Volatility::Stable),
        current: Arc::clone(current),
    })
}
