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
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from judgefuse.calibration.win_rate import outcome_for_x, win_rates
from judgefuse.errors import InputError
from judgefuse.evaluation.loaders.detect import load
from judgefuse.fusion import get_method

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
    items = load(args.votes)
    named = []
    for judged in items:
        meta = judged.item.metadata or {}
        a, b = meta.get(args.field_a), meta.get(args.field_b)
        if a is not None and b is not None and a != b:
            named.append((str(a), str(b), judged))
    systems = sorted({s for a, b, _ in named for s in (a, b)})
    if not named:
        raise WinRateInputError(f"no item names two systems in metadata fields {args.field_a!r} and {args.field_b!r}")
    x = args.x or systems[0]
    y = args.y or next((s for s in systems if s != x), None)
    if y is None or x == y:
        raise WinRateInputError(f"name two different systems (found: {', '.join(systems)})")
    method = get_method(args.method)
    if getattr(method, "requires_fit", False):
        raise WinRateInputError(f"--method {args.method!r} needs a fit; use a voting method")
    judged_outcomes: list[float] = []
    labelled: list[int] = []
    outcomes: list[float] = []
    for a, b, item in named:
        if {a, b} != {x, y}:
            continue
        verdict = method(list(item.votes))
        judged_outcomes.append(outcome_for_x(verdict.choice, a, x))
        label = item.item.outcome  # A, B, tie or both_bad: a tie label is a labelled half
        if label is not None:
            labelled.append(len(judged_outcomes) - 1)
            outcomes.append(outcome_for_x(label, a, x))
    if not judged_outcomes:
        raise WinRateInputError(f"no item compares {x!r} with {y!r} (systems: {', '.join(systems)})")
    rates = win_rates(judged_outcomes, labelled, outcomes, alpha=args.alpha)
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
