"""Auto-accept threshold from labels pooled by constant inclusion probability (docs/design.md,
'Tuning and monitoring on the population').

:func:`~.stratified_tuning.tune_threshold_stratified` weights review-loop labels by *route*
(``review``, ``auto@r``): after a retune its strata mix periods routed at different thresholds,
so the few audit labels of the auto stratum stand for most of the accepted traffic and decide
the bound. This tuner uses what the routing stamps know instead: in a period routed at
threshold ``t_p``, a verdict with confidence ``>= t_p`` was labelled with one probability
(its audit rate) and one below ``t_p`` with another (review: all of them); before any threshold
every verdict was reviewed. Neither depends on the verdict's correctness, only on its period and
on which side of ``t_p`` its confidence falls.

**Why pooling is valid.** Take a candidate ``tau`` and cut ``[tau, 1]`` at every routing
threshold above ``tau`` into cells. Within a cell every period labelled its verdicts with one
constant probability, so a period's labelled verdicts in the cell are an independent thinning of
i.i.d. draws from the traffic restricted to the cell; pooled over periods they are i.i.d. draws
from the cell's conditional distribution, whatever the probabilities were (for a claim about
future traffic drawn from the same distribution, period weights are not needed: every period
samples the same conditional law). Conditional on the number ``A_k`` of labels in cell ``k``,
its error count is ``Binomial(A_k, q_k)``.

* **One cell** (every routing threshold of the labels used is at or below ``tau``, or none:
  the usual case once a threshold is in place): the accepted error rate is ``q_1`` itself, and
  the bound is exactly the one-sided Clopper-Pearson bound at ``delta``: the warm-up's reviewed
  high-confidence labels and every period's audit labels count as one sample.
* **Candidates below a routing threshold** (``mixed="drop"``, the default): that period's labels
  are left out of them (its region mixes two inclusion probabilities), which keeps one cell and
  Clopper-Pearson everywhere, and needs no traffic shares.
* **Several cells** (``mixed="split"``: the same candidates keep those labels): the accepted error
  rate is ``sum_k w_k q_k`` with ``w_k`` the traffic's share of cell ``k`` among confidences
  ``>= tau``. ``U_k``: Clopper-Pearson upper bounds at ``delta_q`` shared in proportion to each
  cell's part in the standard error (``w_k / sqrt(A_k)``: counts, never labels). ``w_k`` is
  estimated from *every* stored verdict's confidence (``M_k`` of ``M`` verdicts with confidence
  ``>= tau``: ``M_k ~ Binomial(M, w_k)``): with ``weights="boxed"`` (default) it lies in
  Clopper-Pearson bounds at :data:`WEIGHT_SHARE` of ``delta`` and the worst case over that box is
  taken (as in :mod:`.stratified_tuning`); ``weights="known"`` takes ``M_k / M`` as the truth
  (the window's mix; measured, not the default).

Why ``drop`` is the default (``benchmarks/results/bench_precision_bound_pooled.txt``, 1,000
streams per row): in the mid-stream retune both certify the same share of streams and stay
valid; at 100 audit labels under one routing threshold ``drop`` certifies 0.523 of streams
against ``split``'s 0.426, because ``split``'s candidates below the threshold collect review
labels, which pulls the scan's later label-free starts down where they cannot pass.

**What it does not cover.** The routing threshold of a period was chosen on earlier labels,
which this tuner reuses; a sample whose later size depends on its earlier outcome is not exactly
binomial. ``benchmarks/bench_precision_bound.py`` measures the realised precision of the chosen
threshold on the pool (future traffic) over 1,000 resampled streams, next to ``delta``: after
a mid-stream retune it fell below target in at most 0.035 of streams on every pool at ``delta``
0.1 (the first tune's own rate: 0.015-0.028). The
labels inside a cell must be a random subset of its verdicts (missing at random, as for every
stratified estimate here), the confidence tuned must be the one that routed (else a "cell" is not
one inclusion probability), and traffic must not drift between periods.

The scan is :func:`~.stratified_tuning.tune_threshold_stratified`'s (the fallback procedure over
label-free starts, :mod:`.thresholds`); candidates, starts and cells depend on confidences and
routing only, never on labels.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from .stratified_tuning import worst_mixture
from .thresholds import (
    DEFAULT_CHAINS,
    ScanStep,
    ThresholdReport,
    check_unit_open,
    clopper_pearson_upper,
    scan_from_starts,
    threshold_candidates,
)
from .validation import check_pair

__all__ = ["WEIGHT_SHARE", "pooled_precision_lower_bound", "tune_threshold_pooled"]

WEIGHT_SHARE = 0.2
"""``weights="boxed"``: the share of delta spent on the cells' traffic shares (with two cells
or more; one cell spends all of delta on its error rate)."""


def pooled_precision_lower_bound(
    accepted: Any, errors: Any, region: Any, *, delta: float,
    weights: Literal["boxed", "known"] = "boxed",
) -> np.ndarray:
    """Lower confidence bound (level 1 - delta) on future accepted traffic's precision, per candidate.

    ``accepted``/``errors``/``region``: shape (cands, K), per candidate and cell the labelled
    verdicts, the wrong ones among them, and every stored verdict (labelled or not) in the cell
    (module docstring). A cell with no verdict carries no weight; a candidate with one live cell
    gets the one-sided Clopper-Pearson bound at ``delta`` exactly; one with no live cell gets 0.
    Returns shape (cands,).
    """
    a = np.atleast_2d(np.asarray(accepted, dtype=np.float64))
    e = np.atleast_2d(np.asarray(errors, dtype=np.float64))
    m = np.atleast_2d(np.asarray(region, dtype=np.float64))
    if not (a.shape == e.shape == m.shape):
        raise ValueError(f"accepted, errors and region must share a shape, got {a.shape}, "
                         f"{e.shape}, {m.shape}")
    if ((e < 0) | (e > a) | (a > m)).any():
        raise ValueError("need 0 <= errors <= accepted <= region in every cell")
    if weights not in ("boxed", "known"):
        raise ValueError(f"weights must be 'boxed' or 'known', got {weights!r}")
    live = m > 0
    n_live = live.sum(axis=1)
    out = np.zeros(a.shape[0])
    one = n_live == 1
    if one.any():
        k = np.argmax(live[one], axis=1)
        rows = np.flatnonzero(one)
        out[one] = 1.0 - clopper_pearson_upper(e[rows, k], a[rows, k], delta)
    many = np.flatnonzero(n_live > 1)
    if many.size:
        a2, e2, m2, live2 = a[many], e[many], m[many], live[many]
        total = m2.sum(axis=1, keepdims=True)
        share = m2 / total
        delta_w = delta * WEIGHT_SHARE if weights == "boxed" else 0.0
        score = np.where(a2 > 0, share / np.sqrt(np.maximum(a2, 1.0)), 0.0)
        norm = score.sum(axis=1, keepdims=True)
        error_share = np.divide(score, norm, out=np.ones_like(score), where=norm > 0)
        u = clopper_pearson_upper(e2, a2, (delta - delta_w) * error_share)
        if weights == "known":
            lo = hi = share
        else:
            cells = n_live[many][:, None].astype(np.float64)
            # a cell with no label has U = 1, the largest: the worst case puts it at its upper end
            side = np.where(a2 > 0, delta_w / cells / 2.0, delta_w / cells)
            mb = np.broadcast_to(total, m2.shape)
            # lower Clopper-Pearson bound of M_k / M: one minus the upper bound of its complement
            lo = np.where(live2, 1.0 - clopper_pearson_upper(mb - m2, mb, delta_w / cells / 2.0), 0.0)
            hi = np.where(live2, clopper_pearson_upper(m2, mb, side), 0.0)
        out[many] = 1.0 - worst_mixture(u, lo, hi)
    return out


def _cells(confidence: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Each confidence's cell: how many routing thresholds are at or below it."""
    return np.searchsorted(cuts, confidence, side="right")


def tune_threshold_pooled(
    confidence: Any,
    correct: Any,
    routed_at: Any,
    population_confidence: Any = None,
    *,
    target_precision: float,
    delta: float,
    mixed: Literal["split", "drop"] = "drop",
    weights: Literal["boxed", "known"] = "boxed",
    min_count: int = 30,
    max_candidates: int = 200,
    chains: int = DEFAULT_CHAINS,
) -> ThresholdReport:
    """Smallest ``tau`` whose pooled precision bound meets the target (module docstring).

    ``confidence``/``correct``: shape (n,), the labelled verdicts. ``routed_at``: shape (n,),
    the threshold that routed each labelled verdict's period (NaN: no threshold, every verdict
    reviewed). The caller vouches that within a period the labelling probability was constant on
    each side of its threshold. ``population_confidence``: the confidence of every stored
    verdict of the same periods, labelled or not (the cells' traffic shares, and ``coverage``);
    ``None`` with ``mixed="drop"`` only (one cell needs no shares): ``coverage`` and
    ``expected_errors`` are then NaN, for the caller to estimate.
    ``mixed``: how candidates below a label's routing threshold use it (``drop``, the default:
    left out; ``split``: cells cut at the thresholds). ``weights``: ``boxed`` or ``known`` (module docstring).
    ``min_count``, ``max_candidates``, ``chains`` as in
    :func:`~.stratified_tuning.tune_threshold_stratified`.

    Report fields: ``precision`` the cells' stratified estimate ``1 - sum_k (M_k/M) E_k/A_k``
    (NaN if a live cell has no label); ``coverage`` the share of ``population_confidence``
    accepted (counted, not estimated); ``expected_errors`` ``M (1 - precision)``.
    """
    target = check_unit_open("target_precision", target_precision)
    delta = check_unit_open("delta", delta)
    for name, value, least in (("min_count", min_count, 1), ("max_candidates", max_candidates, 2),
                               ("chains", chains, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    if mixed not in ("split", "drop"):
        raise ValueError(f"mixed must be 'split' or 'drop', got {mixed!r}")
    c, z = check_pair(confidence, correct)
    t_p = np.asarray(routed_at, dtype=np.float64).reshape(-1)
    if t_p.shape != c.shape:
        raise ValueError(f"routed_at must have shape ({c.size},), got {t_p.shape}")
    if (t_p[~np.isnan(t_p)] < 0).any() or (t_p[~np.isnan(t_p)] > 1).any():
        raise ValueError("routed_at must be thresholds in [0, 1] or NaN (no threshold)")
    if population_confidence is None and mixed != "drop":
        raise ValueError("mixed='split' needs population_confidence (the cells' traffic shares)")
    pop = np.sort(c if population_confidence is None else
                  np.asarray(population_confidence, dtype=np.float64).reshape(-1))
    if pop.size < c.size or np.isnan(pop).any():
        raise ValueError(f"population_confidence must list every stored verdict's confidence "
                         f"(at least the {c.size} labelled ones, no NaN), got {pop.size}")
    t_p = np.where(np.isnan(t_p), -np.inf, t_p)
    cuts = np.unique(t_p[np.isfinite(t_p)])
    n_cells = cuts.size + 1
    wrong = 1.0 - z
    cand = threshold_candidates(np.sort(c)[::-1], None, max_candidates)

    used = c[None, :] >= cand[:, None]  # (cands, n)
    if mixed == "drop":  # one cell: every used label's period labelled the whole region alike
        used &= t_p[None, :] <= cand[:, None]
        cell_of = np.zeros(c.size, dtype=np.intp)
        pop_cell = np.zeros(pop.size, dtype=np.intp)
        n_cells = 1
    else:
        cell_of = _cells(c, cuts)
        pop_cell = _cells(pop, cuts)
    acc = np.zeros((cand.size, n_cells))
    err = np.zeros((cand.size, n_cells))
    reg = np.zeros((cand.size, n_cells))
    for k in range(n_cells):
        in_cell = used & (cell_of == k)[None, :]
        acc[:, k] = in_cell.sum(axis=1)
        err[:, k] = in_cell @ wrong
        values = pop[pop_cell == k]  # sorted, as pop is
        reg[:, k] = values.size - np.searchsorted(values, cand, side="left")
    reg = np.maximum(reg, acc)  # labelled verdicts are stored verdicts too
    n_acc = acc.sum(axis=1).astype(np.int64)

    with np.errstate(invalid="ignore", divide="ignore"):
        cell_precision = 1.0 - err / acc
        share = reg / reg.sum(axis=1, keepdims=True)
        precision = np.where(reg.sum(axis=1) > 0,
                             np.nansum(np.where(reg > 0, share * cell_precision, 0.0), axis=1),
                             math.nan)
    precision = np.where(((reg > 0) & (acc == 0)).any(axis=1), math.nan, precision)

    def bound_at(rows: np.ndarray, errors: np.ndarray, level: float) -> np.ndarray:
        return pooled_precision_lower_bound(acc[rows], errors, reg[rows], delta=level, weights=weights)

    best, steps, tested = scan_from_starts(n_acc, err, bound_at, min_count=int(min_count),
                                           chains=int(chains), delta=delta, target=target)
    path = [ScanStep(float(cand[i]), int(n_acc[i]), float(precision[i]), float(low))
            for i, low in steps]
    common: dict[str, Any] = {
        "target": target, "delta": delta, "n": int(c.size), "min_count": int(min_count),
        "n_candidates": int(cand.size), "n_skipped": int((~tested).sum()), "path": path,
    }
    if best is None:
        if not tested.any():
            why = (f"no candidate threshold pools at least min_count={min_count} labelled items, "
                   f"or enough to reach {target:g} even with no error (n={c.size})")
        else:
            step = path[0]
            why = (f"the highest testable threshold tau={step.tau:.6g} pools {step.n_accepted} "
                   f"labelled items with precision {step.precision:.4f}, whose "
                   f"{100 * (1 - delta):.0f}% lower bound {step.lower_bound:.4f} is below the "
                   f"target {target:g}, and every later start of the scan failed too")
        return ThresholdReport(
            threshold=None, n_accepted=0, coverage=0.0, precision=math.nan, lower_bound=math.nan,
            expected_errors=0.0, review_load=1.0,
            reason=f"no threshold qualifies: route everything to review ({why})", **common)
    failed = [(i, low) for i, low in steps if low < target]
    accepted_share = math.nan if population_confidence is None else float(reg[best].sum() / pop.size)
    lower = dict(steps)[best]
    if failed:
        f, low = failed[0]
        reason = f"scan stopped at tau={cand[f]:.6g} (lower bound {low:.4f} < target {target:g})"
        if f < best:
            reason += "; it resumed at a later start with its own share of delta"
    else:
        reason = "every tested threshold passed: the lowest candidate is chosen"
    return ThresholdReport(
        threshold=float(cand[best]), n_accepted=int(n_acc[best]), coverage=accepted_share,
        precision=float(precision[best]), lower_bound=float(lower),
        expected_errors=(math.nan if population_confidence is None
                         else float(reg[best].sum() * (1.0 - precision[best]))),
        review_load=1.0 - accepted_share, reason=reason, **common)
