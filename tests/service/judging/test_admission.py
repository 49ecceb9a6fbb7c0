"""Overload: bounded in-flight requests per tenant and in total (429 + Retry-After before any
judge call), and one tenant's burst does not take the others down (fair slots at each judge,
the judges' timeouts excluding queueing, no breaker opened by a healthy judge)."""

from __future__ import annotations

import asyncio
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from jf_test_support import app_support as S

from judgefuse.service.app import create_app
from judgefuse.service.errors import Overloaded
from judgefuse.service.judging.admission import Admission
from judgefuse.service.settings import Settings

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def slow_judges(script: S.Script, delay_s: float) -> None:
    for judge in S.JUDGES:
        script.set(judge, action=S.stub_module.Reply(texts=S.sc_text("A", 80), delay_s=delay_s))


def capped_panel(tmp_path: Path, url: str, *, cap: int, timeout_s: float, deadline_s: float = 30) -> Path:
    """Three SC judges on the stub with a concurrency cap and the breaker on (threshold 3)."""
    entries = "".join(textwrap.dedent(f"""\
          - name: {j}
            model: openai/{j}
            backend: direct
            api_base: {url}
            api_key_env: {S.PLANTED_ENV}
            mode: sc
            timeout_s: {timeout_s}
            max_concurrency: {cap}
            retries: {{attempts: 1, base_delay_s: 0, max_delay_s: 0}}
            circuit: {{failure_threshold: 3, cooldown_s: 30}}
        """) for j in S.JUDGES)
    path = tmp_path / "panel-capped.yaml"
    path.write_text(f"name: main\nfusion: majority\nquorum: 2\ndeadline_s: {deadline_s}\njudges:\n"
                    + textwrap.indent(entries, "  "), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ unit
def test_limits_per_tenant_and_in_total_then_places_come_back():
    admission = Admission(max_per_tenant=2, max_total=3)
    with admission.admit("a"), admission.admit("a"):
        with pytest.raises(Overloaded) as per_tenant:
            with admission.admit("a"):
                pass
        assert per_tenant.value.limit == "max_inflight_per_tenant"
        assert per_tenant.value.status == 429
        with admission.admit("b"):
            assert admission.inflight() == 3 and admission.inflight("a") == 2
            with pytest.raises(Overloaded) as total:
                with admission.admit("c"):
                    pass
            assert total.value.limit == "max_inflight_total"
    assert admission.inflight() == 0 and admission.inflight("a") == 0
    assert admission.rejected == 2
    with admission.admit("c"):  # room again
        pass


def test_a_place_is_given_back_when_the_request_fails():
    admission = Admission(max_per_tenant=1, max_total=1)
    with pytest.raises(RuntimeError), admission.admit("a"):
        raise RuntimeError("boom")
    with admission.admit("a"):
        assert admission.inflight("a") == 1


def test_retry_after_follows_how_long_requests_take():
    clock = FakeClock()
    admission = Admission(max_per_tenant=1, max_total=10, clock=clock)
    assert admission.retry_after_s() == 1  # nothing finished yet
    for _ in range(30):
        with admission.admit("a"):
            clock.now += 4.2
    assert admission.retry_after_s() == 5  # ceil of the typical 4.2 s
    with admission.admit("a"):
        with pytest.raises(Overloaded) as refused:
            with admission.admit("a"):
                pass
    assert refused.value.headers() == {"Retry-After": "5"}
    body = refused.value.body()
    assert body["limit"] == "max_inflight_per_tenant" and body["retry_after_s"] == 5
    assert "max_inflight_per_tenant=1" in body["error"]


def test_settings_refuse_a_zero_limit():
    with pytest.raises(ValueError, match="max_inflight_per_tenant"):
        Settings(max_inflight_per_tenant=0)


# ------------------------------------------------------------------------------ the app
async def test_over_the_tenant_limit_429_with_retry_after_before_any_judge_call(stub, tmp_path):
    server, script = stub
    slow_judges(script, 0.4)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)], max_inflight_per_tenant=2)
    async with S.running_app(settings) as (app, client):
        burst = [client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-a")) for _ in range(5)]
        answers = await asyncio.gather(*burst)
        statuses = sorted(r.status_code for r in answers)
        assert statuses == [200, 200, 429, 429, 429]
        assert len(server.requests) == 2 * len(S.JUDGES)  # the refused three called no judge
        for refused in (r for r in answers if r.status_code == 429):
            assert refused.headers["Retry-After"] == "1"
            body = refused.json()
            assert body["limit"] == "max_inflight_per_tenant" and body["retry_after_s"] == 1
            assert "tenant 'tenant-a'" in body["error"]
        metrics = (await client.get("/metrics", headers=S.admin())).text
        assert 'judgefuse_admission_rejected_total{limit="max_inflight_per_tenant",tenant="tenant-a"} 3.0' in metrics
        assert 'judgefuse_requests_inflight{tenant="tenant-a"} 0.0' in metrics
        again = await client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-a"))
        assert again.status_code == 200


async def test_the_total_limit_refuses_any_tenant_and_batch_items_are_admitted_one_by_one(stub, tmp_path):
    server, script = stub
    slow_judges(script, 0.4)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               max_inflight_per_tenant=10, max_inflight_total=3)
    async with S.running_app(settings) as (_app, client):
        batch = client.post("/v1/judge/batch", json={"items": [PAIR] * 5}, headers=S.auth("tenant-a"))
        late = asyncio.create_task(_after(0.1, client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-b"))))
        batch_answer, refused = await asyncio.gather(batch, late)
    assert batch_answer.status_code == 200 and batch_answer.headers["Retry-After"] == "1"
    results = batch_answer.json()["results"]
    assert sorted(r["status"] for r in results) == [200, 200, 200, 429, 429]
    for item in (r for r in results if r["status"] == 429):
        assert item["error"]["limit"] == "max_inflight_total" and item["error"]["retry_after_s"] >= 1
    assert refused.status_code == 429 and refused.json()["limit"] == "max_inflight_total"
    assert "the gateway has 3 requests in flight" in refused.json()["error"]
    assert len(server.requests) == 3 * len(S.JUDGES)


async def _after(delay_s: float, coro):  # noqa: ANN001, ANN202
    await asyncio.sleep(delay_s)
    return await coro


async def test_tenant_b_is_served_during_tenant_a_burst_over_real_http(stub, tmp_path):
    server, script = stub
    latency_s = 0.5
    slow_judges(script, latency_s)
    # 20 requests from A = 20 calls per judge at a cap of 2: 5 s of queue, two and a half times
    # the judges' 2 s timeout (1.5 s of margin over a call: a busy machine's late timers)
    settings = S.make_settings(tmp_path, [capped_panel(tmp_path, server.url, cap=2, timeout_s=2.0)])
    app = create_app(settings, environ={S.PLANTED_ENV: S.PLANTED})
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        burst_started = time.perf_counter()
        burst = [asyncio.create_task(client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-a")))
                 for _ in range(20)]
        await asyncio.sleep(0.3)
        started = time.perf_counter()
        answer_b = await client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-b"))
        latency_b = time.perf_counter() - started
        answers_a = await asyncio.gather(*burst)
        burst_s = time.perf_counter() - burst_started
        metrics = (await client.get("/metrics", headers=S.admin())).text
    assert answer_b.status_code == 200
    assert all(v["error"] is None for v in answer_b.json()["votes"])
    # B waits for the next free slot (at most one call), then its own call; never A's queue
    # (5 s): the margin is a busy machine's, far from the queue
    assert latency_b < 2 * latency_s + 1.5, f"B took {latency_b:.2f}s"
    assert burst_s > 4.5  # A's queue really was long
    assert [r.status_code for r in answers_a] == [200] * 20  # queueing is not a judge timeout
    for judge in S.JUDGES:
        assert f'judgefuse_circuit_opened{{judge="{judge}",panel="main"}} 0.0' in metrics
