"""psycopg 3 against a running Eddy: transactions and exact values.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. Exits non-zero with
a message on the first broken expectation. PostgreSQL 15 passes every check
(scripts/ci/drivers-against-postgres.sh runs this file against it).
"""
import os
import sys
from datetime import timedelta
from decimal import Decimal

import psycopg
from psycopg import errors

DSN = (
    f"host=127.0.0.1 port={os.environ['EDDY_PORT']} user={os.environ.get('EDDY_USER', 'eddy')} "
    f"password={os.environ.get('EDDY_PASSWORD', 'secret')} dbname={os.environ.get('EDDY_DB', 'eddy')} sslmode=disable"
)


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


def rows(conn, sql, params=None):
    return conn.execute(sql, params).fetchall()


with psycopg.connect(DSN, autocommit=True) as admin:
    admin.execute("DROP TABLE IF EXISTS py3_acct")
    admin.execute("CREATE TABLE py3_acct (id int PRIMARY KEY, bal numeric(18,4), note text, data bytea)")
    admin.execute("INSERT INTO py3_acct VALUES (1, 100, 'a', NULL), (2, 100, 'b', NULL)")

with psycopg.connect(DSN) as conn, psycopg.connect(DSN, autocommit=True) as other:
    # A committed transfer, with a numeric parameter bound in binary and text.
    with conn.transaction():
        conn.execute("UPDATE py3_acct SET bal = bal - %s WHERE id = %s", (Decimal("12.3456"), 1))
        conn.cursor(binary=True).execute(
            "UPDATE py3_acct SET bal = bal + %b WHERE id = %b", (Decimal("12.3456"), 2)
        )
        check(conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS, "status T inside block")
        check(rows(other, "SELECT bal FROM py3_acct WHERE id = 2") == [(Decimal("100.0000"),)],
              "uncommitted update invisible to another connection")
    got = rows(other, "SELECT id, bal FROM py3_acct ORDER BY id")
    check(got == [(1, Decimal("87.6544")), (2, Decimal("112.3456"))], f"committed transfer exact: {got}")

    # An exception inside the context manager rolls everything back.
    try:
        with conn.transaction():
            conn.execute("UPDATE py3_acct SET bal = 0 WHERE id = 1")
            conn.execute("INSERT INTO py3_acct VALUES (9, 9, 'nine', %s)", (b"\x00\xff",))
            raise RuntimeError("application error")
    except RuntimeError:
        pass
    got = rows(other, "SELECT id, bal FROM py3_acct ORDER BY id")
    check(got == [(1, Decimal("87.6544")), (2, Decimal("112.3456"))], f"rolled back on exception: {got}")

    # Nested blocks are savepoints: the inner failure undoes only the inner work.
    with conn.transaction():
        conn.execute("INSERT INTO py3_acct VALUES (3, 1.5, 'c', %s)", (b"\x00\x01\\x",))
        try:
            with conn.transaction():
                conn.execute("INSERT INTO py3_acct VALUES (4, 1, 'd', NULL)")
                raise RuntimeError("inner")
        except RuntimeError:
            pass
        check(rows(conn, "SELECT count(*) FROM py3_acct WHERE id = 4") == [(0,)], "savepoint rolled back")
        check(rows(conn, "SELECT bal FROM py3_acct WHERE id = 3") == [(Decimal("1.5000"),)],
              "own write visible to own later statement")
    got = rows(other, "SELECT id, data FROM py3_acct WHERE id >= 3 ORDER BY id")
    check(got == [(3, b"\x00\x01\\x")], f"outer block committed, inner not; bytea exact: {got}")

    # An error aborts the block: every statement fails with 25P02 until rollback.
    try:
        with conn.transaction():
            try:
                conn.execute("INSERT INTO py3_acct VALUES (1, 0, 'dup', NULL)")
                check(False, "duplicate key accepted")
            except errors.UniqueViolation:
                pass
            check(conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR, "status E after error")
            conn.execute("SELECT 1")
            check(False, "statement after error accepted")
    except errors.InFailedSqlTransaction:
        pass
    check(conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE, "status I after rollback")

    # A connection that goes away inside a transaction leaves nothing.
    doomed = psycopg.connect(DSN)
    doomed.execute("INSERT INTO py3_acct VALUES (5, 5, 'e', NULL)")
    doomed.close()
    check(rows(other, "SELECT count(*) FROM py3_acct WHERE id = 5") == [(0,)], "closed connection's write discarded")

    # Isolation levels: REPEATABLE READ keeps its snapshot; SERIALIZABLE is refused, not weakened.
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    with conn.transaction():
        before = rows(conn, "SELECT sum(bal) FROM py3_acct")
        other.execute("UPDATE py3_acct SET bal = bal + 1 WHERE id = 1")
        check(rows(conn, "SELECT sum(bal) FROM py3_acct") == before, "repeatable read snapshot stable")

# Eddy refuses SERIALIZABLE rather than run it as something weaker; PostgreSQL
# accepts it (the one expected difference, see tests/drivers/README.md).
with psycopg.connect(DSN) as ser:
    ser.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
    try:
        ser.execute("SELECT 1")
        check(os.environ.get("EDDY_REFERENCE") == "postgres", "SERIALIZABLE accepted")
    except errors.FeatureNotSupported:
        pass

# A prepared upsert adding numeric amounts (the fixed-plan path), with the
# parameters in text and in binary, and a float bound to an integer column:
# the sums are exact decimals and the float rounds as PostgreSQL's cast.
with psycopg.connect(DSN, autocommit=True) as conn:
    conn.execute("DROP TABLE IF EXISTS py3_bal")
    conn.execute("CREATE TABLE py3_bal (id int PRIMARY KEY, amount numeric(12,2), n int)")
    upsert = (
        "INSERT INTO py3_bal VALUES (%s, %s, 1) ON CONFLICT (id) DO UPDATE "
        "SET amount = py3_bal.amount + excluded.amount, n = py3_bal.n + 1"
    )
    for amount in ["10.10", "0.20", "5.005", "-1.11"]:
        conn.execute(upsert, (1, Decimal(amount)), prepare=True)
        conn.cursor(binary=True).execute(upsert.replace("%s", "%b"), (2, Decimal(amount)))
    got = rows(conn, "SELECT id, amount, n FROM py3_bal ORDER BY id")
    check(got == [(1, Decimal("14.20"), 4), (2, Decimal("14.20"), 4)], f"numeric upserts exact: {got}")
    try:
        conn.execute(
            "INSERT INTO py3_bal VALUES (%s, %s, 1) ON CONFLICT (id) DO UPDATE SET n = py3_bal.n / (excluded.n - 1)",
            (1, Decimal(1)),
            prepare=True,
        )
        check(False, "division by zero in DO UPDATE accepted")
    except errors.DivisionByZero:
        pass
    conn.execute("INSERT INTO py3_bal VALUES (%s, 0, %s)", (3, 2.5), prepare=True)
    conn.execute("INSERT INTO py3_bal VALUES (%s, 0, %s)", (4, 3.5), prepare=True)
    got = rows(conn, "SELECT id, n FROM py3_bal WHERE id > 2 ORDER BY id")
    check(got == [(3, 2), (4, 4)], f"floats into an int column round to even: {got}")
    conn.execute("DROP TABLE py3_bal")

# NUMERIC parameters (Python's Decimal) meeting integer columns, in text and
# binary, prepared: assigned, they round as PostgreSQL's numeric-to-integer
# cast (ties away from zero; 22003 past the type; NaN 0A000); compared with
# a key or added to a column, they are not rounded first.
with psycopg.connect(DSN, autocommit=True) as conn:
    conn.execute("DROP TABLE IF EXISTS py3_ints")
    conn.execute("CREATE TABLE py3_ints (id int PRIMARY KEY, i int, b bigint, s smallint)")
    for n, v in enumerate(["2.5", "-2.5", "3.49", "2147483647.4"]):
        conn.execute("INSERT INTO py3_ints VALUES (%s, %s, %s, %s)", (2 * n, Decimal(v), Decimal(v), Decimal("1.5")), prepare=True)
        conn.cursor(binary=True).execute(
            "INSERT INTO py3_ints VALUES (%b, %b, %b, %b)", (2 * n + 1, Decimal(v), Decimal(v), Decimal("-1.5"))
        )
    got = rows(conn, "SELECT i, b, s FROM py3_ints ORDER BY id")
    want = [(3, 3, 2), (3, 3, -2), (-3, -3, 2), (-3, -3, -2), (3, 3, 2), (3, 3, -2),
            (2147483647, 2147483647, 2), (2147483647, 2147483647, -2)]
    check(got == want, f"numeric parameters into integer columns: {got}")
    for v, state in [("2147483647.5", errors.NumericValueOutOfRange), ("NaN", errors.FeatureNotSupported)]:
        try:
            conn.execute("INSERT INTO py3_ints VALUES (%s, %s, 0, 0)", (100, Decimal(v)), prepare=True)
            check(False, f"numeric {v} into an int column accepted")
        except state:
            pass
    conn.execute("UPDATE py3_ints SET i = %s WHERE id = %s", (Decimal("7.5"), 0), prepare=True)
    conn.execute("UPDATE py3_ints SET i = i + %s WHERE id = %s", (Decimal("0.5"), 1), prepare=True)
    conn.execute("UPDATE py3_ints SET i = i + %s WHERE id = %s", (Decimal("0.5"), 2), prepare=True)
    got = rows(conn, "SELECT id, i FROM py3_ints WHERE id < 3 ORDER BY id")
    check(got == [(0, 8), (1, 4), (2, -3)], f"numeric set and increments: {got}")
    got = rows(conn, "SELECT id FROM py3_ints WHERE id = %s", (Decimal("2.5"),))
    check(got == [], f"2.5 matches no integer key: {got}")
    got = rows(conn, "SELECT id FROM py3_ints WHERE id = %s", (Decimal("2.0"),))
    check(got == [(2,)], f"2.0 matches key 2: {got}")
    conn.execute("DROP TABLE py3_ints")

    # parameters in interval arithmetic, FETCH FIRST and SIMILAR TO
    # (server-side binding: each is a typed parameter of the statement)
    got = rows(conn, "SELECT %s * interval '1 hour', interval '1 day' / %s", (3, 4))
    check(got == [(timedelta(hours=3), timedelta(hours=6))], f"interval * and / a parameter: {got}")
    got = rows(conn, "SELECT x FROM generate_series(1, 9) AS g(x) ORDER BY x OFFSET %s ROWS FETCH FIRST %s ROWS ONLY", (2, 3))
    check(got == [(3,), (4,), (5,)], f"OFFSET / FETCH FIRST parameters: {got}")
    got = rows(conn, "SELECT 'v12' SIMILAR TO %s, 'v12' SIMILAR TO %s", ("v1%", "1%"))
    check(got == [(True, False)], f"SIMILAR TO a parameter: {got}")

# PostgreSQL's WARNINGs for transaction statements out of place, as
# NoticeResponses the driver hands to its notice handlers (simple and
# extended protocol)
with psycopg.connect(DSN, autocommit=True) as conn:
    notices = []
    conn.add_notice_handler(lambda d: notices.append((d.severity, d.sqlstate, d.message_primary)))
    conn.execute("COMMIT")
    conn.execute("SET LOCAL statement_timeout = '1s'")
    conn.execute("ROLLBACK", prepare=True)
    conn.execute("BEGIN")
    conn.execute("BEGIN")
    conn.execute("COMMIT")
    conn.execute("SELECT 1")
    check(
        notices
        == [
            ("WARNING", "25P01", "there is no transaction in progress"),
            ("WARNING", "25P01", "SET LOCAL can only be used in transaction blocks"),
            ("WARNING", "25P01", "there is no transaction in progress"),
            ("WARNING", "25001", "there is already a transaction in progress"),
        ],
        f"warnings: {notices}",
    )
    # and the NOTICEs of what IF [NOT] EXISTS skipped
    notices.clear()
    conn.execute("DROP TABLE IF EXISTS py3_absent")
    conn.execute("CREATE TABLE IF NOT EXISTS py3_notice (id int PRIMARY KEY)")
    conn.execute("CREATE TABLE IF NOT EXISTS py3_notice (id int PRIMARY KEY)")
    conn.execute("DROP INDEX IF EXISTS py3_absent_idx")
    conn.execute("DROP TABLE py3_notice")
    check(
        notices
        == [
            ("NOTICE", "00000", 'table "py3_absent" does not exist, skipping'),
            ("NOTICE", "42P07", 'relation "py3_notice" already exists, skipping'),
            ("NOTICE", "00000", 'index "py3_absent_idx" does not exist, skipping'),
        ],
        f"notices: {notices}",
    )
    # DROP ... CASCADE names the views it drops too, as PostgreSQL 15 does
    # (one: in the message; more: counted, each in DETAIL)
    details = []
    conn.add_notice_handler(lambda d: details.append(d.message_detail))
    notices.clear()
    conn.execute("CREATE TABLE py3_base (a int)")
    conn.execute("CREATE VIEW py3_v1 AS SELECT a FROM py3_base")
    conn.execute("DROP VIEW py3_v1 CASCADE")
    conn.execute("CREATE VIEW py3_v1 AS SELECT a FROM py3_base")
    conn.execute("CREATE VIEW py3_v2 AS SELECT a FROM py3_v1")
    conn.execute("DROP VIEW py3_v1 CASCADE")
    conn.execute("CREATE VIEW py3_v1 AS SELECT a FROM py3_base")
    conn.execute("CREATE VIEW py3_v2 AS SELECT a FROM py3_v1")
    conn.execute("DROP TABLE py3_base CASCADE")
    check(
        notices
        == [
            ("NOTICE", "00000", "drop cascades to view py3_v2"),
            ("NOTICE", "00000", "drop cascades to 2 other objects"),
        ],
        f"cascade notices: {notices}",
    )
    check(
        details == [None, "drop cascades to view py3_v1\ndrop cascades to view py3_v2"],
        f"cascade details: {details}",
    )

# An unconstrained numeric column (docs/decisions/0003): what fits in 10
# fraction digits and 28 integer digits is stored exactly through every
# path (text and binary parameters, a float, COPY in text and binary);
# what does not is refused with 22003 on Eddy, never rounded. PostgreSQL
# stores it exactly.
with psycopg.connect(DSN, autocommit=True) as conn:
    reference = os.environ.get("EDDY_REFERENCE") == "postgres"
    conn.execute("DROP TABLE IF EXISTS py3_num")
    conn.execute("CREATE TABLE py3_num (id int PRIMARY KEY, n numeric)")
    fits = [Decimal("1.50"), Decimal("-2.125"), Decimal("12345678901234567890.0123456789")]
    for i, v in enumerate(fits):
        conn.execute("INSERT INTO py3_num VALUES (%s, %s)", (i, v), prepare=True)
        conn.cursor(binary=True).execute("INSERT INTO py3_num VALUES (%b, %b)", (100 + i, v))
    conn.execute("INSERT INTO py3_num VALUES (%s, %s)", (200, 0.1))
    with conn.cursor().copy("COPY py3_num FROM STDIN") as copy:
        copy.write_row((300, Decimal("7.25")))
    with conn.cursor(binary=True).copy("COPY py3_num FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "numeric"])
        copy.write_row((301, Decimal("-0.0000000001")))
    got = rows(conn, "SELECT id, n FROM py3_num ORDER BY id")
    want = [(i, v) for i, v in enumerate(fits)] + [(100 + i, v) for i, v in enumerate(fits)]
    want += [(200, Decimal("0.1")), (300, Decimal("7.25")), (301, Decimal("-0.0000000001"))]
    check(got == want, f"unconstrained numeric values kept: {got}")
    too_fine = Decimal("0.123456789012345")
    attempts = [
        ("text parameter", lambda: conn.execute("INSERT INTO py3_num VALUES (%s, %s)", (400, too_fine))),
        ("binary parameter", lambda: conn.cursor(binary=True).execute(
            "INSERT INTO py3_num VALUES (%b, %b)", (401, too_fine))),
        ("float", lambda: conn.execute("INSERT INTO py3_num VALUES (%s, %s)", (402, 1e-12))),
        ("literal", lambda: conn.execute("INSERT INTO py3_num VALUES (403, 0.123456789012345)")),
        ("update", lambda: conn.execute("UPDATE py3_num SET n = n / 3 WHERE id = 1")),
    ]
    for what, attempt in attempts:
        try:
            attempt()
            check(reference, f"{what}: a value past 10 fraction digits into numeric was not refused")
        except errors.NumericValueOutOfRange:
            check(not reference, f"{what}: refused by PostgreSQL")
    try:
        with conn.cursor().copy("COPY py3_num FROM STDIN") as copy:
            copy.write_row((404, too_fine))
        check(reference, "COPY: 0.123456789012345 into numeric was not refused")
    except errors.NumericValueOutOfRange:
        check(not reference, "COPY: refused by PostgreSQL")
    if not reference:
        got = rows(conn, "SELECT id, n FROM py3_num ORDER BY id")
        check(got == want, f"refused values left the table as it was: {got}")
    conn.execute("DROP TABLE py3_num")

print("psycopg3: ok")
