"""Structured outputs for SC: the verdict schema is requested; a refusal falls back once and is remembered."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import pytest

from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.judge import Judge
from judgefuse.judges.structured_output import forget_refusals, remembered_refusal
from judgefuse.judges.types import PairwiseItem
from judgefuse.prompts.parse import parse_judgment
from judgefuse.prompts.verdict_schema import VERDICT_SCHEMA

ITEM = PairwiseItem(id="q1", question="2+2?", answer_a="4", answer_b="5", label="A")
REPLY = json.dumps({"selected_output": "Output (a)", "confidence_score": 85, "explanation": "4 is right"})


@pytest.fixture(params=["direct", "litellm"])
async def make_judge(request: pytest.FixtureRequest, openai_stub) -> AsyncIterator[Callable[..., Judge]]:
    forget_refusals()
    made: list[Judge] = []

    def make(name: str = "j1", **fields) -> Judge:
        fields.setdefault("retries", {"attempts": 1, "base_delay_s": 0.0, "max_delay_s": 0.0})
        config = JudgeConfig(name=name, model="openai/stub", backend=request.param, api_base=openai_stub.url,
                             mode="sc", timeout_s=5.0, **fields)
        made.append(judge := Judge(config))
        return judge

    yield make
    for judge in made:
        await judge.aclose()
    forget_refusals()


async def test_sc_requests_the_verdict_schema(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts=REPLY))
    vote = await make_judge().vote(ITEM)
    assert (vote.choice, vote.confidence) == ("A", 0.85)
    sent = openai_stub.requests[0].body["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"] == VERDICT_SCHEMA


async def test_refusal_falls_back_once_and_is_remembered(make_judge, openai_stub, stub_actions):
    openai_stub.script(
        stub_actions.Status(400, "response_format is not supported", param="response_format"),
        stub_actions.Reply(texts=REPLY),
        stub_actions.Reply(texts=REPLY),
    )
    judge = make_judge()
    first = await judge.vote(ITEM)
    assert first.choice == "A" and any("structured output refused" in n for n in first.notes)
    assert "response_format" in openai_stub.requests[0].body
    assert "response_format" not in openai_stub.requests[1].body
    assert remembered_refusal("j1", "stub") or remembered_refusal("j1", "openai/stub")
    second = await judge.vote(ITEM)
    assert second.choice == "A" and not any("refused" in n for n in second.notes)
    assert len(openai_stub.requests) == 3 and "response_format" not in openai_stub.requests[2].body


async def test_refusal_named_only_in_the_message_also_falls_back(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Status(400, "unknown field: response_format"), stub_actions.Reply(texts=REPLY))
    vote = await make_judge().vote(ITEM)
    assert vote.choice == "A" and len(openai_stub.requests) == 2


async def test_other_bad_requests_are_not_mistaken_for_a_refusal(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Status(400, "prompt too long", param="messages"))
    vote = await make_judge().vote(ITEM)
    assert vote.choice is None and "prompt too long" in (vote.error or "")
    assert len(openai_stub.requests) == 1


async def test_switched_off_per_judge(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts=REPLY))
    await make_judge(structured_output=False).vote(ITEM)
    assert "response_format" not in openai_stub.requests[0].body


def test_every_reply_the_schema_admits_is_parsed() -> None:
    for choice in ("Output (a)", "Output (b)"):
        for score in (0, 2, 50, 99, 100):  # a bare 1 reads as the 0-1 scale (100%): the parser's rule
            parsed = parse_judgment(json.dumps({"selected_output": choice, "confidence_score": score, "explanation": ""}))
            assert parsed.choice == choice[-2].upper() and parsed.confidence == pytest.approx(score / 100)
