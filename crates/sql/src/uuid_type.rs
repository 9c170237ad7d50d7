//! The `uuid` type in DataFusion plans.
//!
//! A uuid is Arrow `FixedSizeBinary(16)` (see `ColumnType::Uuid`); Arrow
//! cannot cast text to it or back, and DataFusion would compare a uuid
//! column with a string literal as bytes. So:
//! * `x::uuid` is rewritten on the AST (`rewrite.rs`) to `eddy_uuid_in(x)`;
//! * the analyzer rule [`UuidCoercion`], run before DataFusion's type
//!   coercion, reads text as a uuid where it meets one, as PostgreSQL
//!   resolves an `unknown` literal against a uuid operand: the text side of
//!   a comparison or `IN` list with a uuid, and every cast from text to
//!   `FixedSizeBinary(16)` (INSERT's cast of its VALUES to the column
//!   type); every cast of a uuid to text becomes `eddy_uuid_out`, of an
//!   array `eddy_array_out` (PostgreSQL's `{1,2}`);
//! * `gen_random_uuid()` draws a version 4 uuid from the system's CSPRNG.
//!
//! Text that is not a uuid is 22P02, as PostgreSQL's `uuid_in`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, FixedSizeBinaryBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::DFSchema;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::{InList, ScalarFunction};
use datafusion::logical_expr::{
    BinaryExpr, Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TryCast, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use eddy_common::{format_uuid, UUID_LEN};

use crate::error::SqlError;
use crate::pgtypes::uuid_from_text;

/// Arrow's type of a uuid.
pub const UUID_ARROW: DataType = DataType::FixedSizeBinary(16);

/// The name of the text -> uuid function (`x::uuid`).
pub const UUID_IN: &str = "eddy_uuid_in";
/// The name of the uuid -> text function.
pub const UUID_OUT: &str = "eddy_uuid_out";

fn is_text(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 | DataType::Null
    )
}

/// Text (or a uuid, unchanged) -> uuid.
#[derive(Debug, PartialEq, Eq, Hash)]
struct UuidIn {
    signature: Signature,
}

/// uuid -> its text form.
#[derive(Debug, PartialEq, Eq, Hash)]
struct UuidOut {
    signature: Signature,
}

/// `gen_random_uuid()`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct GenRandomUuid {
    signature: Signature,
}

/// The arguments' single array (a scalar expanded to `rows`).
fn single_arg(args: &ScalarFunctionArgs, name: &str) -> DfResult<ArrayRef> {
    match args.args.as_slice() {
        [a] => a.to_array(args.number_rows),
        _ => Err(DataFusionError::Plan(format!("{name} takes one argument"))),
    }
}

impl ScalarUDFImpl for UuidIn {
    fn name(&self) -> &str {
        UUID_IN
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args {
            [t] if is_text(t) || *t == UUID_ARROW => Ok(UUID_ARROW),
            [t] => Err(DataFusionError::from(SqlError::DatatypeMismatch(format!(
                "cannot cast type {t} to uuid"
            )))),
            _ => Err(DataFusionError::Plan(format!(
                "{UUID_IN} takes one argument"
            ))),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = matches!(args.args.as_slice(), [ColumnarValue::Scalar(_)]);
        let a = single_arg(&args, UUID_IN)?;
        if *a.data_type() == UUID_ARROW {
            return crate::udf_args::scalar_if(all_scalar, a);
        }
        let mut out = FixedSizeBinaryBuilder::with_capacity(a.len(), 16);
        let mut put = |s: Option<&str>| -> DfResult<()> {
            match s {
                Some(s) => out.append_value(uuid_from_text(s).map_err(DataFusionError::from)?)?,
                None => out.append_null(),
            }
            Ok(())
        };
        match a.data_type() {
            DataType::Utf8 => a.as_string::<i32>().iter().try_for_each(&mut put)?,
            DataType::LargeUtf8 => a.as_string::<i64>().iter().try_for_each(&mut put)?,
            DataType::Utf8View => a.as_string_view().iter().try_for_each(&mut put)?,
            DataType::Null => (0..a.len()).try_for_each(|_| put(None))?,
            other => {
                return Err(DataFusionError::from(SqlError::DatatypeMismatch(format!(
                    "cannot cast type {other} to uuid"
                ))))
            }
        }
        crate::udf_args::scalar_if(all_scalar, Arc::new(out.finish()))
    }
}

impl ScalarUDFImpl for UuidOut {
    fn name(&self) -> &str {
        UUID_OUT
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = matches!(args.args.as_slice(), [ColumnarValue::Scalar(_)]);
        let a = single_arg(&args, UUID_OUT)?;
        let mut out = StringBuilder::with_capacity(a.len(), a.len() * 36);
        match a.as_fixed_size_binary_opt() {
            Some(b) => {
                for v in b.iter() {
                    match v.map(<[u8; UUID_LEN]>::try_from) {
                        Some(Ok(u)) => out.append_value(format_uuid(&u)),
                        Some(Err(_)) => {
                            return Err(DataFusionError::from(SqlError::Internal(
                                "uuid value is not 16 bytes".into(),
                            )))
                        }
                        None => out.append_null(),
                    }
                }
            }
            None if *a.data_type() == DataType::Null => {
                (0..a.len()).for_each(|_| out.append_null())
            }
            None => {
                return Err(DataFusionError::from(SqlError::Internal(format!(
                    "{UUID_OUT} of {}",
                    a.data_type()
                ))))
            }
        }
        crate::udf_args::scalar_if(all_scalar, Arc::new(out.finish()))
    }
}

impl ScalarUDFImpl for GenRandomUuid {
    fn name(&self) -> &str {
        "gen_random_uuid"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(UUID_ARROW)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        use ring::rand::SecureRandom;
        let rng = ring::rand::SystemRandom::new();
        let n = args.number_rows.max(1);
        let mut out = FixedSizeBinaryBuilder::with_capacity(n, 16);
        for _ in 0..n {
            let mut u = [0u8; UUID_LEN];
            rng.fill(&mut u).map_err(|_| {
                DataFusionError::from(SqlError::Internal("no random bytes for a uuid".into()))
            })?;
            // RFC 4122 version 4, variant 10xx
            u[6] = (u[6] & 0x0f) | 0x40;
            u[8] = (u[8] & 0x3f) | 0x80;
            out.append_value(u)?;
        }
        crate::udf_args::scalar_if(args.number_rows <= 1, Arc::new(out.finish()))
    }
}

fn uuid_in_udf() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(UuidIn {
        signature: Signature::any(1, Volatility::Immutable),
    }))
}

fn uuid_out_udf() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(UuidOut {
        signature: Signature::exact(vec![UUID_ARROW], Volatility::Immutable),
    }))
}

/// The uuid functions a session registers.
pub fn uuid_functions() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::new_from_impl(UuidIn {
            signature: Signature::any(1, Volatility::Immutable),
        }),
        ScalarUDF::new_from_impl(UuidOut {
            signature: Signature::exact(vec![UUID_ARROW], Volatility::Immutable),
        }),
        ScalarUDF::new_from_impl(GenRandomUuid {
            signature: Signature::nullary(Volatility::Volatile),
        }),
    ]
}

fn uuid_in(e: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(uuid_in_udf(), vec![e]))
}

fn uuid_out(e: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(uuid_out_udf(), vec![e]))
}

/// The analyzer rule (module doc); it must run before `TypeCoercion`.
#[derive(Debug, Default)]
pub struct UuidCoercion;

impl AnalyzerRule for UuidCoercion {
    fn name(&self) -> &str {
        "eddy_uuid_coercion"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        Ok(plan.transform_up_with_subqueries(coerce_node)?.data)
    }
}

fn coerce_node(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    if matches!(plan, LogicalPlan::Values(_) | LogicalPlan::TableScan(_)) {
        return Ok(Transformed::no(plan));
    }
    crate::node_rewrite::rewrite_node_expressions(plan, coerce_expr)
}

fn type_of(e: &Expr, schema: &DFSchema) -> Option<DataType> {
    e.get_type(schema).ok()
}

fn is_comparison(op: &Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom
    )
}

fn coerce_expr(e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if is_comparison(&op) => {
            let lt = type_of(&left, schema);
            let rt = type_of(&right, schema);
            let (left, right, changed) = match (lt, rt) {
                (Some(l), Some(r)) if l == UUID_ARROW && is_text(&r) && r != DataType::Null => {
                    (left, Box::new(uuid_in(*right)), true)
                }
                (Some(l), Some(r)) if r == UUID_ARROW && is_text(&l) && l != DataType::Null => {
                    (Box::new(uuid_in(*left)), right, true)
                }
                // text compared with an array: read as that array type
                // (`ids = '{1,2}'`), as PostgreSQL resolves the literal
                (Some(l), Some(r)) if is_text(&r) && r != DataType::Null => {
                    match crate::array_type::array_in_for(&l, *right) {
                        Ok(new) => (left, Box::new(new), true),
                        Err(right) => (left, Box::new(right), false),
                    }
                }
                (Some(l), Some(r)) if is_text(&l) && l != DataType::Null => {
                    match crate::array_type::array_in_for(&r, *left) {
                        Ok(new) => (Box::new(new), right, true),
                        Err(left) => (Box::new(left), right, false),
                    }
                }
                _ => (left, right, false),
            };
            let e = Expr::BinaryExpr(BinaryExpr { left, op, right });
            Ok(if changed {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            })
        }
        Expr::InList(InList {
            expr,
            list,
            negated,
        }) if type_of(&expr, schema) == Some(UUID_ARROW) => {
            let list = list
                .into_iter()
                .map(|x| match type_of(&x, schema) {
                    Some(t) if is_text(&t) && t != DataType::Null => uuid_in(x),
                    _ => x,
                })
                .collect();
            Ok(Transformed::yes(Expr::InList(InList {
                expr,
                list,
                negated,
            })))
        }
        Expr::Cast(Cast { expr, field }) => cast(*expr, field, schema, |expr, field| {
            Expr::Cast(Cast { expr, field })
        }),
        Expr::TryCast(TryCast { expr, field }) => cast(*expr, field, schema, |expr, field| {
            Expr::TryCast(TryCast { expr, field })
        }),
        e => Ok(Transformed::no(e)),
    }
}

fn cast(
    expr: Expr,
    field: FieldRef,
    schema: &DFSchema,
    rebuild: impl Fn(Box<Expr>, FieldRef) -> Expr,
) -> DfResult<Transformed<Expr>> {
    let from = type_of(&expr, schema);
    let to = field.data_type();
    match from {
        Some(f) if *to == UUID_ARROW && is_text(&f) => Ok(Transformed::yes(uuid_in(expr))),
        Some(f) if f == UUID_ARROW && *to == DataType::Utf8 => Ok(Transformed::yes(uuid_out(expr))),
        Some(f) if f == UUID_ARROW && is_text(to) => {
            Ok(Transformed::yes(rebuild(Box::new(uuid_out(expr)), field)))
        }
        // an array's text is array_out's `{1,2}` (Arrow's cast: `[1, 2]`)
        Some(DataType::List(_) | DataType::LargeList(_))
            if is_text(to) && *to != DataType::Null =>
        {
            let text = crate::array_type::array_out(expr);
            Ok(Transformed::yes(if *to == DataType::Utf8 {
                text
            } else {
                rebuild(Box::new(text), field)
            }))
        }
        _ => Ok(Transformed::no(rebuild(Box::new(expr), field))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::StringArray;
    use datafusion::arrow::datatypes::Field;

    fn run(udf: &ScalarUDF, arg: ArrayRef) -> DfResult<ArrayRef> {
        let rows = arg.len();
        let ret = udf.return_type(&[arg.data_type().clone()])?;
        let out = udf.invoke_with_args(ScalarFunctionArgs {
            args: vec![ColumnarValue::Array(arg.clone())],
            arg_fields: vec![Arc::new(Field::new("a", arg.data_type().clone(), true))],
            number_rows: rows,
            return_field: Arc::new(Field::new("r", ret, true)),
            config_options: Arc::new(ConfigOptions::default()),
        })?;
        out.to_array(rows)
    }

    #[test]
    fn text_round_trips_through_uuid() {
        let fs = uuid_functions();
        let input: ArrayRef = Arc::new(StringArray::from(vec![
            Some("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"),
            None,
            Some("{a0eebc999c0b4ef8bb6d6bb9bd380a11}"),
        ]));
        let u = run(&fs[0], input).expect("uuid_in");
        let back = run(&fs[1], u).expect("uuid_out");
        let back = back.as_string::<i32>();
        assert_eq!(back.value(0), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
        assert!(back.is_null(1));
        assert_eq!(back.value(2), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    }

    #[test]
    fn bad_text_is_22p02() {
        let fs = uuid_functions();
        let input: ArrayRef = Arc::new(StringArray::from(vec!["not-a-uuid"]));
        let err = run(&fs[0], input).expect_err("bad uuid");
        let sql = crate::error::SqlError::from(err);
        assert_eq!(sql.sqlstate(), "22P02");
    }
}
