//! `StreamManager`: the catalog of sources and materialized views, and the
//! stream jobs that maintain the views.
//!
//! The catalog is `<data dir>/stream/catalog.json`, replaced atomically
//! (write, fsync, rename) after each change; a view's job checkpoints into
//! `<data dir>/stream/jobs/<view>`; its commits are recorded in the table
//! `eddy_stream_checkpoints`. At start every view's job is started again
//! from its newest checkpoint.
//!
//! DDL order keeps a crash harmless: CREATE makes the table before the
//! catalog names it (a crash in between leaves an ordinary table); DROP
//! removes the view from the catalog before it drops the table.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::physical_plan::memory::MemoryStream;
use eddy_common::{ColumnType, Value};
use eddy_sql::{Output, SqlError, StreamStatements};
use eddy_storage::{Engine, Table, WriteOp};
use eddy_stream::api::{DataStream, StreamEnv};
use eddy_stream::graph::OperatorFactory;
use eddy_stream::operator::Operator;
use eddy_stream::prelude::{JobConfig, JobHandle, JobStatus};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::append_op::AppendOperator;
use crate::batch::ArrowBatch;
use crate::changelog::ChangeLogSpec;
use crate::datagen::DatagenSpec;
use crate::error::{Result, StreamSqlError};
use crate::kafka::{KafkaSinkOperator, KafkaSinkSpec, KafkaSourceSpec};
use crate::nexmark::NexmarkSpec;
use crate::plan::{plan_view_literals, Stage, ViewPlan};
use crate::statements::{self, SinkDef, SourceDef, StreamStatement, ViewDef};
use crate::view_op::{
    checkpoint_table, committed_checkpoint, view_table, ViewOperator, ViewStats, ViewStatsReport,
    ViewTarget, CHECKPOINT_TABLE, INJECT_PANIC_ENV,
};
use crate::watermark::WatermarkDef;

#[derive(Default, Serialize, Deserialize)]
struct CatalogFile {
    sources: Vec<SourceDef>,
    views: Vec<ViewDef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    sinks: Vec<SinkDef>,
}

#[derive(Default)]
struct Catalog {
    sources: BTreeMap<String, SourceDef>,
    views: BTreeMap<String, ViewDef>,
    sinks: BTreeMap<String, SinkDef>,
    jobs: HashMap<String, JobHandle>,
    /// Each sink's job (a sink whose job could not start is in `broken`).
    sink_jobs: HashMap<String, JobHandle>,
    /// Views whose job could not start, with the reason.
    broken: HashMap<String, String>,
    /// Commit figures of each view's job since the server started.
    stats: HashMap<String, Arc<ViewStats>>,
    /// Each started job's compiled graph (`crate::status`).
    graphs: HashMap<String, crate::status::JobGraphReport>,
}

/// Sources, views and their jobs (see the module doc).
pub struct StreamManager {
    engine: Arc<Engine>,
    dir: PathBuf,
    /// `eddy_stream_checkpoints`, created with the first view (so a
    /// database without views shows no stream table).
    checkpoints: Mutex<Option<Arc<Table>>>,
    catalog: Mutex<Catalog>,
}

fn io(path: &Path, e: std::io::Error) -> StreamSqlError {
    StreamSqlError::Internal(format!("{}: {e}", path.display()))
}

impl StreamManager {
    /// Opens the catalog under `data_dir` and starts every view's job.
    pub fn start(engine: Arc<Engine>, data_dir: &Path) -> Result<Arc<StreamManager>> {
        let dir = data_dir.join("stream");
        std::fs::create_dir_all(dir.join("jobs")).map_err(|e| io(&dir, e))?;
        let checkpoints = Mutex::new(match engine.table(CHECKPOINT_TABLE) {
            // made before change-log sources recorded their position
            Some(t) if t.def().columns.len() == 4 => {
                Some(engine.add_column(CHECKPOINT_TABLE, crate::view_op::position_column())?)
            }
            other => other,
        });
        let file: CatalogFile = match std::fs::read(dir.join("catalog.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                StreamSqlError::State(format!("{}/catalog.json: {e}", dir.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => CatalogFile::default(),
            Err(e) => return Err(io(&dir, e)),
        };
        let manager = Arc::new(StreamManager {
            engine,
            dir,
            checkpoints,
            catalog: Mutex::new(Catalog {
                sources: file
                    .sources
                    .into_iter()
                    .map(|s| (s.name.clone(), s))
                    .collect(),
                views: file
                    .views
                    .into_iter()
                    .map(|v| (v.name.clone(), v))
                    .collect(),
                sinks: file
                    .sinks
                    .into_iter()
                    .map(|k| (k.name.clone(), k))
                    .collect(),
                ..Catalog::default()
            }),
        });
        {
            let mut cat = manager.catalog.lock();
            let views: Vec<ViewDef> = cat.views.values().cloned().collect();
            for v in views {
                match manager.start_job(&mut cat, &v) {
                    Ok(h) => {
                        cat.jobs.insert(v.name.clone(), h);
                    }
                    Err(e) => {
                        tracing::error!(view = %v.name, error = %e, "cannot start the view's job");
                        cat.broken.insert(v.name.clone(), e.to_string());
                    }
                }
            }
            let sinks: Vec<SinkDef> = cat.sinks.values().cloned().collect();
            for k in sinks {
                match manager.start_sink_job(&k) {
                    Ok(h) => {
                        cat.sink_jobs.insert(k.name.clone(), h);
                    }
                    Err(e) => {
                        tracing::error!(sink = %k.name, error = %e, "cannot start the sink's job");
                        cat.broken.insert(k.name.clone(), e.to_string());
                    }
                }
            }
        }
        Ok(manager)
    }

    /// Cancels every job and waits for it (server shutdown).
    pub fn shutdown(&self) {
        let jobs: Vec<(String, JobHandle)> = {
            let mut cat = self.catalog.lock();
            let mut jobs: Vec<(String, JobHandle)> = cat.sink_jobs.drain().collect();
            jobs.extend(cat.jobs.drain());
            jobs
        };
        for (_, h) in &jobs {
            h.cancel();
        }
        for (name, h) in jobs {
            if let Err(e) = h.wait() {
                tracing::debug!(view = %name, error = %e, "job ended");
            }
        }
    }

    fn save(&self, cat: &Catalog) -> Result<()> {
        let file = CatalogFile {
            sources: cat.sources.values().cloned().collect(),
            views: cat.views.values().cloned().collect(),
            sinks: cat.sinks.values().cloned().collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file)
            .map_err(|e| StreamSqlError::Internal(e.to_string()))?;
        let tmp = self.dir.join("catalog.json.tmp");
        let path = self.dir.join("catalog.json");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
            f.write_all(&bytes).map_err(|e| io(&tmp, e))?;
            f.sync_all().map_err(|e| io(&tmp, e))?;
        }
        std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
        if let Ok(d) = std::fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    fn source_schemas(cat: &Catalog) -> Result<Vec<(String, SchemaRef)>> {
        cat.sources
            .values()
            .map(|s| {
                let schema = if is_change_log(s) {
                    ChangeLogSpec::new(&s.columns, &s.options)?.schema()
                } else if is_kafka(s) {
                    KafkaSourceSpec::new(&s.columns, &s.options)?.schema()
                } else if is_nexmark(s) {
                    NexmarkSpec::new(&s.columns, s.options.clone())?.schema()
                } else {
                    datagen_spec(s)?.schema()
                };
                Ok((s.name.clone(), schema))
            })
            .collect()
    }

    fn plan(
        engine: &Engine,
        cat: &Catalog,
        def: &ViewDef,
    ) -> Result<(ViewPlan, Box<datafusion::sql::sqlparser::ast::Query>)> {
        let StreamStatement::CreateView { query, emit, .. } = statements::parse(&def.statement)?
        else {
            return Err(StreamSqlError::State(format!(
                "the catalog entry of view \"{}\" is not a CREATE MATERIALIZED VIEW",
                def.name
            )));
        };
        let watermarks: Vec<(String, WatermarkDef)> = cat
            .sources
            .values()
            .filter_map(|s| s.watermark.clone().map(|w| (s.name.clone(), w)))
            .collect();
        let tables = |name: &str| {
            if name == CHECKPOINT_TABLE {
                return None;
            }
            engine.table(name).map(|t| Arc::clone(t.def()))
        };
        let mut plan = plan_view_literals(
            &query,
            &Self::source_schemas(cat)?,
            &watermarks,
            emit,
            &tables,
            def.numeric_literals,
        )?;
        let lookups = plan.pre.iter().any(|s| matches!(s, Stage::Lookup(_)));
        if let Some(join) = &plan.join {
            for name in [&join.left.source, &join.right.source] {
                if cat.sources.get(name).is_some_and(is_change_log) {
                    return Err(StreamSqlError::NotSupported(
                        "a join of two streams over a change-log source is not supported (its \
                         retractions would need the join to retract pairs)"
                            .into(),
                    ));
                }
            }
            if join.left.source == join.right.source {
                return Err(StreamSqlError::NotSupported(
                    "a join of a source with itself is not supported yet (both sides would \
                     need one reader)"
                        .into(),
                ));
            }
        }
        if cat.sources.get(&plan.source).is_some_and(is_change_log) {
            if plan.append {
                return Err(StreamSqlError::NotSupported(
                    "a materialized view without GROUP BY over a change-log source is not \
                     supported: its rows are appended, and a change log's updates and deletes \
                     would need them retracted (aggregate the change log with GROUP BY instead)"
                        .into(),
                ));
            }
            if plan.time.session.is_some() {
                return Err(StreamSqlError::NotSupported(
                    "a SESSION window over a change-log source is not supported".into(),
                ));
            }
            if lookups {
                return Err(StreamSqlError::NotSupported(
                    "a lookup join over a change-log source is not supported: a retraction \
                     would look up a different row than its insertion did"
                        .into(),
                ));
            }
            if let Some(why) = &plan.retract_refusal {
                return Err(StreamSqlError::NotSupported(format!(
                    "a materialized view over a change-log source cannot keep {why} exactly \
                     (supported: count, and sum/avg of integer or numeric values)"
                )));
            }
            plan.retractions = true;
        }
        Ok((plan, query))
    }

    /// The connector of source `name`.
    fn job_source(cat: &Catalog, name: &str) -> Result<JobSource> {
        let source = cat
            .sources
            .get(name)
            .ok_or_else(|| StreamSqlError::Undefined("source", name.to_string()))?;
        Ok(if is_change_log(source) {
            JobSource::ChangeLog(Arc::new(ChangeLogSpec::new(
                &source.columns,
                &source.options,
            )?))
        } else if is_kafka(source) {
            JobSource::Kafka(Arc::new(KafkaSourceSpec::new(
                &source.columns,
                &source.options,
            )?))
        } else if is_nexmark(source) {
            JobSource::Nexmark(Arc::new(NexmarkSpec::new(
                &source.columns,
                source.options.clone(),
            )?))
        } else {
            JobSource::Datagen(Arc::new(datagen_spec(source)?))
        })
    }

    /// The stream of source `name` in a job.
    fn source_stream(
        &self,
        env: &StreamEnv,
        name: &str,
        source: JobSource,
    ) -> DataStream<ArrowBatch> {
        let source_name = format!("source {name}");
        match source {
            JobSource::Datagen(spec) => {
                env.add_source::<ArrowBatch, _>(&source_name, move |i| Ok(spec.reader(i)))
            }
            JobSource::Nexmark(spec) => {
                env.add_source::<ArrowBatch, _>(&source_name, move |i| Ok(spec.reader(i)))
            }
            JobSource::ChangeLog(spec) => {
                let engine = Arc::clone(&self.engine);
                env.add_source::<ArrowBatch, _>(&source_name, move |_| {
                    Ok(spec.reader(Arc::clone(&engine))?)
                })
            }
            JobSource::Kafka(spec) => {
                env.add_source::<ArrowBatch, _>(&source_name, move |_| Ok(spec.reader()))
            }
        }
    }

    fn start_job(&self, cat: &mut Catalog, def: &ViewDef) -> Result<JobHandle> {
        let stats = cat.stats.entry(def.name.clone()).or_default();
        let stats = Arc::clone(stats);
        let stats = &stats;
        let (plan, _) = Self::plan(&self.engine, cat, def)?;
        let source = Self::job_source(cat, &plan.source)?;
        let joined = match &plan.join {
            Some(j) => Some((
                j.right.source.clone(),
                Self::job_source(cat, &j.right.source)?,
            )),
            None => None,
        };
        for stage in &plan.pre {
            if let Stage::Lookup(join) = stage {
                let table = self
                    .engine
                    .table(&join.table)
                    .ok_or_else(|| StreamSqlError::Undefined("table", join.table.clone()))?;
                join.bind(table);
            }
        }
        let table = self
            .engine
            .table(&def.name)
            .ok_or_else(|| StreamSqlError::Undefined("table", def.name.clone()))?;
        let target = ViewTarget {
            engine: Arc::clone(&self.engine),
            job: def.name.clone(),
            table,
            checkpoints: self.checkpoint_table()?,
            stats: Arc::clone(stats),
        };
        let config = JobConfig {
            parallelism: Some(crate::status::VIEW_JOB_PARALLELISM),
            batch_size: 1,
            checkpoint_interval: Some(Duration::from_millis(def.checkpoint_interval_ms)),
            checkpoint_dir: Some(self.dir.join("jobs")),
            restore_from_latest: true,
            ..JobConfig::default()
        };
        let env = StreamEnv::new(config);
        let stream = self.source_stream(&env, &plan.source, source);
        let joined = joined.map(|(name, s)| self.source_stream(&env, &name, s));
        let plan = Arc::new(plan);
        let inject = std::env::var(INJECT_PANIC_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok());
        let factory: OperatorFactory = Arc::new(move |info| {
            let first_attempt = info.attempt == 0;
            let panic_at = inject.filter(|_| first_attempt);
            if plan.append {
                let op =
                    AppendOperator::new(Arc::clone(&plan), target.clone())?.panic_at_rows(panic_at);
                return Ok(Box::new(op) as Box<dyn Operator>);
            }
            let op = ViewOperator::new(Arc::clone(&plan), target.clone())?.panic_at_rows(panic_at);
            Ok(Box::new(op) as Box<dyn Operator>)
        });
        let view_name = format!("view {}", def.name);
        let _ = match joined {
            Some(right) => stream.connect(&right).transform::<()>(&view_name, factory),
            None => stream.transform::<()>(&view_name, factory),
        };
        let graph = crate::status::JobGraphReport::of(&env.job_graph()?);
        let handle = env.submit(&def.name)?;
        cat.graphs.insert(def.name.clone(), graph);
        Ok(handle)
    }

    /// A sink's job: the change log of its view's table (from the start),
    /// written to Kafka by [`KafkaSinkOperator`]; its checkpoints (the
    /// change-log reader's cut and image) are in `<dir>/sinks/<sink>`.
    fn start_sink_job(&self, def: &SinkDef) -> Result<JobHandle> {
        let spec = Arc::new(KafkaSinkSpec::new(&def.options)?);
        let table = self
            .engine
            .table(&def.from)
            .ok_or_else(|| StreamSqlError::Undefined("materialized view", def.from.clone()))?;
        let columns: Vec<(String, ColumnType)> = table
            .def()
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.ty))
            .collect();
        let key_columns = table.def().primary_key.clone();
        if key_columns.is_empty() {
            return Err(StreamSqlError::NotSupported(format!(
                "materialized view \"{}\" has no key: a Kafka sink writes upserts keyed by it",
                def.from
            )));
        }
        let options = BTreeMap::from([("table".to_string(), def.from.clone())]);
        let log = Arc::new(ChangeLogSpec::new(&columns, &options)?);
        let config = JobConfig {
            parallelism: Some(1),
            batch_size: 1,
            checkpoint_interval: Some(Duration::from_millis(SINK_CHECKPOINT_MS)),
            checkpoint_dir: Some(self.dir.join("sinks")),
            restore_from_latest: true,
            ..JobConfig::default()
        };
        let env = StreamEnv::new(config);
        let engine = Arc::clone(&self.engine);
        let stream = env.add_source::<ArrowBatch, _>(&format!("view {}", def.from), move |_| {
            Ok(log.reader(Arc::clone(&engine))?)
        });
        let factory: OperatorFactory = Arc::new(move |_| {
            Ok(Box::new(KafkaSinkOperator::new(
                Arc::clone(&spec),
                key_columns.clone(),
            )) as Box<dyn Operator>)
        });
        let _ = stream.transform::<()>(&format!("sink {}", def.name), factory);
        Ok(env.submit(&def.name)?)
    }

    fn create_sink(&self, def: SinkDef, if_not_exists: bool) -> Result<Output> {
        let spec = KafkaSinkSpec::new(&def.options)?;
        {
            let cat = self.catalog.lock();
            if let Some(kind) = self.name_taken(&cat, &def.name) {
                if if_not_exists && kind == "sink" {
                    return Ok(Output::Command("CREATE SINK".into()));
                }
                return Err(StreamSqlError::Duplicate(kind, def.name));
            }
            if !cat.views.contains_key(&def.from) {
                return Err(StreamSqlError::Undefined(
                    "materialized view",
                    def.from.clone(),
                ));
            }
        }
        // outside the catalog lock: this talks to the broker
        spec.check_at_create()?;
        let mut cat = self.catalog.lock();
        if let Some(kind) = self.name_taken(&cat, &def.name) {
            return Err(StreamSqlError::Duplicate(kind, def.name));
        }
        cat.sinks.insert(def.name.clone(), def.clone());
        let started = self.save(&cat).and_then(|()| self.start_sink_job(&def));
        match started {
            Ok(h) => {
                cat.sink_jobs.insert(def.name.clone(), h);
                Ok(Output::Command("CREATE SINK".into()))
            }
            Err(e) => {
                cat.sinks.remove(&def.name);
                let _ = self.save(&cat);
                Err(e)
            }
        }
    }

    fn drop_sink(&self, name: &str, if_exists: bool) -> Result<Output> {
        let mut cat = self.catalog.lock();
        if cat.sinks.remove(name).is_none() {
            if if_exists {
                return Ok(Output::Command("DROP SINK".into()));
            }
            return Err(StreamSqlError::Undefined("sink", name.into()));
        }
        self.save(&cat)?;
        cat.broken.remove(name);
        if let Some(h) = cat.sink_jobs.remove(name) {
            h.cancel();
            if let Err(e) = h.wait() {
                tracing::debug!(sink = %name, error = %e, "job ended");
            }
        }
        let dir = self.dir.join("sinks").join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| io(&dir, e))?;
        }
        Ok(Output::Command("DROP SINK".into()))
    }

    /// The checkpoint table, created if it does not exist yet.
    fn checkpoint_table(&self) -> Result<Arc<Table>> {
        let mut slot = self.checkpoints.lock();
        if let Some(t) = slot.as_ref() {
            return Ok(Arc::clone(t));
        }
        let t = match self.engine.table(CHECKPOINT_TABLE) {
            Some(t) => t,
            None => self.engine.create_table(checkpoint_table())?,
        };
        *slot = Some(Arc::clone(&t));
        Ok(t)
    }

    fn name_taken(&self, cat: &Catalog, name: &str) -> Option<&'static str> {
        if cat.sources.contains_key(name) {
            Some("source")
        } else if cat.views.contains_key(name) {
            Some("materialized view")
        } else if cat.sinks.contains_key(name) {
            Some("sink")
        } else if self.engine.table(name).is_some() {
            Some("relation")
        } else {
            None
        }
    }

    fn create_source(&self, mut def: SourceDef, if_not_exists: bool) -> Result<Output> {
        if is_change_log(&def) {
            def.columns = self.change_log_columns(&def)?;
            ChangeLogSpec::new(&def.columns, &def.options)?;
        } else if is_kafka(&def) {
            if def.options.contains_key(crate::kafka::STARTUP_OFFSETS) {
                return Err(StreamSqlError::InvalidOption(format!(
                    "unknown option {} for a Kafka source",
                    crate::kafka::STARTUP_OFFSETS
                )));
            }
            if self.name_taken(&self.catalog.lock(), &def.name) == Some("source") && if_not_exists {
                return Ok(Output::Command("CREATE SOURCE".into()));
            }
            let spec = KafkaSourceSpec::new(&def.columns, &def.options)?;
            // talks to the broker: not under the catalog lock
            if let Some(offsets) = spec.check_at_create()? {
                def.options
                    .insert(crate::kafka::STARTUP_OFFSETS.into(), offsets);
            }
        } else if is_nexmark(&def) {
            NexmarkSpec::new(&def.columns, def.options.clone())?;
        } else {
            datagen_spec(&def)?;
        }
        let mut cat = self.catalog.lock();
        if let Some(kind) = self.name_taken(&cat, &def.name) {
            if if_not_exists && kind == "source" {
                return Ok(Output::Command("CREATE SOURCE".into()));
            }
            return Err(StreamSqlError::Duplicate(kind, def.name));
        }
        cat.sources.insert(def.name.clone(), def);
        self.save(&cat)?;
        Ok(Output::Command("CREATE SOURCE".into()))
    }

    /// The columns of a change-log source: its table's, at CREATE SOURCE.
    fn change_log_columns(&self, def: &SourceDef) -> Result<Vec<(String, ColumnType)>> {
        let name = def.options.get("table").cloned().unwrap_or_default();
        if name == CHECKPOINT_TABLE {
            return Err(StreamSqlError::NotSupported(format!(
                "a change-log source of the system table \"{name}\" is not supported"
            )));
        }
        let table = self
            .engine
            .table(&name)
            .ok_or_else(|| StreamSqlError::Undefined("table", name.clone()))?;
        Ok(table
            .def()
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.ty))
            .collect())
    }

    fn create_view(&self, mut def: ViewDef, if_not_exists: bool) -> Result<Output> {
        let mut cat = self.catalog.lock();
        if let Some(kind) = self.name_taken(&cat, &def.name) {
            if if_not_exists && kind == "materialized view" {
                return Ok(Output::Command("CREATE MATERIALIZED VIEW".into()));
            }
            return Err(StreamSqlError::Duplicate(kind, def.name));
        }
        let (plan, _) = Self::plan(&self.engine, &cat, &def)?;
        def.source = plan.source.clone();
        def.joined = plan.join.as_ref().map(|j| j.right.source.clone());
        self.engine.create_table(view_table(&def.name, &plan))?;
        cat.views.insert(def.name.clone(), def.clone());
        let started = self
            .save(&cat)
            .and_then(|()| self.start_job(&mut cat, &def));
        match started {
            Ok(h) => {
                cat.jobs.insert(def.name.clone(), h);
                Ok(Output::Command("CREATE MATERIALIZED VIEW".into()))
            }
            Err(e) => {
                cat.views.remove(&def.name);
                let _ = self.save(&cat);
                let _ = self.engine.drop_table(&def.name);
                Err(e)
            }
        }
    }

    fn drop_view(&self, name: &str, if_exists: bool) -> Result<Output> {
        let mut cat = self.catalog.lock();
        let sinks: Vec<String> = cat
            .sinks
            .values()
            .filter(|k| k.from == name)
            .map(|k| k.name.clone())
            .collect();
        if !sinks.is_empty() {
            return Err(StreamSqlError::Dependent(format!(
                "cannot drop materialized view \"{name}\": sink {} depends on it",
                sinks.join(", ")
            )));
        }
        if cat.views.remove(name).is_none() {
            if if_exists {
                return Ok(Output::Command("DROP MATERIALIZED VIEW".into()));
            }
            return Err(StreamSqlError::Undefined("materialized view", name.into()));
        }
        self.save(&cat)?;
        cat.broken.remove(name);
        cat.stats.remove(name);
        cat.graphs.remove(name);
        if let Some(h) = cat.jobs.remove(name) {
            h.cancel();
            if let Err(e) = h.wait() {
                tracing::debug!(view = %name, error = %e, "job ended");
            }
        }
        if self.engine.table(name).is_some() {
            self.engine.drop_table(name)?;
        }
        let checkpoints = self.checkpoints.lock().clone();
        if let Some(checkpoints) = checkpoints {
            if committed_checkpoint(&checkpoints, name)? >= 0 {
                let key = checkpoints.key_of(&[Value::Text(name.into())])?;
                self.engine
                    .commit(vec![(checkpoints, vec![WriteOp::Delete { key }])])?;
            }
        }
        let jobs = self.dir.join("jobs").join(name);
        if jobs.exists() {
            std::fs::remove_dir_all(&jobs).map_err(|e| io(&jobs, e))?;
        }
        Ok(Output::Command("DROP MATERIALIZED VIEW".into()))
    }

    fn drop_source(&self, name: &str, if_exists: bool) -> Result<Output> {
        let mut cat = self.catalog.lock();
        if !cat.sources.contains_key(name) {
            if if_exists {
                return Ok(Output::Command("DROP SOURCE".into()));
            }
            return Err(StreamSqlError::Undefined("source", name.into()));
        }
        let users: Vec<String> = cat
            .views
            .values()
            .filter(|v| v.source == name || v.joined.as_deref() == Some(name))
            .map(|v| v.name.clone())
            .collect();
        if !users.is_empty() {
            return Err(StreamSqlError::Dependent(format!(
                "cannot drop source \"{name}\": materialized view {} depends on it",
                users.join(", ")
            )));
        }
        cat.sources.remove(name);
        self.save(&cat)?;
        Ok(Output::Command("DROP SOURCE".into()))
    }

    fn show(&self, what: &StreamStatement) -> Result<Output> {
        let cat = self.catalog.lock();
        let columns: Vec<ArrayRef> = match what {
            StreamStatement::ShowSources => {
                let s: Vec<&SourceDef> = cat.sources.values().collect();
                vec![
                    text(s.iter().map(|s| s.name.clone())),
                    text(s.iter().map(|s| s.connector.clone())),
                    text(s.iter().map(|s| {
                        s.columns
                            .iter()
                            .map(|(n, t)| format!("{n} {}", t.pg_name()))
                            .chain(s.watermark.iter().map(WatermarkDef::describe))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })),
                    text(s.iter().map(|s| {
                        s.options
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })),
                ]
            }
            StreamStatement::ShowSinks => {
                let k: Vec<&SinkDef> = cat.sinks.values().collect();
                vec![
                    text(k.iter().map(|k| k.name.clone())),
                    text(k.iter().map(|k| k.from.clone())),
                    text(k.iter().map(|k| k.connector.clone())),
                    text(k.iter().map(|k| {
                        k.options
                            .iter()
                            .map(|(o, v)| format!("{o}={v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })),
                ]
            }
            StreamStatement::ShowViews => {
                let v: Vec<&ViewDef> = cat.views.values().collect();
                vec![
                    text(v.iter().map(|v| v.name.clone())),
                    text(v.iter().map(|v| v.source.clone())),
                    Arc::new(Int64Array::from_iter_values(
                        v.iter()
                            .map(|v| i64::try_from(v.checkpoint_interval_ms).unwrap_or(0)),
                    )),
                    text(v.iter().map(|v| v.statement.clone())),
                ]
            }
            _ => {
                let mut rows = Vec::new();
                for name in cat.views.keys() {
                    let status = match (cat.jobs.get(name), cat.broken.get(name)) {
                        (_, Some(why)) => format!("failed to start: {why}"),
                        (Some(h), None) => status_text(&h.status()),
                        (None, None) => "stopped".to_string(),
                    };
                    let row = match self.checkpoints.lock().clone() {
                        Some(t) => t.get(&[Value::Text(name.clone())])?,
                        None => None,
                    };
                    let (ckpt, src) = match row.as_deref() {
                        Some([_, Value::BigInt(c), Value::BigInt(s), ..]) => (Some(*c), Some(*s)),
                        _ => (None, None),
                    };
                    rows.push((name.clone(), status, ckpt, src));
                }
                for name in cat.sinks.keys() {
                    let job = cat.sink_jobs.get(name);
                    let status = match (job, cat.broken.get(name)) {
                        (_, Some(why)) => format!("failed to start: {why}"),
                        (Some(h), None) => status_text(&h.status()),
                        (None, None) => "stopped".to_string(),
                    };
                    let records =
                        job.map(|h| i64::try_from(h.source_records()).unwrap_or(i64::MAX));
                    rows.push((format!("sink {name}"), status, None, records));
                }
                vec![
                    text(rows.iter().map(|r| r.0.clone())),
                    text(rows.iter().map(|r| r.1.clone())),
                    Arc::new(Int64Array::from(
                        rows.iter().map(|r| r.2).collect::<Vec<_>>(),
                    )),
                    Arc::new(Int64Array::from(
                        rows.iter().map(|r| r.3).collect::<Vec<_>>(),
                    )),
                ]
            }
        };
        let schema = show_schema(what);
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
        let stream = MemoryStream::try_new(vec![batch], Arc::clone(&schema), None)?;
        Ok(Output::Rows {
            schema,
            stream: Box::pin(stream),
            command: "SELECT",
        })
    }

    /// Every view's job as the server's console shows it (`crate::status`).
    pub fn job_reports(&self) -> Vec<crate::status::JobReport> {
        let cat = self.catalog.lock();
        let checkpoints = self.checkpoints.lock().clone();
        cat.views
            .values()
            .map(|v| {
                let job = cat.jobs.get(&v.name);
                let status = match (job, cat.broken.get(&v.name)) {
                    (_, Some(why)) => format!("failed to start: {why}"),
                    (Some(h), None) => status_text(&h.status()),
                    (None, None) => "stopped".to_string(),
                };
                let plan = Self::plan(&self.engine, &cat, v).ok().map(|(plan, _)| plan);
                let checkpoint = checkpoints
                    .as_ref()
                    .and_then(|t| t.get(&[Value::Text(v.name.clone())]).ok().flatten());
                crate::status::JobReport::from_parts(crate::status::JobParts {
                    view: v,
                    source: cat.sources.get(&v.source),
                    plan: plan.as_ref(),
                    status,
                    source_records: job.map(|h| h.source_records()),
                    stats: cat.stats.get(&v.name).map(|s| s.report()),
                    graph: cat.graphs.get(&v.name),
                    checkpoint,
                })
            })
            .collect()
    }

    /// Appends each view's figures in the Prometheus text format:
    /// freshness (source row arrival to the commit that shows it), commits,
    /// rows written, source rows consumed.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let reports: Vec<(String, ViewStatsReport)> = {
            let cat = self.catalog.lock();
            cat.stats
                .iter()
                .map(|(name, s)| (name.clone(), s.report()))
                .collect()
        };
        if reports.is_empty() {
            return;
        }
        out.push_str(
            "# HELP eddy_view_freshness_seconds Time from a source row's arrival to the commit \
             that makes it visible, by materialized view.\n# TYPE eddy_view_freshness_seconds \
             summary\n",
        );
        for (v, r) in &reports {
            for (q, secs) in &r.freshness {
                let _ = writeln!(
                    out,
                    "eddy_view_freshness_seconds{{view=\"{v}\",quantile=\"{q}\"}} {secs:.6}"
                );
            }
            let _ = writeln!(
                out,
                "eddy_view_freshness_seconds_count{{view=\"{v}\"}} {}",
                r.freshness_count
            );
        }
        for (metric, help, pick) in [
            (
                "eddy_view_commits_total",
                "Checkpoint commits into the view's table.",
                (|r: &ViewStatsReport| r.commits) as fn(&ViewStatsReport) -> u64,
            ),
            (
                "eddy_view_rows_written_total",
                "Rows upserted or deleted in the view's table.",
                |r| r.rows_written,
            ),
            (
                "eddy_view_source_rows",
                "Source rows the view's last commit covers.",
                |r| r.source_rows,
            ),
            (
                "eddy_view_late_rows_total",
                "Source rows dropped because their event time was below the source's \
                 watermark, up to the view's last commit.",
                |r| r.late_rows,
            ),
            (
                "eddy_view_join_held_rows",
                "Source rows a join of two sources held at the view's last commit (a join \
                 without a time interval holds every row: its state grows with its input).",
                |r| r.held_rows,
            ),
        ] {
            let kind = if metric.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} {kind}");
            for (v, r) in &reports {
                let _ = writeln!(out, "{metric}{{view=\"{v}\"}} {}", pick(r));
            }
        }
    }

    fn run(&self, sql: &str) -> Result<Output> {
        match statements::parse(sql)? {
            StreamStatement::CreateSource { def, if_not_exists } => {
                self.create_source(def, if_not_exists)
            }
            StreamStatement::CreateView {
                def, if_not_exists, ..
            } => self.create_view(def, if_not_exists),
            StreamStatement::DropSource { name, if_exists } => self.drop_source(&name, if_exists),
            StreamStatement::DropView { name, if_exists } => self.drop_view(&name, if_exists),
            StreamStatement::CreateSink { def, if_not_exists } => {
                self.create_sink(def, if_not_exists)
            }
            StreamStatement::DropSink { name, if_exists } => self.drop_sink(&name, if_exists),
            other => self.show(&other),
        }
    }
}

/// The columns a statement returns (none for a command).
fn show_schema(what: &StreamStatement) -> SchemaRef {
    let text = |n: &str| Field::new(n, DataType::Utf8, true);
    let int = |n: &str| Field::new(n, DataType::Int64, true);
    let fields = match what {
        StreamStatement::ShowSources => vec![
            text("name"),
            text("connector"),
            text("columns"),
            text("options"),
        ],
        StreamStatement::ShowSinks => vec![
            text("name"),
            text("from"),
            text("connector"),
            text("options"),
        ],
        StreamStatement::ShowViews => vec![
            text("name"),
            text("source"),
            int("checkpoint_interval_ms"),
            text("definition"),
        ],
        StreamStatement::ShowJobs => vec![
            text("job"),
            text("status"),
            int("committed_checkpoint"),
            int("source_rows"),
        ],
        _ => Vec::new(),
    };
    Arc::new(Schema::new(fields))
}

fn text(values: impl Iterator<Item = String>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(values))
}

fn status_text(s: &JobStatus) -> String {
    match s {
        JobStatus::Created => "created".into(),
        JobStatus::Running(0) => "running".into(),
        JobStatus::Running(n) => format!("running (restart {n})"),
        JobStatus::Finished => "finished".into(),
        JobStatus::Cancelled => "cancelled".into(),
        JobStatus::Halted => "halted".into(),
        JobStatus::Failed(why) => format!("failed: {why}"),
    }
}

/// What a view's job reads.
enum JobSource {
    Datagen(Arc<DatagenSpec>),
    ChangeLog(Arc<ChangeLogSpec>),
    Kafka(Arc<KafkaSourceSpec>),
    Nexmark(Arc<NexmarkSpec>),
}

/// A sink's checkpoint interval: how often its acknowledged position is
/// recorded (a restart resends at most this much of the view's changes).
const SINK_CHECKPOINT_MS: u64 = 1000;

/// Whether `s` is a Kafka source.
fn is_kafka(s: &SourceDef) -> bool {
    s.connector == crate::kafka::CONNECTOR
}

/// Whether `s` is a Nexmark source.
fn is_nexmark(s: &SourceDef) -> bool {
    s.connector == crate::nexmark::CONNECTOR
}

/// Whether `s` is a change-log source (`CREATE SOURCE ... FROM TABLE`).
fn is_change_log(s: &SourceDef) -> bool {
    s.connector == crate::changelog::CONNECTOR
}

/// The checked datagen definition of a source.
fn datagen_spec(s: &SourceDef) -> Result<DatagenSpec> {
    if s.connector != "datagen" {
        return Err(StreamSqlError::NotSupported(format!(
            "connector '{}' is not supported (supported: datagen, kafka, nexmark)",
            s.connector
        )));
    }
    DatagenSpec::new(&s.columns, s.options.clone())
}

impl StreamStatements for StreamManager {
    fn recognises(&self, sql: &str) -> bool {
        statements::recognises(sql)
    }

    fn execute(&self, sql: &str) -> eddy_sql::Result<Output> {
        self.run(sql).map_err(SqlError::from)
    }

    fn result_schema(&self, sql: &str) -> eddy_sql::Result<SchemaRef> {
        Ok(show_schema(&statements::parse(sql)?))
    }

    fn owns_table(&self, table: &str) -> bool {
        table == CHECKPOINT_TABLE || self.catalog.lock().views.contains_key(table)
    }

    fn readers_of(&self, table: &str) -> Vec<String> {
        let cat = self.catalog.lock();
        let mut readers: Vec<String> = cat
            .sources
            .values()
            .filter(|s| is_change_log(s) && s.options.get("table").is_some_and(|t| t == table))
            .map(|s| format!("source {}", s.name))
            .collect();
        for v in cat.views.values() {
            let Ok((plan, _)) = Self::plan(&self.engine, &cat, v) else {
                continue;
            };
            let looks_up = plan
                .pre
                .iter()
                .any(|s| matches!(s, Stage::Lookup(j) if j.table == table));
            if looks_up {
                readers.push(format!("materialized view {}", v.name));
            }
        }
        readers
    }

    fn relations(&self) -> Vec<eddy_sql::StreamRelation> {
        self.catalog
            .lock()
            .sources
            .values()
            .map(|s| eddy_sql::StreamRelation {
                name: s.name.clone(),
                columns: s.columns.clone(),
            })
            .collect()
    }
}
