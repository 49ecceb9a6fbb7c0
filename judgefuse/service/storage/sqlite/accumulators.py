"""The SQLite backend's accumulator statements: add a label's increments, sum, list keys.

Each function runs on the storage's worker thread against its connection, inside whatever
transaction the caller holds (a write runs within ``set_label``'s ``BEGIN IMMEDIATE``), so the
statements here never begin or commit anything themselves. ``value`` has no declared type:
integers stay exact 64-bit integers and floats stay floats, and a sum that would leave int64
(which SQLite would silently turn into a REAL) is refused before the caller commits.
"""

from __future__ import annotations

import sqlite3

from judgefuse.service.storage.checks import INT64_MAX, Number
from judgefuse.service.storage.errors import AccumulatorOverflow
from judgefuse.service.storage.sqlite.cache import Written

__all__ = ["accumulator_keys", "add_increments", "check_overflow", "sum_accumulator"]


def check_overflow(key: str, field: str, delta: Number, result: Number) -> None:
    """SQLite turns an overflowing integer sum into a REAL: refuse it (the caller rolls back)."""
    limit = float(INT64_MAX) if isinstance(delta, int) else 1e300
    if abs(result) >= limit:
        raise AccumulatorOverflow(f"accumulator {key!r} field {field!r} would overflow")


_ROWS_PER_STATEMENT = 200
"""Fields per upsert statement (5 parameters each: well under SQLite's variable limit)."""


def _upsert(conn: sqlite3.Connection, head: str, tail: str, marks: str,
            params: list[tuple[Number | str, ...]]) -> dict[tuple[str, str], Number]:
    """(key, field) -> the stored value after adding, for every row of ``params``: one
    multi-row upsert per :data:`_ROWS_PER_STATEMENT` rows (a statement per row would make a
    verdict's five fields ten statements, a label's dozens twice as many)."""
    out: dict[tuple[str, str], Number] = {}
    for i in range(0, len(params), _ROWS_PER_STATEMENT):
        chunk = params[i:i + _ROWS_PER_STATEMENT]
        sql = head + ", ".join([marks] * len(chunk)) + tail
        for key, field, value in conn.execute(sql, [v for row in chunk for v in row]):
            out[key, field] = value
    return out


def add_increments(
    conn: sqlite3.Connection, tenant: str, hour: int, net: dict[str, dict[str, Number]],
    written: Written,
) -> None:
    """Add ``net`` (key -> field -> delta) to the all-time totals and to the ``hour`` bucket,
    appending (key, field, delta, new total) to ``written`` for each field."""
    rows = [(key, field, delta) for key, fields in net.items() for field, delta in fields.items()]
    if not rows:
        return
    totals = _upsert(
        conn, "INSERT INTO acc_total (tenant, key, field, value) VALUES ",
        " ON CONFLICT (tenant, key, field) DO UPDATE SET value = value + excluded.value "
        "RETURNING key, field, value", "(?, ?, ?, ?)",
        [(tenant, key, field, delta) for key, field, delta in rows])
    buckets = _upsert(
        conn, "INSERT INTO acc_hour (tenant, key, hour, field, value) VALUES ",
        " ON CONFLICT (tenant, key, hour, field) DO UPDATE SET value = value + excluded.value "
        "RETURNING key, field, value", "(?, ?, ?, ?, ?)",
        [(tenant, key, hour, field, delta) for key, field, delta in rows])
    for key, field, delta in rows:
        total = totals[key, field]
        check_overflow(key, field, delta, total)
        check_overflow(key, field, delta, buckets[key, field])
        written.append((key, field, delta, total))


def sum_accumulator(
    conn: sqlite3.Connection, tenant: str, key: str, since_hour: int | None,
    until_hour: int | None,
) -> dict[str, Number]:
    """All-time totals of ``key`` with no bounds, else the sum of its hour buckets in
    [since_hour, until_hour) (an open bound reaches as far as any hour can)."""
    if since_hour is None and until_hour is None:
        rows = conn.execute(
            "SELECT field, value FROM acc_total WHERE tenant = ? AND key = ?",
            (tenant, key),
        ).fetchall()
    else:
        low = -(2**62) if since_hour is None else int(since_hour)
        high = 2**62 if until_hour is None else int(until_hour)
        rows = conn.execute(
            "SELECT field, SUM(value) FROM acc_hour WHERE tenant = ? AND key = ? "
            "AND hour >= ? AND hour < ? GROUP BY field",
            (tenant, key, low, high),
        ).fetchall()
    return {field: value for field, value in rows}


def accumulator_keys(conn: sqlite3.Connection, tenant: str, prefix: str) -> list[str]:
    """The tenant's accumulator keys that start with ``prefix``, in SQLite BINARY order."""
    # A skip scan over the (tenant, key, field) index: one seek per distinct key instead
    # of a pass over every field row. Keys with the prefix are contiguous from the first
    # key >= prefix (BINARY order), so the walk stops at the first key without it.
    rows = conn.execute(
        "WITH RECURSIVE k(key) AS ("
        " SELECT MIN(key) FROM acc_total WHERE tenant = ?1 AND key >= ?3"
        " UNION ALL"
        " SELECT (SELECT MIN(key) FROM acc_total WHERE tenant = ?1 AND key > k.key)"
        " FROM k WHERE k.key IS NOT NULL AND substr(k.key, 1, ?2) = ?3"
        ") SELECT key FROM k WHERE key IS NOT NULL AND substr(key, 1, ?2) = ?3",
        (tenant, len(prefix), prefix),
    ).fetchall()
    return [row[0] for row in rows]
