//! Schema changes that rewrite a table's stored rows: `DROP COLUMN`,
//! `ALTER COLUMN ... TYPE`, `ADD PRIMARY KEY` and `ADD COLUMN` with a
//! default
//! (`docs/design/schema-changes.md`).
//!
//! A rewrite builds a new table beside the old one and swaps names, every
//! step a catalog change of the session's transaction (`eddy_storage::ddl`:
//! each written with its undo in one `catalog.json` write):
//!
//! 1. create `<name>__eddy_rewrite_<txn>_<old id>` (locked by the transaction from
//!    the start);
//! 2. stream the old table's rows, as the transaction sees them, through
//!    DataFusion (so `USING` means what it means in a query) into the new
//!    table's bulk loader, which spills to shard files: the table never has
//!    to fit in memory;
//! 3. build its indexes, check what a type change may break;
//! 4. rename the old table to `<name>__eddy_old_<txn>_<old id>` and the new one to
//!    `<name>`; the old one is among the transaction's `dropped_tables`,
//!    dropped by the commit-log record that commits the rest.
//!
//! The commit log decides all of it: after ROLLBACK, an error or a kill -9
//! before the commit record, recovery undoes the steps in reverse (the old
//! table under its name, the new one gone); after it, the new table holds
//! the name and the old one is dropped. The old table is never written, so
//! a failure at any step leaves it as it was.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::sql::sqlparser::ast::{
    DataType as SqlType, DropBehavior, Expr, Ident, SelectItem, SetExpr, Statement, TableFactor,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_common::{
    CheckConstraint, ColumnDef, ColumnType, ForeignKeyDef, IndexDef, Orientation, TableDef, Value,
};
use eddy_storage::{CreateTable, Table};
use futures::StreamExt;

use super::checks::refers_to;
use super::{cast_column, run_blocking, storable_type, Output, Session};
use crate::error::{Result, SqlError};
use crate::pgtypes::{self, column_type_from_sql};
use crate::provider::EddyTable;
use crate::rewrite::ident_name;
use crate::temp_tables::shown_name;

/// What the old table of a rewrite is renamed with until the block ends
/// (`<name>__eddy_old_<txn>_<old id>`).
pub(super) const OLD_MARK: &str = "__eddy_old_";

/// The name the old table's rows are read under (`eddy_dml.<this>`).
const SOURCE_TABLE: &str = "__eddy_rewrite_source";

/// The table a rewrite builds: its definition and, per column, the
/// expression over an old row that computes it.
struct Rewrite {
    columns: Vec<ColumnDef>,
    sources: Vec<Expr>,
    primary_key: Vec<usize>,
    distribution_key: Vec<usize>,
    orientation: Orientation,
    indexes: Vec<IndexDef>,
    checks: Vec<CheckConstraint>,
    /// CHECKs to test again over the new rows (they name a retyped column).
    recheck: Vec<CheckConstraint>,
    foreign_keys: Vec<ForeignKeyDef>,
    /// The new primary key may repeat a value: check for duplicates.
    check_key: bool,
    /// A column computed by `USING`: its result must have an assignment
    /// cast to the column's type (42804 otherwise, as PostgreSQL).
    using: Option<usize>,
}

impl Rewrite {
    /// Where column `i` of `def` is in the rewritten table, if it stays as
    /// it is (its name, its type, its values): what a foreign key that
    /// references the column needs to move to the rewritten table.
    fn kept_position(&self, def: &TableDef, i: usize) -> Option<usize> {
        let c = def.columns.get(i)?;
        let p = self.columns.iter().position(|n| n.name == c.name)?;
        let same = self.columns.get(p).is_some_and(|n| n.ty == c.ty)
            && self.sources.get(p) == Some(&column_ref(&c.name));
        same.then_some(p)
    }

    /// The table as it is: every column read as itself.
    fn same_as(def: &TableDef) -> Rewrite {
        Rewrite {
            columns: def.columns.clone(),
            sources: def.columns.iter().map(|c| column_ref(&c.name)).collect(),
            primary_key: def.primary_key.clone(),
            distribution_key: def.distribution_key.clone(),
            orientation: def.orientation,
            indexes: def.indexes.clone(),
            checks: def.checks.clone(),
            recheck: Vec::new(),
            foreign_keys: def.foreign_keys.clone(),
            check_key: false,
            using: None,
        }
    }
}

fn column_ref(name: &str) -> Expr {
    Expr::Identifier(Ident::with_quote('"', name))
}

/// `SELECT <sources> FROM eddy_dml.__eddy_rewrite_source AS "<alias>"`:
/// the alias is the table's name as the user wrote it, so a `USING`
/// expression may qualify columns with it.
fn source_query(alias: &str, sources: Vec<Expr>) -> Result<Statement> {
    let mut q = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&format!("SELECT 1 FROM eddy_dml.{SOURCE_TABLE} AS x"))?
        .parse_query()?;
    let SetExpr::Select(sel) = q.body.as_mut() else {
        return Err(SqlError::Internal(
            "rewrite template is not a SELECT".into(),
        ));
    };
    if let Some(TableFactor::Table { alias: Some(a), .. }) =
        sel.from.first_mut().map(|f| &mut f.relation)
    {
        a.name = Ident::with_quote('"', alias);
    }
    sel.projection = sources.into_iter().map(SelectItem::UnnamedExpr).collect();
    Ok(Statement::Query(q))
}

/// Whether PostgreSQL converts `from` to `to` by an assignment (or
/// implicit) cast, as ALTER COLUMN TYPE without USING requires.
fn assignment_cast(from: ColumnType, to: ColumnType) -> bool {
    use ColumnType as T;
    let textual = |t: T| matches!(t, T::Text | T::Varchar(_) | T::Char(_));
    let numeric = |t: T| {
        matches!(
            t,
            T::SmallInt | T::Int | T::BigInt | T::Real | T::Double | T::Decimal(..) | T::Numeric
        )
    };
    let datetime = |t: T| matches!(t, T::Date | T::Timestamp | T::TimestampTz);
    if from == to || textual(to) {
        // every type has an assignment cast to the string types (I/O)
        return true;
    }
    match (from, to) {
        (a, b) if numeric(a) && numeric(b) => true,
        (a, b) if datetime(a) && datetime(b) => true,
        (T::Timestamp | T::TimestampTz, T::Time) | (T::Time, T::Interval) => true,
        (T::Interval, T::Time) => true,
        (T::Json, T::Jsonb) | (T::Jsonb, T::Json) => true,
        (T::Array(a), T::Array(b)) => assignment_cast(a.column_type(), b.column_type()),
        _ => false,
    }
}

/// A value of `a` as the string types receive it: PostgreSQL's output
/// text of the value (a boolean as `true`/`false`, its cast to text), so
/// that `int -> text` or `timestamp -> varchar(n)` store what PostgreSQL
/// stores. String arrays pass unchanged.
fn as_text(a: &ArrayRef) -> Result<ArrayRef> {
    if matches!(
        a.data_type(),
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 | DataType::Null
    ) {
        return Ok(Arc::clone(a));
    }
    let ty = storable_type(a.data_type()).ok_or_else(|| {
        SqlError::FeatureNotSupported(format!("cannot convert {} to text", a.data_type()))
    })?;
    let scale = match ty {
        ColumnType::Decimal(_, s) => Some(s),
        _ => None,
    };
    let mut out = Vec::with_capacity(a.len());
    for r in 0..a.len() {
        let v = eddy_storage::arrow_values::value_at(a.as_ref(), ty, r)?;
        out.push(match v {
            Value::Null => None,
            Value::Boolean(b) => Some(if b { "true" } else { "false" }.to_string()),
            v => Some(pgtypes::value_text(&v, scale)),
        });
    }
    Ok(Arc::new(StringArray::from(out)))
}

impl Session {
    /// `DROP [COLUMN] [IF EXISTS] c, ... [RESTRICT]`.
    pub(super) async fn drop_columns(
        &mut self,
        table: &str,
        columns: &[Ident],
        if_exists: bool,
        behavior: Option<DropBehavior>,
    ) -> Result<()> {
        let cascade = behavior == Some(DropBehavior::Cascade);
        for c in columns {
            self.drop_column(table, &ident_name(c), if_exists, cascade)
                .await?;
        }
        Ok(())
    }

    /// One column of DROP COLUMN. With CASCADE, foreign keys of other
    /// tables (or of this one) that reference the column are dropped with
    /// it (PostgreSQL's CASCADE drops them); views that read the table are
    /// refused either way (they name columns by name: `view_ddl.rs`).
    async fn drop_column(
        &mut self,
        table: &str,
        cname: &str,
        if_exists: bool,
        cascade: bool,
    ) -> Result<()> {
        let def = self.table(table)?.def().as_ref().clone();
        let shown = shown_name(table).to_string();
        let Some(idx) = def.column_index(cname) else {
            if if_exists {
                return Ok(());
            }
            return Err(SqlError::UndefinedColumn(format!(
                "{cname}\" of relation \"{shown}"
            )));
        };
        if def.columns.len() == 1 {
            return Err(SqlError::FeatureNotSupported(format!(
                "cannot drop column \"{cname}\": it is the last column of table \"{shown}\", and tables without columns are not supported"
            )));
        }
        if def.distribution_key.contains(&idx) {
            return Err(SqlError::FeatureNotSupported(format!(
                "cannot drop column \"{cname}\" of table \"{shown}\": it is in the table's distribution key"
            )));
        }
        let mut cascaded: Vec<String> = Vec::new();
        for (child, fk) in self.referencing(def.id) {
            if fk.ref_columns.contains(&idx) && cascade {
                self.drop_foreign_key_of(&child, &fk.name, def.id)?;
                cascaded.push(fk.name.clone());
            } else if fk.ref_columns.contains(&idx) {
                return Err(SqlError::DependentObjects(format!(
                    "cannot drop column {cname} of table {shown} because other objects depend on it (constraint {} on table {})",
                    fk.name,
                    shown_name(&child.def().name)
                )));
            }
        }
        let keep: Vec<usize> = (0..def.columns.len()).filter(|&i| i != idx).collect();
        let moved = |cols: &[usize]| -> Option<Vec<usize>> {
            cols.iter()
                .map(|c| keep.iter().position(|k| k == c))
                .collect()
        };
        let mut rw = Rewrite::same_as(&def);
        rw.columns = keep
            .iter()
            .filter_map(|&i| def.columns.get(i).cloned())
            .collect();
        rw.sources = rw.columns.iter().map(|c| column_ref(&c.name)).collect();
        // as PostgreSQL: the key, indexes and constraints naming the
        // column go with it
        rw.primary_key = moved(&def.primary_key).unwrap_or_default();
        rw.distribution_key = moved(&def.distribution_key).unwrap_or_default();
        rw.indexes = def
            .indexes
            .iter()
            .filter_map(|ix| {
                moved(&ix.columns).map(|columns| IndexDef {
                    columns,
                    ..ix.clone()
                })
            })
            .collect();
        rw.checks = def
            .checks
            .iter()
            .filter(|c| !refers_to(&c.expr, cname))
            .cloned()
            .collect();
        rw.foreign_keys = def
            .foreign_keys
            .iter()
            // a self-reference to the column went with CASCADE
            .filter(|fk| !(fk.ref_table == def.id && cascaded.contains(&fk.name)))
            .filter_map(|fk| {
                moved(&fk.columns).map(|columns| ForeignKeyDef {
                    columns,
                    ..fk.clone()
                })
            })
            .collect();
        self.rewrite_table(table, rw).await?;
        // the column's sequences (SERIAL, identity) go when it commits
        let owned = self.db.sequences.owned_by_column(table, cname);
        if let Some(t) = self.txn.as_mut() {
            t.dropped_sequences.extend(owned);
        }
        Ok(())
    }

    /// Drops constraint `fk` (which references table `parent`) of
    /// `child` in this transaction; the table being altered keeps its own
    /// until its rewrite leaves it out.
    fn drop_foreign_key_of(
        &mut self,
        child: &Arc<Table>,
        fk: &str,
        parent: eddy_common::TableId,
    ) -> Result<()> {
        if child.def().id == parent {
            return Ok(());
        }
        let child = self.lock_for_ddl(child, "ALTER TABLE ... DROP COLUMN ... CASCADE")?;
        let name = child.def().name.clone();
        let keep: Vec<ForeignKeyDef> = child
            .def()
            .foreign_keys
            .iter()
            .filter(|f| !(f.name == fk && f.ref_table == parent))
            .cloned()
            .collect();
        self.ddl_change(|ddl| ddl.set_foreign_keys(&name, keep))?;
        Ok(())
    }

    /// `ALTER COLUMN c [SET DATA] TYPE t [USING expr]`.
    pub(super) async fn alter_column_type(
        &mut self,
        table: &str,
        cname: &str,
        data_type: &SqlType,
        using: Option<Expr>,
    ) -> Result<()> {
        let def = self.table(table)?.def().as_ref().clone();
        let shown = shown_name(table).to_string();
        let idx = def
            .column_index(cname)
            .ok_or_else(|| SqlError::UndefinedColumn(format!("{cname}\" of relation \"{shown}")))?;
        let old = def
            .columns
            .get(idx)
            .cloned()
            .ok_or_else(|| SqlError::Internal(format!("no column {idx}")))?;
        let ty = column_type_from_sql(data_type)?;
        if using.is_none() && ty == old.ty {
            return Ok(()); // nothing to convert
        }
        if using.is_none() && !assignment_cast(old.ty, ty) {
            return Err(SqlError::DatatypeMismatch(format!(
                "column \"{cname}\" cannot be cast automatically to type {}",
                ty.pg_name()
            )));
        }
        if def.distribution_key.contains(&idx) {
            return Err(SqlError::FeatureNotSupported(format!(
                "cannot change the type of column \"{cname}\" of table \"{shown}\": it is in the table's distribution key"
            )));
        }
        let in_fk = def.foreign_keys.iter().any(|f| f.columns.contains(&idx))
            || self
                .referencing(def.id)
                .iter()
                .any(|(_, f)| f.ref_columns.contains(&idx));
        if in_fk {
            return Err(SqlError::FeatureNotSupported(format!(
                "cannot change the type of column \"{cname}\" of table \"{shown}\": it is in a foreign key"
            )));
        }
        let mut rw = Rewrite::same_as(&def);
        if let Some(c) = rw.columns.get_mut(idx) {
            c.ty = ty;
        }
        if let Some(u) = using {
            if let Some(s) = rw.sources.get_mut(idx) {
                *s = u;
            }
            rw.using = Some(idx);
        }
        rw.recheck = def
            .checks
            .iter()
            .filter(|c| refers_to(&c.expr, cname))
            .cloned()
            .collect();
        rw.check_key = def.primary_key.contains(&idx);
        self.rewrite_table(table, rw).await
    }

    /// `ADD PRIMARY KEY (cols)`: the table rewritten with the key (its
    /// columns NOT NULL); duplicates fail with 23505, NULLs with 23502.
    pub(super) async fn add_primary_key(&mut self, name: &str, cols: &[String]) -> Result<()> {
        let def = self.table(name)?.def().as_ref().clone();
        if def.has_primary_key() {
            return Err(SqlError::InvalidDefinition(format!(
                "multiple primary keys for table \"{}\" are not allowed",
                shown_name(name)
            )));
        }
        let pk: Vec<usize> = cols
            .iter()
            .map(|c| {
                def.column_index(c)
                    .ok_or_else(|| SqlError::UndefinedColumn(c.clone()))
            })
            .collect::<Result<_>>()?;
        for &k in &pk {
            super::index_ddl::refuse_array_key(&def, k)?;
        }
        let mut rw = Rewrite::same_as(&def);
        for &k in &pk {
            if let Some(c) = rw.columns.get_mut(k) {
                c.nullable = false;
            }
        }
        rw.primary_key = pk;
        // rows are placed by the key from now on
        rw.distribution_key = Vec::new();
        if def.orientation == Orientation::Column {
            rw.orientation = Orientation::RowColumn;
        }
        rw.check_key = true;
        self.rewrite_table(name, rw).await
    }

    /// `DROP CONSTRAINT t_pkey`: the table rewritten without a key (rows
    /// are then stored by row id), its columns staying NOT NULL as in
    /// PostgreSQL. Refused (2BP01) while a foreign key references the
    /// table's key, as PostgreSQL refuses it without CASCADE.
    pub(super) async fn drop_primary_key(&mut self, name: &str) -> Result<()> {
        let def = self.table(name)?.def().as_ref().clone();
        let key = def.primary_key.clone();
        if let Some((child, fk)) = self
            .referencing(def.id)
            .into_iter()
            .find(|(_, fk)| fk.ref_columns == key)
        {
            return Err(SqlError::DependentObjects(format!(
                "cannot drop constraint {}_pkey on table {} because constraint {} on table {} depends on it",
                shown_name(name),
                shown_name(name),
                fk.name,
                shown_name(&child.def().name)
            )));
        }
        let mut rw = Rewrite::same_as(&def);
        rw.primary_key = Vec::new();
        self.rewrite_table(name, rw).await
    }

    /// ADD COLUMN with a default over existing rows: the table rebuilt
    /// with `column` computed, per row, from its default
    /// (`session/add_column.rs`).
    pub(super) async fn add_column_by_rewrite(
        &mut self,
        name: &str,
        column: ColumnDef,
    ) -> Result<()> {
        let def = self.table(name)?.def().as_ref().clone();
        let source = match &column.default {
            Some(text) => super::defaults::parse_default(text)?,
            None => Expr::Value(datafusion::sql::sqlparser::ast::Value::Null.into()),
        };
        let mut rw = Rewrite::same_as(&def);
        rw.columns.push(column);
        rw.sources.push(source);
        self.rewrite_table(name, rw).await
    }

    /// Builds the table `rw` describes from `name`'s rows and puts it
    /// under the name, in the session's transaction (module doc).
    async fn rewrite_table(&mut self, name: &str, rw: Rewrite) -> Result<()> {
        let old = self.table(name)?;
        let def = old.def().as_ref().clone();
        let shown = shown_name(name).to_string();
        // a foreign key names its table by id, and the rewrite makes a new
        // table: the constraints that reference this one are moved to it
        // after the swap, where the referenced columns stay as they are
        // (their positions may change: a column before them dropped)
        let referencing = self.referencing(def.id);
        let new_positions: Vec<Option<usize>> = (0..def.columns.len())
            .map(|i| rw.kept_position(&def, i))
            .collect();
        let moves = |fk: &ForeignKeyDef| {
            fk.ref_columns
                .iter()
                .all(|c| new_positions.get(*c).is_some_and(|p| p.is_some()))
        };
        if let Some((child, fk)) = referencing.iter().find(|(_, fk)| !moves(fk)) {
            return Err(SqlError::FeatureNotSupported(format!(
                "this ALTER TABLE rewrites table \"{shown}\", which is not supported while foreign key \"{}\" of table \"{}\" references it",
                fk.name,
                shown_name(&child.def().name)
            )));
        }
        let group = self
            .db
            .engine
            .table_groups()
            .into_iter()
            .find(|g| g.id == def.table_group)
            .map(|g| g.name)
            .ok_or_else(|| SqlError::Internal(format!("table \"{shown}\" has no table group")))?;
        let txn_id = self.ddl_txn("a table rewrite")?.id;
        // the old table's id makes both names unique when one transaction
        // rewrites a table twice (the second rewrite reads the first's table)
        let tmp = format!("{name}__eddy_rewrite_{}_{}", txn_id.0, def.id.0);
        let hidden = format!("{name}{OLD_MARK}{}_{}", txn_id.0, def.id.0);

        // the rows the transaction sees, its own writes included
        self.install_tables(std::slice::from_ref(&old))?;
        let provider =
            Arc::new(EddyTable::new(Arc::clone(&old), false).with_view(Arc::clone(&self.view)));
        let stmt = source_query(&shown, rw.sources.clone())?;
        let Output::Rows {
            schema, mut stream, ..
        } = self.run_with_table(SOURCE_TABLE, provider, stmt).await?
        else {
            return Err(SqlError::Internal("a rewrite's source gave no rows".into()));
        };
        if let Some(i) = rw.using {
            let (Some(field), Some(col)) = (schema.fields().get(i), rw.columns.get(i)) else {
                return Err(SqlError::Internal("a USING column out of range".into()));
            };
            let from = storable_type(field.data_type());
            let fits = field.data_type() == &DataType::Null
                || from.is_some_and(|f| assignment_cast(f, col.ty));
            if !fits {
                return Err(SqlError::DatatypeMismatch(format!(
                    "result of USING clause for column \"{}\" cannot be cast automatically to type {}",
                    col.name,
                    col.ty.pg_name()
                )));
            }
        }

        let spec = CreateTable {
            name: tmp.clone(),
            columns: rw.columns.clone(),
            primary_key: rw.primary_key.clone(),
            distribution_key: rw.distribution_key.clone(),
            orientation: rw.orientation,
            table_group: Some(group),
            shard_count: None,
            checks: rw.checks.clone(),
        };
        let (owner, acl, comment) = (def.owner.clone(), def.acl.clone(), def.comment.clone());
        let t = self.ddl_txn("a table rewrite")?;
        let new = run_blocking(|| -> eddy_storage::Result<Arc<Table>> {
            let ddl = t.ddl();
            ddl.create_table_owned(spec, owner.clone())?;
            ddl.set_access(&tmp, owner, acl)?;
            ddl.set_table_comment(&tmp, comment)
        })?;

        // convert and load, batch by batch
        let new_schema = new.schema();
        let types: Vec<ColumnType> = rw.columns.iter().map(|c| c.ty).collect();
        let mut loader = new.bulk_loader();
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let zone = self.time_zone();
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            let mut cols = Vec::with_capacity(rw.columns.len());
            for (a, c) in batch.columns().iter().zip(&rw.columns) {
                let textual = matches!(
                    c.ty,
                    ColumnType::Text | ColumnType::Varchar(_) | ColumnType::Char(_)
                );
                // a timestamptz written as text on the zone's wall clock
                let a = if textual {
                    as_text(&crate::zone_functions::localize_array(a, &zone)?)?
                } else {
                    Arc::clone(a)
                };
                let a = cast_column(&a, c.ty, &c.name, &zone)?;
                if !c.nullable && a.null_count() > 0 {
                    return Err(SqlError::NotNullViolation(format!(
                        "column \"{}\" of relation \"{shown}\" contains null values",
                        c.name
                    )));
                }
                cols.push(a);
            }
            let batch = RecordBatch::try_new(Arc::clone(&new_schema), cols)?;
            if rw.check_key {
                let rows = eddy_storage::arrow_values::batch_rows(&batch, &types)?;
                for row in &rows {
                    let key: Vec<Value> = rw.primary_key.iter().map(|&k| row[k].clone()).collect();
                    let k = new.key_of(&key)?;
                    if !seen.insert(k.0) {
                        return Err(SqlError::UniqueViolation(format!(
                            "could not create unique index \"{shown}_pkey\": Key ({}) is duplicated",
                            key.iter()
                                .map(|v| pgtypes::value_text(v, None))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )));
                    }
                }
            }
            run_blocking(|| loader.push(batch))?;
        }
        drop(seen);
        run_blocking(|| loader.commit())?;

        // indexes after the load (bulk loads refuse UNIQUE indexes)
        let engine = Arc::clone(&self.db.engine);
        let t = self.ddl_txn("a table rewrite")?;
        run_blocking(|| -> eddy_storage::Result<()> {
            let ddl = t.ddl();
            for ix in &rw.indexes {
                if ix.unique {
                    let current = engine
                        .table(&tmp)
                        .ok_or_else(|| eddy_storage::StorageError::TableNotFound(tmp.clone()))?;
                    ddl.check_no_duplicates(&current, &ix.name, &ix.columns)?;
                }
                ddl.create_index(&tmp, ix.clone())?;
            }
            if !rw.foreign_keys.is_empty() {
                ddl.set_foreign_keys(&tmp, rw.foreign_keys.clone())?;
            }
            Ok(())
        })?;
        if !rw.recheck.is_empty() {
            let current = self.table(&tmp)?;
            for check in &rw.recheck {
                self.install_tables(std::slice::from_ref(&current))?;
                let provider = Arc::new(
                    EddyTable::new(Arc::clone(&current), false).with_view(Arc::clone(&self.view)),
                );
                if self.check_failures(&shown, check, provider).await? > 0 {
                    return Err(SqlError::CheckViolation(format!(
                        "check constraint \"{}\" of relation \"{shown}\" is violated by some row",
                        check.name
                    )));
                }
            }
        }

        // the swap: two renames, each undoable; the old table is dropped
        // by the commit that makes the rest visible
        let t = self.ddl_txn("a table rewrite")?;
        run_blocking(|| -> eddy_storage::Result<()> {
            let ddl = t.ddl();
            ddl.rename_table(name, &hidden)?;
            ddl.rename_table(&tmp, name)?;
            Ok(())
        })?;
        t.forget_writes(def.id);
        t.dropped_tables.push(hidden);
        self.repoint_foreign_keys(name, def.id, referencing, &new_positions)
    }

    /// After a rewrite of `name` (once table `old`): every foreign key
    /// that referenced `old` references the new table, the table's own
    /// (self-referencing) ones included, its referenced columns at their
    /// new positions (`new_positions`, per old column). Each referencing
    /// table is locked for the change, as ADD FOREIGN KEY locks it.
    fn repoint_foreign_keys(
        &mut self,
        name: &str,
        old: eddy_common::TableId,
        referencing: Vec<(Arc<Table>, ForeignKeyDef)>,
        new_positions: &[Option<usize>],
    ) -> Result<()> {
        if referencing.is_empty() {
            return Ok(());
        }
        let new = self.table(name)?.def().id;
        let mut children: Vec<String> = Vec::new();
        for (child, _) in &referencing {
            let child_name = if child.def().id == old {
                name.to_string()
            } else {
                child.def().name.clone()
            };
            if !children.contains(&child_name) {
                children.push(child_name);
            }
        }
        for child_name in children {
            let child = self.table(&child_name)?;
            let child = if child_name == name {
                child
            } else {
                self.lock_for_ddl(&child, "ALTER TABLE")?
            };
            let fks: Vec<ForeignKeyDef> = child
                .def()
                .foreign_keys
                .iter()
                .cloned()
                .map(|mut fk| {
                    if fk.ref_table == old {
                        fk.ref_table = new;
                        fk.ref_columns = fk
                            .ref_columns
                            .iter()
                            .map(|c| new_positions.get(*c).copied().flatten().unwrap_or(*c))
                            .collect();
                    }
                    fk
                })
                .collect();
            self.ddl_change(|ddl| ddl.set_foreign_keys(&child_name, fks))?;
        }
        Ok(())
    }
}
