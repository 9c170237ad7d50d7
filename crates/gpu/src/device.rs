//! Device discovery and the process-wide device runtime.
//!
//! Invariant: nothing in this crate calls into cudarc before
//! [`driver_present`] said libcuda can be loaded. cudarc's dynamic loading
//! panics on the first call when the library is missing; we ask its own
//! fallible probe (`is_culib_present`, a plain `dlopen`) first, and wrap the
//! first driver calls in `catch_unwind` as a second fence (a libcuda too old
//! for a symbol cudarc wants also panics). So Eddy starts, and every test
//! passes, on machines without CUDA.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaStream};

use crate::error::{GpuError, Result};

/// What discovery found about one device.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceInfo {
    /// CUDA ordinal.
    pub ordinal: usize,
    /// Marketing name ("NVIDIA H100 80GB HBM3").
    pub name: String,
    /// Global memory in bytes.
    pub total_memory: usize,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
}

/// The devices found at start-up, or why Eddy runs CPU-only.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GpuInventory {
    /// Devices usable for offload (empty when CPU-only).
    pub devices: Vec<DeviceInfo>,
    /// Why there are none, when there are none.
    pub cpu_only_reason: Option<String>,
    /// Whether NVRTC can be loaded (no NVRTC: no kernels, so CPU-only).
    pub nvrtc: bool,
}

impl GpuInventory {
    /// True when at least one device and NVRTC are usable.
    pub fn has_device(&self) -> bool {
        !self.devices.is_empty() && self.nvrtc
    }
}

impl fmt::Display for GpuInventory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.has_device() {
            let why = self
                .cpu_only_reason
                .as_deref()
                .unwrap_or("no usable device");
            return write!(f, "GPU: none, running CPU-only ({why})");
        }
        write!(f, "GPU: {} device(s):", self.devices.len())?;
        for d in &self.devices {
            write!(
                f,
                " [{}] {}, {:.1} GiB, {} SMs, sm_{}{};",
                d.ordinal,
                d.name,
                d.total_memory as f64 / (1u64 << 30) as f64,
                d.sm_count,
                d.compute_capability.0,
                d.compute_capability.1
            )?;
        }
        write!(f, " NVRTC available")
    }
}

/// Whether libcuda (the driver) can be loaded. Never panics.
pub fn driver_present() -> bool {
    if std::env::var_os("EDDY_GPU_DISABLE").is_some_and(|v| v != "0") {
        return false;
    }
    // SAFETY: a dlopen of the driver library by name; loading libcuda runs
    // no code of ours and its initialisers are the vendor's.
    std::panic::catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() }).unwrap_or(false)
}

/// Whether libnvrtc can be loaded. Never panics.
pub fn nvrtc_present() -> bool {
    // SAFETY: as for `driver_present`.
    std::panic::catch_unwind(|| unsafe { cudarc::nvrtc::sys::is_culib_present() }).unwrap_or(false)
}

/// Finds the devices. Cheap after the first call (cached); never panics.
pub fn discover() -> GpuInventory {
    static INVENTORY: OnceLock<GpuInventory> = OnceLock::new();
    INVENTORY.get_or_init(discover_uncached).clone()
}

fn discover_uncached() -> GpuInventory {
    if !driver_present() {
        return GpuInventory {
            devices: vec![],
            cpu_only_reason: Some("CUDA driver library (libcuda.so.1) not found".into()),
            nvrtc: false,
        };
    }
    let nvrtc = nvrtc_present();
    let probed = std::panic::catch_unwind(probe_devices);
    let (devices, reason) = match probed {
        Ok(Ok(d)) if d.is_empty() => (d, Some("the CUDA driver reports no device".to_string())),
        Ok(Ok(d)) => (d, None),
        Ok(Err(e)) => (vec![], Some(format!("CUDA driver error: {e}"))),
        Err(_) => (
            vec![],
            Some("the CUDA driver library is unusable (missing symbols)".to_string()),
        ),
    };
    let reason = reason.or_else(|| {
        (!nvrtc).then(|| "NVRTC (libnvrtc) not found: kernels cannot be compiled".to_string())
    });
    GpuInventory {
        devices,
        cpu_only_reason: reason,
        nvrtc,
    }
}

fn probe_devices() -> Result<Vec<DeviceInfo>> {
    let n = CudaContext::device_count().map_err(GpuError::driver("cuDeviceGetCount"))?;
    let mut out = Vec::new();
    for ordinal in 0..n.max(0) as usize {
        let ctx = CudaContext::new(ordinal).map_err(GpuError::driver("cuCtxCreate"))?;
        out.push(DeviceInfo {
            ordinal,
            name: ctx.name().map_err(GpuError::driver("cuDeviceGetName"))?,
            total_memory: ctx
                .total_mem()
                .map_err(GpuError::driver("cuDeviceTotalMem"))?,
            sm_count: ctx
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(GpuError::driver("cuDeviceGetAttribute"))? as u32,
            compute_capability: ctx
                .compute_capability()
                .map_err(GpuError::driver("cuDeviceComputeCapability"))?,
        });
    }
    Ok(out)
}

/// Test and benchmark hook: pretend a device is present (`Some(true)`),
/// absent (`Some(false)`), or ask discovery (`None`). Only the planning
/// decision reads it; execution still needs a real device and falls back to
/// the CPU without one, which is exactly what the fallback tests exercise.
pub fn force_device_present(force: Option<bool>) {
    FORCE.store(
        match force {
            None => 0,
            Some(true) => 1,
            Some(false) => 2,
        },
        Ordering::SeqCst,
    );
}

static FORCE: AtomicU8 = AtomicU8::new(0);

/// Whether the planner may offload: a forced answer, or discovery's.
pub fn device_available_for_planning() -> bool {
    match FORCE.load(Ordering::SeqCst) {
        1 => true,
        2 => false,
        _ => discover().has_device(),
    }
}

/// One device ready for work: a context and a pool of streams.
#[derive(Debug)]
pub struct GpuDevice {
    /// What discovery said about it.
    pub info: DeviceInfo,
    /// Its CUDA context.
    pub ctx: Arc<CudaContext>,
    /// Streams for copies and kernels; each pipeline slot takes its own so
    /// copies of one batch overlap the kernel of another.
    pub streams: Vec<Arc<CudaStream>>,
}

/// Streams per device: at least double buffering, plus one in flight.
pub const STREAMS_PER_DEVICE: usize = 3;

/// All devices, ready; created on first use.
#[derive(Debug)]
pub struct GpuRuntime {
    /// Devices, by ordinal. Partitions are spread over them (`partition %
    /// devices.len()`): PG-Strom's multi-GPU split of row groups.
    pub devices: Vec<GpuDevice>,
}

impl GpuRuntime {
    /// The device for a partition.
    pub fn device_for(&self, partition: usize) -> Result<&GpuDevice> {
        if self.devices.is_empty() {
            return Err(GpuError::NoDevice("no device in the runtime".into()));
        }
        Ok(&self.devices[partition % self.devices.len()])
    }
}

/// The process-wide runtime, or why there is none. Fails (without panicking)
/// on machines without CUDA; operators then run their CPU plan.
pub fn runtime() -> Result<Arc<GpuRuntime>> {
    static RUNTIME: OnceLock<std::result::Result<Arc<GpuRuntime>, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let inv = discover();
            if !inv.has_device() {
                return Err(inv.cpu_only_reason.unwrap_or_else(|| "no device".into()));
            }
            let made = std::panic::catch_unwind(|| -> Result<GpuRuntime> {
                let mut devices = Vec::new();
                for info in inv.devices {
                    let ctx =
                        CudaContext::new(info.ordinal).map_err(GpuError::driver("cuCtxCreate"))?;
                    let mut streams = Vec::new();
                    for _ in 0..STREAMS_PER_DEVICE {
                        streams.push(
                            ctx.new_stream()
                                .map_err(GpuError::driver("cuStreamCreate"))?,
                        );
                    }
                    devices.push(GpuDevice { info, ctx, streams });
                }
                Ok(GpuRuntime { devices })
            });
            match made {
                Ok(Ok(rt)) => Ok(Arc::new(rt)),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("the CUDA driver panicked while creating contexts".into()),
            }
        })
        .clone()
        .map_err(GpuError::NoDevice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_never_panics_and_displays() {
        let inv = discover();
        let line = inv.to_string();
        assert!(line.starts_with("GPU: "), "{line}");
        if !inv.has_device() {
            assert!(line.contains("CPU-only"), "{line}");
            assert!(runtime().is_err());
        }
    }
}
