"""asyncpg's typed values against a running server: arrays of every element
type Eddy stores, bound as parameters and fetched back, and the catalogs'
oid columns.

asyncpg decodes only oid[] and text[] arrays with codecs of its own; for
any other array type it runs its introspection query first, whose
`attrtypoids` column is `array_agg(pg_attribute.atttypid)`. That column
must be oid[] (an int8[] there sends asyncpg into endless recursion, so
no int4[] could be fetched at all).

Run by crates/server/tests/drivers.rs with EDDY_PORT set. PostgreSQL 15
passes every check (scripts/ci/drivers-against-postgres.sh).
"""
import asyncio
import datetime
import decimal
import os
import sys
import uuid

import asyncpg


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


async def main():
    c = await asyncpg.connect(
        host="127.0.0.1",
        port=int(os.environ["EDDY_PORT"]),
        user=os.environ.get("EDDY_USER", "eddy"),
        password=os.environ.get("EDDY_PASSWORD", "secret"),
        database=os.environ.get("EDDY_DB", "eddy"),
        ssl=False,
    )
    # literals of each array type, decoded by the codec introspection finds
    check(await c.fetchval("SELECT ARRAY[1, 2, 3]::int4[]") == [1, 2, 3], "int4[]")
    check(await c.fetchval("SELECT ARRAY[1, NULL]::int8[]") == [1, None], "int8[] with NULL")
    check(await c.fetchval("SELECT ARRAY[1.5, -2]::float8[]") == [1.5, -2.0], "float8[]")
    check(await c.fetchval("SELECT ARRAY[true, false]") == [True, False], "bool[]")
    check(await c.fetchval("SELECT ARRAY['a', 'b c']") == ["a", "b c"], "text[]")
    check(await c.fetchval("SELECT '{}'::int4[]") == [], "empty int4[]")

    await c.execute("DROP TABLE IF EXISTS apg_arrays")
    await c.execute(
        "CREATE TABLE apg_arrays (id int PRIMARY KEY, i2 int2[], i4 int4[], i8 int8[], "
        "f8 float8[], b bool[], t text[], n numeric(10,2)[], d date[], ts timestamp[], "
        "u uuid[])"
    )
    row = (
        1,
        [1, -2],
        [3, None, 5],
        [2**40],
        [0.25],
        [True, None],
        ["x", "y,z", '"q"'],
        [decimal.Decimal("1.50"), decimal.Decimal("-0.25")],
        [datetime.date(2024, 2, 29)],
        [datetime.datetime(2024, 1, 2, 3, 4, 5, 600000)],
        [uuid.UUID("12345678-1234-5678-1234-567812345678")],
    )
    # binary array parameters, encoded with the codecs introspection found
    await c.execute("INSERT INTO apg_arrays VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)", *row)
    got = await c.fetchrow("SELECT * FROM apg_arrays WHERE id = 1")
    check(tuple(got) == row, f"array row round trip: {tuple(got)}")
    check(await c.fetchval("SELECT i4[2] IS NULL AND i4[3] = 5 FROM apg_arrays") is True, "subscripts")
    # an array parameter compared with a column
    check(await c.fetchval("SELECT count(*) FROM apg_arrays WHERE i4 = $1", [3, None, 5]) == 1,
          "array parameter in WHERE")
    await c.executemany("INSERT INTO apg_arrays (id, i4) VALUES ($1, $2)", [(2, [7]), (3, [])])
    check([r["i4"] for r in await c.fetch("SELECT i4 FROM apg_arrays WHERE id > 1 ORDER BY id")]
          == [[7], []], "executemany with array parameters")

    # the catalogs' oid columns are oid (asyncpg decodes them as int)
    oid = await c.fetchval("SELECT oid FROM pg_class WHERE relname = 'apg_arrays'")
    check(isinstance(oid, int) and oid > 0, f"pg_class.oid is an int: {oid!r}")
    check(await c.fetchval("SELECT $1::oid = oid FROM pg_class WHERE relname = 'apg_arrays'", oid)
          is True, "oid parameter")
    types = await c.fetch(
        "SELECT a.attname, a.atttypid FROM pg_attribute a WHERE a.attrelid = $1 AND a.attnum > 0 "
        "ORDER BY a.attnum", oid)
    check([r["atttypid"] for r in types][:4] == [23, 1005, 1007, 1016], f"atttypid: {types}")
    stmt = await c.prepare("SELECT oid, typname FROM pg_type WHERE oid = $1")
    check([p.name for p in stmt.get_parameters()] == ["oid"], "a pg_type.oid parameter is oid")
    check([a.type.name for a in stmt.get_attributes()][0] == "oid", "pg_type.oid is oid")
    check((await stmt.fetchrow(1007))["typname"] == "_int4", "pg_type row by oid")
    await c.execute("DROP TABLE apg_arrays")
    await c.close()
    print("asyncpg types: ok")


asyncio.run(main())
