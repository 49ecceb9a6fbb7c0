"""Both chat clients against the same scripted OpenAI-compatible server, over real HTTP."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import pytest

from judgefuse.judges.transport import (
    AuthenticationFailed,
    BadRequest,
    ChatClient,
    ChatRequest,
    ConnectionFailed,
    DirectOpenAIClient,
    JudgeTimeout,
    LiteLLMClient,
    MalformedResponse,
    RateLimited,
    ServerError,
    TransportError,
    Unsupported,
)
from judgefuse.judges.transport.request import constant_extra

MESSAGES = [{"role": "user", "content": "Which output is better, A or B?"}]
KINDS = ["direct", "litellm"]
MODEL = {"direct": "stub", "litellm": "openai/stub"}


@pytest.fixture(params=KINDS)
async def client_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def client(client_kind: str, openai_stub) -> AsyncIterator[ChatClient]:
    made: ChatClient = DirectOpenAIClient(max_connections=8) if client_kind == "direct" else LiteLLMClient()
    yield made
    await made.aclose()


@pytest.fixture
def make_request(client_kind: str, openai_stub) -> Callable[..., ChatRequest]:
    def make(**fields) -> ChatRequest:
        fields.setdefault("model", MODEL[client_kind])
        fields.setdefault("messages", MESSAGES)
        fields.setdefault("api_base", openai_stub.url)
        fields.setdefault("api_key", "sk-test-key")
        fields.setdefault("timeout_s", 60.0)  # a bound on a stuck call; the timeout tests set theirs
        return ChatRequest(**fields)

    return make


async def test_plain_answer_is_returned_with_usage(client, make_request, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts="Output (a)", usage=(42, 7)))
    response = await client.complete(make_request())
    assert response.texts == ["Output (a)"]
    assert response.first_token_top_logprobs == [[]]
    assert (response.prompt_tokens, response.completion_tokens) == (42, 7)
    assert response.model == "stub"
    assert response.latency_s > 0
    assert response.cost_usd == 0.0  # a stub model has no price
    assert not response.cached


async def test_request_parameters_and_bearer_key_reach_the_server(client, make_request, openai_stub):
    await client.complete(make_request(temperature=0.7, seed=11, max_tokens=5, api_key="sk-abc"))
    (seen,) = openai_stub.requests
    assert seen.body["model"] == "stub"
    assert seen.body["messages"] == MESSAGES
    assert seen.body["temperature"] == 0.7
    assert seen.body["seed"] == 11
    assert seen.body["max_tokens"] == 5
    assert "n" not in seen.body or seen.body["n"] == 1
    assert seen.headers["Authorization"] == "Bearer sk-abc"


async def test_first_token_top_logprobs_are_parsed(client, make_request, openai_stub, stub_actions):
    top = [("A", -0.05), (" B", -3.2), ("a", -6.0)]
    openai_stub.script(stub_actions.Reply(texts="A", top_logprobs=top))
    response = await client.complete(make_request(logprobs=True, top_logprobs=3))
    assert response.first_token_top_logprobs == [top]
    assert openai_stub.requests[0].body["logprobs"] is True
    assert openai_stub.requests[0].body["top_logprobs"] == 3


async def test_n_choices_come_back_in_order(client, make_request, openai_stub, stub_actions):
    openai_stub.script(
        stub_actions.Reply(texts=["A", "B", "A"], usage=(30, 3), top_logprobs=[("A", -0.1), ("B", -2.0)])
    )
    response = await client.complete(make_request(n=3, temperature=0.7, logprobs=True, top_logprobs=2))
    assert response.texts == ["A", "B", "A"]
    assert len(response.first_token_top_logprobs) == 3
    assert openai_stub.requests[0].body["n"] == 3
    assert response.completion_tokens == 3


async def test_missing_usage_counts_zero_tokens(client, make_request, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(usage=None))
    response = await client.complete(make_request())
    assert (response.prompt_tokens, response.completion_tokens) == (0, 0)


async def test_server_without_n_support_raises_unsupported(client, make_request, openai_stub):
    openai_stub.reject_n = True
    with pytest.raises(Unsupported) as info:
        await client.complete(make_request(n=4))
    assert info.value.feature == "n"
    assert info.value.status == 400


async def test_server_without_logprobs_raises_unsupported(client, make_request, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts="A", top_logprobs=None))
    with pytest.raises(Unsupported) as info:
        await client.complete(make_request(logprobs=True, top_logprobs=5))
    assert info.value.feature == "logprobs"


STATUS_CASES = [
    (400, BadRequest),
    (401, AuthenticationFailed),
    (403, AuthenticationFailed),
    (404, BadRequest),
    (408, JudgeTimeout),
    (409, ServerError),
    (422, BadRequest),
    (429, RateLimited),
    (500, ServerError),
    (502, ServerError),
    (503, ServerError),
    (504, ServerError),
]


@pytest.mark.parametrize(("status", "expected"), STATUS_CASES)
async def test_http_status_maps_to_the_right_exception(
    client, make_request, openai_stub, stub_actions, status, expected
):
    openai_stub.script(stub_actions.Status(status, message=f"scripted {status}"))
    with pytest.raises(expected) as info:
        await client.complete(make_request())
    assert type(info.value) is expected  # the most specific class, not a parent
    assert info.value.status == status
    # one request on the wire: retries are judgefuse's own (judges/retry), never the SDK's
    assert len(openai_stub.requests) == 1


async def test_rate_limit_carries_retry_after(client, make_request, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Status(429, retry_after="1.5"))
    with pytest.raises(RateLimited) as info:
        await client.complete(make_request())
    assert info.value.retry_after_s == pytest.approx(1.5)


async def test_hanging_server_raises_judge_timeout(client, make_request, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Hang())
    started = time.monotonic()
    with pytest.raises(JudgeTimeout):
        await client.complete(make_request(timeout_s=0.5))
    assert time.monotonic() - started < 30.0  # the stub hangs 3600 s: far below it is 'cut'


async def test_dropped_connection_raises_connection_failed(client, make_request, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Close())
    with pytest.raises(ConnectionFailed) as info:
        await client.complete(make_request())
    assert info.value.__cause__ is not None


async def test_refused_connection_raises_connection_failed(client, make_request):
    # Port 9 (discard) on loopback: nothing listens there in the test environment.
    with pytest.raises(ConnectionFailed):
        await client.complete(make_request(api_base="http://127.0.0.1:9/v1"))


@pytest.mark.parametrize("body", [b"<html>502 bad gateway", b'{"foo": 1}', b"[1, 2]", b'{"choices": []}'])
async def test_garbage_body_raises_malformed_response(client, make_request, openai_stub, stub_actions, body):
    openai_stub.script(stub_actions.Garbage(body=body))
    with pytest.raises(MalformedResponse):
        await client.complete(make_request())


async def test_every_failure_is_a_transport_error(client, make_request, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Status(418), stub_actions.Status(599))
    with pytest.raises(BadRequest):
        await client.complete(make_request())
    with pytest.raises(ServerError):
        await client.complete(make_request())
    for failure in (BadRequest, ServerError):
        assert issubclass(failure, TransportError)


async def test_both_paths_give_the_same_response(openai_stub, stub_actions):
    reply = stub_actions.Reply(texts=["B", "A"], top_logprobs=[("B", -0.2), ("A", -1.8)], usage=(100, 2))
    openai_stub.script(reply, reply)
    direct, lite = DirectOpenAIClient(), LiteLLMClient()
    try:
        common = dict(
            messages=MESSAGES,
            api_base=openai_stub.url,
            api_key="sk-same",
            n=2,
            logprobs=True,
            top_logprobs=2,
            seed=3,
            temperature=0.7,
        )
        a = await direct.complete(ChatRequest(model="stub", **common))
        b = await lite.complete(ChatRequest(model="openai/stub", **common))
    finally:
        await direct.aclose()
        await lite.aclose()
    assert (a.texts, a.first_token_top_logprobs, a.prompt_tokens, a.completion_tokens, a.model) == (
        b.texts,
        b.first_token_top_logprobs,
        b.prompt_tokens,
        b.completion_tokens,
        b.model,
    )
    first, second = openai_stub.requests
    assert first.body == second.body  # both clients sent the same request


async def test_request_key_overrides_client_key(openai_stub, stub_actions):
    client = DirectOpenAIClient(api_base=openai_stub.url, api_key="sk-client")
    try:
        await client.complete(ChatRequest(model="stub", messages=MESSAGES))
        await client.complete(ChatRequest(model="stub", messages=MESSAGES, api_key="sk-request"))
    finally:
        await client.aclose()
    assert [r.headers["Authorization"] for r in openai_stub.requests] == ["Bearer sk-client", "Bearer sk-request"]


async def test_direct_client_sends_no_auth_header_without_a_key(openai_stub):
    client = DirectOpenAIClient(api_base=openai_stub.url)
    try:
        await client.complete(ChatRequest(model="stub", messages=MESSAGES))
    finally:
        await client.aclose()
    assert "Authorization" not in openai_stub.requests[0].headers


async def test_closed_direct_client_refuses_new_calls(openai_stub):
    client = DirectOpenAIClient(api_base=openai_stub.url)
    await client.aclose()
    with pytest.raises(RuntimeError):
        await client.complete(ChatRequest(model="stub", messages=MESSAGES))


async def test_litellm_without_any_key_is_a_fatal_error_not_a_server_error(openai_stub, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = LiteLLMClient()
    try:
        with pytest.raises(BadRequest):
            await client.complete(ChatRequest(model="openai/stub", messages=MESSAGES, api_base=openai_stub.url))
    finally:
        await client.aclose()
    assert openai_stub.requests == []


@pytest.mark.parametrize("fields", [
    {},
    {"max_tokens": 5, "temperature": 0.7},
    {"n": 3, "seed": 1, "logprobs": True, "top_logprobs": 2, "extra": {"response_format": {"type": "json_object"}}},
    {"extra": {"messages": [{"role": "user", "content": "overridden"}]}},
    {"max_tokens": 7, "extra": constant_extra({"response_format": {"type": "json_object", "strict": True}})},
    {"max_tokens": 7, "temperature": 0.25, "extra": constant_extra({"temperature": 0.5, "stop": ["\u00e9"]})},
    {"temperature": -0.0, "extra": constant_extra({"max_tokens": 3})},
    {"temperature": 0.0, "extra": constant_extra({"max_tokens": 3})},
])
def test_direct_body_is_the_plain_encoding_whether_its_prompt_was_encoded_before_or_not(fields):
    """The direct client reuses a prompt's JSON for every judge sending it: the bytes are those
    of encoding the whole body at once, the first time and the next, for every field set (a
    ``messages`` in ``extra`` overrides the prompt, as before); other prompts (non-ASCII text,
    a message with more keys, one over the size cap) are encoded as they are."""
    import json

    from judgefuse.judges.transport import direct
    from judgefuse.judges.transport.request import openai_body

    prompts = [
        [{"role": "system", "content": "Judge."}, {"role": "user", "content": "Is 2+2=4? \u00e9\u4e2d \"q\""}],
        [{"role": "user", "content": "x", "name": "a"}],
        [{"role": "user", "content": "y" * (direct._MESSAGES_CACHE_MAX_CHARS + 1)}],
    ]
    for messages in prompts:
        request = ChatRequest(model="judge-\u00fc", messages=messages, **fields)
        plain = direct._dumps(openai_body(request))  # the whole body encoded at once
        assert direct.encode_body(request) == plain
        assert direct.encode_body(request) == plain  # from the cache when cacheable
        assert json.loads(plain)["model"] == "judge-\u00fc"
    assert len(direct._encoded_messages) <= direct._MESSAGES_CACHE_SIZE
    assert len(direct._encoded_rests) <= direct._MESSAGES_CACHE_SIZE


def test_direct_body_of_a_constant_extra_follows_the_request_s_own_fields():
    """The fields after ``messages`` are encoded once per distinct set (a constant ``extra``
    such as the verdict's ``response_format``, keyed by identity): requests differing only in
    an own field (temperature 0.0 / -0.0 / 0, max_tokens 5 / True, max_tokens absent) or in
    which constant extra they carry each get their own plain encoding, in any order."""
    from judgefuse.judges.transport import direct
    from judgefuse.judges.transport.request import openai_body

    one = constant_extra({"response_format": {"type": "json_object"}})
    other = constant_extra({"response_format": {"type": "text"}})
    requests = [
        ChatRequest(model="m", messages=MESSAGES, **fields)
        for extra in (one, other, {}, {"response_format": {"type": "json_object"}})
        for fields in ({"extra": extra}, {"extra": extra, "temperature": -0.0},
                       {"extra": extra, "temperature": 0}, {"extra": extra, "max_tokens": 5},
                       {"extra": extra, "max_tokens": True})
    ]
    for request in [*requests, *reversed(requests)]:
        assert direct.encode_body(request) == direct._dumps(openai_body(request))


def test_evolve_copies_a_request_with_changes_like_dataclasses_replace():
    """``evolve`` (the hot path's copy: an ``extra`` added for structured output, a retry's
    shorter timeout) gives what ``dataclasses.replace`` gives, leaves the original alone, and
    refuses a name that is not a field."""
    import dataclasses

    from judgefuse.judges.transport.request import evolve

    request = ChatRequest(model="m", messages=MESSAGES, timeout_s=10.0, extra={"a": 1}, n=2, seed=3)
    for changes in ({"extra": {"a": 1, "response_format": {"type": "json_object"}}}, {"timeout_s": 2.5}, {}):
        copy = evolve(request, **changes)
        assert copy == dataclasses.replace(request, **changes) and copy is not request
    assert request.extra == {"a": 1} and request.timeout_s == 10.0
    with pytest.raises(TypeError, match="tmeout_s"):
        evolve(request, tmeout_s=1.0)
