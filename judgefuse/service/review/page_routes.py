"""``/review``: the annotator page. Server-rendered (Jinja2, autoescaped), no build step.

One item at a time from the panel's review queue (leased to the annotator like ``GET
/v1/review/next``, random order): the question and the two answers side by side, rendered
as sanitised Markdown (:mod:`.rendering`), keys ``a`` / ``b`` / ``t`` (tie) / ``x`` (both
bad) to label with an optional comment (``POST /v1/feedback``'s path), ``u`` to undo the last
label within a minute (:mod:`.undo`) and ``s`` to skip (the lease is released), the progress
of this session and the queue depth (a skipped item goes back to the queue at its
rank; the page then shows the next one rather than the same item again). The judges' verdict is not shown unless the
panel opts in (``review_shows_verdict``). A reload, a second tab or the back button show the
item the annotator already holds: one lease per annotator and panel
(:meth:`~judgefuse.service.review.queue.ReviewQueue.held_item`).

Auth and CSRF live in :mod:`judgefuse.service.web.sessions` and
:mod:`judgefuse.service.review.session`: a credential is posted once to the one sign-in page
(``/signin``; ``/review/login`` is kept) and exchanged for a session cookie bound to it
server-side; the credential never appears in the page or a URL; every post passes the origin
checks and carries the session's form token (``csrf``). Who may review: an annotator or operator
account (as itself, an annotator within its panels), or the tenant key while the tenant has no
such account; a viewer or the metrics token is refused (403). In open mode (no keys configured)
no sign-in is needed (the first visit sets the session); the annotator name is given at sign-in
(default: the tenant's name).

The panel picker: every panel the session may use, with the items waiting in each; a visit
without ``?panel=`` lands on the first panel with work (else the first panel).
"""

from __future__ import annotations

import time
from typing import Any, cast
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from judgefuse.judges.types import LABEL_KINDS, spelled
from judgefuse.service.errors import FieldProblem, Forbidden, Unauthorized
from judgefuse.service.ledger import label_kind_counts
from judgefuse.service.review.annotator_labels import label_as
from judgefuse.service.review.deps import LabelsDep, ReviewQueueDep
from judgefuse.service.review.queue import item_out
from judgefuse.service.review.rendering import render_text
from judgefuse.service.review.session import TENANT_KEY_REFUSED, sign_in, sign_out
from judgefuse.service.review.undo import UNDO_WINDOW_S, UndoSigner
from judgefuse.service.storage import COMMENT_MAX_CHARS, LabelKind
from judgefuse.service.web.auth import Principal
from judgefuse.service.web.deps import AccountsDep, PanelsDep
from judgefuse.service.web.sessions import (
    ADMIN,
    OPEN,
    PageRefused,
    PageSession,
    SessionSigner,
    SignInRequired,
    check_post,
    clear_session_cookie,
    current_session,
    is_browser,
    open_session,
    posted_session,
    read_form,
    render_page,
    set_session_cookie,
    signin_page,
)

router = APIRouter(tags=["review page"], include_in_schema=False)


def _signer(request: Request) -> SessionSigner:
    return request.app.state.review_sessions


async def _reviewer(request: Request, session: PageSession) -> PageSession:
    """The session if its role may review: an annotator or operator account, a tenant key while
    the tenant has no such account, open mode; else 403 (a page saying where to go)."""
    role = session.role
    browser = "text/html" in request.headers.get("accept", "")
    if role in ("viewer", ADMIN):
        who = "a viewer account" if role == "viewer" else "the metrics token"
        raise PageRefused(f"{who} reads the console; reviewing needs an annotator or operator "
                          "account", problem=f"{role} session", browser=browser, home="/console")
    if session.account is None and session.bound != OPEN and \
            await request.app.state.gateway.annotators.any(session.tenant):
        raise PageRefused(TENANT_KEY_REFUSED, problem="tenant key session", browser=browser,
                          home="/signin?next=/review")
    return session


"""The page's answers (docs/design.md, 'The review loop'): ties and both-bad are stored and
counted as such, outside A/B accuracy and calibration."""


def _undo_signer(request: Request) -> UndoSigner:
    """The app's undo-token signer, made once from ``review_session_secret``."""
    signer = getattr(request.app.state, "review_undo", None)
    if signer is None:
        secret = request.app.state.settings.review.review_session_secret
        signer = UndoSigner(secret.get_secret_value().encode() if secret is not None else None)
        request.app.state.review_undo = signer
    return signer


def _rendered(item: Any) -> dict[str, Any]:
    """The item's question and answers as sanitised HTML (:mod:`.rendering`)."""
    return {field: render_text(getattr(item, field)) for field in ("question", "answer_a", "answer_b")}


def _back(
    panel: str | None, done: int, skipped: str | None = None, undo: str | None = None
) -> RedirectResponse:
    pairs = (("panel", panel), ("done", done), ("skipped", skipped), ("undo", undo))
    query = urlencode({k: v for k, v in pairs if v})
    return RedirectResponse("/review" + (f"?{query}" if query else ""), status_code=303)


def _waiting(counts: dict[str, Any]) -> int:
    """Items waiting in a panel's queue (not leased to anyone)."""
    return sum(c.queued for c in counts.values())


def _done(value: str | None) -> int:
    try:
        return max(0, min(int(value or 0), 10**9))
    except ValueError:
        return 0


@router.get("/review", response_class=HTMLResponse)
async def review_page(
    request: Request, served: PanelsDep, queue: ReviewQueueDep, panel: str | None = None,
    done: str | None = None, skipped: str | None = None, undo: str | None = None,
) -> HTMLResponse:
    session = await current_session(request)
    new_cookie = None
    if session is None and request.app.state.authenticator.open_mode:
        session, new_cookie = open_session(request)
    if session is None:  # a browser: the sign-in page; an API client: the JSON 401 as everywhere
        here = "/review" + (f"?{urlencode({'panel': panel})}" if panel else "")
        raise SignInRequired("the review page needs a signed-in session (POST /signin)", next_url=here,
                             browser=is_browser(request))
    session = await _reviewer(request, session)
    allowed = [name for name in served.panels if session.may_use(name)]
    waiting: dict[str, int] = {}
    if len(allowed) > 1 or panel is None:  # the picker's counts (one read per panel)
        for name in allowed:
            waiting[name] = _waiting(await queue.counts(session.tenant, name))
    if panel is None and allowed:  # land on the first panel with work, else the first one
        panel = next((name for name in allowed if waiting.get(name)), allowed[0])
    runtime = served.runtime(panel, field="query.panel")
    if not session.may_use(runtime.name):
        raise Forbidden(f"annotator {session.annotator!r} may not use panel {runtime.name!r}",
                        fields=[("query.panel", "not one of this annotator's panels")])
    held = await queue.held_item(session.tenant, runtime.name, session.annotator,
                                 skipped=skipped[:256] if skipped else None)
    stats = await queue.counts(session.tenant, runtime.name)
    item = item_out(held, runtime) if held else None
    waiting[runtime.name] = _waiting(stats) + (1 if item else 0)  # as "remaining": the held item too
    picker = [{"name": name, "waiting": waiting.get(name, 0), "here": name == runtime.name}
              for name in allowed] if len(allowed) > 1 else []
    last = _undo_signer(request).read(undo, session.tenant, session.annotator)
    kinds = await label_kind_counts(queue.storage, session.tenant, runtime.name)
    response = render_page(
        request, "review.html.j2", tenant=session.tenant, annotator=session.annotator,
        panel=runtime.name, item=item, done=_done(done), csrf=_signer(request).form_token(session),
        rendered=_rendered(item) if item else None, comment_max=COMMENT_MAX_CHARS,
        undo=undo if last else None, undo_left=int(last.seconds_left()) if last else 0,
        ties=kinds["tie"], both_bad=kinds["both_bad"],
        queue_depth=waiting[runtime.name],
        labelled=sum(c.labelled for name, c in stats.items() if name != "none"),
        routed=sum(c.routed for name, c in stats.items() if name != "none"),
        picker=picker, elsewhere=[p for p in picker if p["waiting"] and not p["here"]],
    )
    if new_cookie is not None:
        set_session_cookie(request, response, new_cookie)
    return response


@router.post("/review/login")
async def login(request: Request) -> Response:
    """The review page's own sign-in (kept from before ``/signin``): a credential that may
    review, then back to ``/review``."""
    check_post(request)
    form = await read_form(request)
    panel = form.get("panel") or None
    browser = "text/html" in request.headers.get("accept", "")
    try:
        cookie, _role = await sign_in(request, form, for_review=True)
    except (Unauthorized, Forbidden, FieldProblem) as exc:
        if not browser:  # API clients get the usual JSON error naming the field
            raise
        error = exc.fields[0][1] if isinstance(exc, FieldProblem) else exc.message
        return signin_page(request, next_url="/review" + (f"?{urlencode({'panel': panel})}" if panel else ""),
                           error=error, status=exc.status)
    response = _back(panel, 0)
    set_session_cookie(request, response, cookie)
    return response


@router.post("/review/logout")
async def logout(request: Request) -> Response:
    await sign_out(request, await read_form(request))
    response = _back(None, 0)
    clear_session_cookie(response)
    return response


@router.post("/review/label")
async def label(request: Request, labels: LabelsDep, accounts: AccountsDep) -> Response:
    form = await read_form(request)
    session = await _reviewer(request, await posted_session(request, form))
    choice = form.get("label")
    if choice not in LABEL_KINDS:
        raise FieldProblem("form.label", f"must be {spelled(LABEL_KINDS)}")
    comment = form.get("comment", "").strip() or None
    if comment is not None and len(comment) > COMMENT_MAX_CHARS:
        raise FieldProblem("form.comment", f"at most {COMMENT_MAX_CHARS} characters")
    result = await label_as(Principal(session.tenant, session.account), labels, accounts,
                            form.get("verdict_id", ""), cast(LabelKind, choice), comment,
                            name=session.annotator)
    token = (_undo_signer(request).issue(session.tenant, session.annotator, result.verdict_id,
                                         result.labelled_at)
             if result.status != "unchanged" and result.labelled_at is not None else None)
    return _back(form.get("panel") or None, _done(form.get("done")) + 1, undo=token)


@router.post("/review/undo")
async def undo(
    request: Request, labels: LabelsDep, queue: ReviewQueueDep, accounts: AccountsDep
) -> Response:
    """Take back this session's last label (within ``UNDO_WINDOW_S``): the item shown now is
    given back and the undone one is held again, so the page shows it for a new answer."""
    form = await read_form(request)
    session = await _reviewer(request, await posted_session(request, form))
    last = _undo_signer(request).read(form.get("undo"), session.tenant, session.annotator)
    if last is None:
        raise FieldProblem("form.undo", f"nothing to undo: a label can be taken back within "
                                        f"{UNDO_WINDOW_S:g} s, by the annotator who gave it")
    panel = form.get("panel") or None
    lease_s = request.app.state.settings.review.review_lease_s
    shown = form.get("verdict_id", "")[:256]
    if shown:
        await queue.release(session.tenant, shown, session.annotator)
    record = await labels.undo(session.tenant, last.verdict_id, labelled_at=last.labelled_at,
                               annotator=session.annotator, lease_s=lease_s)
    if record is None:
        raise FieldProblem("form.undo", "that label was changed since: nothing undone")
    await queue.hold(session.tenant, record.panel, session.annotator, record.id,
                     time.time() + lease_s)
    if session.account is not None:  # the annotator's own history says it was taken back
        await accounts.record_label(session.account, record.id, record.panel, "", "undone")
    return _back(panel, max(0, _done(form.get("done")) - 1))


@router.post("/review/skip")
async def skip(request: Request, queue: ReviewQueueDep) -> Response:
    form = await read_form(request)
    session = await _reviewer(request, await posted_session(request, form))
    verdict_id = form.get("verdict_id", "")
    if verdict_id:
        await queue.release(session.tenant, verdict_id[:256], session.annotator)
    return _back(form.get("panel") or None, _done(form.get("done")), verdict_id[:256] or None)
