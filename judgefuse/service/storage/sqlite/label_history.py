"""The SQLite backend's label history statements (:mod:`judgefuse.service.storage.label_history`).

:func:`append_history` runs on the storage's worker thread inside the label's transaction
(``BEGIN IMMEDIATE`` holds the write lock, so reading the last ``seq`` and inserting the next
one cannot race another writer); nothing here begins or commits.
"""

from __future__ import annotations

import sqlite3

from judgefuse.service.storage import label_history as history
from judgefuse.service.storage.sql import for_sqlite

__all__ = ["append_history", "read_history"]

_LAST_SEQ, _APPEND, _TRIM, _READ = (
    for_sqlite(s) for s in (history.LAST_SEQ, history.APPEND, history.TRIM, history.READ))


def append_history(conn: sqlite3.Connection, tenant: str, verdict_id: str, body: str) -> None:
    """Append ``body`` (an ``event_body``) as the verdict's next entry; drop those past the cap."""
    seq = int(conn.execute(_LAST_SEQ, (tenant, verdict_id)).fetchone()[0]) + 1
    conn.execute(_APPEND, (tenant, verdict_id, seq, body))
    if seq > history.LABEL_HISTORY_KEEP:
        conn.execute(_TRIM, (tenant, verdict_id, seq - history.LABEL_HISTORY_KEEP))


def read_history(conn: sqlite3.Connection, tenant: str, verdict_id: str) -> list[history.LabelEvent]:
    """The verdict's entries, oldest first."""
    return [history.parse_label_event(int(seq), body, "sqlite")
            for seq, body in conn.execute(_READ, (tenant, verdict_id)).fetchall()]
