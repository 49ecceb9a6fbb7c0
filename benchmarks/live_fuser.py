"""LLM-as-a-Fuser, live, over a votes file that a panel already recorded.

    python benchmarks/live_fuser.py benchmarks/results/local_panel_llmbar_natural100.jsonl \
        --judges qwen-logprob-plain,qwen-sc-plain,smollm2-logprob-plain \
        --model qwen2.5-coder-1.5b --limit 50 --out benchmarks/results/local_fuser_llmbar_natural50.jsonl

A local llama.cpp server is started for the fuser model; each of the first ``--limit`` items is
fused by :class:`~judgefuse.fusion.fuser.LLMFuser` (the fuser prompt, structured output) from the
votes of ``--judges``. Each output line is the item with those judges' votes plus the fuser's
verdict recorded as one more vote, named ``fuser-<model>`` (mode ``sc``: the fuser answers in the
SC shape), so ``judgefuse eval OUT`` shows the fuser as a row beside the judges it read. A
verdict where the fuser's reply was unusable (the method fell back to majority) is recorded as an
invalid vote with the fuser's note, so the ``inv`` column counts the fuser's failures instead of
hiding them behind the fallback. Resumable: ids already in ``--out`` are skipped.

The fusion rows ``judgefuse eval`` prints for OUT fuse the fuser's vote as well; read the
panel's fusion rows from the panel file (``benchmarks/local_panel_table.py`` prints both).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from judgefuse.evaluation.loaders import VotesWriter, done_ids
from judgefuse.evaluation.loaders.votes import read_votes
from judgefuse.fusion import get_method
from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.local.config import LocalModelConfig
from judgefuse.judges.types import JudgedItem, JudgeVote


def fuser_vote(name: str, verdict) -> JudgeVote:  # type: ignore[no-untyped-def]
    """The fuser's verdict as a vote; a fallback verdict (the fuser's reply unusable) is invalid."""
    failed = [note for note in verdict.notes if note.startswith(("fuser output invalid", "fuser call failed", "fuser not called"))]
    if failed:
        return JudgeVote.invalid(name, "sc", failed[0], notes=list(verdict.notes))
    return JudgeVote(
        judge=name,
        mode="sc",
        choice=verdict.choice,
        confidence=verdict.confidence,
        p_a=verdict.p_a,
        explanation=verdict.explanation or "",
        latency_s=verdict.timings.get("fuser_s", 0.0),
        calls=1,
        notes=list(verdict.notes),
    )


async def run(args: argparse.Namespace) -> None:
    judges = [name.strip() for name in args.judges.split(",")] if args.judges else None
    items = read_votes(args.votes)[: args.limit]
    done = done_ids(args.out)
    todo = [judged for judged in items if judged.item.id not in done]
    server = LocalModelConfig(model=args.model, threads=args.threads, ctx_size=args.ctx_size).build()
    await server.astart()
    name = f"fuser-{Path(args.model).stem if args.model.endswith('.gguf') else args.model}"
    config = JudgeConfig(
        name=name,
        model=f"openai/{args.model}",
        api_base=server.base_url,
        mode="sc",
        structured_output=True,
        max_tokens=args.max_tokens,
        timeout_s=900,
        max_concurrency=1,
    )
    fuser = get_method("fuser", judge=config)
    writer = VotesWriter(args.out)
    started = time.perf_counter()
    try:
        with Progress(
            TextColumn("fuser"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), disable=args.quiet
        ) as progress:
            task = progress.add_task("fuse", total=len(todo))
            for judged in todo:
                votes = [vote for vote in judged.votes if judges is None or vote.judge in judges]
                verdict = await fuser.afuse(judged.item, votes)
                writer.write(JudgedItem(item=judged.item, votes=[*votes, fuser_vote(name, verdict)]))
                progress.advance(task)
    finally:
        writer.close()
        await fuser.aclose()
        await server.astop()
    print(f"fused {len(todo)} items ({len(done)} already done) in {time.perf_counter() - started:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("votes", type=Path, help="votes JSONL recorded by `judgefuse judge`")
    parser.add_argument("--judges", default="", help="comma-separated judges the fuser reads (default: all)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="local model name or .gguf path")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ctx-size", type=int, default=4096)
    parser.add_argument("--max-tokens", type=int, default=192)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quiet", action="store_true")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
