"""The Redis pool is bounded and callers wait for a connection: a burst of 150 concurrent
storage calls on a pool of 8 all succeed with at most 8 connections open (the hardening run saw
a burst of label calls answered with immediate 503s from an exhausted pool); the URL sizes it."""

from __future__ import annotations

import asyncio

from jf_test_support.storage_support import label, make_record

from judgefuse.service.storage.redis import RedisStorage


async def test_a_burst_waits_for_the_bounded_pool_instead_of_failing(redis_url: str) -> None:
    async with RedisStorage(redis_url + "?max_connections=8") as store:
        await store.client.flushdb()
        assert store.client.connection_pool.max_connections == 8
        for i in range(150):
            await store.save_verdict("acme", make_record(f"v{i}"))
        outcomes = await asyncio.gather(*(label(store, f"v{i}", "A") for i in range(150)))
        assert [o.status for o in outcomes] == ["labelled"] * 150
        pool = store.client.connection_pool
        assert len(pool._available_connections) + len(pool._in_use_connections) <= 8


async def test_the_default_pool_is_bounded_too(redis_url: str) -> None:
    async with RedisStorage(redis_url) as store:
        assert store.client.connection_pool.max_connections == 64
