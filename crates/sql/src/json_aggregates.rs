//! The json aggregates: `json_agg`, `jsonb_agg`, `json_object_agg` and
//! `jsonb_object_agg`.
//!
//! `json[b]_agg` is DataFusion's `array_agg` underneath (its accumulator,
//! state and ordering: `json_agg(x ORDER BY y)` and `DISTINCT` work as
//! they do for `array_agg`), whose list is turned into JSON at the end,
//! each element as `to_json` makes it ([`crate::json_build::push_value`]):
//! `[1, null, 3]`, PostgreSQL's layout; jsonb's normal form for `jsonb_agg`.
//! No rows give NULL.
//!
//! `json[b]_object_agg(k, v)` keeps `(key text, value json text)` pairs;
//! json prints `{ "k" : v, ... }` as PostgreSQL does, jsonb sorts keys and
//! keeps the last of duplicates. A NULL key is 22023 as in PostgreSQL 15.
//! An ORDER BY inside `json[b]_object_agg` is refused (0A000).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::functions_aggregate::array_agg::array_agg_udaf;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::{format_state_name, AggregateOrderSensitivity};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use eddy_common::ColumnType;

use crate::error::SqlError;
use crate::json::{self, JNode};
use crate::json_build::push_value;
use crate::json_functions::strings;
use crate::pgtypes::{cell_text, declared_type_metadata};

/// The four aggregates, for the session to register.
pub fn json_aggregates() -> Vec<AggregateUDF> {
    let mut out = Vec::new();
    for jsonb in [false, true] {
        out.push(AggregateUDF::new_from_impl(JsonAgg {
            jsonb,
            pre_ordered: false,
            signature: Signature::any(1, Volatility::Stable),
        }));
        out.push(AggregateUDF::new_from_impl(ObjectAgg {
            jsonb,
            signature: Signature::any(2, Volatility::Stable),
        }));
    }
    out
}

fn result_field(name: &str, jsonb: bool) -> FieldRef {
    let ty = if jsonb {
        ColumnType::Jsonb
    } else {
        ColumnType::Json
    };
    Arc::new(Field::new(name, DataType::Utf8, true).with_metadata(declared_type_metadata(ty)))
}

fn first_field(fields: &[FieldRef], name: &str) -> DfResult<FieldRef> {
    fields
        .first()
        .cloned()
        .ok_or_else(|| DataFusionError::Plan(format!("{name}: wrong number of arguments")))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonAgg {
    jsonb: bool,
    /// DataFusion's hint that the input already comes in the ORDER BY's
    /// order (passed on to `array_agg`).
    pre_ordered: bool,
    signature: Signature,
}

impl JsonAgg {
    fn inner(&self) -> DfResult<Arc<dyn AggregateUDFImpl>> {
        let base = Arc::clone(array_agg_udaf().inner());
        Ok(Arc::clone(&base)
            .with_beneficial_ordering(self.pre_ordered)?
            .unwrap_or(base))
    }
}

impl AggregateUDFImpl for JsonAgg {
    fn name(&self) -> &str {
        if self.jsonb {
            "jsonb_agg"
        } else {
            "json_agg"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field(&self, _arg_fields: &[FieldRef]) -> DfResult<FieldRef> {
        Ok(result_field(self.name(), self.jsonb))
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let field = first_field(acc_args.expr_fields, self.name())?;
        let inner = self.inner()?.accumulator(acc_args)?;
        Ok(Box::new(JsonAggAccumulator {
            inner,
            field,
            jsonb: self.jsonb,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        self.inner()?.state_fields(args)
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        array_agg_udaf().inner().order_sensitivity()
    }

    fn with_beneficial_ordering(
        self: Arc<Self>,
        beneficial_ordering: bool,
    ) -> DfResult<Option<Arc<dyn AggregateUDFImpl>>> {
        Ok(Some(Arc::new(JsonAgg {
            jsonb: self.jsonb,
            pre_ordered: beneficial_ordering,
            signature: self.signature.clone(),
        })))
    }
}

/// `array_agg`'s accumulator, its list printed as JSON at the end.
#[derive(Debug)]
struct JsonAggAccumulator {
    inner: Box<dyn Accumulator>,
    /// The argument's field: its metadata says whether a text value is
    /// json (embedded as is) or text (quoted).
    field: FieldRef,
    jsonb: bool,
}

impl Accumulator for JsonAggAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        self.inner.update_batch(values)
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let items = match self.inner.evaluate()? {
            ScalarValue::List(list) if !list.is_empty() && !list.is_null(0) => list.value(0),
            ScalarValue::LargeList(list) if !list.is_empty() && !list.is_null(0) => list.value(0),
            _ => return Ok(ScalarValue::Utf8(None)),
        };
        Ok(ScalarValue::Utf8(json_array_text(
            &items,
            &self.field,
            self.jsonb,
        )?))
    }

    fn size(&self) -> usize {
        self.inner.size() + std::mem::size_of::<Self>()
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        self.inner.state()
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        self.inner.merge_batch(states)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        self.inner.retract_batch(values)
    }

    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }
}

/// `json_agg`'s text of the aggregated values (`None` for no values).
fn json_array_text(items: &ArrayRef, field: &Field, jsonb: bool) -> DfResult<Option<String>> {
    if items.is_empty() {
        return Ok(None);
    }
    // PostgreSQL's json_agg_transfn starts each array or composite value
    // after the first row on a new line
    let structured = matches!(
        field.data_type(),
        DataType::List(_) | DataType::LargeList(_) | DataType::Struct(_)
    );
    let mut text = String::from("[");
    for i in 0..items.len() {
        if i > 0 {
            text.push_str(", ");
            if structured && !items.is_null(i) {
                text.push_str("\n ");
            }
        }
        push_value(&mut text, items, field, i)?;
    }
    text.push(']');
    if jsonb {
        text = json::normalize_jsonb(&text).map_err(DataFusionError::from)?;
    }
    Ok(Some(text))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ObjectAgg {
    jsonb: bool,
    signature: Signature,
}

impl AggregateUDFImpl for ObjectAgg {
    fn name(&self) -> &str {
        if self.jsonb {
            "jsonb_object_agg"
        } else {
            "json_object_agg"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field(&self, _arg_fields: &[FieldRef]) -> DfResult<FieldRef> {
        Ok(result_field(self.name(), self.jsonb))
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        if !acc_args.order_bys.is_empty() {
            return Err(DataFusionError::from(SqlError::FeatureNotSupported(
                format!("ORDER BY inside {} is not supported", self.name()),
            )));
        }
        if acc_args.is_distinct {
            return Err(DataFusionError::from(SqlError::FeatureNotSupported(
                format!("DISTINCT inside {} is not supported", self.name()),
            )));
        }
        let value_field = acc_args
            .expr_fields
            .get(1)
            .cloned()
            .ok_or_else(|| DataFusionError::Plan(format!("{}: two arguments", self.name())))?;
        Ok(Box::new(ObjectAggAccumulator {
            jsonb: self.jsonb,
            value_field,
            pairs: Vec::new(),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new_list(
            format_state_name(args.name, "pairs"),
            Field::new_list_field(DataType::Utf8, true),
            true,
        ))])
    }
}

#[derive(Debug)]
struct ObjectAggAccumulator {
    jsonb: bool,
    value_field: FieldRef,
    /// (key, the value's JSON text), in input order.
    pairs: Vec<(String, String)>,
}

impl Accumulator for ObjectAggAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let [keys, vals, ..] = values else {
            return Err(DataFusionError::Plan(
                "json_object_agg: two arguments".into(),
            ));
        };
        for row in 0..keys.len() {
            if keys.logical_nulls().is_some_and(|n| n.is_null(row)) {
                return Err(DataFusionError::from(SqlError::InvalidParameter(
                    "field name must not be null".into(),
                )));
            }
            let mut k = String::new();
            cell_text(keys.as_ref(), row, &mut k).map_err(DataFusionError::from)?;
            let mut v = String::new();
            push_value(&mut v, vals, &self.value_field, row)?;
            self.pairs.push((k, v));
        }
        Ok(())
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(ScalarValue::Utf8(object_text(&self.pairs, self.jsonb)?))
    }

    fn size(&self) -> usize {
        std::mem::size_of::<Self>()
            + self
                .pairs
                .iter()
                .map(|(k, v)| k.capacity() + v.capacity() + std::mem::size_of::<(String, String)>())
                .sum::<usize>()
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        let flat: Vec<ScalarValue> = self
            .pairs
            .iter()
            .flat_map(|(k, v)| [ScalarValue::from(k.as_str()), ScalarValue::from(v.as_str())])
            .collect();
        Ok(vec![ScalarValue::List(ScalarValue::new_list_nullable(
            &flat,
            &DataType::Utf8,
        ))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let Some(lists) = states.first() else {
            return Ok(());
        };
        let lists = lists.as_list::<i32>();
        for row in 0..lists.len() {
            if lists.is_null(row) {
                continue;
            }
            let flat = strings(&lists.value(row))?;
            for pair in flat.chunks(2) {
                if let [Some(k), Some(v)] = pair {
                    self.pairs.push((k.clone(), v.clone()));
                }
            }
        }
        Ok(())
    }
}

/// `json_object_agg`'s text (PostgreSQL's `{ "k" : v, ... }`), or
/// `jsonb_object_agg`'s normal form; `None` for no rows.
fn object_text(pairs: &[(String, String)], jsonb: bool) -> DfResult<Option<String>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    if jsonb {
        let members = pairs
            .iter()
            .map(|(k, v)| {
                Ok((
                    k.clone(),
                    json::parse(v, "jsonb").map_err(DataFusionError::from)?,
                ))
            })
            .collect::<DfResult<Vec<_>>>()?;
        let mut node = JNode::Object(members);
        json::canonicalize(&mut node);
        return Ok(Some(json::to_text(&node)));
    }
    let mut text = String::from("{ ");
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        text.push_str(&json::to_text(&JNode::String(k.clone())));
        text.push_str(" : ");
        text.push_str(v);
    }
    text.push_str(" }");
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int32Array, StringArray};

    #[test]
    fn json_agg_text_is_postgresqls() {
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), None, Some(3)]));
        let f = Field::new("x", DataType::Int32, true);
        assert_eq!(
            json_array_text(&ints, &f, false).unwrap().as_deref(),
            Some("[1, null, 3]")
        );
        let texts: ArrayRef = Arc::new(StringArray::from(vec![r#"{"b":1, "a":2}"#]));
        let plain = Field::new("t", DataType::Utf8, true);
        assert_eq!(
            json_array_text(&texts, &plain, false).unwrap().as_deref(),
            Some(r#"["{\"b\":1, \"a\":2}"]"#)
        );
        let as_json = plain
            .clone()
            .with_metadata(declared_type_metadata(ColumnType::Json));
        assert_eq!(
            json_array_text(&texts, &as_json, false).unwrap().as_deref(),
            Some(r#"[{"b":1, "a":2}]"#)
        );
        assert_eq!(
            json_array_text(&texts, &as_json, true).unwrap().as_deref(),
            Some(r#"[{"a": 2, "b": 1}]"#)
        );
        let lists: ArrayRef = Arc::new(datafusion::arrow::array::ListArray::from_iter_primitive::<
            datafusion::arrow::datatypes::Int32Type,
            _,
            _,
        >(vec![Some(vec![Some(1)]), None, Some(vec![])]));
        let list_field = Field::new("l", lists.data_type().clone(), true);
        assert_eq!(
            json_array_text(&lists, &list_field, false)
                .unwrap()
                .as_deref(),
            Some("[[1], null, \n []]")
        );
        let none: ArrayRef = Arc::new(Int32Array::from(Vec::<i32>::new()));
        assert_eq!(json_array_text(&none, &f, false).unwrap(), None);
    }

    #[test]
    fn object_agg_text_is_postgresqls() {
        let pairs = vec![
            ("b".to_string(), "1".to_string()),
            ("a".to_string(), "null".to_string()),
            ("b".to_string(), "3".to_string()),
        ];
        assert_eq!(
            object_text(&pairs, false).unwrap().as_deref(),
            Some(r#"{ "b" : 1, "a" : null, "b" : 3 }"#)
        );
        assert_eq!(
            object_text(&pairs, true).unwrap().as_deref(),
            Some(r#"{"a": null, "b": 3}"#)
        );
        assert_eq!(object_text(&[], true).unwrap(), None);
    }
}
