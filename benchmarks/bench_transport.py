"""Client CPU per judge call: bare aiohttp vs DirectOpenAIClient vs LiteLLMClient.

Usage: ``python benchmarks/bench_transport.py [--calls 1000] [--litellm-calls 300]``

The scripted OpenAI-compatible stub (``tests/jf_test_support/openai_stub.py``) runs in a separate
process, so its CPU is not counted. For each concurrency level, each client makes ``calls``
requests through ``concurrency`` workers; client CPU is ``time.process_time()`` of this process
(all its threads) divided by calls. A short warm-up precedes each measurement and is not
counted. Targets (docs/design.md, 'Serving'): direct <= 1.5x bare and <= 1 ms of CPU per call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from judgefuse.judges.transport import ChatRequest, DirectOpenAIClient, LiteLLMClient
from judgefuse.judges.transport.litellm_client import import_litellm

REPO = Path(__file__).resolve().parents[1]
STUB = REPO / "tests" / "jf_test_support" / "openai_stub.py"
MESSAGES = [
    {"role": "system", "content": "You are a fair judge. Answer with a single letter."},
    {"role": "user", "content": "Question: what is 2+2?\nOutput (a): 4\nOutput (b): 5\nWhich output is better?"},
]
WARMUP = 20


def start_stub() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, str(STUB)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("READY "):
        process.kill()
        raise RuntimeError(f"stub did not start: {line!r}")
    return process, line.split(" ", 1)[1]


async def run(call: Callable[[], Awaitable[object]], calls: int, concurrency: int) -> tuple[float, float]:
    """(client CPU seconds per call, calls per second) for ``calls`` calls over ``concurrency`` workers."""
    for _ in range(WARMUP):
        await call()
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return cpu / calls, calls / wall


async def bench_bare(url: str, calls: int, concurrency: int) -> tuple[float, float]:
    body = json.dumps({"model": "stub", "messages": MESSAGES, "temperature": 0.0}).encode()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=max(concurrency, 1))) as session:

        async def call() -> object:
            async with session.post(url + "/chat/completions", data=body, headers=headers) as response:
                return json.loads(await response.read())

        return await run(call, calls, concurrency)


async def bench_client(
    client: DirectOpenAIClient | LiteLLMClient, model: str, url: str, calls: int, concurrency: int
) -> tuple[float, float]:
    request = ChatRequest(model=model, messages=MESSAGES, api_base=url, api_key="sk-bench", timeout_s=60.0)
    try:
        return await run(lambda: client.complete(request), calls, concurrency)
    finally:
        await client.aclose()


async def main_async(calls: int, litellm_calls: int, levels: list[int]) -> None:
    import_litellm()  # pay the import before measuring
    process, url = start_stub()
    rows: list[tuple[str, int, int, float, float, float]] = []
    try:
        for concurrency in levels:
            bare_cpu, bare_rate = await bench_bare(url, calls, concurrency)
            rows.append(("bare aiohttp", concurrency, calls, bare_cpu, bare_rate, 1.0))
            cpu, rate = await bench_client(
                DirectOpenAIClient(max_connections=max(concurrency, 1)), "stub", url, calls, concurrency
            )
            rows.append(("DirectOpenAIClient", concurrency, calls, cpu, rate, cpu / bare_cpu))
            cpu, rate = await bench_client(
                LiteLLMClient(max_connections=max(concurrency, 1)), "openai/stub", url, litellm_calls, concurrency
            )
            rows.append(("LiteLLMClient", concurrency, litellm_calls, cpu, rate, cpu / bare_cpu))
    finally:
        process.terminate()
        process.wait(timeout=10)
    print(f"{'client':<20} {'conc':>5} {'calls':>6} {'CPU ms/call':>12} {'calls/s':>9} {'x bare':>7}")
    for name, concurrency, n, cpu, rate, ratio in rows:
        print(f"{name:<20} {concurrency:>5} {n:>6} {cpu * 1e3:>12.3f} {rate:>9.0f} {ratio:>7.2f}")
    direct = [r for r in rows if r[0] == "DirectOpenAIClient"]
    ok = all(r[5] <= 1.5 and r[3] <= 1e-3 for r in direct)
    print(f"targets (direct <= 1.5x bare and <= 1 ms/call): {'met' if ok else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--litellm-calls", type=int, default=300)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 50, 200])
    args = parser.parse_args()
    asyncio.run(main_async(args.calls, args.litellm_calls, args.concurrency))


if __name__ == "__main__":
    main()
