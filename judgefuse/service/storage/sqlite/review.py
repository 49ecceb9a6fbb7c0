"""The SQLite backend's review-queue statements: enqueue on save, dequeue on label, lease,
release, and the counters ``review_stats`` reads (tables in :mod:`.schema`).

Like :mod:`.accumulators`, each function runs on the storage's worker thread inside
the transaction its caller holds (``BEGIN IMMEDIATE`` for the writes), so the queue, the
counters and the verdict row always change together; nothing here begins or commits.

A lease is (``lease_owner``, ``lease_expires_at``) on the queue row; it is live while
``lease_expires_at > now``. An expired lease is simply overwritten by the next lease, so
nothing has to sweep them. Only stamped records (``record.review`` set) are counted: a record
saved without a stamp (from before the review loop) is never routed, queued or counted here.
"""

from __future__ import annotations

import sqlite3

from judgefuse.service.storage.checks import stats_from_counters
from judgefuse.service.storage.records import StratumCounts, VerdictRecord

__all__ = ["dequeue_labelled", "enqueue_new", "lease_free", "release_lease", "requeue_undone",
           "stats"]


def _bump(conn: sqlite3.Connection, tenant: str, panel: str, stratum: str, **deltas: int) -> None:
    """Add ``deltas`` (counter name -> delta) to the stratum's counters in one statement."""
    # the names are the three fixed counter names of this module, never user input
    names = list(deltas)
    conn.execute(
        f"INSERT INTO review_counts (tenant, panel, stratum, {', '.join(names)}) "
        f"VALUES (?, ?, ?{', ?' * len(names)}) ON CONFLICT (tenant, panel, stratum) DO UPDATE SET "
        + ", ".join(f"{n} = {n} + excluded.{n}" for n in names),
        (tenant, panel, stratum, *deltas.values()),
    )


def enqueue_new(conn: sqlite3.Connection, tenant: str, record: VerdictRecord) -> None:
    """Count a newly inserted record in its stratum and queue it when its stamp says so."""
    stamp = record.review
    if stamp is None:
        return
    if stamp.queued:
        conn.execute(
            "INSERT INTO review_queue (tenant, panel, id, stratum, rank) VALUES (?, ?, ?, ?, ?)",
            (tenant, record.panel, record.id, stamp.stratum, stamp.rank),
        )
        _bump(conn, tenant, record.panel, stamp.stratum, routed=1, inqueue=1)
    else:
        _bump(conn, tenant, record.panel, stamp.stratum, routed=1)


def dequeue_labelled(conn: sqlite3.Connection, tenant: str, record: VerdictRecord) -> None:
    """A first label on ``record`` (as it was before the label): count it, and take the item
    out of the queue, which also ends any lease on it whoever held it."""
    stamp = record.review
    if stamp is None or record.label is not None:
        return
    _bump(conn, tenant, record.panel, stamp.stratum, labelled=1)
    gone = conn.execute(
        "DELETE FROM review_queue WHERE tenant = ? AND id = ?", (tenant, record.id)
    ).rowcount
    if gone:
        _bump(conn, tenant, record.panel, stamp.stratum, inqueue=-1)


def requeue_undone(
    conn: sqlite3.Connection, tenant: str, record: VerdictRecord, annotator: str, expires_at: float
) -> None:
    """An undone first label on ``record`` (as it was, labelled): uncount it, and put a queued
    item back in the queue at its rank, leased to ``annotator`` (the page shows it again)."""
    stamp = record.review
    if stamp is None or record.label is None:
        return
    _bump(conn, tenant, record.panel, stamp.stratum, labelled=-1)
    if stamp.queued:
        conn.execute(
            "INSERT INTO review_queue (tenant, panel, id, stratum, rank, lease_owner, "
            "lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (tenant, record.panel, record.id, stamp.stratum, stamp.rank, annotator, expires_at),
        )
        _bump(conn, tenant, record.panel, stamp.stratum, inqueue=1)


def lease_free(
    conn: sqlite3.Connection,
    tenant: str,
    panel: str,
    n: int,
    annotator: str,
    now: float,
    expires_at: float,
) -> list[str]:
    """Lease the ``n`` lowest-ranked free items (no lease, or an expired one) to ``annotator``;
    their ids in rank order. The scan walks the rank index, skipping live leases only."""
    rows = conn.execute(
        "SELECT id FROM review_queue WHERE tenant = ? AND panel = ? "
        "AND (lease_expires_at IS NULL OR lease_expires_at <= ?) ORDER BY rank, id LIMIT ?",
        (tenant, panel, now, n),
    ).fetchall()
    ids = [row[0] for row in rows]
    conn.executemany(
        "UPDATE review_queue SET lease_owner = ?, lease_expires_at = ? WHERE tenant = ? AND id = ?",
        [(annotator, expires_at, tenant, vid) for vid in ids],
    )
    return ids


def release_lease(
    conn: sqlite3.Connection, tenant: str, verdict_id: str, annotator: str, now: float
) -> bool:
    """End ``annotator``'s live lease on the item; False (nothing written) if it holds none."""
    cursor = conn.execute(
        "UPDATE review_queue SET lease_owner = NULL, lease_expires_at = NULL "
        "WHERE tenant = ? AND id = ? AND lease_owner = ? AND lease_expires_at > ?",
        (tenant, verdict_id, annotator, now),
    )
    return cursor.rowcount == 1


def stats(conn: sqlite3.Connection, tenant: str, panel: str, now: float) -> dict[str, StratumCounts]:
    """The counters of (tenant, panel) plus its live leases (an index range over leased rows,
    O(live leases), never O(verdicts)). Run inside one read transaction for one snapshot."""
    counters: dict[str, int] = {}
    for stratum, routed, inqueue, labelled in conn.execute(
        "SELECT stratum, routed, inqueue, labelled FROM review_counts "
        "WHERE tenant = ? AND panel = ?",
        (tenant, panel),
    ):
        counters[f"routed:{stratum}"] = routed
        counters[f"inqueue:{stratum}"] = inqueue
        counters[f"labelled:{stratum}"] = labelled
    leases = dict(
        conn.execute(
            "SELECT stratum, COUNT(*) FROM review_queue WHERE tenant = ? AND panel = ? "
            "AND lease_expires_at > ? GROUP BY stratum",
            (tenant, panel, now),
        ).fetchall()
    )
    return stats_from_counters(counters, leases)
