//! eddy-gpu: offloads scans, star joins and partial aggregates to NVIDIA GPUs.
//!
//! What this crate owns (design: `docs/design/gpu.md`):
//! * [`device`]: discovery ([`discover`] → [`GpuInventory`], logged at
//!   start-up) and the process-wide runtime (contexts, streams), with
//!   cudarc's *dynamic loading*: the binary links no CUDA library.
//! * [`mode`]: `SET eddy.gpu = on|off|auto` ([`GpuMode`], [`GpuOptions`], a
//!   DataFusion `ConfigExtension` under the `eddy` prefix).
//! * [`codegen`]: DataFusion physical expressions → CUDA C with SQL NULL
//!   semantics; whole kernels for [`GpuScanExec`], [`GpuJoinExec`],
//!   [`GpuPreAggExec`]; [`compile`]: NVRTC with a memory + disk cache keyed by
//!   source hash.
//! * [`datapath`]: Arrow buffers → pinned staging → async copies on several
//!   streams, double-buffered; [`resident`]: fact columns kept on the
//!   device between queries, keyed on immutable column-file pieces.
//! * [`exec`]: the three operators; [`optimizer`]: the [`OffloadToGpu`]
//!   physical optimizer rule; [`metrics`]: global counters for `/metrics`;
//!   [`session`]: the three calls that wire all this into a session;
//!   [`check`]: the GPU-vs-CPU SSB check behind `scripts/gpu-check.sh`.
//!
//! Invariants:
//! 1. **Never a wrong answer.** Every `Gpu*Exec` keeps the CPU subtree it
//!    replaced and runs it when anything on the device path fails (no
//!    device, compile error, out of memory, a row error such as division by
//!    zero). Output is only emitted once the device path can no longer fail
//!    for that piece of work, so a fallback never duplicates rows.
//! 2. **Never a panic without CUDA.** No cudarc call happens before
//!    `device::driver_present()`; see [`device`].
//! 3. **No sync points inside kernels.** No dynamic parallelism, no
//!    grid-wide synchronisation: each kernel runs to completion on its own
//!    (PG-Strom's lesson, `codegen::kernels`).
//! 4. Unsupported expressions and types are a typed
//!    [`codegen::Unsupported`] reason, counted by
//!    [`metrics::FallbackReason`], never an error for the query.
//!
//! Related code: `crates/sql` registers the rule and the config extension;
//! `crates/server` logs [`discover`] at start-up and serves
//! [`metrics::GPU_METRICS`]; `scripts/gpu-check.sh` runs [`check`] on a GPU.

pub mod check;
pub mod codegen;
pub mod compile;
pub mod datapath;
pub mod device;
pub mod error;
pub mod exec;
pub mod metrics;
pub mod mode;
pub mod optimizer;
pub mod resident;
pub mod session;

pub use device::{discover, DeviceInfo, GpuInventory};
pub use error::{GpuError, Result};
pub use exec::{GpuJoinAggExec, GpuJoinExec, GpuPreAggExec, GpuScanExec};
pub use metrics::{FallbackReason, GPU_METRICS};
pub use mode::{GpuMode, GpuOptions};
pub use optimizer::OffloadToGpu;
