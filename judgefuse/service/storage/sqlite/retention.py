"""The SQLite backend's export scan and retention pass (``iter_records``, ``apply_retention``).

Kept apart from :mod:`.sqlite` so the write path stays as it was; each function runs on the
storage's worker thread with the connection it is given (the caller holds any transaction).

Scan order and indexes
----------------------
Records stream in (created_at, tenant, id) order by keyset pagination: each page asks for the
rows after the last key of the previous one, so a page costs an index seek plus ``batch`` rows,
whatever the table size, and no cursor stays open between pages (writers are never held up).
One index serves it, ``verdicts_created (created_at, tenant, id)``, created on open (``CREATE
INDEX IF NOT EXISTS``: an older file gains it on its first open by this code, one table scan).
One index only, because every index is paid on every save (measured on this machine: ~35 us
per single-row insert transaction, against ~140 us without). A one-tenant scan walks it too,
skipping other tenants' entries inside the index (the tenant is in the key, no row is read for
them); labelled scans of one tenant use the partial labelled indexes the refit already has.
Each query names its index (``INDEXED BY``): the planner would otherwise pick the primary key
for ``tenant = ?`` and sort the tenant's rows on every page.

Retention
---------
The pass walks ``verdicts_created`` below the cut-off in batches of ``RETENTION_BATCH`` rows,
each batch one ``BEGIN IMMEDIATE`` transaction that reads the rows, decides, and deletes: a
writer waits at most one batch (a few milliseconds), and a record's state cannot change between
the decision and the delete. A record is kept when it is in ``review_queue`` (pending review:
the queue row goes only when a label arrives) or when it is labelled and at or after its
(tenant, panel)'s keep bound: the (created_at, id) of its ``keep_labelled``-th newest labelled
record, the same order ``iter_labelled`` (the refit's read) uses. Bounds are read once per pass
and panel; a label that arrives during the pass can only raise a bound, so the pass then keeps a
few more records than needed, never fewer. Nothing else is touched: accumulators, review
counters (``routed`` keeps counting the verdicts the population estimates weigh by), thresholds,
models, state blobs and monitor events stay as they are. Deleted records were never in the
queue, and the labelled indexes are indexes of this table, so nothing dangles.

Space
-----
New files are created with ``auto_vacuum = INCREMENTAL`` (:func:`prepare_new_file`, before the
first table), so after a pass :func:`incremental_vacuum` returns the freed pages to the file
system in small steps. A file created before this code has ``auto_vacuum = NONE``, which SQLite
can only change with a full ``VACUUM`` (a rewrite of the whole file under an exclusive lock):
we never do that behind an operator's back. On such a file the freed pages go to SQLite's free
list and are reused by new verdicts, so the file stops growing but does not shrink; to shrink
it, stop the service and run ``sqlite3 FILE 'PRAGMA auto_vacuum=INCREMENTAL; VACUUM;'`` once.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from judgefuse.service.storage.retention import RetentionReport

__all__ = [
    "RETENTION_BATCH",
    "RETENTION_INDEXES",
    "Bounds",
    "Key",
    "create_retention_indexes",
    "incremental_vacuum",
    "prepare_new_file",
    "record_page",
    "retention_batch",
]

RETENTION_BATCH = 2000
"""Rows read, decided and deleted per retention transaction."""

VACUUM_STEP_PAGES = 2000
"""Pages returned to the file system per ``PRAGMA incremental_vacuum`` step (8 MB at 4 KB)."""

RETENTION_INDEXES = (
    "CREATE INDEX IF NOT EXISTS verdicts_created ON verdicts (created_at, tenant, id)",
)

Key = tuple[float, str, str]
"""(created_at, tenant, id): a record's place in the scan order."""

Bounds = dict[tuple[str, str], tuple[float, str] | None]
"""(tenant, panel) -> the (created_at, id) of its ``keep_labelled``-th newest labelled record;
``None`` when it has fewer labelled records than that (all of them are kept)."""


def prepare_new_file(conn: sqlite3.Connection) -> None:
    """On a database with no table yet, choose incremental auto-vacuum. Must run before the
    first table is created and before the switch to WAL (both fix the file's header)."""
    if conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")


def create_retention_indexes(conn: sqlite3.Connection) -> None:
    """The scan-order indexes (module docstring), in one transaction; none when they all exist
    (no write lock: see :func:`~judgefuse.service.storage.sqlite.schema.create_schema`)."""
    names = [statement.split(" IF NOT EXISTS ", 1)[1].split()[0] for statement in RETENTION_INDEXES]
    found = {row[0] for row in conn.execute(
        f"SELECT name FROM sqlite_master WHERE type = 'index' AND name IN ({','.join('?' * len(names))})",
        names)}
    if found == set(names):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in RETENTION_INDEXES:
            conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def record_page(
    conn: sqlite3.Connection,
    *,
    tenant: str | None,
    panel: str | None,
    since: float | None,
    until: float | None,
    labelled_only: bool,
    after: Key | None,
    batch: int,
) -> list[tuple[float, str, str, str]]:
    """The next ``batch`` rows (created_at, tenant, id, body) after ``after`` in scan order."""
    where: list[str] = []
    params: list[Any] = []
    # labelled rows of one tenant (and panel): the partial labelled indexes, keyed by
    # (tenant[, panel], created_at, id), so tenant and panel bound the index and the keyset is
    # (created_at, id). Otherwise the scan index: tenant and panel are filters ('+' keeps the
    # planner from treating them as index terms, which would make it sort each page), and the
    # keyset (created_at, tenant, id) > last is the range's start.
    by_label = labelled_only and tenant is not None
    index = ("verdicts_panel_labelled" if panel is not None else "verdicts_labelled") if by_label \
        else "verdicts_created"
    unary = "" if by_label else "+"
    if tenant is not None:
        where.append(f"{unary}tenant = ?")
        params.append(tenant)
    if panel is not None:
        where.append(f"{unary}panel = ?")
        params.append(panel)
    if labelled_only:  # an A or B label, like iter_labelled
        where.append("label IS NOT NULL AND label IN ('A', 'B')")
    if until is not None:
        where.append("created_at < ?")
        params.append(until)
    if after is None:
        if since is not None:
            where.append("created_at >= ?")
            params.append(since)
    elif by_label:  # after the first page the last key is the bound (it is >= since)
        where.append("(created_at, id) > (?, ?)")
        params += [after[0], after[2]]
    else:
        where.append("(created_at, tenant, id) > (?, ?, ?)")
        params += list(after)
    sql = f"SELECT created_at, tenant, id, body FROM verdicts INDEXED BY {index}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY created_at, tenant, id LIMIT ?"
    params.append(batch)
    return conn.execute(sql, params).fetchall()


def _bound(
    conn: sqlite3.Connection, tenant: str, panel: str, keep_labelled: int
) -> tuple[float, str] | None:
    row = conn.execute(
        "SELECT created_at, id FROM verdicts WHERE tenant = ? AND panel = ? AND label IS NOT NULL "
        "ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ?",
        (tenant, panel, keep_labelled - 1),
    ).fetchone()
    return None if row is None else (float(row[0]), str(row[1]))


def retention_batch(
    conn: sqlite3.Connection,
    *,
    older_than: float,
    keep_labelled: int,
    after: Key | None,
    bounds: Bounds,
    batch: int = RETENTION_BATCH,
) -> tuple[RetentionReport, Key | None]:
    """One batch of the pass, inside the caller's ``BEGIN IMMEDIATE``: the counts of this batch
    and the last key scanned (``None`` when the scan below ``older_than`` is finished)."""
    sql = (
        "SELECT v.created_at, v.tenant, v.id, v.panel, v.label IS NOT NULL, "
        "EXISTS (SELECT 1 FROM review_queue q WHERE q.tenant = v.tenant AND q.id = v.id) "
        "FROM verdicts v INDEXED BY verdicts_created WHERE v.created_at < ?"
    )
    params: list[Any] = [older_than]
    if after is not None:
        sql += " AND (v.created_at, v.tenant, v.id) > (?, ?, ?)"
        params += list(after)
    sql += " ORDER BY v.created_at, v.tenant, v.id LIMIT ?"
    params.append(batch)
    rows = conn.execute(sql, params).fetchall()
    doomed: list[tuple[str, str]] = []
    pending = labelled = 0
    for created_at, tenant, vid, panel, is_labelled, queued in rows:
        if queued:
            pending += 1
            continue
        if is_labelled and keep_labelled > 0:
            group = (tenant, panel)
            if group not in bounds:
                bounds[group] = _bound(conn, tenant, panel, keep_labelled)
            bound = bounds[group]
            if bound is None or (float(created_at), str(vid)) >= bound:
                labelled += 1
                continue
        doomed.append((tenant, vid))
    conn.executemany("DELETE FROM verdicts WHERE tenant = ? AND id = ?", doomed)
    conn.executemany("DELETE FROM label_history WHERE tenant = ? AND id = ?", doomed)
    last = None if len(rows) < batch else (float(rows[-1][0]), str(rows[-1][1]), str(rows[-1][2]))
    return RetentionReport(dropped=len(doomed), kept_pending=pending, kept_labelled=labelled), last


def incremental_vacuum(conn: sqlite3.Connection, pages: int = VACUUM_STEP_PAGES) -> int:
    """One step of returning free pages to the file system: pages freed (0 when the file is
    not in incremental auto-vacuum mode or has no free page left)."""
    if int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) != 2:  # 2: INCREMENTAL
        return 0
    before = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    if before == 0:
        return 0
    # executescript steps the pragma to completion; execute() would step it once (one page)
    conn.executescript(f"PRAGMA incremental_vacuum({int(pages)})")
    return before - int(conn.execute("PRAGMA freelist_count").fetchone()[0])
