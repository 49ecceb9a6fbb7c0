"""``/signin`` and ``/signout``: the one sign-in page of the console, ``/review`` and ``/metrics``
(docs/console.md, 'Signing in').

``GET /signin`` shows the form (any page asked for without a session shows it in place, with
``next`` pointing back there). ``POST /signin`` exchanges the credential for a session cookie
(:func:`judgefuse.service.review.session.sign_in`) and goes to ``next``, or else where the role
belongs (an annotator to ``/review``, everyone else to ``/console``); a browser that typed a
wrong credential sees the form again with the reason, an API client the JSON error naming the
field. ``POST /signout`` ends the session server-side (CSRF-checked like every page post).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from judgefuse.service.errors import FieldProblem, Forbidden, Unauthorized
from judgefuse.service.kernel.accounts import ANNOTATOR, LABELLING_ROLES
from judgefuse.service.review.session import sign_in, sign_out
from judgefuse.service.web.sessions import (
    OPEN,
    check_post,
    clear_session_cookie,
    current_session,
    read_form,
    safe_next,
    set_session_cookie,
    signin_page,
)

router = APIRouter(tags=["sign-in"], include_in_schema=False)


@router.get("/signin", response_class=HTMLResponse)
async def signin_form(
    request: Request,
    next: Annotated[str | None, Query(max_length=2048)] = None,  # noqa: A002
) -> HTMLResponse:
    return signin_page(request, next_url=next or "")


def _error_text(exc: Unauthorized | Forbidden | FieldProblem) -> str:
    if isinstance(exc, FieldProblem):
        return exc.fields[0][1]
    return exc.message


@router.post("/signin")
async def signin(request: Request) -> Response:
    check_post(request)
    form = await read_form(request)
    next_url = safe_next(form.get("next"), "")
    browser = "text/html" in request.headers.get("accept", "")
    previous = await current_session(request)
    try:
        cookie, role = await sign_in(request, form, for_review=next_url.startswith("/review"))
    except (Unauthorized, Forbidden, FieldProblem) as exc:
        if not browser:  # API clients get the usual JSON error naming the field
            raise
        return signin_page(request, next_url=next_url, error=_error_text(exc), status=exc.status)
    if previous is not None and previous.bound != OPEN:  # signing in again ends the old session
        await request.app.state.gateway.annotators.close_session(previous.tenant, previous.session_id)
    if role == ANNOTATOR and not next_url.startswith("/review"):
        next_url = "/review"  # the one page an annotator has
    elif not next_url or (role not in LABELLING_ROLES and next_url.startswith("/review")):
        next_url = "/console"  # a viewer or the metrics token reads the console
    response = RedirectResponse(next_url, status_code=303)
    set_session_cookie(request, response, cookie)
    return response


@router.post("/signout")
async def signout(request: Request) -> Response:
    await sign_out(request, await read_form(request))
    response = RedirectResponse("/signin", status_code=303)
    clear_session_cookie(response)
    return response
