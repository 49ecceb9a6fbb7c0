"""The per-judge circuit breaker: unit behaviour with a fake clock, then a judge on the stub
server (real HTTP on loopback) whose requests are counted: it opens after N failed votes,
fails fast without calling the provider, probes once after the cooldown, closes or reopens."""

from __future__ import annotations

import asyncio
import json

import pytest

from judgefuse.judges.circuit import CircuitBreaker
from judgefuse.judges.config import CircuitConfig, JudgeConfig, PanelConfigError, parse_panel_config
from judgefuse.judges.judge import Judge
from judgefuse.judges.types import PairwiseItem

ITEM = PairwiseItem(id="q1", question="2+2?", answer_a="4", answer_b="5")
GOOD = json.dumps({"selected_output": "Output (a)", "confidence_score": 90, "explanation": "right"})


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def breaker(clock: FakeClock, **kw) -> CircuitBreaker:
    kw = {"failure_threshold": 3, "cooldown_s": 10.0, "max_cooldown_s": 35.0, **kw}
    return CircuitBreaker("j", clock=clock, **kw)


def fail(cb: CircuitBreaker, times: int = 1) -> None:
    for _ in range(times):
        admission = cb.admit()
        assert admission.allowed
        cb.report(admission, "failure")


# ----------------------------------------------------------------------------- unit, fake clock
def test_opens_after_threshold_consecutive_failures_and_fails_fast_with_time_left():
    clock = FakeClock()
    cb = breaker(clock)
    fail(cb, 2)
    assert cb.state == "closed" and cb.consecutive_failures == 2
    fail(cb)
    assert cb.state == "open" and cb.times_opened == 1
    clock.advance(2.5)
    refused = cb.admit()
    assert not refused.allowed
    assert refused.reason == "circuit open: cooling down for 7.5s"
    assert cb.remaining_cooldown_s() == pytest.approx(7.5)
    assert cb.rejected == 1


def test_a_success_resets_the_run_and_neutral_outcomes_change_nothing():
    clock = FakeClock()
    cb = breaker(clock)
    fail(cb, 2)
    ok = cb.admit()
    cb.report(ok, "success")
    assert cb.consecutive_failures == 0
    fail(cb, 2)
    neutral = cb.admit()
    cb.report(neutral, "neutral")
    assert cb.state == "closed" and cb.consecutive_failures == 2
    fail(cb)
    assert cb.state == "open"


def test_half_open_admits_exactly_one_probe_and_its_success_closes():
    clock = FakeClock()
    cb = breaker(clock)
    fail(cb, 3)
    clock.advance(10.0)
    probe = cb.admit()
    assert probe.allowed and probe.probe and cb.state == "half_open"
    other = cb.admit()
    assert not other.allowed and other.reason == "circuit half-open: waiting for the probe call"
    cb.report(probe, "success")
    assert cb.state == "closed" and cb.cooldown_s == 10.0
    assert cb.admit().allowed and cb.admit().allowed


def test_failed_probe_reopens_with_doubled_cooldown_capped_and_close_resets_it():
    clock = FakeClock()
    cb = breaker(clock)
    fail(cb, 3)
    cooldowns = []
    for _ in range(4):
        clock.advance(cb.cooldown_s)
        probe = cb.admit()
        assert probe.probe
        cb.report(probe, "failure")
        assert cb.state == "open"
        cooldowns.append(cb.cooldown_s)
        clock.advance(cb.cooldown_s - 0.01)
        assert not cb.admit().allowed  # still cooling down, just before the end
        clock.advance(-(cb.cooldown_s - 0.01))
    assert cooldowns == [20.0, 35.0, 35.0, 35.0]
    assert cb.times_opened == 5
    clock.advance(35.0)
    probe = cb.admit()
    cb.report(probe, "success")
    assert cb.state == "closed" and cb.cooldown_s == 10.0


def test_a_neutral_probe_frees_the_slot_for_the_next_probe():
    clock = FakeClock()
    cb = breaker(clock)
    fail(cb, 3)
    clock.advance(10.0)
    probe = cb.admit()
    cb.report(probe, "neutral")  # e.g. cancelled by the panel deadline
    assert cb.state == "half_open"
    again = cb.admit()
    assert again.allowed and again.probe


def test_stale_results_from_before_the_circuit_opened_are_ignored():
    clock = FakeClock()
    cb = breaker(clock)
    in_flight = [cb.admit() for _ in range(10)]  # 10 concurrent votes to a dead judge
    for admission in in_flight[:3]:
        cb.report(admission, "failure")
    assert cb.state == "open" and cb.times_opened == 1
    for admission in in_flight[3:6]:
        cb.report(admission, "failure")
    cb.report(in_flight[6], "success")  # a straggler's success does not close it
    assert cb.state == "open" and cb.times_opened == 1
    assert cb.remaining_cooldown_s() == pytest.approx(10.0)


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError, match="failure_threshold"):
        CircuitBreaker(failure_threshold=0)
    with pytest.raises(ValueError, match="cooldown_s"):
        CircuitBreaker(cooldown_s=0)
    with pytest.raises(ValueError, match="max_cooldown_s"):
        CircuitBreaker(cooldown_s=10, max_cooldown_s=5)


async def test_concurrent_tasks_in_one_loop_open_it_once():
    clock = FakeClock()
    cb = breaker(clock)

    async def vote() -> None:
        admission = cb.admit()
        await asyncio.sleep(0)
        cb.report(admission, "failure")

    await asyncio.gather(*(vote() for _ in range(50)))
    assert cb.state == "open" and cb.times_opened == 1


# ----------------------------------------------------------------------------- config
def test_circuit_config_defaults_yaml_and_validation():
    config = JudgeConfig(name="j", model="m")
    assert config.circuit == CircuitConfig(enabled=True, failure_threshold=5, cooldown_s=30.0, max_cooldown_s=300.0)
    assert Judge(config).circuit is not None
    assert Judge(config).circuit.failure_threshold == 5
    off = JudgeConfig(name="j", model="m", circuit={"enabled": False})
    assert Judge(off).circuit is None
    panel = parse_panel_config(
        {
            "judges": [
                {"name": "j", "model": "m", "circuit": {"failure_threshold": 2, "cooldown_s": 1.5, "max_cooldown_s": 6}}
            ]
        }
    )
    built = Judge(panel.judges[0]).circuit
    assert (built.failure_threshold, built.base_cooldown_s, built.max_cooldown_s) == (2, 1.5, 6.0)
    with pytest.raises(PanelConfigError, match=r"judges\[0\]\.circuit"):
        parse_panel_config(
            {"judges": [{"name": "j", "model": "m", "circuit": {"cooldown_s": 10, "max_cooldown_s": 5}}]}
        )
    with pytest.raises(PanelConfigError, match=r"judges\[0\]\.circuit\.failure_threshold"):
        parse_panel_config({"judges": [{"name": "j", "model": "m", "circuit": {"failure_threshold": 0}}]})


# ----------------------------------------------------------------------------- a judge on the stub
def stub_judge(url: str, clock: FakeClock, *, timeout_s: float = 2.0, attempts: int = 1, **circuit) -> Judge:
    config = JudgeConfig(
        name="j",
        model="openai/j",
        backend="direct",
        api_base=url,
        mode="sc",
        timeout_s=timeout_s,
        retries={"attempts": attempts, "base_delay_s": 0.0, "max_delay_s": 0.0},
    )
    return Judge(config, circuit=breaker(clock, **circuit))


async def test_judge_opens_fails_fast_without_calls_probes_and_closes(openai_stub, stub_actions):
    clock = FakeClock()
    openai_stub.default = stub_actions.Status(500)
    async with stub_judge(openai_stub.url, clock, attempts=2) as judge:
        for _ in range(3):
            vote = await judge.vote(ITEM)
            assert not vote.valid and "ServerError" in vote.error
        assert len(openai_stub.requests) == 6  # 3 votes x 2 attempts
        assert judge.circuit.state == "open"

        clock.advance(4.0)
        for _ in range(5):
            vote = await judge.vote(ITEM)
            assert vote.error == "circuit open: cooling down for 6.0s"
            assert vote.calls == 0 and vote.latency_s == 0.0
        assert len(openai_stub.requests) == 6  # the provider was not called

        clock.advance(6.0)  # cooldown over; the provider is still down: the probe fails
        vote = await judge.vote(ITEM)
        assert "ServerError" in vote.error
        assert len(openai_stub.requests) == 8
        assert judge.circuit.state == "open" and judge.circuit.cooldown_s == 20.0
        assert (await judge.vote(ITEM)).error == "circuit open: cooling down for 20.0s"

        openai_stub.default = stub_actions.Reply(texts=GOOD)  # healed
        clock.advance(20.0)
        vote = await judge.vote(ITEM)
        assert vote.valid and vote.choice == "A"
        assert judge.circuit.state == "closed" and judge.circuit.cooldown_s == 10.0
        assert len(openai_stub.requests) == 9
        for _ in range(3):
            assert (await judge.vote(ITEM)).valid
        assert len(openai_stub.requests) == 12


async def test_timeouts_count_as_failures(openai_stub, stub_actions):
    clock = FakeClock()
    openai_stub.default = stub_actions.Hang(5.0)
    async with stub_judge(openai_stub.url, clock, timeout_s=0.2) as judge:
        for _ in range(3):
            vote = await judge.vote(ITEM)
            assert not vote.valid and "timeout" in vote.error.lower()
        assert judge.circuit.state == "open"
        assert (await judge.vote(ITEM)).error.startswith("circuit open: cooling down for")
        assert len(openai_stub.requests) == 3


async def test_unreadable_judgments_and_bad_requests_never_open_it(openai_stub, stub_actions):
    clock = FakeClock()
    openai_stub.default = stub_actions.Reply(texts="I cannot decide between them.")  # parse failure
    async with stub_judge(openai_stub.url, clock) as judge:
        for _ in range(6):
            vote = await judge.vote(ITEM)
            assert not vote.valid
        assert judge.circuit.state == "closed" and judge.circuit.consecutive_failures == 0
        openai_stub.default = stub_actions.Status(400, "bad request")
        for _ in range(6):
            assert "BadRequest" in (await judge.vote(ITEM)).error
        assert judge.circuit.state == "closed"
        assert len(openai_stub.requests) == 12


async def test_success_between_failures_keeps_it_closed(openai_stub, stub_actions):
    clock = FakeClock()
    bad, good = stub_actions.Status(503), stub_actions.Reply(texts=GOOD)
    openai_stub.script(bad, bad, good, bad, bad, good, bad, bad)
    async with stub_judge(openai_stub.url, clock) as judge:
        results = [(await judge.vote(ITEM)).valid for _ in range(8)]
        assert results == [False, False, True, False, False, True, False, False]
        assert judge.circuit.state == "closed"
        openai_stub.default = bad
        assert not (await judge.vote(ITEM)).valid
        assert judge.circuit.state == "open"


async def test_a_probe_cancelled_by_the_panel_deadline_frees_the_probe_slot(openai_stub, stub_actions):
    clock = FakeClock()
    openai_stub.default = stub_actions.Status(500)
    async with stub_judge(openai_stub.url, clock, timeout_s=5.0) as judge:
        for _ in range(3):
            await judge.vote(ITEM)
        clock.advance(10.0)
        openai_stub.default = stub_actions.Hang(5.0)
        probe = asyncio.create_task(judge.vote(ITEM))
        while len(openai_stub.requests) < 4:
            await asyncio.sleep(0.01)
        assert (await judge.vote(ITEM)).error == "circuit half-open: waiting for the probe call"
        probe.cancel()
        with pytest.raises(asyncio.CancelledError):
            await probe
        openai_stub.default = stub_actions.Reply(texts=GOOD)
        assert (await judge.vote(ITEM)).valid  # the next vote is the probe
        assert judge.circuit.state == "closed"


async def test_disabled_circuit_always_calls(openai_stub, stub_actions):
    openai_stub.default = stub_actions.Status(500)
    config = JudgeConfig(
        name="j",
        model="openai/j",
        backend="direct",
        api_base=openai_stub.url,
        mode="sc",
        retries={"attempts": 1},
        circuit={"enabled": False},
    )
    async with Judge(config) as judge:
        for _ in range(8):
            assert not (await judge.vote(ITEM)).valid
    assert len(openai_stub.requests) == 8
