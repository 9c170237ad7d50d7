#!/usr/bin/env bash
# PostgreSQL 15's answers to the statements crates/server/tests/relation_grants.rs
# runs in Eddy (grants on views and sequences), each as the same role, in
# the same order. The superuser here is `postgres` (Eddy's is `eddy`), so
# relacl names it. Output: tests/postgres15/relation_grants.txt.
# Usage: scripts/ci/relation-grants-against-postgres.sh > tests/postgres15/relation_grants.txt
set -u
source "$(dirname "$0")/../lib/private-postgres.sh"
PORT=$(free_port)
"${PGRUN[@]}" "$PGBIN/initdb" -D "$WORK/pg" -U postgres -A trust >/dev/null
"${PGRUN[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -o "-p $PORT -k $WORK/sock -c listen_addresses=127.0.0.1" -l "$WORK/pg/log" start >/dev/null
trap 'stop_postgres; rm -rf "$WORK"' EXIT
run() { # role, statement
  echo "== [$1] $2"
  psql -X -q -h 127.0.0.1 -p "$PORT" -U "$1" postgres -v VERBOSITY=verbose -c "$2" 2>&1 | grep -v "^LOCATION"
}
run postgres "CREATE ROLE app LOGIN; CREATE ROLE owner1 LOGIN;
  CREATE TABLE t (id SERIAL PRIMARY KEY, v INT);
  CREATE TABLE u (id INT GENERATED ALWAYS AS IDENTITY, v INT);
  CREATE TABLE base (x INT); INSERT INTO base VALUES (1);
  CREATE VIEW v AS SELECT * FROM t; CREATE VIEW vv AS SELECT id FROM v;
  CREATE SEQUENCE s; GRANT SELECT, INSERT ON t TO app; GRANT INSERT ON u TO app;
  GRANT SELECT ON base TO owner1; GRANT CREATE ON SCHEMA public TO owner1"
run app "SELECT * FROM v"
run postgres "GRANT SELECT ON v TO app"
run app "SELECT count(*) FROM v"
run app "SELECT * FROM vv"
run postgres "BEGIN; GRANT SELECT ON vv TO app; ROLLBACK"
run app "SELECT * FROM vv"
run app "INSERT INTO t (v) VALUES (1)"
run app "INSERT INTO u (v) VALUES (1)"
run app "SELECT nextval('s')"
run app "SELECT currval('s')"
run postgres "GRANT USAGE ON SEQUENCE s, t_id_seq TO app"
run app "INSERT INTO t (v) VALUES (1)"
run app "SELECT nextval('s')"
run app "SELECT currval('s')"
run app "SELECT lastval()"
run app "SELECT setval('s', 100)"
run postgres "GRANT UPDATE ON s TO app"
run app "SELECT setval('s', 100)"
run postgres "GRANT INSERT ON SEQUENCE s TO app"
run postgres "GRANT SELECT ON SEQUENCE t TO app"
run postgres "GRANT SELECT ON SEQUENCE nope TO app"
run app "GRANT SELECT ON v TO owner1"
run app "GRANT USAGE ON SEQUENCE s TO owner1"
run postgres "BEGIN; REVOKE USAGE ON SEQUENCE s FROM app; ROLLBACK"
run app "SELECT nextval('s')"
run postgres "SELECT relname, relacl FROM pg_class WHERE relname IN ('s', 'v') ORDER BY 1"
run postgres "SELECT has_table_privilege('app', 'v', 'SELECT'), has_table_privilege('app', 'vv', 'SELECT'), has_sequence_privilege('app', 's', 'USAGE'), has_sequence_privilege('app', 's', 'SELECT')"
run owner1 "CREATE VIEW ov AS SELECT x FROM base; GRANT SELECT ON ov TO app; CREATE SEQUENCE os"
run app "SELECT count(*) FROM ov"
run postgres "REVOKE SELECT ON base FROM owner1"
run app "SELECT * FROM ov"
run postgres "SELECT * FROM ov"
run postgres "CREATE VIEW over_ov AS SELECT x FROM ov; GRANT SELECT ON over_ov TO app"
run app "SELECT * FROM over_ov"
run postgres "SELECT * FROM over_ov"
run postgres "DROP VIEW over_ov"
run postgres "GRANT SELECT ON base TO owner1"
run postgres "CREATE ROLE reader LOGIN; GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader; GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO reader"
run reader "SELECT count(*) FROM vv"
run reader "SELECT nextval('os')"
run postgres "DROP ROLE reader"
run postgres "DROP ROLE owner1"
run postgres "REVOKE ALL ON SEQUENCE s FROM app; REVOKE SELECT ON v FROM app"
run app "SELECT nextval('s')"
run app "SELECT * FROM v"
