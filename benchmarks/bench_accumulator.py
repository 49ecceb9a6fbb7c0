"""Benchmark: streaming calibration record of 1,000,000 labelled items.

Builds the fields once (``increments_many``), then times ``metrics_from_fields`` (target:
< 10 ms, i.e. O(bins), independent of the label count) and one ``increments`` call (the
per-label cost on the feedback path). Run: ``python benchmarks/bench_accumulator.py [n]``.
Prints the best of several repeats.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from judgefuse.calibration import summarize
from judgefuse.calibration.accumulator import CalibrationAccumulator


def main(n: int = 1_000_000, repeats: int = 20) -> float:
    rng = np.random.default_rng(0)
    conf = rng.beta(5, 1.2, n)  # continuous: every fine bin occupied, the most fields
    correct = rng.uniform(size=n) < conf - 0.1
    acc = CalibrationAccumulator()

    t0 = time.perf_counter()
    fields = acc.increments_many(conf, correct)
    build = time.perf_counter() - t0

    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        metrics = acc.metrics_from_fields(fields)
        best = min(best, time.perf_counter() - t0)

    best_inc = np.inf
    for c, z in zip(conf[:2000], correct[:2000], strict=True):
        t0 = time.perf_counter()
        acc.increments(float(c), bool(z))
        best_inc = min(best_inc, time.perf_counter() - t0)

    t0 = time.perf_counter()
    reference = summarize(conf, correct)
    full = time.perf_counter() - t0
    worst = max(abs(metrics[k] - reference[k]) for k in ("ece", "brier", "nll", "th_score"))

    print(f"items: {n:,}; fields: {len(fields):,}")
    print(f"increments_many (build): {build * 1e3:.1f} ms")
    print(f"metrics_from_fields: {best * 1e3:.2f} ms (target < 10 ms)")
    print(f"increments (one label): {best_inc * 1e6:.1f} us")
    print(f"summarize on the raw items, for comparison: {full * 1e3:.1f} ms")
    print(f"max |difference| on exact metrics vs summarize: {worst:.2e}")
    return best


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
