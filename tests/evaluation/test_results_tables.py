"""docs/results.md's tables are what the code gives (issue 47, item 5): each table that
benchmarks/results_tables.py regenerates is computed from the shared data and compared with the
page line for line. So far: the Trust-or-Escalate replay (its stacked row had drifted from
81.0 / ECE 2.1 to what the command prints, 83.0 / 2.4, after stacking's features changed)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from results_tables import TABLES, compute  # noqa: E402

PAGE = ROOT / "docs" / "results.md"


def page_table(command: str) -> str:
    """The first Markdown table after the page names ``command``."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"`{command}`")
    rows = re.search(r"^\|.*?(?=\n[^|])", text[start:], re.M | re.S)
    assert rows is not None, f"no table after {command!r}"
    return rows.group(0)


def test_the_trust_or_escalate_table_is_what_the_code_gives(shared_data: Path) -> None:
    command = f"judgefuse eval ../shared/data/{TABLES['trust_or_escalate'].data}"
    assert page_table(command) == compute("trust_or_escalate", shared_data)
