"""Review-loop simulation: recorded judgments replayed as traffic, labels only where routing sends them.

Why: the labels a gateway gets back are chosen by its own routing (docs/design.md, 'The review
loop'). This replays real recorded judgments as resampled streams and checks the stratified
estimators (:func:`~judgefuse.calibration.population_estimates`,
:func:`~judgefuse.calibration.precision_estimate`) and the stratified tuner
(:func:`~judgefuse.calibration.tune_threshold_stratified`) against the truth of each stream.

One stream (``stream_len`` items drawn with replacement from the recorded pool):

1. the first ``warmup`` items have no threshold: all routed to review, queued and labelled;
2. a threshold is tuned on those labels (one stratum, ``review``);
3. items up to ``retune_at`` are routed with it: review below, auto-accept above, each
   auto-accept drawn for audit with probability ``audit_rate``; the annotator labels every
   queued item (review + audit), or a random ``label_share`` of them;
4. a second tune at ``retune_at`` on the stratified labels so far (strata ``review`` and
   ``auto@r``, N = every verdict of the stratum);
5. the rest of the stream is routed with the second threshold.

Printed per scenario, over streams: the whole stream's truth vs the stratified estimate vs the
naive estimate (plain metrics of the labelled items, as if they were a uniform sample), mean
and sd, for accuracy, ECE, Brier, TH-Score and auto-accept precision; how often each 95%
interval covered the stream's truth (target >= 93% for accuracy and precision); and, for each
tune, how often the realised precision of the chosen threshold on the pool (the distribution
the streams are drawn from) met the target (a stream without a threshold accepts nothing and
meets it vacuously; target rate >= 1 - delta), with the share of streams that got a threshold
and the mean share auto-accepted after it.

"naive" is what a dashboard would show from the labels as if they were a uniform sample; for
precision it is the mean of the audit labels, which is itself unbiased (from review-route labels
alone precision is not observable at all). The precision sd over streams is large because many
streams auto-accept only a few dozen verdicts and audit a handful of them; coverage counts only
streams whose auto stratum has at least one label (no label: NaN interval by contract).
JudgeBench targets are 0.8 (reachable: about the pool precision of the top third of
confidences); TH-Score of mean_probability is 0 because the mean of ten judges' probabilities
never reaches the high tail (c >= 0.9) and the chosen answer's confidence is never <= 0.1.

Run (< 2 minutes on one core; ~20 s here): ``PYTHONPATH=. python benchmarks/bench_review_sim.py
[streams]`` from the repository root, data from ``../shared/data`` (or ``JUDGEFUSE_SHARED_DATA``).
:func:`simulate` is the importable core (the service's HTTP benchmark reuses it).

Recorded run (200 streams, seed 0; 2-core machine shared with other jobs; 2026-12-06 at 903895f,
the ECE interval centred between the plug-in and the per-bin debiased ECE and the bootstrap's
prior split by unlabelled verdicts: ECE covered 0.840-0.960 with the percentile interval on
the same streams, 0.870-0.960 with the prior split by population)::

    population_estimates + precision_estimate on 1,000,000 labels' fields (5,150 fields, 2 strata): 3.09 ms (target < 10 ms)
    pool Trust-or-Escalate gpt-4-turbo: 500 items, accuracy 0.784
    == Trust-or-Escalate gpt-4-turbo, annotator labels 100% of the queue: 200 streams, mean labels 346, target precision 0.85, delta 0.1
    metric               truth      stratified           naive  95% covered (streams)
    accuracy     0.783 (0.019)   0.786 (0.026)   0.764 (0.022)        0.985 of 200 (>= 0.93)
    ece          0.135 (0.017)   0.132 (0.024)   0.141 (0.019)        0.970 of 200
    brier        0.164 (0.015)   0.161 (0.023)   0.174 (0.016)        0.985 of 200
    th_score    16.304 (1.109)  16.524 (1.729)  15.008 (1.187)        0.970 of 200
    precision    0.911 (0.044)   0.920 (0.119)   0.920 (0.119)        0.974 of 156 (>= 0.93)
    first tune: realised precision >= target in 0.980 of streams (target >= 0.90); threshold found in 0.385; mean pool precision when found 0.905; mean share auto-accepted after it 0.209
    second tune: realised precision >= target in 1.000 of streams (target >= 0.90); threshold found in 0.415; mean pool precision when found 0.922; mean share auto-accepted after it 0.189
    (8.9 s)

    == Trust-or-Escalate gpt-4-turbo, annotator labels 70% of the queue: 200 streams, mean labels 250, target precision 0.85, delta 0.1
    metric               truth      stratified           naive  95% covered (streams)
    accuracy     0.783 (0.019)   0.785 (0.029)   0.768 (0.027)        0.945 of 200 (>= 0.93)
    ece          0.135 (0.017)   0.135 (0.027)   0.142 (0.024)        0.950 of 200
    brier        0.164 (0.015)   0.162 (0.024)   0.172 (0.019)        0.955 of 200
    th_score    16.304 (1.109)  16.432 (1.825)  15.243 (1.523)        0.945 of 200
    precision    0.915 (0.046)   0.931 (0.120)   0.931 (0.120)        0.957 of 115 (>= 0.93)
    first tune: realised precision >= target in 0.980 of streams (target >= 0.90); threshold found in 0.370; mean pool precision when found 0.910; mean share auto-accepted after it 0.209
    second tune: realised precision >= target in 1.000 of streams (target >= 0.90); threshold found in 0.220; mean pool precision when found 0.922; mean share auto-accepted after it 0.094
    (8.8 s)

    pool JudgeBench GPT-4o, 10 judges, majority: 350 items, accuracy 0.689
    == JudgeBench GPT-4o, 10 judges, majority, annotator labels 100% of the queue: 200 streams, mean labels 362, target precision 0.8, delta 0.1
    metric               truth      stratified           naive  95% covered (streams)
    accuracy     0.688 (0.024)   0.690 (0.031)   0.670 (0.026)        0.960 of 200 (>= 0.93)
    ece          0.074 (0.020)   0.079 (0.025)   0.077 (0.021)        0.995 of 200
    brier        0.200 (0.011)   0.199 (0.019)   0.209 (0.012)        0.975 of 200
    th_score     5.937 (0.665)   6.001 (1.215)   4.686 (0.665)        0.935 of 200
    precision    0.880 (0.068)   0.895 (0.154)   0.895 (0.154)        0.971 of 172 (>= 0.93)
    first tune: realised precision >= target in 0.975 of streams (target >= 0.90); threshold found in 0.275; mean pool precision when found 0.849; mean share auto-accepted after it 0.108
    second tune: realised precision >= target in 0.995 of streams (target >= 0.90); threshold found in 0.605; mean pool precision when found 0.893; mean share auto-accepted after it 0.176
    (8.3 s)

    == JudgeBench GPT-4o, 10 judges, majority, annotator labels 70% of the queue: 200 streams, mean labels 254, target precision 0.8, delta 0.1
    metric               truth      stratified           naive  95% covered (streams)
    accuracy     0.688 (0.024)   0.689 (0.035)   0.671 (0.030)        0.945 of 200 (>= 0.93)
    ece          0.074 (0.020)   0.085 (0.028)   0.081 (0.024)        0.965 of 200
    brier        0.200 (0.011)   0.199 (0.021)   0.208 (0.014)        0.955 of 200
    th_score     5.937 (0.665)   5.957 (1.356)   4.804 (0.782)        0.915 of 200
    precision    0.874 (0.063)   0.883 (0.184)   0.883 (0.184)        0.973 of 146 (>= 0.93)
    first tune: realised precision >= target in 0.980 of streams (target >= 0.90); threshold found in 0.080; mean pool precision when found 0.811; mean share auto-accepted after it 0.040
    second tune: realised precision >= target in 0.990 of streams (target >= 0.90); threshold found in 0.685; mean pool precision when found 0.882; mean share auto-accepted after it 0.218
    (8.2 s)

    pool JudgeBench GPT-4o, 10 judges, mean_probability: 350 items, accuracy 0.669
    == JudgeBench GPT-4o, 10 judges, mean_probability, annotator labels 100% of the queue: 200 streams, mean labels 350, target precision 0.8, delta 0.1
    metric               truth      stratified           naive  95% covered (streams)
    accuracy     0.668 (0.024)   0.669 (0.032)   0.638 (0.026)        0.975 of 200 (>= 0.93)
    ece          0.084 (0.019)   0.089 (0.023)   0.077 (0.021)        0.965 of 200
    brier        0.201 (0.006)   0.200 (0.011)   0.212 (0.007)        0.980 of 200
    th_score     0.000 (0.000)   0.000 (0.000)   0.000 (0.000)        1.000 of 200
    precision    0.889 (0.060)   0.893 (0.137)   0.893 (0.137)        0.974 of 195 (>= 0.93)
    first tune: realised precision >= target in 0.985 of streams (target >= 0.90); threshold found in 0.605; mean pool precision when found 0.887; mean share auto-accepted after it 0.226
    second tune: realised precision >= target in 1.000 of streams (target >= 0.90); threshold found in 0.385; mean pool precision when found 0.887; mean share auto-accepted after it 0.141
    (5.9 s)

    == JudgeBench GPT-4o, 10 judges, mean_probability, annotator labels 70% of the queue: 200 streams, mean labels 245, target precision 0.8, delta 0.1
    metric               truth      stratified           naive  95% covered (streams)
    accuracy     0.668 (0.024)   0.667 (0.037)   0.641 (0.030)        0.965 of 200 (>= 0.93)
    ece          0.084 (0.019)   0.092 (0.028)   0.082 (0.024)        0.950 of 200
    brier        0.201 (0.006)   0.201 (0.012)   0.210 (0.008)        0.980 of 200
    th_score     0.000 (0.000)   0.000 (0.000)   0.000 (0.000)        1.000 of 200
    precision    0.875 (0.063)   0.870 (0.177)   0.870 (0.177)        0.942 of 173 (>= 0.93)
    first tune: realised precision >= target in 0.965 of streams (target >= 0.90); threshold found in 0.150; mean pool precision when found 0.841; mean share auto-accepted after it 0.069
    second tune: realised precision >= target in 0.950 of streams (target >= 0.90); threshold found in 0.755; mean pool precision when found 0.884; mean share auto-accepted after it 0.285
    (2.8 s)

    total 45.8 s
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from judgefuse.calibration import (
    CalibrationAccumulator,
    StratumData,
    population_estimates,
    precision_estimate,
    summarize,
    tune_threshold_stratified,
)
from judgefuse.calibration.pooled_tuning import tune_threshold_pooled

METRICS = ("accuracy", "ece", "brier", "th_score", "precision")
ACC = CalibrationAccumulator()


@dataclass
class SimResult:
    """Per-stream records of one scenario; :meth:`table` prints them."""

    name: str
    target: float
    delta: float
    truth: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in METRICS})
    stratified: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in METRICS})
    naive: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in METRICS})
    covered: dict[str, list[bool]] = field(default_factory=lambda: {m: [] for m in METRICS})
    labels: list[int] = field(default_factory=list)
    tunes: dict[str, dict[str, list[float]]] = field(default_factory=lambda: {
        t: {"met": [], "qualified": [], "pool_precision": [], "accepted_share": [], "window_met": []}
        for t in ("first", "second")})

    def coverage(self, metric: str) -> float:
        got = self.covered[metric]
        return float(np.mean(got)) if got else math.nan

    def met_rate(self, tune: str) -> float:
        return float(np.mean(self.tunes[tune]["met"]))

    def table(self) -> str:
        def ms(values: list[float]) -> str:
            v = np.asarray(values, dtype=float)
            v = v[~np.isnan(v)]
            return f"{v.mean():7.3f} ({v.std():.3f})" if v.size else "    n/a        "

        lines = [f"== {self.name}: {len(self.labels)} streams, mean labels "
                 f"{np.mean(self.labels):.0f}, target precision {self.target:g}, delta {self.delta:g}",
                 f"{'metric':<10} {'truth':>15} {'stratified':>15} {'naive':>15} "
                 f"{'95% covered':>12} (streams)"]
        for m in METRICS:
            target = " (>= 0.93)" if m in ("accuracy", "precision") else ""
            lines.append(f"{m:<10} {ms(self.truth[m]):>15} {ms(self.stratified[m]):>15} "
                         f"{ms(self.naive[m]):>15} {self.coverage(m):>12.3f} "
                         f"of {len(self.covered[m])}{target}")
        for t, rec in self.tunes.items():
            pp = np.asarray(rec["pool_precision"], dtype=float)
            pp = pp[~np.isnan(pp)]
            lines.append(
                f"{t} tune: realised precision >= target in {self.met_rate(t):.3f} of streams "
                f"(target >= {1 - self.delta:.2f}); threshold found in "
                f"{np.mean(rec['qualified']):.3f}; mean pool precision when found "
                f"{pp.mean() if pp.size else math.nan:.3f}; mean share auto-accepted after it "
                f"{np.mean(rec['accepted_share']):.3f}")
        return "\n".join(lines)


def _pool_precision(c: np.ndarray, z: np.ndarray, tau: float | None) -> float:
    if tau is None:
        return math.nan
    accepted = c >= tau
    return float(z[accepted].mean()) if accepted.any() else math.nan


def _record_tune(res: SimResult, which: str, tau: float | None, pool_c: np.ndarray,
                 pool_z: np.ndarray, after: np.ndarray, window: tuple[np.ndarray, np.ndarray]) -> None:
    """``window``: the confidences and correctness of the verdicts the tune saw (labelled or
    not), whose own accepted precision the ``window`` bound promises."""
    rec = res.tunes[which]
    precision = _pool_precision(pool_c, pool_z, tau)
    in_window = _pool_precision(*window, tau)
    rec["window_met"].append(tau is None or math.isnan(in_window) or in_window >= res.target - 1e-12)
    rec["qualified"].append(tau is not None)
    rec["pool_precision"].append(precision)
    rec["met"].append(tau is None or math.isnan(precision) or precision >= res.target - 1e-12)
    rec["accepted_share"].append(0.0 if tau is None else float((after >= tau).mean()))


def _tune(c: np.ndarray, z: np.ndarray, strata: np.ndarray, population: dict[str, int],
          target: float, delta: float, options: dict[str, Any],
          window: dict[str, np.ndarray], routed_at: np.ndarray | None = None) -> float | None:
    """``window``: every verdict's confidence per stratum, passed to the ``window`` bounds only.

    ``options["pooled"]`` (a dict of :func:`tune_threshold_pooled` options) tunes by pooling
    instead: ``routed_at`` is each label's period threshold (NaN: none); with ``fresh: True``
    in it, only the labels of periods routed by a threshold are used (not the warm-up's).
    """
    if c.size == 0:
        return None
    if "pooled" in options:
        pooled = dict(options["pooled"])
        routed = np.full(c.size, np.nan) if routed_at is None else routed_at
        if pooled.pop("fresh", False):
            keep = ~np.isnan(routed)
            if not keep.any():  # no threshold yet: the warm-up is all there is
                keep = np.ones(c.size, dtype=bool)
            c, z, routed = c[keep], z[keep], routed[keep]
        every = np.concatenate([np.asarray(v, dtype=np.float64) for v in window.values()])
        return tune_threshold_pooled(c, z, routed, every, target_precision=target, delta=delta,
                                     **pooled).threshold
    extra = {"window": window} if str(options.get("bound", "")).startswith("window") else {}
    return tune_threshold_stratified(c, z, strata, population, target_precision=target,
                                     delta=delta, **options, **extra).threshold


def simulate(
    confidence: np.ndarray,
    correct: np.ndarray,
    *,
    name: str = "stream",
    streams: int = 200,
    stream_len: int = 400,
    warmup: int = 100,
    retune_at: int = 250,
    audit_rate: float = 0.1,
    label_share: float = 1.0,
    target: float = 0.85,
    delta: float = 0.1,
    seed: int = 0,
    on_stream: Callable[[dict[str, np.ndarray]], None] | None = None,
    tune_options: dict[str, Any] | None = None,
    estimates: bool = True,
    retune_options: dict[str, Any] | None = None,
) -> SimResult:
    """Replay ``streams`` resampled streams of the pool (``confidence``, ``correct``); see module doc.

    ``on_stream`` (optional) receives each stream's arrays (``confidence``, ``correct``,
    ``route`` in {"review", "audit", "none"}, ``labelled`` bool) so another harness (e.g. the
    HTTP benchmark) can replay the same streams through the service and compare.
    ``tune_options``: extra arguments of the tuner (e.g. ``chains``, ``bound``: the bound
    benchmark compares them); ``estimates=False`` skips the population estimates (tunes only);
    ``retune_options``: the second tune's, when it differs from the first's.
    """
    options = tune_options or {}
    second_options = options if retune_options is None else retune_options
    pool_c = np.asarray(confidence, dtype=np.float64)
    pool_z = np.asarray(correct, dtype=np.float64)
    rng = np.random.default_rng(seed)
    res = SimResult(name, target, delta)
    auto_name = f"auto@{audit_rate:g}"
    for _ in range(streams):
        idx = rng.integers(0, pool_c.size, stream_len)
        c, z = pool_c[idx], pool_z[idx]
        route = np.full(stream_len, "review", dtype=object)
        labelled = np.zeros(stream_len, dtype=bool)
        routed_at = np.full(stream_len, np.nan)  # each verdict's period threshold (NaN: none)
        labels_given = rng.uniform(size=stream_len) < label_share
        audit_draw = rng.uniform(size=stream_len) < audit_rate

        def route_block(lo: int, hi: int, tau: float | None, c: np.ndarray = c,
                        route: np.ndarray = route, audit_draw: np.ndarray = audit_draw,
                        labelled: np.ndarray = labelled, labels_given: np.ndarray = labels_given,
                        routed_at: np.ndarray = routed_at) -> None:
            """Route and label the block [lo, hi) of this run's arrays (bound now: B023)."""
            if tau is not None:
                routed_at[lo:hi] = tau
                auto = c[lo:hi] >= tau
                route[lo:hi] = np.where(auto, np.where(audit_draw[lo:hi], "audit", "none"),
                                        "review")
            queued = route[lo:hi] != "none"
            labelled[lo:hi] = queued & labels_given[lo:hi]

        route_block(0, warmup, None)
        lab = labelled[:warmup]
        tau1 = _tune(c[:warmup][lab], z[:warmup][lab], np.full(int(lab.sum()), "review"),
                     {"review": warmup}, target, delta, options, {"review": c[:warmup]})
        _record_tune(res, "first", tau1, pool_c, pool_z, c[warmup:retune_at], (c[:warmup], z[:warmup]))
        route_block(warmup, retune_at, tau1)

        head = slice(0, retune_at)
        lab = labelled[head]
        strata_of = np.where(route[head] == "review", "review", auto_name)
        population = {"review": int((route[head] == "review").sum()),
                      auto_name: int((route[head] != "review").sum())}
        window = {name: c[head][strata_of == name] for name in population}
        tau2 = _tune(c[head][lab], z[head][lab], strata_of[lab], population, target, delta,
                     second_options, window, routed_at[head][lab])
        _record_tune(res, "second", tau2, pool_c, pool_z, c[retune_at:], (c[head], z[head]))
        route_block(retune_at, stream_len, tau2)
        if on_stream is not None:
            on_stream({"confidence": c, "correct": z, "route": route.astype(str),
                       "labelled": labelled.copy()})
        res.labels.append(int(labelled.sum()))
        if not estimates:
            continue

        review = route == "review"
        auto = ~review
        review_fields = ACC.increments_many(c[review & labelled], z[review & labelled]) \
            if (review & labelled).any() else {}
        auto_fields = ACC.increments_many(c[auto & labelled], z[auto & labelled]) \
            if (auto & labelled).any() else {}
        strata = [StratumData("review", int(review.sum()), review_fields),
                  StratumData(auto_name, int(auto.sum()), auto_fields)]
        est = population_estimates(strata, seed=int(rng.integers(2**31)))
        est["precision"] = precision_estimate(strata[1:])
        truth = summarize(c, z)
        naive = summarize(c[labelled], z[labelled]) if labelled.any() else {}
        for m in METRICS:
            if m == "precision":
                t = float(z[auto].mean()) if auto.any() else math.nan
                nv = float(z[auto & labelled].mean()) if (auto & labelled).any() else math.nan
            else:
                t, nv = truth[m], naive.get(m, math.nan)
            res.truth[m].append(t)
            res.stratified[m].append(est[m].estimate)
            res.naive[m].append(nv)
            lo, hi = est[m].lower, est[m].upper
            # precision: only streams that auto-accepted something and have an interval (a
            # stratum with no labels at all gives NaN bounds by contract); 1e-9: the fields'
            # fixed point
            if not (math.isnan(t) or math.isnan(lo)):
                res.covered[m].append(bool(lo - 1e-9 <= t <= hi + 1e-9))
    return res


# ---------------------------------------------------------------- data
def data_dir() -> Path:
    env = os.environ.get("JUDGEFUSE_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def load_toe(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Trust-or-Escalate: p_a = probs[0] / (probs[0] + probs[1]); correct = choice == human."""
    conf, corr = [], []
    with path.open() as fh:
        for line in fh:
            rec = json.loads(line)
            p0, p1 = rec["probs"]
            p_a = p0 / (p0 + p1)
            choice_a = p_a >= 0.5
            conf.append(max(p_a, 1.0 - p_a))
            corr.append(choice_a == (rec["preferences"]["human"] == 1))
    return np.asarray(conf), np.asarray(corr, dtype=float)


def load_judgebench_fused(directory: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """JudgeBench GPT-4o split, 10 recorded judges fused by majority vote and mean probability.

    An undecided verdict (no valid vote) counts as wrong at its confidence 0.5.
    """
    from judgefuse.evaluation.loaders import load
    from judgefuse.fusion.voting import majority, mean_probability

    items = load([directory])
    out = {}
    for fuse in (majority, mean_probability):
        conf, corr = [], []
        for it in items:
            v = fuse(it.votes)
            conf.append(v.confidence)
            corr.append(v.choice is not None and v.choice == it.item.label)
        out[fuse.__name__] = (np.asarray(conf), np.asarray(corr, dtype=float))
    return out


def recorded_pools(root: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The recorded pools the estimate benchmarks replay: Trust-or-Escalate gpt-4-turbo and
    JudgeBench GPT-4o's ten judges fused by majority and by mean probability, by name."""
    pools = {"Trust-or-Escalate gpt-4-turbo": load_toe(root / "trust_or_escalate" / "gpt-4-turbo.calibration.jsonl")}
    for method, (c, z) in load_judgebench_fused(root / "judgebench").items():
        pools[f"JudgeBench GPT-4o, 10 judges, {method}"] = (c, z)
    return pools


def time_estimates(n_labels: int = 1_000_000, repeats: int = 50) -> float:
    """Best time of :func:`population_estimates` + :func:`precision_estimate` on 1M labels' fields.

    Two strata (review 60%, auto 40% of the labels), continuous confidences so that every fine
    bin is occupied (the most fields). Target: < 10 ms (O(bins), independent of the labels).
    """
    rng = np.random.default_rng(0)
    c = rng.beta(5, 1.2, n_labels)
    z = rng.uniform(size=n_labels) < c - 0.1
    cut = int(0.6 * n_labels)
    strata = [StratumData("review", cut, ACC.increments_many(c[:cut], z[:cut])),
              StratumData("auto@0.1", 10 * (n_labels - cut),
                          ACC.increments_many(c[cut:], z[cut:]))]
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        population_estimates(strata)
        precision_estimate(strata[1:])
        best = min(best, time.perf_counter() - t0)
    print(f"population_estimates + precision_estimate on {n_labels:,} labels' fields "
          f"({sum(len(s.fields) for s in strata):,} fields, 2 strata): {best * 1e3:.2f} ms "
          "(target < 10 ms)")
    return best


def main(streams: int = 200) -> list[SimResult]:
    """Run every scenario and print its table (see the module docstring for the recorded run)."""
    root = data_dir()
    time_estimates()
    t0 = time.perf_counter()
    pools = {"Trust-or-Escalate gpt-4-turbo": (
        *load_toe(root / "trust_or_escalate" / "gpt-4-turbo.calibration.jsonl"), 0.85)}
    for method, (c, z) in load_judgebench_fused(root / "judgebench").items():
        # reachable targets: about the pool precision of the top third of confidences
        pools[f"JudgeBench GPT-4o, 10 judges, {method}"] = (c, z, 0.8)
    results = []
    for name, (c, z, target) in pools.items():
        print(f"pool {name}: {c.size} items, accuracy {z.mean():.3f}")
        for share in (1.0, 0.7):
            t1 = time.perf_counter()
            res = simulate(c, z, name=f"{name}, annotator labels {share:.0%} of the queue",
                           streams=streams, label_share=share, target=target, delta=0.1)
            print(res.table())
            print(f"({time.perf_counter() - t1:.1f} s)\n")
            results.append(res)
    print(f"total {time.perf_counter() - t0:.1f} s")
    return results


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
