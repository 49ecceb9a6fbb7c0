"""``python -m judgefuse.judges.local``: the same actions as ``judgefuse model`` (see .commands)."""

from __future__ import annotations

import argparse
import sys

from judgefuse.judges.local.commands import add_model_commands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m judgefuse.judges.local")
    add_model_commands(parser.add_subparsers(dest="cmd", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
