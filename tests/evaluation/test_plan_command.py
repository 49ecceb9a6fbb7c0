"""``judgefuse plan`` and the width plan behind it (judgefuse.calibration.width_plan)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from judgefuse.calibration.width_plan import audit_rate_for_width, plan_widths
from judgefuse.cli import main


def test_the_rate_gives_the_width_by_hand() -> None:
    # N = 7,000 auto-accepted verdicts at precision 0.9 (S = 0.3), width 0.05 (h = 0.025):
    # r = 1 / (1 + h^2 N / (z^2 S^2))
    z = 1.959963984540054
    expected = 1.0 / (1.0 + 0.025**2 * 7000 / (z * z * 0.09))
    assert audit_rate_for_width(0.05, 7000, 0.3) == pytest.approx(expected)
    # and it is the rate at which the stratified variance S^2 (1 - r) / (r N) gives that width
    r = audit_rate_for_width(0.05, 7000, 0.3)
    assert 2 * z * math.sqrt(0.09 * (1 - r) / (r * 7000)) == pytest.approx(0.05)
    # accuracy with the auto stratum half the traffic: the same as precision at twice the width
    assert audit_rate_for_width(0.05, 7000, 0.3, share=0.5) == pytest.approx(audit_rate_for_width(0.1, 7000, 0.3))
    assert audit_rate_for_width(0.05, 0, 0.3) == 0.0
    with pytest.raises(ValueError, match="width"):
        audit_rate_for_width(0.0, 7000, 0.3)


def test_a_simulated_window_at_the_planned_rate_has_about_that_width() -> None:
    """The plan's rate, drawn over windows of the planned size: the stratified precision
    interval's mean width is the target (a normal-approximation plan: within 10%)."""
    from judgefuse.calibration import CalibrationAccumulator
    from judgefuse.calibration.stratified import StratumData, precision_estimate

    acc = CalibrationAccumulator(fine_bins=100)
    rng = np.random.default_rng(3)
    n = 5000
    r = audit_rate_for_width(0.06, n, math.sqrt(0.9 * 0.1))
    widths = []
    for _ in range(100):
        z = (rng.uniform(size=n) < 0.9).astype(float)
        audited = rng.uniform(size=n) < r
        iv = precision_estimate(
            [StratumData("auto", n, acc.increments_many(np.full(int(audited.sum()), 0.95), z[audited]))],
            accumulator=acc,
        )
        widths.append(iv.upper - iv.lower)
    assert float(np.mean(widths)) == pytest.approx(0.06, rel=0.1)


def test_band_audits_need_fewer_labels_where_confidence_separates_the_errors() -> None:
    rng = np.random.default_rng(0)
    c = np.where(rng.uniform(size=4000) < 0.5, rng.uniform(0.99, 1.0, 4000), rng.uniform(0.7, 0.9, 4000))
    y = np.where(rng.uniform(size=4000) < 0.1, (rng.uniform(size=4000) < c).astype(float), np.nan)
    plan = plan_widths(c, y, review_per_day=500, auto_per_day=1000, width=0.04, days=7)
    assert plan.sd_active < plan.sd_uniform
    assert plan.rates["precision/active"] < plan.rates["precision/uniform"]
    assert plan.rates["accuracy/uniform"] < plan.rates["precision/uniform"]  # review is a census
    assert plan.labels_per_day("precision/uniform") == pytest.approx(plan.rates["precision/uniform"] * 1000)


def _export(path: Path, *, days: float = 2.0, n: int = 400) -> Path:
    """Lines shaped as ``judgefuse export`` writes them: 3/4 auto-accepted, a tenth audited."""
    rng = np.random.default_rng(1)
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            auto = i % 4 != 0
            confidence = float(rng.uniform(0.85, 1.0) if auto else rng.uniform(0.5, 0.8))
            audited = auto and i % 10 == 1
            label = None if not (audited or not auto) else ("A" if rng.uniform() < confidence else "B")
            meta = {
                "verdict_id": f"v{i}",
                "panel": "main",
                "created_at": 1_700_000_000 + i * days * 86400 / (n - 1),
                "route": "auto_accept" if auto else "human_review",
                "stratum": "audit" if audited else ("none" if auto else "review"),
                "fused": {"method": "majority", "choice": "A", "confidence": confidence, "p_a": confidence},
            }
            item = {
                "id": f"i{i}",
                "question": "q",
                "answer_a": "a",
                "answer_b": "b",
                "label": label,
                "metadata": {"judgefuse": meta},
            }
            out.write(
                json.dumps(
                    {
                        "item": item,
                        "votes": [{"judge": "j1", "mode": "recorded", "choice": "A", "confidence": confidence}],
                    }
                )
                + "\n"
            )
    return path


def test_plan_reads_an_export_and_prints_labels_a_day(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _export(tmp_path / "export.jsonl")
    assert main(["plan", str(path), "--width", "0.05", "--window", "7", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["traffic_days"] == pytest.approx(2.0)
    assert body["auto_per_day"] == pytest.approx(150.0) and body["review_per_day"] == pytest.approx(50.0)
    assert "audit labels" in body["precision_basis"]
    rate = body["rates"]["precision/uniform"]
    assert rate == pytest.approx(audit_rate_for_width(0.05, 150.0 * 7, body["sd_uniform"]))
    assert body["labels_per_day"]["precision/uniform"] == pytest.approx(rate * 150.0)
    assert main(["plan", str(path)]) == 0
    table = capsys.readouterr().out
    assert "precision  uniform" in table and "accuracy   active" in table


def test_plan_refuses_a_file_that_is_not_an_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    votes = Path(__file__).parent / "fixtures" / "ties_votes.jsonl"
    assert main(["plan", str(votes)]) == 2
    assert "judgefuse export" in capsys.readouterr().err
    assert main(["plan", str(_export(tmp_path / "e.jsonl")), "--panel", "other"]) == 2
    assert main(["plan", str(votes), "--width", "0"]) == 2


def test_plan_says_there_is_not_enough_traffic_rather_than_plan_from_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 30 verdicts, about 22 auto-accepted: under the 30 a plan needs
    assert main(["plan", str(_export(tmp_path / "few.jsonl", n=30))]) == 2
    err = capsys.readouterr().err
    assert "not enough traffic yet" in err and "auto-accepted verdict(s) of 30" in err
    # 400 verdicts within ten minutes: no rate per day from that (it had been taken as an hour's)
    assert main(["plan", str(_export(tmp_path / "burst.jsonl", days=10 / 1440))]) == 2
    assert "spanning at least 1 hour" in capsys.readouterr().err


def test_plan_leaves_unsolicited_labels_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _export(tmp_path / "export.jsonl")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for line in lines:  # every unaudited auto-accepted verdict labelled wrong, unsolicited
        meta = line["item"]["metadata"]["judgefuse"]
        if meta["stratum"] == "none":
            line["item"]["label"] = "B"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert main(["plan", str(path), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["precision_basis"] == "40 audit labels" and body["precision"] > 0.8
