"""LISTEN / NOTIFY through real drivers: psycopg 3's `conn.notifies()` and
asyncpg's `add_listener` receive, on an idle connection, what another
connection sends (with the sender's backend pid), and nothing from a
rolled-back block.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. PostgreSQL 15
passes every check (scripts/ci/drivers-against-postgres.sh).
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


KW = dict(
    host="127.0.0.1",
    port=int(os.environ["EDDY_PORT"]),
    user=os.environ.get("EDDY_USER", "eddy"),
    password=os.environ.get("EDDY_PASSWORD", "secret"),
    dbname=os.environ.get("EDDY_DB", "eddy"),
)


def psycopg3():
    listener = psycopg.connect(**KW, autocommit=True)
    notifier = psycopg.connect(**KW, autocommit=True)
    listener.execute("LISTEN psycopg_jobs")
    pid = notifier.execute("SELECT pg_backend_pid()").fetchone()[0]
    check(pid == notifier.info.backend_pid, "pg_backend_pid() is BackendKeyData's pid")
    # rolled back: never delivered
    try:
        with notifier.transaction():
            notifier.execute("NOTIFY psycopg_jobs, 'rolled back'")
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    # committed block: the duplicate once, in order
    with notifier.transaction():
        notifier.execute("NOTIFY psycopg_jobs, 'one'")
        notifier.execute("SELECT pg_notify('psycopg_jobs', 'two')")
        notifier.execute("NOTIFY psycopg_jobs, 'one'")
    got = [(n.pid, n.channel, n.payload)
           for n in listener.notifies(timeout=10, stop_after=2)]
    check(got == [(pid, "psycopg_jobs", "one"), (pid, "psycopg_jobs", "two")],
          f"psycopg notifies(): {got}")
    # nothing else is on its way
    more = list(listener.notifies(timeout=0.5))
    check(more == [], f"no more notifications, got {more}")
    listener.close()
    notifier.close()


async def asyncpg_listener():
    kw = dict(KW, database=KW["dbname"], ssl=False)
    del kw["dbname"]
    conn = await asyncpg.connect(**kw)
    other = await asyncpg.connect(**kw)
    got = asyncio.Queue()

    def on_notify(c, pid, channel, payload):
        got.put_nowait((pid, channel, payload))

    await conn.add_listener("asyncpg_jobs", on_notify)
    await other.execute("NOTIFY asyncpg_jobs, 'hello'")
    n = await asyncio.wait_for(got.get(), 10)
    check(n == (other.get_server_pid(), "asyncpg_jobs", "hello"), f"asyncpg listener: {n}")
    async with other.transaction():
        await other.execute("SELECT pg_notify('asyncpg_jobs', $1)", "in a block")
        await asyncio.sleep(0.2)
        check(got.empty(), "nothing before COMMIT")
    n = await asyncio.wait_for(got.get(), 10)
    check(n[2] == "in a block", f"asyncpg after COMMIT: {n}")
    await conn.remove_listener("asyncpg_jobs", on_notify)
    await conn.close()
    await other.close()


psycopg3()
asyncio.run(asyncpg_listener())
print("listen_notify: ok")
