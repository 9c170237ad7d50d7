// CPU stand-ins for the CUDA built-ins Eddy's kernels use, so a generated
// kernel compiles as C++ and runs over the same buffers the device would
// get (crates/gpu/tests/kernels_emulated.rs). Included before the kernel's
// own prelude; includes no system header (the prelude declares int64_t &c.
// itself, as NVRTC has no standard headers).
//
// Execution model (emu_runtime.cc): blocks run one after another; the
// threads of a block are fibers that run until they reach a barrier.
// * __syncthreads(): a fiber waits until every thread of its block is at a
//   barrier, as on the device; a thread that exits while others wait there
//   is reported (undefined on the device).
// * __ballot_sync(mask, p): waits until every lane of `mask` in its warp is
//   at a ballot, then each gets the word of all their predicates. A lane of
//   the mask that exited first is reported.
// * Atomics are plain read-modify-writes: only one fiber runs at a time and
//   fibers switch only at barriers, so each is atomic. What this cannot
//   model: interleavings between barriers (a slot seen "being written" by
//   another thread, lost updates a missing atomic would cause).
// * __shared__ arrays are one static copy, reused by each block in turn.
#pragma once

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
#define __constant__ static const
#define __launch_bounds__(n)

struct eddy_dim3 { unsigned x, y, z; };
extern "C" const eddy_dim3* eddy_emu_thread_idx();
extern "C" const eddy_dim3* eddy_emu_block_idx();
extern "C" const eddy_dim3* eddy_emu_block_dim();
extern "C" const eddy_dim3* eddy_emu_grid_dim();
extern "C" unsigned eddy_emu_ballot(unsigned mask, int pred);
extern "C" void eddy_emu_syncthreads();
#define threadIdx (*eddy_emu_thread_idx())
#define blockIdx (*eddy_emu_block_idx())
#define blockDim (*eddy_emu_block_dim())
#define gridDim (*eddy_emu_grid_dim())

inline unsigned __ballot_sync(unsigned mask, bool pred) { return eddy_emu_ballot(mask, pred ? 1 : 0); }
inline void __syncthreads() { eddy_emu_syncthreads(); }
inline void __threadfence() {}

inline int atomicExch(int* p, int v) { int o = *p; *p = v; return o; }
inline unsigned atomicExch(unsigned* p, unsigned v) { unsigned o = *p; *p = v; return o; }
inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) { unsigned o = *p; if (o == cmp) *p = v; return o; }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp, unsigned long long v) {
  unsigned long long o = *p; if (o == cmp) *p = v; return o;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
inline int atomicAdd(int* p, int v) { int o = *p; *p = (int)((unsigned)o + (unsigned)v); return o; }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; *p = o + v; return o; }
inline double atomicAdd(double* p, double v) { double o = *p; *p = o + v; return o; }
inline long long atomicMin(long long* p, long long v) { long long o = *p; if (v < o) *p = v; return o; }
inline long long atomicMax(long long* p, long long v) { long long o = *p; if (v > o) *p = v; return o; }

inline double __longlong_as_double(long long x) { double d; __builtin_memcpy(&d, &x, sizeof d); return d; }
inline long long __double_as_longlong(double d) { long long x; __builtin_memcpy(&x, &d, sizeof x); return x; }
inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * (__int128)b) >> 64); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * (unsigned __int128)b) >> 64);
}
extern "C" double fmod(double, double) noexcept;
extern "C" float fmodf(float, float) noexcept;
inline float fmod(float a, float b) { return fmodf(a, b); }
