"""judgefuse.client against a real gateway on loopback (uvicorn + the stub judges in a thread):
every method of Client and AsyncClient, retries (429 after Retry-After, 503, no connection),
typed 4xx errors, ids that make a retried judge call join the first one, batch chunking."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jf_test_support import openai_stub as stub_module
from jf_test_support.live_gateway import API_KEY, LiveGateway, live_gateway
from jf_test_support.ports import free_port

from judgefuse.client import (
    AsyncClient,
    Client,
    Conflict,
    ConnectionFailed,
    InvalidRequest,
    NotFound,
    Overloaded,
    RetryPolicy,
    Unauthorized,
)

FAST = RetryPolicy(deadline_s=10, backoff_s=0.05, max_backoff_s=0.2)
PAIR = {"question": "What is 2 + 2?", "answer_a": "4", "answer_b": "5"}
VOTES = [{"judge": "e1", "choice": "A", "confidence": 0.9},
         {"judge": "e2", "choice": "A", "confidence": 0.7},
         {"judge": "e3", "choice": "B", "confidence": 0.6}]


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[LiveGateway]:
    with live_gateway(tmp_path, max_batch_items=16) as live:
        yield live


Do = Callable[..., Awaitable[Any]]


async def every_method(do: Do, live: LiveGateway) -> None:
    """The calls a pipeline makes, in order, through ``do(method_name, *args, **kwargs)``."""
    verdict = await do("judge", **PAIR)
    assert len(verdict.id) == 32 and verdict.choice == "A" and verdict.route == "human_review"
    assert 0.5 <= verdict.confidence <= 1 and [v.judge for v in verdict.votes] == ["j1", "j2", "j3"]
    assert live.judge_calls() == 3

    fused = await do("fuse", **PAIR, votes=VOTES, panel="ext")
    assert (fused.choice, fused.panel, len(fused.votes)) == ("A", "ext", 3)
    assert live.judge_calls() == 3  # posted votes call no judge

    items = [{"question": f"q{i}", "answer_a": "a", "answer_b": "b"} for i in range(37)]
    batch = await do("judge_batch", items)
    assert (batch.n_ok, batch.n_failed, [r.index for r in batch.results]) == (37, 0, list(range(37)))
    assert batch.cost.calls == 37 * 3
    fused_batch = await do("fuse_batch", [{**item, "votes": VOTES, "panel": "ext"} for item in items[:20]])
    assert fused_batch.n_ok == 20

    label = await do("feedback", verdict.id, "A")
    assert (label.verdict_id, label.status, label.label) == (verdict.id, "labelled", "A")
    stored = await do("verdict", verdict.id)
    assert (stored.id, stored.label, stored.choice) == (verdict.id, "A", "A")

    report = await do("calibration", window_hours=0, population=False, structure=False)
    assert report.panel == "main"
    assert {key["key"] for key in report.model_dump()["keys"]} >= {"method:majority:fused"}

    assert (await do("thresholds")).current is None
    tuned = await do("tune", target_precision=0.8, min_count=5)
    assert tuned.stored is False  # one label: nothing to tune yet, nothing stored

    leased = await do("review_next", n=2, annotator="ann-1")
    assert leased.annotator == "ann-1" and len(leased.items) == 2
    first = leased.items[0].verdict_id
    skipped = await do("review_skip", first, annotator="ann-1")
    assert skipped.released is True
    labelled = await do("review_label", leased.items[1].verdict_id, "B", annotator="ann-1")
    assert labelled.status == "labelled"
    stats = await do("review_stats")
    assert stats.strata["review"].labelled >= 1

    monitor = await do("monitor")
    assert monitor.panel == "main" and monitor.state == "ok"
    with pytest.raises(InvalidRequest) as no_threshold:  # nothing to clear before a threshold
        await do("monitor_clear")
    assert [f.field for f in no_threshold.value.fields] == ["body.panel"]


def test_client_every_method(gateway: LiveGateway) -> None:
    with Client(gateway.url, API_KEY, retry=FAST) as client:
        async def do(name: str, *args: Any, **kwargs: Any) -> Any:
            return getattr(client, name)(*args, **kwargs)

        asyncio.run(every_method(do, gateway))
        assert client.batch_limit.items == 16  # learned from the gateway's 413


async def test_async_client_every_method(gateway: LiveGateway) -> None:
    async with AsyncClient(gateway.url, API_KEY, retry=FAST) as client:
        async def do(name: str, *args: Any, **kwargs: Any) -> Any:
            return await getattr(client, name)(*args, **kwargs)

        await every_method(do, gateway)


def test_a_429_is_retried_after_its_retry_after(tmp_path: Path) -> None:
    with live_gateway(tmp_path, max_inflight_total=1) as live:
        live.script.by_question = lambda model, text: stub_module.Reply(
            texts='{"selected_output": "Output (a)", "confidence_score": 80, "explanation": "x"}',
            delay_s=1.2) if "slow" in text else None
        admission = live.gateway.judging.admission
        with Client(live.url, API_KEY, retry=FAST) as client:
            slow = threading.Thread(target=client.judge, kwargs={**PAIR, "question": "slow one"})
            slow.start()
            while admission.inflight() == 0:
                time.sleep(0.01)
            started = time.monotonic()
            verdict = client.judge(**PAIR)
            waited = time.monotonic() - started
            slow.join()
        assert verdict.choice == "A"
        assert admission.rejected >= 1  # the gateway did answer 429 first
        assert waited >= 1.0  # Retry-After: 1 (at least), honoured
        # with a deadline shorter than Retry-After the 429 is raised, typed, after one attempt
        with Client(live.url, API_KEY, retry=RetryPolicy(deadline_s=0.5)) as impatient, \
                Client(live.url, API_KEY, retry=FAST) as patient:  # 1.2 s judging: over 0.5 s
            slow = threading.Thread(target=patient.judge, kwargs={**PAIR, "question": "slow two"})
            slow.start()
            while admission.inflight() == 0:
                time.sleep(0.01)
            with pytest.raises(Overloaded) as refused:
                impatient.judge(**PAIR, id="another-id")
            slow.join()
        assert refused.value.status == 429 and refused.value.attempts == 1
        assert refused.value.retry_after_s is not None and refused.value.retry_after_s >= 1
        assert refused.value.body.limit == "max_inflight_total"


def test_a_503_is_retried(gateway: LiveGateway) -> None:
    failures = iter(range(3))
    gateway.script.by_question = lambda model, text: (
        stub_module.Status(500, "provider down") if next(failures, None) is not None else None)
    with Client(gateway.url, API_KEY, retry=FAST) as client:
        verdict = client.judge(**PAIR)
    assert verdict.n_valid == 3
    assert gateway.judge_calls() == 6  # 3 failed calls (quorum lost: 503), then 3 good ones


def test_4xx_is_raised_with_its_fields_and_never_retried(tmp_path: Path) -> None:
    with live_gateway(tmp_path, max_text_chars=20) as live, Client(live.url, API_KEY, retry=FAST) as client:
        with pytest.raises(InvalidRequest) as invalid:
            client.judge(question="q", answer_a="x" * 50, answer_b="b")
        assert invalid.value.status == 422 and invalid.value.attempts == 1
        assert [f.field for f in invalid.value.fields] == ["body.answer_a"]
        assert "20" in invalid.value.fields[0].problem
        with pytest.raises(NotFound) as missing:
            client.verdict("no-such-verdict")
        assert missing.value.status == 404 and missing.value.error
        first = client.judge(**PAIR)
        with pytest.raises(Conflict) as conflict:
            client.judge(question="another question", answer_a="4", answer_b="5", id=first.id)
        assert [f.field for f in conflict.value.fields] == ["body.id"]
        assert live.judge_calls() == 3
    with live_gateway(tmp_path / "2") as live, Client(live.url, "wrong-key", retry=FAST) as stranger:
        with pytest.raises(Unauthorized) as refused:
            stranger.judge(**PAIR)
        assert refused.value.status == 401 and refused.value.fields


def test_a_retried_judge_call_joins_the_first_instead_of_judging_twice(gateway: LiveGateway) -> None:
    gateway.script.by_question = lambda model, text: stub_module.Reply(
        texts='{"selected_output": "Output (b)", "confidence_score": 70, "explanation": "x"}',
        delay_s=1.0)
    timeout = httpx.Timeout(0.3, connect=5.0)  # the first attempt times out while judging
    with Client(gateway.url, API_KEY, timeout=timeout, retry=FAST) as client:
        verdict = client.judge(**PAIR)
        again = client.judge(**PAIR, id=verdict.id)  # the same id later: the stored verdict
    assert verdict.choice == "B" and again.id == verdict.id
    assert gateway.judge_calls() == 3  # one panel's worth of calls, not one per attempt


def test_connection_errors_back_off_until_the_deadline() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens
    policy = RetryPolicy(deadline_s=1.0, backoff_s=0.05, max_backoff_s=0.3, max_attempts=500)
    started = time.monotonic()
    with Client(url, retry=policy) as client, pytest.raises(ConnectionFailed) as failed:
        client.judge(**PAIR)
    elapsed = time.monotonic() - started
    assert failed.value.attempts >= 3 and isinstance(failed.value.__cause__, httpx.ConnectError)
    # gave up at its 1 s deadline, not after its 500 attempts (about a minute of backoff)
    assert elapsed < 15.0


def test_a_bad_request_is_refused_before_it_is_sent() -> None:
    with Client("http://127.0.0.1:9", retry=RetryPolicy(deadline_s=0)) as client:
        with pytest.raises(InvalidRequest, match="answer_b"):
            client.judge(question="q", answer_a="a", answer_b=None)  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest, match="label"):
            client.feedback("some-id", "C")


def test_batch_items_refused_by_admission_are_sent_again(tmp_path: Path) -> None:
    with live_gateway(tmp_path, max_inflight_total=2) as live:
        live.script.by_question = lambda model, text: stub_module.Reply(
            texts='{"selected_output": "Output (a)", "confidence_score": 80, "explanation": "x"}', delay_s=0.3)
        items = [{"question": f"q{i}", "answer_a": "a", "answer_b": "b"} for i in range(6)]
        with Client(live.url, API_KEY, retry=FAST) as client:
            batch = client.judge_batch(items)
        admission = live.gateway.judging.admission
        assert admission.rejected >= 4  # the first round: two admitted, the rest 429 per item
        assert (batch.n_ok, [r.status for r in batch.results]) == (6, [200] * 6)
        assert live.judge_calls() == 6 * 3  # each item judged once
