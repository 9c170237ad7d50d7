//! `eddy-bench`: Eddy's benchmark data generators and harnesses (`eddy bench ...`).
//!
//! What this crate owns:
//! * **Generators** writing Parquet data sets under `DIR/<bench>-sfN/<table>/`:
//!   [`ssb`] (the Star Schema Benchmark, own generator, deterministic by
//!   seed and independent of thread count), [`tpch`] (through the `tpchgen`
//!   crates) and [`ycsb`] (the `usertable`). Each data set has a
//!   `manifest.json` ([`dataset::Manifest`]) so harnesses reuse it.
//! * **Query texts**: the 13 SSB queries ([`ssb::queries`]) and the 22 TPC-H
//!   queries ([`tpch::queries`]).
//! * **Harnesses**: [`harness`] loads a data set into Eddy and PostgreSQL over
//!   the PostgreSQL protocol and into DuckDB / DataFusion through
//!   `scripts/bench/peer.py` (embedded here), runs every query after a
//!   warm-up, checks that all engines agree and writes JSON, Markdown and a
//!   PNG chart; [`ycsb`] drives closed- and open-loop serving load;
//!   [`prepared`] times TPC-H Q6 prepared against sent as text.
//! * **CLI**: [`cli::BenchCommand`], mounted by the `eddy` binary as
//!   `eddy bench ...` and by this crate's own `eddy-bench` binary.
//!
//! Invariants: nothing here depends on the engine crates (the harness talks
//! to Eddy only through its protocol, like a user); generators never panic
//! on input (errors are [`BenchError`]).
//!
//! Related: `docs/benchmarks/README.md` (results and commands),
//! `scripts/bench/setup.sh` (peer installation), `/BENCHMARKS.md` rules.

pub mod cli;
pub mod dataset;
pub mod error;
pub mod freshness;
pub mod harness;
pub mod mixed;
pub mod nexmark;
pub mod prepared;
pub mod ssb;
pub mod tpch;
pub mod ycsb;

pub use error::{BenchError, Result};
