"""Benchmark: a cost-ordered cascade against the full panel on the Trust-or-Escalate judgments.

Stages gpt-3.5-turbo -> mistral-7b-instruct -> gpt-4-turbo (or ``--order``), then human review
or the full panel (``--fallback``). For each of ``--splits`` random splits (fixed seed) the
labelled items are cut into a calibration part (``--cal-frac``) and a held-out part; the
cascade is tuned on the calibration part (:func:`judgefuse.fusion.cascade_tuning.tune_cascade`,
its default Bonferroni split: a 1 - delta guarantee for the whole cascade; the ``per stage``
rows give each stage the full delta, which does not hold for the whole) and
replayed on the held-out part. The full panel (every judge, fused by ``--panel-method``) is
routed by its own threshold tuned on the same calibration part (``tune_threshold``).

Printed per target: mean over splits of coverage, precision of the auto-accepted set, accuracy
and ECE of every verdict (review items scored on the suggested answer), calls per item (a
recorded vote = one call; the full panel = 3), and the guarantee rate: the share of splits
whose held-out precision of the accepted set is >= target (a split that accepts nothing
counts as met). The per-split guarantee is over calibration draws, so the rate should be about
>= 1 - delta (held-out precision is itself a noisy estimate of the true precision).

Usage: python benchmarks/bench_cascade.py [--data ../shared/data] [--splits 50] [--targets 0.8,0.85,0.9]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from judgefuse.calibration.scores import ece
from judgefuse.calibration.thresholds import tune_threshold
from judgefuse.evaluation.loaders import load
from judgefuse.fusion import get_method
from judgefuse.fusion.cascade import Cascade, CascadeStage
from judgefuse.fusion.cascade_tuning import evaluate_cascade, tune_cascade
from judgefuse.judges.types import JudgedItem

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
ORDER = ("gpt-3.5-turbo", "mistral-7b-instruct", "gpt-4-turbo")


def split(items: Sequence[JudgedItem], frac: float, rng: random.Random) -> tuple[list[JudgedItem], list[JudgedItem]]:
    index = list(range(len(items)))
    rng.shuffle(index)
    cut = int(round(frac * len(items)))
    return [items[i] for i in index[:cut]], [items[i] for i in index[cut:]]


def panel_scores(items: Sequence[JudgedItem], method: str) -> tuple[np.ndarray, np.ndarray]:
    fuse = get_method(method)
    conf, correct = [], []
    for judged in items:
        verdict = fuse(judged.votes)
        conf.append(verdict.confidence if verdict.choice is not None else 0.5)
        correct.append(verdict.choice is not None and verdict.choice == judged.item.label)
    return np.array(conf), np.array(correct)


def panel_run(cal: Sequence[JudgedItem], test: Sequence[JudgedItem], *, method: str, target: float,
              delta: float, min_count: int) -> dict[str, float]:
    c_cal, z_cal = panel_scores(cal, method)
    rep = tune_threshold(c_cal, z_cal, target_precision=target, delta=delta, min_count=min_count)
    c, z = panel_scores(test, method)
    accepted = c >= rep.threshold if rep.threshold is not None else np.zeros(c.size, dtype=bool)
    precision = float(z[accepted].mean()) if accepted.any() else math.nan
    return {
        "coverage": float(accepted.mean()),
        "precision": precision,
        "accuracy": float(z.mean()),
        "ece": float(ece(c, z)),
        "calls": float(len(test[0].votes)),
        "met": float(not accepted.any() or precision >= target),
    }


def cascade_run(cal: Sequence[JudgedItem], test: Sequence[JudgedItem], cascade: Cascade, *, target: float,
                delta: float, min_count: int, delta_split: str) -> dict[str, float]:
    report = tune_cascade(cal, cascade, target_precision=target, delta=delta, min_count=min_count,
                          delta_split=delta_split)  # type: ignore[arg-type]
    ev = evaluate_cascade(test, report.cascade)
    return {
        "coverage": ev.coverage,
        "precision": ev.accuracy_accepted,
        "accuracy": ev.accuracy,
        "ece": ev.ece,
        "calls": ev.calls_per_item,
        "met": float(ev.coverage == 0 or ev.accuracy_accepted >= target),
    }


def summarize(rows: list[dict[str, float]]) -> dict[str, float]:
    out = {}
    for key in rows[0]:
        values = [r[key] for r in rows if not math.isnan(r[key])]
        out[key] = float(np.mean(values)) if values else math.nan
    return out


def fmt_row(name: str, s: dict[str, float]) -> str:
    prec = "   -  " if math.isnan(s["precision"]) else f"{100 * s['precision']:6.2f}"
    return (
        f"  {name:<42} cov {100 * s['coverage']:5.1f}%  prec(acc) {prec}%  acc {100 * s['accuracy']:5.2f}%  "
        f"ECE {100 * s['ece']:5.2f}%  calls/item {s['calls']:.3f}  guarantee met {100 * s['met']:5.1f}%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--splits", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cal-frac", type=float, default=0.5)
    parser.add_argument("--targets", default="0.8,0.85,0.9")
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--min-count", type=int, default=30)
    parser.add_argument("--order", default=",".join(ORDER))
    parser.add_argument("--panel-method", default="majority")
    args = parser.parse_args()

    started = time.perf_counter()
    items = [j for j in load([args.data / "trust_or_escalate"]) if j.item.label is not None]
    order = tuple(args.order.split(","))
    judges = tuple(v.judge for v in items[0].votes)
    stages = tuple(CascadeStage((name,)) for name in order)
    variants = {
        "cascade -> review (default)": Cascade(stages),
        "cascade -> review (per stage)": Cascade(stages),
        f"cascade -> panel ({args.panel_method})": Cascade(stages, fallback="panel", panel_judges=judges,
                                                           panel_method=args.panel_method),
        f"cascade -> panel ({args.panel_method}, per stage)": Cascade(
            stages, fallback="panel", panel_judges=judges, panel_method=args.panel_method),
    }
    print(f"Trust-or-Escalate: {len(items)} labelled items; stages {' -> '.join(order)}; "
          f"{args.splits} splits ({args.cal_frac:.0%} calibration), seed {args.seed}, delta {args.delta}, "
          f"min_count {args.min_count}")
    for target in (float(t) for t in args.targets.split(",")):
        rng = random.Random(args.seed)
        results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
        results[f"full panel ({args.panel_method}), tuned tau"] = []
        results["gpt-4-turbo alone, tuned tau"] = []
        for _ in range(args.splits):
            cal, test = split(items, args.cal_frac, rng)
            for name, cascade in variants.items():
                results[name].append(cascade_run(
                    cal, test, cascade, target=target, delta=args.delta, min_count=args.min_count,
                    delta_split="per_stage" if "per stage" in name else "bonferroni",
                ))  # fmt: skip
            results[f"full panel ({args.panel_method}), tuned tau"].append(
                panel_run(cal, test, method=args.panel_method, target=target, delta=args.delta, min_count=args.min_count)
            )
            alone = Cascade((CascadeStage(("gpt-4-turbo",)),))
            results["gpt-4-turbo alone, tuned tau"].append(
                cascade_run(cal, test, alone, target=target, delta=args.delta, min_count=args.min_count,
                            delta_split="per_stage")
            )
        print(f"target precision {target} (guarantee met: target {1 - args.delta:.0%}):")
        for name, rows in results.items():
            print(fmt_row(name, summarize(rows)))
    print(f"wall time {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
