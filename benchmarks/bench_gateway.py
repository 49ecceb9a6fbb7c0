"""Gateway throughput, overhead per verdict, and calibration query time (DESIGN.md "Scale").

Usage: ``python benchmarks/bench_gateway.py [--judges 5] [--latency-ms 50] [--seconds 8]
[--storage sqlite|redis|postgres|URL]``

``--storage`` picks the gateway's store: a URL (``sqlite:///path``, ``redis://...``,
``postgresql://...``), or one of the words ``sqlite`` (a file in a temp dir, the default),
``redis`` (a throwaway redis-server, AOF everysec as in deploy/) or ``postgres`` (a throwaway
PostgreSQL, fsync on, as the tests start it; ``--pg-async-commit`` turns synchronous_commit
off, the analogue of SQLite NORMAL and Redis everysec). (d) prints the store's bytes per verdict.

Three processes: the scripted OpenAI stub (``tests/jf_test_support/openai_stub.py``, every reply an SC
JSON verdict after a fixed delay), the gateway (uvicorn + the app, SQLite, a panel of N judges
in SC mode on the direct aiohttp path, open mode), and this load generator (aiohttp).

(a) max sustained verdicts/s: closed loop at increasing concurrency; the best rate with no
    errors. Target >= 200/s. The same for ``POST /v1/fuse`` (bring your own votes: a panel of
    N ``external`` judges, the votes in the body, no judge call): the gateway's own ceiling.
(b) at half that rate (open loop, fixed arrival rate): gateway overhead per verdict = client
    latency minus the slowest judge call (the gateway's own measure of that call), p50/p99;
    targets <= 3 ms and <= 15 ms. Beside it, the same load against a bare aiohttp fan-out
    server (no validation, fusion, storage or routing) gives the floor on this machine.
(c) calibration query time with 1,000,000 labelled verdicts' worth of accumulator fields in
    the store (built with ``CalibrationAccumulator.increments_many``, spread over 24 hour
    buckets, written through ``Storage.set_label``): ``GET /v1/calibration`` (all time + 24 h
    window) over HTTP and the storage read + metrics in process. Target < 10 ms.
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
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[1]
STUB = REPO / "tests" / "jf_test_support" / "openai_stub.py"
PAIR = {"question": "Which answer is correct: what is 2+2?", "answer_a": "4", "answer_b": "5"}
FUSE = {**PAIR, "panel": "bench-ext"}
"""The /v1/fuse body: the same pair with every external judge's vote (filled in by main)."""
SC_REPLY = json.dumps({"selected_output": "Output (a)", "confidence_score": 85, "explanation": "4 is right"})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ----------------------------------------------------------------------------- child processes
def serve_stub(port: int, latency_ms: float) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("openai_stub", STUB)
    assert spec is not None and spec.loader is not None
    stub = importlib.util.module_from_spec(spec)
    sys.modules["openai_stub"] = stub  # dataclasses look their module up
    spec.loader.exec_module(stub)

    async def run() -> None:
        server = stub.StubServer(default=stub.Reply(texts=SC_REPLY, delay_s=latency_ms / 1000))
        server.record = False
        await server.start(port)
        print(f"READY {server.url}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


def serve_gateway(port: int, stub_url: str, judges: int, workdir: str, storage_url: str) -> None:
    import uvicorn

    from judgefuse.service.app import create_app
    from judgefuse.service.settings import Settings

    entries = "".join(
        f"  - name: judge{i}\n    model: openai/judge{i}\n    backend: direct\n    api_base: {stub_url}\n"
        f"    mode: sc\n    timeout_s: 10\n    max_concurrency: 1024\n"
        f"    retries: {{attempts: 1, base_delay_s: 0, max_delay_s: 0}}\n"
        for i in range(judges)
    )
    panel = Path(workdir) / "panel.yaml"
    panel.write_text(f"name: bench\nfusion: majority\nquorum: 1\ndeadline_s: 20\njudges:\n{entries}")
    external = Path(workdir) / "panel-ext.yaml"
    external.write_text("name: bench-ext\nfusion: majority\nquorum: 1\njudges:\n" + "".join(
        f"  - {{name: judge{i}, external: true}}\n" for i in range(judges)))
    settings = Settings(
        storage_url=storage_url, panels=[panel, external], auth_disabled=True,
        sqlite_synchronous=os.environ.get("BENCH_SQLITE_SYNC", "NORMAL"),  # type: ignore[arg-type]
        refit_every_labels=0,
    )
    import logging

    logging.getLogger("judgefuse.service").setLevel(logging.ERROR)
    uvicorn.run(create_app(settings), host="127.0.0.1", port=port, log_level="error",
                access_log=False)


def serve_bare(port: int, stub_url: str, judges: int) -> None:
    """The floor: an aiohttp server that fans out to the judges and returns their bodies."""
    from aiohttp import web

    async def run() -> None:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        bodies = [
            json.dumps({"model": f"judge{i}", "temperature": 0.0,
                        "messages": [{"role": "user", "content": json.dumps(PAIR)}]}).encode()
            for i in range(judges)
        ]

        async def call(body: bytes) -> tuple[float, dict]:
            started = time.perf_counter()
            async with session.post(stub_url + "/chat/completions", data=body,
                                    headers={"Content-Type": "application/json"}) as response:
                data = json.loads(await response.read())
            return time.perf_counter() - started, data

        async def handle(request: web.Request) -> web.Response:
            await request.read()
            results = await asyncio.gather(*(call(b) for b in bodies))
            slowest = max(r[0] for r in results)
            out = {"votes": [{"latency_s": r[0]} for r in results], "slowest": slowest}
            return web.json_response(out)

        app = web.Application()
        app.router.add_post("/v1/judge", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=2048).start()
        print("READY", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


def spawn(*args: str, ready: str = "READY", env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith(ready):
        proc.kill()
        raise RuntimeError(f"child {args[0]} did not start: {line!r}")
    return proc, line


async def wait_http(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} not ready")
            await asyncio.sleep(0.1)


# ----------------------------------------------------------------------------- load
async def one(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[float, float, float | None]:
    """(client latency, slowest judge call as the server saw it, server overhead or None)."""
    started = time.perf_counter()
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
        raw = await response.read()
        status = response.status
    latency = time.perf_counter() - started
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {raw[:200]!r}")
    data = json.loads(raw)
    if "slowest" in data:
        return latency, data["slowest"], None
    slowest = max(v["latency_s"] for v in data["votes"])
    return latency, slowest, data["timings"].get("overhead_s")


async def closed_loop(url: str, concurrency: int, seconds: float,
                      payload: dict | None = None) -> tuple[float, int]:
    body = json.dumps(payload or PAIR).encode()
    done = errors = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done, errors
            while time.perf_counter() < stop:
                try:
                    await one(session, url, body)
                    done += 1
                except Exception:
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return done / wall, errors


async def open_loop(url: str, rate: float, seconds: float) -> tuple[list[float], list[float], float, int]:
    """Fixed arrival rate; returns client overheads, server overheads, achieved rate, errors."""
    body = json.dumps(PAIR).encode()
    client_over: list[float] = []
    server_over: list[float] = []
    errors = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def fire() -> None:
            nonlocal errors
            try:
                latency, slowest, server = await one(session, url, body)
            except Exception:
                errors += 1
                return
            client_over.append(latency - slowest)
            if server is not None:
                server_over.append(server)

        tasks = []
        n = int(rate * seconds)
        started = time.perf_counter()
        for i in range(n):
            target = started + i / rate
            delay = target - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(fire()))
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - started
    return client_over, server_over, n / wall, errors


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


# ----------------------------------------------------------------------------- calibration
async def calibration_bench(base: str, storage_url: str, n_items: int) -> dict[str, float]:
    import numpy as np

    from judgefuse.calibration import CalibrationAccumulator
    from judgefuse.fusion.verdict import Verdict
    from judgefuse.service.calibration_store import calibration_report, method_key
    from judgefuse.service.storage import VerdictRecord, storage_from_url

    rng = np.random.default_rng(0)
    c = rng.uniform(0.5, 1.0, n_items)
    z = rng.uniform(size=n_items) < c
    acc = CalibrationAccumulator()
    hours = 24
    now = time.time()
    storage = storage_from_url(storage_url)
    await storage.open()
    key = method_key("bench", "majority")
    chunks = np.array_split(np.arange(n_items), hours)
    built = time.perf_counter()
    for h, index in enumerate(chunks):
        fields = acc.increments_many(c[index], z[index])
        vid = f"bulk-{h}"
        record = VerdictRecord(
            id=vid, tenant="default", panel="bench", created_at=now - 3600 * (hours - 1 - h),
            verdict=Verdict(choice="A", confidence=0.9, p_a=0.9, method="majority", id=vid),
        )
        await storage.save_verdict("default", record)
        await storage.set_label("default", vid, "A", lambda _r, _l, f=fields: {key: f})
    build_s = time.perf_counter() - built
    total = await storage.read_accumulator("default", key)
    n_bins_filled = sum(1 for k in total if k.startswith("n"))

    def timed(fn, repeat: int = 30) -> float:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    loop_times: list[float] = []
    for _ in range(30):
        t0 = time.perf_counter()
        await calibration_report(storage, "default", "bench", window_hours=24, n_bins=10, eps=0.1, now=now)
        loop_times.append(time.perf_counter() - t0)
    read_times = []
    for _ in range(30):
        t0 = time.perf_counter()
        await storage.read_accumulator("default", key)
        read_times.append(time.perf_counter() - t0)
    window_times = []
    for _ in range(30):
        t0 = time.perf_counter()
        await storage.read_accumulator("default", key, since_hour=int(now // 3600) - 23)
        window_times.append(time.perf_counter() - t0)
    metrics_s = timed(lambda: acc.metrics_from_fields(total, n_bins=10, eps=0.1))
    await storage.close()

    http_times = []
    async with aiohttp.ClientSession() as session:
        for _ in range(30):
            t0 = time.perf_counter()
            async with session.get(f"{base}/v1/calibration", params={"panel": "bench"}) as response:
                data = await response.json()
            http_times.append(time.perf_counter() - t0)
        n_seen = next(k for k in data["keys"] if k["key"] == "method:majority:fused")["all_time"]["n"]
        total_only = []
        for _ in range(30):
            t0 = time.perf_counter()
            async with session.get(f"{base}/v1/calibration",
                                   params={"panel": "bench", "window_hours": "0"}) as response:
                await response.read()
            total_only.append(time.perf_counter() - t0)
    return {
        "items": float(n_seen), "build_s": build_s, "fine_bins_filled": float(n_bins_filled),
        "http_ms": statistics.median(http_times) * 1e3,
        "http_total_only_ms": statistics.median(total_only) * 1e3,
        "report_ms": statistics.median(loop_times) * 1e3,
        "read_total_ms": statistics.median(read_times) * 1e3,
        "read_window_ms": statistics.median(window_times) * 1e3,
        "metrics_ms": metrics_s * 1e3,
    }


# ----------------------------------------------------------------------------- storage
class Store:
    """The gateway's store for this run: its URL, the server started for it (if any), and how
    many bytes it holds (for bytes per verdict)."""

    def __init__(self, spec: str, workdir: str, pg_async_commit: bool = False) -> None:
        self.kind = spec if spec in ("sqlite", "redis", "postgres") else spec.split("://", 1)[0]
        self.kind = {"postgresql": "postgres", "rediss": "redis", "unix": "redis"}.get(self.kind, self.kind)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pg: Any = None
        self.baseline = 0
        if spec == "sqlite":
            self.url = f"sqlite:///{workdir}/gateway.sqlite3"
        elif spec == "redis":
            port = free_port()
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--dir", workdir, "--appendonly", "yes", "--appendfsync", "everysec",
                 "--maxmemory-policy", "noeviction"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            self.url = f"redis://127.0.0.1:{port}/0"
        elif spec == "postgres":
            sys.path.insert(0, str(REPO / "tests"))
            from jf_test_support.pg_server import start_postgres

            self.pg = start_postgres()
            self.url = self.pg.url()
            if pg_async_commit:  # per session: commits stop waiting for the WAL flush
                self.url += "?options=-c%20synchronous_commit%3Doff"
        else:
            self.url = spec

    async def _redis_memory(self) -> int:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(self.url)
        try:
            for _ in range(100):
                try:
                    return int((await client.info("memory"))["used_memory"])
                except Exception:
                    await asyncio.sleep(0.1)
            raise RuntimeError("redis did not answer")
        finally:
            await client.aclose()

    async def start(self) -> None:
        if self.kind == "redis":
            self.baseline = await self._redis_memory()

    async def bytes_per_verdict(self) -> tuple[int, int, str]:
        """(verdict records, bytes, what the bytes are)."""
        if self.kind == "sqlite":
            import sqlite3

            path = Path(self.url.split("://", 1)[1][1:])
            with sqlite3.connect(path) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                n = conn.execute("SELECT count(*) FROM verdicts").fetchone()[0]
                size = conn.execute(
                    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
                ).fetchone()[0]
            return n, size, "database file (every table and index)"
        if self.kind == "redis":
            import redis.asyncio as aioredis

            client = aioredis.Redis.from_url(self.url)
            try:
                n = 0
                async for _key in client.scan_iter(match="jf:{*}:v:*", count=1000):
                    n += 1
            finally:
                await client.aclose()
            used = await self._redis_memory() - self.baseline
            return n, used, "used_memory growth (RAM: records, indexes, accumulators)"
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute("CHECKPOINT")
            cur = await conn.execute("SELECT count(*) FROM verdicts")
            n = (await cur.fetchone())[0]  # type: ignore[index]
            cur = await conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(relid)), 0) "
                "FROM pg_partition_tree('verdicts')"
            )
            records = (await cur.fetchone())[0]  # type: ignore[index]
            cur = await conn.execute("SELECT pg_total_relation_size('verdict_ids')")
            ids = (await cur.fetchone())[0]  # type: ignore[index]
        return n, int(records) + int(ids), (
            f"pg_total_relation_size of the verdict partitions ({int(records):,} B, with TOAST "
            f"and indexes) + verdict_ids ({int(ids):,} B)"
        )

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        if self.pg is not None:
            self.pg.stop()


# ----------------------------------------------------------------------------- main
async def main_async(args: argparse.Namespace) -> None:
    workdir = tempfile.mkdtemp(prefix="bench-gateway-")
    store = Store(args.storage, workdir, args.pg_async_commit)
    try:
        await store.start()
        await run_bench(args, workdir, store)
    finally:
        store.stop()


async def run_bench(args: argparse.Namespace, workdir: str, store: Store) -> None:
    stub_proc, line = spawn("--serve-stub", str(free_port()), str(args.latency_ms))
    stub_url = line.split(" ", 1)[1]
    gw_port, bare_port = free_port(), free_port()
    gateway = subprocess.Popen(
        [sys.executable, __file__, "--serve-gateway", str(gw_port), stub_url, str(args.judges), workdir,
         store.url],
        env={**os.environ, "BENCH_SQLITE_SYNC": args.sqlite_sync},
    )
    bare_proc, _ = spawn("--serve-bare", str(bare_port), stub_url, str(args.judges))
    base = f"http://127.0.0.1:{gw_port}"
    bare = f"http://127.0.0.1:{bare_port}"
    try:
        await wait_http(base + "/readyz")
        print(f"cores: {os.cpu_count()}; judges: {args.judges} (SC, direct aiohttp); judge latency "
              f"{args.latency_ms:g} ms; storage {store.kind}"
              + (f" (synchronous={args.sqlite_sync})" if store.kind == "sqlite" else "")
              + (" (synchronous_commit=off)" if "synchronous_commit" in store.url else "")
              + f"; {args.seconds:g} s per point")
        await closed_loop(base + "/v1/judge", 8, 1.0)  # warm-up
        await closed_loop(bare + "/v1/judge", 8, 1.0)

        print("\n(a) max sustained verdicts/s (closed loop)")
        best = 0.0
        for concurrency in args.concurrency:
            rate, errors = await closed_loop(base + "/v1/judge", concurrency, args.seconds)
            print(f"    concurrency {concurrency:>4}: {rate:7.1f} verdicts/s, errors {errors}")
            if errors == 0:
                best = max(best, rate)
        bare_best = 0.0
        for concurrency in args.concurrency:
            rate, errors = await closed_loop(bare + "/v1/judge", concurrency, args.seconds)
            if errors == 0:
                bare_best = max(bare_best, rate)
        FUSE["votes"] = [{"judge": f"judge{i}", "choice": "A", "confidence": 0.85} for i in range(args.judges)]
        await closed_loop(base + "/v1/fuse", 8, 1.0, FUSE)  # warm-up
        fuse_best = 0.0
        for concurrency in args.concurrency:
            rate, errors = await closed_loop(base + "/v1/fuse", concurrency, args.seconds, FUSE)
            print(f"    /v1/fuse concurrency {concurrency:>4}: {rate:7.1f} verdicts/s, errors {errors}")
            if errors == 0:
                fuse_best = max(fuse_best, rate)
        print(f"    gateway max: /v1/judge {best:.1f} verdicts/s (target >= 200: "
              f"{'met' if best >= 200 else 'NOT met'}), /v1/fuse {fuse_best:.1f} verdicts/s;"
              f" bare aiohttp fan-out max: {bare_best:.1f}/s")

        half = best / 2
        print(f"\n(b) overhead per verdict at half the max rate ({half:.1f}/s, open loop)")
        client, server, achieved, errors = await open_loop(base + "/v1/judge", half, args.seconds)
        bclient, _, bachieved, berrors = await open_loop(bare + "/v1/judge", half, args.seconds)
        p50, p99 = pct(client, 50) * 1e3, pct(client, 99) * 1e3
        print(f"    gateway  ({achieved:.1f}/s, {len(client)} verdicts, errors {errors}): "
              f"latency - slowest judge call p50 {p50:.2f} ms, p99 {p99:.2f} ms "
              f"(targets 3 / 15 ms: {'met' if p50 <= 3 and p99 <= 15 else 'NOT met'})")
        if server:
            print(f"      of which inside the app (timings.overhead_s): p50 {pct(server, 50) * 1e3:.2f} ms, "
                  f"p99 {pct(server, 99) * 1e3:.2f} ms")
        print(f"    bare aiohttp fan-out floor ({bachieved:.1f}/s, errors {berrors}): "
              f"p50 {pct(bclient, 50) * 1e3:.2f} ms, p99 {pct(bclient, 99) * 1e3:.2f} ms")

        n, size, what = await store.bytes_per_verdict()
        print(f"\n(d) bytes per verdict ({store.kind}): {size / max(n, 1):,.0f} B over {n:,} stored "
              f"verdicts ({args.judges} judges, one-line prompt); {what}")

        if args.labels <= 0:
            return
        print(f"\n(c) calibration query with {args.labels:,} labelled verdicts' fields in the store")
        cal = await calibration_bench(base, store.url, args.labels)
        print(f"    stored {cal['items']:,.0f} items ({cal['fine_bins_filled']:.0f} fine-bin counters, "
              f"24 hour buckets; built and written in {cal['build_s']:.1f} s)")
        print(f"    GET /v1/calibration (all time + 24 h window, over HTTP): {cal['http_ms']:.2f} ms median "
              f"(target < 10 ms: {'met' if cal['http_ms'] < 10 else 'NOT met'})")
        print(f"    GET /v1/calibration?window_hours=0 (all time only, over HTTP): "
              f"{cal['http_total_only_ms']:.2f} ms median "
              f"(target < 10 ms: {'met' if cal['http_total_only_ms'] < 10 else 'NOT met'})")
        print(f"    in process: report {cal['report_ms']:.2f} ms = read total {cal['read_total_ms']:.2f} ms"
              f" + read window {cal['read_window_ms']:.2f} ms + metrics x2 ({cal['metrics_ms']:.2f} ms each)")
    finally:
        for proc in (gateway, bare_proc, stub_proc):
            proc.terminate()
        for proc in (gateway, bare_proc, stub_proc):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-stub":
        serve_stub(int(sys.argv[2]), float(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-gateway":
        serve_gateway(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-bare":
        serve_bare(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--labels", type=int, default=1_000_000)
    parser.add_argument("--sqlite-sync", choices=["FULL", "NORMAL"], default="NORMAL")
    parser.add_argument("--storage", default="sqlite",
                        help="sqlite | redis | postgres (a throwaway server) | a storage URL")
    parser.add_argument("--pg-async-commit", action="store_true",
                        help="with --storage postgres: synchronous_commit=off, the analogue of "
                             "SQLite NORMAL / Redis everysec (a crash may lose the last commits)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
