"""A misspelt flag prints the subcommand's usage (not the top-level one) and exits 2."""

from __future__ import annotations

import pytest

from judgefuse.cli import main


@pytest.mark.parametrize(
    ("command", "required"), [("eval", []), ("compare", ["--judges", "j1", "j2"]), ("judge", []), ("tune", [])]
)
def test_misspelt_flag_shows_the_subcommands_usage(command: str, required: list[str], capsys) -> None:
    assert main([command, "x.jsonl", *required, "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert f"usage: judgefuse {command} " in err
    assert f"judgefuse {command}: error: unrecognized arguments: --no-such-flag" in err
