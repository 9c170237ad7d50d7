#!/usr/bin/env bash
# pgbench's built-in tpcb-like transaction and a contended counter, on Eddy
# and on PostgreSQL 15 in the same run, both with durable commits
# (PostgreSQL: fsync=on, synchronous_commit=on; Eddy: fsync before COMMIT
# is acknowledged, always). After each run the balances are checked:
# sum(abalance) = sum(tbalance) = sum(bbalance) = sum(history.delta), and
# the counter equals the number of committed increments.
#
# Usage: scripts/bench/pgbench-tpcb.sh [seconds per run] [output.md]
# Needs: target/release/eddy (cargo build --release -p eddy-server),
# PostgreSQL 15 server binaries and pgbench (Debian: postgresql-15).
set -euo pipefail
cd "$(dirname "$0")/../.."
DUR=${1:-20}
OUT=${2:-docs/benchmarks/transactions.md}
EDDY=${EDDY_BIN:-target/release/eddy}
export PGSSLMODE=disable
. scripts/lib/private-postgres.sh
trap 'kill $(cat $WORK/eddy.pid 2>/dev/null) 2>/dev/null || true; stop_postgres; rm -rf $WORK' EXIT

EPORT=$(free_port); PPORT=$(free_port)

echo "starting eddy on $EPORT"
EDDY_LOG=warn "$EDDY" server --data-dir "$WORK/eddy" --pg-addr "127.0.0.1:$EPORT" \
  --http-addr "127.0.0.1:$(free_port)" --auth trust >"$WORK/eddy.log" 2>&1 &
echo $! >"$WORK/eddy.pid"
echo "starting postgres on $PPORT"
"${PGRUN[@]}" "$PGBIN/initdb" -D "$WORK/pg" -U eddy -A trust >/dev/null
"${PGRUN[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg/pg.log" -w start -o \
  "-p $PPORT -k $WORK/sock -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=200 -c shared_buffers=1GB" >/dev/null
"$PGBIN/createdb" -h 127.0.0.1 -p "$PPORT" -U eddy eddy
for i in $(seq 100); do psql -h 127.0.0.1 -p "$EPORT" -U eddy eddy -c 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done

check() { # port -> "ok" or the sums
  psql -h 127.0.0.1 -p "$1" -U eddy eddy -Atc "select (select sum(abalance) from pgbench_accounts), (select sum(tbalance) from pgbench_tellers), (select sum(bbalance) from pgbench_branches), (select coalesce(sum(delta),0) from pgbench_history)" \
    | awk -F'|' '{ if ($1==$2 && $2==$3 && $3==$4) print "consistent"; else print "INCONSISTENT " $0 }'
}

declare -A TPS CONS
for engine in eddy postgres; do
  port=$EPORT; [ $engine = postgres ] && port=$PPORT
  pgbench -h 127.0.0.1 -p "$port" -U eddy -i -s 1 -q eddy >/dev/null 2>&1
  for c in 1 8 32; do
    echo "tpcb-like $engine c=$c"
    t=$(pgbench -h 127.0.0.1 -p "$port" -U eddy -n -M prepared -c $c -j 2 -T "$DUR" eddy 2>&1 | awk '/^tps/ {print $3}')
    TPS[$engine,$c]=$t
    CONS[$engine,$c]=$(check "$port")
    echo "  tps=$t ${CONS[$engine,$c]}"
  done
  # contended counter
  psql -h 127.0.0.1 -p "$port" -U eddy eddy -qc "drop table if exists counters; create table counters (id int primary key, n bigint not null); insert into counters values (1, 0)"
  echo 'UPDATE counters SET n = n + 1 WHERE id = 1;' >"$WORK/counter.sql"
  res=$(pgbench -h 127.0.0.1 -p "$port" -U eddy -n -M prepared -c 8 -j 2 -T "$DUR" -f "$WORK/counter.sql" eddy 2>&1)
  TPS[$engine,counter]=$(echo "$res" | awk '/^tps/ {print $3}')
  done_tx=$(echo "$res" | awk '/actually processed/ {print $NF}')
  n=$(psql -h 127.0.0.1 -p "$port" -U eddy eddy -Atc "select n from counters where id = 1")
  if [ "$n" = "$done_tx" ]; then CONS[$engine,counter]="n = $n = transactions"; else CONS[$engine,counter]="LOST: n = $n, transactions = $done_tx"; fi
  echo "  counter tps=${TPS[$engine,counter]} ${CONS[$engine,counter]}"
done

{
  echo
  echo "## pgbench tpcb-like and a contended counter — $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- Command: \`scripts/bench/pgbench-tpcb.sh $DUR\` (pgbench -M prepared -j 2 -T $DUR, scale 1, durable commits on both)"
  echo "- Eddy: $("$EDDY" --version 2>/dev/null || echo "$EDDY") (release build); PostgreSQL: $("$PGBIN/postgres" --version)"
  echo "- Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
  echo
  echo "| workload | clients | Eddy TPS | PostgreSQL TPS | Eddy / PG | Eddy check | PostgreSQL check |"
  echo "|---|---:|---:|---:|---:|---|---|"
  for c in 1 8 32; do
    r=$(python3 -c "print(f'{float(\"${TPS[eddy,$c]:-0}\")/max(float(\"${TPS[postgres,$c]:-1}\"),1e-9):.2f}')")
    echo "| tpcb-like | $c | ${TPS[eddy,$c]} | ${TPS[postgres,$c]} | $r | ${CONS[eddy,$c]} | ${CONS[postgres,$c]} |"
  done
  r=$(python3 -c "print(f'{float(\"${TPS[eddy,counter]:-0}\")/max(float(\"${TPS[postgres,counter]:-1}\"),1e-9):.2f}')")
  echo "| counter (1 row, n = n + 1) | 8 | ${TPS[eddy,counter]} | ${TPS[postgres,counter]} | $r | ${CONS[eddy,counter]} | ${CONS[postgres,counter]} |"
} | tee -a "$OUT"
