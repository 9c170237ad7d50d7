//! `CREATE SEQUENCE`, `DROP SEQUENCE`, and the sequences behind `SERIAL`
//! and identity columns of `CREATE TABLE` (see [`crate::sequences`]).
//!
//! A column's sequence is owned by it: `DROP TABLE` and a rolled-back
//! `CREATE TABLE` drop it too. A column default is kept as SQL text
//! (`nextval('t_id_seq'::regclass)`, PostgreSQL's own rendering) and parsed
//! again where a row needs it.

use datafusion::sql::sqlparser::ast::{
    ColumnOption, DataType as SqlType, Expr, GeneratedAs, ObjectName, SequenceOptions,
    UnaryOperator, Value as SqlValue,
};
use eddy_common::{ColumnDef, ColumnType, Identity};

use super::{run_blocking, Output, Session};
use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, table_name};
use crate::sequences::{OwnedBy, SequenceDef};

/// `serial`, `bigserial`, `smallserial` (and `serial4/8/2`): the column
/// type and the sequence's type name.
pub(super) fn serial_type(dt: &SqlType) -> Option<(ColumnType, &'static str)> {
    let SqlType::Custom(name, args) = dt else {
        return None;
    };
    if !args.is_empty() || name.0.len() != 1 {
        return None;
    }
    let n = name.0.first()?.as_ident().map(ident_name)?;
    match n.as_str() {
        "serial" | "serial4" => Some((ColumnType::Int, "integer")),
        "bigserial" | "serial8" => Some((ColumnType::BigInt, "bigint")),
        "smallserial" | "serial2" => Some((ColumnType::SmallInt, "smallint")),
        _ => None,
    }
}

pub(super) fn sequence_type_name(ty: ColumnType) -> Option<&'static str> {
    match ty {
        ColumnType::SmallInt => Some("smallint"),
        ColumnType::Int => Some("integer"),
        ColumnType::BigInt => Some("bigint"),
        _ => None,
    }
}

/// An integer constant of a sequence option (`INCREMENT BY -2`).
pub(super) fn option_int(e: &Expr) -> Result<i64> {
    match e {
        Expr::Value(v) => match &v.value {
            SqlValue::Number(n, _) => n
                .parse::<i64>()
                .map_err(|_| SqlError::InvalidParameter(format!("invalid sequence value {n}"))),
            other => Err(SqlError::Syntax(format!(
                "a sequence option needs an integer, not {other}"
            ))),
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => option_int(expr)?
            .checked_neg()
            .ok_or_else(|| SqlError::NumericOutOfRange("sequence value out of range".into())),
        Expr::UnaryOp {
            op: UnaryOperator::Plus,
            expr,
        } => option_int(expr),
        other => Err(SqlError::Syntax(format!(
            "a sequence option needs an integer, not {other}"
        ))),
    }
}

/// A definition from `CREATE SEQUENCE` options, PostgreSQL's defaults filled
/// in for what they leave out (the bounds follow the increment's sign).
pub(super) fn sequence_from_options(
    name: &str,
    type_name: &str,
    options: &[SequenceOptions],
) -> Result<SequenceDef> {
    let mut increment = 1;
    for o in options {
        if let SequenceOptions::IncrementBy(e, _) = o {
            increment = option_int(e)?;
        }
    }
    let mut def = SequenceDef::with_defaults(name, type_name, increment);
    let mut start_given = false;
    for o in options {
        match o {
            SequenceOptions::IncrementBy(..) => {}
            SequenceOptions::MinValue(Some(e)) => def.min = option_int(e)?,
            SequenceOptions::MaxValue(Some(e)) => def.max = option_int(e)?,
            SequenceOptions::MinValue(None) | SequenceOptions::MaxValue(None) => {}
            SequenceOptions::StartWith(e, _) => {
                def.start = option_int(e)?;
                start_given = true;
            }
            SequenceOptions::Cache(e) => def.cache = option_int(e)?,
            // sqlparser's flag means NO CYCLE
            SequenceOptions::Cycle(no) => def.cycle = !*no,
        }
    }
    if !start_given {
        def.start = if def.increment > 0 { def.min } else { def.max };
    }
    Ok(def)
}

/// `'name'` as a string literal, quoted as an identifier where PostgreSQL
/// would quote it, so `nextval` resolves it back to `name`.
fn regclass_literal(name: &str) -> String {
    let plain = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    let ident = if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    };
    format!("'{}'", ident.replace('\'', "''"))
}

/// The default of a column that a sequence feeds, as PostgreSQL prints it.
pub(super) fn nextval_default(sequence: &str) -> String {
    format!("nextval({}::regclass)", regclass_literal(sequence))
}

/// A column's sequence-related options: the sequence it needs, if any.
pub(super) struct ColumnSequence {
    pub column: usize,
    pub type_name: &'static str,
    pub options: Vec<SequenceOptions>,
}

/// Applies a column's DEFAULT, identity and SERIAL to `col` (index `i`);
/// returns the sequence the column needs.
pub(super) fn column_default_options(
    i: usize,
    col: &mut ColumnDef,
    serial: Option<&'static str>,
    options: &[ColumnOption],
) -> Result<Option<ColumnSequence>> {
    let mut seq = serial.map(|type_name| ColumnSequence {
        column: i,
        type_name,
        options: Vec::new(),
    });
    if seq.is_some() {
        col.nullable = false;
    }
    for o in options {
        match o {
            ColumnOption::Default(e) => {
                if seq.is_some() || col.default.is_some() {
                    return Err(SqlError::Syntax(format!(
                        "multiple default values specified for column \"{}\"",
                        col.name
                    )));
                }
                col.default = Some(e.to_string());
            }
            ColumnOption::Generated {
                generated_as,
                sequence_options,
                generation_expr: None,
                ..
            } => {
                let identity = match generated_as {
                    GeneratedAs::Always => Identity::Always,
                    GeneratedAs::ByDefault => Identity::ByDefault,
                    GeneratedAs::ExpStored => {
                        return Err(SqlError::FeatureNotSupported(
                            "generated columns are not supported".into(),
                        ))
                    }
                };
                if seq.is_some() || col.default.is_some() {
                    return Err(SqlError::Syntax(format!(
                        "both default and identity specified for column \"{}\"",
                        col.name
                    )));
                }
                let type_name = sequence_type_name(col.ty).ok_or_else(|| {
                    SqlError::InvalidParameter(
                        "identity column type must be smallint, integer, or bigint".into(),
                    )
                })?;
                col.identity = Some(identity);
                col.nullable = false;
                seq = Some(ColumnSequence {
                    column: i,
                    type_name,
                    options: sequence_options.clone().unwrap_or_default(),
                });
            }
            ColumnOption::Generated { .. } => {
                return Err(SqlError::FeatureNotSupported(
                    "generated columns (GENERATED ALWAYS AS (expr)) are not supported".into(),
                ))
            }
            ColumnOption::Identity(_) => {
                return Err(SqlError::FeatureNotSupported(
                    "IDENTITY(seed, increment) is not supported; use GENERATED AS IDENTITY".into(),
                ))
            }
            _ => {}
        }
    }
    Ok(seq)
}

impl Session {
    /// The name PostgreSQL gives a column's sequence: `<table>_<column>_seq`,
    /// with a number appended while that name is taken.
    pub(super) fn free_sequence_name(&self, table: &str, column: &str) -> String {
        let base = format!("{table}_{column}_seq");
        // (a name the open block dropped is free again)
        let taken = |n: &str| self.sequence_visible(n) || self.table(n).is_ok();
        if !taken(&base) {
            return base;
        }
        (1u32..)
            .map(|k| format!("{base}{k}"))
            .find(|n| !taken(n))
            .unwrap_or(base)
    }

    /// Creates the sequences of `CREATE TABLE`'s SERIAL and identity
    /// columns and points the columns' defaults at them.
    pub(super) fn create_column_sequences(
        &mut self,
        table: &str,
        columns: &mut [ColumnDef],
        wanted: Vec<ColumnSequence>,
    ) -> Result<Vec<String>> {
        let mut created = Vec::new();
        for w in wanted {
            let Some(col) = columns.get_mut(w.column) else {
                continue;
            };
            let name = self.free_sequence_name(table, &col.name);
            let mut def = match sequence_from_options(&name, w.type_name, &w.options) {
                Ok(d) => d,
                Err(e) => {
                    self.undo_created_sequences(&created);
                    return Err(e);
                }
            };
            def.owned_by = Some(OwnedBy {
                table: table.to_string(),
                column: col.name.clone(),
            });
            if let Err(e) = self.create_sequence_in_transaction(def) {
                self.undo_created_sequences(&created);
                return Err(e);
            }
            col.default = Some(nextval_default(&name));
            created.push(name);
        }
        Ok(created)
    }

    /// Creates a sequence as part of the open transaction (implicit or a
    /// block): its file stays pending until that transaction commits
    /// (`Session::commit_transaction`), and a rollback drops it.
    pub(super) fn create_sequence_in_transaction(&mut self, mut def: SequenceDef) -> Result<()> {
        // its creator owns it (a SERIAL's: the table's creator)
        def.owner.get_or_insert_with(|| self.user.clone());
        let name = def.name.clone();
        self.free_dropped_table_name(&name)?;
        if self.dropped_in_block(&name) && self.db.sequences.exists(&name) {
            return self.replace_dropped_sequence(def);
        }
        let pending = self.txn.is_some();
        run_blocking(|| self.db.sequences.create(def, pending))?;
        if let Some(t) = self.txn.as_mut() {
            t.created_sequences.push(name);
        }
        Ok(())
    }

    /// `CREATE SEQUENCE s` (or a SERIAL column's) in the block that
    /// dropped `s`, which stays until COMMIT: the new one takes its place
    /// now and the old one comes back if the block (or the savepoint
    /// before the CREATE) rolls back (`Sequences::replace`).
    fn replace_dropped_sequence(&mut self, def: SequenceDef) -> Result<()> {
        let name = def.name.clone();
        let savepoints = self.txn.as_ref().is_some_and(|t| t.has_savepoints());
        if savepoints && self.db.sequences.is_pending(&name) {
            // ROLLBACK TO could not bring back the block's earlier one
            return Err(SqlError::FeatureNotSupported(format!(
                "creating sequence \"{name}\" a second time in a transaction block with savepoints is not supported"
            )));
        }
        run_blocking(|| self.db.sequences.replace(def))?;
        if let Some(t) = self.txn.as_mut() {
            t.dropped_sequences.retain(|d| *d != name);
            if !t.created_sequences.contains(&name) {
                t.created_sequences.push(name);
            }
        }
        self.publish_dropped();
        Ok(())
    }

    /// 0A000 for a `kind` (table) named as a sequence the open block
    /// dropped: the sequence stays until COMMIT, and nothing moves it
    /// out of the way (a sequence after a dropped table does work).
    pub(super) fn refuse_replacing_dropped_sequence(&self, name: &str, kind: &str) -> Result<()> {
        if self.dropped_in_block(name) {
            return Err(SqlError::FeatureNotSupported(format!(
                "creating {kind} \"{name}\" in the transaction block that dropped sequence \"{name}\" is not supported"
            )));
        }
        Ok(())
    }

    /// Undoes the sequences a failing statement created, so the rollback
    /// that follows does not drop them again: each is dropped, or gives
    /// way to the one it replaced, which is then dropped in the block
    /// again.
    pub(super) fn undo_created_sequences(&mut self, names: &[String]) {
        for name in names {
            let replacing = self.db.sequences.is_replacing(name);
            self.drop_sequences(std::slice::from_ref(name));
            if let Some(t) = self.txn.as_mut() {
                t.created_sequences.retain(|c| c != name);
                if replacing && !t.dropped_sequences.contains(name) {
                    t.dropped_sequences.push(name.clone());
                }
            }
        }
        self.publish_dropped();
    }

    /// Whether `name` is a sequence this session sees (not one its open
    /// block has dropped).
    pub(super) fn sequence_visible(&self, name: &str) -> bool {
        self.db.sequences.exists(name) && !self.dropped_in_block(name)
    }

    fn dropped_in_block(&self, name: &str) -> bool {
        self.txn
            .as_ref()
            .is_some_and(|t| t.dropped_sequences.iter().any(|d| d == name))
    }

    /// Drops sequences (after a failed or rolled-back CREATE TABLE, or with
    /// their table); failures are logged, as the table is gone either way.
    pub(super) fn drop_sequences(&self, names: &[String]) {
        for n in names {
            if let Err(e) = run_blocking(|| self.db.sequences.drop_sequence(n)) {
                tracing::warn!(sequence = %n, error = %e, "could not drop a sequence");
            }
        }
    }

    /// Drops the sequences owned by columns of `table`.
    pub(super) fn drop_owned_sequences(&self, table: &str) {
        let owned = self.db.sequences.owned_by_table(table);
        self.drop_sequences(&owned);
    }

    pub(super) fn create_sequence(
        &mut self,
        if_not_exists: bool,
        temporary: bool,
        name: &ObjectName,
        data_type: Option<&SqlType>,
        options: &[SequenceOptions],
        owned_by: Option<&ObjectName>,
    ) -> Result<Output> {
        if temporary {
            return Err(SqlError::FeatureNotSupported(
                "TEMPORARY sequences are not supported".into(),
            ));
        }
        let seq_name = table_name(name)?;
        self.lock_schema_of(&seq_name)?;
        if self.sequence_visible(&seq_name) || self.table(&seq_name).is_ok() {
            if if_not_exists {
                return Ok(Output::Command("CREATE SEQUENCE".into()));
            }
            return Err(SqlError::DuplicateTable(seq_name));
        }
        let type_name = match data_type {
            None => "bigint",
            Some(dt) => crate::pgtypes::column_type_from_sql(dt)
                .ok()
                .and_then(sequence_type_name)
                .ok_or_else(|| {
                    SqlError::InvalidParameter(
                        "sequence type must be smallint, integer, or bigint".into(),
                    )
                })?,
        };
        let mut def = sequence_from_options(&seq_name, type_name, options)?;
        if let Some(owner) = owned_by {
            def.owned_by = self.owner_column(owner)?;
        }
        self.create_sequence_in_transaction(def)?;
        Ok(Output::Command("CREATE SEQUENCE".into()))
    }

    /// `OWNED BY table.column` (or `NONE`).
    pub(super) fn owner_column(&self, owner: &ObjectName) -> Result<Option<OwnedBy>> {
        let parts: Vec<String> = owner
            .0
            .iter()
            .filter_map(|p| p.as_ident().map(ident_name))
            .collect();
        match parts.as_slice() {
            [none] if none == "none" => Ok(None),
            [.., table, column] => {
                let t = self.table(table)?;
                if t.def().column_index(column).is_none() {
                    return Err(SqlError::UndefinedColumn(format!(
                        "{column}\" of relation \"{table}"
                    )));
                }
                Ok(Some(OwnedBy {
                    table: table.clone(),
                    column: column.clone(),
                }))
            }
            _ => Err(SqlError::Syntax(
                "OWNED BY needs table.column or NONE".into(),
            )),
        }
    }

    pub(super) fn drop_sequence_statement(
        &mut self,
        names: &[ObjectName],
        if_exists: bool,
    ) -> Result<Output> {
        let mut resolved = Vec::new();
        for n in names {
            let name = table_name(n)?;
            if !self.sequence_visible(&name) {
                if self.db.engine.table(&name).is_some() {
                    return Err(SqlError::WrongObjectType(format!(
                        "\"{name}\" is not a sequence"
                    )));
                }
                if if_exists {
                    self.notice(
                        "00000",
                        &format!("sequence \"{name}\" does not exist, skipping"),
                    );
                    continue;
                }
                return Err(SqlError::UndefinedTable(name));
            }
            if let Some((def, _)) = self
                .db
                .sequences
                .list()
                .into_iter()
                .find(|(d, _)| d.name == name)
            {
                if let Some(o) = def
                    .owned_by
                    .filter(|o| self.db.engine.table(&o.table).is_some())
                {
                    if self
                        .db
                        .engine
                        .table(&o.table)
                        .and_then(|t| {
                            let def = t.def();
                            def.column_index(&o.column)
                                .and_then(|i| def.columns.get(i))
                                .and_then(|c| c.default.clone())
                        })
                        .is_some_and(|d| d == nextval_default(&name))
                    {
                        return Err(SqlError::DependentObjects(format!(
                            "cannot drop sequence {name} because column {} of table {} requires it",
                            o.column, o.table
                        )));
                    }
                }
            }
            resolved.push(name);
        }
        if self.in_transaction_block() {
            // dropped when the block commits, kept if it rolls back
            if let Some(t) = self.txn.as_mut() {
                t.dropped_sequences.extend(resolved);
            }
            self.publish_dropped();
            return Ok(Output::Command("DROP SEQUENCE".into()));
        }
        for name in resolved {
            run_blocking(|| self.db.sequences.drop_sequence(&name))?;
        }
        Ok(Output::Command("DROP SEQUENCE".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_render_as_postgres_prints_them() {
        assert_eq!(nextval_default("t_id_seq"), "nextval('t_id_seq'::regclass)");
        assert_eq!(
            nextval_default("T_id_seq"),
            "nextval('\"T_id_seq\"'::regclass)"
        );
        assert_eq!(
            crate::sequences::resolve_name("\"T_id_seq\"").unwrap(),
            "T_id_seq"
        );
    }
}
