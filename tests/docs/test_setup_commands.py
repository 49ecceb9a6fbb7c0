"""The README and the quickstart give the same two set-up commands (issue 47: they had drifted,
the quickstart's test line naming fewer of the packages it installs)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _setup_block(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    found = re.search(r"^## Set up[^\n]*\n+```sh\n(.*?)```", text, flags=re.M | re.S)
    assert found, f"{page.name}: no '## Set up' section with a sh block"
    return found.group(1)


def test_the_quickstart_and_the_readme_set_up_alike() -> None:
    readme = _setup_block(ROOT / "README.md")
    assert readme == _setup_block(ROOT / "docs" / "quickstart.md")
    commands = [line.split("#")[0].strip() for line in readme.splitlines()]
    assert commands == ["bash scripts/demo", "bash scripts/test"]
