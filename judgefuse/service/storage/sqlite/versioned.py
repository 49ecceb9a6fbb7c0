"""The SQLite backend's versioned records (thresholds, models, monitor events): numbered inserts and reads.

Both tables are (tenant, panel, version, created_at, body), and a record's version is the next
integer for its (tenant, panel). The caller runs :func:`insert_next_version` inside one
``BEGIN IMMEDIATE`` transaction, so reading the last version and inserting the next are atomic
also against other processes on the same file. ``table`` is always one of the two fixed table
names (never user input; ``monitor_events`` too), which is why it may be formatted into the SQL.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from judgefuse.service.storage.checks import V, VersionedKind
from judgefuse.service.storage.errors import StorageCorrupt

__all__ = [
    "VERSIONED_TABLES", "insert_next_version", "parse_versioned", "select_history", "select_version",
]

VERSIONED_TABLES: dict[VersionedKind, str] = {
    "threshold": "thresholds", "model": "models", "monitor_event": "monitor_events",
}
"""The table of each kind of versioned record."""


def insert_next_version(
    conn: sqlite3.Connection, table: str, tenant: str, panel: str, created_at: float, body: str
) -> int:
    """Insert ``body`` as the next version of (tenant, panel); return that version."""
    row = conn.execute(
        f"SELECT COALESCE(MAX(version), 0) FROM {table} WHERE tenant = ? AND panel = ?",
        (tenant, panel),
    ).fetchone()
    version = int(row[0]) + 1
    conn.execute(
        f"INSERT INTO {table} (tenant, panel, version, created_at, body) "
        "VALUES (?, ?, ?, ?, ?)",
        (tenant, panel, version, created_at, body),
    )
    return version


def select_version(
    conn: sqlite3.Connection, table: str, tenant: str, panel: str, version: int | None
) -> tuple[int, str] | None:
    """(version, body) of ``version``, or of the latest when it is None; None when absent."""
    if version is None:
        sql = (
            f"SELECT version, body FROM {table} WHERE tenant = ? AND panel = ? "
            "ORDER BY version DESC LIMIT 1"
        )
        return conn.execute(sql, (tenant, panel)).fetchone()
    sql = (
        f"SELECT version, body FROM {table} "
        "WHERE tenant = ? AND panel = ? AND version = ?"
    )
    return conn.execute(sql, (tenant, panel, int(version))).fetchone()


def select_history(
    conn: sqlite3.Connection, table: str, tenant: str, panel: str
) -> list[tuple[int, str]]:
    """Every (version, body) of (tenant, panel), oldest first."""
    return conn.execute(
        f"SELECT version, body FROM {table} WHERE tenant = ? AND panel = ? "
        "ORDER BY version",
        (tenant, panel),
    ).fetchall()


def parse_versioned(model_cls: type[V], version: int, body: str) -> V:
    """The stored ``body`` as a ``model_cls`` numbered ``version``; :class:`StorageCorrupt`
    when it does not parse (the version lives in the key columns, not in the body)."""
    try:
        data: Any = json.loads(body)
        data["version"] = version
        return model_cls.model_validate(data)
    except (ValueError, TypeError) as exc:  # ValidationError is a ValueError
        raise StorageCorrupt(f"sqlite: stored {model_cls.__name__} is invalid") from exc
