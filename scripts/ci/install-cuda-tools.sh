#!/usr/bin/env bash
# Installs NVIDIA's CUDA compilers from PyPI into target/cuda-tools/
# (git-ignored), so the kernel compile test (crates/gpu/tests/kernels_compile.rs)
# can compile every generated kernel for real devices on a machine without a
# GPU or a CUDA toolkit. Idempotent: a second run only checks.
#
#   nvidia-cuda-nvrtc-cu12  libnvrtc.so.12 + libnvrtc-builtins   (Eddy's own compile path)
#   nvidia-cuda-nvcc-cu12   ptxas                                (PTX -> SASS for sm_80, sm_90)
#
# Stable layout the test reads (EDDY_CUDA_TOOLS overrides the directory):
#   target/cuda-tools/lib/libnvrtc.so*  symlinks to the wheel's libraries
#   target/cuda-tools/bin/ptxas         symlink to the wheel's ptxas
#
# Skipped with a notice when python3/pip are missing; the test then fails in
# CI (EDDY_REQUIRE_NVRTC=1) and skips elsewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=target/cuda-tools

# 12.8+ NVRTC knows sm_90 and sm_100; ptxas comes from the same release.
PKGS=("nvidia-cuda-nvrtc-cu12==12.9.86" "nvidia-cuda-nvcc-cu12==12.9.86")

ready() {
  [ -e "$DEST/lib/libnvrtc.so" ] && [ -x "$DEST/bin/ptxas" ] && "$DEST/bin/ptxas" --version >/dev/null 2>&1
}

if ready; then
  echo "cuda tools: $DEST (nvrtc, ptxas)"
  exit 0
fi

if ! command -v python3 >/dev/null 2>&1; then
  echo "notice: python3 missing; CUDA kernels cannot be compiled in the tests"
  exit 0
fi

mkdir -p "$DEST"
if [ ! -d "$DEST/site/nvidia/cuda_nvrtc" ] || [ ! -d "$DEST/site/nvidia/cuda_nvcc" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$DEST/site" --upgrade "${PKGS[@]}" \
    || { echo "notice: could not install the CUDA compiler wheels"; exit 0; }
fi

NVRTC_LIB="$DEST/site/nvidia/cuda_nvrtc/lib"
PTXAS="$DEST/site/nvidia/cuda_nvcc/bin/ptxas"
mkdir -p "$DEST/lib" "$DEST/bin"
real=$(ls "$NVRTC_LIB"/libnvrtc.so.* 2>/dev/null | grep -v builtins | head -n1 || true)
if [ -z "$real" ] || [ ! -f "$PTXAS" ]; then
  echo "notice: CUDA compiler wheels installed without libnvrtc or ptxas"
  exit 0
fi
chmod +x "$PTXAS"
# cudarc's dynamic loading asks for libnvrtc.so and versioned names; the
# builtins library is found next to the real libnvrtc (its own RPATH).
# Relative links: the checkout may move.
for name in libnvrtc.so libnvrtc.so.12 "$(basename "$real")"; do
  ln -sfn "../site/nvidia/cuda_nvrtc/lib/$(basename "$real")" "$DEST/lib/$name"
done
for b in "$NVRTC_LIB"/libnvrtc-builtins.so*; do
  ln -sfn "../site/nvidia/cuda_nvrtc/lib/$(basename "$b")" "$DEST/lib/$(basename "$b")"
done
ln -sfn ../site/nvidia/cuda_nvcc/bin/ptxas "$DEST/bin/ptxas"

if ready; then
  echo "cuda tools: $DEST (nvrtc, ptxas)"
else
  echo "notice: ptxas from the CUDA wheel does not run here"
fi
