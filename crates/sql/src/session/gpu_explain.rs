//! `EXPLAIN` says what the GPU rule did: one more output row,
//! `gpu_decisions`, listing every operator the `OffloadToGpu` rule
//! considered, with the GPU operator that replaced it or the reason it was
//! kept on the CPU (issue 17: "for every subtree kept on the CPU, the
//! reason").
//!
//! The rule records its decisions while the physical plan is made, which
//! `run_query` does before it returns, so the lines read here are this
//! statement's. With the GPU off or no device the rule does not run and
//! EXPLAIN is DataFusion's, unchanged.

use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::DataType;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;

use super::{Output, Session};
use crate::error::Result;

/// The `plan_type` of the added row.
pub(crate) const GPU_DECISIONS: &str = "gpu_decisions";

impl Session {
    /// `out` (an EXPLAIN's rows) with the GPU rule's decisions appended as a
    /// `gpu_decisions` row, when the rule made any.
    pub(super) fn with_gpu_decisions(&self, out: Output) -> Result<Output> {
        let lines = self.gpu_rule.explain_lines();
        let Output::Rows {
            schema,
            stream,
            command,
        } = out
        else {
            return Ok(out);
        };
        let two_text_columns = schema.fields().len() == 2
            && schema
                .fields()
                .iter()
                .all(|f| f.data_type() == &DataType::Utf8);
        if lines.is_empty() || !two_text_columns {
            return Ok(Output::Rows {
                schema,
                stream,
                command,
            });
        }
        let row = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(StringArray::from(vec![GPU_DECISIONS])),
                Arc::new(StringArray::from(vec![lines.join("\n")])),
            ],
        )?;
        let chained = stream.chain(futures::stream::once(async move { Ok(row) }));
        Ok(Output::Rows {
            schema: Arc::clone(&schema),
            stream: Box::pin(RecordBatchStreamAdapter::new(schema, chained)),
            command,
        })
    }
}
