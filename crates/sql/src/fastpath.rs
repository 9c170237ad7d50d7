//! Fixed plans: prepared primary-key lookups and single-row writes that go
//! straight to `Table::get` / `multi_get` / `write` without DataFusion.
//!
//! Recognised shapes (PK = every primary-key column, `?` = `$n` or a literal):
//! * `SELECT cols|* FROM t WHERE pk = ?` (AND-ed for composite keys),
//!   `WHERE pk IN (?, ...)`, `WHERE pk = ANY($n)` (single-column keys);
//! * `INSERT INTO t [(cols)] VALUES (?, ...) [ON CONFLICT ... DO NOTHING |
//!   DO UPDATE SET c = <simple expression>]`;
//! * `UPDATE t SET c = ? | c = c + ? | c = c - ?, ... WHERE pk = ?` (not
//!   changing the key; increments on integer columns only);
//! * `DELETE FROM t WHERE pk = ?`.
//!
//! Anything else returns `None` from [`recognise`] and takes the general
//! path. A fixed plan names its table; it re-resolves the table on every
//! execution, so a dropped table gives 42P01, never a stale write.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::sql::sqlparser::ast::{
    visit_expressions, visit_relations, AssignmentTarget, BinaryOperator, Expr, FromTable,
    MergeAction, MergeInsertKind, ObjectNamePart, OnConflictAction, OnInsert, SelectItem, SetExpr,
    Statement, TableFactor, TableObject, UnaryOperator, Value as SqlValue,
};
use eddy_common::{ColumnType, Row, TableDef, Value};
use eddy_storage::{ConflictUpdateFn, Engine, Key, LockMode, LockWait, OnConflict, Table, WriteOp};

use crate::error::{Result, SqlError};
use crate::pgtypes::{self, coerce_value, oid_for_column_type, parse_text};
use crate::rewrite::{ident_name, placeholder_index, table_name};
use crate::session::{batches_output, Output, ResultColumn};

/// Where a value comes from: a parameter (0-based) or a literal.
#[derive(Clone, Debug)]
pub enum Src {
    Param(usize),
    Lit(Value),
    /// `CURRENT_TIMESTAMP`, `now()` and `LOCALTIMESTAMP` written into a
    /// timestamp or timestamptz
    /// column: the statement's start, one value for the whole statement,
    /// as DataFusion's `now()` gives it on the general path (a session not
    /// in UTC runs such plans on the general path: `binds_datetime`).
    Now,
}

#[derive(Clone, Debug)]
pub enum Keys {
    /// One key: a source per primary-key column.
    One(Vec<Src>),
    /// An IN list of single-column keys.
    Many(Vec<Src>),
    /// `pk = ANY($n)`: an array parameter.
    AnyArray(usize),
}

/// `SET c = c + d` (or `- d`) on an integer column: evaluated on the row's
/// current version with PostgreSQL's integer arithmetic (22003 when the
/// result leaves the column's type).
#[derive(Clone, Debug)]
pub struct Increment {
    pub column: usize,
    pub delta: Src,
    pub subtract: bool,
}

/// A fixed plan.
#[derive(Clone)]
pub enum FastPlan {
    Get {
        table: String,
        proj: Vec<usize>,
        columns: Vec<ResultColumn>,
        keys: Keys,
        params: Vec<u32>,
    },
    Insert {
        table: String,
        targets: Vec<usize>,
        values: Vec<Src>,
        on_conflict: OnConflict,
        count_updates: bool,
        params: Vec<u32>,
    },
    Update {
        table: String,
        sets: Vec<(usize, Src)>,
        adds: Vec<Increment>,
        key: Vec<Src>,
        params: Vec<u32>,
    },
    Delete {
        table: String,
        key: Vec<Src>,
        params: Vec<u32>,
    },
}

impl FastPlan {
    /// Whether the plan reads or writes a date or timestamp value (a
    /// parameter or constant of such a column, or the statement's start
    /// time): the values it binds are converted without a session zone,
    /// so a session whose TimeZone is not UTC runs it on the general path
    /// (`crate::zone_rules`).
    pub fn binds_datetime(&self) -> bool {
        use pgtypes::oid;
        let datetime_param = self.param_oids().iter().any(|o| {
            matches!(*o, oid::DATE | oid::TIMESTAMP | oid::TIMESTAMPTZ)
                || matches!(
                    pgtypes::column_type_for_oid(*o),
                    Some(ColumnType::Array(
                        eddy_common::ArrayElem::Date
                            | eddy_common::ArrayElem::Timestamp
                            | eddy_common::ArrayElem::TimestampTz
                    ))
                )
        });
        let datetime_src = |s: &Src| match s {
            Src::Now => true,
            Src::Lit(v) => matches!(v, Value::Date(_) | Value::Timestamp(_) | Value::Array(_)),
            Src::Param(_) => false,
        };
        let srcs: Vec<&Src> = match self {
            FastPlan::Get { keys, .. } => match keys {
                Keys::One(k) | Keys::Many(k) => k.iter().collect(),
                Keys::AnyArray(_) => vec![],
            },
            // DO UPDATE's expressions were planned without a zone
            FastPlan::Insert {
                on_conflict: OnConflict::Update(_),
                ..
            } => return true,
            FastPlan::Insert { values, .. } => values.iter().collect(),
            FastPlan::Update {
                sets, adds, key, ..
            } => sets
                .iter()
                .map(|(_, s)| s)
                .chain(adds.iter().map(|a| &a.delta))
                .chain(key)
                .collect(),
            FastPlan::Delete { key, .. } => key.iter().collect(),
        };
        datetime_param || srcs.into_iter().any(datetime_src)
    }

    /// The type (oid) the plan inferred for each parameter.
    pub fn param_oids(&self) -> &[u32] {
        match self {
            FastPlan::Get { params, .. }
            | FastPlan::Insert { params, .. }
            | FastPlan::Update { params, .. }
            | FastPlan::Delete { params, .. } => params,
        }
    }
}

/// `params` with each parameter the client declared NUMERIC that this plan
/// only assigns to integer columns (`INSERT ... VALUES ($n)`, `UPDATE ...
/// SET c = $n`) converted as PostgreSQL's assignment cast converts it:
/// rounded, ties away from zero (`numeric_int4`). A NUMERIC parameter stays
/// its exact text elsewhere. `None` when a NUMERIC parameter meets an
/// integer column in a comparison or an addition (`WHERE id = $1`, `SET n
/// = n + $1`): there PostgreSQL computes in numeric (2.5 matches no
/// integer key; `n + 0.5` rounds after the sum), which the fixed plan's
/// integer arithmetic cannot, so the statement takes the general path.
pub(crate) fn numeric_params_to_integers<'a>(
    plan: &FastPlan,
    declared: &[u32],
    params: &'a [Value],
) -> Result<Option<std::borrow::Cow<'a, [Value]>>> {
    use pgtypes::oid;
    if !declared.contains(&oid::NUMERIC) {
        return Ok(Some(std::borrow::Cow::Borrowed(params)));
    }
    let integer_type = |i: usize| match plan.param_oids().get(i).copied() {
        Some(oid::INT2) => Some(ColumnType::SmallInt),
        Some(oid::INT4) => Some(ColumnType::Int),
        Some(oid::INT8) => Some(ColumnType::BigInt),
        _ => None,
    };
    let numeric = |i: usize| declared.get(i) == Some(&oid::NUMERIC);
    let param = |s: &Src| match s {
        Src::Param(i) => Some(*i),
        _ => None,
    };
    let (assigned, elsewhere): (Vec<usize>, Vec<usize>) = match plan {
        FastPlan::Insert { values, .. } => (values.iter().filter_map(param).collect(), vec![]),
        FastPlan::Update {
            sets, adds, key, ..
        } => (
            sets.iter().filter_map(|(_, s)| param(s)).collect(),
            adds.iter()
                .map(|a| &a.delta)
                .chain(key)
                .filter_map(param)
                .collect(),
        ),
        FastPlan::Get { keys, .. } => (
            vec![],
            match keys {
                Keys::One(k) | Keys::Many(k) => k.iter().filter_map(param).collect(),
                Keys::AnyArray(i) => vec![*i],
            },
        ),
        FastPlan::Delete { key, .. } => (vec![], key.iter().filter_map(param).collect()),
    };
    if elsewhere
        .iter()
        .any(|i| numeric(*i) && integer_type(*i).is_some())
    {
        return Ok(None);
    }
    let mut out = params.to_vec();
    for i in assigned {
        let Some(ty) = integer_type(i).filter(|_| numeric(i)) else {
            continue;
        };
        if let Some(slot) = out.get_mut(i) {
            if let Value::Text(t) = slot {
                *slot = pgtypes::numeric_text_to_integer(t, ty)?;
            }
        }
    }
    Ok(Some(std::borrow::Cow::Owned(out)))
}

impl std::fmt::Debug for FastPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FastPlan::Get { table, keys, .. } => write!(f, "FastGet({table}, {keys:?})"),
            FastPlan::Insert { table, .. } => write!(f, "FastInsert({table})"),
            FastPlan::Update { table, .. } => write!(f, "FastUpdate({table})"),
            FastPlan::Delete { table, .. } => write!(f, "FastDelete({table})"),
        }
    }
}

impl FastPlan {
    pub fn param_types(&self) -> &[u32] {
        match self {
            FastPlan::Get { params, .. }
            | FastPlan::Insert { params, .. }
            | FastPlan::Update { params, .. }
            | FastPlan::Delete { params, .. } => params,
        }
    }

    pub fn columns(&self) -> Vec<ResultColumn> {
        match self {
            FastPlan::Get { columns, .. } => columns.clone(),
            _ => vec![],
        }
    }
}

fn note_param(params: &mut Vec<u32>, idx: usize, oid: u32) {
    if params.len() <= idx {
        params.resize(idx + 1, 0);
    }
    if params[idx] == 0 {
        params[idx] = oid;
    }
}

/// A value source for an expression of type `ty`, if it is simple enough.
fn src_of(e: &Expr, ty: ColumnType, params: &mut Vec<u32>) -> Option<Src> {
    if let Some(n) = placeholder_index(e) {
        note_param(params, n - 1, oid_for_column_type(ty));
        return Some(Src::Param(n - 1));
    }
    literal_value(e)
        .and_then(|v| coerce_value(v, ty).ok())
        .map(Src::Lit)
}

/// [`src_of`] for a value written into a column (INSERT values, UPDATE
/// sets): also the statement-start functions ([`Src::Now`]). Keys never
/// take them.
fn value_src_of(e: &Expr, ty: ColumnType, params: &mut Vec<u32>) -> Option<Src> {
    if is_statement_time(e) && ty.storage() == ColumnType::Timestamp {
        return Some(Src::Now);
    }
    src_of(e, ty, params)
}

/// `CURRENT_TIMESTAMP`, `LOCALTIMESTAMP` (no precision) or `now()`: plain
/// calls, no arguments, no FILTER/OVER.
fn is_statement_time(e: &Expr) -> bool {
    use datafusion::sql::sqlparser::ast::FunctionArguments;
    let Expr::Function(f) = e else {
        return false;
    };
    let [ObjectNamePart::Identifier(id)] = f.name.0.as_slice() else {
        return false;
    };
    let name = id.value.to_ascii_lowercase();
    let no_args = match &f.args {
        FunctionArguments::None => matches!(name.as_str(), "current_timestamp" | "localtimestamp"),
        FunctionArguments::List(l) => {
            l.args.is_empty()
                && l.clauses.is_empty()
                && l.duplicate_treatment.is_none()
                && name == "now"
        }
        FunctionArguments::Subquery(_) => false,
    };
    no_args
        && f.filter.is_none()
        && f.over.is_none()
        && f.within_group.is_empty()
        && matches!(f.parameters, FunctionArguments::None)
}

/// The current time in microseconds since the Unix epoch, UTC: taken once
/// when a statement (or a transaction) starts, it is what [`Src::Now`]
/// resolves to.
pub(crate) fn statement_time() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX)
}

/// The value of a literal expression (numbers, strings, booleans, NULL, -n).
pub fn literal_value(e: &Expr) -> Option<Value> {
    match e {
        Expr::Value(v) => match &v.value {
            SqlValue::Number(n, _) => n
                .parse::<i64>()
                .map(Value::BigInt)
                .ok()
                .or_else(|| n.parse::<f64>().ok().map(|_| Value::Text(n.clone()))),
            SqlValue::SingleQuotedString(s) => Some(Value::Text(s.clone())),
            SqlValue::Boolean(b) => Some(Value::Boolean(*b)),
            SqlValue::Null => Some(Value::Null),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match literal_value(expr)? {
            Value::BigInt(x) => Some(Value::BigInt(-x)),
            Value::Text(t) => Some(Value::Text(format!("-{t}"))),
            _ => None,
        },
        Expr::Nested(inner) => literal_value(inner),
        _ => None,
    }
}

fn column_name(e: &Expr, alias: &str) -> Option<String> {
    match e {
        Expr::Identifier(id) => Some(ident_name(id)),
        Expr::CompoundIdentifier(parts) if parts.len() == 2 && ident_name(&parts[0]) == alias => {
            Some(ident_name(&parts[1]))
        }
        Expr::Nested(inner) => column_name(inner, alias),
        _ => None,
    }
}

/// Collect `column = source` equalities of an AND-chain.
fn equalities(
    e: &Expr,
    alias: &str,
    def: &TableDef,
    out: &mut HashMap<usize, Src>,
    params: &mut Vec<u32>,
) -> bool {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            equalities(left, alias, def, out, params) && equalities(right, alias, def, out, params)
        }
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => {
            let (col, other) = match (column_name(left, alias), column_name(right, alias)) {
                (Some(c), None) => (c, right),
                (None, Some(c)) => (c, left),
                _ => return false,
            };
            let Some(idx) = def.column_index(&col) else {
                return false;
            };
            match src_of(other, def.columns[idx].ty, params) {
                Some(s) => out.insert(idx, s).is_none(),
                None => false,
            }
        }
        Expr::Nested(inner) => equalities(inner, alias, def, out, params),
        _ => false,
    }
}

fn key_equalities(
    e: &Expr,
    alias: &str,
    def: &TableDef,
    params: &mut Vec<u32>,
) -> Option<Vec<Src>> {
    let mut eqs = HashMap::new();
    if !equalities(e, alias, def, &mut eqs, params) || eqs.len() != def.primary_key.len() {
        return None;
    }
    def.primary_key.iter().map(|k| eqs.remove(k)).collect()
}

/// Recognise a fixed-plan shape.
pub fn recognise(
    stmt: &Statement,
    engine: &Arc<Engine>,
    ctx: &datafusion::prelude::SessionContext,
) -> Option<FastPlan> {
    match stmt {
        Statement::Query(q) => {
            if q.with.is_some()
                || q.order_by.is_some()
                || q.limit_clause.is_some()
                || q.fetch.is_some()
                || !q.locks.is_empty()
            {
                return None;
            }
            let SetExpr::Select(s) = q.body.as_ref() else {
                return None;
            };
            if s.from.len() != 1
                || !s.from[0].joins.is_empty()
                || s.distinct.is_some()
                || s.having.is_some()
                || s.top.is_some()
            {
                return None;
            }
            if !matches!(&s.group_by, datafusion::sql::sqlparser::ast::GroupByExpr::Expressions(v, m) if v.is_empty() && m.is_empty())
            {
                return None;
            }
            let (tname, alias) = relation(&s.from[0].relation)?;
            let table = engine.table(&tname)?;
            let def = table.def().clone();
            if !def.has_primary_key() {
                return None;
            }
            let mut proj = Vec::new();
            let mut columns = Vec::new();
            for item in &s.projection {
                match item {
                    SelectItem::Wildcard(_) => {
                        for (i, c) in def.columns.iter().enumerate() {
                            proj.push(i);
                            columns.push(ResultColumn {
                                name: c.name.clone(),
                                type_oid: oid_for_column_type(c.ty),
                            });
                        }
                    }
                    SelectItem::UnnamedExpr(e) => {
                        let c = column_name(e, &alias)?;
                        let i = def.column_index(&c)?;
                        proj.push(i);
                        columns.push(ResultColumn {
                            name: c,
                            type_oid: oid_for_column_type(def.columns[i].ty),
                        });
                    }
                    SelectItem::ExprWithAlias { expr, alias: a } => {
                        let c = column_name(expr, &alias)?;
                        let i = def.column_index(&c)?;
                        proj.push(i);
                        columns.push(ResultColumn {
                            name: ident_name(a),
                            type_oid: oid_for_column_type(def.columns[i].ty),
                        });
                    }
                    _ => return None,
                }
            }
            let sel = s.selection.as_ref()?;
            let mut params = Vec::new();
            let keys = if let Some(k) = key_equalities(sel, &alias, &def, &mut params) {
                Keys::One(k)
            } else if def.primary_key.len() == 1 {
                let pk = def.primary_key[0];
                let ty = def.columns[pk].ty;
                match sel {
                    Expr::InList {
                        expr,
                        list,
                        negated: false,
                    } if column_name(expr, &alias)? == def.columns[pk].name => Keys::Many(
                        list.iter()
                            .map(|e| src_of(e, ty, &mut params))
                            .collect::<Option<_>>()?,
                    ),
                    Expr::AnyOp {
                        left,
                        compare_op: BinaryOperator::Eq,
                        right,
                        ..
                    } if column_name(left, &alias)? == def.columns[pk].name => {
                        let n = placeholder_index(right)?;
                        note_param(&mut params, n - 1, array_oid(oid_for_column_type(ty)));
                        Keys::AnyArray(n - 1)
                    }
                    _ => return None,
                }
            } else {
                return None;
            };
            Some(FastPlan::Get {
                table: tname,
                proj,
                columns,
                keys,
                params,
            })
        }
        Statement::Insert(ins) => {
            // OVERRIDING ... VALUE changes which values identity columns take
            if ins.returning.is_some() || crate::overriding::of_token(&ins.insert_token.0).is_some()
            {
                return None;
            }
            let TableObject::TableName(n) = &ins.table else {
                return None;
            };
            let tname = table_name(n).ok()?;
            let table = engine.table(&tname)?;
            let def = table.def().clone();
            let source = ins.source.as_ref()?;
            let SetExpr::Values(values) = source.body.as_ref() else {
                return None;
            };
            if values.rows.len() != 1 || source.order_by.is_some() || source.limit_clause.is_some()
            {
                return None;
            }
            let targets: Vec<usize> = if ins.columns.is_empty() {
                (0..def.columns.len()).collect()
            } else {
                ins.columns
                    .iter()
                    .map(|c| match c.0.last()? {
                        ObjectNamePart::Identifier(id) => def.column_index(&ident_name(id)),
                        ObjectNamePart::Function(_) => None,
                    })
                    .collect::<Option<_>>()?
            };
            if crate::session::defaults::insert_needs_defaults(&def, &targets)
                || !def.checks.is_empty()
            {
                return None;
            }
            let row = &values.rows[0];
            if row.len() != targets.len() {
                return None;
            }
            let mut params = Vec::new();
            let srcs: Vec<Src> = row
                .iter()
                .zip(&targets)
                .map(|(e, t)| value_src_of(e, def.columns[*t].ty, &mut params))
                .collect::<Option<_>>()?;
            let (on_conflict, count_updates) = match &ins.on {
                None => (OnConflict::Error, false),
                // an arbiter storage cannot honour: the general path refuses it
                // (or one that skips rows on UNIQUE indexes: the general
                // path skips them)
                Some(OnInsert::OnConflict(oc))
                    if !crate::arbiter::arbiters(&def, oc).is_ok_and(|a| a.is_key_only()) =>
                {
                    return None
                }
                Some(OnInsert::OnConflict(oc)) => match &oc.action {
                    OnConflictAction::DoNothing => (OnConflict::DoNothing, false),
                    OnConflictAction::DoUpdate(du) => {
                        if !def.has_primary_key() {
                            return None;
                        }
                        (
                            OnConflict::Update(
                                crate::session::conflict_update::conflict_updater(
                                    &ctx.state(),
                                    &def,
                                    &ins.table_alias
                                        .as_ref()
                                        .map(|a| ident_name(&a.alias))
                                        .unwrap_or_else(|| tname.clone()),
                                    &du.assignments,
                                    du.selection.as_ref(),
                                    // a session not in UTC runs upserts on
                                    // the general path (`binds_datetime`)
                                    crate::session_zone::SessionZone::utc(),
                                )
                                .ok()?,
                            ),
                            true,
                        )
                    }
                },
                Some(_) => return None,
            };
            Some(FastPlan::Insert {
                table: tname,
                targets,
                values: srcs,
                on_conflict,
                count_updates,
                params,
            })
        }
        Statement::Update(upd) => {
            if upd.from.is_some() || upd.returning.is_some() || !upd.table.joins.is_empty() {
                return None;
            }
            let (tname, alias) = relation(&upd.table.relation)?;
            let table = engine.table(&tname)?;
            let def = table.def().clone();
            if !def.has_primary_key() || !def.checks.is_empty() {
                return None;
            }
            let mut params = Vec::new();
            let mut sets = Vec::new();
            let mut adds = Vec::new();
            let mut assigned = Vec::new();
            for a in &upd.assignments {
                let AssignmentTarget::ColumnName(n) = &a.target else {
                    return None;
                };
                let ObjectNamePart::Identifier(id) = n.0.last()? else {
                    return None;
                };
                let idx = def.column_index(&ident_name(id))?;
                if def.primary_key.contains(&idx)
                    || assigned.contains(&idx)
                    || def.columns[idx].identity.is_some()
                {
                    return None;
                }
                assigned.push(idx);
                let ty = def.columns[idx].ty;
                if let Some(src) = value_src_of(&a.value, ty, &mut params) {
                    sets.push((idx, src));
                } else {
                    adds.push(increment_of(&a.value, idx, &alias, &def, &mut params)?);
                }
            }
            let key = key_equalities(upd.selection.as_ref()?, &alias, &def, &mut params)?;
            Some(FastPlan::Update {
                table: tname,
                sets,
                adds,
                key,
                params,
            })
        }
        Statement::Delete(del) => {
            if del.using.is_some() || del.returning.is_some() {
                return None;
            }
            let from = match &del.from {
                FromTable::WithFromKeyword(v) | FromTable::WithoutKeyword(v) => v,
            };
            if from.len() != 1 || !from[0].joins.is_empty() {
                return None;
            }
            let (tname, alias) = relation(&from[0].relation)?;
            let table = engine.table(&tname)?;
            let def = table.def().clone();
            if !def.has_primary_key() {
                return None;
            }
            let mut params = Vec::new();
            let key = key_equalities(del.selection.as_ref()?, &alias, &def, &mut params)?;
            Some(FastPlan::Delete {
                table: tname,
                key,
                params,
            })
        }
        _ => None,
    }
}

/// `col + d`, `d + col` or `col - d` where `col` is the integer column
/// `idx` and `d` a parameter or literal of its type.
fn increment_of(
    e: &Expr,
    idx: usize,
    alias: &str,
    def: &TableDef,
    params: &mut Vec<u32>,
) -> Option<Increment> {
    let col = def.columns.get(idx)?;
    if !matches!(
        col.ty,
        ColumnType::SmallInt | ColumnType::Int | ColumnType::BigInt
    ) {
        return None;
    }
    let is_col = |x: &Expr| column_name(x, alias).as_deref() == Some(col.name.as_str());
    match e {
        Expr::Nested(inner) => increment_of(inner, idx, alias, def, params),
        Expr::BinaryOp { left, op, right } => {
            let subtract = match op {
                BinaryOperator::Plus => false,
                BinaryOperator::Minus => true,
                _ => return None,
            };
            let delta = if is_col(left) {
                right
            } else if !subtract && is_col(right) {
                left
            } else {
                return None;
            };
            Some(Increment {
                column: idx,
                delta: src_of(delta, col.ty, params)?,
                subtract,
            })
        }
        _ => None,
    }
}

/// The new version of `row` under an UPDATE's `sets` and `adds`, all
/// evaluated on the old version (as PostgreSQL does).
pub(crate) fn updated_row(
    def: &TableDef,
    row: &Row,
    sets: &[(usize, Src)],
    adds: &[Increment],
    params: &[Value],
    now: i64,
) -> Result<Row> {
    let mut new = row.clone();
    for (idx, src) in sets {
        let col = def
            .columns
            .get(*idx)
            .ok_or_else(|| SqlError::Internal("fixed plan names a missing column".into()))?;
        let v = resolve_at(src, params, col.ty, now)?;
        if let Some(slot) = new.get_mut(*idx) {
            *slot = v;
        }
    }
    for inc in adds {
        let col = def
            .columns
            .get(inc.column)
            .ok_or_else(|| SqlError::Internal("fixed plan names a missing column".into()))?;
        let old = row.get(inc.column).cloned().unwrap_or(Value::Null);
        let delta = resolve(&inc.delta, params, col.ty)?;
        let v = match (int_of(&old), int_of(&delta)) {
            (Some(a), Some(b)) => {
                let r = if inc.subtract {
                    a.checked_sub(b)
                } else {
                    a.checked_add(b)
                };
                let out_of_range = || {
                    let name = match col.ty {
                        ColumnType::SmallInt => "smallint",
                        ColumnType::Int => "integer",
                        _ => "bigint",
                    };
                    SqlError::NumericOutOfRange(format!("{name} out of range"))
                };
                let r = r.ok_or_else(out_of_range)?;
                match col.ty {
                    ColumnType::SmallInt => {
                        Value::SmallInt(i16::try_from(r).map_err(|_| out_of_range())?)
                    }
                    ColumnType::Int => Value::Int(i32::try_from(r).map_err(|_| out_of_range())?),
                    _ => Value::BigInt(r),
                }
            }
            _ => Value::Null,
        };
        if let Some(slot) = new.get_mut(inc.column) {
            *slot = v;
        }
    }
    Ok(new)
}

fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::SmallInt(x) => Some(i64::from(*x)),
        Value::Int(x) => Some(i64::from(*x)),
        Value::BigInt(x) => Some(*x),
        _ => None,
    }
}

fn array_oid(elem: u32) -> u32 {
    pgtypes::array_oid_of(elem).unwrap_or(pgtypes::oid::TEXT_ARRAY)
}

fn relation(tf: &TableFactor) -> Option<(String, String)> {
    match tf {
        TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } => {
            let t = table_name(name).ok()?;
            let a = alias
                .as_ref()
                .map(|a| ident_name(&a.name))
                .unwrap_or_else(|| t.clone());
            Some((t, a))
        }
        _ => None,
    }
}

pub(crate) fn resolve(src: &Src, params: &[Value], ty: ColumnType) -> Result<Value> {
    resolve_at(src, params, ty, statement_time())
}

/// [`resolve`] with the statement's start time given, so that every
/// [`Src::Now`] of one statement takes the same value.
pub(crate) fn resolve_at(src: &Src, params: &[Value], ty: ColumnType, now: i64) -> Result<Value> {
    match src {
        Src::Lit(v) => Ok(v.clone()),
        Src::Now => coerce_value(Value::Timestamp(now), ty),
        Src::Param(i) => {
            let v = params.get(*i).cloned().ok_or_else(|| {
                SqlError::InvalidParameter(format!("there is no parameter ${}", i + 1))
            })?;
            coerce_value(v, ty)
        }
    }
}

/// Parse a PostgreSQL array literal `{1,2,"x"}` into its elements.
pub fn parse_array_text(s: &str, ty: ColumnType) -> Result<Vec<Value>> {
    let t = s.trim();
    let inner = t
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .ok_or_else(|| SqlError::InvalidText(format!("malformed array literal: \"{s}\"")))?;
    if inner.trim().is_empty() {
        return Ok(vec![]);
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                was_quoted = true;
            }
            '\\' if quoted => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ',' if !quoted => {
                out.push(array_elem(&cur, was_quoted, ty)?);
                cur.clear();
                was_quoted = false;
            }
            c => cur.push(c),
        }
    }
    out.push(array_elem(&cur, was_quoted, ty)?);
    Ok(out)
}

fn array_elem(s: &str, quoted: bool, ty: ColumnType) -> Result<Value> {
    if !quoted && s.trim().eq_ignore_ascii_case("null") {
        Ok(Value::Null)
    } else {
        parse_text(if quoted { s } else { s.trim() }, ty)
    }
}

impl FastPlan {
    /// The table a write plan writes (`None` for a lookup).
    pub fn written_table(&self) -> Option<&str> {
        match self {
            FastPlan::Insert { table, .. }
            | FastPlan::Update { table, .. }
            | FastPlan::Delete { table, .. } => Some(table),
            _ => None,
        }
    }
}

pub(crate) fn table_of(engine: &Arc<Engine>, name: &str) -> Result<Arc<Table>> {
    engine
        .table(name)
        .ok_or_else(|| SqlError::UndefinedTable(name.to_string()))
}

/// Run a fixed plan (blocking: call from a blocking context).
/// The row a fixed-plan write must lock: UPDATE and DELETE by key, and
/// INSERT with ON CONFLICT (which reads the row it may replace). A plain
/// INSERT needs no lock: storage checks duplicates under its commit lock.
fn write_target(
    plan: &FastPlan,
    engine: &Arc<Engine>,
    params: &[Value],
) -> Result<Option<(Arc<Table>, Key)>> {
    match plan {
        FastPlan::Update { table, key, .. } | FastPlan::Delete { table, key, .. } => {
            let t = table_of(engine, table)?;
            let vals = key_values(key, t.def(), params)?;
            if vals.iter().any(|v| v.is_null()) {
                return Ok(None);
            }
            let k = t.key_of(&vals)?;
            Ok(Some((t, k)))
        }
        FastPlan::Insert {
            table,
            targets,
            values,
            on_conflict,
            ..
        } if !matches!(on_conflict, OnConflict::Error) => {
            let t = table_of(engine, table)?;
            let def = t.def().clone();
            if !def.has_primary_key() {
                return Ok(None);
            }
            let row = insert_row(&def, table, targets, values, params, statement_time())?;
            let k = eddy_storage::engine::key_for_row(&def, &row, 0);
            Ok(Some((t, k)))
        }
        _ => Ok(None),
    }
}

/// Runs a fixed plan in autocommit, holding the lock of the row it writes
/// (waiting for a transaction that holds it) while it writes.
pub fn execute_locked(
    plan: &FastPlan,
    engine: &Arc<Engine>,
    params: &[Value],
    lock_timeout: Option<std::time::Duration>,
) -> Result<Output> {
    let Some((t, key)) = write_target(plan, engine, params)? else {
        return execute(plan, engine, params);
    };
    let owner = engine.begin_txn();
    engine.locks().lock(
        owner,
        t.def().id,
        key.as_bytes(),
        LockMode::Exclusive,
        LockWait::Block(lock_timeout),
        &t.def().name,
    )?;
    let r = execute(plan, engine, params);
    engine.locks().release_all(owner);
    r
}

pub fn execute(plan: &FastPlan, engine: &Arc<Engine>, params: &[Value]) -> Result<Output> {
    match plan {
        FastPlan::Get {
            table,
            proj,
            columns,
            keys,
            ..
        } => {
            let t = table_of(engine, table)?;
            let def = t.def().clone();
            let keys = lookup_keys(keys, &def, params)?;
            let rows = t.multi_get(&keys)?.into_iter().flatten().collect();
            projected_output(&def, table, proj, columns, rows)
        }
        FastPlan::Insert {
            table,
            targets,
            values,
            on_conflict,
            count_updates,
            ..
        } => {
            let t = table_of(engine, table)?;
            let row = insert_row(t.def(), table, targets, values, params, statement_time())?;
            let s = t.write(vec![WriteOp::Insert {
                row,
                on_conflict: on_conflict.clone(),
            }])?;
            let n = s.inserted + if *count_updates { s.updated } else { 0 };
            Ok(Output::Command(format!("INSERT 0 {n}")))
        }
        FastPlan::Update {
            table,
            sets,
            adds,
            key,
            ..
        } => {
            let t = table_of(engine, table)?;
            let def = t.def().clone();
            let key = key_values(key, &def, params)?;
            let Some(old) = t.get(&key)? else {
                return Ok(Output::Command("UPDATE 0".into()));
            };
            // The caller holds the row's lock (execute_locked), so `old` is
            // the version the write replaces.
            let row = updated_row(&def, &old, sets, adds, params, statement_time())?;
            let assigned: Vec<(usize, Value)> = sets
                .iter()
                .map(|(i, _)| *i)
                .chain(adds.iter().map(|a| a.column))
                .filter_map(|i| row.get(i).map(|v| (i, v.clone())))
                .collect();
            let f: ConflictUpdateFn = Arc::new(move |existing: &Row, _new: &Row| {
                let mut r = existing.clone();
                for (i, v) in &assigned {
                    if let Some(slot) = r.get_mut(*i) {
                        *slot = v.clone();
                    }
                }
                Ok(Some(r))
            });
            let s = t.write(vec![WriteOp::Insert {
                row,
                on_conflict: OnConflict::Update(f),
            }])?;
            Ok(Output::Command(format!(
                "UPDATE {}",
                s.updated.max(s.inserted)
            )))
        }
        FastPlan::Delete { table, key, .. } => {
            let t = table_of(engine, table)?;
            let key = key_values(key, t.def(), params)?;
            if key.iter().any(|v| v.is_null()) {
                return Ok(Output::Command("DELETE 0".into()));
            }
            let k = t.key_of(&key)?;
            let s = t.write(vec![WriteOp::Delete { key: k }])?;
            Ok(Output::Command(format!("DELETE {}", s.deleted)))
        }
    }
}

/// The distinct, non-NULL primary keys a fixed-plan lookup asks for.
pub(crate) fn lookup_keys(
    keys: &Keys,
    def: &TableDef,
    params: &[Value],
) -> Result<Vec<Vec<Value>>> {
    let pk_types: Vec<ColumnType> = def
        .primary_key
        .iter()
        .map(|k| def.columns.get(*k).map(|c| c.ty))
        .collect::<Option<_>>()
        .ok_or_else(|| SqlError::Internal("primary key names a missing column".into()))?;
    let first = *pk_types
        .first()
        .ok_or_else(|| SqlError::Internal("fixed-plan lookup on a table without a key".into()))?;
    let keys: Vec<Vec<Value>> = match keys {
        Keys::One(srcs) => {
            let key: Vec<Value> = srcs
                .iter()
                .zip(&pk_types)
                .map(|(s, ty)| resolve(s, params, *ty))
                .collect::<Result<_>>()?;
            vec![key]
        }
        Keys::Many(srcs) => srcs
            .iter()
            .map(|s| resolve(s, params, first).map(|v| vec![v]))
            .collect::<Result<_>>()?,
        Keys::AnyArray(i) => {
            let v = params.get(*i).ok_or_else(|| {
                SqlError::InvalidParameter(format!("there is no parameter ${}", i + 1))
            })?;
            let elems = match v {
                Value::Text(s) => parse_array_text(s, first)?,
                Value::Null => vec![],
                other => vec![coerce_value(other.clone(), first)?],
            };
            elems.into_iter().map(|v| vec![v]).collect()
        }
    };
    let mut out: Vec<Vec<Value>> = Vec::with_capacity(keys.len());
    for k in keys {
        if !k.iter().any(|v| v.is_null()) && !out.contains(&k) {
            out.push(k);
        }
    }
    Ok(out)
}

/// A lookup's rows as the statement's result (its projection and types).
pub(crate) fn projected_output(
    def: &TableDef,
    table: &str,
    proj: &[usize],
    columns: &[ResultColumn],
    rows: Vec<Row>,
) -> Result<Output> {
    let types: Vec<ColumnType> = proj
        .iter()
        .map(|i| def.columns.get(*i).map(|c| c.ty))
        .collect::<Option<_>>()
        .ok_or_else(|| SqlError::UndefinedTable(table.to_string()))?;
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .zip(&types)
            .map(|(c, t)| {
                Field::new(&c.name, t.to_arrow(), true)
                    .with_metadata(crate::pgtypes::declared_type_metadata(*t))
            })
            .collect::<Vec<_>>(),
    ));
    let projected: Vec<Row> = rows
        .into_iter()
        .map(|r| {
            proj.iter()
                .map(|i| r.get(*i).cloned().unwrap_or(Value::Null))
                .collect()
        })
        .collect();
    let batch = eddy_storage::arrow_values::batch_from_rows(&schema, &types, &projected)?;
    Ok(batches_output(schema, vec![batch]))
}

/// The row a fixed-plan INSERT writes.
pub(crate) fn insert_row(
    def: &TableDef,
    table: &str,
    targets: &[usize],
    values: &[Src],
    params: &[Value],
    now: i64,
) -> Result<Row> {
    let mut row = vec![Value::Null; def.columns.len()];
    for (src, &target) in values.iter().zip(targets) {
        let col = def
            .columns
            .get(target)
            .ok_or_else(|| SqlError::UndefinedTable(table.to_string()))?;
        row[target] = resolve_at(src, params, col.ty, now)?;
    }
    Ok(row)
}

/// The primary-key values of a fixed-plan UPDATE or DELETE.
pub(crate) fn key_values(key: &[Src], def: &TableDef, params: &[Value]) -> Result<Vec<Value>> {
    key.iter()
        .zip(&def.primary_key)
        .map(|(s, k)| {
            let ty =
                def.columns.get(*k).map(|c| c.ty).ok_or_else(|| {
                    SqlError::Internal("primary key names a missing column".into())
                })?;
            resolve(s, params, ty)
        })
        .collect()
}

/// Fill unknown parameter types from the columns they are compared with or
/// assigned to (INSERT VALUES positions, SET c = $n, c op $n).
/// `$n` itself (not under a cast: a cast decides the parameter's type,
/// as in PostgreSQL, where `$1::text::numeric` is a text parameter).
fn bare_placeholder(e: &Expr) -> Option<usize> {
    match e {
        Expr::Nested(inner) => bare_placeholder(inner),
        Expr::Cast { .. } => None,
        e => placeholder_index(e),
    }
}

pub fn infer_param_types(stmt: &Statement, engine: &Arc<Engine>, types: &mut [u32]) {
    let mut tables: Vec<Arc<Table>> = Vec::new();
    let _ = visit_relations(stmt, |r| {
        if let Ok(n) = table_name(r) {
            if let Some(t) = engine.table(&n) {
                tables.push(t);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    let col_type = |name: &str| -> Option<ColumnType> {
        tables
            .iter()
            .find_map(|t| t.def().column_index(name).map(|i| t.def().columns[i].ty))
    };
    let mut set = |idx: usize, ty: ColumnType| {
        if let Some(slot) = types.get_mut(idx.wrapping_sub(1)) {
            if *slot == 0 {
                *slot = oid_for_column_type(ty);
            }
        }
    };
    match stmt {
        Statement::Insert(ins) => {
            if let (TableObject::TableName(n), Some(src)) = (&ins.table, &ins.source) {
                if let Some(t) = table_name(n).ok().and_then(|n| engine.table(&n)) {
                    let def = t.def();
                    let targets: Vec<Option<usize>> = if ins.columns.is_empty() {
                        (0..def.columns.len()).map(Some).collect()
                    } else {
                        ins.columns
                            .iter()
                            .map(|c| match c.0.last() {
                                Some(ObjectNamePart::Identifier(id)) => {
                                    def.column_index(&ident_name(id))
                                }
                                _ => None,
                            })
                            .collect()
                    };
                    if let SetExpr::Values(v) = src.body.as_ref() {
                        for row in &v.rows {
                            for (e, t) in row.iter().zip(&targets) {
                                if let (Some(p), Some(t)) = (bare_placeholder(e), t) {
                                    set(p, def.columns[*t].ty);
                                }
                            }
                        }
                    }
                }
            }
        }
        Statement::Update(upd) => {
            for a in &upd.assignments {
                if let (AssignmentTarget::ColumnName(n), Some(p)) =
                    (&a.target, bare_placeholder(&a.value))
                {
                    if let Some(ObjectNamePart::Identifier(id)) = n.0.last() {
                        if let Some(ty) = col_type(&ident_name(id)) {
                            set(p, ty);
                        }
                    }
                }
            }
        }
        Statement::Merge(m) => {
            // a parameter assigned to or inserted into a target column
            // takes the column's type
            let target = match &m.table {
                TableFactor::Table { name, .. } => {
                    table_name(name).ok().and_then(|n| engine.table(&n))
                }
                _ => None,
            };
            if let Some(t) = target {
                let def = t.def();
                let ty_of = |name: &str| def.column_index(name).map(|i| def.columns[i].ty);
                for clause in &m.clauses {
                    match &clause.action {
                        MergeAction::Update(u) => {
                            for a in &u.assignments {
                                if let (AssignmentTarget::ColumnName(n), Some(p)) =
                                    (&a.target, bare_placeholder(&a.value))
                                {
                                    if let Some(ty) =
                                        n.0.last()
                                            .and_then(|p| p.as_ident())
                                            .and_then(|id| ty_of(&ident_name(id)))
                                    {
                                        set(p, ty);
                                    }
                                }
                            }
                        }
                        MergeAction::Insert(ins) => {
                            let MergeInsertKind::Values(v) = &ins.kind else {
                                continue;
                            };
                            for row in &v.rows {
                                for (i, e) in row.iter().enumerate() {
                                    let column = if ins.columns.is_empty() {
                                        def.columns.get(i).map(|c| c.ty)
                                    } else {
                                        ins.columns
                                            .get(i)
                                            .and_then(|c| c.0.last())
                                            .and_then(|p| p.as_ident())
                                            .and_then(|id| ty_of(&ident_name(id)))
                                    };
                                    if let (Some(p), Some(ty)) = (bare_placeholder(e), column) {
                                        set(p, ty);
                                    }
                                }
                            }
                        }
                        MergeAction::Delete { .. } => {}
                    }
                }
            }
        }
        _ => {}
    }
    let _ = visit_expressions(stmt, |e| {
        let name_of = |e: &Expr| match e {
            Expr::Identifier(id) => Some(ident_name(id)),
            Expr::CompoundIdentifier(p) => p.last().map(ident_name),
            _ => None,
        };
        match e {
            Expr::BinaryOp { left, right, .. } => {
                if let (Some(c), Some(p)) = (name_of(left), bare_placeholder(right)) {
                    if let Some(ty) = col_type(&c) {
                        set(p, ty);
                    }
                }
                if let (Some(c), Some(p)) = (name_of(right), bare_placeholder(left)) {
                    if let Some(ty) = col_type(&c) {
                        set(p, ty);
                    }
                }
            }
            Expr::InList { expr, list, .. } => {
                if let Some(ty) = name_of(expr).and_then(|c| col_type(&c)) {
                    for l in list {
                        if let Some(p) = bare_placeholder(l) {
                            set(p, ty);
                        }
                    }
                }
            }
            // `$1::int` is an int4 parameter, as PostgreSQL infers it
            Expr::Cast {
                expr, data_type, ..
            } => {
                if let (Some(p), Ok(ty)) = (
                    bare_placeholder(expr),
                    crate::pgtypes::column_type_from_sql(data_type),
                ) {
                    set(p, ty);
                }
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                if let Some(ty) = name_of(expr).and_then(|c| col_type(&c)) {
                    for l in [low, high] {
                        if let Some(p) = bare_placeholder(l) {
                            set(p, ty);
                        }
                    }
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_array_literals() {
        assert_eq!(
            parse_array_text("{1,2, 3}", ColumnType::BigInt).unwrap(),
            vec![Value::BigInt(1), Value::BigInt(2), Value::BigInt(3)]
        );
        assert_eq!(
            parse_array_text("{\"a,b\",NULL}", ColumnType::Text).unwrap(),
            vec![Value::Text("a,b".into()), Value::Null]
        );
        assert!(parse_array_text("1,2", ColumnType::Int).is_err());
    }
}
