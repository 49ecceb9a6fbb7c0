"""The model-assisted population estimates of /v1/calibration (docs/design.md, 'The review
loop'), on every storage backend: verdicts with varied fused confidences posted through
/v1/fuse, part of the review stratum and the audit sample labelled; the ``model_assisted``
block must equal the difference estimator computed here from the posted verdicts' own
confidences (every verdict, labelled or not), beside the labels-only estimates."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from jf_test_support import app_support as S
from jf_test_support.panel_support import EXT, PAIR, H

from judgefuse.calibration.model_assisted import AssistedStratum, brier_pseudo_values, difference_mean
from judgefuse.service.storage import ThresholdRecord


def _panel(tmp_path) -> object:
    path = tmp_path / "panel-mp.yaml"
    path.write_text(textwrap.dedent("""\
        name: mp
        fusion: mean_probability
        quorum: 2
        audit_rate: 0.3
        judges:
        """) + "".join(f"  - {{name: {j}, external: true}}\n" for j in EXT), encoding="utf-8")
    return path


async def test_model_assisted_block_is_the_difference_estimator_over_every_verdict(storage, tmp_path):
    await storage.put_threshold("tenant-a", "mp", ThresholdRecord(
        panel="mp", threshold=0.9, created_at=1.0, method="mean_probability", target_precision=0.9,
        delta=0.1, coverage=0.5, n_labels=100))
    settings = S.make_settings(tmp_path, [_panel(tmp_path)], review_seed=3)
    rng = np.random.default_rng(0)
    posted: list[tuple[float, str, bool]] = []  # (confidence, stratum, right)
    labelled: list[bool] = []
    async with S.running_app(settings, storage) as (_app, client):
        for i in range(160):
            confidences = rng.uniform(0.86, 1.0, 3) if i % 2 else rng.uniform(0.5, 0.95, 3)
            body = {**PAIR, "id": f"v{i}", "votes": [
                {"judge": j, "choice": "A", "confidence": float(c)} for j, c in zip(EXT, confidences, strict=True)]}
            r = await client.post("/v1/fuse", json=body, headers=H)
            assert r.status_code == 200, r.text
            out = r.json()
            assert out["choice"] == "A"
            right = bool(rng.random() < out["confidence"])
            stratum = out["review"]["stratum"]
            label = stratum == "audit" or (stratum == "review" and rng.random() < 0.5)
            if label:
                r = await client.post("/v1/feedback", json={"verdict_id": f"v{i}", "label": "A" if right else "B"},
                                      headers=H)
                assert r.status_code == 200, r.text
            posted.append((out["confidence"], stratum, right))
            labelled.append(label)
        cal = (await client.get("/v1/calibration", params={"panel": "mp"}, headers=H)).json()
    pop = next(k for k in cal["keys"] if k["key"] == "method:mean_probability:fused")["population"]
    assisted = pop["model_assisted"]
    c = np.array([p[0] for p in posted])
    z = np.array([p[2] for p in posted], dtype=float)
    lab = np.array(labelled)
    review = np.array([p[1] == "review" for p in posted])
    strata = [("review", review), ("auto@0.3", ~review)]
    assert 20 <= review.sum() <= 140 and lab[~review].sum() >= 5
    assert assisted["window_decided"] == 160 and assisted["ece"] is None

    def by_hand(y, f, which, brier=False):
        return difference_mean([AssistedStratum(
            name, int(m.sum()), float(f[m].sum()), y[m & lab], f[m & lab], np.ones(int((m & lab).sum())),
            brier_pseudo_values(c[m & lab].mean()) if brier else None) for name, m in which])

    for name, want in (("accuracy", by_hand(z, c, strata)),
                       ("brier", by_hand((c - z) ** 2, c * (1 - c), strata, brier=True)),
                       ("auto_accept_precision", by_hand(z, c, strata[1:]))):
        got = assisted[name]
        assert got["labels"] == want.labels
        assert (got["estimate"], got["lower"], got["upper"]) == pytest.approx(
            (want.estimate, want.lower, want.upper), abs=2e-3), name
        assert "difference estimator" in got["method"]
    # the labels-only estimates stay beside it, on the same labels
    assert pop["accuracy"]["labels"] == assisted["accuracy"]["labels"] == int(lab.sum())
    assert "Agresti-Coull" in pop["accuracy"]["method"]
    # a judge key has no prediction of its own verdicts in the counters
    judge = next(k for k in cal["keys"] if k["key"].startswith("judge:e1"))["population"]
    assert judge["model_assisted"] is None
