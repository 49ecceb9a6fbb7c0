"""The ``judgefuse`` console script: one entry point, one module per subcommand group.

Each group registers its subcommands on the shared parser (``add_commands``) and returns
handlers; this module only dispatches and turns errors into exit statuses:

* an :class:`~judgefuse.errors.InputError` (a bad flag value, a bad file, an unknown method
  name, a bad panel) is the user's to fix: its message, exit status 2, so a user sees
  "file:line: field: what was wrong", never a traceback;
* an ``OSError`` (an output path that is a directory, a full disk) is a failure of the run
  itself: its message, exit status 1;
* anything else is a bug and propagates with its traceback. A ``ValueError`` in particular is
  not taken for bad input: it would hide a programming error behind a user's error message.

Every message reads ``judgefuse COMMAND: error: ...``. ``main`` returns the status in every
case, argparse's usage errors included, so callers and tests see one convention.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from judgefuse import __version__, plugins_command
from judgefuse.errors import InputError
from judgefuse.evaluation import commands as evaluation_commands
from judgefuse.evaluation import judge_command, tune_command, winrate_command
from judgefuse.judges.local import commands as model_commands
from judgefuse.service.commands import annotators as annotators_command
from judgefuse.service.commands import export as export_command
from judgefuse.service.commands import serve as serve_command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="judgefuse",
        description="Calibrated LLM-as-a-judge: evaluate judges and fusion methods, judge pairs, serve.",
    )
    parser.add_argument("--version", action="version", version=f"judgefuse {__version__}")
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    evaluation_commands.add_commands(subcommands)
    tune_command.add_commands(subcommands)
    winrate_command.add_commands(subcommands)
    judge_command.add_commands(subcommands)
    model_commands.add_commands(subcommands)
    serve_command.add_commands(subcommands)
    export_command.add_commands(subcommands)
    annotators_command.add_commands(subcommands)
    plugins_command.add_commands(subcommands)
    return parser


def _subcommand_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of ``command`` (the top-level one if it cannot be found)."""
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # a misspelt flag: the subcommand's usage, not the top-level one
            _subcommand_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # a usage error (argparse printed it, status 2), or --help / --version (0)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return int(args.handler(args) or 0)
    except InputError as exc:
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
