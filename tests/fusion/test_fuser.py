"""The LLM fuser against the scripted OpenAI-compatible stub (real HTTP on loopback)."""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import AsyncIterator
from types import ModuleType

import pytest
from jf_test_support import openai_stub as S

from judgefuse.fusion import registry
from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.types import JudgeVote, PairwiseItem

ITEM = PairwiseItem(id="f1", question="2+2?", answer_a="4", answer_b="5", label="A")
VOTES = [
    JudgeVote(judge="j1", mode="sc", choice="A", confidence=0.9, explanation="4 is right"),
    JudgeVote(judge="j2", mode="sc", choice="B", confidence=0.6, explanation="5 looks fine"),
    JudgeVote(judge="j3", mode="sc", choice="A", confidence=0.7, explanation="arithmetic"),
    JudgeVote.invalid("j4", "sc", "timeout"),
]




@pytest.fixture(scope="module")
def fuser_module() -> ModuleType:
    return importlib.import_module("judgefuse.fusion.fuser")


@pytest.fixture
async def stub() -> AsyncIterator[object]:
    server = await S.StubServer().start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def fuser(fuser_module, stub):
    config = JudgeConfig(
        name="fuser",
        model="openai/fuser-model",
        api_base=stub.url,
        timeout_s=5,
        retries={"attempts": 2, "base_delay_s": 0, "max_delay_s": 0},
    )
    made = registry.get_method("fuser", judge=config)
    yield made
    await made.aclose()


async def test_valid_fuser_json_gives_its_choice_and_confidence(fuser, stub):
    reply = {"selected_output": "Output (a)", "confidence_score": 92, "explanation": "two judges and arithmetic agree"}
    stub.script(S.Reply(texts=json.dumps(reply)))
    verdict = await fuser.afuse(ITEM, VOTES)
    assert (verdict.choice, verdict.confidence, verdict.p_a) == ("A", 0.92, pytest.approx(0.92))
    assert verdict.method == "fuser" and (verdict.n_valid, verdict.n_invalid) == (3, 1)
    assert verdict.explanation == "two judges and arithmetic agree"
    assert verdict.timings["fuser_s"] > 0
    (request,) = stub.requests
    user = request.body["messages"][-1]["content"]
    assert "4 is right" in user and "5 looks fine" in user  # every judge's explanation is shown
    assert request.body["temperature"] == 0 and request.body["model"] == "fuser-model"


async def test_fuser_choosing_b_sets_p_a_from_its_confidence(fuser, stub):
    stub.script(S.Reply(texts='{"selected_output": "Output (b)", "confidence_score": 70, "explanation": "x"}'))
    verdict = await fuser.afuse(ITEM, VOTES)
    assert (verdict.choice, verdict.confidence, verdict.p_a) == ("B", 0.7, pytest.approx(0.3))


async def test_fuser_confidence_below_even_is_read_as_even(fuser, stub):
    """The fuser reads verdict JSON through the same rule as an SC judge: "Output (b)" at 10
    is a coin flip for B, never a vote for A."""
    stub.script(S.Reply(texts='{"selected_output": "Output (b)", "confidence_score": 10, "explanation": "x"}'))
    verdict = await fuser.afuse(ITEM, VOTES)
    assert (verdict.choice, verdict.confidence, verdict.p_a) == ("B", 0.5, 0.5)
    assert any("below 0.5" in note for note in verdict.notes)


async def test_garbage_falls_back_to_majority_with_a_note(fuser, stub):
    stub.script(S.Reply(texts="As an AI, I cannot decide."))
    verdict = await fuser.afuse(ITEM, VOTES)
    majority = registry.get_method("majority")(VOTES)
    assert (verdict.choice, verdict.confidence) == (majority.choice, majority.confidence) == ("A", pytest.approx(2 / 3))
    assert verdict.method == "fuser"
    assert verdict.notes[0].startswith("fuser output invalid: ") and verdict.notes[0].endswith("; fell back to majority")


async def test_transport_failure_falls_back_with_the_reason(fuser, stub):
    stub.script(S.Status(503), S.Status(503))
    verdict = await fuser.afuse(ITEM, VOTES)
    assert verdict.choice == "A"
    assert verdict.notes[0].startswith("fuser call failed: ServerError")


async def test_named_fallback_method_is_used(fuser_module, stub):
    config = JudgeConfig(name="fuser", model="openai/f", api_base=stub.url, timeout_s=5)
    fuser = registry.get_method("fuser", judge=config, fallback="confidence_weighted")
    try:
        stub.script(S.Reply(texts="???"))
        verdict = await fuser.afuse(ITEM, VOTES)
    finally:
        await fuser.aclose()
    assert verdict.confidence == pytest.approx(1.6 / 2.2)
    assert verdict.notes[0].endswith("fell back to confidence_weighted")


def test_sync_call_raises_a_clear_error(fuser_module):
    config = JudgeConfig(name="fuser", model="openai/f", api_base="http://127.0.0.1:9/v1")
    fuser = registry.get_method("fuser", judge=config)
    assert fuser.requires_item is True
    with pytest.raises(fuser_module.FuserNeedsItem, match="afuse"):
        fuser(VOTES)


def test_fuser_without_a_model_is_refused(fuser_module):
    with pytest.raises(ValueError, match="the fuser needs a model"):
        registry.get_method("fuser")
    with pytest.raises(registry.UnknownFusionMethod):
        registry.get_method("fuser", judge=JudgeConfig(name="f", model="m"), fallback="nope")
