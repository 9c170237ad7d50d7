//! SQL cursors: `DECLARE ... CURSOR`, `FETCH`, `MOVE`, `CLOSE`.
//!
//! A cursor reads the snapshot its DECLARE saw. A plain (NO SCROLL,
//! WITHOUT HOLD) cursor streams: its query runs as the client fetches, and
//! it can only move forward (55000 otherwise). A SCROLL or WITH HOLD cursor
//! holds its whole result from DECLARE on, so it can move anywhere and (WITH
//! HOLD) outlive its transaction, as PostgreSQL materialises a holdable
//! cursor at COMMIT. Without HOLD a cursor needs a transaction block (25P01)
//! and ends with it; a WITH HOLD cursor declared in a block that rolls back
//! ends too.
//!
//! Positions follow PostgreSQL: 0 is before the first row, `n + 1` after
//! the last; FETCH returns the rows it steps onto.

use std::collections::VecDeque;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::sql::sqlparser::ast::{Declare, DeclareType, Statement};
use futures::StreamExt;

use super::{batches_output, Output, Session};
use crate::custom_commands::FetchDirection;
use crate::error::{Result, SqlError};
use crate::rewrite::ident_name;

enum Rows {
    /// Forward only: the query's stream and rows read from it but not yet
    /// fetched. (In a mutex only so that the session stays `Sync`; it is
    /// reached through `&mut`, never locked.)
    Streaming {
        stream: std::sync::Mutex<SendableRecordBatchStream>,
        buffered: VecDeque<RecordBatch>,
        done: bool,
    },
    /// The whole result, for SCROLL and WITH HOLD.
    Held(RecordBatch),
}

pub(super) struct Cursor {
    schema: SchemaRef,
    rows: Rows,
    /// 0 = before the first row; `n + 1` = after the last (held rows).
    position: u64,
    pub(super) hold: bool,
    /// Declared in the transaction now open (a ROLLBACK ends it even WITH HOLD).
    pub(super) in_current_txn: bool,
}

impl Cursor {
    pub(super) fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Up to `n` rows from a streaming cursor.
    async fn next_rows(&mut self, mut n: u64) -> Result<Vec<RecordBatch>> {
        let Rows::Streaming {
            stream,
            buffered,
            done,
        } = &mut self.rows
        else {
            return Err(SqlError::Internal("not a streaming cursor".into()));
        };
        let stream = stream
            .get_mut()
            .map_err(|_| SqlError::Internal("a cursor's stream was poisoned".into()))?;
        let mut out = Vec::new();
        while n > 0 {
            let batch = match buffered.pop_front() {
                Some(b) => b,
                None if *done => break,
                None => match stream.next().await {
                    Some(b) => b?,
                    None => {
                        *done = true;
                        break;
                    }
                },
            };
            let rows = batch.num_rows() as u64;
            if rows <= n {
                n -= rows;
                self.position += rows;
                out.push(batch);
            } else {
                let take = usize::try_from(n).unwrap_or(usize::MAX);
                out.push(batch.slice(0, take));
                buffered.push_front(batch.slice(take, batch.num_rows() - take));
                self.position += n;
                n = 0;
            }
        }
        Ok(out)
    }

    /// Moves a held cursor as `direction` says; returns the rows it steps
    /// onto, in the order it steps.
    fn step_held(&mut self, direction: FetchDirection) -> Result<Vec<RecordBatch>> {
        let Rows::Held(all) = &self.rows else {
            return Err(SqlError::Internal("not a held cursor".into()));
        };
        let total = all.num_rows() as u64;
        let row = |p: u64| all.slice(usize::try_from(p - 1).unwrap_or(0), 1);
        let mut out = Vec::new();
        match direction {
            FetchDirection::Forward(k) => {
                for _ in 0..k {
                    if self.position >= total {
                        self.position = total + 1;
                        break;
                    }
                    self.position += 1;
                    out.push(row(self.position));
                }
            }
            FetchDirection::ForwardAll => {
                while self.position < total {
                    self.position += 1;
                    out.push(row(self.position));
                }
                self.position = total + 1;
            }
            FetchDirection::Backward(k) => {
                for _ in 0..k {
                    if self.position <= 1 {
                        self.position = 0;
                        break;
                    }
                    self.position -= 1;
                    out.push(row(self.position));
                }
            }
            FetchDirection::BackwardAll => {
                while self.position > 1 {
                    self.position -= 1;
                    out.push(row(self.position));
                }
                self.position = 0;
            }
            FetchDirection::Absolute(k) => {
                let target = if k >= 0 {
                    k.unsigned_abs()
                } else {
                    (total + 1).saturating_sub(k.unsigned_abs())
                };
                self.position = target.min(total + 1);
                if (1..=total).contains(&self.position) {
                    out.push(row(self.position));
                }
            }
            FetchDirection::Relative(k) => {
                let target = if k >= 0 {
                    self.position.saturating_add(k.unsigned_abs())
                } else {
                    self.position.saturating_sub(k.unsigned_abs())
                };
                self.position = target.min(total + 1);
                if (1..=total).contains(&self.position) {
                    out.push(row(self.position));
                }
            }
        }
        Ok(out)
    }
}

fn no_cursor(name: &str) -> SqlError {
    SqlError::InvalidCursorName(name.to_string())
}

impl Session {
    /// The columns of the open cursor `name`, for a Describe of it.
    pub fn cursor_columns(&self, name: &str) -> Option<Vec<crate::ResultColumn>> {
        self.cursors
            .get(name)
            .map(|c| crate::ResultColumn::of_schema(&c.schema))
    }

    /// `DECLARE name [BINARY] [[NO] SCROLL] CURSOR [WITH[OUT] HOLD] FOR query`.
    pub(super) async fn declare(&mut self, decls: Vec<Declare>) -> Result<Output> {
        let in_block = self.txn.as_ref().is_some_and(|t| t.explicit);
        for d in decls {
            if d.declare_type != Some(DeclareType::Cursor) {
                return Err(SqlError::FeatureNotSupported(
                    "DECLARE declares cursors only".into(),
                ));
            }
            if d.binary == Some(true) {
                return Err(SqlError::FeatureNotSupported(
                    "BINARY cursors are not supported (the protocol's formats choose binary)"
                        .into(),
                ));
            }
            let [ident] = d.names.as_slice() else {
                return Err(SqlError::Syntax("DECLARE names one cursor".into()));
            };
            let name = ident_name(ident);
            let hold = d.hold == Some(true);
            if !hold && !in_block {
                return Err(SqlError::NoActiveTransaction("DECLARE CURSOR".into()));
            }
            if self.cursors.contains_key(&name) {
                return Err(SqlError::DuplicateCursor(name));
            }
            let query = d
                .for_query
                .ok_or_else(|| SqlError::Syntax("DECLARE CURSOR needs FOR query".into()))?;
            let mut stmt = Statement::Query(query);
            self.install_view(&stmt)?;
            self.compat(&mut stmt)?;
            let Output::Rows { schema, stream, .. } = self.run_query(stmt).await? else {
                return Err(SqlError::Internal("a cursor's query gave no rows".into()));
            };
            let rows = if hold || d.scroll == Some(true) {
                let mut batches = Vec::new();
                let mut stream = stream;
                while let Some(b) = stream.next().await {
                    batches.push(b?);
                }
                Rows::Held(concat_batches(&schema, &batches)?)
            } else {
                Rows::Streaming {
                    stream: std::sync::Mutex::new(stream),
                    buffered: VecDeque::new(),
                    done: false,
                }
            };
            self.cursors.insert(
                name,
                Cursor {
                    schema,
                    rows,
                    position: 0,
                    hold,
                    in_current_txn: in_block,
                },
            );
        }
        Ok(Output::Command("DECLARE CURSOR".into()))
    }

    /// `FETCH` / `MOVE`.
    pub(super) async fn fetch(
        &mut self,
        name: &str,
        direction: FetchDirection,
        is_move: bool,
    ) -> Result<Output> {
        if self.txn.as_ref().is_some_and(|t| t.aborted) {
            return Err(SqlError::InFailedTransaction);
        }
        let cursor = self.cursors.get_mut(name).ok_or_else(|| no_cursor(name))?;
        let batches = match (&cursor.rows, direction) {
            (Rows::Held(_), d) => cursor.step_held(d)?,
            (Rows::Streaming { .. }, FetchDirection::Forward(k)) => cursor.next_rows(k).await?,
            (Rows::Streaming { .. }, FetchDirection::ForwardAll) => {
                cursor.next_rows(u64::MAX).await?
            }
            (Rows::Streaming { .. }, _) => {
                return Err(SqlError::NotInPrerequisiteState(
                    "cursor can only scan forward (declare it with the SCROLL option to enable backward scan)"
                        .into(),
                ))
            }
        };
        let n: usize = batches.iter().map(|b| b.num_rows()).sum();
        if is_move {
            return Ok(Output::Command(format!("MOVE {n}")));
        }
        let schema = Arc::clone(&cursor.schema);
        match batches_output(schema, batches) {
            Output::Rows { schema, stream, .. } => Ok(Output::Rows {
                schema,
                stream,
                command: "FETCH",
            }),
            other => Ok(other),
        }
    }

    pub(super) fn close_cursor(&mut self, name: Option<&str>) -> Result<Output> {
        match name {
            None => self.cursors.clear(),
            Some(n) => {
                self.cursors.remove(n).ok_or_else(|| no_cursor(n))?;
            }
        }
        Ok(Output::Command("CLOSE CURSOR".into()))
    }

    /// The transaction ended: cursors without HOLD end with it, and so do
    /// WITH HOLD cursors of a transaction that rolled back.
    pub(super) fn end_cursors(&mut self, committed: bool) {
        self.cursors
            .retain(|_, c| c.hold && (committed || !c.in_current_txn));
        for c in self.cursors.values_mut() {
            c.in_current_txn = false;
        }
    }
}
