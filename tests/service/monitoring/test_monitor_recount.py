"""The precision monitor never drops a label (docs/design.md, 'Tuning and monitoring on the population'): after a storm of
concurrent first audit labels on two replicas, after labels whose monitor write never happened
(the state a SIGKILL between the label's commit and the blob write leaves), and after a real
SIGKILL of a gateway process mid-burst, ``/v1/monitor``'s label count equals a recount of the
stored audit labels."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import aiohttp
import pytest
from jf_test_support import app_support as S
from jf_test_support.crash_harness import killing, start_gateway
from jf_test_support.monitor_support import TARGET, H, World, external_panel, fuse, tuned_and_good
from jf_test_support.pg_server import create_database
from jf_test_support.waiting import poll_until

from judgefuse.service.ledger import label_increments
from judgefuse.service.monitoring.monitor import Monitors, monitor_key
from judgefuse.service.storage import SQLiteStorage, Storage, StorageUnavailable
from judgefuse.service.storage.postgres import PostgresStorage
from judgefuse.service.storage.redis import RedisStorage

STORM = {"sqlite": 300, "redis": 120, "postgres": 120}
"""Concurrent first audit labels of the two-replica storm per backend (300: the hardening
run's figure, on the default store; ``JF_MONITOR_STORM=N`` runs N on every backend)."""


async def stored_audit_labels(storage: Storage, tenant: str, panel: str, version: int) -> int:
    records = await storage.iter_labelled(tenant, panel)
    return sum(1 for r in records if r.review is not None and r.review.stratum == "audit"
               and r.threshold_version == version)


async def monitor_labels(client, headers=H) -> int:
    r = await client.get("/v1/monitor", params={"panel": "ext"}, headers=headers)
    assert r.status_code == 200, r.text
    return int(r.json()["precision"]["labels"])


@contextlib.asynccontextmanager
async def two_handles(backend: str, tmp_path: Path, redis_url: str | None, postgres_url: str | None):
    """Two storage handles on one store: two replicas."""
    if backend == "sqlite":
        one, two = SQLiteStorage(tmp_path / "shared.db"), SQLiteStorage(tmp_path / "shared.db")
    elif backend == "redis":
        one, two = RedisStorage(redis_url), RedisStorage(redis_url)
    else:
        one, two = PostgresStorage(postgres_url), PostgresStorage(postgres_url)
    await one.open()
    await two.open()
    if backend == "redis":
        await one.client.flushdb()
    try:
        yield one, two
    finally:
        await one.close()
        await two.close()


@pytest.mark.parametrize("backend", ["sqlite", "redis", "postgres"])
async def test_300_concurrent_first_audit_labels_on_two_replicas_all_count(
    backend, tmp_path, request,
):
    redis_url = request.getfixturevalue("redis_url") if backend == "redis" else None
    postgres_url = None
    if backend == "postgres":  # a database of its own
        postgres_url = create_database(request.getfixturevalue("pg_server"), "monitor_recount")
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0)], review_seed=5)
    world = World(seed=3)
    async with two_handles(backend, tmp_path, redis_url, postgres_url) as (one, two):
        async with S.running_app(settings, one) as (_a, c1), S.running_app(settings, two) as (_b, c2):
            version = await tuned_and_good(c1, world, 0)
            n_labels = int(os.environ.get("JF_MONITOR_STORM", STORM[backend]))
            verdicts = await fuse(c1, world, "good", n_labels)

            async def label(i: int, v: dict) -> None:
                client = c1 if i % 2 else c2
                for _ in range(100):  # a client that retries 429 (label admission) and 503 (pool)
                    r = await client.post("/v1/feedback", json={"verdict_id": v["id"],
                                                                "label": world.truth[v["id"]]}, headers=H)
                    if r.status_code not in (429, 503):
                        break
                    await asyncio.sleep(float(r.headers.get("retry-after", "1")) * 0.1)
                assert r.status_code == 200, r.text

            await asyncio.gather(*(label(i, v) for i, v in enumerate(verdicts)))
            stored = await stored_audit_labels(one, "tenant-a", "ext", version)
            assert stored == n_labels
            # conflicts beyond MAX_CAS_ATTEMPTS hand the key to a background rebuild: give it time
            await poll_until(lambda: _shows(c1, stored), every_s=0.05)
            assert await monitor_labels(c1) == await monitor_labels(c2) == stored


async def _shows(client, stored) -> bool:
    """Whether the monitor's label counts over HTTP equal the ones counted from storage."""
    return await monitor_labels(client) == stored


async def test_a_label_whose_monitor_write_never_happened_is_counted_at_start(storage, tmp_path):
    """The state a SIGKILL between a label's commit and its blob write leaves: labels stored
    (with their accumulators) behind the monitor's back. The next start rebuilds the blob."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0)], review_seed=9)
    world = World(seed=4)
    async with S.running_app(settings, storage) as (_app, client):
        version = await tuned_and_good(client, world, 20)
        before = await monitor_labels(client)
        verdicts = await fuse(client, world, "good", 12)
    for v in verdicts:  # labelled with the gateway down: no monitor write at all
        await storage.set_label("tenant-a", v["id"], world.truth[v["id"]], label_increments)
    blob = await storage.get_state("tenant-a", monitor_key("ext", version))
    assert blob is not None
    stored = await stored_audit_labels(storage, "tenant-a", "ext", version)
    assert stored == before + 12
    async with S.running_app(settings, storage) as (_app, client):
        await poll_until(lambda: _shows(client, stored), every_s=0.05)
        assert await monitor_labels(client) == stored
        # and a label after the rebuild still counts once
        more = await fuse(client, world, "good", 1)
        r = await client.post("/v1/feedback", json={"verdict_id": more[0]["id"],
                                                    "label": world.truth[more[0]["id"]]}, headers=H)
        assert r.status_code == 200
        assert await monitor_labels(client) == stored + 1


async def test_a_label_whose_threshold_read_failed_is_counted_by_a_rebuild(storage, tmp_path, monkeypatch):
    """A busy PostgreSQL pool failed the threshold read of a label's monitor write (the label
    itself was stored): the monitor counted 119 of 120 stored audit labels until a restart. The
    failed read must hand the key to a background rebuild, as a failed blob write does."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0)], review_seed=9)
    world = World(seed=11)
    async with S.running_app(settings, storage) as (_app, client):
        version = await tuned_and_good(client, world, 0)
        verdicts = await fuse(client, world, "good", 4)
        read = storage.get_threshold
        failed: list[int | None] = []

        async def fails_once(tenant: str, panel: str, *, version: int | None = None):
            if version is not None and not failed:  # the label path's read of its version
                failed.append(version)
                raise StorageUnavailable("pool exhausted (injected)")
            return await read(tenant, panel, version=version)

        monkeypatch.setattr(storage, "get_threshold", fails_once)
        for v in verdicts:
            r = await client.post("/v1/feedback", json={"verdict_id": v["id"], "label": world.truth[v["id"]]},
                                  headers=H)
            assert r.status_code == 200, r.text  # the label is stored whatever the monitor does
        assert failed == [version]
        stored = await stored_audit_labels(storage, "tenant-a", "ext", version)
        await poll_until(lambda: _shows(client, stored), every_s=0.05)
        assert await monitor_labels(client) == stored

async def test_a_label_folded_by_a_rebuild_is_not_counted_again(storage, tmp_path):
    """The race the ``seen`` hashes close: a rebuild that already folded a stored label wins
    the compare-and-set, then that label's own monitor write arrives."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0)], review_seed=9)
    world = World(seed=6)
    async with S.running_app(settings, storage) as (app, client):
        version = await tuned_and_good(client, world, 5)
        verdicts = await fuse(client, world, "good", 3)
        outcomes = [await storage.set_label("tenant-a", v["id"], world.truth[v["id"]], label_increments)
                    for v in verdicts]
        monitors: Monitors = app.state.gateway.monitors
        threshold = await storage.get_threshold("tenant-a", "ext", version=version)
        assert await monitors.rebuild("tenant-a", "ext", threshold)
        stored = await stored_audit_labels(storage, "tenant-a", "ext", version)
        assert await monitor_labels(client) == stored
        for outcome in outcomes:  # the labels' own (late) monitor writes
            await monitors.on_label("tenant-a", outcome.record, outcome.record.label, threshold,
                                    on_drift="review_everything")
        assert await monitor_labels(client) == stored


async def test_a_clear_is_kept_through_a_rebuild(storage, tmp_path):
    """A rebuild after an operator's clear folds only the labels decided after it."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0)], review_seed=9)
    world = World(seed=8)
    async with S.running_app(settings, storage) as (app, client):
        version = await tuned_and_good(client, world, 0)
        for _ in range(30):  # drift until alarm
            await fuse(client, world, "drift", 20)
            await world.annotate(client)
            if (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()["state"] == "alarm":
                break
        r = await client.post("/v1/monitor/clear", json={"panel": "ext"}, headers=H)
        assert r.status_code == 200 and r.json()["cleared"], r.text
        await fuse(client, world, "good", 4)
        await world.annotate(client)
        assert await monitor_labels(client) == 4
        monitors: Monitors = app.state.gateway.monitors
        threshold = await storage.get_threshold("tenant-a", "ext", version=version)
        assert await monitors.rebuild("tenant-a", "ext", threshold)
        state = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        assert state["precision"]["labels"] == 4 and state["state"] == "ok"
        assert threshold.target_precision == TARGET


async def test_sigkill_of_a_gateway_mid_label_burst_leaves_a_monitor_equal_to_a_recount(tmp_path):
    """A real process: ``judgefuse serve`` on SQLite, 200 concurrent first audit labels, SIGKILL
    in the middle of them, a restart: the monitor counts exactly the stored audit labels."""
    db = tmp_path / "crash.db"
    url = f"sqlite:///{db}"
    panel = external_panel(tmp_path, audit_rate=1.0)
    world = World(seed=11)
    first = await start_gateway(tmp_path, "gateway-1", url, panel, JUDGEFUSE_REVIEW__REVIEW_SEED="3")
    with killing(first) as procs:
        async with aiohttp.ClientSession(base_url=first.url) as http:
            async def fuse_one(kind: str) -> dict:
                async with http.post("/v1/fuse", json=world.item(kind)) as r:
                    assert r.status == 200, await r.text()
                    return await r.json()

            for kind, n in (("good", 100), ("split", 60)):
                for _ in range(n):
                    await fuse_one(kind)
            while True:  # cold start: the annotator works the queue
                async with http.get("/v1/review/next", params={"panel": "ext", "n": 100}) as r:
                    items = (await r.json())["items"]
                if not items:
                    break
                for item in items:
                    async with http.post("/v1/feedback", json={"verdict_id": item["verdict_id"],
                                                               "label": world.truth[item["verdict_id"]]}) as r:
                        assert r.status == 200
            async with http.post("/v1/thresholds/tune", json={"panel": "ext", "target_precision": TARGET}) as r:
                tuned = await r.json()
                assert r.status == 200 and tuned["stored"], tuned
            verdicts = [await fuse_one("good") for _ in range(200)]

            async def label(v: dict) -> None:
                with contextlib.suppress(aiohttp.ClientError):
                    await http.post("/v1/feedback", json={"verdict_id": v["id"], "label": world.truth[v["id"]]})

            tasks = [asyncio.ensure_future(label(v)) for v in verdicts]
            await asyncio.sleep(0.15)
            first.child.proc.send_signal(signal.SIGKILL)
            await asyncio.gather(*tasks, return_exceptions=True)
        second = await start_gateway(tmp_path, "gateway-2", url, panel, JUDGEFUSE_REVIEW__REVIEW_SEED="3")
        procs.append(second)
        async with SQLiteStorage(db) as store:
            stored = await stored_audit_labels(store, "default", "ext", tuned["version"])
        assert 0 < stored, "no label landed before the kill: the test proves nothing"
        async with aiohttp.ClientSession(base_url=second.url) as http:
            seen = -1
            for _ in range(100):
                async with http.get("/v1/monitor", params={"panel": "ext"}) as r:
                    seen = (await r.json())["precision"]["labels"]
                if seen == stored:
                    break
                await asyncio.sleep(0.05)
            assert seen == stored
