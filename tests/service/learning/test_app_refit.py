"""Learned fusion from labelled traffic: too few labels -> stays on voting and says why; enough
informative labels -> a versioned model of the default refit method (``auto``, which chooses a
stacking candidate on these labels), and new verdicts stamped with it."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from jf_test_support import app_support as S
from jf_test_support.learning_support import informative

from judgefuse.fusion import StackedFusion
from judgefuse.fusion.auto import AutoFusion
from judgefuse.fusion.capabilities import method_params, restore_method
from judgefuse.judges.types import JudgeVote


def item(i: int) -> dict:
    truth = "A" if i % 2 == 0 else "B"
    return {"question": f"Which is better? [item {i} truth {truth}]", "answer_a": "one",
            "answer_b": "two", "id": f"it-{i}", "label": truth}


def sqlite_settings(stub, tmp_path, **extra):
    """Settings of a gateway on a SQLite file whose stub judges answer ``informative``ly."""
    server, script = stub
    script.by_question = informative
    return S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                           storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", min_labels_for_refit=50, **extra)


async def test_refit_with_too_few_labels_stays_on_voting_and_says_why(stub, tmp_path):
    settings = sqlite_settings(stub, tmp_path)
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
        assert body["version"] == 1 and body["active_method"] == "auto"  # the default
        assert "(auto: " in body["reason"], body["reason"]  # what auto chose, in the outcome
        assert body["metrics"]["stacked_brier"] <= body["metrics"]["baseline_brier"]
        assert body["n_labels"] == 60
        model_version = body["model_version"]
        assert re.fullmatch(r"[0-9a-f]{12}", model_version)

        models = (await client.get("/v1/fusion/models", headers=headers)).json()
        assert [m["version"] for m in models["history"]] == [1]
        served = restore_method(models["active_method"], models["history"][0]["params"])
        assert isinstance(served, AutoFusion) and isinstance(served.chosen_base, StackedFusion), served
        assert served.chosen_base.feature_names[0] == "j1:logodds"
        assert served.model_version == model_version

        new = (await client.post("/v1/judge", json={**item(100), "label": None, "id": None},
                                 headers=headers)).json()
        assert new["method"] == "auto" and new["model_version"] == model_version
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
        assert stored["method"] == "auto" and stored["model_version"] == model_version

        # a voting method can still be asked for explicitly
        voted = (await client.post("/v1/judge", json={**item(101), "label": None, "id": None,
                                                      "method": "majority"}, headers=headers)).json()
        assert voted["method"] == "majority" and voted["model_version"] is None

        # other tenants are untouched
        other = (await client.post("/v1/judge", json={**item(102), "label": None, "id": None},
                                   headers=S.auth("tenant-b"))).json()
        assert other["method"] == "majority"


async def test_background_refit_runs_every_n_labels(stub, tmp_path):
    settings = sqlite_settings(stub, tmp_path, refit_every_labels=60)
    headers = S.auth("tenant-a")
    async with S.running_app(settings) as (app, client):
        for start in (0, 30):
            await client.post("/v1/judge/batch", json={"items": [item(i) for i in range(start, start + 30)]},
                              headers=headers)
        await app.state.gateway.scheduler.idle()
        models = (await client.get("/v1/fusion/models", headers=headers)).json()
        assert [m["version"] for m in models["history"]] == [1]
        assert models["active_method"] == "auto"


RESTORE_ELSEWHERE = """
import json, sys
from judgefuse.fusion.capabilities import restore_method
from judgefuse.judges.types import JudgeVote
saved = json.load(open(sys.argv[1]))
model = restore_method(saved["method"], saved["params"])
votes = [JudgeVote.model_validate(v) for v in saved["votes"]]
verdict = model(votes)
print(json.dumps({"type": type(model).__name__, "model_version": model.model_version,
                  "choice": verdict.choice, "p_a": verdict.p_a, "confidence": verdict.confidence}))
"""


async def test_a_refit_saved_with_auto_serves_the_same_verdict_restored_in_a_fresh_process(stub, tmp_path):
    """The stored record is all a replica has: a new interpreter (no fitted object, nothing
    imported beforehand) restores the promoted ``auto`` model from the parameters the gateway
    stored and gives the served verdict's P(A) and version on the same votes."""
    settings = sqlite_settings(stub, tmp_path)
    headers = S.auth("tenant-a")
    async with S.running_app(settings) as (_app, client):
        batch = {"items": [item(i) for i in range(60)]}
        assert (await client.post("/v1/judge/batch", json=batch, headers=headers)).json()["n_ok"] == 60
        refit = (await client.post("/v1/fusion/refit", json={"panel": "main"}, headers=headers)).json()
        assert refit["status"] == "promoted" and refit["active_method"] == "auto", refit
        models = (await client.get("/v1/fusion/models", headers=headers)).json()
        served = (await client.post("/v1/judge", json={**item(100), "label": None, "id": None},
                                    headers=headers)).json()
    assert served["method"] == "auto" and served["model_version"] == refit["model_version"]
    fields = ("judge", "mode", "choice", "confidence", "p_a", "tie", "error")
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps({"method": models["active_method"], "params": models["history"][0]["params"],
                                 "votes": [{k: v[k] for k in fields} for v in served["votes"]]}))
    done = subprocess.run([sys.executable, "-c", RESTORE_ELSEWHERE, str(saved)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    again = json.loads(done.stdout)
    assert (again["type"], again["model_version"], again["choice"]) == (
        "AutoFusion", served["model_version"], served["choice"])
    assert again["p_a"] == pytest.approx(served["p_a"], abs=1e-9)
    assert again["confidence"] == pytest.approx(served["confidence"], abs=1e-9)


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
