"""GET /v1/panels/{panel}/winrate over HTTP on every storage backend: verdicts whose items name
two systems, a panel biased toward X, review and audit labels (and unsolicited ones that must
stay out); the three estimates must equal the stratified computation done here from the posted
verdicts, and bad requests are typed 422s."""

from __future__ import annotations

import numpy as np
import pytest
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, UNANIMOUS, H, external_panel, put_threshold, votes

from judgefuse.calibration.model_assisted import AssistedStratum, difference_mean


async def test_win_rate_is_corrected_per_stratum_by_the_labels(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.5)], review_seed=4)
    await put_threshold(storage)
    rng = np.random.default_rng(1)
    rows = []  # (stratum, judges' outcome for X, label outcome for X or None)
    unsolicited = 0
    async with S.running_app(settings, storage) as (_app, client):
        for i in range(90):
            x_is_a = bool(i % 2)
            x_wins = bool(rng.random() < 0.5)
            winner = "A" if x_wins == x_is_a else "B"
            x_letter = "A" if x_is_a else "B"
            # biased toward X: unanimous for X when X wins, else a 2-1 split (often for X)
            if x_wins:
                ballot = UNANIMOUS if x_letter == "A" else votes("B", "B", "B")
            else:
                other = "B" if x_letter == "A" else "A"
                ballot = votes(x_letter, x_letter, other) if rng.random() < 0.6 else votes(other, other, x_letter)
            meta = {"system_a": "X" if x_is_a else "Y", "system_b": "Y" if x_is_a else "X"}
            out = (await client.post("/v1/fuse", json={**PAIR, "id": f"w{i}", "votes": ballot, "metadata": meta},
                                     headers=H)).json()
            judged = 1.0 if (out["choice"] == "A") == x_is_a else 0.0
            stratum = out["review"]["stratum"]
            label = None
            if stratum == "audit" or (stratum == "review" and i % 3) or (stratum == "none" and i % 10 == 0):
                label = winner
                r = await client.post("/v1/feedback", json={"verdict_id": f"w{i}", "label": winner}, headers=H)
                assert r.status_code == 200, r.text
                unsolicited += stratum == "none"
            key = "review" if stratum == "review" else "auto@0.5"
            y = None if label is None or stratum == "none" else (1.0 if x_wins else 0.0)
            rows.append((key, judged, y))
        # another pair of systems and an item without metadata: not counted
        await client.post("/v1/fuse", json={**PAIR, "id": "other", "votes": SPLIT,
                                            "metadata": {"system_a": "X", "system_b": "Z"}}, headers=H)
        await client.post("/v1/fuse", json={**PAIR, "id": "bare", "votes": SPLIT}, headers=H)
        r = await client.get("/v1/panels/ext/winrate", params={"x": "X", "y": "Y"}, headers=H)
        assert r.status_code == 200, r.text
        got = r.json()
        swapped = (await client.get("/v1/panels/ext/winrate", params={"x": "Y", "y": "X"}, headers=H)).json()
        bad = {
            "same": await client.get("/v1/panels/ext/winrate", params={"x": "X", "y": "X"}, headers=H),
            "panel": await client.get("/v1/panels/nope/winrate", params={"x": "X", "y": "Y"}, headers=H),
            "level": await client.get("/v1/panels/ext/winrate", params={"x": "X", "y": "Y", "level": 2},
                                      headers=H),
            "missing": await client.get("/v1/panels/ext/winrate", params={"x": "X"}, headers=H),
        }
        anonymous = await client.get("/v1/panels/ext/winrate", params={"x": "X", "y": "Y"})
    assert got["n_verdicts"] == 90 and got["unsolicited_labels"] == unsolicited > 0
    strata = []
    for key in ("auto@0.5", "review"):
        f = np.array([j for k, j, _ in rows if k == key])
        labelled = [(j, y) for k, j, y in rows if k == key and y is not None]
        strata.append(AssistedStratum(key, f.size, float(f.sum()), np.array([y for _, y in labelled]),
                                      np.array([j for j, _ in labelled]), np.ones(len(labelled))))
    assert got["labelled"] == {s.name: s.labels for s in strata}
    assert got["represented"] == {s.name: s.population for s in strata}
    for name, want in (("corrected", difference_mean(strata)), ("labels_only", difference_mean(strata, lam=0.0))):
        assert got[name]["labels"] == want.labels == got["n_labels"]
        assert (got[name]["estimate"], got[name]["lower"], got[name]["upper"]) == pytest.approx(
            (want.estimate, want.lower, want.upper), abs=1e-9)
    judge_only = np.mean([j for _, j, _ in rows])
    assert got["judge_only"]["estimate"] == pytest.approx(judge_only)
    # the judges favour X; the labels pull the corrected estimate below the judge-only one
    assert got["corrected"]["estimate"] < got["judge_only"]["estimate"]
    assert got["corrected"]["lower"] <= got["corrected"]["estimate"] <= got["corrected"]["upper"]
    # Y over X is one minus X over Y
    assert swapped["corrected"]["estimate"] == pytest.approx(1 - got["corrected"]["estimate"])
    assert swapped["judge_only"]["estimate"] == pytest.approx(1 - judge_only)
    for case, response in bad.items():
        assert response.status_code == 422, (case, response.text)
    assert [f["field"] for f in bad["same"].json()["fields"]] == ["query.y"]
    assert [f["field"] for f in bad["panel"].json()["fields"]] == ["path.panel"]
    assert anonymous.status_code == 401
