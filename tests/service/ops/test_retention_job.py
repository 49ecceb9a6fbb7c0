"""The retention job in the running service, on both backends (a SQLite file and the Redis
fixture): traffic posted through /v1/fuse, labels through /v1/feedback, then a pass ten days
later drops the old unlabelled verdicts and the labels outside the refit's window, keeps what
waits for review and the newest ``refit_max_labels`` labels, and leaves the accumulators, the
review counters and /v1/calibration exactly as they were. One replica at a time (the lease)."""

from __future__ import annotations

import time

from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, UNANIMOUS, H, external_panel, put_threshold
from jf_test_support.waiting import poll_until

from judgefuse.service.ops.retention_job import RetentionJob
from judgefuse.service.storage import Storage
from judgefuse.service.storage.retention import RetentionReport

DAY = 86400.0
TENANT = "tenant-a"


async def accumulators(storage: Storage) -> dict[str, object]:
    return {key: (await storage.read_accumulator(TENANT, key),
                  await storage.read_accumulator(TENANT, key, since_hour=0))
            for key in await storage.list_accumulators(TENANT)}


async def test_retention_job_in_the_service(storage: Storage, tmp_path) -> None:
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.3)], review_seed=7,
                               panel_structure_ttl_s=0,
                               retention_days=5, refit_max_labels=10)
    await put_threshold(storage)
    async with S.running_app(settings, storage) as (app, client):
        job: RetentionJob = app.state.retention
        await poll_until(lambda: job.runs)  # the pass at start: nothing is old yet
        assert job.runs == [RetentionReport(dropped=0, kept_pending=0, kept_labelled=0)]

        strata: dict[str, list[str]] = {"review": [], "audit": [], "none": []}
        for i in range(16):
            r = await client.post("/v1/fuse", json={**PAIR, "id": f"r{i}", "votes": SPLIT}, headers=H)
            strata[r.json()["review"]["stratum"]].append(f"r{i}")
        for i in range(50):
            r = await client.post("/v1/fuse", json={**PAIR, "id": f"a{i}", "votes": UNANIMOUS}, headers=H)
            strata[r.json()["review"]["stratum"]].append(f"a{i}")
        assert len(strata["review"]) == 16 and len(strata["audit"]) >= 6 and len(strata["none"]) >= 20
        labelled = strata["review"][:6] + strata["audit"][: len(strata["audit"]) // 2] + strata["none"][:4]
        for vid in labelled:  # in this order, so created_at order and label order differ
            r = await client.post("/v1/feedback", json={"verdict_id": vid, "label": "A"}, headers=H)
            assert r.status_code == 200
        pending = set(strata["review"][6:] + strata["audit"][len(strata["audit"]) // 2:])
        window = {r.id for r in await storage.iter_labelled(TENANT, "ext", limit=10)}
        assert len(labelled) > 10 and len(window) == 10

        calibration = (await client.get("/v1/calibration", params={"panel": "ext"}, headers=H)).json()
        stats = (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json()
        accs = await accumulators(storage)

        # the start pass keeps its lease for most of the interval: while it holds, another
        # replica's timer skips; here the other replica holds it, so this one skips
        assert not await storage.acquire_lease("system", "retention", "other-replica", ttl_s=60)
        assert await storage.release_lease("system", "retention", job.owner)
        assert await storage.acquire_lease("system", "retention", "other-replica", ttl_s=60)
        assert await job.run_once(now=time.time() + 10 * DAY) is None
        assert await storage.release_lease("system", "retention", "other-replica")

        report = await job.run_once(now=time.time() + 10 * DAY)
        every = {vid for ids in strata.values() for vid in ids}
        assert report == RetentionReport(dropped=len(every) - len(pending) - 10,
                                         kept_pending=len(pending), kept_labelled=10)
        left = {r.id async for r in storage.iter_records(TENANT)}
        assert left == pending | window
        # while this replica's lease holds (most of the interval), a second replica skips
        other = RetentionJob(storage, storage, retention_days=5, keep_labelled=10, owner="other-replica")
        assert await other.run_once(now=time.time() + 10 * DAY) is None

        assert await accumulators(storage) == accs
        assert (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json() == stats
        after = (await client.get("/v1/calibration", params={"panel": "ext"}, headers=H)).json()
        # panel_structure is re-estimated from the stored records, which retention drops; every
        # accumulated estimate stays
        assert after.pop("panel_structure")["n_items"] < calibration.pop("panel_structure")["n_items"]
        # the disagreement list reads the stored labelled verdicts, which retention drops by design
        assert after.pop("disagreements")["scanned"] < calibration.pop("disagreements")["scanned"]
        assert after == calibration
        # the queue still serves every pending item, and labels still land on them
        served = (await client.get("/v1/review/next", params={"panel": "ext", "n": 50},
                                   headers=H)).json()["items"]
        assert {item["verdict_id"] for item in served} == pending
        r = await client.post("/v1/feedback", json={"verdict_id": sorted(pending)[0], "label": "B"},
                              headers=H)
        assert r.status_code == 200


async def test_retention_off_by_default_runs_nothing(storage: Storage, tmp_path) -> None:
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    assert settings.storage.retention_days is None
    async with S.running_app(settings, storage) as (app, client):
        await client.post("/v1/fuse", json={**PAIR, "id": "x", "votes": UNANIMOUS}, headers=H)
        job: RetentionJob = app.state.retention
        assert not job.enabled
        assert await job.run_once(now=time.time() + 1e6) is None
        assert await storage.get_verdict(TENANT, "x") is not None
