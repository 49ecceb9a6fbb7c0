"""Dawid-Skene as the service's cold start, over real HTTP on the stub judges.

A panel with ``fusion: dawid_skene`` serves the cold-start rule (mean_probability, with a note)
until the gateway fits Dawid-Skene on the panel's stored, unlabelled votes; then it serves the
fit, stored as a model record that a restarted app serves too. The judges are scripted so the
two disagree on a probe item: j1 is always right but says so at 60; j2 and j3 are right 70% of
the time, independently, j2 at 95 and j3 at 55. Without labels only agreement can tell j1 apart
(two informative judges make the model identifiable); Dawid-Skene does.
"""

from __future__ import annotations

import contextlib
import hashlib
import re

import httpx
import pytest
from jf_test_support import app_support as S
from jf_test_support import openai_stub as stub_module

from judgefuse.service.app import create_app

ITEM_RE = re.compile(r"\[item (\d+) truth ([AB])\]")
PROBE = "[probe]"
COLD_NOTE = "dawid_skene not fitted: cold-start rule mean_probability"


def right(i: int, judge: str) -> bool:
    """A deterministic 70% coin per (item, judge)."""
    return hashlib.sha256(f"{i}:{judge}".encode()).digest()[0] < 0.7 * 256


def scripted(model: str, text: str):
    if PROBE in text:  # the reliable judge against the two others
        return {"j1": ("A", 60), "j2": ("B", 95), "j3": ("B", 55)}[model]
    if "[only j1]" in text and model != "j1":
        return stub_module.Status(400, "scripted failure")
    match = ITEM_RE.search(text)
    if match is None:
        return None
    i, truth = int(match.group(1)), match.group(2)
    wrong = "B" if truth == "A" else "A"
    if model == "j1":
        return (truth, 60)
    return (truth if right(i, model) else wrong, 95 if model == "j2" else 55)


def item(i: int, *, label: bool = False) -> dict:
    truth = "A" if i % 2 == 0 else "B"
    body = {"question": f"Which is better? [item {i} truth {truth}]", "answer_a": "one", "answer_b": "two"}
    return {**body, "label": truth} if label else body


def probe() -> dict:
    return {"question": f"Which is better? {PROBE}", "answer_a": "one", "answer_b": "two"}


@contextlib.asynccontextmanager
async def over_http(settings):
    """The app served by uvicorn on a loopback port, and a client of it (real HTTP)."""
    app = create_app(settings, environ={S.PLANTED_ENV: S.PLANTED})
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        yield app, client


def settings_for(tmp_path, url, **overrides):
    panel = S.panel_yaml(tmp_path, url, fusion="dawid_skene", quorum=1)
    values = {"storage_url": f"sqlite:///{tmp_path / 'db.sqlite3'}", "cold_start_every_verdicts": 0,
              "cold_start_min_verdicts": 50, **overrides}
    return S.make_settings(tmp_path, [panel], **values)


async def judge_many(client, items, headers) -> list[dict]:
    out = []
    for start in range(0, len(items), 50):
        r = await client.post("/v1/judge/batch", json={"items": items[start:start + 50]}, headers=headers)
        assert r.status_code == 200 and r.json()["n_failed"] == 0, r.text
        out += [res["verdict"] for res in r.json()["results"]]
    return out


async def test_cold_start_serves_mean_probability_then_the_stored_dawid_skene_fit(stub, tmp_path):
    server, script = stub
    script.by_question = scripted
    settings = settings_for(tmp_path, server.url)
    headers = S.auth("tenant-a")
    async with over_http(settings) as (_app, client):
        before = (await client.post("/v1/judge", json=probe(), headers=headers)).json()
        # before any fit: the cold-start rule, said so, never above the most confident vote
        assert before["method"] == "dawid_skene" and before["model_version"] is None
        assert COLD_NOTE in before["notes"]
        assert before["choice"] == "B"  # mean P(A) = (0.60 + 0.05 + 0.45) / 3 = 0.367
        assert before["confidence"] == pytest.approx(1 - (0.60 + 0.05 + 0.45) / 3)
        assert before["confidence"] <= 0.95

        too_few = await client.post("/v1/fusion/refit", json={"panel": "main", "cold_start": True},
                                    headers=headers)
        assert too_few.status_code == 200 and too_few.json()["status"] == "skipped"
        assert "at least 50" in too_few.json()["reason"]

        verdicts = await judge_many(client, [item(i) for i in range(120)], headers)
        assert all(COLD_NOTE in v["notes"] for v in verdicts if v["n_valid"] > 1)
        r = await client.post("/v1/fusion/refit", json={"panel": "main", "cold_start": True}, headers=headers)
        assert r.status_code == 200, r.text
        fit = r.json()
        assert fit["status"] == "promoted" and fit["active_method"] == "dawid_skene", fit
        assert fit["version"] == 1 and re.fullmatch(r"[0-9a-f]{12}", fit["model_version"])
        assert fit["n_labels"] == 0 and fit["metrics"]["n_items"] == 121.0
        estimated = {k.split(":", 1)[1]: v for k, v in fit["metrics"].items() if k.startswith("estimated")}
        print(f"label-free accuracy estimates {estimated} (truth: j1 1.0, j2 and j3 about 0.7)")
        assert estimated["j1"] > 0.9 and estimated["j2"] < 0.85 and estimated["j3"] < 0.85

        after = (await client.post("/v1/judge", json=probe(), headers=headers)).json()
        assert after["method"] == "dawid_skene" and after["model_version"] == fit["model_version"]
        assert COLD_NOTE not in after["notes"]
        assert after["choice"] == "A"  # the judge that agrees with the consensus, not the loudest
        # one valid vote (two judges failed) keeps its own confidence, fitted model or not
        single = (await client.post("/v1/judge", json={**probe(), "question": "Q [only j1] [item 7 truth B]"},
                                    headers=headers)).json()
        assert single["n_valid"] == 1 and (single["choice"], single["confidence"]) == ("B", pytest.approx(0.6))

        again = await client.post("/v1/fusion/refit", json={"panel": "main", "cold_start": True}, headers=headers)
        assert again.json()["status"] in ("promoted", "kept")
        models = (await client.get("/v1/fusion/models", headers=headers)).json()
        assert models["active_method"] == "dawid_skene"
        assert models["history"][0]["method"] == "dawid_skene"
        served_version = models["model_version"]

    # a restarted gateway serves the stored fit
    async with over_http(settings) as (_app, client):
        restarted = (await client.post("/v1/judge", json=probe(), headers=headers)).json()
        assert (restarted["choice"], restarted["model_version"]) == ("A", served_version)
        other = (await client.post("/v1/judge", json=probe(), headers=S.auth("tenant-b"))).json()
        assert other["model_version"] is None and COLD_NOTE in other["notes"]  # per tenant


async def test_background_cold_start_fits_once_per_round(stub, tmp_path):
    server, script = stub
    script.by_question = scripted
    settings = settings_for(tmp_path, server.url, cold_start_every_verdicts=60)
    headers = S.auth("tenant-a")
    async with S.running_app(settings) as (app, client):
        await judge_many(client, [item(i) for i in range(50)], headers)
        await app.state.gateway.cold_start.idle()
        assert (await client.get("/v1/fusion/models", headers=headers)).json()["history"] == []
        await judge_many(client, [item(i) for i in range(50, 70)], headers)
        await app.state.gateway.cold_start.idle()
        models = (await client.get("/v1/fusion/models", headers=headers)).json()
        assert [m["method"] for m in models["history"]] == ["dawid_skene"]
        assert app.state.gateway.cold_start.runs == [("tenant-a", "main", 1)]
        assert (await client.post("/v1/judge", json=probe(), headers=headers)).json()["choice"] == "A"


async def test_labels_then_dawid_skene_plus_platt_refits_and_ends_the_cold_start(stub, tmp_path):
    server, script = stub
    script.by_question = scripted
    settings = settings_for(tmp_path, server.url, min_labels_for_refit=50)
    headers = S.auth("tenant-a")
    async with S.running_app(settings) as (_app, client):
        await judge_many(client, [item(i, label=True) for i in range(100)], headers)
        assert (await client.post("/v1/fusion/refit", json={"cold_start": True}, headers=headers)).json()[
            "status"] == "promoted"
        bad = await client.post("/v1/fusion/refit", json={"method": "majority"}, headers=headers)
        assert bad.status_code == 422 and "body.method" in bad.text
        r = await client.post("/v1/fusion/refit", json={"method": "dawid_skene+platt"}, headers=headers)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "promoted", body
        assert body["active_method"] == "dawid_skene+platt" and body["n_labels"] == 100
        served = (await client.post("/v1/judge", json=probe(), headers=headers)).json()
        assert served["method"] == "dawid_skene+platt" and served["model_version"] == body["model_version"]
        assert served["choice"] == "A"
        over = (await client.post("/v1/fusion/refit", json={"cold_start": True}, headers=headers)).json()
        assert over["status"] == "skipped" and "the cold start is over" in over["reason"]
        assert over["active_method"] == "dawid_skene+platt"


async def test_cold_start_on_a_panel_without_one_names_the_field(stub, tmp_path):
    server, _script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    async with S.running_app(settings) as (_app, client):
        r = await client.post("/v1/fusion/refit", json={"cold_start": True}, headers=S.auth("tenant-a"))
        assert r.status_code == 422 and "body.panel" in r.text and "dawid_skene" in r.text


async def test_two_replicas_on_one_redis_fit_a_round_once(stub, tmp_path, redis_url):
    """Two gateways sharing one Redis, verdicts interleaved across them: the round that crosses
    ``cold_start_every_verdicts`` is fitted by exactly one of them (leases ``cold_start/{panel}``),
    and both then serve that one stored fit."""
    from judgefuse.service.storage.redis import RedisStorage

    server, script = stub
    script.by_question = scripted
    settings = settings_for(tmp_path, server.url, cold_start_every_verdicts=60)
    headers = S.auth("tenant-a")
    stores = [RedisStorage(redis_url), RedisStorage(redis_url)]
    for store in stores:
        await store.open()
    await stores[0].client.flushdb()
    try:
        async with S.running_app(settings, stores[0]) as (app1, c1), S.running_app(settings, stores[1]) as (app2, c2):
            gateways = [app1.state.gateway, app2.state.gateway]
            # each replica checks the shared count every 15 of its own verdicts (60 // 4): replica 2
            # sees round 1 first (total 60), replica 1 sees it later (total 75) and finds it taken
            for client, start, n in ((c1, 0, 30), (c2, 30, 30), (c1, 60, 15), (c2, 75, 15)):
                await judge_many(client, [item(i) for i in range(start, start + n)], headers)
                for gateway in gateways:
                    await gateway.cold_start.idle()
            assert [g.cold_start.runs for g in gateways] == [[], [("tenant-a", "main", 1)]]
            history = await stores[0].model_history("tenant-a", "main")
            assert [m.method for m in history] == ["dawid_skene"]
            served = [(await c.post("/v1/judge", json=probe(), headers=headers)).json() for c in (c1, c2)]
            assert {(v["choice"], v["model_version"]) for v in served} == {("A", history[0].params["model_version"])}
    finally:
        for store in stores:
            await store.close()


async def test_a_threshold_tuned_for_the_cold_start_freezes_it(stub, tmp_path):
    """A threshold tuned on dawid_skene's verdicts before any fit (mean_probability confidences,
    no model version) would also route a fit's posteriors: the cold start does not fit then.
    One tuned for the serving fit's version freezes that fit."""
    server, script = stub
    script.by_question = scripted
    settings = settings_for(tmp_path, server.url)
    headers = S.auth("tenant-a")
    async with S.running_app(settings) as (app, client):
        await judge_many(client, [item(i, label=True) for i in range(60)], headers)
        tuned = (await client.post("/v1/thresholds/tune", json={"target_precision": 0.6, "min_count": 5},
                                   headers=headers)).json()
        assert tuned["method"] == "dawid_skene" and tuned["model_version"] is None and tuned["stored"], tuned
        r = (await client.post("/v1/fusion/refit", json={"cold_start": True}, headers=headers)).json()
        assert r["status"] == "skipped" and "before any fit" in r["reason"], r
        assert (await client.get("/v1/fusion/models", headers=headers)).json()["history"] == []

    # a fresh store; labels too few for a labelled refit (tuning refits a model that serves
    # without a paired threshold: here it must stay the cold-start fit)
    (tmp_path / "second").mkdir()
    settings = settings_for(tmp_path / "second", server.url, min_labels_for_refit=1000)
    async with S.running_app(settings) as (app, client):
        await judge_many(client, [item(i, label=True) for i in range(60)], headers)
        fit = (await client.post("/v1/fusion/refit", json={"cold_start": True}, headers=headers)).json()
        assert fit["status"] == "promoted"
        await judge_many(client, [item(i, label=True) for i in range(60, 120)], headers)
        tuned = (await client.post("/v1/thresholds/tune", json={"target_precision": 0.6, "min_count": 5},
                                   headers=headers)).json()
        assert tuned["model_version"] == fit["model_version"] and tuned["stored"], tuned
        assert tuned["refit"]["status"] == "skipped"  # too few labels for the labelled refit
        again = (await client.post("/v1/fusion/refit", json={"cold_start": True}, headers=headers)).json()
        assert again["status"] == "skipped" and f"model {fit['model_version']}" in again["reason"], again
