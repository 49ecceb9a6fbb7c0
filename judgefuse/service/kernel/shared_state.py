"""Read-modify-write of one compare-and-set state blob (``Storage.get_state`` / ``put_state``).

Annotator accounts, review sessions and lease holds live in state blobs so that every replica,
on every backend (SQLite, Redis, PostgreSQL), sees the same thing without a schema of their own.
A change is a function of the stored body; when another writer got there first the blob is read
again and the change applied to the new body, so no update is ever lost. A change may be a
coroutine function, for one that reads more of the store before it decides (the precision
monitor's rebuild lists the stored labels a blob must count).
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from judgefuse.service.errors import ServiceError
from judgefuse.service.storage import Coordination

__all__ = ["StateContention", "update_state"]

T = TypeVar("T")
Body = dict[str, Any]


class StateContention(ServiceError):
    """503: a shared state blob kept changing under this writer (retry later)."""

    status = 503

    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": "1"}


async def update_state(
    storage: Coordination, tenant: str, key: str,
    change: Callable[[Body], tuple[Body | None, T] | Awaitable[tuple[Body | None, T]]],
    *, attempts: int = 100,
) -> T:
    """Apply ``change`` to the blob under ``key`` (``{}`` when none): it returns (or, a coroutine,
    gives) the new body (None: write nothing) and a result, returned once the write went through.
    :class:`StateContention` after ``attempts`` lost writes."""
    for attempt in range(attempts):
        blob = await storage.get_state(tenant, key)
        body, version = (dict(blob.body), blob.version) if blob else ({}, 0)
        changed = change(body)
        new, result = await changed if inspect.isawaitable(changed) else changed
        if new is None:
            return result
        if await storage.put_state(tenant, key, new, expected_version=version) is not None:
            return result
        await asyncio.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
    raise StateContention(f"state {key!r} of tenant {tenant!r} kept changing; retry")
