"""The crash-safety harness: start the scripted OpenAI stub, ``judgefuse serve`` and Redis as real
processes, drive concurrent labelled load, SIGKILL a process, restart it, and audit what was
acknowledged against what was stored (records, and accumulators recounted with the service's
own ``label_increments``).

What the crash tests prove with it, and on which backends, is said once, in
``tests/service/system/test_crash.py``; ``test_replicas.py`` and ``test_judge_kill_resume.py`` reuse it
by import (``tests`` is on pytest's pythonpath).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from jf_test_support.ports import free_port
from judgefuse.service.ledger import label_increments, traffic_increments
from judgefuse.service.storage import Storage

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
TENANT = "default"  # the gateways run open (no API key configured)
START_TIMEOUT_S = 60.0  # one gateway start (imports + panel) takes ~6 s here; generous for loaded CI

# The stub as a process: every judge answers SC JSON whose choice and confidence are a hash of
# (model, prompt), so the two judges disagree on some items and confidences spread over bins.
STUB_RUNNER = textwrap.dedent("""\
    import asyncio, hashlib, json, sys
    from jf_test_support import openai_stub as stub
    delay = float(sys.argv[1])

    def handler(body):
        digest = hashlib.sha256((body.get("model", "") + json.dumps(body.get("messages"))).encode()).digest()
        choice = "a" if digest[0] % 3 else "b"
        text = json.dumps({"selected_output": f"Output ({choice})",
                           "confidence_score": 50 + digest[1] % 51, "explanation": "scripted"})
        return stub.Reply(texts=text, delay_s=delay)

    async def main():
        server = stub.StubServer()
        server.record = False
        server.handler = handler
        await server.start(0)
        print("READY", server.url, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


# ------------------------------------------------------------------------------ processes
def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child: no inherited JUDGEFUSE_* setting, this checkout first."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("JUDGEFUSE_") or k == "JUDGEFUSE_REFIT_NICE"}  # tests/conftest.py
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), str(TESTS), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["JUDGEFUSE_LEARNING__REFIT_EVERY_LABELS"] = "0"  # no background refit: only labels move state
    env["JUDGEFUSE_SERVER__LOG_LEVEL"] = "warning"
    env.update(extra)
    return env


class Child:
    """A subprocess whose output goes to a log file; killed with SIGKILL and reaped by ``kill``."""

    def __init__(
        self, argv: list[str], log: Path, *, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        self.argv = argv
        self.log = log
        self._out = log.open("ab")
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self._out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except BaseException:
            self._out.close()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def tail(self, n: int = 4000) -> str:
        return f"--- {self.log.name} (last {n} chars) ---\n" + self.text()[-n:]

    async def wait_for(self, pattern: str, timeout: float, start: int = 0) -> re.Match[str]:
        """The first match of ``pattern`` in the log (from offset ``start``); fails on exit."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.text(), start)
            if match:
                return match
            if not self.alive():
                raise AssertionError(f"{self.argv[:4]} exited with {self.proc.returncode}\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not seen within {timeout} s\n{self.tail()}")
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL (no cleanup runs in the child) and reap. Safe to call twice."""
        try:
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)
        finally:
            self._out.close()


async def start_stub(tmp: Path, delay_s: float) -> tuple[Child, str]:
    child = Child(
        [sys.executable, "-c", STUB_RUNNER, str(delay_s)], tmp / "stub.log", env=child_env(), cwd=tmp
    )
    try:
        match = await child.wait_for(r"READY (\S+)", timeout=30)
    except BaseException:
        child.kill()
        raise
    return child, match.group(1)


def write_panel(tmp: Path, stub_url: str, *, judges: tuple[str, ...] = ("j1", "j2")) -> Path:
    entries = "".join(
        textwrap.dedent(f"""\
        - name: {j}
          model: openai/{j}
          backend: direct
          api_base: {stub_url}
          mode: sc
          timeout_s: 10
          retries: {{attempts: 1, base_delay_s: 0, max_delay_s: 0}}
        """)
        for j in judges
    )
    path = tmp / "panel.yaml"
    path.write_text(
        f"name: main\nfusion: majority\nquorum: {len(judges)}\ndeadline_s: 20\njudges:\n"
        + textwrap.indent(entries, "  "),
        encoding="utf-8",
    )
    return path


@dataclass
class Gateway:
    child: Child
    url: str


async def wait_ready(url: str, child: Child, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        while True:
            with suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(f"{url}/readyz") as r:
                    if r.status == 200:
                        return
            if not child.alive():
                raise AssertionError(f"gateway exited with {child.proc.returncode}\n{child.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{url}/readyz not 200 within {timeout} s\n{child.tail()}")
            await asyncio.sleep(0.05)


async def start_gateway(tmp: Path, name: str, storage_url: str, panel: Path, **env: str) -> Gateway:
    """``python -m judgefuse.cli serve`` on a free port (``--port 0``; the port is read from
    uvicorn's start line), open mode, ready (``/readyz`` 200) on return."""
    argv = [
        sys.executable,
        "-m",
        "judgefuse.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--storage",
        storage_url,
        "--panel",
        str(panel),
    ]
    # uvicorn's start line is logged at info: keep uvicorn's level, quieten nothing else
    child = Child(argv, tmp / f"{name}.log", env=child_env(JUDGEFUSE_SERVER__LOG_LEVEL="info", **env), cwd=tmp)
    try:
        match = await child.wait_for(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", START_TIMEOUT_S)
        url = match.group(1)
        await wait_ready(url, child, START_TIMEOUT_S)
    except BaseException:
        child.kill()
        raise
    return Gateway(child, url)


@contextmanager
def killing(*children: Child | Gateway | None) -> Iterator[list[Child | Gateway | None]]:
    """Kill every child given (and every one appended to the yielded list) on the way out."""
    extra: list[Child | Gateway | None] = []
    try:
        yield extra
    finally:
        for item in [*children, *extra]:
            if item is None:
                continue
            child = item.child if isinstance(item, Gateway) else item
            with suppress(Exception):
                child.kill()


# ------------------------------------------------------------------------------ redis
def redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


async def start_redis(workdir: Path, *flags: str, port: int | None = None, name: str = "redis") -> tuple[Child, int]:
    """redis-server on loopback with its data in ``workdir``; on a free port unless given
    (a restart reuses the port, so the running gateway reconnects to it)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server not installed (apt-get install redis-server)")
    workdir.mkdir(parents=True, exist_ok=True)
    for _attempt in range(3):
        use = port if port is not None else free_port()
        child = Child(
            [
                binary,
                "--port",
                str(use),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                str(workdir),
                "--logfile",
                "",
                *flags,
            ],
            workdir / f"{name}.log",
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and child.alive() and not redis_answers(use):
            await asyncio.sleep(0.02)
        if child.alive() and redis_answers(use):
            return child, use
        tail = child.tail()
        child.kill()
        if port is not None:
            raise AssertionError(f"redis-server did not restart on port {port}\n{tail}")
    raise AssertionError("could not start redis-server")


# ------------------------------------------------------------------------------ load
@dataclass
class Ledger:
    """What the clients were told (acknowledged) and what was in flight when a process died."""

    verdicts: dict[str, str | None] = field(default_factory=dict)
    """acknowledged verdict id -> its choice."""
    labels: dict[str, str] = field(default_factory=dict)
    """verdict id -> the last acknowledged label."""
    pending_verdicts: set[str] = field(default_factory=set)
    pending_labels: dict[str, str] = field(default_factory=dict)
    """verdict id -> a label sent but never acknowledged (in flight at the kill)."""
    label_acks: int = 0
    relabel_acks: int = 0
    inline_label_acks: int = 0
    failures_before_kill: list[str] = field(default_factory=list)
    overloaded_before_kill: int = 0
    """429s before the kill, each sent again after its ``Retry-After``."""
    errors_after_kill: int = 0
    statuses_after_kill: Counter[int] = field(default_factory=Counter)
    """HTTP statuses of the refused requests after the kill (a killed Redis: 503 only)."""
    inflight: int = 0
    inflight_at_kill: int = -1
    killed: bool = False


PAIR_TEXT = "Which answer is right? Item {i}: {w}"


async def drive(url: str, ledger: Ledger, stop: asyncio.Event, *, workers: int, prefix: str) -> None:
    """``workers`` clients, each looping: judge (a third with an inline label), then label the
    verdict by feedback (unless labelled inline), and relabel every fourth one. Returns when
    ``stop`` is set or the gateway stops answering."""
    timeout = aiohttp.ClientTimeout(total=30)
    connector = aiohttp.TCPConnector(limit=workers * 2)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

        async def send(path: str, body: dict[str, Any]) -> tuple[int, Any, float] | None:
            """(status, json, Retry-After seconds or 0) or None when the connection failed (the
            process died)."""
            ledger.inflight += 1
            try:
                async with session.post(url + path, json=body) as r:
                    data = await r.json(content_type=None)
                    return r.status, data, float(r.headers.get("Retry-After", 0))
            except (aiohttp.ClientError, TimeoutError, ValueError):
                if not ledger.killed:
                    ledger.failures_before_kill.append(f"{path}: connection failed before the kill")
                ledger.errors_after_kill += 1
                return None
            finally:
                ledger.inflight -= 1

        async def post(path: str, body: dict[str, Any]) -> tuple[int, Any] | None:
            """As a client should: a 429 before the kill (the gateway's backpressure on a slow
            machine; nothing was done) is sent again after its ``Retry-After``, capped at a
            second. It is counted, not a failure: this suite is about what a crash loses."""
            while True:
                result = await send(path, body)
                if result is None:
                    return None
                status, data, retry_after_s = result
                if status != 429 or ledger.killed or stop.is_set():
                    return status, data
                assert retry_after_s > 0, f"{path}: 429 without Retry-After: {data}"
                ledger.overloaded_before_kill += 1
                await asyncio.sleep(min(retry_after_s, 1.0))

        def refused(path: str, result: tuple[int, Any]) -> None:
            if ledger.killed:
                ledger.errors_after_kill += 1
                ledger.statuses_after_kill[result[0]] += 1
            else:
                ledger.failures_before_kill.append(f"{path}: {result[0]} {str(result[1])[:300]}")

        async def label(vid: str, letter: str) -> bool:
            ledger.pending_labels[vid] = letter
            result = await post("/v1/feedback", {"verdict_id": vid, "label": letter})
            if result is None:
                return False
            if result[0] != 200:
                refused("/v1/feedback", result)
                return not ledger.killed
            assert result[1]["label"] == letter, result
            relabel = vid in ledger.labels and ledger.labels[vid] != letter
            ledger.labels[vid] = letter
            del ledger.pending_labels[vid]
            ledger.label_acks += 1
            ledger.relabel_acks += relabel
            return True

        async def worker(w: int) -> None:
            i = 0
            while not stop.is_set():
                i += 1
                vid = f"{prefix}-w{w}-{i}"
                inline = ("A", "B")[(w + i) % 2] if i % 3 == 0 else None
                body: dict[str, Any] = {
                    "id": vid,
                    "question": PAIR_TEXT.format(i=i, w=w),
                    "answer_a": f"answer a {w}.{i}",
                    "answer_b": f"answer b {w}.{i}",
                }
                ledger.pending_verdicts.add(vid)
                if inline is not None:
                    body["label"] = inline
                    ledger.pending_labels[vid] = inline
                result = await post("/v1/judge", body)
                if result is None:
                    return
                if result[0] != 200:
                    refused("/v1/judge", result)
                    if ledger.killed:
                        continue
                    return
                data = result[1]
                assert data["id"] == vid, data
                ledger.verdicts[vid] = data["choice"]
                ledger.pending_verdicts.discard(vid)
                if inline is not None:
                    assert data["label"] == inline and data["feedback"]["status"] == "labelled", data
                    ledger.labels[vid] = inline
                    del ledger.pending_labels[vid]
                    ledger.label_acks += 1
                    ledger.inline_label_acks += 1
                elif stop.is_set() or not await label(vid, ("A", "B")[(w * 7 + i) % 2]):
                    continue
                if i % 4 == 0 and not stop.is_set():
                    await label(vid, "B" if ledger.labels[vid] == "A" else "A")

        await asyncio.gather(*(worker(w) for w in range(workers)))


@asynccontextmanager
async def load(url: str, *, workers: int = 12, prefix: str = "v") -> AsyncIterator[tuple[Ledger, asyncio.Event]]:
    """Run ``drive`` in the background; on exit stop it and wait for the clients (bounded)."""
    ledger, stop = Ledger(), asyncio.Event()
    task = asyncio.create_task(drive(url, ledger, stop, workers=workers, prefix=prefix))
    try:
        yield ledger, stop
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, timeout=40)
        except BaseException:
            task.cancel()
            with suppress(BaseException):
                await task
            raise


async def until(ledger: Ledger, *, verdicts: int, labels: int, max_s: float) -> None:
    """Wait until the ledger has that many acknowledged verdicts and labels (or ``max_s``)."""
    deadline = time.monotonic() + max_s
    while time.monotonic() < deadline:
        assert not ledger.failures_before_kill, ledger.failures_before_kill[:5]
        if len(ledger.verdicts) >= verdicts and ledger.label_acks >= labels and ledger.inflight > 0:
            return
        await asyncio.sleep(0.01)
    assert len(ledger.verdicts) >= 20, f"only {len(ledger.verdicts)} verdicts acknowledged in {max_s} s"


def sigkill_under_load(child: Child, ledger: Ledger) -> None:
    ledger.inflight_at_kill = ledger.inflight
    ledger.killed = True
    os.kill(child.pid, signal.SIGKILL)


# ------------------------------------------------------------------------------ checks
@dataclass
class Audit:
    verdicts_checked: int = 0
    labels_checked: int = 0
    lost_verdicts: list[str] = field(default_factory=list)
    lost_labels: list[str] = field(default_factory=list)
    in_flight_verdicts_present: int = 0
    in_flight_labels_present: int = 0


async def audit(url: str, ledger: Ledger) -> Audit:
    """GET every acknowledged verdict (and every one in flight at the kill) from the gateway."""
    out = Audit()
    sem = asyncio.Semaphore(16)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:

        async def get(vid: str) -> tuple[int, Any]:
            async with sem, session.get(f"{url}/v1/verdicts/{vid}") as r:
                return r.status, await r.json(content_type=None)

        async def check(vid: str) -> None:
            status, data = await get(vid)
            acked = vid in ledger.verdicts
            if status == 404 and not acked:
                return  # in flight at the kill and never stored: allowed
            if status != 200:
                if acked:
                    out.lost_verdicts.append(f"{vid}: GET {status}")
                    return
                raise AssertionError(f"{vid}: GET {status} {data}")
            if acked:
                out.verdicts_checked += 1
                if data["choice"] != ledger.verdicts[vid]:
                    out.lost_verdicts.append(f"{vid}: choice {data['choice']} != {ledger.verdicts[vid]}")
            else:
                out.in_flight_verdicts_present += 1
            stored = data["label"]
            allowed = {ledger.labels.get(vid), ledger.pending_labels.get(vid)} - {None}
            if vid in ledger.labels:
                out.labels_checked += 1
                if stored not in allowed:
                    out.lost_labels.append(f"{vid}: label {stored} (acknowledged {ledger.labels[vid]})")
                elif stored != ledger.labels[vid]:
                    out.in_flight_labels_present += 1  # a later relabel in flight got committed
            elif stored is not None:
                assert stored in allowed, (vid, stored, allowed)  # only what a client sent
                out.in_flight_labels_present += 1

        await asyncio.gather(*(check(v) for v in [*ledger.verdicts, *ledger.pending_verdicts]))
    return out


@dataclass
class Recount:
    labelled_records: int
    keys: int
    fields: int
    mismatches: list[str]
    decided_records: int = 0
    """Labelled records whose fused verdict chose an answer (an exact tie of a two-judge
    panel has no choice: it counts as an abstention of the method, not in its calibration)."""


async def recount(storage: Storage, tenant: str = TENANT, verdict_ids: Iterable[str] | None = None) -> Recount:
    """Stored accumulators (totals, and the sum of every hour bucket) against the sum of
    ``label_increments(record, record.label)`` over the stored labelled records, and the
    traffic counters (written with each verdict) against ``traffic_increments`` of every stored
    verdict among ``verdict_ids`` (None: all of them, i.e. the labelled ones in these tests);
    and each labelled record's label history against its label (the last entry is it)."""
    records = await storage.iter_labelled(tenant)
    expected: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for record in records:
        assert record.label is not None
        for key, fields in label_increments(record, record.label).items():
            for name, delta in fields.items():
                expected[key][name] += int(delta)
    stored = records
    if verdict_ids is not None:
        found = [await storage.get_verdict(tenant, vid) for vid in sorted(set(verdict_ids))]
        stored = [r for r in found if r is not None]
    for record in stored:
        if record.review is not None:
            verdict = record.verdict
            confidence = None if verdict.choice is None else verdict.confidence
            for key, fields in traffic_increments(record.panel, verdict.method, record.review, confidence).items():
                for name, delta in fields.items():
                    expected[key][name] += int(delta)
    keys = sorted(set(await storage.list_accumulators(tenant)) | set(expected))
    mismatches: list[str] = []
    n_fields = 0
    for key in keys:
        total = await storage.read_accumulator(tenant, key)
        hours = await storage.read_accumulator(tenant, key, since_hour=0)
        want = expected.get(key, {})
        for name in sorted(set(total) | set(hours) | set(want)):
            n_fields += 1
            got, by_hour, exp = total.get(name, 0), hours.get(name, 0), want.get(name, 0)
            if type(got) is not int or type(by_hour) is not int:
                mismatches.append(f"{key}.{name}: not an exact integer ({got!r}, {by_hour!r})")
            elif not got == by_hour == exp:
                mismatches.append(f"{key}.{name}: total {got}, hour buckets {by_hour}, recount {exp}")
    for record in records:  # written in the label's atomic step: its last entry is this label
        history = await storage.label_history(tenant, record.id)
        last = history[-1] if history else None
        if last is None or (last.label, last.at) != (record.label, record.labelled_at):
            mismatches.append(f"{record.id}: label {record.label} at {record.labelled_at}, "
                              f"history ends with {last}")
    decided = sum(1 for r in records if r.verdict.choice is not None)
    return Recount(len(records), len(keys), n_fields, mismatches, decided)


async def calibration_n(url: str) -> dict[str, int]:
    """``GET /v1/calibration``: all-time n per key."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        async with session.get(f"{url}/v1/calibration", params={"window_hours": "0"}) as r:
            assert r.status == 200, await r.text()
            body = await r.json()
    return {e["key"]: e["all_time"]["n"] for e in body["keys"] if e["all_time"] is not None}


async def settled_counts(
    url: str, open_storage: Callable[[], Storage], verdict_ids: Iterable[str], *, max_s: float = 60.0
) -> tuple[dict[str, int], Recount]:
    """The service's ``/v1/calibration`` counts and a storage recount taken while nothing moves.

    A request that was in flight when the store (or the gateway's connection to it) died may
    still commit after the restart: the gateway's handler waits on its pool and writes once the
    store is back, after the client has given up. Such a late label is allowed (it was never
    acknowledged, so it is one of the in-flight labels the audit may find), but read between the
    report and the recount it makes the two disagree by one. So the report is read before and
    after each recount, until both reads agree (the counters only grow here: no undo runs), and
    that recount is the one compared."""
    ids = list(verdict_ids)
    deadline = asyncio.get_running_loop().time() + max_s
    before = await calibration_n(url)
    while True:
        storage = open_storage()
        await storage.open()
        try:
            counted = await recount(storage, verdict_ids=ids)
        finally:
            await storage.close()
        after = await calibration_n(url)
        if after == before or asyncio.get_running_loop().time() > deadline:
            return after, counted
        before = after
        await asyncio.sleep(0.5)


def report(what: str, ledger: Ledger, result: Audit, counted: Recount) -> str:
    line = (
        f"{what}: {len(ledger.verdicts)} verdicts and {ledger.label_acks} labels acknowledged "
        f"({ledger.inline_label_acks} inline, {ledger.relabel_acks} relabels), "
        f"{ledger.inflight_at_kill} requests in flight at SIGKILL "
        f"({ledger.overloaded_before_kill} 429s before it, sent again); after restart "
        f"{result.verdicts_checked} verdicts and {result.labels_checked} labels checked, "
        f"lost {len(result.lost_verdicts)} verdicts and {len(result.lost_labels)} labels; "
        f"in-flight verdicts found {result.in_flight_verdicts_present}/{len(ledger.pending_verdicts)}, "
        f"in-flight labels found {result.in_flight_labels_present}/{len(ledger.pending_labels)}; "
        f"recount of {counted.labelled_records} labelled records over {counted.keys} keys / "
        f"{counted.fields} fields: {len(counted.mismatches)} mismatches"
    )
    print(line)
    return line


def assert_clean(ledger: Ledger, result: Audit, counted: Recount, n_calibrated: dict[str, int]) -> None:
    assert ledger.inflight_at_kill > 0, "the kill must land mid-stream"
    assert not result.lost_verdicts, result.lost_verdicts[:10]
    assert not result.lost_labels, result.lost_labels[:10]
    assert result.verdicts_checked == len(ledger.verdicts)
    assert result.labels_checked == len(ledger.labels)
    assert not counted.mismatches, counted.mismatches[:10]
    assert counted.labelled_records >= len(ledger.labels)
    # the service's own report counts each labelled verdict once (the method: each decided one)
    assert n_calibrated["method:majority:fused"] == counted.decided_records
    assert n_calibrated["judge:j1:sc"] == counted.labelled_records


# ------------------------------------------------------------------------------ tests
