"""``audit_sampling: active`` over HTTP (issue 44; a SQLite file, no mocks): with bands planned
from the panel's stored auto-accepted verdicts, each posted verdict is stamped with its
confidence band's rate (the plan recomputed here with ``plan_audit_bands``), the review queue
hands out exactly the verdicts drawn for audit, and the precision monitor counts only the
audits drawn below the floor (a uniform sample), not the ``audit_band`` ones."""

from __future__ import annotations

import math
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from jf_test_support import app_support as S
from jf_test_support.panel_support import EXT, PAIR, H

from judgefuse.calibration.audit_bands import plan_audit_bands
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote
from judgefuse.service.review.active_audits import FLOOR_SHARE
from judgefuse.service.storage import ReviewStamp, SQLiteStorage, ThresholdRecord, VerdictRecord

RATE = 0.3


def _panel(tmp_path: Path, sampling: str) -> Path:
    judges = "".join(f"  - {{name: {j}, external: true}}\n" for j in EXT)
    path = tmp_path / f"panel-{sampling}.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: ext
        fusion: mean_probability
        quorum: 2
        audit_rate: {RATE}
        audit_sampling: {sampling}
        judges:
        """)
        + judges,
        encoding="utf-8",
    )
    return path


def _reference(i: int, confidence: float, correct: bool | None, now: float) -> VerdictRecord:
    """A stored auto-accepted verdict the bands are planned from (audited when ``correct`` is given)."""
    votes = [JudgeVote(judge=j, mode="recorded", choice="A", confidence=confidence) for j in EXT]
    verdict = Verdict(
        choice="A",
        confidence=confidence,
        p_a=confidence,
        method="mean_probability",
        votes=votes,
        n_valid=3,
        n_invalid=0,
        id=f"r{i}",
        route="auto_accept",
        threshold=0.6,
    )
    audited = correct is not None
    stamp = ReviewStamp(
        stratum="audit" if audited else "none",
        inclusion_probability=RATE if audited else 0.0,
        reason="audit" if audited else "auto_accept",
        audit_rate=RATE,
        draw=0.1 if audited else 0.9,
        rank=0.5,
        route="auto_accept",
    )
    return VerdictRecord(
        id=f"r{i}",
        tenant="tenant-a",
        panel="ext",
        created_at=now - 3600 + i,
        verdict=verdict,
        review=stamp,
        threshold_version=1,
    )


async def test_active_audits_stamp_band_rates_and_the_queue_hands_out_the_drawn(tmp_path: Path) -> None:
    db = SQLiteStorage(tmp_path / "db.sqlite3")
    await db.open()
    await db.put_threshold(
        "tenant-a",
        "ext",
        ThresholdRecord(
            panel="ext",
            threshold=0.6,
            created_at=1.0,
            method="mean_probability",
            target_precision=0.7,
            delta=0.1,
            coverage=0.9,
            n_labels=100,
        ),
    )
    rng = np.random.default_rng(2)
    now = time.time()
    ref_c, ref_y = [], []
    for i in range(200):  # half near-certain, half uncertain; a tenth audited and labelled
        c = float(rng.uniform(0.97, 1.0) if i % 2 else rng.uniform(0.6, 0.8))
        right = bool(rng.uniform() < c) if i % 10 == 3 else None
        await db.save_verdict("tenant-a", _reference(i, c, right, now))
        if right is not None:
            await db.set_label("tenant-a", f"r{i}", "A" if right else "B", lambda _r, _l: {})
        ref_c.append(c)
        ref_y.append(math.nan if right is None else float(right))
    want = plan_audit_bands(np.array(ref_c), np.array(ref_y), mean_rate=RATE, bands=3, floor_share=FLOOR_SHARE)
    floor = min((*want.rates, FLOOR_SHARE * RATE))
    assert len(set(want.rates)) > 1, want  # the bands differ, or this test proves nothing

    settings = S.make_settings(tmp_path, [_panel(tmp_path, "active")], review={"audit_plan_ttl_s": 3600.0})
    stamps: dict[str, dict] = {}
    handed: dict[str, dict] = {}
    try:
        async with S.running_app(settings, storage=db) as (_app, client):
            for i in range(240):
                c = float(rng.uniform(0.62, 1.0))
                votes = [{"judge": j, "choice": "A", "confidence": c} for j in EXT]
                r = await client.post("/v1/fuse", json={**PAIR, "id": f"v{i}", "votes": votes}, headers=H)
                assert r.status_code == 200, r.text
                out = r.json()
                assert out["route"] == "auto_accept", out
                stamps[out["id"]] = {"confidence": out["confidence"], **out["review"]}
            for _ in range(100):  # lease everything queued, label it (a label frees the lease)
                leased = (
                    await client.get("/v1/review/next", params={"panel": "ext", "n": 5, "annotator": "ann"}, headers=H)
                ).json()["items"]
                if not leased:
                    break
                for item in leased:
                    handed[item["verdict_id"]] = item
                    label = "A" if int(item["verdict_id"][1:]) % 5 else "B"
                    r = await client.post(
                        "/v1/feedback", json={"verdict_id": item["verdict_id"], "label": label}, headers=H
                    )
                    assert r.status_code == 200, r.text
            monitor = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
            tuned = (
                await client.post("/v1/thresholds/tune", json={"panel": "ext", "target_precision": 0.7}, headers=H)
            ).json()
    finally:
        await db.close()

    for vid, stamp in stamps.items():  # every stamp carries its band's rate
        rate = want.rate(stamp["confidence"])
        assert stamp["audit_rate"] == pytest.approx(rate), (vid, stamp)
        if stamp["stratum"] == "audit":
            assert stamp["inclusion_probability"] == pytest.approx(rate)
            assert stamp["reason"] in ("audit", "audit_band")
        else:
            assert stamp["stratum"] == "none" and stamp["inclusion_probability"] == 0.0
    drawn = {vid for vid, s in stamps.items() if s["stratum"] == "audit"}
    assert set(handed) == drawn and drawn  # the queue hands out exactly the drawn audits
    assert {handed[v]["reason"] for v in drawn} == {stamps[v]["reason"] for v in drawn} == {"audit", "audit_band"}
    rates = {round(want.rate(s["confidence"]), 4) for s in stamps.values()}
    assert len(rates) > 1  # verdicts landed in bands of different rates
    # the drawn share follows the rates: expected count and a generous 4-sigma band
    expected = sum(want.rate(s["confidence"]) for s in stamps.values())
    assert abs(len(drawn) - expected) < 4 * math.sqrt(expected)
    assert floor <= min(want.rates)
    # the monitor counts the uniform part only: audits drawn below the floor, beside the stored
    # reference audits (ordinary ones, folded in when the monitor was rebuilt at start)
    uniform = sum(1 for v in drawn if stamps[v]["reason"] == "audit")
    assert 0 < uniform < len(drawn)
    assert monitor["precision"]["labels"] == uniform + sum(1 for y in ref_y if not math.isnan(y)), monitor
    # a band audit's label is no uniform sample above the threshold: the tune is not pooled
    assert "not pooled: a label was queued for 'audit_band'" in tuned["data"], tuned["data"]
