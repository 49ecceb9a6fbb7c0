"""Checks on what a client sent, made before any judge is called or anything is stored.

A request that is too long, not storable text (JSON lets lone surrogates and NUL in: neither
can be stored by every backend, :mod:`judgefuse.service.kernel.stored_text`), empty, or carries
``metadata`` nested too deeply or too large to store is refused as a 422 naming the field, so a
malformed item costs no judge calls (checked later, a deep ``metadata`` would fail only when
the verdict is serialised for storage, after the judges have been paid for); an id no verdict
can have is simply not found.

"Empty" means nothing visible: whitespace, format characters (zero-width space, joiners, BOM,
bidi marks: Unicode category Cf), control characters, and the blank fillers that render as
nothing, so an answer of ``"\\u200b"`` counts as empty.

A request is checked once, at the edge (:class:`RequestChecks`): its limits, its panel, its
``method`` and, for ``/v1/fuse``, its votes (:func:`~judgefuse.service.judging.posted_votes.posted_votes`).
What passes is a :class:`CheckedRequest`, which the rest of the path takes and never checks
again. A batch is checked item by item before any item is judged (:meth:`RequestChecks.batch`):
an item that failed the schema (:class:`~judgefuse.service.schemas.InvalidItem`), fails a check,
or repeats an earlier item's id gets its own 4xx in ``results``; the other items are judged as
usual. (One such item must not refuse the whole batch, nor, failing only at storage time, turn
the batch into a 500 after the good items have been stored.)
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judgefuse.judges.types import JudgeVote
from judgefuse.service.errors import FieldProblem, InvalidFields, ServiceError
from judgefuse.service.judging.posted_votes import posted_votes
from judgefuse.service.kernel.panels import PanelRuntime, find_runtime
from judgefuse.service.kernel.stored_text import encodable, unstorable_problem
from judgefuse.service.schemas import FuseRequest, InvalidItem, JudgeRequest
from judgefuse.service.settings import Settings

__all__ = [
    "CheckedRequest",
    "RequestChecks",
    "check_request",
    "encodable",
    "json_depth",
    "visibly_empty",
]

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
_BLANK_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Hangul fillers and the blank Braille pattern: letters/symbols by category, blank on screen."""


@dataclass(frozen=True, slots=True)
class CheckedRequest:
    """A request that passed :meth:`RequestChecks.item`: the rest of the path takes this, and
    checks nothing again."""

    request: JudgeRequest
    runtime: PanelRuntime
    """The panel the request names (or the default one)."""
    prefix: str
    """Where the request sits in the body (``body``, ``body.items[3]``): errors name fields under it."""
    posted: list[JudgeVote] | None = None
    """``/v1/fuse``: the request's own votes in the panel's shape; None: the panel's judges vote."""


class RequestChecks:
    """The checks every request passes before any judge is called (module docstring)."""

    def __init__(self, settings: Settings, panels: Mapping[str, PanelRuntime], default_panel: str) -> None:
        self.settings = settings
        self.panels = panels
        self.default_panel = default_panel

    def item(self, request: JudgeRequest, prefix: str = "body") -> CheckedRequest:
        """Limits, panel, method, posted votes, in that order; a 422 naming the field under
        ``prefix`` for the first that fails."""
        settings = self.settings
        check_request(request, settings.judging.max_text_chars, prefix,
                      max_metadata_depth=settings.judging.max_metadata_depth,
                      max_metadata_bytes=settings.judging.max_metadata_bytes)
        runtime = find_runtime(self.panels, request.panel or self.default_panel,
                               field=f"{prefix}.panel")
        if request.method is not None and not runtime.is_learned(request.method):
            runtime.method(request.method, field=f"{prefix}.method")
        posted = None
        if isinstance(request, FuseRequest):
            posted = posted_votes(runtime, request.votes, prefix=prefix, limits=settings.learning)
        return CheckedRequest(request, runtime, prefix, posted)

    def batch(
        self, items: Sequence[JudgeRequest | InvalidItem]
    ) -> list[CheckedRequest | ServiceError]:
        """Each item checked (under ``body.items[i]``), or the error it answers with."""
        checked: list[CheckedRequest | ServiceError] = []
        first_with_id: dict[str, int] = {}
        for i, item in enumerate(items):
            prefix = f"body.items[{i}]"
            if isinstance(item, InvalidItem):
                checked.append(InvalidFields.of_pydantic(prefix, item.errors))
                continue
            try:
                one = self.item(item, prefix)
            except ServiceError as exc:
                checked.append(exc)
                continue
            if item.id is not None:
                earlier = first_with_id.setdefault(item.id, i)
                if earlier != i:
                    checked.append(FieldProblem(f"{prefix}.id", f"the same id as body.items[{earlier}]"))
                    continue
            checked.append(one)
        return checked


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
            raise FieldProblem(f"{prefix}.{name}", unstorable_problem(value))
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
    if not encodable(text):  # json.dumps escapes NUL: only a lone surrogate gets here
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
