"""Is one model's per-item loss lower than another's by more than chance? A paired bootstrap.

Why (docs/design.md, 'Learning keeps routing'): promoted whenever its cross-fitted Brier is at
most the voting method's, learned fusion would be promoted on calm traffic by a difference of
0.0001 (0.0508 vs 0.0509 at 205 labels), and which model served would depend on when a refit
landed. A promotion needs the *paired* difference of the per-item losses (candidate
minus incumbent, on the same labelled items) to be below zero by more than its noise: the
upper end of a one-sided bootstrap interval of the mean difference must be below ``-margin``.

Pairing matters: both losses are taken on the same items, so the item difficulty, which makes
each Brier noisy, cancels in the difference.

The interval is the studentized bootstrap (bootstrap-t) of the mean difference over
``replicates`` resamples of the items (with replacement): ``mean - q_alpha(t*) * se`` with
``t* = (mean* - mean) / se*``. Drawn from a fixed seed, so the same labels give the same
decision on every replica. Why not the percentile bootstrap it replaced: loss differences are
skewed (a sharper candidate is a little better on most items and much worse on the few it
gets wrong), and there the percentile bound fired too often. Resampling a real pool
(benchmarks/bench_promotion_false_rate.py, case ``sharp``: a sharpened stack exactly as good as
a softened one, skewness 1.9) promoted it in 11.5% of 50-label sets and 6.8% of 100-label sets
(target 5%); the studentized bound is second-order accurate under skewness. Resamples are drawn as item indices in blocks of about two million
(``d[indices].mean``), so 20,000 labels x 2,000 resamples stay within ~16 MB; ten times
faster than the multinomial count vectors it replaced (58 -> 6 ms at 400 labels), which is
what lets benchmarks/bench_promotion_false_rate.py run thousands of label sets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PairedDifference", "brier_losses", "paired_difference"]

_BLOCK_CELLS = 2_000_000


@dataclass(frozen=True)
class PairedDifference:
    """The mean of ``candidate - incumbent`` per-item losses and its one-sided upper bound."""

    mean: float
    upper: float
    """Upper end of the one-sided ``1 - alpha`` studentized bootstrap interval of the mean."""
    alpha: float
    n: int
    method: str = "paired studentized bootstrap"

    def better(self, margin: float = 0.0) -> bool:
        """Whether the candidate's loss is lower by more than its noise (and ``margin``)."""
        return self.n > 0 and self.upper < -margin

    def as_dict(self) -> dict[str, float]:
        return {"difference": self.mean, "difference_upper": self.upper, "alpha": self.alpha}


def brier_losses(confidence: Sequence[float], correct: Sequence[bool]) -> np.ndarray:
    """Per-item Brier loss ``(c - z)^2`` (the caller maps an undecided verdict to c 0.5, wrong)."""
    c = np.asarray(confidence, dtype=float)
    z = np.asarray(correct, dtype=float)
    if c.shape != z.shape or c.ndim != 1:
        raise ValueError(f"confidence and correct must be 1-d of one length, got {c.shape} and {z.shape}")
    return (c - z) ** 2


def paired_difference(
    candidate: Sequence[float] | np.ndarray, incumbent: Sequence[float] | np.ndarray, *,
    alpha: float = 0.05, replicates: int = 2000, seed: int = 0,
) -> PairedDifference:
    """The paired bootstrap of ``mean(candidate - incumbent)`` (module docstring).

    ``candidate``, ``incumbent``: per-item losses on the same items, shape (n,).
    """
    a = np.asarray(candidate, dtype=float)
    b = np.asarray(incumbent, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"the two loss series must be 1-d of one length, got {a.shape} and {b.shape}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if replicates < 100:
        raise ValueError(f"replicates must be at least 100, got {replicates}")
    n = a.size
    if n == 0:
        return PairedDifference(float("nan"), float("inf"), alpha, 0)
    d = a - b
    mean = float(d.mean())
    scale = float(d.std(ddof=1)) / math.sqrt(n) if n > 1 else 0.0
    if scale == 0.0:  # every item differs by the same amount: no noise to bound
        return PairedDifference(mean, mean, alpha, n)
    rng = np.random.default_rng(seed)
    studentized = np.empty(replicates)
    block = max(1, _BLOCK_CELLS // n)
    for start in range(0, replicates, block):
        size = min(block, replicates - start)
        x = d[rng.integers(0, n, size=(size, n))]
        se = x.std(axis=1, ddof=1) / math.sqrt(n)
        studentized[start:start + size] = np.where(
            se > 0, (x.mean(axis=1) - mean) / np.where(se > 0, se, 1.0), 0.0)
    upper = mean - float(np.quantile(studentized, alpha)) * scale
    return PairedDifference(mean, upper, alpha, n)
