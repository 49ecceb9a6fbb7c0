"""The annotator page's session and its CSRF guard (docs/review-loop.md, 'Sessions').

The page (``/review``) is used in a browser, where an ``Authorization`` header cannot be set on
a form post, and a credential must never appear in the page or a URL. So the login form posts
the credential once (an annotator credential; a tenant key only while the tenant has no
annotator account); the service checks it and answers with a cookie holding the tenant, the
annotator, a session id, what the session is bound to, an expiry and an HMAC-SHA256 of them
under a server secret (``review_session_secret``, else random per process). The cookie is
``HttpOnly`` and ``SameSite=Strict``, scoped to ``/review``.

**Bound to the credential, ended server-side.** The session id is stored with the credential
it was opened with (:class:`~judgefuse.service.kernel.accounts.AnnotatorAccounts`), and every
request reads it back (one state read): a session ends when its annotator credential is
revoked or rotated, when the tenant key it was opened with is rotated or its tenant removed
(the key's fingerprint is compared with the current settings'), and at logout, which deletes
it from the store, so a copy of the cookie is refused as well.

**CSRF.** ``SameSite=Strict`` does not stop a page on another *port* of the same host (same
site, other origin): in Chromium such a page relabelled items through a 307 redirect, whose
``Origin`` is ``null``. So every post must (1) carry no ``Origin`` other than this one, ``null``
included, (2) carry no ``Sec-Fetch-Site`` other than ``same-origin`` (or ``none``, a user's own
navigation), and (3) except the login, carry the session's form token (an HMAC of the session id,
which another origin cannot read from the page). Open mode (no keys) gets the same guard: the
first visit sets a session cookie with a fresh id, and posts need its token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from judgefuse.service.errors import Forbidden, Unauthorized
from judgefuse.service.kernel.accounts import Annotator, AnnotatorAccounts, looks_like_credential
from judgefuse.service.review.queue import annotator_name
from judgefuse.service.settings import DEFAULT_TENANT

__all__ = ["COOKIE", "OPEN", "CrossSite", "ReviewSession", "SessionSigner", "check_post",
           "current_session", "open_session", "posted_session", "set_session_cookie", "sign_in",
           "sign_out"]

COOKIE = "judgefuse_review"
OPEN = "open"
"""What an open-mode session is bound to (nothing: no credential exists)."""


class CrossSite(Forbidden):
    """403: a page post that may come from another origin (CSRF)."""


@dataclass(frozen=True)
class ReviewSession:
    tenant: str
    annotator: str
    expires_at: float
    session_id: str = ""
    bound: str = OPEN
    """An annotator account id, ``key:<fingerprint>`` for a tenant key, or ``open``."""
    account: Annotator | None = None
    """The annotator account of a session opened with its credential."""

    def may_use(self, panel: str) -> bool:
        return self.account is None or self.account.may_use(panel)


class SessionSigner:
    def __init__(self, secret: bytes | None, *, lifetime_s: float) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self.lifetime_s = lifetime_s

    def _mac(self, payload: bytes) -> str:
        return hmac.new(self._secret, payload, hashlib.sha256).hexdigest()

    def issue(
        self, tenant: str, annotator: str, *, session_id: str | None = None, bound: str = OPEN,
        now: float | None = None,
    ) -> str:
        expires = (time.time() if now is None else now) + self.lifetime_s
        body = {"t": tenant, "a": annotator, "e": expires, "s": session_id or secrets.token_urlsafe(18),
                "b": bound}
        payload = base64.urlsafe_b64encode(json.dumps(body, separators=(",", ":")).encode())
        return f"{payload.decode()}.{self._mac(payload)}"

    def read(self, token: str | None, *, now: float | None = None) -> ReviewSession | None:
        """The session a cookie carries, or None (absent, forged, malformed or expired). Says
        nothing of the server-side state: see :func:`current_session`."""
        if not token or len(token) > 4096 or "." not in token:
            return None
        payload, _, mac = token.rpartition(".")
        if not hmac.compare_digest(self._mac(payload.encode()), mac):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(payload.encode()))
            session = ReviewSession(str(data["t"]), str(data["a"]), float(data["e"]),
                                    str(data.get("s", "")), str(data.get("b", OPEN)))
        except (ValueError, KeyError, TypeError):
            return None
        if session.expires_at < (time.time() if now is None else now):
            return None
        return session

    def form_token(self, session: ReviewSession) -> str:
        """The per-session token every page form posts (an HMAC of the session id)."""
        return self._mac(f"form:{session.tenant}:{session.session_id}".encode())[:32]

    def check_form_token(self, session: ReviewSession, token: str | None) -> None:
        if not session.session_id or not token or not hmac.compare_digest(
                self.form_token(session), token):
            raise CrossSite("the form token is missing or wrong: reload /review and try again",
                            fields=[("form.csrf", "missing or wrong")])


def check_post(request: Request) -> None:
    """Refuse a post that another origin may have sent: a foreign or ``null`` ``Origin``, a
    ``Sec-Fetch-Site`` other than ``same-origin``/``none`` (the form token is checked apart)."""
    origin = request.headers.get("origin")
    if origin is not None:
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin != own:
            problem = "null (a redirect, a sandboxed frame or a file)" if origin == "null" else "not this site"
            raise CrossSite("cross-site post refused", fields=[("header.origin", problem)])
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        raise CrossSite("cross-site post refused",
                        fields=[("header.sec-fetch-site", f"{fetch_site[:32]}, not same-origin")])


async def current_session(request: Request) -> ReviewSession | None:
    """The request's live session, or None: the cookie's signature and expiry, then (outside
    open mode) the stored session: still open, its credential still the account's or the
    tenant key still the one it was opened with."""
    signer: SessionSigner = request.app.state.review_sessions
    signed = signer.read(request.cookies.get(COOKIE))
    authenticator = request.app.state.authenticator
    if authenticator.open_mode:
        if signed is None or signed.tenant != DEFAULT_TENANT or signed.bound != OPEN:
            return None
        return signed
    if signed is None or signed.bound == OPEN or not signed.session_id:
        return None
    accounts: AnnotatorAccounts = request.app.state.gateway.annotators
    stored = await accounts.session(signed.tenant, signed.session_id)
    if stored is None or stored[0] != signed.bound:
        return None
    bound, account = stored
    if account is None:  # a tenant key: still this tenant's current key?
        fingerprint = authenticator.fingerprint(signed.tenant)
        if fingerprint is None or bound != f"key:{fingerprint}":
            return None
        return signed
    return ReviewSession(signed.tenant, account.name, signed.expires_at, signed.session_id,
                         bound, account)


def set_session_cookie(request: Request, response: Response, value: str) -> None:
    signer: SessionSigner = request.app.state.review_sessions
    response.set_cookie(COOKIE, value, max_age=int(signer.lifetime_s), path="/review", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")


def open_session(request: Request) -> tuple[ReviewSession, str]:
    """Open mode's first visit: a session (no credential) whose id keys the form token."""
    signer: SessionSigner = request.app.state.review_sessions
    value = signer.issue(DEFAULT_TENANT, DEFAULT_TENANT)
    session = signer.read(value)
    assert session is not None
    return session, value


async def sign_in(request: Request, form: dict[str, str]) -> str:
    """The login form's credential exchanged for a session cookie's value (stored server-side
    and bound to the credential). 401 for an unknown credential; 403 for a tenant key once the
    tenant has annotator accounts (they sign in with their own credentials)."""
    signer: SessionSigner = request.app.state.review_sessions
    authenticator = request.app.state.authenticator
    accounts: AnnotatorAccounts = request.app.state.gateway.annotators
    presented = (form.get("credential") or form.get("api_key") or "").strip() or None
    if authenticator.open_mode:
        annotator = annotator_name(DEFAULT_TENANT, form.get("annotator") or None, None,
                                   field="form.annotator")
        return signer.issue(DEFAULT_TENANT, annotator)
    expires_at = time.time() + signer.lifetime_s
    account = await accounts.verify(presented or "") if looks_like_credential(presented) else None
    if account is not None:
        session_id = await accounts.open_session(account.tenant, account.id, expires_at)
        return signer.issue(account.tenant, account.name, session_id=session_id, bound=account.id)
    tenant = authenticator.tenant_for(None, presented)
    if await accounts.any(tenant):
        raise Forbidden(TENANT_KEY_REFUSED, fields=[("form.credential", "a tenant API key")])
    annotator = annotator_name(tenant, form.get("annotator") or None, None, field="form.annotator")
    bound = f"key:{authenticator.fingerprint(tenant)}"
    session_id = await accounts.open_session(tenant, bound, expires_at)
    return signer.issue(tenant, annotator, session_id=session_id, bound=bound)


TENANT_KEY_REFUSED = ("this tenant has annotator accounts: sign in with your annotator credential "
                      "(the tenant's API key is not accepted on /review)")


async def posted_session(request: Request, form: dict[str, str]) -> ReviewSession:
    """A page post's session, after the CSRF guard: origin headers, a live session (401
    otherwise) and its form token."""
    check_post(request)
    session = await current_session(request)
    if session is None:
        raise Unauthorized("log in at /review first", fields=[("cookie", "no live session")])
    signer: SessionSigner = request.app.state.review_sessions
    signer.check_form_token(session, form.get("csrf"))
    return session


async def sign_out(request: Request, form: dict[str, str]) -> None:
    """Logout: the stored session is deleted, so the cookie (or a copy) no longer works."""
    session = await posted_session(request, form)
    if session.bound != OPEN:
        await request.app.state.gateway.annotators.close_session(session.tenant, session.session_id)
