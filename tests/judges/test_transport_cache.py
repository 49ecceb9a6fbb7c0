"""The response cache: hits, misses, sample indices kept apart, errors never stored."""

from __future__ import annotations

import pytest

from judgefuse.judges.transport import (
    ChatRequest,
    DirectOpenAIClient,
    LRUResponseCache,
    ServerError,
    cache_key,
    with_cache,
)

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def cached(openai_stub):
    client = with_cache(DirectOpenAIClient(api_base=openai_stub.url))
    yield client
    await client.aclose()


async def test_same_request_is_served_from_cache(cached, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts="A"), stub_actions.Reply(texts="B"))
    first = await cached.complete(ChatRequest(model="stub", messages=MESSAGES))
    second = await cached.complete(ChatRequest(model="stub", messages=MESSAGES))
    assert first.texts == second.texts == ["A"]
    assert not first.cached and second.cached
    assert len(openai_stub.requests) == 1
    assert (cached.hits, cached.misses) == (1, 1)


async def test_distinct_sample_indices_do_not_collapse(cached, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts="A"), stub_actions.Reply(texts="B"))
    samples = [
        await cached.complete(ChatRequest(model="stub", messages=MESSAGES, temperature=0.7, sample_index=i))
        for i in range(2)
    ]
    assert [s.texts for s in samples] == [["A"], ["B"]]
    again = await cached.complete(ChatRequest(model="stub", messages=MESSAGES, temperature=0.7, sample_index=1))
    assert again.texts == ["B"] and again.cached
    assert len(openai_stub.requests) == 2


async def test_errors_are_never_cached(cached, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Status(500), stub_actions.Reply(texts="A"))
    with pytest.raises(ServerError):
        await cached.complete(ChatRequest(model="stub", messages=MESSAGES))
    response = await cached.complete(ChatRequest(model="stub", messages=MESSAGES))
    assert response.texts == ["A"] and not response.cached


BASE = dict(model="m", messages=MESSAGES, temperature=0.0)


@pytest.mark.parametrize(
    "change",
    [
        {"model": "m2"},
        {"messages": [{"role": "user", "content": "hello"}]},
        {"temperature": 0.7},
        {"max_tokens": 5},
        {"n": 2},
        {"seed": 1},
        {"logprobs": True},
        {"logprobs": True, "top_logprobs": 5},
        {"api_base": "http://elsewhere/v1"},
        {"extra": {"top_p": 0.9}},
        {"sample_index": 3},
    ],
)
def test_every_answer_shaping_field_changes_the_key(change):
    assert cache_key(ChatRequest(**BASE)) != cache_key(ChatRequest(**{**BASE, **change}))


def test_key_ignores_the_api_key_and_timeout():
    plain = cache_key(ChatRequest(**BASE))
    assert plain == cache_key(ChatRequest(**BASE, api_key="sk-x", timeout_s=3.0))


async def test_lru_evicts_the_least_recently_used():
    from judgefuse.judges.transport import ChatResponse

    cache = LRUResponseCache(maxsize=2)
    response = ChatResponse(
        texts=["A"],
        first_token_top_logprobs=[[]],
        prompt_tokens=1,
        completion_tokens=1,
        latency_s=0.1,
        cost_usd=0.0,
        model="m",
    )
    await cache.set("a", response)
    await cache.set("b", response)
    assert await cache.get("a") is response  # "a" is now the most recent
    await cache.set("c", response)
    assert await cache.get("b") is None
    assert await cache.get("a") is response and len(cache) == 2


async def test_redis_cache_round_trips_and_keeps_samples_apart(redis_client, openai_stub, stub_actions):
    from judgefuse.judges.transport import RedisResponseCache

    openai_stub.script(
        stub_actions.Reply(texts=["A", "B"], top_logprobs=[("A", -0.1), ("B", -2.5)], usage=(9, 2)),
        stub_actions.Reply(texts=["B", "B"], top_logprobs=[("B", -0.3)], usage=(9, 2)),
    )
    client = with_cache(DirectOpenAIClient(api_base=openai_stub.url), RedisResponseCache(redis_client, ttl_s=60))
    try:
        requests = [
            ChatRequest(model="stub", messages=MESSAGES, n=2, logprobs=True, top_logprobs=2, sample_index=i)
            for i in range(2)
        ]
        fresh = [await client.complete(r) for r in requests]
        again = [await client.complete(r) for r in requests]
    finally:
        await client.aclose()
    assert len(openai_stub.requests) == 2
    assert [r.texts for r in fresh] == [["A", "B"], ["B", "B"]]
    for before, after in zip(fresh, again, strict=True):
        assert after.cached
        assert (after.texts, after.first_token_top_logprobs, after.prompt_tokens, after.model) == (
            before.texts,
            before.first_token_top_logprobs,
            before.prompt_tokens,
            before.model,
        )
    assert 0 < await redis_client.pttl("judgefuse:resp:" + cache_key(requests[0])) <= 60_000


async def test_unreadable_redis_entry_is_a_miss(redis_client):
    from judgefuse.judges.transport import RedisResponseCache

    cache = RedisResponseCache(redis_client, ttl_s=None)
    await redis_client.set("judgefuse:resp:bad", b"not json")
    assert await cache.get("bad") is None
    await redis_client.set("judgefuse:resp:deep", b"[" * 100_000)  # issue 41: a RecursionError escaped
    assert await cache.get("deep") is None
    await redis_client.set("judgefuse:resp:latin", b'{"texts": ["caf\xe9"]}')
    assert await cache.get("latin") is None
    assert await cache.get("absent") is None


def test_both_clients_follow_the_protocol():
    from judgefuse.judges.transport import ChatClient, LiteLLMClient, with_retries

    for client in (
        DirectOpenAIClient(),
        LiteLLMClient(),
        with_cache(DirectOpenAIClient()),
        with_retries(LiteLLMClient()),
    ):
        assert isinstance(client, ChatClient)
