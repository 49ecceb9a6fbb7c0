"""Reading the docs' Markdown as the tests that run them need it: fenced blocks with their heading."""

from __future__ import annotations

import re
from pathlib import Path

FENCE = re.compile(r"^```(\w*)\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


def fenced(path: Path) -> list[tuple[str, str, str]]:
    """``(heading, language, code)`` of each fenced block of a Markdown file, in order; the
    heading is the nearest one above the block (outside code)."""
    found: list[tuple[str, str, str]] = []
    heading, language = path.name, None
    code: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        fence = FENCE.match(line)
        if language is None:
            if fence:
                language, code = fence.group(1), []
            elif (title := HEADING.match(line)) is not None:
                heading = title.group(2)
        elif line.strip() == "```":
            found.append((heading, language, "\n".join(code) + "\n"))
            language = None
        else:
            code.append(line)
    return found
