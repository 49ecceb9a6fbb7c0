"""The PostgreSQL backend's review-queue statements: enqueue on save, dequeue on label, lease
(``FOR UPDATE SKIP LOCKED``), release, and the counters ``review_stats`` reads.

As in :mod:`~judgefuse.service.storage.sqlite.review`, each function runs inside its caller's transaction, so the queue,
its counters and the verdict row change together. A lease is (``lease_owner``,
``lease_expires_at``) on the queue row, live while ``lease_expires_at > now``; an expired one
is overwritten by the next lease. Two annotators leasing at once lock disjoint rows: each
``SELECT ... FOR UPDATE SKIP LOCKED`` skips the rows another transaction holds, whatever
replica it runs on.
"""

from __future__ import annotations

import psycopg

from judgefuse.service.storage.checks import stats_from_counters
from judgefuse.service.storage.records import StratumCounts, VerdictRecord

__all__ = ["dequeue_labelled", "enqueue_new", "lease_free", "release_lease", "requeue_undone", "stats"]

_COLUMNS = ("routed", "inqueue", "labelled")


async def _bump(
    conn: psycopg.AsyncConnection, tenant: str, panel: str, stratum: str, column: str, delta: int
) -> None:
    assert column in _COLUMNS  # a fixed counter name, never user input
    await conn.execute(
        f"INSERT INTO review_counts AS c (tenant, panel, stratum, {column}) "
        f"VALUES (%s, %s, %s, %s) ON CONFLICT (tenant, panel, stratum) "
        f"DO UPDATE SET {column} = c.{column} + excluded.{column}",
        (tenant, panel, stratum, delta),
    )


async def enqueue_new(conn: psycopg.AsyncConnection, tenant: str, record: VerdictRecord) -> None:
    """Count a newly inserted record in its stratum and queue it when its stamp says so."""
    stamp = record.review
    if stamp is None:
        return
    await _bump(conn, tenant, record.panel, stamp.stratum, "routed", 1)
    if stamp.queued:
        await conn.execute(
            "INSERT INTO review_queue (tenant, panel, id, stratum, rank) "
            "VALUES (%s, %s, %s, %s, %s)",
            (tenant, record.panel, record.id, stamp.stratum, stamp.rank),
        )
        await _bump(conn, tenant, record.panel, stamp.stratum, "inqueue", 1)


async def dequeue_labelled(
    conn: psycopg.AsyncConnection, tenant: str, record: VerdictRecord
) -> None:
    """A first label on ``record`` (as it was before the label): count it, and take the item
    out of the queue, which also ends any lease on it whoever held it."""
    stamp = record.review
    if stamp is None or record.label is not None:
        return
    await _bump(conn, tenant, record.panel, stamp.stratum, "labelled", 1)
    cur = await conn.execute(
        "DELETE FROM review_queue WHERE tenant = %s AND id = %s", (tenant, record.id)
    )
    if cur.rowcount:
        await _bump(conn, tenant, record.panel, stamp.stratum, "inqueue", -1)


async def requeue_undone(
    conn: psycopg.AsyncConnection, tenant: str, record: VerdictRecord, annotator: str,
    expires_at: float,
) -> None:
    """An undone first label on ``record`` (as it was, labelled): uncount it, and put a queued
    item back in the queue at its rank, leased to ``annotator`` (the page shows it again)."""
    stamp = record.review
    if stamp is None or record.label is None:
        return
    await _bump(conn, tenant, record.panel, stamp.stratum, "labelled", -1)
    if stamp.queued:
        await conn.execute(
            "INSERT INTO review_queue (tenant, panel, id, stratum, rank, lease_owner, "
            "lease_expires_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (tenant, record.panel, record.id, stamp.stratum, stamp.rank, annotator, expires_at),
        )
        await _bump(conn, tenant, record.panel, stamp.stratum, "inqueue", 1)


async def lease_free(
    conn: psycopg.AsyncConnection,
    tenant: str,
    panel: str,
    n: int,
    annotator: str,
    now: float,
    expires_at: float,
) -> list[str]:
    """Lease the ``n`` lowest-ranked free items to ``annotator``; their ids in rank order."""
    cur = await conn.execute(
        "WITH free AS (SELECT id FROM review_queue WHERE tenant = %(t)s AND panel = %(p)s "
        " AND (lease_expires_at IS NULL OR lease_expires_at <= %(now)s) "
        " ORDER BY rank, id LIMIT %(n)s FOR UPDATE SKIP LOCKED) "
        "UPDATE review_queue q SET lease_owner = %(a)s, lease_expires_at = %(exp)s "
        "FROM free WHERE q.tenant = %(t)s AND q.id = free.id RETURNING q.id, q.rank",
        {"t": tenant, "p": panel, "now": now, "n": n, "a": annotator, "exp": expires_at},
    )
    rows = await cur.fetchall()
    return [vid for vid, _rank in sorted(rows, key=lambda row: (row[1], row[0]))]


async def release_lease(
    conn: psycopg.AsyncConnection, tenant: str, verdict_id: str, annotator: str, now: float
) -> bool:
    """End ``annotator``'s live lease on the item; False (nothing written) if it holds none."""
    cur = await conn.execute(
        "UPDATE review_queue SET lease_owner = NULL, lease_expires_at = NULL "
        "WHERE tenant = %s AND id = %s AND lease_owner = %s AND lease_expires_at > %s",
        (tenant, verdict_id, annotator, now),
    )
    return cur.rowcount == 1


async def stats(
    conn: psycopg.AsyncConnection, tenant: str, panel: str, now: float
) -> dict[str, StratumCounts]:
    """The counters of (tenant, panel) plus its live leases; run in one REPEATABLE READ
    transaction for one snapshot."""
    counters: dict[str, int] = {}
    cur = await conn.execute(
        "SELECT stratum, routed, inqueue, labelled FROM review_counts "
        "WHERE tenant = %s AND panel = %s",
        (tenant, panel),
    )
    for stratum, routed, inqueue, labelled in await cur.fetchall():
        counters[f"routed:{stratum}"] = int(routed)
        counters[f"inqueue:{stratum}"] = int(inqueue)
        counters[f"labelled:{stratum}"] = int(labelled)
    cur = await conn.execute(
        "SELECT stratum, count(*) FROM review_queue WHERE tenant = %s AND panel = %s "
        "AND lease_expires_at > %s GROUP BY stratum",
        (tenant, panel, now),
    )
    leases = {stratum: int(count) for stratum, count in await cur.fetchall()}
    return stats_from_counters(counters, leases)
