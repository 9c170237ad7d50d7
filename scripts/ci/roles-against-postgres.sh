#!/usr/bin/env bash
# PostgreSQL 15's answers to the refusals crates/server/tests/roles.rs checks
# in Eddy (same statements, same SQLSTATEs except where Eddy refuses an
# option it does not implement: CREATEDB is 0A000 in Eddy). Output:
# tests/postgres15/roles.txt. Usage: scripts/ci/roles-against-postgres.sh
set -u
source "$(dirname "$0")/../lib/private-postgres.sh"
PORT=$(free_port)
"${PGRUN[@]}" "$PGBIN/initdb" -D "$WORK/pg" -U postgres -A trust >/dev/null
"${PGRUN[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -o "-p $PORT -k $WORK/sock -c listen_addresses=127.0.0.1" -l "$WORK/pg/log" start >/dev/null
P="psql -X -h 127.0.0.1 -p $PORT -U postgres postgres -v VERBOSITY=verbose"
$P -c "CREATE ROLE alice LOGIN PASSWORD 'alice-pw'" -c "CREATE USER bob WITH PASSWORD 'bob-pw'" -c "CREATE ROLE readers" -c "CREATE TABLE secret_t (id INT PRIMARY KEY, v TEXT)" -c "INSERT INTO secret_t VALUES (1,'one')" 2>&1 | grep -v "^CREATE\|^INSERT"
A="psql -X -h 127.0.0.1 -p $PORT -U alice postgres -v VERBOSITY=verbose"
for q in "SELECT * FROM secret_t" "SELECT v FROM secret_t WHERE id = 1" "INSERT INTO secret_t VALUES (3, 'three')" "UPDATE secret_t SET v = 'x' WHERE id = 1" "DELETE FROM secret_t WHERE id = 1" "TRUNCATE secret_t" "COPY secret_t TO STDOUT" "DROP TABLE secret_t" "ALTER TABLE secret_t ADD COLUMN w INT" "CREATE TABLE mine (id INT)" "CREATE ROLE eve" "ALTER ROLE alice SUPERUSER" "GRANT SELECT ON secret_t TO alice"; do echo "== $q"; $A -c "$q" 2>&1 | head -2; done
for q in "CREATE ROLE x CREATEDB" "GRANT SELECT ON secret_t TO nobody_here" "CREATE ROLE pg_mine" "CREATE ROLE alice" "DROP ROLE postgres" "GRANT SELECT ON secret_t TO readers" "DROP ROLE readers" "GRANT alice TO readers" "GRANT readers TO alice" ; do echo "== $q"; $P -c "$q" 2>&1 | head -2; done
echo "== insert-only returning"; $P -c "GRANT INSERT ON secret_t TO bob" >/dev/null; psql -X -h 127.0.0.1 -p $PORT -U bob postgres -v VERBOSITY=verbose -c "INSERT INTO secret_t VALUES (4, 'four') RETURNING v" 2>&1 | head -2
$P -c "CREATE TABLE mine2(id int)" -c "GRANT SELECT ON mine2 TO bob" -c "SELECT array_to_string(relacl, ',') FROM pg_class WHERE relname = 'mine2'" -c "CREATE ROLE auditors" 2>&1 | tail -4
psql -X -h 127.0.0.1 -p $PORT -U auditors postgres -c "select 1" 2>&1 | head -2
stop_postgres; rm -rf "$WORK"
