"""The one "poll a batch until it ends" loop both batch APIs use, against the stub's OpenAI
batches and Anthropic message batches on loopback: each provider's own terminal status ends
it, a failed batch is returned (its votes degrade; the run goes on), the interval backs off up
to its cap, and a batch still running at the deadline is a typed error naming it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from jf_test_support import openai_stub as S

from judgefuse.judges.batch.api import AnthropicBatchAPI, BatchAPIError, OpenAIBatchAPI
from judgefuse.judges.batch.polling import BatchPollTimeout, PollSchedule, poll_until_ended

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}


@pytest.fixture
async def stub() -> AsyncIterator[S.StubServer]:
    server = await S.StubServer().start()
    try:
        yield server
    finally:
        await server.stop()


class FakeTime:
    """A clock that moves only when the poller sleeps: the schedule is read off, not timed."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


async def start_batch(provider: str, stub: S.StubServer, spool: Path) -> tuple[OpenAIBatchAPI | AnthropicBatchAPI, str]:
    """A two-request batch created on the stub through ``provider``'s API."""
    if provider == "openai":
        api: OpenAIBatchAPI | AnthropicBatchAPI = OpenAIBatchAPI(stub.url)
        lines = [{"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions", "body": BODY}
                 for i in range(2)]  # fmt: skip
    else:
        api = AnthropicBatchAPI(stub.url, spool=spool)
        lines = [{"custom_id": f"c{i}", "params": BODY} for i in range(2)]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    status = await api.create(await api.upload(data))
    return api, status.id


@pytest.mark.parametrize(("provider", "terminal"), [("openai", "completed"), ("anthropic", "ended")])
async def test_each_provider_is_polled_until_its_own_terminal_status(provider, terminal, stub, tmp_path):
    api, batch_id = await start_batch(provider, stub, tmp_path)
    time = FakeTime()
    heard: list[str] = []
    try:
        status = await poll_until_ended(api, batch_id, PollSchedule(interval_s=0.5),
                                        on_status=lambda s: heard.append(s.status),
                                        sleep=time.sleep, clock=time.clock)  # fmt: skip
    finally:
        await api.aclose()
    assert status.status == terminal and heard[-1] == terminal
    assert all(s not in api.terminal_statuses for s in heard[:-1]) and len(heard) >= 2
    assert time.sleeps == [0.5] * (len(heard) - 1)  # the default schedule: a fixed interval
    assert status.output_file_id is not None


async def test_a_failed_batch_is_returned_not_raised(stub, tmp_path):
    stub.batches.fail_validation = True
    api, batch_id = await start_batch("openai", stub, tmp_path)
    time = FakeTime()
    try:
        status = await poll_until_ended(api, batch_id, PollSchedule(interval_s=0.1), sleep=time.sleep, clock=time.clock)
    finally:
        await api.aclose()
    assert status.status == "failed" and status.output_file_id is None


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_interval_backs_off_to_its_cap_and_the_deadline_is_a_typed_error(provider, stub, tmp_path):
    stub.batches.hold = stub.anthropic.hold = True  # the batch never ends
    api, batch_id = await start_batch(provider, stub, tmp_path)
    time = FakeTime()
    schedule = PollSchedule(interval_s=1.0, backoff=2.0, max_interval_s=5.0, deadline_s=20.0)
    try:
        with pytest.raises(BatchPollTimeout, match=rf"batch {batch_id} is still in_progress after 17 s") as caught:
            await poll_until_ended(api, batch_id, schedule, sleep=time.sleep, clock=time.clock)
    finally:
        await api.aclose()
    assert isinstance(caught.value, BatchAPIError)  # the command's "rerun to resume" message covers it
    # waits 1, 2, 4, then 5 s (the cap); at 17 s a next wait would pass the 20 s deadline
    assert time.sleeps == [1.0, 2.0, 4.0, 5.0, 5.0]
    served = stub.batches.batches if provider == "openai" else stub.anthropic.batches
    assert served[batch_id].retrieves == 6


async def test_passing_poll_failures_are_waited_out_up_to_the_schedules_retries(stub, tmp_path):
    api, batch_id = await start_batch("openai", stub, tmp_path)
    time = FakeTime()
    try:
        stub.batches.failing_retrieves = 2
        status = await poll_until_ended(api, batch_id, PollSchedule(interval_s=0.1, transient_retries=2),
                                        sleep=time.sleep, clock=time.clock)  # fmt: skip
        assert status.status == "completed"
        stub.batches.failing_retrieves = 3
        with pytest.raises(BatchAPIError, match=r"GET /batches/\S+: HTTP 503") as caught:
            await poll_until_ended(api, batch_id, PollSchedule(interval_s=0.1, transient_retries=2),
                                   sleep=time.sleep, clock=time.clock)  # fmt: skip
    finally:
        await api.aclose()
    assert caught.value.transient and not isinstance(caught.value, BatchPollTimeout)


def test_a_schedule_that_cannot_work_is_refused():
    with pytest.raises(ValueError, match="backoff >= 1"):
        PollSchedule(backoff=0.5)
    with pytest.raises(ValueError, match="max_interval_s must be >= interval_s"):
        PollSchedule(interval_s=10, max_interval_s=1)


def test_a_negative_poll_interval_is_a_usage_error_naming_the_flag(capsys, tmp_path):
    from judgefuse.cli import main

    assert main(["judge", str(tmp_path / "pairs.jsonl"), "--batch", "--batch-poll-s", "-1"]) == 2
    assert "argument --batch-poll-s: must be a number in [0, 86400) (got -1)" in capsys.readouterr().err
