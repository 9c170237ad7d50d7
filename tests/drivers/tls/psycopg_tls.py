"""psycopg 3 and psycopg2 with sslmode=require against an Eddy started with
--tls-cert/--tls-key: the connection is encrypted and queries run.

Run by crates/server/tests/security.rs with EDDY_PORT set. Exits non-zero
with a message on the first broken expectation.
"""
import os
import sys

import psycopg
import psycopg2

DSN = (
    f"host=127.0.0.1 port={os.environ['EDDY_PORT']} user={os.environ.get('EDDY_USER', 'eddy')} "
    f"password={os.environ.get('EDDY_PASSWORD', 'secret')} dbname={os.environ.get('EDDY_DB', 'eddy')} "
    "sslmode=require"
)


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


with psycopg.connect(DSN, autocommit=True) as conn:
    check(conn.pgconn.ssl_in_use, "psycopg: the connection uses TLS")
    check(conn.execute("SELECT 40 + 2").fetchone()[0] == 42, "psycopg: a query runs")
    cur = conn.execute("SELECT %s::text || 'b'", ["a"])
    check(cur.fetchone()[0] == "ab", "psycopg: extended protocol over TLS")

conn2 = psycopg2.connect(DSN)
try:
    check(conn2.info.ssl_in_use, "psycopg2: the connection uses TLS")
    with conn2.cursor() as cur:
        cur.execute("SELECT 1")
        check(cur.fetchone()[0] == 1, "psycopg2: a query runs")
finally:
    conn2.close()

print("psycopg tls: ok")
