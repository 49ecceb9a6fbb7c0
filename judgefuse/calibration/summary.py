"""All headline metrics of one judge or method in one pass: what reports and the service call.

:func:`summarize` validates once, bins once (ECE and MCE share the equal-width totals) and
sorts once (adaptive CE, AUROC and AURC share one argsort), so a full row costs about one
sort of the data. Every other registered metric (:mod:`.metric_registry`: a plugin's, or a
built-in declared without a fast path here) is added through its ``point`` function, so the
keys are always :func:`~.metric_registry.metric_names`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .binning import bin_totals, equal_width_bin_index
from .builtin_metrics import BUILTIN_NAMES
from .metric_registry import MetricOptions, metric_names, registered_metrics
from .ranking import aurc_sorted_desc, auroc_sorted
from .scores import adaptive_ce_sorted, brier_arrays, ice_arrays, macroce_arrays, nll_arrays
from .th_score import check_eps, th_counts
from .validation import check_n_bins, check_pair

__all__ = ["SUMMARY_KEYS", "per_category", "summarize"]

SUMMARY_KEYS = BUILTIN_NAMES
"""The built-in metrics, in order (plugins' metrics follow them in :func:`summarize`)."""


def _summarize(c: np.ndarray, z: np.ndarray, n_bins: int, eps: float) -> dict[str, float]:
    out = _fast_path(c, z, n_bins, eps)
    options = MetricOptions(n_bins=n_bins, eps=eps)
    for metric in registered_metrics():
        if metric.name not in out:
            out[metric.name] = metric.compute(c, z, None, options)
    return out


def _fast_path(c: np.ndarray, z: np.ndarray, n_bins: int, eps: float) -> dict[str, float]:
    totals = bin_totals(c, z, equal_width_bin_index(c, n_bins), n_bins)
    order = np.argsort(c)  # every consumer below is tie-order free
    c_asc, z_asc = c[order], z[order]
    return {
        "n": float(c.size),
        "accuracy": float(z.mean()),
        "ece": totals.calibration_error(),
        "adaptive_ce": adaptive_ce_sorted(c_asc, z_asc, n_bins),
        "mce": totals.max_gap(),
        "brier": brier_arrays(c, z),
        "nll": nll_arrays(c, z),
        "ice": ice_arrays(c, z),
        "th_score": th_counts(c, z, eps).score,
        "macroce": macroce_arrays(c, z),
        "auroc": auroc_sorted(c_asc, z_asc),
        # reversing an ascending sort gives a descending one; AURC is tie-order free
        "aurc": aurc_sorted_desc(c_asc[::-1], z_asc[::-1]),
    }


def summarize(
    confidence: Any, correct: Any, *, n_bins: int = 10, eps: float = 0.1
) -> dict[str, float]:
    """Every registered metric of one row, as floats: :data:`SUMMARY_KEYS` then plugins' metrics.

    ``confidence``/``correct``: shape (n,). ``n_bins`` is used by ECE, adaptive CE and MCE,
    ``eps`` by TH-Score. ``auroc`` is NaN when only one class is present; every other value
    is finite. ``n`` is the item count (as a float, so the dict is uniformly typed).
    """
    c, z = check_pair(confidence, correct)
    return _summarize(c, z, check_n_bins(n_bins), check_eps(eps))


def per_category(
    confidence: Any,
    correct: Any,
    categories: Any,
    *,
    metrics: Sequence[str] | None = None,
    n_bins: int = 10,
    eps: float = 0.1,
) -> dict[Any, dict[str, float]]:
    """:func:`summarize` per category, keyed by category value in sorted order.

    ``categories``: shape (n,), any hashable labels (e.g. JudgeBench's knowledge, reasoning,
    math, coding). Every distinct value becomes a group, including an empty-string label.
    ``metrics`` restricts the keys returned (default: every registered metric). Small
    categories give noisy numbers; ``n`` is in every summary so readers can tell.
    """
    c, z = check_pair(confidence, correct)
    n_bins, eps = check_n_bins(n_bins), check_eps(eps)
    cats = np.asarray(categories)
    if cats.ndim != 1 or cats.size != c.size:
        raise ValueError(f"categories must have shape ({c.size},), got {cats.shape}")
    known = metric_names()
    keys = tuple(known if metrics is None else metrics)
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; choose from {known}")
    labels, inverse = np.unique(cats, return_inverse=True)
    out: dict[Any, dict[str, float]] = {}
    for g, label in enumerate(labels):
        mask = inverse == g
        full = _summarize(c[mask], z[mask], n_bins, eps)
        out[label.item() if hasattr(label, "item") else label] = {k: full[k] for k in keys}
    return out
