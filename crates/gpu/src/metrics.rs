//! Process-wide GPU counters, exposed for `/metrics`.
//!
//! Global atomics rather than per-query `MetricsSet`s because the server's
//! `/metrics` endpoint reports totals since start-up; each operator also
//! reports its own `MetricsSet` for `EXPLAIN ANALYZE`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a subtree stayed on (or went back to) the CPU. Each reason has its own
/// counter so operators can see what to implement next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FallbackReason {
    /// An expression kind the code generator does not translate.
    UnsupportedExpr,
    /// A column or literal type the kernels do not handle.
    UnsupportedType,
    /// An operator shape (join type, aggregate function, ...) not offloaded.
    UnsupportedOperator,
    /// The input is smaller than `eddy.gpu_min_rows`.
    BelowThreshold,
    /// A join build side would not fit in device memory.
    BuildTooLarge,
    /// A device error at run time: the operator ran its CPU subtree.
    DeviceError,
    /// The session switched the GPU off, or no device is present.
    Disabled,
}

impl FallbackReason {
    /// Every reason, in metric order.
    pub const ALL: [FallbackReason; 7] = [
        FallbackReason::UnsupportedExpr,
        FallbackReason::UnsupportedType,
        FallbackReason::UnsupportedOperator,
        FallbackReason::BelowThreshold,
        FallbackReason::BuildTooLarge,
        FallbackReason::DeviceError,
        FallbackReason::Disabled,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            FallbackReason::UnsupportedExpr => "unsupported_expr",
            FallbackReason::UnsupportedType => "unsupported_type",
            FallbackReason::UnsupportedOperator => "unsupported_operator",
            FallbackReason::BelowThreshold => "below_threshold",
            FallbackReason::BuildTooLarge => "build_too_large",
            FallbackReason::DeviceError => "device_error",
            FallbackReason::Disabled => "disabled",
        }
    }

    fn index(self) -> usize {
        match self {
            FallbackReason::UnsupportedExpr => 0,
            FallbackReason::UnsupportedType => 1,
            FallbackReason::UnsupportedOperator => 2,
            FallbackReason::BelowThreshold => 3,
            FallbackReason::BuildTooLarge => 4,
            FallbackReason::DeviceError => 5,
            FallbackReason::Disabled => 6,
        }
    }
}

/// The counters. One static instance: [`GPU_METRICS`].
#[derive(Debug)]
pub struct GpuMetrics {
    fallbacks: [AtomicU64; 7],
    /// Subtrees replaced by a `Gpu*Exec`.
    pub offloaded: AtomicU64,
    /// Kernels compiled by NVRTC (cache misses).
    pub kernels_compiled: AtomicU64,
    /// Kernel lookups served from the memory or disk cache.
    pub kernel_cache_hits: AtomicU64,
    /// Kernel launches.
    pub kernel_launches: AtomicU64,
    /// Bytes copied host to device.
    pub bytes_h2d: AtomicU64,
    /// Bytes copied device to host.
    pub bytes_d2h: AtomicU64,
    /// Rows that went through a GPU kernel.
    pub rows_processed: AtomicU64,
    /// Host nanoseconds spent staging inputs and issuing copies and launches.
    pub submit_ns: AtomicU64,
    /// Host nanoseconds spent waiting for results and assembling the output.
    pub complete_ns: AtomicU64,
    /// Fact columns read from the device-resident cache (`resident`).
    pub resident_hits: AtomicU64,
    /// Bytes uploaded into the resident cache.
    pub resident_loaded_bytes: AtomicU64,
    /// Resident columns dropped to make room.
    pub resident_evictions: AtomicU64,
    /// Bytes the resident cache holds now (a gauge).
    pub resident_bytes: AtomicU64,
}

/// The process-wide counters.
pub static GPU_METRICS: GpuMetrics = GpuMetrics {
    fallbacks: [const { AtomicU64::new(0) }; 7],
    offloaded: AtomicU64::new(0),
    kernels_compiled: AtomicU64::new(0),
    kernel_cache_hits: AtomicU64::new(0),
    kernel_launches: AtomicU64::new(0),
    bytes_h2d: AtomicU64::new(0),
    bytes_d2h: AtomicU64::new(0),
    rows_processed: AtomicU64::new(0),
    submit_ns: AtomicU64::new(0),
    complete_ns: AtomicU64::new(0),
    resident_hits: AtomicU64::new(0),
    resident_loaded_bytes: AtomicU64::new(0),
    resident_evictions: AtomicU64::new(0),
    resident_bytes: AtomicU64::new(0),
};

impl GpuMetrics {
    /// Counts one fallback.
    pub fn fallback(&self, reason: FallbackReason) {
        self.fallbacks[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Fallbacks counted so far for `reason`.
    pub fn fallbacks(&self, reason: FallbackReason) -> u64 {
        self.fallbacks[reason.index()].load(Ordering::Relaxed)
    }

    /// Adds the time since `since` to a nanosecond counter.
    pub fn add_elapsed(counter: &AtomicU64, since: std::time::Instant) {
        let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        counter.fetch_add(ns, Ordering::Relaxed);
    }

    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Prometheus text exposition of every counter.
    pub fn render_prometheus(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP eddy_gpu_fallbacks_total Subtrees kept on or returned to the CPU, by reason.\n",
        );
        out.push_str("# TYPE eddy_gpu_fallbacks_total counter\n");
        for r in FallbackReason::ALL {
            let _ = writeln!(
                out,
                "eddy_gpu_fallbacks_total{{reason=\"{}\"}} {}",
                r.label(),
                self.fallbacks(r)
            );
        }
        let singles: [(&str, &str, &AtomicU64); 12] = [
            (
                "eddy_gpu_offloaded_total",
                "Subtrees replaced by GPU operators.",
                &self.offloaded,
            ),
            (
                "eddy_gpu_kernels_compiled_total",
                "Kernels compiled by NVRTC.",
                &self.kernels_compiled,
            ),
            (
                "eddy_gpu_kernel_cache_hits_total",
                "Kernels found in the cache.",
                &self.kernel_cache_hits,
            ),
            (
                "eddy_gpu_kernel_launches_total",
                "Kernel launches.",
                &self.kernel_launches,
            ),
            (
                "eddy_gpu_h2d_bytes_total",
                "Bytes copied host to device.",
                &self.bytes_h2d,
            ),
            (
                "eddy_gpu_d2h_bytes_total",
                "Bytes copied device to host.",
                &self.bytes_d2h,
            ),
            (
                "eddy_gpu_rows_total",
                "Rows processed by GPU kernels.",
                &self.rows_processed,
            ),
            (
                "eddy_gpu_submit_nanoseconds_total",
                "Host time staging inputs and issuing copies and kernels.",
                &self.submit_ns,
            ),
            (
                "eddy_gpu_complete_nanoseconds_total",
                "Host time waiting for device results and assembling output.",
                &self.complete_ns,
            ),
            (
                "eddy_gpu_resident_hits_total",
                "Fact columns read from device memory kept between queries.",
                &self.resident_hits,
            ),
            (
                "eddy_gpu_resident_loaded_bytes_total",
                "Bytes uploaded into the device-resident column cache.",
                &self.resident_loaded_bytes,
            ),
            (
                "eddy_gpu_resident_evictions_total",
                "Resident columns dropped to make room.",
                &self.resident_evictions,
            ),
        ];
        for (name, help, c) in singles {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                c.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP eddy_gpu_resident_bytes Bytes the device-resident column cache holds.\n# TYPE eddy_gpu_resident_bytes gauge\neddy_gpu_resident_bytes {}",
            self.resident_bytes.load(Ordering::Relaxed)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_reason() {
        GPU_METRICS.fallback(FallbackReason::BelowThreshold);
        let text = GPU_METRICS.render_prometheus();
        for r in FallbackReason::ALL {
            assert!(text.contains(r.label()), "{text}");
        }
        assert!(GPU_METRICS.fallbacks(FallbackReason::BelowThreshold) >= 1);
    }
}
