"""TH-Score ("Overconfidence in LLM-as-a-Judge", section 4): accuracy and coverage of the high- and low-confidence tails.

Why: a pipeline acts on the tails. Items with c >= 1 - eps are auto-accepted, items with
c <= eps discarded; TH-Score rewards a judge whose tails are large *and* right, and goes
negative when they are wrong more often than a coin (acc < 0.5).

    TH = 1/2 * sum_{I in {H, L}} (exp(acc_I - 0.5) - 1) * 100 * |I| / N

with H = {c >= 1 - eps} and L = {c <= eps}, both inclusive with a float tolerance of 1e-9
(so 0.9 counts as high at eps = 0.1 although 1 - 0.1 = 0.9000000000000000222). An empty
interval adds 0. acc_I is the fraction of correct items in I, as the design defines it.
This reproduces Table 3 of "Overconfidence in LLM-as-a-Judge" for the rows whose columns are consistent (see the tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .validation import check_pair

__all__ = ["THScore", "th_score", "th_score_from_parts"]

TOLERANCE = 1e-9


@dataclass(frozen=True)
class THScore:
    """TH-Score and its parts. Accuracies are NaN for an empty interval; coverages in [0, 1]."""

    score: float
    eps: float
    n: int
    n_high: int
    n_low: int
    correct_high: int
    correct_low: int

    @property
    def acc_high(self) -> float:
        return self.correct_high / self.n_high if self.n_high else math.nan

    @property
    def acc_low(self) -> float:
        return self.correct_low / self.n_low if self.n_low else math.nan

    @property
    def coverage_high(self) -> float:
        return self.n_high / self.n

    @property
    def coverage_low(self) -> float:
        return self.n_low / self.n

    def __float__(self) -> float:
        return self.score


def check_eps(eps: float) -> float:
    eps = float(eps)
    if not 0.0 <= eps < 0.5:
        raise ValueError(f"eps must lie in [0, 0.5) so the two intervals are disjoint, got {eps}")
    return eps


def _term(acc: float, coverage: float) -> float:
    if coverage <= 0.0:
        return 0.0
    return (math.exp(acc - 0.5) - 1.0) * 100.0 * coverage


def th_score_from_parts(
    acc_high: float,
    coverage_high: float,
    acc_low: float = 0.0,
    coverage_low: float = 0.0,
) -> float:
    """TH-Score from interval accuracies (in [0, 1]) and coverages (fractions of N, in [0, 1]).

    For tables that only publish the parts (Table 3 of "Overconfidence in LLM-as-a-Judge" gives acc and percentage of H;
    pass ``percentage / 100``). An interval with coverage 0 adds 0 whatever its accuracy.
    """
    for name, v in (("acc_high", acc_high), ("coverage_high", coverage_high),
                    ("acc_low", acc_low), ("coverage_low", coverage_low)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {v}")
    return 0.5 * (_term(acc_high, coverage_high) + _term(acc_low, coverage_low))


def th_counts(c: np.ndarray, z: np.ndarray, eps: float) -> THScore:
    high = c >= (1.0 - eps) - TOLERANCE
    low = c <= eps + TOLERANCE
    n = c.size
    n_high, n_low = int(high.sum()), int(low.sum())
    k_high, k_low = int(z[high].sum()), int(z[low].sum())
    score = 0.0
    if n_high:
        score += _term(k_high / n_high, n_high / n)
    if n_low:
        score += _term(k_low / n_low, n_low / n)
    return THScore(0.5 * score, eps, n, n_high, n_low, k_high, k_low)


def th_score(confidence: Any, correct: Any, *, eps: float = 0.1) -> THScore:
    """TH-Score of a judge; ``float(result)`` or ``result.score`` is the number.

    ``confidence``/``correct``: shape (n,). ``eps`` in [0, 0.5) sets both tails (default 0.1,
    the paper's main setting).
    """
    c, z = check_pair(confidence, correct)
    return th_counts(c, z, check_eps(eps))
