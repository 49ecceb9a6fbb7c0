"""``judgefuse plan``: audit labels a day for a target interval width, from a gateway's export.

Reads ``judgefuse export``'s votes JSONL (each line's ``metadata.judgefuse`` carries the
verdict's route, fused confidence, time, stratum and label) and prints, for the auto-accept
precision and for the accuracy of all traffic, the audit rate and the labels a day that give
a ``--width`` wide 95% interval over a ``--window`` of days, with uniform audits and with
audits by confidence band (:mod:`judgefuse.calibration.width_plan`).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import numpy as np

from judgefuse.calibration.width_plan import NotEnoughTraffic, plan_from_traffic
from judgefuse.errors import InputError
from judgefuse.evaluation.arguments import float_in
from judgefuse.evaluation.loaders.detect import load

__all__ = ["PlanInputError", "add_commands", "run_plan"]

META_KEY = "judgefuse"
"""Where ``judgefuse export`` puts a verdict's gateway record in each item's metadata."""


class PlanInputError(InputError, ValueError):
    """The file cannot plan anything (not an export, no auto-accepted verdict)."""


def add_commands(subcommands: Any) -> None:
    parser = subcommands.add_parser(
        "plan",
        help="audit labels a day for a target interval width, from a gateway export",
        description=(
            "Audit labels a day that give a WIDTH-wide 95%% interval on the auto-accept precision "
            "and on the accuracy of all traffic over a window of days, with uniform audits and "
            "with audits by confidence band, from the traffic in a 'judgefuse export' file."
        ),
    )
    parser.add_argument("export", nargs="+", help="judgefuse export votes JSONL files or folders")
    parser.add_argument(
        "--width", type=float_in(0.0, 1.0, low_open=True), default=0.05, help="the interval's full width (default 0.05)"
    )
    parser.add_argument(
        "--window",
        type=float_in(0.0, 3650.0, low_open=True),
        default=7.0,
        help="days of traffic the interval covers (default 7)",
    )
    parser.add_argument("--panel", default=None, help="only this panel's verdicts")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run_plan)


def _records(args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    for judged in load(args.export):
        meta = (judged.item.metadata or {}).get(META_KEY)
        if not isinstance(meta, dict):
            continue
        if args.panel is not None and meta.get("panel") != args.panel:
            continue
        out.append({**meta, "outcome": judged.item.label})
    if not out:
        raise PlanInputError(
            "no verdict of a gateway export found (items need metadata.judgefuse: "
            "write the file with 'judgefuse export')" + (f" for panel {args.panel!r}" if args.panel else "")
        )
    return out


COUNTED_STRATA = ("audit", "inline")
"""Strata whose label on an auto-accepted verdict is a sample of the auto-accepted verdicts (an
audit, or a label the request carried); a label on a verdict never queued (``none``, or no
stamp) is unsolicited and left out, as the gateway's estimates leave it out."""


def run_plan(args: argparse.Namespace) -> int:
    records = _records(args)
    auto = np.array([r.get("route") == "auto_accept" for r in records], dtype=bool)
    correct = np.array([
        float(r["outcome"] == r["fused"]["choice"])
        if r["outcome"] is not None and r.get("stratum") in COUNTED_STRATA else math.nan
        for r in records
    ])
    try:
        plan = plan_from_traffic(
            np.array([float(r["created_at"]) for r in records]),
            auto,
            np.array([float(r["fused"]["confidence"]) for r in records]),
            correct,
            width=args.width,
            days=args.window,
        )
    except NotEnoughTraffic as exc:
        raise PlanInputError(str(exc)) from exc
    span_days = plan.traffic_days
    if args.json:
        print(json.dumps(plan.as_dict(), indent=2))
        return 0
    print(
        f"{len(records)} verdicts over {span_days or 0:.2f} days: {plan.auto_per_day:.1f} auto-accepted and "
        f"{plan.review_per_day:.1f} reviewed a day; precision {plan.precision:.3f} ({plan.precision_basis})"
    )
    print(f"for a {args.width:g}-wide 95% interval over {args.window:g} days:")
    print(f"  {'estimate':<10} {'audits':<8} {'rate':>7} {'labels/day':>11}")
    for key in plan.rates:
        metric, design = key.split("/")
        print(f"  {metric:<10} {design:<8} {plan.rates[key]:>7.3f} {plan.labels_per_day(key):>11.1f}")
    print("  (active: audits by confidence band at Neyman rates; a normal-approximation plan)")
    return 0
