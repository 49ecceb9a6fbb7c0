"""``judgefuse judge --batch`` against the OpenAI-compatible stub on loopback, beside the online run.

    python benchmarks/bench_batch_judge.py --pairs 1000 > benchmarks/results/bench_batch_judge.txt
    python benchmarks/bench_batch_judge.py --pairs 1000 --provider anthropic \
        > benchmarks/results/bench_batch_judge_anthropic.txt

It judges the same N pairs twice with one two-judge panel: an SC judge, and a logprob judge
with position swap (3 calls a pair). The first run is online (``--concurrency 8``), the second
goes through the stub's ``/v1/files`` and ``/v1/batches`` endpoints. 2% of the SC requests
fail with HTTP 500 in both runs. The batch run is interrupted while its batches are in
progress and then resumed. The script prints wall times, requests, batches, cost and how many
votes are identical in the two runs. The stub answers instantly, so the batch wall time is
judgefuse's own work (two judging rounds over the pairs, plus the file I/O), not a provider's
queue.

``--provider anthropic``: one Anthropic SC judge (``anthropic/claude-haiku-4-5``, priced in
litellm's table) instead. The online run is litellm's Anthropic client against the stub's
``/v1/messages``; the batch run goes through the stub's message batches (``POST
/v1/messages/batches``, retrieve, ``results_url``); 2% of the requests fail with an overloaded
error (529) in both runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from jf_test_support import openai_stub as S  # noqa: E402
from jf_test_support.judge_cli import parse  # noqa: E402

from judgefuse.evaluation.judge_command import arun_judge  # noqa: E402
from judgefuse.evaluation.loaders import read_votes  # noqa: E402
from judgefuse.judges.batch import state_path  # noqa: E402

FAIL = "please fail"


def reply(body: dict) -> S.Action:
    import re

    user = body["messages"][-1]["content"]
    a_wins = "correct" in re.split(r"</?output_a_[0-9a-f]+>", user)[1]
    if body.get("logprobs"):
        top = [("A", -0.2), ("B", -1.8)] if a_wins else [("B", -0.3), ("A", -1.5)]
        return S.Reply(texts=top[0][0], top_logprobs=top, usage=(90, 1))
    if FAIL in user:
        return S.Status(500, "scripted failure")
    text = json.dumps({"selected_output": f"Output ({'a' if a_wins else 'b'})", "confidence_score": 80, "explanation": "x"})
    return S.Reply(texts=text, usage=(100, 10))


def write_inputs(folder: Path, n: int, url: str) -> tuple[Path, Path]:
    pairs = folder / "pairs.jsonl"
    with pairs.open("w", encoding="utf-8") as handle:
        for i in range(n):
            a_wins = i % 3 != 0
            handle.write(json.dumps({
                "pair_id": f"p{i}", "question": f"question {i}" + (f" {FAIL}" if i % 50 == 0 else ""),
                "response_A": "the correct answer" if a_wins else "wrong",
                "response_B": "wrong" if a_wins else "the correct answer", "label": "A>B" if a_wins else "B>A",
            }) + "\n")  # fmt: skip
    panel = folder / "panel.yaml"
    judge = "    model: openai/gpt-4o-mini\n    backend: direct\n    api_base: {url}\n    retries: {{attempts: 1}}\n"
    panel.write_text(
        "name: bench\nfusion: majority\njudges:\n  - name: sc-judge\n" + judge.format(url=url)
        + "  - name: logprob-judge\n    mode: logprob\n    position_swap: true\n" + judge.format(url=url),
        encoding="utf-8",
    )  # fmt: skip
    return pairs, panel


ANTHROPIC_KEY = "sk-ant-bench"


def anthropic_reply(body: dict) -> S.Action:
    if FAIL in body["messages"][-1]["content"]:
        return S.Status(529, "scripted overload")
    return reply(body)


def anthropic_panel(folder: Path, url: str) -> Path:
    panel = folder / "panel-anthropic.yaml"
    panel.write_text(
        "name: bench\nfusion: majority\njudges:\n  - name: claude\n    model: anthropic/claude-haiku-4-5\n"
        f"    api_base: '{url.removesuffix('/v1')}'\n    api_key_env: ANTHROPIC_API_KEY\n"
        "    structured_output: false\n    timeout_s: 60\n    retries: {attempts: 1}\n",
        encoding="utf-8",
    )  # fmt: skip
    return panel


async def main(n: int, provider: str = "openai") -> None:
    stub = await S.StubServer().start()
    anthropic = provider == "anthropic"
    stub.handler = anthropic_reply if anthropic else reply
    batches = stub.anthropic if anthropic else stub.batches
    n_batches = 1 if anthropic else 2
    folder = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    pairs, panel = write_inputs(folder, n, stub.url)
    if anthropic:
        os.environ["ANTHROPIC_API_KEY"] = ANTHROPIC_KEY
        stub.require_key = ANTHROPIC_KEY
        panel = anthropic_panel(folder, stub.url)
    online, batch = folder / "online.jsonl", folder / "batch.jsonl"

    started = time.perf_counter()
    await arun_judge(parse(str(pairs), "--panel", str(panel), "--out", str(online), "--quiet", "--concurrency", "8"))
    online_s = time.perf_counter() - started
    online_requests = len(stub.requests)
    stub.requests.clear()

    args = parse(str(pairs), "--panel", str(panel), "--out", str(batch), "--quiet", "--batch", "--batch-poll-s", "0.05")
    batches.hold = True
    started = time.perf_counter()
    task = asyncio.create_task(arun_judge(args))
    while not (state_path(batch).exists() and sum(1 for b in json.loads(state_path(batch).read_text())["batches"] if b["batch_id"]) == n_batches):
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    interrupted_s = time.perf_counter() - started
    created_before = batches.created
    batches.hold = False
    started = time.perf_counter()
    await arun_judge(args)
    resumed_s = time.perf_counter() - started
    await stub.stop()

    on = {j.item.id: j for j in read_votes(online)}
    off = {j.item.id: j for j in read_votes(batch)}

    def key(v):
        return (v.judge, v.choice, v.confidence, v.p_a, v.raw, v.error, v.calls, v.prompt_tokens, v.completion_tokens)

    def status_only(v):  # litellm's online error text drops the provider's message after the status
        return (*key(v)[:5], v.error and ": ".join(v.error.split(": ")[:2]), *key(v)[6:])

    identical = sum(1 for i in on if [key(v) for v in on[i].votes] == [key(v) for v in off[i].votes])
    up_to_text = sum(1 for i in on if [status_only(v) for v in on[i].votes] == [status_only(v) for v in off[i].votes])
    cost_on = sum(v.cost_usd for j in on.values() for v in j.votes)
    cost_off = sum(v.cost_usd for j in off.values() for v in j.votes)
    if anthropic:
        lines = sum(len(b.requests) for b in stub.anthropic.batches.values())
        print(f"\npairs: {n}; panel: one Anthropic SC judge (1 request a pair, message batches); "
              "2% of requests fail (529 overloaded)")  # fmt: skip
    else:
        lines = sum(len(b.lines) for b in stub.batches.batches.values())
        print(f"\npairs: {n}; panel: SC + logprob with position swap (3 requests a pair); 2% of SC requests fail (HTTP 500)")
    print(f"online  (--concurrency 8): {online_s:6.2f} s wall, {online_requests} chat requests")
    print(f"batch   interrupted after {interrupted_s:.2f} s with {created_before} batches in progress; "
          f"resumed run {resumed_s:.2f} s wall")  # fmt: skip
    print(f"batch   batches created in total: {batches.created} (resume created {batches.created - created_before}), "
          f"{lines} batch lines, {len(stub.requests)} chat requests")  # fmt: skip
    print(f"items   online {len(on)}, batch {len(off)}; identical votes on {identical} of {len(on)} items"
          f"{f' ({up_to_text - identical} more differ only in the error text after the HTTP status)' if up_to_text > identical else ''}")  # fmt: skip
    print(f"cost    online ${cost_on:.6f}, batch ${cost_off:.6f} (ratio {cost_off / cost_on:.3f})")


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--pairs", type=int, default=1000)
    cli.add_argument("--provider", choices=("openai", "anthropic"), default="openai")
    options = cli.parse_args()
    asyncio.run(main(options.pairs, options.provider))
