//! `GpuError`: every way the GPU path can fail, grouped by who is at fault.
//!
//! None of these ever reaches a user as a query error on its own: the
//! `Gpu*Exec` operators catch them, count them, log a warning and run their
//! original CPU subtree instead (see `exec::fallback`).

use std::path::PathBuf;

/// Errors of the GPU layer.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    // --- The environment: no device, no driver, no compiler. ---
    /// libcuda (the driver) could not be loaded, or reports no device.
    #[error("no CUDA device available: {0}")]
    NoDevice(String),
    /// libnvrtc could not be loaded, so kernels cannot be compiled.
    #[error("NVRTC (the CUDA run-time compiler) is not available: {0}")]
    NoCompiler(String),

    // --- The plan: something the GPU path does not implement. ---
    /// An expression, type or operator shape the code generator does not
    /// support. Not an error for the query: it stays on the CPU.
    #[error("unsupported on the GPU: {0}")]
    Unsupported(#[from] crate::codegen::Unsupported),

    // --- The device: failures while running. ---
    /// A CUDA driver call failed.
    #[error("CUDA driver error during {during}: {source}")]
    Driver {
        during: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },
    /// NVRTC rejected generated source (a code-generator bug).
    #[error("NVRTC failed to compile kernel {kernel}: {log}")]
    Compile { kernel: String, log: String },
    /// The build side or the working set does not fit in device memory.
    #[error("device memory exhausted: need {needed} bytes, {available} free")]
    OutOfDeviceMemory { needed: usize, available: usize },
    /// A kernel reported that an output buffer overflowed more times than
    /// the host is willing to retry.
    #[error("kernel {kernel} output overflowed after {retries} retries")]
    Overflow { kernel: String, retries: u32 },

    // --- Ours: I/O of the kernel cache, Arrow, DataFusion. ---
    /// Reading or writing the on-disk kernel cache failed.
    #[error("kernel cache I/O at {path}: {source}")]
    CacheIo {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Arrow failed while staging or assembling batches.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// DataFusion failed while executing an input of a GPU operator.
    #[error("datafusion: {0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
    /// An invariant of this crate broke (a bug): reported, then CPU fallback.
    #[error("internal GPU layer error: {0}")]
    Internal(String),
}

impl GpuError {
    /// Wraps a driver error with what was being done.
    pub fn driver(during: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> GpuError {
        move |source| GpuError::Driver { during, source }
    }

    /// Short stable label, used as the metric label of device errors.
    pub fn kind(&self) -> &'static str {
        match self {
            GpuError::NoDevice(_) => "no_device",
            GpuError::NoCompiler(_) => "no_compiler",
            GpuError::Unsupported(_) => "unsupported",
            GpuError::Driver { .. } => "driver",
            GpuError::Compile { .. } => "compile",
            GpuError::OutOfDeviceMemory { .. } => "out_of_device_memory",
            GpuError::Overflow { .. } => "overflow",
            GpuError::CacheIo { .. } => "cache_io",
            GpuError::Arrow(_) => "arrow",
            GpuError::DataFusion(_) => "datafusion",
            GpuError::Internal(_) => "internal",
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = GpuError> = std::result::Result<T, E>;
