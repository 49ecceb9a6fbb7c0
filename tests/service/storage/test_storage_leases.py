"""Named leases (``Storage.acquire_lease`` / ``release_lease``): one job at a time across
replicas, on every backend and across two handles on one store."""

from __future__ import annotations

import asyncio

import pytest

from judgefuse.service.storage import Storage

NOW = 1_800_000_000.0


async def test_a_lease_is_exclusive_until_it_expires(storage: Storage) -> None:
    assert await storage.acquire_lease("acme", "refit/p1", "r1", ttl_s=10, now=NOW)
    assert not await storage.acquire_lease("acme", "refit/p1", "r2", ttl_s=10, now=NOW + 5)
    # the holder renews it
    assert await storage.acquire_lease("acme", "refit/p1", "r1", ttl_s=10, now=NOW + 5)
    assert not await storage.acquire_lease("acme", "refit/p1", "r2", ttl_s=10, now=NOW + 14.9)
    # expired (NOW + 5 + 10): anyone may take it
    assert await storage.acquire_lease("acme", "refit/p1", "r2", ttl_s=10, now=NOW + 15.1)
    assert not await storage.acquire_lease("acme", "refit/p1", "r1", ttl_s=10, now=NOW + 16)


async def test_release_frees_only_the_holders_lease(storage: Storage) -> None:
    assert await storage.acquire_lease("acme", "job", "r1", ttl_s=60, now=NOW)
    assert not await storage.release_lease("acme", "job", "r2")
    assert not await storage.acquire_lease("acme", "job", "r2", ttl_s=60, now=NOW + 1)
    assert await storage.release_lease("acme", "job", "r1")
    assert not await storage.release_lease("acme", "job", "r1")  # already free
    assert await storage.acquire_lease("acme", "job", "r2", ttl_s=60, now=NOW + 1)


async def test_leases_are_scoped_by_tenant_and_name(storage: Storage) -> None:
    assert await storage.acquire_lease("acme", "job", "r1", ttl_s=60, now=NOW)
    assert await storage.acquire_lease("other", "job", "r2", ttl_s=60, now=NOW)
    assert await storage.acquire_lease("acme", "job/2", "r2", ttl_s=60, now=NOW)


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf")])
async def test_bad_ttl_is_refused(storage: Storage, ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        await storage.acquire_lease("acme", "job", "r1", ttl_s=ttl, now=NOW)


async def test_one_winner_among_concurrent_replicas(two_handles: tuple[Storage, Storage]) -> None:  # noqa: F811
    stores = list(two_handles)

    async def one(i: int) -> bool:
        return await stores[i % 2].acquire_lease("acme", "refit/p1", f"r{i}", ttl_s=60, now=NOW)

    winners = set()
    for _round in range(5):  # later rounds: only the holder's renewal succeeds
        won = await asyncio.gather(*(one(i) for i in range(20)))
        assert sum(won) == 1, won
        winners.add(won.index(True))
    assert len(winners) == 1
