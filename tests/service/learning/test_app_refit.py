"""Learned fusion from labelled traffic: too few labels -> stays on voting and says why; enough
informative labels -> a versioned stacked model, and new verdicts stamped with it."""

from __future__ import annotations

import re

import pytest
from jf_test_support import app_support as S
from jf_test_support.learning_support import informative

from judgefuse.fusion import StackedFusion
from judgefuse.fusion.capabilities import method_params, restore_method
from judgefuse.judges.types import JudgeVote


def item(i: int) -> dict:
    truth = "A" if i % 2 == 0 else "B"
    return {"question": f"Which is better? [item {i} truth {truth}]", "answer_a": "one",
            "answer_b": "two", "id": f"it-{i}", "label": truth}


async def test_refit_with_too_few_labels_stays_on_voting_and_says_why(stub, tmp_path):
    server, script = stub
    script.by_question = informative
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", min_labels_for_refit=50)
    headers = S.auth("tenant-a")
    async with S.running_app(settings) as (_app, client):
        for i in range(5):
            assert (await client.post("/v1/judge", json=item(i), headers=headers)).status_code == 200
        r = await client.post("/v1/fusion/refit", json={"panel": "main"}, headers=headers)
        assert r.status_code == 200
        body = r.json()
        assert body["status"] == "skipped" and body["active_method"] == "majority"
        assert "5 labelled verdicts" in body["reason"] and "at least 50" in body["reason"]
        assert body["version"] is None
        models = (await client.get("/v1/fusion/models", headers=headers)).json()
        assert models["history"] == [] and models["active_method"] == "majority"


async def test_refit_with_enough_labels_promotes_a_versioned_model_that_stamps_verdicts(storage, stub, tmp_path):
    server, script = stub
    script.by_question = informative
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)], min_labels_for_refit=50)
    headers = S.auth("tenant-a")
    async with S.running_app(settings, storage) as (_app, client):
        for start in (0, 30):
            batch = {"items": [item(i) for i in range(start, start + 30)]}
            r = await client.post("/v1/judge/batch", json=batch, headers=headers)
            assert r.status_code == 200 and r.json()["n_ok"] == 30, r.text
        # a threshold tuned for majority must not route stacked verdicts
        tuned = await client.post("/v1/thresholds/tune", json={"target_precision": 0.5, "min_count": 5},
                                  headers=headers)
        assert tuned.json()["method"] == "majority"

        r = await client.post("/v1/fusion/refit", json={"panel": "main"}, headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "promoted", body
        assert body["version"] == 1 and body["active_method"] == "offset_stacked"  # the default
        assert body["metrics"]["stacked_brier"] <= body["metrics"]["baseline_brier"]
        assert body["n_labels"] == 60
        model_version = body["model_version"]
        assert re.fullmatch(r"[0-9a-f]{12}", model_version)

        models = (await client.get("/v1/fusion/models", headers=headers)).json()
        assert [m["version"] for m in models["history"]] == [1]
        assert models["history"][0]["params"]["feature_names"][0] == "j1:logodds"

        new = (await client.post("/v1/judge", json={**item(100), "label": None, "id": None},
                                 headers=headers)).json()
        assert new["method"] == "offset_stacked" and new["model_version"] == model_version
        assert new["choice"] == "A"  # j1 (trusted) says the truth, A; j2/j3 are wrong on item 100
        # the model was promoted with a threshold tuned for it (at the target of the majority
        # threshold above), so its verdicts keep routing: no "retune" dead end
        assert body["threshold_version"] == tuned.json()["version"] + 1 and body["threshold"] is not None
        assert body["metrics"]["stacked_review_load"] <= body["metrics"]["baseline_review_load"]
        assert new["threshold"]["version"] == body["threshold_version"], new["threshold"]
        assert new["threshold"]["value"] == pytest.approx(body["threshold"])
        assert "retune" not in new["threshold"]["reason"]
        assert new["route"] == ("auto_accept" if new["confidence"] >= body["threshold"] else "human_review")
        stored = (await client.get(f"/v1/verdicts/{new['id']}", headers=headers)).json()
        assert stored["method"] == "offset_stacked" and stored["model_version"] == model_version

        # a voting method can still be asked for explicitly
        voted = (await client.post("/v1/judge", json={**item(101), "label": None, "id": None,
                                                      "method": "majority"}, headers=headers)).json()
        assert voted["method"] == "majority" and voted["model_version"] is None

        # other tenants are untouched
        other = (await client.post("/v1/judge", json={**item(102), "label": None, "id": None},
                                   headers=S.auth("tenant-b"))).json()
        assert other["method"] == "majority"


async def test_background_refit_runs_every_n_labels(stub, tmp_path):
    server, script = stub
    script.by_question = informative
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}",
                               min_labels_for_refit=50, refit_every_labels=60)
    headers = S.auth("tenant-a")
    async with S.running_app(settings) as (app, client):
        for start in (0, 30):
            await client.post("/v1/judge/batch", json={"items": [item(i) for i in range(start, start + 30)]},
                              headers=headers)
        await app.state.gateway.scheduler.idle()
        models = (await client.get("/v1/fusion/models", headers=headers)).json()
        assert [m["version"] for m in models["history"]] == [1]
        assert models["active_method"] == "offset_stacked"


def test_stacked_params_round_trip_reproduces_predictions():
    batches, labels = [], []
    for i in range(40):
        truth = "A" if i % 2 == 0 else "B"
        p1 = 0.8 if truth == "A" else 0.2
        p2 = 0.6 if i % 3 else 0.4
        batches.append([
            JudgeVote.from_p_a("a", "sc", p1, signals={"margin": float(i % 7)}),
            JudgeVote.from_p_a("b", "sc", p2),
        ])
        labels.append(truth)
    model = StackedFusion().fit(batches, labels)
    restored = restore_method("stacked", method_params(model))
    assert isinstance(restored, StackedFusion)
    assert restored.model_version == model.model_version
    assert restored.predict_p_a(batches) == pytest.approx(model.predict_p_a(batches), abs=1e-12)
