"""Reliability-diagram data: per equal-width bin, accuracy against mean confidence.

The picture behind ECE ("Mind the Confidence Gap"; "Overconfidence in LLM-as-a-Judge", Figure 3): bars above the diagonal are
under-confidence, below it over-confidence. Every bin is returned, empty ones included, so
diagrams of different judges line up bin for bin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .binning import bin_totals, equal_width_bin_index, equal_width_edges
from .validation import check_n_bins, check_pair

__all__ = ["ReliabilityBin", "reliability_diagram"]


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin ``[lower, upper)`` (the last one closed).

    For an empty bin ``count`` is 0 and ``accuracy``, ``mean_confidence`` and ``gap`` are NaN
    (floats, so arrays and plots need no special case); :meth:`as_dict` turns them into
    ``None`` for JSON, which has no NaN.
    """

    index: int
    lower: float
    upper: float
    centre: float
    count: int
    accuracy: float
    mean_confidence: float

    @property
    def gap(self) -> float:
        """accuracy - mean_confidence: negative means over-confident; NaN when empty."""
        return self.accuracy - self.mean_confidence

    def as_dict(self) -> dict[str, float | int | None]:
        def clean(v: float) -> float | None:
            return None if math.isnan(v) else v

        return {
            "index": self.index,
            "lower": self.lower,
            "upper": self.upper,
            "centre": self.centre,
            "count": self.count,
            "accuracy": clean(self.accuracy),
            "mean_confidence": clean(self.mean_confidence),
            "gap": clean(self.gap),
        }


def _reliability(c: np.ndarray, z: np.ndarray, n_bins: int) -> list[ReliabilityBin]:
    totals = bin_totals(c, z, equal_width_bin_index(c, n_bins), n_bins)
    edges = equal_width_edges(n_bins)
    out = []
    for i in range(n_bins):
        n_i = int(totals.count[i])
        acc = float(totals.sum_correct[i] / n_i) if n_i else math.nan
        conf = float(totals.sum_confidence[i] / n_i) if n_i else math.nan
        lo, hi = float(edges[i]), float(edges[i + 1])
        out.append(ReliabilityBin(i, lo, hi, (lo + hi) / 2.0, n_i, acc, conf))
    return out


def reliability_diagram(
    confidence: Any, correct: Any, *, n_bins: int = 10
) -> list[ReliabilityBin]:
    """``n_bins`` bins (same edges as :func:`ece`), in order, empty bins included.

    ``confidence``/``correct``: shape (n,). sum(count * |gap|) / n over non-empty bins is the ECE.
    """
    c, z = check_pair(confidence, correct)
    return _reliability(c, z, check_n_bins(n_bins))
