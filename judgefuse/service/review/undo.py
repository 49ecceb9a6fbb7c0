"""The annotator page's undo: the last label of this session, taken back within a minute.

After a label the page gets an undo token: the verdict id and the label's time, signed (HMAC-
SHA256) for this tenant and annotator with a key derived from ``review_session_secret`` (random
per process when unset, like the sessions). Posting it back within ``UNDO_WINDOW_S`` asks
storage to remove exactly that label (``Storage.undo_label`` refuses when the verdict has been
relabelled or undone since): its increments are subtracted so the accumulators equal a recount
without it, and the item returns to the queue leased to the same annotator, who sees it again.
A token is worthless to anyone else (another annotator, another tenant, a forged id) and after
the minute.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

__all__ = ["UNDO_WINDOW_S", "UndoSigner", "UndoToken"]

UNDO_WINDOW_S = 60.0
"""How long after a label the page may take it back."""


@dataclass(frozen=True)
class UndoToken:
    verdict_id: str
    labelled_at: float

    def seconds_left(self, now: float | None = None) -> float:
        return max(0.0, self.labelled_at + UNDO_WINDOW_S - (time.time() if now is None else now))


class UndoSigner:
    def __init__(self, secret: bytes | None) -> None:
        base = secret or secrets.token_bytes(32)
        self._key = hashlib.sha256(b"judgefuse review undo\x00" + base).digest()

    def _mac(self, tenant: str, annotator: str, verdict_id: str, labelled_at: float) -> str:
        text = "\x1f".join((tenant, annotator, verdict_id, repr(float(labelled_at))))
        return hmac.new(self._key, text.encode("utf-8"), hashlib.sha256).hexdigest()[:40]

    def issue(self, tenant: str, annotator: str, verdict_id: str, labelled_at: float) -> str:
        mac = self._mac(tenant, annotator, verdict_id, labelled_at)
        return f"{mac}:{labelled_at!r}:{verdict_id}"

    def read(
        self, token: str | None, tenant: str, annotator: str, *, now: float | None = None
    ) -> UndoToken | None:
        """The label a token names, or None: absent, malformed, signed for someone else, or
        older than the undo window."""
        if not token or len(token) > 400:
            return None
        mac, _, rest = token.partition(":")
        at, _, verdict_id = rest.partition(":")
        try:
            labelled_at = float(at)
        except ValueError:
            return None
        if not verdict_id or not hmac.compare_digest(
                mac, self._mac(tenant, annotator, verdict_id, labelled_at)):
            return None
        found = UndoToken(verdict_id, labelled_at)
        return found if found.seconds_left(now) > 0 else None
