"""Retention and export on PostgreSQL: ``apply_retention`` drops whole day partitions,
``iter_records`` streams records by keyset pagination.

What a retention pass keeps
---------------------------
Of the records older than the cut: those pending review (a row in ``review_queue``: queued and
unlabelled) and, per (tenant, panel), the newest ``keep_labelled`` labelled records of all time
(the refit's window; :func:`_bounds` finds the k-th newest per panel with one index seek each).

How (and why the default partition)
-----------------------------------
1. The watermark day is raised to the cut's day (under the partition lock), so no process
   creates a partition below it any more (:mod:`.partitions`).
2. Each day partition wholly older than the cut is handled in one transaction: the partitioned
   table is locked (``ACCESS EXCLUSIVE``: in-flight writes finish first, new ones wait, for as
   long as it takes to copy the kept rows, which are few), the keep set is computed, the
   partition is detached, its kept rows are inserted back into ``verdicts`` (where they route
   to ``verdicts_default``, the partition's range now being unclaimed), and the detached table
   is dropped: the bulk of a day goes with one ``DROP TABLE``, not row by row, and leaves no
   dead tuples to vacuum.
3. What is older than the cut but not in a dropped day (the part of the cut's own day before
   it, and ``verdicts_default``) is deleted row by row (no table lock).
4. ``verdict_ids`` rows whose record is gone are deleted (a dropped id may be used again).

Kept rows go to the **default partition** rather than to a separate keep table because then
every query (``get_verdict``, ``set_label``, ``iter_labelled``, leases, export) reads them
through ``verdicts`` unchanged: no UNION anywhere, no second place to forget. The price is that
creating a new day partition scans ``verdicts_default`` to prove none of its rows belongs to
the new day: it holds only kept rows (pending reviews and the refit window), small by design.

Accumulators, counters, thresholds, models, state blobs and monitor events are never touched.
A second pass with the same cut drops nothing (idempotent).
"""

from __future__ import annotations

import math
from typing import Any

import psycopg

from judgefuse.service.storage.postgres.partitions import (
    DAY_S,
    PARTITION_LOCK,
    partition_days,
    partition_name,
    watermark,
)
from judgefuse.service.storage.retention import RetentionReport

__all__ = ["records_page", "retain"]

_PENDING = "EXISTS (SELECT 1 FROM review_queue q WHERE q.tenant = v.tenant AND q.id = v.id)"
_KEEP = (
    f"({_PENDING} OR (v.label IS NOT NULL AND %(k)s > 0 AND NOT EXISTS ("
    "SELECT 1 FROM _bounds b WHERE b.tenant = v.tenant AND b.panel = v.panel "
    "AND (v.created_at, v.id) < (b.created_at, b.id))))"
)
"""A row ``v`` is kept: pending review, or labelled and not older than its panel's k-th newest
labelled record (no bound: the panel has fewer than k labels, all kept)."""


async def _bounds(conn: psycopg.AsyncConnection, k: int) -> None:
    """``_bounds(tenant, panel, created_at, id)``: the k-th newest labelled record of every
    (tenant, panel) that has at least k (a temp table dropped at commit)."""
    await conn.execute(
        "CREATE TEMP TABLE _bounds (tenant text COLLATE \"C\", panel text COLLATE \"C\", "
        "created_at float8, id text COLLATE \"C\") ON COMMIT DROP"
    )
    if k > 0:
        await conn.execute(
            "INSERT INTO _bounds SELECT p.tenant, p.panel, b.created_at, b.id FROM "
            "(SELECT DISTINCT tenant, panel FROM verdicts WHERE label IS NOT NULL) p "
            "CROSS JOIN LATERAL (SELECT w.created_at, w.id FROM verdicts w "
            " WHERE w.tenant = p.tenant AND w.panel = p.panel AND w.label IS NOT NULL "
            " ORDER BY w.created_at DESC, w.id DESC OFFSET %s LIMIT 1) b",
            (k - 1,),
        )


async def _drop_day(conn: psycopg.AsyncConnection, day: int, k: int) -> int:
    """Step 2 for one day partition; the number of records dropped with it."""
    name = partition_name(day)  # from an int, never user input
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (PARTITION_LOCK,))
        cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))
        row = await cur.fetchone()
        if row is None or not row[0]:
            return 0  # another pass dropped it
        await conn.execute("LOCK TABLE verdicts IN ACCESS EXCLUSIVE MODE")
        await _bounds(conn, k)
        await conn.execute(
            f"CREATE TEMP TABLE _kept ON COMMIT DROP AS SELECT * FROM {name} v WHERE {_KEEP}",
            {"k": k},
        )
        cur = await conn.execute(f"SELECT (SELECT count(*) FROM {name}) - (SELECT count(*) FROM _kept)")
        row = await cur.fetchone()
        dropped = int(row[0]) if row else 0
        await conn.execute(f"ALTER TABLE verdicts DETACH PARTITION {name}")
        await conn.execute("INSERT INTO verdicts SELECT * FROM _kept")
        await conn.execute(f"DROP TABLE {name}")
    return dropped


async def retain(
    conn: psycopg.AsyncConnection, older_than: float, keep_labelled: int
) -> RetentionReport:
    """One retention pass (see the module docstring); ``conn`` in autocommit mode."""
    cut_day = math.floor(older_than / DAY_S)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (PARTITION_LOCK,))
        mark = await watermark(conn)
        if mark is None or mark < cut_day:
            await conn.execute(
                "INSERT INTO meta (name, value) VALUES ('retention_watermark_day', %s) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (str(cut_day),),
            )
        old_days = [day for day in await partition_days(conn) if day < cut_day]
    dropped = 0
    for day in old_days:
        dropped += await _drop_day(conn, day, keep_labelled)
    async with conn.transaction():
        await _bounds(conn, keep_labelled)
        cur = await conn.execute(
            f"DELETE FROM verdicts v WHERE v.created_at < %(cut)s AND NOT {_KEEP}",
            {"cut": older_than, "k": keep_labelled},
        )
        dropped += max(cur.rowcount, 0)
    await conn.execute(  # a dropped verdict's label history goes with its id
        "WITH gone AS (DELETE FROM verdict_ids i WHERE i.created_at < %s AND NOT EXISTS ("
        "SELECT 1 FROM verdicts v WHERE v.created_at = i.created_at AND v.tenant = i.tenant "
        "AND v.id = i.id) RETURNING i.tenant, i.id) "
        "DELETE FROM label_history h USING gone WHERE h.tenant = gone.tenant AND h.id = gone.id",
        (older_than,),
    )
    cur = await conn.execute(
        f"SELECT count(*) FILTER (WHERE {_PENDING}), "
        f"count(*) FILTER (WHERE NOT {_PENDING} AND v.label IS NOT NULL) "
        "FROM verdicts v WHERE v.created_at < %s",
        (older_than,),
    )
    row = await cur.fetchone()
    pending, labelled = (int(row[0]), int(row[1])) if row else (0, 0)
    return RetentionReport(dropped=dropped, kept_pending=pending, kept_labelled=labelled)


async def records_page(
    conn: psycopg.AsyncConnection,
    *,
    tenant: str | None,
    panel: str | None,
    since: float | None,
    until: float | None,
    labelled_only: bool,
    after: tuple[float, str, str] | None,
    limit: int,
) -> list[tuple[float, str, str, str]]:
    """One page of (created_at, tenant, id, body) in (created_at, tenant, id) order, strictly
    after the key ``after``: keyset pagination on the primary key, so every page is one index
    range scan, whatever page it is."""
    where = []
    params: dict[str, Any] = {"limit": limit}
    if after is not None:
        where.append("(created_at, tenant, id) > (%(c)s, %(t)s, %(i)s)")
        params.update(c=after[0], t=after[1], i=after[2])
    if tenant is not None:
        where.append("tenant = %(tenant)s")
        params["tenant"] = tenant
    if panel is not None:
        where.append("panel = %(panel)s")
        params["panel"] = panel
    if since is not None:
        where.append("created_at >= %(since)s")
        params["since"] = float(since)
    if until is not None:
        where.append("created_at < %(until)s")
        params["until"] = float(until)
    if labelled_only:  # an A or B label, like iter_labelled
        where.append("label IS NOT NULL AND label IN ('A', 'B')")
    sql = "SELECT created_at, tenant, id, body FROM verdicts"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY created_at, tenant, id LIMIT %(limit)s"
    cur = await conn.execute(sql, params)
    return [(float(c), str(t), str(i), str(b)) for c, t, i, b in await cur.fetchall()]

