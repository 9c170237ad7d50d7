//! EXPLAIN of INSERT, UPDATE, DELETE and MERGE: the plans of the queries
//! Eddy runs to find the rows the statement writes.
//!
//! DataFusion would plan such a statement as its own DML node, which Eddy
//! never executes (Eddy's DML finds its rows with a query, locks them and
//! writes them through the transaction): its plan would describe work
//! that does not happen. So the answer is a first row naming the write
//! (`Update on t`), then the EXPLAIN output of each query the statement
//! runs, labelled: UPDATE's and DELETE's scan of the target (joined with
//! FROM / USING), INSERT's source query, MERGE's two scans (see
//! `session/merge.rs`). The rows' shape is EXPLAIN's own (`plan_type`,
//! `plan`), so the options of EXPLAIN (VERBOSE, FORMAT) apply to each.
//!
//! A statement the fixed-plan path takes (`fastpath`: a primary-key
//! lookup or a single-row write) plans no query: the headline says so and
//! no plan follows.
//!
//! EXPLAIN ANALYZE of these statements would run them (PostgreSQL writes
//! the rows); it is refused (0A000) rather than shown without running.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::sql::sqlparser::ast::{
    FromTable, SelectItem, SetExpr, Statement, TableObject, TableWithJoins, UpdateTableFromKind,
};
use eddy_storage::Table;

use super::dml_scan::ScanShape;
use super::{batches_output, collect_rows, relation_of, Output, Session};
use crate::error::{Result, SqlError};
use crate::fastpath;
use crate::rewrite::table_name;

/// One query a DML statement runs: its label, the target it reads (with
/// row keys) if any, the query.
struct Scan {
    label: &'static str,
    target: Option<Arc<Table>>,
    query: Statement,
}

/// Whether `stmt` is a DML statement, or a query whose body is one
/// (`WITH ... UPDATE`).
pub(super) fn is_dml(stmt: &Statement) -> bool {
    match stmt {
        Statement::Insert(_)
        | Statement::Update(_)
        | Statement::Delete(_)
        | Statement::Merge(_) => true,
        Statement::Query(q) => matches!(
            q.body.as_ref(),
            SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_)
        ),
        _ => false,
    }
}

impl Session {
    /// EXPLAIN of a DML statement (`explain` is the whole EXPLAIN).
    pub(super) async fn explain_dml(&mut self, explain: Statement) -> Result<Output> {
        let Statement::Explain {
            statement, analyze, ..
        } = &explain
        else {
            return Err(SqlError::Internal("not an EXPLAIN".into()));
        };
        if *analyze {
            return Err(SqlError::FeatureNotSupported(
                "EXPLAIN ANALYZE of INSERT, UPDATE, DELETE or MERGE is not supported (it would \
                 write the rows); EXPLAIN without ANALYZE shows the plans of the queries it runs"
                    .into(),
            ));
        }
        let dml = crate::dml_with::hoist(statement.as_ref().clone())?;
        if crate::dml_with::runs_in_parts(&dml) {
            return Err(SqlError::FeatureNotSupported(
                "EXPLAIN of a data-modifying WITH is not supported".into(),
            ));
        }
        let (mut headline, mut scans) = self.dml_scans(&dml)?;
        if fastpath::recognise(&dml, &self.db.engine, &self.ctx).is_some() {
            // what runs is the fixed plan, not the scans
            headline.push_str(
                "; runs on the fixed-plan path (a primary-key lookup or a single-row write,                  no query planned)",
            );
            scans.clear();
        }
        self.install_view(&dml)?;
        let mut labelled: Vec<RecordBatch> = Vec::new();
        for scan in scans {
            let mut shown = explain.clone();
            if let Statement::Explain { statement, .. } = &mut shown {
                **statement = scan.query;
            }
            let batches = match &scan.target {
                Some(t) => self.query_with_target(t, shown).await?,
                None => {
                    self.compat(&mut shown)?;
                    collect_rows(self.run_query(shown).await?).await?.1
                }
            };
            for b in batches {
                labelled.push(with_label(&b, scan.label)?);
            }
        }
        let schema = plan_schema();
        let first = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(StringArray::from(vec!["dml"])) as ArrayRef,
                Arc::new(StringArray::from(vec![headline])) as ArrayRef,
            ],
        )?;
        let mut all = vec![first];
        all.extend(labelled);
        let one = concat_batches(&schema, &all)?;
        Ok(batches_output(schema, vec![one]))
    }

    /// The headline and the queries of DML statement `dml`.
    fn dml_scans(&self, dml: &Statement) -> Result<(String, Vec<Scan>)> {
        let key_scan = |target: &Arc<Table>, shape: ScanShape, label| -> Result<Scan> {
            let items: Vec<SelectItem> = vec![shape.key_item()];
            Ok(Scan {
                label,
                target: Some(Arc::clone(target)),
                query: super::dml_scan::scan_statement(&shape, items)?,
            })
        };
        match dml {
            Statement::Update(u) => {
                let (tname, alias) = relation_of(&u.table.relation)?;
                let table = self.table(&tname)?;
                let joined = match &u.from {
                    Some(UpdateTableFromKind::AfterSet(f) | UpdateTableFromKind::BeforeSet(f)) => {
                        f.clone()
                    }
                    None => Vec::new(),
                };
                let shape = ScanShape {
                    alias,
                    joined,
                    selection: u.selection.clone(),
                };
                Ok((
                    format!("Update on {tname}: the rows found are locked, re-checked and written"),
                    vec![key_scan(&table, shape, "rows to update")?],
                ))
            }
            Statement::Delete(d) => {
                let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &d.from;
                let rel = from
                    .first()
                    .ok_or_else(|| SqlError::Syntax("DELETE needs a table".into()))?;
                let (tname, alias) = relation_of(&rel.relation)?;
                let table = self.table(&tname)?;
                let shape = ScanShape {
                    alias,
                    joined: d.using.clone().unwrap_or_default(),
                    selection: d.selection.clone(),
                };
                Ok((
                    format!("Delete on {tname}: the rows found are locked, re-checked and deleted"),
                    vec![key_scan(&table, shape, "rows to delete")?],
                ))
            }
            Statement::Insert(i) => {
                let tname = match &i.table {
                    TableObject::TableName(n) => table_name(n)?,
                    other => {
                        return Err(SqlError::FeatureNotSupported(format!(
                            "INSERT INTO {other}"
                        )))
                    }
                };
                let scans = match &i.source {
                    Some(q) => vec![Scan {
                        label: "rows to insert",
                        target: None,
                        query: Statement::Query(q.clone()),
                    }],
                    None => Vec::new(),
                };
                Ok((format!("Insert on {tname}"), scans))
            }
            Statement::Merge(m) => {
                let merge = crate::merge::read(m.clone())?;
                let tname = table_name(&merge.target)?;
                let alias = merge.target_alias.clone().unwrap_or_else(|| tname.clone());
                let table = self.table(&tname)?;
                let shape = ScanShape {
                    alias,
                    joined: vec![TableWithJoins {
                        relation: merge.source.clone(),
                        joins: Vec::new(),
                    }],
                    selection: Some(merge.on.clone()),
                };
                let mut scans = Vec::new();
                if merge.inserts() {
                    let items = vec![SelectItem::UnnamedExpr(crate::merge::chosen_clause(
                        &merge.not_matched,
                    ))];
                    scans.push(Scan {
                        label: "source rows not matched",
                        target: Some(Arc::clone(&table)),
                        query: super::merge::unmatched_query(&merge, &shape, items)?,
                    });
                }
                if merge.writes_matched() {
                    scans.push(key_scan(&table, shape, "matched rows")?);
                }
                Ok((
                    format!(
                        "Merge on {tname}: the matched rows are locked, re-checked and written; \
                         then the rows not matched are inserted"
                    ),
                    scans,
                ))
            }
            other => Err(SqlError::Internal(format!("not a DML statement: {other}"))),
        }
    }
}

/// EXPLAIN's columns, `plan_type` and `plan`, as this module answers them
/// (Describe too).
pub(super) fn plan_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("plan_type", DataType::Utf8, false),
        Field::new("plan", DataType::Utf8, false),
    ]))
}

/// `batch` (EXPLAIN's `plan_type`, `plan`) with `label: ` before each
/// plan type.
fn with_label(batch: &RecordBatch, label: &str) -> Result<RecordBatch> {
    let types = batch
        .columns()
        .first()
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| SqlError::Internal("EXPLAIN's plan_type is not text".into()))?;
    let plans = batch
        .columns()
        .get(1)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| SqlError::Internal("EXPLAIN's plan is not text".into()))?;
    let labelled: StringArray = types
        .iter()
        .map(|t| Some(format!("{label}: {}", t.unwrap_or_default())))
        .collect();
    Ok(RecordBatch::try_new(
        plan_schema(),
        vec![
            Arc::new(labelled) as ArrayRef,
            Arc::new(plans.clone()) as ArrayRef,
        ],
    )?)
}
