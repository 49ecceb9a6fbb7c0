"""The SQLite backend's schema: the tables, their indexes, and creating them on open.

``verdicts(tenant, id, panel, created_at, label, labelled_at, body)`` with primary key
(tenant, id) and partial indexes over labelled rows on (tenant, created_at, id) and (tenant,
panel, created_at, id), so ``iter_labelled`` and ``count_labelled`` scan only labelled rows, in
order; ``body`` is the record's JSON.
``acc_total(tenant, key, field, value)`` and ``acc_hour(tenant, key, hour, field, value)`` hold
the accumulators (``value`` has no declared type, so integers stay exact 64-bit integers and
floats stay floats; an integer sum that would leave int64, which SQLite would silently turn
into a REAL, is refused as :class:`AccumulatorOverflow` and the label rolled back); ``thresholds`` and ``models`` hold (tenant, panel, version, created_at, body).
``meta(name, value)`` records the schema version, so an older build refuses a newer file.

Version 2 (the review loop, docs/design.md, 'The review loop') adds two tables:
``review_queue(tenant, panel, id, stratum, rank, lease_owner, lease_expires_at)``, one row per
queued verdict that has no label yet (the label deletes it), indexed on (tenant, panel, rank)
for leasing in rank order and on (tenant, panel, lease_expires_at) over leased rows for
counting live leases; and ``review_counts(tenant, panel, stratum, routed, inqueue, labelled)``,
the counters ``review_stats`` reads, updated in the same transactions as the verdict writes.
A version-1 file is migrated on open (the new tables are created, the version stamped 2, in
one transaction); its records carry no review stamp, so none of them is ever queued.

Version 3 adds ``leases(tenant, name, owner, expires_at)``: named leases that let one replica
at a time run a job such as a refit (``Storage.acquire_lease``); older files gain the table on
open, as above.

Version 5 adds ``label_history(tenant, id, seq, body)``: every label, relabel, comment change
and undo of a verdict (:mod:`judgefuse.service.storage.label_history`), written in the label's
transaction, the newest ``LABEL_HISTORY_KEEP`` kept per verdict; older files gain the table on
open.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from judgefuse.service.storage.errors import StorageError

__all__ = ["SCHEMA", "SCHEMA_VERSION", "create_schema"]

SCHEMA_VERSION = 5

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS verdicts (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    panel TEXT NOT NULL,
    created_at REAL NOT NULL,
    label TEXT,
    labelled_at REAL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS verdicts_panel_labelled
    ON verdicts (tenant, panel, created_at, id) WHERE label IS NOT NULL;
CREATE INDEX IF NOT EXISTS verdicts_labelled
    ON verdicts (tenant, created_at, id) WHERE label IS NOT NULL;
CREATE INDEX IF NOT EXISTS verdicts_panel_recent
    ON verdicts (tenant, panel, created_at, id);
CREATE TABLE IF NOT EXISTS acc_total (
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    field TEXT NOT NULL,
    value NOT NULL,
    PRIMARY KEY (tenant, key, field)
);
CREATE TABLE IF NOT EXISTS acc_hour (
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    hour INTEGER NOT NULL,
    field TEXT NOT NULL,
    value NOT NULL,
    PRIMARY KEY (tenant, key, hour, field)
);
CREATE TABLE IF NOT EXISTS thresholds (
    tenant TEXT NOT NULL,
    panel TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, panel, version)
);
CREATE TABLE IF NOT EXISTS models (
    tenant TEXT NOT NULL,
    panel TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, panel, version)
);
CREATE TABLE IF NOT EXISTS review_queue (
    tenant TEXT NOT NULL,
    panel TEXT NOT NULL,
    id TEXT NOT NULL,
    stratum TEXT NOT NULL,
    rank REAL NOT NULL,
    lease_owner TEXT,
    lease_expires_at REAL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS review_queue_rank
    ON review_queue (tenant, panel, rank, id);
CREATE INDEX IF NOT EXISTS review_queue_leases
    ON review_queue (tenant, panel, lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS leases (
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (tenant, name)
);
CREATE TABLE IF NOT EXISTS review_counts (
    tenant TEXT NOT NULL,
    panel TEXT NOT NULL,
    stratum TEXT NOT NULL,
    routed INTEGER NOT NULL DEFAULT 0,
    inqueue INTEGER NOT NULL DEFAULT 0,
    labelled INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, panel, stratum)
);
CREATE TABLE IF NOT EXISTS state_blobs (
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    version INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE TABLE IF NOT EXISTS monitor_events (
    tenant TEXT NOT NULL,
    panel TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, panel, version)
);
CREATE TABLE IF NOT EXISTS label_history (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, id, seq)
) WITHOUT ROWID;
"""


def create_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Create the tables (if missing) and stamp or check the schema version, in one transaction.

    A file whose schema is newer than this code raises :class:`StorageError` and is left as it
    was (the transaction rolls back). A file already at this version is only read: no write
    lock (a refit's worker process opens the store at a low CPU priority, and a schema
    transaction from it would hold every verdict's write behind it: docs/design.md, 'Bounded
    learning').
    """
    try:
        row = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
    except sqlite3.OperationalError:  # no meta table yet: a new file
        row = None
    if row is not None and int(row[0]) == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        # not executescript: it would commit; the schema goes in as one transaction
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        row = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO meta (name, value) VALUES ('schema', ?)",
                (str(SCHEMA_VERSION),),
            )
        elif int(row[0]) > SCHEMA_VERSION:
            raise StorageError(
                f"sqlite: {path} has schema {row[0]}, newer than this code "
                f"({SCHEMA_VERSION})"
            )
        elif int(row[0]) < SCHEMA_VERSION:
            # 1 -> 2 -> 3 -> 4 -> 5 only add tables (created above): stamp the new version
            conn.execute(
                "UPDATE meta SET value = ? WHERE name = 'schema'", (str(SCHEMA_VERSION),)
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
