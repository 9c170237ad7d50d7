//! Integer arithmetic that fails on overflow, as PostgreSQL's does.
//!
//! DataFusion evaluates `+`, `-` and `*` on integers with wrapping kernels:
//! `9223372036854775807 + 1` is a negative number and `2147483647::int +
//! 1::int` is -2147483648, a wrong answer returned without an error (and
//! stored, by `UPDATE ... SET n = n * 2`). PostgreSQL answers 22003
//! ("integer out of range"). This analyzer rule, run after DataFusion's
//! type coercion, replaces each such operation whose operands are both
//! int2, int4 or int8 with a call to a checked function of the same type
//! (`eddy_int_add`, `eddy_int_sub`, `eddy_int_mul`), evaluated with Arrow's
//! checked kernels.
//!
//! Invariants: result types and output names do not change (names are
//! preserved the way DataFusion's own type coercion preserves them), so
//! nothing above the rewritten expression notices; only integer operands
//! of one type are rewritten (coercion has made them so); everything else
//! is left to DataFusion.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, Datum};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, DataFusionError, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::error::SqlError;

/// The analyzer rule; add it to a session after the built-in rules.
#[derive(Debug, Default)]
pub struct CheckedIntegerArithmetic;

impl AnalyzerRule for CheckedIntegerArithmetic {
    fn name(&self) -> &str {
        "eddy_checked_integer_arithmetic"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        Ok(plan.transform_up_with_subqueries(rewrite_node)?.data)
    }
}

fn rewrite_node(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let schema = merge_schema(&plan.inputs());
    let names = NamePreserver::new(&plan);
    plan.map_expressions(|expr| {
        let original = names.save(&expr);
        // Types are computed bottom-up, once per node: the post-order walk
        // leaves each child's type on `types`, so a chain of n operators
        // costs O(n), not the O(n^2) of asking every node for its type
        // (`get_type` recurses through the whole subtree).
        let mut types: Vec<Option<DataType>> = Vec::new();
        expr.transform_up(|e| rewrite_expr(e, &schema, &mut types))
            .map(|t| t.update_data(|e| original.restore(e)))
    })
}

fn rewrite_expr(
    e: Expr,
    schema: &DFSchema,
    types: &mut Vec<Option<DataType>>,
) -> DfResult<Transformed<Expr>> {
    let mut children = 0usize;
    e.apply_children(|_| {
        children += 1;
        Ok(TreeNodeRecursion::Continue)
    })?;
    let child_types = types.split_off(types.len().saturating_sub(children));
    let udf = match &e {
        Expr::BinaryExpr(BinaryExpr { op, .. }) => match op {
            Operator::Plus => Some(&*ADD),
            Operator::Minus => Some(&*SUB),
            Operator::Multiply => Some(&*MUL),
            _ => None,
        },
        _ => None,
    };
    let operands = match child_types.as_slice() {
        [Some(l), Some(r)] if l == r => Some(l.clone()),
        _ => None,
    };
    match (e, udf, operands) {
        (Expr::BinaryExpr(BinaryExpr { left, right, .. }), Some(udf), Some(t))
            if matches!(t, DataType::Int16 | DataType::Int32 | DataType::Int64) =>
        {
            types.push(Some(t));
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(Arc::clone(udf), vec![*left, *right]),
            )))
        }
        (e, _, operands) => {
            // arithmetic on operands of one type has that type; anything
            // else is asked (a column this node cannot type, resolved
            // elsewhere, has none, and nothing above it is rewritten)
            let own = match (&e, operands) {
                (Expr::BinaryExpr(BinaryExpr { op, .. }), Some(t))
                    if matches!(
                        op,
                        Operator::Plus
                            | Operator::Minus
                            | Operator::Multiply
                            | Operator::Divide
                            | Operator::Modulo
                    ) && t.is_numeric() =>
                {
                    Some(t)
                }
                (
                    Expr::BinaryExpr(BinaryExpr {
                        op:
                            Operator::Eq
                            | Operator::NotEq
                            | Operator::Lt
                            | Operator::LtEq
                            | Operator::Gt
                            | Operator::GtEq
                            | Operator::And
                            | Operator::Or,
                        ..
                    }),
                    _,
                ) => Some(DataType::Boolean),
                _ => e.get_type(schema).ok(),
            };
            types.push(own);
            Ok(Transformed::no(e))
        }
    }
}

static ADD: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(CheckedOp::new(Op::Add))));
static SUB: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(CheckedOp::new(Op::Sub))));
static MUL: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(CheckedOp::new(Op::Mul))));

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Add,
    Sub,
    Mul,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedOp {
    op: Op,
    signature: Signature,
}

impl CheckedOp {
    fn new(op: Op) -> CheckedOp {
        let same = |t: DataType| vec![t.clone(), t];
        CheckedOp {
            op,
            signature: Signature::one_of(
                vec![
                    datafusion::logical_expr::TypeSignature::Exact(same(DataType::Int16)),
                    datafusion::logical_expr::TypeSignature::Exact(same(DataType::Int32)),
                    datafusion::logical_expr::TypeSignature::Exact(same(DataType::Int64)),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for CheckedOp {
    fn name(&self) -> &str {
        match self.op {
            Op::Add => "eddy_int_add",
            Op::Sub => "eddy_int_sub",
            Op::Mul => "eddy_int_mul",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        args.first()
            .cloned()
            .ok_or_else(|| DataFusionError::Plan(format!("{} takes two arguments", self.name())))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let [l, r] = args.args.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "{} takes two arguments",
                self.name()
            )));
        };
        let both_scalar = matches!((l, r), (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_)));
        let ld = datum(l)?;
        let rd = datum(r)?;
        let kernel = match self.op {
            Op::Add => numeric::add,
            Op::Sub => numeric::sub,
            Op::Mul => numeric::mul,
        };
        let out: ArrayRef = kernel(ld.as_ref(), rd.as_ref()).map_err(|e| match e {
            datafusion::arrow::error::ArrowError::ArithmeticOverflow(_) => {
                DataFusionError::External(Box::new(out_of_range(
                    &args.return_field.data_type().clone(),
                )))
            }
            other => DataFusionError::ArrowError(Box::new(other), None),
        })?;
        if both_scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }
}

fn datum(v: &ColumnarValue) -> DfResult<Box<dyn Datum>> {
    Ok(match v {
        ColumnarValue::Array(a) => Box::new(Arc::clone(a)),
        ColumnarValue::Scalar(s) => Box::new(s.to_scalar()?),
    })
}

fn out_of_range(t: &DataType) -> SqlError {
    let name = match t {
        DataType::Int16 => "smallint",
        DataType::Int32 => "integer",
        _ => "bigint",
    };
    SqlError::NumericOutOfRange(format!("{name} out of range"))
}
