"""Model-assisted (difference / prediction-powered) population estimates under stratified labels.

The stratified estimator of :mod:`.stratified` reads only the labels: each labelled verdict of
stratum ``s`` stands for ``N_s / n_s`` verdicts. But every verdict of the window, labelled or
not, carries a fused confidence that predicts whether it is right. The difference estimator
(survey sampling's model-assisted / GREG estimator; "prediction-powered inference" in the
machine-learning literature) uses that prediction ``f`` for all ``N_s`` verdicts and the labels
only to correct its bias (docs/design.md, 'The review loop'). Per stratum, with ``y`` the
per-verdict quantity (right: 1/0; Brier: ``(c - z)^2``) and ``m_s = N_s - n_s`` unlabelled
verdicts,

    T_s = sum_labelled(y) + lam_s * sum_unlabelled(f) + m_s * mean_labelled(y - lam_s * f)

estimates the stratum's window total and ``sum_s T_s / N`` the window mean. The labelled
verdicts of a stratum are a simple random sample of it (the queue is served in random order),
so ``T_s`` is unbiased for any fixed ``lam_s`` whatever the prediction's bias: a miscalibrated
confidence costs width, never validity. ``lam_s`` is the labelled regression slope of ``y`` on
``f`` clipped to [0, 1] (``lam = 1``: the plain difference / PPI estimator; ``lam = 0``: the
labels-only stratified mean; the PPI++ power tuning), so the interval is never much wider than
the labels-only one.

Interval: the window mean's predictive finite-population variance,
``sum_s (m_s/N)^2 S_s^2 (1/m_s + 1/n_s)`` (``= (N_s/N)^2 (1 - n_s/N_s) S_s^2 / n_s``; a fully
labelled stratum adds nothing), with ``S_s^2`` the residual variance of ``y - lam_s f`` on
``n_s - 2`` degrees of freedom (one for the mean, one for the fitted slope) after adding
``z^2`` pseudo-verdicts at the labelled mean prediction, half right and half wrong (the
Agresti-Coull guard of :mod:`.stratified`: a small audit sample that is all right, with
confidences that barely vary, would otherwise claim no uncertainty). For accuracy their
outcomes are 1 and 0; for the Brier score ``(1 - c)^2`` and ``c^2`` at the stratum's mean
labelled confidence ``c`` (:func:`brier_pseudo_values`; the ends of [0, 1] would overstate a
stratum's spread, e.g. 0.09-0.25 at ``c = 0.6``). The quantile is Student's t with the
Welch-Satterthwaite degrees of freedom of the strata; the interval is intersected with the hard
bounds (every unlabelled verdict at either end of the range). The coverage is shown by
``benchmarks/bench_model_assisted.py`` on resampled streams of the shared pools.

What is estimated here: ``accuracy`` (``f = c``, the chosen answer's confidence), ``brier``
(``f = c (1 - c)``, the Brier score a calibrated confidence expects) and, over the
auto-accepted strata alone, the auto-accept precision. **ECE gets no model-assisted estimate:**
it is a sum of absolute per-bin gaps; with the confidence as the prediction each bin's
predicted gap is zero, so the difference estimator reduces to the labels-only one, and the
absolute value of a noisy gap has no unbiased estimate to build a valid interval around. The
labels-only stratified ECE (predictive Bayesian bootstrap) is the one reported.

Inputs come as weighted points so the service can pass accumulator bins (each fine bin's
verdicts at their mean confidence) and the per-stratum prediction totals of its traffic
counters, O(strata x fine bins) whatever the number of verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from .accumulator import FIXED_POINT_SCALE
from .stratified_data import Interval, ParsedStratum, nan_interval, unlabelled_note

__all__ = [
    "AssistedStratum",
    "PredictionTotals",
    "assisted_from_bins",
    "brier_pseudo_values",
    "difference_mean",
]


@dataclass(frozen=True)
class AssistedStratum:
    """One stratum: its verdicts' prediction total and its labelled points.

    ``population``: ``N_s``, every verdict of the stratum in the window; ``prediction_total``:
    the sum of the prediction ``f`` over all of them (labelled or not); ``y``/``f``/``weight``:
    the labelled points (outcome, prediction, how many verdicts each stands for: 1 per verdict,
    or a bin's count).
    """

    name: str
    population: int
    prediction_total: float
    y: np.ndarray
    f: np.ndarray
    weight: np.ndarray
    pseudo_values: tuple[float, float] | None = None
    """Where the small-sample guard's pseudo-residuals sit (half at each): ``None`` for the
    ends of the value range (right/wrong: 1 and 0); for the Brier score, a right and a wrong
    verdict at the stratum's mean confidence ``c``: ``(1 - c)^2`` and ``c^2``."""

    @property
    def labels(self) -> int:
        return int(round(float(self.weight.sum())))


@dataclass(frozen=True)
class PredictionTotals:
    """Per stratum, over every decided verdict of the window: how many, the sum of their
    confidences and of the squared confidences (what the service's traffic counters hold)."""

    count: int
    sum_c: float
    sum_c2: float


def _check(s: AssistedStratum, value_range: tuple[float, float]) -> None:
    if not (s.y.shape == s.f.shape == s.weight.shape):
        raise ValueError(f"stratum {s.name!r}: y, f and weight differ in shape")
    if s.labels > s.population:
        raise ValueError(f"stratum {s.name!r}: {s.labels} labelled verdicts but population {s.population}")
    lo, hi = value_range
    if np.any(s.weight < 0) or np.any((s.y < lo - 1e-9) | (s.y > hi + 1e-9)):
        raise ValueError(f"stratum {s.name!r}: negative weights or outcomes outside {value_range}")


def _stratum_part(s: AssistedStratum, lam: float | None, pseudo: float, small_sample: bool,
                  value_range: tuple[float, float]) -> tuple[float, float, float, float, float]:
    """(estimated window total, its variance, degrees of freedom, hard low, hard high total)."""
    lo, hi = value_range
    w, y, f = s.weight, s.y, s.f
    n = float(w.sum())
    m = s.population - n
    y_sum = float((w * y).sum())
    y_bar, f_bar = y_sum / n, float((w * f).sum()) / n
    fitted = lam is None
    if lam is None:
        var_f = float((w * (f - f_bar) ** 2).sum())
        cov = float((w * (f - f_bar) * (y - y_bar)).sum())
        lam = 0.0 if var_f <= 1e-15 or n < 3 else min(max(cov / var_f, 0.0), 1.0)
    r = y - lam * f
    r_bar = float((w * r).sum()) / n
    unlabelled_prediction = s.prediction_total - float((w * f).sum())
    total = y_sum + lam * unlabelled_prediction + m * r_bar
    hard_lo, hard_hi = y_sum + m * lo, y_sum + m * hi
    if m <= 0:
        return y_sum, 0.0, math.inf, y_sum, y_sum
    ss = float((w * (r - r_bar) ** 2).sum())
    if pseudo > 0:  # pseudo-residuals (a right and a wrong verdict) at the labelled mean prediction
        p_lo, p_hi = value_range if s.pseudo_values is None else s.pseudo_values
        ss += pseudo / 2.0 * ((p_lo - lam * f_bar - r_bar) ** 2 + (p_hi - lam * f_bar - r_bar) ** 2)
    if small_sample:
        df = max(n + pseudo - 1.0 - (1.0 if fitted else 0.0), 1.0)
    else:  # the plain difference / PPI interval: ppi_py's variance convention (divisor n)
        df = n
    variance = m * m * (ss / df) * (1.0 / m + 1.0 / n)
    return total, variance, df, hard_lo, hard_hi


def difference_mean(
    strata: Sequence[AssistedStratum],
    *,
    level: float = 0.95,
    lam: float | None = None,
    small_sample: bool = True,
    pseudo: float | None = None,
    value_range: tuple[float, float] = (0.0, 1.0),
    method: str = "model-assisted mean",
) -> Interval:
    """The model-assisted window mean over ``strata`` with its two-sided ``level`` interval
    (module docstring). ``lam``: a fixed weight for every stratum (``None``: tuned per
    stratum). ``small_sample=False`` drops the pseudo-residuals and uses the normal quantile
    (the plain PPI / difference interval; the tests compare it with ``ppi_py``). ``pseudo``:
    the pseudo-residuals' weight (default ``z^2`` with ``small_sample``, 0 without): the guard is
    for outcomes that can all sit at one end of their range (right/wrong, Brier); a continuous
    outcome that never nears its ends needs none (0). Strata with no
    verdicts are skipped; one with verdicts but no label makes the estimate NaN and widens the
    interval by its share of the range, as :mod:`.stratified` does."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    z = float(norm.ppf(0.5 + level / 2.0))
    live = [s for s in strata if s.population > 0]
    for s in live:
        _check(s, value_range)
    labels = sum(s.labels for s in live)
    if labels == 0:
        return nan_interval(0, method)
    big_n = float(sum(s.population for s in live))
    lo_v, hi_v = value_range
    estimate, variance, hard_lo, hard_hi, widen = 0.0, 0.0, 0.0, 0.0, 0.0
    welch: list[tuple[float, float]] = []
    labelled_total = float(sum(s.population for s in live if s.labels > 0))
    missing = []
    for s in live:
        if s.labels == 0:
            missing.append(s)
            hard_lo += s.population * lo_v
            hard_hi += s.population * hi_v
            widen += s.population * (hi_v - lo_v)
            estimate += s.population * lo_v
            continue
        weight = (z * z if small_sample else 0.0) if pseudo is None else float(pseudo)
        weight *= s.population / labelled_total  # the window's guard, split by the strata's shares
        total, var, df, s_lo, s_hi = _stratum_part(s, lam, weight, small_sample, value_range)
        estimate += total
        variance += var
        hard_lo += s_lo
        hard_hi += s_hi
        if var > 0:
            welch.append((var, df))
    estimate, variance = estimate / big_n, variance / big_n**2
    widen /= big_n
    if small_sample and welch:
        dof = sum(v for v, _ in welch) ** 2 / sum(v * v / d for v, d in welch)
        q = float(student_t.ppf(0.5 + level / 2.0, dof))
        quantile = f"t quantile ({dof:.0f} Welch-Satterthwaite df)" + (
            ", Agresti-Coull pseudo-residuals" if pseudo is None or pseudo > 0 else "")
    else:
        q, quantile = z, "normal quantile"
    half = q * math.sqrt(variance)
    lower = max(estimate - half, hard_lo / big_n)
    upper = min(estimate + half + widen, hard_hi / big_n)
    note = unlabelled_note(missing, "bounded by the full range of their share")  # type: ignore[arg-type]
    return Interval(math.nan if missing else float(estimate), float(lower), float(upper), labels,
                    f"{method}: difference estimator per stratum (lam {'tuned' if lam is None else lam}), "
                    f"{level:.0%} predictive finite-population interval, {quantile}{note}")


def brier_pseudo_values(mean_confidence: float) -> tuple[float, float]:
    """The Brier scores of a right and a wrong verdict at ``mean_confidence``: where the
    small-sample guard puts its pseudo-residuals for the Brier score."""
    c = float(mean_confidence)
    return (1.0 - c) ** 2, c * c


def assisted_from_bins(
    parsed: Sequence[ParsedStratum], totals: Mapping[str, PredictionTotals],
) -> dict[str, list[AssistedStratum]]:
    """The ``accuracy`` and ``brier`` strata of accumulator records (each fine bin's labelled
    verdicts at their mean confidence, split into right and wrong) and the prediction totals of
    each stratum's decided verdicts. A stratum without totals is left out of both (its verdicts
    have no recorded prediction); ``population`` is the decided count, at least the labels."""
    out: dict[str, list[AssistedStratum]] = {"accuracy": [], "brier": []}
    for s in parsed:
        t = totals.get(s.name)
        if t is None:
            continue
        n_b, k_b = s.n_f.astype(np.float64), s.k_f.astype(np.float64)
        occupied = n_b > 0
        n_b, k_b = n_b[occupied], k_b[occupied]
        c = s.qc_f[occupied] / FIXED_POINT_SCALE / n_b
        weight = np.concatenate([k_b, n_b - k_b])
        conf = np.concatenate([c, c])
        right = np.concatenate([np.ones_like(c), np.zeros_like(c)])
        population = max(int(t.count), s.labels)
        out["accuracy"].append(AssistedStratum(s.name, population, float(t.sum_c), right, conf, weight))
        mean_c = float((weight * conf).sum() / weight.sum()) if weight.sum() > 0 else 0.5
        out["brier"].append(AssistedStratum(s.name, population, float(t.sum_c - t.sum_c2),
                                            (conf - right) ** 2, conf * (1.0 - conf), weight,
                                            brier_pseudo_values(mean_c)))
    return out
