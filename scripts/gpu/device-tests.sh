#!/usr/bin/env bash
# scripts/gpu/device-tests.sh — the GPU operators' device tests
# (crates/gpu/tests/kernels_on_device.rs) on the lent GPU machine, from a
# test binary built here; nothing is built on the device. Here, first:
#   cargo test -p eddy-gpu --test kernels_on_device --no-run   # prints the binary's path
#   mkdir -p .gpucheck && strip -o /tmp/kod target/debug/deps/kernels_on_device-<hash> \
#     && xz -T2 -c /tmp/kod > .gpucheck/kod.xz
# Then on the device (the `run` tool, carry [".gpucheck"]):
#   bash scripts/gpu/device-tests.sh
# The binary runs with EDDY_REQUIRE_DEVICE=1 (a missing device fails it)
# and one test at a time (the launch counters are process-wide). Its log
# lands in $OUT/device-tests.log; the last lines printed are the verdicts.
set -u
mkdir -p /tmp/b
xz -dc .gpucheck/kod.xz > /tmp/b/kod && chmod +x /tmp/b/kod || exit 2
# cudarc opens NVRTC by its plain or .12 name; the device has CUDA 13's.
L=$(mktemp -d)
nvrtc=$(ls /usr/local/cuda/lib64/libnvrtc.so.1[0-9]* 2>/dev/null | head -1)
[ -n "$nvrtc" ] && ln -s "$nvrtc" "$L/libnvrtc.so"
export LD_LIBRARY_PATH=$L:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export EDDY_REQUIRE_DEVICE=1 RUST_BACKTRACE=1 RUST_LOG=${RUST_LOG:-warn}
nvidia-smi -L
# The manifest dir the binary was built with does not exist here: run from
# the crate's folder of this copy so relative paths resolve alike.
cd crates/gpu
timeout ${TMO:-400} /tmp/b/kod --test-threads=1 --nocapture > "${OUT:-/tmp}/device-tests.log" 2>&1
rc=$?
cd - >/dev/null
grep -E "^(GPU:|DIFFERENT|FELL BACK)|launches kernels|answers differ|test result|panicked" "${OUT:-/tmp}/device-tests.log" | head -80
grep -c "^equal" "${OUT:-/tmp}/device-tests.log"
echo "device-tests rc=$rc"
exit $rc
