"""What every console page shares: its headers, who is signed in (with a sign-out button) and
the session's form token for the operator's posts (docs/console.md, 'Signing in').

A page read with an API key header has no session, so no sign-out and no post form; a signed-in
viewer sees no post form either (a post would be refused, see :mod:`.actions`). In open mode the
first visit opens a session for the form token, as ``/review`` does.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from judgefuse.service.console.verdict_view import fmt, usd
from judgefuse.service.web.auth import Caller
from judgefuse.service.web.sessions import (
    COOKIE,
    PageSession,
    SessionSigner,
    current_session,
    open_session,
    set_session_cookie,
)

__all__ = ["SECURITY_HEADERS", "console_page"]

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


async def _session(request: Request) -> tuple[PageSession | None, str | None]:
    """(the page's session, a new open-mode cookie to set or None)."""
    session: PageSession | None = getattr(request.state, "page_session", None)
    if (
        session is None
        and request.app.state.authenticator.open_mode
        and "authorization" not in request.headers
        and "x-api-key" not in request.headers
    ):
        session = await current_session(request) if COOKIE in request.cookies else None
        if session is None:
            return open_session(request)
    return session, None


async def console_page(request: Request, caller: Caller, template: str, **context: Any) -> HTMLResponse:
    """Render a console page for ``caller``: ``who`` and ``role`` for the header, ``csrf`` (the
    session's form token, None without a session) and ``may_post`` (an operator's session of a
    tenant)."""
    session, new_cookie = await _session(request)
    signer: SessionSigner = request.app.state.review_sessions
    csrf = signer.form_token(session) if session is not None else None
    html = request.app.state.templates.get_template(template).render(
        fmt=fmt,
        usd=usd,
        who=caller.name,
        role=caller.role,
        csrf=csrf,
        signed_in=session is not None and session.bound != "open",
        may_post=csrf is not None and caller.may_post and caller.tenant is not None,
        **context,
    )
    response = HTMLResponse(html, headers=SECURITY_HEADERS)
    if new_cookie is not None:
        set_session_cookie(request, response, new_cookie)
    return response
