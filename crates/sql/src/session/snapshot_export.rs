//! `SELECT pg_export_snapshot()` and `SET TRANSACTION SNAPSHOT 'id'`
//! (`crate::exported_snapshots`): the session's side, which reaches the
//! transaction's cut.

use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::sql::sqlparser::ast::Value as SqlValue;

use super::{batches_output, Output, Session};
use crate::error::{Result, SqlError};
use crate::txn::Isolation;

impl Session {
    /// `SELECT pg_export_snapshot()`: the identifier of this transaction's
    /// cut, valid until the transaction ends. Outside a block the
    /// transaction is the statement's own, so the identifier names nothing
    /// once it is returned, as in PostgreSQL.
    pub(super) fn export_snapshot(&mut self) -> Result<Output> {
        let owner = self.advisory_owner;
        let id = match self.txn.as_mut().filter(|t| t.explicit) {
            Some(t) => {
                let cut = t.export_cut();
                self.db.exported_snapshots.export(owner, cut)
            }
            None => {
                let id = self.db.exported_snapshots.export(owner, Default::default());
                self.db.exported_snapshots.release(owner);
                id
            }
        };
        let schema = Arc::new(Schema::new(vec![Field::new(
            "pg_export_snapshot",
            DataType::Utf8,
            true,
        )]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(StringArray::from(vec![id]))],
        )?;
        Ok(batches_output(schema, vec![batch]))
    }

    /// `SET TRANSACTION SNAPSHOT 'id'`: as PostgreSQL, only in a
    /// REPEATABLE READ block before its first query, and only for a
    /// snapshot whose exporting transaction is still open (outside a
    /// block it does nothing).
    pub(super) fn import_snapshot(&mut self, id: &SqlValue) -> Result<Output> {
        let (SqlValue::SingleQuotedString(id) | SqlValue::EscapedStringLiteral(id)) = id else {
            return Err(SqlError::InvalidParameter(format!(
                "invalid snapshot identifier: {id}"
            )));
        };
        // Outside a block PostgreSQL warns and does nothing, as for any
        // SET TRANSACTION (`set_transaction`).
        let Some(t) = self.txn.as_mut().filter(|t| t.explicit) else {
            return Ok(Output::Command("SET".into()));
        };
        if t.isolation != Isolation::RepeatableRead {
            return Err(SqlError::FeatureNotSupported(
                "a snapshot-importing transaction must have isolation level SERIALIZABLE or REPEATABLE READ"
                    .into(),
            ));
        }
        if t.started() {
            return Err(SqlError::ActiveTransaction(
                "SET TRANSACTION SNAPSHOT must be called before any query".into(),
            ));
        }
        let cut = self.db.exported_snapshots.get(id).ok_or_else(|| {
            SqlError::InvalidParameter(format!("invalid snapshot identifier: \"{id}\""))
        })?;
        t.import_cut(cut);
        Ok(Output::Command("SET".into()))
    }
}
