"""Gateway throughput, overhead per verdict, and calibration query time (docs/design.md, 'Scale').

Usage: ``python benchmarks/bench_gateway.py [--judges 5] [--latency-ms 50] [--seconds 8]
[--sqlite-sync FULL|NORMAL] [--also-other-sync] [--anchor litellm-proxy] [--labels 0]
[--storage sqlite|redis|postgres|URL] [--pg-async-commit]``

``--storage`` picks the gateway's store (``bench_stores.py``): a URL (``sqlite:///path``,
``redis://...``, ``postgresql://...``), or one of the words ``sqlite`` (a file in a temp dir, the
default), ``redis`` (a throwaway redis-server, AOF everysec as in deploy/) or ``postgres`` (a
throwaway PostgreSQL, fsync on, as the tests start it; ``--pg-async-commit`` turns
synchronous_commit off, the analogue of SQLite NORMAL and Redis everysec).

Processes: the scripted OpenAI stub (``tests/jf_test_support/openai_stub.py``, every reply an SC
JSON verdict after a fixed delay), the gateway (uvicorn + the app on the ``--storage`` store; with SQLite the
product's default durability ``synchronous=FULL`` unless ``--sqlite-sync NORMAL``, and
``--also-other-sync`` starts a second SQLite gateway with the other setting and measures it beside; a panel of N judges in
SC mode on the direct aiohttp path, a one-judge panel, an ``external`` panel; open mode), a bare
aiohttp fan-out server, optionally LiteLLM's proxy, and this load generator (aiohttp). Every
server's CPU seconds per request are read from ``/proc`` (steadier than rates when other jobs
share the cores).

(a) max sustained verdicts/s: closed loop at increasing concurrency; the best rate with no
    errors, against the bare aiohttp fan-out's (no validation, fusion, storage or routing: the
    floor on this machine). Target >= 0.6x the fan-out. The same for ``POST /v1/fuse`` (bring
    your own votes: N ``external`` judges, the votes in the body, no judge call).
(b) open loop (a fixed arrival rate; latency counted from each request's scheduled send, so a
    slow answer delays no later send and hides nothing; client timeout 10 s) at 25%, 50% and
    80% of each server's own max: latency minus the stub's delay p50 / p99 / p99.9, and the
    errors split into 429s (with ``Retry-After`` or not), 5xx and timeouts; for judgefuse also
    its event loop's lag over the run (``judgefuse_event_loop_lag_seconds`` from ``/metrics``)
    and where the time went (p50 / p99 of: the slowest judge call, the fan-out beyond it,
    fusion, routing + stamp, the store's wait, and outside the handler: HTTP, middleware,
    admission, waiting for the loop, the response). The bare fan-out also at judgefuse's 50%
    rate, and ``/v1/fuse`` also at 150% of its max (above capacity: 429s expected, no 5xx).
    Then the issue's targets, each met or NOT met. Servers run on one core, the load
    generator and the stub on the other (``--no-pin``: anywhere), stated in the first line.
(c) calibration query time with 1,000,000 labelled verdicts' worth of accumulator fields in
    the store (built with ``CalibrationAccumulator.increments_many``, spread over 24 hour
    buckets, written through ``Storage.set_label``): ``GET /v1/calibration`` (all time + 24 h
    window) over HTTP as served (with the population estimates and the panel structure), all
    time only, and with ``population=false&structure=false`` (the labelled fields alone); the
    storage read + metrics in process. Target < 10 ms. ``--labels 0`` skips it.
(d) ``--anchor litellm-proxy``: one judge call per request, judgefuse (one-judge panel) vs the
    bare fan-out (one call) vs LiteLLM's proxy (``litellm --config``, one worker, a master key,
    model ``judge0`` -> the same stub): max rate of each, then overhead (latency minus the stub's
    delay) of each at one rate all three sustain, and the ratios. Needs the ``bench`` extra
    (``pip install -e '.[bench]'``); without it the flag says so and stops.
(e) bytes per verdict in the store after (a) and (b) (before (c) and (d) add theirs): the SQLite
    file, Redis's used_memory growth, or PostgreSQL's verdict partitions + verdict_ids.
(h) ``--only-scrape``: ``--scrape-votes`` verdicts of the external panel fused first, then
    ``/v1/judge`` at ``--scrape-rate`` without and with a client reading ``/metrics`` every
    ``--scrape-every`` s: latency, loop lag and the scrapes' own time.
``--only-fuse``: ``/v1/fuse`` alone: its closed-loop max (or ``--fuse-max``), open loop at 50%
and 150% of it, and its two targets. The gateway runs as ``judgefuse serve`` runs it
(``uvicorn_config``: its HTTP protocol, with the read time backpressure sees).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_refit_isolation import EXT_JUDGES, labelled_item  # noqa: E402  - sibling module
from bench_stores import Store, sqlite_url  # noqa: E402  - the sibling module, run as a script
from load_client import LoadClient  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
STUB = REPO / "tests" / "jf_test_support" / "openai_stub.py"
PAIR = {"question": "Which answer is correct: what is 2+2?", "answer_a": "4", "answer_b": "5"}
FUSE = {**PAIR, "panel": "bench-ext"}


def fuse_votes(judges: int) -> list[dict[str, object]]:
    """The votes of ``FUSE``'s body: ``judges`` external judges, each for A at 0.85."""
    return [{"judge": f"judge{i}", "choice": "A", "confidence": 0.85} for i in range(judges)]

REFIT_PANEL = "ext"
"""(f)'s panel: 13 external judges whose labelled votes carry 16 signals each (the refit keeps
13 x (3 + 16) = 247 features, the most ``refit_max_features`` allows: bench_refit_isolation.py)."""
"""The /v1/fuse body: the same pair with every external judge's vote (filled in by main)."""
JSON_HEADERS = {"Content-Type": "application/json"}
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
    pin_self(os.environ.get(SERVER_CPU_ENV))
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
    single = Path(workdir) / "panel-1.yaml"
    single.write_text("name: bench-1\nfusion: majority\nquorum: 1\ndeadline_s: 20\njudges:\n"
                      + entries.split("  - name: judge1\n")[0])
    external = Path(workdir) / "panel-ext.yaml"
    external.write_text("name: bench-ext\nfusion: majority\nquorum: 1\njudges:\n" + "".join(
        f"  - {{name: judge{i}, external: true}}\n" for i in range(judges)))
    refit = Path(workdir) / "panel-refit.yaml"  # (f): the largest refit allowed (bench_refit_isolation)
    refit.write_text(f"name: {REFIT_PANEL}\nfusion: mean_probability\nquorum: 1\njudges:\n"
                     + "".join(f"  - {{name: {j}, external: true}}\n" for j in EXT_JUDGES))
    settings = Settings(
        storage_url=storage_url, panels=[panel, external, single, refit],
        auth_disabled=True,
        sqlite_synchronous=os.environ.get("BENCH_SQLITE_SYNC", "FULL"),  # type: ignore[arg-type]
        refit_every_labels=0, max_batch_items=200, max_body_bytes=64 * 1024 * 1024,
    )
    import logging

    logging.getLogger("judgefuse.service").setLevel(logging.ERROR)
    workers = int(os.environ.get("BENCH_GATEWAY_WORKERS", "1"))
    if workers > 1:  # judgefuse serve --workers N: the product's own supervisor
        from judgefuse.service.commands.serve import run_workers

        settings = settings.model_copy(update={"server": settings.server.model_copy(update={
            "workers": workers, "host": "127.0.0.1", "port": port, "log_level": "error"})})
        raise SystemExit(run_workers(settings))
    from judgefuse.service.commands.serve import uvicorn_config

    # the server judgefuse serve runs (its HTTP protocol: deadlines, the read time backpressure sees)
    uvicorn.Server(uvicorn_config(create_app(settings), settings, host="127.0.0.1", port=port,
                                  log_level="error")).run()


def serve_bare(port: int, stub_url: str, judges: int) -> None:
    """The floor: an aiohttp server that fans out to the judges and returns their bodies."""
    from aiohttp import web

    pin_self(os.environ.get(SERVER_CPU_ENV))

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

        async def fan_out(request: web.Request, calls: list[bytes]) -> web.Response:
            await request.read()
            results = await asyncio.gather(*(call(b) for b in calls))
            slowest = max(r[0] for r in results)
            out = {"votes": [{"latency_s": r[0]} for r in results], "slowest": slowest}
            return web.json_response(out)

        app = web.Application()
        app.router.add_post("/v1/judge", lambda request: fan_out(request, bodies))
        app.router.add_post("/v1/judge1", lambda request: fan_out(request, bodies[:1]))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=2048).start()
        print("READY", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


PROXY_KEY = "sk-bench-master-key-0123456789abcdef"


def start_litellm_proxy(port: int, stub_url: str, workdir: str,
                        cpu: str | None = None, venv: str | None = None) -> subprocess.Popen[bytes]:
    """LiteLLM's proxy (``litellm --config``, one worker) routing model ``judge0`` to the stub.

    Its defaults otherwise (a master key, which it requires, so each request is authenticated
    as judgefuse's keyed mode would be; no database, no callbacks)."""
    exe = check_proxy_extra(venv)
    config = Path(workdir) / "litellm-proxy.yaml"
    config.write_text(
        "model_list:\n  - model_name: judge0\n    litellm_params:\n      model: openai/judge0\n"
        f"      api_base: {stub_url}\n      api_key: sk-stub\n"
        f"general_settings:\n  master_key: {PROXY_KEY}\n"
        "litellm_settings:\n  telemetry: false\n"
    )
    return subprocess.Popen(
        [str(exe), "--config", str(config), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=(lambda: pin_self(cpu)) if cpu else None,
        env={**os.environ, "LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False",
             "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )


def check_proxy_extra(venv: str | None = None) -> Path:
    """The ``litellm`` command: ``venv``'s (a scratch virtualenv holding ``litellm[proxy]``, so
    the proxy's ~40 packages never enter the project's environment), else this environment's;
    SystemExit saying how to install it."""
    if venv:
        exe = Path(venv) / "bin" / "litellm"
        if not exe.exists():
            raise SystemExit(f"--litellm-venv {venv}: no bin/litellm there. {PROXY_MISSING}")
        return exe
    exe = Path(sys.executable).parent / "litellm"
    if not exe.exists() or importlib.util.find_spec("litellm.proxy.proxy_server") is None:
        raise SystemExit(PROXY_MISSING)
    try:
        import backoff  # noqa: F401  - one of the proxy extra's packages
        import fastapi_sso  # noqa: F401
    except ImportError:
        raise SystemExit(PROXY_MISSING) from None
    return exe


def proxy_version(exe: Path) -> str:
    """The litellm version installed beside ``exe`` (the proxy row names it)."""
    python = exe.parent / "python"
    try:
        out = subprocess.run([str(python if python.exists() else sys.executable), "-c",
                              "import importlib.metadata as m; print(m.version('litellm'))"],
                             capture_output=True, text=True, timeout=60, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


PROXY_MISSING = (
    "--anchor litellm-proxy needs LiteLLM's proxy: a scratch virtualenv at the locked litellm "
    "version, passed as --litellm-venv (python3 -m venv /tmp/litellm-proxy-venv && "
    "/tmp/litellm-proxy-venv/bin/pip install 'litellm[proxy]==1.108.7'), or the bench extra in "
    "this environment (pip install -e '.[bench]')"
)


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
Sample = tuple[float, float | None, float | None, float | None, dict[str, float] | None]
"""(client latency, slowest judge call as the server saw it or None, server overhead or None,
the server's time storing the verdict or None, judgefuse's ``timings`` or None)."""


class Refused(RuntimeError):
    """A non-200 answer: its status, whether it carried ``Retry-After`` and, for judgefuse's
    429, the limit its body names (which gate refused it)."""

    def __init__(self, status: int, retry_after_s: float | None, raw: bytes) -> None:
        super().__init__(f"HTTP {status}: {raw[:200]!r}")
        self.status = status
        self.retry_after = retry_after_s is not None
        self.retry_after_s = retry_after_s or 0.0
        self.limit = "?"
        if status == 429:
            try:
                self.limit = str(json.loads(raw).get("limit", "?"))
            except (ValueError, AttributeError):
                pass


async def one(client: LoadClient, url: str, body: bytes,
              headers: dict[str, str] | None = None, started: float | None = None) -> Sample:
    """One request; its latency counts from ``started`` (the open loop's scheduled send time,
    so a late generator or a full connection pool is counted against the server, not hidden)."""
    started = time.perf_counter() if started is None else started
    status, retry_after, raw = await client.post(url, body, headers or JSON_HEADERS, CLIENT_TIMEOUT_S)
    latency = time.perf_counter() - started
    if status != 200:
        raise Refused(status, retry_after, raw)
    data = json.loads(raw)
    if "slowest" in data:  # the bare fan-out
        return latency, data["slowest"], None, None, None
    if "choices" in data:  # the LiteLLM proxy: no per-call timing in the body
        return latency, None, None, None, None
    slowest = max((v["latency_s"] for v in data["votes"]), default=0.0)
    timings = data["timings"]
    return latency, slowest, timings.get("overhead_s"), timings.get("store_s"), timings


async def closed_loop(url: str, concurrency: int, seconds: float,
                      payload: dict | None = None, headers: dict[str, str] | None = None) -> tuple[float, int]:
    """(rate of 200s, errors): a 429 is no error here (the server refusing above its capacity
    is what it should do in a closed loop past it); it is counted in ``REFUSED``, and its
    worker waits the ``Retry-After`` it was given before its next request."""
    body = json.dumps(payload or PAIR).encode()
    done = errors = 0
    with closing(LoadClient(url)) as session:
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done, errors
            while time.perf_counter() < stop:
                try:
                    await one(session, url, body, headers)
                    done += 1
                except Refused as exc:
                    if exc.status == 429:
                        REFUSED.setdefault(url, Counter())[exc.limit] += 1
                        # a client honours Retry-After (judgefuse's own does): hammering
                        # back at once only measures how fast 429s are made
                        await asyncio.sleep(min(exc.retry_after_s, max(0.0, stop - time.perf_counter())))
                    else:
                        errors += 1
                except Exception:
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return done / wall, errors


@dataclass
class OpenRun:
    """One open-loop run: the 200s' samples and what the others were."""

    samples: list[Sample]
    achieved: float
    refused_by: Counter[str] = field(default_factory=Counter)
    """429s per limit their body names (the gate that refused them)"""
    retry_after_429: int = 0
    """429s that carried ``Retry-After``"""
    server_5xx: int = 0
    other: int = 0
    """timeouts (``CLIENT_TIMEOUT_S``), connection errors, other statuses"""
    send_late_p99_ms: float = 0.0
    """how late the generator sent (p99): large means the generator, not the server, lagged"""
    cpu_s: float = float("nan")
    """the server's CPU seconds over the run (nan: its process not given)"""
    wall_s: float = float("nan")

    @property
    def refused_429(self) -> int:
        return sum(self.refused_by.values())

    @property
    def sent(self) -> int:
        """Requests sent: answered 200 or not."""
        return len(self.samples) + self.errors

    @property
    def core_share(self) -> float:
        """The server's CPU over the run's wall time: how busy its core was (nan: not measured)."""
        return self.cpu_s / self.wall_s

    @property
    def errors(self) -> int:
        return self.refused_429 + self.server_5xx + self.other


CLIENT_TIMEOUT_S = 10.0
REFUSED: dict[str, Counter[str]] = {}
"""429s per URL in the closed loops (not errors there), per limit named in their bodies."""


async def open_loop_run(url: str, rate: float, seconds: float, payload: dict | None = None,
                        headers: dict[str, str] | None = None, pid: int | None = None) -> OpenRun:
    """Fixed arrival rate (one request every 1/rate s, whatever the answers do); with the
    server's ``pid``, also its CPU over the run (how busy its core really was: a closed loop's
    max amortises what an open loop pays per request)."""
    body = json.dumps(payload or PAIR).encode()
    run = OpenRun([], 0.0)
    cpu_before = cpu_s(pid) if pid is not None else float("nan")
    late: list[float] = []
    with closing(LoadClient(url)) as session:

        async def fire(target: float) -> None:
            late.append(time.perf_counter() - target)
            try:
                run.samples.append(await one(session, url, body, headers, started=target))
            except Refused as exc:
                if exc.status == 429:
                    run.refused_by[exc.limit] += 1
                    run.retry_after_429 += exc.retry_after
                elif exc.status >= 500:
                    run.server_5xx += 1
                else:
                    run.other += 1
            except Exception:
                run.other += 1

        tasks = []
        n = max(1, int(rate * seconds))
        started = time.perf_counter()
        for i in range(n):
            target = started + i / rate
            delay = target - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(fire(target)))
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - started
    run.cpu_s, run.wall_s = cpu_s(pid) - cpu_before if pid is not None else float("nan"), wall
    run.achieved = n / wall
    run.send_late_p99_ms = pct(late, 99) * 1e3
    return run


async def open_loop(url: str, rate: float, seconds: float, payload: dict | None = None,
                    headers: dict[str, str] | None = None) -> tuple[list[Sample], float, int]:
    """Fixed arrival rate; returns the samples, the achieved rate and the errors."""
    run = await open_loop_run(url, rate, seconds, payload, headers)
    return run.samples, run.achieved, run.errors


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


@dataclass
class Target:
    """One server under load: where to post, what, and the judge calls one request makes."""

    name: str
    url: str
    payload: dict | None = None
    headers: dict[str, str] | None = None
    pid: int | None = None
    """the server's process, for its CPU seconds per request (steadier than rates on a shared machine)"""


def cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` and its live children so far (0 when
    unknown): a ``--gateway-workers`` supervisor's workers count as the gateway."""
    return sum(cpu_split_s(pid))


def stat_cpu_s(stat: Path) -> tuple[float, float]:
    """(user, system) CPU seconds in a ``/proc/.../stat`` file (a process's or a thread's);
    ``OSError`` when it is gone."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_split_s(pid: int | None) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` and its live children so far."""
    if pid is None:
        return 0.0, 0.0
    try:
        user, system = stat_cpu_s(Path(f"/proc/{pid}/stat"))
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0.0, 0.0
    for child in children:
        child_user, child_system = cpu_split_s(int(child))
        user, system = user + child_user, system + child_system
    return user, system


@dataclass
class Measured:
    name: str
    url: str = ""
    max_rate: float = 0.0
    points: list[tuple[int, float, int]] = field(default_factory=list)
    at_rate: float = 0.0
    achieved: float = 0.0
    errors: int = 0
    over_call: list[float] = field(default_factory=list)
    """client latency minus the slowest judge call as the server measured it (judgefuse, bare)"""
    over_stub: list[float] = field(default_factory=list)
    """client latency minus the stub's fixed delay (every server, the proxy included)"""
    inside: list[float] = field(default_factory=list)
    """judgefuse's own ``timings.overhead_s``"""
    store: list[float] = field(default_factory=list)
    """judgefuse's ``timings.store_s`` (the group commit's wait, fsync included)"""
    cpu_ms: float = float("nan")
    """the server's CPU ms per request over every closed-loop point"""
    point_cpu_ms: list[float] = field(default_factory=list)
    """the same at each of ``points`` (0 when the server's process is not known)"""
    recheck: tuple[int, float, int, float] | None = None
    """the max's concurrency run again: (concurrency, rate, errors, CPU ms a request)"""

    def overhead(self, which: str = "call") -> tuple[float, float]:
        values = self.over_call if which == "call" and self.over_call else self.over_stub
        return pct(values, 50) * 1e3, pct(values, 99) * 1e3


async def max_rate(target: Target, concurrency: list[int], seconds: float, into: Measured, *,
                   recheck: bool = False) -> Measured:
    """The closed loop at each concurrency; the max is the best point without errors. With
    ``recheck``, the best point's concurrency runs once more after the others (``into.recheck``):
    the best of several noisy points is an upward-biased estimate of what the server sustains,
    and a second run of it says by how much (printed; the max stays the best single point)."""
    into.url = target.url
    await closed_loop(target.url, 8, 1.0, target.payload, target.headers)  # warm-up
    REFUSED.pop(target.url, None)
    cpu = requests = 0.0
    best: int | None = None
    for c in concurrency:
        c_rate, c_errors, c_cpu = await _closed_point(target, c, seconds)
        cpu += c_cpu
        requests += c_rate * seconds
        into.points.append((c, c_rate, c_errors))
        into.point_cpu_ms.append(_ms_a_request(c_cpu, c_rate * seconds))
        if c_errors == 0 and (best is None or c_rate > into.max_rate):
            into.max_rate, best = c_rate, c
    if target.pid is not None and requests:
        into.cpu_ms = _ms_a_request(cpu, requests)
    if recheck and best is not None and len(into.points) > 1:
        c_rate, c_errors, c_cpu = await _closed_point(target, best, seconds)
        into.recheck = (best, c_rate, c_errors, _ms_a_request(c_cpu, c_rate * seconds))
    return into


async def _closed_point(target: Target, concurrency: int, seconds: float) -> tuple[float, int, float]:
    """(rate, errors, the server's CPU seconds) of one closed-loop point."""
    before = cpu_s(target.pid)
    rate, errors = await closed_loop(target.url, concurrency, seconds, target.payload, target.headers)
    return rate, errors, cpu_s(target.pid) - before


def _ms_a_request(seconds: float, requests: float) -> float:
    """CPU ``seconds`` over ``requests`` as ms a request (no division by zero)."""
    return seconds / max(requests, 1.0) * 1e3


async def overhead_at(target: Target, rate: float, seconds: float, delay_s: float,
                      into: Measured) -> Measured:
    run = await open_loop_run(target.url, rate, seconds, target.payload, target.headers)
    return absorb(into, run, rate, delay_s)


def absorb(into: Measured, run: OpenRun, rate: float, delay_s: float) -> Measured:
    """``into`` takes ``run``'s figures (the summary's row: rate, latency, errors)."""
    into.achieved, into.errors, into.at_rate = run.achieved, run.errors, rate
    into.over_call, into.over_stub, into.inside, into.store = [], [], [], []
    for latency, slowest, inside, store, _timings in run.samples:
        into.over_stub.append(latency - delay_s)
        if slowest is not None:
            into.over_call.append(latency - slowest)
        if inside is not None:
            into.inside.append(inside)
        if store is not None:
            into.store.append(store)
    return into


def fsync_ms(folder: str, n: int = 60) -> tuple[float, float]:
    """p50 and p90 of one fsync after a 4 KiB append in ``folder``: the floor under every
    ``synchronous=FULL`` commit on this disk (other jobs writing to it raise it)."""
    fd, path = tempfile.mkstemp(dir=folder)
    times = []
    try:
        for _ in range(n):
            os.write(fd, b"x" * 4096)
            started = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        os.unlink(path)
    return pct(times, 50) * 1e3, pct(times, 90) * 1e3


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "n/a"


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


# ----------------------------------------------------------------------------- cores
SERVER_CPU_ENV = "BENCH_SERVER_CPU"
"""Set for a server child: the one core it runs on (``os.sched_setaffinity`` at its start, so
every thread it starts inherits it)."""


def pin_self(cpu: str | None) -> None:
    if cpu:
        os.sched_setaffinity(0, {int(cpu)})


def cores_plan(pin: bool) -> tuple[dict[str, str], str]:
    """(environment for server children, the sentence saying where everything runs)."""
    cpus = sorted(os.sched_getaffinity(0))
    if not pin or len(cpus) < 2:
        return {}, f"not pinned ({len(cpus)} cores usable)"
    server, generator = cpus[-1], cpus[0]
    os.sched_setaffinity(0, {generator})  # this process: the load generator (and the stub)
    return ({SERVER_CPU_ENV: str(server)},
            f"pinned: each server under test on core {server}, the load generator and the judge "
            f"stub on core {generator} (sched_setaffinity)")


# ----------------------------------------------------------------------------- loop lag
async def lag_buckets(base: str) -> dict[float, float]:
    """The gateway's ``judgefuse_event_loop_lag_seconds`` histogram: upper bound -> count."""
    out: dict[float, float] = {}
    async with aiohttp.ClientSession() as session:
        async with session.get(base + "/metrics") as response:
            text = await response.text()
    for line in text.splitlines():
        if line.startswith("judgefuse_event_loop_lag_seconds_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
    return out


def lag_summary(before: dict[float, float], after: dict[float, float]) -> str:
    """p50 / p99 / p99.9 of the loop lag sampled between two scrapes (bucket upper bounds)."""
    diff = {le: after.get(le, 0.0) - before.get(le, 0.0) for le in sorted(after)}
    total = diff.get(float("inf"), 0.0)
    if total <= 0:
        return "loop lag: not exposed"

    def q(f: float) -> str:
        for le, n in diff.items():
            if n >= f * total:
                return "> 5 s" if le == float("inf") else f"<= {le * 1e3:g} ms"
        return "?"

    return f"loop lag ({total:,.0f} samples, 5 ms apart): p50 {q(0.5)}, p99 {q(0.99)}, p99.9 {q(0.999)}"


# ----------------------------------------------------------------------------- levels
FRACTIONS = (0.25, 0.5, 0.8)


def level_line(name: str, share: str, rate: float, run: OpenRun, delay_s: float) -> str:
    over = [x[0] - delay_s for x in run.samples]
    ms = [pct(over, q) * 1e3 for q in (50, 99, 99.9)]
    errors = (f"errors {run.errors} (429 {run.refused_429}, with Retry-After {run.retry_after_429}"
              f"{by_limit(run.refused_by)}; 5xx {run.server_5xx}; timeouts/other {run.other})")
    return (f"    {name:<22} {share:>5} {rate:7.1f}/s (achieved {run.achieved:6.1f}/s, generator late "
            f"p99 {run.send_late_p99_ms:5.1f} ms): latency - stub p50 {ms[0]:7.2f}, p99 {ms[1]:7.2f}, "
            f"p99.9 {ms[2]:7.2f} ms; {errors}{cpu_part(run)}")


def cpu_part(run: OpenRun) -> str:
    """``"; server CPU 2.31 ms a request, 81% of a core"`` (a request sent, 429s included;
    empty when not measured)."""
    if run.cpu_s != run.cpu_s or not run.sent:
        return ""
    return f"; server CPU {run.cpu_s / run.sent * 1e3:.2f} ms a request, {run.core_share:.0%} of a core"


def by_limit(counts: Counter[str]) -> str:
    """``", by limit: max_inflight_work 30, shed_wait_s 12"`` (empty without 429s)."""
    if not counts:
        return ""
    return ", by limit: " + ", ".join(f"{k} {v}" for k, v in counts.most_common())


def breakdown_line(run: OpenRun) -> str:
    """Where a judgefuse request's time went (p50 / p99 of each part, ms), from its timings."""
    parts: dict[str, list[float]] = {k: [] for k in (
        "judge calls (slowest)", "fan-out beyond it", "fusion", "routing+stamp", "store wait",
        "outside the handler")}
    for latency, slowest, _inside, _store, t in run.samples:
        if t is None:
            continue
        judges, fuse, store, total = (t.get(k, 0.0) for k in ("judges_s", "fuse_s", "store_s", "total_s"))
        parts["judge calls (slowest)"].append(slowest or 0.0)
        parts["fan-out beyond it"].append(max(0.0, judges - (slowest or 0.0)))
        parts["fusion"].append(fuse)
        parts["routing+stamp"].append(max(0.0, total - judges - fuse - store))
        parts["store wait"].append(store)
        parts["outside the handler"].append(latency - total)
    return "; ".join(f"{k} {pct(v, 50) * 1e3:.2f}/{pct(v, 99) * 1e3:.2f}" for k, v in parts.items())


async def levels(name: str, target: Target, max_rate: float, fractions: tuple[float, ...], seconds: float,
                 delay_s: float, lag_from: str | None = None) -> dict[float, OpenRun]:
    """Open loop at each fraction of ``max_rate``: one line each (plus the loop lag and the
    breakdown for judgefuse)."""
    out: dict[float, OpenRun] = {}
    if max_rate <= 0:
        raise SystemExit(f"{name}: no closed-loop point without errors, so no max rate to take "
                         "fractions of (see the points above)")
    for f in fractions:
        before = await lag_buckets(lag_from) if lag_from else {}
        run = await open_loop_run(target.url, f * max_rate, seconds, target.payload, target.headers,
                                  target.pid)
        out[f] = run
        print(level_line(name, f"{f:.0%}", f * max_rate, run, delay_s), flush=True)
        if lag_from:
            print(f"    {'':<28} {lag_summary(before, await lag_buckets(lag_from))}")
            if any(x[4] for x in run.samples):
                print(f"    {'':<28} where the time went, p50/p99 ms: {breakdown_line(run)}")
    return out


# ----------------------------------------------------------------------------- calibration
async def calibration_bench(base: str, storage_url: str, n_items: int) -> dict[str, float]:
    import numpy as np

    from judgefuse.calibration import CalibrationAccumulator
    from judgefuse.fusion.verdict import Verdict
    from judgefuse.service.estimates.calibration_store import calibration_report
    from judgefuse.service.ledger import method_key
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
        no_population, lean = [], []  # lean: the labelled fields alone (no estimates, no structure)
        for times, structure in ((no_population, "true"), (lean, "false")):
            for _ in range(30):
                t0 = time.perf_counter()
                async with session.get(f"{base}/v1/calibration", params={
                        "panel": "bench", "population": "false", "structure": structure}) as response:
                    await response.read()
                times.append(time.perf_counter() - t0)
    return {
        "items": float(n_seen), "build_s": build_s, "fine_bins_filled": float(n_bins_filled),
        "http_ms": statistics.median(http_times) * 1e3,
        "http_total_only_ms": statistics.median(total_only) * 1e3,
        "http_no_population_ms": statistics.median(no_population) * 1e3,
        "http_lean_ms": statistics.median(lean) * 1e3,
        "report_ms": statistics.median(loop_times) * 1e3,
        "read_total_ms": statistics.median(read_times) * 1e3,
        "read_window_ms": statistics.median(window_times) * 1e3,
        "metrics_ms": metrics_s * 1e3,
    }


# ----------------------------------------------------------------------------- main
def show_targets(jf: Measured, bm: Measured, jl: dict[float, OpenRun], bare_same: OpenRun,
                 fl: dict[float, OpenRun], delay_s: float) -> None:
    """The issue's "what must be shown", each with met / NOT met."""
    def p99(run: OpenRun, delay: float) -> float:
        return pct([x[0] - delay for x in run.samples], 99) * 1e3

    j50, b50 = p99(jl[0.5], delay_s), p99(bare_same, delay_s)
    inside = pct([x[2] for x in jl[0.5].samples if x[2] is not None], 99) * 1e3
    print("\n    targets:")
    print(f"    - /v1/judge at 50%: latency - stub p99 {j50:.1f} ms <= 3x the bare fan-out's {b50:.1f} ms "
          f"at the same rate: {met(j50 <= 3 * b50)}; in-app overhead p99 {inside:.1f} ms <= 20 ms: "
          f"{met(inside <= 20)}; errors {jl[0.5].errors} == 0: {met(jl[0.5].errors == 0)}"
          f"{busy(jl[0.5])}")
    print(f"    - /v1/judge at 80%: errors {jl[0.8].errors} == 0: {met(jl[0.8].errors == 0)} "
          f"(p99 {p99(jl[0.8], delay_s):.1f} ms{busy(jl[0.8])})")
    print(fuse_targets(fl))
    print(f"    - closed-loop /v1/judge max {jf.max_rate:.1f}/s >= 0.6x the bare fan-out's {bm.max_rate:.1f}/s: "
          f"{met(jf.max_rate >= 0.6 * bm.max_rate)}")


def busy(run: OpenRun) -> str:
    """``"; the server's core 96% busy"``: an open loop pays per request what a closed loop's
    max amortises (smaller store groups, more wake-ups), so 80% of that max can be ~95% of the
    core (empty when not measured)."""
    return "" if run.cpu_s != run.cpu_s else f"; the server's core {run.core_share:.0%} busy"


def fuse_targets(fl: dict[float, OpenRun]) -> str:
    """The two /v1/fuse targets (50% and 150% of its max), each met / NOT met."""
    f50, f150 = (pct([x[0] for x in fl[f].samples], 99) * 1e3 for f in (0.5, 1.5))
    over = fl[1.5]
    refused_well = (over.refused_429 > 0 and over.retry_after_429 == over.refused_429
                    and over.server_5xx == 0 and over.other == 0)
    return (f"    - /v1/fuse at 50%: errors {fl[0.5].errors} == 0, p99 {f50:.1f} ms <= 50 ms: "
            f"{met(fl[0.5].errors == 0 and f50 <= 50)}\n"
            f"    - /v1/fuse at 150%: {over.refused_429} x 429 ({over.retry_after_429} with Retry-After), "
            f"5xx {over.server_5xx}, timeouts/other {over.other}, accepted p99 {f150:.1f} ms <= 100 ms: "
            f"{met(refused_well and f150 <= 100)}")


def show_points(m: Measured) -> None:
    for (c, rate, errors), point_cpu in zip(m.points, m.point_cpu_ms, strict=True):
        print(f"    {m.name:<28} concurrency {c:>4}: {rate:7.1f}/s, errors {errors}"
              + (f", CPU {point_cpu:.2f} ms a request" if point_cpu > 0 else ""))
    if m.recheck is not None:
        c, rate, errors, point_cpu = m.recheck
        print(f"    {m.name:<28} concurrency {c:>4} again: {rate:7.1f}/s, errors {errors}, CPU {point_cpu:.2f} ms "
              f"a request ({ratio(rate, m.max_rate)} of the max: how much of the best point was its minute)")
    refused = REFUSED.get(m.url)
    if refused:
        print(f"    {m.name:<28} 429s over these points (refused past capacity, not errors): "
              f"{refused.total()}{by_limit(refused)}")
    if m.cpu_ms == m.cpu_ms:
        print(f"    {m.name:<28} server CPU per request: {m.cpu_ms:.2f} ms")


def show_overhead(m: Measured, note: str = "") -> None:
    line = (f"    {m.name:<28} at {m.at_rate:6.1f}/s (achieved {m.achieved:6.1f}/s, errors {m.errors}): ")
    if m.over_call:
        p50, p99 = m.overhead("call")
        line += f"latency - slowest judge call p50 {p50:6.2f} ms, p99 {p99:6.2f} ms; "
    p50, p99 = m.overhead("stub")
    line += f"latency - stub delay p50 {p50:6.2f} ms, p99 {p99:6.2f} ms"
    print(line + note)
    if m.inside:
        print(f"    {'':<28} of which inside the app (timings.overhead_s): p50 "
              f"{pct(m.inside, 50) * 1e3:.2f} ms, p99 {pct(m.inside, 99) * 1e3:.2f} ms; storing "
              f"(timings.store_s, the commit's wait included): p50 {pct(m.store, 50) * 1e3:.2f} ms, "
              f"p99 {pct(m.store, 99) * 1e3:.2f} ms")


async def main_async(args: argparse.Namespace) -> None:
    if args.anchor == "litellm-proxy":
        args.proxy_version = proxy_version(check_proxy_extra(args.litellm_venv))  # before any process starts
    workdir = tempfile.mkdtemp(prefix="bench-gateway-")
    base_folder = tempfile.mkdtemp(prefix=f"gw-{args.sqlite_sync.lower()}-", dir=workdir)
    try:
        store = Store(args.storage, base_folder, args.pg_async_commit)
    except ValueError as exc:  # a flag that does not fit the store: say so, no traceback
        raise SystemExit(str(exc)) from None
    if args.also_other_sync and store.kind != "sqlite":
        store.stop()
        raise SystemExit("--also-other-sync compares SQLite settings: it needs --storage sqlite")
    try:
        await store.start()
        await run_bench(args, workdir, base_folder, store)
    finally:
        store.stop()


async def run_bench(args: argparse.Namespace, workdir: str, base_folder: str, store: Store) -> None:
    server_env, cores = cores_plan(args.pin and args.gateway_workers == 1)
    if args.gateway_workers > 1:
        cores += f"; the gateway: {args.gateway_workers} worker processes (judgefuse serve --workers)"
    stub_proc, line = spawn("--serve-stub", str(free_port()), str(args.latency_ms))
    stub_url = line.split(" ", 1)[1]
    delay_s = args.latency_ms / 1000
    procs: list[subprocess.Popen] = [stub_proc]

    pids: dict[str, int] = {}

    def gateway(sync: str, folder: str, storage_url: str, workers: int | None = None) -> str:
        """A gateway process; ``workers`` (for (g)) overrides ``--gateway-workers`` and leaves
        it unpinned."""
        port = free_port()
        env = server_env if workers is None else {}
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--serve-gateway", str(port), stub_url, str(args.judges), folder,
             storage_url],
            env={**os.environ, "BENCH_SQLITE_SYNC": sync, **env,
                 "BENCH_GATEWAY_WORKERS": str(workers or args.gateway_workers)},
        ))
        url = f"http://127.0.0.1:{port}"
        pids[url] = procs[-1].pid
        owners[url] = procs[-1]
        return url

    owners: dict[str, subprocess.Popen] = {}

    def scaled(workers: int) -> str:
        folder = tempfile.mkdtemp(prefix=f"gw-workers-{workers}-", dir=workdir)
        url = store.url if store.kind != "sqlite" else sqlite_url(folder)
        return gateway(args.sqlite_sync, folder, url, workers)

    def stop(url: str) -> None:
        proc = owners[url]
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()

    base = gateway(args.sqlite_sync, base_folder, store.url)
    other_sync = "NORMAL" if args.sqlite_sync == "FULL" else "FULL"
    other = None
    if args.also_other_sync:
        folder = tempfile.mkdtemp(prefix=f"gw-{other_sync.lower()}-", dir=workdir)
        other = gateway(other_sync, folder, sqlite_url(folder))
    bare_port = free_port()
    bare_proc, _ = spawn("--serve-bare", str(bare_port), stub_url, str(args.judges), env=server_env)
    procs.append(bare_proc)
    bare = f"http://127.0.0.1:{bare_port}"
    pids[bare] = bare_proc.pid
    proxy = None
    if args.anchor == "litellm-proxy":
        proxy_port = free_port()
        procs.append(start_litellm_proxy(proxy_port, stub_url, workdir, server_env.get(SERVER_CPU_ENV),
                                         args.litellm_venv))
        proxy = f"http://127.0.0.1:{proxy_port}"
        pids[proxy] = procs[-1].pid
    try:
        await wait_http(base + "/readyz", timeout=300)  # a gateway starts slowly on a busy machine
        if other is not None:
            await wait_http(other + "/readyz")
        if proxy is not None:
            await wait_http(proxy + "/health/liveliness", timeout=180)
        print(f"cores: {os.cpu_count()}; judges: {args.judges} (SC, the direct path); judge latency "
              f"{args.latency_ms:g} ms; {describe(store, args.sqlite_sync)}; "
              f"{args.seconds:g} s per point; load average {os.getloadavg()[0]:.1f} at the start; {cores}")
        f50, f90 = fsync_ms(workdir)
        floor = {
            "sqlite": "the floor of every synchronous=FULL commit; judgefuse's timings.store_s below includes it",
            "postgres": "the floor of the WAL flush a synchronous_commit=on commit waits for",
            "redis": "Redis's AOF fsyncs once a second, off the request path",
        }.get(store.kind, "the store's own durability decides whether a commit waits for one")
        print(f"disk: one fsync after a 4 KiB append p50 {f50:.2f} ms, p90 {f90:.2f} ms ({floor})")
        conc = args.concurrency
        FUSE["votes"] = fuse_votes(args.judges)

        if args.only_fuse:  # /v1/fuse alone: its max (or --fuse-max), then 50% and 150% of it
            if args.fuse_max > 0:
                fuse_max = args.fuse_max
                print(f"\n/v1/fuse only, its max given: {fuse_max:g}/s (load average {os.getloadavg()[0]:.1f})")
            else:
                print(f"\n/v1/fuse only (load average {os.getloadavg()[0]:.1f})")
                fu = await max_rate(Target("fuse", base + "/v1/fuse", FUSE, pid=pids[base]), conc,
                                    args.seconds, Measured("judgefuse /v1/fuse"))
                show_points(fu)
                fuse_max = fu.max_rate
            fl = await levels("judgefuse /v1/fuse", Target("fuse", base + "/v1/fuse", FUSE, pid=pids[base]), fuse_max,
                              (0.5, 1.5), args.seconds, 0.0, lag_from=base)
            print(fuse_targets(fl))
            return
        if args.only_scrape:  # (h) alone at a given rate: A/B runs on a busy machine
            print(f"\n(h) /metrics scraped every {args.scrape_every:g} s under /v1/judge at "
                  f"{args.scrape_rate:g}/s (load average {os.getloadavg()[0]:.1f})")
            await scrape_lag(base, args.scrape_rate, args.seconds, delay_s, args.scrape_votes,
                             args.scrape_every)
            return
        if args.only_refit and args.refit_rate > 0:  # (f) alone at a given rate: A/B runs on a busy machine
            print(f"\n(f) loop lag under /v1/judge at {args.refit_rate:g}/s (given), without and with the "
                  f"largest allowed refit running back to back in the background "
                  f"(load average {os.getloadavg()[0]:.1f})")
            await refit_lag(base, args.refit_rate, args.seconds, delay_s, args.refit_labels)
            return
        print(f"\n(a) max sustained verdicts/s (closed loop, no errors), {args.judges} judges")
        jf = await max_rate(Target("judgefuse /v1/judge", base + "/v1/judge", pid=pids[base]), conc, args.seconds,
                            Measured("judgefuse /v1/judge"), recheck=not args.only_refit)
        show_points(jf)
        if args.only_refit:  # (f) alone, at half of the max just measured
            print(f"\n(f) loop lag under /v1/judge at 50% of its max ({jf.max_rate / 2:.1f}/s), without and "
                  f"with the largest allowed refit running back to back in the background "
                  f"(load average {os.getloadavg()[0]:.1f})")
            await refit_lag(base, jf.max_rate / 2, args.seconds, delay_s, args.refit_labels)
            return
        bm = await max_rate(Target("bare", bare + "/v1/judge", pid=pids[bare]), conc, args.seconds,
                            Measured("bare aiohttp fan-out"), recheck=True)
        show_points(bm)
        fu = await max_rate(Target("fuse", base + "/v1/fuse", FUSE, pid=pids[base]), conc, args.seconds,
                            Measured("judgefuse /v1/fuse"), recheck=True)
        show_points(fu)
        om = None
        if other is not None:
            om = await max_rate(Target("other", other + "/v1/judge", pid=pids[other]), conc, args.seconds,
                                Measured(f"judgefuse sync={other_sync}"))
            show_points(om)
        print(f"    max: judgefuse /v1/judge {jf.max_rate:.1f}/s = {ratio(jf.max_rate, bm.max_rate)} the bare "
              f"fan-out's {bm.max_rate:.1f}/s (target >= 0.6x: {met(jf.max_rate >= 0.6 * bm.max_rate)}); "
              f"/v1/fuse {fu.max_rate:.1f}/s"
              + (f"; judgefuse with synchronous={other_sync}: {om.max_rate:.1f}/s" if om else ""))

        print(f"\n(b) open loop at {', '.join(f'{f:.0%}' for f in FRACTIONS)} of each one's max "
              f"({args.seconds:g} s each; latency counted from the scheduled send; client timeout "
              f"{CLIENT_TIMEOUT_S:g} s; {cores})")
        jl = await levels("judgefuse /v1/judge", Target("jf", base + "/v1/judge", pid=pids[base]), jf.max_rate, FRACTIONS,
                          args.seconds, delay_s, lag_from=base)
        bl = await levels("bare fan-out", Target("bare", bare + "/v1/judge", pid=pids[bare]), bm.max_rate, FRACTIONS,
                          args.seconds, delay_s)
        half = jf.max_rate / 2
        bare_same = (await levels("bare fan-out", Target("bare", bare + "/v1/judge", pid=pids[bare]), half, (1.0,),
                                  args.seconds, delay_s))[1.0]
        print(f"    {'':<28} (the last: the bare fan-out at judgefuse's 50% rate, for the ratio below)")
        fl = await levels("judgefuse /v1/fuse", Target("fuse", base + "/v1/fuse", FUSE, pid=pids[base]), fu.max_rate,
                          (*FRACTIONS, 1.5), args.seconds, 0.0, lag_from=base)
        absorb(jf, jl[0.5], half, delay_s)
        absorb(bm, bl[0.5], bm.max_rate / 2, delay_s)
        absorb(fu, fl[0.5], fu.max_rate / 2, 0.0)
        if om is not None:
            await overhead_at(Target("other", other + "/v1/judge"), om.max_rate / 2, args.seconds, delay_s, om)
            show_overhead(om, "  (at half its own max)")
        show_targets(jf, bm, jl, bare_same, fl, delay_s)

        n, size, what = await store.bytes_per_verdict()
        per_verdict = size / max(n, 1)
        print(f"\n(e) bytes per verdict ({store.kind}): {per_verdict:,.0f} B over {n:,} stored "
              f"verdicts ({args.judges} judges, one-line prompt); {what}")

        if args.refit_labels > 0:
            print(f"\n(f) loop lag under /v1/judge at 50% of its max ({half:.1f}/s), without and with "
                  "the largest allowed refit running back to back in the background")
            await refit_lag(base, half, args.seconds, delay_s, args.refit_labels)

        anchor: list[Measured] = []
        if proxy is not None:
            anchor = await anchor_run(args, base, bare, proxy, delay_s, pids)

        scaling: list[tuple[int, Measured, Measured]] = []
        if args.scaling:
            print(f"\n(g) judgefuse serve --workers N, closed-loop max (not pinned: every process may "
                  f"use both cores; {args.scaling_seconds:g} s a point at concurrency "
                  f"{' '.join(map(str, args.concurrency))}; load average {os.getloadavg()[0]:.1f})")
            scaling = await workers_scaling(args, scaled, stop, args.scaling_seconds, pids)

        if args.labels > 0:
            print(f"\n(c) calibration query with {args.labels:,} labelled verdicts' fields in the store")
            cal = await calibration_bench(base, store.url, args.labels)
            print(f"    stored {cal['items']:,.0f} items ({cal['fine_bins_filled']:.0f} fine-bin counters, "
                  f"24 hour buckets; built and written in {cal['build_s']:.1f} s)")
            print(f"    GET /v1/calibration (all time + 24 h window, over HTTP): {cal['http_ms']:.2f} ms median "
                  f"(target < 10 ms: {met(cal['http_ms'] < 10)})")
            print(f"    GET /v1/calibration?window_hours=0 (all time only, over HTTP): "
                  f"{cal['http_total_only_ms']:.2f} ms median (target < 10 ms: {met(cal['http_total_only_ms'] < 10)})")
            print(f"    GET /v1/calibration?population=false (all time + 24 h window, the panel structure "
                  f"kept): {cal['http_no_population_ms']:.2f} ms median")
            print(f"    GET /v1/calibration?population=false&structure=false (all time + 24 h window, the "
                  f"labelled fields only): {cal['http_lean_ms']:.2f} ms median "
                  f"(target < 10 ms: {met(cal['http_lean_ms'] < 10)})")
            print(f"    in process: report {cal['report_ms']:.2f} ms = read total {cal['read_total_ms']:.2f} ms"
                  f" + read window {cal['read_window_ms']:.2f} ms + metrics x2 ({cal['metrics_ms']:.2f} ms each)")

        print(f"    load average at the end {os.getloadavg()[0]:.1f}")
        print(f"\nsummary (one run, {describe(store, args.sqlite_sync)}, {per_verdict:,.0f} B per verdict; "
              "ratios are to the bare aiohttp fan-out of the same load)")
        print(f"    {'server':<34} {'max/s':>8} {'x bare':>7} {'CPU ms/req':>10} {'p50 ms':>8} {'p99 ms':>8}  at"
              "  (p50/p99: latency - slowest judge call, open loop at 50% of the row's own max)")
        rows = [(jf, bm), (bm, bm), (fu, bm)] + ([(om, bm)] if om else [])
        rows += [(m, anchor[1]) for m in anchor]
        rows += [(m, bm) for _, jm, fm in scaling for m in (jm, fm)]
        for m, floor in rows:
            p50, p99 = m.overhead("call")
            print(f"    {m.name:<34} {m.max_rate:8.1f} {ratio(m.max_rate, floor.max_rate):>7} {m.cpu_ms:10.2f} "
                  f"{p50:8.2f} {p99:8.2f}  {m.at_rate:.1f}/s  errors {m.errors}")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def describe(store: Store, sqlite_sync: str) -> str:
    """The store and its durability setting, for the headings."""
    if store.kind == "sqlite":
        return f"storage sqlite, synchronous={sqlite_sync} (the default: FULL)"
    if store.kind == "redis":
        return "storage redis" + (", AOF everysec" if store.proc is not None else "")
    if store.kind == "postgres":
        return "storage postgres, synchronous_commit=" + ("off" if store.async_commit else "on (the default)")
    return f"storage {store.kind}"


async def fuse_batches(base: str, n: int, items: Callable[[int, int], list[dict]], what: str, *,
                       force_close: bool = False) -> None:
    """``n`` items through ``/v1/fuse/batch``, 200 a request (``items(first, count)`` makes
    each batch); any failure stops the benchmark naming ``what``."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600),
                                     connector=aiohttp.TCPConnector(force_close=force_close)) as session:
        for first in range(0, n, 200):
            body = {"items": items(first, min(200, n - first))}
            async with session.post(base + "/v1/fuse/batch", json=body) as response:
                out = await response.json()
            if response.status != 200 or out["n_failed"]:
                raise SystemExit(f"{what} failed: {str(out)[:300]}")


async def refit_lag(base: str, rate: float, seconds: float, delay_s: float, labels: int) -> None:
    """(f) The loop's lag under ``/v1/judge`` at ``rate`` (50% of its max), without and with
    refits of the largest allowed model running back to back in the background: ``labels``
    labelled verdicts of :data:`REFIT_PANEL` stored first, then, during the second run, one
    more label and ``POST /v1/fusion/refit`` in a loop (each refit has a new label to fit); a
    third run after the refits ended (the model promoted, no refit running) tells the refit's
    own cost from what follows a promotion. The load is the 5-judge panel's, not
    :data:`REFIT_PANEL`'s: the promoted model scores none of its verdicts."""
    rng = random.Random(1)
    timeout = aiohttp.ClientTimeout(total=600)
    started = time.perf_counter()
    # a new connection per batch: two runs at load ~20 failed here with ServerDisconnectedError
    # (a kept-alive connection the server had closed, presumably)
    await fuse_batches(base, labels, lambda first, n: [labelled_item(i, rng) for i in range(first, first + n)],
                       "(f): storing the labelled verdicts", force_close=True)
    print(f"    {labels:,} labelled verdicts of panel {REFIT_PANEL!r} stored in "
          f"{time.perf_counter() - started:.1f} s (13 external judges, 16 signals a vote)")
    next_label = [labels]

    async def refits(stop: asyncio.Event, runs: list[tuple[float, str, str]]) -> None:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while not stop.is_set():
                item = labelled_item(next_label[0], rng)
                next_label[0] += 1
                async with session.post(base + "/v1/fuse", json=item) as response:
                    await response.read()
                began = time.perf_counter()
                async with session.post(base + "/v1/fusion/refit", json={"panel": REFIT_PANEL}) as response:
                    out = await response.json()
                runs.append((time.perf_counter() - began, str(out.get("status")), str(out.get("reason"))))

    for phase in ("no refit", "with refits", "after the refits"):
        background = phase == "with refits"
        stop = asyncio.Event()
        runs: list[tuple[float, str, str]] = []
        task = asyncio.create_task(refits(stop, runs)) if background else None
        before = await lag_buckets(base)
        run = await open_loop_run(base + "/v1/judge", rate, seconds)
        after = await lag_buckets(base)
        stop.set()
        if task is not None:
            await task
        print(level_line(f"/v1/judge, {phase}", "50%", rate, run, delay_s))
        print(f"    {'':<28} {lag_summary(before, after)}")
        print(f"    {'':<28} where the time went, p50/p99 ms: {breakdown_line(run)}")
        if runs:
            took = sorted(r[0] for r in runs)
            print(f"    {'':<28} refits: {len(runs)} back to back, {took[0]:.2f}-{took[-1]:.2f} s each; "
                  f"statuses {sorted({r[1] for r in runs})}; the first: {runs[0][2][:160]}")


async def scrape_lag(base: str, rate: float, seconds: float, delay_s: float, votes: int,
                     every_s: float) -> None:
    """(h) ``/v1/judge`` at ``rate`` without and with a scraper reading ``/metrics`` every
    ``every_s``: the loop's lag, the latency and the scrapes' own time. ``votes`` verdicts of
    the external panel are fused first (``/v1/fuse/batch``), so each judge's vote-drift
    detector holds that many votes, as on a gateway that has served them (a report's cost
    grows with them: ~90 ms a judge at 10,000)."""
    started = time.perf_counter()
    await fuse_batches(base, votes, lambda _first, n: [FUSE] * n, "(h): fusing the votes")
    print(f"    {votes:,} verdicts of panel {FUSE['panel']!r} fused in {time.perf_counter() - started:.1f} s "
          f"({len(FUSE['votes'])} judges' vote drift each hold {votes:,} votes)")

    async def scraper(stop: asyncio.Event, took: list[float]) -> None:
        async with aiohttp.ClientSession() as session:
            while not stop.is_set():
                began = time.perf_counter()
                async with session.get(base + "/metrics") as response:
                    await response.read()
                took.append(time.perf_counter() - began)
                await asyncio.sleep(max(0.0, every_s - (time.perf_counter() - began)))

    for scraping in (False, True):
        stop = asyncio.Event()
        took: list[float] = []
        task = asyncio.create_task(scraper(stop, took)) if scraping else None
        before = await lag_buckets(base)
        run = await open_loop_run(base + "/v1/judge", rate, seconds)
        stop.set()
        if task is not None:
            await task
        after = await lag_buckets(base)
        name = f"scrape every {every_s:g} s" if scraping else "no scraper"
        print(level_line(f"/v1/judge, {name}", "", rate, run, delay_s))
        print(f"    {'':<28} {lag_summary(before, after)}")
        if took:
            print(f"    {'':<28} scrapes: {len(took)}, each p50 {pct(took, 50) * 1e3:.1f} ms, "
                  f"max {max(took) * 1e3:.1f} ms")


async def workers_scaling(args: argparse.Namespace, start: Callable[[int], str],
                          stop: Callable[[str], None], seconds: float,
                          pids: dict[str, int]) -> list[tuple[int, Measured, Measured]]:
    """(g) ``judgefuse serve --workers N`` for each N of ``args.scaling``: the closed-loop max of
    ``/v1/judge`` and ``/v1/fuse``, nothing pinned (the workers, the generator and the stub
    share both cores)."""
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    out = []
    for n in args.scaling:
        url = start(n)
        await wait_http(url + "/readyz")
        jm = await max_rate(Target("jf", url + "/v1/judge", pid=pids[url]), args.concurrency, seconds,
                            Measured(f"workers {n}: /v1/judge"))
        fm = await max_rate(Target("fuse", url + "/v1/fuse", FUSE, pid=pids[url]), args.concurrency,
                            seconds, Measured(f"workers {n}: /v1/fuse"))
        out.append((n, jm, fm))
        print(f"    --workers {n}: /v1/judge {jm.max_rate:7.1f}/s (CPU {jm.cpu_ms:.2f} ms a request, all "
              f"processes), /v1/fuse {fm.max_rate:7.1f}/s (CPU {fm.cpu_ms:.2f} ms); points "
              + ", ".join(f"{c}: {r:.0f}/{q:.0f}" for (c, r, _), (_, q, _) in zip(jm.points, fm.points, strict=True))
              + " (concurrency: judge/fuse per s)", flush=True)
        stop(url)
    if len(out) > 1:
        (n0, j0, f0), (n1, j1, f1) = out[0], out[-1]
        print(f"    {n1} workers / {n0}: /v1/judge {ratio(j1.max_rate, j0.max_rate)}, /v1/fuse "
              f"{ratio(f1.max_rate, f0.max_rate)}")
    return out


async def anchor_run(args: argparse.Namespace, base: str, bare: str, proxy: str, delay_s: float,
                     pids: dict[str, int]) -> list[Measured]:
    """(d) One judge call per request: judgefuse (a one-judge panel), the bare fan-out (one
    call) and LiteLLM's proxy (``/chat/completions``), same stub, same delay, same load."""
    body = {"model": "judge0", "messages": [{"role": "user", "content": json.dumps(PAIR)}]}
    targets = [
        Target("judgefuse /v1/judge, 1 judge", base + "/v1/judge", {**PAIR, "panel": "bench-1"},
               pid=pids[base]),
        Target("bare fan-out, 1 call", bare + "/v1/judge1", pid=pids[bare]),
        Target(f"LiteLLM proxy {args.proxy_version}", proxy + "/chat/completions", body,
               {**JSON_HEADERS, "Authorization": f"Bearer {PROXY_KEY}"}, pid=pids[proxy]),
    ]
    print("\n(d) the anchor: one judge call per request, judgefuse vs LiteLLM's proxy (1 worker)")
    measured = []
    for t in targets:
        m = await max_rate(t, args.concurrency, args.seconds, Measured(t.name))
        show_points(m)
        measured.append(m)
    common = min(m.max_rate for m in measured) / 2
    print(f"    overhead at a rate all three sustain (half the smallest max, {common:.1f}/s):")
    for t, m in zip(targets, measured, strict=True):
        await overhead_at(t, common, args.seconds, delay_s, m)
        show_overhead(m)
    jf, floor, lite = measured
    print(f"    judgefuse / LiteLLM proxy: max rate {ratio(jf.max_rate, lite.max_rate)}, overhead p50 "
          f"{ratio(jf.overhead('stub')[0], lite.overhead('stub')[0])}, p99 "
          f"{ratio(jf.overhead('stub')[1], lite.overhead('stub')[1])} (latency - stub delay, same rate)")
    print(f"    judgefuse / bare: max rate {ratio(jf.max_rate, floor.max_rate)}; LiteLLM proxy / bare: "
          f"{ratio(lite.max_rate, floor.max_rate)}")
    return measured


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-stub":
        serve_stub(int(sys.argv[2]), float(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-gateway":
        folder = sys.argv[5]  # the store's URL is optional (profile_gateway.py passes none: SQLite)
        storage_url = sys.argv[6] if len(sys.argv) > 6 else sqlite_url(folder)
        serve_gateway(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), folder, storage_url)
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
    parser.add_argument("--sqlite-sync", choices=["FULL", "NORMAL"], default="FULL",
                        help="the gateway's SQLite durability (default FULL, the product's default)")
    parser.add_argument("--also-other-sync", action="store_true",
                        help="also measure a second gateway with the other setting (NORMAL beside FULL)")
    parser.add_argument("--anchor", choices=["none", "litellm-proxy"], default="none",
                        help="also measure LiteLLM's proxy on the same stub and load (needs the bench extra)")
    parser.add_argument("--litellm-venv", default=os.environ.get("LITELLM_PROXY_VENV"),
                        help="a virtualenv holding litellm[proxy] for --anchor litellm-proxy "
                             "(default $LITELLM_PROXY_VENV; else this environment's bench extra)")
    parser.add_argument("--refit-labels", type=int, default=1000,
                        help="(f): labelled verdicts stored before the refits in the background "
                             "(0: skip (f))")
    parser.add_argument("--only-refit", action="store_true",
                        help="only the /v1/judge closed-loop max and (f) at half of it (refit A/B runs)")
    parser.add_argument("--refit-rate", type=float, default=0.0,
                        help="with --only-refit: (f) at this many requests/s, no max measured (0: half the max)")
    parser.add_argument("--only-fuse", action="store_true",
                        help="only /v1/fuse: its closed-loop max (or --fuse-max), then open loop at "
                             "50%% and 150%% of it, and its two targets")
    parser.add_argument("--fuse-max", type=float, default=0.0,
                        help="with --only-fuse: take this as the max, measure none (A/B runs)")
    parser.add_argument("--only-scrape", action="store_true",
                        help="only (h): /v1/judge at --scrape-rate without and with a /metrics "
                             "scraper every --scrape-every s, after --scrape-votes fused verdicts")
    parser.add_argument("--scrape-rate", type=float, default=150.0)
    parser.add_argument("--scrape-every", type=float, default=1.0)
    parser.add_argument("--scrape-votes", type=int, default=10_000)
    parser.add_argument("--scaling", type=int, nargs="*", default=[],
                        help="(g): judgefuse serve --workers N for each N given (e.g. 1 2)")
    parser.add_argument("--scaling-seconds", type=float, default=4.0)
    parser.add_argument("--storage", default="sqlite",
                        help="sqlite (default) | redis | postgres (a throwaway server) | a storage URL")
    parser.add_argument("--gateway-workers", type=int, default=1,
                        help="judgefuse serve --workers N for the gateway (N > 1: not pinned, "
                             "every server process may use every core)")
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="do not pin the servers and the load generator to their own cores")
    parser.add_argument("--pg-async-commit", action="store_true",
                        help="with --storage postgres: synchronous_commit=off, the analogue of "
                             "SQLite NORMAL / Redis everysec (a crash may lose the last commits)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
