"""The metric registry: one declaration per metric, from which every list of metrics derives.

A :class:`Metric` says how the metric is computed over arrays (``point``, optionally
weighted), how it is read back from a streaming calibration record (``from_fields``, over the
:class:`FieldTotals` of :class:`~judgefuse.calibration.accumulator.CalibrationAccumulator`),
whether the evaluation report gives it a bootstrap interval, how it is shown (short label,
percent or not, digits, which table) and which direction is better. The offline summary
(:func:`~judgefuse.calibration.summarize`), the streaming read-back, the service's
``/v1/calibration`` and the JSON/HTML/terminal reports all iterate :func:`registered_metrics`, so
a new metric is one file::

    from judgefuse.calibration.metric_registry import Metric, register_metric

    def confident_errors(confidence, correct, weights, options):
        return float(np.average((confidence >= 0.9) & (correct == 0), weights=weights))

    register_metric(Metric("confident_errors", confident_errors, label="ConfErr",
                           percent=True, higher_is_better=False,
                           from_fields=lambda t: t.share_wrong_at_or_above(0.9)))

The built-in metrics are declared in :mod:`.builtin_metrics` (the summary computes them on its
shared-sort fast path; their ``point`` functions give the same numbers, a test checks it),
imported by the registry on the first listing or lookup (:class:`judgefuse.registry.Registry`'s
lazy built-ins: that module imports this one to register, so this one never imports it).
Metrics from other distributions come through the ``judgefuse.metrics`` entry-point group,
loaded on the first listing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from judgefuse.registry import DuplicateEntry, Registry, UnknownEntry, identifier_name

__all__ = [
    "METRICS",
    "DuplicateMetric",
    "FieldTotals",
    "Metric",
    "MetricOptions",
    "UnknownMetric",
    "get_metric",
    "metric_names",
    "metric_origins",
    "register_metric",
    "registered_metrics",
    "unregister_metric",
]

ENTRY_POINT_GROUP = "judgefuse.metrics"


class DuplicateMetric(DuplicateEntry):
    """A metric name was registered twice (a ``ValueError``)."""


class UnknownMetric(UnknownEntry):
    """No metric is registered under the name (an input error and a ``KeyError``)."""


_NAME_RULE = identifier_name("metric")


@dataclass(frozen=True)
class MetricOptions:
    """The knobs some metrics read: equal-width bins (ECE, MCE, adaptive CE) and TH-Score's eps."""

    n_bins: int = 10
    eps: float = 0.1


@dataclass(frozen=True)
class FieldTotals:
    """A streaming calibration record read back: per fine bin (equal width, ``fine_bins`` of
    them, bin ``b`` is ``[b/F, (b+1)/F)``) the count, correct count and sum of confidence, and
    the exact sums kept beside them. What a metric's ``from_fields`` reads."""

    count: np.ndarray
    correct: np.ndarray
    sum_confidence: np.ndarray
    sum_confidence_correct: float
    sum_brier: float
    sum_nll: float
    fields: Mapping[str, int] = field(default_factory=dict)
    """The metric's own counters (its ``increments`` fields, without the name prefix)."""

    @property
    def fine_bins(self) -> int:
        return int(self.count.size)

    @property
    def n(self) -> int:
        return int(self.count.sum())

    def first_bin_at(self, threshold: float) -> int:
        """The first fine bin whose items all have confidence >= ``threshold`` (exact when
        ``threshold`` is a fine-bin edge, e.g. 0.9 with 1000 fine bins)."""
        return min(self.fine_bins, max(0, math.ceil(threshold * self.fine_bins - 1e-9)))

    def share_wrong_at_or_above(self, threshold: float) -> float:
        """Share of all items that are wrong with confidence >= ``threshold`` (NaN when empty)."""
        if self.n == 0:
            return math.nan
        start = self.first_bin_at(threshold)
        return float((self.count[start:] - self.correct[start:]).sum() / self.n)


PointFunction = Callable[[np.ndarray, np.ndarray, "np.ndarray | None", MetricOptions], float]
"""``(confidence, correct, weights or None, options) -> value`` over arrays of shape (n,)."""


@dataclass(frozen=True)
class Metric:
    """One metric's declaration (see the module docstring)."""

    name: str
    point: PointFunction
    label: str
    """Short header, e.g. ``ECE``; the tables add `` %`` for a percent metric."""
    percent: bool = False
    """Shown times 100 with a ``%`` header (JSON keeps fractions)."""
    digits: int = 3
    """Decimals shown (after scaling to percent)."""
    higher_is_better: bool | None = None
    """True/False; None for a count (``n``)."""
    interval: bool = False
    """The evaluation report gives it a 95% bootstrap interval."""
    bounds: tuple[float, float] = (-math.inf, math.inf)
    """The metric's range (bootstrap intervals are clipped to it)."""
    from_fields: Callable[[FieldTotals], float] | None = None
    """The value from a streaming record; None: the service reports null for it."""
    increments: Callable[[float, bool], Mapping[str, int]] | None = None
    """The metric's own accumulator fields: ``(confidence, correct) -> {field: integer delta}``
    for one labelled verdict. Stored as ``<metric name>.<field>`` beside the built-in fields
    (integers, so a relabel undoes them exactly); ``from_fields`` reads them back, unprefixed, as
    ``FieldTotals.fields``."""
    table: Literal["main", "more", "json"] = "more"
    """Where the terminal report shows it: the main table, the second one, or only the JSON."""
    weighted: bool = False
    """``point`` honours ``weights`` (otherwise it refuses them)."""

    def __post_init__(self) -> None:
        problem = _NAME_RULE(self.name)
        if problem is not None:
            raise ValueError(problem)
        if not callable(self.point):
            raise TypeError(f"metric {self.name!r}: point must be callable")

    def header(self, *, compact: bool = False) -> str:
        """``ECE %`` (``ECE%`` when compact) for a percent metric, the label otherwise."""
        if not self.percent:
            return self.label
        return f"{self.label}%" if compact else f"{self.label} %"

    def format(self, value: float | None) -> str:
        """The value in display units, ``-`` when undefined."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return f"{(100.0 if self.percent else 1.0) * value:.{self.digits}f}"

    def compute(
        self, confidence: np.ndarray, correct: np.ndarray, weights: np.ndarray | None = None,
        options: MetricOptions | None = None,
    ) -> float:
        """``point`` with the weights check (a metric that ignores weights refuses them)."""
        if weights is not None and not self.weighted:
            raise ValueError(f"metric {self.name!r} has no weighted form")
        return float(self.point(confidence, correct, weights, options or MetricOptions()))


METRICS: Registry[Metric] = Registry(
    "metric", group=ENTRY_POINT_GROUP, builtins=("judgefuse.calibration.builtin_metrics",),
    name_rule=_NAME_RULE, duplicate=DuplicateMetric, unknown=UnknownMetric, order="registered",
)
"""Every metric: built-ins first in their declared order, then plugins in load order."""


def register_metric(metric: Metric) -> Metric:
    """Add ``metric`` to the registry (a taken name raises :class:`DuplicateMetric`)."""
    if not isinstance(metric, Metric):
        raise TypeError(f"register_metric takes a Metric, got {type(metric).__name__}")
    return METRICS.register(metric.name, metric, module=getattr(metric.point, "__module__", None))


def unregister_metric(name: str) -> None:
    """Remove a metric (a no-op when absent); for tests and for replacing a plugin's metric."""
    METRICS.unregister(name)


def registered_metrics() -> tuple[Metric, ...]:
    """Every metric, built-ins first in their declared order, then plugins in load order."""
    return tuple(METRICS.entries())


def metric_names() -> tuple[str, ...]:
    """The names of :func:`registered_metrics`."""
    return tuple(METRICS.names())


def get_metric(name: str) -> Metric:
    """The metric registered as ``name`` (:class:`UnknownMetric` lists the known ones)."""
    return METRICS.get(name)


def metric_origins() -> dict[str, str]:
    """Metric name -> where it was registered (``built-in`` or a plugin's distribution)."""
    return METRICS.origins()
