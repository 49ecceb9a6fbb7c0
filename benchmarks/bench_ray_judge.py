"""``judgefuse judge --executor ray`` with 1 and 2 Ray workers beside the local executor, on this machine.

    nice python benchmarks/bench_ray_judge.py --pairs 2000 --repeats 3 > benchmarks/results/bench_ray_judge.txt

A Ray cluster on loopback (a head without CPUs and two worker nodes of one CPU each:
tests/jf_test_support/ray_cluster.py) and the scripted OpenAI stub as its own process (two SC
judges whose answers are a hash of model and prompt; every request waits ``--delay-ms`` before
its answer, the latency of a judge model). Each configuration judges the same pairs into a new
votes file with the real command line (``python -m judgefuse.cli judge ...``), ``--repeats``
times; the table gives the median of each figure:

* ``wall``: the command from start to exit (interpreter, imports, joining the cluster, starting
  the workers' panels, judging, shutting down);
* ``items/s``: the steady rate, items written between 10% and 100% of the file over the time
  between (the benchmark polls the file every 20 ms), which leaves start-up out;
* ``start``: for Ray, the command's own "the first in X s" (joining the cluster to the first
  worker's panel started);
* ``load``: the machine's 1-minute load average when the run ended (other jobs share the cores).

The configurations take turns (round 1 of each, then round 2, ...), so a busy minute falls on
all of them rather than on one.

Configurations: the local executor at ``--concurrency C`` and ``2C`` (the in-flight items of one
and of two Ray workers), Ray with 1 and with 2 workers at ``C`` each. With ``--delay-ms 0`` the
rate is judgefuse's own per-item cost (the executor's overhead); with a delay it is bounded by
in-flight items / latency. This machine has 2 cores shared by the driver, the stub, the Ray
head, both worker nodes (and whatever else runs here): it cannot show a CPU-bound judge (a local
model per node) scaling across nodes, only what the executor costs and that it keeps up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from jf_test_support import crash_harness as C  # noqa: E402
from jf_test_support.ray_cluster import RayCluster  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def write_inputs(folder: Path, n: int, url: str) -> tuple[Path, Path]:
    pairs = folder / "pairs.jsonl"
    with pairs.open("w", encoding="utf-8") as handle:
        for i in range(n):
            handle.write(json.dumps({"pair_id": f"p{i}", "question": f"question {i}", "response_A": f"a{i}",
                                     "response_B": f"b{i}", "label": "A>B" if i % 2 else "B>A"}) + "\n")  # fmt: skip
    panel = C.write_panel(folder, url)
    # a judge's max_concurrency (default 8) holds per process, so per Ray worker: lifted here so
    # that --concurrency alone sets the items in flight, in the local run as in each worker
    text = panel.read_text(encoding="utf-8").replace("  mode: sc\n", "  mode: sc\n    max_concurrency: 64\n")
    panel.write_text(text, encoding="utf-8")
    return pairs, panel


def lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


async def one_run(argv: list[str], out: Path, n: int, env: dict[str, str]) -> dict[str, float]:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=out.parent, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    t10 = t100 = None
    n10 = max(1, n // 10)
    while proc.returncode is None:
        seen = lines(out)
        now = time.perf_counter()
        if t10 is None and seen >= n10:
            t10, n10 = now, seen
        if t100 is None and seen >= n:
            t100 = now
        try:
            await asyncio.wait_for(proc.wait(), timeout=0.02)
        except TimeoutError:
            pass
    stdout_b, stderr_b = await proc.communicate()
    wall = time.perf_counter() - started
    stdout = stdout_b.decode()
    if proc.returncode != 0 or lines(out) != n or f"judged {n} items" not in stdout or " 0 invalid votes" not in stdout:
        raise SystemExit(f"{argv} failed ({proc.returncode}):\n{stdout}\n{stderr_b.decode()[-3000:]}")
    t100 = t100 or time.perf_counter()
    assert t10 is not None
    start = re.search(r"the first in ([0-9.]+) s", stdout)
    return {
        "load": os.getloadavg()[0],
        "wall": wall,
        "rate": (n - n10) / max(t100 - t10, 1e-9),
        "start": float(start.group(1)) if start else float("nan"),
    }


def fmt(run: dict[str, float]) -> str:
    return ", ".join(f"{key} {value:.1f}" for key, value in run.items())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8, help="per worker (C)")
    parser.add_argument("--delay-ms", type=float, nargs="+", default=[0.0, 50.0])
    args = parser.parse_args()
    print(f"$ python benchmarks/bench_ray_judge.py {' '.join(sys.argv[1:])}")
    load = os.getloadavg()[0]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load average {load:.1f} at start")
    c = args.concurrency
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as folder_name:
        folder = Path(folder_name)
        t0 = time.perf_counter()
        with RayCluster(workers=2) as cluster:
            print(f"# cluster (head + 2 worker nodes of 1 CPU) up in {time.perf_counter() - t0:.1f} s")
            env = {k: v for k, v in cluster.env.items() if not k.startswith("JUDGEFUSE_")}
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
            rows = []
            for delay_ms in args.delay_ms:
                here = folder / f"delay-{delay_ms:g}"  # a stub log of its own: start_stub reads READY from it
                here.mkdir()
                stub, url = await C.start_stub(here, delay_ms / 1000)
                try:
                    pairs, panel = write_inputs(here, args.pairs, url)
                    base = [sys.executable, "-m", "judgefuse.cli", "judge", str(pairs), "--panel", str(panel)]
                    ray = ["--executor", "ray", "--address", cluster.address, "--workers"]
                    configs = [
                        (f"local, concurrency {c}", ["--concurrency", str(c)]),
                        (f"local, concurrency {2 * c}", ["--concurrency", str(2 * c)]),
                        (f"ray, 1 worker x {c}", ["--concurrency", str(c), *ray, "1"]),
                        (f"ray, 2 workers x {c}", ["--concurrency", str(c), *ray, "2"]),
                    ]
                    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in configs}
                    for r in range(args.repeats):  # round by round, so a busy minute hits every configuration
                        for name, flags in configs:
                            out = here / f"votes-{r}.jsonl"
                            argv = [*base, "--quiet", "--out", str(out), *flags]
                            run = await one_run(argv, out, args.pairs, env)
                            out.unlink()
                            runs[name].append(run)
                            print(f"# {delay_ms:g} ms, round {r}, {name}: {fmt(run)}", flush=True)
                    for name, _ in configs:
                        row = {key: statistics.median(run[key] for run in runs[name]) for key in runs[name][0]}
                        rows.append((delay_ms, name, row, [run["rate"] for run in runs[name]]))
                finally:
                    stub.kill()
    print()
    print(f"{args.pairs} pairs x 2 SC judges; median of {args.repeats} runs")
    print()
    print("| judge latency | executor | items/s (steady), median (runs) | wall s | Ray start s | load average |")
    print("|---|---|---|---|---|---|")
    for delay_ms, name, row, rates in rows:
        start = "" if row["start"] != row["start"] else f"{row['start']:.1f}"
        each = ", ".join(f"{rate:.0f}" for rate in rates)
        print(
            f"| {delay_ms:g} ms | {name} | {row['rate']:.0f} ({each}) | {row['wall']:.1f} | {start} | {row['load']:.1f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
