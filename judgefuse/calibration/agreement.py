"""Agreement between raters on categorical answers: Cohen's kappa, confusion matrices and
Krippendorff's alpha (nominal), for "how far does a judge agree with the humans" reports.

Pure numerics over string categories (``"A"``, ``"B"``, ``"tie"``, or anything else the caller
uses, e.g. ``"none"`` for no answer). The definitions are the textbook ones, checked against
scikit-learn's ``cohen_kappa_score`` and the ``krippendorff`` package in the tests:

* **Cohen's kappa**: ``(p_o - p_e) / (1 - p_e)`` with ``p_o`` the share of items where the two
  raters agree and ``p_e`` the agreement expected by chance from each rater's own marginals.
  When ``p_e`` is 1 (both raters used one and the same category throughout) kappa is undefined:
  None.
* **Krippendorff's alpha** (nominal): ``1 - D_o / D_e`` over the coincidence matrix of every unit
  with at least two ratings (missing ratings allowed); None when there is no disagreement
  expected (a single category in all pairable values).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "alpha_from_coincidence",
    "cohen_kappa",
    "cohen_kappa_counts",
    "confusion_matrix",
    "krippendorff_alpha_counts",
    "krippendorff_alpha_nominal",
]


def confusion_matrix(truth: Sequence[str], predicted: Sequence[str], classes: Sequence[str]) -> list[list[int]]:
    """Counts ``[i][j]`` of items whose truth is ``classes[i]`` and prediction ``classes[j]``."""
    if len(truth) != len(predicted):
        raise ValueError(f"{len(truth)} true values for {len(predicted)} predictions")
    index = {name: i for i, name in enumerate(classes)}
    matrix = [[0] * len(classes) for _ in classes]
    for t, p in zip(truth, predicted, strict=True):
        if t not in index or p not in index:
            raise ValueError(f"value {t if t not in index else p!r} is not one of the classes {list(classes)}")
        matrix[index[t]][index[p]] += 1
    return matrix


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """Cohen's kappa between two raters over the same items (None when it is undefined)."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} ratings against {len(second)}")
    return cohen_kappa_counts(Counter(zip(first, second, strict=True)))


def cohen_kappa_counts(pairs: Mapping[tuple[str, str], int]) -> float | None:
    """:func:`cohen_kappa` from how many items each (first, second) pair of ratings has (the
    same integer sums, so the same float)."""
    n = sum(pairs.values())
    if n == 0:
        return None
    observed = sum(count for (a, b), count in pairs.items() if a == b) / n
    counts_a: Counter[str] = Counter()
    counts_b: Counter[str] = Counter()
    for (a, b), count in pairs.items():
        counts_a[a] += count
        counts_b[b] += count
    expected = sum(counts_a[c] * counts_b[c] for c in counts_a) / (n * n)
    if np.isclose(expected, 1.0, rtol=0.0, atol=1e-15):
        return None
    return float((observed - expected) / (1.0 - expected))


def krippendorff_alpha_nominal(units: Sequence[Sequence[str | None]]) -> float | None:
    """Krippendorff's alpha for nominal data; each unit lists its raters' values (None: missing)."""
    coincidence: dict[tuple[str, str], float] = {}
    for unit in units:
        values = [v for v in unit if v is not None]
        m = len(values)
        if m < 2:
            continue
        counts = Counter(values)
        for c, n_c in counts.items():
            for k, n_k in counts.items():
                pairs = n_c * (n_c - 1) if c == k else n_c * n_k
                if pairs:
                    coincidence[(c, k)] = coincidence.get((c, k), 0.0) + pairs / (m - 1)
    return alpha_from_coincidence(coincidence)


def krippendorff_alpha_counts(counts: NDArray[np.int64], categories: Sequence[str]) -> float | None:
    """:func:`krippendorff_alpha_nominal` of units given as counts: ``counts[u, c]`` raters gave
    unit ``u`` the value ``categories[c]``. Each coincidence cell is summed over the units in order
    (a cumulative sum), as the per-unit loop adds it, so with two categories (eval's A and B: every
    other sum then has two terms) the value is that function's to the bit."""
    counts = np.asarray(counts, dtype=np.int64)
    m = counts.sum(axis=1)
    pairable = m >= 2
    counts, m = counts[pairable], m[pairable]
    coincidence: dict[tuple[str, str], float] = {}
    seen: dict[tuple[str, str], int] = {}
    for i, c in enumerate(categories):
        for j, k in enumerate(categories):
            pairs = counts[:, i] * (counts[:, i] - 1) if i == j else counts[:, i] * counts[:, j]
            nonzero = np.flatnonzero(pairs)
            if nonzero.size:
                coincidence[(c, k)] = float(np.cumsum(pairs[nonzero] / (m[nonzero] - 1))[-1])
                seen[(c, k)] = int(nonzero[0])
    # the per-unit loop's dict order: cells by the first unit that has them (ties: category order)
    ordered = sorted(coincidence, key=lambda cell: seen[cell])
    return alpha_from_coincidence({cell: coincidence[cell] for cell in ordered})


def alpha_from_coincidence(coincidence: Mapping[tuple[str, str], float]) -> float | None:
    """Krippendorff's alpha (nominal) from its coincidence matrix (cells with a value)."""
    n_c_totals: dict[str, float] = {}
    for (c, _k), value in coincidence.items():
        n_c_totals[c] = n_c_totals.get(c, 0.0) + value
    total = sum(n_c_totals.values())
    if total <= 1:
        return None
    observed = sum(value for (c, k), value in coincidence.items() if c != k)
    expected = sum(n_c_totals[c] * n_c_totals[k] for c in n_c_totals for k in n_c_totals if c != k) / (total - 1)
    if expected <= 0:
        return None
    return float(1.0 - observed / expected)
