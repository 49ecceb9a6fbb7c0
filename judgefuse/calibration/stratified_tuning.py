"""Auto-accept threshold from stratified labels, with a precision guarantee (docs/design.md, 'The review loop').

:func:`~judgefuse.calibration.tune_threshold` assumes its labelled items are a uniform sample of
traffic. Review-loop labels are not: stratum ``s`` (``review``, ``auto@r``, ...) has ``N_s``
verdicts of which ``n_s`` were labelled at random. :func:`tune_threshold_stratified` picks the
smallest ``tau`` with

    P( precision of the verdicts with confidence >= tau  >=  target ) >= 1 - delta

where precision is over traffic with the stratum mix ``pi_s = N_s / N`` (the mix is taken as
known: its own sampling noise is not in the bound; the simulations check the guarantee with it).

The bound for one candidate ``tau``. In stratum ``s`` let ``a_s`` be the share of its verdicts
accepted (``c >= tau``) and ``q_s`` the error rate among them; labelled: ``A_s`` accepted, ``E_s``
of them wrong. The accepted traffic's error rate is the mixture

    err = sum_s alpha_s q_s,   alpha_s = pi_s a_s / sum_t pi_t a_t.

* Conditional on ``A_s``, ``E_s ~ Binomial(A_s, q_s)``: ``U_s`` = one-sided Clopper-Pearson upper
  bound on ``q_s`` at level ``delta_q / S_acc``, where ``S_acc`` counts the strata with at least
  one accepted label. Which strata accept labels depends on confidences only, never on
  labels, so the split is fixed before the labels are looked at; a stratum with ``A_s = 0``
  takes ``U_s = 1``, which holds surely.
* ``a_s`` lies in ``[La_s, Ua_s]``, Clopper-Pearson bounds from ``A_s`` of ``n_s`` (``[0, 1]`` when
  the stratum has no labels): two-sided at ``delta_a / (2S)`` per side, except for strata with
  ``A_s = 0``, whose ``U_s = 1`` always puts their weight at the upper end, so only the upper
  bound is used, at ``delta_a / S``.
* ``err <= max { sum_s alpha_s U_s : a_s in [La_s, Ua_s] }``, a linear-fractional maximum over a
  box, reached at a vertex where the strata with the largest ``U_s`` take ``Ua_s`` and the rest
  ``La_s`` (found exactly by trying the S + 1 splits of the strata sorted by ``U_s``).
* The lower bound on precision is ``1 - that maximum``; the union bound over the statements
  gives level ``delta = delta_q + delta_a``. With one stratum ``alpha = 1`` and all of ``delta``
  goes to ``q`` (``delta_q = delta``): the bound is then exactly :func:`tune_threshold`'s. With
  several strata ``delta_q = delta_a = delta / 2``.

Why not ``1 - sum_s N_s U(E_s/n_s) / sum_s N_s L(A_s/n_s)`` (bounds on the accepted-and-wrong and
accepted shares)? It is valid too but bounds the two shares separately although they move
together: on one fully labelled stratum of 100 items at precision 0.93 it loses ~8 points of
precision, so review-loop tuning on the first few hundred labels would never certify anything.
Conditioning on ``A_s`` removes that loss for the error rate; only the mixing weights pay.

How conservative: Bonferroni over 2S statements (S = number of strata with verdicts), the
worst case over the weight box, and Clopper-Pearson's own conservativeness. Labels are sampled
without replacement within a stratum; the binomial bounds are then conservative for the window
and exact for traffic drawn from the same distribution. A stratum with verdicts but no labels
keeps ``U_s = 1`` and ``a_s in [0, 1]``: it can only lower the bound (usually to no threshold).

The scan is :func:`tune_threshold`'s: candidates are the distinct labelled confidences (thinned
to ``max_candidates`` quantiles), tested from HIGH to LOW with fixed-sequence testing (stop at
the first failure, answer the last pass). A candidate whose accepted set holds fewer than
``min_count`` *labelled* items is skipped; which are skipped depends on confidences and strata,
never on labels, so the conditional argument of :mod:`.thresholds` carries over unchanged.

Report fields (:class:`ThresholdReport`): ``n`` labels; ``n_accepted`` labelled items accepted
at the answer; ``precision`` the stratified estimate ``1 - sum_s N_s E_s/n_s / sum_s N_s A_s/n_s``;
``coverage`` the estimated share of the population accepted ``sum_s (N_s/N) A_s/n_s``;
``review_load = 1 - coverage``; ``expected_errors`` the estimated number of errors among the
population's accepted verdicts ``sum_s N_s E_s / n_s``; ``path`` the tested candidates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.stats import beta

from .thresholds import ScanStep, ThresholdReport, check_unit_open, first_reachable, threshold_candidates
from .validation import check_pair

__all__ = ["stratified_precision_lower_bound", "tune_threshold_stratified"]


def _cp_upper(k: np.ndarray, n: np.ndarray, alpha: Any) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound of k/n at level 1 - alpha (1 where k == n or n == 0).

    ``alpha`` broadcasts against ``k`` and ``n``.
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    out = np.ones(np.broadcast(k, n).shape)
    level = np.broadcast_to(np.asarray(alpha, dtype=np.float64), out.shape)
    ok = (k < n) & (n > 0)
    kb, nb = np.broadcast_to(k, out.shape), np.broadcast_to(n, out.shape)
    out[ok] = beta.ppf(1.0 - level[ok], kb[ok] + 1.0, nb[ok] - kb[ok])
    return out


def _cp_lower(k: np.ndarray, n: np.ndarray, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower bound of k/n at level 1 - alpha (0 where k == 0)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    out = np.zeros(np.broadcast(k, n).shape)
    ok = k > 0
    out[ok] = beta.ppf(alpha, k[ok], n[ok] - k[ok] + 1.0)
    return out


def _worst_mixture(u: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max over b in [lo, hi] of sum(b u) / sum(b), per row; shapes (cands, S).

    A linear-fractional maximum over a box is reached at a vertex where the coordinates with
    the largest ``u`` sit at ``hi`` and the others at ``lo``: try the S + 1 splits.
    """
    order = np.argsort(-u, axis=1, kind="stable")
    u_s = np.take_along_axis(u, order, axis=1)
    lo_s = np.take_along_axis(lo, order, axis=1)
    hi_s = np.take_along_axis(hi, order, axis=1)
    best = np.zeros(u.shape[0])
    n_strata = u.shape[1]
    for split in range(n_strata + 1):
        b = np.concatenate([hi_s[:, :split], lo_s[:, split:]], axis=1)
        den = b.sum(axis=1)
        num = (b * u_s).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
        best = np.maximum(best, value)
    return best


def stratified_precision_lower_bound(
    accepted: Any, errors: Any, labels: Any, population: Any, *, delta: float
) -> np.ndarray:
    """Lower confidence bound (level 1 - delta) on the accepted set's precision; see the module doc.

    ``accepted``/``errors``: shape (cands, S) labelled accepted and accepted-and-wrong counts per
    candidate and stratum; ``labels``/``population``: shape (S,), ``n_s`` and ``N_s`` (strata with
    ``N_s == 0`` carry no weight). Returns shape (cands,).
    """
    a = np.atleast_2d(np.asarray(accepted, dtype=np.float64))
    e = np.atleast_2d(np.asarray(errors, dtype=np.float64))
    n = np.asarray(labels, dtype=np.float64)
    big_n = np.asarray(population, dtype=np.float64)
    live = big_n > 0
    a, e, n, big_n = a[:, live], e[:, live], n[live], big_n[live]
    n_strata = int(live.sum())
    if n_strata == 0:
        return np.zeros(a.shape[0])
    if n_strata == 1:
        delta_q, delta_a = delta, 0.0
    else:
        delta_q, delta_a = delta / 2.0, delta / 2.0
    # acceptance depends on confidences only, never on labels: a stratum with no accepted
    # label needs no error bound (U = 1 holds surely), so delta_q is split among the others
    with_accepted = np.maximum((a > 0).sum(axis=1, keepdims=True), 1)
    u = _cp_upper(e, a, delta_q / with_accepted)
    if n_strata == 1:
        return 1.0 - u[:, 0]
    nb = np.broadcast_to(n, a.shape)
    # a stratum with no accepted label has U = 1, the largest possible: the worst case always
    # puts its weight at the upper end, so it needs only a one-sided bound (at delta_a / S);
    # the others need both ends (delta_a / 2S each)
    side = np.where(a > 0, delta_a / n_strata / 2.0, delta_a / n_strata)
    la = np.where(nb > 0, _cp_lower(a, nb, delta_a / n_strata / 2.0), 0.0)
    ua = np.where(nb > 0, _cp_upper(a, nb, side), 1.0)
    weight = big_n / big_n.sum()
    return 1.0 - _worst_mixture(u, weight * la, weight * ua)


CENSUS = "census"
"""The stratum that strata labelled in full are pooled into (see :func:`_pool_census`)."""


def _pool_census(names: np.ndarray, population: Mapping[str, int]) -> tuple[np.ndarray, Mapping[str, int]]:
    """Pool the strata labelled in full (a census: as many labels as verdicts) into one.

    Every verdict of their union is labelled, so the union is one stratum sampled in full and
    one pooled bound is valid for it; bounding them apart would only spend more of delta and
    widen the box of stratum weights for nothing (e.g. inline labels of auto-accepted and of
    reviewed verdicts, each a census). With fewer than two such strata nothing changes.
    """
    if not names.size:
        return names, population
    labelled: dict[str, int] = {}
    for name in names.tolist():
        labelled[str(name)] = labelled.get(str(name), 0) + 1
    census = [s for s, n in population.items()
              if not isinstance(n, bool) and isinstance(n, (int, np.integer)) and n > 0
              and labelled.get(s, 0) == n]
    if len(census) < 2 or CENSUS in population:
        return names, population
    pooled = {s: n for s, n in population.items() if s not in census}
    pooled[CENSUS] = int(sum(population[s] for s in census))
    members = set(census)
    return np.asarray([CENSUS if str(s) in members else s for s in names.tolist()], dtype=object), pooled


def tune_threshold_stratified(
    confidence: Any,
    correct: Any,
    stratum: Any,
    population: Mapping[str, int],
    *,
    target_precision: float,
    delta: float,
    min_count: int = 30,
    max_candidates: int = 200,
) -> ThresholdReport:
    """Smallest ``tau`` whose stratified precision bound meets the target (module docstring).

    ``confidence``/``correct``/``stratum``: shape (n,), the labelled verdicts and the stratum
    name of each. ``population``: ``N_s`` for every stratum (labelled or not); a name in
    ``stratum`` missing from ``population``, or more labels than ``N_s``, is a ``ValueError``.
    ``min_count`` and ``max_candidates`` as in :func:`tune_threshold`. Strata labelled in full
    are pooled into one first (:func:`_pool_census`).
    """
    target = check_unit_open("target_precision", target_precision)
    delta = check_unit_open("delta", delta)
    if isinstance(min_count, bool) or not isinstance(min_count, (int, np.integer)) or min_count < 1:
        raise ValueError(f"min_count must be an integer >= 1, got {min_count!r}")
    if isinstance(max_candidates, bool) or not isinstance(max_candidates, (int, np.integer)) \
            or max_candidates < 2:
        raise ValueError(f"max_candidates must be an integer >= 2, got {max_candidates!r}")
    c, z = check_pair(confidence, correct)
    names_arr = np.asarray(stratum)
    if names_arr.shape != c.shape:
        raise ValueError(f"stratum must have shape ({c.size},), got {names_arr.shape}")
    names_arr, population = _pool_census(names_arr, population)
    names = sorted(population)
    index = {name: i for i, name in enumerate(names)}
    big_n = np.empty(len(names))
    for name, i in index.items():
        value = population[name]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"population[{name!r}] must be an integer >= 0, got {value!r}")
        big_n[i] = value
    unknown = sorted({str(s) for s in names_arr.tolist()} - set(index))
    if unknown:
        raise ValueError(f"stratum names {unknown[:5]} are not in population (known: {names})")
    s_idx = np.fromiter((index[s] for s in names_arr.tolist()), dtype=np.intp, count=c.size)
    n_lab = np.bincount(s_idx, minlength=len(names)).astype(np.float64)
    over = np.flatnonzero(n_lab > big_n)
    if over.size:
        i = int(over[0])
        raise ValueError(f"stratum {names[i]!r} has {int(n_lab[i])} labelled verdicts but "
                         f"population {int(big_n[i])}")

    n = c.size
    order = np.argsort(-c, kind="stable")
    c_desc, wrong_desc, s_desc = c[order], 1.0 - z[order], s_idx[order]
    cand = threshold_candidates(c_desc, None, max_candidates)
    n_acc = np.searchsorted(-c_desc, -cand, side="right")
    # per stratum cumulative accepted / wrong counts along the descending order
    one_hot = np.zeros((n, len(names)))
    one_hot[np.arange(n), s_desc] = 1.0
    cum_a = np.vstack([np.zeros(len(names)), np.cumsum(one_hot, axis=0)])
    cum_e = np.vstack([np.zeros(len(names)), np.cumsum(one_hot * wrong_desc[:, None], axis=0)])
    acc_s, err_s = cum_a[n_acc], cum_e[n_acc]  # (cands, S)

    g = np.divide(big_n, n_lab, out=np.zeros(len(names)), where=n_lab > 0)
    pop_acc = acc_s @ g
    pop_err = err_s @ g
    total = big_n.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(pop_acc > 0, 1.0 - pop_err / np.where(pop_acc > 0, pop_acc, 1.0),
                             math.nan)

    tested = n_acc >= min_count
    if tested.any():  # label-free start, as in tune_threshold: skip what cannot pass error-free
        perfect = np.full(cand.size, -np.inf)
        perfect[tested] = stratified_precision_lower_bound(
            acc_s[tested], np.zeros_like(err_s[tested]), n_lab, big_n, delta=delta)
        tested &= np.arange(cand.size) >= first_reachable(tested, perfect, target)
    n_skipped = int((~tested).sum())
    lower = np.full(cand.size, np.nan)
    if tested.any():
        lower[tested] = stratified_precision_lower_bound(
            acc_s[tested], err_s[tested], n_lab, big_n, delta=delta)
    passes = tested & (lower >= target)
    fails = tested & ~passes
    first_fail = int(np.argmax(fails)) if fails.any() else cand.size
    ok = np.flatnonzero(passes[:first_fail])
    stop = min(first_fail + 1, cand.size)
    path = [ScanStep(float(cand[i]), int(n_acc[i]), float(precision[i]), float(lower[i]))
            for i in range(stop) if tested[i]]
    common: dict[str, Any] = {
        "target": target, "delta": delta, "n": n, "min_count": int(min_count),
        "n_candidates": int(cand.size), "n_skipped": n_skipped, "path": path,
    }
    if ok.size == 0:
        if not tested.any():
            reason = (f"no candidate threshold accepts at least min_count={min_count} labelled "
                      f"items, or enough to reach {target:g} even with no error (n={n}): too few "
                      "labels to certify any threshold")
        else:
            step = path[0]
            reason = (f"the highest testable threshold tau={step.tau:.4g} accepts "
                      f"{step.n_accepted} labelled items with stratified precision "
                      f"{step.precision:.4f}, whose {100 * (1 - delta):.0f}% stratified lower "
                      f"bound {step.lower_bound:.4f} is below the target {target:g}; "
                      "fixed-sequence testing stops there")
        return ThresholdReport(
            threshold=None, n_accepted=0, coverage=0.0, precision=math.nan,
            lower_bound=math.nan, expected_errors=0.0, review_load=1.0,
            reason=f"no threshold qualifies: route everything to review ({reason})", **common)
    best = int(ok[-1])
    coverage = float(pop_acc[best] / total)
    if first_fail < cand.size:
        f = first_fail
        reason = f"scan stopped at tau={cand[f]:.4g} (lower bound {lower[f]:.4f} < target {target:g})"
    else:
        reason = "every tested threshold passed: the lowest candidate is chosen"
    return ThresholdReport(
        threshold=float(cand[best]), n_accepted=int(n_acc[best]), coverage=coverage,
        precision=float(precision[best]), lower_bound=float(lower[best]),
        expected_errors=float(pop_err[best]), review_load=1.0 - coverage, reason=reason,
        **common)
