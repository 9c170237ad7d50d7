//! The `kafka` connector: a source reading every partition of a topic and
//! a sink writing a materialized view's changes to a topic, over the
//! pure-Rust client `rskafka` (no librdkafka).
//!
//! Invariants (`docs/design/streams-into-tables.md`, "Kafka"):
//! * Source position = the next offset of every partition. It is the
//!   reader's snapshot, taken by the stream runtime at the barrier, so a
//!   checkpoint holds the view's state *and* the offsets it covers; the
//!   view's commit records them in `eddy_stream_checkpoints.source_position`.
//!   A restore seeks every partition to its recorded offset: each record is
//!   counted exactly once in the view. Consumer groups are not used.
//! * `scan.startup.mode = 'latest'` is resolved once, at CREATE SOURCE, to
//!   the end offset of each partition, kept in the catalog: a job that
//!   restarts before its first checkpoint starts from the same offsets.
//!   Partitions found later start at their earliest offset.
//! * A record that does not decode (bad JSON / CSV, a value of the wrong
//!   type) fails the job with its topic, partition and offset: the view
//!   keeps its last committed state and SHOW JOBS shows the error. No
//!   record is skipped silently.
//! * Sink: at least once. Records are produced and acknowledged by the
//!   broker before the operator's checkpoint snapshot returns, so a
//!   completed checkpoint never covers an unacknowledged record; after a
//!   crash the view's changes since the last completed checkpoint are
//!   produced again. Records are upserts keyed by the view's primary key
//!   (a deleted row is a tombstone), so a duplicate is idempotent for any
//!   consumer that keeps the last value per key.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::{Field, Schema, SchemaRef};
use eddy_common::ColumnType;
use eddy_stream::operator::{Emitter, Operator};
use eddy_stream::source::{SourcePoll, SourceReader};
use eddy_stream::types::{downcast, AnyBatch, CheckpointId};
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use rskafka::BackoffConfig;
use serde::{Deserialize, Serialize};

use crate::batch::ArrowBatch;
use crate::changelog::{CUT_METADATA, SIGN_COLUMN};
use crate::error::{Result, StreamSqlError};

/// The connector name.
pub const CONNECTOR: &str = "kafka";
/// Catalog option holding the offsets `latest` resolved to at CREATE SOURCE.
pub const STARTUP_OFFSETS: &str = "_startup.offsets";
/// Bytes one fetch asks a partition for at most.
const FETCH_BYTES: i32 = 4 << 20;
/// Longest a record's value may be (a larger one fails the job).
const MAX_RECORD_BYTES: usize = 16 << 20;
/// Rows one poll decodes at most (one batch).
const BATCH_ROWS: usize = 65_536;
/// How long an idle source waits before fetching again.
const IDLE: Duration = Duration::from_millis(20);
/// How long the client retries a broker before an error (at CREATE).
const CREATE_DEADLINE: Duration = Duration::from_secs(5);
/// How long the client retries a broker before failing a running job.
const RUN_DEADLINE: Duration = Duration::from_secs(30);

/// Record value encoding (`FORMAT JSON | CSV`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per record, fields by column name.
    Json,
    /// One CSV line per record, fields in column order, no header.
    Csv,
}

impl Format {
    pub fn parse(v: &str) -> Result<Format> {
        match v.to_ascii_lowercase().as_str() {
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv),
            other => Err(StreamSqlError::NotSupported(format!(
                "FORMAT {other} is not supported (supported: JSON, CSV)"
            ))),
        }
    }
}

/// Where a source starts when it has no checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Startup {
    Earliest,
    Latest,
}

/// Options common to sources and sinks.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub topic: String,
    pub brokers: Vec<String>,
    pub format: Format,
}

fn take_endpoint(options: &mut BTreeMap<String, String>, what: &str) -> Result<Endpoint> {
    let topic = options
        .remove("topic")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            StreamSqlError::InvalidOption(format!("a Kafka {what} needs WITH (topic = '...')"))
        })?;
    let servers = match (
        options.remove("properties.bootstrap.server"),
        options.remove("properties.bootstrap.servers"),
    ) {
        (Some(s), None) | (None, Some(s)) => s,
        (Some(_), Some(_)) => {
            return Err(StreamSqlError::InvalidOption(
                "give properties.bootstrap.server once".into(),
            ))
        }
        (None, None) => {
            return Err(StreamSqlError::InvalidOption(format!(
                "a Kafka {what} needs WITH (properties.bootstrap.server = 'host:port')"
            )))
        }
    };
    let brokers: Vec<String> = servers
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if brokers.is_empty()
        || brokers.iter().any(|b| {
            b.rsplit_once(':')
                .is_none_or(|(_, p)| p.parse::<u16>().is_err())
        })
    {
        return Err(StreamSqlError::InvalidOption(format!(
            "properties.bootstrap.server must be host:port[,host:port...], got {servers:?}"
        )));
    }
    let format = Format::parse(&options.remove("format").ok_or_else(|| {
        StreamSqlError::InvalidOption(format!("a Kafka {what} needs FORMAT JSON or FORMAT CSV"))
    })?)?;
    Ok(Endpoint {
        topic,
        brokers,
        format,
    })
}

fn refuse_rest(options: &BTreeMap<String, String>, what: &str, supported: &str) -> Result<()> {
    match options.keys().next() {
        Some(k) if k.starts_with("properties.") || k.starts_with("scan.") => {
            Err(StreamSqlError::NotSupported(format!(
                "option {k} of a Kafka {what} is not supported (supported: {supported})"
            )))
        }
        Some(k) => Err(StreamSqlError::InvalidOption(format!(
            "unknown option {k} for a Kafka {what} (supported: {supported})"
        ))),
        None => Ok(()),
    }
}

/// A checked Kafka source definition.
#[derive(Debug, Clone)]
pub struct KafkaSourceSpec {
    pub endpoint: Endpoint,
    pub startup: Startup,
    /// Offsets `latest` resolved to at CREATE SOURCE (partition → offset).
    pub startup_offsets: BTreeMap<i32, i64>,
    pub columns: Vec<(String, ColumnType)>,
    schema: SchemaRef,
}

impl KafkaSourceSpec {
    /// From a source's columns and options (connector removed).
    pub fn new(
        columns: &[(String, ColumnType)],
        options: &BTreeMap<String, String>,
    ) -> Result<KafkaSourceSpec> {
        let mut options = options.clone();
        let endpoint = take_endpoint(&mut options, "source")?;
        let startup = match options.remove("scan.startup.mode").as_deref() {
            None => Startup::Earliest,
            Some(m) if m.eq_ignore_ascii_case("earliest") => Startup::Earliest,
            Some(m) if m.eq_ignore_ascii_case("latest") => Startup::Latest,
            Some(m) => {
                return Err(StreamSqlError::InvalidOption(format!(
                    "scan.startup.mode must be 'earliest' or 'latest', got {m:?}"
                )))
            }
        };
        let startup_offsets = match options.remove(STARTUP_OFFSETS) {
            Some(text) => parse_offsets(&text)?,
            None => BTreeMap::new(),
        };
        refuse_rest(
            &options,
            "source",
            "topic, properties.bootstrap.server, scan.startup.mode",
        )?;
        let fields: Vec<Field> = columns
            .iter()
            .map(|(n, t)| Field::new(n, t.to_arrow(), true))
            .collect();
        Ok(KafkaSourceSpec {
            endpoint,
            startup,
            startup_offsets,
            columns: columns.to_vec(),
            schema: Arc::new(Schema::new(fields)),
        })
    }

    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// Connects to the broker and checks the topic exists; for
    /// `scan.startup.mode = 'latest'`, the end offset of every partition
    /// (to be kept in the catalog as [`STARTUP_OFFSETS`]).
    pub fn check_at_create(&self) -> Result<Option<String>> {
        let endpoint = self.endpoint.clone();
        let latest = self.startup == Startup::Latest;
        off_runtime(move |rt| {
            rt.block_on(async move {
                let client = connect(&endpoint, CREATE_DEADLINE).await?;
                let partitions = topic_partitions(&client, &endpoint.topic).await?;
                if !latest {
                    return Ok(None);
                }
                let mut offsets = BTreeMap::new();
                for p in partitions {
                    let pc = partition(&client, &endpoint.topic, p).await?;
                    let end = pc
                        .get_offset(OffsetAt::Latest)
                        .await
                        .map_err(|e| kafka_err(&endpoint.topic, e))?;
                    offsets.insert(p, end);
                }
                Ok(Some(describe_offsets(&offsets)))
            })
        })
    }

    /// A reader at the start position (connects at its first poll).
    pub fn reader(self: &Arc<Self>) -> KafkaReader {
        KafkaReader {
            spec: Arc::clone(self),
            conn: None,
            offsets: BTreeMap::new(),
            failed: None,
        }
    }
}

/// `0:12,1:5` → {0: 12, 1: 5}.
fn parse_offsets(text: &str) -> Result<BTreeMap<i32, i64>> {
    let bad = || StreamSqlError::State(format!("bad Kafka offsets {text:?}"));
    let mut out = BTreeMap::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (p, o) = part.split_once(':').ok_or_else(bad)?;
        out.insert(
            p.parse::<i32>().map_err(|_| bad())?,
            o.parse::<i64>().map_err(|_| bad())?,
        );
    }
    Ok(out)
}

/// The text form of a position: `partition:next offset,...`.
pub fn describe_offsets(offsets: &BTreeMap<i32, i64>) -> String {
    offsets
        .iter()
        .map(|(p, o)| format!("{p}:{o}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn kafka_err(topic: &str, e: impl std::fmt::Display) -> StreamSqlError {
    StreamSqlError::Connector(format!("Kafka topic \"{topic}\": {e}"))
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("eddy-kafka")
        .enable_all()
        .build()
        .map_err(|e| StreamSqlError::Internal(format!("Kafka client runtime: {e}")))
}

/// Runs `f` with a fresh runtime on a thread of its own (the caller may
/// be on one of the server's runtime threads, where blocking is refused).
fn off_runtime<T: Send + 'static>(
    f: impl FnOnce(&tokio::runtime::Runtime) -> Result<T> + Send + 'static,
) -> Result<T> {
    std::thread::spawn(move || {
        let rt = runtime()?;
        f(&rt)
    })
    .join()
    .map_err(|_| StreamSqlError::Internal("the Kafka client thread panicked".into()))?
}

async fn connect(endpoint: &Endpoint, deadline: Duration) -> Result<Client> {
    let backoff = BackoffConfig {
        deadline: Some(deadline),
        ..BackoffConfig::default()
    };
    tokio::time::timeout(
        deadline + Duration::from_secs(1),
        ClientBuilder::new(endpoint.brokers.clone())
            .client_id("eddy")
            .backoff_config(backoff)
            .build(),
    )
    .await
    .map_err(|_| {
        StreamSqlError::Connector(format!(
            "cannot reach Kafka broker {} within {} s",
            endpoint.brokers.join(","),
            deadline.as_secs()
        ))
    })?
    .map_err(|e| {
        StreamSqlError::Connector(format!(
            "cannot reach Kafka broker {}: {e}",
            endpoint.brokers.join(",")
        ))
    })
}

async fn topic_partitions(client: &Client, topic: &str) -> Result<Vec<i32>> {
    let topics = client
        .list_topics()
        .await
        .map_err(|e| kafka_err(topic, e))?;
    let t = topics
        .into_iter()
        .find(|t| t.name == topic)
        .ok_or_else(|| {
            StreamSqlError::Connector(format!(
                "Kafka topic \"{topic}\" does not exist (create it first)"
            ))
        })?;
    if t.partitions.is_empty() {
        return Err(StreamSqlError::Connector(format!(
            "Kafka topic \"{topic}\" has no partitions"
        )));
    }
    Ok(t.partitions.into_iter().collect())
}

async fn partition(client: &Client, topic: &str, p: i32) -> Result<PartitionClient> {
    client
        .partition_client(topic.to_string(), p, UnknownTopicHandling::Retry)
        .await
        .map_err(|e| kafka_err(topic, e))
}

struct Connection {
    rt: tokio::runtime::Runtime,
    partitions: Vec<(i32, PartitionClient)>,
}

/// Reads every partition of a topic (see the module doc).
pub struct KafkaReader {
    spec: Arc<KafkaSourceSpec>,
    conn: Option<Connection>,
    /// Next offset of each partition; a partition not here starts at the
    /// startup offsets.
    offsets: BTreeMap<i32, i64>,
    /// A malformed record found after good ones in the same fetch: the
    /// good ones are emitted first, the next poll fails with this.
    failed: Option<String>,
}

/// A reader's snapshot.
#[derive(Serialize, Deserialize)]
struct ReaderState {
    offsets: BTreeMap<i32, i64>,
}

impl KafkaReader {
    fn connect(&mut self) -> Result<&Connection> {
        if self.conn.is_none() {
            let rt = runtime()?;
            let spec = Arc::clone(&self.spec);
            let known = self.offsets.clone();
            let (partitions, offsets) = rt.block_on(async move {
                let endpoint = &spec.endpoint;
                let client = connect(endpoint, RUN_DEADLINE).await?;
                let ids = topic_partitions(&client, &endpoint.topic).await?;
                let mut partitions = Vec::with_capacity(ids.len());
                let mut offsets = known;
                for p in ids {
                    let pc = partition(&client, &endpoint.topic, p).await?;
                    if let std::collections::btree_map::Entry::Vacant(e) = offsets.entry(p) {
                        let start = match spec.startup_offsets.get(&p) {
                            Some(o) => *o,
                            None => pc
                                .get_offset(OffsetAt::Earliest)
                                .await
                                .map_err(|e| kafka_err(&endpoint.topic, e))?,
                        };
                        e.insert(start);
                    }
                    partitions.push((p, pc));
                }
                Ok::<_, StreamSqlError>((partitions, offsets))
            })?;
            self.offsets = offsets;
            self.conn = Some(Connection { rt, partitions });
        }
        self.conn
            .as_ref()
            .ok_or_else(|| StreamSqlError::Internal("no Kafka connection".into()))
    }

    /// Fetches what every partition has after its offset; the decoded rows
    /// in one batch, or `None` when there was nothing.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if let Some(why) = &self.failed {
            return Err(StreamSqlError::Connector(why.clone()));
        }
        let topic = self.spec.endpoint.topic.clone();
        self.connect()?;
        let conn = self
            .conn
            .as_ref()
            .ok_or_else(|| StreamSqlError::Internal("no Kafka connection".into()))?;
        let mut decoder = Decoder::new(&self.spec)?;
        let mut next = self.offsets.clone();
        let mut rows = 0usize;
        let mut failed = None;
        for (p, pc) in &conn.partitions {
            if rows >= BATCH_ROWS || failed.is_some() {
                break;
            }
            let from = next.get(p).copied().unwrap_or(0);
            let (records, _high) = conn
                .rt
                .block_on(pc.fetch_records(from, 1..FETCH_BYTES, 0))
                .map_err(|e| kafka_err(&topic, format!("partition {p}: {e}")))?;
            for r in records {
                if r.offset < from {
                    continue;
                }
                if rows >= BATCH_ROWS {
                    break;
                }
                let value = r.record.value.as_deref().unwrap_or_default();
                if value.len() > MAX_RECORD_BYTES {
                    return Err(StreamSqlError::Connector(format!(
                        "Kafka topic \"{topic}\" partition {p} offset {}: a record of {} bytes \
                         (at most {MAX_RECORD_BYTES})",
                        r.offset,
                        value.len()
                    )));
                }
                if let Err(e) = decoder.push(value) {
                    failed = Some(malformed(&topic, *p, r.offset, e));
                    break;
                }
                next.insert(*p, r.offset + 1);
                rows += 1;
            }
        }
        if let Some(why) = failed {
            if rows == 0 {
                return Err(StreamSqlError::Connector(why));
            }
            self.failed = Some(why);
        }
        if rows == 0 {
            return Ok(None);
        }
        let batch = decoder.finish().map_err(|e| {
            StreamSqlError::Connector(format!(
                "Kafka topic \"{topic}\": records after offsets {} do not decode: {e}",
                describe_offsets(&self.offsets)
            ))
        })?;
        self.offsets = next;
        let metadata = [(
            CUT_METADATA.to_string(),
            format!("kafka {}", describe_offsets(&self.offsets)),
        )]
        .into();
        let schema = Schema::new_with_metadata(batch.schema().fields().clone(), metadata);
        Ok(Some(batch.with_schema(Arc::new(schema))?))
    }
}

fn malformed(topic: &str, p: i32, offset: i64, e: impl std::fmt::Display) -> String {
    format!(
        "malformed record in Kafka topic \"{topic}\" partition {p} offset {offset}: {e} \
         (the job stops here; the view keeps its last committed state)"
    )
}

/// Decodes record values into one batch of the source's columns.
enum Decoder {
    Json(arrow_json::reader::Decoder),
    Csv(Box<arrow_csv::reader::Decoder>),
}

impl Decoder {
    fn new(spec: &KafkaSourceSpec) -> Result<Decoder> {
        Ok(match spec.endpoint.format {
            Format::Json => Decoder::Json(
                arrow_json::ReaderBuilder::new(spec.schema())
                    .with_batch_size(BATCH_ROWS)
                    .build_decoder()?,
            ),
            Format::Csv => Decoder::Csv(Box::new(
                arrow_csv::ReaderBuilder::new(spec.schema())
                    .with_batch_size(BATCH_ROWS)
                    .build_decoder(),
            )),
        })
    }

    /// Adds one record's value; a value that is not one JSON object (or
    /// one CSV line of the source's width) is refused here.
    fn push(&mut self, value: &[u8]) -> std::result::Result<(), String> {
        match self {
            Decoder::Json(d) => {
                match serde_json::from_slice::<serde_json::Value>(value) {
                    Ok(serde_json::Value::Object(_)) => {}
                    Ok(_) => return Err("not a JSON object".into()),
                    Err(e) => return Err(format!("not JSON: {e}")),
                }
                feed_all(value, |b| d.decode(b))
            }
            Decoder::Csv(d) => {
                if value.contains(&b'\n') || value.contains(&b'\r') {
                    return Err("a CSV record is one line".into());
                }
                let mut line = Vec::with_capacity(value.len() + 1);
                line.extend_from_slice(value);
                line.push(b'\n');
                feed_all(&line, |b| d.decode(b))
            }
        }
    }

    fn finish(&mut self) -> std::result::Result<RecordBatch, String> {
        let batch = match self {
            Decoder::Json(d) => d.flush(),
            Decoder::Csv(d) => d.flush(),
        }
        .map_err(|e| e.to_string())?;
        batch.ok_or_else(|| "no rows".to_string())
    }
}

impl SourceReader<ArrowBatch> for KafkaReader {
    fn poll(&mut self, out: &mut Vec<ArrowBatch>, _max: usize) -> eddy_stream::Result<SourcePoll> {
        match self.next_batch()? {
            Some(batch) => {
                out.push(ArrowBatch(batch));
                Ok(SourcePoll::Ready)
            }
            None => Ok(SourcePoll::Idle(IDLE)),
        }
    }

    fn snapshot(&self) -> eddy_stream::Result<Vec<u8>> {
        Ok(serde_json::to_vec(&ReaderState {
            offsets: self.offsets.clone(),
        })?)
    }

    fn restore(&mut self, state: &[u8]) -> eddy_stream::Result<()> {
        let state: ReaderState = serde_json::from_slice(state)?;
        self.offsets = state.offsets;
        Ok(())
    }
}

/// A checked Kafka sink definition.
#[derive(Debug, Clone)]
pub struct KafkaSinkSpec {
    pub endpoint: Endpoint,
}

impl KafkaSinkSpec {
    pub fn new(options: &BTreeMap<String, String>) -> Result<KafkaSinkSpec> {
        let mut options = options.clone();
        let endpoint = take_endpoint(&mut options, "sink")?;
        if endpoint.format != Format::Json {
            return Err(StreamSqlError::NotSupported(
                "a Kafka sink writes FORMAT JSON only".into(),
            ));
        }
        refuse_rest(&options, "sink", "topic, properties.bootstrap.server")?;
        Ok(KafkaSinkSpec { endpoint })
    }

    /// Connects to the broker and checks the topic exists.
    pub fn check_at_create(&self) -> Result<()> {
        let endpoint = self.endpoint.clone();
        off_runtime(move |rt| {
            rt.block_on(async move {
                let client = connect(&endpoint, CREATE_DEADLINE).await?;
                topic_partitions(&client, &endpoint.topic).await?;
                Ok(())
            })
        })
    }
}

/// Kafka's default partitioner (murmur2 of the key bytes, as the Java
/// client computes it), so a key lands where a Java producer puts it.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let seed: u32 = 0x9747_b28c;
    let len = data.len() as u32;
    let mut h: u32 = seed ^ len;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if let Some(b) = rest.first() {
        h ^= u32::from(*b);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Writes a view's changes (a change-log stream of its table) to Kafka.
pub struct KafkaSinkOperator {
    spec: Arc<KafkaSinkSpec>,
    /// Primary-key column indices of the view's table.
    key_columns: Vec<usize>,
    conn: Option<Connection>,
    /// Records not yet produced, by partition index.
    buffered: Vec<Record>,
    /// Records acknowledged by the broker (tests, metrics).
    pub produced: u64,
}

impl KafkaSinkOperator {
    pub fn new(spec: Arc<KafkaSinkSpec>, key_columns: Vec<usize>) -> KafkaSinkOperator {
        KafkaSinkOperator {
            spec,
            key_columns,
            conn: None,
            buffered: Vec::new(),
            produced: 0,
        }
    }

    fn connect(&mut self) -> Result<&Connection> {
        if self.conn.is_none() {
            let rt = runtime()?;
            let endpoint = self.spec.endpoint.clone();
            let partitions = rt.block_on(async move {
                let client = connect(&endpoint, RUN_DEADLINE).await?;
                let ids = topic_partitions(&client, &endpoint.topic).await?;
                let mut partitions = Vec::with_capacity(ids.len());
                for p in ids {
                    partitions.push((p, partition(&client, &endpoint.topic, p).await?));
                }
                Ok::<_, StreamSqlError>(partitions)
            })?;
            self.conn = Some(Connection { rt, partitions });
        }
        self.conn
            .as_ref()
            .ok_or_else(|| StreamSqlError::Internal("no Kafka connection".into()))
    }

    /// A change-log batch (retractions first, then insertions) as records:
    /// a tombstone for each key only retracted, an upsert for each insert.
    fn add(&mut self, batch: RecordBatch) -> Result<()> {
        let width = batch.num_columns().saturating_sub(1);
        let signs = batch
            .column(width)
            .as_any()
            .downcast_ref::<arrow::array::Int8Array>()
            .ok_or_else(|| StreamSqlError::Internal(format!("no {SIGN_COLUMN} column")))?;
        let rows = batch.project(&(0..width).collect::<Vec<_>>())?;
        let keys = json_lines(&rows.project(&self.key_columns)?)?;
        let values = json_lines(&rows)?;
        if keys.len() != rows.num_rows() || values.len() != rows.num_rows() {
            return Err(StreamSqlError::Internal(
                "JSON rows do not match the batch".into(),
            ));
        }
        let inserted: HashSet<&[u8]> = (0..rows.num_rows())
            .filter(|i| signs.value(*i) > 0)
            .map(|i| keys[i].as_slice())
            .collect();
        let ts = chrono::DateTime::from_timestamp_millis(now_millis()).unwrap_or_default();
        for i in 0..rows.num_rows() {
            let key = keys[i].clone();
            let value = if signs.value(i) > 0 {
                Some(values[i].clone())
            } else if inserted.contains(key.as_slice()) {
                continue;
            } else {
                None
            };
            self.buffered.push(Record {
                key: Some(key),
                value,
                headers: BTreeMap::new(),
                timestamp: ts,
            });
        }
        Ok(())
    }

    /// Produces every buffered record and waits for the broker's
    /// acknowledgement (each partition in order).
    fn flush(&mut self) -> Result<()> {
        if self.buffered.is_empty() {
            return Ok(());
        }
        let topic = self.spec.endpoint.topic.clone();
        let records = std::mem::take(&mut self.buffered);
        let conn = self.connect()?;
        let n = conn.partitions.len().max(1);
        let mut by_partition: Vec<Vec<Record>> = vec![Vec::new(); n];
        for r in records {
            let h = murmur2(r.key.as_deref().unwrap_or_default()) & 0x7fff_ffff;
            let i = usize::try_from(h).unwrap_or(0) % n;
            by_partition[i].push(r);
        }
        let mut produced = 0u64;
        for ((p, pc), records) in conn.partitions.iter().zip(by_partition) {
            // at most ~1 MB per request (the broker's default limit)
            let mut chunk = Vec::new();
            let mut bytes = 0usize;
            let send = |chunk: Vec<Record>| {
                conn.rt
                    .block_on(pc.produce(chunk, Compression::NoCompression))
                    .map_err(|e| kafka_err(&topic, format!("produce to partition {p}: {e}")))
            };
            for r in records {
                bytes += r.approximate_size() + 64;
                chunk.push(r);
                if bytes > 512 << 10 {
                    produced += send(std::mem::take(&mut chunk))?.len() as u64;
                    bytes = 0;
                }
            }
            produced += send(chunk)?.len() as u64;
        }
        self.produced += produced;
        Ok(())
    }
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0))
}

/// Each row of `batch` as one JSON object (nulls written as null).
fn json_lines(batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
    let mut buf = Vec::new();
    {
        let mut w = arrow_json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow_json::writer::LineDelimited>(&mut buf);
        w.write(batch)?;
        w.finish()?;
    }
    Ok(buf
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect())
}

/// Feeds all of `bytes` to an Arrow JSON or CSV decoder's `decode`, which
/// may take them in several calls; a decoder that takes nothing (its batch
/// is full) is an error, since one record never fills a batch.
fn feed_all(
    mut rest: &[u8],
    mut decode: impl FnMut(&[u8]) -> std::result::Result<usize, arrow::error::ArrowError>,
) -> std::result::Result<(), String> {
    while !rest.is_empty() {
        let n = decode(rest).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the decoder stopped".into());
        }
        rest = rest.get(n..).unwrap_or_default();
    }
    Ok(())
}

impl Operator for KafkaSinkOperator {
    fn process(
        &mut self,
        _input: usize,
        batch: AnyBatch,
        _out: &mut dyn Emitter,
    ) -> eddy_stream::Result<()> {
        for b in downcast::<ArrowBatch>(batch)? {
            self.add(b.0)?;
        }
        Ok(())
    }

    fn watermark(&mut self, _wm: i64, _out: &mut dyn Emitter) -> eddy_stream::Result<()> {
        Ok(())
    }

    /// Everything before the barrier is acknowledged before the
    /// checkpoint can complete (at least once).
    fn snapshot(&mut self, _id: CheckpointId) -> eddy_stream::Result<Option<Vec<u8>>> {
        self.flush()?;
        Ok(None)
    }

    fn restore(&mut self, _state: &[u8]) -> eddy_stream::Result<()> {
        self.buffered.clear();
        Ok(())
    }

    fn checkpoint_complete(
        &mut self,
        _id: CheckpointId,
        _is_final: bool,
    ) -> eddy_stream::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_the_java_client() {
        // values from org.apache.kafka.common.utils.UtilsTest.testMurmur2
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
    }

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn checks_source_options() {
        let cols = [("k".to_string(), ColumnType::Text)];
        let base = [
            ("topic", "t"),
            ("properties.bootstrap.server", "127.0.0.1:9092"),
            ("format", "json"),
        ];
        let spec = KafkaSourceSpec::new(&cols, &opts(&base)).expect("valid");
        assert_eq!(spec.startup, Startup::Earliest);
        let mut o = opts(&base);
        o.insert("properties.security.protocol".into(), "SSL".into());
        assert!(matches!(
            KafkaSourceSpec::new(&cols, &o),
            Err(StreamSqlError::NotSupported(_))
        ));
        let mut o = opts(&base);
        o.insert("scan.startup.mode".into(), "timestamp".into());
        assert!(matches!(
            KafkaSourceSpec::new(&cols, &o),
            Err(StreamSqlError::InvalidOption(_))
        ));
        let mut o = opts(&base);
        o.insert("properties.bootstrap.server".into(), "nohost".into());
        assert!(matches!(
            KafkaSourceSpec::new(&cols, &o),
            Err(StreamSqlError::InvalidOption(_))
        ));
        let mut o = opts(&base);
        o.remove("format");
        assert!(KafkaSourceSpec::new(&cols, &o).is_err());
        let mut o = opts(&base);
        o.insert("format".into(), "avro".into());
        assert!(matches!(
            KafkaSourceSpec::new(&cols, &o),
            Err(StreamSqlError::NotSupported(_))
        ));
        assert_eq!(
            parse_offsets("0:12,3:5").expect("offsets"),
            BTreeMap::from([(0, 12), (3, 5)])
        );
    }

    #[test]
    fn decodes_json_and_refuses_malformed_records() {
        let cols = [
            ("k".to_string(), ColumnType::Text),
            ("v".to_string(), ColumnType::BigInt),
        ];
        let spec = KafkaSourceSpec::new(
            &cols,
            &opts(&[
                ("topic", "t"),
                ("properties.bootstrap.server", "h:1"),
                ("format", "json"),
            ]),
        )
        .expect("spec");
        let mut d = Decoder::new(&spec).expect("decoder");
        d.push(br#"{"k":"a","v":1}"#).expect("row");
        d.push(br#"{"v":2,"k":"b","extra":true}"#).expect("row");
        assert!(d.push(b"{\"k\":").is_err());
        assert!(d.push(b"[1,2]").is_err());
        let b = d.finish().expect("batch");
        assert_eq!(b.num_rows(), 2);
        let mut d = Decoder::new(&spec).expect("decoder");
        d.push(br#"{"k":"a","v":"not a number"}"#).expect("object");
        assert!(d.finish().is_err(), "a wrong type fails the batch");
        let csv = KafkaSourceSpec::new(
            &cols,
            &opts(&[
                ("topic", "t"),
                ("properties.bootstrap.server", "h:1"),
                ("format", "csv"),
            ]),
        )
        .expect("spec");
        let mut d = Decoder::new(&csv).expect("decoder");
        d.push(b"a,1").expect("row");
        d.push(b"b,2").expect("row");
        assert!(d.push(b"c,3\nd,4").is_err());
        assert_eq!(d.finish().expect("batch").num_rows(), 2);
    }
}
