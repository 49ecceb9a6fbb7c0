"""Comparing judges on the same items: helped/harmed counts and accuracy-controlled calibration.

Raw ECE/Brier of two judges with different accuracy are not comparable ("When Calibration Rankings Reverse", section 3):
the set of predictions each is scored on has a different share of correct items, and a more
accurate, always-confident judge gets a low ECE for free. :func:`compare_judges` therefore
reports, next to the raw scores, two accuracy-controlled views ("When Calibration Rankings Reverse", section 4):

* **instance-aligned (IA)**: only items where both judges are right or both are wrong, so
  both have exactly the same accuracy on the compared set;
* **distribution-aligned (DA)**: every item kept, the more accurate judge A reweighted with
  w = a_B / a_A on its correct and (1 - a_B) / (1 - a_A) on its wrong items, so its weighted
  accuracy equals a_B; its weighted ECE/Brier are compared with B's raw ones.

A **ranking reversal** is flagged when the raw winner (lower score) on ECE or Brier is the
loser under an aligned view: the raw conclusion was an artefact of accuracy.
:func:`compare_judges_with_intervals` adds a paired bootstrap interval to every difference, and
reports a reversal only where the raw difference's interval excludes 0 and an aligned view flips
(Trust-or-Escalate's only flip, Brier 0.163 vs 0.164, is not one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .binning import bin_totals, equal_width_bin_index
from .bootstrap import LARGE_CELLS, BootstrapInterval, interval_from_stats
from .paired_cells import comparison_cell_stats
from .validation import check_correct, check_n_bins, check_pair

__all__ = [
    "ComparisonEvidence",
    "HelpedHarmed",
    "JudgeComparison",
    "ViewDifference",
    "ViewScores",
    "compare_judges",
    "compare_judges_with_intervals",
    "helped_harmed",
]


@dataclass(frozen=True)
class HelpedHarmed:
    """Outcome counts of a method against a reference on the same items ("Overconfidence in LLM-as-a-Judge", Figure 5; "Mind the Confidence Gap").

    helped: method right, reference wrong; harmed: method wrong, reference right.
    """

    helped: int
    harmed: int
    both_right: int
    both_wrong: int

    @property
    def n(self) -> int:
        return self.helped + self.harmed + self.both_right + self.both_wrong

    @property
    def net(self) -> int:
        """helped - harmed: the method's accuracy gain over the reference, in items."""
        return self.helped - self.harmed

    def as_dict(self) -> dict[str, int]:
        return {
            "helped": self.helped,
            "harmed": self.harmed,
            "both_right": self.both_right,
            "both_wrong": self.both_wrong,
            "n": self.n,
            "net": self.net,
        }


def helped_harmed(correct_method: Any, correct_reference: Any) -> HelpedHarmed:
    """Count helped/harmed/both_right/both_wrong; both inputs shape (n,), 0/1 or bool, aligned by item."""
    m = check_correct(correct_method, name="correct_method").astype(bool)
    r = check_correct(correct_reference, name="correct_reference").astype(bool)
    if m.shape != r.shape:
        raise ValueError(
            f"correct_method and correct_reference must have the same length, got {m.size} and {r.size}"
        )
    return HelpedHarmed(
        helped=int(np.count_nonzero(m & ~r)),
        harmed=int(np.count_nonzero(~m & r)),
        both_right=int(np.count_nonzero(m & r)),
        both_wrong=int(np.count_nonzero(~m & ~r)),
    )


@dataclass(frozen=True)
class ViewScores:
    """ECE and Brier of judges 1 and 2 under one view; NaN when the view is undefined.

    ``n`` is the number of items the view uses (IA: |both right| + |both wrong|).
    """

    ece_1: float
    ece_2: float
    brier_1: float
    brier_2: float
    n: int

    def winner(self, metric: str) -> int | None:
        """1 or 2 (lower score wins), None on a tie or an undefined score."""
        a, b = getattr(self, f"{metric}_1"), getattr(self, f"{metric}_2")
        if math.isnan(a) or math.isnan(b) or a == b:
            return None
        return 1 if a < b else 2


@dataclass(frozen=True)
class JudgeComparison:
    """Result of :func:`compare_judges`.

    ``more_accurate`` is 1 or 2 (None when accuracies are equal: DA is then the raw view).
    ``reversals`` maps ``"<metric>/<view>"`` (metric ece|brier, view instance_aligned|
    distribution_aligned) to True when the raw winner on that metric loses under that view.
    """

    accuracy_1: float
    accuracy_2: float
    more_accurate: int | None
    raw: ViewScores
    instance_aligned: ViewScores
    distribution_aligned: ViewScores
    n_both_right: int
    n_both_wrong: int
    reversals: dict[str, bool] = field(default_factory=dict)

    @property
    def ranking_reversal(self) -> bool:
        return any(self.reversals.values())


def _ece(c: np.ndarray, z: np.ndarray, b: np.ndarray, n_bins: int, w: np.ndarray | None = None) -> float:
    """``ece_arrays`` with the bins given."""
    return bin_totals(c, z, b, n_bins, w).calibration_error()


def _brier(q: np.ndarray, w: np.ndarray | None = None) -> float:
    """``brier_arrays`` from the squared errors ``(c - z) ** 2``."""
    return float(q.mean() if w is None else np.dot(w, q) / w.sum())


def _da_weights(z: np.ndarray, a_high: float, a_low: float) -> np.ndarray | None:
    """Weights that move accuracy a_high to a_low; None when impossible (a_high == 1 > a_low)."""
    if a_high >= 1.0:
        return None
    return np.where(z == 1.0, a_low / a_high, (1.0 - a_low) / (1.0 - a_high))


def compare_judges(
    conf_1: Any, correct_1: Any, conf_2: Any, correct_2: Any, *, n_bins: int = 10
) -> JudgeComparison:
    """Accuracy-controlled comparison of two judges on the same n items (all inputs shape (n,)).

    IA scores are NaN when no item has the same outcome for both judges. DA needs the more
    accurate judge to have at least one wrong item (else no weighting reaches the lower
    accuracy): if it has none, its DA scores are NaN. When a_B = 0 the weights zero out A's
    correct items, which is exactly what matching accuracy 0 means.
    """
    c1, z1 = check_pair(conf_1, correct_1)
    c2, z2 = check_pair(conf_2, correct_2)
    if c1.shape != c2.shape:
        raise ValueError(f"both judges must score the same items, got {c1.size} and {c2.size}")
    n_bins = check_n_bins(n_bins)
    b1, b2 = equal_width_bin_index(c1, n_bins), equal_width_bin_index(c2, n_bins)
    return _compare_binned(c1, z1, b1, (c1 - z1) ** 2, c2, z2, b2, (c2 - z2) ** 2, n_bins)


def _compare_binned(
    c1: np.ndarray,
    z1: np.ndarray,
    b1: np.ndarray,
    q1: np.ndarray,
    c2: np.ndarray,
    z2: np.ndarray,
    b2: np.ndarray,
    q2: np.ndarray,
    n_bins: int,
) -> JudgeComparison:
    """:func:`compare_judges` on validated arrays with each item's equal-width bin (``b1``, ``b2``)
    and squared error ``(c - z) ** 2`` (``q1``, ``q2``) given: a resample gathers its items' bins
    and squared errors instead of computing them again, and every score is the same float (both
    depend on their item alone)."""
    n = c1.size
    a1, a2 = float(z1.mean()), float(z2.mean())

    raw = ViewScores(_ece(c1, z1, b1, n_bins), _ece(c2, z2, b2, n_bins), _brier(q1), _brier(q2), n)

    same = z1 == z2
    n_ia = int(same.sum())
    n_br = int(np.count_nonzero(same & (z1 == 1.0)))
    if n_ia:
        ia = ViewScores(
            _ece(c1[same], z1[same], b1[same], n_bins),
            _ece(c2[same], z2[same], b2[same], n_bins),
            _brier(q1[same]),
            _brier(q2[same]),
            n_ia,
        )
    else:
        ia = ViewScores(math.nan, math.nan, math.nan, math.nan, 0)

    if a1 == a2:
        more, da = None, raw
    else:
        more = 1 if a1 > a2 else 2
        c_hi, z_hi, b_hi_index, q_hi = (c1, z1, b1, q1) if more == 1 else (c2, z2, b2, q2)
        w = _da_weights(z_hi, max(a1, a2), min(a1, a2))
        if w is None:
            e_hi = b_hi = math.nan
        else:
            e_hi, b_hi = _ece(c_hi, z_hi, b_hi_index, n_bins, w), _brier(q_hi, w)
        if more == 1:
            da = ViewScores(e_hi, raw.ece_2, b_hi, raw.brier_2, n)
        else:
            da = ViewScores(raw.ece_1, e_hi, raw.brier_1, b_hi, n)

    reversals: dict[str, bool] = {}
    for metric in ("ece", "brier"):
        raw_winner = raw.winner(metric)
        for name, view in (("instance_aligned", ia), ("distribution_aligned", da)):
            aligned = view.winner(metric)
            reversals[f"{metric}/{name}"] = (
                raw_winner is not None and aligned is not None and aligned != raw_winner
            )
    return JudgeComparison(a1, a2, more, raw, ia, da, n_br, n_ia - n_br, reversals)


COMPARED_METRICS = ("ece", "brier")
VIEWS = ("raw", "instance_aligned", "distribution_aligned")


@dataclass(frozen=True)
class ViewDifference:
    """One metric under one view: both judges' scores, their difference with an interval, the order.

    ``difference`` is score_1 - score_2 (lower is better, so a negative difference favours judge
    1); ``interval`` is its paired bootstrap interval (items resampled jointly, every view
    recomputed on each resample, DA weights included). ``flips`` is True when this view's winner is
    not the raw winner (always False for the raw view).
    """

    metric: str
    view: str
    score_1: float
    score_2: float
    interval: BootstrapInterval
    flips: bool

    @property
    def difference(self) -> float:
        return self.interval.estimate

    @property
    def excludes_zero(self) -> bool:
        """The interval lies wholly on one side of 0: the order is more than resampling noise."""
        return self.interval.low > 0.0 or self.interval.high < 0.0


@dataclass(frozen=True)
class ComparisonEvidence:
    """:func:`compare_judges` plus the bootstrap evidence for each (metric, view)."""

    comparison: JudgeComparison
    differences: dict[tuple[str, str], ViewDifference]

    def reversals(self) -> list[tuple[str, str]]:
        """(metric, aligned view) where the raw difference's interval excludes 0 and that view flips.

        Only these are reported as ranking reversals: a raw order that resampling can undo is not
        a ranking to reverse.
        """
        found = []
        for metric in COMPARED_METRICS:
            if not self.differences[(metric, "raw")].excludes_zero:
                continue
            for view in VIEWS[1:]:
                if self.differences[(metric, view)].flips:
                    found.append((metric, view))
        return found


def _view_scores(result: JudgeComparison, view: str, metric: str) -> tuple[float, float]:
    scores = getattr(result, view)
    return getattr(scores, f"{metric}_1"), getattr(scores, f"{metric}_2")


def compare_judges_with_intervals(
    conf_1: Any,
    correct_1: Any,
    conf_2: Any,
    correct_2: Any,
    *,
    n_bins: int = 10,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> ComparisonEvidence:
    """:func:`compare_judges` with a paired bootstrap interval for every difference of scores.

    Items are resampled jointly for both judges, so what the judges have in common (the items)
    cancels out of the difference. Resamples where a view is undefined (no item for IA, no wrong
    item for DA) are dropped for that view. Intervals are :func:`interval_from_stats` hulls, which
    contain their own difference. Past :data:`~.bootstrap.LARGE_CELLS` resamples x items the
    resamples are drawn over cells (:func:`~.paired_cells.comparison_cell_stats`: the item-level
    intervals up to Monte Carlo error, as ``eval``'s large rows) unless the cells in use are too
    many (:data:`~.paired_cells.MAX_CELL_DRAWS`).
    """
    result = compare_judges(conf_1, correct_1, conf_2, correct_2, n_bins=n_bins)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be an integer >= 1, got {n_resamples!r}")
    c1, z1 = check_pair(conf_1, correct_1)
    c2, z2 = check_pair(conf_2, correct_2)
    n_bins = check_n_bins(n_bins)
    keys = [(metric, view) for metric in COMPARED_METRICS for view in VIEWS]
    stats = None
    if c1.size * n_resamples > LARGE_CELLS:  # resamples drawn over cells, as eval's large rows are
        stats = comparison_cell_stats(c1, z1, c2, z2, n_bins=n_bins, n_resamples=n_resamples, seed=seed)
    if stats is None:  # small, or too many cells in use (MAX_CELL_DRAWS): items resampled
        stats = _item_stats(c1, z1, c2, z2, keys, n_bins=n_bins, n_resamples=n_resamples, seed=seed)
    differences = {}
    for metric, view in keys:
        s1, s2 = _view_scores(result, view, metric)
        interval = interval_from_stats(s1 - s2, stats[(metric, view)], level=level, bounds=(-1.0, 1.0), n_resamples=n_resamples)
        raw_winner, winner = result.raw.winner(metric), getattr(result, view).winner(metric)
        flips = view != "raw" and raw_winner is not None and winner is not None and winner != raw_winner
        differences[(metric, view)] = ViewDifference(metric, view, s1, s2, interval, flips)
    return ComparisonEvidence(result, differences)


def _item_stats(
    c1: np.ndarray,
    z1: np.ndarray,
    c2: np.ndarray,
    z2: np.ndarray,
    keys: list[tuple[str, str]],
    *,
    n_bins: int,
    n_resamples: int,
    seed: int,
) -> dict[tuple[str, str], np.ndarray]:
    """The paired bootstrap's differences per ``(metric, view)``, items resampled one by one:
    every view recomputed on each resample (each item's bin and squared error gathered)."""
    b1, b2 = equal_width_bin_index(c1, n_bins), equal_width_bin_index(c2, n_bins)
    q1, q2 = (c1 - z1) ** 2, (c2 - z2) ** 2
    rng = np.random.default_rng(seed)
    stats = {key: np.empty(n_resamples) for key in keys}
    for b in range(n_resamples):
        idx = rng.integers(0, c1.size, size=c1.size)
        resampled = _compare_binned(c1[idx], z1[idx], b1[idx], q1[idx], c2[idx], z2[idx], b2[idx], q2[idx], n_bins)
        for metric, view in keys:
            s1, s2 = _view_scores(resampled, view, metric)
            stats[(metric, view)][b] = s1 - s2
    return stats
