"""psycopg 3 against a running Eddy: json and jsonb results decoded by the
driver (json OID 114, jsonb OID 3802) as Python values.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. Exits non-zero with
a message on the first broken expectation. PostgreSQL 15 passes every check
(scripts/ci/drivers-against-postgres.sh runs this file against it).
"""
import os
import sys

import psycopg

DSN = (
    f"host=127.0.0.1 port={os.environ['EDDY_PORT']} user={os.environ.get('EDDY_USER', 'eddy')} "
    f"password={os.environ.get('EDDY_PASSWORD', 'secret')} dbname={os.environ.get('EDDY_DB', 'eddy')} sslmode=disable"
)


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


with psycopg.connect(DSN, autocommit=True) as conn:
    conn.execute("DROP TABLE IF EXISTS py_json")
    conn.execute("CREATE TABLE py_json (id int PRIMARY KEY, name text, doc jsonb)")
    conn.execute(
        "INSERT INTO py_json VALUES (1, 'a', %s), (2, NULL, %s)",
        ('{"tags": ["x"], "n": 1}', '{"n": 2}'),
    )
    for binary in (False, True):
        cur = conn.cursor(binary=binary)
        got = cur.execute(
            "SELECT json_agg(json_build_object('id', id, 'name', name) ORDER BY id),"
            " jsonb_agg(doc ORDER BY id), jsonb_object_agg(id, doc -> 'n'),"
            " to_json(name), row_to_json(row(id, name))"
            " FROM py_json GROUP BY id, name ORDER BY id"
        ).fetchall()
        want = [
            ([{"id": 1, "name": "a"}], [{"n": 1, "tags": ["x"]}], {"1": 1}, "a", {"f1": 1, "f2": "a"}),
            ([{"id": 2, "name": None}], [{"n": 2}], {"2": 2}, None, {"f1": 2, "f2": None}),
        ]
        check(got == want, f"json values decoded (binary={binary}): {got}")
        got = cur.execute("SELECT json_agg(id ORDER BY id DESC) FROM py_json").fetchone()
        check(got == ([2, 1],), f"json_agg as a list (binary={binary}): {got}")
        got = cur.execute(
            "SELECT jsonb_set(doc, '{tags,0}', %s), doc #>> '{tags,0}' FROM py_json WHERE id = 1",
            ('"y"',),
        ).fetchone()
        check(got == ({"n": 1, "tags": ["y"]}, "x"), f"jsonb_set and #>> (binary={binary}): {got}")
    conn.execute("DROP TABLE py_json")

print("psycopg_json: ok")
