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

A command group whose module cannot be imported because an optional install is missing
(``pip install judgefuse`` has no ``judges`` or ``service`` extra) is still listed; running it,
or a handler that reaches such an import, exits 2 naming the extra (:mod:`judgefuse.extras`).
Every other command keeps working.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from judgefuse import __version__
from judgefuse.errors import InputError
from judgefuse.extras import MissingExtra, missing_extra

COMMAND_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("judgefuse.evaluation.commands", ("eval", "compare")),
    ("judgefuse.evaluation.tune_command", ("tune",)),
    ("judgefuse.evaluation.winrate_command", ("winrate",)),
    ("judgefuse.evaluation.plan_command", ("plan",)),
    ("judgefuse.evaluation.judge_command", ("judge",)),
    ("judgefuse.judges.local.commands", ("model",)),
    ("judgefuse.service.commands.serve", ("serve",)),
    ("judgefuse.service.commands.export", ("export",)),
    ("judgefuse.service.commands.annotators", ("annotators",)),
    ("judgefuse.plugins_command", ("plugins",)),
)
"""Each command group's module (it has ``add_commands(subcommands)``) and the commands it adds,
in the order ``--help`` lists them (tests/test_cli.py checks the names against the modules)."""


def _unavailable(subcommands: argparse._SubParsersAction, names: tuple[str, ...], missing: MissingExtra) -> None:
    """List ``names`` with what they need; running one raises ``missing`` (exit 2)."""

    def handler(_args: argparse.Namespace) -> NoReturn:
        raise missing

    for name in names:
        sub = subcommands.add_parser(name, help=f"(needs judgefuse[{missing.extra}])", add_help=False)
        sub.set_defaults(handler=handler, unavailable=True)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``command`` (a known command's name), only the group that
    adds it is imported and registered: what running that command needs. (Importing every group
    costs ~0.2 s of CPU, judge's HTTP client and the plugins' entry points, on every ``eval``.)"""
    groups = [group for group in COMMAND_GROUPS if command in group[1]] or COMMAND_GROUPS
    parser = argparse.ArgumentParser(
        prog="judgefuse",
        description="Calibrated LLM-as-a-judge: evaluate judges and fusion methods, judge pairs, serve.",
    )
    parser.add_argument("--version", action="version", version=f"judgefuse {__version__}")
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module, names in groups:
        try:
            group = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            missing = missing_extra(exc)
            if missing is None:
                raise
            _unavailable(subcommands, names, missing)
            continue
        group.add_commands(subcommands)
    return parser


def _subcommand_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of ``command`` (the top-level one if it cannot be found)."""
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words else None)  # the command comes first: no top-level option takes a value
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown and not getattr(args, "unavailable", False):  # a misspelt flag: the subcommand's usage
            _subcommand_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # a usage error (argparse printed it, status 2), or --help / --version (0)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        try:
            return int(args.handler(args) or 0)
        except ModuleNotFoundError as exc:  # an optional install the command reached for
            missing = missing_extra(exc)
            if missing is None:
                raise
            raise missing from exc
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
