"""The metric registry: built-in declarations agree with the fast paths, and a metric registered
in one place reaches the summary, per-category tables, the streaming read-back and bootstrap."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from judgefuse.calibration import CalibrationAccumulator, per_category, summarize
from judgefuse.calibration.bootstrap import bootstrap_ci, bootstrap_interval
from judgefuse.calibration.builtin_metrics import BUILTIN_NAMES
from judgefuse.calibration.metric_registry import (
    DuplicateMetric,
    Metric,
    MetricOptions,
    UnknownMetric,
    get_metric,
    metric_names,
    metric_origins,
    register_metric,
    registered_metrics,
    unregister_metric,
)
from judgefuse.calibration.summary import SUMMARY_KEYS


def _data(seed: int, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = np.round(rng.uniform(0.5, 1.0, n), 3)  # on the accumulator's 0.001 grid, edges included
    c[:20] = 0.9
    z = (rng.uniform(size=n) < c - 0.1).astype(float)
    return c, z


def test_builtins_are_the_summary_keys_in_order() -> None:
    assert SUMMARY_KEYS == BUILTIN_NAMES == (
        "n", "accuracy", "ece", "adaptive_ce", "mce", "brier", "nll", "ice", "th_score", "macroce", "auroc", "aurc")
    assert metric_names()[: len(SUMMARY_KEYS)] == SUMMARY_KEYS
    assert all(metric_origins()[name] == "built-in" for name in SUMMARY_KEYS)


@pytest.mark.parametrize(("n_bins", "eps"), [(10, 0.1), (20, 0.05), (5, 0.15)])
def test_builtin_point_functions_match_the_fast_path(n_bins: int, eps: float) -> None:
    c, z = _data(n_bins)
    fast = summarize(c, z, n_bins=n_bins, eps=eps)
    options = MetricOptions(n_bins=n_bins, eps=eps)
    for metric in registered_metrics():
        assert metric.compute(c, z, None, options) == pytest.approx(fast[metric.name], abs=1e-12), metric.name


def test_weighted_builtins_equal_replicated_items() -> None:
    c, z = _data(1, 60)
    weights = np.random.default_rng(2).integers(1, 4, c.size).astype(float)
    c_rep, z_rep = np.repeat(c, weights.astype(int)), np.repeat(z, weights.astype(int))
    for name in ("accuracy", "brier", "ece"):
        metric = get_metric(name)
        assert metric.weighted
        assert metric.compute(c, z, weights) == pytest.approx(metric.compute(c_rep, z_rep), abs=1e-12), name
    with pytest.raises(ValueError, match="'auroc' has no weighted form"):
        get_metric("auroc").compute(c, z, weights)


def test_display_declarations_keep_the_paper_units() -> None:
    assert get_metric("ece").format(0.01234) == "1.23" and get_metric("ece").header() == "ECE %"
    assert get_metric("ece").header(compact=True) == "ECE%"
    assert get_metric("th_score").format(3.14159) == "3.14" and get_metric("brier").format(0.12345) == "0.123"
    assert get_metric("auroc").format(math.nan) == "-" and get_metric("auroc").format(None) == "-"
    assert [m.name for m in registered_metrics() if m.interval] == ["accuracy", "ece"]
    assert get_metric("ece").higher_is_better is False and get_metric("accuracy").higher_is_better is True


def _share_wrong_confident(c: np.ndarray, z: np.ndarray, w: np.ndarray | None, o: MetricOptions) -> float:
    return float(np.average((c >= 0.9) & (z == 0), weights=w))


@pytest.fixture
def extra_metric() -> Iterator[Metric]:
    metric = register_metric(Metric(
        "test_confident_wrong", _share_wrong_confident, label="CW", percent=True, digits=1,
        higher_is_better=False, interval=True, bounds=(0.0, 1.0), weighted=True,
        from_fields=lambda totals: totals.share_wrong_at_or_above(0.9),
    ))
    try:
        yield metric
    finally:
        unregister_metric(metric.name)
    assert "test_confident_wrong" not in metric_names()


def test_a_registered_metric_reaches_summary_categories_stream_and_bootstrap(extra_metric: Metric) -> None:
    c, z = _data(3)
    expected = float(np.mean((c >= 0.9) & (z == 0)))
    assert expected > 0
    assert metric_names()[-1] == "test_confident_wrong"
    assert metric_origins()["test_confident_wrong"] == f"module {__name__}"
    assert summarize(c, z)["test_confident_wrong"] == expected
    groups = np.where(np.arange(c.size) % 2 == 0, "even", "odd")
    by_group = per_category(c, z, groups, metrics=["n", "test_confident_wrong"])
    for label in ("even", "odd"):
        mask = groups == label
        assert by_group[label]["test_confident_wrong"] == float(np.mean((c[mask] >= 0.9) & (z[mask] == 0)))

    acc = CalibrationAccumulator()
    fields = acc.add_fields(*(acc.increments(float(ci), int(zi)) for ci, zi in zip(c, z, strict=True)))
    streamed = acc.metrics_from_fields(fields)
    assert streamed["test_confident_wrong"] == pytest.approx(expected, abs=1e-12)  # c = 0.9 exactly included
    assert math.isnan(acc.metrics_from_fields({})["test_confident_wrong"])

    interval = bootstrap_interval(c, z, metric="test_confident_wrong", n_resamples=200, seed=1)
    assert interval.low <= expected <= interval.high and interval.high > interval.low
    assert 0.0 <= interval.low and interval.high <= 1.0


def test_a_metric_without_a_streaming_path_reads_back_as_nan() -> None:
    register_metric(Metric("test_no_stream", lambda c, z, w, o: 1.0, label="NS"))
    try:
        acc = CalibrationAccumulator()
        assert math.isnan(acc.metrics_from_fields(acc.increments(0.7, 1))["test_no_stream"])
        assert summarize([0.7], [1])["test_no_stream"] == 1.0
    finally:
        unregister_metric("test_no_stream")


def test_registration_errors() -> None:
    with pytest.raises(DuplicateMetric, match="'ece' is already registered \\(by built-in\\)"):
        register_metric(Metric("ece", lambda c, z, w, o: 0.0, label="x"))
    with pytest.raises(ValueError, match="identifier"):
        Metric("bad name", lambda c, z, w, o: 0.0, label="x")
    with pytest.raises(TypeError, match="takes a Metric"):
        register_metric("ece")  # type: ignore[arg-type]
    with pytest.raises(UnknownMetric, match="unknown metric 'nope'"):
        get_metric("nope")
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        bootstrap_interval([0.6, 0.7], [1, 0], metric="nope", n_resamples=10)


def _very_sure_wrong(c: np.ndarray, z: np.ndarray, w: np.ndarray | None, o: MetricOptions) -> float:
    return float(np.mean((c > 0.95) & (z == 0)))


def test_a_metric_with_its_own_accumulator_fields_streams_exactly_and_undoes() -> None:
    """Confidence > 0.95 is not a fine-bin edge question (0.951 and 0.9505 share a bin): the
    metric keeps its own integer counter, and a relabel (sign -1) removes it exactly."""
    register_metric(Metric(
        "test_very_sure_wrong", _very_sure_wrong, label="VSW",
        increments=lambda c, right: {"w": int(c > 0.95 and not right)},
        from_fields=lambda t: t.fields.get("w", 0) / t.n if t.n else math.nan,
    ))
    try:
        acc = CalibrationAccumulator()
        c = np.array([0.9505, 0.9505, 0.951, 0.96, 0.5, 0.99])
        z = np.array([0, 1, 0, 0, 0, 1.0])
        one_by_one = acc.add_fields(*(acc.increments(float(ci), int(zi)) for ci, zi in zip(c, z, strict=True)))
        assert one_by_one == acc.increments_many(c, z)
        assert one_by_one["test_very_sure_wrong.w"] == 3
        assert acc.metrics_from_fields(one_by_one)["test_very_sure_wrong"] == summarize(c, z)["test_very_sure_wrong"] == 0.5
        relabel = acc.add_fields(one_by_one, acc.increments(0.96, 0, sign=-1), acc.increments(0.96, 1))
        assert relabel["test_very_sure_wrong.w"] == 2
        with pytest.raises(ValueError, match="unknown calibration fields"):
            acc.metrics_from_fields({"n1": 1, "w": 1})
    finally:
        unregister_metric("test_very_sure_wrong")
    # the plugin uninstalled: its stored fields are ignored, every other metric still reads
    after = CalibrationAccumulator().metrics_from_fields(one_by_one)
    assert "test_very_sure_wrong" not in after and after["n"] == 6 and after["accuracy"] == 2 / 6


def test_percentile_bootstrap_takes_a_registered_name_like_its_callable(extra_metric: Metric) -> None:
    c, z = _data(5)
    by_name = bootstrap_ci(c, z, metric="test_confident_wrong", n_resamples=100, seed=4)
    by_callable = bootstrap_ci(c, z, metric=lambda cc, zz: _share_wrong_confident(cc, zz, None, MetricOptions()),
                               n_resamples=100, seed=4)
    assert by_name == by_callable and by_name[0] < by_name[1]
