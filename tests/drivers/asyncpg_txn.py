"""asyncpg against a running Eddy: transactions, savepoints, binary values and
concurrent increments without lost updates. Exits non-zero on a broken check."""
import asyncio
import os
import sys
from decimal import Decimal

import asyncpg


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


async def connect():
    return await asyncpg.connect(
        host="127.0.0.1", port=int(os.environ["EDDY_PORT"]), user=os.environ.get("EDDY_USER", "eddy"),
        password=os.environ.get("EDDY_PASSWORD", "secret"), database=os.environ.get("EDDY_DB", "eddy"), ssl=False,
    )


async def increment(times):
    conn = await connect()
    try:
        for _ in range(times):
            await conn.execute("UPDATE apg_counter SET n = n + $1 WHERE id = 1", 1)
    finally:
        await conn.close()


async def main():
    conn = await connect()
    await conn.execute("DROP TABLE IF EXISTS apg_t")
    await conn.execute("DROP TABLE IF EXISTS apg_counter")
    await conn.execute("CREATE TABLE apg_t (id bigint PRIMARY KEY, price numeric(12,4), tag text)")
    await conn.execute("CREATE TABLE apg_counter (id int PRIMARY KEY, n bigint)")
    await conn.execute("INSERT INTO apg_counter VALUES (1, 0)")

    async with conn.transaction():
        await conn.execute("INSERT INTO apg_t VALUES ($1, $2, $3)", 1, Decimal("12345.6789"), "ünï")
        try:
            async with conn.transaction():  # a savepoint
                await conn.execute("INSERT INTO apg_t VALUES ($1, $2, $3)", 2, Decimal("-0.0001"), "x")
                raise RuntimeError("inner")
        except RuntimeError:
            pass
        check(await conn.fetchval("SELECT count(*) FROM apg_t") == 1, "savepoint undone inside block")
    got = await conn.fetch("SELECT id, price, tag FROM apg_t ORDER BY id")
    check([tuple(r) for r in got] == [(1, Decimal("12345.6789"), "ünï")], f"committed exact: {got}")

    try:
        async with conn.transaction():
            await conn.execute("UPDATE apg_t SET price = 0")
            raise RuntimeError("outer")
    except RuntimeError:
        pass
    check(await conn.fetchval("SELECT price FROM apg_t WHERE id = 1") == Decimal("12345.6789"), "rolled back")

    tr = conn.transaction(isolation="repeatable_read")
    await tr.start()
    before = await conn.fetchval("SELECT n FROM apg_counter WHERE id = 1")
    other = await connect()
    await other.execute("UPDATE apg_counter SET n = n + 1 WHERE id = 1")
    check(await conn.fetchval("SELECT n FROM apg_counter WHERE id = 1") == before, "repeatable read stable")
    try:
        await conn.execute("UPDATE apg_counter SET n = n + 1 WHERE id = 1")
        check(False, "repeatable read lost-update accepted")
    except asyncpg.exceptions.SerializationError:
        pass
    await tr.rollback()
    await other.close()

    start = await conn.fetchval("SELECT n FROM apg_counter WHERE id = 1")
    await asyncio.gather(*(increment(25) for _ in range(4)))
    end = await conn.fetchval("SELECT n FROM apg_counter WHERE id = 1")
    check(end - start == 100, f"4 x 25 concurrent increments: {end - start}")
    await conn.close()
    print("asyncpg: ok")


asyncio.run(main())
