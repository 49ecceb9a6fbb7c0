"""``judgefuse tune`` (evaluation/tune_command.py) on the real Trust-or-Escalate judgments."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from judgefuse.calibration.thresholds import tune_threshold
from judgefuse.evaluation import tune_command
from judgefuse.evaluation.loaders import load


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="judgefuse")
    tune_command.add_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def _run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    return args.handler(args)


@pytest.fixture(scope="module")
def toe(shared_data: Path) -> Path:
    return shared_data / "trust_or_escalate"


def _gpt4_arrays(path: Path) -> tuple[np.ndarray, np.ndarray]:
    conf, correct = [], []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        p0, p1 = record["probs"]
        p_a = p0 / (p0 + p1)
        conf.append(max(p_a, 1 - p_a))
        correct.append((p_a > 0.5) == (record["preferences"]["human"] == 1))
    return np.array(conf), np.array(correct)


def test_judge_report_matches_tune_threshold_on_raw_records(
    toe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tune.json"
    assert _run(["tune", str(toe), "--judge", "gpt-4-turbo", "--target", "0.85", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    c, z = _gpt4_arrays(toe / "gpt-4-turbo.calibration.jsonl")
    direct = tune_threshold(c, z, target_precision=0.85, delta=0.1)
    assert data["kind"] == "judge" and data["name"] == "gpt-4-turbo" and data["n"] == 500
    assert data["threshold"] == pytest.approx(direct.threshold)
    for key in ("n_accepted", "coverage", "precision", "lower_bound", "expected_errors", "review_load"):
        assert data[key] == pytest.approx(getattr(direct, key)), key
    assert data["lower_bound"] >= 0.85 and data["n_accepted"] + round(data["review_load"] * 500) == 500
    assert "auto-accept when confidence >=" in printed and "sent to human review" in printed
    assert f"{100 * direct.coverage:.1f}% auto-accepted" in printed


def test_default_majority_routes_everything_to_review(toe: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["tune", str(toe), "--target", "0.85"]) == 0
    printed = capsys.readouterr().out
    assert "majority" in printed
    assert "everything goes to review" in printed and "review load" in printed
    result = tune_command.tune_items(load(toe), target=0.85)
    assert result.source == "method" and result.name == "majority"
    rep = result.report
    assert rep.threshold is None and rep.review_load == 1.0
    # unanimous panels (confidence 1) are right only ~83% of the time: the first test fails
    assert rep.path[0].tau == 1.0 and rep.path[0].lower_bound < 0.85
    assert "tau=1" in rep.reason


def test_learned_method_is_cross_fitted(toe: Path) -> None:
    items = load(toe)
    result = tune_command.tune_items(items, target=0.85, method="stacked")
    assert result.row.kind == "fusion" and result.row.confidence.size == 500
    rep = result.report
    assert rep.threshold is not None and rep.lower_bound >= 0.85
    accepted = result.row.confidence >= rep.threshold
    assert rep.n_accepted == int(accepted.sum())
    assert rep.precision == pytest.approx(result.row.correct[accepted].mean())
    # the same verdicts the evaluation would score: every one fitted without its own label
    _kind, _name, row = tune_command.scored_row(items, method="stacked")
    assert np.array_equal(row.confidence, result.row.confidence)


def test_errors(toe: Path) -> None:
    items = load(toe)
    with pytest.raises(tune_command.TuneError, match="gpt-4-turbo"):
        tune_command.tune_items(items, judge="nobody")
    with pytest.raises(tune_command.TuneError, match="no labelled items"):
        tune_command.tune_items([])
    with pytest.raises(tune_command.TuneError, match="not both"):
        tune_command.scored_row(items, method="majority", judge="gpt-4-turbo")
    with pytest.raises(ValueError, match="target_precision"):
        tune_command.tune_items(items, target=1.5)
    with pytest.raises(KeyError, match="unknown fusion method"):
        tune_command.tune_items(items, method="no-such-method")
    with pytest.raises(SystemExit):
        _parser().parse_args(["tune", str(toe), "--method", "majority", "--judge", "gpt-4-turbo"])
