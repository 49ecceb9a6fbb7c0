"""Coverage of the service's population intervals with active audits, over resampled streams.

Why: ``audit_sampling: active`` (:mod:`judgefuse.service.review.active_audits`) audits each
auto-accepted verdict at its confidence band's rate, and the service's estimates stay unbiased
only if every label is weighted by its stamped inclusion probability (each band is its own
``auto@{rate}`` stratum, N_s / n_s labels per verdict). ``bench_active_audits.py`` measured the
widths with the bands' rates applied directly; this one replays streams through the service's
own code and asks whether the intervals it reports **cover** at their nominal level, for
uniform and active audits at the same label budget.

One stream (``--stream`` verdicts drawn with replacement from a pool of real fused verdicts):

* the panel's history: ``--history`` earlier verdicts, audited uniformly at ``--audit`` and
  labelled, outside the estimate's window (what the first plan is made from);
* every ``--replan-every`` verdicts (the plan's TTL) a fresh
  :class:`~judgefuse.service.review.active_audits.ActiveAudits` plans the bands exactly as the
  service does, by :meth:`~ActiveAudits.bands`, reading the newest 1,000 auto-accepted verdicts
  and the audit labels among them (those of the window too: the plan adapts to labels that
  are also in the estimate, as in the service);
* each verdict is routed (auto-accept at or above the pool's ``--accept`` quantile of
  confidence, else review) and stamped by :func:`~judgefuse.service.review.sampling.stamp_review`
  with the panel's audit rate (uniform) or its band's (rate, floor) (active), as the
  pipeline's stamp step calls it; the stamp's own rank orders the queue, so a review item is
  labelled when its rank is below ``--review-share`` and every drawn audit is labelled;
* the ledger's pure functions write what storage would: :func:`traffic_increments` per verdict
  (N_s and the prediction sums), the label's accumulator increments into the stratum copy
  :func:`label_stratum_key` names;
* the estimates are :func:`~judgefuse.service.estimates.population.population_block`, the
  function ``GET /v1/calibration`` calls, over an in-memory ledger holding those counters:
  labels-only accuracy, auto-accept precision, Brier, ECE and TH-Score, and the model-assisted
  accuracy, Brier and precision.

Uniform and active replay the same stream with the same random draws (one seeded
``random.Random`` each); their expected audit labels are equal up to the drift between the
plan's reference verdicts and the stream. The truth is the stream's (the window's) own value:
the mean over its verdicts for accuracy, precision and Brier, and for ECE and TH-Score the
accumulator's metrics of the fully labelled stream.

Printed per pool: audit labels per stream and ``auto@`` strata per window of each design (with
the audit labels of the smallest); then per metric and estimator each design's coverage of the
95% interval next to its target with its Monte-Carlo standard error, the number of streams
with a finite interval, the mean width, and active's width over uniform's. Every replan
naming new strata is what this found: with rates rounded to 4 decimals a window held ~11
``auto@`` strata, and ECE, TH-Score and the model-assisted intervals paid for it (the grid of
:data:`judgefuse.calibration.audit_bands.RATE_STEPS` is the fix; results page). Pools: Trust-or-Escalate's three judges
fused by mean probability, JudgeBench's ten judges by mean probability and by majority
(recorded judges, human or objective labels), and a synthetic mixture where half the
confidences are near certain (the regime where active audits' weights matter most).

Run from the repository root (data from ../shared/data or JUDGEFUSE_SHARED_DATA)::

    PYTHONPATH=benchmarks:. python benchmarks/bench_active_audit_coverage.py --streams 1000 --jobs 2

:func:`simulate` is the importable core (tests/benchmarks/test_bench_active_audit_coverage.py).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import time
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from judgefuse.service.estimates.population import population_block
from judgefuse.service.ledger import (
    ACCUMULATOR,
    AccumulatorKey,
    label_stratum_key,
    method_key,
    stratum_copy,
    traffic_increments,
)
from judgefuse.service.review.active_audits import ActiveAudits
from judgefuse.service.review.sampling import stamp_review
from judgefuse.service.settings import Settings
from judgefuse.service.storage import LabelLedger, ReviewStamp, Storage

TENANT, PANEL, METHOD = "bench", "panel", "fused"
DESIGNS = ("uniform", "active")
ROWS = (
    ("auto_accept_precision", "labels-only"),
    ("accuracy", "labels-only"),
    ("brier", "labels-only"),
    ("ece", "labels-only"),
    ("th_score", "labels-only"),
    ("auto_accept_precision", "model-assisted"),
    ("accuracy", "model-assisted"),
    ("brier", "model-assisted"),
)


@dataclass(frozen=True)
class Pool:
    """Fused verdicts to resample: confidence, correct (1/0), decided (a choice was made)."""

    name: str
    confidence: np.ndarray
    correct: np.ndarray
    decided: np.ndarray


@dataclass(frozen=True)
class Setup:
    """One stream's shape (the command line's options of the same names)."""

    stream: int = 2000
    history: int = 1000
    replan_every: int = 500
    accept: float = 0.6
    audit: float = 0.1
    review_share: float = 0.3
    level: float = 0.95


# ------------------------------------------------------------------ an in-memory ledger
class _Verdict:
    __slots__ = ("choice", "confidence", "route")

    def __init__(self, confidence: float, choice: str | None, route: str) -> None:
        self.confidence, self.choice, self.route = confidence, choice, route


class _Record:
    """What :class:`ActiveAudits` and :func:`label_stratum_key` read of a stored verdict."""

    __slots__ = ("label", "review", "verdict")

    def __init__(self, verdict: _Verdict, review: ReviewStamp, label: str | None) -> None:
        self.verdict, self.review, self.label = verdict, review, label


@dataclass
class MemoryLedger:
    """The reads the population estimates (accumulators) and the band plan (the newest
    auto-accepted verdicts) make of storage, over counters written by the ledger's functions."""

    counters: dict[str, dict[str, float]] = field(default_factory=dict)
    auto: list[_Record] = field(default_factory=list)

    def add(self, increments: Mapping[str, Mapping[str, float]]) -> None:
        for key, fields in increments.items():
            row = self.counters.setdefault(key, {})
            for name, delta in fields.items():
                row[name] = row.get(name, 0) + delta

    async def list_accumulators(self, tenant: str, prefix: str) -> list[str]:
        return [k for k in self.counters if k.startswith(prefix)]

    async def read_accumulator(self, tenant: str, key: str, *, since_hour: int | None = None) -> dict[str, float]:
        return dict(self.counters.get(key, {}))

    async def list_verdicts(self, tenant: str, query: Any, *, limit: int = 50, scan_limit: int = 2000) -> Any:
        assert query.route == "auto_accept" and query.panel == PANEL
        return _Page(self.auto[::-1][:limit])


@dataclass
class _Page:
    records: list[_Record]


# ------------------------------------------------------------------ one stream, one design
async def replay(
    c: np.ndarray, z: np.ndarray, decided: np.ndarray, history: int, tau: float, active: bool,
    setup: Setup, seed: int, settings: Settings,
) -> tuple[dict[str, Any], int]:
    """The ``population`` block of the window (everything after the first ``history`` verdicts)
    and its audit labels, for one design."""
    rng = random.Random(seed)
    plans = MemoryLedger()  # what the plan reads: every auto-accepted verdict, history included
    window = MemoryLedger()
    mkey = method_key(PANEL, METHOD)
    audits = 0
    banded = None
    for i in range(c.size):
        in_window = i >= history
        if active and in_window and (i - history) % setup.replan_every == 0:
            planner = ActiveAudits(settings, cast(Storage, plans))
            banded = await planner.bands(TENANT, PANEL, setup.audit)
        conf = float(c[i])
        is_decided = bool(decided[i])
        route = "auto_accept" if is_decided and conf >= tau else "human_review"
        code = None if route == "auto_accept" else ("below_threshold" if is_decided else "undecided")
        band = (banded.rate(conf), banded.floor) if banded is not None and route == "auto_accept" else None
        stamp = stamp_review(route, code, setup.audit, rng, band=band)
        labelled = stamp.stratum == "audit" or (stamp.stratum == "review" and stamp.rank < setup.review_share)
        right = bool(z[i])
        verdict = _Verdict(conf, ("A" if is_decided else None), route)
        record = _Record(verdict, stamp, ("A" if right else "B") if labelled else None)
        if route == "auto_accept":
            plans.auto.append(record)
        if not in_window:
            continue
        window.add(traffic_increments(PANEL, METHOD, stamp, conf if is_decided else None))
        if labelled and is_decided:
            audits += stamp.stratum == "audit"
            window.add({stratum_copy(mkey, label_stratum_key(cast(Any, record))): ACCUMULATOR.increments(conf, right)})
    block = await population_block(
        cast(LabelLedger, window), TENANT, AccumulatorKey(PANEL, "method", METHOD, "fused"), mkey,
        since_hour=None, n_bins=settings.estimates.calibration_bins, eps=settings.estimates.th_eps,
        level=setup.level,
    )
    assert block is not None
    return block, audits


def truth(c: np.ndarray, z: np.ndarray, decided: np.ndarray, tau: float, settings: Settings) -> dict[str, float]:
    """The window's own values (accuracy and Brier over decided verdicts, as the method key
    holds them; ECE and TH-Score: the accumulator's metrics of the fully labelled window)."""
    cd, zd = c[decided], z[decided]
    auto = cd >= tau
    metrics = ACCUMULATOR.metrics_from_fields(
        ACCUMULATOR.increments_many(cd, zd), n_bins=settings.estimates.calibration_bins, eps=settings.estimates.th_eps
    )
    return {
        "accuracy": float(zd.mean()),
        "brier": float(((cd - zd) ** 2).mean()),
        "auto_accept_precision": float(zd[auto].mean()) if auto.any() else math.nan,
        "ece": float(metrics["ece"]),
        "th_score": float(metrics["th_score"]),
    }


@dataclass
class Tally:
    """Per (metric, estimator, design): covered flags and widths over streams with a finite
    interval; audit labels per stream per design."""

    covered: dict[tuple[str, str, str], list[bool]] = field(default_factory=lambda: defaultdict(list))
    widths: dict[tuple[str, str, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    audits: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    strata: dict[str, list[list[int]]] = field(default_factory=lambda: defaultdict(list))
    """Per design, per stream: the audit labels of each ``auto@`` stratum of the window."""
    streams: int = 0

    def coverage(self, metric: str, estimator: str, design: str) -> tuple[float, float, int]:
        """(coverage, its Monte-Carlo standard error, streams)."""
        flags = self.covered[(metric, estimator, design)]
        n = len(flags)
        p = float(np.mean(flags)) if n else math.nan
        return p, math.sqrt(p * (1.0 - p) / n) if n else math.nan, n

    def width(self, metric: str, estimator: str, design: str) -> float:
        w = self.widths[(metric, estimator, design)]
        return float(np.mean(w)) if w else math.nan

    def merge(self, other: Tally) -> None:
        for key, flags in other.covered.items():
            self.covered[key].extend(flags)
        for key, widths in other.widths.items():
            self.widths[key].extend(widths)
        for design, counts in other.audits.items():
            self.audits[design].extend(counts)
        for design, labels in other.strata.items():
            self.strata[design].extend(labels)
        self.streams += other.streams


def _interval(block: Mapping[str, Any], metric: str, estimator: str) -> tuple[float, float] | None:
    source = block if estimator == "labels-only" else (block.get("model_assisted") or {})
    interval = source.get(metric)
    if not interval or interval.get("lower") is None or interval.get("upper") is None:
        return None
    return float(interval["lower"]), float(interval["upper"])


def simulate(pool: Pool, setup: Setup, streams: int, seed: int = 0, designs: tuple[str, ...] = DESIGNS) -> Tally:
    """``streams`` resampled streams of ``pool`` replayed under each design (module docstring)."""
    settings = Settings()
    tau = float(np.quantile(pool.confidence[pool.decided], 1.0 - setup.accept))
    tally = Tally()

    async def run() -> None:
        for s in range(streams):
            rng = np.random.default_rng([seed, s])
            idx = rng.integers(0, pool.confidence.size, setup.history + setup.stream)
            c, z, decided = pool.confidence[idx], pool.correct[idx], pool.decided[idx]
            w = slice(setup.history, None)
            true = truth(c[w], z[w], decided[w], tau, settings)
            draw_seed = int(rng.integers(2**63))
            for design in designs:
                block, audits = await replay(
                    c, z, decided, setup.history, tau, design == "active", setup, draw_seed, settings
                )
                tally.audits[design].append(audits)
                tally.strata[design].append([n for k, n in block["labelled"].items() if k.startswith("auto@")])
                for metric, estimator in ROWS:
                    got = _interval(block, metric, estimator)
                    if got is None or not math.isfinite(true[metric]):
                        continue
                    lower, upper = got
                    tally.covered[(metric, estimator, design)].append(lower <= true[metric] <= upper)
                    tally.widths[(metric, estimator, design)].append(upper - lower)
            tally.streams += 1

    asyncio.run(run())
    return tally


# ------------------------------------------------------------------ pools
def recorded_pools() -> list[Pool]:
    """Real judges on real labelled pairs, fused by the service's voting rules."""
    from bench_review_sim import data_dir

    from judgefuse.evaluation.loaders.detect import load
    from judgefuse.fusion.voting import majority, mean_probability

    root = data_dir()
    out = []
    for source, label, rules in (
        ("trust_or_escalate", "Trust-or-Escalate, 3 judges", (mean_probability,)),
        ("judgebench", "JudgeBench GPT-4o, 10 judges", (mean_probability, majority)),
    ):
        items = load([root / source])
        for rule in rules:
            verdicts = [rule(it.votes) for it in items]
            out.append(
                Pool(
                    f"{label}, {rule.__name__} ({len(items)} pairs)",
                    np.array([v.confidence for v in verdicts]),
                    np.array([float(v.choice == it.item.label) for v, it in zip(verdicts, items, strict=True)]),
                    np.array([v.choice is not None for v in verdicts]),
                )
            )
    return out


def mixture_pool(n: int = 20000, seed: int = 0) -> Pool:
    """Calibrated confidences, half near certain (0.99-1.0) and half in 0.6-0.95, each right
    with probability its confidence: the bands' rates differ most, and so do their precisions,
    so a label counted without its band's weight biases the estimate most."""
    rng = np.random.default_rng(seed)
    sure = rng.uniform(size=n) < 0.5
    c = np.where(sure, rng.uniform(0.99, 1.0, n), rng.uniform(0.6, 0.95, n))
    return Pool("synthetic mixture, half near certain", c, (rng.uniform(size=n) < c).astype(float), np.ones(n, bool))


# ------------------------------------------------------------------ report
def report(pool: Pool, setup: Setup, tally: Tally, seconds: float) -> str:
    target = setup.level
    mc = math.sqrt(target * (1 - target) / max(tally.streams, 1))
    lines = [
        f"== {pool.name}: accuracy {pool.correct[pool.decided].mean():.3f}; {tally.streams} streams of "
        f"{setup.stream} after {setup.history} of history; top {setup.accept:.0%} auto-accepted; review "
        f"labelled {setup.review_share:.0%}; audits uniform at {setup.audit:g} or active (bands replanned every "
        f"{setup.replan_every}) ({seconds:.0f} s)",
        f"   audit labels per stream: uniform {np.mean(tally.audits['uniform']):.1f}, active "
        f"{np.mean(tally.audits['active']):.1f}; auto@ strata per window: uniform "
        f"{np.mean([len(x) for x in tally.strata['uniform']]):.1f}, active "
        f"{np.mean([len(x) for x in tally.strata['active']]):.1f} (audit labels in the smallest: "
        f"median {np.median([min(x, default=0) for x in tally.strata['active']]):.0f})",
        f"   {'metric':<22} {'estimator':<15} {'uniform cov ± MC se':>20} {'active cov ± MC se':>19} "
        f"{'target':>6} {'n u/a':>10} {'width u':>9} {'width a':>9} {'a/u':>6}",
    ]
    for metric, estimator in ROWS:
        cu, su, nu = tally.coverage(metric, estimator, "uniform")
        ca, sa, na = tally.coverage(metric, estimator, "active")
        wu, wa = tally.width(metric, estimator, "uniform"), tally.width(metric, estimator, "active")
        lines.append(
            f"   {metric:<22} {estimator:<15} {cu:>12.3f} ± {su:.3f} {ca:>11.3f} ± {sa:.3f} {target:>6.2f} "
            f"{f'{nu}/{na}':>10} {wu:>9.4f} {wa:>9.4f} {wa / wu if wu > 0 else math.nan:>6.3f}"
        )
    lines.append(f"   (Monte-Carlo se of a coverage of exactly {target:.2f} over {tally.streams} streams: {mc:.3f})")
    return "\n".join(lines)


def _run(job: tuple[Pool, Setup, int, int]) -> tuple[Tally, float]:
    pool, setup, streams, seed = job
    started = time.perf_counter()
    return simulate(pool, setup, streams, seed), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--stream", type=int, default=2000, help="verdicts per stream (the window)")
    parser.add_argument("--history", type=int, default=1000, help="verdicts before the window")
    parser.add_argument("--replan-every", type=int, default=500, help="verdicts per band plan")
    parser.add_argument("--accept", type=float, default=0.6, help="share of the pool auto-accepted")
    parser.add_argument("--audit", type=float, default=0.1, help="the panel's audit rate")
    parser.add_argument("--review-share", type=float, default=0.3, help="share of review labelled")
    parser.add_argument("--jobs", type=int, default=2, help="processes (pools x stream halves)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    setup = Setup(args.stream, args.history, args.replan_every, args.accept, args.audit, args.review_share)
    started = time.perf_counter()
    pools = [*recorded_pools(), mixture_pool()]
    print(f"bench_active_audit_coverage: {args}", flush=True)
    chunks = max(1, args.jobs)
    per = [args.streams // chunks + (i < args.streams % chunks) for i in range(chunks)]
    jobs = [(pool, setup, n, args.seed * 1000 + k) for pool in pools for k, n in enumerate(per) if n]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        results = list(ex.map(_run, jobs))
    for p, pool in enumerate(pools):
        tally, seconds = Tally(), 0.0
        for part, spent in results[p * len([n for n in per if n]) : (p + 1) * len([n for n in per if n])]:
            tally.merge(part)
            seconds += spent
        print(report(pool, setup, tally, seconds), flush=True)
    print(f"({time.perf_counter() - started:.0f} s wall)")


if __name__ == "__main__":
    main()
