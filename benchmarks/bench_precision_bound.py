"""The stratified tuner's precision bound: today's against the new one, on resampled real streams.

Why (issue 28, item 1; docs/design.md, 'The review loop'): a tune on review + audit labels
certified little. Two changes, compared here with the previous tuner on the same streams:

* the bound splits delta by where it matters (``bound="weighted"``: 0.2 delta to the strata's
  accepted shares, the error rates' 0.8 delta in proportion to each stratum's part in the error
  rate's standard error) instead of half and half, evenly among the strata (``"even"``);
* several fixed-sequence scans (``chains=4``: from the first sets of 30, 60, 120 and 240 labelled
  items; half of delta to the first, the rest shared), so one unlucky small set no longer
  ends the tune.

"today" is ``bound="even", chains=1``; "new" is the default (``bound="weighted", chains=4``).
Round 3 adds (issue 28, item 1 again): "support" = new with ``support={"review": tau0}`` (the
review stratum holds exactly the verdicts below ``tau0``, so a candidate at or above it cannot
accept any: Part 1 only, where that is true by construction); "window" and "window_future"
(:mod:`judgefuse.calibration.window_bound`: the window's own accepted precision, exact
hypergeometric; and that plus a Clopper-Pearson step to future traffic). Every row prints the
share of streams below target on the pool (future traffic) and on the window next to delta;
only "window" promises the window alone. ``--part``, ``--pool`` and ``--tuners`` select rows
(the recorded runs ran them as parallel processes). Round 4 (issue 28, item 1: the mid-stream
retune): "pooled" = :func:`judgefuse.calibration.pooled_tuning.tune_threshold_pooled` (labels
pooled by constant inclusion probability: each label's period threshold, warm-up NaN);
"pooled_split" and "pooled_known" its ``mixed="split"`` variants (boxed and known cell
weights); "pooled_fresh" pooled without the warm-up's labels
(``benchmarks/results/bench_precision_bound_pooled.txt``).

Part 1, certification at 100, 150 and 300 audit labels. One stream: verdicts drawn with
replacement from a recorded pool, routed at ``tau0`` = the pool's median confidence; every
verdict below it goes to review and is labelled, each one above it is audited with probability
0.2. When the audit stratum reaches 100, 150 and 300 labels a threshold is tuned on the labels so
far (strata ``review`` and ``auto@0.2``, N = every verdict of the stratum so far). Printed per
pool and label count: the share of streams with a threshold ("certified"), and the share whose
threshold has a realised precision on the pool (the distribution the streams come from) below
the target, next to delta.

Part 2, the mid-stream retune of :func:`bench_review_sim.simulate` (a first tune on 100 review
labels, routing with it and auditing 10% of the auto-accepted, a second tune at 250 verdicts on
the stratified labels), today against new: the share of streams where each tune finds a
threshold and the share whose realised precision misses the target.

Run from the repository root (``--streams 1000``: ~3 CPU-minutes)::

    PYTHONPATH=. python benchmarks/bench_precision_bound.py --streams 1000
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_review_sim import data_dir, load_judgebench_fused, load_toe, simulate  # noqa: E402

from judgefuse.calibration.pooled_tuning import tune_threshold_pooled  # noqa: E402
from judgefuse.calibration.stratified_tuning import tune_threshold_stratified  # noqa: E402

DELTA = 0.1
AUDIT_RATE = 0.2
CHECKPOINTS = (100, 150, 300)
TUNERS: dict[str, dict[str, Any]] = {"today": {"bound": "even", "chains": 1}, "new": {},
                                     "support": {"support": "tau0"},
                                     "window": {"bound": "window"},
                                     "window_future": {"bound": "window_future"},
                                     "pooled": {"pooled": {}},
                                     "pooled_split": {"pooled": {"mixed": "split"}},
                                     "pooled_known": {"pooled": {"mixed": "split", "weights": "known"}},
                                     "pooled_fresh": {"pooled": {"fresh": True}}}
"""``window`` bounds the realised precision of the stream's own accepted verdicts so far (it is
given every verdict's confidence); its failures are counted against that window precision and,
separately, against the pool's (future traffic), which it does not promise."""


def pools() -> dict[str, tuple[np.ndarray, np.ndarray, float]]:
    """The shared pools and their targets (as in bench_review_sim: about the top third's precision)."""
    root = data_dir()
    out = {"Trust-or-Escalate gpt-4-turbo": (
        *load_toe(root / "trust_or_escalate" / "gpt-4-turbo.calibration.jsonl"), 0.85)}
    for method, (c, z) in load_judgebench_fused(root / "judgebench").items():
        out[f"JudgeBench GPT-4o, 10 judges, {method}"] = (c, z, 0.8)
    return out


def _outcome(tau: float | None, pool_c: np.ndarray, pool_z: np.ndarray, c: np.ndarray,
             z: np.ndarray, target: float) -> tuple[bool, bool, bool]:
    """(certified, pool precision below target, window precision below target)."""
    realised = float(pool_z[pool_c >= tau].mean()) if tau is not None else 1.0
    in_window = float(z[c >= tau].mean()) if tau is not None else 1.0
    return tau is not None, realised < target - 1e-12, in_window < target - 1e-12


@dataclass(frozen=True)
class Checkpoint:
    """One tune of Part 1: the stream's first ``end`` verdicts when the audit stratum reached
    ``k`` labels (module docstring), with what the stratified tuner reads."""

    k: int
    c: np.ndarray
    z: np.ndarray
    head_auto: np.ndarray
    head_lab: np.ndarray
    strata: np.ndarray
    population: dict[str, int]
    tau0: float


def checkpoints(pool_c: np.ndarray, pool_z: np.ndarray, streams: int, seed: int) -> Iterator[Checkpoint]:
    """Part 1's streams (review below the pool's median confidence, ``AUDIT_RATE`` of the rest
    audited), one :class:`Checkpoint` at each of ``CHECKPOINTS`` audit labels, stream by stream."""
    rng = np.random.default_rng(seed)
    tau0 = float(np.quantile(pool_c, 0.5))
    auto_share = float((pool_c >= tau0).mean())
    length = int(max(CHECKPOINTS) / AUDIT_RATE / auto_share * 1.5)
    for _ in range(streams):
        idx = rng.integers(0, pool_c.size, length)
        c, z = pool_c[idx], pool_z[idx]
        auto = c >= tau0
        labelled = ~auto | (auto & (rng.uniform(size=length) < AUDIT_RATE))
        audited = np.cumsum(auto & labelled)
        for k in CHECKPOINTS:
            end = int(np.searchsorted(audited, k)) + 1
            head_auto, head_lab = auto[:end], labelled[:end]
            strata = np.where(head_auto, f"auto@{AUDIT_RATE:g}", "review")[head_lab]
            population = {"review": int((~head_auto).sum()), f"auto@{AUDIT_RATE:g}": int(head_auto.sum())}
            yield Checkpoint(k, c[:end], z[:end], head_auto, head_lab, strata, population, tau0)


def certification(pool_c: np.ndarray, pool_z: np.ndarray, target: float, streams: int,
                  seed: int, tuners: dict[str, dict[str, Any]] = TUNERS) -> dict[str, dict[int, tuple[float, float, float]]]:
    """Part 1 (module docstring): per tuner and audit-label count, the shares of streams
    (certified, pool precision below target, window precision below target)."""
    got: dict[str, dict[int, list[tuple[bool, bool, bool]]]] = {t: {k: [] for k in CHECKPOINTS}
                                                                 for t in tuners}
    for cp in checkpoints(pool_c, pool_z, streams, seed):
        c, z, k = cp.c, cp.z, cp.k
        window = {"review": c[~cp.head_auto], f"auto@{AUDIT_RATE:g}": c[cp.head_auto]}
        for name, options in tuners.items():
            if "pooled" in options:  # every label was routed at tau0 (review below, audit above)
                lab_c = c[cp.head_lab]
                tau = tune_threshold_pooled(
                    lab_c, z[cp.head_lab], np.full(lab_c.size, cp.tau0), c,
                    target_precision=target, delta=DELTA,
                    **{k: v for k, v in options["pooled"].items() if k != "fresh"}).threshold
                got[name][k].append(_outcome(tau, pool_c, pool_z, c, z, target))
                continue
            extra: dict[str, Any] = dict(options)
            if str(options.get("bound")).startswith("window"):
                extra["window"] = window
            if "support" in options:  # review holds exactly the verdicts below tau0
                extra["support"] = {"review": cp.tau0}
            tau = tune_threshold_stratified(c[cp.head_lab], z[cp.head_lab], cp.strata, cp.population,
                                            target_precision=target, delta=DELTA,
                                            **extra).threshold
            got[name][k].append(_outcome(tau, pool_c, pool_z, c, z, target))
    return {name: {k: tuple(float(x) for x in np.mean(np.array(v, dtype=float), axis=0))
                   for k, v in per.items()} for name, per in got.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--part", choices=("1", "2", "all"), default="all")
    parser.add_argument("--pool", default="", help="only the pools whose name contains this")
    parser.add_argument("--tuners", default=",".join(TUNERS), help=f"comma-separated, of {list(TUNERS)}")
    args = parser.parse_args()
    tuners = {t: TUNERS[t] for t in args.tuners.split(",")}
    t0 = time.perf_counter()
    print(f"delta {DELTA}; today = bound 'even', one scan; new = bound 'weighted', 4 scans; window = "
          "exact hypergeometric bound on the window's own accepted verdicts (4 scans); window_future "
          f"= window at delta/2 then Clopper-Pearson to future traffic at delta/2\n")
    all_pools = {k: v for k, v in pools().items() if args.pool in k}
    if args.part in ("1", "all"):
        print(f"Part 1: review below the pool's median confidence, {AUDIT_RATE:.0%} of the rest "
              f"audited; {args.streams} streams per pool. 'below target': the share of streams whose "
              f"threshold's precision is below the target, on the pool (future traffic) and on the "
              f"stream's own verdicts so far (the window), next to delta {DELTA}")
        print(f"{'pool':<60} {'audit labels':>12} {'tuner':<13} {'certified':>9} "
              f"{'below: pool':>11} {'window':>7}")
        for name, (c, z, target) in all_pools.items():
            res = certification(c, z, target, args.streams, args.seed, tuners)
            for k in CHECKPOINTS:
                for tuner in tuners:
                    cert, pool_below, window_below = res[tuner][k]
                    print(f"{name + f' (target {target:g})':<60} {k:>12} {tuner:<13} {cert:>9.3f} "
                          f"{pool_below:>11.3f} {window_below:>7.3f}", flush=True)
    if args.part in ("2", "all"):
        print(f"\nPart 2: mid-stream retune (bench_review_sim: 100 review labels, then 10% audit, "
              f"second tune at 250 verdicts); {args.streams} streams per row; 'below': realised "
              f"precision below target on the pool (future) and, for the 2nd tune, on its window "
              f"(the 250 verdicts), next to delta {DELTA}")
        print(f"{'pool, annotator share':<56} {'tuner':<13} {'1st found':>9} {'2nd found':>9} "
              f"{'1st below':>9} {'2nd below':>9} {'2nd window':>10}")
        for name, (c, z, target) in all_pools.items():
            for share in (1.0, 0.7):
                for tuner, options in tuners.items():
                    # the window bounds only retune: a first tune on a fully labelled warm-up
                    # would certify its labels' own precision, which says nothing of traffic
                    first = TUNERS["new"] if tuner.startswith("window") else options
                    sim = simulate(c, z, name=name, streams=args.streams, label_share=share,
                                   target=target, delta=DELTA, seed=args.seed, tune_options=first,
                                   retune_options=options, estimates=False)
                    found = [float(np.mean(sim.tunes[t]["qualified"])) for t in ("first", "second")]
                    below = [1.0 - sim.met_rate(t) for t in ("first", "second")]
                    window_below = 1.0 - float(np.mean(sim.tunes["second"]["window_met"]))
                    print(f"{f'{name}, {share:.0%}':<56} {tuner:<13} {found[0]:>9.3f} {found[1]:>9.3f} "
                          f"{below[0]:>9.3f} {below[1]:>9.3f} {window_below:>10.3f}", flush=True)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
