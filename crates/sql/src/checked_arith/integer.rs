//! `+`, `-` and `*` on int2, int4 and int8 that fail with 22003 on
//! overflow (`eddy_int_add`, `eddy_int_sub`, `eddy_int_mul`), evaluated
//! with Arrow's checked kernels. The GPU code generator knows these names.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, Datum};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::SqlError;

pub(super) static ADD: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(CheckedOp::new(Op::Add))));
pub(super) static SUB: LazyLock<Arc<ScalarUDF>> =
    LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(CheckedOp::new(Op::Sub))));
pub(super) static MUL: LazyLock<Arc<ScalarUDF>> =
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
