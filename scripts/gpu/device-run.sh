#!/usr/bin/env bash
# scripts/gpu/device-run.sh — the command run on the lent GPU machine for
# docs/benchmarks/gpu.md (the session of 2026-11-25). Here, first:
#   cargo build --release -p eddy-bench -p eddy-gpu --bin eddy-bench --bin eddy-gpu-check
#   echo /.gpucheck/ >> .git/info/exclude; mkdir -p .gpucheck
#   strip -o /tmp/b target/release/eddy-bench && xz -c /tmp/b > .gpucheck/eddy-bench.xz
#   xz -c target/release/eddy-gpu-check > .gpucheck/egc.xz   # symbols kept for cuda-gdb
#   cp scripts/gpu/device-run.sh .gpucheck/run.sh
#   (for the server pass: strip -o /tmp/e target/release/eddy && xz -T2 -c /tmp/e > .gpucheck/eddy.xz,
#    and psycopg's wheels in .whl/, see the device README)
# Then on the device (the `run` tool, carry [".gpucheck"] (and ".whl")):
#   RUNS=3 SFS="1 10" MODES="mem parquet" bash .gpucheck/run.sh
# MODES: mem = tables loaded into memory first (--memory), parquet = read
# from the Parquet files on every run, server = SSB through `eddy server`
# over Eddy's own tables (`eddy bench ssb --engines eddy-gpu`: one load,
# the 13 queries with eddy.gpu off then on, answers compared), then
# EXPLAIN ANALYZE of $EXPLAIN through the server and the server's eddy_gpu_*
# metrics. Core dumps of a crashed check are read with cuda-gdb (a host
# backtrace). Logs and JSON land in $OUT.
set -u
mkdir -p /tmp/b
for f in eddy-bench egc eddy; do [ -f .gpucheck/$f.xz ] && xz -dc .gpucheck/$f.xz > /tmp/b/$f; done
chmod +x /tmp/b/*
ulimit -c unlimited
echo "/tmp/core.%p" > /proc/sys/kernel/core_pattern 2>/dev/null || echo "cannot set core_pattern"
GEN=/tmp/b/eddy-bench; [ -x $GEN ] || GEN="/tmp/b/eddy bench"
for sf in ${SFS:-1}; do $GEN gen ssb --sf $sf --data /tmp/ssb >/dev/null 2>&1; done
L=$(mktemp -d); ln -s /usr/local/cuda/lib64/libnvrtc.so.13 $L/libnvrtc.so
export LD_LIBRARY_PATH=$L:/usr/local/cuda/lib64
export RUST_LOG=${RUST_LOG:-warn} RUST_BACKTRACE=1
server_pass() {  # $1 = scale factor
  local sf=$1 port=5433 http=8080
  rm -rf /tmp/eddy-data
  /tmp/b/eddy server --data-dir /tmp/eddy-data --pg-addr 127.0.0.1:$port \
    --http-addr 127.0.0.1:$http --auth trust > $OUT/server-sf$sf.log 2>&1 &
  local pid=$!
  for _ in $(seq 60); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 1; done
  timeout ${TMO:-400} /tmp/b/eddy bench ssb --sf $sf --engines eddy-gpu --eddy-addr 127.0.0.1:$port \
    --data /tmp/ssb --out $OUT --no-chart --runs ${RUNS:-3} --threads $(nproc) --load-connections 8 \
    > $OUT/bench-sf$sf.log 2>&1
  echo "bench rc=$?"
  grep -v "^\s*$" $OUT/bench-sf$sf.log | tail -30
  if [ -d .whl ] && [ -n "${EXPLAIN_SERVER:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python3 scripts/gpu/server-explain.py 127.0.0.1:$port crates/bench/queries/ssb \
      "$EXPLAIN_SERVER" >> $OUT/bench-sf$sf.log 2>&1
    grep -E "^== |Gpu|kept on the CPU|error" $OUT/bench-sf$sf.log | cut -c1-200 | head -60
  fi
  python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:$http/metrics').read().decode())" \
    | grep "^eddy_gpu" | grep -v " 0$" | head -40
  kill $pid; wait $pid 2>/dev/null
  grep -ciE "warn|error" $OUT/server-sf$sf.log; grep -iE "warn|error" $OUT/server-sf$sf.log | sort | uniq -c | sort -rn | head -8
}
for sf in ${SFS:-1}; do
  for mode in $MODES; do
    if [ "$mode" = server ]; then echo "== SF $sf server"; server_pass $sf; continue; fi
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
