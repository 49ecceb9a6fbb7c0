"""Signing in and out of the pages (docs/console.md, 'Signing in'; docs/review-loop.md,
'Sessions'): a credential posted once to ``/signin`` (or ``/review/login``) exchanged for a
session cookie bound to it server-side. The cookie, its checks, the roles and the CSRF guard
live in :mod:`judgefuse.service.web.sessions` (the console and ``/metrics`` read sessions too,
and sit on both sides of this slice); what is the review loop's is here: the name a tenant key
labels under, and the rule that a tenant with annotator (or operator) accounts labels as them.

What a credential opens:

* an account credential (``jfa.<tenant>.<id>.<secret>``): a session as that account, with its
  role (annotator, operator, viewer);
* a tenant API key: its tenant's operator; on ``/review`` only while the tenant has no
  annotator or operator account (:data:`TENANT_KEY_REFUSED`);
* the metrics token: the operator of every tenant (the console's overview, ``/metrics``).
"""

from __future__ import annotations

import time

from starlette.requests import Request

from judgefuse.service.errors import Forbidden, Unauthorized
from judgefuse.service.kernel.accounts import AnnotatorAccounts, looks_like_credential
from judgefuse.service.review.queue import annotator_name
from judgefuse.service.settings import DEFAULT_TENANT
from judgefuse.service.web.sessions import (
    ADMIN,
    COOKIE,
    KEY_BINDING,
    METRICS_BINDING,
    OPEN,
    OPERATOR,
    CrossSite,
    PageSession,
    SessionSigner,
    check_post,
    current_session,
    open_session,
    posted_session,
    set_session_cookie,
)

__all__ = ["COOKIE", "OPEN", "TENANT_KEY_REFUSED", "CrossSite", "ReviewSession", "SessionSigner",
           "check_post", "current_session", "open_session", "posted_session", "set_session_cookie",
           "sign_in", "sign_out"]

ReviewSession = PageSession
"""The review page's session is a page session (its old name)."""

TENANT_KEY_REFUSED = ("this tenant has annotator accounts: sign in with your annotator credential "
                      "(the tenant's API key is not accepted on /review)")


async def sign_in(
    request: Request, form: dict[str, str], *, for_review: bool = False
) -> tuple[str, str]:
    """The sign-in form's credential exchanged for (a session cookie's value, the session's
    role); the session is stored server-side and bound to the credential. 401 for an unknown credential; with ``for_review``, 403 for a
    tenant key once the tenant has annotator or operator accounts (they label as themselves)."""
    signer: SessionSigner = request.app.state.review_sessions
    authenticator = request.app.state.authenticator
    accounts: AnnotatorAccounts = request.app.state.gateway.annotators
    presented = (form.get("credential") or form.get("api_key") or "").strip() or None
    expires_at = time.time() + signer.lifetime_s
    if presented is not None and authenticator.is_metrics_token(presented):
        bound = METRICS_BINDING + (authenticator.metrics_fingerprint() or "")
        session_id = await accounts.open_session(DEFAULT_TENANT, bound, expires_at)
        return signer.issue(DEFAULT_TENANT, "operator", session_id=session_id, bound=bound), ADMIN
    if authenticator.open_mode:
        annotator = annotator_name(DEFAULT_TENANT, form.get("annotator") or None, None,
                                   field="form.annotator")
        return signer.issue(DEFAULT_TENANT, annotator), OPERATOR
    account = await accounts.verify(presented or "") if looks_like_credential(presented) else None
    if account is not None:
        session_id = await accounts.open_session(account.tenant, account.id, expires_at)
        return (signer.issue(account.tenant, account.name, session_id=session_id, bound=account.id),
                account.role)
    if looks_like_credential(presented):
        raise Unauthorized("unknown, revoked or rotated credential",
                           fields=[("form.credential", "unknown, revoked or rotated")])
    try:
        tenant = authenticator.tenant_for(None, presented)
    except Unauthorized:
        raise Unauthorized("unknown credential or API key",
                           fields=[("form.credential", "unknown credential or key")]) from None
    if for_review and await accounts.any(tenant):
        raise Forbidden(TENANT_KEY_REFUSED, fields=[("form.credential", "a tenant API key")])
    annotator = annotator_name(tenant, form.get("annotator") or None, None, field="form.annotator")
    bound = KEY_BINDING + (authenticator.fingerprint(tenant) or "")
    session_id = await accounts.open_session(tenant, bound, expires_at)
    return signer.issue(tenant, annotator, session_id=session_id, bound=bound), OPERATOR


async def sign_out(request: Request, form: dict[str, str]) -> None:
    """Sign-out: the stored session is deleted, so the cookie (or a copy) no longer works."""
    session = await posted_session(request, form)
    if session.bound != OPEN:
        await request.app.state.gateway.annotators.close_session(session.tenant, session.session_id)
