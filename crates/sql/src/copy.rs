//! COPY: `FROM STDIN` / `FROM 'file'` through the bulk-load path
//! (`BulkLoader`), `TO STDOUT` / `TO 'file'` from a query, in the text, CSV
//! and binary formats (and Parquet for files read).
//!
//! Invariants:
//! * outside a transaction block a COPY is one `BulkLoader::commit`: a
//!   malformed row drops the loader, so nothing of a failed COPY is ever
//!   visible; inside a block its rows go into the transaction like an
//!   INSERT's (a duplicate key is 23505) and commit with it;
//! * a malformed row is reported with its line number, column and reason
//!   (22P04 for the shape of a line, 22P02 for a value);
//! * COPY into a table with a primary key replaces rows with an equal key
//!   (last one wins): the bulk-load semantics, documented in the user guide;
//! * a server file is opened only through `crate::server_files`, which
//!   checks the session's privileges and refuses the server's own files and
//!   anything but a regular file.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{
    CopyLegacyOption, CopyOption, CopySource, CopyTarget, Statement,
};
use eddy_common::{ColumnType, Value};
use eddy_storage::arrow_values::ColumnBuilder;
use eddy_storage::{BulkLoader, Table};
use futures::StreamExt;

use crate::error::{Result, SqlError};
use crate::pgtypes::{self, cell_text, parse_binary, parse_text_in, Format};
use crate::rewrite::{ident_name, table_name};
use crate::session::{cast_column, CompiledChecks, Output, Session};

const BATCH_ROWS: usize = 8192;
const BINARY_SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

/// Data format of a COPY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyFormat {
    Text,
    Csv,
    Binary,
    Parquet,
}

/// Options of a COPY statement.
#[derive(Clone, Debug)]
pub struct CopyOptions {
    pub format: CopyFormat,
    pub delimiter: u8,
    pub null: String,
    pub header: bool,
    pub quote: u8,
    pub escape: u8,
}

impl CopyOptions {
    fn new(format: CopyFormat) -> CopyOptions {
        CopyOptions {
            format,
            delimiter: if format == CopyFormat::Csv {
                b','
            } else {
                b'\t'
            },
            null: if format == CopyFormat::Csv {
                String::new()
            } else {
                "\\N".into()
            },
            header: false,
            quote: b'"',
            escape: b'"',
        }
    }
}

fn parse_options(
    options: &[CopyOption],
    legacy: &[CopyLegacyOption],
    target: &CopyTarget,
) -> Result<CopyOptions> {
    let mut format = match target {
        CopyTarget::File { filename } if filename.to_ascii_lowercase().ends_with(".parquet") => {
            CopyFormat::Parquet
        }
        CopyTarget::File { filename } if filename.to_ascii_lowercase().ends_with(".csv") => {
            CopyFormat::Csv
        }
        _ => CopyFormat::Text,
    };
    for o in options {
        if let CopyOption::Format(f) = o {
            format = match f.value.to_ascii_lowercase().as_str() {
                "text" => CopyFormat::Text,
                "csv" => CopyFormat::Csv,
                "binary" => CopyFormat::Binary,
                "parquet" => CopyFormat::Parquet,
                other => {
                    return Err(SqlError::InvalidParameter(format!(
                        "COPY format \"{other}\" not recognized"
                    )))
                }
            };
        }
    }
    for o in legacy {
        match o {
            CopyLegacyOption::Binary => format = CopyFormat::Binary,
            CopyLegacyOption::Csv(_) => format = CopyFormat::Csv,
            _ => {}
        }
    }
    let mut out = CopyOptions::new(format);
    for o in options {
        match o {
            CopyOption::Format(_) | CopyOption::Freeze(_) => {}
            CopyOption::Delimiter(c) => out.delimiter = *c as u8,
            CopyOption::Null(s) => out.null = s.clone(),
            CopyOption::Header(h) => out.header = *h,
            CopyOption::Quote(c) => out.quote = *c as u8,
            CopyOption::Escape(c) => out.escape = *c as u8,
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "COPY option {other} is not supported"
                )))
            }
        }
    }
    for o in legacy {
        match o {
            CopyLegacyOption::Delimiter(c) => out.delimiter = *c as u8,
            CopyLegacyOption::Null(s) => out.null = s.clone(),
            CopyLegacyOption::Csv(csv_opts) => {
                for c in csv_opts {
                    if let datafusion::sql::sqlparser::ast::CopyLegacyCsvOption::Header = c {
                        out.header = true;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Start a COPY statement.
pub async fn start(
    session: &mut Session,
    _ctx: &SessionContext,
    source: CopySource,
    to: bool,
    target: CopyTarget,
    options: Vec<CopyOption>,
    legacy: Vec<CopyLegacyOption>,
) -> Result<Output> {
    let opts = parse_options(&options, &legacy, &target)?;
    if to {
        let query = match &source {
            CopySource::Table {
                table_name: t,
                columns,
            } => {
                let name = table_name(t)?;
                let table = session
                    .engine()
                    .table(&name)
                    .ok_or_else(|| SqlError::UndefinedTable(name.clone()))?;
                let cols = if columns.is_empty() {
                    table
                        .def()
                        .columns
                        .iter()
                        .map(|c| format!("\"{}\"", c.name))
                        .collect::<Vec<_>>()
                } else {
                    columns
                        .iter()
                        .map(|c| format!("\"{}\"", ident_name(c)))
                        .collect()
                };
                format!("SELECT {} FROM \"{name}\"", cols.join(", "))
            }
            CopySource::Query(q) => q.to_string(),
        };
        let mut stmt = crate::rewrite::parse_statement(&query)?;
        session.compat(&mut stmt)?;
        let Output::Rows { schema, stream, .. } = session.run_query(stmt).await? else {
            return Err(SqlError::Internal("COPY TO query produced no rows".into()));
        };
        return match target {
            CopyTarget::Stdout => Ok(Output::CopyOut(CopyOut {
                options: opts,
                schema,
                stream,
            })),
            CopyTarget::File { filename } => {
                let file = session
                    .db()
                    .server_files
                    .open_for_write(&filename, session.privileges())?;
                let n = write_file(file, &filename, &opts, stream).await?;
                Ok(Output::Command(format!("COPY {n}")))
            }
            _ => Err(SqlError::FeatureNotSupported(
                "COPY TO PROGRAM is not supported".into(),
            )),
        };
    }
    let CopySource::Table {
        table_name: t,
        columns,
    } = &source
    else {
        return Err(SqlError::Syntax("COPY FROM needs a table".into()));
    };
    let name = table_name(t)?;
    let table = session
        .engine()
        .table(&name)
        .ok_or_else(|| SqlError::UndefinedTable(name.clone()))?;
    let def = table.def().clone();
    // evaluated over each batch before the loader sees it
    let checks = if def.checks.is_empty() {
        None
    } else {
        Some(session.compile_checks(&def).await?)
    };
    let targets: Vec<usize> = if columns.is_empty() {
        (0..def.columns.len()).collect()
    } else {
        columns
            .iter()
            .map(|c| {
                let n = ident_name(c);
                def.column_index(&n)
                    .ok_or_else(|| SqlError::UndefinedColumn(format!("{n}\" of relation \"{name}")))
            })
            .collect::<Result<_>>()?
    };
    // Columns COPY leaves out would need their DEFAULT (a sequence, an
    // expression), which the loader cannot evaluate: refused, not NULL.
    if let Some(c) = def
        .columns
        .iter()
        .enumerate()
        .find(|(i, c)| !targets.contains(i) && c.default.is_some())
        .map(|(_, c)| c)
    {
        return Err(SqlError::FeatureNotSupported(format!(
            "COPY FROM that leaves out column \"{}\" is not supported yet: its DEFAULT would not be applied (list it, or use INSERT)",
            c.name
        )));
    }
    // A table with foreign keys takes the transaction's path even outside
    // a block (the bulk loader does not check them): its rows are checked
    // against their referenced rows, under those rows' locks, as INSERT's
    // are (`Session::copy_into_transaction`).
    let in_block = session.in_transaction_block() || !def.foreign_keys.is_empty();
    let mut copy_in = CopyIn::new(
        table,
        targets,
        opts.clone(),
        in_block,
        session.time_zone(),
        checks,
    )?;
    match target {
        CopyTarget::Stdin => Ok(Output::CopyIn(Box::new(copy_in))),
        CopyTarget::File { filename } => {
            let file = session
                .db()
                .server_files
                .open_for_read(&filename, session.privileges())?;
            let done = if opts.format == CopyFormat::Parquet {
                load_parquet(file, &filename, copy_in)?
            } else {
                // a chunk at a time: the file is never held whole
                use std::io::Read;
                let mut file = file;
                let mut chunk = vec![0u8; 1 << 20];
                loop {
                    let n = file.read(&mut chunk).map_err(|e| SqlError::Io {
                        path: filename.clone(),
                        source: e,
                    })?;
                    if n == 0 {
                        break;
                    }
                    copy_in.feed(&chunk[..n])?;
                }
                copy_in.finish()?
            };
            let n = match done {
                CopyFinish::Committed(n) => {
                    session.after_autocommit_copy();
                    n
                }
                CopyFinish::InTransaction { table, batches } => {
                    session.copy_into_transaction(&table, batches)?
                }
            };
            Ok(Output::Command(format!("COPY {n}")))
        }
        _ => Err(SqlError::FeatureNotSupported(
            "COPY FROM PROGRAM is not supported".into(),
        )),
    }
}

fn load_parquet(file: std::fs::File, path: &str, mut copy_in: CopyIn) -> Result<CopyFinish> {
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| SqlError::BadCopyFile(format!("{path}: {e}")))?
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| SqlError::BadCopyFile(format!("{path}: {e}")))?;
    let def = copy_in.table.def().clone();
    for batch in reader {
        let batch = batch.map_err(|e| SqlError::BadCopyFile(format!("{path}: {e}")))?;
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(def.columns.len());
        for (i, c) in def.columns.iter().enumerate() {
            let src = copy_in.targets.iter().position(|t| *t == i).and_then(|p| {
                batch
                    .schema()
                    .index_of(&c.name)
                    .ok()
                    .or(Some(p))
                    .filter(|ix| *ix < batch.num_columns())
            });
            arrays.push(match src {
                Some(ix) => cast_column(batch.column(ix), c.ty, &c.name, &copy_in.zone)?,
                None => {
                    datafusion::arrow::array::new_null_array(&c.ty.to_arrow(), batch.num_rows())
                }
            });
        }
        let b = RecordBatch::try_new(copy_in.table.schema(), arrays)?;
        copy_in.rows += b.num_rows() as u64;
        copy_in.push(b)?;
        tracing::info!(table = %def.name, rows = copy_in.rows, "COPY progress");
    }
    copy_in.commit()
}

/// The longest row COPY FROM buffers (PostgreSQL's limit is 1 GB).
const MAX_COPY_RECORD_BYTES: usize = 256 << 20;

/// How a COPY FROM ended.
pub enum CopyFinish {
    /// Loaded and committed (outside a transaction block): the row count.
    Committed(u64),
    /// Parsed inside a transaction block: the rows go into the transaction.
    InTransaction {
        table: Arc<Table>,
        batches: Vec<RecordBatch>,
    },
}

/// An in-progress COPY ... FROM: parses data as it arrives and pushes
/// batches into a bulk loader. Dropping it discards everything.
pub struct CopyIn {
    table: Arc<Table>,
    targets: Vec<usize>,
    types: Vec<ColumnType>,
    opts: CopyOptions,
    /// Outside a transaction block; inside one the batches are kept in
    /// `pending` and go into the transaction when the COPY ends.
    loader: Option<BulkLoader>,
    /// Outside a block without a loader: the rows are written at the end
    /// as one atomic write (duplicates fail with 23505).
    direct: bool,
    pending: Vec<RecordBatch>,
    builders: Vec<ColumnBuilder>,
    pending_rows: usize,
    rows: u64,
    line: u64,
    buf: Vec<u8>,
    header_skipped: bool,
    binary_header_done: bool,
    ended: bool,
    /// How much of the incomplete record at the start of `buf` has been
    /// searched for its end, and whether that search is inside quotes.
    scan: Option<(usize, bool)>,
    /// The first error seen; the rest of the data is ignored.
    failed: Option<SqlError>,
    /// The session's TimeZone: text without an offset is read there.
    zone: crate::session_zone::SessionZone,
    /// The table's CHECK constraints, enforced on every batch.
    checks: Option<CompiledChecks>,
}

impl CopyIn {
    fn new(
        table: Arc<Table>,
        targets: Vec<usize>,
        opts: CopyOptions,
        in_transaction: bool,
        zone: crate::session_zone::SessionZone,
        checks: Option<CompiledChecks>,
    ) -> Result<CopyIn> {
        let types: Vec<ColumnType> = table.def().columns.iter().map(|c| c.ty).collect();
        let builders = types
            .iter()
            .map(|t| ColumnBuilder::new(*t, BATCH_ROWS))
            .collect();
        // A table with a UNIQUE index takes the write path, where storage
        // checks every row (bulk files are installed unchecked).
        let unique = table.def().indexes.iter().any(|i| i.unique);
        let loader = (!in_transaction && !unique).then(|| table.bulk_loader());
        Ok(CopyIn {
            direct: !in_transaction && unique,
            table,
            targets,
            types,
            opts,
            loader,
            pending: Vec::new(),
            builders,
            pending_rows: 0,
            rows: 0,
            line: 0,
            buf: Vec::new(),
            header_skipped: false,
            binary_header_done: false,
            ended: false,
            scan: None,
            failed: None,
            zone,
            checks,
        })
    }

    /// Wire format (0 text, 1 binary) and column count for CopyInResponse.
    pub fn wire_format(&self) -> (i8, usize) {
        (
            if self.opts.format == CopyFormat::Binary {
                1
            } else {
                0
            },
            self.targets.len(),
        )
    }

    pub fn table_name(&self) -> &str {
        &self.table.def().name
    }

    /// Feed a chunk of data. Errors are remembered and returned by `finish`
    /// (the protocol keeps sending data until CopyDone).
    pub fn feed(&mut self, data: &[u8]) -> Result<()> {
        if self.failed.is_some() || self.ended {
            return Ok(());
        }
        self.buf.extend_from_slice(data);
        if let Err(e) = self.process(false) {
            self.failed = Some(e);
        } else if self.buf.len() > MAX_COPY_RECORD_BYTES {
            // one record (text, CSV) or tuple (binary) this large is refused
            // rather than buffered without bound
            self.failed = Some(SqlError::ProgramLimitExceeded(format!(
                "COPY {}, line {}: a row longer than {} MiB is not supported",
                self.table.def().name,
                self.line.saturating_add(1),
                MAX_COPY_RECORD_BYTES >> 20
            )));
            self.buf = Vec::new();
        }
        Ok(())
    }

    /// Finish: parse what is left and commit (outside a transaction
    /// block), or hand the rows to the caller for the open transaction.
    pub fn finish(mut self) -> Result<CopyFinish> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.process(true)?;
        self.flush_batch()?;
        self.commit()
    }

    fn push(&mut self, batch: RecordBatch) -> Result<()> {
        if let Some(checks) = &self.checks {
            checks.enforce(&batch)?;
        }
        match &mut self.loader {
            Some(l) => l.push(batch)?,
            None => {
                let rows: usize = self.pending.iter().map(|b| b.num_rows()).sum();
                if rows + batch.num_rows() > crate::txn::MAX_TXN_ROWS {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "COPY inside a transaction block is limited to {} rows; run it outside the block",
                        crate::txn::MAX_TXN_ROWS
                    )));
                }
                self.pending.push(batch);
            }
        }
        Ok(())
    }

    fn commit(self) -> Result<CopyFinish> {
        let rows = self.rows;
        let name = self.table.def().name.clone();
        match self.loader {
            Some(l) => {
                let n = l.commit()?;
                tracing::info!(table = %name, rows, "COPY committed");
                Ok(CopyFinish::Committed(n))
            }
            None if self.direct => {
                let def = self.table.def().clone();
                let mut ops = Vec::with_capacity(rows as usize);
                for b in &self.pending {
                    for r in 0..b.num_rows() {
                        let row: eddy_common::Row = def
                            .columns
                            .iter()
                            .enumerate()
                            .map(|(i, c)| {
                                eddy_storage::arrow_values::value_at(b.column(i).as_ref(), c.ty, r)
                            })
                            .collect::<std::result::Result<_, _>>()?;
                        ops.push(eddy_storage::WriteOp::Insert {
                            row,
                            on_conflict: eddy_storage::OnConflict::Error,
                        });
                    }
                }
                let n = self.table.write(ops)?.inserted;
                tracing::info!(table = %name, rows, "COPY committed");
                Ok(CopyFinish::Committed(n))
            }
            None => Ok(CopyFinish::InTransaction {
                table: self.table,
                batches: self.pending,
            }),
        }
    }

    fn process(&mut self, at_end: bool) -> Result<()> {
        match self.opts.format {
            CopyFormat::Binary => {
                self.process_binary()?;
                if at_end && !self.ended {
                    // PostgreSQL: data that stops inside the header or a
                    // tuple is an error, not a shorter load (EOF between
                    // tuples, without the trailer, is accepted)
                    if !self.binary_header_done {
                        return Err(SqlError::BadCopyFile(
                            "COPY file signature not recognized".into(),
                        ));
                    }
                    if !self.buf.is_empty() {
                        return Err(SqlError::BadCopyFile("unexpected EOF in COPY data".into()));
                    }
                }
                Ok(())
            }
            CopyFormat::Text | CopyFormat::Csv => {
                // after the end-of-data line `\.` nothing is read (pg_restore
                // sends the blank lines that follow it in a dump)
                if self.ended {
                    self.buf.clear();
                    return Ok(());
                }
                let mut start = 0;
                while let Some(end) = self.record_end(start, at_end) {
                    let rec_end = end.min(self.buf.len());
                    let mut rec: Vec<u8> = self.buf[start..rec_end].to_vec();
                    start = (end + 1).min(self.buf.len());
                    if rec.last() == Some(&b'\r') {
                        rec.pop();
                    }
                    self.line += 1;
                    if rec == b"\\." {
                        self.ended = true;
                        self.buf.clear();
                        return Ok(());
                    }
                    if self.opts.header && !self.header_skipped {
                        self.header_skipped = true;
                        continue;
                    }
                    if rec.is_empty() && at_end && start >= self.buf.len() {
                        break;
                    }
                    self.parse_record(&rec)?;
                    if start >= self.buf.len() {
                        break;
                    }
                }
                self.buf.drain(..start.min(self.buf.len()));
                Ok(())
            }
            CopyFormat::Parquet => Err(SqlError::FeatureNotSupported(
                "Parquet COPY is only supported from a file".into(),
            )),
        }
    }

    /// Index of the newline ending the record that starts at `start` (CSV
    /// records may span lines inside quotes); at the end, the buffer end.
    /// Where the record starting at `start` ends (its newline), if the
    /// buffer holds all of it. A search that runs out of data remembers how
    /// far it got (`scan`), so a long record arriving in many CopyData
    /// messages is scanned once, not once per message.
    fn record_end(&mut self, start: usize, at_end: bool) -> Option<usize> {
        if start >= self.buf.len() {
            return None;
        }
        let (mut i, mut quoted) = match self.scan.take() {
            Some((scanned, quoted)) => (start.saturating_add(scanned), quoted),
            None => (start, false),
        };
        while let Some(&c) = self.buf.get(i) {
            if self.opts.format == CopyFormat::Csv && c == self.opts.quote {
                quoted = !quoted;
            } else if c == b'\n' && !quoted {
                return Some(i);
            }
            i += 1;
        }
        if at_end {
            Some(self.buf.len())
        } else {
            self.scan = Some((self.buf.len() - start, quoted));
            None
        }
    }

    /// A line that is not UTF-8 (or whose escapes make bytes that are
    /// not): PostgreSQL's 22021, with the line.
    fn encoding_error(&self) -> SqlError {
        SqlError::InContext {
            context: format!("COPY {}, line {}", self.table.def().name, self.line),
            inner: Box::new(SqlError::InvalidEncoding(String::new())),
        }
    }

    /// A line that does not make a row: `msg`, in the context of the
    /// line (and its text, where it is text), as PostgreSQL says it.
    fn bad_line(&self, msg: String, text: Option<&str>) -> SqlError {
        let mut context = format!("COPY {}, line {}", self.table.def().name, self.line);
        if let Some(text) = text {
            context.push_str(&format!(": \"{}\"", printout(text)));
        }
        SqlError::InContext {
            context,
            inner: Box::new(SqlError::BadCopyFile(msg)),
        }
    }

    fn parse_record(&mut self, rec: &[u8]) -> Result<()> {
        let text = std::str::from_utf8(rec).map_err(|_| self.encoding_error())?;
        let fields: Vec<Option<String>> = if self.opts.format == CopyFormat::Csv {
            split_csv(text, &self.opts).map_err(|m| self.bad_line(m, Some(text)))?
        } else {
            text.split(self.opts.delimiter as char)
                .map(|f| {
                    if f == self.opts.null {
                        Ok(None)
                    } else {
                        unescape_text(f).map(Some)
                    }
                })
                .collect::<std::result::Result<_, String>>()
                .map_err(|_| self.encoding_error())?
        };
        if fields.len() < self.targets.len() {
            let missing = &self.table.def().columns[self.targets[fields.len()]].name;
            return Err(self.bad_line(format!("missing data for column \"{missing}\""), Some(text)));
        }
        if fields.len() > self.targets.len() {
            return Err(self.bad_line("extra data after last expected column".into(), Some(text)));
        }
        let mut row = vec![Value::Null; self.types.len()];
        for (f, &t) in fields.iter().zip(&self.targets) {
            if let Some(s) = f {
                row[t] = parse_text_in(s, self.types[t], &self.zone).map_err(|e| {
                    let col = &self.table.def().columns[t].name;
                    SqlError::InContext {
                        context: format!(
                            "COPY {}, line {}, column {col}: \"{}\"",
                            self.table.def().name,
                            self.line,
                            printout(s)
                        ),
                        inner: Box::new(e),
                    }
                })?;
            }
        }
        self.append_row(&row)
    }

    fn append_row(&mut self, row: &[Value]) -> Result<()> {
        for (b, v) in self.builders.iter_mut().zip(row) {
            b.append(v)?;
        }
        self.pending_rows += 1;
        if self.pending_rows >= BATCH_ROWS {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> Result<()> {
        if self.pending_rows == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self.builders.iter_mut().map(|b| b.finish()).collect();
        let batch = RecordBatch::try_new(self.table.schema(), arrays)?;
        self.rows += self.pending_rows as u64;
        self.pending_rows = 0;
        self.push(batch)?;
        if self.rows.is_multiple_of(BATCH_ROWS as u64 * 16) {
            tracing::info!(table = %self.table.def().name, rows = self.rows, "COPY progress");
        }
        Ok(())
    }

    fn process_binary(&mut self) -> Result<()> {
        let mut pos = 0;
        if !self.binary_header_done {
            if self.buf.len() < 19 {
                return Ok(());
            }
            if &self.buf[..11] != BINARY_SIGNATURE {
                return Err(SqlError::BadCopyFile(
                    "COPY file signature not recognized".into(),
                ));
            }
            let ext = u32::from_be_bytes([self.buf[15], self.buf[16], self.buf[17], self.buf[18]])
                as usize;
            if self.buf.len() < 19 + ext {
                return Ok(());
            }
            pos = 19 + ext;
            self.binary_header_done = true;
        }
        loop {
            if self.buf.len() < pos + 2 {
                break;
            }
            let n = i16::from_be_bytes([self.buf[pos], self.buf[pos + 1]]);
            if n == -1 {
                self.ended = true;
                pos = self.buf.len();
                break;
            }
            // need the whole tuple
            let mut p = pos + 2;
            let mut fields: Vec<Option<(usize, usize)>> = Vec::with_capacity(n.max(0) as usize);
            let mut complete = true;
            for _ in 0..n.max(0) {
                if self.buf.len() < p + 4 {
                    complete = false;
                    break;
                }
                let len = i32::from_be_bytes([
                    self.buf[p],
                    self.buf[p + 1],
                    self.buf[p + 2],
                    self.buf[p + 3],
                ]);
                p += 4;
                if len < 0 {
                    fields.push(None);
                } else {
                    let len = len as usize;
                    if self.buf.len() < p + len {
                        complete = false;
                        break;
                    }
                    fields.push(Some((p, len)));
                    p += len;
                }
            }
            if !complete {
                break;
            }
            self.line += 1;
            if n as usize != self.targets.len() {
                return Err(self.bad_line(
                    format!("row field count is {n}, expected {}", self.targets.len()),
                    None,
                ));
            }
            let mut row = vec![Value::Null; self.types.len()];
            for (f, &t) in fields.iter().zip(&self.targets) {
                if let Some((start, len)) = f {
                    let ty = self.types[t];
                    let wire = pgtypes::oid_for_column_type(ty);
                    row[t] =
                        parse_binary(&self.buf[*start..start + len], wire, ty).map_err(|e| {
                            SqlError::InContext {
                                context: format!(
                                    "COPY {}, line {}, column {}",
                                    self.table.def().name,
                                    self.line,
                                    self.table.def().columns[t].name
                                ),
                                inner: Box::new(e),
                            }
                        })?;
                }
            }
            self.append_row(&row)?;
            pos = p;
        }
        self.buf.drain(..pos.min(self.buf.len()));
        Ok(())
    }
}

/// A COPY text-format field with its backslash escapes decoded, as
/// PostgreSQL's COPY reads them: `\b \f \n \r \t \v`, one to three octal
/// digits or `\x` and one or two hex digits for a byte, any other character
/// for itself. Bytes from escapes must still form UTF-8.
fn unescape_text(f: &str) -> std::result::Result<String, String> {
    if !f.contains('\\') {
        return Ok(f.to_string());
    }
    let b = f.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let octal = |c: u8| (b'0'..=b'7').contains(&c).then(|| c - b'0');
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        i += 1;
        let Some(&c) = b.get(i) else {
            out.push(b'\\');
            break;
        };
        i += 1;
        match c {
            b't' => out.push(b'\t'),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b'b' => out.push(0x08),
            b'f' => out.push(0x0c),
            b'v' => out.push(0x0b),
            b'0'..=b'7' => {
                let mut v = c - b'0';
                for _ in 0..2 {
                    match b.get(i).copied().and_then(octal) {
                        Some(d) => {
                            v = v.wrapping_mul(8).wrapping_add(d);
                            i += 1;
                        }
                        None => break,
                    }
                }
                out.push(v);
            }
            b'x' => match b.get(i).copied().and_then(hex) {
                Some(h) => {
                    i += 1;
                    let mut v = h;
                    if let Some(l) = b.get(i).copied().and_then(hex) {
                        v = v * 16 + l;
                        i += 1;
                    }
                    out.push(v);
                }
                None => out.push(b'x'),
            },
            other => out.push(other),
        }
    }
    String::from_utf8(out).map_err(|_| "invalid byte sequence for encoding \"UTF8\"".to_string())
}

fn split_csv(line: &str, opts: &CopyOptions) -> std::result::Result<Vec<Option<String>>, String> {
    let (d, q, e) = (
        opts.delimiter as char,
        opts.quote as char,
        opts.escape as char,
    );
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            if c == e && chars.peek() == Some(&q) {
                if e == q {
                    // doubled quote or end of quoted section
                    chars.next();
                    cur.push(q);
                    continue;
                }
                chars.next();
                cur.push(q);
            } else if c == q {
                quoted = false;
            } else {
                cur.push(c);
            }
        } else if c == q {
            quoted = true;
            was_quoted = true;
        } else if c == d {
            out.push(finish_csv_field(&cur, was_quoted, opts));
            cur.clear();
            was_quoted = false;
        } else {
            cur.push(c);
        }
    }
    if quoted {
        return Err("unterminated CSV quoted field".into());
    }
    out.push(finish_csv_field(&cur, was_quoted, opts));
    Ok(out)
}

fn finish_csv_field(s: &str, quoted: bool, opts: &CopyOptions) -> Option<String> {
    if !quoted && s == opts.null {
        None
    } else {
        Some(s.to_string())
    }
}

/// COPY ... TO STDOUT: the rows to send.
pub struct CopyOut {
    pub options: CopyOptions,
    pub schema: SchemaRef,
    pub stream: SendableRecordBatchStream,
}

impl CopyOut {
    pub fn is_binary(&self) -> bool {
        self.options.format == CopyFormat::Binary
    }
}

/// The binary COPY header.
pub fn binary_header() -> Vec<u8> {
    let mut v = BINARY_SIGNATURE.to_vec();
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(&0u32.to_be_bytes());
    v
}

/// The binary COPY trailer.
pub fn binary_trailer() -> Vec<u8> {
    (-1i16).to_be_bytes().to_vec()
}

/// Encode one row of a batch in the COPY format.
pub fn encode_row(
    batch: &RecordBatch,
    row: usize,
    opts: &CopyOptions,
    out: &mut BytesMut,
) -> Result<()> {
    match opts.format {
        CopyFormat::Binary => {
            out.put_i16(batch.num_columns() as i16);
            for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
                pgtypes::encode_field_cell(f, c.as_ref(), row, Format::Binary, out)?;
            }
        }
        CopyFormat::Text | CopyFormat::Csv | CopyFormat::Parquet => {
            let csv = opts.format == CopyFormat::Csv;
            for (i, c) in batch.columns().iter().enumerate() {
                if i > 0 {
                    out.put_u8(opts.delimiter);
                }
                if c.is_null(row) {
                    out.put_slice(opts.null.as_bytes());
                    continue;
                }
                let mut s = String::new();
                cell_text(c.as_ref(), row, &mut s)?;
                if csv {
                    let q = opts.quote as char;
                    let needs = s.is_empty()
                        || s.contains(opts.delimiter as char)
                        || s.contains(q)
                        || s.contains('\n')
                        || s.contains('\r')
                        || s == opts.null;
                    if needs {
                        out.put_u8(opts.quote);
                        out.put_slice(s.replace(q, &format!("{q}{q}")).as_bytes());
                        out.put_u8(opts.quote);
                    } else {
                        out.put_slice(s.as_bytes());
                    }
                } else {
                    for ch in s.chars() {
                        match ch {
                            '\\' => out.put_slice(b"\\\\"),
                            '\n' => out.put_slice(b"\\n"),
                            '\r' => out.put_slice(b"\\r"),
                            '\t' => out.put_slice(b"\\t"),
                            c if c as u32 == opts.delimiter as u32 => {
                                out.put_u8(b'\\');
                                out.put_u8(opts.delimiter);
                            }
                            c => {
                                let mut b = [0u8; 4];
                                out.put_slice(c.encode_utf8(&mut b).as_bytes());
                            }
                        }
                    }
                }
            }
            out.put_u8(b'\n');
        }
    }
    Ok(())
}

/// The header line of a CSV COPY TO with HEADER.
pub fn csv_header(schema: &Schema, opts: &CopyOptions) -> Vec<u8> {
    let names: Vec<String> = schema
        .fields()
        .iter()
        .map(|f: &Arc<Field>| crate::output_names::visible(f.name()).to_string())
        .collect();
    let mut v = names
        .join(&(opts.delimiter as char).to_string())
        .into_bytes();
    v.push(b'\n');
    v
}

async fn write_file(
    file: std::fs::File,
    path: &str,
    opts: &CopyOptions,
    mut stream: SendableRecordBatchStream,
) -> Result<u64> {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(file);
    let io = |e: std::io::Error| SqlError::Io {
        path: path.to_string(),
        source: e,
    };
    let mut n = 0u64;
    if opts.format == CopyFormat::Binary {
        w.write_all(&binary_header()).map_err(io)?;
    }
    let mut first = true;
    while let Some(b) = stream.next().await {
        let b = b?;
        if first && opts.header && opts.format == CopyFormat::Csv {
            w.write_all(&csv_header(&b.schema(), opts)).map_err(io)?;
        }
        first = false;
        let mut buf = BytesMut::new();
        for r in 0..b.num_rows() {
            encode_row(&b, r, opts, &mut buf)?;
            n += 1;
        }
        w.write_all(&buf).map_err(io)?;
    }
    if opts.format == CopyFormat::Binary {
        w.write_all(&binary_trailer()).map_err(io)?;
    }
    w.flush().map_err(io)?;
    Ok(n)
}

/// Whether a statement is a COPY FROM STDIN (the server must switch to copy mode).
pub fn is_copy_from_stdin(stmt: &Statement) -> bool {
    matches!(
        stmt,
        Statement::Copy {
            to: false,
            target: CopyTarget::Stdin,
            ..
        }
    )
}

#[allow(dead_code)]
fn text_schema(n: usize) -> SchemaRef {
    Arc::new(Schema::new(
        (0..n)
            .map(|i| Field::new(format!("c{i}"), DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ))
}

/// A value or line as PostgreSQL's COPY context prints it: at most 100
/// characters, then `...` (`limit_printout_length`).
fn printout(text: &str) -> String {
    const MAX_CHARS: usize = 100;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_split_with_quotes() {
        let o = CopyOptions::new(CopyFormat::Csv);
        let f = split_csv("1,\"a,b\",,\"x\"\"y\"", &o).unwrap();
        assert_eq!(
            f,
            vec![
                Some("1".into()),
                Some("a,b".into()),
                None,
                Some("x\"y".into())
            ]
        );
        assert!(split_csv("\"open", &o).is_err());
        assert_eq!(unescape_text("a\\tb\\\\").unwrap(), "a\tb\\");
        // PostgreSQL's COPY escapes: octal and hex bytes; a doubled
        // backslash keeps bytea's own `\x` for byteain
        assert_eq!(unescape_text("\\101\\x42\\x4a\\7").unwrap(), "ABJ\u{7}");
        assert_eq!(unescape_text("\\\\x6869").unwrap(), "\\x6869");
        assert_eq!(unescape_text("\\xg").unwrap(), "xg");
        assert!(unescape_text("\\377").is_err());
    }
}
