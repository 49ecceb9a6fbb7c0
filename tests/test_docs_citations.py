"""Code cites the design page by section ("docs/design.md, 'The review loop'"): every cited
section must be a heading of docs/design.md, so renaming one without its citations fails here
(the site build checks links between pages, not citations in code)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"docs/design\.md,\s+'([^']+)'")


def headings() -> set[str]:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    return {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}


def citations() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for folder in ("judgefuse", "tests", "benchmarks", "scripts", "deploy"):
        for path in sorted((ROOT / folder).rglob("*")):
            if not path.is_file() or path.suffix not in {".py", ".md", ".yaml", ".yml", ".j2", ""}:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            for name in CITATION.findall(text):
                found.setdefault(" ".join(name.split()), set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_cited_design_section_exists() -> None:
    cited = citations()
    assert len(cited) >= 10, cited  # the code does cite the page
    missing = {name: sorted(paths) for name, paths in cited.items() if name not in headings()}
    assert not missing, f"sections cited but not in docs/design.md: {missing}"


def test_no_citation_of_a_design_document_outside_the_repository() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for folder in ("judgefuse", "tests", "benchmarks", "scripts")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "DESIGN" + ".md" in path.read_text(encoding="utf-8")
    ]
    assert not stale, stale
