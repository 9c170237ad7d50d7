//! What the model tests share: reading a statement's rows as integers.

use eddy_sql::Output;
use futures::StreamExt;

/// The rows of `out` with every column cast to int8 (none for a command).
pub async fn rows_i64(out: Output) -> Result<Vec<Vec<i64>>, String> {
    let mut rows = Vec::new();
    let Output::Rows { mut stream, .. } = out else {
        return Ok(rows);
    };
    while let Some(b) = stream.next().await {
        let b = b.map_err(|e| e.to_string())?;
        let mut columns = Vec::with_capacity(b.num_columns());
        for c in b.columns() {
            let c = arrow::compute::cast(c, &arrow::datatypes::DataType::Int64)
                .map_err(|e| e.to_string())?;
            columns.push(
                c.as_any()
                    .downcast_ref::<arrow::array::Int64Array>()
                    .ok_or("not an integer")?
                    .clone(),
            );
        }
        for r in 0..b.num_rows() {
            rows.push(columns.iter().map(|c| c.value(r)).collect());
        }
    }
    Ok(rows)
}
