"""The session's TimeZone through psycopg 3 and asyncpg: the zone a client
asks for at startup (`options=-c TimeZone=...`, asyncpg's server_settings)
and by SET is reported back (ParameterStatus), text without an offset is
read on its wall clock, instants print there, and aware and naive
datetimes round-trip as PostgreSQL's do.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. PostgreSQL 15
passes every check (scripts/ci/drivers-against-postgres.sh).
"""
import asyncio
import datetime
import os
import sys
from zoneinfo import ZoneInfo

import asyncpg
import psycopg

UTC = datetime.timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


def conninfo(options=None):
    s = (
        f"host=127.0.0.1 port={os.environ['EDDY_PORT']} "
        f"user={os.environ.get('EDDY_USER', 'eddy')} "
        f"password={os.environ.get('EDDY_PASSWORD', 'secret')} "
        f"dbname={os.environ.get('EDDY_DB', 'eddy')} sslmode=disable"
    )
    if options:
        s += f" options='{options}'"
    return s


def psycopg_checks():
    # the zone of the startup options, reported at once
    with psycopg.connect(conninfo("-c TimeZone=Asia/Tokyo"), autocommit=True) as c:
        check(c.info.parameter_status("TimeZone") == "Asia/Tokyo", "startup TimeZone reported")
        got = c.execute("SELECT (timestamptz '2024-06-01 10:00+00')::text").fetchone()[0]
        check(got == "2024-06-01 19:00:00+09", f"text in Tokyo: {got}")

    with psycopg.connect(conninfo(), autocommit=True) as c:
        check(c.info.parameter_status("TimeZone") == "UTC", "default zone")
        c.execute("SET TimeZone = 'Europe/Berlin'")
        check(c.info.parameter_status("TimeZone") == "Europe/Berlin", "SET reported")
        c.execute("DROP TABLE IF EXISTS tz_drv")
        c.execute("CREATE TABLE tz_drv (id int PRIMARY KEY, at timestamptz, local_at timestamp)")
        aware = datetime.datetime(2024, 6, 1, 8, 0, tzinfo=UTC)
        naive = datetime.datetime(2024, 6, 1, 10, 0)
        # an aware datetime keeps its instant; a naive one into a
        # timestamptz column is Berlin's wall clock; text without offset too
        c.execute("INSERT INTO tz_drv VALUES (1, %s, %s)", [aware, naive])
        c.execute("INSERT INTO tz_drv VALUES (2, %s, %s)", [naive, naive])
        c.execute("INSERT INTO tz_drv VALUES (3, '2024-06-01 10:00', '2024-06-01 10:00')")
        for binary in (False, True):
            rows = c.execute("SELECT id, at, local_at FROM tz_drv ORDER BY id", binary=binary).fetchall()
            for r in rows:
                check(r[1] == aware, f"instant of row {r[0]} (binary {binary}): {r[1]}")
                check(r[1].tzinfo == BERLIN, f"zone of row {r[0]} (binary {binary}): {r[1].tzinfo}")
                check(r[2] == naive, f"wall clock of row {r[0]}: {r[2]}")
        # calendar arithmetic on the wall clock
        got = c.execute(
            "SELECT date_trunc('day', at)::text, (at + interval '1 day')::text, at::date "
            "FROM tz_drv WHERE id = 1"
        ).fetchone()
        check(
            got == ("2024-06-01 00:00:00+02", "2024-06-02 10:00:00+02", datetime.date(2024, 6, 1)),
            f"calendar: {got}",
        )
        # a prepared statement planned before a change of zone
        q = "SELECT count(*) FROM tz_drv WHERE at = %s::timestamptz"
        for _ in range(6):
            check(c.execute(q, ["2024-06-01 10:00"], prepare=True).fetchone()[0] == 3, "prepared in Berlin")
        c.execute("SET TimeZone = 'UTC'")
        check(c.info.parameter_status("TimeZone") == "UTC", "back to UTC reported")
        check(c.execute(q, ["2024-06-01 10:00"], prepare=True).fetchone()[0] == 0, "prepared, now in UTC")
        check(c.execute(q, ["2024-06-01 08:00"], prepare=True).fetchone()[0] == 3, "prepared, UTC instant")
        c.execute("DROP TABLE tz_drv")


async def asyncpg_checks():
    c = await asyncpg.connect(
        host="127.0.0.1",
        port=int(os.environ["EDDY_PORT"]),
        user=os.environ.get("EDDY_USER", "eddy"),
        password=os.environ.get("EDDY_PASSWORD", "secret"),
        database=os.environ.get("EDDY_DB", "eddy"),
        ssl=False,
        server_settings={"timezone": "America/New_York"},
    )
    check(c.get_settings().TimeZone == "America/New_York", "asyncpg startup zone")
    got = await c.fetchval("SELECT (timestamptz '2024-01-15 12:00+00')::text")
    check(got == "2024-01-15 07:00:00-05", f"asyncpg text: {got}")
    # asyncpg sends aware datetimes as instants and returns UTC ones
    at = datetime.datetime(2024, 1, 15, 12, 0, tzinfo=UTC)
    back = await c.fetchval("SELECT $1::timestamptz", at)
    check(back == at, f"asyncpg round trip: {back}")
    day = await c.fetchval("SELECT $1::timestamptz::date", at)
    check(day == datetime.date(2024, 1, 15), f"asyncpg local date: {day}")
    late = datetime.datetime(2024, 1, 16, 3, 0, tzinfo=UTC)
    day = await c.fetchval("SELECT $1::timestamptz::date", late)
    check(day == datetime.date(2024, 1, 15), f"asyncpg local date before midnight: {day}")
    await c.close()


psycopg_checks()
asyncio.run(asyncpg_checks())
print("time zones: ok")
