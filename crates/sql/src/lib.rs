//! Eddy's SQL layer: everything between a SQL string and the storage engine.
//!
//! It owns:
//! * [`session`]: per-client state and the dispatch of each statement to a
//!   planning path: fixed plan ([`fastpath`]), DDL/DML (in `session`), COPY
//!   ([`copy`]) or DataFusion (queries, EXPLAIN);
//! * [`provider`]: `EddyTable`, DataFusion's view of an Eddy table, with
//!   projection and filter pushdown (row-group pruning) and one DataFusion
//!   partition per group of storage scan partitions;
//! * [`catalog`]: the `public` schema over the engine and a synthesised
//!   `pg_catalog` (plus PostgreSQL functions psql and drivers call);
//! * [`pgtypes`]: PostgreSQL type OIDs and the text/binary value encodings;
//! * [`roles`] and [`privileges`]: who exists, and what each statement
//!   needs on which table (checked before any statement runs);
//! * [`error`]: `SqlError` and its exhaustive SQLSTATE mapping;
//! * [`subquery`]: subqueries DataFusion cannot decorrelate, run by a
//!   dependent join (`ApplyExec`).
//!
//! Invariants: every statement is atomic on its own (one `Table::write` or
//! one `BulkLoader::commit`); a query reads one snapshot per table; input
//! never reaches a panic.
//!
//! It knows nothing of the wire protocol: `eddy-server` turns [`session::Output`]
//! into pgwire messages. Design notes: `docs/design/sql.md`.

pub mod admission;
pub mod advisory;
pub mod arbiter;
pub mod array_dimensions;
pub mod array_subquery;
pub mod array_type;
pub mod at_time_zone;
pub mod backends;
pub mod bytea_functions;
pub mod call_rewrites;
pub mod case_literals;
pub mod cast_names;
pub mod catalog;
mod catalog_columns;
mod catalog_dependencies;
mod catalog_references;
mod catalog_shape;
pub mod checked_arith;
pub mod copy;
pub mod custom_commands;
pub mod date_functions;
pub mod datetime_in;
pub mod deferred_fk;
mod deparse;
mod dml_with;
pub mod error;
pub mod expand_array;
mod exported_snapshots;
pub mod extract;
pub mod fastpath;
pub mod fetch_first;
pub mod fk_catalog;
pub mod float_sum;
pub mod group_by_key;
pub mod grouping_error;
pub mod index_catalog;
pub mod index_scan;
pub mod information_schema;
pub(crate) mod insert_values;
pub mod int2vector;
pub mod interval_arith;
pub mod interval_type;
pub mod join_filter;
pub mod join_order;
pub mod json;
pub mod json_aggregates;
pub mod json_build;
pub mod json_functions;
pub mod json_more;
pub mod json_paths;
pub mod json_srf;
pub mod keywords;
pub mod lateral_unnest;
mod limit_params;
mod lock_strengths;
pub mod make_interval;
pub mod memory;
pub mod merge;
mod node_rewrite;
pub mod notify;
pub mod numeric_cast;
pub mod numeric_division;
pub mod ordered_set;
pub mod output_names;
pub mod overriding;
pub mod pg_functions;
pub mod pgtypes;
pub mod privileges;
pub mod provider;
pub mod resident_scan;
pub mod result_types;
pub mod rewrite;
pub mod role_parse;
pub mod roles;
pub mod scan_filter;
pub mod scheduling;
pub mod schemas;
pub mod search_path;
pub mod sequence_commit;
pub mod sequence_functions;
pub mod sequence_parse;
pub mod sequences;
pub mod series_args;
pub mod server_files;
pub mod session;
pub mod session_zone;
pub mod set_config;
pub mod set_returning;
pub mod setting_descriptions;
pub mod similar_to;
pub mod srf_rewrite;
pub mod statement_limits;
pub mod streams;
pub mod subquery;
pub mod table_command;
pub mod temp_tables;
pub mod text_casts;
pub mod text_functions;
pub mod time_functions;
pub mod to_char;
pub mod to_char_interval;
pub mod to_char_number;
pub mod to_timestamp;
mod token_words;
pub mod txid;
pub mod txn;
pub mod udf_args;
pub mod unconstrained_numeric;
pub mod uuid_type;
pub mod views;
pub mod zone_functions;
pub mod zone_rules;

pub use error::{Result, SqlError};
pub use session::{Database, Output, Prepared, ResultColumn, Session};
pub use streams::{StreamRelation, StreamStatements};
