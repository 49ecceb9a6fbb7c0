"""Bounded load test on loopback: N concurrent clients for T seconds against fixed-latency judges.

Usage: ``python benchmarks/bench_load.py [--clients 200] [--seconds 60] [--latency-ms 50]``

Three processes: the scripted OpenAI stub (``tests/jf_test_support/openai_stub.py``; every reply an SC JSON
verdict after a fixed delay), the gateway as users run it (``judgefuse serve``: SQLite, one tenant
API key, a 3-judge SC panel at the stub), and this load generator (aiohttp, closed loop: each
client sends its next ``POST /v1/judge`` when the previous answer arrives; every 10th request
carries a label so the calibration accumulators are written too).

Prints throughput (verdicts/s), latency p50/p90/p99/max, errors by status (or exception), and the
gateway's RSS (``VmRSS`` of ``/proc/PID/status``) sampled every 5 s before, during and after the
load, with a least-squares trend (MB per minute) over the load and over its second half (the
first minutes include warm-up: caches and allocator pools filling). A benchmark, not a test:
nothing is asserted; the numbers depend on the machine (the generator shares its CPUs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
STUB = REPO / "tests" / "jf_test_support" / "openai_stub.py"
API_KEY = "bench-load-key-0001"
SC_REPLY = json.dumps({"selected_output": "Output (a)", "confidence_score": 85, "explanation": "4 is right"})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_stub(port: int, latency_ms: float) -> None:
    """Child process: the stub, every reply an SC verdict after ``latency_ms``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("openai_stub", STUB)
    assert spec is not None and spec.loader is not None
    stub = importlib.util.module_from_spec(spec)
    sys.modules["openai_stub"] = stub
    spec.loader.exec_module(stub)

    async def run() -> None:
        server = stub.StubServer(default=stub.Reply(texts=SC_REPLY, delay_s=latency_ms / 1000))
        server.record = False
        await server.start(port)
        print(f"READY {server.url}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def slope_per_minute(points: list[tuple[float, float]]) -> float | None:
    if len(points) < 3:
        return None
    xs = [t for t, _ in points]
    ys = [v for _, v in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else None


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {proc.returncode}")
            try:
                async with session.get(f"{url}/readyz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError("gateway not ready")


async def load(url: str, pid: int, clients: int, seconds: float, sample_s: float, idle_s: float) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
    samples: list[tuple[str, float, float]] = []  # (phase, t, MB)
    t0 = time.monotonic()

    def sample(phase: str) -> None:
        samples.append((phase, time.monotonic() - t0, rss_mb(pid)))

    # before: idle after start, then after a short warm-up (imports, first-call paths)
    for _ in range(max(1, int(idle_s / sample_s))):
        sample("before")
        await asyncio.sleep(sample_s)
    connector = aiohttp.TCPConnector(limit=clients + 10)
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    ok = 0
    stop_at = 0.0
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:
        async def one(i: int) -> tuple[int, float]:
            body = {"question": f"Which is right: what is 2+2? (#{i % 1000})", "answer_a": "4", "answer_b": "5"}
            if i % 10 == 0:
                body["label"] = "A"
            start = time.perf_counter()
            async with session.post(f"{url}/v1/judge", data=json.dumps(body), headers=headers) as r:
                await r.read()
                return r.status, time.perf_counter() - start

        for i in range(200):  # warm-up, not counted
            await one(i)
        sample("before")

        counter = iter(range(10**12))

        async def client() -> None:
            nonlocal ok
            while time.monotonic() < stop_at:
                try:
                    status, elapsed = await one(next(counter))
                except (TimeoutError, aiohttp.ClientError) as exc:
                    errors[type(exc).__name__] += 1
                    continue
                if status == 200:
                    ok += 1
                    latencies.append(elapsed)
                else:
                    errors[str(status)] += 1

        async def sampler() -> None:
            while time.monotonic() < stop_at:
                sample("during")
                await asyncio.sleep(sample_s)

        started = time.monotonic()
        stop_at = started + seconds
        await asyncio.gather(sampler(), *(client() for _ in range(clients)))
        elapsed = time.monotonic() - started
    for _ in range(max(1, int(idle_s / sample_s)) + 1):
        await asyncio.sleep(sample_s)
        sample("after")

    during = [(t, mb) for phase, t, mb in samples if phase == "during"]
    half = [(t, mb) for t, mb in during if t >= during[0][0] + (during[-1][0] - during[0][0]) / 2] if during else []
    print(f"\nclients {clients}, {elapsed:.1f} s of load")
    print(f"verdicts ok        {ok}  ({ok / elapsed:.1f}/s)")
    print(f"errors             {sum(errors.values())}  {dict(errors) if errors else ''}")
    ms = [x * 1000 for x in latencies]
    print(f"latency ms         p50 {pct(ms, .5):.1f}  p90 {pct(ms, .9):.1f}  p99 {pct(ms, .99):.1f}  "
          f"max {max(ms) if ms else float('nan'):.1f}")
    print(f"gateway RSS (MB), every {sample_s:.0f} s:")
    for phase in ("before", "during", "after"):
        values = [f"{mb:.1f}" for p, _, mb in samples if p == phase]
        print(f"  {phase:7s} {' '.join(values)}")
    whole, second = slope_per_minute(during), slope_per_minute(half)
    fmt = lambda v: "n/a" if v is None else f"{v:+.2f} MB/min"  # noqa: E731
    print(f"RSS trend during load: {fmt(whole)} (whole), {fmt(second)} (second half)")
    before = [mb for p, _, mb in samples if p == "before"]
    after = [mb for p, _, mb in samples if p == "after"]
    print(f"RSS before -> after: {before[-1]:.1f} -> {after[-1]:.1f} MB ({after[-1] - before[-1]:+.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--latency-ms", type=float, default=50)
    parser.add_argument("--judges", type=int, default=3)
    parser.add_argument("--sample-s", type=float, default=5)
    parser.add_argument("--idle-s", type=float, default=10, help="idle time sampled before and after the load")
    parser.add_argument("--sqlite-synchronous", choices=["FULL", "NORMAL"], default="FULL",
                        help="the gateway's SQLite durability (default FULL, the product's default)")
    parser.add_argument("--serve-stub", nargs=2, metavar=("PORT", "LATENCY_MS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_stub:
        serve_stub(int(args.serve_stub[0]), float(args.serve_stub[1]))
        return

    import hashlib

    workdir = tempfile.mkdtemp(prefix="bench-load-")
    stub_port, gw_port = free_port(), free_port()
    procs: list[subprocess.Popen] = []
    try:
        stub = subprocess.Popen([sys.executable, __file__, "--serve-stub", str(stub_port), str(args.latency_ms)],
                                stdout=subprocess.PIPE, text=True)
        procs.append(stub)
        line = stub.stdout.readline() if stub.stdout else ""
        if not line.startswith("READY"):
            raise RuntimeError(f"stub did not start: {line!r}")
        stub_url = line.split()[1]
        panel = Path(workdir) / "panel.yaml"
        entries = "".join(
            f"  - name: judge{i}\n    model: openai/judge{i}\n    backend: direct\n    api_base: {stub_url}\n"
            f"    mode: sc\n    timeout_s: 10\n    max_concurrency: 1024\n"
            f"    retries: {{attempts: 1, base_delay_s: 0, max_delay_s: 0}}\n"
            for i in range(args.judges)
        )
        panel.write_text(f"name: bench\nfusion: majority\nquorum: {args.judges // 2 + 1}\njudges:\n{entries}")
        env = {
            **os.environ,
            "JUDGEFUSE_WEB__API_KEYS": json.dumps({"bench": hashlib.sha256(API_KEY.encode()).hexdigest()}),
            "JUDGEFUSE_STORAGE__SQLITE_SYNCHRONOUS": args.sqlite_synchronous,
            "JUDGEFUSE_SERVER__LOG_LEVEL": "warning",
            "JUDGEFUSE_LEARNING__REFIT_EVERY_LABELS": "0",
        }
        judgefuse = Path(sys.executable).with_name("judgefuse")
        command = [str(judgefuse)] if judgefuse.exists() else [sys.executable, "-m", "judgefuse.cli"]
        gateway = subprocess.Popen(
            [*command, "serve", "--host", "127.0.0.1", "--port", str(gw_port),
             "--storage", f"sqlite:///{workdir}/bench.sqlite3", "--panel", str(panel)],
            env=env, cwd=workdir,
        )
        procs.append(gateway)
        url = f"http://127.0.0.1:{gw_port}"
        print(f"stub {stub_url} ({args.latency_ms:.0f} ms per reply), gateway {url} (pid {gateway.pid}), "
              f"{args.judges} SC judges, SQLite synchronous={args.sqlite_synchronous}, {os.cpu_count()} CPUs")

        async def run() -> None:
            await wait_ready(url, gateway)
            await load(url, gateway.pid, args.clients, args.seconds, args.sample_s, args.idle_s)

        asyncio.run(run())
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
