//! `nextval`, `currval`, `setval` and `lastval` as DataFusion functions of
//! one session.
//!
//! They are volatile: DataFusion neither folds them into constants nor
//! evaluates them once per statement; `nextval` called for a batch of `n`
//! rows returns `n` distinct values. `currval` and `lastval` read the
//! session's own record of the values it got ([`SessionSequences`]), as in
//! PostgreSQL, so they never see another session's `nextval`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use parking_lot::Mutex;

use crate::error::SqlError;
use crate::sequences::{resolve_name, Sequences};
use crate::udf_args::{int_at, scalar_at, text_at};

/// What one session has drawn from sequences, and which sequences its open
/// transaction block has dropped (gone for this session until the block
/// ends; other sessions see them until it commits).
#[derive(Default)]
pub struct SessionSequences {
    current: HashMap<String, i64>,
    last: Option<i64>,
    dropped_in_block: HashSet<String>,
}

impl SessionSequences {
    /// Sets the sequences the open block has dropped (none outside one).
    pub fn set_dropped_in_block(&mut self, names: &[String]) {
        self.dropped_in_block = names.iter().cloned().collect();
    }

    /// A sequence name as this session sees it: 42P01 for one its open
    /// block dropped.
    fn visible(&self, text: &str) -> Result<String, SqlError> {
        let name = resolve_name(text)?;
        if self.dropped_in_block.contains(&name) {
            return Err(SqlError::UndefinedTable(name));
        }
        Ok(name)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Nextval,
    Currval,
    Setval,
    Lastval,
}

struct SequenceFunction {
    kind: Kind,
    signature: Signature,
    sequences: Arc<Sequences>,
    session: Arc<Mutex<SessionSequences>>,
}

impl std::fmt::Debug for SequenceFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SequenceFunction({:?})", self.kind)
    }
}

impl PartialEq for SequenceFunction {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && Arc::ptr_eq(&self.session, &other.session)
    }
}
impl Eq for SequenceFunction {}
impl std::hash::Hash for SequenceFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state)
    }
}

fn bool_arg(args: &[ColumnarValue], i: usize, row: usize) -> DfResult<Option<bool>> {
    match scalar_at(args, i, row)? {
        // setval(name, value): is_called defaults to true
        None => Ok(Some(true)),
        Some(ScalarValue::Boolean(b)) => Ok(b),
        Some(v) if v.is_null() => Ok(None),
        Some(_) => Err(DataFusionError::from(SqlError::DatatypeMismatch(
            "setval's third argument must be boolean".into(),
        ))),
    }
}

impl SequenceFunction {
    fn one(&self, args: &[ColumnarValue], row: usize) -> DfResult<Option<i64>> {
        let mut session = self.session.lock();
        match self.kind {
            Kind::Lastval => session.last.map(Some).ok_or_else(|| {
                DataFusionError::from(SqlError::NotInPrerequisiteState(
                    "lastval is not yet defined in this session".into(),
                ))
            }),
            Kind::Nextval => {
                let Some(text) = text_at(args, 0, row)? else {
                    return Ok(None);
                };
                let name = session.visible(&text).map_err(DataFusionError::from)?;
                let v = self
                    .sequences
                    .nextval(&name)
                    .map_err(DataFusionError::from)?;
                session.current.insert(name, v);
                session.last = Some(v);
                Ok(Some(v))
            }
            Kind::Currval => {
                let Some(text) = text_at(args, 0, row)? else {
                    return Ok(None);
                };
                let name = session.visible(&text).map_err(DataFusionError::from)?;
                if !self.sequences.exists(&name) {
                    return Err(DataFusionError::from(SqlError::UndefinedTable(name)));
                }
                session
                    .current
                    .get(&name)
                    .copied()
                    .map(Some)
                    .ok_or_else(|| {
                        DataFusionError::from(SqlError::NotInPrerequisiteState(format!(
                            "currval of sequence \"{name}\" is not yet defined in this session"
                        )))
                    })
            }
            Kind::Setval => {
                let (Some(text), Some(value), Some(called)) = (
                    text_at(args, 0, row)?,
                    int_at(args, 1, row)?,
                    bool_arg(args, 2, row)?,
                ) else {
                    return Ok(None);
                };
                let name = session.visible(&text).map_err(DataFusionError::from)?;
                let v = self
                    .sequences
                    .setval(&name, value, called)
                    .map_err(DataFusionError::from)?;
                if called {
                    session.current.insert(name, v);
                    session.last = Some(v);
                }
                Ok(Some(v))
            }
        }
    }
}

impl ScalarUDFImpl for SequenceFunction {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Nextval => "nextval",
            Kind::Currval => "currval",
            Kind::Setval => "setval",
            Kind::Lastval => "lastval",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let n = args.number_rows;
        let mut out = Int64Array::builder(n);
        for row in 0..n {
            out.append_option(self.one(&args.args, row)?);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
    }
}

/// The four functions for one session.
pub fn sequence_functions(
    sequences: &Arc<Sequences>,
    session: &Arc<Mutex<SessionSequences>>,
) -> Vec<ScalarUDF> {
    [
        (Kind::Nextval, vec![TypeSignature::Any(1)]),
        (Kind::Currval, vec![TypeSignature::Any(1)]),
        (
            Kind::Setval,
            vec![TypeSignature::Any(2), TypeSignature::Any(3)],
        ),
        (Kind::Lastval, vec![TypeSignature::Nullary]),
    ]
    .into_iter()
    .map(|(kind, sigs)| {
        ScalarUDF::new_from_impl(SequenceFunction {
            kind,
            signature: Signature::one_of(sigs, Volatility::Volatile),
            sequences: Arc::clone(sequences),
            session: Arc::clone(session),
        })
    })
    .collect()
}
