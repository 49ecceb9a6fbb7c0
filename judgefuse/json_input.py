"""The one reader of JSON text from a file: UTF-8 checked, nesting depth bounded.

``json.loads`` recurses once per ``[`` or ``{``, so a line of 100,000 brackets raises
``RecursionError`` (not a ``ValueError``), and bytes that are not UTF-8 raise
``UnicodeDecodeError`` from wherever the file happens to be decoded: both escaped every loader
and resume file as a traceback. :func:`decode_utf8` and :func:`parse_json` turn each
into a :class:`JSONTextError` with the reason and the place within the text; the caller names
the file (the dataset loaders as ``DatasetError``, file:line, exit 2; the batch run's resume
files as their own error saying how to start over).

The bound, :data:`MAX_DEPTH`, is far above any record judgefuse reads (a votes line nests about
six levels) and far below the interpreter's recursion limit, so neither ``json.loads`` nor
validation afterwards (pydantic, ``model_dump_json``) ever recurses near it. The depth is counted
before parsing, and only on text with more brackets than the bound (two ``str.count`` calls
clear every ordinary line). It imports nothing of ours, so any room may use it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from judgefuse.errors import JudgefuseError

__all__ = ["MAX_DEPTH", "JSONTextError", "decode_utf8", "parse_json", "too_deep"]

MAX_DEPTH = 128
"""The deepest nesting of arrays and objects read (see the module docstring)."""

_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
"""A whole JSON string (skipped: brackets in it are text) or one bracket."""


class JSONTextError(JudgefuseError, ValueError):
    """Text that is not one JSON document judgefuse will read.

    ``reason`` is written for the user; ``line`` is the 1-based line within the text where the
    fault is (None when the text is one line or the place is unknown).
    """

    def __init__(self, reason: str, *, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


def decode_utf8(raw: bytes) -> str:
    """``raw`` as UTF-8 text, or a JSONTextError naming the first bad byte and its line."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise JSONTextError(f"not UTF-8 text ({exc.reason} at byte {column} of the line)", line=line) from None


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether arrays and objects nest deeper than ``limit`` in ``text`` (brackets inside
    strings do not count). The walk stops once past ``limit``, and text with no more brackets
    than ``limit`` is never walked."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


def parse_json(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """One JSON document from ``text``: a JSONTextError for malformed JSON (its message, line
    and column) or nesting deeper than ``max_depth``."""
    if too_deep(text, max_depth):
        raise JSONTextError(f"nested deeper than {max_depth} levels of arrays and objects")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONTextError(f"malformed JSON: {exc.msg} (column {exc.colno})", line=exc.lineno) from None
