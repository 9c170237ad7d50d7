#!/usr/bin/env bash
# Runs crates/server/tests/wire_values.rs and wire_arrays.rs against a
# private PostgreSQL 15
# as well as Eddy (EDDY_WIRE_VALUES_PG): every expected value in it must be
# PostgreSQL's answer. Extra arguments filter the tests, e.g.
#   scripts/ci/wire-values-against-postgres.sh uuid
set -u
source "$(dirname "$0")/../lib/private-postgres.sh"
PORT=$(free_port)
"${PGRUN[@]}" "$PGBIN/initdb" -D "$WORK/pg" -U postgres -A trust >/dev/null
"${PGRUN[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -o "-p $PORT -k $WORK/sock -c listen_addresses=127.0.0.1 -c TimeZone=UTC" -l "$WORK/pg/log" start >/dev/null
trap 'stop_postgres; rm -rf "$WORK"' EXIT
export EDDY_WIRE_VALUES_PG="host=127.0.0.1 port=$PORT user=postgres dbname=postgres"
cargo test -p eddy-server --test wire_values -- "$@" || exit 1
cargo test -p eddy-server --test wire_arrays -- "$@"
