"""``judgefuse export --storage URL [--tenant T] [--panel P] [--since T] [--until T]
[--labelled-only] [--format jsonl|parquet] OUT``: stored verdicts as votes JSONL.

The labelled live traffic, replayable in ``judgefuse eval``, ``compare`` and ``tune`` (see
:mod:`judgefuse.service.ops.export` for the line format, streaming and atomicity). The storage is
opened read-mostly: nothing is written to it (a SQLite file that does not exist is refused
rather than created empty).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["add_commands", "parse_time", "run_export"]


def parse_time(text: str) -> float:
    """``--since``/``--until``: epoch seconds, or an ISO 8601 date or time (UTC when it names no
    zone). ``ValueError`` (argparse's usage error) names what was expected."""
    try:
        value = float(text)
    except ValueError:
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected epoch seconds or an ISO 8601 time (2026-11-01 or "
                f"2026-11-01T12:00:00+00:00), got {text!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected finite epoch seconds >= 0, got {text!r}")
    return value


def run_export(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from judgefuse.service.ops.export import ExportInputError, ExportReport, check_format, export_records
    from judgefuse.service.storage import open_storage
    from judgefuse.service.storage.registry import scheme_of

    check_format(args.format)
    if args.since is not None and args.until is not None and args.until <= args.since:
        raise ExportInputError("--until must be after --since")
    url = args.storage
    if scheme_of(url) == "sqlite":
        path = url.split("://", 1)[1][1:] if "://" in url else url
        if not Path(path).is_file():
            raise ExportInputError(f"--storage: no SQLite file at {path}")
    try:
        storage = open_storage(url)
    except ValueError as exc:  # a URL no backend takes (the registry's message names the schemes)
        raise ExportInputError(str(exc)) from exc
    console = Console(stderr=True, quiet=args.quiet)
    started = time.monotonic()

    async def main() -> ExportReport:
        with Progress(SpinnerColumn(), TextColumn("exporting"), BarColumn(),
                      TextColumn("{task.completed:,} written, {task.fields[skipped]:,} skipped, "
                                 "{task.fields[rate]}"),
                      TimeElapsedColumn(), console=console, transient=False) as bar:
            task = bar.add_task("export", total=None, skipped=0, rate="")

            def progress(written: int, skipped: int) -> None:
                rate = written / max(time.monotonic() - started, 1e-9)
                bar.update(task, completed=written, skipped=skipped, rate=f"{rate:,.0f}/s")

            async with storage:
                return await export_records(
                    storage, args.out, tenant=args.tenant, panel=args.panel, since=args.since,
                    until=args.until, labelled_only=args.labelled_only, fmt=args.format,
                    batch_size=args.batch_size, progress=progress)

    from judgefuse.service.storage import StorageError

    try:
        report = asyncio.run(main())
    except StorageError as exc:  # unreachable, corrupt or newer storage: a message, status 1
        print(f"judgefuse export: error: {exc}", file=sys.stderr)
        return 1
    took = time.monotonic() - started
    console.print(f"exported {report.written:,} records ({report.labelled:,} labelled) to "
                  f"{report.path} in {took:.1f} s")
    if report.skipped_no_item:
        console.print(f"[yellow]skipped {report.skipped_no_item:,} records stored without their "
                      "item (store_items was off): no question or answers to export[/yellow]")
    if not args.quiet and report.written == 0:
        print("judgefuse export: warning: no record matched", file=sys.stderr)
    return 0


def add_commands(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "export",
        help="write stored verdicts (labels, votes, review strata) as votes JSONL",
        description=(
            "Stream the verdicts stored by the gateway into our votes JSONL (one judged item "
            "per line: the item with its label, every judge's vote, and under "
            "metadata.judgefuse the verdict id, tenant, panel, times, review stratum, "
            "inclusion probability, route and fused answer), which 'judgefuse eval', "
            "'compare' and 'tune' read as is. Oldest first; written to a temporary file and "
            "renamed over OUT at the end."
        ),
    )
    parser.add_argument("out", type=Path, metavar="OUT", help="the file to write")
    parser.add_argument("--storage", required=True, metavar="URL",
                        help="storage URL (sqlite:///path, a file path, redis://...)")
    parser.add_argument("--tenant", default=None, help="one tenant (default: every tenant; "
                        "item ids are then tenant/id)")
    parser.add_argument("--panel", default=None, help="one panel (default: every panel)")
    parser.add_argument("--since", type=parse_time, default=None, metavar="TIME",
                        help="verdicts created at or after TIME (epoch seconds or ISO 8601, UTC "
                             "by default)")
    parser.add_argument("--until", type=parse_time, default=None, metavar="TIME",
                        help="verdicts created before TIME")
    parser.add_argument("--labelled-only", action="store_true", help="only labelled verdicts")
    parser.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl",
                        help="jsonl (default; what eval reads) or parquet (needs pyarrow)")
    parser.add_argument("--batch-size", type=int, default=1000, help=argparse.SUPPRESS)
    parser.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    parser.set_defaults(handler=run_export)
