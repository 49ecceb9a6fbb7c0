"""Text every storage backend can store, checked at the boundary.

JSON lets a client send two kinds of text that cannot be stored alike everywhere: lone
surrogates (``"\\ud800"``: not encodable as UTF-8, so no backend can store or return them) and
NUL (``"\\u0000"``: SQLite and Redis store it, PostgreSQL refuses it in a ``text`` column, so the
same request would be a 200 on one backend and a 500 on another). Both are refused before anything
is stored: a 422 naming the field, or a 404 for an id that names an existing verdict (an id no
verdict can have is simply not found). Every boundary check of the service
(:mod:`judgefuse.service.judging.request_checks`, the posted votes, annotator names, verdict ids)
goes through :func:`encodable`, so every backend answers alike.
"""

from __future__ import annotations

from judgefuse.service.storage import VerdictNotFound

__all__ = ["check_verdict_id", "encodable", "storable", "unstorable_problem"]


def encodable(text: str) -> bool:
    """True when ``text`` can be stored by every backend and returned as UTF-8: valid Unicode
    (no lone surrogate) and no NUL."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


storable = encodable
"""The same check, under the name that says why."""


def unstorable_problem(text: str) -> str:
    """Why :func:`encodable` refused ``text``, in words for a 422."""
    if "\x00" in text:
        return "contains NUL (\\u0000), which cannot be stored"
    return "not valid Unicode text (a lone surrogate?)"


def check_verdict_id(tenant: str, verdict_id: str) -> None:
    """An id no verdict can have (empty, over 256 characters, not storable text) is simply not
    found: :class:`~judgefuse.service.storage.VerdictNotFound`, before any storage read."""
    if not verdict_id or len(verdict_id) > 256 or not encodable(verdict_id):
        shown = verdict_id[:64].encode("utf-8", "replace").decode("utf-8").replace("\x00", "\\0")
        raise VerdictNotFound(tenant, shown + ("..." if len(verdict_id) > 64 else ""))
