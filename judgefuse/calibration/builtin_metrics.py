"""The built-in metrics' declarations (see :mod:`.metric_registry`), in the reports' order.

The order is :data:`~judgefuse.calibration.summary.SUMMARY_KEYS`; the display settings give the
reports' units (those of "Overconfidence in LLM-as-a-Judge": accuracy and the calibration errors in percent, TH-Score in its own
units, the rest as fractions). :func:`~judgefuse.calibration.summarize` and the streaming
accumulator compute these on their shared fast paths (one sort, one binning); the ``point``
functions here give the same numbers one metric at a time.
"""

from __future__ import annotations

import math

import numpy as np

from .binning import bin_totals, equal_width_bin_index
from .metric_registry import Metric, MetricOptions, register_metric
from .ranking import aurc, auroc
from .scores import adaptive_ce, ice, macroce, mce, nll
from .th_score import th_score

__all__ = ["BUILTIN_METRICS", "BUILTIN_NAMES"]

Weights = np.ndarray | None


def _n(c: np.ndarray, z: np.ndarray, w: Weights, o: MetricOptions) -> float:
    return float(c.size)


def _accuracy(c: np.ndarray, z: np.ndarray, w: Weights, o: MetricOptions) -> float:
    return float(np.average(z, weights=w))


def _ece(c: np.ndarray, z: np.ndarray, w: Weights, o: MetricOptions) -> float:
    return bin_totals(c, z, equal_width_bin_index(c, o.n_bins), o.n_bins, w).calibration_error()


def _brier(c: np.ndarray, z: np.ndarray, w: Weights, o: MetricOptions) -> float:
    return float(np.average((c - z) ** 2, weights=w))


UNIT = (0.0, 1.0)
TH_RANGE = (100.0 * (math.exp(-0.5) - 1.0), 100.0 * (math.exp(0.5) - 1.0))
BUILTIN_METRICS = (
    Metric("n", _n, label="n", digits=0, table="json"),
    Metric("accuracy", _accuracy, label="Acc", percent=True, digits=2, higher_is_better=True,
           interval=True, bounds=UNIT, table="main", weighted=True),
    Metric("ece", _ece, label="ECE", percent=True, digits=2, higher_is_better=False,
           interval=True, bounds=UNIT, table="main", weighted=True),
    Metric("adaptive_ce", lambda c, z, w, o: adaptive_ce(c, z, n_bins=o.n_bins), label="AdaptCE",
           percent=True, digits=2, higher_is_better=False, bounds=UNIT),
    Metric("mce", lambda c, z, w, o: mce(c, z, n_bins=o.n_bins), label="MCE", percent=True, digits=2,
           higher_is_better=False, bounds=UNIT),
    Metric("brier", _brier, label="Brier", higher_is_better=False, bounds=UNIT, table="main", weighted=True),
    Metric("nll", lambda c, z, w, o: nll(c, z), label="NLL", higher_is_better=False, bounds=(0.0, math.inf)),
    Metric("ice", lambda c, z, w, o: ice(c, z), label="ICE", higher_is_better=False, bounds=UNIT, table="json"),
    Metric("th_score", lambda c, z, w, o: th_score(c, z, eps=o.eps).score, label="TH", digits=2,
           higher_is_better=True, bounds=TH_RANGE, table="main"),
    Metric("macroce", lambda c, z, w, o: macroce(c, z), label="MacroCE", percent=True, digits=2,
           higher_is_better=False, bounds=UNIT),
    Metric("auroc", lambda c, z, w, o: auroc(c, z), label="AUROC", higher_is_better=True, bounds=UNIT,
           table="main"),
    Metric("aurc", lambda c, z, w, o: aurc(c, z), label="AURC", higher_is_better=False, bounds=UNIT,
           table="json"),
)
for _metric in BUILTIN_METRICS:
    register_metric(_metric)

BUILTIN_NAMES = tuple(metric.name for metric in BUILTIN_METRICS)
"""The names declared above, in order (what :data:`~.summary.SUMMARY_KEYS` is)."""
