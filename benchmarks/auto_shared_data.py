"""``auto`` against every other row on the shared data sets, over fold seeds (issue 43).

For each data set and fold seed, ``judgefuse.evaluation.evaluate`` runs in this process with the
rows asked for (cross-fitted, 5 folds, 20 bootstrap resamples: only the point values are used)
and one JSON per run is written: each fusion row's accuracy, ECE, Brier and its per-item
correctness (to pair two rows item by item), and what ``auto`` chose in each fold.

    python benchmarks/auto_shared_data.py run OUT_DIR DATA_DIR... [--seeds 0 1 ...] [--methods ...]
    python benchmarks/auto_shared_data.py table OUT_DIR

``table`` prints, per data set, every row's mean over the fold seeds and, for accuracy, the best
row and auto's paired difference to it: the mean over fold seeds of
``mean(correct_best - correct_auto)`` and of its standard error ``sd / sqrt(n)`` over the items.
A run already written is kept, so an interrupted ``run`` resumes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

METHODS = (
    "majority", "confidence_weighted", "mean_probability", "dawid_skene", "dawid_skene+platt", "majority+platt",
    "stacked", "offset_stacked", "offset_stacked+platt", "auto",
)  # fmt: skip


def run(out_dir: Path, data_dirs: list[Path], seeds: list[int], methods: list[str]) -> None:
    from judgefuse.evaluation.loaders import load
    from judgefuse.evaluation.runner import EvaluationOptions, evaluate

    out_dir.mkdir(parents=True, exist_ok=True)
    for data in data_dirs:
        items = load(data)
        for seed in seeds:
            out = out_dir / f"{data.name}_s{seed}.json"
            if out.exists():
                continue
            started = time.perf_counter()
            cpu = time.process_time()
            options = EvaluationOptions(methods=tuple(methods), n_bootstrap=20, seed=seed)
            evaluation = evaluate(items, options=options)
            rows = {
                report.row.name: {
                    "accuracy": report.metrics["accuracy"],
                    "ece": report.metrics["ece"],
                    "brier": report.metrics["brier"],
                    "n": int(report.row.correct.size),
                    "correct": "".join("1" if c else "0" for c in report.row.correct.tolist()),
                }
                for report in evaluation.rows
                if report.row.kind == "fusion"
            }
            record = {
                "data": data.name, "seed": seed, "rows": rows, "chosen": evaluation.chosen,
                "skipped": evaluation.skipped_methods, "wall_s": time.perf_counter() - started,
                "cpu_s": time.process_time() - cpu,
            }  # fmt: skip
            out.write_text(json.dumps(record))
            print(f"{data.name} seed {seed}: {record['wall_s']:.0f} s wall, {record['cpu_s']:.0f} s CPU", file=sys.stderr,
                  flush=True)  # fmt: skip


def table(out_dir: Path) -> str:
    runs: dict[str, list[dict]] = {}
    for path in sorted(out_dir.glob("*_s*.json")):
        record = json.loads(path.read_text())
        runs.setdefault(record["data"], []).append(record)
    lines = []
    for data, records in runs.items():
        names = list(records[0]["rows"])
        lines += [f"\n{data}: {len(records)} fold seeds ({', '.join(str(r['seed']) for r in records)})",
                  "| row | accuracy % (mean [min-max]) | ECE % | Brier |", "|---|---|---|---|"]  # fmt: skip
        means = {}
        for name in names:
            acc = [r["rows"][name]["accuracy"] for r in records if name in r["rows"]]
            ece = [r["rows"][name]["ece"] for r in records if name in r["rows"]]
            brier = [r["rows"][name]["brier"] for r in records if name in r["rows"]]
            means[name] = (float(np.mean(acc)), float(np.mean(ece)), float(np.mean(brier)))
            lines.append(f"| {name} | {100 * means[name][0]:.2f} [{100 * min(acc):.1f}-{100 * max(acc):.1f}] | "
                         f"{100 * means[name][1]:.2f} | {means[name][2]:.4f} |")  # fmt: skip
        if "auto" not in means:
            continue
        best = max((n for n in means if n != "auto"), key=lambda n: means[n][0])
        diffs, ses = [], []
        for r in records:
            a = np.array([c == "1" for c in r["rows"][best]["correct"]], dtype=float)
            b = np.array([c == "1" for c in r["rows"]["auto"]["correct"]], dtype=float)
            d = a - b
            diffs.append(float(d.mean()))
            ses.append(float(d.std(ddof=1) / np.sqrt(d.size)))
        gap, se = float(np.mean(diffs)), float(np.mean(ses))
        verdict = (
            "auto is the best row" if gap < 0 else "auto ties the best row" if gap == 0
            else "within one SE" if gap <= se else "not within one SE"
        )  # fmt: skip
        best_brier = min(means, key=lambda n: means[n][2])
        best_ece = min(means, key=lambda n: means[n][1])
        lines.append(f"best accuracy (other rows): {best} {100 * means[best][0]:.2f}; auto {100 * means['auto'][0]:.2f}: "
                     f"paired gap {100 * gap:+.2f} points, SE {100 * se:.2f}: {verdict}")  # fmt: skip
        lines.append(f"lowest Brier: {best_brier} {means[best_brier][2]:.4f} (auto {means['auto'][2]:.4f}); "
                     f"lowest ECE: {best_ece} {100 * means[best_ece][1]:.2f}% (auto {100 * means['auto'][1]:.2f}%)")  # fmt: skip
        lines.append("auto chose: " + " | ".join(f"s{r['seed']}: {r['chosen'].get('auto', '-')}" for r in records))
        cpu = [r["cpu_s"] for r in records]
        lines.append(f"eval CPU per fold seed (every row): {np.mean(cpu):.0f} s")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("out_dir", type=Path)
    r.add_argument("data", nargs="+", type=Path)
    r.add_argument("--seeds", nargs="+", type=int, default=list(range(10)))
    r.add_argument("--methods", nargs="+", default=list(METHODS))
    t = sub.add_parser("table")
    t.add_argument("out_dir", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.out_dir, args.data, args.seeds, args.methods)
    else:
        print(table(args.out_dir))


if __name__ == "__main__":
    main()
