//! Running MERGE (`crate::merge` reads the statement; the design and its
//! invariants are in `docs/design/sql.md`, "MERGE").
//!
//! Two scans, on one snapshot cut, before anything is written:
//! * the source rows no target row matches (`source WHERE NOT EXISTS
//!   (target WHERE on)`), with the clause that acts on each and the
//!   values it inserts;
//! * the target rows some source row matches (`target, source WHERE on`,
//!   the scan of an UPDATE ... FROM), with the clause that acts on each
//!   pair and the row's new values, locked and re-checked as UPDATE's and
//!   DELETE's rows are (`locked_scan_on`).
//!
//! Then the writes, through the paths of DELETE, UPDATE and INSERT (every
//! constraint, default, identity and foreign key as there): the deleted
//! rows, the updated rows, then the inserted rows (each clause's rows as
//! one `INSERT ... SELECT` from the `eddy_dml` schema). No action sees
//! another's writes, as in PostgreSQL, where the join is computed once.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array, RecordBatch};
use datafusion::arrow::compute::{cast, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::SchemaProvider;
use datafusion::datasource::MemTable;
use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    Expr, Ident, Insert, Merge, ObjectName, SelectItem, SetExpr, Statement, TableObject,
    TableWithJoins,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_common::{Row, TableDef};
use eddy_storage::Table;

use super::dml::{assigned_values, rows_with_keys, single_column_assignments};
use super::dml_scan::{target_relation, ScanShape};
use super::{defaults, Output, Session};
use crate::error::{Result, SqlError};
use crate::merge::{self, Clause, InsertValues, MatchedAction, MergeStatement};
use crate::rewrite::table_name;

/// The name a NOT MATCHED clause's rows are registered under in
/// `eddy_dml` while its INSERT runs.
const INSERTED_ROWS: &str = "__merge_rows";

/// What a WHEN MATCHED clause does, with an UPDATE's value per column
/// (`None`: the column keeps its value).
enum Matched {
    Update(Vec<Option<Expr>>),
    Delete,
    Nothing,
}

/// What a WHEN NOT MATCHED clause inserts: the target columns given a
/// value (DEFAULT left out: the insert gives them their defaults) and
/// those values.
struct Inserted {
    columns: Vec<usize>,
    values: Vec<Expr>,
}

/// The clause number (from 1; 0: none) of each row of `batches`, from
/// column `at`.
fn clause_numbers(batches: &[RecordBatch], at: usize) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for b in batches {
        let column = b
            .columns()
            .get(at)
            .ok_or_else(|| SqlError::Internal("MERGE scan lacks its clause column".into()))?;
        let numbers = cast(column, &DataType::Int64)?;
        let numbers = numbers
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| SqlError::Internal("clause numbers are not int8".into()))?;
        for i in 0..numbers.len() {
            let n = if numbers.is_null(i) {
                0
            } else {
                numbers.value(i)
            };
            out.push(usize::try_from(n).unwrap_or(0));
        }
    }
    Ok(out)
}

/// The rows of `batches` whose clause (`numbers_per_batch`, column 0's
/// numbers of each batch) is `clause`, with the
/// columns `from..from + width`, named `c1`, `c2`, ...
fn clause_rows(
    batches: &[RecordBatch],
    numbers_per_batch: &[Vec<usize>],
    clause: usize,
    from: usize,
    width: usize,
) -> Result<(Arc<Schema>, Vec<RecordBatch>, usize)> {
    let mut out = Vec::new();
    let mut rows = 0;
    let mut schema = None;
    for (b, numbers) in batches.iter().zip(numbers_per_batch) {
        let mask: datafusion::arrow::array::BooleanArray =
            numbers.iter().map(|n| Some(*n == clause)).collect();
        let kept = filter_record_batch(b, &mask)?;
        let columns: Vec<Arc<dyn Array>> = (from..from + width)
            .map(|i| {
                kept.columns()
                    .get(i)
                    .cloned()
                    .ok_or_else(|| SqlError::Internal("MERGE scan lacks a value".into()))
            })
            .collect::<Result<_>>()?;
        if width == 0 {
            // every column DEFAULT: only the count matters
            rows += kept.num_rows();
            continue;
        }
        let fields: Vec<Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("c{}", i + 1), c.data_type().clone(), true))
            .collect();
        let s = Arc::new(Schema::new(fields));
        rows += kept.num_rows();
        out.push(RecordBatch::try_new(Arc::clone(&s), columns)?);
        schema = Some(s);
    }
    let schema = schema.unwrap_or_else(|| Arc::new(Schema::empty()));
    Ok((schema, out, rows))
}

fn value_items(values: Vec<Expr>, names: &[&str]) -> Vec<SelectItem> {
    values
        .into_iter()
        .zip(names)
        .map(|(expr, name)| SelectItem::ExprWithAlias {
            expr,
            alias: merge::quoted(name),
        })
        .collect()
}

impl Session {
    /// Runs a MERGE in the open transaction.
    pub(super) async fn merge(&mut self, m: Merge) -> Result<Output> {
        let (reads_probe, merge) = (m.clone(), merge::read(m)?);
        let tname = table_name(&merge.target)?;
        let alias = merge.target_alias.clone().unwrap_or_else(|| tname.clone());
        let table = self.table(&tname)?;
        let def = table.def().clone();
        let (reads, reads_target_again) = self.statement_tables(&reads_probe, &table);
        let matched = matched_actions(&def, &tname, &merge.matched)?;
        // the columns some UPDATE clause sets (a key or a reference moves)
        let assigned: Vec<bool> = (0..def.columns.len())
            .map(|c| {
                matched.iter().any(|m| match m {
                    Matched::Update(exprs) => exprs.get(c).is_some_and(Option::is_some),
                    _ => false,
                })
            })
            .collect();
        let inserted = inserted_columns(&def, &tname, &merge.not_matched)?;
        let shape = Arc::new(ScanShape {
            alias,
            joined: vec![TableWithJoins {
                relation: merge.source.clone(),
                joins: Vec::new(),
            }],
            selection: Some(merge.on.clone()),
        });
        shape.check_names()?;
        merge.refuse_target_in_not_matched(&shape.alias)?;
        let tables: Vec<Arc<Table>> = std::iter::once(Arc::clone(&table))
            .chain(reads.iter().cloned())
            .collect();
        let snaps = self.install_tables(&tables)?;
        // the source rows no target row matches, on the snapshot the
        // matched rows are found on
        let unmatched = if merge.inserts() {
            self.unmatched_rows(&table, &merge, &shape, &inserted)
                .await?
        } else {
            Vec::new()
        };
        let found = if merge.writes_matched() {
            let items = matched_items(&def, &shape, &merge, &matched);
            let kinds: Arc<Vec<Matched>> = Arc::new(matched);
            let (scan_def, target, shape) = (def.clone(), Arc::clone(&table), Arc::clone(&shape));
            self.locked_scan_on(&table, &reads, reads_target_again, snaps, move |s| {
                let (items, def, target) = (items.clone(), scan_def.clone(), Arc::clone(&target));
                let (shape, kinds) = (Arc::clone(&shape), Arc::clone(&kinds));
                Box::pin(async move {
                    let batches = s.dml_scan(&target, &shape, items).await?;
                    let clauses = clause_numbers(&batches, def.columns.len() + 1)?;
                    let rows = rows_with_keys(&def, &batches, &s.time_zone())?;
                    acted_on(rows, &clauses, &kinds)
                })
            })
            .await?
        } else {
            Vec::new()
        };
        let mut count = 0;
        let (updated, deleted): (Vec<_>, Vec<_>) =
            found.into_iter().partition(|(_, r)| r.is_some());
        if !deleted.is_empty() {
            count += deleted.len();
            let keys: Vec<Vec<u8>> = deleted.into_iter().map(|(k, _)| k).collect();
            let txn = self.txn_mut()?;
            for k in &keys {
                txn.put(&table, k.clone(), None)?;
            }
            self.parent_keys_removed(&table, keys, false).await?;
        }
        if !updated.is_empty() {
            count += updated.len();
            let rows = updated
                .into_iter()
                .filter_map(|(k, r)| r.map(|r| (k, r)))
                .collect();
            self.write_updated_rows(&table, rows, &assigned).await?;
        }
        for (clause, columns, (schema, batches, rows)) in unmatched {
            if rows == 0 {
                continue;
            }
            count += rows;
            self.insert_clause_rows(&merge, &def, clause, columns, schema, batches, rows)
                .await?;
        }
        Ok(Output::Command(format!("MERGE {count}")))
    }

    /// The source rows no target row matches, per inserting clause: (its
    /// number, the target columns it gives, its rows).
    #[allow(clippy::type_complexity)]
    async fn unmatched_rows(
        &mut self,
        table: &Arc<Table>,
        merge: &MergeStatement,
        shape: &ScanShape,
        inserted: &[Option<Inserted>],
    ) -> Result<Vec<(usize, Vec<usize>, (Arc<Schema>, Vec<RecordBatch>, usize))>> {
        let mut items = vec![SelectItem::ExprWithAlias {
            expr: merge::chosen_clause(&merge.not_matched),
            alias: merge::quoted("__merge_clause"),
        }];
        // (clause number, its columns, where its values start, how many)
        let mut layout = Vec::new();
        for (k, ins) in inserted.iter().enumerate() {
            let Some(ins) = ins else { continue };
            let from = items.len();
            let names: Vec<String> = (0..ins.values.len())
                .map(|j| format!("__merge_{}_{}", k + 1, j + 1))
                .collect();
            let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let values: Vec<Expr> = ins
                .values
                .iter()
                .map(|v| {
                    merge::chosen_value(
                        &merge.not_matched,
                        |i, _| (i == k).then(|| Expr::Nested(Box::new(v.clone()))),
                        merge::null(),
                    )
                })
                .collect();
            items.extend(value_items(values, &name_refs));
            layout.push((k + 1, ins.columns.clone(), from, ins.values.len()));
        }
        let stmt = unmatched_query(merge, shape, items)?;
        let batches = self.query_with_target(table, stmt).await?;
        let numbers: Vec<Vec<usize>> = batches
            .iter()
            .map(|b| clause_numbers(std::slice::from_ref(b), 0))
            .collect::<Result<_>>()?;
        layout
            .into_iter()
            .map(|(clause, columns, from, width)| {
                let rows = clause_rows(&batches, &numbers, clause, from, width)?;
                Ok((clause, columns, rows))
            })
            .collect()
    }

    /// Inserts one NOT MATCHED clause's `rows` rows (`batches`, one column
    /// per entry of `columns`) through INSERT's path.
    #[allow(clippy::too_many_arguments)]
    async fn insert_clause_rows(
        &mut self,
        merge: &MergeStatement,
        def: &TableDef,
        clause: usize,
        columns: Vec<usize>,
        schema: Arc<Schema>,
        batches: Vec<RecordBatch>,
        rows: usize,
    ) -> Result<()> {
        let names: Vec<Ident> = columns
            .iter()
            .filter_map(|c| def.columns.get(*c))
            .map(|c| merge::quoted(&c.name))
            .collect();
        let ins = if names.is_empty() {
            // every column takes its default: `(first) VALUES (DEFAULT), ...`
            let first = def
                .columns
                .first()
                .map(|c| merge::quoted(&c.name))
                .ok_or_else(|| SqlError::Internal("a table without columns".into()))?;
            insert_defaults(merge, first, rows)?
        } else {
            let rows_table = MemTable::try_new(schema, vec![batches])?;
            self.dml_schema
                .register_table(INSERTED_ROWS.to_string(), Arc::new(rows_table))?;
            insert_from_rows(merge, names)?
        };
        let mut ins = ins;
        let overriding = clause
            .checked_sub(1)
            .and_then(|i| merge.not_matched.get(i))
            .and_then(|c| c.action.as_ref())
            .and_then(|a| a.overriding);
        if let Some(o) = overriding {
            ins.insert_token =
                AttachedToken(crate::overriding::marked_token(&ins.insert_token.0, o));
        }
        let r = Box::pin(self.insert(ins)).await;
        let _ = self.dml_schema.deregister_table(INSERTED_ROWS);
        r.inspect_err(|_| tracing::debug!(clause, "MERGE's INSERT failed"))?;
        Ok(())
    }
}

/// Each WHEN MATCHED clause's action, an UPDATE's assignments checked
/// against the table as UPDATE checks them.
fn matched_actions(
    def: &TableDef,
    tname: &str,
    clauses: &[Clause<MatchedAction>],
) -> Result<Vec<Matched>> {
    clauses
        .iter()
        .map(|c| match &c.action {
            MatchedAction::Delete => Ok(Matched::Delete),
            MatchedAction::Nothing => Ok(Matched::Nothing),
            MatchedAction::Update(assignments) => {
                let single = single_column_assignments(assignments.clone())?;
                Ok(Matched::Update(assigned_values(def, tname, &single, true)?))
            }
        })
        .collect()
}

/// Each WHEN NOT MATCHED clause's columns and values (`None`: DO
/// NOTHING), DEFAULT values left out.
fn inserted_columns(
    def: &TableDef,
    tname: &str,
    clauses: &[Clause<Option<InsertValues>>],
) -> Result<Vec<Option<Inserted>>> {
    clauses
        .iter()
        .map(|c| {
            let Some(ins) = &c.action else {
                return Ok(None);
            };
            let columns: Vec<usize> = if ins.columns.is_empty() {
                if ins.values.len() > def.columns.len() {
                    return Err(SqlError::SyntaxMessage(
                        "INSERT has more expressions than target columns".into(),
                    ));
                }
                (0..ins.values.len()).collect()
            } else {
                let mut seen = HashSet::new();
                ins.columns
                    .iter()
                    .map(|name| {
                        let idx = def.column_index(name).ok_or_else(|| {
                            SqlError::UndefinedColumn(format!("{name}\" of relation \"{tname}"))
                        })?;
                        if !seen.insert(idx) {
                            return Err(SqlError::DuplicateColumn(name.clone()));
                        }
                        Ok(idx)
                    })
                    .collect::<Result<_>>()?
            };
            let (columns, values) = columns
                .into_iter()
                .zip(ins.values.iter().cloned())
                .filter(|(_, v)| !defaults::is_default_keyword(v))
                .unzip();
            Ok(Some(Inserted { columns, values }))
        })
        .collect()
}

/// The matched scan's items: each column's new value (its value when no
/// UPDATE clause sets it), the row key, then the acting clause's number.
fn matched_items(
    def: &TableDef,
    shape: &ScanShape,
    merge: &MergeStatement,
    matched: &[Matched],
) -> Vec<SelectItem> {
    let mut items: Vec<SelectItem> = def
        .columns
        .iter()
        .enumerate()
        .map(|(c, col)| {
            let kept = shape.column(&col.name);
            let set_by = |i: usize| match matched.get(i) {
                Some(Matched::Update(exprs)) => exprs.get(c).cloned().flatten(),
                _ => None,
            };
            if (0..matched.len()).all(|i| set_by(i).is_none()) {
                return SelectItem::UnnamedExpr(kept);
            }
            SelectItem::ExprWithAlias {
                expr: merge::chosen_value(
                    &merge.matched,
                    |i, _| set_by(i).map(|e| Expr::Nested(Box::new(e))),
                    kept,
                ),
                alias: merge::quoted(&col.name),
            }
        })
        .collect();
    items.push(shape.key_item());
    items.push(SelectItem::ExprWithAlias {
        expr: merge::chosen_clause(&merge.matched),
        alias: merge::quoted("__merge_clause"),
    });
    items
}

/// The rows the matched scan found that a clause writes: (key, the new
/// row) for an UPDATE, (key, `None`) for a DELETE. A target row written
/// for two source rows fails the statement (21000).
fn acted_on(
    rows: Vec<(Vec<u8>, Row)>,
    clauses: &[usize],
    kinds: &[Matched],
) -> Result<Vec<(Vec<u8>, Option<Row>)>> {
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut out = Vec::new();
    for ((key, row), clause) in rows.into_iter().zip(clauses) {
        let new = match clause.checked_sub(1).and_then(|i| kinds.get(i)) {
            None | Some(Matched::Nothing) => continue,
            Some(Matched::Update(_)) => Some(row),
            Some(Matched::Delete) => None,
        };
        if !seen.insert(key.clone()) {
            return Err(SqlError::MergeRowTwice);
        }
        out.push((key, new));
    }
    Ok(out)
}

/// `SELECT <items> FROM <source> WHERE NOT EXISTS (SELECT 1 FROM <target>
/// WHERE <on>)`.
pub(super) fn unmatched_query(
    merge: &MergeStatement,
    shape: &ScanShape,
    items: Vec<SelectItem>,
) -> Result<Statement> {
    let parse = |sql: &str| {
        Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)?
            .parse_query()
    };
    let mut outer = parse("SELECT 1 FROM x")?;
    let mut inner = parse("SELECT 1 FROM x")?;
    let (SetExpr::Select(o), SetExpr::Select(i)) = (outer.body.as_mut(), inner.body.as_mut())
    else {
        return Err(SqlError::Internal("scan template is not a SELECT".into()));
    };
    if let Some(first) = i.from.first_mut() {
        first.relation = target_relation(&shape.alias)?;
    }
    i.selection = Some(merge.on.clone());
    o.projection = items;
    if let Some(first) = o.from.first_mut() {
        first.relation = merge.source.clone();
    }
    o.selection = Some(Expr::Exists {
        subquery: inner,
        negated: true,
    });
    Ok(Statement::Query(outer))
}

/// `INSERT INTO <target> (<names>) SELECT * FROM eddy_dml.__merge_rows`.
fn insert_from_rows(merge: &MergeStatement, names: Vec<Ident>) -> Result<Insert> {
    let stmt = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&format!(
            "INSERT INTO x SELECT * FROM eddy_dml.{INSERTED_ROWS}"
        ))?
        .parse_statement()?;
    let Statement::Insert(mut ins) = stmt else {
        return Err(SqlError::Internal(
            "insert template is not an INSERT".into(),
        ));
    };
    ins.table = TableObject::TableName(merge.target.clone());
    ins.columns = names.into_iter().map(ObjectName::from).collect();
    Ok(ins)
}

/// `INSERT INTO <target> (<first>) VALUES (DEFAULT), ...`, `rows` rows.
fn insert_defaults(merge: &MergeStatement, first: Ident, rows: usize) -> Result<Insert> {
    let stmt = Parser::new(&PostgreSqlDialect {})
        .try_with_sql("INSERT INTO x VALUES (DEFAULT)")?
        .parse_statement()?;
    let Statement::Insert(mut ins) = stmt else {
        return Err(SqlError::Internal(
            "insert template is not an INSERT".into(),
        ));
    };
    ins.table = TableObject::TableName(merge.target.clone());
    ins.columns = vec![ObjectName::from(first)];
    if let Some(SetExpr::Values(v)) = ins.source.as_mut().map(|q| q.body.as_mut()) {
        if let Some(row) = v.rows.first().cloned() {
            v.rows = vec![row; rows];
        }
    }
    Ok(ins)
}
