"""One-sided beta-mixture e-values for the mean of a [0, 1] stream, and their inversion.

The time-uniform building block of the anytime-valid monitors (:mod:`.sequential`,
:mod:`.drift`). It is Robbins' (1970) conjugate mixture for a Bernoulli mean ("Statistical
methods related to the law of the iterated logarithm", Ann. Math. Statist. 41), in the form of
Howard, Ramdas, McAuliffe & Sekhon (2021, "Time-uniform, nonparametric, nonasymptotic
confidence sequences", Ann. Statist. 49, section 3: the beta-binomial boundary), made
one-sided by putting the prior only on the alternatives.

**The e-value against "mean >= m".** For observations ``x_1..x_n`` in [0, 1] with sum ``S`` and
``F = n - S``, and a ``Beta(a, b)`` prior density ``pi`` restricted to ``q in (0, m)``:

    M_n(m) = integral_0^m pi(q) * (q / m)^S * ((1 - q) / (1 - m))^F dq
           = B(a + S, b + F) * I_m(a + S, b + F) / (B(a, b) * m^S * (1 - m)^F)

(``I`` the regularised incomplete beta function). Why it is a nonnegative supermartingale with
``M_0 <= 1`` whenever every conditional mean ``E[x_i | past] >= m`` (the mean may change over
time; it only has to stay at or above ``m``): for a fixed ``q < m`` one factor
``g(x) = (q/m)^x ((1-q)/(1-m))^(1-x)`` is convex in ``x``, so for ``x`` in [0, 1] with mean
``mu``, ``E g(x) <= mu q/m + (1 - mu)(1 - q)/(1 - m)``, which equals 1 at ``mu = m`` and falls
as ``mu`` grows. Averaging over ``q`` (prior mass below ``m`` is <= 1) keeps the property, and
Ville's inequality gives ``P(sup_n M_n(m) >= 1/alpha) <= alpha``: a test of ``mean >= m`` that
may be read after every observation. Bernoulli data are the extreme case of the convexity step,
so bounded real data (a Brier score, a confidence) are covered by the same formula with a real
``S``. The e-value against "mean <= m" is the mirror image (prior on ``(m, 1)``, ``1 - I_m``).

**Inversion.** For ``m >= S/n`` the e-value ``M_n(m)`` is non-decreasing in ``m`` (every factor
grows there and so does the prior range), so ``{m : M_n(m) < 1/alpha}`` above the mean is an
interval ``[S/n, upper)``: :func:`mixture_upper` finds ``upper`` by bisection, and the mirrored
:func:`mixture_lower` the lower end. "The upper bound is below the target" and "the e-value at
the target reached ``1/alpha``" are the same event, which is why monitors test the e-value at the
target directly (one special-function call) and only invert when a report asks for bounds.

All functions broadcast over numpy arrays: the scalar monitor and the many-stream benchmark call
the very same code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import betainc, betaincc, betaln

__all__ = [
    "DEFAULT_PRIOR",
    "check_prior",
    "log_evalue_above",
    "log_evalue_below",
    "mixture_lower",
    "mixture_upper",
]

#: Beta(1, 1): the uniform (Laplace) mixing prior, for bounds with no preferred alternative.
#: The precision monitor centres its prior on the drops it should catch first
#: (:func:`~.sequential.precision_prior`).
DEFAULT_PRIOR: tuple[float, float] = (1.0, 1.0)

_BISECT_STEPS = 60  # interval width 2^-60: below float resolution near any mean in (0, 1)


def check_prior(prior: Any) -> tuple[float, float]:
    """``prior`` must be two finite positive numbers ``(a, b)`` of a Beta distribution."""
    try:
        a, b = (float(v) for v in prior)
    except (TypeError, ValueError):
        raise ValueError(f"prior must be a pair (a, b) of positive numbers, got {prior!r}") from None
    if not (np.isfinite(a) and np.isfinite(b) and a > 0 and b > 0):
        raise ValueError(f"prior must be a pair (a, b) of positive numbers, got {prior!r}")
    return a, b


def _log_parts(sums: Any, counts: Any, m: Any, prior: tuple[float, float]):
    s = np.asarray(sums, dtype=np.float64)
    f = np.asarray(counts, dtype=np.float64) - s
    f = np.maximum(f, 0.0)  # float noise on real-valued sums, never a real negative count
    m = np.asarray(m, dtype=np.float64)
    a, b = prior
    log_ratio = betaln(a + s, b + f) - betaln(a, b) - s * np.log(m) - f * np.log1p(-m)
    return s, f, m, log_ratio


def log_evalue_below(
    sums: Any, counts: Any, m: Any, *, prior: tuple[float, float] = DEFAULT_PRIOR
) -> np.ndarray:
    """``log M_n(m)``: the log e-value that the mean is BELOW ``m`` (null: mean >= m).

    ``sums``, ``counts`` (``n``) and ``m`` in (0, 1) broadcast. ``-inf`` where the evidence is
    nil to float precision (far above ``m``); an empty window (``n = 0``) gives
    ``log I_m(a, b) <= 0``.
    """
    s, f, m, log_ratio = _log_parts(sums, counts, m, prior)
    with np.errstate(divide="ignore"):
        return log_ratio + np.log(betainc(prior[0] + s, prior[1] + f, m))


def log_evalue_above(
    sums: Any, counts: Any, m: Any, *, prior: tuple[float, float] = DEFAULT_PRIOR
) -> np.ndarray:
    """The mirror of :func:`log_evalue_below`: log e-value that the mean is ABOVE ``m``."""
    s, f, m, log_ratio = _log_parts(sums, counts, m, prior)
    with np.errstate(divide="ignore"):
        return log_ratio + np.log(betaincc(prior[0] + s, prior[1] + f, m))


def _bisect(fn, lo: np.ndarray, hi: np.ndarray, *, rising: bool) -> np.ndarray:
    """Vectorised bisection of the boundary of a monotone predicate ``fn(x)`` on [lo, hi].

    ``rising``: ``fn`` is False below the boundary and True above it; returns the upper end of
    the final bracket (a point where ``fn`` holds, when it holds anywhere). Otherwise the mirror.
    """
    lo, hi = lo.copy(), hi.copy()
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        hit = fn(mid)
        if rising:
            hi = np.where(hit, mid, hi)
            lo = np.where(hit, lo, mid)
        else:
            lo = np.where(hit, mid, lo)
            hi = np.where(hit, hi, mid)
    return hi if rising else lo


def mixture_upper(
    sums: Any, counts: Any, log_threshold: Any, *, prior: tuple[float, float] = DEFAULT_PRIOR
) -> np.ndarray:
    """Upper confidence bound: the smallest ``m`` whose below-e-value reaches ``log_threshold``.

    ``log_threshold = log(1 / alpha)`` for a single sequence. 1.0 where no ``m < 1`` is
    rejected (e.g. no failures yet); 1.0 for an empty window.
    """
    s, n, thr = np.broadcast_arrays(
        np.asarray(sums, float), np.asarray(counts, float), np.asarray(log_threshold, float)
    )
    mean = np.where(n > 0, s / np.where(n > 0, n, 1.0), 0.0)
    hi_edge = np.full(s.shape, np.nextafter(1.0, 0.0))
    reject_near_one = log_evalue_below(s, n, hi_edge, prior=prior) >= thr
    out = _bisect(lambda m: log_evalue_below(s, n, m, prior=prior) >= thr,
                  np.clip(mean, 1e-300, hi_edge), hi_edge, rising=True)
    return np.where(reject_near_one & (n > 0), out, 1.0)


def mixture_lower(
    sums: Any, counts: Any, log_threshold: Any, *, prior: tuple[float, float] = DEFAULT_PRIOR
) -> np.ndarray:
    """Lower confidence bound: the mirror of :func:`mixture_upper` (0.0 where nothing is rejected)."""
    s, n, thr = np.broadcast_arrays(
        np.asarray(sums, float), np.asarray(counts, float), np.asarray(log_threshold, float)
    )
    mean = np.where(n > 0, s / np.where(n > 0, n, 1.0), 1.0)
    lo_edge = np.full(s.shape, np.nextafter(0.0, 1.0))
    reject_near_zero = log_evalue_above(s, n, lo_edge, prior=prior) >= thr
    out = _bisect(lambda m: log_evalue_above(s, n, m, prior=prior) >= thr,
                  lo_edge, np.clip(mean, lo_edge, np.nextafter(1.0, 0.0)), rising=False)
    return np.where(reject_near_zero & (n > 0), out, 0.0)
