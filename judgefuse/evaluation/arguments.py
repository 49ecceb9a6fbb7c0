"""Command-line arguments the offline commands share, checked where the user typed them.

A value is checked by its argparse ``type``, so a bad one is refused before any data is read,
with the flag's own name (``argument --folds: must be an integer >= 2 (got 1)``), never the name
of the parameter it ends up in (``n_folds``), and with exit status 2 like every input error.
Output paths are checked the same way: a missing folder is named, never created silently.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from judgefuse.evaluation.loaders import FORMATS, UndefinedAnswers, load
from judgefuse.evaluation.vote_table import VoteTable
from judgefuse.judges.types import JudgedItem


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum} (got {text!r})") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum} (got {value})")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def float_in(low: float, high: float, *, low_open: bool = True, high_open: bool = True) -> Callable[[str], float]:
    """An argparse type: a number in the interval from ``low`` to ``high`` (open or closed ends)."""
    left, right = "(" if low_open else "[", ")" if high_open else "]"
    where = f"{left}{low:g}, {high:g}{right}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number in {where} (got {text!r})") from None
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        if not (above and below):
            raise argparse.ArgumentTypeError(f"must be a number in {where} (got {text})")
        return value

    parse.__name__ = f"number in {where}"
    return parse


def output_path(text: str) -> Path:
    """An argparse type for a report to write: its folder must exist and it must not be a folder."""
    path = Path(text)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder {str(parent)!r} does not exist (create it first)")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file name")
    return path


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """PATH..., ``--format`` and ``--strict``: what every offline command reads."""
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="data files or directories")
    parser.add_argument("--format", choices=FORMATS, help="input format (detected when omitted)")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="stop at a judge answer the format does not define (default: count it as an invalid vote and warn)",
    )
    parser.add_argument(
        "--jobs",
        type=int_at_least(1),
        help="processes for a votes file read into arrays: 1 = this one only; 2 = a large JSONL file's second half "
        "read by a second process (and eval's stacking rows fitted in one); the numbers are the same either way "
        "(default: 2 from 64 MiB, or 50,000 labelled items for eval's rows, on a machine with a second core)",
    )


def load_sources(args: argparse.Namespace) -> tuple[list[JudgedItem], UndefinedAnswers]:
    """The items named on the command line; one warning per file with undefined answers (stderr)."""
    answers = UndefinedAnswers(strict=getattr(args, "strict", False))
    items = load(args.paths, format=args.format, answers=answers)
    for line in answers.summary():
        print(f"judgefuse {args.command}: warning: {line}", file=sys.stderr)
    return items, answers


def load_table_sources(args: argparse.Namespace, *, metadata: Sequence[str] = ()) -> tuple[VoteTable, UndefinedAnswers]:
    """:func:`load_sources` as arrays (a votes file streamed, no object per item), with the items'
    ``metadata`` fields named."""
    from judgefuse.evaluation.loaders.votes_columnar import load_table

    answers = UndefinedAnswers(strict=getattr(args, "strict", False))
    table = load_table(
        args.paths, format=args.format, answers=answers, metadata=metadata, jobs=getattr(args, "jobs", None)
    )
    for line in answers.summary():
        print(f"judgefuse {args.command}: warning: {line}", file=sys.stderr)
    return table, answers
