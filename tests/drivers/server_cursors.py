"""Server-side cursors as drivers use them: psycopg2 named cursors
(DECLARE ... CURSOR WITHOUT HOLD, FETCH FORWARD n) and psycopg 3 server
cursors (scrollable, WITH HOLD), against a running server.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. PostgreSQL 15
passes every check (scripts/ci/drivers-against-postgres.sh).
"""
import os
import sys

import psycopg
import psycopg2

HOST = "127.0.0.1"
PORT = os.environ["EDDY_PORT"]
USER = os.environ.get("EDDY_USER", "eddy")
PASSWORD = os.environ.get("EDDY_PASSWORD", "secret")
DB = os.environ.get("EDDY_DB", "eddy")
DSN = f"host={HOST} port={PORT} user={USER} password={PASSWORD} dbname={DB} sslmode=disable"


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


with psycopg.connect(DSN, autocommit=True) as c:
    c.execute("DROP TABLE IF EXISTS cur_rows")
    c.execute("CREATE TABLE cur_rows (id int PRIMARY KEY, v text)")
    with c.cursor() as cur:
        cur.executemany("INSERT INTO cur_rows VALUES (%s, %s)", [(i, f"v{i}") for i in range(1, 1001)])

# psycopg2: a named cursor streams in itersize batches inside a transaction
conn2 = psycopg2.connect(DSN)
cur = conn2.cursor(name="big")
cur.itersize = 128
cur.execute("SELECT id, v FROM cur_rows ORDER BY id")
seen = [row[0] for row in cur]
check(seen == list(range(1, 1001)), "psycopg2 named cursor returns every row in order")
cur.close()
cur = conn2.cursor(name="some")
cur.execute("SELECT id FROM cur_rows WHERE id <= 10 ORDER BY id")
check([r[0] for r in cur.fetchmany(3)] == [1, 2, 3], "fetchmany(3)")
check(cur.fetchone()[0] == 4, "fetchone after fetchmany")
check([r[0] for r in cur.fetchall()] == list(range(5, 11)), "fetchall rest")
cur.close()
conn2.commit()
# the cursor ended with its transaction
cur2 = conn2.cursor()
try:
    cur2.execute('FETCH 1 FROM "some"')
    check(False, "cursor should be gone after COMMIT")
except psycopg2.Error as e:
    check(e.pgcode == "34000", f"34000 for a closed cursor, got {e.pgcode}")
conn2.rollback()
conn2.close()

# psycopg 3: scrollable and WITH HOLD server cursors
with psycopg.connect(DSN) as c:
    with c.cursor(name="scroll", scrollable=True) as cur:
        cur.execute("SELECT id FROM cur_rows WHERE id <= 5 ORDER BY id")
        check(cur.fetchone()[0] == 1, "first row")
        cur.scroll(2)  # MOVE 2
        check(cur.fetchone()[0] == 4, "after scroll(2)")
        cur.scroll(0, mode="absolute")  # MOVE ABSOLUTE 0
        check([r[0] for r in cur.fetchall()] == [1, 2, 3, 4, 5], "absolute 0 then all")
        cur.scroll(-2)
        check(cur.fetchone()[0] == 5, "backward 2 from after the end, then next")
    with c.cursor(name="held", withhold=True) as cur:
        cur.execute("SELECT id FROM cur_rows WHERE id <= 3 ORDER BY id")
        c.commit()
        check([r[0] for r in cur.fetchall()] == [1, 2, 3], "WITH HOLD outlives COMMIT")
    # a cursor sees the snapshot of its DECLARE
    with c.cursor(name="snap") as cur:
        cur.execute("SELECT count(*) FROM cur_rows")
        with psycopg.connect(DSN, autocommit=True) as other:
            other.execute("INSERT INTO cur_rows VALUES (5000, 'late')")
        check(cur.fetchone()[0] == 1000, "the cursor's snapshot is its DECLARE's")
    c.rollback()

print("server cursors: ok")
