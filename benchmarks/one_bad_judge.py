"""Learned fusion with one bad judge against the panel without it (issue 43, item 5).

The ``corrupted`` (30% of the best judge's answers flipped) and ``position_biased`` (the best
judge answers A on half the items) panels of ``synthetic_panels.py``, at each size: the
cross-fitted accuracy of each method with all five judges and with the bad judge (``j5``) left
out of every item, over fold seeds. The issue's target: with >= 200 labels, learned fusion within
2 points of the panel without that judge.

    python benchmarks/one_bad_judge.py [--sizes 200 1000] [--seeds 0 1 2] [--methods stacked offset_stacked auto]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synthetic_panels  # noqa: E402

from judgefuse.evaluation.runner import EvaluationOptions, evaluate  # noqa: E402

BAD = "j5"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[200, 1000])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=["majority", "stacked", "offset_stacked", "auto"])
    args = parser.parse_args()
    print("| regime | labels | method | with the bad judge % | without it % | difference (points) |")
    print("|---|---|---|---|---|---|")
    for regime in ("corrupted", "position_biased"):
        for n in args.sizes:
            items = synthetic_panels.panel(regime, n)
            without = [j.model_copy(update={"votes": [v for v in j.votes if v.judge != BAD]}) for j in items]
            accuracy: dict[tuple[str, bool], list[float]] = {}
            for seed in args.seeds:
                options = EvaluationOptions(methods=tuple(args.methods), n_bootstrap=10, seed=seed)
                for dropped, data in ((False, items), (True, without)):
                    evaluation = evaluate(data, options=options)
                    for name in args.methods:
                        accuracy.setdefault((name, dropped), []).append(evaluation.row(name).metrics["accuracy"])
            for name in args.methods:
                kept, dropped = (100 * float(np.mean(accuracy[(name, d)])) for d in (False, True))
                print(f"| {regime} | {n:,} | {name} | {kept:.2f} | {dropped:.2f} | {kept - dropped:+.2f} |", flush=True)


if __name__ == "__main__":
    main()
