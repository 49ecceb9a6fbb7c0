"""Variance-adaptive one-sided e-values for the mean of a [0, 1] stream, from three sums.

The beta mixture of :mod:`.mixture_bound` is exact for 0/1 labels but treats a real-valued
stream (a Brier score, a confidence) as if it had the largest variance a [0, 1] variable with
that mean can have: for confidences around 0.75 with spread 0.15 it is ~8x too wide in variance.
This family adapts to the observed spread and still needs only ``(sum, sum of squares, count)``
per window, so it rides the same restart engine.

**The e-value against "mean >= m"** (evidence the mean is below ``m``). With ``xi_i = m - x_i``
(which is ``>= -1`` for ``x`` in [0, 1]), Fan, Grama & Liu (2015, "Exponential inequalities for
martingales with applications", Electron. J. Probab. 20, Lemma 4.1 / eq. 4.11) give, for
``lambda`` in [0, 1),

    exp(lambda xi - psi(lambda) xi^2) <= 1 + lambda xi,      psi(lambda) = -log(1 - lambda) - lambda,

so when ``E[x_i | past] >= m`` (``E[xi_i | past] <= 0``) each ``exp(lambda sum xi - psi(lambda) sum
xi^2)`` is a nonnegative supermartingale starting at 1 (the "empirical Bernstein" supermartingale
of Howard et al. 2021, Ann. Statist. 49, and Waudby-Smith & Ramdas 2023, JRSS-B 86, here centred
at the tested mean instead of a running estimate, which is what makes three sums enough). An
equal-weight mixture over the ``lambda`` grid :data:`LAMBDAS` keeps the property, and
``sum xi = n m - S`` and ``sum xi^2 = Q - 2 m S + n m^2`` need only ``S = sum x``, ``Q = sum x^2``.
The "above" side is the mirror (``xi = x - m``).

Bounds: the e-value is not monotone in ``m`` for every ``lambda``, so :func:`bernstein_bounds`
inverts on a grid of ``m`` (a report helper); alarms test a fixed ``m`` directly.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

__all__ = ["LAMBDAS", "bernstein_bounds", "log_evalue_bernstein"]

#: Betting fractions 0.9, 0.45, ... ~4e-4: the mixture is within ~log(12) of the best single
#: fraction for effects from ~0.5 down to ~1e-3 of the range.
LAMBDAS = 0.9 * 2.0 ** -np.arange(12)
_PSI = -np.log1p(-LAMBDAS) - LAMBDAS
_LOG_WEIGHT = -np.log(LAMBDAS.size)


def log_evalue_bernstein(
    sums: Any, squares: Any, counts: Any, m: Any, *, side: Literal["below", "above"]
) -> np.ndarray:
    """Log e-value that the mean is below (``side='below'``) or above ``m``; broadcasts."""
    s, q, n, m = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                       for v in (sums, squares, counts, m)))
    drift = n * m - s if side == "below" else s - n * m
    spread = np.maximum(q - 2.0 * m * s + n * m * m, 0.0)  # float noise only
    shape = (-1,) + (1,) * drift.ndim
    terms = LAMBDAS.reshape(shape) * drift - _PSI.reshape(shape) * spread
    top = terms.max(axis=0)
    return top + np.log(np.exp(terms - top).sum(axis=0)) + _LOG_WEIGHT


def bernstein_bounds(
    sums: Any, squares: Any, counts: Any, log_threshold: Any, *, grid: int = 2001
) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)``: the outermost grid means not rejected on either side.

    Computed on ``grid`` equally spaced means in (0, 1); conservative by at most one grid step.
    Windows with no observations give ``(0, 1)``.
    """
    s, q, n, thr = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                         for v in (sums, squares, counts, log_threshold)))
    ms = np.linspace(0.0, 1.0, grid + 2)[1:-1].reshape((-1,) + (1,) * s.ndim)
    below = log_evalue_bernstein(s, q, n, ms, side="below") >= thr  # rejects "mean >= m"
    above = log_evalue_bernstein(s, q, n, ms, side="above") >= thr  # rejects "mean <= m"
    kept = ~(below | above)
    any_kept = kept.any(axis=0)
    flat = ms.reshape(-1)
    mean = s / np.where(n > 0, n, 1.0)  # a sequence tighter than the grid: fall back on it
    first = np.where(any_kept, flat[np.argmax(kept, axis=0)], mean)
    last = np.where(any_kept, flat[grid - 1 - np.argmax(kept[::-1], axis=0)], mean)
    step = 1.0 / (grid + 1)
    lower = np.where(n > 0, np.maximum(first - step, 0.0), 0.0)
    upper = np.where(n > 0, np.minimum(last + step, 1.0), 1.0)
    return lower, upper
