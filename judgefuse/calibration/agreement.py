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
from collections.abc import Sequence

import numpy as np

__all__ = ["cohen_kappa", "confusion_matrix", "krippendorff_alpha_nominal"]


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
    n = len(first)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    counts_a, counts_b = Counter(first), Counter(second)
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
