"""The gateway's CPU a request by arrival rate, split by thread: what an open loop pays per
request that a closed loop's maximum does not show.

Usage: ``python benchmarks/bench_cpu_by_rate.py [--rates 50 100 200 300] [--seconds 6]
[--repeats 2] | tee benchmarks/results/cpu_by_rate.txt``

Why: ``bench_gateway.py`` takes its open-loop points as fractions of the closed-loop maximum.
There, many requests share each event-loop turn and each store group commit, so the CPU a
request is at its lowest. At a fixed lower rate the same request costs more, and "80% of the
max" can fill the core (2026-11-27: 3.41 ms a request and 97% of the core at 80%, against
2.89 ms in the closed loop). This script starts one gateway as ``bench_gateway_ab.py`` does
(pinned to its own core, SQLite ``synchronous=FULL``, 5 SC judges on the loopback stub at
50 ms), then measures it idle, at each open-loop rate and in closed loops (32 clients unless ``--concurrency``),
reading each thread's CPU seconds from ``/proc``: the main thread (the event loop) and every
other thread of the process (the SQLite commit thread and the checkpointer in this setup).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_gateway as bg  # noqa: E402  - sibling modules, run as a script
import bench_gateway_ab as ab  # noqa: E402


def thread_cpu_s(pid: int) -> dict[int, tuple[float, int]]:
    """(CPU seconds (user + system), context switches (voluntary + not)) of each thread of
    ``pid`` so far, by thread id."""
    out: dict[int, tuple[float, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            cpu = sum(bg.stat_cpu_s(Path(f"/proc/{pid}/task/{tid}/stat")))
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        switches = sum(int(line.split()[1]) for line in status.splitlines()
                       if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))
        out[int(tid)] = (cpu, switches)
    return out


def split_line(label: str, pid: int, before: dict[int, tuple[float, int]],
               after: dict[int, tuple[float, int]], requests: float, wall_s: float) -> str:
    """One line: ms a request in the main thread, in the others (busiest first), the total,
    the share of the core, and the threads' context switches a request (each one a thread
    going to sleep or being put off the core: what a hand-off between threads costs)."""
    used = {tid: after[tid][0] - before.get(tid, (0.0, 0))[0] for tid in after}
    switches = {tid: after[tid][1] - before.get(tid, (0.0, 0))[1] for tid in after}
    main_switches = switches.pop(pid, 0)
    main = used.pop(pid, 0.0)
    others = sorted((v for v in used.values() if v > 0), reverse=True)
    total = main + sum(others)
    n = max(requests, 1.0)
    rest = ", ".join(f"{v * 1e3 / n:.2f}" for v in others) or "-"
    return (f"    {label:<24} main thread {main * 1e3 / n:5.2f} ms, other threads {rest} ms; "
            f"total {total * 1e3 / n:5.2f} ms a request, {total / wall_s:4.0%} of the core; "
            f"context switches a request: main thread {main_switches / n:.1f}, "
            f"others {sum(switches.values()) / n:.1f}")


async def measure(args: argparse.Namespace) -> None:
    server_env, cores = bg.cores_plan(True)
    stub, line = bg.spawn("--serve-stub", str(bg.free_port()), "50")
    stub_url = line.split(" ", 1)[1]
    proc, base = ab.start_gateway(bg.REPO, stub_url, 5, tempfile.mkdtemp(prefix="cpu-by-rate-"),
                                  server_env)
    try:
        await bg.wait_http(base + "/readyz", timeout=300)
        url = base + "/v1/" + args.path
        payload = {**bg.FUSE, "votes": bg.fuse_votes(5)} if args.path == "fuse" else None
        await bg.closed_loop(url, 8, 1.0, payload)  # warm-up
        print(f"/v1/{args.path}, 5 SC judges at 50 ms, SQLite synchronous=FULL; {cores}; "
              f"{args.seconds:g} s a point; load average {os.getloadavg()[0]:.1f}", flush=True)
        before = thread_cpu_s(proc.pid)
        await asyncio.sleep(args.seconds)
        idle = split_line("idle (per second)", proc.pid, before, thread_cpu_s(proc.pid),
                          args.seconds, args.seconds)
        print(idle.replace("a request", "a second"), flush=True)
        for repeat in range(args.repeats):
            print(f"  pass {repeat + 1} (load average {os.getloadavg()[0]:.1f})", flush=True)
            for rate in args.rates:
                before = thread_cpu_s(proc.pid)
                run = await bg.open_loop_run(url, rate, args.seconds, payload)
                print(split_line(f"open loop {rate:g}/s", proc.pid, before, thread_cpu_s(proc.pid),
                                 run.sent, run.wall_s)
                      + f"; errors {run.errors}", flush=True)
            for concurrency in args.concurrency:
                before = thread_cpu_s(proc.pid)
                rate, errors = await bg.closed_loop(url, concurrency, args.seconds, payload)
                print(split_line(f"closed loop c={concurrency} {rate:.0f}/s", proc.pid, before,
                                 thread_cpu_s(proc.pid), rate * args.seconds, args.seconds)
                      + f"; errors {errors}", flush=True)
    finally:
        ab.stop_all([proc, stub])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[50, 100, 200, 300])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--path", choices=["judge", "fuse"], default="judge",
                        help="POST /v1/judge (five judge calls a request) or /v1/fuse (none)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32],
                        help="closed loops of this many clients (bench_gateway.py's maximum is the "
                             "best of 16, 32, 64 and 128)")
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
