"""Day partitions of ``verdicts``, created on demand and safely under concurrency.

A day is ``floor(created_at / 86400)`` (UTC); its partition ``verdicts_d<day>`` holds
[day * 86400, (day + 1) * 86400). Creating one takes a short transaction of its own, before the
insert that needs it, under a transaction-level advisory lock (:data:`PARTITION_LOCK`) that the
retention pass also takes: two replicas racing for the same new day serialise on the lock and
the second finds the table there (``IF NOT EXISTS``), and a retention pass never drops a
partition while another process creates it.

Days below the **watermark** (``meta.retention_watermark_day``, raised by retention when it
drops whole days) get no partition: their rows go to ``verdicts_default``, where retention
moved the rows it kept. So a late record of a dropped day lands beside the kept ones instead of
recreating a partition whose range the default partition already holds (which PostgreSQL would
refuse).
"""

from __future__ import annotations

import psycopg

__all__ = [
    "DAY_S",
    "PARTITION_LOCK",
    "day_of",
    "ensure_partition",
    "partition_days",
    "partition_name",
    "watermark",
]

DAY_S = 86400
PARTITION_LOCK = 0x6A66_0002
"""Advisory lock key held while a partition is created, detached or dropped."""


def day_of(created_at: float) -> int:
    return int(created_at // DAY_S)


def partition_name(day: int) -> str:
    """``verdicts_d<day>``; a negative day (before 1970) is spelled ``verdicts_dm<-day>``."""
    return f"verdicts_d{day}" if day >= 0 else f"verdicts_dm{-day}"


async def watermark(conn: psycopg.AsyncConnection) -> int | None:
    cur = await conn.execute("SELECT value FROM meta WHERE name = 'retention_watermark_day'")
    row = await cur.fetchone()
    return None if row is None else int(row[0])


async def ensure_partition(conn: psycopg.AsyncConnection, day: int) -> bool:
    """Create the partition of ``day`` unless it exists or the day is below the watermark
    (then its rows go to the default partition). One transaction; True when the day has a
    partition afterwards. ``conn`` is in autocommit mode, outside any transaction."""
    name = partition_name(day)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (PARTITION_LOCK,))
        mark = await watermark(conn)
        if mark is not None and day < mark:
            return False
        cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))
        row = await cur.fetchone()
        if row is not None and row[0]:
            return True
        # name and bounds are computed from an int, never user input
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF verdicts "
            f"FOR VALUES FROM ({day * DAY_S}) TO ({(day + 1) * DAY_S})"
        )
    return True


async def partition_days(conn: psycopg.AsyncConnection) -> list[int]:
    """The days that have a partition now, ascending."""
    cur = await conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'verdicts'::regclass AND c.relname LIKE 'verdicts\\_d%'"
    )
    days = []
    for (name,) in await cur.fetchall():
        tail = name[len("verdicts_d"):]
        if tail.startswith("m") and tail[1:].isdigit():
            days.append(-int(tail[1:]))
        elif tail.isdigit():
            days.append(int(tail))
    return sorted(days)
