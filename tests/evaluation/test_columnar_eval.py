"""``evaluate`` with the columnar paths (judges' rows, voting rules and their recalibrated variants fused over
arrays, cross-fitted on index arrays; intervals from shared resamples) against today's per-item
path, the reference, kept here by switching the columnar paths off: every row's metrics equal to
1e-9 (the scores themselves to the bit), and its intervals too (the same resamples are drawn, so the Monte Carlo error of an
endpoint, about 0.085 standard deviations of the statistic at 1,000 resamples, does not enter:
only the rounding of a wider matrix product does). Shared data sets with every default row, and a
synthetic file with invalid votes, tie votes and tie labels."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from judgefuse.calibration.bootstrap import bootstrap_interval
from judgefuse.evaluation import runner
from judgefuse.evaluation.loaders import load
from judgefuse.evaluation.runner import Evaluation, EvaluationOptions, evaluate
from judgefuse.evaluation.scoring import score_judge
from judgefuse.evaluation.ties import judge_ties
from judgefuse.judges.types import JudgedItem

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_eval_scale  # noqa: E402

QUICK = ("majority", "confidence_weighted", "sqrt_confidence_weighted", "entropy_weighted", "mean_probability",
         "majority+platt", "majority+isotonic", "confidence_weighted+histogram", "dawid_skene")


def _reference(items: list[JudgedItem], options: EvaluationOptions, monkeypatch: pytest.MonkeyPatch) -> Evaluation:
    """Today's path: every method item by item, every interval drawn alone."""

    def one_at_a_time(rows, metrics, *, n_resamples, seed, n_bins, eps, level=0.95):
        return [
            {m: bootstrap_interval(c, z, metric=m, n_resamples=n_resamples, seed=seed, n_bins=n_bins, eps=eps,
                                   level=level) for m in metrics}
            for c, z in rows
        ]

    with monkeypatch.context() as patch:
        patch.setattr(runner, "_has_columnar_form", lambda name: False)
        patch.setattr(runner, "score_judge_columns", lambda name, labelled, columns: score_judge(name, labelled))
        patch.setattr(runner, "judge_ties_columns",
                      lambda name, parts: judge_ties(name, [judged for items, _ in parts for judged in items]))
        patch.setattr(runner, "bootstrap_intervals_many", one_at_a_time)
        return evaluate(items, options=options)


def assert_same(got: Evaluation, want: Evaluation) -> None:
    assert [r.row.name for r in got.rows] == [r.row.name for r in want.rows]
    assert got.skipped_methods == want.skipped_methods
    for mine, ref in zip(got.rows, want.rows, strict=True):
        name = ref.row.name
        assert mine.metrics.keys() == ref.metrics.keys()
        for key, value in ref.metrics.items():
            assert mine.metrics[key] == pytest.approx(value, abs=1e-9, nan_ok=True), (name, key)
        for metric, interval in ref.intervals.items():
            for field in ("estimate", "low", "high", "debiased"):
                assert getattr(mine.intervals[metric], field) == pytest.approx(
                    getattr(interval, field), abs=1e-9, nan_ok=True), (name, metric, field)
        np.testing.assert_array_equal(mine.row.confidence, ref.row.confidence)
        np.testing.assert_array_equal(mine.row.correct, ref.row.correct)
        np.testing.assert_array_equal(mine.row.choices, ref.row.choices)
        np.testing.assert_array_equal(mine.row.item_index, ref.row.item_index)
        np.testing.assert_array_equal(mine.row.categories, ref.row.categories)
        assert (mine.row.n_invalid, mine.row.n_ties, mine.row.calls) == (ref.row.n_invalid, ref.row.n_ties, ref.row.calls)
        assert mine.row.cost_usd == pytest.approx(ref.row.cost_usd, rel=1e-12)
        assert mine.per_category.keys() == ref.per_category.keys()
        for category, values in ref.per_category.items():
            assert mine.per_category[category] == pytest.approx(values, abs=1e-9, nan_ok=True), (name, category)
        assert mine.helped_harmed == ref.helped_harmed
        assert mine.reliability == ref.reliability
    assert got.ties == want.ties
    assert got.agreement == want.agreement


@pytest.mark.parametrize("dataset", ["judgebench", "llmbar", "trust_or_escalate"])
def test_shared_data(shared_data: Path, dataset: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # every row the columnar paths make (the stacked rows run the same code on both sides)
    items = load([shared_data / dataset])
    options = EvaluationOptions(n_bootstrap=300, methods=QUICK)
    assert_same(evaluate(items, options=options), _reference(items, options, monkeypatch))


def test_synthetic_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "votes.jsonl"
    bench_eval_scale.write(path, 3000, seed=4)
    items = load([path])
    assert any(judged.item.tie_label for judged in items)
    options = EvaluationOptions(n_bootstrap=400, methods=QUICK, seed=2)
    got = evaluate(items, options=options)
    assert got.has_ties and len(got.rows) == 5 + len(QUICK)
    assert_same(got, _reference(items, options, monkeypatch))


@pytest.mark.parametrize("who", [{"method": "majority"}, {"method": "entropy_weighted"},
                                 {"method": "majority+isotonic"}, {"judge": "judge-3"}])
def test_tune_rows_equal_the_per_item_rows(tmp_path: Path, who: dict[str, str]) -> None:
    """``tune``'s scored row through the columnar paths, and the threshold it tunes, against
    the per-item row (score_verdicts over cross_fit_predict / score_judge)."""
    from judgefuse.calibration.thresholds import tune_threshold
    from judgefuse.evaluation.scoring import score_verdicts
    from judgefuse.evaluation.tune_command import tune_items
    from judgefuse.fusion import cross_fit_predict, get_method

    path = tmp_path / "votes.jsonl"
    bench_eval_scale.write(path, 2000, seed=6)
    items = load([path])
    labelled = [judged for judged in items if judged.item.label is not None]
    got = tune_items(items, **who, n_folds=4, seed=3)
    if "judge" in who:
        want = score_judge(who["judge"], labelled)
    else:
        name = who["method"]
        batches = [judged.votes for judged in labelled]
        verdicts = ([get_method(name)(votes) for votes in batches] if "+" not in name else
                    cross_fit_predict(name, batches, [j.item.label for j in labelled], n_folds=4, seed=3))
        want = score_verdicts(name, labelled, verdicts)
    np.testing.assert_array_equal(got.row.confidence, want.confidence)
    np.testing.assert_array_equal(got.row.correct, want.correct)
    np.testing.assert_array_equal(got.row.choices, want.choices)
    assert (got.row.n_invalid, got.row.n_ties) == (want.n_invalid, want.n_ties)
    assert got.report == tune_threshold(want.confidence, want.correct, target_precision=0.9, delta=0.1, min_count=30)
