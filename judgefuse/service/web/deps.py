"""The HTTP edge's dependencies as ``Annotated`` aliases (full-stack-fastapi-template's
``api/deps.py`` style): who is calling, the settings, the process metrics, annotator accounts and
the panels, and nothing of any slice.

Everything comes from ``request.app.state``, filled by the app factory's lifespan: nothing is
built at import time. A slice's own service comes from that slice's ``deps.py``
(``judging/deps.py``'s ``JudgingDep``, ``review/deps.py``'s ``LabelsDep``, ``VerdictsDep`` and
``ReviewQueueDep``, ``learning/deps.py``, ``estimates/deps.py``, ``monitoring/deps.py``), so what a
slice reads and writes stays in that slice and this module knows none. The functions are
``async def`` on purpose: FastAPI runs a plain ``def`` dependency in a worker thread, which costs
more than the dependency itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel

from judgefuse.service.errors import Unauthorized
from judgefuse.service.kernel.accounts import CREDENTIAL_PREFIX, AnnotatorAccounts
from judgefuse.service.kernel.metrics import ServiceMetrics
from judgefuse.service.kernel.serving import PanelDirectory
from judgefuse.service.settings import Settings
from judgefuse.service.web.auth import Authenticator, Caller, Principal, principal_for, refuse_annotator
from judgefuse.service.web.sessions import (
    COOKIE,
    OPEN,
    SignInRequired,
    current_session,
    is_browser,
    session_caller,
)

__all__ = [
    "AccountsDep", "CallerDep", "MetricsDep", "PanelsDep", "ReviewerDep", "SettingsDep", "TenantDep", "gateway_part",
    "json_response",
]


def gateway_part(name: str) -> Callable[[Request], Awaitable[Any]]:
    """The dependency a slice's ``deps.py`` gives its service by: the composition root's
    attribute ``name`` (``request.app.state.gateway.<name>``), read by name so that no slice
    imports the gateway."""

    async def part(request: Request) -> Any:
        return getattr(request.app.state.gateway, name)

    part.__name__ = part.__qualname__ = f"get_{name}"
    return part


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_panels(request: Request) -> PanelDirectory:
    return request.app.state.gateway


async def get_metrics(request: Request) -> ServiceMetrics:
    return request.app.state.metrics


async def get_accounts(request: Request) -> AnnotatorAccounts:
    return request.app.state.gateway.annotators


async def get_tenant(request: Request) -> str:
    """The caller's tenant from ``Authorization: Bearer <key>`` or ``X-API-Key`` (else 401);
    a live annotator credential is refused here with 403 (its routes take ``ReviewerDep``).

    Headers are read directly (not as ``Header`` parameters) to keep per-request cost low.
    """
    authenticator: Authenticator = request.app.state.authenticator
    headers = request.headers
    authorization, x_api_key = headers.get("authorization"), headers.get("x-api-key")
    if CREDENTIAL_PREFIX in (authorization or x_api_key or ""):
        await refuse_annotator(authenticator, request.app.state.gateway.annotators,
                               authorization, x_api_key)
    return authenticator.tenant_for(authorization, x_api_key)


async def get_reviewer(request: Request) -> Principal:
    """A tenant key or an annotator credential (lease, label, skip, own history); else 401."""
    headers = request.headers
    return await principal_for(request.app.state.authenticator, request.app.state.gateway.annotators,
                               headers.get("authorization"), headers.get("x-api-key"))


async def get_caller(request: Request) -> Caller:
    """The operator (metrics token) or a tenant (its API key, or a signed-in page session with
    its role); else 401. For the pages and the views that differ between the two (the console,
    ``/metrics``).

    A key header wins. Without one, a live session cookie (:mod:`.sessions`) is the caller: an
    annotator's is refused (403; its page is ``/review``). Without either, a browser gets the
    sign-in page (:class:`~.sessions.SignInRequired`) and an API client the JSON 401; open mode
    needs neither, as before."""
    authenticator: Authenticator = request.app.state.authenticator
    headers = request.headers
    authorization, x_api_key = headers.get("authorization"), headers.get("x-api-key")
    if CREDENTIAL_PREFIX in (authorization or x_api_key or ""):  # an account: 403, not 401
        await refuse_annotator(authenticator, request.app.state.gateway.annotators,
                               authorization, x_api_key)
    if authorization or x_api_key:
        return authenticator.caller(authorization, x_api_key)
    session = await current_session(request) if COOKIE in request.cookies else None
    request.state.page_session = session  # the page's sign-out and form token (console)
    if session is not None and session.bound != OPEN:
        return session_caller(request, session)
    try:
        return authenticator.caller(None, None)
    except Unauthorized as exc:
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise SignInRequired(f"{exc.message} (a browser signs in at /signin)", next_url=path,
                             browser=is_browser(request), fields=exc.fields) from None


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    """Serialise a response model once (the route keeps ``response_model`` for the docs;
    returning a Response skips FastAPI's re-validation of the returned object)."""
    return Response(model.model_dump_json(), status_code=status_code, media_type="application/json")


SettingsDep = Annotated[Settings, Depends(get_settings)]
PanelsDep = Annotated[PanelDirectory, Depends(get_panels)]
MetricsDep = Annotated[ServiceMetrics, Depends(get_metrics)]
TenantDep = Annotated[str, Depends(get_tenant)]
ReviewerDep = Annotated[Principal, Depends(get_reviewer)]
AccountsDep = Annotated[AnnotatorAccounts, Depends(get_accounts)]
CallerDep = Annotated[Caller, Depends(get_caller)]
