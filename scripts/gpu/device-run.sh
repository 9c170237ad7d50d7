#!/usr/bin/env bash
# scripts/gpu/device-run.sh — the command run on the lent GPU machine for
# docs/benchmarks/gpu.md (the session of 2026-11-25). Here, first:
#   cargo build --release -p eddy-bench -p eddy-gpu --bin eddy-bench --bin eddy-gpu-check
#   echo /.gpucheck/ >> .git/info/exclude; mkdir -p .gpucheck
#   strip -o /tmp/b target/release/eddy-bench && xz -c /tmp/b > .gpucheck/eddy-bench.xz
#   xz -c target/release/eddy-gpu-check > .gpucheck/egc.xz   # symbols kept for cuda-gdb
#   cp scripts/gpu/device-run.sh .gpucheck/run.sh
# Then on the device (the `run` tool, carry [".gpucheck"]):
#   RUNS=3 SFS="1 10" MODES="mem parquet" bash .gpucheck/run.sh
# MODES: mem = tables loaded into memory first (--memory), parquet = read
# from the Parquet files on every run. Core dumps of a crashed check are
# read with cuda-gdb (a host backtrace). Logs and JSON land in $OUT.
set -u
mkdir -p /tmp/b
for f in eddy-bench egc; do [ -f .gpucheck/$f.xz ] && xz -dc .gpucheck/$f.xz > /tmp/b/$f; done
chmod +x /tmp/b/*
ulimit -c unlimited
echo "/tmp/core.%p" > /proc/sys/kernel/core_pattern 2>/dev/null || echo "cannot set core_pattern"
for sf in ${SFS:-1}; do /tmp/b/eddy-bench gen ssb --sf $sf --data /tmp/ssb >/dev/null 2>&1; done
L=$(mktemp -d); ln -s /usr/local/cuda/lib64/libnvrtc.so.13 $L/libnvrtc.so
export LD_LIBRARY_PATH=$L:/usr/local/cuda/lib64
export RUST_LOG=${RUST_LOG:-warn} RUST_BACKTRACE=1
for sf in ${SFS:-1}; do
  for mode in $MODES; do
    echo "== SF $sf $mode"
    extra=""; [ "$mode" = mem ] && extra=--memory
    timeout ${TMO:-200} /tmp/b/egc --data /tmp/ssb/ssb-sf$sf --label SF$sf --explain ${EXPLAIN:-Q1.1,Q4.1} --runs ${RUNS:-3} $extra --h2d-gbps 55.1 --d2d-gbps 2961 --json $OUT/sf$sf-$mode.json > $OUT/sf$sf-$mode.log 2>&1
    echo "rc=$?"
    grep -v "^eddy_gpu" $OUT/sf$sf-$mode.log | grep -v "^\s*$" | sort | uniq -c | sort -rn | head -12
    grep "^Q\|^query\|^SSB\|fallbacks_total\|offloaded" $OUT/sf$sf-$mode.log
  done
done
for c in /tmp/core.*; do
  [ -f "$c" ] || continue
  echo "== core $c"
  cuda-gdb -batch -ex "thread apply all bt 30" /tmp/b/egc "$c" > $OUT/core-bt.log 2>&1
  grep -n "^#\|^Thread" $OUT/core-bt.log | grep -v "tokio::runtime\|std::sys::\|futex\|clone3\|start_thread\|parking_lot_core\|syscall" | head -80
  break
done
