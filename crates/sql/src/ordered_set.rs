//! PostgreSQL's ordered-set aggregates that DataFusion lacks:
//! `mode() WITHIN GROUP (ORDER BY x)` and
//! `percentile_disc(f) WITHIN GROUP (ORDER BY x)`.
//!
//! DataFusion's planner puts the WITHIN GROUP expression first among the
//! arguments and hands the ordering to the aggregate, which buffers its
//! non-NULL inputs (as DataFusion's own `percentile_cont` does) and sorts
//! them at the end in that order:
//! * `mode` answers the most frequent value; among equally frequent ones
//!   the first in the ordering, as PostgreSQL does;
//! * `percentile_disc(f)` answers the first value whose position in the
//!   ordering reaches the fraction `f` of the rows: the value at
//!   ceil(f * n), 1-based (the first for f = 0). `f` must be a constant in
//!   0..=1 (22003 otherwise, PostgreSQL's code); the array form
//!   `percentile_disc(ARRAY[...])` is refused (0A000).
//!
//! Both are NULL over no non-NULL input.

use std::cmp::Ordering;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, Signature, Volatility,
};

use crate::error::SqlError;

#[derive(Debug, PartialEq, Eq, Hash, Clone, Copy)]
enum Kind {
    Mode,
    PercentileDisc,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct OrderedSet {
    signature: Signature,
    kind: Kind,
}

impl AggregateUDFImpl for OrderedSet {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Mode => "mode",
            Kind::PercentileDisc => "percentile_disc",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        let want = match self.kind {
            Kind::Mode => 1,
            Kind::PercentileDisc => 2,
        };
        if args.len() != want {
            return Err(DataFusionError::from(SqlError::Syntax(format!(
                "{}: WITHIN GROUP (ORDER BY one expression) is required",
                self.name()
            ))));
        }
        if let (Kind::PercentileDisc, Some(DataType::List(_))) = (self.kind, args.get(1)) {
            return Err(DataFusionError::from(SqlError::FeatureNotSupported(
                "percentile_disc of an array of fractions is not supported".into(),
            )));
        }
        Ok(args.first().cloned().unwrap_or(DataType::Null))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let input = args
            .input_fields
            .first()
            .map(|f| f.data_type().clone())
            .unwrap_or(DataType::Null);
        Ok(vec![Arc::new(Field::new(
            format_state_name(args.name, "values"),
            DataType::List(Arc::new(Field::new_list_field(input, true))),
            true,
        ))])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let descending = args.order_bys.first().is_some_and(|s| s.options.descending);
        let fraction = match self.kind {
            Kind::Mode => None,
            Kind::PercentileDisc => {
                // a constant: evaluated on no row
                let constant = || {
                    DataFusionError::from(SqlError::FeatureNotSupported(
                        "percentile_disc takes a constant fraction".into(),
                    ))
                };
                let expr = args.exprs.get(1).ok_or_else(constant)?;
                let empty = RecordBatch::new_empty(Arc::new(Schema::empty()));
                let ColumnarValue::Scalar(value) = expr.evaluate(&empty).map_err(|_| constant())?
                else {
                    return Err(constant());
                };
                let f = match value.cast_to(&DataType::Float64)? {
                    ScalarValue::Float64(Some(f)) => f,
                    _ => {
                        return Err(DataFusionError::from(SqlError::FeatureNotSupported(
                            "percentile_disc of a NULL fraction is not supported".into(),
                        )))
                    }
                };
                if !(0.0..=1.0).contains(&f) {
                    return Err(DataFusionError::from(SqlError::NumericOutOfRange(format!(
                        "percentile value {f} is not between 0 and 1"
                    ))));
                }
                Some(f)
            }
        };
        let data_type = args.return_field.data_type().clone();
        Ok(Box::new(Buffered {
            values: Vec::new(),
            data_type,
            descending,
            fraction,
        }))
    }

    fn supports_within_group_clause(&self) -> bool {
        true
    }
}

/// The non-NULL inputs, answered from at the end.
#[derive(Debug)]
struct Buffered {
    values: Vec<ScalarValue>,
    data_type: DataType,
    descending: bool,
    /// `percentile_disc`'s fraction; `None` for `mode`.
    fraction: Option<f64>,
}

impl Buffered {
    fn push_array(&mut self, array: &dyn Array) -> DfResult<()> {
        for i in 0..array.len() {
            if !array.is_null(i) {
                self.values.push(ScalarValue::try_from_array(array, i)?);
            }
        }
        Ok(())
    }

    fn sorted(&self) -> Vec<ScalarValue> {
        let mut v = self.values.clone();
        v.sort_by(|a, b| {
            let o = a.partial_cmp(b).unwrap_or(Ordering::Equal);
            if self.descending {
                o.reverse()
            } else {
                o
            }
        });
        v
    }
}

impl Accumulator for Buffered {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        match values.first() {
            Some(a) => self.push_array(a.as_ref()),
            None => Ok(()),
        }
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let Some(lists) = states.first() else {
            return Ok(());
        };
        let lists = lists.as_list::<i32>();
        for i in 0..lists.len() {
            if !lists.is_null(i) {
                self.push_array(lists.value(i).as_ref())?;
            }
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        let list = ScalarValue::new_list_nullable(&self.values, &self.data_type);
        Ok(vec![ScalarValue::List(list)])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let sorted = self.sorted();
        let Some(last) = sorted.len().checked_sub(1) else {
            return ScalarValue::try_from(&self.data_type);
        };
        let at = match self.fraction {
            Some(f) => {
                // the 1-based position ceil(f * n), at least the first
                let n = sorted.len() as f64;
                let position = (f * n).ceil() as usize;
                position.saturating_sub(1).min(last)
            }
            None => {
                // the longest run of equal values; the first on a tie
                let (mut best, mut best_len, mut start) = (0usize, 0usize, 0usize);
                for i in 1..=sorted.len() {
                    let run_ends = i == sorted.len() || sorted.get(i) != sorted.get(start);
                    if run_ends {
                        if i.saturating_sub(start) > best_len {
                            best = start;
                            best_len = i.saturating_sub(start);
                        }
                        start = i;
                    }
                }
                best
            }
        };
        Ok(sorted.get(at).cloned().unwrap_or(ScalarValue::Null))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.values.iter().map(ScalarValue::size).sum::<usize>()
    }
}

/// `mode` and `percentile_disc`, for the session to register.
pub fn ordered_set_aggregates() -> Vec<AggregateUDF> {
    [(Kind::Mode, 1), (Kind::PercentileDisc, 2)]
        .into_iter()
        .map(|(kind, args)| {
            AggregateUDF::new_from_impl(OrderedSet {
                signature: Signature::any(args, Volatility::Immutable),
                kind,
            })
        })
        .collect()
}
