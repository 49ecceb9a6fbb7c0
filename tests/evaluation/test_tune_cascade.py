"""``judgefuse tune --cascade`` and the cascade's guarantee on Trust-or-Escalate splits."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import pytest

from judgefuse.calibration.thresholds import tune_threshold
from judgefuse.evaluation import tune_command
from judgefuse.evaluation.loaders import load
from judgefuse.fusion.cascade import Cascade, CascadeStage
from judgefuse.fusion.cascade_tuning import evaluate_cascade, tune_cascade

ORDER = ("gpt-3.5-turbo", "mistral-7b-instruct", "gpt-4-turbo")
SPEC = ",".join(ORDER)


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="judgefuse")
    tune_command.add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


@pytest.fixture(scope="module")
def toe_dir(shared_data: Path) -> Path:
    return shared_data / "trust_or_escalate"


@pytest.fixture(scope="module")
def toe(toe_dir: Path):
    return load(toe_dir)


def test_cli_prints_stages_coverage_and_calls(toe_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["tune", "--cascade", SPEC, "--target", "0.9", "--delta", "0.1", str(toe_dir)]) == 0
    out = capsys.readouterr().out
    for name in ORDER:
        assert name in out
    assert "threshold" in out and "coverage" in out and "calls/item" in out
    # at 0.9 no judge's top 30 on ToE certifies: nothing is accepted, every judge is consulted
    assert "coverage 0.0%" in out and "calls/item 3.000" in out


def test_cli_json_first_stage_is_the_plain_threshold(toe, toe_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "cascade.json"
    argv = ["tune", "--cascade", SPEC, "--target", "0.8", "--delta", "0.1", "--fallback", "panel", "--json", str(out), str(toe_dir)]
    assert _run(argv) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["kind"] == "cascade" and data["fallback"] == "panel"
    assert [s["name"] for s in data["stages"]] == [*ORDER, "panel"]
    # stage 1 sees every item: its threshold is tune_threshold on gpt-3.5-turbo alone, at the
    # default (Bonferroni) share of delta: 0.1 over 4 stages (3 judges + the fallback panel)
    assert data["delta_split"] == "bonferroni" and data["guarantee"].startswith("whole cascade")
    assert [s["delta"] for s in data["stages"]] == pytest.approx([0.1 / 4] * 4)
    assert "whole cascade" in " ".join(printed.split())
    j = [v.judge for v in toe[0].votes].index("gpt-3.5-turbo")
    c = np.array([it.votes[j].confidence for it in toe])
    z = np.array([it.votes[j].choice == it.item.label for it in toe])
    direct = tune_threshold(c, z, target_precision=0.8, delta=0.1 / 4)
    first = data["stages"][0]
    assert first["threshold"] == pytest.approx(direct.threshold) and first["n_reached"] == 500
    assert first["n_accepted"] == direct.n_accepted
    # later stages see only what the earlier ones escalated
    assert data["stages"][1]["n_reached"] == 500 - direct.n_accepted
    cal = data["calibration"]
    assert cal["coverage"] == pytest.approx(sum(s["n_accepted"] for s in data["stages"]) / 500)
    assert 1.0 <= cal["calls_per_item"] <= 3.0
    assert "panel (" in printed


def test_cli_refuses_unknown_judges(toe_dir: Path) -> None:
    with pytest.raises(tune_command.TuneError, match="unknown judge"):
        _run(["tune", "--cascade", "gpt-3.5-turbo,nobody", str(toe_dir)])


def _failure_rate(toe, *, target: float, delta: float, delta_split: str | None, splits: int = 50, seed: int = 0):
    rng = random.Random(seed)
    cascade = Cascade(tuple(CascadeStage((name,)) for name in ORDER))
    failures, coverages, calls = 0, [], []
    for _ in range(splits):
        index = list(range(len(toe)))
        rng.shuffle(index)
        cal = [toe[i] for i in index[: len(toe) // 2]]
        test = [toe[i] for i in index[len(toe) // 2 :]]
        split = {} if delta_split is None else {"delta_split": delta_split}
        report = tune_cascade(cal, cascade, target_precision=target, delta=delta, **split)  # type: ignore[arg-type]
        ev = evaluate_cascade(test, report.cascade)
        failures += ev.coverage > 0 and ev.accuracy_accepted < target
        coverages.append(ev.coverage)
        calls.append(ev.calls_per_item)
    return failures / splits, float(np.mean(coverages)), float(np.mean(calls))


@pytest.mark.slow
def test_guarantee_holds_on_held_out_splits(toe) -> None:
    """50 random 50/50 splits: held-out precision of the accepted set below target at most
    delta (+ slack for held-out noise) of the time with the DEFAULT split (Bonferroni: a
    1 - delta guarantee for the whole cascade); per-stage deltas stay within the union bound
    S * delta."""
    rate, coverage, calls = _failure_rate(toe, target=0.8, delta=0.1, delta_split=None)
    assert rate <= 0.1 + 0.05, rate
    assert coverage > 0.3 and calls < 2.6  # it does accept a real share, with fewer calls than the panel
    rate, coverage, calls = _failure_rate(toe, target=0.8, delta=0.1, delta_split="per_stage")
    assert rate <= 3 * 0.1, rate
    assert coverage > 0.5 and calls < 2.0
