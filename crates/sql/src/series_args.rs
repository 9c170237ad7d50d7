//! `generate_series` in FROM with integer arguments of any width, as
//! PostgreSQL takes them: DataFusion's table function wants int8 literals,
//! so `generate_series(1, array_upper(current_schemas(false), 1))`
//! (pgjdbc's TypeInfoCache), whose second argument folds to an int4, would
//! be refused. This wrapper widens int2/int4 literal arguments to int8 and
//! hands the call to DataFusion's function; anything else (timestamps,
//! dates, a non-literal) reaches it unchanged, with its errors.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::Expr;

/// DataFusion's `generate_series` (or another integer table function)
/// taking integer literals of any width.
#[derive(Debug)]
pub struct IntegerArgs {
    pub inner: Arc<dyn TableFunctionImpl>,
}

fn widen(e: &Expr) -> DfResult<Expr> {
    Ok(match e {
        Expr::Literal(
            v @ (ScalarValue::Int8(_)
            | ScalarValue::Int16(_)
            | ScalarValue::Int32(_)
            | ScalarValue::UInt8(_)
            | ScalarValue::UInt16(_)
            | ScalarValue::UInt32(_)),
            meta,
        ) => Expr::Literal(v.cast_to(&DataType::Int64)?, meta.clone()),
        other => other.clone(),
    })
}

impl TableFunctionImpl for IntegerArgs {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let exprs = args
            .exprs()
            .iter()
            .map(widen)
            .collect::<DfResult<Vec<_>>>()?;
        self.inner
            .call_with_args(TableFunctionArgs::new(&exprs, args.session()))
    }
}
