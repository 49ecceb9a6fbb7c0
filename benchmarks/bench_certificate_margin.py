"""How often a certified threshold misses its target, by the certificate's margin (issue 44, item 3).

A tune certifies the smallest threshold whose stratified precision lower bound clears the
target at level ``1 - delta``. The guarantee is over streams (at most ``delta`` of them miss);
but where the bound barely clears the target, the thresholds it certifies miss far more often
than where it clears it by a wide margin. This measures that on resampled streams of the shared
pools (bench_precision_bound's Part 1 set-up: review below the pool's median confidence, 20% of
the rest audited, a tune at 100, 150 and 300 audit labels with the service's default tuner):
every certified threshold's margin (its lower bound minus the target) and whether its realised
precision on the pool (future traffic) is below the target, pooled over pools and checkpoints,
then the miss rate per margin bucket with its count.

    PYTHONPATH=benchmarks:. python benchmarks/bench_certificate_margin.py --streams 500
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_precision_bound import CHECKPOINTS, DELTA, checkpoints, pools

from judgefuse.calibration.stratified_tuning import tune_threshold_stratified

BUCKETS = (0.0, 0.01, 0.02, 0.05, 0.1, 1.0)


def margins(pool_c: np.ndarray, pool_z: np.ndarray, target: float, streams: int, seed: int) -> list[tuple[float, bool]]:
    """(margin, missed) of every certified threshold over ``streams`` streams of one pool."""
    out = []
    for cp in checkpoints(pool_c, pool_z, streams, seed):
        report = tune_threshold_stratified(
            cp.c[cp.head_lab], cp.z[cp.head_lab], cp.strata, cp.population, target_precision=target, delta=DELTA
        )
        if report.threshold is None:
            continue
        realised = float(pool_z[pool_c >= report.threshold].mean())
        out.append((float(report.lower_bound) - target, realised < target - 1e-12))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    found: list[tuple[float, bool]] = []
    for name, (c, z, target) in pools().items():
        got = margins(c, z, target, args.streams, args.seed)
        missed = sum(m for _, m in got)
        print(f"{name}: target {target:g}, {len(got)} certified thresholds over {args.streams} streams x "
              f"{len(CHECKPOINTS)} tunes, {missed} missed ({missed / max(len(got), 1):.3f}; delta {DELTA:g})")
        found += got
    print(f"\nall pools: miss rate of a certified threshold by its margin (lower bound - target); delta {DELTA:g}")
    print(f"  {'margin':<14} {'certified':>9} {'missed':>7} {'miss rate':>9}")
    margin = np.array([m for m, _ in found])
    missed = np.array([x for _, x in found], dtype=bool)
    for lo, hi in zip(BUCKETS, BUCKETS[1:], strict=False):
        inside = (margin >= lo) & (margin < hi)
        n = int(inside.sum())
        rate = float(missed[inside].mean()) if n else float("nan")
        print(f"  [{lo:.2f}, {hi:.2f})   {n:>9d} {int(missed[inside].sum()):>7d} {rate:>9.3f}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
