"""``judgefuse winrate``: the win rate of system X over system Y from a votes file, with the
judge-only, labels-only and prediction-powered estimates side by side (docs/design.md, 'Win rates').

Each item names its two systems in metadata fields (``--field-a``, ``--field-b``: which system
wrote answer A and which answer B); items comparing X with Y, in either order, count. The
judges' outcome of an item is its fused verdict (``--method``, default ``mean_probability``):
1 when it picks X's answer, 0 for Y's, 1/2 when undecided. Items that carry a label are the
labelled slice (1/0 by the label; a tie or both-bad label counts 1/2: it is a label, and leaving
those items out of the slice would bias the corrected estimate and its interval where ties are
frequent); the corrected estimate is valid when that slice is a uniform random subset of the
items.

The voting methods (``--method`` in ``COLUMNAR_METHODS``) read the file into arrays and fuse every
item at once, as ``eval`` does, so a file of 10^6 items needs arrays, not an object per item; a
method without a columnar form (a plugin's) is fused item by item, the reference the tests compare
the columnar path with.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from judgefuse.calibration.win_rate import WinRates, outcome_for_x, win_rates
from judgefuse.errors import InputError
from judgefuse.evaluation.loaders.detect import load
from judgefuse.evaluation.loaders.votes_columnar import load_table
from judgefuse.evaluation.vote_table import OUTCOMES
from judgefuse.fusion import get_method
from judgefuse.fusion.columnar import COLUMNAR_METHODS, A, B, fuse_columns

__all__ = ["WinRateInputError", "add_commands", "run_winrate"]


DESCRIPTION = (
    "The win rate of system X over system Y from a votes file: the judges' estimate, the labels' "
    "estimate and the two combined (prediction-powered: valid when the labelled items are a uniform "
    "random subset), each with its interval. Items name their systems in metadata fields "
    "(--field-a, --field-b); a tie or both-bad label counts one half."
)
"""``--help``'s description: whole sentences (the module docstring's first line stops mid-one)."""


class WinRateInputError(InputError, ValueError):
    """The votes file cannot answer the question asked (fields, systems)."""


def add_commands(subcommands: Any) -> None:
    parser = subcommands.add_parser("winrate", help="win rate of system X over Y, corrected by labels (PPI)",
                                    description=DESCRIPTION)
    parser.add_argument("votes", nargs="+", help="votes JSONL files or folders")
    parser.add_argument("--field-a", default="system_a", help="metadata field naming answer A's system")
    parser.add_argument("--field-b", default="system_b", help="metadata field naming answer B's system")
    parser.add_argument("--x", default=None, help="system X (default: the first of the two, sorted)")
    parser.add_argument("--y", default=None, help="system Y (default: the other one)")
    parser.add_argument("--method", default="mean_probability", help="fusion method for the judges' outcome")
    parser.add_argument("--alpha", type=float, default=0.05, help="1 - the intervals' level")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run_winrate)


def run_winrate(args: argparse.Namespace) -> int:
    method = get_method(args.method)
    if getattr(method, "requires_fit", False):
        raise WinRateInputError(f"--method {args.method!r} needs a fit; use a voting method")
    if args.method in COLUMNAR_METHODS:
        comparisons = _columnar_comparisons(args)
    else:  # a method with no columnar form (a plugin's): fused item by item
        comparisons = _item_comparisons(args, method)
    x, y, rates = _win_rates(comparisons, args)
    if args.json:
        print(json.dumps({"x": x, "y": y, **rates.as_dict()}, indent=2))
        return 0
    level = 100 * (1 - args.alpha)
    print(f"win rate of {x} over {y} (ties count half): {rates.n_verdicts} comparisons, {rates.n_labels} labelled")
    for name, interval in (("corrected (PPI)", rates.corrected), ("judge-only", rates.judge_only),
                           ("labels-only", rates.labels_only)):
        print(f"  {name:<16} {interval.estimate:.3f}  {level:.0f}% [{interval.lower:.3f}, {interval.upper:.3f}]"
              f"  ({interval.method})")
    return 0


@dataclass(frozen=True)
class _Comparisons:
    """Per item: the systems named in the metadata fields (None where absent), and on demand the
    fused verdict's letter (None: undecided or a tie) and the item's label."""

    system_a: Sequence[Any]
    system_b: Sequence[Any]
    choice: Callable[[int], str | None]
    label: Callable[[int], str | None]


def _columnar_comparisons(args: argparse.Namespace) -> _Comparisons:
    """The votes read into arrays (no object per item) and fused at once: what 10^6 items need."""
    table = load_table(args.votes, metadata=(args.field_a, args.field_b))
    answer = fuse_columns(args.method, table.votes).answer
    outcome = table.items.outcome
    return _Comparisons(
        table.items.metadata[args.field_a],
        table.items.metadata[args.field_b],
        lambda i: _LETTERS.get(int(answer[i])),
        lambda i: OUTCOMES[int(outcome[i])],
    )


_LETTERS = {A: "A", B: "B"}


def _item_comparisons(args: argparse.Namespace, method: Any) -> _Comparisons:
    items = load(args.votes)
    metadata = [judged.item.metadata or {} for judged in items]
    return _Comparisons(
        [meta.get(args.field_a) for meta in metadata],
        [meta.get(args.field_b) for meta in metadata],
        lambda i: method(list(items[i].votes)).choice,
        lambda i: items[i].item.outcome,
    )


def _win_rates(comparisons: _Comparisons, args: argparse.Namespace) -> tuple[str, str, WinRates]:
    """(X, Y, the three estimates) over the items comparing X with Y, in either order."""
    named = [
        (str(a), str(b), i)
        for i, (a, b) in enumerate(zip(comparisons.system_a, comparisons.system_b, strict=True))
        if a is not None and b is not None and a != b
    ]
    systems = sorted({s for a, b, _ in named for s in (a, b)})
    if not named:
        raise WinRateInputError(f"no item names two systems in metadata fields {args.field_a!r} and {args.field_b!r}")
    x = args.x or systems[0]
    y = args.y or next((s for s in systems if s != x), None)
    if y is None or x == y:
        raise WinRateInputError(f"name two different systems (found: {', '.join(systems)})")
    judged_outcomes: list[float] = []
    labelled: list[int] = []
    outcomes: list[float] = []
    for a, b, i in named:
        if {a, b} != {x, y}:
            continue
        judged_outcomes.append(outcome_for_x(comparisons.choice(i), a, x))
        label = comparisons.label(i)  # A, B, tie or both_bad: a tie label is a labelled half
        if label is not None:
            labelled.append(len(judged_outcomes) - 1)
            outcomes.append(outcome_for_x(label, a, x))
    if not judged_outcomes:
        raise WinRateInputError(f"no item compares {x!r} with {y!r} (systems: {', '.join(systems)})")
    return x, y, win_rates(judged_outcomes, labelled, outcomes, alpha=args.alpha)
