"""``judgefuse judge PAIRS --out VOTES --batch``: the file run through the provider's batch API.

The votes file, its resume by item id and the summary line are the online run's
(:mod:`judgefuse.evaluation.judge_command`); what differs is who asks the model
(:class:`~judgefuse.judges.batch.BatchRun`): requests go out as batches at half price, a bar per
batch shows its progress while it is polled, and the batches and their answers are kept beside
the votes file (``VOTES.batch.json``, ``VOTES.batch-answers.jsonl``) so an interrupted run
resumes them instead of paying again. docs/offline-evaluation.md, 'Judging at batch prices'.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rich.progress import TaskID

from judgefuse.evaluation.arguments import float_in
from judgefuse.evaluation.loaders import VotesWriter
from judgefuse.evaluation.progress import progress_bar
from judgefuse.judges.batch import BatchRun
from judgefuse.judges.config import PanelConfig
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

if TYPE_CHECKING:
    from judgefuse.judges.batch.api import BatchStatus
    from judgefuse.judges.batch.state import SubmittedBatch

__all__ = ["RunSummary", "add_batch_arguments", "judge_in_batches"]


class RunSummary(Protocol):
    """What the run fills in (``judge_command.JudgeRunSummary``; a protocol, so this module
    does not import the command that imports it)."""

    interrupted: bool
    wall_s: float
    judged: list[JudgedItem]

    def add(self, votes: Sequence[JudgeVote], quorum_met: bool) -> None: ...

    def line(self) -> str: ...


def add_batch_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch",
        action="store_true",
        help="send the requests through the provider's batch API (half price, resumable)",
    )
    parser.add_argument(
        "--batch-poll-s", dest="batch_poll_s", type=float_in(0.0, 86400.0, low_open=False), default=30.0, help="seconds between polls (default 30)"
    )
    parser.add_argument(
        "--batch-retry-online",
        dest="batch_retry_online",
        action="store_true",
        help="send an expired or server-failed (5xx, 429) batch request online once instead of leaving its vote invalid",
    )


async def judge_in_batches(
    args: argparse.Namespace, config: PanelConfig, items: Sequence[PairwiseItem], summary: RunSummary
) -> None:
    """Judge ``items`` into ``args.out`` through batches, filling ``summary``; prints the summary
    and the batch line at the end, even when interrupted. A failing batch API raises
    :class:`~judgefuse.judges.batch.BatchAPIError` (the caller says how to resume)."""
    out = Path(args.out)
    # built first: a judge without a batch API is refused before any file is touched
    run = BatchRun(config, out, poll_s=args.batch_poll_s, retry_online=args.batch_retry_online)
    writer = VotesWriter(out)
    started = time.perf_counter()
    try:
        with progress_bar("batch {task.description}", quiet=args.quiet) as progress:
            bars: dict[str, TaskID] = {}

            def on_progress(batch: SubmittedBatch, status: BatchStatus) -> None:
                total = status.total or len(batch.custom_ids)
                bar = bars.get(status.id)
                if bar is None:
                    bar = bars[status.id] = progress.add_task("", total=total)
                label = f"{status.id} ({batch.judge}, {status.status})"
                progress.update(bar, completed=status.completed + status.failed, total=total, description=label)

            def on_judged(judged: JudgedItem, quorum_met: bool) -> None:
                writer.write(judged)
                summary.add(judged.votes, quorum_met)
                summary.judged.append(judged)

            run.on_progress = on_progress
            await run.run(items, on_judged)
    except (asyncio.CancelledError, KeyboardInterrupt):
        summary.interrupted = True
        raise
    finally:
        await run.aclose()
        writer.close()
        summary.wall_s = time.perf_counter() - started
        print(summary.line(), flush=True)
        print(run.report.line(), flush=True)
