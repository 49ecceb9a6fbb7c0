"""Fixtures of the storage tests (the per-backend ``storage`` fixture is tests/service/conftest.py's)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from judgefuse.service.storage import SQLiteStorage, Storage
from judgefuse.service.storage.redis import RedisStorage


@pytest.fixture(params=["sqlite", "redis"])
async def two_handles(
    request: pytest.FixtureRequest, sqlite_path: Path
) -> AsyncIterator[tuple[Storage, Storage]]:
    """Two open handles on one store: two processes on one SQLite file, or two gateway
    replicas on one Redis server."""
    pair: tuple[Storage, Storage]
    if request.param == "sqlite":
        pair = (SQLiteStorage(sqlite_path), SQLiteStorage(sqlite_path))
    else:
        url = request.getfixturevalue("redis_url")
        pair = (RedisStorage(url), RedisStorage(url))
    for handle in pair:
        await handle.open()
    if isinstance(pair[0], RedisStorage):
        await pair[0].client.flushdb()
    try:
        yield pair
    finally:
        for handle in pair:
            await handle.close()
