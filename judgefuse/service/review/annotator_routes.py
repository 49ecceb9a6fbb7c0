"""``/v1/annotators``: accounts over HTTP (docs/review-loop.md, 'Annotator accounts';
docs/console.md, 'Accounts and roles'): annotators, and with ``role`` the operators and viewers
who sign in to the console.

Operator-only (a tenant key; an annotator credential gets 403): ``POST /v1/annotators`` creates
an account and answers its credential, the only time it is ever shown; ``GET /v1/annotators``
lists the tenant's accounts (never a credential or its digest); ``POST
/v1/annotators/{annotator}/revoke`` ends a credential and its review sessions at once, and
``.../rotate`` issues a new credential for the same account (the old one ends). ``{annotator}``
is an account id or an active account's name.

``GET /v1/annotators/me`` is the annotator's own: its account and the labels it gave.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field

from judgefuse.service.errors import FieldProblem, Forbidden
from judgefuse.service.kernel.accounts import Role
from judgefuse.service.web.deps import AccountsDep, PanelsDep, ReviewerDep, TenantDep

router = APIRouter(prefix="/v1/annotators", tags=["annotators"])

AnnotatorRef = Annotated[str, Path(min_length=1, max_length=128)]


class AnnotatorCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    name: str = Field(min_length=1, max_length=128)
    """The annotator's name: leases, labels and the page show it (unique among active accounts)."""
    panels: list[str] | None = Field(default=None, min_length=1, max_length=256)
    """The panels this credential may lease and label in (default: every panel; annotators only)."""
    role: Role = "annotator"
    """``annotator`` (review only, over the API or on /review), ``operator`` (signs in to the
    console, /review and /metrics and acts there as the tenant's key would) or ``viewer`` (reads
    the console and /metrics). Operator and viewer credentials sign in to the pages only."""


class AnnotatorOut(BaseModel):
    id: str
    name: str
    tenant: str
    panels: list[str] | None
    created_at: float
    revoked_at: float | None
    active: bool
    role: Role = "annotator"


class AnnotatorCreated(AnnotatorOut):
    credential: str
    """Shown this once: give it to the annotator (only its SHA-256 is stored)."""


class AnnotatorList(BaseModel):
    annotators: list[AnnotatorOut]


class AnnotatorMe(BaseModel):
    annotator: AnnotatorOut
    labels: list[dict[str, Any]]
    """Labels given with this credential, newest first (the newest 500)."""


@router.post("", status_code=201)
async def create(
    body: AnnotatorCreate, tenant: TenantDep, accounts: AccountsDep, served: PanelsDep
) -> AnnotatorCreated:
    """Create an account credential for this tenant (shown once in the answer): an annotator,
    an operator or a viewer (``role``)."""
    for i, panel in enumerate(body.panels or ()):
        served.runtime(panel, field=f"body.panels.{i}")
    account, credential = await accounts.create(tenant, body.name, body.panels, role=body.role)
    return AnnotatorCreated(**account.out(), credential=credential)


@router.get("")
async def list_accounts(tenant: TenantDep, accounts: AccountsDep) -> AnnotatorList:
    """The tenant's annotator accounts, revoked ones included (no credential, no digest)."""
    return AnnotatorList(annotators=[AnnotatorOut(**a.out()) for a in await accounts.accounts(tenant)])


@router.get("/me")
async def me(principal: ReviewerDep, accounts: AccountsDep) -> AnnotatorMe:
    """The calling annotator's account and the labels it gave (an annotator credential only)."""
    if principal.account is None:
        raise Forbidden("GET /v1/annotators/me is for annotator credentials: a tenant key lists "
                        "accounts with GET /v1/annotators",
                        fields=[("header.authorization", "not an annotator credential")])
    return AnnotatorMe(annotator=AnnotatorOut(**principal.account.out()),
                       labels=await accounts.history(principal.account))


@router.post("/{annotator}/revoke")
async def revoke(annotator: AnnotatorRef, tenant: TenantDep, accounts: AccountsDep) -> AnnotatorOut:
    """Revoke a credential at once (its review sessions end too); idempotent."""
    return AnnotatorOut(**(await accounts.revoke(tenant, annotator)).out())


@router.post("/{annotator}/rotate")
async def rotate(annotator: AnnotatorRef, tenant: TenantDep, accounts: AccountsDep) -> AnnotatorCreated:
    """A new credential for the same account (shown once); the old one and its sessions end."""
    if annotator == "me":
        raise FieldProblem("path.annotator", "'me' is not an account")
    account, credential = await accounts.rotate(tenant, annotator)
    return AnnotatorCreated(**account.out(), credential=credential)
