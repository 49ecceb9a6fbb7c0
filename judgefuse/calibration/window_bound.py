"""Finite-population lower bound on the realised precision of a window's accepted verdicts.

What it bounds (docs/design.md, 'The review loop'): not the precision of future traffic but the
precision of the verdicts *of this window* that a threshold accepts. A window is a fixed, known
set: stratum ``s`` (``review``, ``auto@r``, ...) holds ``N_s`` verdicts, all with a confidence,
of which ``n_s`` were labelled at random. For a candidate ``tau`` the accepted count
``M_s`` (verdicts with confidence >= ``tau``) is then *observed*, not estimated; only the number
``D_s`` of errors among them is unknown, and

    window precision = 1 - sum_s D_s / sum_s M_s.

* Conditional on ``A_s`` (labelled accepted verdicts), the labelled accepted set is a simple
  random sample without replacement of the ``M_s`` accepted verdicts, so its error count is
  ``E_s ~ Hypergeometric(M_s, D_s, A_s)``; :func:`hypergeom_upper` inverts it exactly: the largest
  ``D`` with ``P(X <= E_s) > alpha``. Sampling a large part of a small stratum pays: 10 of 30 all
  right bounds ``D`` at 5 (90%), where Clopper-Pearson's rate bound gives ``0.206 * 30 = 6.2``.
* A stratum labelled in full (a census) has ``D_s = E_s`` exactly and spends no delta; a stratum
  with accepted verdicts but no accepted label takes ``D_s <= M_s``, which holds surely.
* The sampled strata with an accepted label share delta (weighted Bonferroni) in proportion to
  their part in the standard error of the accepted error count, ``M_s sqrt((1 - A_s/M_s)/A_s)``:
  counts and confidences only, never labels, so the split is fixed before the labels are read.
  With one such stratum it takes all of delta and the bound is the exact hypergeometric one.
* No delta goes to the stratum weights and there is no worst case over a box: the ``M_s`` are
  counts, known exactly.

The guarantee, precisely: ``P(window precision < bound) <= delta`` over the random choice of
labels, for any fixed window. It says nothing at level delta about future traffic: the window's
accepted verdicts are themselves a sample of the traffic, and their precision scatters around
the traffic's by ``sqrt(p (1 - p) / M)``; a future-precision claim must add that (binomial) term,
which is what :func:`~.stratified_tuning.stratified_precision_lower_bound` does.
``benchmarks/bench_precision_bound.py`` prints both failure rates for this bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import beta, hypergeom

__all__ = ["hypergeom_upper", "window_error_shares", "window_precision_lower_bound"]


def hypergeom_upper(errors: Any, drawn: Any, total: Any, alpha: Any) -> np.ndarray:
    """Largest number of errors ``D`` among ``total`` items not rejected at level ``alpha``.

    ``errors`` of ``drawn`` items sampled without replacement were wrong; ``D`` is rejected when
    ``P(Hypergeometric(total, D, drawn) <= errors) <= alpha``. Broadcasts; ``drawn == 0`` gives
    ``total`` (nothing is known about the unsampled items). Exact inversion by bisection on ``D``
    (the tail probability decreases in ``D``), O(log total) vectorised steps.
    """
    e, a, m, lv = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                        for v in (errors, drawn, total, alpha)))
    if ((e < 0) | (e > a) | (a > m)).any():
        raise ValueError("need 0 <= errors <= drawn <= total")
    lo = e.copy()  # D = errors is never rejected: then X <= errors surely
    hi = m - (a - e)  # the unsampled items all wrong: the largest D the sample allows
    # invariant: lo is not rejected (or is the floor), every D > hi is impossible or rejected
    while True:
        open_ = hi > lo
        if not open_.any():
            break
        mid = np.floor((lo + hi + 1.0) / 2.0)
        mid = np.where(open_, mid, lo)
        p = hypergeom.cdf(e, m, mid, a)
        keep = open_ & (p > lv)
        cut = open_ & ~keep
        lo = np.where(keep, mid, lo)
        hi = np.where(cut, mid - 1.0, hi)
    return np.where(a > 0, lo, m)


def window_error_shares(accepted_labels: np.ndarray, accepted_total: np.ndarray,
                        census: np.ndarray) -> np.ndarray:
    """How delta is shared among the strata's error bounds (rows sum to 1 over sampled strata).

    In proportion to ``M_s sqrt((1 - A_s/M_s)/A_s)``, the stratum's part in the standard error of
    the accepted error count under sampling without replacement; census strata and strata with
    no accepted label need no statement and get nothing (module docstring).
    """
    a, m = accepted_labels, accepted_total
    live = (a > 0) & ~census
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(live, m * np.sqrt(np.maximum(1.0 - a / np.where(m > 0, m, 1.0), 0.0)
                                           / np.where(a > 0, a, 1.0)), 0.0)
    # a stratum whose accepted verdicts are all labelled has no error left to bound
    total = score.sum(axis=1, keepdims=True)
    return np.divide(score, total, out=np.zeros_like(score), where=total > 0)


def window_precision_lower_bound(
    accepted: Any, errors: Any, labels: Any, population: Any, accepted_population: Any, *,
    delta: float, future_share: float = 0.0,
) -> np.ndarray:
    """Lower bound (level 1 - delta) on the window's accepted precision; see the module doc.

    ``accepted``/``errors``: shape (cands, S), labelled accepted and accepted-and-wrong counts per
    candidate and stratum; ``labels``/``population``: shape (S,), ``n_s`` and ``N_s``;
    ``accepted_population``: shape (cands, S), ``M_s``, the stratum's verdicts (labelled or not)
    the candidate accepts. A candidate that accepts nothing gets 1 (vacuous). Returns (cands,).
    """
    a = np.atleast_2d(np.asarray(accepted, dtype=np.float64))
    e = np.atleast_2d(np.asarray(errors, dtype=np.float64))
    m = np.atleast_2d(np.asarray(accepted_population, dtype=np.float64))
    n = np.asarray(labels, dtype=np.float64)
    big_n = np.asarray(population, dtype=np.float64)
    if m.shape != a.shape or e.shape != a.shape:
        raise ValueError(f"accepted, errors and accepted_population must share a shape, got "
                         f"{a.shape}, {e.shape}, {m.shape}")
    if (a > m).any():
        raise ValueError("a stratum has more labelled accepted verdicts than accepted verdicts")
    census = np.broadcast_to(n >= big_n, a.shape)
    shares = window_error_shares(a, m, census)
    sampled = (a > 0) & ~census & (a < m)
    level = np.where(sampled, delta * (1.0 - future_share) * shares, 1.0)
    upper = np.where(sampled, hypergeom_upper(e, a, m, np.where(sampled, level, 0.5)), 0.0)
    upper = np.where(census | (a == m), e, upper)  # every accepted verdict labelled: exact
    upper = np.where((a == 0) & ~census, m, upper)  # nothing known: all may be wrong
    total = m.sum(axis=1)
    wrong = upper.sum(axis=1)
    if future_share > 0.0:
        return 1.0 - binomial_upper(wrong, total, delta * future_share)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, 1.0 - wrong / np.where(total > 0, total, 1.0), 1.0)


def binomial_upper(k: np.ndarray, n: np.ndarray, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound of k/n at level 1 - alpha (1 where k >= n or n == 0)."""
    k, n = np.broadcast_arrays(np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64))
    out = np.ones(k.shape)
    ok = (k < n) & (n > 0)
    out[ok] = beta.ppf(1.0 - alpha, k[ok] + 1.0, n[ok] - k[ok])
    return out
