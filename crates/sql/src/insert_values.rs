//! The column types of an `INSERT ... VALUES` list with several rows.
//!
//! DataFusion types each column of a `VALUES` list as the common type of
//! its rows, so one float among exact numbers makes the column float8:
//! `VALUES (1.50), ('12345678901234567890.0123456789'), (0.1::float8)`
//! turned the second value into `12345678901234567000` before it met the
//! table. PostgreSQL converts each value of an INSERT's `VALUES` to its
//! column's type on its own.
//!
//! So where a column that holds a float among other values is written
//! into an exact numeric column (`numeric(p,s)` or `numeric`), the list
//! is given that column as text (before Eddy's analyzer rules, which may
//! type it float8 even where DataFusion chose a decimal):
//! each exact value as its own digits, each float as its shortest text,
//! and the table's conversion (`Session::cast_column`: the typmod's
//! rounding, or an unconstrained numeric's exactness) reads every value
//! from its digits. Other columns and other plans are left as they are.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{Cast, Expr, ExprSchemable, LogicalPlan, Values};
use eddy_common::ColumnType;

/// `plan` with the float columns of its `VALUES` list that meet exact
/// numeric `targets` (one per column, in order) turned to text (module
/// doc).
pub(crate) fn exact_numeric_columns(
    plan: LogicalPlan,
    targets: &[ColumnType],
) -> DfResult<LogicalPlan> {
    let LogicalPlan::Values(Values { schema, values }) = plan else {
        return Ok(plan);
    };
    let floats = |t: &DataType| matches!(t, DataType::Float32 | DataType::Float64);
    let exact = |t: &ColumnType| matches!(t, ColumnType::Decimal(..) | ColumnType::Numeric);
    let cells_schema = DFSchema::empty();
    // a cell as written: without the cast to the column's common type
    // that the list added where the cell's own type differs
    // (a cell whose type is not known yet, an untyped parameter, counts as
    // its column's)
    let type_of = |e: &Expr| e.get_type(&cells_schema).unwrap_or(DataType::Null);
    let own = |cell: &Expr, column: &DataType| -> Option<Expr> {
        match cell {
            Expr::Cast(Cast { expr, field })
                if field.data_type() == column && type_of(expr) != *column =>
            {
                Some(expr.as_ref().clone())
            }
            _ => None,
        }
    };
    let mut columns = Vec::new();
    if values.len() >= 2 {
        for (i, (field, target)) in schema.fields().iter().zip(targets).enumerate() {
            if !exact(target) {
                continue;
            }
            let mut mixes_a_float = floats(field.data_type());
            for row in &values {
                if let Some(cell) = row.get(i) {
                    let cell = own(cell, field.data_type()).unwrap_or_else(|| cell.clone());
                    mixes_a_float |= floats(&type_of(&cell));
                }
            }
            if mixes_a_float {
                columns.push(i);
            }
        }
    }
    if columns.is_empty() {
        return Ok(LogicalPlan::Values(Values { schema, values }));
    }
    let mut rows = values;
    for row in rows.iter_mut() {
        for &i in &columns {
            let Some(column) = schema.fields().get(i).map(|f| f.data_type().clone()) else {
                continue;
            };
            let Some(cell) = row.get_mut(i) else { continue };
            // each value goes to text with all its own digits
            let inner = own(cell, &column).unwrap_or_else(|| cell.clone());
            *cell = Expr::Cast(Cast::new(Box::new(inner), DataType::Utf8));
        }
    }
    let fields = schema
        .iter()
        .enumerate()
        .map(|(i, (qualifier, field))| {
            let field = if columns.contains(&i) {
                field.as_ref().clone().with_data_type(DataType::Utf8)
            } else {
                field.as_ref().clone()
            };
            (qualifier.cloned(), Arc::new(field))
        })
        .collect();
    let schema = DFSchema::new_with_metadata(fields, schema.metadata().clone())?;
    Ok(LogicalPlan::Values(Values {
        schema: Arc::new(schema),
        values: rows,
    }))
}
