//! Arrow buffers → pinned staging → async copies on several streams.
//!
//! The data path of every operator:
//! 1. [`write_values`] and [`write_validity`] lay an Arrow array out for
//!    the device (values as-is for primitives, Decimal128 narrowed to int64,
//!    dictionary keys for string dictionaries; validity bitmaps re-aligned
//!    when the array is sliced at a bit offset), writing straight into a
//!    [`Pipeline`] slot's pinned (page-locked) arena: one host copy.
//! 2. The slot issues `cuMemcpyHtoDAsync` on its own stream, then the
//!    kernel, then the device-to-host copies of the results into the same
//!    arena ([`Slot::fetch`]), all on that stream; the host waits once. With [`crate::device::STREAMS_PER_DEVICE`] slots, batch k's
//!    copies overlap batch k-1's kernel (at least double buffering); the host
//!    waits only for the oldest slot before reusing it.
//!
//! Columns uploaded once and kept on the device (build columns, resident
//! fact columns: `crate::resident`) go through [`upload_column`].
//!
//! NULLs travel as Arrow validity bitmaps, bit for bit: kernels read them
//! with `eddy_is_null`.

use std::collections::VecDeque;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::DataType;
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, PinnedHostSlice,
};
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

/// Writes the bits of `buf` into `dst` starting at bit 0 (`dst` holds
/// `buf.len().div_ceil(8)` bytes).
fn bits_into(buf: &BooleanBuffer, dst: &mut [u8]) -> Result<()> {
    let len = buf.len().div_ceil(8);
    let dst = dst
        .get_mut(..len)
        .ok_or_else(|| GpuError::Internal("bitmap destination too short".into()))?;
    if buf.offset().is_multiple_of(8) {
        let start = buf.offset() / 8;
        let src = buf
            .values()
            .get(start..start + len)
            .ok_or_else(|| GpuError::Internal("bitmap shorter than its array".into()))?;
        dst.copy_from_slice(src);
        return Ok(());
    }
    // Sliced at a bit offset: re-pack from bit 0.
    dst.fill(0);
    for (i, b) in buf.iter().enumerate() {
        if b {
            dst[i / 8] |= 1 << (i % 8);
        }
    }
    Ok(())
}

/// The validity bitmap to stage for `array`: None when it has no NULL.
fn staged_nulls(array: &ArrayRef) -> Option<arrow::buffer::NullBuffer> {
    array.logical_nulls().filter(|n| n.null_count() > 0)
}

/// Bytes `array` takes in device layout as `ty`: (values, validity; 0 when
/// there is no NULL).
pub fn staged_len(array: &ArrayRef, ty: DevType) -> Result<(usize, usize)> {
    let n = array.len();
    let values = match (array.data_type(), ty) {
        (DataType::Boolean, DevType::Bool) => n.div_ceil(8),
        (DataType::Decimal128(_, _), DevType::Dec64 { .. }) => n * 8,
        (_, t) if t.width() > 0 => n * t.width(),
        (dt, t) => return Err(GpuError::Internal(format!("cannot stage {dt} as {t:?}"))),
    };
    let validity = staged_nulls(array).map_or(0, |_| n.div_ceil(8));
    Ok((values, validity))
}

/// Writes `array`'s values in device layout (`ty`) into `dst`, which holds
/// the values length [`staged_len`] gives. One copy, straight from the Arrow
/// buffer: the caller passes the pinned arena itself.
pub fn write_values(array: &ArrayRef, ty: DevType, dst: &mut [u8]) -> Result<()> {
    match (array.data_type(), ty) {
        (DataType::Boolean, DevType::Bool) => bits_into(array.as_boolean().values(), dst),
        (DataType::Decimal128(_, _), DevType::Dec64 { .. }) => {
            let a = array.as_primitive::<arrow::datatypes::Decimal128Type>();
            if dst.len() < a.len() * 8 {
                return Err(GpuError::Internal("decimal destination too short".into()));
            }
            for (v, out) in a.values().iter().zip(dst.chunks_exact_mut(8)) {
                // precision <= 18 guarantees the value fits (NULL slots may
                // hold garbage: clamp them).
                let n = i64::try_from(*v).unwrap_or(0);
                out.copy_from_slice(&n.to_le_bytes());
            }
            Ok(())
        }
        (DataType::Dictionary(_, _), DevType::DictCode { .. }) => {
            let d = array.as_any_dictionary();
            primitive_into(d.keys(), ty.width(), dst)
        }
        (_, t) if t.width() > 0 => primitive_into(array.as_ref(), t.width(), dst),
        (dt, t) => Err(GpuError::Internal(format!("cannot stage {dt} as {t:?}"))),
    }
}

/// Writes `array`'s validity bitmap from bit 0 into `dst` (only called when
/// [`staged_len`] gave a validity length).
pub fn write_validity(array: &ArrayRef, dst: &mut [u8]) -> Result<()> {
    match staged_nulls(array) {
        Some(n) => bits_into(n.inner(), dst),
        None => Err(GpuError::Internal("no validity bitmap to stage".into())),
    }
}

/// A column kept on the device: values, and validity (None: no NULLs).
pub(crate) type KeptColumn = (
    Arc<cudarc::driver::CudaSlice<u8>>,
    Option<Arc<cudarc::driver::CudaSlice<u8>>>,
);

/// `host` copied to the device on `stream` for keeping (an empty buffer
/// as 8 zero bytes, so that every column has an address), counted in
/// `eddy_gpu_h2d_bytes_total`: values, and validity when there are NULLs.
/// The copies are queued: synchronise `stream` before another stream
/// reads them.
pub(crate) fn upload_column(
    stream: &Arc<cudarc::driver::CudaStream>,
    host: &HostColumn,
    during: &'static str,
) -> Result<KeptColumn> {
    let up = |b: &[u8]| -> Result<Arc<cudarc::driver::CudaSlice<u8>>> {
        let b = if b.is_empty() { &[0u8; 8][..] } else { b };
        crate::metrics::GpuMetrics::add(&crate::metrics::GPU_METRICS.bytes_h2d, b.len() as u64);
        Ok(Arc::new(
            stream.clone_htod(b).map_err(GpuError::driver(during))?,
        ))
    };
    let values = up(&host.values)?;
    let validity = host.validity.as_deref().map(up).transpose()?;
    Ok((values, validity))
}

/// Converts `array` (of device type `ty`) to its device layout in host
/// memory (what [`Slot::upload_with`] writes into the pinned arena).
pub fn host_column(array: &ArrayRef, ty: DevType) -> Result<HostColumn> {
    let (values_len, validity_len) = staged_len(array, ty)?;
    let mut values = vec![0u8; values_len];
    write_values(array, ty, &mut values)?;
    let validity = if validity_len > 0 {
        let mut v = vec![0u8; validity_len];
        write_validity(array, &mut v)?;
        Some(v)
    } else {
        None
    };
    Ok(HostColumn { values, validity })
}

fn primitive_into(array: &dyn Array, width: usize, dst: &mut [u8]) -> Result<()> {
    let data = array.to_data();
    let buf = data.buffers().first().ok_or_else(|| {
        GpuError::Internal(format!(
            "{} array without a values buffer",
            array.data_type()
        ))
    })?;
    let start = data.offset() * width;
    let end = start + data.len() * width;
    let src = buf
        .as_slice()
        .get(start..end)
        .ok_or_else(|| GpuError::Internal("values buffer shorter than the array".into()))?;
    dst.get_mut(..src.len())
        .ok_or_else(|| GpuError::Internal("values destination too short".into()))?
        .copy_from_slice(src);
    Ok(())
}

/// A buffer in device memory, with its length in bytes.
#[derive(Debug)]
pub struct DeviceBuf {
    /// The allocation (typed as bytes; kernels see the C type).
    pub slice: CudaSlice<u8>,
    /// Bytes of meaningful data.
    pub len: usize,
}

/// Where a [`Slot::fetch`] landed in the slot's pinned arena.
#[derive(Debug, Clone)]
pub struct Fetched {
    range: std::ops::Range<usize>,
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
        self.upload_with(bytes.len(), |dst| {
            dst.copy_from_slice(bytes);
            Ok(())
        })
    }

    /// Lets `fill` write `len` bytes straight into the pinned arena, then
    /// issues an async copy of them to a new device buffer on this slot's
    /// stream (one host copy per column: Arrow buffer -> pinned arena).
    /// Returns the buffer's index in `self.buffers`.
    pub fn upload_with(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<usize> {
        let stream = Arc::clone(&self.stream);
        let mut dev = stream
            .alloc_zeros::<u8>(len.max(8))
            .map_err(GpuError::driver("cuMemAlloc"))?;
        let range = self.used..self.used + len;
        let staged = self.arena_mut(range.clone())?;
        fill(staged)?;
        {
            let (dst, _sync) = dev.device_ptr_mut(&stream);
            // SAFETY: `staged` is page-locked memory owned by this slot and not
            // touched again until `reset` has synchronised this stream; `dst`
            // holds at least `len` bytes.
            unsafe { cudarc::driver::result::memcpy_htod_async(dst, &*staged, stream.cu_stream()) }
                .map_err(GpuError::driver("cuMemcpyHtoDAsync"))?;
        }
        self.used = range.end;
        GpuMetrics::add(&GPU_METRICS.bytes_h2d, len as u64);
        self.buffers.push(DeviceBuf { slice: dev, len });
        Ok(self.buffers.len() - 1)
    }

    /// Bytes `range` of the pinned arena.
    fn arena_mut(&mut self, range: std::ops::Range<usize>) -> Result<&mut [u8]> {
        let pinned = self
            .pinned
            .as_mut()
            .ok_or_else(|| GpuError::Internal("pinned arena used before reserve".into()))?;
        pinned
            .as_mut_slice()
            .map_err(GpuError::driver("pinned arena"))?
            .get_mut(range)
            .ok_or_else(|| GpuError::Internal("pinned arena too small".into()))
    }

    /// Issues an async copy of buffer `idx` into the pinned arena (reserve
    /// room for it with the rest of the slot's bytes). Its bytes are read
    /// with [`Slot::fetched`] after [`Slot::wait`]; one wait serves every
    /// copy, and none goes through pageable memory.
    pub fn fetch(&mut self, idx: usize) -> Result<Fetched> {
        let stream = Arc::clone(&self.stream);
        let len = self
            .buffers
            .get(idx)
            .ok_or_else(|| GpuError::Internal("no such buffer".into()))?
            .len;
        let range = self.used..self.used + len;
        // Split borrows: the arena and the device buffer are distinct fields.
        let pinned = self
            .pinned
            .as_mut()
            .ok_or_else(|| GpuError::Internal("pinned arena used before reserve".into()))?;
        let dst = pinned
            .as_mut_slice()
            .map_err(GpuError::driver("pinned arena"))?
            .get_mut(range.clone())
            .ok_or_else(|| GpuError::Internal("pinned arena too small".into()))?;
        let b = self
            .buffers
            .get(idx)
            .ok_or_else(|| GpuError::Internal("no such buffer".into()))?;
        {
            let (src, _sync) = b.slice.device_ptr(&stream);
            // SAFETY: `dst` is page-locked memory of this slot, read only
            // after `wait` has synchronised this stream; `src` holds `len`
            // bytes written by this stream's kernel, ordered before the copy.
            unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, stream.cu_stream()) }
                .map_err(GpuError::driver("cuMemcpyDtoHAsync"))?;
        }
        self.used = range.end;
        GpuMetrics::add(&GPU_METRICS.bytes_d2h, len as u64);
        Ok(Fetched { range })
    }

    /// Waits for everything issued on this slot's stream.
    pub fn wait(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(GpuError::driver("cuStreamSynchronize"))
    }

    /// The bytes of a [`Slot::fetch`], after [`Slot::wait`].
    pub fn fetched(&self, f: &Fetched) -> Result<&[u8]> {
        let pinned = self
            .pinned
            .as_ref()
            .ok_or_else(|| GpuError::Internal("pinned arena used before reserve".into()))?;
        pinned
            .as_slice()
            .map_err(GpuError::driver("pinned arena"))?
            .get(f.range.clone())
            .ok_or_else(|| GpuError::Internal("fetched range outside the arena".into()))
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
    fn writes_into_a_used_arena_without_leaking_its_old_bytes() {
        // The pinned arena is reused across chunks: a re-packed bitmap must
        // clear the bits its rows do not set, and the lengths staged_len
        // gives must be exactly what the writers fill.
        let a: ArrayRef = Arc::new(Int32Array::from(vec![
            Some(1),
            None,
            Some(3),
            None,
            Some(5),
        ]));
        let s = a.slice(1, 4);
        let (values, validity) = staged_len(&s, DevType::I32).expect("sizes");
        assert_eq!((values, validity), (16, 1));
        let mut arena = vec![0xffu8; values + validity + 3];
        let (v, rest) = arena.split_at_mut(values);
        write_values(&s, DevType::I32, v).expect("values");
        write_validity(&s, rest).expect("validity");
        assert_eq!(&arena[4..8], &3i32.to_le_bytes());
        assert_eq!(arena[values], 0b1010);
        assert_eq!(
            &arena[values + 1..],
            &[0xff; 3],
            "bytes past the bitmap untouched"
        );
        let short = &mut [0u8; 15];
        assert!(write_values(&s, DevType::I32, short).is_err());
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
