#!/usr/bin/env bash
# A/B: tpcb-like at 8 and 32 clients for two eddy binaries, interleaved.
# Usage: ab-tpcb.sh BIN_A BIN_B SECONDS ROUNDS
set -u
cd "$(dirname "$0")/../.."
A=$1; B=$2; DUR=${3:-10}; ROUNDS=${4:-2}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export PGSSLMODE=disable
for r in $(seq $ROUNDS); do
 for bin in $A $B; do
  D=$(mktemp -d); P=$(free_port)
  EDDY_LOG=warn $bin server --data-dir $D --pg-addr 127.0.0.1:$P --http-addr 127.0.0.1:$(free_port) --auth trust >$D.log 2>&1 &
  pid=$!
  for i in $(seq 100); do psql -h 127.0.0.1 -p $P -U eddy eddy -c 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
  pgbench -h 127.0.0.1 -p $P -U eddy -i -s 1 -q eddy >/dev/null 2>&1
  for c in 8 32; do
    t=$(pgbench -h 127.0.0.1 -p $P -U eddy -n -M prepared -c $c -j 2 -T $DUR eddy 2>&1 | awk '/^tps/ {print $3}')
    echo "round=$r bin=$(basename $bin) c=$c tps=$t"
  done
  kill $pid; wait $pid 2>/dev/null; rm -rf $D $D.log
 done
done
