//! The scan an UPDATE or DELETE runs to find its rows.
//!
//! `SELECT <items> FROM <target> AS alias [, <UPDATE's FROM or DELETE's
//! USING items>] [WHERE ...]`, built on the parser's AST (never printed and
//! parsed again), planned like any query over the statement's snapshots.
//! The target is registered as `eddy_dml.__target`, a scan that exposes the
//! hidden row key (`_eddy_key`), which the items end with.
//!
//! With `UPDATE ... FROM` or `DELETE ... USING` a target row can join more
//! than one row of the other relations. PostgreSQL then updates it once,
//! with the values of one of those rows (which one is unspecified), and
//! deletes it once: the caller keeps one row per key (`locked_scan` gathers
//! them by key).
//!
//! Every relation the statement reads is read on one snapshot cut, with
//! the transaction's own writes (`statement_tables`): a subquery or a FROM
//! relation sees the rows the transaction inserted, and under REPEATABLE
//! READ the transaction's snapshot.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::catalog::SchemaProvider;
use datafusion::sql::sqlparser::ast::{
    Expr, Ident, ObjectNamePart, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, Statement,
    TableFactor, TableWithJoins, Visit,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_storage::Table;

use super::{collect_rows, Session};
use crate::error::{Result, SqlError};
use crate::provider::{EddyTable, KEY_COLUMN};
use crate::rewrite::ident_name;

/// The name the target is registered under in the `eddy_dml` schema.
const TARGET_TABLE: &str = "__target";

/// What an UPDATE or DELETE scans besides its items.
pub(super) struct ScanShape {
    /// The target's alias (its name when it has none).
    pub alias: String,
    /// UPDATE's FROM or DELETE's USING list.
    pub joined: Vec<TableWithJoins>,
    pub selection: Option<Expr>,
}

impl ScanShape {
    /// `alias.column`, quoted as given.
    pub fn column(&self, column: &str) -> Expr {
        Expr::CompoundIdentifier(vec![
            Ident::with_quote('"', self.alias.as_str()),
            Ident::with_quote('"', column),
        ])
    }

    /// The target row's key, the last item of every scan.
    pub fn key_item(&self) -> SelectItem {
        SelectItem::UnnamedExpr(self.column(KEY_COLUMN))
    }

    /// The relations of the FROM/USING list must not take the target's
    /// name (PostgreSQL's 42712: `table name "t" specified more than once`).
    pub fn check_names(&self) -> Result<()> {
        for name in self.joined.iter().flat_map(relation_names) {
            if name == self.alias {
                return Err(SqlError::DuplicateAlias(name));
            }
        }
        Ok(())
    }

    /// Refuses a RETURNING list that reads a FROM/USING relation: RETURNING
    /// is evaluated over the written rows of the target only.
    pub fn check_returning(&self, items: &[SelectItem]) -> Result<()> {
        let names: HashSet<String> = self.joined.iter().flat_map(relation_names).collect();
        if names.is_empty() {
            return Ok(());
        }
        // PostgreSQL's `*` here is every FROM / USING relation's columns
        // too: returning the target's alone would be another answer
        if items.iter().any(|i| matches!(i, SelectItem::Wildcard(_))) {
            return Err(SqlError::FeatureNotSupported(format!(
                "RETURNING * with a FROM or USING list is not supported (PostgreSQL returns the columns of the FROM/USING relations too); name the target's columns, or write {}.*",
                self.alias
            )));
        }
        for item in items {
            if let SelectItem::QualifiedWildcard(
                SelectItemQualifiedWildcardKind::ObjectName(n),
                _,
            ) = item
            {
                if let Some(ObjectNamePart::Identifier(last)) = n.0.last() {
                    let last = ident_name(last);
                    if names.contains(&last) {
                        return Err(returning_refusal(&last));
                    }
                }
            }
        }
        for item in items {
            let found = datafusion::sql::sqlparser::ast::visit_expressions(item, |e| {
                if let Expr::CompoundIdentifier(parts) = e {
                    if let Some(first) = parts.first() {
                        let n = ident_name(first);
                        if parts.len() > 1 && names.contains(&n) {
                            return ControlFlow::Break(n);
                        }
                    }
                }
                ControlFlow::Continue(())
            });
            if let ControlFlow::Break(n) = found {
                return Err(returning_refusal(&n));
            }
        }
        Ok(())
    }
}

/// [`ScanShape::check_returning`] of an UPDATE ... FROM or DELETE ...
/// USING as Describe sees it (before it runs), so the refusal comes at
/// Parse as it does at Execute.
pub(super) fn check_statement_returning(stmt: &Statement, alias: &str) -> Result<()> {
    use datafusion::sql::sqlparser::ast::UpdateTableFromKind;
    let (joined, items) = match stmt {
        Statement::Update(u) => match (&u.from, &u.returning) {
            (
                Some(UpdateTableFromKind::AfterSet(f) | UpdateTableFromKind::BeforeSet(f)),
                Some(r),
            ) => (f.clone(), r),
            _ => return Ok(()),
        },
        Statement::Delete(d) => match (&d.using, &d.returning) {
            (Some(u), Some(r)) => (u.clone(), r),
            _ => return Ok(()),
        },
        _ => return Ok(()),
    };
    ScanShape {
        alias: alias.to_string(),
        joined,
        selection: None,
    }
    .check_returning(items)
}

fn returning_refusal(relation: &str) -> SqlError {
    SqlError::FeatureNotSupported(format!(
        "RETURNING a column of \"{relation}\" (a FROM or USING relation) is not supported; \
         RETURNING reads the target's rows"
    ))
}

/// The names a FROM item's relations are known by (aliases, else table
/// names), joins included.
fn relation_names(t: &TableWithJoins) -> Vec<String> {
    std::iter::once(&t.relation)
        .chain(t.joins.iter().map(|j| &j.relation))
        .filter_map(|r| match r {
            TableFactor::Table { alias: Some(a), .. }
            | TableFactor::Derived { alias: Some(a), .. }
            | TableFactor::TableFunction { alias: Some(a), .. }
            | TableFactor::Function { alias: Some(a), .. }
            | TableFactor::UNNEST { alias: Some(a), .. } => Some(ident_name(&a.name)),
            TableFactor::Table {
                name, alias: None, ..
            } => match name.0.last() {
                Some(ObjectNamePart::Identifier(id)) => Some(ident_name(id)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The target as a relation of a scan: `eddy_dml.__target AS "<alias>"`,
/// valid while [`Session::query_with_target`] runs.
pub(super) fn target_relation(alias: &str) -> Result<TableFactor> {
    let mut q = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&format!("SELECT 1 FROM eddy_dml.{TARGET_TABLE} AS x"))?
        .parse_query()?;
    let SetExpr::Select(sel) = q.body.as_mut() else {
        return Err(SqlError::Internal("scan template is not a SELECT".into()));
    };
    let Some(mut from) = sel.from.pop() else {
        return Err(SqlError::Internal("scan template has no FROM".into()));
    };
    if let TableFactor::Table { alias: Some(a), .. } = &mut from.relation {
        a.name = Ident::with_quote('"', alias);
    }
    Ok(from.relation)
}

/// `SELECT <items> FROM eddy_dml.__target AS "<alias>" [, joined] [WHERE]`.
pub(super) fn scan_statement(shape: &ScanShape, items: Vec<SelectItem>) -> Result<Statement> {
    let mut q = Parser::new(&PostgreSqlDialect {})
        .try_with_sql("SELECT 1 FROM x")?
        .parse_query()?;
    let SetExpr::Select(sel) = q.body.as_mut() else {
        return Err(SqlError::Internal("scan template is not a SELECT".into()));
    };
    sel.projection = items;
    if let Some(first) = sel.from.first_mut() {
        first.relation = target_relation(&shape.alias)?;
    }
    sel.from.extend(shape.joined.iter().cloned());
    sel.selection = shape.selection.clone();
    Ok(Statement::Query(q))
}

impl Session {
    /// Runs the scan of `shape` with `items` over the statement's
    /// snapshots; returns the batches.
    pub(super) async fn dml_scan(
        &mut self,
        table: &Arc<Table>,
        shape: &ScanShape,
        items: Vec<SelectItem>,
    ) -> Result<Vec<RecordBatch>> {
        let stmt = scan_statement(shape, items)?;
        self.query_with_target(table, stmt).await
    }

    /// Runs the query `stmt`, which reads the target `table` (with its row
    /// keys) as [`target_relation`], over the statement's snapshots;
    /// returns the batches.
    pub(super) async fn query_with_target(
        &mut self,
        table: &Arc<Table>,
        mut stmt: Statement,
    ) -> Result<Vec<RecordBatch>> {
        let provider =
            Arc::new(EddyTable::new(Arc::clone(table), true).with_view(Arc::clone(&self.view)));
        self.dml_schema
            .register_table(TARGET_TABLE.to_string(), provider)?;
        let result = async {
            self.compat(&mut stmt)?;
            collect_rows(self.run_query(stmt).await?).await
        }
        .await;
        let _ = self.dml_schema.deregister_table(TARGET_TABLE);
        Ok(result?.1)
    }

    /// The tables an UPDATE or DELETE reads besides its target (FROM,
    /// USING, subqueries), and whether it reads the target again (a
    /// self-join or a subquery over it): its name appears more than once.
    pub(super) fn statement_tables<V: Visit>(
        &self,
        stmt: &V,
        target: &Arc<Table>,
    ) -> (Vec<Arc<Table>>, bool) {
        let mut again = false;
        let mut tables = Vec::new();
        for (t, mentions) in self.named_tables(stmt) {
            if t.def().id == target.def().id {
                again = mentions > 1;
            } else {
                tables.push(t);
            }
        }
        (tables, again)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::table_name;
    use datafusion::sql::sqlparser::ast::{Update, UpdateTableFromKind};

    fn update(sql: &str) -> Update {
        match crate::rewrite::parse_statement(sql) {
            Ok(Statement::Update(u)) => u,
            other => panic!("{sql}: {other:?}"),
        }
    }

    fn shape(sql: &str) -> (ScanShape, Vec<SelectItem>) {
        let mut u = update(sql);
        let joined = match u.from.take() {
            Some(UpdateTableFromKind::AfterSet(f)) => f,
            _ => Vec::new(),
        };
        let alias = match &u.table.relation {
            TableFactor::Table { alias: Some(a), .. } => ident_name(&a.name),
            TableFactor::Table { name, .. } => table_name(name).unwrap_or_default(),
            _ => String::new(),
        };
        let shape = ScanShape {
            alias,
            joined,
            selection: u.selection.take(),
        };
        (shape, u.returning.unwrap_or_default())
    }

    #[test]
    fn returning_may_read_the_target_only() {
        let (s, r) =
            shape("UPDATE t AS a SET x = 1 FROM u WHERE a.id = u.id RETURNING a.x, x, a.*");
        assert!(s.check_returning(&r).is_ok());
        for sql in [
            // PostgreSQL's `*` includes u's columns
            "UPDATE t AS a SET x = 1 FROM u WHERE a.id = u.id RETURNING *",
            "UPDATE t SET x = 1 FROM u WHERE t.id = u.id RETURNING u.y",
            "UPDATE t SET x = 1 FROM u AS v WHERE t.id = v.id RETURNING t.x + v.y",
            "UPDATE t SET x = 1 FROM u AS v WHERE t.id = v.id RETURNING v.*",
            "UPDATE t SET x = 1 FROM u JOIN w ON u.id = w.id RETURNING lower(w.name)",
        ] {
            let (s, r) = shape(sql);
            let e = s.check_returning(&r).expect_err(sql);
            assert_eq!(e.sqlstate(), "0A000", "{sql}");
        }
    }

    #[test]
    fn the_target_name_is_taken_once() {
        for (sql, taken) in [
            ("UPDATE t SET x = 1 FROM t", true),
            ("UPDATE t AS a SET x = 1 FROM u AS a", true),
            ("UPDATE t AS a SET x = 1 FROM u JOIN v AS a ON true", true),
            ("UPDATE t SET x = 1 FROM t AS t2", false),
            ("UPDATE t AS a SET x = 1 FROM t", false),
        ] {
            let (s, _) = shape(sql);
            let r = s.check_names();
            assert_eq!(r.is_err(), taken, "{sql}");
            if let Err(e) = r {
                assert_eq!(e.sqlstate(), "42712", "{sql}");
            }
        }
    }

    #[test]
    fn the_scan_joins_the_target_with_the_from_list() {
        let (s, _) = shape(
            "UPDATE t AS \"A\" SET x = 1 FROM u, (VALUES (1)) AS v(id) WHERE \"A\".id = v.id",
        );
        let stmt = scan_statement(&s, vec![s.key_item()]).expect("scan");
        assert_eq!(
            stmt.to_string(),
            "SELECT \"A\".\"_eddy_key\" FROM eddy_dml.__target AS \"A\", u, (VALUES (1)) AS v (id) WHERE \"A\".id = v.id"
        );
    }
}
