"""The annotator page's session: a signed cookie made from the tenant's API key once.

The page (``/review``) is used in a browser, where an ``Authorization`` header cannot be set
on a form post, and the key must never appear in the page or a URL. So the login form posts the
key once; the service checks it like any API call and answers with a cookie holding the
*tenant* and annotator names, an expiry and an HMAC-SHA256 of the three under a server secret
(``review_session_secret``, else random per process). The cookie is ``HttpOnly`` and
``SameSite=Strict`` (a cross-site page cannot make the browser send it), scoped to ``/review``;
page posts also refuse a foreign ``Origin``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

__all__ = ["COOKIE", "ReviewSession", "SessionSigner"]

COOKIE = "judgefuse_review"


@dataclass(frozen=True)
class ReviewSession:
    tenant: str
    annotator: str
    expires_at: float


class SessionSigner:
    def __init__(self, secret: bytes | None, *, lifetime_s: float) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self.lifetime_s = lifetime_s

    def _mac(self, payload: bytes) -> str:
        return hmac.new(self._secret, payload, hashlib.sha256).hexdigest()

    def issue(self, tenant: str, annotator: str, *, now: float | None = None) -> str:
        expires = (time.time() if now is None else now) + self.lifetime_s
        payload = base64.urlsafe_b64encode(
            json.dumps({"t": tenant, "a": annotator, "e": expires}, separators=(",", ":")).encode()
        )
        return f"{payload.decode()}.{self._mac(payload)}"

    def read(self, token: str | None, *, now: float | None = None) -> ReviewSession | None:
        """The session a cookie carries, or None (absent, forged, malformed or expired)."""
        if not token or len(token) > 4096 or "." not in token:
            return None
        payload, _, mac = token.rpartition(".")
        if not hmac.compare_digest(self._mac(payload.encode()), mac):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(payload.encode()))
            session = ReviewSession(str(data["t"]), str(data["a"]), float(data["e"]))
        except (ValueError, KeyError, TypeError):
            return None
        if session.expires_at < (time.time() if now is None else now):
            return None
        return session
