//! What each console page shows, gathered from the running server: one
//! serialisable struct per page, returned as JSON by `/api/<page>` and
//! rendered as HTML by `console::pages`. Every figure is read from the
//! component that owns it; none is estimated here, and what is not
//! measured is said to be unmeasured.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use eddy_sql::StreamStatements;
use parking_lot::Mutex;
use serde::Serialize;

use super::activity::{micros_since_epoch, RunningStatement, SessionInfo};
use super::login::Viewer;
use super::Console;

#[derive(Serialize)]
pub struct Overview {
    pub version: &'static str,
    pub uptime_seconds: f64,
    pub started_at_micros: i64,
    pub data_dir: String,
    pub pg_addr: String,
    pub http_addr: String,
    pub auth: &'static str,
    pub tls: bool,
    /// The console is served over HTTPS.
    pub https: bool,
    pub connections: usize,
    pub max_connections: usize,
    pub running_statements: usize,
    pub tables: usize,
    pub materialized_views: usize,
    /// Bytes of every table's files (WALs and memtables excluded).
    pub table_file_bytes: u64,
}

pub fn overview(c: &Console) -> Overview {
    let tables = c.engine.tables();
    let table_file_bytes = tables.iter().map(|t| t.storage_stats().file_bytes()).sum();
    let views = tables
        .iter()
        .filter(|t| c.streams.owns_table(&t.def().name) && t.def().name != CHECKPOINT_TABLE)
        .count();
    Overview {
        version: env!("CARGO_PKG_VERSION"),
        uptime_seconds: c.info.started.elapsed().as_secs_f64(),
        started_at_micros: micros_since_epoch(c.info.started_wall),
        data_dir: c.info.data_dir.display().to_string(),
        pg_addr: c.info.pg_addr.to_string(),
        http_addr: c.info.http_addr.to_string(),
        auth: c.info.auth,
        tls: c.info.tls,
        https: c.info.https,
        connections: c.backend.activity.session_count(),
        max_connections: c.info.max_connections,
        running_statements: c.backend.activity.running().len(),
        tables: tables
            .iter()
            .filter(|t| t.def().name != CHECKPOINT_TABLE)
            .count()
            - views,
        materialized_views: views,
        table_file_bytes,
    }
}

#[derive(Serialize)]
pub struct Statements {
    pub running: Vec<RunningStatement>,
    pub sessions: Vec<SessionInfo>,
    /// Why the cancel buttons are refused, when they are.
    pub cancel_refused: Option<String>,
    /// The role the page is shown to (none under trust authentication).
    pub viewer: Option<String>,
}

/// What `viewer` may see of the running statements and sessions: a
/// session's statement text and client address are hidden (as
/// `pg_stat_activity` hides them) where the viewer may not see that
/// session's activity, and a statement it may not cancel has no button.
pub fn statements(c: &Console, viewer: &Viewer) -> Statements {
    let roles = &c.backend.db.roles;
    let mut running = c.backend.activity.running();
    for r in &mut running {
        if !viewer.sees(roles, &r.user) {
            r.text = HIDDEN.into();
            r.client = String::new();
        }
        r.may_cancel = viewer.may_signal(roles, &r.user);
    }
    let mut sessions = c.backend.activity.sessions();
    for x in &mut sessions {
        if !viewer.sees(roles, &x.user) {
            x.client = String::new();
        }
    }
    Statements {
        running,
        sessions,
        cancel_refused: c.cancel_refusal(),
        viewer: viewer.name().map(str::to_string),
    }
}

/// What `pg_stat_activity.query` reads for a session one may not see.
const HIDDEN: &str = "<insufficient privilege>";

#[derive(Serialize)]
pub struct FileInfo {
    pub shard: u32,
    pub name: String,
    pub kind: &'static str,
    pub level: Option<u32>,
    pub rows: u64,
    pub bytes: u64,
}

#[derive(Serialize)]
pub struct TableInfo {
    pub name: String,
    /// `table`, `materialized view` or `internal` (the stream checkpoint
    /// table).
    pub kind: &'static str,
    pub orientation: String,
    pub table_group: String,
    pub shard_count: u32,
    pub columns: Vec<String>,
    pub primary_key: Vec<String>,
    /// Live rows: exact (`rows_exact`) when the table has a row tablet of
    /// at most [`EXACT_COUNT_MAX_ENTRIES`] versions, else counted from
    /// storage metadata without a scan, where versions and deletes not yet
    /// compacted count too.
    pub rows: u64,
    pub rows_exact: bool,
    pub file_bytes: u64,
    pub memtable_rows: u64,
    pub memtable_bytes: u64,
    pub files: Vec<FileInfo>,
    /// Visible LSN of each shard.
    pub shard_lsns: Vec<u64>,
}

#[derive(Serialize)]
pub struct Tables {
    pub tables: Vec<TableInfo>,
}

const CHECKPOINT_TABLE: &str = eddy_streamsql::view_op::CHECKPOINT_TABLE;

/// Tables whose row tablets hold at most this many versions get an exact
/// row count (a merge of their versions, a few milliseconds).
pub const EXACT_COUNT_MAX_ENTRIES: u64 = 200_000;

pub fn tables(c: &Console) -> Tables {
    let groups: HashMap<u32, String> = c
        .engine
        .table_groups()
        .into_iter()
        .map(|g| (g.id.0, g.name))
        .collect();
    let tables = c
        .engine
        .tables()
        .into_iter()
        .map(|t| {
            let def = t.def();
            let stats = t.storage_stats();
            let kind = if def.name == CHECKPOINT_TABLE {
                "internal"
            } else if c.streams.owns_table(&def.name) {
                "materialized view"
            } else {
                "table"
            };
            let column = |i: &usize| {
                def.columns
                    .get(*i)
                    .map(|c| c.name.clone())
                    .unwrap_or_default()
            };
            let exact = t.exact_row_count(EXACT_COUNT_MAX_ENTRIES);
            TableInfo {
                name: def.name.clone(),
                kind,
                orientation: def.orientation.to_string(),
                table_group: groups
                    .get(&def.table_group.0)
                    .cloned()
                    .unwrap_or_else(|| def.table_group.to_string()),
                shard_count: t.shard_count(),
                columns: def
                    .columns
                    .iter()
                    .map(|c| format!("{} {}", c.name, c.ty.pg_name()))
                    .collect(),
                primary_key: def.primary_key.iter().map(column).collect(),
                rows: exact.unwrap_or_else(|| t.approx_row_count()),
                rows_exact: exact.is_some(),
                file_bytes: stats.file_bytes(),
                memtable_rows: stats.shards.iter().map(|s| s.memtable_rows).sum(),
                memtable_bytes: stats.shards.iter().map(|s| s.memtable_bytes).sum(),
                shard_lsns: stats.shards.iter().map(|s| s.visible_lsn.0).collect(),
                files: stats
                    .shards
                    .iter()
                    .flat_map(|s| {
                        s.files.iter().map(|f| FileInfo {
                            shard: s.shard,
                            name: format!("{}/{}", s.dir, f.name),
                            kind: f.kind,
                            level: f.level,
                            rows: f.rows,
                            bytes: f.bytes,
                        })
                    })
                    .collect(),
            }
        })
        .collect();
    Tables { tables }
}

#[derive(Serialize)]
pub struct JobInfo {
    #[serde(flatten)]
    pub job: eddy_streamsql::status::JobReport,
    /// Source rows committed per second over `throughput_window_seconds`,
    /// from the console's samples of the committed figures (one a second);
    /// `None` until two samples exist.
    pub throughput_rows_per_second: Option<f64>,
    pub throughput_window_seconds: Option<f64>,
    /// Seconds since the last committed checkpoint.
    pub last_commit_age_seconds: Option<f64>,
}

#[derive(Serialize)]
pub struct Streams {
    pub jobs: Vec<JobInfo>,
    /// The stream runtime does not measure queue occupancy yet.
    pub back_pressure: &'static str,
}

pub const BACK_PRESSURE_UNMEASURED: &str =
    "not measured: the stream runtime does not report its queues' occupancy yet";

/// How far back throughput is computed.
const THROUGHPUT_WINDOW: Duration = Duration::from_secs(10);

/// Per view: (when, committed source rows), oldest first.
#[derive(Default)]
pub struct ThroughputSamples(Mutex<HashMap<String, VecDeque<(Instant, u64)>>>);

impl ThroughputSamples {
    /// Records the committed figures of `jobs` now; forgets dropped views.
    pub fn record(&self, jobs: &[eddy_streamsql::status::JobReport]) {
        let now = Instant::now();
        let mut all = self.0.lock();
        all.retain(|name, _| jobs.iter().any(|j| &j.view == name));
        for j in jobs {
            let samples = all.entry(j.view.clone()).or_default();
            samples.push_back((now, j.committed_source_rows));
            while samples.len() > 2
                && samples
                    .front()
                    .is_some_and(|(t, _)| now.duration_since(*t) > THROUGHPUT_WINDOW)
            {
                samples.pop_front();
            }
        }
    }

    /// (rows per second, window in seconds) of `view`.
    fn rate(&self, view: &str) -> Option<(f64, f64)> {
        let all = self.0.lock();
        let samples = all.get(view)?;
        let (t0, r0) = samples.front()?;
        let (t1, r1) = samples.back()?;
        let secs = t1.duration_since(*t0).as_secs_f64();
        (secs >= 0.5).then(|| (r1.saturating_sub(*r0) as f64 / secs, secs))
    }
}

pub fn streams(c: &Console) -> Streams {
    let reports = c.streams.job_reports();
    c.throughput.record(&reports);
    let now_micros = micros_since_epoch(std::time::SystemTime::now());
    Streams {
        jobs: reports
            .into_iter()
            .map(|job| {
                let rate = c.throughput.rate(&job.view);
                let age = job.last_checkpoint.as_ref().map(|ck| {
                    now_micros.saturating_sub(ck.committed_at_micros).max(0) as f64 / 1e6
                });
                JobInfo {
                    throughput_rows_per_second: rate.map(|r| r.0),
                    throughput_window_seconds: rate.map(|r| r.1),
                    last_commit_age_seconds: age,
                    job,
                }
            })
            .collect(),
        back_pressure: BACK_PRESSURE_UNMEASURED,
    }
}

#[derive(Serialize)]
pub struct Scheduler {
    /// Scheduling groups (issue 16) do not exist yet.
    pub scheduling_groups: Vec<()>,
    pub note: &'static str,
    pub tokio_workers: usize,
    pub tokio_alive_tasks: usize,
    pub tokio_global_queue_depth: usize,
    pub cpus: usize,
    pub connections_in_flight: i64,
}

pub const NO_SCHEDULER: &str = "No scheduler yet: all work runs on tokio's runtime. Every \
     session's statements share its worker threads, and table scans its blocking pool, with no \
     CPU shares or priorities; stream jobs run on threads of their own. Scheduling groups with \
     CPU shares and queue lengths come with the scheduler (issue 16).";

pub fn scheduler(c: &Console) -> Scheduler {
    let m = tokio::runtime::Handle::current().metrics();
    Scheduler {
        scheduling_groups: Vec::new(),
        note: NO_SCHEDULER,
        tokio_workers: m.num_workers(),
        tokio_alive_tasks: m.num_alive_tasks(),
        tokio_global_queue_depth: m.global_queue_depth(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        connections_in_flight: c.backend.metrics.connections.load(Ordering::Relaxed),
    }
}
