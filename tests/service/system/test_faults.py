"""Fault injection through the real service over real HTTP on loopback.

A 3-judge panel (quorum 2) points at the scripted OpenAI stub, whose :class:`FaultPlan` injects
per judge, at configured rates and reproducibly from a seed: timeouts (hangs), 429 with
Retry-After, 500/502/503, connection resets, truncated bodies and garbage bodies. The app runs
under uvicorn; the judges are called by the direct path's HTTP/1.1 client (judges/transport/http1.py).

* the big run: >= 2,000 verdicts at concurrency 50 with ~30% of judge calls failing; every
  verdict is a 200 naming its failed judges (consistent with its votes) or a 503 whose JSON body
  gives a reason per judge; no 500; no verdict past the deadline (plus a small margin); retries
  of one vote stay within the judge's budget and never come sooner than a 429's Retry-After;
* Retry-After: a 429 "Retry-After: 1" then success is waited for (>= 1 s); one larger than the
  time left is not waited for (the vote fails within its budget, one request only);
* the per-request deadline bounds a retry storm and a hanging judge;
* the circuit breaker: a judge that always fails is cooled down (no requests reach the stub for
  the cooldown, its failure is named in each verdict) and comes back once the stub heals.

Run with ``-s`` to see the run's counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import textwrap
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from jf_test_support import app_support as S

from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.judge import Judge
from judgefuse.judges.types import PairwiseItem

stub_module = S.stub_module
FaultPlan = stub_module.FaultPlan

JUDGES = ("j1", "j2", "j3")
ANSWERS = {"j1": ("A", 90), "j2": ("A", 70), "j3": ("B", 60)}
CASE_RE = re.compile(r"case-(\d+)\b")

#: the big run's mix: 30% of judge calls fail, across every kind.
RATES = {
    "timeout": 0.03,
    "429": 0.06,
    "500": 0.04,
    "502": 0.03,
    "503": 0.04,
    "reset": 0.04,
    "truncated": 0.03,
    "garbage": 0.03,
}
#: what each kind becomes in a failed vote's reason (the transport's error classes).
REASON_OF = {
    "timeout": ("timeout", "JudgeTimeout"),
    "429": ("RateLimited",),
    "500": ("ServerError",),
    "502": ("ServerError",),
    "503": ("ServerError",),
    "reset": ("ConnectionFailed",),
    "truncated": ("ConnectionFailed",),
    "garbage": ("MalformedResponse",),
}


def ok_reply(body: dict[str, Any]) -> Any:
    choice, confidence = ANSWERS.get(str(body.get("model")), ("A", 80))
    return stub_module.Reply(texts=S.sc_text(choice, confidence))


def panel_file(
    tmp_path: Path,
    url: str,
    *,
    timeout_s: float = 0.5,
    deadline_s: float = 2.0,
    attempts: int = 3,
    base_delay_s: float = 0.02,
    max_delay_s: float = 0.1,
    circuit: str = "{failure_threshold: 5, cooldown_s: 0.5, max_cooldown_s: 2}",
    overrides: dict[str, str] | None = None,
) -> Path:
    """A 3-judge SC panel, quorum 2; ``overrides[judge]`` replaces that judge's timeout_s line."""
    entries = ""
    for j in JUDGES:
        timeout = (overrides or {}).get(j, f"timeout_s: {timeout_s}")
        entries += textwrap.dedent(f"""\
            - name: {j}
              model: openai/{j}
              backend: direct
              api_base: {url}
              api_key_env: {S.PLANTED_ENV}
              mode: sc
              {timeout}
              max_concurrency: 256
              retries: {{attempts: {attempts}, base_delay_s: {base_delay_s}, max_delay_s: {max_delay_s}}}
              circuit: {circuit}
            """)
    text = f"name: main\nfusion: majority\nquorum: 2\ndeadline_s: {deadline_s}\njudges:\n" + textwrap.indent(
        entries, "  "
    )
    path = tmp_path / "panel-faults.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@contextlib.asynccontextmanager
async def stub_with(plan: Any) -> AsyncIterator[Any]:
    server = await stub_module.StubServer().start()
    server.handler = plan
    server.require_key = S.PLANTED
    try:
        yield server
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def served(tmp_path: Path, panel: Path) -> AsyncIterator[tuple[Any, str, aiohttp.ClientSession]]:
    """(app, base url, client session): the real app under uvicorn on loopback."""
    settings = S.make_settings(
        tmp_path,
        [panel],
        storage_url=f"sqlite:///{tmp_path / 'faults.sqlite3'}",
        sqlite_synchronous="NORMAL",
        store_items=False,
    )
    app = S.create_app(settings, environ={S.PLANTED_ENV: S.PLANTED})
    async with S.uvicorn_server(app) as base:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(base, connector=connector, headers=S.auth("tenant-a")) as session:
            yield app, base, session


def judges_of(app: Any) -> dict[str, Judge]:
    return {j.name: j for j in app.state.gateway.panels["main"].panel.judges}


@dataclass
class Outcome:
    index: int
    status: int
    elapsed: float
    body: Any


async def post_verdict(session: aiohttp.ClientSession, index: int) -> Outcome:
    pair = {"question": f"case-{index} Which answer is right?", "answer_a": "4", "answer_b": "5"}
    for _ in range(20):  # a client honours the gateway's own 429 + Retry-After (load shedding)
        # the deadline bounds one request inside the gateway: time spent waiting out a shed
        # request's Retry-After is the client's, so only the answered attempt is timed
        started = time.monotonic()
        async with session.post("/v1/judge", json=pair) as response:
            raw = await response.read()
            status = response.status
            retry_after = response.headers.get("Retry-After")
        if status != 429 or retry_after is None:
            break
        await asyncio.sleep(float(retry_after))
    elapsed = time.monotonic() - started
    try:
        body = json.loads(raw)
    except ValueError:
        body = raw.decode("utf-8", "replace")
    return Outcome(index, status, elapsed, body)


def check_verdict(outcome: Outcome) -> None:
    """A 200 names its failed judges consistently; a 503 gives a reason per failed judge."""
    body = outcome.body
    assert isinstance(body, dict), f"verdict {outcome.index}: status {outcome.status}, body not JSON: {body!r}"
    if outcome.status == 200:
        votes = body["votes"]
        assert [v["judge"] for v in votes] == list(JUDGES)
        failed = [v["judge"] for v in votes if v["choice"] is None]
        assert len(failed) <= 1, f"quorum 2 of 3 held with {failed} failed"
        assert body["degraded"] is bool(failed)
        assert [f["judge"] for f in body["failed_judges"]] == failed
        for entry, vote in zip(body["failed_judges"], [v for v in votes if v["choice"] is None], strict=True):
            assert entry["reason"] and entry["reason"] == vote["error"]
        assert body["n_valid"] == 3 - len(failed) and body["n_invalid"] == len(failed)
        # two valid votes that disagree are an exact tie: no choice, confidence 0.5
        assert body["choice"] in ("A", "B") or (body["choice"] is None and body["confidence"] == 0.5)
    elif outcome.status == 503:
        assert "quorum" in body["error"] and body["quorum"] == 2
        assert body["valid_votes"] < 2
        failed = body["failed_judges"]
        assert len(failed) == 3 - body["valid_votes"] >= 2
        assert {f["judge"] for f in failed} <= set(JUDGES)
        assert all(isinstance(f["reason"], str) and f["reason"] and f["reason"] != "no usable vote" for f in failed)
    else:
        pytest.fail(f"verdict {outcome.index}: unexpected status {outcome.status}: {body!r}")


def reason_kind(reason: str) -> str:
    for prefix in ("circuit open", "circuit half-open", "timeout", "deadline exceeded"):
        if reason.startswith(prefix):
            return prefix
    return reason.split(":", 1)[0]


# ---------------------------------------------------------------------------------- the big run
N_VERDICTS = 2000
CONCURRENCY = 50
DEADLINE_S = 2.0
TIMEOUT_S = 0.5
MARGIN_S = 1.5
"""What a verdict may take past a bound, timed from the client: the request's trip and the
gateway's own work. Each bound it pads is far from what it rules out (a 5 s Retry-After, a 5 s
hang, a retry storm), and a busy machine's scheduling (tenths of a second) stays inside it."""


#: The big run's provider: the stub with a FaultPlan in its own process (the other core), so the
#: gateway's event loop is not also serving the stub. It prints READY <url>, serves until its
#: stdin closes, then prints what it injected as JSON: counts per judge and one event per
#: request, (monotonic time, judge, kind, Retry-After, case number).
PROVIDER = r"""
import asyncio, json, logging, re, sys, time
# a reset or an abandoned hang makes aiohttp log "Cannot write to closing transport": expected here
logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
from jf_test_support import openai_stub as stub
cfg = json.loads(sys.argv[1])
case_re = re.compile(r"case-(\d+)\b")

def ok(body):
    choice, confidence = cfg["answers"].get(body.get("model"), ["A", 80])
    return stub.Reply(texts=json.dumps({"selected_output": f"Output ({choice.lower()})",
                                        "confidence_score": confidence, "explanation": "scripted"}))

plan = stub.FaultPlan(rates=cfg["rates"], seed=cfg["seed"], ok=ok,
                      retry_after=tuple(cfg["retry_after"]), hang_s=cfg["hang_s"])
events = []

def handler(body):
    action = plan(body)
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    match = case_re.search(text)
    after = action.retry_after if plan.last_kind == "429" else None
    events.append((time.monotonic(), body.get("model"), plan.last_kind, after,
                   int(match.group(1)) if match else -1))
    return action

async def main():
    server = stub.StubServer()
    server.record = False
    server.handler = handler
    server.require_key = cfg["key"]
    await server.start()
    print("READY", server.url, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop()
    print(json.dumps({"injected": {k: dict(v) for k, v in plan.injected.items()}, "events": events}), flush=True)

asyncio.run(main())
"""


@contextlib.asynccontextmanager
async def provider_process(**cfg: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(url, result): the out-of-process faulty provider; ``result`` is filled when it stops."""
    cfg = {"key": S.PLANTED, "answers": {j: list(a) for j, a in ANSWERS.items()}, **cfg}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROVIDER,
        json.dumps(cfg),
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(S.TESTS), os.environ.get("PYTHONPATH", "")) if p)},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    result: dict[str, Any] = {}
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
        assert line.startswith(b"READY "), line
        yield line.split()[1].decode(), result
        proc.stdin.close()
        out = await asyncio.wait_for(proc.stdout.read(), timeout=30)
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
        result.update(json.loads(out))
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()


async def test_two_thousand_verdicts_with_thirty_percent_of_judge_calls_failing(tmp_path):
    async with provider_process(rates=RATES, seed=20261122, retry_after=["0", "0", "1"], hang_s=1.0) as (url, result):
        panel = panel_file(tmp_path, url, timeout_s=TIMEOUT_S, deadline_s=DEADLINE_S)
        async with served(tmp_path, panel) as (app, _base, session):
            queue = iter(range(N_VERDICTS))
            outcomes: list[Outcome] = []

            async def worker() -> None:
                for index in queue:
                    outcomes.append(await post_verdict(session, index))

            started = time.monotonic()
            cpu = time.process_time()
            await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
            wall = time.monotonic() - started
            cpu = time.process_time() - cpu
            opened = {name: judge.circuit.times_opened for name, judge in judges_of(app).items()}

    injected: Counter[str] = Counter()
    for counts in result["injected"].values():
        injected.update(counts)
    statuses = Counter(o.status for o in outcomes)
    calls = sum(injected.values())
    faults = calls - injected["ok"]
    degraded = sum(1 for o in outcomes if o.status == 200 and o.body["degraded"])
    reasons: Counter[str] = Counter()
    for o in outcomes:
        failed = o.body.get("failed_judges", []) if isinstance(o.body, dict) else []
        reasons.update(reason_kind(f["reason"]) for f in failed)
    slowest = max(o.elapsed for o in outcomes)
    print(
        f"\n[faults] verdicts run: {len(outcomes)} in {wall:.1f}s (concurrency {CONCURRENCY}, gateway CPU {cpu:.1f}s);"
        f" judge calls: {calls}, faults injected: {faults} ({faults / calls:.1%})"
        f"\n[faults] injected by kind: {dict(sorted((k, v) for k, v in injected.items() if k != 'ok'))}"
        f"\n[faults] 200: {statuses[200]} (degraded: {degraded}, clean: {statuses[200] - degraded});"
        f" 503: {statuses[503]}; 500: {statuses[500]};"
        f" other: {sum(v for k, v in statuses.items() if k not in (200, 503, 500))}"
        f"\n[faults] failed-vote reasons: {dict(reasons.most_common())}"
        f"\n[faults] slowest verdict: {slowest:.3f}s (deadline {DEADLINE_S}s, judge timeout {TIMEOUT_S}s);"
        f" circuits opened: {opened}"
    )

    assert len(outcomes) == N_VERDICTS
    assert statuses[500] == 0, [o.body for o in outcomes if o.status == 500][:3]
    for outcome in outcomes:
        check_verdict(outcome)
    assert set(statuses) <= {200, 503}
    assert degraded > 0 and statuses[503] > 0  # both paths were exercised
    assert 0.27 <= faults / calls <= 0.33
    assert all(injected[kind] > 0 for kind in RATES), injected
    # every fault kind surfaced as its own reason in some failed vote
    seen = set(reasons)
    for kind, names in REASON_OF.items():
        assert seen & set(names), f"no failed vote shows a {kind} fault ({names}); reasons: {reasons}"
    # the deadline: no verdict took longer than the per-request deadline plus a small margin
    late = [o for o in outcomes if o.elapsed > DEADLINE_S + MARGIN_S]
    assert not late, f"{len(late)} verdicts past the deadline, slowest {slowest:.2f}s"
    # retries: within one vote they stay inside the judge's budget, and after a 429 the next
    # attempt never comes before its Retry-After
    per_vote: dict[tuple[str, int], list[tuple[float, str, str | None]]] = defaultdict(list)
    for at, judge, kind, after, case in result["events"]:
        per_vote[(judge, case)].append((at, kind, after))
    retried = 0
    for (judge, case), attempts in per_vote.items():
        attempts.sort()
        assert len(attempts) <= 3, (judge, case, attempts)
        assert attempts[-1][0] - attempts[0][0] <= TIMEOUT_S + 0.4, (judge, case, attempts)
        for (at, kind, after), (next_at, _k, _a) in zip(attempts, attempts[1:], strict=False):
            retried += 1
            if kind == "429" and after is not None:
                assert next_at - at >= float(after) - 0.02, (judge, case, attempts)
    assert retried > 0


# ---------------------------------------------------------------------------------- the stub's plan
def test_fault_plan_is_deterministic_per_judge_and_validates_rates():
    a = FaultPlan(rates=RATES, seed=7)
    b = FaultPlan(rates=RATES, seed=7)
    seq_a = [(j, a.pick(j)) for _ in range(300) for j in JUDGES]
    seq_b = [(j, b.pick(j)) for j in reversed(JUDGES) for _ in range(300)]  # another interleaving
    for j in JUDGES:
        assert [k for jj, k in seq_a if jj == j] == [k for jj, k in seq_b if jj == j]
    assert [k for _j, k in seq_a] != [FaultPlan(rates=RATES, seed=8).pick(j) for _ in range(300) for j in JUDGES]
    kinds = Counter(k for _j, k in seq_a)
    assert 0.22 < 1 - kinds["ok"] / 900 < 0.38
    with pytest.raises(ValueError, match="unknown fault kinds"):
        FaultPlan(rates={"teapot": 0.1})
    with pytest.raises(ValueError, match="sum to at most 1"):
        FaultPlan(rates={"500": 0.7, "429": 0.4})
    healed = FaultPlan(rates={"500": 1.0})
    healed.healed.add("j1")
    assert healed.pick("j1") == "ok" and healed.pick("j2") == "500"


@pytest.mark.parametrize("kind", list(REASON_OF))
async def test_each_fault_kind_reaches_a_judge_as_its_transport_error(kind):
    plan = FaultPlan(rates={kind: 1.0}, ok=ok_reply, retry_after=("0",), hang_s=2.0)
    async with stub_with(plan) as server:
        config = JudgeConfig(
            name="j1",
            model="openai/j1",
            backend="direct",
            api_base=server.url,
            api_key_env=S.PLANTED_ENV,
            mode="sc",
            timeout_s=0.3,
            retries={"attempts": 1},
            circuit={"enabled": False},
        )
        async with Judge.from_config(config, environ={S.PLANTED_ENV: S.PLANTED}) as judge:
            vote = await judge.vote(PairwiseItem(id="x", question="q", answer_a="a", answer_b="b"))
    assert not vote.valid
    assert vote.error.startswith(REASON_OF[kind]), vote.error
    assert plan.injected["j1"][kind] == 1


# ---------------------------------------------------------------------------------- Retry-After and deadlines
class PerJudge:
    """A handler serving each judge its own scripted actions, then ``ok_reply``."""

    def __init__(self, **scripts: list[Any]) -> None:
        self.scripts = {j: list(actions) for j, actions in scripts.items()}
        self.times: dict[str, list[float]] = defaultdict(list)

    def __call__(self, body: dict[str, Any]) -> Any:
        judge = str(body.get("model"))
        self.times[judge].append(time.monotonic())
        script = self.scripts.get(judge)
        if script:
            return script.pop(0)
        return ok_reply(body)


async def one_verdict(session: aiohttp.ClientSession, index: int = 0) -> Outcome:
    outcome = await post_verdict(session, index)
    check_verdict(outcome)
    return outcome


async def test_a_429_retry_after_is_waited_for(tmp_path):
    handler = PerJudge(j1=[stub_module.Status(429, "slow down", retry_after="1")])
    async with stub_with(handler) as server:
        panel = panel_file(tmp_path, server.url, timeout_s=3.0, deadline_s=5.0, base_delay_s=0.0, max_delay_s=0.0)
        async with served(tmp_path, panel) as (_app, _base, session):
            outcome = await one_verdict(session)
    assert outcome.status == 200 and outcome.body["degraded"] is False
    first, second = handler.times["j1"]
    assert second - first >= 1.0
    j1 = outcome.body["votes"][0]
    assert j1["judge"] == "j1" and j1["choice"] == "A" and j1["latency_s"] >= 1.0
    assert j1["calls"] == 1  # one vote-level call, retried inside the transport
    assert outcome.elapsed >= 1.0


async def test_a_retry_after_past_the_deadline_is_not_waited_for(tmp_path):
    handler = PerJudge(j1=[stub_module.Status(429, "come back later", retry_after="5")])
    async with stub_with(handler) as server:
        panel = panel_file(tmp_path, server.url, timeout_s=1.5, deadline_s=3.0)
        async with served(tmp_path, panel) as (_app, _base, session):
            outcome = await one_verdict(session)
    assert outcome.status == 200 and outcome.body["degraded"] is True
    assert [f["judge"] for f in outcome.body["failed_judges"]] == ["j1"]
    reason = outcome.body["failed_judges"][0]["reason"]
    assert reason.startswith("RateLimited") and "429" in reason
    assert len(handler.times["j1"]) == 1  # no retry: the wait would outlive the budget
    assert outcome.body["votes"][0]["latency_s"] <= 1.5
    assert outcome.elapsed < 1.5 + MARGIN_S


async def test_retries_stop_at_the_judge_budget(tmp_path):
    handler = PerJudge(j1=[stub_module.Status(503)] * 1000)
    async with stub_with(handler) as server:
        panel = panel_file(
            tmp_path,
            server.url,
            timeout_s=0.8,
            deadline_s=3.0,
            attempts=20,
            base_delay_s=0.1,
            max_delay_s=0.2,
            circuit="{enabled: false}",
        )
        async with served(tmp_path, panel) as (_app, _base, session):
            outcome = await one_verdict(session)
    assert outcome.status == 200
    assert outcome.body["failed_judges"][0]["judge"] == "j1"
    times = handler.times["j1"]
    assert 2 <= len(times) < 20
    assert times[-1] - times[0] <= 0.8
    assert outcome.elapsed < 0.8 + MARGIN_S


async def test_the_panel_deadline_bounds_a_hanging_judge(tmp_path):
    handler = PerJudge(j1=[stub_module.Hang(5.0)], j2=[stub_module.Hang(5.0)])
    async with stub_with(handler) as server:
        panel = panel_file(tmp_path, server.url, timeout_s=4.0, deadline_s=1.0, overrides={"j3": "timeout_s: 0.5"})
        async with served(tmp_path, panel) as (_app, _base, session):
            outcome = await one_verdict(session)
    assert outcome.status == 503
    reasons = {f["judge"]: f["reason"] for f in outcome.body["failed_judges"]}
    assert set(reasons) == {"j1", "j2"}
    assert all(r.startswith("deadline exceeded") for r in reasons.values())
    assert 1.0 <= outcome.elapsed < 1.0 + MARGIN_S


# ---------------------------------------------------------------------------------- circuit breaker
async def test_a_judge_that_keeps_failing_is_cooled_down_and_comes_back(tmp_path):
    cooldown = 1.5
    plan = FaultPlan(per_key={"j3": {"500": 1.0}}, ok=ok_reply)
    async with stub_with(plan) as server:
        panel = panel_file(
            tmp_path,
            server.url,
            timeout_s=0.5,
            deadline_s=2.0,
            attempts=2,
            base_delay_s=0.0,
            max_delay_s=0.0,
            circuit=f"{{failure_threshold: 3, cooldown_s: {cooldown}, max_cooldown_s: 10}}",
        )
        async with served(tmp_path, panel) as (app, _base, session):
            j3 = judges_of(app)["j3"].circuit
            for i in range(3):  # three failed votes (two attempts each) open the circuit
                outcome = await one_verdict(session, i)
                assert outcome.status == 200 and outcome.body["failed_judges"][0]["reason"].startswith("ServerError")
            assert j3.state == "open"
            opened = time.monotonic()
            seen = plan.injected["j3"]["500"]
            assert seen == 6

            cooled = 0  # verdicts during the cooldown: j3 fails fast, the stub sees nothing of it
            while time.monotonic() - opened < cooldown - 0.3:
                outcome = await one_verdict(session, 100 + cooled)
                assert outcome.status == 200 and outcome.body["degraded"] is True
                [failed] = outcome.body["failed_judges"]
                assert failed["judge"] == "j3" and failed["reason"].startswith("circuit open: cooling down for ")
                assert outcome.body["votes"][2]["calls"] == 0
                cooled += 1
                await asyncio.sleep(0.05)
            assert cooled >= 5
            assert plan.injected["j3"]["500"] == seen and sum(plan.injected["j3"].values()) == seen

            # still broken after the cooldown: the one probe fails and the circuit reopens, longer
            await asyncio.sleep(max(0.0, opened + cooldown - time.monotonic()) + 0.05)
            outcome = await one_verdict(session, 200)
            assert outcome.body["failed_judges"][0]["reason"].startswith("ServerError")
            assert j3.state == "open" and j3.cooldown_s == 2 * cooldown
            assert sum(plan.injected["j3"].values()) == seen + 2

            plan.healed.add("j3")  # the provider recovers
            reopened = time.monotonic()
            outcome = await one_verdict(session, 201)
            assert outcome.body["failed_judges"][0]["reason"].startswith("circuit open")
            await asyncio.sleep(max(0.0, reopened + 2 * cooldown - time.monotonic()) + 0.05)
            outcome = await one_verdict(session, 202)  # the probe succeeds: back in the panel
            assert outcome.status == 200 and outcome.body["degraded"] is False
            assert j3.state == "closed" and j3.cooldown_s == cooldown
            assert plan.injected["j3"]["ok"] == 1
            for i in range(3):
                outcome = await one_verdict(session, 300 + i)
                assert outcome.body["degraded"] is False
            assert plan.injected["j3"]["ok"] == 4
            assert j3.times_opened == 2


async def test_circuit_open_on_two_judges_is_a_clear_503(tmp_path):
    plan = FaultPlan(per_key={"j2": {"reset": 1.0}, "j3": {"502": 1.0}}, ok=ok_reply)
    async with stub_with(plan) as server:
        panel = panel_file(
            tmp_path, server.url, attempts=1, circuit="{failure_threshold: 2, cooldown_s: 30, max_cooldown_s: 60}"
        )
        async with served(tmp_path, panel) as (app, _base, session):
            for i in range(2):
                assert (await one_verdict(session, i)).status == 503
            outcome = await one_verdict(session, 2)
            calls = sum(plan.injected["j2"].values()) + sum(plan.injected["j3"].values())
            assert calls == 4
    assert outcome.status == 503
    reasons = {f["judge"]: f["reason"] for f in outcome.body["failed_judges"]}
    assert set(reasons) == {"j2", "j3"}
    assert all(r.startswith("circuit open: cooling down for ") for r in reasons.values())
    assert outcome.elapsed < MARGIN_S  # no call waited for (the calls counted above: none)
    assert judges_of(app)["j1"].circuit.state == "closed"
