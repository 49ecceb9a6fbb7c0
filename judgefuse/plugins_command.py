"""``judgefuse plugins``: what is registered in each extension point, and where it comes from.

Lists judge backends, fusion methods, metrics and storage schemes, each with its origin
(``built-in`` or the plugin's distribution and entry point), then every plugin that failed to
load with its error. Exit status 1 when a plugin failed, so a deployment check can catch it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from judgefuse.calibration import metric_registry
from judgefuse.entry_points import failed_plugins
from judgefuse.fusion import registry as fusion_registry
from judgefuse.judges import registry as judge_registry
from judgefuse.service.storage import registry as storage_registry

__all__ = ["EXTENSION_POINTS", "add_commands", "registered"]

EXTENSION_POINTS: tuple[tuple[str, str, Callable[[], dict[str, str]]], ...] = (
    ("judge backends", judge_registry.ENTRY_POINT_GROUP, judge_registry.backend_origins),
    ("fusion methods", fusion_registry.ENTRY_POINT_GROUP, fusion_registry.method_origins),
    ("metrics", metric_registry.ENTRY_POINT_GROUP, metric_registry.metric_origins),
    ("storage schemes", storage_registry.ENTRY_POINT_GROUP, storage_registry.scheme_origins),
)
"""(title, entry-point group, name -> origin) for every extension point."""


def registered() -> dict[str, object]:
    """Everything ``judgefuse plugins --json`` prints: each group's names and origins, and failures."""
    document: dict[str, object] = {group: origins() for _title, group, origins in EXTENSION_POINTS}
    document["failed"] = [
        {"group": load.group, "name": load.name, "value": load.value,
         "distribution": load.distribution, "error": load.error}
        for load in failed_plugins()
    ]
    return document


def _print_text() -> None:
    for title, group, origins in EXTENSION_POINTS:
        entries = origins()
        print(f"{title} ({group}):")
        width = max((len(name) for name in entries), default=0)
        for name, where in entries.items():
            print(f"  {name:<{width}}  {where}")
    for load in failed_plugins():
        print(f"failed: {load.where}: {load.error}")


def _run(args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(registered(), indent=2))
    else:
        _print_text()
    return 1 if failed_plugins() else 0


def add_commands(subcommands: argparse._SubParsersAction) -> None:
    """Register ``plugins`` on the top-level parser."""
    parser = subcommands.add_parser(
        "plugins",
        help="list judge backends, fusion methods, metrics and storage schemes, and where each comes from",
        description="List what is registered in each extension point (built-in or a plugin's "
        "distribution and entry point) and any plugin that failed to load (exit status 1 then).",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(handler=_run)
