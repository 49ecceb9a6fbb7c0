"""Checks on what a client sent, made before any judge is called or anything is stored.

A request that is too long, not valid Unicode (JSON lets lone surrogates in, and they cannot be
stored or returned as UTF-8), empty, or carries ``metadata`` nested too deeply or too large to
store is refused as a 422 naming the field, so a malformed item costs no judge calls (a deep
``metadata`` used to pass validation and fail only when the verdict was serialised for storage,
after the judges had been paid for); an id no verdict can have is simply not found.

"Empty" means nothing visible: whitespace, format characters (zero-width space, joiners, BOM,
bidi marks: Unicode category Cf), control characters, and the blank fillers that render as
nothing, so an answer of ``"\\u200b"`` counts as empty.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from judgefuse.service.errors import FieldProblem
from judgefuse.service.schemas import JudgeRequest
from judgefuse.service.storage import VerdictNotFound

__all__ = [
    "check_request",
    "check_verdict_id",
    "encodable",
    "json_depth",
    "visibly_empty",
]

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
_BLANK_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Hangul fillers and the blank Braille pattern: letters/symbols by category, blank on screen."""


def check_request(
    request: JudgeRequest,
    max_text_chars: int,
    prefix: str = "body",
    *,
    max_metadata_depth: int = 32,
    max_metadata_bytes: int = 64 * 1024,
) -> None:
    """Refuse ``request`` (fields named under ``prefix``) unless it can be judged and stored."""
    limit = max_text_chars
    for name in ("question", "answer_a", "answer_b"):
        value = getattr(request, name)
        if len(value) > limit:
            raise FieldProblem(
                f"{prefix}.{name}", f"too long: {len(value)} characters, at most {limit}"
            )
    for name in ("question", "answer_a", "answer_b", "id", "category", "panel", "method"):
        value = getattr(request, name)
        if value is not None and not encodable(value):
            raise FieldProblem(f"{prefix}.{name}", "not valid Unicode text (a lone surrogate?)")
    if request.metadata:
        check_metadata(request.metadata, f"{prefix}.metadata", max_depth=max_metadata_depth,
                       max_bytes=max_metadata_bytes)
    if visibly_empty(request.question) and visibly_empty(request.answer_a) and visibly_empty(
        request.answer_b
    ):
        raise FieldProblem(f"{prefix}.question", "question and both answers are empty")


def check_metadata(value: dict[str, Any], field: str, *, max_depth: int, max_bytes: int) -> None:
    """Depth first (so serialising cannot recurse too deep), then the serialised size."""
    depth = json_depth(value, stop_after=max_depth)
    if depth > max_depth:
        raise FieldProblem(field, f"nested too deeply: more than {max_depth} levels")
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    except (TypeError, ValueError):  # not reachable from parsed JSON; refused, never a 500
        raise FieldProblem(field, "not JSON-serialisable") from None
    if not encodable(text):
        raise FieldProblem(field, "not valid Unicode text (a lone surrogate?)")
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise FieldProblem(field, f"too large: {size} bytes as JSON, at most {max_bytes}")


def json_depth(value: Any, *, stop_after: int | None = None) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0, ``{}`` or ``[]`` is 1), computed
    without recursion; stops counting once ``stop_after`` is exceeded."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if stop_after is not None and deepest > stop_after:
            return deepest
        stack.extend((child, depth) for child in children if isinstance(child, (dict, list, tuple)))
    return deepest


def visibly_empty(text: str) -> bool:
    """True when ``text`` shows nothing: only whitespace, format/control characters, fillers."""
    return all(
        ch in _BLANK_FILLERS or unicodedata.category(ch) in _INVISIBLE_CATEGORIES for ch in text
    )


def encodable(text: str) -> bool:
    """True when ``text`` can be stored and returned as UTF-8 (JSON lets lone surrogates in)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_verdict_id(tenant: str, verdict_id: str) -> None:
    """An id no verdict can have (empty, over 256 characters, not UTF-8) is simply not found."""
    if not verdict_id or len(verdict_id) > 256 or not encodable(verdict_id):
        shown = verdict_id[:64].encode("utf-8", "replace").decode("utf-8")
        raise VerdictNotFound(tenant, shown + ("..." if len(verdict_id) > 64 else ""))
