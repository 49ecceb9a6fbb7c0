"""End-to-end through the app on both storage backends: judge -> feedback -> calibration ->
tune -> the new threshold routes the next verdict; tenant isolation; idempotent feedback."""

from __future__ import annotations

import pytest
from jf_test_support import app_support as S

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}


def key_entry(body: dict, key: str) -> dict:
    matches = [k for k in body["keys"] if k["key"] == key]
    assert matches, f"{key} not in {[k['key'] for k in body['keys']]}"
    return matches[0]


async def test_judge_feedback_calibration_tune_then_threshold_routes_next_verdict(storage, stub, tmp_path):
    server, script = stub
    for j in S.JUDGES:
        script.set(j, "A", 90)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    headers = S.auth("tenant-a")
    async with S.running_app(settings, storage) as (_app, client):
        first = await client.post("/v1/judge", json=PAIR, headers=headers)
        assert first.status_code == 200, first.text
        verdict = first.json()
        assert verdict["choice"] == "A" and verdict["confidence"] == 1.0
        assert verdict["route"] == "human_review"
        assert verdict["threshold"]["value"] is None and verdict["threshold"]["version"] is None
        assert "no threshold tuned" in verdict["threshold"]["reason"]
        assert verdict["method"] == "majority" and verdict["model_version"] is None
        assert [v["judge"] for v in verdict["votes"]] == ["j1", "j2", "j3"]
        assert verdict["degraded"] is False and verdict["failed_judges"] == []
        assert {"judges_s", "fuse_s", "total_s", "overhead_s"} <= set(verdict["timings"])

        fb = await client.post("/v1/feedback", json={"verdict_id": verdict["id"], "label": "A"}, headers=headers)
        assert fb.status_code == 200, fb.text
        assert fb.json()["status"] == "labelled"

        cal = (await client.get("/v1/calibration", params={"panel": "main"}, headers=headers)).json()
        method = key_entry(cal, "method:majority:fused")
        assert method["all_time"]["n"] == 1 and method["all_time"]["accuracy"] == 1.0
        assert method["window"]["n"] == 1
        assert {"ece", "th_score", "brier", "macroce", "adaptive_ce", "reliability"} <= set(method["all_time"])
        assert len(method["all_time"]["reliability"]) == 10
        judge = key_entry(cal, "judge:j1:sc")
        assert judge["all_time"]["n"] == 1
        assert judge["all_time"]["reliability"][9]["count"] == 1  # confidence 0.9 -> last bin
        assert key_entry(cal, "mode:all:sc")["all_time"]["n"] == 3

        # 39 more labelled unanimous verdicts (label inline), then tune
        for i in range(39):
            r = await client.post("/v1/judge", json={**PAIR, "id": f"seed-{i}", "label": "A"}, headers=headers)
            assert r.status_code == 200 and r.json()["feedback"]["status"] == "labelled"
        tune = await client.post(
            "/v1/thresholds/tune",
            json={"panel": "main", "target_precision": 0.9, "delta": 0.1, "min_count": 30},
            headers=headers,
        )
        assert tune.status_code == 200, tune.text
        tuned = tune.json()
        assert tuned["stored"] is True and tuned["version"] == 1
        assert tuned["threshold"] == 1.0 and tuned["n_labels"] == 40 and tuned["method"] == "majority"

        listed = (await client.get("/v1/thresholds", params={"panel": "main"}, headers=headers)).json()
        assert listed["current"]["version"] == 1 and listed["current"]["threshold"] == 1.0
        assert len(listed["history"]) == 1

        unanimous = (await client.post("/v1/judge", json=PAIR, headers=headers)).json()
        assert unanimous["route"] == "auto_accept"
        assert unanimous["threshold"]["value"] == 1.0 and unanimous["threshold"]["version"] == 1

        script.set("j3", "B", 60)  # a 2-1 split: majority confidence 2/3 < 1.0
        split = (await client.post("/v1/judge", json=PAIR, headers=headers)).json()
        assert split["choice"] == "A" and split["confidence"] == pytest.approx(2 / 3)
        assert split["route"] == "human_review" and split["threshold"]["version"] == 1

        stored = (await client.get(f"/v1/verdicts/{unanimous['id']}", headers=headers)).json()
        assert stored["route"] == "auto_accept" and stored["method"] == "majority"


async def test_tenant_b_cannot_read_or_label_tenant_a_verdicts(storage, stub, tmp_path):
    server, _script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    async with S.running_app(settings, storage) as (_app, client):
        made = (await client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-a"))).json()
        vid = made["id"]
        got = await client.get(f"/v1/verdicts/{vid}", headers=S.auth("tenant-b"))
        assert got.status_code == 404
        assert got.json()["fields"][0]["field"] == "verdict_id"
        fb = await client.post("/v1/feedback", json={"verdict_id": vid, "label": "A"}, headers=S.auth("tenant-b"))
        assert fb.status_code == 404
        cal = (await client.get("/v1/calibration", headers=S.auth("tenant-b"))).json()
        assert cal["keys"] == []
        own = await client.get(f"/v1/verdicts/{vid}", headers=S.auth("tenant-a"))
        assert own.status_code == 200 and own.json()["label"] is None


async def test_feedback_is_idempotent_and_relabel_never_double_counts(storage, stub, tmp_path):
    server, script = stub
    script.set("j1", "A", 90)
    script.set("j2", "A", 80)
    script.set("j3", "B", 70)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    headers = S.auth("tenant-a")
    async with S.running_app(settings, storage) as (_app, client):
        vid = (await client.post("/v1/judge", json=PAIR, headers=headers)).json()["id"]

        async def label(letter: str) -> dict:
            r = await client.post("/v1/feedback", json={"verdict_id": vid, "label": letter}, headers=headers)
            assert r.status_code == 200, r.text
            return r.json()

        assert (await label("A"))["status"] == "labelled"
        assert (await label("A"))["status"] == "unchanged"
        relabel = await label("B")
        assert relabel["status"] == "relabelled" and relabel["previous"] == "A"
        cal = (await client.get("/v1/calibration", headers=headers)).json()
        method = key_entry(cal, "method:majority:fused")["all_time"]
        assert method["n"] == 1 and method["accuracy"] == 0.0  # majority said A, label is B
        assert key_entry(cal, "judge:j3:sc")["all_time"]["accuracy"] == 1.0
        assert key_entry(cal, "judge:j1:sc")["all_time"]["n"] == 1
        assert key_entry(cal, "mode:all:sc")["all_time"]["n"] == 3

        unknown = await client.post("/v1/feedback", json={"verdict_id": "nope", "label": "A"}, headers=headers)
        assert unknown.status_code == 404
        got = (await client.get(f"/v1/verdicts/{vid}", headers=headers)).json()
        assert got["label"] == "B"


async def test_invalid_votes_are_counted_apart_from_calibration(storage, stub, tmp_path):
    server, script = stub
    script.set("j3", action=S.stub_module.Status(500, "upstream exploded"))
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    headers = S.auth("tenant-a")
    async with S.running_app(settings, storage) as (_app, client):
        vid = (await client.post("/v1/judge", json={**PAIR, "label": "A"}, headers=headers)).json()["id"]
        assert vid
        cal = (await client.get("/v1/calibration", headers=headers)).json()
        j3 = key_entry(cal, "judge:j3:-")
        assert j3["all_time"] is None and j3["abstained"]["all_time"] == 1
        assert key_entry(cal, "mode:all:sc")["all_time"]["n"] == 2
        assert key_entry(cal, "judge:j1:sc")["abstained"]["all_time"] == 0


async def test_tune_with_too_few_labels_stores_nothing_and_says_why(stub, tmp_path):
    server, _script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    headers = S.auth("tenant-a")
    async with S.running_app(settings) as (_app, client):
        empty = (await client.post("/v1/thresholds/tune", json={"target_precision": 0.9}, headers=headers)).json()
        assert empty["stored"] is False and "no labelled verdicts" in empty["reason"]
        for _ in range(3):
            await client.post("/v1/judge", json={**PAIR, "label": "A"}, headers=headers)
        few = (await client.post("/v1/thresholds/tune", json={"target_precision": 0.9, "min_count": 30},
                                 headers=headers)).json()
        assert few["stored"] is False and few["version"] is None
        assert "min_count=30" in few["reason"] and "current threshold stays" in few["reason"]
        assert (await client.get("/v1/thresholds", headers=headers)).json()["current"] is None


async def test_tune_that_fails_every_threshold_stores_review_everything(stub, tmp_path):
    server, script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    headers = S.auth("tenant-a")
    async with S.running_app(settings) as (_app, client):
        # the panel says A; the truth is mostly B. 30 labels: enough that a clean record could
        # have certified 0.9 (0.1 ** (1 / 30) > 0.9), so failing is evidence against every
        # threshold (fewer could never pass and store nothing: no evidence either way)
        for i in range(30):
            await client.post("/v1/judge", json={**PAIR, "label": "A" if i < 2 else "B"}, headers=headers)
        tuned = (await client.post("/v1/thresholds/tune", json={"target_precision": 0.9, "min_count": 5},
                                   headers=headers)).json()
        assert tuned["stored"] is True and tuned["review_everything"] is True and tuned["threshold"] is None
        current = (await client.get("/v1/thresholds", headers=headers)).json()["current"]
        assert current["review_everything"] is True and current["version"] == 1
        nxt = (await client.post("/v1/judge", json=PAIR, headers=headers)).json()
        assert nxt["route"] == "human_review" and "review everything" in nxt["threshold"]["reason"]


async def test_fuser_panel_fuses_with_the_fuser_model(stub, tmp_path):
    server, script = stub
    path = S.panel_yaml(tmp_path, server.url, fusion="fuser")
    path.write_text(path.read_text() + (
        f"fuser:\n  name: fuser\n  model: openai/fuser\n  backend: direct\n  api_base: {server.url}\n"
        f"  api_key_env: {S.PLANTED_ENV}\n  timeout_s: 3\n"
    ))
    script.set("fuser", "B", 77)
    settings = S.make_settings(tmp_path, [path], storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    async with S.running_app(settings) as (_app, client):
        r = await client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-a"))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["method"] == "fuser" and body["choice"] == "B" and body["confidence"] == pytest.approx(0.77)
        voted = (await client.post("/v1/judge", json={**PAIR, "method": "confidence_weighted"},
                                   headers=S.auth("tenant-a"))).json()
        assert voted["method"] == "confidence_weighted" and voted["choice"] == "A"
