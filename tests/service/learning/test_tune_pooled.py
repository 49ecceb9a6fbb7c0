"""The tuner pools labels by inclusion probability when every stamp says how its label was routed
(docs/design.md, 'Tuning and monitoring on the population'; judgefuse/service/learning/
pooled_inputs.py): after a first threshold, the warm-up's reviewed labels and the audit labels
above it are one Clopper-Pearson sample; tuning another method than the one that routed falls
back to the stratified bound. Over HTTP on a SQLite file, votes posted to /v1/fuse."""

from __future__ import annotations

import pytest
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, UNANIMOUS, H, external_panel
from scipy.stats import beta

TUNE = {"panel": "ext", "target_precision": 0.85, "min_count": 30}


async def _post(client, prefix: str, n: int, votes) -> list[dict]:
    return [(await client.post("/v1/fuse", json={**PAIR, "id": f"{prefix}{i}", "votes": votes},
                               headers=H)).json() for i in range(n)]


async def _label(client, verdicts: list[dict], wrong) -> None:
    """Label every queued verdict (review or audit): A, except where ``wrong(i)``."""
    for i, v in enumerate(verdicts):
        if v["review"]["stratum"] in ("review", "audit"):
            label = "B" if wrong(i) else "A"
            r = await client.post("/v1/feedback", json={"verdict_id": v["id"], "label": label}, headers=H)
            assert r.status_code == 200, r.text


async def test_a_retune_pools_warm_up_and_audit_labels_and_another_method_falls_back(tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.25)], review_seed=3,
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    async with S.running_app(settings) as (_app, client):
        # warm-up, no threshold: everything reviewed; 60 unanimous (57 right), 30 split (half right)
        warm = await _post(client, "w", 60, UNANIMOUS)
        await _label(client, warm, lambda i: i % 20 == 0)
        await _label(client, await _post(client, "s", 30, SPLIT), lambda i: i % 2 == 0)
        first = (await client.post("/v1/thresholds/tune", json=TUNE, headers=H)).json()
        assert first["threshold"] == pytest.approx(1.0), first
        # routed at it: unanimous auto-accepted, a quarter audited; split reviewed
        routed = await _post(client, "u", 80, UNANIMOUS)
        audits = [v for v in routed if v["review"]["stratum"] == "audit"]
        assert all(v["route"] == "auto_accept" for v in routed) and 8 <= len(audits) <= 35
        await _label(client, routed, lambda i: False)
        await _label(client, await _post(client, "t", 30, SPLIT), lambda i: i % 2 == 0)

        second = (await client.post("/v1/thresholds/tune", json=TUNE, headers=H)).json()
        other = (await client.post("/v1/thresholds/tune", json={**TUNE, "method": "mean_probability"},
                                   headers=H)).json()
    assert "pooled by inclusion probability" in second["data"], second["data"]
    assert second["threshold"] == pytest.approx(1.0)
    # at tau = 1 the 60 warm-up and the audit labels are one Clopper-Pearson sample; below it
    # the period routed at 1 is left out (90 warm-up labels), so no candidate reaches 120
    # labels and the scan has one start, at all of delta
    n = 60 + len(audits)
    top, below = second["report"]["path"]
    assert top["n_accepted"] == n and below["n_accepted"] == 90
    assert top["lower_bound"] == pytest.approx(beta.ppf(0.1, n - 3, 3 + 1), abs=1e-9)
    # coverage: per stratum, as the stratified tuner estimates it (review: 60 of 120 labels
    # at 1.0 stand for 120 verdicts; the audit labels for the 80 auto-accepted)
    assert second["population"] == {"review": 120, "auto@0.25": 80}
    assert second["report"]["coverage"] == pytest.approx((120 * 60 / 120 + 80) / 200)
    # mean_probability did not route these verdicts: its confidences were never compared with
    # the threshold, so the stratified bound
    assert "weighted by review stratum" in other["data"] and "not pooled" in other["data"], other["data"]


def _routing(threshold, reason, same=True, inclusion=1.0):
    from judgefuse.service.learning.tuning_data import Routing

    return Routing(threshold, inclusion, reason, same)


@pytest.mark.parametrize(("routing", "confidence", "why"), [
    (_routing(None, None, inclusion=None), 0.9, "no review stamp"),
    (_routing(0.8, "audit", same=False, inclusion=0.2), 0.9, "another method's confidence"),
    (_routing(0.8, "audit", inclusion=0.2), 0.7, "other side of the threshold"),
    (_routing(0.8, "below_threshold"), 0.9, "other side of the threshold"),
    (_routing(0.8, "drift_alarm"), 0.85, "queued for 'drift_alarm'"),
    (_routing(None, "inline_label"), 0.9, "queued for 'inline_label'"),
])
def test_a_label_whose_routing_is_not_known_falls_back(routing, confidence, why) -> None:
    from judgefuse.service.learning.pooled_inputs import pooled_inputs

    ok = [_routing(None, "no_threshold"), _routing(0.8, "audit", inclusion=0.2)]
    got = pooled_inputs([0.95, 0.9, confidence], [True, True, True], [*ok, routing],
                        on_drift="review_everything")
    assert isinstance(got, str) and why in got
    assert "raises the threshold" in pooled_inputs([0.95], [True], ok[:1], on_drift="raise_threshold")


def test_reviewed_whatever_the_confidence_has_no_threshold() -> None:
    """A period with no threshold, one that reviews everything, another method's threshold:
    inclusion 1 at every confidence (NaN); below_threshold and audit keep their threshold."""
    from judgefuse.service.learning.pooled_inputs import PooledInputs, pooled_inputs

    routing = [_routing(None, "no_threshold"), _routing(None, "review_everything"),
               _routing(0.9, "method_mismatch", same=False), _routing(0.8, "below_threshold"),
               _routing(0.8, "audit", inclusion=0.2)]
    got = pooled_inputs([0.9, 0.6, 0.95, 0.7, 0.85], [True] * 5, routing, on_drift="alert_only")
    assert isinstance(got, PooledInputs)
    assert [str(t) for t in got.routed_at] == ["nan", "nan", "nan", "0.8", "0.8"]
