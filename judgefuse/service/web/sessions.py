"""The pages' sign-in sessions and their CSRF guard (docs/console.md, 'Signing in';
docs/review-loop.md, 'Sessions').

The pages (``/console``, ``/review``, ``/metrics`` in a browser; ``/dashboard`` redirects to the
console) are used in a browser, where an ``Authorization`` header cannot be set on a form post,
and a credential must never appear in a page or a URL. So one sign-in form (``/signin``) posts
the credential once: an account credential (``jfa.<tenant>.<id>.<secret>``, role annotator,
operator or viewer), a tenant API key (the tenant's operator) or the metrics token (the operator
of every tenant). The service checks it and answers with a cookie holding the tenant, the
name, a session id, what the session is bound to, an expiry and an HMAC-SHA256 of them under a
server secret (``review_session_secret``, else random per process). The cookie is ``HttpOnly``
and ``SameSite=Strict``, for the whole site (``Path=/``).

**Roles.** What a session may do follows from what it is bound to, read back on every
request: an account has the role it was created with (``annotator``: ``/review`` only;
``viewer``: reads the console and ``/metrics``, posts nothing; ``operator``: everything its
tenant's key may do on the pages); a tenant key is its tenant's operator; the metrics token is
the operator of every tenant (the console's every-tenant overview, ``/metrics``). A role change
or a revocation takes effect at the next request.

**Bound to the credential, ended server-side.** The session id is stored with the credential
it was opened with (:class:`~judgefuse.service.kernel.accounts.AnnotatorAccounts`), and every
request reads it back (one state read): a session ends when its account credential is revoked
or rotated, when the tenant key or metrics token it was opened with is rotated or its tenant
removed (the key's fingerprint is compared with the current settings'), and at sign-out, which
deletes it from the store, so a copy of the cookie is refused as well. The metrics token's
sessions are stored with tenant ``default``'s, under their own binding (``metrics:<fp>``).

**CSRF.** ``SameSite=Strict`` does not stop a page on another *port* of the same host (same
site, other origin): in Chromium such a page relabelled items through a 307 redirect, whose
``Origin`` is ``null``. So every post must (1) carry no ``Origin`` other than this one, ``null``
included, (2) carry no ``Sec-Fetch-Site`` other than ``same-origin`` (or ``none``, a user's own
navigation), and (3) except the sign-in, carry the session's form token (an HMAC of the session
id, which another origin cannot read from the page). Open mode (no keys) gets the same guard: the
first visit sets a session cookie with a fresh id, and posts need its token.

**A browser or an API client.** A page route without a session answers a browser (``Accept``
naming ``text/html`` and no ``Authorization`` or ``X-API-Key`` header) with the sign-in page
(:class:`SignInRequired`, rendered by the app's handler), and anything else with the usual JSON
401; a role the page refuses gets a 403 page (:class:`PageRefused`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from judgefuse.service.errors import Forbidden, Unauthorized
from judgefuse.service.kernel.accounts import ANNOTATOR, Annotator, AnnotatorAccounts
from judgefuse.service.settings import DEFAULT_TENANT
from judgefuse.service.web.auth import Caller

__all__ = [
    "ADMIN",
    "COOKIE",
    "OPEN",
    "OPERATOR",
    "CrossSite",
    "PageRefused",
    "PageSession",
    "SessionSigner",
    "SignInRequired",
    "check_post",
    "clear_session_cookie",
    "current_session",
    "is_browser",
    "open_session",
    "posted_session",
    "read_form",
    "refused_page",
    "render_page",
    "safe_next",
    "session_caller",
    "set_session_cookie",
    "signin_page",
]

COOKIE = "judgefuse_session"
OPEN = "open"
"""What an open-mode session is bound to (nothing: no credential exists)."""
OPERATOR = "operator"
ADMIN = "admin"
"""The role of a session opened with the metrics token: the operator of every tenant."""
METRICS_BINDING = "metrics:"
KEY_BINDING = "key:"


class CrossSite(Forbidden):
    """403: a page post that may come from another origin (CSRF)."""


class SignInRequired(Unauthorized):
    """401: a page asked for without a live session. A browser gets the sign-in page (the app's
    handler renders it, ``next`` pointing back here); an API client the JSON body as always."""

    def __init__(
        self,
        message: str,
        *,
        next_url: str = "/console",
        browser: bool = False,
        fields: Sequence[tuple[str, str]] = (("cookie", "no live session"),),
    ) -> None:
        super().__init__(message, fields=fields)
        self.next_url = next_url
        self.browser = browser


class PageRefused(Forbidden):
    """403: a signed-in role this page is not for (an annotator on the console, a viewer's
    post). A browser gets a page saying so, with a link to where the role belongs."""

    def __init__(
        self,
        message: str,
        *,
        field: str = "cookie",
        problem: str = "role",
        browser: bool = False,
        home: str = "/signin",
    ) -> None:
        super().__init__(message, fields=[(field, problem)])
        self.browser = browser
        self.home = home


def is_browser(request: Request) -> bool:
    """A browser navigating: ``Accept`` names ``text/html`` and no API key header is sent."""
    headers = request.headers
    return "text/html" in headers.get("accept", "") and "authorization" not in headers and "x-api-key" not in headers


def safe_next(value: str | None, default: str = "/console") -> str:
    """A same-site path to go back to after sign-in (anything else: ``default``)."""
    if (
        not value
        or len(value) > 2048
        or not value.startswith("/")
        or value.startswith("//")
        or "\\" in value
        or any(ord(c) < 32 for c in value)
    ):
        return default
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return default
    return value


@dataclass(frozen=True)
class PageSession:
    tenant: str
    annotator: str
    """The name the session acts as (an account's name; the name given with a tenant key)."""
    expires_at: float
    session_id: str = ""
    bound: str = OPEN
    """An account id, ``key:<fingerprint>`` for a tenant key, ``metrics:<fingerprint>`` for the
    metrics token, or ``open``."""
    account: Annotator | None = None
    """The account of a session opened with its credential."""

    @property
    def role(self) -> str:
        """``annotator``, ``viewer``, ``operator`` (an operator account, a tenant key, open mode)
        or ``admin`` (the metrics token)."""
        if self.account is not None:
            return self.account.role
        if self.bound.startswith(METRICS_BINDING):
            return ADMIN
        return OPERATOR

    @property
    def name(self) -> str:
        return self.annotator

    def may_use(self, panel: str) -> bool:
        return self.account is None or self.account.may_use(panel)


class SessionSigner:
    def __init__(self, secret: bytes | None, *, lifetime_s: float) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self.lifetime_s = lifetime_s

    def _mac(self, payload: bytes) -> str:
        return hmac.new(self._secret, payload, hashlib.sha256).hexdigest()

    def issue(
        self,
        tenant: str,
        annotator: str,
        *,
        session_id: str | None = None,
        bound: str = OPEN,
        now: float | None = None,
    ) -> str:
        expires = (time.time() if now is None else now) + self.lifetime_s
        body = {"t": tenant, "a": annotator, "e": expires, "s": session_id or secrets.token_urlsafe(18), "b": bound}
        payload = base64.urlsafe_b64encode(json.dumps(body, separators=(",", ":")).encode())
        return f"{payload.decode()}.{self._mac(payload)}"

    def read(self, token: str | None, *, now: float | None = None) -> PageSession | None:
        """The session a cookie carries, or None (absent, forged, malformed or expired). Says
        nothing of the server-side state: see :func:`current_session`."""
        if not token or len(token) > 4096 or "." not in token:
            return None
        payload, _, mac = token.rpartition(".")
        if not hmac.compare_digest(self._mac(payload.encode()), mac):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(payload.encode()))
            session = PageSession(
                str(data["t"]), str(data["a"]), float(data["e"]), str(data.get("s", "")), str(data.get("b", OPEN))
            )
        except (ValueError, KeyError, TypeError):
            return None
        if session.expires_at < (time.time() if now is None else now):
            return None
        return session

    def form_token(self, session: PageSession) -> str:
        """The per-session token every page form posts (an HMAC of the session id)."""
        return self._mac(f"form:{session.tenant}:{session.session_id}".encode())[:32]

    def check_form_token(self, session: PageSession, token: str | None) -> None:
        if not session.session_id or not token or not hmac.compare_digest(self.form_token(session), token):
            raise CrossSite(
                "the form token is missing or wrong: reload the page and try again",
                fields=[("form.csrf", "missing or wrong")],
            )


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
        raise CrossSite(
            "cross-site post refused", fields=[("header.sec-fetch-site", f"{fetch_site[:32]}, not same-origin")]
        )


def metrics_fingerprint(request: Request) -> str | None:
    return request.app.state.authenticator.metrics_fingerprint()


async def current_session(request: Request) -> PageSession | None:
    """The request's live session, or None: the cookie's signature and expiry, then (outside
    open mode's own sessions) the stored session: still open, its account still active with
    the same credential, or the tenant key (metrics token) still the one it was opened with."""
    signer: SessionSigner = request.app.state.review_sessions
    signed = signer.read(request.cookies.get(COOKIE))
    if signed is None:
        return None
    authenticator = request.app.state.authenticator
    if signed.bound == OPEN:
        return signed if authenticator.open_mode and signed.tenant == DEFAULT_TENANT else None
    if not signed.session_id or (authenticator.open_mode and not signed.bound.startswith(METRICS_BINDING)):
        return None
    accounts: AnnotatorAccounts = request.app.state.gateway.annotators
    stored = await accounts.session(signed.tenant, signed.session_id)
    if stored is None or stored[0] != signed.bound:
        return None
    bound, account = stored
    if account is None:
        if bound.startswith(METRICS_BINDING):  # the metrics token: still the configured one?
            fingerprint = metrics_fingerprint(request)
            return signed if fingerprint is not None and bound == METRICS_BINDING + fingerprint else None
        fingerprint = authenticator.fingerprint(signed.tenant)  # a tenant key: still this tenant's?
        if fingerprint is None or bound != KEY_BINDING + fingerprint:
            return None
        return signed
    return PageSession(signed.tenant, account.name, signed.expires_at, signed.session_id, bound, account)


def session_caller(request: Request, session: PageSession) -> Caller:
    """The caller a live session is, for the console and ``/metrics``: the metrics token the
    operator of every tenant, an operator or viewer its tenant's; an annotator is refused (403:
    its page is ``/review``). Open mode: the one tenant's operator."""
    role = session.role
    if role == ADMIN:
        return Caller(None, admin=True, role=OPERATOR, name="metrics token")
    if role == ANNOTATOR:
        raise PageRefused(
            f"{session.annotator!r} is an annotator account: it reviews at /review; this page "
            "needs an operator or viewer account, or the tenant's API key",
            problem="annotator session",
            browser=is_browser(request),
            home="/review",
        )
    if session.bound == OPEN:
        return Caller(DEFAULT_TENANT, role=OPERATOR, name=None)
    return Caller(session.tenant, role=role, name=session.annotator)


def set_session_cookie(request: Request, response: Response, value: str) -> None:
    signer: SessionSigner = request.app.state.review_sessions
    response.set_cookie(
        COOKIE,
        value,
        max_age=int(signer.lifetime_s),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/")


def open_session(request: Request) -> tuple[PageSession, str]:
    """Open mode's first visit: a session (no credential) whose id keys the form token."""
    signer: SessionSigner = request.app.state.review_sessions
    value = signer.issue(DEFAULT_TENANT, DEFAULT_TENANT)
    session = signer.read(value)
    assert session is not None
    return session, value


async def posted_session(request: Request, form: dict[str, str], *, page: str = "/review") -> PageSession:
    """A page post's session, after the CSRF guard: origin headers, a live session (401
    otherwise) and its form token."""
    check_post(request)
    session = await current_session(request)
    if session is None:
        raise Unauthorized(f"sign in first (/signin?next={page})", fields=[("cookie", "no live session")])
    signer: SessionSigner = request.app.state.review_sessions
    signer.check_form_token(session, form.get("csrf"))
    return session


PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "script-src 'unsafe-inline'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    # same-origin, not no-referrer: with no-referrer Chromium sends "Origin: null" on the
    # page's own posts, which the CSRF guard must refuse
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}


async def read_form(request: Request) -> dict[str, str]:
    """A page form's fields (``application/x-www-form-urlencoded``), the first of each name."""
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def render_page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = request.app.state.templates.get_template(template).render(**context)
    return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)


def signin_page(request: Request, *, next_url: str = "", error: str | None = None, status: int = 200) -> HTMLResponse:
    """The one sign-in page (``/signin``, and in place of any page asked for without a
    session); ``next_url``: where a successful sign-in goes (empty: by role)."""
    return render_page(
        request,
        "signin.html.j2",
        status=status,
        error=error,
        next_url=safe_next(next_url, ""),
        open_mode=request.app.state.authenticator.open_mode,
    )


def refused_page(request: Request, exc: PageRefused) -> HTMLResponse:
    return render_page(
        request, "page_refused.html.j2", status=exc.status, message=exc.message, home=safe_next(exc.home, "/signin")
    )
