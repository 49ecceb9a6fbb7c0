"""The PostgreSQL backend's label history statements (:mod:`judgefuse.service.storage.label_history`).

:func:`append_history` runs inside the label's transaction, after the verdict's ``verdict_ids``
row was locked ``FOR UPDATE``: two labels of one verdict are serialised there, so reading the
last ``seq`` and inserting the next one cannot race; nothing here begins or commits.
"""

from __future__ import annotations

import psycopg

from judgefuse.service.storage import label_history as history

__all__ = ["append_history", "read_history"]


async def append_history(
    conn: psycopg.AsyncConnection, tenant: str, verdict_id: str, body: str
) -> None:
    """Append ``body`` (an ``event_body``) as the verdict's next entry; drop those past the cap."""
    cur = await conn.execute(history.LAST_SEQ, (tenant, verdict_id))
    row = await cur.fetchone()
    seq = (int(row[0]) if row is not None else 0) + 1
    await conn.execute(history.APPEND, (tenant, verdict_id, seq, body))
    if seq > history.LABEL_HISTORY_KEEP:
        await conn.execute(history.TRIM, (tenant, verdict_id, seq - history.LABEL_HISTORY_KEEP))


async def read_history(
    conn: psycopg.AsyncConnection, tenant: str, verdict_id: str
) -> list[history.LabelEvent]:
    """The verdict's entries, oldest first."""
    cur = await conn.execute(history.READ, (tenant, verdict_id))
    return [history.parse_label_event(int(seq), str(body), "postgresql")
            for seq, body in await cur.fetchall()]
