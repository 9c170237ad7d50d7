"""Settings in the startup message (libpq's `options=-c name=value`, i.e.
PGOPTIONS, and asyncpg's server_settings), as PostgreSQL 15 treats them:
a setting the server can apply becomes the session's default (and what
RESET returns to); one it cannot apply ends the connection with FATAL
before any statement, instead of being dropped while the client believes
it holds.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. PostgreSQL 15
passes every check (scripts/ci/drivers-against-postgres.sh); the checks
marked Eddy-only are where Eddy refuses what PostgreSQL supports.
"""
import asyncio
import os
import sys

import asyncpg
import psycopg


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


def refused(options, message):
    """The connection with these options fails with `message` (libpq gives
    no SQLSTATE for a failed connection; the text is PostgreSQL's)."""
    try:
        psycopg.connect(conninfo(options)).close()
    except psycopg.OperationalError as e:
        check(message in str(e), f"{options}: {e}")
        return
    check(False, f"{options} was accepted")


def psycopg_checks():
    with psycopg.connect(
        conninfo(
            "-c statement_timeout=1500 -c lock_timeout=2min "
            "-c default_transaction_isolation=repeatable\\\\ read "
            "-c application_name=startup_check -c myapp.tenant=7"
        ),
        autocommit=True,
    ) as c:
        show = lambda name: c.execute(f"SHOW {name}").fetchone()[0]
        check(show("statement_timeout") == "1500ms", f"statement_timeout {show('statement_timeout')}")
        check(show("lock_timeout") == "2min", f"lock_timeout {show('lock_timeout')}")
        check(show("application_name") == "startup_check", "application_name")
        check(c.execute("SELECT current_setting('myapp.tenant')").fetchone()[0] == "7", "custom")
        with c.transaction():
            iso = show("transaction_isolation")
        check(iso == "repeatable read", f"isolation at startup: {iso}")
        # SET changes it; RESET returns to the startup value
        c.execute("SET statement_timeout = '3s'")
        check(show("statement_timeout") == "3s", "SET")
        c.execute("RESET statement_timeout")
        check(show("statement_timeout") == "1500ms", f"RESET: {show('statement_timeout')}")

    refused("-c TimeZone=Foo/Bar", 'invalid value for parameter "TimeZone": "Foo/Bar"')
    refused("-c statement_timeout=soon", 'invalid value for parameter "statement_timeout"')
    refused("-c no_such_setting=1", '"no_such_setting"')
    refused("-c default_transaction_isolation=bogus", "bogus")


def asyncpg_connect(server_settings):
    return asyncpg.connect(
        host="127.0.0.1",
        port=int(os.environ["EDDY_PORT"]),
        user=os.environ.get("EDDY_USER", "eddy"),
        password=os.environ.get("EDDY_PASSWORD", "secret"),
        database=os.environ.get("EDDY_DB", "eddy"),
        ssl=False,
        server_settings=server_settings,
    )


async def asyncpg_checks():
    c = await asyncpg_connect({"statement_timeout": "250", "TimeZone": "Asia/Tokyo"})
    try:
        check(await c.fetchval("SHOW statement_timeout") == "250ms", "asyncpg statement_timeout")
        check(await c.fetchval("SHOW TimeZone") == "Asia/Tokyo", "asyncpg TimeZone")
    finally:
        await c.close()
    try:
        await asyncpg_connect({"statement_timeout": "-5"})
        check(False, "asyncpg: statement_timeout=-5 accepted")
    except asyncpg.PostgresError as e:
        check(e.sqlstate == "22023", f"asyncpg: {e.sqlstate} {e}")


psycopg_checks()
asyncio.run(asyncpg_checks())
print("startup settings: ok")
