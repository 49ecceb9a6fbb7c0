"""``/review``: the annotator page. Server-rendered (Jinja2, autoescaped), no build step.

One item at a time from the panel's review queue (leased to the annotator like ``GET
/v1/review/next``, random order): the question and the two answers side by side, keys ``a`` /
``b`` to label (``POST /v1/feedback``'s path) and ``s`` to skip (the lease is released), the
progress of this session and the queue depth (a skipped item goes back to the queue at its
rank; the page then shows the next one rather than the same item again). The judges' verdict is not shown unless the
panel opts in (``review_shows_verdict``). Reloading the page leases the next item; the one
left behind returns to the queue when its lease expires (``review_lease_s``).

Auth: the tenant's API key is posted once to ``/review/login`` and exchanged for a signed
session cookie (:mod:`judgefuse.service.review.session`); the key never appears in the page or
a URL. In open mode (no keys configured) no login is needed. The annotator name is given at
login (default: the tenant's name).
"""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from judgefuse.judges.types import Letter
from judgefuse.service.errors import FieldProblem, ServiceError, Unauthorized
from judgefuse.service.review.queue import annotator_name, item_out
from judgefuse.service.review.session import COOKIE, ReviewSession, SessionSigner
from judgefuse.service.settings import DEFAULT_TENANT
from judgefuse.service.web.deps import GatewayDep, LabelsDep, ReviewQueueDep

router = APIRouter(tags=["review page"], include_in_schema=False)


class CrossSite(ServiceError):
    status = 403


def _signer(request: Request) -> SessionSigner:
    return request.app.state.review_sessions


def _session(request: Request) -> ReviewSession | None:
    if request.app.state.authenticator.open_mode:
        signed = _signer(request).read(request.cookies.get(COOKIE))
        return ReviewSession(DEFAULT_TENANT, signed.annotator if signed else DEFAULT_TENANT, 0.0)
    return _signer(request).read(request.cookies.get(COOKIE))


def _same_origin(request: Request) -> None:
    """Refuse a post whose ``Origin`` is another site (the SameSite cookie is the first guard)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin != own:
        raise CrossSite("cross-site post refused", fields=[("header.origin", "not this site")])


async def _form(request: Request) -> dict[str, str]:
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def _render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = request.app.state.templates.get_template(name).render(**context)
    return HTMLResponse(html, status_code=status, headers={
        "Cache-Control": "no-store",
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                   "script-src 'unsafe-inline'; form-action 'self'; "
                                   "frame-ancestors 'none'",
        "Referrer-Policy": "no-referrer",
    })


def _back(panel: str | None, done: int, skipped: str | None = None) -> RedirectResponse:
    pairs = (("panel", panel), ("done", done), ("skipped", skipped))
    query = urlencode({k: v for k, v in pairs if v})
    return RedirectResponse("/review" + (f"?{query}" if query else ""), status_code=303)


def _done(value: str | None) -> int:
    try:
        return max(0, min(int(value or 0), 10**9))
    except ValueError:
        return 0


@router.get("/review", response_class=HTMLResponse)
async def review_page(
    request: Request, gateway: GatewayDep, queue: ReviewQueueDep, panel: str | None = None,
    done: str | None = None, skipped: str | None = None,
) -> HTMLResponse:
    session = _session(request)
    if session is None:
        return _render(request, "review_login.html.j2", error=None, panel=panel or "")
    runtime = gateway.runtime(panel, field="query.panel")

    async def lease() -> list[Any]:
        return await queue.lease(session.tenant, runtime.name, n=1, annotator=session.annotator)

    leases = await lease()
    if leases and skipped and leases[0].record.id == skipped:
        # the item just skipped is back at its rank (the lowest): show the next one, if any,
        # and give the skipped one back again
        more = await lease()
        if more:
            await queue.release(session.tenant, skipped, session.annotator)
            leases = more
    stats = await queue.counts(session.tenant, runtime.name)
    item = item_out(leases[0], runtime) if leases else None
    return _render(
        request, "review.html.j2", tenant=session.tenant, annotator=session.annotator,
        panel=runtime.name, item=item, done=_done(done),
        queue_depth=sum(c.queued for c in stats.values()) + (1 if item else 0),
        labelled=sum(c.labelled for name, c in stats.items() if name != "none"),
        routed=sum(c.routed for name, c in stats.items() if name != "none"),
    )


@router.post("/review/login")
async def login(request: Request) -> Response:
    _same_origin(request)
    form = await _form(request)
    authenticator = request.app.state.authenticator
    panel = form.get("panel") or None
    browser = "text/html" in request.headers.get("accept", "")
    try:
        tenant = authenticator.tenant_for(None, form.get("api_key", "").strip() or None)
        annotator = annotator_name(tenant, form.get("annotator") or None, None, field="form.annotator")
    except (Unauthorized, FieldProblem) as exc:
        if not browser:  # API clients get the usual JSON error naming the field
            raise
        error = "invalid API key" if isinstance(exc, Unauthorized) else exc.fields[0][1]
        return _render(request, "review_login.html.j2", status=exc.status, error=error,
                       panel=panel or "")
    response = _back(panel, 0)
    response.set_cookie(
        COOKIE, _signer(request).issue(tenant, annotator), max_age=int(_signer(request).lifetime_s),
        path="/review", httponly=True, samesite="strict", secure=request.url.scheme == "https",
    )
    return response


@router.post("/review/logout")
async def logout(request: Request) -> Response:
    _same_origin(request)
    response = _back(None, 0)
    response.delete_cookie(COOKIE, path="/review")
    return response


@router.post("/review/label")
async def label(request: Request, labels: LabelsDep) -> Response:
    _same_origin(request)
    session = _session(request)
    if session is None:
        raise Unauthorized("log in at /review first", fields=[("cookie", "no session")])
    form = await _form(request)
    choice = form.get("label")
    if choice not in ("A", "B"):
        raise FieldProblem("form.label", "must be A or B")
    await labels.feedback(session.tenant, form.get("verdict_id", ""), cast(Letter, choice))
    return _back(form.get("panel") or None, _done(form.get("done")) + 1)


@router.post("/review/skip")
async def skip(request: Request, queue: ReviewQueueDep) -> Response:
    _same_origin(request)
    session = _session(request)
    if session is None:
        raise Unauthorized("log in at /review first", fields=[("cookie", "no session")])
    form = await _form(request)
    verdict_id = form.get("verdict_id", "")
    if verdict_id:
        await queue.release(session.tenant, verdict_id[:256], session.annotator)
    return _back(form.get("panel") or None, _done(form.get("done")), verdict_id[:256] or None)
