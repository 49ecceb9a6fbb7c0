"""The SQLite backend's versioned records (thresholds, models, monitor events): numbered inserts and reads.

Both tables are (tenant, panel, version, created_at, body), and a record's version is the next
integer for its (tenant, panel). The caller runs :func:`insert_next_version` inside one
``BEGIN IMMEDIATE`` transaction, so reading the last version and inserting the next are atomic
also against other processes on the same file. ``table`` is always one of the three fixed table
names (:data:`~judgefuse.service.storage.sql.VERSIONED_TABLES`, never user input), which is why it
may be formatted into the SQL. The reads are the statements PostgreSQL runs too (:mod:`..sql`).
"""

from __future__ import annotations

import sqlite3

from judgefuse.service.storage.checks import VersionedKind
from judgefuse.service.storage.sql import version_history, version_select

__all__ = ["insert_next_version", "latest_version", "select_history", "select_version"]


def insert_next_version(
    conn: sqlite3.Connection, table: str, tenant: str, panel: str, created_at: float, body: str
) -> int:
    """Insert ``body`` as the next version of (tenant, panel); return that version."""
    version = latest_version(conn, table, tenant, panel) + 1
    conn.execute(
        f"INSERT INTO {table} (tenant, panel, version, created_at, body) "
        "VALUES (?, ?, ?, ?, ?)",
        (tenant, panel, version, created_at, body),
    )
    return version


def latest_version(conn: sqlite3.Connection, table: str, tenant: str, panel: str) -> int:
    """The latest version of (tenant, panel) in ``table``; 0 when there is none."""
    row = conn.execute(
        f"SELECT COALESCE(MAX(version), 0) FROM {table} WHERE tenant = ? AND panel = ?",
        (tenant, panel),
    ).fetchone()
    return int(row[0])


def select_version(
    conn: sqlite3.Connection, kind: VersionedKind, tenant: str, panel: str, version: int | None
) -> tuple[int, str] | None:
    """(version, body) of ``version``, or of the latest when it is None; None when absent."""
    params = (tenant, panel) if version is None else (tenant, panel, int(version))
    return conn.execute(version_select(kind, version, sqlite=True), params).fetchone()


def select_history(
    conn: sqlite3.Connection, kind: VersionedKind, tenant: str, panel: str
) -> list[tuple[int, str]]:
    """Every (version, body) of (tenant, panel), oldest first."""
    return conn.execute(version_history(kind, sqlite=True), (tenant, panel)).fetchall()
