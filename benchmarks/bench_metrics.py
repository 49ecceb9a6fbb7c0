"""Benchmark: `summarize` + reliability diagram on 1,000,000 synthetic items.

Target: < 1 s on the 2-core dev machine. Run: ``python benchmarks/bench_metrics.py [n]``.
Prints the best of a few repeats (seconds) for each part and for the whole.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from judgefuse.calibration import bootstrap_ci, reliability_diagram, summarize


def main(n: int = 1_000_000, repeats: int = 3) -> float:
    rng = np.random.default_rng(0)
    # judge-like data: confidences cluster near 1 and are coarse (many ties), overconfident
    conf = np.round(rng.beta(5, 1.2, n), 2)
    correct = rng.uniform(size=n) < conf - 0.1

    best = {"summarize": np.inf, "reliability_diagram": np.inf, "total": np.inf}
    for _ in range(repeats):
        t0 = time.perf_counter()
        summary = summarize(conf, correct)
        t1 = time.perf_counter()
        reliability_diagram(conf, correct)
        t2 = time.perf_counter()
        best["summarize"] = min(best["summarize"], t1 - t0)
        best["reliability_diagram"] = min(best["reliability_diagram"], t2 - t1)
        best["total"] = min(best["total"], t2 - t0)

    small_c, small_z = conf[:350], correct[:350]
    bootstrap_ci(small_c, small_z, metric="ece")
    t0 = time.perf_counter()
    for metric in ("accuracy", "ece", "th_score"):
        bootstrap_ci(small_c, small_z, metric=metric)
    per_ci = (time.perf_counter() - t0) / 3

    print(f"items: {n:,}")
    for key, value in best.items():
        print(f"{key:>22}: {value:.3f} s")
    print(f"{'bootstrap_ci (350, 1000x)':>22}: {per_ci * 1000:.1f} ms per call")
    print("summary:", {k: round(v, 4) for k, v in summary.items()})
    return best["total"]


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
