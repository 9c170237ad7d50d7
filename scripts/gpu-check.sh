#!/usr/bin/env bash
# scripts/gpu-check.sh — Eddy's GPU check, in one run, on a machine with an
# NVIDIA GPU (the lent device machine):
#   1. measures the ceilings: device-to-device copy bandwidth (bytes read +
#      written) and pinned host-to-device bandwidth, with a tiny CUDA program
#      built by nvcc (CuPy as a fallback);
#   2. for each scale factor (default 1 and 10): generates SSB data with
#      `eddy bench gen ssb --sf N --data DIR` (or `eddy-bench gen ssb ...`;
#      written to DIR/ssb-sfN/<table>/part-*.parquet) unless already there,
#      then runs the 13 SSB
#      queries with the GPU off and on through `eddy-gpu-check`, which fails
#      when any GPU answer differs from the CPU answer;
#   3. prints a short table last: per query CPU and GPU time, rows/s, GB/s and
#      the fraction of the host-to-device ceiling.
#
# Usage:
#   scripts/gpu-check.sh [--eddy target/release/eddy | --bench target/release/eddy-bench] \
#                        [--check target/release/eddy-gpu-check] \
#                        [--sf "1 10"] [--data DIR] [--runs 3] [--out DIR]
# Build first (on any x86-64 machine; no CUDA needed to build):
#   cargo build --release -p eddy-server -p eddy-bench -p eddy-gpu
# Exit status: 0 all answers equal, 1 a GPU answer differs, 2 setup error.
set -euo pipefail

EDDY=target/release/eddy
BENCH=""
CHECK=target/release/eddy-gpu-check
SFS="1 10"
DATA=${TMPDIR:-/tmp}/eddy-ssb
RUNS=3
OUTDIR=${OUT:-${TMPDIR:-/tmp}/eddy-gpu-check-out}

while [ $# -gt 0 ]; do
  case "$1" in
    --eddy) EDDY=$2; shift 2 ;;
    --bench) BENCH=$2; shift 2 ;;
    --check) CHECK=$2; shift 2 ;;
    --sf) SFS=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUTDIR" "$DATA"
[ -x "$CHECK" ] || { echo "gpu-check: $CHECK not found (cargo build --release -p eddy-gpu)" >&2; exit 2; }

echo "== device"
nvidia-smi -L 2>/dev/null || echo "nvidia-smi not available"

# cudarc opens libnvrtc by its unversioned or .12 name; CUDA 13 toolkits
# (and pip wheels) may ship only libnvrtc.so.13: give it the plain name.
LIBDIR=$(mktemp -d)
for pat in 'libnvrtc.so' 'libnvrtc.so.1[0-9]*' ; do
  f=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu \
           /opt /usr/local/lib/python3*/dist-packages 2>/dev/null -name "$pat" -type f 2>/dev/null | head -1 || true)
  if [ -n "$f" ]; then ln -sf "$f" "$LIBDIR/libnvrtc.so"; break; fi
done
# NVRTC loads its builtins library from beside itself.
if [ -L "$LIBDIR/libnvrtc.so" ]; then
  for b in "$(dirname "$(readlink -f "$LIBDIR/libnvrtc.so")")"/libnvrtc-builtins.so*; do
    [ -e "$b" ] && ln -sf "$b" "$LIBDIR/$(basename "$b")"
  done
fi
export LD_LIBRARY_PATH="$LIBDIR:${LD_LIBRARY_PATH:-}"

echo "== ceilings"
H2D=""; D2D=""
WORK=$(mktemp -d)
CEIL_SRC="$WORK/ceilings.cu"
cat > "$CEIL_SRC" <<'CU'
#include <cstdio>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
int main() {
  const size_t bytes = 1ull << 30;
  void *a, *b, *h;
  CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes)); CK(cudaMallocHost(&h, bytes));
  CK(cudaMemset(a, 1, bytes)); memset(h, 1, bytes);
  cudaEvent_t s, e; CK(cudaEventCreate(&s)); CK(cudaEventCreate(&e));
  float ms, best_d2d = 1e30f, best_h2d = 1e30f;
  for (int i = 0; i < 6; i++) {  // first run is the warm-up
    CK(cudaEventRecord(s)); CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); CK(cudaEventRecord(e));
    CK(cudaEventSynchronize(e)); CK(cudaEventElapsedTime(&ms, s, e)); if (i && ms < best_d2d) best_d2d = ms;
    CK(cudaEventRecord(s)); CK(cudaMemcpyAsync(a, h, bytes, cudaMemcpyHostToDevice)); CK(cudaEventRecord(e));
    CK(cudaEventSynchronize(e)); CK(cudaEventElapsedTime(&ms, s, e)); if (i && ms < best_h2d) best_h2d = ms;
  }
  // D2D counts bytes read plus bytes written.
  printf("D2D_GBPS=%.1f\nH2D_GBPS=%.1f\n", 2.0 * bytes / best_d2d / 1e6, bytes / best_h2d / 1e6);
  return 0;
}
CU
if command -v nvcc >/dev/null 2>&1 && nvcc -O2 -o "$WORK/ceilings" "$CEIL_SRC" 2>"$WORK/nvcc.log"; then
  "$WORK/ceilings" | tee "$OUTDIR/ceilings.txt" || true
elif command -v python3 >/dev/null 2>&1; then
  python3 - <<'PY' | tee "$OUTDIR/ceilings.txt" || true
import cupy as cp, numpy as np
n = 1 << 30
a = cp.ones(n, dtype=cp.uint8); b = cp.empty_like(a)
h = cp.cuda.alloc_pinned_memory(n); hv = np.frombuffer(h, dtype=np.uint8, count=n); hv[:] = 1
s, e = cp.cuda.Event(), cp.cuda.Event()
def best(f):
    t = []
    for i in range(6):
        s.record(); f(); e.record(); e.synchronize(); t.append(cp.cuda.get_elapsed_time(s, e))
    return min(t[1:])
print("D2D_GBPS=%.1f" % (2 * n / best(lambda: b.__setitem__(slice(None), a)) / 1e6))
print("H2D_GBPS=%.1f" % (n / best(lambda: a.set(hv)) / 1e6))
PY
fi
if [ -f "$OUTDIR/ceilings.txt" ]; then
  D2D=$(sed -n 's/^D2D_GBPS=//p' "$OUTDIR/ceilings.txt")
  H2D=$(sed -n 's/^H2D_GBPS=//p' "$OUTDIR/ceilings.txt")
fi

status=0
: > "$OUTDIR/tables.txt"
for sf in $SFS; do
  dir="$DATA/ssb-sf$sf"
  if ! ls "$dir" 2>/dev/null | grep -q lineorder; then
    echo "== generating SSB SF $sf into $dir"
    if [ -n "$BENCH" ] && [ -x "$BENCH" ]; then gen=("$BENCH" gen ssb)
    elif [ -x "$EDDY" ]; then gen=("$EDDY" bench gen ssb)
    else echo "gpu-check: no generator ($EDDY / --bench) and no data in $dir" >&2; exit 2; fi
    "${gen[@]}" --sf "$sf" --data "$DATA" || { echo "gpu-check: data generation failed" >&2; exit 2; }
  fi
  echo "== SSB SF $sf: 13 queries, GPU off vs on, $RUNS runs each"
  args=(--data "$dir" --label "SF$sf" --runs "$RUNS" --json "$OUTDIR/gpu-check-sf$sf.json")
  [ -n "$H2D" ] && args+=(--h2d-gbps "$H2D")
  [ -n "$D2D" ] && args+=(--d2d-gbps "$D2D")
  set +e
  RUST_LOG=${RUST_LOG:-warn} "$CHECK" "${args[@]}" > "$OUTDIR/sf$sf.log" 2>&1
  rc=$?
  set -e
  cat "$OUTDIR/sf$sf.log"
  sed -n '/^SSB /,/^query/{p}; /^Q[1-4]\./p' "$OUTDIR/sf$sf.log" >> "$OUTDIR/tables.txt"
  if [ $rc -ne 0 ]; then status=$rc; echo "gpu-check: SF $sf exit status $rc" >&2; fi
done

echo
echo "== summary (ceilings: device-to-device ${D2D:-?} GB/s, pinned host-to-device ${H2D:-?} GB/s)"
cat "$OUTDIR/tables.txt"
if [ $status -eq 0 ]; then echo "RESULT: all GPU answers equal the CPU answers"; else echo "RESULT: FAILED (status $status)"; fi
exit $status
