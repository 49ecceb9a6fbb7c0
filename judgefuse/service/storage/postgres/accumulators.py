"""The PostgreSQL backend's accumulator statements: add increments, sum, list keys.

Each function runs inside the transaction its caller holds (``save_verdict``'s or
``set_label``'s), so the statements here never begin or commit. Fields are written in sorted
(key, field) order: two transactions touching the same rows lock them in the same order and
cannot deadlock each other. Integer deltas go to ``ival`` (``bigint``: an overflow raises
SQLSTATE 22003, mapped to :class:`AccumulatorOverflow`), float deltas to ``fval`` (a result
beyond 1e300 is refused here, as SQLite refuses it), see :mod:`.schema`.
"""

from __future__ import annotations

import psycopg

from judgefuse.service.storage.checks import Number
from judgefuse.service.storage.errors import AccumulatorOverflow

__all__ = ["accumulator_keys", "add_increments", "sum_accumulator"]

FLOAT_LIMIT = 1e300

_ROWS = "unnest(%(k)s::text[], %(f)s::text[], %(i)s::bigint[], %(v)s::float8[], %(b)s::bool[])"
_TOTAL = (
    "INSERT INTO acc_total AS a (tenant, key, field, ival, fval, is_float) "
    f"SELECT %(t)s, u.k, u.f, u.i, u.v, u.b FROM {_ROWS} AS u(k, f, i, v, b) "
    "ON CONFLICT (tenant, key, field) DO UPDATE SET "
    "ival = a.ival + excluded.ival, fval = a.fval + excluded.fval, "
    "is_float = a.is_float OR excluded.is_float RETURNING a.key, a.field, a.fval"
)
_HOUR = (
    "INSERT INTO acc_hour AS a (tenant, key, hour, field, ival, fval, is_float) "
    f"SELECT %(t)s, u.k, %(h)s, u.f, u.i, u.v, u.b FROM {_ROWS} AS u(k, f, i, v, b) "
    "ON CONFLICT (tenant, key, hour, field) DO UPDATE SET "
    "ival = a.ival + excluded.ival, fval = a.fval + excluded.fval, "
    "is_float = a.is_float OR excluded.is_float RETURNING a.key, a.field, a.fval"
)


async def add_increments(
    conn: psycopg.AsyncConnection, tenant: str, hour: int, net: dict[str, dict[str, Number]]
) -> None:
    """Add ``net`` (key -> field -> delta) to the all-time totals and to the ``hour`` bucket:
    two statements whatever the number of fields (a label writes dozens), rows in sorted
    (key, field) order."""
    rows = sorted((key, field, delta) for key, fields in net.items() for field, delta in fields.items())
    if not rows:
        return
    params = {
        "t": tenant,
        "h": hour,
        "k": [key for key, _f, _d in rows],
        "f": [field for _k, field, _d in rows],
        "i": [0 if not isinstance(d, int) else int(d) for _k, _f, d in rows],
        "v": [float(d) if not isinstance(d, int) else 0.0 for _k, _f, d in rows],
        "b": [not isinstance(d, int) for _k, _f, d in rows],
    }
    for sql in (_TOTAL, _HOUR):
        cur = await conn.execute(sql, params)
        for key, field, fval in await cur.fetchall():
            if abs(fval) >= FLOAT_LIMIT:
                raise AccumulatorOverflow(f"accumulator {key!r} field {field!r} would overflow")


def _value(ival: int, fval: float, is_float: bool) -> Number:
    return float(ival) + fval if is_float else int(ival)


async def sum_accumulator(
    conn: psycopg.AsyncConnection, tenant: str, key: str, since_hour: int | None,
    until_hour: int | None,
) -> dict[str, Number]:
    """All-time totals of ``key`` with no bounds, else the sum of its hour buckets in
    [since_hour, until_hour) (an open bound reaches as far as any hour can)."""
    if since_hour is None and until_hour is None:
        cur = await conn.execute(
            "SELECT field, ival, fval, is_float FROM acc_total WHERE tenant = %s AND key = %s",
            (tenant, key),
        )
    else:
        low = -(2**62) if since_hour is None else int(since_hour)
        high = 2**62 if until_hour is None else int(until_hour)
        # numeric sum: a window of int64 buckets cannot overflow the sum itself
        cur = await conn.execute(
            "SELECT field, sum(ival)::numeric, sum(fval), bool_or(is_float) FROM acc_hour "
            "WHERE tenant = %s AND key = %s AND hour >= %s AND hour < %s GROUP BY field",
            (tenant, key, low, high),
        )
    return {field: _value(int(i), float(f), bool(b)) for field, i, f, b in await cur.fetchall()}


async def accumulator_keys(conn: psycopg.AsyncConnection, tenant: str, prefix: str) -> list[str]:
    """The tenant's accumulator keys that start with ``prefix`` (a skip scan: one index seek
    per distinct key, not a pass over every field row)."""
    cur = await conn.execute(
        "WITH RECURSIVE k(key) AS ("
        " SELECT min(key) FROM acc_total WHERE tenant = %(t)s AND key >= %(p)s"
        " UNION ALL"
        " SELECT (SELECT min(key) FROM acc_total WHERE tenant = %(t)s AND key > k.key)"
        " FROM k WHERE k.key IS NOT NULL AND left(k.key, %(n)s) = %(p)s"
        ") SELECT key FROM k WHERE key IS NOT NULL AND left(key, %(n)s) = %(p)s",
        {"t": tenant, "p": prefix, "n": len(prefix)},
    )
    return [row[0] for row in await cur.fetchall()]
