"""``judgefuse judge``: run a judge panel on one pair or a JSONL file of pairs.

    judgefuse judge --question Q --answer-a A --answer-b B [--panel panel.yaml] [--out votes.jsonl]
    judgefuse judge pairs.jsonl --out votes.jsonl [--panel panel.yaml] [--concurrency 4] [--limit N]

Input lines may be JudgeBench pairs (``pair_id``, ``question``, ``response_A``, ``response_B``,
optional ``label`` ``"A>B"``/``"B>A"``, ``source``), our :class:`PairwiseItem` JSON, or lines of
a votes file (``{"item": ...}``: the items are judged again), or the Hugging Face preference
layout (``chosen`` / ``rejected``); a ``.parquet`` file holds the same records one a row
(:mod:`~judgefuse.evaluation.loaders.parquet`). ``--panel`` defaults to the
packaged no-API-key panel (a local SmolLM2; see ``judgefuse/judges/local/INSTALL.md``).

``--out`` is written with :class:`~judgefuse.evaluation.loaders.VotesWriter` as each item
finishes (one fsynced line per item), so Ctrl-C loses no finished item, and a rerun skips the
ids already in the file (:func:`~judgefuse.evaluation.loaders.done_ids`). ``--limit N`` takes
the first N items of the input (before skipping done ones, so a rerun sees the same slice).
``--concurrency`` items are in flight at once; each item asks every judge concurrently.
At the end one summary line gives items, calls, tokens, cost and wall time.

``--batch`` sends a file run's requests through the provider's batch API instead, at half the
price and resumably (:mod:`judgefuse.evaluation.judge_batch`). ``--executor ray`` spreads a file
run over a Ray cluster, with the same votes file, resume, bar and summary
(:mod:`judgefuse.evaluation.judge_ray`; the ``ray`` extra).

Fusion is not applied to a file run (``judgefuse eval`` fuses and scores the votes file); for a
single pair the panel's fusion method is applied and printed. A ``fusion: fuser`` panel needs a
``fuser:`` model entry.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console

from judgefuse.errors import InputError
from judgefuse.evaluation.judge_batch import add_batch_arguments, judge_in_batches
from judgefuse.evaluation.judge_ray import RayRunReport, add_ray_arguments, check_ray_arguments, judge_on_ray
from judgefuse.evaluation.loaders import DatasetError, VotesWriter, done_ids, load_csv
from judgefuse.evaluation.loaders.csv_pairs import SUFFIX as CSV_SUFFIX
from judgefuse.evaluation.loaders.errors import from_validation
from judgefuse.evaluation.loaders.parquet import iter_records
from judgefuse.evaluation.progress import progress_bar
from judgefuse.judges.batch import BatchAPIError, state_path
from judgefuse.judges.config import PanelConfig, load_panel_config
from judgefuse.judges.panel import Panel, default_panel_path
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

__all__ = [
    "JudgeCommandError",
    "JudgeRunSummary",
    "add_commands",
    "arun_judge",
    "judge_items",
    "read_pairs",
    "run_judge",
]

_LABELS = {"A>B": "A", "B>A": "B"}


def plural(n: int, noun: str) -> str:
    """``1 item``, ``2 items``, ``0 items``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class JudgeCommandError(InputError, ValueError):
    """Arguments or a panel that the command cannot run with."""


# ---------------------------------------------------------------- input


def _pair_from_judgebench(record: dict[str, Any], path: Path, line: int) -> PairwiseItem:
    for key in ("question", "response_A", "response_B"):
        if not isinstance(record.get(key), str):
            raise DatasetError(path, "required text field is missing or not a string", line=line, field=key)
    label = record.get("label")
    if label is not None and label not in _LABELS:
        raise DatasetError(path, f"unknown label {label!r} (expected 'A>B' or 'B>A')", line=line, field="label")
    source = record.get("source")
    metadata: dict[str, Any] = {"source": source} if isinstance(source, str) else {}
    return PairwiseItem(
        id=str(record["pair_id"]),
        question=record["question"],
        answer_a=record["response_A"],
        answer_b=record["response_B"],
        label=_LABELS.get(label) if label is not None else None,  # type: ignore[arg-type]
        category=(source.split("-", 1)[0] or None) if isinstance(source, str) else None,
        metadata=metadata,
    )


def _text_of(value: Any) -> str | None:
    """A response as text: a string, or a chat (list of messages): its last assistant turn."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        turns = [m for m in value if isinstance(m, dict) and isinstance(m.get("content"), str)]
        answers = [m["content"] for m in turns if m.get("role") == "assistant"]
        if answers:
            return str(answers[-1])
    return None


def _prompt_of(record: dict[str, Any]) -> str | None:
    for key in ("prompt", "question", "instruction"):
        if isinstance(record.get(key), str):
            return str(record[key])
    chosen = record.get("chosen")
    if isinstance(chosen, list):  # conversational layout: the prompt is the last user turn
        users = [m["content"] for m in chosen if isinstance(m, dict) and m.get("role") == "user"]
        if users and isinstance(users[-1], str):
            return str(users[-1])
    return None


def chosen_is_a(item_id: str) -> bool:
    """Where the chosen answer goes: A or B by a hash of the id, never always A (a fixed slot
    would put the label's position bias into every judge's score)."""
    return hashlib.sha256(item_id.encode()).digest()[0] % 2 == 0


def _pair_from_preference(record: dict[str, Any], path: Path, line: int) -> PairwiseItem:
    """The Hugging Face preference layout (``prompt``, ``chosen``, ``rejected``; docs/offline-evaluation.md)."""
    chosen, rejected, prompt = _text_of(record.get("chosen")), _text_of(record.get("rejected")), _prompt_of(record)
    for name, value in (("chosen", chosen), ("rejected", rejected), ("prompt", prompt)):
        if value is None:
            raise DatasetError(path, "missing, or neither text nor a chat with an assistant turn", line=line, field=name)
    assert chosen is not None and rejected is not None and prompt is not None
    raw_id = next((record[k] for k in ("id", "prompt_id", "pair_id") if isinstance(record.get(k), (str, int))), None)
    item_id = str(raw_id) if raw_id is not None else f"line-{line}"
    a_first = chosen_is_a(item_id)
    category = next((record[k] for k in ("subset", "source", "category") if isinstance(record.get(k), str)), None)
    return PairwiseItem(
        id=item_id,
        question=prompt,
        answer_a=chosen if a_first else rejected,
        answer_b=rejected if a_first else chosen,
        label="A" if a_first else "B",
        category=category or None,
    )


def read_pairs(path: str | Path) -> list[PairwiseItem]:
    """Items from a JSONL or Parquet file (module docstring; :mod:`~judgefuse.evaluation.loaders.parquet`) or a
    CSV file (:mod:`~judgefuse.evaluation.loaders.csv_pairs`; its vote columns are not read here); a fault is a
    DatasetError naming file and line (the row, for Parquet)."""
    path = Path(path)
    if path.suffix.lower() == CSV_SUFFIX:
        return [judged.item for judged in load_csv(path)]
    items: list[PairwiseItem] = []
    first_line: dict[str, int] = {}
    for line, record in iter_records(path):
        try:
            if "chosen" in record or "rejected" in record:  # one missing is this layout's error
                item = _pair_from_preference(record, path, line)
            elif "pair_id" in record:
                item = _pair_from_judgebench(record, path, line)
            elif "item" in record:
                item = JudgedItem.model_validate(record).item
            else:
                item = PairwiseItem.model_validate(record)
        except ValidationError as exc:
            raise from_validation(exc, path, line) from exc
        if item.id in first_line:
            raise DatasetError(
                path, f"duplicate item id {item.id!r} (first at line {first_line[item.id]})", line=line, field="id"
            )
        first_line[item.id] = line
        items.append(item)
    return items


# ---------------------------------------------------------------- running


@dataclass
class JudgeRunSummary:
    """What a run did and cost."""

    items: int = 0
    skipped: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    invalid_votes: int = 0
    below_quorum: int = 0
    wall_s: float = 0.0
    interrupted: bool = False
    judged: list[JudgedItem] = field(default_factory=list, repr=False)

    def add(self, votes: Sequence[JudgeVote], quorum_met: bool) -> None:
        self.items += 1
        for vote in votes:
            self.calls += vote.calls
            self.prompt_tokens += vote.prompt_tokens
            self.completion_tokens += vote.completion_tokens
            self.cost_usd += vote.cost_usd
            self.invalid_votes += not vote.valid
        self.below_quorum += not quorum_met

    def line(self) -> str:
        head = "interrupted after" if self.interrupted else "judged"
        return (
            f"{head} {plural(self.items, 'item')} ({self.skipped} already done, skipped) in {self.wall_s:.2f} s: "
            f"{plural(self.calls, 'call')}, {plural(self.prompt_tokens + self.completion_tokens, 'token')} "
            f"({self.prompt_tokens} prompt + {self.completion_tokens} completion), cost ${self.cost_usd:.6f}; "
            f"{plural(self.invalid_votes, 'invalid vote')}, {plural(self.below_quorum, 'item')} below quorum"
        )


async def judge_items(
    panel: Panel,
    items: Iterable[PairwiseItem],
    *,
    writer: VotesWriter | None = None,
    concurrency: int = 4,
    summary: JudgeRunSummary | None = None,
    on_done: Callable[[JudgedItem], None] | None = None,
) -> JudgeRunSummary:
    """Judge ``items`` with at most ``concurrency`` in flight; each finished item is written at once.

    ``summary`` (filled in place) keeps what finished even when the run is cancelled.
    """
    if concurrency < 1:
        raise JudgeCommandError(f"--concurrency must be >= 1, got {concurrency}")
    summary = summary if summary is not None else JudgeRunSummary()
    pending = iter(list(items))
    started = time.perf_counter()

    async def worker() -> None:
        for item in pending:  # a shared iterator: each item is taken by exactly one worker
            votes = await panel.judge(item)
            judged = JudgedItem(item=item, votes=votes)
            if writer is not None:
                writer.write(judged)
            summary.add(votes, panel.quorum_met(votes))
            summary.judged.append(judged)
            if on_done is not None:
                on_done(judged)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
    finally:
        summary.wall_s = time.perf_counter() - started
    return summary


def _load_panel(path: Path | None) -> tuple[Path, PanelConfig]:
    panel_path = path or default_panel_path()
    return panel_path, load_panel_config(panel_path)


def _fusion_for(config: PanelConfig) -> Any:
    """The panel's fusion method; one that reads the item is built with the panel's ``fuser:`` model."""
    from judgefuse.fusion import get_method
    from judgefuse.fusion.capabilities import capabilities

    if capabilities(config.fusion).reads_item:
        if config.fuser is None:
            raise JudgeCommandError(
                f"panel fusion {config.fusion!r} reads the item with a model and needs a "
                "'fuser:' model entry in the panel file"
            )
        return get_method(config.fusion, judge=config.fuser)
    return get_method(config.fusion)


async def _start(panel: Panel) -> None:
    from judgefuse.judges.local import LocalServerError, ModelNotInstalledError

    try:
        await panel.start()
    except (LocalServerError, ModelNotInstalledError, FileNotFoundError) as exc:
        raise JudgeCommandError(
            f"could not start the panel's local model: {exc} (see judgefuse/judges/local/INSTALL.md)"
        ) from exc


def _single_item(args: argparse.Namespace) -> PairwiseItem | None:
    given = [args.question is not None, args.answer_a is not None, args.answer_b is not None]
    if not any(given):
        return None
    if not all(given):
        raise JudgeCommandError("a single pair needs --question, --answer-a and --answer-b")
    if args.input is not None:
        raise JudgeCommandError("give either an input file or --question/--answer-a/--answer-b, not both")
    return PairwiseItem(
        id=args.id, question=args.question, answer_a=args.answer_a, answer_b=args.answer_b, label=args.label
    )


def _print_votes(console: Console, judged: JudgedItem) -> None:
    for vote in judged.votes:
        if vote.valid:
            console.print(
                f"  {vote.judge} [{vote.mode}]: {vote.choice} (confidence {vote.confidence:.3f})", markup=False
            )
        else:
            console.print(f"  {vote.judge} [{vote.mode}]: invalid ({vote.error})", markup=False)


async def _report_single(console: Console, judged: JudgedItem, fusion: Any) -> None:
    console.print(f"item {judged.item.id}:", markup=False)
    _print_votes(console, judged)
    if hasattr(fusion, "afuse"):
        verdict = await fusion.afuse(judged.item, judged.votes)
    else:
        verdict = fusion(judged.votes)
    console.print(
        f"  verdict ({verdict.method}): {verdict.choice} (confidence {verdict.confidence:.3f}, "
        f"{verdict.n_valid} valid votes)",
        markup=False,
    )
    for note in verdict.notes:
        console.print(f"    note: {note}", markup=False)


async def arun_judge(args: argparse.Namespace) -> int:
    """The command, in the caller's event loop (``run_judge`` wraps it with ``asyncio.run``)."""
    console = Console()
    single = _single_item(args)
    if single is None and args.input is None:
        raise JudgeCommandError("give an input JSONL file or --question/--answer-a/--answer-b")
    if single is None and args.out is None:
        raise JudgeCommandError("judging a file needs --out votes.jsonl")
    if args.limit is not None and args.limit < 0:
        raise JudgeCommandError(f"--limit must be >= 0, got {args.limit}")
    if args.batch and single is not None:
        raise JudgeCommandError("--batch judges a file of pairs (with --out), not a single pair")
    check_ray_arguments(args, single=single is not None)
    items = [single] if single is not None else read_pairs(args.input)
    if args.limit is not None:
        items = items[: args.limit]
    panel_path, config = _load_panel(args.panel)
    fusion = _fusion_for(config) if single is not None else None
    summary = JudgeRunSummary()
    if args.out is not None:
        done = done_ids(args.out)
        summary.skipped = sum(1 for item in items if item.id in done)
        items = [item for item in items if item.id not in done]
    if args.batch:
        try:
            await judge_in_batches(args, config, items, summary)
        except BatchAPIError as exc:
            raise JudgeCommandError(
                f"the batch API failed: {exc} (rerun the same command to resume: the batches are in {state_path(args.out)})"
            ) from exc
        return 0
    if args.executor == "ray":
        await _judge_on_ray(args, panel_path, config, items, summary)
        return 0
    panel = Panel.from_config(config)
    writer = VotesWriter(args.out) if args.out is not None else None
    try:
        await _start(panel)
        try:
            with progress_bar("judging", quiet=args.quiet or single is not None) as progress:
                task = progress.add_task("", total=len(items))
                await judge_items(
                    panel,
                    items,
                    writer=writer,
                    concurrency=args.concurrency,
                    summary=summary,
                    on_done=lambda _judged: progress.advance(task),
                )
            if single is not None and summary.judged:
                await _report_single(console, summary.judged[0], fusion)
        finally:
            await panel.aclose()
            if fusion is not None and hasattr(fusion, "aclose"):
                await fusion.aclose()
    except (asyncio.CancelledError, KeyboardInterrupt):
        summary.interrupted = True
        raise
    finally:
        if writer is not None:
            writer.close()
        print(summary.line(), flush=True)
    return 0


async def _judge_on_ray(
    args: argparse.Namespace, panel_path: Path, config: PanelConfig, items: list[PairwiseItem], summary: JudgeRunSummary
) -> None:
    """The file run on a Ray cluster: the local run's votes file, bar and summary line, then a
    line on the workers (:mod:`judgefuse.evaluation.judge_ray`)."""
    report = RayRunReport()
    writer = VotesWriter(args.out)
    started = time.perf_counter()
    try:
        with progress_bar("judging", quiet=args.quiet) as progress:
            task = progress.add_task("", total=len(items))

            def on_judged(_judged: JudgedItem, votes: list[JudgeVote], quorum_met: bool) -> None:
                summary.add(votes, quorum_met)
                progress.advance(task)

            if items:  # nothing left to judge: no cluster to join
                await judge_on_ray(args, panel_path, config, items, writer, on_judged, report)
    except (asyncio.CancelledError, KeyboardInterrupt):
        summary.interrupted = True
        raise
    finally:
        writer.close()
        summary.wall_s = time.perf_counter() - started
        print(summary.line(), flush=True)
        print(report.line() if items else "ray: nothing left to judge", flush=True)


def run_judge(args: argparse.Namespace) -> int:
    """The ``judge`` handler."""
    return asyncio.run(arun_judge(args))


def add_commands(subcommands: argparse._SubParsersAction) -> None:
    """Register ``judge`` on the top-level parser."""
    parser = subcommands.add_parser(
        "judge",
        help="run a judge panel on one pair or a JSONL file of pairs",
        description="Judge pairs with a panel (YAML); write votes JSONL as items finish; resumable.",
    )
    parser.add_argument("input", nargs="?", type=Path, help="JSONL or Parquet of pairs (JudgeBench, PairwiseItem, chosen/rejected), or a CSV")
    parser.add_argument("--question", help="single pair: the instruction")
    parser.add_argument("--answer-a", dest="answer_a", help="single pair: output (a)")
    parser.add_argument("--answer-b", dest="answer_b", help="single pair: output (b)")
    parser.add_argument("--id", default="pair-1", help="single pair: its id (default pair-1)")
    parser.add_argument(
        "--label", choices=("A", "B", "tie", "both_bad"), help="single pair: the better answer (or tie, both_bad), if known"
    )
    parser.add_argument("--panel", type=Path, help="panel YAML (default: the packaged no-API-key panel)")
    parser.add_argument("--out", type=Path, help="votes JSONL to append to (ids already there are skipped)")
    parser.add_argument("--concurrency", type=int, default=4, help="items in flight at once, per Ray worker with --executor ray (default 4)")
    parser.add_argument("--limit", type=int, help="judge only the first N items of the input")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_batch_arguments(parser)
    add_ray_arguments(parser)
    parser.set_defaults(handler=run_judge)
