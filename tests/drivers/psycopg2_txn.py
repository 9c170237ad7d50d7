"""psycopg2 against a running Eddy: implicit transactions, rollback, savepoints,
client-side bound values (numeric, bytea). Exits non-zero on a broken check."""
import os
import sys
from decimal import Decimal

import psycopg2
from psycopg2 import errors

DSN = (
    f"host=127.0.0.1 port={os.environ['EDDY_PORT']} user={os.environ.get('EDDY_USER', 'eddy')} "
    f"password={os.environ.get('EDDY_PASSWORD', 'secret')} dbname={os.environ.get('EDDY_DB', 'eddy')} sslmode=disable"
)


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


admin = psycopg2.connect(DSN)
admin.autocommit = True
a = admin.cursor()
a.execute("DROP TABLE IF EXISTS py2_t")
a.execute("CREATE TABLE py2_t (id int PRIMARY KEY, amount numeric(10,2), blob bytea)")

conn = psycopg2.connect(DSN)
cur = conn.cursor()
cur.execute("INSERT INTO py2_t VALUES (%s, %s, %s)", (1, Decimal("1.50"), psycopg2.Binary(b"\x00\x01\xfe'")))
cur.execute("INSERT INTO py2_t VALUES (%s, %s, %s)", (2, Decimal("12345678.99"), None))
a.execute("SELECT count(*) FROM py2_t")
check(a.fetchone() == (0,), "implicit transaction's rows invisible before commit")
conn.commit()
a.execute("SELECT id, amount, blob FROM py2_t ORDER BY id")
got = [(i, amt, bytes(b) if b is not None else None) for i, amt, b in a.fetchall()]
check(got == [(1, Decimal("1.50"), b"\x00\x01\xfe'"), (2, Decimal("12345678.99"), None)], f"exact values: {got}")

cur.execute("UPDATE py2_t SET amount = amount * 2")
cur.execute("SAVEPOINT s1")
cur.execute("DELETE FROM py2_t WHERE id = 1")
cur.execute("ROLLBACK TO SAVEPOINT s1")
cur.execute("SELECT count(*), sum(amount) FROM py2_t")
got = cur.fetchone()
check(got == (2, Decimal("24691360.98")), f"rollback to savepoint keeps earlier work: {got}")
conn.rollback()
a.execute("SELECT sum(amount) FROM py2_t")
check(a.fetchone() == (Decimal("12345680.49"),), "rollback undoes the update")

try:
    cur.execute("INSERT INTO py2_t VALUES (3, 123456789.123, NULL)")
    check(False, "numeric(10,2) overflow accepted")
except errors.NumericValueOutOfRange:
    pass
try:
    cur.execute("SELECT 1")
    check(False, "statement after error accepted")
except errors.InFailedSqlTransaction:
    pass
conn.rollback()
cur.execute("SELECT 1")
check(cur.fetchone() == (1,), "usable after rollback")
conn.rollback()
print("psycopg2: ok")
