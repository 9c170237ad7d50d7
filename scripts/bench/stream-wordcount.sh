#!/usr/bin/env bash
# WordCount throughput (MB/s of input) on a 1 GB Zipf text, parallelism 2:
#   (1) Eddy's stream engine      eddy-stream wordcount --parallelism 2
#   (2) Apache Flink DataStream    bench/flink-wordcount (local mini-cluster; FLINK_MODE
#                                  streaming (default: keyBy.sum, the faster of the two
#                                  here) or batch (final counts only, like Eddy's job))
#   (3) single-threaded hash map   eddy-stream wordcount-baseline (the ceiling)
# All three are run in the same invocation, interleaved, RUNS times each
# (default 3); the median of each is reported. Results: docs/benchmarks/stream.md.
#
# Usage: scripts/bench/stream-wordcount.sh [RUNS]
# Env:   MB (corpus size in 10^6 bytes, default 1000), PARALLELISM (default 2),
#        SKIP_FLINK=1 to leave Flink out, LATENCY=1 / NEXMARK=1 to also run
#        the latency and one Nexmark figure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
RUNS="${1:-3}"
MB="${MB:-1000}"
P="${PARALLELISM:-2}"
FLINK_MODE="${FLINK_MODE:-streaming}"
DATA="$ROOT/bench-data/stream"
CORPUS="$DATA/zipf-${MB}mb.txt"
BIN="$ROOT/target-stream/release/eddy-stream"
JAR="$ROOT/bench/flink-wordcount/target/flink-wordcount-0.1.0.jar"

echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
echo "== build (release)"
CARGO_TARGET_DIR=target-stream cargo build --release -p eddy-stream -j 1
if [[ "${SKIP_FLINK:-0}" != 1 && ! -f "$JAR" ]]; then
    (cd bench/flink-wordcount && mvn -q -B -DskipTests package)
fi

mkdir -p "$DATA"
if [[ ! -f "$CORPUS" ]]; then
    echo "== generating $CORPUS"
    "$BIN" gen-text --output "$CORPUS" --mb "$MB" --words 50000 --seed 42
fi
# warm the page cache so every run reads from memory
cat "$CORPUS" > /dev/null

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }

eddy=() flink=() base=()
for i in $(seq 1 "$RUNS"); do
    echo "== run $i/$RUNS"
    out=$("$BIN" wordcount --input "$CORPUS" --parallelism "$P" --quiet)
    echo "$out"
    eddy+=("$(sed -n 's/.*= \([0-9.]*\) MB\/s.*/\1/p' <<<"$out")")
    if [[ "${SKIP_FLINK:-0}" != 1 ]]; then
        out=$(java -Xmx4g -cp "$JAR" eddy.bench.WordCount "$CORPUS" "$P" "$FLINK_MODE")
        echo "$out"
        flink+=("$(sed -n 's/.*MB\/s=\([0-9.]*\).*/\1/p' <<<"$out")")
    fi
    out=$("$BIN" wordcount-baseline --input "$CORPUS")
    echo "$out"
    base+=("$(sed -n 's/.*= \([0-9.]*\) MB\/s.*/\1/p' <<<"$out")")
done

echo "== medians of $RUNS runs, MB/s of input ($MB MB, parallelism $P)"
printf 'eddy      %s   (runs: %s)\n' "$(printf '%s\n' "${eddy[@]}" | median)" "${eddy[*]}"
if [[ "${SKIP_FLINK:-0}" != 1 ]]; then
    printf 'flink(%s) %s   (runs: %s)\n' "$FLINK_MODE" "$(printf '%s\n' "${flink[@]}" | median)" "${flink[*]}"
fi
printf 'baseline  %s   (runs: %s)\n' "$(printf '%s\n' "${base[@]}" | median)" "${base[*]}"

if [[ "${LATENCY:-0}" == 1 ]]; then
    echo "== latency"
    "$BIN" latency --rate 40000 --seconds 30 --quiet
fi
if [[ "${NEXMARK:-0}" == 1 ]]; then
    echo "== nexmark"
    "$BIN" nexmark --query q5 --events 10000000 --parallelism "$P" --quiet
fi
