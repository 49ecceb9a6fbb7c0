"""docs/results.md's tables are what the code gives (issue 47, item 5): each table that
benchmarks/results_tables.py regenerates is computed from the shared data and compared with the
page line for line. So far the two replays, JudgeBench and Trust-or-Escalate, and the cold-start
grid over them and the LLMBar decisions (every stacked figure had drifted from what the command
prints: 78.9 / ECE 3.4 on the page against 78.3 / 5.1, 81.0 / 2.1 against 83.0 / 2.4, 84.2 / 3.4
against 83.9 / 3.7)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from results_tables import GRIDS, TABLES, compute  # noqa: E402

PAGE = ROOT / "docs" / "results.md"


def page_table(command: str) -> str:
    """The first Markdown table after the page names ``command``."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"`{command}`")
    rows = re.search(r"^\|.*?(?=\n[^|])", text[start:], re.M | re.S)
    assert rows is not None, f"no table after {command!r}"
    return rows.group(0)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_replay_table_is_what_the_code_gives(shared_data: Path, name: str) -> None:
    command = f"judgefuse eval ../shared/data/{TABLES[name].data}"
    assert page_table(command) == compute(name, shared_data)


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_the_grid_is_what_the_code_gives(shared_data: Path, name: str) -> None:
    assert page_table(f"python benchmarks/results_tables.py {name}") == compute(name, shared_data)
