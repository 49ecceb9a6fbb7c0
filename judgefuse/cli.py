"""The ``judgefuse`` console script: one entry point, one module per subcommand group.

Each group registers its subcommands on the shared parser (``add_commands``) and returns
handlers; this module only dispatches and turns our typed input errors into a clear message
and exit status 2, so a user sees "file:line: field: what was wrong", never a traceback.
Every error reads ``judgefuse COMMAND: error: ...``; usage and input errors (a bad flag value, a
bad file) exit 2, failures of the run itself (a full disk) exit 1. ``main`` returns the status
in every case, argparse's usage errors included, so callers and tests see one convention.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from judgefuse import __version__, plugins_command
from judgefuse.evaluation import commands as evaluation_commands
from judgefuse.evaluation import judge_command, tune_command
from judgefuse.fusion import UnknownFusionMethod
from judgefuse.judges.local import commands as model_commands
from judgefuse.service.ops import export_command, serve_command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="judgefuse",
        description="Calibrated LLM-as-a-judge: evaluate judges and fusion methods, judge pairs, serve.",
    )
    parser.add_argument("--version", action="version", version=f"judgefuse {__version__}")
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    evaluation_commands.add_commands(subcommands)
    tune_command.add_commands(subcommands)
    judge_command.add_commands(subcommands)
    model_commands.add_commands(subcommands)
    serve_command.add_commands(subcommands)
    export_command.add_commands(subcommands)
    plugins_command.add_commands(subcommands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error (argparse printed it, status 2), or --help / --version (0)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return int(args.handler(args) or 0)
    except (ValueError, UnknownFusionMethod) as exc:  # typed input errors (UnknownFusionMethod is a KeyError)
        print(f"judgefuse {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. an output path that is a directory, a full disk: a message, not a traceback
        print(f"judgefuse {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"judgefuse {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
