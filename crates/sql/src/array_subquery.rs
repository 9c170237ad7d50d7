//! PostgreSQL's array constructor from a subquery, `ARRAY(SELECT e FROM
//! ... [ORDER BY ...])`, which DataFusion does not parse into a plan: on
//! the AST it becomes the scalar subquery `(SELECT array_agg(e ORDER BY
//! ...) FROM ...)`, correlated or not as the original is, wrapped in
//! [`ARRAY_OR_EMPTY`] because the constructor over no row is the empty
//! array `{}` where `array_agg` is NULL.
//!
//! Only a single-column SELECT without GROUP BY, HAVING, LIMIT, OFFSET
//! or a set operation is rewritten (its rows are exactly the aggregate's
//! input); any other form is left alone and refused by the planner, never
//! answered differently from PostgreSQL.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray, UInt32Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::{
    DuplicateTreatment, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentClause,
    FunctionArgumentList, FunctionArguments, GroupByExpr, ObjectName, OrderByExpr, OrderByKind,
    Query, SelectItem, SetExpr, Value as SqlValue,
};

use crate::call_rewrites::call;
use crate::rewrite::ident_name;

/// `eddy_array_or_empty(list)`: the list, or an empty one of its type
/// where it is NULL.
pub const ARRAY_OR_EMPTY: &str = "eddy_array_or_empty";

/// The rewrite of the module doc for the subquery of `ARRAY(q)`; `None`
/// where `q` has a form it does not take.
pub fn array_of_subquery(q: &Query) -> Option<Expr> {
    if q.limit_clause.is_some() || q.fetch.is_some() || !q.locks.is_empty() {
        return None;
    }
    let SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    let no_grouping =
        matches!(&select.group_by, GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty());
    if !no_grouping || select.having.is_some() || select.qualify.is_some() {
        return None;
    }
    let (element, alias) = match select.projection.as_slice() {
        [SelectItem::UnnamedExpr(e)] => (e.clone(), None),
        [SelectItem::ExprWithAlias { expr, alias }] => (expr.clone(), Some(ident_name(alias))),
        _ => return None,
    };
    let distinct = match &select.distinct {
        None => None,
        Some(datafusion::sql::sqlparser::ast::Distinct::Distinct) => {
            Some(DuplicateTreatment::Distinct)
        }
        Some(_) => return None,
    };
    // ORDER BY may name the item by position or alias
    let mut order: Vec<OrderByExpr> = Vec::new();
    if let Some(o) = &q.order_by {
        let OrderByKind::Expressions(items) = &o.kind else {
            return None;
        };
        for item in items {
            let mut item = item.clone();
            let names_the_item = match &item.expr {
                Expr::Value(v) => matches!(&v.value, SqlValue::Number(n, _) if n == "1"),
                Expr::Identifier(id) => alias.as_deref() == Some(ident_name(id).as_str()),
                _ => false,
            };
            if names_the_item {
                item.expr = element.clone();
            }
            order.push(item);
        }
    }
    if distinct.is_none() && order.is_empty() {
        if let Some(mapped) = map_over_unnest(select, &element) {
            return Some(call(ARRAY_OR_EMPTY, vec![mapped]));
        }
    }
    if distinct.is_some() && order.iter().any(|o| o.expr != element) {
        // PostgreSQL: ORDER BY expressions must appear in the argument list
        return None;
    }
    let aggregate = Expr::Function(Function {
        name: ObjectName::from(vec![datafusion::sql::sqlparser::ast::Ident::new(
            "array_agg",
        )]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: distinct,
            args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(element))],
            clauses: if order.is_empty() {
                Vec::new()
            } else {
                vec![FunctionArgumentClause::OrderBy(order)]
            },
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: Vec::new(),
    });
    let mut aggregated = q.clone();
    aggregated.order_by = None;
    if let SetExpr::Select(s) = aggregated.body.as_mut() {
        s.distinct = None;
        s.projection = vec![SelectItem::UnnamedExpr(aggregate)];
    }
    Some(call(
        ARRAY_OR_EMPTY,
        vec![Expr::Subquery(Box::new(aggregated))],
    ))
}

/// `ARRAY(SELECT f(x) FROM unnest(list) AS t(x) [WHERE p(x)])` over a
/// column's list, usually one of the outer row (pg_dump's
/// `array(select quote_literal(x) from unnest(evttags) as t(x))`), as
/// `array_transform(array_filter(list, x -> p(x)), x -> f(x))`: the same
/// elements in the same order, computed without a correlated subquery,
/// which DataFusion cannot plan over a table function of an outer column.
/// `None` where the SELECT has another form, or `f` or `p` holds a
/// subquery or an aggregate (a lambda cannot).
fn map_over_unnest(
    select: &datafusion::sql::sqlparser::ast::Select,
    element: &Expr,
) -> Option<Expr> {
    use datafusion::sql::sqlparser::ast::{
        Ident, LambdaFunction, LambdaFunctionParameter, LambdaSyntax, OneOrManyWithParens,
        TableAlias, TableFactor, TableFunctionArgs,
    };
    let [from] = select.from.as_slice() else {
        return None;
    };
    if !from.joins.is_empty() || select.distinct.is_some() {
        return None;
    }
    // the one column of the unnest: its column alias, else its table alias
    let variable = |alias: &Option<TableAlias>| -> Option<Ident> {
        let alias = alias.as_ref()?;
        match alias.columns.as_slice() {
            [] => Some(alias.name.clone()),
            [column] => Some(column.name.clone()),
            _ => None,
        }
    };
    let (list, x) = match &from.relation {
        TableFactor::Table {
            name,
            args:
                Some(TableFunctionArgs {
                    args,
                    settings: None,
                }),
            alias,
            ..
        } if name.0.len() == 1
            && name
                .0
                .first()
                .and_then(|p| p.as_ident())
                .map(ident_name)
                .as_deref()
                == Some("unnest") =>
        {
            match args.as_slice() {
                [FunctionArg::Unnamed(FunctionArgExpr::Expr(list))] => {
                    (list.clone(), variable(alias)?)
                }
                _ => return None,
            }
        }
        TableFactor::UNNEST {
            alias,
            array_exprs,
            with_offset: false,
            with_ordinality: false,
            ..
        } => match array_exprs.as_slice() {
            [list] => (list.clone(), variable(alias)?),
            _ => return None,
        },
        _ => return None,
    };
    // only a column's list (of the outer row): any other list is no
    // correlated table function, and the aggregate form plans it (a
    // constant list folded with its lambda trips DataFusion's planner)
    if !matches!(list, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
        return None;
    }
    if !lambda_safe(element) || select.selection.as_ref().is_some_and(|p| !lambda_safe(p)) {
        return None;
    }
    let lambda = |body: Expr| {
        Expr::Lambda(LambdaFunction {
            params: OneOrManyWithParens::One(LambdaFunctionParameter {
                name: x.clone(),
                data_type: None,
            }),
            body: Box::new(body),
            syntax: LambdaSyntax::Arrow,
        })
    };
    let mut elements = list;
    if let Some(predicate) = &select.selection {
        elements = call("array_filter", vec![elements, lambda(predicate.clone())]);
    }
    let is_the_variable =
        matches!(element, Expr::Identifier(id) if ident_name(id) == ident_name(&x));
    if !is_the_variable {
        elements = call("array_transform", vec![elements, lambda(element.clone())]);
    }
    Some(elements)
}

/// Whether `e` can be a lambda's body: no subquery, no aggregate or window
/// (no call with a FILTER, WITHIN GROUP or OVER clause, and none of
/// PostgreSQL's aggregates, `grouping_error::is_aggregate_call`).
fn lambda_safe(e: &Expr) -> bool {
    use datafusion::sql::sqlparser::ast::{Visit, Visitor};
    struct Unsafe;
    impl Visitor for Unsafe {
        type Break = ();
        fn pre_visit_query(&mut self, _: &Query) -> std::ops::ControlFlow<()> {
            std::ops::ControlFlow::Break(())
        }
        fn pre_visit_expr(&mut self, e: &Expr) -> std::ops::ControlFlow<()> {
            if let Expr::Function(f) = e {
                let aggregate = crate::grouping_error::is_aggregate_call(e);
                if aggregate || f.over.is_some() || f.filter.is_some() || !f.within_group.is_empty()
                {
                    return std::ops::ControlFlow::Break(());
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    e.visit(&mut Unsafe).is_continue()
}

/// The function [`ARRAY_OR_EMPTY`] names.
pub fn array_or_empty_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(ArrayOrEmpty {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayOrEmpty {
    signature: Signature,
}

impl ScalarUDFImpl for ArrayOrEmpty {
    fn name(&self) -> &str {
        ARRAY_OR_EMPTY
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args.first() {
            Some(t @ DataType::List(_)) => Ok(t.clone()),
            // the aggregate of a NULL literal
            Some(DataType::Null) => Ok(DataType::List(Arc::new(Field::new_list_field(
                DataType::Utf8,
                true,
            )))),
            other => Err(DataFusionError::Plan(format!(
                "{ARRAY_OR_EMPTY} takes a list, not {other:?}"
            ))),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let Some(arg) = args.args.first() else {
            return Err(DataFusionError::Plan(format!(
                "{ARRAY_OR_EMPTY} takes one argument"
            )));
        };
        let list_type = args.return_field.data_type().clone();
        // a scalar is taken as one value, whatever the batch's row count
        // (which may be 0)
        let array = match arg {
            ColumnarValue::Scalar(s) => s.to_array_of_size(1)?,
            ColumnarValue::Array(a) => Arc::clone(a),
        };
        let array = if array.data_type() == &DataType::Null {
            datafusion::arrow::array::new_null_array(&list_type, array.len())
        } else {
            array
        };
        let filled = empty_for_null(&array)?;
        Ok(match arg {
            ColumnarValue::Scalar(_) => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(filled.as_ref(), 0)?)
            }
            ColumnarValue::Array(_) => ColumnarValue::Array(filled),
        })
    }
}

/// `lists` with every NULL entry an empty list (a NULL entry's offsets
/// may span values, so the values are gathered again).
fn empty_for_null(lists: &ArrayRef) -> DfResult<ArrayRef> {
    if lists.null_count() == 0 {
        return Ok(Arc::clone(lists));
    }
    let list = lists.as_list::<i32>();
    let DataType::List(field) = list.data_type() else {
        return Err(DataFusionError::Internal(format!(
            "{ARRAY_OR_EMPTY} over {}",
            list.data_type()
        )));
    };
    let offsets = list.value_offsets();
    let mut take: Vec<u32> = Vec::new();
    let mut lengths: Vec<usize> = Vec::with_capacity(list.len());
    for row in 0..list.len() {
        if list.is_null(row) {
            lengths.push(0);
            continue;
        }
        let (Some(&start), Some(&end)) = (offsets.get(row), offsets.get(row + 1)) else {
            return Err(DataFusionError::Internal(
                "list offsets out of range".into(),
            ));
        };
        let (start, end) = (
            u32::try_from(start).map_err(|e| DataFusionError::External(Box::new(e)))?,
            u32::try_from(end).map_err(|e| DataFusionError::External(Box::new(e)))?,
        );
        take.extend(start..end);
        lengths.push((end - start) as usize);
    }
    let values =
        datafusion::arrow::compute::take(list.values().as_ref(), &UInt32Array::from(take), None)?;
    Ok(Arc::new(ListArray::try_new(
        Arc::clone(field),
        OffsetBuffer::from_lengths(lengths),
        values,
        None,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int32Array;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> Option<String> {
        let q = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_query())
            .ok()?;
        array_of_subquery(&q).map(|e| e.to_string())
    }

    #[test]
    fn the_element_is_aggregated_in_the_subquery_order() {
        let sql = rewritten("SELECT o.id AS i FROM o WHERE o.c = c.id ORDER BY i DESC");
        assert_eq!(
            sql.as_deref(),
            Some("eddy_array_or_empty((SELECT array_agg(o.id ORDER BY o.id DESC) FROM o WHERE o.c = c.id))")
        );
        assert_eq!(
            rewritten("SELECT DISTINCT x FROM t").as_deref(),
            Some("eddy_array_or_empty((SELECT array_agg(DISTINCT x) FROM t))")
        );
    }

    #[test]
    fn forms_whose_rows_are_not_the_input_are_left_alone() {
        for sql in [
            "SELECT x FROM t LIMIT 2",
            "SELECT x, y FROM t",
            "SELECT x FROM t GROUP BY x",
            "SELECT x FROM t UNION SELECT 1",
            "SELECT DISTINCT x FROM t ORDER BY y",
        ] {
            assert_eq!(rewritten(sql), None, "{sql}");
        }
    }

    #[test]
    fn null_lists_become_empty_and_others_stay() {
        let lists: ArrayRef = Arc::new(ListArray::from_iter_primitive::<
            datafusion::arrow::datatypes::Int32Type,
            _,
            _,
        >(vec![
            Some(vec![Some(1), Some(2)]),
            None,
            Some(vec![Some(3)]),
        ]));
        let out = empty_for_null(&lists).expect("rebuilt");
        let out = out.as_list::<i32>();
        assert_eq!(out.null_count(), 0);
        assert_eq!(out.value_length(1), 0);
        let last = out.value(2);
        let last = last.as_any().downcast_ref::<Int32Array>().expect("ints");
        assert_eq!(last.value(0), 3);
    }
}
