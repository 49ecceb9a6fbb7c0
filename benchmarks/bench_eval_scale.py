"""Benchmark (issue 46): ``judgefuse eval`` with the default rows on a synthetic votes file of N items.

Why a separate file from ``bench_eval.py``: that one replays the 350-item JudgeBench split;
this one asks how the offline tools grow with the data (10^4, 10^5, 10^6 items x 5 judges), so
it writes its own file and times the real command in a child process, where peak RSS is the
child's alone (``resource.getrusage(RUSAGE_CHILDREN)``, one child per run).

The file: 5 judges of accuracies 0.60-0.75 (an informative confidence, ``sigmoid(|z|)``), about
3% invalid votes (an error, no letter), 2% tie votes, 2% of items with a tie label, 4 categories,
every other item labelled A or B (balanced). It exercises every branch of the voting rules
(single valid vote, ties, no valid vote), which ``synthetic_panels.py``'s clean panels do not.

    python benchmarks/bench_eval_scale.py write --n 20000 OUT.jsonl
    python benchmarks/bench_eval_scale.py run --sizes 10000 100000 [--repeat 3] [--bootstrap 1000]
    python benchmarks/bench_eval_scale.py run --tool winrate --sizes 100000 1000000   (items naming their systems)
    python benchmarks/bench_eval_scale.py run --tool compare --sizes 10000 100000   (judge-1 against judge-2, --json)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ACCURACIES = (0.60, 0.6375, 0.675, 0.7125, 0.75)
CATEGORIES = ("chat", "code", "math", "safety")
P_INVALID = 0.03
P_TIE_VOTE = 0.02
P_TIE_LABEL = 0.02
SYSTEMS = ("model-x", "model-y")


def synthetic_lines(n: int, seed: int = 0, systems: bool = False) -> list[str]:
    """``n`` JSONL lines (one judged item each) of the panel described in the module docstring;
    with ``systems``, each item names the systems that wrote its answers (``system_a``,
    ``system_b``: model-x and model-y, in alternating order), for ``winrate``."""
    rng = np.random.default_rng(seed)
    truth_a = rng.random(n) < 0.5
    tie_label = rng.random(n) < P_TIE_LABEL
    categories = rng.integers(0, len(CATEGORIES), size=n)
    n_judges = len(ACCURACIES)
    # each judge answers the sign of z ~ N(+-d, 1) with d set by its accuracy: P(z > 0) = accuracy
    d = np.asarray([-_probit(1.0 - a) for a in ACCURACIES])
    z = rng.normal(size=(n, n_judges)) + d[None, :]
    conf = np.round(1.0 / (1.0 + np.exp(-np.abs(z))), 6)
    right = z > 0
    says_a = np.where(truth_a[:, None], right, ~right)
    kind = rng.random((n, n_judges))
    lines = []
    for i in range(n):
        votes = []
        for j in range(n_judges):
            judge = f"judge-{j + 1}"
            if kind[i, j] < P_INVALID:
                votes.append({"judge": judge, "mode": "sc", "error": "unparseable"})
            elif kind[i, j] < P_INVALID + P_TIE_VOTE:
                votes.append({"judge": judge, "mode": "sc", "choice": "tie"})
            else:
                votes.append({"judge": judge, "mode": "sc", "choice": "A" if says_a[i, j] else "B",
                              "confidence": float(conf[i, j]), "cost_usd": 0.0001, "calls": 1})
        label = "tie" if tie_label[i] else ("A" if truth_a[i] else "B")
        item = {"id": f"item-{i:07d}", "label": label, "category": CATEGORIES[categories[i]]}
        if systems:
            item["metadata"] = {"system_a": SYSTEMS[i % 2], "system_b": SYSTEMS[1 - i % 2]}
        lines.append(json.dumps({"item": item, "votes": votes}, separators=(",", ":")))
    return lines


def _probit(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def write(path: Path, n: int, seed: int = 0, systems: bool = False) -> None:
    path.write_text("\n".join(synthetic_lines(n, seed, systems)) + "\n")


def run_eval_once(path: Path, extra: list[str], tool: str = "eval", keep: Path | None = None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of one ``judgefuse eval PATH --quiet`` (or
    ``judgefuse winrate PATH --json``, or ``judgefuse compare PATH --judges judge-1 judge-2``) in a fresh child. CPU time is given because the machine is
    shared: wall time there is partly the wait for a core. With ``keep``, eval's JSON report is
    written there (``report_N.json``), for diffing two versions' reports."""
    with tempfile.TemporaryDirectory() as tmp:
        if tool == "winrate":
            command = [sys.executable, "-m", "judgefuse.cli", "winrate", str(path), "--json", *extra]
        elif tool == "compare":
            report = (keep or Path(tmp)) / (f"compare_{path.stem.rsplit('_', 1)[-1]}.json" if keep else "compare.json")
            command = [sys.executable, "-m", "judgefuse.cli", "compare", str(path), "--judges", "judge-1", "judge-2",
                       "--json", str(report), *extra]
        else:
            report = (keep or Path(tmp)) / (f"report_{path.stem.rsplit('_', 1)[-1]}.json" if keep else "report.json")
            command = [sys.executable, "-m", "judgefuse.cli", "eval", str(path), "--quiet", "--json", str(report), *extra]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        tree = TreeMemory(child.pid)
        if child.wait() != 0:
            raise subprocess.CalledProcessError(child.returncode, command)
        wall = time.perf_counter() - start
        tree.stop()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # the CPU of the command and of any process it forked (reaped by it, so counted in it)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    LAST_TREE[:] = [tree.peak_rss_mb, tree.peak_pss_mb]
    # RUSAGE_CHILDREN's ru_maxrss is the largest single process so far: sizes are run smallest first
    return wall, cpu, max(after.ru_maxrss, before.ru_maxrss) / 1024.0


LAST_TREE: list[float] = [0.0, 0.0]
"""The last run's peak memory of its processes together: RSS summed, PSS summed (MB)."""


class TreeMemory:
    """Samples, every 250 ms until stopped, the memory of a process and every process it forked
    (``eval`` reads a large file's second half, and fits its stacking rows, in a forked child):
    the peak of their RSS summed (pages shared since the fork counted in each) and of their PSS
    summed (shared pages split between the processes sharing them: the memory they take
    together). ``ru_maxrss`` alone would give the largest single process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_rss_mb = 0.0
        self.peak_pss_mb = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        found, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    todo.extend(int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split())
            except OSError:
                continue
        return found

    @staticmethod
    def _kb(pid: int, path: str, field: str) -> int:
        try:
            for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
                if line.startswith(field):
                    return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return 0

    def _sample(self) -> None:
        while not self._done.wait(0.25):
            pids = self._tree()
            rss = sum(self._kb(pid, "status", "VmRSS:") for pid in pids) / 1024.0
            pss = sum(self._kb(pid, "smaps_rollup", "Pss:") for pid in pids) / 1024.0
            self.peak_rss_mb, self.peak_pss_mb = max(self.peak_rss_mb, rss), max(self.peak_pss_mb, pss)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("--n", type=int, required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--systems", action="store_true", help="name the answers' systems (for winrate)")
    w.add_argument("out", type=Path)
    r = sub.add_parser("run")
    r.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    r.add_argument("--repeat", type=int, default=3)
    r.add_argument("--tool", choices=("eval", "winrate", "compare"), default="eval", help="the command timed")
    r.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "judgefuse_eval_scale")
    r.add_argument("--keep", type=Path, help="write eval's JSON reports into this folder (report_N.json)")
    r.add_argument("extra", nargs="*", help="more arguments for judgefuse eval (after --)")
    args = parser.parse_args()
    if args.command == "write":
        write(args.out, args.n, args.seed, args.systems)
        return
    args.dir.mkdir(parents=True, exist_ok=True)
    rows = " ".join(args.extra) if args.extra else ("default rows" if args.tool == "eval" else "defaults")
    print(f"judgefuse {args.tool}, {rows}, 5 judges; python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    for n in sorted(args.sizes):
        systems = args.tool == "winrate"
        path = args.dir / (f"votes_systems_{n}.jsonl" if systems else f"votes_{n}.jsonl")
        if not path.exists():  # in a child: this process stays small, and a child's peak RSS is its own
            flags = ["--systems"] if systems else []
            subprocess.run([sys.executable, __file__, "write", "--n", str(n), *flags, str(path)], check=True)
        runs, trees = [], []
        for _ in range(args.repeat):
            runs.append(run_eval_once(path, args.extra, args.tool, args.keep))
            trees.append(tuple(LAST_TREE))
        walls = [wall for wall, _, _ in runs]
        cpus = [cpu for _, cpu, _ in runs]
        peaks = [peak for _, _, peak in runs]
        load = os.getloadavg()[0]  # the machine is shared: say how busy it was
        print(f"  n={n:>9,}  wall median {statistics.median(walls):8.2f} s (runs: "
              f"{', '.join(f'{v:.2f}' for v in walls)})  CPU median {statistics.median(cpus):8.2f} s  "
              f"peak RSS {max(peaks):7.0f} MB (largest process; all processes together: RSS "
              f"{max(t[0] for t in trees):.0f} MB, PSS {max(t[1] for t in trees):.0f} MB)  load {load:.1f}", flush=True)


if __name__ == "__main__":
    main()
