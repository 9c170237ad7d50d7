"""asyncpg's connection pool against a running server: every release runs
the pool's reset (pg_advisory_unlock_all, CLOSE ALL, UNLISTEN *, RESET ALL),
so a pool that works at all needs those; plus SERIAL ids with RETURNING and
session-level advisory locks between two connections.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. PostgreSQL 15
passes every check (scripts/ci/drivers-against-postgres.sh).
"""
import asyncio
import os
import sys

import asyncpg


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


async def main():
    kw = dict(
        host="127.0.0.1",
        port=int(os.environ["EDDY_PORT"]),
        user=os.environ.get("EDDY_USER", "eddy"),
        password=os.environ.get("EDDY_PASSWORD", "secret"),
        database=os.environ.get("EDDY_DB", "eddy"),
        ssl=False,
    )
    pool = await asyncpg.create_pool(min_size=2, max_size=4, **kw)
    async with pool.acquire() as c:
        await c.execute("DROP TABLE IF EXISTS pool_items")
        await c.execute("CREATE TABLE pool_items (id bigserial PRIMARY KEY, worker int, n int)")

    async def worker(w):
        ids = []
        for n in range(20):
            # each acquire/release cycle runs the pool's reset query
            async with pool.acquire() as c:
                ids.append(await c.fetchval(
                    "INSERT INTO pool_items (worker, n) VALUES ($1, $2) RETURNING id", w, n))
        return ids

    results = await asyncio.gather(*(worker(w) for w in range(6)))
    ids = [i for r in results for i in r]
    check(len(ids) == 120 and len(set(ids)) == 120, f"120 distinct ids, got {len(set(ids))}")
    async with pool.acquire() as c:
        check(await c.fetchval("SELECT count(*) FROM pool_items") == 120, "120 rows")
        check(sorted(ids) == [r["id"] for r in await c.fetch("SELECT id FROM pool_items ORDER BY id")],
              "the ids RETURNING gave are the stored ones")

    # set_config (asyncpg turns jit off with it before it introspects a
    # type) and an oid[] parameter (its introspection query's): announced
    # as oid[], which asyncpg encodes with its own codec
    async with pool.acquire() as c:
        check(await c.fetchval("SELECT set_config('jit', 'off', false)") == "off", "set_config")
        check(await c.fetchval("SHOW jit") == "off", "jit is off")
        check(await c.fetchval("SELECT 1007 = ANY($1::oid[])", [1007, 23]) is True, "oid[] parameter")
        check(await c.fetchval("SELECT cardinality($1::oid[])", []) == 0, "empty oid[] parameter")

    # advisory locks: exclusive between sessions, re-entrant, released by
    # unlock_all and by the session's end
    a = await asyncpg.connect(**kw)
    b = await asyncpg.connect(**kw)
    check(await a.fetchval("SELECT pg_try_advisory_lock(42)") is True, "a locks 42")
    check(await a.fetchval("SELECT pg_try_advisory_lock(42)") is True, "a locks 42 again")
    check(await b.fetchval("SELECT pg_try_advisory_lock(42)") is False, "b cannot lock 42")
    check(await b.fetchval("SELECT pg_try_advisory_lock(1, 2)") is True, "b locks (1, 2)")
    check(await a.fetchval("SELECT pg_advisory_unlock(42)") is True, "a unlocks once")
    check(await b.fetchval("SELECT pg_try_advisory_lock(42)") is False, "still held once")
    await a.execute("SELECT pg_advisory_unlock_all()")
    check(await b.fetchval("SELECT pg_try_advisory_lock(42)") is True, "free after unlock_all")
    await b.close()
    check(await a.fetchval("SELECT pg_try_advisory_lock(42)") is True, "free after b's end")
    check(await a.fetchval("SELECT pg_advisory_unlock(43)") is False, "43 was not held")
    await a.close()
    await pool.close()
    print("asyncpg pool: ok")


asyncio.run(main())
