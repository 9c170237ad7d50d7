//! CUDA C code generation: physical expressions and operator kernels as text.
//!
//! Everything here is pure (no device, no driver): expressions become CUDA C
//! statements ([`expr`]), operators become whole kernels ([`kernels`]), and
//! the text is hashed to key the compile cache ([`crate::compile`]). That is
//! what makes the golden tests possible on machines without CUDA.

pub mod dict;
pub mod expr;
pub mod join_agg;
pub mod kernels;
pub mod types;

pub use expr::{CompiledExpr, ExprCompiler, Value};
pub use join_agg::JoinAggKernelSpec;
pub use kernels::{JoinKernelSpec, KernelSource, PreAggKernelSpec, ScanKernelSpec};
pub use types::DevType;

use crate::metrics::FallbackReason;

/// Why an expression, type or operator cannot run on the device. Carries the
/// fallback reason counted by the metrics and a human-readable detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} ({})", detail, reason.label())]
pub struct Unsupported {
    /// The metric bucket.
    pub reason: FallbackReason,
    /// What exactly was not supported.
    pub detail: String,
}

impl Unsupported {
    /// An unsupported expression kind.
    pub fn expr(detail: impl Into<String>) -> Self {
        Unsupported {
            reason: FallbackReason::UnsupportedExpr,
            detail: detail.into(),
        }
    }
    /// An unsupported data type.
    pub fn ty(detail: impl Into<String>) -> Self {
        Unsupported {
            reason: FallbackReason::UnsupportedType,
            detail: detail.into(),
        }
    }
    /// An unsupported operator shape.
    pub fn operator(detail: impl Into<String>) -> Self {
        Unsupported {
            reason: FallbackReason::UnsupportedOperator,
            detail: detail.into(),
        }
    }
}

/// 64-bit FNV-1a of generated source: the compile-cache key. Stable across
/// runs and platforms (unlike `DefaultHasher`), so the disk cache survives
/// restarts and upgrades of Rust.
pub fn source_hash(src: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in src.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
