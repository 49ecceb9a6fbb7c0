"""A tune always ends with a threshold that routes the serving method (docs/design.md, 'Learning
keeps routing'; judgefuse/service/learning/routing_fallback.py): a learned model that serves
with no threshold and no labelled verdicts of its own gets one tuned on cross-fitted
confidences of the stored votes, or is retired for the voting method with its threshold."""

from __future__ import annotations

import pytest
from jf_test_support import app_support as S
from jf_test_support.learning_support import HEADERS, ITEM_RE, judge_range

from judgefuse.fusion import get_method
from judgefuse.fusion.capabilities import method_params
from judgefuse.service.storage import ModelRecord


def calm(model: str, text: str):
    """Every judge agrees, right on 11 items in 12, at confidence ~0.95 (issue 28's calm traffic)."""
    match = ITEM_RE.search(text)
    if match is None:
        return None
    i, truth = int(match.group(1)), match.group(2)
    wrong = "B" if truth == "A" else "A"
    return (wrong if i % 12 == 5 else truth, 93 + (i + len(model)) % 5)


async def _plant_unpaired_model(app, batches_labels) -> str:
    """A stacked model serving with no paired threshold, as a promotion on noise before any
    target used to leave it (fitted here on other votes: none of the stored verdicts is its)."""
    batches, labels = batches_labels
    fitted = get_method("stacked").fit(batches, labels)
    storage = app.state.gateway.storage
    await storage.put_model("tenant-a", "main", ModelRecord(
        panel="main", created_at=1.0, method="stacked", params=method_params(fitted)))
    return str(fitted.model_version)


def _votes_for_fit(n: int = 60):
    from judgefuse.judges.types import JudgeVote

    batches, labels = [], []
    for i in range(n):
        truth = "A" if i % 2 else "B"
        choice = truth if i % 7 else ("B" if truth == "A" else "A")
        batches.append([JudgeVote(judge=j, mode="sc", choice=choice, confidence=0.9,
                                  p_a=0.9 if choice == "A" else 0.1) for j in S.JUDGES])
        labels.append(truth)
    return batches, labels


async def test_a_tune_routes_an_unpaired_model_by_its_cross_fitted_threshold(stub, tmp_path):
    server, script = stub
    script.by_question = calm
    # refits fit stacked, which cannot beat majority here, so the tune's refit is kept and the
    # fallback is what routes (offset_stacked starts at mean_probability, whose ~0.95
    # confidences beat majority's 1.0 on the calm traffic's errors: it would be promoted; the
    # default auto has mean_probability among its candidates)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)], min_labels_for_refit=40,
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", refit_method="stacked")
    async with S.running_app(settings) as (app, client):
        await judge_range(client, 0, 80)
        version = await _plant_unpaired_model(app, _votes_for_fit())
        tuned = (await client.post("/v1/thresholds/tune", json={"target_precision": 0.8, "min_count": 10},
                                   headers=HEADERS)).json()
        # its own verdicts are unlabelled and the refit at the target is no better than majority
        assert tuned["stored"] is False and "no labelled verdicts" in tuned["reason"], tuned
        assert tuned["refit"]["status"] == "kept", tuned["refit"]
        fallback = tuned["fallback"]
        assert fallback["status"] == "tuned" and fallback["model_version"] == version, fallback
        after = await judge_range(client, 80, 120, label=False)
        accepted = [v for v in after if v["route"] == "auto_accept"]
        assert all(v["method"] == "stacked" for v in after)
        assert len(accepted) > len(after) / 2, [v["threshold"] for v in after[:3]]
        # a second tune has nothing to finish: the serving model routes
        again = (await client.post("/v1/thresholds/tune", json={"target_precision": 0.8, "min_count": 10},
                                   headers=HEADERS)).json()
        assert "fallback" not in again, again


async def test_a_tune_falls_back_to_the_voting_method_when_the_model_cannot_be_tuned(stub, tmp_path):
    server, script = stub
    script.by_question = calm
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)], min_labels_for_refit=40,
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    async with S.running_app(settings) as (app, client):
        # every label is A: stacked cannot be cross-fitted (no B to fold), majority can be tuned
        await judge_range(client, 0, 80, only_a=True)
        await _plant_unpaired_model(app, _votes_for_fit())
        tuned = (await client.post("/v1/thresholds/tune", json={"target_precision": 0.8, "min_count": 10},
                                   headers=HEADERS)).json()
        fallback = tuned["fallback"]
        assert fallback["status"] == "fell_back" and fallback["method"] == "majority", fallback
        assert fallback["voting"]["stored"] and fallback["threshold"] is not None
        models = (await client.get("/v1/fusion/models", headers=HEADERS)).json()
        assert models["active_method"] == "majority" and models["history"][-1]["params"]["retired"]
        after = await judge_range(client, 80, 120, only_a=True, label=False)
        assert all(v["method"] == "majority" for v in after)
        assert sum(v["route"] == "auto_accept" for v in after) > len(after) / 2


@pytest.mark.parametrize("target", [0.999])
async def test_when_nothing_qualifies_the_tune_says_so_and_keeps_the_model(stub, tmp_path, target):
    server, script = stub
    script.by_question = calm
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)], min_labels_for_refit=40,
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    async with S.running_app(settings) as (app, client):
        await judge_range(client, 0, 80)
        version = await _plant_unpaired_model(app, _votes_for_fit())
        tuned = (await client.post("/v1/thresholds/tune", json={"target_precision": target, "min_count": 10},
                                   headers=HEADERS)).json()
        assert tuned["fallback"]["status"] == "none", tuned["fallback"]
        models = (await client.get("/v1/fusion/models", headers=HEADERS)).json()
        assert models["model_version"] == version
