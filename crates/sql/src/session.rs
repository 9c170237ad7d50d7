//! One client session: settings, the DataFusion context, and the dispatch
//! of each statement to its planning path (fixed plan, DDL, DML, COPY or
//! DataFusion).
//!
//! Invariants:
//! * every statement runs in a transaction ([`crate::txn`]): the session's
//!   open block (BEGIN ... COMMIT), or an implicit one committed when the
//!   statement ends; a statement's writes go to the transaction, never
//!   straight to storage (exceptions: a plain autocommit INSERT and COPY
//!   outside a block are one atomic `Table::write` / `BulkLoader::commit`);
//! * after an error inside a block every statement but ROLLBACK (or
//!   ROLLBACK TO a savepoint) fails with 25P02;
//! * a query's snapshot is taken while it is planned (before `execute`
//!   returns), so a later statement in the same request cannot leak into it;
//! * storage calls block, so they run under [`run_blocking`] (the server
//!   runs a multi-threaded runtime).

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::compute::{cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{
    CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider, SchemaProvider,
};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    AlterTableOperation, ColumnOption, Expr, ObjectType, Query, SetExpr, Statement,
    TableConstraint, TableFactor,
};
use eddy_common::{ColumnDef, ColumnType, Orientation, Value};
use eddy_storage::{CreateTable, Engine, Table};
use futures::StreamExt;

use crate::catalog::{fault_injection_functions, pg_functions, PgCatalogSchema, PublicSchema};
use crate::copy::{self, CopyIn, CopyOut};
use crate::error::{Result, SqlError};
use crate::fastpath::{self, FastPlan};
use crate::output_names;
use crate::pgtypes::{self, column_type_from_sql, oid};
use crate::rewrite::{self, ident_name, table_name};
use crate::txn::{Isolation, Transaction};

mod add_column;
mod alter_columns;
mod checks;
mod owner;
pub(crate) use checks::CompiledChecks;
pub(crate) mod conflict_update;
mod constraint_ddl;
mod control;
mod cursors;
mod data_modifying;
mod ddl_txn;
pub(crate) mod defaults;
mod deferred_fk;
mod dml;
mod dml_scan;
mod drop_table;
mod explain_dml;
pub(crate) use drop_table::is_going_away;
mod fast;
mod fk_actions;
mod fk_alter;
mod foreign_keys;
mod gpu_explain;
mod index_ddl;
mod insert_rows;
mod listen;
mod lock_table;
mod locking;
mod merge;
pub mod prepared;
mod relation_grants;
mod returning;
mod roles_ddl;
mod schema_ddl;
mod sequence_alter;
mod sequence_ddl;
mod setting_changes;
mod settings;
mod snapshot_export;
mod sql_prepare;
mod table_rewrite;
mod temp;
mod view_alter;
mod view_ddl;

/// Session settings reported by SHOW and pg_settings, with their defaults.
pub const DEFAULT_SETTINGS: &[(&str, &str)] = &[
    ("application_name", ""),
    ("client_encoding", "UTF8"),
    ("datestyle", "ISO, MDY"),
    ("default_table_access_method", "heap"),
    ("default_tablespace", ""),
    ("default_transaction_isolation", "read committed"),
    ("default_transaction_read_only", "off"),
    ("eddy.gpu", "auto"),
    ("extra_float_digits", "1"),
    ("idle_in_transaction_session_timeout", "0"),
    ("integer_datetimes", "on"),
    ("intervalstyle", "postgres"),
    ("is_superuser", "on"),
    ("jit", "off"),
    ("lc_collate", "C"),
    ("lc_ctype", "C"),
    ("lock_timeout", "0"),
    ("max_identifier_length", "63"),
    // as compiled into PostgreSQL (pgjdbc's getImportedKeys reads it)
    ("max_index_keys", "32"),
    ("search_path", "\"$user\", public"),
    ("server_encoding", "UTF8"),
    ("server_version", "15.0"),
    ("server_version_num", "150000"),
    ("standard_conforming_strings", "on"),
    ("statement_timeout", "0"),
    ("synchronize_seqscans", "on"),
    ("timezone", "UTC"),
    ("transaction_isolation", "read committed"),
    ("transaction_read_only", "off"),
    ("xmloption", "content"),
];

/// Shared by all sessions: the storage engine and the database's name.
pub struct Database {
    pub engine: Arc<Engine>,
    pub name: String,
    /// The stream layer, where the server runs one (`crate::streams`).
    pub streams: Option<Arc<dyn crate::streams::StreamStatements>>,
    /// Sequences (`crate::sequences`), kept next to the engine's data.
    pub sequences: Arc<crate::sequences::Sequences>,
    /// Session-level advisory locks (`crate::advisory`).
    pub advisory: Arc<crate::advisory::AdvisoryLocks>,
    /// LISTEN registrations and delivery of notifications (`crate::notify`).
    pub notifications: Arc<crate::notify::NotificationHub>,
    /// The server's own files, which COPY to/from a file must not touch
    /// (`crate::server_files`).
    pub server_files: crate::server_files::ServerFiles,
    /// Roles, their passwords and memberships (`crate::roles`).
    pub roles: Arc<crate::roles::Roles>,
    /// Query memory: the server budget and where queries spill
    /// (`crate::memory`); the front end may replace it before sessions open.
    pub memory: crate::memory::MemoryBudget,
    /// Named scheduling groups for analytical queries and role defaults
    /// (`crate::scheduling`); the front end may replace it.
    pub scheduling: crate::scheduling::SchedulingGroups,
    /// Where analytical queries run (`eddy_sched`); `None`: on the calling
    /// execution context's scheduler, or plainly on tokio.
    pub scheduler: Option<Arc<eddy_sched::Scheduler>>,
    /// How many analytical statements run and wait at once
    /// (`crate::admission`); `None`: no limit. The front end sets it.
    pub admission: Option<Arc<crate::admission::Admission>>,
    /// When the database was opened, as `pg_postmaster_start_time()`
    /// reports it.
    pub started_at: String,
    /// The front end's connections, once it serves (`crate::backends`).
    pub backends: crate::backends::BackendsSlot,
    /// Snapshots transactions have exported (`crate::exported_snapshots`).
    pub exported_snapshots: Arc<crate::exported_snapshots::ExportedSnapshots>,
}

/// The setting that bounds one query's memory (`crate::memory`).
pub const MEMORY_SETTING: &str = "eddy.query_memory_limit";

impl Database {
    /// The database over `engine`, its sequences loaded from the engine's
    /// data directory.
    pub fn open(
        engine: Arc<Engine>,
        name: &str,
        streams: Option<Arc<dyn crate::streams::StreamStatements>>,
    ) -> Result<Database> {
        let sequences = Arc::new(crate::sequences::Sequences::open(
            &engine.config().data_dir,
            &|txn| engine.committed_before_open(eddy_common::TxnId(txn)),
        )?);
        // what transactions that committed just before a crash left to do
        // to sequences (`crate::sequence_commit`)
        sequences.settle_journals(
            &|txn| engine.committed_before_open(eddy_common::TxnId(txn)),
            &|t| engine.table(t).is_some(),
        )?;
        let server_files = crate::server_files::ServerFiles::new(&engine.config().data_dir);
        let roles = Arc::new(crate::roles::Roles::open(&engine.config().data_dir)?);
        let memory = crate::memory::MemoryBudget::for_machine(&engine.config().data_dir)?;
        // temporary tables never outlive their session, nor a crash
        for table in crate::temp_tables::drop_leftovers(&engine)? {
            for seq in sequences.owned_by_table(&table) {
                sequences.drop_sequence(&seq)?;
            }
        }
        Ok(Database {
            engine,
            name: name.to_string(),
            streams,
            sequences,
            advisory: Arc::default(),
            notifications: Arc::default(),
            server_files,
            roles,
            memory,
            scheduling: Default::default(),
            scheduler: None,
            admission: None,
            started_at: chrono::Utc::now()
                .format("%Y-%m-%d %H:%M:%S%.6f+00")
                .to_string(),
            backends: Arc::default(),
            exported_snapshots: Arc::default(),
        })
    }
}

/// What a statement produced.
pub enum Output {
    /// Rows, streamed; `tag` is the command word ("SELECT", "EXPLAIN", "SHOW").
    Rows {
        schema: SchemaRef,
        stream: SendableRecordBatchStream,
        /// The command tag's word(s) before the row count: "SELECT", or
        /// "INSERT 0" / "UPDATE" / "DELETE" for DML with RETURNING.
        command: &'static str,
    },
    /// A command with its complete tag ("INSERT 0 3", "CREATE TABLE").
    Command(String),
    TxnStart(String),
    TxnEnd(String),
    /// COPY ... FROM STDIN: the caller feeds data into it, then finishes it.
    CopyIn(Box<CopyIn>),
    /// COPY ... TO STDOUT.
    CopyOut(CopyOut),
    Empty,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::Rows { schema, .. } => write!(f, "Rows({} columns)", schema.fields().len()),
            Output::Command(t) => write!(f, "Command({t})"),
            Output::TxnStart(t) => write!(f, "TxnStart({t})"),
            Output::TxnEnd(t) => write!(f, "TxnEnd({t})"),
            Output::CopyIn(_) => write!(f, "CopyIn"),
            Output::CopyOut(_) => write!(f, "CopyOut"),
            Output::Empty => write!(f, "Empty"),
        }
    }
}

/// The statement kinds metrics are kept for.
pub fn statement_kind(sql: &str) -> &'static str {
    let first = sql
        .trim_start()
        .split(|c: char| c.is_whitespace() || c == '(' || c == ';')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    match first.as_str() {
        "select" | "with" | "values" | "table" => "select",
        "insert" => "insert",
        "update" => "update",
        "delete" => "delete",
        "copy" => "copy",
        "create" | "drop" | "alter" | "truncate" => "ddl",
        "begin" | "start" | "commit" | "end" | "rollback" | "abort" => "transaction",
        "explain" => "explain",
        _ => "other",
    }
}

/// A column of a result set as the protocol describes it.
#[derive(Clone, Debug)]
pub struct ResultColumn {
    pub name: String,
    pub type_oid: u32,
}

impl ResultColumn {
    /// The columns a result of this schema is described with: names as
    /// clients see them, PostgreSQL types (declared ones included).
    pub fn of_schema(schema: &Schema) -> Vec<ResultColumn> {
        schema
            .fields()
            .iter()
            .map(|f| ResultColumn {
                name: output_names::visible(f.name()).to_string(),
                type_oid: crate::pgtypes::field_oid(f),
            })
            .collect()
    }
}

/// A parsed (and, for queries, planned) statement of the extended protocol.
#[derive(Debug)]
pub struct Prepared {
    pub sql: String,
    /// None for an empty or a custom command (VACUUM, CREATE TABLE GROUP).
    pub stmt: Option<Statement>,
    pub param_types: Vec<u32>,
    pub columns: Vec<ResultColumn>,
    pub fast: Option<FastPlan>,
    /// A query planned with placeholders at Parse (`session/prepared.rs`);
    /// None where the statement takes the text path at every Execute.
    pub planned: Option<Arc<prepared::PlannedQuery>>,
    /// What `stmt`'s relation names were resolved from; None for an empty
    /// or a custom command.
    pub resolution: Option<Arc<Resolution>>,
}

/// The statement as parsed, before its relation names were resolved, and
/// the `search_path` they were resolved under. As in PostgreSQL, an
/// Execute under another `search_path` analyses the statement again
/// (`Session::execute_prepared`), and refuses to run it if that changes
/// its result columns (0A000 "cached plan must not change result type").
#[derive(Debug)]
pub struct Resolution {
    pub raw: Statement,
    pub search_path: Option<String>,
}

/// One client's session.
pub struct Session {
    db: Arc<Database>,
    ctx: SessionContext,
    /// Whether scans apply simple filters themselves (`scan_filter`); off
    /// while the GPU may run the query, so that filters stay `FilterExec`s
    /// the GPU rule can offload. Shared with the `public` schema provider.
    scan_filters: Arc<std::sync::atomic::AtomicBool>,
    /// The search path's existing schemas, for `current_schema()` and
    /// the definitions the catalog prints: set from `search_path` before
    /// each statement.
    search_path: crate::catalog::PathState,
    dml_schema: Arc<MemorySchemaProvider>,
    settings: BTreeMap<String, String>,
    user: String,
    /// The statement snapshots scans read (shared with the `public` schema).
    view: Arc<crate::provider::ReadView>,
    /// The open transaction: a BEGIN block, or the implicit transaction of
    /// the statement running now.
    txn: Option<Transaction>,
    /// The start of the statement being planned, for `statement_timestamp()`.
    statement_clock: Arc<crate::time_functions::StatementClock>,
    /// This session's identity in the advisory lock table.
    advisory_owner: u64,
    /// What this session drew from sequences (`currval`, `lastval`).
    drawn: Arc<parking_lot::Mutex<crate::sequence_functions::SessionSequences>>,
    /// What the open block dropped, for this session's catalogs.
    catalog_dropped: crate::catalog::DroppedInBlock,
    /// Open SQL cursors by name (`session/cursors.rs`).
    cursors: std::collections::HashMap<String, cursors::Cursor>,
    /// SQL-level PREPAREd statements by name (`session/sql_prepare.rs`).
    sql_prepared: std::collections::HashMap<String, Arc<Prepared>>,
    /// The roles' version `is_superuser` was last set from.
    roles_seen: u64,
    /// This session's share of the server's query memory (`crate::memory`).
    query_pool: Arc<crate::memory::QueryPool>,
    /// The id in this session's temporary tables' storage names
    /// (`crate::temp_tables`).
    temp_id: u64,
    /// `ON COMMIT DELETE ROWS` / `DROP` of this session's temporary tables,
    /// by storage name, run after each commit (`session/temp.rs`).
    temp_on_commit: parking_lot::Mutex<std::collections::HashMap<String, temp::CommitAction>>,
    /// This session's GPU rule: its decisions for the last plan go into
    /// EXPLAIN (`session/gpu_explain.rs`).
    gpu_rule: Arc<eddy_gpu::OffloadToGpu>,
    /// This session's LISTENs and queued NOTIFYs (`crate::notify`); its
    /// registrations end with it.
    notify: crate::notify::SessionNotify,
    /// What the open block did to the settings (`session/setting_changes.rs`).
    setting_changes: setting_changes::SettingChanges,
    /// Changes `set_config` queued for the session (`crate::set_config`).
    pending_settings: crate::set_config::PendingSettings,
    /// The TimeZone the statement being planned reads (`crate::zone_rules`),
    /// shared with the analyzer rule.
    zone_state: Arc<crate::zone_rules::ZoneState>,
    /// The TimeZone the client was last told of (ParameterStatus).
    reported_zone: String,
    /// The open transaction's id, for `txid_current()` (`crate::txid`).
    current_txid: Arc<crate::txid::CurrentTxid>,
    /// Settings the client's startup message gave (`application_name`...):
    /// the session's defaults, which RESET returns to.
    startup_settings: BTreeMap<String, String>,
    /// Warnings for the client, sent before the next ReadyForQuery
    /// ([`Session::take_notices`]).
    notices: Vec<Notice>,
}

/// A NoticeResponse for the client: PostgreSQL's WARNINGs where a
/// statement does nothing because it was given out of place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// `WARNING` or `NOTICE`.
    pub severity: &'static str,
    pub code: &'static str,
    pub message: String,
    pub detail: Option<String>,
}

impl Drop for Session {
    /// Session-level advisory locks and temporary tables end with the
    /// session, as in PostgreSQL. An open transaction is rolled back first
    /// (it may hold a temporary table's creation).
    fn drop(&mut self) {
        self.db.advisory.release_all(self.advisory_owner);
        if let Some(t) = self.txn.take() {
            self.discard(t);
        }
        if let Err(e) = self.drop_temp_tables() {
            tracing::warn!(error = %e, "dropping a session's temporary tables");
        }
    }
}

/// Where a session stands, as ReadyForQuery reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    Idle,
    InBlock,
    Failed,
}

/// Runs a call that may block. On the scheduler's workers it runs in place:
/// storage gives the CPU slot up around its own waits (commit, locks) and
/// the scheduler's monitor hands over the slot of a worker blocked
/// elsewhere. On tokio's workers it moves off the worker.
pub fn run_blocking<T>(f: impl FnOnce() -> T) -> T {
    if eddy_sched::on_worker() {
        return f();
    }
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl Session {
    pub fn new(db: Arc<Database>, user: &str, backend_pid: i32) -> Result<Session> {
        let mut config = SessionConfig::new()
            .with_default_catalog_and_schema(db.name.clone(), "public")
            .with_create_default_catalog_and_schema(false)
            // Eddy's own, with PostgreSQL's type names (information_schema.rs)
            .with_information_schema(false);
        // Star joins probe the fact table against dimension keys that are
        // dense integers but filtered (2.5k dates in a 69k yyyymmdd range,
        // 8k of 200k parts): a direct-indexed array of up to 4M slots (16 MB)
        // is cheaper than hashing and comparing every fact row, so allow
        // DataFusion's perfect-hash join up to that key range whatever the
        // density.
        config
            .options_mut()
            .execution
            .perfect_hash_join_small_build_threshold = 1 << 22;
        // Dimensions of a few million rows are still far smaller than the
        // fact table: build them once (CollectLeft) instead of hashing and
        // repartitioning every fact row (SSB SF10: part has 800k rows, above
        // DataFusion's 128k-row default). CollectLeft joins are also the
        // ones whose keys filter the fact scan (`join_filter`).
        let optimizer = &mut config.options_mut().optimizer;
        optimizer.hash_join_single_partition_threshold = 256 << 20;
        optimizer.hash_join_single_partition_threshold_rows = 8 << 20;
        // A sort keeps this much back to merge its spilled runs, per
        // partition: DataFusion's 10 MB default would take a small query
        // limit whole before any row is sorted (crate::memory).
        config.options_mut().execution.sort_spill_reservation_bytes = 1 << 20;
        // `1.5` is numeric, as in PostgreSQL, not float8: `price * 1.05`
        // stays exact on a numeric column.
        config.options_mut().sql_parser.parse_float_as_decimal = true;
        // `now()` and `current_timestamp` are timestamp with time zone, as in
        // PostgreSQL; instants, labelled UTC whatever the session's zone
        // (`crate::session_zone`): DataFusion types them by this
        config.options_mut().execution.time_zone = Some("+00:00".into());
        let config = eddy_gpu::session::with_gpu_options(config);
        // queries reserve from the session's share of the server budget and
        // spill under the data directory (crate::memory)
        let query_pool = db
            .memory
            .session_pool(config.options().execution.target_partitions);
        let runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
            .with_memory_pool(
                Arc::clone(&query_pool) as Arc<dyn datafusion::execution::memory_pool::MemoryPool>
            )
            .with_disk_manager_builder(
                datafusion::execution::disk_manager::DiskManagerBuilder::default().with_mode(
                    datafusion::execution::disk_manager::DiskManagerMode::Directories(vec![db
                        .memory
                        .spill_dir()
                        .to_path_buf()]),
                ),
            )
            .build_arc()?;
        let mut base = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            .with_default_features();
        // an int2vector's subscripts count from 0: planned before
        // DataFusion's list subscript (`crate::int2vector`)
        if let Some(planners) = base.expr_planners() {
            planners.insert(0, Arc::new(crate::int2vector::Int2VectorPlanner));
            // EXTRACT's numeric, before DataFusion's date_part
            planners.insert(0, Arc::new(crate::extract::ExtractPlanner));
            // a CASE operand's quoted literals typed before its operator
            planners.insert(0, Arc::new(crate::case_literals::CaseLiteralPlanner));
        }
        let zone_state = Arc::new(crate::zone_rules::ZoneState::default());
        // GPU operators read immutable scan pieces from device memory.
        eddy_gpu::resident::set_resolver(crate::resident_scan::resident_source);
        let (builder, gpu_rule) = eddy_gpu::session::with_gpu_rule_handle(
            base.with_analyzer_rules(crate::result_types::analyzer_rules_in(Arc::clone(
                &zone_state,
            )))
            // subqueries DataFusion's joins would answer wrongly are
            // taken before its decorrelation rules see them, correlated
            // ones left in filters before push_down_filter; they and
            // what is left after the optimizer run as a dependent join
            // (crate::subquery)
            .with_optimizer_rules(crate::subquery::optimizer_rules())
            .with_query_planner(Arc::new(crate::subquery::EddyQueryPlanner))
            .with_optimizer_rule(Arc::new(crate::join_order::ReorderStarJoins))
            .with_physical_optimizer_rule(Arc::new(crate::join_filter::SemiJoinReduction)),
        );
        let state = builder.build();
        let ctx = SessionContext::new_with_state(state);
        let catalog = MemoryCatalogProvider::new();
        let scan_filters = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let view = Arc::new(crate::provider::ReadView::default());
        let catalog_dropped = crate::catalog::DroppedInBlock::default();
        catalog.register_schema(
            "public",
            Arc::new(
                PublicSchema::new(
                    Arc::clone(&db.engine),
                    Arc::clone(&scan_filters),
                    Arc::clone(&view),
                )
                .with_sequences(Arc::clone(&db.sequences)),
            ),
        )?;
        catalog.register_schema(
            "information_schema",
            Arc::new(
                crate::information_schema::InformationSchema::new(Arc::clone(&db.engine), &db.name)
                    .with_dropped_in_block(Arc::clone(&catalog_dropped)),
            ),
        )?;
        catalog.register_schema(
            "pg_catalog",
            Arc::new(
                PgCatalogSchema::new(
                    Arc::clone(&db.engine),
                    Arc::clone(&db.sequences),
                    &db.name,
                    Arc::clone(&db.roles),
                )
                .with_streams(db.streams.clone())
                .with_backends(Arc::clone(&db.backends), user)
                .with_dropped_in_block(Arc::clone(&catalog_dropped)),
            ),
        )?;
        let dml_schema = Arc::new(MemorySchemaProvider::new());
        catalog.register_schema(
            "eddy_dml",
            Arc::clone(&dml_schema) as Arc<dyn SchemaProvider>,
        )?;
        ctx.register_catalog(db.name.clone(), Arc::new(catalog));
        let functions = pg_functions(
            Arc::clone(&db.engine),
            Arc::clone(&db.sequences),
            &db.name,
            user,
            backend_pid,
            Arc::clone(&db.roles),
            &db.started_at,
        );
        let drawn = Arc::new(parking_lot::Mutex::new(
            crate::sequence_functions::SessionSequences::for_caller(
                crate::sequence_functions::SequenceCaller {
                    user: user.to_string(),
                    roles: Arc::clone(&db.roles),
                    engine: Arc::clone(&db.engine),
                },
            ),
        ));
        let sequence_functions =
            crate::sequence_functions::sequence_functions(&db.sequences, &drawn);
        let search_path: crate::catalog::PathState = Arc::new(parking_lot::RwLock::new(vec![
            crate::schemas::PUBLIC.to_string(),
        ]));
        let [get_expr, get_viewdef, get_constraintdef, current_schema, current_schemas, table_is_visible] =
            crate::catalog::search_path_functions(
                Arc::clone(&search_path),
                Arc::clone(&db.engine),
                Arc::clone(&db.sequences),
                Arc::clone(&catalog_dropped),
            );
        let typeof_function = crate::catalog::pg_typeof();
        let setting_fallback = crate::catalog::current_setting_fallback();
        let advisory_owner = crate::advisory::new_owner();
        let statement_clock = crate::time_functions::StatementClock::new();
        let current_txid = Arc::new(crate::txid::CurrentTxid::default());
        // (the state's lock is released before the functions are registered)
        let time_functions = crate::time_functions::current_time_functions(
            ctx.state_ref().read().config_options(),
            &statement_clock,
        );
        let advisory_functions = crate::advisory::advisory_functions(&db.advisory, advisory_owner);
        let pending_settings = crate::set_config::PendingSettings::default();
        let set_config = crate::set_config::set_config_function(
            &pending_settings,
            settings::validate_set_config,
        );
        let notify = crate::notify::SessionNotify::new(&db.notifications, backend_pid);
        let (notify_function, listening_scalar, listening_table) = notify.functions();
        ctx.register_udtf(crate::notify::LISTENING_CHANNELS, listening_table);
        ctx.register_udtf(
            crate::keywords::GET_KEYWORDS,
            Arc::new(crate::keywords::GetKeywords),
        );
        ctx.register_udtf(
            crate::expand_array::EXPAND_ARRAY,
            Arc::new(crate::expand_array::ExpandArrayRows),
        );
        // PostgreSQL's argument types in the select list
        // (`crate::series_args`)
        if let Ok(f) = datafusion::execution::FunctionRegistry::udf(&ctx, "generate_series") {
            ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
                crate::series_args::PgSeries::new(f),
            ));
        }
        // integer arguments of any width (`crate::series_args`)
        for name in ["generate_series", "range"] {
            if let Ok(f) = ctx.table_function(name) {
                let inner = Arc::clone(f.function());
                ctx.register_udtf(
                    name,
                    Arc::new(crate::series_args::IntegerArgs {
                        inner,
                        zone: Arc::clone(&zone_state),
                    }),
                );
            }
        }
        for f in functions
            .into_iter()
            .chain(fault_injection_functions())
            .chain(sequence_functions)
            .chain(advisory_functions)
            .chain(crate::backends::signal_functions(
                &db.backends,
                &db.roles,
                user,
            ))
            .chain([
                typeof_function,
                setting_fallback,
                set_config,
                current_schema,
                current_schemas,
                table_is_visible,
                get_expr,
                get_viewdef,
                get_constraintdef,
            ])
            .chain([crate::txid::txid_function(&current_txid)])
            .chain([notify_function, listening_scalar])
            .chain(crate::uuid_type::uuid_functions())
            .chain(crate::array_type::array_functions())
            .chain(crate::datetime_in::datetime_in_functions())
            .chain(crate::zone_functions::zone_functions())
            .chain([
                crate::array_subquery::array_or_empty_udf(),
                crate::cast_names::same_udf(),
                crate::numeric_cast::numeric_cast_udf(),
            ])
            .chain(crate::interval_arith::interval_arith_functions())
            .chain([crate::similar_to::similar_escape_udf()])
            .chain([crate::expand_array::expand_array_udf()])
            .chain(crate::json_functions::json_functions())
            .chain(crate::json_build::json_build_functions())
            .chain(crate::json_more::json_more_functions())
            .chain([crate::json_more::row_constructor()])
            .chain(crate::json_paths::json_path_functions())
            .chain(crate::json_srf::srf_functions())
            .chain(crate::interval_type::interval_functions())
            .chain(crate::checked_arith::math_functions())
            .chain([crate::to_char::to_char_function()])
            .chain(crate::pg_functions::pg_functions())
            .chain(crate::text_functions::text_functions())
            .chain(crate::bytea_functions::bytea_functions())
            .chain([crate::make_interval::make_interval_function()])
            .chain([crate::at_time_zone::at_time_zone_function()])
            .chain(crate::date_functions::date_functions())
            .chain(crate::to_timestamp::to_timestamp_functions())
            .chain(time_functions)
        {
            ctx.register_udf(f);
        }
        // PostgreSQL's other names for two of DataFusion's aggregates
        for (name, alias) in [("bool_and", "every"), ("var_samp", "variance")] {
            if let Ok(f) = datafusion::execution::FunctionRegistry::udaf(&ctx, name) {
                ctx.register_udaf(f.as_ref().clone().with_aliases([alias]));
            }
        }
        for f in crate::json_aggregates::json_aggregates()
            .into_iter()
            .chain(crate::ordered_set::ordered_set_aggregates())
        {
            ctx.register_udaf(f);
        }
        datafusion::execution::FunctionRegistry::register_expr_planner(
            &mut *ctx.state_ref().write(),
            Arc::new(crate::json_functions::JsonPlanner),
        )?;
        datafusion::execution::FunctionRegistry::register_expr_planner(
            &mut *ctx.state_ref().write(),
            Arc::new(crate::interval_arith::IntervalArithPlanner),
        )?;
        let settings = DEFAULT_SETTINGS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut session = Session {
            db,
            ctx,
            scan_filters,
            search_path,
            dml_schema,
            settings,
            user: user.to_string(),
            view,
            txn: None,
            statement_clock,
            advisory_owner,
            drawn,
            catalog_dropped,
            cursors: std::collections::HashMap::new(),
            sql_prepared: std::collections::HashMap::new(),
            roles_seen: 0,
            query_pool,
            temp_id: crate::temp_tables::new_temp_id(),
            temp_on_commit: Default::default(),
            gpu_rule,
            notify,
            setting_changes: Default::default(),
            pending_settings,
            startup_settings: BTreeMap::new(),
            notices: Vec::new(),
            zone_state,
            reported_zone: "UTC".into(),
            current_txid,
        };
        session.settings.insert(
            MEMORY_SETTING.into(),
            format!("{}kB", session.query_pool.limit() / 1024),
        );
        session.reset_scheduling_group();
        session.refresh_scan_filters();
        session.show_privileges();
        Ok(session)
    }

    /// What this session's user may do beyond its tables, as the roles
    /// say now (`crate::roles`): a role altered by another session counts
    /// from its next statement.
    pub fn privileges(&self) -> crate::server_files::Privileges {
        self.db.roles.privileges_of(&self.user)
    }

    /// `is_superuser` reads the session's privilege, never a default.
    fn show_privileges(&mut self) {
        self.roles_seen = self.db.roles.version();
        let on = if self.privileges().superuser {
            "on"
        } else {
            "off"
        };
        self.settings.insert("is_superuser".into(), on.into());
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.db.engine
    }

    pub fn db(&self) -> &Arc<Database> {
        &self.db
    }

    /// The session's TimeZone (`crate::session_zone`): what its setting
    /// names, UTC if that is somehow not a zone.
    pub fn time_zone(&self) -> crate::session_zone::SessionZone {
        match self.settings.get("timezone").map(String::as_str) {
            None | Some("UTC") => crate::session_zone::SessionZone::utc(),
            Some(name) => crate::session_zone::SessionZone::parse(name).unwrap_or_default(),
        }
    }

    /// The reported settings (PostgreSQL's `GUC_REPORT`: here `TimeZone`)
    /// whose value changed since the last call, for the protocol layer to
    /// send as ParameterStatus before its ReadyForQuery, as PostgreSQL does.
    pub fn take_parameter_changes(&mut self) -> Vec<(&'static str, String)> {
        let zone = self.time_zone();
        if zone.name() == self.reported_zone {
            return Vec::new();
        }
        self.reported_zone = zone.name().to_string();
        vec![("TimeZone", self.reported_zone.clone())]
    }

    /// The warnings the statements since the last call gave, for the
    /// protocol layer to send before its ReadyForQuery.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    /// A WARNING for the client (`code` its SQLSTATE).
    pub(crate) fn warn(&mut self, code: &'static str, message: &str) {
        self.push_notice("WARNING", code, message);
    }

    /// A NOTICE for the client: what an `IF EXISTS` / `IF NOT EXISTS`
    /// statement skipped, named as the user named it.
    pub(crate) fn notice(&mut self, code: &'static str, message: &str) {
        self.push_notice("NOTICE", code, &crate::temp_tables::user_text(message));
    }

    /// A NOTICE with a DETAIL field.
    pub(crate) fn notice_with_detail(&mut self, code: &'static str, message: &str, detail: &str) {
        self.push_notice("NOTICE", code, &crate::temp_tables::user_text(message));
        if let Some(n) = self.notices.last_mut() {
            n.detail = Some(crate::temp_tables::user_text(detail));
        }
    }

    fn push_notice(&mut self, severity: &'static str, code: &'static str, message: &str) {
        // a client that never reads them cannot grow the list without end
        if self.notices.len() < 64 {
            self.notices.push(Notice {
                severity,
                code,
                message: message.to_string(),
                detail: None,
            });
        }
    }

    /// The session's `application_name` ("" when not set).
    pub fn application_name(&self) -> &str {
        self.settings
            .get("application_name")
            .map(String::as_str)
            .unwrap_or("")
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    /// Run a simple-query string: each statement in turn, stopping at the
    /// first error (which is the last element), or at a COPY FROM STDIN.
    /// An error inside a BEGIN block aborts the block, whichever step
    /// refused the statement (a read-only refusal, an unknown savepoint),
    /// as in PostgreSQL; the extended protocol's Sync does the same for
    /// its statements (`txn_status::on_sync` in the server).
    pub async fn simple_query(&mut self, sql: &str) -> Vec<Result<Output>> {
        let statements = rewrite::split_statements(sql);
        if statements.is_empty() {
            // only whitespace, `;` and comments: PostgreSQL's empty query
            return vec![Ok(Output::Empty)];
        }
        let mut out = Vec::new();
        for text in statements {
            let r = self
                .execute_text(&text, &[])
                .await
                .map(|o| crate::zone_functions::localize_output(o, &self.time_zone()))
                .map_err(|e| self.shown_error(e));
            if r.is_err() {
                self.note_error();
            }
            let stop = matches!(r, Err(_) | Ok(Output::CopyIn(_)));
            out.push(r);
            if stop {
                break;
            }
        }
        out
    }

    async fn execute_text(&mut self, text: &str, params: &[Value]) -> Result<Output> {
        self.apply_pending_settings();
        if let Some(o) = self.stream_statement(text)? {
            return Ok(o);
        }
        if let Some(o) = self.custom_command(text).await? {
            return Ok(o);
        }
        let mut stmt = rewrite::parse_statement(text)?;
        if !params.is_empty() {
            rewrite::substitute_params(&mut stmt, params)?;
        }
        self.execute_statement(stmt).await
    }

    /// Parse (and for queries plan) a statement of the extended protocol.
    pub async fn prepare(&mut self, sql: &str, client_types: &[u32]) -> Result<Prepared> {
        match self.prepare_text(sql, client_types).await {
            Ok(p) => Ok(p),
            Err(e) => Err(self.shown_error(e)),
        }
    }

    async fn prepare_text(&mut self, sql: &str, client_types: &[u32]) -> Result<Prepared> {
        let mut text = sql.trim().trim_end_matches(';').trim().to_string();
        if rewrite::is_only_comments(&text) {
            text.clear();
        }
        if let Some(streams) = self.db.streams.as_ref().filter(|s| s.recognises(&text)) {
            let columns = ResultColumn::of_schema(streams.result_schema(&text)?.as_ref());
            return Ok(Prepared {
                sql: text,
                stmt: None,
                param_types: vec![],
                columns,
                fast: None,
                planned: None,
                resolution: None,
            });
        }
        if text.is_empty() || self.is_custom_command(&text) {
            // FETCH describes its cursor's columns (MOVE and the rest: none)
            let columns = match crate::custom_commands::recognise(&text) {
                Ok(Some(crate::custom_commands::CustomCommand::Fetch {
                    cursor,
                    is_move: false,
                    ..
                })) => match self.cursors.get(&cursor) {
                    Some(c) => ResultColumn::of_schema(c.schema()),
                    None => return Err(SqlError::InvalidCursorName(cursor)),
                },
                _ => vec![],
            };
            return Ok(Prepared {
                sql: text,
                stmt: None,
                param_types: vec![],
                columns,
                fast: None,
                planned: None,
                resolution: None,
            });
        }
        let stmt = rewrite::parse_statement(&text)?;
        // as PostgreSQL's Parse: in an aborted block only what ends it
        if self.txn.as_ref().is_some_and(|t| t.aborted) && !control::allowed_when_aborted(&stmt) {
            return Err(SqlError::InFailedTransaction);
        }
        self.prepare_parsed(text, stmt, client_types).await
    }

    /// `prepare` of a parsed statement (also SQL-level PREPARE's body).
    pub(crate) async fn prepare_parsed(
        &mut self,
        text: String,
        mut stmt: Statement,
        client_types: &[u32],
    ) -> Result<Prepared> {
        let resolution = Arc::new(Resolution {
            raw: stmt.clone(),
            search_path: self.settings.get("search_path").cloned(),
        });
        self.resolve_names_unless_prepare(&mut stmt)?;
        let mut stmt = crate::dml_with::hoist(stmt)?;
        let nparams = rewrite::count_params(&mut stmt);
        let mut param_types: Vec<u32> = (0..nparams)
            .map(|i| {
                client_types
                    .get(i)
                    .copied()
                    .filter(|t| *t != 0)
                    .unwrap_or(0)
            })
            .collect();
        rewrite::declared_oid_params(&stmt, &mut param_types);
        crate::limit_params::infer_count_params(&stmt, &mut param_types);
        let fast = fastpath::recognise(&stmt, &self.db.engine, &self.ctx);
        let mut columns = Vec::new();
        let mut planned = None;
        if let Some(f) = &fast {
            for (i, t) in f.param_types().iter().enumerate() {
                if let Some(slot) = param_types.get_mut(i) {
                    if *slot == 0 {
                        *slot = *t;
                    }
                }
            }
            columns = f.columns();
        } else {
            fastpath::infer_param_types(&stmt, &self.db.engine, &mut param_types);
            let export = matches!(&stmt, Statement::Query(q)
                if crate::exported_snapshots::is_export_call(q));
            if export {
                // run by the session at Execute (`export_snapshot`)
                columns = vec![ResultColumn {
                    name: "pg_export_snapshot".into(),
                    type_oid: oid::TEXT,
                }];
            } else if crate::dml_with::runs_in_parts(&stmt) {
                columns = self
                    .describe_data_modifying_with(&stmt, &mut param_types)
                    .await?;
            } else if matches!(&stmt, Statement::Explain { statement, .. }
                if explain_dml::is_dml(statement))
            {
                // run by `explain_dml`, never through a plan made here
                columns = ResultColumn::of_schema(&explain_dml::plan_schema());
            } else if let Statement::Query(_) | Statement::Explain { .. } = &stmt {
                let described = self.describe_query(&stmt, &mut param_types).await?;
                columns = described.columns;
                planned = described.planned;
            } else if let Some((table, alias, items)) = self.returning_of(&stmt) {
                dml_scan::check_statement_returning(&stmt, &alias)?;
                columns = self.describe_returning(&table, &alias, items).await?;
            } else if let Statement::ShowVariable { variable } = &stmt {
                columns = self
                    .show_column_names(variable)
                    .into_iter()
                    .map(|name| ResultColumn {
                        name,
                        type_oid: oid::TEXT,
                    })
                    .collect();
            } else if let Statement::Execute {
                name: Some(name), ..
            } = &stmt
            {
                // SQL-level EXECUTE describes the columns of the statement
                // it runs, as PostgreSQL's Describe does (none while no
                // such statement is prepared: Execute then reports 26000)
                columns = rewrite::table_name(name)
                    .ok()
                    .and_then(|n| self.sql_prepared.get(&n))
                    .map(|p| p.columns.clone())
                    .unwrap_or_default();
            }
        }
        for t in param_types.iter_mut() {
            if *t == 0 {
                *t = oid::TEXT;
            }
        }
        Ok(Prepared {
            sql: text,
            stmt: Some(stmt),
            param_types,
            columns,
            fast,
            planned,
            resolution: Some(resolution),
        })
    }

    /// Resolves `stmt`'s relation names (temporary tables, schemas on the
    /// search path), but not those of PREPARE's statement: `prepare_parsed`
    /// resolves them and keeps the statement as written, for an EXECUTE
    /// under another search_path.
    fn resolve_names_unless_prepare(&self, stmt: &mut Statement) -> Result<()> {
        if matches!(stmt, Statement::Prepare { .. }) {
            return Ok(());
        }
        self.resolve_temp_names(stmt)
    }

    /// Execute a prepared statement with decoded parameters.
    pub async fn execute_prepared(&mut self, p: &Prepared, params: &[Value]) -> Result<Output> {
        let out = match self.execute_prepared_statement(p, params).await {
            Ok(out) => out,
            Err(e) => return Err(self.shown_error(e)),
        };
        Ok(crate::zone_functions::localize_output(
            out,
            &self.time_zone(),
        ))
    }

    async fn execute_prepared_statement(
        &mut self,
        p: &Prepared,
        params: &[Value],
    ) -> Result<Output> {
        self.apply_pending_settings();
        if params.len() != p.param_types.len() {
            return Err(SqlError::WrongParameterCount {
                expected: p.param_types.len(),
                got: params.len(),
            });
        }
        if self.txn.as_ref().is_some_and(|t| t.aborted)
            && !p.stmt.as_ref().is_some_and(control::allowed_when_aborted)
        {
            return Err(SqlError::InFailedTransaction);
        }
        if let Some(r) = p
            .resolution
            .as_ref()
            .filter(|r| r.search_path.as_ref() != self.settings.get("search_path"))
        {
            let again = self
                .prepare_parsed(p.sql.clone(), r.raw.clone(), &p.param_types)
                .await?;
            let same_columns = again.columns.len() == p.columns.len()
                && again
                    .columns
                    .iter()
                    .zip(&p.columns)
                    .all(|(a, b)| a.type_oid == b.type_oid);
            if !same_columns {
                return Err(SqlError::FeatureNotSupported(
                    "cached plan must not change result type".into(),
                ));
            }
            return Box::pin(self.execute_prepared_statement(&again, params)).await;
        }
        if let Some(
            stmt @ Statement::Drop {
                if_exists: true, ..
            },
        ) = &p.stmt
        {
            // No parameters or plan: run as a simple statement, where
            // names off the search path are skipped with a notice.
            return self.execute_statement_with(stmt.clone(), None).await;
        }
        if let Some(stmt) = &p.stmt {
            if let Err(e) = self.check_names_on_path(stmt) {
                self.note_error();
                return Err(e);
            }
            crate::streams::check_writable(self.db.streams.as_deref(), stmt)?;
        }
        if let (Some(f), Some(stmt)) = (&p.fast, &p.stmt) {
            let fast_params = fastpath::numeric_params_to_integers(f, &p.param_types, params)
                .inspect_err(|_| self.note_error())?;
            if let Some(fast_params) = fast_params {
                if let Some(out) = self.execute_fast(f, stmt, &fast_params)? {
                    return Ok(out);
                }
            }
        }
        match &p.stmt {
            None if p.sql.is_empty() => Ok(Output::Empty),
            None => {
                if let Some(o) = self.stream_statement(&p.sql)? {
                    return Ok(o);
                }
                match self.custom_command(&p.sql).await? {
                    Some(o) => Ok(o),
                    None => Ok(Output::Empty),
                }
            }
            Some(stmt) => {
                if let Some(planned) = &p.planned {
                    if let Some(plan) = planned.bind(params, &self.time_zone())? {
                        let bound = prepared::BoundQuery {
                            plan,
                            params: params.to_vec(),
                            param_types: p.param_types.clone(),
                        };
                        return self.execute_statement_with(stmt.clone(), Some(bound)).await;
                    }
                }
                let mut stmt = stmt.clone();
                if p.planned.is_some() {
                    // (the server binds NUMERIC parameters itself for
                    // statements without a plan)
                    rewrite::bind_numeric_params(&mut stmt, params, &p.param_types);
                }
                if !params.is_empty() {
                    rewrite::substitute_typed_params(&mut stmt, params, &p.param_types)?;
                }
                self.execute_statement(stmt).await
            }
        }
    }

    /// Runs a fixed plan: in autocommit as one locked single-row write or a
    /// lookup at one cut; inside a block through the transaction. `None`:
    /// the general path must run the statement.
    fn execute_fast(
        &mut self,
        plan: &FastPlan,
        stmt: &Statement,
        params: &[Value],
    ) -> Result<Option<Output>> {
        let read_only = match &self.txn {
            Some(t) => t.read_only,
            None => self.default_modes()?.1,
        };
        if let Some(what) = control::read_only_refusal(stmt).filter(|_| read_only) {
            self.note_error();
            return Err(SqlError::ReadOnlyTransaction(what));
        }
        // foreign keys are checked on the general path only, and a write
        // to a temporary table with an ON COMMIT action commits there
        if self.fixed_plan_declines(plan)
            || self.temp_commit_action_declines(plan)
            || (plan.binds_datetime() && !self.time_zone().is_utc())
        {
            return Ok(None);
        }
        if let Err(e) = self
            .wait_for_table_ddl(stmt)
            .and_then(|()| self.check_access(stmt))
        {
            self.note_error();
            return Err(e);
        }
        if self.txn.is_some() {
            let r = self.execute_fast_in_txn(plan, params);
            if r.is_err() {
                self.note_error();
            }
            return r;
        }
        let engine = Arc::clone(&self.db.engine);
        if !matches!(plan, FastPlan::Get { .. } | FastPlan::Delete { .. })
            && plan
                .written_table()
                .and_then(|n| engine.table(n))
                .is_some_and(|t| t.def().indexes.iter().any(|i| i.unique))
        {
            // an autocommit write of UNIQUE values locks them in a
            // transaction (`Transaction::put`); the fixed plan writes
            // straight to storage
            return Ok(None);
        }
        let timeout = self.lock_timeout()?;
        if let FastPlan::Get { .. } = plan {
            // A key lookup never waits for a lock and reads memtables or a
            // few file blocks: it runs on the protocol task, without the
            // hand-off of the runtime's worker that a blocking section costs.
            return fastpath::execute(plan, &engine, params).map(Some);
        }
        run_blocking(|| fastpath::execute_locked(plan, &engine, params, timeout)).map(Some)
    }

    /// Hands a streaming statement to the stream layer. CREATE and DROP
    /// have effects outside any transaction (a job starts or stops), so a
    /// transaction block refuses them, as PostgreSQL refuses `CREATE
    /// DATABASE` in one; SHOW is allowed there, as in PostgreSQL.
    fn stream_statement(&mut self, text: &str) -> Result<Option<Output>> {
        let Some(streams) = self.db.streams.clone() else {
            return Ok(None);
        };
        if !streams.recognises(text) {
            return Ok(None);
        }
        if self.txn.as_ref().is_some_and(|t| t.aborted) {
            return Err(SqlError::InFailedTransaction);
        }
        // SHOW (a statement with result columns) only reads the catalog
        let read_only = !streams.result_schema(text)?.fields().is_empty();
        if !read_only {
            self.refuse_in_block("a streaming statement")?;
            self.check_stream_ddl()?;
        }
        run_blocking(|| streams.execute(text)).map(Some)
    }

    fn is_custom_command(&self, text: &str) -> bool {
        matches!(
            crate::custom_commands::recognise(text),
            Ok(Some(_)) | Err(_)
        )
    }

    /// RESET ALL: every setting back to its default.
    fn reset_all_settings(&mut self) {
        self.settings = DEFAULT_SETTINGS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain(self.startup_settings.clone())
            .collect();
        self.reset_memory_limit();
        self.reset_scheduling_group();
        self.show_privileges();
    }

    /// The settings of the client's startup message, as the session's
    /// defaults (what RESET returns to), given as parameters or as
    /// `-c name=value` in `options` (libpq's PGOPTIONS): every setting SET
    /// accepts but `eddy.*`, applied as SET applies it, so a
    /// `statement_timeout` or `default_transaction_isolation` given at
    /// startup is honoured. The server checked them with
    /// [`check_startup_parameters`] before the session began (a setting
    /// that fails that check ended the connection), so none fails here.
    pub fn apply_startup_parameters<'a>(
        &mut self,
        params: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) {
        for (name, value) in startup_settings_of(params) {
            let checked = control::startup_setting_value(&name, &value)
                .and_then(|v| self.check_transaction_setting(&name, v));
            match checked {
                Ok(v) => {
                    self.startup_settings.insert(name.clone(), v.clone());
                    self.settings.insert(name, v);
                }
                Err(e) => tracing::warn!(%name, error = %e, "startup setting not applied"),
            }
        }
        // the startup message's ParameterStatus named this zone already
        self.reported_zone = self.time_zone().name().to_string();
    }

    /// RESET name (`None`: RESET ALL).
    fn reset(&mut self, name: Option<String>) -> Result<()> {
        match name {
            None => self.reset_all_settings(),
            Some(name) if name == MEMORY_SETTING => self.reset_memory_limit(),
            Some(name) if name == crate::scheduling::SCHEDULING_SETTING => {
                self.reset_scheduling_group()
            }
            Some(name) => {
                if let Some(v) = self.startup_settings.get(&name).cloned() {
                    self.settings.insert(name, v);
                } else if let Some((_, v)) = DEFAULT_SETTINGS.iter().find(|(k, _)| *k == name) {
                    self.apply_gpu_setting(&name, v)?;
                    self.settings.insert(name, v.to_string());
                    self.show_privileges();
                }
            }
        }
        Ok(())
    }

    /// `eddy.scheduling_group` back to the role's group.
    fn reset_scheduling_group(&mut self) {
        let group = self.db.scheduling.group_of_role(&self.user).to_string();
        self.settings
            .insert(crate::scheduling::SCHEDULING_SETTING.into(), group);
    }

    /// The group this session's analytical queries run in, and its share.
    fn scheduling_group(&self) -> (String, u32) {
        let name = self
            .settings
            .get(crate::scheduling::SCHEDULING_SETTING)
            .cloned()
            .unwrap_or_else(|| crate::scheduling::DEFAULT_GROUP.to_string());
        // a group removed from the configuration since: the default's share
        let share = self.db.scheduling.share(&name).unwrap_or(1);
        (name, share)
    }

    /// Runs a physical plan in a scheduling group of its own
    /// (`crate::scheduling`).
    pub(crate) fn execute_plan(
        &self,
        physical: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    ) -> Result<SendableRecordBatchStream> {
        let (group, share) = self.scheduling_group();
        crate::scheduling::execute_in_query_group(
            physical,
            self.ctx.task_ctx(),
            self.db.scheduler.as_deref(),
            &group,
            share,
            self.db.admission.as_ref(),
        )
    }

    /// `eddy.query_memory_limit` back to the server's default.
    fn reset_memory_limit(&mut self) {
        let bytes = self.db.memory.default_query_limit();
        self.query_pool.set_limit(bytes);
        self.settings
            .insert(MEMORY_SETTING.into(), format!("{}kB", bytes / 1024));
    }

    /// Commands Eddy reads from their tokens (`crate::custom_commands`).
    async fn custom_command(&mut self, text: &str) -> Result<Option<Output>> {
        let result = self.run_custom_command(text).await;
        if result.is_err() {
            // inside a block, the error aborts it, as any statement's does
            self.note_error();
        }
        result
    }

    async fn run_custom_command(&mut self, text: &str) -> Result<Option<Output>> {
        use crate::custom_commands::CustomCommand as C;
        let Some(cmd) = crate::custom_commands::recognise(text)? else {
            return Ok(None);
        };
        if self.txn.as_ref().is_some_and(|t| t.aborted) {
            return Err(SqlError::InFailedTransaction);
        }
        let engine = Arc::clone(&self.db.engine);
        let out = match cmd {
            C::Vacuum { table } => {
                match &table {
                    Some(t) => self.check_owner_named(t)?,
                    None => self.require_superuser("VACUUM every table")?,
                }
                tracing::info!(table = ?table, "VACUUM: full compaction");
                if let Some(t) = &table {
                    if engine.table(t).is_none() {
                        return Err(SqlError::UndefinedTable(t.clone()));
                    }
                }
                run_blocking(|| engine.compact(table.as_deref()))?;
                Output::Command("VACUUM".into())
            }
            C::Analyze => Output::Command("ANALYZE".into()),
            C::Checkpoint => {
                self.require_superuser("execute CHECKPOINT")?;
                run_blocking(|| engine.flush())?;
                Output::Command("CHECKPOINT".into())
            }
            C::Discard(what) => {
                match what.as_str() {
                    // PostgreSQL's DISCARD ALL: every piece of session state
                    // (pgbouncer sends it between clients)
                    "ALL" => {
                        self.refuse_in_block("DISCARD ALL")?;
                        self.close_cursor(None)?;
                        self.deallocate(None)?;
                        self.reset_all_settings();
                        self.db.advisory.release_all(self.advisory_owner);
                        self.notify.unlisten_now();
                        *self.drawn.lock() = Default::default();
                        self.drop_temp_tables()?;
                    }
                    "SEQUENCES" => *self.drawn.lock() = Default::default(),
                    // no plan cache: nothing to drop
                    "PLANS" => {}
                    "TEMP" | "TEMPORARY" => self.drop_temp_tables()?,
                    other => {
                        return Err(SqlError::Syntax(format!(
                            "DISCARD {other}: expected ALL, PLANS, SEQUENCES or TEMP"
                        )))
                    }
                }
                Output::Command(format!("DISCARD {what}"))
            }
            C::Deallocate(name) => self.deallocate(name.as_deref())?,
            C::Reset(name) => {
                // inside a block, undone by ROLLBACK as a SET is
                let before = self.settings.clone();
                let r = self.reset(name);
                self.note_settings_changed(&before);
                r?;
                Output::Command("RESET".into())
            }
            C::CloseAll => {
                self.close_cursor(None)?;
                Output::Command("CLOSE CURSOR ALL".into())
            }
            C::Close(name) => self.close_cursor(Some(&name))?,
            C::SetConstraints { names, deferred } => self.set_constraints(names, deferred)?,
            C::Fetch {
                cursor,
                direction,
                is_move,
            } => self.fetch(&cursor, direction, is_move).await?,
            C::GrantRole {
                roles,
                members,
                revoke,
            } => self.grant_roles(&roles, &members, revoke)?,
            C::Alter(cmd) => self.alter_command(*cmd).await?,
            C::CreateTableGroup { name, shard_count } => {
                self.require_superuser("create table groups")?;
                let shards = shard_count.unwrap_or(engine.config().default_shard_count);
                run_blocking(|| engine.create_table_group(&name, shards))?;
                Output::Command("CREATE TABLE GROUP".into())
            }
        };
        Ok(Some(out))
    }

    /// PostgreSQL's result names and idioms on a statement about to be
    /// planned (`output_names`, `rewrite::pg_compat`).
    /// Views are expanded first, so their queries get the same treatment.
    pub(crate) fn compat(&self, stmt: &mut Statement) -> Result<()> {
        rewrite::check_columnless_subqueries(stmt)?;
        self.expand_views(stmt)?;
        let engine = Arc::clone(&self.db.engine);
        crate::notify::rewrite_listening_channels(stmt);
        crate::group_by_key::add_dependent_columns(stmt, &|n| {
            engine.table(n).map(|t| Arc::clone(t.def()))
        });
        output_names::name_columns(stmt);
        rewrite::pg_compat(stmt, &|n| {
            engine.table(n).map(|t| crate::catalog::table_oid(&t))
        });
        // (after pg_compat, which writes timestamptz literals as calls)
        crate::zone_rules::bind_literal_zone(stmt, &self.time_zone());
        // (after the rewrites that turn casts into Eddy's functions)
        crate::cast_names::separate_cast_names(stmt);
        self.bind_current_settings(stmt);
        Ok(())
    }

    /// `current_setting('name' [, missing_ok])` with a constant name is the
    /// setting's value when the statement starts (settings cannot change
    /// while it runs): replaced on the AST by that value. What is left (an
    /// unknown name, a computed one) reaches the `current_setting`
    /// function, which refuses it (`catalog::current_setting_fallback`).
    fn bind_current_settings(&self, stmt: &mut Statement) {
        use datafusion::sql::sqlparser::ast::{
            FunctionArg, FunctionArgExpr, FunctionArguments, Value as SqlValue,
        };
        let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(stmt, |e| {
            let Expr::Function(f) = e else {
                return std::ops::ControlFlow::<()>::Continue(());
            };
            if !f.name.to_string().eq_ignore_ascii_case("current_setting") {
                return std::ops::ControlFlow::Continue(());
            }
            let FunctionArguments::List(list) = &f.args else {
                return std::ops::ControlFlow::Continue(());
            };
            let name = match list.args.first() {
                Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => {
                    match &v.value {
                        SqlValue::SingleQuotedString(n) => n.to_ascii_lowercase(),
                        _ => return std::ops::ControlFlow::Continue(()),
                    }
                }
                _ => return std::ops::ControlFlow::Continue(()),
            };
            let value = self
                .transaction_setting(&name)
                .or_else(|| self.settings.get(&name).cloned());
            if let Some(v) = value {
                *e = Expr::Value(SqlValue::SingleQuotedString(v).into());
            }
            std::ops::ControlFlow::Continue(())
        });
    }

    /// Whether the session's search path names `public`; also sets the
    /// path `current_schema()` and the catalog's definitions report.
    fn public_on_path(&self) -> bool {
        let path = self.effective_path();
        let on = path.iter().any(|p| p == crate::schemas::PUBLIC);
        if *self.search_path.read() != path {
            *self.search_path.write() = path;
        }
        on
    }

    /// Skips, with a notice each, the names of a `DROP ... IF EXISTS` that
    /// resolve nowhere under a search path without `public`
    /// (`search_path::skip_unresolved_drops`); the command's tag when no
    /// name is left to drop.
    fn skip_drops_off_path(&mut self, stmt: &mut Statement) -> Option<Output> {
        if !matches!(
            stmt,
            Statement::Drop {
                if_exists: true,
                ..
            }
        ) || self.public_on_path()
        {
            return None;
        }
        let notices = crate::search_path::skip_unresolved_drops(
            stmt,
            &crate::catalog::is_catalog_relation,
            &|n| self.is_schema_storage_name(n),
        );
        for n in &notices {
            self.notice("00000", n);
        }
        match stmt {
            Statement::Drop {
                object_type, names, ..
            } if names.is_empty() => Some(Output::Command(format!("DROP {object_type}"))),
            _ => None,
        }
    }

    /// Refuses the unqualified names of `stmt` that resolve nowhere under
    /// a search path without `public` (`crate::search_path`).
    fn check_names_on_path(&self, stmt: &Statement) -> Result<()> {
        if self.public_on_path() {
            return Ok(());
        }
        crate::search_path::check_statement(stmt, &crate::catalog::is_catalog_relation, &|n| {
            self.is_schema_storage_name(n)
        })
    }

    /// Runs one statement in the open transaction block, or in an implicit
    /// transaction of its own that commits when it succeeds.
    async fn execute_statement(&mut self, stmt: Statement) -> Result<Output> {
        self.execute_statement_with(stmt, None).await
    }

    /// [`Session::execute_statement`] of a prepared query whose plan has
    /// its parameters bound (`bound`), or of any statement (`None`).
    async fn execute_statement_with(
        &mut self,
        mut stmt: Statement,
        bound: Option<prepared::BoundQuery>,
    ) -> Result<Output> {
        self.resolve_names_unless_prepare(&mut stmt)?;
        let stmt = crate::dml_with::hoist(stmt)?;
        // A statement past the fixed plans is planned and run as a query of
        // the session's scheduling group: the connection's context moves to
        // a group of its own for the statement, so planning is not charged
        // to (or scheduled as) serving work, and the plan runs in the same
        // group (`crate::scheduling`).
        // (recognised once: the fixed plan, if any, is run below)
        let fixed = bound
            .is_none()
            .then(|| fastpath::recognise(&stmt, &self.db.engine, &self.ctx))
            .flatten();
        // only a context can move; off the scheduler the plan gets its
        // group when it is executed (`execute_plan`)
        let group = if fixed.is_none() && eddy_sched::on_worker() {
            let (name, share) = self.scheduling_group();
            crate::scheduling::new_group(self.db.scheduler.as_deref(), &name, share)
        } else {
            None
        };
        let _in_group = group.as_ref().and_then(eddy_sched::switch_context_group);
        self.execute_statement_in_group(stmt, bound, fixed).await
    }

    async fn execute_statement_in_group(
        &mut self,
        mut stmt: Statement,
        bound: Option<prepared::BoundQuery>,
        fixed: Option<FastPlan>,
    ) -> Result<Output> {
        if self.roles_seen != self.db.roles.version() {
            self.show_privileges();
        }
        if control::is_transaction_control(&stmt) {
            return self.transaction_control(stmt);
        }
        if self.txn.as_ref().is_some_and(|t| t.aborted) {
            return Err(SqlError::InFailedTransaction);
        }
        if crate::dml_with::runs_in_parts(&stmt) {
            return self.run_data_modifying_with(stmt).await;
        }
        if let Some(out) = self.skip_drops_off_path(&mut stmt) {
            return Ok(out);
        }
        if let Err(e) = self.check_names_on_path(&stmt) {
            self.note_error();
            return Err(e);
        }
        crate::streams::check_writable(self.db.streams.as_deref(), &stmt)?;
        // (execute_fast waits for a definition change itself)
        if let Some(plan) = &fixed {
            if let Some(out) = self.execute_fast(plan, &stmt, &[])? {
                return Ok(out);
            }
        }
        if let Err(e) = self
            .wait_for_table_ddl(&stmt)
            .and_then(|()| self.check_access(&stmt))
        {
            self.note_error();
            return Err(e);
        }
        if let Some(t) = &self.txn {
            if let Some(what) = control::read_only_refusal(&stmt).filter(|_| t.read_only) {
                return Err(SqlError::ReadOnlyTransaction(what));
            }
            let r = self.dispatch(stmt, bound).await;
            if r.is_err() {
                self.note_error();
            }
            return r;
        }
        let (isolation, read_only) = self.default_modes()?;
        if let Some(what) = control::read_only_refusal(&stmt).filter(|_| read_only) {
            return Err(SqlError::ReadOnlyTransaction(what));
        }
        self.open_implicit(isolation, read_only)?;
        let r = match self.dispatch(stmt, bound).await {
            // the statement's deferred foreign-key checks: at its end
            Ok(out) => self.run_deferred_checks(None).map(|()| out),
            Err(e) => Err(e),
        };
        self.close_implicit(r)
    }

    /// Opens the implicit transaction of one statement.
    fn open_implicit(&mut self, isolation: Isolation, read_only: bool) -> Result<()> {
        let mut txn = Transaction::new(Arc::clone(&self.db.engine), isolation, read_only, false);
        txn.lock_timeout = self.lock_timeout()?;
        self.txn = Some(txn);
        Ok(())
    }

    /// Ends the implicit transaction of a statement that gave `r`: commits
    /// it when the statement succeeded, discards it otherwise.
    fn close_implicit(&mut self, r: Result<Output>) -> Result<Output> {
        match (r, self.txn.take()) {
            (Ok(out), Some(txn)) => self.commit_transaction(txn).map(|()| out),
            (r, Some(txn)) => {
                self.discard(txn);
                r
            }
            (r, None) => r,
        }
    }

    async fn dispatch(
        &mut self,
        mut stmt: Statement,
        bound: Option<prepared::BoundQuery>,
    ) -> Result<Output> {
        if let Some(bound) = bound {
            self.install_view(&stmt)?;
            return match self.run_bound(bound.plan.clone()).await? {
                Some(out) => Ok(out),
                None => self.run_replanned(&stmt, &bound).await,
            };
        }
        // every path below plans with the views replaced by their queries
        self.expand_views(&mut stmt)?;
        match stmt {
            Statement::Query(ref q) if crate::exported_snapshots::is_export_call(q) => {
                self.export_snapshot()
            }
            Statement::Query(ref q) => {
                if !q.locks.is_empty() {
                    return self.select_locking(q.as_ref().clone()).await;
                }
                self.install_view(&stmt)?;
                self.compat(&mut stmt)?;
                self.run_query(stmt).await
            }
            Statement::Explain { ref statement, .. } if explain_dml::is_dml(statement) => {
                self.explain_dml(stmt).await
            }
            Statement::Explain { .. } => {
                self.install_view(&stmt)?;
                self.compat(&mut stmt)?;
                let out = self.run_query(stmt).await?;
                self.with_gpu_decisions(out)
            }
            Statement::Insert(ins) => self.insert(ins).await,
            Statement::Update(upd) => self.update(upd).await,
            Statement::Delete(del) => self.delete(del).await,
            Statement::Merge(m) => self.merge(m).await,
            Statement::CreateTable(ct) => self.create_table(ct).await,
            Statement::CreateView(cv) => self.create_view(cv).await,
            Statement::AlterSchema(ref alter) => {
                if !self.alter_user_schema(alter)? {
                    self.alter_schema(alter)?;
                }
                Ok(Output::Command("ALTER SCHEMA".into()))
            }
            Statement::CreateSchema {
                ref schema_name,
                if_not_exists,
                ref with,
                ref options,
                ref default_collate_spec,
                ref clone,
            } => self.create_schema(
                schema_name,
                if_not_exists,
                with.is_some()
                    || options.is_some()
                    || default_collate_spec.is_some()
                    || clone.is_some(),
            ),
            Statement::Declare { stmts } => self.declare(stmts).await,
            Statement::Comment {
                object_type,
                ref object_name,
                ref comment,
                if_exists,
            } => self.comment_on(object_type, object_name, comment.clone(), if_exists),
            Statement::CreateSequence {
                temporary,
                if_not_exists,
                ref name,
                ref data_type,
                ref sequence_options,
                ref owned_by,
            } => self.create_sequence(
                if_not_exists,
                temporary,
                name,
                data_type.as_ref(),
                sequence_options,
                owned_by.as_ref(),
            ),
            Statement::Drop {
                object_type,
                if_exists,
                names,
                cascade,
                ..
            } => {
                if object_type == ObjectType::Sequence {
                    return self.drop_sequence_statement(&names, if_exists);
                }
                if matches!(object_type, ObjectType::Role | ObjectType::User) {
                    return self.drop_roles(&names, if_exists);
                }
                if object_type == ObjectType::Index {
                    return self.drop_indexes(&names, if_exists);
                }
                if object_type == ObjectType::View {
                    return self.drop_views(&names, if_exists, cascade);
                }
                if object_type == ObjectType::Schema {
                    return self.drop_schemas(&names, if_exists, cascade);
                }
                if object_type != ObjectType::Table {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "DROP {object_type} is not supported"
                    )));
                }
                self.drop_tables(names, if_exists, cascade)
            }
            Statement::CreateRole(cr) => self.create_role(cr, false),
            Statement::AlterRole { name, operation } => self.alter_role(&name, operation),
            Statement::Grant(g) => {
                if g.with_grant_option || g.as_grantor.is_some() || g.granted_by.is_some() {
                    return Err(SqlError::FeatureNotSupported(
                        "WITH GRANT OPTION and GRANTED BY are not supported".into(),
                    ));
                }
                self.grant_privileges(&g.privileges, g.objects.as_ref(), &g.grantees, false)
            }
            Statement::Revoke(r) => {
                if r.granted_by.is_some() {
                    return Err(SqlError::FeatureNotSupported(
                        "GRANTED BY is not supported".into(),
                    ));
                }
                self.grant_privileges(&r.privileges, r.objects.as_ref(), &r.grantees, true)
            }
            Statement::Truncate(t) => {
                let mut tables = Vec::new();
                for target in &t.table_names {
                    tables.push(self.table(&table_name(&target.name)?)?);
                }
                self.truncate(tables)
            }
            Statement::AlterTable(at) => self.alter_table(at).await,
            Statement::Lock(lock) => self.lock_tables(lock),
            Statement::Copy {
                source,
                to,
                target,
                options,
                legacy_options,
                ..
            } => {
                let session_ctx = self.ctx.clone();
                copy::start(
                    self,
                    &session_ctx,
                    source,
                    to,
                    target,
                    options,
                    legacy_options,
                )
                .await
            }
            Statement::Set(set) => self.set(set),
            Statement::ShowVariable { variable } => self.show(&variable),
            Statement::Discard { .. } => Ok(Output::Command("DISCARD ALL".into())),
            Statement::Deallocate { name, .. } => self.deallocate(Some(&ident_name(&name))),
            Statement::Prepare {
                name,
                data_types,
                statement,
            } => self.sql_prepare(&name, &data_types, *statement).await,
            Statement::Execute {
                name: Some(name),
                parameters,
                immediate: false,
                ref into,
                ref using,
                ..
            } if into.is_empty() && using.is_empty() => self.sql_execute(&name, &parameters).await,
            Statement::Analyze(_) => Ok(Output::Command("ANALYZE".into())),
            Statement::Vacuum(_) => {
                self.refuse_in_block("VACUUM")?;
                let engine = Arc::clone(&self.db.engine);
                run_blocking(|| engine.compact(None))?;
                Ok(Output::Command("VACUUM".into()))
            }
            Statement::CreateIndex(ci) => self.create_index(ci),
            Statement::LISTEN { .. } | Statement::UNLISTEN { .. } | Statement::NOTIFY { .. } => {
                self.listen_notify(stmt)
            }
            other => Err(SqlError::FeatureNotSupported(format!(
                "statement not supported: {}",
                other.to_string().chars().take(60).collect::<String>()
            ))),
        }
    }

    // ---- queries -----------------------------------------------------------

    /// Plan and start a query through DataFusion. The snapshot is taken here.
    pub async fn run_query(&self, stmt: Statement) -> Result<Output> {
        let state = self.planning_state();
        let plan = match state
            .statement_to_plan(DFStatement::Statement(Box::new(stmt.clone())))
            .await
        {
            Ok(plan) => plan,
            Err(e) => return Err(self.planning_error(&stmt, e)),
        };
        self.run_plan(plan).await
    }

    /// The error of a statement the planner refused: PostgreSQL's 42P01
    /// for a relation it names that does not exist (`relation "x" does
    /// not exist`, the name as written), 42803 where it read a column
    /// outside its GROUP BY (`crate::grouping_error`), else the planner's.
    pub(crate) fn planning_error(
        &self,
        stmt: &Statement,
        e: datafusion::error::DataFusionError,
    ) -> SqlError {
        if matches!(e.find_root(), datafusion::error::DataFusionError::Plan(_)) {
            if let Some(name) = self.missing_relation(stmt) {
                return SqlError::UndefinedRelation(format!("relation \"{name}\" does not exist"));
            }
            let engine = &self.db.engine;
            let table = |n: &str| engine.table(n).map(|t| Arc::clone(t.def()));
            if let Some(message) = crate::grouping_error::ungrouped_column(stmt, &table) {
                return SqlError::Grouping(message);
            }
        }
        e.into()
    }

    /// A relation `stmt` names (CTEs and table functions left out) that no
    /// schema holds, as the statement writes it (by name order where
    /// several are missing).
    fn missing_relation(&self, stmt: &Statement) -> Option<String> {
        let state = self.ctx.state();
        let statement = DFStatement::Statement(Box::new(stmt.clone()));
        let references = state.resolve_table_references(&statement).ok()?;
        references.into_iter().find_map(|reference| {
            if reference.schema().is_none()
                && state.table_functions().contains_key(reference.table())
            {
                return None;
            }
            let exists = state
                .schema_for_ref(reference.clone())
                .is_ok_and(|schema| schema.table_exist(reference.table()));
            (!exists).then(|| reference.to_string())
        })
    }

    /// Plans `stmt` (made PostgreSQL-compatible first) while `table` is
    /// `eddy_dml.<name>`: rows a statement holds in memory (RETURNING,
    /// CHECK) read as a table. The name is gone again when this returns.
    pub(crate) async fn plan_with_table(
        &self,
        name: &str,
        table: Arc<dyn datafusion::catalog::TableProvider>,
        mut stmt: Statement,
    ) -> Result<datafusion::logical_expr::LogicalPlan> {
        self.compat(&mut stmt)?;
        self.dml_schema.register_table(name.to_string(), table)?;
        let plan = self
            .planning_state()
            .statement_to_plan(DFStatement::Statement(Box::new(stmt)))
            .await;
        let _ = self.dml_schema.deregister_table(name);
        Ok(plan?)
    }

    /// [`Session::plan_with_table`], then runs the plan (which holds the
    /// table's rows once made, so the name can go before it runs).
    pub(crate) async fn run_with_table(
        &self,
        name: &str,
        table: Arc<dyn datafusion::catalog::TableProvider>,
        stmt: Statement,
    ) -> Result<Output> {
        let plan = self.plan_with_table(name, table, stmt).await?;
        self.run_plan(plan).await
    }

    /// DataFusion's state for planning one statement. Inside a transaction
    /// block, `now()`, `CURRENT_TIMESTAMP`, `CURRENT_DATE` and the other
    /// start-time functions give the block's start, as PostgreSQL's do;
    /// outside one, DataFusion's own mark (the statement's start) stands.
    pub(crate) fn planning_state(&self) -> datafusion::execution::SessionState {
        // the zone the statement's conversions are planned with
        // (`crate::zone_rules`)
        self.zone_state.set(self.time_zone());
        self.current_txid.set(self.txn.as_ref().map(|t| t.id.0));
        self.publish_block_catalog();
        let mut state = self.ctx.state();
        if let Some(start) = state.execution_props().query_execution_start_time {
            self.statement_clock.set(start);
        }
        if let Some(txn) = self.txn.as_ref().filter(|t| t.explicit) {
            state.execution_props_mut().query_execution_start_time =
                chrono::DateTime::from_timestamp_micros(txn.started_at_micros);
        }
        state
    }

    /// Executes a logical plan as a stream of batches.
    pub async fn run_plan(&self, plan: datafusion::logical_expr::LogicalPlan) -> Result<Output> {
        use datafusion::logical_expr::LogicalPlan;
        let df = match plan {
            // DDL and SET-like statements keep DataFusion's own handling.
            LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) | LogicalPlan::Copy(_) => {
                self.ctx.execute_logical_plan(plan).await?
            }
            plan => datafusion::dataframe::DataFrame::new(self.planning_state(), plan),
        };
        let physical = df.create_physical_plan().await?;
        let schema = physical.schema();
        let stream = self.execute_plan(physical)?;
        Ok(Output::Rows {
            schema,
            stream,
            command: "SELECT",
        })
    }

    /// Plan a SELECT written as text and collect its batches.
    pub async fn query_batches(&self, sql: &str) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let mut stmt = rewrite::parse_statement(sql)?;
        self.compat(&mut stmt)?;
        collect_rows(self.run_query(stmt).await?).await
    }

    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    fn table(&self, name: &str) -> Result<Arc<Table>> {
        if self.table_dropped_in_block(name) {
            return Err(SqlError::UndefinedTable(name.to_string()));
        }
        self.db
            .engine
            .table(name)
            .ok_or_else(|| SqlError::UndefinedTable(name.to_string()))
    }

    // ---- settings ----------------------------------------------------------

    /// Applies a setting Eddy acts on: `eddy.query_memory_limit` sets the
    /// session's query memory limit (at most the server budget), and
    /// `eddy.gpu*` go to the session's GPU options (others are only
    /// recorded).
    fn apply_gpu_setting(&self, name: &str, value: &str) -> Result<()> {
        if name == MEMORY_SETTING {
            let bytes = crate::memory::parse_memory_size(value)
                .filter(|b| *b > 0)
                .ok_or_else(|| {
                    SqlError::InvalidParameter(format!(
                        "invalid value for parameter \"{MEMORY_SETTING}\": \"{value}\" (a size such as 256MB)"
                    ))
                })?;
            self.query_pool
                .set_limit(bytes.min(self.db.memory.server_bytes()));
            return Ok(());
        }
        if name == crate::scheduling::SCHEDULING_SETTING {
            if self.db.scheduling.share(value).is_none() {
                let known: Vec<&str> = self.db.scheduling.groups().map(|(n, _)| n).collect();
                return Err(SqlError::InvalidParameter(format!(
                    "invalid value for parameter \"{name}\": \"{value}\" (scheduling groups: {})",
                    known.join(", ")
                )));
            }
            return Ok(());
        }
        let applied = match eddy_gpu::session::apply_set(&self.ctx, name, value) {
            Some(applied) => applied.map_err(|e| SqlError::InvalidParameter(e.to_string())),
            None => Ok(()),
        };
        self.refresh_scan_filters();
        applied
    }

    /// Scans filter by themselves unless the GPU may take the query.
    fn refresh_scan_filters(&self) {
        let gpu_may_run = eddy_gpu::session::current(&self.ctx).gpu != eddy_gpu::GpuMode::Off
            && eddy_gpu::device::device_available_for_planning();
        self.scan_filters
            .store(!gpu_may_run, std::sync::atomic::Ordering::Relaxed);
    }

    fn set(&mut self, set: datafusion::sql::sqlparser::ast::Set) -> Result<Output> {
        use datafusion::sql::sqlparser::ast::Set as S;
        match set {
            S::SingleAssignment {
                variable,
                values,
                scope,
                ..
            } => {
                use datafusion::sql::sqlparser::ast::ContextModifier;
                let local = match scope {
                    None | Some(ContextModifier::Session) => false,
                    Some(ContextModifier::Local) => true,
                    Some(ContextModifier::Global) => {
                        // not PostgreSQL's syntax
                        return Err(SqlError::Syntax("SET GLOBAL".into()));
                    }
                };
                let name = variable.to_string().to_ascii_lowercase();
                let value = values
                    .iter()
                    .map(|v| match v {
                        Expr::Value(v) => match &v.value {
                            datafusion::sql::sqlparser::ast::Value::SingleQuotedString(s) => {
                                s.clone()
                            }
                            other => other.to_string(),
                        },
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let value = settings::validate_setting(&name, &value)?;
                if local && !self.in_transaction_block() {
                    // as PostgreSQL: a WARNING, and no effect
                    self.warn("25P01", "SET LOCAL can only be used in transaction blocks");
                    return Ok(Output::Command("SET".into()));
                }
                self.apply_gpu_setting(&name, &value)?;
                let value = self.check_transaction_setting(&name, value)?;
                self.store_setting(name, value, local);
            }
            S::SetTransaction {
                modes,
                snapshot,
                session,
            } => return self.set_transaction(&modes, snapshot.as_ref(), session),
            S::SetTimeZone { value, local } => {
                let text = match &value {
                    Expr::Value(v) => match &v.value {
                        datafusion::sql::sqlparser::ast::Value::SingleQuotedString(s) => s.clone(),
                        other => other.to_string(),
                    },
                    // `SET TIME ZONE LOCAL`, `-7`
                    Expr::Identifier(_) | Expr::UnaryOp { .. } => value.to_string(),
                    _ => {
                        return Err(SqlError::FeatureNotSupported(format!(
                            "SET TIME ZONE {value} is not supported: give a zone name or a number of hours"
                        )))
                    }
                };
                let zone = crate::session_zone::SessionZone::parse(&text)?;
                if local && !self.in_transaction_block() {
                    self.warn("25P01", "SET LOCAL can only be used in transaction blocks");
                    return Ok(Output::Command("SET".into()));
                }
                self.store_setting("timezone".into(), zone.name().to_string(), local);
            }
            S::SetNames { charset_name, .. }
                if matches!(
                    ident_name(&charset_name).to_ascii_lowercase().as_str(),
                    "utf8" | "unicode"
                ) => {}
            other => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "{} is not supported",
                    other.to_string().chars().take(60).collect::<String>()
                )))
            }
        }
        Ok(Output::Command("SET".into()))
    }

    /// What `SHOW variable` reads: the words as written (`time zone`;
    /// `all` for SHOW ALL) and the setting's key (`timezone`).
    fn show_key(&self, variable: &[datafusion::sql::sqlparser::ast::Ident]) -> (String, String) {
        let name = variable
            .iter()
            .map(ident_name)
            .collect::<Vec<_>>()
            .join(" ");
        let key = match name.as_str() {
            "time zone" => "timezone".to_string(),
            "transaction isolation level" => "transaction_isolation".to_string(),
            // `SHOW eddy.query_memory_limit` arrives as two words
            _ if variable.len() > 1 => {
                let dotted = variable
                    .iter()
                    .map(ident_name)
                    .collect::<Vec<_>>()
                    .join(".");
                if self.settings.contains_key(&dotted) {
                    dotted
                } else {
                    name.clone()
                }
            }
            _ => name.clone(),
        };
        (name, key)
    }

    /// The column names `SHOW variable` answers with: `name` and `setting`
    /// for SHOW ALL; otherwise one column, named by a transaction setting's
    /// or a dotted custom setting's key (as in PostgreSQL), else by the
    /// words as written. The extended protocol's Describe announces these.
    fn show_column_names(
        &self,
        variable: &[datafusion::sql::sqlparser::ast::Ident],
    ) -> Vec<String> {
        let (name, key) = self.show_key(variable);
        if name == "all" {
            vec!["name".into(), "setting".into(), "description".into()]
        } else if key.contains('.') || self.transaction_setting(&key).is_some() {
            vec![key]
        } else {
            vec![name]
        }
    }

    fn show(&self, variable: &[datafusion::sql::sqlparser::ast::Ident]) -> Result<Output> {
        let (name, key) = self.show_key(variable);
        let values: Vec<ArrayRef> = if name == "all" {
            let (names, values): (Vec<String>, Vec<String>) = self
                .settings
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .unzip();
            let descriptions: StringArray = names
                .iter()
                .map(|n| crate::setting_descriptions::setting_description(n))
                .collect();
            vec![
                Arc::new(StringArray::from(names)),
                Arc::new(StringArray::from(values)),
                Arc::new(descriptions),
            ]
        } else {
            let v = match self.transaction_setting(&key) {
                Some(v) => v,
                None => self
                    .settings
                    .get(&key)
                    .cloned()
                    .ok_or(SqlError::UnknownSetting(name.clone()))?,
            };
            vec![Arc::new(StringArray::from(vec![v]))]
        };
        let schema: SchemaRef = Arc::new(Schema::new(
            self.show_column_names(variable)
                .into_iter()
                .map(|n| {
                    // a custom setting has no description
                    let nullable = n == "description";
                    Field::new(n, DataType::Utf8, nullable)
                })
                .collect::<Vec<_>>(),
        ));
        let batch = RecordBatch::try_new(Arc::clone(&schema), values)?;
        Ok(batches_output(schema, vec![batch]))
    }

    // ---- DDL ---------------------------------------------------------------

    async fn create_table(
        &mut self,
        mut ct: datafusion::sql::sqlparser::ast::CreateTable,
    ) -> Result<Output> {
        let temporary = self.temp_create(&mut ct)?;
        let name = table_name(&ct.name)?;
        // (IF NOT EXISTS over an existing table keeps that table's action)
        let fresh = temporary && self.db.engine.table(&name).is_none();
        let action = temp::CommitAction::of(ct.on_commit.as_ref());
        let out = self.create_resolved_table(ct).await?;
        if fresh {
            self.set_temp_commit_action(&name, action);
        }
        Ok(out)
    }

    /// CREATE TABLE under its storage name (`temp_create` has run).
    async fn create_resolved_table(
        &mut self,
        ct: datafusion::sql::sqlparser::ast::CreateTable,
    ) -> Result<Output> {
        let name = table_name(&ct.name)?;
        self.lock_schema_of(&name)?;
        self.free_dropped_table_name(&name)?;
        if self.db.engine.table(&name).is_some() {
            if ct.if_not_exists {
                self.notice(
                    "42P07",
                    &format!("relation \"{name}\" already exists, skipping"),
                );
                return Ok(Output::Command("CREATE TABLE".into()));
            }
            return Err(SqlError::Storage(eddy_storage::StorageError::TableExists(
                name,
            )));
        }
        if self.db.sequences.exists(&name) {
            self.refuse_replacing_dropped_sequence(&name, "table")?;
            if ct.if_not_exists {
                self.notice(
                    "42P07",
                    &format!("relation \"{name}\" already exists, skipping"),
                );
                return Ok(Output::Command("CREATE TABLE".into()));
            }
            return Err(SqlError::DuplicateTable(name));
        }
        let mut columns = Vec::new();
        let mut pk: Vec<usize> = Vec::new();
        let mut sequences = Vec::new();
        let mut pending_checks = Vec::new();
        let mut pending_fks = Vec::new();
        // (constraint name, columns) of UNIQUE constraints, in order
        let mut uniques: Vec<(Option<String>, Vec<String>)> = Vec::new();
        for (i, c) in ct.columns.iter().enumerate() {
            let serial = sequence_ddl::serial_type(&c.data_type);
            let ty = match serial {
                Some((ty, _)) => ty,
                None => column_type_from_sql(&c.data_type)?,
            };
            let mut col = ColumnDef::new(ident_name(&c.name), ty, true);
            for o in &c.options {
                match &o.option {
                    ColumnOption::NotNull => col.nullable = false,
                    ColumnOption::PrimaryKey(_) => {
                        col.nullable = false;
                        pk.push(i);
                    }
                    ColumnOption::Null | ColumnOption::Comment(_) | ColumnOption::Collation(_) => {}
                    // handled by `sequence_ddl::column_default_options`
                    ColumnOption::Default(_)
                    | ColumnOption::Generated { .. }
                    | ColumnOption::Identity(_) => {}
                    ColumnOption::Unique(u) => {
                        let (name, _) = index_ddl::unique_constraint(u)?;
                        uniques.push((
                            o.name.as_ref().map(ident_name).or(name),
                            vec![ident_name(&c.name)],
                        ));
                    }
                    ColumnOption::Check(check) => pending_checks.push(checks::PendingCheck {
                        name: o.name.as_ref().or(check.name.as_ref()).map(ident_name),
                        column: Some(ident_name(&c.name)),
                        expr: (*check.expr).clone(),
                    }),
                    ColumnOption::ForeignKey(fk) => pending_fks.push(foreign_keys::pending(
                        fk,
                        Some(ident_name(&c.name)),
                        o.name.as_ref().map(ident_name),
                    )?),
                    // never accepted and left unenforced
                    other => {
                        return Err(SqlError::FeatureNotSupported(format!(
                        "column constraint {other} is not supported yet (it would not be enforced)"
                    )))
                    }
                }
            }
            let options: Vec<ColumnOption> = c.options.iter().map(|o| o.option.clone()).collect();
            if let Some(seq) = sequence_ddl::column_default_options(
                i,
                &mut col,
                serial.map(|(_, type_name)| type_name),
                &options,
            )? {
                sequences.push(seq);
            }
            if let Some(d) = &col.default {
                self.check_default(&col, d).await?;
            }
            columns.push(col);
        }
        for con in &ct.constraints {
            if let TableConstraint::Check(check) = con {
                pending_checks.push(checks::PendingCheck {
                    name: check.name.as_ref().map(ident_name),
                    column: None,
                    expr: (*check.expr).clone(),
                });
                continue;
            }
            if let TableConstraint::Unique(u) = con {
                uniques.push(index_ddl::unique_constraint(u)?);
                continue;
            }
            if let TableConstraint::ForeignKey(fk) = con {
                pending_fks.push(foreign_keys::pending(fk, None, None)?);
                continue;
            }
            if !matches!(con, TableConstraint::PrimaryKey(_)) {
                return Err(SqlError::FeatureNotSupported(format!(
                    "table constraint {con} is not supported yet (it would not be enforced)"
                )));
            }
            if let TableConstraint::PrimaryKey(p) = con {
                if !pk.is_empty() {
                    return Err(SqlError::InvalidDefinition(format!(
                        "multiple primary keys for table \"{name}\" are not allowed"
                    )));
                }
                for ic in &p.columns {
                    let cname = match &ic.column.expr {
                        Expr::Identifier(id) => ident_name(id),
                        other => {
                            return Err(SqlError::InvalidDefinition(format!(
                                "bad primary key column {other}"
                            )))
                        }
                    };
                    let idx = columns
                        .iter()
                        .position(|c: &ColumnDef| c.name == cname)
                        .ok_or_else(|| SqlError::UndefinedColumn(cname.clone()))?;
                    columns[idx].nullable = false;
                    pk.push(idx);
                }
            }
        }
        for &i in &pk {
            if let Some(c) = columns.get(i) {
                if matches!(c.ty, ColumnType::Array(_)) {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "array column \"{}\" cannot be a primary key or index column",
                        c.name
                    )));
                }
            }
        }
        let opts = parse_table_options(&ct.table_options, &columns)?;
        let table_checks = checks::name_checks(&name, pending_checks)?;
        for check in &table_checks {
            self.validate_check(&name, &columns, check).await?;
        }
        if let Some(q) = ct.query {
            if !uniques.is_empty() {
                return Err(SqlError::FeatureNotSupported(
                    "CREATE TABLE AS with UNIQUE constraints is not supported".into(),
                ));
            }
            if !table_checks.is_empty() {
                return Err(SqlError::FeatureNotSupported(
                    "CREATE TABLE AS with CHECK constraints is not supported".into(),
                ));
            }
            if !pending_fks.is_empty() {
                return Err(SqlError::FeatureNotSupported(
                    "CREATE TABLE AS with FOREIGN KEY constraints is not supported".into(),
                ));
            }
            return self.create_table_as(name, *q, opts).await;
        }
        if columns.is_empty() {
            return Err(SqlError::InvalidDefinition(
                "a table needs at least one column".into(),
            ));
        }
        let orientation = opts.orientation.unwrap_or(if pk.is_empty() {
            Orientation::Column
        } else {
            Orientation::RowColumn
        });
        // A UNIQUE constraint without the distribution key is decided in
        // one shard: such a table gets one (docs/design/indexes.md).
        let dist = if opts.distribution_key.is_empty() {
            &pk
        } else {
            &opts.distribution_key
        };
        let one_shard = uniques.iter().any(|(_, cols)| {
            dist.is_empty()
                || !dist
                    .iter()
                    .all(|d| columns.get(*d).is_some_and(|c| cols.contains(&c.name)))
        }) && opts.table_group.is_none();
        let spec = CreateTable {
            name,
            columns,
            primary_key: pk,
            distribution_key: opts.distribution_key,
            orientation,
            table_group: opts.table_group,
            shard_count: if one_shard {
                Some(opts.shard_count.unwrap_or(1))
            } else {
                opts.shard_count
            },
            checks: table_checks,
        };
        let table_name = spec.name.clone();
        let mut spec = spec;
        let created = self.create_column_sequences(&table_name, &mut spec.columns, sequences)?;
        // The transaction's catalog change: undone by ROLLBACK, by an
        // error that ends the transaction and by recovery unless it
        // commits; others wait for it (transactions.md, "Catalog changes").
        let owner = Some(self.user.clone());
        let result = self.ddl_txn("CREATE TABLE").and_then(|t| {
            run_blocking(|| t.ddl().create_table_owned(spec, owner))
                .map(|_| ())
                .map_err(SqlError::from)
        });
        if let Err(e) = result {
            self.undo_created_sequences(&created);
            return Err(e);
        }
        // in the same transaction: an error undoes the table too
        self.add_unique_constraints(&table_name, uniques)?;
        if !pending_fks.is_empty() {
            let def = self.table(&table_name)?.def().as_ref().clone();
            let fks = self.resolve_foreign_keys(&def, pending_fks)?;
            let t = self.ddl_txn("CREATE TABLE")?;
            run_blocking(|| t.ddl().set_foreign_keys(&table_name, fks))?;
        }
        Ok(Output::Command("CREATE TABLE".into()))
    }

    async fn create_table_as(
        &mut self,
        name: String,
        q: Query,
        opts: TableOptions,
    ) -> Result<Output> {
        let mut stmt = Statement::Query(Box::new(q));
        self.compat(&mut stmt)?;
        let (schema, batches) = match self.run_query(stmt).await? {
            Output::Rows {
                schema, mut stream, ..
            } => {
                let mut v = Vec::new();
                while let Some(b) = stream.next().await {
                    v.push(b?);
                }
                (schema, v)
            }
            _ => return Err(SqlError::Internal("CREATE TABLE AS without rows".into())),
        };
        let mut columns: Vec<ColumnDef> = Vec::new();
        for f in schema.fields() {
            let column = output_names::visible(f.name()).to_string();
            if columns.iter().any(|c| c.name == column) {
                return Err(SqlError::DuplicateColumn(column));
            }
            let ty = storable_type(f.data_type()).ok_or_else(|| {
                SqlError::FeatureNotSupported(format!(
                    "column \"{}\" has type {} which cannot be stored",
                    f.name(),
                    f.data_type()
                ))
            })?;
            columns.push(ColumnDef::new(column, ty, true));
        }
        let spec = CreateTable {
            name: name.clone(),
            columns: columns.clone(),
            primary_key: vec![],
            distribution_key: vec![],
            orientation: opts.orientation.unwrap_or(Orientation::Column),
            table_group: opts.table_group,
            shard_count: opts.shard_count,
            checks: Vec::new(),
        };
        let types: Vec<ColumnType> = columns.iter().map(|c| c.ty).collect();
        if self.in_transaction_block() {
            // the table is a catalog change of the block and its rows are
            // the block's writes: both commit or roll back with it
            self.free_dropped_table_name(&name)?;
            let owner = Some(self.user.clone());
            let t = self.ddl_txn("CREATE TABLE AS")?;
            let table = run_blocking(|| t.ddl().create_table_owned(spec, owner))?;
            let cast = batches
                .iter()
                .map(|b| cast_batch(b, &table.schema(), &types, &self.time_zone()))
                .collect::<Result<Vec<_>>>()?;
            let n = self.copy_into_transaction(&table, cast)?;
            return Ok(Output::Command(format!("SELECT {n}")));
        }
        let engine = Arc::clone(&self.db.engine);
        let owner = Some(self.user.clone());
        let zone = self.time_zone();
        let table = run_blocking(|| engine.ddl(None).create_table_owned(spec, owner))?;
        let result = run_blocking(|| -> Result<u64> {
            let mut loader = table.bulk_loader();
            for b in &batches {
                let cast = cast_batch(b, &table.schema(), &types, &zone)?;
                loader.push(cast)?;
            }
            Ok(loader.commit()?)
        });
        match result {
            Ok(n) => Ok(Output::Command(format!("SELECT {n}"))),
            Err(e) => {
                let _ = run_blocking(|| engine.drop_table(&name));
                Err(e)
            }
        }
    }

    async fn alter_table(
        &mut self,
        at: datafusion::sql::sqlparser::ast::AlterTable,
    ) -> Result<Output> {
        let name = table_name(&at.name)?;
        let Some(table) = self.db.engine.table(&name) else {
            // ALTER TABLE takes a view's RENAME and OWNER TO (pg_dump
            // writes the owner change so)
            if let Some(view) = self.view(&name) {
                if let Some(r) = self.alter_table_on_view(view, &at.operations) {
                    r?;
                    return Ok(Output::Command("ALTER TABLE".into()));
                }
            }
            if let Some(owner) = only_owner_change(&at.operations) {
                // ... and a sequence's owner
                if self.sequence_visible(&name) {
                    self.alter_sequence_owner(&name, owner)?;
                    return Ok(Output::Command("ALTER TABLE".into()));
                }
            }
            if at.if_exists {
                return Ok(Output::Command("ALTER TABLE".into()));
            }
            return Err(SqlError::UndefinedTable(name));
        };
        for op in &at.operations {
            self.check_alter_under_views(&name, op)?;
        }
        let _locked = self.lock_for_ddl(&table, "ALTER TABLE")?;
        for op in at.operations {
            match op {
                AlterTableOperation::AddColumn {
                    column_def,
                    if_not_exists,
                    ..
                } => self.add_column(&name, &column_def, if_not_exists).await?,
                AlterTableOperation::OwnerTo { new_owner } => {
                    self.alter_table_owner(&name, &new_owner)?
                }
                AlterTableOperation::AddConstraint {
                    constraint: TableConstraint::PrimaryKey(p),
                    ..
                } => {
                    let cols: Vec<String> = p
                        .columns
                        .iter()
                        .map(|ic| match &ic.column.expr {
                            Expr::Identifier(id) => Ok(ident_name(id)),
                            other => Err(SqlError::InvalidDefinition(format!(
                                "bad primary key column {other}"
                            ))),
                        })
                        .collect::<Result<_>>()?;
                    // a rewrite into a new table, undone with the transaction
                    self.add_primary_key(&name, &cols).await?;
                }
                AlterTableOperation::AddConstraint {
                    constraint,
                    not_valid,
                } => self.add_constraint(&name, constraint, not_valid).await?,
                AlterTableOperation::DropConstraint {
                    if_exists,
                    name: constraint,
                    drop_behavior,
                } => {
                    if drop_behavior == Some(datafusion::sql::sqlparser::ast::DropBehavior::Cascade)
                    {
                        return Err(SqlError::FeatureNotSupported(
                            "DROP CONSTRAINT ... CASCADE is not supported".into(),
                        ));
                    }
                    if self.names_primary_key(&name, &constraint)? {
                        self.drop_primary_key(&name).await?
                    } else {
                        self.drop_constraint(&name, &constraint, if_exists)?
                    }
                }
                AlterTableOperation::RenameTable { table_name } => {
                    let (datafusion::sql::sqlparser::ast::RenameTableNameKind::To(to)
                    | datafusion::sql::sqlparser::ast::RenameTableNameKind::As(to)) = table_name;
                    self.rename_table(&name, &to)?;
                }
                AlterTableOperation::RenameColumn {
                    old_column_name,
                    new_column_name,
                } => self.rename_column(&name, &old_column_name, &new_column_name)?,
                AlterTableOperation::AlterColumn {
                    column_name,
                    op:
                        datafusion::sql::sqlparser::ast::AlterColumnOperation::SetDataType {
                            data_type,
                            using,
                            ..
                        },
                } => {
                    self.alter_column_type(&name, &ident_name(&column_name), &data_type, using)
                        .await?
                }
                AlterTableOperation::AlterColumn { column_name, op } => {
                    self.alter_column(&name, &column_name, op).await?
                }
                AlterTableOperation::DropColumn {
                    column_names,
                    if_exists,
                    drop_behavior,
                    ..
                } => {
                    self.drop_columns(&name, &column_names, if_exists, drop_behavior)
                        .await?
                }
                other => {
                    return Err(SqlError::FeatureNotSupported(format!(
                        "ALTER TABLE {other} is not supported"
                    )));
                }
            }
        }
        Ok(Output::Command("ALTER TABLE".into()))
    }

    // ---- DML ---------------------------------------------------------------
}

/// The role of an ALTER TABLE that only changes the owner.
fn only_owner_change(
    ops: &[AlterTableOperation],
) -> Option<&datafusion::sql::sqlparser::ast::Owner> {
    match ops {
        [AlterTableOperation::OwnerTo { new_owner }] => Some(new_owner),
        _ => None,
    }
}

/// Options of `CREATE TABLE ... WITH (...)`.
#[derive(Default)]
struct TableOptions {
    orientation: Option<Orientation>,
    distribution_key: Vec<usize>,
    shard_count: Option<u32>,
    table_group: Option<String>,
}

fn option_text(e: &Expr) -> String {
    match e {
        Expr::Value(v) => match &v.value {
            datafusion::sql::sqlparser::ast::Value::SingleQuotedString(s)
            | datafusion::sql::sqlparser::ast::Value::DoubleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        Expr::Identifier(id) => id.value.clone(),
        other => other.to_string(),
    }
}

fn parse_table_options(
    opts: &datafusion::sql::sqlparser::ast::CreateTableOptions,
    columns: &[ColumnDef],
) -> Result<TableOptions> {
    use datafusion::sql::sqlparser::ast::{CreateTableOptions as C, SqlOption};
    let list = match opts {
        C::None => return Ok(TableOptions::default()),
        C::With(v) | C::Options(v) | C::Plain(v) | C::TableProperties(v) => v,
    };
    let mut out = TableOptions::default();
    for o in list {
        let (key, value) = match o {
            SqlOption::KeyValue { key, value } => {
                (key.value.to_ascii_lowercase(), option_text(value))
            }
            other => {
                return Err(SqlError::InvalidParameter(format!(
                    "unrecognized table option {other}"
                )))
            }
        };
        match key.as_str() {
            "orientation" => {
                out.orientation = Some(
                    Orientation::parse(&value)
                        .map_err(|e| SqlError::InvalidParameter(e.to_string()))?,
                )
            }
            "distribution_key" => {
                for name in value
                    .split(',')
                    .map(|s| s.trim().to_lowercase())
                    .filter(|s| !s.is_empty())
                {
                    let idx = columns
                        .iter()
                        .position(|c| c.name == name)
                        .ok_or_else(|| SqlError::UndefinedColumn(name.clone()))?;
                    out.distribution_key.push(idx);
                }
            }
            "shard_count" => {
                out.shard_count = Some(
                    value
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (1..=1024).contains(n))
                        .ok_or_else(|| {
                            SqlError::InvalidParameter(format!(
                                "invalid shard_count \"{value}\": expected 1..1024"
                            ))
                        })?,
                )
            }
            "table_group" => out.table_group = Some(value.to_lowercase()),
            // PostgreSQL storage parameters clients send (pgbench): they tune
            // PostgreSQL's heap, which Eddy does not have; no answer changes
            "fillfactor" | "autovacuum_enabled" | "toast_tuple_target" | "parallel_workers" => {}
            "clustering_key" => {
                return Err(SqlError::FeatureNotSupported(
                    "clustering_key is not supported yet: column files are not sorted by a key"
                        .into(),
                ))
            }
            other => {
                return Err(SqlError::InvalidParameter(format!(
                    "unrecognized parameter \"{other}\""
                )));
            }
        }
    }
    Ok(out)
}

fn relation_of(tf: &TableFactor) -> Result<(String, String)> {
    match tf {
        TableFactor::Table { name, alias, .. } => {
            let t = table_name(name)?;
            let a = alias
                .as_ref()
                .map(|a| ident_name(&a.name))
                .unwrap_or_else(|| t.clone());
            Ok((t, a))
        }
        other => Err(SqlError::FeatureNotSupported(format!(
            "cannot modify {other}"
        ))),
    }
}

/// The Eddy column type a query result column is stored as.
pub fn storable_type(dt: &DataType) -> Option<ColumnType> {
    ColumnType::from_arrow(dt).or(match dt {
        DataType::Utf8View | DataType::LargeUtf8 | DataType::Null => Some(ColumnType::Text),
        DataType::Int8 | DataType::UInt8 => Some(ColumnType::SmallInt),
        DataType::UInt16 => Some(ColumnType::Int),
        DataType::UInt32 | DataType::UInt64 => Some(ColumnType::BigInt),
        DataType::Float16 => Some(ColumnType::Real),
        DataType::Timestamp(..) => Some(ColumnType::Timestamp),
        DataType::BinaryView | DataType::LargeBinary => Some(ColumnType::Bytea),
        _ => None,
    })
}

/// Cast a result column to the Arrow type of a stored column, failing (not
/// nulling) on values that do not fit.
pub fn cast_column(
    a: &ArrayRef,
    ty: ColumnType,
    name: &str,
    zone: &crate::session_zone::SessionZone,
) -> Result<ArrayRef> {
    // between date/time types: on the session zone's wall clock
    if !zone.is_utc() {
        if let Some(out) = crate::zone_functions::cast_on_wall_clock(a, ty, zone)? {
            return Ok(out);
        }
    }
    let target = ty.to_arrow();
    // decimals and floats into an unconstrained numeric: exactly or 22003
    if ty == ColumnType::Numeric {
        if let Some(out) = crate::unconstrained_numeric::to_stored(a)? {
            return Ok(out);
        }
    }
    // a list into an array column: its elements by the element type's
    // rules (varchar(n) length, numeric(p,s) rounding and range)
    if let (ColumnType::Array(e), DataType::List(_) | DataType::LargeList(_)) = (ty, a.data_type())
    {
        use datafusion::arrow::array::{AsArray, ListArray};
        let list = match a.data_type() {
            DataType::List(_) => Arc::clone(a),
            _ => cast_with_options(
                a,
                &DataType::new_list(DataType::Null, true),
                &CastOptions::default(),
            )
            .or_else(|_| cast_with_options(a, &target, &CastOptions::default()))?,
        };
        let list = list
            .as_list_opt::<i32>()
            .ok_or_else(|| SqlError::Internal(format!("column \"{name}\" is not a list")))?;
        let et = e.column_type();
        if matches!(
            list.values().data_type(),
            DataType::List(_) | DataType::LargeList(_)
        ) {
            return Err(SqlError::FeatureNotSupported(
                "multidimensional arrays are not supported".into(),
            ));
        }
        let values = cast_column(list.values(), et, name, zone)?;
        let out = ListArray::try_new(
            Arc::new(datafusion::arrow::datatypes::Field::new_list_field(
                et.to_arrow(),
                true,
            )),
            list.offsets().clone(),
            values,
            list.nulls().cloned(),
        )?;
        return Ok(Arc::new(out));
    }
    let is_string =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8);
    // length-checked text, and json / jsonb (checked, jsonb normalized)
    let checks_length = matches!(
        ty,
        ColumnType::Varchar(_) | ColumnType::Char(_) | ColumnType::Json | ColumnType::Jsonb
    );
    if a.data_type() == &target && !checks_length {
        return Ok(Arc::clone(a));
    }
    if checks_length || (is_string(a.data_type()) && ty != ColumnType::Text) {
        // Text into a typed column is read by PostgreSQL's input rules,
        // the same ones COPY and bound parameters use (pgtypes::parse_text):
        // '\x0102' is two bytes of bytea, '12:30+02' an instant, and a
        // varchar(n) / char(n) value is checked against n
        let text = cast_with_options(a, &DataType::Utf8, &CastOptions::default())?;
        let text = text
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| SqlError::Internal(format!("column \"{name}\" did not cast to text")))?;
        let mut out = eddy_storage::arrow_values::ColumnBuilder::new(ty, text.len());
        for v in text.iter() {
            let value = match v {
                None => Value::Null,
                Some(s) => pgtypes::parse_text_in(s, ty, zone)?,
            };
            out.append(&value)?;
        }
        return Ok(out.finish());
    }
    let opts = CastOptions {
        safe: false,
        ..Default::default()
    };
    // a float or numeric into an integer column rounds as PostgreSQL's
    // assignment cast does (Arrow's cast truncates)
    if let Some(out) = crate::checked_arith::to_integers(a, &target)? {
        return Ok(out);
    }
    if ty == ColumnType::Real && a.data_type() == &DataType::Float64 {
        // Arrow's cast turns an out-of-range float8 into infinity or zero;
        // PostgreSQL refuses it (22003)
        use datafusion::arrow::array::{AsArray, Float32Array};
        use datafusion::arrow::datatypes::Float64Type;
        let out: Float32Array = a
            .as_primitive::<Float64Type>()
            .iter()
            .map(|v| v.map(pgtypes::float4_from_float8).transpose())
            .collect::<Result<_>>()?;
        return Ok(Arc::new(out));
    }
    cast_with_options(a, &target, &opts).map_err(|e| {
        let msg = e.to_string();
        if a.data_type().is_numeric() && target.is_numeric() {
            // a number that does not fit the column's type: PostgreSQL's
            // "integer out of range" (22003)
            let name = match ty {
                ColumnType::SmallInt => "smallint".to_string(),
                ColumnType::Int => "integer".to_string(),
                ColumnType::BigInt => "bigint".to_string(),
                other => other.pg_name(),
            };
            SqlError::NumericOutOfRange(format!("{name} out of range"))
        } else if msg.contains("overflow") || msg.contains("too large") || msg.contains("Overflow")
        {
            SqlError::NumericOutOfRange(format!(
                "value out of range for column \"{name}\" of type {}",
                ty.pg_name()
            ))
        } else if matches!(
            a.data_type(),
            DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
        ) {
            SqlError::InvalidText(format!(
                "invalid input syntax for type {} in column \"{name}\": {msg}",
                ty.pg_name()
            ))
        } else {
            SqlError::DatatypeMismatch(format!(
                "column \"{name}\" is of type {} but expression is of type {}",
                ty.pg_name(),
                a.data_type()
            ))
        }
    })
}

/// Checks the settings of a startup message as SET would (see
/// [`Session::apply_startup_parameters`]): the first one Eddy cannot
/// apply, with SET's SQLSTATE (0A000 for a setting or value Eddy does not
/// support, 22023 for an invalid value), for the server to end the
/// connection with, as PostgreSQL answers an unusable startup setting
/// with FATAL.
pub fn check_startup_parameters<'a>(
    params: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<()> {
    for (name, value) in startup_settings_of(params) {
        control::startup_setting_value(&name, &value)?;
    }
    Ok(())
}

/// The settings a startup message gives, names in lower case: its
/// parameters other than the connection's own (`user`, `database`,
/// `replication`), and the `-c name=value` / `--name=value` words of its
/// `options` (spaces inside a value escaped with `\`, as libpq writes
/// them), which come after the parameters and so win over them.
pub fn startup_settings_of<'a>(
    params: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut options = Vec::new();
    for (name, value) in params {
        let name = name.to_ascii_lowercase();
        match name.as_str() {
            "user" | "database" | "replication" => {}
            "options" => options.push(value.clone()),
            _ => out.push((name, value.clone())),
        }
    }
    for text in options {
        // words split at unescaped spaces
        let mut words = Vec::new();
        let mut word = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => word.extend(chars.next()),
                c if c.is_whitespace() => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                }
                c => word.push(c),
            }
        }
        if !word.is_empty() {
            words.push(word);
        }
        let mut words = words.into_iter();
        while let Some(w) = words.next() {
            let setting = match w.as_str() {
                "-c" => words.next(),
                _ => w
                    .strip_prefix("--")
                    .or_else(|| w.strip_prefix("-c"))
                    .map(str::to_string),
            };
            if let Some((name, value)) = setting.as_deref().and_then(|s| s.split_once('=')) {
                out.push((
                    name.trim().to_ascii_lowercase().replace('-', "_"),
                    value.to_string(),
                ));
            }
        }
    }
    out
}

/// Cast every column of a batch to the stored types.
pub fn cast_batch(
    b: &RecordBatch,
    schema: &SchemaRef,
    types: &[ColumnType],
    zone: &crate::session_zone::SessionZone,
) -> Result<RecordBatch> {
    let cols: Vec<ArrayRef> = b
        .columns()
        .iter()
        .zip(types)
        .zip(schema.fields())
        .map(|((a, t), f)| cast_column(a, *t, f.name(), zone))
        .collect::<Result<_>>()?;
    Ok(RecordBatch::try_new(Arc::clone(schema), cols)?)
}

/// An output of already-computed batches.
/// All batches of a query's output.
pub(crate) async fn collect_rows(out: Output) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    match out {
        Output::Rows {
            schema, mut stream, ..
        } => {
            let mut batches = Vec::new();
            while let Some(b) = stream.next().await {
                batches.push(b?);
            }
            Ok((schema, batches))
        }
        _ => Err(SqlError::Internal("query produced no rows".into())),
    }
}

pub fn batches_output(schema: SchemaRef, batches: Vec<RecordBatch>) -> Output {
    let stream = futures::stream::iter(batches.into_iter().map(Ok));
    Output::Rows {
        schema: Arc::clone(&schema),
        stream: Box::pin(RecordBatchStreamAdapter::new(schema, stream)),
        command: "SELECT",
    }
}

/// Whether a query is a plain `VALUES` list (used by tests).
pub fn is_values(q: &Query) -> bool {
    matches!(q.body.as_ref(), SetExpr::Values(_))
}
