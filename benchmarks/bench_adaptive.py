"""Benchmark: adaptive MP against fixed MP-10 (calls per item, verdict agreement, accuracy).

Items have a known per-item probability P(A) that a sample answers A: 40% easy A (P(A) uniform
in [0.8, 1]), 40% easy B ([0, 0.2]), 20% hard ([0.3, 0.7]). Sample ``s`` of item ``i`` answers
A iff ``sha256("i:s") / 2**64 < P(A)``, so fixed and adaptive MP see the same sample sequence.
Accuracy is against the item's true majority letter (A iff P(A) > 0.5). Three runs:

1. ``simulated``: the pure sampler (:func:`judgefuse.judges.adaptive.sample_adaptively`) on
   ``--n-sim`` items, no HTTP;
2. ``stub``: ``--n-stub`` items through real HTTP (the scripted OpenAI-compatible server of
   ``tests/jf_test_support/openai_stub.py`` on loopback), the judge's own ``mp_vote``, one call per sample;
3. ``--local``: the real SmolLM2-135M through llama.cpp (1 thread) on a few short items.

Target: >= 50% fewer calls at <= 1 point accuracy loss.

Usage: python benchmarks/bench_adaptive.py [--n-sim 20000] [--n-stub 300] [--local]
       [--round-size 1] [--stop-confidence 0.9] [--min-samples 3]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from judgefuse.judges.adaptive import leader, sample_adaptively
from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.judge import Judge
from judgefuse.judges.types import Letter, PairwiseItem

STUB = Path(__file__).resolve().parents[1] / "tests" / "jf_test_support" / "openai_stub.py"


def unit(item: str, seed: int) -> float:
    return int.from_bytes(hashlib.sha256(f"{item}:{seed}".encode()).digest()[:8], "big") / 2**64


def sample_letter(item: str, p_a: float, seed: int) -> Letter:
    return "A" if unit(item, seed) < p_a else "B"


def item_probabilities(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        u = rng.random()
        out.append(rng.uniform(0.8, 1.0) if u < 0.4 else rng.uniform(0.0, 0.2) if u < 0.8 else rng.uniform(0.3, 0.7))
    return out


def compare(fixed: Sequence[Sequence[Letter | None]], adaptive: Sequence[Sequence[Letter | None]],
            truth: Sequence[Letter | None] | None) -> dict[str, float]:
    f = [leader(s) for s in fixed]
    a = [leader(s) for s in adaptive]
    n = len(fixed)
    out = {
        "calls_fixed": sum(len(s) for s in fixed) / n,
        "calls_adaptive": sum(len(s) for s in adaptive) / n,
        "agreement": sum(x == y for x, y in zip(f, a, strict=True)) / n,
    }
    out["saving"] = 1 - out["calls_adaptive"] / out["calls_fixed"]
    if truth is not None:
        out["acc_fixed"] = sum(x == t for x, t in zip(f, truth, strict=True)) / n
        out["acc_adaptive"] = sum(x == t for x, t in zip(a, truth, strict=True)) / n
    return out


def show(name: str, r: dict[str, float], seconds: float) -> None:
    acc = ""
    if "acc_fixed" in r:
        acc = (f"  accuracy fixed {100 * r['acc_fixed']:.2f}% adaptive {100 * r['acc_adaptive']:.2f}% "
               f"(loss {100 * (r['acc_fixed'] - r['acc_adaptive']):+.2f} pt)")
    print(f"{name:<10} calls/item fixed {r['calls_fixed']:.2f} adaptive {r['calls_adaptive']:.2f} "
          f"({100 * r['saving']:.1f}% fewer)  verdict agreement {100 * r['agreement']:.2f}%{acc}  [{seconds:.1f}s]")


async def simulated(n: int, rule: dict, seed: int) -> None:
    started = time.perf_counter()
    probs = item_probabilities(n, seed)
    fixed, adaptive = [], []
    for i, p in enumerate(probs):
        seq = [sample_letter(f"i{i}", p, s) for s in range(10)]

        async def draw(start: int, count: int, seq: list[Letter] = seq) -> list[Letter | None]:
            return list(seq[start : start + count])

        fixed.append(seq)
        adaptive.append((await sample_adaptively(draw, max_samples=10, **rule)).samples)
    truth = ["A" if p > 0.5 else "B" for p in probs]
    show("simulated", compare(fixed, adaptive, truth), time.perf_counter() - started)


def _stub_module():
    spec = importlib.util.spec_from_file_location("judgefuse_bench_openai_stub", STUB)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def mp_text(letter: str) -> str:
    return json.dumps({"selected_output": f"Output ({letter.lower()})", "explanation": "scripted"})


async def stub(n: int, rule: dict, seed: int) -> None:
    started = time.perf_counter()
    module = _stub_module()
    probs = item_probabilities(n, seed)
    server = await module.StubServer().start()
    server.record = False

    def handler(body: dict):
        user = body["messages"][-1]["content"]
        index = int(user.split("ITEM-", 1)[1].split("<", 1)[0].split()[0])
        first = int(body.get("seed", 0))
        texts = [mp_text(sample_letter(f"x{index}", probs[index], first + j)) for j in range(int(body.get("n") or 1))]
        return module.Reply(texts=texts, usage=(40, 10))

    server.handler = handler
    items = [PairwiseItem(id=f"x{i}", question="q", answer_a=f"ITEM-{i}", answer_b="other") for i in range(n)]
    common = {"name": "j", "model": "openai/stub", "backend": "direct", "api_base": server.url, "mode": "mp",
              "samples": 10, "use_n": False, "max_concurrency": 64}
    try:
        async with Judge(JudgeConfig(**common)) as fixed_judge, Judge(JudgeConfig(**common, adaptive=True, **rule)) as adaptive_judge:
            fixed = await asyncio.gather(*(fixed_judge.vote(item) for item in items))
            adaptive = await asyncio.gather(*(adaptive_judge.vote(item) for item in items))
    finally:
        await server.stop()
    truth = ["A" if p > 0.5 else "B" for p in probs]
    r = compare([v.samples for v in fixed], [v.samples for v in adaptive], truth)
    r["http_calls_fixed"] = sum(v.calls for v in fixed) / n
    r["http_calls_adaptive"] = sum(v.calls for v in adaptive) / n
    show("stub", r, time.perf_counter() - started)
    print(f"           HTTP calls/item fixed {r['http_calls_fixed']:.2f} adaptive {r['http_calls_adaptive']:.2f}; "
          f"tokens/item fixed {sum(v.prompt_tokens + v.completion_tokens for v in fixed) / n:.0f} "
          f"adaptive {sum(v.prompt_tokens + v.completion_tokens for v in adaptive) / n:.0f}")


LOCAL_ITEMS = [
    PairwiseItem(id="l1", question="What is 2 + 2?", answer_a="4", answer_b="5"),
    PairwiseItem(id="l2", question="What is the capital of France?", answer_a="Berlin", answer_b="Paris"),
    PairwiseItem(id="l3", question="Which is a mammal?", answer_a="A whale", answer_b="A shark"),
]


async def local(rule: dict, samples: int) -> None:
    from judgefuse.judges.local import LocalModelServer, resolve_gguf

    started = time.perf_counter()
    async with LocalModelServer(resolve_gguf("smollm2"), threads=1, ctx_size=2048, startup_timeout=120) as srv:
        common = {"name": "smol", "model": "openai/smollm2", "backend": "direct", "api_base": srv.base_url,
                  "mode": "mp", "samples": samples, "use_n": False, "max_tokens": 48, "timeout_s": 300.0,
                  "max_concurrency": 1}
        runs = []
        for adaptive in (False, True):
            extra = rule if adaptive else {}
            async with Judge(JudgeConfig(**common, adaptive=adaptive, **extra)) as judge:
                runs.append([await judge.vote(item) for item in LOCAL_ITEMS])
    fixed, adapt = runs
    r = compare([v.samples for v in fixed], [v.samples for v in adapt], None)
    show("smollm2", r, time.perf_counter() - started)
    for f, a in zip(fixed, adapt, strict=True):
        print(f"           fixed {f.samples} -> {f.choice}; adaptive {a.samples} -> {a.choice}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-sim", type=int, default=20_000)
    parser.add_argument("--n-stub", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--round-size", type=int, default=1)
    parser.add_argument("--min-samples", type=int, default=3)
    parser.add_argument("--stop-confidence", type=float, default=0.9)
    parser.add_argument("--local", action="store_true", help="also run the real SmolLM2 (slow: ~1 min)")
    parser.add_argument("--local-samples", type=int, default=10)
    args = parser.parse_args()
    rule = {"round_size": args.round_size, "min_samples": args.min_samples, "stop_confidence": args.stop_confidence}
    print(f"adaptive rule: {rule}; max 10 samples")
    asyncio.run(simulated(args.n_sim, rule, args.seed))
    if args.n_stub:
        asyncio.run(stub(args.n_stub, rule, args.seed + 4))
    if args.local:
        asyncio.run(local(rule, args.local_samples))


if __name__ == "__main__":
    main()
