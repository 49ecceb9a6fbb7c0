"""A judge under more load than its concurrency cap (real HTTP to the stub on loopback):
queued time is not judge time, the breaker hears only what the provider did, and a tenant
arriving during another tenant's burst is served at the next free slot."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from judgefuse.judges.circuit import CircuitBreaker
from judgefuse.judges.config import JudgeConfig, PanelConfigError, parse_panel_config
from judgefuse.judges.judge import Judge
from judgefuse.judges.panel import Panel
from judgefuse.judges.types import PairwiseItem

ITEM = PairwiseItem(id="q1", question="2+2?", answer_a="4", answer_b="5")
GOOD = json.dumps({"selected_output": "Output (a)", "confidence_score": 90, "explanation": "right"})


def slot_judge(url: str, *, cap: int, timeout_s: float, attempts: int = 1, **config) -> Judge:
    judge_config = JudgeConfig(
        name="j",
        model="openai/j",
        backend="direct",
        api_base=url,
        mode="sc",
        timeout_s=timeout_s,
        max_concurrency=cap,
        retries={"attempts": attempts, "base_delay_s": 0.0, "max_delay_s": 0.0},
        **config,
    )
    return Judge(judge_config, circuit=CircuitBreaker("j", failure_threshold=1, cooldown_s=30.0))


async def test_the_timeout_runs_from_the_slot_not_from_the_queue(openai_stub, stub_actions):
    # a 0.3 s call against a 1.0 s timeout: 0.7 s of margin a busy machine's late timers keep
    openai_stub.default = stub_actions.Reply(texts=GOOD, delay_s=0.3)
    async with slot_judge(openai_stub.url, cap=1, timeout_s=1.0) as judge:
        started = time.perf_counter()
        votes = await asyncio.gather(*(judge.vote(ITEM) for _ in range(5)))
        elapsed = time.perf_counter() - started
    # one at a time: the last vote waited ~1.2 s for its slot, longer than its 1.0 s timeout
    assert elapsed >= 1.5
    assert [v.error for v in votes] == [None] * 5
    assert judge.circuit.state == "closed" and judge.circuit.times_opened == 0


async def test_retries_after_a_slot_wait_keep_their_whole_deadline(openai_stub, stub_actions):
    openai_stub.script(
        stub_actions.Reply(texts=GOOD, delay_s=0.6),  # vote 1
        stub_actions.Reply(texts=GOOD, delay_s=0.6),  # vote 2
        stub_actions.Status(500),  # vote 3, attempt 1, after a 1.2 s wait for the slot
        stub_actions.Reply(texts=GOOD),  # vote 3, attempt 2
    )
    async with slot_judge(openai_stub.url, cap=1, timeout_s=1.0, attempts=2) as judge:
        votes = []
        for _ in range(3):
            votes.append(asyncio.create_task(judge.vote(ITEM)))
            await asyncio.sleep(0.02)  # arrival order = script order
        done = await asyncio.gather(*votes)
    assert [v.valid for v in done] == [True, True, True]
    assert len(openai_stub.requests) == 4
    assert judge.circuit.state == "closed"


async def test_a_panel_deadline_on_queued_votes_does_not_open_the_breaker(openai_stub, stub_actions):
    openai_stub.default = stub_actions.Reply(texts=GOOD, delay_s=0.25)
    judge = slot_judge(openai_stub.url, cap=1, timeout_s=5.0)
    config = parse_panel_config({"name": "p", "quorum": 1, "deadline_s": 0.4, "judges": [judge.config.model_dump()]})
    async with Panel(config, [judge]) as panel:
        results = await asyncio.gather(*(panel.judge(ITEM, tenant="A") for _ in range(6)))
    errors = [votes[0].error for votes in results]
    assert errors[0] is None  # got the slot at once
    assert sum(1 for e in errors if e and e.startswith("deadline exceeded")) == 5
    assert len(openai_stub.requests) == 2  # the second call was cut by the deadline; the rest never left the queue
    assert judge.circuit.state == "closed" and judge.circuit.consecutive_failures == 0


async def test_a_timeout_while_the_votes_own_calls_are_still_queued_is_not_a_failure(openai_stub, stub_actions):
    openai_stub.default = stub_actions.Reply(texts=GOOD, delay_s=0.05)
    async with slot_judge(openai_stub.url, cap=1, timeout_s=0.5, position_swap=True) as judge:
        swapped = asyncio.create_task(judge.vote(ITEM, tenant="A"))  # two calls, one slot
        await asyncio.sleep(0.02)
        await judge.limiter.acquire("B")  # tenant B's call gets the slot after A's first order ...
        await asyncio.sleep(0.8)  # ... and holds it past A's timeout
        judge.limiter.release("B")
        late = await swapped
    # A's second order never got the slot within 0.5 s of its first order's call
    assert late.error == "timeout: no vote within 0.5s"
    assert len(openai_stub.requests) == 1
    assert judge.circuit.state == "closed" and judge.circuit.times_opened == 0


async def test_a_timeout_with_a_call_in_flight_is_still_a_failure(openai_stub, stub_actions):
    openai_stub.default = stub_actions.Hang(5.0)
    async with slot_judge(openai_stub.url, cap=1, timeout_s=0.3) as judge:
        vote = await judge.vote(ITEM)
    assert vote.error is not None and "timeout" in vote.error.lower()
    assert judge.circuit.state == "open"


async def test_a_timed_out_vote_leaves_its_task_as_it_found_it(openai_stub, stub_actions):
    """The vote's deadline cancels the task to stop its call, then takes that cancellation back:
    the task is not left 'being cancelled' (a caller's own timeout around the vote, or a
    TaskGroup, would misread it), and a caller's cancellation still cancels."""
    openai_stub.default = stub_actions.Hang(5.0)
    async with slot_judge(openai_stub.url, cap=2, timeout_s=0.2) as judge:
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        vote = await judge.vote(ITEM)
        assert vote.error == "timeout: no vote within 0.2s"
        assert task.cancelling() == 0
    async with slot_judge(openai_stub.url, cap=2, timeout_s=0.2) as judge:  # its circuit is closed
        pending = asyncio.create_task(judge.vote(ITEM))
        await asyncio.sleep(0.05)
        pending.cancel()  # the caller's cancellation, before the deadline: not a vote
        with pytest.raises(asyncio.CancelledError):
            await pending


async def test_a_tenant_is_served_at_the_next_free_slot_during_another_tenants_burst(openai_stub, stub_actions):
    openai_stub.default = stub_actions.Reply(texts=GOOD, delay_s=0.5)
    async with slot_judge(openai_stub.url, cap=2, timeout_s=3.0) as judge:
        burst = [asyncio.create_task(judge.vote(ITEM, tenant="A")) for _ in range(20)]  # 5 s of work
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        vote_b = await judge.vote(ITEM, tenant="B")
        latency_b = time.perf_counter() - started
        assert vote_b.valid
        assert judge.limiter.waiting("A") >= 14  # A's queue is still long
        votes_a = await asyncio.gather(*burst)
    # the next free slot (<= one 0.5 s call) + its own call, with a busy machine's margin; in
    # line behind A's burst it would be 5 s
    assert latency_b < 0.5 + 0.5 + 1.5
    assert all(v.valid for v in votes_a)


async def test_with_a_per_tenant_cap_another_tenant_does_not_wait_for_a_slot(openai_stub, stub_actions):
    openai_stub.default = stub_actions.Reply(texts=GOOD, delay_s=1.0)
    async with slot_judge(openai_stub.url, cap=3, timeout_s=3.0, max_concurrency_per_tenant=2) as judge:
        burst = [asyncio.create_task(judge.vote(ITEM, tenant="A")) for _ in range(8)]
        await asyncio.sleep(0.1)
        assert judge.limiter.held("A") == 2 and judge.limiter.in_use == 2
        started = time.perf_counter()
        vote_b = await judge.vote(ITEM, tenant="B")
        latency_b = time.perf_counter() - started
        votes_a = await asyncio.gather(*burst)
    # its own 1.0 s call; waiting for one of A's slots first it would be 1.9 s or more
    assert vote_b.valid and latency_b < 1.0 + 0.6
    assert all(v.valid for v in votes_a)


def test_the_per_tenant_cap_must_fit_max_concurrency():
    expected = r"judges\[0\].*max_concurrency_per_tenant \(9\) must be <= max_concurrency \(8\)"
    with pytest.raises(PanelConfigError, match=expected):
        parse_panel_config({"judges": [{"name": "j", "model": "m", "max_concurrency_per_tenant": 9}]})
