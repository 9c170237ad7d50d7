#!/usr/bin/env bash
# Runs every driver script of tests/drivers/ against a private PostgreSQL 15
# cluster, to show that each expectation in them is PostgreSQL's behaviour
# (Eddy's end-to-end test, crates/server/tests/drivers.rs, runs the same files
# against Eddy). The one expected difference: PostgreSQL accepts SERIALIZABLE,
# Eddy refuses it (EDDY_REFERENCE=postgres tells the scripts).
#   scripts/ci/drivers-against-postgres.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/ci/install-drivers.sh >/dev/null
. scripts/lib/private-postgres.sh
trap 'stop_postgres; rm -rf $WORK' EXIT
PORT=$(free_port)
echo "secret" >"$WORK/pw" && chmod 644 "$WORK/pw"
"${PGRUN[@]}" "$PGBIN/initdb" -D "$WORK/pg" -U eddy -A scram-sha-256 --pwfile "$WORK/pw" >/dev/null
"${PGRUN[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg/pg.log" -w start -o \
  "-p $PORT -k $WORK/sock -c listen_addresses=127.0.0.1" >/dev/null
PGPASSWORD=secret "$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U eddy eddy
"$PGBIN/postgres" --version
export EDDY_PORT=$PORT EDDY_REFERENCE=postgres NODE_PATH=$PWD/target/drivers/node/node_modules
D=tests/drivers
for py in "$D"/*.py; do target/drivers/venv/bin/python "$py"; done
node "$D/node_pg_txn.js"
java -cp "$(ls target/drivers/jars/postgresql-*.jar)" "$D/JdbcTxn.java"
java -cp "$(ls target/drivers/jars/postgresql-*.jar)" "$D/JdbcMetadata.java"
