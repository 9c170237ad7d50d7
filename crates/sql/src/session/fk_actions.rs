//! What a DELETE or key UPDATE of referenced rows does to the rows that
//! reference them (`docs/design/foreign_keys.md`, "Actions"): NO ACTION
//! and RESTRICT fail (or, deferred, record the removed keys for the check
//! at commit), CASCADE deletes, SET NULL and SET DEFAULT change them, all
//! in the statement's transaction.

use std::collections::HashSet;
use std::sync::Arc;

use eddy_common::{FkAction, Row, TableDef, Value};
use eddy_storage::Table;

use datafusion::sql::sqlparser::ast::{SelectItem, SetExpr, Statement};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::foreign_keys::{referencing_rows, still_referenced};
use super::{cast_column, collect_rows, run_blocking, Session};
use crate::deferred_fk::{RemovedKeys, TableRef};
use crate::error::{Result, SqlError};

impl Session {
    /// After a statement deleted rows of `table` (or, `update`, moved them
    /// to other keys): the rows stored under `keys` before it. Applies each
    /// referencing constraint's action, recursively through CASCADE, in
    /// the same transaction.
    pub(super) async fn parent_keys_removed(
        &mut self,
        table: &Arc<Table>,
        keys: Vec<Vec<u8>>,
        update: bool,
    ) -> Result<()> {
        let mut work: Vec<(Arc<Table>, Vec<Vec<u8>>, bool)> =
            vec![(Arc::clone(table), keys, update)];
        while let Some((parent, keys, update)) = work.pop() {
            if keys.is_empty() || !parent.def().has_primary_key() {
                continue;
            }
            let refs = self.referencing(parent.def().id);
            if refs.is_empty() {
                continue;
            }
            let pdef = Arc::clone(parent.def());
            let all: HashSet<Vec<u8>> = keys.into_iter().collect();
            // NO ACTION looks at the end of the statement: a key another
            // row took over is still there
            let txn = self.fk_txn()?;
            let gone: HashSet<Vec<u8>> = all
                .iter()
                .filter(|k| !matches!(txn.own_row(&parent, k), Some(Some(_))))
                .cloned()
                .collect();
            for (child, fk) in refs {
                let act = if update { fk.on_update } else { fk.on_delete };
                let keys = if act == FkAction::Restrict {
                    &all
                } else {
                    &gone
                };
                if keys.is_empty() {
                    continue;
                }
                if act == FkAction::NoAction && self.fk_deferred(&fk) {
                    let removed = RemovedKeys {
                        parent: TableRef {
                            id: pdef.id,
                            name: pdef.name.clone(),
                        },
                        child: TableRef {
                            id: child.def().id,
                            name: child.def().name.clone(),
                        },
                        constraint: fk.name.clone(),
                        keys: keys.iter().cloned().collect(),
                    };
                    self.fk_txn()?.deferred.defer_removed_keys(removed);
                    continue;
                }
                let writes = matches!(
                    act,
                    FkAction::Cascade | FkAction::SetNull | FkAction::SetDefault
                );
                let txn = self.fk_txn()?;
                let found =
                    run_blocking(|| referencing_rows(txn, &child, &fk, &pdef, keys, writes))?;
                if found.is_empty() {
                    continue;
                }
                let cdef = Arc::clone(child.def());
                match act {
                    FkAction::NoAction | FkAction::Restrict => {
                        return Err(still_referenced(&pdef, &fk, &cdef, &found[0].2));
                    }
                    FkAction::Cascade => {
                        let txn = self.fk_txn()?;
                        let mut removed = Vec::with_capacity(found.len());
                        for (k, _, _) in found {
                            txn.put(&child, k.clone(), None)?;
                            removed.push(k);
                        }
                        work.push((Arc::clone(&child), removed, false));
                    }
                    FkAction::SetNull | FkAction::SetDefault => {
                        let mut new_rows = Vec::with_capacity(found.len());
                        for (k, mut row, _) in found {
                            for &c in &fk.columns {
                                row[c] = if act == FkAction::SetNull {
                                    Value::Null
                                } else {
                                    self.column_default(&cdef, c).await?
                                };
                            }
                            eddy_storage::codec::check_row(&cdef, &row)?;
                            new_rows.push((k, row));
                        }
                        let rows: Vec<Row> = new_rows.iter().map(|(_, r)| r.clone()).collect();
                        let txn = self.fk_txn()?;
                        for (k, row) in new_rows {
                            txn.put(&child, k, Some(row))?;
                        }
                        self.enforce_checks(&cdef, &rows).await?;
                        if act == FkAction::SetDefault {
                            self.check_parents(&cdef, &rows)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The value of column `col`'s DEFAULT (NULL without one), evaluated
    /// through DataFusion as an INSERT would.
    async fn column_default(&self, def: &TableDef, col: usize) -> Result<Value> {
        let c = def
            .columns
            .get(col)
            .ok_or_else(|| SqlError::Internal(format!("no column {col}")))?;
        let Some(text) = &c.default else {
            return Ok(Value::Null);
        };
        let expr = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(text)?
            .parse_expr()?;
        let mut q = Parser::new(&PostgreSqlDialect {})
            .try_with_sql("SELECT NULL")?
            .parse_query()?;
        let SetExpr::Select(sel) = q.body.as_mut() else {
            return Err(SqlError::Internal(
                "default template is not a SELECT".into(),
            ));
        };
        sel.projection = vec![SelectItem::UnnamedExpr(expr)];
        let out = self.run_query(Statement::Query(q)).await?;
        let (_, batches) = collect_rows(out).await?;
        let Some(b) = batches.iter().find(|b| b.num_rows() > 0) else {
            return Ok(Value::Null);
        };
        let a = cast_column(b.column(0), c.ty, &c.name, &self.time_zone())?;
        Ok(eddy_storage::arrow_values::value_at(a.as_ref(), c.ty, 0)?)
    }
}
