"""with_retries: backoff on retryable errors only, Retry-After honoured, the deadline kept."""

from __future__ import annotations

import time

import pytest

from judgefuse.judges.transport import (
    AuthenticationFailed,
    ChatRequest,
    DirectOpenAIClient,
    JudgeTimeout,
    LiteLLMClient,
    RateLimited,
    ServerError,
    with_retries,
)

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(params=["direct", "litellm"])
async def kind_and_client(request):
    client = DirectOpenAIClient() if request.param == "direct" else LiteLLMClient()
    yield request.param, client
    await client.aclose()


def _request(kind: str, url: str, **fields) -> ChatRequest:
    return ChatRequest(
        model="stub" if kind == "direct" else "openai/stub", messages=MESSAGES, api_base=url, api_key="sk-k", **fields
    )


async def test_server_errors_are_retried_until_success(kind_and_client, openai_stub, stub_actions):
    kind, client = kind_and_client
    openai_stub.script(stub_actions.Status(500), stub_actions.Status(503), stub_actions.Reply(texts="B"))
    retrying = with_retries(client, attempts=3, base_delay_s=0.01, max_delay_s=0.05)
    response = await retrying.complete(_request(kind, openai_stub.url))
    assert response.texts == ["B"]
    assert len(openai_stub.requests) == 3


async def test_last_error_is_raised_when_attempts_run_out(kind_and_client, openai_stub, stub_actions):
    kind, client = kind_and_client
    openai_stub.script(stub_actions.Status(500), stub_actions.Status(502))
    retrying = with_retries(client, attempts=2, base_delay_s=0.0, max_delay_s=0.0)
    with pytest.raises(ServerError) as info:
        await retrying.complete(_request(kind, openai_stub.url))
    assert info.value.status == 502
    assert len(openai_stub.requests) == 2


async def test_fatal_errors_are_not_retried(kind_and_client, openai_stub, stub_actions):
    kind, client = kind_and_client
    openai_stub.script(stub_actions.Status(401), stub_actions.Reply())
    retrying = with_retries(client, attempts=5, base_delay_s=0.0, max_delay_s=0.0)
    with pytest.raises(AuthenticationFailed):
        await retrying.complete(_request(kind, openai_stub.url))
    assert len(openai_stub.requests) == 1


async def test_retry_after_is_respected(kind_and_client, openai_stub, stub_actions):
    kind, client = kind_and_client
    openai_stub.script(stub_actions.Status(429, retry_after="0.6"), stub_actions.Reply(texts="A"))
    retrying = with_retries(client, attempts=3, base_delay_s=0.001, max_delay_s=0.01)
    response = await retrying.complete(_request(kind, openai_stub.url))
    assert response.texts == ["A"]
    first, second = openai_stub.requests
    assert second.at - first.at >= 0.6


async def test_retry_after_past_the_deadline_raises_at_once(kind_and_client, openai_stub, stub_actions):
    kind, client = kind_and_client
    openai_stub.script(stub_actions.Status(429, retry_after="300"), stub_actions.Reply())
    retrying = with_retries(client, attempts=5, base_delay_s=0.001, max_delay_s=0.01, deadline=60.0)
    started = time.monotonic()
    with pytest.raises(RateLimited) as info:
        await retrying.complete(_request(kind, openai_stub.url))
    assert info.value.retry_after_s == 300
    # at once, not after the 60 s deadline or the 300 s wait (a bound no busy machine reaches)
    assert time.monotonic() - started < 20.0
    assert len(openai_stub.requests) == 1


async def test_deadline_cuts_a_hanging_attempt(kind_and_client, openai_stub, stub_actions):
    kind, client = kind_and_client
    openai_stub.script(stub_actions.Hang(), stub_actions.Hang(), stub_actions.Hang())
    retrying = with_retries(client, attempts=10, base_delay_s=0.01, max_delay_s=0.02, deadline=0.8)
    started = time.monotonic()
    with pytest.raises(JudgeTimeout):
        await retrying.complete(_request(kind, openai_stub.url, timeout_s=30.0))
    elapsed = time.monotonic() - started
    assert elapsed >= 0.7
    assert elapsed < 15.0  # cut at the 0.8 s deadline, not after one 30 s attempt


async def test_backoff_waits_grow_within_max_delay(openai_stub, stub_actions):
    import random

    openai_stub.script(*[stub_actions.Status(500)] * 3, stub_actions.Reply())
    client = with_retries(DirectOpenAIClient(), attempts=4, base_delay_s=0.1, max_delay_s=0.15, rng=random.Random(0))
    try:
        await client.complete(_request("direct", openai_stub.url))
    finally:
        await client.aclose()
    times = [r.at for r in openai_stub.requests]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert len(gaps) == 3
    assert all(gap < 0.15 + 0.1 for gap in gaps)


@pytest.mark.parametrize("kwargs", [{"attempts": 0}, {"base_delay_s": -1.0}, {"deadline": 0.0}])
def test_bad_retry_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        with_retries(DirectOpenAIClient(), **kwargs)
