"""asyncpg vs psycopg 3 (async, psycopg_pool) on judgefuse's PostgreSQL write path.

Usage: ``python benchmarks/bench_pg_driver.py [--url postgresql://...] [--n 2000] [--concurrency 8]``
(without ``--url`` it starts a throwaway server, as the tests do).

Both drivers run the same statements the storage runs for ``save_verdict`` (claim the id,
insert the ~1.4 KB record into the day-partitioned table, four accumulator upserts into the
total and the hour bucket) and then ``set_label`` (the row locked FOR UPDATE, the record
updated, the same upserts), each as one transaction, from ``--concurrency`` tasks over a pool
of that size. Printed: transactions/s and p50/p99 per pair, per driver. asyncpg is not a
dependency of judgefuse: ``pip install asyncpg`` to run this.

Measured here (2 cores shared with other work, load average ~5), save+label pairs/s per round:

* fsync'd commits, concurrency 1, 600 pairs: asyncpg 81 / 113 / 97, psycopg 69 / 77 / 58;
* fsync'd commits, concurrency 8: 1,500 pairs asyncpg 97 / 124, psycopg 112 / 76; 1,000 pairs
  asyncpg 50 / 95, psycopg 76 / 76;
* ``--async-commit``, concurrency 1, 600 pairs: asyncpg 78 / 114, psycopg 158 / 188;
  concurrency 8, 1,500 pairs: asyncpg 104 / 84, psycopg 159 / 89.

No consistent winner: the spread between rounds of one driver is as large as the gap between
drivers (the WAL flush, hot accumulator rows and the machine's load dominate). The storage uses
psycopg 3 for what the numbers do not decide: it is libpq underneath, so a ``postgresql://``
URL means exactly what it means to psql and every managed database's docs (``sslmode``,
``options``, service files, the PG* environment variables), and its exceptions are classed by
SQLSTATE, which the error mapping reads.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

DAY = 86400.0
SCHEMA = """
DROP TABLE IF EXISTS bench_verdicts, bench_ids, bench_acc_total, bench_acc_hour;
CREATE TABLE bench_ids (tenant text, id text, created_at float8 NOT NULL, PRIMARY KEY (tenant, id));
CREATE TABLE bench_verdicts (tenant text, id text, panel text, created_at float8, label text,
    labelled_at float8, body text, PRIMARY KEY (tenant, id, created_at))
    PARTITION BY RANGE (created_at);
CREATE TABLE bench_verdicts_d PARTITION OF bench_verdicts DEFAULT;
CREATE TABLE bench_acc_total (tenant text, key text, field text, ival bigint, fval float8,
    PRIMARY KEY (tenant, key, field));
CREATE TABLE bench_acc_hour (tenant text, key text, hour bigint, field text, ival bigint,
    fval float8, PRIMARY KEY (tenant, key, hour, field));
"""
BODY = json.dumps({"verdict": "x" * 1300})
FIELDS = ["n", "correct", "brier", "bin3"]
SAVE = [
    ("INSERT INTO bench_ids (tenant, id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
     lambda t, i, c: (t, i, c)),
    ("INSERT INTO bench_verdicts (tenant, id, panel, created_at, body) VALUES ($1, $2, 'p', $3, $4)",
     lambda t, i, c: (t, i, c, BODY)),
]
UPSERT_TOTAL = (
    "INSERT INTO bench_acc_total AS a (tenant, key, field, ival) VALUES ($1, 'k', $2, 1) "
    "ON CONFLICT (tenant, key, field) DO UPDATE SET ival = a.ival + excluded.ival"
)
UPSERT_HOUR = (
    "INSERT INTO bench_acc_hour AS a (tenant, key, hour, field, ival) VALUES ($1, 'k', $2, $3, 1) "
    "ON CONFLICT (tenant, key, hour, field) DO UPDATE SET ival = a.ival + excluded.ival"
)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


ASYNC_COMMIT = False
"""--async-commit: ``synchronous_commit = off`` per session, so the WAL flush (the disk) leaves
the measurement and what remains is the driver's own cost per statement."""


async def bench_asyncpg(url: str, n: int, concurrency: int) -> tuple[float, list[float]]:
    import asyncpg

    async def init(conn: asyncpg.Connection) -> None:
        if ASYNC_COMMIT:
            await conn.execute("SET synchronous_commit = off")

    pool = await asyncpg.create_pool(url, min_size=concurrency, max_size=concurrency, init=init)
    async with pool.acquire() as conn:
        await conn.execute(SCHEMA)
    latencies: list[float] = []

    async def one(i: int) -> None:
        tenant, vid, created = "t", uuid.uuid4().hex, time.time()
        start = time.perf_counter()
        async with pool.acquire() as conn:
            async with conn.transaction():
                for sql, args in SAVE:
                    await conn.execute(sql, *args(tenant, vid, created))
                for field in FIELDS:
                    await conn.execute(UPSERT_TOTAL, tenant, field)
                    await conn.execute(UPSERT_HOUR, tenant, int(created // 3600), field)
            async with conn.transaction():
                await conn.fetchrow(
                    "SELECT body FROM bench_verdicts WHERE tenant = $1 AND id = $2 AND created_at = $3 "
                    "FOR UPDATE", tenant, vid, created)
                await conn.execute(
                    "UPDATE bench_verdicts SET label = 'A', labelled_at = $4, body = $5 "
                    "WHERE tenant = $1 AND id = $2 AND created_at = $3", tenant, vid, created,
                    time.time(), BODY)
                for field in FIELDS:
                    await conn.execute(UPSERT_TOTAL, tenant, field)
                    await conn.execute(UPSERT_HOUR, tenant, int(created // 3600), field)
        latencies.append(time.perf_counter() - start)

    elapsed = await _drive(one, n, concurrency)
    await pool.close()
    return n / elapsed, latencies


async def bench_psycopg(url: str, n: int, concurrency: int) -> tuple[float, list[float]]:
    from psycopg_pool import AsyncConnectionPool

    def ps(sql: str) -> str:  # psycopg uses %s placeholders
        import re

        return re.sub(r"\$\d+", "%s", sql)

    async def configure(conn) -> None:  # type: ignore[no-untyped-def]
        if ASYNC_COMMIT:
            await conn.execute("SET synchronous_commit = off")
            await conn.commit()

    pool = AsyncConnectionPool(
        url, min_size=concurrency, max_size=concurrency, open=False, configure=configure
    )
    await pool.open()
    async with pool.connection() as conn:
        await conn.execute(SCHEMA)
    latencies: list[float] = []
    upsert_total, upsert_hour = ps(UPSERT_TOTAL), ps(UPSERT_HOUR)

    async def one(i: int) -> None:
        tenant, vid, created = "t", uuid.uuid4().hex, time.time()
        start = time.perf_counter()
        async with pool.connection() as conn:
            async with conn.transaction():
                for sql, args in SAVE:
                    await conn.execute(ps(sql), args(tenant, vid, created))
                for field in FIELDS:
                    await conn.execute(upsert_total, (tenant, field))
                    await conn.execute(upsert_hour, (tenant, int(created // 3600), field))
            async with conn.transaction():
                cur = await conn.execute(
                    "SELECT body FROM bench_verdicts WHERE tenant = %s AND id = %s "
                    "AND created_at = %s FOR UPDATE", (tenant, vid, created))
                await cur.fetchone()
                await conn.execute(
                    "UPDATE bench_verdicts SET label = 'A', labelled_at = %s, body = %s "
                    "WHERE tenant = %s AND id = %s AND created_at = %s",
                    (time.time(), BODY, tenant, vid, created))
                for field in FIELDS:
                    await conn.execute(upsert_total, (tenant, field))
                    await conn.execute(upsert_hour, (tenant, int(created // 3600), field))
        latencies.append(time.perf_counter() - start)

    elapsed = await _drive(one, n, concurrency)
    await pool.close()
    return n / elapsed, latencies


async def _drive(one, n: int, concurrency: int) -> float:  # type: ignore[no-untyped-def]
    queue = iter(range(n))

    async def worker() -> None:
        for i in queue:
            await one(i)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=None)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per driver")
    parser.add_argument("--async-commit", action="store_true",
                        help="synchronous_commit=off: the driver's cost without the WAL flush")
    args = parser.parse_args()
    global ASYNC_COMMIT
    ASYNC_COMMIT = args.async_commit
    server = None
    url = args.url
    if url is None:
        from jf_test_support.pg_server import start_postgres

        server = start_postgres()
        url = server.url()
    try:
        for round_no in range(args.rounds):
            for name, bench in (("asyncpg", bench_asyncpg), ("psycopg", bench_psycopg)):
                rate, lat = await bench(url, args.n, args.concurrency)
                print(f"round {round_no + 1} {name:8s} {rate:7.0f} save+label pairs/s  "
                      f"p50 {1000 * statistics.median(lat):6.2f} ms  "
                      f"p99 {1000 * _pct(lat, 0.99):6.2f} ms  (n={args.n}, "
                      f"concurrency={args.concurrency})", flush=True)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
