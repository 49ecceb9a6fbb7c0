"""The review queue over real HTTP (uvicorn on loopback), on both storage backends: concurrent
annotators never share an item, an expired lease returns the item, a label (by anyone) removes
it, skip gives it back, stats per stratum, random order, no verdict shown unless the panel opts
in, and bad leases/labels are 4xx naming the field with nothing written."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, UNANIMOUS, H, external_panel, put_threshold

from judgefuse.service.app import create_app


async def _fill(client: httpx.AsyncClient, n: int, prefix: str = "q") -> list[str]:
    ids = []
    for i in range(n):
        r = await client.post("/v1/fuse", json={**PAIR, "id": f"{prefix}{i}", "question": f"question {i}",
                                                "votes": SPLIT}, headers=H)
        assert r.status_code == 200, r.text
        ids.append(r.json()["id"])
    return ids


async def test_concurrent_annotators_never_share_an_item_and_the_queue_is_random(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], review_seed=1)
    app = create_app(settings, storage=storage)
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        ids = await _fill(client, 40)

        async def lease(who: str) -> list[str]:
            r = await client.get("/v1/review/next", params={"panel": "ext", "n": 3, "annotator": who},
                                 headers=H)
            assert r.status_code == 200, r.text
            return [item["verdict_id"] for item in r.json()["items"]]

        held: dict[str, list[str]] = {f"ann{i}": [] for i in range(6)}
        for _round in range(4):
            got = await asyncio.gather(*(lease(who) for who in held))
            for who, items in zip(held, got, strict=True):
                held[who] += items
        every = [vid for items in held.values() for vid in items]
        assert len(every) == len(set(every)) == 40  # all leased, none twice
        assert set(every) == set(ids)
        assert await lease("late") == []
        stats = (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json()
        assert stats["strata"]["review"] == {"routed": 40, "queued": 0, "leased": 40, "labelled": 0,
                                             "labelled_share": 0.0}
        assert stats["queue_depth"] == 0 and stats["leased"] == 40
    # random order: the order leased is the stamps' rank order, not the arrival order
    ranks = {vid: (await storage.get_verdict("tenant-a", vid)).review.rank for vid in ids}
    first = held["ann0"][:3]
    assert first == sorted(first, key=ranks.get)
    assert sorted(ids, key=ranks.get) != ids


async def test_lease_expiry_skip_and_a_label_by_someone_else(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], review_lease_s=0.5)
    app = create_app(settings, storage=storage)
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        await _fill(client, 2)

        async def lease(who: str, n: int = 1) -> list[dict]:
            r = await client.get("/v1/review/next", params={"panel": "ext", "n": n},
                                 headers={**H, "X-Annotator": who})
            assert r.status_code == 200, r.text
            assert r.json()["annotator"] == who
            return r.json()["items"]

        x = await lease("x")
        y = await lease("y")
        assert len(x) == len(y) == 1 and x[0]["verdict_id"] != y[0]["verdict_id"]
        item = x[0]
        assert set(item) == {"verdict_id", "question", "answer_a", "answer_b", "reason", "stratum",
                             "lease_expires_at", "verdict"}
        assert item["verdict"] is None and item["reason"] == "no_threshold"
        assert await lease("z") == []
        await asyncio.sleep(0.7)  # both leases expire: the items return
        z = await lease("z", 5)
        assert {i["verdict_id"] for i in z} == {x[0]["verdict_id"], y[0]["verdict_id"]}
        # skip: only the holder may; the item is free again at once
        other = await client.post("/v1/review/skip", json={"verdict_id": z[0]["verdict_id"]},
                                  headers={**H, "X-Annotator": "x"})
        assert other.status_code == 404 and other.json()["fields"][0]["field"] == "body.verdict_id"
        ok = await client.post("/v1/review/skip", json={"verdict_id": z[0]["verdict_id"], "annotator": "z"},
                               headers=H)
        assert ok.status_code == 200 and ok.json()["released"] is True
        again = await lease("x")
        assert again[0]["verdict_id"] == z[0]["verdict_id"]
        # a label from someone else wins: the lease ends, the item leaves the queue
        held_by_z = z[1]["verdict_id"]
        fb = await client.post("/v1/feedback", json={"verdict_id": held_by_z, "label": "A"}, headers=H)
        assert fb.status_code == 200
        skip = await client.post("/v1/review/skip", json={"verdict_id": held_by_z, "annotator": "z"}, headers=H)
        assert skip.status_code == 404
        stats = (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json()
        assert stats["strata"]["review"] == {"routed": 2, "queued": 0, "leased": 1, "labelled": 1,
                                             "labelled_share": 0.5}
        await asyncio.sleep(0.7)
        assert [i["verdict_id"] for i in await lease("y", 5)] == [again[0]["verdict_id"]]


async def test_audited_items_are_queued_and_the_verdict_shows_only_when_the_panel_opts_in(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0, shows_verdict=True)])
    await put_threshold(storage)
    async with S.running_app(settings, storage) as (_app, client):
        r = await client.post("/v1/fuse", json={**PAIR, "votes": UNANIMOUS}, headers=H)
        assert r.json()["review"] == {"queued": True, "reason": "audit", "stratum": "audit",
                                      "inclusion_probability": 1.0, "audit_rate": 1.0,
                                      "threshold_version": 1}
        items = (await client.get("/v1/review/next", params={"panel": "ext"}, headers=H)).json()["items"]
        assert items[0]["stratum"] == "audit" and items[0]["verdict"]["choice"] == "A"
        # another tenant sees nothing of tenant-a's queue
        other = await client.get("/v1/review/next", params={"panel": "ext", "n": 5}, headers=S.auth("tenant-b"))
        assert other.json()["items"] == []
        stats = (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json()
        assert stats["strata"]["audit"]["routed"] == 1 and stats["strata"]["none"]["routed"] == 0


@pytest.mark.parametrize(("params", "field"), [
    ({"n": 0}, "query.n"), ({"n": 10_000}, "query.n"), ({"n": "x"}, "query.n"),
    ({"panel": "nope"}, "query.panel"), ({"annotator": " "}, "query.annotator"),
])
async def test_bad_leases_are_422_naming_the_field_and_lease_nothing(storage, tmp_path, params, field):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with S.running_app(settings, storage) as (_app, client):
        await _fill(client, 3)
        r = await client.get("/v1/review/next", params={"panel": "ext", **params}, headers=H)
        assert r.status_code == 422, r.text
        assert r.json()["fields"][0]["field"] == field
        stats = (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json()
        assert stats["strata"]["review"]["leased"] == 0 and stats["queue_depth"] == 3
        unknown = await client.post("/v1/feedback", json={"verdict_id": "no-such", "label": "A"}, headers=H)
        assert unknown.status_code == 404 and unknown.json()["fields"][0]["field"] == "verdict_id"
        bad_label = await client.post("/v1/feedback", json={"verdict_id": "q0", "label": "C"}, headers=H)
        assert bad_label.status_code == 422 and bad_label.json()["fields"][0]["field"] == "body.label"
        assert (await client.get("/v1/review/next", params={"panel": "ext"})).status_code == 401
    assert await storage.get_verdict("tenant-a", "no-such") is None
    assert (await storage.get_verdict("tenant-a", "q0")).label is None
    assert not [k for k in await storage.list_accumulators("tenant-a") if "/traffic/" not in k]
