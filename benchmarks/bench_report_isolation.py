"""Report isolation: one tenant polling ``GET /v1/panels/{panel}/winrate`` over 20,000 stored
verdicts, another tenant's ``/v1/fuse`` latency beside it (issue 41; docs/design.md, 'Reports').

    python benchmarks/bench_report_isolation.py [--verdicts 20000] [--seconds 20] [--rate 25] \
        [--pollers 4] [--out benchmarks/results/report_isolation.txt]

One gateway process (uvicorn, SQLite, two tenant keys, a panel of three ``external: true``
judges whose votes are posted, so no judge is called). Tenant 1 stores ``--verdicts`` verdicts
through ``/v1/fuse/batch`` (200 a request), each item naming its two systems in metadata
(``system_a``/``system_b``, X against Y in both orders), one in twenty then labelled
through ``/v1/feedback`` (review labels). Tenant 2
sends ``/v1/fuse`` open loop at ``--rate`` requests/s (each sent at its planned time whatever
the answers; latency from that time to the answer) in three phases of ``--seconds`` each:

* ``alone``: tenant 2 only;
* ``polling``: tenant 1 polls the same win rate from ``--pollers`` closed-loop clients (a
  separate process, so its client work does not delay tenant 2's clock): after the first scan
  the report is answered from its cache;
* ``polling, cache defeated``: each poll names a ``field`` never asked before, so every poll
  needs a full scan of the 20,000 records: only the report gate (``max_inflight_reports``) and
  the worker threads stand between it and tenant 2.

Printed per phase: tenant 2's p50 / p99 / max and non-200 count, and the poller's answers by
status (200s, 429s); the ratio of each polling phase's p99 to the alone phase's. The figures are
wall time on a shared machine: the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import free_port  # noqa: E402  - the sibling module, run as a script

KEYS = {"tenant-1": "bench-report-key-1-0001", "tenant-2": "bench-report-key-2-0002"}
JUDGES = ("e1", "e2", "e3")
PAIR = {"question": "Which answer is correct: what is 2+2?", "answer_a": "4", "answer_b": "5"}
BATCH = 200
"""Items per seeding request (under the tenant's 256 requests in flight)."""


def serve_gateway(port: int, workdir: str) -> None:
    """Child process: the gateway on ``port``."""
    import logging

    import uvicorn

    from judgefuse.service.app import create_app
    from judgefuse.service.settings import Settings

    work = Path(workdir)
    panel = work / "panel-ext.yaml"
    panel.write_text("name: ext\nfusion: majority\nquorum: 1\njudges:\n"
                     + "".join(f"  - {{name: {j}, external: true}}\n" for j in JUDGES))
    settings = Settings(
        storage_url=f"sqlite:///{work / 'bench.sqlite3'}", panels=[panel],
        api_keys={t: hashlib.sha256(k.encode()).hexdigest() for t, k in KEYS.items()},
        max_body_bytes=64 * 1024 * 1024, max_batch_items=BATCH, refit_every_labels=0,
    )
    logging.getLogger("judgefuse.service").setLevel(logging.ERROR)
    uvicorn.run(create_app(settings), host="127.0.0.1", port=port, log_level="warning")


def item(i: int, *, labelled: bool) -> dict:
    x_is_a = bool(i % 2)
    x_wins = random.Random(i).random() < 0.6  # X's answer is the better one 60% of the time
    choice = "A" if x_wins == x_is_a else "B"
    other = "B" if choice == "A" else "A"
    ballot = [choice, choice, other if i % 3 == 0 else choice]
    body = {**PAIR, "panel": "ext", "id": f"v{i}",
            "votes": [{"judge": j, "choice": c, "confidence": 0.6 + 0.1 * k}
                      for k, (j, c) in enumerate(zip(JUDGES, ballot, strict=True))],
            "metadata": {"system_a": "X" if x_is_a else "Y", "system_b": "Y" if x_is_a else "X"}}
    if labelled:
        body["label"] = "A" if x_wins == x_is_a else "B"
    return body


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# ----------------------------------------------------------------------------- the poller
def poll(base: str, seconds: float, pollers: int, defeat_cache: bool) -> None:
    """Child process: ``pollers`` closed-loop clients of tenant 1's win rate for ``seconds``;
    prints the answers by status as JSON."""

    async def run() -> dict[str, int]:
        counts: dict[str, int] = {}
        headers = {"Authorization": f"Bearer {KEYS['tenant-1']}"}
        end = time.monotonic() + seconds
        serial = [0]

        async def one(client: httpx.AsyncClient) -> None:
            while time.monotonic() < end:
                serial[0] += 1
                params = {"x": "X", "y": "Y"}
                if defeat_cache:
                    params["field"] = f"f{os.getpid()}-{serial[0]}"
                try:
                    r = await client.get("/v1/panels/ext/winrate", params=params, headers=headers)
                    key = str(r.status_code)
                except httpx.TransportError as exc:
                    key = type(exc).__name__
                counts[key] = counts.get(key, 0) + 1

        async with httpx.AsyncClient(base_url=base, timeout=120) as client:
            await asyncio.gather(*(one(client) for _ in range(pollers)))
        return counts

    print(json.dumps(asyncio.run(run())), flush=True)


# ----------------------------------------------------------------------------- tenant 2
async def open_loop(base: str, seconds: float, rate: float, phase: str) -> tuple[list[float], list[str]]:
    """``/v1/fuse`` at ``rate``/s for ``seconds``, each request sent at its planned time."""
    headers = {"Authorization": f"Bearer {KEYS['tenant-2']}"}
    latencies: list[float] = []
    errors: list[str] = []
    n = int(seconds * rate)

    async def one(client: httpx.AsyncClient, i: int, planned: float) -> None:
        body = item(i, labelled=False) | {"id": f"{phase}-{i}"}
        r = await client.post("/v1/fuse", json=body, headers=headers)
        latencies.append(time.perf_counter() - planned)
        if r.status_code != 200:
            errors.append(f"{r.status_code} {r.text[:120]}")

    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        await client.get("/healthz")
        start = time.perf_counter() + 0.05
        tasks = []
        for i in range(n):
            planned = start + i / rate
            delay = planned - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(client, i, planned)))
        await asyncio.gather(*tasks)
    return latencies, errors


async def main_async(args: argparse.Namespace, lines: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-report-") as workdir:
        port = free_port()
        gateway = subprocess.Popen([sys.executable, __file__, "--serve-gateway", str(port), workdir])
        base = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(base_url=base, timeout=600) as client:
                for _ in range(600):
                    if gateway.poll() is not None:
                        raise RuntimeError(f"the gateway exited ({gateway.returncode})")
                    try:
                        if (await client.get("/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.1)
                started = time.perf_counter()
                headers = {"Authorization": f"Bearer {KEYS['tenant-1']}"}

                async def post(path: str, body: dict) -> httpx.Response:
                    """Seeding on a busy machine: a 429 (the loop-lag shed) is waited out and retried."""
                    for _ in range(30):
                        r = await client.post(path, json=body, headers=headers)
                        if r.status_code != 429:
                            break
                        await asyncio.sleep(float(r.headers.get("Retry-After", "1")))
                    return r

                for first in range(0, args.verdicts, BATCH):
                    items = [item(i, labelled=False) for i in range(first, min(first + BATCH, args.verdicts))]
                    r = await post("/v1/fuse/batch", {"items": items})
                    if r.status_code != 200 or r.json()["n_failed"]:
                        failed = [x for x in r.json().get("results", []) if x.get("status") != 200]
                        raise RuntimeError(f"seeding failed: {r.status_code} {failed[:2] or r.text[:300]}")
                for first in range(0, args.verdicts, 20 * 50):  # one in 20 labelled, as a reviewer would
                    posts = [post("/v1/feedback", {"verdict_id": f"v{i}", "label": item(i, labelled=True)["label"]})
                             for i in range(first, min(first + 20 * 50, args.verdicts), 20)]
                    for r in await asyncio.gather(*posts):
                        if r.status_code != 200:
                            raise RuntimeError(f"labelling failed: {r.status_code} {r.text[:300]}")
                seeded = time.perf_counter() - started
                r = await client.get("/v1/panels/ext/winrate", params={"x": "X", "y": "Y"}, headers=headers)
                first_scan = time.perf_counter() - started - seeded
                report = r.json()
            lines.append(f"seeded {args.verdicts:,} verdicts of tenant 1 in {seeded:.1f} s; first win rate "
                         f"{r.status_code}: n_verdicts {report.get('n_verdicts')}, n_labels "
                         f"{report.get('n_labels')}, corrected {report.get('corrected', {}).get('estimate')}, "
                         f"{first_scan:.2f} s (scan, nothing else running)")
            lines.append(f"tenant 2: /v1/fuse open loop at {args.rate:g}/s, {args.seconds:g} s per phase; "
                         f"tenant 1: {args.pollers} closed-loop pollers in another process")
            results = []
            for phase, defeat in (("alone", None), ("polling", False), ("polling, cache defeated", True)):
                poller = None
                if defeat is not None:
                    poller = subprocess.Popen(
                        [sys.executable, __file__, "--poll", base, str(args.seconds), str(args.pollers),
                         "1" if defeat else "0"], stdout=subprocess.PIPE, text=True)
                    await asyncio.sleep(0.5)  # the pollers connected and polling
                latencies, errors = await open_loop(base, args.seconds, args.rate, phase.split(",")[0][:5])
                polls = {}
                if poller is not None:
                    out, _ = poller.communicate(timeout=args.seconds + 180)
                    polls = json.loads(out.strip().splitlines()[-1])
                ms = [v * 1000 for v in latencies]
                results.append((phase, ms, errors, polls))
            alone_p99 = percentile(results[0][1], 0.99)
            for phase, ms, errors, polls in results:
                ratio = "" if phase == "alone" else f"  p99 {percentile(ms, 0.99) / alone_p99:.2f}x alone's"
                poll_text = (f"  poller: {sum(polls.values())} polls, {polls.get('200', 0)} x 200, "
                             f"{polls.get('429', 0)} x 429" + "".join(
                                 f", {n} x {k}" for k, n in polls.items() if k not in ("200", "429"))
                             if polls else "")
                lines.append(f"{phase:<24} tenant 2 /v1/fuse n={len(ms):4d}  p50 {percentile(ms, 0.5):7.1f} ms  "
                             f"p99 {percentile(ms, 0.99):7.1f} ms  max {max(ms, default=float('nan')):7.1f} ms  "
                             f"non-200 {len(errors)}{ratio}{poll_text}")
                if errors:
                    lines.append(f"{'':<24} first non-200: {errors[0]}")
            lines.append("load average " + " / ".join(f"{x:.1f}" for x in os.getloadavg()))
        finally:
            gateway.terminate()
            gateway.wait(timeout=30)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-gateway":
        serve_gateway(int(sys.argv[2]), sys.argv[3])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--poll":
        poll(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verdicts", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=25.0, help="tenant 2's /v1/fuse per second")
    parser.add_argument("--pollers", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    lines = ["$ python benchmarks/bench_report_isolation.py " + " ".join(sys.argv[1:])]
    asyncio.run(main_async(args, lines))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
