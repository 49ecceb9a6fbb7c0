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
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_review_sim import data_dir, load_judgebench_fused, load_toe, simulate  # noqa: E402

from judgefuse.calibration.stratified_tuning import tune_threshold_stratified  # noqa: E402

DELTA = 0.1
AUDIT_RATE = 0.2
CHECKPOINTS = (100, 150, 300)
TUNERS: dict[str, dict[str, Any]] = {"today": {"bound": "even", "chains": 1}, "new": {}}


def pools() -> dict[str, tuple[np.ndarray, np.ndarray, float]]:
    """The shared pools and their targets (as in bench_review_sim: about the top third's precision)."""
    root = data_dir()
    out = {"Trust-or-Escalate gpt-4-turbo": (
        *load_toe(root / "trust_or_escalate" / "gpt-4-turbo.calibration.jsonl"), 0.85)}
    for method, (c, z) in load_judgebench_fused(root / "judgebench").items():
        out[f"JudgeBench GPT-4o, 10 judges, {method}"] = (c, z, 0.8)
    return out


def certification(pool_c: np.ndarray, pool_z: np.ndarray, target: float, streams: int,
                  seed: int) -> dict[str, dict[int, tuple[float, float]]]:
    """Part 1 (module docstring): per tuner and audit-label count, (certified, violated) shares."""
    rng = np.random.default_rng(seed)
    tau0 = float(np.quantile(pool_c, 0.5))
    auto_share = float((pool_c >= tau0).mean())
    length = int(max(CHECKPOINTS) / AUDIT_RATE / auto_share * 1.5)
    got: dict[str, dict[int, list[tuple[bool, bool]]]] = {t: {k: [] for k in CHECKPOINTS} for t in TUNERS}
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
            for name, options in TUNERS.items():
                tau = tune_threshold_stratified(c[:end][head_lab], z[:end][head_lab], strata, population,
                                                target_precision=target, delta=DELTA, **options).threshold
                realised = float(pool_z[pool_c >= tau].mean()) if tau is not None else 1.0
                got[name][k].append((tau is not None, realised < target - 1e-12))
    return {name: {k: (float(np.mean([a for a, _ in v])), float(np.mean([b for _, b in v])))
                   for k, v in per.items()} for name, per in got.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    t0 = time.perf_counter()
    print(f"delta {DELTA}; today = bound 'even', one scan; new = bound 'weighted', 4 scans\n")
    print(f"Part 1: review below the pool's median confidence, {AUDIT_RATE:.0%} of the rest audited; "
          f"{args.streams} streams per pool")
    print(f"{'pool':<44} {'audit labels':>12} {'certified today':>16} {'new':>6} {'ratio':>6} "
          f"{'below target today':>19} {'new':>6} (delta {DELTA})")
    all_pools = pools()
    for name, (c, z, target) in all_pools.items():
        res = certification(c, z, target, args.streams, args.seed)
        for k in CHECKPOINTS:
            (ct, vt), (cn, vn) = res["today"][k], res["new"][k]
            ratio = f"{cn / ct:.2f}" if ct > 0 else "inf"
            print(f"{name + f' (target {target:g})':<44} {k:>12} {ct:>16.3f} {cn:>6.3f} {ratio:>6} "
                  f"{vt:>19.3f} {vn:>6.3f}", flush=True)
    print(f"\nPart 2: mid-stream retune (bench_review_sim: 100 review labels, then 10% audit, "
          f"second tune at 250 verdicts); {args.streams} streams per row")
    print(f"{'pool, annotator share':<56} {'tuner':<6} {'1st found':>9} {'2nd found':>9} "
          f"{'1st below':>9} {'2nd below':>9} (delta {DELTA})")
    for name, (c, z, target) in all_pools.items():
        for share in (1.0, 0.7):
            for tuner, options in TUNERS.items():
                res = simulate(c, z, name=name, streams=args.streams, label_share=share, target=target,
                               delta=DELTA, seed=args.seed, tune_options=options, estimates=False)
                found = [float(np.mean(res.tunes[t]["qualified"])) for t in ("first", "second")]
                below = [1.0 - res.met_rate(t) for t in ("first", "second")]
                print(f"{f'{name}, {share:.0%}':<56} {tuner:<6} {found[0]:>9.3f} {found[1]:>9.3f} "
                      f"{below[0]:>9.3f} {below[1]:>9.3f}", flush=True)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
