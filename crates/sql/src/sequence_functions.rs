//! `nextval`, `currval`, `setval` and `lastval` as DataFusion functions of
//! one session.
//!
//! They are volatile: DataFusion neither folds them into constants nor
//! evaluates them once per statement; `nextval` called for a batch of `n`
//! rows returns `n` distinct values. `currval` and `lastval` read the
//! session's own record of the values it got ([`SessionSequences`]), as in
//! PostgreSQL, so they never see another session's `nextval`.
//!
//! Each call is checked against the sequence's owner and grants
//! ([`SequenceCaller`]), as PostgreSQL checks them: `nextval` needs USAGE
//! or UPDATE, `currval` and `lastval` SELECT or USAGE, `setval` UPDATE
//! (42501 otherwise). So an INSERT filling a SERIAL column needs USAGE on
//! its sequence, as in PostgreSQL. An identity column's sequence also
//! gives `nextval` to whoever may INSERT into or UPDATE its table:
//! PostgreSQL draws identity values without a check, and Eddy's identity
//! default is a `nextval` call.

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

use eddy_common::TablePrivileges;
use eddy_storage::Engine;

use crate::error::SqlError;
use crate::privileges::relation_privileges;
use crate::roles::Roles;
use crate::sequences::{resolve_name, SequenceDef, Sequences};
use crate::udf_args::{int_at, scalar_at, text_at};

/// What one session has drawn from sequences, and which sequences its open
/// transaction block has dropped (gone for this session until the block
/// ends; other sessions see them until it commits).
#[derive(Default)]
pub struct SessionSequences {
    current: HashMap<String, i64>,
    /// The value and sequence of the last `nextval` (for `lastval`).
    last: Option<(i64, String)>,
    dropped_in_block: HashSet<String>,
    /// Sequences whose parameters the open block altered (`ALTER
    /// SEQUENCE ... INCREMENT` etc., applied when it commits): this
    /// session may not draw from or set them until then.
    altered_in_block: HashSet<String>,
    /// Whose privileges the calls are checked against (`None`: no check,
    /// for sessions with no user).
    caller: Option<SequenceCaller>,
}

/// The session's user, checked against each sequence's owner and grants.
pub struct SequenceCaller {
    pub user: String,
    pub roles: Arc<Roles>,
    pub engine: Arc<Engine>,
}

impl SequenceCaller {
    /// Refuses (42501) `kind` on sequence `name` unless the user holds
    /// one of the privileges it needs (module doc).
    fn check(&self, sequences: &Sequences, name: &str, kind: Kind) -> Result<(), SqlError> {
        if self.roles.privileges_of(&self.user).superuser {
            return Ok(());
        }
        let Some(def) = sequences.def(name) else {
            // the function reports the missing sequence itself
            return Ok(());
        };
        let mine = self.roles.effective_roles(&self.user);
        let owner = def
            .owner
            .as_deref()
            .unwrap_or(crate::roles::BOOTSTRAP_SUPERUSER);
        let held = relation_privileges(&mine, owner, &def.acl, TablePrivileges::SEQUENCE_ALL);
        let any_of = match kind {
            Kind::Nextval => TablePrivileges::USAGE.union(TablePrivileges::UPDATE),
            Kind::Currval | Kind::Lastval => TablePrivileges::USAGE.union(TablePrivileges::SELECT),
            Kind::Setval => TablePrivileges::UPDATE,
        };
        if held.0 & any_of.0 != 0 {
            return Ok(());
        }
        if kind == Kind::Nextval && self.draws_identity(&def, &mine) {
            return Ok(());
        }
        Err(SqlError::InsufficientPrivilege(format!(
            "permission denied for sequence {name}"
        )))
    }

    /// Whether `def` is an identity column's sequence and `mine` may
    /// INSERT into or UPDATE its table.
    fn draws_identity(&self, def: &SequenceDef, mine: &HashSet<String>) -> bool {
        let Some(owned_by) = &def.owned_by else {
            return false;
        };
        let Some(table) = self.engine.table(&owned_by.table) else {
            return false;
        };
        let t = table.def();
        let identity = t
            .columns
            .iter()
            .any(|c| c.name == owned_by.column && c.identity.is_some());
        let held = crate::privileges::table_privileges(mine, t);
        identity
            && (held.contains(TablePrivileges::INSERT) || held.contains(TablePrivileges::UPDATE))
    }
}

impl SessionSequences {
    /// The record of a session whose calls are checked for `caller`.
    pub fn for_caller(caller: SequenceCaller) -> SessionSequences {
        SessionSequences {
            caller: Some(caller),
            ..SessionSequences::default()
        }
    }

    /// Checks `kind` on `name` once per batch (`checked`: the names
    /// already checked in it).
    fn check(
        &self,
        sequences: &Sequences,
        name: &str,
        kind: Kind,
        checked: &mut Vec<String>,
    ) -> Result<(), SqlError> {
        let Some(caller) = &self.caller else {
            return Ok(());
        };
        if checked.iter().any(|c| c == name) {
            return Ok(());
        }
        caller.check(sequences, name, kind)?;
        checked.push(name.to_string());
        Ok(())
    }

    /// Sets the sequences the open block has dropped (none outside one).
    pub fn set_dropped_in_block(&mut self, names: &[String]) {
        self.dropped_in_block = names.iter().cloned().collect();
    }

    /// Sets the sequences whose parameters the open block has altered.
    pub fn set_altered_in_block(&mut self, names: impl IntoIterator<Item = String>) {
        self.altered_in_block = names.into_iter().collect();
    }

    /// 0A000 for drawing from or setting a sequence the open block
    /// altered (the values would follow its old parameters).
    fn check_not_altered(&self, name: &str, kind: Kind) -> Result<(), SqlError> {
        if !self.altered_in_block.contains(name) {
            return Ok(());
        }
        let function = if kind == Kind::Setval {
            "setval"
        } else {
            "nextval"
        };
        Err(SqlError::FeatureNotSupported(format!(
            "{function} of sequence \"{name}\" after ALTER SEQUENCE changed its parameters in \
             the same transaction block is not supported: commit the block first"
        )))
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
    fn one(
        &self,
        args: &[ColumnarValue],
        row: usize,
        checked: &mut Vec<String>,
    ) -> DfResult<Option<i64>> {
        let mut session = self.session.lock();
        match self.kind {
            Kind::Lastval => {
                let (value, name) = session.last.clone().ok_or_else(|| {
                    DataFusionError::from(SqlError::NotInPrerequisiteState(
                        "lastval is not yet defined in this session".into(),
                    ))
                })?;
                session
                    .check(&self.sequences, &name, self.kind, checked)
                    .map_err(DataFusionError::from)?;
                Ok(Some(value))
            }
            Kind::Nextval => {
                let Some(text) = text_at(args, 0, row)? else {
                    return Ok(None);
                };
                let name = session.visible(&text).map_err(DataFusionError::from)?;
                session
                    .check(&self.sequences, &name, self.kind, checked)
                    .map_err(DataFusionError::from)?;
                session
                    .check_not_altered(&name, self.kind)
                    .map_err(DataFusionError::from)?;
                let v = self
                    .sequences
                    .nextval(&name)
                    .map_err(DataFusionError::from)?;
                session.current.insert(name.clone(), v);
                session.last = Some((v, name));
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
                    .check(&self.sequences, &name, self.kind, checked)
                    .map_err(DataFusionError::from)?;
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
                session
                    .check(&self.sequences, &name, self.kind, checked)
                    .map_err(DataFusionError::from)?;
                session
                    .check_not_altered(&name, self.kind)
                    .map_err(DataFusionError::from)?;
                let v = self
                    .sequences
                    .setval(&name, value, called)
                    .map_err(DataFusionError::from)?;
                if called {
                    session.current.insert(name.clone(), v);
                    session.last = Some((v, name));
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
        let mut checked = Vec::new();
        for row in 0..n {
            out.append_option(self.one(&args.args, row, &mut checked)?);
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
