"""The README's live local-panel table is what the committed votes files give (issue 11, item 5):
every row of the section "A local panel, live" is recomputed by benchmarks/local_panel_table.py
from benchmarks/results/ and compared cell by cell."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from local_panel_table import table  # noqa: E402

from judgefuse.evaluation.loaders.votes import read_votes  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
JUDGES = {"qwen-logprob-plain", "qwen-sc-plain", "smollm2-logprob-delimited"}


def rows(markdown: str) -> dict[str, list[str]]:
    """First word of each table row's name -> its cells after the name (first occurrence wins)."""
    out: dict[str, list[str]] = {}
    for line in markdown.splitlines():
        if not line.startswith("| ") or line.startswith("| judge or method") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = cells[0].split()[0]
        key = f"{name} 50" if re.search(r"\b(first|same) 50\b", cells[0]) else name
        out.setdefault(key, cells[1:])
    return out


def test_readme_table_is_recomputed_from_the_committed_votes() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### A local panel, live"):]
    section = section[: section.index("\n## ")]
    printed = rows(section)
    computed = rows(table(read_votes(RESULTS / "local_panel_llmbar_natural100.jsonl"), JUDGES,
                          read_votes(RESULTS / "local_fuser_llmbar_natural50.jsonl"), []))
    assert len(printed) >= 12
    for name, cells in printed.items():
        assert computed[name] == cells, name
