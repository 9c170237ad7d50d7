//! The seam between the SQL layer and the stream layer.
//!
//! Streaming statements (`CREATE SOURCE`, `CREATE MATERIALIZED VIEW`,
//! `SHOW JOBS`, ...) are owned by `eddy-streamsql`, which sits *above* this
//! crate (it plans views with this crate's DataFusion setup and writes
//! tables through the engine). So that `Session` can hand such statements
//! over without a dependency cycle, the server installs an implementation of
//! [`StreamStatements`] in [`crate::Database::streams`].
//!
//! Invariant kept here: a table a stream job owns (a materialized view, the
//! job catalog) is written only by its job. Every SQL statement that would
//! write one is refused with 42809, as PostgreSQL refuses writes to a
//! materialized view, before any other work ([`written_tables`]).

use datafusion::sql::sqlparser::ast::{FromTable, ObjectName, Statement, TableObject};

use crate::error::Result;
use crate::rewrite::table_name;
use crate::session::Output;

/// What the stream layer offers the SQL layer.
pub trait StreamStatements: Send + Sync {
    /// Whether `sql` is a streaming statement, decided on its tokens.
    fn recognises(&self, sql: &str) -> bool;
    /// Runs a statement `recognises` accepted (blocking: it may create
    /// tables and start or stop jobs).
    fn execute(&self, sql: &str) -> Result<Output>;
    /// The columns a statement `recognises` accepted returns (empty for
    /// a command), for the extended protocol's Describe.
    fn result_schema(&self, sql: &str) -> Result<datafusion::arrow::datatypes::SchemaRef>;
    /// Whether `table` is written only by a stream job.
    fn owns_table(&self, table: &str) -> bool;
    /// The stream relations that are not tables (sources), for
    /// `pg_catalog` (psql's `\d` lists them as views: they can be read by
    /// views only and never written).
    fn relations(&self) -> Vec<StreamRelation> {
        Vec::new()
    }
    /// The stream objects that read `table` (a change-log source of it, a
    /// view that lookup-joins it): dropping or reshaping it is refused.
    fn readers_of(&self, _table: &str) -> Vec<String> {
        Vec::new()
    }
}

/// A stream relation as `pg_catalog` shows it.
#[derive(Debug, Clone)]
pub struct StreamRelation {
    pub name: String,
    pub columns: Vec<(String, eddy_common::ColumnType)>,
}

/// The tables `stmt` would write, alter or drop.
pub fn written_tables(stmt: &Statement) -> Vec<String> {
    let names: Vec<&ObjectName> = match stmt {
        Statement::Insert(ins) => match &ins.table {
            TableObject::TableName(n) => vec![n],
            TableObject::TableFunction(_) | TableObject::TableQuery(_) => vec![],
        },
        Statement::Update(u) => match &u.table.relation {
            datafusion::sql::sqlparser::ast::TableFactor::Table { name, .. } => vec![name],
            _ => vec![],
        },
        Statement::Delete(d) => {
            let from = match &d.from {
                FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f,
            };
            from.iter()
                .filter_map(|t| match &t.relation {
                    datafusion::sql::sqlparser::ast::TableFactor::Table { name, .. } => Some(name),
                    _ => None,
                })
                .collect()
        }
        Statement::Merge(m) => match &m.table {
            datafusion::sql::sqlparser::ast::TableFactor::Table { name, .. } => vec![name],
            _ => vec![],
        },
        Statement::Truncate(t) => t.table_names.iter().map(|t| &t.name).collect(),
        Statement::Drop { names, .. } => names.iter().collect(),
        Statement::AlterTable(at) => vec![&at.name],
        Statement::Copy {
            to: false,
            source: datafusion::sql::sqlparser::ast::CopySource::Table { table_name, .. },
            ..
        } => vec![table_name],
        _ => vec![],
    };
    names
        .into_iter()
        .filter_map(|n| table_name(n).ok())
        .collect()
}

/// Refuses `stmt` if it writes a table a stream job owns.
pub fn check_writable(streams: Option<&dyn StreamStatements>, stmt: &Statement) -> Result<()> {
    let Some(s) = streams else { return Ok(()) };
    for t in written_tables(stmt) {
        if s.owns_table(&t) {
            return Err(crate::SqlError::WrongObjectType(format!(
                "cannot change materialized view \"{t}\": it is written only by its stream job"
            )));
        }
    }
    // a stream object reads the table by name and by its columns: DROP
    // and ALTER (but adding a column) would break it
    let reshapes = match stmt {
        Statement::Drop { object_type, .. } => {
            *object_type == datafusion::sql::sqlparser::ast::ObjectType::Table
        }
        Statement::AlterTable(at) => !at.operations.iter().all(|op| {
            matches!(
                op,
                datafusion::sql::sqlparser::ast::AlterTableOperation::AddColumn { .. }
            )
        }),
        _ => false,
    };
    if reshapes {
        for t in written_tables(stmt) {
            let readers = s.readers_of(&t);
            if !readers.is_empty() {
                return Err(crate::SqlError::DependentObjects(format!(
                    "cannot drop or alter table \"{t}\": {} read{} it (drop them first)",
                    readers.join(", "),
                    if readers.len() == 1 { "s" } else { "" }
                )));
            }
        }
    }
    Ok(())
}
