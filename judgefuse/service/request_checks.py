"""Checks on what a client sent, made before any judge is called or anything is stored.

A request that is too long, not valid Unicode (JSON lets lone surrogates in, and they cannot be
stored or returned as UTF-8) or empty is refused as a 422 naming the field, so a malformed item
costs no judge calls; an id no verdict can have is simply not found.
"""

from __future__ import annotations

import json

from judgefuse.service.errors import FieldProblem
from judgefuse.service.schemas import JudgeRequest
from judgefuse.service.storage import VerdictNotFound

__all__ = ["check_request", "check_verdict_id", "encodable"]


def check_request(request: JudgeRequest, max_text_chars: int, prefix: str = "body") -> None:
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
    if request.metadata and not encodable(json.dumps(request.metadata, ensure_ascii=False)):
        raise FieldProblem(f"{prefix}.metadata", "not valid Unicode text (a lone surrogate?)")
    if not request.question.strip() and not (request.answer_a.strip() or request.answer_b.strip()):
        raise FieldProblem(f"{prefix}.question", "question and both answers are empty")


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
