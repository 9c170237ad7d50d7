//! The `datagen` connector: a deterministic, replayable generator.
//!
//! Row `i` of a source is a pure function of `i` and the source's options,
//! so a job restored from a checkpoint (which records the next `i`)
//! regenerates exactly the rows after it, and a test can compute what any
//! prefix of the stream holds. Options (RisingWave's names):
//! * `datagen.rows.per.second` (default 1000) and `datagen.max.rows`
//!   (default: unbounded, or until a sequence field ends);
//! * per column `fields.<col>.kind` = `'sequence'` (`start`, default 0;
//!   `end`, default the type's maximum) or `'random'` (`min`, `max`,
//!   `seed`; `length` for text). Timestamps are sequences from `start` (a
//!   timestamp literal) in steps of `fields.<col>.step_ms` (default 1000);
//!   `fields.<col>.out_of_order_ms = n` moves each row's time back by a
//!   pseudo-random 0..=n ms (drawn from `seed`, default 0), so event time is
//!   out of order by up to `n` ms, deterministically (an event-time source
//!   for watermarks and windows).
//!
//! Every option is checked at CREATE SOURCE; an unknown one is refused.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{
    ArrayRef, BooleanBuilder, Float32Builder, Float64Builder, Int16Builder, Int32Builder,
    Int64Builder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{Field, Schema, SchemaRef};
use eddy_common::ColumnType;
use eddy_stream::operator::SubtaskInfo;
use eddy_stream::source::{SourcePoll, SourceReader};

use crate::batch::ArrowBatch;
use crate::error::{Result, StreamSqlError};

/// Rows per generated batch (one stream record).
const BATCH_ROWS: u64 = 1024;

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Sequence { start: i64, end: i64 },
    Random { min: i64, max: i64, seed: u64 },
}

#[derive(Debug, Clone, PartialEq)]
struct FieldGen {
    ty: ColumnType,
    kind: Kind,
    /// Text: characters per random value.
    length: usize,
    /// Timestamps: microseconds between consecutive rows.
    step_micros: i64,
    /// Timestamps: a row's time is moved back by up to this many ms,
    /// drawn from `jitter_seed`.
    jitter_ms: i64,
    jitter_seed: u64,
}

/// A checked datagen source definition.
#[derive(Debug, Clone, PartialEq)]
pub struct DatagenSpec {
    schema: SchemaRef,
    fields: Vec<FieldGen>,
    rows_per_second: f64,
    max_rows: Option<u64>,
}

fn opt_i64(options: &mut BTreeMap<String, String>, key: &str) -> Result<Option<i64>> {
    options
        .remove(key)
        .map(|v| {
            v.trim().parse::<i64>().map_err(|_| {
                StreamSqlError::InvalidOption(format!("option {key} must be an integer, got {v:?}"))
            })
        })
        .transpose()
}

/// Column types datagen derives from an integer sequence or draw.
fn generated_from_integers(ty: ColumnType) -> bool {
    matches!(
        ty,
        ColumnType::SmallInt
            | ColumnType::Int
            | ColumnType::BigInt
            | ColumnType::Real
            | ColumnType::Double
            | ColumnType::Text
            | ColumnType::Varchar(_)
            | ColumnType::Boolean
    )
}

fn type_range(ty: ColumnType) -> (i64, i64) {
    match ty {
        ColumnType::SmallInt => (i16::MIN as i64, i16::MAX as i64),
        ColumnType::Int => (i32::MIN as i64, i32::MAX as i64),
        _ => (i64::MIN, i64::MAX),
    }
}

impl DatagenSpec {
    /// Checks the options of `CREATE SOURCE ... WITH (connector = 'datagen')`
    /// for `columns`; `options` must not hold `connector` any more.
    pub fn new(
        columns: &[(String, ColumnType)],
        mut options: BTreeMap<String, String>,
    ) -> Result<DatagenSpec> {
        let rows_per_second = match options.remove("datagen.rows.per.second") {
            None => 1000.0,
            Some(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|r| r.is_finite() && *r > 0.0)
                .ok_or_else(|| {
                    StreamSqlError::InvalidOption(format!(
                        "datagen.rows.per.second must be a positive number, got {v:?}"
                    ))
                })?,
        };
        let mut max_rows = opt_i64(&mut options, "datagen.max.rows")?
            .map(|n| {
                u64::try_from(n).map_err(|_| {
                    StreamSqlError::InvalidOption("datagen.max.rows must not be negative".into())
                })
            })
            .transpose()?;
        let mut fields = Vec::with_capacity(columns.len());
        let mut arrow_fields = Vec::with_capacity(columns.len());
        for (name, ty) in columns {
            let p = format!("fields.{name}.");
            let kind_name = options
                .remove(&format!("{p}kind"))
                .unwrap_or_else(|| {
                    if *ty == ColumnType::Timestamp {
                        "sequence".into()
                    } else {
                        "random".into()
                    }
                })
                .to_ascii_lowercase();
            let (lo, hi) = type_range(*ty);
            let mut step_micros = 0;
            let mut jitter_ms = 0;
            let mut jitter_seed = 0;
            let kind = match (ty, kind_name.as_str()) {
                (ColumnType::Timestamp, "sequence") => {
                    let start = match options.remove(&format!("{p}start")) {
                        Some(t) => timestamp_micros(&t)?,
                        None => 1_767_225_600_000_000, // 2026-01-01 00:00:00
                    };
                    let step_ms = opt_i64(&mut options, &format!("{p}step_ms"))?.unwrap_or(1000);
                    if step_ms < 0 {
                        return Err(StreamSqlError::InvalidOption(format!(
                            "{p}step_ms must not be negative"
                        )));
                    }
                    step_micros = step_ms.saturating_mul(1000);
                    jitter_ms = opt_i64(&mut options, &format!("{p}out_of_order_ms"))?.unwrap_or(0);
                    if !(0..=1_000_000_000).contains(&jitter_ms) {
                        return Err(StreamSqlError::InvalidOption(format!(
                            "{p}out_of_order_ms must be from 0 to 1000000000"
                        )));
                    }
                    jitter_seed = opt_i64(&mut options, &format!("{p}seed"))?.unwrap_or(0) as u64;
                    Kind::Sequence {
                        start,
                        end: i64::MAX,
                    }
                }
                (ColumnType::Timestamp, _) => {
                    return Err(StreamSqlError::NotSupported(format!(
                        "datagen generates timestamp column {name} only as a sequence"
                    )))
                }
                (ty, "sequence") if generated_from_integers(*ty) => {
                    let start = opt_i64(&mut options, &format!("{p}start"))?.unwrap_or(0);
                    let end = opt_i64(&mut options, &format!("{p}end"))?.unwrap_or(hi);
                    if start < lo || end > hi || end < start {
                        return Err(StreamSqlError::InvalidOption(format!(
                            "sequence {start}..{end} of column {name} does not fit {ty}"
                        )));
                    }
                    let rows = (end as i128 - start as i128 + 1).min(u64::MAX as i128) as u64;
                    max_rows = Some(max_rows.map_or(rows, |m| m.min(rows)));
                    Kind::Sequence { start, end }
                }
                (ty, "random") if generated_from_integers(*ty) => {
                    let min = opt_i64(&mut options, &format!("{p}min"))?.unwrap_or(0);
                    let max = opt_i64(&mut options, &format!("{p}max"))?.unwrap_or(hi.min(1000));
                    if min < lo || max > hi || max < min {
                        return Err(StreamSqlError::InvalidOption(format!(
                            "random range {min}..{max} of column {name} does not fit {ty}"
                        )));
                    }
                    let seed = opt_i64(&mut options, &format!("{p}seed"))?.unwrap_or(0) as u64;
                    Kind::Random { min, max, seed }
                }
                (_, "sequence" | "random") => {
                    return Err(StreamSqlError::NotSupported(format!(
                        "datagen cannot generate column {name} of type {ty}"
                    )))
                }
                (_, other) => {
                    return Err(StreamSqlError::InvalidOption(format!(
                        "{p}kind must be 'sequence' or 'random', got {other:?}"
                    )))
                }
            };
            let length = opt_i64(&mut options, &format!("{p}length"))?.unwrap_or(10);
            let limit = if let ColumnType::Varchar(n) = ty {
                *n as i64
            } else {
                1 << 20
            };
            if !(1..=limit).contains(&length) {
                return Err(StreamSqlError::InvalidOption(format!(
                    "{p}length must be between 1 and {limit}"
                )));
            }
            fields.push(FieldGen {
                ty: *ty,
                kind,
                length: length as usize,
                step_micros,
                jitter_ms,
                jitter_seed,
            });
            // generated values are never NULL
            arrow_fields.push(Field::new(name, ty.to_arrow(), false));
        }
        if let Some(k) = options.keys().next() {
            return Err(StreamSqlError::InvalidOption(format!(
                "unknown datagen option {k:?}"
            )));
        }
        Ok(DatagenSpec {
            schema: Arc::new(Schema::new(arrow_fields)),
            fields,
            rows_per_second,
            max_rows,
        })
    }

    /// The source's schema (every column NOT NULL).
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// Rows `first, first + step, ...` (`n` of them) as one batch.
    pub fn batch(&self, first: u64, step: u64, n: usize) -> Result<RecordBatch> {
        let rows = (0..n as u64).map(|j| first + j * step);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.fields.len());
        for (c, f) in self.fields.iter().enumerate() {
            let value = |i: u64| -> i64 {
                match f.kind {
                    Kind::Sequence { start, .. } => {
                        let step = if f.step_micros > 0 { f.step_micros } else { 1 };
                        start.saturating_add((i as i64).saturating_mul(step))
                    }
                    Kind::Random { min, max, seed } => {
                        let span = (max as i128 - min as i128 + 1) as u128;
                        let h = mix(seed ^ (c as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15), i);
                        (min as i128 + (h as u128 % span) as i128) as i64
                    }
                }
            };
            let array: ArrayRef = match f.ty {
                ColumnType::SmallInt => {
                    let mut b = Int16Builder::with_capacity(n);
                    for i in rows.clone() {
                        b.append_value(value(i) as i16);
                    }
                    Arc::new(b.finish())
                }
                ColumnType::Int => {
                    let mut b = Int32Builder::with_capacity(n);
                    for i in rows.clone() {
                        b.append_value(value(i) as i32);
                    }
                    Arc::new(b.finish())
                }
                ColumnType::BigInt => {
                    let mut b = Int64Builder::with_capacity(n);
                    for i in rows.clone() {
                        b.append_value(value(i));
                    }
                    Arc::new(b.finish())
                }
                ColumnType::Real | ColumnType::Double => {
                    let float = |i: u64| match f.kind {
                        Kind::Random { min, max, seed } => {
                            let h = mix(seed ^ (c as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15), i);
                            let u = (h >> 11) as f64 / (1u64 << 53) as f64;
                            min as f64 + u * (max as f64 - min as f64)
                        }
                        Kind::Sequence { .. } => value(i) as f64,
                    };
                    if f.ty == ColumnType::Real {
                        let mut b = Float32Builder::with_capacity(n);
                        for i in rows.clone() {
                            b.append_value(float(i) as f32);
                        }
                        Arc::new(b.finish())
                    } else {
                        let mut b = Float64Builder::with_capacity(n);
                        for i in rows.clone() {
                            b.append_value(float(i));
                        }
                        Arc::new(b.finish())
                    }
                }
                ColumnType::Boolean => {
                    let mut b = BooleanBuilder::with_capacity(n);
                    for i in rows.clone() {
                        b.append_value(value(i) % 2 != 0);
                    }
                    Arc::new(b.finish())
                }
                ColumnType::Text | ColumnType::Varchar(_) => {
                    let mut b = StringBuilder::with_capacity(n, n * f.length);
                    let mut s = String::with_capacity(f.length);
                    for i in rows.clone() {
                        s.clear();
                        match f.kind {
                            Kind::Sequence { .. } => s.push_str(&value(i).to_string()),
                            Kind::Random { .. } => {
                                let mut h = value(i) as u64;
                                for _ in 0..f.length {
                                    h = mix(h, 0x5151);
                                    s.push((b'a' + (h % 26) as u8) as char);
                                }
                            }
                        }
                        b.append_value(&s);
                    }
                    Arc::new(b.finish())
                }
                ColumnType::Timestamp => {
                    let mut b = TimestampMicrosecondBuilder::with_capacity(n);
                    let span = f.jitter_ms as u64 + 1;
                    for i in rows.clone() {
                        let back = if f.jitter_ms > 0 {
                            let h = mix(f.jitter_seed ^ (c as u64).wrapping_mul(0x9E37_79B9), i);
                            (h % span) as i64 * 1000
                        } else {
                            0
                        };
                        b.append_value(value(i).saturating_sub(back));
                    }
                    Arc::new(b.finish())
                }
                other => {
                    return Err(StreamSqlError::NotSupported(format!(
                        "datagen cannot generate {other}"
                    )))
                }
            };
            columns.push(array);
        }
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }

    /// A reader for one subtask.
    pub fn reader(self: &Arc<Self>, info: &SubtaskInfo) -> DatagenReader {
        let p = info.parallelism.max(1) as u64;
        DatagenReader {
            spec: Arc::clone(self),
            next: info.index as u64,
            step: p,
            rate: self.rows_per_second / p as f64,
            started: None,
        }
    }
}

/// SplitMix64 of `(seed, i)`: a cheap, well-mixed deterministic hash.
fn mix(seed: u64, i: u64) -> u64 {
    let mut z = seed
        .wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn timestamp_micros(text: &str) -> Result<i64> {
    match eddy_sql::pgtypes::parse_text(text, ColumnType::Timestamp) {
        Ok(eddy_common::Value::Timestamp(t)) => Ok(t),
        _ => Err(StreamSqlError::InvalidOption(format!(
            "invalid timestamp {text:?}"
        ))),
    }
}

/// One subtask's generator: rows `next, next + step, ...`.
pub struct DatagenReader {
    spec: Arc<DatagenSpec>,
    next: u64,
    step: u64,
    rate: f64,
    started: Option<(Instant, u64)>,
}

impl SourceReader<ArrowBatch> for DatagenReader {
    fn poll(&mut self, out: &mut Vec<ArrowBatch>, _max: usize) -> eddy_stream::Result<SourcePoll> {
        let end = self.spec.max_rows.unwrap_or(u64::MAX);
        if self.next >= end {
            return Ok(SourcePoll::Finished);
        }
        let (t0, n0) = *self.started.get_or_insert((Instant::now(), self.next));
        let done = (self.next - n0) / self.step;
        let due = (t0.elapsed().as_secs_f64() * self.rate) as u64 + 1;
        if due <= done {
            let wait = (done + 1) as f64 / self.rate - t0.elapsed().as_secs_f64();
            return Ok(SourcePoll::Idle(Duration::from_secs_f64(
                wait.clamp(0.0, 0.05),
            )));
        }
        let left = (end - self.next).div_ceil(self.step);
        let n = (due - done).min(BATCH_ROWS).min(left);
        let batch = self.spec.batch(self.next, self.step, n as usize)?;
        out.push(ArrowBatch(batch));
        self.next += n * self.step;
        Ok(if self.next >= end {
            SourcePoll::Finished
        } else {
            SourcePoll::Ready
        })
    }
    fn snapshot(&self) -> eddy_stream::Result<Vec<u8>> {
        Ok(serde_json::to_vec(&self.next)?)
    }
    fn restore(&mut self, state: &[u8]) -> eddy_stream::Result<()> {
        self.next = serde_json::from_slice(state)?;
        self.started = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array};

    fn spec(opts: &[(&str, &str)]) -> Result<DatagenSpec> {
        DatagenSpec::new(
            &[
                ("id".into(), ColumnType::BigInt),
                ("k".into(), ColumnType::Int),
                ("name".into(), ColumnType::Text),
            ],
            opts.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn rows_are_a_function_of_their_index() {
        let s = spec(&[
            ("fields.id.kind", "sequence"),
            ("fields.id.start", "10"),
            ("fields.k.max", "9"),
        ])
        .expect("spec");
        let whole = s.batch(0, 1, 100).expect("batch");
        let part = s.batch(50, 1, 50).expect("batch");
        assert_eq!(whole.slice(50, 50), part);
        let ids = whole
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("int64");
        assert_eq!(ids.value(0), 10);
        assert_eq!(ids.value(99), 109);
        assert_eq!(whole.column(1).null_count(), 0);
    }

    #[test]
    fn bad_options_are_refused() {
        assert!(spec(&[("fields.k.kind", "zigzag")]).is_err());
        assert!(spec(&[("fields.k.min", "10"), ("fields.k.max", "1")]).is_err());
        assert!(spec(&[("nonsense", "1")]).is_err());
        assert!(spec(&[("datagen.rows.per.second", "-3")]).is_err());
        assert!(spec(&[
            ("fields.k.kind", "sequence"),
            ("fields.k.end", "99999999999")
        ])
        .is_err());
    }

    #[test]
    fn a_sequence_ends_the_source() {
        let s = Arc::new(
            spec(&[
                ("fields.id.kind", "sequence"),
                ("fields.id.end", "2499"),
                ("datagen.rows.per.second", "1000000000"),
            ])
            .expect("spec"),
        );
        let info = SubtaskInfo {
            index: 0,
            parallelism: 1,
            attempt: 0,
            name: "t".into(),
        };
        let mut r = s.reader(&info);
        let mut out = Vec::new();
        let mut polls = 0;
        while r.poll(&mut out, 1).expect("poll") != SourcePoll::Finished {
            polls += 1;
            assert!(polls < 10_000);
        }
        let rows: usize = out.iter().map(|b| b.0.num_rows()).sum();
        assert_eq!(rows, 2500);
    }

    #[test]
    fn event_times_are_out_of_order_by_at_most_the_bound() {
        let s = DatagenSpec::new(
            &[("ts".into(), ColumnType::Timestamp)],
            [
                ("fields.ts.start", "1970-01-01 00:00:10"),
                ("fields.ts.step_ms", "1"),
                ("fields.ts.out_of_order_ms", "20"),
                ("fields.ts.seed", "3"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        )
        .expect("spec");
        let b = s.batch(0, 1, 2000).expect("batch");
        let ts = b
            .column(0)
            .as_any()
            .downcast_ref::<arrow::array::TimestampMicrosecondArray>()
            .expect("timestamps");
        let mut backwards = 0;
        for i in 0..2000usize {
            let nominal = 10_000_000 + i as i64 * 1000;
            let back = nominal - ts.value(i);
            assert!(
                (0..=20_000).contains(&back) && back % 1000 == 0,
                "row {i}: {back}"
            );
            if i > 0 && ts.value(i) < ts.value(i - 1) {
                backwards += 1;
            }
        }
        assert!(
            backwards > 100,
            "the times are out of order ({backwards} steps back)"
        );
        assert_eq!(s.batch(700, 1, 5).expect("part"), b.slice(700, 5));
    }
}
