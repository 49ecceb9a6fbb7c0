"""Overload on loopback: one tenant's burst against a healthy panel must not take other tenants down.

Usage: ``python benchmarks/bench_overload.py [--burst 100] [--latency-ms 500] [--per-tenant 32] [--tenant-cap 6]``

Three processes: the scripted OpenAI stub (``tests/jf_test_support/openai_stub.py``; every reply an SC JSON
verdict after ``--latency-ms``), the gateway as users run it (``judgefuse serve``: SQLite, two
tenants with API keys, a panel of 3 SC judges with ``timeout_s: 3`` and ``max_concurrency: 8``,
a panel deadline of ``--deadline-s``), and this client (aiohttp). The script:

1. tenant A sends ``--burst`` concurrent ``POST /v1/judge``;
2. ``--b-after-s`` into the burst, tenant B sends one request;
3. when every answer of the burst is in, tenant A sends one more.

Prints A's status counts (with the Retry-After values of its 429s), whether any circuit breaker
opened (``judgefuse_circuit_opened`` on ``/metrics`` when the gateway exports it, and the votes'
errors either way), B's latency next to the judges' latency, and A's next status. The judges are
healthy throughout, so a 503 or an opened breaker is the gateway's own doing. Run it with
``PYTHONPATH`` pointing at an older checkout to measure that one (unknown settings are ignored).
A benchmark, not a test: nothing is asserted. Bounded: well under 60 s, loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
from bench_load import free_port, serve_stub, wait_ready  # the same stub child and readiness wait

REPO = Path(__file__).resolve().parents[1]
KEYS = {"tenant-a": "bench-overload-key-a-0001", "tenant-b": "bench-overload-key-b-0002"}
METRICS_TOKEN = "bench-overload-metrics-token-0003"  # /metrics is protected once keys are set
PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}


class Answer:
    def __init__(self, status: int, seconds: float, body: dict[str, Any], retry_after: str | None) -> None:
        self.status = status
        self.seconds = seconds
        self.body = body
        self.retry_after = retry_after

    def errors(self) -> list[str]:
        """Every judge error this answer carries (a verdict's votes, or a 503's failed judges)."""
        if self.status == 200:
            return [v["error"] for v in self.body.get("votes", []) if v.get("error")]
        return [j.get("reason", "") for j in self.body.get("failed_judges", [])]


async def post(session: aiohttp.ClientSession, url: str, tenant: str) -> Answer:
    headers = {"Authorization": f"Bearer {KEYS[tenant]}", "Content-Type": "application/json"}
    started = time.perf_counter()
    async with session.post(f"{url}/v1/judge", data=json.dumps(PAIR), headers=headers) as r:
        body = await r.json(content_type=None)
        return Answer(r.status, time.perf_counter() - started, body, r.headers.get("Retry-After"))


def circuits_opened(metrics: str) -> int | None:
    """Sum of ``judgefuse_circuit_opened`` over judges (None: the gateway does not export it)."""
    values = re.findall(r"^judgefuse_circuit_opened\{[^}]*\} ([0-9.e+]+)$", metrics, flags=re.M)
    return None if not values else int(sum(float(v) for v in values))


async def scenario(url: str, burst: int, b_after_s: float, latency_s: float) -> None:
    connector = aiohttp.TCPConnector(limit=burst + 10)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:
        await post(session, url, "tenant-a")  # warm-up: connections, first-call paths
        await post(session, url, "tenant-b")
        started = time.perf_counter()
        tasks = [asyncio.create_task(post(session, url, "tenant-a")) for _ in range(burst)]
        await asyncio.sleep(b_after_s)
        b = await post(session, url, "tenant-b")
        answers = await asyncio.gather(*tasks)
        burst_s = time.perf_counter() - started
        after = await post(session, url, "tenant-a")
        async with session.get(f"{url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}) as r:
            metrics = await r.text()

    statuses = Counter(a.status for a in answers)
    retry_after = Counter(a.retry_after for a in answers if a.status == 429)
    ok_s = sorted(a.seconds for a in answers if a.status == 200)
    refused_s = sorted(a.seconds for a in answers if a.status == 429)
    reasons = Counter(e.split(":")[0] for a in [*answers, b, after] for e in a.errors())
    opened = circuits_opened(metrics)
    circuit_votes = sum(n for reason, n in reasons.items() if reason.startswith("circuit"))
    print(f"\ntenant A burst: {burst} concurrent requests, answered in {burst_s:.2f} s")
    print(f"  statuses            {dict(sorted(statuses.items()))}")
    print(f"  429 Retry-After     {dict(retry_after) if retry_after else '-'}")
    if ok_s:
        print(f"  200 latency s       min {ok_s[0]:.2f}  median {ok_s[len(ok_s) // 2]:.2f}  max {ok_s[-1]:.2f}")
    if refused_s:
        print(f"  429 latency ms      max {refused_s[-1] * 1000:.1f}")
    print(f"  judge errors        {dict(reasons) if reasons else 'none'}")
    print(f"circuit breakers opened: {'n/a (not exported)' if opened is None else opened} on /metrics, "
          f"{circuit_votes} 'circuit ...' vote errors in the responses")
    b_errors = b.errors()
    print(f"tenant B during the burst: {b.status} in {b.seconds:.2f} s (judge latency {latency_s:.2f} s, "
          f"margin {b.seconds - latency_s:+.2f} s){'; errors: ' + str(b_errors) if b_errors else ''}")
    if b.status == 200:
        timings = b.body.get("timings", {})
        votes = [v.get("latency_s", 0.0) for v in b.body.get("votes", [])]
        print(f"  B inside the gateway: judges {timings.get('judges_s', float('nan')):.2f} s (votes "
              f"{', '.join(f'{v:.2f}' for v in votes)} s), total {timings.get('total_s', float('nan')):.2f} s; "
              f"the rest of its {b.seconds:.2f} s is HTTP and the event loop busy with A's burst")
    a_errors = after.errors()
    print(f"tenant A after the burst: {after.status} in {after.seconds:.2f} s"
          f"{'; errors: ' + str(a_errors) if a_errors else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=500)
    parser.add_argument("--b-after-s", type=float, default=0.3, help="when B sends, from the burst's start")
    parser.add_argument("--per-tenant", type=int, default=32, help="max_inflight_per_tenant")
    parser.add_argument("--total", type=int, default=256, help="max_inflight_total")
    parser.add_argument("--deadline-s", type=float, default=10, help="the panel's deadline_s")
    parser.add_argument("--tenant-cap", type=int, default=None,
                        help="each judge's max_concurrency_per_tenant (default: unset, all 8 slots)")
    parser.add_argument("--serve-stub", nargs=2, metavar=("PORT", "LATENCY_MS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_stub:
        serve_stub(int(args.serve_stub[0]), float(args.serve_stub[1]))
        return

    workdir = tempfile.mkdtemp(prefix="bench-overload-")
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
            f"    mode: sc\n    timeout_s: 3\n    max_concurrency: 8\n"
            + (f"    max_concurrency_per_tenant: {args.tenant_cap}\n" if args.tenant_cap else "")
            for i in range(3)
        )
        panel.write_text(f"name: bench\nfusion: majority\nquorum: 2\ndeadline_s: {args.deadline_s:g}\n"
                         f"judges:\n{entries}")
        env = {
            **os.environ,
            "JUDGEFUSE_WEB__API_KEYS": json.dumps({t: hashlib.sha256(k.encode()).hexdigest() for t, k in KEYS.items()}),
            "JUDGEFUSE_WEB__METRICS_TOKEN": hashlib.sha256(METRICS_TOKEN.encode()).hexdigest(),
            "JUDGEFUSE_STORAGE__SQLITE_SYNCHRONOUS": "NORMAL",
            "JUDGEFUSE_SERVER__LOG_LEVEL": "warning",
            "JUDGEFUSE_LEARNING__REFIT_EVERY_LABELS": "0",
            "JUDGEFUSE_JUDGING__MAX_INFLIGHT_PER_TENANT": str(args.per_tenant),
            "JUDGEFUSE_JUDGING__MAX_INFLIGHT_TOTAL": str(args.total),
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
        print(f"stub {stub_url} ({args.latency_ms:.0f} ms per reply), gateway {url}: 3 SC judges "
              f"(timeout_s 3, max_concurrency 8, per tenant {args.tenant_cap or 8}), "
              f"panel deadline_s {args.deadline_s:g}, "
              f"max_inflight_per_tenant {args.per_tenant}, max_inflight_total {args.total}, {os.cpu_count()} CPUs")

        async def run() -> None:
            await wait_ready(url, gateway)
            await scenario(url, args.burst, args.b_after_s, args.latency_ms / 1000)

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
