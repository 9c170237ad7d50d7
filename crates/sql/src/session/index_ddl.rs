//! `CREATE [UNIQUE] INDEX`, `DROP INDEX` and the UNIQUE constraints of
//! `CREATE TABLE`: catalog changes of the session's transaction
//! (`Ddl::create_index`, `Ddl::drop_index`), undone if it rolls back.
//! `docs/design/indexes.md` has the design.
//!
//! What Eddy's indexes cannot be is refused with 0A000, never accepted and
//! ignored: other access methods, partial and expression indexes, INCLUDE,
//! CONCURRENTLY, operator classes other than the text pattern classes,
//! NULLS NOT DISTINCT, storage parameters and a NULLS order other than the
//! default of its direction. DESC is accepted: lookups do not depend on
//! the order, and the catalog shows it.

use std::collections::HashSet;

use datafusion::sql::sqlparser::ast::{
    CreateIndex, Expr, IndexColumn, NullsDistinctOption, ObjectName, ObjectNamePart,
    UniqueConstraint,
};
use eddy_common::{IndexDef, TableDef};

use super::{run_blocking, Output, Session};
use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, table_name};

impl Session {
    /// `CREATE [UNIQUE] INDEX [IF NOT EXISTS] [name] ON t (cols)`.
    pub(super) fn create_index(&mut self, ci: CreateIndex) -> Result<Output> {
        refuse_index_options(&ci)?;
        let tname = table_name(&ci.table_name)?;
        let target = self.table(&tname)?;
        let def = target.def().clone();
        let (columns, descending) = index_columns(&def, &ci.columns)?;
        let name = match &ci.name {
            Some(n) => self.index_storage_name(&tname, table_name(n)?),
            None => self.free_relation_name(&def, &columns, "idx"),
        };
        if self.relation_exists(&name) {
            if ci.if_not_exists {
                self.notice(
                    "42P07",
                    &format!("relation \"{name}\" already exists, skipping"),
                );
                return Ok(Output::Command("CREATE INDEX".into()));
            }
            return Err(SqlError::DuplicateTable(name));
        }
        let index = IndexDef {
            name,
            columns,
            unique: ci.unique,
            constraint: false,
            descending,
        };
        self.add_index(&tname, index, "CREATE INDEX")?;
        Ok(Output::Command("CREATE INDEX".into()))
    }

    /// Adds `index` to table `tname` in the session's transaction, checking
    /// the stored rows first when it is UNIQUE (the table locked, so no
    /// one writes meanwhile; the block's own rows are checked at COMMIT).
    pub(super) fn add_index(&mut self, tname: &str, index: IndexDef, what: &str) -> Result<()> {
        let target = self.table(tname)?;
        let locked = self.lock_for_ddl(&target, what)?;
        if index.unique {
            let engine = std::sync::Arc::clone(&self.db.engine);
            run_blocking(|| {
                engine
                    .ddl(None)
                    .check_no_duplicates(&locked, &index.name, &index.columns)
            })?;
        }
        let tname = tname.to_string();
        self.ddl_change(move |ddl| ddl.create_index(&tname, index))?;
        Ok(())
    }

    /// `DROP INDEX [IF EXISTS] name [, ...]`.
    pub(super) fn drop_indexes(&mut self, names: &[ObjectName], if_exists: bool) -> Result<Output> {
        for n in names {
            let name = table_name(n)?;
            let Some(owner) = self.index_owner(&name) else {
                if if_exists {
                    self.notice(
                        "00000",
                        &format!("index \"{name}\" does not exist, skipping"),
                    );
                    continue;
                }
                return Err(SqlError::UndefinedObject(format!(
                    "index \"{name}\" does not exist"
                )));
            };
            let def = owner.def().clone();
            if def.index(&name).is_some_and(|i| i.constraint) {
                return Err(SqlError::DependentObjects(format!(
                    "cannot drop index {name} because constraint {name} on table {} requires it",
                    def.name
                )));
            }
            let roles = &self.db.roles;
            if !roles.privileges_of(&self.user).superuser
                && !roles
                    .effective_roles(&self.user)
                    .contains(crate::privileges::owner_of(&def))
            {
                return Err(SqlError::InsufficientPrivilege(format!(
                    "must be owner of index {name}"
                )));
            }
            self.lock_for_ddl(&owner, "DROP INDEX")?;
            let tname = def.name.clone();
            self.ddl_change(move |ddl| ddl.drop_index(&tname, &name))?;
        }
        Ok(Output::Command("DROP INDEX".into()))
    }

    /// The UNIQUE constraints of a CREATE TABLE, after the table was
    /// created in the same transaction: `(constraint name, columns)`.
    pub(super) fn add_unique_constraints(
        &mut self,
        tname: &str,
        constraints: Vec<(Option<String>, Vec<String>)>,
    ) -> Result<()> {
        for (name, cols) in constraints {
            let def = self.table(tname)?.def().clone();
            let columns = cols
                .iter()
                .map(|c| {
                    def.column_index(c)
                        .ok_or_else(|| SqlError::UndefinedColumn(c.clone()))
                })
                .collect::<Result<Vec<_>>>()?;
            for &c in &columns {
                refuse_array_key(&def, c)?;
            }
            // PostgreSQL makes no index for a UNIQUE that repeats the
            // primary key (or another UNIQUE of the same columns)
            if columns == def.primary_key
                || def.indexes.iter().any(|i| i.unique && i.columns == columns)
            {
                continue;
            }
            let name = match name {
                Some(n) => n,
                None => self.free_relation_name(&def, &columns, "key"),
            };
            if self.relation_exists(&name) {
                return Err(SqlError::DuplicateTable(name));
            }
            let index = IndexDef {
                name,
                columns,
                unique: true,
                constraint: true,
                descending: vec![],
            };
            self.add_index(tname, index, "CREATE TABLE")?;
        }
        Ok(())
    }

    /// The table that has index `name`.
    fn index_owner(&self, name: &str) -> Option<std::sync::Arc<eddy_storage::Table>> {
        self.db
            .engine
            .tables()
            .into_iter()
            .find(|t| t.def().index(name).is_some())
    }

    /// Whether a relation (table, sequence, index, primary key) is named
    /// `name`.
    fn relation_exists(&self, name: &str) -> bool {
        // (what the open block dropped, and its tables' indexes, are gone)
        self.table(name).is_ok()
            || self.sequence_visible(name)
            || self.db.engine.tables().iter().any(|t| {
                let d = t.def();
                !self.table_dropped_in_block(&d.name)
                    && (d.index(name).is_some()
                        || (d.has_primary_key() && format!("{}_pkey", d.name) == name))
            })
    }

    /// PostgreSQL's generated name: `table_col1_col2_suffix`, numbered
    /// from 1 until free.
    fn free_relation_name(&self, def: &TableDef, columns: &[usize], suffix: &str) -> String {
        let cols: Vec<&str> = columns
            .iter()
            .filter_map(|&c| def.columns.get(c).map(|c| c.name.as_str()))
            .collect();
        let base = format!("{}_{}", def.name, cols.join("_"));
        let mut taken: HashSet<String> = HashSet::new();
        let mut n = 0usize;
        loop {
            let candidate = if n == 0 {
                format!("{base}_{suffix}")
            } else {
                format!("{base}_{suffix}{n}")
            };
            if !taken.contains(&candidate) && !self.relation_exists(&candidate) {
                return candidate;
            }
            taken.insert(candidate);
            n += 1;
        }
    }
}

/// The name and columns of a UNIQUE constraint; what Eddy cannot honour
/// (DEFERRABLE, NULLS NOT DISTINCT, index options) is refused.
pub(super) fn unique_constraint(u: &UniqueConstraint) -> Result<(Option<String>, Vec<String>)> {
    if u.nulls_distinct == NullsDistinctOption::NotDistinct {
        return Err(SqlError::FeatureNotSupported(
            "UNIQUE NULLS NOT DISTINCT is not supported yet".into(),
        ));
    }
    if u.characteristics.is_some() || !u.index_options.is_empty() || u.index_type.is_some() {
        return Err(SqlError::FeatureNotSupported(format!(
            "{u}: only plain UNIQUE (col, ...) constraints are supported"
        )));
    }
    let mut cols = Vec::with_capacity(u.columns.len());
    for ic in &u.columns {
        match &ic.column.expr {
            Expr::Identifier(id) if ic.operator_class.is_none() => cols.push(ident_name(id)),
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "UNIQUE constraint on {other} is not supported"
                )))
            }
        }
    }
    Ok((u.name.as_ref().map(ident_name), cols))
}

/// Options Eddy's indexes cannot honour: refused, never ignored.
fn refuse_index_options(ci: &CreateIndex) -> Result<()> {
    let refuse = |what: &str| {
        Err(SqlError::FeatureNotSupported(format!(
            "{what} is not supported for indexes yet"
        )))
    };
    if let Some(using) = &ci.using {
        if !using.to_string().eq_ignore_ascii_case("btree") {
            return refuse(&format!("access method \"{using}\""));
        }
    }
    if ci.concurrently {
        return refuse("CREATE INDEX CONCURRENTLY");
    }
    if !ci.include.is_empty() {
        return refuse("INCLUDE");
    }
    if ci.nulls_distinct == Some(false) {
        return refuse("NULLS NOT DISTINCT");
    }
    if !ci.with.is_empty() {
        return refuse("WITH (storage parameters)");
    }
    if ci.predicate.is_some() {
        return refuse("a partial index (WHERE)");
    }
    if !ci.index_options.is_empty() || !ci.alter_options.is_empty() {
        return refuse("an index option");
    }
    Ok(())
}

/// The columns of an index and whether each is DESC; expressions,
/// operator classes and a non-default NULLS order are refused.
/// Array columns are no key or index columns: their key encoding keeps
/// equality only, not PostgreSQL's array order (0A000, never accepted and
/// ordered wrongly).
pub(super) fn refuse_array_key(def: &TableDef, idx: usize) -> Result<()> {
    match def.columns.get(idx) {
        Some(c) if matches!(c.ty, eddy_common::ColumnType::Array(_)) => {
            Err(SqlError::FeatureNotSupported(format!(
                "array column \"{}\" cannot be a primary key or index column",
                c.name
            )))
        }
        _ => Ok(()),
    }
}

/// The operator classes an index column may name: those whose order and
/// equality are the ones Eddy's index keys have. Text compares byte by
/// byte (the database's collation is C), which is exactly what PostgreSQL's
/// `text_pattern_ops`, `varchar_pattern_ops` and `bpchar_pattern_ops`
/// compare by (Django names them for every indexed text column, so that
/// LIKE 'prefix%' can use the index), and what the default text classes
/// compare by under C. Any other class is refused (0A000); a text class on
/// a column of another type is PostgreSQL's 42804.
fn check_operator_class(def: &TableDef, idx: usize, class: &ObjectName) -> Result<()> {
    use eddy_common::ColumnType;
    let name = match class.0.last() {
        Some(ObjectNamePart::Identifier(id)) => ident_name(id),
        _ => class.to_string(),
    };
    let text_class = matches!(
        name.as_str(),
        "text_pattern_ops"
            | "varchar_pattern_ops"
            | "bpchar_pattern_ops"
            | "text_ops"
            | "varchar_ops"
            | "bpchar_ops"
    );
    if !text_class {
        return Err(SqlError::FeatureNotSupported(format!(
            "operator class \"{name}\" is not supported for indexes (the text pattern classes are)"
        )));
    }
    let column = def
        .columns
        .get(idx)
        .ok_or_else(|| SqlError::Internal(format!("no column {idx}")))?;
    let fits = match column.ty {
        ColumnType::Char(_) => name.starts_with("bpchar"),
        ColumnType::Text | ColumnType::Varchar(_) => !name.starts_with("bpchar"),
        _ => false,
    };
    if !fits {
        return Err(SqlError::DatatypeMismatch(format!(
            "operator class \"{name}\" does not accept data type {}",
            crate::catalog::format_type(
                i64::from(crate::pgtypes::oid_for_column_type(column.ty)),
                -1
            )
            .unwrap_or_else(|| format!("{:?}", column.ty))
        )));
    }
    Ok(())
}

fn index_columns(def: &TableDef, cols: &[IndexColumn]) -> Result<(Vec<usize>, Vec<bool>)> {
    let mut columns = Vec::with_capacity(cols.len());
    let mut descending = Vec::with_capacity(cols.len());
    for ic in cols {
        let name = match &ic.column.expr {
            Expr::Identifier(id) => ident_name(id),
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "index expression {other} is not supported yet; index a column"
                )))
            }
        };
        let desc = ic.column.options.asc == Some(false);
        // the default: NULLS LAST for ASC, NULLS FIRST for DESC
        if ic.column.options.nulls_first.is_some_and(|f| f != desc) {
            return Err(SqlError::FeatureNotSupported(
                "a NULLS FIRST/LAST order other than the default is not supported for indexes yet"
                    .into(),
            ));
        }
        let idx = def.column_index(&name).ok_or_else(|| {
            SqlError::UndefinedColumn(format!("{name}\" of relation \"{}", def.name))
        })?;
        refuse_array_key(def, idx)?;
        if let Some(class) = &ic.operator_class {
            check_operator_class(def, idx, class)?;
        }
        if columns.contains(&idx) {
            // PostgreSQL allows it; Eddy's key would hold the column twice
            return Err(SqlError::FeatureNotSupported(format!(
                "column \"{name}\" named twice in one index is not supported"
            )));
        }
        columns.push(idx);
        descending.push(desc);
    }
    if descending.iter().all(|d| !d) {
        descending.clear();
    }
    Ok((columns, descending))
}
