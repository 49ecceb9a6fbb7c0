"""Learning curves of learned fusion: offset stacking vs stacking vs the cold-start rule (issue 28, item 3).

Why (docs/design.md, 'Fusion'): plain ``stacked`` has more freedom than 50-200 labels support,
so on small real panels its cross-fitted Brier is worse than ``mean_probability`` and the
service never promotes it. ``offset_stacked`` (judgefuse/fusion/offset_stacking.py) starts at
the rule (its log-odds as an offset) and learns a correction whose penalty inner CV chooses,
the rule itself (no correction) among the candidates, with a 1.5-standard-error rule.

Per data set (JudgeBench: 10 recorded judges; Trust-or-Escalate: 3 judges with real
probabilities; LLMBar: the recorded evaluators), per label budget n in 50, 100, 200: 20 random
training subsets of n labelled items, each method fitted on them and scored on every other
item (Brier of the chosen answer's confidence, accuracy; an undecided verdict counts as
confidence 0.5 and wrong); the table prints the mean (and the sd over subsets) of each, then
the paired difference of the first method's Brier from ``mean_probability``'s on the same
subsets (mean and its standard error: the target is "no worse", i.e. <= about 1 SE). "all":
5-fold cross-fitting over 20 fold seeds. Then cross-fitted accuracy and ECE over 10 fold seeds
(mean, min-max), every item scored by a model that never saw its label.

Run from the repository root (data from ../shared/data or JUDGEFUSE_SHARED_DATA; a few minutes).
One BLAS thread: the fits solve many small systems, and a threaded BLAS on a shared 2-core
machine spent ~13x the wall time on them (a 121 x 121 solve took 122 ms)::

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=. python -u benchmarks/bench_stacking_curves.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np

import judgefuse.fusion.offset_stacking  # noqa: F401  (registers offset_stacked)
from judgefuse.calibration import ece
from judgefuse.evaluation.loaders.detect import load
from judgefuse.fusion import cross_fit_predict, get_method
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote, Letter

METHODS = ("offset_stacked", "stacked", "mean_probability")
BUDGETS = (50, 100, 200)
SUBSETS = 20
FOLD_SEEDS = 10


def data_dir() -> Path:
    env = os.environ.get("JUDGEFUSE_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def datasets() -> dict[str, tuple[list[list[JudgeVote]], list[Letter]]]:
    root = data_dir()
    out = {}
    for name, folder in (("JudgeBench", "judgebench"), ("Trust-or-Escalate", "trust_or_escalate"),
                         ("LLMBar", "llmbar")):
        items = [j for j in load(root / folder) if j.item.label in ("A", "B")]
        out[name] = ([list(j.votes) for j in items], [cast(Letter, j.item.label) for j in items])
    return out


def scores(verdicts: Sequence[Verdict], labels: Sequence[str]) -> tuple[float, float, float]:
    """(Brier, accuracy, ECE) of the chosen answers' confidences."""
    c = np.array([v.confidence if v.choice is not None else 0.5 for v in verdicts])
    z = np.array([v.choice is not None and v.choice == y for v, y in zip(verdicts, labels, strict=True)], dtype=float)
    return float(np.mean((c - z) ** 2)), float(z.mean()), float(ece(c, z))


def fit_predict(method: str, train: list[int], test: list[int], batches: list[list[JudgeVote]],
                labels: list[Letter]) -> list[Verdict]:
    """``method`` fitted on ``train`` (when it needs a fit), its verdicts on ``test``."""
    model = get_method(method)
    if getattr(model, "requires_fit", False):
        model = model.fit([batches[i] for i in train], [labels[i] for i in train])  # type: ignore[attr-defined]
    predict = getattr(model, "predict", None)
    if callable(predict):
        return list(predict([batches[i] for i in test]))
    return [model(batches[i]) for i in test]


def curve(batches: list[list[JudgeVote]], labels: list[Letter]) -> dict[tuple[str, str], list[tuple[float, float, float]]]:
    rng = np.random.default_rng(0)
    out: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    n_items = len(labels)
    for budget in BUDGETS:
        if budget >= n_items:
            continue
        for _ in range(SUBSETS):
            order = rng.permutation(n_items)
            train, test = sorted(order[:budget].tolist()), sorted(order[budget:].tolist())
            if len({labels[i] for i in train}) < 2:
                continue
            for method in METHODS:
                verdicts = fit_predict(method, train, test, batches, labels)
                out.setdefault((method, str(budget)), []).append(scores(verdicts, [labels[i] for i in test]))
    for seed in range(max(SUBSETS, FOLD_SEEDS)):
        for method in METHODS:
            verdicts = cross_fit_predict(method, batches, labels, n_folds=5, seed=seed)
            s = scores(verdicts, labels)
            if seed < SUBSETS:
                out.setdefault((method, "all"), []).append(s)
            if seed < FOLD_SEEDS:
                out.setdefault((method, "crossfit"), []).append(s)
    return out


def main() -> None:
    global SUBSETS, FOLD_SEEDS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subsets", type=int, default=SUBSETS)
    parser.add_argument("--fold-seeds", type=int, default=FOLD_SEEDS)
    parser.add_argument("--data", nargs="*", default=None, help="data set names (default: all three)")
    args = parser.parse_args()
    SUBSETS, FOLD_SEEDS = args.subsets, args.fold_seeds
    started = time.perf_counter()
    for name, (batches, labels) in datasets().items():
        if args.data and name not in args.data:
            continue
        judges = len({v.judge for b in batches for v in b})
        print(f"== {name}: {len(labels)} labelled items, {judges} judges; {SUBSETS} subsets per budget",
              flush=True)
        results = curve(batches, labels)
        print(f"{'n labels':>9}  " + "  ".join(f"{m + ' Brier / acc':>34}" for m in METHODS))
        for budget in [*map(str, BUDGETS), "all"]:
            if (METHODS[0], budget) not in results:
                continue
            cells = []
            for method in METHODS:
                runs = np.array(results[(method, budget)])
                cells.append(f"{runs[:, 0].mean():.4f} ({runs[:, 0].std():.4f}) / {100 * runs[:, 1].mean():5.1f}%")
            print(f"{budget:>9}  " + "  ".join(f"{c:>34}" for c in cells))
        print(f"{METHODS[0]} - {METHODS[-1]} Brier, paired over the same subsets (mean, SE):")
        for budget in [*map(str, BUDGETS), "all"]:
            if (METHODS[0], budget) in results:
                diff = np.array(results[(METHODS[0], budget)])[:, 0] - np.array(results[(METHODS[-1], budget)])[:, 0]
                se = diff.std(ddof=1) / np.sqrt(diff.size)
                print(f"{budget:>9}  {diff.mean():+.4f} (SE {se:.4f})")
        print(f"cross-fitted (5 folds), mean [min-max] over {FOLD_SEEDS} fold seeds:")
        for method in METHODS:
            runs = np.array(results[(method, "crossfit")])
            acc, cal = 100 * runs[:, 1], 100 * runs[:, 2]
            print(f"  {method:<17} accuracy {acc.mean():5.1f}% [{acc.min():.1f}-{acc.max():.1f}]  "
                  f"ECE {cal.mean():5.2f} [{cal.min():.2f}-{cal.max():.2f}]  Brier {runs[:, 0].mean():.4f}")
        print()
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
