"""Benchmark: replay the JudgeBench split with all 10 recorded judges and every fusion method.

Prints the wall time of each stage and of the whole replay (load, evaluate with cross-fitted
learned methods and bootstrap CIs, JSON and HTML report), the same work as
``judgefuse eval <judgebench> --json ... --html ...``. Target: < 5 s on a 2-core machine.

Usage: python benchmarks/bench_eval.py [--data ../shared/data] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from judgefuse.evaluation.atomic import write_atomic
from judgefuse.evaluation.html_report import render_html
from judgefuse.evaluation.json_report import to_json
from judgefuse.evaluation.loaders import load
from judgefuse.evaluation.runner import evaluate

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def replay_once(judgebench: Path, out_dir: Path) -> dict[str, float]:
    times: dict[str, float] = {}
    start = time.perf_counter()
    items = load([judgebench])
    times["load"] = time.perf_counter() - start
    mark = time.perf_counter()
    evaluation = evaluate(items)
    times["evaluate"] = time.perf_counter() - mark
    mark = time.perf_counter()
    sources = [str(judgebench)]
    write_atomic(out_dir / "report.json", to_json(evaluation, sources=sources))
    write_atomic(out_dir / "report.html", render_html(evaluation, title="bench", sources=sources))
    times["report"] = time.perf_counter() - mark
    times["total"] = time.perf_counter() - start
    times["rows"] = len(evaluation.rows)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    judgebench = args.data / "judgebench"
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            runs.append(replay_once(judgebench, Path(tmp)))
    print(f"JudgeBench replay: 350 pairs, 10 judges, {int(runs[0]['rows'])} rows (judges + methods)")
    for stage in ("load", "evaluate", "report", "total"):
        values = [run[stage] for run in runs]
        print(f"  {stage:<9} median {statistics.median(values):6.2f} s   (runs: {', '.join(f'{v:.2f}' for v in values)})")
    verdict = "OK" if statistics.median(run["total"] for run in runs) < 5.0 else "OVER TARGET"
    print(f"  target < 5 s: {verdict}")


if __name__ == "__main__":
    main()
