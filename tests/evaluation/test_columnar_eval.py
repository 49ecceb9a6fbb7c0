"""``evaluate`` with the columnar paths (judges' rows, voting rules and their recalibrated variants fused over
arrays, cross-fitted on index arrays; intervals from shared resamples) against today's per-item
path, the reference, kept here by switching the columnar paths off: every row's metrics equal to
1e-9 (the scores themselves to the bit), and its intervals too (the same resamples are drawn, so the Monte Carlo error of an
endpoint, about 0.085 standard deviations of the statistic at 1,000 resamples, does not enter:
only the rounding of a wider matrix product does). Shared data sets with every default row, and a
synthetic file with invalid votes, tie votes and tie labels."""

from __future__ import annotations

import sys
from dataclasses import astuple
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
        # offset_stacked: the same optimum by other Newton steps (columnar_stacking), to ~1e-15
        atol = 1e-9 if name == "offset_stacked" else 0.0
        np.testing.assert_allclose(mine.row.confidence, ref.row.confidence, rtol=0, atol=atol)
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
        assert [value for b in mine.reliability for value in astuple(b)] == pytest.approx(
            [value for b in ref.reliability for value in astuple(b)], abs=atol, nan_ok=True)
    assert got.ties == want.ties
    for mine_agreement, ref_agreement in zip(got.agreement, want.agreement, strict=True):
        assert (mine_agreement.name, mine_agreement.n, mine_agreement.kappa, mine_agreement.confusion) == (
            ref_agreement.name, ref_agreement.n, ref_agreement.kappa, ref_agreement.confusion)
        assert [(d.item_id, d.answer, d.label) for d in mine_agreement.disagreements] == [
            (d.item_id, d.answer, d.label) for d in ref_agreement.disagreements]
        assert [d.confidence for d in mine_agreement.disagreements] == pytest.approx(
            [d.confidence for d in ref_agreement.disagreements], abs=1e-9)


STACKING = ("stacked", "offset_stacked", "majority")
"""The stacking rows over arrays (judgefuse.fusion.columnar_stacking) against the per-item
classes cross-fitted item by item (LLMBar's 65 judges: in tests/fusion/test_columnar_stacking.py,
on part of its items)."""


@pytest.mark.parametrize(
    ("dataset", "methods"),
    [(name, QUICK) for name in ("judgebench", "llmbar", "trust_or_escalate")]
    + [(name, STACKING) for name in ("judgebench", "trust_or_escalate")],
)
def test_shared_data(shared_data: Path, dataset: str, methods: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    items = load([shared_data / dataset])
    options = EvaluationOptions(n_bootstrap=300, methods=methods)
    assert_same(evaluate(items, options=options), _reference(items, options, monkeypatch))


@pytest.mark.parametrize(("n", "methods", "seed"), [(3000, QUICK, 2), (2500, STACKING, 1)])
def test_synthetic_file(
    tmp_path: Path, n: int, methods: tuple[str, ...], seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With tie labels: a learned method scores the tie-labelled items by a fit on every A/B label."""
    path = tmp_path / "votes.jsonl"
    bench_eval_scale.write(path, n, seed=seed + 2)
    items = load([path])
    assert any(judged.item.tie_label for judged in items)
    options = EvaluationOptions(n_bootstrap=400, methods=methods, seed=seed)
    got = evaluate(items, options=options)
    assert got.has_ties and len(got.rows) == 5 + len(methods)
    assert_same(got, _reference(items, options, monkeypatch))


@pytest.mark.parametrize("who", [{"method": "majority"}, {"method": "entropy_weighted"},
                                 {"method": "majority+isotonic"}, {"method": "offset_stacked"}, {"judge": "judge-3"}])
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
        verdicts = ([get_method(name)(votes) for votes in batches] if "+" not in name and "stack" not in name else
                    cross_fit_predict(name, batches, [j.item.label for j in labelled], n_folds=4, seed=3))
        want = score_verdicts(name, labelled, verdicts)
    atol = 1e-9 if who.get("method") == "offset_stacked" else 0.0  # the same optimum by other steps
    np.testing.assert_allclose(got.row.confidence, want.confidence, rtol=0, atol=atol)
    np.testing.assert_array_equal(got.row.correct, want.correct)
    np.testing.assert_array_equal(got.row.choices, want.choices)
    assert (got.row.n_invalid, got.row.n_ties) == (want.n_invalid, want.n_ties)
    reference = tune_threshold(want.confidence, want.correct, target_precision=0.9, delta=0.1, min_count=30)
    if atol == 0.0:
        assert got.report == reference
    else:
        assert (got.report.n_accepted, got.report.reason, len(got.report.path)) == (
            reference.n_accepted, reference.reason, len(reference.path))
        assert got.report.threshold == pytest.approx(reference.threshold, abs=atol)
        assert got.report.lower_bound == pytest.approx(reference.lower_bound, abs=atol, nan_ok=True)
