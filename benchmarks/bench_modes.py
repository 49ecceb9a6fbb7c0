"""Calls per verdict for each confidence-elicitation mode, measured on real HTTP.

Usage: ``python benchmarks/bench_modes.py [--items 50]``

Each mode's judge (direct aiohttp path) judges ``--items`` pairs against the scripted
OpenAI-compatible stub (``tests/jf_test_support/openai_stub.py``, in this process) answering valid
SC/MP JSON and first-token logprobs; the table is what each mode costs a provider per verdict:
HTTP requests, samples drawn and tokens, with and without position swap, MP with and without the
provider's ``n``, and adaptive MP.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.judge import Judge
from judgefuse.judges.types import PairwiseItem

ITEM_RE = re.compile(r"question (q\d+)\b")
STUB = Path(__file__).resolve().parents[1] / "tests" / "jf_test_support" / "openai_stub.py"


def _stub_module():
    spec = importlib.util.spec_from_file_location("openai_stub", STUB)
    module = importlib.util.module_from_spec(spec)
    sys.modules["openai_stub"] = module
    spec.loader.exec_module(module)
    return module


CASES = [
    ("sc", {"mode": "sc"}),
    ("sc + position swap", {"mode": "sc", "position_swap": True}),
    ("logprob", {"mode": "logprob"}),
    ("mp-10 with n", {"mode": "mp", "samples": 10, "use_n": True}),
    ("mp-10 without n (seeded calls)", {"mode": "mp", "samples": 10, "use_n": False}),
    ("mp-10 adaptive (seeded calls)", {"mode": "mp", "samples": 10, "use_n": False, "adaptive": True}),
]


async def run(items: int) -> None:
    stub_module = _stub_module()
    rng = random.Random(0)
    p_a = {f"q{i}": rng.choice([0.1, 0.9, 0.9, 0.1, 0.55]) for i in range(items)}

    def handler(body):
        found = ITEM_RE.search(json.dumps(body["messages"]))
        item = found.group(1) if found else "q0"
        letter = "a" if random.Random(body.get("seed", 0) * 7919 + int(item[1:])).random() < p_a[item] else "b"
        if body.get("logprobs"):
            return stub_module.Reply(texts="A", top_logprobs=[("A", -0.2), ("B", -1.8)], usage=(400, 1))
        reply = json.dumps({"selected_output": f"Output ({letter})", "confidence_score": 80, "explanation": "x"})
        n = int(body.get("n") or 1)
        return stub_module.Reply(texts=[reply] * n, usage=(400, 40 * n))

    server = await stub_module.StubServer().start()
    server.record = False
    server.handler = handler
    pairs = [PairwiseItem(id=key, question=f"question {key}", answer_a="a", answer_b="b") for key in p_a]
    print(f"{'mode':<34}{'requests/verdict':>18}{'samples/verdict':>17}{'tokens/verdict':>16}{'ms/verdict':>12}")
    try:
        for label, fields in CASES:
            config = JudgeConfig(name="j", model="openai/stub", api_base=server.url, **fields)
            async with Judge(config) as judge:
                started = time.perf_counter()
                votes = [await judge.vote(pair) for pair in pairs]
                elapsed = time.perf_counter() - started
            requests = statistics.mean(vote.calls for vote in votes)
            samples = statistics.mean(len(vote.samples) or 1 for vote in votes)
            tokens = statistics.mean(vote.prompt_tokens + vote.completion_tokens for vote in votes)
            print(f"{label:<34}{requests:>18.2f}{samples:>17.2f}{tokens:>16.0f}{1000 * elapsed / items:>12.1f}")
    finally:
        await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(run(args.items))


if __name__ == "__main__":
    main()
