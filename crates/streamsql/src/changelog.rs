//! Change-log sources: `CREATE SOURCE s FROM TABLE t`, the table's
//! committed changes as a stream of insertions and retractions.
//!
//! Invariants (`docs/design/streams-into-tables.md`, "Change-log sources"):
//! * The position is a *cut*: one visible LSN per shard of the table, read
//!   at one instant ([`Engine::snapshot_tables`]), so a cut holds whole
//!   committed transactions only. Cuts move forward in commit order.
//! * The reader keeps the *image* of the table at its cut (primary-key
//!   bytes → row in Arrow's row format). A poll that finds the table's
//!   visible LSNs moved takes a new cut, scans it and emits, in **one**
//!   batch (one stream record, so a barrier never splits it), a retraction
//!   of every old row that differs or is gone, then an insertion of every
//!   new or changed row. Inserted minus retracted rows up to a position
//!   equal the table at that cut.
//! * The cut and the image are the reader's snapshot: a restore resumes
//!   from them, and the first poll emits exactly the difference between the
//!   image and the table now, so no change is lost or delivered twice.
//!
//! Each batch has the source's columns then [`SIGN_COLUMN`] (`-1` for a
//! retraction, `+1` for an insertion; retractions first) and carries its cut
//! in the schema metadata [`CUT_METADATA`], which the view operator records
//! in its checkpoint row.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, ArrayRef, BinaryArray, Int8Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use eddy_common::{ColumnType, Lsn};
use eddy_storage::{Engine, Table};
use eddy_stream::source::{SourcePoll, SourceReader};
use serde::{Deserialize, Serialize};

use crate::batch::{from_ipc, to_ipc, ArrowBatch};
use crate::error::{Result, StreamSqlError};

/// The connector name a change-log source is catalogued under.
pub const CONNECTOR: &str = "table";
/// The trailing column of a change-log batch: -1 retract, +1 insert.
pub const SIGN_COLUMN: &str = "_eddy_sign";
/// Schema metadata key holding the batch's cut (`shard:lsn,...`).
pub const CUT_METADATA: &str = "eddy.cut";
/// How long a poll that found nothing new waits before the next.
const IDLE: Duration = Duration::from_millis(10);

/// Where a change-log source starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Empty image: the table's rows arrive as insertions first.
    Earliest,
    /// The image taken at the job's first start: only later changes.
    Now,
}

/// A checked change-log source definition.
#[derive(Debug, Clone)]
pub struct ChangeLogSpec {
    pub table: String,
    pub columns: Vec<(String, ColumnType)>,
    pub start: Start,
    schema: SchemaRef,
}

impl ChangeLogSpec {
    /// From a catalogued source's columns and options (`table`, `start`).
    pub fn new(
        columns: &[(String, ColumnType)],
        options: &BTreeMap<String, String>,
    ) -> Result<ChangeLogSpec> {
        let mut table = None;
        let mut start = Start::Earliest;
        for (k, v) in options {
            match k.as_str() {
                "table" => table = Some(v.clone()),
                "start" => start = parse_start(v)?,
                other => {
                    return Err(StreamSqlError::InvalidOption(format!(
                        "unknown option {other} for a change-log source (supported: start)"
                    )))
                }
            }
        }
        let table = table
            .ok_or_else(|| StreamSqlError::State("a change-log source without its table".into()))?;
        let fields: Vec<Field> = columns
            .iter()
            .map(|(n, t)| Field::new(n, t.to_arrow(), true))
            .collect();
        Ok(ChangeLogSpec {
            table,
            columns: columns.to_vec(),
            start,
            schema: Arc::new(Schema::new(fields)),
        })
    }

    /// The columns a view sees (without the sign).
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// A reader at the start position.
    pub fn reader(self: &Arc<Self>, engine: Arc<Engine>) -> Result<ChangeLogReader> {
        let fields = self
            .columns
            .iter()
            .map(|(_, t)| SortField::new(t.to_arrow()))
            .collect();
        Ok(ChangeLogReader {
            spec: Arc::clone(self),
            engine,
            converter: RowConverter::new(fields)?,
            image: HashMap::new(),
            cut: None,
            encoded: parking_lot::Mutex::new(None),
        })
    }
}

/// `start = 'earliest' | 'now'`; an LSN is refused (history is not kept).
pub fn parse_start(v: &str) -> Result<Start> {
    match v.to_ascii_lowercase().as_str() {
        "earliest" => Ok(Start::Earliest),
        "now" => Ok(Start::Now),
        other if other.chars().next().is_some_and(|c| c.is_ascii_digit()) => {
            Err(StreamSqlError::NotSupported(format!(
                "a change-log source cannot start at LSN {other}: row versions older than the \
                 live snapshots are not kept (start = 'earliest' or 'now')"
            )))
        }
        other => Err(StreamSqlError::InvalidOption(format!(
            "start must be 'earliest' or 'now', got {other:?}"
        ))),
    }
}

/// The text form of a cut, as recorded in the checkpoint row.
pub fn describe_cut(cut: &[Lsn]) -> String {
    cut.iter()
        .enumerate()
        .map(|(s, l)| format!("{s}:{}", l.0))
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads one table's change log (see the module doc).
pub struct ChangeLogReader {
    spec: Arc<ChangeLogSpec>,
    engine: Arc<Engine>,
    converter: RowConverter,
    /// Primary-key bytes → row (Arrow row format of the source columns).
    image: HashMap<Box<[u8]>, Box<[u8]>>,
    /// The cut the image is at; `None` before the first poll.
    cut: Option<Vec<Lsn>>,
    /// The snapshot of the current cut and image, once encoded (a table
    /// that does not change is not encoded again at every checkpoint).
    encoded: parking_lot::Mutex<Option<Arc<Vec<u8>>>>,
}

/// The reader's snapshot: this header as JSON, its length first (8
/// bytes, little-endian), then the image as raw Arrow IPC (the key, then
/// the source columns), so the image is not re-encoded as JSON.
#[derive(Serialize, Deserialize)]
struct ReaderState {
    cut: Option<Vec<u64>>,
    /// Bytes of Arrow IPC after the header (0: empty image).
    image_bytes: u64,
}

impl ChangeLogReader {
    fn table(&self) -> Result<Arc<Table>> {
        self.engine
            .table(&self.spec.table)
            .ok_or_else(|| StreamSqlError::Undefined("table", self.spec.table.clone()))
    }

    /// The table's column of each source column, by name.
    fn projection(&self, table: &Table) -> Result<Vec<usize>> {
        let def = table.def();
        self.spec
            .columns
            .iter()
            .map(|(name, ty)| {
                def.columns
                    .iter()
                    .position(|c| &c.name == name && c.ty == *ty)
                    .ok_or_else(|| {
                        StreamSqlError::State(format!(
                            "column \"{name}\" ({}) of table \"{}\" is gone or changed type; \
                             the change-log source needs it",
                            ty.pg_name(),
                            self.spec.table
                        ))
                    })
            })
            .collect()
    }

    /// Moves to a new cut; the changes since the old one, or `None`.
    pub fn next_change(&mut self) -> Result<Option<RecordBatch>> {
        let table = self.table()?;
        if self.cut.as_deref() == Some(table.visible_lsns().as_slice()) {
            return Ok(None);
        }
        let projection = self.projection(&table)?;
        let snap = self
            .engine
            .snapshot_tables(std::slice::from_ref(&table))
            .pop()
            .ok_or_else(|| StreamSqlError::Internal("no snapshot of the table".into()))?;
        let cut = snap.lsns();
        let first = self.cut.is_none();
        let mut old = std::mem::take(&mut self.image);
        let mut image = HashMap::with_capacity(old.len());
        let mut retract: Vec<Box<[u8]>> = Vec::new();
        let mut insert: Vec<Box<[u8]>> = Vec::new();
        let width = projection.len();
        for part in snap.partitions() {
            for batch in part.scan(Some(&projection), true, &|_| true)? {
                let batch = batch?;
                let keys = batch
                    .column(width)
                    .as_any()
                    .downcast_ref::<BinaryArray>()
                    .ok_or_else(|| StreamSqlError::Internal("scan key is not binary".into()))?;
                let rows = self
                    .converter
                    .convert_columns(batch.columns().get(..width).unwrap_or_default())?;
                for (i, row) in rows.iter().enumerate() {
                    let key: Box<[u8]> = keys.value(i).into();
                    let row: Box<[u8]> = row.as_ref().into();
                    match old.remove(&key) {
                        Some(was) if was == row => {}
                        Some(was) => {
                            retract.push(was);
                            insert.push(row.clone());
                        }
                        None => insert.push(row.clone()),
                    }
                    image.insert(key, row);
                }
            }
        }
        retract.extend(old.into_values());
        self.image = image;
        self.cut = Some(cut.clone());
        *self.encoded.get_mut() = None;
        if (first && self.spec.start == Start::Now) || (retract.is_empty() && insert.is_empty()) {
            return Ok(None);
        }
        let signs: Int8Array = std::iter::repeat_n(-1i8, retract.len())
            .chain(std::iter::repeat_n(1i8, insert.len()))
            .collect();
        let parser = self.converter.parser();
        let mut columns: Vec<ArrayRef> = self
            .converter
            .convert_rows(retract.iter().chain(&insert).map(|r| parser.parse(r)))?;
        columns.push(Arc::new(signs));
        let mut fields: Vec<Field> = self
            .spec
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(SIGN_COLUMN, DataType::Int8, false));
        let metadata = [(CUT_METADATA.to_string(), describe_cut(&cut))].into();
        let schema = Schema::new_with_metadata(fields, metadata);
        Ok(Some(RecordBatch::try_new(Arc::new(schema), columns)?))
    }

    fn state(&self) -> Result<Vec<u8>> {
        let image = if self.image.is_empty() {
            Vec::new()
        } else {
            let parser = self.converter.parser();
            let keys: BinaryArray = self.image.keys().map(|k| Some(k.as_ref())).collect();
            let mut columns: Vec<ArrayRef> = vec![Arc::new(keys)];
            columns.extend(
                self.converter
                    .convert_rows(self.image.values().map(|r| parser.parse(r)))?,
            );
            let mut fields = vec![Field::new("key", DataType::Binary, false)];
            fields.extend(self.spec.schema.fields().iter().map(|f| f.as_ref().clone()));
            let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
            to_ipc(&batch)?
        };
        let header = serde_json::to_vec(&ReaderState {
            cut: self.cut.as_ref().map(|c| c.iter().map(|l| l.0).collect()),
            image_bytes: image.len() as u64,
        })
        .map_err(|e| StreamSqlError::Internal(e.to_string()))?;
        let mut out = Vec::with_capacity(8 + header.len() + image.len());
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&image);
        Ok(out)
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<()> {
        let bad = || StreamSqlError::State("a change-log reader's snapshot is cut short".into());
        let (len, rest) = bytes.split_first_chunk::<8>().ok_or_else(bad)?;
        let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|_| bad())?;
        let header = rest.get(..len).ok_or_else(bad)?;
        let image = rest.get(len..).ok_or_else(bad)?;
        let state: ReaderState = serde_json::from_slice(header)
            .map_err(|e| StreamSqlError::State(format!("change-log reader: {e}")))?;
        if state.image_bytes != image.len() as u64 {
            return Err(bad());
        }
        self.cut = state.cut.map(|c| c.into_iter().map(Lsn).collect());
        self.image.clear();
        *self.encoded.get_mut() = None;
        if !image.is_empty() {
            let batch = from_ipc(image)?;
            let keys = batch
                .column(0)
                .as_any()
                .downcast_ref::<BinaryArray>()
                .ok_or_else(|| StreamSqlError::State("image keys are not binary".into()))?;
            let rows = self
                .converter
                .convert_columns(batch.columns().get(1..).unwrap_or_default())?;
            for (i, row) in rows.iter().enumerate() {
                self.image.insert(keys.value(i).into(), row.as_ref().into());
            }
        }
        Ok(())
    }
}

impl SourceReader<ArrowBatch> for ChangeLogReader {
    fn poll(&mut self, out: &mut Vec<ArrowBatch>, _max: usize) -> eddy_stream::Result<SourcePoll> {
        match self.next_change()? {
            Some(batch) => {
                out.push(ArrowBatch(batch));
                Ok(SourcePoll::Ready)
            }
            None => Ok(SourcePoll::Idle(IDLE)),
        }
    }

    fn snapshot(&self) -> eddy_stream::Result<Vec<u8>> {
        let mut cached = self.encoded.lock();
        if let Some(bytes) = cached.as_ref() {
            return Ok(bytes.as_ref().clone());
        }
        let bytes = Arc::new(self.state()?);
        *cached = Some(Arc::clone(&bytes));
        Ok(bytes.as_ref().clone())
    }

    fn restore(&mut self, state: &[u8]) -> eddy_stream::Result<()> {
        Ok(self.restore_state(state)?)
    }
}

/// Why `agg`'s aggregates cannot be kept exactly under retractions, if
/// they cannot: `min`/`max` would need every value of a group, DISTINCT
/// every distinct value with its count, and floating-point sums do not
/// undo exactly.
pub(crate) fn retract_refusal(
    agg: &datafusion::physical_plan::aggregates::AggregateExec,
) -> Result<Option<String>> {
    use datafusion::physical_expr::expressions::CastExpr;
    let input = agg.input().schema();
    for a in agg.aggr_expr() {
        let name = a.fun().name().to_ascii_lowercase();
        if name == "min" || name == "max" {
            return Ok(Some(format!(
                "{name} (a retracted extreme would need every value of its group)"
            )));
        }
        if a.is_distinct() {
            return Ok(Some(format!("{name}(DISTINCT)")));
        }
        for e in a.expressions() {
            // avg of an integer is planned as avg of its cast to double;
            // a double holding integer sums stays exact up to 2^53
            let inner = match e.downcast_ref::<CastExpr>() {
                Some(c) => c.expr(),
                None => &e,
            };
            let ty = inner.data_type(&input)?;
            if ty.is_floating() {
                return Ok(Some(format!(
                    "{name} of a floating-point value (float addition does not undo exactly)"
                )));
            }
        }
        if !a.create_sliding_accumulator()?.supports_retract_batch() {
            return Ok(Some(format!("{name} (its accumulator cannot retract)")));
        }
    }
    Ok(None)
}
