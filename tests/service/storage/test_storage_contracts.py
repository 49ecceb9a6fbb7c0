"""The storage contract by concern (:mod:`judgefuse.service.storage.contracts`) and its checks.

``Storage`` is the union of small contracts; every public method belongs to exactly one of them,
and the arguments are checked in the base before any backend hook runs (template method).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from judgefuse.service.storage import (
    Coordination,
    LabelLedger,
    Lifecycle,
    RecordArchive,
    ReviewQueueStore,
    SQLiteStorage,
    Storage,
    VerdictStore,
    VersionedRecords,
)
from judgefuse.service.storage.postgres import PostgresStorage
from judgefuse.service.storage.redis import RedisStorage

CONCERNS = (Lifecycle, VerdictStore, LabelLedger, ReviewQueueStore, VersionedRecords, Coordination,
            RecordArchive)


def public(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")} | ({"__aenter__", "__aexit__"} & set(vars(cls)))


def test_the_concerns_partition_the_storage_interface() -> None:
    seen: dict[str, str] = {}
    for concern in CONCERNS:
        for name in public(concern):
            assert name not in seen, f"{name} is in {seen[name]} and {concern.__name__}"
            seen[name] = concern.__name__
    assert set(seen) == public(Storage) | {"__aenter__", "__aexit__"}
    assert len(public(Storage)) == 37  # put_serving (issue 45): the serving pair's compare-and-set


@pytest.mark.parametrize("backend", [SQLiteStorage, RedisStorage, PostgresStorage])
def test_every_backend_fulfils_every_concern(backend: type[Storage]) -> None:
    assert all(issubclass(backend, concern) for concern in CONCERNS)
    assert not inspect.isabstract(backend)


def refuse(name: str) -> Any:
    async def hook(self: Storage, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"hook {name} ran on invalid input")
    return hook


async def nothing(self: Storage) -> None:
    return None


HOOKS = {name for name in dir(Storage) if name.startswith("_") and not name.startswith("__")
         and (inspect.iscoroutinefunction(getattr(Storage, name))
              or inspect.isasyncgenfunction(getattr(Storage, name)))}
HookSpy = type("HookSpy", (Storage,), {name: refuse(name) for name in HOOKS}
               | {"open": nothing, "close": nothing, "ping": nothing})
"""A storage whose every backend hook fails the test: the base must refuse bad input first."""


def test_the_spy_covers_every_hook() -> None:
    assert Storage.__abstractmethods__ - {"open", "close", "ping"} <= HOOKS
    assert {"_claim_verdict_id", "_release_verdict_id", "_verdict_id_claimed", "_iter_recent"} <= HOOKS


async def test_bad_arguments_never_reach_a_backend_hook() -> None:
    spy = HookSpy()
    calls = [
        spy.get_verdict("bad tenant", "v1"),
        spy.get_verdict("acme", ""),
        spy.set_label("acme", "v1", "C", lambda r, label: {}),  # type: ignore[arg-type]
        spy.set_label("acme", "v1", "A", lambda r, label: {}, by="x" * 257),
        spy.label_history("acme", ""),
        spy.lease_review("acme", "p1", n=0, annotator="ann", lease_s=60),
        spy.release_review("acme", "v1", ""),
        spy.review_stats("acme", "", now=1.0),
        spy.acquire_lease("acme", "job", "me", ttl_s=0),
        spy.release_lease("acme", "", "me"),
        spy.read_accumulator("acme", ""),
        spy.list_accumulators("{acme}"),
        spy.get_threshold("acme", ""),
        spy.model_history("acme", "x" * 257),
        spy.monitor_events("acme", "p1", limit=-1),
        spy.get_state("acme", ""),
        spy.put_state("acme", "k", {}, expected_version=-1),
        spy.claim_verdict_id("acme", "", "me", 1.0),
        spy.release_verdict_id("bad/tenant", "v1", "me"),
        spy.verdict_id_claimed("acme", ""),
        spy.iter_labelled("acme", limit=-1),
        spy.count_labelled("acme", ""),
        spy.iter_recent("acme", "p1", limit=-1),
        spy.apply_retention(older_than=float("nan"), keep_labelled=0),
    ]
    for call in calls:
        with pytest.raises(ValueError):
            await call
    with pytest.raises(ValueError, match="batch_size"):
        await anext(spy.iter_records(batch_size=0))
