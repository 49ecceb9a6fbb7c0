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
  bound on ``q_s`` at level ``delta_q w_s``. The shares ``w_s`` (summing to 1 over the strata with
  at least one accepted label, :func:`_error_shares`) follow each stratum's part in the standard
  error of the accepted error rate, ``alpha_s / sqrt(A_s)`` with ``alpha_s ~ N_s A_s / n_s``: the
  stratum that decides the bound (typically the audit stratum, whose few labels stand for most
  of the accepted traffic) is bounded at nearly all of ``delta_q`` instead of ``delta_q / S``.
  The shares depend on confidences and counts only, never on labels, so the split is fixed
  before the labels are looked at (weighted Bonferroni); a stratum with ``A_s = 0`` takes
  ``U_s = 1``, which holds surely, and no share. (``bound="even"``, the previous split, gives
  every such stratum ``delta_q / S_acc``; kept to measure against.)
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
  several strata ``delta_a = 0.2 delta`` (:data:`SHARE_FOR_WEIGHTS`; the box rarely decides the
  bound: with an audit stratum accepted in full its share is pinned near 1) and
  ``delta_q = 0.8 delta`` (the even split: half and half).

Why not ``1 - sum_s N_s U(E_s/n_s) / sum_s N_s L(A_s/n_s)`` (bounds on the accepted-and-wrong and
accepted shares)? It is valid too but bounds the two shares separately although they move
together: on one fully labelled stratum of 100 items at precision 0.93 it loses ~8 points of
precision, so review-loop tuning on the first few hundred labels would never certify anything.
Conditioning on ``A_s`` removes that loss for the error rate; only the mixing weights pay.

Why not a betting bound on the importance-weighted error (``x = accepted * (wrong - (1 - t))``
weighted by ``N_s / n_s``, which tests the one linear statement "precision < t" with no box)?
It is valid with a constant bet (the strata have different means, so a predictable bet is not),
but its tail is Chernoff's: on one stratum of 100 accepted labels at target 0.8 and delta 0.1 a
mixture over six bets allows 9 errors where Clopper-Pearson allows 14, and on resampled review
+ audit streams it certified less often than this bound (so it is not used).

Strata that cannot be accepted (``support=``). A stratum whose verdicts are known, by how they
were routed, to hold only confidences below some value (``review`` when this very confidence
routed at one fixed threshold ``tau0``) has accepted share 0 at every candidate ``tau >= tau0``,
now and in future traffic, so it leaves those candidates' bounds: no box statement, no share of
delta. Without it, a census review stratum with 0 of 500 labels accepted still bounds its share
at ~0.009 with every one of them wrong, which costs ~2 points of precision at a 50/50 mix
(with the support, certified 100/150/300-audit-label shares on Trust-or-Escalate
roughly double; ``benchmarks/bench_precision_bound.py``). The support must come from the
routing, never from the labels; the service does not know it (its strata mix thresholds and
periods with no threshold), so it does not pass it.

Why not bound the window (``bound="window"``, :mod:`.window_bound`)? When every verdict's
confidence is known, the accepted counts are observed and the errors among them have an exact
hypergeometric bound; it certifies far more, but only the realised precision of the window's own
accepted verdicts: on a fully labelled warm-up it certifies whatever those labels show, and in
the benchmark's retune its thresholds miss the target on future traffic in 0.23 of 1,000
streams at delta 0.1. ``window_future`` adds the binomial step to future traffic (half of delta
each) and is valid, but certifies less than this bound. Kept to measure against.

How conservative: Bonferroni over 2S statements (S = number of strata with verdicts), the
worst case over the weight box, and Clopper-Pearson's own conservativeness. Labels are sampled
without replacement within a stratum; the binomial bounds are then conservative for the window
and exact for traffic drawn from the same distribution. A stratum with verdicts but no labels
keeps ``U_s = 1`` and ``a_s in [0, 1]``: it can only lower the bound (usually to no threshold).

The scan. Candidates are :func:`tune_threshold`'s (the distinct labelled confidences, thinned to
``max_candidates`` quantiles), tested from HIGH to LOW. A candidate whose accepted set holds fewer
than ``min_count`` *labelled* items is skipped. One fixed sequence from the first set of
``min_count`` items stopped for good when that small set happened to hold a few errors (at
precision 0.92, three or more errors among 30 labels is a 43% event), which is how calm traffic
at precision 0.92 ended a tune at target 0.8 with no threshold or a very high one. So the scan is
the fallback procedure (:func:`~.thresholds.fallback_scan`): ``delta`` is shared among up to
``chains`` label-free starts, the first candidates accepting at least 30, 60, 120 and 240
labelled items (:func:`~.thresholds.chain_starts`; 0.7 ``delta`` to the first, the rest
evenly, :func:`~.thresholds.chain_levels`), each moved down to where its share could pass
error-free; a candidate is tested at its own share plus the level of the previous candidate
when that one passed, so a failure only costs the share spent so far and the next start
resumes. The fallback procedure bounds the chance that any candidate below the target passes by
``delta`` whatever the dependence between the tests (it is closed testing with weighted
Bonferroni tests); the answer is the lowest candidate passed. With ``chains=1`` it is plain
fixed-sequence testing. What the skipped and the starting candidates are depends on confidences
and strata only, never on labels, so the conditional argument of :mod:`.thresholds` carries over.
The price: the first start tests at 0.7 ``delta`` rather than ``delta`` (measured in
``benchmarks/bench_precision_bound.py``).

Report fields (:class:`ThresholdReport`): ``n`` labels; ``n_accepted`` labelled items accepted
at the answer; ``precision`` the stratified estimate ``1 - sum_s N_s E_s/n_s / sum_s N_s A_s/n_s``;
``coverage`` the estimated share of the population accepted ``sum_s (N_s/N) A_s/n_s``;
``review_load = 1 - coverage``; ``expected_errors`` the estimated number of errors among the
population's accepted verdicts ``sum_s N_s E_s / n_s``; ``path`` the tested candidates.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .thresholds import (
    DEFAULT_CHAINS,
    ScanStep,
    ThresholdReport,
    check_unit_open,
    clopper_pearson_lower,
    clopper_pearson_upper,
    scan_from_starts,
    threshold_candidates,
)
from .validation import check_pair
from .window_bound import window_precision_lower_bound

__all__ = ["stratified_precision_lower_bound", "tune_threshold_stratified", "worst_mixture"]


def worst_mixture(u: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
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


FUTURE_SHARE = 0.5
"""``window_future``: the share of delta for the binomial step from the window to future traffic."""

SHARE_FOR_WEIGHTS = 0.2
"""Share of delta spent on the strata's accepted shares (the box); the rest bounds error rates."""


def _error_shares(a: np.ndarray, n: np.ndarray, big_n: np.ndarray) -> np.ndarray:
    """How the error-rate statements share ``delta_q``, per candidate and stratum (rows sum to 1).

    In proportion to each stratum's part in the standard error of the accepted error rate,
    ``alpha_s / sqrt(A_s)`` with ``alpha_s ~ pi_s A_s / n_s`` its estimated share of the accepted
    traffic: the stratum that decides the bound gets most of delta, a stratum whose error rate
    barely weighs gets little (its bound widens where it costs nothing). Acceptance depends on
    confidences only, never on labels, so the split is fixed before the labels are looked at; a
    stratum with no accepted label needs no error bound (``U = 1`` holds surely) and gets none.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(a > 0, big_n / np.where(n > 0, n, 1.0) * np.sqrt(a), 0.0)
    total = score.sum(axis=1, keepdims=True)
    return np.divide(score, total, out=np.ones_like(score), where=total > 0)


def stratified_precision_lower_bound(
    accepted: Any, errors: Any, labels: Any, population: Any, *, delta: float, weighted: bool = True
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
        delta_a = delta * (SHARE_FOR_WEIGHTS if weighted else 0.5)
        delta_q = delta - delta_a
    if weighted:
        u = clopper_pearson_upper(e, a, delta_q * _error_shares(a, n, big_n))
    else:  # evenly among the strata with an accepted label (U = 1 holds surely for the others)
        u = clopper_pearson_upper(e, a, delta_q / np.maximum((a > 0).sum(axis=1, keepdims=True), 1))
    if n_strata == 1:
        return 1.0 - u[:, 0]
    nb = np.broadcast_to(n, a.shape)
    # a stratum with no accepted label has U = 1, the largest possible: the worst case always
    # puts its weight at the upper end, so it needs only a one-sided bound (at delta_a / S);
    # the others need both ends (delta_a / 2S each)
    side = np.where(a > 0, delta_a / n_strata / 2.0, delta_a / n_strata)
    la = np.where(nb > 0, clopper_pearson_lower(a, nb, delta_a / n_strata / 2.0), 0.0)
    ua = np.where(nb > 0, clopper_pearson_upper(a, nb, side), 1.0)
    weight = big_n / big_n.sum()
    return 1.0 - worst_mixture(u, weight * la, weight * ua)


BOUNDS: dict[str, Callable[..., np.ndarray]] = {
    "weighted": stratified_precision_lower_bound,
    "even": functools.partial(stratified_precision_lower_bound, weighted=False),
    "window": window_precision_lower_bound,
    "window_future": functools.partial(window_precision_lower_bound, future_share=FUTURE_SHARE),
}
"""How :func:`tune_threshold_stratified` splits delta in its bound, by name: ``weighted`` (the
default, :func:`_error_shares`) or ``even`` (the previous split: half to the accepted shares, the
error rates' half evenly among the strata; kept to measure against); ``window``
(:mod:`.window_bound`: the realised precision of the window's own accepted verdicts, exact
hypergeometric, which needs every verdict's confidence: ``window=``)."""

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


def _pool_window(window: Mapping[str, Any] | None, before: np.ndarray,
                 after: np.ndarray) -> dict[str, np.ndarray] | None:
    """The window's confidences under the pooled stratum names (:func:`_pool_census`)."""
    if window is None:
        return None
    renamed = {str(b): str(a) for b, a in zip(before.tolist(), after.tolist(), strict=True)}
    out: dict[str, list[np.ndarray]] = {}
    for name, values in window.items():
        out.setdefault(renamed.get(str(name), str(name)), []).append(
            np.asarray(values, dtype=np.float64).reshape(-1))
    return {name: np.concatenate(parts) for name, parts in out.items()}


def _window_accepted(window: Mapping[str, np.ndarray], names: list[str], big_n: np.ndarray,
                     cand: np.ndarray) -> np.ndarray:
    """``M_s``: per candidate and stratum, the window's verdicts with confidence >= the candidate."""
    out = np.zeros((cand.size, len(names)))
    for i, name in enumerate(names):
        values = np.sort(window.get(name, np.zeros(0)))
        if values.size != big_n[i]:
            raise ValueError(f"window[{name!r}] holds {values.size} confidences but population "
                             f"is {int(big_n[i])}: it must list every verdict of the stratum")
        out[:, i] = values.size - np.searchsorted(values, cand, side="left")
    return out


def _drop_unreachable(support: Mapping[str, float] | None, names: list[str],
                      cand: np.ndarray) -> np.ndarray:
    """Per candidate and stratum: can the candidate accept any of the stratum's verdicts?

    A stratum whose verdicts all have confidence below ``support[s]`` (known by construction,
    not from labels) cannot be accepted at ``tau >= support[s]``: its accepted share is 0 for
    sure, so it needs no statement and takes no weight; the other strata then share delta (one
    left: all of it, Clopper-Pearson). Supports of strata pooled into the census are ignored.
    """
    out = np.ones((cand.size, len(names)), dtype=bool)
    if not support:
        return out
    unknown = sorted(set(support) - set(names))
    if unknown:
        raise ValueError(f"support names strata {unknown[:5]} that are not in population")
    for i, name in enumerate(names):
        if name in support:
            out[:, i] = cand < float(support[name])
    return out


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
    chains: int = DEFAULT_CHAINS,
    bound: str = "weighted",
    window: Mapping[str, Any] | None = None,
    support: Mapping[str, float] | None = None,
) -> ThresholdReport:
    """Smallest ``tau`` whose stratified precision bound meets the target (module docstring).

    ``confidence``/``correct``/``stratum``: shape (n,), the labelled verdicts and the stratum
    name of each. ``population``: ``N_s`` for every stratum (labelled or not); a name in
    ``stratum`` missing from ``population``, or more labels than ``N_s``, is a ``ValueError``.
    ``min_count`` and ``max_candidates`` as in :func:`tune_threshold`. Strata labelled in full
    are pooled into one first (:func:`_pool_census`). ``chains``: how many label-free starts
    share delta in the fallback scan (1: plain fixed-sequence testing). ``bound``: a name in
    :data:`BOUNDS` (``weighted``, the default, or ``even``, the previous split of delta, or
    ``window``). ``window``: with ``bound="window"`` only and required there, the confidences of
    every verdict of each stratum (labelled or not; ``len == population[s]``): the bound is then
    on the realised precision of those verdicts' accepted part (:mod:`.window_bound`), not on
    future traffic's. ``support``: for strata known by construction to hold only confidences
    below a value (e.g. ``review`` routed by this very confidence at one fixed threshold), that
    value; a candidate at or above it accepts none of the stratum's verdicts, now or in future
    traffic, so the stratum leaves that candidate's bound (:func:`_drop_unreachable`).
    """
    target, delta, bound_of = _checked_options(target_precision, delta, min_count, max_candidates, chains,
                                               bound, window)
    strata = _labelled_strata(confidence, correct, stratum, population, window, support)
    cands = _candidates(strata, max_candidates)
    estimates = _estimates(strata, cands)
    # one high-to-low scan by the fallback procedure (thresholds.fallback_scan): shares of delta
    # at label-free starts, carried down while the scan passes
    scan = scan_from_starts(cands.n_accepted, cands.errors, _bound_at(strata, cands, bound_of),
                            min_count=int(min_count), chains=int(chains), delta=delta, target=target)
    return _report(strata, cands, estimates, scan, target=target, delta=delta, min_count=int(min_count))


def _checked_options(
    target_precision: float, delta: float, min_count: int, max_candidates: int, chains: int, bound: str,
    window: Mapping[str, Any] | None,
) -> tuple[float, float, Callable[..., np.ndarray]]:
    """The target and delta, checked, and the bound named ``bound``; a ``ValueError`` naming the
    first option out of range."""
    target = check_unit_open("target_precision", target_precision)
    delta = check_unit_open("delta", delta)
    if isinstance(min_count, bool) or not isinstance(min_count, (int, np.integer)) or min_count < 1:
        raise ValueError(f"min_count must be an integer >= 1, got {min_count!r}")
    if isinstance(max_candidates, bool) or not isinstance(max_candidates, (int, np.integer)) \
            or max_candidates < 2:
        raise ValueError(f"max_candidates must be an integer >= 2, got {max_candidates!r}")
    if isinstance(chains, bool) or not isinstance(chains, (int, np.integer)) or chains < 1:
        raise ValueError(f"chains must be an integer >= 1, got {chains!r}")
    if bound not in BOUNDS:
        raise ValueError(f"bound must be one of {sorted(BOUNDS)}, got {bound!r}")
    if bound.startswith("window") != (window is not None):
        raise ValueError("bound='window' needs window= (every verdict's confidence per stratum), "
                         "and window= is only read by bound='window'")
    return target, delta, BOUNDS[bound]


@dataclass(frozen=True)
class _Strata:
    """The labelled verdicts and the strata they stand for, checked, census strata pooled."""

    confidence: np.ndarray
    correct: np.ndarray
    names: list[str]
    """Every stratum of the population, sorted."""
    big_n: np.ndarray
    """``N_s``: verdicts per stratum, in ``names``' order."""
    of_label: np.ndarray
    """Each label's stratum (an index into ``names``)."""
    n_labelled: np.ndarray
    """``n_s``: labels per stratum."""
    window: dict[str, np.ndarray] | None
    support: Mapping[str, float] | None


def _labelled_strata(
    confidence: Any, correct: Any, stratum: Any, population: Mapping[str, int],
    window: Mapping[str, Any] | None, support: Mapping[str, float] | None,
) -> _Strata:
    """The labels by stratum (:class:`_Strata`); a ``ValueError`` for a stratum not in
    ``population`` or with more labels than verdicts."""
    c, z = check_pair(confidence, correct)
    names_arr = np.asarray(stratum)
    if names_arr.shape != c.shape:
        raise ValueError(f"stratum must have shape ({c.size},), got {names_arr.shape}")
    pooled_names, population = _pool_census(names_arr, population)
    if support and CENSUS in population and CENSUS not in names_arr.tolist():
        support = {k: v for k, v in support.items() if k in population}
    pooled_window = _pool_window(window, names_arr, pooled_names)
    names_arr = pooled_names
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
    return _Strata(c, z, names, big_n, s_idx, n_lab, pooled_window, support)


@dataclass(frozen=True)
class _Candidates:
    """The candidate thresholds, high to low, and what each accepts of the labels."""

    tau: np.ndarray
    n_accepted: np.ndarray
    """Labels accepted (confidence >= tau)."""
    accepted: np.ndarray
    """(candidates, strata): labels accepted per stratum."""
    errors: np.ndarray
    """(candidates, strata): wrong labels among them."""


def _candidates(strata: _Strata, max_candidates: int) -> _Candidates:
    """At most ``max_candidates`` thresholds from the labels' confidences, each with its
    cumulative accepted and wrong counts per stratum along the descending order."""
    c, n, n_strata = strata.confidence, strata.confidence.size, len(strata.names)
    order = np.argsort(-c, kind="stable")
    c_desc, wrong_desc, s_desc = c[order], 1.0 - strata.correct[order], strata.of_label[order]
    cand = threshold_candidates(c_desc, None, max_candidates)
    n_acc = np.searchsorted(-c_desc, -cand, side="right")
    one_hot = np.zeros((n, n_strata))
    one_hot[np.arange(n), s_desc] = 1.0
    cum_a = np.vstack([np.zeros(n_strata), np.cumsum(one_hot, axis=0)])
    cum_e = np.vstack([np.zeros(n_strata), np.cumsum(one_hot * wrong_desc[:, None], axis=0)])
    return _Candidates(cand, n_acc, cum_a[n_acc], cum_e[n_acc])


def _bound_at(
    strata: _Strata, cands: _Candidates, bound_of: Callable[..., np.ndarray],
) -> Callable[[np.ndarray, np.ndarray, float], np.ndarray]:
    """The stratified lower bound of the candidates ``rows`` (a mask) at ``errors`` wrong labels
    per stratum and level ``level``, as the scan asks for it: each candidate's bound leaves out
    the strata it cannot reach (:func:`_drop_unreachable`), and with a window it reads the
    window's accepted verdicts (:func:`_window_accepted`)."""
    big_n, n_lab, acc_s = strata.big_n, strata.n_labelled, cands.accepted
    big_m = None if strata.window is None else _window_accepted(strata.window, strata.names, big_n, cands.tau)
    reachable = _drop_unreachable(strata.support, strata.names, cands.tau)

    def bound_at(rows: np.ndarray, errors: np.ndarray, level: float) -> np.ndarray:
        out = np.empty(int(rows.sum()))
        live_rows = reachable[rows]
        # candidates sharing the set of strata they can reach share one call (at most S + 1)
        for live in np.unique(live_rows, axis=0):
            sub = (live_rows == live).all(axis=1)
            pop = np.where(live, big_n, 0.0)
            if big_m is None:
                out[sub] = bound_of(acc_s[rows][sub], errors[sub], n_lab, pop, delta=level)
            else:
                out[sub] = bound_of(acc_s[rows][sub], errors[sub], n_lab, pop, big_m[rows][sub],
                                    delta=level)
        return out

    return bound_at


@dataclass(frozen=True)
class _Estimates:
    """Per candidate, the population's accepted and wrong verdicts estimated from the labels
    (each label weighted by ``N_s / n_s``), and the stratified precision."""

    accepted: np.ndarray
    errors: np.ndarray
    precision: np.ndarray
    total: float
    """Verdicts in the population."""


def _estimates(strata: _Strata, cands: _Candidates) -> _Estimates:
    big_n, n_lab = strata.big_n, strata.n_labelled
    g = np.divide(big_n, n_lab, out=np.zeros(len(strata.names)), where=n_lab > 0)
    pop_acc = cands.accepted @ g
    pop_err = cands.errors @ g
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(pop_acc > 0, 1.0 - pop_err / np.where(pop_acc > 0, pop_acc, 1.0),
                             math.nan)
    return _Estimates(pop_acc, pop_err, precision, big_n.sum())


def _report(
    strata: _Strata, cands: _Candidates, est: _Estimates,
    scan: tuple[int | None, list[tuple[int, float]], np.ndarray], *, target: float, delta: float,
    min_count: int,
) -> ThresholdReport:
    """The threshold report of the scan's outcome: the chosen candidate, or why none qualifies."""
    best, steps, tested = scan
    cand, n_acc, n = cands.tau, cands.n_accepted, strata.confidence.size
    n_skipped = int((~tested).sum())
    failed = [i for i, low in steps if low < target]
    first_fail = failed[0] if failed else None
    lower = np.full(cand.size, np.nan)
    for i, low in steps:
        lower[i] = low
    path = [ScanStep(float(cand[i]), int(n_acc[i]), float(est.precision[i]), float(low))
            for i, low in steps]
    common: dict[str, Any] = {
        "target": target, "delta": delta, "n": n, "min_count": min_count,
        "n_candidates": int(cand.size), "n_skipped": n_skipped, "path": path,
    }
    if best is None:
        if not tested.any():
            reason = (f"no candidate threshold accepts at least min_count={min_count} labelled "
                      f"items, or enough to reach {target:g} even with no error (n={n}): too few "
                      "labels to certify any threshold")
        else:
            step = path[0]
            reason = (f"the highest testable threshold tau={step.tau:.6g} accepts "
                      f"{step.n_accepted} labelled items with stratified precision "
                      f"{step.precision:.4f}, whose {100 * (1 - delta):.0f}% stratified lower "
                      f"bound {step.lower_bound:.4f} is below the target {target:g}; "
                      "fixed-sequence testing stops there, and every later start of the "
                      "scan failed too")
        return ThresholdReport(
            threshold=None, n_accepted=0, coverage=0.0, precision=math.nan,
            lower_bound=math.nan, expected_errors=0.0, review_load=1.0,
            reason=f"no threshold qualifies: route everything to review ({reason})", **common)
    coverage = float(est.accepted[best] / est.total)
    if first_fail is not None:
        f = first_fail
        reason = f"scan stopped at tau={cand[f]:.6g} (lower bound {lower[f]:.4f} < target {target:g})"
        if f < best:
            reason += "; it resumed at a later start with its own share of delta"
    else:
        reason = "every tested threshold passed: the lowest candidate is chosen"
    return ThresholdReport(
        threshold=float(cand[best]), n_accepted=int(n_acc[best]), coverage=coverage,
        precision=float(est.precision[best]), lower_bound=float(lower[best]),
        expected_errors=float(est.errors[best]), review_load=1.0 - coverage, reason=reason,
        **common)
