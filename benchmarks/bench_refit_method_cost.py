"""Benchmark (issue 43): the CPU of one service refit (``_evaluate``: cross-fit the candidate,
compare it with the voting baseline, fit and round-trip the final model) with the default learned
method ``offset_stacked`` against ``auto``, on the synthetic generator's panels.

Why: issue 43 asks for ``auto`` as the service's refit default; a refit runs in the refit worker
beside the gateway on the same cores, so its CPU is the price of that default.

BLAS runs on one thread, as in the refit worker (``refit_worker._work``: ``threadpool_limits(1)``);
``--blas-threads 0`` leaves the library's default. With its default threads on this 2-core
machine, OpenBLAS's idle threads spin for a core around every small product: one Platt fit of
``auto``'s comparison took 32 ms of CPU instead of 1.2 ms, and ``auto``'s refit at 2,000 labels
18 s instead of a few.

    python benchmarks/bench_refit_method_cost.py [--sizes 500 2000] [--regime informative]
        [--blas-threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synthetic_panels  # noqa: E402

from judgefuse.service.learning.refit_evaluation import _evaluate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--regime", default="informative", choices=sorted(synthetic_panels.REGIMES))
    parser.add_argument("--methods", nargs="+", default=["offset_stacked", "auto"])
    parser.add_argument("--blas-threads", type=int, default=1, help="0: the BLAS library's default")
    args = parser.parse_args()
    threads = f"{args.blas_threads} BLAS thread(s)" if args.blas_threads else "default BLAS threads"
    print(f"one refit's CPU (5 folds, baseline majority), regime {args.regime}, {threads}; "
          f"load {os.getloadavg()[0]:.1f}")
    with threadpool_limits(args.blas_threads) if args.blas_threads else nullcontext():
        measure(args)


def measure(args: argparse.Namespace) -> None:
    for n in args.sizes:
        items = synthetic_panels.panel(args.regime, n)
        batches = [list(judged.votes) for judged in items]
        labels = [str(judged.item.label) for judged in items]
        for method in args.methods:
            start = time.process_time()
            evaluation = _evaluate(batches, labels, "majority", 5, learned=method)
            outcome = "promoted" if evaluation.fitted is not None else f"kept ({evaluation.why_not})"
            print(f"  {n:>6} labels  {method:<16} {time.process_time() - start:6.2f} s CPU  {outcome}", flush=True)


if __name__ == "__main__":
    main()
