//! # eddy-streamsql: streaming SQL inside `eddy server`
//!
//! This crate owns the streaming statements and the jobs they start:
//! * [`statements`]: `CREATE SOURCE`, `CREATE MATERIALIZED VIEW`, `DROP
//!   SOURCE | MATERIALIZED VIEW`, `SHOW SOURCES | MATERIALIZED VIEWS | JOBS`,
//!   recognised and parsed on sqlparser's tokens and AST;
//! * [`changelog`]: change-log sources (`CREATE SOURCE s FROM TABLE t`), a
//!   table's committed changes as insertions and retractions, read as the
//!   difference between consistent cuts and resumable from a checkpoint;
//! * [`datagen`]: the `datagen` connector, a deterministic, replayable
//!   generator of Arrow batches;
//! * [`kafka`]: the `kafka` connector, a source reading every partition of
//!   a topic with its offsets in the view's checkpoint (exactly once), and a
//!   sink writing a view's changes as keyed upserts (at least once);
//! * [`nexmark`]: the `nexmark` connector, the Nexmark benchmark's
//!   persons, auctions or bids from a deterministic generator, resumable
//!   from the event number in the checkpoint;
//! * [`plan`]: a view's query planned by DataFusion (the same SQL front end,
//!   analyzer rules and physical expressions a query uses) and cut into a
//!   stateless part, a keyed aggregate and a stateless part after it;
//!   whatever else the plan holds is refused at CREATE (0A000);
//! * [`watermark`] and [`window`]: a source's `WATERMARK` (late rows are
//!   dropped, row by row) and `TUMBLE` / `HOP` / `SESSION` windows in FROM,
//!   bound on the AST; a view emits on update or `EMIT ON WINDOW CLOSE`,
//!   and drops the state of windows the watermark has closed;
//! * [`session`]: the per-key sessions of a `SESSION` view, merged as rows
//!   arrive in any order;
//! * [`interval_join`]: joins of two sources (the stream-stream joins):
//!   interval joins, whose state the watermarks expire, and equi-joins
//!   without an interval, whose state grows with the input; both emit
//!   each pair once; and semi equi-joins (`IN`/`EXISTS`, or an inner join
//!   DataFusion turns into one), emitting each kept row once;
//! * [`lookup`]: stream-table lookup joins (each source row joined with the
//!   table's row under its key when it is processed, never revised);
//! * [`view_op`]: the operator that runs a view in the stream engine
//!   (`eddy-stream`) and commits its changes into the view's table;
//! * [`append_op`]: the operator of an append-only view (no GROUP BY):
//!   each kept source row is appended under its position in the source
//!   (over a join of two sources: each pair under its number among the
//!   join's pairs), through the same commit;
//! * [`window_join`]: a join of two windowed aggregates (Nexmark q8):
//!   each side a window aggregate emitting on window close, feeding the
//!   equi-join, feeding an append-only view;
//! * [`manager`]: the catalog of sources and views (tables
//!   `eddy_stream_jobs` and `eddy_stream_checkpoints`) and the running jobs;
//!   it implements `eddy_sql::StreamStatements` for the SQL layer.
//! * [`status`]: each view's job as the server's console shows it (graph,
//!   status, commits, last checkpoint).
//!
//! Invariants (see `docs/design/streams-into-tables.md`):
//! * A materialized view is an ordinary table, written only by its job.
//! * Exactly once: at checkpoint `n` a view's changes since the previous
//!   commit and the row `(view, n, source rows)` of `eddy_stream_checkpoints`
//!   are one `Engine::commit`: readers see all of a checkpoint or none of it,
//!   and after any crash the view equals its query over exactly the source
//!   rows the checkpoint row records.
//! * A commit is idempotent: pending changes restored from a checkpoint are
//!   committed only if the checkpoint row shows they were not.

pub mod append_op;
pub mod batch;
pub mod changelog;
pub mod datagen;
pub mod error;
pub mod interval_join;
pub mod kafka;
pub mod lookup;
pub mod manager;
pub mod nexmark;
pub mod plan;
pub mod session;
pub mod source_scan;
pub mod stages;
pub mod statements;
pub mod status;
pub mod view_commit;
pub mod view_op;
pub mod view_stats;
pub mod view_tables;
pub mod watermark;
pub mod window;
pub mod window_join;

pub use error::{Result, StreamSqlError};
pub use manager::StreamManager;
