#!/usr/bin/env bash
# Remakes tests/dumps/shop-pg15.sql (plain), shop-pg15.dump (custom format,
# for pg_restore) and shop-checks.expected from
# tests/dumps/shop-schema.sql, and schemas-pg15.sql and
# schemas-checks.expected from schemas-schema.sql (a database with schemas
# of its own), with a private PostgreSQL cluster: the schema
# is loaded into one database, dumped with pg_dump (plain SQL, owners
# kept), the dump restored into a second database with psql in one
# transaction, and shop-checks.sql run there; its output is what Eddy must
# print after restoring the same dump (crates/server/tests/pg_dump_restore.rs).
# The cluster's superuser is "eddy", as Eddy's bootstrap superuser is, so
# the dump's OWNER TO statements name the same role.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/private-postgres.sh
trap 'stop_postgres; rm -rf "$WORK"' EXIT
PORT=$(free_port)
"${PGRUN[@]}" "$PGBIN/initdb" -D "$WORK/pg" -U eddy --auth=trust -E UTF8 --locale=C >/dev/null
"${PGRUN[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -w -l "$WORK/sock/pg.log" \
  -o "-p $PORT -k $WORK/sock -c listen_addresses=127.0.0.1 -c TimeZone=UTC" start >/dev/null
PSQL=(psql -X -q -h 127.0.0.1 -p "$PORT" -U eddy -v ON_ERROR_STOP=1)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE shop" -c "CREATE DATABASE restored"
"${PSQL[@]}" -d shop -f tests/dumps/shop-schema.sql >/dev/null
"$PGBIN/pg_dump" -h 127.0.0.1 -p "$PORT" -U eddy shop > tests/dumps/shop-pg15.sql
"$PGBIN/pg_dump" -h 127.0.0.1 -p "$PORT" -U eddy -Fc shop > tests/dumps/shop-pg15.dump
"${PSQL[@]}" -d restored -1 -f tests/dumps/shop-pg15.sql >/dev/null
psql -X -A -h 127.0.0.1 -p "$PORT" -U eddy -d restored -f tests/dumps/shop-checks.sql \
  > tests/dumps/shop-checks.expected 2>&1
"${PSQL[@]}" -d postgres -c "CREATE DATABASE schemas" -c "CREATE DATABASE schemas_restored"
"${PSQL[@]}" -d schemas -f tests/dumps/schemas-schema.sql >/dev/null
"$PGBIN/pg_dump" -h 127.0.0.1 -p "$PORT" -U eddy schemas > tests/dumps/schemas-pg15.sql
"${PSQL[@]}" -d schemas_restored -1 -f tests/dumps/schemas-pg15.sql >/dev/null
# (its refusals are written after its results, as the test reads them)
psql -X -A -h 127.0.0.1 -p "$PORT" -U eddy -d schemas_restored -f tests/dumps/schemas-checks.sql \
  > "$WORK/schemas.out" 2> "$WORK/schemas.err" || true
cat "$WORK/schemas.out" "$WORK/schemas.err" > tests/dumps/schemas-checks.expected
echo "made tests/dumps/shop-pg15.sql, shop-pg15.dump, shop-checks.expected, schemas-pg15.sql and schemas-checks.expected with $("$PGBIN/pg_dump" --version)"
