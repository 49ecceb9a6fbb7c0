"""The Python client: its overhead per call next to raw httpx, and 10,000 pairs through
``Client.judge_pairs`` with bounded memory (docs/python-client.md).

Usage: ``python benchmarks/bench_client.py [--calls 2000] [--rounds 3] [--pairs 10000]
[--concurrency 16]``

Processes: a gateway (uvicorn + the app, SQLite) and its stub judges (three SC judges answering
at once, ``tests/jf_test_support``) in a child process; this process is the client only, so
its CPU and memory are the client's.

(a) overhead per call: ``POST /v1/fuse`` (three posted votes, no judge call: the gateway's
    cheapest write) sent one at a time, ``--calls`` times, by raw ``httpx.Client`` (build the
    dict, post, ``.json()``) and by ``judgefuse.client.Client.fuse`` (the request checked
    against the server's model, an id drawn, the answer parsed into ``VerdictOut``, the retry
    loop), alternated for ``--rounds`` rounds on one connection each. Printed: median wall
    time per call and this process's CPU per call, each client's, and client / raw ratios.
(b) ``--pairs`` pairs from a generator through ``Client.judge_pairs`` (``/v1/judge``,
    ``--concurrency`` in flight, a resume file): verdicts/s, and this process's resident memory
    (VmRSS) after every tenth of the pairs and its peak (VmHWM): bounded means the RSS after
    the last pair is about the RSS after the first tenth.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
VOTES = [{"judge": "e1", "choice": "A", "confidence": 0.9},
         {"judge": "e2", "choice": "A", "confidence": 0.7},
         {"judge": "e3", "choice": "B", "confidence": 0.6}]

SERVE = """
import sys, time, pathlib
sys.path[:0] = [{tests!r}]
from jf_test_support.live_gateway import live_gateway, API_KEY
with live_gateway(pathlib.Path({tmp!r}), max_inflight_total=10_000, max_inflight_per_tenant=10_000) as live:
    print("READY", live.url, API_KEY, flush=True)
    sys.stdin.read()
"""


def memory_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def overhead(url: str, key: str, calls: int, rounds: int) -> dict[str, float]:
    from judgefuse.client import Client

    headers = {"Authorization": f"Bearer {key}"}
    raw_wall, raw_cpu, ours_wall, ours_cpu = [], [], [], []
    with httpx.Client(base_url=url, headers=headers, timeout=60) as raw, Client(url, key) as client:
        for i in range(50):  # warm both connections and the gateway
            raw.post("/v1/fuse", json={"question": f"w{i}", "answer_a": "a", "answer_b": "b",
                                       "panel": "ext", "votes": VOTES}).raise_for_status().json()
            client.fuse(question=f"w{i}", answer_a="a", answer_b="b", panel="ext", votes=VOTES)
        for r in range(rounds):
            wall, cpu = time.perf_counter(), time.process_time()
            for i in range(calls):
                raw.post("/v1/fuse", json={"question": f"raw {r} {i}", "answer_a": "a", "answer_b": "b",
                                           "panel": "ext", "votes": VOTES}).raise_for_status().json()
            raw_wall.append((time.perf_counter() - wall) / calls)
            raw_cpu.append((time.process_time() - cpu) / calls)
            wall, cpu = time.perf_counter(), time.process_time()
            for i in range(calls):
                client.fuse(question=f"ours {r} {i}", answer_a="a", answer_b="b", panel="ext", votes=VOTES)
            ours_wall.append((time.perf_counter() - wall) / calls)
            ours_cpu.append((time.process_time() - cpu) / calls)
    out = {"raw_wall_ms": statistics.median(raw_wall) * 1e3, "client_wall_ms": statistics.median(ours_wall) * 1e3,
           "raw_cpu_ms": statistics.median(raw_cpu) * 1e3, "client_cpu_ms": statistics.median(ours_cpu) * 1e3}
    out["wall_ratio"] = out["client_wall_ms"] / out["raw_wall_ms"]
    out["cpu_ratio"] = out["client_cpu_ms"] / out["raw_cpu_ms"]
    return out


def many_pairs(url: str, key: str, n: int, concurrency: int, tmp: Path) -> dict[str, object]:
    from judgefuse.client import Client

    def pairs():
        for i in range(n):
            yield {"question": f"bench question {i} " + "x" * 200, "answer_a": f"answer a {i}",
                   "answer_b": f"answer b {i}"}

    rss_mib: list[float] = []
    ok = failed = 0
    failures: dict[str, int] = {}
    started = time.perf_counter()
    with Client(url, key) as client:
        for done, result in enumerate(client.judge_pairs(pairs(), concurrency=concurrency,
                                                         resume=tmp / "pairs.jsonl", progress=False), 1):
            ok += result.ok
            failed += not result.ok
            if result.error is not None:
                kind = str(getattr(result.error, "status", None) or type(result.error).__name__)
                failures[kind] = failures.get(kind, 0) + 1
            if done % max(1, n // 10) == 0:
                rss_mib.append(round(memory_kib("VmRSS") / 1024, 1))
    seconds = time.perf_counter() - started
    return {"pairs": n, "ok": ok, "failed": failed, "failures_by_status": failures, "seconds": round(seconds, 1),
            "verdicts_per_s": round(n / seconds, 1), "rss_mib_each_tenth": rss_mib,
            "peak_rss_mib": round(memory_kib("VmHWM") / 1024, 1),
            "resume_file_mib": round((tmp / "pairs.jsonl").stat().st_size / 2**20, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        code = SERVE.format(tests=str(ROOT / "tests"), tmp=tmp)
        server = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, cwd=ROOT)
        try:
            assert server.stdout is not None
            line = server.stdout.readline().split()
            if not line or line[0] != "READY":
                raise SystemExit("the gateway did not start")
            url, key = line[1], line[2]
            rss_before = memory_kib("VmRSS") / 1024
            print(f"client process RSS before importing the client: {rss_before:.1f} MiB", flush=True)
            result = overhead(url, key, args.calls, args.rounds)
            print("(a) overhead per call, POST /v1/fuse, one at a time:", json.dumps(
                {k: round(v, 3) for k, v in result.items()}), flush=True)
            print("(b) judge_pairs:", json.dumps(many_pairs(url, key, args.pairs, args.concurrency, Path(tmp))),
                  flush=True)
        finally:
            if server.stdin is not None:
                server.stdin.close()
            server.wait(60)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
