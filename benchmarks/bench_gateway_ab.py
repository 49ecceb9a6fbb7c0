"""A/B of two source trees of the gateway under the same load, interleaved in the same minutes.

Usage: ``python benchmarks/bench_gateway_ab.py --old /tmp/old-tree [--new .] [--rounds 3]
[--seconds 6] [--judge-rate 150] [--fuse-rate 1100] [--closed-only] [--old-env NAME=VALUE ...] [--new-env ...]``
(``--old . --old-env JUDGEFUSE_SERVER__X=...``: one tree, two settings).

On a shared machine absolute figures drift with the neighbours' load; an A/B made in the same
minutes does not (docs/benchmarks.md). Each tree (``--old``: e.g. ``git archive <commit> | tar
-x -C /tmp/old-tree``; ``--new``: this checkout) gets its own gateway process started by
``bench_gateway.py --serve-gateway`` with that tree first on ``PYTHONPATH``, both on the same
judge stub, pinned like ``bench_gateway.py`` (servers on one core, the generator and the stub on
the other). Each round runs, old then new (the order alternates between rounds):

* closed loop ``/v1/judge`` at ``--concurrency`` (5 SC judges at 50 ms): verdicts/s and the
  server's CPU ms per request (the steadier figure);
* open loop ``/v1/judge`` at ``--judge-rate``: latency minus the stub's delay p50 / p99;
* open loop ``/v1/fuse`` at ``--fuse-rate`` (past its capacity): 429s, 5xx, and the accepted
  requests' p50 / p99.

It prints one line per measurement and the medians per tree at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_gateway as bg  # noqa: E402  - the sibling module, run as a script


def start_gateway(tree: Path, stub_url: str, judges: int, workdir: str,
                  env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """One gateway of ``tree`` (its code first on ``PYTHONPATH``), ``env`` added (settings as
    ``JUDGEFUSE_*`` variables, the core to pin it to, ``BENCH_SQLITE_SYNC=NORMAL`` for the other
    durability; FULL, the product's default, otherwise)."""
    folder = tempfile.mkdtemp(prefix="gw-", dir=workdir)
    port = bg.free_port()
    proc = subprocess.Popen(
        [sys.executable, str(tree / "benchmarks" / "bench_gateway.py"), "--serve-gateway", str(port),
         stub_url, str(judges), folder, bg.sqlite_url(folder)],
        env={**os.environ, "BENCH_SQLITE_SYNC": "FULL", **env, "PYTHONPATH": str(tree),
             "BENCH_GATEWAY_WORKERS": "1"},
        cwd=str(tree),
    )
    return proc, f"http://127.0.0.1:{port}"


async def one_round(name: str, base: str, pid: int, args: argparse.Namespace,
                    out: dict[str, list[float]]) -> None:
    delay_s = args.latency_ms / 1000
    user_before, system_before = bg.cpu_split_s(pid)
    rate, errors = await bg.closed_loop(base + "/v1/judge", args.concurrency, args.seconds)
    user_after, system_after = bg.cpu_split_s(pid)
    requests = max(rate * args.seconds, 1)
    user_ms = (user_after - user_before) / requests * 1e3
    system_ms = (system_after - system_before) / requests * 1e3
    out["closed/s"].append(rate)
    out["cpu_ms"].append(user_ms + system_ms)
    out["user_ms"].append(user_ms)
    out["system_ms"].append(system_ms)
    print(f"    {name:<4} closed loop /v1/judge c={args.concurrency}: {rate:7.1f}/s, errors {errors}, "
          f"CPU {user_ms + system_ms:.2f} ms a request (user {user_ms:.2f}, system {system_ms:.2f})",
          flush=True)
    if args.closed_only:
        return
    run = await bg.open_loop_run(base + "/v1/judge", args.judge_rate, args.seconds, pid=pid)
    over = [s[0] - delay_s for s in run.samples]
    out["judge_p50"].append(bg.pct(over, 50) * 1e3)
    out["judge_p99"].append(bg.pct(over, 99) * 1e3)
    print(bg.level_line(f"{name} /v1/judge", "open", args.judge_rate, run, delay_s), flush=True)
    print(f"    {'':<4} where the time went, p50/p99 ms: {bg.breakdown_line(run)}", flush=True)
    run = await bg.open_loop_run(base + "/v1/fuse", args.fuse_rate, args.seconds, bg.FUSE, pid=pid)
    accepted = [s[0] for s in run.samples]
    out["fuse_p50"].append(bg.pct(accepted, 50) * 1e3)
    out["fuse_p99"].append(bg.pct(accepted, 99) * 1e3)
    out["fuse_429"].append(run.refused_429)
    out["fuse_5xx"].append(run.server_5xx + run.other)
    print(bg.level_line(f"{name} /v1/fuse", "open", args.fuse_rate, run, 0.0), flush=True)
    print(f"    {'':<4} where the time went, p50/p99 ms: {bg.breakdown_line(run)}", flush=True)


async def main_async(args: argparse.Namespace) -> None:
    server_env, cores = bg.cores_plan(True)
    stub_proc, line = bg.spawn("--serve-stub", str(bg.free_port()), str(args.latency_ms))
    stub_url = line.split(" ", 1)[1]
    bg.FUSE["votes"] = bg.fuse_votes(args.judges)
    workdir = tempfile.mkdtemp(prefix="bench-ab-")
    trees = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    procs = [stub_proc]
    bases: dict[str, tuple[str, int]] = {}
    try:
        envs = {"old": dict(e.split("=", 1) for e in args.old_env),
                "new": dict(e.split("=", 1) for e in args.new_env)}
        for name, tree in trees.items():
            proc, base = start_gateway(tree, stub_url, args.judges, workdir, {**server_env, **envs[name]})
            procs.append(proc)
            bases[name] = (base, proc.pid)
        for base, _ in bases.values():
            await bg.wait_http(base + "/readyz", timeout=300)  # both start on one pinned core
            await bg.closed_loop(base + "/v1/judge", 8, 1.0)  # warm-up
            await bg.closed_loop(base + "/v1/fuse", 8, 1.0, bg.FUSE)
        print(f"A/B: old={trees['old']} {' '.join(args.old_env)} new={trees['new']} "
              f"{' '.join(args.new_env)}; {cores}; {args.seconds:g} s a point; "
              f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
        results: dict[str, dict[str, list[float]]] = {
            name: {k: [] for k in ("closed/s", "cpu_ms", "user_ms", "system_ms", "judge_p50", "judge_p99", "fuse_p50",
                                   "fuse_p99", "fuse_429", "fuse_5xx")} for name in trees}
        for r in range(args.rounds):
            order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
            print(f"  round {r + 1} (load average {os.getloadavg()[0]:.1f})", flush=True)
            for name in order:
                await one_round(name, *bases[name], args, results[name])
        print(f"medians over {args.rounds} rounds (load average {os.getloadavg()[0]:.1f} at the end):")
        for name, values in results.items():
            print(f"    {name}: " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in values.items() if v))
        print(json.dumps({n: {k: statistics.median(v) for k, v in vals.items() if v}
                          for n, vals in results.items()}))
    finally:
        stop_all(procs)


def stop_all(procs: list[subprocess.Popen], grace_s: float = 10.0) -> None:
    """SIGTERM every child, then SIGKILL whichever has not exited ``grace_s`` later (one shared
    deadline, not one per child)."""
    for proc in procs:
        proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the baseline source tree")
    parser.add_argument("--new", default=str(bg.REPO), help="the changed source tree (default: this one)")
    # "extend": --new-env A=1 --new-env B=2 sets both (a plain nargs list kept only the last
    # use, and an A/B meant to change three settings silently changed one)
    parser.add_argument("--old-env", action="extend", nargs="+", default=[], metavar="NAME=VALUE",
                        help="environment of the old gateway only (e.g. a JUDGEFUSE_* setting); "
                             "repeatable")
    parser.add_argument("--new-env", action="extend", nargs="+", default=[], metavar="NAME=VALUE",
                        help="environment of the new gateway only; repeatable")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--judges", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--judge-rate", type=float, default=150.0)
    parser.add_argument("--fuse-rate", type=float, default=1100.0)
    parser.add_argument("--closed-only", action="store_true",
                        help="only the closed loop (verdicts/s and CPU a request): a CPU A/B")
    return parser


def main() -> None:
    asyncio.run(main_async(build_parser().parse_args()))


if __name__ == "__main__":
    main()
