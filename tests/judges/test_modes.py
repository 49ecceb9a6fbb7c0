"""SC, MP, logprob and position swap, through real HTTP against the scripted stub, on both backends."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import AsyncIterator, Callable

import pytest

from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.judge import Judge
from judgefuse.judges.types import PairwiseItem

KINDS = ["direct", "litellm"]
ITEM = PairwiseItem(id="q1", question="What is 2+2?", answer_a="ANSWER-GOOD: 4", answer_b="ANSWER-BAD: 5", label="A")


def sc_json(choice: str, score: float, explanation: str = "because") -> str:
    return json.dumps({"selected_output": f"Output ({choice})", "confidence_score": score, "explanation": explanation})


def mp_json(choice: str) -> str:
    return json.dumps({"selected_output": f"Output ({choice})", "explanation": f"{choice} it is"})


def output_a_of(body: dict) -> str:
    user = body["messages"][-1]["content"]
    return re.split(r"</?output_a_[0-9a-f]+>", user)[1].strip()  # the block between its nonce tags


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def make_judge(kind: str, openai_stub) -> AsyncIterator[Callable[..., Judge]]:
    made: list[Judge] = []

    def make(**fields) -> Judge:
        fields.setdefault("timeout_s", 60.0)  # a bound on a stuck call; the timeout tests set theirs
        fields.setdefault("retries", {"attempts": 3, "base_delay_s": 0.0, "max_delay_s": 0.01})
        config = JudgeConfig(name="j1", model="openai/stub", backend=kind, api_base=openai_stub.url, **fields)
        judge = Judge(config)
        made.append(judge)
        return judge

    yield make
    for judge in made:
        await judge.aclose()


# ---------------------------------------------------------------- SC


async def test_sc_good_answer_gives_choice_confidence_and_usage(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts=sc_json("b", 80, "b is right"), usage=(30, 20)))
    vote = await make_judge(mode="sc").vote(ITEM)
    assert (vote.choice, vote.confidence, vote.p_a) == ("B", 0.8, pytest.approx(0.2))
    assert vote.mode == "sc" and vote.error is None
    assert vote.explanation == "b is right"
    assert (vote.calls, vote.prompt_tokens, vote.completion_tokens) == (1, 30, 20)
    assert vote.raw == sc_json("b", 80, "b is right")
    assert vote.latency_s > 0
    body = openai_stub.requests[0].body
    assert body["model"] == "stub" and body["temperature"] == 0


@pytest.mark.parametrize("score", [0, 10, 49])
async def test_sc_confidence_below_even_is_read_as_even_never_as_the_other_answer(
    make_judge, openai_stub, stub_actions, score
):
    """A small local model under the verdict schema answered "Output (a)" at confidence 0 on
    every pair: read literally (p_a = 0) it argued for B and flipped the fused verdict."""
    openai_stub.script(stub_actions.Reply(texts=sc_json("a", score)))
    vote = await make_judge(mode="sc").vote(ITEM)
    assert (vote.choice, vote.confidence, vote.p_a) == ("A", 0.5, 0.5)
    assert any("below 0.5" in note for note in vote.notes)


async def test_sc_garbage_text_is_an_invalid_vote_with_raw_kept(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts="I like turtles."))
    vote = await make_judge(mode="sc").vote(ITEM)
    assert vote.choice is None and vote.confidence is None
    assert vote.error and "no verdict" in vote.error
    assert vote.raw == "I like turtles." and vote.calls == 1


async def test_sc_choice_without_confidence_is_invalid(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts=mp_json("a")))
    vote = await make_judge(mode="sc").vote(ITEM)
    assert vote.choice is None and "confidence" in (vote.error or "")


def good_reply(stub_actions, mode: str):
    """A reply that gives a valid vote for A in ``mode`` (MP: 3 samples in one n=3 request)."""
    if mode == "sc":
        return stub_actions.Reply(texts=sc_json("a", 90))
    if mode == "mp":
        return stub_actions.Reply(texts=[mp_json("a"), mp_json("a"), mp_json("b")])
    return stub_actions.Reply(texts="A", top_logprobs=[("A", -0.1), ("B", -2.5)])


MODE_FIELDS = {"sc": {"mode": "sc"}, "mp": {"mode": "mp", "samples": 3}, "logprob": {"mode": "logprob"}}


@pytest.mark.parametrize("mode", list(MODE_FIELDS))
async def test_429_with_retry_after_then_success(mode, make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Status(429, retry_after="0.2"), good_reply(stub_actions, mode))
    vote = await make_judge(**MODE_FIELDS[mode]).vote(ITEM)
    assert vote.choice == "A" and vote.mode == mode and vote.error is None
    first, second = openai_stub.requests
    assert second.at - first.at >= 0.19  # the server's Retry-After was honoured
    assert first.body == second.body  # the same request again


@pytest.mark.parametrize("mode", list(MODE_FIELDS))
async def test_500_then_success(mode, make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Status(500), good_reply(stub_actions, mode))
    vote = await make_judge(**MODE_FIELDS[mode]).vote(ITEM)
    assert vote.choice == "A" and vote.mode == mode
    assert len(openai_stub.requests) == 2


@pytest.mark.parametrize("mode", list(MODE_FIELDS))
async def test_persistent_500_is_an_invalid_vote_not_an_exception(mode, make_judge, openai_stub, stub_actions):
    openai_stub.script(*[stub_actions.Status(503, message="overloaded")] * 3)
    vote = await make_judge(**MODE_FIELDS[mode]).vote(ITEM)
    assert vote.choice is None and vote.error.startswith("ServerError")
    assert len(openai_stub.requests) == 3


@pytest.mark.parametrize("mode", list(MODE_FIELDS))
async def test_timeout_is_an_invalid_vote(mode, make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Hang())
    vote = await make_judge(**MODE_FIELDS[mode], timeout_s=0.4, retries={"attempts": 1}).vote(ITEM)
    assert vote.choice is None and "timeout" in vote.error.lower()
    assert vote.latency_s < 2.0


# ---------------------------------------------------------------- MP


async def test_mp_one_request_with_n_majority_and_share(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts=[mp_json("a"), mp_json("a"), mp_json("b")], usage=(50, 30)))
    vote = await make_judge(mode="mp", samples=3).vote(ITEM)
    assert (vote.choice, vote.confidence) == ("A", pytest.approx(2 / 3))
    assert vote.samples == ["A", "A", "B"]
    assert vote.mode == "mp" and vote.calls == 1 and vote.explanation == "a it is"
    (request,) = openai_stub.requests
    assert request.body["n"] == 3 and request.body["temperature"] == 0.7


async def test_mp_n_rejected_falls_back_to_seeded_concurrent_calls(make_judge, openai_stub, stub_actions):
    openai_stub.reject_n = True
    openai_stub.handler = lambda body: stub_actions.Reply(texts=mp_json("b" if body["seed"] % 2 else "a"))
    vote = await make_judge(mode="mp", samples=4, seed=10).vote(ITEM)
    first, *samples = openai_stub.requests
    assert first.body["n"] == 4  # tried n first
    seeds = sorted(r.body["seed"] for r in samples)
    assert seeds == [10, 11, 12, 13] and all("n" not in r.body for r in samples)
    assert vote.samples == ["A", "B", "A", "B"]  # in seed order, whatever the arrival order
    assert vote.choice == "A" and vote.confidence == 0.5  # 2-2 tie: toward the first valid sample
    assert any("n unsupported" in note for note in vote.notes)
    assert any("tie" in note for note in vote.notes)
    assert vote.calls == 5


async def test_mp_use_n_false_sends_one_call_per_sample(make_judge, openai_stub, stub_actions):
    openai_stub.handler = lambda body: stub_actions.Reply(texts=mp_json("b"))
    vote = await make_judge(mode="mp", samples=3, use_n=False).vote(ITEM)
    assert len(openai_stub.requests) == 3 and vote.choice == "B" and vote.confidence == 1.0
    assert not any("n unsupported" in note for note in vote.notes)


async def test_mp_tie_goes_to_first_valid_sample_letter(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts=["garbage", mp_json("b"), mp_json("a")]))
    vote = await make_judge(mode="mp", samples=3).vote(ITEM)
    assert vote.samples == [None, "B", "A"]
    assert (vote.choice, vote.confidence) == ("B", 0.5)


async def test_mp_all_samples_invalid_is_an_invalid_vote(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts=["nope", "still nope"]))
    vote = await make_judge(mode="mp", samples=2).vote(ITEM)
    assert vote.choice is None and vote.samples == [None, None]
    assert vote.error == "no valid MP sample"


async def test_mp_samples_never_collapse_in_the_cache(make_judge, openai_stub, stub_actions):
    openai_stub.handler = lambda body: stub_actions.Reply(texts=mp_json("a" if body["seed"] == 0 else "b"))
    judge = make_judge(mode="mp", samples=3, use_n=False, cache=True)
    vote = await judge.vote(ITEM)
    assert vote.samples == ["A", "B", "B"] and len(openai_stub.requests) == 3
    again = await judge.vote(ITEM)
    assert again.samples == ["A", "B", "B"] and len(openai_stub.requests) == 3  # all three cached


# ---------------------------------------------------------------- logprob


async def test_logprob_confidence_is_the_two_letter_softmax(make_judge, openai_stub, stub_actions):
    top = [("A", -0.2), (" B", -1.5), ("The", -3.0)]
    openai_stub.script(stub_actions.Reply(texts="A", top_logprobs=top, usage=(40, 1)))
    vote = await make_judge(mode="logprob").vote(ITEM)
    # by hand: p_a = e^-0.2 / (e^-0.2 + e^-1.5) = 1 / (1 + e^-1.3) = 0.785835
    assert vote.p_a == pytest.approx(1 / (1 + math.exp(-1.3)))
    assert vote.p_a == pytest.approx(0.785835, abs=1e-6)
    assert (vote.choice, vote.confidence) == ("A", pytest.approx(0.785835, abs=1e-6))
    body = openai_stub.requests[0].body
    assert (body["max_tokens"], body["logprobs"], body["top_logprobs"], body["temperature"]) == (1, True, 5, 0)


async def test_logprob_neither_letter_listed_is_invalid_never_guessed(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts="The", top_logprobs=[("The", -0.1), ("I", -2.5)]))
    vote = await make_judge(mode="logprob").vote(ITEM)
    assert vote.choice is None and vote.p_a is None
    assert vote.error == "neither A nor B in top logprobs"


async def test_logprob_absent_falls_back_to_sc_with_a_note(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts="A", top_logprobs=None), stub_actions.Reply(texts=sc_json("b", 65)))
    vote = await make_judge(mode="logprob").vote(ITEM)
    assert vote.mode == "sc" and (vote.choice, vote.confidence) == ("B", 0.65)
    assert vote.notes[0].startswith("logprobs unsupported") and "fell back to sc" in vote.notes[0]
    assert vote.calls == 2
    assert openai_stub.requests[1].body.get("logprobs") is None


async def test_logprob_absent_without_fallback_is_invalid_with_reason(make_judge, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts="A", top_logprobs=None))
    vote = await make_judge(mode="logprob", fallback_mode="none").vote(ITEM)
    assert vote.choice is None and vote.error.startswith("logprobs unsupported")
    assert len(openai_stub.requests) == 1


# ---------------------------------------------------------------- position swap


async def test_position_swap_consistent_orders_average_p_a(make_judge, openai_stub, stub_actions):
    openai_stub.handler = lambda body: stub_actions.Reply(
        texts=sc_json("a" if "ANSWER-GOOD" in output_a_of(body) else "b", 90), usage=(10, 5)
    )
    vote = await make_judge(mode="sc", position_swap=True).vote(ITEM)
    assert (vote.choice, vote.p_a, vote.confidence) == ("A", pytest.approx(0.9), pytest.approx(0.9))
    assert vote.signals["position_inconsistent"] == 0.0
    assert (vote.calls, vote.prompt_tokens, vote.completion_tokens) == (2, 20, 10)
    assert {output_a_of(r.body) for r in openai_stub.requests} == {"ANSWER-GOOD: 4", "ANSWER-BAD: 5"}


async def test_position_swap_inconsistent_orders_are_flagged(make_judge, openai_stub, stub_actions):
    # The judge always picks the first position: 90 when the good answer is there, 60 otherwise.
    openai_stub.handler = lambda body: stub_actions.Reply(
        texts=sc_json("a", 90 if "ANSWER-GOOD" in output_a_of(body) else 60)
    )
    vote = await make_judge(mode="sc", position_swap=True).vote(ITEM)
    # AB: p_a 0.9; BA: picks a (= original B) at 0.6, so p_a 0.4; mean 0.65
    assert (vote.choice, vote.p_a) == ("A", pytest.approx(0.65))
    assert vote.signals["position_inconsistent"] == 1.0
    assert any("position inconsistent" in note for note in vote.notes)


async def test_position_swap_exact_tie_is_invalid(make_judge, openai_stub, stub_actions):
    openai_stub.handler = lambda body: stub_actions.Reply(texts=sc_json("a", 80))
    vote = await make_judge(mode="sc", position_swap=True).vote(ITEM)
    assert vote.choice is None and vote.p_a == 0.5
    assert vote.error.startswith("position tie")


async def test_position_swap_logprob_flips_the_second_order(make_judge, openai_stub, stub_actions):
    def handler(body):
        good_first = "ANSWER-GOOD" in output_a_of(body)
        return stub_actions.Reply(texts="A", top_logprobs=[("A", -0.1), ("B", -2.0)] if good_first else [("B", -0.3), ("A", -1.0)])

    openai_stub.handler = handler
    vote = await make_judge(mode="logprob", position_swap=True).vote(ITEM)
    p1 = 1 / (1 + math.exp(-1.9))
    p2 = 1 / (1 + math.exp(-0.7))  # BA order: B (the original A) at softmax(-0.3 vs -1.0)
    assert vote.p_a == pytest.approx((p1 + p2) / 2) and vote.choice == "A"
    assert vote.signals["position_inconsistent"] == 0.0


async def test_position_swap_one_failed_order_uses_the_other(make_judge, openai_stub, stub_actions):
    openai_stub.handler = lambda body: stub_actions.Reply(
        texts=sc_json("a", 75) if "ANSWER-GOOD" in output_a_of(body) else "no idea"
    )
    vote = await make_judge(mode="sc", position_swap=True).vote(ITEM)
    assert (vote.choice, vote.confidence) == ("A", 0.75)
    assert any("order BA invalid" in note for note in vote.notes)


async def test_max_concurrency_caps_calls_in_flight(make_judge, openai_stub, stub_actions):
    openai_stub.handler = lambda body: stub_actions.Reply(texts=mp_json("a"), delay_s=0.1)
    vote = await make_judge(mode="mp", samples=3, use_n=False, max_concurrency=1).vote(ITEM)
    assert vote.samples == ["A", "A", "A"]
    arrivals = sorted(r.at for r in openai_stub.requests)
    assert all(later - earlier >= 0.09 for earlier, later in itertools.pairwise(arrivals))  # one at a time


async def test_mp_plain_400_on_n_falls_back_when_use_n_is_auto(make_judge, openai_stub, stub_actions):
    """llama.cpp refuses n > 1 with a 400 that names no parameter: auto mode still falls back."""
    openai_stub.handler = lambda body: (
        stub_actions.Status(400, "Value must be between 1 <= value <= 1")
        if body.get("n", 1) > 1
        else stub_actions.Reply(texts=mp_json("b"))
    )
    vote = await make_judge(mode="mp", samples=3).vote(ITEM)
    assert (vote.choice, vote.confidence, vote.calls) == ("B", 1.0, 4)
    assert any(note.startswith("n unsupported (n=3 refused: ") for note in vote.notes)


async def test_mp_plain_400_on_n_is_an_error_when_use_n_is_forced(make_judge, openai_stub, stub_actions):
    openai_stub.handler = lambda body: stub_actions.Status(400, "bad request")
    vote = await make_judge(mode="mp", samples=3, use_n=True).vote(ITEM)
    assert not vote.valid and "400" in vote.error
    assert len(openai_stub.requests) == 1


# ---------------------------------------------------------------- prompt style


@pytest.mark.parametrize("mode", ["sc", "logprob"])
async def test_prompt_style_from_the_judge_config_reaches_the_wire(mode, make_judge, openai_stub, stub_actions):
    reply = sc_json("a", 70) if mode == "sc" else "A"
    top = [("A", -0.1), ("B", -2.0)] if mode == "logprob" else None
    openai_stub.script(
        stub_actions.Reply(texts=reply, top_logprobs=top), stub_actions.Reply(texts=reply, top_logprobs=top)
    )
    plain = await make_judge(mode=mode, prompt_style="plain").vote(ITEM)
    delimited = await make_judge(mode=mode).vote(ITEM)
    assert plain.choice == delimited.choice == "A"
    plain_user, delimited_user = (r.body["messages"][-1]["content"] for r in openai_stub.requests)
    assert "Output (a):\nANSWER-GOOD: 4" in plain_user and "<output_a_" not in plain_user
    assert "<output_a_" in delimited_user and output_a_of(openai_stub.requests[1].body) == "ANSWER-GOOD: 4"


def test_unknown_prompt_style_in_a_judge_entry_is_refused():
    with pytest.raises(ValueError, match="prompt_style"):
        JudgeConfig(name="j", model="openai/x", prompt_style="fancy")
