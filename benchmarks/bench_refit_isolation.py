"""Refit isolation: another tenant's ``/healthz`` and ``/v1/judge`` latency while one tenant's
refit with the largest allowed feature set runs, next to the same with no refit
(docs/design.md, 'Bounded learning').

    python benchmarks/bench_refit_isolation.py [--labels 4000] [--seconds 12] \
        [--out benchmarks/results/refit_isolation.txt]

Setup (one gateway process, SQLite, 2 tenants): tenant A's panel has 13 ``external: true``
judges; it posts ``--labels`` labelled verdicts through ``/v1/fuse/batch``, every vote carrying
the most signals a vote may (``max_signals_per_vote`` = 16): 12 names every vote shares and 4
fresh names per vote (the attack that once made a 6,400-feature model). The refit keeps the 16
most common names per judge: 13 x (3 + 16) = 247 features, the most ``refit_max_features``
(256) allows for 13 judges. Tenant B's panel has 3 model judges on a loopback OpenAI stub
(20 ms a call); tenant B runs a closed loop of 4 ``/v1/judge`` and 2 ``/healthz`` clients.

Phases, each ``--seconds`` long, on the same gateway:

* ``idle``: tenant B alone;
* ``refit``: tenant A's manual refits back to back (``POST /v1/fusion/refit``; one new label
  before each, so no refit is answered "refitted already") while tenant B's loop runs.

Two gateways are measured: ``process`` (the product: each refit in a budgeted worker
process, :mod:`judgefuse.service.learning.refit_worker`) and ``thread`` (the same capped job in
a thread of the gateway, as refits ran before: ``BENCH_REFIT_IN_THREAD=1``). The gateway's RSS
is read from ``/proc`` before and after. Printed: p50 / p99 / max per phase and endpoint, the
refits' count, duration and outcome.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import free_port, serve_stub  # noqa: E402  - the sibling module, run as a script

KEYS = {"tenant-a": "bench-key-a-000000001", "tenant-b": "bench-key-b-000000002"}
EXT_JUDGES = [f"e{i:02d}" for i in range(13)]
SHARED_SIGNALS = [f"s{k}" for k in range(12)]
PAIR = {"question": "Which answer is correct: what is 2+2?", "answer_a": "4", "answer_b": "5"}


class InThread:
    """``RefitWorkers`` stand-in: the job in a thread of the gateway (how refits ran before)."""

    async def run(self, fn, *args):  # type: ignore[no-untyped-def]
        return await asyncio.to_thread(fn, *args)

    @contextlib.asynccontextmanager
    async def session(self, fn, *args):  # type: ignore[no-untyped-def]
        """A generator job (the refit reads its labels, then asks to fit), driven in a thread."""
        yield _ThreadJob(fn(*args))


class _ThreadJob:
    def __init__(self, job) -> None:  # type: ignore[no-untyped-def]
        self.job = job

    async def question(self):  # type: ignore[no-untyped-def]
        return await asyncio.to_thread(next, self.job)

    async def result(self, answer):  # type: ignore[no-untyped-def]
        def finish():  # type: ignore[no-untyped-def]
            try:
                self.job.send(answer)
            except StopIteration as done:
                return done.value
            raise RuntimeError("the refit job asked a second question")

        return await asyncio.to_thread(finish)


def serve_gateway(port: int, stub_url: str, workdir: str) -> None:
    import logging

    import uvicorn

    from judgefuse.service.app import create_app
    from judgefuse.service.settings import Settings

    work = Path(workdir)
    ext = work / "panel-ext.yaml"
    ext.write_text("name: ext\nfusion: mean_probability\nquorum: 1\njudges:\n"
                   + "".join(f"  - {{name: {j}, external: true}}\n" for j in EXT_JUDGES))
    model = work / "panel-model.yaml"
    model.write_text("name: model\nfusion: majority\nquorum: 1\ndeadline_s: 60\njudges:\n" + "".join(
        f"  - name: j{i}\n    model: openai/j{i}\n    backend: direct\n    api_base: {stub_url}\n"
        f"    mode: sc\n    timeout_s: 30\n    retries: {{attempts: 1, base_delay_s: 0, max_delay_s: 0}}\n"
        for i in range(3)))
    settings = Settings(
        storage_url=f"sqlite:///{work / 'bench.sqlite3'}", panels=[ext, model],
        api_keys={t: hashlib.sha256(k.encode()).hexdigest() for t, k in KEYS.items()},
        refit_every_labels=0, min_labels_for_refit=50, max_body_bytes=64 * 1024 * 1024,
        max_batch_items=200,
    )
    logging.getLogger("judgefuse.service").setLevel(logging.ERROR)
    app = create_app(settings)
    if os.environ.get("BENCH_REFIT_IN_THREAD") == "1":
        original = app.router.lifespan_context

        from contextlib import asynccontextmanager

        @asynccontextmanager
        async def lifespan(app_):  # type: ignore[no-untyped-def]
            async with original(app_) as state:
                bounds = app_.state.gateway.learning.refit_bounds
                object.__setattr__(bounds, "workers", InThread())
                yield state

        app.router.lifespan_context = lifespan
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# ----------------------------------------------------------------------------- the load
def labelled_item(i: int, rng: random.Random) -> dict:
    truth = "A" if rng.random() < 0.5 else "B"
    votes = []
    for k, judge in enumerate(EXT_JUDGES):
        right = rng.random() < 0.6 + 0.02 * k
        choice = truth if right else ("B" if truth == "A" else "A")
        confidence = round(0.55 + 0.4 * rng.random(), 4)
        signals = {name: round(rng.gauss(0, 1), 4) for name in SHARED_SIGNALS}
        signals.update({f"fresh-{i}-{n}": 1.0 for n in range(4)})
        votes.append({"judge": judge, "choice": choice, "confidence": confidence, "signals": signals})
    return {**PAIR, "panel": "ext", "id": f"lab-{i}", "label": truth, "votes": votes}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def tenant_b_loop(client: httpx.AsyncClient, path: str, stop: asyncio.Event, out: list[float],
                        errors: list[str]) -> None:
    """Closed loop; every answer's latency counts, a non-200 is also listed in ``errors``."""
    headers = {"Authorization": f"Bearer {KEYS['tenant-b']}"}
    while not stop.is_set():
        started = time.perf_counter()
        if path == "/healthz":
            r = await client.get(path)
        else:
            r = await client.post(path, json={**PAIR, "panel": "model"}, headers=headers)
        if r.status_code != 200:
            errors.append(f"{path}: {r.status_code} {r.text[:120]}")
        out.append(time.perf_counter() - started)


async def phase(base: str, seconds: float, *, refits: bool, next_label: list[int]) -> dict:
    lat: dict[str, list[float]] = {"/healthz": [], "/v1/judge": []}
    errors: list[str] = []
    runs: list[tuple[float, str, str]] = []
    stop = asyncio.Event()
    limits = httpx.Limits(max_connections=32)
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as client:
        loops = [asyncio.create_task(tenant_b_loop(client, "/v1/judge", stop, lat["/v1/judge"], errors)) for _ in range(4)]
        loops += [asyncio.create_task(tenant_b_loop(client, "/healthz", stop, lat["/healthz"], errors)) for _ in range(2)]
        end = time.perf_counter() + seconds
        a = {"Authorization": f"Bearer {KEYS['tenant-a']}"}
        rng = random.Random(next_label[0])
        if refits:
            while time.perf_counter() < end:
                item = labelled_item(next_label[0], rng)
                next_label[0] += 1
                r = await client.post("/v1/fuse", json=item, headers=a)
                assert r.status_code == 200, r.text
                started = time.perf_counter()
                r = await client.post("/v1/fusion/refit", json={"panel": "ext"}, headers=a)
                out = r.json()
                runs.append((time.perf_counter() - started, out["status"], out["reason"]))
        else:
            await asyncio.sleep(seconds)
        stop.set()
        await asyncio.gather(*loops)
    return {"latency": lat, "refits": runs, "errors": errors}


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


async def measure(mode: str, args: argparse.Namespace, stub_url: str, lines: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-refit-") as workdir:
        port = free_port()
        env = dict(os.environ, BENCH_REFIT_IN_THREAD="1" if mode == "thread" else "0")
        gateway = subprocess.Popen([sys.executable, __file__, "--serve-gateway", str(port), stub_url, workdir],
                                   env=env)
        base = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(base_url=base, timeout=600) as client:
                for _ in range(3000):
                    if gateway.poll() is not None:
                        raise RuntimeError(f"the gateway exited ({gateway.returncode})")
                    try:
                        if (await client.get("/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.1)
                rng = random.Random(1)
                a = {"Authorization": f"Bearer {KEYS['tenant-a']}"}
                for first in range(0, args.labels, 200):
                    items = [labelled_item(i, rng) for i in range(first, min(first + 200, args.labels))]
                    r = await client.post("/v1/fuse/batch", json={"items": items}, headers=a)
                    assert r.status_code == 200 and r.json()["n_failed"] == 0, r.text[:500]
            rss_before = rss_mb(gateway.pid)
            next_label = [args.labels]
            idle = await phase(base, args.seconds, refits=False, next_label=next_label)
            busy = await phase(base, args.seconds, refits=True, next_label=next_label)
            rss_after = rss_mb(gateway.pid)
        finally:
            gateway.terminate()
            gateway.wait(timeout=30)
    lines.append(f"\n## refits in a {mode} ({args.labels} labels, 13 judges x (3 + 16 signals) = 247 features)")
    for name, result in (("idle", idle), ("refit", busy)):
        for path, values in result["latency"].items():
            ms = [v * 1000 for v in values]
            lines.append(f"{name:6s} {path:10s} n={len(ms):5d}  p50 {percentile(ms, 0.5):8.1f} ms  "
                         f"p99 {percentile(ms, 0.99):8.1f} ms  max {max(ms, default=float('nan')):8.1f} ms")
        if result["errors"]:
            lines.append(f"{name:6s} non-200 answers: {len(result['errors'])}, first: {result['errors'][0]}")
    runs = busy["refits"]
    if runs:
        durations = sorted(r[0] for r in runs)
        lines.append(f"refits: {len(runs)} back to back, {durations[0]:.2f}-{durations[-1]:.2f} s each; "
                     f"statuses {sorted({r[1] for r in runs})}")
        lines.append(f"first refit's reason: {runs[0][2]}")
    lines.append(f"gateway RSS: {rss_before:.0f} MB after the labels, {rss_after:.0f} MB after the refits")


async def main_async(args: argparse.Namespace) -> None:
    stub_port = free_port()
    stub = subprocess.Popen([sys.executable, __file__, "--serve-stub", str(stub_port)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert stub.stdout is not None and stub.stdout.readline().startswith("READY")
        stub_url = f"http://127.0.0.1:{stub_port}/v1"
        lines = [f"# bench_refit_isolation: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                 f"{os.cpu_count()} CPUs (shared), Python {sys.version.split()[0]}",
                 f"command: python benchmarks/bench_refit_isolation.py --labels {args.labels} "
                 f"--seconds {args.seconds} --modes {' '.join(args.modes)}",
                 "tenant B: 4 closed-loop /v1/judge clients (3 model judges, stub at 20 ms) + 2 /healthz clients"]
        for mode in args.modes:
            await measure(mode, args, stub_url, lines)
            print("\n".join(lines), flush=True)
    finally:
        stub.terminate()
        stub.wait(timeout=10)
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-stub":
        serve_stub(int(sys.argv[2]), 20.0)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-gateway":
        serve_gateway(int(sys.argv[2]), sys.argv[3], sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=int, default=4000)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--modes", nargs="+", default=["process", "thread"], choices=["process", "thread"])
    parser.add_argument("--out", default=None)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
