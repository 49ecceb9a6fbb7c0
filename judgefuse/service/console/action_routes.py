"""The console's posts: an operator's buttons (docs/console.md, 'What an operator can do').

* ``POST /console/refit``: refit the panel's learned fusion now (``POST /v1/fusion/refit``'s
  path); the outcome and its reason land in the panel's refit log, which the console's learning
  section shows;
* ``POST /console/monitor/clear``: end the drift alarm of the panel's current threshold
  version (``POST /v1/monitor/clear``'s path).

Each post is a page post: the CSRF guard of :mod:`judgefuse.service.web.sessions` (origin
headers, a live session, its form token), then the role: an operator (an operator account, a
tenant key, open mode) of a tenant. A viewer, an annotator or the metrics token (every tenant,
no one tenant's operator) is refused with 403 and nothing is done. An API client uses the
``/v1`` routes with the tenant key instead.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse

from judgefuse.service.console.deps import GatewayDep
from judgefuse.service.web.auth import Caller
from judgefuse.service.web.sessions import PageRefused, is_browser, posted_session, read_form, session_caller

router = APIRouter(tags=["console"], include_in_schema=False)


async def _operator(request: Request) -> tuple[Caller, dict[str, str]]:
    """(the posting operator, the form) or 401/403: nothing is done for anyone else."""
    form = await read_form(request)
    session = await posted_session(request, form, page="/console")
    caller = session_caller(request, session)
    browser = "text/html" in request.headers.get("accept", "") or is_browser(request)
    if not caller.may_post:
        raise PageRefused(
            f"{caller.name or 'this account'!r} is a {caller.role}: the console is "
            "read-only for it (an operator account or the tenant's key may post)",
            problem=f"{caller.role} session",
            browser=browser,
            home="/console",
        )
    if caller.tenant is None:
        raise PageRefused(
            "the metrics token reads every tenant and acts for none: sign in with "
            "the tenant's key or an operator account to act on a panel",
            problem="metrics token session",
            browser=browser,
            home="/console",
        )
    return caller, form


def _back(panel: str, anchor: str) -> RedirectResponse:
    return RedirectResponse(f"/console?{urlencode({'panel': panel})}#{anchor}-{quote(panel)}", status_code=303)


@router.post("/console/refit")
async def refit_now(request: Request, gateway: GatewayDep) -> RedirectResponse:
    """Refit now; whatever the outcome (promoted, kept, skipped), the learning section lists it
    with its reason."""
    caller, form = await _operator(request)
    runtime = gateway.runtime(form.get("panel") or None, field="form.panel")
    await gateway.learning.refit(caller.tenant or "", runtime.name, trigger=f"console ({caller.name or 'tenant key'})")
    return _back(runtime.name, "learning")


@router.post("/console/monitor/clear")
async def clear_alarm(request: Request, gateway: GatewayDep) -> RedirectResponse:
    caller, form = await _operator(request)
    runtime = gateway.runtime(form.get("panel") or None, field="form.panel")
    await gateway.monitoring.clear(caller.tenant or "", runtime)
    return _back(runtime.name, "monitor")
