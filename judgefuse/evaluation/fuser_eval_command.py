"""The ``--fuser`` flags of ``judgefuse eval``: which methods replay votes, and the fuser's row.

``--methods fuser`` names the fuser among the methods; it needs ``--fuser`` (the model), and it
is not a replayable method, so it is taken out of the list handed to the replay and comes back
as a row made from the fuser's recorded answers (:mod:`judgefuse.evaluation.fuser_eval`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from judgefuse.evaluation.fuser_eval import (
    FUSER_ROW,
    FuserEvalError,
    FuserRunSummary,
    fuser_config,
    fuser_verdicts,
    record_fuser_answers,
)
from judgefuse.evaluation.progress import progress_bar
from judgefuse.fusion.capabilities import DEFAULT_VOTING_METHOD
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgedItem

REFERENCE_ONLY = (DEFAULT_VOTING_METHOD,)
"""The replayed methods when ``--methods`` names the fuser alone (majority is the reference row)."""


def voting_methods(args: argparse.Namespace) -> tuple[str, ...] | None:
    """``--methods`` without the fuser (None: the defaults); ``fuser`` alone needs ``--fuser``."""
    if not args.methods:
        return None
    methods = tuple(name for name in args.methods if name != FUSER_ROW)
    if len(methods) != len(args.methods) and not args.fuser:
        raise FuserEvalError("--methods fuser needs the fuser's model: --fuser PANEL_OR_MODEL")
    return methods or REFERENCE_ONLY


def default_votes_path(args: argparse.Namespace) -> Path:
    first = Path(args.paths[0])
    return Path(f"{first.stem or first.name}.fuser-votes.jsonl")


def fuser_rows(
    args: argparse.Namespace, items: Sequence[JudgedItem]
) -> tuple[dict[str, Sequence[Verdict]], int]:
    """The fuser's row over the labelled ``items`` and how many fuser calls failed; summary on stderr.

    No row without ``--fuser``, nor when any call failed: a row where some items are the
    fallback's verdicts for want of a reply would report the fallback's accuracy as the fuser's
    (with the model unreachable, all of it). The caller exits non-zero on failed calls."""
    if not args.fuser:
        if args.fuser_api_base:
            raise FuserEvalError("--fuser-api-base needs --fuser MODEL")
        return {}, 0
    config = fuser_config(args.fuser, api_base=args.fuser_api_base)
    labelled = [judged for judged in items if judged.item.label is not None]
    votes_path = args.fuser_votes or default_votes_path(args)
    summary = FuserRunSummary()
    with progress_bar("fusing", quiet=args.quiet) as progress:
        task = progress.add_task("", total=len(labelled))
        try:
            recorded, _ = asyncio.run(
                record_fuser_answers(
                    config,
                    labelled,
                    votes_path,
                    concurrency=args.fuser_concurrency,
                    on_done=lambda: progress.advance(task),
                    summary=summary,
                )
            )
        finally:
            print(f"{summary.line()}; answers in {votes_path}", file=sys.stderr, flush=True)
    failure = summary.failure_line()
    if failure is not None:
        print(failure, file=sys.stderr, flush=True)
        return {}, summary.failed
    return {FUSER_ROW: fuser_verdicts(labelled, recorded)}, 0
