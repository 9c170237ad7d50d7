//! Arrow buffers → pinned staging → async copies on several streams.
//!
//! The data path of every operator:
//! 1. [`host_column`] turns an Arrow array into the device layout (values
//!    as-is for primitives, Decimal128 narrowed to int64, dictionary keys
//!    for string dictionaries) and its validity bitmap (re-aligned when the
//!    array is sliced at a bit offset).
//! 2. A [`Pipeline`] slot copies those bytes into its own pinned (page-locked)
//!    arena and issues `cuMemcpyHtoDAsync` on its own stream, then the
//!    kernel, then the device-to-host copy of the results, all on that
//!    stream. With [`crate::device::STREAMS_PER_DEVICE`] slots, batch k's
//!    copies overlap batch k-1's kernel (at least double buffering); the host
//!    waits only for the oldest slot before reusing it.
//! 3. [`ColumnCache`] keeps device copies of hot columns resident, keyed by
//!    the identity of the Arrow buffer, so a repeated scan of an in-memory
//!    table copies nothing.
//!
//! NULLs travel as Arrow validity bitmaps, bit for bit: kernels read them
//! with `eddy_is_null`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::DataType;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtrMut, PinnedHostSlice};
use parking_lot::Mutex;

use crate::codegen::DevType;
use crate::error::{GpuError, Result};
use crate::metrics::{GpuMetrics, GPU_METRICS};

/// A column in device layout, still on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostColumn {
    /// Values (bit-packed for Booleans), starting at row 0 of the batch.
    pub values: Vec<u8>,
    /// Validity bitmap starting at bit 0, or None when there is no NULL.
    pub validity: Option<Vec<u8>>,
}

fn bits_from(buf: &BooleanBuffer) -> Vec<u8> {
    if buf.offset().is_multiple_of(8) {
        let start = buf.offset() / 8;
        let len = buf.len().div_ceil(8);
        return buf.values()[start..start + len].to_vec();
    }
    // Sliced at a bit offset: re-pack from bit 0.
    let mut out = vec![0u8; buf.len().div_ceil(8)];
    for (i, b) in buf.iter().enumerate() {
        if b {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// Converts `array` (of device type `ty`) to its device layout.
pub fn host_column(array: &ArrayRef, ty: DevType) -> Result<HostColumn> {
    let validity = match array.logical_nulls() {
        Some(n) if n.null_count() > 0 => Some(bits_from(n.inner())),
        _ => None,
    };
    let values = match (array.data_type(), ty) {
        (DataType::Boolean, DevType::Bool) => bits_from(array.as_boolean().values()),
        (DataType::Decimal128(_, _), DevType::Dec64 { .. }) => {
            let a = array.as_primitive::<arrow::datatypes::Decimal128Type>();
            let mut out = Vec::with_capacity(a.len() * 8);
            for v in a.values().iter() {
                // precision <= 18 guarantees the value fits (NULL slots may
                // hold garbage: clamp them).
                let n = i64::try_from(*v).unwrap_or(0);
                out.extend_from_slice(&n.to_le_bytes());
            }
            out
        }
        (DataType::Dictionary(_, _), DevType::DictCode { .. }) => {
            let d = array.as_any_dictionary();
            primitive_bytes(d.keys(), ty.width())?
        }
        (_, t) if t.width() > 0 => primitive_bytes(array.as_ref(), t.width())?,
        (dt, t) => return Err(GpuError::Internal(format!("cannot stage {dt} as {t:?}"))),
    };
    Ok(HostColumn { values, validity })
}

fn primitive_bytes(array: &dyn Array, width: usize) -> Result<Vec<u8>> {
    let data = array.to_data();
    let buf = data.buffers().first().ok_or_else(|| {
        GpuError::Internal(format!(
            "{} array without a values buffer",
            array.data_type()
        ))
    })?;
    let start = data.offset() * width;
    let end = start + data.len() * width;
    buf.as_slice()
        .get(start..end)
        .map(|s| s.to_vec())
        .ok_or_else(|| GpuError::Internal("values buffer shorter than the array".into()))
}

/// A buffer in device memory, with its length in bytes.
#[derive(Debug)]
pub struct DeviceBuf {
    /// The allocation (typed as bytes; kernels see the C type).
    pub slice: CudaSlice<u8>,
    /// Bytes of meaningful data.
    pub len: usize,
}

/// One pipeline slot: a stream, a pinned arena and its device buffers.
#[derive(Debug)]
pub struct Slot {
    /// This slot's stream.
    pub stream: Arc<CudaStream>,
    pinned: Option<PinnedHostSlice<u8>>,
    used: usize,
    /// Device buffers kept alive until the slot's work completes.
    pub buffers: Vec<DeviceBuf>,
}

impl Slot {
    fn new(stream: Arc<CudaStream>) -> Self {
        Slot {
            stream,
            pinned: None,
            used: 0,
            buffers: Vec::new(),
        }
    }

    /// Waits for this slot's previous work, then frees its buffers.
    pub fn reset(&mut self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(GpuError::driver("cuStreamSynchronize"))?;
        self.used = 0;
        self.buffers.clear();
        Ok(())
    }

    /// Makes sure the pinned arena holds `bytes` (call after `reset`).
    pub fn reserve(&mut self, ctx: &Arc<CudaContext>, bytes: usize) -> Result<()> {
        let cap = self.pinned.as_ref().map(|p| p.len()).unwrap_or(0);
        if cap < bytes {
            if let Some(old) = self.pinned.take() {
                PinnedPool::global().give(ctx.ordinal(), old);
            }
            self.pinned = Some(PinnedPool::global().take(ctx, bytes)?);
        }
        Ok(())
    }

    /// Copies `bytes` into the pinned arena and issues an async copy to a new
    /// device buffer on this slot's stream. Returns the buffer's index in
    /// `self.buffers`.
    pub fn upload(&mut self, bytes: &[u8]) -> Result<usize> {
        let stream = Arc::clone(&self.stream);
        let mut dev = stream
            .alloc_zeros::<u8>(bytes.len().max(8))
            .map_err(GpuError::driver("cuMemAlloc"))?;
        let pinned = self
            .pinned
            .as_mut()
            .ok_or_else(|| GpuError::Internal("upload before reserve".into()))?;
        let arena = pinned
            .as_mut_slice()
            .map_err(GpuError::driver("pinned arena"))?;
        let range = self.used..self.used + bytes.len();
        let staged = arena
            .get_mut(range.clone())
            .ok_or_else(|| GpuError::Internal("pinned arena too small".into()))?;
        staged.copy_from_slice(bytes);
        self.used = range.end;
        {
            let (dst, _sync) = dev.device_ptr_mut(&stream);
            // SAFETY: `staged` is page-locked memory owned by this slot and not
            // touched again until `reset` has synchronised this stream; `dst`
            // holds at least `bytes.len()` bytes.
            unsafe { cudarc::driver::result::memcpy_htod_async(dst, &*staged, stream.cu_stream()) }
                .map_err(GpuError::driver("cuMemcpyHtoDAsync"))?;
        }
        GpuMetrics::add(&GPU_METRICS.bytes_h2d, bytes.len() as u64);
        self.buffers.push(DeviceBuf {
            slice: dev,
            len: bytes.len(),
        });
        Ok(self.buffers.len() - 1)
    }

    /// A zeroed device buffer of `len` bytes (kernel outputs).
    pub fn zeroed(&mut self, len: usize) -> Result<usize> {
        let dev = self
            .stream
            .alloc_zeros::<u8>(len.max(8))
            .map_err(GpuError::driver("cuMemAlloc"))?;
        self.buffers.push(DeviceBuf { slice: dev, len });
        Ok(self.buffers.len() - 1)
    }

    /// Copies buffer `idx` back (synchronises the stream).
    pub fn download(&self, idx: usize) -> Result<Vec<u8>> {
        let b = self
            .buffers
            .get(idx)
            .ok_or_else(|| GpuError::Internal("no such buffer".into()))?;
        let mut v = self
            .stream
            .clone_dtoh(&b.slice)
            .map_err(GpuError::driver("cuMemcpyDtoH"))?;
        v.truncate(b.len);
        GpuMetrics::add(&GPU_METRICS.bytes_d2h, b.len as u64);
        Ok(v)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // The arena goes back to the pool only once no copy reads from it.
        if self.stream.synchronize().is_ok() {
            if let Some(p) = self.pinned.take() {
                PinnedPool::global().give(self.stream.context().ordinal(), p);
            }
        }
    }
}

/// Page-locked arenas kept for reuse across operators and queries.
/// `cuMemHostAlloc` pins every page, which costs far more than the copies
/// it serves: on the first device run each operator of each partition
/// allocated its own arenas per query.
#[derive(Default)]
struct PinnedPool {
    /// (device ordinal, arena), at most [`PINNED_POOL_BYTES`] in all.
    free: Mutex<Vec<(usize, PinnedHostSlice<u8>)>>,
}

/// Page-locked memory kept in the pool when no slot uses it.
const PINNED_POOL_BYTES: usize = 4 << 30;

impl PinnedPool {
    fn global() -> &'static PinnedPool {
        static P: std::sync::OnceLock<PinnedPool> = std::sync::OnceLock::new();
        P.get_or_init(PinnedPool::default)
    }

    /// The smallest pooled arena of at least `bytes` on `ctx`'s device, or a
    /// new one (a power of two, at least 1 MiB).
    fn take(&self, ctx: &Arc<CudaContext>, bytes: usize) -> Result<PinnedHostSlice<u8>> {
        let ordinal = ctx.ordinal();
        {
            let mut free = self.free.lock();
            let best = free
                .iter()
                .enumerate()
                .filter(|(_, (o, p))| *o == ordinal && p.len() >= bytes)
                .min_by_key(|(_, (_, p))| p.len())
                .map(|(i, _)| i);
            if let Some(i) = best {
                return Ok(free.swap_remove(i).1);
            }
        }
        let n = bytes.next_power_of_two().max(1 << 20);
        // SAFETY: page-locked memory is fully written before any copy reads
        // it (`upload` copies into it first).
        unsafe { ctx.alloc_pinned::<u8>(n) }.map_err(GpuError::driver("cuMemHostAlloc"))
    }

    fn give(&self, ordinal: usize, arena: PinnedHostSlice<u8>) {
        let mut free = self.free.lock();
        let held: usize = free.iter().map(|(_, p)| p.len()).sum();
        if held + arena.len() <= PINNED_POOL_BYTES {
            free.push((ordinal, arena));
        }
    }
}

impl std::fmt::Debug for PinnedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedPool")
            .field("arenas", &self.free.lock().len())
            .finish()
    }
}

/// Round-robin slots over a device's streams; see the module doc.
#[derive(Debug)]
pub struct Pipeline {
    /// Slots, one per stream.
    pub slots: Vec<Slot>,
    /// Slot indices with work in flight, oldest first.
    pub in_flight: VecDeque<usize>,
    next: usize,
}

impl Pipeline {
    /// A pipeline over `streams` (at least two for double buffering).
    pub fn new(streams: &[Arc<CudaStream>]) -> Result<Self> {
        if streams.len() < 2 {
            return Err(GpuError::Internal(
                "a pipeline needs at least two streams".into(),
            ));
        }
        Ok(Pipeline {
            slots: streams.iter().cloned().map(Slot::new).collect(),
            in_flight: VecDeque::new(),
            next: 0,
        })
    }

    /// A pipeline on streams of its own on `dev`. Partitions run
    /// concurrently; sharing the device's streams made each partition's
    /// `reset` wait for every other partition's copies and kernels.
    pub fn for_device(dev: &crate::device::GpuDevice) -> Result<Self> {
        let streams = (0..crate::device::STREAMS_PER_DEVICE)
            .map(|_| {
                dev.ctx
                    .new_stream()
                    .map_err(GpuError::driver("cuStreamCreate"))
            })
            .collect::<Result<Vec<_>>>()?;
        Self::new(&streams)
    }

    /// The next slot to fill, after waiting for its previous work.
    pub fn next_slot(&mut self) -> Result<usize> {
        let i = self.next;
        self.next = (self.next + 1) % self.slots.len();
        self.in_flight.retain(|s| *s != i);
        self.slots[i].reset()?;
        self.in_flight.push_back(i);
        Ok(i)
    }
}

/// Device-resident copies of hot columns, bounded in bytes, LRU.
#[derive(Debug, Default)]
pub struct ColumnCache {
    inner: Mutex<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    /// (device ordinal, buffer address, length) → device copy.
    map: HashMap<(usize, usize, usize), Arc<CudaSlice<u8>>>,
    order: VecDeque<(usize, usize, usize)>,
    bytes: usize,
    limit: usize,
}

impl ColumnCache {
    /// The process-wide cache.
    pub fn global() -> &'static ColumnCache {
        static C: std::sync::OnceLock<ColumnCache> = std::sync::OnceLock::new();
        C.get_or_init(ColumnCache::default)
    }

    /// Sets the byte budget (`eddy.gpu_resident_cache_bytes`); 0 disables.
    pub fn set_limit(&self, limit: usize) {
        let mut g = self.inner.lock();
        g.limit = limit;
        evict(&mut g);
    }

    /// The resident copy of `array`'s values on device `ordinal`, uploading
    /// it on a miss when it fits the budget. Arrow buffers are immutable, so
    /// the address and length of the values buffer identify the data.
    pub fn get_or_upload(
        &self,
        ordinal: usize,
        stream: &Arc<CudaStream>,
        array: &ArrayRef,
        host: &HostColumn,
    ) -> Result<Option<Arc<CudaSlice<u8>>>> {
        let data = array.to_data();
        let Some(buf) = data.buffers().first() else {
            return Ok(None);
        };
        let key = (
            ordinal,
            buf.as_ptr() as usize + data.offset(),
            host.values.len(),
        );
        {
            let mut g = self.inner.lock();
            if g.limit == 0 || host.values.len() > g.limit {
                return Ok(None);
            }
            if let Some(s) = g.map.get(&key).cloned() {
                g.order.retain(|k| *k != key);
                g.order.push_back(key);
                return Ok(Some(s));
            }
        }
        let dev = stream
            .clone_htod(&host.values)
            .map_err(GpuError::driver("cuMemcpyHtoD (cache)"))?;
        GpuMetrics::add(&GPU_METRICS.bytes_h2d, host.values.len() as u64);
        let dev = Arc::new(dev);
        let mut g = self.inner.lock();
        g.bytes += host.values.len();
        g.map.insert(key, Arc::clone(&dev));
        g.order.push_back(key);
        evict(&mut g);
        Ok(Some(dev))
    }
}

fn evict(g: &mut CacheInner) {
    while g.bytes > g.limit {
        let Some(k) = g.order.pop_front() else { break };
        if let Some(s) = g.map.remove(&k) {
            g.bytes = g.bytes.saturating_sub(s.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Decimal128Array, Int32Array};

    #[test]
    fn stages_primitives_with_offsets_and_nulls() {
        let a: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), None, Some(3), Some(4)]));
        let s = a.slice(1, 3);
        let h = host_column(&s, DevType::I32).expect("stage");
        assert_eq!(h.values.len(), 12);
        assert_eq!(&h.values[4..8], &3i32.to_le_bytes());
        // bit 0 (the NULL) clear, bits 1 and 2 set, re-aligned from offset 1.
        assert_eq!(h.validity, Some(vec![0b110]));
    }

    #[test]
    fn stages_decimals_as_int64_and_booleans_as_bits() {
        let d: ArrayRef = Arc::new(
            Decimal128Array::from(vec![12345i128, -7])
                .with_precision_and_scale(15, 2)
                .expect("dec"),
        );
        let h = host_column(
            &d,
            DevType::Dec64 {
                precision: 15,
                scale: 2,
            },
        )
        .expect("stage");
        assert_eq!(&h.values[8..16], &(-7i64).to_le_bytes());
        assert_eq!(h.validity, None);
        let b: ArrayRef = Arc::new(BooleanArray::from(vec![true, false, true]));
        assert_eq!(
            host_column(&b, DevType::Bool).expect("bits").values,
            vec![0b101]
        );
    }
}
