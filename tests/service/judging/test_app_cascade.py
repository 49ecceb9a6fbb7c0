"""Cascade panels served by ``POST /v1/judge``: a stage asks only its own judges (counted at the
stub), accepts when its confidence clears the threshold from the panel YAML, else escalates;
after the last stage human review, or the full panel with ``cascade_fallback: panel``."""

from __future__ import annotations

import pytest
from jf_test_support import app_support as S
from jf_test_support.panel_support import cascade_yaml
from prometheus_client.parser import text_string_to_metric_families

PAIR = {"question": "Which is right?", "answer_a": "4", "answer_b": "5"}
HEADERS = S.auth("tenant-a")




def asked(server) -> list[str]:
    """The judges the stub was asked, in order (wire model = judge name)."""
    return [r.body["model"] for r in server.requests]


def metric(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    raise AssertionError(f"{name}{labels} not in /metrics")


async def test_confident_first_stage_uses_one_call_and_is_auto_accepted(stub, tmp_path):
    server, script = stub
    script.set("j1", "A", 95)
    script.set("j2", "B", 95)
    script.set("j3", "B", 95)
    settings = S.make_settings(tmp_path, [cascade_yaml(tmp_path, server.url)])
    async with S.running_app(settings) as (_app, client):
        r = await client.post("/v1/judge", json=PAIR, headers=HEADERS)
        assert r.status_code == 200, r.text
        body = r.json()
        assert asked(server) == ["j1"]
        assert body["choice"] == "A" and body["confidence"] == pytest.approx(0.95)
        assert body["route"] == "auto_accept"
        assert body["method"] == "cascade" and body["model_version"] == "cascade:1/3:j1"
        assert body["cascade"] == {"stage": 1, "name": "j1", "accepted": True, "stages": 3,
                                   "stages_consulted": 1, "fallback": "review", "stage_threshold": 0.9}
        assert [v["judge"] for v in body["votes"]] == ["j1"]
        assert body["threshold"]["value"] == 0.9 and body["threshold"]["method"] == "cascade"
        assert "stage 1/3 (j1) accepted" in body["threshold"]["reason"]
        assert body["cost"]["calls"] == 1
        assert body["cost"]["prompt_tokens"] == body["votes"][0]["prompt_tokens"] > 0
        assert body["degraded"] is False

        stored = (await client.get(f"/v1/verdicts/{body['id']}", headers=HEADERS)).json()
        assert stored["route"] == "auto_accept"
        assert stored["cascade"]["stage"] == 1 and stored["cascade"]["stages_consulted"] == 1
        assert stored["cascade"]["stages"] == 3 and stored["cost"] == body["cost"]


async def test_uncertain_items_escalate_stage_by_stage(stub, tmp_path):
    server, script = stub
    script.set("j1", "A", 60)
    script.set("j2", "B", 97)
    script.set("j3", "A", 99)
    settings = S.make_settings(tmp_path, [cascade_yaml(tmp_path, server.url)])
    async with S.running_app(settings) as (app, client):
        second = (await client.post("/v1/judge", json=PAIR, headers=HEADERS)).json()
        assert asked(server) == ["j1", "j2"]
        assert second["route"] == "auto_accept" and second["choice"] == "B"
        assert second["cascade"]["stage"] == 2 and second["cascade"]["name"] == "j2"
        assert second["cascade"]["stages_consulted"] == 2
        assert [v["judge"] for v in second["votes"]] == ["j1", "j2"]
        assert second["cost"]["calls"] == 2
        assert any("stage 1/3 (j1) confidence 0.6 below threshold 0.9: escalated" in n for n in second["notes"])

        server.requests.clear()
        script.set("j2", "B", 70)
        third = (await client.post("/v1/judge", json=PAIR, headers=HEADERS)).json()
        assert asked(server) == ["j1", "j2", "j3"]
        assert third["route"] == "auto_accept" and third["cascade"]["stage"] == 3
        assert third["cost"]["calls"] == 3

        text = (await client.get("/metrics", headers=S.admin())).text
        assert metric(text, "judgefuse_cascade_decisions_total", panel="casc", stage="2:j2") == 1
        assert metric(text, "judgefuse_cascade_decisions_total", panel="casc", stage="3:j3") == 1
        assert metric(text, "judgefuse_verdicts_total", tenant="tenant-a", panel="casc",
                      method="cascade", route="auto_accept") == 2
        assert app.state.metrics.cascade_counts["casc"] == {"2:j2": 1, "3:j3": 1}


async def test_every_stage_uncertain_goes_to_human_review(stub, tmp_path):
    server, script = stub
    script.set("j1", "A", 60)
    script.set("j2", "B", 70)
    script.set("j3", "B", 80)
    settings = S.make_settings(tmp_path, [cascade_yaml(tmp_path, server.url)])
    async with S.running_app(settings) as (_app, client):
        body = (await client.post("/v1/judge", json=PAIR, headers=HEADERS)).json()
        assert asked(server) == ["j1", "j2", "j3"]
        assert body["route"] == "human_review"
        assert body["choice"] == "B" and body["confidence"] == pytest.approx(0.8)  # stage 3's suggestion
        assert body["model_version"] == "cascade:review"
        assert body["cascade"] == {"stage": None, "name": None, "accepted": False, "stages": 3,
                                   "stages_consulted": 3, "fallback": "review", "stage_threshold": None}
        assert body["threshold"]["value"] is None and "none of the 3 stage(s) accepted" in body["threshold"]["reason"]
        assert body["cost"]["calls"] == 3 and len(body["votes"]) == 3

        stored = (await client.get(f"/v1/verdicts/{body['id']}", headers=HEADERS)).json()
        assert stored["cascade"]["stage"] is None and stored["cascade"]["stages_consulted"] == 3
        assert stored["route"] == "human_review"

        dash = await client.get("/console/calibration", headers=HEADERS)
        assert dash.status_code == 200
        assert 'class="cascade"' in dash.text and "per cascade stage (panel file)" in dash.text


async def test_fallback_panel_reuses_votes_and_decides(stub, tmp_path):
    server, script = stub
    script.set("j1", "A", 60)
    script.set("j2", "A", 70)
    script.set("j3", "B", 80)
    settings = S.make_settings(tmp_path, [cascade_yaml(tmp_path, server.url, fallback="panel")])
    async with S.running_app(settings) as (_app, client):
        body = (await client.post("/v1/judge", json=PAIR, headers=HEADERS)).json()
        assert asked(server) == ["j1", "j2", "j3"]  # the panel stage asks nobody again
        assert body["route"] == "auto_accept"
        assert body["choice"] == "A" and body["confidence"] == pytest.approx(2 / 3)  # majority
        assert body["cascade"]["stage"] == 4 and body["cascade"]["name"] == "panel"
        assert body["cascade"]["fallback"] == "panel" and body["cascade"]["stages"] == 4
        assert body["cost"]["calls"] == 3
        stored = (await client.get(f"/v1/verdicts/{body['id']}", headers=HEADERS)).json()
        assert stored["cascade"]["stage"] == 4 and stored["cascade"]["fallback"] == "panel"


async def test_fallback_panel_below_its_threshold_goes_to_review(stub, tmp_path):
    server, script = stub
    script.set("j1", "A", 60)
    script.set("j2", "A", 70)
    script.set("j3", "B", 80)
    path = cascade_yaml(tmp_path, server.url, fallback="panel", panel_threshold=0.9)
    settings = S.make_settings(tmp_path, [path])
    async with S.running_app(settings) as (_app, client):
        body = (await client.post("/v1/judge", json=PAIR, headers=HEADERS)).json()
        assert body["route"] == "human_review" and body["cascade"]["stage"] is None
        assert body["cascade"]["stages_consulted"] == 4
        assert "(the full panel included)" in body["threshold"]["reason"]


async def test_a_failed_or_slow_stage_escalates_within_the_panel_deadline(stub, tmp_path):
    server, script = stub
    script.set("j1", action=S.stub_module.Status(500, "upstream exploded"))
    script.set("j2", action=S.stub_module.Hang(30))
    script.set("j3", "B", 95)
    path = cascade_yaml(tmp_path, server.url, timeouts={"j2": 0.3})
    settings = S.make_settings(tmp_path, [path])
    async with S.running_app(settings) as (_app, client):
        body = (await client.post("/v1/judge", json=PAIR, headers=HEADERS)).json()
        assert asked(server) == ["j1", "j2", "j3"]
        assert body["route"] == "auto_accept" and body["cascade"]["stage"] == 3
        assert body["degraded"] is True
        assert {f["judge"] for f in body["failed_judges"]} == {"j1", "j2"}


async def test_the_panel_deadline_covers_the_whole_walk(stub, tmp_path):
    server, script = stub
    script.set("j1", "A", 60, action=S.stub_module.Reply(texts=S.sc_text("A", 60), delay_s=0.5))
    script.set("j2", action=S.stub_module.Hang(30))
    script.set("j3", "B", 95)
    path = cascade_yaml(tmp_path, server.url, deadline_s=0.8)
    settings = S.make_settings(tmp_path, [path])
    async with S.running_app(settings) as (_app, client):
        r = await client.post("/v1/judge", json=PAIR, headers=HEADERS)
        body = r.json()
        assert r.status_code == 200, r.text
        # j2 is cut at the panel deadline; j3 is given no time at all
        reasons = {f["judge"]: f["reason"] for f in body["failed_judges"]}
        assert set(reasons) == {"j2", "j3"}
        assert all("deadline exceeded" in reason for reason in reasons.values())
        # review; the suggestion is the last stage's verdict (none: j3 gave no vote)
        assert body["route"] == "human_review" and body["choice"] is None
        assert [v["judge"] for v in body["votes"]] == ["j1", "j2", "j3"] and body["votes"][0]["choice"] == "A"
        assert body["timings"]["total_s"] < 2.0


async def test_no_usable_vote_anywhere_is_quorum_lost(stub, tmp_path):
    server, script = stub
    for j in S.JUDGES:
        script.set(j, action=S.stub_module.Status(500, "down"))
    settings = S.make_settings(tmp_path, [cascade_yaml(tmp_path, server.url)])
    async with S.running_app(settings) as (_app, client):
        r = await client.post("/v1/judge", json=PAIR, headers=HEADERS)
        assert r.status_code == 503
        assert [f["judge"] for f in r.json()["failed_judges"]] == ["j1", "j2", "j3"]
        text = (await client.get("/metrics", headers=S.admin())).text
        assert metric(text, "judgefuse_quorum_lost_total", panel="casc") == 1
        assert metric(text, "judgefuse_judge_calls_total", panel="casc", judge="j3") == 1


async def test_a_request_naming_a_method_bypasses_the_cascade(stub, tmp_path):
    server, script = stub
    script.set("j1", "A", 95)
    script.set("j2", "B", 90)
    script.set("j3", "B", 90)
    settings = S.make_settings(tmp_path, [cascade_yaml(tmp_path, server.url)])
    async with S.running_app(settings) as (_app, client):
        body = (await client.post("/v1/judge", json={**PAIR, "method": "majority"}, headers=HEADERS)).json()
        assert sorted(asked(server)) == ["j1", "j2", "j3"]
        assert body["method"] == "majority" and body["cascade"] is None and body["choice"] == "B"
        assert body["route"] == "human_review"  # no stored threshold for this panel
        assert body["cost"]["calls"] == 3


async def test_batch_on_a_cascade_panel(stub, tmp_path):
    server, script = stub
    script.by_question = lambda model, text: ("A", 95) if "QQ-EASY" in text else ("A", 60)
    settings = S.make_settings(tmp_path, [cascade_yaml(tmp_path, server.url)])
    async with S.running_app(settings) as (_app, client):
        r = await client.post("/v1/judge/batch", headers=HEADERS, json={"items": [
            {**PAIR, "question": "QQ-EASY one"}, {**PAIR, "question": "no idea"}]})
        body = r.json()
        assert r.status_code == 200, r.text
        first, second = (res["verdict"] for res in body["results"])
        assert first["cascade"]["stage"] == 1 and first["cost"]["calls"] == 1
        assert second["cascade"]["stage"] is None and second["cost"]["calls"] == 3
        assert body["cost"]["calls"] == 4 == len(server.requests)


async def test_tune_on_a_cascade_panel_says_thresholds_come_from_the_yaml(stub, tmp_path):
    server, _script = stub
    settings = S.make_settings(tmp_path, [cascade_yaml(tmp_path, server.url)])
    async with S.running_app(settings) as (_app, client):
        r = await client.post("/v1/thresholds/tune", json={"target_precision": 0.9}, headers=HEADERS)
        assert r.status_code == 422
        assert "judgefuse tune --cascade" in r.text
        # a voting method may still be tuned (for requests that bypass the cascade);
        # cascade verdicts (a subset of the votes) are not used for it
        await client.post("/v1/judge", json={**PAIR, "label": "A"}, headers=HEADERS)
        voted = await client.post("/v1/thresholds/tune", json={"target_precision": 0.9, "method": "majority"},
                                  headers=HEADERS)
        assert voted.status_code == 200, voted.text
        assert voted.json()["n_labels"] == 0 and voted.json()["stored"] is False


async def test_a_stage_method_that_needs_fitting_fails_startup(stub, tmp_path):
    server, _script = stub
    path = cascade_yaml(tmp_path, server.url)
    path.write_text(path.read_text().replace("  - {judges: [j3], threshold: 0.9, method: majority}",
                                             "  - {judges: [j2, j3], threshold: 0.9, method: stacked}"))
    settings = S.make_settings(tmp_path, [path])
    with pytest.raises(ValueError, match="not a voting method"):
        async with S.running_app(settings):
            pass
